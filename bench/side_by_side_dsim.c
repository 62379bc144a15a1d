/* dsim's half of bench/warp-side-by-side: runs a scene given as a text file
 * (particles with rest and start positions, velocity and mass, tets,
 * triangles, bending edges,
 * materials, dt, substeps; written by bench/warp_side_by_side.py from the
 * Warp model so both engines simulate the same mesh) forward and forward +
 * backward, and prints timings and the agreement quantities:
 *
 *   com X Y Z          centre of mass at the last substep
 *   loss L             L = sum_i |x_i(T)|^2 / N
 *   grad_v0 G          |dL/dv0| (Frobenius norm over every particle)
 *   forward T1 T2 ...  seconds per run (each repetition)
 *   fwdbwd  T1 T2 ...
 *   elements E         tets + triangles + bending edges
 *   xT FILE            final positions (one line per particle) into FILE
 *
 *   side_by_side_dsim SCENE THREADS REPS [XT_FILE]
 *   side_by_side_dsim --grid NX NY NZ CELL DENSITY K_MU K_LAMBDA K_DAMP DT SUBSTEPS THREADS REPS
 *     (the second form: dsim's own tet grid builder, timings only)
 *   side_by_side_dsim --traj SCENE THREADS REPS TRAJ_FILE
 *     (the third form, for bench/newton-compare: forward only, REPS timed
 *     runs after a warm-up, then one more run that writes the positions at
 *     every substep, the start included, to TRAJ_FILE as (SUBSTEPS + 1) x
 *     particles x 3 doubles in native byte order; "-": no trajectory)
 *
 * A scene file may end with a line "integrator implicit NEWTON_TOL
 * NEWTON_MAX_ITER": backward Euler with those solver settings (the others
 * at their defaults) instead of the default semi-implicit step. A particle
 * of mass 0 is fixed. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dsim/engine.h"
#include "bench/bench.h"

#define MAXREP 16

/* BENCH_CLOCK=cpu: process CPU time instead of wall time (on one thread,
 * less inflated by a shared machine's other load) */
static int g_cpu_clock = 0;
static double tick(void) {
  if (!g_cpu_clock) return now();
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void die(const char* what, const char* msg) {
  fprintf(stderr, "side_by_side_dsim: %s: %s\n", what, msg ? msg : "");
  exit(1);
}

static int expect(FILE* f, const char* word) {
  char w[64];
  if (fscanf(f, "%63s", w) != 1 || strcmp(w, word)) {
    fprintf(stderr, "side_by_side_dsim: scene file: expected \"%s\", got \"%s\"\n", word, w);
    exit(1);
  }
  return 0;
}

/* The scene file's model (format: see bench/warp_side_by_side.py write_scene). */
static dsModel* read_scene(const char* path, int* T, int* nelem) {
  FILE* f = fopen(path, "r");
  if (!f) die(path, "cannot open");
  double dt, g[3], tet[3], tri[3], bend[2];
  int n, ntet, ntri, nbend;
  expect(f, "dt");
  if (fscanf(f, "%lf", &dt) != 1) die(path, "dt");
  expect(f, "substeps");
  if (fscanf(f, "%d", T) != 1 || *T < 1) die(path, "substeps");
  expect(f, "gravity");
  if (fscanf(f, "%lf %lf %lf", &g[0], &g[1], &g[2]) != 3) die(path, "gravity");
  expect(f, "tet_material");
  if (fscanf(f, "%lf %lf %lf", &tet[0], &tet[1], &tet[2]) != 3) die(path, "tet_material");
  expect(f, "tri_material");
  if (fscanf(f, "%lf %lf %lf", &tri[0], &tri[1], &tri[2]) != 3) die(path, "tri_material");
  expect(f, "bend_material");
  if (fscanf(f, "%lf %lf", &bend[0], &bend[1]) != 2) die(path, "bend_material");
  dsBuilder* b;
  if (ds_builder_create(&b)) die("builder", "out of memory");
  expect(f, "particles");
  if (fscanf(f, "%d", &n) != 1 || n < 1) die(path, "particles");
  /* rest position (the elements' rest shapes), start position, velocity, mass */
  dsReal* start = (dsReal*)calloc(3 * (size_t)n, sizeof(dsReal));
  if (!start) die("particles", "out of memory");
  for (int i = 0; i < n; i++) {
    double p[10];
    for (int k = 0; k < 10; k++)
      if (fscanf(f, "%lf", &p[k]) != 1) die(path, "particle line");
    const dsReal x[3] = {(dsReal)p[0], (dsReal)p[1], (dsReal)p[2]}, v[3] = {(dsReal)p[6], (dsReal)p[7], (dsReal)p[8]};
    for (int k = 0; k < 3; k++) start[3 * i + k] = (dsReal)p[3 + k];
    if (ds_builder_add_particle(b, x, v, (dsReal)p[9]) < 0) die("particle", ds_builder_last_error(b));
  }
  const dsTetMaterial tm = {(dsReal)tet[0], (dsReal)tet[1], (dsReal)tet[2]};
  const dsTriMaterial rm = {(dsReal)tri[0], (dsReal)tri[1], (dsReal)tri[2]};
  const dsBendMaterial bm = {(dsReal)bend[0], (dsReal)bend[1]};
  expect(f, "tets");
  if (fscanf(f, "%d", &ntet) != 1 || ntet < 0) die(path, "tets");
  for (int e = 0; e < ntet; e++) {
    int q[4];
    if (fscanf(f, "%d %d %d %d", &q[0], &q[1], &q[2], &q[3]) != 4) die(path, "tet line");
    if (ds_builder_add_tet(b, q[0], q[1], q[2], q[3], &tm) < 0) die("tet", ds_builder_last_error(b));
  }
  expect(f, "tris");
  if (fscanf(f, "%d", &ntri) != 1 || ntri < 0) die(path, "tris");
  for (int e = 0; e < ntri; e++) {
    int q[3];
    if (fscanf(f, "%d %d %d", &q[0], &q[1], &q[2]) != 3) die(path, "tri line");
    if (ds_builder_add_tri(b, q[0], q[1], q[2], &rm) < 0) die("tri", ds_builder_last_error(b));
  }
  expect(f, "bends");
  if (fscanf(f, "%d", &nbend) != 1 || nbend < 0) die(path, "bends");
  for (int e = 0; e < nbend; e++) {
    int q[4];
    if (fscanf(f, "%d %d %d %d", &q[0], &q[1], &q[2], &q[3]) != 4) die(path, "bend line");
    if (ds_builder_add_bend(b, q[0], q[1], q[2], q[3], &bm) < 0) die("bend", ds_builder_last_error(b));
  }
  char word[32];
  if (fscanf(f, "%31s", word) == 1) { /* optional: the integrator */
    double tol;
    int maxit;
    char kind[32];
    if (strcmp(word, "integrator") || fscanf(f, "%31s %lf %d", kind, &tol, &maxit) != 3 || strcmp(kind, "implicit"))
      die(path, "expected \"integrator implicit NEWTON_TOL NEWTON_MAX_ITER\" after the bends");
    dsSolverSettings s = ds_default_solver_settings();
    s.newton_tol = (dsReal)tol;
    s.newton_max_iter = maxit;
    if (ds_builder_set_integrator(b, DS_INTEGRATOR_IMPLICIT) || ds_builder_set_solver(b, &s))
      die("integrator", ds_builder_last_error(b));
  }
  fclose(f);
  ds_builder_set_gravity(b, (dsReal)g[0], (dsReal)g[1], (dsReal)g[2]);
  ds_builder_set_dt(b, (dsReal)dt);
  ds_builder_set_ground(b, NULL); /* free flight */
  dsModel* m;
  if (ds_builder_finalize(b, &m)) die("finalize", ds_builder_last_error(b));
  ds_builder_free(b);
  if (ds_model_set_param(m, "initial_position", start, 3 * n)) die("initial_position", ds_model_last_error(m));
  free(start);
  *nelem = ntet + ntri + nbend;
  return m;
}

/* One episode; with back, the backward from L = sum |x_i(T)|^2 / N. */
static double run(const dsModel* m, dsData* d, dsGrad* g, int T, int back, dsReal* adj) {
  const double t0 = tick();
  ds_data_reset(m, d);
  for (int t = 0; t < T; t++)
    if (ds_step(m, d)) die("step", ds_data_last_error(d));
  if (back) {
    const int n3 = 3 * m->nparticle;
    for (int i = 0; i < n3; i++) adj[i] = 2 * d->x[i] / m->nparticle;
    ds_grad_zero(g);
    if (ds_backward(m, d, g, adj, NULL, NULL, NULL)) die("backward", ds_data_last_error(d));
  }
  return tick() - t0;
}

static void bench(dsModel* m, int T, int nelem, int threads, int reps, const char* xt_path) {
  dsDataDef dd = ds_default_data_def();
  dd.max_substeps = T;
  dd.act_records = 1;
  dd.fext_records = 1;
  dsData* d;
  dsGrad* g;
  if (ds_data_create(m, &dd, &d)) die("data", "cannot create");
  if (ds_grad_create(m, &g)) die("grad", "cannot create");
  dsReal* adj = (dsReal*)calloc(3 * (size_t)m->nparticle, sizeof(dsReal));
  if (!adj) die("adjoint", "out of memory");
  ds_set_num_threads(threads);
  double f[MAXREP], fb[MAXREP];
  run(m, d, g, T, 1, adj); /* warm up */
  for (int r = 0; r < reps; r++) {
    f[r] = run(m, d, g, T, 0, adj);
    fb[r] = run(m, d, g, T, 1, adj);
  }
  /* the last run was forward + backward: its final state and gradient */
  double c[3] = {0, 0, 0}, M = 0, L = 0, G = 0;
  for (int i = 0; i < m->nparticle; i++) {
    M += m->mass[i];
    for (int k = 0; k < 3; k++) {
      c[k] += m->mass[i] * d->x[3 * i + k];
      L += d->x[3 * i + k] * d->x[3 * i + k];
    }
  }
  dsReal* gv = NULL;
  int cnt = 0;
  if (ds_grad_param(g, "initial_velocity", &gv, &cnt) == 0)
    for (int i = 0; i < cnt; i++) G += gv[i] * gv[i];
  printf("threads %d\nelements %d\nparticles %d\nsubsteps %d\n", threads, nelem, m->nparticle, T);
  printf("com %.17g %.17g %.17g\nloss %.17g\ngrad_v0 %.17g\n", c[0] / M, c[1] / M, c[2] / M, L / m->nparticle,
         sqrt(G));
  printf("forward");
  for (int r = 0; r < reps; r++) printf(" %.6f", f[r]);
  printf("\nfwdbwd");
  for (int r = 0; r < reps; r++) printf(" %.6f", fb[r]);
  printf("\n");
  if (xt_path) {
    FILE* o = fopen(xt_path, "w");
    if (!o) die(xt_path, "cannot write");
    for (int i = 0; i < m->nparticle; i++)
      fprintf(o, "%.17g %.17g %.17g\n", d->x[3 * i], d->x[3 * i + 1], d->x[3 * i + 2]);
    fclose(o);
  }
  free(adj);
  ds_grad_free(g);
  ds_data_free(d);
}

/* Forward only (bench/newton-compare): REPS timed runs, then the trajectory. */
static void traj(const dsModel* m, int T, int threads, int reps, const char* path) {
  dsDataDef dd = ds_default_data_def();
  dd.max_substeps = T;
  dd.act_records = 1;
  dd.fext_records = 1;
  dsData* d;
  if (ds_data_create(m, &dd, &d)) die("data", "cannot create");
  ds_set_num_threads(threads);
  double f[MAXREP];
  for (int r = -1; r < reps; r++) { /* r = -1: warm-up */
    const double t0 = tick();
    ds_data_reset(m, d);
    for (int t = 0; t < T; t++)
      if (ds_step(m, d)) die("step", ds_data_last_error(d));
    if (r >= 0) f[r] = tick() - t0;
  }
  FILE* o = strcmp(path, "-") ? fopen(path, "wb") : NULL; /* "-": timings only */
  if (!o && strcmp(path, "-")) die(path, "cannot write");
  const size_t n3 = 3 * (size_t)m->nparticle;
  double* row = (double*)malloc(n3 * sizeof(double));
  if (!row) die("trajectory", "out of memory");
  ds_data_reset(m, d);
  for (int t = 0; o && t <= T; t++) {
    if (t > 0 && ds_step(m, d)) die("step", ds_data_last_error(d));
    for (size_t i = 0; i < n3; i++) row[i] = (double)d->x[i];
    if (fwrite(row, sizeof(double), n3, o) != n3) die(path, "write failed");
  }
  free(row);
  if (o && fclose(o)) die(path, "write failed");
  printf("threads %d\nparticles %d\nsubsteps %d\nforward", threads, m->nparticle, T);
  for (int r = 0; r < reps; r++) printf(" %.6f", f[r]);
  printf("\n");
  ds_data_free(d);
}

int main(int argc, char** argv) {
  const char* ck = getenv("BENCH_CLOCK");
  g_cpu_clock = ck && !strcmp(ck, "cpu");
  if (argc >= 2 && !strcmp(argv[1], "--grid")) {
    if (argc != 14) die("usage", "--grid NX NY NZ CELL DENSITY K_MU K_LAMBDA K_DAMP DT SUBSTEPS THREADS REPS");
    const int nx = atoi(argv[2]), ny = atoi(argv[3]), nz = atoi(argv[4]);
    const double cell = atof(argv[5]), density = atof(argv[6]);
    const dsTetMaterial tm = {(dsReal)atof(argv[7]), (dsReal)atof(argv[8]), (dsReal)atof(argv[9])};
    const int T = atoi(argv[11]), threads = atoi(argv[12]);
    int reps = atoi(argv[13]);
    if (reps < 1 || reps > MAXREP) reps = 3;
    dsBuilder* b;
    if (ds_builder_create(&b)) die("builder", "out of memory");
    const dsReal o[3] = {0, 1, 0}, v[3] = {0, 0, 0};
    if (ds_builder_add_tet_grid(b, nx, ny, nz, (dsReal)cell, (dsReal)cell, (dsReal)cell, o, (dsReal)density, v,
                                &tm) < 0)
      die("tet grid", ds_builder_last_error(b));
    ds_builder_set_gravity(b, 0, -9.8, 0);
    ds_builder_set_dt(b, (dsReal)atof(argv[10]));
    ds_builder_set_ground(b, NULL);
    dsModel* m;
    if (ds_builder_finalize(b, &m)) die("finalize", ds_builder_last_error(b));
    ds_builder_free(b);
    bench(m, T, m->ntet, threads, reps, NULL);
    ds_model_free(m);
    return 0;
  }
  if (argc >= 2 && !strcmp(argv[1], "--traj")) {
    if (argc != 6) die("usage", "--traj SCENE THREADS REPS TRAJ_FILE");
    int T = 0, nelem = 0, reps = atoi(argv[4]);
    dsModel* m = read_scene(argv[2], &T, &nelem);
    if (reps < 1 || reps > MAXREP) reps = 3;
    traj(m, T, atoi(argv[3]), reps, argv[5]);
    ds_model_free(m);
    return 0;
  }
  if (argc < 4) die("usage", "SCENE THREADS REPS [XT_FILE]  |  --grid ...  |  --traj ...");
  int T = 0, nelem = 0;
  dsModel* m = read_scene(argv[1], &T, &nelem);
  int reps = atoi(argv[3]);
  if (reps < 1 || reps > MAXREP) reps = 3;
  bench(m, T, nelem, atoi(argv[2]), reps, argc > 4 ? argv[4] : NULL);
  ds_model_free(m);
  return 0;
}

/* dsim's half of the side by side with PhiFlow (bench/phiflow-compare,
 * docs/fluids.md "Side by side with PhiFlow"): a 2-D buoyant plume in a
 * closed 1 m box, the setup bench/phiflow_compare.py builds in PhiFlow.
 *
 *   bench_fluid_phiflow N ADVECTION TOLERANCE STEPS REPS [DENSITY_FILE]
 *     N x N cells (dx = 1/N m), or N x N x N with N written "N^3" (the 3-D
 *     plume: a 1 m cube, y up, the source box [0.4, 0.6] along z too), ADVECTION "sl" (semi-Lagrangian) or "mc"
 *     (MacCormack), the pressure solve's relative tolerance, STEPS steps of
 *     dt = dx s. Prints one line of JSON: forward and forward + backward
 *     time per step (medians of REPS rollouts), the PCG iterations of the
 *     last solve, the largest CFL number dt max|u| / dx over the rollout, and
 *     the gradient of L = sum_c w_c rho_c (w_c = (c mod 7) / 7, on the final
 *     density) with respect to the source's density rate and the norm of its
 *     gradient with respect to the initial face velocities. With
 *     DENSITY_FILE, the final density as N*N (N*N*N) little-endian doubles,
 *     cell (i, j, k) at i + N j + N^2 k (x fastest, y up).
 *   bench_fluid_phiflow advect N sl|mc IN_FILE OUT_FILE
 *     One advection of a given state and nothing else (no sources, forces
 *     or projection; the one-step comparison of docs/fluids.md, "MacCormack
 *     against PhiFlow"): IN_FILE holds the face velocities (nvel, x faces
 *     then y faces, each x fastest; the (N+1) x N x-faces include the
 *     walls') and the density (N*N) as little-endian doubles, dt = dx =
 *     1/N; OUT_FILE gets the advected velocity and density, same layout.
 *     Calls the engine's own advection (engine/fluid_advect.h).
 *   bench_fluid_phiflow  (no arguments; `make bench`)
 *     128^2, semi-Lagrangian, tolerance 1e-5, 50 steps, 3 repetitions.
 *
 * The plume (the same numbers are in phiflow_compare.py): closed walls on
 * every side; buoyancy alpha = 2 m/s^2 per unit density along +y, no
 * temperature, no gravity; one source, the cells whose centres lie in
 * x in [0.4, 0.6], y in [0.04, 0.12] m, gaining 5 units of density per
 * second, its faces set to an upward 0.5 m/s before the projection.
 * Threads: OMP_NUM_THREADS. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "dsim/fluid.h"
/* the engine's advection, for the advect mode; its adjoints stay unused */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "engine/fluid_advect.h"
#pragma GCC diagnostic pop

static void die(const char* what, const char* msg) {
  fprintf(stderr, "bench_fluid_phiflow: %s: %s\n", what, msg);
  exit(1);
}

static void* xmalloc(size_t n) {
  void* p = malloc(n ? n : 1);
  if (!p) die("malloc", "out of memory");
  return p;
}

static dsFluidDef plume(int n, int dim3, int maccormack, double tol) {
  dsFluidDef def = ds_fluid_default_def();
  def.n[0] = def.n[1] = n;
  def.n[2] = dim3 ? n : 1;
  def.dx = 1.0 / n;
  def.dt = 1.0 / n; /* dt = dx: CFL 1 at 1 m/s */
  def.advection = maccormack ? DS_FLUID_MACCORMACK : DS_FLUID_SEMI_LAGRANGIAN;
  def.alpha = 2;
  def.beta = 0;
  def.up_axis = 1;
  def.tolerance = tol;
  def.max_iterations = 100000; /* unpreconditioned CG on the other side needs O(n); MIC(0) far fewer */
  def.nsource = 1;
  dsFluidSource* s = &def.source[0];
  s->box = dim3 ? (dsFluidBox){{0.4, 0.04, 0.4}, {0.6, 0.12, 0.6}} : (dsFluidBox){{0.4, 0.04, 0}, {0.6, 0.12, 1}};
  s->density_rate = 5;
  s->set_velocity = 1;
  s->velocity[1] = 0.5;
  return def;
}

/* largest dt |u_f| / dx over the faces */
static double cfl(const dsFluidModel* m, const dsFluidData* d) {
  const dsFluidDef* def = ds_fluid_def(m);
  const double* u = ds_fluid_velocity(d);
  double mx = 0;
  for (int f = 0; f < ds_fluid_nvel(m); f++) mx = fmax(mx, fabs(u[f]));
  return mx * def->dt / def->dx;
}

static void run(int n, int dim3, int mc, double tol, int steps, int reps, const char* out) {
  dsFluidDef def = plume(n, dim3, mc, tol);
  char err[512];
  dsFluidModel* m;
  if (ds_fluid_model_create(&def, &m, err, sizeof err)) die("model", err);
  dsFluidData* d;
  if (ds_fluid_data_create(m, steps, 0, &d)) die("data", "out of memory");
  const int nc = ds_fluid_ncell(m), nv = ds_fluid_nvel(m), np = ds_fluid_nparam(m);
  const int rate = ds_fluid_param_index(m, "source.0.density_rate");
  double* w = xmalloc(sizeof(double) * (size_t)nc);
  for (int c = 0; c < nc; c++) w[c] = (double)(c % 7) / 7;
  dsFluidGrad g;
  memset(&g, 0, sizeof g);
  g.velocity0 = xmalloc(sizeof(double) * (size_t)nv);
  g.param = xmalloc(sizeof(double) * (size_t)np);
  double* tf = xmalloc(sizeof(double) * (size_t)reps);
  double* tb = xmalloc(sizeof(double) * (size_t)reps);
  double maxcfl = 0, loss = 0;
  int iters = 0;
  for (int r = 0; r < reps; r++) {
    ds_fluid_reset(m, d, NULL, NULL, NULL);
    double t0 = now();
    for (int t = 0; t < steps; t++) {
      if (ds_fluid_step(m, d, NULL)) die("step", ds_fluid_last_error(d));
      if (r == 0) maxcfl = fmax(maxcfl, cfl(m, d)); /* a scan of the faces, rep 0 only */
    }
    double t1 = now();
    if (ds_fluid_backward(m, d, NULL, w, NULL, &g)) die("backward", ds_fluid_last_error(d));
    double t2 = now();
    tf[r] = (t1 - t0) / steps;
    tb[r] = (t2 - t0) / steps;
  }
  ds_fluid_solver_stats(d, &iters, NULL);
  const double* rho = ds_fluid_density(d);
  double gv = 0, mass = 0;
  for (int c = 0; c < nc; c++) loss += w[c] * rho[c], mass += rho[c];
  for (int f = 0; f < nv; f++) gv += g.velocity0[f] * g.velocity0[f];
  if (out) {
    FILE* fp = fopen(out, "wb");
    if (!fp || fwrite(rho, sizeof(double), (size_t)nc, fp) != (size_t)nc || fclose(fp)) die(out, "cannot write");
  }
  /* with reps > 1 the first rollout (page faults, cold caches) is one of the medians' samples, as on the other side */
  printf("{\"n\": %d, \"dim\": %d, \"solver\": \"%s\", \"advection\": \"%s\", \"tolerance\": %g, \"steps\": %d, \"reps\": %d, \"dt\": %.17g, "
         "\"forward_ms\": %.4f, \"fwdbwd_ms\": %.4f, \"pcg_iterations_last\": %d, \"max_cfl\": %.4f, "
         "\"loss\": %.17g, \"mass\": %.17g, \"dloss_drate\": %.17g, \"dloss_dvel0_norm\": %.17g}\n",
         n, dim3 ? 3 : 2, ds_fluid_uses_fft(m) ? "fft" : "pcg", mc ? "mc" : "sl", tol, steps, reps, def.dt, 1e3 * median(tf, reps), 1e3 * median(tb, reps), iters, maxcfl,
         loss, mass, g.param[rate], sqrt(gv));
  free(w);
  free(g.velocity0);
  free(g.param);
  free(tf);
  free(tb);
  ds_fluid_data_free(d);
  ds_fluid_model_free(m);
}

/* advect mode (header): one advection of the file's state by its velocity */
static void advect_once(int n, int mc, const char* in, const char* out) {
  dsFluidDef def = plume(n, 0, mc, 1e-5);
  def.nsource = 0;
  char err[512];
  dsFluidModel* m;
  if (ds_fluid_model_create(&def, &m, err, sizeof err)) die("model", err);
  const size_t nv = (size_t)m->nvel, nc = (size_t)m->ncell, ns = nv + nc;
  double *s0 = xmalloc(sizeof(double) * ns), *s1 = xmalloc(sizeof(double) * ns);
  double *hat = xmalloc(sizeof(double) * ns), *back = xmalloc(sizeof(double) * ns);
  FILE* fp = fopen(in, "rb");
  if (!fp || fread(s0, sizeof(double), ns, fp) != ns) die(in, "cannot read nvel + ncell doubles");
  fclose(fp);
  for (int a = 0; a < 2; a++) {
    const FGrid* g = &m->faceg[a];
    if (mc) mc_fwd(m, g, s0 + m->foff[a], s0, s1 + m->foff[a], hat, back);
    else sl_fwd(m, g, s0 + m->foff[a], s0, def.dt, s1 + m->foff[a]);
  }
  if (mc) mc_fwd(m, &m->cellg, s0 + nv, s0, s1 + nv, hat, back);
  else sl_fwd(m, &m->cellg, s0 + nv, s0, def.dt, s1 + nv);
  fp = fopen(out, "wb");
  if (!fp || fwrite(s1, sizeof(double), ns, fp) != ns || fclose(fp)) die(out, "cannot write");
  printf("{\"n\": %d, \"advection\": \"%s\", \"nvel\": %zu, \"ncell\": %zu}\n", n, mc ? "mc" : "sl", nv, nc);
  free(s0), free(s1), free(hat), free(back);
  ds_fluid_model_free(m);
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc == 1) {
    run(128, 0, 0, 1e-5, 50, 3, NULL);
    return 0;
  }
  if (argc == 6 && !strcmp(argv[1], "advect")) {
    if (atoi(argv[2]) < 2 || (strcmp(argv[3], "sl") && strcmp(argv[3], "mc"))) die("usage", "advect N sl|mc IN OUT");
    advect_once(atoi(argv[2]), !strcmp(argv[3], "mc"), argv[4], argv[5]);
    return 0;
  }
  if (argc < 6) die("usage", "bench_fluid_phiflow N|N^3 sl|mc TOLERANCE STEPS REPS [DENSITY_FILE]");
  const char* cube = strstr(argv[1], "^3");
  int n = atoi(argv[1]), steps = atoi(argv[4]), reps = atoi(argv[5]);
  double tol = atof(argv[3]);
  if (n < 2 || steps < 1 || reps < 1 || !(tol > 0 && tol < 1)) die("usage", "N >= 2, STEPS >= 1, REPS >= 1, 0 < TOLERANCE < 1");
  if (strcmp(argv[2], "sl") && strcmp(argv[2], "mc")) die("usage", "ADVECTION is sl or mc");
  run(n, cube != NULL, !strcmp(argv[2], "mc"), tol, steps, reps, argc > 6 ? argv[6] : NULL);
  return 0;
}

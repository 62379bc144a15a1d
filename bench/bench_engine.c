/* Engine benchmark (figures, not a test). The cases of issue 14, each at 1
 * and 2 threads (--threads: other counts), runs interleaved (1, 2, 1, 2, ...) so that both see the
 * same machine, medians of 5 runs (3 for the long ones), and the ratio
 * t(1 thread) / t(2 threads) from the medians:
 *   - soft grid 40x40x4 cells (38,400 tets, ground contact, 192 substeps): ns per
 *     tet-substep, forward and forward + backward;
 *   - gear-sized soft grid 15x15x1 (1,350 tets, 5,760 substeps): seconds
 *     and ns per tet-substep;
 *   - the control-fem gear of docs/scenes.md (~480 particles, ~1,150 tets,
 *     5,760 substeps, activations changing every 32 substeps);
 *   - cloth 31x31 (membrane + bending + lift/drag, 1,440 substeps): seconds
 *     and ns per triangle-substep;
 *   - the gear with a checkpoint every ~sqrt(T) substeps (2 threads).
 * Usage: bench_engine [quick] [--with-load] [--fixed] [--only CASE] [--profile CASE [SUBSTEPS]]
 *   quick:        fewer substeps and runs (smoke runs);
 *   --with-load:  one busy-spinning child process competes for the cores
 *                 during every measurement (2 threads vs 1 thread under load);
 *   --only CASE:  just that case (grid40, grid15, gear, cloth);
 *   --fixed:      the adaptive thread choice off (every parallel stage runs
 *                 on all threads asked for): the raw 2-thread figures;
 *   --threads L:  the thread counts to measure, a list (default 1,2; e.g.
 *                 1,2,4,8,16 on a bigger machine): each case's speed-up over
 *                 1 thread and its efficiency (speed-up / threads);
 *   --profile:    one forward + backward of CASE (grid40, grid15, gear,
 *                 cloth) over SUBSTEPS (default 64) on the current threads,
 *                 nothing else: a run for valgrind --tool=callgrind, whose
 *                 instruction counts do not depend on the machine's load. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#  include <sys/prctl.h>
#endif

#include "dsim/engine.h"
#include "bench/bench.h"
#include "dsim/mesh.h"
#include "dsim/scenes.h"

static void die(const char* what, int rc, const char* msg) {
  fprintf(stderr, "bench_engine: %s: %s (%s)\n", what, ds_err_name(rc), msg ? msg : "");
  exit(1);
}

static dsModel* finalize(dsBuilder* b) {
  dsModel* m;
  int rc = ds_builder_finalize(b, &m);
  if (rc) die("finalize", rc, ds_builder_last_error(b));
  ds_builder_free(b);
  return m;
}

static dsModel* tet_box(int nx, int ny, int nz) {
  dsBuilder* b;
  ds_builder_create(&b);
  dsTetMaterial te = {1e3, 1e3, 1};
  dsReal o[3] = {0, 0.02, 0}, v[3] = {0.5, -0.2, 0};
  int rc = ds_builder_add_tet_grid(b, nx, ny, nz, 0.1, 0.1, 0.1, o, 1, v, &te); /* the gear's density */
  if (rc < 0) die("tet grid", rc, ds_builder_last_error(b));
  dsGroundDef gd = {1e4, 1, 10, 0.5, 0.01};
  ds_builder_set_ground(b, &gd);
  ds_builder_set_dt(b, 1.0 / 1920);
  return finalize(b);
}

static dsModel* cloth(int n) {
  dsBuilder* b;
  ds_builder_create(&b);
  dsTriMaterial tm = {100, 1e4, 100};
  dsBendMaterial bm = {100, 0};
  dsReal o[3] = {-5, 2.5, 0}, v[3] = {1, 0, 0};
  int rc = ds_builder_add_cloth_grid(b, n, n, 0.125, o, 2, v, &tm, &bm);
  if (rc < 0) die("cloth", rc, ds_builder_last_error(b));
  ds_builder_set_aero(b, 10, 5);
  ds_builder_set_dt(b, 1.0 / 960);
  return finalize(b);
}

/* Activation pattern held for `hold` substeps: a travelling sine. The
 * patterns of a run are made before it is timed (prepare_acts), so that the
 * figures are the engine's: making them costs a sine and a tanh per
 * activation per pattern, ~3 ns per tet-substep on the 40x40x4 grid at
 * hold 32, about a fifth of its 2-thread forward. Timed: their copy into
 * d->act, as a controller would write its actions. */
static dsReal* g_acts;
static void prepare_acts(const dsModel* m, int T, int hold) {
  const int n = T / hold + 1;
  free(g_acts);
  g_acts = (dsReal*)malloc(((size_t)n * m->nact + 1) * sizeof(dsReal));
  if (!g_acts) die("activations", DS_ERR_NOMEM, "");
  for (int k = 0; k < n; k++) {
    double ph = 2.5 * k * m->dt * hold;
    for (int i = 0; i < m->nact; i++) g_acts[(size_t)k * m->nact + i] = 0.3 * tanh(sin(ph + 0.01 * i));
  }
}

/* Seconds for T substeps forward (and backward when back). */
static double run(const dsModel* m, dsData* d, dsGrad* g, int T, int back, int hold) {
  double t0 = now();
  ds_data_reset(m, d);
  for (int t = 0; t < T; t++) {
    if (t % hold == 0 && m->nact)
      memcpy(d->act, g_acts + (size_t)(t / hold) * m->nact, (size_t)m->nact * sizeof(dsReal));
    int rc = ds_step(m, d);
    if (rc) die("step", rc, ds_data_last_error(d));
  }
  if (back) {
    int rc = ds_backward(m, d, g, m->x0, NULL, NULL, NULL);
    if (rc) die("backward", rc, ds_data_last_error(d));
  }
  return now() - t0;
}

static dsModel* gear_model(void) {
  dsMesh gear;
  memset(&gear, 0, sizeof gear);
  dsGearDef gd = ds_default_gear_def();
  int rc = ds_mesh_gear(&gd, &gear);
  if (rc) die("gear mesh", rc, "");
  dsReal pos[3] = {-4, 2, 0}, v[3] = {1.5, 0, 0};
  ds_mesh_translate(&gear, pos);
  dsBuilder* b;
  ds_builder_create(&b);
  dsTetMaterial te = {1e3, 1e3, 1};
  if ((rc = ds_builder_add_soft_mesh(b, &gear, 1, v, &te)) < 0) die("gear", rc, ds_builder_last_error(b));
  dsGroundDef gr = {1e4, 1, 10, 0.5, 0.01};
  ds_builder_set_ground(b, &gr);
  ds_builder_set_dt(b, 1.0 / 1920);
  dsModel* m = finalize(b);
  ds_mesh_free(&gear);
  return m;
}

/* The thread counts measured (--threads: a list; default 1 and 2). */
static int g_threads[16] = {1, 2};
static int g_nthreads = 2;

/* One case: T substeps, `reps` interleaved runs per thread count (the
 * counts of g_threads; a checkpointed case those above 1 only); prints
 * seconds, ns per element-substep and the speed-up over one thread (with
 * --threads, a table of speed-ups and efficiencies, speed-up / threads). */
static void bench_case(const char* label, dsModel* m, int nelem, const char* elem, int T, int reps, int ckpt,
                       int hold) {
  dsDataDef dd = ds_default_data_def();
  dd.max_substeps = T;
  dd.checkpoint_every = ckpt;
  dd.act_records = T / hold + 1;
  dd.fext_records = 1;
  dsData* d;
  dsGrad* g;
  int rc = ds_data_create(m, &dd, &d);
  if (rc) die("data", rc, ds_data_last_error(d));
  if ((rc = ds_grad_create(m, &g))) die("grad", rc, "");
  prepare_acts(m, T, hold);
  int ths[16], nth = 0;
  for (int k = 0; k < g_nthreads; k++)
    if (ckpt <= 1 || g_threads[k] > 1) ths[nth++] = g_threads[k];
  if (!nth) ths[nth++] = 2;
  double f[16][9], fb[16][9];
  for (int k = 0; k < nth; k++) { /* warm up */
    ds_set_num_threads(ths[k]);
    run(m, d, g, T / 4 + 1, 1, hold);
  }
  for (int r = 0; r < reps; r++)
    for (int k = 0; k < nth; k++) {
      ds_set_num_threads(ths[k]);
      f[k][r] = run(m, d, g, T, 0, hold);
      fb[k][r] = run(m, d, g, T, 1, hold);
    }
  double mf[16], mfb[16];
  const double scale = 1e9 / ((double)nelem * T);
  for (int k = 0; k < nth; k++) {
    mf[k] = median(f[k], reps);
    mfb[k] = median(fb[k], reps);
    printf("%-34s threads %d  forward %7.3f s %7.1f ns  forward+backward %7.3f s %7.1f ns  (ns per %s-substep)\n",
           label, ths[k], mf[k], mf[k] * scale, mfb[k], mfb[k] * scale, elem);
  }
  if (ths[0] == 1 && nth == 2 && ths[1] == 2)
    printf("%-34s speed-up 2 threads / 1 thread: forward %.2fx  forward+backward %.2fx\n", label, mf[0] / mf[1],
           mfb[0] / mfb[1]);
  else if (ths[0] == 1)
    for (int k = 1; k < nth; k++)
      printf("%-34s scaling %2d threads: speed-up forward %5.2fx (efficiency %3.0f%%)  forward+backward %5.2fx "
             "(%3.0f%%)\n",
             label, ths[k], mf[0] / mf[k], 100 * mf[0] / mf[k] / ths[k], mfb[0] / mfb[k],
             100 * mfb[0] / mfb[k] / ths[k]);
  if (ckpt > 1) printf("%-34s (data %.0f MB)\n", label, ds_data_bytes(m, d) / 1e6);
  fflush(stdout);
  ds_grad_free(g);
  ds_data_free(d);
}

/* A competing process: one busy-spinning child until killed. */
static pid_t spawn_load(void) {
  pid_t p = fork();
  if (p < 0) {
    perror("bench_engine: fork");
    exit(1);
  }
  if (p == 0) {
#ifdef __linux__
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the benchmark (a closed pipe kills it) */
    if (getppid() == 1) _exit(0);
#endif
    volatile unsigned long x = 0;
    for (;;) x++;
  }
  return p;
}

static int profile(const char* name, int T) {
  dsModel* m = strcmp(name, "grid40") == 0   ? tet_box(40, 4, 40)
               : strcmp(name, "grid15") == 0 ? tet_box(15, 1, 15)
               : strcmp(name, "gear") == 0   ? gear_model()
               : strcmp(name, "cloth") == 0  ? cloth(31)
                                             : NULL;
  if (!m || T < 1) {
    fprintf(stderr, "bench_engine: --profile grid40|grid15|gear|cloth [substeps]\n");
    return 2;
  }
  dsDataDef dd = ds_default_data_def();
  dd.max_substeps = T;
  dsData* d;
  dsGrad* g;
  int rc = ds_data_create(m, &dd, &d);
  if (rc) die("data", rc, "");
  if ((rc = ds_grad_create(m, &g))) die("grad", rc, "");
  prepare_acts(m, T, 32);
  printf("%s: %d substeps forward + backward in %.3f s\n", name, T, run(m, d, g, T, 1, 32));
  ds_grad_free(g);
  ds_data_free(d);
  ds_model_free(m);
  return 0;
}

int main(int argc, char** argv) {
  int quick = 0, load = 0;
  const char* only = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "quick") == 0)
      quick = 1;
    else if (strcmp(argv[i], "--with-load") == 0)
      load = 1;
    else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc)
      only = argv[++i];
    else if (strcmp(argv[i], "--fixed") == 0)
      ds_set_adaptive_threads(0);
    else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
      g_nthreads = 0;
      for (char* p = argv[++i]; *p && g_nthreads < 16;) {
        char* end;
        const long v = strtol(p, &end, 10);
        if (end == p || v < 1 || v > 1024) {
          fprintf(stderr, "bench_engine: --threads %s: expected a list of counts, e.g. 1,2,4,8,16\n", argv[i]);
          return 2;
        }
        g_threads[g_nthreads++] = (int)v;
        p = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') {
          fprintf(stderr, "bench_engine: --threads %s: expected a list of counts, e.g. 1,2,4,8,16\n", argv[i]);
          return 2;
        }
      }
    }
    else if (strcmp(argv[i], "--profile") == 0 && i + 1 < argc)
      return profile(argv[i + 1], i + 2 < argc ? atoi(argv[i + 2]) : 64);
    else {
      fprintf(stderr, "usage: bench_engine [quick] [--with-load] [--fixed] [--threads 1,2,...] [--only CASE] [--profile CASE [SUBSTEPS]]\n");
      return 2;
    }
  }
  if (only && strcmp(only, "grid40") && strcmp(only, "grid15") && strcmp(only, "gear") && strcmp(only, "cloth")) {
    fprintf(stderr, "bench_engine: --only %s: expected grid40, grid15, gear or cloth\n", only);
    return 2;
  }
  const int div = quick ? 8 : 1, reps = quick ? 3 : 5, lreps = quick ? 1 : 3;
  pid_t child = load ? spawn_load() : 0;
  dsBuildInfo bi;
  ds_build_info(&bi);
  printf("bench_engine: %s, %d-byte reals, max threads %d%s\n", quick ? "quick" : "full", (int)sizeof(dsReal),
         bi.max_threads, load ? ", with one busy-spinning competing process" : "");
  dsModel* m;
  char label[96];
#define WANT(name) (!only || strcmp(only, name) == 0)
  if (WANT("grid40")) {
    m = tet_box(40, 4, 40); /* flat on the ground: x, z 40 cells, y 4 */
    snprintf(label, sizeof label, "soft grid 40x40x4 (%d tets)", m->ntet);
    bench_case(label, m, m->ntet, "tet", 192 / div, reps, 1, 32);
    ds_model_free(m);
  }
  if (WANT("grid15")) {
    m = tet_box(15, 1, 15);
    snprintf(label, sizeof label, "soft grid 15x15x1 (%d tets)", m->ntet);
    bench_case(label, m, m->ntet, "tet", 5760 / div, lreps, 1, 32);
    ds_model_free(m);
  }
  if (WANT("gear")) {
    m = gear_model();
    snprintf(label, sizeof label, "control-fem gear (%d p, %d tets)", m->nparticle, m->ntet);
    bench_case(label, m, m->ntet, "tet", 5760 / div, lreps, 1, 32);
    snprintf(label, sizeof label, "gear, checkpoint every %d", quick ? 24 : 76);
    bench_case(label, m, m->ntet, "tet", 5760 / div, lreps, quick ? 24 : 76, 32); /* ~sqrt(T) */
    ds_model_free(m);
  }
  if (WANT("cloth")) {
    m = cloth(31);
    snprintf(label, sizeof label, "cloth 31x31 (%d tris)", m->ntri);
    bench_case(label, m, m->ntri, "tri", 1440 / div, lreps, 1, 60);
    ds_model_free(m);
  }
#undef WANT
  if (child > 0) {
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
  }
  return 0;
}

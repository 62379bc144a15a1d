/* Batched envs (dsim/batch.h), forward only (RL): env-steps per second of a
 * batch of N envs with autoreset, its envs
 *   separate   each on its own serial CPU engine, OpenMP across the envs
 *   shared     all as instances of one batched engine on the device (the
 *              CPU backend, OpenMP across instances; or a CUDA device)
 * and the ratio shared / separate (separate always on the CPU). The actions are a fixed sinusoid; the
 * bundled config's env (configs/NAME.json when found, else the class's
 * defaults) with physics.gradients false. Figures are medians of --reps
 * timed runs of --calls batch steps each, after one untimed run.
 *
 * --backward: lockstep batches with gradients instead (what sysid groups
 * and gradient-based control run): per run, a reset of all, --calls steps
 * (at most an episode) and ds_batch_backward_loss; env-steps forward and
 * backward per second (separate: every env on its own serial engine,
 * forward and backward across threads; shared: one engine and its tape).
 *
 *   bench_batch [--class NAME] [--envs N]... [--device cpu|cuda[:N]]...
 *               [--calls C] [--reps R] [--rewards] [--backward] [--quick]
 *               [--engine [--substeps K]]
 *
 * Defaults: control-fem, N = 1, 8, 64, the CPU (and cuda:0 when a device is
 * visible), 24 calls, 3 reps. --rewards asks for rewards (each frame in a
 * step is rendered and compared with the goal: on the host for separate
 * envs, where the engine runs for a shared one). --quick: N = 1
 * and 8, 8 calls (what `make bench` runs).
 *
 * --engine: the engines alone, without the env around them (what the
 * articulated classes, pendulum and runner, can run on the batched engine
 * today): the config's model (--class may name a config, e.g.
 * control-fem-implicit), N instances stepped --calls x --substeps (100)
 * substeps forward with a fixed sinusoid of actions (activations, or an
 * articulation's actions); substeps x instances per second of a loop over N
 * serial engines (ds_step, one after another) against one batched engine
 * on the CPU backend (ds_bsim_step, OpenMP across instances). With
 * --backward, the episode is taped and gone back through (ds_backward_step
 * / ds_bsim_backward_step from the adjoint of a fixed linear loss on the
 * final state), and the figure is per forward and backward substep. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#  include <omp.h>
#endif

#include "bench/bench.h"
#include "dsim/dsim.h"

#ifndef DS_BENCH_SRCDIR
#  define DS_BENCH_SRCDIR "."
#endif

static void die(const char* what, const char* msg) {
  fprintf(stderr, "bench_batch: %s: %s\n", what, msg);
  exit(1);
}

/* The config's env section, forward only, as text. */
static char* config_text(const char* cls) {
  char path[1024];
  snprintf(path, sizeof path, "%s/configs/%s.json", DS_BENCH_SRCDIR, cls);
  dsEnvDef def;
  char err[512];
  int rc = -1;
  FILE* f = fopen(path, "rb");
  if (f) {
    static char buf[1 << 20];
    const size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    rc = ds_env_def_from_text(path, buf, &def, err, sizeof err);
  }
  if (rc) def = ds_default_env_def(cls);
  if (!def.cls) die(cls, "no such env class");
  def.gradients = 0;
  int need = ds_env_def_to_json(&def, NULL, 0);
  char* text = need > 0 ? (char*)malloc((size_t)need + 1) : NULL;
  if (!text) die(cls, "out of memory");
  ds_env_def_to_json(&def, text, (size_t)need + 1);
  return text;
}

/* env-steps per second; mode 0: separate, 1: shared on `device` */
static double rate(const char* cls, const char* text, int mode, const char* device, int N, int calls, int reps,
                   int rewards, int backward) {
  dsEnvDef def;
  char err[1024];
  if (ds_env_def_from_text(cls, text, &def, err, sizeof err)) die(cls, err);
  dsBatch* b = NULL;
  int rc;
  if (backward) {
    def.gradients = 1;
    def.batch_engine = mode == 1 && strcmp(device, "cpu") == 0;
    if (mode == 1 && strcmp(device, "cpu") != 0 && ds_device_parse("--device", device, &def.device, err, sizeof err))
      die("device", err);
    rc = ds_batch_create_lockstep(&def, N, &b, err, sizeof err);
  } else if (mode == 0) {
    rc = ds_batch_create(&def, N, &b, err, sizeof err);
  } else if (strcmp(device, "cpu") == 0) {
    def.batch_engine = 1;
    rc = ds_batch_create(&def, N, &b, err, sizeof err);
  } else {
    rc = ds_batch_create_from_text_on(cls, text, N, device, 0, &b, err, sizeof err);
  }
  if (rc) die("create", err);
  const int A = ds_env_action_size(ds_batch_env(b, 0)), O = ds_env_obs_size(ds_batch_env(b, 0));
  dsReal* act = (dsReal*)malloc(((size_t)N * A + 1) * sizeof(dsReal));
  dsReal* obs = (dsReal*)malloc(((size_t)N * O + 1) * sizeof(dsReal));
  dsReal* rew = (dsReal*)malloc((size_t)N * sizeof(dsReal));
  uint8_t* done = (uint8_t*)malloc((size_t)N);
  int* status = (int*)malloc((size_t)N * sizeof(int));
  if (!act || !obs || !rew || !done || !status) die("bench", "out of memory");
  const int S = ds_env_num_steps(ds_batch_env(b, 0));
  if (backward && calls > S) calls = S;
  double t[16];
  for (int r = 0; r <= reps; r++) {
    if (ds_batch_reset(b, NULL, NULL, obs, NULL, status)) die("reset", ds_batch_last_error(b));
    const double t0 = now();
    for (int c = 0; c < calls; c++) {
      for (int i = 0; i < N; i++)
        for (int j = 0; j < A; j++) act[(size_t)i * A + j] = (dsReal)(0.3 * sin(0.2 * c + 0.37 * j + 1.3 * i));
      if (ds_batch_step(b, act, obs, NULL, rewards ? rew : NULL, done, status, backward ? 0 : DS_BATCH_AUTORESET) < 0)
        die("step", ds_batch_last_error(b));
    }
    if (backward && ds_batch_backward_loss(b, rew, NULL, status)) die("backward", ds_batch_last_error(b));
    if (r > 0) t[r - 1] = now() - t0; /* the first run warms up */
  }
  free(act);
  free(obs);
  free(rew);
  free(done);
  free(status);
  ds_batch_destroy(b);
  return (double)N * calls / median(t, reps);
}

/* --engine --backward: every instance's episode gone back through from
 * dL/dx_T = w (a fixed pattern), serially or on the batch */
static void engine_backward(const dsModel* m, dsData** d, dsGrad** g, dsBatchSim* s, int N, const dsReal* w) {
  if (s) {
    if (ds_bsim_backward_begin(s, w, NULL) || ds_bsim_backward_step(s, ds_bsim_time(s), NULL, NULL) ||
        ds_bsim_backward_finish(s) || ds_bsim_zero_grad(s))
      die("backward", ds_bsim_last_error(s));
    return;
  }
  const size_t n3 = 3 * (size_t)m->nparticle;
  for (int i = 0; i < N; i++) {
    if (ds_backward_begin(m, d[i])) die("backward", ds_data_last_error(d[i]));
    memcpy(d[i]->adj_x, w + (size_t)i * n3, n3 * sizeof(dsReal));
    while (d[i]->bt > 0)
      if (ds_backward_step(m, d[i], g[i], NULL, NULL)) die("backward", ds_data_last_error(d[i]));
    if (ds_backward_finish(m, d[i], g[i])) die("backward", ds_data_last_error(d[i]));
    ds_grad_zero(g[i]);
  }
}

/* --engine: instance-substeps per second, serial loop (mode 0) or batched (1);
 * backward: taped, and each run goes back through its episode */
static double engine_rate(const dsModel* m, int mode, int N, int calls, int nsub, int reps, int backward) {
  const int art = m->artic != NULL, na = art ? m->artic_nu : m->nact, T = backward ? calls * nsub : 0;
  const size_t n3 = 3 * (size_t)m->nparticle;
  dsReal* act = (dsReal*)calloc((size_t)N * na + 1, sizeof(dsReal));
  dsReal* w = (dsReal*)calloc((size_t)N * n3 + 1, sizeof(dsReal));
  dsData** d = (dsData**)calloc((size_t)N, sizeof(dsData*));
  dsGrad** g = (dsGrad**)calloc((size_t)N, sizeof(dsGrad*));
  dsBatchSim* s = NULL;
  char err[512];
  if (!act || !w || !d || !g) die("bench", "out of memory");
  for (size_t k = 0; k < (size_t)N * n3; k++) w[k] = (dsReal)(1e-3 * cos(0.7 * (double)k));
  if (mode == 0) {
    dsDataDef dd = ds_default_data_def(); /* a tape only for the backward */
    dd.max_substeps = T;
    dd.act_records = calls;
    for (int i = 0; i < N; i++)
      if (ds_data_create(m, &dd, &d[i]) || (backward && ds_grad_create(m, &g[i]))) die("data", "cannot create");
  } else {
    dsBatchSimDef def = ds_default_batch_sim_def();
    def.batch = N;
    def.max_substeps = T;
    def.act_records = calls;
    def.fext_records = 1;
    if (ds_bsim_create(m, &def, &s, err, sizeof err)) die("ds_bsim_create", err);
  }
  double t[16];
  for (int r = 0; r <= reps; r++) {
    if (s && ds_bsim_reset(s)) die("reset", ds_bsim_last_error(s));
    for (int i = 0; i < N && !s; i++) ds_data_reset(m, d[i]);
    const double t0 = now();
    for (int c = 0; c < calls; c++) {
      for (int i = 0; i < N; i++)
        for (int j = 0; j < na; j++) act[(size_t)i * na + j] = (dsReal)(0.3 * sin(0.2 * c + 0.37 * j + 1.3 * i));
      if (s) {
        if ((na && ds_bsim_set_act(s, act)) || ds_bsim_step(s, nsub, NULL)) die("step", ds_bsim_last_error(s));
        continue;
      }
      for (int i = 0; i < N; i++) {
        dsReal* a = art ? d[i]->artic_act : d[i]->act;
        if (na) memcpy(a, act + (size_t)i * na, (size_t)na * sizeof(dsReal));
        for (int k = 0; k < nsub; k++)
          if (ds_step(m, d[i])) die("ds_step", ds_data_last_error(d[i]));
      }
    }
    if (backward) engine_backward(m, d, g, s, N, w);
    if (r > 0) t[r - 1] = now() - t0;
  }
  for (int i = 0; i < N && !s; i++) {
    ds_data_free(d[i]);
    ds_grad_free(g[i]);
  }
  ds_bsim_free(s);
  free(d);
  free(g);
  free(w);
  free(act);
  return (double)N * calls * nsub / median(t, reps);
}

static void engine_bench(const char* cls, const char* text, const int* envs, int ne, int calls, int nsub, int reps,
                         int backward) {
  dsEnvDef def;
  char err[1024];
  if (ds_env_def_from_text(cls, text, &def, err, sizeof err)) die(cls, err);
  dsEnv* env = NULL;
  if (ds_env_create(&def, &env, err, sizeof err)) die(cls, err);
  const dsModel* m = ds_env_model(env);
  int threads = 1;
#ifdef _OPENMP
  threads = omp_get_max_threads();
#endif
  printf("bench_batch --engine: %s's model (%d particles, %s), %d x %d substeps %s, median of %d, %d threads\n",
         cls, m->nparticle, m->integrator == DS_INTEGRATOR_IMPLICIT ? "implicit" : "semi-implicit", calls, nsub,
         backward ? "forward and backward" : "forward", reps, threads);
  printf("%6s %16s %16s %8s\n", "N", "serial loop/s", "batched/s", "ratio");
  for (int k = 0; k < ne; k++) {
    const double a = engine_rate(m, 0, envs[k], calls, nsub, reps, backward);
    const double b = engine_rate(m, 1, envs[k], calls, nsub, reps, backward);
    printf("%6d %16.1f %16.1f %7.2fx\n", envs[k], a, b, b / a);
    fflush(stdout);
  }
  ds_env_destroy(env);
}

int main(int argc, char** argv) {
  const char* cls = "control-fem";
  const char* devices[8];
  int envs[8], nd = 0, ne = 0, calls = 24, reps = 3, rewards = 0, quick = 0, backward = 0, engine = 0, nsub = 100;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--class") == 0 && i + 1 < argc) cls = argv[++i];
    else if (strcmp(argv[i], "--envs") == 0 && i + 1 < argc && ne < 8) envs[ne++] = atoi(argv[++i]);
    else if (strcmp(argv[i], "--device") == 0 && i + 1 < argc && nd < 8) devices[nd++] = argv[++i];
    else if (strcmp(argv[i], "--calls") == 0 && i + 1 < argc) calls = atoi(argv[++i]);
    else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) reps = atoi(argv[++i]);
    else if (strcmp(argv[i], "--rewards") == 0) rewards = 1;
    else if (strcmp(argv[i], "--backward") == 0) backward = 1;
    else if (strcmp(argv[i], "--quick") == 0) quick = 1;
    else if (strcmp(argv[i], "--engine") == 0) engine = 1;
    else if (strcmp(argv[i], "--substeps") == 0 && i + 1 < argc) nsub = atoi(argv[++i]);
    else {
      fprintf(stderr,
              "usage: bench_batch [--class NAME] [--envs N]... [--device cpu|cuda[:N]]... [--calls C] [--reps R] "
              "[--rewards] [--backward] [--quick] [--engine [--substeps K]]\n");
      return 2;
    }
  }
  if (quick) {
    calls = 8;
    if (!ne) {
      envs[ne++] = 1;
      envs[ne++] = 8;
    }
  }
  if (!ne) {
    envs[ne++] = 1;
    envs[ne++] = 8;
    envs[ne++] = 64;
  }
  if (!nd) {
    devices[nd++] = "cpu";
    if (ds_cuda_device_count() > 0) devices[nd++] = "cuda:0";
  }
  if (reps < 1 || reps > 16 || calls < 1 || nsub < 1) {
    fprintf(stderr, "bench_batch: --reps 1..16, --calls >= 1, --substeps >= 1\n");
    return 2;
  }
  char* text = config_text(cls);
  if (engine) {
    engine_bench(cls, text, envs, ne, calls, nsub, reps, backward);
    free(text);
    return 0;
  }
  int threads = 1;
#ifdef _OPENMP
  threads = omp_get_max_threads();
#endif
  if (backward)
    printf("bench_batch: %s, lockstep with gradients: %d steps forward, then the backward; median of %d, %d threads\n",
           cls, calls, reps, threads);
  else
    printf("bench_batch: %s, forward only, %d calls with autoreset, median of %d, %d threads%s\n", cls, calls, reps,
           threads, rewards ? ", with rewards" : "");
  printf("%-8s %6s %14s %14s %8s\n", "device", "envs", "separate/s", "shared/s", "ratio");
  for (int d = 0; d < nd; d++)
    for (int k = 0; k < ne; k++) {
      const double sep = rate(cls, text, 0, "cpu", envs[k], calls, reps, rewards, backward);
      const double sh = rate(cls, text, 1, devices[d], envs[k], calls, reps, rewards, backward);
      printf("%-8s %6d %14.1f %14.1f %7.2fx\n", devices[d], envs[k], sep, sh, sh / sep);
      fflush(stdout);
    }
  free(text);
  return 0;
}

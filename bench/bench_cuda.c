/* Batched-engine benchmark (dsim/engine_batch.h) on control-fem's gear
 * (480 particles, 1,152 tets, ground contact): tet-element-substeps per
 * second, forward only (no tape) and forward + backward (full tape, one
 * episode of `--episode` substeps forward then backward), for B = 1, 64 and
 * 1,024 gears, on the CPU backend and on every CUDA device asked for; the
 * ratio CUDA / CPU on this machine; and the 40-iteration control-fem run
 * (40 x 5,760 substeps forward and backward at B = 1) projected from the
 * B = 1 forward + backward rate (physics only: no rendering, controller or
 * loss) and measured the way the env drives the engine: one control-fem
 * episode of 5,760 substeps with new activations every 32 substeps (an
 * upload) and their adjoints read back every 32 in the backward (a sync).
 * Then control-cloth's sheet (triangle FEM, bending, lift and drag):
 * triangle-substeps per second, forward and forward + backward, at the same
 * B values, and CUDA / CPU. Then the runner (an articulation: 9 links, slides and hinges with limits,
 * motors, ground contact; engine/batch_artic_body.h, one thread per
 * instance on CUDA): instance-substeps per second forward (no tape) and
 * forward + backward (an episode of --episode substeps), B = 1, 64 and
 * 1,024 (not 1,024 with --quick).
 * Figures are medians of 3 timed repeats, each at least --seconds
 * (one repeat when the untimed warm-up already took that long).
 *
 *   bench_cuda [--device cpu|cuda[:N]]... [--batch B]... [--seconds S]
 *              [--episode T] [--quick]
 *
 * Without --device: the CPU, and cuda:0 when a device is visible. --quick:
 * B = 1 and 64 only, short timings (what `make bench` runs). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "dsim/dsim.h"

static const dsModel* gear_model(dsEnv** env) {
  dsEnvDef def = ds_default_env_def("control-fem");
  char err[512];
  if (ds_env_create(&def, env, err, sizeof err)) {
    fprintf(stderr, "bench_cuda: control-fem: %s\n", err);
    exit(1);
  }
  return ds_env_model(*env);
}

static void die(const char* what, int rc, const char* msg) {
  fprintf(stderr, "bench_cuda: %s: %s (%s)\n", what, ds_err_name(rc), msg);
  exit(1);
}

/* Random activations in [-0.1, 0.1] for B instances. */
static dsReal* random_act(const dsModel* m, int B) {
  dsReal* a = (dsReal*)malloc(((size_t)B * m->nact + 1) * sizeof(dsReal));
  uint64_t s = 12345;
  for (size_t k = 0; k < (size_t)B * m->nact; k++) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    a[k] = (dsReal)(0.2 * ((double)(s >> 11) / 9007199254740992.0) - 0.1);
  }
  return a;
}

/* The elements a rate counts: tets, else triangles (the cloth). */
static int nelem(const dsModel* m) { return m->ntet ? m->ntet : m->ntri; }

/* element-substeps per second, forward only */
static double rate_forward(const dsModel* m, dsDevice dev, int B, double seconds) {
  dsBatchSimDef def = ds_default_batch_sim_def();
  def.batch = B;
  def.device = dev;
  dsBatchSim* s;
  char err[512];
  int rc = ds_bsim_create(m, &def, &s, err, sizeof err);
  if (rc) die("create", rc, err);
  dsReal* a = random_act(m, B);
  ds_bsim_set_act(s, a);
  const int chunk = 20;
  double r[3];
  for (int rep = -1; rep < 3; rep++) { /* rep -1: warm-up */
    ds_bsim_reset(s);
    ds_bsim_set_act(s, a);
    long long n = 0;
    const double t0 = now();
    double t;
    do {
      /* an episode's length at most, then from the start again (a sheet
         with no ground falls, and flies apart, on its own after seconds) */
      if (n > 0 && n % 1000 == 0 && ((rc = ds_bsim_reset(s)) || (rc = ds_bsim_set_act(s, a))))
        die("reset", rc, ds_bsim_last_error(s));
      rc = ds_bsim_step(s, chunk, NULL); /* ends with a device sync (the status read) */
      if (rc) die("step", rc, ds_bsim_last_error(s));
      n += chunk;
      t = now() - t0;
    } while (t < (rep < 0 ? 0.1 * seconds : seconds));
    if (rep >= 0) r[rep] = (double)n * B * nelem(m) / t;
    if (rep < 0 && t >= seconds) { /* slow: the warm-up is the measurement */
      r[0] = r[1] = r[2] = (double)n * B * nelem(m) / t;
      break;
    }
  }
  free(a);
  ds_bsim_free(s);
  return median(r, 3);
}

/* element-substeps per second, one forward and one backward per substep */
static double rate_fwd_bwd(const dsModel* m, dsDevice dev, int B, int T, double seconds) {
  dsBatchSimDef def = ds_default_batch_sim_def();
  def.batch = B;
  def.device = dev;
  def.max_substeps = T;
  def.act_records = 1;
  def.fext_records = 1;
  dsBatchSim* s;
  char err[512];
  int rc = ds_bsim_create(m, &def, &s, err, sizeof err);
  if (rc) die("create", rc, err);
  dsReal* a = random_act(m, B);
  dsReal* g = (dsReal*)malloc((size_t)nelem(m) * sizeof(dsReal));
  double r[3];
  for (int rep = -1; rep < 3; rep++) {
    long long n = 0;
    const double t0 = now();
    double t;
    do {
      ds_bsim_reset(s);
      ds_bsim_set_act(s, a);
      rc = ds_bsim_step(s, T, NULL);
      if (!rc) rc = ds_bsim_backward_begin(s, NULL, NULL);
      if (!rc) rc = ds_bsim_add_adjoint(s, NULL, NULL);
      if (!rc) rc = ds_bsim_backward_step(s, T, NULL, NULL);
      if (!rc) rc = ds_bsim_backward_finish(s);
      if (!rc) rc = ds_bsim_get_grad(s, 0, m->ntet ? "tet.k_mu" : "tri.k_mu", g, nelem(m)); /* sync */
      if (rc) die("episode", rc, ds_bsim_last_error(s));
      n += T;
      t = now() - t0;
    } while (t < (rep < 0 ? 0.1 * seconds : seconds));
    if (rep >= 0) r[rep] = (double)n * B * nelem(m) / t;
    if (rep < 0 && t >= seconds) { /* slow (an episode takes longer than --seconds): one measurement */
      r[0] = r[1] = r[2] = (double)n * B * nelem(m) / t;
      break;
    }
  }
  free(a);
  free(g);
  ds_bsim_free(s);
  return median(r, 3);
}

/* Seconds per control-fem episode as the env runs it at B = 1: T substeps,
 * activations set every C substeps, backward C substeps at a time with the
 * activation adjoints read back each time. */
static double episode_seconds(const dsModel* m, dsDevice dev, int T, int C, double seconds) {
  dsBatchSimDef def = ds_default_batch_sim_def();
  def.device = dev;
  def.max_substeps = T;
  def.act_records = (T + C - 1) / C;
  def.fext_records = 1;
  dsBatchSim* s;
  char err[512];
  int rc = ds_bsim_create(m, &def, &s, err, sizeof err);
  if (rc) die("create", rc, err);
  const int na = m->nact, nc = def.act_records;
  dsReal* a = random_act(m, nc);
  dsReal* aa = (dsReal*)malloc(((size_t)na + 1) * sizeof(dsReal));
  double r[3];
  for (int rep = -1; rep < 3; rep++) {
    int n = 0;
    const double t0 = now();
    double t;
    do {
      rc = ds_bsim_reset(s);
      for (int c = 0; c < nc && !rc; c++) {
        rc = ds_bsim_set_act(s, a + (size_t)c * na);
        if (!rc) rc = ds_bsim_step(s, c == nc - 1 ? T - c * C : C, NULL);
      }
      if (!rc) rc = ds_bsim_backward_begin(s, NULL, NULL);
      if (!rc) rc = ds_bsim_add_adjoint(s, NULL, NULL);
      for (int c = nc - 1; c >= 0 && !rc; c--) rc = ds_bsim_backward_step(s, c == nc - 1 ? T - c * C : C, aa, NULL);
      if (!rc) rc = ds_bsim_backward_finish(s);
      if (rc) die("episode", rc, ds_bsim_last_error(s));
      n++;
      t = now() - t0;
    } while (t < (rep < 0 ? 0.1 * seconds : seconds));
    if (rep >= 0) r[rep] = t / n;
    if (rep < 0 && t >= seconds) {
      r[0] = r[1] = r[2] = t / n;
      break;
    }
  }
  free(a);
  free(aa);
  ds_bsim_free(s);
  return median(r, 3);
}

/* The runner at B instances on dev: instance-substeps per second, forward
 * (bwd 0: no tape, T substeps a run) or forward + backward (an episode of T
 * substeps), median of 3. */
static double runner_rate(const dsModel* m, dsDevice dev, int B, int T, int bwd, double seconds) {
  dsBatchSimDef def = ds_default_batch_sim_def();
  def.batch = B;
  def.device = dev;
  def.max_substeps = bwd ? T : 0;
  def.act_records = 1;
  dsBatchSim* s;
  char err[512];
  int rc = ds_bsim_create(m, &def, &s, err, sizeof err);
  if (rc) die("create (runner)", rc, err);
  const size_t nu = (size_t)m->artic_nu, ns = (size_t)(m->artic_nq + m->artic_nv);
  dsReal* a = (dsReal*)malloc(((size_t)B * nu + 1) * sizeof(dsReal));
  dsReal* st = (dsReal*)malloc((size_t)B * ns * sizeof(dsReal));
  srand(3);
  for (size_t k = 0; k < (size_t)B * nu; k++) a[k] = (dsReal)(0.8 * rand() / RAND_MAX - 0.4);
  double r[3];
  for (int rep = -1; rep < 3; rep++) {
    long long n = 0;
    const double t0 = now();
    double t;
    do {
      rc = ds_bsim_reset(s);
      if (!rc) rc = ds_bsim_set_act(s, a);
      if (!rc) rc = ds_bsim_step(s, T, NULL);
      if (!rc && bwd) rc = ds_bsim_backward_begin(s, NULL, NULL);
      if (!rc && bwd) rc = ds_bsim_add_adjoint(s, NULL, NULL);
      if (!rc && bwd) rc = ds_bsim_backward_step(s, T, NULL, NULL);
      if (!rc && bwd) rc = ds_bsim_backward_finish(s);
      if (!rc) rc = ds_bsim_get_artic_state(s, st); /* sync */
      if (rc) die("runner episode", rc, ds_bsim_last_error(s));
      n += T;
      t = now() - t0;
    } while (t < (rep < 0 ? 0.1 * seconds : seconds));
    r[rep < 0 ? 0 : rep] = (double)n * B / t;
    if (rep < 0 && t >= seconds) { /* one episode takes longer than --seconds: one measurement */
      r[1] = r[2] = r[0];
      break;
    }
  }
  free(a);
  free(st);
  ds_bsim_free(s);
  return median(r, 3);
}

/* m's element-substeps per second on every device at every B, forward
 * (fw) and forward + backward (fb), a row each, then CUDA / CPU per B (the
 * lines start with `what`, "" or "cloth "); elem names the element. */
static void rate_table(const dsModel* m, const dsDevice* devs, int ndev, const int* batches, int nb, int T,
                       double seconds, const char* elem, const char* what, double fw[8][8], double fb[8][8]) {
  char name[32], hf[32], hb[32];
  snprintf(hf, sizeof hf, "fwd %s-substep/s", elem);
  snprintf(hb, sizeof hb, "fwd+bwd %s-sub/s", elem);
  printf("%-8s %6s %18s %18s\n", "device", "B", hf, hb);
  int cpu = -1;
  for (int k = 0; k < ndev; k++) {
    if (devs[k].kind == DS_DEVICE_CPU) cpu = k;
    for (int j = 0; j < nb; j++) {
      fw[k][j] = rate_forward(m, devs[k], batches[j], seconds);
      fb[k][j] = rate_fwd_bwd(m, devs[k], batches[j], T, seconds);
      printf("%-8s %6d %18.4g %18.4g\n", ds_device_name(devs[k], name, sizeof name), batches[j], fw[k][j], fb[k][j]);
      fflush(stdout);
    }
  }
  for (int k = 0; k < ndev && cpu >= 0; k++)
    if (devs[k].kind == DS_DEVICE_CUDA)
      for (int j = 0; j < nb; j++)
        printf("%sratio %s / cpu, B %5d: forward %.3gx, forward+backward %.3gx\n", what,
               ds_device_name(devs[k], name, sizeof name), batches[j], fw[k][j] / fw[cpu][j], fb[k][j] / fb[cpu][j]);
}

/* control-cloth's sheet (the bundled size range's first draw; triangle FEM,
 * bending, lift and drag, no ground): triangle-substeps per second forward
 * and forward + backward on every device at each B, and CUDA / CPU. */
static void cloth_rates(const dsDevice* devs, int ndev, const int* batches, int nb, int T, double seconds) {
  dsEnvDef def = ds_default_env_def("control-cloth");
  dsEnv* env = NULL;
  char err[512];
  if (ds_env_create(&def, &env, err, sizeof err) || ds_env_reset(env, 0, NULL, NULL))
    die("control-cloth", DS_ERR_INVALID, env ? ds_env_last_error(env) : err);
  const dsModel* m = ds_env_model(env);
  printf("cloth: control-cloth's sheet, %d particles, %d triangles, %d bending edges; triangle-substeps per second\n",
         m->nparticle, m->ntri, m->nbend);
  double fw[8][8], fb[8][8];
  rate_table(m, devs, ndev, batches, nb, T, seconds, "tri", "cloth ", fw, fb);
  ds_env_destroy(env);
}

static void runner_rates(const dsDevice* devs, int ndev, int T, double seconds, int quick) {
  dsEnvDef def = ds_default_env_def("runner");
  dsEnv* env = NULL;
  char err[512], name[32];
  if (ds_env_create(&def, &env, err, sizeof err)) die("runner", DS_ERR_INVALID, err);
  const dsModel* m = ds_env_model(env);
  printf("runner: %d links, %d dof, %d actions, %d vertices; instance-substeps per second\n", m->artic_nbody,
         m->artic_nv, m->artic_nu, m->nparticle);
  printf("%-8s %6s %18s %18s\n", "device", "B", "fwd substep/s", "fwd+bwd substep/s");
  static const int Bs[3] = {1, 64, 1024};
  for (int k = 0; k < ndev; k++)
    for (int j = 0; j < (quick ? 2 : 3); j++) {
      const double f = runner_rate(m, devs[k], Bs[j], T, 0, seconds);
      const double fb = runner_rate(m, devs[k], Bs[j], T, 1, seconds);
      printf("%-8s %6d %18.4g %18.4g\n", ds_device_name(devs[k], name, sizeof name), Bs[j], f, fb);
      fflush(stdout);
    }
  ds_env_destroy(env);
}

int main(int argc, char** argv) {
  dsDevice devs[8];
  int ndev = 0, batches[8], nb = 0, T = 40, quick = 0;
  double seconds = 1.0;
  char err[512], name[32];
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--device") == 0 && i + 1 < argc && ndev < 8) {
      if (ds_device_parse("--device", argv[++i], &devs[ndev], err, sizeof err) ||
          ds_device_check("--device", devs[ndev], err, sizeof err)) {
        fprintf(stderr, "bench_cuda: %s\n", err);
        return 2;
      }
      ndev++;
    } else if (strcmp(argv[i], "--batch") == 0 && i + 1 < argc && nb < 8) {
      batches[nb++] = atoi(argv[++i]);
    } else if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
      seconds = atof(argv[++i]);
    } else if (strcmp(argv[i], "--episode") == 0 && i + 1 < argc) {
      T = atoi(argv[++i]);
    } else if (strcmp(argv[i], "--quick") == 0 || strcmp(argv[i], "quick") == 0) {
      quick = 1;
    } else {
      fprintf(stderr,
              "usage: bench_cuda [--device cpu|cuda[:N]]... [--batch B]... [--seconds S] [--episode T] [--quick]\n");
      return 2;
    }
  }
  if (quick) seconds = 0.2;
  if (!ndev) {
    devs[ndev++] = ds_device_cpu();
    if (ds_cuda_device_count() > 0) devs[ndev++] = (dsDevice){DS_DEVICE_CUDA, 0};
  }
  if (!nb) {
    batches[nb++] = 1;
    batches[nb++] = 64;
    if (!quick) batches[nb++] = 1024;
  }
  dsEnv* env;
  const dsModel* m = gear_model(&env);
  dsBuildInfo bi;
  ds_build_info(&bi);
  printf("bench_cuda: control-fem gear, %d particles, %d tets; dsReal %d bytes; %d CPU threads; episode %d substeps\n",
         m->nparticle, m->ntet, bi.real_bytes, bi.max_threads, T);
  for (int k = 0; k < ndev; k++)
    if (devs[k].kind == DS_DEVICE_CUDA) {
      dsDeviceInfo info;
      if (!ds_cuda_device_info(devs[k].index, &info))
        printf("cuda:%d: %s, %.1f GiB, compute capability %d.%d, %d SMs\n", devs[k].index, info.name,
               (double)info.total_memory / (1 << 30), info.cc_major, info.cc_minor, info.multiprocessors);
    }
  double fw[8][8], fb[8][8];
  rate_table(m, devs, ndev, batches, nb, T, seconds, "tet", "", fw, fb);
  for (int k = 0; k < ndev; k++) {
    ds_device_name(devs[k], name, sizeof name);
    for (int j = 0; j < nb; j++)
      if (batches[j] == 1) {
        const double subs = 40.0 * 5760.0;
        printf("control-fem 40 iterations (40 x 5760 substeps fwd+bwd, B = 1) on %s: %.3g s projected from the rate "
               "above (physics only)\n",
               name, subs * m->ntet / fb[k][j]);
      }
    if (quick && devs[k].kind == DS_DEVICE_CPU) continue; /* a few seconds per episode */
    const double ep = episode_seconds(m, devs[k], 5760, 32, seconds);
    printf("control-fem episode as the env drives it (5760 substeps, activations every 32, B = 1) on %s: %.3g s fwd+bwd; "
           "40 iterations: %.3g s (physics only; goal < 10 s on a GPU)\n",
           name, ep, 40 * ep);
    fflush(stdout);
  }
  for (int k = 0; k < ndev; k++)
    if (devs[k].kind == DS_DEVICE_CUDA)
      for (int j = 0; j < nb; j++)
        if (batches[j] == 1024)
          printf("goal >= 1e9 forward tet-substeps/s at B = 1024 on %s: %s (%.3g)\n",
                 ds_device_name(devs[k], name, sizeof name), fw[k][j] >= 1e9 ? "met" : "NOT met", fw[k][j]);
  ds_env_destroy(env);
  cloth_rates(devs, ndev, batches, nb, T, seconds);
  runner_rates(devs, ndev, T, seconds, quick);
  return 0;
}

/* dsim's half of the side by side with MuJoCo (bench/mujoco-compare): loads
 * an MJCF file with dsim's loader and prints JSON on stdout.
 *
 *   bench_artic_mjcf MODEL traj [ground] < input
 *     input (whitespace separated): T; n and n joint names (hinge or slide);
 *     their n initial values (every other coordinate starts at the file's
 *     pose); T x nu actions. Prints those joints' values after each step
 *     0..T: {"dt":..,"nq":..,"nv":..,"nu":..,"joints":[..],"q":[[..],..]}.
 *   bench_artic_mjcf MODEL speed [ground]
 *     one thread, median of 5: forward steps/s over 1,000 steps, and the
 *     time to the gradient of the 1,000-step loss L = sum_t |q_t|^2 with
 *     respect to every action (forward + backward). Actions are fixed
 *     sinusoids (below), the start the file's pose with every hinge or slide
 *     at 0.3 rad (m) when `ground` is absent (pendula), at 0 with it.
 *   bench_artic_mjcf  (no arguments; `make bench`)
 *     speed of the bundled double pendulum, 16-link chain and runner.
 *
 * DS_BENCH_CLOCK=cpu times with the process's CPU clock instead of the
 * monotonic wall clock (on a loaded machine, time spent descheduled is then
 * not counted; bench/mujoco-compare --clock cpu does the same for MuJoCo).
 *
 * `ground` turns on dsim's ground plane (dsArticOptions.ground; the file's
 * plane geom is MuJoCo's). The file's <option timestep> sets dt. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsim/artic.h"
#include "dsim/model_file.h"
#include "bench/bench.h"

#define STEPS 1000
#define REPS 5
#define MAX_JOINTS 64
#define PI 3.14159265358979323846

static int g_cpu_clock;

/* seconds: the monotonic clock, or the process's CPU time with DS_BENCH_CLOCK=cpu */
static double clock_s(void) {
  if (!g_cpu_clock) return now();
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void die(const char* what, int rc, const char* msg) {
  fprintf(stderr, "bench_artic_mjcf: %s: %s (%s)\n", what, ds_err_name(rc), msg ? msg : "");
  exit(1);
}

static dsArticModel* load(const char* path, int ground) {
  dsArticOptions o = ds_artic_default_options();
  o.ground = ground;
  dsArticModel* m;
  char err[512];
  int rc = ds_artic_load_mjcf(path, &o, &m, err, sizeof err);
  if (rc) die(path, rc, err);
  return m;
}

static void* xcalloc(size_t n, size_t size) {
  void* p = calloc(n ? n : 1, size);
  if (!p) die("calloc", DS_ERR_NOMEM, "");
  return p;
}

/* The action of entry k at step t of the speed runs: a sinusoid per motor,
 * amplitude 0.5, period 0.5 s, phases spread over the motors. The same
 * formula is in mujoco_compare.py. */
static double speed_action(int t, int k, double dt) { return 0.5 * sin(4 * PI * t * dt + 0.7 * k); }

static int traj(const char* path, int ground) {
  dsArticModel* m = load(path, ground);
  const int nq = ds_artic_nq(m), nu = ds_artic_nu(m);
  int T, n;
  if (scanf("%d %d", &T, &n) != 2 || T < 1 || n < 0 || n > MAX_JOINTS) die("input", DS_ERR_PARSE, "T n");
  char names[MAX_JOINTS][64];
  int adr[MAX_JOINTS];
  for (int j = 0; j < n; j++) {
    int va;
    if (scanf("%63s", names[j]) != 1) die("input", DS_ERR_PARSE, "joint name");
    if (ds_artic_joint_adr(m, names[j], &adr[j], &va)) die("joint", DS_ERR_NOTFOUND, names[j]);
  }
  double* q0 = xcalloc((size_t)nq, sizeof(double));
  double* act = xcalloc((size_t)T * nu, sizeof(double));
  for (int j = 0; j < n; j++)
    if (scanf("%lf", &q0[adr[j]]) != 1) die("input", DS_ERR_PARSE, "initial value");
  for (size_t k = 0; k < (size_t)T * nu; k++)
    if (scanf("%lf", &act[k]) != 1) die("input", DS_ERR_PARSE, "action");
  dsArticData* d;
  int rc = ds_artic_data_create(m, T, &d);
  if (rc) die("data_create", rc, "");
  /* ball and free joints would need unit quaternions here; the compared models have none */
  if ((rc = ds_artic_reset(m, d, q0, NULL))) die("reset", rc, "");
  for (int t = 0; t < T; t++)
    if ((rc = ds_artic_step(m, d, act + (size_t)t * nu))) die("step", rc, "");
  printf("{\"dt\": %.17g, \"nq\": %d, \"nv\": %d, \"nu\": %d, \"joints\": [", ds_artic_dt(m), nq, ds_artic_nv(m), nu);
  for (int j = 0; j < n; j++) printf("%s\"%s\"", j ? ", " : "", names[j]);
  printf("], \"q\": [");
  for (int t = 0; t <= T; t++) {
    const double* q = ds_artic_q(d, t);
    printf("%s[", t ? ",\n" : "");
    for (int j = 0; j < n; j++) printf("%s%.17g", j ? ", " : "", q[adr[j]]);
    printf("]");
  }
  printf("]}\n");
  free(q0);
  free(act);
  ds_artic_data_free(d);
  ds_artic_model_free(m);
  return 0;
}

static void speed(const char* path, int ground) {
  dsArticModel* m = load(path, ground);
  const int nq = ds_artic_nq(m), nv = ds_artic_nv(m), nu = ds_artic_nu(m);
  const double dt = ds_artic_dt(m);
  dsArticData* d;
  int rc = ds_artic_data_create(m, STEPS, &d);
  if (rc) die("data_create", rc, "");
  double* q0 = xcalloc((size_t)nq, sizeof(double));
  double* act = xcalloc((size_t)STEPS * nu, sizeof(double));
  double* dq = xcalloc((size_t)(STEPS + 1) * nq, sizeof(double));
  double* ga = xcalloc((size_t)STEPS * nu, sizeof(double));
  for (int k = 0; k < nq; k++) q0[k] = ground ? 0 : 0.3; /* hinge-only models when no ground */
  for (int t = 0; t < STEPS; t++)
    for (int k = 0; k < nu; k++) act[(size_t)t * nu + k] = speed_action(t, k, dt);
  double tf[REPS], tg[REPS], loss = 0;
  for (int r = 0; r < REPS; r++) {
    ds_artic_reset(m, d, q0, NULL);
    double t0 = clock_s();
    for (int t = 0; t < STEPS; t++)
      if ((rc = ds_artic_step(m, d, act + (size_t)t * nu))) die("step", rc, "");
    tf[r] = clock_s() - t0;
    t0 = clock_s();
    loss = 0; /* L = sum_t |q_t|^2: dL/dq_t = 2 q_t */
    for (int t = 0; t <= STEPS; t++) {
      const double* q = ds_artic_q(d, t);
      for (int k = 0; k < nq; k++) loss += q[k] * q[k], dq[(size_t)t * nq + k] = 2 * q[k];
    }
    dsArticGrad g = {NULL, NULL, ga, NULL};
    if ((rc = ds_artic_backward(m, d, dq, NULL, &g))) die("backward", rc, "");
    tg[r] = tf[r] + clock_s() - t0;
  }
  double gnorm = 0;
  for (size_t k = 0; k < (size_t)STEPS * nu; k++) gnorm += ga[k] * ga[k];
  printf("{\"model\": \"%s\", \"nq\": %d, \"nv\": %d, \"nu\": %d, \"dt\": %.17g, \"steps\": %d, "
         "\"forward_steps_per_s\": %.6g, \"gradient_s\": %.6g, \"loss\": %.17g, \"grad_norm\": %.17g, "
         "\"grad_first\": %.17g}\n",
         path, nq, nv, nu, dt, STEPS, STEPS / median(tf, REPS), median(tg, REPS), loss, sqrt(gnorm),
         nu ? ga[0] : 0.0);
  free(q0);
  free(act);
  free(dq);
  free(ga);
  ds_artic_data_free(d);
  ds_artic_model_free(m);
}

int main(int argc, char** argv) {
  g_cpu_clock = getenv("DS_BENCH_CLOCK") && !strcmp(getenv("DS_BENCH_CLOCK"), "cpu");
  if (argc == 1) { /* `make bench`: the bundled models */
    const char* src = getenv("DS_SRCDIR") ? getenv("DS_SRCDIR") : ".";
    static const char* const models[] = {"double_pendulum.xml", "chain16.xml", "runner.xml"};
    char path[4096];
    for (int i = 0; i < 3; i++) {
      snprintf(path, sizeof path, "%s/configs/models/%s", src, models[i]);
      speed(path, i == 2);
    }
    return 0;
  }
  if (argc < 3) {
    fprintf(stderr, "usage: bench_artic_mjcf MODEL traj|speed [ground]\n");
    return 2;
  }
  const int ground = argc > 3 && !strcmp(argv[3], "ground");
  if (!strcmp(argv[2], "traj")) return traj(argv[1], ground);
  if (!strcmp(argv[2], "speed")) {
    speed(argv[1], ground);
    return 0;
  }
  fprintf(stderr, "bench_artic_mjcf: unknown mode '%s' (expected traj or speed)\n", argv[2]);
  return 2;
}

/* Lockstep batches (ds_batch_create_lockstep) with gradients: N envs reset,
 * stepped and gone back through together. For every class the batched
 * engine runs (walker, walker-springs, control-fem, beam, and control-cloth,
 * whose action is an initial velocity: its adjoint is read back from the
 * engine at substep 0), three envs with
 * their own seeds, one heavier, image observations and frames inside steps,
 * against three separate envs on the serial engine:
 *   - on one shared engine with its tape (def.batch_engine; a GPU runs the
 *     same driver): observations, images and rewards of every step bitwise
 *     equal; ds_batch_backward_adjoints (random observation, image and reward
 *     adjoints) and ds_batch_backward_loss: dL/d(actions), every parameter's
 *     gradient and the losses within 1e-10 of each block's largest magnitude
 *     (the engine sums in other groupings), with a wrong adjoint (the batch's
 *     rows shifted by one env) far outside that;
 *   - on separate serial engines (lockstep, backward across threads):
 *     bitwise equal;
 *   - an env crushed by its gravity until it fails mid-episode: its status
 *     names the failure, and the others' gradients are still the separate
 *     envs' (the backward leaves the failed instance out);
 *   - refusals: a masked reset, a member's own backward, a set_state in the
 *     middle of an episode (refused at the next step, naming the env), a
 *     backward of envs at different substeps; autoreset of all together.
 * With a CUDA device visible the shared batches also run on cuda:0. */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "dsim/batch.h"
#include "dsim/dsim.h"
#include "tests/dstest.h"

#define NB 3
#define W 10
#define MAXS 8 /* steps */

static int g_cuda = 0;

static dsEnvDef small_def(const char* name, int shared) {
  dsEnvDef def = ds_default_env_def(name);
  def.control_interval = 5;
  def.substeps = 3 * 5 + 2; /* 4 steps, the last one 2 substeps */
  def.render_interval = 3;
  def.render_last = 1;
  def.width = def.height = W;
  def.supersample = 1;
  def.obs_image = 1;
  def.gradients = 1;
  def.batch_engine = shared;
  if (shared && g_cuda) def.device = (dsDevice){DS_DEVICE_CUDA, 0};
  if (!strcmp(name, "control-cloth")) { /* one sheet size for every seed: one topology for the engine */
    char err[256];
    CHECK_INT_EQ(ds_env_def_set(&def, "scene.size_min", "5", err, sizeof err), 0);
    CHECK_INT_EQ(ds_env_def_set(&def, "scene.size_max", "5", err, sizeof err), 0);
  }
  return def;
}

static uint64_t g_rng = 0x9E3779B97F4A7C15ULL;
static double unif(double a, double b) {
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return a + (b - a) * ((double)(g_rng >> 11) / 9007199254740992.0);
}

static int heavier(dsEnv* e) {
  const dsReal* p;
  int n;
  if (ds_env_param(e, "particle.mass", &p, &n) || n > 4096) return -1;
  dsReal buf[4096];
  for (int i = 0; i < n; i++) buf[i] = p[i] * (dsReal)1.1;
  return ds_env_set_param(e, "particle.mass", buf, n);
}

/* one block of results per env: forward outputs, then gradients */
#define FWD (MAXS * (2048 + W * W * 4 + 1))
#define GRAD 65536
typedef struct Res {
  dsReal fwd[NB][FWD];
  dsReal grad[NB][2][GRAD]; /* [0]: adjoints backward, [1]: loss backward (then the loss) */
  int ngrad;
} Res;
static Res ref, got;

static dsReal adj_obs[NB * MAXS * 2048], adj_img[NB * MAXS * W * W * 4], adj_rew[NB * MAXS];

static void action_of(int env, int k, int A, dsReal* a) {
  for (int j = 0; j < A; j++) a[j] = (dsReal)(0.4 * sin(0.9 * k + 0.37 * j + 1.3 * env));
}

/* every parameter's gradient of e, then grad_actions, into out; returns the count */
static int collect_grads(dsEnv* e, const dsReal* ga, int nga, dsReal* out) {
  int n = 0;
  for (int k = 0; k < ds_param_count(); k++) {
    const dsReal* g;
    int c;
    if (ds_env_param_grad(e, ds_param_name(k), &g, &c) || c == 0) continue;
    if (n + c > GRAD - nga - 1) break;
    memcpy(out + n, g, (size_t)c * sizeof(dsReal));
    n += c;
  }
  memcpy(out + n, ga, (size_t)nga * sizeof(dsReal));
  return n + nga;
}

static void run_separate(const char* name, Res* r) {
  static dsReal ga[MAXS * 4096];
  for (int i = 0; i < NB; i++) {
    dsEnvDef def = small_def(name, 0);
    dsEnv* e = NULL;
    char err[512];
    CHECK_INT_EQ(ds_env_create(&def, &e, err, sizeof err), 0);
    if (!e) return;
    const int A = ds_env_action_size(e), O = ds_env_obs_size(e), S = ds_env_num_steps(e);
    CHECK_INT_EQ(ds_env_reset(e, 100 + (uint64_t)i, NULL, NULL), 0);
    if (i == 1) CHECK_INT_EQ(heavier(e), 0);
    dsReal a[4096], *f = r->fwd[i];
    for (int k = 0; k < S; k++) {
      action_of(i, k, A, a);
      int d;
      CHECK_INT_EQ(ds_env_step(e, a, f, f + O, f + O + W * W * 4, &d), 0);
      f += O + W * W * 4 + 1;
    }
    CHECK_INT_EQ(ds_env_backward_adjoints(e, adj_obs + (size_t)i * S * O, adj_img + (size_t)i * S * W * W * 4,
                                          adj_rew + (size_t)i * S, ga),
                 0);
    r->ngrad = collect_grads(e, ga, S * A, r->grad[i][0]);
    dsReal loss = 0;
    CHECK_INT_EQ(ds_env_backward_loss(e, &loss, ga), 0);
    collect_grads(e, ga, S * A, r->grad[i][1]);
    r->grad[i][1][r->ngrad] = loss;
    ds_env_destroy(e);
  }
}

/* A lockstep batch of NB envs of class name (NULL, the message printed, on failure). */
static dsBatch* make_lockstep(const char* name, int shared) {
  dsEnvDef def = small_def(name, shared);
  dsBatch* b = NULL;
  char err[512];
  CHECK_INT_EQ(ds_batch_create_lockstep(&def, NB, &b, err, sizeof err), 0);
  if (!b) fprintf(stderr, "%s\n", err);
  return b;
}

static void run_lockstep(const char* name, int shared, Res* r) {
  dsBatch* b = make_lockstep(name, shared);
  if (!b) return;
  dsEnv* e0 = ds_batch_env(b, 0);
  const int A = ds_env_action_size(e0), O = ds_env_obs_size(e0), S = ds_env_num_steps(e0);
  CHECK(A <= 4096 && O <= 2048 && S <= MAXS);
  uint64_t seeds[NB] = {100, 101, 102};
  int status[NB];
  uint8_t mask[NB] = {1, 0, 1};
  CHECK_INT_EQ(ds_batch_reset(b, seeds, mask, NULL, NULL, status), DS_ERR_STATE); /* all or none */
  CHECK(strstr(ds_batch_last_error(b), "env 1") && strstr(ds_batch_last_error(b), "together"));
  CHECK_INT_EQ(ds_batch_reset(b, seeds, NULL, NULL, NULL, status), 0);
  CHECK_INT_EQ(heavier(ds_batch_env(b, 1)), 0);
  static dsReal act[NB * 4096], obs[NB * 2048], img[NB * W * W * 4], ga[NB * MAXS * 4096];
  dsReal rew[NB];
  uint8_t done[NB];
  for (int k = 0; k < S; k++) {
    for (int i = 0; i < NB; i++) action_of(i, k, A, act + (size_t)i * A);
    CHECK_INT_EQ(ds_batch_step(b, act, obs, img, rew, done, status, DS_BATCH_AUTORESET), 0);
    for (int i = 0; i < NB; i++) {
      dsReal* f = r->fwd[i] + (size_t)k * (O + W * W * 4 + 1);
      memcpy(f, obs + (size_t)i * O, (size_t)O * sizeof(dsReal));
      memcpy(f + O, img + (size_t)i * W * W * 4, W * W * 4 * sizeof(dsReal));
      f[O + W * W * 4] = rew[i];
    }
  }
  if (shared) /* a member goes back with the batch only */
    CHECK_INT_EQ(ds_env_backward_loss(ds_batch_env(b, 2), NULL, ga), DS_ERR_STATE);
  CHECK_INT_EQ(ds_batch_backward_adjoints(b, adj_obs, adj_img, adj_rew, ga, status), 0);
  for (int i = 0; i < NB; i++) r->ngrad = collect_grads(ds_batch_env(b, i), ga + (size_t)i * S * A, S * A, r->grad[i][0]);
  dsReal losses[NB];
  CHECK_INT_EQ(ds_batch_backward_loss(b, losses, ga, status), 0);
  for (int i = 0; i < NB; i++) {
    collect_grads(ds_batch_env(b, i), ga + (size_t)i * S * A, S * A, r->grad[i][1]);
    r->grad[i][1][r->ngrad] = losses[i];
  }
  /* the episode is over for all: autoreset resets all together */
  CHECK_INT_EQ(ds_batch_step(b, act, obs, NULL, rew, done, status, DS_BATCH_AUTORESET), 0);
  for (int i = 0; i < NB; i++) CHECK_INT_EQ(status[i], DS_BATCH_RESET);
  CHECK_INT_EQ(ds_batch_step(b, act, obs, NULL, rew, done, status, 0), 0);
  if (shared) {
    /* one env's state changed in the middle of the episode: refused, named */
    static dsReal st[65536];
    const int n = ds_env_state_size(e0);
    CHECK(n <= 65536);
    CHECK_INT_EQ(ds_env_get_state(ds_batch_env(b, 1), st, n), 0);
    CHECK_INT_EQ(ds_env_set_state(ds_batch_env(b, 1), st, n), 0);
    CHECK(ds_batch_step(b, act, obs, NULL, rew, done, status, 0) == DS_ERR_STATE);
    CHECK(strstr(ds_batch_last_error(b), "env 1 was changed") && strstr(ds_batch_last_error(b), "lockstep"));
  }
  ds_batch_destroy(b);
}

static int close_to(const dsReal* a, const dsReal* b, int n, double tol);

/* a refused action (NaN) on a shared tape: that env waits for the next reset
 * of the batch (it cannot catch up with the others' tape), the others step
 * and go back as before; after the reset all step again */
static void refused_action(void) {
  dsBatch* b = make_lockstep("walker", 1);
  if (!b) return;
  const int A = ds_env_action_size(ds_batch_env(b, 0));
  static dsReal act[NB * 4096], ga[NB * MAXS * 4096];
  int status[NB];
  CHECK_INT_EQ(ds_batch_reset(b, NULL, NULL, NULL, NULL, status), 0);
  for (int i = 0; i < NB; i++) action_of(i, 0, A, act + (size_t)i * A);
  CHECK_INT_EQ(ds_batch_step(b, act, NULL, NULL, NULL, NULL, status, 0), 0);
  act[0] = (dsReal)NAN;
  CHECK_INT_EQ(ds_batch_step(b, act, NULL, NULL, NULL, NULL, status, 0), DS_ERR_RANGE);
  CHECK(status[0] == DS_ERR_RANGE && status[1] == 0 && status[2] == 0);
  act[0] = 0;
  CHECK_INT_EQ(ds_batch_step(b, act, NULL, NULL, NULL, NULL, status, DS_BATCH_AUTORESET), DS_ERR_STATE);
  CHECK(status[0] == DS_ERR_STATE && status[1] == 0 && status[2] == 0);
  CHECK(ds_batch_backward_loss(b, NULL, ga, status) < 0);
  CHECK(status[0] < 0 && status[1] == 0 && status[2] == 0);
  CHECK_INT_EQ(ds_batch_reset(b, NULL, NULL, NULL, NULL, status), 0);
  CHECK_INT_EQ(ds_batch_step(b, act, NULL, NULL, NULL, NULL, status, 0), 0);
  ds_batch_destroy(b);
}

/* control-fem, env 2 crushed: it fails, envs 0 and 1 keep their gradients */
static void crushed(void) {
  dsBatch* b = make_lockstep("control-fem", 1);
  if (!b) return;
  dsEnv* e0 = ds_batch_env(b, 0);
  const int A = ds_env_action_size(e0), S = ds_env_num_steps(e0);
  uint64_t seeds[NB] = {100, 101, 102};
  int status[NB];
  CHECK_INT_EQ(ds_batch_reset(b, seeds, NULL, NULL, NULL, status), 0);
  CHECK_INT_EQ(heavier(ds_batch_env(b, 1)), 0);
  const dsReal* g;
  int n;
  CHECK_INT_EQ(ds_env_param(ds_batch_env(b, 2), "gravity", &g, &n), 0);
  dsReal crush[3] = {g[0] * 2000, g[1] * 2000, g[2] * 2000};
  CHECK_INT_EQ(ds_env_set_param(ds_batch_env(b, 2), "gravity", crush, 3), 0);
  static dsReal act[NB * 4096], obs[NB * 2048], img[NB * W * W * 4], ga[NB * MAXS * 4096];
  dsReal rew[NB];
  int failed_at = -1;
  for (int k = 0; k < S; k++) {
    for (int i = 0; i < NB; i++) action_of(i, k, A, act + (size_t)i * A);
    const int rc = ds_batch_step(b, act, obs, img, rew, NULL, status, 0);
    CHECK(status[0] == 0 && status[1] == 0);
    if (rc && failed_at < 0) {
      failed_at = k;
      CHECK(status[2] == DS_ERR_INVERTED || status[2] == DS_ERR_DIVERGED);
      CHECK(strstr(ds_batch_last_error(b), "env 2: step ") != NULL);
      printf("crushed env: %s\n", ds_batch_last_error(b));
    }
  }
  CHECK(failed_at >= 0);
  CHECK(ds_batch_backward_adjoints(b, adj_obs, adj_img, adj_rew, ga, status) < 0);
  CHECK(status[0] == 0 && status[1] == 0 && status[2] < 0);
  for (int i = 0; i < 2; i++) {
    dsReal* out = got.grad[i][0];
    collect_grads(ds_batch_env(b, i), ga + (size_t)i * S * A, S * A, out);
    if (!close_to(ref.grad[i][0], out, ref.ngrad, DS_SINGLE ? 1e-4 : 1e-10))
      DST_FAIL_AT("crushed batch: env %d's gradients differ", i);
  }
  ds_batch_destroy(b);
}

/* ||a - b||_inf <= tol * ||a||_inf */
static int close_to(const dsReal* a, const dsReal* b, int n, double tol) {
  double big = 0, d = 0;
  for (int k = 0; k < n; k++) {
    if (fabs((double)a[k]) > big) big = fabs((double)a[k]);
    const double e = fabs((double)a[k] - (double)b[k]);
    if (e > d || e != e) d = e;
  }
  return d <= tol * (big > 0 ? big : 1e-300);
}

static void compare(const char* name, int shared, int nfwd) {
  /* the engine sums in other groupings: rounding of dsReal (float: --enable-single) */
  const double ftol = shared && g_cuda ? 1e-9 : 0, gtol = shared ? (DS_SINGLE ? 1e-4 : 1e-10) : 0;
  CHECK_INT_EQ(got.ngrad, ref.ngrad);
  for (int i = 0; i < NB; i++) {
    if (!(ftol == 0 ? memcmp(ref.fwd[i], got.fwd[i], (size_t)nfwd * sizeof(dsReal)) == 0
                    : close_to(ref.fwd[i], got.fwd[i], nfwd, ftol)))
      DST_FAIL_AT("%s (shared %d): env %d: observations, images or rewards differ", name, shared, i);
    for (int w = 0; w < 2; w++) {
      const int n = ref.ngrad + w;
      if (!(gtol == 0 ? memcmp(ref.grad[i][w], got.grad[i][w], (size_t)n * sizeof(dsReal)) == 0
                      : close_to(ref.grad[i][w], got.grad[i][w], n, gtol)))
        DST_FAIL_AT("%s (shared %d): env %d: %s backward differs", name, shared, i, w ? "loss" : "adjoints");
    }
  }
  /* the tolerance would catch a wrong adjoint: another env's gradient is far off */
  CHECK(!close_to(ref.grad[0][0], got.grad[1][0], ref.ngrad, DS_SINGLE ? 1e-3 : 1e-6));
}

int main(void) {
  for (size_t k = 0; k < sizeof adj_obs / sizeof adj_obs[0]; k++) adj_obs[k] = (dsReal)unif(-1, 1);
  for (size_t k = 0; k < sizeof adj_img / sizeof adj_img[0]; k++) adj_img[k] = (dsReal)unif(-1, 1);
  for (size_t k = 0; k < sizeof adj_rew / sizeof adj_rew[0]; k++) adj_rew[k] = (dsReal)unif(-1, 1);
  const char* names[] = {"walker", "walker-springs", "control-fem", "beam", "control-cloth"};
  for (int c = 0; c < 5; c++) {
    dsEnvDef def = small_def(names[c], 0);
    dsEnv* e = NULL;
    char err[512];
    CHECK_INT_EQ(ds_env_create(&def, &e, err, sizeof err), 0);
    if (!e) continue;
    const int S = ds_env_num_steps(e), O = ds_env_obs_size(e);
    ds_env_destroy(e);
    CHECK(S <= MAXS && O <= 2048);
    memset(&ref, 0, sizeof ref);
    run_separate(names[c], &ref);
    const int nfwd = S * (O + W * W * 4 + 1);
    for (g_cuda = 0; g_cuda <= (ds_cuda_device_count() > 0); g_cuda++)
      for (int shared = g_cuda; shared <= 1; shared++) {
        printf("%s: lockstep on %s\n", names[c], shared ? (g_cuda ? "one engine on cuda:0" : "one engine (CPU)") : "separate engines");
        memset(&got, 0, sizeof got);
        run_lockstep(names[c], shared, &got);
        compare(names[c], shared, nfwd);
      }
    g_cuda = 0;
    if (c == 2) crushed(); /* ref holds control-fem's separate envs */
    if (c == 0) refused_action();
  }
  /* control-cloth drawing its sheet size per episode: one engine holds one
     size, so a reset to another is refused, saying how to give it one */
  dsEnvDef def = ds_default_env_def("control-cloth");
  def.batch_engine = 1;
  dsBatch* b = NULL;
  char err[512];
  CHECK_INT_EQ(ds_batch_create_lockstep(&def, NB, &b, err, sizeof err), 0);
  if (b) {
    uint64_t seeds[NB] = {1, 2, 3};
    int status[NB];
    CHECK(ds_batch_reset(b, seeds, NULL, NULL, NULL, status) == DS_ERR_STATE);
    CHECK_STR_CONTAINS(ds_batch_last_error(b), "another size");
    CHECK_STR_CONTAINS(ds_batch_last_error(b), "scene.size_min = scene.size_max");
    ds_batch_destroy(b);
  }
  return DST_RESULT();
}

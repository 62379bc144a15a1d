/* runner: the articulated planar runner (configs/models/runner.xml) as an
 * env (envs/runner.c), over a short episode (0.1 s) in which the feet reach
 * the ground (they start 1 cm above it).
 *  - The model: six actions, nine state entries, the bundled file found.
 *  - The env's gradient of the centre-of-mass loss and of a dense-reward
 *    adjoint (sum_k w_k r_k, r_k the step's centre-of-mass progress in x)
 *    with respect to every action and three named parameters (the torso's
 *    mass, a hip motor's gear, a knee's damping) against central
 *    differences in double (rtol 2e-3 on components above 2% of the
 *    largest; a 1% change of the largest is rejected).
 *  - One thread = two threads, bit for bit.
 *  - Over a full episode, the dense rewards sum to the metric (Δx).
 *  - scene.model naming no file, and a dt other than the file's: refused,
 *    naming the key. */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dsim/artic.h"
#include "dsim/engine.h"
#include "dsim/env.h"
#include "dsim/model_file.h"
#include "tests/dstest.h"
#include "tests/gradcheck.h"
#include "tests/envcheck.h"

#define NA_MAX 64

static dsEnv* make(int reward_kind, int substeps) {
  dsEnvDef def = ds_default_env_def("runner");
  CHECK(def.cls != NULL);
  if (!def.cls) return NULL;
  def.substeps = substeps;
  def.control_interval = 20;
  def.render_interval = 20;
  def.width = def.height = 16;
  def.supersample = 1;
  def.loss_kind = DS_ENV_LOSS_COM;
  def.reward_kind = reward_kind;
  dsEnv* env = NULL;
  char err[1024] = "";
  int rc = ds_env_create(&def, &env, err, sizeof err);
  if (rc) fprintf(stderr, "create runner: %s\n", err);
  CHECK_INT_EQ(rc, 0);
  return env;
}

/* the episode's loss (w NULL) or sum_k w_k r_k */
static double episode(dsEnv* env, const dsReal* a, const dsReal* w) {
  if (ds_env_reset(env, 1, NULL, NULL)) return NAN;
  const int S = ds_env_num_steps(env), n = ds_env_action_size(env);
  double J = 0;
  for (int k = 0; k < S; k++) {
    dsReal r = 0;
    if (ds_env_step(env, a + k * n, NULL, NULL, &r, NULL)) {
      fprintf(stderr, "step: %s\n", ds_env_last_error(env));
      return NAN;
    }
    if (w) J += (double)w[k] * r;
  }
  if (w) return J;
  dsReal L;
  ds_env_loss(env, &L);
  return L;
}

static double objective(dsEnv* env, const dsReal* a, const void* w) { return episode(env, a, (const dsReal*)w); }

enum { NP = 3 };
static const EnvParam params[NP] = {{"body.torso.mass", 0}, {"actuator.bhip.gear", 0}, {"joint.fknee.damping", 0}};

/* d(loss or dense objective)/d(actions, parameters) against central differences */
static void grad_check(int dense) {
  dsEnv* env = make(dense ? DS_ENV_REWARD_DENSE : DS_ENV_REWARD_SPARSE, 100);
  if (!env) return;
  const int S = ds_env_num_steps(env), n = ds_env_action_size(env), na = S * n;
  CHECK_INT_EQ(n, 6);
  CHECK(na <= NA_MAX);
  dsReal a[NA_MAX], ga[NA_MAX], w[NA_MAX];
  for (int i = 0; i < na; i++) a[i] = (dsReal)(0.8 * sin(1.3 * i + 0.4));
  for (int k = 0; k < S; k++) w[k] = (dsReal)(1 + 0.5 * cos(0.9 * k));
  const dsReal* wp = dense ? w : NULL;
  const double J0 = episode(env, a, wp);
  if (dense) {
    CHECK_INT_EQ(ds_env_backward_adjoints(env, NULL, NULL, w, ga), 0);
  } else {
    dsReal L;
    CHECK_INT_EQ(ds_env_backward_loss(env, &L, ga), 0);
    CHECK(L == J0 && J0 > 0);
  }
  CHECK(isfinite(J0) && J0 != 0);
  /* in contact: free fall would have taken the root 4.9 cm down by now
     (g t^2 / 2), the ground holds it within the 1 cm gap and a few mm */
  const double rootz = ds_env_data(env)->artic_state[1];
  printf("root z after %d steps: %.4f m\n", S, rootz);
  CHECK(rootz > -0.03 && rootz < -0.005);
  double an[NA_MAX + NP], fd[NA_MAX + NP];
  for (int i = 0; i < na; i++) an[i] = ga[i];
  env_param_grads(env, params, NP, an + na);
  env_fd(env, objective, wp, a, na, 1e-5, 1, params, NP, 1e-6, fd);
  check_grad_loose(dense ? "runner dense actions" : "runner com actions", an, fd, na, 2e-3, 2e-2, 1e-4);
  check_grad_loose(dense ? "runner dense parameters" : "runner com parameters", an + na, fd + na, NP, 2e-3, 2e-2, 1e-4);
  ds_env_destroy(env);
}

/* loss, reward sum and every gradient of one episode */
static int run_all(dsEnv* env, double* out) {
  const int S = ds_env_num_steps(env), n = ds_env_action_size(env);
  dsReal a[NA_MAX], ga[NA_MAX], L;
  for (int i = 0; i < S * n; i++) a[i] = (dsReal)cos(0.7 * i);
  episode(env, a, NULL);
  if (ds_env_backward_loss(env, &L, ga)) return 0;
  int k = 0;
  out[k++] = L;
  for (int i = 0; i < S * n; i++) out[k++] = ga[i];
  const dsReal* g;
  int c;
  ds_env_param_grad(env, "artic.param", &g, &c);
  for (int i = 0; i < c && k < 512; i++) out[k++] = g[i];
  return k;
}

static void bitwise(void) {
  dsEnv* env = make(DS_ENV_REWARD_SPARSE, 100);
  if (!env) return;
  static double r1[512], r2[512];
  ds_set_num_threads(1);
  const int n1 = run_all(env, r1);
  ds_set_num_threads(2);
  const int n2 = run_all(env, r2);
  ds_set_num_threads(1);
  CHECK(n1 > 30);
  CHECK_INT_EQ(n1, n2);
  CHECK(memcmp(r1, r2, (size_t)n1 * sizeof(double)) == 0);
  ds_env_destroy(env);
}

/* the state ends with q, qd (9 + 9); dense rewards sum to the metric */
static void model_and_rewards(void) {
  dsEnv* env = make(DS_ENV_REWARD_DENSE, 400);
  if (!env) return;
  CHECK_INT_EQ(ds_env_model(env)->artic_nq, 9);
  CHECK_INT_EQ(ds_env_model(env)->artic_nv, 9);
  CHECK(ds_env_model(env)->nparticle > 0 && ds_env_model(env)->nface > 0);
  CHECK_CLOSE(ds_env_action_scale(env), 1, 0, 0);
  const int S = ds_env_num_steps(env), n = ds_env_action_size(env);
  ds_env_reset(env, 1, NULL, NULL);
  double sum = 0;
  for (int k = 0; k < S; k++) {
    dsReal a[6], r;
    for (int j = 0; j < n; j++) a[j] = (dsReal)sin(0.5 * k + j);
    CHECK_INT_EQ(ds_env_step(env, a, NULL, NULL, &r, NULL), 0);
    sum += r;
  }
  dsReal metric = 0;
  CHECK_INT_EQ(ds_env_metric(env, &metric), 0);
  printf("dense reward sum %.9g, metric %.9g\n", sum, metric);
  CHECK_CLOSE(sum, metric, 1e-9, 1e-12);
  CHECK(metric != 0);
  ds_env_destroy(env);
}

static void refusals(void) {
  dsEnvDef def = ds_default_env_def("runner");
  char err[1024] = "";
  dsEnv* env = NULL;
  CHECK_INT_EQ(ds_env_def_set(&def, "scene.model", "no-such-model.xml", NULL, 0), 0);
  CHECK(ds_env_create(&def, &env, err, sizeof err) < 0);
  CHECK(env == NULL);
  CHECK_STR_CONTAINS(err, "scene.model");
  CHECK_STR_CONTAINS(err, "no-such-model.xml");
  def = ds_default_env_def("runner");
  def.dt = (dsReal)5e-4;
  err[0] = 0;
  CHECK(ds_env_create(&def, &env, err, sizeof err) < 0);
  CHECK(env == NULL);
  CHECK_STR_CONTAINS(err, "physics.dt");
}

int main(void) {
  char err[512];
  dsArticModel* m = NULL;
  const char* src = getenv("DS_SRCDIR");
  char path[1024];
  snprintf(path, sizeof path, "%s/configs/models/runner.xml", src ? src : ".");
  if (ds_artic_load(path, NULL, &m, err, sizeof err) == DS_ERR_UNSUPPORTED) DST_SKIP("built without libxml2: %s", err);
  ds_artic_model_free(m);
  ds_set_num_threads(1);
  model_and_rewards();
  grad_check(0);
  grad_check(1);
  bitwise();
  refusals();
  return DST_RESULT();
}

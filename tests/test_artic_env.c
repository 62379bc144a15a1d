/* pendulum and double-pendulum: articulations inside the env framework
 * (engine/artic_model.c, envs/pendulum.c).
 *  - The env's gradient of the image loss (every frame, 24 x 24) and of a
 *    state loss (the centre-of-mass loss) with respect to every action and
 *    to the named articulation parameters (link mass, length, damping,
 *    initial angle) against central differences in double through
 *    rendering (rtol 2e-3 on components above 2% of the largest; a 1%
 *    change of the largest is rejected); and of a weighted sum of the full
 *    state observations (every vertex's position and velocity: the
 *    velocity's adjoint through the links' spatial velocities), and of the
 *    joint observations (q, qd) with a full and a checkpointed tape and on
 *    the batched engine; the
 *    joint observation is the state's articulation part; refused for a
 *    model without an articulation.
 *  - Checkpointed tape (every 4th state) = full tape, bit for bit; one
 *    thread = two threads, bit for bit.
 *  - A saved state restores the episode bit for bit.
 *  - The free pendulum swings to the mirror angle (damping 0).
 *  - The batched engine (physics.batched_engine): the double pendulum's loss
 *    and action gradient as on the serial engine (the loss bit for bit,
 *    the gradient to 1e-10: the batched backward sums in other groupings).
 *  - Refusals: a mixed model, a dt that differs. */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dsim/artic.h"
#include "dsim/engine.h"
#include "dsim/env.h"
#include "dsim/mesh.h"
#include "tests/dstest.h"
#include "tests/gradcheck.h"
#include "tests/envcheck.h"

#define NSTEP_MAX 16

static dsEnv* make(const char* name, int loss_kind, int ckpt, int batched) {
  dsEnvDef def = ds_default_env_def(name);
  CHECK(def.cls != NULL);
  def.substeps = 96;
  def.control_interval = 16;
  def.render_interval = 16;
  def.width = def.height = 24;
  def.supersample = 1;
  def.sigma = 1e-4;
  def.gamma = 1e-3;
  def.loss_kind = loss_kind;
  def.checkpoint_every = ckpt;
  def.batch_engine = batched;
  if (loss_kind == DS_ENV_LOSS_COM) def.goal_x_min = def.goal_x_max = 0.3;
  dsEnv* env = NULL;
  char err[512] = "";
  int rc = ds_env_create(&def, &env, err, sizeof err);
  if (rc) fprintf(stderr, "create %s: %s\n", name, err);
  CHECK_INT_EQ(rc, 0);
  return env;
}

static double episode(dsEnv* env, const dsReal* a) {
  if (ds_env_reset(env, 1, NULL, NULL)) return NAN;
  const int S = ds_env_num_steps(env), n = ds_env_action_size(env);
  for (int k = 0; k < S; k++)
    if (ds_env_step(env, a + k * n, NULL, NULL, NULL, NULL)) {
      fprintf(stderr, "step: %s\n", ds_env_last_error(env));
      return NAN;
    }
  dsReal L;
  ds_env_loss(env, &L);
  return L;
}

static double objective(dsEnv* env, const dsReal* a, const void* ctx) {
  (void)ctx;
  return episode(env, a);
}

/* d loss / d(actions, parameters) against central differences */
static void grad_check(const char* name, int loss_kind, const char* const* params, int np) {
  dsEnv* env = make(name, loss_kind, 1, 0);
  if (!env) return;
  const int S = ds_env_num_steps(env), n = ds_env_action_size(env), na = S * n;
  dsReal a[NSTEP_MAX * 2], ga[NSTEP_MAX * 2];
  for (int i = 0; i < na; i++) a[i] = (dsReal)(1.5 * sin(1.3 * i + 0.4));
  const double L0 = episode(env, a);
  dsReal L;
  CHECK_INT_EQ(ds_env_backward_loss(env, &L, ga), 0);
  CHECK(L == L0 && L0 > 0);
  double an[NSTEP_MAX * 2 + 8], fd[NSTEP_MAX * 2 + 8];
  EnvParam ep[8];
  CHECK(np <= 8);
  for (int p = 0; p < np && p < 8; p++) ep[p] = (EnvParam){params[p], 0};
  for (int i = 0; i < na; i++) an[i] = ga[i];
  env_param_grads(env, ep, np, an + na);
  env_fd(env, objective, NULL, a, na, 1e-5, 1, ep, np, 1e-6, fd);
  char what[96];
  snprintf(what, sizeof what, "%s %s actions", name, loss_kind == DS_ENV_LOSS_COM ? "com" : "image");
  check_grad_loose(what, an, fd, na, 2e-3, 2e-2, 1e-4);
  snprintf(what, sizeof what, "%s %s parameters", name, loss_kind == DS_ENV_LOSS_COM ? "com" : "image");
  check_grad_loose(what, an + na, fd + na, np, 2e-3, 2e-2, 1e-4);
  ds_env_destroy(env);
}

/* L = sum_k w_k . obs_k (the full state: positions and velocities) by
 * ds_env_backward_adjoints, against central differences in the actions */
static double obs_episode(dsEnv* env, const dsReal* a, const dsReal* w, dsReal* obs) {
  if (ds_env_reset(env, 1, NULL, NULL)) return NAN;
  const int S = ds_env_num_steps(env), n = ds_env_action_size(env), no = ds_env_obs_size(env);
  double L = 0;
  for (int k = 0; k < S; k++) {
    if (ds_env_step(env, a + k * n, obs, NULL, NULL, NULL)) return NAN;
    for (int i = 0; i < no; i++) L += (double)w[(size_t)k * no + i] * obs[i];
  }
  return L;
}

static void obs_check(int obs_state, int ckpt, int batched) {
  dsEnvDef def = ds_default_env_def("double-pendulum");
  def.substeps = 96;
  def.control_interval = 16;
  def.width = def.height = 8;
  def.obs_state = obs_state;
  def.checkpoint_every = ckpt;
  def.batch_engine = batched;
  dsEnv* env = NULL;
  CHECK_INT_EQ(ds_env_create(&def, &env, NULL, 0), 0);
  if (!env) return;
  if (obs_state == DS_OBS_STATE_JOINTS) { /* q1, q2, qd1, qd2: the state's articulation part */
    CHECK_INT_EQ(ds_env_obs_size(env), 4);
    dsReal o[4], st[4096];
    CHECK_INT_EQ(ds_env_reset(env, 1, o, NULL), 0);
    const int ns = ds_env_state_size(env);
    CHECK(ns <= 4096);
    CHECK_INT_EQ(ds_env_get_state(env, st, ns), 0);
    CHECK(memcmp(o, st + ns - 4, sizeof o) == 0);
  }
  const int S = ds_env_num_steps(env), n = ds_env_action_size(env), no = ds_env_obs_size(env), na = S * n;
  dsReal* w = malloc(sizeof(dsReal) * (size_t)S * no);
  dsReal* obs = malloc(sizeof(dsReal) * (size_t)no);
  for (int i = 0; i < S * no; i++) w[i] = (dsReal)sin(0.37 * i + 0.1);
  dsReal a[NSTEP_MAX * 2], ga[NSTEP_MAX * 2];
  double an[NSTEP_MAX * 2], fd[NSTEP_MAX * 2];
  for (int i = 0; i < na; i++) a[i] = (dsReal)(1.5 * sin(1.3 * i + 0.4));
  obs_episode(env, a, w, obs);
  CHECK_INT_EQ(ds_env_backward_adjoints(env, w, NULL, NULL, ga), 0);
  for (int i = 0; i < na; i++) {
    an[i] = ga[i];
    const dsReal s0 = a[i], h = 1e-5;
    a[i] = s0 + h;
    const double lp = obs_episode(env, a, w, obs);
    a[i] = s0 - h;
    const double lm = obs_episode(env, a, w, obs);
    a[i] = s0;
    fd[i] = (lp - lm) / (2 * h);
  }
  char what[96];
  snprintf(what, sizeof what, "double-pendulum %s observations (checkpoint every %d%s), actions",
           obs_state == DS_OBS_STATE_JOINTS ? "joint" : "full-state", ckpt, batched ? ", batched engine" : "");
  check_grad_loose(what, an, fd, na, 2e-3, 2e-2, 1e-4);
  free(w);
  free(obs);
  ds_env_destroy(env);
}

/* observation.state joints on a model without an articulation */
static void joints_refused(void) {
  dsEnvDef def = ds_default_env_def("control-fem");
  def.obs_state = DS_OBS_STATE_JOINTS;
  dsEnv* env = NULL;
  char err[512] = "";
  CHECK_INT_EQ(ds_env_create(&def, &env, err, sizeof err), DS_ERR_INVALID);
  CHECK(env == NULL);
  CHECK_STR_CONTAINS(err, "observation.state joints");
}

/* loss and every gradient of one episode, for bitwise comparisons */
static int run_all(dsEnv* env, double* out) {
  const int S = ds_env_num_steps(env), n = ds_env_action_size(env);
  dsReal a[NSTEP_MAX * 2], ga[NSTEP_MAX * 2], L;
  for (int i = 0; i < S * n; i++) a[i] = (dsReal)(2 * cos(0.7 * i));
  episode(env, a);
  if (ds_env_backward_loss(env, &L, ga)) return 0;
  int k = 0;
  out[k++] = L;
  for (int i = 0; i < S * n; i++) out[k++] = ga[i];
  const dsReal* g;
  int c;
  ds_env_param_grad(env, "artic.param", &g, &c);
  for (int i = 0; i < c; i++) out[k++] = g[i];
  return k;
}

static void bitwise(void) {
  dsEnv* full = make("double-pendulum", DS_ENV_LOSS_IMAGE_SUM, 1, 0);
  dsEnv* ck = make("double-pendulum", DS_ENV_LOSS_IMAGE_SUM, 4, 0);
  if (!full || !ck) return;
  static double r1[256], r2[256], r3[256];
  ds_set_num_threads(1);
  const int n1 = run_all(full, r1);
  const int n2 = run_all(ck, r2);
  ds_set_num_threads(2);
  const int n3 = run_all(full, r3);
  CHECK(n1 > 10);
  CHECK_INT_EQ(n1, n2);
  CHECK_INT_EQ(n1, n3);
  CHECK(memcmp(r1, r2, (size_t)n1 * sizeof(double)) == 0);
  CHECK(memcmp(r1, r3, (size_t)n1 * sizeof(double)) == 0);
  /* a state saved at a step restores the rest of the episode bit for bit */
  const int ss = ds_env_state_size(full);
  CHECK_INT_EQ(ss, 1 + 6 * ds_env_model(full)->nparticle + 4);
  dsReal* st = malloc(sizeof(dsReal) * (size_t)ss);
  dsReal a[2] = {1, -1}, L1, L2;
  ds_env_reset(full, 1, NULL, NULL);
  ds_env_step(full, a, NULL, NULL, NULL, NULL);
  ds_env_get_state(full, st, ss);
  for (int k = 1; k < ds_env_num_steps(full); k++) ds_env_step(full, a, NULL, NULL, NULL, NULL);
  ds_env_loss(full, &L1);
  CHECK_INT_EQ(ds_env_set_state(full, st, ss), 0);
  for (int k = 1; k < ds_env_num_steps(full); k++) ds_env_step(full, a, NULL, NULL, NULL, NULL);
  ds_env_loss(full, &L2);
  CHECK(L1 == L2);
  free(st);
  ds_env_destroy(full);
  ds_env_destroy(ck);
}

/* Undamped, unforced: released at 60 degrees, the bob reaches -60 degrees
 * (the centre's lowest x) half a period later; semi-implicit Euler keeps
 * the amplitude to O(dt). */
static void swing(void) {
  dsEnvDef def = ds_default_env_def("pendulum");
  def.substeps = 2400;
  def.width = def.height = 8;
  ds_env_def_set(&def, "joint1.damping", "0", NULL, 0);
  dsEnv* env = NULL;
  CHECK_INT_EQ(ds_env_create(&def, &env, NULL, 0), 0);
  if (!env) return;
  ds_env_reset(env, 0, NULL, NULL);
  const dsData* d = ds_env_data(env);
  double xmin = 1e9;
  const dsReal zero = 0;
  for (int k = 0; k < ds_env_num_steps(env); k++) {
    ds_env_step(env, &zero, NULL, NULL, NULL, NULL);
    xmin = fmin(xmin, d->artic_state[0]);
  }
  printf("swing: min angle %.4f rad (expected -%.4f)\n", xmin, 60 * 3.14159265358979 / 180);
  CHECK_CLOSE(xmin, -60 * 3.14159265358979 / 180, 0.02, 0);
  ds_env_destroy(env);
}

/* the builder refuses mixed models and a dt that is not the articulation's */
static void refusals(void) {
  dsArticBuilder* ab;
  ds_artic_builder_create(&ab);
  dsArticBodyDef bd = ds_artic_default_body_def();
  bd.name = "b";
  ds_artic_add_body(ab, &bd);
  dsArticJointDef jd = ds_artic_default_joint_def();
  jd.name = "j";
  jd.child = "b";
  ds_artic_add_joint(ab, &jd);
  dsArticOptions o = ds_artic_default_options();
  dsArticModel* am = NULL;
  CHECK_INT_EQ(ds_artic_build(ab, &o, &am), 0);
  ds_artic_builder_free(ab);
  dsReal x[9] = {0, 0, 0, 0.1, 0, 0, 0, 0.1, 0};
  int tri[3] = {0, 1, 2};
  dsMesh mesh = {3, x, 1, tri, 0, NULL};
  for (int k = 0; k < 2; k++) {
    dsBuilder* b;
    ds_builder_create(&b);
    CHECK_INT_EQ(ds_builder_set_artic(b, am, NULL, NULL), 0);
    CHECK_INT_EQ(ds_builder_set_artic(b, am, NULL, NULL), DS_ERR_STATE);
    CHECK_INT_EQ(ds_builder_add_artic_mesh(b, 1, &mesh, NULL, 1), DS_ERR_INVALID);
    CHECK_INT_EQ(ds_builder_add_artic_mesh(b, 0, &mesh, NULL, 1), 0);
    if (k == 0) ds_builder_add_particle(b, x, NULL, 1);
    ds_builder_set_dt(b, k == 0 ? 1e-3 : 2e-3);
    dsModel* m = NULL;
    const int rc = ds_builder_finalize(b, &m);
    CHECK_INT_EQ(rc, k == 0 ? DS_ERR_UNSUPPORTED : DS_ERR_INVALID);
    CHECK(m == NULL);
    CHECK_STR_CONTAINS(ds_builder_last_error(b), k == 0 ? "mixed models" : "dt");
    ds_builder_free(b);
  }
  ds_artic_model_free(am);
}

/* The batched engine's CPU backend against the serial engine, one env each. */
static void batched(void) {
  dsEnv* ser = make("double-pendulum", DS_ENV_LOSS_IMAGE_LAST, 1, 0);
  dsEnv* bat = make("double-pendulum", DS_ENV_LOSS_IMAGE_LAST, 1, 1);
  if (!ser || !bat) return;
  const int S = ds_env_num_steps(ser), n = ds_env_action_size(ser);
  dsReal a[NSTEP_MAX * 4], g1[NSTEP_MAX * 4], g2[NSTEP_MAX * 4], l1 = 0, l2 = 0;
  CHECK(S * n <= NSTEP_MAX * 4);
  for (int k = 0; k < S * n; k++) a[k] = (dsReal)(0.3 * sin(1.7 * k));
  const double e1 = episode(ser, a), e2 = episode(bat, a);
  CHECK(e1 == e2 && isfinite(e1));
  CHECK_INT_EQ(ds_env_backward_loss(ser, &l1, g1), 0);
  CHECK_INT_EQ(ds_env_backward_loss(bat, &l2, g2), 0);
  CHECK(l1 == l2);
  double gmax = 0;
  for (int k = 0; k < S * n; k++) gmax = fmax(gmax, fabs((double)g1[k]));
  CHECK(gmax > 0);
  for (int k = 0; k < S * n; k++) CHECK_CLOSE((double)g2[k], (double)g1[k], 0, 1e-10 * gmax);
  ds_env_destroy(ser);
  ds_env_destroy(bat);
}

int main(void) {
  static const char* const p1[] = {"body.link1.mass", "joint.hinge1.anchor_child.z", "joint.hinge1.damping",
                                   "artic.initial_q"};
  static const char* const p2[] = {"body.link1.mass", "body.link2.mass", "joint.hinge1.anchor_child.z",
                                   "joint.hinge2.anchor_child.z", "joint.hinge2.damping"};
  grad_check("pendulum", DS_ENV_LOSS_IMAGE_SUM, p1, 4);
  grad_check("double-pendulum", DS_ENV_LOSS_IMAGE_SUM, p2, 5);
  grad_check("double-pendulum", DS_ENV_LOSS_COM, p2, 5);
  obs_check(DS_OBS_STATE_FULL, 1, 0);
  obs_check(DS_OBS_STATE_JOINTS, 1, 0);
  obs_check(DS_OBS_STATE_JOINTS, 4, 0);
  obs_check(DS_OBS_STATE_JOINTS, 4, 1);
  joints_refused();
  bitwise();
  swing();
  refusals();
  batched();
  return DST_RESULT();
}

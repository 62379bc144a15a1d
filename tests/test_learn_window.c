/* The backward of a window of steps over a batch (ds_batch_backward_window,
 * ds_env_backward_adjoints_window) against central differences in double:
 * N = 2 envs (walker-springs, control-fem), a prefix of P steps, then the window's start
 * state set with ds_env_set_state (a perturbed copy of the state there),
 * H window steps and one more step past the window. The objective
 *   J = sum_k adj_obs_k.obs_k + adj_reward_k r_k + adj_final.state_end
 * (k over the window, dense rewards) is differentiated with respect to the
 * window's actions, entries of the set start state (positions and
 * velocities) and, through a second objective with adj_final alone, checked
 * to see the final-state adjoint. Each comparison also rejects the analytic
 * gradient with one component scaled by 1.01 (tests/gradcheck.h). */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsim/batch.h"
#include "dsim/env.h"
#include "tests/dstest.h"
#include "tests/gradcheck.h"

#define N 2
#define P 2 /* steps before the window */
#define H 3 /* window steps */
#define NCHECK 6 /* components checked per kind and env */
#define AMAX 1280 /* action values per env this test allows */

/* walker-springs: a displacement reward; control-fem: the decrease of the
 * distance to a target */
static const char* configs[2] = {
    "{\"env\": {\"name\": \"walker-springs\", \"physics\": {\"substeps\": 192, \"control_interval\": 32, "
    "\"checkpoint_every\": 1}, \"render\": {\"width\": 16, \"height\": 16, \"supersample\": 1}, "
    "\"observation\": {\"state\": \"com\"}, \"loss\": {\"reward\": \"dense\"}}}",
    "{\"env\": {\"name\": \"control-fem\", \"physics\": {\"substeps\": 48, \"control_interval\": 8}, "
    "\"render\": {\"width\": 16, \"height\": 16, \"supersample\": 1}, "
    "\"observation\": {\"state\": \"com\"}, \"loss\": {\"reward\": \"dense\"}}}"};

typedef struct Prob {
  dsBatch* b;
  int A, O, S;
  dsReal *pre, *act; /* N x P x A, N x H x A */
  dsReal* dstate;    /* N x S: added to the state at the window's start */
  dsReal *adj_obs, *adj_rew, *adj_fin; /* N x H x O, N x H, N x S (NULL: 0) */
} Prob;

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double urand(void) { /* [-1, 1) */
  rng = rng * 6364136223846793005ull + 1442695040888963407ull;
  return (double)(rng >> 11) / 9007199254740992.0 * 2 - 1;
}

/* J of one forward; leaves the batch after it (for the backward). */
static double objective(Prob* p) {
  const uint64_t seeds[N] = {3, 4};
  int status[N];
  dsReal obs[N * 16], rew[N];
  dsReal* st = (dsReal*)malloc(sizeof(dsReal) * (size_t)p->S);
  CHECK_INT_EQ(ds_batch_reset(p->b, seeds, NULL, NULL, NULL, status), 0);
  for (int k = 0; k < P; k++) {
    dsReal a[N * AMAX];
    for (int i = 0; i < N; i++) memcpy(a + i * p->A, p->pre + ((size_t)i * P + k) * p->A, sizeof(dsReal) * p->A);
    CHECK_INT_EQ(ds_batch_step(p->b, a, NULL, NULL, NULL, NULL, status, 0), 0);
  }
  for (int i = 0; i < N; i++) { /* the window starts from a set state */
    dsEnv* e = ds_batch_env(p->b, i);
    CHECK_INT_EQ(ds_env_get_state(e, st, p->S), 0);
    for (int q = 1; q < p->S; q++) st[q] += p->dstate[(size_t)i * p->S + q];
    CHECK_INT_EQ(ds_env_set_state(e, st, p->S), 0);
  }
  double J = 0;
  for (int k = 0; k < H; k++) {
    dsReal a[N * AMAX];
    for (int i = 0; i < N; i++) memcpy(a + i * p->A, p->act + ((size_t)i * H + k) * p->A, sizeof(dsReal) * p->A);
    CHECK_INT_EQ(ds_batch_step(p->b, a, obs, NULL, rew, NULL, status, 0), 0);
    for (int i = 0; i < N; i++) {
      if (p->adj_obs)
        for (int o = 0; o < p->O; o++) J += (double)p->adj_obs[((size_t)i * H + k) * p->O + o] * obs[i * p->O + o];
      if (p->adj_rew) J += (double)p->adj_rew[i * H + k] * rew[i];
    }
  }
  if (p->adj_fin)
    for (int i = 0; i < N; i++) {
      CHECK_INT_EQ(ds_env_get_state(ds_batch_env(p->b, i), st, p->S), 0);
      for (int q = 1; q < p->S; q++) J += (double)p->adj_fin[(size_t)i * p->S + q] * st[q];
    }
  { /* one step past the window: the backward starts below the current step */
    dsReal a[N * AMAX] = {0};
    CHECK_INT_EQ(ds_batch_step(p->b, a, NULL, NULL, NULL, NULL, status, 0), 0);
  }
  free(st);
  return J;
}

static double fd(Prob* p, dsReal* x, double h) {
  double d;
  CENTRAL_DIFF(d, x, h, objective(p));
  return d;
}

/* Analytic gradients of J (the batch's backward window), then central
 * differences of NCHECK actions and NCHECK start-state entries per env. */
static void check(Prob* p, const char* what) {
  int status[N];
  dsReal* ga = (dsReal*)calloc((size_t)N * H * p->A, sizeof(dsReal));
  dsReal* gs = (dsReal*)calloc((size_t)N * p->S, sizeof(dsReal));
  objective(p);
  CHECK_INT_EQ(ds_batch_backward_window(p->b, P, H, p->adj_obs, NULL, p->adj_rew, p->adj_fin, ga, gs, status), 0);
  const int n3 = (p->S - 1) / 2;
  double an[2 * N * NCHECK], nu[2 * N * NCHECK];
  int m = 0;
  for (int i = 0; i < N; i++)
    for (int c = 0; c < NCHECK; c++, m++) {
      const size_t j = (size_t)i * H * p->A + (size_t)((c * 7 + i * 3) % (H * p->A));
      an[m] = ga[j];
      nu[m] = fd(p, &p->act[j], 1e-6);
    }
  char label[96];
  snprintf(label, sizeof label, "%s: d/d(window actions)", what);
  check_grad(label, an, nu, m, 1e-4, 1e-6);
  m = 0;
  for (int i = 0; i < N; i++)
    for (int c = 0; c < NCHECK; c++, m++) { /* half positions, half velocities */
      const int q = 1 + (c % 2 ? n3 : 0) + (c * 5 + i) % n3;
      an[m] = gs[(size_t)i * p->S + q];
      nu[m] = fd(p, &p->dstate[(size_t)i * p->S + q], 1e-6);
    }
  CHECK(gs[0] == 0 && gs[p->S] == 0); /* the substep entries */
  snprintf(label, sizeof label, "%s: d/d(set start state)", what);
  check_grad(label, an, nu, m, 1e-4, 1e-6);
  free(ga);
  free(gs);
}

static void problem(const char* config) {
  char err[512];
  Prob p;
  memset(&p, 0, sizeof p);
  int rc = ds_batch_create_from_text("window", config, N, &p.b, err, sizeof err);
  if (rc) printf("create: %s\n", err);
  CHECK_INT_EQ(rc, 0);
  if (rc) return;
  dsEnv* e0 = ds_batch_env(p.b, 0);
  p.A = ds_env_action_size(e0);
  p.O = ds_env_obs_size(e0);
  p.S = ds_env_state_size(e0);
  CHECK(p.A <= AMAX && p.O <= 16);
  if (p.A > AMAX || p.O > 16) return;
  p.pre = (dsReal*)malloc(sizeof(dsReal) * N * P * p.A);
  p.act = (dsReal*)malloc(sizeof(dsReal) * N * H * p.A);
  p.dstate = (dsReal*)calloc((size_t)N * p.S, sizeof(dsReal));
  p.adj_obs = (dsReal*)malloc(sizeof(dsReal) * N * H * p.O);
  p.adj_rew = (dsReal*)malloc(sizeof(dsReal) * N * H);
  p.adj_fin = (dsReal*)calloc((size_t)N * p.S, sizeof(dsReal));
  for (int j = 0; j < N * P * p.A; j++) p.pre[j] = (dsReal)(0.2 * urand());
  for (int j = 0; j < N * H * p.A; j++) p.act[j] = (dsReal)(0.2 * urand());
  for (int j = 0; j < N * H * p.O; j++) p.adj_obs[j] = (dsReal)urand();
  for (int j = 0; j < N * H; j++) p.adj_rew[j] = (dsReal)(1 + urand());
  for (int i = 0; i < N; i++)
    for (int q = 1; q < p.S; q++) p.adj_fin[(size_t)i * p.S + q] = (dsReal)(0.1 * urand());
  printf("%s: N %d, P %d, H %d, action %d, obs %d, state %d\n", ds_env_name(e0), N, P, H, p.A, p.O, p.S);
  check(&p, "obs + dense rewards + final state");
  /* the final state's adjoint alone */
  dsReal *ao = p.adj_obs, *ar = p.adj_rew;
  p.adj_obs = p.adj_rew = NULL;
  check(&p, "final state only");
  p.adj_obs = ao;
  p.adj_rew = ar;

  /* errors: a window past the steps taken, and the env form's range check */
  int status[N];
  objective(&p);
  rc = ds_batch_backward_window(p.b, P + 2, H, NULL, NULL, NULL, NULL, NULL, NULL, status);
  CHECK_INT_EQ(rc, DS_ERR_RANGE);
  CHECK_STR_CONTAINS(ds_batch_last_error(p.b), "window");
  CHECK_INT_EQ(ds_env_backward_adjoints_window(e0, -1, 1, NULL, NULL, NULL, NULL, NULL, NULL), DS_ERR_RANGE);
  /* an empty window: grad_state0 is the final state's adjoint itself */
  dsReal* gs = (dsReal*)calloc((size_t)p.S, sizeof(dsReal));
  CHECK_INT_EQ(ds_env_backward_adjoints_window(e0, P + H, 0, NULL, NULL, NULL, p.adj_fin, NULL, gs), 0);
  for (int q = 1; q < p.S; q++) CHECK_CLOSE(gs[q], p.adj_fin[q], 0, 0);
  free(gs);
  ds_batch_destroy(p.b);
  free(p.pre);
  free(p.act);
  free(p.dstate);
  free(p.adj_obs);
  free(p.adj_rew);
  free(p.adj_fin);
}

/* A state set with ds_env_set_state at substep 24 (another state than the
 * episode had there) acts as the taped state plus a constant: a
 * checkpointed tape gives the full tape's gradient bitwise when the set
 * substep is a checkpoint (K = 8) and refuses when it is not (K = 5: the
 * segment through it would be recomputed from the state the set replaced);
 * restoring the episode's own state there is no set point (K = 5 runs and
 * equals the full tape). The loss is the centroid's (it sees the state). */
/* A small control-fem (6 steps of 8 substeps) with a checkpoint every ckpt
 * substeps and the config's tail (loss, observation); NULL on failure. */
static dsEnv* small_fem(const char* label, int ckpt, const char* tail) {
  char cfg[512], err[512];
  snprintf(cfg, sizeof cfg,
           "{\"env\": {\"name\": \"control-fem\", \"physics\": {\"substeps\": 48, \"control_interval\": 8, "
           "\"checkpoint_every\": %d}, \"render\": {\"width\": 16, \"height\": 16, \"supersample\": 1}, %s}}",
           ckpt, tail);
  dsEnv* e = NULL;
  int rc = ds_env_create_from_text(label, cfg, &e, err, sizeof err);
  if (rc) printf("create: %s\n", err);
  CHECK_INT_EQ(rc, 0);
  return rc ? NULL : e;
}

static int set_point_grad(int ckpt, double perturb, dsReal* g, int cap, int* n) {
  dsEnv* e = small_fem("set-points", ckpt, "\"loss\": {\"kind\": \"com\"}");
  if (!e) return DS_ERR_INVALID;
  int rc = 0;
  const int A = ds_env_action_size(e), S = ds_env_state_size(e), steps = ds_env_num_steps(e);
  dsReal* a = (dsReal*)malloc(sizeof(dsReal) * (size_t)A);
  dsReal* st = (dsReal*)malloc(sizeof(dsReal) * (size_t)S);
  dsReal loss;
  int done;
  CHECK_INT_EQ(ds_env_reset(e, 1, NULL, NULL), 0);
  for (int k = 0; k < steps; k++) {
    for (int i = 0; i < A; i++) a[i] = (dsReal)(0.2 * cos(0.7 * k + 0.3 * i));
    if (k == 3) {
      CHECK_INT_EQ(ds_env_get_state(e, st, S), 0); /* substep 24 */
      CHECK_INT_EQ(ds_env_step(e, a, NULL, NULL, NULL, &done), 0);
      for (int q = 1; q < S; q++) st[q] += (dsReal)(perturb * sin(q));
      CHECK_INT_EQ(ds_env_set_state(e, st, S), 0);
    }
    CHECK_INT_EQ(ds_env_step(e, a, NULL, NULL, NULL, &done), 0);
  }
  *n = steps * A;
  CHECK(*n <= cap);
  rc = *n <= cap ? ds_env_backward_loss(e, &loss, g) : DS_ERR_RANGE;
  if (rc) {
    CHECK_STR_CONTAINS(ds_env_last_error(e), "substep 24, which is not a multiple of physics.checkpoint_every 5");
    CHECK_INT_EQ(ds_env_backward_loss_from(e, 3, &loss, g), DS_ERR_RANGE); /* from the set step */
    CHECK_INT_EQ(ds_env_backward_loss_from(e, 4, &loss, g), 0);            /* above it */
  }
  free(a);
  free(st);
  ds_env_destroy(e);
  return rc;
}

static void set_points(void) {
  const int cap = 1 << 16;
  dsReal* g[5];
  int n = 0;
  for (int i = 0; i < 5; i++) g[i] = (dsReal*)calloc((size_t)cap, sizeof(dsReal));
  CHECK_INT_EQ(set_point_grad(1, 1e-3, g[0], cap, &n), 0);
  CHECK_INT_EQ(set_point_grad(8, 1e-3, g[1], cap, &n), 0);
  CHECK_INT_EQ(set_point_grad(5, 1e-3, g[2], cap, &n), DS_ERR_RANGE);
  CHECK_INT_EQ(set_point_grad(1, 0, g[3], cap, &n), 0);
  CHECK_INT_EQ(set_point_grad(5, 0, g[4], cap, &n), 0);
  CHECK(n > 0 && n <= cap);
  if (n > 0 && n <= cap) {
    CHECK(!memcmp(g[0], g[1], sizeof(dsReal) * (size_t)n));
    CHECK(memcmp(g[0], g[3], sizeof(dsReal) * (size_t)n) != 0); /* the set state shows in the gradient */
    CHECK(!memcmp(g[3], g[4], sizeof(dsReal) * (size_t)n));
  }
  printf("another state set at substep 24: checkpoint_every 8 = full tape bitwise, 5 refused; "
         "the episode's own state restored: 5 = full tape bitwise\n");
  for (int i = 0; i < 5; i++) free(g[i]);
}

/* A window that ends before a failed step (a tet inverted by a huge
 * activation in step 3 of control-fem) goes back through the tape of the
 * steps before it, which the failure does not touch: window [1, 3) of the
 * failed env gives the actions' and the start state's gradients of a run
 * without the failure, bit for bit, on the full tape and checkpointed ones
 * (a checkpoint per step, two per step). A window that reaches into the
 * failed step, and the whole episode's backward, are refused. */
static int failed_window(int ckpt, int crush, dsReal* ga, dsReal* gs, int A, int S) {
  dsEnv* e =
      small_fem("failed-window", ckpt, "\"observation\": {\"state\": \"com\"}, \"loss\": {\"reward\": \"dense\"}");
  if (!e) return DS_ERR_INVALID;
  int rc = 0;
  CHECK_INT_EQ(ds_env_action_size(e), A);
  CHECK_INT_EQ(ds_env_state_size(e), S);
  const int O = ds_env_obs_size(e);
  dsReal* a = (dsReal*)malloc(sizeof(dsReal) * (size_t)A);
  dsReal* obs = (dsReal*)malloc(sizeof(dsReal) * (size_t)O);
  dsReal* ao = (dsReal*)malloc(sizeof(dsReal) * (size_t)(3 * O));
  dsReal* fin = (dsReal*)malloc(sizeof(dsReal) * (size_t)S);
  dsReal r, ar[3];
  int done;
  CHECK_INT_EQ(ds_env_reset(e, 7, NULL, NULL), 0);
  for (int k = 0; k < 4; k++) {
    for (int i = 0; i < A; i++) a[i] = (dsReal)(k == 3 && crush ? 50.0 : 0.2 * cos(0.7 * k + 0.3 * i));
    rc = ds_env_step(e, a, obs, NULL, &r, &done);
    if (k < 3 || !crush) CHECK_INT_EQ(rc, 0);
  }
  if (crush) {
    CHECK(rc == DS_ERR_INVERTED || rc == DS_ERR_DIVERGED);
    CHECK_STR_CONTAINS(ds_env_last_error(e), "step 3: ");
  }
  for (int q = 0; q < 3 * O; q++) ao[q] = (dsReal)(0.3 * sin(1.3 * q + 0.1));
  for (int q = 0; q < S; q++) fin[q] = (dsReal)(q ? 1e-2 * cos(0.37 * q) : 0);
  ar[0] = 1.0, ar[1] = -0.5, ar[2] = 0.25;
  rc = ds_env_backward_adjoints_window(e, 1, 2, ao, NULL, ar, fin, ga, gs);
  if (rc) printf("window [1, 3): %s\n", ds_env_last_error(e));
  CHECK_INT_EQ(rc, 0);
  if (crush) {
    CHECK_INT_EQ(ds_env_backward_adjoints_window(e, 1, 3, ao, NULL, ar, fin, ga + 2 * A, gs), DS_ERR_STATE);
    CHECK_STR_CONTAINS(ds_env_last_error(e), "diverged in step 3; a window must end at or before it");
    CHECK_INT_EQ(ds_env_backward_loss(e, NULL, NULL), DS_ERR_STATE);
    CHECK_INT_EQ(ds_env_backward_adjoints_window(e, 1, 2, ao, NULL, ar, fin, ga + 2 * A, gs + S), 0); /* again */
  }
  free(a);
  free(obs);
  free(ao);
  free(fin);
  ds_env_destroy(e);
  return rc;
}

static void before_failure(void) {
  char err[512];
  dsEnv* e = NULL;
  CHECK_INT_EQ(ds_env_create_from_text("sizes", configs[1], &e, err, sizeof err), 0);
  if (!e) return;
  const int A = ds_env_action_size(e), S = ds_env_state_size(e);
  ds_env_destroy(e);
  const int ckpts[3] = {1, 8, 4};
  dsReal* ga[2];
  dsReal* gs[2];
  for (int j = 0; j < 2; j++) {
    ga[j] = (dsReal*)calloc((size_t)(4 * A), sizeof(dsReal));
    gs[j] = (dsReal*)calloc((size_t)(2 * S), sizeof(dsReal));
  }
  for (int c = 0; c < 3; c++) {
    CHECK_INT_EQ(failed_window(ckpts[c], 0, ga[0], gs[0], A, S), 0);
    CHECK_INT_EQ(failed_window(ckpts[c], 1, ga[1], gs[1], A, S), 0);
    double nz = 0;
    for (int q = 0; q < 2 * A; q++) nz += fabs((double)ga[0][q]);
    CHECK(nz > 0);
    CHECK(!memcmp(ga[0], ga[1], sizeof(dsReal) * (size_t)(2 * A)));
    CHECK(!memcmp(gs[0], gs[1], sizeof(dsReal) * (size_t)S));
    CHECK(!memcmp(ga[1], ga[1] + 2 * A, sizeof(dsReal) * (size_t)(2 * A))); /* the repeat: the same */
    CHECK(!memcmp(gs[1], gs[1] + S, sizeof(dsReal) * (size_t)S));
  }
  printf("a window before a failed step: the gradients of a run without the failure, bitwise (checkpoint_every "
         "1, 8, 4); a window into it and the whole episode refused\n");
  for (int j = 0; j < 2; j++) {
    free(ga[j]);
    free(gs[j]);
  }
}

int main(void) {
  for (int c = 0; c < 2; c++) problem(configs[c]);
  set_points();
  before_failure();
  return DST_RESULT();
}

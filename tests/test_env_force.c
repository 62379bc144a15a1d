/* External forces set per step (ds_env_set_external_force) and their
 * gradient (ds_env_external_force_grad) against central differences in
 * double: control-fem at 6 steps of 8 substeps (full state observation,
 * dense rewards), a random force on every particle for every step, and the
 *   J = sum_k adj_obs_k.obs_k + adj_reward_k r_k
 * of the whole episode (ds_env_backward_adjoints) and of a window of steps
 * 2..4 from a fixed start (ds_env_backward_adjoints_window, rows outside
 * it 0), on the full tape and on a checkpointed one (segments recomputed
 * from the taped forces). Each comparison also rejects the analytic
 * gradient with one component scaled by 1.01 (tests/gradcheck.h). Also:
 * a zero force leaves the trajectory bit for bit, a reset clears the
 * force, and the errors (rigid bodies refused). */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsim/env.h"
#include "tests/dstest.h"
#include "tests/gradcheck.h"

#define NCHECK 12 /* force components checked per case */
#define W0 2      /* the window's first step */
#define WH 3      /* and its steps */

typedef struct Prob {
  dsEnv* e;
  int K, n3, O, A, S;
  dsReal *force, *act, *adj_obs, *adj_rew, *obs, *start; /* K x n3, K x A, K x O, K, O, S */
  int window;                                            /* J over the window only, from `start` */
} Prob;

static uint64_t rng = 0x2545f4914f6cdd1dull;
static double urand(void) { /* [-1, 1) */
  rng = rng * 6364136223846793005ull + 1442695040888963407ull;
  return (double)(rng >> 11) / 9007199254740992.0 * 2 - 1;
}

/* J of one episode (leaves the env at its end, for the backward). In the
 * window case the state at the start of step W0 is replaced by p->start, so
 * that J depends on the window's forces alone. */
static double objective(Prob* p) {
  dsReal r;
  int done;
  CHECK_INT_EQ(ds_env_reset(p->e, 5, NULL, NULL), 0);
  double J = 0;
  for (int k = 0; k < p->K; k++) {
    if (p->window && k == W0) CHECK_INT_EQ(ds_env_set_state(p->e, p->start, p->S), 0);
    CHECK_INT_EQ(ds_env_set_external_force(p->e, p->force + (size_t)k * p->n3), 0);
    CHECK_INT_EQ(ds_env_step(p->e, p->act + (size_t)k * p->A, p->obs, NULL, &r, &done), 0);
    if (p->window && (k < W0 || k >= W0 + WH)) continue;
    for (int o = 0; o < p->O; o++) J += (double)p->adj_obs[(size_t)k * p->O + o] * p->obs[o];
    J += (double)p->adj_rew[k] * r;
  }
  return J;
}

static void check(Prob* p, const char* what) {
  objective(p);
  const dsReal* g = NULL;
  int ns = 0;
  if (p->window) {
    CHECK_INT_EQ(ds_env_backward_adjoints_window(p->e, W0, WH, p->adj_obs + (size_t)W0 * p->O, NULL, p->adj_rew + W0,
                                                 NULL, NULL, NULL),
                 0);
  } else {
    CHECK_INT_EQ(ds_env_backward_adjoints(p->e, p->adj_obs, NULL, p->adj_rew, NULL), 0);
  }
  CHECK_INT_EQ(ds_env_external_force_grad(p->e, &g, &ns), 0);
  CHECK_INT_EQ(ns, p->K);
  double* ga = (double*)malloc(sizeof(double) * (size_t)p->K * p->n3);
  for (int j = 0; j < p->K * p->n3; j++) ga[j] = (double)g[j];
  if (p->window) { /* rows outside the window: 0 */
    int zero = 1;
    for (int k = 0; k < p->K; k++)
      for (int q = 0; q < p->n3 && (k < W0 || k >= W0 + WH); q++) zero = zero && ga[(size_t)k * p->n3 + q] == 0;
    CHECK(zero);
  }
  double an[NCHECK], nu[NCHECK];
  const int k0 = p->window ? W0 : 0, nk = p->window ? WH : p->K;
  for (int c = 0; c < NCHECK; c++) {
    const size_t j = (size_t)(k0 + c % nk) * p->n3 + (size_t)((c * 37 + 11) % p->n3);
    const dsReal f0 = p->force[j], h = 1e-5;
    p->force[j] = f0 + h;
    const double jp = objective(p);
    p->force[j] = f0 - h;
    const double jm = objective(p);
    p->force[j] = f0;
    an[c] = ga[j];
    nu[c] = (jp - jm) / (2 * h);
  }
  check_grad(what, an, nu, NCHECK, 1e-4, 1e-6);
  free(ga);
}

static void errors_and_bits(Prob* p) {
  dsReal r, *x1 = (dsReal*)malloc(sizeof(dsReal) * (size_t)p->O);
  int done;
  /* a zero force leaves the trajectory bit for bit; a reset clears a force */
  CHECK_INT_EQ(ds_env_reset(p->e, 5, NULL, NULL), 0);
  CHECK_INT_EQ(ds_env_step(p->e, p->act, x1, NULL, &r, &done), 0);
  CHECK_INT_EQ(ds_env_reset(p->e, 5, NULL, NULL), 0);
  CHECK_INT_EQ(ds_env_set_external_force(p->e, p->force), 0);
  CHECK_INT_EQ(ds_env_reset(p->e, 5, NULL, NULL), 0);
  CHECK_INT_EQ(ds_env_step(p->e, p->act, p->obs, NULL, &r, &done), 0);
  CHECK(!memcmp(x1, p->obs, sizeof(dsReal) * (size_t)p->O));
  CHECK_INT_EQ(ds_env_reset(p->e, 5, NULL, NULL), 0);
  CHECK_INT_EQ(ds_env_set_external_force(p->e, NULL), 0);
  CHECK_INT_EQ(ds_env_step(p->e, p->act, p->obs, NULL, &r, &done), 0);
  CHECK(!memcmp(x1, p->obs, sizeof(dsReal) * (size_t)p->O));
  /* ... and a force moves it */
  CHECK_INT_EQ(ds_env_reset(p->e, 5, NULL, NULL), 0);
  CHECK_INT_EQ(ds_env_set_external_force(p->e, p->force), 0);
  CHECK_INT_EQ(ds_env_step(p->e, p->act, p->obs, NULL, &r, &done), 0);
  CHECK(memcmp(x1, p->obs, sizeof(dsReal) * (size_t)p->O) != 0);
  /* errors */
  p->force[7] = (dsReal)NAN;
  CHECK_INT_EQ(ds_env_set_external_force(p->e, p->force), DS_ERR_RANGE);
  CHECK_STR_CONTAINS(ds_env_last_error(p->e), "particle 2 component 1");
  p->force[7] = 0;
  CHECK_INT_EQ(ds_env_set_external_force(NULL, p->force), DS_ERR_INVALID);
  CHECK_INT_EQ(ds_env_external_force_grad(p->e, NULL, NULL), DS_ERR_INVALID);
  free(x1);
}

static void problem(const char* label, const char* config) {
  char err[512];
  Prob p;
  memset(&p, 0, sizeof p);
  int rc = ds_env_create_from_text(label, config, &p.e, err, sizeof err);
  if (rc) printf("create: %s\n", err);
  CHECK_INT_EQ(rc, 0);
  if (rc) return;
  p.K = ds_env_num_steps(p.e);
  p.n3 = 3 * ds_env_num_particles(p.e);
  p.O = ds_env_obs_size(p.e);
  p.A = ds_env_action_size(p.e);
  p.S = ds_env_state_size(p.e);
  p.force = (dsReal*)malloc(sizeof(dsReal) * (size_t)p.K * p.n3);
  p.act = (dsReal*)malloc(sizeof(dsReal) * (size_t)p.K * p.A);
  p.adj_obs = (dsReal*)malloc(sizeof(dsReal) * (size_t)p.K * p.O);
  p.adj_rew = (dsReal*)malloc(sizeof(dsReal) * (size_t)p.K);
  p.obs = (dsReal*)malloc(sizeof(dsReal) * (size_t)p.O);
  p.start = (dsReal*)malloc(sizeof(dsReal) * (size_t)p.S);
  for (int j = 0; j < p.K * p.n3; j++) p.force[j] = (dsReal)(0.05 * urand());
  for (int j = 0; j < p.K * p.A; j++) p.act[j] = (dsReal)(0.1 * urand());
  for (int j = 0; j < p.K * p.O; j++) p.adj_obs[j] = (dsReal)urand();
  for (int k = 0; k < p.K; k++) p.adj_rew[k] = (dsReal)(1 + urand());
  printf("%s: %d steps, %d particles, obs %d\n", label, p.K, p.n3 / 3, p.O);
  CHECK_INT_EQ(ds_env_set_external_force(p.e, p.force), DS_ERR_STATE); /* before a reset */
  char what[128];
  snprintf(what, sizeof what, "%s: episode d/d(force)", label);
  check(&p, what);
  /* the window's start: the state at step W0 of the episode, moved a little */
  objective(&p);
  CHECK_INT_EQ(ds_env_reset(p.e, 5, NULL, NULL), 0);
  for (int k = 0; k < W0; k++) {
    dsReal r;
    int done;
    CHECK_INT_EQ(ds_env_set_external_force(p.e, p.force + (size_t)k * p.n3), 0);
    CHECK_INT_EQ(ds_env_step(p.e, p.act + (size_t)k * p.A, NULL, NULL, &r, &done), 0);
  }
  CHECK_INT_EQ(ds_env_get_state(p.e, p.start, p.S), 0);
  for (int q = 1; q < p.S; q++) p.start[q] += (dsReal)(1e-4 * urand());
  p.window = 1;
  snprintf(what, sizeof what, "%s: window d/d(force)", label);
  check(&p, what);
  p.window = 0;
  errors_and_bits(&p);
  ds_env_destroy(p.e);
  free(p.force);
  free(p.act);
  free(p.adj_obs);
  free(p.adj_rew);
  free(p.obs);
  free(p.start);
}

/* Rigid bodies: refused with a message (f_ext moves free particles only). */
static void refused(void) {
  char err[512];
  dsEnv* e = NULL;
  int rc = ds_env_create_from_text("rigid", "{\"env\": {\"name\": \"rigid-toss\", \"render\": {\"width\": 16, "
                                   "\"height\": 16, \"supersample\": 1}}}", &e, err, sizeof err);
  CHECK_INT_EQ(rc, 0);
  if (rc) return;
  CHECK_INT_EQ(ds_env_reset(e, 1, NULL, NULL), 0);
  CHECK_INT_EQ(ds_env_set_external_force(e, NULL), DS_ERR_UNSUPPORTED);
  CHECK_STR_CONTAINS(ds_env_last_error(e), "rigid-toss");
  ds_env_destroy(e);
}

int main(void) {
  if (sizeof(dsReal) != sizeof(double)) DST_SKIP("finite differences need a double build");
  const char* fmt =
      "{\"env\": {\"name\": \"control-fem\", \"physics\": {\"substeps\": 48, \"control_interval\": 8, "
      "\"checkpoint_every\": %d}, \"render\": {\"width\": 16, \"height\": 16, \"supersample\": 1}, "
      "\"observation\": {\"state\": \"full\"}, \"loss\": {\"reward\": \"dense\"}}}";
  char cfg[512];
  snprintf(cfg, sizeof cfg, fmt, 1);
  problem("full tape", cfg);
  snprintf(cfg, sizeof cfg, fmt, 4);
  problem("checkpointed", cfg);
  refused();
  return DST_RESULT();
}

/* What an episode's target is relative to (dsim/env.h "Targets"): the start
 * the definition gives, not initial values set with ds_env_set_param. After
 * a 0.5 m shift by set_param the metric reads the 0.5 m travelled while the
 * target and the goal image stay; an env whose definition starts 0.5 m
 * further has its relative target 0.5 m further; in a reset / set_param / run
 * loop the target never lags or drifts; and the gradient of the
 * centre-of-mass loss with respect to initial_position matches central
 * differences taken through ds_env_set_param, for relative and absolute
 * goals alike. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsim/env.h"
#include "tests/dstest.h"

static dsEnvDef small_def(const char* name) {
  dsEnvDef d = ds_default_env_def(name);
  d.substeps = 64;
  d.control_interval = 16;
  d.render_interval = 32;
  d.render_last = 1;
  d.width = d.height = 24;
  d.supersample = 1;
  d.sigma = 1e-3;
  d.gamma = 1e-2;
  if (!strcmp(name, "control-fem")) {
    dsControlFemParams* p = (dsControlFemParams*)ds_env_def_params(&d);
    p->gear.teeth = 4;
    p->gear.layers = 1;
  }
  return d;
}

static void shift_start(dsEnv* e, const dsReal dx[3]) {
  const dsReal* x0 = NULL;
  int n = 0;
  CHECK_INT_EQ(ds_env_param(e, "initial_position", &x0, &n), DS_OK);
  dsReal* x = (dsReal*)malloc(sizeof(dsReal) * (size_t)n);
  for (int i = 0; i < n; i++) x[i] = x0[i] + dx[i % 3];
  CHECK_INT_EQ(ds_env_set_param(e, "initial_position", x, n), DS_OK);
  free(x);
}

static void agreement(const char* name) {
  char err[512];
  dsEnvDef d = small_def(name);
  dsEnv *a = NULL, *b = NULL;
  CHECK_INT_EQ(ds_env_create(&d, &a, err, sizeof err), DS_OK);
  dsEnvDef db = d;
  db.start[0] += (dsReal)0.5; /* the same body, defined 0.5 m further in x */
  CHECK_INT_EQ(ds_env_create(&db, &b, err, sizeof err), DS_OK);
  if (!a || !b) return;
  const uint64_t seed = 3;
  dsReal t0[3], ta[3], tb[3], m = 1;
  int w = 0, h = 0;
  ds_env_image_size(a, &w, &h);
  CHECK_INT_EQ(ds_env_reset(a, seed, NULL, NULL), DS_OK);
  CHECK_INT_EQ(ds_env_target(a, t0), DS_OK);
  dsReal* g0 = (dsReal*)malloc(sizeof(dsReal) * (size_t)w * (size_t)h * 4);
  memcpy(g0, ds_env_goal_image(a), sizeof(dsReal) * (size_t)w * (size_t)h * 4);
  const dsReal dx[3] = {0.5, 0, 0};
  shift_start(a, dx);
  CHECK_INT_EQ(ds_env_reset(b, seed, NULL, NULL), DS_OK);
  CHECK_INT_EQ(ds_env_target(a, ta), DS_OK);
  CHECK_INT_EQ(ds_env_target(b, tb), DS_OK);
  /* displacement metrics count the 0.5 m from the defined start */
  CHECK_INT_EQ(ds_env_metric(a, &m), DS_OK);
  if (ds_env_metric_goal(a) != 0) CHECK_CLOSE(m, 0.5, 1e-12, 1e-12);
  /* the target and the goal image stay the definition's */
  for (int k = 0; k < 3; k++) CHECK_CLOSE(ta[k], t0[k], 0, 0);
  const dsReal* ga = ds_env_goal_image(a);
  CHECK(ga != NULL);
  int same = 1;
  for (int i = 0; ga && i < w * h * 4; i++) same &= ga[i] == g0[i];
  CHECK(same);
  /* an env defined 0.5 m further: a relative target follows the definition */
  const double rel = d.goal_relative ? 1.0 : 0.0;
  CHECK_CLOSE(tb[0], t0[0] + 0.5 * rel, 1e-12, 1e-12);
  CHECK_CLOSE(tb[1], t0[1], 1e-12, 1e-12);
  CHECK_CLOSE(tb[2], t0[2], 1e-12, 1e-12);
  /* a loop of reset / set_param / run: the target neither lags nor drifts
   * while the start keeps moving (0.6, 0.7, 0.8 m) */
  for (int k = 1; k <= 3; k++) {
    CHECK_INT_EQ(ds_env_reset(a, seed, NULL, NULL), DS_OK);
    const dsReal step[3] = {(dsReal)0.1, 0, 0};
    shift_start(a, step);
    CHECK_INT_EQ(ds_env_target(a, ta), DS_OK);
    for (int q = 0; q < 3; q++) CHECK_CLOSE(ta[q], t0[q], 0, 0);
    CHECK_INT_EQ(ds_env_metric(a, &m), DS_OK);
    if (ds_env_metric_goal(a) != 0) CHECK_CLOSE(m, 0.5 + 0.1 * k, DS_SINGLE ? 1e-6 : 1e-9, 1e-12);
    dsReal* act = (dsReal*)calloc((size_t)ds_env_action_size(a) + 1, sizeof(dsReal));
    int done = 0;
    while (!done) CHECK_INT_EQ(ds_env_step(a, act, NULL, NULL, NULL, &done), DS_OK);
    free(act);
  }
  free(g0);
  ds_env_destroy(a);
  ds_env_destroy(b);
}

/* The centre-of-mass loss: d loss / d initial_position against central
 * differences through set_param (the target does not move with it). */
static void gradient(const char* name, int relative) {
  char err[512];
  dsEnvDef d = small_def(name);
  d.goal_relative = relative;
  d.goal_x_min = d.goal_x_max = (dsReal)1.5;
  d.loss_kind = DS_ENV_LOSS_COM;
  dsEnv* e = NULL;
  CHECK_INT_EQ(ds_env_create(&d, &e, err, sizeof err), DS_OK);
  if (!e) return;
  const int A = ds_env_action_size(e), S = ds_env_num_steps(e);
  dsReal* act = (dsReal*)calloc((size_t)A * (size_t)S + 1, sizeof(dsReal));
  for (int i = 0; i < A * S; i++) act[i] = (dsReal)(0.3 * sin(0.7 * i));
  const dsReal* x0p = NULL;
  int n = 0;
  CHECK_INT_EQ(ds_env_reset(e, 1, NULL, NULL), DS_OK);
  ds_env_param(e, "initial_position", &x0p, &n);
  dsReal* x0 = (dsReal*)malloc(sizeof(dsReal) * (size_t)n);
  memcpy(x0, x0p, sizeof(dsReal) * (size_t)n);
  /* loss(x0): reset, set the start, run */
  dsReal* x = (dsReal*)malloc(sizeof(dsReal) * (size_t)n);
#define RUN(LOSS)                                                                    \
  do {                                                                               \
    CHECK_INT_EQ(ds_env_reset(e, 1, NULL, NULL), DS_OK);                             \
    CHECK_INT_EQ(ds_env_set_param(e, "initial_position", x, n), DS_OK);              \
    int done_ = 0;                                                                   \
    for (int s_ = 0; !done_; s_++) ds_env_step(e, act + (size_t)s_ * A, NULL, NULL, NULL, &done_); \
    ds_env_loss(e, &(LOSS));                                                         \
  } while (0)
  memcpy(x, x0, sizeof(dsReal) * (size_t)n);
  dsReal l0 = 0;
  RUN(l0);
  CHECK_INT_EQ(ds_env_backward_loss(e, NULL, NULL), DS_OK);
  const dsReal* g = NULL;
  int gn = 0;
  CHECK_INT_EQ(ds_env_param_grad(e, "initial_position", &g, &gn), DS_OK);
  CHECK_INT_EQ(gn, n);
  dsReal* ga = (dsReal*)malloc(sizeof(dsReal) * (size_t)n);
  memcpy(ga, g, sizeof(dsReal) * (size_t)n);
  const double h = 1e-6;
  double worst = 0, scale = 1e-12;
  for (int i = 0; i < n; i += (n > 60 ? n / 30 : 1)) {
    dsReal lp = 0, lm = 0;
    memcpy(x, x0, sizeof(dsReal) * (size_t)n);
    x[i] += (dsReal)h;
    RUN(lp);
    x[i] -= (dsReal)(2 * h);
    RUN(lm);
    const double fd = ((double)lp - (double)lm) / (2 * h);
    worst = fmax(worst, fabs(fd - (double)ga[i]));
    scale = fmax(scale, fabs(fd));
  }
#undef RUN
  if (worst > 1e-5 * scale + 1e-9)
    DST_FAIL_AT("%s (%s goal): d loss/d initial_position: max |adjoint - FD| %g (scale %g)", name,
                relative ? "relative" : "absolute", worst, scale);
  dst_checks++;
  free(act);
  free(x0);
  free(x);
  free(ga);
  ds_env_destroy(e);
}

/* The second view (camera2): a gear held at its goal, then moved by dx.
 * mode 0: the first camera only; 1: the first camera and camera2 (80
 * degrees above); 2: camera2's view as the only camera. Returns the loss. */
static double view_loss(int mode, const dsReal dx[3]) {
  dsEnvDef d = small_def("control-fem");
  d.gravity[1] = 0;
  d.velocity[0] = 0;
  d.ground = 0;
  d.goal_x_min = d.goal_x_max = d.start[0];
  d.goal_y = d.start[1];
  d.goal_z = d.start[2];
  d.width = d.height = 48;
  d.cam2 = mode == 1;
  d.cam2_distance = 15;
  d.cam2_elevation = 80;
  d.cam2_azimuth = 10;
  if (mode == 2) {
    d.cam_distance = d.cam2_distance;
    d.cam_elevation = d.cam2_elevation;
    d.cam_azimuth = d.cam2_azimuth;
  }
  dsEnv* e = NULL;
  char err[512];
  CHECK_INT_EQ(ds_env_create(&d, &e, err, sizeof err), DS_OK);
  if (!e) return 0;
  dsReal* act = (dsReal*)calloc((size_t)ds_env_action_size(e), sizeof(dsReal));
  CHECK_INT_EQ(ds_env_reset(e, 0, NULL, NULL), DS_OK);
  shift_start(e, dx);
  for (int k = 0; k < ds_env_num_steps(e); k++) CHECK_INT_EQ(ds_env_step(e, act, NULL, NULL, NULL, NULL), DS_OK);
  dsReal v = 0;
  CHECK_INT_EQ(ds_env_loss(e, &v), DS_OK);
  free(act);
  ds_env_destroy(e);
  return v;
}

static void second_view(void) {
  const dsReal none[3] = {0, 0, 0}, dz[3] = {0, 0, 0.5};
  /* held at the goal: no loss from either view */
  CHECK(view_loss(1, none) < 1e-9);
  /* the frame loss is the sum of the views' losses */
  const double l1 = view_loss(0, dz), l2 = view_loss(2, dz), both = view_loss(1, dz);
  printf("0.5 m in depth: first view %.4g, second view %.4g, both %.4g\n", l1, l2, both);
  CHECK(l1 > 0 && l2 > 0);
  CHECK_CLOSE(both, l1 + l2, DS_SINGLE ? 1e-6 : 1e-12, 0); /* float sums in the single build */
}

int main(void) {
  second_view();
  const char* const names[] = {"walker", "walker-springs", "control-fem"};
  if (DS_SINGLE) { /* the targets agree; finite differences of whole float rollouts resolve nothing */
    for (int i = 0; i < 3; i++) agreement(names[i]);
    if (dst_failures) return DST_RESULT();
    DST_SKIP("gradients through whole rollouts need a double build (targets checked)");
  }
  for (int i = 0; i < 3; i++) {
    agreement(names[i]);
    gradient(names[i], 0);
    gradient(names[i], 1);
  }
  return DST_RESULT();
}

/* The "hanging-spring" environment class, written as a user would write
 * one against the public API only: a triangle of springs hanging from a
 * fixed particle, particles 1 and 2 free (mass m), springs 0-1, 0-2, 1-2 of
 * stiffness ke and damping kd; one render face. Action: horizontal external
 * forces on particles 1 and 2 (N), held over each step. Goal: the centre of
 * mass at x_t ~ U[x_min, x_max) to the side; built-in loss |com - target|^2.
 * Used by tests/test_env_register.c (registered in the test program) and
 * tests/hang_plugin.c (a plugin for `dsim run --plugin`). */
#ifndef DSIM_TESTS_HANG_ENV_H
#define DSIM_TESTS_HANG_ENV_H

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "dsim/dsim.h"

typedef struct HangParams {
  dsReal mass, ke, kd;
} HangParams;

static const dsConfigKey hang_keys[] = {
    {"material.mass", DS_KEY_REAL, offsetof(HangParams, mass), 1e-6, 1e6, NULL, 0, "kg per free particle"},
    {"material.spring_ke", DS_KEY_REAL, offsetof(HangParams, ke), 0, 1e9, NULL, 0, "N/m"},
    {"material.spring_kd", DS_KEY_REAL, offsetof(HangParams, kd), 0, 1e9, NULL, 0, "N s/m"},
    {NULL, DS_KEY_REAL, 0, 0, 0, NULL, 0, NULL}};

static void hang_defaults(dsEnvDef* d) {
  HangParams* p = (HangParams*)ds_env_def_params(d);
  p->mass = 0.5;
  p->ke = 200;
  p->kd = 1;
  d->dt = 1.0 / 480;
  d->substeps = 240;
  d->control_interval = 24;
  d->render_interval = 60;
  d->ground = 0;
  d->goal_x_min = 0.3;
  d->goal_x_max = 0.6;
  d->goal_y = 1.4;
  d->loss_kind = DS_ENV_LOSS_COM;
  d->width = d->height = 24;
  d->supersample = 1;
  d->sigma = 1e-3;
  d->cam_distance = 5;
  d->cam_elevation = 0;
}

static int hang_validate(const dsEnvDef* d, char* err, size_t errlen) {
  const HangParams* p = (const HangParams*)d->params.bytes;
  if (!(p->ke > 0)) {
    snprintf(err, errlen, "material.spring_ke: must be > 0");
    return DS_ERR_RANGE;
  }
  return 0;
}

static int hang_build(dsEnv* env, dsBuilder* b) {
  const HangParams* p = (const HangParams*)ds_env_params(env);
  const dsEnvDef* d = ds_env_def(env);
  const dsReal x[3][3] = {{0, 2, 0}, {-0.3, 1.6, 0}, {0.3, 1.6, 0.05}};
  const dsReal v0[3] = {0, 0, 0};
  int rc = 0;
  for (int i = 0; i < 3 && rc >= 0; i++) {
    dsReal xi[3] = {x[i][0] + d->start[0], x[i][1] + d->start[1], x[i][2] + d->start[2]};
    rc = ds_builder_add_particle(b, xi, i ? d->velocity : v0, i ? p->mass : 0);
  }
  if (rc >= 0) rc = ds_builder_add_spring(b, 0, 1, p->ke, p->kd, -1);
  if (rc >= 0) rc = ds_builder_add_spring(b, 0, 2, p->ke, p->kd, -1);
  if (rc >= 0) rc = ds_builder_add_spring(b, 1, 2, p->ke, p->kd, -1);
  if (rc >= 0) rc = ds_builder_add_face(b, 0, 1, 2);
  return rc < 0 ? rc : 0;
}

static int hang_action_size(const dsEnv* env) {
  (void)env;
  return 2;
}

static void hang_action_fwd(dsEnv* env, int step, int s, const dsReal* a) {
  (void)step, (void)s;
  dsData* d = ds_env_data(env);
  memset(d->f_ext, 0, 9 * sizeof(dsReal));
  d->f_ext[3] = a[0];
  d->f_ext[6] = a[1];
}

static void hang_action_bwd(dsEnv* env, int step, int s, const dsReal* a, const dsReal* adj_act,
                            const dsReal* adj_fext, dsReal* grad) {
  (void)env, (void)step, (void)s, (void)a, (void)adj_act;
  grad[0] += adj_fext[3];
  grad[1] += adj_fext[6];
}

static const dsEnvClass hang_class = {
    .name = "hanging-spring",
    .doc = "a triangle of springs hanging from a fixed particle, pushed sideways",
    .params_size = sizeof(HangParams),
    .keys = hang_keys,
    .defaults = hang_defaults,
    .validate = hang_validate,
    .build = hang_build,
    .action_size = hang_action_size,
    .action_kind = DS_ACTION_PER_STEP,
    .action_fwd = hang_action_fwd,
    .action_bwd = hang_action_bwd,
    .metric_kind = DS_METRIC_TARGET,
    .uses_external_force = 1,
};

#endif

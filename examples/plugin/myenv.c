/* A template dsim plugin: one environment class, "myenv", written against
 * the public API only (dsim/dsim.h). Copy this file, rename the class and
 * change its scene, its action and its keys; docs/plugins.md has the compile
 * commands and what each hook is for.
 *
 * The scene: a diamond of four particles hanging from the first (fixed, mass
 * 0) by five springs, drawn as two triangles:
 *
 *          0            springs 0-1, 0-2, 1-2, 1-3, 2-3 (stiffness ke,
 *         / \           damping kd); faces (0 1 2) and (1 3 2)
 *        1---2
 *         \ /
 *          3
 *
 * Action: a horizontal force (N) on each free particle, x of particles 1, 2
 * and 3, held over a control step. Goal: the centre of mass at x_t ~
 * U[goal_x_min, goal_x_max) to the side; the metric is |com - target|^2 / 3.
 * The springs' stiffness is the engine parameter "spring.ke", so `dsim sysid`
 * can identify it from video (myenv-sysid.json beside this file). */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "dsim/dsim.h"

/* The class's own parameters: a plain struct that lives inside dsEnvDef
 * (at most DS_ENV_PARAMS_MAX bytes). */
typedef struct MyParams {
  dsReal mass; /* kg per free particle */
  dsReal ke;   /* N/m, every spring */
  dsReal kd;   /* N s/m, every spring */
} MyParams;

/* Its config keys (section "env"): the config file, --set env.KEY=VALUE,
 * `dsim config --keys myenv` and Python keyword arguments all use this table,
 * with these bounds. */
static const dsConfigKey my_keys[] = {
    {"material.mass", DS_KEY_REAL, offsetof(MyParams, mass), 1e-6, 1e6, NULL, 0, "kg per free particle"},
    {"material.spring_ke", DS_KEY_REAL, offsetof(MyParams, ke), 1e-3, 1e9, NULL, 0, "spring stiffness, N/m"},
    {"material.spring_kd", DS_KEY_REAL, offsetof(MyParams, kd), 0, 1e9, NULL, 0, "spring damping, N s/m"},
    {NULL, DS_KEY_REAL, 0, 0, 0, NULL, 0, NULL}};

/* Defaults: the class's parameters and the common fields it changes. A run
 * of `dsim run myenv` without a config file uses exactly these. */
static void my_defaults(dsEnvDef* d) {
  MyParams* p = (MyParams*)ds_env_def_params(d);
  p->mass = 0.5;
  p->ke = 200;
  p->kd = 1;
  d->dt = 1.0 / 480;
  d->substeps = 240; /* 0.5 s */
  d->control_interval = 24;
  d->render_interval = 24;
  d->ground = 0;
  d->goal_x_min = 0.3;
  d->goal_x_max = 0.6;
  d->goal_y = 1.3;
  d->loss_kind = DS_ENV_LOSS_COM;
  d->width = d->height = 32;
  d->supersample = 1;
  d->sigma = 1e-4;
  d->cam_distance = 4;
  d->cam_elevation = 0;
}

static int my_build(dsEnv* env, dsBuilder* b) {
  const MyParams* p = (const MyParams*)ds_env_params(env);
  const dsEnvDef* d = ds_env_def(env);
  static const dsReal x[4][3] = {{0, 2, 0}, {-0.3, 1.6, 0}, {0.3, 1.6, 0}, {0, 1.2, 0}};
  static const int springs[5][2] = {{0, 1}, {0, 2}, {1, 2}, {1, 3}, {2, 3}};
  const dsReal v0[3] = {0, 0, 0};
  int rc = 0;
  for (int i = 0; i < 4 && rc >= 0; i++) {
    const dsReal xi[3] = {x[i][0] + d->start[0], x[i][1] + d->start[1], x[i][2] + d->start[2]};
    rc = ds_builder_add_particle(b, xi, i ? d->velocity : v0, i ? p->mass : 0); /* mass 0: fixed */
  }
  for (int k = 0; k < 5 && rc >= 0; k++) rc = ds_builder_add_spring(b, springs[k][0], springs[k][1], p->ke, p->kd, -1);
  if (rc >= 0) rc = ds_builder_add_face(b, 0, 1, 2);
  if (rc >= 0) rc = ds_builder_add_face(b, 1, 3, 2);
  return rc < 0 ? rc : 0;
}

static int my_action_size(const dsEnv* env) {
  (void)env;
  return 3;
}

/* Forward: the action enters the physics as external forces (f_ext,
 * nparticle x 3, N), written before every substep of the step. */
static void my_action_fwd(dsEnv* env, int step, int s, const dsReal* a) {
  (void)step, (void)s;
  dsData* d = ds_env_data(env);
  memset(d->f_ext, 0, 12 * sizeof(dsReal));
  for (int i = 0; i < 3; i++) d->f_ext[3 * (i + 1)] = a[i];
}

/* Adjoint of my_action_fwd: f_ext[3 (i + 1)] = a[i], so dL/da[i] gathers
 * dL/df_ext of the same entry, summed over the step's substeps. */
static void my_action_bwd(dsEnv* env, int step, int s, const dsReal* a, const dsReal* adj_act,
                          const dsReal* adj_fext, dsReal* grad) {
  (void)env, (void)step, (void)s, (void)a, (void)adj_act;
  for (int i = 0; i < 3; i++) grad[i] += adj_fext[3 * (i + 1)];
}

static const dsEnvClass my_class = {
    .name = "myenv",
    .doc = "a diamond of springs hanging from a fixed point, pushed sideways (the plugin template)",
    .params_size = sizeof(MyParams),
    .keys = my_keys,
    .defaults = my_defaults,
    .build = my_build,
    .action_size = my_action_size,
    .action_kind = DS_ACTION_PER_STEP,
    .action_fwd = my_action_fwd,
    .action_bwd = my_action_bwd,
    .metric_kind = DS_METRIC_TARGET,
    .uses_external_force = 1,
};

/* What dsim looks up in the shared object: the ABI of the headers it was
 * compiled with (checked before anything runs), and the entry point that
 * registers the classes. */
DS_API extern const int dsim_plugin_abi;
DS_API const int dsim_plugin_abi = DS_PLUGIN_ABI;
DS_API int dsim_plugin_init(void);
DS_API int dsim_plugin_init(void) { return ds_env_register(&my_class); }

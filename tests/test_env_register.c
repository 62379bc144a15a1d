/* A user-written environment class, registered through the public API
 * (ds_env_register), goes through the same code paths as the bundled ones:
 * the registry, the config's env section with its own keys (strict, with
 * suggestions), ds_env_def_to_json, reset/step/backward, gradients of the
 * actions and of the parameters against central differences, and the
 * trainer (whole episode and MPC).
 *
 * The class, "hanging-spring": a triangle of springs hanging from a fixed
 * particle, particles 1 and 2 free (mass m), springs 0-1, 0-2, 1-2 of
 * stiffness ke and damping kd; one render face. Action: horizontal external
 * forces on particles 1 and 2 (N), held over each step. Goal: the centre of
 * mass at x_t ~ U[x_min, x_max) to the side; built-in loss |com - target|^2. */
#include "config.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

#include "dsim/dsim.h"
#include "tests/dstest.h"
#include "tests/gradcheck.h"

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

static double rollout_loss(dsEnv* env, const dsReal* act, int S, int A) {
  dsReal l = 0;
  CHECK_INT_EQ(ds_env_reset(env, 7, NULL, NULL), 0);
  for (int k = 0; k < S; k++) CHECK_INT_EQ(ds_env_step(env, act + (size_t)k * A, NULL, NULL, NULL, NULL), 0);
  CHECK_INT_EQ(ds_env_loss(env, &l), 0);
  return (double)l;
}

int main(void) {
  if (sizeof(dsReal) != sizeof(double)) DST_SKIP("the gradient checks need double precision");
  char err[512];
  /* ---- registry ---- */
  const int n0 = ds_env_class_count();
  CHECK(n0 >= 4);
  CHECK_INT_EQ(ds_env_register(&hang_class), 0);
  CHECK_INT_EQ(ds_env_register(&hang_class), DS_ERR_STATE); /* the name is taken */
  dsEnvClass bad = hang_class;
  bad.name = "no-build";
  bad.build = NULL;
  CHECK_INT_EQ(ds_env_register(&bad), DS_ERR_INVALID);
  bad = hang_class;
  bad.name = "too-big";
  bad.params_size = DS_ENV_PARAMS_MAX + 1;
  CHECK_INT_EQ(ds_env_register(&bad), DS_ERR_INVALID);
  CHECK_INT_EQ(ds_env_class_count(), n0 + 1);
  CHECK(ds_env_class_find("hanging-spring") == &hang_class);
  CHECK(ds_env_class_at(n0) == &hang_class);

  /* ---- definition and config ---- */
  dsEnvDef def = ds_default_env_def("hanging-spring");
  CHECK(def.cls == &hang_class);
  CHECK_INT_EQ(def.substeps, 240);
  CHECK_CLOSE(((HangParams*)ds_env_def_params(&def))->ke, 200, 0, 0);
  CHECK_INT_EQ(ds_env_def_set(&def, "material.spring_ke", "150", err, sizeof err), 0);
  CHECK_CLOSE(((HangParams*)ds_env_def_params(&def))->ke, 150, 0, 0);
  CHECK_INT_EQ(ds_env_def_set(&def, "material.spring_ke", "-1", err, sizeof err), DS_ERR_CONFIG);
  CHECK_STR_CONTAINS(err, "env.material.spring_ke: expected a number in [0, 1e+09], got -1");
  const char* text =
      "{\"env\": {\"name\": \"hanging-spring\", \"material\": {\"mass\": 0.4, \"spring_ke\": 150},"
      " \"physics\": {\"substeps\": 240}}, \"controller\": {\"lr\": 0.5}, \"run\": {\"seed\": 7}}";
  dsEnvDef parsed;
  CHECK_INT_EQ(ds_env_def_from_text("hang.json", text, &parsed, err, sizeof err), 0);
  CHECK(parsed.cls == &hang_class);
  CHECK_CLOSE(((HangParams*)ds_env_def_params(&parsed))->mass, 0.4, 0, 0);
  CHECK_INT_EQ(ds_env_def_from_text("hang.json", "{\"env\": {\"name\": \"hanging-spring\", \"material\": {\"mas\": 1}}}",
                                    &parsed, err, sizeof err),
               DS_ERR_CONFIG);
  CHECK_STR_CONTAINS(err, "unknown key \"env.material.mas\" (did you mean \"env.material.mass\"?)");
  CHECK_INT_EQ(ds_env_def_from_text("hang.json", "{\"env\": {\"name\": \"hanging-spring\", \"material\": {\"spring_ke\": 0}}}",
                                    &parsed, err, sizeof err),
               DS_ERR_CONFIG);
  CHECK_STR_CONTAINS(err, "material.spring_ke: must be > 0"); /* the class's own check */
  /* the definition written back reads back to the same definition */
  int need = ds_env_def_to_json(&def, NULL, 0);
  CHECK(need > 0);
  char* json = (char*)malloc((size_t)need + 1);
  ds_env_def_to_json(&def, json, (size_t)need + 1);
  CHECK_STR_CONTAINS(json, "\"spring_ke\": 150");
  dsEnvDef back;
  CHECK_INT_EQ(ds_env_def_from_text("back.json", json, &back, err, sizeof err), 0);
  CHECK(memcmp(&back, &def, sizeof def) == 0);
  free(json);

  /* ---- episode and gradients ---- */
  dsEnv* env = NULL;
  CHECK_INT_EQ(ds_env_create(&def, &env, err, sizeof err), 0);
  if (!env) {
    fprintf(stderr, "create: %s\n", err);
    return DST_RESULT();
  }
  CHECK_STR_EQ(ds_env_name(env), "hanging-spring");
  CHECK_INT_EQ(ds_env_action_kind(env), DS_ACTION_PER_STEP);
  const int S = ds_env_num_steps(env), A = ds_env_action_size(env);
  CHECK_INT_EQ(S, 10);
  CHECK_INT_EQ(A, 2);
  dsReal act[20], gact[20];
  for (int i = 0; i < S * A; i++) act[i] = (dsReal)(0.8 * sin(1.3 * i + 0.2));
  const double l0 = rollout_loss(env, act, S, A);
  dsReal l = 0;
  CHECK_INT_EQ(ds_env_backward_loss(env, &l, gact), 0);
  CHECK_CLOSE(l, l0, 0, 0);
  double ga[20], fa[20];
  const double h = 1e-6;
  for (int i = 0; i < S * A; i++) {
    ga[i] = (double)gact[i];
    const dsReal keep = act[i];
    act[i] = keep + h;
    const double lp = rollout_loss(env, act, S, A);
    act[i] = keep - h;
    const double lm = rollout_loss(env, act, S, A);
    act[i] = keep;
    fa[i] = (lp - lm) / (2 * h);
  }
  check_grad("hanging-spring dL/d(actions)", ga, fa, S * A, 1e-5, 1e-6);
  /* parameter gradients: spring stiffness and the free particles' masses */
  rollout_loss(env, act, S, A);
  CHECK_INT_EQ(ds_env_backward_loss(env, NULL, NULL), 0);
  const char* names[] = {"spring.ke", "particle.mass"};
  for (int q = 0; q < 2; q++) {
    const dsReal *g = NULL, *v = NULL;
    int n = 0, nv = 0;
    CHECK_INT_EQ(ds_env_param_grad(env, names[q], &g, &n), 0);
    CHECK_INT_EQ(ds_env_param(env, names[q], &v, &nv), 0);
    double a[3], f[3];
    dsReal vals[3];
    memcpy(vals, v, sizeof(dsReal) * (size_t)nv);
    for (int i = 0; i < n; i++) a[i] = (double)g[i];
    for (int i = 0; i < nv; i++) {
      const dsReal keep = vals[i];
      const double hh = 1e-6 * (fabs((double)keep) > 1 ? fabs((double)keep) : 1);
      if (keep == 0) { /* the fixed particle: no mass to perturb */
        f[i] = a[i] = 0;
        continue;
      }
      /* parameters are set between episodes (after a reset, before a step) */
      vals[i] = keep + hh;
      CHECK_INT_EQ(ds_env_reset(env, 7, NULL, NULL), 0);
      CHECK_INT_EQ(ds_env_set_param(env, names[q], vals, nv), 0);
      double lp = rollout_loss(env, act, S, A);
      vals[i] = keep - hh;
      CHECK_INT_EQ(ds_env_reset(env, 7, NULL, NULL), 0);
      CHECK_INT_EQ(ds_env_set_param(env, names[q], vals, nv), 0);
      double lm = rollout_loss(env, act, S, A);
      vals[i] = keep;
      CHECK_INT_EQ(ds_env_reset(env, 7, NULL, NULL), 0);
      CHECK_INT_EQ(ds_env_set_param(env, names[q], vals, nv), 0);
      f[i] = (lp - lm) / (2 * hh);
    }
    char what[64];
    snprintf(what, sizeof what, "hanging-spring dL/d(%s)", names[q]);
    check_grad(what, a, f, nv, 1e-5, 1e-6);
  }
  /* the metric: |com - target|^2 / 3 */
  dsReal m = 0, tgt[3];
  CHECK_INT_EQ(ds_env_metric(env, &m), 0);
  CHECK_INT_EQ(ds_env_target(env, tgt), 0);
  CHECK(tgt[0] >= 0.3 && tgt[0] < 0.6);
  CHECK_CLOSE(ds_env_metric_goal(env), 0, 0, 0);

  /* ---- the trainer, as for a bundled env ---- */
  const char* methods[] = {"whole episode", "MPC"};
  double initial = 0; /* metric of the initial parameters (whole episode, iteration 0) */
  for (int mpc = 0; mpc <= 1; mpc++) {
    dsTrainerDef td = ds_default_trainer_def();
    td.env_seed = 7;
    td.net.strength = 20; /* newtons */
    td.optim.lr = mpc ? 0.02 : 0.05;
    td.mpc = mpc;
    dsTrainer* tr = NULL;
    CHECK_INT_EQ(ds_trainer_create(env, &td, &tr, err, sizeof err), 0);
    if (!tr) {
      fprintf(stderr, "trainer: %s\n", err);
      break;
    }
    double first = 0, last = 0, best = INFINITY;
    for (int i = 0; i < (mpc ? 5 : 30); i++) {
      dsTrainerIter it;
      CHECK_INT_EQ(ds_trainer_iterate(tr, &it), 0);
      if (i == 0) first = it.metric;
      last = it.metric;
      best = it.metric < best ? it.metric : best;
    }
    printf("  trainer (%s): metric %.4g -> %.4g (best %.4g)\n", methods[mpc], first, last, best);
    if (!mpc) {
      initial = first;
      CHECK(last < 0.25 * first);
    } else { /* the best executed episode of the passes beats the initial parameters */
      CHECK(best < 0.5 * initial);
    }
    ds_trainer_destroy(tr);
  }
  ds_env_destroy(env);
  return DST_RESULT();
}

/* A user-written environment class, registered through the public API
 * (ds_env_register), goes through the same code paths as the bundled ones:
 * the registry, the config's env section with its own keys (strict, with
 * suggestions), ds_env_def_to_json, reset/step/backward, gradients of the
 * actions and of the parameters against central differences, and the
 * trainer (whole episode and MPC). The class, "hanging-spring", is in
 * tests/hang_env.h (also built as a `dsim run --plugin` for
 * tests/test_run_cli.sh). */
#include "config.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

#include "dsim/dsim.h"
#include "tests/dstest.h"
#include "tests/gradcheck.h"
#include "tests/hang_env.h"

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
  CHECK_CLOSE(ds_env_action_scale(env), 1.0, 0, 0); /* the per-step default */
  CHECK(isnan(ds_env_action_scale(NULL)));
  /* the bundled classes' action scales (the range their physics stands) */
  {
    const char* names[6] = {"walker", "control-fem", "control-cloth", "walker-springs", "rigid-toss", "beam"};
    const double want[6] = {1, 0.3, 5, 1, 5, 0.3};
    for (int k = 0; k < 6; k++) {
      dsEnvDef bd = ds_default_env_def(names[k]);
      dsEnv* be = NULL;
      CHECK_INT_EQ(ds_env_create(&bd, &be, err, sizeof err), 0);
      if (be) CHECK_CLOSE(ds_env_action_scale(be), want[k], 0, 0);
      ds_env_destroy(be);
    }
  }
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

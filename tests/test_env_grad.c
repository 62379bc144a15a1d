/* Gradients of every environment through the public API against central
 * finite differences on shortened episodes (small images, soft edges):
 * d(loss)/d(action of every step) for the image and centre-of-mass losses,
 * d(loss)/d(named parameters), and the caller-supplied adjoint path
 * (observations, images, rewards). Every comparison also shows that the
 * same check rejects the analytic gradient with one component scaled by
 * 1.01. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsim/env.h"
#include "dsim/raster.h"
#include "tests/dstest.h"
#include "tests/gradcheck.h"

#define SEED 7u

/* FD step of the actions; larger where the loss is a difference of large
 * numbers (centre of mass ~4 m moved by ~1e-9 m) */
static double g_act_h = 1e-6;


typedef struct Run {
  dsEnv* env;
  int steps, A;
  dsReal* act;  /* steps x A */
  const char* pname; /* parameter perturbed (NULL: none) */
  int pidx;
  dsReal pval;
  /* adjoint mode */
  const dsReal *adj_obs, *adj_img, *adj_rew;
} Run;

/* Objective of one rollout from reset. */
static double rollout(Run* r) {
  dsEnv* env = r->env;
  int rc = ds_env_reset(env, SEED, NULL, NULL);
  CHECK_INT_EQ(rc, 0);
  dsReal* saved = NULL;
  int cnt = 0;
  if (r->pname) {
    const dsReal* p;
    ds_env_param(env, r->pname, &p, &cnt);
    saved = (dsReal*)malloc(sizeof(dsReal) * (size_t)cnt);
    memcpy(saved, p, sizeof(dsReal) * (size_t)cnt);
    dsReal* mod = (dsReal*)malloc(sizeof(dsReal) * (size_t)cnt);
    memcpy(mod, p, sizeof(dsReal) * (size_t)cnt);
    mod[r->pidx] = r->pval;
    CHECK_INT_EQ(ds_env_set_param(env, r->pname, mod, cnt), 0);
    free(mod);
  }
  const int O = ds_env_obs_size(env);
  int w, h;
  ds_env_image_size(env, &w, &h);
  const size_t npix = 4 * (size_t)w * h;
  dsReal* obs = (dsReal*)calloc((size_t)O + 1, sizeof(dsReal));
  dsReal* img = r->adj_img ? (dsReal*)calloc(npix, sizeof(dsReal)) : NULL;
  double J = 0;
  int done = 0;
  for (int k = 0; k < r->steps; k++) {
    dsReal rew = 0;
    rc = ds_env_step(env, r->act + (size_t)k * r->A, obs, img, &rew, &done);
    CHECK_INT_EQ(rc, 0);
    if (r->adj_obs)
      for (int i = 0; i < O; i++) J += (double)r->adj_obs[(size_t)k * O + i] * obs[i];
    if (r->adj_img)
      for (size_t p = 0; p < npix; p++) J += (double)r->adj_img[(size_t)k * npix + p] * img[p];
    if (r->adj_rew) J += (double)r->adj_rew[k] * rew;
  }
  if (!r->adj_obs && !r->adj_img && !r->adj_rew) {
    dsReal l;
    ds_env_loss(env, &l);
    J = l;
  }
  if (saved) {
    ds_env_reset(env, SEED, NULL, NULL);
    ds_env_set_param(env, r->pname, saved, cnt);
    free(saved);
  }
  free(obs);
  free(img);
  return J;
}

/* analytic gradient of the rollout objective: actions into ga (steps x A) */
static void analytic(Run* r, dsReal* ga) {
  Run q = *r;
  q.pname = NULL;
  q.adj_obs = q.adj_img = q.adj_rew = NULL;
  dsEnv* env = r->env;
  CHECK_INT_EQ(ds_env_reset(env, SEED, NULL, NULL), 0);
  int done = 0;
  for (int k = 0; k < r->steps; k++) CHECK_INT_EQ(ds_env_step(env, r->act + (size_t)k * r->A, NULL, NULL, NULL, &done), 0);
  int rc;
  if (r->adj_obs || r->adj_img || r->adj_rew)
    rc = ds_env_backward_adjoints(env, r->adj_obs, r->adj_img, r->adj_rew, ga);
  else
    rc = ds_env_backward_loss(env, NULL, ga);
  if (rc) printf("  backward: %s\n", ds_env_last_error(env));
  CHECK_INT_EQ(rc, 0);
}

static void check_actions(const char* what, Run* r, int stride, double rtol, double atol) {
  const int n = r->steps * r->A;
  dsReal* ga = (dsReal*)calloc((size_t)n, sizeof(dsReal));
  analytic(r, ga);
  int m = 0;
  double* a = (double*)malloc(sizeof(double) * (size_t)n);
  double* f = (double*)malloc(sizeof(double) * (size_t)n);
  for (int i = 0; i < n; i += stride) {
    const dsReal a0 = r->act[i], hh = (dsReal)g_act_h;
    r->act[i] = a0 + hh;
    double lp = rollout(r);
    r->act[i] = a0 - hh;
    double lm = rollout(r);
    r->act[i] = a0;
    a[m] = ga[i];
    f[m++] = (lp - lm) / (2 * hh);
  }
  check_grad(what, a, f, m, rtol, atol);
  free(a);
  free(f);
  free(ga);
}

static void check_param(const char* what, Run* r, const char* name, int stride, double rtol, double atol) {
  const int n0 = r->steps * r->A;
  dsReal* ga = (dsReal*)calloc((size_t)n0 + 1, sizeof(dsReal));
  analytic(r, ga);
  const dsReal *g, *p;
  int cnt = 0, cnt2 = 0;
  CHECK_INT_EQ(ds_env_param_grad(r->env, name, &g, &cnt), 0);
  CHECK_INT_EQ(ds_env_param(r->env, name, &p, &cnt2), 0);
  CHECK_INT_EQ(cnt, cnt2);
  double* a = (double*)malloc(sizeof(double) * (size_t)cnt);
  double* f = (double*)malloc(sizeof(double) * (size_t)cnt);
  dsReal* gc = (dsReal*)malloc(sizeof(dsReal) * (size_t)cnt);
  dsReal* pc = (dsReal*)malloc(sizeof(dsReal) * (size_t)cnt);
  memcpy(gc, g, sizeof(dsReal) * (size_t)cnt);
  memcpy(pc, p, sizeof(dsReal) * (size_t)cnt);
  int m = 0;
  for (int i = 0; i < cnt; i += stride) {
    const dsReal hh = 1e-6 * (fabs(pc[i]) > 1 ? fabs(pc[i]) : 1);
    Run q = *r;
    q.pname = name;
    q.pidx = i;
    q.pval = pc[i] + hh;
    double lp = rollout(&q);
    q.pval = pc[i] - hh;
    double lm = rollout(&q);
    a[m] = gc[i];
    f[m++] = (lp - lm) / (2 * hh);
  }
  char label[128];
  snprintf(label, sizeof label, "%s d/d %s", what, name);
  check_grad(label, a, f, m, rtol, atol);
  free(a);
  free(f);
  free(gc);
  free(pc);
  free(ga);
}

static void small_render(dsEnvDef* d, int px) {
  d->width = d->height = px;
  d->supersample = 1;
  d->sigma = 3e-3;
  d->gamma = 1e-2;
}

static dsEnv* make(const dsEnvDef* d) {
  dsEnv* env = NULL;
  char err[512];
  int rc = ds_env_create(d, &env, err, sizeof err);
  if (rc) printf("create: %s\n", err);
  CHECK_INT_EQ(rc, 0);
  return env;
}

static void fill_actions(dsReal* a, int n, double amp, unsigned s) {
  for (int i = 0; i < n; i++) {
    s = s * 1664525u + 1013904223u;
    a[i] = (dsReal)(amp * ((double)(s >> 8) / 16777216.0 - 0.5));
  }
}

int main(void) {
  if (DS_SINGLE) DST_SKIP("gradient checks need double precision");
  /* thousands of tiny rollouts: one thread avoids fork/join overhead (the
   * thread-count independence is tested in test_env) */
  ds_set_num_threads(1);
  const double RT = 1e-4, AT = 1e-6;
  /* with the gear on the ground, contact switches (in/out of the skin,
   * friction cap) make FD one-sided for some components: looser, but a
   * 1% error is still rejected */
  const double RTC = 5e-3;

  /* ---- walker: airborne image loss, every action and triangle parameter */
  {
    dsEnvDef d = ds_default_env_def("walker");
    d.substeps = 48;
    d.control_interval = 16;
    d.render_interval = 24;
    d.loss_kind = DS_ENV_LOSS_IMAGE_SUM;
    d.goal_x_min = d.goal_x_max = 0.3;
    small_render(&d, 24);
    dsEnv* env = make(&d);
    if (env) {
      Run r = {env, 3, ds_env_action_size(env), NULL, NULL, 0, 0, NULL, NULL, NULL};
      CHECK_INT_EQ(r.A, 104);
      r.act = (dsReal*)calloc((size_t)r.steps * r.A, sizeof(dsReal));
      fill_actions(r.act, r.steps * r.A, 0.4, 1);
      check_actions("walker image_sum actions", &r, 1, RT, AT);
      check_param("walker", &r, "tri.k_lambda", 3, RT, AT);
      /* the z components of initial_velocity tilt the faces out of the z = 0
       * plane: with the default headlight they are lit (with a light along
       * +y they sat on the kink of max(0, n.l), where a central difference
       * and the one-sided adjoint legitimately differ) */
      check_param("walker", &r, "initial_velocity", 5, RT, AT);
      check_param("walker", &r, "particle.mass", 3, RT, AT);
      free(r.act);
      ds_env_destroy(env);
    }
  }
  /* ---- walker, D-SSIM image loss on a 2-level pyramid */
  {
    dsEnvDef d = ds_default_env_def("walker");
    d.substeps = 32;
    d.control_interval = 16;
    d.render_interval = 32;
    d.render_last = 1;
    d.image_loss = DS_LOSS_DSSIM;
    d.loss_levels = 2;
    d.goal_x_min = d.goal_x_max = 0.3;
    small_render(&d, 24);
    dsEnv* env = make(&d);
    if (env) {
      Run r = {env, 2, ds_env_action_size(env), NULL, NULL, 0, 0, NULL, NULL, NULL};
      r.act = (dsReal*)calloc((size_t)r.steps * r.A, sizeof(dsReal));
      fill_actions(r.act, r.steps * r.A, 0.4, 11);
      check_actions("walker dssim actions", &r, 3, RT, AT);
      free(r.act);
      ds_env_destroy(env);
    }
  }
  /* ---- walker in ground contact, centre-of-mass loss: contact parameters */
  {
    dsEnvDef d = ds_default_env_def("walker");
    d.substeps = 40;
    d.control_interval = 20;
    d.render_interval = 40;
    d.loss_kind = DS_ENV_LOSS_COM;
    d.start[1] = -0.05;
    d.velocity[0] = 0.3;
    d.velocity[1] = -0.2; /* away from the kink of kd min(vn, 0) at vn = 0 */
    small_render(&d, 8);
    dsEnv* env = make(&d);
    if (env) {
      Run r = {env, 2, ds_env_action_size(env), NULL, NULL, 0, 0, NULL, NULL, NULL};
      r.act = (dsReal*)calloc((size_t)r.steps * r.A, sizeof(dsReal));
      fill_actions(r.act, r.steps * r.A, 0.4, 2);
      check_actions("walker contact com actions", &r, 7, RT, AT);
      check_param("walker contact", &r, "contact.ke", 1, RT, AT);
      check_param("walker contact", &r, "contact.kf", 1, RT, AT);
      check_param("walker contact", &r, "particle.mass", 5, RT, AT);
      check_param("walker contact", &r, "initial_velocity", 5, RT, AT);
      free(r.act);
      ds_env_destroy(env);
    }
  }
  /* ---- control-fem: a small gear, image loss of the last frame */
  {
    dsEnvDef d = ds_default_env_def("control-fem");
    dsControlFemParams* fp = (dsControlFemParams*)ds_env_def_params(&d);
    fp->gear.teeth = 4;
    fp->gear.layers = 1;
    d.substeps = 40;
    d.control_interval = 20;
    d.render_interval = 20;
    d.render_last = 1;
    fp->k_lambda = 100;
    fp->k_mu = 100;
    d.goal_x_min = -3.5;
    d.goal_x_max = -3.4;
    d.cam_distance = 9;
    d.cam2 = 1; /* and a second view, from above */
    d.cam2_distance = 9;
    d.cam2_elevation = 70;
    d.cam2_azimuth = 20;
    small_render(&d, 24);
    dsEnv* env = make(&d);
    if (env) {
      Run r = {env, 2, ds_env_action_size(env), NULL, NULL, 0, 0, NULL, NULL, NULL};
      r.act = (dsReal*)calloc((size_t)r.steps * r.A, sizeof(dsReal));
      fill_actions(r.act, r.steps * r.A, 0.6, 3);
      check_actions("fem image_last actions", &r, 1, RT, AT);
      /* tiny per-tet gradients: FD noise ~1e-13 against 1e-10 values */
      check_param("fem", &r, "tet.k_mu", 1, RT, 1e-3);
      check_param("fem", &r, "initial_velocity", 4, RT, AT);
      free(r.act);
      ds_env_destroy(env);
    }
  }
  /* ---- control-cloth: initial-velocity action, image sum, aero and bending;
     on the serial engine, then on the batched engine (what CUDA runs: the
     action's state goes up at substep 0, its adjoint comes back there) */
  for (int be = 0; be < 2; be++) {
    dsEnvDef d = ds_default_env_def("control-cloth");
    d.batch_engine = be;
    dsControlClothParams* cp = (dsControlClothParams*)ds_env_def_params(&d);
    cp->size_min = cp->size_max = 4;
    cp->cell = 0.5;
    d.substeps = 60;
    d.control_interval = 30;
    d.render_interval = 30;
    d.start[0] = -1;
    d.goal_x_min = -0.5;
    d.goal_x_max = 0;
    d.goal_y = 2.2;
    d.cam_distance = 12;
    d.cam2 = 1;
    d.cam2_distance = 12;
    d.cam2_elevation = 60;
    small_render(&d, 24);
    dsEnv* env = make(&d);
    if (env) {
      Run r = {env, 2, ds_env_action_size(env), NULL, NULL, 0, 0, NULL, NULL, NULL};
      CHECK_INT_EQ(r.A, 3);
      r.act = (dsReal*)calloc((size_t)r.steps * r.A, sizeof(dsReal));
      r.act[0] = 1;
      r.act[1] = 0.5;
      r.act[2] = -0.2;
      {
        /* the second step's action is ignored: zero gradient */
        dsReal ga[6];
        analytic(&r, ga);
        CHECK(ga[3] == 0 && ga[4] == 0 && ga[5] == 0);
        CHECK(fabs(ga[0]) + fabs(ga[1]) + fabs(ga[2]) > 0);
      }
      check_actions(be ? "cloth (batched engine) image_sum actions" : "cloth image_sum actions", &r, 1, RT, AT);
      check_param(be ? "cloth (batched engine)" : "cloth", &r, "aero.drag", 1, RT, AT);
      check_param(be ? "cloth (batched engine)" : "cloth", &r, "aero.lift", 1, RT, AT);
      free(r.act);
      ds_env_destroy(env);
    }
    /* the same with the centre-of-mass loss (no renderer in the chain) */
    d.loss_kind = DS_ENV_LOSS_COM;
    env = make(&d);
    if (env) {
      Run r = {env, 2, ds_env_action_size(env), NULL, NULL, 0, 0, NULL, NULL, NULL};
      r.act = (dsReal*)calloc((size_t)r.steps * r.A, sizeof(dsReal));
      r.act[0] = 1;
      r.act[1] = 0.5;
      r.act[2] = -0.2;
      check_actions("cloth com actions", &r, 1, RT, AT);
      check_param("cloth com", &r, "aero.drag", 1, RT, AT);
      check_param("cloth com", &r, "aero.lift", 1, RT, AT);
      check_param("cloth com", &r, "initial_position", 7, 1e-3, AT);

      free(r.act);
      ds_env_destroy(env);
    }
    /* the same scene with the implicit integrator at 10x the step (lift and
     * drag in its Newton matrix and adjoint), image and com losses; Newton
     * and the adjoint solve tight, as FD resolves the loss to ~1e-10 */
    d.integrator = DS_INTEGRATOR_IMPLICIT;
    d.dt *= 10;
    d.substeps = 6;
    d.control_interval = 3;
    d.render_interval = 3;
    d.solver.newton_tol = 1e-13;
    d.solver.cg_tol = 1e-12;
    d.solver.adjoint_tol = 1e-13;
    d.solver.cg_max_iter = 2000;
    for (int lk = 0; lk < 2; lk++) {
      d.loss_kind = lk ? DS_ENV_LOSS_COM : DS_ENV_LOSS_IMAGE_SUM;
      env = make(&d);
      if (!env) continue;
      Run r = {env, 2, ds_env_action_size(env), NULL, NULL, 0, 0, NULL, NULL, NULL};
      r.act = (dsReal*)calloc((size_t)r.steps * r.A, sizeof(dsReal));
      r.act[0] = 1;
      r.act[1] = 0.5;
      r.act[2] = -0.2;
      check_actions(lk ? "implicit cloth com actions" : "implicit cloth image_sum actions", &r, 1, RT, AT);
      check_param("implicit cloth", &r, "aero.drag", 1, RT, AT);
      check_param("implicit cloth", &r, "aero.lift", 1, RT, AT);
      free(r.act);
      ds_env_destroy(env);
    }
  }
  /* ---- walker-springs: actuation through external forces */
  {
    dsEnvDef d = ds_default_env_def("walker-springs");
    d.substeps = 64;
    d.control_interval = 16;
    d.render_interval = 32;
    d.loss_kind = DS_ENV_LOSS_IMAGE_SUM;
    d.goal_x_min = d.goal_x_max = 0.1;
    d.start[1] = 0.05;
    small_render(&d, 24);
    dsEnv* env = make(&d);
    if (env) {
      Run r = {env, 4, ds_env_action_size(env), NULL, NULL, 0, 0, NULL, NULL, NULL};
      r.act = (dsReal*)calloc((size_t)r.steps * r.A, sizeof(dsReal));
      fill_actions(r.act, r.steps * r.A, 0.3, 4);
      check_actions("springs image_sum actions", &r, 1, RT, AT);
      check_param("springs", &r, "spring.ke", 1, RT, AT);
      check_param("springs", &r, "spring.rest", 1, RT, AT);
      free(r.act);
      ds_env_destroy(env);
    }
  }
  /* ---- caller-supplied adjoints: state, image and reward (walker-springs,
   *      full state + image observations; control-fem, centre of mass) */
  {
    dsEnvDef d = ds_default_env_def("walker-springs");
    d.substeps = 48;
    d.control_interval = 16;
    d.render_interval = 16;
    d.loss_kind = DS_ENV_LOSS_IMAGE_SUM;
    d.obs_state = DS_OBS_STATE_FULL;
    d.obs_image = 1;
    d.goal_x_min = d.goal_x_max = 0.1;
    small_render(&d, 16);
    dsEnv* env = make(&d);
    if (env) {
      Run r = {env, 3, ds_env_action_size(env), NULL, NULL, 0, 0, NULL, NULL, NULL};
      const int O = ds_env_obs_size(env), npix = 4 * 16 * 16;
      CHECK_INT_EQ(O, 2 * 3 * ds_env_num_particles(env));
      r.act = (dsReal*)calloc((size_t)r.steps * r.A, sizeof(dsReal));
      fill_actions(r.act, r.steps * r.A, 0.3, 5);
      dsReal* ao = (dsReal*)calloc((size_t)r.steps * O, sizeof(dsReal));
      dsReal* ai = (dsReal*)calloc((size_t)r.steps * npix, sizeof(dsReal));
      dsReal ar[3] = {0.7, -1.3, 2.1};
      fill_actions(ao, r.steps * O, 2, 6);
      fill_actions(ai, r.steps * npix, 2, 7);
      r.adj_obs = ao;
      r.adj_img = ai;
      r.adj_rew = ar;
      check_actions("springs adjoints actions", &r, 1, RT, AT);
      check_param("springs adjoints", &r, "particle.mass", 1, RT, AT);
      free(ao);
      free(ai);
      free(r.act);
      ds_env_destroy(env);
    }
  }
  {
    dsEnvDef d = ds_default_env_def("control-fem");
    dsControlFemParams* fp = (dsControlFemParams*)ds_env_def_params(&d);
    fp->gear.teeth = 3;
    fp->gear.layers = 1;
    d.substeps = 30;
    d.control_interval = 10;
    d.render_interval = 30;
    d.loss_kind = DS_ENV_LOSS_COM;
    d.obs_state = DS_OBS_STATE_COM;
    fp->k_lambda = 100;
    fp->k_mu = 100;
    d.start[1] = 1.8;
    d.velocity[1] = -1;
    d.contact_kf = 1e4;
    d.goal_x_min = d.goal_x_max = -3.9;
    d.goal_y = 1.8;
    small_render(&d, 8);
    dsEnv* env = make(&d);
    if (env) {
      /* lower the gear so that its lowest vertex starts 5 mm into the skin */
      CHECK_INT_EQ(ds_env_reset(env, SEED, NULL, NULL), 0);
      const dsReal* x = ds_env_positions(env);
      dsReal ymin = 1e9;
      for (int i = 0; i < ds_env_num_particles(env); i++) ymin = x[3 * i + 1] < ymin ? x[3 * i + 1] : ymin;
      ds_env_destroy(env);
      d.start[1] -= ymin - (dsReal)0.005;
      env = make(&d);
    }
    if (env) {
      Run r = {env, 3, ds_env_action_size(env), NULL, NULL, 0, 0, NULL, NULL, NULL};
      CHECK_INT_EQ(ds_env_obs_size(env), 6);
      r.act = (dsReal*)calloc((size_t)r.steps * r.A, sizeof(dsReal));
      fill_actions(r.act, r.steps * r.A, 0.6, 8);
      g_act_h = 1e-4;
      check_actions("fem com-loss actions", &r, 1, RTC, AT);
      check_param("fem com-loss", &r, "particle.mass", 1, RTC, AT);
      check_param("fem com-loss", &r, "contact.mu", 1, RTC, AT);
      dsReal ao[18], ar[3] = {1.5, -0.5, 0.25};
      fill_actions(ao, 18, 2, 9);
      r.adj_obs = ao;
      r.adj_rew = ar;
      check_actions("fem com adjoints actions", &r, 1, RTC, AT);
      check_param("fem com adjoints", &r, "particle.mass", 1, RTC, AT);
      free(r.act);
      ds_env_destroy(env);
    }
  }
  return DST_RESULT();
}

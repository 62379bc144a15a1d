/* rigid-toss: the env runs (a 2 N s impulse slides the 1 kg box about
 * v^2 / (2 mu g), within 5%), its state includes the body (size 1 + 6 n +
 * 13, a saved state restores the episode bit for bit), and the image loss
 * reaches the body: d(image loss)/d(body.mass, body.contact_mu,
 * body.restitution, body.initial_position, body.initial_orientation,
 * body.initial_angular_velocity, the impulse) from the env's
 * backward match central differences of the loss (rtol 2e-3 on components
 * above 2% of the class maximum; a 1% change of the largest is rejected).
 * Rendering: 64 x 64, sigma 1e-4 (smooth enough for differences).
 * System identification: the box's mass recovered from the video of an
 * episode to a relative error below 1e-4 (from 1.6 kg; 1 kg true). */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dsim/engine.h"
#include "dsim/env.h"
#include "tests/dstest.h"
#include "tests/gradcheck.h"

static dsEnv* make(int substeps) {
  dsEnvDef def = ds_default_env_def("rigid-toss");
  CHECK(def.cls != NULL);
  def.substeps = substeps;
  def.width = def.height = 64;
  def.supersample = 1;
  def.sigma = 1e-4;
  def.gamma = 1e-3;
  def.goal_x_min = 0.35;
  def.goal_x_max = 0.35 + 1e-9;
  def.cam_distance = 3;
  /* the approach-only damping kd switches at v_y = 0, where a body at rest
     sits: differences in the initial height would straddle it (the
     restitution damping is two-sided and smooth) */
  def.contact_kd = 0;
  dsEnv* env = NULL;
  char err[512];
  int rc = ds_env_create(&def, &env, err, sizeof err);
  if (rc) fprintf(stderr, "create: %s\n", err);
  CHECK_INT_EQ(rc, 0);
  return env;
}

static double episode(dsEnv* env, const dsReal J[3]) {
  if (ds_env_reset(env, 1, NULL, NULL)) return NAN;
  const int S = ds_env_num_steps(env);
  for (int k = 0; k < S; k++)
    if (ds_env_step(env, J, NULL, NULL, NULL, NULL)) {
      fprintf(stderr, "step: %s\n", ds_env_last_error(env));
      return NAN;
    }
  dsReal L;
  ds_env_loss(env, &L);
  return L;
}

/* System identification from video: the mass of the box from the frames
 * of a reference episode (mass 1 kg, the same impulse), starting at 1.6 kg:
 * secant iterations on d(sum of frame MSEs)/d(body.mass), the gradient
 * from the frames' image adjoints (ds_env_backward_adjoints). */
static double video(dsEnv* env, const dsReal J[3], dsReal* frames) {
  const int S = ds_env_num_steps(env);
  int w, h;
  ds_env_image_size(env, &w, &h);
  const size_t np = (size_t)w * h * 4;
  if (ds_env_reset(env, 1, NULL, NULL)) return NAN;
  for (int k = 0; k < S; k++)
    if (ds_env_step(env, J, NULL, frames + (size_t)k * np, NULL, NULL)) return NAN;
  return 0;
}

static void test_sysid_mass(void) {
  dsEnvDef def = ds_default_env_def("rigid-toss");
  def.substeps = 384;
  def.width = def.height = 64;
  def.supersample = 1;
  def.sigma = 1e-4;
  def.gamma = 1e-3;
  def.cam_distance = 3;
  def.obs_image = 1;
  dsEnv* env = NULL;
  char err[512];
  CHECK_INT_EQ(ds_env_create(&def, &env, err, sizeof err), 0);
  if (!env) return;
  const int S = ds_env_num_steps(env);
  const size_t np = 64 * 64 * 4, nall = (size_t)S * np;
  dsReal* ref = calloc(nall, sizeof(dsReal));
  dsReal* img = calloc(nall, sizeof(dsReal));
  dsReal* adj = calloc(nall, sizeof(dsReal));
  const dsReal J[3] = {2, 0, 0.2};
  video(env, J, ref);
  /* walk down the gradient in steps of 10% until its sign flips, then
     false position (Illinois) on dL/dm inside the bracket */
  double m = 1.6, a = 0, ga = 0, b = 0, gb = 0;
  int it, side = 0, bracket = 0;
  for (it = 0; it < 40; it++) {
    ds_env_reset(env, 1, NULL, NULL);
    const dsReal mr = (dsReal)m;
    ds_env_set_param(env, "body.mass", &mr, 1);
    video(env, J, img);
    double L = 0;
    for (size_t q = 0; q < nall; q++) {
      const double e = img[q] - ref[q];
      L += e * e / (double)np;
      adj[q] = 2 * e / (double)np;
    }
    CHECK_INT_EQ(ds_env_backward_adjoints(env, NULL, adj, NULL, NULL), 0);
    const dsReal* gp;
    int n;
    ds_env_param_grad(env, "body.mass", &gp, &n);
    const double g = gp[0];
    printf("sysid iteration %d: mass %.9f kg, video loss %.3e, dL/dm %.3e\n", it, m, L, g);
    if (!bracket) {
      if (it > 0 && (g > 0) != (gb > 0)) {
        bracket = 1;
        a = b, ga = gb;
      } else {
        b = m, gb = g;
        m *= g > 0 ? 0.9 : 1.1;
        continue;
      }
    }
    if ((g > 0) == (ga > 0)) {
      a = m, ga = g;
      if (side == -1) gb /= 2;
      side = -1;
    } else {
      b = m, gb = g;
      if (side == 1) ga /= 2;
      side = 1;
    }
    if (fabs(b - a) < 1e-7) break;
    m = (a * gb - b * ga) / (gb - ga);
  }
  printf("sysid: mass recovered %.9f kg (true 1), absolute relative error %.2e after %d iterations\n", m,
         fabs(m - 1), it);
  CHECK(fabs(m - 1) < 1e-4);
  free(ref), free(img), free(adj);
  ds_env_destroy(env);
}

int main(void) {
  test_sysid_mass();
  if (sizeof(dsReal) != sizeof(double)) DST_SKIP("finite-difference checks need a double build");
  /* sliding distance and state */
  {
    dsEnv* env = make(960);
    const dsReal J[3] = {2, 0, 0};
    episode(env, J);
    const dsModel* m = ds_env_model(env);
    const dsData* d = ds_env_data(env);
    CHECK_INT_EQ(m->nbody, 1);
    const double dist = d->body[0] - m->body_x0[0], pred = 4.0 / (2 * 0.4 * 9.8);
    printf("rigid-toss: J = 2 N s on 1 kg: slides %.4f m (v^2/(2 mu g) = %.4f m)\n", dist, pred);
    CHECK(fabs(dist - pred) < 0.05 * pred);
    CHECK_INT_EQ(ds_env_state_size(env), 1 + 6 * m->nparticle + 13);
    /* save at step 10, finish, restore, finish again: same bits */
    ds_env_reset(env, 1, NULL, NULL);
    const int n = ds_env_state_size(env);
    dsReal* st = calloc((size_t)n, sizeof(dsReal));
    dsReal* a = calloc((size_t)n, sizeof(dsReal));
    dsReal* b = calloc((size_t)n, sizeof(dsReal));
    for (int k = 0; k < 10; k++) ds_env_step(env, J, NULL, NULL, NULL, NULL);
    ds_env_get_state(env, st, n);
    for (int k = 10; k < ds_env_num_steps(env); k++) ds_env_step(env, J, NULL, NULL, NULL, NULL);
    ds_env_get_state(env, a, n);
    CHECK_INT_EQ(ds_env_set_state(env, st, n), 0);
    for (int k = 10; k < ds_env_num_steps(env); k++) ds_env_step(env, J, NULL, NULL, NULL, NULL);
    ds_env_get_state(env, b, n);
    CHECK(memcmp(a, b, (size_t)n * sizeof(dsReal)) == 0);
    free(st), free(a), free(b);
    ds_env_destroy(env);
  }
  /* image loss gradients */
  {
    dsEnv* env = make(384);
    dsReal J[3] = {2, 0, 0.2};
    episode(env, J);
    const int S = ds_env_num_steps(env);
    dsReal* ga = calloc((size_t)S * 3, sizeof(dsReal));
    dsReal L;
    CHECK_INT_EQ(ds_env_backward_loss(env, &L, ga), 0);
    printf("image loss %.6g\n", L);
    static const char* const names[] = {"body.mass", "body.contact_mu", "body.restitution", "body.initial_position",
                                        "body.initial_orientation", "body.initial_angular_velocity"};
    for (int p = 0; p < 6; p++) {
      const dsReal* g;
      const dsReal* v;
      int n;
      ds_env_param_grad(env, names[p], &g, &n);
      double a[4], f[4];
      memcpy(a, g, (size_t)n * sizeof(double));
      ds_env_param(env, names[p], &v, &n);
      dsReal base[4];
      memcpy(base, v, (size_t)n * sizeof(dsReal));
      for (int k = 0; k < n; k++) {
        const double h = 1e-5 * fmax(fabs(base[k]), 1.0);
        dsReal q[4];
        memcpy(q, base, sizeof q);
        q[k] = base[k] + h;
        ds_env_reset(env, 1, NULL, NULL);
        ds_env_set_param(env, names[p], q, n);
        double lp = episode(env, J);
        q[k] = base[k] - h;
        ds_env_reset(env, 1, NULL, NULL);
        ds_env_set_param(env, names[p], q, n);
        double lm = episode(env, J);
        ds_env_reset(env, 1, NULL, NULL);
        ds_env_set_param(env, names[p], base, n);
        f[k] = (lp - lm) / (2 * h);
      }
      check_grad_loose(names[p], a, f, n, 2e-3, 2e-2, 1e-4);
    }
    double f[3], a[3] = {ga[0], ga[1], ga[2]};
    for (int k = 0; k < 3; k++) {
      const double h = 1e-5 * fmax(fabs(J[k]), 1.0);
      J[k] += h;
      double lp = episode(env, J);
      J[k] -= 2 * h;
      double lm = episode(env, J);
      J[k] += h;
      f[k] = (lp - lm) / (2 * h);
    }
    check_grad_loose("impulse (action)", a, f, 3, 2e-3, 2e-2, 1e-4);
    free(ga);
    ds_env_destroy(env);
  }
  return DST_RESULT();
}

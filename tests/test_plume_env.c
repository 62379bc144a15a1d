/* smoke-plume (envs/plume.c): the 3-D fluid env through the env API.
 *  - The gradient of a video loss as dsim sysid forms it (the mean over
 *    every step's image of the MSE against a target video filmed with other
 *    parameters; image adjoints of every step, so through the
 *    dsEnvSim.image_adjoint hook and one fluid sweep) with respect
 *    to buoyancy.alpha, source.0.velocity.y, source.0.density_rate and one
 *    cell of initial_density, through the volume renderer, against central
 *    differences in double: 8^3, 8 substeps in 4 steps, 16 x 16 pixels.
 *  - A checkpointed tape (physics.checkpoint_every 3) gives the same loss
 *    and gradients bit for bit; one thread = two threads, bit for bit, at
 *    16^3.
 *  - The metric: 1 with no smoke, 0 at the goal.
 *  - Bad input names the key: grid.n 0, a dt above the stated CFL limit, a
 *    source box outside the cube, a grid whose tape does not fit the memory
 *    bound, NaN in the initial density. */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dsim/env.h"
#include "tests/dstest.h"
#include "tests/gradcheck.h"
#include "tests/envcheck.h"

enum { W = 16, NPIX = 4 * W * W, MAXSTEP = 8 };

static dsEnvDef small_def(int n, int substeps, int checkpoint) {
  dsEnvDef def = ds_default_env_def("smoke-plume");
  char err[512] = "", num[32];
  def.substeps = substeps;
  def.control_interval = 2;
  def.render_interval = substeps;
  def.render_last = 0;
  def.obs_image = 1;
  def.checkpoint_every = checkpoint;
  def.width = def.height = W;
  def.dt = (dsReal)0.04;
  snprintf(num, sizeof num, "%d", n);
  CHECK_INT_EQ(ds_env_def_set(&def, "grid.n", num, err, sizeof err), 0);
  CHECK_INT_EQ(ds_env_def_set(&def, "fluid.tolerance", "1e-12", err, sizeof err), 0);
  CHECK_INT_EQ(ds_env_def_set(&def, "source.rate", "20", err, sizeof err), 0);
  CHECK_INT_EQ(ds_env_def_set(&def, "source.lo", "[0.3, 0.1, 0.3]", err, sizeof err), 0);
  CHECK_INT_EQ(ds_env_def_set(&def, "source.hi", "[0.7, 0.3, 0.7]", err, sizeof err), 0);
  return def;
}

static dsEnv* make(int n, int substeps, int checkpoint) {
  dsEnvDef def = small_def(n, substeps, checkpoint);
  dsEnv* env = NULL;
  char err[1024] = "";
  int rc = ds_env_create(&def, &env, err, sizeof err);
  if (rc) fprintf(stderr, "create smoke-plume: %s\n", err);
  CHECK_INT_EQ(rc, 0);
  return env;
}

static dsReal video[MAXSTEP * NPIX], adj[MAXSTEP * NPIX];

/* The episode's images into img (steps x NPIX). */
static int film(dsEnv* env, dsReal* img) {
  if (ds_env_reset(env, 0, NULL, NULL)) return -1;
  const int S = ds_env_num_steps(env);
  for (int k = 0; k < S; k++)
    if (ds_env_step(env, NULL, NULL, img + (size_t)k * NPIX, NULL, NULL)) {
      fprintf(stderr, "step: %s\n", ds_env_last_error(env));
      return -1;
    }
  return S;
}

/* sysid's loss: the mean over the steps of the image MSE against the
 * video; with g, its image adjoints */
static double video_loss(dsEnv* env, dsReal* g) {
  static dsReal img[MAXSTEP * NPIX];
  const int S = film(env, img);
  if (S < 0) return NAN;
  double L = 0;
  for (int k = 0; k < S; k++) {
    dsReal l = 0;
    dsReal* gk = g ? g + (size_t)k * NPIX : NULL;
    if (ds_env_image_loss(env, img + (size_t)k * NPIX, video + (size_t)k * NPIX, &l, gk)) return NAN;
    L += (double)l / S;
    for (int p = 0; gk && p < NPIX; p++) gk[p] /= S;
  }
  return L;
}

/* parameters are set between episodes: at a reset */
static int set1(dsEnv* env, const char* name, double v) {
  const dsReal x = (dsReal)v;
  ds_env_reset(env, 0, NULL, NULL);
  return ds_env_set_param(env, name, &x, 1);
}

/* the target video: alpha 1.6, inflow 0.7 m/s */
static void make_video(dsEnv* env) {
  CHECK_INT_EQ(set1(env, "buoyancy.alpha", 1.6), 0);
  CHECK_INT_EQ(set1(env, "source.0.velocity.y", 0.7), 0);
  CHECK(film(env, video) > 0);
  CHECK_INT_EQ(set1(env, "buoyancy.alpha", 1), 0);
  CHECK_INT_EQ(set1(env, "source.0.velocity.y", 0.5), 0);
}

static const char* const params[] = {"buoyancy.alpha", "source.0.velocity.y", "source.0.density_rate",
                                     "initial_density"};
enum { NP = 4, CELL = 3 + 8 * (4 + 8 * 4) }; /* initial_density: a cell above the source */

static void grad_check(void) {
  dsEnv* env = make(8, 8, 1);
  if (!env) return;
  CHECK_INT_EQ(ds_env_action_size(env), 0);
  CHECK_INT_EQ(ds_env_num_steps(env), 4);
  make_video(env);
  static dsReal rho0[512];
  for (int c = 0; c < 512; c++) rho0[c] = (dsReal)(0.1 + 0.05 * cos(0.37 * c));
  ds_env_reset(env, 0, NULL, NULL);
  CHECK_INT_EQ(ds_env_set_param(env, "initial_density", rho0, 512), 0);
  const double J0 = video_loss(env, adj);
  CHECK(J0 > 0);
  int rc = ds_env_backward_adjoints(env, NULL, adj, NULL, NULL);
  if (rc) printf("backward: %s\n", ds_env_last_error(env));
  CHECK_INT_EQ(rc, 0);
  double an[NP], fd[NP];
  for (int p = 0; p < NP; p++) {
    const dsReal* g;
    int c;
    CHECK_INT_EQ(ds_env_param_grad(env, params[p], &g, &c), 0);
    an[p] = g[p == 3 ? CELL : 0];
  }
  for (int p = 0; p < NP; p++) {
    const dsReal* v;
    int c;
    CHECK_INT_EQ(ds_env_param(env, params[p], &v, &c), 0);
    static dsReal x[512];
    memcpy(x, v, (size_t)c * sizeof(dsReal));
    const int j = p == 3 ? CELL : 0;
    const dsReal v0 = x[j], h = (dsReal)(1e-6 * fmax(1, fabs(v0)));
    double l[2];
    for (int sgn = 0; sgn < 2; sgn++) {
      x[j] = sgn ? v0 - h : v0 + h;
      ds_env_reset(env, 0, NULL, NULL);
      CHECK_INT_EQ(ds_env_set_param(env, params[p], x, c), 0);
      l[sgn] = video_loss(env, NULL);
    }
    x[j] = v0;
    ds_env_reset(env, 0, NULL, NULL);
    CHECK_INT_EQ(ds_env_set_param(env, params[p], x, c), 0);
    fd[p] = (l[0] - l[1]) / (2 * h);
    printf("  %s: analytic %.10g fd %.10g\n", params[p], an[p], fd[p]);
  }
  check_grad("plume parameters", an, fd, NP, 1e-5, 1e-7);
  ds_env_destroy(env);
}

/* loss and gradients of one episode into out */
static int run_all(dsEnv* env, double* out, int cap) {
  const double L = video_loss(env, adj);
  if (ds_env_backward_adjoints(env, NULL, adj, NULL, NULL)) return 0;
  int k = 0;
  out[k++] = L;
  for (int p = 0; p < NP; p++) {
    const dsReal* g;
    int c;
    if (ds_env_param_grad(env, params[p], &g, &c) || k + c > cap) return 0;
    for (int i = 0; i < c; i++) out[k++] = g[i];
  }
  return k;
}

static void bitwise(void) {
  enum { CAP = 8192 };
  static double r1[CAP], r2[CAP];
  dsEnv* full = make(8, 8, 1);
  dsEnv* ck = make(8, 8, 3);
  if (!full || !ck) return;
  make_video(full);
  env_same_bits(full, 1, ck, 1, run_all, r1, r2, CAP, 500);
  ds_env_destroy(full);
  ds_env_destroy(ck);
  dsEnv* env = make(16, 4, 1);
  if (!env) return;
  make_video(env);
  env_same_bits(env, 1, env, 2, run_all, r1, r2, CAP, 4000);
  ds_env_destroy(env);
}

static void metric(void) {
  dsEnv* env = make(8, 8, 1);
  if (!env) return;
  dsReal m;
  CHECK(film(env, video) > 0);
  CHECK_INT_EQ(ds_env_metric(env, &m), 0);
  CHECK(m >= 0 && m < 1e-20);
  CHECK_INT_EQ(set1(env, "source.0.density_rate", 0), 0);
  CHECK(film(env, video) > 0);
  CHECK_INT_EQ(ds_env_metric(env, &m), 0);
  CHECK_CLOSE(m, 1, 1e-12, 0);
  ds_env_destroy(env);
}

static void expect_create_error(dsEnvDef* def, int code, const char* key) {
  dsEnv* env = NULL;
  char err[1024] = "";
  const int rc = ds_env_create(def, &env, err, sizeof err);
  printf("%s: %s\n", key, err);
  CHECK_INT_EQ(rc, code);
  CHECK(strstr(err, key) != NULL);
  ds_env_destroy(env);
}

static void bad_input(void) {
  char err[512] = "";
  dsEnvDef def = ds_default_env_def("smoke-plume");
  CHECK(ds_env_def_set(&def, "grid.n", "0", err, sizeof err) != 0);
  printf("grid.n 0: %s\n", err);
  CHECK(strstr(err, "grid.n") != NULL);
  def = small_def(64, 8, 1);
  def.dt = (dsReal)0.06; /* dt max_speed / dx = 0.06 * 3 * 64 = 11.5 > cfl_max 10 */
  expect_create_error(&def, DS_ERR_CONFIG, "physics.dt");
  def = small_def(8, 8, 1);
  CHECK_INT_EQ(ds_env_def_set(&def, "source.hi", "[0.7, 0.3, 1.2]", err, sizeof err), 0);
  expect_create_error(&def, DS_ERR_CONFIG, "source.hi");
  /* the memory bound: the default 64^3 x 32 substeps against 64 MB */
  const size_t lim = ds_memory_limit();
  ds_set_memory_limit((size_t)64 << 20);
  def = ds_default_env_def("smoke-plume");
  expect_create_error(&def, DS_ERR_NOMEM, "grid size");
  ds_set_memory_limit(lim);
  dsEnv* env = make(8, 8, 1);
  if (!env) return;
  static dsReal rho[512];
  rho[37] = (dsReal)NAN;
  CHECK_INT_EQ(ds_env_set_param(env, "initial_density", rho, 512), DS_ERR_RANGE);
  printf("NaN: %s\n", ds_env_last_error(env));
  CHECK(strstr(ds_env_last_error(env), "initial_density[37]") != NULL);
  ds_env_destroy(env);
}

/* A box obstacle over the source: drawn in its colour in front of the
 * ground (flat; smoke in front of it veils it a little). */
static void obstacle(void) {
  dsEnvDef def = small_def(8, 8, 1);
  char err[512] = "";
  CHECK_INT_EQ(ds_env_def_set(&def, "obstacle.box_lo", "[0.2, 0.45, 0.2]", err, sizeof err), 0);
  CHECK_INT_EQ(ds_env_def_set(&def, "obstacle.box_hi", "[0.8, 0.6, 0.8]", err, sizeof err), 0);
  static dsReal img[NPIX];
  dsEnv* env = NULL;
  CHECK_INT_EQ(ds_env_create(&def, &env, err, sizeof err), 0);
  if (!env) return;
  CHECK_INT_EQ(ds_env_reset(env, 0, NULL, NULL), 0);
  for (int t = 0; t < ds_env_num_steps(env); t++) CHECK_INT_EQ(ds_env_step(env, NULL, NULL, NULL, NULL, NULL), 0);
  CHECK_INT_EQ(ds_env_render(env, img), 0);
  ds_env_destroy(env);
  int obs = 0;
  for (int q = 0; q < W * W; q++) obs += fabs(img[4 * q] - 0.45) < 0.03 && fabs(img[4 * q + 1] - 0.38) < 0.03;
  printf("obstacle: %d of %d pixels of its colour\n", obs, W * W);
  CHECK(obs > 4);
}

int main(void) {
  obstacle();
  grad_check();
  bitwise();
  metric();
  bad_input();
  return DST_RESULT();
}

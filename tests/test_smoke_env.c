/* smoke-control (envs/smoke.c): the fluid env through the env API.
 *  - The env's gradient of its image loss (IMAGE_LAST, MSE against the
 *    hidden-wind goal) with respect to every action and three named
 *    parameters (buoyancy.alpha, source.0.density_rate and one cell of
 *    initial_density) against central differences in double, on a 16^2
 *    grid over 8 steps (4 control steps), pressure tolerance 1e-12.
 *  - A checkpointed tape (physics.checkpoint_every 3) gives the same
 *    gradients, bit for bit; one thread = two threads, bit for bit, at 64^2
 *    (where the fluid's parallel loops run).
 *  - The metric is 1 for an empty box against the goal, 0 at the goal.
 *  - render.colormap_stops: the grey map as stops renders as
 *    render.colormap grey, bit for bit; a three-stop map's gradients
 *    against central differences; bad stops refused naming the key.
 *  - Bad input names the key: grid.n 0, a dt above the stated CFL limit, a
 *    render size other than the grid, NaN in the initial density, a grid
 *    whose tape does not fit the memory bound. */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dsim/env.h"
#include "tests/dstest.h"
#include "tests/gradcheck.h"
#include "tests/envcheck.h"

#define NA_MAX 512

static dsEnvDef small_def(int n, int substeps, int checkpoint) {
  dsEnvDef def = ds_default_env_def("smoke-control");
  char err[512] = "", num[32];
  def.substeps = substeps;
  def.control_interval = 2;
  def.render_interval = substeps;
  def.checkpoint_every = checkpoint;
  def.width = def.height = n;
  snprintf(num, sizeof num, "%d", n);
  CHECK_INT_EQ(ds_env_def_set(&def, "grid.n", num, err, sizeof err), 0);
  CHECK_INT_EQ(ds_env_def_set(&def, "control.cells", "4", err, sizeof err), 0);
  CHECK_INT_EQ(ds_env_def_set(&def, "fluid.tolerance", "1e-12", err, sizeof err), 0);
  CHECK_INT_EQ(ds_env_def_set(&def, "fluid.advection", "maccormack", err, sizeof err), 0);
  return def;
}

static dsEnv* make(int n, int substeps, int checkpoint) {
  dsEnvDef def = small_def(n, substeps, checkpoint);
  dsEnv* env = NULL;
  char err[1024] = "";
  int rc = ds_env_create(&def, &env, err, sizeof err);
  if (rc) fprintf(stderr, "create smoke-control: %s\n", err);
  CHECK_INT_EQ(rc, 0);
  return env;
}

static double episode(dsEnv* env, const dsReal* a) {
  if (ds_env_reset(env, 0, NULL, NULL)) return NAN;
  const int S = ds_env_num_steps(env), n = ds_env_action_size(env);
  for (int k = 0; k < S; k++)
    if (ds_env_step(env, a + k * n, NULL, NULL, NULL, NULL)) {
      fprintf(stderr, "step: %s\n", ds_env_last_error(env));
      return NAN;
    }
  dsReal L;
  return ds_env_loss(env, &L) ? NAN : (double)L;
}

static double objective(dsEnv* env, const dsReal* a, const void* ctx) {
  (void)ctx;
  return episode(env, a);
}

enum { NP = 3, CELL = 7 + 16 * 6 }; /* initial_density: one cell above the source */
static const EnvParam params[NP] = {{"buoyancy.alpha", 0}, {"source.0.density_rate", 0}, {"initial_density", CELL}};

/* kv: NULL, or key, value pairs ending in NULL set on the definition */
static dsEnv* make_kv(int n, int substeps, int checkpoint, const char* const* kv) {
  dsEnvDef def = small_def(n, substeps, checkpoint);
  char err[1024] = "";
  for (int k = 0; kv && kv[k]; k += 2) CHECK_INT_EQ(ds_env_def_set(&def, kv[k], kv[k + 1], err, sizeof err), 0);
  dsEnv* env = NULL;
  int rc = ds_env_create(&def, &env, err, sizeof err);
  if (rc) fprintf(stderr, "create smoke-control: %s\n", err);
  CHECK_INT_EQ(rc, 0);
  return env;
}

static void grad_check(const char* const* kv) {
  dsEnv* env = make_kv(16, 8, 1, kv);
  if (!env) return;
  const int S = ds_env_num_steps(env), n = ds_env_action_size(env), na = S * n;
  CHECK_INT_EQ(n, 32);
  CHECK(na <= NA_MAX);
  static dsReal a[NA_MAX], ga[NA_MAX];
  for (int i = 0; i < na; i++) a[i] = (dsReal)(0.6 * sin(1.3 * i + 0.4));
  /* a little smoke at the start, so that initial_density has a gradient */
  static dsReal rho0[256];
  for (int c = 0; c < 256; c++) rho0[c] = (dsReal)(0.2 + 0.1 * cos(0.37 * c));
  CHECK_INT_EQ(ds_env_set_param(env, "initial_density", rho0, 256), 0);
  const double J0 = episode(env, a);
  dsReal L;
  CHECK_INT_EQ(ds_env_backward_loss(env, &L, ga), 0);
  CHECK(L == J0 && J0 > 0);
  static double an[NA_MAX + NP], fd[NA_MAX + NP];
  for (int i = 0; i < na; i++) an[i] = ga[i];
  env_param_grads(env, params, NP, an + na);
  env_fd(env, objective, NULL, a, na, 1e-5, 0, params, NP, 1e-6, fd);
  check_grad("smoke actions", an, fd, na, 1e-4, 1e-6);
  check_grad("smoke parameters", an + na, fd + na, NP, 1e-4, 1e-6);
  ds_env_destroy(env);
}

static void expect_create_error(dsEnvDef* def, int code, const char* key);

/* An obstacle: the box's cells drawn in the solid colour; the same box as an
 * OBJ mesh (obstacle.mesh) gives the same episode bit for bit; the
 * adjoint around it is grad_check's (main). */
static const char* const kViridis[] = {"render.colormap", "viridis", NULL};
static const char* const kBox[] = {"obstacle.box_lo", "[0.3, 0.55, 0]", "obstacle.box_hi", "[0.7, 0.7, 0]", NULL};

static void obstacle(void) {
  const char* path = "test_smoke_env_box.obj";
  FILE* f = fopen(path, "w");
  CHECK(f != NULL);
  if (!f) return;
  /* the box [0.15, 0.35] x [0.275, 0.35] x [-0.25, 0.25], scaled by 2 and moved by (0, 0, 0) */
  for (int v = 0; v < 8; v++)
    fprintf(f, "v %g %g %g\n", v & 1 ? 0.35 : 0.15, v & 2 ? 0.35 : 0.275, v & 4 ? 0.25 : -0.25);
  static const int tri[12][3] = {{0, 2, 1}, {1, 2, 3}, {4, 5, 6}, {5, 7, 6}, {0, 1, 4}, {1, 5, 4},
                                 {2, 6, 3}, {3, 6, 7}, {0, 4, 2}, {2, 4, 6}, {1, 3, 5}, {3, 7, 5}};
  for (int t = 0; t < 12; t++) fprintf(f, "f %d %d %d\n", tri[t][0] + 1, tri[t][1] + 1, tri[t][2] + 1);
  fclose(f);
  const char* const mesh[] = {"obstacle.mesh", path, "obstacle.scale", "2", NULL};
  dsEnv* eb = make_kv(16, 8, 1, kBox);
  dsEnv* em = make_kv(16, 8, 1, mesh);
  if (eb && em) {
    static dsReal a[NA_MAX], img[2][16 * 16 * 4];
    const int na = ds_env_num_steps(eb) * ds_env_action_size(eb);
    for (int i = 0; i < na; i++) a[i] = (dsReal)(0.5 * cos(0.7 * i));
    const double lb = episode(eb, a), lm = episode(em, a);
    CHECK(lb == lm && isfinite(lb));
    CHECK_INT_EQ(ds_env_render(eb, img[0]), 0);
    CHECK_INT_EQ(ds_env_render(em, img[1]), 0);
    CHECK(memcmp(img[0], img[1], sizeof img[0]) == 0);
    int solid = 0; /* cells with centres in [0.3, 0.7] x [0.55, 0.7]: 6 x 2 */
    for (int q = 0; q < 256; q++) solid += img[0][4 * q] == (dsReal)0.45 && img[0][4 * q + 2] == (dsReal)0.30;
    CHECK_INT_EQ(solid, 12);
  }
  ds_env_destroy(eb);
  ds_env_destroy(em);
  /* refusals name the key */
  dsEnvDef def = small_def(16, 8, 1);
  char err[512];
  CHECK_INT_EQ(ds_env_def_set(&def, "obstacle.mesh", "no_such_mesh.obj", err, sizeof err), 0);
  expect_create_error(&def, DS_ERR_CONFIG, "obstacle.mesh");
  CHECK_INT_EQ(ds_env_def_set(&def, "obstacle.mesh", path, err, sizeof err), 0);
  CHECK_INT_EQ(ds_env_def_set(&def, "obstacle.position", "[5, 0, 0]", err, sizeof err), 0);
  expect_create_error(&def, DS_ERR_CONFIG, "encloses no cell centre");
  def = small_def(16, 8, 1);
  CHECK_INT_EQ(ds_env_def_set(&def, "obstacle.box_lo", "[0.5, 0.5, 0]", err, sizeof err), 0);
  CHECK_INT_EQ(ds_env_def_set(&def, "obstacle.box_hi", "[1.5, 0.6, 0]", err, sizeof err), 0);
  expect_create_error(&def, DS_ERR_CONFIG, "obstacle.box_lo");
  remove(path);
}

/* A soft obstacle's position and damping are env parameters with gradients. */
static void soft_check(void) {
  static const char* const kv[] = {"soft_obstacle.center", "[0.47, 0.5, 0]", "soft_obstacle.half", "[0.15, 0.08, 0]",
                                   "soft_obstacle.wall",  "0.06",           "soft_obstacle.damping", "30", NULL};
  dsEnv* env = make_kv(16, 8, 1, kv);
  if (!env) return;
  const int na = ds_env_num_steps(env) * ds_env_action_size(env);
  static dsReal a[NA_MAX], ga[NA_MAX];
  for (int i = 0; i < na; i++) a[i] = (dsReal)(0.6 * sin(0.9 * i + 0.2));
  static const EnvParam sp[3] = {{"soft.0.position.x", 0}, {"soft.0.position.y", 0}, {"soft.0.damping", 0}};
  episode(env, a);
  dsReal L;
  CHECK_INT_EQ(ds_env_backward_loss(env, &L, ga), 0);
  double an[3], fd[NA_MAX + 3];
  env_param_grads(env, sp, 3, an);
  env_fd(env, objective, NULL, a, 0, 1e-5, 0, sp, 3, 1e-6, fd);
  printf("soft obstacle: dL/dx %.6g (fd %.6g), dL/dy %.6g (fd %.6g), dL/dk %.6g (fd %.6g)\n", an[0], fd[0], an[1],
         fd[1], an[2], fd[2]);
  CHECK(fabs(an[0]) + fabs(an[1]) > 0);
  check_grad("soft obstacle parameters", an, fd, 3, 1e-4, 1e-6);
  ds_env_destroy(env);
}

/* loss and every gradient of one episode into out */
static int run_all(dsEnv* env, double* out, int cap) {
  const int S = ds_env_num_steps(env), n = ds_env_action_size(env);
  static dsReal a[NA_MAX], ga[NA_MAX];
  for (int i = 0; i < S * n; i++) a[i] = (dsReal)cos(0.7 * i);
  episode(env, a);
  dsReal L;
  if (ds_env_backward_loss(env, &L, ga)) return 0;
  int k = 0;
  out[k++] = L;
  for (int i = 0; i < S * n && k < cap; i++) out[k++] = ga[i];
  for (int p = 0; p < NP; p++) {
    const dsReal* g;
    int c;
    if (ds_env_param_grad(env, params[p].name, &g, &c)) return 0;
    for (int i = 0; i < c && k < cap; i++) out[k++] = g[i];
  }
  return k;
}

static void bitwise(void) {
  enum { CAP = 8192 };
  static double r1[CAP], r2[CAP];
  /* checkpointed tape = full tape */
  dsEnv* full = make(16, 8, 1);
  dsEnv* ck = make(16, 8, 3);
  if (!full || !ck) return;
  env_same_bits(full, 1, ck, 1, run_all, r1, r2, CAP, 100);
  ds_env_destroy(full);
  ds_env_destroy(ck);
  /* threads, where the parallel loops engage */
  dsEnv* env = make(64, 6, 1);
  if (!env) return;
  env_same_bits(env, 1, env, 2, run_all, r1, r2, CAP, 1000);
  ds_env_destroy(env);
}

static void metric(void) {
  dsEnv* env = make(16, 8, 1);
  if (!env) return;
  const int S = ds_env_num_steps(env), n = ds_env_action_size(env);
  static dsReal a[NA_MAX];
  dsReal m;
  /* an empty box (no source) scores 1 against the goal */
  const dsReal zero = 0;
  CHECK_INT_EQ(ds_env_set_param(env, "source.0.density_rate", &zero, 1), 0);
  episode(env, a);
  CHECK_INT_EQ(ds_env_metric(env, &m), 0);
  CHECK_CLOSE(m, 1, 1e-12, 0);
  /* the goal's hidden wind: push sin(pi (J + 1/2) / N) in x, push 1 (envs/smoke.c) */
  const dsReal rate = 4;
  ds_env_reset(env, 0, NULL, NULL);
  CHECK_INT_EQ(ds_env_set_param(env, "source.0.density_rate", &rate, 1), 0);
  for (int k = 0; k < S; k++)
    for (int J = 0; J < 4; J++)
      for (int I = 0; I < 4; I++) a[k * n + 2 * (I + 4 * J)] = (dsReal)(1.0 * sin(3.14159265358979323846 * (J + 0.5) / 4));
  episode(env, a);
  CHECK_INT_EQ(ds_env_metric(env, &m), 0);
  printf("metric at the goal's actions: %g\n", (double)m);
  CHECK(m >= 0 && m < 1e-20);
  ds_env_destroy(env);
}

/* render.colormap: the frames and the goal through the same map, the
 * metric's background its first stop, an unknown name refused by key */
static void colormap(void) {
  dsEnv* env = make_kv(16, 8, 1, kViridis);
  if (!env) return;
  const int S = ds_env_num_steps(env), n = ds_env_action_size(env);
  static dsReal a[NA_MAX], img[16 * 16 * 4];
  const dsReal zero = 0;
  const double v0[3] = {0.267004, 0.004874, 0.329415}; /* viridis at t = 0 */
  CHECK_INT_EQ(ds_env_set_param(env, "source.0.density_rate", &zero, 1), 0);
  for (int i = 0; i < S * n; i++) a[i] = 0;
  episode(env, a);
  const dsReal* goal = ds_env_goal_image(env);
  CHECK(goal != NULL);
  for (int ch = 0; goal && ch < 3; ch++) CHECK(goal[ch] == (dsReal)v0[ch]); /* the top left corner: no smoke */
  CHECK_INT_EQ(ds_env_render(env, img), 0);
  int empty = 1;
  for (int p = 0; p < 16 * 16; p++)
    for (int ch = 0; ch < 3; ch++) empty &= img[4 * p + ch] == (dsReal)v0[ch];
  CHECK(empty);
  dsReal m;
  CHECK_INT_EQ(ds_env_metric(env, &m), 0);
  CHECK_CLOSE(m, 1, 1e-12, 0);
  ds_env_destroy(env);
  char err[512] = "";
  dsEnvDef def = small_def(16, 8, 1);
  CHECK(ds_env_def_set(&def, "render.colormap", "viridiss", err, sizeof err) != 0);
  printf("render.colormap viridiss: %s\n", err);
  CHECK(strstr(err, "render.colormap") != NULL && strstr(err, "(did you mean \"viridis\"?)") != NULL);
}

/* render.colormap_stops: a map of one's own; the grey map's two stops
 * given as stops render what render.colormap grey does, bit for bit, and
 * the gradient through a three-stop map matches central differences; bad
 * stops are refused naming the key */
static void colormap_stops(void) {
  static const char* const kGrey[] = {"render.colormap", "grey", NULL};
  static const char* const kGreyStops[] = {"render.colormap_stops", "[0, 0, 0, 0, 1, 1, 1, 1]", NULL};
  static const char* const kThree[] = {"render.colormap_stops", "[0, 0, 0, 0.2, 0.4, 0.9, 0.3, 0.1, 1, 1, 1, 0.8]",
                                       NULL};
  dsEnv* a = make_kv(16, 8, 1, kGrey);
  dsEnv* b = make_kv(16, 8, 1, kGreyStops);
  if (!a || !b) return;
  const int S = ds_env_num_steps(a), n = ds_env_action_size(a);
  static dsReal act[NA_MAX], ia[16 * 16 * 4], ib[16 * 16 * 4];
  for (int i = 0; i < S * n; i++) act[i] = (dsReal)(0.5 * sin(0.7 * i));
  episode(a, act);
  episode(b, act);
  CHECK_INT_EQ(ds_env_render(a, ia), 0);
  CHECK_INT_EQ(ds_env_render(b, ib), 0);
  CHECK(!memcmp(ia, ib, sizeof ia));
  CHECK(!memcmp(ds_env_goal_image(a), ds_env_goal_image(b), sizeof ia));
  ds_env_destroy(a);
  ds_env_destroy(b);
  grad_check(kThree);
  static const struct {
    const char* stops;
    const char* says;
  } bad[] = {{"[0, 0, 0, 0, 1, 1, 1]", "7 numbers"},
             {"[0, 0, 0, 0]", "4 numbers"},
             {"[0, 0, 0, 0, 0.5, 1, 1, 1, 0.4, 1, 1, 1, 1, 1, 1, 1]", "render.colormap_stops: "},
             {"[0, 0, 0, 0, 1, 1, 1.5, 1]", "render.colormap_stops: "},
             {"[0.1, 0, 0, 0, 1, 1, 1, 1]", "render.colormap_stops: "}};
  for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
    dsEnvDef def = small_def(16, 8, 1);
    char err[512] = "";
    dsEnv* env = NULL;
    int rc = ds_env_def_set(&def, "render.colormap_stops", bad[k].stops, err, sizeof err);
    if (!rc) rc = ds_env_create(&def, &env, err, sizeof err);
    printf("render.colormap_stops %s: %s\n", bad[k].stops, err);
    CHECK_INT_EQ(rc, DS_ERR_CONFIG);
    CHECK(strstr(err, bad[k].says) != NULL);
    ds_env_destroy(env);
  }
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
  dsEnvDef def = ds_default_env_def("smoke-control");
  CHECK(ds_env_def_set(&def, "grid.n", "0", err, sizeof err) != 0);
  printf("grid.n 0: %s\n", err);
  CHECK(strstr(err, "grid.n") != NULL);
  def = small_def(64, 8, 1);
  def.width = def.height = 64;
  def.dt = (dsReal)0.08; /* dt max_speed / dx = 0.08 * 3 * 64 = 15.4 > cfl_max 10 */
  expect_create_error(&def, DS_ERR_CONFIG, "physics.dt");
  def = small_def(16, 8, 1);
  def.width = 32;
  expect_create_error(&def, DS_ERR_CONFIG, "render.width");
  /* the memory bound: 128^2 x 48 steps (about 38 MB) against 16 MB */
  const size_t lim = ds_memory_limit();
  ds_set_memory_limit((size_t)16 << 20);
  def = ds_default_env_def("smoke-control");
  expect_create_error(&def, DS_ERR_NOMEM, "grid size");
  ds_set_memory_limit(lim);
  /* NaN in the initial density, named with its element */
  dsEnv* env = make(16, 8, 1);
  if (!env) return;
  static dsReal rho[256];
  rho[37] = (dsReal)NAN;
  CHECK_INT_EQ(ds_env_set_param(env, "initial_density", rho, 256), DS_ERR_RANGE);
  printf("NaN: %s\n", ds_env_last_error(env));
  CHECK(strstr(ds_env_last_error(env), "initial_density[37]") != NULL);
  CHECK_INT_EQ(ds_env_set_param(env, "initial_density", rho, 255), DS_ERR_RANGE);
  CHECK_INT_EQ(ds_env_set_param(env, "no.such", rho, 1), DS_ERR_NOTFOUND);
  ds_env_destroy(env);
}

int main(void) {
  grad_check(NULL);
  grad_check(kBox);
  grad_check(kViridis);
  colormap();
  colormap_stops();
  obstacle();
  soft_check();
  bitwise();
  metric();
  bad_input();
  return DST_RESULT();
}

/* States and window adjoints of the fluid envs (dsEnvSim.state_size,
 * get_state, set_state, backward_window; envs/smoke_common.c):
 *  - smoke-control, 16^2, 8 substeps in 4 steps: the window [1, 4) of
 *    L = sum_k adj_image_k.image_k + adj_reward_k r_k + adj_final.state(end)
 *    (the sparse reward of the last step included) from a start state set
 *    with ds_env_set_state: dL/d(actions of the window), dL/d(entries of
 *    the start state: face velocities, densities) against central
 *    differences in double, each with rtol 1e-4 and atol 1e-6 of the
 *    largest; check_grad (tests/gradcheck.h) also scales the largest
 *    component by 1.01 and sees the comparison fail, so the tolerance
 *    catches a wrong adjoint (a flipped sign or a missing term fails it
 *    by far more).
 *  - Chaining: windows [2, 4) then [1, 2) with the later one's grad_state0
 *    as adj_final equal the window [1, 4) (to 1e-12).
 *  - A checkpointed tape (checkpoint_every 2) gives the same window bit
 *    for bit; a window starting off a checkpoint is refused; one thread
 *    and two give the same bits at 64^2; ds_batch_backward_window over two
 *    envs gives each env's own window bit for bit.
 *  - smoke-plume, 8^3 (3-D, no actions): the window [1, 3) with image and
 *    final-state adjoints against central differences in the start state.
 *  - set_state: a state read back as it was set; a substep ahead of the
 *    episode, off a step boundary, or NaN values are refused; set_state,
 *    the steps and the window backward allocate nothing.
 *  - The batched engine (physics.batched_engine: the env's fluid as a
 *    fluid batch of one, what a CUDA device runs): windows, whole
 *    episodes and parameter gradients equal the serial engine's (with
 *    PCG) bit for bit, 2-D and 3-D, SL and MacCormack, full and
 *    checkpointed, 1 and 2 threads; it allocates nothing either. On a
 *    machine with a CUDA device, smoke-control and smoke-plume on cuda:0
 *    against the serial engine, bit for bit. */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dsim/batch.h"
#include "dsim/env.h"
#include "tests/dstest.h"
#include "tests/gradcheck.h"

enum { MAXS = 20000, MAXA = 256, MAXPIX = 4 * 64 * 64, MAXH = 4, NSEL = 10 };

static dsEnvDef smoke_def(int n, int substeps, int checkpoint) {
  dsEnvDef def = ds_default_env_def("smoke-control");
  char err[512] = "", num[32];
  def.substeps = substeps;
  def.control_interval = 2;
  def.render_interval = substeps;
  def.checkpoint_every = checkpoint;
  def.obs_image = 1;
  def.width = def.height = n;
  snprintf(num, sizeof num, "%d", n);
  CHECK_INT_EQ(ds_env_def_set(&def, "grid.n", num, err, sizeof err), 0);
  CHECK_INT_EQ(ds_env_def_set(&def, "control.cells", "4", err, sizeof err), 0);
  CHECK_INT_EQ(ds_env_def_set(&def, "fluid.tolerance", "1e-12", err, sizeof err), 0);
  /* semi-Lagrangian: MacCormack's clamp has kinks where values tie (the
     uniform ambient temperature), which central differences straddle */
  return def;
}

static dsEnvDef plume_def(void) {
  dsEnvDef def = ds_default_env_def("smoke-plume");
  char err[512] = "";
  def.substeps = 8;
  def.control_interval = 2;
  def.render_interval = 8;
  def.render_last = 0;
  def.obs_image = 1;
  def.checkpoint_every = 1;
  def.width = def.height = 16;
  def.dt = (dsReal)0.04;
  CHECK_INT_EQ(ds_env_def_set(&def, "grid.n", "8", err, sizeof err), 0);
  CHECK_INT_EQ(ds_env_def_set(&def, "fluid.tolerance", "1e-12", err, sizeof err), 0);
  CHECK_INT_EQ(ds_env_def_set(&def, "source.rate", "20", err, sizeof err), 0);
  CHECK_INT_EQ(ds_env_def_set(&def, "source.lo", "[0.3, 0.1, 0.3]", err, sizeof err), 0);
  CHECK_INT_EQ(ds_env_def_set(&def, "source.hi", "[0.7, 0.3, 0.7]", err, sizeof err), 0);
  return def;
}

static dsEnv* make(dsEnvDef def) {
  dsEnv* env = NULL;
  char err[1024] = "";
  int rc = ds_env_create(&def, &env, err, sizeof err);
  if (rc) fprintf(stderr, "create %s: %s\n", def.cls ? def.cls->name : "?", err);
  CHECK_INT_EQ(rc, 0);
  return env;
}

/* One window problem: the start state s0 (at step `first`), the window's
 * actions and the adjoints of its objective. */
typedef struct Win {
  dsEnv* env;
  int first, H, A, S, npix;
  dsReal s0[MAXS], a[MAXH * MAXA];
  dsReal adj_img[MAXH * MAXPIX], adj_rew[MAXH], adj_fin[MAXS];
  dsReal ga[MAXH * MAXA], gs[MAXS];
} Win;

static double dot(const dsReal* x, const dsReal* y, int n) {
  double s = 0;
  for (int i = 0; i < n; i++) s += (double)x[i] * (double)y[i];
  return s;
}

/* L of the window from w->s0 under w->a (header comment); NAN on failure */
static double objective(Win* w) {
  static dsReal img[MAXPIX], st[MAXS];
  if (ds_env_set_state(w->env, w->s0, w->S)) {
    fprintf(stderr, "set_state: %s\n", ds_env_last_error(w->env));
    return NAN;
  }
  double L = 0;
  for (int k = 0; k < w->H; k++) {
    dsReal r = 0;
    if (ds_env_step(w->env, w->A ? w->a + k * w->A : NULL, NULL, img, &r, NULL)) {
      fprintf(stderr, "step: %s\n", ds_env_last_error(w->env));
      return NAN;
    }
    L += dot(w->adj_img + (size_t)k * w->npix, img, w->npix) + (double)w->adj_rew[k] * r;
  }
  CHECK_INT_EQ(ds_env_get_state(w->env, st, w->S), 0);
  return L + dot(w->adj_fin + 1, st + 1, w->S - 1);
}

static int backward(Win* w, int first, int H, const dsReal* adj_fin, dsReal* ga, dsReal* gs) {
  const int k = first - w->first;
  int rc = ds_env_backward_adjoints_window(w->env, first, H, NULL, w->adj_img + (size_t)k * w->npix, w->adj_rew + k,
                                           adj_fin, ga, gs);
  if (rc) fprintf(stderr, "backward window: %s\n", ds_env_last_error(w->env));
  return rc;
}

/* Runs steps 0 .. first - 1 with pre-window actions, keeps that state as
 * s0 and fills the actions and adjoints with fixed patterns. */
static void setup(Win* w, dsEnv* env, int first, int H, double fin_scale) {
  memset(w, 0, sizeof *w);
  w->env = env, w->first = first, w->H = H;
  w->A = ds_env_action_size(env);
  w->S = ds_env_state_size(env);
  int wd, ht;
  ds_env_image_size(env, &wd, &ht);
  w->npix = 4 * wd * ht;
  CHECK(w->S <= MAXS && w->A <= MAXA && w->npix <= MAXPIX && H <= MAXH);
  CHECK_INT_EQ(ds_env_reset(env, 0, NULL, NULL), 0);
  if (w->A) { /* smoke-control: a little smoke everywhere, so that no MacCormack clamp sits on a tie */
    static dsReal rho0[64 * 64];
    const int nc = wd * ht;
    for (int c = 0; c < nc; c++) rho0[c] = (dsReal)(0.2 + 0.1 * cos(0.37 * c));
    CHECK_INT_EQ(ds_env_set_param(env, "initial_density", rho0, nc), 0);
  }
  for (int k = 0; k < first; k++) {
    for (int i = 0; i < w->A; i++) w->a[i] = (dsReal)(0.5 * cos(0.7 * i + k));
    CHECK_INT_EQ(ds_env_step(env, w->A ? w->a : NULL, NULL, NULL, NULL, NULL), 0);
  }
  CHECK_INT_EQ(ds_env_get_state(env, w->s0, w->S), 0);
  for (int i = 0; i < H * w->A; i++) w->a[i] = (dsReal)(0.6 * sin(1.3 * i + 0.4));
  for (int i = 0; i < H * w->npix; i++) w->adj_img[i] = (dsReal)(0.01 * sin(0.11 * i) * ((i % 4) != 3));
  const int last = first + H == ds_env_num_steps(env);
  if (last) w->adj_rew[H - 1] = (dsReal)0.7; /* the sparse reward of the last step */
  for (int i = 1; i < w->S; i++) w->adj_fin[i] = (dsReal)(fin_scale * cos(0.37 * i));
}

/* central differences of L in x[idx[j]] (x: the actions or the start state) */
static void fd(Win* w, dsReal* x, const int* idx, int n, double h, double* out) {
  for (int j = 0; j < n; j++) {
    const dsReal x0 = x[idx[j]];
    x[idx[j]] = x0 + (dsReal)h;
    const double Lp = objective(w);
    x[idx[j]] = x0 - (dsReal)h;
    const double Lm = objective(w);
    x[idx[j]] = x0;
    out[j] = (Lp - Lm) / (2 * h);
  }
}

/* entries of the start state: interior faces of each axis and cells with smoke */
static int state_entries(dsEnv* env, int* idx, int three_d) {
  const int S = ds_env_state_size(env);
  int n = 0;
  if (!three_d) { /* 16^2: x faces 17 x 16, y faces 16 x 17, then 256 cells twice */
    const int nfx = 17 * 16, nv = 2 * 17 * 16;
    const int list[NSEL] = {8 + 17 * 3, 6 + 17 * 9, 11 + 17 * 12, nfx + 8 + 16 * 4, nfx + 3 + 16 * 10,
                            nfx + 12 + 16 * 7, nv + 8 + 16 * 2, nv + 7 + 16 * 6, nv + 9 + 16 * 9, nv + 256 + 40};
    for (int j = 0; j < NSEL; j++) idx[n++] = 1 + list[j];
  } else { /* 8^3: x faces 9 x 8 x 8, y 8 x 9 x 8, z 8 x 8 x 9, then 512 cells twice */
    const int nf = 9 * 64, nv = 3 * nf;
    const int list[NSEL] = {4 + 9 * (2 + 8 * 4), 2 + 9 * (5 + 8 * 3), nf + 4 + 8 * (4 + 9 * 4), nf + 1 + 8 * (3 + 9 * 6),
                            2 * nf + 4 + 8 * (3 + 8 * 4), 2 * nf + 5 + 8 * (5 + 8 * 2), nv + 4 + 8 * (3 + 8 * 4),
                            nv + 3 + 8 * (4 + 8 * 3), nv + 4 + 8 * (5 + 8 * 4), nv + 2 + 8 * (1 + 8 * 2)};
    for (int j = 0; j < NSEL; j++) idx[n++] = 1 + list[j];
  }
  for (int j = 0; j < n; j++) CHECK(idx[j] < S);
  return n;
}

static void smoke_gradients(void) {
  dsEnv* env = make(smoke_def(16, 8, 1));
  if (!env) return;
  static Win w;
  setup(&w, env, 1, 3, 0.05);
  CHECK_INT_EQ(w.A, 32);
  CHECK_INT_EQ(w.S, 1 + 2 * 17 * 16 + 2 * 256);
  const double L = objective(&w);
  CHECK(isfinite(L));
  CHECK_INT_EQ(backward(&w, 1, 3, w.adj_fin, w.ga, w.gs), 0);
  CHECK(w.gs[0] == 0);
  /* actions */
  static int ia[MAXH * MAXA];
  static double an[MAXH * MAXA], f[MAXH * MAXA];
  const int na = w.H * w.A;
  for (int i = 0; i < na; i++) ia[i] = i, an[i] = w.ga[i];
  fd(&w, w.a, ia, na, 1e-5, f);
  check_grad("smoke window actions", an, f, na, 1e-4, 1e-6);
  /* the start state */
  int is[NSEL];
  const int ns = state_entries(env, is, 0);
  for (int j = 0; j < ns; j++) an[j] = w.gs[is[j]];
  fd(&w, w.s0, is, ns, 1e-5, f);
  for (int j = 0; j < ns; j++) printf("   state[%d]: %.10g fd %.10g\n", is[j], an[j], f[j]);
  check_grad("smoke window start state", an, f, ns, 1e-4, 1e-6);
  ds_env_destroy(env);
}

static double max_rel(const dsReal* a, const dsReal* b, int n) {
  double d = 0, m = 0;
  for (int i = 0; i < n; i++) d = fmax(d, fabs((double)a[i] - b[i])), m = fmax(m, fabs((double)b[i]));
  return m > 0 ? d / m : d;
}

/* [2, 4) then [1, 2) fed its grad_state0 = [1, 4) */
static void smoke_chain(void) {
  dsEnv* env = make(smoke_def(16, 8, 1));
  if (!env) return;
  static Win w;
  static dsReal ga2[MAXH * MAXA], gs2[MAXS], ga1[MAXA], gs1[MAXS];
  setup(&w, env, 1, 3, 0.05);
  CHECK(isfinite(objective(&w)));
  CHECK_INT_EQ(backward(&w, 1, 3, w.adj_fin, w.ga, w.gs), 0);
  CHECK_INT_EQ(backward(&w, 2, 2, w.adj_fin, ga2, gs2), 0);
  CHECK_INT_EQ(backward(&w, 1, 1, gs2, ga1, gs1), 0);
  const double ra = fmax(max_rel(ga1, w.ga, w.A), max_rel(ga2, w.ga + w.A, 2 * w.A)), rs = max_rel(gs1, w.gs, w.S);
  printf("chained windows: actions %.3g, start state %.3g (relative to the largest)\n", ra, rs);
  CHECK(ra < 1e-12 && rs < 1e-12);
  /* a wrong adjoint of the end state (one component x 1.01) shows */
  int big = 1;
  for (int i = 1; i < w.S; i++)
    if (fabs((double)gs2[i]) > fabs((double)gs2[big])) big = i;
  gs2[big] *= (dsReal)1.01;
  CHECK_INT_EQ(backward(&w, 1, 1, gs2, ga1, gs1), 0);
  CHECK(max_rel(gs1, w.gs, w.S) > 1e-6);
  ds_env_destroy(env);
}

/* the window's results, for bitwise comparisons */
static int window_bits(dsEnv* env, double* out, int cap) {
  static Win w;
  setup(&w, env, 1, 2, 0.05);
  if (!isfinite(objective(&w)) || backward(&w, 1, 2, w.adj_fin, w.ga, w.gs)) return 0;
  int n = 0;
  for (int i = 0; i < w.H * w.A && n < cap; i++) out[n++] = w.ga[i];
  for (int i = 0; i < w.S && n < cap; i++) out[n++] = w.gs[i];
  return n;
}

static void smoke_bits(void) {
  static double r1[MAXS + MAXH * MAXA], r2[MAXS + MAXH * MAXA];
  const int cap = MAXS + MAXH * MAXA;
  dsEnv* full = make(smoke_def(16, 8, 1));
  dsEnv* ck = make(smoke_def(16, 8, 2));
  if (!full || !ck) return;
  const int n1 = window_bits(full, r1, cap), n2 = window_bits(ck, r2, cap);
  CHECK(n1 > 1000 && n1 == n2 && !memcmp(r1, r2, sizeof(double) * (size_t)n1));
  /* a window starting off a checkpoint (substep 2, every 4) */
  dsEnv* ck4 = make(smoke_def(16, 8, 4));
  static Win w;
  setup(&w, ck4, 1, 2, 0.05);
  CHECK(isfinite(objective(&w)));
  CHECK_INT_EQ(ds_env_backward_adjoints_window(ck4, 1, 2, NULL, NULL, NULL, NULL, w.ga, w.gs), DS_ERR_RANGE);
  printf("off a checkpoint: %s\n", ds_env_last_error(ck4));
  ds_env_destroy(ck4);
  ds_env_destroy(full);
  ds_env_destroy(ck);
  /* threads, where the fluid's parallel loops engage */
  static double t1[MAXS + MAXH * MAXA], t2[MAXS + MAXH * MAXA];
  dsEnv* big = make(smoke_def(64, 6, 1));
  if (!big) return;
  CHECK(ds_env_state_size(big) <= MAXS);
  ds_set_num_threads(1);
  const int m1 = window_bits(big, t1, MAXS + MAXH * MAXA);
  ds_set_num_threads(2);
  const int m2 = window_bits(big, t2, MAXS + MAXH * MAXA);
  ds_set_num_threads(1);
  CHECK(m1 > 1000 && m1 == m2 && !memcmp(t1, t2, sizeof(double) * (size_t)m1));
  ds_env_destroy(big);
}

/* ds_batch_backward_window = each env's window */
static void smoke_batch(void) {
  dsEnvDef def = smoke_def(16, 8, 1);
  dsBatch* b = NULL;
  char err[1024] = "";
  CHECK_INT_EQ(ds_batch_create(&def, 2, &b, err, sizeof err), 0);
  if (!b) return;
  dsEnv* e0 = ds_batch_env(b, 0);
  const int A = ds_env_action_size(e0), S = ds_env_state_size(e0), H = 2, np = 4 * 16 * 16;
  static dsReal act[2 * MAXA], adj_img[2 * MAXH * 1024], adj_fin[2 * MAXS], ga[2 * MAXH * MAXA], gs[2 * MAXS];
  static dsReal ga_e[MAXH * MAXA], gs_e[MAXS];
  CHECK_INT_EQ(ds_batch_reset(b, NULL, NULL, NULL, NULL, NULL), 0);
  for (int k = 0; k < 3; k++) {
    for (int i = 0; i < 2 * A; i++) act[i] = (dsReal)(0.5 * sin(0.9 * i + k));
    CHECK_INT_EQ(ds_batch_step(b, act, NULL, NULL, NULL, NULL, NULL, 0), 0);
  }
  for (int i = 0; i < 2 * H * np; i++) adj_img[i] = (dsReal)(0.01 * cos(0.13 * i));
  for (int i = 0; i < 2 * S; i++) adj_fin[i] = (dsReal)(i % S ? 0.05 * sin(0.3 * i) : 0);
  int status[2];
  CHECK_INT_EQ(ds_batch_backward_window(b, 1, H, NULL, adj_img, NULL, adj_fin, ga, gs, status), 0);
  for (int i = 0; i < 2; i++) {
    dsEnv* e = ds_batch_env(b, i);
    CHECK_INT_EQ(ds_env_backward_adjoints_window(e, 1, H, NULL, adj_img + (size_t)i * H * np, NULL,
                                                 adj_fin + (size_t)i * S, ga_e, gs_e),
                 0);
    CHECK(!memcmp(ga_e, ga + (size_t)i * H * A, sizeof(dsReal) * (size_t)(H * A)));
    CHECK(!memcmp(gs_e, gs + (size_t)i * S, sizeof(dsReal) * (size_t)S));
  }
  CHECK(memcmp(ga, ga + H * A, sizeof(dsReal) * (size_t)(H * A)) != 0); /* other actions, other gradients */
  ds_batch_destroy(b);
}

static void plume_gradients(void) {
  dsEnv* env = make(plume_def());
  if (!env) return;
  static Win w;
  setup(&w, env, 1, 2, 0.2);
  CHECK_INT_EQ(w.A, 0);
  CHECK_INT_EQ(w.S, 1 + 3 * 9 * 64 + 2 * 512);
  CHECK(isfinite(objective(&w)));
  CHECK_INT_EQ(backward(&w, 1, 2, w.adj_fin, NULL, w.gs), 0);
  int is[NSEL];
  static double an[NSEL], f[NSEL];
  const int ns = state_entries(env, is, 1);
  for (int j = 0; j < ns; j++) an[j] = w.gs[is[j]];
  fd(&w, w.s0, is, ns, 1e-5, f);
  check_grad("plume window start state", an, f, ns, 1e-4, 1e-6);
  ds_env_destroy(env);
}

/* set_state, steps and the window backward allocate nothing (a counting allocator) */
static long g_allocs = 0;
static void* n_malloc(size_t n) { g_allocs++; return malloc(n); }
static void* n_realloc(void* p, size_t n) { g_allocs++; return realloc(p, n); }
static void* n_calloc(size_t c, size_t n) { g_allocs++; return calloc(c, n); }

static double no_alloc_on(dsEnv* env) {
  static Win w;
  setup(&w, env, 1, 3, 0.05);
  CHECK(isfinite(objective(&w)));
  ds_replace_allocator(n_malloc, n_realloc, n_calloc, free);
  g_allocs = 0;
  const double L = objective(&w); /* set_state, steps with images and rewards, get_state */
  const int rc = backward(&w, 1, 3, w.adj_fin, w.ga, w.gs);
  ds_replace_allocator(NULL, NULL, NULL, NULL);
  CHECK(isfinite(L) && rc == 0);
  CHECK_INT_EQ(g_allocs, 0);
  return L;
}

static void no_alloc(void) {
  dsEnv* env = make(smoke_def(16, 8, 1));
  if (!env) return;
  no_alloc_on(env);
  ds_env_destroy(env);
}

static void set_state_rules(void) {
  dsEnv* env = make(smoke_def(16, 8, 1));
  if (!env) return;
  static Win w;
  static dsReal st[MAXS];
  setup(&w, env, 2, 1, 0.05);
  /* a state of its own, changed a little (interior values only: the walls' faces are zeroed) */
  w.s0[1 + 8 + 17 * 5] += (dsReal)0.25;
  w.s0[1 + 2 * 17 * 16 + 40] += (dsReal)0.5;
  CHECK_INT_EQ(ds_env_set_state(env, w.s0, w.S), 0);
  CHECK_INT_EQ(ds_env_get_state(env, st, w.S), 0);
  CHECK(!memcmp(st, w.s0, sizeof(dsReal) * (size_t)w.S));
  CHECK_INT_EQ(ds_env_steps_taken(env), 2);
  /* ahead of the episode, off a step boundary, not finite */
  st[0] = 6;
  CHECK_INT_EQ(ds_env_set_state(env, st, w.S), DS_ERR_RANGE);
  printf("ahead: %s\n", ds_env_last_error(env));
  st[0] = 1;
  CHECK_INT_EQ(ds_env_set_state(env, st, w.S), DS_ERR_RANGE);
  st[0] = 4;
  st[7] = (dsReal)NAN;
  CHECK_INT_EQ(ds_env_set_state(env, st, w.S), DS_ERR_RANGE);
  printf("nan: %s\n", ds_env_last_error(env));
  CHECK_INT_EQ(ds_env_set_state(env, st, w.S - 1), DS_ERR_RANGE);
  ds_env_destroy(env);
}

/* ---- the batched engine (physics.batched_engine: a fluid batch of one) ----
 * The env on the batched engine (solver auto, which is PCG there) against
 * the serial engine with fluid.solver pcg: bit for bit, windows, whole
 * episodes, parameter gradients, full and checkpointed tapes, 1 and 2
 * threads; nothing allocated in its steps and backward. */

static int g_cuda = 0; /* the batched side on cuda:0 (on_cuda) */

static dsEnvDef on_engine(dsEnvDef def, int batched) {
  char err[512] = "";
  if (batched && g_cuda)
    def.device = (dsDevice){DS_DEVICE_CUDA, 0};
  else if (batched)
    def.batch_engine = 1;
  else
    CHECK_INT_EQ(ds_env_def_set(&def, "fluid.solver", "pcg", err, sizeof err), 0);
  return def;
}

static const char* const kFluidParams[] = {"buoyancy.alpha", "source.0.density_rate", "source.0.velocity.y",
                                           "initial_density"};

static int fail_at(dsEnv* env, const char* what) {
  fprintf(stderr, "%s: %s\n", what, ds_env_last_error(env));
  return 0;
}

/* window_bits, then a whole episode's loss and its backward with a changed
 * buoyancy, and the parameter gradients */
static int engine_bits(dsEnv* env, double* out, int cap) {
  int n = window_bits(env, out, cap);
  const int S = ds_env_num_steps(env), A = ds_env_action_size(env);
  static dsReal a[16 * MAXA], ga[16 * MAXA];
  const dsReal alpha = (dsReal)1.3;
  if (!n || S * A > 16 * MAXA) return fail_at(env, "window");
  if (ds_env_reset(env, 0, NULL, NULL) || ds_env_set_param(env, "buoyancy.alpha", &alpha, 1))
    return fail_at(env, "reset");
  for (int k = 0; k < S; k++) {
    for (int i = 0; i < A; i++) a[k * A + i] = (dsReal)(0.4 * sin(0.3 * i + k));
    if (ds_env_step(env, A ? a + k * A : NULL, NULL, NULL, NULL, NULL)) return fail_at(env, "step");
  }
  dsReal L = 0;
  if (ds_env_backward_loss(env, &L, ga)) return fail_at(env, "backward");
  out[n++] = L;
  for (int i = 0; i < S * A && n < cap; i++) out[n++] = ga[i];
  for (size_t q = 0; q < sizeof kFluidParams / sizeof *kFluidParams; q++) {
    const dsReal* g;
    int c;
    if (ds_env_param_grad(env, kFluidParams[q], &g, &c)) return fail_at(env, kFluidParams[q]);
    for (int i = 0; i < c && n < cap; i++) out[n++] = g[i];
  }
  return n;
}

static void same_engines(dsEnvDef def, int threads, const char* what) {
  enum { CAP = 2 * MAXS + 16 * MAXA };
  static double r1[CAP], r2[CAP];
  dsEnv* serial = make(on_engine(def, 0));
  dsEnv* batched = make(on_engine(def, 1));
  if (!serial || !batched) return;
  ds_set_num_threads(1);
  const int n1 = engine_bits(serial, r1, CAP);
  ds_set_num_threads(threads);
  const int n2 = engine_bits(batched, r2, CAP);
  ds_set_num_threads(1);
  int same = n1 == n2;
  for (int i = 0; i < n1 && same; i++) same = r1[i] == r2[i] || (isnan(r1[i]) && isnan(r2[i]));
  printf("%s: %d values, batched engine %s the serial one\n", what, n1, same ? "bit for bit" : "DIFFERS from");
  CHECK(n1 > 1000 && same);
  ds_env_destroy(serial);
  ds_env_destroy(batched);
}

static void batched_engine(void) {
  same_engines(smoke_def(16, 8, 1), 1, "smoke-control 16^2");
  same_engines(smoke_def(16, 8, 2), 1, "smoke-control 16^2, checkpoint_every 2");
  dsEnvDef mc = smoke_def(16, 8, 1);
  char err[512] = "";
  CHECK_INT_EQ(ds_env_def_set(&mc, "fluid.advection", "maccormack", err, sizeof err), 0);
  same_engines(mc, 1, "smoke-control 16^2, MacCormack");
  same_engines(smoke_def(64, 6, 1), 2, "smoke-control 64^2, 2 threads");
  dsEnvDef pd = plume_def();
  pd.render_last = 1; /* the whole episode's loss is on the last frame */
  same_engines(pd, 1, "smoke-plume 8^3");
  /* nothing allocated in set_state, steps and the window backward */
  dsEnv* env = make(on_engine(smoke_def(16, 8, 1), 1));
  if (!env) return;
  static Win w;
  const double L = no_alloc_on(env);
  /* the device switch keeps the engine (cpu: the batched engine stays, as the definition says) */
  CHECK_INT_EQ(ds_env_set_device(env, "cpu"), 0);
  setup(&w, env, 1, 3, 0.05);
  CHECK(isfinite(objective(&w)) && objective(&w) == L);
  ds_env_destroy(env);
}

/* With a CUDA device (a build with --enable-cuda on a GPU machine): the
 * fluid envs on cuda:0 against the serial engine, bit for bit (the kernels
 * are built with -fmad=false, as test_fluid_batch's comparisons assume).
 * Without one, the refusal. */
static void on_cuda(void) {
  dsEnvDef def = smoke_def(16, 8, 1);
  def.device = (dsDevice){DS_DEVICE_CUDA, 0};
  dsEnv* env = NULL;
  char err[1024] = "";
  const int rc = ds_env_create(&def, &env, err, sizeof err);
  ds_env_destroy(env);
  if (rc) {
    printf("cuda: %s (not run)\n", err);
    CHECK(strstr(err, "cuda") != NULL);
    return;
  }
  g_cuda = 1;
  same_engines(smoke_def(16, 8, 1), 1, "CUDA smoke-control 16^2");
  dsEnvDef pd = plume_def();
  pd.render_last = 1;
  same_engines(pd, 1, "CUDA smoke-plume 8^3");
  g_cuda = 0;
}

int main(void) {
  ds_set_num_threads(1);
  on_cuda();
  batched_engine();
  set_state_rules();
  no_alloc();
  smoke_gradients();
  smoke_chain();
  smoke_bits();
  smoke_batch();
  plume_gradients();
  return DST_RESULT();
}

/* The implicit integrator on the batched engine's CPU backend
 * (engine/batch_implicit.c) against the single-instance engine: tets
 * (control-fem-implicit's gear out of contact, a block sliding in ground
 * contact), control-cloth-implicit's cloth (membrane, bending, lift and
 * drag), a cloth with lift and drag falling onto the ground, and springs
 * (a chain falling onto the ground); B = 3 instances with their own
 * parameters, activations and external forces, full and checkpointed
 * tapes, 1 and 4 threads: final states, control adjoints per control step
 * and every parameter's gradient are bitwise those of ds_step /
 * ds_backward_step on each instance's own model (tests/batchtest.h). Also:
 * one instance's gradient against central differences (an activation and
 * a material parameter), rewinds, the memory plan, create failing cleanly
 * at each of its allocations and no allocation in an episode, a Newton failure reported with the instance, substep and
 * residual (the serial engine's words) while the other instances go on
 * exactly, and the CUDA refusal. */
#include "config.h"

#include <math.h>

#include "dstest.h"
#include "batchtest.h"
#include "dsim/device.h"

static int count_diff(const dsReal* a, const dsReal* b, size_t n, size_t* first) {
  int nd = 0;
  for (size_t k = 0; k < n; k++)
    if (!(a[k] == b[k])) { /* equal as numbers (0 == -0), NaN never */
      if (!nd) *first = k;
      nd++;
    }
  return nd;
}

/* An env class's model with the keys kv (pairs, NULL-terminated) set. */
static dsModel* env_model(const char* cls, const char* const* kv) {
  dsEnvDef def = ds_default_env_def(cls);
  char err[512];
  for (int k = 0; kv[k]; k += 2)
    if (ds_env_def_set(&def, kv[k], kv[k + 1], err, sizeof err)) bt_die(kv[k], DS_ERR_CONFIG, err);
  dsEnv* env = NULL;
  if (ds_env_create(&def, &env, err, sizeof err)) bt_die(cls, DS_ERR_CONFIG, err);
  dsModel* m = NULL;
  if (ds_model_copy(ds_env_model(env), &m)) bt_die("model copy", DS_ERR_NOMEM, cls);
  ds_env_destroy(env);
  return m;
}

static dsModel* finish(dsBuilder* b, dsReal dt, const dsSolverSettings* ss) {
  dsModel* m = NULL;
  ds_builder_set_dt(b, dt);
  CHECK_INT_EQ(ds_builder_set_integrator(b, DS_INTEGRATOR_IMPLICIT), 0);
  CHECK_INT_EQ(ds_builder_set_solver(b, ss), 0);
  const int rc = ds_builder_finalize(b, &m);
  if (rc) bt_die("finalize", rc, ds_builder_last_error(b));
  ds_builder_free(b);
  return m;
}

/* tets: a 2 x 1 x 2 block resting in ground contact (its bottom where
 * contact carries its weight), sliding sideways under friction */
static dsModel* block_model(const dsSolverSettings* ss) {
  dsBuilder* b = NULL;
  CHECK_INT_EQ(ds_builder_create(&b), 0);
  const dsTetMaterial tm = {2e4, 5e4, 20};
  const dsGroundDef gd = {3e4, 0, 40, 0.5, 0.01};
  const dsReal weight = 1000 * 0.001 * 4 * 9.8 / 9;
  const dsReal origin[3] = {0, gd.skin - weight / gd.ke, 0}, v0[3] = {0.6, 0, 0.2};
  CHECK(ds_builder_add_tet_grid(b, 2, 1, 2, 0.1, 0.1, 0.1, origin, 1000, v0, &tm) >= 0);
  ds_builder_set_ground(b, &gd);
  return finish(b, (dsReal)0.01, ss);
}

/* springs: a chain of 6 particles (neighbours and next-but-one) falling
 * sideways onto the ground (no approach damping), or in the air */
static dsModel* chain_model(const dsSolverSettings* ss, int ground) {
  dsBuilder* b = NULL;
  CHECK_INT_EQ(ds_builder_create(&b), 0);
  const dsGroundDef gd = {1e4, 0, 30, 0.5, 0.01};
  ds_builder_set_gravity(b, 0, (dsReal)-9.8, 0);
  for (int i = 0; i < 6; i++) {
    const dsReal x[3] = {(dsReal)(0.1 * i), (dsReal)(0.03 + 0.01 * (i % 2)), (dsReal)(0.02 * (i % 3))};
    const dsReal v[3] = {0.5, -0.8, (dsReal)(0.1 * (i - 2))};
    CHECK(ds_builder_add_particle(b, x, v, (dsReal)(0.05 + 0.01 * i)) >= 0);
  }
  for (int i = 0; i + 1 < 6; i++) {
    CHECK(ds_builder_add_spring(b, i, i + 1, 2e3, 2, -1) >= 0);
    if (i + 2 < 6) CHECK(ds_builder_add_spring(b, i, i + 2, 5e2, 1, -1) >= 0);
  }
  if (ground) ds_builder_set_ground(b, &gd);
  return finish(b, (dsReal)0.01, ss);
}

/* cloth 3 x 3 cells with bending, lift and drag, its lower edge 2 cm above
 * the ground, falling onto it */
static dsModel* cloth_model(const dsSolverSettings* ss) {
  dsBuilder* b = NULL;
  CHECK_INT_EQ(ds_builder_create(&b), 0);
  const dsTriMaterial tm = {60, 300, 0.5};
  const dsBendMaterial bm = {0.05, 0.002};
  const dsReal origin[3] = {-0.2, 0.02, 0.05}, v0[3] = {0.1, -0.3, -2.0};
  CHECK(ds_builder_add_cloth_grid(b, 3, 3, 0.1, origin, 0.02, v0, &tm, &bm) >= 0);
  ds_builder_set_aero(b, 10, 5);
  const dsGroundDef gd = {2e3, 0, 30, 0.5, 0.01};
  ds_builder_set_ground(b, &gd);
  return finish(b, (dsReal)0.01, ss);
}

/* ---- bitwise parity with the single-instance engine ---------------------------------- */
static void parity(const char* name, const dsModel* m, int S) {
  const int B = 3, C = 3;
  btEpisode e;
  bt_episode(&e, m, B, C, S, 0.05);
  const size_t len = bt_result_len(m, C);
  dsReal* ref = (dsReal*)calloc((size_t)B * len, sizeof(dsReal));
  dsReal* got = (dsReal*)calloc((size_t)B * len, sizeof(dsReal));
  const int Ks[2] = {1, 2};
  for (int ki = 0; ki < 2; ki++) {
    const int K = Ks[ki];
    for (int b = 0; b < B; b++) bt_run_single(m, &e, b, K, ref + b * len);
    const int threads[2] = {1, 4};
    for (int ti = 0; ti < 2; ti++) {
      ds_set_num_threads(threads[ti]);
      memset(got, 0, (size_t)B * len * sizeof(dsReal));
      bt_run_batch(m, &e, K, ds_device_cpu(), got);
      size_t first = 0;
      const int nd = count_diff(ref, got, (size_t)B * len, &first);
      if (nd)
        DST_FAIL_AT("%s, K %d, %d threads: %d of %zu results differ from the single engine; first at %zu "
                    "(instance %zu, offset %zu): %.17g vs %.17g",
                    name, K, threads[ti], nd, (size_t)B * len, first, first / len, first % len, (double)ref[first],
                    (double)got[first]);
      dst_checks++;
    }
  }
  /* the instances differ, and so do their gradients (the test would pass trivially otherwise) */
  CHECK(memcmp(ref, ref + len, 6 * (size_t)m->nparticle * sizeof(dsReal)) != 0);
  CHECK(memcmp(ref + 6 * (size_t)m->nparticle, ref + len + 6 * (size_t)m->nparticle,
               (len - 6 * (size_t)m->nparticle) * sizeof(dsReal)) != 0);
  ds_set_num_threads(0);
  free(ref);
  free(got);
  bt_episode_free(&e);
  printf("%-24s %4d particles %4d tets %4d tris %4d springs %4d bends%s: bitwise equal (full and checkpointed, "
         "1 and 4 threads)\n",
         name, m->nparticle, m->ntet, m->ntri, m->nspring, m->nbend, m->aero ? " aero" : "");
}

/* ---- central differences of instance 1's loss w_x . x_T + w_v . v_T ---------------- */
enum { FB = 3, FC = 2, FS = 3 };

static dsBatchSim* make_batch(const dsModel* m, int T, int K) {
  dsBatchSimDef def = ds_default_batch_sim_def();
  def.batch = FB;
  def.max_substeps = T;
  def.checkpoint_every = K;
  dsBatchSim* s = NULL;
  char err[512];
  const int rc = ds_bsim_create(m, &def, &s, err, sizeof err);
  if (rc) bt_die("ds_bsim_create", rc, err);
  return s;
}

/* instance 1's loss with act[k] (control step 0) and param[j] moved */
static double fd_loss(const dsModel* m, const btEpisode* e, const char* pname, int j, dsReal dp, int k, dsReal da) {
  dsBatchSim* s = make_batch(m, 0, 1);
  const size_t n3 = 3 * (size_t)m->nparticle, na = (size_t)m->nact;
  const dsReal* p;
  int n;
  CHECK_INT_EQ(ds_model_param(m, pname, &p, &n), 0);
  dsReal* pv = (dsReal*)malloc((size_t)n * sizeof(dsReal));
  memcpy(pv, p, (size_t)n * sizeof(dsReal));
  pv[j] += dp;
  if (ds_bsim_set_param(s, 1, pname, pv, n)) bt_die("set_param", DS_ERR_INVALID, ds_bsim_last_error(s));
  dsReal* act = (dsReal*)malloc(((size_t)FC * FB * na + 1) * sizeof(dsReal));
  memcpy(act, e->act, (size_t)FC * FB * na * sizeof(dsReal));
  act[na + (size_t)k] += da;
  for (int c = 0; c < FC; c++)
    if (ds_bsim_set_act(s, act + (size_t)c * FB * na) || ds_bsim_step(s, FS, NULL))
      bt_die("fd step", DS_ERR_DIVERGED, ds_bsim_last_error(s));
  dsReal* x = (dsReal*)calloc((size_t)FB * n3, sizeof(dsReal));
  dsReal* v = (dsReal*)calloc((size_t)FB * n3, sizeof(dsReal));
  ds_bsim_get_state(s, x, v);
  double L = 0;
  for (size_t q = 0; q < n3; q++) L += (double)e->wx[n3 + q] * x[n3 + q] + (double)e->wv[n3 + q] * v[n3 + q];
  free(pv);
  free(act);
  free(x);
  free(v);
  ds_bsim_free(s);
  return L;
}

static void fd_check(const char* name, const dsModel* m, const char* pname, int j) {
  btEpisode e;
  bt_episode(&e, m, FB, FC, FS, 0.05);
  const size_t n3 = 3 * (size_t)m->nparticle, na = (size_t)m->nact;
  dsReal* wx = (dsReal*)calloc((size_t)FB * n3, sizeof(dsReal));
  dsReal* wv = (dsReal*)calloc((size_t)FB * n3, sizeof(dsReal));
  memcpy(wx + n3, e.wx + n3, n3 * sizeof(dsReal)); /* instance 1's loss only */
  memcpy(wv + n3, e.wv + n3, n3 * sizeof(dsReal));
  dsBatchSim* s = make_batch(m, FC * FS, 2);
  dsReal* aa = (dsReal*)calloc((size_t)FC * FB * na + 1, sizeof(dsReal));
  int rc = 0;
  for (int c = 0; c < FC && !rc; c++) {
    rc = ds_bsim_set_act(s, e.act + (size_t)c * FB * na);
    if (!rc) rc = ds_bsim_step(s, FS, NULL);
  }
  if (!rc) rc = ds_bsim_backward_begin(s, wx, wv);
  for (int c = FC - 1; c >= 0 && !rc; c--) rc = ds_bsim_backward_step(s, FS, aa + (size_t)c * FB * na, NULL);
  if (!rc) rc = ds_bsim_backward_finish(s);
  const dsReal* p;
  int n;
  CHECK_INT_EQ(ds_model_param(m, pname, &p, &n), 0);
  dsReal* gp = (dsReal*)calloc((size_t)n, sizeof(dsReal));
  if (!rc) rc = ds_bsim_get_grad(s, 1, pname, gp, n);
  if (rc) bt_die("fd gradient", rc, ds_bsim_last_error(s));
  ds_bsim_free(s);
  /* the activation with the largest adjoint */
  int k = 0;
  for (int q = 1; q < (int)na; q++)
    if (fabs((double)aa[na + q]) > fabs((double)aa[na + k])) k = q;
  const double ha = 1e-6, hp = 1e-6 * (fabs((double)p[j]) + 1e-3);
  const double fa = (fd_loss(m, &e, pname, j, 0, k, (dsReal)ha) - fd_loss(m, &e, pname, j, 0, k, (dsReal)-ha)) / (2 * ha);
  const double fp = (fd_loss(m, &e, pname, j, (dsReal)hp, k, 0) - fd_loss(m, &e, pname, j, (dsReal)-hp, k, 0)) / (2 * hp);
  const double ga = (double)aa[na + (size_t)k], gj = (double)gp[j];
  printf("%-24s central differences, instance 1: d/d act[%d] %.9g (adjoint %.9g), d/d %s[%d] %.9g (adjoint %.9g)\n",
         name, k, fa, ga, pname, j, fp, gj);
  CHECK(fabs(fa) > 1e-6 && fabs(fp) > 1e-9);
  CHECK_CLOSE(ga, fa, 1e-5, 1e-10);
  CHECK_CLOSE(gj, fp, 1e-5, 1e-12);
  free(gp);
  free(aa);
  free(wx);
  free(wv);
  bt_episode_free(&e);
}

/* ---- rewinds, plan, allocation, refusals ---------------------------------------------- */
/* allocations counted, and the one numbered g_fail_at refused */
static long g_count = 0, g_live = 0, g_fail_at = -1;
static void* a_malloc(size_t n) {
  if (g_fail_at >= 0 && g_count == g_fail_at) return g_count++, NULL;
  g_count++;
  void* p = malloc(n);
  if (p) g_live++;
  return p;
}
static void* a_realloc(void* q, size_t n) {
  if (g_fail_at >= 0 && g_count == g_fail_at) return g_count++, NULL;
  g_count++;
  void* p = realloc(q, n);
  if (p && !q) g_live++;
  return p;
}
static void* a_calloc(size_t c, size_t n) {
  if (g_fail_at >= 0 && g_count == g_fail_at) return g_count++, NULL;
  g_count++;
  void* p = calloc(c, n);
  if (p) g_live++;
  return p;
}
static void a_free(void* p) {
  if (p) g_live--;
  free(p);
}

/* K: full (1) or checkpointed tape; a rewind to substep 4 (on a checkpoint)
 * and the same substeps again give the same bits */
static void test_rewind(const dsModel* m, int K) {
  const size_t n3 = 3 * (size_t)m->nparticle, bn = FB * n3;
  dsBatchSim* s = make_batch(m, 8, K);
  dsReal* x = (dsReal*)calloc(4 * bn, sizeof(dsReal));
  dsReal *v = x + bn, *x2 = x + 2 * bn, *v2 = x + 3 * bn;
  CHECK_INT_EQ(ds_bsim_step(s, 8, NULL), 0);
  CHECK_INT_EQ(ds_bsim_get_state(s, x, v), 0);
  CHECK_INT_EQ(ds_bsim_rewind(s, 4, NULL, NULL), 0);
  CHECK_INT_EQ(ds_bsim_step(s, 4, NULL), 0);
  CHECK_INT_EQ(ds_bsim_get_state(s, x2, v2), 0);
  CHECK(memcmp(x, x2, 2 * bn * sizeof(dsReal)) == 0);
  CHECK_INT_EQ(ds_bsim_reset(s), 0);
  CHECK_INT_EQ(ds_bsim_step(s, 8, NULL), 0);
  CHECK_INT_EQ(ds_bsim_get_state(s, x2, v2), 0);
  CHECK(memcmp(x, x2, 2 * bn * sizeof(dsReal)) == 0);
  free(x);
  ds_bsim_free(s);
}

static void test_plan_alloc_refusals(const dsModel* m) {
  char err[512];
  dsBatchSimDef def = ds_default_batch_sim_def();
  def.batch = 4;
  def.max_substeps = 12;
  def.checkpoint_every = 4;
  dsBatchPlan plan;
  CHECK_INT_EQ(ds_bsim_plan(m, &def, &plan, err, sizeof err), 0);
  /* each instance's solver workspace: the Newton vectors (11 x 3 n) at least */
  CHECK(plan.work_bytes >= 11 * 3 * (size_t)m->nparticle * sizeof(dsReal));
  CHECK(plan.device_bytes >= 4 * plan.work_bytes);
  /* create fails cleanly (DS_ERR_NOMEM, nothing left) whichever of its
     allocations fails; then an episode (forward, checkpointed backward,
     reset) allocates nothing */
  dsBatchSim* s = NULL;
  int created = 0;
  for (long k = 0; k < 400 && !created; k++) {
    s = NULL;
    g_count = g_live = 0;
    g_fail_at = k;
    ds_replace_allocator(a_malloc, a_realloc, a_calloc, a_free);
    const int rc = ds_bsim_create(m, &def, &s, err, sizeof err);
    if (rc == 0) {
      created = 1;
      g_fail_at = -1;
      g_count = 0;
      const long live = g_live;
      dsReal* a = (dsReal*)calloc(4 * (size_t)m->nact + 1, sizeof(dsReal));
      CHECK_INT_EQ(ds_bsim_set_act(s, a), 0);
      CHECK_INT_EQ(ds_bsim_step(s, 12, NULL), 0);
      CHECK_INT_EQ(ds_bsim_backward_begin(s, NULL, NULL), 0);
      CHECK_INT_EQ(ds_bsim_backward_step(s, 12, a, NULL), 0);
      CHECK_INT_EQ(ds_bsim_backward_finish(s), 0);
      CHECK_INT_EQ(ds_bsim_reset(s), 0);
      CHECK_INT_EQ(g_count, 0);
      CHECK_INT_EQ(g_live, live);
      free(a);
      ds_bsim_free(s);
    } else {
      CHECK_INT_EQ(rc, DS_ERR_NOMEM);
      CHECK(s == NULL);
    }
    ds_replace_allocator(NULL, NULL, NULL, NULL);
    if (g_live != 0) DST_FAIL_AT("create failing at allocation %ld: %ld allocations left", k, g_live);
    dst_checks++;
  }
  CHECK(created);
  /* CUDA: refused, saying why and what runs it */
  def.device.kind = DS_DEVICE_CUDA;
  def.device.index = 0;
  s = NULL;
  CHECK_INT_EQ(ds_bsim_create(m, &def, &s, err, sizeof err), DS_ERR_UNSUPPORTED);
  CHECK(s == NULL);
  CHECK_STR_CONTAINS(err, "implicit integrator");
  CHECK_STR_CONTAINS(err, "use device cpu");
  CHECK_INT_EQ(ds_bsim_plan(m, &def, &plan, err, sizeof err), 0); /* a plan is only arithmetic */
}

/* ---- a Newton failure in one instance ------------------------------------------------
 * Instance 1 of a chain in the air starts with its particles flying apart
 * (alternately up and down at 270 m/s), and Newton, capped at 6
 * iterations, does not converge (the chain at rest needs fewer): the step
 * reports instance 1 with the
 * serial engine's message (substep, iterations, residual), its state is
 * NaN from there on, and instances 0 and 2 are the serial engine's. */
static void test_failure(const dsModel* m0) {
  dsModel* m = NULL;
  CHECK_INT_EQ(ds_model_copy(m0, &m), 0);
  m->solver.newton_max_iter = 6;
  const int T = 6;
  const size_t n3 = 3 * (size_t)m->nparticle;
  dsModel* m1 = NULL; /* instance 1's model */
  CHECK_INT_EQ(ds_model_copy(m, &m1), 0);
  dsReal* v0 = (dsReal*)malloc(n3 * sizeof(dsReal));
  for (size_t k = 0; k < n3; k++) v0[k] = (dsReal)((k % 3 == 1 ? 270 : 3) * ((k / 3) % 2 ? 1 : -1));
  CHECK_INT_EQ(ds_model_set_param(m1, "initial_velocity", v0, (int)n3), 0);
  /* the serial engine on instance 1: the substep and message */
  dsDataDef dd = ds_default_data_def();
  dsData* d = NULL;
  CHECK_INT_EQ(ds_data_create(m1, &dd, &d), 0);
  int fail_at = -1, rc = 0;
  char want[1024] = "";
  for (int t = 0; t < T && fail_at < 0; t++)
    if ((rc = ds_step(m1, d)) != 0) {
      fail_at = t;
      snprintf(want, sizeof want, "instance 1: %s", ds_data_last_error(d));
    }
  CHECK_INT_EQ(rc, DS_ERR_DIVERGED);
  CHECK_STR_CONTAINS(want, "Newton did not converge");
  ds_data_free(d);
  /* the batch */
  dsBatchSim* s = make_batch(m, 2 * T, 1);
  CHECK_INT_EQ(ds_bsim_set_param(s, 1, "initial_velocity", v0, (int)n3), 0);
  int st[FB] = {0, 0, 0};
  rc = ds_bsim_step(s, T, st);
  CHECK_INT_EQ(rc, DS_ERR_DIVERGED);
  CHECK_STR_EQ(ds_bsim_last_error(s), want);
  CHECK(fail_at > 0); /* a later substep than the first */
  CHECK(st[0] == 0 && st[1] == DS_ERR_DIVERGED && st[2] == 0);
  int sub = -2, el = -2;
  CHECK_INT_EQ(ds_bsim_failure(s, 1, &sub, &el), DS_ERR_DIVERGED);
  CHECK_INT_EQ(sub, fail_at);
  CHECK_INT_EQ(el, -1);
  dsReal* x = (dsReal*)calloc(2 * FB * n3, sizeof(dsReal));
  dsReal* v = x + FB * n3;
  CHECK_INT_EQ(ds_bsim_get_state(s, x, v), 0);
  CHECK(isnan((double)x[n3]) && isnan((double)v[2 * n3 - 1]));
  /* instance 0 is the serial engine's */
  CHECK_INT_EQ(ds_data_create(m, &dd, &d), 0);
  for (int t = 0; t < T; t++) CHECK_INT_EQ(ds_step(m, d), 0);
  CHECK(memcmp(x, d->x, n3 * sizeof(dsReal)) == 0 && memcmp(v, d->v, n3 * sizeof(dsReal)) == 0);
  ds_data_free(d);
  /* its backward: instance 1's adjoints are NaN, no error (the forward reported it) */
  dsReal* ax = (dsReal*)calloc(FB * n3, sizeof(dsReal));
  for (size_t k = 0; k < FB * n3; k++) ax[k] = 1;
  CHECK_INT_EQ(ds_bsim_backward_begin(s, ax, NULL), 0);
  CHECK_INT_EQ(ds_bsim_backward_step(s, T, NULL, NULL), 0);
  CHECK_INT_EQ(ds_bsim_get_adjoint(s, ax, NULL), 0);
  CHECK(isnan((double)ax[n3]) && !isnan((double)ax[0]) && !isnan((double)ax[2 * n3]));
  /* the failure stays reported, with its message, until a reset */
  CHECK_INT_EQ(ds_bsim_step(s, 1, st), DS_ERR_DIVERGED);
  CHECK_STR_EQ(ds_bsim_last_error(s), want);
  /* a reset clears it */
  CHECK_INT_EQ(ds_bsim_reset(s), 0);
  CHECK_INT_EQ(ds_bsim_failure(s, 1, &sub, &el), 0);
  CHECK_INT_EQ(ds_bsim_set_param(s, 1, "initial_velocity", m->v0, (int)n3), 0);
  CHECK_INT_EQ(ds_bsim_step(s, T, st), 0);
  CHECK_INT_EQ(ds_bsim_failure(s, 1, &sub, &el), 0);
  /* a failed adjoint solve (instance 1's adjoint seeded with NaN): the
     call ends with the serial engine's message, the others go on */
  dd.max_substeps = T;
  CHECK_INT_EQ(ds_data_create(m, &dd, &d), 0);
  for (int t = 0; t < T; t++) CHECK_INT_EQ(ds_step(m, d), 0);
  dsGrad* g = NULL;
  CHECK_INT_EQ(ds_grad_create(m, &g), 0);
  CHECK_INT_EQ(ds_backward_begin(m, d), 0);
  for (size_t k = 0; k < n3; k++) d->adj_x[k] = (dsReal)NAN;
  CHECK_INT_EQ(ds_backward_step(m, d, g, NULL, NULL), DS_ERR_DIVERGED);
  snprintf(want, sizeof want, "instance 1: backward: %s", ds_data_last_error(d));
  CHECK_STR_CONTAINS(want, "implicit adjoint");
  ds_grad_free(g);
  ds_data_free(d);
  for (size_t k = n3; k < 2 * n3; k++) ax[k] = (dsReal)NAN;
  CHECK_INT_EQ(ds_bsim_backward_begin(s, ax, NULL), 0);
  CHECK_INT_EQ(ds_bsim_backward_step(s, 2, NULL, NULL), DS_ERR_DIVERGED);
  CHECK_STR_EQ(ds_bsim_last_error(s), want);
  CHECK_INT_EQ(ds_bsim_backward_step(s, T - 1, NULL, NULL), 0); /* the others' go on; no second report */
  CHECK_INT_EQ(ds_bsim_backward_finish(s), 0);
  CHECK_INT_EQ(ds_bsim_get_adjoint(s, ax, NULL), 0);
  CHECK(isnan((double)ax[n3]) && !isnan((double)ax[0]) && !isnan((double)ax[2 * n3]));
  free(ax);
  free(x);
  free(v0);
  ds_bsim_free(s);
  ds_model_free(m1);
  ds_model_free(m);
}

static void failure_and_fd(const dsSolverSettings* def, const dsSolverSettings* tight) {
  dsModel* free_chain = chain_model(def, 0);
  test_failure(free_chain);
  ds_model_free(free_chain);
  dsModel* tblock = block_model(tight);
  fd_check("tet block in contact", tblock, "tet.k_mu", 1);
  ds_model_free(tblock);
  dsModel* tcloth = cloth_model(tight);
  fd_check("aero cloth to ground", tcloth, "aero.lift", 0);
  ds_model_free(tcloth);
}

int main(void) {
  dsSolverSettings tight = ds_default_solver_settings();
  tight.newton_tol = 1e-12;
  tight.cg_tol = 1e-12;
  tight.adjoint_tol = 1e-13;
  tight.newton_max_iter = 60;
  tight.cg_max_iter = 2000;
  const dsSolverSettings def = ds_default_solver_settings();
  /* control-fem-implicit's and control-cloth-implicit's keys (configs/), at a small size */
  static const char* const fem_keys[] = {"physics.integrator", "implicit", "physics.dt", "0.005208333333333333",
                                         "contact.smooth", "0.01", "gear.teeth", "6", "gear.layers", "1", NULL};
  static const char* const cloth_keys[] = {"physics.integrator", "implicit", "physics.dt", "0.0625",
                                           "physics.newton_tol", "0.001", "physics.adjoint_tol", "0.001",
                                           "scene.size_min", "3", "scene.size_max", "3", NULL};
  dsModel* gear = env_model("control-fem", fem_keys);
  dsModel* cloth_env = env_model("control-cloth", cloth_keys);
  dsModel* block = block_model(&def);
  dsModel* chain = chain_model(&def, 1);
  dsModel* cloth = cloth_model(&def);
  CHECK(gear->ntet > 0 && gear->integrator == DS_INTEGRATOR_IMPLICIT && gear->ground);
  CHECK(cloth_env->nbend > 0 && cloth_env->aero && cloth_env->integrator == DS_INTEGRATOR_IMPLICIT);
  parity("control-fem-implicit", gear, 3);
  parity("control-cloth-implicit", cloth_env, 3);
  parity("tet block in contact", block, 4);
  parity("spring chain to ground", chain, 4);
  parity("aero cloth to ground", cloth, 4);
  test_rewind(block, 1);
  test_rewind(block, 4);
  test_plan_alloc_refusals(block);
  if (DS_SINGLE) /* as tests/test_implicit: the solver's thresholds and the gradients in double */
    printf("single precision: the failure and central-difference checks run in double builds\n");
  else
    failure_and_fd(&def, &tight);
  ds_model_free(gear);
  ds_model_free(cloth_env);
  ds_model_free(block);
  ds_model_free(chain);
  ds_model_free(cloth);
  return DST_RESULT();
}

/* Articulated models on the batched engine's CPU backend (engine/batch_artic.c)
 * against the single-instance engine: the pendulum and the runner (hinges,
 * motors, ground contact), B = 3 instances with their own joint damping,
 * link masses and initial angles, full and checkpointed (K = 4) tapes, 1
 * and 4 threads: final states, the articulation's state, the actions'
 * adjoints per control step and every parameter's gradient (the named
 * articulation parameters too) are bitwise those of ds_step /
 * ds_backward_step on each instance's own model. Also: one instance's
 * gradient against central differences (an action, a damping), the memory
 * plan, no allocation in an episode, the refusals (a state given as
 * vertices; CUDA refuses only without CUDA or a device, not for the
 * articulation), and a state set and read back (ds_bsim_rewind_artic,
 * ds_bsim_set_artic_instance). */
#include "config.h"

#include <math.h>

#include "dstest.h"
#include "dsim/artic.h"
#include "dsim/device.h"
#include "dsim/engine_batch.h"
#include "dsim/env.h"

enum { B = 3, C = 3, S = 8, T = C * S };

static uint64_t g_rng = 0x2545F4914F6CDD1DULL;
static double unif(double a, double b) {
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return a + (b - a) * ((double)(g_rng >> 11) / 9007199254740992.0);
}

static dsModel* env_model(const char* name) {
  dsEnvDef def = ds_default_env_def(name);
  dsEnv* env = NULL;
  char err[512];
  if (ds_env_create(&def, &env, err, sizeof err)) {
    fprintf(stderr, "%s: %s\n", name, err);
    return NULL;
  }
  dsModel* m = NULL;
  if (ds_model_copy(ds_env_model(env), &m)) m = NULL;
  ds_env_destroy(env);
  return m;
}

/* Instance b's values: every joint damping and link mass scaled by
 * 1 + 0.15 b (dampings of 0 become 0.05 b), the first angle moved by 0.05 b. */
typedef struct Inst {
  int n;
  char name[64][128];
  dsReal val[64];
  dsReal q0[64];
  int nq;
} Inst;

static void instance_values(const dsModel* m, int b, Inst* in) {
  in->n = 0;
  for (int i = 0; i < m->artic_nparam && in->n < 64; i++) {
    const char* pn = ds_artic_param_name(m->artic, i);
    const size_t l = strlen(pn);
    const int damp = l > 8 && !strcmp(pn + l - 8, ".damping"), mass = l > 5 && !strcmp(pn + l - 5, ".mass");
    if (!damp && !mass) continue;
    const double v = (double)m->artic_param[i];
    snprintf(in->name[in->n], sizeof in->name[0], "%s", pn);
    in->val[in->n++] = (dsReal)(damp && v == 0 ? 0.05 * b : v * (1 + 0.15 * b));
  }
  in->nq = m->artic_nq;
  for (int k = 0; k < m->artic_nq; k++) in->q0[k] = m->artic_q0[k];
  in->q0[0] += (dsReal)(0.05 * b);
}

/* The episode's inputs: actions C x B x nu, loss weights B x n3. */
typedef struct Ep {
  dsReal *act, *wx, *wv, *wmid;
} Ep;

static void ep_make(Ep* e, const dsModel* m) {
  const size_t nu = (size_t)m->artic_nu, n3 = 3 * (size_t)m->nparticle;
  e->act = calloc((size_t)C * B * nu + 1, sizeof(dsReal));
  e->wx = calloc((size_t)B * n3, sizeof(dsReal));
  e->wv = calloc((size_t)B * n3, sizeof(dsReal));
  e->wmid = calloc((size_t)B * n3, sizeof(dsReal));
  for (size_t k = 0; k < (size_t)C * B * nu; k++) e->act[k] = (dsReal)unif(-0.8, 0.8);
  for (size_t k = 0; k < (size_t)B * n3; k++) {
    e->wx[k] = (dsReal)unif(-1, 1);
    e->wv[k] = (dsReal)unif(-0.1, 0.1);
    e->wmid[k] = (dsReal)unif(-1, 1);
  }
}

static void ep_free(Ep* e) {
  free(e->act);
  free(e->wx);
  free(e->wv);
  free(e->wmid);
}

/* Reals of one instance's result: x_T, v_T, the articulation's state, the
 * actions' adjoint per control step, every differentiable parameter's
 * gradient, then the named ones of Inst. */
static size_t result_len(const dsModel* m, const Inst* in) {
  size_t n = 6 * (size_t)m->nparticle + (size_t)(m->artic_nq + m->artic_nv) + (size_t)C * m->artic_nu + in->n;
  for (int k = 0; k < ds_param_count(); k++) {
    const dsReal* p;
    int c;
    if (!ds_model_param(m, ds_param_name(k), &p, &c)) n += (size_t)c;
  }
  return n;
}

static void die(const char* what, const char* msg) {
  fprintf(stderr, "%s: %s\n", what, msg);
  exit(1);
}

static void run_single(const dsModel* m, const Ep* e, int b, int K, dsReal* out) {
  Inst in;
  instance_values(m, b, &in);
  dsModel* mb;
  if (ds_model_copy(m, &mb)) die("copy", "");
  for (int i = 0; i < in.n; i++)
    if (ds_model_set_param(mb, in.name[i], &in.val[i], 1)) die(in.name[i], ds_model_last_error(mb));
  if (ds_model_set_param(mb, "artic.initial_q", in.q0, in.nq)) die("q0", ds_model_last_error(mb));
  const size_t n3 = 3 * (size_t)m->nparticle, nu = (size_t)m->artic_nu, ns = (size_t)(m->artic_nq + m->artic_nv);
  dsDataDef dd = ds_default_data_def();
  dd.max_substeps = T;
  dd.checkpoint_every = K;
  dsData* d;
  dsGrad* g;
  if (ds_data_create(mb, &dd, &d) || ds_grad_create(mb, &g)) die("data", "");
  ds_data_reset(mb, d);
  for (int c = 0; c < C; c++) {
    memcpy(d->artic_act, e->act + ((size_t)c * B + b) * nu, nu * sizeof(dsReal));
    for (int j = 0; j < S; j++)
      if (ds_step(mb, d)) die("ds_step", ds_data_last_error(d));
  }
  dsReal* o = out;
  memcpy(o, d->x, n3 * sizeof(dsReal));
  memcpy(o + n3, d->v, n3 * sizeof(dsReal));
  memcpy(o + 2 * n3, d->artic_state, ns * sizeof(dsReal));
  o += 2 * n3 + ns;
  if (ds_backward_begin(mb, d)) die("backward_begin", ds_data_last_error(d));
  for (size_t k = 0; k < n3; k++) {
    d->adj_x[k] += e->wx[(size_t)b * n3 + k];
    d->adj_v[k] += e->wv[(size_t)b * n3 + k];
  }
  for (int c = C - 1; c >= 0; c--) {
    dsReal* sa = o + (size_t)c * nu;
    for (size_t k = 0; k < nu; k++) sa[k] = 0;
    for (int j = 0; j < S; j++) {
      if (ds_backward_step(mb, d, g, NULL, NULL)) die("backward_step", ds_data_last_error(d));
      for (size_t k = 0; k < nu; k++) sa[k] += d->adj_artic_act[k];
    }
    if (c == 1)
      for (size_t k = 0; k < n3; k++) d->adj_x[k] += e->wmid[(size_t)b * n3 + k];
  }
  if (ds_backward_finish(mb, d, g)) die("backward_finish", ds_data_last_error(d));
  o += (size_t)C * nu;
  for (int k = 0; k < ds_param_count(); k++) {
    dsReal* p;
    int c;
    if (ds_grad_param(g, ds_param_name(k), &p, &c)) continue;
    if (c) memcpy(o, p, (size_t)c * sizeof(dsReal));
    o += c;
  }
  for (int i = 0; i < in.n; i++) *o++ = g->artic_param[ds_artic_param_index(m->artic, in.name[i])];
  ds_grad_free(g);
  ds_data_free(d);
  ds_model_free(mb);
}

static dsBatchSim* make_batch(const dsModel* m, int K, int T_) {
  dsBatchSimDef def = ds_default_batch_sim_def();
  def.batch = B;
  def.max_substeps = T_;
  def.checkpoint_every = K;
  def.act_records = C;
  dsBatchSim* s = NULL;
  char err[512];
  if (ds_bsim_create(m, &def, &s, err, sizeof err)) die("ds_bsim_create", err);
  for (int b = 0; b < B; b++) {
    Inst in;
    instance_values(m, b, &in);
    for (int i = 0; i < in.n; i++)
      if (ds_bsim_set_param(s, b, in.name[i], &in.val[i], 1)) die(in.name[i], ds_bsim_last_error(s));
    if (ds_bsim_set_param(s, b, "artic.initial_q", in.q0, in.nq)) die("q0", ds_bsim_last_error(s));
  }
  return s;
}

static void run_batch(const dsModel* m, const Ep* e, int K, dsReal* out, size_t len) {
  dsBatchSim* s = make_batch(m, K, T);
  const size_t n3 = 3 * (size_t)m->nparticle, nu = (size_t)m->artic_nu, ns = (size_t)(m->artic_nq + m->artic_nv);
  dsReal* x = calloc((size_t)B * n3, sizeof(dsReal));
  dsReal* v = calloc((size_t)B * n3, sizeof(dsReal));
  dsReal* as = calloc((size_t)B * ns, sizeof(dsReal));
  dsReal* aa = calloc((size_t)B * nu + 1, sizeof(dsReal));
  int rc = ds_bsim_zero_grad(s);
  for (int c = 0; c < C && !rc; c++) {
    rc = ds_bsim_set_act(s, e->act + (size_t)c * B * nu);
    if (!rc) rc = ds_bsim_step(s, S, NULL);
  }
  if (!rc) rc = ds_bsim_get_state(s, x, v);
  if (!rc) rc = ds_bsim_get_artic_state(s, as);
  if (rc) die("batch forward", ds_bsim_last_error(s));
  for (int b = 0; b < B; b++) {
    memcpy(out + b * len, x + b * n3, n3 * sizeof(dsReal));
    memcpy(out + b * len + n3, v + b * n3, n3 * sizeof(dsReal));
    memcpy(out + b * len + 2 * n3, as + b * ns, ns * sizeof(dsReal));
  }
  rc = ds_bsim_backward_begin(s, e->wx, e->wv);
  for (int c = C - 1; c >= 0 && !rc; c--) {
    rc = ds_bsim_backward_step(s, S, aa, NULL);
    for (int b = 0; b < B; b++) memcpy(out + b * len + 2 * n3 + ns + (size_t)c * nu, aa + b * nu, nu * sizeof(dsReal));
    if (!rc && c == 1) rc = ds_bsim_add_adjoint(s, e->wmid, NULL);
  }
  if (!rc) rc = ds_bsim_backward_finish(s);
  if (rc) die("batch backward", ds_bsim_last_error(s));
  for (int b = 0; b < B; b++) {
    dsReal* o = out + b * len + 2 * n3 + ns + (size_t)C * nu;
    for (int k = 0; k < ds_param_count(); k++) {
      const dsReal* p;
      int c;
      if (ds_model_param(m, ds_param_name(k), &p, &c)) continue;
      if (ds_bsim_get_grad(s, b, ds_param_name(k), o, c)) die("get_grad", ds_bsim_last_error(s));
      o += c;
    }
    Inst in;
    instance_values(m, b, &in);
    for (int i = 0; i < in.n; i++)
      if (ds_bsim_get_grad(s, b, in.name[i], o++, 1)) die("get_grad", ds_bsim_last_error(s));
  }
  free(x);
  free(v);
  free(as);
  free(aa);
  ds_bsim_free(s);
}

/* What offset k of a result is (for the failure message). */
static const char* what_at(const dsModel* m, size_t k, char* buf, size_t n) {
  const size_t n3 = 3 * (size_t)m->nparticle, ns = (size_t)(m->artic_nq + m->artic_nv);
  size_t o = 2 * n3 + ns + (size_t)C * m->artic_nu;
  if (k < n3) return "x_T";
  if (k < 2 * n3) return "v_T";
  if (k < 2 * n3 + ns) return "the articulation's state";
  if (k < o) return "an action's adjoint";
  for (int p = 0; p < ds_param_count(); p++) {
    const dsReal* v;
    int c;
    if (ds_model_param(m, ds_param_name(p), &v, &c)) continue;
    if (k < o + (size_t)c) {
      snprintf(buf, n, "the gradient of %s[%zu]", ds_param_name(p), k - o);
      return buf;
    }
    o += (size_t)c;
  }
  return "a named articulation parameter's gradient";
}

static void parity(const char* name, const dsModel* m) {
  Ep e;
  ep_make(&e, m);
  Inst in0;
  instance_values(m, 0, &in0);
  const size_t len = result_len(m, &in0);
  dsReal* ref = calloc((size_t)B * len, sizeof(dsReal));
  dsReal* got = calloc((size_t)B * len, sizeof(dsReal));
  const int Ks[2] = {1, 4}, threads[2] = {1, 4};
  for (int ki = 0; ki < 2; ki++) {
    for (int b = 0; b < B; b++) run_single(m, &e, b, Ks[ki], ref + b * len);
    for (int ti = 0; ti < 2; ti++) {
      ds_set_num_threads(threads[ti]);
      memset(got, 0, (size_t)B * len * sizeof(dsReal));
      run_batch(m, &e, Ks[ki], got, len);
      int nd = 0;
      size_t first = 0;
      for (size_t k = 0; k < (size_t)B * len; k++)
        if (!(ref[k] == got[k]) && nd++ == 0) first = k;
      char buf[160];
      if (nd)
        DST_FAIL_AT("%s, K %d, %d threads: %d of %zu results differ; first at instance %zu: %s: %.17g vs %.17g",
                    name, Ks[ki], threads[ti], nd, (size_t)B * len, first / len,
                    what_at(m, first % len, buf, sizeof buf), (double)ref[first], (double)got[first]);
      dst_checks++;
    }
  }
  ds_set_num_threads(0);
  /* the instances differ, and the gradients are not all zero */
  CHECK(memcmp(ref, ref + len, 3 * (size_t)m->nparticle * sizeof(dsReal)) != 0);
  int nz = 0;
  for (size_t k = 2 * 3 * (size_t)m->nparticle; k < len; k++) nz += ref[k] != 0;
  CHECK(nz > 10);
  /* the ground contact acted when the articulation has one: its stiffness has a gradient */
  const int kc = ds_artic_param_index(m->artic, "contact.ke");
  if (kc >= 0) {
    size_t o = 2 * 3 * (size_t)m->nparticle + (size_t)(m->artic_nq + m->artic_nv) + (size_t)C * m->artic_nu;
    for (int p = 0; p < ds_param_count() && strcmp(ds_param_name(p), "artic.param"); p++) {
      const dsReal* v;
      int c;
      if (!ds_model_param(m, ds_param_name(p), &v, &c)) o += (size_t)c;
    }
    printf("%s: dL/d(articulation contact.ke) = %.6g\n", name, (double)ref[o + (size_t)kc]);
    CHECK(ref[o + (size_t)kc] != 0);
  }
  if (dst_failures == 0) printf("%-10s %d links, %d dof, %d actions, %d vertices: bitwise equal to the single engine (full and K = 4, 1 and 4 "
         "threads)\n",
         name, m->artic_nbody, m->artic_nv, m->artic_nu, m->nparticle);
  free(ref);
  free(got);
  ep_free(&e);
}

/* ---- central differences of one instance's loss ------------------------------------- */
static double loss_of(const dsModel* m, const Ep* e, int pi, dsReal dp, int ai, dsReal da) {
  dsBatchSim* s = make_batch(m, 1, 0);
  const size_t n3 = 3 * (size_t)m->nparticle, nu = (size_t)m->artic_nu;
  Inst in;
  instance_values(m, 1, &in);
  dsReal val = in.val[pi] + dp;
  if (ds_bsim_set_param(s, 1, in.name[pi], &val, 1)) die("set", ds_bsim_last_error(s));
  dsReal* act = malloc(((size_t)C * B * nu + 1) * sizeof(dsReal));
  memcpy(act, e->act, (size_t)C * B * nu * sizeof(dsReal));
  act[nu + (size_t)ai] += da; /* control step 0, instance 1 */
  dsReal* x = calloc((size_t)B * n3, sizeof(dsReal));
  dsReal* v = calloc((size_t)B * n3, sizeof(dsReal));
  for (int c = 0; c < C; c++) {
    if (ds_bsim_set_act(s, act + (size_t)c * B * nu) || ds_bsim_step(s, S, NULL)) die("fd", ds_bsim_last_error(s));
  }
  ds_bsim_get_state(s, x, v);
  double L = 0;
  for (size_t k = 0; k < n3; k++) L += (double)e->wx[n3 + k] * x[n3 + k] + (double)e->wv[n3 + k] * v[n3 + k];
  free(act);
  free(x);
  free(v);
  ds_bsim_free(s);
  return L;
}

static void fd_check(const dsModel* m) {
  Ep e;
  ep_make(&e, m);
  const size_t n3 = 3 * (size_t)m->nparticle, nu = (size_t)m->artic_nu;
  Inst in;
  instance_values(m, 1, &in);
  int pi = 0;
  for (int i = 0; i < in.n; i++)
    if (strstr(in.name[i], ".damping")) pi = i;
  /* gradient of instance 1's loss w_x . x_T + w_v . v_T */
  dsBatchSim* s = make_batch(m, 1, T);
  dsReal* aa = calloc((size_t)B * nu * C + 1, sizeof(dsReal));
  dsReal* wx = calloc((size_t)B * n3, sizeof(dsReal));
  dsReal* wv = calloc((size_t)B * n3, sizeof(dsReal));
  memcpy(wx + n3, e.wx + n3, n3 * sizeof(dsReal));
  memcpy(wv + n3, e.wv + n3, n3 * sizeof(dsReal));
  int rc = 0;
  for (int c = 0; c < C && !rc; c++) {
    rc = ds_bsim_set_act(s, e.act + (size_t)c * B * nu);
    if (!rc) rc = ds_bsim_step(s, S, NULL);
  }
  if (!rc) rc = ds_bsim_backward_begin(s, wx, wv);
  for (int c = C - 1; c >= 0 && !rc; c--) rc = ds_bsim_backward_step(s, S, aa + (size_t)c * B * nu, NULL);
  if (!rc) rc = ds_bsim_backward_finish(s);
  dsReal gp = 0;
  if (!rc) rc = ds_bsim_get_grad(s, 1, in.name[pi], &gp, 1);
  if (rc) die("fd gradient", ds_bsim_last_error(s));
  ds_bsim_free(s);
  const double ha = 1e-6, hp = 1e-6 * (fabs((double)in.val[pi]) + 1);
  const double fa = (loss_of(m, &e, pi, 0, 0, (dsReal)ha) - loss_of(m, &e, pi, 0, 0, (dsReal)-ha)) / (2 * ha);
  const double fp = (loss_of(m, &e, pi, (dsReal)hp, 0, 0) - loss_of(m, &e, pi, (dsReal)-hp, 0, 0)) / (2 * hp);
  const double ga = (double)aa[nu]; /* control step 0, instance 1, action 0 */
  printf("central differences, instance 1: d/d action %.9g (adjoint %.9g), d/d %s %.9g (adjoint %.9g)\n", fa, ga,
         in.name[pi], fp, (double)gp);
  CHECK(fabs(fa) > 1e-8 && fabs(fp) > 1e-8);
  CHECK_CLOSE(ga, fa, 1e-5, 1e-9);
  CHECK_CLOSE((double)gp, fp, 1e-5, 1e-9);
  free(aa);
  free(wx);
  free(wv);
  ep_free(&e);
}

/* ---- plan, allocation, refusals ------------------------------------------------------ */
static long g_calls = 0;
static void* c_malloc(size_t n) { return g_calls++, malloc(n); }
static void* c_realloc(void* q, size_t n) { return g_calls++, realloc(q, n); }
static void* c_calloc(size_t c, size_t n) { return g_calls++, calloc(c, n); }
static void c_free(void* p) { free(p); }

static void test_plan_alloc_refusals(const dsModel* m) {
  char err[512];
  dsBatchSimDef def = ds_default_batch_sim_def();
  def.batch = 4;
  def.max_substeps = 40;
  dsBatchPlan full, ck, none;
  CHECK_INT_EQ(ds_bsim_plan(m, &def, &full, err, sizeof err), 0);
  def.checkpoint_every = 8;
  CHECK_INT_EQ(ds_bsim_plan(m, &def, &ck, err, sizeof err), 0);
  def.max_substeps = 0;
  CHECK_INT_EQ(ds_bsim_plan(m, &def, &none, err, sizeof err), 0);
  const size_t ns = (size_t)(m->artic_nq + m->artic_nv);
  /* the articulation's states are on the tape: 41 (x, v) and 41 (q, qd) per instance at least */
  CHECK(full.tape_reals >= 41 * (6 * (size_t)m->nparticle + ns));
  CHECK(ck.tape_reals < full.tape_reals);
  CHECK(full.work_bytes > 0 && full.work_bytes == none.work_bytes);
  CHECK(full.device_bytes >= 4 * full.work_bytes + 8 * 4 * full.tape_reals);
  /* no allocation in an episode */
  def.max_substeps = 12;
  def.checkpoint_every = 4;
  dsBatchSim* s = NULL;
  CHECK_INT_EQ(ds_bsim_create(m, &def, &s, err, sizeof err), 0);
  dsReal* a = calloc(4 * (size_t)m->artic_nu + 1, sizeof(dsReal));
  ds_replace_allocator(c_malloc, c_realloc, c_calloc, c_free);
  g_calls = 0;
  CHECK_INT_EQ(ds_bsim_set_act(s, a), 0);
  CHECK_INT_EQ(ds_bsim_step(s, 12, NULL), 0);
  CHECK_INT_EQ(ds_bsim_backward_begin(s, NULL, NULL), 0);
  CHECK_INT_EQ(ds_bsim_backward_step(s, 12, a, NULL), 0);
  CHECK_INT_EQ(ds_bsim_backward_finish(s), 0);
  CHECK_INT_EQ(ds_bsim_reset(s), 0);
  ds_replace_allocator(NULL, NULL, NULL, NULL);
  CHECK_INT_EQ(g_calls, 0);
  /* the state is the articulation's, not the vertices' */
  const size_t n3 = 3 * (size_t)m->nparticle;
  dsReal* x = calloc(4 * n3, sizeof(dsReal));
  CHECK_INT_EQ(ds_bsim_set_state(s, x, x), DS_ERR_UNSUPPORTED);
  CHECK_STR_CONTAINS(ds_bsim_last_error(s), "articulation");
  CHECK_INT_EQ(ds_bsim_rewind(s, 0, NULL, NULL), 0);
  /* an unknown parameter, and a named one out of range, are refused and name it */
  dsReal bad = -1;
  CHECK_INT_EQ(ds_bsim_get_grad(s, 0, "joint.nosuch.damping", &bad, 1), DS_ERR_NOTFOUND);
  const char* dn = NULL;
  for (int i = 0; i < m->artic_nparam && !dn; i++)
    if (strstr(ds_artic_param_name(m->artic, i), ".damping")) dn = ds_artic_param_name(m->artic, i);
  CHECK(dn != NULL);
  if (dn) {
    CHECK(ds_bsim_set_param(s, 2, dn, &bad, 1) < 0);
    CHECK_STR_CONTAINS(ds_bsim_last_error(s), dn);
    dsReal got = -7, want = (dsReal)0.25;
    CHECK_INT_EQ(ds_bsim_set_param(s, 2, dn, &want, 1), 0);
    CHECK_INT_EQ(ds_bsim_get_param(s, 2, dn, &got, 1), 0);
    CHECK(got == want);
    CHECK_INT_EQ(ds_bsim_get_param(s, 1, dn, &got, 1), 0);
    CHECK(got != want); /* instance 1 keeps the model's */
    /* the model the batch was made from is untouched */
    double mv = 0;
    CHECK_INT_EQ(ds_artic_param_get(m->artic, dn, &mv), 0);
    CHECK(mv != (double)want);
  }
  free(x);
  free(a);
  ds_bsim_free(s);
  /* CUDA: an articulation is no reason to refuse (the CUDA backend runs it,
     tests/test_cuda_parity); only a dsim without CUDA or a missing device is */
  def.device.kind = DS_DEVICE_CUDA;
  def.device.index = 0;
  s = NULL;
  err[0] = 0;
  const int rc = ds_bsim_create(m, &def, &s, err, sizeof err);
  CHECK(rc == 0 || strstr(err, "articulation") == NULL);
  if (!ds_cuda_built()) CHECK_INT_EQ(rc, DS_ERR_UNSUPPORTED);
  if (rc) fprintf(stderr, "batch on cuda:0: %s (as expected without a GPU)\n", err);
  ds_bsim_free(s);
}

/* ds_bsim_rewind_artic and ds_bsim_set_artic_instance: a state set is the
 * state read back, its vertices posed as the engine poses them */
static void test_set_state(const dsModel* m) {
  const size_t ns = (size_t)(m->artic_nq + m->artic_nv), n3 = 3 * (size_t)m->nparticle;
  char err[512];
  dsBatchSimDef def = ds_default_batch_sim_def();
  def.batch = B;
  def.max_substeps = 10;
  dsBatchSim* s = NULL;
  CHECK_INT_EQ(ds_bsim_create(m, &def, &s, err, sizeof err), 0);
  if (!s) return;
  dsReal* a = calloc((size_t)B * m->artic_nu + 1, sizeof(dsReal));
  dsReal *s0 = calloc(B * ns, sizeof(dsReal)), *s5 = calloc(B * ns, sizeof(dsReal)), *s5b = calloc(B * ns, sizeof(dsReal));
  dsReal *x5 = calloc(B * n3, sizeof(dsReal)), *x5b = calloc(B * n3, sizeof(dsReal));
  for (int k = 0; k < B * m->artic_nu; k++) a[k] = (dsReal)(0.2 * (k + 1));
  CHECK_INT_EQ(ds_bsim_get_artic_state(s, s0), 0);
  CHECK_INT_EQ(ds_bsim_set_act(s, a), 0);
  CHECK_INT_EQ(ds_bsim_step(s, 5, NULL), 0);
  CHECK_INT_EQ(ds_bsim_get_artic_state(s, s5), 0);
  CHECK_INT_EQ(ds_bsim_get_state(s, x5, NULL), 0);
  /* back to 0 with the initial state given: the same episode again */
  CHECK_INT_EQ(ds_bsim_rewind_artic(s, 0, s0), 0);
  CHECK_INT_EQ(ds_bsim_set_act(s, a), 0); /* none is in force at substep 0 */
  CHECK_INT_EQ(ds_bsim_step(s, 5, NULL), 0);
  CHECK_INT_EQ(ds_bsim_get_artic_state(s, s5b), 0);
  CHECK_INT_EQ(ds_bsim_get_state(s, x5b, NULL), 0);
  CHECK(memcmp(s5, s5b, B * ns * sizeof(dsReal)) == 0);
  CHECK(memcmp(x5, x5b, B * n3 * sizeof(dsReal)) == 0);
  /* back to 5 with substep 5's state given: the vertices as the step posed them */
  CHECK_INT_EQ(ds_bsim_rewind_artic(s, 5, s5), 0);
  CHECK_INT_EQ(ds_bsim_get_state(s, x5b, NULL), 0);
  CHECK(memcmp(x5, x5b, B * n3 * sizeof(dsReal)) == 0);
  CHECK_INT_EQ(ds_bsim_set_artic_instance(s, 0, s0), DS_ERR_STATE); /* taped */
  ds_bsim_free(s);
  /* without a tape: instance 2 takes instance 0's state (same parameters: same vertices) */
  def.max_substeps = 0;
  CHECK_INT_EQ(ds_bsim_create(m, &def, &s, err, sizeof err), 0);
  if (s) {
    CHECK_INT_EQ(ds_bsim_set_act(s, a), 0);
    CHECK_INT_EQ(ds_bsim_step(s, 3, NULL), 0);
    CHECK_INT_EQ(ds_bsim_get_artic_state(s, s5), 0);
    CHECK(memcmp(s5, s5 + 2 * ns, ns * sizeof(dsReal)) != 0);
    CHECK_INT_EQ(ds_bsim_set_artic_instance(s, 2, s5), 0);
    CHECK_INT_EQ(ds_bsim_set_artic_instance(s, B, s5), DS_ERR_RANGE);
    CHECK_INT_EQ(ds_bsim_get_artic_state(s, s5b), 0);
    CHECK_INT_EQ(ds_bsim_get_state(s, x5, NULL), 0);
    CHECK(memcmp(s5b + 2 * ns, s5, ns * sizeof(dsReal)) == 0);
    CHECK(memcmp(s5b + ns, s5 + ns, ns * sizeof(dsReal)) == 0); /* the others untouched */
    CHECK(memcmp(x5 + 2 * n3, x5, n3 * sizeof(dsReal)) == 0);
    ds_bsim_free(s);
  }
  free(a);
  free(s0);
  free(s5);
  free(s5b);
  free(x5);
  free(x5b);
}

/* A name both an articulation and the particle model have ("contact.ke": the
 * articulation's ground and the unused particle contact) means the
 * articulation's in every lookup: set, read, gradient, batched set and read. */
static void test_name_order(const dsModel* cm) {
  dsModel* m = (dsModel*)cm;
  const int k = ds_artic_param_index(m->artic, "contact.ke");
  CHECK(k >= 0);
  if (k < 0) return;
  const dsReal* p = NULL;
  int c = 0;
  const dsReal v = (dsReal)(1.25 * m->artic_param[k]);
  CHECK_INT_EQ(ds_model_set_param(m, "contact.ke", &v, 1), 0);
  CHECK_INT_EQ(ds_model_param(m, "contact.ke", &p, &c), 0);
  CHECK(c == 1 && p == m->artic_param + k && *p == v);
  dsGrad* g = NULL;
  CHECK_INT_EQ(ds_grad_create(m, &g), 0);
  dsReal* gp = NULL;
  CHECK_INT_EQ(ds_grad_param(g, "contact.ke", &gp, &c), 0);
  CHECK(c == 1 && gp == g->artic_param + k);
  ds_grad_free(g);
  dsBatchSimDef def = ds_default_batch_sim_def();
  def.batch = 2;
  def.max_substeps = 4;
  dsBatchSim* s = NULL;
  char err[512];
  CHECK_INT_EQ(ds_bsim_create(m, &def, &s, err, sizeof err), 0);
  dsReal w = (dsReal)(0.5 * v), r = 0, all[512];
  CHECK(m->artic_nparam <= 512);
  CHECK_INT_EQ(ds_bsim_get_param(s, 1, "contact.ke", &r, 1), 0);
  CHECK(r == v);
  CHECK_INT_EQ(ds_bsim_set_param(s, 1, "contact.ke", &w, 1), 0);
  CHECK_INT_EQ(ds_bsim_get_param(s, 1, "artic.param", all, m->artic_nparam), 0);
  CHECK(all[k] == w);
  ds_bsim_free(s);
}

/* An instance whose articulation's step fails (its mass matrix does not
 * factor: here a NaN angle makes it NaN) is reported as the articulation's
 * failure with its substep, element -2 (not as a particle of its
 * vertices); the other instances step on. */
static void test_artic_failure(const dsModel* m) {
  const size_t ns = (size_t)(m->artic_nq + m->artic_nv);
  char err[512];
  dsBatchSimDef def = ds_default_batch_sim_def();
  def.batch = B;
  def.max_substeps = 0;
  dsBatchSim* s = NULL;
  CHECK_INT_EQ(ds_bsim_create(m, &def, &s, err, sizeof err), 0);
  if (!s) return;
  dsReal* st = calloc(B * ns, sizeof(dsReal));
  int status[B];
  CHECK_INT_EQ(ds_bsim_step(s, 2, status), 0);
  CHECK_INT_EQ(ds_bsim_get_artic_state(s, st), 0);
  st[ns] = (dsReal)NAN; /* instance 1's first angle */
  CHECK_INT_EQ(ds_bsim_set_artic_instance(s, 1, st + ns), 0); /* taken as given, as particle states are */
  CHECK_INT_EQ(ds_bsim_step(s, 1, status), DS_ERR_DIVERGED);
  CHECK_INT_EQ(status[0], 0);
  CHECK_INT_EQ(status[1], DS_ERR_DIVERGED);
  int sub = -1, el = 0;
  CHECK_INT_EQ(ds_bsim_failure(s, 1, &sub, &el), DS_ERR_DIVERGED);
  CHECK_INT_EQ(sub, 2);
  CHECK_INT_EQ(el, -2);
  CHECK(strstr(ds_bsim_last_error(s), "instance 1: substep 2: the articulation's step failed") != NULL);
  free(st);
  ds_bsim_free(s);
}

int main(void) {
  dsModel* pend = env_model("pendulum");
  dsModel* runner = env_model("runner");
  CHECK(pend != NULL && runner != NULL);
  if (!pend || !runner) return DST_RESULT();
  CHECK(pend->artic != NULL && runner->artic != NULL);
  CHECK(runner->artic_nu >= 6);
  parity("pendulum", pend);
  parity("runner", runner);
  fd_check(pend);
  test_plan_alloc_refusals(runner);
  test_set_state(runner);
  test_artic_failure(pend);
  test_name_order(runner);
  ds_model_free(pend);
  ds_model_free(runner);
  return DST_RESULT();
}

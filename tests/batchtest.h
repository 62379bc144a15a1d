/* Shared by the batched-engine tests (test_batch_sim: CPU backend against
 * the single-instance engine; test_cuda_parity: CUDA against the CPU
 * backend): the models of every registered env, per-instance parameters,
 * controls and loss weights, and one episode forward and backward through
 * either the single-instance engine or a dsBatchSim, with every result
 * (final state, control adjoints per control step, every parameter's
 * gradient) collected into one array per instance for comparison. */
#ifndef DSIM_TESTS_BATCHTEST_H
#define DSIM_TESTS_BATCHTEST_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsim/engine.h"
#include "dsim/engine_batch.h"
#include "dsim/env.h"
#include "engine/batch_priv.h"

/* When set, bt_run_batch creates its batches on this backend (tests of
 * the driver on instrumented backends) instead of the device's. */
static const dsBackend* bt_backend = NULL;
/* bt_run_batch runs its episode this many times on one batch (gradients
 * zeroed between), keeping the last: the CUDA backend then replays the
 * graphs it cached on the first run. */
static int bt_repeats = 1;

static inline void bt_die(const char* what, int rc, const char* msg) {
  fprintf(stderr, "%s failed: %s (%s)\n", what, ds_err_name(rc), msg ? msg : "");
  exit(1);
}

static uint64_t bt_rng = 0x9E3779B97F4A7C15ULL;
static inline double bt_unif(double a, double b) {
  bt_rng ^= bt_rng << 13;
  bt_rng ^= bt_rng >> 7;
  bt_rng ^= bt_rng << 17;
  return a + (b - a) * ((double)(bt_rng >> 11) / 9007199254740992.0);
}

/* Model of env class i (a copy the caller frees), or NULL when it does not
 * build with its defaults. */
static inline dsModel* bt_env_model(int i, const char** name) {
  const dsEnvClass* c = ds_env_class_at(i);
  *name = c->name;
  dsEnvDef def = ds_default_env_def(c->name);
  dsEnv* env = NULL;
  char err[512];
  if (ds_env_create(&def, &env, err, sizeof err)) {
    fprintf(stderr, "%s: not built (%s)\n", c->name, err);
    return NULL;
  }
  dsModel* m = NULL;
  if (ds_model_copy(ds_env_model(env), &m)) bt_die("model copy", DS_ERR_NOMEM, c->name);
  ds_env_destroy(env);
  return m;
}

/* Instance b's parameters: every differentiable parameter scaled by
 * 1 + 0.02 b (initial positions shifted up by 1 mm per instance instead). */
static inline void bt_instance_model(dsModel* mb, const dsModel* m, int b) {
  for (int k = 0; k < ds_param_count(); k++) {
    const char* name = ds_param_name(k);
    const dsReal* p;
    int n;
    if (ds_model_param(m, name, &p, &n) || n == 0) continue;
    if (strncmp(name, "body.", 5) == 0) continue;
    dsReal* v = (dsReal*)malloc((size_t)n * sizeof(dsReal));
    for (int j = 0; j < n; j++) v[j] = p[j] * (1 + (dsReal)0.02 * b);
    if (strcmp(name, "initial_position") == 0)
      for (int j = 0; j < n; j++) v[j] = p[j] + (j % 3 == 1 ? (dsReal)1e-3 * b : 0);
    int rc = ds_model_set_param(mb, name, v, n);
    if (rc) bt_die(name, rc, ds_model_last_error(mb));
    free(v);
  }
}

/* Actions per instance of the batched engine: an articulation's (its nu)
 * for an articulated model, else the activations. */
static inline size_t bt_nact(const dsModel* m) { return (size_t)(m->artic ? m->artic_nu : m->nact); }

/* One episode's inputs for B instances: C control steps of S substeps. */
typedef struct btEpisode {
  int B, C, S;
  dsReal* act;   /* C x B x nact */
  dsReal* fext;  /* C x B x n3 */
  dsReal* wx;    /* B x n3: dL/dx_T */
  dsReal* wv;    /* B x n3: dL/dv_T */
  dsReal* wmid;  /* B x n3: dL/dx at substep S (after the first control step) */
} btEpisode;

static inline void bt_episode(btEpisode* e, const dsModel* m, int B, int C, int S, double amp) {
  const size_t n3 = 3 * (size_t)m->nparticle, na = bt_nact(m);
  e->B = B;
  e->C = C;
  e->S = S;
  e->act = (dsReal*)calloc((size_t)C * B * na + 1, sizeof(dsReal));
  e->fext = (dsReal*)calloc((size_t)C * B * n3 + 1, sizeof(dsReal));
  e->wx = (dsReal*)calloc((size_t)B * n3 + 1, sizeof(dsReal));
  e->wv = (dsReal*)calloc((size_t)B * n3 + 1, sizeof(dsReal));
  e->wmid = (dsReal*)calloc((size_t)B * n3 + 1, sizeof(dsReal));
  for (size_t k = 0; k < (size_t)C * B * na; k++) e->act[k] = (dsReal)bt_unif(-amp, amp);
  for (size_t k = 0; k < (size_t)C * B * n3; k++) e->fext[k] = (dsReal)bt_unif(-0.01, 0.01);
  for (size_t k = 0; k < (size_t)B * n3; k++) {
    e->wx[k] = (dsReal)bt_unif(-1, 1);
    e->wv[k] = (dsReal)bt_unif(-1, 1);
    e->wmid[k] = (dsReal)bt_unif(-1, 1);
  }
}

static inline void bt_episode_free(btEpisode* e) {
  free(e->act);
  free(e->fext);
  free(e->wx);
  free(e->wv);
  free(e->wmid);
}

/* Reals of one instance's result: x_T, v_T, adj_act per control step,
 * adj_fext per control step, every differentiable parameter's gradient. */
static inline size_t bt_result_len(const dsModel* m, int C) {
  size_t n = 6 * (size_t)m->nparticle + (size_t)C * (bt_nact(m) + 3 * (size_t)m->nparticle);
  for (int k = 0; k < ds_param_count(); k++) {
    const dsReal* p;
    int c;
    if (!ds_model_param(m, ds_param_name(k), &p, &c)) n += (size_t)c;
  }
  return n;
}

/* The single-instance engine, instance b, into out (bt_result_len reals). */
static inline void bt_run_single(const dsModel* m, const btEpisode* e, int b, int K, dsReal* out) {
  dsModel* mb;
  if (ds_model_copy(m, &mb)) bt_die("model copy", DS_ERR_NOMEM, "");
  bt_instance_model(mb, m, b);
  const int T = e->C * e->S;
  const size_t n3 = 3 * (size_t)m->nparticle, na = (size_t)m->nact;
  dsDataDef dd = ds_default_data_def();
  dd.max_substeps = T;
  dd.checkpoint_every = K;
  dsData* d;
  dsGrad* g;
  if (ds_data_create(mb, &dd, &d) || ds_grad_create(mb, &g)) bt_die("data", DS_ERR_NOMEM, "");
  for (int c = 0; c < e->C; c++) {
    if (na) memcpy(d->act, e->act + ((size_t)c * e->B + b) * na, na * sizeof(dsReal));
    memcpy(d->f_ext, e->fext + ((size_t)c * e->B + b) * n3, n3 * sizeof(dsReal));
    for (int j = 0; j < e->S; j++) {
      int rc = ds_step(mb, d);
      if (rc) bt_die("ds_step", rc, ds_data_last_error(d));
    }
  }
  dsReal* o = out;
  memcpy(o, d->x, n3 * sizeof(dsReal));
  memcpy(o + n3, d->v, n3 * sizeof(dsReal));
  o += 2 * n3;
  int rc = ds_backward_begin(mb, d);
  if (rc) bt_die("backward_begin", rc, ds_data_last_error(d));
  for (size_t k = 0; k < n3; k++) {
    d->adj_x[k] += e->wx[(size_t)b * n3 + k];
    d->adj_v[k] += e->wv[(size_t)b * n3 + k];
  }
  dsReal* aa = (dsReal*)calloc(na + 1, sizeof(dsReal));
  dsReal* af = (dsReal*)calloc(n3, sizeof(dsReal));
  for (int c = e->C - 1; c >= 0; c--) {
    dsReal* sa = o + (size_t)c * (na + n3);
    dsReal* sf = sa + na;
    for (size_t k = 0; k < na; k++) sa[k] = 0;
    for (size_t k = 0; k < n3; k++) sf[k] = 0;
    for (int j = 0; j < e->S; j++) {
      rc = ds_backward_step(mb, d, g, aa, af);
      if (rc) bt_die("backward_step", rc, ds_data_last_error(d));
      for (size_t k = 0; k < na; k++) sa[k] += aa[k];
      for (size_t k = 0; k < n3; k++) sf[k] += af[k];
    }
    if (c == 1)
      for (size_t k = 0; k < n3; k++) d->adj_x[k] += e->wmid[(size_t)b * n3 + k];
  }
  rc = ds_backward_finish(mb, d, g);
  if (rc) bt_die("backward_finish", rc, ds_data_last_error(d));
  o += (size_t)e->C * (na + n3);
  for (int k = 0; k < ds_param_count(); k++) {
    dsReal* p;
    int c;
    if (ds_grad_param(g, ds_param_name(k), &p, &c)) continue;
    if (c) memcpy(o, p, (size_t)c * sizeof(dsReal));
    o += c;
  }
  free(aa);
  free(af);
  ds_grad_free(g);
  ds_data_free(d);
  ds_model_free(mb);
}

/* The batched engine on dev, every instance, into out (B x bt_result_len). */
static inline int bt_run_batch(const dsModel* m, const btEpisode* e, int K, dsDevice dev, dsReal* out) {
  const int B = e->B, T = e->C * e->S;
  const size_t n3 = 3 * (size_t)m->nparticle, na = bt_nact(m), len = bt_result_len(m, e->C);
  dsBatchSimDef def = ds_default_batch_sim_def();
  def.batch = B;
  def.max_substeps = T;
  def.checkpoint_every = K;
  def.act_records = e->C;
  def.fext_records = e->C;
  def.device = dev;
  dsBatchSim* s;
  char err[512];
  int rc = bt_backend ? ds__bsim_create_on(m, &def, bt_backend, &s, err, sizeof err)
                      : ds_bsim_create(m, &def, &s, err, sizeof err);
  if (rc) bt_die("ds_bsim_create", rc, err);
  dsModel* mb;
  if (ds_model_copy(m, &mb)) bt_die("model copy", DS_ERR_NOMEM, "");
  for (int b = 0; b < B; b++) {
    bt_instance_model(mb, m, b);
    for (int k = 0; k < ds_param_count(); k++) {
      const char* name = ds_param_name(k);
      const dsReal* p;
      int n;
      if (ds_model_param(mb, name, &p, &n) || n == 0) continue;
      rc = ds_bsim_set_param(s, b, name, p, n);
      if (rc) bt_die("ds_bsim_set_param", rc, ds_bsim_last_error(s));
    }
    ds_model_free(mb);
    if (ds_model_copy(m, &mb)) bt_die("model copy", DS_ERR_NOMEM, "");
  }
  ds_model_free(mb);
  dsReal* x = (dsReal*)calloc((size_t)B * n3, sizeof(dsReal));
  dsReal* v = (dsReal*)calloc((size_t)B * n3, sizeof(dsReal));
  dsReal* aa = (dsReal*)calloc((size_t)B * na + 1, sizeof(dsReal));
  dsReal* af = (dsReal*)calloc((size_t)B * n3, sizeof(dsReal));
  for (int rep = 0; rep < bt_repeats && !rc; rep++) {
    rc = ds_bsim_zero_grad(s);
    if (rc) break;
    rc = ds_bsim_reset(s);
    for (int c = 0; c < e->C && !rc; c++) {
      if (na) rc = ds_bsim_set_act(s, e->act + (size_t)c * B * na);
      if (!rc) rc = ds_bsim_set_fext(s, e->fext + (size_t)c * B * n3);
      if (!rc) rc = ds_bsim_step(s, e->S, NULL);
    }
    if (rc) bt_die("batch forward", rc, ds_bsim_last_error(s));
    rc = ds_bsim_get_state(s, x, v);
    for (int b = 0; b < B; b++) {
      memcpy(out + b * len, x + b * n3, n3 * sizeof(dsReal));
      memcpy(out + b * len + n3, v + b * n3, n3 * sizeof(dsReal));
    }
    if (!rc) rc = ds_bsim_backward_begin(s, e->wx, e->wv);
    for (int c = e->C - 1; c >= 0 && !rc; c--) {
      rc = ds_bsim_backward_step(s, e->S, aa, af);
      for (int b = 0; b < B; b++) {
        dsReal* sa = out + b * len + 2 * n3 + (size_t)c * (na + n3);
        memcpy(sa, aa + b * na, na * sizeof(dsReal));
        memcpy(sa + na, af + b * n3, n3 * sizeof(dsReal));
      }
      if (!rc && c == 1) rc = ds_bsim_add_adjoint(s, e->wmid, NULL);
    }
    if (!rc) rc = ds_bsim_backward_finish(s);
  }
  if (rc) bt_die("batch backward", rc, ds_bsim_last_error(s));
  for (int b = 0; b < B; b++) {
    dsReal* o = out + b * len + 2 * n3 + (size_t)e->C * (na + n3);
    for (int k = 0; k < ds_param_count(); k++) {
      const dsReal* p;
      int n;
      if (ds_model_param(m, ds_param_name(k), &p, &n)) continue;
      rc = ds_bsim_get_grad(s, b, ds_param_name(k), o, n);
      if (rc) bt_die("ds_bsim_get_grad", rc, ds_bsim_last_error(s));
      o += n;
    }
  }
  free(x);
  free(v);
  free(aa);
  free(af);
  ds_bsim_free(s);
  return 0;
}

#endif

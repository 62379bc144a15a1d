/* The batched engine's driver (dsim/engine_batch.h): the memory layout and
 * plan, the per-instance model and gradient views, the tape (full or
 * checkpointed), the order of the stages of a substep and of its adjoint,
 * and the checkpoint recompute. It runs the same for every backend: a
 * backend (the device layer's table, base/backend.h: host or CUDA) only holds the memory, moves
 * it and runs one stage of engine/batch_body.h at a time.
 *
 * Where instance b's data sits (offsets of engine/batch_priv.h):
 *   parameters   R[o_param + b P ...]: every differentiable model array and
 *                the inverse masses, in DS_MODEL_ARRAYS order (P reals)
 *   gradient     R[o_grad + b P ...]: the same layout
 *   topology     shared reals and ints (indices, rest shapes, incidence)
 *   state at t   full tape: tape[t] (T + 1 states); otherwise cur[t % 2],
 *                and every K-th state also in tape[t / K]
 *   per-substep  slots, J, adjoints, scratch: one B x n block each
 * Activations and external forces are records (one per set call) that
 * substep t refers to by index, as the engine's tape does. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "base/internal.h"
#include "engine/batch_artic.h"
#include "engine/batch_implicit.h"
#include "engine/batch_priv.h"
#include "engine/engine_priv.h"


struct dsBatchSim {
  const dsModel* m;
  dsBatchSimDef def;
  dsBatchLayout L;
  dsBatchPlan plan;
  const dsBackend* be;
  void* ctx;
  dsReal* R;         /* backend: reals */
  int* I;            /* backend: ints */
  unsigned char* V;  /* backend: B dsModel views, then B dsGrad views */
  dsReal* hparam;    /* host copy of the parameter blocks (B x P) */
  dsModel* hview;    /* B views over hparam (validation of set_param) */
  int* act_rec;      /* per substep: activation record, -1: none (0) */
  int* fext_rec;     /* per substep: external-force record, -1: none (0) */
  int* hstatus;      /* B x 3 */
  dsBatchArtic* art; /* an articulated model's per-instance contexts, or NULL */
  dsBatchImplicit* imp; /* the implicit integrator's per-instance contexts, or NULL */
  int t, bt, act_n, fext_n, cur_act, cur_fext, seg_start, failed;
  dsErrBuf err, merr;
};

dsBatchSimDef ds_default_batch_sim_def(void) {
  dsBatchSimDef d;
  memset(&d, 0, sizeof d);
  d.batch = 1;
  d.checkpoint_every = 1;
  d.device = ds_device_cpu();
  return d;
}

/* ---- layout ---------------------------------------------------------------------- */
static size_t up8(size_t n) { return (n + 7) & ~(size_t)7; }

/* n reals at *top, 64-byte aligned; returns the offset */
static size_t take(size_t* top, double* dtop, size_t n) {
  size_t o = *top;
  *top += up8(n);
  *dtop += (double)n + 8;
  return o;
}

int ds__bsim_layout(const dsModel* m, const dsBatchSimDef* def, dsBatchLayout* L, char* err, size_t errlen) {
  if (!m || !def || !L) return ds__puterr(err, errlen, DS_ERR_INVALID, "batch: no model or definition");
  memset(L, 0, sizeof *L);
  if (def->batch < 1 || def->batch > (1 << 24))
    return ds__puterr(err, errlen, DS_ERR_RANGE, "batch %d: expected 1 .. %d instances", def->batch, 1 << 24);
  if (def->max_substeps < 0 || def->checkpoint_every < 0 || def->act_records < 0 || def->fext_records < 0)
    return ds__puterr(err, errlen, DS_ERR_RANGE,
                      "batch: max_substeps, checkpoint_every, act_records and fext_records must be >= 0");
  if (m->nbody > 0)
    return ds__puterr(err, errlen, DS_ERR_UNSUPPORTED,
                      "batch: the model has %d rigid bod%s; the batched engine (CPU and CUDA) does not run rigid "
                      "bodies yet: use the single-instance engine",
                      m->nbody, m->nbody == 1 ? "y" : "ies");
  if (m->artic && m->nact)
    return ds__puterr(err, errlen, DS_ERR_UNSUPPORTED,
                      "batch: the model has an articulation and %d activations; the batched engine takes the "
                      "articulation's actions as its activations (expected none of its own)",
                      m->nact);
  dsForceLayout FL;
  ds__force_layout(m, &FL);
  if (FL.nslot > (1 << 29)) return ds__puterr(err, errlen, DS_ERR_RANGE, "batch: %lld element slots", FL.nslot);
  const int B = def->batch, T = def->max_substeps;
  int K = def->checkpoint_every > 1 ? def->checkpoint_every : 1;
  if (K > T && T > 0) K = T;
  L->B = B;
  L->T = T;
  L->K = K;
  L->np = m->nparticle;
  L->nact = m->artic ? m->artic_nu : m->nact; /* an articulation's actions are its activations */
  L->nas = m->artic ? m->artic_nq + m->artic_nv : 0;
  L->imp = m->integrator == DS_INTEGRATOR_IMPLICIT;
  L->art_bytes = ds__batch_artic_bytes(m) + ds__batch_implicit_bytes(m);
  L->ntet = m->ntet;
  L->nslot = (int)FL.nslot;
  L->nscr = (int)FL.nscratch;
  L->n3 = 3 * (size_t)m->nparticle;
  L->s3 = 3 * (size_t)FL.nslot;
  if (T == 0) {
    L->nstate = 0;
    L->nseg = 0;
  } else if (K == 1) {
    L->nstate = T + 1;
  } else {
    L->nstate = T / K + 1;
    L->nseg = K + 1;
  }
  L->act_cap = L->nact == 0 ? 0 : T == 0 ? 1 : (def->act_records && def->act_records < T ? def->act_records : T);
  L->fext_cap = T == 0 ? 1 : (def->fext_records && def->fext_records < T ? def->fext_records : T);

  /* model arrays: shared reals, shared ints, or per instance */
  size_t rs = 0, is = 0, P = 0;
  const dsModel* m_ = m;
#define DS__PLACE(field, type, count, diff, name)                        \
  {                                                                      \
    const int f_ = DS__MF_##field;                                       \
    const size_t c_ = (size_t)(count);                                   \
    L->cnt[f_] = c_;                                                     \
    if (c_ == 0) {                                                       \
      L->where[f_] = DS__BL_NONE;                                        \
    } else if ((diff) || f_ == DS__MF_inv_mass) {                        \
      L->where[f_] = DS__BL_INSTANCE;                                    \
      L->off[f_] = P;                                                    \
      P += c_;                                                           \
    } else if (#type[0] == 'i') {                                        \
      L->where[f_] = DS__BL_SHARED_INT;                                  \
      L->off[f_] = is;                                                   \
      is += c_;                                                          \
    } else {                                                             \
      L->where[f_] = DS__BL_SHARED_REAL;                                 \
      L->off[f_] = rs;                                                   \
      rs += c_;                                                          \
    }                                                                    \
  }
  DS_MODEL_ARRAYS(DS__PLACE)
#undef DS__PLACE
  (void)m_;
  L->P = up8(P);

  /* reals; dtop follows top in double to refuse sizes that overflow */
  size_t top = 0;
  double dtop = 0;
  take(&top, &dtop, rs); /* shared reals at 0 */
  L->o_param = take(&top, &dtop, (size_t)B * L->P);
  L->o_grad = take(&top, &dtop, (size_t)B * L->P);
#define DS__BSIM_TAKE(name, copies, reals, when, kind)                      \
  for (int c_ = 0; c_ < (copies); c_++) {                                 \
    L->o_##name[c_] = 0;                                                  \
    if (when) {                                                           \
      dtop += (double)B * (double)(reals); /* before the size_t product */ \
      L->o_##name[c_] = take(&top, &dtop, (size_t)B * (reals));           \
    }                                                                     \
  }
  DS__BSIM_REALS(DS__BSIM_TAKE)
#undef DS__BSIM_TAKE
  L->nreal = top;
  if (dtop * sizeof(dsReal) > 4.0e18)
    return ds__puterr(err, errlen, DS_ERR_RANGE, "batch %d: the layout does not fit in memory (%.3g bytes)", B,
                      dtop * sizeof(dsReal));
  /* ints */
  L->o_bad = is;
  L->o_status = is + (size_t)B * (L->ntet + L->np);
  L->nint = L->o_status + 3 * (size_t)B;
  L->view_bytes = (size_t)B * (sizeof(dsModel) + sizeof(dsGrad));
  return 0;
}

static void plan_from_layout(const dsBatchLayout* L, dsBatchPlan* p) {
  memset(p, 0, sizeof *p);
  size_t rs = 0, is = 0;
  for (int f = 0; f < DS__MF_COUNT; f++) {
    if (L->where[f] == DS__BL_SHARED_REAL) rs += L->cnt[f];
    if (L->where[f] == DS__BL_SHARED_INT) is += L->cnt[f];
  }
  p->batch = L->B;
  p->nstate = L->nstate;
  p->nseg = L->nseg;
  p->param_reals = L->P;
  p->grad_reals = L->P;
  /* per instance, by the kind of each of the batch's arrays */
  size_t* kind_STATE = &p->state_reals;
  size_t* kind_TAPE = &p->tape_reals;
#define DS__BSIM_PLAN(name, copies, reals, when, kind) \
  if (when) *kind_##kind += (size_t)(copies) * (reals);
  DS__BSIM_REALS(DS__BSIM_PLAN)
#undef DS__BSIM_PLAN
  p->shared_bytes = rs * sizeof(dsReal) + is * sizeof(int);
  p->view_bytes = L->view_bytes;
  p->work_bytes = L->art_bytes;
  p->device_bytes = L->nreal * sizeof(dsReal) + L->nint * sizeof(int) + L->view_bytes + (size_t)L->B * L->art_bytes;
}

int ds_bsim_plan(const dsModel* m, const dsBatchSimDef* def, dsBatchPlan* plan, char* err, size_t errlen) {
  if (!plan) return ds__puterr(err, errlen, DS_ERR_INVALID, "batch plan: no output");
  dsBatchLayout L;
  int rc = ds__bsim_layout(m, def, &L, err, errlen);
  if (rc) return rc;
  plan_from_layout(&L, plan);
  return 0;
}

/* ---- views ------------------------------------------------------------------------ */
/* Pointer to field f for instance b: shared arrays from (rbase, ibase),
 * per-instance ones from pbase (instance b's parameter block). */
static void* field_ptr(const dsBatchLayout* L, int f, dsReal* rbase, int* ibase, dsReal* pbase) {
  switch (L->where[f]) {
    case DS__BL_SHARED_REAL: return rbase + L->off[f];
    case DS__BL_SHARED_INT: return ibase + L->off[f];
    case DS__BL_INSTANCE: return pbase + L->off[f];
    default: return NULL;
  }
}

static void make_view(const dsModel* m, const dsBatchLayout* L, dsModel* v, dsReal* rbase, int* ibase,
                      dsReal* pbase, void* errbuf) {
  *v = *m;
#define DS__VIEW(field, type, count, diff, name) v->field = (type*)field_ptr(L, DS__MF_##field, rbase, ibase, pbase);
  DS_MODEL_ARRAYS(DS__VIEW)
#undef DS__VIEW
  v->err_ = errbuf;
}

/* A host view: m's own shared arrays, instance arrays from pbase. */
static void make_host_view(const dsModel* m, const dsBatchLayout* L, dsModel* v, dsReal* pbase, void* errbuf) {
  *v = *m;
#define DS__HVIEW(field, type, count, diff, name) \
  if (L->where[DS__MF_##field] == DS__BL_INSTANCE) v->field = (type*)(void*)(pbase + L->off[DS__MF_##field]);
  DS_MODEL_ARRAYS(DS__HVIEW)
#undef DS__HVIEW
  v->err_ = errbuf;
}

static void make_grad_view(const dsBatchLayout* L, dsGrad* g, const dsModel* model, dsReal* gbase) {
  memset(g, 0, sizeof *g);
  g->model = model;
#define DS__GVIEW(field, type, count, diff, name) \
  DS__GRAD_IF_##diff(g->field = (dsReal*)field_ptr(L, DS__MF_##field, NULL, NULL, gbase);)
  DS_MODEL_ARRAYS(DS__GVIEW)
#undef DS__GVIEW
}

/* ---- create / free ------------------------------------------------------------------ */
void ds_bsim_free(dsBatchSim* s) {
  if (!s) return;
  if (s->be) {
    ds__batch_artic_free(s->art, s->be, s->ctx);
    s->be->release(s->ctx, s->R);
    s->be->release(s->ctx, s->I);
    s->be->release(s->ctx, s->V);
    s->be->close(s->ctx);
  }
  ds__free(s->hparam);
  ds__free(s->hview);
  ds__free(s->act_rec);
  ds__free(s->fext_rec);
  ds__free(s->hstatus);
  ds__batch_implicit_free(s->imp);
  ds__free(s);
}

static int be_fail(dsBatchSim* s, int rc, const char* what) {
  return ds__seterr(&s->err, rc ? rc : DS_ERR_CUDA, "batch (%s): %s failed: %s", s->be->name, what,
                    s->be->last_error(s->ctx));
}

/* What the CUDA backend does not run (its CPU backend does): 0 or the refusal. */
static int host_only(const dsBatchLayout* L, dsDevice dev, char* err, size_t errlen) {
  if (dev.kind != DS_DEVICE_CUDA) return 0;
  if (L->imp)
    return ds__puterr(err, errlen, DS_ERR_UNSUPPORTED,
                      "batch device cuda: the model uses the implicit integrator (physics.integrator implicit); the "
                      "CUDA backend of the batched engine does not run it yet (its CPU backend does): use device "
                      "cpu, or the semi-implicit integrator on cuda");
  return 0;
}

/* instance b's "artic.param" in backend memory (the CPU backend's is host memory) */
static double* artic_param_of(void* ctx, int b) {
  dsBatchSim* s = (dsBatchSim*)ctx;
  return (double*)(void*)(s->R + s->L.o_param + (size_t)b * s->L.P + s->L.off[DS__MF_artic_param]);
}

int ds_bsim_create(const dsModel* m, const dsBatchSimDef* def, dsBatchSim** out, char* err, size_t errlen) {
  if (!out) return ds__puterr(err, errlen, DS_ERR_INVALID, "batch: no output");
  *out = NULL;
  dsBatchSimDef d = def ? *def : ds_default_batch_sim_def();
  dsBatchLayout L;
  int rc = ds__bsim_layout(m, &d, &L, err, errlen);
  if (rc) return rc;
  if ((rc = host_only(&L, d.device, err, errlen))) return rc;
  rc = ds_device_check("batch device", d.device, err, errlen);
  if (rc) return rc;
  const dsBackend* be = ds__backend(d.device.kind);
  if (!be) return ds__puterr(err, errlen, DS_ERR_UNSUPPORTED, "batch device cuda: this dsim was built without CUDA");
  return ds__bsim_create_on(m, &d, be, out, err, errlen);
}

int ds__bsim_create_on(const dsModel* m, const dsBatchSimDef* def, const dsBackend* be, dsBatchSim** out,
                       char* err, size_t errlen) {
  if (!out || !def || !be) return ds__puterr(err, errlen, DS_ERR_INVALID, "batch: no output, definition or backend");
  *out = NULL;
  const dsBatchSimDef d = *def;
  dsBatchLayout L;
  int rc = ds__bsim_layout(m, &d, &L, err, errlen);
  if (rc) return rc;
  if ((rc = host_only(&L, d.device, err, errlen))) return rc;
  dsBatchSim* s = (dsBatchSim*)ds__calloc(1, sizeof *s);
  if (!s) return ds__puterr(err, errlen, DS_ERR_NOMEM, "batch: out of memory");
  s->m = m;
  s->def = d;
  s->L = L;
  plan_from_layout(&L, &s->plan);
  rc = be->open(d.device.index, &s->ctx, err, errlen);
  if (rc) {
    ds__free(s);
    return rc;
  }
  s->be = be;
  char dn[32], need[32], per[32], have[32];
  size_t avail = 0;
  rc = be->free_bytes(s->ctx, &avail);
  if (!rc && s->plan.device_bytes > avail) {
    const size_t pi = (s->plan.param_reals + s->plan.grad_reals + s->plan.state_reals + s->plan.tape_reals) *
                      sizeof(dsReal);
    rc = ds__puterr(err, errlen, DS_ERR_NOMEM,
                    "batch of %d on %s needs %s (%s per instance) but %s is available; lower the batch, "
                    "max_substeps or the records, or checkpoint (checkpoint_every)",
                    L.B, ds_device_name(d.device, dn, sizeof dn), ds_format_size(s->plan.device_bytes, need, sizeof need),
                    ds_format_size(pi, per, sizeof per), ds_format_size(avail, have, sizeof have));
    ds_bsim_free(s);
    return rc;
  }
  const int B = L.B;
  s->R = (dsReal*)be->alloc(s->ctx, L.nreal * sizeof(dsReal));
  s->I = (int*)be->alloc(s->ctx, L.nint * sizeof(int));
  s->V = (unsigned char*)be->alloc(s->ctx, L.view_bytes);
  s->hparam = (dsReal*)ds__calloc((size_t)B * L.P + 1, sizeof(dsReal));
  s->hview = (dsModel*)ds__calloc((size_t)B, sizeof(dsModel));
  s->act_rec = (int*)ds__calloc((size_t)L.T + 1, sizeof(int));
  s->fext_rec = (int*)ds__calloc((size_t)L.T + 1, sizeof(int));
  s->hstatus = (int*)ds__calloc(3 * (size_t)B, sizeof(int));
  dsModel* dv = (dsModel*)ds__calloc((size_t)B, sizeof(dsModel));
  dsGrad* gv = (dsGrad*)ds__calloc((size_t)B, sizeof(dsGrad));
  if (s->R && m->artic) s->art = ds__batch_artic_create(m, B, artic_param_of, s, be, s->ctx);
  if (L.imp) s->imp = ds__batch_implicit_create(m, B);
  if (!s->R || !s->I || !s->V || !s->hparam || !s->hview || !s->act_rec || !s->fext_rec || !s->hstatus || !dv ||
      !gv || (m->artic && !s->art) || (L.imp && !s->imp)) {
    ds__free(dv);
    ds__free(gv);
    rc = ds__puterr(err, errlen, DS_ERR_NOMEM, "batch of %d on %s: cannot allocate %s", B,
                    ds_device_name(d.device, dn, sizeof dn), ds_format_size(s->plan.device_bytes, need, sizeof need));
    ds_bsim_free(s);
    return rc;
  }
  /* shared arrays up, every instance's parameters from m */
  rc = 0;
  const dsModel* m_ = m;
#define DS__UP(field, type, count, diff, name)                                                              \
  if (!rc) {                                                                                                \
    const int f_ = DS__MF_##field;                                                                          \
    const size_t c_ = (size_t)(count);                                                                      \
    if (L.where[f_] == DS__BL_SHARED_REAL) rc = be->put(s->ctx, s->R + L.off[f_], m->field, c_ * sizeof(type)); \
    if (L.where[f_] == DS__BL_SHARED_INT) rc = be->put(s->ctx, s->I + L.off[f_], m->field, c_ * sizeof(type));  \
    if (L.where[f_] == DS__BL_INSTANCE) memcpy(s->hparam + L.off[f_], m->field, c_ * sizeof(type));           \
  }
  DS_MODEL_ARRAYS(DS__UP)
#undef DS__UP
  (void)m_;
  for (int b = 1; b < B; b++) memcpy(s->hparam + (size_t)b * L.P, s->hparam, L.P * sizeof(dsReal));
  if (!rc) rc = be->put(s->ctx, s->R + L.o_param, s->hparam, (size_t)B * L.P * sizeof(dsReal));
  /* views: host (over hparam) and backend (over R, I) */
  dsModel* dmv = (dsModel*)s->V;
  for (int b = 0; b < B; b++) {
    make_host_view(m, &L, s->hview + b, s->hparam + (size_t)b * L.P, &s->merr);
    make_view(m, &L, dv + b, s->R, s->I, s->R + L.o_param + (size_t)b * L.P, NULL);
    make_grad_view(&L, gv + b, dmv + b, s->R + L.o_grad + (size_t)b * L.P);
    if (s->art) { /* instance b's articulation: its own parameters (engine/batch_artic.h) */
      s->hview[b].artic = s->art->host + b;
      dv[b].artic = s->art->dev + b;
    }
  }
  if (!rc) rc = be->put(s->ctx, s->V, dv, (size_t)B * sizeof(dsModel));
  if (!rc) rc = be->put(s->ctx, s->V + (size_t)B * sizeof(dsModel), gv, (size_t)B * sizeof(dsGrad));
  ds__free(dv);
  ds__free(gv);
  if (rc) {
    rc = ds__puterr(err, errlen, rc, "batch on %s: upload failed: %s", ds_device_name(d.device, dn, sizeof dn),
                    be->last_error(s->ctx));
    ds_bsim_free(s);
    return rc;
  }
  rc = ds_bsim_reset(s);
  if (rc) {
    ds__puterr(err, errlen, rc, "%s", ds__errmsg(&s->err));
    ds_bsim_free(s);
    return rc;
  }
  *out = s;
  return 0;
}

const char* ds_bsim_last_error(const dsBatchSim* s) { return s ? ds__errmsg(&s->err) : ""; }
int ds_bsim_batch(const dsBatchSim* s) { return s ? s->L.B : 0; }
dsDevice ds_bsim_device(const dsBatchSim* s) { return s ? s->def.device : ds_device_cpu(); }
int ds_bsim_time(const dsBatchSim* s) { return s ? s->t : 0; }
const dsBatchPlan* ds_bsim_get_plan(const dsBatchSim* s) { return s ? &s->plan : NULL; }

/* ---- stage arguments and state locations ------------------------------------------- */
static dsBatchArgs base_args(const dsBatchSim* s) {
  const dsBatchLayout* L = &s->L;
  dsBatchArgs a;
  memset(&a, 0, sizeof a);
  a.mv = (const dsModel*)s->V;
  a.gv = (dsGrad*)(s->V + (size_t)L->B * sizeof(dsModel));
  a.B = L->B;
  a.np = L->np;
  a.nslot = L->nslot;
  a.nact = L->nact;
  a.ntet = L->ntet;
  dsForceLayout FL;
  ds__force_layout(s->m, &FL);
  for (int k = 0; k < DS__NFORCE; k++) {
    a.count[k] = FL.count[k];
    a.slot[k] = FL.slot[k];
    a.actb[k] = FL.act[k];
    a.scr[k] = (int)FL.scratch[k];
  }
  a.nscr = L->nscr;
  a.nas = L->nas;
  a.ascr = s->art ? s->art->ascr : NULL;
  a.imp = s->imp;
  return a;
}

static size_t bn3(const dsBatchSim* s) { return (size_t)s->L.B * s->L.n3; }

/* x and v of the current state (substep s->t) */
static void cur_state(const dsBatchSim* s, dsReal** x, dsReal** v) {
  const dsBatchLayout* L = &s->L;
  if (L->T > 0 && L->K == 1) {
    *x = s->R + L->o_tape[0] + (size_t)s->t * bn3(s);
    *v = s->R + L->o_tape[1] + (size_t)s->t * bn3(s);
  } else {
    *x = s->R + L->o_cur[2 * (s->t % 2)];
    *v = s->R + L->o_cur[2 * (s->t % 2) + 1];
  }
}

/* An articulation's state at substep t where cur_state keeps it (t = the
 * current substep, or the next one), and its checkpoint slot (NULL when t
 * is not a checkpoint of a checkpointed tape). */
static dsReal* art_state(const dsBatchSim* s, int t) {
  const dsBatchLayout* L = &s->L;
  const size_t n = (size_t)L->B * L->nas;
  if (L->T > 0 && L->K == 1) return s->R + L->o_atape[0] + (size_t)t * n;
  return s->R + L->o_acur[t % 2];
}
static dsReal* art_ckpt(const dsBatchSim* s, int t) {
  const dsBatchLayout* L = &s->L;
  if (!(L->T > 0 && L->K > 1 && t % L->K == 0)) return NULL;
  return s->R + L->o_atape[0] + (size_t)(t / L->K) * L->B * L->nas;
}

/* ---- launches (dsBatchLaunch) ---------------------------------------------------- */
static void launch_init(dsBatchLaunch* l, int B) {
  l->nparts = 0;
  l->B = B;
}

/* stage as a new part of l; NULL (nothing added) when it has no work */
static dsBatchPart* launch_part(dsBatchLaunch* l, int stage, const dsBatchArgs* a) {
  const int count = ds__bstage_count(a, stage);
  if (count <= 0) return NULL;
  dsBatchPart* p = l->part + l->nparts++;
  p->count = count;
  p->nops = 1;
  p->stage[0] = stage;
  p->a[0] = *a;
  return p;
}

/* stage after p's stages, by the same (index, instance) threads */
static void launch_chain(dsBatchPart* p, int stage, const dsBatchArgs* a) {
  p->stage[p->nops] = stage;
  p->a[p->nops++] = *a;
}

static int launch_send(dsBatchSim* s, const dsBatchLaunch* l) {
  if (l->nparts == 0) return 0;
  int rc = s->be->run_batch(s->ctx, l);
  return rc ? be_fail(s, rc, "a stage launch") : 0;
}

/* One stage, alone in its launch. */
static int run(dsBatchSim* s, int stage, const dsBatchArgs* a) {
  dsBatchLaunch l;
  launch_init(&l, s->L.B);
  launch_part(&l, stage, a);
  return launch_send(s, &l);
}

static const dsReal* act_of(const dsBatchSim* s, int rec) {
  return rec >= 0 && s->L.nact ? s->R + s->L.o_act[0] + (size_t)rec * s->L.B * s->L.nact : NULL;
}
static const dsReal* fext_of(const dsBatchSim* s, int rec) {
  return rec >= 0 ? s->R + s->L.o_fext[0] + (size_t)rec * bn3(s) : NULL;
}

/* One forward substep for every instance: the element stages in the force
 * list's order, then the gather (stages without work are skipped). a has x,
 * v, xo, vo (, xc, vc, bad) set. */
static int forward(dsBatchSim* s, dsBatchArgs* a) {
  if (s->L.nas) return run(s, DS__BS_ARTIC_FWD, a); /* a has as, aso (, asc) set too */
  a->ef = s->R + s->L.o_ef[0];
  a->J = s->R + s->L.o_J[0];
  if (s->L.imp) return run(s, DS__BS_IMPLICIT_FWD, a); /* one Newton solve per instance */
  for (int stage = DS__BS_ELEM_FWD0; stage <= DS__BS_GATHER_FWD; stage++) {
    int rc = run(s, stage, a);
    if (rc) return rc;
  }
  return 0;
}

/* ---- forward API ------------------------------------------------------------------- */
int ds_bsim_reset(dsBatchSim* s) {
  if (!s) return DS_ERR_INVALID;
  const dsBatchLayout* L = &s->L;
  ds__clearerr(&s->err);
  s->t = 0;
  s->bt = -1;
  s->act_n = s->fext_n = 0;
  s->cur_act = s->cur_fext = -1;
  s->seg_start = -1;
  s->failed = 0;
  memset(s->hstatus, 0, 3 * (size_t)L->B * sizeof(int));
  ds__batch_implicit_clear(s->imp, -1, 0);
  int rc = s->be->zero(s->ctx, s->I + L->o_bad, (L->nint - L->o_bad) * sizeof(int));
  if (rc) return be_fail(s, rc, "clearing the failure flags");
  dsBatchArgs a = base_args(s);
  cur_state(s, &a.xo, &a.vo);
  if (L->T > 0 && L->K > 1) {
    a.xc = s->R + L->o_tape[0];
    a.vc = s->R + L->o_tape[1];
  }
  if (L->nas) {
    a.aso = art_state(s, 0);
    a.asc = art_ckpt(s, 0);
    a.t = -1; /* every instance, from its initial state */
    return run(s, DS__BS_ARTIC_RESET, &a);
  }
  return run(s, DS__BS_RESET, &a);
}

/* ds_bsim_rewind; as: an articulation's state given (B x nas), or NULL */
static int rewind_to(dsBatchSim* s, int t, const dsReal* x, const dsReal* v, const dsReal* as) {
  if (!s) return DS_ERR_INVALID;
  const dsBatchLayout* L = &s->L;
  if (t < 0 || t > s->t)
    return ds__seterr(&s->err, DS_ERR_RANGE, "batch: rewind to substep %d: outside [0, %d]", t, s->t);
  if (as) x = v = as; /* a state is given (the vertices follow it) */
  if (t != s->t && L->T == 0 && (!x || !v))
    return ds__seterr(&s->err, DS_ERR_STATE, "batch: rewind to substep %d: no tape (max_substeps 0): a state must be given", t);
  const int ck = L->T > 0 && L->K > 1;
  if (t != s->t && ck && t % L->K != 0 && (!x || !v))
    return ds__seterr(&s->err, DS_ERR_STATE,
                      "batch: rewind to substep %d: between checkpoints (every %d) a state must be given", t, L->K);
  if (L->nas && !as && (x || v))
    return ds__seterr(&s->err, DS_ERR_UNSUPPORTED,
                      "batch: rewind to substep %d: the model has an articulation, whose state is not the "
                      "vertices' positions and velocities: give its state (ds_bsim_rewind_artic)",
                      t);
  if (as) x = v = NULL;
  const size_t n = bn3(s), bytes = n * sizeof(dsReal);
  int rc = 0;
  if (t != s->t && ck && t % L->K == 0 && L->nas) {
    rc = s->be->copy(s->ctx, art_state(s, t), art_ckpt(s, t), (size_t)L->B * L->nas * sizeof(dsReal));
    if (rc) return be_fail(s, rc, "loading a checkpoint");
  }
  if (t != s->t && ck && t % L->K == 0) { /* the current buffers from the checkpoint */
    rc = s->be->copy(s->ctx, s->R + L->o_cur[2 * (t % 2)], s->R + L->o_tape[0] + (size_t)(t / L->K) * n, bytes);
    if (!rc) rc = s->be->copy(s->ctx, s->R + L->o_cur[2 * (t % 2) + 1], s->R + L->o_tape[1] + (size_t)(t / L->K) * n, bytes);
    if (rc) return be_fail(s, rc, "loading a checkpoint");
  }
  s->t = t;
  s->bt = -1;
  s->seg_start = -1;
  s->failed = 0;
  if (L->T > 0) {
    s->act_n = t > 0 ? s->act_rec[t - 1] + 1 : 0;
    s->fext_n = t > 0 ? s->fext_rec[t - 1] + 1 : 0;
    s->cur_act = t > 0 ? s->act_rec[t - 1] : -1;
    s->cur_fext = t > 0 ? s->fext_rec[t - 1] : -1;
  }
  memset(s->hstatus, 0, 3 * (size_t)L->B * sizeof(int));
  ds__batch_implicit_clear(s->imp, -1, 0);
  rc = s->be->zero(s->ctx, s->I + L->o_bad, (L->nint - L->o_bad) * sizeof(int));
  if (rc) return be_fail(s, rc, "clearing the failure flags");
  dsReal *cx, *cv;
  cur_state(s, &cx, &cv);
  if (as) { /* the articulation's state at t (and its checkpoint), the vertices posed from it */
    const size_t nab = (size_t)L->B * L->nas * sizeof(dsReal);
    dsBatchArgs a = base_args(s);
    a.as = art_state(s, t);
    a.xo = cx;
    a.vo = cv;
    if (ck && t % L->K == 0) {
      a.asc = art_ckpt(s, t);
      a.xc = s->R + L->o_tape[0] + (size_t)(t / L->K) * n;
      a.vc = s->R + L->o_tape[1] + (size_t)(t / L->K) * n;
    }
    a.aso = (dsReal*)a.as;
    a.t = -1; /* every instance */
    rc = s->be->put(s->ctx, (dsReal*)a.as, as, nab);
    if (rc) return be_fail(s, rc, "uploading the state");
    return run(s, DS__BS_ARTIC_RESET, &a);
  }
  if (x) rc = s->be->put(s->ctx, cx, x, bytes);
  if (!rc && v) rc = s->be->put(s->ctx, cv, v, bytes);
  if (!rc && ck && t % L->K == 0) { /* its checkpoint */
    if (x) rc = s->be->put(s->ctx, s->R + L->o_tape[0] + (size_t)(t / L->K) * n, x, bytes);
    if (!rc && v) rc = s->be->put(s->ctx, s->R + L->o_tape[1] + (size_t)(t / L->K) * n, v, bytes);
  }
  return rc ? be_fail(s, rc, "uploading the state") : 0;
}

int ds_bsim_rewind(dsBatchSim* s, int t, const dsReal* x, const dsReal* v) { return rewind_to(s, t, x, v, NULL); }

int ds_bsim_rewind_artic(dsBatchSim* s, int t, const dsReal* state) {
  if (!s) return DS_ERR_INVALID;
  if (!s->L.nas) return ds__seterr(&s->err, DS_ERR_STATE, "batch: the model has no articulation");
  return rewind_to(s, t, NULL, NULL, state);
}

int ds_bsim_set_artic_instance(dsBatchSim* s, int b, const dsReal* state) {
  if (!s || !state) return DS_ERR_INVALID;
  const dsBatchLayout* L = &s->L;
  if (!L->nas) return ds__seterr(&s->err, DS_ERR_STATE, "batch: the model has no articulation");
  if (b < 0 || b >= L->B) return ds__seterr(&s->err, DS_ERR_RANGE, "batch: instance %d: expected 0 .. %d", b, L->B - 1);
  if (L->T > 0)
    return ds__seterr(&s->err, DS_ERR_STATE,
                      "batch: instance %d: one instance's state can only be set without a tape (max_substeps 0)", b);
  dsBatchArgs a = base_args(s);
  dsReal *cx, *cv;
  cur_state(s, &cx, &cv);
  a.as = art_state(s, s->t);
  a.aso = (dsReal*)a.as;
  a.xo = cx;
  a.vo = cv;
  a.t = b; /* this instance only */
  const size_t nb = (size_t)L->ntet + (size_t)L->np;
  int rc = s->be->put(s->ctx, (dsReal*)a.as + (size_t)b * L->nas, state, (size_t)L->nas * sizeof(dsReal));
  if (!rc) rc = s->be->zero(s->ctx, s->I + L->o_bad + (size_t)b * nb, nb * sizeof(int));
  if (rc) return be_fail(s, rc, "uploading an instance's state");
  memset(s->hstatus + 3 * (size_t)b, 0, 3 * sizeof(int));
  return run(s, DS__BS_ARTIC_RESET, &a);
}

int ds_bsim_set_state(dsBatchSim* s, const dsReal* x, const dsReal* v) {
  if (!s) return DS_ERR_INVALID;
  if (s->t != 0) return ds__seterr(&s->err, DS_ERR_STATE, "batch: state can only be set at substep 0 (now %d)", s->t);
  return ds_bsim_rewind(s, 0, x, v);
}

/* The next record of an act/fext tape (the only one without a tape). */
static int next_record(dsBatchSim* s, int* n, int cap, const char* what) {
  if (s->L.T == 0) return 0;
  if (*n >= cap)
    return ds__seterr(&s->err, DS_ERR_RANGE,
                      "batch: substep %d: %s tape full (%d records; raise %s_records in dsBatchSimDef)", s->t, what,
                      cap, what[0] == 'a' ? "act" : "fext");
  return (*n)++;
}

int ds_bsim_set_act(dsBatchSim* s, const dsReal* act) {
  if (!s || !act) return DS_ERR_INVALID;
  if (s->L.nact == 0) return 0;
  int r = next_record(s, &s->act_n, s->L.act_cap, "activation");
  if (r < 0) return r;
  int rc = s->be->put(s->ctx, s->R + s->L.o_act[0] + (size_t)r * s->L.B * s->L.nact, act,
                      (size_t)s->L.B * s->L.nact * sizeof(dsReal));
  if (rc) return be_fail(s, rc, "uploading activations");
  s->cur_act = r;
  return 0;
}

int ds_bsim_set_fext(dsBatchSim* s, const dsReal* fext) {
  if (!s) return DS_ERR_INVALID;
  if (!fext) {
    s->cur_fext = -1;
    return 0;
  }
  int r = next_record(s, &s->fext_n, s->L.fext_cap, "external-force");
  if (r < 0) return r;
  int rc = s->be->put(s->ctx, s->R + s->L.o_fext[0] + (size_t)r * bn3(s), fext, bn3(s) * sizeof(dsReal));
  if (rc) return be_fail(s, rc, "uploading external forces");
  s->cur_fext = r;
  return 0;
}

/* Reads the per-instance failures into hstatus; returns the first failed
 * instance's code with its message, or 0. */
static int check(dsBatchSim* s, int* status) {
  const dsBatchLayout* L = &s->L;
  dsBatchArgs a = base_args(s);
  a.bad = s->I + L->o_bad;
  a.status = s->I + L->o_status;
  int rc = run(s, DS__BS_CHECK, &a);
  if (rc) return rc;
  rc = s->be->get(s->ctx, s->hstatus, s->I + L->o_status, 3 * (size_t)L->B * sizeof(int));
  if (rc) return be_fail(s, rc, "reading the status");
  int first = 0;
  for (int b = 0; b < L->B; b++) {
    int* st = s->hstatus + 3 * (size_t)b;
    /* a failed Newton solve (host memory: the CPU backend only), unless a
       flag of an earlier substep came first; no element to name */
    const int nf = s->imp ? s->imp->fail[b] : -1;
    if (nf >= 0 && (st[0] == 0 || nf <= st[1])) {
      st[0] = DS_ERR_DIVERGED;
      st[1] = nf;
      st[2] = -1;
    }
    if (status) status[b] = st[0];
    if (st[0] && !first) {
      first = st[0];
      if (st[2] == -2)
        ds__seterr(&s->err, st[0],
                   "instance %d: substep %d: the articulation's step failed (its mass matrix is not positive "
                   "definite)",
                   b, st[1]);
      else if (st[2] < 0) /* the solver's own message: substep, iterations, residual */
        ds__seterr(&s->err, st[0], "instance %d: %s", b, ds__errmsg(&s->imp->eb[b]));
      else if (st[0] == DS_ERR_INVERTED)
        ds__seterr(&s->err, st[0], "instance %d: substep %d: tet %d inverted (J <= 0)", b, st[1], st[2]);
      else
        ds__seterr(&s->err, st[0], "instance %d: substep %d: particle %d position or velocity is not finite", b,
                   st[1], st[2]);
    }
  }
  s->failed = first != 0;
  return first;
}

int ds_bsim_step(dsBatchSim* s, int nsub, int* status) {
  if (!s || nsub < 0) return DS_ERR_INVALID;
  const dsBatchLayout* L = &s->L;
  if (L->T > 0 && s->t + nsub > L->T)
    return ds__seterr(&s->err, DS_ERR_STATE, "batch: substep %d: %d more substeps would overflow the tape (max_substeps %d)",
                      s->t, nsub, L->T);
  s->bt = -1;
  s->seg_start = -1;
  const size_t n = bn3(s);
  for (int j = 0; j < nsub; j++) {
    const int t = s->t;
    dsBatchArgs a = base_args(s);
    a.t = t;
    a.act = act_of(s, s->cur_act);
    a.fext = fext_of(s, s->cur_fext);
    a.bad = s->I + L->o_bad;
    cur_state(s, (dsReal**)&a.x, (dsReal**)&a.v);
    if (L->T > 0 && L->K == 1) {
      a.xo = (dsReal*)a.x + n;
      a.vo = (dsReal*)a.v + n;
    } else {
      a.xo = s->R + L->o_cur[2 * ((t + 1) % 2)];
      a.vo = s->R + L->o_cur[2 * ((t + 1) % 2) + 1];
      if (L->T > 0 && (t + 1) % L->K == 0) {
        a.xc = s->R + L->o_tape[0] + (size_t)((t + 1) / L->K) * n;
        a.vc = s->R + L->o_tape[1] + (size_t)((t + 1) / L->K) * n;
      }
    }
    if (L->nas) {
      a.as = art_state(s, t);
      a.aso = art_state(s, t + 1);
      a.asc = art_ckpt(s, t + 1);
    }
    if (L->T > 0) {
      s->act_rec[t] = s->cur_act;
      s->fext_rec[t] = s->cur_fext;
    }
    int rc = forward(s, &a);
    if (rc) return rc;
    s->t = t + 1;
  }
  return check(s, status);
}

int ds_bsim_get_state(const dsBatchSim* s, dsReal* x, dsReal* v) {
  if (!s) return DS_ERR_INVALID;
  dsReal *cx, *cv;
  cur_state(s, &cx, &cv);
  int rc = 0;
  if (x) rc = s->be->get(s->ctx, x, cx, bn3(s) * sizeof(dsReal));
  if (!rc && v) rc = s->be->get(s->ctx, v, cv, bn3(s) * sizeof(dsReal));
  return rc ? be_fail((dsBatchSim*)s, rc, "reading the state") : 0;
}

int ds_bsim_get_artic_state(const dsBatchSim* s, dsReal* state) {
  if (!s || !state) return DS_ERR_INVALID;
  if (!s->L.nas) return ds__seterr((dsErrBuf*)&s->err, DS_ERR_STATE, "batch: the model has no articulation");
  int rc = s->be->get(s->ctx, state, art_state(s, s->t), (size_t)s->L.B * s->L.nas * sizeof(dsReal));
  return rc ? be_fail((dsBatchSim*)s, rc, "reading the articulation's state") : 0;
}

/* ---- parameters ------------------------------------------------------------------- */
static int instance_range(dsBatchSim* s, int b, int* b0, int* b1) {
  if (b < -1 || b >= s->L.B)
    return ds__seterr(&s->err, DS_ERR_RANGE, "batch: instance %d: expected -1 (all) or 0 .. %d", b, s->L.B - 1);
  *b0 = b < 0 ? 0 : b;
  *b1 = b < 0 ? s->L.B : b + 1;
  return 0;
}

int ds_bsim_set_param(dsBatchSim* s, int b, const char* name, const dsReal* values, int count) {
  if (!s || !name || !values) return DS_ERR_INVALID;
  int b0 = 0, b1 = 0, rc = instance_range(s, b, &b0, &b1);
  if (rc) return rc;
  if (s->t != 0)
    return ds__seterr(&s->err, DS_ERR_STATE, "batch: parameters can only be set between episodes (now substep %d)",
                      s->t);
  for (int k = b0; k < b1; k++) {
    rc = ds_model_set_param(s->hview + k, name, values, count);
    if (rc) return ds__seterr(&s->err, rc, "batch: instance %d: %s", k, ds__errmsg(&s->merr));
    rc = s->be->put(s->ctx, s->R + s->L.o_param + (size_t)k * s->L.P, s->hparam + (size_t)k * s->L.P,
                    s->L.P * sizeof(dsReal));
    if (rc) return be_fail(s, rc, "uploading parameters");
  }
  /* a new initial state shows at once (as after ds_model_set_param + reset) */
  return ds_bsim_reset(s);
}

int ds_bsim_load_params(dsBatchSim* s, int b, const dsModel* m) {
  if (!s || !m) return DS_ERR_INVALID;
  if (b < 0 || b >= s->L.B)
    return ds__seterr(&s->err, DS_ERR_RANGE, "batch: instance %d: expected 0 .. %d", b, s->L.B - 1);
  const dsModel* t = s->m;
  if (m->nparticle != t->nparticle || m->nspring != t->nspring || m->ntri != t->ntri || m->nbend != t->nbend ||
      m->ntet != t->ntet || m->nface != t->nface || m->nact != t->nact || m->nbody != t->nbody)
    return ds__seterr(&s->err, DS_ERR_INVALID,
                      "batch: instance %d: the model's counts differ from the batch's (particles %d/%d, springs "
                      "%d/%d, tris %d/%d, bends %d/%d, tets %d/%d, faces %d/%d)",
                      b, m->nparticle, t->nparticle, m->nspring, t->nspring, m->ntri, t->ntri, m->nbend, t->nbend,
                      m->ntet, t->ntet, m->nface, t->nface);
  if (s->t != 0 && s->L.T > 0)
    return ds__seterr(&s->err, DS_ERR_STATE,
                      "batch: parameters can only be set between episodes (now substep %d of a taped batch)", s->t);
  dsReal* blk = s->hparam + (size_t)b * s->L.P;
  const dsModel* m_ = m;
#define DS__LOAD(field, type, count, diff, name)                                             \
  if (s->L.where[DS__MF_##field] == DS__BL_INSTANCE)                                         \
    memcpy(blk + s->L.off[DS__MF_##field], m->field, (size_t)(count) * sizeof(type));
  DS_MODEL_ARRAYS(DS__LOAD)
#undef DS__LOAD
  (void)m_;
  if (s->art) /* the host view's articulation checks the next set_param against these */
    for (int k = 0; k < s->art->nparam; k++) s->art->host[b].param[k] = (double)m->artic_param[k];
  int rc = s->be->put(s->ctx, s->R + s->L.o_param + (size_t)b * s->L.P, blk, s->L.P * sizeof(dsReal));
  return rc ? be_fail(s, rc, "uploading parameters") : 0;
}

int ds_bsim_set_instance(dsBatchSim* s, int b, const dsReal* x, const dsReal* v) {
  if (!s) return DS_ERR_INVALID;
  const dsBatchLayout* L = &s->L;
  if (b < 0 || b >= L->B) return ds__seterr(&s->err, DS_ERR_RANGE, "batch: instance %d: expected 0 .. %d", b, L->B - 1);
  if (L->T > 0)
    return ds__seterr(&s->err, DS_ERR_STATE,
                      "batch: instance %d: one instance's state can only be set without a tape (max_substeps 0)", b);
  if (L->nas)
    return ds__seterr(&s->err, DS_ERR_UNSUPPORTED,
                      "batch: instance %d: the model has an articulation, whose state is not the vertices' "
                      "positions and velocities",
                      b);
  const size_t n3 = 3 * (size_t)L->np;
  dsReal *cx, *cv;
  cur_state(s, &cx, &cv);
  int rc = 0;
  if (x) rc = s->be->put(s->ctx, cx + (size_t)b * n3, x, n3 * sizeof(dsReal));
  if (!rc && v) rc = s->be->put(s->ctx, cv + (size_t)b * n3, v, n3 * sizeof(dsReal));
  const size_t nb = (size_t)L->ntet + (size_t)L->np;
  if (!rc) rc = s->be->zero(s->ctx, s->I + L->o_bad + (size_t)b * nb, nb * sizeof(int));
  if (rc) return be_fail(s, rc, "uploading an instance's state");
  memset(s->hstatus + 3 * (size_t)b, 0, 3 * sizeof(int));
  ds__batch_implicit_clear(s->imp, b, 0);
  return 0;
}

int ds_bsim_failure(const dsBatchSim* s, int b, int* substep, int* element) {
  if (!s || b < 0 || b >= s->L.B) return DS_ERR_INVALID;
  const int* st = s->hstatus + 3 * (size_t)b;
  if (substep) *substep = st[0] ? st[1] : -1;
  if (element) *element = st[0] ? st[2] : -1;
  return st[0];
}

/* Offset of a differentiable parameter in an instance block, and its count. */
static int param_off(dsBatchSim* s, const char* name, size_t* off, int* count) {
  /* an articulation's parameters by their own names first (as ds_model_param, ds_grad_param and
     ds_model_set_param): its "contact.ke" is the one its contact uses; their cells of "artic.param" */
  const int ai = s->m->artic ? ds_artic_param_index(s->m->artic, name) : -1;
  if (ai >= 0) {
    *off = s->L.off[DS__MF_artic_param] + (size_t)ai;
    *count = 1;
    return 0;
  }
#define DS__FIND(field, type, count_, diff, pname)                                       \
  if ((diff) && strcmp(name, pname) == 0) {                                              \
    *off = s->L.off[DS__MF_##field];                                                     \
    *count = (int)s->L.cnt[DS__MF_##field];                                              \
    return 0;                                                                            \
  }
  DS_MODEL_ARRAYS(DS__FIND)
#undef DS__FIND
  return ds__seterr(&s->err, DS_ERR_NOTFOUND, "batch: \"%s\" is not a differentiable parameter", name);
}

static int read_block(const dsBatchSim* cs, int b, const char* name, dsReal* values, int count, int grad) {
  dsBatchSim* s = (dsBatchSim*)cs;
  if (!s || !name || !values) return DS_ERR_INVALID;
  if (b < 0 || b >= s->L.B)
    return ds__seterr(&s->err, DS_ERR_RANGE, "batch: instance %d: expected 0 .. %d", b, s->L.B - 1);
  size_t off;
  int n, rc = param_off(s, name, &off, &n);
  if (rc) return rc;
  if (count != n) return ds__seterr(&s->err, DS_ERR_INVALID, "batch: \"%s\": room for %d values, %d needed", name, count, n);
  if (n == 0) return 0;
  if (!grad) {
    memcpy(values, s->hparam + (size_t)b * s->L.P + off, (size_t)n * sizeof(dsReal));
    return 0;
  }
  rc = s->be->get(s->ctx, values, s->R + s->L.o_grad + (size_t)b * s->L.P + off, (size_t)n * sizeof(dsReal));
  return rc ? be_fail(s, rc, "reading a gradient") : 0;
}

int ds_bsim_get_param(const dsBatchSim* s, int b, const char* name, dsReal* values, int count) {
  return read_block(s, b, name, values, count, 0);
}

int ds_bsim_get_grad(const dsBatchSim* s, int b, const char* name, dsReal* values, int count) {
  return read_block(s, b, name, values, count, 1);
}

int ds_bsim_zero_grad(dsBatchSim* s) {
  if (!s) return DS_ERR_INVALID;
  int rc = s->be->zero(s->ctx, s->R + s->L.o_grad, (size_t)s->L.B * s->L.P * sizeof(dsReal));
  return rc ? be_fail(s, rc, "clearing the gradient") : 0;
}

/* ---- backward ----------------------------------------------------------------------- */
int ds_bsim_add_adjoint(dsBatchSim* s, const dsReal* adj_x, const dsReal* adj_v) {
  if (!s) return DS_ERR_INVALID;
  if (s->bt < 0) return ds__seterr(&s->err, DS_ERR_STATE, "batch: add_adjoint outside a backward pass");
  const dsBatchLayout* L = &s->L;
  const size_t bytes = bn3(s) * sizeof(dsReal);
  dsBatchArgs a = base_args(s);
  a.adj_x = s->R + L->o_adj[0];
  a.adj_v = s->R + L->o_adj[1];
  a.av = s->R + L->o_av[0]; /* uploads only: no backward substep is under way */
  a.af = s->R + L->o_af[0];
  int rc = adj_x ? s->be->put(s->ctx, a.av, adj_x, bytes) : s->be->zero(s->ctx, a.av, bytes);
  if (!rc) rc = adj_v ? s->be->put(s->ctx, a.af, adj_v, bytes) : s->be->zero(s->ctx, a.af, bytes);
  if (rc) return be_fail(s, rc, "uploading adjoints");
  return run(s, DS__BS_ADD_ADJ, &a);
}

int ds_bsim_add_artic_adjoint(dsBatchSim* s, const dsReal* adj) {
  if (!s || !adj) return DS_ERR_INVALID;
  if (s->bt < 0) return ds__seterr(&s->err, DS_ERR_STATE, "batch: add_artic_adjoint outside a backward pass");
  const dsBatchLayout* L = &s->L;
  if (!L->nas) return ds__seterr(&s->err, DS_ERR_STATE, "batch: add_artic_adjoint: the model has no articulation");
  /* articulations run on the CPU backend only (create refuses cuda), so the
     adjoint is host memory; one sum per entry, in a fixed order */
  dsReal* a = s->R + L->o_aadj[0];
  const size_t n = (size_t)L->B * (size_t)L->nas;
  for (size_t i = 0; i < n; i++) a[i] += adj[i];
  return 0;
}

static int load_segment(dsBatchSim* s, int t);

void* ds__bsim_context(const dsBatchSim* s) { return s ? s->ctx : NULL; }

int ds__bsim_adj_scratch(dsBatchSim* s, dsReal** adj_x) {
  if (!s || !adj_x) return DS_ERR_INVALID;
  if (s->bt < 0) return ds__seterr(&s->err, DS_ERR_STATE, "batch: adjoint scratch outside a backward pass");
  *adj_x = s->R + s->L.o_av[0]; /* as ds_bsim_add_adjoint: free between backward steps */
  int rc = s->be->zero(s->ctx, *adj_x, bn3(s) * sizeof(dsReal));
  return rc ? be_fail(s, rc, "clearing adjoints") : 0;
}

int ds__bsim_add_adj_scratch(dsBatchSim* s) {
  if (!s) return DS_ERR_INVALID;
  if (s->bt < 0) return ds__seterr(&s->err, DS_ERR_STATE, "batch: add_adjoint outside a backward pass");
  dsBatchArgs a = base_args(s);
  a.adj_x = s->R + s->L.o_adj[0];
  a.adj_v = s->R + s->L.o_adj[1];
  a.av = s->R + s->L.o_av[0];
  a.af = NULL; /* no velocity part */
  return run(s, DS__BS_ADD_ADJ, &a);
}

int ds__bsim_positions(dsBatchSim* s, const dsReal** x) {
  if (!s || !x) return DS_ERR_INVALID;
  const dsBatchLayout* L = &s->L;
  if (s->bt < 0) {
    dsReal *cx, *cv;
    cur_state(s, &cx, &cv);
    *x = cx;
    return 0;
  }
  const int t = s->bt;
  if (L->K == 1) {
    *x = s->R + L->o_tape[0] + (size_t)t * bn3(s);
  } else if (t % L->K == 0) {
    *x = s->R + L->o_tape[0] + (size_t)(t / L->K) * bn3(s);
  } else {
    int rc = load_segment(s, t);
    if (rc) return rc;
    *x = s->R + L->o_seg[0] + (size_t)(t - s->seg_start) * bn3(s);
  }
  return 0;
}

int ds_bsim_backward_begin(dsBatchSim* s, const dsReal* adj_x, const dsReal* adj_v) {
  if (!s) return DS_ERR_INVALID;
  const dsBatchLayout* L = &s->L;
  if (L->T == 0) return ds__seterr(&s->err, DS_ERR_STATE, "batch: backward: no tape (max_substeps 0)");
  /* a failed instance's adjoints are meaningless; the others' are exact (instances share nothing) */
  const size_t bytes = bn3(s) * sizeof(dsReal);
  int rc = s->be->zero(s->ctx, s->R + L->o_adj[0], bytes);
  if (!rc) rc = s->be->zero(s->ctx, s->R + L->o_adj[1], bytes);
  if (!rc && L->nas) rc = s->be->zero(s->ctx, s->R + L->o_aadj[0], (size_t)L->B * L->nas * sizeof(dsReal));
  if (rc) return be_fail(s, rc, "clearing adjoints");
  s->bt = s->t;
  s->seg_start = -1;
  ds__batch_implicit_clear(s->imp, -1, 1);
  if (adj_x || adj_v) return ds_bsim_add_adjoint(s, adj_x, adj_v);
  return 0;
}

/* Checkpointed tape: seg holds states s .. e of the segment of substep t,
 * recomputed from the checkpoint at s with the taped records. */
static int load_segment(dsBatchSim* s, int t) {
  const dsBatchLayout* L = &s->L;
  const int K = L->K, s0 = (t / K) * K, e = s0 + K < s->t ? s0 + K : s->t;
  if (s->seg_start == s0) return 0;
  const size_t n = bn3(s);
  int rc = s->be->copy(s->ctx, s->R + L->o_seg[0], s->R + L->o_tape[0] + (size_t)(s0 / K) * n, n * sizeof(dsReal));
  if (!rc) rc = s->be->copy(s->ctx, s->R + L->o_seg[1], s->R + L->o_tape[1] + (size_t)(s0 / K) * n, n * sizeof(dsReal));
  const size_t na = (size_t)L->B * L->nas;
  if (!rc && na) rc = s->be->copy(s->ctx, s->R + L->o_aseg[0], art_ckpt(s, s0), na * sizeof(dsReal));
  if (rc) return be_fail(s, rc, "loading a checkpoint");
  for (int j = s0; j < e; j++) {
    dsBatchArgs a = base_args(s);
    a.t = j;
    a.act = act_of(s, s->act_rec[j]);
    a.fext = fext_of(s, s->fext_rec[j]);
    a.x = s->R + L->o_seg[0] + (size_t)(j - s0) * n;
    a.v = s->R + L->o_seg[1] + (size_t)(j - s0) * n;
    a.xo = (dsReal*)a.x + n;
    a.vo = (dsReal*)a.v + n;
    if (na) {
      a.as = s->R + L->o_aseg[0] + (size_t)(j - s0) * na;
      a.aso = (dsReal*)a.as + na;
    }
    rc = forward(s, &a);
    if (rc) return rc;
  }
  s->seg_start = s0;
  return 0;
}

/* Arguments of backward substep t (its segment loaded when checkpointed).
 * The arrays one substep writes and the next one's launches still read are
 * taken by the parity of t (dsBatchLayout). */
static dsBatchArgs bwd_args(const dsBatchSim* s, int t) {
  const dsBatchLayout* L = &s->L;
  const size_t n = bn3(s);
  const int p = t & 1;
  dsBatchArgs a = base_args(s);
  a.t = t;
  if (L->K > 1) {
    a.x = s->R + L->o_seg[0] + (size_t)(t - s->seg_start) * n;
    a.v = s->R + L->o_seg[1] + (size_t)(t - s->seg_start) * n;
  } else {
    a.x = s->R + L->o_tape[0] + (size_t)t * n;
    a.v = s->R + L->o_tape[1] + (size_t)t * n;
  }
  a.v1 = a.v + n;
  a.act = act_of(s, s->act_rec[t]);
  a.adj_x = s->R + L->o_adj[0];
  a.adj_v = s->R + L->o_adj[1];
  a.av = s->R + L->o_av[p];
  a.af = s->R + L->o_af[p];
  a.aex = s->R + L->o_aex[0];
  a.aev = s->R + L->o_aev[0];
  a.scratch = s->R + L->o_scr[p];
  a.adj_act_t = L->nact ? s->R + L->o_aact_t[p] : NULL;
  a.adj_act = L->nact ? s->R + L->o_aact[0] : NULL;
  a.adj_fext = s->R + L->o_afext[0];
  if (L->nas) { /* the articulation's states at t and t + 1, its adjoint */
    const size_t na = (size_t)L->B * L->nas;
    a.as = L->K > 1 ? s->R + L->o_aseg[0] + (size_t)(t - s->seg_start) * na : s->R + L->o_atape[0] + (size_t)t * na;
    a.aso = (dsReal*)a.as + na;
    a.aadj = s->R + L->o_aadj[0];
  }
  return a;
}

/* ds_bsim_backward_step of an implicit model: one stage per substep (the
 * transposed solve and the parameter gradients of engine/implicit.c, which
 * also adds the control adjoints to the call's sums). A failed adjoint
 * solve ends the call after its substep with the instance's message; the
 * others' adjoints stay exact, the instance's are NaN from there on. */
static int implicit_backward(dsBatchSim* s, int nsub, dsReal* adj_act, dsReal* adj_fext) {
  const dsBatchLayout* L = &s->L;
  int rc = 0;
  for (int j = 0; j < nsub && !rc; j++) {
    const int t = s->bt - 1;
    if (L->K > 1 && (rc = load_segment(s, t))) return rc;
    const dsBatchArgs a = bwd_args(s, t);
    if ((rc = run(s, DS__BS_IMPLICIT_BWD, &a))) return rc;
    s->bt = t;
    for (int b = 0; b < L->B && !rc; b++)
      if (s->imp->bfail[b] == t)
        rc = ds__seterr(&s->err, DS_ERR_DIVERGED, "instance %d: backward: %s", b, ds__errmsg(&s->imp->eb[b]));
  }
  if (rc) return rc;
  if (adj_act && L->nact) rc = s->be->get(s->ctx, adj_act, s->R + L->o_aact[0], (size_t)L->B * L->nact * sizeof(dsReal));
  if (!rc && adj_fext) rc = s->be->get(s->ctx, adj_fext, s->R + L->o_afext[0], bn3(s) * sizeof(dsReal));
  return rc ? be_fail(s, rc, "reading control adjoints") : 0;
}

/* The tail of a backward substep (REDUCE and ACCUMULATE read only what the
 * substep wrote; they write gradient scalars and the control adjoints,
 * which no other stage touches) as parts of l. */
static void tail_parts(dsBatchLaunch* l, const dsBatchArgs* a) {
  launch_part(l, DS__BS_REDUCE, a);
  launch_part(l, DS__BS_ACCUMULATE, a);
}

/* Backward substeps as a pipeline of launches. Substep t is, in the
 * engine's order: INTEG(t) (particles: av, af, mass gradient), the element
 * adjoints (slots; read af of the element's particles), GATHER(t)
 * (particles: adj_x, adj_v, contact scratch), then REDUCE and ACCUMULATE
 * (per instance / per control: read av, af, scratch, adj_act_t of t).
 * Launches:
 *   - GATHER(t) and INTEG(t - 1) are one chain: particle i's INTEG reads
 *     only particle i's adj_x, adj_v that its GATHER just wrote (and the
 *     tape), and writes av, af of the other parity, which GATHER(t) and the
 *     tail of t do not read. Not across a call's end, nor across a
 *     checkpoint segment (t - 1's states are not loaded yet).
 *   - The tail of t runs beside the first element stage of t - 1 (or its
 *     GATHER when it has no elements): that stage writes slots, adj_act_t
 *     and scratch of parity t - 1, and reads af of t - 1; the tail reads
 *     those of parity t.
 * Every gradient cell is still added to in the same order as the serial
 * engine's (t, t - 1, ...), so the bits are ds_backward_step's. For a model
 * with one element kind a substep is two launches instead of five. */
int ds_bsim_backward_step(dsBatchSim* s, int nsub, dsReal* adj_act, dsReal* adj_fext) {
  if (!s || nsub < 0) return DS_ERR_INVALID;
  const dsBatchLayout* L = &s->L;
  if (s->bt < nsub)
    return ds__seterr(&s->err, DS_ERR_STATE, "batch: backward: %d substeps to pop, %d left", nsub, s->bt < 0 ? 0 : s->bt);
  const size_t n = bn3(s);
  int rc = s->be->zero(s->ctx, s->R + L->o_aact[0], (size_t)L->B * L->nact * sizeof(dsReal));
  if (!rc) rc = s->be->zero(s->ctx, s->R + L->o_afext[0], n * sizeof(dsReal));
  if (rc) return be_fail(s, rc, "clearing control adjoints");
  if (L->nas) { /* an articulation: one stage per substep, which also sums the actions' adjoints */
    for (int j = 0; j < nsub; j++) {
      const int t = s->bt - 1;
      if (L->K > 1 && (rc = load_segment(s, t))) return rc;
      const dsBatchArgs a = bwd_args(s, t);
      if ((rc = run(s, DS__BS_ARTIC_BWD, &a))) return rc;
      s->bt = t;
    }
    if (adj_act && L->nact) rc = s->be->get(s->ctx, adj_act, s->R + L->o_aact[0], (size_t)L->B * L->nact * sizeof(dsReal));
    if (!rc && adj_fext) rc = s->be->get(s->ctx, adj_fext, s->R + L->o_afext[0], n * sizeof(dsReal)); /* zeros */
    return rc ? be_fail(s, rc, "reading control adjoints") : 0;
  }
  if (L->imp) return implicit_backward(s, nsub, adj_act, adj_fext);
  dsBatchArgs tail; /* the pending tail's substep */
  int have_tail = 0, integ_done = -1;
  dsBatchLaunch l;
  for (int j = 0; j < nsub; j++) {
    const int t = s->bt - 1;
    if (L->K > 1 && (rc = load_segment(s, t))) return rc;
    const dsBatchArgs a = bwd_args(s, t);
    if (integ_done != t && (rc = run(s, DS__BS_INTEG_BWD, &a))) return rc;
    for (int stage = DS__BS_ELEM_BWD0; stage < DS__BS_GATHER_BWD; stage++) { /* the force list's order */
      if (ds__bstage_count(&a, stage) <= 0) continue;
      launch_init(&l, L->B);
      if (have_tail) tail_parts(&l, &tail);
      have_tail = 0;
      launch_part(&l, stage, &a);
      if ((rc = launch_send(s, &l))) return rc;
    }
    launch_init(&l, L->B);
    /* a model without elements: the tail of t + 1 rides with this GATHER,
       and it reads av, af of parity t + 1, which INTEG(t - 1) would write:
       no chain then */
    const int tail_here = have_tail;
    if (have_tail) tail_parts(&l, &tail);
    dsBatchPart* g = launch_part(&l, DS__BS_GATHER_BWD, &a);
    if (g && !tail_here && j + 1 < nsub && (L->K == 1 || t % L->K != 0)) {
      const dsBatchArgs an = bwd_args(s, t - 1);
      launch_chain(g, DS__BS_INTEG_BWD, &an);
      integ_done = t - 1;
    }
    if ((rc = launch_send(s, &l))) return rc;
    tail = a;
    have_tail = 1;
    s->bt = t;
  }
  if (have_tail) {
    launch_init(&l, L->B);
    tail_parts(&l, &tail);
    if ((rc = launch_send(s, &l))) return rc;
  }
  if (adj_act && L->nact) rc = s->be->get(s->ctx, adj_act, s->R + L->o_aact[0], (size_t)L->B * L->nact * sizeof(dsReal));
  if (!rc && adj_fext) rc = s->be->get(s->ctx, adj_fext, s->R + L->o_afext[0], n * sizeof(dsReal));
  return rc ? be_fail(s, rc, "reading control adjoints") : 0;
}

int ds_bsim_backward_finish(dsBatchSim* s) {
  if (!s) return DS_ERR_INVALID;
  if (s->bt != 0) return ds__seterr(&s->err, DS_ERR_STATE, "batch: backward: finish at substep %d (must be 0)", s->bt);
  dsBatchArgs a = base_args(s);
  a.adj_x = s->R + s->L.o_adj[0];
  a.adj_v = s->R + s->L.o_adj[1];
  int rc = 0;
  if (s->L.nas) { /* the articulation's initial state first, as ds_backward_finish */
    a.as = s->R + s->L.o_atape[0];
    a.aadj = s->R + s->L.o_aadj[0];
    rc = run(s, DS__BS_ARTIC_FINISH, &a);
  }
  if (!rc) rc = run(s, DS__BS_FINISH, &a);
  if (rc) return rc;
  s->bt = -1;
  return 0;
}

int ds_bsim_get_adjoint(const dsBatchSim* s, dsReal* adj_x, dsReal* adj_v) {
  if (!s) return DS_ERR_INVALID;
  if (s->L.T == 0) return ds__seterr((dsErrBuf*)&s->err, DS_ERR_STATE, "batch: no tape, no adjoints");
  int rc = 0;
  if (adj_x) rc = s->be->get(s->ctx, adj_x, s->R + s->L.o_adj[0], bn3(s) * sizeof(dsReal));
  if (!rc && adj_v) rc = s->be->get(s->ctx, adj_v, s->R + s->L.o_adj[1], bn3(s) * sizeof(dsReal));
  return rc ? be_fail((dsBatchSim*)s, rc, "reading adjoints") : 0;
}

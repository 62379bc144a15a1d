/* dsData: per-episode state, external forces and activations, adjoint
 * buffers, the tape (every state, or every K-th state plus a recompute
 * segment; activations and external forces recorded only when they change)
 * and the scratch arena. Every array comes from the DS_DATA_ARRAYS list and
 * is allocated here, once: step and backward allocate nothing. */
#include "config.h"

#ifdef _OPENMP
#  include <omp.h>
#endif

#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "dsim/engine.h"
#include "engine/engine_priv.h"
#include "engine/implicit.h"
#include "engine/sparse.h"
#include "engine/forces.h"
#include "engine/artic_model.h"
#include "engine/rigid.h"

#define DS__ALIGN 64

dsDataDef ds_default_data_def(void) {
  dsDataDef def;
  memset(&def, 0, sizeof def);
  def.max_substeps = 0;
  def.checkpoint_every = 1;
  def.jacobian_mib = 64;
  return def;
}

/* ---- arena -----------------------------------------------------------------*/
static size_t align_up(size_t n) { return (n + DS__ALIGN - 1) & ~(size_t)(DS__ALIGN - 1); }

size_t ds__arena_need(const dsModel* m) {
  size_t r = sizeof(dsReal), n3 = 3 * (size_t)m->nparticle, s3 = 3 * (size_t)m->nslot;
  dsForceLayout L;
  ds__force_layout(m, &L);
  /* step: ef, J. backward: the recompute (ef, J) is released before
   * av, adj_f, adj_ex, adj_ev and the force models' scratch are taken. */
  size_t step = align_up(s3 * r) + align_up((size_t)m->ntet * r) + (m->nbody ? align_up(n3 * r) : 0);
  size_t back = 2 * align_up(n3 * r) + 2 * align_up(s3 * r) + align_up(L.nscratch * r) +
                (m->nbody ? align_up(3 * (size_t)m->nbody * r) : 0);
  return (step > back ? step : back) + 4 * DS__ALIGN;
}

void* ds__arena_alloc(dsData* d, size_t bytes, const char* caller) {
  size_t base = (size_t)(uintptr_t)d->arena;
  size_t start = align_up(base + d->arena_top) - base;
  if (bytes > d->arena_size || start > d->arena_size - bytes) {
    ds__seterr(ds__data_err(d), DS_ERR_ARENA, "%s: scratch arena exhausted (need %zu bytes, %zu of %zu free)",
               caller, bytes, d->arena_size > start ? d->arena_size - start : (size_t)0, d->arena_size);
    return NULL;
  }
  d->arena_top = start + bytes;
  if (d->arena_top > d->arena_peak) d->arena_peak = d->arena_top;
  return d->arena + start;
}

size_t ds__arena_mark(const dsData* d) { return d->arena_top; }

void ds__arena_free(dsData* d, size_t mark) { d->arena_top = mark; }

dsErrBuf* ds__data_err(dsData* d) { return &((dsDataPriv*)d->err_)->err; }

/* ---- create / free ------------------------------------------------------------*/
void ds_data_free(dsData* d) {
  if (!d) return;
#define DS__FREE(field, type, count, name) ds__free(d->field);
  DS_DATA_ARRAYS(DS__FREE)
#undef DS__FREE
  if (d->err_) {
    ds__free(((dsDataPriv*)d->err_)->chain_mem);
    ds__implicit_free(((dsDataPriv*)d->err_)->imp);
    ds__artic_scratch_free(((dsDataPriv*)d->err_)->art);
  }
  ds__free(d->err_);
  ds__free(d);
}

/* The sizes of a data for def (no allocation); DS_ERR_INVALID for a bad def. */
static int data_layout(const dsModel* m, const dsDataDef* def, dsData* d) {
  dsDataDef dd = def ? *def : ds_default_data_def();
  if (dd.max_substeps < 0 || dd.checkpoint_every < 0 || dd.act_records < 0 || dd.fext_records < 0)
    return DS_ERR_INVALID;
  int T = dd.max_substeps, K = dd.checkpoint_every > 1 ? dd.checkpoint_every : 1;
  if (K > T && T > 0) K = T;
  d->max_substeps = T;
  d->ckpt = K;
  d->nstore = T == 0 ? 0 : (K == 1 ? T : (T + K - 1) / K);
  d->nseg = (T > 0 && K > 1) ? K + 1 : 0;
  d->act_cap = (T == 0 || m->nact == 0) ? 0 : (dd.act_records ? (dd.act_records < T ? dd.act_records : T) : T);
  d->fext_cap = T == 0 ? 0 : (dd.fext_records ? (dd.fext_records < T ? dd.fext_records : T) : T);
  d->bfext_cap = m->nbody ? T : 0; /* 6 reals per body per record: one per substep */
  d->arena_size = dd.arena_bytes ? dd.arena_bytes : ds__arena_need(m);
  return DS_OK;
}

/* The implicit integrator's kept Jacobians for def: slots for every
 * substep of a full tape, or for a checkpoint segment and the state after
 * it (what a backward replays; slots_wanted), as many as fit in def's
 * jacobian_mib (jacobian_slots). */
static size_t slots_wanted(const dsModel* m, const dsData* lay, const dsDataDef* def) {
  const dsDataDef dd = def ? *def : ds_default_data_def();
  if (!ds__implicit_keeps(m) || lay->max_substeps == 0 || dd.jacobian_mib <= 0) return 0;
  return lay->ckpt == 1 ? (size_t)lay->max_substeps : (size_t)lay->ckpt + 1;
}

static int jacobian_slots(const dsModel* m, const dsData* lay, const dsDataDef* def, size_t slot_bytes) {
  const dsDataDef dd = def ? *def : ds_default_data_def();
  const size_t need = slots_wanted(m, lay, def);
  if (!need || !slot_bytes) return 0;
  const size_t fit = ((size_t)dd.jacobian_mib << 20) / slot_bytes;
  return (int)(need < fit ? need : fit);
}

size_t ds_data_bytes_needed(const dsModel* m, const dsDataDef* def) {
  dsData d;
  memset(&d, 0, sizeof d);
  if (!m || data_layout(m, def, &d)) return 0;
  /* the kept Jacobians: every slot a substep needs at a bound of the
   * matrix's pattern, at most their budget (the slots that fit in it hold
   * no more) */
  const dsDataDef dd = def ? *def : ds_default_data_def();
  const size_t need = slots_wanted(m, &d, def);
  size_t nnzb, nsrc, njac, jac = 0;
  if (need > 0) {
    ds__bsr_bounds(m, &nnzb, &nsrc, &njac);
    const size_t all = need * ds__implicit_slot_size(m, nnzb), cap = (size_t)dd.jacobian_mib << 20;
    jac = all < cap ? all : cap;
  }
  return ds_data_bytes(m, &d) + jac;
}

int ds_data_create(const dsModel* m, const dsDataDef* def, dsData** out) {
  if (!m || !out) return DS_ERR_INVALID;
  *out = NULL;
  dsData lay;
  memset(&lay, 0, sizeof lay);
  if (data_layout(m, def, &lay)) return DS_ERR_INVALID;
  dsData* d = (dsData*)ds__calloc(1, sizeof *d);
  if (!d) return DS_ERR_NOMEM;
  *d = lay;
  d->err_ = ds__calloc(1, sizeof(dsDataPriv));
  if (!d->err_) {
    ds__free(d);
    return DS_ERR_NOMEM;
  }
  {
    dsDataPriv* dp = (dsDataPriv*)d->err_;
#ifdef _OPENMP
    dp->nchain = omp_get_max_threads();
#else
    dp->nchain = 1;
#endif
    dp->chain_mem = ds__malloc((size_t)dp->nchain * sizeof(dsChainLink) + 128);
    if (!dp->chain_mem) {
      ds__free(d->err_);
      ds__free(d);
      return DS_ERR_NOMEM;
    }
    dp->chain = (dsChainLink*)(((uintptr_t)dp->chain_mem + 127) & ~(uintptr_t)127);
    for (int t = 0; t < dp->nchain; t++) atomic_init(&dp->chain[t].ready, 0u);
  }
  const dsModel* m_ = m;
  const dsData* d_ = d;
#define DS__ALLOC(field, type, count, name)                   \
  {                                                           \
    size_t n_ = (size_t)(count);                              \
    if (n_) {                                                 \
      d->field = (type*)ds__calloc(n_, sizeof(type));         \
      if (!d->field) goto nomem;                              \
    }                                                         \
  }
  DS_DATA_ARRAYS(DS__ALLOC)
#undef DS__ALLOC
  (void)d_;
  (void)m_;
  if (m->integrator == DS_INTEGRATOR_IMPLICIT) {
    dsImplicit** imp = &((dsDataPriv*)d->err_)->imp;
    int rc = ds__implicit_create(m, imp);
    if (!rc) rc = ds__implicit_keep(m, *imp, jacobian_slots(m, d, def, ds__implicit_slot_bytes(m, *imp)));
    if (rc) {
      ds_data_free(d);
      return rc;
    }
  }
  if (m->artic && ds__artic_scratch_create(m, &((dsDataPriv*)d->err_)->art)) goto nomem;
  ds_data_reset(m, d);
  *out = d;
  return 0;
nomem:
  ds_data_free(d);
  return DS_ERR_NOMEM;
}

size_t ds_data_bytes(const dsModel* m, const dsData* d) {
  if (!m || !d) return 0;
  const dsModel* m_ = m;
  const dsData* d_ = d;
  size_t total = sizeof *d;
#define DS__BYTES(field, type, count, name) total += (size_t)(count) * sizeof(type);
  DS_DATA_ARRAYS(DS__BYTES)
#undef DS__BYTES
  if (d->err_ && ((const dsDataPriv*)d->err_)->imp) total += ds__implicit_kept_bytes(((const dsDataPriv*)d->err_)->imp);
  return total;
}

int ds_data_reset(const dsModel* m, dsData* d) {
  if (!m || !d) return DS_ERR_INVALID;
  size_t n3 = 3 * (size_t)m->nparticle;
  memcpy(d->x, m->x0, n3 * sizeof(dsReal));
  memcpy(d->v, m->v0, n3 * sizeof(dsReal));
  memset(d->f, 0, n3 * sizeof(dsReal));
  memset(d->f_ext, 0, n3 * sizeof(dsReal));
  memset(d->adj_x, 0, n3 * sizeof(dsReal));
  memset(d->adj_v, 0, n3 * sizeof(dsReal));
  if (m->nact) memset(d->act, 0, (size_t)m->nact * sizeof(dsReal));
  if (m->nbody) {
    for (int b = 0; b < m->nbody; b++) ds__rigid_initial(m, b, d->body + 13 * (size_t)b);
    ds__rigid_pose_all(m, d->body, d->x, d->v);
    memset(d->body_fext, 0, 6 * (size_t)m->nbody * sizeof(dsReal));
    memset(d->adj_body, 0, 13 * (size_t)m->nbody * sizeof(dsReal));
    memset(d->adj_body_fext, 0, 6 * (size_t)m->nbody * sizeof(dsReal));
  }
  if (m->artic) ds__artic_reset(m, d);
  d->bfext_n = 0;
  d->t = 0;
  d->bt = -1;
  if (d->err_ && ((dsDataPriv*)d->err_)->imp) ds__implicit_new_episode(((dsDataPriv*)d->err_)->imp);
  d->act_n = 0;
  d->fext_n = 0;
  d->seg_start = -1;
  d->failed = 0;
  d->arena_top = 0;
  ds__clearerr(ds__data_err(d));
  return 0;
}

int ds_data_set_state(const dsModel* m, dsData* d, const dsReal* x, const dsReal* v) {
  if (!m || !d) return DS_ERR_INVALID;
  if (d->t != 0)
    return ds__seterr(ds__data_err(d), DS_ERR_STATE, "state can only be set at substep 0 (now %d)", d->t);
  size_t n3 = 3 * (size_t)m->nparticle;
  if (x) memcpy(d->x, x, n3 * sizeof(dsReal));
  if (v) memcpy(d->v, v, n3 * sizeof(dsReal));
  return 0;
}

int ds_data_set_body_state(const dsModel* m, dsData* d, const dsReal* body) {
  if (!m || !d || (!body && m->nbody)) return DS_ERR_INVALID;
  if (d->t != 0)
    return ds__seterr(ds__data_err(d), DS_ERR_STATE, "state can only be set at substep 0 (now %d)", d->t);
  for (int b = 0; b < m->nbody; b++) {
    const dsReal* s = body + 13 * (size_t)b;
    dsReal* o = d->body + 13 * (size_t)b;
    for (int k = 0; k < 13; k++)
      if (!isfinite(s[k])) return ds__seterr(ds__data_err(d), DS_ERR_INVALID, "body %d: state not finite", b);
    memcpy(o, s, 13 * sizeof(dsReal));
    if (dsu_qnormalize(o + 3, s + 3) == 0)
      return ds__seterr(ds__data_err(d), DS_ERR_INVALID, "body %d: orientation quaternion is zero", b);
  }
  ds__rigid_pose_all(m, d->body, d->x, d->v);
  return 0;
}

int ds_body_set_impulse(const dsModel* m, dsData* d, int b, const dsReal J[3], const dsReal point[3]) {
  if (!m || !d || !J || !point || b < 0 || b >= m->nbody) return DS_ERR_INVALID;
  const dsReal* p = d->body + 13 * (size_t)b;
  dsReal f[3], r[3], t[3];
  for (int k = 0; k < 3; k++) {
    f[k] = J[k] / m->dt;
    r[k] = point[k] - p[k];
  }
  dsu_cross3(t, r, f);
  dsReal* w = d->body_fext + 6 * (size_t)b;
  for (int k = 0; k < 3; k++) {
    w[k] = f[k];
    w[3 + k] = t[k];
  }
  return 0;
}

const char* ds_data_last_error(const dsData* d) { return d ? ds__errmsg(&((const dsDataPriv*)d->err_)->err) : ""; }

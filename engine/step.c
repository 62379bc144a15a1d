/* The semi-implicit Euler step over every force model, and its adjoint.
 *
 * Forward (one substep, activations a and external forces f_ext held):
 *   ef_e   = element forces of element e on its vertices (per element, no sharing)
 *   f_i    = f_ext_i + sum over i's incident slots s (ascending) of ef[s] + contact_i
 *   v'_i   = v_i + dt (w_i f_i + g [w_i > 0]),   x'_i = x_i + dt v'_i
 * Elements write only their own slots and each particle sums its own list in
 * a fixed order, so the result does not depend on the thread count.
 *
 * Backward (adjoints X' = dL/dx', V' = dL/dv' given):
 *   A_i     = V'_i + dt X'_i                        (total adjoint of v'_i)
 *   adj f_i = dt w_i A_i                            (= dL/d f_ext_i)
 *   dL/dg  += dt sum_{w_i > 0} A_i
 *   dL/dm_i += -w_i (v'_i - v_i - dt g) . A_i       (w > 0; from dL/dw_i = dt f_i . A_i
 *                                                    with dt w f = v' - v - dt g, dw/dm = -w^2;
 *                                                    fixed particles: 0)
 *   X_i = X'_i + sum_e (d ef_e/d x_i)^T adj f_e,  V_i = A_i + sum_e (d ef_e/d v_i)^T adj f_e
 * where the element terms come from each kernel's _bwd on the element's
 * local adj f, written per slot and gathered like the forward. Scalar
 * parameters shared by all elements (contact, lift/drag, gravity) collect
 * per-element partials that are summed serially in element order. Element
 * parameters receive their gradient per element (no sharing, no race).
 * The mass gradient uses the taped v' instead of recomputing forces.
 *
 * The force models are not named here: both passes run the force table of
 * engine/forces.h in list order (element loops, one barrier, then the
 * per-particle gather with the per-particle models such as contact; the
 * backward adds the serial `reduce` of each model's scratch at the end).
 * The integrator and gravity are the step's own.
 *
 * Rigid bodies (engine/rigid.h, m->nbody > 0): their vertices are
 * particles that carry no elements; the gather sums their external force
 * and contact (the rigid-contact row of the table) like anyone's but does
 * not integrate them; then, per body, Newton-Euler moves the body and
 * poses its vertices. The backward runs the body stage first (ds__rigid_bwd:
 * the vertices' adjoints into the body's, through Newton-Euler, out to the
 * vertices' force adjoints af), then the particle stages as above, which
 * skip the rigid vertices' integrator. Body states and wrenches are taped
 * beside x and v (and recomputed in checkpoint segments). */
#include "config.h"

#include <limits.h>
#include <math.h>
#include <stdatomic.h>
#include <string.h>
#ifdef _OPENMP
#  include <omp.h>
#endif

#include "dsim/engine.h"
#include "engine/artic_model.h"
#include "engine/engine_priv.h"
#include "engine/forces.h"
#include "engine/implicit.h"
#include "engine/step_body.h"

/* Below this many slots + particles a substep always runs on one thread:
 * the fork/join costs more than the work. Above, the thread choice
 * (base/internal.h) decides from the clock. */
#define DS__PAR_MIN 1024

/* reals per block of the parallel record comparison */
#define DS__CMP_BLOCK 4096

void ds_set_adaptive_threads(int on) { ds__pick_set_adaptive(on); }
int ds_get_adaptive_threads(void) { return ds__pick_adaptive(); }

/* particle i's state before the substep into the tape rows (before the
 * gather: xo, vo may alias x, v) */
static inline void tape_particle(dsStepCheck* ck, const dsReal* x, const dsReal* v, int i) {
  const size_t o = 3 * (size_t)i;
  for (int c = 0; c < 3; c++) {
    ck->tx[o + c] = x[o + c];
    ck->tv[o + c] = v[o + c];
  }
}

static inline void prefetch(const dsReal* p) {
#if defined(__GNUC__)
  __builtin_prefetch(p, 0, 3);
#else
  (void)p;
#endif
}

/* the serial check's order: for k ascending, x[k] before v[k] */
static inline void check_particle(dsStepCheck* ck, const dsReal* x, const dsReal* v, int i) {
  /* first without branches: y - y is 0 for a finite y, NaN otherwise */
  const dsReal* px = x + 3 * (size_t)i;
  const dsReal* pv = v + 3 * (size_t)i;
  const dsReal z = ((px[0] - px[0]) + (px[1] - px[1])) + ((px[2] - px[2]) + (pv[0] - pv[0])) +
                   ((pv[1] - pv[1]) + (pv[2] - pv[2]));
  if (z == 0) return;
  for (int c = 0; c < 3; c++) {
    const int k = 3 * i + c;
    if (!isfinite(x[k]))
      ds__atomic_min_int(&ck->bad_state, 2 * k);
    else if (!isfinite(v[k]))
      ds__atomic_min_int(&ck->bad_state, 2 * k + 1);
  }
}

/* Whether work for nt threads needs its own parallel region: more than one
 * thread, or (for one) a caller already in an active region (a batch's
 * loop over instances), whose team the work's orphaned loops and barriers
 * would otherwise bind to. Else the work is called directly (see
 * substep_team). */
static int region_needed(int nt) {
#ifdef _OPENMP
  return nt > 1 || omp_in_parallel();
#else
  (void)nt;
  return 0;
#endif
}

/* ds__substep's work, run by every thread of a team (or, for one thread,
 * called without a parallel region: an OpenMP region of one thread still
 * costs a futex call at every barrier and at its end, a third of the CPU
 * time of a small model's single-threaded step). */
typedef struct SubFwd {
  const dsModel* m;
  const dsForceLayout* L;
  const dsStepFwd* pa;
  const dsReal *x, *v, *act, *fext, *bs, *bfext;
  dsReal *ef, *J, *xo, *vo, *bso, *fr;
  int integrate, np, nab, nfb;
  dsStepCheck* ck;
  int *adiff, *fdiff; /* shared: set to 1 by any thread that finds a difference */
} SubFwd;

static void substep_team(const SubFwd* s) {
  const dsModel* m = s->m;
  const dsForceLayout L = *s->L;
  const dsStepFwd pa = *s->pa;
  const dsReal *x = s->x, *v = s->v, *act = s->act, *fext = s->fext, *bs = s->bs, *bfext = s->bfext;
  dsReal *ef = s->ef, *J = s->J, *xo = s->xo, *vo = s->vo, *bso = s->bso, *fr = s->fr;
  const int integrate = s->integrate, np = s->np, nab = s->nab, nfb = s->nfb;
  dsStepCheck* ck = s->ck;
  /* this substep's activations and external forces against their last
   * records (read only here and by the elements; the results are there
   * after the region) */
  if (nab + nfb) {
    int ad = 0, fd = 0; /* this thread's blocks; any difference sets the shared flag */
#pragma omp for schedule(static) nowait
    for (int b = 0; b < nab + nfb; b++) {
      const int isf = b >= nab, k0 = (isf ? b - nab : b) * DS__CMP_BLOCK, n = isf ? 3 * np : m->nact;
      const int len = n - k0 < DS__CMP_BLOCK ? n - k0 : DS__CMP_BLOCK;
      const dsReal *cur = isf ? fext : act, *prev = isf ? ck->fext_prev : ck->act_prev;
      if (memcmp(cur + k0, prev + k0, (size_t)len * sizeof(dsReal)) != 0) {
        if (isf)
          fd = 1;
        else
          ad = 1;
      }
    }
    if (ad) {
#pragma omp atomic write
      *s->adiff = 1;
    }
    if (fd) {
#pragma omp atomic write
      *s->fdiff = 1;
    }
  }
  /* element models in list order, each into its own slots */
  for (int k = 0; k < DS__NFORCE; k++) {
    const dsForceModel* F = &ds__forces[k];
    if (!F->fwd || !L.count[k]) continue;
    const dsForceFwd a = {x, v, act && L.act[k] >= 0 ? act + L.act[k] : NULL, ef + 3 * (size_t)L.slot[k], J,
                          ck ? &ck->bad_tet : NULL};
    F->fwd(m, &a);
  }
#pragma omp barrier
  /* gather in a fixed order, per-particle models (contact), integrate;
   * the region's end is the barrier unless rigid bodies follow (the J
   * checks ran in the tet loop: dsForceFwd.bad) */
  if (m->nbody) {
#pragma omp for schedule(static)
    for (int i = 0; i < np; i++) {
      if (ck && ck->tx) tape_particle(ck, x, v, i);
      ds__gather_fwd_particle(m, &pa, i);
    }
    /* rigid bodies: Newton-Euler and the pose of their vertices (engine/rigid.h) */
#pragma omp for schedule(static) nowait
    for (int b = 0; b < m->nbody; b++) ds__rigid_fwd(m, b, x, fr, bs, bfext, bso, xo, vo, integrate);
  } else {
#pragma omp for schedule(static) nowait
    for (int i = 0; i < np; i++) {
      if (ck && ck->tx) tape_particle(ck, x, v, i);
      ds__gather_fwd_particle(m, &pa, i);
      if (ck && ck->check) check_particle(ck, xo, vo, i);
    }
  }
}

void ds__substep(const dsModel* m, const dsReal* x, const dsReal* v, const dsReal* act, const dsReal* fext,
                 dsReal* ef, dsReal* J, dsReal* f, dsReal* xo, dsReal* vo, int integrate, const dsReal* bs,
                 const dsReal* bfext, dsReal* bso, dsReal* fr, dsThreadPick* pick, dsStepCheck* ck) {
  const int np = m->nparticle;
  dsForceLayout L;
  ds__force_layout(m, &L);
  const dsStepFwd pa = {x, v, fext, ef, f, fr, xo, vo, integrate};
  int arm;
  const int nt = ds__pick_begin(pick, m->nslot + np, DS__PAR_MIN, &arm);
  const double t0 = arm >= 0 ? ds__clock() : 0;
  int adiff = 0, fdiff = 0;
  const int nab = ck && ck->act_prev ? (m->nact + DS__CMP_BLOCK - 1) / DS__CMP_BLOCK : 0;
  const int nfb = ck && ck->fext_prev ? (3 * np + DS__CMP_BLOCK - 1) / DS__CMP_BLOCK : 0;
  const SubFwd sf = {m,  &L, &pa, x,  v,   act, fext,      bs, bfext, ef,  J,   xo, vo, bso, fr, integrate, np,
                     nab, nfb, ck, &adiff, &fdiff};
  if (region_needed(nt)) {
#pragma omp parallel num_threads(nt) if (nt > 1)
    substep_team(&sf);
  } else
    substep_team(&sf);
  if (ck) {
    ck->act_diff = adiff;
    ck->fext_diff = fdiff;
  }
  if (arm >= 0) ds__pick_end(pick, arm, ds__clock() - t0);
}

/* ---- forward ------------------------------------------------------------------*/
/* Index of the record holding cur (appending it when it differs from the
 * last one); -1 when the tape is full. n: records used; cap: capacity. */
static int record(dsReal* tape, int* n, int cap, const dsReal* cur, size_t len) {
  if (*n > 0 && memcmp(tape + (size_t)(*n - 1) * len, cur, len * sizeof(dsReal)) == 0) return *n - 1;
  if (*n >= cap) return -1;
  memcpy(tape + (size_t)(*n) * len, cur, len * sizeof(dsReal));
  return (*n)++;
}

/* cur as a new record (room checked by the caller); its index */
static int append(dsReal* tape, int* n, const dsReal* cur, size_t len) {
  memcpy(tape + (size_t)(*n) * len, cur, len * sizeof(dsReal));
  return (*n)++;
}

static int needs_record(const dsReal* tape, int n, const dsReal* cur, size_t len) {
  return n == 0 || memcmp(tape + (size_t)(n - 1) * len, cur, len * sizeof(dsReal)) != 0;
}

int ds_step(const dsModel* m, dsData* d) {
  if (!m || !d) return DS_ERR_INVALID;
  dsErrBuf* eb = ds__data_err(d);
  if (d->failed) return ds__seterr(eb, DS_ERR_STATE, "substep %d: the data diverged; reset it first", d->t);
  const int t = d->t, T = d->max_substeps, np = m->nparticle;
  const size_t n3 = 3 * (size_t)np, nb13 = 13 * (size_t)m->nbody, nb6 = 6 * (size_t)m->nbody;
  const size_t nas = (size_t)(m->artic_nq + m->artic_nv);
  d->bt = -1;
  /* the tape copy of (x, v) and the checks of J and of the new state run
   * inside the substep, each by the thread that owns the particle or tet
   * (no serial pass over the state per substep); rigid models check the
   * state after it, with the same check */
  dsStepCheck ck;
  ck.tx = ck.tv = NULL;
  ck.act_prev = ck.fext_prev = NULL;
  ck.act_diff = ck.fext_diff = 0;
  ck.check = m->nbody == 0 && !m->artic;
  ck.bad_tet = INT_MAX;
  ck.bad_state = INT_MAX;
  if (T > 0) {
    if (t >= T) return ds__seterr(eb, DS_ERR_STATE, "substep %d: tape full (max_substeps %d)", t, T);
    if (m->nact && d->act_n >= d->act_cap && needs_record(d->act_tape, d->act_n, d->act, (size_t)m->nact))
      return ds__seterr(eb, DS_ERR_RANGE, "substep %d: activation tape full (%d records)", t, d->act_cap);
    if (d->fext_n >= d->fext_cap && needs_record(d->fext_tape, d->fext_n, d->f_ext, n3))
      return ds__seterr(eb, DS_ERR_RANGE, "substep %d: external-force tape full (%d records)", t, d->fext_cap);
    if (nb13 && d->bfext_n >= d->bfext_cap && needs_record(d->bfext_tape, d->bfext_n, d->body_fext, nb6))
      return ds__seterr(eb, DS_ERR_RANGE, "substep %d: body wrench tape full (%d records)", t, d->bfext_cap);
    if (d->ckpt == 1 || t % d->ckpt == 0) { /* x and v: by the particles' threads in the substep */
      size_t slot = (size_t)(d->ckpt == 1 ? t : t / d->ckpt);
      ck.tx = d->tape_x + slot * n3;
      ck.tv = d->tape_v + slot * n3;
      if (nb13) memcpy(d->tape_body + slot * nb13, d->body, nb13 * sizeof(dsReal));
      if (m->artic) memcpy(d->tape_artic + slot * nas, d->artic_state, nas * sizeof(dsReal));
    }
    if (m->artic_nu) memcpy(d->artic_act_tape + (size_t)t * m->artic_nu, d->artic_act, m->artic_nu * sizeof(dsReal));
    /* activations and external forces: compared with their last records
     * inside the substep, by all its threads (recorded after it) */
    if (m->nact && d->act_n > 0) ck.act_prev = d->act_tape + (size_t)(d->act_n - 1) * m->nact;
    if (d->fext_n > 0) ck.fext_prev = d->fext_tape + (size_t)(d->fext_n - 1) * n3;
    if (nb13) d->bfext_rec[t] = record(d->bfext_tape, &d->bfext_n, d->bfext_cap, d->body_fext, nb6);
    d->seg_start = -1;
  }
  size_t mark = ds__arena_mark(d);
  dsReal* ef = (dsReal*)ds__arena_alloc(d, 3 * (size_t)m->nslot * sizeof(dsReal), "ds_step");
  dsReal* J = ef ? (dsReal*)ds__arena_alloc(d, (size_t)m->ntet * sizeof(dsReal), "ds_step") : NULL;
  dsReal* fr = J && m->nbody ? (dsReal*)ds__arena_alloc(d, n3 * sizeof(dsReal), "ds_step") : NULL;
  if (!ef || !J || (m->nbody && !fr)) {
    ds__arena_free(d, mark);
    return DS_ERR_ARENA;
  }
  int rc = 0;
  if (m->integrator == DS_INTEGRATOR_IMPLICIT) /* backward Euler (engine/implicit.c) */
    rc = ds__implicit_step(m, d, ef, J, &ck);
  else if (m->artic) { /* an articulation (engine/artic_model.c) poses every particle */
    if (ck.tx) {
      memcpy(ck.tx, d->x, n3 * sizeof(dsReal));
      memcpy(ck.tv, d->v, n3 * sizeof(dsReal));
    }
    rc = ds__artic_substep_model(m, ((dsDataPriv*)d->err_)->art, d->artic_state, d->artic_act, d->artic_state, d->x,
                                 d->v);
    if (rc) rc = ds__seterr(eb, rc, "substep %d: articulation: mass matrix not positive definite", t);
  } else
    ds__substep(m, d->x, d->v, d->act, d->f_ext, ef, J, d->f, d->x, d->v, 1, d->body, d->body_fext, d->body, fr,
                &((dsDataPriv*)d->err_)->fwd, &ck);
  if (T > 0) { /* the tape checks above left room for a new record */
    if (m->nact)
      d->act_rec[t] = ck.act_prev && !ck.act_diff ? d->act_n - 1 : append(d->act_tape, &d->act_n, d->act, (size_t)m->nact);
    d->fext_rec[t] = ck.fext_prev && !ck.fext_diff ? d->fext_n - 1 : append(d->fext_tape, &d->fext_n, d->f_ext, n3);
  }
  const int bad_tet = ck.bad_tet; /* after the region's end */
  if (!rc && bad_tet != INT_MAX)
    rc = ds__seterr(eb, DS_ERR_INVERTED, "substep %d: tet %d inverted (J = %g)", t, bad_tet, (double)J[bad_tet]);
  ds__arena_free(d, mark);
  DS_ASSERT(d->arena_top == 0);
  for (size_t k = 0; k < nb13 && !rc; k++)
    if (!isfinite(d->body[k]))
      rc = ds__seterr(eb, DS_ERR_DIVERGED, "substep %d: body %d state is %s", t, (int)(k / 13),
                      isnan(d->body[k]) ? "NaN" : "Inf");
  if (!ck.check && !rc) /* rigid models: their vertices are posed after the gather, so checked here */
    for (int i = 0; i < np; i++) check_particle(&ck, d->x, d->v, i);
  if (!rc) {
    const int key = ck.bad_state; /* after the region, or the serial checks */
    if (key != INT_MAX) {
      const int k = key / 2;
      const dsReal bad = key % 2 ? d->v[k] : d->x[k];
      const char* what = key % 2 ? "velocity" : "position";
      const char* val = isnan(bad) ? "NaN" : "Inf";
      if (m->integrator == DS_INTEGRATOR_IMPLICIT)
        rc = ds__seterr(eb, DS_ERR_DIVERGED, "substep %d: particle %d %s is %s", t, k / 3, what, val);
      else /* above its stable step (~2 / omega_max) the state grows until it overflows: say so */
        rc = ds__seterr(eb, DS_ERR_DIVERGED,
                        "substep %d: particle %d %s is %s (a state that grows until it overflows is "
                        "semi-implicit Euler above its stable step, here dt %g s: use a smaller physics.dt or "
                        "physics.integrator implicit)", t, k / 3, what, val, (double)m->dt);
    }
  }
  if (rc) {
    d->failed = 1;
    return rc;
  }
  d->t = t + 1;
  return 0;
}

int ds_compute_forces(const dsModel* m, dsData* d) {
  if (!m || !d) return DS_ERR_INVALID;
  size_t mark = ds__arena_mark(d);
  dsReal* ef = (dsReal*)ds__arena_alloc(d, 3 * (size_t)m->nslot * sizeof(dsReal), "ds_compute_forces");
  dsReal* J = ef ? (dsReal*)ds__arena_alloc(d, (size_t)m->ntet * sizeof(dsReal), "ds_compute_forces") : NULL;
  dsReal* fr = J && m->nbody ? (dsReal*)ds__arena_alloc(d, 3 * (size_t)m->nparticle * sizeof(dsReal),
                                                         "ds_compute_forces") : NULL;
  if (!ef || !J || (m->nbody && !fr)) {
    ds__arena_free(d, mark);
    return DS_ERR_ARENA;
  }
  ds__substep(m, d->x, d->v, d->act, d->f_ext, ef, J, d->f, NULL, NULL, 0, d->body, d->body_fext, NULL, fr, NULL,
              NULL);
  ds__arena_free(d, mark);
  return 0;
}

/* ---- backward -----------------------------------------------------------------*/
int ds_backward_begin(const dsModel* m, dsData* d) {
  if (!m || !d) return DS_ERR_INVALID;
  if (d->failed) return ds__seterr(ds__data_err(d), DS_ERR_STATE, "backward: the episode diverged");
  return ds_backward_begin_at(m, d, d->t);
}

/* A failed substep left d->t at itself and wrote nothing to the tape that a
 * backward from t <= d->t reads: the substeps below it completed, and a
 * checkpointed segment is recomputed only up to d->t. */
int ds_backward_begin_at(const dsModel* m, dsData* d, int t) {
  if (!m || !d) return DS_ERR_INVALID;
  dsErrBuf* eb = ds__data_err(d);
  if (d->max_substeps == 0) return ds__seterr(eb, DS_ERR_STATE, "backward: the data has no tape (max_substeps 0)");
  if (t < 0 || t > d->t)
    return ds__seterr(eb, DS_ERR_RANGE, "backward: start substep %d outside [0, %d] (the substeps taken)", t, d->t);
  size_t n3 = 3 * (size_t)m->nparticle;
  memset(d->adj_x, 0, n3 * sizeof(dsReal));
  memset(d->adj_v, 0, n3 * sizeof(dsReal));
  if (m->nbody) {
    memset(d->adj_body, 0, 13 * (size_t)m->nbody * sizeof(dsReal));
    memset(d->adj_body_fext, 0, 6 * (size_t)m->nbody * sizeof(dsReal));
  }
  if (m->artic) {
    memset(d->adj_artic, 0, (size_t)(m->artic_nq + m->artic_nv) * sizeof(dsReal));
    memset(d->adj_artic_act, 0, (size_t)m->artic_nu * sizeof(dsReal));
  }
  d->bt = t;
  d->seg_start = -1;
  return 0;
}

/* Checkpointed tape: make seg_x/seg_v hold states s .. e of the segment
 * containing substep t (s = K floor(t/K), e = min(s + K, d->t)) by
 * re-running the same forward core from the checkpoint at s. */
static int load_segment(const dsModel* m, dsData* d, int t) {
  const int K = d->ckpt, s = (t / K) * K, e = s + K < d->t ? s + K : d->t;
  if (d->seg_start == s) return 0;
  const size_t n3 = 3 * (size_t)m->nparticle;
  size_t mark = ds__arena_mark(d);
  dsReal* ef = (dsReal*)ds__arena_alloc(d, 3 * (size_t)m->nslot * sizeof(dsReal), "ds_backward_step");
  dsReal* J = ef ? (dsReal*)ds__arena_alloc(d, (size_t)m->ntet * sizeof(dsReal), "ds_backward_step") : NULL;
  dsReal* fr = J && m->nbody ? (dsReal*)ds__arena_alloc(d, n3 * sizeof(dsReal), "ds_backward_step") : NULL;
  if (!ef || !J || (m->nbody && !fr)) {
    ds__arena_free(d, mark);
    return DS_ERR_ARENA;
  }
  const size_t nb13 = 13 * (size_t)m->nbody, nb6 = 6 * (size_t)m->nbody;
  memcpy(d->seg_x, d->tape_x + (size_t)(s / K) * n3, n3 * sizeof(dsReal));
  memcpy(d->seg_v, d->tape_v + (size_t)(s / K) * n3, n3 * sizeof(dsReal));
  if (nb13) memcpy(d->seg_body, d->tape_body + (size_t)(s / K) * nb13, nb13 * sizeof(dsReal));
  const size_t nas = (size_t)(m->artic_nq + m->artic_nv);
  if (nas) memcpy(d->seg_artic, d->tape_artic + (size_t)(s / K) * nas, nas * sizeof(dsReal));
  for (int j = s; j < e; j++) {
    if (m->artic) { /* the articulation's states only: the backward poses the vertices itself */
      const int rc = ds__artic_substep_model(m, ((dsDataPriv*)d->err_)->art, d->seg_artic + (size_t)(j - s) * nas,
                                             m->artic_nu ? d->artic_act_tape + (size_t)j * m->artic_nu : NULL,
                                             d->seg_artic + (size_t)(j - s + 1) * nas, NULL, NULL);
      if (rc) {
        ds__arena_free(d, mark);
        return rc;
      }
      continue;
    }
    const size_t o = (size_t)(j - s) * n3, ob = (size_t)(j - s) * nb13;
    const dsReal* act = m->nact ? d->act_tape + (size_t)d->act_rec[j] * m->nact : NULL;
    const dsReal* fext = d->fext_tape + (size_t)d->fext_rec[j] * n3;
    const dsReal* bfext = nb13 ? d->bfext_tape + (size_t)d->bfext_rec[j] * nb6 : NULL;
    if (m->integrator == DS_INTEGRATOR_IMPLICIT) { /* the same solve as ds_step's, so the same bits */
      dsDataPriv* dp = (dsDataPriv*)d->err_;
      const int rc = dp->imp ? ds__implicit_substep(m, dp->imp, d->seg_x + o, d->seg_v + o, act, fext,
                                                    d->seg_x + o + n3, d->seg_v + o + n3, ef, J, NULL, &dp->err, j)
                             : DS_ERR_STATE;
      if (rc) {
        ds__arena_free(d, mark);
        return rc;
      }
      continue;
    }
    ds__substep(m, d->seg_x + o, d->seg_v + o, act, fext, ef, J, NULL, d->seg_x + o + n3, d->seg_v + o + n3, 1,
                nb13 ? d->seg_body + ob : NULL, bfext, nb13 ? d->seg_body + ob + nb13 : NULL, fr,
                &((dsDataPriv*)d->err_)->fwd, NULL);
  }
  ds__arena_free(d, mark);
  d->seg_start = s;
  return 0;
}

/* ds_backward_step's stages A-C and the chained sums, run by every thread
 * of a team, or called without a region for one thread (see substep_team). */
typedef struct SubBwd {
  const dsModel* m;
  const dsForceLayout* L;
  const dsStepBwd* pa;
  const dsReal *xt, *vt, *act;
  dsReal *af, *aex, *aev;
  dsGrad* g;
  dsReal *adj_act, *scr;
  const dsReal *pre_x, *pre_v;
  size_t n3;
  int chain;
  dsDataPriv* dp;
  unsigned seq;
  const dsReal *scr_c, *av;
  int np;
  int* nteam;
} SubBwd;

static void backward_team(const SubBwd* s) {
  const dsModel* m = s->m;
  const dsForceLayout L = *s->L;
  const dsStepBwd pa = *s->pa;
  const dsReal *xt = s->xt, *vt = s->vt, *act = s->act, *pre_x = s->pre_x, *pre_v = s->pre_v, *scr_c = s->scr_c,
               *av = s->av;
  dsReal *af = s->af, *aex = s->aex, *aev = s->aev, *adj_act = s->adj_act, *scr = s->scr;
  dsGrad* g = s->g;
  const size_t n3 = s->n3;
  const int chain = s->chain, np = s->np;
  dsDataPriv* dp = s->dp;
  const unsigned seq = s->seq;
#ifdef _OPENMP
  const int tid = omp_get_thread_num(), nth = omp_get_num_threads();
#else
  const int tid = 0, nth = 1;
#endif
  int i0, i1; /* this thread's particles in stages A and C */
  ds__share(np, nth, tid, &i0, &i1);
  if (tid == 0) *s->nteam = nth;
  /* A: through the integrator */
  for (int i = i0; i < i1; i++) ds__integrate_bwd_particle(m, &pa, i);
#pragma omp barrier
  /* B: element adjoints, per element into its own slots, in list order */
  ds__forces_bwd_all(m, &L, xt, vt, act, af, aex, aev, g, adj_act, scr);
#pragma omp barrier
  /* C: gather element adjoints per particle in the forward's order; per-particle models
   * (the region's end is the barrier) */
  for (int i = i0; i < i1; i++) ds__gather_bwd_particle(m, &pa, i);
  /* the next backward step's taped state (full tape: rows t - 1, read
   * from memory, not from the cache) on its way while this step ends */
  if (pre_x) {
#pragma omp for schedule(static) nowait
    for (size_t o = 0; o < n3; o += 64 / sizeof(dsReal)) {
      prefetch(pre_x + o);
      prefetch(pre_v + o);
    }
  }
  /* the chained sums: [gravity 3 | contact 5] */
  if (chain) {
    dsReal acc[DS__CHAIN_N] = {0, 0, 0, 0, 0, 0, 0, 0};
    if (tid > 0) {
      const dsChainLink* prev = &dp->chain[tid - 1];
      for (unsigned spin = 1; atomic_load_explicit(&prev->ready, memory_order_acquire) != seq; spin++)
        ds__spin_wait(spin);
      memcpy(acc, prev->s, sizeof acc);
    }
    for (int i = i0; i < i1; i++) {
      if (m->inv_mass[i] > 0)
        for (int c = 0; c < 3; c++) acc[c] += av[3 * (size_t)i + c];
      if (scr_c)
        for (int k = 0; k < 5; k++) acc[3 + k] += scr_c[5 * (size_t)i + k];
    }
    dsChainLink* mine = &dp->chain[tid];
    memcpy(mine->s, acc, sizeof acc);
    atomic_store_explicit(&mine->ready, seq, memory_order_release);
  }
}

int ds_backward_step(const dsModel* m, dsData* d, dsGrad* g, dsReal* adj_act, dsReal* adj_fext) {
  if (!m || !d || !g || g->model != m) return DS_ERR_INVALID;
  dsErrBuf* eb = ds__data_err(d);
  if (d->bt <= 0) return ds__seterr(eb, DS_ERR_STATE, "backward: no substep to pop (bt = %d)", d->bt);
  const int t = d->bt - 1, np = m->nparticle;
  const size_t n3 = 3 * (size_t)np;
  const size_t nb13 = 13 * (size_t)m->nbody, nb6 = 6 * (size_t)m->nbody;
  const dsReal *xt, *vt, *vt1, *bst = NULL, *bst1 = NULL;
  if (d->ckpt > 1) {
    int rc = load_segment(m, d, t);
    if (rc) return rc;
    xt = d->seg_x + (size_t)(t - d->seg_start) * n3;
    vt = d->seg_v + (size_t)(t - d->seg_start) * n3;
    vt1 = vt + n3;
    if (nb13) {
      bst = d->seg_body + (size_t)(t - d->seg_start) * nb13;
      bst1 = bst + nb13;
    }
  } else {
    xt = d->tape_x + (size_t)t * n3;
    vt = d->tape_v + (size_t)t * n3;
    vt1 = t + 1 == d->t ? d->v : vt + n3;
    if (nb13) {
      bst = d->tape_body + (size_t)t * nb13;
      bst1 = t + 1 == d->t ? d->body : bst + nb13;
    }
  }
  const dsReal* act = m->nact ? d->act_tape + (size_t)d->act_rec[t] * m->nact : NULL;
  if (m->artic) { /* engine/artic_model.c: the vertices' adjoints, then the articulation's step */
    const size_t nas = (size_t)(m->artic_nq + m->artic_nv);
    const dsReal* s0 = d->ckpt > 1 ? d->seg_artic + (size_t)(t - d->seg_start) * nas : d->tape_artic + (size_t)t * nas;
    const dsReal* s1 = d->ckpt > 1 || t + 1 < d->t ? s0 + nas : d->artic_state;
    int rc = ds__artic_bwd(m, d, g, s0, s1, m->artic_nu ? d->artic_act_tape + (size_t)t * m->artic_nu : NULL);
    if (rc) return ds__seterr(eb, rc, "backward: substep %d: articulation: mass matrix not positive definite", t);
    if (adj_fext) memset(adj_fext, 0, n3 * sizeof(dsReal));
    d->bt = t;
    return 0;
  }

  dsForceLayout L;
  ds__force_layout(m, &L);
  size_t mark = ds__arena_mark(d);
  const size_t r = sizeof(dsReal), s3 = 3 * (size_t)m->nslot;
  dsReal* av = (dsReal*)ds__arena_alloc(d, n3 * r, "ds_backward_step");
  dsReal* af = av ? (dsReal*)ds__arena_alloc(d, n3 * r, "ds_backward_step") : NULL;
  dsReal* aex = af ? (dsReal*)ds__arena_alloc(d, s3 * r, "ds_backward_step") : NULL;
  dsReal* aev = aex ? (dsReal*)ds__arena_alloc(d, s3 * r, "ds_backward_step") : NULL;
  dsReal* scr = aev ? (dsReal*)ds__arena_alloc(d, L.nscratch * r, "ds_backward_step") : NULL;
  dsReal* agb = scr && nb13 ? (dsReal*)ds__arena_alloc(d, 3 * (size_t)m->nbody * r, "ds_backward_step") : NULL;
  if (!scr || (nb13 && !agb)) {
    ds__arena_free(d, mark);
    return DS_ERR_ARENA;
  }
  if (m->integrator == DS_INTEGRATOR_IMPLICIT) { /* adjoint by the implicit function theorem (engine/implicit.c) */
    dsDataPriv* dp = (dsDataPriv*)d->err_;
    const dsReal* xt1 = d->ckpt > 1 ? xt + n3 : (t + 1 == d->t ? d->x : xt + n3);
    const int rc = dp->imp ? ds__implicit_bwd(m, dp->imp, xt, vt, xt1, vt1, act, d->adj_x, d->adj_v, g, adj_act,
                                              adj_fext, af, aex, aev, scr, &dp->err, t)
                           : ds__seterr(eb, DS_ERR_STATE, "backward: the data was created for a semi-implicit model");
    ds__arena_free(d, mark);
    if (!rc) d->bt = t;
    return rc;
  }
  const dsReal dt = m->dt;
  const dsReal* pre_x = d->ckpt == 1 && t > 0 ? d->tape_x + (size_t)(t - 1) * n3 : NULL;
  const dsReal* pre_v = pre_x ? d->tape_v + (size_t)(t - 1) * n3 : NULL;
  dsStepBwd pa = {xt, vt, vt1, aex, aev, d->adj_x, d->adj_v, av, af, adj_fext, g, {0}};
  for (int k = 0; k < DS__NFORCE; k++) pa.scr[k] = L.count[k] ? scr + L.scratch[k] : NULL;
  dsDataPriv* dp = (dsDataPriv*)d->err_;
  dsThreadPick* pick = &dp->bwd;
  int arm;
  const int nt = ds__pick_begin(pick, m->nslot + np, DS__PAR_MIN, &arm);
  const double t0 = arm >= 0 ? ds__clock() : 0;
  /* The shared scalars' sums over the particles (gravity's and the
   * contact's, in particle order) as a chain over the threads: each thread
   * continues the sums of the thread before it over its own particles, the
   * same additions in the same order as one serial loop, so the same bits
   * for any thread count. A serial loop after the region read every
   * particle's terms from the cores that wrote them, and the next step's
   * writes had to take the lines back: on a 480-particle gear that cost the
   * second thread about 5 us per substep of its 28. Rigid models keep the
   * serial sums (their vertices' terms come from the body stage). */
  const int chain = !nb13 && nt <= dp->nchain;
  const unsigned seq = ++dp->chain_seq;
  const dsReal* scr_c = L.count[DS__F_CONTACT] ? scr + L.scratch[DS__F_CONTACT] : NULL;
  int nteam = 1;
  /* R: rigid bodies first (engine/rigid.h): their vertices' adjoints of the
   * later state go into the body's, the body's through Newton-Euler; the
   * vertices' force adjoints land in af (av = 0) for the stages below. */
  if (nb13) {
    const dsReal* fext_t = d->fext_tape + (size_t)d->fext_rec[t] * n3;
    const dsReal* bfext_t = d->bfext_tape + (size_t)d->bfext_rec[t] * nb6;
    memset(agb, 0, 3 * (size_t)m->nbody * r);
#define DS__RIGID_BWD(b)                                                                                  \
  ds__rigid_bwd(m, b, xt, vt, fext_t, bst, bst1, bfext_t, d->adj_x, d->adj_v, d->adj_body, af, av, d->adj_body_fext, \
                g, agb + 3 * (size_t)(b))
    if (region_needed(nt)) {
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1)
      for (int b = 0; b < m->nbody; b++) DS__RIGID_BWD(b);
    } else /* no region for one thread (see substep_team) */
      for (int b = 0; b < m->nbody; b++) DS__RIGID_BWD(b);
#undef DS__RIGID_BWD
  }
  const SubBwd sb = {m, &L, &pa, xt, vt, act, af, aex, aev, g, adj_act, scr, pre_x, pre_v, n3, chain, dp, seq, scr_c, av,
                     np, &nteam};
  if (region_needed(nt)) {
#pragma omp parallel num_threads(nt) if (nt > 1)
    backward_team(&sb);
  } else
    backward_team(&sb);
  if (arm >= 0) ds__pick_end(pick, arm, ds__clock() - t0);
  /* shared scalars: sums in element order (the chain's, or serial) */
  dsReal sg[3] = {0, 0, 0};
  if (chain) {
    const dsReal* s = dp->chain[nteam - 1].s;
    for (int c = 0; c < 3; c++) sg[c] = s[c];
    if (scr_c) ds__contact_reduce_store(s + 3, g);
  } else {
    for (int i = 0; i < np; i++)
      if (m->inv_mass[i] > 0)
        for (int c = 0; c < 3; c++) sg[c] += av[3 * i + c];
  }
  for (int c = 0; c < 3; c++) g->gravity[c] += dt * sg[c];
  if (nb13) {
    dsReal gb[3] = {0, 0, 0};
    for (int b = 0; b < m->nbody; b++)
      for (int c = 0; c < 3; c++) gb[c] += agb[3 * (size_t)b + c];
    for (int c = 0; c < 3; c++) g->gravity[c] += gb[c];
  }
  for (int k = 0; k < DS__NFORCE; k++)
    if (ds__forces[k].reduce && L.count[k] && !(chain && k == DS__F_CONTACT))
      ds__forces[k].reduce(m, scr + L.scratch[k], g);
  ds__arena_free(d, mark);
  d->bt = t;
  return 0;
}

int ds_backward_finish(const dsModel* m, dsData* d, dsGrad* g) {
  if (!m || !d || !g || g->model != m) return DS_ERR_INVALID;
  if (d->bt != 0)
    return ds__seterr(ds__data_err(d), DS_ERR_STATE, "backward: finish at substep %d (must be 0)", d->bt);
  const size_t n3 = 3 * (size_t)m->nparticle;
  if (m->nbody) ds__rigid_finish(m, d->t == 0 ? d->body : d->tape_body, d->adj_x, d->adj_v, d->adj_body, g);
  if (m->artic) ds__artic_finish(m, d, g, d->t == 0 ? d->artic_state : d->tape_artic);
  for (size_t k = 0; k < n3; k++) {
    g->x0[k] += d->adj_x[k];
    g->v0[k] += d->adj_v[k];
  }
  d->bt = -1;
  return 0;
}

int ds_backward(const dsModel* m, dsData* d, dsGrad* g, const dsReal* adj_xT, const dsReal* adj_vT, dsReal* adj_act,
                dsReal* adj_fext) {
  if (!m || !d || !g) return DS_ERR_INVALID;
  int rc = ds_backward_begin(m, d);
  if (rc) return rc;
  const size_t n3 = 3 * (size_t)m->nparticle;
  for (size_t k = 0; k < n3; k++) {
    if (adj_xT) d->adj_x[k] += adj_xT[k];
    if (adj_vT) d->adj_v[k] += adj_vT[k];
  }
  while (d->bt > 0) {
    const size_t t = (size_t)d->bt - 1;
    rc = ds_backward_step(m, d, g, adj_act ? adj_act + t * m->nact : NULL, adj_fext ? adj_fext + t * n3 : NULL);
    if (rc) return rc;
  }
  return ds_backward_finish(m, d, g);
}

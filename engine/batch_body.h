/* The batched step and backward as single-source stages: one DS_HD
 * function per stage, called for (element or particle index e, instance b)
 * with plain arrays. engine/batch_cpu.c runs them in OpenMP loops over
 * (b, e); cuda/batch.cu launches them from kernels, one thread per (b, e).
 *
 * The per-element and per-particle work is the engine's own bodies, the
 * ones engine/step.c's loops call (engine/force_loop.h "Bodies"):
 * ds__<model>_fwd_elem / _bwd_elem of engine/force_*.h and
 * ds__gather_fwd_particle, ds__integrate_bwd_particle,
 * ds__gather_bwd_particle of engine/step_body.h. A stage here only builds
 * their argument structs with instance b's offsets and calls them, so an
 * instance gives the bits of ds_step / ds_backward_step on its own model
 * (tests/test_batch_sim.c). What is the batch's own: the per-instance serial
 * sums of the shared scalars (REDUCE: the same sums as ds_backward_step's
 * tail, whose force-table `reduce` rows are host functions), failure flags
 * and their report (CHECK), the initial state (RESET), the caller's
 * adjoints (ADD_ADJ), the control adjoints summed over substeps
 * (ACCUMULATE) and the initial-state gradient (FINISH). Articulated models
 * and the implicit integrator run host stages instead, one call per
 * instance into the serial engine's functions (DS__BS_ARTIC_*,
 * DS__BS_IMPLICIT_*: engine/batch_artic.c, engine/batch_implicit.c).
 *
 * Instance b reads its model through mv[b], a dsModel whose differentiable
 * arrays (and inverse masses) point at b's own parameters and whose other
 * arrays (topology, rest shapes, incidence lists) are shared; its gradient
 * is gv[b]. Every other array is instance-major: b's block of a B x n array
 * starts at b n.
 *
 * The stages come from the force list (DS_FORCE_MODELS, engine/forces.h):
 * each element row (kind ELEM or ELEM_J) has a forward and a backward stage,
 * DS__BS_<ROW>_FWD and DS__BS_<ROW>_BWD, whose body is the row's
 * ds__<name>_fwd_elem / _bwd_elem; the per-particle rows run inside the
 * gather bodies; the SHARED rows' partials are REDUCE's sums. Nothing here
 * names a force model, so a new row gets its batched stages (and its CUDA
 * kernels, cuda/batch.cu) without an edit here.
 *
 * Stages of one substep (each runs after the previous one has finished for
 * every (b, e)):
 *   forward:  the element stages in list order (today SPRING, TRI, AERO,
 *             which adds into the triangles' slots, BEND, TET) into slots;
 *             GATHER: each particle sums its slots in incidence order, adds
 *             the per-particle models (contact), integrates.
 *   backward: INTEG (adjoint through the integrator, mass gradient), the
 *             element adjoints in the same list order into slots, GATHER_BWD
 *             (sum the slot adjoints, per-particle adjoints), REDUCE (per
 *             instance: gravity and the shared scalars' partials summed
 *             serially in element order, as the engine does), ACCUMULATE;
 *             FINISH (per particle, the initial-state gradient) at the end.
 * No stage sums across threads: results do not depend on the schedule. */
#ifndef DSIM_ENGINE_BATCH_BODY_H
#define DSIM_ENGINE_BATCH_BODY_H

#include "engine/forces.h"
#include "engine/step_body.h"

/* REDUCE runs this many independent sums per instance (ds__bs_reduce). */
#define DS__BS_NREDUCE DS__NSHARED

/* The stages: the element rows' forward stages, the gather, the
 * integrator's adjoint, the element rows' backward stages, the gather's
 * adjoint, then the batch's own. DS__BS_ELEM_FWD0 .. DS__BS_GATHER_FWD - 1
 * are the forward element stages in list order, DS__BS_ELEM_BWD0 ..
 * DS__BS_GATHER_BWD - 1 the backward ones. */
enum {
  DS__BS_ELEM_FWD0,
  DS__BS_ELEM_FWD_LAST_ = DS__BS_ELEM_FWD0 - 1,
#define DS__BS_FWD_ID(row, name, kind, shared, nshared) DS__IF_ELEM_##kind(DS__BS_##row##_FWD, )
  DS_FORCE_MODELS(DS__BS_FWD_ID)
#undef DS__BS_FWD_ID
  DS__BS_GATHER_FWD,
  DS__BS_INTEG_BWD,
  DS__BS_ELEM_BWD0,
  DS__BS_ELEM_BWD_LAST_ = DS__BS_ELEM_BWD0 - 1,
#define DS__BS_BWD_ID(row, name, kind, shared, nshared) DS__IF_ELEM_##kind(DS__BS_##row##_BWD, )
  DS_FORCE_MODELS(DS__BS_BWD_ID)
#undef DS__BS_BWD_ID
  DS__BS_GATHER_BWD,
  DS__BS_REDUCE,
  DS__BS_FINISH,
  DS__BS_CHECK,
  DS__BS_RESET,
  DS__BS_ADD_ADJ,
  DS__BS_ACCUMULATE,
  /* an articulated model (one pair per instance): its substep, the
     substep's adjoint, the initial state, the initial state's gradient */
  DS__BS_ARTIC_FWD,
  DS__BS_ARTIC_BWD,
  DS__BS_ARTIC_RESET,
  DS__BS_ARTIC_FINISH,
  /* a model with the implicit integrator (one pair per instance): its
     substep (Newton's solve) and the substep's adjoint (one transposed solve) */
  DS__BS_IMPLICIT_FWD,
  DS__BS_IMPLICIT_BWD,
  DS__BS_COUNT
};

/* The articulation stages run the engine's articulation kernels
 * (engine/batch_artic_body.h over engine/artic_model_body.h and
 * engine/artic_step.h, DS_HD), one call per instance: the CPU backend's
 * through engine/batch_artic.c, the CUDA backend's in its kernels. */
#define DS__BS_IS_ARTIC(stage) ((stage) >= DS__BS_ARTIC_FWD && (stage) <= DS__BS_ARTIC_FINISH)
/* Work of one articulation pair in units of a particle pair, for the CPU
 * backend's choice of threads: a substep of a small articulation is some
 * 10^4 flops against some 10 for a particle. */
#define DS__BS_ARTIC_WEIGHT 1024
/* The implicit integrator's stages run the engine's own implicit substep
 * and adjoint (engine/implicit.c), host code with per-instance solver
 * workspaces: one call per instance, in engine/batch_implicit.c. The CUDA
 * backend compiles them as no-ops (the batch refuses the implicit
 * integrator on CUDA). */
#define DS__BS_IS_IMPLICIT(stage) ((stage) == DS__BS_IMPLICIT_FWD || (stage) == DS__BS_IMPLICIT_BWD)
/* Stages that run host code once per instance (the CPU backend only). */
#define DS__BS_IS_HOST(stage) (DS__BS_IS_ARTIC(stage) || DS__BS_IS_IMPLICIT(stage))

/* Arrays of one stage launch. Sizes per instance: n3 = 3 nparticle,
 * s3 = 3 nslot; the bad-cell array holds ntet + nparticle ints. */
typedef struct dsBatchArgs {
  const dsModel* mv; /* B model views */
  dsGrad* gv;        /* B gradient views (backward) */
  int B, np, nslot, nact, ntet; /* counts (the same in every view) */
  int count[DS__NFORCE];   /* elements (particles) of each force model; 0: off */
  int slot[DS__NFORCE];    /* first slot of each force model (the owner's for an `into` one) */
  int actb[DS__NFORCE];    /* first activation, -1: none */
  int scr[DS__NFORCE];     /* first scratch real of each model, per instance */
  int nscr;                /* scratch reals per instance */
  int t;                   /* substep being computed (flags record t + 1) */
  /* forward */
  const dsReal* x;  /* B x n3: state at t */
  const dsReal* v;
  const dsReal* act;  /* B x nact, NULL: 0 */
  const dsReal* fext; /* B x n3, NULL: 0 */
  dsReal* ef;         /* B x s3 slots */
  dsReal* J;          /* B x ntet */
  dsReal* xo;         /* B x n3: state at t + 1 */
  dsReal* vo;
  dsReal* xc;         /* NULL, or a second copy of the state at t + 1 (checkpoint) */
  dsReal* vc;
  int* bad;           /* NULL, or B x (ntet + np): substep + 1 of the first bad J / non-finite x, v */
  int* status;        /* CHECK: B x 3 (code, substep, element or particle) */
  /* backward */
  const dsReal* v1;   /* B x n3: velocities at t + 1 (mass gradient) */
  dsReal* adj_x;      /* B x n3: in: adjoints of state t + 1; out: of state t */
  dsReal* adj_v;
  dsReal* av;         /* B x n3 scratch: adjoint of v' */
  dsReal* af;         /* B x n3 scratch: adjoint of the total force */
  dsReal* aex;        /* B x s3 slot adjoints (x) */
  dsReal* aev;        /* B x s3 slot adjoints (v) */
  dsReal* scratch;    /* B x nscr partials of shared scalars */
  dsReal* adj_act_t;  /* B x nact: this substep's dL/d(act), written by the element bodies */
  dsReal* adj_act;    /* B x nact, += adj_act_t per substep; NULL: not wanted */
  dsReal* adj_fext;   /* B x n3, += af per substep; NULL: not wanted */
  /* an articulated model (nas = nq + nv of its state, 0: none); act is then
     B x nact of the articulation's actions (nact = its nu) */
  int nas;
  struct dsArticScratch* const* ascr; /* B: instance b's articulation scratch (backend memory, engine/batch_artic.h) */
  const dsReal* as;   /* B x nas: state at t */
  dsReal* aso;        /* B x nas: state at t + 1 (forward) */
  dsReal* asc;        /* NULL, or a second copy of it (checkpoint) */
  dsReal* aadj;       /* B x nas: in: adjoint of state t + 1; out: of state t */
  /* the implicit integrator: the batch's per-instance solver contexts
     (host, engine/batch_implicit.h), NULL for a semi-implicit model */
  void* imp;
} dsBatchArgs;

/* A particle's failure flag with this bit: its articulation's step failed
 * (engine/batch_artic_body.h); status[2] is then -2. */
#define DS__BS_ARTIC_FAILED (1 << 30)

#if defined(__CUDACC__)
/* the articulation stages' bodies, compiled into the CUDA kernels */
#  include "engine/batch_artic_body.h"
#else
/* engine/batch_artic.c: articulation stage `stage` for instance b
 * (engine/batch_artic_body.h's ds__bs_artic_run, compiled once for the host) */
void ds__bs_artic(int stage, const dsBatchArgs* a, int b);
/* engine/batch_implicit.c: implicit-integrator stage `stage` for instance b
 * (host only: the CUDA backend refuses the implicit integrator) */
void ds__bs_implicit(int stage, const dsBatchArgs* a, int b);
#endif

/* One kernel launch: up to DS__BL_PARTS parts that run side by side
 * (disjoint threads, any order: the driver only puts together stages that
 * read nothing another part of the launch writes), each a chain of up to
 * DS__BL_OPS stages over the same count x B (index, instance) pairs, run
 * one after another by the pair's thread (the driver only chains stages in
 * which pair (e, b) of a later stage reads nothing but what pair (e, b) of
 * the earlier ones wrote, besides what no stage of the chain writes). The
 * driver puts a backward substep's work into two launches this way (see
 * ds_bsim_backward_step); launches of one stage are the common case.
 * Backends: the CPU runs the parts last to first and a chain's stages per
 * pair, so a part that read another's output, or a chained stage that read
 * another pair's output, would show in the CPU tests' bitwise comparison
 * with the serial engine; CUDA runs the parts concurrently. */
#define DS__BL_PARTS 3
#define DS__BL_OPS 2
typedef struct dsBatchPart {
  int count;                  /* indices per instance */
  int nops;                   /* 1 .. DS__BL_OPS */
  int stage[DS__BL_OPS];
  dsBatchArgs a[DS__BL_OPS];
} dsBatchPart;
typedef struct dsBatchLaunch {
  int nparts;                 /* 1 .. DS__BL_PARTS */
  int B;
  dsBatchPart part[DS__BL_PARTS];
} dsBatchLaunch;

/* The force row of an element stage; -1 for the other stages. */
DS_HD DS_INLINE int ds__bstage_model(int stage) {
  switch (stage) {
#define DS__BS_MODEL_CASE(row, name, kind, shared, nshared) \
  DS__IF_ELEM_##kind(case DS__BS_##row##_FWD: case DS__BS_##row##_BWD: return DS__F_##row;)
    DS_FORCE_MODELS(DS__BS_MODEL_CASE)
#undef DS__BS_MODEL_CASE
    default: return -1;
  }
}

/* Elements (or particles, or 1) a stage runs over, per instance. Host
 * code calls it, so it reads only the counts in a, never a->mv (device
 * memory on a GPU). */
DS_HD DS_INLINE int ds__bstage_count(const dsBatchArgs* a, int stage) {
  const int f = ds__bstage_model(stage);
  if (f >= 0) return a->count[f];
  switch (stage) {
    case DS__BS_GATHER_FWD: case DS__BS_INTEG_BWD: case DS__BS_GATHER_BWD: case DS__BS_FINISH:
    case DS__BS_RESET: case DS__BS_ADD_ADJ: return a->np;
    case DS__BS_ACCUMULATE: return a->nact + a->np;
    case DS__BS_REDUCE: return DS__BS_NREDUCE;
    case DS__BS_ARTIC_FWD: case DS__BS_ARTIC_BWD: case DS__BS_ARTIC_RESET: case DS__BS_ARTIC_FINISH:
      return a->nas > 0 ? 1 : 0;
    case DS__BS_IMPLICIT_FWD: case DS__BS_IMPLICIT_BWD: return a->imp ? 1 : 0;
    default: return 1;
  }
}

#define DS__BN3(a, b) ((size_t)(b) * 3 * (size_t)(a)->np)
#define DS__BS3(a, b) ((size_t)(b) * 3 * (size_t)(a)->nslot)

/* ---- per-instance argument structs of the engine's bodies ------------------------- */
/* Model k's dsForceFwd for instance b (engine/force_loop.h). */
DS_HD DS_INLINE dsForceFwd ds__bs_ffwd(const dsBatchArgs* a, int k, int b) {
  dsForceFwd f;
  f.x = a->x + DS__BN3(a, b);
  f.v = a->v + DS__BN3(a, b);
  f.act = a->act && a->actb[k] >= 0 ? a->act + (size_t)b * a->nact + a->actb[k] : 0;
  f.ef = a->ef + DS__BS3(a, b) + 3 * (size_t)a->slot[k];
  f.J = a->J + (size_t)b * a->ntet;
  f.bad = 0; /* the batch records its own (ds__bs_elem_fwd) */
  return f;
}

/* Model k's dsForceBwd for instance b; adj_act is the per-substep block. */
DS_HD DS_INLINE dsForceBwd ds__bs_fbwd(const dsBatchArgs* a, int k, int b) {
  dsForceBwd f;
  f.x = a->x + DS__BN3(a, b);
  f.v = a->v + DS__BN3(a, b);
  f.act = a->act && a->actb[k] >= 0 ? a->act + (size_t)b * a->nact + a->actb[k] : 0;
  f.af = a->af + DS__BN3(a, b);
  f.aex = a->aex + DS__BS3(a, b) + 3 * (size_t)a->slot[k];
  f.aev = a->aev + DS__BS3(a, b) + 3 * (size_t)a->slot[k];
  f.g = a->gv + b;
  f.adj_act = a->adj_act_t && a->actb[k] >= 0 ? a->adj_act_t + (size_t)b * a->nact + a->actb[k] : 0;
  f.scratch = a->scratch + (size_t)b * a->nscr + a->scr[k];
  return f;
}

DS_HD DS_INLINE dsStepBwd ds__bs_sbwd(const dsBatchArgs* a, int b) {
  dsStepBwd s;
  const size_t o = DS__BN3(a, b);
  s.xt = a->x + o;
  s.vt = a->v + o;
  s.vt1 = a->v1 + o;
  s.aex = a->aex + DS__BS3(a, b);
  s.aev = a->aev + DS__BS3(a, b);
  s.adj_x = a->adj_x + o;
  s.adj_v = a->adj_v + o;
  s.av = a->av + o;
  s.af = a->af + o;
  s.adj_fext = 0; /* accumulated from af by DS__BS_ACCUMULATE */
  s.g = a->gv + b;
  for (int k = 0; k < DS__NFORCE; k++) s.scr[k] = a->count[k] ? a->scratch + (size_t)b * a->nscr + a->scr[k] : 0;
  return s;
}

/* ---- forward: the engine's element bodies, then its particle body ------------------ */
/* An ELEM_J row's element e after its forward: flag a J that is not > 0
 * (inverted, degenerate or NaN) with the substep. */
DS_HD DS_INLINE void ds__bs_check_J(const dsBatchArgs* a, const dsForceFwd* f, int e, int b) {
  if (a->bad && !(f->J[e] > 0)) {
    int* c = a->bad + (size_t)b * (a->ntet + a->np) + e;
    if (*c == 0) *c = a->t + 1;
  }
}

DS_HD DS_INLINE void ds__bs_elem_fwd(const dsBatchArgs* a, int stage, int e, int b) {
  const dsModel* m = a->mv + b;
  dsForceFwd f;
  switch (stage) {
#define DS__BS_FWD_CASE(row, name, kind, shared, nshared) \
  DS__IF_ELEM_##kind(case DS__BS_##row##_FWD: f = ds__bs_ffwd(a, DS__F_##row, b); \
                     ds__##name##_fwd_elem(m, &f, e); DS__IF_J_##kind(ds__bs_check_J(a, &f, e, b);) break;)
    DS_FORCE_MODELS(DS__BS_FWD_CASE)
#undef DS__BS_FWD_CASE
    default: break;
  }
}

/* The engine's gather + contact + integrator (engine/step_body.h), then the
 * checkpoint copy and the finiteness flag of particle i. */
DS_HD DS_INLINE void ds__bs_gather_fwd(const dsBatchArgs* a, int i, int b) {
  const size_t o = DS__BN3(a, b);
  dsStepFwd sf;
  sf.x = a->x + o;
  sf.v = a->v + o;
  sf.fext = a->fext ? a->fext + o : 0;
  sf.ef = a->ef + DS__BS3(a, b);
  sf.f = 0;
  sf.fr = 0;
  sf.xo = a->xo + o;
  sf.vo = a->vo + o;
  sf.integrate = 1;
  ds__gather_fwd_particle(a->mv + b, &sf, i);
  const dsReal* xo = a->xo + o + 3 * (size_t)i;
  const dsReal* vo = a->vo + o + 3 * (size_t)i;
  if (a->xc) {
    dsReal* xc = a->xc + o + 3 * (size_t)i;
    dsReal* vc = a->vc + o + 3 * (size_t)i;
    for (int c = 0; c < 3; c++) {
      xc[c] = xo[c];
      vc[c] = vo[c];
    }
  }
  if (a->bad) {
    /* (q - q == 0) is false exactly for NaN and Inf */
    int fin = 1;
    for (int c = 0; c < 3; c++) fin = fin && (xo[c] - xo[c] == 0) && (vo[c] - vo[c] == 0);
    int* cell = a->bad + (size_t)b * (a->ntet + a->np) + a->ntet + i;
    if (!fin && *cell == 0) *cell = a->t + 1;
  }
}

/* ---- backward: integrator adjoint, element adjoints, gather --------------------------- */
DS_HD DS_INLINE void ds__bs_integ_bwd(const dsBatchArgs* a, int i, int b) {
  const dsStepBwd sb = ds__bs_sbwd(a, b);
  ds__integrate_bwd_particle(a->mv + b, &sb, i);
}

DS_HD DS_INLINE void ds__bs_elem_bwd(const dsBatchArgs* a, int stage, int e, int b) {
  const dsModel* m = a->mv + b;
  dsForceBwd f;
  switch (stage) {
#define DS__BS_BWD_CASE(row, name, kind, shared, nshared) \
  DS__IF_ELEM_##kind(case DS__BS_##row##_BWD: f = ds__bs_fbwd(a, DS__F_##row, b); \
                     ds__##name##_bwd_elem(m, &f, e); break;)
    DS_FORCE_MODELS(DS__BS_BWD_CASE)
#undef DS__BS_BWD_CASE
    default: break;
  }
}

DS_HD DS_INLINE void ds__bs_gather_bwd(const dsBatchArgs* a, int i, int b) {
  const dsStepBwd sb = ds__bs_sbwd(a, b);
  ds__gather_bwd_particle(a->mv + b, &sb, i);
}

/* ---- the control adjoints summed over the substeps of a backward call ------------------
 * index k < nact: adj_act += this substep's; else particle k - nact:
 * adj_fext += af (dL/d f_ext = dL/d(total force)). */
DS_HD DS_INLINE void ds__bs_accumulate(const dsBatchArgs* a, int k, int b) {
  if (k < a->nact) {
    const size_t q = (size_t)b * a->nact + k;
    if (a->adj_act) a->adj_act[q] += a->adj_act_t[q];
    return;
  }
  if (!a->adj_fext) return;
  const size_t o = DS__BN3(a, b) + 3 * (size_t)(k - a->nact);
  for (int c = 0; c < 3; c++) a->adj_fext[o + c] += a->af[o + c];
}

/* ---- per instance: the shared scalars, serially in element order -------------------- */
/* DS__BS_NREDUCE independent serial sums per instance, one per index k:
 * gravity x, y, z (k < 3), then each SHARED row's nshared scalars in list
 * order (today aero lift and drag, 3 and 4; contact ke, kd, kf, mu, skin,
 * 5..9). Each is the engine's own sum in the engine's order (a component at
 * a time gives the same bits as all at once), so a GPU runs that many sums
 * per instance instead of one. A sum is split into its terms (term i of sum
 * k, in order), its length and the store of its total, so that a backend
 * may fetch the terms in parallel (cuda/batch.cu stages them in shared
 * memory) and still add them one after another: the same bits as the loop
 * of ds__bs_reduce. A skipped term (a pinned particle's gravity) is +0,
 * which leaves a sum that starts at +0 unchanged bit for bit. */

/* The SHARED row of sum k >= 3 and its scalar j within the row; -1: none. */
DS_HD DS_INLINE int ds__bs_reduce_row(int k, int* j) {
  int first = 3;
#define DS__BS_REDUCE_ROW(row, name, kind, shared, nshared) \
  DS__IF_SH_##shared(if (k < first + (nshared)) {           \
    *j = k - first;                                          \
    return DS__F_##row;                                      \
  } first += (nshared);)
  DS_FORCE_MODELS(DS__BS_REDUCE_ROW)
#undef DS__BS_REDUCE_ROW
  (void)first;
  *j = 0;
  return -1;
}

DS_HD DS_INLINE int ds__bs_reduce_len(const dsBatchArgs* a, int k) {
  if (k < 3) return a->np;
  int j;
  const int f = ds__bs_reduce_row(k, &j);
  return f >= 0 && a->count[f] > 0 ? a->count[f] : -1; /* -1: the sum is off (nothing stored) */
}

/* Scalars per element of SHARED row f (its scratch stride). */
DS_HD DS_INLINE int ds__bs_nshared(int f) {
  switch (f) {
#define DS__BS_NSH_CASE(row, name, kind, shared, nshared) DS__IF_SH_##shared(case DS__F_##row: return nshared;)
    DS_FORCE_MODELS(DS__BS_NSH_CASE)
#undef DS__BS_NSH_CASE
    default: return 0;
  }
}

DS_HD DS_INLINE dsReal ds__bs_reduce_term(const dsBatchArgs* a, int k, int b, int i) {
  if (k < 3) { /* ds_backward_step: dL/dg += dt sum over free particles of av */
    const dsModel* m = a->mv + b;
    return m->inv_mass[i] > 0 ? a->av[DS__BN3(a, b) + 3 * (size_t)i + k] : (dsReal)0;
  }
  int j;
  const int f = ds__bs_reduce_row(k, &j); /* the row's `reduce` sums the same partials */
  if (f < 0) return 0;
  const dsReal* sc = a->scratch + (size_t)b * a->nscr + a->scr[f];
  return sc[j + (size_t)ds__bs_nshared(f) * i];
}

DS_HD DS_INLINE void ds__bs_reduce_store(const dsBatchArgs* a, int k, int b, dsReal sum) {
  dsGrad* g = a->gv + b;
  if (k < 3) {
    g->gravity[k] += a->mv[b].dt * sum;
    return;
  }
  int j;
  switch (ds__bs_reduce_row(k, &j)) {
#define DS__BS_STORE_CASE(row, name, kind, shared, nshared) \
  DS__IF_SH_##shared(case DS__F_##row: ds__##name##_shared_add(g, j, sum); break;)
    DS_FORCE_MODELS(DS__BS_STORE_CASE)
#undef DS__BS_STORE_CASE
    default: break;
  }
}

DS_HD DS_INLINE void ds__bs_reduce(const dsBatchArgs* a, int k, int b) {
  const int n = ds__bs_reduce_len(a, k);
  if (n < 0) return;
  dsReal sum = 0;
  for (int i = 0; i < n; i++) sum += ds__bs_reduce_term(a, k, b, i);
  ds__bs_reduce_store(a, k, b, sum);
}


/* ---- per particle: the initial state's gradient (ds_backward_finish) ------------------ */
DS_HD DS_INLINE void ds__bs_finish(const dsBatchArgs* a, int i, int b) {
  dsGrad* g = a->gv + b;
  const size_t o = DS__BN3(a, b);
  for (int c = 0; c < 3; c++) {
    g->x0[3 * (size_t)i + c] += a->adj_x[o + 3 * (size_t)i + c];
    g->v0[3 * (size_t)i + c] += a->adj_v[o + 3 * (size_t)i + c];
  }
}

/* ---- per instance: first failure (earliest substep, then lowest index; tets first) ---- */
DS_HD DS_INLINE void ds__bs_check(const dsBatchArgs* a, int e, int b) {
  (void)e;
  const int n = a->ntet + a->np;
  const int* c = a->bad + (size_t)b * n;
  int best = 0, at = -1;
  for (int k = 0; k < n; k++)
    if (c[k] && (best == 0 || c[k] < best)) {
      best = c[k];
      at = k;
    }
  int* st = a->status + 3 * (size_t)b;
  if (at < 0) {
    st[0] = 0;
    st[1] = 0;
    st[2] = 0;
  } else if (at < a->ntet) {
    st[0] = DS_ERR_INVERTED;
    st[1] = best - 1;
    st[2] = at;
  } else {
    st[0] = DS_ERR_DIVERGED;
    st[1] = (best & ~DS__BS_ARTIC_FAILED) - 1;
    st[2] = best & DS__BS_ARTIC_FAILED ? -2 : at - a->ntet;
  }
}

/* ---- per particle: initial state; caller's adjoints added ----------------------------- */
DS_HD DS_INLINE void ds__bs_reset(const dsBatchArgs* a, int i, int b) {
  const dsModel* m = a->mv + b;
  const size_t o = DS__BN3(a, b) + 3 * (size_t)i;
  for (int c = 0; c < 3; c++) {
    a->xo[o + c] = m->x0[3 * (size_t)i + c];
    a->vo[o + c] = m->v0[3 * (size_t)i + c];
    if (a->xc) {
      a->xc[o + c] = m->x0[3 * (size_t)i + c];
      a->vc[o + c] = m->v0[3 * (size_t)i + c];
    }
  }
}

DS_HD DS_INLINE void ds__bs_add_adj(const dsBatchArgs* a, int i, int b) {
  const size_t o = DS__BN3(a, b) + 3 * (size_t)i;
  for (int c = 0; c < 3; c++) {
    a->adj_x[o + c] += a->av[o + c];
    if (a->af) a->adj_v[o + c] += a->af[o + c];
  }
}

/* One stage for (e, b); `stage` is the same for a whole launch. */
DS_HD DS_INLINE void ds__bstage_run(int stage, const dsBatchArgs* a, int e, int b) {
  if (stage >= DS__BS_ELEM_FWD0 && stage < DS__BS_GATHER_FWD) {
    ds__bs_elem_fwd(a, stage, e, b);
    return;
  }
  if (stage >= DS__BS_ELEM_BWD0 && stage < DS__BS_GATHER_BWD) {
    ds__bs_elem_bwd(a, stage, e, b);
    return;
  }
  switch (stage) {
    case DS__BS_GATHER_FWD: ds__bs_gather_fwd(a, e, b); break;
    case DS__BS_INTEG_BWD: ds__bs_integ_bwd(a, e, b); break;
    case DS__BS_GATHER_BWD: ds__bs_gather_bwd(a, e, b); break;
    case DS__BS_REDUCE: ds__bs_reduce(a, e, b); break;
    case DS__BS_FINISH: ds__bs_finish(a, e, b); break;
    case DS__BS_CHECK: ds__bs_check(a, e, b); break;
    case DS__BS_RESET: ds__bs_reset(a, e, b); break;
    case DS__BS_ADD_ADJ: ds__bs_add_adj(a, e, b); break;
    case DS__BS_ACCUMULATE: ds__bs_accumulate(a, e, b); break;
    case DS__BS_ARTIC_FWD: case DS__BS_ARTIC_BWD: case DS__BS_ARTIC_RESET: case DS__BS_ARTIC_FINISH:
#if defined(__CUDACC__)
      ds__bs_artic_run(stage, a, b);
#else
      ds__bs_artic(stage, a, b);
#endif
      break;
    case DS__BS_IMPLICIT_FWD: case DS__BS_IMPLICIT_BWD:
#if !defined(__CUDACC__)
      ds__bs_implicit(stage, a, b);
#endif
      break;
    default: break;
  }
}

#endif

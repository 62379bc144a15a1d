/* Engine internals shared by model.c, data.c, step.c and grad.c: the
 * scratch arena of a dsData, error buffers kept on model and data, and the
 * forward force/integration core used by both ds_step and the checkpoint
 * recompute. Not installed. */
#ifndef DSIM_ENGINE_ENGINE_PRIV_H
#define DSIM_ENGINE_ENGINE_PRIV_H

#include "dsim/engine.h"
#include "base/internal.h"

/* Slot bases, nslot, nact and the scratch sizes come from the force table
 * (engine/forces.h, ds__force_layout). */

/* ---- arena ------------------------------------------------------------------
 * A bump allocator over d->arena, sized at creation. ds__arena_alloc returns
 * 64-byte aligned memory or NULL after recording DS_ERR_ARENA on d with the
 * caller's name; ds__arena_free(d, mark) releases everything allocated
 * since ds__arena_mark(d). */
void* ds__arena_alloc(dsData* d, size_t bytes, const char* caller);
size_t ds__arena_mark(const dsData* d);
void ds__arena_free(dsData* d, size_t mark);
/* Bytes step + backward need from the arena for model m. */
size_t ds__arena_need(const dsModel* m);

dsErrBuf* ds__data_err(dsData* d);


/* One thread's link of a chained sum (ds_backward_step): the running sums
 * after that thread's particles, published with the step's sequence number.
 * One per 128 bytes, so two threads' links never share a cache line. */
#define DS__CHAIN_N 8
typedef struct dsChainLink {
  _Alignas(128) dsReal s[DS__CHAIN_N];
  _Atomic unsigned ready;
} dsChainLink;

/* What a dsData keeps behind d->err_: the error buffer first, then the
 * thread choices of the forward substep and of the backward substep, then
 * the links of the backward's chained sums (one per thread, for up to
 * nchain threads: omp_get_max_threads() at creation) and their sequence. */
typedef struct dsDataPriv {
  dsErrBuf err;
  dsThreadPick fwd, bwd;
  dsChainLink* chain; /* 128-byte aligned, inside chain_mem */
  void* chain_mem;
  int nchain;
  unsigned chain_seq;
  struct dsImplicit* imp; /* the implicit integrator's matrix and vectors (engine/implicit.h); NULL for
                           * a semi-implicit model */
  struct dsArticScratch* art; /* an articulation's step scratch (engine/artic_model.h); NULL without one */
} dsDataPriv;

/* Thread t's share [*i0, *i1) of n items split over nt threads in
 * contiguous runs, in thread order (as OpenMP's static schedule). */
static inline void ds__share(int n, int nt, int t, int* i0, int* i1) {
  const int q = n / nt, r = n % nt;
  *i0 = t * q + (t < r ? t : r);
  *i1 = *i0 + q + (t < r ? 1 : 0);
}

/* ---- forward core (step.c) --------------------------------------------------
 * One substep from (x, v) with activations act and external force fext:
 * element forces into ef (nslot x 3), tet J into J (ntet), total force into
 * f (may be NULL), new state into (xo, vo), which may alias (x, v). Rigid
 * bodies (m->nbody > 0): states bs -> bso (may alias), wrenches bfext, and
 * fr (nparticle x 3 scratch) for the forces of their vertices. pick: the
 * thread choice to follow and update (NULL: all threads when the model is
 * large enough). ck (NULL: none; ds_step's own work done by the threads
 * that own the particles and tets instead of serially around the region):
 * the state before the substep copied to (tx, tv) when those are non-NULL,
 * and the first tet with J <= 0 and the first non-finite new state found
 * (the smallest index, so the same for any thread count). */
typedef struct dsStepCheck {
  dsReal *tx, *tv;       /* tape rows for the state before the substep, or NULL */
  const dsReal* act_prev;  /* the last activation record to compare act with, or NULL */
  const dsReal* fext_prev; /* the last external-force record to compare fext with, or NULL */
  int act_diff, fext_diff; /* out: 1 when act (fext) differs from act_prev (fext_prev) */
  int check;             /* 1: the new state's finiteness checked in the substep (no rigid bodies) */
  int bad_tet;           /* smallest tet with !(J > 0); INT_MAX: none (the tet loop's atomic min) */
  int bad_state;         /* (ds__atomic_min_int) smallest 2 k + (x[k] finite ? 1 : 0) over k with x[k] or v[k] not finite; INT_MAX: none */
} dsStepCheck;

void ds__substep(const dsModel* m, const dsReal* x, const dsReal* v, const dsReal* act, const dsReal* fext,
                 dsReal* ef, dsReal* J, dsReal* f, dsReal* xo, dsReal* vo, int integrate, const dsReal* bs,
                 const dsReal* bfext, dsReal* bso, dsReal* fr, dsThreadPick* pick, dsStepCheck* ck);

#endif

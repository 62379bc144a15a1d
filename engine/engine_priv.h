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

/* ---- thread choice (step.c) -------------------------------------------------
 * A parallel stage is run on either 1 thread or all of them (nmax); every
 * count gives the same bits, so the choice is free to follow the clock. The
 * stage times each call: the count in use keeps a running mean of its
 * seconds per call, and now and then the other count is probed (the faster
 * of two calls: the first call on all threads after a spell on one pays
 * for waking the workers; all threads get the second call only when the
 * first was under 4x the count in use, since under load one such call can
 * cost tens); the faster count is used. A losing probe of all threads at least doubles the interval to
 * the next (8 .. 65,536 calls; 32 calls per unit of its slowdown, so a
 * probe that waited a whole time slice for a descheduled thread, some 400
 * calls' worth, is followed by ~12,800), so an unhelpful count costs about
 * 3% at most; one thread, cheap to probe, is looked
 * at again within 64 calls, and at once when the count in use becomes
 * slower than one thread was; a change of nmax starts afresh, on one
 * thread.
 * This is what makes a model too small to gain run on one thread, and a
 * run whose partner thread keeps being descheduled (another process on the
 * cores) fall back to one thread until the cores are free. */
typedef struct dsThreadPick {
  int nmax;      /* thread count the estimates belong to; 0: none yet */
  int cur;       /* count in use: 0 one thread, 1 nmax threads */
  int left;      /* calls until the other count is probed */
  int interval;  /* probe interval, calls */
  double est[2]; /* seconds per call of each; < 0 unknown */
  int probes;    /* calls of the current probe so far */
  double probe_min;
} dsThreadPick;

/* What a dsData keeps behind d->err_: the error buffer first, then the
 * thread choices of the forward substep and of the backward substep. */
typedef struct dsDataPriv {
  dsErrBuf err;
  dsThreadPick fwd, bwd;
} dsDataPriv;

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
  int check;             /* 1: the new state's finiteness checked in the substep (no rigid bodies) */
  _Atomic int bad_tet;   /* smallest tet with !(J > 0); INT_MAX: none */
  _Atomic int bad_state; /* smallest 2 k + (x[k] finite ? 1 : 0) over k with x[k] or v[k] not finite; INT_MAX: none */
} dsStepCheck;

void ds__substep(const dsModel* m, const dsReal* x, const dsReal* v, const dsReal* act, const dsReal* fext,
                 dsReal* ef, dsReal* J, dsReal* f, dsReal* xo, dsReal* vo, int integrate, const dsReal* bs,
                 const dsReal* bfext, dsReal* bso, dsReal* fr, dsThreadPick* pick, dsStepCheck* ck);

#endif

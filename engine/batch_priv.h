/* The batched engine's internals shared by engine/batch_sim.c (the driver,
 * backend-neutral), engine/batch_cpu.c (the CPU backend) and cuda/batch.cu
 * (the CUDA backend): the memory layout of a batch. A backend (the device
 * layer's table, base/backend.h) only moves memory and runs a stage of
 * engine/batch_body.h over B x count (index, instance) pairs; the order of
 * the stages, the tape, the checkpoint recompute and every offset are the
 * driver's, so the CPU tests exercise them for the GPU too. Not installed. */
#ifndef DSIM_ENGINE_BATCH_PRIV_H
#define DSIM_ENGINE_BATCH_PRIV_H

#include "dsim/engine_batch.h"
#include "base/backend.h"
#include "engine/batch_body.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Model arrays by their row in DS_MODEL_ARRAYS. */
enum {
#define DS__MF_ID(field, type, count, diff, name) DS__MF_##field,
  DS_MODEL_ARRAYS(DS__MF_ID)
#undef DS__MF_ID
  DS__MF_COUNT
};

/* Where a model array lives in a batch. */
enum { DS__BL_NONE = 0, DS__BL_SHARED_REAL, DS__BL_SHARED_INT, DS__BL_INSTANCE };

/* The batch's own arrays of reals (after the shared model arrays and the
 * parameter and gradient blocks), in memory order, one row each:
 *   X(name, copies, reals, when, kind)
 * gives dsBatchLayout.o_<name>[copies], the offsets of `copies` arrays of
 * B x `reals` reals each (reals per instance, an expression of the layout
 * L), present when `when` holds (offset 0 otherwise); kind says what the
 * plan counts them as (STATE: per-substep work, TAPE: grows with the
 * horizon). Adding an array is one row; the layout, the plan and
 * tests/test_batch_sim.c's overlap check follow. */
#define DS__BSIM_REALS(X)                                                  \
  X(cur, 4, L->n3, L->T == 0 || L->K > 1, STATE) /* [2 parity + x|v] */   \
  X(tape, 2, (size_t)L->nstate * L->n3, 1, TAPE) /* [x|v] T + 1 states or every K-th */ \
  X(seg, 2, (size_t)L->nseg * L->n3, 1, TAPE)    /* [x|v] a recomputed segment */ \
  X(act, 1, (size_t)L->act_cap * L->nact, 1, TAPE)   /* activation records */       \
  X(fext, 1, (size_t)L->fext_cap * L->n3, 1, TAPE)   /* external-force records */   \
  X(ef, 1, L->s3, 1, STATE)                      /* element slots */      \
  X(J, 1, (size_t)L->ntet, 1, STATE)             /* the ELEM_J row's J */ \
  X(adj, 2, L->n3, L->T > 0, STATE)              /* [x|v] adjoints */     \
  X(av, 2, L->n3, L->T > 0, STATE)               /* [substep parity] */   \
  X(af, 2, L->n3, L->T > 0, STATE)               /* [substep parity] */   \
  X(scr, 2, (size_t)L->nscr, L->T > 0, STATE)    /* [substep parity] */   \
  X(aact_t, 2, (size_t)L->nact, L->T > 0, STATE) /* [substep parity] */   \
  X(aex, 1, L->s3, L->T > 0, STATE)              /* slot adjoints (x) */  \
  X(aev, 1, L->s3, L->T > 0, STATE)              /* slot adjoints (v) */  \
  X(aact, 1, (size_t)L->nact, L->T > 0, STATE)   /* control adjoints */   \
  X(afext, 1, L->n3, L->T > 0, STATE)                                     \
  /* an articulated model: its state (nas = nq + nv) beside the vertices' */ \
  X(acur, 2, (size_t)L->nas, L->nas && (L->T == 0 || L->K > 1), STATE) /* [parity] */ \
  X(atape, 1, (size_t)L->nstate * L->nas, L->nas, TAPE) /* T + 1 states or every K-th */ \
  X(aseg, 1, (size_t)L->nseg * L->nas, L->nas, TAPE)    /* a recomputed segment */ \
  X(aadj, 1, (size_t)L->nas, L->nas && L->T > 0, STATE) /* its adjoint */

/* Offsets are in elements of the buffer named: reals (dsReal), ints (int). */
typedef struct dsBatchLayout {
  int B, T, K, nstate, nseg, act_cap, fext_cap;
  int np, nact, ntet, nslot, nscr;
  int nas;                       /* an articulation's state (nq + nv; 0: none); nact is then its nu */
  int imp;                       /* 1: the implicit integrator (engine/batch_implicit.h) */
  size_t art_bytes;              /* host bytes per instance of an articulation's kernel scratch
                                    (engine/batch_artic.h) or the implicit integrator's workspace */
  size_t n3, s3;                 /* reals per instance of a state array, of the slot arrays */
  int where[DS__MF_COUNT];       /* DS__BL_* */
  size_t off[DS__MF_COUNT];      /* shared: in reals / ints; instance: within a parameter block */
  size_t cnt[DS__MF_COUNT];      /* elements */
  size_t P;                      /* reals of one instance's parameter (and gradient) block */
  /* reals */
  size_t o_param, o_grad;        /* B x P each */
#define DS__BSIM_OFFSET(name, copies, reals, when, kind) size_t o_##name[copies];
  DS__BSIM_REALS(DS__BSIM_OFFSET)
#undef DS__BSIM_OFFSET
  size_t nreal;
  /* ints */
  size_t o_bad, o_status;        /* B x (ntet + np), B x 3 */
  size_t nint;
  /* views: B dsModel then B dsGrad */
  size_t view_bytes;
} dsBatchLayout;

/* Layout of m and def; DS_ERR_INVALID / DS_ERR_UNSUPPORTED / DS_ERR_RANGE with a message. */
int ds__bsim_layout(const dsModel* m, const dsBatchSimDef* def, dsBatchLayout* L, char* err, size_t errlen);

/* ds_bsim_create on a given backend (its device checked by the caller);
 * tests use it to run the driver on instrumented backends. */
int ds__bsim_create_on(const dsModel* m, const dsBatchSimDef* def, const dsBackend* be, dsBatchSim** out,
                       char* err, size_t errlen);

/* For code that runs on a batch's own backend and context (the envs'
 * batched renderer, render/raster_batch.h): the context (the CUDA stream);
 * where the positions of the current state lie, B x n3 in backend memory
 * (forward: substep t; during a backward: the backward's substep, its
 * checkpoint segment recomputed when needed); a zeroed B x n3 scratch for
 * an adjoint of the positions, then that scratch added to the adjoint of
 * the backward's current state. The scratch is free between backward
 * steps only. */
void* ds__bsim_context(const dsBatchSim* s);
int ds__bsim_positions(dsBatchSim* s, const dsReal** x);
int ds__bsim_adj_scratch(dsBatchSim* s, dsReal** adj_x);
int ds__bsim_add_adj_scratch(dsBatchSim* s);

#ifdef __cplusplus
}
#endif
#endif

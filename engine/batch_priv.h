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

/* Offsets are in elements of the buffer named: reals (dsReal), ints (int). */
typedef struct dsBatchLayout {
  int B, T, K, nstate, nseg, act_cap, fext_cap;
  int np, nact, ntet, nslot, nscr;
  size_t n3, s3;                 /* reals per instance of a state array, of the slot arrays */
  int where[DS__MF_COUNT];       /* DS__BL_* */
  size_t off[DS__MF_COUNT];      /* shared: in reals / ints; instance: within a parameter block */
  size_t cnt[DS__MF_COUNT];      /* elements */
  size_t P;                      /* reals of one instance's parameter (and gradient) block */
  /* reals */
  size_t o_param, o_grad;        /* B x P each */
  size_t o_cur[2][2];            /* [buffer][x|v]: B x n3 (no tape or checkpointed) */
  size_t o_tape[2];              /* [x|v]: nstate x B x n3 */
  size_t o_seg[2];               /* [x|v]: nseg x B x n3 */
  size_t o_act, o_fext;          /* act_cap x B x nact, fext_cap x B x n3 */
  size_t o_ef, o_J;              /* B x s3, B x ntet */
  size_t o_adj[2];               /* B x n3 */
  size_t o_av[2], o_af[2];       /* B x n3 each, [substep parity] (the backward's pipeline) */
  size_t o_aex, o_aev;           /* B x s3 */
  size_t o_scr[2];               /* B x nscr, [substep parity] */
  size_t o_aact_t[2];            /* B x nact, [substep parity] */
  size_t o_aact, o_afext;        /* B x nact, B x n3 */
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

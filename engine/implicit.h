/* The implicit (backward Euler) integrator and its adjoint by the implicit
 * function theorem (engine/implicit.c has the math; docs/integrators.md the
 * derivation). ds_step and ds_backward_step (engine/step.c) call these for
 * a model with m->integrator == DS_INTEGRATOR_IMPLICIT. Not installed. */
#ifndef DSIM_ENGINE_IMPLICIT_H
#define DSIM_ENGINE_IMPLICIT_H

#include "base/internal.h"
#include "dsim/engine.h"
#include "engine/engine_priv.h"

/* Everything one implicit substep and its adjoint use: the block-sparse
 * Newton matrix (engine/sparse.h) and the Newton and adjoint vectors,
 * allocated once per data by ds__implicit_create (nothing is allocated in
 * a step). */
typedef struct dsImplicit dsImplicit;

int ds__implicit_create(const dsModel* m, dsImplicit** out);
void ds__implicit_free(dsImplicit* w);
/* Kept Jacobians: nslot slots (0: none), allocated here (at data creation,
 * never in a step). Each substep t whose Newton iterates keeps the matrix
 * it starts from, J at its start state (x_t, v_t, act_t), in slot
 * t % nslot with that state and act; the adjoint of substep t - 1 needs J
 * at (x_t, v_t, act_{t-1}) and takes it from the slot when it was kept in
 * the same episode and the state and act there are its own bit for bit,
 * else assembles it (the same bits).
 * ds__implicit_slot_bytes: one slot's bytes; ds__implicit_kept_bytes: all
 * of them (engine/data.c's ds_data_bytes counts them). */
int ds__implicit_keep(const dsModel* m, dsImplicit* w, int nslot);
/* 1 when m's substeps start Newton from the start state's Jacobian, which
 * they keep: an implicit model without ground contact (with it, the first
 * iterate's matrix, whose contact set is the step's, converges faster:
 * docs/integrators.md) */
int ds__implicit_keeps(const dsModel* m);
size_t ds__implicit_slot_bytes(const dsModel* m, const dsImplicit* w);
/* a slot's bytes for a matrix of nnzb blocks */
size_t ds__implicit_slot_size(const dsModel* m, size_t nnzb);
size_t ds__implicit_kept_bytes(const dsImplicit* w);
/* A new episode (ds_data_reset): the slots kept before it are not used
 * (the model's parameters may have changed since). */
void ds__implicit_new_episode(dsImplicit* w);
/* How many adjoints took their J from a slot (for tests). */
long ds__implicit_reused(const dsImplicit* w);

/* One backward-Euler substep from (x, v) with activations act and external
 * forces fext into (xo, vo) (which may alias x, v: they are written only
 * once Newton has converged). ef (nslot x 3) and J (ntet) are scratch;
 * *bad_tet (may be NULL) gets the smallest tet with J <= 0 at the new
 * state, INT_MAX for none. Returns 0, or DS_ERR_DIVERGED with a message in
 * eb naming substep t (no convergence within newton_max_iter, a
 * non-finite residual, a projected matrix PCG cannot use). */
int ds__implicit_substep(const dsModel* m, dsImplicit* w, const dsReal* x, const dsReal* v, const dsReal* act,
                         const dsReal* fext, dsReal* xo, dsReal* vo, dsReal* ef, dsReal* J, int* bad_tet,
                         dsErrBuf* eb, int t);

/* ds_step's implicit substep on d (the tape rows of the state before it,
 * the comparison of act and f_ext with their last records, the J check) in
 * place of ds__substep; ck as ds__substep's. */
int ds__implicit_step(const dsModel* m, dsData* d, dsReal* ef, dsReal* J, dsStepCheck* ck);

/* Adjoint of substep t, (xt, vt) -> (xt1, vt1): adj_x, adj_v hold dL/dx',
 * dL/dv' on entry and dL/dx, dL/dv on return; parameter gradients += into
 * g; adj_act (nact) and adj_fext (nparticle x 3) overwritten when not NULL.
 * af (nparticle x 3), aex, aev (nslot x 3) and scr (the force layout's
 * nscratch) are scratch. DS_ERR_DIVERGED with a message in eb when the
 * transposed solve does not reach adjoint_tol. */
int ds__implicit_bwd(const dsModel* m, dsImplicit* w, const dsReal* xt, const dsReal* vt, const dsReal* xt1,
                     const dsReal* vt1, const dsReal* act, dsReal* adj_x, dsReal* adj_v, dsGrad* g, dsReal* adj_act,
                     dsReal* adj_fext, dsReal* af, dsReal* aex, dsReal* aev, dsReal* scr, dsErrBuf* eb, int t);

#endif

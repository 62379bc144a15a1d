/* dsim batched engine: B instances of one model topology (envs, CEM
 * candidates, system-identification instances), each with its own
 * differentiable parameters, state, activations and external forces,
 * stepped together, with the tape and the adjoints kept where the
 * instances run (the CPU, or a CUDA device for the whole episode: the host
 * sends activations and parameters and receives states and gradients).
 *
 *   dsBatchSimDef def = ds_default_batch_sim_def();
 *   def.batch = 64; def.max_substeps = T; def.device = dev;  // dsim/device.h
 *   dsBatchSim* s; ds_bsim_create(m, &def, &s, err, sizeof err);
 *   ds_bsim_set_param(s, b, "tet.k_mu", values, m->ntet);     // per instance b
 *   ds_bsim_reset(s);
 *   for (c = 0; c < steps; c++) { ds_bsim_set_act(s, act); ds_bsim_step(s, k, status); }
 *   ds_bsim_get_state(s, x, v);
 *   ds_bsim_backward_begin(s, adj_x, adj_v);                  // dL/d(state at t)
 *   for (c = steps - 1; c >= 0; c--) ds_bsim_backward_step(s, k, adj_act_c, NULL);
 *   ds_bsim_backward_finish(s);
 *   ds_bsim_get_grad(s, b, "tet.k_mu", g, m->ntet);
 *
 * Arrays passed in and out are instance-major: x is B x nparticle x 3, act
 * is B x nact, and so on.
 *
 * The math is the engine's: every per-element, per-particle and
 * per-instance stage is one DS_HD body (engine/batch_body.h) that the CPU
 * backend runs in OpenMP loops over (instance, element) and the CUDA
 * backend launches from kernels. Each instance's states and gradients are,
 * bit for bit, those of ds_step / ds_backward_step on a model with that
 * instance's parameters (tested), for any thread count. No floating-point
 * atomics: elements write their own slots and particles gather them in the
 * fixed order of the incidence lists, on the GPU too.
 *
 * An articulated model (ds_builder_set_artic, dsim/artic.h) runs on the
 * CPU backend: each instance's articulation is stepped and differentiated
 * by the engine's own articulation kernels (engine/batch_artic.c) with its
 * own named parameters (ds_bsim_set_param / ds_bsim_get_grad take the
 * articulation's names, e.g. "joint.hinge.damping", "body.link2.mass");
 * its activations are the articulation's actions (B x nu, as
 * dsData.artic_act), its adj_act their adjoints (dsData.adj_artic_act), and
 * its state is the articulation's (ds_bsim_get_artic_state,
 * ds_bsim_rewind_artic, ds_bsim_set_artic_instance; the vertices' x, v are
 * posed from it, so they cannot be set themselves).
 *
 * A model with the implicit integrator (DS_INTEGRATOR_IMPLICIT) runs on
 * the CPU backend too: each instance's substep is the serial engine's
 * Newton solve and its backward the serial engine's transposed solve, on
 * the instance's parameters with a solver workspace of its own made here
 * (docs/integrators.md). A solve that fails fails its instance only (its
 * state, or its adjoints, NaN from that substep on; the message is the
 * serial engine's, after the instance's number).
 *
 * Not supported (create refuses with a message): rigid bodies; an
 * articulation or the implicit integrator on CUDA. */
#ifndef DSIM_ENGINE_BATCH_H
#define DSIM_ENGINE_BATCH_H

#include "dsim/device.h"
#include "dsim/engine.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dsBatchSim dsBatchSim;

typedef struct dsBatchSimDef {
  int batch;            /* B >= 1 instances */
  int max_substeps;     /* tape capacity T per episode; 0: forward only (no backward) */
  int checkpoint_every; /* 0 or 1: every state on the tape; K > 1: every K-th, segments recomputed */
  int act_records;      /* ds_bsim_set_act calls the tape holds per episode; 0: max_substeps */
  int fext_records;     /* ds_bsim_set_fext calls the tape holds per episode; 0: max_substeps */
  dsDevice device;      /* where the instances run: cpu (default) or cuda:N */
} dsBatchSimDef;

/* batch 1, no tape, full tape when one is asked for, the CPU. */
DS_API dsBatchSimDef ds_default_batch_sim_def(void);

/* ---- memory plan ---------------------------------------------------------------
 * What a batched simulation holds, computed from the model's counts and the
 * definition without allocating: the check before a large batch (create
 * refuses a plan over ds_memory_limit() on the CPU or over the device's free
 * memory on a GPU, naming the figure). */
typedef struct dsBatchPlan {
  int batch;              /* B */
  int nstate;             /* states the tape holds (T + 1 full; T/K + 1 checkpointed; 0 without a tape) */
  int nseg;               /* states of a recompute segment (K + 1; 0 with a full tape) */
  size_t param_reals;     /* per instance: differentiable parameters + inverse masses */
  size_t grad_reals;      /* per instance: gradient (the same layout as the parameters) */
  size_t state_reals;     /* per instance: current state, adjoints, slots and scratch of one substep */
  size_t tape_reals;      /* per instance: taped states, activations and external forces */
  size_t shared_bytes;    /* topology and rest shapes, once */
  size_t view_bytes;      /* per-instance model and gradient views (pointer tables) */
  size_t device_bytes;    /* all of it where the instances run */
  size_t work_bytes;      /* per instance: an articulation's kernel scratch or the implicit integrator's solver
                           * workspace (host, a bound; counted in device_bytes) */
} dsBatchPlan;

DS_API int ds_bsim_plan(const dsModel* m, const dsBatchSimDef* def, dsBatchPlan* plan, char* err, size_t errlen);

/* ---- life cycle ---------------------------------------------------------------
 * Every instance starts with m's parameters. m must outlive s. */
DS_API int ds_bsim_create(const dsModel* m, const dsBatchSimDef* def, dsBatchSim** out, char* err, size_t errlen);
DS_API void ds_bsim_free(dsBatchSim* s);
/* Message of the last failed call ("" when none). */
DS_API const char* ds_bsim_last_error(const dsBatchSim* s);
DS_API int ds_bsim_batch(const dsBatchSim* s);
DS_API dsDevice ds_bsim_device(const dsBatchSim* s);
/* Substeps taken since the last reset. */
DS_API int ds_bsim_time(const dsBatchSim* s);
DS_API const dsBatchPlan* ds_bsim_get_plan(const dsBatchSim* s);

/* ---- parameters -----------------------------------------------------------------
 * A differentiable parameter by name (ds_param_name), validated as
 * ds_model_set_param does (a new mass updates the inverse mass), for instance
 * b, or every instance when b = -1. Only at substep 0; the batch is then
 * reset (ds_bsim_reset), so a new initial state shows at once. */
DS_API int ds_bsim_set_param(dsBatchSim* s, int b, const char* name, const dsReal* values, int count);
DS_API int ds_bsim_get_param(const dsBatchSim* s, int b, const char* name, dsReal* values, int count);

/* Every per-instance array of instance b (the parameters, the inverse masses
 * and the initial state) from m, a model with the counts of the one s was
 * made from: one upload, nothing validated again (m is a valid model), the
 * state not reset. At substep 0, or at any substep without a tape
 * (max_substeps 0: no backward to keep consistent). With
 * ds_bsim_set_instance, what a batch of envs sharing one engine does when
 * one env starts an episode while the others step on. */
DS_API int ds_bsim_load_params(dsBatchSim* s, int b, const dsModel* m);

/* ---- forward --------------------------------------------------------------------- */
/* Every instance: x = its initial_position, v = its initial_velocity, t = 0,
 * activations and external forces 0, tape cleared. */
DS_API int ds_bsim_reset(dsBatchSim* s);
/* State at t = 0 (B x nparticle x 3 each; either may be NULL). */
DS_API int ds_bsim_set_state(dsBatchSim* s, const dsReal* x, const dsReal* v);
/* Back to substep t (0 <= t <= the current substep; with a tape, t is
 * also the point the next backward would start from) with state x, v
 * (B x nparticle x 3 each, NULL: keep what the tape holds at t, which needs
 * a full tape or t on a checkpoint; without a tape both must be given). The records of substeps before t stay
 * (the activations and external forces in force at t stay in force); the
 * failure flags are cleared. The caller's state at t should be the one the
 * episode had there when the tape is checkpointed: a backward recomputes a
 * segment from its checkpoint. ds_bsim_set_state is ds_bsim_rewind(s, 0,
 * x, v). */
DS_API int ds_bsim_rewind(dsBatchSim* s, int t, const dsReal* x, const dsReal* v);
/* Activations (B x nact) held from the next substep on; external forces
 * (B x nparticle x 3, NULL: zero) likewise. Each call takes one tape record. */
DS_API int ds_bsim_set_act(dsBatchSim* s, const dsReal* act);
DS_API int ds_bsim_set_fext(dsBatchSim* s, const dsReal* fext);
/* nsub substeps of every instance. status (B, may be NULL) receives 0 or
 * the instance's first DS_ERR_INVERTED / DS_ERR_DIVERGED since the reset;
 * the call returns the first failed instance's code (its message names the
 * instance, the substep and the element) or 0. A failed instance keeps
 * stepping on garbage until the next reset (with the implicit integrator:
 * its state stays NaN, no solve is tried again); the others are not
 * affected. */
DS_API int ds_bsim_step(dsBatchSim* s, int nsub, int* status);
/* Instance b's current state (nparticle x 3 each; NULL: kept) and its
 * failure cleared; the other instances and the substep count are untouched.
 * Only without a tape (max_substeps 0). */
DS_API int ds_bsim_set_instance(dsBatchSim* s, int b, const dsReal* x, const dsReal* v);
/* Instance b's failure as the last ds_bsim_step found it: its code (0: none)
 * and the substep and element (tet for DS_ERR_INVERTED, particle for
 * DS_ERR_DIVERGED; -1 when none, and for an implicit step's failed solve;
 * -2 for an articulation whose step failed: its mass matrix did not factor) it names. */
DS_API int ds_bsim_failure(const dsBatchSim* s, int b, int* substep, int* element);
/* Current state (B x nparticle x 3 each; either may be NULL). */
DS_API int ds_bsim_get_state(const dsBatchSim* s, dsReal* x, dsReal* v);
/* An articulated model's current state: B x (nq + nv), each instance's q
 * then qd (dsData.artic_state); DS_ERR_STATE for a model without one. */
DS_API int ds_bsim_get_artic_state(const dsBatchSim* s, dsReal* state);
/* ds_bsim_rewind and ds_bsim_set_instance for an articulated model: its
 * state (B x (nq + nv), or nq + nv for instance b) given instead of the
 * vertices', which are posed from it; NULL in rewind: the tape's state. */
DS_API int ds_bsim_rewind_artic(dsBatchSim* s, int t, const dsReal* state);
DS_API int ds_bsim_set_artic_instance(dsBatchSim* s, int b, const dsReal* state);

/* ---- backward ---------------------------------------------------------------------
 * Gradients accumulate (+=) into each instance's gradient until
 * ds_bsim_zero_grad. begin: the adjoints of the state at t are adj_x,
 * adj_v (B x nparticle x 3; NULL: 0). backward_step pops nsub substeps and
 * writes the sum over them of dL/d(act) into adj_act (B x nact) and of
 * dL/d(f_ext) into adj_fext (B x nparticle x 3) when not NULL (summed from
 * the last substep back, as a caller adding ds_backward_step's per-substep
 * adjoints would). add_adjoint adds dL/d(state at the current backward
 * substep). finish (at substep 0) adds the adjoints to the initial state's
 * gradient. An instance that failed in the episode gets meaningless
 * adjoints and gradients; the others' are exact. With the implicit
 * integrator, a transposed solve that fails ends backward_step after that
 * substep with DS_ERR_DIVERGED naming the instance (its adjoints NaN from
 * there on; the others' exact, and later calls go on). */
DS_API int ds_bsim_backward_begin(dsBatchSim* s, const dsReal* adj_x, const dsReal* adj_v);
DS_API int ds_bsim_backward_step(dsBatchSim* s, int nsub, dsReal* adj_act, dsReal* adj_fext);
DS_API int ds_bsim_add_adjoint(dsBatchSim* s, const dsReal* adj_x, const dsReal* adj_v);
/* An articulated model: adds dL/d(q, qd at the current backward substep),
 * B x (nq + nv), to the articulation's adjoint (DS_ERR_STATE for a model
 * without one or outside a backward pass). */
DS_API int ds_bsim_add_artic_adjoint(dsBatchSim* s, const dsReal* adj);
DS_API int ds_bsim_backward_finish(dsBatchSim* s);
/* Adjoints of the state at the current backward substep (B x nparticle x 3). */
DS_API int ds_bsim_get_adjoint(const dsBatchSim* s, dsReal* adj_x, dsReal* adj_v);
DS_API int ds_bsim_zero_grad(dsBatchSim* s);
/* Gradient of instance b with respect to a differentiable parameter. */
DS_API int ds_bsim_get_grad(const dsBatchSim* s, int b, const char* name, dsReal* values, int count);

/* ---- for code on the batch's own backend -----------------------------------
 * What a batched renderer made on the same backend (ds_batch_raster_create,
 * dsim/raster.h) needs to read and write the engine's arrays where they lie
 * (device memory on CUDA) without a copy through the host:
 * the backend context (the CUDA stream; pass it with ds_bsim_device(s).kind);
 * where the positions of the current state lie, B x nparticle x 3 in backend
 * memory (forward: substep t; during a backward: the backward's substep, its
 * checkpoint segment recomputed when needed); a zeroed B x nparticle x 3
 * scratch in backend memory for an adjoint of those positions, then that
 * scratch added to the adjoint of the backward's current state. The scratch
 * is free between backward steps only. */
DS_API void* ds_bsim_context(const dsBatchSim* s);
DS_API int ds_bsim_positions(dsBatchSim* s, const dsReal** x);
DS_API int ds_bsim_adj_scratch(dsBatchSim* s, dsReal** adj_x);
DS_API int ds_bsim_add_adj_scratch(dsBatchSim* s);

#ifdef __cplusplus
}
#endif
#endif

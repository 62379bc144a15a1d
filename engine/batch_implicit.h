/* The implicit integrator in the batched engine: what each instance needs
 * to run the engine's backward-Euler substep and its adjoint
 * (engine/implicit.h) on its own parameters, made once at ds_bsim_create
 * so that nothing is allocated per substep. Host memory; the CPU backend's
 * stages (DS__BS_IMPLICIT_*, engine/batch_body.h) reach it through
 * dsBatchArgs.imp. Internal to engine/batch_sim.c and
 * engine/batch_implicit.c. */
#ifndef DSIM_ENGINE_BATCH_IMPLICIT_H
#define DSIM_ENGINE_BATCH_IMPLICIT_H

#include "engine/implicit.h"

typedef struct dsBatchImplicit {
  int B;
  dsImplicit** w; /* B: each instance's Newton matrix and vectors */
  dsErrBuf* eb;   /* B: each instance's last solver failure, as the serial engine words it */
  /* B each: the substep whose Newton solve (fail) or adjoint solve (bfail)
     failed, -1: none. From a failed forward substep on, an instance's
     states are NaN (no solve is tried again until a reset or rewind); from
     a failed one on, its adjoints are NaN. Each instance writes its own. */
  int* fail;
  int* bfail;
  dsReal* zero; /* max(3 nparticle, nact) zeros: the activations and external forces before any is set */
} dsBatchImplicit;

/* The contexts of B instances of m (the workspaces are sized by m's
 * topology, which every instance shares). NULL when out of memory. */
dsBatchImplicit* ds__batch_implicit_create(const dsModel* m, int B);
void ds__batch_implicit_free(dsBatchImplicit* p);
/* Forget the failures of instance b (-1: every instance); backward != 0:
 * the backward's only. */
void ds__batch_implicit_clear(dsBatchImplicit* p, int b, int backward);
/* Host bytes per instance (the workspace, bounded from the element
 * counts; a CHOLMOD factor is not counted), for the plan. */
size_t ds__batch_implicit_bytes(const dsModel* m);

#endif

/* An articulated model in the batched engine: what each instance needs to
 * run the engine's articulation kernels (engine/artic_model.c over
 * engine/artic.c) on its own parameters, made once at ds_bsim_create so
 * that nothing is allocated per substep. Host memory; the CPU backend's
 * stages (DS__BS_ARTIC_*, engine/batch_body.h) read it through
 * dsBatchArgs.art. Internal to engine/batch_sim.c and engine/batch_artic.c. */
#ifndef DSIM_ENGINE_BATCH_ARTIC_H
#define DSIM_ENGINE_BATCH_ARTIC_H

#include "engine/artic_model.h"
#include "engine/artic_priv.h"

typedef struct dsBatchArtic {
  int B, nas, nu, nparam;
  /* instance b's articulation as the stages see it: m->artic's topology
     with param over b's block of the batch's parameters (dsModel.artic of
     b's backend view); and as the host sees it (ds_bsim_set_param's checks),
     param over hparam (B x nparam) */
  dsArticModel* dev;
  dsArticModel* host;
  double* hparam;
  dsArticScratch** sc; /* B: each instance's kernel scratch */
  dsReal* zero_u;      /* nu zeros: the actions before the first ds_bsim_set_act */
} dsBatchArtic;

/* The contexts for m's articulation and B instances; dev[b].param over
 * param_b(b) (the instance's "artic.param" in backend memory, which the CPU
 * backend keeps on the host). NULL when out of memory. */
dsBatchArtic* ds__batch_artic_create(const dsModel* m, int B, double* (*param_b)(void* ctx, int b), void* ctx);
void ds__batch_artic_free(dsBatchArtic* a);
/* Bytes per instance (scratch and the two model views), for the plan. */
size_t ds__batch_artic_bytes(const dsModel* m);

#endif

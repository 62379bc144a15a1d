/* An articulated model in the batched engine: what each instance needs to
 * run the engine's articulation kernels (engine/artic_model_body.h over
 * engine/artic_step.h) on its own parameters, made once at ds_bsim_create
 * so that nothing is allocated per substep. It lives in backend memory
 * (host memory for the CPU backend, device memory for CUDA), laid out on
 * the host and uploaded in one transfer, so both backends run the same
 * code on the same layout; the stages (DS__BS_ARTIC_*, engine/batch_body.h)
 * reach it through the model views (dsModel.artic) and dsBatchArgs.ascr.
 * Internal to engine/batch_sim.c and engine/batch_artic.c. */
#ifndef DSIM_ENGINE_BATCH_ARTIC_H
#define DSIM_ENGINE_BATCH_ARTIC_H

#include "base/backend.h"
#include "engine/artic_model.h"
#include "engine/artic_priv.h"

typedef struct dsBatchArtic {
  int B, nas, nu, nparam;
  /* backend memory, one block: m->artic's arrays (topology, shared), then
     the B instance models, the B scratch pointers and the B scratches */
  void* mem;
  /* instance b's articulation as the stages see it (backend address, for
     dsModel.artic of b's backend view): m->artic with its arrays in mem and
     param over b's block of the batch's parameters */
  dsArticModel* dev;
  dsArticScratch** ascr; /* backend address of the B scratch pointers (dsBatchArgs.ascr) */
  /* and as the host sees it (ds_bsim_set_param's checks): param over hparam
     (B x nparam) */
  dsArticModel* host;
  double* hparam;
} dsBatchArtic;

/* The contexts for m's articulation and B instances in be's memory (ctx:
 * the backend's context); dev[b].param over param_b(pctx, b) (the
 * instance's "artic.param" in backend memory). NULL when out of memory (or
 * the upload failed). */
dsBatchArtic* ds__batch_artic_create(const dsModel* m, int B, double* (*param_b)(void* pctx, int b), void* pctx,
                                     const dsBackend* be, void* ctx);
void ds__batch_artic_free(dsBatchArtic* a, const dsBackend* be, void* ctx);
/* Backend bytes per instance (scratch, model, pointer, and the shared
 * arrays counted with each instance), for the plan. */
size_t ds__batch_artic_bytes(const dsModel* m);

#endif

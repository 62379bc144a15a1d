/* An articulated model in the batched engine (engine/batch_artic.h): the
 * per-instance contexts in backend memory, and the CPU backend's entry to
 * the articulation stages (engine/batch_artic_body.h, which the CUDA
 * backend compiles into its kernels). Each stage is, for instance b, the
 * call engine/step.c makes for the one articulation of a dsData
 * (ds__artic_substep_model, ds__artic_bwd, ds__artic_finish, the reset's
 * posing) on b's model view (its articulation's parameters are b's) with
 * b's scratch and b's rows of the batch's arrays: the same kernels, so the
 * same bits as ds_step / ds_backward_step on a model with b's parameters.
 * Instances share nothing writable, so the CPU backend's loop over them
 * gives those bits for any thread count. */
#include "config.h"

#include <string.h>

#include "base/internal.h"
#include "engine/batch_artic.h"
#include "engine/batch_artic_body.h"
#include "engine/batch_priv.h"

void ds__batch_artic_free(dsBatchArtic* a, const dsBackend* be, void* ctx) {
  if (!a) return;
  if (a->mem) be->release(ctx, a->mem);
  ds__free(a->host);
  ds__free(a->hparam);
  ds__free(a);
}

static size_t up16(size_t n) { return (n + 15) & ~(size_t)15; }

/* The block's parts: shared arrays, B models, B pointers, B scratches. */
static void block_parts(const dsModel* m, int B, size_t* arrays, size_t* models, size_t* ptrs, size_t* scratch) {
  *arrays = up16(ds__artic_model_layout(m->artic, NULL, NULL, NULL));
  *models = up16((size_t)B * sizeof(dsArticModel));
  *ptrs = up16((size_t)B * sizeof(dsArticScratch*));
  *scratch = up16(ds__artic_scratch_layout(m, NULL, NULL));
}

/* The block's image at backend address mem into img (zeroed, the block's
 * size): arrays, instance models (param over param_b), scratch pointers,
 * scratch structs. */
static void block_image(const dsModel* m, int B, double* (*param_b)(void*, int), void* pctx, unsigned char* mem,
                        unsigned char* img) {
  size_t na, nm, np, ns;
  block_parts(m, B, &na, &nm, &np, &ns);
  dsArticModel shared;
  ds__artic_model_layout(m->artic, mem, img, &shared);
  dsArticModel* models = (dsArticModel*)(void*)(img + na);
  dsArticScratch** ptrs = (dsArticScratch**)(void*)(img + na + nm);
  for (int b = 0; b < B; b++) {
    const size_t at = na + nm + np + (size_t)b * ns;
    models[b] = shared;
    models[b].param = param_b(pctx, b);
    ptrs[b] = (dsArticScratch*)(void*)(mem + at);
    ds__artic_scratch_layout(m, mem + at, img + at);
  }
}

dsBatchArtic* ds__batch_artic_create(const dsModel* m, int B, double* (*param_b)(void* pctx, int b), void* pctx,
                                     const dsBackend* be, void* ctx) {
  dsBatchArtic* a = (dsBatchArtic*)ds__calloc(1, sizeof *a);
  if (!a) return NULL;
  a->B = B;
  a->nas = m->artic_nq + m->artic_nv;
  a->nu = m->artic_nu;
  a->nparam = m->artic_nparam;
  size_t na, nm, np, ns;
  block_parts(m, B, &na, &nm, &np, &ns);
  const size_t bytes = na + nm + np + (size_t)B * ns;
  a->host = (dsArticModel*)ds__calloc((size_t)B, sizeof(dsArticModel));
  a->hparam = (double*)ds__calloc((size_t)B * a->nparam + 1, sizeof(double));
  a->mem = be->alloc(ctx, bytes);
  unsigned char* img = (unsigned char*)ds__calloc(bytes, 1);
  if (!a->host || !a->hparam || !a->mem || !img) {
    ds__free(img);
    ds__batch_artic_free(a, be, ctx);
    return NULL;
  }
  unsigned char* mem = (unsigned char*)a->mem;
  block_image(m, B, param_b, pctx, mem, img);
  const int rc = be->put(ctx, mem, img, bytes);
  ds__free(img);
  if (rc) {
    ds__batch_artic_free(a, be, ctx);
    return NULL;
  }
  a->dev = (dsArticModel*)(void*)(mem + na);
  a->ascr = (dsArticScratch**)(void*)(mem + na + nm);
  for (int b = 0; b < B; b++) {
    /* shallow copies: the topology stays m->artic's (read only) */
    a->host[b] = *m->artic;
    a->host[b].param = a->hparam + (size_t)b * a->nparam;
    for (int k = 0; k < a->nparam; k++) a->host[b].param[k] = (double)m->artic_param[k];
  }
  return a;
}

size_t ds__batch_artic_bytes(const dsModel* m) {
  if (!m->artic) return 0;
  size_t na, nm, np, ns;
  block_parts(m, 1, &na, &nm, &np, &ns);
  return na + nm + np + ns + sizeof(dsArticModel) + (size_t)m->artic_nparam * sizeof(double);
}

void ds__bs_artic(int stage, const dsBatchArgs* a, int b) { ds__bs_artic_run(stage, a, b); }

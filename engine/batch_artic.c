/* An articulated model in the batched engine (engine/batch_artic.h): the
 * per-instance contexts, and the articulation stages of engine/batch_body.h.
 * Each stage is, for instance b, the call engine/step.c makes for the one
 * articulation of a dsData (ds__artic_substep_model, ds__artic_bwd,
 * ds__artic_finish, the reset's posing) on b's model view (its
 * articulation's parameters are b's) with b's scratch and b's rows of the
 * batch's arrays: the same kernels, so the same bits as ds_step /
 * ds_backward_step on a model with b's parameters. Instances share nothing
 * writable, so the CPU backend's loop over them gives those bits for any
 * thread count. */
#include "config.h"

#include <string.h>

#include "base/internal.h"
#include "engine/batch_artic.h"
#include "engine/batch_priv.h"

void ds__batch_artic_free(dsBatchArtic* a) {
  if (!a) return;
  for (int b = 0; b < a->B && a->sc; b++) ds__artic_scratch_free(a->sc[b]);
  ds__free(a->sc);
  ds__free(a->dev);
  ds__free(a->host);
  ds__free(a->hparam);
  ds__free(a->zero_u);
  ds__free(a);
}

dsBatchArtic* ds__batch_artic_create(const dsModel* m, int B, double* (*param_b)(void* ctx, int b), void* ctx) {
  dsBatchArtic* a = (dsBatchArtic*)ds__calloc(1, sizeof *a);
  if (!a) return NULL;
  a->B = B;
  a->nas = m->artic_nq + m->artic_nv;
  a->nu = m->artic_nu;
  a->nparam = m->artic_nparam;
  a->dev = (dsArticModel*)ds__calloc((size_t)B, sizeof(dsArticModel));
  a->host = (dsArticModel*)ds__calloc((size_t)B, sizeof(dsArticModel));
  a->hparam = (double*)ds__calloc((size_t)B * a->nparam + 1, sizeof(double));
  a->sc = (dsArticScratch**)ds__calloc((size_t)B, sizeof(dsArticScratch*));
  a->zero_u = (dsReal*)ds__calloc((size_t)a->nu + 1, sizeof(dsReal));
  if (!a->dev || !a->host || !a->hparam || !a->sc || !a->zero_u) {
    ds__batch_artic_free(a);
    return NULL;
  }
  for (int b = 0; b < B; b++) {
    if (ds__artic_scratch_create(m, &a->sc[b])) {
      ds__batch_artic_free(a);
      return NULL;
    }
    /* shallow copies: the topology stays m->artic's (read only) */
    a->dev[b] = *m->artic;
    a->dev[b].param = param_b(ctx, b);
    a->host[b] = *m->artic;
    a->host[b].param = a->hparam + (size_t)b * a->nparam;
    for (int k = 0; k < a->nparam; k++) a->host[b].param[k] = (double)m->artic_param[k];
  }
  return a;
}

size_t ds__batch_artic_bytes(const dsModel* m) {
  return m->artic ? ds__artic_scratch_bytes(m) + 2 * sizeof(dsArticModel) + (size_t)m->artic_nparam * sizeof(double) +
                        sizeof(dsArticScratch*)
                  : 0;
}

/* x, v of instance b after a substep: the first non-finite particle's
 * flag, as the gather of a particle model sets it (ds__bs_check reports it) */
static void check_state(const dsBatchArgs* a, int b, const dsReal* x, const dsReal* v, int failed) {
  if (!a->bad) return;
  int* cell = a->bad + (size_t)b * (a->ntet + a->np) + a->ntet;
  for (int i = 0; i < a->np; i++) {
    int fin = !failed;
    for (int c = 0; c < 3 && fin; c++) fin = (x[3 * i + c] - x[3 * i + c] == 0) && (v[3 * i + c] - v[3 * i + c] == 0);
    if (!fin && cell[i] == 0) {
      cell[i] = a->t + 1;
      return;
    }
  }
}

void ds__bs_artic(int stage, const dsBatchArgs* a, int b) {
  const dsModel* m = a->mv + b;
  const dsBatchArtic* A = (const dsBatchArtic*)a->art;
  dsArticScratch* sc = A->sc[b];
  const size_t ns = (size_t)a->nas, n3 = 3 * (size_t)a->np, o = (size_t)b * n3, os = (size_t)b * ns;
  const dsReal* u = a->act ? a->act + (size_t)b * a->nact : A->zero_u;
  switch (stage) {
    case DS__BS_ARTIC_FWD: { /* ds_step's articulation branch */
      const int rc = ds__artic_substep_model(m, sc, a->as + os, u, a->aso + os, a->xo + o, a->vo + o);
      if (a->asc) memcpy(a->asc + os, a->aso + os, ns * sizeof(dsReal));
      if (a->xc) {
        memcpy(a->xc + o, a->xo + o, n3 * sizeof(dsReal));
        memcpy(a->vc + o, a->vo + o, n3 * sizeof(dsReal));
      }
      check_state(a, b, a->xo + o, a->vo + o, rc != 0);
      break;
    }
    case DS__BS_ARTIC_BWD: { /* ds_backward_step's: as = state t, aso = state t + 1 */
      dsReal* aat = a->adj_act_t ? a->adj_act_t + (size_t)b * a->nact : NULL;
      ds__artic_bwd_at(m, sc, a->adj_x + o, a->adj_v + o, a->aadj + os, aat, a->gv[b].artic_param, a->as + os,
                       a->aso + os, u);
      if (a->adj_act && aat)
        for (int k = 0; k < a->nact; k++) a->adj_act[(size_t)b * a->nact + k] += aat[k];
      break;
    }
    case DS__BS_ARTIC_RESET: { /* ds__artic_reset: (q0, qd0), or the state in as (= aso), and the vertices
                                  posed there; t >= 0: instance t only */
      if (a->t >= 0 && a->t != b) break;
      dsReal* so = a->aso + os;
      for (int k = 0; k < m->artic_nq && !a->as; k++) so[k] = m->artic_q0[k];
      for (int k = 0; k < m->artic_nv && !a->as; k++) so[m->artic_nq + k] = m->artic_qd0[k];
      ds__artic_pose_state(m, sc, so, a->xo + o, a->vo + o);
      if (a->asc) memcpy(a->asc + os, so, ns * sizeof(dsReal));
      if (a->xc) {
        memcpy(a->xc + o, a->xo + o, n3 * sizeof(dsReal));
        memcpy(a->vc + o, a->vo + o, n3 * sizeof(dsReal));
      }
      break;
    }
    case DS__BS_ARTIC_FINISH: /* ds_backward_finish's, before the particles' (DS__BS_FINISH) */
      ds__artic_finish_at(m, sc, a->adj_x + o, a->adj_v + o, a->aadj + os, a->gv + b, a->as + os);
      break;
    default: break;
  }
}

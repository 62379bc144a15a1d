/* The articulation stages of the batched engine (DS__BS_ARTIC_*,
 * engine/batch_body.h) for instance b, written once for both backends
 * (DS_HD): the CPU backend calls them through engine/batch_artic.c's
 * ds__bs_artic, the CUDA backend compiles them into its kernels (one thread
 * per instance). Each is the call engine/step.c makes for the one
 * articulation of a dsData (engine/artic_model_body.h) on b's model view,
 * whose articulation (dsModel.artic) has b's parameters, with b's scratch
 * (dsBatchArgs.ascr[b]) and b's rows of the batch's arrays; model and
 * scratch are in backend memory (engine/batch_artic.h). A substep that fails
 * (a mass matrix that does not factor) flags b's first particle as a
 * particle model's gather does, so the CHECK stage reports it on either
 * backend. Include once, after config.h. */
#ifndef DSIM_ENGINE_BATCH_ARTIC_BODY_H
#define DSIM_ENGINE_BATCH_ARTIC_BODY_H

#include <string.h>

#include "engine/artic_model_body.h"
#include "engine/batch_body.h"

/* x, v of instance b after a substep: the first non-finite particle's
 * flag, as the gather of a particle model sets it (ds__bs_check reports it);
 * a step that failed (the mass matrix did not factor) flags the first
 * particle with DS__BS_ARTIC_FAILED added, which ds__bs_check reports as
 * the articulation's failure. */
DS_HD static void artic_check_state(const dsBatchArgs* a, int b, const dsReal* x, const dsReal* v, int failed) {
  if (!a->bad) return;
  int* cell = a->bad + (size_t)b * (a->ntet + a->np) + a->ntet;
  for (int i = 0; i < a->np; i++) {
    int fin = !failed;
    for (int c = 0; c < 3 && fin; c++) fin = (x[3 * i + c] - x[3 * i + c] == 0) && (v[3 * i + c] - v[3 * i + c] == 0);
    if (!fin && cell[i] == 0) {
      cell[i] = (a->t + 1) | (failed ? DS__BS_ARTIC_FAILED : 0);
      return;
    }
  }
}

/* the state at t + 1 (and the vertices) to the checkpoint copies, if any */
DS_HD static void artic_keep(const dsBatchArgs* a, size_t os, size_t o, size_t ns, size_t n3) {
  if (a->asc) memcpy(a->asc + os, a->aso + os, ns * sizeof(dsReal));
  if (a->xc) {
    memcpy(a->xc + o, a->xo + o, n3 * sizeof(dsReal));
    memcpy(a->vc + o, a->vo + o, n3 * sizeof(dsReal));
  }
}

DS_HD static void ds__bs_artic_run(int stage, const dsBatchArgs* a, int b) {
  const dsModel* m = a->mv + b;
  dsArticScratch* sc = a->ascr[b];
  const size_t ns = (size_t)a->nas, n3 = 3 * (size_t)a->np, o = (size_t)b * n3, os = (size_t)b * ns;
  const dsReal* u = a->act ? a->act + (size_t)b * a->nact : NULL; /* NULL: zeros */
  switch (stage) {
    case DS__BS_ARTIC_FWD: { /* ds_step's articulation branch */
      const int rc = artic_substep_model(m, sc, a->as + os, u, a->aso + os, a->xo + o, a->vo + o);
      artic_keep(a, os, o, ns, n3);
      artic_check_state(a, b, a->xo + o, a->vo + o, rc != 0);
      break;
    }
    case DS__BS_ARTIC_BWD: { /* ds_backward_step's: as = state t, aso = state t + 1 */
      dsReal* aat = a->adj_act_t ? a->adj_act_t + (size_t)b * a->nact : NULL;
      artic_bwd_at(m, sc, a->adj_x + o, a->adj_v + o, a->aadj + os, aat, a->gv[b].artic_param, a->as + os,
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
      artic_pose_state(m, sc, so, a->xo + o, a->vo + o);
      artic_keep(a, os, o, ns, n3);
      break;
    }
    case DS__BS_ARTIC_FINISH: /* ds_backward_finish's, before the particles' (DS__BS_FINISH) */
      artic_finish_at(m, sc, a->adj_x + o, a->adj_v + o, a->aadj + os, a->gv + b, a->as + os);
      break;
    default: break;
  }
}

#endif

/* Environments: external forces on the particles, set step by step from
 * outside the class (the residual force of a hybrid model, a push), and
 * their gradient.
 *
 * Forward. ds_env_set_external_force writes F (nparticle x 3, N) into the
 * data's f_ext, which every following substep adds to the particles' forces
 * (dsim/engine.h): it is held until set again, and a reset clears it. The
 * engine tapes f_ext when it changes, one record per step at most (the env
 * sizes the tape for nstep + 1), so a backward reads each step's F.
 *
 * Backward. F_k held over the substeps s of step k enters each of them, so
 *   dL/dF_k = sum over s in step k of dL/d(f_ext over s),
 * the engine's adj_fext after the pop of s (semi-implicit Euler:
 * dt w_i adj_v'_i; dsim/engine.h). Every backward clears the rows and fills
 * those of the steps it pops (clearing only the rows written before); nothing
 * is allocated. */
#include "config.h"

#include <math.h>
#include <string.h>

#include "envs/env_priv.h"

/* Only the rows written since the last clear: a window of one step (a
 * closed-loop node) then clears one row, not the episode's. */
void ds__env_force_bwd_clear(dsEnv* e) {
  if (e->fext_hi > e->fext_lo)
    memset(e->fext_grad + (size_t)e->fext_lo * e->n3, 0, (size_t)(e->fext_hi - e->fext_lo) * e->n3 * sizeof(dsReal));
  e->fext_lo = e->fext_hi = 0;
}

void ds__env_force_bwd(dsEnv* e, int k) {
  if (e->fext_hi == e->fext_lo) e->fext_lo = e->fext_hi = k;
  if (k < e->fext_lo) e->fext_lo = k;
  if (k + 1 > e->fext_hi) e->fext_hi = k + 1;
  dsReal* g = e->fext_grad + (size_t)k * e->n3;
  const dsReal* a = e->adj_fext;
  for (int q = 0; q < e->n3; q++) g[q] += a[q];
}

int ds_env_set_external_force(dsEnv* e, const dsReal* force) {
  if (!e) return DS_ERR_INVALID;
  const char* why = NULL;
  if (e->bs || e->bs_member)
    why = "the batched engine takes actions as activations only";
  else if (e->cls->uses_external_force)
    why = "the class writes the external forces itself (its action)";
  else if (e->m->nbody || e->m->artic)
    why = "its bodies are rigid or articulated (f_ext moves free particles only)";
  if (why)
    return ds__seterr(&e->err, DS_ERR_UNSUPPORTED, "set_external_force: not available for %s: %s", e->cls->name,
                      why);
  if (!e->have_episode) return ds__seterr(&e->err, DS_ERR_STATE, "set_external_force: reset the env first");
  if (!force) {
    memset(e->d->f_ext, 0, (size_t)e->n3 * sizeof(dsReal));
    return 0;
  }
  for (int q = 0; q < e->n3; q++)
    if (!isfinite(force[q]))
      return ds__seterr(&e->err, DS_ERR_RANGE,
                        "set_external_force: particle %d component %d is not finite (a force in N expected)", q / 3,
                        q % 3);
  memcpy(e->d->f_ext, force, (size_t)e->n3 * sizeof(dsReal));
  return 0;
}

int ds_env_external_force_grad(const dsEnv* e, const dsReal** grad, int* num_steps) {
  if (!e || !grad) return DS_ERR_INVALID;
  *grad = e->fext_grad;
  if (num_steps) *num_steps = e->nstep;
  return 0;
}

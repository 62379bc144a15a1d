/* Environments: the backward of a window of steps, for learning policies
 * through the simulator.
 *
 * A window is steps k = first .. first + H - 1 of an episode. Its objective
 *   L = sum_k adj_obs_k.obs_k + adj_image_k.image_k + adj_reward_k r_k
 *       + adj_final.state(end of step first + H - 1)
 * depends on the window's actions and on the state at the start of step
 * first, and on nothing earlier: the backward pops the window's substeps
 * only and reads the adjoint of the state it stops at, dL/d(x, v) at
 * substep first C, as grad_state0. Chaining windows: the grad_state0 of a
 * later window is the adj_final of the one before, so that
 * sum over windows = one backward of the whole span (the engine's adjoint
 * recursion is split at a state, nothing else changes).
 *
 * Closed loop. A policy a_k = pi(obs_k) makes obs_k an input of step k:
 * dL/d(obs_k) = adj_obs_k + J_pi(obs_k)^T dL/da_k, and dL/da_k needs the
 * backward of steps k .. end first. So a closed-loop backward alternates
 * physics and policy: window [k, k+1) with adj_final the grad_state0 of
 * window [k+1, k+2), its grad_actions back through the policy, and so on
 * (python/dsim/learn.py: one window of one step per autograd node; open-loop
 * actions take one window for all H steps; docs/learning.md).
 *
 * The window may end before the episode's current step (a backward starts
 * at any taped substep), so the env can be stepped past it first. */
#include "config.h"

#include <string.h>

#include "envs/batch_priv.h"
#include "envs/env_priv.h"

int ds_env_backward_adjoints_window(dsEnv* e, int first_step, int num_steps, const dsReal* adj_obs,
                                    const dsReal* adj_image, const dsReal* adj_reward, const dsReal* adj_final_state,
                                    dsReal* grad_actions, dsReal* grad_state0) {
  if (!e) return DS_ERR_INVALID;
  if (num_steps < 0 || first_step < 0)
    return ds__seterr(&e->err, DS_ERR_RANGE, "backward window: first step %d and %d steps must be >= 0", first_step,
                      num_steps);
  dsEnvBwdSpec sp = {0, adj_obs, adj_image, adj_reward, first_step};
  return ds__env_backward_window(e, &sp, first_step, first_step + num_steps, adj_final_state, grad_actions,
                                 grad_state0);
}

int ds_batch_backward_window(dsBatch* b, int first_step, int num_steps, const dsReal* adj_obs,
                             const dsReal* adj_image, const dsReal* adj_reward, const dsReal* adj_final_state,
                             dsReal* grad_actions, dsReal* grad_states0, int* status) {
  if (!b) return DS_ERR_INVALID;
  ds__clearerr(&b->err);
  if (b->taped)
    return ds__seterr(&b->err, DS_ERR_UNSUPPORTED,
                      "batch backward window: not available on a lockstep batch's shared engine; use separate envs");
  const dsEnv* e0 = b->envs[0];
  const size_t H = num_steps > 0 ? (size_t)num_steps : 0, od = (size_t)e0->odim, np = ds__batch_npix(b);
  const size_t ad = (size_t)e0->adim, S = (size_t)ds_env_state_size(e0);
  if (adj_image && !np)
    return ds__seterr(&b->err, DS_ERR_INVALID, "batch backward window: image adjoints need observation.image");
  FOR_EACH_ENV_HEAVY(b, i) {
    const size_t u = (size_t)i;
    b->rc[i] = ds_env_backward_adjoints_window(
        b->envs[i], first_step, num_steps, adj_obs && od ? adj_obs + u * H * od : NULL,
        adj_image ? adj_image + u * H * np : NULL, adj_reward ? adj_reward + u * H : NULL,
        adj_final_state ? adj_final_state + u * S : NULL, grad_actions && ad ? grad_actions + u * H * ad : NULL,
        grad_states0 ? grad_states0 + u * S : NULL);
  }
  END_FOR_EACH_ENV();
  int bad = -1;
  for (int i = 0; i < b->n; i++) {
    if (status) status[i] = b->rc[i];
    if (b->rc[i] < 0 && bad < 0) bad = i;
  }
  if (bad < 0) return 0;
  return ds__seterr(&b->err, b->rc[bad], "env %d: %s", bad, ds_env_last_error(b->envs[bad]));
}

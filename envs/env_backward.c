/* Environments: the backward pass through the engine tape and the renderer.
 *
 * Any loss here is a sum of terms, each a function of the state at
 * one substep s: frame losses w_f l_f(x_s), centre-of-mass terms
 * w |com(x_s) - target|^2 and observation terms. Popping substeps from the
 * engine tape from t down to 0, the adjoints of the terms at s are added
 * into d->adj_x / d->adj_v right after the pop that made them the adjoints
 * of state s; frames are re-rendered from the kept positions and
 * backpropagated through ds_raster_backward. dL/d(action of step k) is the
 * sum over the step's substeps, after each pop, of the same block of the
 * engine's dL/d(act), or of what the class's action_bwd takes from the
 * engine's adjoints (dL/d(act), dL/d(f_ext), dL/d(state)).
 *
 * Centre of mass: com = sum_i m_i x_i / M, so dcom/dx_i = m_i/M and
 * dcom/dm_i = (x_i - com)/M (added to the particle.mass gradient).
 *
 * Dense rewards: r_k = p(c_k) - p(c_{k-1}) with c_k the centre of mass at
 * the end of step k (c_{-1}: the definition's start com0, a constant) and
 * p the progress: DISPLACEMENT p(c) = c_x, TARGET p(c) = -|c - target|.
 * So c_k enters r_k and r_{k+1}: dL/dc_k = (a_k - a_{k+1}) dp/dc_k, with
 * dp/dc = e_x or -(c - target)/|c - target|, a_k the reward adjoints (0
 * outside the window). */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "envs/env_priv.h"

static dsReal total_mass(const dsModel* m) {
  double M = 0;
  for (int i = 0; i < m->nparticle; i++) M += m->mass[i];
  return (dsReal)M;
}

/* adj_x_i += w_c m_i/M, g_mass_i += w_c.(x_i - com)/M  (w: dL/dcom) */
static void com_bwd(const dsModel* m, dsGrad* g, const dsReal* x, const dsReal w[3], dsReal* adj_x) {
  dsReal c[3];
  ds__env_com(m, x, c);
  const dsReal M = total_mass(m);
  if (!(M > 0)) return;
  for (int i = 0; i < m->nparticle; i++) {
    const dsReal mi = m->mass[i] / M;
    dsReal gm = 0;
    for (int k = 0; k < 3; k++) {
      adj_x[3 * i + k] += w[k] * mi;
      gm += w[k] * (x[3 * i + k] - c[k]);
    }
    g->mass[i] += gm / M;
  }
}

/* The weight of frame f's image loss (at substep s; nf frames kept) in the
 * loss a backward differentiates: the built-in loss's, and minus the
 * reward adjoint of the step whose reward holds it. */
dsReal ds__env_frame_weight(const dsEnv* e, const dsEnvBwdSpec* sp, int s, int f, int nf) {
  const int lk = e->def.loss_kind;
  dsReal w = 0;
  if (sp->builtin) w += (lk == DS_ENV_LOSS_IMAGE_SUM || (lk == DS_ENV_LOSS_IMAGE_LAST && f == nf - 1)) ? 1 : 0;
  const int k = s > 0 ? (s - 1) / e->C : -1; /* the step whose reward holds the frame */
  if (sp->adj_reward && e->def.reward_kind == DS_ENV_REWARD_SPARSE && k >= sp->k0 &&
      (lk == DS_ENV_LOSS_IMAGE_SUM || (lk == DS_ENV_LOSS_IMAGE_LAST && f == e->nframe - 1)))
    w -= sp->adj_reward[k - sp->k0];
  return w;
}

/* The dense rewards' terms at the end of step k (header comment): into
 * d->adj_x through the centre of mass. steps: the window's end. */
static void dense_bwd(dsEnv* e, const dsEnvBwdSpec* sp, int k, int steps) {
  const dsReal ak = k >= sp->k0 ? sp->adj_reward[k - sp->k0] : 0;
  const dsReal an = k + 1 < steps && k + 1 >= sp->k0 ? sp->adj_reward[k + 1 - sp->k0] : 0;
  if (ak == an) return;
  const dsReal* x = e->step_x + (size_t)k * e->n3;
  dsReal c[3], wc[3] = {ak - an, 0, 0};
  if (e->cls->metric_kind != DS_METRIC_DISPLACEMENT) {
    ds__env_com(e->m, x, c);
    double dist = 0;
    for (int q = 0; q < 3; q++) dist += (double)(c[q] - e->target[q]) * (c[q] - e->target[q]);
    dist = sqrt(dist);
    if (!(dist > 0)) return; /* |c - target| has no gradient at the target; take 0 */
    for (int q = 0; q < 3; q++) wc[q] = (dsReal)((an - ak) * (c[q] - e->target[q]) / dist);
  }
  com_bwd(e->m, e->g, x, wc, e->d->adj_x);
  e->adj_dirty = 1;
}

/* Adds dL/d(state s) of every term at substep s into d->adj_x / d->adj_v
 * (rendered 0: but the terms that render, frames and image adjoints). */
static int add_terms(dsEnv* e, const dsEnvBwdSpec* sp, int s, int t, int nf, int rendered) {
  const dsModel* m = e->m;
  dsData* d = e->d;
  const int lk = e->def.loss_kind, steps = (t + e->C - 1) / e->C;
  const size_t n3 = (size_t)e->n3, npix = 4 * (size_t)e->def.width * e->def.height;
  int rc = 0;
  /* frame terms (unless the group renders them where its engine runs) */
  const int f = e->frame_at[s];
  if (rendered && f >= 0 && f < nf) {
    const dsReal w = ds__env_frame_weight(e, sp, s, f, nf);
    if (w != 0) {
      rc = ds__env_frame_image_loss(e, e->frame_x + (size_t)f * n3, NULL, w, "backward", f);
      if (rc) return rc;
      e->adj_dirty = 1;
    }
  }
  /* centre-of-mass terms: w |com - target|^2 */
  {
    dsReal w = 0;
    if (sp->builtin && lk == DS_ENV_LOSS_COM && s == t) w += 1;
    if (sp->adj_reward && e->def.reward_kind == DS_ENV_REWARD_SPARSE && lk == DS_ENV_LOSS_COM && s == e->T &&
        t == e->T && e->nstep - 1 >= sp->k0)
      w -= sp->adj_reward[e->nstep - 1 - sp->k0];
    if (w != 0) {
      const dsReal* x = s == t ? d->x : e->step_x + (size_t)(e->nstep - 1) * n3;
      dsReal c[3], wc[3];
      ds__env_com(m, x, c);
      for (int k = 0; k < 3; k++) wc[k] = 2 * w * (c[k] - e->target[k]);
      com_bwd(m, e->g, x, wc, d->adj_x);
      e->adj_dirty = 1;
    }
  }
  /* observation terms at step ends */
  if (s > 0 && (s % e->C == 0 || s == e->T)) {
    const int k = (s - 1) / e->C;
    if (k < steps && sp->adj_reward && e->def.reward_kind == DS_ENV_REWARD_DENSE) dense_bwd(e, sp, k, steps);
    if (k < steps && k >= sp->k0) {
      const dsReal* x = e->step_x + (size_t)k * n3;
      const dsReal* v = e->step_v + (size_t)k * n3;
      if (sp->adj_obs && e->odim > 0) {
        const dsReal* ao = sp->adj_obs + (size_t)(k - sp->k0) * e->odim;
        e->adj_dirty = 1;
        if (e->def.obs_state == DS_OBS_STATE_FULL) {
          for (size_t q = 0; q < n3; q++) {
            d->adj_x[q] += ao[q];
            d->adj_v[q] += ao[n3 + q];
          }
        } else if (e->def.obs_state == DS_OBS_STATE_JOINTS) {
          /* the observation is the state (q, qd) at substep s itself: its
             adjoint joins the articulation's, which the next
             ds_backward_step carries back with the vertices' (artic_model.c) */
          for (int q = 0; q < e->odim; q++) d->adj_artic[q] += ao[q];
        } else {
          com_bwd(m, e->g, x, ao, d->adj_x);
          com_bwd(m, e->g, v, ao + 3, d->adj_v);
        }
      }
      if (sp->adj_image && rendered) {
        e->adj_dirty = 1;
        dsRasterMesh rm = ds__env_raster_mesh(e, x);
        rc = ds_raster_render(e->r, &rm, NULL);
        if (!rc) rc = ds__env_raster_backward(e, e->r, &rm, sp->adj_image + (size_t)(k - sp->k0) * npix, d->adj_x);
        if (rc) return ds__seterr(&e->err, rc, "backward: image of step %d: %s", k, ds_raster_last_error(e->r));
      }
    }
  }
  return 0;
}

/* env_backward on the batched engine: the tape is popped in runs that end
 * where a term may add adjoints (a frame) or a step starts (its action's
 * adjoint is read back, summed over the run); the parameter gradients come
 * back at the end and are added to those of the host terms (centre of
 * mass). Sums are taken in other groupings than the serial engine's, so
 * results agree with env_backward on the CPU engine to rounding, not bits.
 * A group of envs on one engine runs the same schedule (they are at one
 * substep), each env's host terms on its own thread. */
int ds__env_group_fail(dsEnv** envs, int n, dsBatchSim* bs, int rc, const char* what) {
  for (int i = 0; i < n; i++) ds__seterr(&envs[i]->err, rc, "%s: %s", what, ds_bsim_last_error(bs));
  return rc;
}

/* every env's host terms at substep s, then their adjoints into the engine
 * (the rendered terms first, where the engine runs, when grp is not NULL) */
static int group_terms(dsEnv** envs, int n, dsBatchSim* bs, dsEnvGroupRender** grp, const dsEnvBwdSpec* sp,
                       const unsigned char* skip, int ref, int s, int t, int nf, dsReal* bx, dsReal* bv, int* rcs) {
  if (grp) {
    int rc = ds__env_group_rendered(envs, n, bs, grp, sp, skip, ref, s, t, nf);
    if (rc) return rc;
  }
  const int rendered = grp == NULL;
  DS__ENVS_FOR(n, i) { rcs[i] = skip && skip[i] ? 0 : add_terms(envs[i], sp + i, s, t, nf, rendered); }
  DS__ENVS_END();
  int dirty = 0;
  for (int i = 0; i < n; i++) {
    if (rcs[i]) return rcs[i];
    dirty |= envs[i]->adj_dirty;
  }
  if (!dirty) return 0;
  const size_t n3 = (size_t)envs[0]->n3;
  int rc;
  if (n == 1) {
    rc = ds_bsim_add_adjoint(bs, envs[0]->d->adj_x, envs[0]->d->adj_v);
  } else {
    for (int i = 0; i < n; i++) {
      memcpy(bx + (size_t)i * n3, envs[i]->d->adj_x, n3 * sizeof(dsReal));
      memcpy(bv + (size_t)i * n3, envs[i]->d->adj_v, n3 * sizeof(dsReal));
    }
    rc = ds_bsim_add_adjoint(bs, bx, bv);
  }
  /* an articulation's own adjoint (the joint observations' terms) */
  const size_t nas = (size_t)(envs[0]->m->artic_nq + envs[0]->m->artic_nv);
  if (!rc && nas && envs[0]->def.obs_state == DS_OBS_STATE_JOINTS) {
    if (n == 1) {
      rc = ds_bsim_add_artic_adjoint(bs, envs[0]->d->adj_artic);
    } else { /* bx holds n x max(n3, nas) reals (envs/batch_shared.c) */
      for (int i = 0; i < n; i++) memcpy(bx + (size_t)i * nas, envs[i]->d->adj_artic, nas * sizeof(dsReal));
      rc = ds_bsim_add_artic_adjoint(bs, bx);
    }
    for (int i = 0; i < n; i++) memset(envs[i]->d->adj_artic, 0, nas * sizeof(dsReal));
  }
  for (int i = 0; i < n; i++) {
    memset(envs[i]->d->adj_x, 0, n3 * sizeof(dsReal));
    memset(envs[i]->d->adj_v, 0, n3 * sizeof(dsReal));
    envs[i]->adj_dirty = 0;
  }
  return rc ? ds__env_group_fail(envs, n, bs, rc, "backward: batched engine: adding adjoints") : 0;
}

/* An initial action's adjoint (ds__env_initial_hook), after the pop of
 * substep 0: the engine's state adjoints at substep 0 into each env's
 * scratch (n == 1: read there directly; else through bx, bv, n x n3), the
 * class's hook for step 0 with them (the serial engine's order: before the
 * terms at substep 0 are added), the scratch cleared again for those terms. */
static int initial_bwd(dsEnv** envs, int n, dsBatchSim* bs, const unsigned char* skip, dsReal* const* grad_actions,
                       dsReal* bx, dsReal* bv) {
  const size_t n3 = (size_t)envs[0]->n3;
  int rc = n == 1 ? ds_bsim_get_adjoint(bs, envs[0]->d->adj_x, envs[0]->d->adj_v) : ds_bsim_get_adjoint(bs, bx, bv);
  if (rc) return rc;
  for (int i = 0; i < n; i++) {
    dsEnv* e = envs[i];
    dsData* d = e->d;
    if (n > 1) {
      memcpy(d->adj_x, bx + (size_t)i * n3, n3 * sizeof(dsReal));
      memcpy(d->adj_v, bv + (size_t)i * n3, n3 * sizeof(dsReal));
    }
    if (!(skip && skip[i])) {
      const int A = e->adim;
      dsReal* ga = grad_actions[i] ? grad_actions[i] : e->sink; /* step 0's row */
      if (!grad_actions[i]) memset(e->sink, 0, (size_t)A * sizeof(dsReal));
      memset(e->adj_act, 0, (size_t)e->m->nact * sizeof(dsReal)); /* the engine keeps those */
      memset(e->adj_fext, 0, n3 * sizeof(dsReal));
      ds__env_action_bwd(e, 0, 0, e->actions, ga);
    }
    memset(d->adj_x, 0, n3 * sizeof(dsReal));
    memset(d->adj_v, 0, n3 * sizeof(dsReal));
  }
  return 0;
}

int ds__env_group_backward(dsEnv** envs, int n, dsBatchSim* bs, dsEnvGroupRender** gr, const dsEnvBwdSpec* sp,
                           const unsigned char* skip, int first, dsReal* const* grad_actions, dsReal* bx, dsReal* bv,
                           dsReal* badj, int* rcs) {
  int ref = 0;
  while (skip && ref < n - 1 && skip[ref]) ref++;
  dsEnv* e0 = envs[ref];
  const dsModel* m = e0->m;
  const int t = e0->d->t, nf = ds__env_frames_done(e0, t), A = e0->adim;
  const int first_act = e0->cls->act_first ? e0->cls->act_first(e0) : 0; /* an articulation's: its actions */
  const int s_stop = first * e0->C < t ? first * e0->C : t;
  const size_t nact = (size_t)ds__env_bs_nact(m);
  const int initial = ds__env_initial_hook(e0);
  for (int i = 0; i < n; i++) {
    memset(envs[i]->d->adj_x, 0, (size_t)e0->n3 * sizeof(dsReal));
    memset(envs[i]->d->adj_v, 0, (size_t)e0->n3 * sizeof(dsReal));
    if (m->artic) memset(envs[i]->d->adj_artic, 0, (size_t)(m->artic_nq + m->artic_nv) * sizeof(dsReal));
    envs[i]->adj_dirty = 0;
  }
  int rc = ds_bsim_zero_grad(bs);
  if (!rc) rc = ds_bsim_backward_begin(bs, NULL, NULL);
  if (rc) return ds__env_group_fail(envs, n, bs, rc, "backward: batched engine");
  /* frame terms where the engine runs (one instance per env) */
  dsEnvGroupRender** grp = ds__env_batched_frames() && gr && ds_bsim_batch(bs) == n ? gr : NULL;
  if ((rc = group_terms(envs, n, bs, grp, sp, skip, ref, t, t, nf, bx, bv, rcs))) return rc;
  int s = t;
  while (s > s_stop) {
    const int k = (s - 1) / e0->C;
    int lo = k * e0->C > s_stop ? k * e0->C : s_stop;
    for (int q = s - 1; q > lo; q--)
      if (e0->frame_at[q] >= 0) {
        lo = q;
        break;
      }
    rc = ds_bsim_backward_step(bs, s - lo, nact ? badj : NULL, NULL);
    if (rc) return ds__env_group_fail(envs, n, bs, rc, "backward: batched engine");
    if (initial && lo == 0) {
      if ((rc = initial_bwd(envs, n, bs, skip, grad_actions, bx, bv)))
        return ds__env_group_fail(envs, n, bs, rc, "backward: batched engine: the initial state's adjoints");
    } else if (!initial) {
      for (int i = 0; i < n; i++) {
        dsEnv* e = envs[i];
        if (skip && skip[i]) continue;
        dsReal* ga = grad_actions[i] ? grad_actions[i] + (size_t)k * A : e->sink;
        if (!grad_actions[i]) memset(e->sink, 0, (size_t)A * sizeof(dsReal)); /* dL/da nobody asked for */
        for (int j = 0; j < A; j++) ga[j] += badj[(size_t)i * nact + (size_t)first_act + (size_t)j];
      }
    }
    s = lo;
    if ((rc = group_terms(envs, n, bs, grp, sp, skip, ref, s, t, nf, bx, bv, rcs))) return rc;
  }
  if (s_stop == 0 && (rc = ds_bsim_backward_finish(bs))) return ds__env_group_fail(envs, n, bs, rc, "backward: batched engine");
  for (int i = 0; i < n; i++) {
    dsEnv* e = envs[i];
    if (skip && skip[i]) continue;
    for (int k = 0; k < ds_param_count(); k++) {
      const char* name = ds_param_name(k);
      const dsReal* p;
      dsReal* g;
      int np, ng;
      if (ds_model_param(e->m, name, &p, &np) || np == 0 || ds_grad_param(e->g, name, &g, &ng) || ng != np) continue;
      if ((rc = ds_bsim_get_grad(bs, i, name, e->bgrad, np))) return ds__env_group_fail(envs, n, bs, rc, "backward: batched engine");
      for (int j = 0; j < np; j++) g[j] += e->bgrad[j];
    }
    e->did_backward = 1;
  }
  return 0;
}

/* The steps of e that completed before its failed one (a failed substep
 * leaves d->t at itself). */
static int steps_before_failure(const dsEnv* e) { return e->d->t / e->C; }

/* The checks before a backward of e down to step first, and its outputs
 * cleared. After a failed step (an inverted tet, a divergence) only a window
 * (last >= 0) that ends at or before it can be gone back through: its
 * substeps completed and their tape is intact (ds_backward_begin_at), which
 * a trainer uses to learn from the steps before a failure. */
static int bwd_prepare(dsEnv* e, const dsEnvBwdSpec* sp, int first, int last, dsReal* grad_actions) {
  if (!e->def.gradients)
    return ds__seterr(&e->err, DS_ERR_STATE,
                      "backward: %s was created forward only (env.physics.gradients false): no tape to go back on",
                      e->cls->name);
  if (!e->have_episode) return ds__seterr(&e->err, DS_ERR_STATE, "backward: reset the env first");
  if (e->failed && (last < 0 || e->cls->sim))
    return ds__seterr(&e->err, DS_ERR_STATE, "backward: the episode diverged");
  if (e->failed && last > steps_before_failure(e))
    return ds__seterr(&e->err, DS_ERR_STATE,
                      "backward: the episode diverged in step %d; a window must end at or before it (window end %d)",
                      steps_before_failure(e), last);
  if (sp->adj_image && !e->def.obs_image)
    return ds__seterr(&e->err, DS_ERR_INVALID, "backward: image adjoints need observation.image");
  const int t = e->d->t, steps = (t + e->C - 1) / e->C;
  if (first < 0 || first > steps)
    return ds__seterr(&e->err, DS_ERR_RANGE, "backward: first step %d outside [0, %d]", first, steps);
  if (grad_actions) memset(grad_actions, 0, (size_t)steps * e->adim * sizeof(dsReal));
  ds__env_force_bwd_clear(e);
  ds_grad_zero(e->g);
  memset(e->light_grad, 0, sizeof e->light_grad);
  return 0;
}

int ds__env_raster_backward(dsEnv* e, dsRaster* r, const dsRasterMesh* rm, const dsReal* d_image, dsReal* d_x) {
  dsRenderSettings dl;
  memset(&dl, 0, sizeof dl);
  int rc = ds_raster_backward_light(r, rm, d_image, d_x, NULL, NULL, &dl);
  if (rc) return rc;
  e->light_grad[0] += dl.ambient;
  e->light_grad[1] += dl.directional;
  for (int k = 0; k < 3; k++) e->light_grad[2 + k] += dl.light_dir[k];
  return 0;
}


/* A state ds_env_set_state put at substep s acts as the taped one plus a
 * constant (dsim/env.h), which the backward differentiates as it stands,
 * unless the tape is checkpointed and s is not a checkpoint: the backward's
 * segment through s would then be recomputed from the checkpoint before it,
 * that is from the state the set replaced. Refused then, for any set point
 * in the backward's range [bottom, top). */
static int check_set_points(dsEnv* e, int first, int last) {
  const dsData* d = e->d;
  if (first < 0 || d->ckpt <= 1) return 0; /* a negative first: refused by the range checks */
  const long lt = last >= 0 ? (long)last * e->C : (long)d->t, lb = (long)first * e->C;
  const int top = lt < d->t ? (int)lt : d->t;
  const int bottom = lb < top ? (int)lb : top;
  for (int s = bottom > 1 ? bottom : 1; s < top; s++)
    if (e->set_at[s] && s % d->ckpt != 0)
      return ds__seterr(&e->err, DS_ERR_RANGE,
                        "backward: set_state put another state at substep %d, which is not a multiple of "
                        "physics.checkpoint_every %d: the checkpointed tape would recompute it from the state "
                        "before the set (set states on checkpoints, or use checkpoint_every 1)",
                        s, d->ckpt);
  return 0;
}

int ds__env_bwd_prepare(dsEnv* e, const dsEnvBwdSpec* sp, int first, dsReal* grad_actions) {
  int rc = bwd_prepare(e, sp, first, -1, grad_actions);
  return rc ? rc : check_set_points(e, first, -1);
}

/* A class with its own physics (dsEnvClass.sim): the loss's one term that
 * depends on the actions is the image I of the current state, the last
 * frame (the class's validate keeps the loss IMAGE_LAST), so the class's
 * backward starts from g = dL/dI = w dl/dI + adj_image[last step], with
 * w the frame's weight (built-in loss, minus the sparse reward's adjoint).
 * Image adjoints of earlier steps (sysid's video) go to the class's
 * image_adjoint hook first, or are refused when it has none. */
static int sim_window(dsEnv* e, const dsEnvBwdSpec* sp, int first, int last, const dsReal* adj_final,
                      dsReal* grad_actions, dsReal* grad_state0);

static int sim_backward(dsEnv* e, const dsEnvBwdSpec* sp, int first, int last, const dsReal* adj_final,
                        dsReal* grad_actions, dsReal* grad_state0) {
  if (last >= 0 && e->cls->sim->backward_window)
    return sim_window(e, sp, first, last, adj_final, grad_actions, grad_state0);
  if (first != 0 || last >= 0 || adj_final || grad_state0)
    return ds__seterr(&e->err, DS_ERR_UNSUPPORTED,
                      "backward: %s differentiates whole episodes or windows (ds_env_backward_adjoints_window), "
                      "not the rest of an episode from a step (first step 0)%s",
                      e->cls->name, e->cls->sim->backward_window ? "" : "; it has no window backward either");
  int rc = bwd_prepare(e, sp, first, -1, grad_actions);
  if (rc) return rc;
  const int t = e->d->t, steps = (t + e->C - 1) / e->C, nf = ds__env_frames_done(e, t);
  const size_t npix = 4 * (size_t)e->def.width * e->def.height;
  const dsReal w = nf > 0 ? ds__env_frame_weight(e, sp, e->frame_t[nf - 1], nf - 1, nf) : 0;
  if (w != 0 && e->frame_t[nf - 1] != t)
    return ds__seterr(&e->err, DS_ERR_UNSUPPORTED,
                      "backward: %s differentiates the image of the current state only, and the last frame "
                      "(substep %d) is not the current substep %d",
                      e->cls->name, e->frame_t[nf - 1], t);
  for (int k = 0; sp->adj_image && k + 1 < steps; k++) {
    const dsReal* a = sp->adj_image + (size_t)k * npix;
    size_t p = 0;
    while (p < npix && a[p] == 0) p++;
    if (p == npix) continue;
    if (!e->cls->sim->image_adjoint)
      return ds__seterr(&e->err, DS_ERR_UNSUPPORTED,
                        "backward: %s takes image adjoints of the last step only (step %d has one)", e->cls->name, k);
    ds__clearerr(&e->err);
    if ((rc = e->cls->sim->image_adjoint(e, k, a)))
      return e->err.code ? rc : ds__seterr(&e->err, rc, "backward: step %d's image: %s", k, ds_strerror(rc));
  }
  memset(e->img_grad, 0, npix * sizeof(dsReal));
  if (w != 0) {
    dsReal l = 0;
    if ((rc = e->cls->sim->render(e, nf - 1, e->img)) ||
        (rc = ds_image_loss_eval(e->il, e->img, e->goal_img, &l, e->img_grad)))
      return e->err.code ? rc : ds__seterr(&e->err, rc, "backward: frame %d: %s", nf - 1, ds_strerror(rc));
    for (size_t p = 0; p < npix; p++) e->img_grad[p] *= w;
  }
  if (sp->adj_image && steps > 0)
    for (size_t p = 0; p < npix; p++) e->img_grad[p] += sp->adj_image[(size_t)(steps - 1) * npix + p];
  ds__clearerr(&e->err);
  if ((rc = e->cls->sim->backward(e, e->img_grad, grad_actions)))
    return e->err.code ? rc : ds__seterr(&e->err, rc, "backward: %s", ds_strerror(rc));
  e->did_backward = 1;
  return 0;
}

/* A window of a class with its own physics: L = sum over the window's
 * steps k of adj_image_k.I_k + adj_reward_k r_k, plus adj_final.state at
 * its end. The images are of the states at step ends, so each step's
 * image adjoint goes to image_adjoint (the class keeps it for its
 * sweep); a sparse reward is -(the last frame's image loss), so a window
 * holding the step whose reward holds that frame adds
 * -adj_reward_k dl/dI to that step's image adjoint (the frame must lie at
 * the step's end). The class's backward_window then runs one sweep over
 * the window's substeps and gives dL/d(state at its start). These classes
 * have no state observations (obs_size 0) and no dense rewards (their
 * validate refuses them), so adj_obs has nothing to act on. */
static int sim_window_image(dsEnv* e, const dsEnvBwdSpec* sp, int first, int k) {
  const size_t npix = 4 * (size_t)e->def.width * e->def.height;
  const int se = (k + 1) * e->C < e->T ? (k + 1) * e->C : e->T, fl = e->nframe - 1;
  const int sf = fl >= 0 ? e->frame_t[fl] : -1;
  const dsReal w = sf > k * e->C && sf <= se ? ds__env_frame_weight(e, sp, sf, fl, e->nframe) : 0;
  const dsReal* a = sp->adj_image ? sp->adj_image + (size_t)(k - first) * npix : NULL;
  size_t p = 0;
  while (a && p < npix && a[p] == 0) p++;
  if ((!a || p == npix) && w == 0) return 0;
  if (w != 0 && sf != se)
    return ds__seterr(&e->err, DS_ERR_UNSUPPORTED,
                      "backward: %s: the last frame (substep %d) is not at the end of step %d (%d), whose sparse "
                      "reward holds it",
                      e->cls->name, sf, k, se);
  if (!e->cls->sim->image_adjoint)
    return ds__seterr(&e->err, DS_ERR_UNSUPPORTED, "backward: %s takes no image adjoints (step %d has one)",
                      e->cls->name, k);
  int rc = 0;
  memset(e->img_grad, 0, npix * sizeof(dsReal));
  if (w != 0) {
    dsReal l = 0;
    if ((rc = e->cls->sim->render(e, fl, e->img)) ||
        (rc = ds_image_loss_eval(e->il, e->img, e->goal_img, &l, e->img_grad)))
      return e->err.code ? rc : ds__seterr(&e->err, rc, "backward: frame %d: %s", fl, ds_strerror(rc));
    for (p = 0; p < npix; p++) e->img_grad[p] *= w;
  }
  for (p = 0; a && p < npix; p++) e->img_grad[p] += a[p];
  ds__clearerr(&e->err);
  if ((rc = e->cls->sim->image_adjoint(e, k, e->img_grad)))
    return e->err.code ? rc : ds__seterr(&e->err, rc, "backward: step %d's image: %s", k, ds_strerror(rc));
  return 0;
}

static int sim_window(dsEnv* e, const dsEnvBwdSpec* sp, int first, int last, const dsReal* adj_final,
                      dsReal* grad_actions, dsReal* grad_state0) {
  int rc = bwd_prepare(e, sp, first, last, NULL);
  if (rc) return rc;
  const int steps_taken = (e->d->t + e->C - 1) / e->C, ckpt = e->d->ckpt;
  if (last < first || last > steps_taken)
    return ds__seterr(&e->err, DS_ERR_RANGE, "backward: window [%d, %d) outside the %d steps taken (first <= last)",
                      first, last, steps_taken);
  if (ckpt > 1 && ((first * e->C) % ckpt) != 0)
    return ds__seterr(&e->err, DS_ERR_RANGE,
                      "backward: window start substep %d is not a multiple of physics.checkpoint_every %d", first * e->C,
                      ckpt);
  if ((rc = check_set_points(e, first, last))) return rc;
  if (grad_actions) memset(grad_actions, 0, (size_t)(last - first) * e->adim * sizeof(dsReal));
  if (grad_state0) memset(grad_state0, 0, (size_t)ds_env_state_size(e) * sizeof(dsReal));
  for (int k = first; k < last; k++)
    if ((rc = sim_window_image(e, sp, first, k))) return rc;
  const int s1 = last * e->C < e->T ? last * e->C : e->T, s0 = first * e->C < s1 ? first * e->C : s1;
  ds__clearerr(&e->err);
  rc = e->cls->sim->backward_window(e, s0, s1, adj_final ? adj_final + 1 : NULL, grad_actions,
                                    grad_state0 ? grad_state0 + 1 : NULL);
  if (rc) return e->err.code ? rc : ds__seterr(&e->err, rc, "backward: %s", ds_strerror(rc));
  e->did_backward = 1;
  return 0;
}

/* A window's end and start states in ds_env_get_state's layout
 * [substep | x | v | (q, qd) of an articulation]; the substep is not
 * differentiable. With an articulation the vertices x, v are posed from
 * (q, qd) at every substep (engine/artic_model.c), so at the window's end
 *   dL/d(q, qd) = adj_final_(q,qd) + P^T adj_final_(x,v),
 * P the pose's Jacobian: the seed goes to d->adj_x / d->adj_v (the vertices
 * at the end substep, which the engine's pop of the substep before carries
 * through P) and to d->adj_artic. At the window's start, after the pop of
 * its first substep, d->adj_artic holds dL/d(q, qd) there and d->adj_x /
 * d->adj_v the terms that read the vertices kept at that substep (a dense
 * reward's centre of mass, frames): those read the state's x, v as
 * ds_env_set_state put them, which the physics does not (it poses from
 * (q, qd)), so they are the adjoints of the x, v entries themselves. */
static void state_adjoint_seed(dsEnv* e, const dsReal* adj_final) {
  dsData* d = e->d;
  const size_t n3 = (size_t)e->n3, nas = (size_t)(e->m->artic_nq + e->m->artic_nv);
  for (size_t q = 0; q < n3; q++) {
    d->adj_x[q] += adj_final[1 + q];
    d->adj_v[q] += adj_final[1 + n3 + q];
  }
  if (e->m->artic)
    for (size_t q = 0; q < nas; q++) d->adj_artic[q] += adj_final[1 + 2 * n3 + q];
}

static void state_adjoint_read(const dsEnv* e, dsReal* grad_state0) {
  const dsData* d = e->d;
  const size_t n3 = (size_t)e->n3, nas = (size_t)(e->m->artic_nq + e->m->artic_nv);
  memcpy(grad_state0 + 1, d->adj_x, n3 * sizeof(dsReal));
  memcpy(grad_state0 + 1 + n3, d->adj_v, n3 * sizeof(dsReal));
  if (e->m->artic) memcpy(grad_state0 + 1 + 2 * n3, d->adj_artic, nas * sizeof(dsReal));
}

/* Backward down to the start of step first (0: the whole episode), from
 * the end of step last - 1 (last < 0: from the episode's current substep).
 * A window (last >= 0) writes window rows of grad_actions and may take the
 * adjoint of its end state (adj_final) and give that of its start state
 * (grad_state0), both in ds_env_get_state's layout. Starting below the
 * current substep only moves the backward's own counter d->bt: the tape
 * holds every state up to d->t, so the substeps popped read their taped
 * states, as a backward from d->t would. */
static int env_backward(dsEnv* e, const dsEnvBwdSpec* sp, int first, int last, const dsReal* adj_final,
                        dsReal* grad_actions, dsReal* grad_state0) {
  if (e->bs_member && e->def.gradients) return ds__env_refuse_member(e, "backward (use ds_batch_backward_loss or _adjoints)");
  if (e->cls->sim) return sim_backward(e, sp, first, last, adj_final, grad_actions, grad_state0);
  const int window = last >= 0;
  int rc = bwd_prepare(e, sp, first, last, window ? NULL : grad_actions);
  if (rc) return rc;
  const dsModel* m = e->m;
  dsData* d = e->d;
  const int steps_taken = (d->t + e->C - 1) / e->C, A = e->adim;
  if ((rc = check_set_points(e, first, last))) return rc;
  if (window) {
    if (last < first || last > steps_taken)
      return ds__seterr(&e->err, DS_ERR_RANGE, "backward: window [%d, %d) outside the %d steps taken (first <= last)",
                        first, last, steps_taken);
    if (e->bs)
      return ds__seterr(&e->err, DS_ERR_UNSUPPORTED,
                        "backward: windows are not available on the batched engine (physics.batched_engine, CUDA)");
    if (m->nbody && (adj_final || grad_state0))
      return ds__seterr(&e->err, DS_ERR_UNSUPPORTED,
                        "backward: state adjoints of a window with rigid bodies (%s) are not available", e->cls->name);
    if (d->ckpt > 1 && ((first * e->C) % d->ckpt) != 0)
      return ds__seterr(&e->err, DS_ERR_RANGE,
                        "backward: window start substep %d is not a multiple of physics.checkpoint_every %d (the "
                        "checkpoint before it may hold a state a set_state replaced)",
                        first * e->C, d->ckpt);
    if (grad_actions) memset(grad_actions, 0, (size_t)(last - first) * A * sizeof(dsReal));
    if (grad_state0) memset(grad_state0, 0, (size_t)ds_env_state_size(e) * sizeof(dsReal));
  }
  int one_rc;
  if (e->bs)
    return ds__env_group_backward(&e, 1, e->bs, &e->bgr, sp, NULL, first, &grad_actions, NULL, NULL, e->badj_act,
                                  &one_rc);
  const int t = window ? (last * e->C < e->T ? last * e->C : e->T) : d->t;
  const int nf = ds__env_frames_done(e, t), row0 = window ? first : 0;
  const int s_stop = first * e->C < t ? first * e->C : t;
  rc = ds_backward_begin_at(m, d, t); /* t <= d->t; after a failure, t <= its substep */
  if (rc) return ds__seterr(&e->err, rc, "backward: %s", ds_data_last_error(d));
  if (adj_final) state_adjoint_seed(e, adj_final);
  rc = add_terms(e, sp, t, t, nf, 1);
  if (rc) return rc;
  for (int s = t - 1; s >= s_stop; s--) {
    rc = ds_backward_step(m, d, e->g, m->nact ? e->adj_act : NULL, e->adj_fext);
    if (rc) return ds__seterr(&e->err, rc, "backward: %s", ds_data_last_error(d));
    const int k = s / e->C;
    dsReal* ga = grad_actions ? grad_actions + (size_t)(k - row0) * A : NULL;
    if (!ga) memset(e->sink, 0, (size_t)A * sizeof(dsReal)); /* dL/da nobody asked for */
    ds__env_action_bwd(e, k, s, e->actions + (size_t)k * A, ga ? ga : e->sink);
    ds__env_force_bwd(e, k);
    rc = add_terms(e, sp, s, t, nf, 1);
    if (rc) return rc;
  }
  if (grad_state0) state_adjoint_read(e, grad_state0);
  if (s_stop == 0) { /* the initial state's adjoints: parameter gradients */
    rc = ds_backward_finish(m, d, e->g);
    if (rc) return ds__seterr(&e->err, rc, "backward: %s", ds_data_last_error(d));
  }
  e->did_backward = 1;
  return 0;
}

int ds__env_backward_window(dsEnv* e, const dsEnvBwdSpec* sp, int first, int last, const dsReal* adj_final,
                            dsReal* grad_actions, dsReal* grad_state0) {
  return env_backward(e, sp, first, last, adj_final, grad_actions, grad_state0);
}

int ds_env_backward_loss_from(dsEnv* e, int first_step, dsReal* loss, dsReal* grad_actions) {
  if (!e) return DS_ERR_INVALID;
  dsEnvBwdSpec sp = {1, NULL, NULL, NULL, 0};
  int rc = env_backward(e, &sp, first_step, -1, NULL, grad_actions, NULL);
  if (!rc && loss) rc = ds_env_loss(e, loss);
  return rc;
}

int ds_env_backward_loss(dsEnv* e, dsReal* loss, dsReal* grad_actions) {
  return ds_env_backward_loss_from(e, 0, loss, grad_actions);
}

int ds_env_backward_adjoints_from(dsEnv* e, int first_step, const dsReal* adj_obs, const dsReal* adj_image,
                                  const dsReal* adj_reward, dsReal* grad_actions) {
  if (!e) return DS_ERR_INVALID;
  dsEnvBwdSpec sp = {0, adj_obs, adj_image, adj_reward, 0};
  return env_backward(e, &sp, first_step, -1, NULL, grad_actions, NULL);
}

int ds_env_backward_adjoints(dsEnv* e, const dsReal* adj_obs, const dsReal* adj_image, const dsReal* adj_reward,
                             dsReal* grad_actions) {
  return ds_env_backward_adjoints_from(e, 0, adj_obs, adj_image, adj_reward, grad_actions);
}


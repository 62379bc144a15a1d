/* Environments: the episode (reset, step, frames, the built-in loss's value,
 * parameters and state).
 *
 * Forward. Step k covers substeps [kC, min((k+1)C, T)) with the action held:
 * before each substep s it is written into the data: into the class's block
 * of activations (act_first) or by the class's action_fwd (external forces
 * or, for an initial action, the state at s = 0). After substep s
 * the state is x_{s}; at every scheduled frame s (0 at reset) the positions
 * are kept, and the frame's image loss l_f = loss(render(x_s), goal) is
 * evaluated when something asks for it: the reward of the step that produces
 * a loss term, ds_env_loss (IMAGE_LAST: the last frame only; IMAGE_SUM:
 * each frame once). A frame no loss term weighs is never rendered during
 * the episode; a value is the same function of the kept positions whenever
 * it is evaluated, so results do not depend on when (bit for bit). The
 * positions of frames and step ends are kept so backward can re-render
 * (images are not stored). */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "envs/env_priv.h"

static int step_end(const dsEnv* e, int k) { return (k + 1) * e->C < e->T ? (k + 1) * e->C : e->T; }
/* ---- reset ----------------------------------------------------------------------- */
/* Frames rendered by substep t. */
int ds__env_frames_done(const dsEnv* e, int t) {
  int n = 0;
  while (n < e->nframe && e->frame_t[n] <= t) n++;
  return n;
}

/* The image loss of positions x: the sum over the views (the first camera,
 * and camera2 when on) of the loss against the goal seen from that view.
 * With w != 0 its gradient times w is also added into d->adj_x (backward). */
int ds__env_frame_image_loss(dsEnv* e, const dsReal* x, dsReal* loss, dsReal w, const char* what, int f) {
  dsRaster* rs[2] = {e->r, e->r2};
  const dsReal* goals[2] = {e->goal_img, e->goal_img2};
  const size_t npix = 4 * (size_t)e->def.width * e->def.height;
  if (e->cls->sim) { /* its own frames (f: the kept frame); one view; the backward is sim_backward's */
    int rc = w != 0 ? DS_ERR_UNSUPPORTED : e->cls->sim->render(e, f, e->img);
    if (!rc) rc = ds_image_loss_eval(e->il, e->img, e->goal_img, loss, NULL);
    return rc && !e->err.code ? ds__seterr(&e->err, rc, "%s: frame %d: %s", what, f, ds_strerror(rc)) : rc;
  }
  const dsRasterMesh rm = ds__env_raster_mesh(e, x);
  dsReal sum = 0;
  for (int v = 0; v < 2 && rs[v]; v++) {
    dsReal l = 0;
    int rc = ds_raster_render(rs[v], &rm, e->img);
    if (rc) return ds__seterr(&e->err, rc, "%s%s: frame %d: %s", what, v ? " (camera2)" : "", f, ds_raster_last_error(rs[v]));
    rc = ds_image_loss_eval(e->il, e->img, goals[v], &l, w != 0 ? e->img_grad : NULL);
    if (rc) return ds__seterr(&e->err, rc, "%s%s: frame %d: image loss failed (%s)", what, v ? " (camera2)" : "", f,
                              ds_strerror(rc));
    sum += l;
    if (w != 0) {
      for (size_t p = 0; p < npix; p++) e->img_grad[p] *= w;
      rc = ds__env_raster_backward(e, rs[v], &rm, e->img_grad, e->d->adj_x);
      if (rc) return ds__seterr(&e->err, rc, "%s%s: frame %d: %s", what, v ? " (camera2)" : "", f, ds_raster_last_error(rs[v]));
    }
  }
  if (loss) *loss = sum;
  return 0;
}

/* Frame f is the state x: keep its positions; its loss is evaluated on
 * demand (frame_loss_of). */
static void keep_frame(dsEnv* e, int f, const dsReal* x) {
  if (e->cls->sim) e->cls->sim->keep_frame(e, f);
  memcpy(e->frame_x + (size_t)f * e->n3, x, (size_t)e->n3 * sizeof(dsReal));
  e->frame_done[f] = 0;
}

/* The image loss of kept frame f against the goal, rendered the first time
 * it is asked for in the episode. */
static int frame_loss_of(dsEnv* e, int f, dsReal* loss) {
  if (!e->frame_done[f]) {
    dsReal l = 0;
    int rc = ds__env_frame_image_loss(e, e->frame_x + (size_t)f * e->n3, &l, 0, "render", f);
    if (rc) return rc;
    e->frame_loss[f] = l;
    e->frame_done[f] = 1;
  }
  *loss = e->frame_loss[f];
  return 0;
}

/* The episode's goal, from the start its definition gives (e->x0_def: the
 * built model as the class's own reset draws placed it, not parameters set
 * later with ds_env_set_param): its centre of mass com0 (the metric's
 * origin), the target (relative goals: com0 plus the drawn offset), the goal
 * state (that shape moved so that its centre of mass is the target) and the
 * goal image, re-rendered only when the goal state changed. The backward
 * treats them as the constants they are (dsim/env.h "Targets"). */
static int place_goal(dsEnv* e) {
  const dsEnvDef* def = &e->def;
  const dsModel* m = e->m;
  const dsReal* xs = e->x0_def;
  ds__env_com(m, xs, e->com0);
  const dsReal rel[3] = {def->goal_relative ? e->com0[0] : 0, def->goal_relative ? e->com0[1] : 0,
                         def->goal_relative ? e->com0[2] : 0};
  e->target[0] = rel[0] + e->goal_draw;
  e->target[1] = rel[1] + def->goal_y;
  e->target[2] = rel[2] + def->goal_z;
  if (e->cls->target) e->cls->target(e, e->target);
  if (e->cls->sim) { /* the class's goal image (it caches what it can) */
    int rc = e->cls->sim->goal(e, e->goal_img);
    e->have_goal = !rc;
    e->goal_serial += !rc;
    return rc;
  }
  int same = e->have_goal;
  for (int i = 0; i < e->np; i++)
    for (int k = 0; k < 3; k++) {
      const dsReal g = xs[3 * i + k] + (e->target[k] - e->com0[k]);
      same = same && e->goal_x[3 * i + k] == g;
      e->goal_x[3 * i + k] = g;
    }
  if (!same) {
    int rc = ds__env_render_x(e, e->goal_x, e->goal_img);
    if (!rc && e->r2) {
      dsRasterMesh rm = ds__env_raster_mesh(e, e->goal_x);
      rc = ds_raster_render(e->r2, &rm, e->goal_img2);
      if (rc) ds__seterr(&e->err, rc, "render (camera2): %s", ds_raster_last_error(e->r2));
    }
    if (rc) {
      e->have_goal = 0;
      return rc;
    }
    e->have_goal = 1;
    e->goal_serial++;
  }
  return 0;
}

/* *r minus frame f's loss term, when the built-in loss weighs frame f. */
static int frame_reward(dsEnv* e, int f, dsReal* r) {
  const int lk = e->def.loss_kind;
  if (e->def.reward_kind == DS_ENV_REWARD_DENSE) return 0; /* dense_reward instead */
  if (!(lk == DS_ENV_LOSS_IMAGE_SUM || (lk == DS_ENV_LOSS_IMAGE_LAST && f == e->nframe - 1))) return 0;
  dsReal l = 0;
  int rc = frame_loss_of(e, f, &l);
  if (!rc) *r -= l;
  return rc;
}

/* ---- the physics on the batched engine (e->bs) ----------------------------------------
 * The episode's state, tape and adjoints live in e->bs (a CUDA device or
 * the CPU backend); e->d mirrors on the host what the env reads: x and v at
 * frames and step ends, t, the activation block the class writes, and the
 * adjoint scratch add_terms writes into (uploaded where it was written). */
static int bs_fail(dsEnv* e, int rc, const char* what) {
  return ds__seterr(&e->err, rc, "%s: %s", what, ds_bsim_last_error(e->bs));
}

/* Every parameter of the model into the batch, then the batch reset to the
 * mirror's state (the start of an episode). */
static int bs_sync(dsEnv* e) {
  const dsModel* m = e->m;
  int rc = ds_bsim_reset(e->bs); /* parameters are set at substep 0 */
  for (int k = 0; k < ds_param_count() && !rc; k++) {
    const dsReal* p;
    int n;
    if (ds_model_param(m, ds_param_name(k), &p, &n) || n == 0) continue;
    rc = ds_bsim_set_param(e->bs, -1, ds_param_name(k), p, n);
  }
  if (!rc) rc = m->artic ? ds_bsim_rewind_artic(e->bs, 0, e->d->artic_state) : ds_bsim_set_state(e->bs, e->d->x, e->d->v);
  return rc ? bs_fail(e, rc, "batched engine: episode start") : 0;
}

/* The mirror's state from the batch. */
static int bs_pull(dsEnv* e) {
  int rc = ds_bsim_get_state(e->bs, e->d->x, e->d->v);
  if (!rc && e->m->artic) rc = ds_bsim_get_artic_state(e->bs, e->d->artic_state);
  return rc ? bs_fail(e, rc, "batched engine: reading the state") : 0;
}

/* Substeps s0 .. s1 of step k with the action held: one activation upload,
 * then runs of substeps up to each frame (whose positions are kept). The
 * frames the loss counts and the observed image at the step's end (into
 * image, *rendered set) are rendered where the engine runs. */
static int bs_step(dsEnv* e, int k, int s0, int s1, dsReal* r, int want_reward, dsReal* image, int* rendered) {
  dsData* d = e->d;
  int rc = ds_bsim_set_act(e->bs, ds__env_bs_act(e->m, d));
  if (rc) return bs_fail(e, rc, "step: batched engine: activations");
  int s = s0;
  while (s < s1) {
    int next = s + 1;
    while (next < s1 && e->frame_at[next] < 0) next++;
    rc = ds_bsim_step(e->bs, next - s, NULL);
    if (rc) return ds__env_step_failed(e, k, rc, ds_bsim_last_error(e->bs));
    s = next;
    if (e->frame_at[s] >= 0 && (rc = bs_pull(e))) return rc;
    const int want_loss = ds__env_frame_counts(e, e->frame_at[s]), want_img = s == s1 && image && e->def.obs_image;
    dsReal fl = 0;
    int dev = 0;
    if (want_loss || want_img) {
      rc = ds__env_group_render_now(&e, 1, e->bs, &e->bgr, want_img ? image : NULL, want_loss ? &fl : NULL);
      if (rc && rc != DS_ERR_UNSUPPORTED) return rc;
      dev = rc == 0;
      *rendered = dev && want_img;
    }
    if ((rc = ds__env_step_at(e, s, want_reward, r, dev && want_loss ? &fl : NULL))) return rc;
  }
  return e->frame_at[s1] >= 0 ? 0 : bs_pull(e); /* at a frame the state came back already */
}

int ds_env_reset(dsEnv* e, uint64_t seed, dsReal* obs, dsReal* image) {
  if (!e) return DS_ERR_INVALID;
  ds__clearerr(&e->err);
  const dsEnvDef* def = &e->def;
  uint64_t rng = seed;
  /* draws, in a fixed order: goal x, then (cloth) size and height */
  const dsReal xt = (dsReal)(def->goal_x_min + (def->goal_x_max - def->goal_x_min) * ds__splitmix64_uniform(&rng));
  int rc = 0;
  if (e->cls->reset) {
    rc = e->cls->reset(e, &rng);
    if (rc) return e->err.code ? rc : ds__seterr(&e->err, rc, "%s: reset: %s", e->cls->name, ds_strerror(rc));
  }
  const dsModel* m = e->m;
  dsData* d = e->d;
  ds_data_reset(m, d);
  if (e->cls->sim && (rc = e->cls->sim->reset(e))) return rc;
  /* a class with its own draws places its body there (cloth: the sheet's
   * height): that is the definition's start */
  if (e->cls->reset) memcpy(e->x0_def, m->nbody ? d->x : m->x0, (size_t)e->n3 * sizeof(dsReal));
  e->failed = 0;
  e->did_backward = 0;
  memset(e->set_at, 0, (size_t)e->T + 1);
  e->goal_draw = xt;
  if ((rc = place_goal(e))) return rc;
  e->goal_seed = seed;
  if (e->bs && (rc = bs_sync(e))) return rc;
  e->bs_dirty = e->bs_member;
  e->have_episode = 1;
  if (e->frame_at[0] >= 0) keep_frame(e, e->frame_at[0], d->x);
  ds__env_write_obs(e, d->x, d->v, obs);
  if (image && def->obs_image) {
    rc = ds__env_render_x(e, d->x, image);
    if (rc) return rc;
  }
  return 0;
}

/* ---- step ------------------------------------------------------------------------ */
int ds__env_step_begin(dsEnv* e, const dsReal* action, int* s0_out, int* s1_out) {
  if (!action && e->adim > 0) return ds__seterr(&e->err, DS_ERR_INVALID, "step: action is NULL");
  if (!e->have_episode) return ds__seterr(&e->err, DS_ERR_STATE, "step: reset the env first");
  if (e->failed) return ds__seterr(&e->err, DS_ERR_STATE, "step: the episode diverged; reset the env");
  const int s0 = e->d->t;
  if (s0 >= e->T) return ds__seterr(&e->err, DS_ERR_STATE, "step: the episode is done (%d substeps)", e->T);
  const int k = s0 / e->C;
  for (int i = 0; i < e->adim; i++)
    if (!isfinite(action[i]))
      return ds__seterr(&e->err, DS_ERR_RANGE, "step %d: action[%d] is not finite", k, i);
  if (e->adim) memcpy(e->actions + (size_t)k * e->adim, action, (size_t)e->adim * sizeof(dsReal)); /* none: may be NULL */
  e->did_backward = 0;
  /* the batched engine holds the activations over the step (act_first
     classes); an initial action's hook changes the mirror's substep-0
     state, which goes up as the instance's (a group's member: at its
     batch's next upload) */
  if ((e->bs || e->bs_member) && !ds__env_initial_hook(e)) {
    ds__env_action_fwd(e, k, s0, action);
  } else if ((e->bs || e->bs_member) && s0 == 0) {
    ds__env_action_fwd(e, k, 0, action);
    e->bs_dirty = e->bs_member;
    const int rc = e->bs ? ds_bsim_set_state(e->bs, e->d->x, e->d->v) : 0;
    if (rc) return bs_fail(e, rc, "step 0: batched engine: the initial state");
  }
  *s0_out = s0;
  *s1_out = step_end(e, k);
  return 0;
}

int ds__env_step_at(dsEnv* e, int s, int want_reward, dsReal* r, const dsReal* frame_loss) {
  e->d->t = s;
  const int f = e->frame_at[s];
  if (f < 0) return 0;
  keep_frame(e, f, e->d->x);
  if (frame_loss) { /* rendered where the engine runs: the same bits as frame_loss_of */
    e->frame_loss[f] = *frame_loss;
    e->frame_done[f] = 1;
  }
  /* the reward's loss term (rendered only when a reward is asked for) */
  return want_reward ? frame_reward(e, f, r) : 0;
}

/* The dense reward of step k ending at positions x (dsim/env.h "Loss and
 * reward"): the progress by the class's metric from the end of step k - 1
 * (its kept positions; k = 0: the metric's origin com0) to x. */
static dsReal dense_reward(const dsEnv* e, int k, const dsReal* x) {
  dsReal c0[3], c1[3];
  if (k > 0)
    ds__env_com(e->m, e->step_x + (size_t)(k - 1) * e->n3, c0);
  else
    memcpy(c0, e->com0, sizeof c0);
  ds__env_com(e->m, x, c1);
  if (e->cls->metric_kind == DS_METRIC_DISPLACEMENT) return c1[0] - c0[0];
  dsReal d0 = 0, d1 = 0;
  for (int i = 0; i < 3; i++) {
    d0 += (c0[i] - e->target[i]) * (c0[i] - e->target[i]);
    d1 += (c1[i] - e->target[i]) * (c1[i] - e->target[i]);
  }
  return (dsReal)(sqrt((double)d0) - sqrt((double)d1));
}

int ds__env_step_end(dsEnv* e, dsReal r, dsReal* obs, dsReal* image, const dsReal* rendered, dsReal* reward,
                     int* done) {
  dsData* d = e->d;
  const int s1 = d->t, k = (s1 - 1) / e->C;
  if (e->def.reward_kind == DS_ENV_REWARD_DENSE)
    r = dense_reward(e, k, d->x);
  else if (s1 == e->T && e->def.loss_kind == DS_ENV_LOSS_COM)
    r -= ds__env_com_loss(e, d->x);
  memcpy(e->step_x + (size_t)k * e->n3, d->x, (size_t)e->n3 * sizeof(dsReal));
  memcpy(e->step_v + (size_t)k * e->n3, d->v, (size_t)e->n3 * sizeof(dsReal));
  ds__env_write_obs(e, d->x, d->v, obs);
  if (image && e->def.obs_image) {
    int rc = 0;
    if (rendered) {
      if (rendered != image) memcpy(image, rendered, 4 * (size_t)e->def.width * e->def.height * sizeof(dsReal));
    } else {
      rc = ds__env_render_x(e, d->x, image);
    }
    if (rc) return rc;
  }
  if (reward) *reward = r;
  if (done) *done = s1 == e->T;
  return 0;
}

int ds__env_step_failed(dsEnv* e, int k, int rc, const char* msg) {
  e->failed = 1;
  return ds__seterr(&e->err, rc, "step %d: %s", k, msg);
}

int ds_env_step(dsEnv* e, const dsReal* action, dsReal* obs, dsReal* image, dsReal* reward, int* done) {
  if (!e) return DS_ERR_INVALID;
  if (e->bs_member) return ds__env_refuse_member(e, "step (use ds_batch_step)");
  const dsModel* m = e->m;
  dsData* d = e->d;
  int s0 = 0, s1 = 0;
  int rc = ds__env_step_begin(e, action, &s0, &s1);
  if (rc) return rc;
  const int k = s0 / e->C;
  dsReal r = 0;
  int rendered = 0;
  if (e->bs && (rc = bs_step(e, k, s0, s1, &r, reward != NULL, image, &rendered))) return rc;
  for (int s = e->bs ? s1 : s0; s < s1; s++) {
    if (e->cls->sim) { /* the class's physics; its message on e */
      ds__clearerr(&e->err);
      if ((rc = e->cls->sim->step(e, k, s, action))) {
        char msg[DS_ERRMSG_LEN];
        snprintf(msg, sizeof msg, "%s", e->err.code ? ds__errmsg(&e->err) : ds_strerror(rc));
        return ds__env_step_failed(e, k, rc, msg);
      }
    } else {
      ds__env_action_fwd(e, k, s, action);
      rc = ds_step(m, d);
      if (rc) return ds__env_step_failed(e, k, rc, ds_data_last_error(d));
    }
    if ((rc = ds__env_step_at(e, s + 1, reward != NULL, &r, NULL))) return rc;
  }
  d->t = s1;
  return ds__env_step_end(e, r, obs, image, rendered ? image : NULL, reward, done);
}

int ds_env_loss(const dsEnv* ce, dsReal* loss) {
  if (!ce || !loss) return DS_ERR_INVALID;
  if (!ce->have_episode) return DS_ERR_STATE;
  /* frames not evaluated yet are rendered here, into the env's scratch
   * (dsim/env.h: not concurrently with another call on this env) */
  dsEnv* e = (dsEnv*)ce;
  const int nf = ds__env_frames_done(e, e->d->t);
  dsReal l = 0, lf = 0;
  int rc = 0;
  switch (e->def.loss_kind) {
    case DS_ENV_LOSS_IMAGE_LAST:
      if (nf > 0 && !(rc = frame_loss_of(e, nf - 1, &lf))) l = lf;
      break;
    case DS_ENV_LOSS_IMAGE_SUM:
      for (int f = 0; f < nf && !rc; f++)
        if (!(rc = frame_loss_of(e, f, &lf))) l += lf;
      break;
    default:
      l = ds__env_com_loss(e, e->d->x);
  }
  if (rc) return rc;
  *loss = l;
  return 0;
}
/* ---- image loss of the env's definition against any target -------------------------- */
int ds_env_image_loss(dsEnv* e, const dsReal* image, const dsReal* target, dsReal* loss, dsReal* grad) {
  if (!e || !image || !target || !loss) return DS_ERR_INVALID;
  int rc = ds_image_loss_eval(e->il, image, target, loss, grad);
  if (rc) return ds__seterr(&e->err, rc, "image loss failed (%s)", ds_strerror(rc));
  return 0;
}

int ds_env_image_loss_create(const dsEnv* e, int kind, dsImageLoss** out, char* err, size_t errlen) {
  if (!e || !out) return DS_ERR_INVALID;
  *out = NULL;
  dsLossDef ld = e->ldef;
  ld.kind = kind;
  int rc = ds_image_loss_check(&ld, e->def.width, e->def.height, err, errlen);
  if (!rc) rc = ds_image_loss_create(out, &ld, e->def.width, e->def.height);
  if (rc && err && errlen && !err[0]) snprintf(err, errlen, "image loss: %s", ds_strerror(rc));
  return rc;
}

int ds_env_image_loss_eval(dsImageLoss* l, const dsReal* image, const dsReal* target, dsReal* loss, dsReal* grad) {
  return ds_image_loss_eval(l, image, target, loss, grad);
}

void ds_env_image_loss_destroy(dsImageLoss* l) { ds_image_loss_destroy(l); }

int ds_env_elements(const dsEnv* e, const char* name, const int** idx, int* nelem, int* per) {
  if (!e || !name || !idx || !nelem || !per) return DS_ERR_INVALID;
  const dsModel* m = e->m;
  *idx = NULL;
  if (!strncmp(name, "tet.", 4)) {
    *idx = m->tet_idx, *nelem = m->ntet, *per = 4;
  } else if (!strncmp(name, "tri.", 4)) {
    *idx = m->tri_idx, *nelem = m->ntri, *per = 3;
  } else if (!strncmp(name, "spring.", 7)) {
    *idx = m->spring_idx, *nelem = m->nspring, *per = 2;
  } else if (!strncmp(name, "body.", 5)) {
    *idx = m->body_vrange, *nelem = m->nbody, *per = 2;
  } else if (!strncmp(name, "particle.", 9) || !strcmp(name, "initial_position") || !strcmp(name, "initial_velocity")) {
    *nelem = m->nparticle, *per = 1;
  } else {
    return DS_ERR_NOTFOUND;
  }
  return 0;
}

/* ---- parameters ------------------------------------------------------------------- */
/* The renderer's lights as parameters (a particle env's, not a class with
 * its own physics): light.ambient (k_amb), light.directional (k_dir) and
 * light.direction (3 values: the direction towards the light, normalised by
 * the renderer; 0, 0, 0 is a headlight, whose direction has no gradient).
 * One light for the env's views (camera and camera2). Values: the env's
 * definition (render.ambient, directional, light_dir); gradients: the last
 * backward's (ds_raster_backward_light, or ds_batch_raster_light_grad where
 * the batched engine's frame renderer draws the frames: the same bits).
 * Offset into the five values, or -1. */
static int light_param(const dsEnv* e, const char* name, int* count) {
  if (e->cls->sim || strncmp(name, "light.", 6)) return -1;
  *count = 1;
  if (!strcmp(name + 6, "ambient")) return 0;
  if (!strcmp(name + 6, "directional")) return 1;
  *count = 3;
  return strcmp(name + 6, "direction") ? -1 : 2;
}
static dsReal* light_value(dsEnv* e, int off) {
  return off == 0 ? &e->def.ambient : off == 1 ? &e->def.directional : e->def.light_dir;
}

static int set_light(dsEnv* e, const char* name, int off, const dsReal* values, int count, int n) {
  if (count != n)
    return ds__seterr(&e->err, DS_ERR_RANGE, "set_param %s: expected %d value%s, got %d", name, n, n > 1 ? "s" : "", count);
  for (int i = 0; i < n; i++)
    if (!isfinite((double)values[i]) || (off < 2 && values[i] < 0))
      return ds__seterr(&e->err, DS_ERR_RANGE, "set_param %s: expected %s, got %g", name,
                        off < 2 ? "a finite number >= 0" : "finite components", (double)values[i]);
  memcpy(light_value(e, off), values, (size_t)n * sizeof(dsReal));
  dsRaster* rs[2] = {e->r, e->r2};
  for (int v = 0; v < 2 && rs[v]; v++) {
    dsRenderSettings s = *ds_raster_settings(rs[v]);
    s.ambient = e->def.ambient;
    s.directional = e->def.directional;
    for (int k = 0; k < 3; k++) s.light_dir[k] = e->def.light_dir[k];
    int rc = ds_raster_set_settings(rs[v], &s);
    if (rc) return ds__seterr(&e->err, rc, "set_param %s: %s", name, ds_raster_last_error(rs[v]));
  }
  return 0;
}

int ds_env_param(const dsEnv* e, const char* name, const dsReal** values, int* count) {
  if (!e || !name) return DS_ERR_INVALID;
  int n = 0, off = light_param(e, name, &n);
  if (off >= 0) {
    if (values) *values = light_value((dsEnv*)e, off);
    if (count) *count = n;
    return 0;
  }
  if (e->cls->sim) return e->cls->sim->param(e, name, values, NULL, count);
  return ds_model_param(e->m, name, values, count);
}

int ds_env_set_param(dsEnv* e, const char* name, const dsReal* values, int count) {
  if (!e || !name || !values) return DS_ERR_INVALID;
  if (e->have_episode && e->d->t > 0)
    return ds__seterr(&e->err, DS_ERR_STATE, "set_param %s: only between episodes (now at substep %d)", name, e->d->t);
  int nl = 0, off = light_param(e, name, &nl);
  if (off >= 0) return set_light(e, name, off, values, count, nl);
  if (e->cls->sim) { /* the class's parameters; its message on e */
    ds__clearerr(&e->err);
    int rc = e->cls->sim->set_param(e, name, values, count);
    if (rc && !e->err.code) ds__seterr(&e->err, rc, "set_param %s: %s", name, ds_strerror(rc));
    if (!rc && e->have_episode) rc = e->cls->sim->reset(e);
    if (!rc && e->have_episode && e->frame_at[0] >= 0) keep_frame(e, e->frame_at[0], e->d->x);
    return rc;
  }
  int rc = ds_model_set_param(e->m, name, values, count);
  if (rc) return ds__seterr(&e->err, rc, "set_param: %s", ds_model_last_error(e->m));
  if (e->have_episode) {
    /* before the first step: the state follows new initial values (rigid
       bodies: their vertices are re-posed from the body parameters); the
       target, the goal image and the metric's origin stay the
       definition's */
    if (e->m->nbody || e->m->artic) {
      ds_data_reset(e->m, e->d);
    } else {
      memcpy(e->d->x, e->m->x0, (size_t)e->n3 * sizeof(dsReal));
      memcpy(e->d->v, e->m->v0, (size_t)e->n3 * sizeof(dsReal));
    }
    if (e->frame_at[0] >= 0) keep_frame(e, e->frame_at[0], e->d->x);
    if (e->bs) rc = bs_sync(e);
    e->bs_dirty = e->bs_member;
  }
  return rc;
}

int ds_env_copy_params(dsEnv* dst, const dsEnv* src) {
  if (!dst || !src) return DS_ERR_INVALID;
  if (src->cls->sim) { /* the class's own names */
    if (dst->cls != src->cls) return ds__seterr(&dst->err, DS_ERR_INVALID, "copy_params: envs of different classes");
    const char* name;
    for (int i = 0; (name = src->cls->sim->param_name(src, i)); i++) {
      const dsReal* p;
      int n, rc = src->cls->sim->param(src, name, &p, NULL, &n);
      if (!rc) rc = ds_env_set_param(dst, name, p, n);
      if (rc) return rc;
    }
    return 0;
  }
  for (int k = 0; k < ds_param_count(); k++) {
    const char* name = ds_param_name(k);
    const dsReal* p;
    int n;
    if (ds_model_param(src->m, name, &p, &n) || n == 0) continue;
    int rc = ds_env_set_param(dst, name, p, n);
    if (rc) return rc;
  }
  return 0;
}

int ds_env_param_grad(const dsEnv* e, const char* name, const dsReal** grad, int* count) {
  if (!e || !name) return DS_ERR_INVALID;
  int nl = 0, off = light_param(e, name, &nl);
  if (off >= 0) {
    if (grad) *grad = e->light_grad + off;
    if (count) *count = nl;
    return 0;
  }
  if (e->cls->sim) return e->cls->sim->param(e, name, NULL, grad, count);
  dsReal* p = NULL;
  int rc = ds_grad_param(e->g, name, &p, count);
  if (grad) *grad = p;
  return rc;
}

/* rigid bodies add their states (13 each) after the particles', an
 * articulation its (q, qd) */
static int artic_ns(const dsModel* m) { return m->artic_nq + m->artic_nv; }
/* a class with its own physics and state hooks: the substep, then its state */
static int sim_state(const dsEnv* e) { return e->cls->sim && e->cls->sim->state_size; }
static int state_size(const dsEnv* e) {
  if (sim_state(e)) return 1 + e->cls->sim->state_size(e);
  return 1 + 2 * e->n3 + 13 * e->m->nbody + artic_ns(e->m);
}
int ds_env_state_size(const dsEnv* e) { return e ? state_size(e) : DS_ERR_INVALID; }

/* ---- state --------------------------------------------------------------------------- */
int ds_env_get_state(const dsEnv* e, dsReal* state, int n) {
  if (!e || !state) return DS_ERR_INVALID;
  if (n != state_size(e)) return DS_ERR_RANGE;
  state[0] = (dsReal)e->d->t;
  if (sim_state(e)) return e->cls->sim->get_state(e, state + 1);
  memcpy(state + 1, e->d->x, (size_t)e->n3 * sizeof(dsReal));
  memcpy(state + 1 + e->n3, e->d->v, (size_t)e->n3 * sizeof(dsReal));
  if (e->m->nbody) memcpy(state + 1 + 2 * e->n3, e->d->body, 13 * (size_t)e->m->nbody * sizeof(dsReal));
  if (e->m->artic) memcpy(state + 1 + 2 * e->n3, e->d->artic_state, (size_t)artic_ns(e->m) * sizeof(dsReal));
  return 0;
}

/* 1 when state (ds_env_get_state's layout) is the episode's own at step
 * boundary s: the current one, or a step end the env keeps (particles only;
 * rigid bodies and articulations count as changed there). */
static int same_state(const dsEnv* e, int s, const dsReal* state) {
  const dsData* d = e->d;
  const size_t b3 = (size_t)e->n3 * sizeof(dsReal);
  const dsReal *x, *v;
  if (s == d->t) {
    x = d->x;
    v = d->v;
    const dsReal* rest = state + 1 + 2 * e->n3;
    if (e->m->nbody && memcmp(d->body, rest, 13 * (size_t)e->m->nbody * sizeof(dsReal))) return 0;
    if (e->m->artic && memcmp(d->artic_state, rest, (size_t)artic_ns(e->m) * sizeof(dsReal))) return 0;
  } else {
    if (s == 0 || e->m->nbody || e->m->artic) return s == 0;
    x = e->step_x + (size_t)((s - 1) / e->C) * e->n3;
    v = e->step_v + (size_t)((s - 1) / e->C) * e->n3;
  }
  return !memcmp(x, state + 1, b3) && !memcmp(v, state + 1 + e->n3, b3);
}

/* The checks every set_state makes: 0 and *s_out, the substep of state[0]. */
static int set_state_check(dsEnv* e, const dsReal* state, int n, int* s_out) {
  if (n != state_size(e))
    return ds__seterr(&e->err, DS_ERR_RANGE, "set_state: %d values, expected %d", n, state_size(e));
  if (!e->have_episode) return ds__seterr(&e->err, DS_ERR_STATE, "set_state: reset the env first");
  if (e->cls->sim && !sim_state(e))
    return ds__seterr(&e->err, DS_ERR_UNSUPPORTED,
                      "set_state: %s keeps its physics' state itself and has no state hooks (dsEnvSim.state_size)",
                      e->cls->name);
  const double sv = (double)state[0];
  const int s = (int)sv;
  if (!(sv >= 0 && sv <= e->T) || (double)s != sv || (s % e->C != 0 && s != e->T))
    return ds__seterr(&e->err, DS_ERR_RANGE, "set_state: substep %g is not a step boundary in [0, %d]", sv, e->T);
  if (s > e->d->t)
    return ds__seterr(&e->err, DS_ERR_RANGE, "set_state: substep %d is ahead of the episode (%d)", s, e->d->t);
  for (int q = 1; q < n; q++)
    if (!isfinite(state[q])) return ds__seterr(&e->err, DS_ERR_RANGE, "set_state: value %d is not finite", q);
  *s_out = s;
  return 0;
}

/* A class's own physics (dsEnvSim.set_state): it rewinds its state and
 * tape; the env its time, frames and set points. The class cannot say
 * whether the state is the episode's own, so the set point counts as a
 * change (a backward with a checkpointed tape then needs s on a
 * checkpoint, which a window's start is anyway). */
static int sim_set_state(dsEnv* e, int s, const dsReal* state) {
  ds__clearerr(&e->err);
  int rc = e->cls->sim->set_state(e, s, state + 1);
  if (rc) return e->err.code ? rc : ds__seterr(&e->err, rc, "set_state: %s", ds_strerror(rc));
  e->d->t = s;
  e->d->bt = -1;
  e->failed = 0;
  e->did_backward = 0;
  memset(e->set_at + s, 0, (size_t)(e->T - s) + 1);
  e->set_at[s] = 1;
  if (e->frame_at[s] >= 0) keep_frame(e, e->frame_at[s], e->d->x);
  return 0;
}

int ds_env_set_state(dsEnv* e, const dsReal* state, int n) {
  if (!e || !state) return DS_ERR_INVALID;
  int s = 0, rc = set_state_check(e, state, n, &s);
  if (rc) return rc;
  if (e->cls->sim) return sim_set_state(e, s, state);
  dsData* d = e->d;
  if (e->bs) {
    rc = e->m->artic ? ds_bsim_rewind_artic(e->bs, s, state + 1 + 2 * e->n3)
                     : ds_bsim_rewind(e->bs, s, state + 1, state + 1 + e->n3);
    if (rc) return bs_fail(e, rc, "set_state: batched engine");
  }
  e->bs_dirty = e->bs_member;
  const int same = same_state(e, s, state);
  /* rewind the engine tape to s: the records before s stay valid */
  d->t = s;
  d->bt = -1;
  d->seg_start = -1;
  d->failed = 0;
  const int taped = d->max_substeps > 0; /* forward-only data keep no records */
  if (e->m->nact && taped) d->act_n = s > 0 ? d->act_rec[s - 1] + 1 : 0;
  if (taped) d->fext_n = s > 0 ? d->fext_rec[s - 1] + 1 : 0;
  memcpy(d->x, state + 1, (size_t)e->n3 * sizeof(dsReal));
  memcpy(d->v, state + 1 + e->n3, (size_t)e->n3 * sizeof(dsReal));
  if (e->m->nbody) {
    if (taped) d->bfext_n = s > 0 ? d->bfext_rec[s - 1] + 1 : 0;
    memcpy(d->body, state + 1 + 2 * e->n3, 13 * (size_t)e->m->nbody * sizeof(dsReal));
  }
  if (e->m->artic) memcpy(d->artic_state, state + 1 + 2 * e->n3, (size_t)artic_ns(e->m) * sizeof(dsReal));
  if (s > 0) { /* the state at the end of step (s-1)/C: what the next dense reward and a window's backward read */
    memcpy(e->step_x + (size_t)((s - 1) / e->C) * e->n3, d->x, (size_t)e->n3 * sizeof(dsReal));
    memcpy(e->step_v + (size_t)((s - 1) / e->C) * e->n3, d->v, (size_t)e->n3 * sizeof(dsReal));
  }
  e->failed = 0;
  e->did_backward = 0;
  /* the tape after s is gone with the set points it held; the episode's own
     state there is no set point (a restore, then a replay) */
  memset(e->set_at + s, 0, (size_t)(e->T - s) + 1);
  e->set_at[s] = (unsigned char)!same;
  if (e->frame_at[s] >= 0) keep_frame(e, e->frame_at[s], d->x);
  return 0;
}

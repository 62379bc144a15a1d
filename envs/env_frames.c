/* Environments: the frame terms of a group of envs on one batched engine,
 * rendered and differentiated where the engine's instances run (the batched
 * renderer of dsim/raster.h on the engine's backend context). */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "envs/env_priv.h"

/* ---- frame terms rendered where the group's engine runs ---------------------------
 * One batched renderer per view on the engine's backend and context
 * (dsim/raster.h): the engine's positions at the frame's substep
 * are rendered, the loss against each env's goal taken and differentiated
 * (times each env's frame weight) and the adjoint added to the engine's,
 * without the positions or images crossing to the host. Per instance the
 * bits are those of ds__env_frame_image_loss. */
struct dsEnvGroupRender {
  dsBatchRaster* r[2];
  int nview;
  unsigned* serial; /* B x 2: the goal serial of each instance's uploaded goal (0: none) */
  dsReal* goals;    /* B x npx staging */
  dsReal* w;        /* B frame weights */
  dsReal* loss;     /* B */
  dsReal* lsum;     /* B: summed over the views */
  dsRenderSettings* dl; /* B: a backward's light gradients */
};

static int batched_frames = 1;
void ds__env_set_batched_frames(int on) { batched_frames = on != 0; }
int ds__env_batched_frames(void) { return batched_frames; }

void ds__env_group_render_free(dsEnvGroupRender* gr) {
  if (!gr) return;
  ds_batch_raster_destroy(gr->r[0]);
  ds_batch_raster_destroy(gr->r[1]);
  ds__free(gr->serial);
  ds__free(gr->goals);
  ds__free(gr->w);
  ds__free(gr->loss);
  ds__free(gr->lsum);
  ds__free(gr->dl);
  ds__free(gr);
}

static int group_render_make(dsEnvGroupRender** out, dsEnv* e0, dsBatchSim* bs, int B, char* err, size_t errlen);

int ds__env_group_render_make(dsEnvGroupRender** out, dsEnv** envs, int n, dsBatchSim* bs) {
  const dsEnvDef* d = &envs[0]->def;
  if (*out || !batched_frames || !(d->obs_image || d->loss_kind != DS_ENV_LOSS_COM)) return 0;
  char why[256];
  const int rc = group_render_make(out, envs[0], bs, n, why, sizeof why);
  if (rc)
    for (int i = 0; i < n; i++) ds__seterr(&envs[i]->err, rc, "%s: %s", envs[i]->cls->name, why);
  return rc;
}

static int group_render_make(dsEnvGroupRender** out, dsEnv* e0, dsBatchSim* bs, int B, char* err, size_t errlen) {
  dsEnvGroupRender* gr = (dsEnvGroupRender*)ds__calloc(1, sizeof *gr);
  const size_t npx = 4 * (size_t)e0->def.width * e0->def.height;
  int rc = gr ? 0 : ds__puterr(err, errlen, DS_ERR_NOMEM, "out of memory");
  if (gr) {
    gr->nview = e0->r2 ? 2 : 1;
    gr->serial = (unsigned*)ds__calloc(2 * (size_t)B, sizeof(unsigned));
    gr->goals = (dsReal*)ds__malloc(sizeof(dsReal) * npx * (size_t)B);
    gr->w = (dsReal*)ds__calloc((size_t)B, sizeof(dsReal));
    gr->loss = (dsReal*)ds__calloc((size_t)B, sizeof(dsReal));
    gr->lsum = (dsReal*)ds__calloc((size_t)B, sizeof(dsReal));
    gr->dl = (dsRenderSettings*)ds__calloc((size_t)B, sizeof(dsRenderSettings));
    if (!gr->serial || !gr->goals || !gr->w || !gr->loss || !gr->lsum || !gr->dl)
      rc = ds__puterr(err, errlen, DS_ERR_NOMEM, "out of memory");
  }
  for (int v = 0; v < (gr ? gr->nview : 0) && !rc; v++)
    rc = ds_batch_raster_create(&gr->r[v], ds_bsim_device(bs).kind, ds_bsim_context(bs),
                                ds_raster_settings(v ? e0->r2 : e0->r), B, e0->np, e0->m->nface, e0->m->face_idx,
                                e0->face_colors, DS_COLOR_FACE, err, errlen);
  if (rc) {
    ds__env_group_render_free(gr);
    return rc;
  }
  *out = gr;
  return 0;
}

/* Uploads each env's goal seen from view v where the group's renderer runs,
 * when some env's goal changed since the last upload. */
static int group_goals(dsEnvGroupRender* gr, dsEnv** envs, int n, int v) {
  const size_t npx = 4 * (size_t)envs[0]->def.width * envs[0]->def.height;
  int stale = 0;
  for (int i = 0; i < n; i++) stale |= gr->serial[2 * i + v] != envs[i]->goal_serial;
  if (!stale) return 0;
  for (int i = 0; i < n; i++) {
    memcpy(gr->goals + (size_t)i * npx, v ? envs[i]->goal_img2 : envs[i]->goal_img, npx * sizeof(dsReal));
    gr->serial[2 * i + v] = envs[i]->goal_serial;
  }
  int rc = ds_batch_raster_set_goal(gr->r[v], gr->goals, 1);
  if (rc)
    for (int i = 0; i < n; i++) gr->serial[2 * i + v] = 0; /* upload again next time */
  return rc;
}

int ds__env_frame_counts(const dsEnv* e, int f) {
  const int lk = e->def.loss_kind;
  return f >= 0 && (lk == DS_ENV_LOSS_IMAGE_SUM || (lk == DS_ENV_LOSS_IMAGE_LAST && f == e->nframe - 1));
}

int ds__env_group_render_now(dsEnv** envs, int n, dsBatchSim* bs, dsEnvGroupRender** grp, dsReal* images,
                             dsReal* losses) {
  if (!batched_frames || ds_bsim_batch(bs) != n) return DS_ERR_UNSUPPORTED;
  char why[256];
  int rc = 0;
  if (!*grp && (rc = group_render_make(grp, envs[0], bs, n, why, sizeof why))) {
    for (int i = 0; i < n; i++) ds__seterr(&envs[i]->err, rc, "render: batched render: %s", why);
    return rc;
  }
  dsEnvGroupRender* gr = *grp;
  const dsReal* x = NULL;
  if ((rc = ds_bsim_positions(bs, &x))) return ds__env_group_fail(envs, n, bs, rc, "render: batched engine");
  for (int v = 0; v < gr->nview && !rc; v++) {
    if (v > 0 && !losses) break; /* images are the first view's */
    rc = losses ? group_goals(gr, envs, n, v) : 0;
    if (!rc) rc = ds_batch_raster_render(gr->r[v], x, v == 0 ? images : NULL);
    if (!rc && losses) rc = ds_batch_raster_loss(gr->r[v], &envs[0]->ldef, NULL, gr->loss);
    if (rc) {
      for (int i = 0; i < n; i++)
        ds__seterr(&envs[i]->err, rc, "render%s: %s", v ? " (camera2)" : "", ds_batch_raster_last_error(gr->r[v]));
      return rc;
    }
    if (losses)
      for (int i = 0; i < n; i++) losses[i] = v ? losses[i] + gr->loss[i] : gr->loss[i];
  }
  return 0;
}

/* The rendered terms at substep s of every env of the group, into one
 * adjoint scratch of the engine, then added to its adjoints: the frame
 * terms (frame f of all of them: they are at one substep of one schedule)
 * and, at a step's end, the image observation's adjoints. */
/* The light's gradient of renderer r's last backward added to each env's
 * (as ds__env_raster_backward adds the single renderer's). */
static int add_light_grad(dsEnvGroupRender* gr, dsBatchRaster* r, dsEnv** envs, int n, const unsigned char* skip) {
  memset(gr->dl, 0, sizeof(dsRenderSettings) * (size_t)n);
  const int rc = ds_batch_raster_light_grad(r, gr->dl);
  for (int i = 0; i < n && !rc; i++) {
    if (skip && skip[i]) continue;
    envs[i]->light_grad[0] += gr->dl[i].ambient;
    envs[i]->light_grad[1] += gr->dl[i].directional;
    for (int k = 0; k < 3; k++) envs[i]->light_grad[2 + k] += gr->dl[i].light_dir[k];
  }
  return rc;
}

int ds__env_group_rendered(dsEnv** envs, int n, dsBatchSim* bs, dsEnvGroupRender** grp, const dsEnvBwdSpec* sp,
                          const unsigned char* skip, int ref, int s, int t, int nf) {
  dsEnv* e0 = envs[ref];
  const int f = e0->frame_at[s], steps = (t + e0->C - 1) / e0->C, k = (s - 1) / e0->C;
  const size_t npx = 4 * (size_t)e0->def.width * e0->def.height;
  int any_frame = 0, any_img = 0;
  for (int i = 0; i < n && f >= 0 && f < nf && !any_frame; i++)
    any_frame = !(skip && skip[i]) && ds__env_frame_weight(envs[i], sp + i, s, f, nf) != 0;
  if (s > 0 && (s % e0->C == 0 || s == e0->T) && k < steps)
    for (int i = 0; i < n && !any_img; i++) any_img = !(skip && skip[i]) && sp[i].adj_image;
  if (!any_frame && !any_img) return 0;
  char why[256];
  int rc = 0;
  if (!*grp && (rc = group_render_make(grp, e0, bs, n, why, sizeof why))) {
    for (int i = 0; i < n; i++) ds__seterr(&envs[i]->err, rc, "backward: batched render: %s", why);
    return rc;
  }
  dsEnvGroupRender* gr = *grp;
  const dsReal* x = NULL;
  dsReal* ax = NULL;
  rc = ds_bsim_positions(bs, &x);
  if (!rc) rc = ds_bsim_adj_scratch(bs, &ax);
  if (rc) return ds__env_group_fail(envs, n, bs, rc, "backward: batched engine");
  for (int i = 0; i < n; i++) gr->w[i] = !any_frame || (skip && skip[i]) ? 0 : ds__env_frame_weight(envs[i], sp + i, s, f, nf);
  for (int v = 0; v < gr->nview && any_frame; v++) {
    rc = group_goals(gr, envs, n, v);
    if (!rc) rc = ds_batch_raster_render(gr->r[v], x, NULL);
    if (!rc) rc = ds_batch_raster_loss(gr->r[v], &e0->ldef, gr->w, gr->loss);
    if (!rc) rc = ds_batch_raster_backward(gr->r[v], NULL, ax);
    if (!rc) rc = add_light_grad(gr, gr->r[v], envs, n, skip);
    for (int i = 0; i < n && !rc; i++) gr->lsum[i] = v ? gr->lsum[i] + gr->loss[i] : gr->loss[i];
    if (rc) {
      for (int i = 0; i < n; i++)
        ds__seterr(&envs[i]->err, rc, "backward%s: frame %d: %s", v ? " (camera2)" : "", f,
                   ds_batch_raster_last_error(gr->r[v]));
      return rc;
    }
  }
  for (int i = 0; i < n && any_frame; i++) /* the frame's loss, as frame_loss_of would render it */
    if (!(skip && skip[i])) {
      envs[i]->frame_loss[f] = gr->lsum[i];
      envs[i]->frame_done[f] = 1;
    }
  if (any_img) { /* the step's image adjoints (image observations: the first view) */
    for (int i = 0; i < n; i++) {
      dsReal* row = gr->goals + (size_t)i * npx; /* host staging only: the uploaded goals stay */
      if ((skip && skip[i]) || !sp[i].adj_image)
        memset(row, 0, npx * sizeof(dsReal));
      else
        memcpy(row, sp[i].adj_image + (size_t)k * npx, npx * sizeof(dsReal));
    }
    if (!any_frame) rc = ds_batch_raster_render(gr->r[0], x, NULL); /* else view 0 rendered x above */
    if (!rc) rc = ds_batch_raster_backward(gr->r[0], gr->goals, ax);
    if (!rc) rc = add_light_grad(gr, gr->r[0], envs, n, skip);
    if (rc) {
      for (int i = 0; i < n; i++)
        ds__seterr(&envs[i]->err, rc, "backward: image of step %d: %s", k, ds_batch_raster_last_error(gr->r[0]));
      return rc;
    }
  }
  rc = ds_bsim_add_adj_scratch(bs);
  return rc ? ds__env_group_fail(envs, n, bs, rc, "backward: batched engine: adding adjoints") : 0;
}


/* Several views and camera calibration in sysid (controllers/sysid_views.h).
 *
 * The episode runs the env with its full state observed (positions, then
 * velocities); the positions of each frame are drawn by one renderer per
 * view, and the loss is
 *   L = sum_v (1/F_used) sum_f loss(I_v(x_f, c_v), G_vf),
 * a sum over the views of what one view gives. Its adjoint:
 *   dL/dx_f = sum_v (dI_v/dx_f)^T dloss/dI   (ds_env_view_backward, per view)
 * enters the env's backward as the adjoint of the state observation of the
 * frame's step, so the physical parameters' gradients sum over the views;
 *   dL/dc_v = sum_f (dI_v/dc_v)^T dloss/dI   (the same call)
 * is the camera's: the renderer takes every projected vertex
 *   (X, Y, Z) = ((p - eye).x_c, (p - eye).y_c, (p - eye).z_c),
 *   px = ax X/Z + ox, py = ay Y/Z + oy,
 *   z_c = unit(at - eye), x_c = unit(up x z_c), y_c = z_c x x_c,
 * back through the chain rule to eye, at, the fov (ay = 1/tan(fov/2),
 * ax = ay H/W) or the intrinsics (ax = 2 fx/W, ay = 2 fy/H, ox = 2 cx/W - 1,
 * oy = 1 - 2 cy/H): render/raster.c's camera_adjoint, beside its forward,
 * checked against central differences in tests/test_camera_grad.
 * camera.position is the eye, camera.look_at the point looked at; up is +y.
 *
 * The single-view identification without camera parameters keeps its own
 * path (the env's image observation), bit for bit. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/internal.h"
#include "controllers/sysid_views.h"
#include "io/cfg.h"

/* offsets in a view's DS__VIEW_NVAL values (dsim/env.h's camera values) */
enum { VP = 0, VL = 3, VFOV = 6, VFX = 7, VFY = 8, VCX = 9, VCY = 10 };

static const struct {
  const char* field;
  int off, n;
} kCamFields[] = {{"position", VP, 3}, {"look_at", VL, 3}, {"fov", VFOV, 1}, {"fx", VFX, 1},
                  {"fy", VFY, 1},      {"cx", VCX, 1},      {"cy", VCY, 1}};
#define NCAMFIELD ((int)(sizeof kCamFields / sizeof kCamFields[0]))

struct dsSysidViewSet {
  int nv, nstep, nframes, np, n3;
  size_t npix;
  dsEnvView* r[DS_SYSID_MAX_VIEWS];
  dsReal val[DS_SYSID_MAX_VIEWS][DS__VIEW_NVAL];   /* the cameras' values */
  dsReal grad[DS_SYSID_MAX_VIEWS][DS__VIEW_NVAL];  /* dL/d(values) of the last backward */
  int intr[DS_SYSID_MAX_VIEWS];                    /* 1: intrinsics, 0: fov */
  dsReal* goal;    /* nv x nframes x npix */
  dsReal* fx;      /* nframes x n3: positions of each frame */
  dsReal* obs;     /* 2 n3: one step's observation */
  dsReal* adj;     /* nstep x 2 n3: the observations' adjoints */
  dsReal* img;     /* npix */
  dsReal* gimg;    /* npix */
};

/* "camera.x" (view 0) or "cameraK.x" (view K - 1): the view and the field, or -1 */
static int parse_name(const char* name, int* view, int* field) {
  if (strncmp(name, "camera", 6)) return -1;
  const char* p = name + 6;
  int k = 1;
  if (*p >= '1' && *p <= '9') {
    k = *p - '0';
    p++;
  }
  if (*p != '.' || k > DS_SYSID_MAX_VIEWS) return -1;
  for (int i = 0; i < NCAMFIELD; i++)
    if (!strcmp(p + 1, kCamFields[i].field)) {
      *view = k - 1;
      *field = i;
      return 0;
    }
  return -1;
}

int ds__sysid_is_camera_param(const char* name) {
  int v, f;
  return name && parse_name(name, &v, &f) == 0;
}

int ds__sysid_views_wanted(const dsSysidDef* def, const dsSysidVideo* video) {
  if (def->nviews > 0 || (video && video->nviews > 1)) return 1;
  for (int k = 0; k < DS_SYSID_MAX_PARAMS && def->params[k].name[0]; k++)
    if (ds__sysid_is_camera_param(def->params[k].name)) return 1;
  return 0;
}

int ds__sysid_views_count(const dsSysidViewSet* vs) { return vs ? vs->nv : 0; }

int ds__sysid_views_get(const dsSysidViewSet* vs, int v, dsSysidView* out) {
  if (!vs || v < 0 || v >= vs->nv) return DS_ERR_RANGE;
  memset(out, 0, sizeof *out);
  const dsReal* a = vs->val[v];
  for (int k = 0; k < 3; k++) {
    out->position[k] = a[VP + k];
    out->look_at[k] = a[VL + k];
  }
  if (vs->intr[v]) {
    out->fx = a[VFX], out->fy = a[VFY], out->cx = a[VCX], out->cy = a[VCY];
  } else {
    out->fov = a[VFOV];
  }
  return 0;
}

void ds__sysid_views_destroy(dsSysidViewSet* vs) {
  if (!vs) return;
  for (int v = 0; v < DS_SYSID_MAX_VIEWS; v++) ds_env_view_destroy(vs->r[v]);
  ds__free(vs->goal);
  ds__free(vs->fx);
  ds__free(vs->obs);
  ds__free(vs->adj);
  ds__free(vs->img);
  ds__free(vs->gimg);
  ds__free(vs);
}

static void view_values(dsReal* val, const dsSysidView* w) {
  for (int k = 0; k < 3; k++) {
    val[VP + k] = (dsReal)w->position[k];
    val[VL + k] = (dsReal)w->look_at[k];
  }
  val[VFOV] = (dsReal)w->fov;
  val[VFX] = (dsReal)w->fx;
  val[VFY] = (dsReal)w->fy;
  val[VCX] = (dsReal)w->cx;
  val[VCY] = (dsReal)w->cy;
}

/* the views' values: the video's, def's sysid.cameras, or the env's camera */
static int views_of(dsSysidViewSet* vs, const dsEnv* env, const dsSysidDef* def, const dsSysidVideo* video, char* err,
                    size_t errlen) {
  if (video && video->nviews <= 1 && def->nviews > 0)
    return ds__puterr(err, errlen, DS_ERR_CONFIG,
                      "sysid.cameras: the views of a synthetic video; footage lists its views in its camera file "
                      "(\"views\")");
  const dsSysidView* list = video && video->nviews > 1 ? video->views : def->nviews > 0 ? def->views : NULL;
  const int n = video && video->nviews > 1 ? video->nviews : def->nviews;
  if (!list) {
    vs->nv = 1;
    if (ds_env_camera(env, vs->val[0])) return ds__puterr(err, errlen, DS_ERR_STATE, "sysid views: the env has no camera");
    vs->intr[0] = vs->val[0][VFX] > 0;
    return 0;
  }
  if (n < 1 || n > DS_SYSID_MAX_VIEWS)
    return ds__puterr(err, errlen, DS_ERR_CONFIG, "sysid.cameras: expected 1 to %d views, got %d", DS_SYSID_MAX_VIEWS, n);
  vs->nv = n;
  for (int v = 0; v < n; v++) {
    view_values(vs->val[v], &list[v]);
    vs->intr[v] = list[v].fx > 0;
  }
  return 0;
}

int ds__sysid_views_create(dsSysidViewSet** out, dsEnv* env, const dsSysidDef* def, const dsSysidVideo* video,
                           int nstep, int nframes, char* err, size_t errlen) {
  *out = NULL;
  dsSysidViewSet* vs = (dsSysidViewSet*)ds__calloc(1, sizeof *vs);
  if (!vs) return ds__puterr(err, errlen, DS_ERR_NOMEM, "sysid: out of memory");
  int w = 0, h = 0;
  ds_env_image_size(env, &w, &h);
  vs->nstep = nstep;
  vs->nframes = nframes;
  vs->np = ds_env_num_particles(env);
  vs->n3 = 3 * vs->np;
  vs->npix = 4 * (size_t)w * (size_t)h;
  int rc = views_of(vs, env, def, video, err, errlen);
  for (int v = 0; v < vs->nv && !rc; v++) {
    char why[256];
    if (ds_env_view_create(env, vs->val[v], &vs->r[v], why, sizeof why))
      rc = ds__puterr(err, errlen, DS_ERR_CONFIG, "sysid.cameras[%d]: %s", v, why);
  }
  if (!rc) {
    const size_t ns = (size_t)(nstep > 0 ? nstep : 1), nf = (size_t)(nframes > 0 ? nframes : 1);
    vs->goal = (dsReal*)ds__calloc((size_t)vs->nv * nf * vs->npix, sizeof(dsReal));
    vs->fx = (dsReal*)ds__calloc(nf * (size_t)vs->n3 + 1, sizeof(dsReal));
    vs->obs = (dsReal*)ds__calloc(2 * (size_t)vs->n3 + 1, sizeof(dsReal));
    vs->adj = (dsReal*)ds__calloc(ns * 2 * (size_t)vs->n3 + 1, sizeof(dsReal));
    vs->img = (dsReal*)ds__calloc(vs->npix, sizeof(dsReal));
    vs->gimg = (dsReal*)ds__calloc(vs->npix, sizeof(dsReal));
    if (!vs->goal || !vs->fx || !vs->obs || !vs->adj || !vs->img || !vs->gimg)
      rc = ds__puterr(err, errlen, DS_ERR_NOMEM, "sysid: out of memory");
  }
  if (rc) {
    ds__sysid_views_destroy(vs);
    return rc;
  }
  *out = vs;
  return 0;
}

int ds__sysid_views_param(dsSysidViewSet* vs, const char* name, dsReal** value, const dsReal** grad, int* n) {
  int v, f;
  if (!vs || parse_name(name, &v, &f) || v >= vs->nv) return DS_ERR_NOTFOUND;
  const int off = kCamFields[f].off;
  /* a view with a fov has no intrinsics to identify, and one with intrinsics no fov */
  if ((off == VFOV && vs->intr[v]) || (off >= VFX && !vs->intr[v])) return DS_ERR_NOTFOUND;
  if (value) *value = vs->val[v] + off;
  if (grad) *grad = vs->grad[v] + off;
  if (n) *n = kCamFields[f].n;
  return 0;
}

void ds__sysid_views_set_goal(dsSysidViewSet* vs, const dsSysidVideo* video) {
  if (!video) return;
  const size_t frame = (size_t)vs->nframes * vs->npix;
  const int nv = video->nviews > 1 ? vs->nv : 1;
  memcpy(vs->goal, video->rgba, (size_t)nv * frame * sizeof(dsReal));
}

/* the views' losses of the kept frames, and with want_grad their adjoints */
static int views_loss(dsSysidViewSet* vs, dsEnv* env, const dsSysidViewsEp* ep, int making, int want_grad,
                      double* loss, dsErrBuf* eb) {
  const double wf = ep->nused > 0 ? 1.0 / ep->nused : 0;
  const size_t n3 = (size_t)vs->n3;
  double L = 0;
  for (int v = 0; v < vs->nv; v++) {
    dsEnvView* r = vs->r[v];
    memset(vs->grad[v], 0, sizeof vs->grad[v]);
    int rc = ds_env_view_set_camera(r, vs->val[v]);
    if (rc) return ds__seterr(eb, rc, "view %d: %s", v, ds_env_view_last_error(r));
    for (int f = 0; f < vs->nframes; f++) {
      if (!making && !ep->used[f] && v > 0) continue; /* the first view's frames are all drawn (the log's) */
      const dsReal* x = vs->fx + (size_t)f * n3;
      dsReal* goal = vs->goal + ((size_t)v * vs->nframes + f) * vs->npix;
      dsReal* img = making ? goal : v == 0 ? ep->rendered + (size_t)f * vs->npix : vs->img;
      rc = ds_env_view_render(r, env, x, img);
      if (rc) return ds__seterr(eb, rc, "view %d, frame %d: %s", v, f, ds_env_view_last_error(r));
      if (making) {
        if (v == 0) memcpy(ep->rendered + (size_t)f * vs->npix, img, vs->npix * sizeof(dsReal));
        continue;
      }
      if (!ep->used[f]) continue;
      dsReal l = 0;
      dsReal* g = want_grad ? vs->gimg : NULL;
      rc = ep->il ? ds_env_image_loss_eval(ep->il, img, goal, &l, g) : ds_env_image_loss(env, img, goal, &l, g);
      if (rc) return ds__seterr(eb, rc, "view %d, frame %d: %s", v, f, ds_env_last_error(env));
      L += wf * (double)l;
      if (!g) continue;
      for (size_t q = 0; q < vs->npix; q++) g[q] *= (dsReal)wf;
      rc = ds_env_view_backward(r, env, x, g, vs->adj + (size_t)ep->fstep[f] * 2 * n3, vs->grad[v]);
      if (rc) return ds__seterr(eb, rc, "view %d, frame %d: %s", v, f, ds_env_view_last_error(r));
    }
  }
  *loss = L;
  return 0;
}

int ds__sysid_views_episode(dsSysidViewSet* vs, dsEnv* env, const dsSysidViewsEp* ep, int making, int want_grad,
                            double* loss, dsErrBuf* eb) {
  const size_t n3 = (size_t)vs->n3;
  if (ds_env_num_particles(env) != vs->np || ds_env_obs_size(env) != 2 * vs->n3)
    return ds__seterr(eb, DS_ERR_STATE, "sysid views: the env's particles changed (%d, were %d)",
                      ds_env_num_particles(env), vs->np);
  for (int k = 0; k < vs->nstep; k++) {
    int done = 0;
    int rc = ds_env_step(env, ep->action, vs->obs, NULL, NULL, &done);
    if (rc) return ds__seterr(eb, rc, "step %d: %s", k, ds_env_last_error(env));
    const int f = ep->step_frame[k];
    if (f >= 0) memcpy(vs->fx + (size_t)f * n3, vs->obs, n3 * sizeof(dsReal));
  }
  if (want_grad) memset(vs->adj, 0, (size_t)vs->nstep * 2 * n3 * sizeof(dsReal));
  int rc = views_loss(vs, env, ep, making, want_grad && !making, loss, eb);
  if (rc || making || !want_grad) return rc;
  rc = ds_env_backward_adjoints(env, vs->adj, NULL, NULL, NULL);
  if (rc) return ds__seterr(eb, rc, "backward: %s", ds_env_last_error(env));
  return 0;
}

int ds__sysid_views_render(dsSysidViewSet* vs, dsEnv* env, dsReal* image, dsErrBuf* eb) {
  int rc = ds_env_view_set_camera(vs->r[0], vs->val[0]);
  if (!rc) rc = ds_env_view_render(vs->r[0], env, ds_env_positions(env), image);
  if (rc) return ds__seterr(eb, rc, "initial frame: %s", ds_env_view_last_error(vs->r[0]));
  return 0;
}

/* ---- sysid.cameras ------------------------------------------------------------ */
typedef struct CamCtx {
  const char* name;
  dsSysidView* views;
  unsigned seen[DS_SYSID_MAX_VIEWS]; /* bit i: kCamFields[i] given */
  char* err;
  size_t errlen;
} CamCtx;

static int camera_field(void* user, int i, const char* field, const dsCfgItem* it, int n) {
  CamCtx* c = (CamCtx*)user;
  if (i >= DS_SYSID_MAX_VIEWS) return 0; /* the count is checked after the walk */
  if (!field) return ds__puterr(c->err, c->errlen, DS_ERR_CONFIG, "%s: sysid.cameras[%d]: expected an object", c->name, i);
  dsSysidView* w = &c->views[i];
  for (int q = 0; q < NCAMFIELD; q++) {
    if (strcmp(field, kCamFields[q].field)) continue;
    const int want = kCamFields[q].n;
    int ok = n == want;
    for (int j = 0; j < n && ok; j++) ok = it[j].kind == DS_CFG_NUMBER && isfinite(it[j].number);
    if (ok && kCamFields[q].off == VFOV) ok = it[0].number > 0 && it[0].number < 180;
    if (ok && (kCamFields[q].off == VFX || kCamFields[q].off == VFY)) ok = it[0].number > 0;
    if (!ok)
      return ds__puterr(c->err, c->errlen, DS_ERR_CONFIG, "%s: sysid.cameras[%d].%s: expected %s", c->name, i, field,
                        want == 3                        ? "an array of 3 numbers (m)"
                        : kCamFields[q].off == VFOV      ? "degrees in (0, 180)"
                        : kCamFields[q].off <= VFY       ? "a number of pixels > 0"
                                                         : "a number of pixels");
    double* dst = kCamFields[q].off == VP   ? w->position
                  : kCamFields[q].off == VL ? w->look_at
                  : kCamFields[q].off == VFOV ? &w->fov
                  : kCamFields[q].off == VFX ? &w->fx
                  : kCamFields[q].off == VFY ? &w->fy
                  : kCamFields[q].off == VCX ? &w->cx
                                             : &w->cy;
    for (int j = 0; j < want; j++) dst[j] = it[j].number;
    c->seen[i] |= 1u << q;
    return 0;
  }
  return ds__puterr(c->err, c->errlen, DS_ERR_CONFIG,
                    "%s: sysid.cameras[%d]: unknown key \"%s\" (keys: position, look_at, fov, fx, fy, cx, cy)", c->name,
                    i, field);
}

/* entry i complete: position, look_at, and fov or all four intrinsics */
static int camera_complete(const CamCtx* c, int i) {
  const unsigned s = c->seen[i];
  const char* miss = !(s & 1u) ? "position" : !(s & 2u) ? "look_at" : NULL;
  if (miss) return ds__puterr(c->err, c->errlen, DS_ERR_CONFIG, "%s: sysid.cameras[%d]: \"%s\" is required", c->name, i, miss);
  const unsigned intr = s >> 3 & 15u;
  if (intr && intr != 15u) {
    static const char* const k4[4] = {"fx", "fy", "cx", "cy"};
    int q = 0;
    while (intr >> q & 1u) q++;
    return ds__puterr(c->err, c->errlen, DS_ERR_CONFIG,
                      "%s: sysid.cameras[%d]: \"%s\" is required with the other intrinsics (fx, fy, cx, cy: all four)",
                      c->name, i, k4[q]);
  }
  if (!intr && !(s & 4u))
    return ds__puterr(c->err, c->errlen, DS_ERR_CONFIG,
                      "%s: sysid.cameras[%d]: \"fov\" is required (or the intrinsics fx, fy, cx, cy)", c->name, i);
  if (intr && (s & 4u))
    return ds__puterr(c->err, c->errlen, DS_ERR_CONFIG,
                      "%s: sysid.cameras[%d]: give \"fov\" or the intrinsics fx, fy, cx, cy, not both", c->name, i);
  const dsSysidView* w = &c->views[i];
  double d2 = 0, dy = w->position[1] - w->look_at[1];
  for (int k = 0; k < 3; k++) d2 += (w->position[k] - w->look_at[k]) * (w->position[k] - w->look_at[k]);
  if (!(d2 > 0) || fabs(dy) >= sqrt(d2) * 0.999999)
    return ds__puterr(c->err, c->errlen, DS_ERR_CONFIG,
                      "%s: sysid.cameras[%d].position: a camera at its look-at point or straight above or below it "
                      "(the view is y-up)",
                      c->name, i);
  return 0;
}

int ds__sysid_parse_cameras(const char* name, const char* text, dsSysidDef* def, char** rest, char* err,
                            size_t errlen) {
  CamCtx* c = (CamCtx*)ds__calloc(1, sizeof *c);
  dsSysidView* views = (dsSysidView*)ds__calloc(DS_SYSID_MAX_VIEWS, sizeof *views);
  int rc = c && views ? 0 : ds__puterr(err, errlen, DS_ERR_NOMEM, "sysid: out of memory");
  int count = 0;
  *rest = NULL;
  if (!rc) {
    c->name = name;
    c->views = views;
    c->err = err;
    c->errlen = errlen;
    rc = ds__cfg_take_list(text, "sysid", "cameras", rest, &count, camera_field, c);
    if (rc == DS_ERR_NOTFOUND && !*rest) rc = 0, count = 0;
    else if ((!rc || count < 0) && (count < 1 || count > DS_SYSID_MAX_VIEWS))
      rc = ds__puterr(err, errlen, DS_ERR_CONFIG,
                      "%s: sysid.cameras: expected a list of 1 to %d cameras ({\"position\": [x, y, z], \"look_at\": "
                      "[x, y, z], \"fov\": degrees or \"fx\", \"fy\", \"cx\", \"cy\"})",
                      name, DS_SYSID_MAX_VIEWS);
  }
  for (int i = 0; i < count && !rc; i++) rc = camera_complete(c, i);
  if (!rc && count > 0) {
    memcpy(def->views, views, (size_t)count * sizeof *views);
    def->nviews = count;
  }
  if (rc) {
    ds__free(*rest);
    *rest = NULL;
  }
  ds__free(c);
  ds__free(views);
  return rc;
}

/* Soft rasterizer (SoftRas-style): camera, forward and adjoint side by side.
 *
 * Forward, per internal pixel p (centre x = (2 col + 1 - W)/W,
 * y = (H - 1 - 2 row)/H in NDC) and face j:
 *   d_j    distance from p to the boundary of the projected triangle,
 *          delta = +1 inside, -1 outside
 *   D_j    = sigmoid(delta d_j^2 / sigma),   q_j = 1 - D_j
 *   b      screen barycentrics, clamped to >= 0 and renormalised (bt)
 *   Zp_j   = 1/(sum_i bt_i / Z_i)  (perspective-correct; ortho: sum bt_i Z_i)
 *   e_j    = (far - Zp_j)/((far - near) gamma)
 *   u_j    = D_j exp(e_j - m),  u_bg = exp(eps/gamma - m)   (m: max exponent)
 *   S      = u_bg + sum_j u_j
 *   rgb    = (u_bg C_bg + sum_j u_j C_j) / S
 *   T      = prod_j q_j,     alpha = 1 - (1 - a_bg) T
 * Faces are skipped at p when d^2 > sigma ln(1e4 - 1) outside (D < 1e-4) or
 * when Zp is outside [near, far]. C_j = base_j L_j (flat) or
 * L_j sum_i bp_i c_i (per vertex, bp_i = bt_i Zp/Z_i), with
 * L_j = k_amb + k_dir max(0, n_j . l) and n_j the unit normal turned toward
 * the camera (double-sided). Supersampling k: the internal image is kW x kH
 * and each output pixel is the mean of its k x k block.
 *
 * Adjoint, per pixel with upstream g = dL/d(rgb, alpha) / k^2:
 *   dL/du_j = (g_rgb . C_j - g_rgb . rgb)/S,   dL/dC_j = g_rgb u_j/S
 *   dL/dq_j = -g_alpha (1 - a_bg) T/q_j   (the product of the other q's)
 *   dL/dD_j = dL/du_j exp(e_j - m) - dL/dq_j,  dL/de_j = dL/du_j u_j
 *   dD/dx = D q, x = delta d^2/sigma; d^2 through the closest boundary point
 *   (envelope theorem), Zp and colours through the barycentrics
 *   (engine/raster_kernel.h), then the projection and the normal.
 *
 * d is the distance to the triangle's boundary (its nearest edge segment),
 * with delta = +1 inside: D -> 1 deep inside, 1/2 on the edges, -> 0 outside
 * (SoftRas; FORMULAS.md's "(0 inside)" would give D = 1/2 everywhere inside).
 *
 * Numerical cuts, applied identically in forward and adjoint (so the adjoint
 * is exact for the function computed): D = 1, q = 0 for x > 40
 * (q < 4.3e-18); softmax terms with e_j - m < -40 (< 4.3e-18 of the largest)
 * are dropped; exp is dsr_exp (within 2 ulp on [-41, 0], the only range
 * used). Faces with a vertex nearer than znear are culled, not clipped.
 *
 * Parallel structure (deterministic for any thread count):
 *   forward  - faces are binned into tiles (about 32 x 32 internal pixels, a
 *              multiple of k) by their sigma-expanded bounding boxes (faces
 *              spanning more than DSR_BIG_TILES tiles go to one list every
 *              tile scans); tiles run in parallel and own their pixels; in a
 *              tile faces are visited in ascending index, each over the
 *              columns of each row where it can contribute (dsr_row_span);
 *              the tile then writes its output pixels. A tile no face
 *              reaches just writes the background and keeps no state.
 *   backward - faces run in parallel, each over the pixels of its own
 *              bounding box, reading the per-pixel totals (m, S, T, rgb) the
 *              forward kept (only pixels some face reached are read); each
 *              face's gradient goes to its own slot and slots are summed into
 *              vertices serially in face order. The camera adjoint sums
 *              per-face parts the same way, then runs through the look-at
 *              frame once (camera_adjoint); the light adjoint (the
              lights' factors and direction) likewise (light_adjoint).
 */
#include "config.h"

#include <math.h>
#include <string.h>

#include "dsim/raster.h"
#include "base/internal.h"
#include "render/raster_batch.h"
#include "render/camera_frame.h"
#include "render/raster_lanes.h"

#define DSR_TILE 32
/* below this many internal pixels + faces a render runs on one thread */
#define DSR_PAR_MIN 4096
#define DSR_PI 3.14159265358979323846

/* ---- camera ------------------------------------------------------------- */
dsCamera ds_default_camera(void) {
  dsCamera c;
  memset(&c, 0, sizeof c);
  c.fov_deg = 30;
  c.znear = 1;
  c.zfar = 100;
  c.orthographic = 0;
  c.ortho_height = 1;
  ds_camera_look_at(&c, 13, 30, 0);
  return c;
}

int ds_camera_look_at(dsCamera* cam, dsReal distance, dsReal elevation_deg, dsReal azimuth_deg) {
  double e = (double)elevation_deg * DSR_PI / 180.0, a = (double)azimuth_deg * DSR_PI / 180.0;
  double d = (double)distance;
  if (!cam || !(d > 0) || !isfinite(e) || !isfinite(a)) return DS_ERR_INVALID;
  if (fabs(cos(e)) < 1e-9) return DS_ERR_INVALID;
  cam->eye[0] = (dsReal)(d * cos(e) * sin(a));
  cam->eye[1] = (dsReal)(d * sin(e));
  cam->eye[2] = (dsReal)(-d * cos(e) * cos(a));
  cam->at[0] = cam->at[1] = cam->at[2] = 0;
  cam->up[0] = 0;
  cam->up[1] = 1;
  cam->up[2] = 0;
  return DS_OK;
}

/* Camera basis and projection scales; DS_ERR_INVALID for a degenerate camera. */
static int camera_frame(const dsCamera* cam, int width, int height, dsrFrame* fr) {
  double up[3], n;
  int i;
  for (i = 0; i < 3; i++) {
    fr->eye[i] = cam->eye[i];
    fr->zc[i] = (double)cam->at[i] - (double)cam->eye[i];
    up[i] = cam->up[i];
  }
  n = sqrt(dsr_dot3(fr->zc, fr->zc));
  if (!(n > 0) || !isfinite(n)) return DS_ERR_INVALID;
  fr->vn = n;
  for (i = 0; i < 3; i++) fr->zc[i] /= n;
  for (i = 0; i < 3; i++) fr->up[i] = up[i];
  dsr_cross3(fr->xc, up, fr->zc);
  n = sqrt(dsr_dot3(fr->xc, fr->xc));
  if (!(n > 1e-12 * sqrt(dsr_dot3(up, up))) || !isfinite(n)) return DS_ERR_INVALID;
  fr->wn = n;
  for (i = 0; i < 3; i++) fr->xc[i] /= n;
  dsr_cross3(fr->yc, fr->zc, fr->xc);
  if (width <= 0 || height <= 0) return DS_ERR_INVALID;
  fr->ortho = cam->orthographic != 0;
  {
    double aspect = (double)width / (double)height;
    if (fr->ortho) {
      double h = cam->ortho_height;
      if (!(h > 0) || !isfinite(h)) return DS_ERR_INVALID;
      fr->ay = 1.0 / h;
    } else {
      double fov = cam->fov_deg * DSR_PI / 180.0;
      if (!(fov > 0) || !(fov < DSR_PI)) return DS_ERR_INVALID;
      fr->fov = fov;
      fr->ay = 1.0 / tan(0.5 * fov);
    }
    fr->ax = fr->ay / aspect;
  }
  /* intrinsics (pixels of the width x height image, u from the left edge, v
   * from the top): u = fx X/Z + cx, v = cy - fy Y/Z, so NDC x = 2u/W - 1 =
   * (2 fx/W) X/Z + (2 cx/W - 1) and y = 1 - 2v/H = (2 fy/H) Y/Z + (1 - 2 cy/H) */
  fr->ox = fr->oy = 0.0;
  fr->pp = 0;
  if (!fr->ortho && cam->fx > 0) {
    const double fx = cam->fx, fy = cam->fy, cx = cam->cx, cy = cam->cy;
    if (!(fy > 0) || !isfinite(fx) || !isfinite(fy) || !isfinite(cx) || !isfinite(cy)) return DS_ERR_INVALID;
    fr->ax = 2.0 * fx / (double)width;
    fr->ay = 2.0 * fy / (double)height;
    fr->ox = 2.0 * cx / (double)width - 1.0;
    fr->oy = 1.0 - 2.0 * cy / (double)height;
    fr->fov = 2.0 * atan(0.5 * (double)height / fy);
    fr->pp = 1;
  }
  if (!(cam->znear > 0) || !(cam->zfar > cam->znear) || !isfinite(cam->zfar)) return DS_ERR_INVALID;
  return DS_OK;
}

int ds__camera_frame(const dsCamera* cam, int width, int height, dsrFrame* fr) {
  return camera_frame(cam, width, height, fr);
}

int ds_camera_set_eye(dsCamera* cam, const dsReal eye[3], const dsReal at[3], const dsReal up[3]) {
  dsCamera c;
  dsrFrame fr;
  if (!cam || !eye || !at || !up) return DS_ERR_INVALID;
  c = *cam;
  memcpy(c.eye, eye, sizeof c.eye);
  memcpy(c.at, at, sizeof c.at);
  memcpy(c.up, up, sizeof c.up);
  {
    /* only the look-at part is checked here */
    dsCamera t = c;
    t.fov_deg = 30;
    t.znear = 1;
    t.zfar = 2;
    t.orthographic = 0;
    if (camera_frame(&t, 1, 1, &fr) != DS_OK) return DS_ERR_INVALID;
  }
  *cam = c;
  return DS_OK;
}

int ds_camera_project(const dsCamera* cam, int width, int height, const dsReal p[3], dsReal ndc[3]) {
  dsrFrame fr;
  double X, Y, Z, pp[3];
  if (!cam || !p || !ndc || camera_frame(cam, width, height, &fr) != DS_OK) return DS_ERR_INVALID;
  pp[0] = p[0];
  pp[1] = p[1];
  pp[2] = p[2];
  dsr_to_camera(&fr, pp, &X, &Y, &Z);
  if (fr.ortho) {
    ndc[0] = (dsReal)(X * fr.ax);
    ndc[1] = (dsReal)(Y * fr.ay);
  } else {
    if (!(Z > 0)) return DS_ERR_RANGE;
    ndc[0] = (dsReal)(X * fr.ax / Z + fr.ox);
    ndc[1] = (dsReal)(Y * fr.ay / Z + fr.oy);
  }
  ndc[2] = (dsReal)Z;
  return DS_OK;
}

/* ---- settings -------------------------------------------------------------- */
dsRenderSettings ds_default_render_settings(void) {
  dsRenderSettings s;
  memset(&s, 0, sizeof s);
  s.width = 256;
  s.height = 256;
  s.supersample = 2;
  s.sigma = (dsReal)1e-5;
  s.gamma = (dsReal)1e-4;
  s.eps = (dsReal)1e-3;
  s.ambient = (dsReal)0.5;
  s.directional = (dsReal)0.5;
  /* light_dir 0, 0, 0: a headlight (see face_light): every face the camera
     sees gets n.l > 0, away from the kink of max(0, n.l) unless seen
     edge-on. Along +y, as before, the light was edge-on to every face of a
     body in a z plane (the planar walkers) and lit only one side of the
     tilted cloth, whose seen side changes as it falls. */
  s.camera = ds_default_camera();
  return s;
}

/* ---- renderer object ------------------------------------------------------- */
struct dsRaster {
  dsRenderSettings s;
  dsrView v;          /* frame, constants, image geometry (render/raster_kernel.h) */
  int max_faces, max_verts;
  double* vproj;      /* per vertex: NDC x, NDC y, Z (max_verts x 3) */
  dsrFace* faces;     /* per-face setup (max_faces) */
  int* ftile;         /* per face: tile range tx0, tx1, ty0, ty1 (max_faces x 4) */
  int* bin_start;     /* ntiles + 1 offsets into bins */
  int* bin_fill;      /* ntiles cursors */
  int* bins;          /* face indices, grouped by tile, ascending within a tile */
  int bin_cap;        /* DSR_BIG_TILES x max_faces */
  int* big;           /* faces spanning more than DSR_BIG_TILES tiles */
  int nbig;
  double* pix;        /* per internal pixel: m, S, T, r, g, b (Wi Hi x 6) */
  double* fgrad;      /* per face: world-space gradient of its 3 vertices (max_faces x 9) */
  double* fcgrad;     /* per face: colour gradient (max_faces x 9) */
  double* fcam;       /* per face: camera adjoint parts (max_faces x DSR_NCAM) */
  int want_cam;       /* the running backward also wants dL/d(camera) */
  double* flight;     /* per face: light adjoint parts (max_faces x DSR_NLIGHT) */
  int want_light;     /* the running backward also wants dL/d(lights) */
  dsThreadPick pk_fwd, pk_bwd; /* thread choice of render and backward (base/internal.h) */
  int rendered;       /* a render's state is held for backward */
  int r_nvert, r_nface, r_mode;
  dsErrBuf err;
};


/* ds_render_settings_check's checks, then the camera frame. */
static int check_settings(const dsRenderSettings* s, dsrFrame* fr) {
  if (ds_render_settings_check(s, NULL, 0) != DS_OK) return DS_ERR_INVALID;
  return camera_frame(&s->camera, s->width, s->height, fr);
}

/* The constants and geometry of settings s (frame fr) into v. */
static void view_from(dsrView* v, const dsRenderSettings* s, const dsrFrame* fr) {
  double ln = log(1e4 - 1.0), n;
  int i;
  memset(v, 0, sizeof *v);
  v->fr = *fr;
  v->c.sigma = s->sigma;
  v->c.isigma = 1.0 / (double)s->sigma;
  v->c.r2 = (double)s->sigma * ln;
  v->c.r = sqrt(v->c.r2);
  v->c.znear = s->camera.znear;
  v->c.zfar = s->camera.zfar;
  v->c.zscale = 1.0 / (((double)s->camera.zfar - (double)s->camera.znear) * (double)s->gamma);
  v->c.ortho = fr->ortho;
  for (i = 0; i < 3; i++) v->light[i] = s->light_dir[i];
  n = sqrt(dsr_dot3(v->light, v->light));
  for (i = 0; i < 3; i++) v->light[i] = n > 0 ? v->light[i] / n : 0.0;
  v->head = !(n > 0);
  v->ambient = s->ambient;
  v->directional = s->directional;
  for (i = 0; i < 4; i++) v->bg[i] = s->background[i];
  v->m0 = (double)s->eps / (double)s->gamma;
  v->W = s->width;
  v->H = s->height;
  v->k = s->supersample;
  v->premul = s->premultiplied != 0;
  v->Wi = v->W * v->k;
  v->Hi = v->H * v->k;
  v->iWi = 1.0 / v->Wi;
  v->tile = v->k * (DSR_TILE / v->k > 0 ? DSR_TILE / v->k : 1);
  v->ntx = (v->Wi + v->tile - 1) / v->tile;
  v->nty = (v->Hi + v->tile - 1) / v->tile;
  v->ntiles = v->ntx * v->nty;
}

int ds__raster_view(const dsRenderSettings* s, dsrView* v) {
  dsrFrame fr;
  if (!s || !v || check_settings(s, &fr) != DS_OK) return DS_ERR_INVALID;
  view_from(v, s, &fr);
  return DS_OK;
}

static void apply_settings(dsRaster* r, const dsRenderSettings* s, const dsrFrame* fr) {
  r->s = *s;
  view_from(&r->v, s, fr);
  r->rendered = 0;
}

/* The first invalid field of s, named, with the expected value. */
int ds_render_settings_check(const dsRenderSettings* s, char* err, size_t errlen) {
  if (!s) return ds__puterr(err, errlen, DS_ERR_INVALID, "render settings: NULL");
#define BAD(...) return ds__puterr(err, errlen, DS_ERR_INVALID, __VA_ARGS__)
  if (s->width <= 0 || s->width > 16384) BAD("render settings: width: expected 1 to 16384, got %d", s->width);
  if (s->height <= 0 || s->height > 16384) BAD("render settings: height: expected 1 to 16384, got %d", s->height);
  if (s->premultiplied != 0 && s->premultiplied != 1)
    BAD("render settings: premultiplied: expected 0 or 1, got %d", s->premultiplied);
  if (s->supersample <= 0 || s->supersample > 16)
    BAD("render settings: supersample: expected 1 to 16, got %d", s->supersample);
  if (!(s->sigma > 0) || !isfinite((double)s->sigma))
    BAD("render settings: sigma: expected a finite number > 0, got %g", (double)s->sigma);
  if (!(s->gamma > 0) || !isfinite((double)s->gamma))
    BAD("render settings: gamma: expected a finite number > 0, got %g", (double)s->gamma);
  if (!isfinite((double)s->eps)) BAD("render settings: eps: expected a finite number, got %g", (double)s->eps);
  if (!(s->ambient >= 0) || !isfinite((double)s->ambient))
    BAD("render settings: ambient: expected a finite number >= 0, got %g", (double)s->ambient);
  if (!(s->directional >= 0) || !isfinite((double)s->directional))
    BAD("render settings: directional: expected a finite number >= 0, got %g", (double)s->directional);
  for (int i = 0; i < 3; i++)
    if (!isfinite((double)s->light_dir[i])) BAD("render settings: light_dir: expected finite components");
  const dsCamera* c = &s->camera;
  for (int i = 0; i < 3; i++)
    if (!isfinite((double)c->eye[i]) || !isfinite((double)c->at[i]) || !isfinite((double)c->up[i]))
      BAD("camera: eye, at and up: expected finite coordinates");
  if (c->eye[0] == c->at[0] && c->eye[1] == c->at[1] && c->eye[2] == c->at[2])
    BAD("camera: eye and at are the same point (%g, %g, %g)", (double)c->eye[0], (double)c->eye[1], (double)c->eye[2]);
  if (c->orthographic && (!(c->ortho_height > 0) || !isfinite((double)c->ortho_height)))
    BAD("camera: ortho_height: expected a finite number > 0, got %g", (double)c->ortho_height);
  if (!c->orthographic && (!(c->fov_deg > 0) || !(c->fov_deg < 180)))
    BAD("camera: fov_deg: expected a number in (0, 180), got %g", (double)c->fov_deg);
  if (!(c->znear > 0) || !isfinite((double)c->znear))
    BAD("camera: znear: expected a finite number > 0, got %g", (double)c->znear);
  if (!(c->zfar > c->znear) || !isfinite((double)c->zfar))
    BAD("camera: zfar: expected a finite number > znear (%g), got %g", (double)c->znear, (double)c->zfar);
  if (c->fx < 0 || !isfinite((double)c->fx) || (c->fx > 0 && (!(c->fy > 0) || !isfinite((double)c->fy))) ||
      !isfinite((double)c->cx) || !isfinite((double)c->cy))
    BAD("camera: intrinsics: expected fx = 0 (fov) or fx > 0 and fy > 0 with finite cx, cy (pixels), got fx %g, fy %g, "
        "cx %g, cy %g", (double)c->fx, (double)c->fy, (double)c->cx, (double)c->cy);
  dsrFrame fr;
  if (camera_frame(c, s->width, s->height, &fr) != DS_OK) BAD("camera: up is parallel to the view direction (at - eye)");
#undef BAD
  return DS_OK;
}

int ds_raster_create(dsRaster** out, const dsRenderSettings* s, int max_faces, int max_verts) {
  dsRaster* r;
  dsrFrame fr;
  size_t npix;
  if (!out) return DS_ERR_INVALID;
  *out = NULL;
  if (check_settings(s, &fr) != DS_OK) {
    char msg[256];
    ds_render_settings_check(s, msg, sizeof msg);
    ds__log(DS_LOG_ERROR, "ds_raster_create: %s", msg);
    return DS_ERR_INVALID;
  }
  if (max_faces < 0 || max_verts < 0 || max_faces > (1 << 24) || max_verts > (1 << 26)) {
    ds__log(DS_LOG_ERROR, "ds_raster_create: max_faces %d / max_verts %d out of range", max_faces,
            max_verts);
    return DS_ERR_INVALID;
  }
  r = (dsRaster*)ds__calloc(1, sizeof *r);
  if (!r) return DS_ERR_NOMEM;
  view_from(&r->v, s, &fr);
  r->max_faces = max_faces;
  r->max_verts = max_verts;
  r->bin_cap = DSR_BIG_TILES * (max_faces > 0 ? max_faces : 1);
  npix = (size_t)r->v.Wi * (size_t)r->v.Hi;
  r->vproj = (double*)ds__malloc(sizeof(double) * 3 * (size_t)(max_verts + 1));
  r->faces = (dsrFace*)ds__malloc(sizeof(dsrFace) * (size_t)(max_faces + 1));
  r->ftile = (int*)ds__malloc(sizeof(int) * 4 * (size_t)(max_faces + 1));
  r->bin_start = (int*)ds__malloc(sizeof(int) * (size_t)(r->v.ntiles + 1));
  r->bin_fill = (int*)ds__malloc(sizeof(int) * (size_t)r->v.ntiles);
  r->bins = (int*)ds__malloc(sizeof(int) * (size_t)r->bin_cap);
  r->big = (int*)ds__malloc(sizeof(int) * (size_t)(max_faces + 1));
  r->pix = (double*)ds__malloc(sizeof(double) * 6 * npix);
  r->fgrad = (double*)ds__malloc(sizeof(double) * 9 * (size_t)(max_faces + 1));
  r->fcgrad = (double*)ds__malloc(sizeof(double) * 9 * (size_t)(max_faces + 1));
  r->fcam = (double*)ds__malloc(sizeof(double) * DSR_NCAM * (size_t)(max_faces + 1));
  r->flight = (double*)ds__malloc(sizeof(double) * DSR_NLIGHT * (size_t)(max_faces + 1));
  if (!r->vproj || !r->faces || !r->ftile || !r->bin_start || !r->bin_fill || !r->bins || !r->big ||
      !r->pix || !r->fgrad || !r->fcgrad || !r->fcam || !r->flight) {
    ds_raster_destroy(r);
    return DS_ERR_NOMEM;
  }
  apply_settings(r, s, &fr);
  ds__clearerr(&r->err);
  *out = r;
  return DS_OK;
}

void ds_raster_destroy(dsRaster* r) {
  if (!r) return;
  ds__free(r->vproj);
  ds__free(r->faces);
  ds__free(r->ftile);
  ds__free(r->bin_start);
  ds__free(r->bin_fill);
  ds__free(r->bins);
  ds__free(r->big);
  ds__free(r->pix);
  ds__free(r->fgrad);
  ds__free(r->fcgrad);
  ds__free(r->fcam);
  ds__free(r->flight);
  ds__free(r);
}

int ds_raster_set_settings(dsRaster* r, const dsRenderSettings* s) {
  dsrFrame fr;
  if (!r) return DS_ERR_INVALID;
  if (!s) return ds__seterr(&r->err, DS_ERR_INVALID, "settings: NULL");
  if (s->width != r->v.W || s->height != r->v.H || s->supersample != r->v.k)
    return ds__seterr(&r->err, DS_ERR_INVALID,
                      "settings: image size %dx%d (supersample %d) differs from the renderer's "
                      "%dx%d (supersample %d); create a new renderer",
                      s->width, s->height, s->supersample, r->v.W, r->v.H, r->v.k);
  if (check_settings(s, &fr) != DS_OK)
    return ds__seterr(&r->err, DS_ERR_INVALID,
                      "settings: sigma and gamma must be > 0, 0 < znear < zfar, camera not degenerate");
  apply_settings(r, s, &fr);
  ds__clearerr(&r->err);
  return DS_OK;
}

int ds_raster_set_camera(dsRaster* r, const dsCamera* cam) {
  dsRenderSettings s;
  if (!r) return DS_ERR_INVALID;
  if (!cam) return ds__seterr(&r->err, DS_ERR_INVALID, "camera: NULL");
  s = r->s;
  s.camera = *cam;
  return ds_raster_set_settings(r, &s);
}

const dsRenderSettings* ds_raster_settings(const dsRaster* r) { return r ? &r->s : NULL; }

const char* ds_raster_last_error(const dsRaster* r) { return r ? ds__errmsg(&r->err) : ""; }

/* ---- per-frame setup --------------------------------------------------------- */
static int check_mesh(dsRaster* r, const dsRasterMesh* m) {
  int j;
  if (!m) return ds__seterr(&r->err, DS_ERR_INVALID, "mesh: NULL");
  if (m->nface < 0 || m->nvert < 0)
    return ds__seterr(&r->err, DS_ERR_INVALID, "mesh: negative size (nvert %d, nface %d)", m->nvert,
                      m->nface);
  if (m->nface > r->max_faces || m->nvert > r->max_verts)
    return ds__seterr(&r->err, DS_ERR_INVALID,
                      "mesh: %d faces / %d vertices exceed the renderer's maxima %d / %d", m->nface,
                      m->nvert, r->max_faces, r->max_verts);
  if (m->color_mode != DS_COLOR_FACE && m->color_mode != DS_COLOR_VERTEX)
    return ds__seterr(&r->err, DS_ERR_INVALID, "mesh: color_mode %d is neither DS_COLOR_FACE nor "
                      "DS_COLOR_VERTEX", m->color_mode);
  if ((m->nface > 0 && (!m->faces || !m->colors)) || (m->nvert > 0 && !m->verts))
    return ds__seterr(&r->err, DS_ERR_INVALID, "mesh: verts, faces and colors must not be NULL");
  for (j = 0; j < 3 * m->nface; j++)
    if (m->faces[j] < 0 || m->faces[j] >= m->nvert)
      return ds__seterr(&r->err, DS_ERR_MESH, "mesh: face %d refers to vertex %d (nvert %d)", j / 3,
                        m->faces[j], m->nvert);
  for (j = 0; j < 3 * m->nvert; j++)
    if (!isfinite((double)m->verts[j]))
      return ds__seterr(&r->err, DS_ERR_DIVERGED, "mesh: vertex %d has a non-finite coordinate",
                        j / 3);
  return DS_OK;
}

/* Projects vertices and sets up faces and their bounding boxes. */
static void setup_faces(dsRaster* r, const dsRasterMesh* m, int nt) {
  const int nv = m->nvert, nf = m->nface, vc = m->color_mode == DS_COLOR_VERTEX;
  int v, j;
  r->v.c.vertex_color = vc;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1 && nv >= 1024)
#endif
  for (v = 0; v < nv; v++) dsr_project(&r->v, m->verts, v, r->vproj + 3 * v);
#ifdef _OPENMP
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1 && nf >= 256)
#endif
  for (j = 0; j < nf; j++)
    dsr_face_setup(&r->v, m->verts, m->faces, m->colors, vc, r->vproj, j, &r->faces[j], &r->ftile[4 * j]);
}

/* Counting sort of faces into tiles (serial, ascending face index). */
static void bin_faces(dsRaster* r, int nf) {
  int j, t, tx, ty;
  memset(r->bin_start, 0, sizeof(int) * (size_t)(r->v.ntiles + 1));
  r->nbig = 0;
  for (j = 0; j < nf; j++) {
    const int* ft = &r->ftile[4 * j];
    if (!dsr_ft_valid(ft)) continue;
    if (dsr_ft_big(ft)) {
      r->big[r->nbig++] = j;
      continue;
    }
    for (ty = ft[2]; ty <= ft[3]; ty++)
      for (tx = ft[0]; tx <= ft[1]; tx++) r->bin_start[ty * r->v.ntx + tx + 1]++;
  }
  for (t = 0; t < r->v.ntiles; t++) r->bin_start[t + 1] += r->bin_start[t];
  memcpy(r->bin_fill, r->bin_start, sizeof(int) * (size_t)r->v.ntiles);
  for (j = 0; j < nf; j++) {
    const int* ft = &r->ftile[4 * j];
    if (!dsr_ft_valid(ft) || dsr_ft_big(ft)) continue;
    for (ty = ft[2]; ty <= ft[3]; ty++)
      for (tx = ft[0]; tx <= ft[1]; tx++) r->bins[r->bin_fill[ty * r->v.ntx + tx]++] = j;
  }
}

/* Adds face f to the pixels of rectangle [x0,x1] x [y0,y1] (already
 * intersected with its bounding box): four columns at a time where the
 * build has the lanes (render/raster_lanes.h: the same bits), on x86-64
 * also compiled for AVX2 and chosen at run time; else column by column. */
typedef void (*dsrRectFn)(const dsRaster* r, const dsrFace* f, int x0, int x1, int y0, int y1);
static void raster_face_rect_scalar(const dsRaster* r, const dsrFace* f, int x0, int x1, int y0, int y1) {
  for (int row = y0; row <= y1; row++) dsr_face_row(&r->v, f, row, x0, x1, r->pix + 6 * ((size_t)row * r->v.Wi));
}
#if defined(DSR_LANES)
static void raster_face_rect_lanes(const dsRaster* r, const dsrFace* f, int x0, int x1, int y0, int y1) {
  for (int row = y0; row <= y1; row++) dsr_face_row4(&r->v, f, row, x0, x1, r->pix + 6 * ((size_t)row * r->v.Wi));
}
#  if defined(__x86_64__) && !defined(DS_NO_AVX2) && defined(__has_attribute)
#    if __has_attribute(target)
#      define DSR_LANES_AVX2 1
__attribute__((target("avx2"))) static void raster_face_rect_avx2(const dsRaster* r, const dsrFace* f, int x0,
                                                                   int x1, int y0, int y1) {
  for (int row = y0; row <= y1; row++) dsr_face_row4(&r->v, f, row, x0, x1, r->pix + 6 * ((size_t)row * r->v.Wi));
}
#    endif
#  endif
#endif

/* Which of the above the renders use (tests compare them: ds__raster_set_lanes). */
static int g_raster_lanes = 1;
void ds__raster_set_lanes(int on) { g_raster_lanes = on != 0; }
static dsrRectFn rect_fn(void) {
#if defined(DSR_LANES)
  if (!g_raster_lanes) return raster_face_rect_scalar;
#  if defined(DSR_LANES_AVX2)
  if (__builtin_cpu_supports("avx2")) return raster_face_rect_avx2;
#  endif
  return raster_face_rect_lanes;
#else
  return raster_face_rect_scalar;
#endif
}

/* Renders every tile; each tile then turns its numerators into colours and,
 * when image is not NULL, writes its output pixels (mean of k x k blocks;
 * tiles are multiples of k, so a block never straddles two tiles). */
static void render_tiles(dsRaster* r, dsReal* image, int nt) {
  int t;
  const double abg = r->s.background[3];
  const int k = r->v.k;
  const double ik2 = 1.0 / ((double)k * k);
  const dsrRectFn raster_face_rect = rect_fn();
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt) if (nt > 1 && r->v.ntiles > 1)
#endif
  for (t = 0; t < r->v.ntiles; t++) {
    int tx = t % r->v.ntx, ty = t / r->v.ntx;
    int x0 = tx * r->v.tile, y0 = ty * r->v.tile;
    int x1 = x0 + r->v.tile - 1, y1 = y0 + r->v.tile - 1;
    int row, col, e, busy = r->bin_start[t + 1] > r->bin_start[t];
    if (x1 >= r->v.Wi) x1 = r->v.Wi - 1;
    if (y1 >= r->v.Hi) y1 = r->v.Hi - 1;
    for (e = 0; e < r->nbig && !busy; e++) {
      const dsrFace* f = &r->faces[r->big[e]];
      busy = f->x0 <= x1 && f->x1 >= x0 && f->y0 <= y1 && f->y1 >= y0;
    }
    if (!busy) {
      /* No face can reach this tile: its pixels are the background (the
       * same arithmetic as below, with S = T = 1). Their state is not
       * stored: backward only reads pixels that some face reached. */
      if (image) {
        int orow, ocol, a, ch;
        double acc[4] = {0, 0, 0, 0};
        const double al = 1.0 - (1.0 - abg) * 1.0, f = r->v.premul ? al : 1.0;
        for (a = 0; a < k * k; a++) {
          acc[0] += f * r->s.background[0];
          acc[1] += f * r->s.background[1];
          acc[2] += f * r->s.background[2];
          acc[3] += al;
        }
        for (orow = y0 / k; orow <= y1 / k; orow++)
          for (ocol = x0 / k; ocol <= x1 / k; ocol++)
            for (ch = 0; ch < 4; ch++) image[4 * ((size_t)orow * r->v.W + ocol) + ch] = (dsReal)(acc[ch] * ik2);
      }
      continue;
    }
    for (row = y0; row <= y1; row++)
      for (col = x0; col <= x1; col++) dsr_pixel_init(&r->v, r->pix + 6 * ((size_t)row * r->v.Wi + col));
    for (e = r->bin_start[t]; e < r->bin_start[t + 1]; e++) {
      const dsrFace* f = &r->faces[r->bins[e]];
      raster_face_rect(r, f, f->x0 > x0 ? f->x0 : x0, f->x1 < x1 ? f->x1 : x1,
                       f->y0 > y0 ? f->y0 : y0, f->y1 < y1 ? f->y1 : y1);
    }
    for (e = 0; e < r->nbig; e++) {
      const dsrFace* f = &r->faces[r->big[e]];
      int a0 = f->x0 > x0 ? f->x0 : x0, a1 = f->x1 < x1 ? f->x1 : x1;
      int b0 = f->y0 > y0 ? f->y0 : y0, b1 = f->y1 < y1 ? f->y1 : y1;
      if (a0 <= a1 && b0 <= b1) raster_face_rect(r, f, a0, a1, b0, b1);
    }
    for (row = y0; row <= y1; row++)
      for (col = x0; col <= x1; col++) dsr_pixel_normalize(r->pix + 6 * ((size_t)row * r->v.Wi + col));
    if (image) {
      int orow, ocol;
      for (orow = y0 / k; orow <= y1 / k; orow++)
        for (ocol = x0 / k; ocol <= x1 / k; ocol++)
          dsr_downsample(&r->v, r->pix, orow, ocol, image + 4 * ((size_t)orow * r->v.W + ocol));
    }
  }
}

int ds_raster_render(dsRaster* r, const dsRasterMesh* mesh, dsReal* image) {
  int rc;
  if (!r) return DS_ERR_INVALID;
  r->rendered = 0;
  rc = check_mesh(r, mesh);
  if (rc) return rc;
  /* one thread or all, from the clock (base/internal.h): a machine whose
     other cores are busy runs the render on one */
  int arm;
  const int nt = ds__pick_begin(&r->pk_fwd, (long long)r->v.Wi * r->v.Hi + mesh->nface, DSR_PAR_MIN, &arm);
  const double t0 = arm >= 0 ? ds__clock() : 0;
  (void)nt;
  setup_faces(r, mesh, nt);
  bin_faces(r, mesh->nface);
  render_tiles(r, image, nt);
  if (arm >= 0) ds__pick_end(&r->pk_fwd, arm, ds__clock() - t0);
  r->rendered = 1;
  r->r_nvert = mesh->nvert;
  r->r_nface = mesh->nface;
  r->r_mode = mesh->color_mode;
  ds__clearerr(&r->err);
  return DS_OK;
}

/* ---- backward -------------------------------------------------------------- */

static void backward_faces(dsRaster* r, const dsRasterMesh* m, const dsReal* d_image, int nt) {
  const int vc = m->color_mode == DS_COLOR_VERTEX;
  int j;
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 8) num_threads(nt) if (nt > 1 && m->nface >= 32)
#endif
  for (j = 0; j < m->nface; j++) {
    const dsrFace* f = &r->faces[j];
    dsrFaceGrad g;
    memset(&g, 0, sizeof g);
    dsr_face_bwd(&r->v, f, r->pix, d_image, &g);
    dsr_face_finish(&r->v, m->verts, m->faces, m->colors, vc, j, f, &g, r->fgrad + 9 * (size_t)j,
                    r->fcgrad + 9 * (size_t)j, r->want_cam ? r->fcam + DSR_NCAM * (size_t)j : NULL,
                    r->want_light ? r->flight + DSR_NLIGHT * (size_t)j : NULL);
  }
}

static void gather(const dsRaster* r, const dsRasterMesh* m, dsReal* d_verts, dsReal* d_colors) {
  int j, i, k;
  for (j = 0; j < m->nface; j++) {
    const double* fg = r->fgrad + 9 * (size_t)j;
    const double* fc = r->fcgrad + 9 * (size_t)j;
    for (i = 0; i < 3; i++) {
      int v = m->faces[3 * j + i];
      if (d_verts)
        for (k = 0; k < 3; k++) d_verts[3 * v + k] += (dsReal)fg[3 * i + k];
      if (d_colors && m->color_mode == DS_COLOR_VERTEX)
        for (k = 0; k < 3; k++) d_colors[3 * v + k] += (dsReal)fc[3 * i + k];
    }
    if (d_colors && m->color_mode == DS_COLOR_FACE)
      for (k = 0; k < 3; k++) d_colors[3 * j + k] += (dsReal)fc[k];
  }
}

/* Sums the per-face camera parts (face order) and runs them back through
 * the frame: y_c = z_c x x_c, x_c = unit(w), w = up x z_c, z_c = unit(v),
 * v = at - eye; ay = 1/tan(fov/2) (perspective) or 1/h (orthographic).
 * d(a x b) with dL/d(a x b) = g: dL/da = b x g, dL/db = g x a;
 * d unit(v): dL/dv = (g - u (u.g))/|v|. */
static void camera_adjoint(const dsRaster* r, int nface, dsCamera* dc) {
  const dsrFrame* fr = &r->v.fr;
  double acc[DSR_NCAM], gxc[3], gyc[3], gzc[3], gw[3], gv[3], t[3], dot;
  int j, k;
  memset(acc, 0, sizeof acc);
  for (j = 0; j < nface; j++)
    for (k = 0; k < DSR_NCAM; k++) acc[k] += r->fcam[DSR_NCAM * (size_t)j + k];
  for (k = 0; k < 3; k++) {
    gxc[k] = acc[k];
    gyc[k] = acc[3 + k];
    gzc[k] = acc[6 + k];
  }
  dsr_cross3(t, fr->xc, gyc); /* y_c = z_c x x_c */
  for (k = 0; k < 3; k++) gzc[k] += t[k];
  dsr_cross3(t, gyc, fr->zc);
  for (k = 0; k < 3; k++) gxc[k] += t[k];
  dot = dsr_dot3(fr->xc, gxc); /* x_c = unit(w) */
  for (k = 0; k < 3; k++) gw[k] = (gxc[k] - fr->xc[k] * dot) / fr->wn;
  dsr_cross3(t, fr->zc, gw); /* w = up x z_c */
  for (k = 0; k < 3; k++) dc->up[k] += (dsReal)t[k];
  dsr_cross3(t, gw, fr->up);
  for (k = 0; k < 3; k++) gzc[k] += t[k];
  dot = dsr_dot3(fr->zc, gzc); /* z_c = unit(at - eye) */
  for (k = 0; k < 3; k++) gv[k] = (gzc[k] - fr->zc[k] * dot) / fr->vn;
  for (k = 0; k < 3; k++) {
    dc->at[k] += (dsReal)gv[k];
    dc->eye[k] += (dsReal)(acc[9 + k] - gv[k]);
  }
  /* acc[12] = dL/d(ax) ax, acc[13] = dL/d(ay) ay, acc[14] = dL/d(ox),
   * acc[15] = dL/d(oy) (render/raster_kernel.h) */
  if (fr->ortho) {
    double h = r->s.camera.ortho_height; /* ax = ay/aspect, ay = 1/h: dL/dh = -(acc12 + acc13)/h */
    dc->ortho_height += (dsReal)(-(acc[12] + acc[13]) / h);
  } else if (fr->pp) {
    /* intrinsics: ax = 2 fx/W, ay = 2 fy/H, ox = 2 cx/W - 1, oy = 1 - 2 cy/H, so
     * dL/dfx = dL/d(ax) ax/fx, dL/dfy = dL/d(ay) ay/fy, dL/dcx = 2 dL/d(ox)/W,
     * dL/dcy = -2 dL/d(oy)/H; fov_deg is unused and gets nothing */
    const dsCamera* c = &r->s.camera;
    dc->fx += (dsReal)(acc[12] / (double)c->fx);
    dc->fy += (dsReal)(acc[13] / (double)c->fy);
    dc->cx += (dsReal)(2.0 * acc[14] / (double)r->v.W);
    dc->cy += (dsReal)(-2.0 * acc[15] / (double)r->v.H);
  } else {
    /* ax = ay/aspect, ay = 1/tan(fov/2), fov = deg pi/180:
     * dL/d(ay) = (acc12 + acc13)/ay, d(ay)/d(fov) = -1/(2 sin^2(fov/2)) */
    double sh = sin(0.5 * fr->fov);
    dc->fov_deg += (dsReal)(-(acc[12] + acc[13]) / fr->ay * 0.5 / (sh * sh) * DSR_PI / 180.0);
  }
}

/* Sums the per-face light parts (face order: the same bits for any thread
 * count) into dl's ambient and directional, and dL/dl for the unit
 * direction l = d/|d| (d = light_dir) back through the normalisation:
 * dL/dd = (dL/dl - l (l . dL/dl))/|d|. A headlight (d = 0) gets no
 * direction gradient. */
void ds__raster_light_finish(const dsrView* v, const dsReal light_dir[3], const double acc[DSR_NLIGHT],
                             dsRenderSettings* dl) {
  double dn = 0.0, dot;
  int k;
  dl->ambient += (dsReal)acc[0];
  dl->directional += (dsReal)acc[1];
  if (v->head) return;
  for (k = 0; k < 3; k++) dn += (double)light_dir[k] * (double)light_dir[k];
  dn = sqrt(dn);
  dot = dsr_dot3(v->light, acc + 2);
  for (k = 0; k < 3; k++) dl->light_dir[k] += (dsReal)((acc[2 + k] - v->light[k] * dot) / dn);
}

static void light_adjoint(const dsRaster* r, int nface, dsRenderSettings* dl) {
  double acc[DSR_NLIGHT];
  memset(acc, 0, sizeof acc);
  dsr_light_sum(r->flight, nface, acc);
  ds__raster_light_finish(&r->v, r->s.light_dir, acc, dl);
}

int ds_raster_backward(dsRaster* r, const dsRasterMesh* mesh, const dsReal* d_image, dsReal* d_verts,
                       dsReal* d_colors) {
  return ds_raster_backward_light(r, mesh, d_image, d_verts, d_colors, NULL, NULL);
}

int ds_raster_backward_camera(dsRaster* r, const dsRasterMesh* mesh, const dsReal* d_image,
                              dsReal* d_verts, dsReal* d_colors, dsCamera* d_camera) {
  return ds_raster_backward_light(r, mesh, d_image, d_verts, d_colors, d_camera, NULL);
}

int ds_raster_backward_light(dsRaster* r, const dsRasterMesh* mesh, const dsReal* d_image, dsReal* d_verts,
                             dsReal* d_colors, dsCamera* d_camera, dsRenderSettings* d_light) {
  int rc;
  if (!r) return DS_ERR_INVALID;
  if (!d_image) return ds__seterr(&r->err, DS_ERR_INVALID, "backward: d_image is NULL");
  rc = check_mesh(r, mesh);
  if (rc) return rc;
  if (!r->rendered || r->r_nvert != mesh->nvert || r->r_nface != mesh->nface ||
      r->r_mode != mesh->color_mode)
    return ds__seterr(&r->err, DS_ERR_STATE,
                      "backward: needs a preceding ds_raster_render of the same mesh and settings "
                      "(or use ds_raster_render_backward)");
  /* The face setup is recomputed from the inputs (cheap), so the forward need
   * keep only the per-pixel totals. */
  int arm;
  const int nt = ds__pick_begin(&r->pk_bwd, (long long)r->v.Wi * r->v.Hi + mesh->nface, DSR_PAR_MIN, &arm);
  const double t0 = arm >= 0 ? ds__clock() : 0;
  (void)nt;
  setup_faces(r, mesh, nt);
  r->want_cam = d_camera != NULL;
  r->want_light = d_light != NULL;
  backward_faces(r, mesh, d_image, nt);
  if (arm >= 0) ds__pick_end(&r->pk_bwd, arm, ds__clock() - t0);
  gather(r, mesh, d_verts, d_colors);
  if (d_camera) camera_adjoint(r, mesh->nface, d_camera);
  if (d_light) light_adjoint(r, mesh->nface, d_light);
  r->want_cam = 0;
  r->want_light = 0;
  ds__clearerr(&r->err);
  return DS_OK;
}

int ds_raster_render_backward(dsRaster* r, const dsRasterMesh* mesh, const dsReal* d_image,
                              dsReal* d_verts, dsReal* d_colors) {
  int rc = ds_raster_render(r, mesh, NULL);
  if (rc) return rc;
  return ds_raster_backward(r, mesh, d_image, d_verts, d_colors);
}

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
 *              frame once (camera_adjoint).
 */
#include "config.h"

#include <math.h>
#include <string.h>

#include "dsim/raster.h"
#include "base/internal.h"
#include "render/raster_kernel.h"

#define DSR_TILE 32
#define DSR_BIG_TILES 16
/* softmax terms exp(e_j - m) < exp(-40) ~ 4e-18 are dropped (forward and adjoint) */
#define DSR_SOFTMAX_CUT 40.0
/* per-face camera adjoint: dL/dx_c, dL/dy_c, dL/dz_c (frame vectors), direct
 * dL/d(eye), dL/d(ay) */
#define DSR_NCAM 13
#define DSR_PI 3.14159265358979323846

/* ---- camera ------------------------------------------------------------- */
typedef struct dsrFrame {
  double eye[3], xc[3], yc[3], zc[3];
  double up[3];   /* as given */
  double vn, wn;  /* |at - eye| and |up x z_c| (for the camera adjoint) */
  double fov;     /* vertical field of view, radians (perspective) */
  double ax, ay; /* NDC = (X ax / Z, Y ay / Z) (perspective) or (X ax, Y ay) */
  int ortho;
} dsrFrame;

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

static void cross3(double r[3], const double a[3], const double b[3]) {
  /* r = a x b */
  double x = a[1] * b[2] - a[2] * b[1], y = a[2] * b[0] - a[0] * b[2], z = a[0] * b[1] - a[1] * b[0];
  r[0] = x;
  r[1] = y;
  r[2] = z;
}

static double dot3(const double a[3], const double b[3]) { return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]; }

/* Camera basis and projection scales; DS_ERR_INVALID for a degenerate camera. */
static int camera_frame(const dsCamera* cam, int width, int height, dsrFrame* fr) {
  double up[3], n;
  int i;
  for (i = 0; i < 3; i++) {
    fr->eye[i] = cam->eye[i];
    fr->zc[i] = (double)cam->at[i] - (double)cam->eye[i];
    up[i] = cam->up[i];
  }
  n = sqrt(dot3(fr->zc, fr->zc));
  if (!(n > 0) || !isfinite(n)) return DS_ERR_INVALID;
  fr->vn = n;
  for (i = 0; i < 3; i++) fr->zc[i] /= n;
  for (i = 0; i < 3; i++) fr->up[i] = up[i];
  cross3(fr->xc, up, fr->zc);
  n = sqrt(dot3(fr->xc, fr->xc));
  if (!(n > 1e-12 * sqrt(dot3(up, up))) || !isfinite(n)) return DS_ERR_INVALID;
  fr->wn = n;
  for (i = 0; i < 3; i++) fr->xc[i] /= n;
  cross3(fr->yc, fr->zc, fr->xc);
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
  if (!(cam->znear > 0) || !(cam->zfar > cam->znear) || !isfinite(cam->zfar)) return DS_ERR_INVALID;
  return DS_OK;
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

/* camera coordinates of a world point */
static void to_camera(const dsrFrame* fr, const double p[3], double* X, double* Y, double* Z) {
  double d[3] = {p[0] - fr->eye[0], p[1] - fr->eye[1], p[2] - fr->eye[2]};
  *X = dot3(d, fr->xc);
  *Y = dot3(d, fr->yc);
  *Z = dot3(d, fr->zc);
}

int ds_camera_project(const dsCamera* cam, int width, int height, const dsReal p[3], dsReal ndc[3]) {
  dsrFrame fr;
  double X, Y, Z, pp[3];
  if (!cam || !p || !ndc || camera_frame(cam, width, height, &fr) != DS_OK) return DS_ERR_INVALID;
  pp[0] = p[0];
  pp[1] = p[1];
  pp[2] = p[2];
  to_camera(&fr, pp, &X, &Y, &Z);
  if (fr.ortho) {
    ndc[0] = (dsReal)(X * fr.ax);
    ndc[1] = (dsReal)(Y * fr.ay);
  } else {
    if (!(Z > 0)) return DS_ERR_RANGE;
    ndc[0] = (dsReal)(X * fr.ax / Z);
    ndc[1] = (dsReal)(Y * fr.ay / Z);
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
  int W, H, k;        /* output size, supersampling */
  int Wi, Hi;         /* internal size kW x kH */
  double iWi;         /* 1/Wi: column c has centre x = (2c + 1 - Wi)/Wi */
  int max_faces, max_verts;
  int tile;           /* tile side in internal pixels: a multiple of k near DSR_TILE */
  int ntx, nty, ntiles;
  dsrFrame fr;
  dsrConst c;
  double light[3];    /* unit light direction (0: a headlight, see face_light) */
  int head;           /* 1: headlight (light_dir 0, 0, 0) */
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
  int rendered;       /* a render's state is held for backward */
  int r_nvert, r_nface, r_mode;
  dsErrBuf err;
};


/* ds_render_settings_check's checks, then the camera frame. */
static int check_settings(const dsRenderSettings* s, dsrFrame* fr) {
  if (ds_render_settings_check(s, NULL, 0) != DS_OK) return DS_ERR_INVALID;
  return camera_frame(&s->camera, s->width, s->height, fr);
}

static void apply_settings(dsRaster* r, const dsRenderSettings* s, const dsrFrame* fr) {
  double ln = log(1e4 - 1.0), n;
  int i;
  r->s = *s;
  r->fr = *fr;
  r->c.sigma = s->sigma;
  r->c.isigma = 1.0 / (double)s->sigma;
  r->c.r2 = (double)s->sigma * ln;
  r->c.r = sqrt(r->c.r2);
  r->c.znear = s->camera.znear;
  r->c.zfar = s->camera.zfar;
  r->c.zscale = 1.0 / (((double)s->camera.zfar - (double)s->camera.znear) * (double)s->gamma);
  r->c.ortho = fr->ortho;
  for (i = 0; i < 3; i++) r->light[i] = s->light_dir[i];
  n = sqrt(dot3(r->light, r->light));
  for (i = 0; i < 3; i++) r->light[i] = n > 0 ? r->light[i] / n : 0.0;
  r->head = !(n > 0);
  r->rendered = 0;
}

/* The first invalid field of s, named, with the expected value. */
int ds_render_settings_check(const dsRenderSettings* s, char* err, size_t errlen) {
  if (!s) return ds__puterr(err, errlen, DS_ERR_INVALID, "render settings: NULL");
#define BAD(...) return ds__puterr(err, errlen, DS_ERR_INVALID, __VA_ARGS__)
  if (s->width <= 0 || s->width > 16384) BAD("render settings: width: expected 1 to 16384, got %d", s->width);
  if (s->height <= 0 || s->height > 16384) BAD("render settings: height: expected 1 to 16384, got %d", s->height);
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
  r->W = s->width;
  r->H = s->height;
  r->k = s->supersample;
  r->Wi = r->W * r->k;
  r->Hi = r->H * r->k;
  r->iWi = 1.0 / r->Wi;
  r->max_faces = max_faces;
  r->max_verts = max_verts;
  r->tile = r->k * (DSR_TILE / r->k > 0 ? DSR_TILE / r->k : 1);
  r->ntx = (r->Wi + r->tile - 1) / r->tile;
  r->nty = (r->Hi + r->tile - 1) / r->tile;
  r->ntiles = r->ntx * r->nty;
  r->bin_cap = DSR_BIG_TILES * (max_faces > 0 ? max_faces : 1);
  npix = (size_t)r->Wi * (size_t)r->Hi;
  r->vproj = (double*)ds__malloc(sizeof(double) * 3 * (size_t)(max_verts + 1));
  r->faces = (dsrFace*)ds__malloc(sizeof(dsrFace) * (size_t)(max_faces + 1));
  r->ftile = (int*)ds__malloc(sizeof(int) * 4 * (size_t)(max_faces + 1));
  r->bin_start = (int*)ds__malloc(sizeof(int) * (size_t)(r->ntiles + 1));
  r->bin_fill = (int*)ds__malloc(sizeof(int) * (size_t)r->ntiles);
  r->bins = (int*)ds__malloc(sizeof(int) * (size_t)r->bin_cap);
  r->big = (int*)ds__malloc(sizeof(int) * (size_t)(max_faces + 1));
  r->pix = (double*)ds__malloc(sizeof(double) * 6 * npix);
  r->fgrad = (double*)ds__malloc(sizeof(double) * 9 * (size_t)(max_faces + 1));
  r->fcgrad = (double*)ds__malloc(sizeof(double) * 9 * (size_t)(max_faces + 1));
  r->fcam = (double*)ds__malloc(sizeof(double) * DSR_NCAM * (size_t)(max_faces + 1));
  if (!r->vproj || !r->faces || !r->ftile || !r->bin_start || !r->bin_fill || !r->bins || !r->big ||
      !r->pix || !r->fgrad || !r->fcgrad || !r->fcam) {
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
  ds__free(r);
}

int ds_raster_set_settings(dsRaster* r, const dsRenderSettings* s) {
  dsrFrame fr;
  if (!r) return DS_ERR_INVALID;
  if (!s) return ds__seterr(&r->err, DS_ERR_INVALID, "settings: NULL");
  if (s->width != r->W || s->height != r->H || s->supersample != r->k)
    return ds__seterr(&r->err, DS_ERR_INVALID,
                      "settings: image size %dx%d (supersample %d) differs from the renderer's "
                      "%dx%d (supersample %d); create a new renderer",
                      s->width, s->height, s->supersample, r->W, r->H, r->k);
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

/* Light factor of face (world vertices p0, p1, p2): L = k_amb + k_dir
 * max(0, s n_u . l), n_u = n/|n|, n = (p1 - p0) x (p2 - p0), s = +-1 turns the
 * normal toward the camera. Also returns n, |n|, s and whether the
 * directional term is active. */
static double face_light(const dsRaster* r, const double p[3][3], double n[3], double* nn,
                         double* sgn, int* lit) {
  double e1[3], e2[3], view[3], cl;
  int i;
  for (i = 0; i < 3; i++) {
    e1[i] = p[1][i] - p[0][i];
    e2[i] = p[2][i] - p[0][i];
  }
  cross3(n, e1, e2);
  *nn = sqrt(dot3(n, n));
  *lit = 0;
  *sgn = 1.0;
  if (!(*nn > 0)) return r->s.ambient;
  if (r->fr.ortho) {
    for (i = 0; i < 3; i++) view[i] = -r->fr.zc[i];
  } else {
    for (i = 0; i < 3; i++) view[i] = r->fr.eye[i] - (p[0][i] + p[1][i] + p[2][i]) / 3.0;
  }
  *sgn = dot3(n, view) >= 0 ? 1.0 : -1.0;
  if (r->head) {
    /* headlight: l = view / |view| (from the face towards the eye) */
    const double vn = sqrt(dot3(view, view));
    cl = vn > 0 ? *sgn * dot3(n, view) / (*nn * vn) : 0.0;
  } else {
    cl = *sgn * dot3(n, r->light) / *nn;
  }
  if (cl > 0) {
    *lit = 1;
    return (double)r->s.ambient + (double)r->s.directional * cl;
  }
  return r->s.ambient;
}

static void face_world(const dsRasterMesh* m, int j, double p[3][3]) {
  int i, k;
  for (i = 0; i < 3; i++) {
    int v = m->faces[3 * j + i];
    for (k = 0; k < 3; k++) p[i][k] = m->verts[3 * v + k];
  }
}

/* Projects vertices and sets up faces and their bounding boxes. */
static void setup_faces(dsRaster* r, const dsRasterMesh* m) {
  const dsrFrame* fr = &r->fr;
  const double rr = r->c.r;
  int nv = m->nvert, nf = m->nface, v, j;
  r->c.vertex_color = m->color_mode == DS_COLOR_VERTEX;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (nv >= 1024)
#endif
  for (v = 0; v < nv; v++) {
    double p[3] = {m->verts[3 * v], m->verts[3 * v + 1], m->verts[3 * v + 2]}, X, Y, Z;
    to_camera(fr, p, &X, &Y, &Z);
    if (fr->ortho) {
      r->vproj[3 * v] = X * fr->ax;
      r->vproj[3 * v + 1] = Y * fr->ay;
    } else {
      r->vproj[3 * v] = Z > 0 ? X * fr->ax / Z : 0.0;
      r->vproj[3 * v + 1] = Z > 0 ? Y * fr->ay / Z : 0.0;
    }
    r->vproj[3 * v + 2] = Z;
  }
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (nf >= 256)
#endif
  for (j = 0; j < nf; j++) {
    dsrFace* f = &r->faces[j];
    int* ft = &r->ftile[4 * j];
    double xmin, xmax, ymin, ymax, p[3][3], n[3], nn, sg;
    int i, lit, ok = 1;
    for (i = 0; i < 3; i++) {
      int vi = m->faces[3 * j + i];
      f->px[i] = r->vproj[3 * vi];
      f->py[i] = r->vproj[3 * vi + 1];
      f->Z[i] = r->vproj[3 * vi + 2];
      if (!(f->Z[i] >= r->c.znear)) ok = 0;
      f->iz[i] = ok ? 1.0 / f->Z[i] : 0.0;
    }
    f->A = (f->px[1] - f->px[0]) * (f->py[2] - f->py[0]) - (f->py[1] - f->py[0]) * (f->px[2] - f->px[0]);
    if (!(f->A != 0.0) || !isfinite(1.0 / f->A)) ok = 0;
    f->x0 = 1; /* empty box: an invalid face touches no pixel */
    f->x1 = 0;
    f->y0 = 1;
    f->y1 = 0;
    f->light = 0.0;
    ft[0] = 1;
    ft[1] = 0;
    ft[2] = 1;
    ft[3] = 0;
    if (!ok) continue;
    f->invA = 1.0 / f->A;
    for (i = 0; i < 3; i++) {
      int ia = (i + 1) % 3, ib = (i + 2) % 3;
      double ax = f->px[ia], ay = f->py[ia], bx = f->px[ib], by = f->py[ib];
      double len = sqrt((bx - ax) * (bx - ax) + (by - ay) * (by - ay));
      f->ea[i] = ay - by;
      f->eb[i] = bx - ax;
      f->ec[i] = ax * by - ay * bx;
      f->en[i] = (f->A > 0 ? 1.0 : -1.0) / len;
      f->tux[i] = (bx - ax) / (len * len);
      f->tuy[i] = (by - ay) / (len * len);
    }
    dsr_span_setup(f, rr);
    face_world(m, j, p);
    f->light = face_light(r, p, n, &nn, &sg, &lit);
    if (m->color_mode == DS_COLOR_VERTEX) {
      for (i = 0; i < 3; i++) {
        int vi = m->faces[3 * j + i], k;
        for (k = 0; k < 3; k++) f->vc[i][k] = m->colors[3 * vi + k];
      }
    } else {
      for (i = 0; i < 3; i++) f->col[i] = f->light * (double)m->colors[3 * j + i];
    }
    xmin = fmin(f->px[0], fmin(f->px[1], f->px[2])) - rr;
    xmax = fmax(f->px[0], fmax(f->px[1], f->px[2])) + rr;
    ymin = fmin(f->py[0], fmin(f->py[1], f->py[2])) - rr;
    ymax = fmax(f->py[0], fmax(f->py[1], f->py[2])) + rr;
    {
      /* column c has centre x = (2c + 1 - Wi)/Wi; row has y = (Hi - 1 - 2 row)/Hi;
       * one pixel of margin, clamped in double before converting */
      double c0 = floor((xmin * r->Wi + r->Wi - 1) * 0.5) - 1, c1 = ceil((xmax * r->Wi + r->Wi - 1) * 0.5) + 1;
      double r0 = floor((r->Hi - 1 - ymax * r->Hi) * 0.5) - 1, r1 = ceil((r->Hi - 1 - ymin * r->Hi) * 0.5) + 1;
      c0 = fmax(c0, 0.0);
      r0 = fmax(r0, 0.0);
      c1 = fmin(c1, (double)(r->Wi - 1));
      r1 = fmin(r1, (double)(r->Hi - 1));
      if (!(c0 <= c1) || !(r0 <= r1)) continue;
      f->x0 = (int)c0;
      f->x1 = (int)c1;
      f->y0 = (int)r0;
      f->y1 = (int)r1;
      ft[0] = f->x0 / r->tile;
      ft[1] = f->x1 / r->tile;
      ft[2] = f->y0 / r->tile;
      ft[3] = f->y1 / r->tile;
    }
  }
}

/* Counting sort of faces into tiles (serial, ascending face index). */
static void bin_faces(dsRaster* r, int nf) {
  int j, t, tx, ty;
  memset(r->bin_start, 0, sizeof(int) * (size_t)(r->ntiles + 1));
  r->nbig = 0;
  for (j = 0; j < nf; j++) {
    const int* ft = &r->ftile[4 * j];
    long span;
    if (ft[0] > ft[1] || ft[2] > ft[3]) continue;
    span = (long)(ft[1] - ft[0] + 1) * (long)(ft[3] - ft[2] + 1);
    if (span > DSR_BIG_TILES) {
      r->big[r->nbig++] = j;
      continue;
    }
    for (ty = ft[2]; ty <= ft[3]; ty++)
      for (tx = ft[0]; tx <= ft[1]; tx++) r->bin_start[ty * r->ntx + tx + 1]++;
  }
  for (t = 0; t < r->ntiles; t++) r->bin_start[t + 1] += r->bin_start[t];
  memcpy(r->bin_fill, r->bin_start, sizeof(int) * (size_t)r->ntiles);
  for (j = 0; j < nf; j++) {
    const int* ft = &r->ftile[4 * j];
    if (ft[0] > ft[1] || ft[2] > ft[3]) continue;
    if ((long)(ft[1] - ft[0] + 1) * (long)(ft[3] - ft[2] + 1) > DSR_BIG_TILES) continue;
    for (ty = ft[2]; ty <= ft[3]; ty++)
      for (tx = ft[0]; tx <= ft[1]; tx++) r->bins[r->bin_fill[ty * r->ntx + tx]++] = j;
  }
}

/* Adds face f to the pixels of rectangle [x0,x1] x [y0,y1] (already
 * intersected with its bounding box): T *= q, online softmax. */
/* T *= q and the online softmax update of pixel state ps with one face */
static inline void accumulate(const dsrFace* f, const dsrConst* c, double* ps, double D, double q,
                              double e, const double bp[3]) {
  double E, w, C[3];
  ps[2] *= q;
  if (e > ps[0]) {
    double sc = ps[0] - e < -DSR_SOFTMAX_CUT ? 0.0 : dsr_exp(ps[0] - e);
    ps[1] *= sc;
    ps[3] *= sc;
    ps[4] *= sc;
    ps[5] *= sc;
    ps[0] = e;
    E = 1.0;
  } else {
    /* terms below exp(-DSR_SOFTMAX_CUT) of the largest are dropped */
    double de = e - ps[0];
    if (de < -DSR_SOFTMAX_CUT) return;
    E = dsr_exp(de);
  }
  if (c->vertex_color) {
    int k;
    for (k = 0; k < 3; k++)
      C[k] = f->light * (bp[0] * f->vc[0][k] + bp[1] * f->vc[1][k] + bp[2] * f->vc[2][k]);
  } else {
    C[0] = f->col[0];
    C[1] = f->col[1];
    C[2] = f->col[2];
  }
  w = D * E;
  ps[1] += w;
  ps[3] += w * C[0];
  ps[4] += w * C[1];
  ps[5] += w * C[2];
}

/* Adds face f to the pixels of rectangle [x0,x1] x [y0,y1] (already
 * intersected with its bounding box). */
static void raster_face_rect(const dsRaster* r, const dsrFace* f, int x0, int x1, int y0, int y1) {
  const dsrConst* c = &r->c;
  int row, col, c0, c1;
  for (row = y0; row <= y1; row++) {
    const double y = (double)(r->Hi - 1 - 2 * row) / r->Hi;
    double* px = r->pix + 6 * ((size_t)row * r->Wi);
    dsr_row_span(f, y, r->Wi, x0, x1, &c0, &c1);
    col = c0;
    for (; col <= c1; col++) {
      const double x = (double)(2 * col + 1 - r->Wi) * r->iWi;
      dsrEval ev;
      if (dsr_eval(f, c, x, y, &ev, 0)) accumulate(f, c, px + 6 * col, ev.D, ev.q, ev.e, ev.bp);
    }
  }
}

/* Renders every tile; each tile then turns its numerators into colours and,
 * when image is not NULL, writes its output pixels (mean of k x k blocks;
 * tiles are multiples of k, so a block never straddles two tiles). */
static void render_tiles(dsRaster* r, dsReal* image) {
  int t;
  const double m0 = (double)r->s.eps / (double)r->s.gamma;
  const double abg = r->s.background[3];
  const int k = r->k;
  const double ik2 = 1.0 / ((double)k * k);
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 1) if (r->ntiles > 1)
#endif
  for (t = 0; t < r->ntiles; t++) {
    int tx = t % r->ntx, ty = t / r->ntx;
    int x0 = tx * r->tile, y0 = ty * r->tile;
    int x1 = x0 + r->tile - 1, y1 = y0 + r->tile - 1;
    int row, col, e, busy = r->bin_start[t + 1] > r->bin_start[t];
    if (x1 >= r->Wi) x1 = r->Wi - 1;
    if (y1 >= r->Hi) y1 = r->Hi - 1;
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
        for (a = 0; a < k * k; a++) {
          acc[0] += r->s.background[0];
          acc[1] += r->s.background[1];
          acc[2] += r->s.background[2];
          acc[3] += 1.0 - (1.0 - abg) * 1.0;
        }
        for (orow = y0 / k; orow <= y1 / k; orow++)
          for (ocol = x0 / k; ocol <= x1 / k; ocol++)
            for (ch = 0; ch < 4; ch++) image[4 * ((size_t)orow * r->W + ocol) + ch] = (dsReal)(acc[ch] * ik2);
      }
      continue;
    }
    for (row = y0; row <= y1; row++)
      for (col = x0; col <= x1; col++) {
        double* ps = r->pix + 6 * ((size_t)row * r->Wi + col);
        ps[0] = m0;  /* the background term starts the softmax: u_bg = 1 */
        ps[1] = 1.0;
        ps[2] = 1.0;
        ps[3] = r->s.background[0];
        ps[4] = r->s.background[1];
        ps[5] = r->s.background[2];
      }
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
      for (col = x0; col <= x1; col++) {
        double* ps = r->pix + 6 * ((size_t)row * r->Wi + col);
        if (ps[1] != 1.0) { /* S = 1: nothing to normalise (exactly) */
          double inv = 1.0 / ps[1];
          ps[3] *= inv;
          ps[4] *= inv;
          ps[5] *= inv;
        }
      }
    if (image) {
      int orow, ocol;
      for (orow = y0 / k; orow <= y1 / k; orow++)
        for (ocol = x0 / k; ocol <= x1 / k; ocol++) {
          double acc[4] = {0, 0, 0, 0};
          int a, b, ch;
          for (a = 0; a < k; a++)
            for (b = 0; b < k; b++) {
              const double* ps = r->pix + 6 * ((size_t)(orow * k + a) * r->Wi + (size_t)(ocol * k + b));
              acc[0] += ps[3];
              acc[1] += ps[4];
              acc[2] += ps[5];
              acc[3] += 1.0 - (1.0 - abg) * ps[2];
            }
          for (ch = 0; ch < 4; ch++) image[4 * ((size_t)orow * r->W + ocol) + ch] = (dsReal)(acc[ch] * ik2);
        }
    }
  }
}

int ds_raster_render(dsRaster* r, const dsRasterMesh* mesh, dsReal* image) {
  int rc;
  if (!r) return DS_ERR_INVALID;
  r->rendered = 0;
  rc = check_mesh(r, mesh);
  if (rc) return rc;
  setup_faces(r, mesh);
  bin_faces(r, mesh->nface);
  render_tiles(r, image);
  r->rendered = 1;
  r->r_nvert = mesh->nvert;
  r->r_nface = mesh->nface;
  r->r_mode = mesh->color_mode;
  ds__clearerr(&r->err);
  return DS_OK;
}

/* ---- backward -------------------------------------------------------------- */

/* Screen-space face gradient -> world-space vertex gradients (fgrad) and
 * colour gradients (fcgrad), including the light factor through the normal. */
static void face_finish(dsRaster* r, const dsRasterMesh* m, int j, const dsrFace* f,
                        const dsrFaceGrad* g) {
  const dsrFrame* fr = &r->fr;
  double* out = r->fgrad + 9 * (size_t)j;
  double* cout = r->fcgrad + 9 * (size_t)j;
  double gL = 0.0, p[3][3], n[3], nn, sg;
  int i, k, lit;
  dsrFaceGrad gg = *g;
  double* cam = r->fcam + DSR_NCAM * (size_t)j;
  if (r->want_cam) memset(cam, 0, DSR_NCAM * sizeof(double));
  if (f->x0 > f->x1 || f->y0 > f->y1) {
    /* culled or degenerate: no pixel saw it */
    memset(out, 0, 9 * sizeof(double));
    memset(cout, 0, 9 * sizeof(double));
    return;
  }
  dsr_face_grad_finish(f, &gg);
  g = &gg;
  face_world(m, j, p);
  for (i = 0; i < 3; i++) {
    double gX, gY, gZ;
    if (fr->ortho) {
      gX = g->gpx[i] * fr->ax;
      gY = g->gpy[i] * fr->ay;
      gZ = g->gZ[i];
    } else {
      /* px = X ax / Z, py = Y ay / Z */
      gX = g->gpx[i] * fr->ax * f->iz[i];
      gY = g->gpy[i] * fr->ay * f->iz[i];
      gZ = g->gZ[i] - (g->gpx[i] * f->px[i] + g->gpy[i] * f->py[i]) * f->iz[i];
    }
    for (k = 0; k < 3; k++) out[3 * i + k] = gX * fr->xc[k] + gY * fr->yc[k] + gZ * fr->zc[k];
    if (r->want_cam) {
      /* X = (p - eye).x_c etc.: dL/dx_c += gX (p - eye), dL/d(eye) -= the
       * projection part of dL/dp; px, py are proportional to ay */
      for (k = 0; k < 3; k++) {
        double d = p[i][k] - fr->eye[k];
        cam[k] += gX * d;
        cam[3 + k] += gY * d;
        cam[6 + k] += gZ * d;
        cam[9 + k] -= out[3 * i + k];
      }
      cam[12] += (g->gpx[i] * f->px[i] + g->gpy[i] * f->py[i]) / fr->ay;
    }
  }
  if (m->color_mode == DS_COLOR_VERTEX) {
    for (i = 0; i < 3; i++)
      for (k = 0; k < 3; k++) cout[3 * i + k] = g->gvc[i][k];
    gL = g->gL;
  } else {
    for (k = 0; k < 3; k++) {
      cout[k] = g->gcol[k] * f->light;
      gL += g->gcol[k] * (double)m->colors[3 * j + k];
    }
  }
  if (gL == 0.0) return;
  face_light(r, p, n, &nn, &sg, &lit);
  if (!lit) return;
  {
    /* L = k_amb + k_dir s n.l/|n|: dL/dn = k_dir s (l - n_u (n_u.l))/|n|;
     * n = e1 x e2: dn/de1^T g = e2 x g, dn/de2^T g = g x e1 */
    double gn[3], e1[3], e2[3], ge1[3], ge2[3], nl = 0.0, l[3], v[3], vn = 1.0;
    if (r->head) {
      /* headlight l = v/|v|, v = eye - (p0 + p1 + p2)/3 (orthographic: v = -z_c):
       * dL/dv = k_dir s (n_u - l (n_u.l))/|v|, dv/dp_i = -I/3, dv/d(eye) = I */
      for (k = 0; k < 3; k++)
        v[k] = fr->ortho ? -fr->zc[k] : fr->eye[k] - (p[0][k] + p[1][k] + p[2][k]) / 3.0;
      vn = sqrt(dot3(v, v));
      for (k = 0; k < 3; k++) l[k] = v[k] / vn;
    } else {
      for (k = 0; k < 3; k++) l[k] = r->light[k];
    }
    for (k = 0; k < 3; k++) nl += n[k] / nn * l[k];
    for (k = 0; k < 3; k++) gn[k] = gL * r->s.directional * sg * (l[k] - n[k] / nn * nl) / nn;
    if (r->head) {
      double gv[3];
      for (k = 0; k < 3; k++) gv[k] = gL * r->s.directional * sg * (n[k] / nn - l[k] * nl) / vn;
      if (fr->ortho) {
        /* v = -z_c, unit: dL/dz_c = -dL/dl (raw partial, like the projection's) */
        if (r->want_cam)
          for (k = 0; k < 3; k++) cam[6 + k] -= gL * r->s.directional * sg * n[k] / nn;
      } else {
        for (i = 0; i < 3; i++)
          for (k = 0; k < 3; k++) out[3 * i + k] -= gv[k] / 3.0;
        if (r->want_cam)
          for (k = 0; k < 3; k++) cam[9 + k] += gv[k];
      }
    }
    for (k = 0; k < 3; k++) {
      e1[k] = p[1][k] - p[0][k];
      e2[k] = p[2][k] - p[0][k];
    }
    cross3(ge1, e2, gn);
    cross3(ge2, gn, e1);
    for (k = 0; k < 3; k++) {
      out[3 + k] += ge1[k];
      out[6 + k] += ge2[k];
      out[k] -= ge1[k] + ge2[k];
    }
  }
}

static void backward_faces(dsRaster* r, const dsRasterMesh* m, const dsReal* d_image) {
  const dsrConst* c = &r->c;
  const int k = r->k;
  const double ik2 = 1.0 / ((double)k * k), abg = r->s.background[3];
  int j;
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 8) if (m->nface >= 32)
#endif
  for (j = 0; j < m->nface; j++) {
    const dsrFace* f = &r->faces[j];
    dsrFaceGrad g;
    int row, col, c0, c1;
    memset(&g, 0, sizeof g);
    for (row = f->y0; row <= f->y1; row++) {
      double y = (double)(r->Hi - 1 - 2 * row) / r->Hi;
      const dsReal* grow = d_image + 4 * (size_t)(row / k) * r->W;
      dsr_row_span(f, y, r->Wi, f->x0, f->x1, &c0, &c1);
      for (col = c0; col <= c1; col++) {
        const dsReal* gp = grow + 4 * (col / k);
        const double* ps;
        double x, g4[4], E, u, w, gq, gu, gD, ge, gC[3];
        dsrEval ev;
        if (gp[0] == 0 && gp[1] == 0 && gp[2] == 0 && gp[3] == 0) continue;
        x = (double)(2 * col + 1 - r->Wi) * r->iWi;
        if (!dsr_eval(f, c, x, y, &ev, 1)) continue;
        dsr_color(f, c, &ev, ev.C);
        ps = r->pix + 6 * ((size_t)row * r->Wi + col);
        g4[0] = gp[0] * ik2;
        g4[1] = gp[1] * ik2;
        g4[2] = gp[2] * ik2;
        g4[3] = gp[3] * ik2;
        E = ev.e - ps[0] < -DSR_SOFTMAX_CUT ? 0.0 : dsr_exp(ev.e - ps[0]);
        gq = ev.q > 0.0 ? -g4[3] * (1.0 - abg) * ps[2] / ev.q : 0.0;
        /* neither the softmax nor alpha sees this face here */
        if (E == 0.0 && gq == 0.0) continue;
        u = ev.D * E;
        w = u / ps[1]; /* the face's softmax weight */
        gu = (g4[0] * (ev.C[0] - ps[3]) + g4[1] * (ev.C[1] - ps[4]) + g4[2] * (ev.C[2] - ps[5])) / ps[1];
        gD = gu * E - gq;
        ge = gu * u;
        gC[0] = g4[0] * w;
        gC[1] = g4[1] * w;
        gC[2] = g4[2] * w;
        dsr_eval_bwd(f, c, x, y, &ev, gD, ge, gC, &g);
      }
    }
    face_finish(r, m, j, f, &g);
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
  const dsrFrame* fr = &r->fr;
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
  cross3(t, fr->xc, gyc); /* y_c = z_c x x_c */
  for (k = 0; k < 3; k++) gzc[k] += t[k];
  cross3(t, gyc, fr->zc);
  for (k = 0; k < 3; k++) gxc[k] += t[k];
  dot = dot3(fr->xc, gxc); /* x_c = unit(w) */
  for (k = 0; k < 3; k++) gw[k] = (gxc[k] - fr->xc[k] * dot) / fr->wn;
  cross3(t, fr->zc, gw); /* w = up x z_c */
  for (k = 0; k < 3; k++) dc->up[k] += (dsReal)t[k];
  cross3(t, gw, fr->up);
  for (k = 0; k < 3; k++) gzc[k] += t[k];
  dot = dot3(fr->zc, gzc); /* z_c = unit(at - eye) */
  for (k = 0; k < 3; k++) gv[k] = (gzc[k] - fr->zc[k] * dot) / fr->vn;
  for (k = 0; k < 3; k++) {
    dc->at[k] += (dsReal)gv[k];
    dc->eye[k] += (dsReal)(acc[9 + k] - gv[k]);
  }
  if (fr->ortho) {
    double h = r->s.camera.ortho_height; /* ay = 1/h */
    dc->ortho_height += (dsReal)(-acc[12] / (h * h));
  } else {
    double sh = sin(0.5 * fr->fov); /* ay = 1/tan(fov/2), fov = deg pi/180 */
    dc->fov_deg += (dsReal)(-acc[12] * 0.5 / (sh * sh) * DSR_PI / 180.0);
  }
}

int ds_raster_backward(dsRaster* r, const dsRasterMesh* mesh, const dsReal* d_image, dsReal* d_verts,
                       dsReal* d_colors) {
  return ds_raster_backward_camera(r, mesh, d_image, d_verts, d_colors, NULL);
}

int ds_raster_backward_camera(dsRaster* r, const dsRasterMesh* mesh, const dsReal* d_image,
                              dsReal* d_verts, dsReal* d_colors, dsCamera* d_camera) {
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
  setup_faces(r, mesh);
  r->want_cam = d_camera != NULL;
  backward_faces(r, mesh, d_image);
  gather(r, mesh, d_verts, d_colors);
  if (d_camera) camera_adjoint(r, mesh->nface, d_camera);
  r->want_cam = 0;
  ds__clearerr(&r->err);
  return DS_OK;
}

int ds_raster_render_backward(dsRaster* r, const dsRasterMesh* mesh, const dsReal* d_image,
                              dsReal* d_verts, dsReal* d_colors) {
  int rc = ds_raster_render(r, mesh, NULL);
  if (rc) return rc;
  return ds_raster_backward(r, mesh, d_image, d_verts, d_colors);
}

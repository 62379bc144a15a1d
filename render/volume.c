/* Differentiable emission-absorption volume rendering (dsim/volume.h).
 *
 * Ray. A pixel centre with NDC (x, y) (the rasterizer's: x = (2c + 1 - W)/W,
 * y = (H - 1 - 2r)/H) defines p(Z) = o + Z d, parametrised by the camera
 * depth Z: perspective o = eye, d = z_c + x_c (x - ox)/ax + y_c (y - oy)/ay
 * (so d.z_c = 1); orthographic o = eye + x_c x/ax + y_c y/ay, d = z_c. The
 * march covers [Z0, Z1] = [znear, min(zfar, depth)] cut to the grid's box
 * (slab test), of world length s = (Z1 - Z0)|d|, in N = ceil(s / (step dx))
 * equal pieces of length ds = s/N sampled at their midpoints Z_i (midpoint
 * rule: exact for a constant density, and N >= 1 for any hit).
 *
 * Forward. rho_i = trilinear density at p(Z_i) (coordinates clamped to the
 * cell centres' range, so the box faces carry the nearest centres' values),
 *   D = sum_i rho_i ds,   tau = sigma_t D,   T = exp(-tau),
 * and with a_i = sigma_t rho_i ds, T_i = exp(-sum_{j<i} a_j), the
 * emission-absorption sum telescopes for a flat smoke colour c:
 *   sum_i T_i (1 - exp(-a_i)) c = sum_i (T_i - T_{i+1}) c = (1 - T) c,
 * so per pixel, over the background b (RGBA, premultiplied as the
 * rasterizer's output is):
 *   rgb = c (1 - T) + T b.rgb,   alpha = (1 - T) + T b.a.
 * Only D is kept per pixel for the backward.
 *
 * Backward, from g = dL/d(rgba) of one pixel:
 *   gT = sum_ch g_ch (b_ch - c_ch) + g_a (b_a - 1),   g_tau = -T gT,
 *   dL/dsigma_t += g_tau D,   dL/dc_ch += g_ch (1 - T),   dL/db += g T,
 *   dL/drho_cell += g_tau sigma_t ds w_i,cell  (w: sample i's trilinear weights).
 * The last is a scatter. For bits that do not depend on the thread count,
 * the image's rows are split into a fixed number of blocks (a function of
 * the sizes only), each block accumulates serially into its own grid, and
 * the grids are summed cell by cell in block order; the sigma_t and colour
 * sums are kept per block the same way. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dsim/volume.h"
#include "base/internal.h"
#include "render/camera_frame.h"

/* Most scatter grids kept for the backward (blocks of rows), and the most
 * doubles all of them may take together. */
#define DSV_MAX_BLOCKS 16
#define DSV_BLOCK_DOUBLES (1 << 22)
/* Below this many pixels a render runs on one thread. */
#define DSV_PAR_MIN 256

struct dsVolume {
  dsVolumeDef def;
  dsrFrame fr;
  int ncell, npix;
  double* path;            /* per pixel: D = sum rho_i ds of the last render (npix) */
  double* zstop;           /* per pixel: the depth where the march stopped (npix) */
  const dsReal* bg;        /* the last render's background (NULL: def.background) */
  int nblock;              /* row blocks of the backward */
  double* gblk;            /* per block: a density gradient grid (nblock x ncell) */
  double bsum[DSV_MAX_BLOCKS][4]; /* per block: dL/dsigma_t, dL/dcolor */
  int rendered;
  dsErrBuf err;
};

dsVolumeDef ds_volume_default_def(void) {
  dsVolumeDef d;
  memset(&d, 0, sizeof d);
  d.n[0] = d.n[1] = d.n[2] = 32;
  d.dx = 1.0 / 32;
  d.sigma_t = 10;
  d.color[0] = d.color[1] = d.color[2] = 0.95;
  d.step = 0.5;
  d.width = d.height = 64;
  d.camera = ds_default_camera();
  ds_camera_look_at(&d.camera, 3.5, 20, 0);
  for (int a = 0; a < 3; a++) {
    d.camera.eye[a] += (dsReal)0.5;
    d.camera.at[a] = (dsReal)0.5;
  }
  d.camera.znear = (dsReal)0.1;
  d.camera.zfar = 100;
  return d;
}

#define BAD(code, ...) return ds__seterr(eb, code, __VA_ARGS__)

static int check_def(const dsVolumeDef* d, dsErrBuf* eb) {
  long long nc = 1;
  dsrFrame fr;
  if (!d) BAD(DS_ERR_INVALID, "volume: def: expected a definition, got NULL");
  for (int a = 0; a < 3; a++) {
    if (d->n[a] < 1) BAD(DS_ERR_INVALID, "volume: n[%d]: expected >= 1, got %d", a, d->n[a]);
    nc *= d->n[a];
  }
  if (nc > DS_VOLUME_MAX_CELLS)
    BAD(DS_ERR_RANGE, "volume: n: expected at most %d cells, got %lld", DS_VOLUME_MAX_CELLS, nc);
  if (!(d->dx > 0) || !isfinite(d->dx)) BAD(DS_ERR_INVALID, "volume: dx: expected a finite number > 0, got %g", d->dx);
  for (int a = 0; a < 3; a++)
    if (!isfinite(d->origin[a]))
      BAD(DS_ERR_INVALID, "volume: origin[%d]: expected a finite number, got %g", a, d->origin[a]);
  if (!(d->sigma_t >= 0) || !isfinite(d->sigma_t))
    BAD(DS_ERR_INVALID, "volume: sigma_t: expected a finite number >= 0, got %g", d->sigma_t);
  for (int a = 0; a < 3; a++)
    if (!(d->color[a] >= 0) || !isfinite(d->color[a]))
      BAD(DS_ERR_INVALID, "volume: color[%d]: expected a finite number >= 0, got %g", a, d->color[a]);
  if (!(d->step > 0 && d->step <= 4)) BAD(DS_ERR_INVALID, "volume: step: expected a number in (0, 4], got %g", d->step);
  for (int a = 0; a < 4; a++)
    if (!(d->background[a] >= 0 && d->background[a] <= 1))
      BAD(DS_ERR_INVALID, "volume: background[%d]: expected a number in [0, 1], got %g", a, d->background[a]);
  if (d->width < 1 || d->height < 1)
    BAD(DS_ERR_INVALID, "volume: width, height: expected >= 1, got %d x %d", d->width, d->height);
  if (d->width > DS_VOLUME_MAX_SIDE || d->height > DS_VOLUME_MAX_SIDE)
    BAD(DS_ERR_RANGE, "volume: width, height: expected at most %d, got %d x %d", DS_VOLUME_MAX_SIDE, d->width,
        d->height);
  if (ds__camera_frame(&d->camera, d->width, d->height, &fr) != DS_OK)
    BAD(DS_ERR_INVALID, "volume: camera: expected eye != at, up not parallel to the view, fov_deg in (0, 180) "
                        "(or fx, fy > 0), ortho_height > 0 and 0 < znear < zfar");
  return DS_OK;
}

int ds_volume_check(const dsVolumeDef* def, char* err, size_t errlen) {
  dsErrBuf eb;
  ds__clearerr(&eb);
  int rc = check_def(def, &eb);
  if (err && errlen) snprintf(err, errlen, "%s", ds__errmsg(&eb));
  return rc;
}

void ds_volume_destroy(dsVolume* v) {
  if (!v) return;
  ds__free(v->path);
  ds__free(v->zstop);
  ds__free(v->gblk);
  ds__free(v);
}

int ds_volume_create(dsVolume** out, const dsVolumeDef* def, char* err, size_t errlen) {
  int rc;
  if (!out) return DS_ERR_INVALID;
  *out = NULL;
  if ((rc = ds_volume_check(def, err, errlen)) != DS_OK) return rc;
  dsVolume* v = ds__calloc(1, sizeof *v);
  if (!v) return DS_ERR_NOMEM;
  v->def = *def;
  ds__camera_frame(&def->camera, def->width, def->height, &v->fr);
  v->ncell = def->n[0] * def->n[1] * def->n[2];
  v->npix = def->width * def->height;
  /* blocks: as many as the rows and the memory bound allow; never a
   * function of the thread count */
  int nb = DSV_BLOCK_DOUBLES / v->ncell;
  nb = nb < 1 ? 1 : nb;
  nb = nb > DSV_MAX_BLOCKS ? DSV_MAX_BLOCKS : nb;
  v->nblock = nb > def->height ? def->height : nb;
  v->path = ds__malloc(sizeof(double) * (size_t)v->npix);
  v->zstop = ds__malloc(sizeof(double) * (size_t)v->npix);
  v->gblk = ds__malloc(sizeof(double) * (size_t)v->nblock * (size_t)v->ncell);
  if (!v->path || !v->zstop || !v->gblk) {
    ds_volume_destroy(v);
    if (err && errlen) snprintf(err, errlen, "volume: out of memory");
    return DS_ERR_NOMEM;
  }
  *out = v;
  return DS_OK;
}

const dsVolumeDef* ds_volume_def(const dsVolume* v) { return v ? &v->def : NULL; }

const char* ds_volume_last_error(const dsVolume* v) { return v ? ds__errmsg(&v->err) : ""; }

int ds_volume_set_def(dsVolume* v, const dsVolumeDef* def) {
  if (!v || !def) return DS_ERR_INVALID;
  dsErrBuf* eb = &v->err;
  ds__clearerr(eb);
  int rc = check_def(def, eb);
  if (rc) return rc;
  for (int a = 0; a < 3; a++)
    if (def->n[a] != v->def.n[a])
      BAD(DS_ERR_INVALID, "volume: n[%d]: expected the renderer's %d, got %d", a, v->def.n[a], def->n[a]);
  if (def->width != v->def.width || def->height != v->def.height)
    BAD(DS_ERR_INVALID, "volume: width, height: expected the renderer's %d x %d, got %d x %d", v->def.width,
        v->def.height, def->width, def->height);
  v->def = *def;
  ds__camera_frame(&def->camera, def->width, def->height, &v->fr);
  v->rendered = 0;
  return DS_OK;
}

/* ---- rays ------------------------------------------------------------------- */
typedef struct Ray {
  double o[3], d[3]; /* p(Z) = o + Z d */
  double z0, dz;     /* sample i at Z = z0 + (i + 1/2) dz */
  double ds;         /* world length per sample, m */
  int n;             /* samples; 0: the ray misses the box */
} Ray;

static void pixel_ray(const dsVolume* v, int pix, Ray* r) {
  const dsrFrame* fr = &v->fr;
  const int W = v->def.width, H = v->def.height, c = pix % W, row = pix / W;
  double x = (double)(2 * c + 1 - W) / W, y = (double)(H - 1 - 2 * row) / H;
  if (fr->pp) x -= fr->ox, y -= fr->oy;
  const double u = x / fr->ax, w = y / fr->ay;
  for (int a = 0; a < 3; a++) {
    if (fr->ortho) {
      r->o[a] = fr->eye[a] + fr->xc[a] * u + fr->yc[a] * w;
      r->d[a] = fr->zc[a];
    } else {
      r->o[a] = fr->eye[a];
      r->d[a] = fr->zc[a] + fr->xc[a] * u + fr->yc[a] * w;
    }
  }
}

/* Cuts the ray to [znear, zstop] and the box; r->n = 0 when nothing is left. */
static void ray_clip(const dsVolume* v, double zstop, Ray* r) {
  const dsVolumeDef* df = &v->def;
  double za = df->camera.znear, zb = zstop;
  r->n = 0;
  for (int a = 0; a < 3; a++) {
    double lo = df->origin[a], hi = df->origin[a] + df->n[a] * df->dx;
    if (r->d[a] == 0) {
      if (r->o[a] < lo || r->o[a] > hi) return;
      continue;
    }
    double t0 = (lo - r->o[a]) / r->d[a], t1 = (hi - r->o[a]) / r->d[a];
    if (t0 > t1) {
      double t = t0;
      t0 = t1;
      t1 = t;
    }
    za = t0 > za ? t0 : za;
    zb = t1 < zb ? t1 : zb;
  }
  if (!(zb > za)) return;
  double len = sqrt(r->d[0] * r->d[0] + r->d[1] * r->d[1] + r->d[2] * r->d[2]);
  double s = (zb - za) * len, n = ceil(s / (df->step * df->dx));
  r->n = n < 1 ? 1 : (int)n;
  r->z0 = za;
  r->dz = (zb - za) / r->n;
  r->ds = s / r->n;
}

/* Trilinear stencil at sample i: 8 cells and weights (a flat axis, n = 1,
 * repeats its cell with weight 0). */
static inline void stencil(const dsVolume* v, const Ray* r, int i, int cell[8], double wt[8]) {
  const dsVolumeDef* df = &v->def;
  const double Z = r->z0 + (i + 0.5) * r->dz, inv = 1.0 / df->dx;
  int i0[3], st[3];
  double f[3];
  int stride = 1;
  for (int a = 0; a < 3; a++) {
    const int n = df->n[a];
    double u = (r->o[a] + Z * r->d[a] - df->origin[a]) * inv - 0.5;
    u = u < 0 ? 0 : (u > n - 1 ? n - 1 : u);
    int k = (int)u;
    if (k > n - 2) k = n >= 2 ? n - 2 : 0;
    i0[a] = k;
    f[a] = u - k;
    st[a] = n > 1 ? stride : 0;
    stride *= n;
  }
  const int base = i0[0] + df->n[0] * (i0[1] + df->n[1] * i0[2]);
  for (int k = 0; k < 8; k++) {
    const int bx = k & 1, by = (k >> 1) & 1, bz = k >> 2;
    cell[k] = base + bx * st[0] + by * st[1] + bz * st[2];
    wt[k] = (bx ? f[0] : 1 - f[0]) * (by ? f[1] : 1 - f[1]) * (bz ? f[2] : 1 - f[2]);
  }
}

/* ---- forward and backward ------------------------------------------------------ */
static double march_fwd(const dsVolume* v, const Ray* r, const double* density) {
  double sum = 0;
  int cell[8];
  double wt[8];
  for (int i = 0; i < r->n; i++) {
    stencil(v, r, i, cell, wt);
    double rho = 0;
    for (int k = 0; k < 8; k++) rho += wt[k] * density[cell[k]];
    sum += rho;
  }
  return sum * r->ds;
}

/* grid[cell] += g_path * ds * w over the samples: the adjoint of march_fwd */
static void march_bwd(const dsVolume* v, const Ray* r, double g_path, double* grid) {
  const double g = g_path * r->ds;
  int cell[8];
  double wt[8];
  for (int i = 0; i < r->n; i++) {
    stencil(v, r, i, cell, wt);
    for (int k = 0; k < 8; k++) grid[cell[k]] += g * wt[k];
  }
}

int ds_volume_render(dsVolume* v, const double* density, const dsReal* background, const dsReal* depth,
                     dsReal* image) {
  if (!v) return DS_ERR_INVALID;
  dsErrBuf* eb = &v->err;
  ds__clearerr(eb);
  v->rendered = 0;
  if (!density || !image) BAD(DS_ERR_INVALID, "volume: render: density and image must not be NULL");
  const dsVolumeDef* df = &v->def;
  const double zfar = df->camera.zfar;
  if (depth)
    for (int p = 0; p < v->npix; p++)
      if (!(depth[p] >= 0))
        BAD(DS_ERR_INVALID, "volume: depth[%d] (row %d, column %d): expected a number >= 0 or +inf, got %g", p,
            p / df->width, p % df->width, (double)depth[p]);
  const double sig = df->sigma_t;
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 16) if (v->npix >= DSV_PAR_MIN)
#endif
  for (int p = 0; p < v->npix; p++) {
    Ray r;
    double zs = depth && (double)depth[p] < zfar ? (double)depth[p] : zfar;
    pixel_ray(v, p, &r);
    ray_clip(v, zs, &r);
    const double D = r.n ? march_fwd(v, &r, density) : 0.0, T = exp(-sig * D);
    v->path[p] = D;
    v->zstop[p] = zs;
    dsReal* px = image + 4 * (size_t)p;
    for (int ch = 0; ch < 4; ch++) {
      const double b = background ? (double)background[4 * (size_t)p + ch] : df->background[ch];
      const double c = ch < 3 ? df->color[ch] : 1.0;
      px[ch] = (dsReal)(c * (1 - T) + T * b);
    }
  }
  v->bg = background;
  v->rendered = 1;
  return DS_OK;
}

int ds_volume_backward(dsVolume* v, const dsReal* d_image, double* d_density, double* d_sigma_t, double* d_color,
                       dsReal* d_background) {
  if (!v) return DS_ERR_INVALID;
  dsErrBuf* eb = &v->err;
  if (!d_image) BAD(DS_ERR_INVALID, "volume: backward: d_image must not be NULL");
  if (!v->rendered) BAD(DS_ERR_STATE, "volume: backward: no render since the renderer was created or changed");
  ds__clearerr(eb);
  const dsVolumeDef* df = &v->def;
  const int nb = v->nblock, H = df->height, W = df->width, nc = v->ncell;
  const double sig = df->sigma_t;
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 1) if (nb > 1)
#endif
  for (int b = 0; b < nb; b++) {
    double* grid = v->gblk + (size_t)b * (size_t)nc;
    double acc[4] = {0, 0, 0, 0};
    if (d_density) memset(grid, 0, sizeof(double) * (size_t)nc);
    const int p0 = (int)((long long)H * b / nb) * W, p1 = (int)((long long)H * (b + 1) / nb) * W;
    for (int p = p0; p < p1; p++) {
      const dsReal* g = d_image + 4 * (size_t)p;
      const double D = v->path[p], T = exp(-sig * D);
      double gT = 0;
      for (int ch = 0; ch < 4; ch++) {
        const double bgc = v->bg ? (double)v->bg[4 * (size_t)p + ch] : df->background[ch];
        const double c = ch < 3 ? df->color[ch] : 1.0;
        gT += (double)g[ch] * (bgc - c);
        if (ch < 3) acc[1 + ch] += (double)g[ch] * (1 - T);
        if (d_background) d_background[4 * (size_t)p + ch] += (dsReal)((double)g[ch] * T);
      }
      const double g_tau = -T * gT;
      acc[0] += g_tau * D;
      if (d_density && g_tau != 0 && sig != 0) {
        Ray r;
        pixel_ray(v, p, &r);
        ray_clip(v, v->zstop[p], &r);
        if (r.n) march_bwd(v, &r, g_tau * sig, grid);
      }
    }
    for (int k = 0; k < 4; k++) v->bsum[b][k] = acc[k];
  }
  if (d_density) {
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (nc >= 4096 && nb > 1)
#endif
    for (int c = 0; c < nc; c++) {
      double s = 0;
      for (int b = 0; b < nb; b++) s += v->gblk[(size_t)b * (size_t)nc + c];
      d_density[c] += s;
    }
  }
  double tot[4] = {0, 0, 0, 0};
  for (int b = 0; b < nb; b++)
    for (int k = 0; k < 4; k++) tot[k] += v->bsum[b][k];
  if (d_sigma_t) *d_sigma_t += tot[0];
  if (d_color)
    for (int ch = 0; ch < 3; ch++) d_color[ch] += tot[1 + ch];
  return DS_OK;
}

/* ---- hard mesh depth ------------------------------------------------------------ */
int ds_volume_mesh_depth(const dsVolume* v, const dsRasterMesh* mesh, dsReal* depth) {
  if (!v || !mesh || !depth || (mesh->nface > 0 && (!mesh->faces || !mesh->verts))) return DS_ERR_INVALID;
  for (int f = 0; f < 3 * mesh->nface; f++)
    if (mesh->faces[f] < 0 || mesh->faces[f] >= mesh->nvert) return DS_ERR_MESH;
  const double znear = v->def.camera.znear, zfar = v->def.camera.zfar;
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 16) if (v->npix >= DSV_PAR_MIN)
#endif
  for (int p = 0; p < v->npix; p++) {
    Ray r;
    pixel_ray(v, p, &r);
    double best = INFINITY;
    /* Moller-Trumbore on p(Z) = o + Z d: o + Z d = v0 + u e1 + w e2 */
    for (int f = 0; f < mesh->nface; f++) {
      const dsReal* q[3];
      double e1[3], e2[3], pv[3], tv[3], qv[3];
      for (int k = 0; k < 3; k++) q[k] = mesh->verts + 3 * (size_t)mesh->faces[3 * f + k];
      for (int a = 0; a < 3; a++) {
        e1[a] = (double)q[1][a] - q[0][a];
        e2[a] = (double)q[2][a] - q[0][a];
        tv[a] = r.o[a] - q[0][a];
      }
      pv[0] = r.d[1] * e2[2] - r.d[2] * e2[1];
      pv[1] = r.d[2] * e2[0] - r.d[0] * e2[2];
      pv[2] = r.d[0] * e2[1] - r.d[1] * e2[0];
      const double det = e1[0] * pv[0] + e1[1] * pv[1] + e1[2] * pv[2];
      if (det == 0 || !isfinite(det)) continue;
      const double u = (tv[0] * pv[0] + tv[1] * pv[1] + tv[2] * pv[2]) / det;
      if (u < 0 || u > 1) continue;
      qv[0] = tv[1] * e1[2] - tv[2] * e1[1];
      qv[1] = tv[2] * e1[0] - tv[0] * e1[2];
      qv[2] = tv[0] * e1[1] - tv[1] * e1[0];
      const double w = (r.d[0] * qv[0] + r.d[1] * qv[1] + r.d[2] * qv[2]) / det;
      if (w < 0 || u + w > 1) continue;
      const double Z = (e2[0] * qv[0] + e2[1] * qv[1] + e2[2] * qv[2]) / det;
      if (Z >= znear && Z <= zfar && Z < best) best = Z;
    }
    depth[p] = (dsReal)best;
  }
  return DS_OK;
}

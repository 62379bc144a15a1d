/* The camera simulator (dsim/raster.h, dsCamSimDef): footage made by another
 * pipeline than the soft rasterizer that identifies it. Forward only.
 *
 * Samples. Output pixel (col, row) of a W x H image owns the k x k samples
 * of the internal kW x kH grid; internal sample (i, j) sits at NDC
 *   x = (2 i + 1 - kW)/(kW),  y = (kH - 1 - 2 j)/(kH)
 * (the soft rasterizer's pixel centres). A projected vertex at NDC (x, y)
 * has sample coordinates px = (x + 1) kW/2 - 1/2, py = (1 - y) kH/2 - 1/2, so
 * sample (i, j) is the point (i, j) there.
 *
 * Coverage and depth. With the edge function E(a, b, p) = (b - a) x (p - a)
 * and A = E(v0, v1, v2), a sample p is inside when the barycentrics
 * b0 = E(v1, v2, p)/A, b1 = E(v2, v0, p)/A, b2 = E(v0, v1, p)/A are all
 * >= 0 (either winding). Its depth: 1/Z = sum b_i / Z_i under perspective
 * (screen barycentrics interpolate 1/Z), Z = sum b_i Z_i orthographic. The
 * nearest face with znear <= Z <= zfar wins (strictly nearer: on ties the
 * first face in index order keeps the sample).
 *
 * Then box mean, blur, noise: see the header. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dsim/raster.h"
#include "base/internal.h"
#include "base/rng.h"

struct dsCamSim {
  dsCamSimDef def;
  int max_faces;
  int Wi, Hi;      /* internal sample grid, k W x k H */
  double* zbuf;    /* Wi x Hi: depth of the nearest face (INFINITY: none) */
  int* fbuf;       /* Wi x Hi: its face */
  double* fcol;    /* max_faces x 3: shaded face colours */
  dsReal* bg;      /* H x W x 4: the background, unblurred */
  dsReal* bg_seen; /* H x W x 4: blurred (ds_camsim_background) */
  dsReal* tmp;     /* H x W x 4: the blur's first pass */
};

dsCamSimDef ds_default_camsim_def(void) {
  dsCamSimDef d;
  memset(&d, 0, sizeof d);
  d.width = 64;
  d.height = 64;
  d.supersample = 4;
  d.camera = ds_default_camera();
  /* from above, the left and the camera's side: unlike the identifier's
     headlight, faces are lit by their angle to a fixed world direction */
  d.light_dir[0] = (dsReal)-0.4;
  d.light_dir[1] = 1;
  d.light_dir[2] = (dsReal)-0.5;
  d.light_color[0] = 1;
  d.light_color[1] = (dsReal)0.95;
  d.light_color[2] = (dsReal)0.85;
  d.ambient = (dsReal)0.3;
  d.diffuse = (dsReal)0.7;
  d.specular = (dsReal)0.2;
  d.shininess = 16;
  d.clutter_seed = 1;
  return d;
}

void ds_camsim_destroy(dsCamSim* c) {
  if (!c) return;
  void* bufs[] = {c->zbuf, c->fbuf, c->fcol, c->bg, c->bg_seen, c->tmp};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) ds__free(bufs[i]);
  ds__free(c);
}

const dsReal* ds_camsim_background(const dsCamSim* c) { return c ? c->bg_seen : NULL; }

static int finite_in(double v, double lo, double hi) { return isfinite(v) && v >= lo && v <= hi; }

static int check_def(const dsCamSimDef* d, int max_faces, char* err, size_t errlen) {
  const char* what = NULL;
  char want[96] = "";
  if (d->width < 1 || d->height < 1 || d->width > 16384 || d->height > 16384)
    what = "width/height", snprintf(want, sizeof want, "1 to 16384 pixels, got %d x %d", d->width, d->height);
  else if (d->supersample < 1 || d->supersample > 16)
    what = "supersample", snprintf(want, sizeof want, "1 to 16, got %d", d->supersample);
  else if (max_faces < 0)
    what = "max_faces", snprintf(want, sizeof want, ">= 0, got %d", max_faces);
  else if (!(fabs((double)d->light_dir[0]) + fabs((double)d->light_dir[1]) + fabs((double)d->light_dir[2]) > 0) ||
           !isfinite((double)d->light_dir[0] + d->light_dir[1] + d->light_dir[2]))
    what = "light_dir", snprintf(want, sizeof want, "a finite direction, not 0");
  else if (!finite_in(d->ambient, 0, 1e6) || !finite_in(d->diffuse, 0, 1e6) || !finite_in(d->specular, 0, 1e6))
    what = "ambient/diffuse/specular", snprintf(want, sizeof want, "finite numbers >= 0");
  else if (!finite_in(d->shininess, 0, 1e6))
    what = "shininess", snprintf(want, sizeof want, "a finite number >= 0, got %g", (double)d->shininess);
  else if (!finite_in(d->blur, 0, DS_CAMSIM_MAX_BLUR))
    what = "blur", snprintf(want, sizeof want, "0 to %d pixels, got %g", DS_CAMSIM_MAX_BLUR, (double)d->blur);
  else if (!finite_in(d->noise, 0, 1))
    what = "noise", snprintf(want, sizeof want, "0 to 1, got %g", (double)d->noise);
  else if (d->clutter < 0 || d->clutter > 10000)
    what = "clutter", snprintf(want, sizeof want, "0 to 10000 shapes, got %d", d->clutter);
  for (int k = 0; k < 3 && !what; k++)
    if (!finite_in(d->light_color[k], 0, 1e6) || !finite_in(d->background[k], 0, 1))
      what = "light_color/background", snprintf(want, sizeof want, "light_color >= 0, background in [0, 1]");
  if (what) return ds__puterr(err, errlen, DS_ERR_INVALID, "camera simulator: %s: expected %s", what, want);
  /* the camera as the soft rasterizer checks it */
  dsRenderSettings s = ds_default_render_settings();
  s.width = d->width;
  s.height = d->height;
  s.camera = d->camera;
  char why[256];
  if (ds_render_settings_check(&s, why, sizeof why))
    return ds__puterr(err, errlen, DS_ERR_INVALID, "camera simulator: %s", why);
  return 0;
}

/* Background: `clutter` shapes from the seeded stream, each pixel blended by
 * the fraction of its k x k samples inside the shape. */
static void draw_background(dsCamSim* c) {
  const dsCamSimDef* d = &c->def;
  const int W = d->width, H = d->height, k = d->supersample;
  for (size_t p = 0; p < (size_t)W * H; p++) {
    for (int q = 0; q < 3; q++) c->bg[4 * p + q] = d->background[q];
    c->bg[4 * p + 3] = 1;
  }
  uint64_t st = d->clutter_seed;
  for (int n = 0; n < d->clutter; n++) {
    const int disc = n % 2;
    const double cx = W * ds__splitmix64_uniform(&st), cy = H * ds__splitmix64_uniform(&st);
    const double rx = W * (0.025 + 0.1 * ds__splitmix64_uniform(&st));
    const double ry = disc ? rx : W * (0.025 + 0.1 * ds__splitmix64_uniform(&st));
    double col[3];
    for (int q = 0; q < 3; q++) col[q] = 0.1 + 0.8 * ds__splitmix64_uniform(&st);
    const int x0 = (int)fmax(0, floor(cx - rx)), x1 = (int)fmin(W - 1, ceil(cx + rx));
    const int y0 = (int)fmax(0, floor(cy - ry)), y1 = (int)fmin(H - 1, ceil(cy + ry));
    for (int y = y0; y <= y1; y++)
      for (int x = x0; x <= x1; x++) {
        int in = 0;
        for (int j = 0; j < k; j++)
          for (int i = 0; i < k; i++) {
            const double sx = x + (i + 0.5) / k - cx, sy = y + (j + 0.5) / k - cy;
            in += disc ? sx * sx + sy * sy <= rx * rx : fabs(sx) <= rx && fabs(sy) <= ry;
          }
        const double a = (double)in / (k * k);
        dsReal* px = c->bg + 4 * ((size_t)y * W + x);
        for (int q = 0; q < 3; q++) px[q] = (dsReal)((1 - a) * px[q] + a * col[q]);
      }
  }
}

/* Separable Gaussian blur of the RGB of img (in place), weights
 * exp(-t^2 / (2 sigma^2)) for |t| <= ceil(3 sigma), renormalised over the
 * taps inside the image. */
static void blur(dsCamSim* c, dsReal* img) {
  const double sg = c->def.blur;
  if (!(sg > 0)) return;
  const int W = c->def.width, H = c->def.height, r = (int)ceil(3 * sg);
  double w[3 * DS_CAMSIM_MAX_BLUR + 1];
  for (int t = 0; t <= r; t++) w[t] = exp(-0.5 * t * t / (sg * sg));
  for (int pass = 0; pass < 2; pass++) {
    const dsReal* src = pass ? c->tmp : img;
    dsReal* dst = pass ? img : c->tmp;
    for (int y = 0; y < H; y++)
      for (int x = 0; x < W; x++) {
        double acc[3] = {0, 0, 0}, ws = 0;
        for (int t = -r; t <= r; t++) {
          const int xx = pass ? x : x + t, yy = pass ? y + t : y;
          if (xx < 0 || xx >= W || yy < 0 || yy >= H) continue;
          const dsReal* s = src + 4 * ((size_t)yy * W + xx);
          const double wt = w[t < 0 ? -t : t];
          for (int q = 0; q < 3; q++) acc[q] += wt * s[q];
          ws += wt;
        }
        dsReal* o = dst + 4 * ((size_t)y * W + x);
        for (int q = 0; q < 3; q++) o[q] = (dsReal)(acc[q] / ws);
        o[3] = 1;
      }
  }
}

int ds_camsim_create(dsCamSim** out, const dsCamSimDef* def, int max_faces, char* err, size_t errlen) {
  if (err && errlen) err[0] = '\0';
  if (!out || !def) return DS_ERR_INVALID;
  *out = NULL;
  int rc = check_def(def, max_faces, err, errlen);
  if (rc) return rc;
  dsCamSim* c = (dsCamSim*)ds__calloc(1, sizeof *c);
  if (!c) return DS_ERR_NOMEM;
  c->def = *def;
  c->max_faces = max_faces;
  c->Wi = def->width * def->supersample;
  c->Hi = def->height * def->supersample;
  const size_t ns = (size_t)c->Wi * c->Hi, npix = (size_t)def->width * def->height;
  c->zbuf = (double*)ds__calloc(ns, sizeof(double));
  c->fbuf = (int*)ds__calloc(ns, sizeof(int));
  c->fcol = (double*)ds__calloc(3 * (size_t)(max_faces > 0 ? max_faces : 1), sizeof(double));
  c->bg = (dsReal*)ds__calloc(4 * npix, sizeof(dsReal));
  c->bg_seen = (dsReal*)ds__calloc(4 * npix, sizeof(dsReal));
  c->tmp = (dsReal*)ds__calloc(4 * npix, sizeof(dsReal));
  if (!c->zbuf || !c->fbuf || !c->fcol || !c->bg || !c->bg_seen || !c->tmp) {
    ds_camsim_destroy(c);
    return ds__puterr(err, errlen, DS_ERR_NOMEM, "camera simulator: out of memory");
  }
  draw_background(c);
  memcpy(c->bg_seen, c->bg, 4 * npix * sizeof(dsReal));
  blur(c, c->bg_seen);
  *out = c;
  return 0;
}

static void sub3(double* r, const double* a, const double* b) {
  for (int q = 0; q < 3; q++) r[q] = a[q] - b[q];
}
static double dot3(const double* a, const double* b) { return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]; }
static int unit3(double* a) {
  const double n = sqrt(dot3(a, a));
  if (!(n > 0)) return 0;
  for (int q = 0; q < 3; q++) a[q] /= n;
  return 1;
}

/* Face f's colour (header: Lambert + Blinn-Phong, flat) under intensity light. */
static void shade_face(const dsCamSim* c, const dsRasterMesh* m, int f, const double* P, double light, double* out) {
  const dsCamSimDef* d = &c->def;
  double e1[3], e2[3], n[3], ctr[3], v[3], l[3], h[3], base[3] = {0, 0, 0};
  sub3(e1, P + 3, P);
  sub3(e2, P + 6, P);
  n[0] = e1[1] * e2[2] - e1[2] * e2[1];
  n[1] = e1[2] * e2[0] - e1[0] * e2[2];
  n[2] = e1[0] * e2[1] - e1[1] * e2[0];
  for (int q = 0; q < 3; q++) {
    ctr[q] = (P[q] + P[3 + q] + P[6 + q]) / 3;
    l[q] = d->light_dir[q];
    v[q] = c->def.camera.orthographic ? (double)d->camera.eye[q] - d->camera.at[q] : (double)d->camera.eye[q] - ctr[q];
  }
  if (m->color_mode == DS_COLOR_VERTEX) {
    for (int i = 0; i < 3; i++)
      for (int q = 0; q < 3; q++) base[q] += m->colors[3 * m->faces[3 * f + i] + q] / 3.0;
  } else {
    for (int q = 0; q < 3; q++) base[q] = m->colors[3 * f + q];
  }
  const int ok = unit3(n) && unit3(v);
  unit3(l);
  if (ok && dot3(n, v) < 0)
    for (int q = 0; q < 3; q++) n[q] = -n[q]; /* double-sided: the side the eye sees */
  const double nl = ok ? fmax(0, dot3(n, l)) : 0;
  double spec = 0;
  for (int q = 0; q < 3; q++) h[q] = l[q] + v[q];
  if (nl > 0 && unit3(h)) spec = d->specular * pow(fmax(0, dot3(n, h)), d->shininess);
  for (int q = 0; q < 3; q++) {
    const double col = light * d->light_color[q] * (base[q] * (d->ambient + d->diffuse * nl) + spec);
    out[q] = fmin(1, fmax(0, col));
  }
}

/* Face f into the z-buffer: its projected triangle's samples where it is the
 * nearest so far. 0, or an error for an out-of-range index or a NaN vertex. */
static int raster_face(dsCamSim* c, const dsRasterMesh* m, int f, double light) {
  const dsCamSimDef* d = &c->def;
  double P[9], sx[3], sy[3], Z[3];
  for (int i = 0; i < 3; i++) {
    const int vi = m->faces[3 * f + i];
    if (vi < 0 || vi >= m->nvert) return DS_ERR_MESH;
    dsReal ndc[3];
    for (int q = 0; q < 3; q++) {
      P[3 * i + q] = m->verts[3 * vi + q];
      if (!isfinite(P[3 * i + q])) return DS_ERR_DIVERGED;
    }
    if (ds_camera_project(&d->camera, d->width, d->height, m->verts + 3 * vi, ndc)) return 0; /* behind the eye */
    if (!(ndc[2] >= d->camera.znear)) return 0; /* culled, as the soft rasterizer does */
    sx[i] = (ndc[0] + 1) * c->Wi / 2 - 0.5;
    sy[i] = (1 - ndc[1]) * c->Hi / 2 - 0.5;
    Z[i] = ndc[2];
  }
  const double A = (sx[1] - sx[0]) * (sy[2] - sy[0]) - (sy[1] - sy[0]) * (sx[2] - sx[0]);
  if (!(fabs(A) > 1e-12)) return 0; /* seen edge-on: covers no sample */
  const int i0 = (int)fmax(0, ceil(fmin(sx[0], fmin(sx[1], sx[2])))),
            i1 = (int)fmin(c->Wi - 1, floor(fmax(sx[0], fmax(sx[1], sx[2]))));
  const int j0 = (int)fmax(0, ceil(fmin(sy[0], fmin(sy[1], sy[2])))),
            j1 = (int)fmin(c->Hi - 1, floor(fmax(sy[0], fmax(sy[1], sy[2]))));
  int shaded = 0;
  for (int j = j0; j <= j1; j++)
    for (int i = i0; i <= i1; i++) {
      double b[3];
      for (int e = 0; e < 3; e++) {
        const int a = (e + 1) % 3, z = (e + 2) % 3;
        b[e] = ((sx[z] - sx[a]) * (j - sy[a]) - (sy[z] - sy[a]) * (i - sx[a])) / A;
      }
      if (b[0] < 0 || b[1] < 0 || b[2] < 0) continue;
      const double z = d->camera.orthographic ? b[0] * Z[0] + b[1] * Z[1] + b[2] * Z[2]
                                              : 1 / (b[0] / Z[0] + b[1] / Z[1] + b[2] / Z[2]);
      const size_t s = (size_t)j * c->Wi + i;
      if (!(z >= d->camera.znear && z <= d->camera.zfar && z < c->zbuf[s])) continue;
      if (!shaded) shade_face(c, m, f, P, light, c->fcol + 3 * (size_t)f), shaded = 1;
      c->zbuf[s] = z;
      c->fbuf[s] = f;
    }
  return 0;
}

/* N(0, 1) of counter n in the stream seed: Box-Muller of two splitmix64
 * draws from a state that depends on (seed, n) only */
static double normal_at(uint64_t seed, uint64_t n) {
  uint64_t st = seed ^ (n * 0xd1b54a32d192ed03ull);
  (void)ds__splitmix64(&st);
  const double u1 = 1 - ds__splitmix64_uniform(&st), u2 = ds__splitmix64_uniform(&st);
  return sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2);
}

int ds_camsim_render(dsCamSim* c, const dsRasterMesh* m, dsReal light, uint64_t noise_seed, dsReal* image) {
  if (!c || !m || !image || !(light >= 0) || m->nface < 0 || m->nface > c->max_faces ||
      (m->nface > 0 && (!m->verts || !m->faces || !m->colors)))
    return DS_ERR_INVALID;
  const dsCamSimDef* d = &c->def;
  const size_t ns = (size_t)c->Wi * c->Hi;
  for (size_t s = 0; s < ns; s++) c->zbuf[s] = INFINITY;
  for (int f = 0; f < m->nface; f++) {
    int rc = raster_face(c, m, f, (double)light);
    if (rc) return rc;
  }
  const int W = d->width, H = d->height, k = d->supersample;
  for (int y = 0; y < H; y++)
    for (int x = 0; x < W; x++) {
      const size_t p = (size_t)y * W + x;
      double acc[3] = {0, 0, 0};
      for (int j = 0; j < k; j++)
        for (int i = 0; i < k; i++) {
          const size_t s = (size_t)(y * k + j) * c->Wi + (size_t)(x * k + i);
          for (int q = 0; q < 3; q++)
            acc[q] += isinf(c->zbuf[s]) ? (double)c->bg[4 * p + q] : c->fcol[3 * (size_t)c->fbuf[s] + q];
        }
      for (int q = 0; q < 3; q++) image[4 * p + q] = (dsReal)(acc[q] / (k * k));
      image[4 * p + 3] = 1;
    }
  blur(c, image);
  if (d->noise > 0)
    for (size_t p = 0; p < (size_t)W * H; p++)
      for (int q = 0; q < 3; q++) {
        const double v = image[4 * p + q] + d->noise * normal_at(noise_seed, 3 * p + (size_t)q);
        image[4 * p + q] = (dsReal)fmin(1, fmax(0, v));
      }
  return 0;
}

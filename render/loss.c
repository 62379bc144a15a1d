/* Image losses on RGBA images (h x w x 4, all four channels) with their
 * gradients: MSE, L1, D-SSIM and a multi-scale (Gaussian pyramid) variant.
 *
 * MSE  = (1/n) sum (a - b)^2                    dL/da = 2 (a - b)/n
 * L1   = (1/n) sum |a - b|                      dL/da = sign(a - b)/n
 * D-SSIM = (1 - (1/n) sum_p s_p)/2 with, per pixel and channel, G the
 *   Gaussian window (normalised over its in-image part near borders):
 *     mx = G a, my = G b, Sxx = G a^2, Syy = G b^2, Sxy = G ab
 *     A1 = 2 mx my + C1, A2 = 2 (Sxy - mx my) + C2
 *     B1 = mx^2 + my^2 + C1, B2 = (Sxx - mx^2) + (Syy - my^2) + C2
 *     s  = A1 A2 / (B1 B2)
 *   ds/dmx  = 2 my (A2 - A1)/(B1 B2) + 2 mx s (1/B2 - 1/B1)
 *   ds/dSxx = -s/B2,  ds/dSxy = 2 A1/(B1 B2)
 *   dL/da = G^T(dL/dmx) + 2 a G^T(dL/dSxx) + b G^T(dL/dSxy)
 * Multi-scale: P_0 = image, P_{l+1} = every other pixel of B P_l, with B the
 *   separable binomial [1 4 6 4 1]/16 normalised at borders;
 *   L = sum_l w_l base(P_l a, P_l b); the gradient runs back down the
 *   pyramid with the transposed operators.
 * Moments term, on the alpha channel a_p of the full-resolution images,
 *   pixel centres (x_p, y_p) in normalised device coordinates, eps = 1 (one
 *   opaque pixel's worth):
 *   m = sum_p a_p + eps,  c = sum_p a_p (x_p, y_p) / m   (likewise m_g, c_g)
 *   r = ln(m/m_g)/2  (the log ratio of the apparent sizes sqrt(m), sqrt(m_g))
 *   L_m = w (|c - c_g|^2 + q r^2)   (q: the size part's relative weight)
 *   dL_m/da_p = w [2 (c - c_g) . ((x_p, y_p) - c) + q r] / m
 *   (eps keeps it smooth and bounded when little or nothing is visible; the
 *   log ratio weighs depth as the centroid weighs sideways motion: under
 *   perspective both change by about their value times dZ/Z).
 * n is the number of values compared (4 w h at that level). All arithmetic
 * is double, in a fixed order (no threads), so results are reproducible.
 */
#include "config.h"

#include <math.h>
#include <string.h>

#include "dsim/raster.h"
#include "base/internal.h"
#include "render/loss_kernel.h"

#define NC 4 /* channels */

static int check_args(const void* a, const void* b, int w, int h, const void* loss) {
  if (!a || !b || !loss || w <= 0 || h <= 0) return DS_ERR_INVALID;
  return DS_OK;
}

int ds_loss_mse(const dsReal* img, const dsReal* goal, int w, int h, dsReal* loss, dsReal* grad) {
  size_t n, i;
  double acc = 0, sc;
  if (check_args(img, goal, w, h, loss)) return DS_ERR_INVALID;
  n = (size_t)w * h * NC;
  sc = 2.0 / (double)n;
  for (i = 0; i < n; i++) {
    double d = (double)img[i] - (double)goal[i];
    acc += d * d;
    if (grad) grad[i] = (dsReal)(sc * d);
  }
  *loss = (dsReal)(acc / (double)n);
  return DS_OK;
}

int ds_loss_l1(const dsReal* img, const dsReal* goal, int w, int h, dsReal* loss, dsReal* grad) {
  size_t n, i;
  double acc = 0, sc;
  if (check_args(img, goal, w, h, loss)) return DS_ERR_INVALID;
  n = (size_t)w * h * NC;
  sc = 1.0 / (double)n;
  for (i = 0; i < n; i++) {
    double d = (double)img[i] - (double)goal[i];
    acc += fabs(d);
    if (grad) grad[i] = (dsReal)(d > 0 ? sc : d < 0 ? -sc : 0.0);
  }
  *loss = (dsReal)(acc / (double)n);
  return DS_OK;
}

dsLossDef ds_default_loss_def(void) {
  dsLossDef d;
  int i;
  memset(&d, 0, sizeof d);
  d.kind = DS_LOSS_MSE;
  d.levels = 1;
  for (i = 0; i < DS_LOSS_MAX_LEVELS; i++) d.weights[i] = 1;
  d.ssim_sigma = (dsReal)1.5;
  d.ssim_radius = 5;
  d.ssim_c1 = (dsReal)1e-4;
  d.ssim_c2 = (dsReal)9e-4;
  d.moments_size = 1;
  return d;
}

/* ---- separable filters with border-normalised weights ------------------------
 * 1-D filter of radius R and weights k[0..R] (symmetric): at position i,
 * out_i = sum_{|j| <= R, 0 <= i+j < n} k[|j|] in_{i+j} / norm_i. Applied along
 * x or y to all NC channels. The transpose is written as a gather too,
 * (F^T g)_j = sum_i k[|j - i|] g_i / norm_i, so rows run in parallel and every
 * output is summed in a fixed order (bitwise the same for any thread count). */
#define MAXR DSR_MAXR

/* out = F in along axis (0: x, 1: y); out must not alias in */
static void filt(const double* in, double* out, int w, int h, const double* k, int R, int axis) {
  const double inv_full = 1.0 / dsr_norm_at(k, R, R, 2 * R + 1);
  int y;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if ((size_t)w * h >= 16384)
#endif
  for (y = 0; y < h; y++)
    for (int x = 0; x < w; x++) dsr_filt_px(in, out, w, h, k, R, axis, inv_full, x, y);
}

/* out += F^T g along axis (out must not alias g) */
static void filt_T(const double* g, double* out, int w, int h, const double* k, int R, int axis) {
  const double inv_full = 1.0 / dsr_norm_at(k, R, R, 2 * R + 1);
  int y;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if ((size_t)w * h >= 16384)
#endif
  for (y = 0; y < h; y++)
    for (int x = 0; x < w; x++) dsr_filt_T_px(g, out, w, h, k, R, axis, inv_full, x, y);
}

/* ---- loss object ------------------------------------------------------------- */
struct dsImageLoss {
  dsLossDef def;
  int w, h, levels;
  int lw[DS_LOSS_MAX_LEVELS], lh[DS_LOSS_MAX_LEVELS];
  size_t off[DS_LOSS_MAX_LEVELS]; /* offsets (values) of each level in the pyramids */
  double* pa;   /* pyramid of img */
  double* pb;   /* pyramid of goal */
  double* pg;   /* pyramid of dL/d(img) */
  double* t0;   /* scratch, w h NC each */
  double* t1;
  double* ss;   /* D-SSIM maps: mx my sxx syy sxy (5 w h NC) */
  double gk[MAXR + 1]; /* SSIM Gaussian half-window */
  double bk[3];        /* binomial half-window 6/16, 4/16, 1/16 */
};

int ds_image_loss_check(const dsLossDef* def, int w, int h, char* err, size_t errlen) {
#define BAD(...) return ds__puterr(err, errlen, DS_ERR_INVALID, __VA_ARGS__)
  if (!def) BAD("image loss: NULL definition");
  if (w <= 0 || h <= 0 || w > 65536 || h > 65536) BAD("image loss: image size %d x %d: expected 1 to 65536 each", w, h);
  if (def->kind < DS_LOSS_MSE || def->kind > DS_LOSS_L2_DSSIM)
    BAD("image loss: kind: expected DS_LOSS_MSE, DS_LOSS_L1, DS_LOSS_DSSIM or DS_LOSS_L2_DSSIM (0 to 3), got %d",
        def->kind);
  if (def->levels < 1 || def->levels > DS_LOSS_MAX_LEVELS)
    BAD("image loss: levels: expected 1 to %d, got %d", DS_LOSS_MAX_LEVELS, def->levels);
  for (int i = 0; i < def->levels; i++)
    if (!isfinite((double)def->weights[i])) BAD("image loss: weights[%d]: expected a finite number", i);
  if (!(def->moments_weight >= 0) || !isfinite((double)def->moments_weight))
    BAD("image loss: moments_weight: expected a finite number >= 0, got %g", (double)def->moments_weight);
  if (!(def->moments_size >= 0) || !isfinite((double)def->moments_size))
    BAD("image loss: moments_size: expected a finite number >= 0, got %g", (double)def->moments_size);
  if (def->kind == DS_LOSS_DSSIM || def->kind == DS_LOSS_L2_DSSIM) {
    if (!(def->ssim_sigma > 0)) BAD("image loss: ssim_sigma: expected a number > 0, got %g", (double)def->ssim_sigma);
    if (def->ssim_radius < 1 || def->ssim_radius > MAXR)
      BAD("image loss: ssim_radius: expected 1 to %d, got %d", MAXR, def->ssim_radius);
    if (!(def->ssim_c1 > 0) || !(def->ssim_c2 > 0))
      BAD("image loss: ssim_c1, ssim_c2: expected numbers > 0, got %g, %g", (double)def->ssim_c1, (double)def->ssim_c2);
  }
#undef BAD
  return DS_OK;
}

int ds_image_loss_create(dsImageLoss** out, const dsLossDef* def, int w, int h) {
  dsImageLoss* l;
  size_t tot = 0, n;
  int i;
  if (!out) return DS_ERR_INVALID;
  *out = NULL;
  if (ds_image_loss_check(def, w, h, NULL, 0)) return DS_ERR_INVALID; /* one set of checks */
  l = (dsImageLoss*)ds__calloc(1, sizeof *l);
  if (!l) return DS_ERR_NOMEM;
  l->def = *def;
  l->w = w;
  l->h = h;
  l->levels = def->levels;
  for (i = 0; i < l->levels; i++) {
    l->lw[i] = i ? (l->lw[i - 1] + 1) / 2 : w;
    l->lh[i] = i ? (l->lh[i - 1] + 1) / 2 : h;
    l->off[i] = tot;
    tot += (size_t)l->lw[i] * l->lh[i] * NC;
  }
  n = (size_t)w * h * NC;
  l->pa = (double*)ds__malloc(sizeof(double) * tot);
  l->pb = (double*)ds__malloc(sizeof(double) * tot);
  l->pg = (double*)ds__malloc(sizeof(double) * tot);
  l->t0 = (double*)ds__malloc(sizeof(double) * n);
  l->t1 = (double*)ds__malloc(sizeof(double) * n);
  const int ssim = def->kind == DS_LOSS_DSSIM || def->kind == DS_LOSS_L2_DSSIM;
  l->ss = ssim ? (double*)ds__malloc(sizeof(double) * 5 * n) : NULL;
  if (!l->pa || !l->pb || !l->pg || !l->t0 || !l->t1 || (ssim && !l->ss)) {
    ds_image_loss_destroy(l);
    return DS_ERR_NOMEM;
  }
  for (i = 0; i <= MAXR; i++) {
    double s = def->ssim_sigma > 0 ? (double)def->ssim_sigma : 1.0;
    l->gk[i] = exp(-0.5 * i * i / (s * s));
  }
  l->bk[0] = 6.0 / 16;
  l->bk[1] = 4.0 / 16;
  l->bk[2] = 1.0 / 16;
  *out = l;
  return DS_OK;
}

void ds_image_loss_destroy(dsImageLoss* l) {
  if (!l) return;
  ds__free(l->pa);
  ds__free(l->pb);
  ds__free(l->pg);
  ds__free(l->t0);
  ds__free(l->t1);
  ds__free(l->ss);
  ds__free(l);
}

/* dst (level l+1) = decimate(B src); t0, t1 scratch */
static void pyr_down(dsImageLoss* l, int lv, double* pyr) {
  const double* src = pyr + l->off[lv];
  double* dst = pyr + l->off[lv + 1];
  int w = l->lw[lv], h = l->lh[lv], W = l->lw[lv + 1], H = l->lh[lv + 1], x, y, c;
  filt(src, l->t0, w, h, l->bk, 2, 0);
  filt(l->t0, l->t1, w, h, l->bk, 2, 1);
  for (y = 0; y < H; y++)
    for (x = 0; x < W; x++)
      for (c = 0; c < NC; c++) dst[((size_t)y * W + x) * NC + c] = l->t1[((size_t)(2 * y) * w + 2 * x) * NC + c];
}

/* pyr level lv gradient += (decimate B)^T (level lv+1 gradient) */
static void pyr_down_T(dsImageLoss* l, int lv, double* pyr) {
  const double* g = pyr + l->off[lv + 1];
  double* dst = pyr + l->off[lv];
  int w = l->lw[lv], h = l->lh[lv], W = l->lw[lv + 1], H = l->lh[lv + 1], x, y, c;
  size_t n = (size_t)w * h * NC;
  memset(l->t1, 0, sizeof(double) * n);
  for (y = 0; y < H; y++)
    for (x = 0; x < W; x++)
      for (c = 0; c < NC; c++) l->t1[((size_t)(2 * y) * w + 2 * x) * NC + c] = g[((size_t)y * W + x) * NC + c];
  memset(l->t0, 0, sizeof(double) * n);
  filt_T(l->t1, l->t0, w, h, l->bk, 2, 1);
  filt_T(l->t0, dst, w, h, l->bk, 2, 0);
}

/* G applied to in -> out (t0 scratch) */
static void gauss(dsImageLoss* l, const double* in, double* out, int w, int h) {
  filt(in, l->t0, w, h, l->gk, l->def.ssim_radius, 0);
  filt(l->t0, out, w, h, l->gk, l->def.ssim_radius, 1);
}

/* out += G^T in (t0 scratch) */
static void gauss_T(dsImageLoss* l, const double* in, double* out, int w, int h) {
  memset(l->t0, 0, sizeof(double) * (size_t)w * h * NC);
  filt_T(in, l->t0, w, h, l->gk, l->def.ssim_radius, 1);
  filt_T(l->t0, out, w, h, l->gk, l->def.ssim_radius, 0);
}

/* D-SSIM of a (img) vs b (goal) at one level; g += wgt dL/da (g may be NULL) */
static double dssim_level(dsImageLoss* l, const double* a, const double* b, int w, int h, double wgt,
                          double* g) {
  size_t n = (size_t)w * h * NC, i;
  double *mx = l->ss, *my = mx + n, *sxx = my + n, *syy = sxx + n, *sxy = syy + n;
  const double C1 = l->def.ssim_c1, C2 = l->def.ssim_c2;
  double acc = 0, dLds;
  gauss(l, a, mx, w, h);
  gauss(l, b, my, w, h);
  for (i = 0; i < n; i++) l->t1[i] = a[i] * a[i];
  gauss(l, l->t1, sxx, w, h);
  for (i = 0; i < n; i++) l->t1[i] = b[i] * b[i];
  gauss(l, l->t1, syy, w, h);
  for (i = 0; i < n; i++) l->t1[i] = a[i] * b[i];
  gauss(l, l->t1, sxy, w, h);
  dLds = -0.5 / (double)n;
  /* reuse the maps: mx <- dL/dmx, sxx <- dL/dSxx, sxy <- dL/dSxy */
  for (i = 0; i < n; i++)
    acc += dsr_ssim_value(mx + i, my + i, sxx + i, syy + i, sxy + i, C1, C2, wgt * dLds, g != NULL);
  if (g) {
    /* g += G^T dmx + 2 a G^T dsxx + b G^T dsxy; syy and my are free scratch */
    gauss_T(l, mx, g, w, h);
    memset(my, 0, sizeof(double) * n);
    gauss_T(l, sxx, my, w, h);
    memset(syy, 0, sizeof(double) * n);
    gauss_T(l, sxy, syy, w, h);
    for (i = 0; i < n; i++) g[i] += 2 * a[i] * my[i] + b[i] * syy[i];
  }
  return 0.5 * (1.0 - acc / (double)n);
}

static double base_level(dsImageLoss* l, int lv, const double* a, const double* b, double* g, double wgt) {
  int w = l->lw[lv], h = l->lh[lv];
  size_t n = (size_t)w * h * NC, i;
  double acc = 0;
  if (l->def.kind == DS_LOSS_DSSIM) return dssim_level(l, a, b, w, h, wgt, g);
  if (l->def.kind == DS_LOSS_L2_DSSIM) { /* 0.1 MSE + 0.9 D-SSIM: each part's gradient scaled by its weight */
    for (i = 0; i < n; i++) {
      double d = a[i] - b[i];
      acc += d * d;
      if (g) g[i] += DS_LOSS_MIX_L2 * wgt * 2.0 * d / (double)n;
    }
    return DS_LOSS_MIX_L2 * acc / (double)n + DS_LOSS_MIX_DSSIM * dssim_level(l, a, b, w, h, DS_LOSS_MIX_DSSIM * wgt, g);
  }
  /* the gradient in parallel, the sum in value order (as dsr_loss_sum) */
  const int mse = l->def.kind == DS_LOSS_MSE;
  if (g) {
    const long nl = (long)n;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (nl >= 4 * 16384)
#endif
    for (long k = 0; k < nl; k++) {
      const double d = a[k] - b[k];
      g[k] += mse ? wgt * 2.0 * d / (double)n : wgt * (d > 0 ? 1.0 : d < 0 ? -1.0 : 0.0) / (double)n;
    }
  }
  for (i = 0; i < n; i++) {
    const double d = a[i] - b[i];
    acc += mse ? d * d : fabs(d);
  }
  return acc / (double)n;
}

/* dsr_alpha_centroid with its rows summed in parallel (t0 holds the row
 * sums), added in row order: the same bits */
static void alpha_centroid(const dsImageLoss* l, const dsReal* img, double* m, double c[2]) {
  const int w = l->w, h = l->h;
  double *rs = l->t0, *rx = l->t0 + h;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if ((size_t)w * h >= 16384)
#endif
  for (int r = 0; r < h; r++) dsr_alpha_row(img, w, r, rs + r, rx + r);
  double s = 0, sx = 0, sy = 0;
  for (int r = 0; r < h; r++) {
    const double y = (double)(2 * (h - 1 - r) + 1 - h) / h;
    s += rs[r];
    sx += rx[r];
    sy += rs[r] * y;
  }
  *m = s + DSR_MOMENTS_EPS;
  c[0] = sx / *m;
  c[1] = sy / *m;
}

/* the moments term; its gradient is added into g (full resolution) */
static double moments_term(const dsImageLoss* l, const dsReal* img, const dsReal* goal, double* g) {
  const int w = l->w, h = l->h;
  const double wt = (double)l->def.moments_weight, q = (double)l->def.moments_size;
  double m, mg, c[2], cg[2];
  alpha_centroid(l, img, &m, c);
  alpha_centroid(l, goal, &mg, cg);
  const double dx = c[0] - cg[0], dy = c[1] - cg[1], lr = 0.5 * log(m / mg);
  if (g) {
    const double sx = 2 * wt * dx / m, sy = 2 * wt * dy / m, s0 = wt * q * lr / m;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if ((size_t)w * h >= 16384)
#endif
    for (int r = 0; r < h; r++) {
      const double y = (double)(2 * (h - 1 - r) + 1 - h) / h;
      for (int k = 0; k < w; k++) {
        const double x = (double)(2 * k + 1 - w) / w;
        g[((size_t)r * w + k) * NC + 3] += sx * (x - c[0]) + sy * (y - c[1]) + s0;
      }
    }
  }
  return wt * (dx * dx + dy * dy + q * lr * lr);
}

int ds_image_loss_eval(dsImageLoss* l, const dsReal* img, const dsReal* goal, dsReal* loss,
                       dsReal* grad) {
  size_t n, i;
  double total = 0;
  int lv;
  if (!l || !img || !goal || !loss) return DS_ERR_INVALID;
  n = (size_t)l->w * l->h * NC;
#if !DS_SINGLE
  if (l->levels == 1) { /* the images as they are, the gradient in place: no copies (the same values) */
    if (grad) memset(grad, 0, sizeof(double) * n);
    if (l->def.weights[0] != 0) total += l->def.weights[0] * base_level(l, 0, img, goal, grad, l->def.weights[0]);
    if (l->def.moments_weight > 0) total += moments_term(l, img, goal, grad);
    *loss = (dsReal)total;
    return DS_OK;
  }
#endif
  for (i = 0; i < n; i++) {
    l->pa[i] = img[i];
    l->pb[i] = goal[i];
  }
  for (lv = 0; lv + 1 < l->levels; lv++) {
    pyr_down(l, lv, l->pa);
    pyr_down(l, lv, l->pb);
  }
  if (grad) memset(l->pg, 0, sizeof(double) * (l->off[l->levels - 1] +
                                               (size_t)l->lw[l->levels - 1] * l->lh[l->levels - 1] * NC));
  for (lv = 0; lv < l->levels; lv++) {
    double wgt = l->def.weights[lv];
    if (wgt == 0) continue;
    total += wgt * base_level(l, lv, l->pa + l->off[lv], l->pb + l->off[lv], grad ? l->pg + l->off[lv] : NULL, wgt);
  }
  if (grad)
    for (lv = l->levels - 2; lv >= 0; lv--) pyr_down_T(l, lv, l->pg);
  if (l->def.moments_weight > 0) total += moments_term(l, img, goal, grad ? l->pg : NULL);
  if (grad)
    for (i = 0; i < n; i++) grad[i] = (dsReal)l->pg[i];
  *loss = (dsReal)total;
  return DS_OK;
}

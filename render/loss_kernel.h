/* Per-value, per-pixel and per-image bodies of the image losses
 * (render/loss.c has the math): the single-scale MSE or L1 terms, the
 * alpha-moments term, the separable filters and their transposes, the
 * SSIM of a value. DS_HD: the same code for ds_image_loss_eval on the host
 * and for a batch of images where the instances run
 * (render/raster_batch.h). */
#ifndef DSIM_RENDER_LOSS_KERNEL_H
#define DSIM_RENDER_LOSS_KERNEL_H

#include <math.h>

#include "base/hd.h"
#include "dsim/base.h"
#include "dsim/raster.h"

#if defined(__GNUC__) && !defined(__CUDACC__)
#  define DSL_INLINE static inline __attribute__((always_inline))
#else
#  define DSL_INLINE DS_INLINE
#endif

#define DSR_LSTAT 5         /* per image: the moments term's sx, sy, s0, c_x, c_y */
#define DSR_MOMENTS_EPS 1.0 /* one opaque pixel's worth of alpha mass */

/* A single-scale loss: kind MSE or L1 weighted w0 (0: off), the moments
 * term's weight and size part (mom_w 0: off), on W x H RGBA images. */
typedef struct dsrLossConst {
  int W, H, kind;
  double w0, mom_w, mom_q;
  /* multi-scale and D-SSIM (render/raster_batch.h's image operations) */
  int levels, R;                 /* pyramid levels; the SSIM window's radius */
  double weights[DS_LOSS_MAX_LEVELS];
  double C1, C2;
  double gk[17], bk[3];          /* SSIM Gaussian and binomial half-windows (DSR_MAXR + 1) */
} dsrLossConst;

/* Alpha mass m (with eps) and centroid c of an RGBA image; pixel centres in
 * normalised device coordinates, row 0 at the top. */
/* Row r's alpha mass *rs and its x moment *rx (dsr_alpha_centroid's per-row
 * sums; render/loss.c sums rows in parallel with it). */
DS_HD DSL_INLINE void dsr_alpha_row(const dsReal* img, int w, int r, double* rs, double* rx) {
  double s = 0, x = 0;
  for (int k = 0; k < w; k++) {
    const double a = img[((size_t)r * w + k) * 4 + 3];
    s += a;
    x += a * ((double)(2 * k + 1 - w) / w);
  }
  *rs = s;
  *rx = x;
}

DS_HD DSL_INLINE void dsr_alpha_centroid(const dsReal* img, int w, int h, double* m, double c[2]) {
  double s = 0, sx = 0, sy = 0;
  for (int r = 0; r < h; r++) {
    const double y = (double)(2 * (h - 1 - r) + 1 - h) / h;
    double rs, rx;
    dsr_alpha_row(img, w, r, &rs, &rx);
    s += rs;
    sx += rx;
    sy += rs * y;
  }
  *m = s + DSR_MOMENTS_EPS;
  c[0] = sx / *m;
  c[1] = sy / *m;
}

/* The moments term of img against goal (lc->mom_w > 0); st receives what
 * its gradient needs. */
DS_HD DSL_INLINE double dsr_moments_sum(const dsrLossConst* lc, const dsReal* img, const dsReal* goal, double* st) {
  const double wt = lc->mom_w, q = lc->mom_q;
  double m, mg, c[2], cg[2];
  dsr_alpha_centroid(img, lc->W, lc->H, &m, c);
  dsr_alpha_centroid(goal, lc->W, lc->H, &mg, cg);
  const double dx = c[0] - cg[0], dy = c[1] - cg[1], lr = 0.5 * log(m / mg);
  st[0] = 2 * wt * dx / m;
  st[1] = 2 * wt * dy / m;
  st[2] = wt * q * lr / m;
  st[3] = c[0];
  st[4] = c[1];
  return wt * (dx * dx + dy * dy + q * lr * lr);
}

/* Its gradient at value i (an alpha value: i % 4 == 3). */
DS_HD DSL_INLINE double dsr_moments_grad(const dsrLossConst* lc, const double* st, int i) {
  const int p = i / 4, r = p / lc->W, k = p % lc->W;
  const double y = (double)(2 * (lc->H - 1 - r) + 1 - lc->H) / lc->H;
  const double x = (double)(2 * k + 1 - lc->W) / lc->W;
  return st[0] * (x - st[3]) + st[1] * (y - st[4]) + st[2];
}

/* The loss of img against goal, summed in value order; st receives what
 * dsr_loss_grad needs of the moments term. */
DS_HD DSL_INLINE double dsr_loss_sum(const dsrLossConst* lc, const dsReal* img, const dsReal* goal, double* st) {
  const size_t n = 4 * (size_t)lc->W * lc->H;
  double total = 0;
  if (lc->w0 != 0) {
    double acc = 0;
    for (size_t i = 0; i < n; i++) {
      const double d = (double)img[i] - (double)goal[i];
      acc += lc->kind == DS_LOSS_MSE ? d * d : fabs(d);
    }
    total += lc->w0 * (acc / (double)n);
  }
  if (lc->mom_w > 0) total += dsr_moments_sum(lc, img, goal, st);
  return total;
}

/* dL/d(img[i]) (st from dsr_loss_sum of the same images). */
DS_HD DSL_INLINE double dsr_loss_grad(const dsrLossConst* lc, const dsReal* img, const dsReal* goal, const double* st,
                                      int i) {
  const size_t n = 4 * (size_t)lc->W * lc->H;
  double g = 0.0;
  if (lc->w0 != 0) {
    const double d = (double)img[i] - (double)goal[i];
    if (lc->kind == DS_LOSS_MSE)
      g += lc->w0 * 2.0 * d / (double)n;
    else
      g += lc->w0 * (d > 0 ? 1.0 : d < 0 ? -1.0 : 0.0) / (double)n;
  }
  if (lc->mom_w > 0 && i % 4 == 3) g += dsr_moments_grad(lc, st, i);
  return g;
}

/* ---- separable filters with border-normalised weights (render/loss.c) ----------
 * 1-D filter of radius R and weights k[0..R] (symmetric) along axis (0: x,
 * 1: y) of a w x h RGBA image of doubles; one output pixel (x, y) per call,
 * summed in a fixed order. */
#define DSR_MAXR 16

DS_HD DSL_INLINE double dsr_norm_at(const double* k, int R, int i, int n) {
  double s = 0;
  for (int j = -R; j <= R; j++)
    if (i + j >= 0 && i + j < n) s += k[j < 0 ? -j : j];
  return s;
}

/* 1/norm_i: the full-window value away from the borders */
DS_HD DSL_INLINE double dsr_inv_norm(const double* k, int R, int i, int n, double inv_full) {
  return (i >= R && i < n - R) ? inv_full : 1.0 / dsr_norm_at(k, R, i, n);
}

/* out(x, y) = (F in)(x, y); inv_full = 1/dsr_norm_at(k, R, R, 2R + 1) */
DS_HD DSL_INLINE void dsr_filt_px(const double* in, double* out, int w, int h, const double* k, int R, int axis,
                                  double inv_full, int x, int y) {
  const int i = axis ? y : x, n = axis ? h : w;
  const double inv = dsr_inv_norm(k, R, i, n, inv_full);
  double acc[4] = {0, 0, 0, 0};
  const int j0 = i - R < 0 ? -i : -R, j1 = i + R >= n ? n - 1 - i : R;
  for (int j = j0; j <= j1; j++) {
    const double* p = axis ? in + ((size_t)(y + j) * w + x) * 4 : in + ((size_t)y * w + x + j) * 4;
    const double kk = k[j < 0 ? -j : j];
    for (int c = 0; c < 4; c++) acc[c] += kk * p[c];
  }
  for (int c = 0; c < 4; c++) out[((size_t)y * w + x) * 4 + c] = acc[c] * inv;
}

/* out(x, y) += (F^T g)(x, y): source i + j contributes k[|j|] g / norm_{i+j} */
DS_HD DSL_INLINE void dsr_filt_T_px(const double* g, double* out, int w, int h, const double* k, int R, int axis,
                                    double inv_full, int x, int y) {
  const int i = axis ? y : x, n = axis ? h : w;
  double acc[4] = {0, 0, 0, 0};
  const int j0 = i - R < 0 ? -i : -R, j1 = i + R >= n ? n - 1 - i : R;
  for (int j = j0; j <= j1; j++) {
    const double* p = axis ? g + ((size_t)(y + j) * w + x) * 4 : g + ((size_t)y * w + x + j) * 4;
    const double kk = k[j < 0 ? -j : j] * dsr_inv_norm(k, R, i + j, n, inv_full);
    for (int c = 0; c < 4; c++) acc[c] += kk * p[c];
  }
  for (int c = 0; c < 4; c++) out[((size_t)y * w + x) * 4 + c] += acc[c];
}

/* The D-SSIM of one value i from its maps (mx, my, sxx, syy, sxy at i);
 * with want, the partials times c into the maps mx <- dL/dmx,
 * sxx <- dL/dSxx, sxy <- dL/dSxy. Returns s. */
DS_HD DSL_INLINE double dsr_ssim_value(double* mx, const double* my, double* sxx, const double* syy, double* sxy,
                                       double C1, double C2, double c, int want) {
  const double A1 = 2 * *mx * *my + C1, A2 = 2 * (*sxy - *mx * *my) + C2;
  const double B1 = *mx * *mx + *my * *my + C1;
  const double B2 = (*sxx - *mx * *mx) + (*syy - *my * *my) + C2;
  const double iB = 1.0 / (B1 * B2), s = A1 * A2 * iB;
  if (want) {
    const double dmx = 2 * *my * (A2 - A1) * iB + 2 * *mx * s * (1.0 / B2 - 1.0 / B1);
    const double dsxx = -s / B2, dsxy = 2 * A1 * iB;
    *mx = c * dmx;
    *sxx = c * dsxx;
    *sxy = c * dsxy;
  }
  return s;
}

#endif

/* Per-value and per-image bodies of the single-scale image losses (MSE or
 * L1 plus the alpha-moments term; render/loss.c has the math), DS_HD: the
 * same code for ds_image_loss_eval on the host and for a batch of images
 * where the instances run (render/raster_batch.h). Multi-scale and D-SSIM
 * losses stay host code. */
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
} dsrLossConst;

/* Alpha mass m (with eps) and centroid c of an RGBA image; pixel centres in
 * normalised device coordinates, row 0 at the top. */
DS_HD DSL_INLINE void dsr_alpha_centroid(const dsReal* img, int w, int h, double* m, double c[2]) {
  double s = 0, sx = 0, sy = 0;
  for (int r = 0; r < h; r++) {
    const double y = (double)(2 * (h - 1 - r) + 1 - h) / h;
    double rs = 0, rx = 0;
    for (int k = 0; k < w; k++) {
      const double a = img[((size_t)r * w + k) * 4 + 3];
      rs += a;
      rx += a * ((double)(2 * k + 1 - w) / w);
    }
    s += rs;
    sx += rx;
    sy += rs * y;
  }
  *m = s + DSR_MOMENTS_EPS;
  c[0] = sx / *m;
  c[1] = sy / *m;
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
  if (lc->mom_w > 0) {
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
    total += wt * (dx * dx + dy * dy + q * lr * lr);
  }
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
  if (lc->mom_w > 0 && i % 4 == 3) {
    const int p = i / 4, r = p / lc->W, k = p % lc->W;
    const double y = (double)(2 * (lc->H - 1 - r) + 1 - lc->H) / lc->H;
    const double x = (double)(2 * k + 1 - lc->W) / lc->W;
    g += st[0] * (x - st[3]) + st[1] * (y - st[4]) + st[2];
  }
  return g;
}

#endif

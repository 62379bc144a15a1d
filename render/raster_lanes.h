/* The forward's innermost loop, one face over one row of pixels, four
 * columns at a time (host only; included by render/raster.c).
 *
 * dsr_face_row (render/raster_kernel.h) evaluates the face at each column
 * of its span with dsr_eval and adds it to the pixel with dsr_accumulate.
 * Here dsr_eval's arithmetic runs on four columns as the lanes of a vector
 * (GCC vector extensions): the edge functions, the squared distances to
 * the edges and vertices, the clamped barycentrics, the depth, the softmax
 * exponent and the coverage sigmoid with its dsr_exp, each lane doing the
 * scalar code's operations in its order (no FMA: -ffp-contract=off), so
 * every lane is the scalar value bit for bit; selects stand for the
 * scalar's ternaries. The lanes whose column is outside the span or whose
 * face does not reach the pixel (dsr_eval's ok) are dropped, and each
 * remaining column goes through dsr_accumulate (branches on the pixel's
 * running maximum) as before, in column order: the pixel states are the
 * scalar loop's bits, which tests/test_batch_render and test_batch_frames
 * check (the batched renderer keeps the scalar loop). */
#ifndef DSIM_RENDER_RASTER_LANES_H
#define DSIM_RENDER_RASTER_LANES_H

#include "render/raster_kernel.h"

#if defined(__GNUC__) && !defined(DS_NO_RASTER_LANES)
#define DSR_LANES 1
/* The helpers take and return 32-byte vectors; they are always inlined, so
 * no call crosses the ABI GCC warns about when AVX is off (it warns at the
 * end of the file that includes this: left off for that file). */
#pragma GCC diagnostic ignored "-Wpsabi"

typedef double dsrV4 __attribute__((vector_size(32)));
typedef long long dsrM4 __attribute__((vector_size(32))); /* lane masks: -1 true, 0 false */

static inline __attribute__((always_inline)) dsrV4 dsr_v4(double s) { return (dsrV4){s, s, s, s}; }

/* lane-wise m ? a : b (m from a vector comparison), by bits: exact */
static inline __attribute__((always_inline)) dsrV4 dsr_sel4(dsrM4 m, dsrV4 a, dsrV4 b) {
  return (dsrV4)(((dsrM4)a & m) | ((dsrM4)b & ~m));
}
#define DSR_SEL(m, a, b) dsr_sel4((m), (a), (b))

/* dsr_exp lane by lane (the same operations; the tables read per lane) */
static inline __attribute__((always_inline)) dsrV4 dsr_exp4(dsrV4 x0) {
  const double hi = 6.93147180369123816490e-01 / 8, lo = 1.90821492927058770002e-10 / 8;
  const dsrV4 xc = DSR_SEL(x0 >= -41.0, x0, dsr_v4(-41.0));
  const dsrV4 x = DSR_SEL(xc <= 0.0, xc, dsr_v4(0.0));
  const dsrV4 mh = 0.5 - x * 11.541560327111707;
  const dsrV4 r0 = x; /* dn and r per lane below */
  dsrV4 dn, t;
  for (int l = 0; l < 4; l++) {
    const int m = (int)mh[l];
    const int k = (m + 7) >> 3, j = 8 * k - m;
    dn[l] = (double)(-m);
    t[l] = dsr_exp_t8[j] * dsr_exp_p2[k];
  }
  const dsrV4 r = (r0 - dn * hi) - dn * lo;
  const dsrV4 r2 = r * r, r4 = r2 * r2;
  const dsrV4 p01 = 1.0 + r, p23 = 0.5 + r * (1.0 / 6.0), p45 = 1.0 / 24.0 + r * (1.0 / 120.0);
  const dsrV4 p67 = 1.0 / 720.0 + r * (1.0 / 5040.0);
  const dsrV4 p = p01 + r2 * p23 + r4 * (p45 + r2 * p67 + r4 * (1.0 / 40320.0));
  return p * t;
}

/* dsr_eval (full = 0) at the four columns x; ok: the lanes where the face
 * reaches the pixel; D, q, e, bp (vertex colours only) as dsrEval's. */
static inline __attribute__((always_inline)) void dsr_eval4(const dsrFace* f, const dsrConst* c, dsrV4 x, double y,
                                                          dsrM4* okp, dsrV4* Dp, dsrV4* qp, dsrV4* ep,
                                                          dsrV4 bp[3]) {
  const dsrV4 E0 = f->ea[0] * x + (f->eb[0] * y + f->ec[0]);
  const dsrV4 E1 = f->ea[1] * x + (f->eb[1] * y + f->ec[1]);
  const dsrV4 E2 = f->ea[2] * x + (f->eb[2] * y + f->ec[2]);
  const dsrV4 s0 = E0 * f->en[0], s1 = E1 * f->en[1], s2 = E2 * f->en[2];
  const double nr = -c->r;
  const dsrM4 near_ok = (s0 >= nr) & (s1 >= nr) & (s2 >= nr);
  const dsrM4 inside = (s0 >= 0.0) & (s1 >= 0.0) & (s2 >= 0.0);
  const dsrV4 dx0 = x - f->px[0], dx1 = x - f->px[1], dx2 = x - f->px[2];
  const double dy0 = y - f->py[0], dy1 = y - f->py[1], dy2 = y - f->py[2];
  const dsrV4 v0 = dx0 * dx0 + dy0 * dy0, v1 = dx1 * dx1 + dy1 * dy1, v2 = dx2 * dx2 + dy2 * dy2;
  const dsrV4 t0 = dx1 * f->tux[0] + dy1 * f->tuy[0];
  const dsrV4 t1 = dx2 * f->tux[1] + dy2 * f->tuy[1];
  const dsrV4 t2 = dx0 * f->tux[2] + dy0 * f->tuy[2];
  dsrV4 e0 = s0 * s0, e1 = s1 * s1, e2 = s2 * s2;
  e0 = DSR_SEL(t0 >= 1.0, v2, e0);
  e0 = DSR_SEL(t0 <= 0.0, v1, e0);
  e1 = DSR_SEL(t1 >= 1.0, v0, e1);
  e1 = DSR_SEL(t1 <= 0.0, v2, e1);
  e2 = DSR_SEL(t2 >= 1.0, v1, e2);
  e2 = DSR_SEL(t2 <= 0.0, v0, e2);
  const dsrV4 d01 = DSR_SEL(e1 < e0, e1, e0);
  const dsrV4 d2 = DSR_SEL(e2 < d01, e2, d01);
  dsrM4 ok = near_ok & (inside | (d2 <= c->r2));
  const dsrV4 b0 = E0 * f->invA, b1 = E1 * f->invA, b2 = E2 * f->invA;
  const dsrV4 c0 = DSR_SEL(b0 > 0.0, b0, dsr_v4(0.0)), c1 = DSR_SEL(b1 > 0.0, b1, dsr_v4(0.0));
  const dsrV4 c2 = DSR_SEL(b2 > 0.0, b2, dsr_v4(0.0));
  const dsrV4 sum = c0 + c1 + c2;
  dsrV4 zp;
  if (c->ortho)
    zp = (c0 * f->Z[0] + c1 * f->Z[1] + c2 * f->Z[2]) / sum;
  else
    zp = sum / (c0 * f->iz[0] + c1 * f->iz[1] + c2 * f->iz[2]);
  ok = ok & (zp >= c->znear) & (zp <= c->zfar);
  if (c->vertex_color) {
    const dsrV4 is = 1.0 / sum;
    const dsrV4 bt0 = c0 * is, bt1 = c1 * is, bt2 = c2 * is;
    if (c->ortho) {
      bp[0] = bt0, bp[1] = bt1, bp[2] = bt2;
    } else {
      bp[0] = bt0 * f->iz[0] * zp;
      bp[1] = bt1 * f->iz[1] * zp;
      bp[2] = bt2 * f->iz[2] * zp;
    }
  }
  *ep = (c->zfar - zp) * c->zscale;
  /* dsr_sigmoid */
  const dsrV4 sx = DSR_SEL(inside, d2, -d2) * c->isigma;
  const dsrV4 ax = (dsrV4)((dsrM4)sx & 0x7FFFFFFFFFFFFFFFLL); /* fabs: the sign bit cleared */
  const dsrV4 ex0 = dsr_exp4(DSR_SEL(ax < 40.5, -ax, dsr_v4(-40.5)));
  const dsrV4 ex = DSR_SEL(ax > 40.0, dsr_v4(0.0), ex0);
  const dsrV4 a = 1.0 / (1.0 + ex), bb = ex * a;
  *Dp = DSR_SEL(sx >= 0.0, a, bb);
  *qp = DSR_SEL(sx >= 0.0, bb, a);
  *okp = ok;
}

/* dsr_face_row, four columns at a time (see the top comment). */
static inline __attribute__((always_inline)) void dsr_face_row4(const dsrView* vw, const dsrFace* f, int row, int x0,
                                                              int x1, double* prow) {
  const double y = (double)(vw->Hi - 1 - 2 * row) / vw->Hi;
  int c0, c1;
  dsr_row_span(f, y, vw->Wi, x0, x1, &c0, &c1);
  for (int col = c0; col <= c1; col += 4) {
    dsrV4 x;
    for (int l = 0; l < 4; l++) x[l] = (double)(2 * (col + l) + 1 - vw->Wi) * vw->iWi;
    dsrM4 ok;
    dsrV4 D, q, e, bp[3] = {{0}, {0}, {0}};
    dsr_eval4(f, &vw->c, x, y, &ok, &D, &q, &e, bp);
    for (int l = 0; l < 4 && col + l <= c1; l++)
      if (ok[l]) {
        const double b3[3] = {bp[0][l], bp[1][l], bp[2][l]};
        dsr_accumulate(f, &vw->c, prow + 6 * (size_t)(col + l), D[l], q[l], e[l], b3);
      }
  }
}

#endif /* DSR_LANES */
#endif

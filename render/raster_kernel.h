/* Per face-pixel math of the soft rasterizer, forward and adjoint side by
 * side (DS_HD: compiles as C and as CUDA C++). Everything is double
 * precision internally, whatever dsReal is. See render/raster.c for the
 * full derivation; the notation here follows it.
 *
 * Screen-space face data (NDC): vertices v_i = (px_i, py_i), camera depths
 * Z_i. Edge k is the edge opposite vertex k, from a = v_{k+1} to b = v_{k+2}
 * (indices mod 3); its edge function
 *   E_k(p) = cross(a - p, b - p) = ea_k x + eb_k y + ec_k
 * is twice the signed area of (p, a, b), so the barycentrics are
 * b_k = E_k / A with A = cross(v1 - v0, v2 - v0), and
 * s_k = E_k sign(A)/|b - a| is the signed distance of p to the line of edge
 * k, positive inside. */
#ifndef DSIM_RENDER_RASTER_KERNEL_H
#define DSIM_RENDER_RASTER_KERNEL_H

#include <math.h>
#include <string.h>

#include "base/hd.h"
#include "dsim/base.h"

/* faces spanning more tiles than this go to the list every tile scans */
#define DSR_BIG_TILES 16
/* softmax terms exp(e_j - m) < exp(-40) ~ 4e-18 are dropped (forward and adjoint) */
#define DSR_SOFTMAX_CUT 40.0
/* per-face camera adjoint: dL/dx_c, dL/dy_c, dL/dz_c (frame vectors), direct
 * dL/d(eye), then the projection's parts: sum_i gpx_i (px_i - ox),
 * sum_i gpy_i (py_i - oy) (dL/d(ax) ax and dL/d(ay) ay, since px - ox is
 * proportional to ax and py - oy to ay), sum_i gpx_i = dL/d(ox) and
 * sum_i gpy_i = dL/d(oy) */
#define DSR_NCAM 16
/* per-face light adjoint: dL/dk_amb, dL/dk_dir, then dL/dl (3) for the unit
 * direction l (before its normalisation; 0 for a headlight) */
#define DSR_NLIGHT 5

/* The per-pixel functions must inline into their loops (the `full` flag of
 * dsr_eval is then resolved at compile time). */
#if defined(__GNUC__) && !defined(__CUDACC__)
#  define DSR_INLINE static inline __attribute__((always_inline))
#else
#  define DSR_INLINE DS_INLINE
#endif

/* Per-frame constants. */
typedef struct dsrConst {
  double sigma;      /* NDC^2 */
  double isigma;     /* 1/sigma */
  double r2, r;      /* cut-off: sigma*ln(1e4 - 1) and its square root */
  double znear, zfar;
  double zscale;     /* 1/((far - near) gamma): e = (far - Zp) zscale */
  int ortho;
  int vertex_color;
} dsrConst;

/* One face, set up once per frame from the projected vertices. */
typedef struct dsrFace {
  double px[3], py[3];       /* NDC vertex positions */
  double Z[3], iz[3];        /* camera depth, m, and 1/Z */
  double A, invA;            /* signed doubled area and its inverse */
  double ea[3], eb[3], ec[3];/* edge functions E_k = ea x + eb y + ec */
  double en[3];              /* sign(A)/|edge k|: s_k = E_k en_k */
  double tux[3], tuy[3];     /* (b - a)/|b - a|^2 of edge k: t_k = (p - a).(tux, tuy) */
  double light;              /* lighting factor L = k_amb + k_dir max(0, n.l) */
  double col[3];             /* flat: base colour times L; vertex mode: unused */
  double vc[3][3];           /* vertex mode: base colour of each vertex */
  double sl[3], si[3];       /* edge k admits x >= or <= sl_k y + si_k (s_k >= -r) */
  int sk[3];                 /* 1: lower bound, -1: upper bound, 0: none, 2: never */
  int x0, x1, y0, y1;        /* internal-pixel bounding box, inclusive; x0 > x1: none */
} dsrFace;

/* What the forward computes for one face at one pixel. */
typedef struct dsrEval {
  double b[3];       /* raw screen barycentrics */
  double bt[3];      /* clamped to >= 0 and renormalised */
  double bsum;       /* sum of the clamped barycentrics */
  double bp[3];      /* perspective-correct barycentrics bt_i Zp / Z_i */
  double Zp;         /* interpolated depth, m */
  double e;          /* softmax exponent (far - Zp)/((far - near) gamma) */
  double D, q;       /* coverage D = sigmoid(x) and q = 1 - D, x = delta d^2/sigma */
  double C[3];       /* face colour at the pixel (lit), from dsr_color */
  double cx, cy;     /* closest boundary point */
  double t;          /* its parameter on edge `edge` */
  int edge;          /* edge holding the closest boundary point */
  int inside;        /* delta = +1 (inside) or -1 */
} dsrEval;

/* Per-face gradient accumulator (screen space). */
typedef struct dsrFaceGrad {
  double gpx[3], gpy[3], gZ[3];
  double gcol[3];    /* flat: dL/d(lit colour) */
  double gvc[3][3];  /* vertex mode: dL/d(base vertex colour) */
  double gL;         /* vertex mode: dL/d(light factor) */
  double gE[3], gEx[3], gEy[3]; /* sums over pixels of dL/dE_k, times x, times y */
  double gA;         /* sum over pixels of dL/dA */
} dsrFaceGrad;

/* Adds the edge-function and area parts to the vertex gradients of g:
 * E_k = cross(a - p, b - p) (a = v_{k+1}, b = v_{k+2}) has
 * dE/da = (b.y - p.y, -(b.x - p.x)), dE/db = (-(a.y - p.y), a.x - p.x), so
 * sum_p gE_k(p) dE/da = (b.y G - Gy, -(b.x G - Gx)) with G = sum gE_k,
 * Gx = sum gE_k x, Gy = sum gE_k y; A = cross(v1 - v0, v2 - v0). */
DS_HD DSR_INLINE void dsr_face_grad_finish(const dsrFace* f, dsrFaceGrad* g) {
  int k;
  for (k = 0; k < 3; k++) {
    const int ia = k == 2 ? 0 : k + 1, ib = k == 0 ? 2 : k - 1;
    const double G = g->gE[k], Gx = g->gEx[k], Gy = g->gEy[k];
    g->gpx[ia] += f->py[ib] * G - Gy;
    g->gpy[ia] -= f->px[ib] * G - Gx;
    g->gpx[ib] -= f->py[ia] * G - Gy;
    g->gpy[ib] += f->px[ia] * G - Gx;
  }
  {
    const double gA = g->gA;
    const double e1x = f->px[1] - f->px[0], e1y = f->py[1] - f->py[0];
    const double e2x = f->px[2] - f->px[0], e2y = f->py[2] - f->py[0];
    const double g1x = gA * e2y, g1y = -gA * e2x, g2x = -gA * e1y, g2y = gA * e1x;
    g->gpx[1] += g1x;
    g->gpy[1] += g1y;
    g->gpx[2] += g2x;
    g->gpy[2] += g2y;
    g->gpx[0] -= g1x + g2x;
    g->gpy[0] -= g1y + g2y;
  }
}

/* 2^(j/8), j = 0..7 and 2^-k, k = 0..63; device code reads copies in
 * __constant__ memory. */
#define DSR_EXP_T8 \
  {0x1.0000000000000p+0, 0x1.172b83c7d517bp+0, 0x1.306fe0a31b715p+0, 0x1.4bfdad5362a27p+0, \
  0x1.6a09e667f3bcdp+0, 0x1.8ace5422aa0dbp+0, 0x1.ae89f995ad3adp+0, 0x1.d5818dcfba487p+0}
#define DSR_EXP_P2 \
  {0x1p-0, 0x1p-1, 0x1p-2, 0x1p-3, 0x1p-4, 0x1p-5, 0x1p-6, 0x1p-7, 0x1p-8, 0x1p-9, 0x1p-10, 0x1p-11, \
  0x1p-12, 0x1p-13, 0x1p-14, 0x1p-15, 0x1p-16, 0x1p-17, 0x1p-18, 0x1p-19, 0x1p-20, 0x1p-21, 0x1p-22, \
  0x1p-23, 0x1p-24, 0x1p-25, 0x1p-26, 0x1p-27, 0x1p-28, 0x1p-29, 0x1p-30, 0x1p-31, 0x1p-32, 0x1p-33, \
  0x1p-34, 0x1p-35, 0x1p-36, 0x1p-37, 0x1p-38, 0x1p-39, 0x1p-40, 0x1p-41, 0x1p-42, 0x1p-43, 0x1p-44, \
  0x1p-45, 0x1p-46, 0x1p-47, 0x1p-48, 0x1p-49, 0x1p-50, 0x1p-51, 0x1p-52, 0x1p-53, 0x1p-54, 0x1p-55, \
  0x1p-56, 0x1p-57, 0x1p-58, 0x1p-59, 0x1p-60, 0x1p-61, 0x1p-62, 0x1p-63}
static const double dsr_exp_t8[8] = DSR_EXP_T8;
static const double dsr_exp_p2[64] = DSR_EXP_P2;
#if defined(__CUDACC__)
static __constant__ double dsr_exp_t8_dev[8] = DSR_EXP_T8;
static __constant__ double dsr_exp_p2_dev[64] = DSR_EXP_P2;
#endif

/* exp(x) for x in [-41, 0], the only range the rasterizer needs (sigmoid
 * tails and softmax terms are cut at exp(-40)). x = n ln2/8 + r with
 * |r| <= ln2/16 (ln2/8 split in two so n ln2/8 is exact), e^r by its degree-8
 * Taylor polynomial (truncation < 2e-18), 2^(n/8) = 2^-k 2^(j/8) from two
 * tables: within 2 ulp of exp, the same bits on every platform,
 * short dependency chains, no libm call. */
DS_HD DSR_INLINE double dsr_exp(double x0) {
  const double hi = 6.93147180369123816490e-01 / 8, lo = 1.90821492927058770002e-10 / 8;
  /* clamped into the domain (NaN -> -41) so a misuse can never index out of
   * the tables */
  const double xc = x0 >= -41.0 ? x0 : -41.0;
  const double x = xc <= 0.0 ? xc : 0.0;
  /* n = round(8 x/ln2) in [-474, 0] by one truncating conversion; m = -n */
  const int m = (int)(0.5 - x * 11.541560327111707);
  const double dn = (double)(-m);
  const double r = (x - dn * hi) - dn * lo;
  const double r2 = r * r, r4 = r2 * r2;
  /* Estrin: (1 + r) + r^2 (1/2 + r/6) + r^4 ((1/24 + r/120) + r^2 (1/720 + r/5040) + r^4/40320) */
  const double p01 = 1.0 + r, p23 = 0.5 + r * (1.0 / 6.0), p45 = 1.0 / 24.0 + r * (1.0 / 120.0);
  const double p67 = 1.0 / 720.0 + r * (1.0 / 5040.0);
  const double p = p01 + r2 * p23 + r4 * (p45 + r2 * p67 + r4 * (1.0 / 40320.0));
  /* 2^(-m/8) = 2^-k 2^(j/8) with m = 8k - j, 0 <= j < 8 */
  const int k = (m + 7) >> 3, j = 8 * k - m;
#if defined(__CUDA_ARCH__)
  const double *t8 = dsr_exp_t8_dev, *p2 = dsr_exp_p2_dev;
#else
  const double *t8 = dsr_exp_t8, *p2 = dsr_exp_p2;
#endif
  return p * (t8[j] * p2[k]);
}

/* D = sigmoid(x), q = 1 - D without cancellation, branch-free. For |x| > 40
 * the tail (< 4.3e-18) is flushed to 0: saves nothing but keeps dsr_exp in
 * range; the forward and the adjoint use the same values, so the adjoint
 * stays exact for them. */
DS_HD DSR_INLINE void dsr_sigmoid(double x, double* D, double* q) {
  const double ax = fabs(x);
  const double e0 = dsr_exp(ax < 40.5 ? -ax : -40.5);
  const double ex = ax > 40.0 ? 0.0 : e0;
  const double a = 1.0 / (1.0 + ex), b = ex * a;
  *D = x >= 0.0 ? a : b;
  *q = x >= 0.0 ? b : a;
}

/* Columns [*c0, *c1] of the row at NDC height y where face f can contribute
 * (s_k >= -r for every edge), intersected with [lo, hi]. The bounds are
 * widened by 1e-9 NDC against rounding (far below a pixel); the per-pixel
 * test stays the exact criterion. Wi: image width, column c has centre
 * x = (2c + 1 - Wi)/Wi. The lines come from dsr_span_setup. */
DS_HD DSR_INLINE void dsr_row_span(const dsrFace* f, double y, int Wi, int lo, int hi, int* c0,
                                   int* c1) {
  double xl = -1e30, xh = 1e30;
  int k;
  for (k = 0; k < 3; k++) {
    double v = f->sl[k] * y + f->si[k];
    if (f->sk[k] == 1) {
      if (v > xl) xl = v;
    } else if (f->sk[k] == -1) {
      if (v < xh) xh = v;
    } else if (f->sk[k] == 2) {
      xl = 1e30;
    }
  }
  if (!(xl <= xh)) {
    *c0 = 1;
    *c1 = 0;
    return;
  }
  xl = ceil(((xl - 1e-9) * Wi + Wi - 1) * 0.5);
  xh = floor(((xh + 1e-9) * Wi + Wi - 1) * 0.5);
  /* converted only inside [lo, hi] (a bound far outside the image, from a
   * nearly horizontal edge, is beyond int) */
  *c0 = xl > (double)lo ? (xl > (double)hi ? hi + 1 : (int)xl) : lo;
  *c1 = xh < (double)hi ? (xh < (double)lo ? lo - 1 : (int)xh) : hi;
}

/* Sets up the row-span lines of face f: s_k = en_k (ea_k x + eb_k y + ec_k)
 * >= -r is a x + b y + c >= 0 with a = en ea, b = en eb, c = en ec + r. A
 * nearly horizontal edge (|a| tiny) gives no bound on x (the per-pixel test
 * still decides). */
DS_HD DSR_INLINE void dsr_span_setup(dsrFace* f, double r) {
  int k;
  for (k = 0; k < 3; k++) {
    double a = f->ea[k] * f->en[k], b = f->eb[k] * f->en[k], cc = f->ec[k] * f->en[k] + r;
    if (a > 1e-12 || a < -1e-12) {
      f->sl[k] = -b / a;
      f->si[k] = -cc / a;
      f->sk[k] = a > 0 ? 1 : -1;
    } else {
      f->sl[k] = f->si[k] = 0.0;
      f->sk[k] = 0;
    }
  }
}

/* Forward for face f at pixel centre (x, y), essentially without branches.
 * Returns 0 when the face does not contribute there (outside by more than
 * the cut-off, so D < 1e-4; or its depth at the pixel is outside
 * [near, far]). full = 1 also fills what the adjoint needs (closest boundary
 * point, barycentrics); every value the forward uses is computed identically
 * either way.
 *   distance: for edge k from a to b, t_k = (p - a).(b - a)/|b - a|^2; the
 *     squared distance to the segment is |p - a|^2 (t_k <= 0), |p - b|^2
 *     (t_k >= 1) or s_k^2 (the line distance); d^2 = min over k.
 *   depth: with c_k = max(b_k, 0), bt_k = c_k / sum c, the perspective depth
 *     1/(sum_k bt_k / Z_k) = (sum c)/(sum_k c_k / Z_k) (one division). */
DS_HD DSR_INLINE int dsr_eval(const dsrFace* f, const dsrConst* c, double x, double y,
                             dsrEval* ev, int full) {
  const double E0 = f->ea[0] * x + (f->eb[0] * y + f->ec[0]);
  const double E1 = f->ea[1] * x + (f->eb[1] * y + f->ec[1]);
  const double E2 = f->ea[2] * x + (f->eb[2] * y + f->ec[2]);
  const double s0 = E0 * f->en[0], s1 = E1 * f->en[1], s2 = E2 * f->en[2];
  const double nr = -c->r;
  const int near_ok = (s0 >= nr) & (s1 >= nr) & (s2 >= nr);
  const int inside = (s0 >= 0.0) & (s1 >= 0.0) & (s2 >= 0.0);
  double d2, t0, t1, t2;
  int ok;
  ev->inside = inside;
  {
    /* squared distances to the vertices, then to each edge segment
     * (edge 0: v1 -> v2, edge 1: v2 -> v0, edge 2: v0 -> v1) */
    const double dx0 = x - f->px[0], dx1 = x - f->px[1], dx2 = x - f->px[2];
    const double dy0 = y - f->py[0], dy1 = y - f->py[1], dy2 = y - f->py[2];
    const double v0 = dx0 * dx0 + dy0 * dy0, v1 = dx1 * dx1 + dy1 * dy1, v2 = dx2 * dx2 + dy2 * dy2;
    double e0, e1, e2;
    t0 = dx1 * f->tux[0] + dy1 * f->tuy[0];
    t1 = dx2 * f->tux[1] + dy2 * f->tuy[1];
    t2 = dx0 * f->tux[2] + dy0 * f->tuy[2];
    e0 = s0 * s0;
    e1 = s1 * s1;
    e2 = s2 * s2;
    e0 = t0 >= 1.0 ? v2 : e0;
    e0 = t0 <= 0.0 ? v1 : e0;
    e1 = t1 >= 1.0 ? v0 : e1;
    e1 = t1 <= 0.0 ? v2 : e1;
    e2 = t2 >= 1.0 ? v1 : e2;
    e2 = t2 <= 0.0 ? v0 : e2;
    {
      const int k01 = e1 < e0;
      const double d01 = k01 ? e1 : e0;
      const int k2 = e2 < d01;
      d2 = k2 ? e2 : d01;
      if (full) {
        const int kk = k2 ? 2 : k01;
        const int ia = kk == 2 ? 0 : kk + 1, ib = kk == 0 ? 2 : kk - 1;
        double t = kk == 0 ? t0 : kk == 1 ? t1 : t2;
        t = t < 0.0 ? 0.0 : t;
        t = t > 1.0 ? 1.0 : t;
        ev->edge = kk;
        ev->t = t;
        ev->cx = f->px[ia] + t * (f->px[ib] - f->px[ia]);
        ev->cy = f->py[ia] + t * (f->py[ib] - f->py[ia]);
      }
    }
  }
  ok = near_ok & (inside | (d2 <= c->r2));
  if (!ok) return 0;

  /* barycentrics clamped to >= 0; depth */
  {
    const double b0 = E0 * f->invA, b1 = E1 * f->invA, b2 = E2 * f->invA;
    const double c0 = b0 > 0.0 ? b0 : 0.0, c1 = b1 > 0.0 ? b1 : 0.0, c2 = b2 > 0.0 ? b2 : 0.0;
    const double sum = c0 + c1 + c2;
    double zp;
    if (c->ortho)
      zp = (c0 * f->Z[0] + c1 * f->Z[1] + c2 * f->Z[2]) / sum;
    else
      zp = sum / (c0 * f->iz[0] + c1 * f->iz[1] + c2 * f->iz[2]);
    ev->Zp = zp;
    ok = ok & (zp >= c->znear) & (zp <= c->zfar);
    if (full || c->vertex_color) {
      const double is = 1.0 / sum;
      ev->b[0] = b0;
      ev->b[1] = b1;
      ev->b[2] = b2;
      ev->bsum = sum;
      ev->bt[0] = c0 * is;
      ev->bt[1] = c1 * is;
      ev->bt[2] = c2 * is;
      if (c->ortho) {
        ev->bp[0] = ev->bt[0];
        ev->bp[1] = ev->bt[1];
        ev->bp[2] = ev->bt[2];
      } else {
        ev->bp[0] = ev->bt[0] * f->iz[0] * zp;
        ev->bp[1] = ev->bt[1] * f->iz[1] * zp;
        ev->bp[2] = ev->bt[2] * f->iz[2] * zp;
      }
    }
  }
  ev->e = (c->zfar - ev->Zp) * c->zscale;
  dsr_sigmoid((inside ? d2 : -d2) * c->isigma, &ev->D, &ev->q);
  return ok;
}

/* Colour of face f at the pixel of ev (lit). */
DS_HD DSR_INLINE void dsr_color(const dsrFace* f, const dsrConst* c, const dsrEval* ev,
                                double C[3]) {
  int k;
  if (c->vertex_color) {
    for (k = 0; k < 3; k++)
      C[k] = f->light * (ev->bp[0] * f->vc[0][k] + ev->bp[1] * f->vc[1][k] + ev->bp[2] * f->vc[2][k]);
  } else {
    for (k = 0; k < 3; k++) C[k] = f->col[k];
  }
}

/* Adjoint of dsr_eval at pixel (x, y): given dL/dD (total, including the
 * alpha path through q = 1 - D), dL/de and dL/dC, accumulates the face's
 * screen-space gradient into g. */
DS_HD DSR_INLINE void dsr_eval_bwd(const dsrFace* f, const dsrConst* c, double x, double y,
                                  const dsrEval* ev, double gD, double ge, const double gC[3],
                                  dsrFaceGrad* g) {
  double gbp[3] = {0.0, 0.0, 0.0}, gbt[3], gb[3], gZp;
  int k;

  /* colour */
  if (c->vertex_color) {
    for (k = 0; k < 3; k++) {
      double cdot = gC[0] * f->vc[k][0] + gC[1] * f->vc[k][1] + gC[2] * f->vc[k][2];
      int ch;
      for (ch = 0; ch < 3; ch++) g->gvc[k][ch] += f->light * ev->bp[k] * gC[ch];
      gbp[k] = f->light * cdot;
      g->gL += ev->bp[k] * cdot;
    }
  } else {
    for (k = 0; k < 3; k++) g->gcol[k] += gC[k];
  }

  if (ge == 0.0 && gbp[0] == 0.0 && gbp[1] == 0.0 && gbp[2] == 0.0) goto coverage;
  /* depth: e = (far - Zp) zscale */
  gZp = -ge * c->zscale;
  if (c->ortho) {
    /* Zp = sum bt_i Z_i, bp = bt */
    for (k = 0; k < 3; k++) {
      gbt[k] = gZp * f->Z[k] + gbp[k];
      g->gZ[k] += gZp * ev->bt[k];
    }
  } else {
    /* bp_i = bt_i iz_i Zp, Zp = 1/zi, zi = sum bt_i iz_i */
    double gzi, giz[3];
    for (k = 0; k < 3; k++) {
      gbt[k] = gbp[k] * f->iz[k] * ev->Zp;
      giz[k] = gbp[k] * ev->bt[k] * ev->Zp;
      gZp += gbp[k] * ev->bt[k] * f->iz[k];
    }
    gzi = -gZp * ev->Zp * ev->Zp;
    for (k = 0; k < 3; k++) {
      gbt[k] += gzi * f->iz[k];
      giz[k] += gzi * ev->bt[k];
      g->gZ[k] += -giz[k] * f->iz[k] * f->iz[k];
    }
  }
  /* bt = clamp(b)/sum: dbt_i/dcl_j = (delta_ij - bt_i)/sum */
  {
    double dot = gbt[0] * ev->bt[0] + gbt[1] * ev->bt[1] + gbt[2] * ev->bt[2];
    for (k = 0; k < 3; k++) gb[k] = ev->b[k] > 0.0 ? (gbt[k] - dot) / ev->bsum : 0.0;
  }
  /* b_k = E_k / A. The edge functions are linear in p, so their gradients
   * are kept as per-face sums (gE_k, gE_k x, gE_k y) and gA, turned into
   * vertex gradients once per face by dsr_face_grad_finish. */
  {
    double gA = -(gb[0] * ev->b[0] + gb[1] * ev->b[1] + gb[2] * ev->b[2]) * f->invA;
    for (k = 0; k < 3; k++) {
      double gE = gb[k] * f->invA;
      g->gE[k] += gE;
      g->gEx[k] += gE * x;
      g->gEy[k] += gE * y;
    }
    g->gA += gA;
  }

coverage:
  /* coverage: D = sigmoid(x), x = delta d^2 / sigma, dD/dx = D q;
   * d^2 = |p - (a + t (b - a))|^2 with t optimal (envelope theorem):
   * d(d^2)/da = -2 (1 - t)(p - q), d(d^2)/db = -2 t (p - q) */
  {
    double gx = gD * ev->D * ev->q;
    if (gx != 0.0) {
      double gd2 = (ev->inside ? gx : -gx) * c->isigma;
      int ia = ev->edge == 2 ? 0 : ev->edge + 1, ib = ev->edge == 0 ? 2 : ev->edge - 1;
      double rx = -2.0 * gd2 * (x - ev->cx), ry = -2.0 * gd2 * (y - ev->cy);
      g->gpx[ia] += (1.0 - ev->t) * rx;
      g->gpy[ia] += (1.0 - ev->t) * ry;
      g->gpx[ib] += ev->t * rx;
      g->gpy[ib] += ev->t * ry;
    }
  }
}




/* ---- frame, view and the bodies of the renderer's loops -------------------------
 * What every loop of a render and its backward reads, as plain values (a
 * renderer on the host, a batch of instances on a device): the camera
 * frame, the per-frame constants and the image geometry. The loops of
 * render/raster.c and the batch stages of render/raster_batch.h call the
 * bodies below, so both compute the same bits. */
typedef struct dsrFrame {
  double eye[3], xc[3], yc[3], zc[3];
  double up[3];   /* as given */
  double vn, wn;  /* |at - eye| and |up x z_c| (for the camera adjoint) */
  double fov;     /* vertical field of view, radians (perspective) */
  double ax, ay;  /* NDC = (X ax / Z + ox, Y ay / Z + oy) (perspective) or (X ax, Y ay) */
  double ox, oy;  /* the principal point's offset from the image centre, NDC (intrinsics; else 0) */
  int pp;         /* 1: ox, oy are used (0 keeps a centred camera's bits: no + 0.0) */
  int ortho;
} dsrFrame;

typedef struct dsrView {
  dsrFrame fr;
  dsrConst c;
  double light[3];        /* unit light direction (0: a headlight, see dsr_face_light) */
  int head;               /* 1: headlight (light_dir 0, 0, 0) */
  double ambient, directional;
  double bg[4];           /* background RGBA */
  double m0;              /* eps/gamma: the background's softmax exponent */
  int W, H, k;            /* output size, supersampling */
  int premul;             /* 1: output rgb = mean of alpha_s rgb_s (dsRenderSettings.premultiplied) */
  int Wi, Hi;             /* internal size kW x kH */
  double iWi;             /* 1/Wi: column c has centre x = (2c + 1 - Wi)/Wi */
  int tile;               /* tile side in internal pixels: a multiple of k */
  int ntx, nty, ntiles;
} dsrView;

DS_HD DSR_INLINE void dsr_cross3(double r[3], const double a[3], const double b[3]) {
  /* r = a x b */
  double x = a[1] * b[2] - a[2] * b[1], y = a[2] * b[0] - a[0] * b[2], z = a[0] * b[1] - a[1] * b[0];
  r[0] = x;
  r[1] = y;
  r[2] = z;
}

DS_HD DSR_INLINE double dsr_dot3(const double a[3], const double b[3]) {
  return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}

/* camera coordinates of a world point */
DS_HD DSR_INLINE void dsr_to_camera(const dsrFrame* fr, const double p[3], double* X, double* Y, double* Z) {
  double d[3] = {p[0] - fr->eye[0], p[1] - fr->eye[1], p[2] - fr->eye[2]};
  *X = dsr_dot3(d, fr->xc);
  *Y = dsr_dot3(d, fr->yc);
  *Z = dsr_dot3(d, fr->zc);
}

/* Vertex v of verts (3 per vertex) projected: NDC x, NDC y, camera depth Z
 * into out[0..2]. */
DS_HD DSR_INLINE void dsr_project(const dsrView* vw, const dsReal* verts, int v, double* out) {
  const dsrFrame* fr = &vw->fr;
  double p[3] = {verts[3 * v], verts[3 * v + 1], verts[3 * v + 2]}, X, Y, Z;
  dsr_to_camera(fr, p, &X, &Y, &Z);
  if (fr->ortho) {
    out[0] = X * fr->ax;
    out[1] = Y * fr->ay;
  } else {
    out[0] = Z > 0 ? X * fr->ax / Z : 0.0;
    out[1] = Z > 0 ? Y * fr->ay / Z : 0.0;
    if (fr->pp && Z > 0) {
      out[0] += fr->ox;
      out[1] += fr->oy;
    }
  }
  out[2] = Z;
}

/* World positions of face j's vertices. */
DS_HD DSR_INLINE void dsr_face_world(const dsReal* verts, const int* faces, int j, double p[3][3]) {
  int i, k;
  for (i = 0; i < 3; i++) {
    int v = faces[3 * j + i];
    for (k = 0; k < 3; k++) p[i][k] = verts[3 * v + k];
  }
}

/* Light factor of face (world vertices p0, p1, p2): L = k_amb + k_dir
 * max(0, s n_u . l), n_u = n/|n|, n = (p1 - p0) x (p2 - p0), s = +-1 turns the
 * normal toward the camera. Also returns n, |n|, s and whether the
 * directional term is active. */
DS_HD DSR_INLINE double dsr_face_light(const dsrView* vw, const double p[3][3], double n[3], double* nn,
                                       double* sgn, int* lit) {
  double e1[3], e2[3], view[3], cl;
  int i;
  for (i = 0; i < 3; i++) {
    e1[i] = p[1][i] - p[0][i];
    e2[i] = p[2][i] - p[0][i];
  }
  dsr_cross3(n, e1, e2);
  *nn = sqrt(dsr_dot3(n, n));
  *lit = 0;
  *sgn = 1.0;
  if (!(*nn > 0)) return vw->ambient;
  if (vw->fr.ortho) {
    for (i = 0; i < 3; i++) view[i] = -vw->fr.zc[i];
  } else {
    for (i = 0; i < 3; i++) view[i] = vw->fr.eye[i] - (p[0][i] + p[1][i] + p[2][i]) / 3.0;
  }
  *sgn = dsr_dot3(n, view) >= 0 ? 1.0 : -1.0;
  if (vw->head) {
    /* headlight: l = view / |view| (from the face towards the eye) */
    const double vn = sqrt(dsr_dot3(view, view));
    cl = vn > 0 ? *sgn * dsr_dot3(n, view) / (*nn * vn) : 0.0;
  } else {
    cl = *sgn * dsr_dot3(n, vw->light) / *nn;
  }
  if (cl > 0) {
    *lit = 1;
    return vw->ambient + vw->directional * cl;
  }
  return vw->ambient;
}

/* Sets up face j (f) from the projected vertices vproj and the mesh, and
 * its tile range ft = tx0, tx1, ty0, ty1 (empty, x0 > x1, for a face culled
 * or degenerate or off the image). */
DS_HD DSR_INLINE void dsr_face_setup(const dsrView* vw, const dsReal* verts, const int* faces, const dsReal* colors,
                                     int vertex_color, const double* vproj, int j, dsrFace* f, int* ft) {
  const double rr = vw->c.r;
  double xmin, xmax, ymin, ymax, p[3][3], n[3], nn, sg;
  int i, lit, ok = 1;
  for (i = 0; i < 3; i++) {
    int vi = faces[3 * j + i];
    f->px[i] = vproj[3 * vi];
    f->py[i] = vproj[3 * vi + 1];
    f->Z[i] = vproj[3 * vi + 2];
    if (!(f->Z[i] >= vw->c.znear)) ok = 0;
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
  if (!ok) return;
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
  dsr_face_world(verts, faces, j, p);
  f->light = dsr_face_light(vw, p, n, &nn, &sg, &lit);
  if (vertex_color) {
    for (i = 0; i < 3; i++) {
      int vi = faces[3 * j + i], k;
      for (k = 0; k < 3; k++) f->vc[i][k] = colors[3 * vi + k];
    }
  } else {
    for (i = 0; i < 3; i++) f->col[i] = f->light * (double)colors[3 * j + i];
  }
  xmin = fmin(f->px[0], fmin(f->px[1], f->px[2])) - rr;
  xmax = fmax(f->px[0], fmax(f->px[1], f->px[2])) + rr;
  ymin = fmin(f->py[0], fmin(f->py[1], f->py[2])) - rr;
  ymax = fmax(f->py[0], fmax(f->py[1], f->py[2])) + rr;
  {
    /* column c has centre x = (2c + 1 - Wi)/Wi; row has y = (Hi - 1 - 2 row)/Hi;
     * one pixel of margin, clamped in double before converting */
    const int Wi = vw->Wi, Hi = vw->Hi;
    double c0 = floor((xmin * Wi + Wi - 1) * 0.5) - 1, c1 = ceil((xmax * Wi + Wi - 1) * 0.5) + 1;
    double r0 = floor((Hi - 1 - ymax * Hi) * 0.5) - 1, r1 = ceil((Hi - 1 - ymin * Hi) * 0.5) + 1;
    c0 = fmax(c0, 0.0);
    r0 = fmax(r0, 0.0);
    c1 = fmin(c1, (double)(Wi - 1));
    r1 = fmin(r1, (double)(Hi - 1));
    if (!(c0 <= c1) || !(r0 <= r1)) return;
    f->x0 = (int)c0;
    f->x1 = (int)c1;
    f->y0 = (int)r0;
    f->y1 = (int)r1;
    ft[0] = f->x0 / vw->tile;
    ft[1] = f->x1 / vw->tile;
    ft[2] = f->y0 / vw->tile;
    ft[3] = f->y1 / vw->tile;
  }
}

/* Whether tile range ft holds any tile (0: the face reaches no pixel) and
 * whether it spans more than DSR_BIG_TILES tiles. */
DS_HD DSR_INLINE int dsr_ft_valid(const int* ft) { return !(ft[0] > ft[1] || ft[2] > ft[3]); }
DS_HD DSR_INLINE int dsr_ft_big(const int* ft) {
  return (long long)(ft[1] - ft[0] + 1) * (long long)(ft[3] - ft[2] + 1) > DSR_BIG_TILES;
}

/* Pixel state ps = (m, S, T, r, g, b) before any face: the background term
 * starts the softmax (u_bg = 1). */
DS_HD DSR_INLINE void dsr_pixel_init(const dsrView* vw, double* ps) {
  ps[0] = vw->m0;
  ps[1] = 1.0;
  ps[2] = 1.0;
  ps[3] = vw->bg[0];
  ps[4] = vw->bg[1];
  ps[5] = vw->bg[2];
}

/* T *= q and the online softmax update of pixel state ps with one face */
DS_HD DSR_INLINE void dsr_accumulate(const dsrFace* f, const dsrConst* c, double* ps, double D, double q, double e,
                                     const double bp[3]) {
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
    for (k = 0; k < 3; k++) C[k] = f->light * (bp[0] * f->vc[0][k] + bp[1] * f->vc[1][k] + bp[2] * f->vc[2][k]);
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

/* Face f over row `row` (NDC height y) between columns x0 and x1 (already
 * intersected with its box): every column of its span there where it
 * contributes, into the row's pixel states prow (Wi x 6). */
DS_HD DSR_INLINE void dsr_face_row(const dsrView* vw, const dsrFace* f, int row, int x0, int x1, double* prow) {
  const double y = (double)(vw->Hi - 1 - 2 * row) / vw->Hi;
  int col, c0, c1;
  dsr_row_span(f, y, vw->Wi, x0, x1, &c0, &c1);
  for (col = c0; col <= c1; col++) {
    const double x = (double)(2 * col + 1 - vw->Wi) * vw->iWi;
    dsrEval ev;
    if (dsr_eval(f, &vw->c, x, y, &ev, 0)) dsr_accumulate(f, &vw->c, prow + 6 * (size_t)col, ev.D, ev.q, ev.e, ev.bp);
  }
}

/* Turns the numerators of pixel state ps into colours (S = 1: nothing to
 * normalise, exactly). */
DS_HD DSR_INLINE void dsr_pixel_normalize(double* ps) {
  if (ps[1] != 1.0) {
    double inv = 1.0 / ps[1];
    ps[3] *= inv;
    ps[4] *= inv;
    ps[5] *= inv;
  }
}

/* Output pixel (orow, ocol): the mean of its k x k block of pixel states
 * (pix: Wi x Hi x 6), RGBA into out[0..3]. */
DS_HD DSR_INLINE void dsr_downsample(const dsrView* vw, const double* pix, int orow, int ocol, dsReal* out) {
  const int k = vw->k;
  const double ik2 = 1.0 / ((double)k * k), abg = vw->bg[3];
  double acc[4] = {0, 0, 0, 0};
  int a, b, ch;
  for (a = 0; a < k; a++)
    for (b = 0; b < k; b++) {
      const double* ps = pix + 6 * ((size_t)(orow * k + a) * vw->Wi + (size_t)(ocol * k + b));
      const double al = 1.0 - (1.0 - abg) * ps[2], f = vw->premul ? al : 1.0;
      acc[0] += f * ps[3];
      acc[1] += f * ps[4];
      acc[2] += f * ps[5];
      acc[3] += al;
    }
  for (ch = 0; ch < 4; ch++) out[ch] = (dsReal)(acc[ch] * ik2);
}

/* Adjoint of one face over the pixels of its bounding box: given the
 * upstream image gradient d_image (W x H x 4) and the pixel states pix the
 * forward kept, accumulates the face's screen-space gradient into g (zeroed
 * by the caller). */
DS_HD DSR_INLINE void dsr_face_bwd(const dsrView* vw, const dsrFace* f, const double* pix, const dsReal* d_image,
                                   dsrFaceGrad* g) {
  const dsrConst* c = &vw->c;
  const int k = vw->k;
  const double ik2 = 1.0 / ((double)k * k), abg = vw->bg[3];
  int row, col, c0, c1;
  for (row = f->y0; row <= f->y1; row++) {
    double y = (double)(vw->Hi - 1 - 2 * row) / vw->Hi;
    const dsReal* grow = d_image + 4 * (size_t)(row / k) * vw->W;
    dsr_row_span(f, y, vw->Wi, f->x0, f->x1, &c0, &c1);
    for (col = c0; col <= c1; col++) {
      const dsReal* gp = grow + 4 * (col / k);
      const double* ps;
      double x, g4[4], E, u, w, gq, gu, gD, ge, gC[3];
      dsrEval ev;
      if (gp[0] == 0 && gp[1] == 0 && gp[2] == 0 && gp[3] == 0) continue;
      x = (double)(2 * col + 1 - vw->Wi) * vw->iWi;
      if (!dsr_eval(f, c, x, y, &ev, 1)) continue;
      dsr_color(f, c, &ev, ev.C);
      ps = pix + 6 * ((size_t)row * vw->Wi + col);
      g4[0] = gp[0] * ik2;
      g4[1] = gp[1] * ik2;
      g4[2] = gp[2] * ik2;
      g4[3] = gp[3] * ik2;
      if (vw->premul) {
        /* out = mean alpha_s rgb_s: d/drgb_s = alpha_s g, d/dalpha_s += g . rgb_s */
        const double al = 1.0 - (1.0 - abg) * ps[2];
        g4[3] += g4[0] * ps[3] + g4[1] * ps[4] + g4[2] * ps[5];
        g4[0] *= al;
        g4[1] *= al;
        g4[2] *= al;
      }
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
      dsr_eval_bwd(f, c, x, y, &ev, gD, ge, gC, g);
    }
  }
}

/* Face j's screen-space gradient g -> world-space gradients of its three
 * vertices (out, 9) and colour gradients (cout, 9), including the light
 * factor through the normal; cam (DSR_NCAM, NULL: not wanted) receives the
 * face's part of the camera adjoint, lt (DSR_NLIGHT, NULL: not wanted) its
 * part of the light adjoint (see below). */
DS_HD DSR_INLINE void dsr_face_finish(const dsrView* vw, const dsReal* verts, const int* faces, const dsReal* colors,
                                      int vertex_color, int j, const dsrFace* f, const dsrFaceGrad* g0, double* out,
                                      double* cout, double* cam, double* lt) {
  const dsrFrame* fr = &vw->fr;
  double gL = 0.0, p[3][3], n[3], nn, sg;
  int i, k, lit;
  dsrFaceGrad gg = *g0;
  const dsrFaceGrad* g = &gg;
  if (cam)
    for (k = 0; k < DSR_NCAM; k++) cam[k] = 0.0;
  if (lt)
    for (k = 0; k < DSR_NLIGHT; k++) lt[k] = 0.0;
  if (f->x0 > f->x1 || f->y0 > f->y1) {
    /* culled or degenerate: no pixel saw it */
    for (k = 0; k < 9; k++) out[k] = cout[k] = 0.0;
    return;
  }
  dsr_face_grad_finish(f, &gg);
  dsr_face_world(verts, faces, j, p);
  for (i = 0; i < 3; i++) {
    double gX, gY, gZ;
    if (fr->ortho) {
      gX = g->gpx[i] * fr->ax;
      gY = g->gpy[i] * fr->ay;
      gZ = g->gZ[i];
    } else {
      /* px = X ax / Z + ox, py = Y ay / Z + oy: d(px)/dZ = -(px - ox)/Z */
      gX = g->gpx[i] * fr->ax * f->iz[i];
      gY = g->gpy[i] * fr->ay * f->iz[i];
      gZ = g->gZ[i] - (g->gpx[i] * (f->px[i] - fr->ox) + g->gpy[i] * (f->py[i] - fr->oy)) * f->iz[i];
    }
    for (k = 0; k < 3; k++) out[3 * i + k] = gX * fr->xc[k] + gY * fr->yc[k] + gZ * fr->zc[k];
    if (cam) {
      /* X = (p - eye).x_c etc.: dL/dx_c += gX (p - eye), dL/d(eye) -= the
       * projection part of dL/dp; the scale and offset parts as DSR_NCAM says */
      for (k = 0; k < 3; k++) {
        double d = p[i][k] - fr->eye[k];
        cam[k] += gX * d;
        cam[3 + k] += gY * d;
        cam[6 + k] += gZ * d;
        cam[9 + k] -= out[3 * i + k];
      }
      cam[12] += g->gpx[i] * (f->px[i] - fr->ox);
      cam[13] += g->gpy[i] * (f->py[i] - fr->oy);
      cam[14] += g->gpx[i];
      cam[15] += g->gpy[i];
    }
  }
  if (vertex_color) {
    for (i = 0; i < 3; i++)
      for (k = 0; k < 3; k++) cout[3 * i + k] = g->gvc[i][k];
    gL = g->gL;
  } else {
    for (k = 0; k < 3; k++) {
      cout[k] = g->gcol[k] * f->light;
      gL += g->gcol[k] * (double)colors[3 * j + k];
    }
  }
  if (gL == 0.0) return;
  dsr_face_light(vw, p, n, &nn, &sg, &lit);
  /* light adjoint (lt), beside dsr_face_light's L = k_amb + k_dir max(0, s n_u . l):
   *   dL/dk_amb = gL,  dL/dk_dir = gL max(0, s n_u . l),
   *   dL/dl = gL k_dir s n_u where s n_u . l > 0, else 0
   * (l unit; raster.c's light_adjoint takes it through the normalisation).
   * At the kink s n_u . l = 0 the inactive side, as the forward. A
   * headlight's l follows the camera and the face: its part goes to them
   * (below), none to light_dir. */
  if (lt) lt[0] = gL;
  if (!lit) return;
  {
    /* L = k_amb + k_dir s n.l/|n|: dL/dn = k_dir s (l - n_u (n_u.l))/|n|;
     * n = e1 x e2: dn/de1^T g = e2 x g, dn/de2^T g = g x e1 */
    const double kd = vw->directional;
    double gn[3], e1[3], e2[3], ge1[3], ge2[3], nl = 0.0, l[3], v[3], vn = 1.0;
    if (vw->head) {
      /* headlight l = v/|v|, v = eye - (p0 + p1 + p2)/3 (orthographic: v = -z_c):
       * dL/dv = k_dir s (n_u - l (n_u.l))/|v|, dv/dp_i = -I/3, dv/d(eye) = I */
      for (k = 0; k < 3; k++) v[k] = fr->ortho ? -fr->zc[k] : fr->eye[k] - (p[0][k] + p[1][k] + p[2][k]) / 3.0;
      vn = sqrt(dsr_dot3(v, v));
      for (k = 0; k < 3; k++) l[k] = v[k] / vn;
    } else {
      for (k = 0; k < 3; k++) l[k] = vw->light[k];
    }
    for (k = 0; k < 3; k++) nl += n[k] / nn * l[k];
    if (lt) {
      lt[1] = gL * sg * nl;
      for (k = 0; k < 3 && !vw->head; k++) lt[2 + k] = gL * kd * sg * n[k] / nn;
    }
    for (k = 0; k < 3; k++) gn[k] = gL * kd * sg * (l[k] - n[k] / nn * nl) / nn;
    if (vw->head) {
      double gv[3];
      for (k = 0; k < 3; k++) gv[k] = gL * kd * sg * (n[k] / nn - l[k] * nl) / vn;
      if (fr->ortho) {
        /* v = -z_c, unit: dL/dz_c = -dL/dl (raw partial, like the projection's) */
        if (cam)
          for (k = 0; k < 3; k++) cam[6 + k] -= gL * kd * sg * n[k] / nn;
      } else {
        for (i = 0; i < 3; i++)
          for (k = 0; k < 3; k++) out[3 * i + k] -= gv[k] / 3.0;
        if (cam)
          for (k = 0; k < 3; k++) cam[9 + k] += gv[k];
      }
    }
    for (k = 0; k < 3; k++) {
      e1[k] = p[1][k] - p[0][k];
      e2[k] = p[2][k] - p[0][k];
    }
    dsr_cross3(ge1, e2, gn);
    dsr_cross3(ge2, gn, e1);
    for (k = 0; k < 3; k++) {
      out[3 + k] += ge1[k];
      out[6 + k] += ge2[k];
      out[k] -= ge1[k] + ge2[k];
    }
  }
}

/* The light adjoint's per-face parts (flight, nface x DSR_NLIGHT, as
 * dsr_face_finish's lt) summed in face order into acc (DSR_NLIGHT): the
 * single renderer's and the batched one's, so their sums are the same bits;
 * ds__raster_light_finish (render/raster.c) turns acc into the settings'
 * gradient. */
DS_HD DSR_INLINE void dsr_light_sum(const double* flight, int nface, double* acc) {
  for (int j = 0; j < nface; j++)
    for (int k = 0; k < DSR_NLIGHT; k++) acc[k] += flight[DSR_NLIGHT * (size_t)j + k];
}

#endif

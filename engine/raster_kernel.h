/* Per face-pixel math of the soft rasterizer, forward and adjoint side by
 * side (DS_HD: compiles as C and as CUDA C++). Everything is double
 * precision internally, whatever dsReal is. See engine/raster.c for the
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
#ifndef DSIM_ENGINE_RASTER_KERNEL_H
#define DSIM_ENGINE_RASTER_KERNEL_H

#include <math.h>

#include "engine/hd.h"

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
  double il2[3];             /* 1/|edge k|^2 */
  double light;              /* lighting factor L = k_amb + k_dir max(0, n.l) */
  double col[3];             /* flat: base colour times L; vertex mode: unused */
  double vc[3][3];           /* vertex mode: base colour of each vertex */
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
  double C[3];       /* face colour at the pixel (lit) */
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
} dsrFaceGrad;

/* D = sigmoid(x), q = 1 - D without cancellation. For x > 40, q < 4.3e-18 is
 * flushed to 0 (and D = 1): saves the exp deep inside faces; the forward and
 * the adjoint use the same values, so the adjoint stays exact for them. */
DS_HD DS_INLINE void dsr_sigmoid(double x, double* D, double* q) {
  if (x > 40.0) {
    *D = 1.0;
    *q = 0.0;
  } else if (x >= 0.0) {
    double ex = exp(-x);
    *D = 1.0 / (1.0 + ex);
    *q = ex / (1.0 + ex);
  } else {
    double ex = exp(x);
    *q = 1.0 / (1.0 + ex);
    *D = ex / (1.0 + ex);
  }
}

/* Columns [*c0, *c1] of the row at NDC height y where face f can contribute
 * (s_k >= -r for every edge; one column of margin against rounding; the
 * per-pixel test stays exact), intersected with [lo, hi]. Wi: image width,
 * column c has centre x = (2c + 1 - Wi)/Wi. */
DS_HD DS_INLINE void dsr_row_span(const dsrFace* f, const dsrConst* c, double y, int Wi, int lo,
                                  int hi, int* c0, int* c1) {
  double xl = -1e30, xh = 1e30, a, b;
  int k;
  for (k = 0; k < 3; k++) {
    a = f->ea[k] * f->en[k];
    b = (f->eb[k] * y + f->ec[k]) * f->en[k] + c->r;
    /* a x + b >= 0 */
    if (a > 1e-300) {
      double v = -b / a;
      if (v > xl) xl = v;
    } else if (a < -1e-300) {
      double v = -b / a;
      if (v < xh) xh = v;
    } else if (b < 0.0) {
      *c0 = 1;
      *c1 = 0;
      return;
    }
  }
  if (!(xl <= xh)) {
    *c0 = 1;
    *c1 = 0;
    return;
  }
  xl = floor((xl * Wi + Wi - 1) * 0.5) - 1.0;
  xh = ceil((xh * Wi + Wi - 1) * 0.5) + 1.0;
  *c0 = xl > (double)lo ? (int)xl : lo;
  *c1 = xh < (double)hi ? (int)xh : hi;
}

/* Closest point of segment k (from v_{k+1} to v_{k+2}) to (x, y): returns the
 * squared distance, the parameter t and the point. */
DS_HD DS_INLINE double dsr_seg(const dsrFace* f, int k, double x, double y, double* t, double* qx,
                               double* qy) {
  const int ia = k == 2 ? 0 : k + 1, ib = k == 0 ? 2 : k - 1;
  const double ax = f->px[ia], ay = f->py[ia];
  const double ux = f->px[ib] - ax, uy = f->py[ib] - ay;
  double tt = ((x - ax) * ux + (y - ay) * uy) * f->il2[k];
  if (tt < 0.0) tt = 0.0;
  if (tt > 1.0) tt = 1.0;
  *t = tt;
  *qx = ax + tt * ux;
  *qy = ay + tt * uy;
  return (x - *qx) * (x - *qx) + (y - *qy) * (y - *qy);
}

/* Forward for face f at pixel centre (x, y). Returns 0 when the face does not
 * contribute there (outside by more than the cut-off, so D < 1e-4; or its
 * depth at the pixel is outside [near, far]). full = 1 also fills what the
 * adjoint needs (closest point, perspective barycentrics); every value the
 * forward uses is computed the same way either way. */
DS_HD DS_INLINE int dsr_eval(const dsrFace* f, const dsrConst* c, double x, double y,
                             dsrEval* ev, int full) {
  const double E0 = f->ea[0] * x + f->eb[0] * y + f->ec[0];
  const double E1 = f->ea[1] * x + f->eb[1] * y + f->ec[1];
  const double E2 = f->ea[2] * x + f->eb[2] * y + f->ec[2];
  const double s0 = E0 * f->en[0], s1 = E1 * f->en[1], s2 = E2 * f->en[2];
  const double nr = -c->r;
  double d2;
  int k;
  if (s0 < nr || s1 < nr || s2 < nr) return 0;
  ev->inside = (s0 >= 0.0 && s1 >= 0.0 && s2 >= 0.0);
  if (ev->inside) {
    /* For a point inside a convex polygon the nearest boundary point is the
     * foot of the perpendicular on the nearest edge line, which lies on the
     * edge itself. */
    int kk = 0;
    double sm = s0;
    if (s1 < sm) sm = s1, kk = 1;
    if (s2 < sm) sm = s2, kk = 2;
    d2 = sm * sm;
    if (full) {
      ev->edge = kk;
      dsr_seg(f, kk, x, y, &ev->t, &ev->cx, &ev->cy);
    }
  } else {
    /* Outside: the nearest boundary point lies on an edge whose line has p
     * on its outer side (s_k < 0); take the nearest such segment. */
    double t, qx, qy, dd;
    d2 = 1e300;
    ev->edge = -1;
    if (s0 < 0.0) {
      dd = dsr_seg(f, 0, x, y, &t, &qx, &qy);
      if (dd < d2) d2 = dd, ev->t = t, ev->cx = qx, ev->cy = qy, ev->edge = 0;
    }
    if (s1 < 0.0) {
      dd = dsr_seg(f, 1, x, y, &t, &qx, &qy);
      if (dd < d2) d2 = dd, ev->t = t, ev->cx = qx, ev->cy = qy, ev->edge = 1;
    }
    if (s2 < 0.0) {
      dd = dsr_seg(f, 2, x, y, &t, &qx, &qy);
      if (dd < d2) d2 = dd, ev->t = t, ev->cx = qx, ev->cy = qy, ev->edge = 2;
    }
    if (!(d2 <= c->r2)) return 0;
  }

  /* barycentrics, clamped outside the face */
  {
    const double b0 = E0 * f->invA, b1 = E1 * f->invA, b2 = E2 * f->invA;
    const double c0 = b0 > 0.0 ? b0 : 0.0, c1 = b1 > 0.0 ? b1 : 0.0, c2 = b2 > 0.0 ? b2 : 0.0;
    const double sum = c0 + c1 + c2, is = 1.0 / sum;
    ev->b[0] = b0;
    ev->b[1] = b1;
    ev->b[2] = b2;
    ev->bsum = sum;
    ev->bt[0] = c0 * is;
    ev->bt[1] = c1 * is;
    ev->bt[2] = c2 * is;
  }
  if (c->ortho) {
    ev->Zp = ev->bt[0] * f->Z[0] + ev->bt[1] * f->Z[1] + ev->bt[2] * f->Z[2];
    if (full || c->vertex_color)
      for (k = 0; k < 3; k++) ev->bp[k] = ev->bt[k];
  } else {
    ev->Zp = 1.0 / (ev->bt[0] * f->iz[0] + ev->bt[1] * f->iz[1] + ev->bt[2] * f->iz[2]);
    if (full || c->vertex_color)
      for (k = 0; k < 3; k++) ev->bp[k] = ev->bt[k] * f->iz[k] * ev->Zp;
  }
  if (ev->Zp < c->znear || ev->Zp > c->zfar) return 0;
  ev->e = (c->zfar - ev->Zp) * c->zscale;
  dsr_sigmoid((ev->inside ? d2 : -d2) * c->isigma, &ev->D, &ev->q);
  if (c->vertex_color) {
    for (k = 0; k < 3; k++)
      ev->C[k] = f->light * (ev->bp[0] * f->vc[0][k] + ev->bp[1] * f->vc[1][k] +
                             ev->bp[2] * f->vc[2][k]);
  } else {
    ev->C[0] = f->col[0];
    ev->C[1] = f->col[1];
    ev->C[2] = f->col[2];
  }
  return 1;
}

/* Adjoint of dsr_eval at pixel (x, y): given dL/dD (total, including the
 * alpha path through q = 1 - D), dL/de and dL/dC, accumulates the face's
 * screen-space gradient into g. */
DS_HD DS_INLINE void dsr_eval_bwd(const dsrFace* f, const dsrConst* c, double x, double y,
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
  /* b_k = E_k / A */
  {
    double gA = -(gb[0] * ev->b[0] + gb[1] * ev->b[1] + gb[2] * ev->b[2]) * f->invA;
    for (k = 0; k < 3; k++) {
      /* E_k = cross(a - p, b - p), a = v_{k+1}, b = v_{k+2};
       * d cross(u, w)/du = (w.y, -w.x), d/dw = (-u.y, u.x) */
      int ia = k == 2 ? 0 : k + 1, ib = k == 0 ? 2 : k - 1;
      double gE = gb[k] * f->invA;
      double ux = f->px[ia] - x, uy = f->py[ia] - y;
      double wx = f->px[ib] - x, wy = f->py[ib] - y;
      g->gpx[ia] += gE * wy;
      g->gpy[ia] -= gE * wx;
      g->gpx[ib] -= gE * uy;
      g->gpy[ib] += gE * ux;
    }
    /* A = cross(v1 - v0, v2 - v0) */
    {
      double e1x = f->px[1] - f->px[0], e1y = f->py[1] - f->py[0];
      double e2x = f->px[2] - f->px[0], e2y = f->py[2] - f->py[0];
      double g1x = gA * e2y, g1y = -gA * e2x, g2x = -gA * e1y, g2y = gA * e1x;
      g->gpx[1] += g1x;
      g->gpy[1] += g1y;
      g->gpx[2] += g2x;
      g->gpy[2] += g2y;
      g->gpx[0] -= g1x + g2x;
      g->gpy[0] -= g1y + g2y;
    }
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

#endif

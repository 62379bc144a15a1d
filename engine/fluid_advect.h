/* Advection on the MAC grid, forward and adjoint (included by engine/fluid.c).
 *
 * Interpolation. A field q on grid G (FGrid) is sampled at x by
 * (tri)linear weights: per axis s = x/dx - off, i0 = floor(s), f = s - i0,
 * nodes i0, i0 + 1 with weights 1 - f, f. A periodic axis wraps the
 * indices; any other clamps s to [0, cnt - 1] (constant extrapolation, so
 * ds/dx = 0 outside). q(x) = sum_c w_c(x) q_c, and
 *   dq(x)/dq_c = w_c(x),   dq(x)/dx_d = sum_c dw_c/dx_d q_c,
 * with dw_c/dx_d = (+-1/dx) prod_{e != d} w_e (0 where clamped).
 *
 * Semi-Lagrangian (SL), time step h at the nodes x_p of G:
 *   out_p = q(x_p - h V(x_p)),   V_a(x) = u_a(x) sampled on face grid a.
 * Adjoint, given g_p = dL/dout_p: q_c += g_p w_c(y_p) (y_p the departure
 * point); gy = g_p dq/dy(y_p); u_a's nodes c += (-h gy_a) w^a_c(x_p).
 * The weights w^a(x_p) of the velocity do not depend on u, so that is the
 * whole derivative. Scatters race, so the adjoints run serially; the
 * forward gathers run on OpenMP threads (each output written by one
 * iteration: bitwise the same for every thread count).
 *
 * MacCormack (Selle et al. 2008):
 *   hat = SL(q, dt),  back = SL(hat, -dt),  mc = hat + (q - back) / 2,
 *   out = clamp(mc, min_c q_c, max_c q_c) over the 2^dim nodes of the SL
 * stencil at the forward departure point (we clamp rather than revert to
 * SL: the result stays continuous in q where the clamp is inactive, and the
 * clamp's derivative is a copy of one node's value). Adjoint with the
 * branch the forward took (recomputed bit for bit from the same inputs):
 *   clamped to max/min:  q_argmax/argmin += g (the first such node);
 *   otherwise:           hat += g, q += g / 2, back -= g / 2;
 * then the adjoints of back = SL(hat, -dt) and hat = SL(q, dt) above. The
 * stencil choice is piecewise constant in the departure point, so the
 * clamped branch gives nothing to u. */
#ifndef DSIM_ENGINE_FLUID_ADVECT_H
#define DSIM_ENGINE_FLUID_ADVECT_H

#include <math.h>

#include "engine/fluid_priv.h"

/* Above this many outputs a forward loop runs on OpenMP threads; below,
 * it skips the runtime altogether (entering a team, even with an if clause
 * that leaves it one thread, costs more than a small grid's loop). */
#define FL_PAR_MIN 4096
#ifdef _OPENMP
#define FL_PFOR(big, i, n, ...)                      \
  do {                                               \
    if (big) {                                       \
      _Pragma("omp parallel for schedule(static)")   \
      for (int i = 0; i < (n); i++) { __VA_ARGS__ }  \
    } else {                                         \
      for (int i = 0; i < (n); i++) { __VA_ARGS__ }  \
    }                                                \
  } while (0)
#else
#define FL_PFOR(big, i, n, ...) \
  do {                          \
    (void)(big);                \
    for (int i = 0; i < (n); i++) { __VA_ARGS__ } \
  } while (0)
#endif

typedef struct Stencil {
  int n;
  int idx[8];
  double w[8];
  double dw[8][3]; /* dw/dx_d, 1/m */
} Stencil;

/* node p of G: its position x (m) */
static inline void grid_pos(const FGrid* g, int p, double dx, double x[3]) {
  int i = p % g->cnt[0], j = (p / g->cnt[0]) % g->cnt[1], k = p / (g->cnt[0] * g->cnt[1]);
  x[0] = (i + g->off[0]) * dx;
  x[1] = (j + g->off[1]) * dx;
  x[2] = (k + g->off[2]) * dx;
}

/* the interpolation stencil of G at x, over dim axes (the others: node 0);
 * the weights' derivatives only when grad is set (the adjoint's) */
static inline void stencil_g(const FGrid* g, int dim, double dx, const double x[3], Stencil* st, int grad) {
  int i0[3] = {0, 0, 0}, i1[3] = {0, 0, 0};
  double f[3] = {0, 0, 0}, dfdx[3] = {0, 0, 0};
  for (int d = 0; d < dim; d++) {
    int c = g->cnt[d];
    double s = x[d] / dx - g->off[d], fl;
    if (g->per[d]) {
      fl = floor(s / c);
      s -= fl * c;
      int a = (int)floor(s);
      if (a >= c) a = c - 1; /* s rounded up to c */
      if (a < 0) a = 0;
      i0[d] = a;
      i1[d] = (a + 1) % c;
      f[d] = s - a;
      dfdx[d] = 1 / dx;
    } else if (c == 1) {
      i0[d] = i1[d] = 0;
    } else if (s <= 0) {
      i0[d] = 0, i1[d] = 1, f[d] = 0;
    } else if (s >= c - 1) {
      i0[d] = c - 2, i1[d] = c - 1, f[d] = 1;
    } else {
      fl = floor(s);
      i0[d] = (int)fl, i1[d] = i0[d] + 1, f[d] = s - fl;
      dfdx[d] = 1 / dx;
    }
  }
  int sy = g->cnt[0], sz = g->cnt[0] * g->cnt[1];
  int ix[2] = {i0[0], i1[0]}, iy[2] = {i0[1] * sy, i1[1] * sy}, iz[2] = {i0[2] * sz, i1[2] * sz};
  double wx[2] = {1 - f[0], f[0]}, wy[2] = {1 - f[1], f[1]}, wz[2] = {1, 0};
  if (dim == 3) wz[0] = 1 - f[2], wz[1] = f[2];
  st->n = 1 << dim;
  for (int c = 0; c < st->n; c++) {
    int a = c & 1, b = (c >> 1) & 1, e = (c >> 2) & 1;
    st->idx[c] = ix[a] + iy[b] + iz[e];
    st->w[c] = wx[a] * wy[b] * wz[e];
    if (!grad) continue;
    st->dw[c][0] = (a ? dfdx[0] : -dfdx[0]) * wy[b] * wz[e];
    st->dw[c][1] = (b ? dfdx[1] : -dfdx[1]) * wx[a] * wz[e];
    st->dw[c][2] = dim == 3 ? (e ? dfdx[2] : -dfdx[2]) * wx[a] * wy[b] : 0;
  }
}

static inline void stencil(const FGrid* g, int dim, double dx, const double x[3], Stencil* st) {
  stencil_g(g, dim, dx, x, st, 0);
}

static inline double st_sample(const Stencil* st, const double* q) {
  double v = 0;
  for (int c = 0; c < st->n; c++) v += st->w[c] * q[st->idx[c]];
  return v;
}

/* V(x) from the face velocities u */
static inline void vel_at(const dsFluidModel* m, const double* u, const double x[3], double v[3], Stencil* sv) {
  v[0] = v[1] = v[2] = 0;
  for (int a = 0; a < m->dim; a++) {
    stencil(&m->faceg[a], m->dim, m->def.dx, x, &sv[a]);
    v[a] = st_sample(&sv[a], u + m->foff[a]);
  }
}

/* departure point y = x_p - h V(x_p) of node p of G, and its stencil (with
 * the weights' derivatives when grad is set) */
static inline void depart(const dsFluidModel* m, const FGrid* g, const double* u, double h, int p, Stencil* sv,
                          Stencil* sq, int grad) {
  double x[3], v[3], y[3];
  grid_pos(g, p, m->def.dx, x);
  vel_at(m, u, x, v, sv);
  for (int d = 0; d < 3; d++) y[d] = x[d] - h * v[d];
  stencil_g(g, m->dim, m->def.dx, y, sq, grad);
}

/* out = SL(q, h) on G */
static void sl_fwd(const dsFluidModel* m, const FGrid* g, const double* q, const double* u, double h, double* out) {
  FL_PFOR(g->np > FL_PAR_MIN, p, g->np, {
    Stencil sv[3], sq;
    depart(m, g, u, h, p, sv, &sq, 0);
    out[p] = st_sample(&sq, q);
  });
}

/* adjoint of out = SL(q, h): gq += , gu += (from gout) */
static void sl_bwd(const dsFluidModel* m, const FGrid* g, const double* q, const double* u, double h,
                   const double* gout, double* gq, double* gu) {
  for (int p = 0; p < g->np; p++) {
    double gp = gout[p];
    if (gp == 0) continue;
    Stencil sv[3], sq;
    depart(m, g, u, h, p, sv, &sq, 1);
    double gy[3] = {0, 0, 0};
    for (int c = 0; c < sq.n; c++) {
      gq[sq.idx[c]] += gp * sq.w[c];
      for (int d = 0; d < m->dim; d++) gy[d] += gp * sq.dw[c][d] * q[sq.idx[c]];
    }
    for (int a = 0; a < m->dim; a++) {
      double gv = -h * gy[a];
      double* ga = gu + m->foff[a];
      for (int c = 0; c < sv[a].n; c++) ga[sv[a].idx[c]] += gv * sv[a].w[c];
    }
  }
}

/* MacCormack's clamped value at node p; *branch: 0 unclamped, else 1 + the
 * index (in q) of the node it was clamped to */
static inline double mc_value(const dsFluidModel* m, const FGrid* g, const double* q, const double* u,
                              const double* hat, const double* back, int p, int* branch) {
  Stencil sv[3], sq;
  depart(m, g, u, m->def.dt, p, sv, &sq, 0);
  int imin = sq.idx[0], imax = sq.idx[0];
  for (int c = 1; c < sq.n; c++) {
    if (q[sq.idx[c]] < q[imin]) imin = sq.idx[c];
    if (q[sq.idx[c]] > q[imax]) imax = sq.idx[c];
  }
  double v = hat[p] + 0.5 * (q[p] - back[p]);
  *branch = 0;
  if (v > q[imax]) {
    *branch = 1 + imax;
    return q[imax];
  }
  if (v < q[imin]) {
    *branch = 1 + imin;
    return q[imin];
  }
  return v;
}

static void mc_fwd(const dsFluidModel* m, const FGrid* g, const double* q, const double* u, double* out, double* hat,
                   double* back) {
  sl_fwd(m, g, q, u, m->def.dt, hat);
  sl_fwd(m, g, hat, u, -m->def.dt, back);
  FL_PFOR(g->np > FL_PAR_MIN, p, g->np, {
    int br;
    out[p] = mc_value(m, g, q, u, hat, back, p, &br);
  });
}

static void mc_bwd(const dsFluidModel* m, const FGrid* g, const double* q, const double* u, const double* gout,
                   double* gq, double* gu, dsFluidData* d) {
  sl_fwd(m, g, q, u, m->def.dt, d->hat);
  sl_fwd(m, g, d->hat, u, -m->def.dt, d->back);
  for (int p = 0; p < g->np; p++) {
    int br;
    d->ghat[p] = d->gback[p] = 0;
    (void)mc_value(m, g, q, u, d->hat, d->back, p, &br);
    if (br) {
      gq[br - 1] += gout[p];
    } else {
      d->ghat[p] = gout[p];
      gq[p] += 0.5 * gout[p];
      d->gback[p] = -0.5 * gout[p];
    }
  }
  sl_bwd(m, g, d->hat, u, -m->def.dt, d->gback, d->ghat, gu);
  sl_bwd(m, g, q, u, m->def.dt, d->ghat, gq, gu);
}

/* advect field q (on G) by u with the model's scheme */
static void advect_fwd(const dsFluidModel* m, dsFluidData* d, const FGrid* g, const double* q, const double* u,
                       double* out) {
  if (m->def.advection == DS_FLUID_MACCORMACK)
    mc_fwd(m, g, q, u, out, d->hat, d->back);
  else
    sl_fwd(m, g, q, u, m->def.dt, out);
}

static void advect_bwd(const dsFluidModel* m, dsFluidData* d, const FGrid* g, const double* q, const double* u,
                       const double* gout, double* gq, double* gu) {
  if (m->def.advection == DS_FLUID_MACCORMACK)
    mc_bwd(m, g, q, u, gout, gq, gu, d);
  else
    sl_bwd(m, g, q, u, m->def.dt, gout, gq, gu);
}

#endif

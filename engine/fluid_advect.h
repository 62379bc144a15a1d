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
#include <string.h>

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

/* the interpolation along axis d of G at coordinate xd: nodes i0, i1,
 * fraction f (weights 1 - f, f) and df/dx (0 where clamped) */
static inline FAxis axis_weights(const FGrid* g, int d, double dx, double xd) {
  FAxis r = {0, 0, 0, 0};
  int c = g->cnt[d];
  double s = xd / dx - g->off[d], fl;
  if (g->per[d]) {
    fl = floor(s / c);
    s -= fl * c;
    int a = (int)floor(s);
    if (a >= c) a = c - 1; /* s rounded up to c */
    if (a < 0) a = 0;
    r.i0 = a;
    r.i1 = (a + 1) % c;
    r.f = s - a;
    r.dfdx = 1 / dx;
  } else if (c == 1) {
    r.i0 = r.i1 = 0;
  } else if (s <= 0) {
    r.i0 = 0, r.i1 = 1, r.f = 0;
  } else if (s >= c - 1) {
    r.i0 = c - 2, r.i1 = c - 1, r.f = 1;
  } else {
    fl = floor(s);
    r.i0 = (int)fl, r.i1 = r.i0 + 1, r.f = s - fl;
    r.dfdx = 1 / dx;
  }
  return r;
}

/* the stencil of G (cnt0 x cnt1 nodes per slab) from its axes ax[0..2]
 * (those from dim on: node 0, weight 1); the weights' derivatives only
 * when grad is set (the adjoint's) */
static inline void stencil_axes(const FGrid* g, int dim, const FAxis ax[3], Stencil* st, int grad) {
  int sy = g->cnt[0], sz = g->cnt[0] * g->cnt[1];
  int ix[2] = {ax[0].i0, ax[0].i1}, iy[2] = {ax[1].i0 * sy, ax[1].i1 * sy}, iz[2] = {ax[2].i0 * sz, ax[2].i1 * sz};
  double wx[2] = {1 - ax[0].f, ax[0].f}, wy[2] = {1 - ax[1].f, ax[1].f}, wz[2] = {1, 0};
  if (dim == 3) wz[0] = 1 - ax[2].f, wz[1] = ax[2].f;
  st->n = 1 << dim;
  for (int c = 0; c < st->n; c++) {
    int a = c & 1, b = (c >> 1) & 1, e = (c >> 2) & 1;
    st->idx[c] = ix[a] + iy[b] + iz[e];
    st->w[c] = wx[a] * wy[b] * wz[e];
    if (!grad) continue;
    st->dw[c][0] = (a ? ax[0].dfdx : -ax[0].dfdx) * wy[b] * wz[e];
    st->dw[c][1] = (b ? ax[1].dfdx : -ax[1].dfdx) * wx[a] * wz[e];
    st->dw[c][2] = dim == 3 ? (e ? ax[2].dfdx : -ax[2].dfdx) * wx[a] * wy[b] : 0;
  }
}

/* the interpolation stencil of G at x, over dim axes (the others: node 0) */
static inline void stencil_g(const FGrid* g, int dim, double dx, const double x[3], Stencil* st, int grad) {
  FAxis ax[3] = {{0, 0, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0}};
  for (int d = 0; d < dim; d++) ax[d] = axis_weights(g, d, dx, x[d]);
  stencil_axes(g, dim, ax, st, grad);
}

static inline void stencil(const FGrid* g, int dim, double dx, const double x[3], Stencil* st) {
  stencil_g(g, dim, dx, x, st, 0);
}

static inline double st_sample(const Stencil* st, const double* q) {
  double v = 0;
  for (int c = 0; c < st->n; c++) v += st->w[c] * q[st->idx[c]];
  return v;
}

/* The grids whose nodes are departure origins: the face grids 0..2, the
 * cells 3. */
static inline int grid_id(const dsFluidModel* m, const FGrid* g) { return g == &m->cellg ? 3 : (int)(g - m->faceg); }

/* V at node (i, j, k) of G (id gi) from the face velocities u, through the
 * model's tables of the face grids' axis weights at G's node coordinates
 * (fluid.c, build_vtab: the same arithmetic as stencil() at grid_pos, so
 * the same bits, without recomputing them for every node) */
static inline void vel_at_node(const dsFluidModel* m, int gi, const int ijk[3], const double* u, double v[3],
                               Stencil* sv) {
  v[0] = v[1] = v[2] = 0;
  for (int a = 0; a < m->dim; a++) {
    FAxis ax[3] = {{0, 0, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0}};
    for (int d = 0; d < m->dim; d++) ax[d] = m->vtab[gi][a][d][ijk[d]];
    stencil_axes(&m->faceg[a], m->dim, ax, &sv[a], 0);
    v[a] = st_sample(&sv[a], u + m->foff[a]);
  }
}

/* V at node (i, j, k) of G as vel_at_node, without the terms of zero
 * weight (an axis at f = 0: node i0 alone, weight 1): the remaining terms
 * are the same products summed in the same order, so V is the same up to
 * the sign of a zero, which the departure point x - h V does not see */
static inline void vel_at_node_fast(const dsFluidModel* m, int gi, const int ijk[3], const double* u, double v[3]) {
  v[0] = v[1] = v[2] = 0;
  for (int a = 0; a < m->dim; a++) {
    const FGrid* fg = &m->faceg[a];
    const FAxis* tx = &m->vtab[gi][a][0][ijk[0]];
    const FAxis* ty = &m->vtab[gi][a][1][ijk[1]];
    const int sy = fg->cnt[0], sz = fg->cnt[0] * fg->cnt[1];
    int ix[2] = {tx->i0, tx->i1}, iy[2] = {ty->i0 * sy, ty->i1 * sy}, iz[2] = {0, 0};
    double wx[2] = {1 - tx->f, tx->f}, wy[2] = {1 - ty->f, ty->f}, wz[2] = {1, 0};
    int nx = tx->f != 0 ? 2 : 1, ny = ty->f != 0 ? 2 : 1, nz = 1;
    if (m->dim == 3) {
      const FAxis* tz = &m->vtab[gi][a][2][ijk[2]];
      iz[0] = tz->i0 * sz, iz[1] = tz->i1 * sz;
      wz[0] = 1 - tz->f, wz[1] = tz->f;
      nz = tz->f != 0 ? 2 : 1;
    }
    const double* ua = u + m->foff[a];
    double acc = 0;
    for (int e = 0; e < nz; e++)
      for (int b = 0; b < ny; b++)
        for (int c = 0; c < nx; c++) acc += wx[c] * wy[b] * wz[e] * ua[ix[c] + iy[b] + iz[e]];
    v[a] = acc;
  }
}

/* departure point y = x_p - h V(x_p) of node p = (i, j, k) of G, and its
 * stencil (with the weights' derivatives when grad is set); sv: the
 * velocity's stencils (the adjoint's), NULL when not needed */
static inline void depart_ijk(const dsFluidModel* m, const FGrid* g, int gi, const double* u, double h,
                              const int ijk[3], Stencil* sv, Stencil* sq, int grad) {
  double x[3], v[3], y[3];
  for (int d = 0; d < 3; d++) x[d] = (ijk[d] + g->off[d]) * m->def.dx;
  if (sv)
    vel_at_node(m, gi, ijk, u, v, sv);
  else
    vel_at_node_fast(m, gi, ijk, u, v);
  for (int d = 0; d < 3; d++) y[d] = x[d] - h * v[d];
  stencil_g(g, m->dim, m->def.dx, y, sq, grad);
}

static inline void depart(const dsFluidModel* m, const FGrid* g, const double* u, double h, int p, Stencil* sv,
                          Stencil* sq, int grad) {
  int ijk[3] = {p % g->cnt[0], (p / g->cnt[0]) % g->cnt[1], p / (g->cnt[0] * g->cnt[1])};
  depart_ijk(m, g, grid_id(m, g), u, h, ijk, sv, sq, grad);
}

/* 1 when q (n values) is zero everywhere: its advection is zero (a
 * convex combination of zeros, +0 bit for bit, as is MacCormack's) */
static int all_zero(const double* q, int n) {
  for (int i = 0; i < n; i++)
    if (q[i] != 0) return 0;
  return 1;
}

/* out = SL(q, h) on G; rows of cnt[0] nodes, each output one gather */
static void sl_fwd(const dsFluidModel* m, const FGrid* g, const double* q, const double* u, double h, double* out) {
  const int gi = grid_id(m, g), nx = g->cnt[0], nrow = g->cnt[1] * g->cnt[2];
  FL_PFOR(g->np > FL_PAR_MIN, r, nrow, {
    int ijk[3] = {0, r % g->cnt[1], r / g->cnt[1]};
    for (ijk[0] = 0; ijk[0] < nx; ijk[0]++) {
      Stencil sq;
      depart_ijk(m, g, gi, u, h, ijk, NULL, &sq, 0);
      out[r * nx + ijk[0]] = st_sample(&sq, q);
    }
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
  Stencil sq;
  depart(m, g, u, m->def.dt, p, NULL, &sq, 0);
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
  if (all_zero(q, g->np))
    memset(out, 0, (size_t)g->np * sizeof(double));
  else if (m->def.advection == DS_FLUID_MACCORMACK)
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

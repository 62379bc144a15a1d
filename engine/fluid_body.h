/* The fluid's forward operators as per-element bodies over a plain view
 * (dsFluidView), written once for the serial engine (engine/fluid.c and
 * its operator headers loop over them, with OpenMP where they did), the
 * batched engine's host backend (engine/fluid_batch.c) and its CUDA
 * kernels (cuda/batch.cu): DS_HD, C and CUDA C++ alike, nothing host-only.
 * Each body computes one output point from its inputs in the arithmetic
 * order the serial engine always had, so every caller gets the same bits.
 *
 * The math of each operator is in the header that drives it:
 * fluid_advect.h (interpolation, semi-Lagrangian, MacCormack),
 * fluid_project.h (the pressure matrix, PCG, MIC(0)), fluid_soft.h (soft
 * obstacles), fluid.c (sources, forces and buoyancy). */
#ifndef DSIM_ENGINE_FLUID_BODY_H
#define DSIM_ENGINE_FLUID_BODY_H

#include <math.h>

#include "base/hd.h"
#include "dsim/fluid.h"

/* A sampled grid: cnt[d] nodes along axis d, node i at (i + off[d]) dx;
 * per[d]: the axis wraps (node cnt[d] is node 0). Cells have off = 1/2 on
 * every axis; the faces normal to axis a have off[a] = 0. */
typedef struct FGrid {
  int cnt[3];
  double off[3];
  int per[3];
  int np; /* cnt[0] cnt[1] cnt[2] */
} FGrid;

/* The linear interpolation along one axis at a coordinate: nodes i0, i1,
 * weights 1 - f, f; dfdx = df/dx (0 where the coordinate is clamped). */
typedef struct FAxis {
  int i0, i1;
  double f, dfdx;
} FAxis;

/* parameter slots: alpha, beta, ambient, gravity xyz, then 5 per source
 * (density rate, temperature rate, velocity xyz), then 4 per soft
 * obstacle (centre xyz, damping) */
enum { FL_P_ALPHA = 0, FL_P_BETA = 1, FL_P_TAMB = 2, FL_P_GRAV = 3, FL_P_SRC = 6, FL_P_PER_SRC = 5 };
#define FL_P_MAX (FL_P_SRC + FL_P_PER_SRC * DS_FLUID_MAX_SOURCES + 4 * DS_FLUID_MAX_SOFT)
/* the dot products' fixed blocks (fluid_project.h) */
#define FL_BLK 1024

/* Everything a forward step reads, shared by the instances of a batch
 * but the parameter values `par` (nparam, FL_P_* order). Arrays: solid,
 * src_cell, insys, diag, precon (ncell), nbr (ncell x 6), active,
 * src_face (nvel); vtab + vtoff[G][a][d]: the axis-d weights of face grid
 * a at the nodes of grid G (fluid_advect.h). */
typedef struct dsFluidView {
  int dim, ncell, nvel, nf[3], foff[3], n[3];
  FGrid cellg, faceg[3];
  double dx, dt, tolerance;
  int advection, up_axis, nsource, nsoft, nparam, max_iterations;
  double soft_half[DS_FLUID_MAX_SOFT][3], soft_width[DS_FLUID_MAX_SOFT];
  const unsigned char *solid, *active, *src_cell, *insys;
  const signed char* src_face;
  const int *nbr, *diag;
  const double* precon;
  const FAxis* vtab;
  int vtoff[4][3][3];
  const double* par;
} dsFluidView;

/* the first parameter slot of soft obstacle k */
DS_HD DS_INLINE int fl_p_soft(const dsFluidView* v, int k) { return FL_P_SRC + FL_P_PER_SRC * v->nsource + 4 * k; }

/* grid G: the face grids 0..2, the cells 3 */
DS_HD DS_INLINE const FGrid* fl_grid(const dsFluidView* v, int gi) { return gi == 3 ? &v->cellg : &v->faceg[gi]; }

/* ---- interpolation (fluid_advect.h) ------------------------------------ */

typedef struct Stencil {
  int n;
  int idx[8];
  double w[8];
  double dw[8][3]; /* dw/dx_d, 1/m */
} Stencil;

/* node p of G: its position x (m) */
DS_HD DS_INLINE void grid_pos(const FGrid* g, int p, double dx, double x[3]) {
  int i = p % g->cnt[0], j = (p / g->cnt[0]) % g->cnt[1], k = p / (g->cnt[0] * g->cnt[1]);
  x[0] = (i + g->off[0]) * dx;
  x[1] = (j + g->off[1]) * dx;
  x[2] = (k + g->off[2]) * dx;
}

/* the interpolation along axis d of G at coordinate xd: nodes i0, i1,
 * fraction f (weights 1 - f, f) and df/dx (0 where clamped) */
DS_HD DS_INLINE FAxis axis_weights(const FGrid* g, int d, double dx, double xd) {
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
DS_HD DS_INLINE void stencil_axes(const FGrid* g, int dim, const FAxis ax[3], Stencil* st, int grad) {
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
DS_HD DS_INLINE void stencil_g(const FGrid* g, int dim, double dx, const double x[3], Stencil* st, int grad) {
  FAxis ax[3] = {{0, 0, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0}};
  for (int d = 0; d < dim; d++) ax[d] = axis_weights(g, d, dx, x[d]);
  stencil_axes(g, dim, ax, st, grad);
}

DS_HD DS_INLINE double st_sample(const Stencil* st, const double* q) {
  double v = 0;
  for (int c = 0; c < st->n; c++) v += st->w[c] * q[st->idx[c]];
  return v;
}

/* the table of face grid a's axis-d weights at the nodes of grid gi */
DS_HD DS_INLINE const FAxis* fl_vtab(const dsFluidView* v, int gi, int a, int d) {
  return v->vtab + v->vtoff[gi][a][d];
}

/* V at node (i, j, k) of G (id gi) from the face velocities u, through the
 * tables of the face grids' axis weights at G's node coordinates (the
 * same arithmetic as stencil_g at grid_pos, so the same bits) */
DS_HD DS_INLINE void vel_at_node(const dsFluidView* v, int gi, const int ijk[3], const double* u, double vel[3],
                                 Stencil* sv) {
  vel[0] = vel[1] = vel[2] = 0;
  for (int a = 0; a < v->dim; a++) {
    FAxis ax[3] = {{0, 0, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0}};
    for (int d = 0; d < v->dim; d++) ax[d] = fl_vtab(v, gi, a, d)[ijk[d]];
    stencil_axes(&v->faceg[a], v->dim, ax, &sv[a], 0);
    vel[a] = st_sample(&sv[a], u + v->foff[a]);
  }
}

/* V as vel_at_node, without the terms of zero weight (an axis at f = 0:
 * node i0 alone, weight 1): the remaining terms are the same products
 * summed in the same order, so V is the same up to the sign of a zero,
 * which the departure point x - h V does not see */
DS_HD DS_INLINE void vel_at_node_fast(const dsFluidView* v, int gi, const int ijk[3], const double* u, double vel[3]) {
  vel[0] = vel[1] = vel[2] = 0;
  for (int a = 0; a < v->dim; a++) {
    const FGrid* fg = &v->faceg[a];
    const FAxis* tx = fl_vtab(v, gi, a, 0) + ijk[0];
    const FAxis* ty = fl_vtab(v, gi, a, 1) + ijk[1];
    const int sy = fg->cnt[0], sz = fg->cnt[0] * fg->cnt[1];
    int ix[2] = {tx->i0, tx->i1}, iy[2] = {ty->i0 * sy, ty->i1 * sy}, iz[2] = {0, 0};
    double wx[2] = {1 - tx->f, tx->f}, wy[2] = {1 - ty->f, ty->f}, wz[2] = {1, 0};
    int nx = tx->f != 0 ? 2 : 1, ny = ty->f != 0 ? 2 : 1, nz = 1;
    if (v->dim == 3) {
      const FAxis* tz = fl_vtab(v, gi, a, 2) + ijk[2];
      iz[0] = tz->i0 * sz, iz[1] = tz->i1 * sz;
      wz[0] = 1 - tz->f, wz[1] = tz->f;
      nz = tz->f != 0 ? 2 : 1;
    }
    const double* ua = u + v->foff[a];
    double acc = 0;
    for (int e = 0; e < nz; e++)
      for (int b = 0; b < ny; b++)
        for (int c = 0; c < nx; c++) acc += wx[c] * wy[b] * wz[e] * ua[ix[c] + iy[b] + iz[e]];
    vel[a] = acc;
  }
}

/* departure point y = x_p - h V(x_p) of node (i, j, k) of grid gi, and its
 * stencil (with the weights' derivatives when grad is set); sv: the
 * velocity's stencils (the adjoint's), NULL when not needed */
DS_HD DS_INLINE void depart_ijk(const dsFluidView* v, int gi, const double* u, double h, const int ijk[3],
                                Stencil* sv, Stencil* sq, int grad) {
  const FGrid* g = fl_grid(v, gi);
  double x[3], vel[3], y[3];
  for (int d = 0; d < 3; d++) x[d] = (ijk[d] + g->off[d]) * v->dx;
  if (sv)
    vel_at_node(v, gi, ijk, u, vel, sv);
  else
    vel_at_node_fast(v, gi, ijk, u, vel);
  for (int d = 0; d < 3; d++) y[d] = x[d] - h * vel[d];
  stencil_g(g, v->dim, v->dx, y, sq, grad);
}

DS_HD DS_INLINE void fl_ijk(const FGrid* g, int p, int ijk[3]) {
  ijk[0] = p % g->cnt[0], ijk[1] = (p / g->cnt[0]) % g->cnt[1], ijk[2] = p / (g->cnt[0] * g->cnt[1]);
}

DS_HD DS_INLINE void fl_depart(const dsFluidView* v, int gi, const double* u, double h, int p, Stencil* sv,
                               Stencil* sq, int grad) {
  int ijk[3];
  fl_ijk(fl_grid(v, gi), p, ijk);
  depart_ijk(v, gi, u, h, ijk, sv, sq, grad);
}

/* semi-Lagrangian: SL(q, h) at node (i, j, k) of grid gi */
DS_HD DS_INLINE double fl_sl_point(const dsFluidView* v, int gi, const double* q, const double* u, double h,
                                   const int ijk[3]) {
  Stencil sq;
  depart_ijk(v, gi, u, h, ijk, NULL, &sq, 0);
  return st_sample(&sq, q);
}

/* MacCormack's clamped value at node p; *branch: 0 unclamped, else 1 + the
 * index (in q) of the node it was clamped to */
DS_HD DS_INLINE double fl_mc_value(const dsFluidView* v, int gi, const double* q, const double* u, const double* hat,
                                   const double* back, int p, int* branch) {
  Stencil sq;
  fl_depart(v, gi, u, v->dt, p, NULL, &sq, 0);
  int imin = sq.idx[0], imax = sq.idx[0];
  for (int c = 1; c < sq.n; c++) {
    if (q[sq.idx[c]] < q[imin]) imin = sq.idx[c];
    if (q[sq.idx[c]] > q[imax]) imax = sq.idx[c];
  }
  double val = hat[p] + 0.5 * (q[p] - back[p]);
  *branch = 0;
  if (val > q[imax]) {
    *branch = 1 + imax;
    return q[imax];
  }
  if (val < q[imin]) {
    *branch = 1 + imin;
    return q[imin];
  }
  return val;
}

/* ---- the grid's topology ------------------------------------------------ */

/* the cells on either side of face f (index within axis a): -1 beyond a
 * non-periodic boundary */
DS_HD DS_INLINE void face_cells(const dsFluidView* v, int a, int f, int* lo, int* hi) {
  const FGrid* g = &v->faceg[a];
  int id[3] = {f % g->cnt[0], (f / g->cnt[0]) % g->cnt[1], f / (g->cnt[0] * g->cnt[1])};
  int n = v->n[a], i = id[a];
  int stride = a == 0 ? 1 : a == 1 ? v->n[0] : v->n[0] * v->n[1];
  int base = id[0] + v->n[0] * (id[1] + v->n[1] * id[2]) - i * stride;
  if (g->per[a]) {
    *lo = base + ((i + n - 1) % n) * stride;
    *hi = base + i * stride;
  } else {
    *lo = i >= 1 ? base + (i - 1) * stride : -1;
    *hi = i <= n - 1 ? base + i * stride : -1;
  }
}

/* the low and high faces of cell c along axis a (indices within axis a) */
DS_HD DS_INLINE void cell_faces(const dsFluidView* v, int a, int c, int* flo, int* fhi) {
  int n0 = v->n[0], n1 = v->n[1];
  int id[3] = {c % n0, (c / n0) % n1, c / (n0 * n1)};
  const FGrid* g = &v->faceg[a];
  int i = id[a];
  id[a] = 0;
  int stride = a == 0 ? 1 : a == 1 ? g->cnt[0] : g->cnt[0] * g->cnt[1];
  int base = id[0] + g->cnt[0] * (id[1] + g->cnt[1] * id[2]);
  *flo = base + i * stride;
  *fhi = base + (g->per[a] ? (i + 1) % v->n[a] : i + 1) * stride;
}

/* the weights of face f's two cells in a face average (0 for a missing one) */
DS_HD DS_INLINE void face_weights(int lo, int hi, double* wlo, double* whi) {
  *wlo = lo >= 0 ? (hi >= 0 ? 0.5 : 1) : 0;
  *whi = hi >= 0 ? (lo >= 0 ? 0.5 : 1) : 0;
}

/* the axis of state entry i < nvel (a velocity) */
DS_HD DS_INLINE int fl_face_axis(const dsFluidView* v, int i) {
  int a = 0;
  while (a + 1 < v->dim && i >= v->foff[a + 1]) a++;
  return a;
}

/* ---- soft obstacles (fluid_soft.h) -------------------------------------- */

DS_HD DS_INLINE double fl_sig(double z) { return 1 / (1 + exp(-z)); }

/* chi(x) of the box of centre c, half sides h, wall width w and, when dc
 * is set, dchi/dc_a (a < dim) */
DS_HD DS_INLINE double fl_soft_chi(const double* c, const double* h, double w, int dim, const double x[3],
                                   double dc[3]) {
  double s[3] = {1, 1, 1}, ds[3] = {0, 0, 0};
  for (int a = 0; a < dim; a++) {
    const double d = x[a] - c[a];
    const double s1 = fl_sig((h[a] + d) / w), s2 = fl_sig((h[a] - d) / w);
    s[a] = s1 * s2;
    ds[a] = (s1 * (1 - s1) * s2 - s1 * s2 * (1 - s2)) / w;
  }
  const double chi = s[0] * s[1] * s[2];
  if (dc)
    for (int a = 0; a < 3; a++) {
      double p = a < dim ? -ds[a] : 0;
      for (int b = 0; b < dim; b++)
        if (b != a) p *= s[b];
      dc[a] = p;
    }
  return chi;
}

/* D(x) = 1 + dt sum_K k_K chi_K(x), centres and rates from v->par */
DS_HD DS_INLINE double fl_soft_D(const dsFluidView* v, const double x[3]) {
  double D = 1;
  for (int k = 0; k < v->nsoft; k++) {
    const double* p = v->par + fl_p_soft(v, k);
    D += v->dt * p[3] * fl_soft_chi(p, v->soft_half[k], v->soft_width[k], v->dim, x, NULL);
  }
  return D;
}

/* The point of state entry i: a face (i < nvel) or a cell (density, then temperature). */
DS_HD DS_INLINE void fl_soft_pos(const dsFluidView* v, int i, double x[3]) {
  if (i < v->nvel) {
    int a = fl_face_axis(v, i);
    grid_pos(&v->faceg[a], i - v->foff[a], v->dx, x);
  } else
    grid_pos(&v->cellg, (i - v->nvel) % v->ncell, v->dx, x);
}

/* stage 0 at state entry i: s0[i] / D(x_i) */
DS_HD DS_INLINE double fl_soft_point(const dsFluidView* v, const double* s0, int i) {
  double x[3];
  fl_soft_pos(v, i, x);
  return s0[i] / fl_soft_D(v, x);
}

/* ---- sources, forces, buoyancy (fluid.c, steps 2-4) --------------------- */

/* step 2 at cell c: the sources' rates, then zero in a solid */
DS_HD DS_INLINE void fl_source_cell(const dsFluidView* v, int c, double* rho, double* T) {
  for (int s = 0; s < v->nsource; s++)
    if (v->src_cell[c] & (1u << s)) {
      rho[c] += v->dt * v->par[FL_P_SRC + FL_P_PER_SRC * s];
      T[c] += v->dt * v->par[FL_P_SRC + FL_P_PER_SRC * s + 1];
    }
  if (v->solid[c]) rho[c] = T[c] = 0;
}

/* steps 3-4 at face f of axis a (ua: axis a's velocities; force: ncell x
 * dim or NULL) */
DS_HD DS_INLINE void fl_force_face(const dsFluidView* v, int a, int f, const double* force, double* ua,
                                   const double* rho, const double* T) {
  const double* par = v->par;
  int lo, hi;
  double wlo, whi, acc = par[FL_P_GRAV + a];
  face_cells(v, a, f, &lo, &hi);
  face_weights(lo, hi, &wlo, &whi);
  if (a == v->up_axis) {
    double rf = (lo >= 0 ? wlo * rho[lo] : 0) + (hi >= 0 ? whi * rho[hi] : 0);
    double tf = (lo >= 0 ? wlo * T[lo] : 0) + (hi >= 0 ? whi * T[hi] : 0);
    acc += par[FL_P_ALPHA] * rf - par[FL_P_BETA] * (tf - par[FL_P_TAMB]);
  }
  if (force) acc += (lo >= 0 ? wlo * force[lo * v->dim + a] : 0) + (hi >= 0 ? whi * force[hi * v->dim + a] : 0);
  ua[f] += v->dt * acc;
  const int s = v->src_face[v->foff[a] + f];
  if (s >= 0) ua[f] = par[FL_P_SRC + FL_P_PER_SRC * s + 2 + a];
}

/* ---- projection (fluid_project.h) --------------------------------------- */

/* b'_c = dx (sum_low u - sum_high u) over the cell's faces (u masked) */
DS_HD DS_INLINE double fl_rhs_cell(const dsFluidView* v, int c, const double* u) {
  double b = 0;
  if (v->insys[c])
    for (int a = 0; a < v->dim; a++) {
      int flo, fhi;
      cell_faces(v, a, c, &flo, &fhi);
      b += u[v->foff[a] + flo] - u[v->foff[a] + fhi];
    }
  return v->dx * b;
}

/* (A' s)_c (identity rows outside the system) */
DS_HD DS_INLINE double fl_matvec_cell(const dsFluidView* v, int c, const double* s) {
  if (!v->insys[c]) return s[c];
  double r = v->diag[c] * s[c];
  for (int k = 0; k < 2 * v->dim; k++)
    if (v->nbr[6 * c + k] >= 0) r -= s[v->nbr[6 * c + k]];
  return r;
}

/* block b (FL_BLK entries) of the dot product x . y over n entries */
DS_HD DS_INLINE double fl_dot_block(const double* x, const double* y, int n, int b) {
  int e = (b + 1) * FL_BLK < n ? (b + 1) * FL_BLK : n;
  double s = 0;
  for (int i = b * FL_BLK; i < e; i++) s += x[i] * y[i];
  return s;
}

/* max |x_i| over i in [i0, i1) (NaN never wins) */
DS_HD DS_INLINE double fl_maxabs_range(const double* x, int i0, int i1) {
  double v = 0;
  for (int i = i0; i < i1; i++)
    if (fabs(x[i]) > v) v = fabs(x[i]);
  return v;
}

/* PCG's updates at cell c: x += alpha s, r -= alpha A's; then s = z + beta s */
DS_HD DS_INLINE void fl_pcg_xr(int c, double alpha, const double* s, const double* as, double* x, double* r) {
  x[c] += alpha * s[c];
  r[c] -= alpha * as[c];
}
DS_HD DS_INLINE void fl_pcg_s(int c, double beta, const double* z, double* s) { s[c] = z[c] + beta * s[c]; }

/* the upper-triangle coefficient of cell c along axis a (-1 or 0) */
DS_HD DS_INLINE double mic_up(const dsFluidView* v, int c, int a) {
  int u = v->nbr[6 * c + 2 * a + 1];
  return u > c ? -1.0 : 0.0;
}

/* MIC(0)'s forward substitution at cell c (cells in ascending order):
 * q_c from r_c and the q of its lower neighbours */
DS_HD DS_INLINE void fl_mic_lower(const dsFluidView* v, int c, const double* r, double* q) {
  double t = r[c];
  for (int a = 0; a < v->dim; a++) {
    int l = v->nbr[6 * c + 2 * a];
    if (l >= 0 && l < c) t -= mic_up(v, l, a) * v->precon[l] * q[l];
  }
  q[c] = t * v->precon[c];
}

/* the back substitution at cell c (cells in descending order) */
DS_HD DS_INLINE void fl_mic_upper(const dsFluidView* v, int c, const double* q, double* z) {
  double t = q[c];
  for (int a = 0; a < v->dim; a++) {
    int u = v->nbr[6 * c + 2 * a + 1];
    if (u > c) t -= mic_up(v, c, a) * v->precon[c] * z[u];
  }
  z[c] = t * v->precon[c];
}

/* u'_f = u_f - (pi_hi - pi_lo) / dx on an active face f of axis a */
DS_HD DS_INLINE void fl_grad_face(const dsFluidView* v, int a, int f, const double* pi, double* ua) {
  if (!v->active[v->foff[a] + f]) return;
  int lo, hi;
  face_cells(v, a, f, &lo, &hi);
  double plo = lo >= 0 ? pi[lo] : 0, phi = hi >= 0 ? pi[hi] : 0;
  ua[f] -= (phi - plo) / v->dx;
}

/* ---- adjoints (per instance, serial: the scatters race) -------------------
 * The math is in the driving headers' comments: fluid_advect.h (SL and
 * MacCormack), fluid_soft.h (stage 0), fluid.c (steps 2-4). */

/* adjoint of out = SL(q, h) on grid gi: gq += , gu += (from gout) */
DS_HD DS_INLINE void fl_sl_bwd(const dsFluidView* v, int gi, const double* q, const double* u, double h,
                               const double* gout, double* gq, double* gu) {
  const FGrid* g = fl_grid(v, gi);
  for (int p = 0; p < g->np; p++) {
    double gp = gout[p];
    if (gp == 0) continue;
    Stencil sv[3], sq;
    fl_depart(v, gi, u, h, p, sv, &sq, 1);
    double gy[3] = {0, 0, 0};
    for (int c = 0; c < sq.n; c++) {
      gq[sq.idx[c]] += gp * sq.w[c];
      for (int d = 0; d < v->dim; d++) gy[d] += gp * sq.dw[c][d] * q[sq.idx[c]];
    }
    for (int a = 0; a < v->dim; a++) {
      double gv = -h * gy[a];
      double* ga = gu + v->foff[a];
      for (int c = 0; c < sv[a].n; c++) ga[sv[a].idx[c]] += gv * sv[a].w[c];
    }
  }
}

/* adjoint of MacCormack on grid gi, with hat = SL(q, dt), back =
 * SL(hat, -dt) recomputed by the caller; ghat, gback: scratch (np) */
DS_HD DS_INLINE void fl_mc_bwd(const dsFluidView* v, int gi, const double* q, const double* u, const double* hat,
                               const double* back, const double* gout, double* gq, double* gu, double* ghat,
                               double* gback) {
  const FGrid* g = fl_grid(v, gi);
  for (int p = 0; p < g->np; p++) {
    int br;
    ghat[p] = gback[p] = 0;
    (void)fl_mc_value(v, gi, q, u, hat, back, p, &br);
    if (br) {
      gq[br - 1] += gout[p];
    } else {
      ghat[p] = gout[p];
      gq[p] += 0.5 * gout[p];
      gback[p] = -0.5 * gout[p];
    }
  }
  fl_sl_bwd(v, gi, hat, u, -v->dt, gback, ghat, gu);
  fl_sl_bwd(v, gi, q, u, v->dt, ghat, gq, gu);
}

/* adjoint of stage 0: g (of s0p on entry, of s0 on return), gpar += the
 * soft obstacles' (centre, damping), serially in array order */
DS_HD DS_INLINE void fl_soft_bwd_all(const dsFluidView* v, const double* s0p, double* g, double* gpar) {
  const int n = v->nvel + 2 * v->ncell, ns = v->nsoft;
  const double dt = v->dt;
  for (int i = 0; i < n; i++) {
    if (g[i] == 0) continue;
    double x[3], dc[3];
    fl_soft_pos(v, i, x);
    const double D = fl_soft_D(v, x), w = -g[i] * s0p[i] * dt / D;
    for (int k = 0; k < ns; k++) {
      const double* p = v->par + fl_p_soft(v, k);
      const double chi = fl_soft_chi(p, v->soft_half[k], v->soft_width[k], v->dim, x, dc);
      double* gp = gpar + fl_p_soft(v, k);
      for (int a = 0; a < v->dim; a++) gp[a] += w * p[3] * dc[a];
      gp[3] += w * chi;
    }
    g[i] /= D;
  }
}

/* adjoint of steps 2-4 (after the projection's): g1 = (gu, grho, gT) of the
 * state s1 after the step; gf (ncell x dim) = the force field's, gpar +=
 * the parameters'; the faces in order, then the cells */
DS_HD DS_INLINE void fl_bwd_sources(const dsFluidView* v, const double* s1, double* g1, double* gf, double* gpar) {
  const double dt = v->dt, *par = v->par;
  double *gu = g1, *grho = g1 + v->nvel, *gT = grho + v->ncell;
  const double *rho1 = s1 + v->nvel, *T1 = rho1 + v->ncell;
  for (int i = 0; i < v->ncell * v->dim; i++) gf[i] = 0;
  for (int a = 0; a < v->dim; a++)
    for (int f = 0; f < v->nf[a]; f++) {
      int F = v->foff[a] + f, lo, hi;
      double w = gu[F], wlo, whi;
      if (v->src_face[F] >= 0) {
        gpar[FL_P_SRC + FL_P_PER_SRC * v->src_face[F] + 2 + a] += w;
        gu[F] = 0;
        continue;
      }
      if (w == 0) continue;
      face_cells(v, a, f, &lo, &hi);
      face_weights(lo, hi, &wlo, &whi);
      gpar[FL_P_GRAV + a] += dt * w;
      if (a == v->up_axis) {
        double rf = (lo >= 0 ? wlo * rho1[lo] : 0) + (hi >= 0 ? whi * rho1[hi] : 0);
        double tf = (lo >= 0 ? wlo * T1[lo] : 0) + (hi >= 0 ? whi * T1[hi] : 0);
        gpar[FL_P_ALPHA] += dt * w * rf;
        gpar[FL_P_BETA] -= dt * w * (tf - par[FL_P_TAMB]);
        gpar[FL_P_TAMB] += dt * par[FL_P_BETA] * w;
        if (lo >= 0) grho[lo] += dt * par[FL_P_ALPHA] * w * wlo, gT[lo] -= dt * par[FL_P_BETA] * w * wlo;
        if (hi >= 0) grho[hi] += dt * par[FL_P_ALPHA] * w * whi, gT[hi] -= dt * par[FL_P_BETA] * w * whi;
      }
      if (lo >= 0) gf[lo * v->dim + a] += dt * w * wlo;
      if (hi >= 0) gf[hi * v->dim + a] += dt * w * whi;
    }
  for (int c = 0; c < v->ncell; c++) {
    if (v->solid[c]) {
      grho[c] = gT[c] = 0;
      continue;
    }
    for (int s = 0; s < v->nsource; s++)
      if (v->src_cell[c] & (1u << s)) {
        gpar[FL_P_SRC + FL_P_PER_SRC * s] += dt * grho[c];
        gpar[FL_P_SRC + FL_P_PER_SRC * s + 1] += dt * gT[c];
      }
  }
}

/* adjoint of field k's advection (k < dim: face grid k; dim, dim + 1: the
 * density, the temperature) from the state s (stage 0's) with g1 of the
 * advected state into g0; hat, back: MacCormack's of the field (NULL
 * for SL); ghat, gback: scratch */
DS_HD DS_INLINE void fl_advect_bwd_field(const dsFluidView* v, int k, const double* s, const double* g1, double* g0,
                                         const double* hat, const double* back, double* ghat, double* gback) {
  const int gi = k < v->dim ? k : 3;
  const int base = k < v->dim ? v->foff[k] : v->nvel + (k - v->dim) * v->ncell;
  if (v->advection == DS_FLUID_MACCORMACK)
    fl_mc_bwd(v, gi, s + base, s, hat, back, g1 + base, g0 + base, g0, ghat, gback);
  else
    fl_sl_bwd(v, gi, s + base, s, v->dt, g1 + base, g0 + base, g0);
}

#endif

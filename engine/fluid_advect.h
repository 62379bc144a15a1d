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

#include "engine/fluid_body.h"
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

/* The grids whose nodes are departure origins: the face grids 0..2, the
 * cells 3 (fl_grid). */
static inline int grid_id(const dsFluidModel* m, const FGrid* g) { return g == &m->cellg ? 3 : (int)(g - m->faceg); }

/* departure point and stencils of node p of G (fluid_body.h, fl_depart) */
static inline void depart(const dsFluidModel* m, const FGrid* g, const double* u, double h, int p, Stencil* sv,
                          Stencil* sq, int grad) {
  fl_depart(&m->view, grid_id(m, g), u, h, p, sv, sq, grad);
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
  const dsFluidView* v = &m->view;
  FL_PFOR(g->np > FL_PAR_MIN, r, nrow, {
    int ijk[3] = {0, r % g->cnt[1], r / g->cnt[1]};
    for (ijk[0] = 0; ijk[0] < nx; ijk[0]++) out[r * nx + ijk[0]] = fl_sl_point(v, gi, q, u, h, ijk);
  });
}

/* MacCormack's clamped value at node p (fluid_body.h, fl_mc_value) */
static inline double mc_value(const dsFluidModel* m, const FGrid* g, const double* q, const double* u,
                              const double* hat, const double* back, int p, int* branch) {
  return fl_mc_value(&m->view, grid_id(m, g), q, u, hat, back, p, branch);
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

/* adjoint of field k's advection from the state s0 (fluid_body.h,
 * fl_advect_bwd_field); MacCormack's hat and back recomputed first, on
 * threads */
static void advect_bwd(const dsFluidModel* m, dsFluidData* d, int k, const double* s0, const double* g1,
                       double* g0) {
  const dsFluidView* v = &m->view;
  const FGrid* g = k < m->dim ? &m->faceg[k] : &m->cellg;
  const double* q = s0 + (k < m->dim ? m->foff[k] : m->nvel + (k - m->dim) * m->ncell);
  if (m->def.advection == DS_FLUID_MACCORMACK) {
    sl_fwd(m, g, q, s0, m->def.dt, d->hat);
    sl_fwd(m, g, d->hat, s0, -m->def.dt, d->back);
  }
  fl_advect_bwd_field(v, k, s0, g1, g0, d->hat, d->back, d->ghat, d->gback);
}

#endif

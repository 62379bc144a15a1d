/* Soft obstacles of the fluid (dsim/fluid.h dsFluidSoftObstacle): Brinkman
 * penalisation with a smooth indicator, forward and adjoint side by side.
 * Included by engine/fluid.c only (after fluid_advect.h: grid_pos).
 *
 * Indicator of obstacle K (centre c, half sides h, edge width w) at x:
 *   chi_K(x) = prod_{a < dim} s_a(x_a - c_a),
 *   s_a(d) = sig((h_a + d) / w) sig((h_a - d) / w),  sig(z) = 1 / (1 + e^-z)
 * (about 1 inside the box, 0 outside, a smooth step of width ~w at the
 * walls; periodic axes are not wrapped).
 *
 * Stage 0 of a step, before the advection: every face velocity and every
 * cell's density and temperature are damped implicitly,
 *   q' = q / D(x),   D(x) = 1 + dt sum_K k_K chi_K(x)
 * (x the face's or cell's centre; k_K the damping rate, 1/s): the backward-
 * Euler step of dq/dt = -k chi q, stable for any k dt. The projection at the
 * end of the step then makes the damped field divergence-free, so the flow
 * goes round the obstacle and smoke does not build up inside it.
 *
 * Adjoint, with qbar' the adjoint of q':
 *   qbar = qbar' / D,
 *   dL/dk_K   += sum_x qbar'(x) (-q'(x) dt chi_K(x) / D(x)),
 *   dL/dc_K,a += sum_x qbar'(x) (-q'(x) dt k_K dchi_K/dc_a / D(x)),
 *   dchi/dc_a = -s_a'(d_a) prod_{b != a} s_b,
 *   s_a'(d) = (sig1 (1 - sig1) sig2 - sig1 sig2 (1 - sig2)) / w,
 *   sig1 = sig((h_a + d) / w), sig2 = sig((h_a - d) / w),
 * using dq'/dtheta = -q dt d(k chi)/dtheta / D^2 = -q' dt d(k chi)/dtheta / D.
 * The parameter sums run serially in the array order (bitwise the same for
 * any thread count). */
#ifndef DSIM_ENGINE_FLUID_SOFT_H
#define DSIM_ENGINE_FLUID_SOFT_H

#include <math.h>

#include "engine/fluid_priv.h"

static inline double fl_sig(double z) { return 1 / (1 + exp(-z)); }

/* chi_K(x) and, when dc is set, dchi_K/dc_a (a < dim) */
static inline double fl_soft_chi(const dsFluidSoftObstacle* o, int dim, const double x[3], double dc[3]) {
  double s[3] = {1, 1, 1}, ds[3] = {0, 0, 0};
  for (int a = 0; a < dim; a++) {
    const double d = x[a] - o->center[a], w = o->width;
    const double s1 = fl_sig((o->half[a] + d) / w), s2 = fl_sig((o->half[a] - d) / w);
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

/* D(x) = 1 + dt sum_K k_K chi_K(x) */
static inline double fl_soft_D(const dsFluidModel* m, const double x[3]) {
  double D = 1;
  for (int k = 0; k < m->def.nsoft; k++)
    D += m->def.dt * m->def.soft[k].damping * fl_soft_chi(&m->def.soft[k], m->dim, x, NULL);
  return D;
}

/* The point of state entry i: a face (i < nvel) or a cell (density, then temperature). */
static inline void fl_soft_pos(const dsFluidModel* m, int i, double x[3]) {
  if (i < m->nvel) {
    int a = 0;
    while (a + 1 < m->dim && i >= m->foff[a + 1]) a++;
    grid_pos(&m->faceg[a], i - m->foff[a], m->def.dx, x);
  } else
    grid_pos(&m->cellg, (i - m->nvel) % m->ncell, m->def.dx, x);
}

/* s0p = stage 0 of s0 (the state: nvel faces, ncell densities, ncell temperatures) */
static void fl_soft_fwd(const dsFluidModel* m, const double* s0, double* s0p) {
  const int n = m->nvel + 2 * m->ncell;
  FL_PFOR(n > FL_PAR_MIN, i, n, {
    double x[3];
    fl_soft_pos(m, i, x);
    s0p[i] = s0[i] / fl_soft_D(m, x);
  });
}

/* g: the adjoint of s0p on entry, of s0 on return; gpar += the soft
 * obstacles' parameters' (FL_P_SOFT(m, K) + 0..2 the centre, + 3 damping) */
static void fl_soft_bwd(const dsFluidModel* m, const double* s0p, double* g, double* gpar) {
  const int n = m->nvel + 2 * m->ncell, ns = m->def.nsoft;
  const double dt = m->def.dt;
  for (int i = 0; i < n; i++) { /* serial: the parameter sums in array order */
    if (g[i] == 0) continue;
    double x[3], dc[3];
    fl_soft_pos(m, i, x);
    const double D = fl_soft_D(m, x), w = -g[i] * s0p[i] * dt / D;
    for (int k = 0; k < ns; k++) {
      const dsFluidSoftObstacle* o = &m->def.soft[k];
      const double chi = fl_soft_chi(o, m->dim, x, dc);
      double* gp = gpar + FL_P_SOFT(m, k);
      for (int a = 0; a < m->dim; a++) gp[a] += w * o->damping * dc[a];
      gp[3] += w * chi;
    }
    g[i] /= D;
  }
}

#endif

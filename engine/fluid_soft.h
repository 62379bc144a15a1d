/* Soft obstacles of the fluid (dsim/fluid.h dsFluidSoftObstacle): Brinkman
 * penalisation with a smooth indicator, forward and adjoint side by side.
 * Included by engine/fluid.c only; the per-point forward, chi and D are
 * engine/fluid_body.h's.
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
 * any thread count): fl_soft_bwd_all in engine/fluid_body.h. */
#ifndef DSIM_ENGINE_FLUID_SOFT_H
#define DSIM_ENGINE_FLUID_SOFT_H

#include <math.h>

#include "engine/fluid_priv.h"

/* s0p = stage 0 of s0 (the state: nvel faces, ncell densities, ncell
 * temperatures), with the parameter values of v (fluid_body.h) */
static void fl_soft_fwd(const dsFluidView* v, const double* s0, double* s0p) {
  const int n = v->nvel + 2 * v->ncell;
  FL_PFOR(n > FL_PAR_MIN, i, n, { s0p[i] = fl_soft_point(v, s0, i); });
}

#endif

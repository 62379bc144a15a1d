/* Pressure projection, forward and adjoint (included by engine/fluid.c).
 *
 * Let M be the diagonal 0/1 mask of the active faces (not a closed wall,
 * not touching a solid cell), G the gradient from cells to active faces,
 * (G p)_f = (p_hi - p_lo) / dx with p = 0 in the ghost cell beyond an open
 * boundary, and D = -G^T the divergence of the active faces. The projection
 *   u' = M u - G p,   A p = G^T M u,   A = G^T G
 * makes D u' = 0 on every fluid cell: u' = P u with
 *   P = M (I - G A^+ G^T) M     (A^+ the pseudo-inverse when no open face
 * pins the constant: G^T M u is orthogonal to A's null space, so A p = b
 * is consistent). P is symmetric, so the adjoint of the projection is the
 * projection: gu = P gu', one solve with the same operator. All faces have
 * the same area dx^(dim-1), so the grid's inner product is a multiple of
 * the Euclidean one and "self-adjoint" holds in either.
 *
 * Scaled so the matrix has integer entries: A' = dx^2 A (diagonal: the
 * cell's active faces; -1 per active face to a fluid neighbour),
 * b' = dx (sum_low u - sum_high u) over the cell's active faces, and
 * u'_f = u_f - (pi_hi - pi_lo) / dx. Then div u' = -r' / dx^2 with r' the
 * residual, so stopping at max|r'| <= tol max|b'| leaves
 * max|div u'| <= tol max|div u|.
 *
 * PCG with MIC(0) (Bridson, "Fluid simulation for computer graphics",
 * tuning 0.97, safety 0.25): the factor drops a periodic axis's wrap-around
 * couplings (they are outside the lexicographic band), which keeps it a
 * (weaker) SPD preconditioner. Dot products sum fixed blocks of FL_BLK
 * cells, then the blocks in order; the max-norm is exact in any order: the
 * solve is bitwise the same for every thread count. The triangular solves
 * are serial. The solve starts from p = 0 every time. */
#ifndef DSIM_ENGINE_FLUID_PROJECT_H
#define DSIM_ENGINE_FLUID_PROJECT_H

#include <math.h>

#include "engine/fluid_advect.h"
#include "engine/fluid_priv.h"

#define FL_MIC_TAU 0.97
#define FL_MIC_SIGMA 0.25

static double fl_dot(const double* x, const double* y, int n, double* blk) {
  int nb = (n + FL_BLK - 1) / FL_BLK;
  FL_PFOR(nb > 4, b, nb, { blk[b] = fl_dot_block(x, y, n, b); });
  double s = 0;
  for (int b = 0; b < nb; b++) s += blk[b];
  return s;
}

static double fl_maxabs(const double* x, int n) { return fl_maxabs_range(x, 0, n); }

/* as = A' s (identity rows outside the system) */
static void fl_matvec(const dsFluidModel* m, const double* s, double* as) {
  const dsFluidView* v = &m->view;
  FL_PFOR(m->ncell > FL_PAR_MIN, c, m->ncell, { as[c] = fl_matvec_cell(v, c, s); });
}

static void mic_build(dsFluidModel* m) {
  for (int c = 0; c < m->ncell; c++) {
    if (!m->insys[c]) {
      m->precon[c] = 1;
      continue;
    }
    double e = m->diag[c];
    for (int a = 0; a < m->dim; a++) {
      int l = m->nbr[6 * c + 2 * a];
      if (l < 0 || l >= c) continue;
      double al = mic_up(&m->view, l, a), other = 0, pl = m->precon[l];
      for (int b = 0; b < m->dim; b++)
        if (b != a) other += mic_up(&m->view, l, b);
      e -= al * pl * (al * pl);
      e -= FL_MIC_TAU * al * other * pl * pl;
    }
    if (e < FL_MIC_SIGMA * m->diag[c]) e = m->diag[c];
    m->precon[c] = 1 / sqrt(e);
  }
}

/* z = (L L^T)^-1 r with the MIC(0) factor; q is scratch */
static void mic_apply(const dsFluidModel* m, const double* r, double* q, double* z) {
  for (int c = 0; c < m->ncell; c++) fl_mic_lower(&m->view, c, r, q);
  for (int c = m->ncell - 1; c >= 0; c--) fl_mic_upper(&m->view, c, q, z);
}

/* The FFT solve of a box without solids (engine/fluid_fft.c): exact up to
 * rounding, so one residual check; 1 when it meets tol (x in d->pi), 0 to
 * fall back to PCG (b' still in d->r). */
static int fl_fft(const dsFluidModel* m, dsFluidData* d, double bmax, double tol) {
  int n = m->ncell;
  ds__fluid_fft_solve(m, d->r, d->pi, d->z);
  fl_matvec(m, d->pi, d->as);
  double rmax = 0;
  for (int c = 0; c < n; c++) {
    double e = fabs(d->r[c] - d->as[c]);
    rmax = e > rmax ? e : rmax;
  }
  d->iters = 0;
  d->resid = rmax / bmax;
  if (rmax <= tol) return 1;
  for (int c = 0; c < n; c++) d->pi[c] = 0;
  return 0;
}

/* A' pi = b' (b' in d->r on entry): 0, or 1 when not converged; the
 * iterations and the relative residual in d->iters, d->resid */
static int fl_pcg(const dsFluidModel* m, dsFluidData* d) {
  int n = m->ncell;
  double *x = d->pi, *r = d->r, *z = d->z, *s = d->s, *as = d->as;
  for (int c = 0; c < n; c++) x[c] = 0;
  double bmax = fl_maxabs(r, n);
  d->iters = 0;
  d->resid = 0;
  if (bmax == 0) return 0;
  double tol = m->def.tolerance * bmax;
  if (m->fft && fl_fft(m, d, bmax, tol)) return 0;
  mic_apply(m, r, as, z);
  for (int c = 0; c < n; c++) s[c] = z[c];
  double sigma = fl_dot(z, r, n, d->blk);
  for (int it = 1; it <= m->def.max_iterations; it++) {
    fl_matvec(m, s, as);
    double sas = fl_dot(s, as, n, d->blk);
    double alpha = sas != 0 ? sigma / sas : 0;
    FL_PFOR(n > FL_PAR_MIN, c, n, { fl_pcg_xr(c, alpha, s, as, x, r); });
    double rmax = fl_maxabs(r, n);
    d->iters = it;
    d->resid = rmax / bmax;
    if (rmax <= tol) return 0;
    if (!(rmax == rmax)) return 1;
    mic_apply(m, r, as, z);
    double sn = fl_dot(z, r, n, d->blk);
    double beta = sigma != 0 ? sn / sigma : 0;
    sigma = sn;
    FL_PFOR(n > FL_PAR_MIN, c, n, { fl_pcg_s(c, beta, z, s); });
  }
  return 1;
}

/* u = P u in place (forward, and the adjoint of itself): 0 or 1 when the
 * solve did not converge */
static int fl_project(const dsFluidModel* m, dsFluidData* d, double* u) {
  const dsFluidView* v = &m->view;
  for (int f = 0; f < m->nvel; f++)
    if (!m->active[f]) u[f] = 0;
  FL_PFOR(m->ncell > FL_PAR_MIN, c, m->ncell, { d->r[c] = fl_rhs_cell(v, c, u); });
  int rc = fl_pcg(m, d);
  for (int a = 0; a < m->dim; a++) {
    double* ua = u + m->foff[a];
    FL_PFOR(m->nf[a] > FL_PAR_MIN, f, m->nf[a], { fl_grad_face(v, a, f, d->pi, ua); });
  }
  return rc;
}

#endif

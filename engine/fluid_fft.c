/* The FFT pressure solve for a box without obstacles (docs/fluids.md "FFT
 * pressure solve"; the system is engine/fluid_project.h's A' pi = b').
 *
 * Without solid cells and with closed or periodic walls, A' is a sum of
 * 1-D second-difference matrices, one per axis, A' = sum_a L_a (each acting
 * along its axis): a closed axis has the Neumann matrix (diagonal 1 in the
 * end cells, 2 inside), a periodic one the circulant [-1 2 -1]. Their
 * eigenvectors are known:
 *   closed, n cells:   cos(pi k (i + 1/2) / n),           lambda_k = 2 - 2 cos(pi k / n)  (DCT-II basis)
 *   periodic, n cells: cos and sin(2 pi k i / n),          lambda_k = 2 - 2 cos(2 pi k / n) (DFT basis)
 * so the separable transform F (FFTW's REDFT10 on closed axes, R2HC on
 * periodic ones) diagonalises A': A' = F^-1 diag(sum_a lambda_a) F, and
 *   pi = F^-1 (F b' / Lambda),   Lambda = sum_a lambda_{a, k_a},
 * with the inverse REDFT01 / HC2R unnormalised by 2n / n per axis (folded
 * into the scale). In R2HC's half-complex order, entry m holds frequency
 * k = m for m <= n/2 and k = n - m above (the sine part of that frequency):
 * both share lambda_k. Lambda = 0 only for the constant mode, A''s null
 * space (no open wall pins the pressure): b' has no component there (the
 * net flux through closed or periodic walls is zero) and pi takes none,
 * which leaves the velocity P u unchanged (only pressure differences act).
 *
 * The solve is exact up to rounding, O(N log N) against PCG's O(N^1.25..1.5);
 * engine/fluid_project.h checks its residual against the tolerance and
 * falls back to PCG if it misses. A' is symmetric, so the adjoint
 * projection is the same solve. Plans are FFTW_ESTIMATE (no timing: the
 * same algorithm every run) and FFTW_UNALIGNED (no alignment-dependent
 * kernels), executed serially: the bits do not depend on the thread count
 * or on where the arrays lie. FFTW's planner is not thread-safe, so
 * planning and destroying sit in one named critical section. */
#include "config.h"

#include <math.h>

#include "engine/fluid_priv.h"

#ifdef DS_HAVE_FFTW
#  include <fftw3.h>

struct FluidFFT {
  fftw_plan fwd, inv;
  double* scale; /* ncell: 1 / (Lambda norm) per mode, 0 for the constant mode */
};

/* the 1-D eigenvalue of mode m (transform order) of an n-cell axis */
static double axis_lambda(int periodic, int n, int m) {
  const double pi = 3.14159265358979323846;
  if (!periodic) return 2 - 2 * cos(pi * m / n);
  int k = m <= n / 2 ? m : n - m;
  return 2 - 2 * cos(2 * pi * k / n);
}

int ds__fluid_fft_build(dsFluidModel* m) {
  m->fft = NULL;
  for (int c = 0; c < m->ncell; c++)
    if (m->solid[c]) return 0;
  for (int a = 0; a < m->dim; a++)
    if (m->def.boundary[a] == DS_FLUID_OPEN) return 0;
  struct FluidFFT* f = ds__calloc(1, sizeof *f);
  double *tin = fftw_malloc(sizeof(double) * (size_t)m->ncell), *tout = fftw_malloc(sizeof(double) * (size_t)m->ncell);
  if (f) f->scale = ds__malloc(sizeof(double) * (size_t)m->ncell);
  if (!f || !f->scale || !tin || !tout) goto nomem;
  /* FFTW is row-major (last index fastest): our axis 0 is its last */
  int dims[3];
  fftw_r2r_kind kf[3], ki[3];
  double norm = 1;
  for (int a = 0; a < m->dim; a++) {
    int per = m->def.boundary[a] == DS_FLUID_PERIODIC, r = m->dim - 1 - a;
    dims[r] = m->def.n[a];
    kf[r] = per ? FFTW_R2HC : FFTW_REDFT10;
    ki[r] = per ? FFTW_HC2R : FFTW_REDFT01;
    norm *= per ? m->def.n[a] : 2.0 * m->def.n[a];
  }
  {
    const unsigned base = FFTW_ESTIMATE | FFTW_UNALIGNED;
#ifdef _OPENMP
#  pragma omp critical(ds_fftw_planner)
#endif
    {
      f->fwd = fftw_plan_r2r(m->dim, dims, tout, tout, kf, base);
      f->inv = fftw_plan_r2r(m->dim, dims, tout, tin, ki, base | FFTW_DESTROY_INPUT);
    }
  }
  if (!f->fwd || !f->inv) { /* no plan for these sizes: PCG */
    fftw_free(tin);
    fftw_free(tout);
    m->fft = f;
    ds__fluid_fft_free(m);
    return 0;
  }
  const int n0 = m->def.n[0], n1 = m->def.n[1];
  for (int c = 0; c < m->ncell; c++) {
    int id[3] = {c % n0, (c / n0) % n1, c / (n0 * n1)};
    double lam = 0;
    for (int a = 0; a < m->dim; a++) lam += axis_lambda(m->def.boundary[a] == DS_FLUID_PERIODIC, m->def.n[a], id[a]);
    f->scale[c] = c == 0 ? 0.0 : 1.0 / (lam * norm);
  }
  fftw_free(tin);
  fftw_free(tout);
  m->fft = f;
  return 0;
nomem:
  fftw_free(tin);
  fftw_free(tout);
  m->fft = f;
  ds__fluid_fft_free(m);
  return DS_ERR_NOMEM;
}

void ds__fluid_fft_free(dsFluidModel* m) {
  struct FluidFFT* f = m->fft;
  if (!f) return;
#ifdef _OPENMP
#  pragma omp critical(ds_fftw_planner)
#endif
  {
    if (f->fwd) fftw_destroy_plan(f->fwd);
    if (f->inv) fftw_destroy_plan(f->inv);
  }
  ds__free(f->scale);
  ds__free(f);
  m->fft = NULL;
}

void ds__fluid_fft_solve(const dsFluidModel* m, const double* b, double* x, double* work) {
  const struct FluidFFT* f = m->fft;
  for (int c = 0; c < m->ncell; c++) work[c] = b[c];
  fftw_execute_r2r(f->fwd, work, work);
  for (int c = 0; c < m->ncell; c++) work[c] *= f->scale[c];
  fftw_execute_r2r(f->inv, work, x);
}

#else /* no FFTW: PCG everywhere */

int ds__fluid_fft_build(dsFluidModel* m) {
  m->fft = NULL;
  return 0;
}

void ds__fluid_fft_free(dsFluidModel* m) { (void)m; }

void ds__fluid_fft_solve(const dsFluidModel* m, const double* b, double* x, double* work) {
  (void)m, (void)b, (void)work;
  for (int c = 0; c < m->ncell; c++) x[c] = 0;
}

#endif

int ds_fluid_uses_fft(const dsFluidModel* m) { return m && m->fft ? 1 : 0; }

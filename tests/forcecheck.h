/* Shared gradient check for the per-element force tests.
 *
 * An element kernel is seen as f(z) with z = [x (nx), v (nx), params (np)].
 * The test loss is L(z) = sum_i w_i f_i(z) with fixed random weights w; its
 * analytic gradient comes from the kernel's *_bwd with adj_f = w, and is
 * compared with central differences (ds_fd_gradient) on every component.
 *
 * Comparison: each component is scaled by s_i = max(1, |z_i|) (the
 * change of L per relative change of z_i, which is also the FD step's
 * scale), so stiffness-sized parameters and metre-sized coordinates are on
 * one footing; then ds_fd_compare with rtol and atol = atol_rel * max|g s|.
 * Every check also proves it can fail: each component large enough to be
 * resolved (|g_i s_i| > 200 atol) is scaled by 1.01 in a copy of the
 * analytic gradient, and separately its sign is flipped; the same
 * comparison must reject both. A state whose exact gradient is zero (out of
 * contact) passes only when both gradients are exactly zero (atol = 0).
 *
 * The check itself runs in double; a kernel wrapper converts to dsReal and
 * back (fc_to_real / fc_from_real: exact copies in a double build). In a
 * single-precision build (--enable-single) a test passes the FC_SINGLE_*
 * step and tolerances: the float kernel's loss is only good to ~1e-7 of its
 * terms, so the central difference needs a step of ~3e-3 (noise ~1e-7/h
 * against truncation ~h^2) and agrees to a few per cent; the perturbed
 * adjoint is then scaled by FC_BUMP = 1.2 instead of 1.01, so that the
 * check still proves it can fail. */
#ifndef DSIM_TESTS_FORCECHECK_H
#define DSIM_TESTS_FORCECHECK_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "dsim/fd.h"
#include "tests/dstest.h"

#define FC_MAXN 64

#if DS_SINGLE
#  define FC_BUMP 1.2
#else
#  define FC_BUMP 1.01
#endif
/* FD step, rtol and atol_rel of the single-precision build */
#define FC_SINGLE_H 3e-3
#define FC_SINGLE_RTOL 3e-2
#define FC_SINGLE_ATOL 3e-3

static inline void fc_to_real(dsReal* out, const double* in, int n) {
  for (int i = 0; i < n; i++) out[i] = (dsReal)in[i];
}
static inline void fc_from_real(double* out, const dsReal* in, int n) {
  for (int i = 0; i < n; i++) out[i] = (double)in[i];
}

typedef struct fcKernel {
  int nx; /* 3 x vertices */
  int np; /* parameters */
  void (*fwd)(const double* x, const double* v, const double* p, double* f, const void* ctx);
  void (*bwd)(const double* x, const double* v, const double* p, const double* adj_f,
              double* adj_x, double* adj_v, double* adj_p, const void* ctx);
  const void* ctx; /* rest data */
} fcKernel;

typedef struct fcLoss {
  const fcKernel* k;
  const double* w;
} fcLoss;

static uint64_t fc_rng_state = 0x9E3779B97F4A7C15ull;
static inline void fc_seed(uint64_t s) { fc_rng_state = s * 0x9E3779B97F4A7C15ull + 1; }
/* splitmix64 -> uniform in [lo, hi) */
static inline double fc_unif(double lo, double hi) {
  uint64_t z = (fc_rng_state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return lo + (hi - lo) * ((double)(z >> 11) * (1.0 / 9007199254740992.0));
}

static inline double fc_loss(const double* z, int n, void* user) {
  const fcLoss* L = (const fcLoss*)user;
  const fcKernel* k = L->k;
  double f[FC_MAXN];
  (void)n;
  k->fwd(z, z + k->nx, z + 2 * k->nx, f, k->ctx);
  double s = 0;
  for (int i = 0; i < k->nx; i++) s += L->w[i] * f[i];
  return s;
}

/* Analytic gradient of L at z into g (n = 2 nx + np). */
static inline void fc_analytic(const fcKernel* k, const double* z, const double* w, double* g) {
  int n = 2 * k->nx + k->np;
  for (int i = 0; i < n; i++) g[i] = 0;
  k->bwd(z, z + k->nx, z + 2 * k->nx, w, g, g + k->nx, g + 2 * k->nx, k->ctx);
}

/* Scaled comparison described above; returns ds_fd_compare's result and the
 * atol used. */
static inline int fc_compare(const double* ga, const double* gf, const double* z, int n, double rtol,
                      double atol_rel, double* atol_out, int* worst, double* werr) {
  double a[3 * FC_MAXN], b[3 * FC_MAXN], mx = 0;
  for (int i = 0; i < n; i++) {
    double s = fabs(z[i]) > 1 ? fabs(z[i]) : 1;
    a[i] = ga[i] * s;
    b[i] = gf[i] * s;
    if (fabs(a[i]) > mx) mx = fabs(a[i]);
    if (fabs(b[i]) > mx) mx = fabs(b[i]);
  }
  double atol = atol_rel * mx;
  if (atol_out) *atol_out = atol;
  return ds_fd_compare(a, b, n, rtol, atol, worst, werr);
}

/* Full check at one configuration z (x, v, params) with random weights. */
static inline void fc_check(const fcKernel* k, const double* z, double h, double rtol, double atol_rel,
                     const char* label) {
  int n = 2 * k->nx + k->np;
  double w[FC_MAXN], zc[3 * FC_MAXN], ga[3 * FC_MAXN], gf[3 * FC_MAXN], gp[3 * FC_MAXN];
  for (int i = 0; i < k->nx; i++) w[i] = fc_unif(-1, 1);
  memcpy(zc, z, sizeof(double) * (size_t)n);
  fc_analytic(k, zc, w, ga);
  fcLoss L = {k, w};
  CHECK_INT_EQ(ds_fd_gradient(fc_loss, &L, zc, n, h, gf), 0);
  CHECK(memcmp(zc, z, sizeof(double) * (size_t)n) == 0); /* x restored */
  int worst = -1;
  double werr = 0, atol = 0;
  int bad = fc_compare(ga, gf, z, n, rtol, atol_rel, &atol, &worst, &werr);
  dst_checks++;
  if (bad != 0) {
    DST_FAIL_AT("%s: gradient mismatch at component %d: analytic %.12g fd %.12g (z %.6g)", label,
                worst, ga[worst], gf[worst], z[worst]);
    for (int i = 0; i < n; i++)
      fprintf(stderr, "  [%2d] z %+.6e  analytic %+.10e  fd %+.10e\n", i, z[i], ga[i], gf[i]);
    return;
  }
  /* perturbed adjoints must be rejected */
  int tested = 0;
  for (int i = 0; i < n; i++) {
    double s = fabs(z[i]) > 1 ? fabs(z[i]) : 1;
    if (!(fabs(ga[i] * s) > 200 * atol)) continue;
    tested++;
    memcpy(gp, ga, sizeof(double) * (size_t)n);
    gp[i] *= FC_BUMP;
    int r1 = fc_compare(gp, gf, z, n, rtol, atol_rel, NULL, &worst, NULL);
    gp[i] = -ga[i];
    int r2 = fc_compare(gp, gf, z, n, rtol, atol_rel, NULL, NULL, NULL);
    dst_checks++;
    if (r1 != 1 || r2 != 1 || worst != i)
      DST_FAIL_AT("%s: perturbed adjoint component %d not rejected (%d %d, worst %d)", label, i, r1,
                  r2, worst);
  }
  dst_checks++;
  if (tested == 0 && atol > 0) DST_FAIL_AT("%s: no gradient component large enough to test", label);
}

/* -dE/dx (central differences of an energy over x, nx components) must equal
 * the force f computed at x. */
typedef double (*fcEnergyFn)(const double* x, int n, void* ctx);
static inline void fc_energy_check(fcEnergyFn E, void* ctx, const double* x, int nx, const double* f,
                            double h, double rtol, double atol_rel, const char* label) {
  double xc[FC_MAXN], g[FC_MAXN], mf[FC_MAXN], mx = 0;
  memcpy(xc, x, sizeof(double) * (size_t)nx);
  CHECK_INT_EQ(ds_fd_gradient(E, ctx, xc, nx, h, g), 0);
  for (int i = 0; i < nx; i++) {
    mf[i] = -g[i];
    if (fabs(f[i]) > mx) mx = fabs(f[i]);
  }
  int worst = -1;
  double werr = 0;
  int bad = ds_fd_compare(f, mf, nx, rtol, atol_rel * mx, &worst, &werr);
  dst_checks++;
  if (bad)
    DST_FAIL_AT("%s: force != -dE/dx at component %d: %.12g vs %.12g", label, worst, f[worst],
                mf[worst]);
}

#endif

/* Gradient comparison shared by the tests that check whole rollouts through
 * the public API (env and controller gradients vs central differences).
 * Include after tests/dstest.h. */
#ifndef DSIM_TESTS_GRADCHECK_H
#define DSIM_TESTS_GRADCHECK_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* out = (J(x + h) - J(x - h)) / 2h, J an expression that runs the whole
 * objective reading *x (a real of any type); *x is restored exactly. */
#define CENTRAL_DIFF(out, x, h, J)         \
  do {                                     \
    const double cd_x0_ = (double)*(x);    \
    *(x) = cd_x0_ + (h);                   \
    const double cd_jp_ = (J);             \
    *(x) = cd_x0_ - (h);                   \
    const double cd_jm_ = (J);             \
    *(x) = cd_x0_;                         \
    (out) = (cd_jp_ - cd_jm_) / (2 * (h)); \
  } while (0)

/* A gradient passes when every component satisfies
 * |a - f| <= rtol |f| + atol * max_j |f_j| (and f is not all zero). */
static inline int grad_ok(const double* a, const double* f, int n, double rtol, double atol, double* worst) {
  double fmax = 0, w = 0;
  for (int i = 0; i < n; i++) fmax = fmax > fabs(f[i]) ? fmax : fabs(f[i]);
  for (int i = 0; i < n; i++) {
    const double r = fabs(a[i] - f[i]) / (rtol * fabs(f[i]) + atol * fmax + 1e-300);
    if (r > w) w = r;
  }
  if (worst) *worst = w;
  return w <= 1 && fmax > 0;
}

/* Checks analytic a against finite differences f, then that the same
 * comparison rejects a with its largest component scaled by 1.01 (so the
 * tolerance would catch a wrong adjoint). Prints the worst ratio. */
static inline void check_grad(const char* what, const double* a, const double* f, int n, double rtol, double atol) {
  double w;
  int ok = grad_ok(a, f, n, rtol, atol, &w);
  printf("  %s: %d components, worst ratio %.3g\n", what, n, w);
  if (!ok)
    for (int i = 0; i < n && i < 8; i++) printf("    [%d] analytic %.10g fd %.10g\n", i, a[i], f[i]);
  CHECK(ok);
  double* p = (double*)malloc(sizeof(double) * (size_t)n);
  memcpy(p, a, sizeof(double) * (size_t)n);
  int imax = 0;
  for (int i = 1; i < n; i++)
    if (fabs(p[i]) > fabs(p[imax])) imax = i;
  p[imax] *= 1.01;
  CHECK(!grad_ok(p, f, n, rtol, atol, NULL));
  free(p);
}

/* For rollouts whose small components carry FD noise from contact or joint
 * switches: every component within rtol max(|a|, |f|) + atol max_j(|a_j|, |f_j|),
 * and the largest one tight enough (rtol relative, reject_atol absolute
 * against the same scale) that 1.01 times it fails. Prints every pair. */
static inline void check_grad_loose(const char* what, const double* a, const double* f, int n, double rtol, double atol,
                             double reject_atol) {
  double mx = 0;
  int big = 0;
  for (int i = 0; i < n; i++) {
    mx = fmax(mx, fmax(fabs(a[i]), fabs(f[i])));
    if (fabs(a[i]) > fabs(a[big])) big = i;
  }
  int bad = 0, rej = 0;
  for (int i = 0; i < n; i++) {
    const double tol = rtol * fmax(fabs(a[i]), fabs(f[i])) + atol * mx;
    if (!(fabs(a[i] - f[i]) <= tol)) bad = 1;
    if (i == big &&
        !(fabs(1.01 * a[i] - f[i]) <= rtol * fmax(fabs(1.01 * a[i]), fabs(f[i])) + reject_atol * mx))
      rej = 1;
  }
  printf("%s:", what);
  for (int i = 0; i < n; i++) printf(" (%.6g fd %.6g)", a[i], f[i]);
  printf("\n");
  CHECK(!bad);
  CHECK(mx > 0);
  CHECK(rej);
}

#endif

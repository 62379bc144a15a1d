/* Gradient comparison shared by the tests that check whole rollouts through
 * the public API (env and controller gradients vs central differences).
 * Include after tests/dstest.h. */
#ifndef DSIM_TESTS_GRADCHECK_H
#define DSIM_TESTS_GRADCHECK_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A gradient passes when every component satisfies
 * |a - f| <= rtol |f| + atol * max_j |f_j| (and f is not all zero). */
static int grad_ok(const double* a, const double* f, int n, double rtol, double atol, double* worst) {
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
static void check_grad(const char* what, const double* a, const double* f, int n, double rtol, double atol) {
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

#endif

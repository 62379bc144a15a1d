/* Finite-difference gradient and comparison utilities (include/dsim/fd.h). */
#include "config.h"

#include <math.h>

#include "dsim/fd.h"

int ds_fd_gradient(dsFdScalarFn f, void* user, double* x, int n, double h, double* grad) {
  if (n < 0 || !f || !(h > 0) || !isfinite(h)) return DS_ERR_INVALID;
  if (n > 0 && (!x || !grad)) return DS_ERR_INVALID;
  for (int i = 0; i < n; i++) {
    double xi = x[i];
    double hi = h * (fabs(xi) > 1 ? fabs(xi) : 1);
    /* Use the step actually representable around xi so the quotient divides
     * by the true distance between the two evaluation points. */
    double xp = xi + hi, xm = xi - hi;
    x[i] = xp;
    double fp = f(x, n, user);
    x[i] = xm;
    double fm = f(x, n, user);
    x[i] = xi;
    grad[i] = (fp - fm) / (xp - xm);
  }
  return 0;
}

int ds_fd_compare(const double* a, const double* b, int n, double rtol, double atol,
                  int* worst_index, double* worst_error) {
  if (n < 0 || !(rtol >= 0) || !(atol >= 0)) return DS_ERR_INVALID;
  if (n > 0 && (!a || !b)) return DS_ERR_INVALID;
  int worst = -1, worst_nan = 0, fail = 0;
  double worst_ratio = 0, worst_err = 0;
  for (int i = 0; i < n; i++) {
    double fa = fabs(a[i]), fb = fabs(b[i]);
    double err = fabs(a[i] - b[i]);
    double tol = atol + rtol * (fa > fb ? fa : fb);
    int is_nan = isnan(err);
    if (!(err <= tol)) fail = 1;
    double ratio = tol > 0 ? err / tol : (err > 0 ? INFINITY : 0);
    /* The first NaN is the worst; otherwise the first largest ratio. */
    if (worst < 0 || (is_nan && !worst_nan) || (!is_nan && !worst_nan && ratio > worst_ratio)) {
      worst = i;
      worst_nan = is_nan;
      worst_ratio = ratio;
      worst_err = err;
    }
  }
  if (worst_index) *worst_index = worst;
  if (worst_error) *worst_error = worst_err;
  return fail;
}

/* Public FD utility: ds_fd_gradient on analytic functions (including the
 * relative step for large |x_i| and exact restoration of x), ds_fd_compare's
 * pass/fail rule, worst index and error, NaN handling, argument errors. */
#include "config.h"

#include <math.h>

#include "dsim/fd.h"
#include "tests/dstest.h"

static int g_calls = 0;

/* f = sum_i c_i sin(x_i) + x_0 x_1^2 + exp(x_2 / 1000) */
static double fn(const double* x, int n, void* user) {
  const double* c = (const double*)user;
  double s = 0;
  g_calls++;
  for (int i = 0; i < n; i++) s += c[i] * sin(x[i]);
  return s + x[0] * x[1] * x[1] + exp(x[2] / 1000);
}

static double quad(const double* x, int n, void* user) {
  (void)user;
  double s = 0;
  for (int i = 0; i < n; i++) s += (i + 1) * x[i] * x[i];
  return s;
}

int main(void) {
  double c[4] = {1.5, -2, 0.5, 3};
  double x[4] = {0.3, -0.7, 2500.0, 1.1}, x0[4], g[4];
  for (int i = 0; i < 4; i++) x0[i] = x[i];
  CHECK_INT_EQ(ds_fd_gradient(fn, c, x, 4, 1e-6, g), 0);
  CHECK_INT_EQ(g_calls, 8);
  for (int i = 0; i < 4; i++) CHECK(x[i] == x0[i]);
  double exact[4] = {c[0] * cos(x[0]) + x[1] * x[1], c[1] * cos(x[1]) + 2 * x[0] * x[1],
                     c[2] * cos(x[2]) + exp(x[2] / 1000) / 1000, c[3] * cos(x[3])};
  /* x_2 = 2500 uses h_2 = 2.5e-3: truncation ~ h^2 |f'''| / 6 ~ 5e-7 */
  for (int i = 0; i < 4; i++) CHECK_CLOSE(g[i], exact[i], i == 2 ? 1e-5 : 1e-8, 1e-9);
  /* a quadratic is exact up to rounding */
  double q[3] = {1, -2, 3}, gq[3];
  CHECK_INT_EQ(ds_fd_gradient(quad, NULL, q, 3, 1e-4, gq), 0);
  for (int i = 0; i < 3; i++) CHECK_CLOSE(gq[i], 2 * (i + 1) * q[i], 1e-9, 1e-9);
  /* argument errors */
  CHECK_INT_EQ(ds_fd_gradient(NULL, NULL, q, 3, 1e-6, gq), DS_ERR_INVALID);
  CHECK_INT_EQ(ds_fd_gradient(quad, NULL, q, 3, 0, gq), DS_ERR_INVALID);
  CHECK_INT_EQ(ds_fd_gradient(quad, NULL, q, 3, NAN, gq), DS_ERR_INVALID);
  CHECK_INT_EQ(ds_fd_gradient(quad, NULL, q, -1, 1e-6, gq), DS_ERR_INVALID);
  CHECK_INT_EQ(ds_fd_gradient(quad, NULL, NULL, 3, 1e-6, gq), DS_ERR_INVALID);
  CHECK_INT_EQ(ds_fd_gradient(quad, NULL, NULL, 0, 1e-6, NULL), 0);

  /* compare: pass */
  double a[5] = {1.0, 2.0, -3.0, 0.0, 100.0}, b[5] = {1.0 + 1e-9, 2.0, -3.0 - 2e-9, 1e-12, 100};
  int wi = -7;
  double we = -1;
  CHECK_INT_EQ(ds_fd_compare(a, b, 5, 1e-8, 1e-10, &wi, &we), 0);
  /* ratios |a-b|/(atol + rtol max): [0] 1e-9/1.01e-8 = 0.099, [2] 2e-9/3.01e-8 = 0.066,
   * [3] 1e-12/1e-10 = 0.01: the worst (still passing) is 0 */
  CHECK_INT_EQ(wi, 0);
  CHECK_CLOSE(we, 1e-9, 1e-6, 0);
  /* fail: component 2 off by 1e-6 relative, component 4 off by 1e-7 */
  double b2[5] = {1.0, 2.0, -3.0 * (1 + 1e-6), 0.0, 100 * (1 + 1e-7)};
  CHECK_INT_EQ(ds_fd_compare(a, b2, 5, 1e-8, 1e-10, &wi, &we), 1);
  CHECK_INT_EQ(wi, 2);
  CHECK_CLOSE(we, 3e-6, 1e-6, 0);
  /* NaN never passes and is the worst */
  double b3[5] = {1.0, NAN, -3.0 * (1 + 1e-3), 0.0, 100};
  CHECK_INT_EQ(ds_fd_compare(a, b3, 5, 1e-8, 1e-10, &wi, &we), 1);
  CHECK_INT_EQ(wi, 1);
  CHECK(isnan(we));
  /* exact zeros with zero tolerance pass; any difference then fails */
  double z0[2] = {0, 0}, z1[2] = {0, 1e-300};
  CHECK_INT_EQ(ds_fd_compare(z0, z0, 2, 0, 0, &wi, &we), 0);
  CHECK_INT_EQ(ds_fd_compare(z0, z1, 2, 0, 0, &wi, &we), 1);
  CHECK_INT_EQ(wi, 1);
  /* n = 0, NULL outputs, argument errors */
  CHECK_INT_EQ(ds_fd_compare(NULL, NULL, 0, 1e-6, 0, &wi, &we), 0);
  CHECK_INT_EQ(wi, -1);
  CHECK_INT_EQ(ds_fd_compare(a, b2, 5, 1e-8, 1e-10, NULL, NULL), 1);
  CHECK_INT_EQ(ds_fd_compare(a, NULL, 5, 1e-8, 1e-10, NULL, NULL), DS_ERR_INVALID);
  CHECK_INT_EQ(ds_fd_compare(a, b, -1, 1e-8, 1e-10, NULL, NULL), DS_ERR_INVALID);
  CHECK_INT_EQ(ds_fd_compare(a, b, 5, -1, 1e-10, NULL, NULL), DS_ERR_INVALID);
  CHECK_INT_EQ(ds_fd_compare(a, b, 5, 1e-8, NAN, NULL, NULL), DS_ERR_INVALID);
  return DST_RESULT();
}

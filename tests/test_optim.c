/* Optimisers: Adam and SGD with momentum reach the minimum of an
 * ill-conditioned quadratic; the first steps match the update formulas of
 * dsim/controller.h exactly; gradient-norm clipping, the step-decay
 * schedule and the rate factor; bad settings are refused. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dsim/controller.h"
#include "tests/dstest.h"

enum { N = 6 };
static const double g_a[N] = {1, 3, 10, 0.5, 30, 2};       /* curvatures */
static const double g_c[N] = {1, -2, 0.5, 3, -0.25, 0.75}; /* minimum */

/* f(x) = 1/2 sum a_i (x_i - c_i)^2, gradient a_i (x_i - c_i) */
static double quad(const double* x, double* g) {
  double f = 0;
  for (int i = 0; i < N; i++) {
    const double e = x[i] - g_c[i];
    f += 0.5 * g_a[i] * e * e;
    if (g) g[i] = g_a[i] * e;
  }
  return f;
}

static double run(dsOptimDef d, int steps, double* x) {
  dsOptim* o = NULL;
  CHECK_INT_EQ(ds_optim_create(&d, N, &o), 0);
  if (!o) return 1e300;
  memset(x, 0, sizeof(double) * N);
  double g[N], gn;
  for (int k = 0; k < steps; k++) {
    quad(x, g);
    CHECK_INT_EQ(ds_optim_step(o, x, g, &gn), 0);
  }
  ds_optim_destroy(o);
  return quad(x, NULL);
}

int main(void) {
  double x[N];
  /* convergence */
  dsOptimDef adam = ds_default_optim_def(DS_OPTIM_ADAM);
  adam.lr = 0.05;
  adam.decay_every = 500;
  adam.decay_factor = 0.3;
  double f = run(adam, 3000, x);
  printf("adam: f = %.3g\n", f);
  CHECK(f < 1e-12);
  for (int i = 0; i < N; i++) CHECK_CLOSE(x[i], g_c[i], 0, 1e-6);
  dsOptimDef sgd = ds_default_optim_def(DS_OPTIM_SGD);
  sgd.lr = 0.005;
  sgd.momentum = 0.9;
  f = run(sgd, 2000, x);
  printf("sgd+momentum: f = %.3g\n", f);
  CHECK(f < 1e-20);
  for (int i = 0; i < N; i++) CHECK_CLOSE(x[i], g_c[i], 0, 1e-9);
  /* plain SGD without momentum needs many more steps than with it */
  sgd.momentum = 0;
  double f0 = run(sgd, 200, x);
  sgd.momentum = 0.9;
  double f1 = run(sgd, 200, x);
  CHECK(f1 < 1e-3 * f0);

  /* exact first steps */
  dsOptim* o = NULL;
  adam = ds_default_optim_def(DS_OPTIM_ADAM);
  adam.lr = 0.1;
  CHECK_INT_EQ(ds_optim_create(&adam, 2, &o), 0);
  double y[2] = {1, 2}, g1[2] = {0.5, -4}, g2[2] = {-1, 2}, gn = 0;
  CHECK_INT_EQ(ds_optim_step(o, y, g1, &gn), 0);
  CHECK_CLOSE(gn, sqrt(0.25 + 16), 1e-15, 0);
  /* step 1: m/(1-b1) = g, v/(1-b2) = g^2 -> x -= lr g/(|g| + eps) */
  CHECK_CLOSE(y[0], 1 - 0.1 * 0.5 / (0.5 + 1e-8), 1e-14, 0);
  CHECK_CLOSE(y[1], 2 + 0.1 * 4 / (4 + 1e-8), 1e-14, 0);
  CHECK_INT_EQ(ds_optim_step(o, y, g2, NULL), 0);
  {
    const double b1 = 0.9, b2 = 0.999;
    for (int i = 0; i < 2; i++) {
      double m = (1 - b1) * g1[i];
      double v = (1 - b2) * g1[i] * g1[i];
      double x0 = i == 0 ? 1 - 0.1 * 0.5 / (0.5 + 1e-8) : 2 + 0.1 * 4 / (4 + 1e-8);
      m = b1 * m + (1 - b1) * g2[i];
      v = b2 * v + (1 - b2) * g2[i] * g2[i];
      double want = x0 - 0.1 * (m / (1 - b1 * b1)) / (sqrt(v / (1 - b2 * b2)) + 1e-8);
      CHECK_CLOSE(y[i], want, 1e-14, 0);
    }
  }
  ds_optim_reset(o);
  y[0] = 1;
  CHECK_INT_EQ(ds_optim_step(o, y, g1, NULL), 0);
  CHECK_CLOSE(y[0], 1 - 0.1 * 0.5 / (0.5 + 1e-8), 1e-14, 0);
  ds_optim_destroy(o);

  /* SGD momentum: u1 = g1, x1 = x0 - lr g1; u2 = mu u1 + g2, x2 = x1 - lr u2 */
  sgd = ds_default_optim_def(DS_OPTIM_SGD);
  sgd.lr = 0.5;
  sgd.momentum = 0.8;
  CHECK_INT_EQ(ds_optim_create(&sgd, 2, &o), 0);
  y[0] = 1;
  y[1] = 2;
  ds_optim_step(o, y, g1, NULL);
  ds_optim_step(o, y, g2, NULL);
  CHECK_CLOSE(y[0], 1 - 0.5 * 0.5 - 0.5 * (0.8 * 0.5 - 1), 1e-15, 0);
  CHECK_CLOSE(y[1], 2 + 0.5 * 4 - 0.5 * (0.8 * -4 + 2), 1e-15, 0);
  ds_optim_destroy(o);

  /* clipping: |g| = 5 clipped to 1 -> plain SGD moves by lr * g / 5 */
  sgd.momentum = 0;
  sgd.lr = 1;
  sgd.clip_norm = 1;
  CHECK_INT_EQ(ds_optim_create(&sgd, 2, &o), 0);
  double z[2] = {0, 0}, g3[2] = {3, 4};
  ds_optim_step(o, z, g3, &gn);
  CHECK_CLOSE(gn, 5, 1e-15, 0); /* norm before clipping */
  CHECK_CLOSE(z[0], -0.6, 1e-15, 0);
  CHECK_CLOSE(z[1], -0.8, 1e-15, 0);
  double g4[2] = {0.3, 0.4}; /* below the threshold: untouched */
  ds_optim_step(o, z, g4, NULL);
  CHECK_CLOSE(z[0], -0.9, 1e-15, 0);
  ds_optim_destroy(o);

  /* step decay: lr_k = lr * f^floor(k / every) */
  sgd.clip_norm = 0;
  sgd.lr = 0.8;
  sgd.decay_every = 3;
  sgd.decay_factor = 0.5;
  CHECK_INT_EQ(ds_optim_create(&sgd, 2, &o), 0);
  for (int k = 0; k < 7; k++) {
    CHECK_CLOSE(ds_optim_lr(o), 0.8 * pow(0.5, k / 3), 1e-15, 0);
    ds_optim_step(o, z, g4, NULL);
  }
  /* the rate factor (ds_optim_set_lr_scale): it multiplies the scheduled
   * rate of the following steps, replaces the previous factor, and a reset
   * sets it back to 1; a factor that is not finite and > 0 is refused */
  ds_optim_reset(o);
  CHECK_INT_EQ(ds_optim_set_lr_scale(o, 0.25), 0);
  for (int k = 0; k < 4; k++) {
    CHECK_CLOSE(ds_optim_lr(o), 0.25 * 0.8 * pow(0.5, k / 3), 1e-15, 0);
    const double z0 = z[0];
    ds_optim_step(o, z, g4, NULL);
    CHECK_CLOSE(z[0], z0 - 0.25 * 0.8 * pow(0.5, k / 3) * 0.3, 1e-15, 1e-15); /* SGD, momentum 0 */
  }
  CHECK_INT_EQ(ds_optim_set_lr_scale(o, 0.5), 0);
  CHECK_CLOSE(ds_optim_lr(o), 0.5 * 0.8 * 0.5, 1e-15, 0);
  CHECK_INT_EQ(ds_optim_set_lr_scale(o, 0), DS_ERR_INVALID);
  CHECK_INT_EQ(ds_optim_set_lr_scale(o, NAN), DS_ERR_INVALID);
  CHECK_INT_EQ(ds_optim_set_lr_scale(o, INFINITY), DS_ERR_INVALID);
  CHECK_CLOSE(ds_optim_lr(o), 0.5 * 0.8 * 0.5, 1e-15, 0); /* refused: unchanged */
  ds_optim_reset(o);
  CHECK_CLOSE(ds_optim_lr(o), 0.8, 1e-15, 0);
  /* a non-finite gradient is refused */
  double gbad[2] = {NAN, 0};
  CHECK_INT_EQ(ds_optim_step(o, z, gbad, NULL), DS_ERR_RANGE);
  ds_optim_destroy(o);

  /* bad settings */
  dsOptimDef bad = ds_default_optim_def(DS_OPTIM_ADAM);
  bad.beta1 = 1;
  CHECK_INT_EQ(ds_optim_create(&bad, 2, &o), DS_ERR_RANGE);
  bad = ds_default_optim_def(DS_OPTIM_SGD);
  bad.lr = -1;
  CHECK_INT_EQ(ds_optim_create(&bad, 2, &o), DS_ERR_RANGE);
  CHECK_INT_EQ(ds_optim_create(&sgd, 0, &o), DS_ERR_INVALID);
  return DST_RESULT();
}

/* Dihedral bending kernel: angle values, d_i = dtheta/dx_i (checks the
 * forward), adjoint vs central differences on random, nearly flat and
 * nearly folded hinges; degenerate hinges give zero force and gradient. */
#include "config.h"

#include "engine/force_bend.h"
#include "tests/forcecheck.h"

#if DS_SINGLE
int main(void) { DST_SKIP("gradient checks need double precision"); }
#else

static void fwd(const double* x, const double* v, const double* p, double* f, const void* ctx) {
  (void)ctx;
  dsBendParam bp = {p[0], p[1], p[2]};
  ds__bend_fwd(x, v, &bp, f);
}

static void bwd(const double* x, const double* v, const double* p, const double* af, double* ax,
                double* av, double* ap, const void* ctx) {
  (void)ctx;
  dsBendParam bp = {p[0], p[1], p[2]};
  dsBendParam a = {ap[0], ap[1], ap[2]};
  ds__bend_bwd(x, v, &bp, af, ax, av, &a);
  ap[0] = a.ke;
  ap[1] = a.kd;
  ap[2] = a.rest;
}

static double neg_angle(const double* x, int n, void* ctx) {
  (void)n;
  (void)ctx;
  return -ds__bend_angle(x);
}

/* Hinge with edge x3 -> x4 of length le, wings of widths w1, w2 at signed
 * dihedral angle phi (phi = 0 flat), rigidly rotated and translated. */
static void hinge(double* x, double le, double w1, double w2, double phi) {
  double loc[12] = {0.4 * le, -w1, 0,                          /* x1 */
                    0.6 * le, w2 * cos(phi), w2 * sin(phi),    /* x2 */
                    0, 0, 0, le, 0, 0};                        /* x3, x4 */
  double a = fc_unif(0, 6.28), b = fc_unif(0, 6.28), t[3];
  double R[9] = {cos(a), -sin(a), 0, sin(a), cos(a), 0, 0, 0, 1}, S[9];
  double Q[9] = {1, 0, 0, 0, cos(b), -sin(b), 0, sin(b), cos(b)};
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++)
      S[3 * i + j] = R[3 * i] * Q[j] + R[3 * i + 1] * Q[3 + j] + R[3 * i + 2] * Q[6 + j];
  for (int c = 0; c < 3; c++) t[c] = fc_unif(-1, 1);
  for (int k = 0; k < 4; k++)
    for (int c = 0; c < 3; c++)
      x[3 * k + c] = t[c] + S[3 * c] * loc[3 * k] + S[3 * c + 1] * loc[3 * k + 1] +
                     S[3 * c + 2] * loc[3 * k + 2];
}

int main(void) {
  const double PI = 3.14159265358979323846;
  char label[80];
  fc_seed(11);

  /* angle values: flat is 0, |theta| follows the fold, sign flips with it */
  {
    double x[12];
    hinge(x, 0.2, 0.1, 0.15, 0);
    CHECK_CLOSE(ds__bend_angle(x), 0, 0, 1e-12);
    for (int k = 1; k < 8; k++) {
      double phi = k * 0.4;
      hinge(x, 0.2, 0.1, 0.15, phi);
      double th = ds__bend_angle(x);
      CHECK_CLOSE(fabs(th), phi, 1e-10, 1e-12);
      hinge(x, 0.2, 0.1, 0.15, -phi);
      CHECK_CLOSE(ds__bend_angle(x), -th, 1e-10, 1e-12);
    }
  }

  /* d_i = dtheta/dx_i: f with kd = 0 is -|e| ke (theta - theta0) d, so
   * d = f / (-|e| ke (theta - theta0)); compared with FD of the angle */
  for (int t = 0; t < 20; t++) {
    double x[12], v[12] = {0}, f[12], d[12];
    double phi = t < 16 ? fc_unif(-3, 3) : (t % 2 ? 1 : -1) * (PI - 1e-2);
    hinge(x, fc_unif(0.1, 1), fc_unif(0.05, 0.5), fc_unif(0.05, 0.5), phi);
    double th = ds__bend_angle(x), le = sqrt((x[9] - x[6]) * (x[9] - x[6]) +
                                            (x[10] - x[7]) * (x[10] - x[7]) +
                                            (x[11] - x[8]) * (x[11] - x[8]));
    dsBendParam p = {100, 0, th - 1};
    ds__bend_fwd(x, v, &p, f);
    for (int i = 0; i < 12; i++) d[i] = f[i] / (-le * 100);
    snprintf(label, sizeof label, "bend dtheta/dx %d (theta %.3f)", t, th);
    fc_energy_check(neg_angle, NULL, x, 12, d, 1e-7, 1e-6, 1e-8, label);
  }

  const fcKernel K = {12, 3, fwd, bwd, NULL};
  double z[27];
  for (int t = 0; t < 30; t++) {
    double phi;
    if (t < 18)
      phi = fc_unif(-3, 3);
    else if (t < 24)
      phi = (t % 2 ? 1 : -1) * fc_unif(1e-4, 1e-2); /* nearly flat */
    else
      phi = (t % 2 ? 1 : -1) * (PI - fc_unif(1e-3, 2e-2)); /* nearly folded */
    hinge(z, fc_unif(0.1, 1), fc_unif(0.05, 0.5), fc_unif(0.05, 0.5), phi);
    for (int i = 0; i < 12; i++) z[12 + i] = fc_unif(-1.5, 1.5);
    z[24] = fc_unif(1, 100);    /* ke */
    z[25] = fc_unif(0, 1);      /* kd */
    z[26] = fc_unif(-1.5, 1.5); /* rest angle */
    snprintf(label, sizeof label, "bend %d (phi %.4f)", t, phi);
    fc_check(&K, z, t < 24 ? 1e-6 : 1e-8, 1e-6, 1e-8, label);
  }

  /* thin wings (x1 at 1e-3 |e| from the edge line) are still smooth */
  for (int t = 0; t < 4; t++) {
    hinge(z, 0.5, 5e-4 * (t + 1), 0.2, fc_unif(-3, 3));
    for (int i = 0; i < 12; i++) z[12 + i] = fc_unif(-1.5, 1.5);
    z[24] = 100, z[25] = 0.5, z[26] = 0.3;
    snprintf(label, sizeof label, "bend thin wing %d", t);
    fc_check(&K, z, 1e-10, 1e-5, 1e-8, label);
  }

  /* degenerate hinges: zero edge, collapsed wing -> zero force and gradient */
  {
    double xs[3][12];
    hinge(xs[0], 0.2, 0.1, 0.1, 0.5);
    for (int c = 0; c < 3; c++) xs[0][9 + c] = xs[0][6 + c]; /* x4 = x3 */
    hinge(xs[1], 0.2, 0.1, 0.1, 0.5);
    for (int c = 0; c < 3; c++) xs[1][c] = 0.5 * (xs[1][6 + c] + xs[1][9 + c]); /* x1 on edge */
    hinge(xs[2], 0.2, 0.1, 0.1, 0.5);
    for (int c = 0; c < 3; c++) xs[2][3 + c] = xs[2][9 + c]; /* x2 = x4 */
    for (int k = 0; k < 3; k++) {
      double v[12], f[12], w[12], ax[12] = {0}, av[12] = {0};
      for (int i = 0; i < 12; i++) v[i] = fc_unif(-1, 1), w[i] = fc_unif(-1, 1);
      dsBendParam p = {100, 1, 0.3}, ap = {0, 0, 0};
      ds__bend_fwd(xs[k], v, &p, f);
      ds__bend_bwd(xs[k], v, &p, w, ax, av, &ap);
      int zero = ap.ke == 0 && ap.kd == 0 && ap.rest == 0;
      for (int i = 0; i < 12; i++) zero &= f[i] == 0 && ax[i] == 0 && av[i] == 0;
      CHECK(zero);
      CHECK(ds__bend_angle(xs[k]) == 0);
    }
  }

  /* rigid motion of the hinge (uniform velocity) adds no damping force */
  {
    double x[12], v[12], f[12], f0[12], v0[12] = {0};
    hinge(x, 0.3, 0.1, 0.2, 0.7);
    for (int i = 0; i < 12; i++) v[i] = (i % 3 == 0) ? 1 : -2;
    dsBendParam p = {10, 5, 0.2};
    ds__bend_fwd(x, v, &p, f);
    ds__bend_fwd(x, v0, &p, f0);
    for (int i = 0; i < 12; i++) CHECK_CLOSE(f[i], f0[i], 1e-12, 1e-12);
  }
  return DST_RESULT();
}
#endif

/* Lift and drag kernel: forward against the FORMULAS expression (acos form),
 * adjoint vs central differences on random states, near zero mean
 * velocity, with the mean velocity parallel to the face and along its
 * normal; exact zero velocity and collapsed faces give zero, not NaN. */
#include "config.h"

#include "engine/force_aero.h"
#include "tests/forcecheck.h"

#if DS_SINGLE
int main(void) { DST_SKIP("gradient checks need double precision"); }
#else

static void fwd(const double* x, const double* v, const double* p, double* f, const void* ctx) {
  (void)ctx;
  dsAeroParam ap = {p[0], p[1]};
  ds__aero_fwd(x, v, &ap, f);
}

static void bwd(const double* x, const double* v, const double* p, const double* af, double* ax,
                double* av, double* ap, const void* ctx) {
  (void)ctx;
  dsAeroParam pp = {p[0], p[1]};
  dsAeroParam a = {ap[0], ap[1]};
  ds__aero_bwd(x, v, &pp, af, ax, av, &a);
  ap[0] = a.k_lift;
  ap[1] = a.k_drag;
}

/* FORMULAS as written: D = kd A |n^.vb| vb, L = kl A (pi/2 - acos(n^.vb^)) |vb|^2 n^ */
static void reference(const double* x, const double* v, double kl, double kd, double out[3]) {
  const double PI = 3.14159265358979323846;
  double eq[3], er[3], n[3], vb[3];
  for (int c = 0; c < 3; c++) {
    eq[c] = x[3 + c] - x[c];
    er[c] = x[6 + c] - x[c];
    vb[c] = (v[c] + v[3 + c] + v[6 + c]) / 3;
  }
  n[0] = eq[1] * er[2] - eq[2] * er[1];
  n[1] = eq[2] * er[0] - eq[0] * er[2];
  n[2] = eq[0] * er[1] - eq[1] * er[0];
  double ln = sqrt(n[0] * n[0] + n[1] * n[1] + n[2] * n[2]), A = 0.5 * ln;
  double lv = sqrt(vb[0] * vb[0] + vb[1] * vb[1] + vb[2] * vb[2]);
  double nv = (n[0] * vb[0] + n[1] * vb[1] + n[2] * vb[2]) / ln;
  double ang = PI / 2 - acos(nv / lv);
  for (int c = 0; c < 3; c++)
    out[c] = -(kd * A * fabs(nv) * vb[c] + kl * A * ang * lv * lv * n[c] / ln);
}

static void rand_state(double* z, double vmean_scale) {
  double size = fc_unif(0.1, 1);
  for (int i = 0; i < 9; i++) z[i] = fc_unif(-size, size);
  double m[3];
  for (int c = 0; c < 3; c++) m[c] = vmean_scale * fc_unif(-1.5, 1.5);
  for (int k = 0; k < 3; k++)
    for (int c = 0; c < 3; c++) z[9 + 3 * k + c] = m[c];
  /* zero-mean per-vertex spread */
  for (int c = 0; c < 3; c++) {
    double a = fc_unif(-1, 1), b = fc_unif(-1, 1);
    z[9 + c] += a;
    z[12 + c] += b;
    z[15 + c] -= a + b;
  }
  z[18] = fc_unif(1, 20); /* k_lift */
  z[19] = fc_unif(1, 10); /* k_drag */
}

int main(void) {
  const fcKernel K = {9, 2, fwd, bwd, NULL};
  double z[20], f[9], ref[3];
  char label[80];
  fc_seed(13);

  /* forward: every vertex gets the full -(D + L) of FORMULAS */
  for (int t = 0; t < 20; t++) {
    rand_state(z, 1);
    dsAeroParam p = {z[18], z[19]};
    ds__aero_fwd(z, z + 9, &p, f);
    reference(z, z + 9, z[18], z[19], ref);
    for (int k = 0; k < 3; k++)
      for (int c = 0; c < 3; c++) CHECK_CLOSE(f[3 * k + c], ref[c], 1e-12, 1e-14);
  }
  /* hand value: unit right triangle in z = 0 (n^ = +z, A = 1/2), vb = (0, 0, 2):
   * D = kd (1/2)(2)(0,0,2), L = kl (1/2)(pi/2)(4)(0,0,1) */
  {
    double x[9] = {0, 0, 0, 1, 0, 0, 0, 1, 0}, v[9] = {0, 0, 2, 1, 0, 2, -1, 0, 2};
    dsAeroParam p = {10, 5};
    ds__aero_fwd(x, v, &p, f);
    double want = -(5 * 0.5 * 2 * 2 + 10 * 0.5 * (3.14159265358979323846 / 2) * 4);
    CHECK_CLOSE(f[2], want, 1e-14, 0);
    CHECK_CLOSE(f[5], want, 1e-14, 0);
    CHECK(f[0] == 0 && f[1] == 0);
  }

  /* gradients: random */
  for (int t = 0; t < 20; t++) {
    rand_state(z, 1);
    snprintf(label, sizeof label, "aero random %d", t);
    fc_check(&K, z, 1e-6, 1e-6, 1e-8, label);
  }
  /* near zero mean velocity (|vb| ~ 1e-3 .. 1e-2, vertex velocities ~ 1) */
  for (int t = 0; t < 8; t++) {
    rand_state(z, t < 4 ? 1e-2 : 1e-3);
    snprintf(label, sizeof label, "aero near zero vb %d", t);
    fc_check(&K, z, 1e-7, 1e-6, 1e-8, label);
  }
  /* vb exactly parallel to the face (face in y = 0, vb_y = 0), nearly
   * parallel, exactly and nearly along the normal */
  for (int t = 0; t < 8; t++) {
    double x[9] = {0.1, 0.3, -0.2, 0.6, 0.3, 0.1, 0.2, 0.3, 0.5};
    for (int i = 0; i < 9; i++) z[i] = x[i];
    rand_state(z + 0, 1); /* velocities and parameters */
    for (int i = 0; i < 9; i++) z[i] = x[i];
    double m[3] = {fc_unif(-1.5, 1.5), 0, fc_unif(-1.5, 1.5)};
    if (t == 1 || t == 5) m[1] = 1e-3;            /* nearly parallel */
    if (t >= 4) m[0] = (t == 4 || t == 5) ? 0 : 1e-3, m[2] = m[0], m[1] = 1.2; /* along normal */
    double mm[3] = {0, 0, 0};
    for (int k = 0; k < 3; k++)
      for (int c = 0; c < 3; c++) mm[c] += z[9 + 3 * k + c] / 3;
    for (int k = 0; k < 3; k++)
      for (int c = 0; c < 3; c++) z[9 + 3 * k + c] += m[c] - mm[c];
    /* make the mean exact: put the rounding residue on one vertex */
    for (int c = 0; c < 3; c++) {
      double s = (z[9 + c] + z[12 + c] + z[15 + c]) / 3;
      z[15 + c] += 3 * (m[c] - s);
    }
    if (t == 4 || t == 5) /* exactly along the normal: no tangential velocity at all */
      for (int k = 0; k < 3; k++) z[9 + 3 * k] = z[11 + 3 * k] = 0;
    if (t == 0 || t == 2 || t == 3) CHECK(z[10] + z[13] + z[16] == 0); /* exactly parallel */
    snprintf(label, sizeof label, "aero parallel/normal %d", t);
    fc_check(&K, z, 1e-7, 1e-6, 1e-8, label);
  }

  /* exactly zero mean velocity and a collapsed face: zero force and
   * gradient, no NaN */
  {
    double x[9] = {0, 0, 0, 1, 0, 0, 0, 1, 0}, v[9] = {1, 2, 3, -1, 0, -1, 0, -2, -2};
    double w[9], ax[9] = {0}, av[9] = {0};
    dsAeroParam p = {10, 5}, ap = {0, 0};
    for (int i = 0; i < 9; i++) w[i] = fc_unif(-1, 1);
    ds__aero_fwd(x, v, &p, f);
    ds__aero_bwd(x, v, &p, w, ax, av, &ap);
    int zero = ap.k_lift == 0 && ap.k_drag == 0;
    for (int i = 0; i < 9; i++) zero &= f[i] == 0 && ax[i] == 0 && av[i] == 0;
    CHECK(zero);
    double xc[9] = {0, 0, 0, 1, 1, 1, 2, 2, 2}, vc[9] = {1, 0, 0, 1, 0, 0, 1, 0, 0};
    ds__aero_fwd(xc, vc, &p, f);
    ds__aero_bwd(xc, vc, &p, w, ax, av, &ap);
    int fin = isfinite(ap.k_lift) && isfinite(ap.k_drag);
    for (int i = 0; i < 9; i++) fin &= isfinite(f[i]) && isfinite(ax[i]) && isfinite(av[i]);
    CHECK(fin);
  }
  return DST_RESULT();
}
#endif

/* Ground contact kernel: adjoint vs central differences out of contact, in
 * contact, just inside the skin, approaching and separating, friction
 * sticking and sliding (saturated); forward values of each branch. */
#include "config.h"

#include "engine/force_contact.h"
#include "tests/forcecheck.h"

#if DS_SINGLE
int main(void) { DST_SKIP("gradient checks need double precision"); }
#else

static void fwd(const double* x, const double* v, const double* p, double* f, const void* ctx) {
  (void)ctx;
  dsContactParam cp = {p[0], p[1], p[2], p[3], p[4]};
  ds__contact_fwd(x, v, &cp, f);
}

static void bwd(const double* x, const double* v, const double* p, const double* af, double* ax,
                double* av, double* ap, const void* ctx) {
  (void)ctx;
  dsContactParam cp = {p[0], p[1], p[2], p[3], p[4]};
  dsContactParam a = {ap[0], ap[1], ap[2], ap[3], ap[4]};
  ds__contact_bwd(x, v, &cp, af, ax, av, &a);
  ap[0] = a.ke;
  ap[1] = a.kd;
  ap[2] = a.kf;
  ap[3] = a.mu;
  ap[4] = a.skin;
}

/* z = [x(3), v(3), ke, kd, kf, mu, skin] */
static void setz(double* z, double y, double vx, double vy, double vz, double ke, double kd,
                 double kf, double mu, double skin) {
  z[0] = fc_unif(-1, 1);
  z[1] = y;
  z[2] = fc_unif(-1, 1);
  z[3] = vx;
  z[4] = vy;
  z[5] = vz;
  z[6] = ke;
  z[7] = kd;
  z[8] = kf;
  z[9] = mu;
  z[10] = skin;
}

/* regime of a state: 0 out, 1 sticking, 2 sliding */
static int regime(const double* z) {
  double c = z[1] - z[10];
  if (!(c < 0)) return 0;
  double fn = -z[6] * c - z[7] * (z[4] < 0 ? z[4] : 0);
  double vt = sqrt(z[3] * z[3] + z[5] * z[5]);
  return z[8] * vt <= z[9] * fn ? 1 : 2;
}

int main(void) {
  const fcKernel K = {3, 5, fwd, bwd, NULL};
  double z[11];
  char label[80];
  fc_seed(7);
  int count[3] = {0, 0, 0};
  /* walker-like (ke 1e4, kd 1e3, kf 1e3, mu 0.5, skin 0.01) and gear-like
   * (ke 1e4, kd 1, kf 10, mu 0.5) parameters */
  for (int t = 0; t < 40; t++) {
    int gear = t & 1;
    double ke = 1e4 * fc_unif(0.5, 2), kd = gear ? fc_unif(0.5, 2) : 1e3 * fc_unif(0.5, 2);
    double kf = gear ? 10 * fc_unif(0.5, 2) : 1e3 * fc_unif(0.5, 2), mu = fc_unif(0.2, 1);
    double skin = 0.01;
    int kind = (t / 2) % 5;
    double y, vy, vs;
    switch (kind) {
      case 0: y = fc_unif(0.02, 1); vy = fc_unif(-1, 1); vs = 1; break;        /* out */
      case 1: y = fc_unif(-0.05, 0.005); vy = fc_unif(-1.5, -0.1); vs = 1; break; /* approach */
      case 2: y = fc_unif(-0.05, 0.005); vy = fc_unif(0.1, 1.5); vs = 1; break;   /* separate */
      case 3: y = skin - fc_unif(1e-5, 1e-4); vy = fc_unif(-1, 1); vs = 1; break; /* just inside */
      default: y = fc_unif(-0.05, 0.005); vy = fc_unif(-1, 1); vs = 1e-3; break;  /* slow: stick */
    }
    setz(z, y, vs * fc_unif(-1.5, 1.5), vy, vs * fc_unif(-1.5, 1.5), ke, kd, kf, mu, skin);
    int rg = regime(z);
    count[rg]++;
    /* keep clear of the switches by more than the FD step */
    if (rg > 0) {
      double c = z[1] - z[10];
      double fn = -z[6] * c - z[7] * (z[4] < 0 ? z[4] : 0);
      double vt = sqrt(z[3] * z[3] + z[5] * z[5]);
      if (fabs(z[8] * vt - z[9] * fn) < 1e-3 * (z[9] * fn + 1e-12)) continue;
      if (fabs(z[4]) < 1e-4) continue;
    }
    snprintf(label, sizeof label, "contact case %d kind %d regime %d", t, kind, rg);
    fc_check(&K, z, 1e-7, 1e-6, 1e-8, label);
  }
  CHECK(count[0] > 0 && count[1] > 0 && count[2] > 0);

  /* friction exactly at |vt| = 0: sticking branch, no NaN, gradient -kf I */
  {
    double x[3] = {0.2, -0.01, 0.3}, v[3] = {0, -0.5, 0}, f[3], w[3] = {1, 1, 1};
    double ax[3] = {0}, av[3] = {0};
    dsContactParam p = {1e4, 1e3, 1e3, 0.5, 0.01}, ap = {0, 0, 0, 0, 0};
    ds__contact_fwd(x, v, &p, f);
    CHECK(f[0] == 0 && f[2] == 0);
    CHECK_CLOSE(f[1], -1e4 * (-0.02) - 1e3 * (-0.5), 1e-14, 0);
    ds__contact_bwd(x, v, &p, w, ax, av, &ap);
    CHECK_CLOSE(av[0], -1e3, 1e-14, 0);
    CHECK_CLOSE(av[2], -1e3, 1e-14, 0);
    CHECK(isfinite(ap.mu) && isfinite(ap.kf));
    /* sliding with zero fn cap (mu = 0): |vt| = 0 still gives zero friction */
    p.mu = 0;
    ds__contact_fwd(x, v, &p, f);
    CHECK(f[0] == 0 && f[2] == 0 && isfinite(f[1]));
  }

  /* forward values: sliding force magnitude is mu fn, along -vt */
  {
    double x[3] = {0, 0.0, 0}, v[3] = {3, 0.2, -4}, f[3];
    dsContactParam p = {1e4, 1e3, 1e3, 0.5, 0.01};
    ds__contact_fwd(x, v, &p, f);
    double fn = 1e4 * 0.01; /* vn > 0: no damping */
    CHECK_CLOSE(f[1], fn, 1e-14, 0);
    CHECK_CLOSE(f[0], -0.5 * fn * 3 / 5, 1e-14, 0);
    CHECK_CLOSE(f[2], -0.5 * fn * -4 / 5, 1e-14, 0);
    /* y = skin exactly: out of contact */
    x[1] = 0.01;
    ds__contact_fwd(x, v, &p, f);
    CHECK(f[0] == 0 && f[1] == 0 && f[2] == 0);
  }

  /* normal force is -dE/dy of E = ke/2 c^2 (no damping, no tangential v) */
  {
    double zz[3] = {0.1, -0.003, 0.2}, f[3], v[3] = {0, 0, 0};
    static dsContactParam pe = {2e4, 0, 0, 0.5, 0.01};
    ds__contact_fwd(zz, v, &pe, f);
    CHECK_CLOSE(f[1], -2e4 * (-0.013), 1e-13, 0);
  }
  return DST_RESULT();
}
#endif

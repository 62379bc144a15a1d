/* Spring kernel: adjoint vs central differences (x, v, ke, kd, rest and the
 * activation a) on random and degenerate states (short spring, a = -1:
 * zero rest length, a spring at its actuated rest length), force vs -dE/dx
 * of E = ke/2 (l - L (1 + a))^2, zero-length guard, a = 0 equal bit for bit
 * to the passive spring. */
#include "config.h"

#include "engine/force_spring.h"
#include "tests/forcecheck.h"

static void fwd(const double* x, const double* v, const double* p, double* f, const void* ctx) {
  (void)ctx;
  dsReal xr[6], vr[6], fr[6];
  fc_to_real(xr, x, 6);
  fc_to_real(vr, v, 6);
  dsSpringParam sp = {(dsReal)p[0], (dsReal)p[1], (dsReal)p[2], (dsReal)p[3]};
  ds__spring_fwd(xr, vr, &sp, fr);
  fc_from_real(f, fr, 6);
}

static void bwd(const double* x, const double* v, const double* p, const double* af, double* ax,
                double* av, double* ap, const void* ctx) {
  (void)ctx;
  dsReal xr[6], vr[6], afr[6], axr[6], avr[6];
  fc_to_real(xr, x, 6);
  fc_to_real(vr, v, 6);
  fc_to_real(afr, af, 6);
  fc_to_real(axr, ax, 6);
  fc_to_real(avr, av, 6);
  dsSpringParam sp = {(dsReal)p[0], (dsReal)p[1], (dsReal)p[2], (dsReal)p[3]};
  dsSpringParam asp = {(dsReal)ap[0], (dsReal)ap[1], (dsReal)ap[2], (dsReal)ap[3]};
  ds__spring_bwd(xr, vr, &sp, afr, axr, avr, &asp);
  fc_from_real(ax, axr, 6);
  fc_from_real(av, avr, 6);
  ap[0] = asp.ke;
  ap[1] = asp.kd;
  ap[2] = asp.rest;
  ap[3] = asp.act;
}

#if DS_SINGLE
/* Single precision: the float kernel's adjoint against central differences
 * at FC_SINGLE_* tolerances on random states (the degenerate states and
 * the bit-for-bit checks below are double-only). */
int main(void) {
  const fcKernel K = {6, 4, fwd, bwd, NULL};
  double z[16];
  char label[64];
  fc_seed(1);
  for (int t = 0; t < 20; t++) {
    for (int i = 0; i < 6; i++) z[i] = fc_unif(-1, 1);
    for (int i = 0; i < 6; i++) z[6 + i] = fc_unif(-1.5, 1.5);
    z[12] = fc_unif(1e2, 1e4);
    z[13] = fc_unif(0, 1e2);
    z[14] = fc_unif(0.1, 2);
    z[15] = t < 4 ? 0 : fc_unif(-0.6, 0.6);
    snprintf(label, sizeof label, "spring random %d (single)", t);
    fc_check(&K, z, FC_SINGLE_H, FC_SINGLE_RTOL, FC_SINGLE_ATOL, label);
  }
  return DST_RESULT();
}
#else

static double energy(const double* x, int n, void* ctx) {
  const dsSpringParam* p = (const dsSpringParam*)ctx;
  (void)n;
  double d[3] = {x[0] - x[3], x[1] - x[4], x[2] - x[5]};
  double c = sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]) - p->rest * (1 + p->act);
  return 0.5 * p->ke * c * c;
}

int main(void) {
  const fcKernel K = {6, 4, fwd, bwd, NULL};
  double z[16];
  char label[64];
  fc_seed(1);
  for (int t = 0; t < 20; t++) {
    for (int i = 0; i < 6; i++) z[i] = fc_unif(-1, 1);
    for (int i = 0; i < 6; i++) z[6 + i] = fc_unif(-1.5, 1.5);
    z[12] = fc_unif(1e2, 1e4); /* ke */
    z[13] = fc_unif(0, 1e2);   /* kd */
    z[14] = fc_unif(0.1, 2);   /* rest: stretched and compressed */
    z[15] = t < 4 ? 0 : fc_unif(-0.6, 0.6); /* activation: passive, contracting, extending */
    snprintf(label, sizeof label, "spring random %d", t);
    fc_check(&K, z, 1e-6, 1e-6, 1e-8, label);

    /* elastic force is -dE/dx */
    dsSpringParam p = {z[12], 0, z[14], z[15]};
    double f[6];
    ds__spring_fwd(z, z + 6, &p, f);
    fc_energy_check(energy, &p, z, 6, f, 1e-6, 1e-6, 1e-8, label);
  }

  /* short spring (1e-4 m, far below rest length) is still smooth */
  {
    double zs[16] = {0.3, 0.2, 0.1, 0.3 + 6e-5, 0.2 - 8e-5, 0.1, 0.5, -0.2, 0.1, 0.3, 0.4, -1,
                     1e3, 10, 0.5, 0.2};
    fc_check(&K, zs, 1e-9, 1e-6, 1e-8, "spring short");
  }

  /* a = -1: zero rest length (s = ke l + kd cdot), still smooth in a */
  {
    double za[16] = {0.1, 0.5, 0.2, -0.3, 0.2, 0.4, 0.5, -0.2, 0.1, 0.3, 0.4, -1, 2e3, 5, 0.7, -1};
    fc_check(&K, za, 1e-6, 1e-6, 1e-8, "spring a = -1");
  }

  /* at its actuated rest length (c = 0): only damping acts, the gradient
   * in a is -ke L (G . d^) and is still checked */
  {
    double zr[16] = {0.1, 0.5, 0.2, -0.3, 0.2, 0.4, 0.5, -0.2, 0.1, 0.3, 0.4, -1, 2e3, 5, 0.5, 0};
    double d[3] = {zr[0] - zr[3], zr[1] - zr[4], zr[2] - zr[5]};
    zr[15] = sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]) / zr[14] - 1;
    fc_check(&K, zr, 1e-6, 1e-6, 1e-8, "spring at actuated rest");
  }

  /* a = 0 is the passive spring bit for bit (forward and adjoint) */
  {
    fc_seed(7);
    for (int t = 0; t < 50; t++) {
      double x[6], v[6], w[6], f0[6], f1[6];
      for (int i = 0; i < 6; i++) {
        x[i] = fc_unif(-1, 1);
        v[i] = fc_unif(-1, 1);
        w[i] = fc_unif(-1, 1);
      }
      dsSpringParam p = {fc_unif(1e2, 1e4), fc_unif(0, 1e2), fc_unif(0.1, 2), 0};
      ds__spring_fwd(x, v, &p, f1);
      /* the passive formula, s = ke (l - L) + kd cdot */
      double dd[3] = {x[0] - x[3], x[1] - x[4], x[2] - x[5]}, dh[3], dv[3];
      double l = dsu_normalize3(dh, dd);
      dsu_sub3(dv, v, v + 3);
      double sp = p.ke * (l - p.rest) + p.kd * dsu_dot3(dh, dv);
      dsu_scl3(f0 + 3, dh, sp);
      dsu_scl3(f0, dh, -sp);
      CHECK(memcmp(f0, f1, sizeof f0) == 0);
      double ax[6] = {0}, av[6] = {0};
      dsSpringParam ap = {0, 0, 0, 0};
      ds__spring_bwd(x, v, &p, w, ax, av, &ap);
      double G[3] = {w[3] - w[0], w[4] - w[1], w[5] - w[2]};
      double adj_s = dsu_dot3(G, dh);
      double ar = 0;
      ar -= p.ke * adj_s;
      CHECK(ap.rest == ar);
      CHECK(ap.ke == adj_s * (l - p.rest));
    }
  }

  /* zero length: zero force, zero gradient, no NaN */
  {
    double x[6] = {0.3, 0.2, 0.1, 0.3, 0.2, 0.1}, v[6] = {1, 2, 3, -1, 0, 2}, f[6];
    double w[6] = {1, -2, 3, 0.5, 1, -1}, ax[6] = {0}, av[6] = {0};
    dsSpringParam p = {1e3, 10, 0.5, 0.3}, ap = {0, 0, 0, 0};
    ds__spring_fwd(x, v, &p, f);
    ds__spring_bwd(x, v, &p, w, ax, av, &ap);
    for (int i = 0; i < 6; i++) {
      CHECK(f[i] == 0);
      CHECK(ax[i] == 0);
      CHECK(av[i] == 0);
    }
    CHECK(ap.ke == 0 && ap.kd == 0 && ap.rest == 0 && ap.act == 0);
  }

  /* accumulation: bwd adds to what is there */
  {
    double x[6] = {0.1, 0.5, 0.2, -0.3, 0.2, 0.4}, v[6] = {1, 0, 0, 0, 1, 0};
    double w[6] = {1, -2, 3, 0.5, 1, -1}, a1[6] = {0}, b1[6] = {0}, a2[6], b2[6];
    dsSpringParam p = {1e3, 10, 0.5, 0.2}, c1 = {0, 0, 0, 0}, c2 = {1, 2, 3, 4};
    for (int i = 0; i < 6; i++) a2[i] = b2[i] = 1;
    ds__spring_bwd(x, v, &p, w, a1, b1, &c1);
    ds__spring_bwd(x, v, &p, w, a2, b2, &c2);
    for (int i = 0; i < 6; i++) {
      CHECK_CLOSE(a2[i], a1[i] + 1, 1e-15, 1e-15);
      CHECK_CLOSE(b2[i], b1[i] + 1, 1e-15, 1e-15);
    }
    CHECK_CLOSE(c2.ke, c1.ke + 1, 1e-15, 1e-15);
    CHECK_CLOSE(c2.rest, c1.rest + 3, 1e-15, 1e-15);
    CHECK_CLOSE(c2.act, c1.act + 4, 1e-15, 1e-15);
  }
  return DST_RESULT();
}
#endif

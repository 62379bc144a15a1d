/* Spring kernel: adjoint vs central differences on random and degenerate
 * states, force vs -dE/dx of E = ke/2 (l - L)^2, zero-length guard. */
#include "config.h"

#include "engine/force_spring.h"
#include "tests/forcecheck.h"

#if DS_SINGLE
int main(void) { DST_SKIP("gradient checks need double precision"); }
#else

static void fwd(const double* x, const double* v, const double* p, double* f, const void* ctx) {
  (void)ctx;
  dsSpringParam sp = {p[0], p[1], p[2]};
  ds_spring_fwd(x, v, &sp, f);
}

static void bwd(const double* x, const double* v, const double* p, const double* af, double* ax,
                double* av, double* ap, const void* ctx) {
  (void)ctx;
  dsSpringParam sp = {p[0], p[1], p[2]};
  dsSpringParam asp = {ap[0], ap[1], ap[2]};
  ds_spring_bwd(x, v, &sp, af, ax, av, &asp);
  ap[0] = asp.ke;
  ap[1] = asp.kd;
  ap[2] = asp.rest;
}

static double energy(const double* x, int n, void* ctx) {
  const dsSpringParam* p = (const dsSpringParam*)ctx;
  (void)n;
  double d[3] = {x[0] - x[3], x[1] - x[4], x[2] - x[5]};
  double c = sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]) - p->rest;
  return 0.5 * p->ke * c * c;
}

int main(void) {
  const fcKernel K = {6, 3, fwd, bwd, NULL};
  double z[15];
  char label[64];
  fc_seed(1);
  for (int t = 0; t < 20; t++) {
    for (int i = 0; i < 6; i++) z[i] = fc_unif(-1, 1);
    for (int i = 0; i < 6; i++) z[6 + i] = fc_unif(-1.5, 1.5);
    z[12] = fc_unif(1e2, 1e4); /* ke */
    z[13] = fc_unif(0, 1e2);   /* kd */
    z[14] = fc_unif(0.1, 2);   /* rest: stretched and compressed */
    snprintf(label, sizeof label, "spring random %d", t);
    fc_check(&K, z, 1e-6, 1e-6, 1e-8, label);

    /* elastic force is -dE/dx */
    dsSpringParam p = {z[12], 0, z[14]};
    double f[6];
    ds_spring_fwd(z, z + 6, &p, f);
    fc_energy_check(energy, &p, z, 6, f, 1e-6, 1e-6, 1e-8, label);
  }

  /* short spring (1e-4 m, far below rest length) is still smooth */
  {
    double zs[15] = {0.3, 0.2, 0.1, 0.3 + 6e-5, 0.2 - 8e-5, 0.1, 0.5, -0.2, 0.1, 0.3, 0.4, -1,
                     1e3, 10, 0.5};
    fc_check(&K, zs, 1e-9, 1e-6, 1e-8, "spring short");
  }

  /* zero length: zero force, zero gradient, no NaN */
  {
    double x[6] = {0.3, 0.2, 0.1, 0.3, 0.2, 0.1}, v[6] = {1, 2, 3, -1, 0, 2}, f[6];
    double w[6] = {1, -2, 3, 0.5, 1, -1}, ax[6] = {0}, av[6] = {0};
    dsSpringParam p = {1e3, 10, 0.5}, ap = {0, 0, 0};
    ds_spring_fwd(x, v, &p, f);
    ds_spring_bwd(x, v, &p, w, ax, av, &ap);
    for (int i = 0; i < 6; i++) {
      CHECK(f[i] == 0);
      CHECK(ax[i] == 0);
      CHECK(av[i] == 0);
    }
    CHECK(ap.ke == 0 && ap.kd == 0 && ap.rest == 0);
  }

  /* accumulation: bwd adds to what is there */
  {
    double x[6] = {0.1, 0.5, 0.2, -0.3, 0.2, 0.4}, v[6] = {1, 0, 0, 0, 1, 0};
    double w[6] = {1, -2, 3, 0.5, 1, -1}, a1[6] = {0}, b1[6] = {0}, a2[6], b2[6];
    dsSpringParam p = {1e3, 10, 0.5}, c1 = {0, 0, 0}, c2 = {1, 2, 3};
    for (int i = 0; i < 6; i++) a2[i] = b2[i] = 1;
    ds_spring_bwd(x, v, &p, w, a1, b1, &c1);
    ds_spring_bwd(x, v, &p, w, a2, b2, &c2);
    for (int i = 0; i < 6; i++) {
      CHECK_CLOSE(a2[i], a1[i] + 1, 1e-15, 1e-15);
      CHECK_CLOSE(b2[i], b1[i] + 1, 1e-15, 1e-15);
    }
    CHECK_CLOSE(c2.ke, c1.ke + 1, 1e-15, 1e-15);
    CHECK_CLOSE(c2.rest, c1.rest + 3, 1e-15, 1e-15);
  }
  return DST_RESULT();
}
#endif

/* Triangle membrane kernel: rest data (and rejection of degenerate rest
 * shapes), zero force at rest, force vs -dE/dx, adjoint vs central
 * differences on random, nearly flat and strongly activated states. */
#include "config.h"

#include "engine/force_tri.h"
#include "tests/forcecheck.h"

static void fwd(const double* x, const double* v, const double* p, double* f, const void* ctx) {
  dsReal xr[9], vr[9], fr[9];
  fc_to_real(xr, x, 9);
  fc_to_real(vr, v, 9);
  dsTriParam tp = {(dsReal)p[0], (dsReal)p[1], (dsReal)p[2], (dsReal)p[3]};
  ds__tri_fwd(xr, vr, (const dsTriRest*)ctx, &tp, fr);
  fc_from_real(f, fr, 9);
}

static void bwd(const double* x, const double* v, const double* p, const double* af, double* ax,
                double* av, double* ap, const void* ctx) {
  dsReal xr[9], vr[9], afr[9], axr[9], avr[9];
  fc_to_real(xr, x, 9);
  fc_to_real(vr, v, 9);
  fc_to_real(afr, af, 9);
  fc_to_real(axr, ax, 9);
  fc_to_real(avr, av, 9);
  dsTriParam tp = {(dsReal)p[0], (dsReal)p[1], (dsReal)p[2], (dsReal)p[3]};
  dsTriParam a = {(dsReal)ap[0], (dsReal)ap[1], (dsReal)ap[2], (dsReal)ap[3]};
  ds__tri_bwd(xr, vr, (const dsTriRest*)ctx, &tp, afr, axr, avr, &a);
  fc_from_real(ax, axr, 9);
  fc_from_real(av, avr, 9);
  ap[0] = a.k_mu;
  ap[1] = a.k_lambda;
  ap[2] = a.k_damp;
  ap[3] = a.act;
}

#if DS_SINGLE
/* Single precision: the float kernel's adjoint against central differences
 * at FC_SINGLE_* tolerances on random stretched, sheared, moving triangles
 * (rest data, energy and degenerate-state checks below are double-only). */
int main(void) {
  dsTriRest r;
  char label[80];
  const fcKernel K = {9, 4, fwd, bwd, &r};
  double z[22];
  fc_seed(3);
  int done = 0;
  for (int t = 0; t < 60 && done < 20; t++) {
    dsReal x0[9];
    double xc[9], M[9];
    for (int i = 0; i < 9; i++) x0[i] = (dsReal)fc_unif(-1, 1);
    if (ds__tri_rest(x0, &r) != 0 || r.area < 0.05) continue;
    for (int i = 0; i < 9; i++) M[i] = (i % 4 == 0 ? 1 : 0) + fc_unif(-0.3, 0.3);
    for (int k = 0; k < 3; k++)
      for (int c = 0; c < 3; c++)
        xc[3 * k + c] = M[3 * c] * x0[3 * k] + M[3 * c + 1] * x0[3 * k + 1] + M[3 * c + 2] * x0[3 * k + 2];
    for (int i = 0; i < 9; i++) z[i] = xc[i];
    for (int i = 0; i < 9; i++) z[9 + i] = fc_unif(-1.5, 1.5);
    z[18] = fc_unif(10, 1e3);  /* k_mu */
    z[19] = fc_unif(1e2, 1e4); /* k_lambda */
    z[20] = fc_unif(0, 10);    /* k_damp */
    z[21] = fc_unif(-0.3, 0.3);
    snprintf(label, sizeof label, "tri random %d (single)", t);
    fc_check(&K, z, FC_SINGLE_H, FC_SINGLE_RTOL, FC_SINGLE_ATOL, label);
    done++;
  }
  CHECK(done == 20);
  return DST_RESULT();
}
#else

typedef struct {
  dsTriRest r;
  dsTriParam p;
} EnergyCtx;

/* E = A0 [k_mu/2 |F|^2 + k_lambda/2 c^2], c = A/A0 - (1 + k_mu/k_lambda) + a */
static double energy(const double* x, int n, void* user) {
  const EnergyCtx* e = (const EnergyCtx*)user;
  const double* Dm = e->r.Dm;
  double A0 = e->r.area, eq[3], er[3], nn[3], F2 = 0;
  (void)n;
  for (int c = 0; c < 3; c++) {
    eq[c] = x[3 + c] - x[c];
    er[c] = x[6 + c] - x[c];
  }
  for (int c = 0; c < 3; c++) {
    double F0 = eq[c] * Dm[0] + er[c] * Dm[2], F1 = eq[c] * Dm[1] + er[c] * Dm[3];
    F2 += F0 * F0 + F1 * F1;
  }
  nn[0] = eq[1] * er[2] - eq[2] * er[1];
  nn[1] = eq[2] * er[0] - eq[0] * er[2];
  nn[2] = eq[0] * er[1] - eq[1] * er[0];
  double A = 0.5 * sqrt(nn[0] * nn[0] + nn[1] * nn[1] + nn[2] * nn[2]);
  double c = A / A0 - (1 + e->p.k_mu / e->p.k_lambda) + e->p.act;
  return A0 * (0.5 * e->p.k_mu * F2 + 0.5 * e->p.k_lambda * c * c);
}

static void rand_tri(double* x0, double size) {
  for (int i = 0; i < 9; i++) x0[i] = fc_unif(-size, size);
}

/* current = rest under a random affine map (up to +-amp) plus noise */
static void deform(const double* x0, double* x, double amp) {
  double M[9], t[3];
  for (int i = 0; i < 9; i++) M[i] = (i % 4 == 0 ? 1 : 0) + fc_unif(-amp, amp);
  for (int c = 0; c < 3; c++) t[c] = fc_unif(-0.5, 0.5);
  for (int k = 0; k < 3; k++)
    for (int c = 0; c < 3; c++)
      x[3 * k + c] = t[c] + M[3 * c] * x0[3 * k] + M[3 * c + 1] * x0[3 * k + 1] +
                     M[3 * c + 2] * x0[3 * k + 2] + fc_unif(-0.01, 0.01);
}

int main(void) {
  dsTriRest r;
  char label[80];

  /* rest data of a known triangle: right triangle legs 0.3 (x) and 0.4 (y) */
  {
    double x0[9] = {1, 2, 3, 1.3, 2, 3, 1, 2.4, 3};
    CHECK_INT_EQ(ds__tri_rest(x0, &r), 0);
    CHECK_CLOSE(r.area, 0.06, 1e-14, 0);
    CHECK_CLOSE(r.Dm[0], 1 / 0.3, 1e-13, 0);
    CHECK_CLOSE(r.Dm[1], 0, 0, 1e-13);
    CHECK_CLOSE(r.Dm[2], 0, 0, 1e-13);
    CHECK_CLOSE(r.Dm[3], 1 / 0.4, 1e-13, 0);
    /* clockwise order gives the same positive area */
    double x1[9] = {1, 2, 3, 1, 2.4, 3, 1.3, 2, 3};
    CHECK_INT_EQ(ds__tri_rest(x1, &r), 0);
    CHECK_CLOSE(r.area, 0.06, 1e-14, 0);
  }
  /* degenerate rest shapes are rejected */
  {
    double col[9] = {0, 0, 0, 1, 1, 1, 2, 2, 2};
    double same[9] = {0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 1, 0, 0};
    double zero[9] = {0};
    double nan9[9] = {0, 0, 0, 1, 0, 0, 0, NAN, 0};
    double inf9[9] = {0, 0, 0, 1, 0, 0, 0, INFINITY, 0};
    double flat[9] = {0, 0, 0, 1, 0, 0, 0.5, 1e-16, 0};
    CHECK_INT_EQ(ds__tri_rest(col, &r), DS_ERR_MESH);
    CHECK_INT_EQ(ds__tri_rest(same, &r), DS_ERR_MESH);
    CHECK_INT_EQ(ds__tri_rest(zero, &r), DS_ERR_MESH);
    CHECK_INT_EQ(ds__tri_rest(nan9, &r), DS_ERR_MESH);
    CHECK_INT_EQ(ds__tri_rest(inf9, &r), DS_ERR_MESH);
    CHECK_INT_EQ(ds__tri_rest(flat, &r), DS_ERR_MESH);
    double thin[9] = {0, 0, 0, 1, 0, 0, 0.5, 1e-6, 0}; /* thin but valid */
    CHECK_INT_EQ(ds__tri_rest(thin, &r), 0);
    CHECK_CLOSE(r.area, 0.5e-6, 1e-9, 0);
  }

  fc_seed(3);
  /* zero force at rest with a = 0 (any rigid motion of the rest shape) */
  for (int t = 0; t < 10; t++) {
    double x0[9], v[9] = {0}, f[9];
    rand_tri(x0, 1);
    if (ds__tri_rest(x0, &r) != 0) continue;
    dsTriParam p = {fc_unif(1e2, 1e4), fc_unif(1e3, 1e4), 100, 0};
    ds__tri_fwd(x0, v, &r, &p, f);
    double fmax = 0, L = sqrt(2 * r.area);
    for (int i = 0; i < 9; i++) fmax = fmax > fabs(f[i]) ? fmax : fabs(f[i]);
    CHECK(fmax < 1e-9 * p.k_mu * L);
    /* a uniform velocity (rigid translation) adds no damping force */
    for (int i = 0; i < 9; i++) v[i] = (i % 3 == 0) ? 1.5 : (i % 3 == 1 ? -0.5 : 0.25);
    ds__tri_fwd(x0, v, &r, &p, f);
    for (int i = 0; i < 9; i++) fmax = fmax > fabs(f[i]) ? fmax : fabs(f[i]);
    CHECK(fmax < 1e-9 * p.k_mu * L);
  }

  const fcKernel K = {9, 4, fwd, bwd, &r};
  double z[22];
  for (int t = 0; t < 24; t++) {
    double x0[9];
    rand_tri(x0, fc_unif(0.1, 1));
    if (ds__tri_rest(x0, &r) != 0 || r.area < 1e-4) {
      t--;
      continue;
    }
    deform(x0, z, 0.3);
    for (int i = 0; i < 9; i++) z[9 + i] = fc_unif(-1.5, 1.5);
    z[18] = fc_unif(1e2, 1e4);  /* k_mu */
    z[19] = fc_unif(1e3, 1e4);  /* k_lambda */
    z[20] = fc_unif(0, 1e2);    /* k_damp */
    z[21] = fc_unif(-0.3, 0.3); /* act */
    snprintf(label, sizeof label, "tri random %d", t);
    fc_check(&K, z, 1e-6, 1e-6, 1e-8, label);

    EnergyCtx e = {r, {z[18], z[19], 0, z[21]}};
    double f[9];
    ds__tri_fwd(z, z + 9, &r, &e.p, f);
    fc_energy_check(energy, &e, z, 9, f, 1e-6, 1e-6, 1e-8, label);
  }

  /* nearly flat: a sliver rest triangle (aspect 1e-3) and a current state
   * that is nearly collapsed (r almost on the line pq) */
  for (int t = 0; t < 6; t++) {
    double x0[9] = {0, 0, 0, 0.5, 0, 0, 0.25, 5e-4, 0};
    if (t >= 3) x0[7] = 0.2; /* normal rest, nearly collapsed current */
    CHECK_INT_EQ(ds__tri_rest(x0, &r), 0);
    double x[9] = {0.01, 0.02, 0, 0.52, -0.01, 0.01, 0.3, 0.01, 0};
    x[7] = 0.02 * (0.3 - 0.01) / 0.51 + 0.01 + 1e-4 * (t % 3 + 1) * (t % 2 ? 1 : -1);
    for (int i = 0; i < 9; i++) z[i] = x[i];
    for (int i = 0; i < 9; i++) z[9 + i] = fc_unif(-1, 1);
    z[18] = 1e4, z[19] = 1e4, z[20] = 100, z[21] = 0.1;
    snprintf(label, sizeof label, "tri nearly flat %d", t);
    fc_check(&K, z, 1e-8, 1e-5, 1e-8, label);
    EnergyCtx e = {r, {z[18], z[19], 0, z[21]}};
    double f[9];
    ds__tri_fwd(z, z + 9, &r, &e.p, f);
    fc_energy_check(energy, &e, z, 9, f, 1e-9, 1e-5, 1e-8, label);
  }

  /* fully collapsed current triangle: finite force and gradient */
  {
    double x0[9] = {0, 0, 0, 1, 0, 0, 0, 1, 0}, x[9] = {0, 0, 0, 1, 0, 0, 2, 0, 0};
    double v[9] = {1, 2, 3, 0, 0, 0, -1, 0, 1}, f[9], w[9], ax[9] = {0}, av[9] = {0};
    CHECK_INT_EQ(ds__tri_rest(x0, &r), 0);
    dsTriParam p = {1e3, 1e4, 10, 0}, ap = {0, 0, 0, 0};
    for (int i = 0; i < 9; i++) w[i] = 1;
    ds__tri_fwd(x, v, &r, &p, f);
    ds__tri_bwd(x, v, &r, &p, w, ax, av, &ap);
    int fin = 1;
    for (int i = 0; i < 9; i++) fin &= isfinite(f[i]) && isfinite(ax[i]) && isfinite(av[i]);
    CHECK(fin && isfinite(ap.k_mu) && isfinite(ap.k_lambda));
  }

  /* activation contracts: a > 0 at rest pulls the vertices toward the centroid */
  {
    double x0[9] = {0, 0, 0, 1, 0, 0, 0, 1, 0}, v[9] = {0}, f[9];
    CHECK_INT_EQ(ds__tri_rest(x0, &r), 0);
    dsTriParam p = {1e4, 1e4, 100, 0.2};
    ds__tri_fwd(x0, v, &r, &p, f);
    double cen[3] = {1.0 / 3, 1.0 / 3, 0}, dot = 0;
    for (int k = 0; k < 3; k++)
      for (int c = 0; c < 3; c++) dot += f[3 * k + c] * (cen[c] - x0[3 * k + c]);
    CHECK(dot > 0);
  }
  return DST_RESULT();
}
#endif

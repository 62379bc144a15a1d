/* Tet stable Neo-Hookean kernel: rest data (and rejection of inverted or
 * flat rest shapes), zero force at rest, J = det F, force vs -dE/dx,
 * adjoint vs central differences on random, nearly inverted and activated
 * states. */
#include "config.h"

#include <limits.h>
#include <stdlib.h>

#include "dsim/engine.h"
#include "engine/force_tet.h"
#include "tests/forcecheck.h"

static void fwd(const double* x, const double* v, const double* p, double* f, const void* ctx) {
  dsReal xr[12], vr[12], fr[12];
  fc_to_real(xr, x, 12);
  fc_to_real(vr, v, 12);
  dsTetParam tp = {(dsReal)p[0], (dsReal)p[1], (dsReal)p[2], (dsReal)p[3]};
  ds__tet_fwd(xr, vr, (const dsTetRest*)ctx, &tp, fr, NULL);
  fc_from_real(f, fr, 12);
}

static void bwd(const double* x, const double* v, const double* p, const double* af, double* ax,
                double* av, double* ap, const void* ctx) {
  dsReal xr[12], vr[12], afr[12], axr[12], avr[12];
  fc_to_real(xr, x, 12);
  fc_to_real(vr, v, 12);
  fc_to_real(afr, af, 12);
  fc_to_real(axr, ax, 12);
  fc_to_real(avr, av, 12);
  dsTetParam tp = {(dsReal)p[0], (dsReal)p[1], (dsReal)p[2], (dsReal)p[3]};
  dsTetParam a = {(dsReal)ap[0], (dsReal)ap[1], (dsReal)ap[2], (dsReal)ap[3]};
  ds__tet_bwd(xr, vr, (const dsTetRest*)ctx, &tp, afr, axr, avr, &a);
  fc_from_real(ax, axr, 12);
  fc_from_real(av, avr, 12);
  ap[0] = a.k_mu;
  ap[1] = a.k_lambda;
  ap[2] = a.k_damp;
  ap[3] = a.act;
}

static void rand_tet(double* x0, double size) {
  /* a jittered regular-ish tet, positively oriented */
  const double base[12] = {0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1};
  for (int i = 0; i < 12; i++) x0[i] = size * (base[i] + fc_unif(-0.25, 0.25));
}

static void deform(const double* x0, double* x, double amp) {
  double M[9], t[3];
  for (int i = 0; i < 9; i++) M[i] = (i % 4 == 0 ? 1 : 0) + fc_unif(-amp, amp);
  for (int c = 0; c < 3; c++) t[c] = fc_unif(-0.5, 0.5);
  for (int k = 0; k < 4; k++)
    for (int c = 0; c < 3; c++)
      x[3 * k + c] = t[c] + M[3 * c] * x0[3 * k] + M[3 * c + 1] * x0[3 * k + 1] +
                     M[3 * c + 2] * x0[3 * k + 2] + fc_unif(-0.02, 0.02);
}


/* The model loop's tets DS_TET_LANES at a time (the CPU's vector kernels
 * on x86-64) against the one-tet bodies, bit for bit: forces, J, element
 * adjoints, adjoints of the activations and parameter gradients, on a
 * jittered, deformed, moving, activated grid whose tet count leaves a
 * remainder for the one-by-one tail. */
static void check_lanes_vs_one(void) {
  dsBuilder* b;
  CHECK_INT_EQ(ds_builder_create(&b), 0);
  dsTetMaterial te = {1e3, 2e3, 3};
  dsReal o[3] = {0, 0.5, 0}, v0[3] = {0, 0, 0};
  CHECK(ds_builder_add_tet_grid(b, 3, 1, 3, 0.1, 0.12, 0.09, o, 1, v0, &te) >= 0);
  dsModel* m;
  CHECK_INT_EQ(ds_builder_finalize(b, &m), 0);
  ds_builder_free(b);
  CHECK(m->ntet % DS_TET_LANES != 0);
  const int n = m->ntet, np = m->nparticle;
  dsReal *x = calloc(3 * (size_t)np, sizeof(dsReal)), *v = calloc(3 * (size_t)np, sizeof(dsReal));
  dsReal *act = calloc((size_t)n, sizeof(dsReal)), *af = calloc(3 * (size_t)np, sizeof(dsReal));
  dsReal *ef[2], *J[2], *aex[2], *aev[2], *aact[2];
  dsGrad* g[2];
  for (int k = 0; k < 2; k++) {
    ef[k] = calloc(12 * (size_t)n, sizeof(dsReal));
    J[k] = calloc((size_t)n, sizeof(dsReal));
    aex[k] = calloc(12 * (size_t)n, sizeof(dsReal));
    aev[k] = calloc(12 * (size_t)n, sizeof(dsReal));
    aact[k] = calloc((size_t)n, sizeof(dsReal));
    CHECK_INT_EQ(ds_grad_create(m, &g[k]), 0);
  }
  for (int i = 0; i < 3 * np; i++) {
    x[i] = m->x0[i] * (dsReal)(1 + fc_unif(-0.15, 0.15)) + (dsReal)fc_unif(-0.01, 0.01);
    v[i] = (dsReal)fc_unif(-2, 2);
    af[i] = (dsReal)fc_unif(-1, 1);
  }
  for (int e = 0; e < n; e++) act[e] = (dsReal)fc_unif(-0.3, 0.3);
  /* a particle pushed through its neighbours (some of its tets inverted)
   * and a NaN velocity (forces NaN, J not): the loop's check names the
   * first inverted tet */
  x[3 * (np / 2) + 1] = -1;
  v[3 * (np / 3)] = (dsReal)NAN;
  int bad = INT_MAX;
  for (int k = 0; k < 2; k++) {
    const dsForceFwd fa = {x, v, act, ef[k], J[k], k == 0 ? &bad : NULL};
    const dsForceBwd ba = {x, v, act, af, aex[k], aev[k], g[k], aact[k], NULL};
    if (k == 0) {
      ds__tet_fwd_loop(m, &fa);
      ds__tet_bwd_loop(m, &ba);
    } else
      for (int e = 0; e < n; e++) {
        ds__tet_fwd_elem(m, &fa, e);
        ds__tet_bwd_elem(m, &ba, e);
      }
  }
  CHECK(memcmp(ef[0], ef[1], 12 * (size_t)n * sizeof(dsReal)) == 0);
  CHECK(memcmp(J[0], J[1], (size_t)n * sizeof(dsReal)) == 0);
  int first = INT_MAX;
  for (int e = n - 1; e >= 0; e--)
    if (!(J[1][e] > 0)) first = e;
  CHECK(first != INT_MAX && first > 0);
  CHECK_INT_EQ(bad, first);
  CHECK(memcmp(aex[0], aex[1], 12 * (size_t)n * sizeof(dsReal)) == 0);
  CHECK(memcmp(aev[0], aev[1], 12 * (size_t)n * sizeof(dsReal)) == 0);
  CHECK(memcmp(aact[0], aact[1], (size_t)n * sizeof(dsReal)) == 0);
  CHECK(memcmp(g[0]->tet_k_mu, g[1]->tet_k_mu, (size_t)n * sizeof(dsReal)) == 0);
  CHECK(memcmp(g[0]->tet_k_lambda, g[1]->tet_k_lambda, (size_t)n * sizeof(dsReal)) == 0);
  CHECK(memcmp(g[0]->tet_k_damp, g[1]->tet_k_damp, (size_t)n * sizeof(dsReal)) == 0);
  /* and they did something: forces and adjoints not all zero */
  double fs = 0, as = 0;
  for (int i = 0; i < 12 * n; i++) {
    fs += isfinite(ef[0][i]) ? fabs((double)ef[0][i]) : 0;
    as += isfinite(aex[0][i]) ? fabs((double)aex[0][i]) : 0;
  }
  CHECK(fs > 0 && as > 0);
  /* the packed rest data: M = B B^T, det B and V0 for every tet */
  for (int e = 0; e < n; e++) {
    const dsReal* B = m->tet_B + 9 * (size_t)e;
    for (int i = 0; i < 3; i++)
      for (int j = 0; j < 3; j++) {
        double mij = 0;
        for (int k = 0; k < 3; k++) mij += (double)B[3 * i + k] * B[3 * j + k];
        dsReal got = m->tet_M[DS_TET_M_AT(e, ds__tet_mi(i, j))];
        CHECK_CLOSE(got, mij, 1e-5, 1e-3);
      }
    CHECK_CLOSE(m->tet_M[DS_TET_M_AT(e, 7)], m->tet_vol[e], 0, 0);
    CHECK_CLOSE(m->tet_M[DS_TET_M_AT(e, 6)] * 6 * m->tet_vol[e], 1, 1e-5, 0);
  }
  for (int k = 0; k < 2; k++) {
    free(ef[k]);
    free(J[k]);
    free(aex[k]);
    free(aev[k]);
    free(aact[k]);
    ds_grad_free(g[k]);
  }
  free(x);
  free(v);
  free(act);
  free(af);
  ds_model_free(m);
}

#if DS_SINGLE
/* Single precision: the adjoint of the float kernel against central
 * differences of the float kernel, at FC_SINGLE_* tolerances, on random
 * deformed, moving, activated tets (the rest-data, J and energy checks
 * below compare with double references to 1e-12 and need double). */
int main(void) {
  dsTetRest r;
  char label[80];
  fc_seed(5);
  const fcKernel K = {12, 4, fwd, bwd, &r};
  double z[28];
  for (int t = 0; t < 24; t++) {
    double x0[12];
    dsReal x0r[12];
    rand_tet(x0, fc_unif(0.2, 1));
    fc_to_real(x0r, x0, 12);
    CHECK_INT_EQ(ds__tet_rest(x0r, &r), 0);
    deform(x0, z, 0.3);
    for (int i = 0; i < 12; i++) z[12 + i] = fc_unif(-1.5, 1.5);
    z[24] = fc_unif(1e2, 1e4);  /* k_mu */
    z[25] = fc_unif(1e3, 1e4);  /* k_lambda */
    z[26] = fc_unif(0, 10);     /* k_damp */
    z[27] = fc_unif(-0.3, 0.3); /* act */
    snprintf(label, sizeof label, "tet random %d (single)", t);
    fc_check(&K, z, FC_SINGLE_H, FC_SINGLE_RTOL, FC_SINGLE_ATOL, label);
  }
  check_lanes_vs_one();
  return DST_RESULT();
}
#else

/* F = Ds B (row-major) */
static void defgrad(const double* x, const dsTetRest* r, double F[9]) {
  double Ds[9];
  for (int i = 0; i < 3; i++)
    for (int c = 0; c < 3; c++) Ds[3 * c + i] = x[3 * (i + 1) + c] - x[c];
  for (int a = 0; a < 3; a++)
    for (int b = 0; b < 3; b++)
      F[3 * a + b] = Ds[3 * a] * r->B[b] + Ds[3 * a + 1] * r->B[3 + b] + Ds[3 * a + 2] * r->B[6 + b];
}

static double det3(const double* A) {
  return A[0] * (A[4] * A[8] - A[5] * A[7]) - A[1] * (A[3] * A[8] - A[5] * A[6]) +
         A[2] * (A[3] * A[7] - A[4] * A[6]);
}

typedef struct {
  dsTetRest r;
  dsTetParam p;
} EnergyCtx;

/* E = V0 [mu/2 (Ic - 3) - mu/2 log(Ic + 1) + lambda/2 (J - alpha + a)^2],
 * alpha = 1 + 0.75 mu/lambda */
static double energy(const double* x, int n, void* user) {
  const EnergyCtx* e = (const EnergyCtx*)user;
  double F[9], Ic = 0;
  (void)n;
  defgrad(x, &e->r, F);
  for (int k = 0; k < 9; k++) Ic += F[k] * F[k];
  double J = det3(F), mu = e->p.k_mu, lam = e->p.k_lambda;
  double c = J - (1 + 0.75 * mu / lam) + e->p.act;
  return e->r.vol * (0.5 * mu * (Ic - 3) - 0.5 * mu * log(Ic + 1) + 0.5 * lam * c * c);
}

int main(void) {
  dsTetRest r;
  char label[80];

  /* rest data of a known tet */
  {
    double x0[12] = {1, 1, 1, 1.5, 1, 1, 1, 1.2, 1, 1, 1, 1.1};
    CHECK_INT_EQ(ds__tet_rest(x0, &r), 0);
    CHECK_CLOSE(r.vol, 0.5 * 0.2 * 0.1 / 6, 1e-14, 0);
    CHECK_CLOSE(r.B[0], 2, 1e-14, 0);
    CHECK_CLOSE(r.B[4], 5, 1e-14, 0);
    CHECK_CLOSE(r.B[8], 10, 1e-14, 0);
    CHECK_CLOSE(r.B[1], 0, 0, 1e-14);
    /* inverted (two vertices swapped), flat, coincident, non-finite */
    double inv[12] = {1, 1, 1, 1, 1.2, 1, 1.5, 1, 1, 1, 1, 1.1};
    double flat[12] = {0, 0, 0, 1, 0, 0, 0, 1, 0, 0.3, 0.3, 0};
    double nearflat[12] = {0, 0, 0, 1, 0, 0, 0, 1, 0, 0.3, 0.3, 1e-15};
    double same[12] = {0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1};
    double bad[12] = {0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, NAN};
    CHECK_INT_EQ(ds__tet_rest(inv, &r), DS_ERR_MESH);
    CHECK_INT_EQ(ds__tet_rest(flat, &r), DS_ERR_MESH);
    CHECK_INT_EQ(ds__tet_rest(nearflat, &r), DS_ERR_MESH);
    CHECK_INT_EQ(ds__tet_rest(same, &r), DS_ERR_MESH);
    CHECK_INT_EQ(ds__tet_rest(bad, &r), DS_ERR_MESH);
    double thin[12] = {0, 0, 0, 1, 0, 0, 0, 1, 0, 0.3, 0.3, 1e-6};
    CHECK_INT_EQ(ds__tet_rest(thin, &r), 0);
  }

  fc_seed(5);
  /* zero force at rest with a = 0, also under rigid rotation + translation
   * and a uniform velocity */
  for (int t = 0; t < 10; t++) {
    double x0[12], x[12], v[12], f[12], J = 0;
    rand_tet(x0, fc_unif(0.2, 1));
    CHECK_INT_EQ(ds__tet_rest(x0, &r), 0);
    double ang = fc_unif(0, 6.28), ca = cos(ang), sa = sin(ang);
    for (int k = 0; k < 4; k++) {
      x[3 * k] = ca * x0[3 * k] - sa * x0[3 * k + 2] + 0.3;
      x[3 * k + 1] = x0[3 * k + 1] - 2;
      x[3 * k + 2] = sa * x0[3 * k] + ca * x0[3 * k + 2];
      v[3 * k] = 1.5, v[3 * k + 1] = -0.3, v[3 * k + 2] = 0.7;
    }
    dsTetParam p = {fc_unif(1e2, 1e4), fc_unif(1e3, 1e4), 1, 0};
    ds__tet_fwd(x, v, &r, &p, f, &J);
    double fmax = 0, L = cbrt(6 * r.vol);
    for (int i = 0; i < 12; i++) fmax = fmax > fabs(f[i]) ? fmax : fabs(f[i]);
    CHECK(fmax < 1e-9 * p.k_mu * L * L);
    CHECK_CLOSE(J, 1, 1e-12, 0);
  }

  const fcKernel K = {12, 4, fwd, bwd, &r};
  double z[28];
  for (int t = 0; t < 24; t++) {
    double x0[12], F[9], f[12], J = 0;
    rand_tet(x0, fc_unif(0.2, 1));
    CHECK_INT_EQ(ds__tet_rest(x0, &r), 0);
    deform(x0, z, 0.3);
    for (int i = 0; i < 12; i++) z[12 + i] = fc_unif(-1.5, 1.5);
    z[24] = fc_unif(1e2, 1e4);  /* k_mu */
    z[25] = fc_unif(1e3, 1e4);  /* k_lambda */
    z[26] = fc_unif(0, 10);     /* k_damp */
    z[27] = fc_unif(-0.3, 0.3); /* act */
    snprintf(label, sizeof label, "tet random %d", t);
    fc_check(&K, z, 1e-6, 1e-6, 1e-8, label);

    /* J = det F */
    dsTetParam p = {z[24], z[25], z[26], z[27]};
    ds__tet_fwd(z, z + 12, &r, &p, f, &J);
    defgrad(z, &r, F);
    CHECK_CLOSE(J, det3(F), 1e-12, 1e-14);

    /* force (without damping) is -dE/dx */
    EnergyCtx e = {r, {z[24], z[25], 0, z[27]}};
    ds__tet_fwd(z, z + 12, &r, &e.p, f, NULL);
    fc_energy_check(energy, &e, z, 12, f, 1e-6, 1e-6, 1e-8, label);
  }

  /* nearly inverted: vertex 3 pushed almost into the face (x0, x1, x2),
   * J small positive; and one slightly inverted (J < 0, still finite) */
  for (int t = 0; t < 6; t++) {
    double x0[12] = {0, 0, 0, 0.5, 0, 0, 0, 0.5, 0, 0, 0, 0.5}, f[12], J = 0;
    CHECK_INT_EQ(ds__tet_rest(x0, &r), 0);
    /* base stays in the plane z = 0 so J = (in-plane area ratio) (z3 / 0.5) */
    for (int i = 0; i < 12; i++) z[i] = x0[i] + (i % 3 == 2 ? 0 : fc_unif(-0.01, 0.01));
    z[9] = 0.1, z[10] = 0.1;
    z[11] = (t < 5 ? 1 : -1) * 0.5 * pow(10.0, -1 - t % 5); /* J ~ 1e-1 .. 1e-5, then < 0 */
    for (int i = 0; i < 12; i++) z[12 + i] = fc_unif(-1, 1);
    z[24] = 1e3, z[25] = 1e3, z[26] = 1, z[27] = 0.2;
    dsTetParam p = {z[24], z[25], z[26], z[27]};
    ds__tet_fwd(z, z + 12, &r, &p, f, &J);
    dst_checks++;
    if (!(t < 5 ? (J > 0 && J < 0.25) : J < 0)) DST_FAIL_AT("nearly inverted %d: J = %g", t, J);
    snprintf(label, sizeof label, "tet nearly inverted %d (J %.2g)", t, J);
    fc_check(&K, z, 1e-8, 1e-6, 1e-8, label);
    EnergyCtx e = {r, {z[24], z[25], 0, z[27]}};
    ds__tet_fwd(z, z + 12, &r, &e.p, f, NULL);
    fc_energy_check(energy, &e, z, 12, f, 1e-8, 1e-6, 1e-8, label);
  }

  /* activation contracts the volume: a > 0 at rest pushes x3 toward the base */
  {
    double x0[12] = {0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1}, v[12] = {0}, f[12];
    CHECK_INT_EQ(ds__tet_rest(x0, &r), 0);
    dsTetParam p = {1e3, 1e3, 1, 0.3};
    ds__tet_fwd(x0, v, &r, &p, f, NULL);
    CHECK(f[11] < 0);
    double sum[3] = {0, 0, 0};
    for (int k = 0; k < 4; k++)
      for (int c = 0; c < 3; c++) sum[c] += f[3 * k + c];
    for (int c = 0; c < 3; c++) CHECK_CLOSE(sum[c], 0, 0, 1e-10);
  }
  check_lanes_vs_one();
  return DST_RESULT();
}
#endif

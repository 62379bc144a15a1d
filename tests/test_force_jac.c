/* Element Jacobians (engine/forces.h "Jacobians"): Kx = -df/dx and
 * Kv = -df/dv of spring, tri, bend, tet, lift/drag and ground contact against central
 * differences of the forward force, on random states with activations and
 * damping and on degenerate ones (velocity along the spring, a 1e-4 m
 * spring, a sliver triangle, a flat hinge, a tet at J = 0.1, contact in and
 * out of penetration, sticking and sliding, approaching and separating);
 * symmetry of the conservative parts; the Jacobi eigen-solver and the PSD
 * projection (eigenvalues >= 0, the nearest such matrix, a PSD block left
 * bit for bit); the spring's closed-form projection against the generic
 * one; the generated table ds__force_jac against central differences of
 * the rows' own forward loops on built models.
 *
 * Comparison: max_ij |K_ij - Kfd_ij| <= JAC_RTOL |K|_F (|K|_F the larger
 * of the two matrices' norms), with h = 1e-6 max(1, |z_j|) unless a case
 * needs a smaller one. Every check also proves it can fail: each entry
 * with |K_ij| > 2 JAC_RTOL |K|_F has its sign flipped in a copy, which
 * the same comparison must reject. In double only (a float kernel's
 * central differences do not resolve 1e-6). */
#include "config.h"

#include "engine/dense_small.h"
#include "engine/forces.h"
#include "engine/sparse.h"
#include "tests/enginetest.h"
#include "tests/forcecheck.h"

#if DS_SINGLE
int main(void) { DST_SKIP("element Jacobians are checked in double"); }
#else

#  define JAC_RTOL 1e-6
#  define NMAX 12

typedef void (*FwdFn)(const double* x, const double* v, const void* ctx, double* f);
typedef void (*JacFn)(const double* x, const double* v, const void* ctx, double* Kx, double* Kv);

static double fro(int n, const double* A) {
  double s = 0;
  for (int k = 0; k < n * n; k++) s += A[k] * A[k];
  return sqrt(s);
}

/* max |A - B| > rtol max(|A|_F, |B|_F)? (1: mismatch; *worst the entry) */
static int jac_differ(int n, const double* A, const double* B, double rtol, int* worst) {
  double nA = fro(n, A), nB = fro(n, B), tol = rtol * (nA > nB ? nA : nB), e = -1;
  int bad = 0;
  for (int k = 0; k < n * n; k++) {
    double d = fabs(A[k] - B[k]);
    if (!(d <= tol)) bad = 1;
    if (!(d <= e)) {
      e = d;
      if (worst) *worst = k;
    }
  }
  return bad;
}

/* Kfd = -(f(z + h e_j) - f(z - h e_j)) / (2 h), column j, for z = x or v
 * (h for x; 1e-6 for v, in which every force is at most quadratic) */
static void fd_jac(int n, FwdFn f, const void* ctx, const double* x, const double* v, double h, double* Kx,
                   double* Kv) {
  double xp[NMAX], vp[NMAX], fp[NMAX], fm[NMAX];
  for (int w = 0; w < 2; w++) {
    double* K = w ? Kv : Kx;
    for (int j = 0; j < n; j++) {
      memcpy(xp, x, sizeof(double) * (size_t)n);
      memcpy(vp, v, sizeof(double) * (size_t)n);
      double* z = w ? vp : xp;
      const double z0 = z[j], hj = (w ? 1e-6 : h) * (fabs(z0) > 1 ? fabs(z0) : 1);
      z[j] = z0 + hj;
      f(xp, vp, ctx, fp);
      z[j] = z0 - hj;
      f(xp, vp, ctx, fm);
      for (int i = 0; i < n; i++) K[n * i + j] = -(fp[i] - fm[i]) / (2 * hj);
    }
  }
}

static void check_one(const char* label, const char* which, int n, const double* K, const double* Kfd) {
  int worst = -1;
  dst_checks++;
  if (jac_differ(n, K, Kfd, JAC_RTOL, &worst)) {
    DST_FAIL_AT("%s: %s[%d][%d] = %.12g, central differences %.12g (|K|_F %.6g)", label, which, worst / n,
                worst % n, K[worst], Kfd[worst], fro(n, K));
    return;
  }
  /* a sign error in any entry that matters must be caught */
  double Kp[NMAX * NMAX], nK = fro(n, K);
  for (int k = 0; k < n * n; k++) {
    if (!(fabs(K[k]) > 2 * JAC_RTOL * nK)) continue;
    memcpy(Kp, K, sizeof(double) * (size_t)(n * n));
    Kp[k] = -K[k];
    dst_checks++;
    if (!jac_differ(n, Kp, Kfd, JAC_RTOL, NULL)) DST_FAIL_AT("%s: %s entry %d flipped not rejected", label, which, k);
  }
}

static void check_jac(const char* label, int nv, FwdFn f, JacFn J, const void* ctx, const double* x,
                      const double* v, double h) {
  const int n = 3 * nv;
  double Kx[NMAX * NMAX], Kv[NMAX * NMAX], Fx[NMAX * NMAX], Fv[NMAX * NMAX];
  J(x, v, ctx, Kx, Kv);
  fd_jac(n, f, ctx, x, v, h, Fx, Fv);
  check_one(label, "Kx", n, Kx, Fx);
  check_one(label, "Kv", n, Kv, Fv);
}

/* max |A - A^T| / |A|_F (0 for A = 0) */
static double asym(int n, const double* A) {
  double e = 0, nA = fro(n, A);
  for (int i = 0; i < n; i++)
    for (int j = 0; j < i; j++) e = fmax(e, fabs(A[n * i + j] - A[n * j + i]));
  return nA > 0 ? e / nA : e;
}

/* ---- the models, element-local --------------------------------------------------- */
static void spring_f(const double* x, const double* v, const void* c, double* f) {
  ds__spring_fwd(x, v, (const dsSpringParam*)c, f);
}
static void spring_j(const double* x, const double* v, const void* c, double* Kx, double* Kv) {
  ds__spring_jac(x, v, (const dsSpringParam*)c, Kx, Kv);
}
typedef struct TriCtx {
  dsTriRest r;
  dsTriParam p;
} TriCtx;
static void tri_f(const double* x, const double* v, const void* c, double* f) {
  const TriCtx* t = (const TriCtx*)c;
  ds__tri_fwd(x, v, &t->r, &t->p, f);
}
static void tri_j(const double* x, const double* v, const void* c, double* Kx, double* Kv) {
  const TriCtx* t = (const TriCtx*)c;
  ds__tri_jac(x, v, &t->r, &t->p, Kx, Kv);
}
static void bend_f(const double* x, const double* v, const void* c, double* f) {
  ds__bend_fwd(x, v, (const dsBendParam*)c, f);
}
static void bend_j(const double* x, const double* v, const void* c, double* Kx, double* Kv) {
  ds__bend_jac(x, v, (const dsBendParam*)c, Kx, Kv);
}
typedef struct TetCtx {
  dsTetRest r;
  dsTetParam p;
} TetCtx;
static void tet_f(const double* x, const double* v, const void* c, double* f) {
  const TetCtx* t = (const TetCtx*)c;
  ds__tet_fwd(x, v, &t->r, &t->p, f, NULL);
}
static void tet_j(const double* x, const double* v, const void* c, double* Kx, double* Kv) {
  const TetCtx* t = (const TetCtx*)c;
  ds__tet_jac(x, v, &t->r, &t->p, Kx, Kv);
}
static void aero_f(const double* x, const double* v, const void* c, double* f) {
  ds__aero_fwd(x, v, (const dsAeroParam*)c, f);
}
static void aero_j(const double* x, const double* v, const void* c, double* Kx, double* Kv) {
  ds__aero_jac(x, v, (const dsAeroParam*)c, Kx, Kv);
}
static void contact_f(const double* x, const double* v, const void* c, double* f) {
  ds__contact_fwd(x, v, (const dsContactParam*)c, f);
}
static void contact_j(const double* x, const double* v, const void* c, double* Kx, double* Kv) {
  ds__contact_jac(x, v, (const dsContactParam*)c, Kx, Kv);
}

static void rand_vec(double* a, int n, double lo, double hi) {
  for (int i = 0; i < n; i++) a[i] = fc_unif(lo, hi);
}

/* ---- spring ------------------------------------------------------------------------ */
static void test_spring(void) {
  char label[64];
  double x[6], v[6], Kx[36], Kv[36];
  fc_seed(11);
  for (int t = 0; t < 20; t++) {
    rand_vec(x, 6, -1, 1);
    rand_vec(v, 6, -1.5, 1.5);
    dsSpringParam p = {fc_unif(1e2, 1e4), t < 3 ? 0 : fc_unif(0, 1e2), fc_unif(0.1, 2), t < 5 ? 0 : fc_unif(-0.6, 0.6)};
    snprintf(label, sizeof label, "spring random %d", t);
    check_jac(label, 2, spring_f, spring_j, &p, x, v, 1e-6);
    /* elastic part symmetric; Kv symmetric always */
    dsSpringParam pe = p;
    pe.kd = 0;
    ds__spring_jac(x, v, &pe, Kx, Kv);
    CHECK(asym(6, Kx) < 1e-14);
    ds__spring_jac(x, v, &p, Kx, Kv);
    CHECK(asym(6, Kv) < 1e-14);
    if (p.kd > 1) CHECK(asym(6, Kx) > 1e-8); /* the damping direction's term */
  }
  /* relative velocity along the spring (u = 0): damped yet symmetric */
  {
    double xs[6] = {0.1, 0.5, 0.2, -0.3, 0.2, 0.4}, vs[6] = {0.3, -0.2, 0.1, 0, 0, 0};
    for (int c = 0; c < 3; c++) vs[c] = 0.7 * (xs[c] - xs[3 + c]) + vs[3 + c];
    dsSpringParam p = {2e3, 30, 0.7, 0.2};
    check_jac("spring velocity along it", 2, spring_f, spring_j, &p, xs, vs, 1e-6);
    ds__spring_jac(xs, vs, &p, Kx, Kv);
    CHECK(asym(6, Kx) < 1e-14);
  }
  /* 1e-4 m spring far below its rest length (s / l ~ -1e7) */
  {
    double xs[6] = {0.3, 0.2, 0.1, 0.3 + 6e-5, 0.2 - 8e-5, 0.1}, vs[6] = {0.5, -0.2, 0.1, 0.3, 0.4, -1};
    dsSpringParam p = {1e3, 10, 0.5, 0.2};
    check_jac("spring short", 2, spring_f, spring_j, &p, xs, vs, 1e-10);
  }
  /* a = -1: zero rest length */
  {
    double xs[6] = {0.1, 0.5, 0.2, -0.3, 0.2, 0.4}, vs[6] = {0.5, -0.2, 0.1, 0.3, 0.4, -1};
    dsSpringParam p = {2e3, 5, 0.7, -1};
    check_jac("spring a = -1", 2, spring_f, spring_j, &p, xs, vs, 1e-6);
  }
  /* zero length: zero, as the force */
  {
    double xs[6] = {0.3, 0.2, 0.1, 0.3, 0.2, 0.1}, vs[6] = {1, 2, 3, -1, 0, 2};
    dsSpringParam p = {1e3, 10, 0.5, 0.3};
    ds__spring_jac(xs, vs, &p, Kx, Kv);
    CHECK(fro(6, Kx) == 0 && fro(6, Kv) == 0);
  }
}

/* ---- triangle ------------------------------------------------------------------------ */
static int tri_setup(TriCtx* c, const double* x0) {
  if (ds__tri_rest(x0, &c->r) != 0) return 0;
  c->p.k_mu = fc_unif(10, 1e3);
  c->p.k_lambda = fc_unif(10, 1e3);
  c->p.k_damp = fc_unif(0.1, 10);
  c->p.act = fc_unif(-0.5, 0.5);
  return 1;
}

/* the implicit step's combined kernels: K = wx Kx + wv Kv from the same
 * Kx, Kv, to rounding (bitwise = 1: exactly) */
static void comb_check(const char* label, int n, const double* Kx, const double* Kv, const double* K, double wx,
                       double wv, int bitwise) {
  double S[144];
  for (int k = 0; k < n * n; k++) S[k] = wv * Kv[k] + wx * Kx[k];
  dst_checks++;
  int worst = -1;
  if (bitwise ? memcmp(S, K, sizeof(double) * (size_t)(n * n)) != 0 : jac_differ(n, K, S, 1e-13, &worst))
    DST_FAIL_AT("%s: combined Jacobian differs from wx Kx + wv Kv (entry %d)", label, worst);
}

static void test_tri(void) {
  char label[64];
  double x0[9], x[9], v[9], Kx[81], Kv[81];
  TriCtx c;
  fc_seed(12);
  for (int t = 0; t < 20; t++) {
    do rand_vec(x0, 9, -1, 1);
    while (!tri_setup(&c, x0));
    for (int i = 0; i < 9; i++) x[i] = x0[i] + fc_unif(-0.3, 0.3);
    rand_vec(v, 9, -1, 1);
    if (t < 3) c.p.act = 0;
    snprintf(label, sizeof label, "tri random %d", t);
    check_jac(label, 3, tri_f, tri_j, &c, x, v, 1e-6);
    TriCtx ce = c;
    ce.p.k_damp = 0;
    ds__tri_jac(x, v, &ce.r, &ce.p, Kx, Kv);
    CHECK(asym(9, Kx) < 1e-13);
    ds__tri_jac(x, v, &c.r, &c.p, Kx, Kv);
    CHECK(asym(9, Kv) < 1e-13);
    double K[81];
    ds__tri_jac_comb(x, v, &c.r, &c.p, 0.01, 0.1, K);
    comb_check(label, 9, Kx, Kv, K, 0.01, 0.1, 0);
  }
  /* sliver: r 1e-3 off the line pq (|n| small, Ha ~ 1/|n|) */
  {
    double xr[9] = {0, 0, 0, 1, 0, 0, 0, 1, 0}, xs[9] = {0, 0, 0, 1, 0.1, 0, 0.5, 0.05 + 1e-3, 0.02};
    CHECK_INT_EQ(tri_setup(&c, xr), 1);
    rand_vec(v, 9, -1, 1);
    check_jac("tri sliver", 3, tri_f, tri_j, &c, xs, v, 1e-8);
  }
  /* inverted (current normal reversed) and compressed */
  {
    double xr[9] = {0, 0, 0, 1, 0, 0, 0, 1, 0}, xs[9] = {0, 0, 0, 0.6, 0, 0.1, 0, -0.5, 0};
    CHECK_INT_EQ(tri_setup(&c, xr), 1);
    rand_vec(v, 9, -1, 1);
    check_jac("tri inverted", 3, tri_f, tri_j, &c, xs, v, 1e-6);
  }
}

/* ---- bending ------------------------------------------------------------------------ */
/* the force's Jacobian less its |e| term must be symmetric without damping */
static void bend_sym_check(const double* x, const double* v, const dsBendParam* p, const char* label) {
  double Kx[144], Kv[144], d[12];
  dsBend__Geo g;
  if (!ds__bend_geo(x, &g)) return;
  ds__bend_dirs(x, &g, d);
  const double el = p->ke * (atan2(g.Y, g.X) - p->rest);
  ds__bend_jac(x, v, p, Kx, Kv);
  for (int i = 0; i < 12; i++)
    for (int c = 0; c < 3; c++) {
      Kx[12 * i + 6 + c] -= d[i] * el * -g.eh[c];
      Kx[12 * i + 9 + c] -= d[i] * el * g.eh[c];
    }
  dst_checks++;
  if (!(asym(12, Kx) < 1e-12)) DST_FAIL_AT("%s: elastic bend Jacobian asymmetric (%.3g)", label, asym(12, Kx));
}

/* the closed-form Jacobian against the one the backward defines: row k of
 * -Kx, -Kv is ds__bend_bwd's adjoint for adj_f = e_k (the derivative of the
 * force as computed), to rounding */
static void bend_rows_check(const double* x, const double* v, const dsBendParam* p, const char* label) {
  double Kx[144], Kv[144], Rx[144], Rv[144];
  ds__bend_jac(x, v, p, Kx, Kv);
  for (int k = 0; k < 12; k++) {
    double ek[12] = {0}, ax[12] = {0}, av[12] = {0};
    dsBendParam ap = {0, 0, 0};
    ek[k] = 1;
    ds__bend_bwd(x, v, p, ek, ax, av, &ap);
    for (int j = 0; j < 12; j++) {
      Rx[12 * k + j] = -ax[j];
      Rv[12 * k + j] = -av[j];
    }
  }
  dst_checks += 2;
  int worst = -1;
  if (jac_differ(12, Kx, Rx, 1e-12, &worst))
    DST_FAIL_AT("%s: bend Kx[%d][%d] = %.17g, the backward's row %.17g", label, worst / 12, worst % 12, Kx[worst],
                Rx[worst]);
  if (jac_differ(12, Kv, Rv, 1e-12, &worst))
    DST_FAIL_AT("%s: bend Kv[%d][%d] = %.17g, the backward's row %.17g", label, worst / 12, worst % 12, Kv[worst],
                Rv[worst]);
}

static void test_bend(void) {
  char label[64];
  double x[12], v[12];
  fc_seed(13);
  for (int t = 0; t < 20; t++) {
    /* edge x3-x4 along ~z, wings around it at angles keeping theta off +-pi */
    double a1 = fc_unif(-2.5, 2.5), a2 = a1 + fc_unif(0.5, 2.5);
    double r1 = fc_unif(0.3, 1), r2 = fc_unif(0.3, 1);
    double xs[12] = {r1 * cos(a1), r1 * sin(a1), fc_unif(0.2, 0.8), r2 * cos(a2), r2 * sin(a2), fc_unif(0.2, 0.8),
                     0,           0,           0,                0,           0,           1};
    for (int i = 0; i < 12; i++) x[i] = xs[i] + fc_unif(-0.1, 0.1);
    rand_vec(v, 12, -1, 1);
    dsBendParam p = {fc_unif(0.01, 1), t < 3 ? 0 : fc_unif(0, 0.05), fc_unif(-1, 1)};
    snprintf(label, sizeof label, "bend random %d", t);
    check_jac(label, 4, bend_f, bend_j, &p, x, v, 1e-6);
    bend_rows_check(x, v, &p, label);
    {
      double Kx[144], Kv[144], K[144];
      ds__bend_jac(x, v, &p, Kx, Kv);
      ds__bend_jac_comb(x, v, &p, 0.01, 0.1, K);
      comb_check(label, 12, Kx, Kv, K, 0.01, 0.1, p.kd != 0);
    }
    dsBendParam pe = p;
    pe.kd = 0;
    bend_sym_check(x, v, &pe, label);
  }
  /* flat hinge (theta = 0), at and away from its rest angle */
  {
    double xf[12] = {-1, 0.2, 0.3, 1, -0.1, 0.6, 0, 0, 0, 0.1, 0, 1};
    rand_vec(v, 12, -1, 1);
    dsBendParam p = {0.5, 0.02, 0};
    check_jac("bend flat", 4, bend_f, bend_j, &p, xf, v, 1e-6);
    bend_rows_check(xf, v, &p, "bend flat");
    p.rest = 0.4;
    check_jac("bend flat, rest 0.4", 4, bend_f, bend_j, &p, xf, v, 1e-6);
    p.kd = 0;
    bend_sym_check(xf, v, &p, "bend flat");
  }
  /* nearly folded (theta ~ 2.9 rad: the wings 0.24 rad apart), short edge,
   * unequal wings */
  {
    const double a = 0.12;
    double xk[12] = {0.8 * cos(a), 0.8 * sin(a), 0.03, 0.2 * cos(-a), 0.2 * sin(-a), 0.05, 0, 0, 0, 0, 0, 0.06};
    rand_vec(v, 12, -1, 1);
    dsBendParam p = {0.7, 0.03, -0.5};
    check_jac("bend folded", 4, bend_f, bend_j, &p, xk, v, 1e-7);
    bend_rows_check(xk, v, &p, "bend folded");
  }
  /* collapsed wing (x1 on the edge's line): no angle, both Jacobians zero */
  {
    double xc[12] = {0, 0, 0.4, 1, -0.1, 0.6, 0, 0, 0, 0, 0, 1}, Kx[144], Kv[144];
    rand_vec(v, 12, -1, 1);
    dsBendParam p = {0.5, 0.02, 0.1};
    ds__bend_jac(xc, v, &p, Kx, Kv);
    dst_checks++;
    if (!(fro(12, Kx) == 0 && fro(12, Kv) == 0)) DST_FAIL_AT("bend collapsed wing: Jacobian not zero");
  }
}

/* ---- tet ------------------------------------------------------------------------------ */
static void tet_setup(TetCtx* c, const double* x0) {
  CHECK_INT_EQ(ds__tet_rest(x0, &c->r), 0);
  c->p.k_mu = fc_unif(1e2, 1e4);
  c->p.k_lambda = fc_unif(1e2, 1e4);
  c->p.k_damp = fc_unif(1, 1e2);
  c->p.act = fc_unif(-0.4, 0.4);
}

static void test_tet(void) {
  char label[64];
  double x0[12] = {0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1}, xr[12], x[12], v[12], Kx[144], Kv[144];
  TetCtx c;
  fc_seed(14);
  for (int t = 0; t < 20; t++) {
    for (int i = 0; i < 12; i++) xr[i] = 0.5 * x0[i] + fc_unif(-0.1, 0.1);
    tet_setup(&c, xr);
    for (int i = 0; i < 12; i++) x[i] = xr[i] + fc_unif(-0.1, 0.1);
    rand_vec(v, 12, -1, 1);
    if (t < 3) c.p.act = 0;
    snprintf(label, sizeof label, "tet random %d", t);
    check_jac(label, 4, tet_f, tet_j, &c, x, v, 1e-6);
    TetCtx ce = c;
    ce.p.k_damp = 0;
    ds__tet_jac(x, v, &ce.r, &ce.p, Kx, Kv);
    CHECK(asym(12, Kx) < 1e-13);
    ds__tet_jac(x, v, &c.r, &c.p, Kx, Kv);
    CHECK(asym(12, Kv) < 1e-13);
    double K[144];
    ds__tet_jac_comb(x, v, &c.r, &c.p, 0.01, 0.1, K);
    comb_check(label, 12, Kx, Kv, K, 0.01, 0.1, 0);
  }
  /* near inversion: F = diag(1.1, 0.9, 0.1 / 0.99) on the rest edges, J = 0.1 */
  {
    for (int i = 0; i < 12; i++) xr[i] = 0.5 * x0[i] + fc_unif(-0.1, 0.1);
    tet_setup(&c, xr);
    const double F[3] = {1.1, 0.9, 0.1 / 0.99};
    for (int k = 0; k < 4; k++)
      for (int a = 0; a < 3; a++) x[3 * k + a] = xr[a] + F[a] * (xr[3 * k + a] - xr[a]);
    rand_vec(v, 12, -1, 1);
    double f[12], J;
    ds__tet_fwd(x, v, &c.r, &c.p, f, &J);
    CHECK_CLOSE(J, 0.1, 1e-12, 1e-12);
    check_jac("tet J = 0.1", 4, tet_f, tet_j, &c, x, v, 1e-6);
    /* indefinite there; the projection makes it PSD */
    double S[144], lam[12], V[144];
    ds__tet_jac(x, v, &c.r, &c.p, Kx, Kv);
    memcpy(S, Kx, sizeof S);
    CHECK(ds__sym_project_psd(12, S) > 0);
    ds__sym_eig(12, S, lam, V);
    for (int k = 0; k < 12; k++) CHECK(lam[k] >= -1e-12 * fro(12, Kx));
  }
}

/* ---- contact -------------------------------------------------------------------------- */
static void test_contact(void) {
  double Kx[9], Kv[9];
  const dsContactParam p = {1e4, 50, 10, 0.5, 0.01};
  /* out of contact: zero */
  {
    double x[3] = {0.2, 0.05, -0.1}, v[3] = {1, -2, 0.5};
    ds__contact_jac(x, v, &p, Kx, Kv);
    CHECK(fro(3, Kx) == 0 && fro(3, Kv) == 0);
    check_jac("contact out", 1, contact_f, contact_j, &p, x, v, 1e-6);
  }
  /* penetration 0.02: fn >= 200, mu fn >= 100; kf |vt| = 5 (sticking) or 300 (sliding);
   * vn < 0 (approaching: damped) or > 0 (separating) */
  const double vt[2][2] = {{0.3, -0.4}, {18, -24}}, vn[2] = {-0.7, 0.4};
  const char* names[2][2] = {{"contact sticking approaching", "contact sticking separating"},
                             {"contact sliding approaching", "contact sliding separating"}};
  for (int r = 0; r < 2; r++)
    for (int s = 0; s < 2; s++) {
      double x[3] = {0.2, -0.01, -0.1}, v[3] = {vt[r][0], vn[s], vt[r][1]};
      check_jac(names[r][s], 1, contact_f, contact_j, &p, x, v, 1e-6);
      ds__contact_jac(x, v, &p, Kx, Kv);
      if (r == 0) CHECK(asym(3, Kx) == 0 && asym(3, Kv) == 0);
      if (r == 1) CHECK(asym(3, Kx) > 0); /* friction pulls on the normal force */
    }
  /* a rigid body's vertex has none here */
  {
    dsModel m;
    memset(&m, 0, sizeof m);
    int body = 0;
    dsReal ke = p.ke, kd = p.kd, kf = p.kf, mu = p.mu, skin = p.skin;
    dsReal x[3] = {0.2, -0.01, -0.1}, v[3] = {0.3, -0.7, -0.4};
    m.ground = 1;
    m.nparticle = 1;
    m.contact_ke = &ke;
    m.contact_kd = &kd;
    m.contact_kf = &kf;
    m.contact_mu = &mu;
    m.contact_skin = &skin;
    ds__contact_pjac(&m, 0, x, v, Kx, Kv);
    CHECK(Kx[4] == p.ke && Kv[4] == p.kd);
    m.nbody = 1;
    m.particle_body = &body;
    ds__contact_pjac(&m, 0, x, v, Kx, Kv);
    CHECK(fro(3, Kx) == 0 && fro(3, Kv) == 0);
  }
}

/* ---- lift and drag ------------------------------------------------------------------- */
static void test_aero(void) {
  char label[64];
  double x[9], v[9];
  fc_seed(23);
  for (int t = 0; t < 20; t++) {
    rand_vec(x, 9, -1, 1);
    rand_vec(v, 9, -2, 2);
    dsAeroParam p = {t < 3 ? 0 : fc_unif(0.1, 2), t >= 3 && t < 6 ? 0 : fc_unif(0.1, 2)};
    snprintf(label, sizeof label, "aero random %d", t);
    check_jac(label, 3, aero_f, aero_j, &p, x, v, 1e-6);
  }
  /* the face moving nearly along its normal (ut small: th near pi/2), and
   * nearly in its plane (un small, not 0) */
  {
    double xs[9] = {0, 0, 0, 0.3, 0.05, 0, 0.1, 0.02, 0.25}, vs[9], n[3], eq[3], er[3];
    for (int c = 0; c < 3; c++) {
      eq[c] = xs[3 + c] - xs[c];
      er[c] = xs[6 + c] - xs[c];
    }
    n[0] = eq[1] * er[2] - eq[2] * er[1];
    n[1] = eq[2] * er[0] - eq[0] * er[2];
    n[2] = eq[0] * er[1] - eq[1] * er[0];
    dsAeroParam p = {0.8, 0.4};
    for (int k = 0; k < 3; k++)
      for (int c = 0; c < 3; c++) vs[3 * k + c] = 20 * n[c] + (c == 0 ? 1e-2 : 0) + 0.01 * k;
    check_jac("aero along the normal", 3, aero_f, aero_j, &p, xs, vs, 1e-7);
    for (int k = 0; k < 3; k++)
      for (int c = 0; c < 3; c++) vs[3 * k + c] = eq[c] + 1e-3 * n[c] + 0.05 * k * er[c];
    check_jac("aero nearly in plane", 3, aero_f, aero_j, &p, xs, vs, 1e-8);
  }
  /* at rest: Jacobians zero (the force is quadratic in vb) */
  {
    double xs[9] = {0, 0, 0, 0.3, 0.05, 0, 0.1, 0.02, 0.25}, vs[9] = {0}, Kx[81], Kv[81];
    dsAeroParam p = {0.8, 0.4};
    ds__aero_jac(xs, vs, &p, Kx, Kv);
    CHECK(fro(9, Kx) == 0 && fro(9, Kv) == 0);
  }
}

/* ---- Jacobi and the PSD projection ---------------------------------------------------- */
static void test_dense(void) {
  double A[144], S[144], V[144], lam[12], R[144];
  fc_seed(15);
  for (int t = 0; t < 40; t++) {
    const int n = 1 + t % 12;
    for (int i = 0; i < n; i++)
      for (int j = 0; j <= i; j++) A[n * i + j] = A[n * j + i] = fc_unif(-1, 1) * (t % 3 == 0 ? 1e4 : 1);
    const double nA = fro(n, A);
    CHECK(ds__sym_eig(n, A, lam, V) <= DS__JACOBI_SWEEPS);
    /* A = V diag(lam) V^T, V^T V = I */
    double e1 = 0, e2 = 0;
    for (int i = 0; i < n; i++)
      for (int j = 0; j < n; j++) {
        double s = 0, o = 0;
        for (int k = 0; k < n; k++) {
          s += V[n * i + k] * lam[k] * V[n * j + k];
          o += V[n * k + i] * V[n * k + j];
        }
        e1 = fmax(e1, fabs(s - A[n * i + j]));
        e2 = fmax(e2, fabs(o - (i == j)));
      }
    CHECK(e1 < 1e-13 * nA);
    CHECK(e2 < 1e-13);
    /* projection: eigenvalues >= 0, and the nearest such matrix (S - P <= 0,
     * <P, S - P> = 0: the clamped part is orthogonal to the kept one) */
    memcpy(S, A, sizeof(double) * (size_t)(n * n));
    int neg = ds__sym_project_psd(n, S);
    int negA = 0;
    for (int k = 0; k < n; k++) negA += lam[k] < -4 * n * DS__JACOBI_EPS * nA;
    CHECK_INT_EQ(neg, negA);
    ds__sym_eig(n, S, lam, V);
    for (int k = 0; k < n; k++) CHECK(lam[k] >= -1e-13 * nA);
    double ip = 0;
    for (int k = 0; k < n * n; k++) {
      R[k] = A[k] - S[k];
      ip += S[k] * R[k];
    }
    CHECK(fabs(ip) < 1e-12 * nA * nA);
    ds__sym_eig(n, R, lam, V);
    for (int k = 0; k < n; k++) CHECK(lam[k] <= 1e-13 * nA);
    CHECK(asym(n, S) == 0);
    /* a PSD matrix (B B^T) is left bit for bit */
    double B[144];
    rand_vec(B, n * n, -1, 1);
    for (int i = 0; i < n; i++)
      for (int j = 0; j < n; j++) {
        double s = 0;
        for (int k = 0; k < n; k++) s += B[n * i + k] * B[n * j + k];
        A[n * i + j] = s;
      }
    for (int i = 0; i < n; i++) A[n * i + i] += 1e-3; /* strictly PD: rounding cannot tip it */
    memcpy(S, A, sizeof(double) * (size_t)(n * n));
    CHECK_INT_EQ(ds__sym_project_psd(n, S), 0);
    CHECK(memcmp(S, A, sizeof(double) * (size_t)(n * n)) == 0);
  }
  /* a non-symmetric block: the projection is that of its symmetric part */
  {
    double K[4] = {2, 3, -1, 1}; /* sym part [[2, 1], [1, 1]]: PD */
    CHECK_INT_EQ(ds__sym_project_psd(2, K), 0);
    CHECK(K[0] == 2 && K[1] == 1 && K[2] == 1 && K[3] == 1);
  }
  /* spring: the closed form equals the generic projection, compressed and
   * stretched, damped and not */
  fc_seed(16);
  for (int t = 0; t < 40; t++) {
    double x[6], v[6], Kx[36], Kv[36], Kp[36];
    rand_vec(x, 6, -1, 1);
    rand_vec(v, 6, -3, 3);
    dsSpringParam p = {fc_unif(1e2, 1e4), t % 4 == 0 ? 0 : fc_unif(0, 3e2), fc_unif(0.1, 2), fc_unif(-0.6, 0.6)};
    if (t % 5 == 0) for (int c = 0; c < 3; c++) v[c] = v[3 + c]; /* no relative velocity */
    ds__spring_jac(x, v, &p, Kx, Kv);
    ds__spring_jac_proj(x, v, &p, Kp);
    ds__sym_project_psd(6, Kx);
    dst_checks++;
    if (jac_differ(6, Kp, Kx, 1e-12, NULL)) DST_FAIL_AT("spring closed-form projection %d differs", t);
    memcpy(Kp, Kv, sizeof Kp);
    CHECK_INT_EQ(ds__sym_project_psd(6, Kp), 0); /* Kv PSD as it is */
  }
}

/* ---- the table, on built models ------------------------------------------------------- */
/* central differences of row k's own forward loop (the element's slots)
 * against ds__force_jac[k] for element e */
static void check_row(const dsModel* m, int k, int e, const dsReal* act, const char* label) {
  const dsForceModel* F = &ds__forces[k];
  const int nv = ds__bsr_elem_nvert(k), n = 3 * nv, cnt = F->count(m);
  const int* idx = ds__bsr_elem_idx(k, m) + (size_t)nv * e;
  const size_t np = 3 * (size_t)m->nparticle;
  dsReal* x = malloc(sizeof(dsReal) * np);
  dsReal* v = malloc(sizeof(dsReal) * np);
  dsReal* ef = malloc(sizeof(dsReal) * 3 * (size_t)nv * (size_t)cnt);
  dsReal* J = malloc(sizeof(dsReal) * (size_t)cnt);
  double Kx[NMAX * NMAX], Kv[NMAX * NMAX], Fx[NMAX * NMAX], Fv[NMAX * NMAX];
  fc_seed(17 + (uint64_t)k);
  for (size_t i = 0; i < np; i++) {
    x[i] = m->x0[i] + fc_unif(-0.01, 0.01);
    v[i] = fc_unif(-0.5, 0.5);
  }
  dsForceFwd a = {x, v, act, ef, J, NULL};
  ds__force_jac[k](m, &a, e, Kx, Kv);
  for (int w = 0; w < 2; w++)
    for (int j = 0; j < n; j++) {
      dsReal* z = (w ? v : x) + 3 * (size_t)idx[j / 3] + j % 3;
      const dsReal z0 = *z, h = 1e-6 * (fabs(z0) > 1 ? fabs(z0) : 1);
      double fp[NMAX];
      /* (aero adds into the triangles' slots: start each from zero) */
      memset(ef, 0, sizeof(dsReal) * 3 * (size_t)nv * (size_t)cnt);
      *z = z0 + h;
      F->fwd(m, &a);
      for (int i = 0; i < n; i++) fp[i] = ef[(size_t)n * e + i];
      memset(ef, 0, sizeof(dsReal) * 3 * (size_t)nv * (size_t)cnt);
      *z = z0 - h;
      F->fwd(m, &a);
      for (int i = 0; i < n; i++) (w ? Fv : Fx)[n * i + j] = -(fp[i] - ef[(size_t)n * e + i]) / (2 * h);
      *z = z0;
    }
  check_one(label, "Kx", n, Kx, Fx);
  check_one(label, "Kv", n, Kv, Fv);
  free(x);
  free(v);
  free(ef);
  free(J);
}

static void test_table(void) {
  /* (the functions are static inline: each file has its own copy, so the
   * entries are checked by what they compute, below) */
  CHECK(ds__force_jac[DS__F_SPRING] && ds__force_jac[DS__F_TRI] && ds__force_jac[DS__F_BEND]);
  CHECK(ds__force_jac[DS__F_TET] && ds__force_jac[DS__F_AERO]);
  for (int k = 0; k < DS__NFORCE; k++) /* per-particle rows have none */
    if (ds__forces[k].nvert == 0 && !ds__forces[k].fwd) CHECK(ds__force_jac[k] == NULL);
  dsModel* models[2] = {et_cloth_model(3, 2, 1e-3), et_soft_model(2, 1e-3)};
  char label[96];
  for (int mi = 0; mi < 2; mi++) {
    const dsModel* m = models[mi];
    for (int k = 0; k < DS__NFORCE; k++) {
      const int cnt = ds__forces[k].count(m);
      if (!ds__force_jac[k] || cnt == 0) continue;
      dsReal* act = malloc(sizeof(dsReal) * (size_t)cnt);
      for (int e = 0; e < cnt; e++) act[e] = ds__forces[k].act_order ? fc_unif(-0.3, 0.3) : 0;
      const int es[3] = {0, cnt / 2, cnt - 1};
      for (int q = 0; q < 3; q++) {
        snprintf(label, sizeof label, "table %s element %d (model %d)", ds__forces[k].name, es[q], mi);
        check_row(m, k, es[q], ds__forces[k].act_order ? act : NULL, label);
      }
      free(act);
    }
    ds_model_free(models[mi]);
  }
}

int main(void) {
  test_spring();
  test_tri();
  test_bend();
  test_tet();
  test_contact();
  test_aero();
  test_dense();
  test_table();
  return DST_RESULT();
}
#endif

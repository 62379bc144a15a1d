/* Block-sparse matrices (engine/sparse.h): the pattern against the models'
 * element incidence, assembly of M + h Kv + h^2 Kx against a dense matrix
 * assembled here from the table's element Jacobians (exact and projected;
 * cloth with springs, membrane, bending and a fixed corner; a tet box in
 * ground contact), the projected matrix symmetric bit for bit, PCG on a
 * random SPD block system and on an assembled one (to tolerance, the
 * iteration cap, a non-SPD matrix refused), and assembly and solve the
 * same bits on 1, 2 and 3 threads. */
#include "config.h"

#include "engine/dense_small.h"
#include "engine/forces.h"
#include "engine/sparse.h"
#include "tests/dstest.h"
#include "tests/enginetest.h"

#ifdef _OPENMP
#  include <omp.h>
#endif

#if DS_SINGLE
int main(void) { DST_SKIP("block-sparse assembly and PCG are checked in double"); }
#else

static double unif(double a, double b) { return et_unif(a, b); }

/* random particles joined by random springs (the pattern's source) */
static dsModel* random_model(int n, int ns) {
  dsBuilder* b;
  dsModel* m;
  if (ds_builder_create(&b)) et_fail("builder", DS_ERR_NOMEM, "");
  for (int i = 0; i < n; i++) {
    dsReal x[3] = {unif(-1, 1), unif(-1, 1), unif(-1, 1)}, v[3] = {0, 0, 0};
    if (ds_builder_add_particle(b, x, v, 1) < 0) et_fail("particle", -1, ds_builder_last_error(b));
  }
  for (int s = 0; s < ns; s++) {
    int i = (int)unif(0, n), j = (int)unif(0, n);
    if (i == j) j = (i + 1) % n;
    if (ds_builder_add_spring(b, i, j, 100, 1, -1) < 0) et_fail("spring", -1, ds_builder_last_error(b));
  }
  int rc = ds_builder_finalize(b, &m);
  if (rc) et_fail("finalize", rc, ds_builder_last_error(b));
  ds_builder_free(b);
  return m;
}

/* the stored block (i, j), or NULL */
static const dsReal* block(const dsBlockSparse* A, int i, int j) {
  for (int b = A->row_start[i]; b < A->row_start[i + 1]; b++)
    if (A->col[b] == j) return A->val + 9 * (size_t)b;
  return NULL;
}

/* y = A x through the dense expansion (independent of ds__bsr_matvec) */
static void dense_of(const dsBlockSparse* A, double* D) {
  const int n3 = 3 * A->n;
  memset(D, 0, sizeof(double) * (size_t)n3 * (size_t)n3);
  for (int i = 0; i < A->n; i++)
    for (int b = A->row_start[i]; b < A->row_start[i + 1]; b++)
      for (int r = 0; r < 3; r++)
        for (int c = 0; c < 3; c++) D[(size_t)n3 * (3 * i + r) + 3 * A->col[b] + c] = A->val[9 * (size_t)b + 3 * r + c];
}

static double resid_rel(const double* D, int n3, const double* x, const double* b) {
  double rr = 0, bb = 0;
  for (int i = 0; i < n3; i++) {
    double s = 0;
    for (int j = 0; j < n3; j++) s += D[(size_t)n3 * i + j] * x[j];
    rr += (b[i] - s) * (b[i] - s);
    bb += b[i] * b[i];
  }
  return sqrt(rr / bb);
}

static void test_pcg_random(void) {
  dsModel* m = random_model(40, 90);
  dsBlockSparse* A;
  CHECK_INT_EQ(ds__bsr_create(m, &A), 0);
  CHECK_INT_EQ(A->n, 40);
  /* the pattern: diagonal + both (i, j) and (j, i) of every spring, ascending */
  for (int s = 0; s < m->nspring; s++) {
    CHECK(block(A, m->spring_idx[2 * s], m->spring_idx[2 * s + 1]) != NULL);
    CHECK(block(A, m->spring_idx[2 * s + 1], m->spring_idx[2 * s]) != NULL);
  }
  for (int i = 0; i < A->n; i++) {
    CHECK(A->col[A->diag[i]] == i);
    for (int b = A->row_start[i] + 1; b < A->row_start[i + 1]; b++) CHECK(A->col[b - 1] < A->col[b]);
  }
  /* random symmetric blocks, diagonally dominant diagonal: SPD */
  for (int i = 0; i < A->n; i++)
    for (int b = A->row_start[i]; b < A->row_start[i + 1]; b++) {
      const int j = A->col[b];
      if (j <= i) continue;
      dsReal* o = A->val + 9 * (size_t)b;
      dsReal* t = (dsReal*)block(A, j, i);
      for (int r = 0; r < 3; r++)
        for (int c = 0; c < 3; c++) o[3 * r + c] = t[3 * c + r] = unif(-1, 1);
    }
  for (int i = 0; i < A->n; i++) {
    dsReal* d = A->val + 9 * (size_t)A->diag[i];
    double rs = 0;
    for (int b = A->row_start[i]; b < A->row_start[i + 1]; b++)
      if (b != A->diag[i])
        for (int c = 0; c < 9; c++) rs += fabs(A->val[9 * (size_t)b + c]);
    for (int r = 0; r < 3; r++)
      for (int c = 0; c <= r; c++) d[3 * r + c] = d[3 * c + r] = r == c ? rs + unif(1, 5) : unif(-0.5, 0.5);
  }
  const int n3 = 3 * A->n;
  double* D = malloc(sizeof(double) * (size_t)n3 * (size_t)n3);
  double b[120], x[120], y[120];
  dense_of(A, D);
  for (int i = 0; i < n3; i++) {
    b[i] = unif(-1, 1);
    x[i] = 0;
  }
  /* matvec against the dense product */
  ds__bsr_matvec(A, b, y);
  double e = 0;
  for (int i = 0; i < n3; i++) {
    double s = 0;
    for (int j = 0; j < n3; j++) s += D[(size_t)n3 * i + j] * b[j];
    e = fmax(e, fabs(s - y[i]));
  }
  CHECK(e < 1e-12);
  int it = -1;
  double res = -1;
  CHECK_INT_EQ(ds__bsr_pcg(A, b, x, 1e-10, 200, &it, &res), 0);
  CHECK(it > 1 && it < 200);
  CHECK(res <= 1e-10);
  CHECK(resid_rel(D, n3, x, b) <= 2e-10);
  /* the cap */
  for (int i = 0; i < n3; i++) x[i] = 0;
  CHECK_INT_EQ(ds__bsr_pcg(A, b, x, 1e-14, 2, &it, &res), 1);
  CHECK_INT_EQ(it, 2);
  CHECK(res > 1e-14);
  /* b = 0: x = 0 at once */
  double z[120] = {0};
  for (int i = 0; i < n3; i++) x[i] = 1;
  CHECK_INT_EQ(ds__bsr_pcg(A, z, x, 1e-10, 10, &it, &res), 0);
  CHECK(it == 0 && res == 0 && x[0] == 0);
  /* negative definite: refused */
  for (size_t k = 0; k < 9 * (size_t)A->nnzb; k++) A->val[k] = -A->val[k];
  for (int i = 0; i < n3; i++) x[i] = 0;
  CHECK_INT_EQ(ds__bsr_pcg(A, b, x, 1e-10, 200, &it, &res), DS_ERR_DIVERGED);
  free(D);
  ds__bsr_free(A);
  ds_model_free(m);
}

/* positions near rest (the tet box pushed 1 cm into the ground), random velocities */
static void state(const dsModel* m, dsReal* x, dsReal* v, dsReal* act, double push) {
  for (int i = 0; i < 3 * m->nparticle; i++) {
    x[i] = m->x0[i] + unif(-0.005, 0.005) - (i % 3 == 1 ? push : 0);
    v[i] = unif(-0.5, 0.5);
  }
  for (int k = 0; k < m->nact; k++) act[k] = unif(-0.3, 0.3);
}

/* dense M + h Kv + h^2 Kx from the table, row by row in list order */
static void dense_ref(const dsModel* m, const dsReal* x, const dsReal* v, const dsReal* act, double h, int proj,
                      double* D) {
  const int n = m->nparticle, n3 = 3 * n;
  dsForceLayout L;
  ds__force_layout(m, &L);
  memset(D, 0, sizeof(double) * (size_t)n3 * (size_t)n3);
  for (int i = 0; i < n; i++)
    for (int c = 0; c < 3; c++) D[(size_t)n3 * (3 * i + c) + 3 * i + c] = m->mass[i];
  double Kx[144], Kv[144];
  for (int k = 0; k < DS__NFORCE; k++) {
    const int cnt = ds__forces[k].count(m), nv = ds__bsr_elem_nvert(k), nn = 3 * nv;
    if (!ds__force_jac[k]) continue;
    dsForceFwd a = {x, v, L.act[k] >= 0 ? act + L.act[k] : NULL, NULL, NULL, NULL};
    for (int e = 0; e < cnt; e++) {
      ds__force_jac[k](m, &a, e, Kx, Kv);
      if (proj) {
        ds__sym_project_psd(nn, Kx);
        ds__sym_project_psd(nn, Kv);
      }
      const int* idx = ds__bsr_elem_idx(k, m) + (size_t)nv * e;
      for (int p = 0; p < nn; p++)
        for (int q = 0; q < nn; q++)
          D[(size_t)n3 * (3 * idx[p / 3] + p % 3) + 3 * idx[q / 3] + q % 3] += h * Kv[nn * p + q] + h * h * Kx[nn * p + q];
    }
  }
  if (ds__contact_count(m))
    for (int i = 0; i < n; i++) {
      ds__contact_pjac(m, i, x, v, Kx, Kv);
      if (proj) {
        ds__sym_project_psd(3, Kx);
        ds__sym_project_psd(3, Kv);
      }
      for (int p = 0; p < 3; p++)
        for (int q = 0; q < 3; q++) D[(size_t)n3 * (3 * i + p) + 3 * i + q] += h * Kv[3 * p + q] + h * h * Kx[3 * p + q];
    }
  for (int i = 0; i < n; i++) /* fixed particles: identity rows and columns */
    if (m->mass[i] == 0)
      for (int t = 0; t < n3; t++)
        for (int c = 0; c < 3; c++) {
          D[(size_t)n3 * (3 * i + c) + t] = t == 3 * i + c;
          D[(size_t)n3 * t + 3 * i + c] = t == 3 * i + c;
        }
}

static void test_assembly(dsModel* m, const char* name, double push) {
  const int n = m->nparticle, n3 = 3 * n;
  const double h = 1e-2;
  dsReal* x = malloc(sizeof(dsReal) * (size_t)n3);
  dsReal* v = malloc(sizeof(dsReal) * (size_t)n3);
  dsReal* act = malloc(sizeof(dsReal) * (size_t)(m->nact + 1));
  double* D = malloc(sizeof(double) * (size_t)n3 * (size_t)n3);
  double* S = malloc(sizeof(double) * (size_t)n3 * (size_t)n3);
  dsReal* b = malloc(sizeof(dsReal) * (size_t)n3);
  dsReal* y = malloc(sizeof(dsReal) * (size_t)n3);
  dsBlockSparse* A;
  state(m, x, v, act, push);
  CHECK_INT_EQ(ds__bsr_create(m, &A), 0);
  for (int proj = 0; proj < 2; proj++) {
    ds__bsr_assemble(A, m, x, v, act, h, proj);
    dense_ref(m, x, v, act, h, proj, D);
    dense_of(A, S);
    double nD = 0, e = 0;
    for (size_t k = 0; k < (size_t)n3 * n3; k++) {
      nD = fmax(nD, fabs(D[k]));
      e = fmax(e, fabs(D[k] - S[k]));
    }
    dst_checks++;
    if (!(e <= 1e-12 * nD)) DST_FAIL_AT("%s (projected %d): assembly differs from the dense sum by %.3g (max %.3g)", name, proj, e, nD);
    if (proj) {
      /* symmetric bit for bit; PCG solves it */
      int sym = 1;
      for (int i = 0; i < n3; i++)
        for (int j = 0; j < i; j++) sym &= S[(size_t)n3 * i + j] == S[(size_t)n3 * j + i];
      CHECK(sym);
      for (int i = 0; i < n3; i++) {
        b[i] = unif(-1, 1);
        y[i] = 0;
      }
      int it = 0;
      dsReal res = 0;
      CHECK_INT_EQ(ds__bsr_pcg(A, b, y, 1e-10, 500, &it, &res), 0);
      CHECK(resid_rel(S, n3, y, b) <= 2e-10);
    }
  }
  /* the exact matrix is not symmetric (damping, friction) */
  ds__bsr_assemble(A, m, x, v, act, h, 0);
  dense_of(A, S);
  double as = 0;
  for (int i = 0; i < n3; i++)
    for (int j = 0; j < i; j++) as = fmax(as, fabs(S[(size_t)n3 * i + j] - S[(size_t)n3 * j + i]));
  CHECK(as > 0);
  ds__bsr_free(A);
  free(x);
  free(v);
  free(act);
  free(D);
  free(S);
  free(b);
  free(y);
}

/* assembly, PCG and BiCGSTAB (A and A^T): the same bits on 1, 2 and 3
 * threads, on an n x n x n tet grid: n = 3 (64 particles, below every
 * parallel threshold of engine/sparse.c) and n = 16 (4,913 particles, above
 * them all: the products, the assembly and the solvers' vector operations
 * run in parallel regions with their fixed-order sums) */
static void test_threads(int n) {
#ifdef _OPENMP
  dsModel* m = et_soft_model(n, 1e-3);
  const int n3 = 3 * m->nparticle;
  dsReal* x = malloc(sizeof(dsReal) * (size_t)n3);
  dsReal* v = malloc(sizeof(dsReal) * (size_t)n3);
  dsReal* act = malloc(sizeof(dsReal) * (size_t)(m->nact + 1));
  dsReal* b = malloc(sizeof(dsReal) * (size_t)n3);
  dsReal *val[3], *sol[3][3];
  state(m, x, v, act, 0.02);
  for (int i = 0; i < n3; i++) b[i] = unif(-1, 1);
  const int saved = omp_get_max_threads();
  int its[3][3];
  for (int t = 0; t < 3; t++) {
    dsBlockSparse* A;
    omp_set_num_threads(t + 1);
    CHECK_INT_EQ(ds__bsr_create(m, &A), 0);
    ds__bsr_assemble(A, m, x, v, act, 1e-2, 1);
    val[t] = malloc(sizeof(dsReal) * 9 * (size_t)A->nnzb);
    memcpy(val[t], A->val, sizeof(dsReal) * 9 * (size_t)A->nnzb);
    for (int s = 0; s < 3; s++) sol[t][s] = calloc((size_t)n3, sizeof(dsReal));
    CHECK_INT_EQ(ds__bsr_pcg(A, b, sol[t][0], 1e-12, 2000, &its[t][0], NULL), 0);
    CHECK_INT_EQ(ds__bsr_bicgstab(A, 0, b, sol[t][1], 1e-12, 2000, &its[t][1], NULL), 0);
    CHECK_INT_EQ(ds__bsr_bicgstab(A, 1, b, sol[t][2], 1e-12, 2000, &its[t][2], NULL), 0);
    if (t > 0) {
      CHECK(memcmp(val[t], val[0], sizeof(dsReal) * 9 * (size_t)A->nnzb) == 0);
      for (int s = 0; s < 3; s++) {
        CHECK(memcmp(sol[t][s], sol[0][s], sizeof(dsReal) * (size_t)n3) == 0);
        CHECK_INT_EQ(its[t][s], its[0][s]);
      }
    }
    ds__bsr_free(A);
  }
  omp_set_num_threads(saved);
  for (int t = 0; t < 3; t++) {
    free(val[t]);
    for (int s = 0; s < 3; s++) free(sol[t][s]);
  }
  free(x);
  free(v);
  free(act);
  free(b);
  ds_model_free(m);
#else
  (void)n;
#endif
}

int main(void) {
  test_pcg_random();
  dsModel* cloth = et_cloth_model(4, 3, 1e-3);
  test_assembly(cloth, "cloth", 0);
  ds_model_free(cloth);
  dsModel* box = et_soft_model(2, 1e-3);
  test_assembly(box, "tet box in contact", 0.02);
  ds_model_free(box);
  test_threads(3);
  test_threads(16);
  return DST_RESULT();
}
#endif

/* Block-sparse 3 x 3 matrices: pattern, assembly, product, PCG
 * (engine/sparse.h). */
#include "config.h"

#include "engine/sparse.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/internal.h"
#include "engine/dense_small.h"
#include "engine/forces.h"

/* Below this many particles the loops run on one thread: a parallel region
 * costs more than the work (the results are the same bits either way).
 * DS__BSR_PAR: the element Jacobians, the assembly, the products (about
 * 20 blocks a row) and BiCGSTAB's team (bicgstab_team, one region a
 * solve); DS__BSR_VPAR: PCG's and dot()'s vector operations (a few
 * operations per entry, a region each), whose regions cost more than their
 * work far above DS__BSR_PAR_MIN. Measured
 * on control-cloth-implicit (256 particles, 2 threads): with those on one
 * thread a training iteration took 0.063 s against 0.068 s (medians of five
 * bench_env runs of five), and with OMP_WAIT_POLICY=passive, where each
 * region wakes a sleeping thread, 0.34 s against 1.31 s. */
#define DS__BSR_PAR_MIN 256
#define DS__BSR_PAR(A) ((A)->n >= DS__BSR_PAR_MIN)
#define DS__BSR_VPAR_MIN 4096
#define DS__BSR_VPAR(A) ((A)->n >= DS__BSR_VPAR_MIN)
/* rows of the largest element Jacobian: 3 nvert = 12 (tets, bending) */
#define DS__BSR_NNMAX 12

_Static_assert(DS__NFORCE <= 16, "dsBlockSparse.jrow holds a first real per force row");

/* x86-64 with GCC or Clang target attributes: the element Jacobians and
 * the block products are also compiled for AVX2 and chosen at run time
 * (the same operations, no FMA, so the same bits) */
#if defined(__GNUC__) && defined(__x86_64__) && !defined(DS_NO_AVX2) && defined(__has_attribute)
#  if __has_attribute(target)
#    define DS__BSR_AVX2 1
#  endif
#endif

int ds__bsr_elem_nvert(int k) {
  const dsForceModel* F = &ds__forces[k];
  return F->nvert > 0 ? F->nvert : ds__forces[F->into].nvert;
}

const int* ds__bsr_elem_idx(int k, const dsModel* m) {
  const dsForceModel* F = &ds__forces[k];
  return F->nvert > 0 ? F->idx(m) : ds__forces[F->into].idx(m);
}

void ds__bsr_free(dsBlockSparse* A) {
  if (!A) return;
  ds__free(A->row_start);
  ds__free(A->col);
  ds__free(A->diag);
  ds__free(A->val);
  ds__free(A->valc);
  ds__free(A->src_start);
  ds__free(A->src);
  ds__free(A->src_ld);
  ds__free(A->jk);
  ds__free(A->tr);
  ds__free(A->dinv);
  ds__free(A->work);
  ds__free(A->part);
  ds__free(A->tpart);
  ds__free(A);
}

static int cmp_ll(const void* a, const void* b) {
  const long long x = *(const long long*)a, y = *(const long long*)b;
  return (x > y) - (x < y);
}

/* block index of (i, j) in row i (present by construction) */
static int find_block(const dsBlockSparse* A, int i, int j) {
  int lo = A->row_start[i], hi = A->row_start[i + 1] - 1;
  while (lo < hi) {
    const int mid = lo + (hi - lo) / 2;
    if (A->col[mid] < j) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/* Walks every source in assembly order: fill = 0 counts per block, 1
 * writes src / src_ld at the running positions (cursor: per-block next). */
static void walk_sources(dsBlockSparse* A, const dsModel* m, int fill, int* cursor) {
  for (int k = 0; k < DS__NFORCE; k++) {
    const dsForceModel* F = &ds__forces[k];
    const int cnt = F->count(m), nv = ds__bsr_elem_nvert(k), ld = 3 * nv;
    if (!ds__force_jac[k] || cnt == 0) continue;
    const int* idx = ds__bsr_elem_idx(k, m);
    for (int e = 0; e < cnt; e++)
      for (int a = 0; a < nv; a++)
        for (int b = 0; b < nv; b++) {
          const int blk = find_block(A, idx[(size_t)nv * e + a], idx[(size_t)nv * e + b]);
          if (!fill) {
            cursor[blk]++;
            continue;
          }
          const int s = cursor[blk]++;
          A->src[s] = A->jrow[k] + (size_t)e * (size_t)(ld * ld) + (size_t)(3 * a * ld + 3 * b);
          A->src_ld[s] = (unsigned char)ld;
        }
  }
  if (A->jcontact == (size_t)-1) return;
  for (int i = 0; i < A->n; i++) {
    const int blk = A->diag[i];
    if (!fill) {
      cursor[blk]++;
      continue;
    }
    const int s = cursor[blk]++;
    A->src[s] = A->jcontact + 9 * (size_t)i;
    A->src_ld[s] = 3;
  }
}

/* the pattern: every (i, j) sharing an element with a Jacobian, and (i, i) */
static int build_pattern(dsBlockSparse* A, const dsModel* m) {
  const int n = A->n;
  size_t np = (size_t)n;
  for (int k = 0; k < DS__NFORCE; k++)
    if (ds__force_jac[k]) np += (size_t)ds__forces[k].count(m) * (size_t)(ds__bsr_elem_nvert(k) * ds__bsr_elem_nvert(k));
  long long* key = ds__malloc(sizeof(long long) * np);
  A->row_start = ds__calloc((size_t)n + 1, sizeof(int));
  if (!key || !A->row_start) {
    ds__free(key);
    return DS_ERR_NOMEM;
  }
  size_t q = 0;
  for (int i = 0; i < n; i++) key[q++] = (long long)i * n + i;
  for (int k = 0; k < DS__NFORCE; k++) {
    const dsForceModel* F = &ds__forces[k];
    const int cnt = F->count(m), nv = ds__bsr_elem_nvert(k);
    if (!ds__force_jac[k] || cnt == 0) continue;
    const int* idx = ds__bsr_elem_idx(k, m);
    for (int e = 0; e < cnt; e++)
      for (int a = 0; a < nv; a++)
        for (int b = 0; b < nv; b++) key[q++] = (long long)idx[(size_t)nv * e + a] * n + idx[(size_t)nv * e + b];
  }
  qsort(key, np, sizeof(long long), cmp_ll);
  size_t u = 0;
  for (size_t t = 0; t < np; t++)
    if (t == 0 || key[t] != key[u - 1]) key[u++] = key[t];
  if (u > (size_t)INT32_MAX / 9) {
    ds__free(key);
    return DS_ERR_RANGE;
  }
  A->nnzb = (int)u;
  A->col = ds__malloc(sizeof(int) * (u ? u : 1));
  A->diag = ds__malloc(sizeof(int) * (n ? (size_t)n : 1));
  if (!A->col || !A->diag) {
    ds__free(key);
    return DS_ERR_NOMEM;
  }
  for (size_t t = 0; t < u; t++) {
    const int i = (int)(key[t] / n), j = (int)(key[t] % n);
    A->col[t] = j;
    A->row_start[i + 1]++;
    if (i == j) A->diag[i] = (int)t;
  }
  for (int i = 0; i < n; i++) A->row_start[i + 1] += A->row_start[i];
  ds__free(key);
  return 0;
}

void ds__bsr_bounds(const dsModel* m, size_t* nnzb, size_t* nsrc, size_t* njac) {
  const size_t np = (size_t)m->nparticle;
  *nnzb = np;
  *nsrc = np;
  *njac = 0;
  for (int k = 0; k < DS__NFORCE; k++) {
    if (!ds__force_jac[k]) continue;
    const size_t cnt = (size_t)ds__forces[k].count(m), nv = (size_t)ds__bsr_elem_nvert(k);
    *nnzb += cnt * nv * (nv - 1);
    *nsrc += cnt * nv * nv;
    *njac += cnt * 9 * nv * nv;
  }
  if (ds__contact_count(m) > 0) {
    *nsrc += np;
    *njac += 9 * np;
  }
}

int ds__bsr_create(const dsModel* m, dsBlockSparse** out) {
  *out = NULL;
  if ((size_t)m->nparticle > (size_t)INT32_MAX / 3) return DS_ERR_RANGE;
  dsBlockSparse* A = ds__calloc(1, sizeof *A);
  if (!A) return DS_ERR_NOMEM;
  A->n = m->nparticle;
  int rc = build_pattern(A, m);
  if (rc) {
    ds__bsr_free(A);
    return rc;
  }
  size_t nj = 0;
  for (int k = 0; k < DS__NFORCE; k++) {
    A->jrow[k] = nj;
    if (!ds__force_jac[k]) continue;
    if (3 * ds__bsr_elem_nvert(k) > DS__BSR_NNMAX) { /* element_jacobians' stack block */
      ds__bsr_free(A);
      return DS_ERR_RANGE;
    }
    const size_t ld = 3 * (size_t)ds__bsr_elem_nvert(k);
    nj += (size_t)ds__forces[k].count(m) * ld * ld;
  }
  A->jcontact = (size_t)-1;
  if (ds__contact_count(m) > 0) {
    A->jcontact = nj;
    nj += 9 * (size_t)A->n;
  }
  A->njac = nj;
  const size_t nb = (size_t)A->nnzb, n3 = 3 * (size_t)A->n;
  A->val = ds__calloc(9 * nb + DS__BSR_PAD, sizeof(dsReal));
  A->valc = ds__calloc(9 * nb + DS__BSR_PAD, sizeof(dsReal));
  A->src_start = ds__calloc(nb + 1, sizeof(int));
  A->jk = ds__malloc(sizeof(dsReal) * (nj ? nj : 1));
  A->dinv = ds__malloc(sizeof(dsReal) * 9 * (A->n ? (size_t)A->n : 1));
  A->work = ds__malloc(sizeof(dsReal) * 8 * (n3 ? n3 : 1));
  A->tr = ds__malloc(sizeof(int) * (nb ? nb : 1));
  A->part = ds__malloc(sizeof(dsReal) * (n3 / DS__BSR_CHUNK + 1));
  A->tpart = ds__malloc(sizeof(dsReal) * 4 * ((size_t)A->n / DS__BSR_TROWS + 1));
  int* cursor = ds__calloc(nb + 1, sizeof(int));
  if (!A->val || !A->valc || !A->src_start || !A->jk || !A->dinv || !A->work || !A->part || !A->tpart || !A->tr ||
      !cursor) {
    ds__free(cursor);
    ds__bsr_free(A);
    return DS_ERR_NOMEM;
  }
  for (int i = 0; i < A->n; i++)
    for (int b = A->row_start[i]; b < A->row_start[i + 1]; b++) A->tr[b] = find_block(A, A->col[b], i);
  walk_sources(A, m, 0, cursor);
  for (size_t b = 0; b < nb; b++) A->src_start[b + 1] = A->src_start[b] + cursor[b];
  const size_t ns = (size_t)A->src_start[nb];
  A->src = ds__malloc(sizeof(size_t) * (ns ? ns : 1));
  A->src_ld = ds__malloc(ns ? ns : 1);
  if (!A->src || !A->src_ld) {
    ds__free(cursor);
    ds__bsr_free(A);
    return DS_ERR_NOMEM;
  }
  memcpy(cursor, A->src_start, sizeof(int) * nb);
  walk_sources(A, m, 1, cursor);
  ds__free(cursor);
  *out = A;
  return 0;
}

/* the spring's Kx projected in closed form (ds__spring_jac_proj) */
static void spring_proj(const dsModel* m, const dsForceFwd* a, int e, dsReal* Kx) {
  dsReal xl[6], vl[6];
  const int* idx = m->spring_idx + 2 * (size_t)e;
  dsSpringParam p = {m->spring_ke[e], m->spring_kd[e], m->spring_rest[e], a->act ? a->act[e] : 0};
  ds__gather3(xl, a->x, idx, 2);
  ds__gather3(vl, a->v, idx, 2);
  ds__spring_jac_proj(xl, vl, &p, Kx);
}

/* One element's h Kv + h^2 Kx into Kx (its place in jk): Kx in place, Kv
 * on the stack; the sum rounds as the gather's h kv + h^2 kx did when it
 * read Kx and Kv apart. The tets', triangles' and hinges' exact blocks
 * come combined from their kernels (ds__tet_jac_comb: the same matrix up
 * to rounding, in a third of the instructions; ds__tri_jac_comb: combined
 * in its edge variables, the same matrix up to rounding;
 * ds__bend_jac_comb: the same bits, one pass and no Kv without damping),
 * called directly (flattened
 * in, so the AVX2 copy below compiles them for AVX2: the same operations,
 * so the same bits); the others go through the table. */
#define DS__BSR_ELEM_JAC_BODY                                                                \
  {                                                                                          \
    if (k == DS__F_TET && !projected) { /* h Kv + h^2 Kx in one pass (engine/force_tet.h) */ \
      ds__tet_jac_comb_elem(m, a, e, h2, h, Kx);                                             \
      return;                                                                                \
    }                                                                                        \
    if (k == DS__F_BEND && !projected) { /* the same (engine/force_bend.h) */                \
      ds__bend_jac_comb_elem(m, a, e, h2, h, Kx);                                            \
      return;                                                                                \
    }                                                                                        \
    if (k == DS__F_TRI && !projected) { /* the same (engine/force_tri.h) */                  \
      ds__tri_jac_comb_elem(m, a, e, h2, h, Kx);                                             \
      return;                                                                                \
    }                                                                                        \
    dsReal Kv[DS__BSR_NNMAX * DS__BSR_NNMAX];                                                \
    ds__force_jac[k](m, a, e, Kx, Kv);                                                       \
    if (projected) {                                                                         \
      if (k == DS__F_SPRING) spring_proj(m, a, e, Kx);                                       \
      else ds__sym_project_psd(nn, Kx);                                                      \
      ds__sym_project_psd(nn, Kv);                                                           \
    }                                                                                        \
    const size_t sz = (size_t)nn * (size_t)nn;                                               \
    for (size_t q = 0; q < sz; q++) Kx[q] = h * Kv[q] + h2 * Kx[q];                          \
  }
typedef void (*dsBsr__ElemJac)(const dsModel* m, const dsForceFwd* a, int k, int e, int nn, dsReal h, dsReal h2,
                               int projected, dsReal* Kx);
DS__FLATTEN static void elem_jac_base(const dsModel* m, const dsForceFwd* a, int k, int e, int nn, dsReal h,
                                      dsReal h2, int projected, dsReal* Kx) DS__BSR_ELEM_JAC_BODY
#if defined(DS__BSR_AVX2)
__attribute__((target("avx2"))) DS__FLATTEN static void elem_jac_avx2(const dsModel* m, const dsForceFwd* a, int k,
                                                                      int e, int nn, dsReal h, dsReal h2,
                                                                      int projected, dsReal* Kx) DS__BSR_ELEM_JAC_BODY
#endif

/* phase 1: every element's (and particle's contact) h Kv + h^2 Kx into jk */
static void element_jacobians(dsBlockSparse* A, const dsModel* m, const dsReal* x, const dsReal* v,
                              const dsReal* act, dsReal h, int projected) {
  const dsReal h2 = h * h;
  dsForceLayout L;
  ds__force_layout(m, &L);
  dsBsr__ElemJac ej = elem_jac_base;
#if defined(DS__BSR_AVX2)
  if (__builtin_cpu_supports("avx2")) ej = elem_jac_avx2;
#endif
#pragma omp parallel if (DS__BSR_PAR(A))
  {
    for (int k = 0; k < DS__NFORCE; k++) {
      const int cnt = ds__forces[k].count(m), nn = 3 * ds__bsr_elem_nvert(k);
      if (!ds__force_jac[k] || cnt == 0) continue;
      const dsForceFwd a = {x, v, act && L.act[k] >= 0 ? act + L.act[k] : NULL, NULL, NULL, NULL};
      const size_t sz = (size_t)nn * (size_t)nn;
#pragma omp for schedule(static)
      for (int e = 0; e < cnt; e++) ej(m, &a, k, e, nn, h, h2, projected, A->jk + A->jrow[k] + sz * (size_t)e);
    }
    if (A->jcontact != (size_t)-1) {
#pragma omp for schedule(static)
      for (int i = 0; i < A->n; i++) {
        dsReal* Kx = A->jk + A->jcontact + 9 * (size_t)i;
        dsReal Kv[9];
        ds__contact_pjac(m, i, x, v, Kx, Kv);
        if (projected) {
          ds__sym_project_psd(3, Kx);
          ds__sym_project_psd(3, Kv);
        }
        for (int q = 0; q < 9; q++) Kx[q] = h * Kv[q] + h2 * Kx[q];
      }
    }
  }
}

void ds__bsr_assemble(dsBlockSparse* A, const dsModel* m, const dsReal* x, const dsReal* v, const dsReal* act,
                      dsReal h, int projected) {
  element_jacobians(A, m, x, v, act, h, projected);
  const int n = A->n;
  /* phase 2: each block gathers its sources in their fixed order */
  DS__PAR_FOR(DS__BSR_PAR(A),
    for (int i = 0; i < n; i++)
      for (int b = A->row_start[i]; b < A->row_start[i + 1]; b++) {
        const int j = A->col[b];
        dsReal *o = A->val + 9 * (size_t)b, *oc = A->valc + 9 * (size_t)b;
        dsReal acc[9];
        if (m->mass[i] == 0 || m->mass[j] == 0) { /* fixed: identity row and column */
          for (int c = 0; c < 9; c++) acc[c] = (i == j && c % 4 == 0) ? 1 : 0;
        } else {
          for (int c = 0; c < 9; c++) acc[c] = (i == j && c % 4 == 0) ? m->mass[i] : 0;
          for (int s = A->src_start[b]; s < A->src_start[b + 1]; s++) {
            const dsReal* k = A->jk + A->src[s];
            const int ld = A->src_ld[s];
            for (int r = 0; r < 3; r++)
              for (int c = 0; c < 3; c++) acc[3 * r + c] += k[ld * r + c];
          }
        }
        for (int r = 0; r < 3; r++)
          for (int c = 0; c < 3; c++) {
            o[3 * r + c] = acc[3 * r + c];
            oc[3 * c + r] = acc[3 * r + c];
          }
      }
  );
  A->valc_ok = 1;
}

/* The products. Row i of y = A x sums A_(i,j) x_j over its blocks, and of
 * y = A^T x sums A_(j,i)^T x_j (block tr[b]); each block's contribution
 * is, per component r,
 *   (B_r0 x_j0 + B_r1 x_j1) + B_r2 x_j2
 * added to the row's running sum, in block order. The vector kernel
 * (GCC vector extensions, four lanes of which three are used) computes
 * the three components at once as columns times x_j's entries: A's
 * columns are contiguous in valc, A^T's (the rows of A_(j,i)) in val. The
 * same operations lane by lane (no FMA: -ffp-contract=off), so the same
 * bits as the scalar loop, which stays for other compilers and for A x
 * with a val filled by the caller (valc_ok 0: the kept Jacobians of
 * engine/implicit.c; A^T x reads val only). On x86-64 the vector kernel is also
 * compiled for AVX2 (one instruction per vector instead of two) and
 * chosen at run time, as the tets' quads are (engine/force_tet.h). */
static inline void mv_row_scalar(const dsBlockSparse* A, const dsReal* x, dsReal* y, int trans, int i) {
  dsReal s0 = 0, s1 = 0, s2 = 0;
  for (int b = A->row_start[i]; b < A->row_start[i + 1]; b++) {
    const dsReal* xj = x + 3 * (size_t)A->col[b];
    if (trans) {
      const dsReal* a = A->val + 9 * (size_t)A->tr[b]; /* block (j, i), used transposed */
      s0 += a[0] * xj[0] + a[3] * xj[1] + a[6] * xj[2];
      s1 += a[1] * xj[0] + a[4] * xj[1] + a[7] * xj[2];
      s2 += a[2] * xj[0] + a[5] * xj[1] + a[8] * xj[2];
    } else {
      const dsReal* a = A->val + 9 * (size_t)b;
      s0 += a[0] * xj[0] + a[1] * xj[1] + a[2] * xj[2];
      s1 += a[3] * xj[0] + a[4] * xj[1] + a[5] * xj[2];
      s2 += a[6] * xj[0] + a[7] * xj[1] + a[8] * xj[2];
    }
  }
  y[3 * (size_t)i] = s0;
  y[3 * (size_t)i + 1] = s1;
  y[3 * (size_t)i + 2] = s2;
}
static void matvec_scalar(const dsBlockSparse* A, const dsReal* x, dsReal* y, int trans) {
  const int n = A->n;
  DS__PAR_FOR(DS__BSR_PAR(A),
    for (int i = 0; i < n; i++) mv_row_scalar(A, x, y, trans, i);
  );
}
/* rows [i0, i1) of the product (BiCGSTAB's chunks) */
static void rows_scalar(const dsBlockSparse* A, const dsReal* x, dsReal* y, int trans, int i0, int i1) {
  for (int i = i0; i < i1; i++) mv_row_scalar(A, x, y, trans, i);
}

#if defined(__GNUC__)
#  define DS__BSR_VEC 1
typedef dsReal dsBsr__V __attribute__((vector_size(4 * sizeof(dsReal))));
/* four reals from p (unaligned) */
#  define DS__BSR_LD4(v, p) memcpy(&(v), (p), sizeof(v))
/* row i of y = B x: cols the column-major blocks of B (valc for A, val
 * for A^T), blk the block of each pattern entry (tr for A^T; NULL: the
 * entry itself) */
#  define DS__BSR_MV_ROW(i)                                                  \
    {                                                                        \
      dsBsr__V s = {0, 0, 0, 0};                                             \
      for (int b = A->row_start[i]; b < A->row_start[i + 1]; b++) {          \
        const dsReal* a = cols + 9 * (size_t)(blk ? blk[b] : b);             \
        const dsReal* xj = x + 3 * (size_t)A->col[b];                        \
        dsBsr__V c0, c1, c2;                                                 \
        DS__BSR_LD4(c0, a);                                                  \
        DS__BSR_LD4(c1, a + 3);                                              \
        DS__BSR_LD4(c2, a + 6);                                              \
        s += (c0 * xj[0] + c1 * xj[1]) + c2 * xj[2];                         \
      }                                                                      \
      y[3 * (size_t)i] = s[0];                                               \
      y[3 * (size_t)i + 1] = s[1];                                           \
      y[3 * (size_t)i + 2] = s[2];                                           \
    }
#  define DS__BSR_MV_BODY                                                    \
    {                                                                        \
      const dsReal* cols = trans ? A->val : A->valc;                         \
      const int* blk = trans ? A->tr : NULL;                                 \
      const int n = A->n;                                                    \
      DS__PAR_FOR(DS__BSR_PAR(A),                                            \
        for (int i = 0; i < n; i++) DS__BSR_MV_ROW(i)                        \
      );                                                                     \
    }
#  define DS__BSR_ROWS_BODY                                                  \
    {                                                                        \
      const dsReal* cols = trans ? A->val : A->valc;                         \
      const int* blk = trans ? A->tr : NULL;                                 \
      for (int i = i0; i < i1; i++) DS__BSR_MV_ROW(i)                        \
    }
static void matvec_vec(const dsBlockSparse* A, const dsReal* x, dsReal* y, int trans) DS__BSR_MV_BODY
static void rows_vec(const dsBlockSparse* A, const dsReal* x, dsReal* y, int trans, int i0, int i1)
    DS__BSR_ROWS_BODY
#  if defined(DS__BSR_AVX2)
__attribute__((target("avx2"))) static void matvec_avx2(const dsBlockSparse* A, const dsReal* x, dsReal* y,
                                                        int trans) DS__BSR_MV_BODY
__attribute__((target("avx2"))) static void rows_avx2(const dsBlockSparse* A, const dsReal* x, dsReal* y, int trans,
                                                      int i0, int i1) DS__BSR_ROWS_BODY
#  endif
#endif

/* the row-range product matvec_any would use (A^T's vector kernel reads
 * val only, so it needs no valc) */
typedef void (*dsBsr__Rows)(const dsBlockSparse* A, const dsReal* x, dsReal* y, int trans, int i0, int i1);
static dsBsr__Rows rows_kernel(const dsBlockSparse* A, int trans) {
  if (!A->valc_ok && !trans) return rows_scalar;
#if defined(DS__BSR_AVX2)
  if (__builtin_cpu_supports("avx2")) return rows_avx2;
#endif
#if defined(DS__BSR_VEC)
  return rows_vec;
#else
  return rows_scalar;
#endif
}

static void matvec_any(const dsBlockSparse* A, const dsReal* x, dsReal* y, int trans) {
  if (!A->valc_ok && !trans) {
    matvec_scalar(A, x, y, trans);
    return;
  }
#if defined(DS__BSR_AVX2)
  if (__builtin_cpu_supports("avx2")) {
    matvec_avx2(A, x, y, trans);
    return;
  }
#endif
#if defined(DS__BSR_VEC)
  matvec_vec(A, x, y, trans);
#else
  matvec_scalar(A, x, y, trans);
#endif
}

void ds__bsr_matvec(const dsBlockSparse* A, const dsReal* x, dsReal* y) { matvec_any(A, x, y, 0); }

static dsReal dot(const dsBlockSparse* A, const dsReal* a, const dsReal* b, size_t len);

void ds__bsr_matvec_t(const dsBlockSparse* A, const dsReal* x, dsReal* y) { matvec_any(A, x, y, 1); }

dsReal ds__bsr_dot(const dsBlockSparse* A, const dsReal* a, const dsReal* b, size_t len) {
  return dot(A, a, b, len);
}

/* a . b over len reals: fixed chunks summed in parallel, the chunk sums in
 * order (the same bits on any thread count) */
static dsReal dot(const dsBlockSparse* A, const dsReal* a, const dsReal* b, size_t len) {
  const long nch = (long)((len + DS__BSR_CHUNK - 1) / DS__BSR_CHUNK);
  DS__PAR_FOR(DS__BSR_VPAR(A),
    for (long c = 0; c < nch; c++) {
      const size_t lo = (size_t)c * DS__BSR_CHUNK, hi = lo + DS__BSR_CHUNK < len ? lo + DS__BSR_CHUNK : len;
      dsReal s = 0;
      for (size_t t = lo; t < hi; t++) s += a[t] * b[t];
      A->part[c] = s;
    }
  );
  dsReal s = 0;
  for (long c = 0; c < nch; c++) s += A->part[c];
  return s;
}

static void block_jacobi(const dsBlockSparse* A, int trans, const dsReal* u, dsReal* z, int i0, int i1);

/* z_i = dinv_i r_i per particle */
static void precondition(const dsBlockSparse* A, const dsReal* r, dsReal* z) {
  const int n = A->n;
  DS__PAR_FOR(DS__BSR_VPAR(A),
    for (int i = 0; i < n; i++) block_jacobi(A, 0, r, z, i, i + 1);
  );
}

/* y += s x (len reals) */
static void axpy(dsReal* y, const dsReal* x, dsReal s, size_t len) {
  const long nl = (long)len;
  DS__PAR_FOR(len >= 3 * DS__BSR_VPAR_MIN,
    for (long t = 0; t < nl; t++) y[t] += s * x[t];
  );
}

/* 1 when x (len reals) is all zeros: the first residual is then b itself,
 * without the product (Newton's directions and the adjoint start from 0) */
static int all_zero(const dsReal* x, size_t len) {
  for (size_t k = 0; k < len; k++)
    if (x[k] != 0) return 0;
  return 1;
}

/* The Krylov loops' test before an iteration: 1 to stop, *rc set to
 * DS_ERR_DIVERGED (rel not finite) or 0 (converged), or left as it is at
 * the iteration cap */
static int krylov_stop(dsReal rel, dsReal tol, int it, int maxit, int* rc) {
  if (!(rel - rel == 0)) {
    *rc = DS_ERR_DIVERGED;
    return 1;
  }
  if (rel <= tol) {
    *rc = 0;
    return 1;
  }
  return it >= maxit;
}

int ds__bsr_pcg(dsBlockSparse* A, const dsReal* b, dsReal* x, dsReal tol, int maxit, int* iters, dsReal* resid) {
  const size_t len = 3 * (size_t)A->n;
  dsReal *r = A->work, *z = r + len, *p = z + len, *q = p + len;
  int it = 0, rc = 1;
  dsReal rel = 0;
  for (int i = 0; i < A->n; i++)
    if (dsu_mat3_inv(A->dinv + 9 * (size_t)i, A->val + 9 * (size_t)A->diag[i]) == 0) {
      rc = DS_ERR_DIVERGED;
      goto done;
    }
  const dsReal bn = dsu_sqrt(dot(A, b, b, len));
  if (!(bn - bn == 0)) {
    rc = DS_ERR_DIVERGED;
    goto done;
  }
  if (bn == 0) {
    memset(x, 0, sizeof(dsReal) * len);
    rc = 0;
    goto done;
  }
  if (all_zero(x, len)) memset(q, 0, sizeof(dsReal) * len);
  else ds__bsr_matvec(A, x, q);
  for (size_t t = 0; t < len; t++) r[t] = b[t] - q[t];
  precondition(A, r, z);
  memcpy(p, z, sizeof(dsReal) * len);
  dsReal rz = dot(A, r, z, len);
  for (;; it++) {
    rel = dsu_sqrt(dot(A, r, r, len)) / bn;
    if (krylov_stop(rel, tol, it, maxit, &rc)) break;
    ds__bsr_matvec(A, p, q);
    const dsReal pq = dot(A, p, q, len);
    if (!(pq > 0)) {
      rc = DS_ERR_DIVERGED;
      break;
    }
    const dsReal alpha = rz / pq;
    axpy(x, p, alpha, len);
    axpy(r, q, -alpha, len);
    precondition(A, r, z);
    const dsReal rz1 = dot(A, r, z, len);
    const dsReal beta = rz1 / rz;
    rz = rz1;
    const long nl = (long)len;
    DS__PAR_FOR(DS__BSR_VPAR(A),
      for (long t = 0; t < nl; t++) p[t] = z[t] + beta * p[t];
    );
  }
done:
  if (iters) *iters = it;
  if (resid) *resid = rel;
  return rc;
}

static int finite_r(dsReal a) { return a - a == 0; }

/* Right-preconditioned BiCGSTAB on B x = b, B = A or A^T (K = block-Jacobi of B):
 *   r = b - B x, rhat = r, rho = alpha = omega = 1, v = p = 0; then
 *   rho' = rhat.r,  beta = (rho'/rho)(alpha/omega),  p = r + beta (p - omega v)
 *   y = K p,  v = B y,  alpha = rho' / rhat.v,  s = r - alpha v
 *   z = K s,  t = B z,  omega = t.s / t.t,  x += alpha y + omega z,  r = s - omega t */
/* y = S^{-1} x with S = (A + A^T) / 2 factorised (A->chol) */
static void precondition_chol(const dsBlockSparse* A, const dsReal* x, dsReal* y) { ds__chol_solve(A->chol, x, y); }

/* z_i = K u_i for particles [i0, i1): K block-Jacobi of A (dinv_i) or of
 * A^T (dinv_i^T: (A_ii^T)^-1 = (A_ii^-1)^T) */
static void block_jacobi(const dsBlockSparse* A, int trans, const dsReal* u, dsReal* z, int i0, int i1) {
  if (trans)
    for (int i = i0; i < i1; i++) {
      const dsReal *d = A->dinv + 9 * (size_t)i, *ui = u + 3 * (size_t)i;
      dsReal* zi = z + 3 * (size_t)i;
      zi[0] = d[0] * ui[0] + d[3] * ui[1] + d[6] * ui[2];
      zi[1] = d[1] * ui[0] + d[4] * ui[1] + d[7] * ui[2];
      zi[2] = d[2] * ui[0] + d[5] * ui[1] + d[8] * ui[2];
    }
  else
    for (int i = i0; i < i1; i++) {
      const dsReal *d = A->dinv + 9 * (size_t)i, *ui = u + 3 * (size_t)i;
      dsReal* zi = z + 3 * (size_t)i;
      zi[0] = d[0] * ui[0] + d[1] * ui[1] + d[2] * ui[2];
      zi[1] = d[3] * ui[0] + d[4] * ui[1] + d[5] * ui[2];
      zi[2] = d[6] * ui[0] + d[7] * ui[1] + d[8] * ui[2];
    }
}

/* BiCGSTAB's team phases (bicgstab_team; called inside its parallel
 * region, the loops shared by the team over chunks of DS__BSR_TROWS
 * particles, each thread the same chunks every time) */
#define DS__TCHUNK_RANGE                                                                   \
  const int i0 = c * DS__BSR_TROWS, i1 = i0 + DS__BSR_TROWS < A->n ? i0 + DS__BSR_TROWS : A->n; \
  const size_t k0 = 3 * (size_t)i0, k1 = 3 * (size_t)i1

static int team_chunks(const dsBlockSparse* A) { return (A->n + DS__BSR_TROWS - 1) / DS__BSR_TROWS; }

/* the chunks' sums in chunk order (every thread adds them itself) */
static dsReal chunk_sum(const dsReal* P, int nch) {
  dsReal s = 0;
  for (int c = 0; c < nch; c++) s += P[c];
  return s;
}

/* u = r + beta (u - omega v) (omega = 0: u = r + beta v), then z = K u */
static void team_update_pc(const dsBlockSparse* A, int trans, dsReal* u, const dsReal* r, const dsReal* v, dsReal beta,
                           dsReal omega, dsReal* z) {
  const int nch = team_chunks(A), chol = A->chol != NULL;
#pragma omp for schedule(static)
  for (int c = 0; c < nch; c++) {
    DS__TCHUNK_RANGE;
    if (omega != 0)
      for (size_t k = k0; k < k1; k++) u[k] = r[k] + beta * (u[k] - omega * v[k]);
    else
      for (size_t k = k0; k < k1; k++) u[k] = r[k] + beta * v[k];
    if (!chol) block_jacobi(A, trans, u, z, i0, i1);
  }
  if (chol) {
#pragma omp single
    precondition_chol(A, u, z);
  }
}

/* y = B x, and per chunk P1 = a . b and (P2 non-NULL) P2 = c . d over it */
static void team_product(const dsBlockSparse* A, int trans, dsBsr__Rows rows, const dsReal* x, dsReal* y,
                         const dsReal* a, const dsReal* b, const dsReal* cv, const dsReal* d, dsReal* P1, dsReal* P2) {
  const int nch = team_chunks(A);
#pragma omp for schedule(static)
  for (int c = 0; c < nch; c++) {
    DS__TCHUNK_RANGE;
    rows(A, x, y, trans, i0, i1);
    dsReal a1 = 0, a2 = 0;
    for (size_t k = k0; k < k1; k++) {
      a1 += a[k] * b[k];
      if (P2) a2 += cv[k] * d[k];
    }
    P1[c] = a1;
    if (P2) P2[c] = a2;
  }
}

/* The iterations of ds__bsr_bicgstab from r, rhat, p = v = 0 (rho = alpha
 * = omega = 1) on one team of threads: the vectors in chunks of
 * DS__BSR_TROWS particles, each thread the same chunks in every phase
 * (static schedule), five barriers an iteration:
 *   A  p = r + beta (p - omega v), y = K p
 *   B  v = B y, and the chunks' sums of rhat . v          -> alpha
 *   C  s = r - alpha v, z = K s
 *   D  t = B z, and the chunks' sums of t . t and t . s   -> omega
 *   E  x += alpha y + omega z, r = s - omega t, and the chunks' sums of
 *      r . r and rhat . r                                -> rel, rho'
 * Every thread adds the chunk sums in chunk order itself, so all hold the
 * same scalars and take the same branches, and the bits are those of one
 * thread. K is block-Jacobi of A (z_i = dinv_i u_i) or of A^T (z_i =
 * dinv_i^T u_i: (A_ii^T)^-1 = (A_ii^-1)^T), or CHOLMOD's factor (one
 * thread solves). The sums of B and D go to P1, P2 and those of E to
 * P3, P4: a phase's sums are read before the next barrier and not
 * rewritten until two barriers later. Returns as ds__bsr_bicgstab, with
 * *it advanced and *rel the last relative residual of the recurrence. */
static int bicgstab_team(dsBlockSparse* A, int trans, dsReal* x, dsReal tol, int maxit, dsReal bn, int* it_io,
                         dsReal* rel_out) {
  const int nch = team_chunks(A);
  const size_t len = 3 * (size_t)A->n;
  dsReal *r = A->work, *rh = r + len, *p = rh + len, *v = p + len, *s = v + len, *t = s + len, *y = t + len,
         *z = y + len;
  dsReal *P1 = A->tpart, *P2 = P1 + nch, *P3 = P2 + nch, *P4 = P3 + nch;
  const dsBsr__Rows rows = rows_kernel(A, trans);
  int rc_out = 1, it_out = *it_io;
  dsReal rel_last = 0;
#pragma omp parallel if (ds__par_open(DS__BSR_PAR(A)))
  {
    dsReal rho = 1, alpha = 1, omega = 1, rel = 0;
    int it = *it_io, rc = 1;
#pragma omp for schedule(static)
    for (int c = 0; c < nch; c++) {
      DS__TCHUNK_RANGE;
      dsReal a1 = 0, a2 = 0;
      for (size_t k = k0; k < k1; k++) {
        a1 += r[k] * r[k];
        a2 += rh[k] * r[k];
      }
      P3[c] = a1;
      P4[c] = a2;
    }
    for (;; it++) {
      const dsReal rr = chunk_sum(P3, nch), rho1 = chunk_sum(P4, nch);
      rel = dsu_sqrt(rr) / bn;
      if (krylov_stop(rel, tol, it, maxit, &rc)) break;
      if (rho1 == 0 || omega == 0) {
        rc = DS_ERR_DIVERGED;
        break;
      }
      const dsReal beta = (rho1 / rho) * (alpha / omega);
      /* A */
      team_update_pc(A, trans, p, r, v, beta, omega, y);
      /* B */
      team_product(A, trans, rows, y, v, rh, v, NULL, NULL, P1, NULL);
      const dsReal rv = chunk_sum(P1, nch);
      if (rv == 0) {
        rc = DS_ERR_DIVERGED;
        break;
      }
      alpha = rho1 / rv;
      /* C (omega = 0: s = r + (-alpha) v, the bits of r - alpha v) */
      team_update_pc(A, trans, s, r, v, -alpha, 0, z);
      /* D */
      team_product(A, trans, rows, z, t, t, t, t, s, P1, P2);
      const dsReal tt = chunk_sum(P1, nch), ts = chunk_sum(P2, nch);
      omega = tt > 0 ? ts / tt : 0;
      /* E */
#pragma omp for schedule(static)
      for (int c = 0; c < nch; c++) {
        DS__TCHUNK_RANGE;
        dsReal a1 = 0, a2 = 0;
        for (size_t k = k0; k < k1; k++) {
          x[k] += alpha * y[k] + omega * z[k];
          r[k] = s[k] - omega * t[k];
          a1 += r[k] * r[k];
          a2 += rh[k] * r[k];
        }
        P3[c] = a1;
        P4[c] = a2;
      }
      rho = rho1;
    }
#pragma omp master
    {
      rc_out = rc;
      it_out = it;
      rel_last = rel;
    }
  }
  *it_io = it_out;
  *rel_out = rel_last;
  return rc_out;
}

int ds__bsr_bicgstab(dsBlockSparse* A, int trans, const dsReal* b, dsReal* x, dsReal tol, int maxit, int* iters,
                     dsReal* resid) {
  void (*mv)(const dsBlockSparse*, const dsReal*, dsReal*) = trans ? ds__bsr_matvec_t : ds__bsr_matvec;
  const size_t len = 3 * (size_t)A->n;
  dsReal *r = A->work, *rh = r + len, *p = rh + len, *v = p + len, *t = v + len + len;
  int it = 0, rc = 1;
  dsReal rel = 0;
  for (int i = 0; i < A->n && !A->chol; i++)
    if (dsu_mat3_inv(A->dinv + 9 * (size_t)i, A->val + 9 * (size_t)A->diag[i]) == 0) {
      rc = DS_ERR_DIVERGED;
      goto done;
    }
  const dsReal bn = dsu_sqrt(dot(A, b, b, len));
  if (!finite_r(bn)) {
    rc = DS_ERR_DIVERGED;
    goto done;
  }
  if (bn == 0) {
    memset(x, 0, sizeof(dsReal) * len);
    rc = 0;
    goto done;
  }
  int x0 = all_zero(x, len);
restart: /* from the true residual of x (at the start, and when the recurrence's r drifted from it) */
  if (x0) memset(t, 0, sizeof(dsReal) * len);
  else mv(A, x, t);
  x0 = 0;
  for (size_t k = 0; k < len; k++) {
    r[k] = b[k] - t[k];
    rh[k] = r[k];
    p[k] = v[k] = 0;
  }
  rc = bicgstab_team(A, trans, x, tol, maxit, bn, &it, &rel);
  if (rc == 0 && it > 0) { /* the recurrence's r drifts from b - A^T x: confirm with the true residual */
    mv(A, x, t);
    for (size_t k = 0; k < len; k++) r[k] = b[k] - t[k];
    rel = dsu_sqrt(dot(A, r, r, len)) / bn;
    if (!(rel <= tol)) {
      rc = finite_r(rel) ? 1 : DS_ERR_DIVERGED;
      if (rc == 1 && it < maxit) goto restart;
    }
  }
done:
  if (iters) *iters = it;
  if (resid) *resid = rel;
  return rc;
}

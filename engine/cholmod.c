/* A sparse LDL^T factorisation of the symmetric part of a block-sparse
 * Newton matrix from SuiteSparse CHOLMOD (optional: DS_HAVE_CHOLMOD), the
 * preconditioner of an implicit step's BiCGSTAB solves (engine/sparse.h).
 *
 * What is factorised. J = M + h Kv + h^2 Kx is not symmetric in general
 * (x-dependent damping, sliding friction), so the factor is of
 *   S = (J + J^T) / 2,
 * which is J itself where J is symmetric and close to it elsewhere: with
 * S^{-1} as the preconditioner, BiCGSTAB on J (Newton) and on J^T (the
 * adjoint; S is also the symmetric part of J^T) needs a few iterations at
 * most instead of tens with block-Jacobi. S may be indefinite (cloth in
 * compression, tets near inversion): LDL^T factorises it unless a pivot is
 * exactly zero, and the preconditioner needs no definiteness. A zero
 * pivot or a non-finite entry leaves the factor unusable (ds__chol_factor
 * returns 1) and the caller falls back to block-Jacobi.
 *
 * Cost. The pattern of S is the element incidence (fixed per model), so
 * the fill-reducing ordering (AMD) and the symbolic factorisation are done
 * once per model data (ds__chol_create); each factorisation is numeric
 * only, into the same storage. ds__chol_create also factorises and solves
 * once with an identity matrix so that every buffer CHOLMOD keeps (the
 * numeric factor, its workspace, the solve's dense vectors) exists before
 * the first step: factorising and solving allocate nothing afterwards.
 *
 * Determinism. The simplicial factorisation and triangular solves are
 * serial and call no BLAS, so they give the same bits on any thread count
 * (the supernodal one would call a BLAS whose threading is not ours).
 *
 * Storage: the lower triangle of S in compressed columns, scalar
 * (3 n rows), rows ascending within a column. Column 3 j + c holds the
 * entries (3 i + r, 3 j + c) of the blocks (i, j), i >= j (r >= c on the
 * diagonal block); since the block pattern is symmetric, the blocks (i, j)
 * with i >= j are the transposes tr[b] of row j's blocks b = (j, i). Each
 * entry is 0.5 (A_(i,j)[r][c] + A_(j,i)[c][r]): two offsets into A->val
 * per entry, kept from the pattern build. CHOLMOD is double only: a
 * single-precision build converts. Internal (not installed). */
#include "config.h"

#include "engine/sparse.h"

#include <string.h>

#include "base/internal.h"

#ifdef DS_HAVE_CHOLMOD
#  include <cholmod.h>

struct dsChol {
  cholmod_common c;
  cholmod_sparse* S; /* lower triangle of (A + A^T) / 2 */
  cholmod_factor* L; /* its LDL^T, symbolic from the pattern, numeric per ds__chol_factor */
  cholmod_dense *B, *X, *Y, *E; /* right-hand side, solution, solve workspace */
  size_t* off; /* 2 per entry of S: offsets of A_(i,j)[r][c] and A_(j,i)[c][r] in A->val */
  int n3;
};

int ds__chol_available(void) { return 1; }

void ds__chol_free(dsChol* ch) {
  if (!ch) return;
  cholmod_free_dense(&ch->B, &ch->c);
  cholmod_free_dense(&ch->X, &ch->c);
  cholmod_free_dense(&ch->Y, &ch->c);
  cholmod_free_dense(&ch->E, &ch->c);
  cholmod_free_factor(&ch->L, &ch->c);
  cholmod_free_sparse(&ch->S, &ch->c);
  cholmod_finish(&ch->c);
  ds__free(ch->off);
  ds__free(ch);
}

int ds__chol_create(const dsBlockSparse* A, dsChol** out) {
  *out = NULL;
  const int n = A->n, n3 = 3 * n;
  /* entries of the lower triangle: 6 per diagonal block, 9 per block below it */
  size_t nnz = 0;
  for (int j = 0; j < n; j++)
    for (int b = A->diag[j]; b < A->row_start[j + 1]; b++) nnz += b == A->diag[j] ? 6 : 9;
  dsChol* ch = (dsChol*)ds__calloc(1, sizeof *ch);
  if (!ch) return DS_ERR_NOMEM;
  ch->n3 = n3;
  if (!cholmod_start(&ch->c)) {
    ds__free(ch);
    return DS_ERR_NOMEM;
  }
  ch->c.print = 0; /* the engine never prints: failures come back as codes */
  ch->c.error_handler = NULL;
  ch->c.supernodal = CHOLMOD_SIMPLICIAL; /* serial, no BLAS: bitwise across threads */
  ch->c.final_ll = 0;                    /* LDL^T: S may be indefinite */
  ch->c.nmethods = 1;
  ch->c.method[0].ordering = CHOLMOD_AMD;
  ch->c.postorder = 1;
  ch->off = (size_t*)ds__malloc(sizeof(size_t) * 2 * (nnz ? nnz : 1));
  ch->S = cholmod_allocate_sparse((size_t)n3, (size_t)n3, nnz, 1, 1, -1, CHOLMOD_REAL, &ch->c);
  ch->B = cholmod_zeros((size_t)n3, 1, CHOLMOD_REAL, &ch->c);
  if (!ch->off || !ch->S || !ch->B) {
    ds__chol_free(ch);
    return DS_ERR_NOMEM;
  }
  int* cp = (int*)ch->S->p;
  int* ri = (int*)ch->S->i;
  size_t k = 0;
  for (int j = 0; j < n; j++)
    for (int c = 0; c < 3; c++) {
      cp[3 * j + c] = (int)k;
      /* row j's blocks b = (j, i), i >= j, ascending i: (i, j) is tr[b] */
      for (int b = A->diag[j]; b < A->row_start[j + 1]; b++) {
        const int i = A->col[b];
        for (int r = i == j ? c : 0; r < 3; r++) {
          ri[k] = 3 * i + r;
          ch->off[2 * k] = 9 * (size_t)A->tr[b] + 3 * (size_t)r + (size_t)c;
          ch->off[2 * k + 1] = 9 * (size_t)b + 3 * (size_t)c + (size_t)r;
          k++;
        }
      }
    }
  cp[n3] = (int)k;
  ch->L = cholmod_analyze(ch->S, &ch->c);
  if (!ch->L || ch->c.status < CHOLMOD_OK) {
    ds__chol_free(ch);
    return DS_ERR_NOMEM;
  }
  /* factorise and solve an identity once: every buffer exists from here on */
  double* sx = (double*)ch->S->x;
  memset(sx, 0, sizeof(double) * (k ? k : 1));
  for (int col = 0; col < n3; col++) sx[cp[col]] = 1; /* the first entry of a column is its diagonal */
  if (!cholmod_factorize(ch->S, ch->L, &ch->c) ||
      !cholmod_solve2(CHOLMOD_A, ch->L, ch->B, NULL, &ch->X, NULL, &ch->Y, &ch->E, &ch->c)) {
    ds__chol_free(ch);
    return DS_ERR_NOMEM;
  }
  *out = ch;
  return 0;
}

int ds__chol_factor(dsChol* ch, const dsBlockSparse* A) {
  double* sx = (double*)ch->S->x;
  const size_t nnz = (size_t)((int*)ch->S->p)[ch->n3];
  const dsReal* v = A->val;
  for (size_t e = 0; e < nnz; e++) {
    const double s = 0.5 * ((double)v[ch->off[2 * e]] + (double)v[ch->off[2 * e + 1]]);
    if (!(s - s == 0)) return 1;
    sx[e] = s;
  }
  ch->c.status = CHOLMOD_OK;
  if (!cholmod_factorize(ch->S, ch->L, &ch->c)) return 1;
  /* status NOT_POSDEF from LDL^T: a zero pivot at column L->minor */
  return ch->c.status == CHOLMOD_OK && ch->L->minor == ch->L->n ? 0 : 1;
}

void ds__chol_solve(dsChol* ch, const dsReal* b, dsReal* x) {
  double* bx = (double*)ch->B->x;
  for (int k = 0; k < ch->n3; k++) bx[k] = (double)b[k];
  cholmod_solve2(CHOLMOD_A, ch->L, ch->B, NULL, &ch->X, NULL, &ch->Y, &ch->E, &ch->c);
  const double* xx = (const double*)ch->X->x;
  for (int k = 0; k < ch->n3; k++) x[k] = (dsReal)xx[k];
}

#else /* !DS_HAVE_CHOLMOD: block-Jacobi everywhere */

int ds__chol_available(void) { return 0; }
int ds__chol_create(const dsBlockSparse* A, dsChol** out) {
  (void)A;
  *out = NULL;
  return DS_ERR_UNSUPPORTED;
}
void ds__chol_free(dsChol* ch) { (void)ch; }
int ds__chol_factor(dsChol* ch, const dsBlockSparse* A) {
  (void)ch;
  (void)A;
  return 1;
}
void ds__chol_solve(dsChol* ch, const dsReal* b, dsReal* x) {
  (void)ch;
  (void)b;
  (void)x;
}

#endif

/* Block-sparse matrices with 3 x 3 blocks over a model's particles, for
 * the Newton systems of an implicit step (issue 31): the pattern from the
 * element incidence of the force description (engine/forces.h), assembly
 * of A = M + h Kv + h^2 Kx from the element Jacobians, A x, and a
 * conjugate-gradient solve with a block-Jacobi preconditioner.
 *
 * Storage: block CSR of the full pattern (both triangles): row i holds the
 * blocks (i, j) for every particle j that shares an element with i (and
 * (i, i)), columns ascending; val[9 b + 3 r + c] is entry (r, c) of block
 * b. A symmetric matrix stores both (i, j) and (j, i), so A x is a gather
 * per row (no atomics, no scatter) like the engine's force gather.
 *
 * Assembly is a gather in a fixed order, whatever the thread count:
 * (1) every element with a Jacobian (ds__force_jac) writes its
 * h Kv + h^2 Kx into its own place in jk (and ground contact its 3 x 3 per
 * particle): one array, so the gather reads each element once; (2) each
 * block sums its sources in the order the pattern
 * builder listed them: the mass, then the elements in list order (rows of
 * DS_FORCE_MODELS, elements ascending, vertex pairs in element order),
 * then contact. Dot products in the solver sum fixed chunks of
 * DS__BSR_CHUNK reals (BiCGSTAB's: DS__BSR_TROWS particles) in parallel
 * and the chunk sums serially, so the solve is bitwise the same on any
 * number of threads.
 *
 * Fixed particles (mass 0) get identity rows and columns (their blocks
 * (i, j), (j, i) for j != i are zero): a Dirichlet condition that keeps A
 * SPD and leaves the right-hand side's entry as the solution's.
 *
 * The pattern, the sources' offsets and every buffer are built once by
 * ds__bsr_create (per model data); an assembly only refills values, and
 * assembly, products and solves allocate nothing. Internal (not
 * installed). */
#ifndef DSIM_ENGINE_SPARSE_H
#define DSIM_ENGINE_SPARSE_H

#include <stddef.h>

#include "dsim/engine.h"

/* reals per chunk of the solver's fixed-order sums */
#define DS__BSR_CHUNK 1024
/* particles per chunk of BiCGSTAB's sums (and of its threads' shares) */
#define DS__BSR_TROWS 16
/* zeros after val's and valc's last block: the products load a block's
 * rows (columns) four reals at a time */
#define DS__BSR_PAD 1

typedef struct dsChol dsChol;

typedef struct dsBlockSparse {
  int n;          /* block rows (particles) */
  int nnzb;       /* stored blocks */
  int* row_start; /* n + 1: blocks of row i are row_start[i] .. row_start[i+1]-1 */
  int* col;       /* nnzb: block column, ascending within a row */
  int* diag;      /* n: index of block (i, i) */
  dsReal* val;    /* nnzb x 9, row-major blocks (and DS__BSR_PAD zeros) */
  /* the same blocks column-major (valc[9 b + 3 c + r] = val[9 b + 3 r + c]),
   * written beside val by ds__bsr_assemble for A x's vector kernel;
   * valc_ok: valc holds val's values (0 after create: a caller that fills
   * val itself gets the scalar product) */
  dsReal* valc;
  int valc_ok;
  /* assembly sources: block b sums src[src_start[b] .. src_start[b+1]-1],
   * each an offset into jk of the 3 x 3 sub-block's first entry, whose
   * rows are src_ld[s] reals apart (the element's 3 nvert) */
  int* src_start;
  size_t* src;
  unsigned char* src_ld;
  size_t njac;    /* reals in jk */
  dsReal* jk;     /* element h Kv + h^2 Kx, then contact's 9 per particle */
  size_t jrow[16]; /* first real of each force row's elements in jk (DS__NFORCE <= 16) */
  size_t jcontact; /* first real of contact's blocks; (size_t)-1: no ground */
  int* tr;        /* nnzb: index of block (j, i) for block b = (i, j) (the pattern is symmetric) */
  dsReal* dinv;   /* n x 9: inverses of the diagonal blocks (preconditioner) */
  dsReal* work;   /* 8 x 3n: PCG's r, z, p, q; BiCGSTAB's r, rhat, p, v, s, t, y, z */
  dsReal* part;   /* chunk sums */
  dsReal* tpart;  /* BiCGSTAB's chunk sums: 4 x its chunks of DS__BSR_TROWS particles */
  /* BiCGSTAB's preconditioner: when chol is not NULL, the LDL^T of
   * (A + A^T) / 2 (ds__chol_factor of the current values) in place of the
   * inverses of the diagonal blocks; not owned */
  dsChol* chol;
} dsBlockSparse;

/* Vertices per element and the vertex lists of force row k's elements,
 * as its Jacobian (ds__force_jac[k]) orders them: the row's own, or for an
 * `into` row, which owns no slots (aero), those of the row it adds into
 * (aero's element e is triangle e). */
int ds__bsr_elem_nvert(int k);
/* Upper bounds of m's pattern (blocks), the assembly's sources and its
 * element Jacobians' reals, without building them: the element pairs as if
 * no two elements shared a vertex pair. */
void ds__bsr_bounds(const dsModel* m, size_t* nnzb, size_t* nsrc, size_t* njac);
const int* ds__bsr_elem_idx(int k, const dsModel* m);

/* Pattern of m (its element rows that have a Jacobian, and the diagonal)
 * and every buffer the other functions use. Returns 0, DS_ERR_NOMEM, or
 * DS_ERR_RANGE when the model is too large for the int block indices. */
int ds__bsr_create(const dsModel* m, dsBlockSparse** out);
void ds__bsr_free(dsBlockSparse* A);

/* A = M + h Kv + h^2 Kx at positions x, velocities v (nparticle x 3) and
 * activations act (m->nact, laid out as dsData.act; NULL: all 0). With
 * projected != 0 every element's Kx and Kv (and contact's) is replaced by
 * the PSD projection of its symmetric part first (ds__sym_project_psd;
 * the spring's Kx by its closed form): A is then symmetric positive
 * definite where every particle has mass. With projected == 0, A holds the
 * exact Jacobians, not symmetric in general (damping, friction). */
void ds__bsr_assemble(dsBlockSparse* A, const dsModel* m, const dsReal* x, const dsReal* v, const dsReal* act,
                      dsReal h, int projected);

/* y = A x (3n each; y must not alias x). */
void ds__bsr_matvec(const dsBlockSparse* A, const dsReal* x, dsReal* y);

/* Preconditioned conjugate gradients on A x = b (A symmetric positive
 * definite: assembled with projected != 0), x the initial guess on entry
 * and the solution on return; the preconditioner is the inverse of A's
 * diagonal 3 x 3 blocks. Stops when |b - A x| <= tol |b| or after maxit
 * iterations. *iters (may be NULL) gets the iterations, *resid (may be
 * NULL) the final |b - A x| / |b| (0 for b = 0, where x = 0). Returns 0
 * when converged, 1 when maxit was reached first, DS_ERR_DIVERGED when a
 * curvature p.A p <= 0 or a non-finite value shows A is not SPD. */
int ds__bsr_pcg(dsBlockSparse* A, const dsReal* b, dsReal* x, dsReal tol, int maxit, int* iters, dsReal* resid);

/* y = A^T x (3n each; y must not alias x): row i of A^T gathers the
 * transposed blocks (j, i) through tr, so no scatter and the same bits on
 * any thread count. */
void ds__bsr_matvec_t(const dsBlockSparse* A, const dsReal* x, dsReal* y);

/* a . b over len reals in fixed chunks (DS__BSR_CHUNK) whose sums are
 * added in order: the same bits on any thread count. */
dsReal ds__bsr_dot(const dsBlockSparse* A, const dsReal* a, const dsReal* b, size_t len);

/* BiCGSTAB (van der Vorst 1992) on B x = b, B = A (trans 0) or A^T
 * (trans 1), for a general (unsymmetric, possibly indefinite) A,
 * right-preconditioned by the inverses of B's diagonal blocks (or, with
 * A->chol set, by the factor of (A + A^T) / 2, which is also B's
 * symmetric part): the
 * adjoint solve of an implicit step (A^T: its exact Jacobian is not
 * symmetric when damping depends on positions or friction slides) and
 * Newton's exact-Jacobian fallback (A). x: initial guess on entry,
 * solution on return. Stops when |b - B x| <= tol |b| (the true residual,
 * checked at the end; a drifted recurrence restarts from it) or after
 * maxit iterations. Returns 0 when converged, 1 at maxit, DS_ERR_DIVERGED
 * on a breakdown (rho, rhat.v or omega 0), a non-finite value or a
 * singular diagonal block. *iters, *resid as ds__bsr_pcg. Uses work. */
int ds__bsr_bicgstab(dsBlockSparse* A, int trans, const dsReal* b, dsReal* x, dsReal tol, int maxit, int* iters,
                     dsReal* resid);

/* Sparse LDL^T of S = (A + A^T) / 2 from SuiteSparse CHOLMOD
 * (engine/cholmod.c has the details): the ordering and symbolic
 * factorisation once per pattern (create), numeric factorisations and
 * solves that allocate nothing and give the same bits on any thread count.
 * ds__chol_available: 1 when the build has CHOLMOD. ds__chol_create:
 * 0, DS_ERR_NOMEM, or DS_ERR_UNSUPPORTED without CHOLMOD. ds__chol_factor:
 * S from A's current values; 0, or 1 when S has a zero pivot or a
 * non-finite entry (the factor is then unusable). ds__chol_solve: x =
 * S^{-1} b (x may alias b). */
int ds__chol_available(void);
int ds__chol_create(const dsBlockSparse* A, dsChol** out);
void ds__chol_free(dsChol* ch);
int ds__chol_factor(dsChol* ch, const dsBlockSparse* A);
void ds__chol_solve(dsChol* ch, const dsReal* b, dsReal* x);

#endif

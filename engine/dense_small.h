/* Small dense symmetric matrices (n <= DS__DENSE_MAXN, row-major n x n):
 * the eigen-decomposition and the PSD projection that Newton's method needs
 * for element Jacobians (engine/forces.h, "Jacobians").
 *
 * Eigen-decomposition: cyclic Jacobi. Each sweep visits every (p, q),
 * p < q, in row order and zeroes A_pq with the rotation
 *   theta = (A_qq - A_pp) / (2 A_pq),  t = sgn(theta) / (|theta| + sqrt(theta^2 + 1)),
 *   c = 1 / sqrt(t^2 + 1),  s = t c
 * (the smaller of the two angles, |t| <= 1, which keeps the rotation
 * stable: Golub & Van Loan 8.5). A <- J^T A J and V <- V J; the
 * off-diagonal mass falls quadratically once it is small, so a 12 x 12
 * element block takes 6-10 sweeps in double. It stops when the
 * off-diagonal sum of squares is below (eps |A|_F)^2, or after
 * DS__JACOBI_SWEEPS sweeps. No data-dependent allocation, no branches on
 * thread count: the same input gives the same bits anywhere.
 *
 * Compiles as C and as CUDA C++ (DS_HD); stack use ~3 n^2 reals. */
#ifndef DSIM_ENGINE_DENSE_SMALL_H
#define DSIM_ENGINE_DENSE_SMALL_H

#include "engine/dsmath.h"

/* the largest element block: 4 vertices x 3 (bend, tet) */
#define DS__DENSE_MAXN 12
/* sweeps cap: Jacobi converges in well under 20 sweeps for n <= 12 */
#define DS__JACOBI_SWEEPS 30

#if DS_SINGLE
#  define DS__JACOBI_EPS ((dsReal)1.2e-7f)
#else
#  define DS__JACOBI_EPS ((dsReal)2.3e-16)
#endif

/* Eigen-decomposition of the symmetric n x n matrix A (only read):
 * A = V diag(lam) V^T, V orthogonal with the eigenvectors as columns
 * (V[n*i + k]: component i of eigenvector k). Eigenvalues are not sorted.
 * Returns the sweeps used (DS__JACOBI_SWEEPS + 1: not converged). */
DS_HD DS_INLINE int ds__sym_eig(int n, const dsReal* A, dsReal* lam, dsReal* V) {
  dsReal a[DS__DENSE_MAXN * DS__DENSE_MAXN];
  dsReal fro = 0;
  for (int k = 0; k < n * n; k++) {
    a[k] = A[k];
    fro += A[k] * A[k];
  }
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) V[n * i + j] = i == j ? 1 : 0;
  const dsReal tol = DS__JACOBI_EPS * DS__JACOBI_EPS * fro;
  int sweep = 0;
  for (; sweep < DS__JACOBI_SWEEPS; sweep++) {
    dsReal off = 0;
    for (int p = 0; p < n; p++)
      for (int q = p + 1; q < n; q++) off += 2 * a[n * p + q] * a[n * p + q];
    if (!(off > tol)) break;
    for (int p = 0; p < n; p++)
      for (int q = p + 1; q < n; q++) {
        const dsReal apq = a[n * p + q];
        if (apq == 0) continue;
        const dsReal th = (a[n * q + q] - a[n * p + p]) / (2 * apq);
        dsReal t = 1 / (dsu_fabs(th) + dsu_sqrt(th * th + 1));
        if (th < 0) t = -t;
        const dsReal c = 1 / dsu_sqrt(t * t + 1), s = t * c;
        /* A <- J^T A J: columns p, q, then rows p, q */
        for (int k = 0; k < n; k++) {
          const dsReal akp = a[n * k + p], akq = a[n * k + q];
          a[n * k + p] = c * akp - s * akq;
          a[n * k + q] = s * akp + c * akq;
        }
        for (int k = 0; k < n; k++) {
          const dsReal apk = a[n * p + k], aqk = a[n * q + k];
          a[n * p + k] = c * apk - s * aqk;
          a[n * q + k] = s * apk + c * aqk;
        }
        a[n * p + q] = 0;
        a[n * q + p] = 0;
        for (int k = 0; k < n; k++) {
          const dsReal vkp = V[n * k + p], vkq = V[n * k + q];
          V[n * k + p] = c * vkp - s * vkq;
          V[n * k + q] = s * vkp + c * vkq;
        }
      }
  }
  for (int i = 0; i < n; i++) lam[i] = a[n * i + i];
  return sweep < DS__JACOBI_SWEEPS ? sweep : DS__JACOBI_SWEEPS + 1;
}

/* K <- the nearest (Frobenius) positive semi-definite matrix to the
 * symmetric part of K: S = (K + K^T)/2 = V diag(lam) V^T, then
 * K = V diag(max(lam, 0)) V^T. An eigenvalue counts as negative below
 * -4 n eps |S|_F, the solver's rounding: element blocks are singular
 * (translations move no force), so a PSD block's zero eigenvalues come out
 * as +-1e-16 |S| and must not make it "indefinite". When none is negative
 * K is set to S exactly (a symmetric PSD K is left bit for bit as it is).
 * Returns the number of eigenvalues clamped. */
DS_HD DS_INLINE int ds__sym_project_psd(int n, dsReal* K) {
  /* S zeroed: GCC 12 for aarch64 at -O2 cannot see that the loop fills
     the n x n the solver reads (-Wmaybe-uninitialized) */
  dsReal S[DS__DENSE_MAXN * DS__DENSE_MAXN] = {0}, V[DS__DENSE_MAXN * DS__DENSE_MAXN], lam[DS__DENSE_MAXN];
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) S[n * i + j] = i == j ? K[n * i + j] : (K[n * i + j] + K[n * j + i]) / 2;
  ds__sym_eig(n, S, lam, V);
  dsReal fro = 0;
  for (int k = 0; k < n * n; k++) fro += S[k] * S[k];
  const dsReal tol = 4 * n * DS__JACOBI_EPS * dsu_sqrt(fro);
  int neg = 0;
  for (int k = 0; k < n; k++)
    if (lam[k] < -tol) {
      lam[k] = 0;
      neg++;
    }
  if (neg == 0) {
    for (int k = 0; k < n * n; k++) K[k] = S[k];
    return 0;
  }
  for (int i = 0; i < n; i++)
    for (int j = i; j < n; j++) {
      dsReal s = 0;
      for (int k = 0; k < n; k++) s += V[n * i + k] * lam[k] * V[n * j + k];
      K[n * i + j] = s;
      K[n * j + i] = s;
    }
  return neg;
}

/* K (3 nv x 3 nv) = S^T Ky S for the edge map S of an element whose local
 * "edge" variables are y_a = x_{a+1} - x_0, a < nv - 1 (Ky: 3 (nv-1)
 * square). Block by block: K_{a+1,b+1} = Ky_ab, K_{a+1,0} = -sum_b Ky_ab,
 * K_{0,b+1} = -sum_a Ky_ab, K_00 = sum_ab Ky_ab. nv <= 4. */
DS_HD DS_INLINE void ds__jac_from_edges(int nv, const dsReal* Ky, dsReal* K) {
  const int ny = 3 * (nv - 1), n = 3 * nv;
  for (int k = 0; k < n * n; k++) K[k] = 0;
  for (int i = 0; i < ny; i++)
    for (int j = 0; j < ny; j++) {
      const dsReal y = Ky[ny * i + j];
      const int ci = i % 3, cj = j % 3;
      K[n * (3 + i) + 3 + j] = y;
      K[n * (3 + i) + cj] -= y;
      K[n * ci + 3 + j] -= y;
      K[n * ci + cj] += y;
    }
}

#endif

/* Small inline math for per-element kernels: scalar functions that follow
 * dsReal, 3-vectors (dsReal[3]), 3x3 matrices (dsReal[9], row-major) and
 * 2x2 matrices (dsReal[4], row-major). Result first, as in
 * dsu_add3(res, a, b). Every helper is safe when res aliases an input.
 *
 * A nonlinear helper used by a force has its adjoint next to it, named
 * *_bwd: it takes the forward inputs and the adjoint of the result and
 * ACCUMULATES (+=) into the adjoints of the inputs.
 *
 * Compiles as C (CPU engine) and as CUDA C++ (DS_HD). */
#ifndef DSIM_ENGINE_DSMATH_H
#define DSIM_ENGINE_DSMATH_H

#include <math.h>

#include "dsim/base.h"
#include "base/hd.h"

/* ---- scalar functions following dsReal ---------------------------------- */
#if DS_SINGLE
#  define dsu_sqrt sqrtf
#  define dsu_fabs fabsf
#  define dsu_atan2 atan2f
#  define dsu_acos acosf
#  define dsu_asin asinf
#  define dsu_exp expf
#  define dsu_log logf
#  define dsu_fmin fminf
#  define dsu_fmax fmaxf
#else
#  define dsu_sqrt sqrt
#  define dsu_fabs fabs
#  define dsu_atan2 atan2
#  define dsu_acos acos
#  define dsu_asin asin
#  define dsu_exp exp
#  define dsu_log log
#  define dsu_fmin fmin
#  define dsu_fmax fmax
#endif

/* Lengths and areas below this are treated as zero by the kernels (the
 * element is degenerate: zero force, zero gradient). Squared-length guard
 * for a length of ~1e-150 m in double, ~1e-18 m in float. */
#if DS_SINGLE
#  define DSU_TINY2 ((dsReal)1e-36f)
#else
#  define DSU_TINY2 ((dsReal)1e-300)
#endif

/* ---- 3-vectors ------------------------------------------------------------ */

// res = 0
DS_HD DS_INLINE void dsu_zero3(dsReal res[3]) { res[0] = 0; res[1] = 0; res[2] = 0; }

// res = a
DS_HD DS_INLINE void dsu_copy3(dsReal res[3], const dsReal a[3]) {
  res[0] = a[0]; res[1] = a[1]; res[2] = a[2];
}

// res = a + b
DS_HD DS_INLINE void dsu_add3(dsReal res[3], const dsReal a[3], const dsReal b[3]) {
  res[0] = a[0] + b[0]; res[1] = a[1] + b[1]; res[2] = a[2] + b[2];
}

// res = a - b
DS_HD DS_INLINE void dsu_sub3(dsReal res[3], const dsReal a[3], const dsReal b[3]) {
  res[0] = a[0] - b[0]; res[1] = a[1] - b[1]; res[2] = a[2] - b[2];
}

// res = s * a
DS_HD DS_INLINE void dsu_scl3(dsReal res[3], const dsReal a[3], dsReal s) {
  res[0] = s * a[0]; res[1] = s * a[1]; res[2] = s * a[2];
}

// res = a + s * b
DS_HD DS_INLINE void dsu_addscl3(dsReal res[3], const dsReal a[3], const dsReal b[3], dsReal s) {
  res[0] = a[0] + s * b[0]; res[1] = a[1] + s * b[1]; res[2] = a[2] + s * b[2];
}

// res += a
DS_HD DS_INLINE void dsu_addto3(dsReal res[3], const dsReal a[3]) {
  res[0] += a[0]; res[1] += a[1]; res[2] += a[2];
}

// res -= a
DS_HD DS_INLINE void dsu_subfrom3(dsReal res[3], const dsReal a[3]) {
  res[0] -= a[0]; res[1] -= a[1]; res[2] -= a[2];
}

// res += s * a
DS_HD DS_INLINE void dsu_addtoscl3(dsReal res[3], const dsReal a[3], dsReal s) {
  res[0] += s * a[0]; res[1] += s * a[1]; res[2] += s * a[2];
}

// return a . b
DS_HD DS_INLINE dsReal dsu_dot3(const dsReal a[3], const dsReal b[3]) {
  return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}

// res = a x b
DS_HD DS_INLINE void dsu_cross3(dsReal res[3], const dsReal a[3], const dsReal b[3]) {
  dsReal r0 = a[1] * b[2] - a[2] * b[1];
  dsReal r1 = a[2] * b[0] - a[0] * b[2];
  dsReal r2 = a[0] * b[1] - a[1] * b[0];
  res[0] = r0; res[1] = r1; res[2] = r2;
}

// adjoint of res = a x b: adj_a += b x adj_res, adj_b += adj_res x a
// (from g.(a x b) = a.(b x g) = b.(g x a))
DS_HD DS_INLINE void dsu_cross3_bwd(const dsReal a[3], const dsReal b[3], const dsReal adj_res[3],
                                    dsReal adj_a[3], dsReal adj_b[3]) {
  dsReal ta[3], tb[3];
  dsu_cross3(ta, b, adj_res);
  dsu_cross3(tb, adj_res, a);
  dsu_addto3(adj_a, ta);
  dsu_addto3(adj_b, tb);
}

// return |a|^2
DS_HD DS_INLINE dsReal dsu_norm3sq(const dsReal a[3]) { return dsu_dot3(a, a); }

// return |a|
DS_HD DS_INLINE dsReal dsu_norm3(const dsReal a[3]) { return dsu_sqrt(dsu_dot3(a, a)); }

// res = a / |a| and return |a|; res = 0 (and return 0) when |a|^2 <= DSU_TINY2
DS_HD DS_INLINE dsReal dsu_normalize3(dsReal res[3], const dsReal a[3]) {
  dsReal l2 = dsu_dot3(a, a);
  if (!(l2 > DSU_TINY2)) {
    dsu_zero3(res);
    return 0;
  }
  dsReal l = dsu_sqrt(l2);
  dsu_scl3(res, a, 1 / l);
  return l;
}

// adjoint of u = a / |a| (given u and l = |a| from dsu_normalize3):
// adj_a += (adj_u - u (u . adj_u)) / l; nothing when l = 0 (degenerate: zero gradient)
DS_HD DS_INLINE void dsu_normalize3_bwd(const dsReal u[3], dsReal l, const dsReal adj_u[3],
                                        dsReal adj_a[3]) {
  if (!(l > 0)) return;
  dsReal il = 1 / l, ud = dsu_dot3(u, adj_u);
  adj_a[0] += (adj_u[0] - u[0] * ud) * il;
  adj_a[1] += (adj_u[1] - u[1] * ud) * il;
  adj_a[2] += (adj_u[2] - u[2] * ud) * il;
}

/* ---- 3x3 matrices (row-major, M[3*i + j]) --------------------------------- */

// res = A B
DS_HD DS_INLINE void dsu_mat3_mul(dsReal res[9], const dsReal A[9], const dsReal B[9]) {
  dsReal t[9];
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++)
      t[3 * i + j] = A[3 * i] * B[j] + A[3 * i + 1] * B[3 + j] + A[3 * i + 2] * B[6 + j];
  for (int k = 0; k < 9; k++) res[k] = t[k];
}

// res = A B^T
DS_HD DS_INLINE void dsu_mat3_mulT(dsReal res[9], const dsReal A[9], const dsReal B[9]) {
  dsReal t[9];
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++)
      t[3 * i + j] = A[3 * i] * B[3 * j] + A[3 * i + 1] * B[3 * j + 1] + A[3 * i + 2] * B[3 * j + 2];
  for (int k = 0; k < 9; k++) res[k] = t[k];
}

// res = A^T
DS_HD DS_INLINE void dsu_mat3_transpose(dsReal res[9], const dsReal A[9]) {
  dsReal t[9] = {A[0], A[3], A[6], A[1], A[4], A[7], A[2], A[5], A[8]};
  for (int k = 0; k < 9; k++) res[k] = t[k];
}

// return det A
DS_HD DS_INLINE dsReal dsu_mat3_det(const dsReal A[9]) {
  return A[0] * (A[4] * A[8] - A[5] * A[7]) - A[1] * (A[3] * A[8] - A[5] * A[6]) +
         A[2] * (A[3] * A[7] - A[4] * A[6]);
}

// res = A^-1 and return det A; res untouched (and return 0) when det A == 0
DS_HD DS_INLINE dsReal dsu_mat3_inv(dsReal res[9], const dsReal A[9]) {
  dsReal c[9] = {A[4] * A[8] - A[5] * A[7], A[2] * A[7] - A[1] * A[8], A[1] * A[5] - A[2] * A[4],
                 A[5] * A[6] - A[3] * A[8], A[0] * A[8] - A[2] * A[6], A[2] * A[3] - A[0] * A[5],
                 A[3] * A[7] - A[4] * A[6], A[1] * A[6] - A[0] * A[7], A[0] * A[4] - A[1] * A[3]};
  dsReal det = A[0] * c[0] + A[1] * c[3] + A[2] * c[6];
  if (det == 0) return 0;
  dsReal id = 1 / det;
  for (int k = 0; k < 9; k++) res[k] = c[k] * id;
  return det;
}

// return <A, B> = sum_ij A_ij B_ij
DS_HD DS_INLINE dsReal dsu_mat3_ddot(const dsReal A[9], const dsReal B[9]) {
  dsReal s = 0;
  for (int k = 0; k < 9; k++) s += A[k] * B[k];
  return s;
}

/* ---- 2x2 matrices (row-major) --------------------------------------------- */

// return det A
DS_HD DS_INLINE dsReal dsu_mat2_det(const dsReal A[4]) { return A[0] * A[3] - A[1] * A[2]; }

// res = A^-1 and return det A; res untouched (and return 0) when det A == 0
DS_HD DS_INLINE dsReal dsu_mat2_inv(dsReal res[4], const dsReal A[4]) {
  dsReal det = A[0] * A[3] - A[1] * A[2];
  if (det == 0) return 0;
  dsReal id = 1 / det;
  dsReal t0 = A[3] * id, t1 = -A[1] * id, t2 = -A[2] * id, t3 = A[0] * id;
  res[0] = t0; res[1] = t1; res[2] = t2; res[3] = t3;
  return det;
}

#endif

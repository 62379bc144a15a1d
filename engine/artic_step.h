/* The real pass of one articulated step and its reverse mode, for either
 * backend (DS_HD: C for the CPU engine, CUDA C++ for cuda/): the dynamics
 * kernels of engine/artic_dyn.h over R = double, the mass matrix (CRBA),
 * its Cholesky factor and solves, forward(), the reverse pass of
 * engine/artic_rev.h, and the untaped substep, its vector-Jacobian product
 * and the links' poses that the particle engine and the batched engine
 * (engine/artic_model_body.h) run. Every array they touch is reached
 * through the model (dsArticModel) and the scratch (dsArticData, its ws_r),
 * so a device copy of both runs the same code.
 *
 * engine/artic.c includes this, then the complex copy of engine/artic_dyn.h
 * for the tangent sweeps of the reference adjoint (host only: C99 complex
 * numbers). Include once, after config.h. */
#ifndef DSIM_ENGINE_ARTIC_STEP_H
#define DSIM_ENGINE_ARTIC_STEP_H

#include <math.h>
#include <stddef.h>
#include <string.h>

#include "base/cplx.h"
#include "base/hd.h"
#include "engine/artic_priv.h"
#include "engine/force_contact.h"

/* complex-step size: Im(f(x + iH)) = H f'(x) + O(H^3) */
#define DS__ARTIC_H 1e-20

#define R double
#define FN(name) name##_r
#define ARTIC_CPLX 0
#include "engine/artic_dyn.h"
#undef R
#undef FN
#undef ARTIC_CPLX

/* ---- mass matrix, factor, solve ------------------------------------------------------ */

/* M = sum over bodies of S_i^T Ic_i S_j (composite-rigid-body algorithm in
 * world coordinates: the composite inertia of a subtree is the plain sum of
 * its bodies' (m, h, Ib), and every S is already in the world frame, so
 * M[l][k] = S_l . (Ic_i S_k) for dof l on the path from body i to the
 * root), plus the armature on the diagonal. */
DS_HD static void crba(const dsArticModel* m, ws_r* w, double* M) {
  const int nv = m->nv;
  for (int k = 0; k < nv * nv; k++) M[k] = 0;
  for (int i = 0; i < m->nbody; i++) {
    body_r* b = &w->b[i];
    b->cm = b->m;
    for (int k = 0; k < 3; k++) b->ch[k] = b->h[k];
    for (int k = 0; k < 9; k++) b->cIb[k] = b->Ib[k];
  }
  for (int i = m->nbody - 1; i >= 0; i--) {
    const int p = m->parent[i];
    if (p < 0) continue;
    body_r *b = &w->b[i], *pb = &w->b[p];
    pb->cm += b->cm;
    for (int k = 0; k < 3; k++) pb->ch[k] += b->ch[k];
    for (int k = 0; k < 9; k++) pb->cIb[k] += b->cIb[k];
  }
  for (int i = 0; i < m->nbody; i++) {
    const body_r* b = &w->b[i];
    const int nd = ndof_r(m->jtype[i]);
    for (int c = 0; c < nd; c++) {
      double F[6];
      imul_r(F, b->cm, b->ch, b->cIb, b->S + 6 * c);
      const int col = m->vadr[i] + c;
      for (int j = i; j >= 0; j = m->parent[j]) {
        const int ndj = ndof_r(m->jtype[j]);
        if (ndj == 1) { /* hinge, slide: the loop below for one row */
          const int row = m->vadr[j];
          if (row > col) continue;
          const double* Sj = w->b[j].S;
          double s = 0;
          for (int k = 0; k < 6; k++) s += Sj[k] * F[k];
          M[row * nv + col] = s;
          M[col * nv + row] = s;
          continue;
        }
        for (int l = 0; l < ndj; l++) {
          const int row = m->vadr[j] + l;
          if (row > col) continue; /* the lower triangle comes from the symmetric fill */
          double s = 0;
          for (int k = 0; k < 6; k++) s += w->b[j].S[6 * l + k] * F[k];
          M[row * nv + col] = s;
          M[col * nv + row] = s;
        }
      }
    }
  }
  for (int i = 0; i < m->nbody; i++)
    for (int c = 0; c < ndof_r(m->jtype[i]); c++) {
      const int v = m->vadr[i] + c;
      M[v * nv + v] += m->param[m->bp[i].armature];
    }
}

/* The sums below, s - sum_k a_k b_k, run as two interleaved partial sums
 * (even and odd terms, added at the end) so that each is a dependency
 * chain half as long: on these small dense systems the chains' latency,
 * not the arithmetic, bounds the factorisation and the solves. Every
 * variant uses the same order, so the packed and unpacked solves give the
 * same numbers. */
DS_HD DS_INLINE double dot_sub(double s, const double* a, const double* b, int n) { /* s - a . b */
  double o = 0;
  int k = 0;
  for (; k + 1 < n; k += 2) {
    s -= a[k] * b[k];
    o -= a[k + 1] * b[k + 1];
  }
  if (k < n) s -= a[k] * b[k];
  return s + o;
}

/* In-place lower Cholesky M = L L^T; DS_ERR_DIVERGED when not positive definite. */
DS_HD static int cholesky(double* M, int n) {
  for (int j = 0; j < n; j++) {
    const double* Mj = M + (size_t)j * (size_t)n;
    const double s = dot_sub(Mj[j], Mj, Mj, j);
    if (!(s > 0)) return DS_ERR_DIVERGED;
    const double l = sqrt(s);
    M[j * n + j] = l;
    for (int i = j + 1; i < n; i++) M[i * n + j] = dot_sub(M[i * n + j], M + (size_t)i * (size_t)n, Mj, j) / l;
  }
  return 0;
}

DS_HD static void chol_solve(const double* L, int n, double* x) { /* x = (L L^T)^-1 x */
  for (int i = 0; i < n; i++) x[i] = dot_sub(x[i], L + (size_t)i * (size_t)n, x, i) / L[i * n + i];
  for (int i = n - 1; i >= 0; i--) { /* column i of L below the diagonal */
    double s = x[i], o = 0;
    int k = i + 1;
    for (; k + 1 < n; k += 2) {
      s -= L[k * n + i] * x[k];
      o -= L[(k + 1) * n + i] * x[k + 1];
    }
    if (k < n) s -= L[k * n + i] * x[k];
    x[i] = (s + o) / L[i * n + i];
  }
}

/* chol_solve with L's lower triangle packed by rows (row i from i (i + 1) / 2),
 * the same operations in the same order, so the same numbers */
DS_HD static void chol_solve_packed(const double* L, int n, double* x) {
  for (int i = 0; i < n; i++) {
    const double* Li = L + (size_t)i * (size_t)(i + 1) / 2;
    x[i] = dot_sub(x[i], Li, x, i) / Li[i];
  }
  for (int i = n - 1; i >= 0; i--) {
    double s = x[i], o = 0;
    size_t e = (size_t)(i + 1) * (size_t)(i + 2) / 2 + (size_t)i; /* L[k][i], k = i + 1 */
    int k = i + 1;
    for (; k + 1 < n; k += 2) {
      const size_t e1 = e + (size_t)k + 1; /* L[k + 1][i] */
      s -= L[e] * x[k];
      o -= L[e1] * x[k + 1];
      e = e1 + (size_t)k + 2;
    }
    if (k < n) s -= L[e] * x[k];
    x[i] = (s + o) / L[(size_t)i * (size_t)(i + 3) / 2];
  }
}

/* ---- articulated-body algorithm (trees of hinges, slides and fixed joints) ------------ *
 * Featherstone's ABA ("Rigid Body Dynamics Algorithms", ch. 7) in the world
 * coordinates of engine/artic_dyn.h, for a tree whose joints have at most
 * one dof (one column S per joint): O(n) where CRBA + Cholesky is O(n^2) to
 * O(n^3) (a 16-link chain: about a third fewer operations per step). With
 * the spatial inertia I = [[Ib, [h]x], [-[h]x, m 1]] (6 x 6, I V as imul),
 *   pass 1, root first:  c_i = V_i x (S_i qd_i),  P_i = I_i V_i,
 *                        pb_i = V_i x* P_i - F_ext,i,  IA_i = I_i,  pA_i = pb_i
 *   pass 2, leaves first: U = IA S,  D = S . U + armature,  u = tau - S . pA,
 *                        IA_p += IA - U U^T / D,  pA_p += pA + (IA - U U^T / D) c + U u / D
 *   pass 3, root first:  a = A_p + c (A above the root: (0, -g)),
 *                        qdd = (u - U . a) / D,  A_i = a + S qdd
 * which solves M qdd = tau - C exactly as the CRBA route does (the same
 * equations of motion; rounding differs). The backward needs M^-1 x: the
 * same passes with no velocity, gravity or bias (solve_aba, from the
 * taped U and D), O(n) again. Then F0_i = I_i A_i + pb_i and F_i the
 * subtree sums: the RNEA's results at qdd that the reverse pass reads. */

/* every joint has at most one dof (else the CRBA route): hinges, slides and
 * fixed joints have as many coordinates as dof, a ball or free joint one
 * more (its quaternion), so this is nq = nv */
DS_HD DS_INLINE int aba_model(const dsArticModel* m) { return m->nq == m->nv; }

/* per-step doubles of the factor tape: U and D per body (ABA) or L packed */
DS_HD DS_INLINE size_t factor_len(const dsArticModel* m) {
  return aba_model(m) ? 7 * (size_t)m->nbody : (size_t)m->nv * (size_t)(m->nv + 1) / 2;
}

/* IA is symmetric: kept as its upper triangle by rows (21 entries); entry
 * 6 r + k of this table is where (r, k) is */
#define DS__ARTIC_SYM6                                                                                          \
  {                                                                                                           \
    0, 1, 2, 3, 4, 5, 1, 6, 7, 8, 9, 10, 2, 7, 11, 12, 13, 14, 3, 8, 12, 15, 16, 17, 4, 9, 13, 16, 18, 19, 5, 10, \
        14, 17, 19, 20                                                                                        \
  }

/* pass 1 (without IA, pA: replay) */
DS_HD static void aba_bias(const dsArticModel* m, ws_r* w, int with_ia) {
  for (int i = 0; i < m->nbody; i++) {
    body_r* b = &w->b[i];
    const int nd = ndof_r(m->jtype[i]);
    double vc[6];
    for (int k = 0; k < 6; k++) {
      vc[k] = nd ? b->S[k] * w->qd[m->vadr[i]] : 0;
      b->c[k] = 0;
      b->pb[k] = 0;
    }
    crm_r(b->c, b->V, vc);
    imul_r(b->P, b->m, b->h, b->Ib, b->V);
    crf_r(b->pb, b->V, b->P);
    for (int k = 0; k < 6; k++) b->pb[k] -= w->fext[6 * i + k];
    if (!with_ia) continue;
    for (int k = 0; k < 6; k++) b->pA[k] = b->pb[k];
    /* [[Ib, [h]x], [-[h]x, m 1]], upper triangle */
    const double* h = b->h;
    const double* J = b->Ib;
    double* IA = b->IA;
    const double up[21] = {J[0], J[1], J[2], 0,    -h[2], h[1], J[4], J[5], h[2], 0,    -h[0],
                           J[8], -h[1], h[0], 0,   b->m,  0,    0,    b->m, 0,    b->m};
    for (int k = 0; k < 21; k++) IA[k] = up[k];
  }
}

/* pass 2; DS_ERR_DIVERGED when a D is not positive */
DS_HD static int aba_inertia(const dsArticModel* m, ws_r* w) {
  static const int SYM6[36] = DS__ARTIC_SYM6;
  static const int ROW6[21] = {0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 4, 4, 5};
  static const int COL6[21] = {0, 1, 2, 3, 4, 5, 1, 2, 3, 4, 5, 2, 3, 4, 5, 3, 4, 5, 4, 5, 5};
  for (int i = m->nbody - 1; i >= 0; i--) {
    body_r* b = &w->b[i];
    double* IA = b->IA;
    if (ndof_r(m->jtype[i])) {
      const double* S = b->S;
      double D = m->param[m->bp[i].armature], sp = 0, Ud[6];
      for (int r = 0; r < 6; r++) {
        double s = 0;
        for (int k = 0; k < 6; k++) s += IA[SYM6[6 * r + k]] * S[k];
        b->U[r] = s;
        D += S[r] * s;
        sp += S[r] * b->pA[r];
      }
      if (!(D > 0)) return DS_ERR_DIVERGED;
      const double u = w->tau[m->vadr[i]] - sp, ud = u / D;
      b->D = D;
      b->uu = u;
      for (int r = 0; r < 6; r++) Ud[r] = b->U[r] / D;
      for (int e = 0; e < 21; e++) IA[e] -= b->U[ROW6[e]] * Ud[COL6[e]];
      for (int r = 0; r < 6; r++) {
        double s = b->pA[r] + b->U[r] * ud;
        for (int k = 0; k < 6; k++) s += IA[SYM6[6 * r + k]] * b->c[k];
        b->pA[r] = s;
      }
    }
    const int p = m->parent[i];
    if (p < 0) continue;
    body_r* pb = &w->b[p];
    for (int k = 0; k < 21; k++) pb->IA[k] += IA[k];
    for (int k = 0; k < 6; k++) pb->pA[k] += b->pA[k];
  }
  return 0;
}

/* pass 3: A of every body; solve = 1: qdd from U, D, u (pass 2), else
 * the given qdd (a replay); forces = 1: then F0 = I A + pb and F the
 * subtree sums (for the adjoint) */
DS_HD static void aba_accel(const dsArticModel* m, ws_r* w, double* qdd, int solve, int forces) {
  const double* g = m->param + m->p_gravity;
  const double a0[6] = {0, 0, 0, -g[0], -g[1], -g[2]};
  for (int i = 0; i < m->nbody; i++) {
    body_r* b = &w->b[i];
    const int p = m->parent[i];
    const double* Ap = p >= 0 ? w->b[p].A : a0;
    for (int k = 0; k < 6; k++) b->A[k] = Ap[k] + b->c[k];
    if (ndof_r(m->jtype[i])) {
      const int v = m->vadr[i];
      if (solve) {
        double s = 0;
        for (int k = 0; k < 6; k++) s += b->U[k] * b->A[k];
        qdd[v] = (b->uu - s) / b->D;
      }
      for (int k = 0; k < 6; k++) b->A[k] += b->S[k] * qdd[v];
    }
    if (!forces) continue;
    double t[6];
    imul_r(t, b->m, b->h, b->Ib, b->A);
    for (int k = 0; k < 6; k++) b->F[k] = b->F0[k] = t[k] + b->pb[k];
  }
  for (int i = m->nbody - 1; i >= 0 && forces; i--) {
    const int p = m->parent[i];
    if (p >= 0)
      for (int k = 0; k < 6; k++) w->b[p].F[k] += w->b[i].F[k];
  }
}

/* x = M^-1 x from each body's U and D (UD: 7 a body, NULL: the bodies'
 * own from the last pass 2) and S; uses the bodies' pA and dA as scratch */
DS_HD static void solve_aba(const dsArticModel* m, ws_r* w, const double* UD, double* x) {
  for (int i = 0; i < m->nbody; i++)
    for (int k = 0; k < 6; k++) w->b[i].pA[k] = 0;
  for (int i = m->nbody - 1; i >= 0; i--) {
    body_r* b = &w->b[i];
    if (ndof_r(m->jtype[i])) {
      const double* U = UD ? UD + 7 * i : b->U;
      const double D = UD ? UD[7 * i + 6] : b->D;
      const int v = m->vadr[i];
      double sp = 0;
      for (int k = 0; k < 6; k++) sp += b->S[k] * b->pA[k];
      const double u = x[v] - sp, ud = u / D;
      x[v] = u;
      for (int k = 0; k < 6; k++) b->pA[k] += U[k] * ud;
    }
    const int p = m->parent[i];
    if (p >= 0)
      for (int k = 0; k < 6; k++) w->b[p].pA[k] += b->pA[k];
  }
  for (int i = 0; i < m->nbody; i++) {
    body_r* b = &w->b[i];
    const int p = m->parent[i];
    for (int k = 0; k < 6; k++) b->dA[k] = p >= 0 ? w->b[p].dA[k] : 0;
    if (!ndof_r(m->jtype[i])) continue;
    const double* U = UD ? UD + 7 * i : b->U;
    const double D = UD ? UD[7 * i + 6] : b->D;
    const int v = m->vadr[i];
    double s = 0;
    for (int k = 0; k < 6; k++) s += U[k] * b->dA[k];
    x[v] = (x[v] - s) / D;
    for (int k = 0; k < 6; k++) b->dA[k] += b->S[k] * x[v];
  }
}

/* x = M^-1 x at the last real pass: the taped factor after a replay, else d->M */
DS_HD static void solve_M(const dsArticModel* m, const dsArticData* d, int n, double* x) {
  if (aba_model(m))
    solve_aba(m, (ws_r*)d->wr, d->Lcur, x);
  else if (d->Lcur)
    chol_solve_packed(d->Lcur, n, x);
  else
    chol_solve(d->M, n, x);
}

/* ---- step ------------------------------------------------------------------------------ */

/* The RNEA's per-body results at the solved qdd from those of the bias pass
 * at qdd = 0 (rnea_r with w->qdd = 0 just before, same kinematics and
 * contact): only A's S qdd term depends on qdd, and linearly, so with
 *   dA_i = dA_parent + S_i qdd_i   (dA = 0 above the root),
 *   A_i += dA_i,  F0_i += I_i dA_i,  F_i = F0_i + sum over children F_c,
 * and P = I V is unchanged. About a third of a second RNEA's work. w->id
 * keeps the bias pass's values (nothing reads it after the solve). */
DS_HD static void rnea_at_qdd(const dsArticModel* m, ws_r* w, const double* qdd) {
  static const double zero[6] = {0, 0, 0, 0, 0, 0};
  for (int i = 0; i < m->nbody; i++) {
    body_r* b = &w->b[i];
    const int p = m->parent[i], nd = ndof_r(m->jtype[i]), va = m->vadr[i];
    const double* dAp = p >= 0 ? w->b[p].dA : zero;
    if (nd == 1) { /* hinge, slide */
      const double dd = qdd[va];
      for (int k = 0; k < 6; k++) {
        b->dA[k] = dAp[k] + b->S[k] * dd;
        b->A[k] += b->dA[k];
      }
    } else {
      for (int k = 0; k < 6; k++) {
        double s = dAp[k];
        for (int c = 0; c < nd; c++) s += b->S[6 * c + k] * qdd[va + c];
        b->dA[k] = s;
        b->A[k] += s;
      }
    }
    double t[6];
    imul_r(t, b->m, b->h, b->Ib, b->dA);
    for (int k = 0; k < 6; k++) b->F[k] = b->F0[k] += t[k];
  }
  for (int i = m->nbody - 1; i >= 0; i--) {
    const int p = m->parent[i];
    if (p >= 0)
      for (int k = 0; k < 6; k++) w->b[p].F[k] += w->b[i].F[k];
  }
}

/* The real pass at (q, qd, u): kinematics, contact, forces, bias, M and its
 * factor, qdd, then (q', qd') in w->qn, w->qdn. For the adjoint, the RNEA's
 * per-body results at qdd (rnea_at_qdd): the reverse pass reads A, F and
 * P, the tangent sweeps reuse A and F0 for the bodies their seed does not
 * reach. */
DS_HD static int forward(const dsArticModel* m, dsArticData* d, const double* q, const double* qd, const double* u,
                   int for_adjoint) {
  ws_r* w = (ws_r*)d->wr;
  d->Lcur = NULL;
  memcpy(w->q, q, sizeof(double) * (size_t)m->nq);
  memcpy(w->qd, qd, sizeof(double) * (size_t)m->nv);
  for (int a = 0; a < m->nu; a++) w->u[a] = u ? u[a] : 0;
  w->th = m->param; /* the real passes only read it */
  kin_r(m, w, 0, NULL);
  d->nkin++;
  contact_r(m, w);
  applied_r(m, w);
  const int aba = aba_model(m);
  int rc;
  if (aba) { /* qdd, and with for_adjoint the RNEA's results at it, in one pass */
    aba_bias(m, w, 1);
    rc = aba_inertia(m, w);
    d->nfactor++;
    if (rc) return rc;
    aba_accel(m, w, w->qdd, 1, for_adjoint);
  } else {
    for (int v = 0; v < m->nv; v++) w->qdd[v] = 0;
    rnea_r(m, w, w->qdd, 0, NULL);
    crba(m, w, d->M);
    rc = cholesky(d->M, m->nv);
    d->nfactor++;
    if (rc) return rc;
    for (int v = 0; v < m->nv; v++) w->qdd[v] = w->tau[v] - w->id[v];
    chol_solve(d->M, m->nv, w->qdd);
  }
  for (int v = 0; v < m->nv; v++) d->qdd[v] = w->qdd[v];
  integrate_r(m, w);
  if (for_adjoint && !aba) rnea_at_qdd(m, w, w->qdd);
  return 0;
}

#include "engine/artic_rev.h"

/* ---- untaped substep, its adjoint, the links' poses ------------------------------------- *
 * One step from (q, qd) with actions u (NULL: 0) into (qn, qdn), not taped;
 * its adjoint: ain = (d out/d in)^T aout over (q, qd) (nq + nv), gu = that
 * of u (overwritten), gth += that of the parameters; every link's world
 * rotation R (9), centre of mass x (3) and spatial velocity V (6: angular,
 * then the velocity of the point at the origin), and its adjoint (gq, gqd,
 * gth added to). d is scratch (any tape size). */

DS_HD DS_INLINE int artic_substep(const dsArticModel* m, dsArticData* d, const double* q, const double* qd,
                               const double* u, double* qn, double* qdn) {
  int rc = forward(m, d, q, qd, u, 0);
  if (rc) return rc;
  const ws_r* w = (ws_r*)d->wr;
  memcpy(qn, w->qn, sizeof(double) * (size_t)m->nq);
  memcpy(qdn, w->qdn, sizeof(double) * (size_t)m->nv);
  return 0;
}

DS_HD DS_INLINE int artic_substep_vjp(const dsArticModel* m, dsArticData* d, const double* q, const double* qd,
                                   const double* u, const double* aout, double* ain, double* gu, double* gth) {
  int rc = forward(m, d, q, qd, u, 1);
  if (rc) return rc;
  double* lam = d->rev + m->nu + m->nparam; /* as backward: nu, nparam, nv, then the bodies' adjoints */
  step_vjp(m, d, aout, ain, ain + m->nq, gu, gth, lam, (dsArticAdjBody*)(lam + m->nv));
  return 0;
}

/* kinematics at (q, qd) with the model's parameters */
DS_HD DS_INLINE void kin_at(const dsArticModel* m, dsArticData* d, const double* q, const double* qd) {
  ws_r* w = (ws_r*)d->wr;
  memcpy(w->q, q, sizeof(double) * (size_t)m->nq);
  memcpy(w->qd, qd, sizeof(double) * (size_t)m->nv);
  w->th = m->param; /* the real passes only read it */
  kin_r(m, w, 0, NULL);
}

DS_HD DS_INLINE void artic_pose(const dsArticModel* m, dsArticData* d, const double* q, const double* qd, double* R,
                             double* x, double* V) {
  kin_at(m, d, q, qd);
  const ws_r* w = (ws_r*)d->wr;
  for (int i = 0; i < m->nbody; i++) {
    memcpy(R + 9 * i, w->b[i].Rw, sizeof(double) * 9);
    memcpy(x + 3 * i, w->b[i].x, sizeof(double) * 3);
    memcpy(V + 6 * i, w->b[i].V, sizeof(double) * 6);
  }
}

DS_HD DS_INLINE void artic_pose_vjp(const dsArticModel* m, dsArticData* d, const double* q, const double* qd,
                                 const double* aR, const double* ax, const double* aV, double* gq, double* gqd,
                                 double* gth) {
  kin_at(m, d, q, qd);
  dsArticAdjBody* ab = (dsArticAdjBody*)(d->rev + m->nu + m->nparam + m->nv);
  memset(ab, 0, sizeof(dsArticAdjBody) * (size_t)m->nbody);
  for (int i = 0; i < m->nbody; i++) {
    memcpy(ab[i].Rw, aR + 9 * i, sizeof(double) * 9);
    memcpy(ab[i].x, ax + 3 * i, sizeof(double) * 3);
    memcpy(ab[i].V, aV + 6 * i, sizeof(double) * 6);
  }
  kin_vjp(m, (const ws_r*)d->wr, ab, gq, gqd, gth);
}

#endif

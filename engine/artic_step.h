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

/* x = M^-1 x at the last real pass: the taped factor after a replay, else d->M */
DS_HD static void solve_M(const dsArticData* d, int n, double* x) {
  if (d->Lcur)
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
  for (int v = 0; v < m->nv; v++) w->qdd[v] = 0;
  rnea_r(m, w, w->qdd, 0, NULL);
  crba(m, w, d->M);
  int rc = cholesky(d->M, m->nv);
  d->nfactor++;
  if (rc) return rc;
  for (int v = 0; v < m->nv; v++) w->qdd[v] = w->tau[v] - w->id[v];
  chol_solve(d->M, m->nv, w->qdd);
  for (int v = 0; v < m->nv; v++) d->qdd[v] = w->qdd[v];
  integrate_r(m, w);
  if (for_adjoint) rnea_at_qdd(m, w, w->qdd);
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

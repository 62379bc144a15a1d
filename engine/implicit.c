/* Backward Euler for the particle engine, and its adjoint by the implicit
 * function theorem (issue 31; docs/integrators.md has the derivation).
 *
 * Forward. The unknown is the new velocity v' (h = m->dt, M the lumped
 * masses, f the total force of engine/forces.h's table: elements, contact
 * and f_ext; gravity is the step's own, on particles with mass):
 *   r(v') = M (v' - v) - h f(x + h v', v', act, f_ext) - h M g = 0,   x' = x + h v'.
 * A fixed particle (mass 0) has the row r_i = v'_i - v_i (it keeps its
 * velocity, as in the semi-implicit step). Its Jacobian is
 *   dr/dv' = M + h Kv + h^2 Kx,   Kx = -df/dx, Kv = -df/dv at (x', v'),
 * Newton iterates v'_{k+1} = v'_k + alpha dv. The direction is first the
 * exact Newton step, J dv = -r(v'_k) with J assembled from the exact
 * element Jacobians and solved by BiCGSTAB (J is not symmetric: damping
 * that depends on positions, sliding friction); where that solve fails or
 * its step does not pass the line search within DS__LS_PROJ halvings (an
 * indefinite J far from the solution: cloth in compression, tets near
 * inversion), it is the projected step
 *   A dv = -r(v'_k),   A = M + h P(Kv) + h^2 P(Kx)
 * where P replaces each element's block by the PSD projection of its
 * symmetric part (engine/sparse.h), so A is SPD and PCG (block-Jacobi)
 * solves it. The exact step first because the projected one converges
 * only linearly where any element's curvature is negative, and each PSD
 * projection of a 12 x 12 bend or tet block costs more than the rest of
 * the iteration (measured on tests/test_implicit's cloth, h = 1e-2, Newton
 * to 1e-12: ~11 iterations per step and 158 s for its gradient checks with
 * the projected step first, 6 s with the exact step first).
 * Cost (issue 31, item 5). Assembling J (the tets' 12 x 12 element
 * Jacobians above all) cost as much as ~20 block products when this was
 * first measured; since then the tets' Jacobians take a third of their
 * instructions and the block products less than half (block-wise tet
 * blocks, vector products: docs/integrators.md, "Cheaper Jacobians and
 * products"), so an assembly is still worth many products:
 * - a chord step: after a step that cut |r| by DS__CHORD_RATE or more
 *   with alpha = 1, the next direction is solved with the same matrix (the
 *   exact J of an earlier iterate of this step), reassembled when that
 *   step fails its line search; within a step only, so a step stays a
 *   function of its inputs;
 * - inexact solves: BiCGSTAB stops at the Eisenstat-Walker forcing term
 *   (forcing(): loose while |r| falls fast, tight near convergence, never
 *   tighter than half the target |r| needs, nor than cg_tol);
 * - the start state's Jacobian (models without ground contact): Newton's
 *   first matrix is J at the step's start state, positions x and
 *   velocities v (not x + h v'_0, v'_0), used as a chord matrix from the
 *   first iterate on. That is also the matrix the adjoint of the step
 *   before solves with (J of that step at its converged state: the same
 *   function of the same inputs when the activations did not change), so
 *   the step keeps it in a slot (ds__implicit_keep) and the backward copies
 *   it instead of assembling: one assembly per substep instead of two, the
 *   gradient's bits unchanged. Measured on control-cloth-implicit: the
 *   forward as fast as from the first iterate's matrix (the same Newton
 *   iterations), one training iteration 0.98 G instructions instead of
 *   1.12 G. With ground contact the first iterate's matrix (its contact
 *   set is the step's) stays: from the start state's, control-fem at 10x
 *   took 14.5 G instructions per iteration against 13.7 G (13.6 G with
 *   every substep's matrix kept).
 * Measured on control-fem at 10x its step (96 substeps, forward and
 * backward of one iteration): 1.1 assemblies per substep instead of 2.2,
 * 4.5 BiCGSTAB iterations per solve instead of 11.7.
 * The line search cannot use the incremental potential: Rayleigh-type
 * damping whose matrix depends on x (tri, tet, bend, spring kd along the
 * current direction) and Coulomb friction are not gradients of any
 * potential. It backtracks (alpha = 1, 1/2, ...) on the merit |r|,
 * accepting the first alpha with
 *   |r(v'_k + alpha dv)| <= (1 - 1e-4 alpha) |r(v'_k)|
 * (the exact step is a descent direction of |r|^2: d/dalpha |r|^2 =
 * -2 |r|^2), and, when none of DS__LS_MAX halvings of the projected step
 * decreases |r|, the last (smallest) step, leaving it to the iteration cap
 * to report a stall. Convergence:
 *   |r(v'_k)| <= newton_tol * max(|r(v'_0)|, |M v|, h |M g|)
 * (a residual relative to the step's own momentum scale: the first
 * residual, the momentum, gravity's impulse; |r| / |M v| ~ the relative
 * error of v'), or |r| at DS__ROUND_ULPS roundings of the magnitudes of
 * its terms (each element force counted alone, as they may cancel).
 * Every norm and product is a fixed-order sum (ds__bsr_dot) and every
 * force a fixed-order gather, so the step is the same bits on any thread
 * count and when a checkpoint segment recomputes it.
 *
 * Contact. The ground's approach damping -kd min(v_y, 0) acts only inside
 * the skin, so with kd > 0 the contact force jumps by kd |v_y| where a
 * particle crosses it; a step whose solution would land in that jump has
 * none, and Newton stalls there (reported as non-convergence). Either
 * kd = 0 (backward Euler damps by itself) or the contact's smooth switch
 * (dsModel.contact_smooth, engine/force_contact.h), which makes the force
 * continuous there (docs/integrators.md).
 *
 * Adjoint. Given X' = dL/dx', V' = dL/dv' and the converged v', the
 * implicit function theorem gives dv'/dp = -(dr/dv')^{-1} dr/dp for any
 * input p (x, v, act, f_ext, parameters), so with
 *   a = V' + h X'                      (total adjoint of v': x' = x + h v')
 *   J^T lambda = a,    J = dr/dv' = M + h Kv + h^2 Kx   (exact, unprojected)
 * every input gets dL/dp = [p's direct path] - (dr/dp)^T lambda:
 *   dL/dx  = X' - (dr/dx)^T lambda = X' + (df/dx)^T (h lambda)
 *   dL/dv  = M lambda                     (r depends on v only through -M v)
 *   dL/dtheta = (df/dtheta)^T (h lambda)  (element and contact parameters, act)
 *   dL/df_ext = h lambda,   dL/dg = h sum_i m_i lambda_i,
 *   dL/dm_i = -(v'_i - v_i - h g) . lambda_i
 * over particles with mass. The force terms are exactly what each force's
 * _bwd kernel computes from an adjoint of the force af = h lambda,
 * evaluated at (x', v'): the same kernels as the semi-implicit backward,
 * only at the new state. J is not symmetric in general (x-dependent
 * damping, sliding friction's coupling to the normal force), so the
 * transposed solve is BiCGSTAB on the block-sparse J with a transposed
 * product (engine/sparse.h), refined until every row's residual is within
 * adjoint_tol of its own terms (adjoint_componentwise: a stands for
 * adjoints of very different sizes, a planar model's out-of-plane one
 * above all). A fixed particle j (v'_j = v_j, x'_j = x_j +
 * h v_j) is outside the solve (its row and column are the identity in the
 * assembled J, so lambda_F of the particles with mass is exact); its
 * adjoints are the direct path plus what the others' residuals carry:
 *   dL/dx_j = X'_j + ax_j,   dL/dv_j = a_j + h ax_j + av_j
 * with ax, av = (df/dx)^T (h lambda), (df/dv)^T (h lambda) at j. */
#include "config.h"

#include "engine/implicit.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#ifdef _OPENMP
#  include <omp.h>
#endif

#include "base/internal.h"
#include "engine/forces.h"
#include "engine/sparse.h"

/* Below this many slots + particles the adjoint's element stage runs on
 * one thread (as ds_step's DS__PAR_MIN). */
#define DS__IMP_PAR_MIN 1024
/* Below this many particles the residual's per-particle loop and the
 * adjoint's componentwise check (each a gather over a particle's slots or
 * blocks, as heavy per particle as a product's row) run on one thread (as
 * the products, engine/sparse.c's DS__BSR_PAR_MIN) */
#define DS__IMP_ROW_PAR_MIN 256
/* halvings of the line search: along the exact Jacobian's step; along the
 * projected step before trying the exact one */
#define DS__LS_MAX 12
#define DS__LS_PROJ 4
/* Armijo constant of the line search on |r| */
#define DS__LS_C ((dsReal)1e-4)
/* vectors of 3 nparticle reals a dsImplicit holds */
#define DS__IMP_NVEC 11
/* Eisenstat-Walker forcing terms of Newton's linear solves: gamma, and
 * the loosest (and the first iteration's) relative residual */
#define DS__EW_GAMMA ((dsReal)0.9)
#define DS__EW_MAX ((dsReal)0.1)
/* a chord step (the Jacobian of an earlier iterate) follows a step that
 * cut |r| by at least this factor */
#define DS__CHORD_RATE ((dsReal)0.25)
/* |r| at or below this many roundings of its terms counts as converged */
#define DS__ROUND_ULPS 64
/* refinements of the adjoint solve towards adjoint_tol row by row */
#define DS__ADJ_REFINE 4

struct dsImplicit {
  dsBlockSparse* A;
  dsChol* chol; /* LDL^T of (J + J^T) / 2, BiCGSTAB's preconditioner (NULL: no CHOLMOD in this build) */
  dsReal* mem;
  /* Newton: iterate, its positions and residual; trial (the same three);
   * total force; direction; right-hand side. Adjoint: a, lambda. */
  dsReal *vk, *xk, *rk, *vt, *xt, *rt, *f, *dv, *rhs, *lam;
  dsReal* mag; /* per entry of r: the sum of its terms' magnitudes (element forces one by one) */
  dsReal floor; /* DS__ROUND_ULPS eps |mag| of the last residual */
  /* Kept Jacobians (ds__implicit_keep): nslot slots, substep t's in slot
   * t % nslot, each the matrix J(x, v, act) at the substep's start state
   * (val only) and that state and act, for the backward of substep t - 1,
   * and the episode it was kept in (slot_gen; 0: none) */
  int nslot;
  size_t slot_len; /* reals a slot holds: 9 nnzb + 2 (3 n) + nact */
  dsReal* slots;
  unsigned* slot_gen;
  unsigned gen; /* this episode's (ds__implicit_new_episode), never 0 */
  long reused; /* adjoints whose J came from a slot (tests) */
};

int ds__implicit_create(const dsModel* m, dsImplicit** out) {
  *out = NULL;
  dsImplicit* w = (dsImplicit*)ds__calloc(1, sizeof *w);
  if (!w) return DS_ERR_NOMEM;
  int rc = ds__bsr_create(m, &w->A);
  if (rc) {
    ds__free(w);
    return rc;
  }
  const size_t n3 = 3 * (size_t)m->nparticle;
  w->mem = (dsReal*)ds__malloc(sizeof(dsReal) * DS__IMP_NVEC * (n3 ? n3 : 1));
  if (!w->mem || (m->solver.precond == DS_PRECOND_CHOLMOD && ds__chol_create(w->A, &w->chol))) {
    ds__implicit_free(w);
    return DS_ERR_NOMEM;
  }
  dsReal** vecs[DS__IMP_NVEC] = {&w->vk, &w->xk, &w->rk, &w->vt, &w->xt, &w->rt, &w->f, &w->dv, &w->rhs, &w->lam, &w->mag};
  for (int k = 0; k < DS__IMP_NVEC; k++) *vecs[k] = w->mem + (size_t)k * n3;
  *out = w;
  return 0;
}

void ds__implicit_free(dsImplicit* w) {
  if (!w) return;
  ds__chol_free(w->chol);
  ds__bsr_free(w->A);
  ds__free(w->mem);
  ds__free(w->slots);
  ds__free(w->slot_gen);
  ds__free(w);
}

/* the reals of a slot for a matrix of nnzb blocks: the matrix, x, v, act */
static size_t slot_reals(const dsModel* m, size_t nnzb) {
  return 9 * nnzb + 6 * (size_t)m->nparticle + (size_t)m->nact;
}

size_t ds__implicit_slot_size(const dsModel* m, size_t nnzb) {
  return sizeof(dsReal) * slot_reals(m, nnzb) + sizeof(unsigned);
}

size_t ds__implicit_slot_bytes(const dsModel* m, const dsImplicit* w) {
  return ds__implicit_slot_size(m, (size_t)w->A->nnzb);
}

long ds__implicit_reused(const dsImplicit* w) { return w->reused; }

int ds__implicit_keeps(const dsModel* m) { return m->integrator == DS_INTEGRATOR_IMPLICIT && !m->ground; }

size_t ds__implicit_kept_bytes(const dsImplicit* w) {
  return w->nslot > 0 ? (sizeof(dsReal) * w->slot_len + sizeof(unsigned)) * (size_t)w->nslot : 0;
}

void ds__implicit_new_episode(dsImplicit* w) {
  if (++w->gen == 0) { /* wrapped: no slot may look current */
    w->gen = 1;
    if (w->slot_gen) memset(w->slot_gen, 0, (size_t)w->nslot * sizeof(unsigned));
  }
}

int ds__implicit_keep(const dsModel* m, dsImplicit* w, int nslot) {
  ds__free(w->slots);
  ds__free(w->slot_gen);
  w->slots = NULL;
  w->slot_gen = NULL;
  w->nslot = 0;
  if (w->gen == 0) w->gen = 1;
  if (nslot <= 0) return 0;
  w->slot_len = slot_reals(m, (size_t)w->A->nnzb);
  w->slots = (dsReal*)ds__malloc(sizeof(dsReal) * w->slot_len * (size_t)nslot);
  w->slot_gen = (unsigned*)ds__calloc((size_t)nslot, sizeof(unsigned));
  if (!w->slots || !w->slot_gen) {
    ds__implicit_keep(m, w, 0);
    return DS_ERR_NOMEM;
  }
  w->nslot = nslot;
  return 0;
}

/* Substep t's start-state Jacobian, just assembled in w->A at (x, v, act),
 * into its slot (when slots are kept). */
static void keep_jacobian(const dsModel* m, dsImplicit* w, const dsReal* x, const dsReal* v, const dsReal* act,
                          int t) {
  if (w->nslot <= 0 || t < 0) return;
  const int k = t % w->nslot;
  const size_t nv = 9 * (size_t)w->A->nnzb, n3 = 3 * (size_t)m->nparticle;
  dsReal* sl = w->slots + (size_t)k * w->slot_len;
  memcpy(sl, w->A->val, nv * sizeof(dsReal));
  memcpy(sl + nv, x, n3 * sizeof(dsReal));
  memcpy(sl + nv + n3, v, n3 * sizeof(dsReal));
  if (m->nact) memcpy(sl + nv + 2 * n3, act, (size_t)m->nact * sizeof(dsReal));
  w->slot_gen[k] = w->gen;
}

/* The adjoint's J at (x', v', act) into w->A: from the slot of substep t + 1
 * when it was kept in this episode at that state and act bit for bit (the
 * same function of the same inputs and the same model parameters: the same
 * bits as an assembly), else assembled. Returns 1 when it came from a
 * slot. */
static int jacobian_at(const dsModel* m, dsImplicit* w, const dsReal* x1, const dsReal* v1, const dsReal* act, int t) {
  if (w->nslot > 0) {
    const int k = (t + 1) % w->nslot;
    const size_t nv = 9 * (size_t)w->A->nnzb, n3 = 3 * (size_t)m->nparticle;
    const dsReal* sl = w->slots + (size_t)k * w->slot_len;
    if (w->slot_gen[k] == w->gen && memcmp(sl + nv, x1, n3 * sizeof(dsReal)) == 0 &&
        memcmp(sl + nv + n3, v1, n3 * sizeof(dsReal)) == 0 &&
        (!m->nact || memcmp(sl + nv + 2 * n3, act, (size_t)m->nact * sizeof(dsReal)) == 0)) {
      memcpy(w->A->val, sl, nv * sizeof(dsReal));
      w->A->valc_ok = 0; /* the transposed products read val only */
      w->reused++;
      return 1;
    }
  }
  ds__bsr_assemble(w->A, m, x1, v1, act, m->dt, 0);
  return 0;
}

/* xk = x + h vk, the total force f at (xk, vk), r = r(vk); returns |r|.
 * *bad: the smallest tet with J <= 0 at xk (INT_MAX: none). */
static dsReal residual(const dsModel* m, dsImplicit* w, const dsReal* x, const dsReal* v, const dsReal* act,
                       const dsReal* fext, const dsReal* vk, dsReal* xk, dsReal* r, dsReal* ef, dsReal* J, int* bad) {
  const int np = m->nparticle;
  const long n3 = 3 * (long)np;
  const dsReal h = m->dt;
  DS__PAR_FOR(n3 > 3 * DS__IMP_PAR_MIN,
    for (long k = 0; k < n3; k++) xk[k] = x[k] + h * vk[k];
  );
  dsStepCheck ck;
  memset(&ck, 0, sizeof ck);
  ck.bad_tet = INT_MAX;
  ck.bad_state = INT_MAX;
  ds__substep(m, xk, vk, act, fext, ef, J, w->f, NULL, NULL, 0, NULL, NULL, NULL, NULL, NULL, &ck);
  *bad = ck.bad_tet;
  const dsReal* g = m->gravity;
  DS__PAR_FOR(np >= DS__IMP_ROW_PAR_MIN,
    for (int i = 0; i < np; i++) {
      const dsReal mi = m->mass[i];
      for (int c = 0; c < 3; c++) {
        const size_t k = 3 * (size_t)i + c;
        r[k] = mi > 0 ? mi * (vk[k] - v[k]) - h * w->f[k] - h * mi * g[c] : vk[k] - v[k];
        w->mag[k] = mi > 0 ? mi * (dsu_fabs(vk[k]) + dsu_fabs(v[k])) + h * (dsu_fabs(w->f[k]) + mi * dsu_fabs(g[c])) : 0;
      }
      if (mi > 0) /* the element forces that f sums (they may cancel in f, not in its rounding) */
        for (int s = m->inc_start[i]; s < m->inc_start[i + 1]; s++)
          for (int c = 0; c < 3; c++) w->mag[3 * (size_t)i + c] += h * dsu_fabs(ef[3 * (size_t)m->inc_slot[s] + c]);
    }
  );
  w->floor = DS__ROUND_ULPS * DS_REAL_EPS * dsu_sqrt(ds__bsr_dot(w->A, w->mag, w->mag, (size_t)n3));
  return dsu_sqrt(ds__bsr_dot(w->A, r, r, (size_t)n3));
}

/* max(|r(v'_0)|, |M v|, h |M g|) (r0 the first iterate's residual): the
 * scale of newton_tol */
static dsReal residual_scale(const dsModel* m, dsImplicit* w, const dsReal* v, dsReal r0) {
  const int np = m->nparticle;
  dsReal* mv = w->rhs; /* free until the first solve */
  for (int i = 0; i < np; i++)
    for (int c = 0; c < 3; c++) mv[3 * (size_t)i + c] = m->mass[i] * v[3 * (size_t)i + c];
  const dsReal nmv = dsu_sqrt(ds__bsr_dot(w->A, mv, mv, 3 * (size_t)np));
  dsReal m2 = 0;
  for (int i = 0; i < np; i++) m2 += m->mass[i] * m->mass[i];
  const dsReal* g = m->gravity;
  const dsReal nmg = m->dt * dsu_sqrt(m2 * (g[0] * g[0] + g[1] * g[1] + g[2] * g[2]));
  dsReal s = r0 > nmv ? r0 : nmv;
  return s > nmg ? s : nmg;
}

/* After an assembly: BiCGSTAB's preconditioner for the new values of w->A,
 * the LDL^T of (J + J^T) / 2 (engine/cholmod.c) where the build has CHOLMOD,
 * factor != 0 and the factorisation succeeds, else block-Jacobi. With the
 * factor, Newton's solves and the adjoint's take one to a few BiCGSTAB
 * iterations instead of several to tens (docs/integrators.md, "Cost"). */
static void precondition_with(dsImplicit* w, int factor) {
  w->A->chol = factor && w->chol && ds__chol_factor(w->chol, w->A) == 0 ? w->chol : NULL;
}

/* Newton's direction dv from the residual rk, solved to relative residual
 * eta with the matrix in w->A: projected != 0, A = M + h P(Kv) + h^2 P(Kx)
 * by PCG; else an exact Jacobian (at this iterate or an earlier one of the
 * step) by BiCGSTAB. assemble != 0 first assembles A at (xk, vk). Returns
 * the solver's code (0, 1 at its cap, < 0 failed); *cres its relative
 * residual. */
static int direction(const dsModel* m, dsImplicit* w, const dsReal* xk, const dsReal* vk, const dsReal* act,
                     const dsReal* rk, int projected, int assemble, dsReal eta, dsReal* cres) {
  const dsSolverSettings* S = &m->solver;
  const long nl = 3 * (long)m->nparticle;
  if (assemble) {
    ds__bsr_assemble(w->A, m, xk, vk, act, m->dt, projected);
    precondition_with(w, !projected);
  }
  DS__PAR_FOR(nl > 3 * DS__IMP_PAR_MIN,
    for (long k = 0; k < nl; k++) {
      w->rhs[k] = -rk[k];
      w->dv[k] = 0;
    }
  );
  return projected ? ds__bsr_pcg(w->A, w->rhs, w->dv, eta, S->cg_max_iter, NULL, cres)
                   : ds__bsr_bicgstab(w->A, 0, w->rhs, w->dv, eta, S->cg_max_iter, NULL, cres);
}

/* Backtracking on |r| along dv from vk (|r(vk)| = rn): alpha = 1, 1/2, ...
 * up to nhalf halvings; the trial that ends it is in (vt, xt, rt) with its
 * norm *rtn. Returns 1 when it met the Armijo condition, 0 when it stopped
 * at the last halving. */
static int line_search(const dsModel* m, dsImplicit* w, const dsReal* x, const dsReal* v, const dsReal* act,
                       const dsReal* fext, const dsReal* vk, dsReal rn, int nhalf, dsReal* ef, dsReal* J,
                       dsReal* alpha_out, dsReal* rtn, int* badt) {
  const long nl = 3 * (long)m->nparticle;
  dsReal alpha = 1;
  for (int ls = 0;; ls++) {
    DS__PAR_FOR(nl > 3 * DS__IMP_PAR_MIN,
      for (long k = 0; k < nl; k++) w->vt[k] = vk[k] + alpha * w->dv[k];
    );
    *rtn = residual(m, w, x, v, act, fext, w->vt, w->xt, w->rt, ef, J, badt);
    *alpha_out = alpha;
    if (*rtn <= (1 - DS__LS_C * alpha) * rn) return 1;
    if (ls == nhalf) return 0;
    alpha *= (dsReal)0.5;
  }
}

/* Eisenstat-Walker forcing term (their choice 2) of Newton iteration it:
 * eta_0 = DS__EW_MAX; then gamma (|r_k| / |r_{k-1}|)^2, not below
 * gamma eta_{k-1}^2 where that is above 0.1 (their safeguard), at most
 * DS__EW_MAX; never tighter than needed to reach the target in one step
 * (0.5 target / |r_k|: a linear residual below half the target leaves
 * Newton at it, up to the quadratic term), never tighter than cg_tol. */
static dsReal forcing(const dsSolverSettings* S, int it, dsReal rn, dsReal rprev, dsReal eta_prev, dsReal target) {
  dsReal eta = DS__EW_MAX;
  if (it > 0) {
    const dsReal q = rn / rprev;
    eta = DS__EW_GAMMA * q * q;
    const dsReal sg = DS__EW_GAMMA * eta_prev * eta_prev;
    if (sg > (dsReal)0.1 && sg > eta) eta = sg;
  }
  const dsReal need = (dsReal)0.5 * target / rn;
  if (need > eta) eta = need;
  if (eta > DS__EW_MAX) eta = DS__EW_MAX;
  return eta > S->cg_tol ? eta : S->cg_tol;
}

/* Where a Newton iteration stalled, for its error message: the particle
 * with the largest residual, and, where the ground's approach damping is a
 * step at the skin (contact.kd > 0, contact.smooth = 0) and that particle is
 * within one step's travel of the skin, the discontinuity that stalls
 * Newton there and the two ways out ("Ground contact and approach damping"
 * in docs/integrators.md). Empty for a model without particles. */
static void stall_where(const dsModel* m, const dsReal* xk, const dsReal* vk, const dsReal* rk, char* out,
                        size_t cap) {
  out[0] = 0;
  int worst = -1;
  dsReal wr = -1;
  for (int i = 0; i < m->nparticle; i++) {
    const dsReal* r = rk + 3 * (size_t)i;
    const dsReal n2 = r[0] * r[0] + r[1] * r[1] + r[2] * r[2];
    if (n2 > wr) wr = n2, worst = i;
  }
  if (worst < 0) return;
  const dsReal* xi = xk + 3 * (size_t)worst;
  const dsReal gap = xi[1] - m->contact_skin[0], reach = m->dt * dsu_fabs(vk[3 * (size_t)worst + 1]);
  const int n = m->ground ? snprintf(out, cap, "; largest residual at particle %d (|r| %g, %g m above the contact skin)",
                                     worst, (double)dsu_sqrt(wr), (double)gap)
                          : snprintf(out, cap, "; largest residual at particle %d (|r| %g, at (%g, %g, %g) m)", worst,
                                     (double)dsu_sqrt(wr), (double)xi[0], (double)xi[1], (double)xi[2]);
  if (n < 0 || (size_t)n >= cap || !m->ground || !(m->contact_kd[0] > 0) || m->contact_smooth > 0) return;
  if (dsu_fabs(gap) > reach + m->contact_skin[0]) return;
  snprintf(out + n, cap - (size_t)n,
           ": contact.kd > 0 with contact.smooth 0 makes the ground's damping jump at the skin, where Newton can "
           "stall; set contact.smooth > 0 (e.g. %g, the skin) or contact.kd 0",
           (double)m->contact_skin[0]);
}

/* The error of a residual norm that is not finite at Newton iteration it:
 * the first particle whose residual is not finite and whether its iterate
 * or its force is, or, when every entry is finite and only the norm's sum
 * overflowed, the largest entry's particle. */
static int not_finite(const dsModel* m, const dsReal* xk, const dsReal* vk, const dsReal* rk, dsErrBuf* eb, int t,
                      int it) {
  const size_t n3 = 3 * (size_t)m->nparticle;
  size_t q = 0;
  while (q < n3 && rk[q] - rk[q] == 0) q++;
  if (q == n3) {
    size_t big = 0;
    for (size_t k = 1; k < n3; k++)
      if (dsu_fabs(rk[k]) > dsu_fabs(rk[big])) big = k;
    return ds__seterr(eb, DS_ERR_DIVERGED,
                      "substep %d: implicit step: the residual's norm overflows at Newton iteration %d (its largest "
                      "entry %g at particle %d)",
                      t, it, (double)rk[big], (int)(big / 3));
  }
  const size_t i = q / 3;
  int in = 0;
  for (int c = 0; c < 3; c++) in |= !isfinite(xk[3 * i + c]) || !isfinite(vk[3 * i + c]);
  return ds__seterr(eb, DS_ERR_DIVERGED,
                    "substep %d: implicit step: the residual is %s at Newton iteration %d, first at particle %d (its "
                    "%s)",
                    t, isnan(rk[q]) ? "NaN" : "Inf", it, (int)i,
                    in ? "iterate's position or velocity is not finite" : "force is not finite");
}

int ds__implicit_substep(const dsModel* m, dsImplicit* w, const dsReal* x, const dsReal* v, const dsReal* act,
                         const dsReal* fext, dsReal* xo, dsReal* vo, dsReal* ef, dsReal* J, int* bad_tet,
                         dsErrBuf* eb, int t) {
  const dsSolverSettings* S = &m->solver;
  const size_t n3 = 3 * (size_t)m->nparticle;
  dsReal *vk = w->vk, *xk = w->xk, *rk = w->rk;
  /* first iterate: with ground contact v, without it v + h g (the free
   * fall, exact without other forces), particles with mass. Measured: on
   * control-fem at 10x its step, v takes fewer Newton iterations than
   * v + h g (3.6 per substep against 4.1; most of the gear rests on or
   * rolls along the ground); on control-cloth-implicit (no ground) v + h g
   * takes a fifth fewer BiCGSTAB products in the forward (932 against 1,162
   * an episode) and 3% fewer instructions per training iteration. A warm
   * start from the last step's acceleration would make the step depend on
   * more than its state, and a checkpointed backward's recomputed segments
   * would no longer be the forward's bits. */
  memcpy(vk, v, n3 * sizeof(dsReal));
  if (!m->ground)
    for (int i = 0; i < m->nparticle; i++)
      if (m->mass[i] > 0)
        for (int c = 0; c < 3; c++) vk[3 * (size_t)i + c] += m->dt * m->gravity[c];
  int bad;
  dsReal rn = residual(m, w, x, v, act, fext, vk, xk, rk, ef, J, &bad);
  dsReal fl = w->floor;
  const dsReal target = S->newton_tol * residual_scale(m, w, v, rn);
  /* have: w->A holds the exact Jacobian at an earlier iterate of this step;
   * reuse: its last step converged fast enough to take another with it */
  int have = 0, reuse = 0, start = 0;
  if (ds__implicit_keeps(m) && rn > target && rn > fl && rn - rn == 0) { /* Newton's first matrix (top comment) */
    ds__bsr_assemble(w->A, m, x, v, act, m->dt, 0);
    precondition_with(w, 1);
    keep_jacobian(m, w, x, v, act, t);
    have = reuse = start = 1;
  }
  dsReal rprev = rn, eta = DS__EW_MAX;
  for (int it = 0;; it++) {
    if (!(rn - rn == 0)) return not_finite(m, xk, vk, rk, eb, t, it);
    if (rn <= target || rn <= fl) break; /* converged, or at the rounding level of r's terms */
    if (it >= S->newton_max_iter) {
      char where[320];
      stall_where(m, xk, vk, rk, where, sizeof where);
      return ds__seterr(eb, DS_ERR_DIVERGED,
                        "substep %d: implicit step: Newton did not converge in %d iterations (relative residual %g > "
                        "newton_tol %g)%s",
                        t, it, (double)(rn * S->newton_tol / target), (double)S->newton_tol, where);
    }
    eta = forcing(S, it, rn, rprev, eta, target);
    /* Directions (top comment, "Newton"): the exact Jacobian of an earlier
     * iterate (a chord step) while it converges fast; the exact Jacobian
     * here, both by BiCGSTAB with DS__LS_PROJ halvings; where that solve
     * fails or its step does not decrease |r| enough, the projected step
     * by PCG with DS__LS_MAX halvings. */
    dsReal cres = 0, alpha = 1, rtn = 0;
    int badt = INT_MAX, ok = 0;
    if (reuse && have && direction(m, w, xk, vk, act, rk, 0, 0, eta, &cres) >= 0) {
      /* the start state's matrix: its full step only (else this
       * iterate's matrix, as without it: measured on a chain flying
       * apart at 270 m/s, halved steps along it left Newton short) */
      ok = line_search(m, w, x, v, act, fext, vk, rn, start ? 0 : DS__LS_PROJ, ef, J, &alpha, &rtn, &badt);
    }
    start = 0;
    if (!ok) {
      have = 1;
      if (direction(m, w, xk, vk, act, rk, 0, 1, eta, &cres) >= 0)
        ok = line_search(m, w, x, v, act, fext, vk, rn, DS__LS_PROJ, ef, J, &alpha, &rtn, &badt);
    }
    if (!ok) {
      have = 0;
      if (direction(m, w, xk, vk, act, rk, 1, 1, eta, &cres) < 0)
        return ds__seterr(eb, DS_ERR_DIVERGED,
                          "substep %d: implicit step: PCG failed at Newton iteration %d (projected matrix not "
                          "positive definite or not finite; relative residual %g)",
                          t, it, (double)cres);
      line_search(m, w, x, v, act, fext, vk, rn, DS__LS_MAX, ef, J, &alpha, &rtn, &badt);
    }
    reuse = ok && alpha == 1 && rtn <= DS__CHORD_RATE * rn;
    dsReal* s; /* the trial is the new iterate */
    s = w->vk, w->vk = w->vt, w->vt = s;
    s = w->xk, w->xk = w->xt, w->xt = s;
    s = w->rk, w->rk = w->rt, w->rt = s;
    vk = w->vk, xk = w->xk, rk = w->rk;
    rprev = rn;
    rn = rtn;
    fl = w->floor; /* of the trial that ended the line search: the new iterate */
    bad = badt;
  }
  /* xk = x + h vk already, in the same operation order as the residual's */
  memcpy(xo, xk, n3 * sizeof(dsReal));
  memcpy(vo, vk, n3 * sizeof(dsReal));
  if (bad_tet) *bad_tet = bad;
  return 0;
}

int ds__implicit_step(const dsModel* m, dsData* d, dsReal* ef, dsReal* J, dsStepCheck* ck) {
  dsDataPriv* dp = (dsDataPriv*)d->err_;
  dsErrBuf* eb = &dp->err;
  if (!dp->imp)
    return ds__seterr(eb, DS_ERR_STATE, "substep %d: the data was created for a semi-implicit model", d->t);
  const size_t n3 = 3 * (size_t)m->nparticle;
  if (ck->tx) {
    memcpy(ck->tx, d->x, n3 * sizeof(dsReal));
    memcpy(ck->tv, d->v, n3 * sizeof(dsReal));
  }
  if (ck->act_prev) ck->act_diff = memcmp(d->act, ck->act_prev, (size_t)m->nact * sizeof(dsReal)) != 0;
  if (ck->fext_prev) ck->fext_diff = memcmp(d->f_ext, ck->fext_prev, n3 * sizeof(dsReal)) != 0;
  const int rc =
      ds__implicit_substep(m, dp->imp, d->x, d->v, d->act, d->f_ext, d->x, d->v, ef, J, &ck->bad_tet, eb, d->t);
  if (!rc) memcpy(d->f, dp->imp->f, n3 * sizeof(dsReal)); /* the force at the new state, which the step used */
  return rc;
}

/* r = a - J^T lam and the componentwise relative residual of the adjoint
 * solve (Oettli and Prager's backward error),
 *   max_k |r_k| / (|a_k| + sum_l |J_lk| |lam_l|)
 * over the 3 n rows k (0 where the denominator is 0): each row measured
 * against its own terms, not against |a| as a whole. */
static dsReal adjoint_componentwise(const dsBlockSparse* A, const dsReal* a, const dsReal* lam, dsReal* r) {
  ds__bsr_matvec_t(A, lam, r);
  dsReal worst = 0;
#pragma omp parallel for schedule(static) reduction(max : worst) if (ds__par_open(A->n >= DS__IMP_ROW_PAR_MIN))
  for (int i = 0; i < A->n; i++) {
    dsReal den[3];
    for (int c = 0; c < 3; c++) den[c] = dsu_fabs(a[3 * (size_t)i + c]);
    for (int b = A->row_start[i]; b < A->row_start[i + 1]; b++) {
      const dsReal* B = A->val + 9 * (size_t)A->tr[b]; /* block (j, i) of J: row i of J^T reads its columns */
      const dsReal* lj = lam + 3 * (size_t)A->col[b];
      for (int c = 0; c < 3; c++)
        den[c] += dsu_fabs(B[c]) * dsu_fabs(lj[0]) + dsu_fabs(B[3 + c]) * dsu_fabs(lj[1]) +
                  dsu_fabs(B[6 + c]) * dsu_fabs(lj[2]);
    }
    for (int c = 0; c < 3; c++) {
      const size_t k = 3 * (size_t)i + c;
      r[k] = a[k] - r[k];
      const dsReal e = den[c] > 0 ? dsu_fabs(r[k]) / den[c] : 0;
      if (e > worst) worst = e;
    }
  }
  return worst;
}

int ds__implicit_bwd(const dsModel* m, dsImplicit* w, const dsReal* xt, const dsReal* vt, const dsReal* xt1,
                     const dsReal* vt1, const dsReal* act, dsReal* adj_x, dsReal* adj_v, dsGrad* g, dsReal* adj_act,
                     dsReal* adj_fext, dsReal* af, dsReal* aex, dsReal* aev, dsReal* scr, dsErrBuf* eb, int t) {
  const int np = m->nparticle;
  const size_t n3 = 3 * (size_t)np;
  const dsReal h = m->dt;
  const dsSolverSettings* S = &m->solver;
  (void)xt; /* x enters the residual only through x' = x + h v' (dL/dx from the force terms) */
  dsReal *a = w->rhs, *lam = w->lam;
  for (size_t k = 0; k < n3; k++) {
    a[k] = adj_v[k] + h * adj_x[k];
    lam[k] = 0;
  }
  jacobian_at(m, w, xt1, vt1, act, t);
  precondition_with(w, 1);
  int iters = 0;
  dsReal res = 0;
  const int rc = ds__bsr_bicgstab(w->A, 1, a, lam, S->adjoint_tol, S->cg_max_iter, &iters, &res);
  if (rc)
    return ds__seterr(eb, DS_ERR_DIVERGED,
                      "substep %d: implicit adjoint: BiCGSTAB on J^T did not converge (%s; relative residual %g, "
                      "adjoint_tol %g, %d iterations)",
                      t, rc < 0 ? "breakdown" : "iteration cap", (double)res, (double)S->adjoint_tol, iters);
  /* Iterative refinement to adjoint_tol row by row. The test above is
   * relative to |a| as a whole, so the solve leaves each row's error near
   * adjoint_tol |a|; where a's entries differ by many orders of magnitude
   * the small ones are lost. The case met: a planar model (z = 0, no force
   * along z) whose membrane buckles out of plane under compression. Its z
   * adjoint grows exponentially backward in time (~e^{7 t}: 1e12 after 4 s
   * on the walker) while the in-plane one stays O(1); the two are exactly
   * decoupled (J has no xy-z entries at z = 0), but one Krylov solve shares
   * its scalars between them and leaves ~1e-10 x 1e12 of error in the
   * in-plane lambda, which the activations' gradient reads
   * (docs/integrators.md, the walker). Solving J^T d = a - J^T lam for a
   * correction balances the scales, each pass gaining adjoint_tol; it
   * stops at adjoint_tol componentwise, after DS__ADJ_REFINE passes, or
   * when a pass does not halve the error (the rounding level). */
  dsReal *rr = w->dv, *d = w->vt; /* Newton's vectors, free here */
  dsReal cerr = adjoint_componentwise(w->A, a, lam, rr);
  for (int pass = 0; pass < DS__ADJ_REFINE && cerr > S->adjoint_tol; pass++) {
    memset(d, 0, n3 * sizeof(dsReal));
    if (ds__bsr_bicgstab(w->A, 1, rr, d, S->adjoint_tol, S->cg_max_iter, NULL, NULL) != 0) break;
    for (size_t q = 0; q < n3; q++) w->xt[q] = lam[q] + d[q];
    const dsReal e2 = adjoint_componentwise(w->A, a, w->xt, rr);
    if (!(e2 <= (dsReal)0.5 * cerr)) break;
    memcpy(lam, w->xt, n3 * sizeof(dsReal));
    cerr = e2;
  }
  for (int i = 0; i < np; i++)
    for (int c = 0; c < 3; c++) af[3 * (size_t)i + c] = m->mass[i] > 0 ? h * lam[3 * (size_t)i + c] : 0;
  dsForceLayout L;
  ds__force_layout(m, &L);
  dsReal* scr_k[DS__NFORCE];
  for (int k = 0; k < DS__NFORCE; k++) scr_k[k] = L.count[k] ? scr + L.scratch[k] : NULL;
  const dsReal* gv = m->gravity;
#ifdef _OPENMP
  const int nt = m->nslot + np >= DS__IMP_PAR_MIN ? omp_get_max_threads() : 1;
#else
  const int nt = 1;
#endif
  (void)nt;
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    /* element adjoints at (x', v') from af = h lambda, each into its own slots */
    ds__forces_bwd_all(m, &L, xt1, vt1, act, af, aex, aev, g, adj_act, scr);
#pragma omp barrier
    /* per particle: the slots in the forward's order, then the per-particle
     * models (contact), then the integrator's own terms (top comment) */
#pragma omp for schedule(static)
    for (int i = 0; i < np; i++) {
      dsReal ax[3] = {0, 0, 0}, avl[3] = {0, 0, 0};
      for (int s = m->inc_start[i]; s < m->inc_start[i + 1]; s++) {
        const size_t o = 3 * (size_t)m->inc_slot[s];
        for (int c = 0; c < 3; c++) {
          ax[c] += aex[o + c];
          avl[c] += aev[o + c];
        }
      }
#define DS__IMP_PBWD_ROW(row, name, kind, shared, nshared) \
  DS__IF_PART_##kind(if (ds__##name##_on(m)) ds__##name##_pbwd(m, i, xt1, vt1, af, ax, avl, scr_k[DS__F_##row]);)
      DS_FORCE_MODELS(DS__IMP_PBWD_ROW)
#undef DS__IMP_PBWD_ROW
      const size_t o = 3 * (size_t)i;
      const dsReal mi = m->mass[i];
      if (mi > 0) {
        dsReal dm = 0;
        for (int c = 0; c < 3; c++) {
          adj_x[o + c] += ax[c];
          adj_v[o + c] = mi * lam[o + c];
          if (adj_fext) adj_fext[o + c] = af[o + c];
          dm += (vt1[o + c] - vt[o + c] - h * gv[c]) * lam[o + c];
        }
        g->mass[i] -= dm;
      } else {
        for (int c = 0; c < 3; c++) {
          adj_x[o + c] += ax[c];
          adj_v[o + c] = a[o + c] + h * ax[c] + avl[c];
          if (adj_fext) adj_fext[o + c] = 0;
        }
      }
    }
  }
  /* gravity: h sum_i m_i lambda_i in particle order; shared scalars' partials in element order */
  dsReal sg[3] = {0, 0, 0};
  for (int i = 0; i < np; i++)
    if (m->mass[i] > 0)
      for (int c = 0; c < 3; c++) sg[c] += m->mass[i] * lam[3 * (size_t)i + c];
  for (int c = 0; c < 3; c++) g->gravity[c] += h * sg[c];
  for (int k = 0; k < DS__NFORCE; k++)
    if (ds__forces[k].reduce && L.count[k]) ds__forces[k].reduce(m, scr + L.scratch[k], g);
  return 0;
}

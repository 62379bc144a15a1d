/* Triangle membrane FEM (p, q, r) with activation a; x = [p, q, r].
 *
 * Rest (ds__tri_rest): e1 = (q-p)/|q-p|, n = unit((q-p) x (r-p)), e2 = n x e1;
 * D = [[(q-p).e1, (r-p).e1], [0, (r-p).e2]] (columns: 2-D coordinates of
 * q-p and r-p); Dm = D^-1; A0 = det D / 2.
 *
 * Forward (eq = q-p, er = r-p, wq = vq-vp, wr = vr-vp; kmu = k_mu A0,
 * klam = k_lambda A0, kd = k_damp A0; alpha = 1 + k_mu/k_lambda):
 *   F  = [eq, er] Dm,   Fd = [wq, wr] Dm                         (3x2)
 *   P  = kmu F + kd Fd,  H = P Dm^T,  gq = H[:,0], gr = H[:,1]
 *   n  = eq x er,  A = |n|/2,  n^ = n/|n|,  c = A/A0 - alpha + a
 *   dc/dq = (er x n^)/(2 A0),  dc/dr = (n^ x eq)/(2 A0)
 *   cd = dc/dq . wq + dc/dr . wr
 *   s  = klam c + kd cd  =  k_lambda (A - A0 + a A0) - k_mu A0 + kd cd
 *   gq += dc/dq s,  gr += dc/dr s;   f_q = -gq, f_r = -gr, f_p = gq + gr
 * The second form of s is used: equal to the first, but finite (and
 * differentiable) at k_lambda = 0, and free of a division.
 * Without damping this is minus the gradient of
 *   E = A0 [k_mu/2 |F|^2 + k_lambda/2 c^2];
 * at rest with a = 0 the k_mu F term and the -alpha term cancel: f = 0.
 *
 * Adjoint: adj_gq = adj_f_p - adj_f_q, adj_gr = adj_f_p - adj_f_r, then the
 * chain above in reverse (adj_P = adj_H Dm, adj_F = kmu adj_P, adj_Fd =
 * kd adj_P, adj_eq += adj_F Dm[0,:]^T, ...; adj_A = k_lambda adj_s;
 * n^ and the cross products through dsu_normalize3_bwd / dsu_cross3_bwd).
 *
 * Non-smooth point: a collapsed current triangle (|n|^2 <= DSU_TINY2) has no
 * normal, so dc/dq and dc/dr are undefined: they are taken as zero there (the
 * area term drops out of f and of the gradient; f is the F term alone). */
#ifndef DSIM_ENGINE_FORCE_TRI_H
#define DSIM_ENGINE_FORCE_TRI_H

#include "engine/dense_small.h"
#include "engine/dsmath.h"
#include "engine/force_loop.h"

typedef struct dsTriRest {
  dsReal Dm[4]; /* inverse 2x2 rest matrix, row-major */
  dsReal area;  /* rest area A0 > 0, m^2 */
} dsTriRest;

typedef struct dsTriParam {
  dsReal k_mu;     /* shear stiffness density, N/m (times A0 -> N m) */
  dsReal k_lambda; /* area stiffness density, N/m */
  dsReal k_damp;   /* strain-rate damping density, N s/m */
  dsReal act;      /* activation a (dimensionless; a > 0 contracts) */
} dsTriParam;

/* Rest data from rest positions x0 = [p, q, r]. Returns 0, or DS_ERR_MESH when
 * the rest triangle is degenerate: 2 A0 <= 64 eps (|q-p|^2 + |r-p|^2), or a
 * non-finite coordinate. */
DS_HD DS_INLINE int ds__tri_rest(const dsReal x0[9], dsTriRest* r) {
  dsReal eq[3], er[3], n[3], e1[3], e2[3];
  dsu_sub3(eq, x0 + 3, x0);
  dsu_sub3(er, x0 + 6, x0);
  dsu_cross3(n, eq, er);
  dsReal twoA = dsu_norm3(n);
  dsReal scale = dsu_dot3(eq, eq) + dsu_dot3(er, er);
  if (!(twoA > 64 * DS_REAL_EPS * scale) || !(scale - scale == 0)) return DS_ERR_MESH; /* NaN, Inf */
  dsReal lq = dsu_normalize3(e1, eq);
  dsu_scl3(n, n, 1 / twoA);
  dsu_cross3(e2, n, e1);
  dsReal D[4] = {lq, dsu_dot3(er, e1), 0, dsu_dot3(er, e2)};
  if (dsu_mat2_inv(r->Dm, D) == 0) return DS_ERR_MESH;
  r->area = (dsReal)0.5 * D[0] * D[3];
  if (!(r->area > 0)) return DS_ERR_MESH;
  return 0;
}

DS_HD DS_INLINE void ds__tri_fwd(const dsReal x[9], const dsReal v[9], const dsTriRest* r,
                                const dsTriParam* p, dsReal f[9]) {
  const dsReal* Dm = r->Dm;
  dsReal A0 = r->area;
  dsReal kmu = p->k_mu * A0, kd = p->k_damp * A0;
  dsReal eq[3], er[3], wq[3], wr[3], P0[3], P1[3], gq[3], gr[3];
  dsu_sub3(eq, x + 3, x);
  dsu_sub3(er, x + 6, x);
  dsu_sub3(wq, v + 3, v);
  dsu_sub3(wr, v + 6, v);
  /* P columns: P_j = kmu F_j + kd Fd_j, F_j = eq Dm[0][j] + er Dm[1][j] */
  for (int c = 0; c < 3; c++) {
    P0[c] = kmu * (eq[c] * Dm[0] + er[c] * Dm[2]) + kd * (wq[c] * Dm[0] + wr[c] * Dm[2]);
    P1[c] = kmu * (eq[c] * Dm[1] + er[c] * Dm[3]) + kd * (wq[c] * Dm[1] + wr[c] * Dm[3]);
  }
  /* H = P Dm^T */
  for (int c = 0; c < 3; c++) {
    gq[c] = P0[c] * Dm[0] + P1[c] * Dm[1];
    gr[c] = P0[c] * Dm[2] + P1[c] * Dm[3];
  }
  dsReal n[3], nh[3], dcq[3], dcr[3];
  dsu_cross3(n, eq, er);
  dsReal ln = dsu_normalize3(nh, n);
  if (ln > 0) {
    dsReal i2A0 = 1 / (2 * A0);
    dsu_cross3(dcq, er, nh);
    dsu_scl3(dcq, dcq, i2A0);
    dsu_cross3(dcr, nh, eq);
    dsu_scl3(dcr, dcr, i2A0);
    dsReal cd = dsu_dot3(dcq, wq) + dsu_dot3(dcr, wr);
    dsReal s = p->k_lambda * ((dsReal)0.5 * ln - A0 + p->act * A0) - kmu + kd * cd;
    dsu_addtoscl3(gq, dcq, s);
    dsu_addtoscl3(gr, dcr, s);
  }
  for (int c = 0; c < 3; c++) {
    f[3 + c] = -gq[c];
    f[6 + c] = -gr[c];
    f[c] = gq[c] + gr[c];
  }
}

DS_HD DS_INLINE void ds__tri_bwd(const dsReal x[9], const dsReal v[9], const dsTriRest* r,
                                const dsTriParam* p, const dsReal adj_f[9], dsReal adj_x[9],
                                dsReal adj_v[9], dsTriParam* adj_p) {
  const dsReal* Dm = r->Dm;
  dsReal A0 = r->area;
  dsReal kmu = p->k_mu * A0, kd = p->k_damp * A0;
  dsReal eq[3], er[3], wq[3], wr[3];
  dsu_sub3(eq, x + 3, x);
  dsu_sub3(er, x + 6, x);
  dsu_sub3(wq, v + 3, v);
  dsu_sub3(wr, v + 6, v);

  dsReal agq[3], agr[3]; /* adjoints of gq, gr */
  for (int c = 0; c < 3; c++) {
    agq[c] = adj_f[c] - adj_f[3 + c];
    agr[c] = adj_f[c] - adj_f[6 + c];
  }
  dsReal aeq[3] = {0, 0, 0}, aer[3] = {0, 0, 0}, awq[3] = {0, 0, 0}, awr[3] = {0, 0, 0};

  /* ---- area term: g += dc s ---- */
  dsReal n[3], nh[3];
  dsu_cross3(n, eq, er);
  dsReal ln = dsu_normalize3(nh, n);
  if (ln > 0) {
    dsReal i2A0 = 1 / (2 * A0);
    dsReal dcq[3], dcr[3];
    dsu_cross3(dcq, er, nh);
    dsu_scl3(dcq, dcq, i2A0);
    dsu_cross3(dcr, nh, eq);
    dsu_scl3(dcr, dcr, i2A0);
    dsReal cd = dsu_dot3(dcq, wq) + dsu_dot3(dcr, wr);
    dsReal carea = (dsReal)0.5 * ln - A0 + p->act * A0; /* A - A0 + a A0 */
    dsReal s = p->k_lambda * carea - kmu + kd * cd;

    dsReal as = dsu_dot3(agq, dcq) + dsu_dot3(agr, dcr);
    adj_p->k_lambda += carea * as;
    adj_p->act += p->k_lambda * A0 * as;
    adj_p->k_mu -= A0 * as;
    adj_p->k_damp += A0 * cd * as;
    dsReal acd = kd * as;
    dsReal aA = p->k_lambda * as; /* A = ln/2 */

    /* adjoints of dcq, dcr (from g += dc s and cd = dc . w) */
    dsReal adcq[3], adcr[3];
    for (int c = 0; c < 3; c++) {
      adcq[c] = (s * agq[c] + acd * wq[c]) * i2A0; /* pre-scaled: dc = cross / (2 A0) */
      adcr[c] = (s * agr[c] + acd * wr[c]) * i2A0;
    }
    dsu_addtoscl3(awq, dcq, acd);
    dsu_addtoscl3(awr, dcr, acd);

    dsReal anh[3] = {0, 0, 0}, an[3];
    dsu_cross3_bwd(er, nh, adcq, aer, anh);
    dsu_cross3_bwd(nh, eq, adcr, anh, aeq);
    dsu_scl3(an, nh, (dsReal)0.5 * aA);
    dsu_normalize3_bwd(nh, ln, anh, an);
    dsu_cross3_bwd(eq, er, an, aeq, aer);
  }

  /* ---- F term: g = P Dm^T, P = kmu F + kd Fd ---- */
  dsReal aP0[3], aP1[3], P0F = 0, P1F = 0, P0Fd = 0, P1Fd = 0;
  for (int c = 0; c < 3; c++) {
    aP0[c] = agq[c] * Dm[0] + agr[c] * Dm[2]; /* adj_P = adj_H Dm */
    aP1[c] = agq[c] * Dm[1] + agr[c] * Dm[3];
    dsReal F0 = eq[c] * Dm[0] + er[c] * Dm[2], F1 = eq[c] * Dm[1] + er[c] * Dm[3];
    dsReal Fd0 = wq[c] * Dm[0] + wr[c] * Dm[2], Fd1 = wq[c] * Dm[1] + wr[c] * Dm[3];
    P0F += aP0[c] * F0;
    P1F += aP1[c] * F1;
    P0Fd += aP0[c] * Fd0;
    P1Fd += aP1[c] * Fd1;
    aeq[c] += kmu * (aP0[c] * Dm[0] + aP1[c] * Dm[1]);
    aer[c] += kmu * (aP0[c] * Dm[2] + aP1[c] * Dm[3]);
    awq[c] += kd * (aP0[c] * Dm[0] + aP1[c] * Dm[1]);
    awr[c] += kd * (aP0[c] * Dm[2] + aP1[c] * Dm[3]);
  }
  adj_p->k_mu += A0 * (P0F + P1F);
  adj_p->k_damp += A0 * (P0Fd + P1Fd);

  for (int c = 0; c < 3; c++) {
    adj_x[3 + c] += aeq[c];
    adj_x[6 + c] += aer[c];
    adj_x[c] -= aeq[c] + aer[c];
    adj_v[3 + c] += awq[c];
    adj_v[6 + c] += awr[c];
    adj_v[c] -= awq[c] + awr[c];
  }
}

/* ---- Jacobians (engine/forces.h "Jacobians") ------------------------------------
 * Kx = -df/dx, Kv = -df/dv (9 x 9, [p, q, r]). In the edge variables
 * y = [eq, er], w = [wq, wr] the kernel computes g = [gq, gr] and
 * f = -S^T g (S: y = S x), so Kx = S^T (dg/dy) S, Kv = S^T (dg/dw) S
 * (ds__jac_from_edges). With Q = Dm Dm^T (g's F term is [eq, er] Q times
 * kmu, the Fd term the same in w times kd), a = [dc/dq, dc/dr] = grad_y A / A0
 * and Ha = Hess_y A / A0:
 *   dg/dy = kmu Q (x) I + s Ha + a (k_lambda A0 a + kd Ha w)^T
 *   dg/dw = kd Q (x) I + kd a a^T
 *   Hess_y |n| = Jn^T (I - n^ n^T) Jn / |n| + [[0, -[n^]x], [[n^]x, 0]],
 *   Jn = dn/dy = [-[er]x, [eq]x]  (n = eq x er is bilinear: the second
 *   term is n^ . d2n, whose (eq, er) block is -[n^]x); A = |n| / 2.
 * Symmetric: kmu Q (x) I, s Ha, k_lambda A0 a a^T (the Hessian of E, with
 * the damping force's share of s in s Ha); not symmetric: kd a (Ha w)^T
 * (the area rate's direction turns with x). Kv is symmetric, PSD for
 * kd >= 0. Collapsed triangle: the area terms are zero, as in the force.
 * The activation enters through s only. */
/* dg/dy (Ky) and dg/dw (Kw), 6 x 6 each, in the edge variables */
DS_HD DS_INLINE void ds__tri_jac_edges(const dsReal x[9], const dsReal v[9], const dsTriRest* r, const dsTriParam* p,
                                      dsReal Ky[36], dsReal Kw[36]) {
  const dsReal* Dm = r->Dm;
  const dsReal A0 = r->area;
  const dsReal kmu = p->k_mu * A0, kd = p->k_damp * A0;
  const dsReal Q[4] = {Dm[0] * Dm[0] + Dm[1] * Dm[1], Dm[0] * Dm[2] + Dm[1] * Dm[3],
                       Dm[0] * Dm[2] + Dm[1] * Dm[3], Dm[2] * Dm[2] + Dm[3] * Dm[3]};
  dsReal eq[3], er[3], w[6];
  dsu_sub3(eq, x + 3, x);
  dsu_sub3(er, x + 6, x);
  dsu_sub3(w, v + 3, v);
  dsu_sub3(w + 3, v + 6, v);
  for (int i = 0; i < 6; i++)
    for (int j = 0; j < 6; j++) {
      const dsReal q = (i % 3 == j % 3) ? Q[2 * (i / 3) + j / 3] : 0;
      Ky[6 * i + j] = kmu * q;
      Kw[6 * i + j] = kd * q;
    }
  dsReal n[3], nh[3];
  dsu_cross3(n, eq, er);
  const dsReal ln = dsu_normalize3(nh, n);
  if (ln > 0) {
    const dsReal i2A0 = 1 / (2 * A0), iln = 1 / ln;
    dsReal a[6], Jn[18], T[18], Ha[36], Hw[6];
    dsu_cross3(a, er, nh);
    dsu_scl3(a, a, i2A0);
    dsu_cross3(a + 3, nh, eq);
    dsu_scl3(a + 3, a + 3, i2A0);
    /* Jn (3 x 6) = [-[er]x, [eq]x], [u]x = [[0, -u2, u1], [u2, 0, -u0], [-u1, u0, 0]] */
    const dsReal* col[2] = {er, eq};
    for (int b = 0; b < 2; b++) {
      const dsReal* u = col[b];
      const dsReal sg = b == 0 ? -1 : 1;
      const dsReal X[9] = {0, -u[2], u[1], u[2], 0, -u[0], -u[1], u[0], 0};
      for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) Jn[6 * i + 3 * b + j] = sg * X[3 * i + j];
    }
    /* T = (I - n^ n^T) Jn */
    for (int j = 0; j < 6; j++) {
      const dsReal nj = nh[0] * Jn[j] + nh[1] * Jn[6 + j] + nh[2] * Jn[12 + j];
      for (int i = 0; i < 3; i++) T[6 * i + j] = Jn[6 * i + j] - nh[i] * nj;
    }
    /* Ha = (Jn^T T / |n| + the bilinear term) / (2 A0) */
    const dsReal NX[9] = {0, -nh[2], nh[1], nh[2], 0, -nh[0], -nh[1], nh[0], 0};
    for (int i = 0; i < 6; i++)
      for (int j = 0; j < 6; j++) {
        dsReal h = (Jn[i] * T[j] + Jn[6 + i] * T[6 + j] + Jn[12 + i] * T[12 + j]) * iln;
        if (i < 3 && j >= 3) h -= NX[3 * i + j - 3];
        if (i >= 3 && j < 3) h += NX[3 * (i - 3) + j];
        Ha[6 * i + j] = h * i2A0;
      }
    dsReal cd = 0;
    for (int i = 0; i < 6; i++) {
      cd += a[i] * w[i];
      Hw[i] = 0;
      for (int j = 0; j < 6; j++) Hw[i] += Ha[6 * i + j] * w[j];
    }
    const dsReal s = p->k_lambda * ((dsReal)0.5 * ln - A0 + p->act * A0) - kmu + kd * cd;
    for (int i = 0; i < 6; i++)
      for (int j = 0; j < 6; j++) {
        Ky[6 * i + j] += s * Ha[6 * i + j] + a[i] * (p->k_lambda * A0 * a[j] + kd * Hw[j]);
        Kw[6 * i + j] += kd * a[i] * a[j];
      }
  }
}

DS_HD DS_INLINE void ds__tri_jac(const dsReal x[9], const dsReal v[9], const dsTriRest* r,
                                const dsTriParam* p, dsReal Kx[81], dsReal Kv[81]) {
  dsReal Ky[36], Kw[36];
  ds__tri_jac_edges(x, v, r, p, Ky, Kw);
  ds__jac_from_edges(3, Ky, Kx);
  ds__jac_from_edges(3, Kw, Kv);
}

/* wx Kx + wv Kv (the implicit step's h^2 Kx + h Kv, engine/sparse.c) in
 * one pass: combined in the edge variables (S^T (wx Ky + wv Kw) S), the
 * same matrix up to rounding with one expansion to 9 x 9 instead of two
 * and no 81-entry sum. */
DS_HD DS_INLINE void ds__tri_jac_comb(const dsReal x[9], const dsReal v[9], const dsTriRest* r, const dsTriParam* p,
                                     dsReal wx, dsReal wv, dsReal K[81]) {
  dsReal Ky[36], Kw[36];
  ds__tri_jac_edges(x, v, r, p, Ky, Kw);
  for (int k = 0; k < 36; k++) Ky[k] = wx * Ky[k] + wv * Kw[k];
  ds__jac_from_edges(3, Ky, K);
}

/* ---- loop over the model's triangles ------------------------------------------
 * Slots: 3 per triangle, [p, q, r]; activation: one per triangle (block 1
 * of d->act). */
static inline int ds__tri_count(const dsModel* m) { return m->ntri; }
static inline const int* ds__tri_idx(const dsModel* m) { return m->tri_idx; }

/* triangle e's positions and velocities (from x, v), rest shape and
 * parameters (its activation from act, 0 without) */
DS_HD DS_INLINE void ds__tri_elem_load(const dsModel* m, const dsReal* x, const dsReal* v, const dsReal* act, int e,
                                      dsReal xl[9], dsReal vl[9], dsTriRest* r, dsTriParam* p) {
  const int* idx = m->tri_idx + 3 * (size_t)e;
  for (int k = 0; k < 4; k++) r->Dm[k] = m->tri_Dm[4 * (size_t)e + k];
  r->area = m->tri_area[e];
  p->k_mu = m->tri_k_mu[e];
  p->k_lambda = m->tri_k_lambda[e];
  p->k_damp = m->tri_k_damp[e];
  p->act = act ? act[e] : 0;
  ds__gather3(xl, x, idx, 3);
  ds__gather3(vl, v, idx, 3);
}

/* Element bodies (one triangle; engine/force_loop.h "Bodies"). */
DS_HD DS_INLINE void ds__tri_fwd_elem(const dsModel* m, const dsForceFwd* a, int e) {
  dsReal xl[9], vl[9];
  dsTriRest r;
  dsTriParam p;
  ds__tri_elem_load(m, a->x, a->v, a->act, e, xl, vl, &r, &p);
  ds__tri_fwd(xl, vl, &r, &p, a->ef + 9 * (size_t)e);
}

DS_HD DS_INLINE void ds__tri_bwd_elem(const dsModel* m, const dsForceBwd* a, int e) {
  dsReal xl[9], vl[9], al[9], ax[9] = {0}, avl[9] = {0};
  dsTriRest r;
  dsTriParam p, ap = {0, 0, 0, 0};
  ds__tri_elem_load(m, a->x, a->v, a->act, e, xl, vl, &r, &p);
  ds__gather3(al, a->af, m->tri_idx + 3 * (size_t)e, 3);
  ds__tri_bwd(xl, vl, &r, &p, al, ax, avl, &ap);
  for (int k = 0; k < 9; k++) {
    a->aex[9 * (size_t)e + k] = ax[k];
    a->aev[9 * (size_t)e + k] = avl[k];
  }
  dsGrad* g = a->g;
  g->tri_k_mu[e] += ap.k_mu;
  g->tri_k_lambda[e] += ap.k_lambda;
  g->tri_k_damp[e] += ap.k_damp;
  if (a->adj_act) a->adj_act[e] = ap.act;
}

/* Kx, Kv (81 each) of triangle e at a->x, a->v, a->act. */
DS_HD DS_INLINE void ds__tri_jac_elem(const dsModel* m, const dsForceFwd* a, int e, dsReal* Kx, dsReal* Kv) {
  dsReal xl[9], vl[9];
  dsTriRest r;
  dsTriParam p;
  ds__tri_elem_load(m, a->x, a->v, a->act, e, xl, vl, &r, &p);
  ds__tri_jac(xl, vl, &r, &p, Kx, Kv);
}

/* wx Kx + wv Kv (81) of triangle e (ds__tri_jac_comb) */
DS_HD DS_INLINE void ds__tri_jac_comb_elem(const dsModel* m, const dsForceFwd* a, int e, dsReal wx, dsReal wv,
                                         dsReal* K) {
  dsReal xl[9], vl[9];
  dsTriRest r;
  dsTriParam p;
  ds__tri_elem_load(m, a->x, a->v, a->act, e, xl, vl, &r, &p);
  ds__tri_jac_comb(xl, vl, &r, &p, wx, wv, K);
}

DS__FLATTEN static inline void ds__tri_fwd_loop(const dsModel* m, const dsForceFwd* a) {
  const int n = m->ntri;
#pragma omp for schedule(static) nowait
  for (int e = 0; e < n; e++) ds__tri_fwd_elem(m, a, e);
}

DS__FLATTEN static inline void ds__tri_bwd_loop(const dsModel* m, const dsForceBwd* a) {
  const int n = m->ntri;
#pragma omp for schedule(static) nowait
  for (int e = 0; e < n; e++) ds__tri_bwd_elem(m, a, e);
}

#define DS__FORCE_TRI                                                                           \
  {.name = "tri", .count = ds__tri_count, .nvert = 3, .idx = ds__tri_idx, .act_order = 1,      \
   .fwd = ds__tri_fwd_loop, .bwd = ds__tri_bwd_loop}

#endif

/* Tetrahedron, stable Neo-Hookean with activation a; x = [x0, x1, x2, x3].
 *
 * Rest (ds_tet_rest): Dm = [x1-x0, x2-x0, x3-x0] (columns), B = Dm^-1,
 * V0 = det(Dm)/6 > 0.
 *
 * Forward (c_i = x_i - x0, w_i = v_i - v0 for i = 1..3; Ds = [c1 c2 c3],
 * Vs = [w1 w2 w3]; kmu = k_mu V0, klam = k_lambda V0, kd = k_damp V0;
 * alpha = 1 + 0.75 k_mu/k_lambda):
 *   F  = Ds B,  Fd = Vs B,  Ic = tr(F^T F),  J = det F = det(Ds) det(B)
 *   P  = kmu (1 - 1/(Ic+1)) F + kd Fd,   H = P B^T,  h_i = H[:,i-1]
 *   g1 = det(B) c2 x c3,  g2 = det(B) c3 x c1,  g3 = det(B) c1 x c2   (= dJ/dx_i)
 *   s  = klam (J - alpha + a) + kd sum_i g_i . w_i
 *      = k_lambda V0 (J - 1 + a) - 0.75 kmu + kd sum_i g_i . w_i
 *   h_i += g_i s;  h0 = -(h1 + h2 + h3);  f_k = -h_k
 * The second form of s is used (finite at k_lambda = 0, no division).
 * Without damping f = -grad of E = V0 [mu/2 (Ic-3) - mu/2 log(Ic+1)
 * + lambda/2 (J - alpha + a)^2]; at F = I, a = 0 the force is zero.
 *
 * Adjoint: adj_h_i = adj_f_0 - adj_f_i (i = 1..3) then, in reverse,
 *   adj_s = sum_i adj_h_i . g_i,  adj_g_i = s adj_h_i + kd adj_s w_i
 *   adj_P = adj_H B,  adj_F = phi adj_P + 2 F kmu/(Ic+1)^2 <adj_P, F>,
 *   adj_Fd = kd adj_P,  adj_Ds = adj_F B^T + klam adj_s [g1 g2 g3],
 *   adj_Vs = adj_Fd B^T + kd adj_s [g1 g2 g3],  g_i through dsu_cross3_bwd.
 * An inverted tet (J <= 0) is computed with the same formulas (smooth
 * there); the caller reports it. No non-smooth points inside the kernel
 * (Ic + 1 >= 1). */
#ifndef DSIM_ENGINE_FORCE_TET_H
#define DSIM_ENGINE_FORCE_TET_H

#include "engine/dsmath.h"
#include "engine/force_loop.h"

typedef struct dsTetRest {
  dsReal B[9]; /* Dm^-1, row-major */
  dsReal vol;  /* rest volume V0 > 0, m^3 */
} dsTetRest;

typedef struct dsTetParam {
  dsReal k_mu;     /* shear modulus density, Pa (times V0 -> N m) */
  dsReal k_lambda; /* volume modulus density, Pa */
  dsReal k_damp;   /* strain-rate damping density, Pa s */
  dsReal act;      /* activation a (dimensionless; a > 0 contracts) */
} dsTetParam;

/* Rest data from rest positions x0 = [x0, x1, x2, x3]. Returns 0, or
 * DS_ERR_MESH when the rest tet is inverted or flat:
 * 6 V0 <= 64 eps (sum of squared edge lengths from x0)^(3/2), or non-finite. */
DS_HD DS_INLINE int ds_tet_rest(const dsReal x0[12], dsTetRest* r) {
  dsReal Dm[9], c[3][3];
  for (int i = 0; i < 3; i++) dsu_sub3(c[i], x0 + 3 * (i + 1), x0);
  for (int i = 0; i < 3; i++)
    for (int k = 0; k < 3; k++) Dm[3 * k + i] = c[i][k];
  dsReal det = dsu_mat3_det(Dm);
  dsReal l2 = dsu_dot3(c[0], c[0]) + dsu_dot3(c[1], c[1]) + dsu_dot3(c[2], c[2]);
  if (!(l2 - l2 == 0) || !(det > 64 * DS_REAL_EPS * l2 * ds_sqrt(l2))) return DS_ERR_MESH;
  if (dsu_mat3_inv(r->B, Dm) == 0) return DS_ERR_MESH;
  r->vol = det / 6;
  return 0;
}

/* Shared forward part: F, Ic, J, g_i (dJ/dx_i), c_i, w_i. */
typedef struct dsTet__Fwd {
  dsReal c[3][3], w[3][3]; /* c_i = x_i - x0, w_i = v_i - v0 */
  dsReal F[9], Fd[9];      /* row-major */
  dsReal g[3][3];          /* dJ/dx_i */
  dsReal Ic, J, detB;
} dsTet__Fwd;

DS_HD DS_INLINE void ds__tet_prep(const dsReal x[12], const dsReal v[12], const dsTetRest* r,
                                  dsTet__Fwd* t) {
  dsReal Ds[9], Vs[9];
  for (int i = 0; i < 3; i++) {
    dsu_sub3(t->c[i], x + 3 * (i + 1), x);
    dsu_sub3(t->w[i], v + 3 * (i + 1), v);
    for (int k = 0; k < 3; k++) {
      Ds[3 * k + i] = t->c[i][k];
      Vs[3 * k + i] = t->w[i][k];
    }
  }
  dsu_mat3_mul(t->F, Ds, r->B);
  dsu_mat3_mul(t->Fd, Vs, r->B);
  t->Ic = dsu_mat3_ddot(t->F, t->F);
  t->detB = dsu_mat3_det(r->B);
  dsu_cross3(t->g[0], t->c[1], t->c[2]);
  dsu_cross3(t->g[1], t->c[2], t->c[0]);
  dsu_cross3(t->g[2], t->c[0], t->c[1]);
  /* det(Ds) = c1 . (c2 x c3) */
  t->J = dsu_dot3(t->c[0], t->g[0]) * t->detB;
  for (int i = 0; i < 3; i++) dsu_scl3(t->g[i], t->g[i], t->detB);
}

DS_HD DS_INLINE void ds_tet_fwd(const dsReal x[12], const dsReal v[12], const dsTetRest* r,
                                const dsTetParam* p, dsReal f[12], dsReal* J) {
  dsTet__Fwd t;
  ds__tet_prep(x, v, r, &t);
  dsReal V0 = r->vol;
  dsReal kmu = p->k_mu * V0, kd = p->k_damp * V0;
  dsReal phi = kmu * (1 - 1 / (t.Ic + 1));
  dsReal P[9], H[9];
  for (int k = 0; k < 9; k++) P[k] = phi * t.F[k] + kd * t.Fd[k];
  dsu_mat3_mulT(H, P, r->B);
  dsReal gw = dsu_dot3(t.g[0], t.w[0]) + dsu_dot3(t.g[1], t.w[1]) + dsu_dot3(t.g[2], t.w[2]);
  dsReal s = p->k_lambda * V0 * (t.J - 1 + p->act) - (dsReal)0.75 * kmu + kd * gw;
  for (int c = 0; c < 3; c++) f[c] = 0;
  for (int i = 0; i < 3; i++) {
    for (int c = 0; c < 3; c++) {
      dsReal h = H[3 * c + i] + t.g[i][c] * s;
      f[3 * (i + 1) + c] = -h;
      f[c] += h;
    }
  }
  if (J) *J = t.J;
}

DS_HD DS_INLINE void ds_tet_bwd(const dsReal x[12], const dsReal v[12], const dsTetRest* r,
                                const dsTetParam* p, const dsReal adj_f[12], dsReal adj_x[12],
                                dsReal adj_v[12], dsTetParam* adj_p) {
  dsTet__Fwd t;
  ds__tet_prep(x, v, r, &t);
  const dsReal* B = r->B;
  dsReal V0 = r->vol;
  dsReal kmu = p->k_mu * V0, kd = p->k_damp * V0;
  dsReal ip1 = 1 / (t.Ic + 1);
  dsReal phi = kmu * (1 - ip1);
  dsReal gw = dsu_dot3(t.g[0], t.w[0]) + dsu_dot3(t.g[1], t.w[1]) + dsu_dot3(t.g[2], t.w[2]);
  dsReal Jterm = t.J - 1 + p->act;
  dsReal s = p->k_lambda * V0 * Jterm - (dsReal)0.75 * kmu + kd * gw;

  /* adjoint of H (3x3, column i = adj_h_{i+1}) */
  dsReal aH[9];
  for (int i = 0; i < 3; i++)
    for (int c = 0; c < 3; c++) aH[3 * c + i] = adj_f[c] - adj_f[3 * (i + 1) + c];

  /* volume term h_i += g_i s */
  dsReal as = 0;
  for (int i = 0; i < 3; i++)
    for (int c = 0; c < 3; c++) as += aH[3 * c + i] * t.g[i][c];
  adj_p->k_lambda += V0 * Jterm * as;
  adj_p->act += p->k_lambda * V0 * as;
  adj_p->k_mu -= (dsReal)0.75 * V0 * as;
  adj_p->k_damp += V0 * gw * as;
  dsReal aJ = p->k_lambda * V0 * as, agw = kd * as;

  dsReal ag[3][3], ac[3][3], aw[3][3];
  for (int i = 0; i < 3; i++)
    for (int c = 0; c < 3; c++) {
      ag[i][c] = s * aH[3 * c + i] + agw * t.w[i][c];
      aw[i][c] = agw * t.g[i][c];
      ac[i][c] = aJ * t.g[i][c]; /* J = det(Ds) det(B): dJ/dc_i = g_i */
    }

  /* g_i = det(B) c_j x c_k (cyclic) */
  for (int i = 0; i < 3; i++) dsu_scl3(ag[i], ag[i], t.detB);
  dsu_cross3_bwd(t.c[1], t.c[2], ag[0], ac[1], ac[2]);
  dsu_cross3_bwd(t.c[2], t.c[0], ag[1], ac[2], ac[0]);
  dsu_cross3_bwd(t.c[0], t.c[1], ag[2], ac[0], ac[1]);

  /* elastic + damping: H = P B^T, P = phi F + kd Fd */
  dsReal aP[9];
  dsu_mat3_mul(aP, aH, B);
  dsReal aPF = dsu_mat3_ddot(aP, t.F), aPFd = dsu_mat3_ddot(aP, t.Fd);
  adj_p->k_mu += V0 * (1 - ip1) * aPF;
  adj_p->k_damp += V0 * aPFd;
  dsReal aIc = kmu * ip1 * ip1 * aPF;
  dsReal aF[9], aDs[9], aVs[9], aFd[9];
  for (int k = 0; k < 9; k++) {
    aF[k] = phi * aP[k] + 2 * aIc * t.F[k];
    aFd[k] = kd * aP[k];
  }
  dsu_mat3_mulT(aDs, aF, B); /* F = Ds B -> adj_Ds = adj_F B^T */
  dsu_mat3_mulT(aVs, aFd, B);

  for (int i = 0; i < 3; i++)
    for (int c = 0; c < 3; c++) {
      dsReal ax = ac[i][c] + aDs[3 * c + i];
      dsReal av = aw[i][c] + aVs[3 * c + i];
      adj_x[3 * (i + 1) + c] += ax;
      adj_x[c] -= ax;
      adj_v[3 * (i + 1) + c] += av;
      adj_v[c] -= av;
    }
}

/* ---- loop over the model's tets --------------------------------------------------
 * Slots: 4 per tet, [x0, x1, x2, x3]; activation: one per tet (block 2 of
 * d->act); J = det F per tet into a->J (ds_step reports J <= 0). */
static inline int ds__tet_count(const dsModel* m) { return m->ntet; }
static inline const int* ds__tet_idx(const dsModel* m) { return m->tet_idx; }

/* Element bodies (one tet; engine/force_loop.h "Bodies"). */
DS_HD DS_INLINE void ds__tet_fwd_elem(const dsModel* m, const dsForceFwd* a, int e) {
  dsReal xl[12], vl[12];
  const int* idx = m->tet_idx + 4 * (size_t)e;
  dsTetRest r;
  for (int k = 0; k < 9; k++) r.B[k] = m->tet_B[9 * (size_t)e + k];
  r.vol = m->tet_vol[e];
  dsTetParam p = {m->tet_k_mu[e], m->tet_k_lambda[e], m->tet_k_damp[e], a->act ? a->act[e] : 0};
  ds__gather3(xl, a->x, idx, 4);
  ds__gather3(vl, a->v, idx, 4);
  ds_tet_fwd(xl, vl, &r, &p, a->ef + 12 * (size_t)e, a->J + e);
}

DS_HD DS_INLINE void ds__tet_bwd_elem(const dsModel* m, const dsForceBwd* a, int e) {
  dsReal xl[12], vl[12], al[12], ax[12] = {0}, avl[12] = {0};
  const int* idx = m->tet_idx + 4 * (size_t)e;
  dsTetRest r;
  for (int k = 0; k < 9; k++) r.B[k] = m->tet_B[9 * (size_t)e + k];
  r.vol = m->tet_vol[e];
  dsTetParam p = {m->tet_k_mu[e], m->tet_k_lambda[e], m->tet_k_damp[e], a->act ? a->act[e] : 0};
  dsTetParam ap = {0, 0, 0, 0};
  ds__gather3(xl, a->x, idx, 4);
  ds__gather3(vl, a->v, idx, 4);
  ds__gather3(al, a->af, idx, 4);
  ds_tet_bwd(xl, vl, &r, &p, al, ax, avl, &ap);
  for (int k = 0; k < 12; k++) {
    a->aex[12 * (size_t)e + k] = ax[k];
    a->aev[12 * (size_t)e + k] = avl[k];
  }
  dsGrad* g = a->g;
  g->tet_k_mu[e] += ap.k_mu;
  g->tet_k_lambda[e] += ap.k_lambda;
  g->tet_k_damp[e] += ap.k_damp;
  if (a->adj_act) a->adj_act[e] = ap.act;
}

static inline void ds__tet_fwd_loop(const dsModel* m, const dsForceFwd* a) {
  const int n = m->ntet;
#pragma omp for schedule(static) nowait
  for (int e = 0; e < n; e++) ds__tet_fwd_elem(m, a, e);
}

static inline void ds__tet_bwd_loop(const dsModel* m, const dsForceBwd* a) {
  const int n = m->ntet;
#pragma omp for schedule(static) nowait
  for (int e = 0; e < n; e++) ds__tet_bwd_elem(m, a, e);
}

#define DS__FORCE_TET                                                                           \
  {.name = "tet", .count = ds__tet_count, .nvert = 4, .idx = ds__tet_idx, .act_order = 2,      \
   .fwd = ds__tet_fwd_loop, .bwd = ds__tet_bwd_loop}

#endif

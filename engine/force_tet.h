/* Tetrahedron, stable Neo-Hookean with activation a; x = [x0, x1, x2, x3].
 *
 * Rest (ds__tet_rest): Dm = [x1-x0, x2-x0, x3-x0] (columns), B = Dm^-1,
 * V0 = det(Dm)/6 > 0, and the kernels' rest data M = B B^T (symmetric;
 * M_ij = b_i . b_j for the rows b_i of B) and det B.
 *
 * Forward (c_i = x_i - x0, w_i = v_i - v0 for i = 1..3; Ds = [c1 c2 c3],
 * Vs = [w1 w2 w3]; kmu = k_mu V0, klam = k_lambda V0, kd = k_damp V0;
 * alpha = 1 + 0.75 k_mu/k_lambda). With F = Ds B, Fd = Vs B:
 *   Ic = tr(F^T F) = sum_ij (c_i . c_j) M_ij,   J = det F = det(Ds) det(B)
 *   P  = phi F + kd Fd,  phi = kmu (1 - 1/(Ic+1))
 *   H  = P B^T = Q M,  Q = phi Ds + kd Vs:  h_j = sum_i q_i M_ij,
 *        q_i = phi c_i + kd w_i (column j of H is h_j)
 *   g'_1 = c2 x c3,  g'_2 = c3 x c1,  g'_3 = c1 x c2  (dJ/dx_i = det(B) g'_i)
 *   s  = klam (J - alpha + a) + kd sum_i dJ/dx_i . w_i
 *      = k_lambda V0 (J - 1 + a) - 0.75 kmu + kd det(B) sum_i g'_i . w_i
 *   h_j += g'_j s det(B);  h_0 = -(h_1 + h_2 + h_3);  f_k = -h_k
 * F and Fd are never formed: through M the kernel needs neither B nor a
 * 3x3 product per matrix (a third fewer operations than the F form).
 * The second form of s is used (finite at k_lambda = 0, no division).
 * Without damping f = -grad of E = V0 [mu/2 (Ic-3) - mu/2 log(Ic+1)
 * + lambda/2 (J - alpha + a)^2]; at F = I, a = 0 the force is zero.
 *
 * Adjoint: adj_h_j = adj_f_0 - adj_f_j (j = 1..3) then, in reverse
 * (sd = s det B, gw = det(B) sum_i g'_i . w_i):
 *   adj_s = det(B) sum_j adj_h_j . g'_j,  adj_g'_j = sd adj_h_j + kd det(B) adj_s w_j,
 *   adj_w_j = kd det(B) adj_s g'_j,  adj_c_j = klam det(B) adj_s g'_j (J),
 *   g'_j through dsu_cross3_bwd,
 *   adj_q_i = sum_j adj_h_j M_ij,  adj_phi = sum_i adj_q_i . c_i,
 *   adj_Ic = kmu adj_phi / (Ic+1)^2,
 *   adj_c_i += phi adj_q_i + 2 adj_Ic sum_j M_ij c_j,  adj_w_i += kd adj_q_i,
 *   parameters: k_mu V0 (1 - 1/(Ic+1)) adj_phi - 0.75 V0 adj_s,
 *   k_lambda V0 (J - 1 + a) adj_s, k_damp V0 (gw adj_s + sum_i adj_q_i . w_i),
 *   a k_lambda V0 adj_s.
 * An inverted tet (J <= 0) is computed with the same formulas (smooth
 * there); the caller reports it. No non-smooth points inside the kernel
 * (Ic + 1 >= 1 for any state: Ic = |F|^2 in exact arithmetic). */
#ifndef DSIM_ENGINE_FORCE_TET_H
#define DSIM_ENGINE_FORCE_TET_H

#include "engine/dense_small.h"
#include "engine/dsmath.h"
#include "engine/force_loop.h"

/* the rest data of one tet in dsTetRest.M: M00 M01 M02 M11 M12 M22 of
 * M = B B^T, then det B (the first rows of the model's tet.M, whose last
 * row is V0: include/dsim/engine.h) */
#define DS_TET_NREST 7

typedef struct dsTetRest {
  dsReal B[9];              /* Dm^-1, row-major */
  dsReal vol;               /* rest volume V0 > 0, m^3 */
  dsReal M[DS_TET_NREST];   /* M = B B^T (00 01 02 11 12 22), det B */
} dsTetRest;

typedef struct dsTetParam {
  dsReal k_mu;     /* shear modulus density, Pa (times V0 -> N m) */
  dsReal k_lambda; /* volume modulus density, Pa */
  dsReal k_damp;   /* strain-rate damping density, Pa s */
  dsReal act;      /* activation a (dimensionless; a > 0 contracts) */
} dsTetParam;

/* M and det B from B (row-major) into M[DS_TET_NREST]. */
DS_HD DS_INLINE void ds__tet_rest_metric(const dsReal B[9], dsReal M[DS_TET_NREST]) {
  M[0] = dsu_dot3(B, B);
  M[1] = dsu_dot3(B, B + 3);
  M[2] = dsu_dot3(B, B + 6);
  M[3] = dsu_dot3(B + 3, B + 3);
  M[4] = dsu_dot3(B + 3, B + 6);
  M[5] = dsu_dot3(B + 6, B + 6);
  M[6] = dsu_mat3_det(B);
}

/* Rest data from rest positions x0 = [x0, x1, x2, x3]. Returns 0, or
 * DS_ERR_MESH when the rest tet is inverted or flat:
 * 6 V0 <= 64 eps (sum of squared edge lengths from x0)^(3/2), or non-finite. */
DS_HD DS_INLINE int ds__tet_rest(const dsReal x0[12], dsTetRest* r) {
  dsReal Dm[9], c[3][3];
  for (int i = 0; i < 3; i++) dsu_sub3(c[i], x0 + 3 * (i + 1), x0);
  for (int i = 0; i < 3; i++)
    for (int k = 0; k < 3; k++) Dm[3 * k + i] = c[i][k];
  dsReal det = dsu_mat3_det(Dm);
  dsReal l2 = dsu_dot3(c[0], c[0]) + dsu_dot3(c[1], c[1]) + dsu_dot3(c[2], c[2]);
  if (!(l2 - l2 == 0) || !(det > 64 * DS_REAL_EPS * l2 * dsu_sqrt(l2))) return DS_ERR_MESH;
  if (dsu_mat3_inv(r->B, Dm) == 0) return DS_ERR_MESH;
  r->vol = det / 6;
  ds__tet_rest_metric(r->B, r->M);
  return 0;
}

/* Shared forward part: c_i, w_i, g'_i, Ic, J, sum_i g'_i . w_i. */
typedef struct dsTet__Fwd {
  dsReal c[3][3], w[3][3]; /* c_i = x_i - x0, w_i = v_i - v0 */
  dsReal g[3][3];          /* g'_i = c_j x c_k (cyclic); dJ/dx_i = det(B) g'_i */
  dsReal Ic, J, gw;        /* gw = sum_i g'_i . w_i */
} dsTet__Fwd;

/* Ic = sum_ij (c_i . c_j) M_ij: diagonal terms, then twice the others */
DS_HD DS_INLINE dsReal ds__tet_ic(const dsReal c[3][3], const dsReal* M) {
  const dsReal d = dsu_dot3(c[0], c[0]) * M[0] + dsu_dot3(c[1], c[1]) * M[3] + dsu_dot3(c[2], c[2]) * M[5];
  const dsReal o = dsu_dot3(c[0], c[1]) * M[1] + dsu_dot3(c[0], c[2]) * M[2] + dsu_dot3(c[1], c[2]) * M[4];
  return d + 2 * o;
}

DS_HD DS_INLINE void ds__tet_prep(const dsReal x[12], const dsReal v[12], const dsTetRest* r,
                                  dsTet__Fwd* t) {
  for (int i = 0; i < 3; i++) {
    dsu_sub3(t->c[i], x + 3 * (i + 1), x);
    dsu_sub3(t->w[i], v + 3 * (i + 1), v);
  }
  t->Ic = ds__tet_ic(t->c, r->M);
  dsu_cross3(t->g[0], t->c[1], t->c[2]);
  dsu_cross3(t->g[1], t->c[2], t->c[0]);
  dsu_cross3(t->g[2], t->c[0], t->c[1]);
  /* det(Ds) = c1 . (c2 x c3) */
  t->J = dsu_dot3(t->c[0], t->g[0]) * r->M[6];
  t->gw = dsu_dot3(t->g[0], t->w[0]) + dsu_dot3(t->g[1], t->w[1]) + dsu_dot3(t->g[2], t->w[2]);
}

/* the row of M_ij among the packed rows 00 01 02 11 12 22 (i, j < 3) */
DS_HD DS_INLINE int ds__tet_mi(int i, int j) {
  const int lo = i < j ? i : j, hi = i < j ? j : i;
  return lo == 0 ? hi : lo + hi + 1;
}
DS_HD DS_INLINE dsReal ds__tet_m(const dsReal* M, int i, int j) { return M[ds__tet_mi(i, j)]; }

DS_HD DS_INLINE void ds__tet_fwd(const dsReal x[12], const dsReal v[12], const dsTetRest* r,
                                const dsTetParam* p, dsReal f[12], dsReal* J) {
  dsTet__Fwd t;
  ds__tet_prep(x, v, r, &t);
  const dsReal* M = r->M;
  const dsReal detB = M[6];
  dsReal V0 = r->vol;
  dsReal kmu = p->k_mu * V0, kd = p->k_damp * V0;
  dsReal phi = kmu * (1 - 1 / (t.Ic + 1));
  dsReal q[3][3];
  for (int i = 0; i < 3; i++)
    for (int c = 0; c < 3; c++) q[i][c] = phi * t.c[i][c] + kd * t.w[i][c];
  dsReal s = p->k_lambda * V0 * (t.J - 1 + p->act) - (dsReal)0.75 * kmu + kd * (t.gw * detB);
  dsReal sd = s * detB;
  for (int c = 0; c < 3; c++) f[c] = 0;
  for (int j = 0; j < 3; j++) {
    const dsReal m0 = ds__tet_m(M, 0, j), m1 = ds__tet_m(M, 1, j), m2 = ds__tet_m(M, 2, j);
    for (int c = 0; c < 3; c++) {
      dsReal h = (q[0][c] * m0 + q[1][c] * m1 + q[2][c] * m2) + t.g[j][c] * sd;
      f[3 * (j + 1) + c] = -h;
      f[c] += h;
    }
  }
  if (J) *J = t.J;
}

DS_HD DS_INLINE void ds__tet_bwd(const dsReal x[12], const dsReal v[12], const dsTetRest* r,
                                const dsTetParam* p, const dsReal adj_f[12], dsReal adj_x[12],
                                dsReal adj_v[12], dsTetParam* adj_p) {
  dsTet__Fwd t;
  ds__tet_prep(x, v, r, &t);
  const dsReal* M = r->M;
  const dsReal detB = M[6];
  dsReal V0 = r->vol;
  dsReal kmu = p->k_mu * V0, kd = p->k_damp * V0;
  dsReal ip1 = 1 / (t.Ic + 1);
  dsReal phi = kmu * (1 - ip1);
  dsReal gwb = t.gw * detB;
  dsReal Jterm = t.J - 1 + p->act;
  dsReal s = p->k_lambda * V0 * Jterm - (dsReal)0.75 * kmu + kd * gwb;
  dsReal sd = s * detB;

  /* adjoint of h_j (j = 0..2 here for h_1..h_3) */
  dsReal aH[3][3];
  for (int j = 0; j < 3; j++)
    for (int c = 0; c < 3; c++) aH[j][c] = adj_f[c] - adj_f[3 * (j + 1) + c];

  /* volume term h_j += g'_j s det(B) */
  dsReal asd = 0;
  for (int j = 0; j < 3; j++)
    for (int c = 0; c < 3; c++) asd += aH[j][c] * t.g[j][c];
  dsReal as = asd * detB;
  adj_p->k_lambda += V0 * Jterm * as;
  adj_p->act += p->k_lambda * V0 * as;
  adj_p->k_mu -= (dsReal)0.75 * V0 * as;
  adj_p->k_damp += V0 * gwb * as;
  dsReal aJd = p->k_lambda * V0 * as * detB; /* adjoint of det(Ds) */
  dsReal agw = kd * as * detB;               /* adjoint of sum_i g'_i . w_i */

  dsReal ag[3][3], ac[3][3], aw[3][3];
  for (int j = 0; j < 3; j++)
    for (int c = 0; c < 3; c++) {
      ag[j][c] = sd * aH[j][c] + agw * t.w[j][c];
      aw[j][c] = agw * t.g[j][c];
      ac[j][c] = aJd * t.g[j][c]; /* d det(Ds)/dc_j = g'_j */
    }
  dsu_cross3_bwd(t.c[1], t.c[2], ag[0], ac[1], ac[2]);
  dsu_cross3_bwd(t.c[2], t.c[0], ag[1], ac[2], ac[0]);
  dsu_cross3_bwd(t.c[0], t.c[1], ag[2], ac[0], ac[1]);

  /* elastic + damping: h_j = sum_i q_i M_ij, q_i = phi c_i + kd w_i */
  dsReal aq[3][3];
  for (int i = 0; i < 3; i++) {
    const dsReal m0 = ds__tet_m(M, i, 0), m1 = ds__tet_m(M, i, 1), m2 = ds__tet_m(M, i, 2);
    for (int c = 0; c < 3; c++) aq[i][c] = aH[0][c] * m0 + aH[1][c] * m1 + aH[2][c] * m2;
  }
  dsReal aphi = dsu_dot3(aq[0], t.c[0]) + dsu_dot3(aq[1], t.c[1]) + dsu_dot3(aq[2], t.c[2]);
  dsReal akd = dsu_dot3(aq[0], t.w[0]) + dsu_dot3(aq[1], t.w[1]) + dsu_dot3(aq[2], t.w[2]);
  adj_p->k_mu += V0 * (1 - ip1) * aphi;
  adj_p->k_damp += V0 * akd;
  dsReal aIc2 = 2 * (kmu * ip1 * ip1 * aphi);
  for (int i = 0; i < 3; i++) {
    const dsReal m0 = ds__tet_m(M, i, 0), m1 = ds__tet_m(M, i, 1), m2 = ds__tet_m(M, i, 2);
    for (int c = 0; c < 3; c++) {
      const dsReal mc = t.c[0][c] * m0 + t.c[1][c] * m1 + t.c[2][c] * m2; /* (Ds M)_ci */
      const dsReal ax = ac[i][c] + (phi * aq[i][c] + aIc2 * mc);
      const dsReal av = aw[i][c] + kd * aq[i][c];
      adj_x[3 * (i + 1) + c] += ax;
      adj_x[c] -= ax;
      adj_v[3 * (i + 1) + c] += av;
      adj_v[c] -= av;
    }
  }
}

/* ---- Jacobians (engine/forces.h "Jacobians") ------------------------------------
 * Kx = -df/dx, Kv = -df/dv (12 x 12, [x0..x3]). In the edge variables
 * y = [c1, c2, c3] (w = [w1, w2, w3]) the kernel computes h = [h1, h2, h3]
 * and f = -S^T h, so Kx = S^T (dh/dy) S, Kv = S^T (dh/dw) S. With
 * m_j = sum_i M_ij c_i (grad_y Ic = 2 m), G = [g'_1, g'_2, g'_3] =
 * grad_y det(Ds), Hd = Hess_y det(Ds) and b = det B:
 *   dh/dy = phi M (x) I + 2 kmu/(Ic+1)^2 m m^T                (deviatoric)
 *         + sd Hd + k_lambda V0 b^2 G G^T + kd b^2 G (Hd w)^T   (volume)
 *   dh/dw = kd M (x) I + kd b^2 G G^T
 *   Hd: block (i, j) = [e_ij]x with e_ij = -c_k, e_ji = c_k for (i, j, k)
 *       cyclic, e_ii = 0 (det = c1 . (c2 x c3) is trilinear), so
 *   (Hd w)_i = c_j x w_k - c_k x w_j   ((i, j, k) cyclic).
 * Every term is a Kronecker product with I or a rank-one product of
 * 3-vectors, and S^T maps both to the same kind: a vector z over the
 * edges lifts to the vertices as z~ = S^T z (z~_0 = -sum_a z_a,
 * z~_{a+1} = z_a), M to M~ = S^T M S (4 x 4), [e]x blocks to the
 * [e~_pq]x of the Hessian of det over the vertices (e~_pq = -e~_qp, the
 * difference of the other two vertices' edges, up to sign:
 * e~_01 = c2 - c3, e~_02 = c3 - c1, e~_03 = c1 - c2, e~_12 = -c3,
 * e~_13 = c2, e~_23 = -c1). So the 4 x 4 grid of 3 x 3 blocks of
 * wx Kx + wv Kv is assembled directly:
 *   block (p, q) = al M~_pq I + bm m~_p m~_q^T + gs [e~_pq]x + kg g~_p g~_q^T
 *                + ka g~_p (Hd w)~_q^T
 *   al = wx phi + wv kd,  bm = 2 wx kmu/(Ic+1)^2,  gs = wx sd,
 *   kg = b^2 (wx k_lambda V0 + wv kd),  ka = wx kd b^2,
 * the symmetric part (all but the ka term) symmetric bit for bit. The activation enters
 * through s (in sd) only. The ka term is the only unsymmetric one (the
 * volume rate's direction turns with x); the rest is the Hessian of E
 * plus the damping share of s in sd Hd. Kv is symmetric, PSD for
 * kd >= 0. The elastic part is indefinite (sd Hd has eigenvalues of both
 * signs): Newton projects it. (Against forming the 9 x 9 dh/dy and
 * mapping it with S: the same values up to rounding, a third of the
 * instructions on control-fem, and Newton's h Kv + h^2 Kx in one pass.) */
typedef struct dsTet__Jac {
  dsReal Mt[16];                        /* M~ = S^T M S, row-major 4 x 4 */
  dsReal mt[4][3], gt[4][3], hw[4][3];  /* m~, g~ = grad_x det(Ds), (Hd w)~ */
  dsReal et[6][3];                      /* e~_pq, p < q: 01 02 03 12 13 23 */
  dsReal phi, cm, sd, kl, kd, b2;       /* cm = 2 kmu/(Ic+1)^2, kl = k_lambda V0 */
} dsTet__Jac;

/* z~ = S^T z: z~_0 = -(z_0 + z_1 + z_2), z~_{a+1} = z_a */
DS_HD DS_INLINE void ds__tet_lift(const dsReal z[3][3], dsReal zt[4][3]) {
  for (int c = 0; c < 3; c++) {
    zt[0][c] = -(z[0][c] + z[1][c] + z[2][c]);
    for (int a = 0; a < 3; a++) zt[a + 1][c] = z[a][c];
  }
}

DS_HD DS_INLINE void ds__tet_jac_prep(const dsReal x[12], const dsReal v[12], const dsTetRest* r,
                                     const dsTetParam* p, dsTet__Jac* q) {
  dsTet__Fwd t;
  ds__tet_prep(x, v, r, &t);
  const dsReal* M = r->M;
  const dsReal detB = M[6], V0 = r->vol;
  const dsReal kmu = p->k_mu * V0, kd = p->k_damp * V0;
  const dsReal ip1 = 1 / (t.Ic + 1);
  q->phi = kmu * (1 - ip1);
  q->cm = 2 * kmu * ip1 * ip1;
  q->sd = (p->k_lambda * V0 * (t.J - 1 + p->act) - (dsReal)0.75 * kmu + kd * (t.gw * detB)) * detB;
  q->kl = p->k_lambda * V0;
  q->kd = kd;
  q->b2 = detB * detB;
  dsReal m[3][3], hw[3][3], u[3], s[3];
  dsReal rs[3] = {0, 0, 0}, tot = 0;
  for (int a = 0; a < 3; a++)
    for (int b = 0; b < 3; b++) {
      const dsReal mab = ds__tet_m(M, a, b);
      q->Mt[4 * (a + 1) + b + 1] = mab;
      rs[a] += mab;
    }
  for (int a = 0; a < 3; a++) {
    q->Mt[4 * (a + 1)] = q->Mt[a + 1] = -rs[a];
    tot += rs[a];
    const int j = (a + 1) % 3, k = (a + 2) % 3;
    for (int c = 0; c < 3; c++)
      m[a][c] = t.c[0][c] * ds__tet_m(M, 0, a) + t.c[1][c] * ds__tet_m(M, 1, a) + t.c[2][c] * ds__tet_m(M, 2, a);
    dsu_cross3(u, t.c[j], t.w[k]);
    dsu_cross3(s, t.c[k], t.w[j]);
    dsu_sub3(hw[a], u, s);
  }
  q->Mt[0] = tot;
  ds__tet_lift(m, q->mt);
  ds__tet_lift(t.g, q->gt);
  ds__tet_lift(hw, q->hw);
  for (int c = 0; c < 3; c++) { /* 0-based edges: c[a] is c_{a+1} above */
    q->et[0][c] = t.c[1][c] - t.c[2][c];
    q->et[1][c] = t.c[2][c] - t.c[0][c];
    q->et[2][c] = t.c[0][c] - t.c[1][c];
    q->et[3][c] = -t.c[2][c];
    q->et[4][c] = t.c[1][c];
    q->et[5][c] = -t.c[0][c];
  }
}

/* Row r of vertex p's rows of K (r a constant where inlined, so x[] stays
 * in registers): entry (o, c) is
 *   ((bm (m~_pr m~_oc) + kg (g~_pr g~_oc)) + X_c) + ka g~_pr (Hd w)~_oc,
 * X = row r of al M~_po I + [E_po]x, E_po = gs e~_po: a product of two
 * entries first and the same sums in the same order on both sides of the
 * diagonal, so all but the ka term is symmetric bit for bit. */
DS_HD DS_INLINE void ds__tet_jac_row(const dsReal mf[12], const dsReal gf[12], const dsReal hf[12],
                                    const dsReal d[4], const dsReal E[4][3], dsReal bm, dsReal kg,
                                    dsReal ka, int p, int r, dsReal row[12]) {
  const int r1 = r == 2 ? 0 : r + 1, r2 = r == 0 ? 2 : r - 1;
  const dsReal a = mf[3 * p + r], g = gf[3 * p + r], kp = ka * g;
  for (int o = 0; o < 4; o++) { /* row r of [e]x: (r, r1) = -e_r2, (r, r2) = e_r1 */
    dsReal x[3];
    x[r] = d[o];
    x[r1] = -E[o][r2];
    x[r2] = E[o][r1];
    for (int c = 0; c < 3; c++)
      row[3 * o + c] = ((bm * (a * mf[3 * o + c]) + kg * (g * gf[3 * o + c])) + x[c]) + kp * hf[3 * o + c];
  }
}

/* K = wx Kx + wv Kv (12 x 12, row-major) from the prepared terms. */
DS_HD DS_INLINE void ds__tet_jac_blocks(const dsTet__Jac* q, dsReal wx, dsReal wv, dsReal K[144]) {
  const dsReal al = wx * q->phi + wv * q->kd, bm = wx * q->cm, gs = wx * q->sd;
  const dsReal kg = q->b2 * (wx * q->kl + wv * q->kd), ka = wx * q->kd * q->b2;
  dsReal mf[12], gf[12], hf[12]; /* local: K aliases none of them */
  for (int j = 0; j < 12; j++) {
    mf[j] = q->mt[j / 3][j % 3];
    gf[j] = q->gt[j / 3][j % 3];
    hf[j] = q->hw[j / 3][j % 3];
  }
  dsReal E[4][4][3], d[4][4]; /* gs e~_po (antisymmetric in p, o); al M~_po */
  int pq = 0;
  for (int p = 0; p < 4; p++) {
    for (int o = 0; o < 4; o++) d[p][o] = al * q->Mt[4 * p + o];
    for (int c = 0; c < 3; c++) E[p][p][c] = 0;
    for (int o = p + 1; o < 4; o++, pq++)
      for (int c = 0; c < 3; c++) {
        E[p][o][c] = gs * q->et[pq][c];
        E[o][p][c] = -E[p][o][c];
      }
  }
  for (int p = 0; p < 4; p++) {
    ds__tet_jac_row(mf, gf, hf, d[p], E[p], bm, kg, ka, p, 0, K + 12 * (3 * p));
    ds__tet_jac_row(mf, gf, hf, d[p], E[p], bm, kg, ka, p, 1, K + 12 * (3 * p + 1));
    ds__tet_jac_row(mf, gf, hf, d[p], E[p], bm, kg, ka, p, 2, K + 12 * (3 * p + 2));
  }
}

DS_HD DS_INLINE void ds__tet_jac(const dsReal x[12], const dsReal v[12], const dsTetRest* r,
                                const dsTetParam* p, dsReal Kx[144], dsReal Kv[144]) {
  dsTet__Jac q;
  ds__tet_jac_prep(x, v, r, p, &q);
  ds__tet_jac_blocks(&q, 1, 0, Kx);
  ds__tet_jac_blocks(&q, 0, 1, Kv);
}

/* K = wx Kx + wv Kv in one pass (Newton's h^2 Kx + h Kv: engine/sparse.c) */
DS_HD DS_INLINE void ds__tet_jac_comb(const dsReal x[12], const dsReal v[12], const dsTetRest* r,
                                     const dsTetParam* p, dsReal wx, dsReal wv, dsReal K[144]) {
  dsTet__Jac q;
  ds__tet_jac_prep(x, v, r, p, &q);
  ds__tet_jac_blocks(&q, wx, wv, K);
}

/* ---- loop over the model's tets --------------------------------------------------
 * Slots: 4 per tet, [x0, x1, x2, x3]; activation: one per tet (block 2 of
 * d->act); J = det F per tet into a->J (ds_step reports J <= 0). */
static inline int ds__tet_count(const dsModel* m) { return m->ntet; }
static inline const int* ds__tet_idx(const dsModel* m) { return m->tet_idx; }

/* Element bodies (one tet; engine/force_loop.h "Bodies"). */
/* The kernels' rest data of tet e (V0, M, det B; not B, which they do not use). */
DS_HD DS_INLINE void ds__tet_rest_load(const dsModel* m, int e, dsTetRest* r) {
  const dsReal* p = m->tet_M + DS_TET_M_AT(e, 0);
  for (int k = 0; k < DS_TET_NREST; k++) r->M[k] = p[k * DS_TET_LANES];
  r->vol = p[DS_TET_NREST * DS_TET_LANES];
}
/* Tet e's vertices (x, v at a), rest data and parameters (activation from a). */
DS_HD DS_INLINE void ds__tet_elem_load(const dsModel* m, const dsForceFwd* a, int e, dsReal xl[12], dsReal vl[12],
                                       dsTetRest* r, dsTetParam* p) {
  const int* idx = m->tet_idx + 4 * (size_t)e;
  ds__tet_rest_load(m, e, r);
  const dsTetParam pe = {m->tet_k_mu[e], m->tet_k_lambda[e], m->tet_k_damp[e], a->act ? a->act[e] : 0};
  *p = pe;
  ds__gather3(xl, a->x, idx, 4);
  ds__gather3(vl, a->v, idx, 4);
}

DS_HD DS_INLINE void ds__tet_fwd_elem(const dsModel* m, const dsForceFwd* a, int e) {
  dsReal xl[12], vl[12];
  dsTetRest r;
  dsTetParam p;
  ds__tet_elem_load(m, a, e, xl, vl, &r, &p);
  ds__tet_fwd(xl, vl, &r, &p, a->ef + 12 * (size_t)e, a->J + e);
}

DS_HD DS_INLINE void ds__tet_bwd_elem(const dsModel* m, const dsForceBwd* a, int e) {
  dsReal xl[12], vl[12], al[12], ax[12] = {0}, avl[12] = {0};
  const int* idx = m->tet_idx + 4 * (size_t)e;
  dsTetRest r;
  ds__tet_rest_load(m, e, &r);
  dsTetParam p = {m->tet_k_mu[e], m->tet_k_lambda[e], m->tet_k_damp[e], a->act ? a->act[e] : 0};
  dsTetParam ap = {0, 0, 0, 0};
  ds__gather3(xl, a->x, idx, 4);
  ds__gather3(vl, a->v, idx, 4);
  ds__gather3(al, a->af, idx, 4);
  ds__tet_bwd(xl, vl, &r, &p, al, ax, avl, &ap);
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

/* Kx, Kv (144 each) of tet e at a->x, a->v, a->act (a->J not written). */
DS_HD DS_INLINE void ds__tet_jac_elem(const dsModel* m, const dsForceFwd* a, int e, dsReal* Kx, dsReal* Kv) {
  dsReal xl[12], vl[12];
  dsTetRest r;
  dsTetParam p;
  ds__tet_elem_load(m, a, e, xl, vl, &r, &p);
  ds__tet_jac(xl, vl, &r, &p, Kx, Kv);
}

/* wx Kx + wv Kv (144) of tet e at a->x, a->v, a->act. */
DS_HD DS_INLINE void ds__tet_jac_comb_elem(const dsModel* m, const dsForceFwd* a, int e, dsReal wx, dsReal wv,
                                          dsReal* K) {
  dsReal xl[12], vl[12];
  dsTetRest r;
  dsTetParam p;
  ds__tet_elem_load(m, a, e, xl, vl, &r, &p);
  ds__tet_jac_comb(xl, vl, &r, &p, wx, wv, K);
}

#if defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__)
/* GCC 12 reports lanes of fully written vectors as maybe uninitialized in
 * the AVX2 copies below (lane stores into a zeroed vector) */
#  pragma GCC diagnostic push
#  pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#if defined(__GNUC__) && !defined(__CUDACC__)
#  include <string.h>
/* DS__TL tets at once (CPU): lane l of every vector is tet e0 + l, and the
 * operations are those of ds__tet_prep and ds__tet_fwd above, one for one
 * and in the same order (GCC vector arithmetic rounds each lane as the
 * scalar operation would; -ffp-contract=off keeps products and sums apart),
 * so each tet's force and J are the scalar body's bits (test_force_tet
 * compares them; the golden hashes pin them). Only the gathers and the
 * stores differ. An edit of the scalar kernel must be mirrored here. */
/* DS__TL lanes per vector: 4 doubles or 8 floats (32 bytes, one AVX2
 * register; two SSE2 registers on the baseline copy). */
#define DS__TL (32 / (int)sizeof(dsReal))
_Static_assert(DS__TL == DS_TET_LANES, "tet.M blocks are the quads' lanes");
typedef dsReal dsTet__V __attribute__((vector_size(32)));

/* Lane loads. ds__tet_lanes: p[l][off] into lane l (the compiler builds the
 * vector in registers: no lane-by-lane stores to memory that a vector load
 * would then have to wait for). ds__tet_vload: DS__TL consecutive reals
 * (per-element arrays at element e0). Results go through pointers: a
 * 32-byte vector by value would change the baseline copy's ABI. */
static inline void ds__tet_lanes(dsTet__V* r, const dsReal* const p[DS__TL], size_t off) {
#if DS_SINGLE
  *r = (dsTet__V){p[0][off], p[1][off], p[2][off], p[3][off], p[4][off], p[5][off], p[6][off], p[7][off]};
#else
  *r = (dsTet__V){p[0][off], p[1][off], p[2][off], p[3][off]};
#endif
}
typedef dsReal dsTet__VU __attribute__((vector_size(32), aligned(sizeof(dsReal)), may_alias));
static inline void ds__tet_vload(dsTet__V* r, const dsReal* p) { *r = *(const dsTet__VU*)(const void*)p; }
/* out[12 l + k] = f[k][l], k < 12, l < DS__TL: each lane's 12 values to
 * its element's slots (in double by 4x4 transposes and whole-vector
 * stores; the values are moved, not changed). */
static inline void ds__tet_store12(dsReal* out, const dsTet__V f[12]) {
#if !DS_SINGLE && (defined(__clang__) || __GNUC__ >= 12)
  for (int g = 0; g < 3; g++) {
    const dsTet__V a = f[4 * g], b = f[4 * g + 1], c = f[4 * g + 2], d = f[4 * g + 3];
    const dsTet__V t0 = __builtin_shufflevector(a, b, 0, 4, 2, 6), t1 = __builtin_shufflevector(a, b, 1, 5, 3, 7);
    const dsTet__V t2 = __builtin_shufflevector(c, d, 0, 4, 2, 6), t3 = __builtin_shufflevector(c, d, 1, 5, 3, 7);
    const dsTet__V r0 = __builtin_shufflevector(t0, t2, 0, 1, 4, 5), r1 = __builtin_shufflevector(t1, t3, 0, 1, 4, 5);
    const dsTet__V r2 = __builtin_shufflevector(t0, t2, 2, 3, 6, 7), r3 = __builtin_shufflevector(t1, t3, 2, 3, 6, 7);
    memcpy(out + 4 * g, &r0, sizeof r0);
    memcpy(out + 12 + 4 * g, &r1, sizeof r1);
    memcpy(out + 24 + 4 * g, &r2, sizeof r2);
    memcpy(out + 36 + 4 * g, &r3, sizeof r3);
  }
#else
  for (int l = 0; l < DS__TL; l++)
    for (int k = 0; k < 12; k++) out[12 * l + k] = f[k][l];
#endif
}
/* p[l] += r[l] (each lane's add as the scalar one) */
static inline void ds__tet_vadd_to(dsReal* p, const dsTet__V* r) {
  dsTet__V t;
  memcpy(&t, p, sizeof t);
  t += *r;
  memcpy(p, &t, sizeof t);
}

/* dsu_cross3, dsu_dot3 and dsu_cross3_bwd on lanes (the same formulas) */
static inline void ds__tet_vcross(dsTet__V r[3], const dsTet__V a[3], const dsTet__V b[3]) {
  const dsTet__V r0 = a[1] * b[2] - a[2] * b[1];
  const dsTet__V r1 = a[2] * b[0] - a[0] * b[2];
  const dsTet__V r2 = a[0] * b[1] - a[1] * b[0];
  r[0] = r0;
  r[1] = r1;
  r[2] = r2;
}
static inline void ds__tet_vdot(dsTet__V* r, const dsTet__V a[3], const dsTet__V b[3]) {
  *r = a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}
/* gw = g_0.w_0 + g_1.w_1 + g_2.w_2 */
static inline void ds__tet_vgw(dsTet__V* r, const dsTet__V g[3][3], const dsTet__V w[3][3]) {
  dsTet__V d0, d1, d2;
  ds__tet_vdot(&d0, g[0], w[0]);
  ds__tet_vdot(&d1, g[1], w[1]);
  ds__tet_vdot(&d2, g[2], w[2]);
  *r = d0 + d1 + d2;
}
static inline void ds__tet_vcross_bwd(const dsTet__V a[3], const dsTet__V b[3], const dsTet__V g[3],
                                      dsTet__V adj_a[3], dsTet__V adj_b[3]) {
  dsTet__V ta[3], tb[3];
  ds__tet_vcross(ta, b, g);
  ds__tet_vcross(tb, g, a);
  for (int k = 0; k < 3; k++) adj_a[k] += ta[k];
  for (int k = 0; k < 3; k++) adj_b[k] += tb[k];
}

/* Lanes' inputs and ds__tet_prep on DS__TL tets. */
typedef struct dsTet__Q {
  dsTet__V M[DS_TET_NREST], V0, kmu_d, klam_d, kd_d, act;
  dsTet__V c[3][3], w[3][3], g[3][3], Ic, J, gw;
} dsTet__Q;

/* the lanes of x_k - x_0 for k = 1..3 (c) and of v (w); the vertices
 * unrolled (a loop over them kept its pointers on the stack) */
static inline void ds__tet_lanes_at(const dsReal* xs, const dsReal* vs, const int* id, int k, dsTet__V xv[3],
                                    dsTet__V vv[3]) {
  const dsReal *px[DS__TL], *pv[DS__TL];
  for (int l = 0; l < DS__TL; l++) {
    const size_t i = (size_t)id[4 * l + k];
    px[l] = xs + 3 * i;
    pv[l] = vs + 3 * i;
  }
  for (int c = 0; c < 3; c++) {
    ds__tet_lanes(&xv[c], px, (size_t)c);
    ds__tet_lanes(&vv[c], pv, (size_t)c);
  }
}
static inline void ds__tet_lanes_cw(const dsModel* m, const dsReal* xs, const dsReal* vs, int e0, dsTet__Q* t) {
  const int* id = m->tet_idx + 4 * (size_t)e0;
  dsTet__V x0[3], v0[3], xv[3], vv[3];
  ds__tet_lanes_at(xs, vs, id, 0, x0, v0);
  for (int c = 0; c < 3; c++) {
    ds__tet_lanes_at(xs, vs, id, c + 1, xv, vv);
    for (int k = 0; k < 3; k++) {
      t->c[c][k] = xv[k] - x0[k];
      t->w[c][k] = vv[k] - v0[k];
    }
  }
}

DS__FLATTEN static inline void ds__tet_prep4(const dsModel* m, const dsReal* xs, const dsReal* vs,
                                             const dsReal* acts, int e0, dsTet__Q* t) {
  ds__tet_lanes_cw(m, xs, vs, e0, t);
  const dsReal* pm = m->tet_M + DS_TET_M_AT(e0, 0); /* e0: a block's first tet */
  for (int k = 0; k < DS_TET_NREST; k++) ds__tet_vload(&t->M[k], pm + k * DS__TL);
  ds__tet_vload(&t->V0, pm + DS_TET_NREST * DS__TL);
  ds__tet_vload(&t->kmu_d, m->tet_k_mu + e0);
  ds__tet_vload(&t->klam_d, m->tet_k_lambda + e0);
  ds__tet_vload(&t->kd_d, m->tet_k_damp + e0);
  if (acts)
    ds__tet_vload(&t->act, acts + e0);
  else
    t->act = (dsTet__V){0};
  const dsTet__V* M = t->M;
  dsTet__V d00, d11, d22, d01, d02, d12;
  ds__tet_vdot(&d00, t->c[0], t->c[0]);
  ds__tet_vdot(&d11, t->c[1], t->c[1]);
  ds__tet_vdot(&d22, t->c[2], t->c[2]);
  ds__tet_vdot(&d01, t->c[0], t->c[1]);
  ds__tet_vdot(&d02, t->c[0], t->c[2]);
  ds__tet_vdot(&d12, t->c[1], t->c[2]);
  const dsTet__V dg = d00 * M[0] + d11 * M[3] + d22 * M[5];
  const dsTet__V of = d01 * M[1] + d02 * M[2] + d12 * M[4];
  t->Ic = dg + 2 * of;
  for (int i = 0; i < 3; i++) ds__tet_vcross(t->g[i], t->c[(i + 1) % 3], t->c[(i + 2) % 3]);
  dsTet__V dj;
  ds__tet_vdot(&dj, t->c[0], t->g[0]);
  t->J = dj * M[6];
  ds__tet_vgw(&t->gw, t->g, t->w);
}

/* the packed M_ij (ds__tet_m) */
static inline const dsTet__V* ds__tet_vm(const dsTet__V* M, int i, int j) { return &M[ds__tet_mi(i, j)]; }

DS__FLATTEN static inline void ds__tet_fwd_elem4(const dsModel* m, const dsForceFwd* a, int e0) {
  dsTet__Q t;
  ds__tet_prep4(m, a->x, a->v, a->act, e0, &t);
  const dsTet__V* M = t.M;
  const dsTet__V detB = M[6];
  const dsTet__V V0 = t.V0;
  const dsTet__V kmu = t.kmu_d * V0, kd = t.kd_d * V0;
  const dsTet__V phi = kmu * (1 - 1 / (t.Ic + 1));
  const dsTet__V s = t.klam_d * V0 * (t.J - 1 + t.act) - (dsReal)0.75 * kmu + kd * (t.gw * detB);
  const dsTet__V sd = s * detB;
  dsTet__V f[12];
  /* one component at a time (fewer values live at once than j outer;
   * each h and each f[c] sum is the scalar body's expression) */
  for (int c = 0; c < 3; c++) {
    const dsTet__V q0 = phi * t.c[0][c] + kd * t.w[0][c], q1 = phi * t.c[1][c] + kd * t.w[1][c],
                   q2 = phi * t.c[2][c] + kd * t.w[2][c];
    f[c] = (dsTet__V){0};
    for (int j = 0; j < 3; j++) {
      const dsTet__V h = (q0 * *ds__tet_vm(M, 0, j) + q1 * *ds__tet_vm(M, 1, j) + q2 * *ds__tet_vm(M, 2, j)) +
                         t.g[j][c] * sd;
      f[3 * (j + 1) + c] = -h;
      f[c] += h;
    }
  }
  ds__tet_store12(a->ef + 12 * (size_t)e0, f);
  memcpy(a->J + e0, &t.J, sizeof t.J);
  if (a->bad) { /* ds_step's check: any lane with !(J > 0) (NaN included) */
    dsReal jl[DS__TL];
    memcpy(jl, &t.J, sizeof jl);
    int ok = 1;
    for (int l = 0; l < DS__TL; l++) ok &= jl[l] > 0;
    if (!ok)
      for (int l = 0; l < DS__TL; l++)
        if (!(jl[l] > 0)) ds__atomic_min_int(a->bad, e0 + l);
  }
}

/* ds__tet_bwd and the body's stores on DS__TL tets (the same operations). */
DS__FLATTEN static inline void ds__tet_bwd_elem4(const dsModel* m, const dsForceBwd* a, int e0) {
  dsTet__Q t;
  ds__tet_prep4(m, a->x, a->v, a->act, e0, &t);
  dsTet__V af[12];
  for (int k = 0; k < 4; k++) {
    const dsReal* pa[DS__TL];
    for (int l = 0; l < DS__TL; l++) pa[l] = a->af + 3 * (size_t)m->tet_idx[4 * (size_t)(e0 + l) + k];
    for (int c = 0; c < 3; c++) ds__tet_lanes(&af[3 * k + c], pa, (size_t)c);
  }
  const dsTet__V* M = t.M;
  const dsTet__V detB = M[6];
  const dsTet__V V0 = t.V0, zero = {0};
  const dsTet__V kmu = t.kmu_d * V0, kd = t.kd_d * V0;
  const dsTet__V ip1 = 1 / (t.Ic + 1);
  const dsTet__V phi = kmu * (1 - ip1);
  const dsTet__V gwb = t.gw * detB;
  const dsTet__V Jterm = t.J - 1 + t.act;
  const dsTet__V s = t.klam_d * V0 * Jterm - (dsReal)0.75 * kmu + kd * gwb;
  const dsTet__V sd = s * detB;
  dsTet__V aH[3][3];
  for (int j = 0; j < 3; j++)
    for (int c = 0; c < 3; c++) aH[j][c] = af[c] - af[3 * (j + 1) + c];
  dsTet__V asd = zero;
  for (int j = 0; j < 3; j++)
    for (int c = 0; c < 3; c++) asd += aH[j][c] * t.g[j][c];
  const dsTet__V as = asd * detB;
  dsTet__V ap_klam = zero + V0 * Jterm * as;
  dsTet__V ap_act = zero + t.klam_d * V0 * as;
  dsTet__V ap_kmu = zero - (dsReal)0.75 * V0 * as;
  dsTet__V ap_kd = zero + V0 * gwb * as;
  const dsTet__V aJd = t.klam_d * V0 * as * detB, agw = kd * as * detB;
  dsTet__V ag[3][3], ac[3][3], aw[3][3];
  for (int j = 0; j < 3; j++)
    for (int c = 0; c < 3; c++) {
      ag[j][c] = sd * aH[j][c] + agw * t.w[j][c];
      aw[j][c] = agw * t.g[j][c];
      ac[j][c] = aJd * t.g[j][c];
    }
  ds__tet_vcross_bwd(t.c[1], t.c[2], ag[0], ac[1], ac[2]);
  ds__tet_vcross_bwd(t.c[2], t.c[0], ag[1], ac[2], ac[0]);
  ds__tet_vcross_bwd(t.c[0], t.c[1], ag[2], ac[0], ac[1]);
  dsTet__V aq[3][3];
  for (int i = 0; i < 3; i++) {
    const dsTet__V m0 = *ds__tet_vm(M, i, 0), m1 = *ds__tet_vm(M, i, 1), m2 = *ds__tet_vm(M, i, 2);
    for (int c = 0; c < 3; c++) aq[i][c] = aH[0][c] * m0 + aH[1][c] * m1 + aH[2][c] * m2;
  }
  dsTet__V d0, d1, d2, aphi, akd;
  ds__tet_vdot(&d0, aq[0], t.c[0]);
  ds__tet_vdot(&d1, aq[1], t.c[1]);
  ds__tet_vdot(&d2, aq[2], t.c[2]);
  aphi = d0 + d1 + d2;
  ds__tet_vdot(&d0, aq[0], t.w[0]);
  ds__tet_vdot(&d1, aq[1], t.w[1]);
  ds__tet_vdot(&d2, aq[2], t.w[2]);
  akd = d0 + d1 + d2;
  ap_kmu += V0 * (1 - ip1) * aphi;
  ap_kd += V0 * akd;
  const dsTet__V aIc2 = 2 * (kmu * ip1 * ip1 * aphi);
  dsTet__V ax[12], avl[12];
  for (int k = 0; k < 12; k++) ax[k] = avl[k] = zero;
  for (int i = 0; i < 3; i++) {
    const dsTet__V m0 = *ds__tet_vm(M, i, 0), m1 = *ds__tet_vm(M, i, 1), m2 = *ds__tet_vm(M, i, 2);
    for (int c = 0; c < 3; c++) {
      const dsTet__V mc = t.c[0][c] * m0 + t.c[1][c] * m1 + t.c[2][c] * m2;
      const dsTet__V xa = ac[i][c] + (phi * aq[i][c] + aIc2 * mc);
      const dsTet__V va = aw[i][c] + kd * aq[i][c];
      ax[3 * (i + 1) + c] += xa;
      ax[c] -= xa;
      avl[3 * (i + 1) + c] += va;
      avl[c] -= va;
    }
  }
  ds__tet_store12(a->aex + 12 * (size_t)e0, ax);
  ds__tet_store12(a->aev + 12 * (size_t)e0, avl);
  dsGrad* g = a->g;
  ds__tet_vadd_to(g->tet_k_mu + e0, &ap_kmu);
  ds__tet_vadd_to(g->tet_k_lambda + e0, &ap_klam);
  ds__tet_vadd_to(g->tet_k_damp + e0, &ap_kd);
  if (a->adj_act) memcpy(a->adj_act + e0, &ap_act, sizeof ap_act);
}

/* The quads: DS__TET_QUADS(name, Args, elem4) defines
 * name(m, a, nq), which runs elem4 on tets DS__TL q .. DS__TL q + DS__TL - 1
 * for q < nq in an omp-for, once for forward and once for backward.
 *
 * On x86-64 (GCC or Clang: target attributes and __builtin_cpu_supports)
 * the loop is compiled three times: for the baseline (SSE2: a vector is two
 * instructions), for AVX2 (one) and for AVX2 with AVX-512VL (the same 4-lane
 * vectors, but 32 registers instead of 16, so fewer of the kernel's values
 * spill: the backward ~5-10% faster on the machine it was measured on), and
 * name() chooses at run time (ds__tet_isa). The same operations every way (no
 * FMA), so the same bits. On any other target (aarch64, a compiler without
 * target attributes, or -DDS_NO_AVX2) there is one copy, for the target's
 * own baseline: GCC lowers the 32-byte vectors to what the target has (two
 * NEON registers on aarch64), lane by lane the same operations. */
#define DS__TET_QUADS_LOOP(elem4)                                                                    \
  {                                                                                                  \
    _Pragma("omp for schedule(static) nowait") for (int q = 0; q < nq; q++) elem4(m, a, DS__TL * q); \
  }

#if defined(__x86_64__) && !defined(DS_NO_AVX2) && defined(__has_attribute)
#  if __has_attribute(target)
#    define DS__TET_X86_CLONES 1
#  endif
#endif

/* which copy of the quads runs (x86-64 clones; DS__TET_ISA_BASE elsewhere) */
enum { DS__TET_ISA_BASE = 0, DS__TET_ISA_AVX2 = 1, DS__TET_ISA_AVX512VL = 2 };

#ifdef DS__TET_X86_CLONES
/* the run-time choice: e512 on CPUs with AVX-512VL, e2 on those with AVX2,
 * e0 on the others */
#  define DS__TET_PICK(e512, e2, e0) \
    (__builtin_cpu_supports("avx512vl") ? (e512) : __builtin_cpu_supports("avx2") ? (e2) : (e0))
static inline int ds__tet_isa(void) { return DS__TET_PICK(DS__TET_ISA_AVX512VL, DS__TET_ISA_AVX2, DS__TET_ISA_BASE); }
#  define DS__TET_QUADS(name, Args, elem4)                                                                 \
    DS__FLATTEN static inline void name##_base(const dsModel* m, const Args* a, int nq)                   \
        DS__TET_QUADS_LOOP(elem4)                                                                          \
    __attribute__((target("avx2"))) DS__FLATTEN static inline void name##_avx2(const dsModel* m,          \
                                                                               const Args* a, int nq)     \
        DS__TET_QUADS_LOOP(elem4)                                                                          \
    __attribute__((target("avx2,avx512f,avx512vl"))) DS__FLATTEN static inline void name##_avx512(        \
        const dsModel* m, const Args* a, int nq) DS__TET_QUADS_LOOP(elem4)                                 \
    static inline void name(const dsModel* m, const Args* a, int nq) {                                     \
      DS__TET_PICK(name##_avx512(m, a, nq), name##_avx2(m, a, nq), name##_base(m, a, nq));                 \
    }
#else
static inline int ds__tet_isa(void) { return DS__TET_ISA_BASE; }
#  define DS__TET_QUADS(name, Args, elem4) \
    DS__FLATTEN static inline void name(const dsModel* m, const Args* a, int nq) DS__TET_QUADS_LOOP(elem4)
#endif

DS__TET_QUADS(ds__tet_fwd_quads, dsForceFwd, ds__tet_fwd_elem4)
DS__TET_QUADS(ds__tet_bwd_quads, dsForceBwd, ds__tet_bwd_elem4)

static inline void ds__tet_fwd_loop(const dsModel* m, const dsForceFwd* a) {
  const int n = m->ntet, nq = n / DS__TL;
  ds__tet_fwd_quads(m, a, nq);
#pragma omp for schedule(static) nowait
  for (int e = DS__TL * nq; e < n; e++) {
    ds__tet_fwd_elem(m, a, e);
    if (a->bad && !(a->J[e] > 0)) ds__atomic_min_int(a->bad, e);
  }
}
static inline void ds__tet_bwd_loop(const dsModel* m, const dsForceBwd* a) {
  const int n = m->ntet, nq = n / DS__TL;
  ds__tet_bwd_quads(m, a, nq);
#pragma omp for schedule(static) nowait
  for (int e = DS__TL * nq; e < n; e++) ds__tet_bwd_elem(m, a, e);
}

#else /* CUDA, or a compiler without GCC vector extensions: the one-tet bodies */
DS__FLATTEN static inline void ds__tet_fwd_loop(const dsModel* m, const dsForceFwd* a) {
  const int n = m->ntet;
#pragma omp for schedule(static) nowait
  for (int e = 0; e < n; e++) {
    ds__tet_fwd_elem(m, a, e);
#  if !defined(__CUDACC__)
    if (a->bad && !(a->J[e] > 0)) ds__atomic_min_int(a->bad, e);
#  endif
  }
}
DS__FLATTEN static inline void ds__tet_bwd_loop(const dsModel* m, const dsForceBwd* a) {
  const int n = m->ntet;
#pragma omp for schedule(static) nowait
  for (int e = 0; e < n; e++) ds__tet_bwd_elem(m, a, e);
}
#endif

#if defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__)
#  pragma GCC diagnostic pop
#endif

#define DS__FORCE_TET                                                                           \
  {.name = "tet", .count = ds__tet_count, .nvert = 4, .idx = ds__tet_idx, .act_order = 2,      \
   .fwd = ds__tet_fwd_loop, .bwd = ds__tet_bwd_loop}

#endif

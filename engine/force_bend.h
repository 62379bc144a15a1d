/* Dihedral bending across edge x3-x4 with opposite vertices x1, x2;
 * x = [x1, x2, x3, x4] (element-local order 0..3 = FORMULAS' 1..4).
 *
 *   n1 = (x3-x1) x (x4-x1),  n2 = (x4-x2) x (x3-x2),  e = x4-x3,  e^ = e/|e|
 *   theta = atan2((n2^ x n1^) . e^, n1^ . n2^)
 *         = atan2((n2 x n1) . e, (n1 . n2) |e|)   (positive factors cancel;
 *                                                  used: no normalisation)
 *   u1 = n1/|n1|^2,  u2 = n2/|n2|^2
 *   d1 = |e| u1,  d2 = |e| u2
 *   d3 = ((x1-x4).e^) u1 + ((x2-x4).e^) u2
 *   d4 = ((x3-x1).e^) u1 + ((x3-x2).e^) u2
 *   s  = -|e| (ke (theta - theta0) + kd (d1.v1 + d2.v2 + d3.v3 + d4.v4))
 *   f_i = s d_i
 * d_i = d theta / d x_i exactly, so the elastic part is minus the gradient of
 * ke |e|/2 (theta - theta0)^2 with |e| held fixed.
 *
 * Adjoint: adj_s = sum_i adj_f_i . d_i, adj_d_i = s adj_f_i + adj_dd v_i
 * (adj_dd = -|e| kd adj_s), adj_theta = -|e| ke adj_s, then back through
 * u = n/|n|^2 (adj_n += adj_u/|n|^2 - 2 n (n.adj_u)/|n|^4), the projections
 * onto e^, e^ = e/|e|, the atan2 (adj_Y = adj_theta X/(X^2+Y^2),
 * adj_X = -adj_theta Y/(X^2+Y^2)), the triple product and the cross products.
 *
 * Non-smooth / degenerate: if |e| = 0 or a wing is collapsed (x1 or x2 on the
 * edge line: |n| <= 256 eps |a| |b| for n = a x b, where the cross product has
 * lost its precision) the hinge has no angle: force zero, gradient zero. theta jumps from pi
 * to -pi when the hinge folds through itself (the atan2 branch cut); the
 * gradient is that of the side the configuration is on. */
#ifndef DSIM_ENGINE_FORCE_BEND_H
#define DSIM_ENGINE_FORCE_BEND_H

#include "engine/dsmath.h"
#include "engine/force_loop.h"

typedef struct dsBendParam {
  dsReal ke;   /* bending stiffness: energy ke |e|/2 (theta-theta0)^2, N/rad^2 */
  dsReal kd;   /* bending damping (rate of theta), N s/rad^2 */
  dsReal rest; /* rest angle theta0, rad */
} dsBendParam;

/* Hinge geometry shared by the functions below. */
typedef struct dsBend__Geo {
  dsReal a1[3], b1[3], a2[3], b2[3]; /* n1 = a1 x b1, n2 = a2 x b2 */
  dsReal n1[3], n2[3], e[3], eh[3], le, nn1, nn2; /* nn = |n|^2 */
  dsReal Y, X;                                    /* theta = atan2(Y, X) */
} dsBend__Geo;

/* Fills g; returns 0 when the hinge is degenerate. */
DS_HD DS_INLINE int ds__bend_geo(const dsReal x[12], dsBend__Geo* g) {
  const dsReal *x1 = x, *x2 = x + 3, *x3 = x + 6, *x4 = x + 9;
  dsReal t[3];
  dsu_sub3(g->a1, x3, x1);
  dsu_sub3(g->b1, x4, x1);
  dsu_sub3(g->a2, x4, x2);
  dsu_sub3(g->b2, x3, x2);
  dsu_cross3(g->n1, g->a1, g->b1);
  dsu_cross3(g->n2, g->a2, g->b2);
  dsu_sub3(g->e, x4, x3);
  g->le = dsu_normalize3(g->eh, g->e);
  g->nn1 = dsu_dot3(g->n1, g->n1);
  g->nn2 = dsu_dot3(g->n2, g->n2);
  dsu_cross3(t, g->n2, g->n1);
  g->Y = dsu_dot3(t, g->e);
  g->X = dsu_dot3(g->n1, g->n2) * g->le;
  /* a wing is collapsed when sin(a, b) <= 256 eps: n = a x b has lost its
   * relative precision (theta would be wrong by ~1/256 rad or more) */
  const dsReal tol = 256 * DS_REAL_EPS;
  return g->le > 0 && g->nn1 > DSU_TINY2 && g->nn2 > DSU_TINY2 &&
         g->nn1 > tol * tol * dsu_norm3sq(g->a1) * dsu_norm3sq(g->b1) &&
         g->nn2 > tol * tol * dsu_norm3sq(g->a2) * dsu_norm3sq(g->b2);
}

/* theta of FORMULAS (atan2 form), in (-pi, pi]; 0 for a degenerate hinge. */
DS_HD DS_INLINE dsReal ds__bend_angle(const dsReal x[12]) {
  dsBend__Geo g;
  if (!ds__bend_geo(x, &g)) return 0;
  return dsu_atan2(g.Y, g.X);
}

/* d_i (dtheta/dx_i) into d[12]. */
DS_HD DS_INLINE void ds__bend_dirs(const dsReal x[12], const dsBend__Geo* g, dsReal d[12]) {
  const dsReal *x1 = x, *x2 = x + 3, *x3 = x + 6, *x4 = x + 9;
  dsReal u1[3], u2[3], t[3];
  dsu_scl3(u1, g->n1, 1 / g->nn1);
  dsu_scl3(u2, g->n2, 1 / g->nn2);
  dsu_scl3(d, u1, g->le);
  dsu_scl3(d + 3, u2, g->le);
  dsu_sub3(t, x1, x4);
  dsReal a13 = dsu_dot3(t, g->eh);
  dsu_sub3(t, x2, x4);
  dsReal a23 = dsu_dot3(t, g->eh);
  dsu_sub3(t, x3, x1);
  dsReal b14 = dsu_dot3(t, g->eh);
  dsu_sub3(t, x3, x2);
  dsReal b24 = dsu_dot3(t, g->eh);
  for (int c = 0; c < 3; c++) {
    d[6 + c] = a13 * u1[c] + a23 * u2[c];
    d[9 + c] = b14 * u1[c] + b24 * u2[c];
  }
}

DS_HD DS_INLINE void ds__bend_fwd(const dsReal x[12], const dsReal v[12], const dsBendParam* p,
                                 dsReal f[12]) {
  dsBend__Geo g;
  if (!ds__bend_geo(x, &g)) {
    for (int k = 0; k < 12; k++) f[k] = 0;
    return;
  }
  dsReal d[12], dd = 0;
  ds__bend_dirs(x, &g, d);
  for (int k = 0; k < 12; k++) dd += d[k] * v[k];
  dsReal th = dsu_atan2(g.Y, g.X);
  dsReal s = -g.le * (p->ke * (th - p->rest) + p->kd * dd);
  for (int k = 0; k < 12; k++) f[k] = s * d[k];
}

/* What ds__bend_bwd computes before it reads adj_f: the hinge's geometry,
 * d, theta and the scalars the adjoint is linear in (the Jacobian below
 * starts from it too). */
typedef struct dsBend__Pre {
  dsBend__Geo g;
  dsReal d[12], dd, th, el, s;
  dsReal u1[3], u2[3], i1, i2;       /* u = n/|n|^2, i = 1/|n|^2 */
  dsReal t14[3], t24[3], t31[3], t32[3]; /* x1-x4, x2-x4, x3-x1, x3-x2 */
  dsReal a13, a23, b14, b24;         /* their projections onto e^ */
  dsReal c21[3], c1e[3], ce2[3], n12; /* n2 x n1, n1 x e, e x n2, n1.n2 */
  int ok; /* 0: degenerate hinge (no force, no gradient) */
} dsBend__Pre;

DS_HD DS_INLINE void ds__bend_pre(const dsReal x[12], const dsReal v[12], const dsBendParam* p, dsBend__Pre* q) {
  q->ok = ds__bend_geo(x, &q->g);
  if (!q->ok) return;
  ds__bend_dirs(x, &q->g, q->d);
  q->dd = 0;
  for (int k = 0; k < 12; k++) q->dd += q->d[k] * v[k];
  q->th = dsu_atan2(q->g.Y, q->g.X);
  q->el = p->ke * (q->th - p->rest) + p->kd * q->dd;
  q->s = -q->g.le * q->el;
  const dsBend__Geo* g = &q->g;
  dsu_scl3(q->u1, g->n1, 1 / g->nn1);
  dsu_scl3(q->u2, g->n2, 1 / g->nn2);
  dsu_sub3(q->t14, x, x + 9);
  dsu_sub3(q->t24, x + 3, x + 9);
  dsu_sub3(q->t31, x + 6, x);
  dsu_sub3(q->t32, x + 6, x + 3);
  q->a13 = dsu_dot3(q->t14, g->eh);
  q->a23 = dsu_dot3(q->t24, g->eh);
  q->b14 = dsu_dot3(q->t31, g->eh);
  q->b24 = dsu_dot3(q->t32, g->eh);
  q->i1 = 1 / g->nn1;
  q->i2 = 1 / g->nn2;
  dsu_cross3(q->c21, g->n2, g->n1);
  dsu_cross3(q->c1e, g->n1, g->e);
  dsu_cross3(q->ce2, g->e, g->n2);
  q->n12 = dsu_dot3(g->n1, g->n2);
}

/* The adjoint of one hinge for adj_f from its precomputation q. */
DS_HD DS_INLINE void ds__bend_bwd_pre(const dsReal x[12], const dsReal v[12], const dsBendParam* p,
                                     const dsBend__Pre* q, const dsReal adj_f[12], dsReal adj_x[12],
                                     dsReal adj_v[12], dsBendParam* adj_p) {
  if (!q->ok) return;
  (void)x;
  const dsBend__Geo* g = &q->g;
  const dsReal* d = q->d;
  const dsReal dd = q->dd, th = q->th, el = q->el, s = q->s;
  dsReal as = 0;
  for (int k = 0; k < 12; k++) as += adj_f[k] * d[k];

  adj_p->ke -= g->le * (th - p->rest) * as;
  adj_p->kd -= g->le * dd * as;
  adj_p->rest += g->le * p->ke * as;
  dsReal ath = -g->le * p->ke * as;
  dsReal add = -g->le * p->kd * as;
  dsReal ale = -el * as;

  dsReal ad[12];
  for (int k = 0; k < 12; k++) {
    ad[k] = s * adj_f[k] + add * v[k];
    adj_v[k] += add * d[k];
  }

  /* d_i back to u1, u2, le and the four projections onto e^ */
  const dsReal *u1 = q->u1, *u2 = q->u2;
  const dsReal a13 = q->a13, a23 = q->a23, b14 = q->b14, b24 = q->b24;
  dsReal au1[3], au2[3];
  for (int c = 0; c < 3; c++) {
    au1[c] = g->le * ad[c] + a13 * ad[6 + c] + b14 * ad[9 + c];
    au2[c] = g->le * ad[3 + c] + a23 * ad[6 + c] + b24 * ad[9 + c];
  }
  ale += dsu_dot3(ad, u1) + dsu_dot3(ad + 3, u2);
  dsReal aa13 = dsu_dot3(ad + 6, u1), aa23 = dsu_dot3(ad + 6, u2);
  dsReal ab14 = dsu_dot3(ad + 9, u1), ab24 = dsu_dot3(ad + 9, u2);
  dsReal aeh[3] = {0, 0, 0};
  /* a13 = (x1-x4).e^ etc. */
  dsu_addtoscl3(aeh, q->t14, aa13);
  dsu_addtoscl3(adj_x, g->eh, aa13);
  dsu_addtoscl3(adj_x + 9, g->eh, -aa13);
  dsu_addtoscl3(aeh, q->t24, aa23);
  dsu_addtoscl3(adj_x + 3, g->eh, aa23);
  dsu_addtoscl3(adj_x + 9, g->eh, -aa23);
  dsu_addtoscl3(aeh, q->t31, ab14);
  dsu_addtoscl3(adj_x + 6, g->eh, ab14);
  dsu_addtoscl3(adj_x, g->eh, -ab14);
  dsu_addtoscl3(aeh, q->t32, ab24);
  dsu_addtoscl3(adj_x + 6, g->eh, ab24);
  dsu_addtoscl3(adj_x + 3, g->eh, -ab24);

  /* u = n/|n|^2: adj_n = adj_u/|n|^2 - 2 n (n.adj_u)/|n|^4 */
  dsReal an1[3], an2[3];
  const dsReal i1 = q->i1, i2 = q->i2;
  dsu_scl3(an1, au1, i1);
  dsu_addtoscl3(an1, g->n1, -2 * dsu_dot3(g->n1, au1) * i1 * i1);
  dsu_scl3(an2, au2, i2);
  dsu_addtoscl3(an2, g->n2, -2 * dsu_dot3(g->n2, au2) * i2 * i2);

  /* theta = atan2(Y, X), Y = (n2 x n1).e, X = (n1.n2) |e| */
  dsReal r2 = g->X * g->X + g->Y * g->Y;
  dsReal ae[3] = {0, 0, 0};
  if (r2 > 0) {
    dsReal aY = ath * g->X / r2, aX = -ath * g->Y / r2;
    dsu_addtoscl3(ae, q->c21, aY);
    dsu_addtoscl3(an2, q->c1e, aY);
    dsu_addtoscl3(an1, q->ce2, aY);
    dsu_addtoscl3(an1, g->n2, aX * g->le);
    dsu_addtoscl3(an2, g->n1, aX * g->le);
    ale += aX * q->n12;
  }

  /* e^ = e/|e|, |e| */
  dsu_normalize3_bwd(g->eh, g->le, aeh, ae);
  dsu_addtoscl3(ae, g->eh, ale);
  dsu_addto3(adj_x + 9, ae);
  dsu_subfrom3(adj_x + 6, ae);

  /* n1 = (x3-x1) x (x4-x1), n2 = (x4-x2) x (x3-x2) */
  dsReal aa[3] = {0, 0, 0}, ab[3] = {0, 0, 0};
  dsu_cross3_bwd(g->a1, g->b1, an1, aa, ab);
  dsu_addto3(adj_x + 6, aa);
  dsu_addto3(adj_x + 9, ab);
  dsu_subfrom3(adj_x, aa);
  dsu_subfrom3(adj_x, ab);
  dsu_zero3(aa);
  dsu_zero3(ab);
  dsu_cross3_bwd(g->a2, g->b2, an2, aa, ab);
  dsu_addto3(adj_x + 9, aa);
  dsu_addto3(adj_x + 6, ab);
  dsu_subfrom3(adj_x + 3, aa);
  dsu_subfrom3(adj_x + 3, ab);
}

DS_HD DS_INLINE void ds__bend_bwd(const dsReal x[12], const dsReal v[12], const dsBendParam* p,
                                 const dsReal adj_f[12], dsReal adj_x[12], dsReal adj_v[12],
                                 dsBendParam* adj_p) {
  dsBend__Pre q;
  ds__bend_pre(x, v, p, &q);
  ds__bend_bwd_pre(x, v, p, &q, adj_f, adj_x, adj_v, adj_p);
}

/* ---- Jacobians (engine/forces.h "Jacobians") ------------------------------------
 * Kx = -df/dx, Kv = -df/dv (12 x 12, [x1..x4]). With d = grad theta,
 * Ht = Hess theta (symmetric), el = ke (theta - theta0) + kd d.v and
 * s = -|e| el:
 *   Kx = -s Ht + d (el grad|e| + |e| ke d + |e| kd Ht v)^T
 *   Kv = |e| kd d d^T
 * Symmetric: -s Ht + |e| ke d d^T (the Hessian of ke |e|/2 (theta -
 * theta0)^2 with |e| frozen, as the force itself freezes it, plus the
 * damping share of s in -s Ht); not symmetric: d grad|e|^T el (|e| is not
 * frozen in the force's own derivative) and |e| kd d (Ht v)^T. Kv is
 * symmetric, PSD for kd >= 0.
 *
 * Ht in closed form, from d_i = sum_w c_iw u_w (w = 1, 2 the wings,
 * u_w = n_w/|n_w|^2; c_11 = c_22 = |e|, c_12 = c_21 = 0, c_31 = a13,
 * c_32 = a23, c_41 = b14, c_42 = b24, the projections onto e^ above):
 *   Ht_ij = d d_i/d x_j = sum_w [ u_w (grad_j c_iw)^T + c_iw Q_w N_wj ]
 * where Q_w = d u_w/d n_w = (I - 2 n_w n_w^T/|n_w|^2)/|n_w|^2 and
 * N_wj = d n_w/d x_j, the cross-product matrices [.]x of
 *   n1 = (x3-x1) x (x4-x1):  N_11 = [e]x,  N_13 = -[x4-x1]x,  N_14 = [x3-x1]x
 *   n2 = (x4-x2) x (x3-x2):  N_22 = -[e]x, N_23 = [x4-x2]x,   N_24 = -[x3-x2]x
 * (N_12 = N_21 = 0), and, with P = (I - e^ e^T)/|e| = d e^/d e and
 * p(t) = P t:
 *   grad |e|:  x3 -e^,  x4 e^
 *   grad a13 = grad (x1-x4).e^:  x1 e^,  x3 -p(x1-x4),  x4 -e^ + p(x1-x4)
 *   grad a23 = grad (x2-x4).e^:  x2 e^,  x3 -p(x2-x4),  x4 -e^ + p(x2-x4)
 *   grad b14 = grad (x3-x1).e^:  x1 -e^, x3 e^ - p(x3-x1), x4 p(x3-x1)
 *   grad b24 = grad (x3-x2).e^:  x2 -e^, x3 e^ - p(x3-x2), x4 p(x3-x2).
 * (Tamstorf & Grinspun 2013 derive the same Hessian in another
 * parameterisation.) Row r of Q [w]x is q_r x w, so
 *   Q [w]x = (1/|n|^2) [e_r x w]_r - (2/|n|^4) n (n x w)^T.
 * This replaced twelve reverse passes of ds__bend_bwd_pre (one per row,
 * adj_f = e_k), about 7,000 instructions a hinge, which were a sixth of
 * control-cloth-implicit's training iteration (issue 31, item 5);
 * tests/test_force_jac checks it against those passes to 1e-12 and
 * against central differences. Degenerate hinge: both zero (as the
 * force). */
DS_HD DS_INLINE void ds__bend_qcross(const dsReal n[3], dsReal i, const dsReal w[3], dsReal M[9]) {
  dsReal nw[3];
  dsu_cross3(nw, n, w);
  const dsReal i2 = -2 * i * i;
  const dsReal ew[9] = {0, -w[2], w[1], w[2], 0, -w[0], -w[1], w[0], 0}; /* rows e_r x w */
  for (int r = 0; r < 3; r++)
    for (int c = 0; c < 3; c++) M[3 * r + c] = i * ew[3 * r + c] + i2 * n[r] * nw[c];
}

/* Block (i, j) of Ht and its mirror (j, i):
 *   u1 g1^T + u2 g2^T + c1 M1 + c2 M2
 * a NULL pair left out (every call passes constants, so the compiler
 * drops the absent terms). */
DS_HD DS_INLINE void ds__bend_hblock(dsReal H[144], int i, int j, const dsReal* u1, const dsReal* g1, const dsReal* u2,
                                    const dsReal* g2, dsReal c1, const dsReal* M1, dsReal c2, const dsReal* M2) {
  for (int r = 0; r < 3; r++)
    for (int c = 0; c < 3; c++) {
      dsReal h = 0;
      if (u1) h += u1[r] * g1[c];
      if (u2) h += u2[r] * g2[c];
      if (M1) h += c1 * M1[3 * r + c];
      if (M2) h += c2 * M2[3 * r + c];
      H[12 * (3 * i + r) + 3 * j + c] = h;
      H[12 * (3 * j + c) + 3 * i + r] = h;
    }
}

/* What both forms below share: Ht (H) and gs = el grad|e| + |e| ke d +
 * |e| kd Ht v, the gradient of -s, with q; 0 for a degenerate hinge. */
DS_HD DS_INLINE int ds__bend_jac_parts(const dsReal x[12], const dsReal v[12], const dsBendParam* p, dsBend__Pre* q,
                                      dsReal H[144], dsReal gs[12]) {
  ds__bend_pre(x, v, p, q);
  if (!q->ok) return 0;
  const dsBend__Geo* g = &q->g;
  const dsReal le = g->le, il = 1 / le, *eh = g->eh;
  /* M1j = Q_1 N_1j (j = 1, 3, 4), M2j = Q_2 N_2j (j = 2, 3, 4) */
  dsReal M11[9], M13[9], M14[9], M22[9], M23[9], M24[9], w3[3];
  ds__bend_qcross(g->n1, q->i1, g->e, M11);
  dsu_scl3(w3, g->b1, -1);
  ds__bend_qcross(g->n1, q->i1, w3, M13);
  ds__bend_qcross(g->n1, q->i1, g->a1, M14);
  dsu_scl3(w3, g->e, -1);
  ds__bend_qcross(g->n2, q->i2, w3, M22);
  ds__bend_qcross(g->n2, q->i2, g->a2, M23);
  dsu_scl3(w3, g->b2, -1);
  ds__bend_qcross(g->n2, q->i2, w3, M24);
  /* p(t) for the four projections, and the gradients' other vectors */
  dsReal p14[3], p24[3], p31[3], p32[3], meh[3], q14[3], q24[3];
  for (int c = 0; c < 3; c++) {
    p14[c] = (q->t14[c] - q->a13 * eh[c]) * il;
    p24[c] = (q->t24[c] - q->a23 * eh[c]) * il;
    p31[c] = (q->t31[c] - q->b14 * eh[c]) * il;
    p32[c] = (q->t32[c] - q->b24 * eh[c]) * il;
    meh[c] = -eh[c];
    q14[c] = -p14[c];
    q24[c] = -p24[c];
    w3[c] = p14[c] - eh[c]; /* p14 - e^ */
  }
  dsReal w4[3];
  dsu_sub3(w4, p24, eh);
  const dsReal *u1 = q->u1, *u2 = q->u2;
  /* the blocks i <= j (Ht_ji = Ht_ij^T) with their nonzero terms only
   * (grad_j c_iw and N_wj above; hinge vertices 1..4 are blocks 0..3) */
  ds__bend_hblock(H, 0, 0, NULL, NULL, NULL, NULL, le, M11, 0, NULL);
  ds__bend_hblock(H, 0, 1, NULL, NULL, NULL, NULL, 0, NULL, 0, NULL);
  ds__bend_hblock(H, 0, 2, u1, meh, NULL, NULL, le, M13, 0, NULL);
  ds__bend_hblock(H, 0, 3, u1, eh, NULL, NULL, le, M14, 0, NULL);
  ds__bend_hblock(H, 1, 1, NULL, NULL, NULL, NULL, 0, NULL, le, M22);
  ds__bend_hblock(H, 1, 2, NULL, NULL, u2, meh, 0, NULL, le, M23);
  ds__bend_hblock(H, 1, 3, NULL, NULL, u2, eh, 0, NULL, le, M24);
  ds__bend_hblock(H, 2, 2, u1, q14, u2, q24, q->a13, M13, q->a23, M23);
  ds__bend_hblock(H, 2, 3, u1, w3, u2, w4, q->a13, M14, q->a23, M24);
  ds__bend_hblock(H, 3, 3, u1, p31, u2, p32, q->b14, M14, q->b24, M24);
  const dsReal kv = le * p->kd;
  for (int k = 0; k < 12; k++) gs[k] = le * p->ke * q->d[k];
  if (kv != 0)
    for (int k = 0; k < 12; k++) {
      dsReal hv = 0;
      for (int j = 0; j < 12; j++) hv += H[12 * k + j] * v[j]; /* Ht v, row by row (Ht = Ht^T) */
      gs[k] += kv * hv;
    }
  for (int c = 0; c < 3; c++) {
    gs[6 + c] -= q->el * eh[c];
    gs[9 + c] += q->el * eh[c];
  }
  return 1;
}

/* Kx = d gs^T - s Ht, Kv = |e| kd d d^T */
DS_HD DS_INLINE void ds__bend_jac(const dsReal x[12], const dsReal v[12], const dsBendParam* p,
                                 dsReal Kx[144], dsReal Kv[144]) {
  dsBend__Pre q;
  dsReal H[144], gs[12];
  if (!ds__bend_jac_parts(x, v, p, &q, H, gs)) {
    for (int k = 0; k < 144; k++) Kx[k] = Kv[k] = 0;
    return;
  }
  const dsReal kv = q.g.le * p->kd, s = q.s;
  for (int k = 0; k < 12; k++) {
    const dsReal dk = q.d[k], vk = kv * q.d[k];
    for (int j = 0; j < 12; j++) {
      Kx[12 * k + j] = dk * gs[j] - s * H[12 * k + j];
      Kv[12 * k + j] = vk * q.d[j];
    }
  }
}

/* wv Kv + wx Kx into K (the implicit step's h Kv + h^2 Kx, engine/sparse.c)
 * in one pass: the same operations as ds__bend_jac and the sum, so the same
 * bits; without damping (kd = 0: Kv = 0) wx Kx alone, which is that sum's
 * value too. */
DS_HD DS_INLINE void ds__bend_jac_comb(const dsReal x[12], const dsReal v[12], const dsBendParam* p, dsReal wx,
                                      dsReal wv, dsReal K[144]) {
  dsBend__Pre q;
  dsReal H[144], gs[12];
  if (!ds__bend_jac_parts(x, v, p, &q, H, gs)) {
    for (int k = 0; k < 144; k++) K[k] = 0;
    return;
  }
  const dsReal kv = q.g.le * p->kd, s = q.s;
  if (kv == 0) {
    for (int k = 0; k < 12; k++) {
      const dsReal dk = q.d[k];
      for (int j = 0; j < 12; j++) K[12 * k + j] = wx * (dk * gs[j] - s * H[12 * k + j]);
    }
    return;
  }
  for (int k = 0; k < 12; k++) {
    const dsReal dk = q.d[k], vk = kv * q.d[k];
    for (int j = 0; j < 12; j++) K[12 * k + j] = wv * (vk * q.d[j]) + wx * (dk * gs[j] - s * H[12 * k + j]);
  }
}

/* ---- loop over the model's bending edges ---------------------------------------
 * Slots: 4 per edge, [x1, x2, x3, x4]. */
static inline int ds__bend_count(const dsModel* m) { return m->nbend; }
static inline const int* ds__bend_idx(const dsModel* m) { return m->bend_idx; }

/* Element bodies (one hinge; engine/force_loop.h "Bodies"). */
DS_HD DS_INLINE void ds__bend_fwd_elem(const dsModel* m, const dsForceFwd* a, int e) {
  dsReal xl[12], vl[12];
  const int* idx = m->bend_idx + 4 * (size_t)e;
  dsBendParam p = {m->bend_ke[e], m->bend_kd[e], m->bend_rest[e]};
  ds__gather3(xl, a->x, idx, 4);
  ds__gather3(vl, a->v, idx, 4);
  ds__bend_fwd(xl, vl, &p, a->ef + 12 * (size_t)e);
}

DS_HD DS_INLINE void ds__bend_bwd_elem(const dsModel* m, const dsForceBwd* a, int e) {
  dsReal xl[12], vl[12], al[12], ax[12] = {0}, avl[12] = {0};
  const int* idx = m->bend_idx + 4 * (size_t)e;
  dsBendParam p = {m->bend_ke[e], m->bend_kd[e], m->bend_rest[e]}, ap = {0, 0, 0};
  ds__gather3(xl, a->x, idx, 4);
  ds__gather3(vl, a->v, idx, 4);
  ds__gather3(al, a->af, idx, 4);
  ds__bend_bwd(xl, vl, &p, al, ax, avl, &ap);
  for (int k = 0; k < 12; k++) {
    a->aex[12 * (size_t)e + k] = ax[k];
    a->aev[12 * (size_t)e + k] = avl[k];
  }
  dsGrad* g = a->g;
  g->bend_ke[e] += ap.ke;
  g->bend_kd[e] += ap.kd;
  g->bend_rest[e] += ap.rest;
}

/* Kx, Kv (144 each) of hinge e at a->x, a->v. */
DS_HD DS_INLINE void ds__bend_jac_elem(const dsModel* m, const dsForceFwd* a, int e, dsReal* Kx, dsReal* Kv) {
  dsReal xl[12], vl[12];
  const int* idx = m->bend_idx + 4 * (size_t)e;
  dsBendParam p = {m->bend_ke[e], m->bend_kd[e], m->bend_rest[e]};
  ds__gather3(xl, a->x, idx, 4);
  ds__gather3(vl, a->v, idx, 4);
  ds__bend_jac(xl, vl, &p, Kx, Kv);
}

/* wv Kv + wx Kx of hinge e into K (ds__bend_jac_comb) */
DS_HD DS_INLINE void ds__bend_jac_comb_elem(const dsModel* m, const dsForceFwd* a, int e, dsReal wx, dsReal wv,
                                           dsReal* K) {
  dsReal xl[12], vl[12];
  const int* idx = m->bend_idx + 4 * (size_t)e;
  dsBendParam p = {m->bend_ke[e], m->bend_kd[e], m->bend_rest[e]};
  ds__gather3(xl, a->x, idx, 4);
  ds__gather3(vl, a->v, idx, 4);
  ds__bend_jac_comb(xl, vl, &p, wx, wv, K);
}

DS__FLATTEN static inline void ds__bend_fwd_loop(const dsModel* m, const dsForceFwd* a) {
  const int n = m->nbend;
#pragma omp for schedule(static) nowait
  for (int e = 0; e < n; e++) ds__bend_fwd_elem(m, a, e);
}

static inline void ds__bend_bwd_loop(const dsModel* m, const dsForceBwd* a) {
  const int n = m->nbend;
#pragma omp for schedule(static) nowait
  for (int e = 0; e < n; e++) ds__bend_bwd_elem(m, a, e);
}

#define DS__FORCE_BEND                                                                          \
  {.name = "bend", .count = ds__bend_count, .nvert = 4, .idx = ds__bend_idx,                    \
   .fwd = ds__bend_fwd_loop, .bwd = ds__bend_bwd_loop}

#endif

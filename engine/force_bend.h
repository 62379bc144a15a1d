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
 * d, theta and the scalars the adjoint is linear in. The adjoint is linear
 * in adj_f for fixed (x, v), so the Jacobian's 12 passes share one of
 * these (ds__bend_jac). */
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

#if defined(__GNUC__) && !defined(__CUDACC__)
/* ds__bend_bwd_pre's passes for adj_f = e_k on DS__BL rows k at once:
 * lane l of every vector is row k0 + l, and each statement is the scalar
 * pass's, one for one and in the same order (GCC vector arithmetic rounds
 * each lane as the scalar operation would; a product of a lane and a
 * shared scalar is the scalar product, which commutes), so each row is
 * the scalar pass's bits (tests/test_force_jac, the cloth run logs).
 * The parameters' adjoints, which the Jacobian does not read, are left
 * out. An edit of ds__bend_bwd_pre must be mirrored here. */
#  define DS__BL 4
typedef dsReal dsBend__V __attribute__((vector_size(DS__BL * sizeof(dsReal))));

/* *r = a . b for a shared a and lane b (vectors through pointers: a
 * 32-byte vector by value would change the baseline ABI) */
static inline void ds__bend_vdot(dsBend__V* r, const dsReal a[3], const dsBend__V b[3]) {
  *r = b[0] * a[0] + b[1] * a[1] + b[2] * a[2];
}
/* r += s a (lane s, shared a) */
static inline void ds__bend_vadd(dsBend__V r[3], const dsReal a[3], const dsBend__V* s) {
  for (int c = 0; c < 3; c++) r[c] += *s * a[c];
}
/* dsu_cross3_bwd for shared a, b and lane adj_res into lane adj_a, adj_b */
static inline void ds__bend_vcross_bwd(const dsReal a[3], const dsReal b[3], const dsBend__V g[3],
                                       dsBend__V adj_a[3], dsBend__V adj_b[3]) {
  const dsBend__V ta[3] = {g[2] * b[1] - g[1] * b[2], g[0] * b[2] - g[2] * b[0], g[1] * b[0] - g[0] * b[1]};
  const dsBend__V tb[3] = {g[1] * a[2] - g[2] * a[1], g[2] * a[0] - g[0] * a[2], g[0] * a[1] - g[1] * a[0]};
  for (int c = 0; c < 3; c++) {
    adj_a[c] += ta[c];
    adj_b[c] += tb[c];
  }
}

/* rows k0 .. k0 + DS__BL - 1 of -Kx, -Kv (lane l: row k0 + l) */
static inline void ds__bend_jac_lanes(const dsReal v[12], const dsBendParam* p, const dsBend__Pre* q, int k0,
                                      dsBend__V ax[12], dsBend__V av[12]) {
  const dsBend__Geo* g = &q->g;
  const dsReal* d = q->d;
  const dsReal s = q->s;
  const dsBend__V zero = {0};
  dsBend__V ef[12], as = zero;
  for (int j = 0; j < 12; j++) {
    for (int l = 0; l < DS__BL; l++) ef[j][l] = j == k0 + l ? 1 : 0;
    as += ef[j] * d[j];
  }
  const dsBend__V ath = (-g->le * p->ke) * as, add = (-g->le * p->kd) * as;
  dsBend__V ale = -q->el * as;
  dsBend__V ad[12];
  for (int j = 0; j < 12; j++) {
    ad[j] = ef[j] * s + add * v[j];
    av[j] = zero;
    av[j] += add * d[j];
    ax[j] = zero;
  }
  const dsReal *u1 = q->u1, *u2 = q->u2;
  dsBend__V au1[3], au2[3];
  for (int c = 0; c < 3; c++) {
    au1[c] = ad[c] * g->le + ad[6 + c] * q->a13 + ad[9 + c] * q->b14;
    au2[c] = ad[3 + c] * g->le + ad[6 + c] * q->a23 + ad[9 + c] * q->b24;
  }
  dsBend__V d1, d2, aa13, aa23, ab14, ab24, ng;
  ds__bend_vdot(&d1, u1, ad);
  ds__bend_vdot(&d2, u2, ad + 3);
  ale += d1 + d2;
  ds__bend_vdot(&aa13, u1, ad + 6);
  ds__bend_vdot(&aa23, u2, ad + 6);
  ds__bend_vdot(&ab14, u1, ad + 9);
  ds__bend_vdot(&ab24, u2, ad + 9);
  dsBend__V aeh[3] = {zero, zero, zero};
  ds__bend_vadd(aeh, q->t14, &aa13);
  ds__bend_vadd(ax, g->eh, &aa13);
  ng = -aa13;
  ds__bend_vadd(ax + 9, g->eh, &ng);
  ds__bend_vadd(aeh, q->t24, &aa23);
  ds__bend_vadd(ax + 3, g->eh, &aa23);
  ng = -aa23;
  ds__bend_vadd(ax + 9, g->eh, &ng);
  ds__bend_vadd(aeh, q->t31, &ab14);
  ds__bend_vadd(ax + 6, g->eh, &ab14);
  ng = -ab14;
  ds__bend_vadd(ax, g->eh, &ng);
  ds__bend_vadd(aeh, q->t32, &ab24);
  ds__bend_vadd(ax + 6, g->eh, &ab24);
  ng = -ab24;
  ds__bend_vadd(ax + 3, g->eh, &ng);
  dsBend__V an1[3], an2[3];
  const dsReal i1 = q->i1, i2 = q->i2;
  for (int c = 0; c < 3; c++) {
    an1[c] = au1[c] * i1;
    an2[c] = au2[c] * i2;
  }
  ds__bend_vdot(&d1, g->n1, au1);
  d1 = d1 * -2 * i1 * i1;
  ds__bend_vadd(an1, g->n1, &d1);
  ds__bend_vdot(&d2, g->n2, au2);
  d2 = d2 * -2 * i2 * i2;
  ds__bend_vadd(an2, g->n2, &d2);
  const dsReal r2 = g->X * g->X + g->Y * g->Y;
  dsBend__V ae[3] = {zero, zero, zero};
  if (r2 > 0) {
    const dsBend__V aY = ath * g->X / r2, aX = -ath * g->Y / r2, aXl = aX * g->le;
    ds__bend_vadd(ae, q->c21, &aY);
    ds__bend_vadd(an2, q->c1e, &aY);
    ds__bend_vadd(an1, q->ce2, &aY);
    ds__bend_vadd(an1, g->n2, &aXl);
    ds__bend_vadd(an2, g->n1, &aXl);
    ale += aX * q->n12;
  }
  if (g->le > 0) { /* dsu_normalize3_bwd */
    const dsReal il = 1 / g->le;
    dsBend__V ud;
    ds__bend_vdot(&ud, g->eh, aeh);
    for (int c = 0; c < 3; c++) ae[c] += (aeh[c] - ud * g->eh[c]) * il;
  }
  ds__bend_vadd(ae, g->eh, &ale);
  dsBend__V aa[3] = {zero, zero, zero}, ab[3] = {zero, zero, zero};
  for (int c = 0; c < 3; c++) {
    ax[9 + c] += ae[c];
    ax[6 + c] -= ae[c];
  }
  ds__bend_vcross_bwd(g->a1, g->b1, an1, aa, ab);
  for (int c = 0; c < 3; c++) {
    ax[6 + c] += aa[c];
    ax[9 + c] += ab[c];
    ax[c] -= aa[c];
    ax[c] -= ab[c];
    aa[c] = ab[c] = zero;
  }
  ds__bend_vcross_bwd(g->a2, g->b2, an2, aa, ab);
  for (int c = 0; c < 3; c++) {
    ax[9 + c] += aa[c];
    ax[6 + c] += ab[c];
    ax[3 + c] -= aa[c];
    ax[3 + c] -= ab[c];
  }
}
#endif

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
 * Computed by reverse mode: row k of -df/dx and of -df/dv is minus
 * ds__bend_bwd's adjoint for adj_f = e_k, which is exact (the derivative of
 * the force as computed, to rounding) and shares the backward's atan2 and
 * degeneracy handling; 12 backward passes, no second copy of Ht's long
 * closed form (Tamstorf & Grinspun 2013) to keep in step with the force.
 * The passes share the geometry, d and the atan2 (ds__bend_pre: the
 * adjoint is linear in adj_f), which were most of each pass's cost: the
 * bending Jacobians were a third of control-cloth's implicit iteration;
 * with GCC vector extensions the 12 passes run DS__BL at a time as lanes
 * (ds__bend_jac_lanes, the same operations, so the same bits).
 * Degenerate hinge: both zero (as the force). */
DS_HD DS_INLINE void ds__bend_jac(const dsReal x[12], const dsReal v[12], const dsBendParam* p,
                                 dsReal Kx[144], dsReal Kv[144]) {
  dsBend__Pre q;
  ds__bend_pre(x, v, p, &q);
#if defined(DS__BL)
  if (!q.ok) { /* the passes' -0 */
    for (int k = 0; k < 144; k++) Kx[k] = Kv[k] = -(dsReal)0;
    return;
  }
  for (int k0 = 0; k0 < 12; k0 += DS__BL) {
    dsBend__V ax[12], av[12];
    ds__bend_jac_lanes(v, p, &q, k0, ax, av);
    for (int l = 0; l < DS__BL; l++)
      for (int j = 0; j < 12; j++) {
        Kx[12 * (k0 + l) + j] = -ax[j][l];
        Kv[12 * (k0 + l) + j] = -av[j][l];
      }
  }
#else
  for (int k = 0; k < 12; k++) {
    dsReal ek[12] = {0}, ax[12] = {0}, av[12] = {0};
    dsBendParam ap = {0, 0, 0};
    ek[k] = 1;
    ds__bend_bwd_pre(x, v, p, &q, ek, ax, av, &ap);
    for (int j = 0; j < 12; j++) {
      Kx[12 * k + j] = -ax[j];
      Kv[12 * k + j] = -av[j];
    }
  }
#endif
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

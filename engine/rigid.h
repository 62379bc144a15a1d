/* Rigid bodies: Newton-Euler dynamics, the pose map of their vertices and
 * their ground contact with restitution; forward and adjoint side by side.
 *
 * State of body b (13 reals): p (centre of mass, world), q = (w, x, y, z)
 * (unit quaternion, body -> world), v (COM velocity), om (angular velocity,
 * world). Parameters: m, c (COM in the body frame), I (3x3 inertia about
 * the COM in body axes; all 9 entries are read), contact ke, kd, kf, mu,
 * restitution e; gravity g; contact skin s (global contact.skin).
 *
 * Pose map (vertex i of the body, r_i its body-frame position):
 *   a_i = r_i - c,  u_i = R(q) a_i,  x_i = p + u_i,  v_i = v + om x u_i
 * R(q) a = a + 2 w (qv x a) + 2 qv x (qv x a)  (qv = (x, y, z)); the
 * adjoints below differentiate this polynomial, so they are exact for any q.
 * Adjoint (X, V given): P += X, Vb += V, Om += u x V, U = X + V x om,
 *   then through u = R(q) a with t = qv x a, r = a + 2w t + 2 qv x t:
 *   At = 2w U + 2 (U x qv),  Aw = 2 U.t,  Aqv = 2 (t x U) + a x At,
 *   Aa = U + At x qv,  Ac -= Aa.
 * R(q)^T a is R of the conjugate (w, -qv): same adjoint with Aqv negated.
 *
 * Forces: vertex force f_i (its external force plus its ground contact),
 * body wrench (fw, tw) (d->body_fext). With r_i = x_i - p:
 *   F = sum_i f_i + fw,   tau = sum_i r_i x f_i + tw   (vertex order)
 * Adjoint (AF, AT given): af_i = AF + AT x r_i,  Ar_i = f_i x AT
 *   (x_i += Ar_i, p -= Ar_i),  A(fw) = AF,  A(tw) = AT.
 *
 * Integration over dt (semi-implicit Euler; the gyroscopic term explicit):
 *   v'  = v + dt (F/m + g)                    p' = p + dt v'
 *   wb  = R^T om,  tb = R^T tau,  h = I wb
 *   ab  = I^-1 (tb - wb x h)                   (Euler's equations in body axes:
 *                                               I_w = R I R^T, om x I_w om = R (wb x h))
 *   om' = om + dt R ab
 *   q~  = q + dt/2 (0, om') (x) q,  i.e. q~_w = q_w - dt/2 om'.qv,
 *         q~_v = qv + dt/2 (q_w om' + om' x qv);      q' = q~ / |q~|
 * Adjoint (P', Q', V', Om' given):
 *   Q~ = (Q' - q' (q'.Q')) / |q~|               (normalisation Jacobian)
 *   Q += Q~; Om' += -dt/2 qv Q~_w + dt/2 (q_w Q~_v + qv x Q~_v);
 *   Q_w += dt/2 om'.Q~_v;  Qv += -dt/2 om' Q~_w + dt/2 (Q~_v x om')
 *   V' += dt P';  P = P';  V = V';  AF = dt V'/m;  Am = -dt V'.F/m^2;  Ag = dt V'
 *   Om = Om';  Aab = R^T (dt Om') (rotation adjoint, also into Q)
 *   Arhs = I^-T Aab,  AI = -Arhs ab^T   (from d(I^-1) = -I^-1 dI I^-1)
 *   Atb = Arhs,  Agyr = -Arhs:  Awb += h x Agyr,  Ah = Agyr x wb
 *   AI += Ah wb^T,  Awb += I^T Ah;  tb = R^T tau, wb = R^T om (adjoints into
 *   AT, Om and Q).
 * The backward recomputes F and tau from the taped state (rigid vertices
 * carry no element forces, so f_i is their external force plus contact).
 *
 * Ground contact of a vertex (the engine's model, engine/force_contact.h,
 * with the body's coefficients, plus restitution, and the approach damping
 * switched on smoothly):
 *   c  = min(y - s, 0),  vn = v_y,  vt = (v_x, 0, v_z)
 *   kr = 2 z sqrt(m ke)
 *   fn = max(0, -ke c - kd a(vn) - kr vn)
 *   ft = -vt^ min(kf |vt|, mu fn),   f = fn n + ft when c < 0
 * Approach damping a(vn): min(vn, 0) (force_contact.h's) has a kink at vn =
 * 0, exactly where every vertex of a body at rest sits, so a loss of a scene
 * that starts at rest (rigid-toss) was not differentiable at its start and
 * central differences missed the adjoint by up to 16%. Instead, with t =
 * -vn / w and w = DS_RIGID_KD_WIDTH (1 cm/s),
 *   a = vn S(t),  S = t^2 (3 - 2t) (smoothstep; S = 0 for t <= 0, 1 for t >= 1)
 *   a' = da/dvn = t^2 (9 - 8t) on (0, 1), 0 for vn >= 0, 1 for vn <= -w
 * a is min(vn, 0) outside -w < vn < 0, C1 everywhere and C2 at vn = 0
 * (a ~ 3 vn^3 / w^2): separating vertices are not damped, approach faster than
 * w is damped by kd as before, and between them the damping fades in.
 * Restitution e: kr is the damping (damping ratio z) for which a point of
 * mass m on a linear spring ke and damper kr that only pushes (the max(0,
 * .): it lets go when its force reaches zero) leaves with e times its
 * entry speed. Solving that contact in closed form, with w = sqrt(ke/m):
 * the depth is (v0/wd) exp(-z w t) sin(wd t), the force vanishes at phase
 * wd t = pi - 2 asin z, where the speed is exactly exp(-z w t) v0, so
 *   -ln e = z h(z),  h(z) = (pi - 2 asin z) / sqrt(1 - z^2)   (z < 1)
 *                        = 2 acosh z / sqrt(z^2 - 1)          (z > 1, the same
 *                          analytic function; h(1) = 2, e(1) = exp(-2))
 * z h(z) increases from 0 to infinity, so every e in (0, 1] has one z,
 * found by Newton's method from the unclamped guess -ln e / sqrt(pi^2 +
 * ln^2 e) when e is set (the model keeps z in body_zeta, as it keeps
 * inv_mass: change body.restitution through ds_model_set_param). A body
 * dropped on one contact point below its centre of mass therefore bounces
 * to e^2 of its height (in the limit of stiff contact and small dt;
 * tests/test_rigid_physics.c tabulates it). Several points in
 * contact at once (a box landing flat) each carry less than m, so they are
 * damped more than e says. e = 1 gives kr = 0: the engine's contact model;
 * kd adds the engine's approach-only damping on top.
 * Adjoint of the kr term: adj_kr = -adj_fn vn, and by the implicit function
 * theorem dz/de = -1 / (e (h + z h')), h' = (z h - 2) / (1 - z^2) (-2/3 at
 * z = 1), so dkr/de = 2 sqrt(m ke) dz/de; dkr/dm = kr / (2m),
 * dkr/dke = kr / (2 ke). At e = 1 (z = 0, kr = 0) the backward gives the
 * left derivative dkr/de = -2 sqrt(m ke) / pi (h(0) = pi): e > 1 is refused,
 * and a zero partial there would leave an optimiser stuck at the bound.
 * Non-smooth points, one-sided choices: y = s and fn = 0 count as out of
 * contact (zero force, zero gradient);
 * the friction switch and |vt| = 0 as sticking (as engine/force_contact.h).
 * As in the engine's contact, the damping terms make fn jump from 0 to
 * -kd a(vn) - kr vn when a vertex touches down while approaching, so a loss is
 * discontinuous in whatever moves a touch-down across a substep boundary
 * (the adjoint is that of the fixed contact sequence). Friction is
 * explicit: dt kf (vertices in contact) / m must stay below 2.
 * Smooth variant (an option, dsModel.contact_smooth = w > 0, the env key
 * contact.smooth; 0, the default, is the model above bit for bit): the
 * damping fades in over the first w of depth with force_contact.h's
 * smoothstep s(c),
 *   fn = max(0, -ke c - s(c) (kd a(vn) + kr vn)),
 * so fn is continuous at a touch-down, and the friction's cap is reached
 * through a tanh instead of the min (ds__rigid_sfriction_fwd below), so a
 * body coming to rest does not flip between branches every substep. Its
 * adjoint adds ds/dc: dfn/dc = -ke - (kd a + kr vn) ds/dc, and s multiplies
 * every damping partial. It is another model: a video made with one is
 * identified with the same one. */
#ifndef DSIM_ENGINE_RIGID_H
#define DSIM_ENGINE_RIGID_H

#include "engine/dsmath.h"
#include "engine/force_loop.h"
#include "engine/force_contact.h"

#define DS_RIGID_PI 3.14159265358979323846

/* ---- quaternion rotation ---------------------------------------------------- */
// res = R(q) a  (q = (w, x, y, z); exact rotation for unit q)
DS_HD DS_INLINE void dsu_qrot(dsReal res[3], const dsReal q[4], const dsReal a[3]) {
  const dsReal* qv = q + 1;
  dsReal t[3], s[3];
  dsu_cross3(t, qv, a);
  dsu_cross3(s, qv, t);
  for (int k = 0; k < 3; k++) res[k] = a[k] + 2 * q[0] * t[k] + 2 * s[k];
}

// adjoint of res = R(q) a: adj_q += (4), adj_a += (3); either may be NULL
DS_HD DS_INLINE void dsu_qrot_bwd(const dsReal q[4], const dsReal a[3], const dsReal U[3], dsReal adj_q[4],
                                 dsReal adj_a[3]) {
  const dsReal* qv = q + 1;
  dsReal t[3], At[3], c1[3];
  dsu_cross3(t, qv, a);
  dsu_cross3(c1, U, qv);
  for (int k = 0; k < 3; k++) At[k] = 2 * q[0] * U[k] + 2 * c1[k];
  if (adj_q) {
    dsReal c2[3], c3[3];
    dsu_cross3(c2, t, U);
    dsu_cross3(c3, a, At);
    adj_q[0] += 2 * dsu_dot3(U, t);
    for (int k = 0; k < 3; k++) adj_q[1 + k] += 2 * c2[k] + c3[k];
  }
  if (adj_a) {
    dsReal c4[3];
    dsu_cross3(c4, At, qv);
    for (int k = 0; k < 3; k++) adj_a[k] += U[k] + c4[k];
  }
}

// res = R(q)^T a
DS_HD DS_INLINE void dsu_qrotT(dsReal res[3], const dsReal q[4], const dsReal a[3]) {
  const dsReal qc[4] = {q[0], -q[1], -q[2], -q[3]};
  dsu_qrot(res, qc, a);
}

DS_HD DS_INLINE void dsu_qrotT_bwd(const dsReal q[4], const dsReal a[3], const dsReal U[3], dsReal adj_q[4],
                                  dsReal adj_a[3]) {
  const dsReal qc[4] = {q[0], -q[1], -q[2], -q[3]};
  dsReal aq[4] = {0, 0, 0, 0};
  dsu_qrot_bwd(qc, a, U, aq, adj_a);
  if (adj_q) {
    adj_q[0] += aq[0];
    adj_q[1] -= aq[1];
    adj_q[2] -= aq[2];
    adj_q[3] -= aq[3];
  }
}

// res = q / |q|, returns |q| (0: res = identity)
DS_HD DS_INLINE dsReal dsu_qnormalize(dsReal res[4], const dsReal q[4]) {
  dsReal n2 = q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3];
  if (!(n2 > DSU_TINY2)) {
    res[0] = 1; res[1] = 0; res[2] = 0; res[3] = 0;
    return 0;
  }
  dsReal n = dsu_sqrt(n2), in = 1 / n;
  for (int k = 0; k < 4; k++) res[k] = q[k] * in;
  return n;
}

// adjoint of u = q / |q| given u and n = |q|: adj_q += (U - u (u.U)) / n
DS_HD DS_INLINE void dsu_qnormalize_bwd(const dsReal u[4], dsReal n, const dsReal U[4], dsReal adj_q[4]) {
  if (!(n > 0)) return;
  dsReal d = u[0] * U[0] + u[1] * U[1] + u[2] * U[2] + u[3] * U[3], in = 1 / n;
  for (int k = 0; k < 4; k++) adj_q[k] += (U[k] - u[k] * d) * in;
}

/* ---- pose map ------------------------------------------------------------------ */
// vertex i: x = p + R(q)(r - c), v = v_b + om x R(q)(r - c); s = body state (13)
DS_HD DS_INLINE void ds__rigid_pose_fwd(const dsReal s[13], const dsReal r[3], const dsReal c[3], dsReal x[3],
                                       dsReal v[3]) {
  dsReal a[3], u[3], w[3];
  dsu_sub3(a, r, c);
  dsu_qrot(u, s + 3, a);
  dsu_cross3(w, s + 10, u);
  for (int k = 0; k < 3; k++) {
    x[k] = s[k] + u[k];
    v[k] = s[7 + k] + w[k];
  }
}

// adjoint: adj_s (13) += , adj_c (3) += from X = dL/dx, V = dL/dv
DS_HD DS_INLINE void ds__rigid_pose_bwd(const dsReal s[13], const dsReal r[3], const dsReal c[3], const dsReal X[3],
                                       const dsReal V[3], dsReal adj_s[13], dsReal adj_c[3]) {
  dsReal a[3], u[3], U[3], t[3], Aa[3] = {0, 0, 0};
  dsu_sub3(a, r, c);
  dsu_qrot(u, s + 3, a);
  dsu_cross3(t, u, V);
  dsu_cross3(U, V, s + 10);
  for (int k = 0; k < 3; k++) {
    adj_s[k] += X[k];
    adj_s[7 + k] += V[k];
    adj_s[10 + k] += t[k];
    U[k] += X[k];
  }
  dsu_qrot_bwd(s + 3, a, U, adj_s + 3, Aa);
  dsu_subfrom3(adj_c, Aa);
}

/* ---- ground contact with restitution ------------------------------------------- */
#define DS_RIGID_KD_WIDTH ((dsReal)0.01) /* w: approach speed over which kd fades in, m/s */

// a(vn) = vn S(-vn / w), the smoothly switched min(vn, 0) of the approach damping; *da = a'(vn)
DS_HD DS_INLINE dsReal ds__rigid_approach(dsReal vn, dsReal* da) {
  if (!(vn < 0)) {
    *da = 0;
    return 0;
  }
  if (!(vn > -DS_RIGID_KD_WIDTH)) {
    *da = 1;
    return vn;
  }
  const dsReal t = -vn / DS_RIGID_KD_WIDTH;
  *da = t * t * (9 - 8 * t);
  return vn * t * t * (3 - 2 * t);
}

/* The smooth variant's friction (w > 0): the Coulomb cap reached through a
 * tanh instead of a min, with F = mu fn, r = |vt|, a = kf r / F,
 *   ft = -vt^ g,  g = F tanh(a)      (g ~ kf r for r << F / kf: the same
 *                                     viscous slope; g -> F when sliding)
 *   dg/dr = kf sech^2 a,  dg/dkf = r sech^2 a,  dg/dF = tanh a - a sech^2 a.
 * The min's switch between sticking and sliding flips from substep to
 * substep while a body comes to rest (chattering), and its gradient, that of
 * one fixed sequence of branches, is then far from the slope of the loss
 * (landscapes of sysid-rigid-contact: wrong signs 1 % from the truth); the
 * tanh has one branch. Adjoint, G = dL/dft, t = vt^, gt = G . t:
 *   dL/dvt -= (g / r) (G - t gt) + gt dg/dr t,  dL/dkf -= gt dg/dkf,
 *   dL/dF = -gt dg/dF (into mu and fn).  At r = 0: ft = -kf vt, its limit. */
DS_HD DS_INLINE dsReal ds__rigid_tanh(dsReal a) { /* a >= 0 */
  const dsReal e = dsu_exp(-2 * a);
  return (1 - e) / (1 + e);
}

DS_HD DS_INLINE void ds__rigid_sfriction_fwd(const dsReal v[3], dsReal kf, dsReal mu, dsReal fn, dsReal f[3]) {
  const dsReal r2 = v[0] * v[0] + v[2] * v[2], F = mu * fn;
  if (!(F > 0)) return;
  if (!(r2 > DSU_TINY2)) {
    f[0] = -kf * v[0];
    f[2] = -kf * v[2];
    return;
  }
  const dsReal r = dsu_sqrt(r2), g = F * ds__rigid_tanh(kf * r / F);
  f[0] = -g * v[0] / r;
  f[2] = -g * v[2] / r;
}

DS_HD DS_INLINE void ds__rigid_sfriction_bwd(const dsReal v[3], dsReal kf, dsReal mu, dsReal fn, const dsReal G[3],
                                            dsReal adj_v[3], dsReal* adj_kf, dsReal* adj_mu, dsReal* adj_fn) {
  const dsReal r2 = v[0] * v[0] + v[2] * v[2], F = mu * fn;
  if (!(F > 0)) return;
  if (!(r2 > DSU_TINY2)) {
    *adj_kf -= G[0] * v[0] + G[2] * v[2];
    adj_v[0] -= kf * G[0];
    adj_v[2] -= kf * G[2];
    return;
  }
  const dsReal r = dsu_sqrt(r2), a = kf * r / F, th = ds__rigid_tanh(a), s2 = 1 - th * th, g = F * th;
  const dsReal t0 = v[0] / r, t2 = v[2] / r, gt = G[0] * t0 + G[2] * t2;
  adj_v[0] -= (g / r) * (G[0] - t0 * gt) + gt * kf * s2 * t0;
  adj_v[2] -= (g / r) * (G[2] - t2 * gt) + gt * kf * s2 * t2;
  *adj_kf -= gt * r * s2;
  const dsReal aF = -gt * (th - a * s2);
  *adj_mu += aF * fn;
  *adj_fn += aF * mu;
}

typedef struct dsRigidContact {
  dsReal ke, kd, kf, mu, e, m, skin;
  dsReal z; /* damping ratio of e (ds__rigid_zeta, kept in the model: not differentiated as such) */
  dsReal w; /* width of the damping's switch inside the skin, m (dsModel.contact_smooth; 0: a step) */
} dsRigidContact;

// h(z) = (pi - 2 asin z) / sqrt(1 - z^2) (z < 1), 2 acosh z / sqrt(z^2 - 1) (z > 1), 2 at z = 1
// (one analytic function), and its derivative h' = (z h - 2) / (1 - z^2) (-2/3 at z = 1)
DS_HD DS_INLINE dsReal ds__rigid_h(dsReal z, dsReal* dh) {
  dsReal d = z - 1, h;
  if (dsu_fabs(d) < (dsReal)1e-6) {
    h = 2 - (dsReal)(2.0 / 3.0) * d;
    *dh = -(dsReal)(2.0 / 3.0);
    return h;
  }
  if (z < 1) {
    h = ((dsReal)DS_RIGID_PI - 2 * dsu_asin(z)) / dsu_sqrt(1 - z * z);
  } else {
    dsReal q = dsu_sqrt(z * z - 1);
    h = 2 * dsu_log(z + q) / q;
  }
  *dh = (z * h - 2) / (1 - z * z);
  return h;
}

// damping ratio z with exit/entry speed ratio e of the clamped spring-damper:
// -ln e = z h(z); dz_de = dz/de
DS_HD DS_INLINE dsReal ds__rigid_zeta(dsReal e, dsReal* dz_de) {
  const dsReal Lm = -dsu_log(e);
  dsReal z = Lm / dsu_sqrt((dsReal)(DS_RIGID_PI * DS_RIGID_PI) + Lm * Lm), dh, Fp = 1;
  for (int it = 0; it < 60; it++) {
    dsReal h = ds__rigid_h(z, &dh);
    Fp = h + z * dh;
    dsReal step = (z * h - Lm) / Fp;
    z -= step;
    if (!(z > 0)) z = Lm * (dsReal)1e-3;
    if (dsu_fabs(step) <= (dsReal)1e-15 * z) break;
  }
  Fp = ds__rigid_h(z, &dh) + z * dh;
  *dz_de = -1 / (e * Fp);
  return z;
}

// kr(e, m, ke) = 2 z(e) sqrt(m ke), z = p->z, and its partials (d_e, d_m, d_ke; any may be NULL).
// At e = 1 (z = 0, kr = 0) d_e is the left derivative -2 sqrt(m ke) / pi (h(0) = pi).
DS_HD DS_INLINE dsReal ds__rigid_kr(const dsRigidContact* p, dsReal* d_e, dsReal* d_m, dsReal* d_ke) {
  dsReal mk = p->m * p->ke;
  if (!(p->e <= 1) || !(p->e > 0) || !(mk > 0) || !(p->z >= 0)) {
    if (d_e) *d_e = 0;
    if (d_m) *d_m = 0;
    if (d_ke) *d_ke = 0;
    return 0;
  }
  dsReal s = dsu_sqrt(mk), kr = 2 * p->z * s;
  if (d_e) {
    dsReal dh, h = ds__rigid_h(p->z, &dh);
    *d_e = 2 * s * (-1 / (p->e * (h + p->z * dh)));
  }
  if (d_m) *d_m = kr / (2 * p->m);
  if (d_ke) *d_ke = kr / (2 * p->ke);
  return kr;
}

DS_HD DS_INLINE void ds__rigid_contact_fwd(const dsReal x[3], const dsReal v[3], const dsRigidContact* p,
                                          dsReal f[3]) {
  f[0] = 0; f[1] = 0; f[2] = 0;
  dsReal c = x[1] - p->skin;
  if (!(c < 0)) return;
  dsReal vn = v[1], kr = ds__rigid_kr(p, NULL, NULL, NULL), da;
  dsReal fn;
  if (p->w > 0) /* the damping faded in over the first w of depth (see above) */
    fn = -p->ke * c - ds__contact_switch(c, p->w, NULL) * (p->kd * ds__rigid_approach(vn, &da) + kr * vn);
  else
    fn = -p->ke * c - p->kd * ds__rigid_approach(vn, &da) - kr * vn;
  if (!(fn > 0)) return;
  if (p->w > 0)
    ds__rigid_sfriction_fwd(v, p->kf, p->mu, fn, f);
  else
    ds__friction_fwd(v, p->kf, p->mu, fn, &f[0], &f[2]); /* engine/force_contact.h */
  f[1] = fn;
}

// adjoint: adj_x, adj_v, adj_p accumulate
DS_HD DS_INLINE void ds__rigid_contact_bwd(const dsReal x[3], const dsReal v[3], const dsRigidContact* p,
                                          const dsReal adj_f[3], dsReal adj_x[3], dsReal adj_v[3],
                                          dsRigidContact* adj_p) {
  dsReal c = x[1] - p->skin;
  if (!(c < 0)) return;
  dsReal kr_e, kr_m, kr_ke;
  dsReal vn = v[1], kr = ds__rigid_kr(p, &kr_e, &kr_m, &kr_ke);
  dsReal da, vnm = ds__rigid_approach(vn, &da);
  if (p->w > 0) {
    dsReal dsw, sw = ds__contact_switch(c, p->w, &dsw);
    const dsReal damp = p->kd * vnm + kr * vn;
    dsReal fn = -p->ke * c - sw * damp;
    if (!(fn > 0)) return;
    dsReal adj_fn = adj_f[1];
    ds__rigid_sfriction_bwd(v, p->kf, p->mu, fn, adj_f, adj_v, &adj_p->kf, &adj_p->mu, &adj_fn);
    dsReal adj_kr = -adj_fn * sw * vn;
    adj_p->ke += -adj_fn * c + adj_kr * kr_ke;
    adj_p->e += adj_kr * kr_e;
    adj_p->m += adj_kr * kr_m;
    adj_p->kd -= adj_fn * sw * vnm;
    const dsReal dfn_dc = -p->ke - damp * dsw; /* c = y - skin */
    adj_x[1] += dfn_dc * adj_fn;
    adj_p->skin -= dfn_dc * adj_fn;
    adj_v[1] -= sw * (p->kd * da + kr) * adj_fn;
    return;
  }
  dsReal fn = -p->ke * c - p->kd * vnm - kr * vn;
  if (!(fn > 0)) return;
  dsReal adj_fn = adj_f[1];
  ds__friction_bwd(v, p->kf, p->mu, fn, adj_f, adj_v, &adj_p->kf, &adj_p->mu, &adj_fn);
  dsReal adj_kr = -adj_fn * vn;
  adj_p->ke -= adj_fn * c;
  adj_p->ke += adj_kr * kr_ke;
  adj_p->e += adj_kr * kr_e;
  adj_p->m += adj_kr * kr_m;
  adj_p->kd -= adj_fn * vnm;
  adj_x[1] -= p->ke * adj_fn;
  adj_p->skin += p->ke * adj_fn;
  adj_v[1] -= p->kd * da * adj_fn;
  adj_v[1] -= kr * adj_fn;
}

/* ---- Newton-Euler step ------------------------------------------------------------- */
typedef struct dsRigidInertia {
  dsReal m;
  dsReal I[9];
} dsRigidInertia;

// so = state after dt from s under (F, tau) (so may alias s)
DS_HD DS_INLINE void ds__rigid_integrate_fwd(const dsReal s[13], const dsReal F[3], const dsReal tau[3],
                                            const dsRigidInertia* b, const dsReal g[3], dsReal dt, dsReal so[13]) {
  const dsReal* q = s + 3;
  dsReal wb[3], tb[3], h[3], gyr[3], rhs[3], Iinv[9], ab[3], aw[3], om1[3], v1[3], p1[3], qt[4], q1[4];
  dsu_qrotT(wb, q, s + 10);
  dsu_qrotT(tb, q, tau);
  for (int i = 0; i < 3; i++) h[i] = b->I[3 * i] * wb[0] + b->I[3 * i + 1] * wb[1] + b->I[3 * i + 2] * wb[2];
  dsu_cross3(gyr, wb, h);
  dsu_sub3(rhs, tb, gyr);
  if (dsu_mat3_inv(Iinv, b->I) == 0)
    for (int k = 0; k < 9; k++) Iinv[k] = 0; /* singular (refused by the builder and set_param) */
  for (int i = 0; i < 3; i++) ab[i] = Iinv[3 * i] * rhs[0] + Iinv[3 * i + 1] * rhs[1] + Iinv[3 * i + 2] * rhs[2];
  dsu_qrot(aw, q, ab);
  const dsReal im = 1 / b->m;
  for (int k = 0; k < 3; k++) {
    om1[k] = s[10 + k] + dt * aw[k];
    v1[k] = s[7 + k] + dt * (F[k] * im + g[k]);
    p1[k] = s[k] + dt * v1[k];
  }
  const dsReal hd = dt / 2;
  dsReal cr[3];
  dsu_cross3(cr, om1, q + 1);
  qt[0] = q[0] - hd * dsu_dot3(om1, q + 1);
  for (int k = 0; k < 3; k++) qt[1 + k] = q[1 + k] + hd * (q[0] * om1[k] + cr[k]);
  dsu_qnormalize(q1, qt);
  for (int k = 0; k < 3; k++) {
    so[k] = p1[k];
    so[7 + k] = v1[k];
    so[10 + k] = om1[k];
  }
  for (int k = 0; k < 4; k++) so[3 + k] = q1[k];
}

// adjoint: given A1 = dL/d(so) (13), accumulates dL/ds into As (13; may not
// alias A1), dL/dF, dL/dtau, dL/dm, dL/dI (9), dL/dg (3)
DS_HD DS_INLINE void ds__rigid_integrate_bwd(const dsReal s[13], const dsReal F[3], const dsReal tau[3],
                                            const dsRigidInertia* b, const dsReal g[3], dsReal dt,
                                            const dsReal A1[13], dsReal As[13], dsReal AF[3], dsReal AT[3],
                                            dsRigidInertia* Ab, dsReal Ag[3]) {
  (void)g;
  const dsReal* q = s + 3;
  /* recompute */
  dsReal wb[3], h[3], gyr[3], rhs[3], Iinv[9], ab[3], aw[3], om1[3], qt[4], q1[4], tb[3];
  dsu_qrotT(wb, q, s + 10);
  dsu_qrotT(tb, q, tau);
  for (int i = 0; i < 3; i++) h[i] = b->I[3 * i] * wb[0] + b->I[3 * i + 1] * wb[1] + b->I[3 * i + 2] * wb[2];
  dsu_cross3(gyr, wb, h);
  dsu_sub3(rhs, tb, gyr);
  if (dsu_mat3_inv(Iinv, b->I) == 0)
    for (int k = 0; k < 9; k++) Iinv[k] = 0; /* singular (refused by the builder and set_param) */
  for (int i = 0; i < 3; i++) ab[i] = Iinv[3 * i] * rhs[0] + Iinv[3 * i + 1] * rhs[1] + Iinv[3 * i + 2] * rhs[2];
  dsu_qrot(aw, q, ab);
  for (int k = 0; k < 3; k++) om1[k] = s[10 + k] + dt * aw[k];
  const dsReal hd = dt / 2, im = 1 / b->m;
  dsReal cr[3];
  dsu_cross3(cr, om1, q + 1);
  qt[0] = q[0] - hd * dsu_dot3(om1, q + 1);
  for (int k = 0; k < 3; k++) qt[1 + k] = q[1 + k] + hd * (q[0] * om1[k] + cr[k]);
  dsReal nq = dsu_qnormalize(q1, qt);
  /* normalisation and quaternion update */
  dsReal Qt[4] = {0, 0, 0, 0}, Om1[3], V1[3];
  dsu_qnormalize_bwd(q1, nq, A1 + 3, Qt);
  for (int k = 0; k < 4; k++) As[3 + k] += Qt[k];
  const dsReal* Qv = Qt + 1;
  dsReal c1[3], c2[3];
  dsu_cross3(c1, q + 1, Qv); /* qv x Q~_v: into om' */
  dsu_cross3(c2, Qv, om1);   /* Q~_v x om': into qv */
  for (int k = 0; k < 3; k++) {
    Om1[k] = A1[10 + k] - hd * q[1 + k] * Qt[0] + hd * (q[0] * Qv[k] + c1[k]);
    As[4 + k] += -hd * om1[k] * Qt[0] + hd * c2[k];
  }
  As[3] += hd * dsu_dot3(om1, Qv);
  /* translation */
  dsReal vF = 0;
  for (int k = 0; k < 3; k++) {
    As[k] += A1[k];
    V1[k] = A1[7 + k] + dt * A1[k];
    As[7 + k] += V1[k];
    AF[k] += dt * V1[k] * im;
    vF += V1[k] * F[k];
    Ag[k] += dt * V1[k];
  }
  Ab->m += -dt * vF * im * im;
  /* rotation */
  dsReal Aaw[3], Aab[3] = {0, 0, 0}, Arhs[3], Agyr[3], Awb[3] = {0, 0, 0}, Ah[3];
  for (int k = 0; k < 3; k++) {
    As[10 + k] += Om1[k];
    Aaw[k] = dt * Om1[k];
  }
  dsu_qrot_bwd(q, ab, Aaw, As + 3, Aab);
  for (int j = 0; j < 3; j++) Arhs[j] = Iinv[j] * Aab[0] + Iinv[3 + j] * Aab[1] + Iinv[6 + j] * Aab[2];
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++) Ab->I[3 * i + j] -= Arhs[i] * ab[j];
  for (int k = 0; k < 3; k++) Agyr[k] = -Arhs[k];
  dsu_zero3(Ah);
  dsu_cross3_bwd(wb, h, Agyr, Awb, Ah);
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++) {
      Ab->I[3 * i + j] += Ah[i] * wb[j];
      Awb[j] += b->I[3 * i + j] * Ah[i];
    }
  dsu_qrotT_bwd(q, tau, Arhs, As + 3, AT);
  dsu_qrotT_bwd(q, s + 10, Awb, As + 3, As + 10);
}

/* ---- the stage's loops (engine/rigid.c), called by engine/step.c -------------------
 * Forward, body b: F and tau from the vertex forces fr (their external force
 * plus contact, gathered like every particle's) and the wrench bfext; then,
 * when integrate, the new state into bo (may alias bs) and the vertices'
 * new x, v into xo, vo. */
void ds__rigid_fwd(const dsModel* m, int b, const dsReal* x, const dsReal* fr, const dsReal* bs,
                   const dsReal* bfext, dsReal* bo, dsReal* xo, dsReal* vo, int integrate);
/* Backward, body b, popping the substep from state (x, v, bs) to bs1:
 * turns the vertices' adjoints in adj_x/adj_v (of the state after the
 * substep) and adj_body into those of the state before; writes the vertices'
 * force adjoints into af, zero into av, the wrench adjoint into adj_bfext
 * (6), the body's parameter gradients into g and its gravity partial into
 * ag (3). fext: the substep's particle external forces (NULL: zero). */
void ds__rigid_bwd(const dsModel* m, int b, const dsReal* x, const dsReal* v, const dsReal* fext, const dsReal* bs,
                   const dsReal* bs1, const dsReal* bfext, dsReal* adj_x, dsReal* adj_v, dsReal* adj_body,
                   dsReal* af, dsReal* av, dsReal* adj_bfext, dsGrad* g, dsReal ag[3]);
/* Pose every vertex of every body from the states bs (reset, set state). */
void ds__rigid_pose_all(const dsModel* m, const dsReal* bs, dsReal* x, dsReal* v);
/* At substep 0: the vertices' adjoints into the body adjoints (state bs),
 * then into the initial-state parameters of g (with the normalisation of q0). */
void ds__rigid_finish(const dsModel* m, const dsReal* bs, dsReal* adj_x, dsReal* adj_v, dsReal* adj_body, dsGrad* g);
/* Initial state of body b from the model's parameters. */
void ds__rigid_initial(const dsModel* m, int b, dsReal s[13]);

/* ---- contact of rigid vertices: a per-particle row of the force table ----------------
 * The particle contact row skips rigid vertices; this row handles them with
 * their body's coefficients. Scratch per particle: dL/d[ke, kd, kf, mu, e,
 * m, skin], summed serially in particle order into the body's gradients. */
DS_HD DS_INLINE int ds__rcontact_on(const dsModel* m) { return m->ground && m->nbody; }
DS_HD DS_INLINE int ds__rcontact_count(const dsModel* m) { return ds__rcontact_on(m) ? m->nparticle : 0; }

DS_HD DS_INLINE dsRigidContact ds__rcontact_param(const dsModel* m, int b) {
  dsRigidContact p = {m->body_ke[b], m->body_kd[b],   m->body_kf[b],      m->body_mu[b],
                      m->body_restitution[b], m->body_mass[b], m->contact_skin[0], m->body_zeta[b],
                      m->contact_smooth};
  return p;
}

DS_HD DS_INLINE void ds__rcontact_pfwd(const dsModel* m, int i, const dsReal* x, const dsReal* v, dsReal f[3]) {
  const int b = m->particle_body[i];
  if (b < 0) return;
  const dsRigidContact p = ds__rcontact_param(m, b);
  dsReal fc[3];
  ds__rigid_contact_fwd(x + 3 * (size_t)i, v + 3 * (size_t)i, &p, fc);
  f[0] += fc[0];
  f[1] += fc[1];
  f[2] += fc[2];
}

DS_HD DS_INLINE void ds__rcontact_pbwd(const dsModel* m, int i, const dsReal* x, const dsReal* v, const dsReal* af,
                                     dsReal ax[3], dsReal av[3], dsReal* scratch) {
  const int b = m->particle_body[i];
  if (b < 0) return;
  const dsRigidContact p = ds__rcontact_param(m, b);
  dsRigidContact a = {0, 0, 0, 0, 0, 0, 0, 0, 0};
  const size_t o = 3 * (size_t)i;
  ds__rigid_contact_bwd(x + o, v + o, &p, af + o, ax, av, &a);
  dsReal* s7 = scratch + 7 * (size_t)i;
  s7[0] = a.ke;
  s7[1] = a.kd;
  s7[2] = a.kf;
  s7[3] = a.mu;
  s7[4] = a.e;
  s7[5] = a.m;
  s7[6] = a.skin;
}

static inline void ds__rcontact_reduce(const dsModel* m, const dsReal* s, dsGrad* g) {
  const int n = ds__rcontact_count(m);
  dsReal skin = 0;
  for (int i = 0; i < n; i++) {
    const int b = m->particle_body[i];
    if (b < 0) continue;
    const dsReal* s7 = s + 7 * (size_t)i;
    g->body_ke[b] += s7[0];
    g->body_kd[b] += s7[1];
    g->body_kf[b] += s7[2];
    g->body_mu[b] += s7[3];
    g->body_restitution[b] += s7[4];
    g->body_mass[b] += s7[5];
    skin += s7[6];
  }
  g->contact_skin[0] += skin;
}

#define DS__FORCE_RIGID_CONTACT                                                                   \
  {.name = "rigid-contact", .count = ds__rcontact_count, .scratch = 7, .pfwd = ds__rcontact_pfwd, \
   .pbwd = ds__rcontact_pbwd, .reduce = ds__rcontact_reduce}

#endif

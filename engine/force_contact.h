/* Penalty contact of one particle with the ground plane y = 0 (normal
 * n = (0, 1, 0)), contact skin r.
 *
 *   c  = min(y - r, 0)                      penetration (<= 0)
 *   vn = v_y,  vt = (v_x, 0, v_z)
 *   fn = -ke c - kd min(vn, 0)              push out + damp approach only
 *   ft = -vt^ min(kf |vt|, mu fn)           Coulomb-capped viscous friction
 *   f  = fn n + ft  when c < 0, else 0
 *
 * Friction regimes:
 *   sticking (kf |vt| <= mu fn):  ft = -kf vt         (smooth, fine at vt = 0)
 *   sliding  (kf |vt| >  mu fn):  ft = -mu fn vt^
 * (parameters assumed >= 0; the regime test compares kf^2 |vt|^2 with
 * (mu fn)^2, mu fn >= 0, so the common path has no square root.)
 * The ratio form -kf vt avoids vt^ in the sticking regime, so |vt| = 0 never
 * divides; in the sliding regime |vt| > 0 unless mu fn < 0 (non-physical
 * parameters), which is guarded (ft = 0).
 *
 * Adjoint (G = adj_f):  adj_fn = G_y (+ friction part), then
 *   sticking: adj_kf -= G . vt,          adj_vt = -kf G
 *   sliding:  adj_mu -= fn (G . vt^),     adj_fn -= mu (G . vt^),
 *             adj_vt = -mu fn (G - vt^ (vt^ . G)) / |vt|
 *   adj_ke -= adj_fn c,  adj_kd -= adj_fn min(vn, 0),
 *   adj_y  += -ke adj_fn,  adj_skin += ke adj_fn,
 *   adj_vy += -kd adj_fn when vn < 0.
 *
 * Non-smooth points, one-sided choices (the gradient is that of the branch
 * named here, i.e. of the side the point belongs to):
 *   c = 0 (y = r exactly):        out of contact (strict y - r < 0 needed) -> zero
 *   vn = 0:                        separating side (no damping term)
 *   kf |vt| = mu fn:               sticking branch
 *   |vt| = 0:                      sticking branch (gradient -kf for vt, exact) */
#ifndef DSIM_ENGINE_FORCE_CONTACT_H
#define DSIM_ENGINE_FORCE_CONTACT_H

#include "engine/dsmath.h"
#include "engine/force_loop.h"

typedef struct dsContactParam {
  dsReal ke;   /* normal stiffness, N/m */
  dsReal kd;   /* normal damping (approach only), N s/m */
  dsReal kf;   /* viscous friction coefficient, N s/m */
  dsReal mu;   /* Coulomb friction coefficient, dimensionless */
  dsReal skin; /* contact skin r: contact starts at y < r, m */
} dsContactParam;

/* The tangential part shared by particle and rigid contact: Coulomb-capped
 * viscous friction on vt = (v_x, 0, v_z) under a normal force fn,
 *   ft = -kf vt                 when kf |vt| <= mu fn (sticking branch)
 *   ft = -mu fn vt / |vt|       otherwise, for |vt|^2 > DSU_TINY2 (sliding)
 *   ft = 0                      otherwise (no direction).
 * Adjoint, with G = dL/dft (G_x, G_z):
 *   sticking: dL/dkf -= G . vt,  dL/dvt -= kf G
 *   sliding:  t = vt / |vt|, g = G . t: dL/dmu -= fn g, dL/dfn -= mu g,
 *             dL/dvt += (-mu fn / |vt|) (G - t g)  (the projector I - t t^T). */
DS_HD DS_INLINE void ds__friction_fwd(const dsReal v[3], dsReal kf, dsReal mu, dsReal fn, dsReal* ft0, dsReal* ft2) {
  const dsReal vt2 = v[0] * v[0] + v[2] * v[2];
  const dsReal cap = mu * fn;
  if (kf * kf * vt2 <= cap * cap && cap >= 0) { /* kf |vt| <= mu fn (kf >= 0) */
    *ft0 = -kf * v[0];
    *ft2 = -kf * v[2];
  } else if (vt2 > DSU_TINY2) {
    const dsReal s = -cap / dsu_sqrt(vt2);
    *ft0 = s * v[0];
    *ft2 = s * v[2];
  } else {
    *ft0 = 0;
    *ft2 = 0;
  }
}

/* Adds into adj_v (x and z), *adj_kf, *adj_mu and *adj_fn. */
DS_HD DS_INLINE void ds__friction_bwd(const dsReal v[3], dsReal kf, dsReal mu, dsReal fn, const dsReal adj_f[3],
                                      dsReal adj_v[3], dsReal* adj_kf, dsReal* adj_mu, dsReal* adj_fn) {
  const dsReal vt2 = v[0] * v[0] + v[2] * v[2];
  const dsReal cap = mu * fn;
  if (kf * kf * vt2 <= cap * cap && cap >= 0) {
    *adj_kf -= adj_f[0] * v[0] + adj_f[2] * v[2];
    adj_v[0] -= kf * adj_f[0];
    adj_v[2] -= kf * adj_f[2];
  } else if (vt2 > DSU_TINY2) {
    const dsReal l = dsu_sqrt(vt2), il = 1 / l;
    const dsReal t0 = v[0] * il, t2 = v[2] * il;
    const dsReal gt = adj_f[0] * t0 + adj_f[2] * t2; /* G . vt^ */
    *adj_mu -= fn * gt;
    *adj_fn -= mu * gt;
    const dsReal s = -cap * il; /* d(-cap vt^)/dvt = s (I - vt^ vt^T) */
    adj_v[0] += s * (adj_f[0] - t0 * gt);
    adj_v[2] += s * (adj_f[2] - t2 * gt);
  }
}

/* The approach damping's switch at the skin, optional (dsModel.contact_smooth
 * = w > 0): with u = min(-c / w, 1) inside the skin (c < 0), the damping
 * is kd s(c) min(vn, 0) with the C1 smoothstep
 *   s = u^2 (3 - 2 u),   ds/dc = -6 u (1 - u) / w,
 * so fn is continuous where a particle crosses the skin (w = 0: s = 1, the
 * step of kd |vn| at c = 0, the exact model and its bits). With s, every
 * formula above holds with kd s in place of kd, plus the terms of ds/dc:
 *   dfn/dy = -ke - kd vnm ds/dc,   adj_y, adj_skin: -/+ (ke + kd vnm ds/dc) adj_fn,
 *   adj_kd -= adj_fn s vnm   (vnm = min(vn, 0)).
 * Returns s; *ds (may be NULL) gets ds/dc. The width is a model setting,
 * not a parameter: it has no gradient. */
DS_HD DS_INLINE dsReal ds__contact_switch(dsReal c, dsReal w, dsReal* ds) {
  if (ds) *ds = 0;
  if (!(w > 0)) return 1;
  const dsReal u = -c / w;
  if (u >= 1) return 1;
  if (ds) *ds = -6 * u * (1 - u) / w;
  return u * u * (3 - 2 * u);
}

/* ds__contact_fwd with the damping's switch of width w (0: none) */
DS_HD DS_INLINE void ds__contact_sfwd(const dsReal x[3], const dsReal v[3], const dsContactParam* p, dsReal w,
                                     dsReal f[3]) {
  dsReal c = x[1] - p->skin;
  if (!(c < 0)) {
    f[0] = 0; f[1] = 0; f[2] = 0;
    return;
  }
  dsReal vn = v[1];
  const dsReal kd = w > 0 ? p->kd * ds__contact_switch(c, w, NULL) : p->kd;
  dsReal fn = -p->ke * c - kd * (vn < 0 ? vn : 0);
  dsReal ft0, ft2;
  ds__friction_fwd(v, p->kf, p->mu, fn, &ft0, &ft2);
  f[0] = ft0;
  f[1] = fn;
  f[2] = ft2;
}

DS_HD DS_INLINE void ds__contact_fwd(const dsReal x[3], const dsReal v[3], const dsContactParam* p,
                                    dsReal f[3]) {
  ds__contact_sfwd(x, v, p, 0, f);
}

/* ds__contact_bwd with the damping's switch of width w (0: none) */
DS_HD DS_INLINE void ds__contact_sbwd(const dsReal x[3], const dsReal v[3], const dsContactParam* p, dsReal w,
                                     const dsReal adj_f[3], dsReal adj_x[3], dsReal adj_v[3],
                                     dsContactParam* adj_p) {
  dsReal c = x[1] - p->skin;
  if (!(c < 0)) return;
  dsReal vn = v[1];
  dsReal vnm = vn < 0 ? vn : 0;
  dsReal sw = 1, dsw = 0;
  if (w > 0) sw = ds__contact_switch(c, w, &dsw);
  const dsReal kd = w > 0 ? p->kd * sw : p->kd;
  dsReal fn = -p->ke * c - kd * vnm;
  dsReal adj_fn = adj_f[1];
  ds__friction_bwd(v, p->kf, p->mu, fn, adj_f, adj_v, &adj_p->kf, &adj_p->mu, &adj_fn);
  adj_p->ke -= adj_fn * c;
  if (w > 0) {
    const dsReal ky = p->ke + p->kd * vnm * dsw; /* -dfn/dy = dfn/dskin */
    adj_p->kd -= adj_fn * sw * vnm;
    adj_x[1] -= ky * adj_fn;
    adj_p->skin += ky * adj_fn;
  } else {
    adj_p->kd -= adj_fn * vnm;
    adj_x[1] -= p->ke * adj_fn;
    adj_p->skin += p->ke * adj_fn;
  }
  if (vn < 0) adj_v[1] -= kd * adj_fn;
}

DS_HD DS_INLINE void ds__contact_bwd(const dsReal x[3], const dsReal v[3], const dsContactParam* p,
                                    const dsReal adj_f[3], dsReal adj_x[3], dsReal adj_v[3],
                                    dsContactParam* adj_p) {
  ds__contact_sbwd(x, v, p, 0, adj_f, adj_x, adj_v, adj_p);
}

/* ---- per particle, inside the gather (when the ground is on) ------------------------
 * No slots: a contact force acts on one particle, so it is added to that
 * particle's force right after the particle sums its slots (and its adjoint
 * is accumulated right after the slot adjoints are summed), in the
 * gather loop itself. A separate stage writing a per-particle buffer would
 * cost a pass and a buffer, and adding the buffer would not round the same
 * way (f += contact on the slot sum, not slot sum + (0 + contact)).
 * Scratch: [dL/dke, kd, kf, mu, skin] per particle, summed in particle order. */
/* On for every particle when the ground is (the gather's per-particle test:
 * one load). */
DS_HD DS_INLINE int ds__contact_on(const dsModel* m) { return m->ground; }
DS_HD DS_INLINE int ds__contact_count(const dsModel* m) { return ds__contact_on(m) ? m->nparticle : 0; }

DS_HD DS_INLINE dsContactParam ds__contact_param(const dsModel* m) {
  dsContactParam cp = {m->contact_ke[0], m->contact_kd[0], m->contact_kf[0], m->contact_mu[0], m->contact_skin[0]};
  return cp;
}

DS_HD DS_INLINE void ds__contact_pfwd(const dsModel* m, int i, const dsReal* x, const dsReal* v, dsReal f[3]) {
  if (m->nbody && m->particle_body[i] >= 0) return; /* rigid vertex: engine/rigid.h */
  const dsContactParam cp = ds__contact_param(m);
  dsReal fc[3];
  ds__contact_sfwd(x + 3 * (size_t)i, v + 3 * (size_t)i, &cp, m->contact_smooth, fc);
  f[0] += fc[0];
  f[1] += fc[1];
  f[2] += fc[2];
}

DS_HD DS_INLINE void ds__contact_pbwd(const dsModel* m, int i, const dsReal* x, const dsReal* v, const dsReal* af,
                                    dsReal ax[3], dsReal av[3], dsReal* scratch) {
  const dsContactParam cp = ds__contact_param(m);
  dsContactParam ac = {0, 0, 0, 0, 0};
  const size_t o = 3 * (size_t)i;
  if (!(m->nbody && m->particle_body[i] >= 0))
    ds__contact_sbwd(x + o, v + o, &cp, m->contact_smooth, af + o, ax, av, &ac);
  dsReal* a5 = scratch + 5 * (size_t)i;
  a5[0] = ac.ke;
  a5[1] = ac.kd;
  a5[2] = ac.kf;
  a5[3] = ac.mu;
  a5[4] = ac.skin;
}

/* The shared scalars' gradients (SHARED row, forces.h): j = 0 ke, 1 kd,
 * 2 kf, 3 mu, 4 skin. */
DS_HD DS_INLINE void ds__contact_shared_add(dsGrad* g, int j, dsReal sum) {
  dsReal* const to[5] = {g->contact_ke, g->contact_kd, g->contact_kf, g->contact_mu, g->contact_skin};
  to[j][0] += sum;
}

/* the sums' store (also ds_backward_step's chained sums) */
static inline void ds__contact_reduce_store(const dsReal sc[5], dsGrad* g) {
  for (int j = 0; j < 5; j++) ds__contact_shared_add(g, j, sc[j]);
}

static inline void ds__contact_reduce(const dsModel* m, const dsReal* s, dsGrad* g) {
  const int n = ds__contact_count(m);
  dsReal sc[5] = {0, 0, 0, 0, 0};
  for (int i = 0; i < n; i++)
    for (int k = 0; k < 5; k++) sc[k] += s[5 * (size_t)i + k];
  ds__contact_reduce_store(sc, g);
}

#define DS__FORCE_CONTACT                                                                       \
  {.name = "contact", .count = ds__contact_count, .scratch = 5, .pfwd = ds__contact_pfwd,       \
   .pbwd = ds__contact_pbwd, .reduce = ds__contact_reduce}

/* ---- Jacobians (engine/forces.h "Jacobians") ------------------------------------
 * Kx = -df/dx, Kv = -df/dv (3 x 3) of ds__contact_fwd, branch by branch
 * (the one-sided choices above; with [vn < 0] the approach indicator):
 *   in contact (c < 0):  dfn/dy = -ke,  dfn/dvy = -kd [vn < 0]
 *   (with the switch of width w: kd s for kd, dfn/dy = -ke - kd vnm ds/dc)
 *   sticking:  dft/dvt = -kf I (x, z)
 *   sliding:   dft/dvt = -mu fn (I - t t^T) / |vt|,  t = vt / |vt|,
 *              dft/dfn = -mu t  (so dft/dy = mu ke t, dft/dvy = mu kd [vn < 0] t)
 *   no direction (|vt| ~ 0 while sliding), out of contact: zero.
 * Symmetric: the normal stiffness ke and damping, and the tangential
 * blocks (PSD: kf >= 0, mu fn >= 0 in the sliding branch); not symmetric:
 * the sliding friction's coupling to the normal force (columns y and vy of
 * the x and z rows). */
DS_HD DS_INLINE void ds__contact_sjac(const dsReal x[3], const dsReal v[3], const dsContactParam* p, dsReal w,
                                     dsReal Kx[9], dsReal Kv[9]) {
  for (int k = 0; k < 9; k++) Kx[k] = Kv[k] = 0;
  const dsReal c = x[1] - p->skin;
  if (!(c < 0)) return;
  const dsReal vn = v[1];
  const dsReal vnm = vn < 0 ? vn : 0;
  dsReal sw = 1, dsw = 0;
  if (w > 0) sw = ds__contact_switch(c, w, &dsw);
  const dsReal kd = w > 0 ? p->kd * sw : p->kd;
  const dsReal dn = vn < 0 ? kd : 0; /* -dfn/dvy */
  const dsReal ky = w > 0 ? p->ke + p->kd * vnm * dsw : p->ke; /* -dfn/dy (the switch's slope: w > 0) */
  const dsReal fn = -p->ke * c - kd * vnm;
  Kx[4] = ky;
  Kv[4] = dn;
  const dsReal vt2 = v[0] * v[0] + v[2] * v[2];
  const dsReal cap = p->mu * fn;
  if (p->kf * p->kf * vt2 <= cap * cap && cap >= 0) { /* sticking, as ds__friction_fwd */
    Kv[0] = p->kf;
    Kv[8] = p->kf;
  } else if (vt2 > DSU_TINY2) {
    const dsReal l = dsu_sqrt(vt2), il = 1 / l;
    const dsReal t[3] = {v[0] * il, 0, v[2] * il};
    const dsReal sc = cap * il;
    for (int a = 0; a < 3; a += 2) {
      for (int b = 0; b < 3; b += 2) Kv[3 * a + b] = sc * ((a == b) - t[a] * t[b]);
      Kx[3 * a + 1] = -p->mu * ky * t[a];
      Kv[3 * a + 1] = -p->mu * dn * t[a];
    }
  }
}

DS_HD DS_INLINE void ds__contact_jac(const dsReal x[3], const dsReal v[3], const dsContactParam* p, dsReal Kx[9],
                                    dsReal Kv[9]) {
  ds__contact_sjac(x, v, p, 0, Kx, Kv);
}

/* Kx, Kv (9 each) of the ground contact on particle i (zero on a rigid
 * body's vertex, whose contact is engine/rigid.h's). */
DS_HD DS_INLINE void ds__contact_pjac(const dsModel* m, int i, const dsReal* x, const dsReal* v, dsReal Kx[9],
                                     dsReal Kv[9]) {
  const dsContactParam cp = ds__contact_param(m);
  if (m->nbody && m->particle_body[i] >= 0) {
    for (int k = 0; k < 9; k++) Kx[k] = Kv[k] = 0;
    return;
  }
  ds__contact_sjac(x + 3 * (size_t)i, v + 3 * (size_t)i, &cp, m->contact_smooth, Kx, Kv);
}

#endif

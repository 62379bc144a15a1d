/* Damped, actuated spring between particles i and j (element-local:
 * x = [x_i, x_j]) with activation a: rest length L (1 + a) (a < 0 shortens
 * the spring, a = -1 makes its rest length zero).
 *
 *   d = x_i - x_j,  l = |d|,  d^ = d / l,  c = l - L (1 + a),  cdot = d^ . (v_i - v_j)
 *   s = ke c + kd cdot,   F = s d^,   f_i = -F,  f_j = +F
 *
 * Elastic part: f = -grad of E = ke/2 (l - L (1 + a))^2. At a = 0 the rest
 * length L (1 + 0) = L exactly (1 + 0 = 1 and L * 1 = L in IEEE
 * arithmetic), so a passive spring is bit for bit the unactuated one.
 *
 * Adjoint (G = adj_f_j - adj_f_i is the adjoint of F):
 *   adj_s = G . d^,   adj_d^ = s G + kd adj_s dv      (dv = v_i - v_j)
 *   adj_ke += adj_s c,  adj_kd += adj_s cdot,
 *   adj_rest -= ke (1 + a) adj_s,  adj_a -= ke L adj_s
 *   adj_d  = ke adj_s d^ + (adj_d^ - d^ (d^ . adj_d^)) / l
 *   adj_x_i += adj_d, adj_x_j -= adj_d;  adj_v_i += kd adj_s d^, adj_v_j -= same
 *
 * Non-smooth point: zero length (l^2 <= DSU_TINY2): d^ is undefined; the
 * force is zero and the gradient is zero (a one-sided choice: the limit
 * depends on the direction of approach). */
#ifndef DSIM_ENGINE_FORCE_SPRING_H
#define DSIM_ENGINE_FORCE_SPRING_H

#include "engine/dense_small.h"
#include "engine/dsmath.h"
#include "engine/force_loop.h"

typedef struct dsSpringParam {
  dsReal ke;   /* stiffness, N/m */
  dsReal kd;   /* damping, N s/m */
  dsReal rest; /* rest length L, m (of the passive spring) */
  dsReal act;  /* activation a: rest length L (1 + a); dimensionless */
} dsSpringParam;

DS_HD DS_INLINE void ds__spring_fwd(const dsReal x[6], const dsReal v[6], const dsSpringParam* p,
                                   dsReal f[6]) {
  dsReal d[3], dh[3], dv[3];
  dsu_sub3(d, x, x + 3);
  dsReal l = dsu_normalize3(dh, d);
  if (l == 0) {
    for (int k = 0; k < 6; k++) f[k] = 0;
    return;
  }
  dsu_sub3(dv, v, v + 3);
  dsReal s = p->ke * (l - p->rest * (1 + p->act)) + p->kd * dsu_dot3(dh, dv);
  dsu_scl3(f + 3, dh, s);
  dsu_scl3(f, dh, -s);
}

DS_HD DS_INLINE void ds__spring_bwd(const dsReal x[6], const dsReal v[6], const dsSpringParam* p,
                                   const dsReal adj_f[6], dsReal adj_x[6], dsReal adj_v[6],
                                   dsSpringParam* adj_p) {
  dsReal d[3], dh[3], dv[3], G[3], adj_dh[3], adj_d[3];
  dsu_sub3(d, x, x + 3);
  dsReal l = dsu_normalize3(dh, d);
  if (l == 0) return;
  dsu_sub3(dv, v, v + 3);
  dsReal c = l - p->rest * (1 + p->act), cdot = dsu_dot3(dh, dv);
  dsReal s = p->ke * c + p->kd * cdot;

  dsu_sub3(G, adj_f + 3, adj_f);
  dsReal adj_s = dsu_dot3(G, dh);
  adj_p->ke += adj_s * c;
  adj_p->kd += adj_s * cdot;
  adj_p->rest -= p->ke * (1 + p->act) * adj_s;
  adj_p->act -= p->ke * p->rest * adj_s;

  dsReal adj_cdot = p->kd * adj_s;
  dsu_scl3(adj_dh, G, s);
  dsu_addtoscl3(adj_dh, dv, adj_cdot);
  dsu_scl3(adj_d, dh, p->ke * adj_s); /* through l = |d| */
  dsu_normalize3_bwd(dh, l, adj_dh, adj_d);

  dsu_addto3(adj_x, adj_d);
  dsu_subfrom3(adj_x + 3, adj_d);
  dsu_addtoscl3(adj_v, dh, adj_cdot);
  dsu_addtoscl3(adj_v + 3, dh, -adj_cdot);
}

/* ---- Jacobians (engine/forces.h "Jacobians") ------------------------------------
 * Kx = -df/dx, Kv = -df/dv (6 x 6, element-local rows/columns [x_i, x_j]).
 * With P = I - d^ d^T (dd^/dd = P / l) and u = P dv:
 *   ds/dd = ke d^ + kd u / l,  ds/ddv = kd d^
 *   A := dF/dd = ke d^ d^T + (s / l) P + (kd / l) d^ u^T
 *   Kx = [[A, -A], [-A, A]],  Kv = kd [[D, -D], [-D, D]] with D = d^ d^T.
 * The activation only moves the rest length inside s. Symmetric: the
 * elastic part ke d^ d^T + (ke c / l) P and the damping force's own
 * (kd cdot / l) P; not symmetric: (kd / l) d^ u^T (the damping direction
 * turns with x), zero when the relative velocity is along the spring.
 * Kv is symmetric, and PSD for kd >= 0. Zero length: both zero (as the
 * force). */
DS_HD DS_INLINE void ds__spring_jac(const dsReal x[6], const dsReal v[6], const dsSpringParam* p,
                                   dsReal Kx[36], dsReal Kv[36]) {
  dsReal d[3], dh[3], dv[3], A[9], D[9];
  dsu_sub3(d, x, x + 3);
  dsReal l = dsu_normalize3(dh, d);
  if (l == 0) {
    for (int k = 0; k < 36; k++) Kx[k] = Kv[k] = 0;
    return;
  }
  dsu_sub3(dv, v, v + 3);
  const dsReal cdot = dsu_dot3(dh, dv);
  const dsReal s = p->ke * (l - p->rest * (1 + p->act)) + p->kd * cdot;
  const dsReal il = 1 / l;
  dsReal u[3];
  dsu_addscl3(u, dv, dh, -cdot);
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++) {
      const dsReal dd = dh[i] * dh[j];
      A[3 * i + j] = p->ke * dd + s * il * ((i == j) - dd) + p->kd * il * dh[i] * u[j];
      D[3 * i + j] = p->kd * dd;
    }
  ds__jac_from_edges(2, A, Kx);
  ds__jac_from_edges(2, D, Kv);
}

/* The PSD projection of the symmetric part of Kx in closed form (the
 * 6 x 6 is [[1, -1], [-1, 1]] (x) A, so it is the projection of
 * S = (A + A^T)/2, doubled eigenvalues aside). With u^ = u / |u|:
 *   S = ke d^ d^T + sigma P + b (d^ u^T + u^ d^T),  sigma = s / l,  b = kd |u| / (2 l)
 * is [[ke, b], [b, sigma]] on (d^, u^) and sigma on the normal w of both:
 *   lam+- = (ke + sigma)/2 +- r,  r = sqrt(((ke - sigma)/2)^2 + b^2),
 *   E+- = ([[1, 0], [0, 1]] +- [[c2, s2], [s2, -c2]]) / 2,  c2 = (ke - sigma)/(2 r),  s2 = b / r
 *   S+ = max(lam+, 0) E+ + max(lam-, 0) E- on (d^, u^),  max(sigma, 0) on w w^T = P - u^ u^T.
 * u = 0: u^ is taken as 0 (b = 0) and P carries max(sigma, 0) alone, as it
 * should. Kx gets [[S+, -S+], [-S+, S+]]; Kv is already PSD (kd >= 0).
 * Equal (to rounding) to ds__sym_project_psd on Kx; 3 x 3 work instead of
 * a 6 x 6 Jacobi. */
DS_HD DS_INLINE void ds__spring_jac_proj(const dsReal x[6], const dsReal v[6], const dsSpringParam* p,
                                        dsReal Kx[36]) {
  dsReal d[3], dh[3], dv[3], u[3], uh[3], S[9];
  dsu_sub3(d, x, x + 3);
  dsReal l = dsu_normalize3(dh, d);
  if (l == 0) {
    for (int k = 0; k < 36; k++) Kx[k] = 0;
    return;
  }
  dsu_sub3(dv, v, v + 3);
  const dsReal cdot = dsu_dot3(dh, dv);
  const dsReal s = p->ke * (l - p->rest * (1 + p->act)) + p->kd * cdot;
  dsu_addscl3(u, dv, dh, -cdot);
  const dsReal lu = dsu_normalize3(uh, u);
  const dsReal sig = s / l, b = p->kd * lu / (2 * l), hd = (p->ke - sig) / 2;
  const dsReal r = dsu_sqrt(hd * hd + b * b), mid = (p->ke + sig) / 2;
  dsReal al, be, ga; /* S+ = al d^ d^T + be (d^ u^T + u^ d^T) + ga u^ u^T on the plane */
  if (r > 0) {
    const dsReal lp = dsu_fmax(mid + r, (dsReal)0), lm = dsu_fmax(mid - r, (dsReal)0);
    const dsReal c2 = hd / r, s2 = b / r;
    al = (lp * (1 + c2) + lm * (1 - c2)) / 2;
    be = (lp - lm) * s2 / 2;
    ga = (lp * (1 - c2) + lm * (1 + c2)) / 2;
  } else {
    al = ga = dsu_fmax(mid, (dsReal)0);
    be = 0;
  }
  const dsReal sp = dsu_fmax(sig, (dsReal)0);
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++) {
      const dsReal dd = dh[i] * dh[j], uu = uh[i] * uh[j];
      S[3 * i + j] = al * dd + be * (dh[i] * uh[j] + uh[i] * dh[j]) + ga * uu + sp * ((i == j) - dd - uu);
    }
  ds__jac_from_edges(2, S, Kx);
}

/* ---- loop over the model's springs -------------------------------------------
 * Slots: 2 per spring, [i, j] = [f_i, f_j]; activation: one per spring
 * (block 3 of d->act, after the triangles' and the tets'). */
static inline int ds__spring_count(const dsModel* m) { return m->nspring; }
static inline const int* ds__spring_idx(const dsModel* m) { return m->spring_idx; }

/* Element bodies (one spring; engine/force_loop.h "Bodies"). */
DS_HD DS_INLINE void ds__spring_fwd_elem(const dsModel* m, const dsForceFwd* a, int e) {
  dsReal xl[6], vl[6];
  const int* idx = m->spring_idx + 2 * (size_t)e;
  dsSpringParam p = {m->spring_ke[e], m->spring_kd[e], m->spring_rest[e], a->act ? a->act[e] : 0};
  ds__gather3(xl, a->x, idx, 2);
  ds__gather3(vl, a->v, idx, 2);
  ds__spring_fwd(xl, vl, &p, a->ef + 6 * (size_t)e);
}

DS_HD DS_INLINE void ds__spring_bwd_elem(const dsModel* m, const dsForceBwd* a, int e) {
  dsReal xl[6], vl[6], al[6], ax[6] = {0}, avl[6] = {0};
  const int* idx = m->spring_idx + 2 * (size_t)e;
  dsSpringParam p = {m->spring_ke[e], m->spring_kd[e], m->spring_rest[e], a->act ? a->act[e] : 0};
  dsSpringParam ap = {0, 0, 0, 0};
  ds__gather3(xl, a->x, idx, 2);
  ds__gather3(vl, a->v, idx, 2);
  ds__gather3(al, a->af, idx, 2);
  ds__spring_bwd(xl, vl, &p, al, ax, avl, &ap);
  for (int k = 0; k < 6; k++) {
    a->aex[6 * (size_t)e + k] = ax[k];
    a->aev[6 * (size_t)e + k] = avl[k];
  }
  dsGrad* g = a->g;
  g->spring_ke[e] += ap.ke;
  g->spring_kd[e] += ap.kd;
  g->spring_rest[e] += ap.rest;
  if (a->adj_act) a->adj_act[e] = ap.act;
}

/* Kx, Kv (36 each) of spring e at a->x, a->v, a->act (a->ef, a->J unused). */
DS_HD DS_INLINE void ds__spring_jac_elem(const dsModel* m, const dsForceFwd* a, int e, dsReal* Kx, dsReal* Kv) {
  dsReal xl[6], vl[6];
  const int* idx = m->spring_idx + 2 * (size_t)e;
  dsSpringParam p = {m->spring_ke[e], m->spring_kd[e], m->spring_rest[e], a->act ? a->act[e] : 0};
  ds__gather3(xl, a->x, idx, 2);
  ds__gather3(vl, a->v, idx, 2);
  ds__spring_jac(xl, vl, &p, Kx, Kv);
}

DS__FLATTEN static inline void ds__spring_fwd_loop(const dsModel* m, const dsForceFwd* a) {
  const int n = m->nspring;
#pragma omp for schedule(static) nowait
  for (int e = 0; e < n; e++) ds__spring_fwd_elem(m, a, e);
}

DS__FLATTEN static inline void ds__spring_bwd_loop(const dsModel* m, const dsForceBwd* a) {
  const int n = m->nspring;
#pragma omp for schedule(static) nowait
  for (int e = 0; e < n; e++) ds__spring_bwd_elem(m, a, e);
}

#define DS__FORCE_SPRING                                                                        \
  {.name = "spring", .count = ds__spring_count, .nvert = 2, .idx = ds__spring_idx, .act_order = 3, \
   .fwd = ds__spring_fwd_loop, .bwd = ds__spring_bwd_loop}

#endif

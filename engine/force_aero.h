/* Lift and drag on a triangle (p, q, r); x = [p, q, r]. Coefficients are not
 * area-scaled (the current area enters the formula).
 *
 *   vb = (vp + vq + vr)/3,  n = (q-p) x (r-p),  A = |n|/2,  n^ = n/|n|
 *   D = k_drag A |n^.vb| vb
 *   L = k_lift A (pi/2 - acos(n^.vb^)) |vb|^2 n^
 *   f_p = f_q = f_r = -(D + L)       (full force on each vertex, as the
 *                                     original; the total is 3x the formula)
 * Computed without normalising anything (A n^ = n/2, and the angle of vb
 * above the face is scale-free in n and vb):
 *   un = n.vb,  m = n x vb,  ut = |m|,  th = atan2(un, ut)  (= pi/2 - acos(n^.vb^))
 *   D = (k_drag/2) |un| vb,   L = (k_lift/2) th |vb|^2 n
 * th |vb|^2 is bounded by (pi/2)|vb|^2 and its gradient by O(|vb|), so at
 * vb = 0 the force and its gradient are zero without a guard constant; the
 * atan2 derivative dth = (ut dun - un dut)/(un^2 + ut^2) is applied as
 * (ut dun - un dut) |vb|^2/(|n|^2 |vb|^2) = (ut dun - un dut)/|n|^2 (the
 * |vb|^2 of L cancels the denominator's, so nothing divides by |vb|).
 *
 * Adjoint (G = -(adj_f_p + adj_f_q + adj_f_r), the adjoint of D + L):
 *   adj_k_drag += |un|/2 (G.vb),   adj_vb += (k_drag/2)|un| G,
 *   adj_un += (k_drag/2) sgn(un) (G.vb)
 *   adj_k_lift += th |vb|^2/2 (G.n), adj_n += (k_lift/2) th |vb|^2 G,
 *   adj_vb += k_lift th (G.n) vb,
 *   with R = (k_lift/2)(G.n)/|n|^2: adj_un += R ut,  adj_ut = -R un,
 *   adj_m = adj_ut m/|m|,  m = n x vb and un = n.vb back to n and vb,
 *   n = (q-p) x (r-p) back to x; each v gets adj_vb/3.
 *
 * Non-smooth points, one-sided choices:
 *   un = 0 (vb parallel to the face): sgn(0) = 0 (the symmetric subgradient
 *     of |un|; central differences give the same);
 *   ut = 0 (vb along the normal, the cone tip of th): the ut term's
 *     gradient is taken as zero;
 *   n = 0 (collapsed triangle) or vb = 0: force zero, the th-gradient is zero. */
#ifndef DSIM_ENGINE_FORCE_AERO_H
#define DSIM_ENGINE_FORCE_AERO_H

#include "engine/dsmath.h"
#include "engine/force_loop.h"

typedef struct dsAeroParam {
  dsReal k_lift; /* lift coefficient, kg/m^3 (force / (area speed^2)) */
  dsReal k_drag; /* drag coefficient, kg/m^3 */
} dsAeroParam;

DS_HD DS_INLINE void ds__aero_fwd(const dsReal x[9], const dsReal v[9], const dsAeroParam* p,
                                 dsReal f[9]) {
  dsReal eq[3], er[3], n[3], m[3], vb[3];
  dsu_sub3(eq, x + 3, x);
  dsu_sub3(er, x + 6, x);
  dsu_cross3(n, eq, er);
  const dsReal third = (dsReal)1 / 3;
  for (int c = 0; c < 3; c++) vb[c] = (v[c] + v[3 + c] + v[6 + c]) * third;
  dsReal un = dsu_dot3(n, vb);
  dsu_cross3(m, n, vb);
  dsReal th = dsu_atan2(un, dsu_norm3(m));
  dsReal sd = (dsReal)0.5 * p->k_drag * dsu_fabs(un);
  dsReal sl = (dsReal)0.5 * p->k_lift * th * dsu_dot3(vb, vb);
  for (int c = 0; c < 3; c++) {
    dsReal fc = -(sd * vb[c] + sl * n[c]);
    f[c] = fc;
    f[3 + c] = fc;
    f[6 + c] = fc;
  }
}

DS_HD DS_INLINE void ds__aero_bwd(const dsReal x[9], const dsReal v[9], const dsAeroParam* p,
                                 const dsReal adj_f[9], dsReal adj_x[9], dsReal adj_v[9],
                                 dsAeroParam* adj_p) {
  dsReal eq[3], er[3], n[3], m[3], vb[3], G[3];
  dsu_sub3(eq, x + 3, x);
  dsu_sub3(er, x + 6, x);
  dsu_cross3(n, eq, er);
  const dsReal third = (dsReal)1 / 3;
  for (int c = 0; c < 3; c++) {
    vb[c] = (v[c] + v[3 + c] + v[6 + c]) * third;
    G[c] = -(adj_f[c] + adj_f[3 + c] + adj_f[6 + c]);
  }
  dsReal un = dsu_dot3(n, vb);
  dsu_cross3(m, n, vb);
  dsReal ut = dsu_norm3(m);
  dsReal th = dsu_atan2(un, ut);
  dsReal vv = dsu_dot3(vb, vb), nn = dsu_dot3(n, n);
  dsReal Gv = dsu_dot3(G, vb), Gn = dsu_dot3(G, n);
  dsReal sgn = un > 0 ? (dsReal)1 : (un < 0 ? (dsReal)-1 : (dsReal)0);

  dsReal an[3], avb[3], am[3];
  /* drag: D = (k_drag/2)|un| vb */
  adj_p->k_drag += (dsReal)0.5 * dsu_fabs(un) * Gv;
  dsu_scl3(avb, G, (dsReal)0.5 * p->k_drag * dsu_fabs(un));
  dsReal aun = (dsReal)0.5 * p->k_drag * sgn * Gv;
  /* lift: L = (k_lift/2) th |vb|^2 n */
  adj_p->k_lift += (dsReal)0.5 * th * vv * Gn;
  dsu_scl3(an, G, (dsReal)0.5 * p->k_lift * th * vv);
  dsu_addtoscl3(avb, vb, p->k_lift * th * Gn);
  dsReal aut = 0;
  if (nn > DSU_TINY2) {
    dsReal R = (dsReal)0.5 * p->k_lift * Gn / nn;
    aun += R * ut;
    aut = -R * un;
  }
  /* ut = |m|, m = n x vb */
  if (ut > 0) {
    dsu_scl3(am, m, aut / ut);
    dsu_cross3_bwd(n, vb, am, an, avb);
  }
  /* un = n . vb */
  dsu_addtoscl3(an, vb, aun);
  dsu_addtoscl3(avb, n, aun);
  /* n = eq x er */
  dsReal aeq[3] = {0, 0, 0}, aer[3] = {0, 0, 0};
  dsu_cross3_bwd(eq, er, an, aeq, aer);
  for (int c = 0; c < 3; c++) {
    adj_x[3 + c] += aeq[c];
    adj_x[6 + c] += aer[c];
    adj_x[c] -= aeq[c] + aer[c];
    dsReal a = avb[c] * third;
    adj_v[c] += a;
    adj_v[3 + c] += a;
    adj_v[6 + c] += a;
  }
}

/* ---- loop over the model's triangles (when aero is on) ----------------------------
 * No slots of its own: triangle e's lift/drag is added into triangle e's
 * three slots (into = tri), after the membrane force the tri loop wrote
 * there (forward: slot += f_aero; backward: slot adjoints += aero adjoints,
 * the same operations in the same order as when the two were one loop).
 * Scratch: [dL/dk_lift, dL/dk_drag] per triangle, summed in triangle order. */
static inline int ds__aero_count(const dsModel* m) { return m->aero ? m->ntri : 0; }

/* Element bodies (one triangle's lift/drag, into its own tri slots;
 * engine/force_loop.h "Bodies"). */
DS_HD DS_INLINE void ds__aero_fwd_elem(const dsModel* m, const dsForceFwd* a, int e) {
  const dsAeroParam p = {m->aero_lift[0], m->aero_drag[0]};
  dsReal xl[9], vl[9], fa[9];
  const int* idx = m->tri_idx + 3 * (size_t)e;
  ds__gather3(xl, a->x, idx, 3);
  ds__gather3(vl, a->v, idx, 3);
  ds__aero_fwd(xl, vl, &p, fa);
  dsReal* fe = a->ef + 9 * (size_t)e;
  for (int k = 0; k < 9; k++) fe[k] += fa[k];
}

DS_HD DS_INLINE void ds__aero_bwd_elem(const dsModel* m, const dsForceBwd* a, int e) {
  const dsAeroParam p = {m->aero_lift[0], m->aero_drag[0]};
  dsReal xl[9], vl[9], al[9], ax[9], avl[9];
  const int* idx = m->tri_idx + 3 * (size_t)e;
  dsReal* sx = a->aex + 9 * (size_t)e;
  dsReal* sv = a->aev + 9 * (size_t)e;
  for (int k = 0; k < 9; k++) {
    ax[k] = sx[k];
    avl[k] = sv[k];
  }
  ds__gather3(xl, a->x, idx, 3);
  ds__gather3(vl, a->v, idx, 3);
  ds__gather3(al, a->af, idx, 3);
  dsAeroParam ap = {0, 0};
  ds__aero_bwd(xl, vl, &p, al, ax, avl, &ap);
  for (int k = 0; k < 9; k++) {
    sx[k] = ax[k];
    sv[k] = avl[k];
  }
  a->scratch[2 * (size_t)e] = ap.k_lift;
  a->scratch[2 * (size_t)e + 1] = ap.k_drag;
}

DS__FLATTEN static inline void ds__aero_fwd_loop(const dsModel* m, const dsForceFwd* a) {
  const int n = ds__aero_count(m);
#pragma omp for schedule(static) nowait
  for (int e = 0; e < n; e++) ds__aero_fwd_elem(m, a, e);
}

DS__FLATTEN static inline void ds__aero_bwd_loop(const dsModel* m, const dsForceBwd* a) {
  const int n = ds__aero_count(m);
#pragma omp for schedule(static) nowait
  for (int e = 0; e < n; e++) ds__aero_bwd_elem(m, a, e);
}

/* The shared scalars' gradients (SHARED row, forces.h): j = 0 lift, 1 drag. */
DS_HD DS_INLINE void ds__aero_shared_add(dsGrad* g, int j, dsReal sum) {
  if (j == 0)
    g->aero_lift[0] += sum;
  else
    g->aero_drag[0] += sum;
}

static inline void ds__aero_reduce(const dsModel* m, const dsReal* s, dsGrad* g) {
  const int n = ds__aero_count(m);
  dsReal sl = 0, sd = 0;
  for (int e = 0; e < n; e++) {
    sl += s[2 * (size_t)e];
    sd += s[2 * (size_t)e + 1];
  }
  ds__aero_shared_add(g, 0, sl);
  ds__aero_shared_add(g, 1, sd);
}

#define DS__FORCE_AERO                                                                          \
  {.name = "aero", .count = ds__aero_count, .into = DS__F_TRI, .scratch = 2,                   \
   .fwd = ds__aero_fwd_loop, .bwd = ds__aero_bwd_loop, .reduce = ds__aero_reduce}

/* ---- Jacobians (engine/forces.h "Jacobians") ------------------------------------
 * Kx = -df/dx, Kv = -df/dv (9 x 9, rows and columns [p, q, r]). Every
 * vertex gets the same force F = -(sd vb + sl n), so all three block rows
 * are equal. With the scalars as in the forward and m^ = m / ut,
 *   dun = vb . dn + n . dvb
 *   dut = (vb x m^) . dn + (m^ x n) . dvb          (dm = dn x vb + n x dvb)
 *   vv dth = (ut dun - un dut) / nn                 (un^2 + ut^2 = nn vv)
 *   dsd = (k_drag/2) sgn(un) dun,   dsl = (k_lift/2) (vv dth + 2 th vb . dvb)
 *   dF  = -(vb dsd + sd dvb + n dsl + sl dn)
 * so, as 3 x 3 matrices (outer products ab^T),
 *   Fn := dF/dn  = -(cd vb vb^T + cl n (ut vb - un (vb x m^))^T / nn + sl I)
 *   Fv := dF/dvb = -(cd vb n^T + sd I + cl n (ut n - un (m^ x n))^T / nn + k_lift th n vb^T)
 * with cd = (k_drag/2) sgn(un), cl = k_lift/2. n = (q - p) x (r - p) moves
 * as dn = [r - q]x dp + [p - r]x dq + [q - p]x dr ([a]x b = a x b), and
 * vb = (vp + vq + vr)/3, so for every block row
 *   Kx block (., j) = -Fn [c_j]x,   c = (r - q, p - r, q - p),
 *   Kv block (., j) = -Fv / 3.
 * The kinks take the backward's one-sided choices (top comment): sgn(0) =
 * 0, the m^ terms dropped at ut = 0, the th terms at nn <= DSU_TINY2.
 * Neither matrix is symmetric (lift and drag are not conservative); a
 * projected Newton step uses the PSD part of their symmetric parts. */
DS_HD DS_INLINE void ds__aero_jac(const dsReal x[9], const dsReal v[9], const dsAeroParam* p, dsReal Kx[81],
                                 dsReal Kv[81]) {
  dsReal eq[3], er[3], n[3], m[3], vb[3], mh[3] = {0, 0, 0}, wn[3], wv[3];
  dsu_sub3(eq, x + 3, x);
  dsu_sub3(er, x + 6, x);
  dsu_cross3(n, eq, er);
  const dsReal third = (dsReal)1 / 3;
  for (int c = 0; c < 3; c++) vb[c] = (v[c] + v[3 + c] + v[6 + c]) * third;
  const dsReal un = dsu_dot3(n, vb);
  dsu_cross3(m, n, vb);
  const dsReal ut = dsu_norm3(m);
  const dsReal th = dsu_atan2(un, ut);
  const dsReal vv = dsu_dot3(vb, vb), nn = dsu_dot3(n, n);
  const dsReal sgn = un > 0 ? (dsReal)1 : (un < 0 ? (dsReal)-1 : (dsReal)0);
  const dsReal sd = (dsReal)0.5 * p->k_drag * dsu_fabs(un);
  const dsReal sl = (dsReal)0.5 * p->k_lift * th * vv;
  const dsReal cd = (dsReal)0.5 * p->k_drag * sgn;
  if (ut > 0) dsu_scl3(mh, m, 1 / ut);
  /* wn = (ut vb - un (vb x m^)) cl / nn, wv = (ut n - un (m^ x n)) cl / nn */
  dsReal vxm[3], mxn[3];
  dsu_cross3(vxm, vb, mh);
  dsu_cross3(mxn, mh, n);
  const dsReal cln = nn > DSU_TINY2 ? (dsReal)0.5 * p->k_lift / nn : 0;
  for (int c = 0; c < 3; c++) {
    wn[c] = cln * (ut * vb[c] - un * vxm[c]);
    wv[c] = cln * (ut * n[c] - un * mxn[c]);
  }
  dsReal Fn[9], Fv[9];
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++) {
      const dsReal id = i == j ? (dsReal)1 : (dsReal)0;
      Fn[3 * i + j] = -(cd * vb[i] * vb[j] + n[i] * wn[j] + sl * id);
      Fv[3 * i + j] = -(cd * vb[i] * n[j] + sd * id + n[i] * wv[j] + p->k_lift * th * n[i] * vb[j]);
    }
  dsReal cv[9];
  for (int c = 0; c < 3; c++) {
    cv[c] = x[6 + c] - x[3 + c];
    cv[3 + c] = x[c] - x[6 + c];
    cv[6 + c] = x[3 + c] - x[c];
  }
  for (int b = 0; b < 3; b++) {
    const dsReal* cb = cv + 3 * b;
    /* -Fn [c]x: column k of [c]x is c x e_k */
    dsReal B[9];
    for (int i = 0; i < 3; i++) {
      const dsReal* f = Fn + 3 * i; /* row i of Fn: (row i of Fn [c]x)_k = f . (c x e_k) = (f x c)_k */
      B[3 * i] = -(f[1] * cb[2] - f[2] * cb[1]);
      B[3 * i + 1] = -(f[2] * cb[0] - f[0] * cb[2]);
      B[3 * i + 2] = -(f[0] * cb[1] - f[1] * cb[0]);
    }
    for (int a = 0; a < 3; a++)
      for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) {
          Kx[9 * (3 * a + i) + 3 * b + j] = B[3 * i + j];
          Kv[9 * (3 * a + i) + 3 * b + j] = -Fv[3 * i + j] * third;
        }
  }
}

/* Kx, Kv (81 each) of triangle e's lift and drag at a->x, a->v (its own
 * element index is the triangle's; engine/sparse.c takes its vertices
 * from the tri row it adds into). */
DS_HD DS_INLINE void ds__aero_jac_elem(const dsModel* m, const dsForceFwd* a, int e, dsReal* Kx, dsReal* Kv) {
  const dsAeroParam p = {m->aero_lift[0], m->aero_drag[0]};
  dsReal xl[9], vl[9];
  const int* idx = m->tri_idx + 3 * (size_t)e;
  ds__gather3(xl, a->x, idx, 3);
  ds__gather3(vl, a->v, idx, 3);
  ds__aero_jac(xl, vl, &p, Kx, Kv);
}

#endif

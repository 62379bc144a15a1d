/* Reverse mode of one articulated step (included by engine/artic_step.h
 * after the real copy of engine/artic_dyn.h; DS_HD, both backends): the
 * vector-Jacobian product
 * adj_in = (d(q', qd')/d(q, qd, u, theta))^T adj_out, by hand, at the real
 * pass of forward(..., for_adjoint = 1) (kinematics, contact points, RNEA
 * at the solved qdd).
 *
 *   q' = q (+) dt qd',  qd' = qd + dt qdd,  r(q, qd, u, theta; qdd) = tau - ID = 0
 *   => adj_qd += adj_qd' + (dq'/dqd')^T adj_q',   lambda = M^-1 dt adj_qd'
 *      adj_x  += (dr/dx)^T lambda  for x = q, qd, u, theta (qdd held)
 * The last product is the gradient of s = lambda . tau - lambda . ID: the
 * applied forces' (local, per joint) and the RNEA's, run backwards:
 *   F~_i = F_i + sum over children F~_c, ID_k = S_k . F~_i + armature qdd_k
 *     => adj F~_i = adj F~_parent + sum_k mu_k S_k  (mu = -lambda; root first)
 *   F_i = I A_i + V_i x* (I V_i) - F_ext,  A_i = A_p + S qdd + V_i x vc + V_p x vl
 *     => adj A_i = I adj F_i + sum over children adj A_c (leaves first), ...
 * then the contact (its adjoint is engine/force_contact.h's ds__contact_bwd)
 * and the kinematics, leaves first (a child's pose, velocity and inertia
 * push their adjoints into the parent's). Small per-joint maps with no
 * structure to exploit (a quaternion's rotation matrix and its exp-map
 * step) take their 4 x 9 and 7 x 4 Jacobians by complex step, exact as in
 * engine/artic_dyn.h, over base/cplx.h's dsCplx (which the device has). Cost O(n_b) + one O(n^2) solve per step. */

DS_HD DS_INLINE void cross3(double r[3], const double a[3], const double b[3]) { cross_r(r, a, b); }

/* adj of out = I X for the inertia (m, h, Ib), adjoint b = (b1, b2):
 * Ib += b1 xw^T, h += xv x b1 - xw x b2, m += b2 . xv */
DS_HD static void imul_vjp(dsArticAdjBody* a, const double b[6], const double X[6]) {
  double t[3];
  for (int r = 0; r < 3; r++)
    for (int c = 0; c < 3; c++) a->Ib[3 * r + c] += b[r] * X[c];
  cross3(t, X + 3, b);
  for (int k = 0; k < 3; k++) a->h[k] += t[k];
  cross3(t, X, b + 3);
  for (int k = 0; k < 3; k++) a->h[k] -= t[k];
  a->m += b[3] * X[3] + b[4] * X[4] + b[5] * X[5];
}

/* out = V x M = (w x mw, w x mv + v x mw), adjoint a: adds into aV, aM */
DS_HD static void crm_vjp(const double V[6], const double M[6], const double a[6], double aV[6], double aM[6]) {
  double t[3];
  cross3(t, M, a); /* d/dw of a1 . (w x mw) = mw x a1 */
  for (int k = 0; k < 3; k++) aV[k] += t[k];
  cross3(t, M + 3, a + 3);
  for (int k = 0; k < 3; k++) aV[k] += t[k];
  cross3(t, M, a + 3);
  for (int k = 0; k < 3; k++) aV[3 + k] += t[k];
  cross3(t, a, V); /* d/dmw: a1 x w + a2 x v */
  for (int k = 0; k < 3; k++) aM[k] += t[k];
  cross3(t, a + 3, V + 3);
  for (int k = 0; k < 3; k++) aM[k] += t[k];
  cross3(t, a + 3, V); /* d/dmv: a2 x w */
  for (int k = 0; k < 3; k++) aM[3 + k] += t[k];
}

/* out = V x* P = (w x n + v x f, w x f), adjoint a: adds into aV, aP */
DS_HD static void crf_vjp(const double V[6], const double P[6], const double a[6], double aV[6], double aP[6]) {
  double t[3];
  cross3(t, P, a); /* d/dw: n x a1 + f x a2 */
  for (int k = 0; k < 3; k++) aV[k] += t[k];
  cross3(t, P + 3, a + 3);
  for (int k = 0; k < 3; k++) aV[k] += t[k];
  cross3(t, P + 3, a); /* d/dv: f x a1 */
  for (int k = 0; k < 3; k++) aV[3 + k] += t[k];
  cross3(t, a, V); /* d/dn: a1 x w */
  for (int k = 0; k < 3; k++) aP[k] += t[k];
  cross3(t, a, V + 3); /* d/df: a1 x v + a2 x w */
  for (int k = 0; k < 3; k++) aP[3 + k] += t[k];
  cross3(t, a + 3, V);
  for (int k = 0; k < 3; k++) aP[3 + k] += t[k];
}

/* engine/artic_dyn.h's quat_mat and quat_step over dsCplx (base/cplx.h):
 * the same formulas, operation for operation, for the complex steps below,
 * which run on either backend (C99 complex numbers have no device form). */
DS_HD DS_INLINE dsCplx quat_dot_z(const dsCplx a[4], const dsCplx b[4]) { /* a0 b0 + a1 b1 + a2 b2 + a3 b3 */
  dsCplx s = dsu_cmul(a[0], b[0]);
  for (int k = 1; k < 4; k++) s = dsu_cadd(s, dsu_cmul(a[k], b[k]));
  return s;
}

DS_HD static void quat_mat_z(dsCplx M[9], const dsCplx q[4]) {
  const dsCplx s = dsu_cdiv(dsu_cx(2, 0), quat_dot_z(q, q));
  const dsCplx w = q[0], x = q[1], y = q[2], z = q[3];
  const dsCplx xx = dsu_cmul(x, x), yy = dsu_cmul(y, y), zz = dsu_cmul(z, z), xy = dsu_cmul(x, y),
               xz = dsu_cmul(x, z), yz = dsu_cmul(y, z), wx = dsu_cmul(w, x), wy = dsu_cmul(w, y), wz = dsu_cmul(w, z);
  M[0] = dsu_crsub(1, dsu_cmul(s, dsu_cadd(yy, zz)));
  M[1] = dsu_cmul(s, dsu_csub(xy, wz));
  M[2] = dsu_cmul(s, dsu_cadd(xz, wy));
  M[3] = dsu_cmul(s, dsu_cadd(xy, wz));
  M[4] = dsu_crsub(1, dsu_cmul(s, dsu_cadd(xx, zz)));
  M[5] = dsu_cmul(s, dsu_csub(yz, wx));
  M[6] = dsu_cmul(s, dsu_csub(xz, wy));
  M[7] = dsu_cmul(s, dsu_cadd(yz, wx));
  M[8] = dsu_crsub(1, dsu_cmul(s, dsu_cadd(xx, yy)));
}

DS_HD static void quat_step_z(dsCplx out[4], const dsCplx q[4], const dsCplx om[3], double dt) {
  const dsCplx w2 = dsu_cadd(dsu_cadd(dsu_cmul(om[0], om[0]), dsu_cmul(om[1], om[1])), dsu_cmul(om[2], om[2]));
  dsCplx c, s; /* cos(t/2), sin(t/2)/|w| */
  if (w2.re * dt * dt < 1e-10) {
    const dsCplx t2 = dsu_cscale(dt, dsu_cscale(dt, w2));
    c = dsu_crsub(1, dsu_cdivr(t2, 8));
    s = dsu_cscale(dt / 2, dsu_crsub(1, dsu_cdivr(t2, 24)));
  } else {
    const dsCplx wn = dsu_csqrt(w2), half = dsu_cdivr(dsu_cscale(dt, wn), 2);
    c = dsu_ccos(half);
    s = dsu_cdiv(dsu_csin(half), wn);
  }
  const dsCplx d[4] = {c, dsu_cmul(s, om[0]), dsu_cmul(s, om[1]), dsu_cmul(s, om[2])};
  dsCplx r[4];
  r[0] = dsu_csub(dsu_csub(dsu_csub(dsu_cmul(q[0], d[0]), dsu_cmul(q[1], d[1])), dsu_cmul(q[2], d[2])),
                  dsu_cmul(q[3], d[3]));
  r[1] = dsu_csub(dsu_cadd(dsu_cadd(dsu_cmul(q[0], d[1]), dsu_cmul(q[1], d[0])), dsu_cmul(q[2], d[3])),
                  dsu_cmul(q[3], d[2]));
  r[2] = dsu_cadd(dsu_cadd(dsu_csub(dsu_cmul(q[0], d[2]), dsu_cmul(q[1], d[3])), dsu_cmul(q[2], d[0])),
                  dsu_cmul(q[3], d[1]));
  r[3] = dsu_cadd(dsu_csub(dsu_cadd(dsu_cmul(q[0], d[3]), dsu_cmul(q[1], d[2])), dsu_cmul(q[2], d[1])),
                  dsu_cmul(q[3], d[0]));
  const dsCplx n = dsu_cdiv(dsu_cx(1, 0), dsu_csqrt(quat_dot_z(r, r)));
  for (int k = 0; k < 4; k++) out[k] = dsu_cmul(r[k], n);
}

/* gq += (d quat_mat(q)/dq)^T G (complex step, 4 columns) */
DS_HD static void quat_mat_vjp(const double q[4], const double G[9], double gq[4]) {
  for (int c = 0; c < 4; c++) {
    dsCplx qc[4], Mc[9];
    for (int k = 0; k < 4; k++) qc[k] = dsu_cx(q[k], k == c ? DS__ARTIC_H : 0);
    quat_mat_z(Mc, qc);
    double s = 0;
    for (int k = 0; k < 9; k++) s += G[k] * Mc[k].im;
    gq[c] += s / DS__ARTIC_H;
  }
}

/* the exp-map step out = quat_step(q, w, dt): gq += Jq^T a, gw += Jw^T a */
DS_HD static void quat_step_vjp(const double q[4], const double om[3], double dt, const double a[4], double gq[4],
                                double gw[3]) {
  for (int c = 0; c < 7; c++) {
    dsCplx qc[4], wc[3], out[4];
    for (int k = 0; k < 4; k++) qc[k] = dsu_cx(q[k], k == c ? DS__ARTIC_H : 0);
    for (int k = 0; k < 3; k++) wc[k] = dsu_cx(om[k], k + 4 == c ? DS__ARTIC_H : 0);
    quat_step_z(out, qc, wc, dt);
    double s = 0;
    for (int k = 0; k < 4; k++) s += a[k] * out[k].im;
    if (c < 4)
      gq[c] += s / DS__ARTIC_H;
    else
      gw[c - 4] += s / DS__ARTIC_H;
  }
}

DS_HD static double sigmoid_d(double x) { return x > 0 ? 1 / (1 + exp(-x)) : exp(x) / (1 + exp(x)); }

/* gradient of lambda . tau (the applied forces) */
DS_HD static void applied_vjp(const dsArticModel* m, const ws_r* w, const double* lam, double* gq, double* gqd,
                              double* gu, double* gth) {
  const double* th = w->th;
  for (int i = 0; i < m->nbody; i++) {
    const int nd = ndof_r(m->jtype[i]);
    if (!nd) continue;
    const dsArticBodyParams* bp = &m->bp[i];
    const int qa = m->qadr[i], va = m->vadr[i];
    for (int c = 0; c < nd; c++) gqd[va + c] -= th[bp->damping] * lam[va + c];
    if (gth)
      for (int c = 0; c < nd; c++) gth[bp->damping] -= w->qd[va + c] * lam[va + c];
    if (nd != 1) continue;
    const double q = w->q[qa], qd = w->qd[va], L = lam[va];
    gq[qa] -= th[bp->stiffness] * L;
    if (gth) {
      gth[bp->stiffness] -= (q - th[bp->rest]) * L;
      gth[bp->rest] += th[bp->stiffness] * L;
    }
    if (m->limited[i]) {
      const double k = m->limit_k[i], bd = m->limit_b[i], wd = m->limit_w[i];
      const double eu = (q - th[bp->upper]) / wd, el = (th[bp->lower] - q) / wd;
      const double su = sigmoid_d(eu), sl = sigmoid_d(el);
      /* d tau/d eu, d tau/d el (softplus' = sigmoid, sigmoid' = s (1 - s)) */
      const double Du = L * (-k * wd * su - bd * qd * su * (1 - su));
      const double Dl = L * (k * wd * sl - bd * qd * sl * (1 - sl));
      gq[qa] += (Du - Dl) / wd;
      if (gth) {
        gth[bp->upper] -= Du / wd;
        gth[bp->lower] += Dl / wd;
      }
      gqd[va] -= bd * (su + sl) * L;
    }
  }
  for (int a = 0; a < m->nu; a++) {
    const int i = m->act_body[a], qa = m->qadr[i], va = m->vadr[i];
    const double q = w->q[qa], qd = w->qd[va], u = w->u[a], L = lam[va];
    if (m->act_type[a] == DS_ARTIC_MOTOR) {
      const double cl = m->act_ctrl_limit[a], g = th[m->act_gear[a]];
      const double tt = cl > 0 ? tanh(u / cl) : 0;
      if (gth) gth[m->act_gear[a]] += L * (cl > 0 ? cl * tt : u);
      gu[a] += L * g * (cl > 0 ? 1 - tt * tt : 1);
    } else {
      const double fl = m->act_force_limit[a], kp = th[m->act_kp[a]], kv = th[m->act_kv[a]];
      const double e = kp * (u - q) - kv * qd;
      const double tt = fl > 0 ? tanh(e / fl) : 0;
      const double E = L * (fl > 0 ? 1 - tt * tt : 1);
      if (gth) {
        gth[m->act_kp[a]] += E * (u - q);
        gth[m->act_kv[a]] -= E * qd;
      }
      gu[a] += E * kp;
      gq[qa] -= E * kp;
      gqd[va] -= E * kv;
    }
  }
}

/* gradient of mu . ID (RNEA at w->qdd), into the bodies' adjoints, gqd, gth;
 * leaves adj F (= -adj F_ext) per body in ab[i].F */
DS_HD static void rnea_vjp(const dsArticModel* m, const ws_r* w, const double* mu, dsArticAdjBody* ab, double* gqd,
                     double* gth) {
  const int n = m->nbody;
  for (int i = 0; i < n; i++) { /* adj F~, root first */
    const body_r* b = &w->b[i];
    dsArticAdjBody* a = &ab[i];
    const int p = m->parent[i], nd = ndof_r(m->jtype[i]), va = m->vadr[i];
    for (int k = 0; k < 6; k++) a->F[k] = p >= 0 ? ab[p].F[k] : 0;
    for (int c = 0; c < nd; c++) {
      const double u = mu[va + c];
      for (int k = 0; k < 6; k++) {
        a->F[k] += u * b->S[6 * c + k];
        a->S[6 * c + k] += u * b->F[k];
      }
      if (gth) gth[m->bp[i].armature] += u * w->qdd[va + c];
    }
  }
  double a0[6] = {0, 0, 0, 0, 0, 0};
  for (int i = n - 1; i >= 0; i--) { /* leaves first */
    const body_r* b = &w->b[i];
    dsArticAdjBody* a = &ab[i];
    const int p = m->parent[i], nd = ndof_r(m->jtype[i]), va = m->vadr[i];
    /* F = I A + V x* P - F_ext, P = I V */
    double t[6], aP[6] = {0, 0, 0, 0, 0, 0};
    imul_r(t, b->m, b->h, b->Ib, a->F);
    for (int k = 0; k < 6; k++) a->A[k] += t[k];
    imul_vjp(a, a->F, b->A);
    crf_vjp(b->V, b->P, a->F, a->V, aP);
    imul_r(t, b->m, b->h, b->Ib, aP);
    for (int k = 0; k < 6; k++) a->V[k] += t[k];
    imul_vjp(a, aP, b->V);
    /* A = A_p + S qdd + V x vc + V_p x vl */
    static const double zero[6] = {0, 0, 0, 0, 0, 0};
    const double* Vp = p >= 0 ? w->b[p].V : zero;
    double* aVp = p >= 0 ? ab[p].V : t; /* the world's velocity is constant: discard */
    if (nd == 1) { /* hinge, slide: the loops below for one column */
      const double qd1 = w->qd[va], qdd1 = w->qdd[va];
      double vc[6], avc[6] = {0, 0, 0, 0, 0, 0}, s = 0;
      for (int k = 0; k < 6; k++) vc[k] = b->S[k] * qd1;
      crm_vjp(b->V, vc, a->A, a->V, avc);
      for (int k = 0; k < 6; k++) {
        a->S[k] += a->A[k] * qdd1 + avc[k] * qd1;
        s += b->S[k] * avc[k];
      }
      gqd[va] += s;
      double* aAp = p >= 0 ? ab[p].A : a0;
      for (int k = 0; k < 6; k++) aAp[k] += a->A[k];
      continue;
    }
    const int nlin = m->jtype[i] == DS_JOINT_FREE ? 3 : 0;
    double vc[6] = {0, 0, 0, 0, 0, 0}, vl[6] = {0, 0, 0, 0, 0, 0}, avc[6] = {0, 0, 0, 0, 0, 0},
           avl[6] = {0, 0, 0, 0, 0, 0};
    for (int c = 0; c < nd; c++)
      for (int k = 0; k < 6; k++) (c < nlin ? vl : vc)[k] += b->S[6 * c + k] * w->qd[va + c];
    crm_vjp(b->V, vc, a->A, a->V, avc);
    if (nlin) crm_vjp(Vp, vl, a->A, aVp, avl); /* vl = 0 otherwise */
    for (int c = 0; c < nd; c++) {
      const double* av = c < nlin ? avl : avc;
      double s = 0;
      for (int k = 0; k < 6; k++) {
        a->S[6 * c + k] += a->A[k] * w->qdd[va + c] + av[k] * w->qd[va + c];
        s += b->S[6 * c + k] * av[k];
      }
      gqd[va + c] += s;
    }
    double* aAp = p >= 0 ? ab[p].A : a0;
    for (int k = 0; k < 6; k++) aAp[k] += a->A[k];
  }
  if (gth)
    for (int k = 0; k < 3; k++) gth[m->p_gravity + k] -= a0[3 + k];
}

/* contact: F_ext,i += (pc x f, f), adjoint -ab[i].F */
DS_HD static void contact_vjp(const dsArticModel* m, const ws_r* w, dsArticAdjBody* ab, double* gth) {
  if (!m->ground) return;
  const double* cp = w->th + m->p_contact;
  for (int s = 0; s < m->nsphere; s++) {
    const int i = m->sph_body[s];
    const body_r* b = &w->b[i];
    dsArticAdjBody* a = &ab[i];
    const double* pc = w->cpt + 6 * s;
    const double* v = pc + 3;
    dsReal xr[3] = {(dsReal)pc[0], (dsReal)pc[2], (dsReal)pc[1]};
    dsReal ur[3] = {(dsReal)v[0], (dsReal)v[2], (dsReal)v[1]};
    const dsContactParam par = {(dsReal)cp[0], (dsReal)cp[1], (dsReal)cp[2], (dsReal)cp[3], 0};
    dsReal fr[3];
    ds__contact_fwd(xr, ur, &par, fr);
    const double f[3] = {fr[0], fr[2], fr[1]};
    const double an[3] = {-a->F[0], -a->F[1], -a->F[2]}, af0[3] = {-a->F[3], -a->F[4], -a->F[5]};
    double af[3], apc[3], t[3];
    cross3(t, an, pc); /* a . (pc x f) = f . (a x pc) = pc . (f x a) */
    for (int k = 0; k < 3; k++) af[k] = af0[k] + t[k];
    cross3(apc, f, an);
    dsReal afr[3] = {(dsReal)af[0], (dsReal)af[2], (dsReal)af[1]}, gx[3] = {0, 0, 0}, gv[3] = {0, 0, 0};
    dsContactParam gp = {0, 0, 0, 0, 0};
    ds__contact_bwd(xr, ur, &par, afr, gx, gv, &gp);
    if (gth) {
      gth[m->p_contact] += gp.ke;
      gth[m->p_contact + 1] += gp.kd;
      gth[m->p_contact + 2] += gp.kf;
      gth[m->p_contact + 3] += gp.mu;
    }
    const double av[3] = {gv[0], gv[2], gv[1]};
    apc[0] += gx[0], apc[1] += gx[2], apc[2] += gx[1];
    /* v = v0 + w x pc */
    for (int k = 0; k < 3; k++) a->V[3 + k] += av[k];
    cross3(t, pc, av);
    for (int k = 0; k < 3; k++) a->V[k] += t[k];
    cross3(t, av, b->V);
    for (int k = 0; k < 3; k++) apc[k] += t[k];
    /* pc = x + Rw p_s - r z */
    const double* ps = m->sph_pos + 3 * s;
    for (int r = 0; r < 3; r++) {
      a->x[r] += apc[r];
      for (int c = 0; c < 3; c++) a->Rw[3 * r + c] += apc[r] * ps[c];
    }
  }
}

/* rotation columns (Rw e_c, jp x Rw e_c) of S, c = 0..2 from column c0 */
DS_HD static void rot_cols_vjp(const body_r* b, dsArticAdjBody* a, int c0) {
  for (int c = 0; c < 3; c++) {
    const double* aS = a->S + 6 * (c0 + c);
    const double col[3] = {b->Rw[c], b->Rw[3 + c], b->Rw[6 + c]};
    double t[3];
    cross3(t, aS + 3, b->jp); /* a . (jp x s) = s . (a x jp) = jp . (s x a) */
    for (int k = 0; k < 3; k++) a->Rw[3 * k + c] += aS[k] + t[k];
    cross3(t, col, aS + 3);
    for (int k = 0; k < 3; k++) a->jp[k] += t[k];
  }
}

/* kinematics backwards, leaves first */
DS_HD static void kin_vjp(const dsArticModel* m, const ws_r* w, dsArticAdjBody* ab, double* gq, double* gqd,
                          double* gth) {
  static const double eye[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1};
  for (int i = m->nbody - 1; i >= 0; i--) {
    const body_r* b = &w->b[i];
    dsArticAdjBody* a = &ab[i];
    const dsArticBodyParams* bp = &m->bp[i];
    const int p = m->parent[i], nd = ndof_r(m->jtype[i]), qa = m->qadr[i], va = m->vadr[i];
    const double* I3 = w->th + bp->inertia;
    /* h = m x; Ib = Rw D Rw^T + m (|x|^2 1 - x x^T), G = adj Ib */
    const double* G = a->Ib;
    const double trG = G[0] + G[4] + G[8];
    for (int k = 0; k < 3; k++) a->x[k] += b->m * a->h[k];
    /* with Gs = G + G^T and H = Gs Rw: adj Rw = H D, adj D_k = Rw_k^T G Rw_k = H_k . Rw_k / 2
     * (Rw_k the column k) */
    double Gs[9], H[9];
    for (int r = 0; r < 3; r++)
      for (int c = 0; c < 3; c++) Gs[3 * r + c] = G[3 * r + c] + G[3 * c + r];
    mm3_r(H, Gs, b->Rw);
    for (int r = 0; r < 3; r++)
      for (int c = 0; c < 3; c++) a->Rw[3 * r + c] += H[3 * r + c] * I3[c];
    for (int k = 0; k < 3; k++) {
      const double gx = Gs[3 * k] * b->x[0] + Gs[3 * k + 1] * b->x[1] + Gs[3 * k + 2] * b->x[2];
      a->x[k] += b->m * (2 * trG * b->x[k] - gx);
    }
    if (gth) { /* the parameters' adjoint, when asked for: mass, principal moments, anchors */
      double am = a->m, c2 = 0;
      for (int k = 0; k < 3; k++) {
        am += a->h[k] * b->x[k];
        c2 += b->x[k] * b->x[k];
      }
      for (int r = 0; r < 3; r++)
        for (int c = 0; c < 3; c++) am += G[3 * r + c] * ((r == c ? c2 : 0) - b->x[r] * b->x[c]);
      for (int k = 0; k < 3; k++)
        gth[bp->inertia + k] += 0.5 * (H[k] * b->Rw[k] + H[3 + k] * b->Rw[3 + k] + H[6 + k] * b->Rw[6 + k]);
      gth[bp->mass] += am;
      for (int r = 0; r < 3; r++) /* x = jp - Rw ac below */
        for (int c = 0; c < 3; c++) gth[bp->anchor_c + c] -= b->Rw[3 * r + c] * a->x[r];
    }
    /* V = V_p + S qd */
    if (p >= 0)
      for (int k = 0; k < 6; k++) ab[p].V[k] += a->V[k];
    for (int c = 0; c < nd; c++) {
      double s = 0;
      for (int k = 0; k < 6; k++) {
        a->S[6 * c + k] += a->V[k] * w->qd[va + c];
        s += b->S[6 * c + k] * a->V[k];
      }
      gqd[va + c] += s;
    }
    /* x = jp - Rw ac */
    const double* ac = w->th + bp->anchor_c;
    for (int r = 0; r < 3; r++) {
      a->jp[r] += a->x[r];
      for (int c = 0; c < 3; c++) a->Rw[3 * r + c] -= a->x[r] * ac[c];
    }
    const double* ax = m->axis + 3 * i;
    const double* q = w->q + qa;
    double aRj[9], t[3];
    for (int k = 0; k < 9; k++) aRj[k] = 0;
    switch (m->jtype[i]) {
      case DS_JOINT_HINGE: {
        /* S = (s, jp x s), s = Rj a */
        double as[3];
        cross3(t, a->S + 3, b->jp);
        for (int k = 0; k < 3; k++) as[k] = a->S[k] + t[k];
        cross3(t, b->S, a->S + 3);
        for (int k = 0; k < 3; k++) a->jp[k] += t[k];
        /* Rw = Rj Rrel(q), Rrel = exp(q [a]x): dRw/dq = Rj [a]x Rrel = [s]x Rw, so
         * gq = <adj Rw, [s]x Rw> = s . sum_c (Rw e_c) x (adj Rw e_c); adj Rj = adj Rw Rrel^T */
        const double* Rr = b->Rr; /* the kinematics' */
        double cs[3] = {0, 0, 0};
        for (int c = 0; c < 3; c++) {
          const double col[3] = {b->Rw[c], b->Rw[3 + c], b->Rw[6 + c]};
          const double acol[3] = {a->Rw[c], a->Rw[3 + c], a->Rw[6 + c]};
          cross3(t, col, acol);
          for (int k = 0; k < 3; k++) cs[k] += t[k];
        }
        gq[qa] += b->S[0] * cs[0] + b->S[1] * cs[1] + b->S[2] * cs[2];
        for (int r = 0; r < 3; r++)
          for (int c = 0; c < 3; c++)
            aRj[3 * r + c] = as[r] * ax[c] + a->Rw[3 * r] * Rr[3 * c] + a->Rw[3 * r + 1] * Rr[3 * c + 1] +
                             a->Rw[3 * r + 2] * Rr[3 * c + 2];
        break;
      }
      case DS_JOINT_SLIDE: {
        /* jp = jp0 + t q, S = (0, t), t = Rj a, Rw = Rj */
        double at[3], s = 0;
        for (int k = 0; k < 3; k++) {
          at[k] = a->S[3 + k] + a->jp[k] * q[0];
          s += a->jp[k] * b->S[3 + k];
        }
        gq[qa] += s;
        for (int r = 0; r < 3; r++)
          for (int c = 0; c < 3; c++) aRj[3 * r + c] += at[r] * ax[c] + a->Rw[3 * r + c];
        break;
      }
      case DS_JOINT_BALL:
      case DS_JOINT_FREE: {
        const int free = m->jtype[i] == DS_JOINT_FREE;
        rot_cols_vjp(b, a, free ? 3 : 0);
        const double* qq = free ? q + 3 : q;
        double Rq[9], aRq[9];
        quat_mat_r(Rq, qq);
        for (int r = 0; r < 3; r++)
          for (int c = 0; c < 3; c++) {
            aRq[3 * r + c] = b->Rj[r] * a->Rw[c] + b->Rj[3 + r] * a->Rw[3 + c] + b->Rj[6 + r] * a->Rw[6 + c];
            aRj[3 * r + c] +=
                a->Rw[3 * r] * Rq[3 * c] + a->Rw[3 * r + 1] * Rq[3 * c + 1] + a->Rw[3 * r + 2] * Rq[3 * c + 2];
          }
        quat_mat_vjp(qq, aRq, gq + qa + (free ? 3 : 0));
        if (free) {
          /* jp = jp0 + Rj qpos; translation columns (0, Rj e_c) */
          for (int r = 0; r < 3; r++)
            for (int c = 0; c < 3; c++) {
              aRj[3 * r + c] += a->jp[r] * q[c] + a->S[6 * c + 3 + r];
              gq[qa + c] += b->Rj[3 * r + c] * a->jp[r];
            }
        }
        break;
      }
      default:
        for (int k = 0; k < 9; k++) aRj[k] += a->Rw[k];
        break;
    }
    /* jp0 = x_p + R_p ap, Rj = R_p Q0 */
    const double* Rp = p >= 0 ? w->b[p].Rw : eye;
    const double* ap = w->th + bp->anchor_p;
    const double* Q0 = m->R0 + 9 * i;
    if (gth)
      for (int c = 0; c < 3; c++)
        gth[bp->anchor_p + c] += Rp[c] * a->jp[0] + Rp[3 + c] * a->jp[1] + Rp[6 + c] * a->jp[2];
    if (p < 0) continue;
    const double* q0 = m->quat0 + 4 * i;
    const int id0 = q0[1] == 0 && q0[2] == 0 && q0[3] == 0; /* Q0 = 1 exactly */
    for (int r = 0; r < 3; r++) {
      ab[p].x[r] += a->jp[r];
      if (id0)
        for (int c = 0; c < 3; c++) ab[p].Rw[3 * r + c] += a->jp[r] * ap[c] + aRj[3 * r + c];
      else
        for (int c = 0; c < 3; c++)
          ab[p].Rw[3 * r + c] += a->jp[r] * ap[c] + aRj[3 * r] * Q0[3 * c] + aRj[3 * r + 1] * Q0[3 * c + 1] +
                                 aRj[3 * r + 2] * Q0[3 * c + 2];
    }
  }
}

/* adj_in of one step at the last forward(..., 1): aout = adj (q', qd')
 * (nq + nv); gq, gqd, gu are overwritten, the parameters' adjoint is added
 * into gth (a rollout's sum, without a per-step copy of nparam values), or
 * not computed when gth is NULL (the parameter-only terms are skipped).
 * lam: nv scratch, ab: nbody. */
DS_HD static void step_vjp(const dsArticModel* m, dsArticData* d, const double* aout, double* gq, double* gqd,
                           double* gu, double* gth, double* lam, dsArticAdjBody* ab) {
  const ws_r* w = (ws_r*)d->wr;
  const int nq = m->nq, nv = m->nv;
  const double dt = m->dt;
  for (int k = 0; k < nq; k++) gq[k] = 0;
  for (int k = 0; k < nv; k++) gqd[k] = 0;
  for (int k = 0; k < m->nu; k++) gu[k] = 0;
  for (int i = 0; i < m->nbody; i++)
    memset(ab + i, 0, offsetof(dsArticAdjBody, S) + sizeof(double) * 6 * (size_t)ndof_r(m->jtype[i]));
  /* integration: lam holds adj qd' first */
  for (int k = 0; k < nv; k++) lam[k] = aout[nq + k];
  for (int i = 0; i < m->nbody; i++) {
    const int qa = m->qadr[i], va = m->vadr[i], t = m->jtype[i];
    if (t == DS_JOINT_HINGE || t == DS_JOINT_SLIDE) {
      gq[qa] += aout[qa];
      lam[va] += dt * aout[qa];
    } else if (t == DS_JOINT_BALL) {
      quat_step_vjp(w->q + qa, w->qdn + va, dt, aout + qa, gq + qa, lam + va);
    } else if (t == DS_JOINT_FREE) {
      for (int k = 0; k < 3; k++) {
        gq[qa + k] += aout[qa + k];
        lam[va + k] += dt * aout[qa + k];
      }
      quat_step_vjp(w->q + qa + 3, w->qdn + va + 3, dt, aout + qa + 3, gq + qa + 3, lam + va + 3);
    }
  }
  for (int k = 0; k < nv; k++) {
    gqd[k] += lam[k];
    lam[k] *= dt;
  }
  solve_M(m, d, nv, lam);
  applied_vjp(m, w, lam, gq, gqd, gu, gth);
  for (int k = 0; k < nv; k++) lam[k] = -lam[k];
  rnea_vjp(m, w, lam, ab, gqd, gth);
  contact_vjp(m, w, ab, gth);
  kin_vjp(m, w, ab, gq, gqd, gth);
}

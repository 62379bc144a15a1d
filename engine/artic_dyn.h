/* Articulated-body dynamics, written once over a number type R and compiled
 * twice: R = double for the step (engine/artic_step.h; DS_HD, so the CUDA
 * backend compiles this copy too), and R = double complex by engine/artic.c
 * for exact tangents (the reference adjoint ds__artic_backward_tangent,
 * host only: C99 complex numbers; complex step: an input carries
 * h e_k in its imaginary part, h = DS__ARTIC_H; every operation used here
 * is analytic, so Im(out) = h dout/din exactly up to O(h^2) = 1e-40
 * relative, far below rounding; non-smooth choices read the real values).
 * Include with R, FN(name) (a suffix per copy) and ARTIC_CPLX (0 or 1)
 * defined.
 *
 * Spatial algebra in world coordinates about the world origin (Featherstone,
 * "Rigid Body Dynamics Algorithms", ch. 2, with every quantity already in
 * the world frame so no transforms between links are needed):
 *   motion V = (w, v0): w angular velocity, v0 = velocity of the body point
 *   at the world origin (a point's velocity: v0 + w x p);
 *   force F = (n0, f): moment about the origin and force;
 *   inertia of mass m, centre c, rotational inertia Ic about c:
 *     I V = (Ib w + h x v0, m v0 - h x w),  h = m c,  Ib = Ic + m (|c|^2 1 - c c^T);
 *   V x A = (w x a_w, w x a_v + v0 x a_w),  V x* F = (w x n0 + v0 x f, w x f).
 * Joint motion subspaces S (one column per dof, world coordinates):
 *   hinge about unit a through point p:  (a, p x a)
 *   slide along a:                        (0, a)
 *   ball, free rotation about p:          (R e_k, p x R e_k), k = 0..2 (child-frame rates)
 *   free translation:                     (0, Rj e_k) (joint-frame rates)
 * Recursive Newton-Euler (inverse dynamics, gravity as a base acceleration
 * A_0 = (0, -g)):
 *   V_i = V_p + S qd,   A_i = A_p + S qdd + c_i,   F_i = I_i A_i + V_i x* I_i V_i - F_ext,i
 *   tau_k = S_k . F_i + armature qdd_k,   F_p += F_i (leaves to root)
 * where c_i = dS/dt qd: columns fixed in the child move as V_i x S, those
 * fixed in the parent (free translation) as V_p x S. */

/* Per body results of the kinematics. */
typedef struct FN(body) {
  /* the kinematics' results, S last: a step's kinematics tape holds this
   * part up to the joint's columns of S (engine/artic.c, kin_save) */
  R Rw[9]; /* child frame -> world */
  R Rj[9]; /* joint frame -> world */
  R x[3];  /* centre of mass, world */
  R jp[3]; /* joint point, world */
  R V[6];
  R m;
  R h[3];
  R Ib[9];
  R Rr[9], cs[2];            /* hinge: Rj^T Rw, the rotation by q about the axis, and cos q, sin q (the adjoint's) */
  R S[6 * DS__ARTIC_MAXDOF]; /* motion subspace columns (w, v0) */
  R A[6];
  R F[6];  /* after the sum over the subtree (RNEA's backward pass) */
  R F0[6]; /* the body's own, before the sum */
  R P[6];  /* momentum I V (RNEA) */
  R cm, ch[3], cIb[9]; /* composite inertia of the subtree (crba, real pass only) */
  R dA[6];             /* A at qdd minus A at qdd = 0 (rnea_at_qdd, real pass only) */
  /* the articulated-body algorithm's (engine/artic_step.h, real pass only):
   * velocity-product acceleration, bias force, articulated inertia and force,
   * U = IA S, D = S . U + armature, u = tau - S . pA */
  R c[6], pb[6], IA[36], pA[6], U[6], D, uu;
} FN(body);

typedef struct FN(ws) {
  FN(body) * b; /* nbody */
  R* q;         /* nq */
  R* qd;        /* nv */
  R* u;         /* nu */
  R* th;        /* nparam */
  R* tau;       /* nv: applied (passive, limit, actuator) generalised force */
  R* id;        /* nv: inverse dynamics */
  R* qdd;       /* nv */
  R* fext;      /* 6 per body, spatial contact force */
  R* qn;        /* nq: next state */
  R* qdn;       /* nv */
  double* cpt;  /* 6 per sphere: contact point and its velocity (real pass, read by the complex one) */
} FN(ws);

DS_HD DS_INLINE void FN(cross)(R res[3], const R a[3], const R b[3]) { /* res = a x b */
  const R r0 = a[1] * b[2] - a[2] * b[1], r1 = a[2] * b[0] - a[0] * b[2], r2 = a[0] * b[1] - a[1] * b[0];
  res[0] = r0;
  res[1] = r1;
  res[2] = r2;
}

DS_HD DS_INLINE void FN(mv3)(R* DS_RESTRICT res, const R* DS_RESTRICT M, const R* DS_RESTRICT v) { /* res = M v */
  for (int r = 0; r < 3; r++) res[r] = M[3 * r] * v[0] + M[3 * r + 1] * v[1] + M[3 * r + 2] * v[2];
}

/* res = M v, v real */
DS_HD DS_INLINE void FN(mv3d)(R* DS_RESTRICT res, const R* DS_RESTRICT M, const double* DS_RESTRICT v) {
  for (int r = 0; r < 3; r++) res[r] = M[3 * r] * v[0] + M[3 * r + 1] * v[1] + M[3 * r + 2] * v[2];
}

/* res = A B, no aliasing */
DS_HD DS_INLINE void FN(mm3)(R* DS_RESTRICT res, const R* DS_RESTRICT A, const R* DS_RESTRICT B) {
  for (int r = 0; r < 3; r++)
    for (int c = 0; c < 3; c++) res[3 * r + c] = A[3 * r] * B[c] + A[3 * r + 1] * B[3 + c] + A[3 * r + 2] * B[6 + c];
}

/* res = A B, B real */
DS_HD DS_INLINE void FN(mm3d)(R* DS_RESTRICT res, const R* DS_RESTRICT A, const double* DS_RESTRICT B) {
  for (int r = 0; r < 3; r++)
    for (int c = 0; c < 3; c++) res[3 * r + c] = A[3 * r] * B[c] + A[3 * r + 1] * B[3 + c] + A[3 * r + 2] * B[6 + c];
}

/* Rotation of q / |q| (w, x, y, z): 1 + 2 s (w [v]x + [v]x^2) with s = 1/|q|^2,
 * so a non-unit quaternion is a rotation too (no square root). */
DS_HD DS_INLINE void FN(quat_mat)(R M[9], const R q[4]) {
  const R s = 2 / (q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]);
  const R w = q[0], x = q[1], y = q[2], z = q[3];
  M[0] = 1 - s * (y * y + z * z);
  M[1] = s * (x * y - w * z);
  M[2] = s * (x * z + w * y);
  M[3] = s * (x * y + w * z);
  M[4] = 1 - s * (x * x + z * z);
  M[5] = s * (y * z - w * x);
  M[6] = s * (x * z - w * y);
  M[7] = s * (y * z + w * x);
  M[8] = 1 - s * (x * x + y * y);
}

/* Rotation by angle t about the unit axis a: c 1 + s [a]x + (1 - c) a a^T,
 * from c = cos t, s = sin t. */
DS_HD DS_INLINE void FN(axis_mat_cs)(R M[9], const double a[3], R c, R s) {
  const R k = 1 - c;
  M[0] = c + k * a[0] * a[0];
  M[1] = k * a[0] * a[1] - s * a[2];
  M[2] = k * a[0] * a[2] + s * a[1];
  M[3] = k * a[1] * a[0] + s * a[2];
  M[4] = c + k * a[1] * a[1];
  M[5] = k * a[1] * a[2] - s * a[0];
  M[6] = k * a[2] * a[0] - s * a[1];
  M[7] = k * a[2] * a[1] + s * a[0];
  M[8] = c + k * a[2] * a[2];
}

DS_HD DS_INLINE void FN(axis_mat)(R M[9], const double a[3], R t) { FN(axis_mat_cs)(M, a, cos(t), sin(t)); }

DS_HD DS_INLINE void FN(crm)(R res[6], const R V[6], const R M[6]) { /* res += V x M */
  R t[3], u[3];
  FN(cross)(t, V, M);
  for (int k = 0; k < 3; k++) res[k] += t[k];
  FN(cross)(t, V, M + 3);
  FN(cross)(u, V + 3, M);
  for (int k = 0; k < 3; k++) res[3 + k] += t[k] + u[k];
}

DS_HD DS_INLINE void FN(crf)(R res[6], const R V[6], const R F[6]) { /* res += V x* F */
  R t[3], u[3];
  FN(cross)(t, V, F);
  FN(cross)(u, V + 3, F + 3);
  for (int k = 0; k < 3; k++) res[k] += t[k] + u[k];
  FN(cross)(t, V, F + 3);
  for (int k = 0; k < 3; k++) res[3 + k] += t[k];
}

/* res = I V for the inertia (m, h, Ib). */
DS_HD DS_INLINE void FN(imul)(R res[6], R m, const R h[3], const R Ib[9], const R V[6]) {
  R t[3], u[3];
  FN(mv3)(t, Ib, V);
  FN(cross)(u, h, V + 3);
  for (int k = 0; k < 3; k++) res[k] = t[k] + u[k];
  FN(cross)(u, h, V);
  for (int k = 0; k < 3; k++) res[3 + k] = m * V[3 + k] - u[k];
}

/* dof of a joint type: 0 fixed, 1 hinge, 1 slide, 3 ball, 6 free, one nibble
 * each (the loops over the tree ask for it per body and per path entry) */
DS_HD DS_INLINE int FN(ndof)(int type) { return (0x63110 >> (4 * type)) & 15; }

/* Rotation column k of M as the motion (M e_k, p x M e_k). */
DS_HD DS_INLINE void FN(rot_col)(R S[6], const R M[9], const R p[3]) {
  for (int k = 0; k < 3; k++) S[k] = M[3 * k];
  FN(cross)(S + 3, p, S);
}

/* Poses, motion subspaces, velocities and world inertias of every body
 * from w->q, w->qd, w->th. Bodies before `first` take the real pass's
 * values from ref (complex copy; a seed there has no tangent: parents come
 * first, so no body before first descends from the seeded one). */
DS_HD static void FN(kin)(const dsArticModel* m, FN(ws) * w, int first, const void* ref) {
  static const R eye[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1};
  static const R zero[6] = {0, 0, 0, 0, 0, 0};
  for (int i = 0; i < m->nbody; i++) {
    FN(body)* b = &w->b[i];
#if ARTIC_CPLX
    if (i < first) {
      const body_r* rb = (const body_r*)ref + i;
      for (int k = 0; k < 9; k++) b->Rw[k] = rb->Rw[k], b->Rj[k] = rb->Rj[k], b->Ib[k] = rb->Ib[k];
      for (int k = 0; k < 3; k++) b->x[k] = rb->x[k], b->jp[k] = rb->jp[k], b->h[k] = rb->h[k];
      for (int k = 0; k < 6 * FN(ndof)(m->jtype[i]); k++) b->S[k] = rb->S[k];
      for (int k = 0; k < 6; k++) b->V[k] = rb->V[k];
      b->m = rb->m;
      continue;
    }
#else
    (void)first;
    (void)ref;
#endif
    const int p = m->parent[i];
    const R* Rp = p >= 0 ? w->b[p].Rw : eye;
    const R* xp = p >= 0 ? w->b[p].x : zero;
    const R* Vp = p >= 0 ? w->b[p].V : zero;
    const dsArticBodyParams* bp = &m->bp[i];
    const R* q = w->q + m->qadr[i];
    const R* qd = w->qd + m->vadr[i];
    const double* Q0 = m->R0 + 9 * i;
    R t[3], Rrel[9];
    FN(mv3)(t, Rp, w->th + bp->anchor_p);
    for (int k = 0; k < 3; k++) b->jp[k] = xp[k] + t[k];
    if (m->quat0[4 * i + 1] == 0 && m->quat0[4 * i + 2] == 0 && m->quat0[4 * i + 3] == 0)
      for (int k = 0; k < 9; k++) b->Rj[k] = Rp[k]; /* Q0 = 1 exactly: Rp Q0 = Rp */
    else
      FN(mm3d)(b->Rj, Rp, Q0);
    const double* ax = m->axis + 3 * i;
    R* S = b->S;
    switch (m->jtype[i]) {
      case DS_JOINT_HINGE:
        {
          const R co = cos(q[0]), si = sin(q[0]); /* one sincos */
          b->cs[0] = co;
          b->cs[1] = si;
          FN(axis_mat_cs)(b->Rr, ax, co, si);
        }
        FN(mm3)(b->Rw, b->Rj, b->Rr);
        FN(mv3d)(S, b->Rj, ax);
        FN(cross)(S + 3, b->jp, S);
        break;
      case DS_JOINT_SLIDE:
        for (int k = 0; k < 9; k++) b->Rw[k] = b->Rj[k];
        FN(mv3d)(t, b->Rj, ax);
        for (int k = 0; k < 3; k++) {
          b->jp[k] += t[k] * q[0];
          S[k] = 0;
          S[3 + k] = t[k];
        }
        break;
      case DS_JOINT_BALL:
        FN(quat_mat)(Rrel, q);
        FN(mm3)(b->Rw, b->Rj, Rrel);
        for (int c = 0; c < 3; c++) FN(rot_col)(S + 6 * c, b->Rw + c, b->jp);
        break;
      case DS_JOINT_FREE:
        FN(mv3)(t, b->Rj, q);
        for (int k = 0; k < 3; k++) b->jp[k] += t[k];
        FN(quat_mat)(Rrel, q + 3);
        FN(mm3)(b->Rw, b->Rj, Rrel);
        for (int c = 0; c < 3; c++) {
          for (int k = 0; k < 3; k++) {
            S[6 * c + k] = 0;
            S[6 * c + 3 + k] = b->Rj[3 * k + c];
          }
          FN(rot_col)(S + 6 * (3 + c), b->Rw + c, b->jp);
        }
        break;
      default: /* fixed */
        for (int k = 0; k < 9; k++) b->Rw[k] = b->Rj[k];
        break;
    }
    FN(mv3)(t, b->Rw, w->th + bp->anchor_c);
    for (int k = 0; k < 3; k++) b->x[k] = b->jp[k] - t[k];
    const int nd = FN(ndof)(m->jtype[i]);
    if (nd == 1) /* hinge, slide: the general loop's operations for one column */
      for (int k = 0; k < 6; k++) b->V[k] = Vp[k] + S[k] * qd[0];
    else
      for (int k = 0; k < 6; k++) {
        R s = Vp[k];
        for (int c = 0; c < nd; c++) s += S[6 * c + k] * qd[c];
        b->V[k] = s;
      }
    /* world inertia: Ic = Rw diag(I) Rw^T, then about the origin */
    const R* I3 = w->th + bp->inertia;
    const R mass = w->th[bp->mass];
    R c2 = 0;
    for (int k = 0; k < 3; k++) c2 += b->x[k] * b->x[k];
    R RD[9]; /* Rw diag(I), the left factors of Ic's products, once per entry */
    for (int k = 0; k < 9; k++) RD[k] = b->Rw[k] * I3[k % 3];
    for (int r = 0; r < 3; r++) /* the upper triangle, mirrored: Ib is exactly symmetric */
      for (int c = r; c < 3; c++) {
        const R ic = RD[3 * r] * b->Rw[3 * c] + RD[3 * r + 1] * b->Rw[3 * c + 1] + RD[3 * r + 2] * b->Rw[3 * c + 2];
        b->Ib[3 * r + c] = b->Ib[3 * c + r] = ic + mass * ((r == c ? c2 : 0) - b->x[r] * b->x[c]);
      }
    b->m = mass;
    for (int k = 0; k < 3; k++) b->h[k] = mass * b->x[k];
  }
}

/* Spatial contact forces on the bodies (w->fext) from the ground, the
 * particle model of engine/force_contact.h with y and z swapped (our
 * ground normal is z). Each sphere touches at its lowest point pc = c - r z
 * (the height c_z - r against skin 0), moving with the body's velocity at
 * pc; the force acts at pc, so friction also turns the link. */
DS_HD static void FN(contact)(const dsArticModel* m, FN(ws) * w) {
  for (int k = 0; k < 6 * m->nbody; k++) w->fext[k] = 0;
  if (!m->ground) return;
  const R* cp = w->th + m->p_contact;
  for (int s = 0; s < m->nsphere; s++) {
    const int i = m->sph_body[s];
    FN(body)* b = &w->b[i];
    R pc[3], v[3], f[3], t[3];
    FN(mv3d)(t, b->Rw, m->sph_pos + 3 * s);
    for (int k = 0; k < 3; k++) pc[k] = b->x[k] + t[k];
    pc[2] -= m->sph_radius[s];
    FN(cross)(t, b->V, pc);
    for (int k = 0; k < 3; k++) v[k] = b->V[3 + k] + t[k];
    double* vr = w->cpt + 6 * s; /* the real pass's point and velocity */
#if ARTIC_CPLX
    {
      dsReal xr[3] = {(dsReal)vr[0], (dsReal)vr[2], (dsReal)vr[1]};
      dsReal ur[3] = {(dsReal)vr[3], (dsReal)vr[5], (dsReal)vr[4]};
      const dsContactParam par = {(dsReal)creal(cp[0]), (dsReal)creal(cp[1]), (dsReal)creal(cp[2]),
                                  (dsReal)creal(cp[3]), 0};
      dsReal fr[3];
      ds__contact_fwd(xr, ur, &par, fr);
      /* the tangent: Jacobian rows of the kernel from its adjoint, row k = bwd(e_k) */
      const double dx[3] = {cimag(pc[0]), cimag(pc[2]), cimag(pc[1])};
      const double dv[3] = {cimag(v[0]), cimag(v[2]), cimag(v[1])};
      const double dp[4] = {cimag(cp[0]), cimag(cp[1]), cimag(cp[2]), cimag(cp[3])};
      R fc[3];
      for (int r = 0; r < 3; r++) {
        dsReal e[3] = {0, 0, 0}, gx[3] = {0, 0, 0}, gv[3] = {0, 0, 0};
        dsContactParam gp = {0, 0, 0, 0, 0};
        e[r] = 1;
        ds__contact_bwd(xr, ur, &par, e, gx, gv, &gp);
        double tan = gp.ke * dp[0] + gp.kd * dp[1] + gp.kf * dp[2] + gp.mu * dp[3];
        for (int k = 0; k < 3; k++) tan += gx[k] * dx[k] + gv[k] * dv[k];
        fc[r] = (double)fr[r] + I * tan;
      }
      f[0] = fc[0];
      f[1] = fc[2];
      f[2] = fc[1];
    }
#else
    {
      for (int k = 0; k < 3; k++) {
        vr[k] = pc[k];
        vr[3 + k] = v[k];
      }
      dsReal xr[3] = {(dsReal)pc[0], (dsReal)pc[2], (dsReal)pc[1]};
      dsReal ur[3] = {(dsReal)v[0], (dsReal)v[2], (dsReal)v[1]};
      const dsContactParam par = {(dsReal)cp[0], (dsReal)cp[1], (dsReal)cp[2], (dsReal)cp[3], 0};
      dsReal fr[3];
      ds__contact_fwd(xr, ur, &par, fr);
      f[0] = fr[0];
      f[1] = fr[2];
      f[2] = fr[1];
    }
#endif
    R* F = w->fext + 6 * i;
    FN(cross)(t, pc, f);
    for (int k = 0; k < 3; k++) {
      F[k] += t[k];
      F[3 + k] += f[k];
    }
  }
}

/* log(1 + e^x) and 1 / (1 + e^-x), each in the form that does not overflow. */
DS_HD DS_INLINE R FN(softplus)(R x) {
#if ARTIC_CPLX
  const double xr = creal(x);
#else
  const double xr = x;
#endif
  return xr > 0 ? x + log(1 + exp(-x)) : log(1 + exp(x));
}

DS_HD DS_INLINE R FN(sigmoid)(R x) {
#if ARTIC_CPLX
  const double xr = creal(x);
#else
  const double xr = x;
#endif
  if (xr > 0) return 1 / (1 + exp(-x));
  const R e = exp(x);
  return e / (1 + e);
}

/* Applied generalised forces w->tau: joint damping, springs, limits and
 * actuators. */
DS_HD static void FN(applied)(const dsArticModel* m, FN(ws) * w) {
  const R* th = w->th;
  for (int i = 0; i < m->nbody; i++) {
    const int nd = FN(ndof)(m->jtype[i]);
    if (!nd) continue;
    const dsArticBodyParams* bp = &m->bp[i];
    const R* qd = w->qd + m->vadr[i];
    R* tau = w->tau + m->vadr[i];
    for (int c = 0; c < nd; c++) tau[c] = -th[bp->damping] * qd[c];
    if (nd != 1) continue;
    const R q = w->q[m->qadr[i]];
    tau[0] -= th[bp->stiffness] * (q - th[bp->rest]);
    if (m->limited[i]) {
      /* one-sided smooth spring-damper past each limit */
      const double k = m->limit_k[i], bd = m->limit_b[i], wd = m->limit_w[i];
      const R eu = (q - th[bp->upper]) / wd, el = (th[bp->lower] - q) / wd;
      tau[0] += -k * wd * FN(softplus)(eu) + k * wd * FN(softplus)(el);
      tau[0] -= bd * qd[0] * (FN(sigmoid)(eu) + FN(sigmoid)(el));
    }
  }
  for (int a = 0; a < m->nu; a++) {
    const int i = m->act_body[a];
    const R q = w->q[m->qadr[i]], qd = w->qd[m->vadr[i]], u = w->u[a];
    R f;
    if (m->act_type[a] == DS_ARTIC_MOTOR) {
      const double cl = m->act_ctrl_limit[a];
      f = th[m->act_gear[a]] * (cl > 0 ? cl * tanh(u / cl) : u);
    } else {
      const double fl = m->act_force_limit[a];
      const R e = th[m->act_kp[a]] * (u - q) - th[m->act_kv[a]] * qd;
      f = fl > 0 ? fl * tanh(e / fl) : e;
    }
    w->tau[m->vadr[i]] += f;
  }
}

/* Inverse dynamics w->id = M(q) qdd + C(q, qd) - g terms - J^T fext at
 * qdd (kinematics and contact forces done). Bodies before `first` take A
 * and F0 from ref (complex copy: the real pass at the same qdd). */
DS_HD static void FN(rnea)(const dsArticModel* m, FN(ws) * w, const R* qdd, int first, const void* ref) {
  const R* g = w->th + m->p_gravity;
  const R a0[6] = {0, 0, 0, -g[0], -g[1], -g[2]};
  for (int i = 0; i < m->nbody; i++) {
    FN(body)* b = &w->b[i];
#if ARTIC_CPLX
    if (i < first) {
      const body_r* rb = (const body_r*)ref + i;
      for (int k = 0; k < 6; k++) b->A[k] = rb->A[k], b->F[k] = b->F0[k] = rb->F0[k];
      continue;
    }
#else
    (void)first;
    (void)ref;
#endif
    const int p = m->parent[i];
    const R* Ap = p >= 0 ? w->b[p].A : a0;
    static const R zero[6] = {0, 0, 0, 0, 0, 0};
    const R* Vp = p >= 0 ? w->b[p].V : zero;
    const int nd = FN(ndof)(m->jtype[i]);
    const R* qd = w->qd + m->vadr[i];
    const R* dd = qdd + m->vadr[i];
    R vc[6];
    /* hinge, slide: the general loop's operations for one column (vc is 0 + x
     * there too, which turns a -0 into +0) */
    if (nd == 1) {
      for (int k = 0; k < 6; k++) {
        b->A[k] = Ap[k] + b->S[k] * dd[0];
        vc[k] = 0 + b->S[k] * qd[0];
      }
      FN(crm)(b->A, b->V, vc);
    } else {
      R vl[6] = {0, 0, 0, 0, 0, 0};
      const int nlin = m->jtype[i] == DS_JOINT_FREE ? 3 : 0; /* columns fixed in the parent */
      for (int k = 0; k < 6; k++) {
        R s = Ap[k];
        vc[k] = 0;
        for (int c = 0; c < nd; c++) {
          s += b->S[6 * c + k] * dd[c];
          if (c < nlin)
            vl[k] += b->S[6 * c + k] * qd[c];
          else
            vc[k] += b->S[6 * c + k] * qd[c];
        }
        b->A[k] = s;
      }
      FN(crm)(b->A, b->V, vc);
      if (nlin) FN(crm)(b->A, Vp, vl); /* vl = 0 otherwise */
    }
    FN(imul)(b->F, b->m, b->h, b->Ib, b->A);
    FN(imul)(b->P, b->m, b->h, b->Ib, b->V);
    FN(crf)(b->F, b->V, b->P);
    for (int k = 0; k < 6; k++) b->F0[k] = b->F[k] -= w->fext[6 * i + k];
  }
  for (int i = m->nbody - 1; i >= 0; i--) {
    FN(body)* b = &w->b[i];
    const int nd = FN(ndof)(m->jtype[i]);
    for (int c = 0; c < nd; c++) {
      R s = 0;
      for (int k = 0; k < 6; k++) s += b->S[6 * c + k] * b->F[k];
      const int v = m->vadr[i] + c;
      w->id[v] = s + w->th[m->bp[i].armature] * qdd[v];
    }
    const int p = m->parent[i];
    if (p >= 0)
      for (int k = 0; k < 6; k++) w->b[p].F[k] += b->F[k];
  }
}

/* q' = q (+) dt qd' (qd' = w->qdn): unit quaternions advance by the exact
 * rotation of the body rate w over dt, q' = q (x) (cos(t/2), w^ sin(t/2)),
 * t = dt |w|, then are normalised. */
DS_HD static void FN(quat_step)(R out[4], const R q[4], const R om[3], double dt) {
  const R w2 = om[0] * om[0] + om[1] * om[1] + om[2] * om[2];
#if ARTIC_CPLX
  const double w2r = creal(w2);
#else
  const double w2r = w2;
#endif
  R c, s;                      /* cos(t/2), sin(t/2)/|w| */
  if (w2r * dt * dt < 1e-10) { /* series; the next terms are below 1e-21 */
    const R t2 = w2 * dt * dt;
    c = 1 - t2 / 8;
    s = dt / 2 * (1 - t2 / 24);
  } else {
    const R wn = sqrt(w2);
    c = cos(wn * dt / 2);
    s = sin(wn * dt / 2) / wn;
  }
  const R d[4] = {c, s * om[0], s * om[1], s * om[2]};
  R r[4];
  r[0] = q[0] * d[0] - q[1] * d[1] - q[2] * d[2] - q[3] * d[3];
  r[1] = q[0] * d[1] + q[1] * d[0] + q[2] * d[3] - q[3] * d[2];
  r[2] = q[0] * d[2] - q[1] * d[3] + q[2] * d[0] + q[3] * d[1];
  r[3] = q[0] * d[3] + q[1] * d[2] - q[2] * d[1] + q[3] * d[0];
  const R n = 1 / sqrt(r[0] * r[0] + r[1] * r[1] + r[2] * r[2] + r[3] * r[3]);
  for (int k = 0; k < 4; k++) out[k] = r[k] * n;
}

/* Semi-implicit Euler: qd' = qd + dt qdd, then q' from qd'. */
DS_HD static void FN(integrate)(const dsArticModel* m, FN(ws) * w) {
  const double dt = m->dt;
  for (int v = 0; v < m->nv; v++) w->qdn[v] = w->qd[v] + dt * w->qdd[v];
  for (int i = 0; i < m->nbody; i++) {
    const R* q = w->q + m->qadr[i];
    const R* qd = w->qdn + m->vadr[i];
    R* qn = w->qn + m->qadr[i];
    switch (m->jtype[i]) {
      case DS_JOINT_HINGE:
      case DS_JOINT_SLIDE:
        qn[0] = q[0] + dt * qd[0];
        break;
      case DS_JOINT_BALL:
        FN(quat_step)(qn, q, qd, dt);
        break;
      case DS_JOINT_FREE:
        for (int k = 0; k < 3; k++) qn[k] = q[k] + dt * qd[k];
        FN(quat_step)(qn + 3, q + 3, qd + 3, dt);
        break;
      default:
        break;
    }
  }
}

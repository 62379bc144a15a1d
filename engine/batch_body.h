/* The batched step and backward as single-source bodies: one DS_HD
 * function per stage, called for (element or particle index e, instance b)
 * with plain arrays. engine/batch_cpu.c runs them in OpenMP loops over
 * (b, e); cuda/batch.cu launches them from kernels, one thread per (b, e).
 * The physics is the engine's own DS_HD kernels (engine/force_*.h); the
 * bodies do what the loops of engine/step.c and force_*.h do around them,
 * in the same operations and order, so an instance gives the bits of
 * ds_step / ds_backward_step on its own model (tests/test_batch_sim.c).
 *
 * Instance b reads its model through mv[b], a dsModel whose differentiable
 * arrays (and inverse masses) point at b's own parameters and whose other
 * arrays (topology, rest shapes, incidence lists) are shared; its gradient
 * is gv[b]. Every other array is instance-major: b's block of a B x n array
 * starts at b n.
 *
 * Stages of one substep (each runs after the previous one has finished for
 * every (b, e)):
 *   forward:  SPRING, TRI, AERO (adds into the triangles' slots), BEND, TET
 *             element forces into slots; GATHER: each particle sums its slots
 *             in incidence order, adds contact, integrates.
 *   backward: INTEG (adjoint through the integrator, mass gradient), the
 *             element adjoints in the same list order into slots, GATHER_BWD
 *             (sum the slot adjoints, contact adjoint), REDUCE (per instance:
 *             gravity and the shared scalars' partials summed serially in
 *             element order, as the engine does), FINISH (per particle, the
 *             initial-state gradient).
 *   CHECK:    per instance, the first inverted tet or non-finite particle
 *             flagged by the forward stages.
 *   RESET:    per particle, the instance's initial state into xo, vo (and
 *             xc, vc); ADD_ADJ: adj_x += av, adj_v += af (the caller's
 *             adjoints, uploaded into av and af).
 * No stage sums across threads: results do not depend on the schedule. */
#ifndef DSIM_ENGINE_BATCH_BODY_H
#define DSIM_ENGINE_BATCH_BODY_H

#include "engine/forces.h"

enum {
  DS__BS_SPRING_FWD,
  DS__BS_TRI_FWD,
  DS__BS_AERO_FWD,
  DS__BS_BEND_FWD,
  DS__BS_TET_FWD,
  DS__BS_GATHER_FWD,
  DS__BS_INTEG_BWD,
  DS__BS_SPRING_BWD,
  DS__BS_TRI_BWD,
  DS__BS_AERO_BWD,
  DS__BS_BEND_BWD,
  DS__BS_TET_BWD,
  DS__BS_GATHER_BWD,
  DS__BS_REDUCE,
  DS__BS_FINISH,
  DS__BS_CHECK,
  DS__BS_RESET,
  DS__BS_ADD_ADJ,
  DS__BS_COUNT
};

/* Arrays of one stage launch. Sizes per instance: n3 = 3 nparticle,
 * s3 = 3 nslot; the bad-cell array holds ntet + nparticle ints. */
typedef struct dsBatchArgs {
  const dsModel* mv; /* B model views */
  dsGrad* gv;        /* B gradient views (backward) */
  int B, np, nslot, nact, ntet;
  int slot[DS__NFORCE];    /* first slot of each force model (the owner's for aero) */
  int actb[DS__NFORCE];    /* first activation, -1: none */
  int scr[DS__NFORCE];     /* first scratch real of each model, per instance */
  int nscr;                /* scratch reals per instance */
  int ground, aero;        /* contact and aerodynamics on */
  int t;                   /* substep being computed (flags record t + 1) */
  /* forward */
  const dsReal* x;  /* B x n3: state at t */
  const dsReal* v;
  const dsReal* act;  /* B x nact, NULL: 0 */
  const dsReal* fext; /* B x n3, NULL: 0 */
  dsReal* ef;         /* B x s3 slots */
  dsReal* J;          /* B x ntet */
  dsReal* xo;         /* B x n3: state at t + 1 */
  dsReal* vo;
  dsReal* xc;         /* NULL, or a second copy of the state at t + 1 (checkpoint) */
  dsReal* vc;
  int* bad;           /* NULL, or B x (ntet + np): substep + 1 of the first bad J / non-finite x, v */
  int* status;        /* CHECK: B x 3 (code, substep, element or particle) */
  /* backward */
  const dsReal* v1;   /* B x n3: velocities at t + 1 (mass gradient) */
  dsReal* adj_x;      /* B x n3: in: adjoints of state t + 1; out: of state t */
  dsReal* adj_v;
  dsReal* av;         /* B x n3 scratch: adjoint of v' */
  dsReal* af;         /* B x n3 scratch: adjoint of the total force */
  dsReal* aex;        /* B x s3 slot adjoints (x) */
  dsReal* aev;        /* B x s3 slot adjoints (v) */
  dsReal* scratch;    /* B x nscr partials of shared scalars */
  dsReal* adj_act;    /* B x nact, += per substep; NULL: not wanted */
  dsReal* adj_fext;   /* B x n3, += per substep; NULL: not wanted */
} dsBatchArgs;

/* Elements (or particles, or 1) a stage runs over, per instance. */
DS_HD DS_INLINE int ds__bstage_count(const dsBatchArgs* a, int stage) {
  const dsModel* m = a->mv; /* counts are the same in every view */
  switch (stage) {
    case DS__BS_SPRING_FWD: case DS__BS_SPRING_BWD: return m->nspring;
    case DS__BS_TRI_FWD: case DS__BS_TRI_BWD: return m->ntri;
    case DS__BS_AERO_FWD: case DS__BS_AERO_BWD: return a->aero ? m->ntri : 0;
    case DS__BS_BEND_FWD: case DS__BS_BEND_BWD: return m->nbend;
    case DS__BS_TET_FWD: case DS__BS_TET_BWD: return m->ntet;
    case DS__BS_GATHER_FWD: case DS__BS_INTEG_BWD: case DS__BS_GATHER_BWD: case DS__BS_FINISH:
    case DS__BS_RESET: case DS__BS_ADD_ADJ: return m->nparticle;
    default: return 1;
  }
}

#define DS__BN3(a, b) ((size_t)(b) * 3 * (size_t)(a)->np)
#define DS__BS3(a, b) ((size_t)(b) * 3 * (size_t)(a)->nslot)

/* ---- forward element stages (as engine/force_*.h's loops) ------------------------ */
DS_HD DS_INLINE void ds__bs_spring_fwd(const dsBatchArgs* a, int e, int b) {
  const dsModel* m = a->mv + b;
  const dsReal* x = a->x + DS__BN3(a, b);
  const dsReal* v = a->v + DS__BN3(a, b);
  const dsReal* act = a->act && a->actb[DS__F_SPRING] >= 0 ? a->act + (size_t)b * a->nact + a->actb[DS__F_SPRING] : 0;
  dsReal xl[6], vl[6];
  const int* idx = m->spring_idx + 2 * e;
  dsSpringParam p = {m->spring_ke[e], m->spring_kd[e], m->spring_rest[e], act ? act[e] : 0};
  ds__gather3(xl, x, idx, 2);
  ds__gather3(vl, v, idx, 2);
  ds_spring_fwd(xl, vl, &p, a->ef + DS__BS3(a, b) + 3 * (size_t)a->slot[DS__F_SPRING] + 6 * (size_t)e);
}

DS_HD DS_INLINE void ds__bs_tri_fwd(const dsBatchArgs* a, int e, int b) {
  const dsModel* m = a->mv + b;
  const dsReal* x = a->x + DS__BN3(a, b);
  const dsReal* v = a->v + DS__BN3(a, b);
  const dsReal* act = a->act && a->actb[DS__F_TRI] >= 0 ? a->act + (size_t)b * a->nact + a->actb[DS__F_TRI] : 0;
  dsReal xl[9], vl[9];
  const int* idx = m->tri_idx + 3 * e;
  dsTriRest r;
  for (int k = 0; k < 4; k++) r.Dm[k] = m->tri_Dm[4 * (size_t)e + k];
  r.area = m->tri_area[e];
  dsTriParam p = {m->tri_k_mu[e], m->tri_k_lambda[e], m->tri_k_damp[e], act ? act[e] : 0};
  ds__gather3(xl, x, idx, 3);
  ds__gather3(vl, v, idx, 3);
  ds_tri_fwd(xl, vl, &r, &p, a->ef + DS__BS3(a, b) + 3 * (size_t)a->slot[DS__F_TRI] + 9 * (size_t)e);
}

DS_HD DS_INLINE void ds__bs_aero_fwd(const dsBatchArgs* a, int e, int b) {
  const dsModel* m = a->mv + b;
  const dsReal* x = a->x + DS__BN3(a, b);
  const dsReal* v = a->v + DS__BN3(a, b);
  const dsAeroParam p = {m->aero_lift[0], m->aero_drag[0]};
  dsReal xl[9], vl[9], fa[9];
  const int* idx = m->tri_idx + 3 * e;
  ds__gather3(xl, x, idx, 3);
  ds__gather3(vl, v, idx, 3);
  ds_aero_fwd(xl, vl, &p, fa);
  dsReal* fe = a->ef + DS__BS3(a, b) + 3 * (size_t)a->slot[DS__F_AERO] + 9 * (size_t)e;
  for (int k = 0; k < 9; k++) fe[k] += fa[k];
}

DS_HD DS_INLINE void ds__bs_bend_fwd(const dsBatchArgs* a, int e, int b) {
  const dsModel* m = a->mv + b;
  const dsReal* x = a->x + DS__BN3(a, b);
  const dsReal* v = a->v + DS__BN3(a, b);
  dsReal xl[12], vl[12];
  const int* idx = m->bend_idx + 4 * e;
  dsBendParam p = {m->bend_ke[e], m->bend_kd[e], m->bend_rest[e]};
  ds__gather3(xl, x, idx, 4);
  ds__gather3(vl, v, idx, 4);
  ds_bend_fwd(xl, vl, &p, a->ef + DS__BS3(a, b) + 3 * (size_t)a->slot[DS__F_BEND] + 12 * (size_t)e);
}

DS_HD DS_INLINE void ds__bs_tet_fwd(const dsBatchArgs* a, int e, int b) {
  const dsModel* m = a->mv + b;
  const dsReal* x = a->x + DS__BN3(a, b);
  const dsReal* v = a->v + DS__BN3(a, b);
  const dsReal* act = a->act && a->actb[DS__F_TET] >= 0 ? a->act + (size_t)b * a->nact + a->actb[DS__F_TET] : 0;
  dsReal xl[12], vl[12];
  const int* idx = m->tet_idx + 4 * e;
  dsTetRest r;
  for (int k = 0; k < 9; k++) r.B[k] = m->tet_B[9 * (size_t)e + k];
  r.vol = m->tet_vol[e];
  dsTetParam p = {m->tet_k_mu[e], m->tet_k_lambda[e], m->tet_k_damp[e], act ? act[e] : 0};
  ds__gather3(xl, x, idx, 4);
  ds__gather3(vl, v, idx, 4);
  dsReal* J = a->J + (size_t)b * a->ntet + e;
  ds_tet_fwd(xl, vl, &r, &p, a->ef + DS__BS3(a, b) + 3 * (size_t)a->slot[DS__F_TET] + 12 * (size_t)e, J);
  if (a->bad && !(*J > 0)) {
    int* c = a->bad + (size_t)b * (a->ntet + a->np) + e;
    if (*c == 0) *c = a->t + 1;
  }
}

/* ---- forward gather: slot sum in incidence order, contact, integration --------------
 * (engine/step.c's ds__substep, its per-particle loop) */
DS_HD DS_INLINE void ds__bs_gather_fwd(const dsBatchArgs* a, int i, int b) {
  const dsModel* m = a->mv + b;
  const size_t o = DS__BN3(a, b);
  const dsReal* x = a->x + o;
  const dsReal* v = a->v + o;
  const dsReal* ef = a->ef + DS__BS3(a, b);
  dsReal fi[3] = {0, 0, 0};
  if (a->fext) {
    const dsReal* fe = a->fext + o;
    fi[0] = fe[3 * i];
    fi[1] = fe[3 * i + 1];
    fi[2] = fe[3 * i + 2];
  }
  for (int s = m->inc_start[i]; s < m->inc_start[i + 1]; s++) {
    const dsReal* fs = ef + 3 * (size_t)m->inc_slot[s];
    fi[0] += fs[0];
    fi[1] += fs[1];
    fi[2] += fs[2];
  }
  if (a->ground) { /* engine/force_contact.h, ds__contact_pfwd */
    const dsContactParam cp = {m->contact_ke[0], m->contact_kd[0], m->contact_kf[0], m->contact_mu[0],
                               m->contact_skin[0]};
    dsReal fc[3];
    ds_contact_fwd(x + 3 * (size_t)i, v + 3 * (size_t)i, &cp, fc);
    fi[0] += fc[0];
    fi[1] += fc[1];
    fi[2] += fc[2];
  }
  const dsReal dt = m->dt, w = m->inv_mass[i], gm = w > 0 ? 1 : 0;
  const dsReal v0 = v[3 * i] + dt * (w * fi[0] + m->gravity[0] * gm);
  const dsReal v1 = v[3 * i + 1] + dt * (w * fi[1] + m->gravity[1] * gm);
  const dsReal v2 = v[3 * i + 2] + dt * (w * fi[2] + m->gravity[2] * gm);
  const dsReal x0 = x[3 * i] + dt * v0, x1 = x[3 * i + 1] + dt * v1, x2 = x[3 * i + 2] + dt * v2;
  dsReal* xo = a->xo + o + 3 * (size_t)i;
  dsReal* vo = a->vo + o + 3 * (size_t)i;
  vo[0] = v0;
  vo[1] = v1;
  vo[2] = v2;
  xo[0] = x0;
  xo[1] = x1;
  xo[2] = x2;
  if (a->xc) {
    dsReal* xc = a->xc + o + 3 * (size_t)i;
    dsReal* vc = a->vc + o + 3 * (size_t)i;
    vc[0] = v0;
    vc[1] = v1;
    vc[2] = v2;
    xc[0] = x0;
    xc[1] = x1;
    xc[2] = x2;
  }
  if (a->bad) {
    /* (q - q == 0) is false exactly for NaN and Inf */
    const int fin = (x0 - x0 == 0) && (x1 - x1 == 0) && (x2 - x2 == 0) && (v0 - v0 == 0) && (v1 - v1 == 0) &&
                    (v2 - v2 == 0);
    int* c = a->bad + (size_t)b * (a->ntet + a->np) + a->ntet + i;
    if (!fin && *c == 0) *c = a->t + 1;
  }
}

/* ---- backward: through the integrator (step.c, stage A) ------------------------------ */
DS_HD DS_INLINE void ds__bs_integ_bwd(const dsBatchArgs* a, int i, int b) {
  const dsModel* m = a->mv + b;
  dsGrad* g = a->gv + b;
  const size_t o = DS__BN3(a, b);
  const dsReal dt = m->dt, w = m->inv_mass[i];
  dsReal dm = 0;
  for (int c = 0; c < 3; c++) {
    const size_t k = o + 3 * (size_t)i + c;
    const dsReal av = a->adj_v[k] + dt * a->adj_x[k];
    a->av[k] = av;
    a->af[k] = dt * w * av;
    if (a->adj_fext) a->adj_fext[k] += a->af[k];
    dm += (a->v1[k] - a->v[k] - dt * m->gravity[c]) * av;
  }
  if (w > 0) g->mass[i] += -w * dm;
}

/* ---- backward element stages ---------------------------------------------------------- */
DS_HD DS_INLINE void ds__bs_spring_bwd(const dsBatchArgs* a, int e, int b) {
  const dsModel* m = a->mv + b;
  dsGrad* g = a->gv + b;
  const size_t o = DS__BN3(a, b);
  const int ab = a->actb[DS__F_SPRING];
  const dsReal* act = a->act && ab >= 0 ? a->act + (size_t)b * a->nact + ab : 0;
  dsReal xl[6], vl[6], al[6], ax[6] = {0}, avl[6] = {0};
  const int* idx = m->spring_idx + 2 * e;
  dsSpringParam p = {m->spring_ke[e], m->spring_kd[e], m->spring_rest[e], act ? act[e] : 0};
  dsSpringParam ap = {0, 0, 0, 0};
  ds__gather3(xl, a->x + o, idx, 2);
  ds__gather3(vl, a->v + o, idx, 2);
  ds__gather3(al, a->af + o, idx, 2);
  ds_spring_bwd(xl, vl, &p, al, ax, avl, &ap);
  const size_t so = DS__BS3(a, b) + 3 * (size_t)a->slot[DS__F_SPRING] + 6 * (size_t)e;
  for (int k = 0; k < 6; k++) {
    a->aex[so + k] = ax[k];
    a->aev[so + k] = avl[k];
  }
  g->spring_ke[e] += ap.ke;
  g->spring_kd[e] += ap.kd;
  g->spring_rest[e] += ap.rest;
  if (a->adj_act && ab >= 0) a->adj_act[(size_t)b * a->nact + ab + e] += ap.act;
}

DS_HD DS_INLINE void ds__bs_tri_bwd(const dsBatchArgs* a, int e, int b) {
  const dsModel* m = a->mv + b;
  dsGrad* g = a->gv + b;
  const size_t o = DS__BN3(a, b);
  const int ab = a->actb[DS__F_TRI];
  const dsReal* act = a->act && ab >= 0 ? a->act + (size_t)b * a->nact + ab : 0;
  dsReal xl[9], vl[9], al[9], ax[9] = {0}, avl[9] = {0};
  const int* idx = m->tri_idx + 3 * e;
  dsTriRest r;
  for (int k = 0; k < 4; k++) r.Dm[k] = m->tri_Dm[4 * (size_t)e + k];
  r.area = m->tri_area[e];
  dsTriParam p = {m->tri_k_mu[e], m->tri_k_lambda[e], m->tri_k_damp[e], act ? act[e] : 0};
  dsTriParam ap = {0, 0, 0, 0};
  ds__gather3(xl, a->x + o, idx, 3);
  ds__gather3(vl, a->v + o, idx, 3);
  ds__gather3(al, a->af + o, idx, 3);
  ds_tri_bwd(xl, vl, &r, &p, al, ax, avl, &ap);
  const size_t so = DS__BS3(a, b) + 3 * (size_t)a->slot[DS__F_TRI] + 9 * (size_t)e;
  for (int k = 0; k < 9; k++) {
    a->aex[so + k] = ax[k];
    a->aev[so + k] = avl[k];
  }
  g->tri_k_mu[e] += ap.k_mu;
  g->tri_k_lambda[e] += ap.k_lambda;
  g->tri_k_damp[e] += ap.k_damp;
  if (a->adj_act && ab >= 0) a->adj_act[(size_t)b * a->nact + ab + e] += ap.act;
}

DS_HD DS_INLINE void ds__bs_aero_bwd(const dsBatchArgs* a, int e, int b) {
  const dsModel* m = a->mv + b;
  const size_t o = DS__BN3(a, b);
  const dsAeroParam p = {m->aero_lift[0], m->aero_drag[0]};
  dsReal xl[9], vl[9], al[9], ax[9], avl[9];
  const int* idx = m->tri_idx + 3 * e;
  const size_t so = DS__BS3(a, b) + 3 * (size_t)a->slot[DS__F_AERO] + 9 * (size_t)e;
  dsReal* sx = a->aex + so;
  dsReal* sv = a->aev + so;
  for (int k = 0; k < 9; k++) {
    ax[k] = sx[k];
    avl[k] = sv[k];
  }
  ds__gather3(xl, a->x + o, idx, 3);
  ds__gather3(vl, a->v + o, idx, 3);
  ds__gather3(al, a->af + o, idx, 3);
  dsAeroParam ap = {0, 0};
  ds_aero_bwd(xl, vl, &p, al, ax, avl, &ap);
  for (int k = 0; k < 9; k++) {
    sx[k] = ax[k];
    sv[k] = avl[k];
  }
  dsReal* sc = a->scratch + (size_t)b * a->nscr + a->scr[DS__F_AERO];
  sc[2 * (size_t)e] = ap.k_lift;
  sc[2 * (size_t)e + 1] = ap.k_drag;
}

DS_HD DS_INLINE void ds__bs_bend_bwd(const dsBatchArgs* a, int e, int b) {
  const dsModel* m = a->mv + b;
  dsGrad* g = a->gv + b;
  const size_t o = DS__BN3(a, b);
  dsReal xl[12], vl[12], al[12], ax[12] = {0}, avl[12] = {0};
  const int* idx = m->bend_idx + 4 * e;
  dsBendParam p = {m->bend_ke[e], m->bend_kd[e], m->bend_rest[e]}, ap = {0, 0, 0};
  ds__gather3(xl, a->x + o, idx, 4);
  ds__gather3(vl, a->v + o, idx, 4);
  ds__gather3(al, a->af + o, idx, 4);
  ds_bend_bwd(xl, vl, &p, al, ax, avl, &ap);
  const size_t so = DS__BS3(a, b) + 3 * (size_t)a->slot[DS__F_BEND] + 12 * (size_t)e;
  for (int k = 0; k < 12; k++) {
    a->aex[so + k] = ax[k];
    a->aev[so + k] = avl[k];
  }
  g->bend_ke[e] += ap.ke;
  g->bend_kd[e] += ap.kd;
  g->bend_rest[e] += ap.rest;
}

DS_HD DS_INLINE void ds__bs_tet_bwd(const dsBatchArgs* a, int e, int b) {
  const dsModel* m = a->mv + b;
  dsGrad* g = a->gv + b;
  const size_t o = DS__BN3(a, b);
  const int ab = a->actb[DS__F_TET];
  const dsReal* act = a->act && ab >= 0 ? a->act + (size_t)b * a->nact + ab : 0;
  dsReal xl[12], vl[12], al[12], ax[12] = {0}, avl[12] = {0};
  const int* idx = m->tet_idx + 4 * e;
  dsTetRest r;
  for (int k = 0; k < 9; k++) r.B[k] = m->tet_B[9 * (size_t)e + k];
  r.vol = m->tet_vol[e];
  dsTetParam p = {m->tet_k_mu[e], m->tet_k_lambda[e], m->tet_k_damp[e], act ? act[e] : 0};
  dsTetParam ap = {0, 0, 0, 0};
  ds__gather3(xl, a->x + o, idx, 4);
  ds__gather3(vl, a->v + o, idx, 4);
  ds__gather3(al, a->af + o, idx, 4);
  ds_tet_bwd(xl, vl, &r, &p, al, ax, avl, &ap);
  const size_t so = DS__BS3(a, b) + 3 * (size_t)a->slot[DS__F_TET] + 12 * (size_t)e;
  for (int k = 0; k < 12; k++) {
    a->aex[so + k] = ax[k];
    a->aev[so + k] = avl[k];
  }
  g->tet_k_mu[e] += ap.k_mu;
  g->tet_k_lambda[e] += ap.k_lambda;
  g->tet_k_damp[e] += ap.k_damp;
  if (a->adj_act && ab >= 0) a->adj_act[(size_t)b * a->nact + ab + e] += ap.act;
}

/* ---- backward gather (step.c, stage C) ---------------------------------------------- */
DS_HD DS_INLINE void ds__bs_gather_bwd(const dsBatchArgs* a, int i, int b) {
  const dsModel* m = a->mv + b;
  const size_t o = DS__BN3(a, b), so = DS__BS3(a, b);
  dsReal ax[3] = {0, 0, 0}, avl[3] = {0, 0, 0};
  for (int s = m->inc_start[i]; s < m->inc_start[i + 1]; s++) {
    const size_t q = so + 3 * (size_t)m->inc_slot[s];
    ax[0] += a->aex[q];
    ax[1] += a->aex[q + 1];
    ax[2] += a->aex[q + 2];
    avl[0] += a->aev[q];
    avl[1] += a->aev[q + 1];
    avl[2] += a->aev[q + 2];
  }
  if (a->ground) { /* ds__contact_pbwd */
    const dsContactParam cp = {m->contact_ke[0], m->contact_kd[0], m->contact_kf[0], m->contact_mu[0],
                               m->contact_skin[0]};
    dsContactParam ac = {0, 0, 0, 0, 0};
    const size_t p = o + 3 * (size_t)i;
    ds_contact_bwd(a->x + p, a->v + p, &cp, a->af + p, ax, avl, &ac);
    dsReal* a5 = a->scratch + (size_t)b * a->nscr + a->scr[DS__F_CONTACT] + 5 * (size_t)i;
    a5[0] = ac.ke;
    a5[1] = ac.kd;
    a5[2] = ac.kf;
    a5[3] = ac.mu;
    a5[4] = ac.skin;
  }
  for (int c = 0; c < 3; c++) {
    const size_t k = o + 3 * (size_t)i + c;
    a->adj_x[k] += ax[c];
    a->adj_v[k] = a->av[k] + avl[c];
  }
}

/* ---- per instance: the shared scalars, serially in element order -------------------- */
DS_HD DS_INLINE void ds__bs_reduce(const dsBatchArgs* a, int e, int b) {
  (void)e;
  const dsModel* m = a->mv + b;
  dsGrad* g = a->gv + b;
  const dsReal* av = a->av + DS__BN3(a, b);
  const dsReal dt = m->dt;
  dsReal sg[3] = {0, 0, 0};
  for (int i = 0; i < a->np; i++)
    if (m->inv_mass[i] > 0)
      for (int c = 0; c < 3; c++) sg[c] += av[3 * i + c];
  for (int c = 0; c < 3; c++) g->gravity[c] += dt * sg[c];
  const dsReal* sc = a->scratch + (size_t)b * a->nscr;
  if (a->aero) { /* ds__aero_reduce */
    const dsReal* s = sc + a->scr[DS__F_AERO];
    dsReal sl = 0, sd = 0;
    for (int k = 0; k < m->ntri; k++) {
      sl += s[2 * (size_t)k];
      sd += s[2 * (size_t)k + 1];
    }
    g->aero_lift[0] += sl;
    g->aero_drag[0] += sd;
  }
  if (a->ground) { /* ds__contact_reduce */
    const dsReal* s = sc + a->scr[DS__F_CONTACT];
    dsReal c5[5] = {0, 0, 0, 0, 0};
    for (int i = 0; i < a->np; i++)
      for (int k = 0; k < 5; k++) c5[k] += s[5 * (size_t)i + k];
    g->contact_ke[0] += c5[0];
    g->contact_kd[0] += c5[1];
    g->contact_kf[0] += c5[2];
    g->contact_mu[0] += c5[3];
    g->contact_skin[0] += c5[4];
  }
}

/* ---- per particle: the initial state's gradient (ds_backward_finish) ------------------ */
DS_HD DS_INLINE void ds__bs_finish(const dsBatchArgs* a, int i, int b) {
  dsGrad* g = a->gv + b;
  const size_t o = DS__BN3(a, b);
  for (int c = 0; c < 3; c++) {
    g->x0[3 * (size_t)i + c] += a->adj_x[o + 3 * (size_t)i + c];
    g->v0[3 * (size_t)i + c] += a->adj_v[o + 3 * (size_t)i + c];
  }
}

/* ---- per instance: first failure (earliest substep, then lowest index; tets first) ---- */
DS_HD DS_INLINE void ds__bs_check(const dsBatchArgs* a, int e, int b) {
  (void)e;
  const int n = a->ntet + a->np;
  const int* c = a->bad + (size_t)b * n;
  int best = 0, at = -1;
  for (int k = 0; k < n; k++)
    if (c[k] && (best == 0 || c[k] < best)) {
      best = c[k];
      at = k;
    }
  int* st = a->status + 3 * (size_t)b;
  if (at < 0) {
    st[0] = 0;
    st[1] = 0;
    st[2] = 0;
  } else if (at < a->ntet) {
    st[0] = DS_ERR_INVERTED;
    st[1] = best - 1;
    st[2] = at;
  } else {
    st[0] = DS_ERR_DIVERGED;
    st[1] = best - 1;
    st[2] = at - a->ntet;
  }
}

/* ---- per particle: initial state; caller's adjoints added ----------------------------- */
DS_HD DS_INLINE void ds__bs_reset(const dsBatchArgs* a, int i, int b) {
  const dsModel* m = a->mv + b;
  const size_t o = DS__BN3(a, b) + 3 * (size_t)i;
  for (int c = 0; c < 3; c++) {
    a->xo[o + c] = m->x0[3 * (size_t)i + c];
    a->vo[o + c] = m->v0[3 * (size_t)i + c];
    if (a->xc) {
      a->xc[o + c] = m->x0[3 * (size_t)i + c];
      a->vc[o + c] = m->v0[3 * (size_t)i + c];
    }
  }
}

DS_HD DS_INLINE void ds__bs_add_adj(const dsBatchArgs* a, int i, int b) {
  const size_t o = DS__BN3(a, b) + 3 * (size_t)i;
  for (int c = 0; c < 3; c++) {
    a->adj_x[o + c] += a->av[o + c];
    a->adj_v[o + c] += a->af[o + c];
  }
}

/* One stage for (e, b); `stage` is the same for a whole launch. */
DS_HD DS_INLINE void ds__bstage_run(int stage, const dsBatchArgs* a, int e, int b) {
  switch (stage) {
    case DS__BS_SPRING_FWD: ds__bs_spring_fwd(a, e, b); break;
    case DS__BS_TRI_FWD: ds__bs_tri_fwd(a, e, b); break;
    case DS__BS_AERO_FWD: ds__bs_aero_fwd(a, e, b); break;
    case DS__BS_BEND_FWD: ds__bs_bend_fwd(a, e, b); break;
    case DS__BS_TET_FWD: ds__bs_tet_fwd(a, e, b); break;
    case DS__BS_GATHER_FWD: ds__bs_gather_fwd(a, e, b); break;
    case DS__BS_INTEG_BWD: ds__bs_integ_bwd(a, e, b); break;
    case DS__BS_SPRING_BWD: ds__bs_spring_bwd(a, e, b); break;
    case DS__BS_TRI_BWD: ds__bs_tri_bwd(a, e, b); break;
    case DS__BS_AERO_BWD: ds__bs_aero_bwd(a, e, b); break;
    case DS__BS_BEND_BWD: ds__bs_bend_bwd(a, e, b); break;
    case DS__BS_TET_BWD: ds__bs_tet_bwd(a, e, b); break;
    case DS__BS_GATHER_BWD: ds__bs_gather_bwd(a, e, b); break;
    case DS__BS_REDUCE: ds__bs_reduce(a, e, b); break;
    case DS__BS_FINISH: ds__bs_finish(a, e, b); break;
    case DS__BS_CHECK: ds__bs_check(a, e, b); break;
    case DS__BS_RESET: ds__bs_reset(a, e, b); break;
    case DS__BS_ADD_ADJ: ds__bs_add_adj(a, e, b); break;
    default: break;
  }
}

#endif

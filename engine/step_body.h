/* The per-particle bodies of the step (engine/step.c): the forward gather +
 * per-particle models + integrator, and the backward's integrator adjoint
 * (stage A) and gather of the element adjoints (stage C), each for one
 * particle i. The math is in engine/step.c's top comment. Like the element
 * bodies of the force headers they follow the contract of
 * engine/force_loop.h ("Bodies"): a body writes only particle i's entries,
 * so any thread (or a CUDA thread) may run any particle.
 *
 * The per-particle force models (the PARTICLE rows of DS_FORCE_MODELS,
 * engine/forces.h) are called by name, in list order, from code the list
 * generates: a device body cannot call through the table's function
 * pointers. */
#ifndef DSIM_ENGINE_STEP_BODY_H
#define DSIM_ENGINE_STEP_BODY_H

#include "engine/forces.h"

/* Forward of one substep, per particle. */
typedef struct dsStepFwd {
  const dsReal* x;    /* positions at the substep start, nparticle x 3 */
  const dsReal* v;    /* velocities */
  const dsReal* fext; /* external forces; NULL: zero */
  const dsReal* ef;   /* element force slots, nslot x 3 */
  dsReal* f;          /* total force per particle out; NULL: not wanted */
  dsReal* fr;         /* rigid vertices' total force (for their body); used when m->nbody */
  dsReal* xo;         /* new positions (may alias x: particle i reads only its own x[i]) */
  dsReal* vo;         /* new velocities (may alias v) */
  int integrate;      /* 0: forces only (ds_compute_forces) */
} dsStepFwd;

/* Backward of one substep, per particle. */
typedef struct dsStepBwd {
  const dsReal* xt;  /* taped state at the substep start */
  const dsReal* vt;
  const dsReal* vt1; /* taped velocities after the substep */
  const dsReal* aex; /* element dL/dx per slot (stage C input) */
  const dsReal* aev; /* element dL/dv per slot */
  dsReal* adj_x;     /* in: dL/dx', out: dL/dx (stage C adds) */
  dsReal* adj_v;     /* in: dL/dv', out: dL/dv (stage C overwrites) */
  dsReal* av;        /* total adjoint of v' per particle (stage A writes) */
  dsReal* af;        /* dL/d(total force) per particle (stage A writes; rigid: the body stage) */
  dsReal* adj_fext;  /* dL/d f_ext out; NULL: not wanted */
  dsGrad* g;         /* g->mass[i] += (stage A) */
  dsReal* scr[DS__NFORCE]; /* per-particle model k's scratch block (descriptor's scratch reals per
                            * particle); read only for the PARTICLE rows that are on */
} dsStepBwd;

/* Forward: f_i = f_ext_i + incident slots (ascending) + contact; then
 * v'_i, x'_i (or, for a rigid vertex, its force into fr for its body). */
DS_HD DS_INLINE void ds__gather_fwd_particle(const dsModel* m, const dsStepFwd* a, int i) {
  const size_t o = 3 * (size_t)i;
  dsReal fi[3] = {0, 0, 0};
  if (a->fext) {
    fi[0] = a->fext[o];
    fi[1] = a->fext[o + 1];
    fi[2] = a->fext[o + 2];
  }
  for (int s = m->inc_start[i]; s < m->inc_start[i + 1]; s++) {
    const dsReal* fs = a->ef + 3 * (size_t)m->inc_slot[s];
    fi[0] += fs[0];
    fi[1] += fs[1];
    fi[2] += fs[2];
  }
#define DS__PFWD_ROW(row, name, kind, shared, nshared) \
  DS__IF_PART_##kind(if (ds__##name##_on(m)) ds__##name##_pfwd(m, i, a->x, a->v, fi);)
  DS_FORCE_MODELS(DS__PFWD_ROW)
#undef DS__PFWD_ROW
  if (a->f) {
    a->f[o] = fi[0];
    a->f[o + 1] = fi[1];
    a->f[o + 2] = fi[2];
  }
  if (m->nbody && m->particle_body[i] >= 0) { /* a rigid vertex: its body integrates it */
    a->fr[o] = fi[0];
    a->fr[o + 1] = fi[1];
    a->fr[o + 2] = fi[2];
    return;
  }
  if (a->integrate) {
    const dsReal dt = m->dt;
    const dsReal w = m->inv_mass[i], gm = w > 0 ? 1 : 0;
    const dsReal v0 = a->v[o] + dt * (w * fi[0] + m->gravity[0] * gm);
    const dsReal v1 = a->v[o + 1] + dt * (w * fi[1] + m->gravity[1] * gm);
    const dsReal v2 = a->v[o + 2] + dt * (w * fi[2] + m->gravity[2] * gm);
    const dsReal x0 = a->x[o] + dt * v0, x1 = a->x[o + 1] + dt * v1, x2 = a->x[o + 2] + dt * v2;
    a->vo[o] = v0;
    a->vo[o + 1] = v1;
    a->vo[o + 2] = v2;
    a->xo[o] = x0;
    a->xo[o + 1] = x1;
    a->xo[o + 2] = x2;
  }
}

/* Backward stage A: through the integrator (av, af, adj_fext, g->mass[i]). */
DS_HD DS_INLINE void ds__integrate_bwd_particle(const dsModel* m, const dsStepBwd* a, int i) {
  if (m->nbody && m->particle_body[i] >= 0) { /* rigid vertex: af, av set by the body stage */
    if (a->adj_fext)
      for (int c = 0; c < 3; c++) a->adj_fext[3 * (size_t)i + c] = a->af[3 * (size_t)i + c];
    return;
  }
  const dsReal dt = m->dt;
  const dsReal w = m->inv_mass[i];
  dsReal dm = 0;
  for (int c = 0; c < 3; c++) {
    const size_t k = 3 * (size_t)i + c;
    const dsReal ak = a->adj_v[k] + dt * a->adj_x[k];
    a->av[k] = ak;
    a->af[k] = dt * w * ak;
    if (a->adj_fext) a->adj_fext[k] = a->af[k];
    dm += (a->vt1[k] - a->vt[k] - dt * m->gravity[c]) * ak;
  }
  if (w > 0) a->g->mass[i] += -w * dm;
}

/* Backward stage C: the element adjoints of particle i's slots in the
 * forward's order, the per-particle models, into adj_x (+=) and adj_v (=). */
DS_HD DS_INLINE void ds__gather_bwd_particle(const dsModel* m, const dsStepBwd* a, int i) {
  dsReal ax[3] = {0, 0, 0}, avl[3] = {0, 0, 0};
  for (int s = m->inc_start[i]; s < m->inc_start[i + 1]; s++) {
    const size_t o = 3 * (size_t)m->inc_slot[s];
    ax[0] += a->aex[o];
    ax[1] += a->aex[o + 1];
    ax[2] += a->aex[o + 2];
    avl[0] += a->aev[o];
    avl[1] += a->aev[o + 1];
    avl[2] += a->aev[o + 2];
  }
#define DS__PBWD_ROW(row, name, kind, shared, nshared) \
  DS__IF_PART_##kind(if (ds__##name##_on(m))                                    \
                       ds__##name##_pbwd(m, i, a->xt, a->vt, a->af, ax, avl, a->scr[DS__F_##row]);)
  DS_FORCE_MODELS(DS__PBWD_ROW)
#undef DS__PBWD_ROW
  for (int c = 0; c < 3; c++) {
    a->adj_x[3 * (size_t)i + c] += ax[c];
    a->adj_v[3 * (size_t)i + c] = a->av[3 * (size_t)i + c] + avl[c];
  }
}

#endif

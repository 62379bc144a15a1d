/* What a force model gives the step (engine/forces.h lists them; step.c
 * runs them): its element count, its vertex lists, where its activations
 * sit, and its forward and backward loops over the model.
 *
 * Slots. A slot is 3 reals: the force (forward) or the adjoints (backward)
 * of one element on one of its vertices. An element model with nvert
 * vertices per element owns nvert slots per element, element-major
 * (slot base + nvert e + k for vertex k of element e); the bases follow the
 * list order. A model with nvert = 0 owns no slots: as an element model it
 * adds into the slots of the model named by `into` (aero into tri: the
 * lift/drag of triangle e lands in triangle e's three slots); as a
 * per-particle model (contact) it runs inside the per-particle gather.
 *
 * Threads. fwd and bwd are called by every thread of the step's parallel
 * region and share the work with an orphaned `omp for schedule(static)
 * nowait` over the elements; step.c puts the barrier after the last element
 * loop. An element writes only its own slots (or, for an `into` model, the
 * slots of its owner's element with the same index: the static schedule
 * gives both loops the same iteration-to-thread map, because they have the
 * same count and bind to the same parallel region, so the owner's write is
 * this thread's own earlier write). Element parameters get their gradient
 * per element; shared scalars (lift/drag, contact) write per-element
 * partials into scratch, which `reduce` sums serially in element order
 * after the parallel region. Nothing is summed across threads, so every
 * thread count gives the same bits.
 *
 * Bodies. Each loop is a one-line `omp for` over a body that does all the
 * work of one index and exists once, for the CPU loops and for CUDA:
 *   DS_HD DS_INLINE void ds__<model>_fwd_elem(const dsModel* m, const dsForceFwd* a, int e);
 *   DS_HD DS_INLINE void ds__<model>_bwd_elem(const dsModel* m, const dsForceBwd* a, int e);
 * (spring, tri, aero, bend, tet), the per-particle models
 * ds__contact_pfwd/pbwd and ds__rcontact_pfwd/pbwd (engine/force_contact.h,
 * engine/rigid.h), and the step's particle bodies ds__gather_fwd_particle,
 * ds__integrate_bwd_particle, ds__gather_bwd_particle (engine/step_body.h).
 * The contract of a body:
 *   - it reads shared inputs (m's arrays, x, v, af, ...) freely but writes
 *     only its own element's slots (aero: its triangle's slots, which it
 *     adds to), its element's parameter gradients and partials, or, for a
 *     particle body, particle i's entries;
 *   - no atomics, no allocation, no output, no function pointers, no
 *     OpenMP inside: the caller owns the loop and the barriers (element
 *     bodies of all models, then the gather);
 *   - it takes only plain pointers and values (dsModel is a struct of
 *     pointers: a device copy of it with device pointers works), so a CUDA
 *     `__global__` wrapper may call it for one index, with the dsForceFwd /
 *     dsForceBwd / dsStepFwd / dsStepBwd pointers offset per batch member;
 *   - its floating-point operations and their order are those of the CPU
 *     loop (the golden hashes pin them in double).
 * The names and signatures of the bodies are stable; their insides are not.
 * On the CPU (GCC/Clang) the tet loops run DS__TL tets per iteration (4 in
 * double, 8 in the single build: one 32-byte vector) through
 * ds__tet_fwd_elem4 / ds__tet_bwd_elem4 (engine/force_tet.h): the body's
 * operations in the body's order on lane vectors, so the same bits; the
 * scalar body does the remainder and is what CUDA calls. */
#ifndef DSIM_ENGINE_FORCE_LOOP_H
#define DSIM_ENGINE_FORCE_LOOP_H

#include <stddef.h>

#include "dsim/engine.h"
#include "engine/dsmath.h"

/* On the loops (CPU only): inline every body and kernel into the loop, so
 * that nothing is called per element (~10% fewer instructions; the same
 * operations in the same order). */
#if defined(__GNUC__) && !defined(__CUDACC__)
#  define DS__FLATTEN __attribute__((flatten))
#else
#  define DS__FLATTEN
#endif

/* Forward inputs of one model's loop. Pointers are already offset to the
 * model's block. */
typedef struct dsForceFwd {
  const dsReal* x;   /* positions at the substep start, nparticle x 3 */
  const dsReal* v;   /* velocities */
  const dsReal* act; /* the model's activations (count), NULL: all 0 */
  dsReal* ef;        /* the model's (or its owner's) first slot */
  dsReal* J;         /* tet: det F per element (ntet) */
  int* bad;          /* tet loop (CPU): *bad = min(*bad, e) for each e with !(J_e > 0)
                      * (atomic; ds_step's check); NULL: not checked */
} dsForceFwd;

#if !defined(__CUDACC__)
/* *p = min(*p, v), atomically (any thread may find a smaller one) */
static inline void ds__atomic_min_int(int* p, int v) {
#  if defined(__GNUC__)
  int cur = __atomic_load_n(p, __ATOMIC_RELAXED);
  while (v < cur && !__atomic_compare_exchange_n(p, &cur, v, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
#  else
#    pragma omp critical(ds__atomic_min_int)
  if (v < *p) *p = v;
#  endif
}
#endif

/* Backward inputs of one model's loop (pointers offset as above). */
typedef struct dsForceBwd {
  const dsReal* x;   /* taped state at the substep start */
  const dsReal* v;
  const dsReal* act; /* the model's activations, NULL: all 0 */
  const dsReal* af;  /* dL/d(total force) per particle, nparticle x 3 */
  dsReal* aex;       /* the model's first slot of element dL/dx */
  dsReal* aev;       /* ... of element dL/dv */
  dsGrad* g;         /* element parameters: += per element */
  dsReal* adj_act;   /* the model's block of dL/d(act), overwritten; NULL: not wanted */
  dsReal* scratch;   /* the model's per-element partials of shared scalars */
} dsForceBwd;

typedef struct dsForceModel {
  const char* name;
  int (*count)(const dsModel* m);      /* elements (particles for a per-particle model); 0: off */
  int nvert;                           /* vertices = owned slots per element; 0: none */
  const int* (*idx)(const dsModel* m); /* vertex lists (count x nvert) when nvert > 0 */
  int into;                            /* nvert = 0 element model: the list entry whose slots it adds into */
  int act_order;                       /* 1-based position of its block in d->act; 0: no activation */
  size_t scratch;                      /* backward partials of shared scalars, reals per element */
  /* element loops (orphaned omp for nowait); NULL for a per-particle model */
  void (*fwd)(const dsModel* m, const dsForceFwd* a);
  void (*bwd)(const dsModel* m, const dsForceBwd* a);
  /* per-particle model, called in the gather after particle i's slot sum:
   * adds its force into f; backward accumulates into ax, av and writes its
   * partials to scratch (its block, `scratch` reals per particle) */
  void (*pfwd)(const dsModel* m, int i, const dsReal* x, const dsReal* v, dsReal f[3]);
  void (*pbwd)(const dsModel* m, int i, const dsReal* x, const dsReal* v, const dsReal* af, dsReal ax[3],
               dsReal av[3], dsReal* scratch);
  /* serial sum of the scratch block (count x scratch reals) into g; may be NULL */
  void (*reduce)(const dsModel* m, const dsReal* scratch, dsGrad* g);
} dsForceModel;

/* out[3k+c] = a[3 idx[k] + c], k < n */
DS_HD DS_INLINE void ds__gather3(dsReal* out, const dsReal* a, const int* idx, int n) {
  for (int k = 0; k < n; k++) {
    const dsReal* p = a + 3 * (size_t)idx[k];
    out[3 * k] = p[0];
    out[3 * k + 1] = p[1];
    out[3 * k + 2] = p[2];
  }
}

#endif

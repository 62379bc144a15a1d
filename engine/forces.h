/* The force table: the one list of force models, which every driver runs.
 *
 * Each row names a model whose header (engine/force_<name>.h, included
 * below) defines its DS_HD bodies, its CPU loops and its descriptor
 * DS__FORCE_<ROW> (a dsForceModel initializer, see engine/force_loop.h).
 * From this list alone come:
 *   - the serial engine's table ds__forces, slot layout, incidence lists,
 *     activation blocks and scratch (engine/forces.c, engine/step.c);
 *   - the per-particle models called in the gather (engine/step_body.h);
 *   - the batched engine's stages (their enum, counts, bodies, the REDUCE
 *     sums) in engine/batch_body.h, the driver's launch order in
 *     engine/batch_sim.c and the CUDA launcher's kernels (cuda/batch.cu),
 *     which has no list of its own.
 * The list order is the slot order (slot bases are running sums of
 * count x nvert: springs, then triangles, bending edges, tets, so that the
 * incidence lists and the per-particle gather order are those the golden
 * hashes pin) and the order the loops and the batched stages run in; an
 * `into` model comes after its owner. The activation blocks follow
 * act_order instead: [tri | tet | spring].
 *
 * A row is X(ROW, name, kind, shared, nshared):
 *   ROW      DS__F_<ROW> (its index) and DS__FORCE_<ROW> (its descriptor);
 *   name     prefix of its bodies: ds__<name>_fwd_elem / _bwd_elem for an
 *            element model, ds__<name>_on / _count / _pfwd / _pbwd for a
 *            per-particle one (on: a DS_HD test of the model, cheap, as the
 *            gather makes it per particle);
 *   kind     ELEM: element model (owns or adds into slots): a forward and a
 *            backward stage in the batch, DS__BS_<ROW>_FWD / _BWD;
 *            ELEM_J: an ELEM that also writes J (det F) per element, which
 *            the step checks for inversion;
 *            PARTICLE: per-particle model, run inside the gather (serial and
 *            batched) when ds__<name>_on(m), in list order;
 *   shared   SHARED: its backward writes per-element partials of nshared
 *            shared scalars (scratch, nshared reals per element), which the
 *            batch's REDUCE sums in element order and adds through
 *            ds__<name>_shared_add(g, j, sum); the serial engine sums them
 *            with the descriptor's `reduce`. NOSHARED: none that the batch
 *            sums (a serial-only `reduce` may still exist, as rigid contact's
 *            per-body sums; the batch refuses models with rigid bodies).
 *
 * Jacobians. Every ELEM row's header also defines
 *   DS_HD DS_INLINE void ds__<name>_jac_elem(const dsModel* m, const dsForceFwd* a, int e,
 *                                            dsReal* Kx, dsReal* Kv);
 * Kx = -df/dx and Kv = -df/dv of element e's force on its nvert vertices
 * ((3 nvert)^2 each, row-major, rows and columns in the element's vertex
 * order, 3 per vertex; exact: the derivative of the force as the forward
 * computes it, not projected), at a->x, a->v, a->act (a->ef and a->J are
 * not touched), beside ds__<name>_jac (element-local, with the math) in
 * the same header. ds__force_jac (forces.c) is generated from the rows,
 * so a row without the function does not compile; a row that has no
 * Jacobian would define ds__<name>_jac_elem as NULL with its reason. An
 * `into` row (aero) has its owner's vertices (engine/sparse.h,
 * ds__bsr_elem_nvert).
 * Per-particle rows are outside the table: ground contact gives
 * ds__contact_pjac (3 x 3 per particle); rigid contact belongs to the rigid
 * solver. Which parts are symmetric is said per model; Newton's forward
 * solve uses ds__sym_project_psd (engine/dense_small.h) on a block, or
 * ds__spring_jac_proj (closed form).
 *
 * Adding a force model: its header (bodies with the math comment, loops,
 * descriptor, Jacobian), one row here (and its #include), its builder
 * call in model.c, its test (and its case in tests/test_force_jac.c). tests/test_forces.c checks every row against its
 * descriptor and its batched stages. */
#ifndef DSIM_ENGINE_FORCES_H
#define DSIM_ENGINE_FORCES_H

#include "engine/force_loop.h"

#include "engine/force_aero.h"
#include "engine/force_bend.h"
#include "engine/force_contact.h"
#include "engine/force_spring.h"
#include "engine/force_tet.h"
#include "engine/force_tri.h"
#include "engine/rigid.h"

#define DS_FORCE_MODELS(X)                 \
  X(SPRING, spring, ELEM, NOSHARED, 0)     \
  X(TRI, tri, ELEM, NOSHARED, 0)           \
  X(AERO, aero, ELEM, SHARED, 2)           \
  X(BEND, bend, ELEM, NOSHARED, 0)         \
  X(TET, tet, ELEM_J, NOSHARED, 0)         \
  X(CONTACT, contact, PARTICLE, SHARED, 5) \
  X(RIGID_CONTACT, rcontact, PARTICLE, NOSHARED, 0)

/* Selectors on a row's kind and shared columns: DS__IF_ELEM_<kind>(code)
 * keeps code for element models, DS__IF_J_<kind> for ELEM_J,
 * DS__IF_PART_<kind> for per-particle models, DS__IF_SH_<shared> for
 * SHARED rows. */
#define DS__IF_ELEM_ELEM(...) __VA_ARGS__
#define DS__IF_ELEM_ELEM_J(...) __VA_ARGS__
#define DS__IF_ELEM_PARTICLE(...)
#define DS__IF_J_ELEM(...)
#define DS__IF_J_ELEM_J(...) __VA_ARGS__
#define DS__IF_J_PARTICLE(...)
#define DS__IF_PART_ELEM(...)
#define DS__IF_PART_ELEM_J(...)
#define DS__IF_PART_PARTICLE(...) __VA_ARGS__
#define DS__IF_SH_SHARED(...) __VA_ARGS__
#define DS__IF_SH_NOSHARED(...)

enum {
#define DS__FORCE_ID(row, name, kind, shared, nshared) DS__F_##row,
  DS_FORCE_MODELS(DS__FORCE_ID)
#undef DS__FORCE_ID
  DS__NFORCE
};


/* Shared scalars the batch's REDUCE sums per instance: gravity's three
 * components, then each SHARED row's nshared in list order. */
enum { DS__NSHARED = 3
#define DS__FORCE_NSH(row, name, kind, shared, nshared) +(nshared)
       DS_FORCE_MODELS(DS__FORCE_NSH)
#undef DS__FORCE_NSH
};

extern const dsForceModel ds__forces[DS__NFORCE];

/* An ELEM row's ds__<name>_jac_elem ("Jacobians" above). */
typedef void (*dsForceJacFn)(const dsModel* m, const dsForceFwd* a, int e, dsReal* Kx, dsReal* Kv);
/* per row: its element Jacobian; NULL for per-particle rows and for rows
 * that have none */
extern const dsForceJacFn ds__force_jac[DS__NFORCE];

/* Where each model's blocks sit for a model m. */
typedef struct dsForceLayout {
  int count[DS__NFORCE];      /* elements (0: off) */
  int slot[DS__NFORCE];       /* first slot of the slots it writes (owner's for an `into` model) */
  int act[DS__NFORCE];        /* first activation, -1: none */
  size_t scratch[DS__NFORCE]; /* first scratch real */
  long long nslot;            /* slots in all */
  int nact;                   /* activations per substep */
  size_t nscratch;            /* backward scratch reals */
} dsForceLayout;

/* Layout from m's counts and flags (nparticle, nspring, ntri, nbend, ntet,
 * aero, ground); the arrays of m are not read. */
void ds__force_layout(const dsModel* m, dsForceLayout* L);

/* The element adjoints of every model with a backward, in list order, each
 * element into its own slots of aex / aev (layout L), at state (x, v) and
 * activations act from the per-particle force adjoint af. Called by every
 * thread of a parallel region (each model's loop shares its elements); used
 * by the semi-implicit and the implicit backward. */
static inline void ds__forces_bwd_all(const dsModel* m, const dsForceLayout* L, const dsReal* x, const dsReal* v,
                                      const dsReal* act, const dsReal* af, dsReal* aex, dsReal* aev, dsGrad* g,
                                      dsReal* adj_act, dsReal* scr) {
  for (int k = 0; k < DS__NFORCE; k++) {
    const dsForceModel* F = &ds__forces[k];
    if (!F->bwd || !L->count[k]) continue;
    const int ab = L->act[k];
    const dsForceBwd a = {x,
                          v,
                          act && ab >= 0 ? act + ab : NULL,
                          af,
                          aex + 3 * (size_t)L->slot[k],
                          aev + 3 * (size_t)L->slot[k],
                          g,
                          adj_act && ab >= 0 ? adj_act + ab : NULL,
                          scr + L->scratch[k]};
    F->bwd(m, &a);
  }
}

#endif

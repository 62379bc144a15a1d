/* The force table: the one list of force models the step runs.
 *
 * Each row names a model whose header (engine/force_<name>.h, included
 * below) defines its kernels, its loops and its descriptor DS__FORCE_<ROW>
 * (a dsForceModel initializer, see engine/force_loop.h). The list order is
 * the slot order (slot bases are running sums of count x nvert: springs,
 * then triangles, bending edges, tets, so that the incidence lists and the
 * per-particle gather order are those the golden hashes pin) and the order
 * the loops run in; an `into` model comes after its owner. The activation
 * blocks follow act_order instead: [tri | tet | spring].
 *
 * Adding a force model: its header (kernels, math comment, loops,
 * descriptor), one row here (and its #include), its builder call in
 * model.c, its test. The step, the backward, the slot layout, the
 * incidence lists, nslot, nact and the arena size follow from the list. */
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

#define DS_FORCE_MODELS(X) \
  X(SPRING)                \
  X(TRI)                   \
  X(AERO)                  \
  X(BEND)                  \
  X(TET)                   \
  X(CONTACT)               \
  X(RIGID_CONTACT)

enum {
#define DS__FORCE_ID(row) DS__F_##row,
  DS_FORCE_MODELS(DS__FORCE_ID)
#undef DS__FORCE_ID
  DS__NFORCE
};

extern const dsForceModel ds__forces[DS__NFORCE];

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

#endif

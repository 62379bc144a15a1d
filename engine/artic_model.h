/* An articulation inside the particle engine (engine/artic_model.c): the
 * builder's record, finalize, the named parameters, and the substep and its
 * adjoint that engine/step.c calls. Internal. */
#ifndef DSIM_ENGINE_ARTIC_MODEL_H
#define DSIM_ENGINE_ARTIC_MODEL_H

#include "dsim/artic.h"
#include "dsim/engine.h"
#include "base/internal.h"

typedef struct dsBuilderArtic {
  struct dsArticModel* am; /* the builder's copy; NULL: none */
  double *q0, *qd0;        /* nq, nv */
  int nv, cap;             /* vertices added (each a particle, in order) */
  int* link;               /* nv */
  dsReal* r;               /* nv x 3, link frame */
  dsReal* s;               /* nv: weight of anchor_child */
} dsBuilderArtic;

void ds__artic_builder_free(dsBuilderArtic* a);
int ds__artic_builder_set(dsBuilderArtic* a, dsErrBuf* err, const dsArticModel* am, const double* q0,
                          const double* qd0);
int ds__artic_builder_check_link(const dsBuilderArtic* a, dsErrBuf* err, int link, dsReal mass);
int ds__artic_builder_vertex(dsBuilderArtic* a, dsErrBuf* err, int link, const dsReal r[3], dsReal s);
/* finalize's refusals: other particles, elements, rigid bodies, an implicit
 * integrator, single precision, a dt other than the articulation's */
int ds__artic_builder_check(const dsBuilderArtic* a, dsErrBuf* err, dsReal dt, int other, int nelem, int nbody,
                            int implicit);
void ds__artic_counts(const dsBuilderArtic* a, dsModel* counts);
/* m->artic (a copy), its rows, and x0, v0 posed at the initial state */
int ds__artic_finalize(const dsBuilderArtic* a, dsErrBuf* err, dsModel* m);
/* ds_model_set_param of "artic.param" or one articulation name */
int ds__artic_set_param(dsModel* m, dsErrBuf* eb, const char* name, const dsReal* values, int count);

/* Per-data scratch (dsDataPriv.art): allocated at ds_data_create. */
typedef struct dsArticScratch dsArticScratch;
int ds__artic_scratch_create(const dsModel* m, dsArticScratch** out);
void ds__artic_scratch_free(dsArticScratch* s);
/* d->artic_state = (initial_q, initial_qd); x, v posed */
void ds__artic_reset(const dsModel* m, dsData* d);
/* One substep from state s (nq + nv) with actions u (NULL: 0) into so (may alias s);
 * the vertices posed into x, v unless NULL. */
int ds__artic_substep_model(const dsModel* m, dsArticScratch* sc, const dsReal* s, const dsReal* u, dsReal* so,
                            dsReal* x, dsReal* v);
/* The pop of a substep from state s to s1 with actions u: d->adj_x, d->adj_v
 * (of the vertices at s1, then cleared) into d->adj_artic, then through the
 * step; the parameters' gradient into g, the actions' into d->adj_artic_act. */
int ds__artic_bwd(const dsModel* m, dsData* d, dsGrad* g, const dsReal* s, const dsReal* s1, const dsReal* u);
/* At substep 0 (state s0): the vertices' adjoints into the initial state's gradient. */
void ds__artic_finish(const dsModel* m, dsData* d, dsGrad* g, const dsReal* s0);

/* The same on explicit arrays, for the batched engine (engine/batch_artic.c),
 * which runs them per instance with that instance's model view and scratch:
 * the vertices' adjoints adj_x, adj_v (read, then cleared), the state's
 * adjoint adj_artic (nq + nv), the actions' adjoint adj_act (nu, written),
 * the parameters' gradient gparam (nparam, added to). */
int ds__artic_bwd_at(const dsModel* m, dsArticScratch* sc, dsReal* adj_x, dsReal* adj_v, dsReal* adj_artic,
                     dsReal* adj_act, dsReal* gparam, const dsReal* s, const dsReal* s1, const dsReal* u);
void ds__artic_finish_at(const dsModel* m, dsArticScratch* sc, dsReal* adj_x, dsReal* adj_v, dsReal* adj_artic,
                         dsGrad* g, const dsReal* s0);
/* The vertices x, v (may be NULL) posed at state s (nq + nv). */
void ds__artic_pose_state(const dsModel* m, dsArticScratch* sc, const dsReal* s, dsReal* x, dsReal* v);
/* One scratch as a block at base (backend memory, engine/batch_artic.c):
 * its structs written to the image img (NULL: none), pointing into the
 * block; returns the block's bytes. */
size_t ds__artic_scratch_layout(const dsModel* m, void* base, unsigned char* img);
/* Bytes of one scratch (ds__artic_scratch_create), for memory plans. */
size_t ds__artic_scratch_bytes(const dsModel* m);

#endif

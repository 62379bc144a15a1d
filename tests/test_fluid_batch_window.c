/* The batched fluid's set_state, loss terms on earlier states and windows
 * (ds_fluid_batch_set_state, _backward_terms, _backward_window) on the CPU
 * backend, B = 3 instances with different parameters, initial states and
 * force fields; 2-D and 3-D, semi-Lagrangian and MacCormack, full tape and
 * checkpoint_every 4:
 *  (a) backward_terms with terms at steps 13, 0, 24 (the last) and 13
 *      again equals, per instance, the serial ds_fluid_backward_terms with
 *      that instance's parameters, bit for bit (every gradient array);
 *  (b) the windows [8, 24) and [0, 8), chained by the later one's state
 *      adjoint, equal the serial windows bit for bit, and the force rows
 *      outside each window keep what was there;
 *  (c) set_state at step 6 (full tape) and 8 (a checkpoint), then steps,
 *      then the backward: states and gradients the serial engine's after
 *      the same set_state, bit for bit; at step 6 with checkpoints the
 *      whole backward and the window [6, 24) are refused by both engines,
 *      the window [8, 24) equals the serial one; the current state set to
 *      itself leaves no mark, a changed one does, and setting it again
 *      keeps the mark; t out of range, a NaN (named by instance and
 *      element, nothing moves), a window out of range and a term outside
 *      its window or without an array are refused;
 *  (d) central differences of L = sum_b w_b . s_b(24) + the terms' dot
 *      products with the densities at steps 8, 13, 13 and 24 in entries of
 *      the state at step 8 (set with set_state) against the window [8, 24)'s
 *      dL/d(state 8): h = 1e-6, relative 1e-5. */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsim/fluid.h"
#include "tests/dstest.h"
#define FLUIDCHECK_SEED 0x9e3779b97f4a7c15ull
#include "tests/fluidcheck.h"

#define NB 3
#define NSTEP 24
#define NTERM 4
#define SENTINEL 7.25 /* what g->force rows outside a window must keep */


static const char* const kNames[] = {"buoyancy.alpha", "buoyancy.beta", "ambient_temperature", "gravity.x",
                                     "source.0.density_rate", "source.0.velocity.y", "soft.0.position.x",
                                     "soft.0.damping"};
#define NNAMES ((int)(sizeof kNames / sizeof kNames[0]))

/* one model, B instances' initial states, forces, seeds, terms and set_state fields */
typedef struct Case {
  dsFluidModel* m;
  int nv, nc, nfc, np;
  double base[NNAMES];             /* the model's own values */
  double *u0, *r0, *T0, *force;    /* B x nv, B x nc, B x nc, NSTEP x B x nfc */
  double *du, *dr, *dT;            /* seeds dL/d(state 24), B x ... */
  double* term[NTERM];             /* B x nc each */
  double *u1, *r1, *T1;            /* set_state's fields, B x ... */
} Case;

static Case make_case(const dsFluidDef* def) {
  Case c;
  char err[512];
  if (ds_fluid_model_create(def, &c.m, err, sizeof err)) {
    fprintf(stderr, "model: %s\n", err);
    exit(1);
  }
  c.nv = ds_fluid_nvel(c.m), c.nc = ds_fluid_ncell(c.m), c.nfc = c.nc * ds_fluid_dim(c.m);
  c.np = ds_fluid_nparam(c.m);
  for (int k = 0; k < NNAMES; k++) ds_fluid_param_get(c.m, kNames[k], &c.base[k]);
  const size_t nv = (size_t)NB * c.nv, nc = (size_t)NB * c.nc;
  c.u0 = rnd(nv, 0.3), c.r0 = rnd(nc, 0.5), c.T0 = rnd(nc, 0.5);
  c.force = rnd((size_t)NSTEP * NB * c.nfc, 0.5);
  c.du = rnd(nv, 1), c.dr = rnd(nc, 1), c.dT = rnd(nc, 1);
  for (int k = 0; k < NTERM; k++) c.term[k] = rnd(nc, 1);
  c.u1 = rnd(nv, 0.3), c.r1 = rnd(nc, 0.5), c.T1 = rnd(nc, 0.5);
  return c;
}

static void free_case(Case* c) {
  ds_fluid_model_free(c->m);
  double* a[] = {c->u0, c->r0, c->T0, c->force, c->du, c->dr, c->dT, c->u1, c->r1, c->T1};
  for (size_t i = 0; i < sizeof a / sizeof a[0]; i++) free(a[i]);
  for (int k = 0; k < NTERM; k++) free(c->term[k]);
}

static double param_value(const Case* c, int k, int b) { return c->base[k] + 0.07 * b * (1 + 0.3 * k) * (k % 2 ? -1 : 1); }

/* the model's parameters those of instance b (b = -1: its own) */
static void use_instance(Case* c, int b) {
  for (int k = 0; k < NNAMES; k++) ds_fluid_param_set(c->m, kNames[k], b < 0 ? c->base[k] : param_value(c, k, b));
}

static const double* force_at(const Case* c, int t) { return t % 5 == 3 ? NULL : c->force + (size_t)t * NB * c->nfc; }

/* ---- the two engines' episodes ---- */

static void batch_steps(Case* c, dsFluidBatch* fb, int t_end) {
  for (int t = ds_fluid_batch_steps(fb); t < t_end; t++) {
    int rc = ds_fluid_batch_step(fb, force_at(c, t));
    CHECK_INT_EQ(rc, 0);
    if (rc) fprintf(stderr, "batch step %d: %s\n", t, ds_fluid_batch_last_error(fb));
  }
}

static dsFluidBatch* batch_run(Case* c, int every, int t_end) {
  dsFluidBatch* fb = NULL;
  char err[512];
  if (ds_fluid_batch_create(c->m, NB, NSTEP, every, ds_device_cpu(), &fb, err, sizeof err)) {
    fprintf(stderr, "batch: %s\n", err);
    exit(1);
  }
  for (int b = 0; b < NB; b++)
    for (int k = 0; k < NNAMES; k++) ds_fluid_batch_set_param(fb, b, kNames[k], param_value(c, k, b));
  CHECK_INT_EQ(ds_fluid_batch_reset(fb, c->u0, c->r0, c->T0, 1), 0);
  batch_steps(c, fb, t_end);
  return fb;
}

/* instance b's force at step t in the serial layout */
static const double* sforce_at(const Case* c, int b, int t) {
  const double* f = force_at(c, t);
  return f ? f + (size_t)b * c->nfc : NULL;
}

static void serial_steps(Case* c, dsFluidData* d, int b, int t_end) {
  for (int t = ds_fluid_steps(d); t < t_end; t++) CHECK_INT_EQ(ds_fluid_step(c->m, d, sforce_at(c, b, t)), 0);
}

/* the serial engine with instance b's parameters (left on the model until use_instance(c, -1)) */
static dsFluidData* serial_run(Case* c, int b, int every, int t_end) {
  dsFluidData* d = NULL;
  use_instance(c, b);
  CHECK_INT_EQ(ds_fluid_data_create(c->m, NSTEP, every, &d), 0);
  CHECK_INT_EQ(ds_fluid_reset(c->m, d, c->u0 + (size_t)b * c->nv, c->r0 + (size_t)b * c->nc,
                              c->T0 + (size_t)b * c->nc), 0);
  serial_steps(c, d, b, t_end);
  return d;
}

/* instance b's current state in the batch equals d's, bitwise */
static int state_same(Case* c, dsFluidBatch* fb, int b, const dsFluidData* d) {
  const size_t S = (size_t)c->nv + 2 * (size_t)c->nc;
  double* s = malloc(sizeof(double) * S);
  ds_fluid_batch_state(fb, b, s, s + c->nv, s + c->nv + c->nc);
  int same = !memcmp(s, ds_fluid_velocity(d), sizeof(double) * c->nv) &&
             !memcmp(s + c->nv, ds_fluid_density(d), sizeof(double) * c->nc) &&
             !memcmp(s + c->nv + c->nc, ds_fluid_temperature(d), sizeof(double) * c->nc);
  free(s);
  return same;
}

/* ---- gradients ---- */

typedef struct G {
  double *u0, *r0, *T0, *force, *ftot, *par;
} G;

static G galloc(const Case* c, int nb) {
  G g;
  g.u0 = calloc((size_t)nb * c->nv, sizeof(double));
  g.r0 = calloc((size_t)nb * c->nc, sizeof(double));
  g.T0 = calloc((size_t)nb * c->nc, sizeof(double));
  g.force = malloc(sizeof(double) * (size_t)nb * NSTEP * c->nfc);
  for (size_t i = 0; i < (size_t)nb * NSTEP * c->nfc; i++) g.force[i] = SENTINEL;
  g.ftot = calloc((size_t)nb * c->nfc, sizeof(double));
  g.par = calloc((size_t)nb * c->np, sizeof(double));
  return g;
}

static void gfree(G* g) { free(g->u0), free(g->r0), free(g->T0), free(g->force), free(g->ftot), free(g->par); }

static dsFluidGrad as_grad(G* g) {
  dsFluidGrad d = {g->u0, g->r0, g->T0, g->force, g->ftot, g->par};
  return d;
}

/* instance b of the batch's gradients equals the serial ones, bitwise (every force row) */
static int gsame(const Case* c, const G* bat, int b, const G* ser) {
  const size_t nv = (size_t)c->nv, nc = (size_t)c->nc, nf = (size_t)c->nfc, np = (size_t)c->np, D = sizeof(double);
  return !memcmp(bat->u0 + b * nv, ser->u0, nv * D) && !memcmp(bat->r0 + b * nc, ser->r0, nc * D) &&
         !memcmp(bat->T0 + b * nc, ser->T0, nc * D) &&
         !memcmp(bat->force + (size_t)b * NSTEP * nf, ser->force, NSTEP * nf * D) &&
         !memcmp(bat->ftot + b * nf, ser->ftot, nf * D) && !memcmp(bat->par + b * np, ser->par, np * D);
}

/* every force row outside [t0, t1) of nb instances still SENTINEL, and some row inside not */
static int rows_kept(const Case* c, const G* g, int nb, int t0, int t1) {
  int ok = 1, moved = 0;
  for (int b = 0; b < nb; b++)
    for (int t = 0; t < NSTEP; t++)
      for (int i = 0; i < c->nfc; i++) {
        const double x = g->force[((size_t)b * NSTEP + t) * c->nfc + i];
        if (t < t0 || t >= t1) ok &= x == SENTINEL;
        else moved |= x != SENTINEL;
      }
  return ok && (moved || t0 == t1);
}

/* instance b's slice of B x n arrays, NULL stays NULL */
static const double* inst(const double* a, int b, int n) { return a ? a + (size_t)b * n : NULL; }

/* instance b's term arrays of terms (B x nc each) */
static void sterms(const Case* c, int b, int n, const double* const* terms, const double** out) {
  for (int k = 0; k < n; k++) out[k] = terms[k] + (size_t)b * c->nc;
}

/* ---- (a) terms ---- */

static void check_terms(Case* c, const char* what, int every) {
  static const int at[NTERM] = {13, 0, NSTEP, 13};
  const double* const* terms = (const double* const*)c->term;
  dsFluidBatch* fb = batch_run(c, every, NSTEP);
  G bg = galloc(c, NB), sg = galloc(c, 1);
  dsFluidGrad g = as_grad(&bg);
  int rc = ds_fluid_batch_backward_terms(fb, c->du, c->dr, c->dT, NTERM, at, terms, &g);
  CHECK_INT_EQ(rc, 0);
  if (rc) fprintf(stderr, "%s: %s\n", what, ds_fluid_batch_last_error(fb));
  for (int b = 0; b < NB; b++) {
    dsFluidData* d = serial_run(c, b, every, NSTEP);
    const double* st[NTERM];
    sterms(c, b, NTERM, terms, st);
    dsFluidGrad sgr = as_grad(&sg);
    CHECK_INT_EQ(ds_fluid_backward_terms(c->m, d, inst(c->du, b, c->nv), inst(c->dr, b, c->nc),
                                         inst(c->dT, b, c->nc), NTERM, at, st, &sgr), 0);
    const int same = gsame(c, &bg, b, &sg);
    if (!same) fprintf(stderr, "%s: instance %d's terms backward differs from the serial one\n", what, b);
    CHECK(same);
    ds_fluid_data_free(d);
    use_instance(c, -1);
  }
  fprintf(stderr, "%s: backward_terms (at 13, 0, 24, 13) bitwise the serial engine's\n", what);
  gfree(&bg), gfree(&sg);
  ds_fluid_batch_free(fb);
}

/* ---- (b) windows ---- */

static const int kAt2[] = {13, NSTEP, 13}; /* the window [8, 24)'s terms: term 0, 2, 3 */
static const int kAt1[] = {0};             /* the window [0, 8)'s: term 1 */

static void window_terms(const Case* c, const double** t2, const double** t1) {
  t2[0] = c->term[0], t2[1] = c->term[2], t2[2] = c->term[3], t1[0] = c->term[1];
}

/* the batch's or (d != NULL) instance b's serial windows [8, 24) into g2 and [0, 8) into g1 */
static int windows(Case* c, dsFluidBatch* fb, dsFluidData* d, int b, G* g2, G* g1) {
  const double *t2[3], *t1[1], *s2[3], *s1[1];
  window_terms(c, t2, t1);
  dsFluidGrad a2 = as_grad(g2), a1 = as_grad(g1);
  if (!d) {
    int rc = ds_fluid_batch_backward_window(fb, 8, NSTEP, c->du, c->dr, c->dT, 3, kAt2, t2, &a2);
    if (!rc) rc = ds_fluid_batch_backward_window(fb, 0, 8, g2->u0, g2->r0, g2->T0, 1, kAt1, t1, &a1);
    if (rc) fprintf(stderr, "batch window: %s\n", ds_fluid_batch_last_error(fb));
    return rc;
  }
  sterms(c, b, 3, t2, s2);
  sterms(c, b, 1, t1, s1);
  int rc = ds_fluid_backward_window(c->m, d, 8, NSTEP, inst(c->du, b, c->nv), inst(c->dr, b, c->nc),
                                    inst(c->dT, b, c->nc), 3, kAt2, s2, &a2);
  if (!rc) rc = ds_fluid_backward_window(c->m, d, 0, 8, g2->u0, g2->r0, g2->T0, 1, kAt1, s1, &a1);
  return rc;
}

static void check_windows(Case* c, const char* what, int every) {
  dsFluidBatch* fb = batch_run(c, every, NSTEP);
  G b2 = galloc(c, NB), b1 = galloc(c, NB);
  CHECK_INT_EQ(windows(c, fb, NULL, 0, &b2, &b1), 0);
  CHECK(rows_kept(c, &b2, NB, 8, NSTEP));
  CHECK(rows_kept(c, &b1, NB, 0, 8));
  for (int b = 0; b < NB; b++) {
    G s2 = galloc(c, 1), s1 = galloc(c, 1);
    dsFluidData* d = serial_run(c, b, every, NSTEP);
    CHECK_INT_EQ(windows(c, NULL, d, b, &s2, &s1), 0);
    const int same = gsame(c, &b2, b, &s2) && gsame(c, &b1, b, &s1);
    if (!same) fprintf(stderr, "%s: instance %d's windows differ from the serial ones\n", what, b);
    CHECK(same);
    ds_fluid_data_free(d);
    use_instance(c, -1);
    gfree(&s2), gfree(&s1);
  }
  fprintf(stderr, "%s: windows [8, 24) and [0, 8) chained bitwise the serial engine's, other rows kept\n", what);
  gfree(&b2), gfree(&b1);
  ds_fluid_batch_free(fb);
}

/* ---- (c) set_state ---- */

/* both engines: episode to 10, set_state(ts) with c's u1, r1, T1, steps to 24,
 * the backward window [w0, 24) with the terms at 13, 24, 13; with w0 > 0
 * the whole backward and the window from ts must be refused */
static void check_set(Case* c, const char* what, int every, int ts, int w0) {
  const double *t2[3], *t1[1];
  window_terms(c, t2, t1);
  dsFluidBatch* fb = batch_run(c, every, 10);
  CHECK_INT_EQ(ds_fluid_batch_set_state(fb, ts, c->u1, c->r1, c->T1, 1), 0);
  CHECK_INT_EQ(ds_fluid_batch_steps(fb), ts);
  batch_steps(c, fb, NSTEP);
  G bg = galloc(c, NB), sg = galloc(c, 1);
  dsFluidGrad g = as_grad(&bg);
  if (w0 > 0) {
    CHECK_INT_EQ(ds_fluid_batch_backward(fb, c->du, c->dr, c->dT, &g), DS_ERR_RANGE);
    CHECK_STR_CONTAINS(ds_fluid_batch_last_error(fb), "a state was set at step");
    CHECK_INT_EQ(ds_fluid_batch_backward_window(fb, ts, NSTEP, c->du, c->dr, c->dT, 0, NULL, NULL, &g), DS_ERR_RANGE);
  }
  CHECK_INT_EQ(ds_fluid_batch_backward_window(fb, w0, NSTEP, c->du, c->dr, c->dT, 3, kAt2, t2, &g), 0);
  for (int b = 0; b < NB; b++) {
    dsFluidData* d = serial_run(c, b, every, 10);
    CHECK_INT_EQ(ds_fluid_set_state(c->m, d, ts, inst(c->u1, b, c->nv), inst(c->r1, b, c->nc),
                                    inst(c->T1, b, c->nc)), 0);
    serial_steps(c, d, b, NSTEP);
    CHECK(state_same(c, fb, b, d));
    const double* s2[3];
    sterms(c, b, 3, t2, s2);
    dsFluidGrad sgr = as_grad(&sg);
    if (w0 > 0) CHECK_INT_EQ(ds_fluid_backward(c->m, d, NULL, NULL, NULL, &sgr), DS_ERR_RANGE);
    CHECK_INT_EQ(ds_fluid_backward_window(c->m, d, w0, NSTEP, inst(c->du, b, c->nv), inst(c->dr, b, c->nc),
                                          inst(c->dT, b, c->nc), 3, kAt2, s2, &sgr), 0);
    const int same = gsame(c, &bg, b, &sg);
    if (!same) fprintf(stderr, "%s: instance %d differs from the serial engine after set_state(%d)\n", what, b, ts);
    CHECK(same);
    ds_fluid_data_free(d);
    use_instance(c, -1);
  }
  fprintf(stderr, "%s: set_state(%d), steps, window [%d, 24) bitwise the serial engine's%s\n", what, ts, w0,
          w0 ? " (the whole backward refused)" : "");
  gfree(&bg), gfree(&sg);
  ds_fluid_batch_free(fb);
}

/* A backward through a set state: set at 8 (a checkpoint for K = 1 and 4),
 * steps to 24, the whole backward. Step 7's adjoint reads that step's own
 * output (the set state acts as it plus a constant), which a checkpointed
 * tape recomputes; the full tape recomputes it too (the tape at 8 holds
 * the set state), so both give the same gradients bit for bit, in the
 * batch and in the serial engine (before, the full tape read the set state
 * there: buoyancy.alpha's gradient differed in its second digit). */
static void check_set_through(Case* c, const char* what) {
  G bg[2] = {galloc(c, NB), galloc(c, NB)}, sg[2] = {galloc(c, 1), galloc(c, 1)};
  for (int k = 0; k < 2; k++) {
    const int every = k ? 4 : 1;
    dsFluidBatch* fb = batch_run(c, every, 10);
    CHECK_INT_EQ(ds_fluid_batch_set_state(fb, 8, c->u1, c->r1, c->T1, 1), 0);
    batch_steps(c, fb, NSTEP);
    dsFluidGrad g = as_grad(&bg[k]);
    CHECK_INT_EQ(ds_fluid_batch_backward(fb, c->du, c->dr, c->dT, &g), 0);
    ds_fluid_batch_free(fb);
    dsFluidData* d = serial_run(c, 0, every, 10);
    CHECK_INT_EQ(ds_fluid_set_state(c->m, d, 8, c->u1, c->r1, c->T1), 0);
    serial_steps(c, d, 0, NSTEP);
    dsFluidGrad s = as_grad(&sg[k]);
    CHECK_INT_EQ(ds_fluid_backward(c->m, d, c->du, c->dr, c->dT, &s), 0);
    ds_fluid_data_free(d);
    use_instance(c, -1);
  }
  int same = gsame(c, &bg[0], 0, &sg[0]) && gsame(c, &bg[1], 0, &sg[1]);
  for (int b = 0; b < NB; b++) { /* the batch's full tape against its checkpointed one, per instance */
    G one = {bg[1].u0 + (size_t)b * c->nv, bg[1].r0 + (size_t)b * c->nc, bg[1].T0 + (size_t)b * c->nc,
             bg[1].force + (size_t)b * NSTEP * c->nfc, bg[1].ftot + (size_t)b * c->nfc, bg[1].par + (size_t)b * c->np};
    same &= gsame(c, &bg[0], b, &one);
  }
  fprintf(stderr, "%s: set_state(8), steps, whole backward: full tape %s checkpointed, both engines\n", what,
          same ? "=" : "DIFFERS from");
  CHECK(same);
  for (int k = 0; k < 2; k++) gfree(&bg[k]), gfree(&sg[k]);
}

/* The marks of a state set at the current step (checkpoint_every 4): at
 * step 10, each instance's own state again leaves no mark (the backward
 * through 10 runs after a step); at step 11 a changed state set twice (the
 * second time it is the current state unchanged) keeps its mark, and the
 * backward after a step is refused. The serial engine (instance 0) answers
 * the same. */
static void check_marks_here(Case* c) {
  dsFluidBatch* fb = batch_run(c, 4, 10);
  dsFluidData* d = serial_run(c, 0, 4, 10);
  const size_t nv = (size_t)c->nv, nc = (size_t)c->nc;
  double *u = malloc(sizeof(double) * NB * nv), *r = malloc(sizeof(double) * NB * nc),
         *T = malloc(sizeof(double) * NB * nc);
  for (int b = 0; b < NB; b++) ds_fluid_batch_state(fb, b, u + b * nv, r + b * nc, T + b * nc);
  CHECK_INT_EQ(ds_fluid_batch_set_state(fb, 10, u, r, T, 1), 0);
  CHECK_INT_EQ(ds_fluid_set_state(c->m, d, 10, u, r, T), 0); /* instance 0's, the serial one's */
  batch_steps(c, fb, 11);
  serial_steps(c, d, 0, 11);
  CHECK(state_same(c, fb, 0, d));
  G bg = galloc(c, NB), sg = galloc(c, 1);
  dsFluidGrad g = as_grad(&bg), s = as_grad(&sg);
  CHECK_INT_EQ(ds_fluid_batch_backward(fb, c->du, c->dr, c->dT, &g), 0);
  CHECK_INT_EQ(ds_fluid_backward(c->m, d, c->du, c->dr, c->dT, &s), 0);
  CHECK(gsame(c, &bg, 0, &sg));
  for (int k = 0; k < 2; k++) {
    CHECK_INT_EQ(ds_fluid_batch_set_state(fb, 11, c->u1, c->r1, c->T1, 1), 0);
    CHECK_INT_EQ(ds_fluid_set_state(c->m, d, 11, c->u1, c->r1, c->T1), 0);
  }
  batch_steps(c, fb, 12);
  serial_steps(c, d, 0, 12);
  CHECK_INT_EQ(ds_fluid_batch_backward(fb, c->du, c->dr, c->dT, &g), DS_ERR_RANGE);
  CHECK_STR_CONTAINS(ds_fluid_batch_last_error(fb), "a state was set at step 11, not a checkpoint");
  CHECK_INT_EQ(ds_fluid_backward(c->m, d, c->du, c->dr, c->dT, &s), DS_ERR_RANGE);
  free(u), free(r), free(T);
  gfree(&bg), gfree(&sg);
  ds_fluid_data_free(d);
  use_instance(c, -1);
  ds_fluid_batch_free(fb);
}

static void check_refused(Case* c) {
  const double *t2[3], *t1[1];
  window_terms(c, t2, t1);
  dsFluidBatch* fb = batch_run(c, 4, 10);
  G bg = galloc(c, NB);
  dsFluidGrad g = as_grad(&bg);
  CHECK_INT_EQ(ds_fluid_batch_set_state(fb, 11, NULL, NULL, NULL, 0), DS_ERR_RANGE);
  CHECK_STR_CONTAINS(ds_fluid_batch_last_error(fb), "set_state: step 11 (expected a step in [0, 10]");
  CHECK_INT_EQ(ds_fluid_batch_set_state(fb, -1, NULL, NULL, NULL, 0), DS_ERR_RANGE);
  const size_t S = (size_t)c->nv + 2 * (size_t)c->nc;
  double *before = malloc(sizeof(double) * S), *after = malloc(sizeof(double) * S);
  ds_fluid_batch_state(fb, 2, before, before + c->nv, before + c->nv + c->nc);
  c->r1[2 * c->nc + 3] = NAN; /* instance 2's density, element 3 */
  CHECK_INT_EQ(ds_fluid_batch_set_state(fb, 4, c->u1, c->r1, c->T1, 1), DS_ERR_INVALID);
  CHECK_STR_CONTAINS(ds_fluid_batch_last_error(fb), "set_state: density of instance 2, element 3 is nan");
  c->r1[2 * c->nc + 3] = 0.25;
  CHECK_INT_EQ(ds_fluid_batch_steps(fb), 10); /* nothing moved */
  ds_fluid_batch_state(fb, 2, after, after + c->nv, after + c->nv + c->nc);
  CHECK(!memcmp(before, after, sizeof(double) * S));
  CHECK_INT_EQ(ds_fluid_batch_backward_window(fb, 8, 11, NULL, NULL, NULL, 0, NULL, NULL, &g), DS_ERR_RANGE);
  CHECK_STR_CONTAINS(ds_fluid_batch_last_error(fb), "backward window: steps [8, 11) (expected 0 <= t0 <= t1 <= 10");
  CHECK_INT_EQ(ds_fluid_batch_backward_window(fb, 9, 8, NULL, NULL, NULL, 0, NULL, NULL, &g), DS_ERR_RANGE);
  static const int at5[] = {5}, at9[] = {9};
  CHECK_INT_EQ(ds_fluid_batch_backward_window(fb, 8, 10, NULL, NULL, NULL, 1, at5, t1, &g), DS_ERR_INVALID);
  CHECK_STR_CONTAINS(ds_fluid_batch_last_error(fb), "term 0: at 5 (expected a step in [8, 10]");
  const double* none[1] = {NULL};
  CHECK_INT_EQ(ds_fluid_batch_backward_terms(fb, NULL, NULL, NULL, 1, at9, none, &g), DS_ERR_INVALID);
  CHECK_STR_CONTAINS(ds_fluid_batch_last_error(fb), "term 0: at 9 (expected a step in [0, 10] and an array)");
  CHECK_INT_EQ(ds_fluid_batch_backward_terms(fb, NULL, NULL, NULL, 1, NULL, t1, &g), DS_ERR_INVALID);
  CHECK_INT_EQ(ds_fluid_batch_backward_window(fb, 8, 10, NULL, NULL, NULL, 1, at9, t1, &g), 0);
  free(before), free(after);
  gfree(&bg);
  ds_fluid_batch_free(fb);
}

/* ---- (d) central differences ---- */

static const int kAtFd[NTERM] = {8, 13, 13, NSTEP};

static double dot(const double* a, const double* b, int n) {
  double s = 0;
  for (int i = 0; i < n; i++) s += a[i] * b[i];
  return s;
}

/* the terms at step t with every instance's density */
static double terms_at(const Case* c, dsFluidBatch* fb, int t, double* rho) {
  double l = 0;
  for (int k = 0; k < NTERM; k++)
    if (kAtFd[k] == t)
      for (int b = 0; b < NB; b++) {
        ds_fluid_batch_state(fb, b, NULL, rho, NULL);
        l += dot(c->term[k] + (size_t)b * c->nc, rho, c->nc);
      }
  return l;
}

/* L after set_state(8, u8, r8, T8) and the steps to 24 */
static double fd_loss(Case* c, dsFluidBatch* fb, const double* u8, const double* r8, const double* T8) {
  double *u = malloc(sizeof(double) * c->nv), *r = malloc(sizeof(double) * c->nc), *T = malloc(sizeof(double) * c->nc);
  CHECK_INT_EQ(ds_fluid_batch_set_state(fb, 8, u8, r8, T8, 1), 0);
  double l = terms_at(c, fb, 8, r);
  for (int t = 8; t < NSTEP; t++) {
    CHECK_INT_EQ(ds_fluid_batch_step(fb, force_at(c, t)), 0);
    l += terms_at(c, fb, t + 1, r);
  }
  for (int b = 0; b < NB; b++) {
    ds_fluid_batch_state(fb, b, u, r, T);
    l += dot(c->du + (size_t)b * c->nv, u, c->nv) + dot(c->dr + (size_t)b * c->nc, r, c->nc) +
         dot(c->dT + (size_t)b * c->nc, T, c->nc);
  }
  free(u), free(r), free(T);
  return l;
}

/* Entries of dL/d(state 8) from the window [8, 24) against central
 * differences (h = 1e-6, relative 1e-5). Adding the terms one step late in
 * the sweep (add_terms at t instead of t + 1), or leaving out the terms at
 * t0, makes this check fail (tried); it also asserts that 1.01 times each
 * adjoint would fail it. */
static void check_fd(void) {
  dsFluidDef def = base_def(12, 1);
  def.tolerance = 1e-12;
  Case c = make_case(&def);
  const size_t nv = (size_t)c.nv, nc = (size_t)c.nc;
  dsFluidBatch* fb = batch_run(&c, 1, 8);
  double *u8 = malloc(sizeof(double) * NB * nv), *r8 = malloc(sizeof(double) * NB * nc),
         *T8 = malloc(sizeof(double) * NB * nc);
  for (int b = 0; b < NB; b++) ds_fluid_batch_state(fb, b, u8 + b * nv, r8 + b * nc, T8 + b * nc);
  const double l0 = fd_loss(&c, fb, u8, r8, T8);
  G g = galloc(&c, NB);
  dsFluidGrad dg = as_grad(&g);
  CHECK_INT_EQ(ds_fluid_batch_backward_window(fb, 8, NSTEP, c.du, c.dr, c.dT, NTERM, kAtFd,
                                              (const double* const*)c.term, &dg), 0);
  /* instance 1's density at cell (6, 3), instance 2's x-face (3, 3), instance 0's temperature at (2, 9) */
  double* field[] = {r8 + nc + 42, u8 + 2 * nv + 3 + 13 * 3, T8 + 2 + 12 * 9};
  const double ad[] = {g.r0[nc + 42], g.u0[2 * nv + 3 + 13 * 3], g.T0[2 + 12 * 9]};
  const char* name[] = {"density[1][42]", "velocity[2][42]", "temperature[0][110]"};
  const double h = 1e-6;
  for (int k = 0; k < 3; k++) {
    const double x = *field[k];
    *field[k] = x + h;
    const double lp = fd_loss(&c, fb, u8, r8, T8);
    *field[k] = x - h;
    const double lm = fd_loss(&c, fb, u8, r8, T8);
    *field[k] = x;
    const double fd = (lp - lm) / (2 * h), tol = 1e-5 * fabs(fd) + 1e-8;
    fprintf(stderr, "fd dL/d %s at step 8: adjoint %.10g, central difference %.10g\n", name[k], ad[k], fd);
    CHECK(fabs(ad[k] - fd) <= tol);
    CHECK(fabs(fd) > 1e-3);
    CHECK(fabs(1.01 * ad[k] - fd) > tol); /* a 1 % error would be caught */
  }
  CHECK(fabs(fd_loss(&c, fb, u8, r8, T8) - l0) == 0); /* set_state rewinds exactly */
  free(u8), free(r8), free(T8);
  gfree(&g);
  ds_fluid_batch_free(fb);
  free_case(&c);
}

static void run_def(const char* what, const dsFluidDef* def) {
  char name[160];
  for (int every = 1; every <= 4; every += 3) {
    Case c = make_case(def);
    snprintf(name, sizeof name, "%s, checkpoint_every %d", what, every);
    check_terms(&c, name, every);
    check_windows(&c, name, every);
    if (every == 1) {
      check_set(&c, name, 1, 6, 0);
      check_set_through(&c, what);
    } else {
      check_set(&c, name, 4, 8, 0);
      check_set(&c, name, 4, 6, 8);
    }
    free_case(&c);
  }
}

int main(void) {
  dsFluidDef def = base_def(12, 1);
  run_def("2-D SL", &def);
  def.advection = DS_FLUID_MACCORMACK;
  def.boundary[0] = DS_FLUID_PERIODIC;
  def.boundary[1] = DS_FLUID_OPEN;
  run_def("2-D MacCormack", &def);
  def = base_def(6, 6);
  def.dx = 1.0 / 6;
  run_def("3-D SL", &def);
  def.advection = DS_FLUID_MACCORMACK;
  run_def("3-D MacCormack", &def);
  def = base_def(12, 1);
  Case c = make_case(&def);
  check_marks_here(&c);
  check_refused(&c);
  free_case(&c);
  check_fd();
  return DST_RESULT();
}

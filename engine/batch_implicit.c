/* The implicit integrator in the batched engine (engine/batch_implicit.h):
 * the per-instance contexts, and the stages DS__BS_IMPLICIT_FWD / _BWD of
 * engine/batch_body.h. Each stage is, for instance b, the call
 * engine/step.c makes for a dsData of a model with m->integrator ==
 * DS_INTEGRATOR_IMPLICIT (ds__implicit_substep, ds__implicit_bwd) on b's
 * model view (its parameters are b's) with b's own workspace and b's rows
 * of the batch's arrays: the same functions on the same inputs, so the
 * same bits as ds_step / ds_backward_step on a model with b's parameters.
 * Their sums are fixed-order whatever the thread count (engine/sparse.h),
 * and instances share nothing writable, so the CPU backend's loop over the
 * instances gives those bits for any thread count and schedule.
 *
 * What the batch adds. The control adjoints: ds__implicit_bwd writes one
 * substep's dL/d(act) and dL/d(f_ext) (= af = h lambda, 0 at fixed
 * particles); the stage adds them to the sums over the call's substeps, as
 * DS__BS_ACCUMULATE does for the semi-implicit step and as a caller adding
 * ds_backward_step's per-substep adjoints would. Failures: a Newton solve
 * that fails leaves the instance's state NaN from that substep on, without
 * solving again (a failed solve costs newton_max_iter iterations; the
 * serial engine refuses to step a failed data), and its message is the
 * serial engine's, kept per instance for the driver's report
 * (engine/batch_sim.c, check()); likewise an adjoint solve that fails. */
#include "config.h"

#include <limits.h>
#include <math.h>
#include <string.h>

#include "base/internal.h"
#include "engine/batch_implicit.h"
#include "engine/batch_priv.h"
#include "engine/forces.h"
#include "engine/sparse.h"

void ds__batch_implicit_free(dsBatchImplicit* p) {
  if (!p) return;
  for (int b = 0; b < p->B && p->w; b++) ds__implicit_free(p->w[b]);
  ds__free(p->w);
  ds__free(p->eb);
  ds__free(p->fail);
  ds__free(p->bfail);
  ds__free(p->zero);
  ds__free(p);
}

dsBatchImplicit* ds__batch_implicit_create(const dsModel* m, int B) {
  dsBatchImplicit* p = (dsBatchImplicit*)ds__calloc(1, sizeof *p);
  if (!p) return NULL;
  p->B = B;
  const size_t n3 = 3 * (size_t)m->nparticle, nz = n3 > (size_t)m->nact ? n3 : (size_t)m->nact;
  p->w = (dsImplicit**)ds__calloc((size_t)B, sizeof(dsImplicit*));
  p->eb = (dsErrBuf*)ds__calloc((size_t)B, sizeof(dsErrBuf));
  p->fail = (int*)ds__calloc((size_t)B, sizeof(int));
  p->bfail = (int*)ds__calloc((size_t)B, sizeof(int));
  p->zero = (dsReal*)ds__calloc(nz + 1, sizeof(dsReal));
  if (!p->w || !p->eb || !p->fail || !p->bfail || !p->zero) {
    ds__batch_implicit_free(p);
    return NULL;
  }
  for (int b = 0; b < B; b++)
    if (ds__implicit_create(m, &p->w[b])) {
      ds__batch_implicit_free(p);
      return NULL;
    }
  ds__batch_implicit_clear(p, -1, 0);
  return p;
}

void ds__batch_implicit_clear(dsBatchImplicit* p, int b, int backward) {
  if (!p) return;
  const int b0 = b < 0 ? 0 : b, b1 = b < 0 ? p->B : b + 1;
  for (int k = b0; k < b1; k++) {
    if (!backward) p->fail[k] = -1;
    p->bfail[k] = -1;
    if (p->fail[k] < 0) ds__clearerr(&p->eb[k]); /* a forward failure's message stays with it */
  }
}

/* An upper bound of what ds__implicit_create allocates for m (engine/sparse.c's
 * pattern, sources and buffers, engine/implicit.c's vectors): the element
 * pairs as if no two elements shared a vertex pair. */
size_t ds__batch_implicit_bytes(const dsModel* m) {
  if (m->integrator != DS_INTEGRATOR_IMPLICIT) return 0;
  const size_t np = (size_t)m->nparticle, n3 = 3 * np, R = sizeof(dsReal);
  size_t nnzb, nsrc, njac;
  ds__bsr_bounds(m, &nnzb, &nsrc, &njac);
  const size_t bsr = sizeof(dsBlockSparse) + nnzb * (18 * R + 3 * sizeof(int)) + 2 * DS__BSR_PAD * R +
                     (np + 1) * sizeof(int) +
                     np * (sizeof(int) + 9 * R) + njac * R + 8 * n3 * R + (n3 / DS__BSR_CHUNK + 1) * R +
                     nsrc * (sizeof(size_t) + 1);
  return bsr + 11 * n3 * R + 256 /* dsImplicit */ + sizeof(dsErrBuf) + 2 * sizeof(int) + sizeof(dsImplicit*);
}

static void fill_nan(dsReal* p, size_t n) {
  for (size_t k = 0; k < n; k++) p[k] = (dsReal)NAN;
}

/* ds_step's implicit substep for instance b: (x, v) at t into (xo, vo),
 * and the checkpoint copy (xc, vc); a tet with J <= 0 at the new state
 * flagged as the semi-implicit gather flags it. */
static void implicit_fwd(const dsBatchArgs* a, dsBatchImplicit* P, int b) {
  const dsModel* m = a->mv + b;
  const size_t n3 = 3 * (size_t)a->np, o = (size_t)b * n3;
  dsReal *xo = a->xo + o, *vo = a->vo + o;
  int bad_tet = INT_MAX;
  if (P->fail[b] >= 0 && a->t >= P->fail[b]) { /* failed earlier: no state */
    fill_nan(xo, n3);
    fill_nan(vo, n3);
  } else {
    const dsReal* act = a->act ? a->act + (size_t)b * a->nact : P->zero;
    const dsReal* fext = a->fext ? a->fext + o : P->zero;
    const int rc = ds__implicit_substep(m, P->w[b], a->x + o, a->v + o, act, fext, xo, vo,
                                        a->ef + DS__BS3(a, b), a->J + (size_t)b * a->ntet, &bad_tet, &P->eb[b], a->t);
    if (rc) {
      P->fail[b] = a->t;
      fill_nan(xo, n3);
      fill_nan(vo, n3);
      bad_tet = INT_MAX;
    }
  }
  if (a->xc) {
    memcpy(a->xc + o, xo, n3 * sizeof(dsReal));
    memcpy(a->vc + o, vo, n3 * sizeof(dsReal));
  }
  if (a->bad && bad_tet != INT_MAX) {
    int* cell = a->bad + (size_t)b * (a->ntet + a->np) + bad_tet;
    if (*cell == 0) *cell = a->t + 1;
  }
}

/* ds_backward_step's implicit adjoint for instance b: x, v hold the states
 * t, t + 1, ... (B x n3 apart); adj_x, adj_v dL/d(state t + 1) in, dL/d(state t) out;
 * this substep's control adjoints added to the call's sums. */
static void implicit_bwd(const dsBatchArgs* a, dsBatchImplicit* P, int b) {
  const dsModel* m = a->mv + b;
  const size_t n3 = 3 * (size_t)a->np, o = (size_t)b * n3, bn = (size_t)a->B * n3;
  dsReal* aat = a->adj_act_t ? a->adj_act_t + (size_t)b * a->nact : NULL;
  dsReal* af = a->af + o;
  int ok = P->fail[b] < 0 && P->bfail[b] < 0; /* a failed instance's adjoints are meaningless: NaN */
  if (ok) {
    const dsReal* act = a->act ? a->act + (size_t)b * a->nact : P->zero;
    const int rc = ds__implicit_bwd(m, P->w[b], a->x + o, a->v + o, a->x + bn + o, a->v1 + o, act, a->adj_x + o,
                                    a->adj_v + o, a->gv + b, aat, NULL, af, a->aex + DS__BS3(a, b),
                                    a->aev + DS__BS3(a, b), a->scratch + (size_t)b * a->nscr, &P->eb[b], a->t);
    if (rc) P->bfail[b] = a->t;
    ok = rc == 0;
  }
  if (!ok) {
    fill_nan(a->adj_x + o, n3);
    fill_nan(a->adj_v + o, n3);
    fill_nan(af, n3);
    if (aat) fill_nan(aat, (size_t)a->nact);
  }
  if (a->adj_act && aat)
    for (int k = 0; k < a->nact; k++) a->adj_act[(size_t)b * a->nact + k] += aat[k];
  if (a->adj_fext) /* ds__implicit_bwd's adj_fext is af itself */
    for (size_t k = 0; k < n3; k++) a->adj_fext[o + k] += af[k];
}

void ds__bs_implicit(int stage, const dsBatchArgs* a, int b) {
  dsBatchImplicit* P = (dsBatchImplicit*)a->imp;
  if (stage == DS__BS_IMPLICIT_FWD) implicit_fwd(a, P, b);
  if (stage == DS__BS_IMPLICIT_BWD) implicit_bwd(a, P, b);
}

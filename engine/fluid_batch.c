/* The batched fluid (dsim/fluid.h ds_fluid_batch_*): memory on a backend,
 * the order of the stages of engine/fluid_batch_body.h, and the CPU
 * backend's launcher. Backend-neutral, so the CPU tests run every stage
 * and offset the CUDA backend runs.
 *
 * A step is ds_fluid_step's (engine/fluid.c) for every instance: the CFL
 * check, stage 0, the advection, sources and forces, the projection (PCG
 * with MIC(0), no FFT) and the NaN check. The solve's iterations run until
 * every instance has met its tolerance or failed; an instance that is done
 * skips the rest, so each runs exactly the iterations the serial solve
 * runs. The driver reads B x DSF_NSC scalars back once per iteration (a
 * sync on CUDA) to know when to stop.
 *
 * The backward is the serial sweep (terms, windows) and set_state the
 * serial rule for checkpoints (engine/fluid.c), on the batch's one tape. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/backend.h"
#include "engine/fluid_batch_body.h"
#include "engine/fluid_priv.h"

/* ---- the host backend's launches (base/backend.h) ---------------------- */
/* Below this much work a stage runs on one thread (entering a team costs
 * more than a small stage): the pairs, or for a stage of one pair per
 * instance (a serial sweep over the grid) B times the cells. */
#define DSF_PAR_MIN 2048

/* Every pair writes only its own cells: any schedule gives the same bits.
 * One loop per stage, so the stage's switch folds away inside it (as the
 * CUDA backend's template kernels do), over (instance, index) without a
 * division per pair. */
#ifdef _OPENMP
#define DSF_HOST_FOR _Pragma("omp parallel for collapse(2) schedule(static) if (par)")
#else
#define DSF_HOST_FOR
#endif
#define DSF_HOST_CASE(S)                                                                    \
  case S: {                                                                                 \
    DSF_HOST_FOR                                                                            \
    for (int b = 0; b < B; b++)                                                             \
      for (int e = 0; e < count; e++) dsf_bstage_run(S, a, e, b);                           \
  } break;

int ds__host_fluid_run(void* ctx, int stage, const dsFluidBatchArgs* a, int count, int B) {
  (void)ctx;
  const long long n = (long long)count * B;
  const long long work = count == 1 ? (long long)B * a->v.ncell : n;
  const int par = work >= DSF_PAR_MIN && B * (long long)count > 1;
  (void)par;
  switch (stage) {
    DSF_BS_STAGES(DSF_HOST_CASE)
    default: return DS_ERR_INVALID;
  }
  return 0;
}

/* ---- the driver ---------------------------------------------------------- */
#define DSF_MAXBLK 40

struct dsFluidBatch {
  const dsFluidModel* m;
  const dsBackend* be;
  void* ctx;
  dsFluidBatchArgs a; /* every array in backend memory */
  int B, S, np, steps, every, nslot, t;
  double* slots;  /* nslot x B x S: states 0, K, 2K, ... */
  double* forces; /* steps x B x ncell x dim (def.force_field) */
  double* seg;    /* (K + 1) x B x S: a recomputed segment (K > 1) */
  int seg_start;
  double* g1;     /* B x S: the backward's running adjoint */
  double* gf_h;   /* B x ncell x dim: a step's force adjoint on the host */
  double* par_d;  /* B x np on the backend (a.par) */
  double* par_h;  /* B x np: the parameter values */
  double* sc_h;   /* B x DSF_NSC: the last step's scalars */
  double* stage_h; /* S: a state on its way to the backend */
  double* cmp_h;   /* S: a state read back (set_state's comparison) */
  double* term_d;  /* B x ncell on the backend: a loss term on its way to g1 */
  unsigned char* setmark; /* steps + 1: states set off a checkpoint (ds_fluid_set_state's rule) */
  unsigned char* setat;   /* steps + 1: states set at all (the step before is recomputed in a backward) */
  int par_dirty;
  size_t bytes;
  void* blk[DSF_MAXBLK];
  int nblk;
  dsErrBuf err;
};

static void* take(dsFluidBatch* fb, size_t bytes) {
  void* p = fb->nblk < DSF_MAXBLK ? fb->be->alloc(fb->ctx, bytes ? bytes : 1) : NULL;
  if (p) {
    fb->blk[fb->nblk++] = p;
    fb->bytes += bytes;
  }
  return p;
}

/* an array of n elements of `size` bytes on the backend, a copy of src */
static void* take_copy(dsFluidBatch* fb, const void* src, size_t n, size_t size, int* rc) {
  void* p = take(fb, n * size);
  if (!p) *rc = DS_ERR_NOMEM;
  else if (!*rc && n)
    *rc = fb->be->put(fb->ctx, p, src, n * size);
  return p;
}

void ds_fluid_batch_free(dsFluidBatch* fb) {
  if (!fb) return;
  for (int i = 0; i < fb->nblk; i++) fb->be->release(fb->ctx, fb->blk[i]);
  if (fb->ctx) fb->be->close(fb->ctx);
  ds__free(fb->par_h);
  ds__free(fb->sc_h);
  ds__free(fb->stage_h);
  ds__free(fb->cmp_h);
  ds__free(fb->setmark);
  ds__free(fb->setat);
  ds__free(fb->gf_h);
  ds__free(fb);
}

const char* ds_fluid_batch_last_error(const dsFluidBatch* fb) { return fb ? ds__errmsg(&fb->err) : ""; }
int ds_fluid_batch_size(const dsFluidBatch* fb) { return fb ? fb->B : 0; }
int ds_fluid_batch_steps(const dsFluidBatch* fb) { return fb ? fb->t : 0; }

static int be_fail(dsFluidBatch* fb, int rc, const char* what) {
  return ds__seterr(&fb->err, rc ? rc : DS_ERR_CUDA, "fluid batch (%s): %s failed: %s", fb->be->name, what,
                    fb->be->last_error(fb->ctx));
}

static int run(dsFluidBatch* fb, int stage) {
  const int count = dsf_bstage_count(&fb->a, stage);
  int rc = count > 0 ? fb->be->run_fluid(fb->ctx, stage, &fb->a, count, fb->B) : 0;
  return rc ? be_fail(fb, rc, "a stage launch") : 0;
}

/* FAxis entries of the model's interpolation tables (fluid.c build_vtab) */
static size_t vtab_len(const dsFluidModel* m) {
  const FGrid* gs[4] = {&m->faceg[0], &m->faceg[1], &m->faceg[2], &m->cellg};
  size_t n = 0;
  for (int gi = 0; gi < 4; gi++)
    if (gs[gi]->np)
      for (int d = 0; d < m->dim; d++) n += (size_t)m->dim * (size_t)gs[gi]->cnt[d];
  return n;
}

/* the model's shared arrays onto the backend, into a->v */
static int upload_model(dsFluidBatch* fb) {
  const dsFluidModel* m = fb->m;
  dsFluidView* v = &fb->a.v;
  const size_t nc = (size_t)m->ncell, nv = (size_t)m->nvel;
  int rc = 0;
  *v = m->view;
  v->par = NULL;
  v->solid = (const unsigned char*)take_copy(fb, m->solid, nc, 1, &rc);
  v->active = (const unsigned char*)take_copy(fb, m->active, nv, 1, &rc);
  v->src_cell = (const unsigned char*)take_copy(fb, m->src_cell, nc, 1, &rc);
  v->insys = (const unsigned char*)take_copy(fb, m->insys, nc, 1, &rc);
  v->src_face = (const signed char*)take_copy(fb, m->src_face, nv, 1, &rc);
  v->nbr = (const int*)take_copy(fb, m->nbr, 6 * nc, sizeof(int), &rc);
  v->diag = (const int*)take_copy(fb, m->diag, nc, sizeof(int), &rc);
  v->precon = (const double*)take_copy(fb, m->precon, nc, sizeof(double), &rc);
  v->vtab = (const FAxis*)take_copy(fb, m->vtab_mem, vtab_len(m), sizeof(FAxis), &rc);
  return rc;
}

/* the per-instance arrays on the backend */
static int alloc_instances(dsFluidBatch* fb) {
  dsFluidBatchArgs* a = &fb->a;
  const dsFluidModel* m = fb->m;
  const size_t B = (size_t)fb->B, S = (size_t)fb->S, nc = (size_t)m->ncell;
  a->B = fb->B, a->S = fb->S;
  a->nb = (m->ncell + FL_BLK - 1) / FL_BLK;
  a->nbs = (fb->S + FL_BLK - 1) / FL_BLK;
  a->nbv = (m->nvel + FL_BLK - 1) / FL_BLK;
  a->nbk = a->nbs; /* S >= ncell, nvel */
  double** bs[] = {&a->cur, &a->nxt, &a->spen, &a->hat, &a->back};
  for (size_t i = 0; i < sizeof bs / sizeof bs[0]; i++) *bs[i] = (double*)take(fb, B * S * sizeof(double));
  double** bc[] = {&a->pi, &a->r, &a->z, &a->s, &a->as};
  for (size_t i = 0; i < sizeof bc / sizeof bc[0]; i++) *bc[i] = (double*)take(fb, B * nc * sizeof(double));
  a->blk = (double*)take(fb, B * (size_t)a->nbk * sizeof(double));
  a->sc = (double*)take(fb, B * DSF_NSC * sizeof(double));
  double* par = (double*)take(fb, B * (size_t)fb->np * sizeof(double));
  a->par = fb->par_d = par;
  fb->slots = (double*)take(fb, (size_t)fb->nslot * B * S * sizeof(double));
  if (m->def.force_field) fb->forces = (double*)take(fb, (size_t)fb->steps * B * nc * (size_t)m->dim * sizeof(double));
  const size_t nfc = nc * (size_t)m->dim;
  double** gs[] = {&a->g0, &fb->g1, &a->ghat, &a->gback};
  for (size_t i = 0; i < sizeof gs / sizeof gs[0]; i++) *gs[i] = (double*)take(fb, B * S * sizeof(double));
  a->gf = (double*)take(fb, B * nfc * sizeof(double));
  a->gpar = (double*)take(fb, B * (size_t)fb->np * sizeof(double));
  a->term = fb->term_d = (double*)take(fb, B * nc * sizeof(double));
  fb->seg = (double*)take(fb, (size_t)(fb->every + 1) * B * S * sizeof(double));
  fb->gf_h = (double*)ds__calloc(B * nfc + 1, sizeof(double));
  fb->par_h = (double*)ds__calloc(B * (size_t)fb->np + 1, sizeof(double));
  fb->sc_h = (double*)ds__calloc(B * DSF_NSC, sizeof(double));
  fb->stage_h = (double*)ds__calloc(S, sizeof(double));
  fb->cmp_h = (double*)ds__calloc(S, sizeof(double));
  fb->setmark = (unsigned char*)ds__calloc((size_t)fb->steps + 1, 1);
  fb->setat = (unsigned char*)ds__calloc((size_t)fb->steps + 1, 1);
  if (!a->cur || !a->nxt || !a->spen || !a->hat || !a->back || !a->pi || !a->r || !a->z || !a->s || !a->as ||
      !a->blk || !a->sc || !par || !fb->slots || (m->def.force_field && !fb->forces) || !fb->par_h || !fb->sc_h ||
      !fb->stage_h || !a->g0 || !fb->g1 || !a->ghat || !a->gback || !a->gf || !a->gpar ||
      !fb->seg || !fb->gf_h || !fb->term_d || !fb->cmp_h || !fb->setmark || !fb->setat)
    return DS_ERR_NOMEM;
  for (int b = 0; b < fb->B; b++)
    for (int i = 0; i < fb->np; i++) fb->par_h[(size_t)b * fb->np + i] = *m->pptr[i];
  fb->par_dirty = 1;
  return 0;
}

static int create_args(const dsFluidModel* m, int B, int steps, char* err, size_t errlen) {
  if (!m) return ds__puterr(err, errlen, DS_ERR_INVALID, "fluid batch: model is NULL");
  if (B < 1) return ds__puterr(err, errlen, DS_ERR_INVALID, "fluid batch: B = %d instances (expected >= 1)", B);
  if (steps < 0) return ds__puterr(err, errlen, DS_ERR_INVALID, "fluid batch: steps = %d (expected >= 0)", steps);
  if (m->fft)
    return ds__puterr(err, errlen, DS_ERR_INVALID,
                      "fluid batch: the model's pressure solves go through the FFT (solver auto on a domain without "
                      "solids); the batch solves with PCG only: set solver = pcg (1) in the model");
  return 0;
}

int ds_fluid_batch_create(const dsFluidModel* m, int B, int steps, int checkpoint_every, dsDevice device,
                          dsFluidBatch** out, char* err, size_t errlen) {
  if (!out) return ds__puterr(err, errlen, DS_ERR_INVALID, "fluid batch: out is NULL");
  *out = NULL;
  int rc = create_args(m, B, steps, err, errlen);
  if (!rc) rc = ds_device_check("fluid batch device", device, err, errlen);
  if (rc) return rc;
  const dsBackend* be = ds__backend(device.kind);
  if (!be) return ds__puterr(err, errlen, DS_ERR_UNSUPPORTED, "fluid batch device cuda: this dsim was built without CUDA");
  dsFluidBatch* fb = (dsFluidBatch*)ds__calloc(1, sizeof *fb);
  if (!fb) return ds__puterr(err, errlen, DS_ERR_NOMEM, "fluid batch: out of memory");
  fb->m = m, fb->be = be, fb->B = B, fb->np = m->nparam, fb->steps = steps;
  fb->S = m->nvel + 2 * m->ncell;
  fb->every = checkpoint_every > 1 ? checkpoint_every : 1;
  fb->nslot = steps / fb->every + 1;
  rc = be->open(device.index, &fb->ctx, err, errlen);
  if (rc) {
    ds__free(fb);
    return rc;
  }
  rc = upload_model(fb);
  if (!rc) rc = alloc_instances(fb);
  if (rc) {
    char sz[32];
    ds__puterr(err, errlen, rc, "fluid batch of %d on %s: %s (%s allocated so far)", B, be->name,
               rc == DS_ERR_NOMEM ? "out of memory" : be->last_error(fb->ctx), ds_format_size(fb->bytes, sz, sizeof sz));
    ds_fluid_batch_free(fb);
    return rc;
  }
  *out = fb;
  return ds_fluid_batch_reset(fb, NULL, NULL, NULL, 0);
}

/* ---- parameters ------------------------------------------------------------ */

static int param_slot(const dsFluidBatch* fb, int b, const char* name, int* idx, dsErrBuf* eb) {
  if (b < -1 || b >= fb->B)
    return ds__seterr(eb, DS_ERR_RANGE, "param %s: instance %d (expected 0 .. %d, or -1 for all)", name ? name : "",
                      b, fb->B - 1);
  *idx = ds_fluid_param_index(fb->m, name);
  if (*idx < 0)
    return ds__seterr(eb, DS_ERR_NOTFOUND, "param '%s': no such parameter (ds_fluid_param_name lists them)",
                      name ? name : "(null)");
  return 0;
}

int ds_fluid_batch_set_param(dsFluidBatch* fb, int b, const char* name, double value) {
  if (!fb) return DS_ERR_INVALID;
  ds__clearerr(&fb->err);
  int i = 0, rc = param_slot(fb, b, name, &i, &fb->err);
  if (rc) return rc;
  if (!isfinite(value)) return ds__seterr(&fb->err, DS_ERR_RANGE, "param %s: %g (expected a finite value)", name, value);
  for (int k = b < 0 ? 0 : b; k < (b < 0 ? fb->B : b + 1); k++) fb->par_h[(size_t)k * fb->np + i] = value;
  fb->par_dirty = 1;
  return 0;
}

int ds_fluid_batch_get_param(const dsFluidBatch* fb, int b, const char* name, double* value) {
  if (!fb || !value) return DS_ERR_INVALID;
  if (b < 0 || b >= fb->B) return DS_ERR_RANGE;
  dsErrBuf eb;
  int i = 0, rc = param_slot(fb, b, name, &i, &eb);
  if (rc) return rc;
  *value = fb->par_h[(size_t)b * fb->np + i];
  return 0;
}

/* ---- states ---------------------------------------------------------------- */

/* instance b's field `field` (n values, NULL: none) finite; else
 * DS_ERR_INVALID naming it */
static int check_field(dsFluidBatch* fb, const double* v, int n, int b, const char* what, const char* field) {
  if (v)
    for (int i = 0; i < n; i++)
      if (!isfinite(v[i]))
        return ds__seterr(&fb->err, DS_ERR_INVALID, "%s: %s of instance %d, element %d is %g (expected a finite value)",
                          what, field, b, i, v[i]);
  return 0;
}

/* instance b's initial state, as the serial load_state builds it, into stage_h */
static void load_state(dsFluidBatch* fb, int b, const double* vel, const double* dens, const double* temp) {
  const dsFluidModel* m = fb->m;
  double *u = fb->stage_h, *rho = u + m->nvel, *T = rho + m->ncell;
  const double amb = fb->par_h[(size_t)b * fb->np + FL_P_TAMB];
  for (int f = 0; f < m->nvel; f++) u[f] = vel && m->active[f] ? vel[f] : 0;
  for (int c = 0; c < m->ncell; c++) {
    rho[c] = dens && !m->solid[c] ? dens[c] : 0;
    T[c] = m->solid[c] ? 0 : temp ? temp[c] : amb;
  }
}

/* every instance's fields (per_instance: B of each, else one for all)
 * finite, else DS_ERR_INVALID naming the field, instance and element */
static int check_fields(dsFluidBatch* fb, const char* what, const double* velocity, const double* density,
                        const double* temperature, int per_instance) {
  const int nv = fb->m->nvel, nc = fb->m->ncell;
  for (int b = 0; b < (per_instance ? fb->B : 1); b++) {
    const size_t k = per_instance ? (size_t)b : 0;
    int rc = check_field(fb, velocity ? velocity + k * nv : NULL, nv, b, what, "velocity");
    if (!rc) rc = check_field(fb, density ? density + k * nc : NULL, nc, b, what, "density");
    if (!rc) rc = check_field(fb, temperature ? temperature + k * nc : NULL, nc, b, what, "temperature");
    if (rc) return rc;
  }
  return 0;
}

/* The serial set_state's rule (engine/fluid.c) on the batch's one tape: a
 * state set at a checkpoint t becomes the tape's state there; off a
 * checkpoint t is marked, and a backward that would recompute through it
 * is refused. Setting the current state to itself (bitwise, every
 * instance) leaves no new mark; a mark already at t stays (the state
 * there is still not the one a recomputation gives). The fields are
 * checked before anything moves. */
static int put_state(dsFluidBatch* fb, const char* what, int t, const double* velocity, const double* density,
                     const double* temperature, int per_instance) {
  int rc = check_fields(fb, what, velocity, density, temperature, per_instance);
  if (rc) return rc;
  const int nv = fb->m->nvel, nc = fb->m->ncell, K = fb->every;
  const size_t S = (size_t)fb->S;
  int same = t == fb->t && t % K != 0; /* compared only where it decides a mark */
  for (int b = 0; !rc && b < fb->B; b++) {
    const size_t k = per_instance ? (size_t)b : 0;
    load_state(fb, b, velocity ? velocity + k * nv : NULL, density ? density + k * nc : NULL,
               temperature ? temperature + k * nc : NULL);
    double* cur = fb->a.cur + (size_t)b * S;
    if (same) {
      rc = fb->be->get(fb->ctx, fb->cmp_h, cur, sizeof(double) * S);
      same = !rc && !memcmp(fb->cmp_h, fb->stage_h, sizeof(double) * S);
    }
    if (!rc) rc = fb->be->put(fb->ctx, cur, fb->stage_h, sizeof(double) * S);
  }
  if (!rc && t % K == 0)
    rc = fb->be->copy(fb->ctx, fb->slots + (size_t)(t / K) * fb->B * S, fb->a.cur, sizeof(double) * fb->B * S);
  if (rc) return be_fail(fb, rc, "the copy of a state");
  const unsigned char was = fb->setmark[t];
  memset(fb->setmark + t, 0, (size_t)(fb->steps - t) + 1);
  memset(fb->setat + t, 0, (size_t)(fb->steps - t) + 1);
  if (t % K) fb->setmark[t] = (unsigned char)(was || !same);
  fb->setat[t] = t > 0;
  fb->t = t;
  fb->seg_start = -1;
  return 0;
}

int ds_fluid_batch_reset(dsFluidBatch* fb, const double* velocity, const double* density, const double* temperature,
                         int per_instance) {
  if (!fb) return DS_ERR_INVALID;
  ds__clearerr(&fb->err);
  int rc = put_state(fb, "reset", 0, velocity, density, temperature, per_instance);
  if (rc) return rc;
  memset(fb->sc_h, 0, sizeof(double) * (size_t)fb->B * DSF_NSC);
  return 0;
}

int ds_fluid_batch_set_state(dsFluidBatch* fb, int t, const double* velocity, const double* density,
                             const double* temperature, int per_instance) {
  if (!fb) return DS_ERR_INVALID;
  ds__clearerr(&fb->err);
  if (t < 0 || t > fb->t)
    return ds__seterr(&fb->err, DS_ERR_RANGE, "set_state: step %d (expected a step in [0, %d], the steps taken)", t,
                      fb->t);
  return put_state(fb, "set_state", t, velocity, density, temperature, per_instance);
}

int ds_fluid_batch_state(dsFluidBatch* fb, int b, double* velocity, double* density, double* temperature) {
  if (!fb) return DS_ERR_INVALID;
  ds__clearerr(&fb->err);
  if (b < 0 || b >= fb->B)
    return ds__seterr(&fb->err, DS_ERR_RANGE, "state: instance %d (expected 0 .. %d)", b, fb->B - 1);
  const int nv = fb->m->nvel, nc = fb->m->ncell;
  const double* s = fb->a.cur + (size_t)b * fb->S;
  int rc = 0;
  if (velocity) rc = fb->be->get(fb->ctx, velocity, s, sizeof(double) * (size_t)nv);
  if (!rc && density) rc = fb->be->get(fb->ctx, density, s + nv, sizeof(double) * (size_t)nc);
  if (!rc && temperature) rc = fb->be->get(fb->ctx, temperature, s + nv + nc, sizeof(double) * (size_t)nc);
  return rc ? be_fail(fb, rc, "the copy of a state") : 0;
}

void ds_fluid_batch_solver_stats(const dsFluidBatch* fb, int b, int* iterations, double* residual) {
  const int ok = fb && b >= 0 && b < fb->B;
  if (iterations) *iterations = ok ? (int)fb->sc_h[(size_t)b * DSF_NSC + DSF_ITERS] : 0;
  if (residual) *residual = ok ? fb->sc_h[(size_t)b * DSF_NSC + DSF_RESID] : 0;
}

/* ---- the step -------------------------------------------------------------- */

static int get_scalars(dsFluidBatch* fb) {
  int rc = fb->be->get(fb->ctx, fb->sc_h, fb->a.sc, sizeof(double) * (size_t)fb->B * DSF_NSC);
  return rc ? be_fail(fb, rc, "reading the scalars back") : 0;
}

static int run_list(dsFluidBatch* fb, const int* stages, int n) {
  for (int i = 0; i < n; i++) {
    int rc = run(fb, stages[i]);
    if (rc) return rc;
  }
  return 0;
}

/* the step's checks before it moves anything: the tape, the forces, the
 * CFL number of every instance */
static int pre_checks(dsFluidBatch* fb, const double* force) {
  const dsFluidModel* m = fb->m;
  const int t = fb->t, nfc = m->ncell * m->dim;
  if (t >= fb->steps)
    return ds__seterr(&fb->err, DS_ERR_STATE, "step %d: the tape holds %d steps (ds_fluid_batch_create)", t,
                      fb->steps);
  if (force && !m->def.force_field)
    return ds__seterr(&fb->err, DS_ERR_INVALID, "step %d: a force field needs force_field = 1 in the model", t);
  char what[48];
  snprintf(what, sizeof what, "step %d", t);
  for (int b = 0; force && b < fb->B; b++) {
    int rc = check_field(fb, force + (size_t)b * nfc, nfc, b, what, "force field");
    if (rc) return rc;
  }
  static const int umax[] = {DSF_UMAX_BLK, DSF_UMAX};
  int rc = run_list(fb, umax, 2);
  if (!rc) rc = get_scalars(fb);
  for (int b = 0; !rc && b < fb->B; b++) {
    const double u = fb->sc_h[(size_t)b * DSF_NSC + DSF_UMAX_V], cfl = m->def.dt * u / m->def.dx;
    if (cfl > m->def.cfl_max)
      return ds__seterr(&fb->err, DS_ERR_RANGE,
                        "step %d, instance %d: CFL number dt max|u| / dx = %g * %g / %g = %g exceeds cfl_max = %g "
                        "(lower dt or raise cfl_max)",
                        t, b, m->def.dt, u, m->def.dx, cfl, m->def.cfl_max);
  }
  return rc;
}

/* stage 0 and the advection into nxt */
static int advect(dsFluidBatch* fb) {
  dsFluidBatchArgs* a = &fb->a;
  const double* src = a->cur;
  int rc = 0;
  if (fb->m->def.nsoft) {
    a->soft_in = a->cur;
    rc = run(fb, DSF_SOFT);
    src = a->spen;
  }
  a->sl_q = src, a->sl_u = src, a->sl_h = fb->m->def.dt;
  if (fb->m->def.advection != DS_FLUID_MACCORMACK) {
    a->sl_out = a->nxt;
    return rc ? rc : run(fb, DSF_SL);
  }
  a->sl_out = a->hat;
  if (!rc) rc = run(fb, DSF_SL);
  a->sl_q = a->hat, a->sl_h = -fb->m->def.dt, a->sl_out = a->back;
  if (!rc) rc = run(fb, DSF_SL);
  a->sl_q = src;
  return rc ? rc : run(fb, DSF_MC);
}

/* fl_pcg for every instance, A' pi = b' with b' in r */
static int solve(dsFluidBatch* fb) {
  static const int init[] = {DSF_MAX_B, DSF_INIT, DSF_MIC_L, DSF_MIC_U, DSF_COPY_S, DSF_DOT_ZR, DSF_SIGMA};
  static const int iter[] = {DSF_MATVEC, DSF_DOT_SAS, DSF_ALPHA, DSF_UPD_XR, DSF_MAX_R, DSF_CHECK,
                             DSF_MIC_L,  DSF_MIC_U,   DSF_DOT_ZR, DSF_BETA,  DSF_UPD_S};
  int rc = run_list(fb, init, (int)(sizeof init / sizeof init[0]));
  for (int it = 1; !rc && it <= fb->m->def.max_iterations + 1; it++) {
    rc = get_scalars(fb);
    int running = 0;
    for (int b = 0; !rc && b < fb->B; b++) running |= fb->sc_h[(size_t)b * DSF_NSC + DSF_STATE] == DSF_RUN;
    if (rc || !running || it > fb->m->def.max_iterations) break;
    fb->a.it = it;
    rc = run_list(fb, iter, (int)(sizeof iter / sizeof iter[0]));
  }
  return rc;
}

/* the first instance whose solve failed or (nan: a forward step's BAD
 * stages ran) whose new state has a NaN ("what t, instance b: ...") */
static int post_checks(dsFluidBatch* fb, const char* what, int t, int nan) {
  const double tol = fb->m->def.tolerance;
  for (int b = 0; b < fb->B; b++) {
    const double* sc = fb->sc_h + (size_t)b * DSF_NSC;
    if (sc[DSF_STATE] != DSF_DONE)
      return ds__seterr(&fb->err, DS_ERR_DIVERGED,
                        "%s %d, instance %d: pressure solve did not converge in %d iterations (max|residual| / "
                        "max|rhs| = %.3g, tolerance %.3g)",
                        what, t, b, (int)sc[DSF_ITERS], sc[DSF_RESID], tol);
    if (nan && sc[DSF_BADI] >= 0) {
      const int i = (int)sc[DSF_BADI];
      double x = 0;
      int rc = fb->be->get(fb->ctx, &x, fb->a.nxt + (size_t)b * fb->S + i, sizeof x);
      if (rc) return be_fail(fb, rc, "reading a state back");
      return ds__seterr(&fb->err, DS_ERR_DIVERGED, "%s %d, instance %d: state[%d] is %g", what, t, b, i, x);
    }
  }
  return 0;
}

/* nxt = the step of cur (the forces in a.force) */
static int step_core(dsFluidBatch* fb, int t, const char* what) {
  static const int mid[] = {DSF_SRC, DSF_FORCE, DSF_MASK, DSF_RHS};
  static const int end[] = {DSF_GRAD, DSF_BAD_BLK, DSF_BAD};
  fb->a.pu = fb->a.nxt;
  int rc = advect(fb);
  if (!rc) rc = run_list(fb, mid, 4);
  if (!rc) rc = solve(fb);
  if (!rc) rc = run_list(fb, end, 3);
  if (!rc) rc = get_scalars(fb);
  return rc ? rc : post_checks(fb, what, t, 1);
}

/* the force fields into the tape's row t (force_field), the stages' a.force */
static int put_forces(dsFluidBatch* fb, const double* force) {
  const dsFluidModel* m = fb->m;
  fb->a.force = NULL;
  if (!fb->forces) return 0;
  const size_t n = (size_t)fb->B * m->ncell * m->dim;
  double* row = fb->forces + (size_t)fb->t * n;
  int rc = force ? fb->be->put(fb->ctx, row, force, n * sizeof(double)) : fb->be->zero(fb->ctx, row, n * sizeof(double));
  if (rc) return be_fail(fb, rc, "the copy of the force fields");
  if (force) fb->a.force = row;
  return 0;
}

int ds_fluid_batch_step(dsFluidBatch* fb, const double* force) {
  if (!fb) return DS_ERR_INVALID;
  ds__clearerr(&fb->err);
  int rc = 0;
  if (fb->par_dirty) {
    rc = fb->be->put(fb->ctx, fb->par_d, fb->par_h, sizeof(double) * (size_t)fb->B * fb->np);
    if (rc) return be_fail(fb, rc, "the copy of the parameters");
    fb->par_dirty = 0;
  }
  rc = pre_checks(fb, force);
  if (!rc) rc = put_forces(fb, force);
  if (!rc) rc = step_core(fb, fb->t, "step");
  if (rc) return rc;
  double* tmp = fb->a.cur;
  fb->a.cur = fb->a.nxt;
  fb->a.nxt = tmp;
  fb->t++;
  fb->seg_start = -1;
  if (fb->t % fb->every == 0) {
    const size_t n = (size_t)fb->B * fb->S;
    rc = fb->be->copy(fb->ctx, fb->slots + (size_t)(fb->t / fb->every) * n, fb->a.cur, n * sizeof(double));
    if (rc) return be_fail(fb, rc, "the copy of a state to the tape");
  }
  return 0;
}

/* ---- the backward ---------------------------------------------------------- */

/* states t and t + 1 (B x S each): the tape's, or the segment from the
 * checkpoint at or before t, recomputed as the serial engine does (the
 * tape's force rows, zero where a step had none); with a state set at
 * t + 1, step t recomputed from state t (engine/fluid.c seg_states) */
static int seg_states(dsFluidBatch* fb, int t, const double** s0, const double** s1) {
  const size_t n = (size_t)fb->B * fb->S, nf = (size_t)fb->B * fb->m->ncell * fb->m->dim;
  const int K = fb->every, start = (t / K) * K;
  if (K == 1 && !fb->setat[t + 1]) {
    *s0 = fb->slots + (size_t)t * n;
    *s1 = *s0 + n;
    return 0;
  }
  if (fb->seg_start != start) {
    double *cur = fb->a.cur, *nxt = fb->a.nxt;
    int rc = fb->be->copy(fb->ctx, fb->seg, fb->slots + (size_t)(start / K) * n, n * sizeof(double));
    if (rc) return be_fail(fb, rc, "the copy of a checkpoint");
    const int len = fb->t - start < K ? fb->t - start : K;
    for (int j = 0; !rc && j < len; j++) {
      fb->a.cur = fb->seg + (size_t)j * n, fb->a.nxt = fb->seg + (size_t)(j + 1) * n;
      fb->a.force = fb->forces ? fb->forces + (size_t)(start + j) * nf : NULL;
      rc = step_core(fb, start + j, "recomputed step");
    }
    fb->a.cur = cur, fb->a.nxt = nxt;
    if (rc) return rc;
    fb->seg_start = start;
  }
  *s0 = fb->seg + (size_t)(t - start) * n;
  *s1 = *s0 + n;
  return 0;
}

/* the adjoint of step t: a.g0 from g1 (consumed), a.gf, a.gpar += */
static int bwd_step(dsFluidBatch* fb, int t) {
  dsFluidBatchArgs* a = &fb->a;
  const double *s0 = NULL, *s1 = NULL;
  int rc = seg_states(fb, t, &s0, &s1);
  if (rc) return rc;
  static const int pre[] = {DSF_MASK, DSF_RHS};
  static const int post[] = {DSF_GRAD};
  a->pu = fb->g1;
  rc = run_list(fb, pre, 1 + 1);
  if (!rc) rc = solve(fb);
  if (!rc) rc = run_list(fb, post, 1);
  if (!rc) rc = get_scalars(fb);
  if (!rc) rc = post_checks(fb, "backward step", t, 0);
  a->bs1 = s1;
  if (!rc) rc = run(fb, DSF_BWD_SRC);
  const double* src = s0;
  a->soft_in = s0;
  if (!rc && fb->m->def.nsoft) rc = run(fb, DSF_SOFT), src = a->spen;
  if (!rc && fb->m->def.advection == DS_FLUID_MACCORMACK) {
    a->sl_q = src, a->sl_u = src, a->sl_h = fb->m->def.dt, a->sl_out = a->hat;
    rc = run(fb, DSF_SL);
    a->sl_q = a->hat, a->sl_h = -fb->m->def.dt, a->sl_out = a->back;
    if (!rc) rc = run(fb, DSF_SL);
  }
  a->bs0 = src;
  return rc ? rc : run(fb, DSF_BWD_ADV);
}

/* a step's force adjoint into g->force (B x steps x nfc) and force_total */
static int take_gf(dsFluidBatch* fb, int t, const dsFluidGrad* g) {
  const size_t nfc = (size_t)fb->m->ncell * fb->m->dim;
  if (!g->force && !g->force_total) return 0;
  int rc = fb->be->get(fb->ctx, fb->gf_h, fb->a.gf, sizeof(double) * (size_t)fb->B * nfc);
  if (rc) return be_fail(fb, rc, "reading the force adjoint back");
  for (int b = 0; b < fb->B; b++) {
    const double* gf = fb->gf_h + (size_t)b * nfc;
    if (g->force) memcpy(g->force + ((size_t)b * fb->steps + t) * nfc, gf, sizeof(double) * nfc);
    if (g->force_total)
      for (size_t i = 0; i < nfc; i++) g->force_total[(size_t)b * nfc + i] += gf[i];
  }
  return 0;
}

/* the seed dL/d(state t1) of every instance into g1 */
static int seed(dsFluidBatch* fb, const double* dl_dvel, const double* dl_ddens, const double* dl_dtemp) {
  const int nv = fb->m->nvel, nc = fb->m->ncell;
  for (int b = 0; b < fb->B; b++) {
    double* s = fb->stage_h;
    for (int i = 0; i < nv; i++) s[i] = dl_dvel ? dl_dvel[(size_t)b * nv + i] : 0;
    for (int i = 0; i < nc; i++) {
      s[nv + i] = dl_ddens ? dl_ddens[(size_t)b * nc + i] : 0;
      s[nv + nc + i] = dl_dtemp ? dl_dtemp[(size_t)b * nc + i] : 0;
    }
    int rc = fb->be->put(fb->ctx, fb->g1 + (size_t)b * fb->S, s, sizeof(double) * (size_t)fb->S);
    if (rc) return be_fail(fb, rc, "the copy of the seed");
  }
  return 0;
}

/* the adjoint of state t0 (masked as a reset or set_state masks) and the parameters' into g */
static int finish(dsFluidBatch* fb, const dsFluidGrad* g) {
  const dsFluidModel* m = fb->m;
  const int nv = m->nvel, nc = m->ncell;
  for (int b = 0; b < fb->B; b++) {
    int rc = fb->be->get(fb->ctx, fb->stage_h, fb->g1 + (size_t)b * fb->S, sizeof(double) * (size_t)fb->S);
    if (rc) return be_fail(fb, rc, "reading the adjoint back");
    const double* s = fb->stage_h;
    if (g->velocity0)
      for (int f = 0; f < nv; f++) g->velocity0[(size_t)b * nv + f] = m->active[f] ? s[f] : 0;
    for (int c = 0; c < nc; c++) {
      if (g->density0) g->density0[(size_t)b * nc + c] = m->solid[c] ? 0 : s[nv + c];
      if (g->temperature0) g->temperature0[(size_t)b * nc + c] = m->solid[c] ? 0 : s[nv + nc + c];
    }
  }
  int rc = g->param ? fb->be->get(fb->ctx, g->param, fb->a.gpar, sizeof(double) * (size_t)fb->B * fb->np) : 0;
  return rc ? be_fail(fb, rc, "reading the parameters' adjoint back") : 0;
}

/* The terms at step t added to g1's densities one after another in k
 * order, as the serial add_terms adds them (the same bits): the backward
 * is linear in its seed, so each term joins the running adjoint when the
 * sweep reaches its state. */
static int add_terms(dsFluidBatch* fb, int t, int nterm, const int* at, const double* const* dl_ddens_at) {
  const size_t n = (size_t)fb->B * fb->m->ncell;
  for (int k = 0; k < nterm; k++) {
    if (at[k] != t) continue;
    int rc = fb->be->put(fb->ctx, fb->term_d, dl_ddens_at[k], n * sizeof(double));
    if (rc) return be_fail(fb, rc, "the copy of a loss term");
    fb->a.pu = fb->g1;
    rc = run(fb, DSF_ADD_TERM);
    if (rc) return rc;
  }
  return 0;
}

/* The serial sweep (engine/fluid.c) for every instance: from g1 =
 * dL/d(state t1) down to state t0, g_t = B_t^T g_{t+1} + the terms at t;
 * rows t0 .. t1 - 1 of g->force, the window's sums into force_total and
 * param, the adjoint of state t0 into g's state arrays. */
static int sweep(dsFluidBatch* fb, int t0, int t1, const double* dl_dvel, const double* dl_ddens,
                 const double* dl_dtemp, int nterm, const int* at, const double* const* dl_ddens_at,
                 const dsFluidGrad* g) {
  const size_t nfc = (size_t)fb->m->ncell * fb->m->dim;
  int rc = 0;
  if (fb->par_dirty) {
    rc = fb->be->put(fb->ctx, fb->par_d, fb->par_h, sizeof(double) * (size_t)fb->B * fb->np);
    if (rc) return be_fail(fb, rc, "the copy of the parameters");
    fb->par_dirty = 0;
  }
  if (g->force_total) memset(g->force_total, 0, sizeof(double) * (size_t)fb->B * nfc);
  rc = seed(fb, dl_dvel, dl_ddens, dl_dtemp);
  if (!rc) rc = fb->be->zero(fb->ctx, fb->a.gpar, sizeof(double) * (size_t)fb->B * fb->np);
  for (int t = t1 - 1; !rc && t >= t0; t--) {
    rc = add_terms(fb, t + 1, nterm, at, dl_ddens_at);
    if (!rc) rc = bwd_step(fb, t);
    if (!rc) rc = take_gf(fb, t, g);
    double* tmp = fb->a.g0; /* the adjoint of state t is the next step's g1 */
    fb->a.g0 = fb->g1;
    fb->g1 = tmp;
  }
  if (!rc) rc = add_terms(fb, t0, nterm, at, dl_ddens_at);
  return rc ? rc : finish(fb, g);
}

/* a set state off a checkpoint in the segments a sweep over [t0, t1) recomputes */
static int check_marks(dsFluidBatch* fb, int t0, int t1) {
  for (int t = (t0 / fb->every) * fb->every; t < t1; t++)
    if (fb->setmark[t])
      return ds__seterr(&fb->err, DS_ERR_RANGE,
                        "backward: a state was set at step %d, not a checkpoint (checkpoint_every %d): the backward "
                        "would recompute its segment from the checkpoint before it",
                        t, fb->every);
  return 0;
}

static int check_terms(dsFluidBatch* fb, int t0, int t1, int nterm, const int* at, const double* const* dl_ddens_at) {
  for (int k = 0; k < nterm; k++)
    if (at[k] < t0 || at[k] > t1 || !dl_ddens_at[k])
      return ds__seterr(&fb->err, DS_ERR_INVALID, "backward: term %d: at %d (expected a step in [%d, %d] and an array)",
                        k, at[k], t0, t1);
  return 0;
}

int ds_fluid_batch_backward(dsFluidBatch* fb, const double* dl_dvel, const double* dl_ddens, const double* dl_dtemp,
                            const dsFluidGrad* g) {
  return ds_fluid_batch_backward_terms(fb, dl_dvel, dl_ddens, dl_dtemp, 0, NULL, NULL, g);
}

int ds_fluid_batch_backward_terms(dsFluidBatch* fb, const double* dl_dvel, const double* dl_ddens,
                                  const double* dl_dtemp, int nterm, const int* at, const double* const* dl_ddens_at,
                                  const dsFluidGrad* g) {
  if (!fb || !g || nterm < 0 || (nterm && (!at || !dl_ddens_at))) return DS_ERR_INVALID;
  ds__clearerr(&fb->err);
  int rc = check_marks(fb, 0, fb->t);
  if (!rc) rc = check_terms(fb, 0, fb->t, nterm, at, dl_ddens_at);
  if (rc) return rc;
  if (g->force) memset(g->force, 0, sizeof(double) * (size_t)fb->B * fb->steps * fb->m->ncell * fb->m->dim);
  return sweep(fb, 0, fb->t, dl_dvel, dl_ddens, dl_dtemp, nterm, at, dl_ddens_at, g);
}

/* A window is the whole sweep started at state t1 and stopped at t0: the
 * recursion needs nothing from outside [t0, t1] but the states. */
int ds_fluid_batch_backward_window(dsFluidBatch* fb, int t0, int t1, const double* dl_dvel, const double* dl_ddens,
                                   const double* dl_dtemp, int nterm, const int* at,
                                   const double* const* dl_ddens_at, const dsFluidGrad* g) {
  if (!fb || !g || nterm < 0 || (nterm && (!at || !dl_ddens_at))) return DS_ERR_INVALID;
  ds__clearerr(&fb->err);
  if (t0 < 0 || t0 > t1 || t1 > fb->t)
    return ds__seterr(&fb->err, DS_ERR_RANGE,
                      "backward window: steps [%d, %d) (expected 0 <= t0 <= t1 <= %d, the steps taken)", t0, t1,
                      fb->t);
  int rc = check_marks(fb, t0, t1);
  if (!rc) rc = check_terms(fb, t0, t1, nterm, at, dl_ddens_at);
  if (rc) return rc;
  return sweep(fb, t0, t1, dl_dvel, dl_ddens, dl_dtemp, nterm, at, dl_ddens_at, g);
}

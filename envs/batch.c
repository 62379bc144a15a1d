/* Batched environments (include/dsim/batch.h): N dsEnv of one definition and
 * one loop over them per call. The loop is `omp parallel for
 * schedule(static)` over envs with nested regions made inactive, so each env
 * runs its engine, renderer and losses on one thread; since an env's result
 * never depends on its thread count (ARCHITECTURE.md, Determinism) nor on
 * the other envs, the batch is bitwise equal to separate envs for any
 * OMP_NUM_THREADS. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#ifdef _OPENMP
#  include <omp.h>
#endif

#include "dsim/batch.h"
#include "envs/env_priv.h"

struct dsBatch {
  int n;
  dsEnv** envs;
  uint64_t* seed;   /* seed of each env's current (or last) episode */
  uint8_t* seeded;  /* a reset happened */
  int* rc;          /* scratch: per-env outcome of the last call */
  dsErrBuf err;
};

static void copy_err(char* err, size_t errlen, const char* msg) {
  if (err && errlen) snprintf(err, errlen, "%s", msg);
}

void ds_batch_destroy(dsBatch* b) {
  if (!b) return;
  if (b->envs)
    for (int i = 0; i < b->n; i++) ds_env_destroy(b->envs[i]);
  ds__free(b->envs);
  ds__free(b->seed);
  ds__free(b->seeded);
  ds__free(b->rc);
  ds__free(b);
}

/* def or (name, text) */
static int batch_create(const dsEnvDef* def, const char* name, const char* text, int n, dsBatch** out, char* err,
                        size_t errlen) {
  copy_err(err, errlen, "");
  if (!out) return DS_ERR_INVALID;
  *out = NULL;
  if (n < 1) {
    copy_err(err, errlen, "batch: the number of envs must be >= 1");
    return DS_ERR_RANGE;
  }
  dsBatch* b = (dsBatch*)ds__calloc(1, sizeof *b);
  if (!b) {
    copy_err(err, errlen, "out of memory");
    return DS_ERR_NOMEM;
  }
  b->n = n;
  b->envs = (dsEnv**)ds__calloc((size_t)n, sizeof(dsEnv*));
  b->seed = (uint64_t*)ds__calloc((size_t)n, sizeof(uint64_t));
  b->seeded = (uint8_t*)ds__calloc((size_t)n, 1);
  b->rc = (int*)ds__calloc((size_t)n, sizeof(int));
  if (!b->envs || !b->seed || !b->seeded || !b->rc) {
    ds_batch_destroy(b);
    copy_err(err, errlen, "out of memory");
    return DS_ERR_NOMEM;
  }
  for (int i = 0; i < n; i++) {
    int rc = def ? ds_env_create(def, &b->envs[i], err, errlen)
                 : ds_env_create_from_text(name, text, &b->envs[i], err, errlen);
    if (rc) {
      ds_batch_destroy(b);
      return rc;
    }
  }
  *out = b;
  return 0;
}

int ds_batch_create(const dsEnvDef* def, int n, dsBatch** out, char* err, size_t errlen) {
  if (!def) return DS_ERR_INVALID;
  return batch_create(def, NULL, NULL, n, out, err, errlen);
}

int ds_batch_create_from_text(const char* name, const char* text, int n, dsBatch** out, char* err, size_t errlen) {
  if (!name || !text) return DS_ERR_INVALID;
  return batch_create(NULL, name, text, n, out, err, errlen);
}

int ds_batch_size(const dsBatch* b) { return b ? b->n : DS_ERR_INVALID; }
dsEnv* ds_batch_env(dsBatch* b, int i) { return b && i >= 0 && i < b->n ? b->envs[i] : NULL; }
const char* ds_batch_last_error(const dsBatch* b) { return b ? ds__errmsg(&b->err) : ""; }

/* The first failed env's code and message on the batch (0 when none). */
static int collect(dsBatch* b, int* status) {
  int first = -1;
  for (int i = 0; i < b->n; i++) {
    if (status) status[i] = b->rc[i];
    if (b->rc[i] < 0 && first < 0) first = i;
  }
  if (first < 0) return 0;
  const char* msg = ds_env_last_error(b->envs[first]);
  return ds__seterr(&b->err, b->rc[first], "env %d: %s", first, msg && *msg ? msg : ds_strerror(b->rc[first]));
}

/* Runs body(i) for every env: threads across envs, nested regions
 * inactive. Single env or single thread: the env keeps its inner threads. */
#ifdef _OPENMP
#  define FOR_EACH_ENV(b, i)                                                     \
    const int par_ = (b)->n > 1 && omp_get_max_threads() > 1;                    \
    const int levels_ = omp_get_max_active_levels();                             \
    if (par_) omp_set_max_active_levels(1);                                      \
    _Pragma("omp parallel for schedule(static) if (par_)") for (int i = 0; i < (b)->n; i++)
#  define END_FOR_EACH_ENV() \
    if (par_) omp_set_max_active_levels(levels_)
#else
#  define FOR_EACH_ENV(b, i) for (int i = 0; i < (b)->n; i++)
#  define END_FOR_EACH_ENV() (void)0
#endif

static int odim_of(const dsBatch* b) { return b->envs[0]->odim; }
static size_t npix_of(const dsBatch* b) {
  const dsEnvDef* d = &b->envs[0]->def;
  return d->obs_image ? 4 * (size_t)d->width * (size_t)d->height : 0;
}

int ds_batch_reset(dsBatch* b, const uint64_t* seeds, const uint8_t* mask, dsReal* obs, dsReal* image, int* status) {
  if (!b) return DS_ERR_INVALID;
  ds__clearerr(&b->err);
  const size_t od = (size_t)odim_of(b), np = npix_of(b);
  FOR_EACH_ENV(b, i) {
    b->rc[i] = DS_BATCH_STEPPED;
    if (mask && !mask[i]) continue;
    const uint64_t s = seeds ? seeds[i] : b->seeded[i] ? b->seed[i] + (uint64_t)b->n : (uint64_t)i;
    b->seed[i] = s;
    b->seeded[i] = 1;
    const int rc = ds_env_reset(b->envs[i], s, obs ? obs + i * od : NULL, image && np ? image + i * np : NULL);
    b->rc[i] = rc ? rc : DS_BATCH_RESET;
  }
  END_FOR_EACH_ENV();
  return collect(b, status);
}

/* Episode over or failed: what autoreset resets. */
static int needs_reset(const dsEnv* e) { return !e->have_episode || e->failed || e->d->t >= e->T; }

int ds_batch_step(dsBatch* b, const dsReal* actions, dsReal* obs, dsReal* image, dsReal* rewards, uint8_t* done,
                  int* status, int flags) {
  if (!b) return DS_ERR_INVALID;
  ds__clearerr(&b->err);
  const size_t ad = (size_t)b->envs[0]->adim;
  if (!actions && ad > 0) return ds__seterr(&b->err, DS_ERR_INVALID, "batch step: actions is NULL");
  const size_t od = (size_t)odim_of(b), np = npix_of(b);
  const int autoreset = (flags & DS_BATCH_AUTORESET) != 0;
  FOR_EACH_ENV(b, i) {
    dsEnv* e = b->envs[i];
    dsReal* o = obs ? obs + i * od : NULL;
    dsReal* im = image && np ? image + i * np : NULL;
    dsReal r = 0;
    int d = 0, rc;
    if (autoreset && needs_reset(e)) {
      const uint64_t s = b->seeded[i] ? b->seed[i] + (uint64_t)b->n : (uint64_t)i;
      b->seed[i] = s;
      b->seeded[i] = 1;
      rc = ds_env_reset(e, s, o, im);
      if (!rc) rc = DS_BATCH_RESET;
    } else {
      rc = ds_env_step(e, actions + i * ad, o, im, &r, &d);
    }
    b->rc[i] = rc;
    if (rewards) rewards[i] = rc < 0 ? 0 : r;
    if (done) done[i] = (uint8_t)(rc < 0 ? 0 : d);
  }
  END_FOR_EACH_ENV();
  return collect(b, status);
}

int ds_batch_metric(const dsBatch* b, dsReal* metrics) {
  if (!b || !metrics) return DS_ERR_INVALID;
  for (int i = 0; i < b->n; i++) {
    int rc = ds_env_metric(b->envs[i], &metrics[i]);
    if (rc) return rc;
  }
  return 0;
}

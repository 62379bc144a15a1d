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

#include "envs/batch_priv.h"

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
  ds__env_group_render_free(b->bgr);
  ds_bsim_free(b->bs);
  ds__free(b->floss);
  ds__free(b->limg);
  ds__free(b->oimg);
  ds__free(b->have_oimg);
  ds__free(b->bx);
  ds__free(b->bv);
  ds__free(b->bact);
  ds__free(b->bas);
  ds__free(b->s0);
  ds__free(b->s1);
  ds__free(b->r);
  ds__free(b->specs);
  ds__free(b->gas);
  ds__free(b->badj);
  ds__free(b->rcs);
  ds__free(b->skip);
  ds__free(b);
}


/* def or (name, text); device: NULL (the definition's) or a device name */
static int batch_create(const dsEnvDef* def, const char* name, const char* text, const char* device, int lockstep,
                        int n, dsBatch** out, char* err, size_t errlen) {
  copy_err(err, errlen, "");
  if (!out) return DS_ERR_INVALID;
  *out = NULL;
  dsDevice dev = ds_device_cpu();
  if (device) {
    char why[DS_ERRMSG_LEN];
    int rc = ds_device_parse("device", device, &dev, why, sizeof why);
    if (!rc) rc = ds_device_check("device", dev, why, sizeof why);
    if (rc) {
      if (err && errlen) snprintf(err, errlen, "batch: %s", why);
      return rc;
    }
  }
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
  b->lockstep = lockstep;
  b->envs = (dsEnv**)ds__calloc((size_t)n, sizeof(dsEnv*));
  b->seed = (uint64_t*)ds__calloc((size_t)n, sizeof(uint64_t));
  b->seeded = (uint8_t*)ds__calloc((size_t)n, 1);
  b->rc = (int*)ds__calloc((size_t)n, sizeof(int));
  b->specs = (dsEnvBwdSpec*)ds__calloc((size_t)n, sizeof(dsEnvBwdSpec));
  b->gas = (dsReal**)ds__calloc((size_t)n, sizeof(dsReal*));
  b->rcs = (int*)ds__calloc((size_t)n, sizeof(int));
  b->skip = (unsigned char*)ds__calloc((size_t)n, 1);
  if (!b->envs || !b->seed || !b->seeded || !b->rc || !b->specs || !b->gas || !b->rcs || !b->skip) {
    ds_batch_destroy(b);
    copy_err(err, errlen, "out of memory");
    return DS_ERR_NOMEM;
  }
  dsEnvDef parsed;
  if (!def) {
    int rc = ds_env_def_from_text(name, text, &parsed, err, errlen);
    if (rc) {
      ds_batch_destroy(b);
      return rc;
    }
    def = &parsed;
  }
  dsEnvDef on;
  if (device) {
    on = *def;
    on.device = dev;
    def = &on;
  }
  /* a class with its own batched physics (dsEnvSim.batched) runs one per env */
  const int own = def->cls && def->cls->sim && def->cls->sim->batched;
  const int shared =
      (def->device.kind == DS_DEVICE_CUDA || def->batch_engine) && (!def->gradients || lockstep) && !own;
  for (int i = 0; i < n; i++) {
    int rc = ds__env_create(def, name, text, shared, &b->envs[i], err, errlen);
    if (!rc && shared) b->envs[i]->bs_inst = i;
    if (!rc && shared && i == 0) rc = ds__batch_create_shared(b, err, errlen);
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
  return batch_create(def, NULL, NULL, NULL, 0, n, out, err, errlen);
}

int ds_batch_create_lockstep(const dsEnvDef* def, int n, dsBatch** out, char* err, size_t errlen) {
  return batch_create(def, NULL, NULL, NULL, 1, n, out, err, errlen);
}

int ds_batch_create_from_text(const char* name, const char* text, int n, dsBatch** out, char* err, size_t errlen) {
  if (!name || !text) return DS_ERR_INVALID;
  return batch_create(NULL, name, text, NULL, 0, n, out, err, errlen);
}

int ds_batch_create_from_text_on(const char* name, const char* text, int n, const char* device, int flags,
                                 dsBatch** out, char* err, size_t errlen) {
  if (!name || !text) return DS_ERR_INVALID;
  return batch_create(NULL, name, text, device, (flags & DS_BATCH_LOCKSTEP) != 0, n, out, err, errlen);
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



int ds_batch_reset(dsBatch* b, const uint64_t* seeds, const uint8_t* mask, dsReal* obs, dsReal* image, int* status) {
  if (!b) return DS_ERR_INVALID;
  ds__clearerr(&b->err);
  const size_t od = (size_t)ds__batch_odim(b), np = ds__batch_npix(b);
  if (b->lockstep && mask)
    for (int i = 0; i < b->n; i++)
      if (!mask[i])
        return ds__seterr(&b->err, DS_ERR_STATE,
                          "batch reset: env %d is left out by the mask, but a lockstep batch resets all its envs "
                          "together",
                          i);
  FOR_EACH_ENV(b, i, LOOP_RESET) {
    b->rc[i] = DS_BATCH_STEPPED;
    if (mask && !mask[i]) continue;
    const uint64_t s = seeds ? seeds[i] : b->seeded[i] ? b->seed[i] + (uint64_t)b->n : (uint64_t)i;
    b->seed[i] = s;
    b->seeded[i] = 1;
    const int rc = ds_env_reset(b->envs[i], s, obs ? obs + i * od : NULL, image && np ? image + i * np : NULL);
    b->rc[i] = rc ? rc : DS_BATCH_RESET;
  }
  END_FOR_EACH_ENV();
  int rc = collect(b, status);
  if (!rc && b->taped && (rc = ds__batch_lockstep_sync(b, 1))) {
    for (int i = 0; i < b->n; i++) {
      b->rc[i] = rc;
      ds__seterr(&b->envs[i]->err, rc, "reset: %s", ds__errmsg(&b->err));
    }
    collect(b, status);
  }
  return rc;
}


int ds_batch_step(dsBatch* b, const dsReal* actions, dsReal* obs, dsReal* image, dsReal* rewards, uint8_t* done,
                  int* status, int flags) {
  if (!b) return DS_ERR_INVALID;
  ds__clearerr(&b->err);
  const size_t ad = (size_t)b->envs[0]->adim;
  if (!actions && ad > 0) return ds__seterr(&b->err, DS_ERR_INVALID, "batch step: actions is NULL");
  const size_t od = (size_t)ds__batch_odim(b), np = ds__batch_npix(b);
  int autoreset = (flags & DS_BATCH_AUTORESET) != 0;
  if (b->lockstep && autoreset) { /* all envs together, or none (an env that failed waits for the others) */
    int all = 1;
    for (int i = 0; i < b->n && all; i++) all = ds__batch_needs_reset(b->envs[i]);
    if (all) {
      const int rc = ds_batch_reset(b, NULL, NULL, obs, image, status);
      for (int i = 0; i < b->n; i++) {
        if (rewards) rewards[i] = 0;
        if (done) done[i] = 0;
      }
      return rc;
    }
    autoreset = 0;
  }
  if (b->bs) {
    ds__batch_shared_step(b, actions, obs, image, rewards, done, autoreset);
    return collect(b, status);
  }
  FOR_EACH_ENV_HEAVY(b, i) {
    dsEnv* e = b->envs[i];
    dsReal* o = obs ? obs + i * od : NULL;
    dsReal* im = image && np ? image + i * np : NULL;
    dsReal r = 0;
    int d = 0, rc;
    if (autoreset && ds__batch_needs_reset(e)) {
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

/* ---- backward ------------------------------------------------------------------- */
static int batch_backward(dsBatch* b, int builtin, const dsReal* adj_obs, const dsReal* adj_image,
                          const dsReal* adj_reward, dsReal* grad_actions, dsReal* losses, int* status) {
  if (!b) return DS_ERR_INVALID;
  ds__clearerr(&b->err);
  const dsEnv* e0 = b->envs[0];
  const size_t ns = (size_t)e0->nstep, od = (size_t)e0->odim, np = ds__batch_npix(b), ad = (size_t)e0->adim;
  if (adj_image && !np) return ds__seterr(&b->err, DS_ERR_INVALID, "batch backward: image adjoints need observation.image");
  for (int i = 0; i < b->n; i++) {
    dsEnvBwdSpec* sp = &b->specs[i];
    sp->builtin = builtin;
    sp->k0 = 0;
    sp->adj_obs = adj_obs && od ? adj_obs + (size_t)i * ns * od : NULL;
    sp->adj_image = adj_image ? adj_image + (size_t)i * ns * np : NULL;
    sp->adj_reward = adj_reward ? adj_reward + (size_t)i * ns : NULL;
    b->gas[i] = grad_actions && ad ? grad_actions + (size_t)i * ns * ad : NULL;
  }
  if (!b->taped) { /* every env its own backward, threads across envs */
    FOR_EACH_ENV_HEAVY(b, i) {
      const dsEnvBwdSpec* sp = &b->specs[i];
      b->rc[i] = builtin ? ds_env_backward_loss(b->envs[i], NULL, b->gas[i])
                         : ds_env_backward_adjoints(b->envs[i], sp->adj_obs, sp->adj_image, sp->adj_reward, b->gas[i]);
    }
    END_FOR_EACH_ENV();
  } else { /* one backward of the shared tape; envs whose episode failed are left out */
    int ref = -1;
    for (int i = 0; i < b->n; i++) {
      dsEnv* e = b->envs[i];
      ds__clearerr(&e->err);
      b->skip[i] = (unsigned char)(e->have_episode && e->failed);
      b->rc[i] = ds__env_bwd_prepare(e, &b->specs[i], 0, b->gas[i]);
      if (!b->rc[i] && ref < 0) ref = i;
      if (!b->rc[i] && e->d->t != b->envs[ref]->d->t)
        b->rc[i] = ds__seterr(&e->err, DS_ERR_STATE,
                              "backward: at substep %d while env %d is at %d: a lockstep batch goes back from one "
                              "substep",
                              e->d->t, ref, b->envs[ref]->d->t);
    }
    for (int i = 0; i < b->n; i++)
      if (b->rc[i] && !b->skip[i]) return collect(b, status);
    if (ref < 0) return collect(b, status); /* every episode failed */
    int rc = ds__env_group_backward(b->envs, b->n, b->bs, &b->bgr, b->specs, b->skip, 0, b->gas, b->bx, b->bv, b->badj,
                                    b->rcs);
    if (rc) {
      int named = 0;
      for (int i = 0; i < b->n; i++)
        if (b->envs[i]->err.code && !b->skip[i]) {
          b->rc[i] = b->envs[i]->err.code;
          named = 1;
        }
      for (int i = 0; i < b->n && !named; i++) b->rc[i] = rc;
      return collect(b, status);
    }
  }
  if (builtin && losses) {
    FOR_EACH_ENV(b, i, LOOP_BWD_POST) {
      if (!b->rc[i]) b->rc[i] = ds_env_loss(b->envs[i], &losses[i]);
    }
    END_FOR_EACH_ENV();
  }
  return collect(b, status);
}

int ds_batch_backward_loss(dsBatch* b, dsReal* losses, dsReal* grad_actions, int* status) {
  return batch_backward(b, 1, NULL, NULL, NULL, grad_actions, losses, status);
}

int ds_batch_backward_adjoints(dsBatch* b, const dsReal* adj_obs, const dsReal* adj_image, const dsReal* adj_reward,
                               dsReal* grad_actions, int* status) {
  return batch_backward(b, 0, adj_obs, adj_image, adj_reward, grad_actions, NULL, status);
}

int ds_batch_metric(const dsBatch* b, dsReal* metrics) {
  if (!b || !metrics) return DS_ERR_INVALID;
  for (int i = 0; i < b->n; i++) {
    int rc = ds_env_metric(b->envs[i], &metrics[i]);
    if (rc) return rc;
  }
  return 0;
}

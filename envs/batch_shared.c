/* Batched environments on one batched engine: env i is instance i of the
 * batch's engine (a CUDA device or the batched CPU backend) and its data
 * mirror that instance (envs/batch.c creates the batch). */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "envs/batch_priv.h"

/* The engine every env shares (instance i: env i); every env starts from
 * its own model at the first step (each is dirty after a reset). */
int ds__batch_create_shared(dsBatch* b, char* err, size_t errlen) {
  const dsEnv* e0 = b->envs[0];
  const size_t n = (size_t)b->n, n3 = (size_t)e0->n3, nact = (size_t)ds__env_bs_nact(e0->m);
  const size_t nas = (size_t)(e0->m->artic_nq + e0->m->artic_nv);
  dsBatchSimDef bd = ds_default_batch_sim_def();
  bd.batch = b->n;
  /* a tape needs one episode clock for all: lockstep batches only */
  b->taped = b->lockstep && e0->def.gradients;
  bd.max_substeps = b->taped ? e0->T : 0;
  bd.checkpoint_every = e0->def.checkpoint_every;
  bd.act_records = e0->nstep + 1;
  bd.fext_records = 1;
  bd.device = e0->def.device;
  char why[DS_ERRMSG_LEN], dn[32];
  int rc = ds_bsim_create(e0->m, &bd, &b->bs, why, sizeof why);
  if (rc) {
    if (err && errlen)
      snprintf(err, errlen, "%s: batch of %d: the batched engine on %s: %s", e0->cls->name, b->n,
               ds_device_name(bd.device, dn, sizeof dn), why);
    return rc;
  }
  /* bx also carries the articulation's adjoints in the backward (n x nas) */
  b->bx = (dsReal*)ds__calloc(n * (n3 > nas ? n3 : nas) + 1, sizeof(dsReal));
  b->bv = (dsReal*)ds__calloc(n * n3 + 1, sizeof(dsReal));
  b->bact = (dsReal*)ds__calloc(n * nact + 1, sizeof(dsReal));
  b->bas = (dsReal*)ds__calloc(n * nas + 1, sizeof(dsReal));
  b->s0 = (int*)ds__calloc(n, sizeof(int));
  b->s1 = (int*)ds__calloc(n, sizeof(int));
  b->r = (dsReal*)ds__calloc(n, sizeof(dsReal));
  b->badj = (dsReal*)ds__calloc(n * nact + 1, sizeof(dsReal));
  const size_t np = ds__batch_npix(b);
  b->floss = (dsReal*)ds__calloc(n, sizeof(dsReal));
  b->limg = (dsReal*)ds__calloc(n * np + 1, sizeof(dsReal));
  b->oimg = (dsReal*)ds__calloc(n * np + 1, sizeof(dsReal));
  b->have_oimg = (uint8_t*)ds__calloc(n, 1);
  if (!b->bx || !b->bv || !b->bact || !b->bas || !b->s0 || !b->s1 || !b->r || !b->badj || !b->floss || !b->limg || !b->oimg ||
      !b->have_oimg) {
    if (err && errlen) snprintf(err, errlen, "out of memory");
    return DS_ERR_NOMEM;
  }
  if ((rc = ds__env_group_render_make(&b->bgr, b->envs, b->n, b->bs))) {
    if (err && errlen) snprintf(err, errlen, "batch of %d: %s", b->n, ds_env_last_error(e0));
    return rc;
  }
  return 0;
}

/* ---- one engine for every env ------------------------------------------------------
 * A call runs in three phases: every env (threads across envs) checks and
 * records its action and writes its activations, or is reset; the engine
 * steps every instance together, in runs that end wherever some env keeps
 * a frame or ends its step (the state then comes back once for all, and the
 * envs with a frame there render it across threads); every env finishes its
 * step (observation, reward, image). Runs of substeps give the bits one run
 * gives, and the engine's substeps are the serial engine's (test_env_device),
 * so a member env gives what a separate env gives, bit for bit.
 *
 * Every instance runs every substep of a call. An env that is not stepped
 * (reset in the call, its action refused, its episode over) or whose step
 * ends before the others' (the last step of an episode can be shorter) has
 * its instance carried past its state, so it is marked dirty: the next call
 * that steps anything uploads its state again, as after a reset, set_state
 * or set_param. */

/* The step of env i fails with code and message (after "step k: "). */
static void fail_env(dsBatch* b, int i, int code, const char* msg) {
  dsEnv* e = b->envs[i];
  e->bs_dirty = !b->taped;
  b->rc[i] = ds__env_step_failed(e, b->s0[i] / e->C, code, msg);
  b->s0[i] = -1;
}

/* Every stepping env fails with the engine's own error. */
static void fail_engine(dsBatch* b, int code, const char* what) {
  char msg[DS_ERRMSG_LEN];
  snprintf(msg, sizeof msg, "batched engine: %s: %s", what, ds_bsim_last_error(b->bs));
  for (int i = 0; i < b->n; i++)
    if (b->s0[i] >= 0) fail_env(b, i, code, msg);
}

/* Every env's mirrored state into bx, bv (what a rewind to substep 0 uploads). */
static void gather_states(dsBatch* b) {
  const dsModel* m = b->envs[0]->m;
  const size_t n3 = (size_t)b->envs[0]->n3, nas = (size_t)(m->artic_nq + m->artic_nv);
  for (int i = 0; i < b->n; i++) {
    memcpy(b->bx + (size_t)i * n3, b->envs[i]->d->x, n3 * sizeof(dsReal));
    memcpy(b->bv + (size_t)i * n3, b->envs[i]->d->v, n3 * sizeof(dsReal));
    if (nas) memcpy(b->bas + (size_t)i * nas, b->envs[i]->d->artic_state, nas * sizeof(dsReal));
  }
}

/* Every instance back to substep 0 at the gathered states (an
 * articulation's own state when the model has one). */
static int rewind_all(dsBatch* b) {
  return b->envs[0]->m->artic ? ds_bsim_rewind_artic(b->bs, 0, b->bas) : ds_bsim_rewind(b->bs, 0, b->bx, b->bv);
}

/* A taped (lockstep) engine takes states only at its substep 0: every
 * env's state goes up at once, at a reset of all (restart) or after a
 * set_param before the first step; a change later in the episode is refused
 * (the tape holds one episode of every env). The message is on the batch. */
int ds__batch_lockstep_sync(dsBatch* b, int restart) {
  int dirty = restart ? 0 : -1;
  for (int i = 0; i < b->n && dirty < 0; i++)
    if (b->envs[i]->bs_dirty) dirty = i;
  if (dirty < 0) return 0;
  const int t = ds_bsim_time(b->bs);
  if (t != 0 && !restart)
    return ds__seterr(&b->err, DS_ERR_STATE,
                      "env %d was changed on the host at substep %d (set_state, set_param or its own reset): a "
                      "lockstep batch takes changes at the start of an episode only (reset the batch)",
                      dirty, t);
  gather_states(b);
  int rc = rewind_all(b);
  for (int i = 0; i < b->n && !rc; i++)
    if (!(rc = ds_bsim_load_params(b->bs, i, b->envs[i]->m))) b->envs[i]->bs_dirty = 0;
  return rc ? ds__seterr(&b->err, rc, "batched engine: uploading the envs: %s", ds_bsim_last_error(b->bs)) : 0;
}

/* Envs changed on the host (reset, set_state, set_param) into the engine:
 * each one's state and parameters into its instance, its failure cleared.
 * Every 2^30 substeps the engine's count restarts from the envs' states (it
 * numbers the substeps in failure reports). */
static int shared_sync(dsBatch* b) {
  if (b->taped) return ds__batch_lockstep_sync(b, 0);
  int rc = 0;
  if (ds_bsim_time(b->bs) >= (1 << 30)) {
    gather_states(b);
    if ((rc = rewind_all(b))) return rc;
  }
  for (int i = 0; i < b->n && !rc; i++) {
    dsEnv* e = b->envs[i];
    if (!e->bs_dirty) continue;
    rc = e->m->artic ? ds_bsim_set_artic_instance(b->bs, i, e->d->artic_state)
                     : ds_bsim_set_instance(b->bs, i, e->d->x, e->d->v);
    if (!rc) rc = ds_bsim_load_params(b->bs, i, e->m);
    if (!rc) e->bs_dirty = 0;
  }
  return rc;
}

/* Env i, stepped in this call, has a frame or its step's end at offset j of the call's runs. */
static int at_boundary(const dsBatch* b, int i, int j) {
  const int s0 = b->s0[i], L = b->s1[i] - s0;
  return s0 >= 0 && j <= L && (j == L || b->envs[i]->frame_at[s0 + j] >= 0);
}

/* The frames the envs at offset j keep that their loss counts, and their
 * step-end images (want_image), rendered where the engine runs, once for
 * every instance (b->floss, b->oimg; *dev_loss: floss holds them). When the
 * host renders them instead (ds__env_set_batched_frames(0)) nothing is
 * done; a failure is recorded on the envs at j. */
static void shared_render(dsBatch* b, int j, int want_image, int* dev_loss) {
  int need_loss = 0, need_img = 0;
  *dev_loss = 0;
  for (int i = 0; i < b->n; i++) {
    if (!at_boundary(b, i, j)) continue;
    const dsEnv* e = b->envs[i];
    need_loss |= ds__env_frame_counts(e, e->frame_at[b->s0[i] + j]);
    need_img |= want_image && e->def.obs_image && j == b->s1[i] - b->s0[i];
  }
  if (!need_loss && !need_img) return;
  const int rc = ds__env_group_render_now(b->envs, b->n, b->bs, &b->bgr, need_img ? b->limg : NULL,
                                          need_loss ? b->floss : NULL);
  if (rc == DS_ERR_UNSUPPORTED) return;
  if (rc) {
    for (int i = 0; i < b->n; i++)
      if (at_boundary(b, i, j)) { /* the message is on the env */
        b->rc[i] = rc;
        b->s0[i] = -1;
        b->envs[i]->bs_dirty = !b->taped;
      }
    return;
  }
  const size_t np = ds__batch_npix(b);
  for (int i = 0; i < b->n && need_img; i++)
    if (at_boundary(b, i, j) && j == b->s1[i] - b->s0[i] && b->envs[i]->def.obs_image) {
      memcpy(b->oimg + (size_t)i * np, b->limg + (size_t)i * np, np * sizeof(dsReal));
      b->have_oimg[i] = 1;
    }
  *dev_loss = need_loss;
}

/* The engine's substeps of every stepped env, its frames kept on the way. */
static void shared_run(dsBatch* b, int want_reward, int want_image) {
  const size_t n3 = (size_t)b->envs[0]->n3;
  memset(b->have_oimg, 0, (size_t)b->n);
  int rc = shared_sync(b);
  if (rc && b->taped) { /* the message is on the batch */
    for (int i = 0; i < b->n; i++)
      if (b->s0[i] >= 0) fail_env(b, i, rc, ds__errmsg(&b->err));
    return;
  }
  if (rc) return fail_engine(b, rc, "uploading the envs' states");
  if (ds__env_bs_nact(b->envs[0]->m) && (rc = ds_bsim_set_act(b->bs, b->bact)))
    return fail_engine(b, rc, "uploading the activations");
  int len = 0;
  for (int i = 0; i < b->n; i++)
    if (b->s0[i] >= 0 && b->s1[i] - b->s0[i] > len) len = b->s1[i] - b->s0[i];
  /* every env the engine does not carry through the whole call (not
     stepped, or its step ends before the others') leaves its instance ahead
     of its state: uploaded again before it steps next */
  for (int i = 0; i < b->n && !b->taped; i++)
    if (b->s0[i] < 0 || b->s1[i] - b->s0[i] < len) b->envs[i]->bs_dirty = 1;
  const int t0 = ds_bsim_time(b->bs);
  for (int j = 0; j < len;) {
    int next = len, need = 0, active = 0;
    for (int i = 0; i < b->n; i++) {
      const dsEnv* e = b->envs[i];
      const int s0 = b->s0[i], L = b->s1[i] - s0;
      if (s0 < 0 || j >= L) continue;
      int q = j + 1;
      while (q < L && e->frame_at[s0 + q] < 0) q++;
      if (q < next) next = q;
      active = 1;
    }
    if (!active) break; /* every stepped env failed */
    rc = ds_bsim_step(b->bs, next - j, NULL);
    if (rc == DS_ERR_INVERTED || rc == DS_ERR_DIVERGED) {
      for (int i = 0; i < b->n; i++) {
        const int s0 = b->s0[i];
        int sub = 0, el = 0;
        const int code = s0 < 0 || j >= b->s1[i] - s0 ? 0 : ds_bsim_failure(b->bs, i, &sub, &el);
        if (!code) continue;
        char msg[128];
        if (code == DS_ERR_INVERTED)
          snprintf(msg, sizeof msg, "substep %d: tet %d inverted (J <= 0)", s0 + sub - t0, el);
        else
          snprintf(msg, sizeof msg, "substep %d: particle %d position or velocity is not finite", s0 + sub - t0, el);
        fail_env(b, i, code, msg);
      }
    } else if (rc) {
      return fail_engine(b, rc, "substeps");
    }
    j = next;
    for (int i = 0; i < b->n && !need; i++) need = at_boundary(b, i, j);
    if (!need) continue;
    if ((rc = ds_bsim_get_state(b->bs, b->bx, b->bv))) return fail_engine(b, rc, "reading the states");
    const size_t nas = (size_t)(b->envs[0]->m->artic_nq + b->envs[0]->m->artic_nv);
    if (nas && (rc = ds_bsim_get_artic_state(b->bs, b->bas))) return fail_engine(b, rc, "reading the states");
    int dev_loss = 0;
    shared_render(b, j, want_image, &dev_loss);
    FOR_EACH_ENV(b, i, LOOP_BOUNDARY) {
      dsEnv* e = b->envs[i];
      if (at_boundary(b, i, j)) {
        memcpy(e->d->x, b->bx + (size_t)i * n3, n3 * sizeof(dsReal));
        memcpy(e->d->v, b->bv + (size_t)i * n3, n3 * sizeof(dsReal));
        if (nas) memcpy(e->d->artic_state, b->bas + (size_t)i * nas, nas * sizeof(dsReal));
        const int s = b->s0[i] + j;
        const int use = dev_loss && ds__env_frame_counts(e, e->frame_at[s]);
        const int rc_i = ds__env_step_at(e, s, want_reward, &b->r[i], use ? &b->floss[i] : NULL);
        if (rc_i) {
          b->rc[i] = rc_i;
          b->s0[i] = -1;
          e->bs_dirty = !b->taped;
        }
      }
    }
    END_FOR_EACH_ENV();
  }
}

void ds__batch_shared_step(dsBatch* b, const dsReal* actions, dsReal* obs, dsReal* image, dsReal* rewards,
                           uint8_t* done, int autoreset) {
  const size_t ad = (size_t)b->envs[0]->adim, od = (size_t)ds__batch_odim(b), np = ds__batch_npix(b);
  const size_t nact = (size_t)ds__env_bs_nact(b->envs[0]->m);
  FOR_EACH_ENV(b, i, LOOP_SHARED_PRE) {
    dsEnv* e = b->envs[i];
    b->s0[i] = -1;
    b->r[i] = 0;
    int rc;
    if (autoreset && ds__batch_needs_reset(e)) {
      const uint64_t s = b->seeded[i] ? b->seed[i] + (uint64_t)b->n : (uint64_t)i;
      b->seed[i] = s;
      b->seeded[i] = 1;
      rc = ds_env_reset(e, s, obs ? obs + i * od : NULL, image && np ? image + i * np : NULL);
      if (!rc) rc = DS_BATCH_RESET;
    } else {
      rc = ds__env_step_begin(e, actions + i * ad, &b->s0[i], &b->s1[i]);
      if (rc) b->s0[i] = -1;
      /* on a shared tape an env left behind by the others cannot catch up:
         it waits for the batch's next reset */
      if (rc && b->taped && e->have_episode && e->d->t < e->T) e->failed = 1;
    }
    b->rc[i] = rc;
    if (nact) memcpy(b->bact + i * nact, ds__env_bs_act(e->m, e->d), nact * sizeof(dsReal));
  }
  END_FOR_EACH_ENV();
  shared_run(b, rewards != NULL, image != NULL && np > 0);
  FOR_EACH_ENV(b, i, LOOP_SHARED_POST) {
    dsEnv* e = b->envs[i];
    dsReal r = 0;
    int d = 0;
    if (b->s0[i] >= 0) {
      const int rc = ds__env_step_end(e, b->r[i], obs ? obs + i * od : NULL, image && np ? image + i * np : NULL,
                                      b->have_oimg[i] ? b->oimg + i * np : NULL, &r, &d);
      b->rc[i] = rc ? rc : DS_BATCH_STEPPED;
    }
    if (rewards) rewards[i] = b->rc[i] < 0 ? 0 : r;
    if (done) done[i] = (uint8_t)(b->rc[i] < 0 ? 0 : d);
  }
  END_FOR_EACH_ENV();
}

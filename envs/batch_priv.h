/* Batched environments: the batch object and what envs/batch.c (the
 * batch API, envs stepped separately or together) and envs/batch_shared.c
 * (one batched engine for every env) share. Not installed. */
#ifndef DSIM_ENVS_BATCH_PRIV_H
#define DSIM_ENVS_BATCH_PRIV_H

#include "dsim/batch.h"
#include "envs/env_priv.h"

/* each light loop over the envs has its own thread choice (env_priv.h) */
enum { LOOP_RESET, LOOP_BOUNDARY, LOOP_SHARED_PRE, LOOP_SHARED_POST, LOOP_BWD_POST, LOOP_COUNT };

struct dsBatch {
  int n;
  dsEnv** envs;
  uint64_t* seed;   /* seed of each env's current (or last) episode */
  uint8_t* seeded;  /* a reset happened */
  int* rc;          /* scratch: per-env outcome of the last call */
  dsErrBuf err;
  /* One engine for every env (a definition on the batched engine, without
     gradients): env i is instance i of bs and its data mirror it */
  dsBatchSim* bs;
  dsEnvGroupRender* bgr; /* bs's renderer (frames, images, backward), made with bs */
  dsReal* floss;    /* n: frame losses rendered where bs runs */
  dsReal *limg, *oimg; /* n x npix: images rendered where bs runs; each env's step-end image */
  uint8_t* have_oimg; /* n: oimg holds env i's image of this call */
  dsReal *bx, *bv;  /* n x n3: every env's state, to and from bs */
  dsReal* bact;     /* n x nact: every env's activations (an articulation's actions) */
  dsReal* bas;      /* n x (nq + nv): every env's articulation state, to and from bs */
  int *s0, *s1;     /* per env: the substeps of its step in this call (s0 < 0: not stepped) */
  dsReal* r;        /* per env: the step's reward */
  /* lockstep (ds_batch_create_lockstep): the envs are reset together and
     step together; taped: the shared engine keeps the tape (gradients) */
  int lockstep, taped;
  dsEnvBwdSpec* specs; /* per env: what its backward starts from */
  dsReal** gas;     /* per env: its rows of grad_actions */
  dsReal* badj;     /* n x nact: action adjoints from the engine */
  int* rcs;         /* n: scratch */
  dsThreadPick pick[LOOP_COUNT]; /* the thread choice of each loop over the envs (LOOP_*) */
  unsigned char* skip; /* n: envs a backward leaves out (their episode failed) */
};

/* Runs body(i) for every env: threads across envs (envs/env_priv.h). */
#define FOR_EACH_ENV(b, i, loop) DS__ENVS_FOR_PICK((b)->n, i, &(b)->pick[loop])
#define FOR_EACH_ENV_HEAVY(b, i) DS__ENVS_FOR_HEAVY((b)->n, i)
#define END_FOR_EACH_ENV() DS__ENVS_END()

/* Values per env of an observation and of an image observation (0 without one). */
static inline int ds__batch_odim(const dsBatch* b) { return b->envs[0]->odim; }
static inline size_t ds__batch_npix(const dsBatch* b) {
  const dsEnvDef* d = &b->envs[0]->def;
  return d->obs_image ? 4 * (size_t)d->width * (size_t)d->height : 0;
}
/* Episode over or failed: what autoreset resets. */
static inline int ds__batch_needs_reset(const dsEnv* e) { return !e->have_episode || e->failed || e->d->t >= e->T; }

/* batch_shared.c: the engine every env shares (instance i: env i; message
 * into err); a lockstep batch's taped engine set to every env's start
 * (restart: a new episode); one call of ds_batch_step on it (autoreset:
 * envs whose episode is over are reset instead), outcomes in b->rc. */
int ds__batch_create_shared(dsBatch* b, char* err, size_t errlen);
int ds__batch_lockstep_sync(dsBatch* b, int restart);
void ds__batch_shared_step(dsBatch* b, const dsReal* actions, dsReal* obs, dsReal* image, dsReal* rewards,
                           uint8_t* done, int autoreset);

#endif

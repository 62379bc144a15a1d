/* Environments: internals shared by the env core (envs/env.c: creation and
 * queries; env_episode.c; env_backward.c; env_frames.c), the registry and
 * config tables (env_def.c) and batches (batch.c). Not installed. The
 * classes (walker.c, ...) do not include it: they use dsim/env.h only, as a
 * plugin does. */
#ifndef DSIM_ENVS_ENV_PRIV_H
#define DSIM_ENVS_ENV_PRIV_H

#include <stdint.h>

#include "dsim/engine.h"
#include "dsim/engine_batch.h"
#include "dsim/env.h"
#include "dsim/raster.h"
#include "base/internal.h"
#include "base/rng.h"

/* The frame terms of a group of envs on one batched engine, rendered and
 * differentiated where the engine's instances run (the batched renderer of
 * dsim/raster.h; env_frames.c). */
typedef struct dsEnvGroupRender dsEnvGroupRender;
void ds__env_group_render_free(dsEnvGroupRender* gr);
/* Tests: 0 renders the group's frames and images on the host, env by env
 * (the same bits; a backward's adjoints too when a frame is the only term
 * at its substep). */
void ds__env_set_batched_frames(int on);
int ds__env_batched_frames(void);
/* The renderer of n envs, instances 0..n-1 of bs, when they render at all
 * (image observations or an image loss) and batched frames are on; the
 * message on every env on failure. Otherwise made when first needed. */
int ds__env_group_render_make(dsEnvGroupRender** out, dsEnv** envs, int n, dsBatchSim* bs);
/* Whether frame f enters e's built-in loss (and its reward). */
int ds__env_frame_counts(const dsEnv* e, int f);
/* The n envs' positions now, instances 0..n-1 of bs, rendered where bs
 * runs (*grp made when first needed): the first view's images into images
 * (host, n x h x w x 4; NULL: none) and each env's frame loss (summed over
 * its views) into losses (NULL: none). DS_ERR_UNSUPPORTED (nothing done,
 * no message): render on the host instead. */
int ds__env_group_render_now(dsEnv** envs, int n, dsBatchSim* bs, dsEnvGroupRender** grp, dsReal* images,
                             dsReal* losses);

struct dsEnv {
  dsEnvDef def;
  const dsEnvClass* cls;
  void* cstate;         /* the class's state (create hook) */
  dsErrBuf err;
  char* config_text;  /* JSON the env was made from */

  /* sized objects (rebuilt together when a reset changes the scene) */
  dsModel* m;
  dsData* d;
  dsGrad* g;
  dsRaster* r;
  dsRaster* r2;         /* the second view (camera2), or NULL */
  dsImageLoss* il;     /* frame loss against the goal image */
  dsLossDef ldef;      /* its definition */
  dsReal* face_colors;  /* nface x 3 */
  dsReal* goal_x;       /* goal state positions, nparticle x 3 */
  dsReal* frame_x;      /* positions of every scheduled frame, nframe x n3 */
  dsReal* frame_loss;   /* image loss of every kept frame, nframe (valid where frame_done) */
  unsigned char* frame_done; /* nframe: 1 when frame_loss holds the kept frame's loss */
  dsReal* step_x;       /* positions at every step end, nstep x n3 */
  dsReal* step_v;       /* velocities at every step end, nstep x n3 */
  dsReal* actions;      /* nstep x adim */
  dsReal* adj_act;      /* scratch: nact */
  dsReal* adj_fext;     /* scratch: n3 */
  dsReal* fext_grad;    /* dL/d(external force of step k), nstep x n3 (env_force.c; every backward writes it) */
  int fext_lo, fext_hi; /* its rows [lo, hi) may be nonzero (the others are 0) */
  dsReal* sink;         /* scratch: adim (action adjoints nobody asked for) */
  /* the physics on the batched engine (def.device CUDA, or def.batch_engine):
     d is then a host mirror without a tape (x, v, act, adjoint scratch, t) */
  dsBatchSim* bs;
  dsEnvGroupRender* bgr; /* bs's frame renderer (made at the first backward that needs it), or NULL */
  dsReal* bgrad;        /* scratch: the largest parameter's count */
  dsReal* badj_act;     /* scratch: nact */
  int adj_dirty;        /* add_terms wrote into d->adj_x / d->adj_v since the last upload */
  dsReal light_grad[5]; /* dL/d(light.ambient, light.directional, light.direction) of the last backward */
  /* a member of a dsBatch that steps its envs on one shared batched engine
     (envs/batch.c): bs is NULL, the physics is instance bs_inst of the
     batch's engine, and d mirrors it as above */
  int bs_member, bs_inst;
  int bs_dirty;         /* the mirror's state or parameters changed on the host (reset, set_state,
                           set_param): the batch uploads them before its next substep */

  /* size-independent buffers */
  dsReal* goal_img;     /* h x w x 4 */
  dsReal* goal_img2;    /* h x w x 4: the goal seen from the second view (camera2), or NULL */
  dsReal* img;          /* h x w x 4 scratch */
  dsReal* img_grad;     /* h x w x 4 scratch */
  int* frame_at;        /* substep 0..T -> frame index or -1 */
  int* frame_t;         /* frame index -> substep */
  unsigned char* set_at; /* substep 0..T -> 1 where ds_env_set_state put another state than the episode's */

  int np, n3, adim, odim, nstep, nframe, T, C, R;

  /* episode */
  int have_episode;     /* a reset happened */
  int have_goal;        /* goal_x and goal_img hold the goal of the current start */
  unsigned goal_serial; /* counts the goal images rendered (a batched renderer's uploads follow it) */
  uint64_t goal_seed;   /* the seed of the current episode */
  dsReal goal_draw;     /* the goal x drawn from it (before the relative offset) */
  dsReal* x0_def;       /* the start the definition gives (built, placed by the class's reset) */
  int failed;           /* the simulation diverged: reset needed */
  dsReal target[3];     /* target centre of mass, m */
  dsReal com0[3];       /* centre of mass at substep 0 */
  int did_backward;
};

/* env.c: creation (text may be NULL; member: the env joins a batch's shared
 * engine, see bs_member). env_episode.c: ds_env_step in phases for such a
 * batch:
 * begin checks and records the action and writes the activations into d->act
 * (s0, s1: the step's substeps); at(s), once d->x, d->v hold the state at
 * substep s (s0 < s <= s1), keeps the frame there (frame_loss, not NULL:
 * its loss, rendered where the engine runs) and adds its reward term;
 * end writes what ds_env_step returns (rendered, not NULL: the image,
 * rendered where the engine runs); failed records a simulation failure
 * in step k (message after "step k: "). */
int ds__env_create(const dsEnvDef* def, const char* name, const char* text, int member, dsEnv** out, char* err,
                   size_t errlen);
int ds__env_step_begin(dsEnv* e, const dsReal* action, int* s0, int* s1);
int ds__env_step_at(dsEnv* e, int s, int want_reward, dsReal* r, const dsReal* frame_loss);
int ds__env_step_end(dsEnv* e, dsReal r, dsReal* obs, dsReal* image, const dsReal* rendered, dsReal* reward,
                     int* done);
int ds__env_step_failed(dsEnv* e, int k, int rc, const char* msg);
/* What the batched engine takes as activations: an articulation's actions
 * (d->artic_act, nu of them) or the model's activations. */
static inline int ds__env_bs_nact(const dsModel* m) { return m->artic ? m->artic_nu : m->nact; }
static inline dsReal* ds__env_bs_act(const dsModel* m, dsData* d) { return m->artic ? d->artic_act : d->act; }
/* A class whose action is an initial condition set by its own hook
 * (DS_ACTION_INITIAL without act_first, as control-cloth's velocity): on
 * the batched engine the hook runs on the host mirror before substep 0 and
 * the state it leaves goes up as the instance's substep-0 state; in the
 * backward the hook reads the state adjoints at substep 0 read back from
 * the engine (initial_bwd in envs/env_backward.c). */
static inline int ds__env_initial_hook(const dsEnv* e) {
  return !e->cls->act_first && !e->m->artic && e->cls->action_kind == DS_ACTION_INITIAL && !e->cls->uses_external_force;
}

/* Threads across n envs (OpenMP, nested regions made inactive for the loop:
 * each env runs single-threaded inside); one thread when n is 1 or OpenMP
 * has one. Used as DS__ENVS_FOR(n, i) { body } DS__ENVS_END(); or with
 * DS__ENVS_FOR_PICK(n, i, pick), where pick (a dsThreadPick*, base/internal.h)
 * chooses one thread or all from the clock: under load a loop on all
 * threads can wait a whole time slice for a descheduled worker. For loops
 * whose every env does much work (a step of its own engine, a whole
 * backward), DS__ENVS_FOR_HEAVY: all threads, envs handed out one at a time,
 * so a thread slowed by another process on its core takes fewer of them.
 * One loop, DS__ENVS_LOOP_, with the pick and the schedule as arguments. */
#ifdef _OPENMP
#  include <omp.h>
#  define DS__PRAGMA_(...) _Pragma(#__VA_ARGS__)
#  define DS__ENVS_LOOP_(n, i, pick, ...)                                        \
    {                                                                            \
      dsThreadPick* const pk_ = (pick);                                          \
      int arm_;                                                                  \
      const int nt_ = ds__pick_begin(pk_, (n), 2, &arm_);                        \
      const double t0_ = arm_ >= 0 ? ds__clock() : 0;                            \
      const int par_ = nt_ > 1;                                                  \
      const int levels_ = omp_get_max_active_levels();                           \
      if (par_) omp_set_max_active_levels(1);                                    \
      DS__PRAGMA_(omp parallel for schedule(__VA_ARGS__) num_threads(nt_) if (par_)) \
      for (int i = 0; i < (n); i++)
#  define DS__ENVS_END()                                         \
      if (par_) omp_set_max_active_levels(levels_);              \
      if (arm_ >= 0) ds__pick_end(pk_, arm_, ds__clock() - t0_); \
    }
#else
#  define DS__ENVS_LOOP_(n, i, pick, ...) { for (int i = 0; i < (n); i++)
#  define DS__ENVS_END() }
#endif
#define DS__ENVS_FOR_PICK(n, i, pick) DS__ENVS_LOOP_(n, i, pick, static)
#define DS__ENVS_FOR(n, i) DS__ENVS_FOR_PICK(n, i, NULL)
#define DS__ENVS_FOR_HEAVY(n, i) DS__ENVS_LOOP_(n, i, NULL, dynamic, 1)

/* What a backward starts from: the built-in loss, or the caller's adjoints
 * of observations, images and rewards (steps x size each; NULL: 0). k0: the
 * step of their row 0 (a window's first step; 0 otherwise): terms of steps
 * before k0 are not part of the loss. */
typedef struct dsEnvBwdSpec {
  int builtin;
  const dsReal* adj_obs;
  const dsReal* adj_image;
  const dsReal* adj_reward;
  int k0;
} dsEnvBwdSpec;

/* env_backward.c: the backward of steps first .. last - 1 of e from the
 * caller's adjoints (sp->k0 == first; rows of sp's arrays and of
 * grad_actions are window rows), adj_final (ds_env_get_state layout, may be
 * NULL) the adjoint of the state at the end of step last - 1, grad_state0
 * (same layout, may be NULL) dL/d(state at the start of step first). */
int ds__env_backward_window(dsEnv* e, const dsEnvBwdSpec* sp, int first, int last, const dsReal* adj_final,
                            dsReal* grad_actions, dsReal* grad_state0);
/* env_force.c: before a backward, the rows of e->fext_grad the last one
 * wrote back to 0; after the pop of substep s of step k, dL/d(f_ext over s)
 * (e->adj_fext) into row k (the force is held over the step). */
void ds__env_force_bwd_clear(dsEnv* e);
void ds__env_force_bwd(dsEnv* e, int k);

/* env_backward.c: the checks before a backward of e down to step `first` (gradients kept,
 * an episode, not failed, image adjoints with image observations), then
 * its outputs cleared (grad_actions' rows, the parameter gradients). */
int ds__env_bwd_prepare(dsEnv* e, const dsEnvBwdSpec* sp, int first, dsReal* grad_actions);
/* Then the backward of n such envs that are instances 0..n-1 of one batched
 * engine bs (n = 1: an env's own engine), all at the same substep of one
 * schedule, down to the start of step `first` (*gr: the group's frame
 * renderer, made when first needed, freed by the owner of bs): sp[i] and
 * grad_actions[i] (steps x action_size, or NULL) are env i's; bx, bv (n x n3; unused when n
 * is 1), badj (n x nact) and rcs (n) are scratch. Host terms run across
 * threads. skip (n, or NULL): envs left out (their episode failed: their
 * instance's adjoints are meaningless), not all of them. On failure the
 * message is on the env that failed, or on every env for the engine's own
 * errors. */
int ds__env_group_backward(dsEnv** envs, int n, dsBatchSim* bs, dsEnvGroupRender** gr, const dsEnvBwdSpec* sp,
                           const unsigned char* skip, int first, dsReal* const* grad_actions, dsReal* bx, dsReal* bv,
                           dsReal* badj, int* rcs);

/* env_def.c: the env section's key table (common keys, then the class's, in
 * group order) for def->cls, into tab (cap entries, NULL-terminated), with
 * offsets into a dsEnvParse; returns the count or a negative code. */
typedef struct dsEnvParse {
  dsEnvDef def;
  char name[64];
} dsEnvParse;
int ds__env_key_table(const dsEnvClass* cls, dsConfigKey* tab, int cap);
#define DS__ENV_MAX_KEYS 192
/* Common and class checks of a definition; message into eb. */
int ds__env_validate_def(const dsEnvDef* def, dsErrBuf* eb);

/* ---- shared by the env core's files ---------------------------------------- */
/* env.c: centre of mass of positions x (mass-weighted); |com(x) - target|^2. */
void ds__env_com(const dsModel* m, const dsReal* x, dsReal c[3]);
dsReal ds__env_com_loss(const dsEnv* e, const dsReal* x);
/* The action into the data before substep s of step k, and its adjoint
 * (grad += dL/da) after the pop of substep s: an activation block
 * (cls->act_first) or the class's hooks. */
void ds__env_action_fwd(dsEnv* e, int k, int s, const dsReal* a);
void ds__env_action_bwd(dsEnv* e, int k, int s, const dsReal* a, dsReal* grad);
/* The render mesh of positions x (the model's faces, flat face colours);
 * the first view's render of x into image (message on e on failure). */
dsRasterMesh ds__env_raster_mesh(const dsEnv* e, const dsReal* x);
/* ds_raster_backward of renderer r (e->r or e->r2) that also adds the
 * lights' gradient into e->light_grad (ds_raster_backward_light). */
int ds__env_raster_backward(dsEnv* e, dsRaster* r, const dsRasterMesh* rm, const dsReal* d_image, dsReal* d_x);
int ds__env_render_x(dsEnv* e, const dsReal* x, dsReal* image);
/* The state observation of (x, v) into obs (NULL: none). */
void ds__env_write_obs(const dsEnv* e, const dsReal* x, const dsReal* v, dsReal* obs);
/* DS_ERR_STATE with a message: `what` is refused for a member of a batch's
 * shared engine (it keeps the topology the engine was made for). */
int ds__env_refuse_member(dsEnv* e, const char* what);
/* env_episode.c: frames taken by substep t; the image loss of positions x
 * summed over the views (w != 0: its gradient times w added into
 * d->adj_x; what, f: for messages). */
int ds__env_frames_done(const dsEnv* e, int t);
int ds__env_frame_image_loss(dsEnv* e, const dsReal* x, dsReal* loss, dsReal w, const char* what, int f);
/* env_backward.c: the weight of frame f's loss (at substep s, nf frames
 * kept) in the loss a backward differentiates; an engine error on every
 * env of a group. */
dsReal ds__env_frame_weight(const dsEnv* e, const dsEnvBwdSpec* sp, int s, int f, int nf);
int ds__env_group_fail(dsEnv** envs, int n, dsBatchSim* bs, int rc, const char* what);
/* env_frames.c: the rendered terms at substep s of every env of the group
 * (frame f of all of them, the image observations' adjoints at a step's
 * end), added to the adjoints of the group's engine; ref: an env not
 * skipped. */
int ds__env_group_rendered(dsEnv** envs, int n, dsBatchSim* bs, dsEnvGroupRender** grp, const dsEnvBwdSpec* sp,
                           const unsigned char* skip, int ref, int s, int t, int nf);

#endif

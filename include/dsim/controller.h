/* dsim controllers: the sinusoid network, optimisers (Adam, SGD with
 * momentum), whole-episode optimisation, receding-horizon MPC, the baselines
 * (random, 3-D state loss, CEM) and an episode recorder for run logs. They use
 * only the public environment API (dsim/env.h).
 *
 *   dsTrainerDef td = ds_default_trainer_def();        // or ds_trainer_def_from_text(...)
 *   td.method = DS_METHOD_IMAGE;
 *   dsTrainer* tr; ds_trainer_create(env, &td, &tr, err, sizeof err);
 *   for (int i = 0; i < 40; i++) { dsTrainerIter it; ds_trainer_iterate(tr, &it); }
 *   ds_trainer_destroy(tr);
 *
 * Time of a control step. The action of step k is held over substeps
 * kC .. (k+1)C - 1, so the network is evaluated at the step's start,
 * t_k = k C dt (C: control interval, dt: substep).
 *
 * Controller parameters, gradients and optimiser state are double in every
 * build (they are small); actions are dsReal like the env's. Every buffer is
 * allocated at create; iterate allocates nothing. */
#ifndef DSIM_CONTROLLER_H
#define DSIM_CONTROLLER_H

#include <stddef.h>
#include <stdint.h>

#include "dsim/base.h"
#include "dsim/env.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- sinusoid network --------------------------------------------------------
 * a_i(t) = strength * tanh( sum_q W_iq s_q(t) ),  i = 0..A-1, with the
 * N = H P + B inputs
 *   s_{h P + p}(t) = sin((h + 1) omega t + p phi),  h = 0..H-1, p = 0..P-1
 *   s_{H P}(t)     = 1                              (when bias, B = 1)
 * (the phase p phi is added, not multiplied by the frequency): H harmonics
 * of omega, each at P phases; two phases that are not a multiple of pi apart
 * already span every phase of a harmonic. H = 1 without bias is gradSim's
 * single-frequency network. One fully connected layer; W (A x N, row-major)
 * is drawn W_iq ~ U(-b, b) from the seed, b = init_scale, or 1/sqrt(N) when
 * init_scale is 0 (the usual fan-in bound of a linear layer). */
typedef struct dsSinNetDef {
  int phases;          /* P, sinusoid phases per harmonic */
  int outputs;         /* A, actuated elements (the env's action size) */
  double omega;        /* base angular frequency, rad/s */
  double phase_step;   /* phi, rad */
  double strength;     /* output scale (activation units) */
  double init_scale;   /* b of the uniform init; 0: 1/sqrt(N) */
  uint64_t seed;       /* init seed */
  int harmonics;       /* H >= 1: frequencies omega, 2 omega, ..., H omega (0 is read as 1) */
  int bias;            /* 1: a constant input (a learned offset per output) */
} dsSinNetDef;

typedef struct dsSinNet dsSinNet;

DS_API dsSinNetDef ds_default_sinnet_def(void);
DS_API int ds_sinnet_create(const dsSinNetDef* def, dsSinNet** out);
DS_API void ds_sinnet_destroy(dsSinNet* net);
DS_API int ds_sinnet_num_params(const dsSinNet* net);      /* A * N, N = H P + bias */
DS_API double* ds_sinnet_params(dsSinNet* net);            /* W, A x N row-major (writable) */
/* Redraw W from seed (same distribution as create). */
DS_API int ds_sinnet_init(dsSinNet* net, uint64_t seed);
/* action (A) at time t, s. */
DS_API int ds_sinnet_forward(dsSinNet* net, double t, dsReal* action);
/* grad_params (A x N) += d(L)/dW given grad_action = d(L)/d(action at t):
 * dL/dW_iq = g_i * strength * (1 - tanh^2(z_i)) * s_q(t). */
DS_API int ds_sinnet_backward(dsSinNet* net, double t, const dsReal* grad_action, double* grad_params);

/* ---- optimisers ------------------------------------------------------------
 * Step k (k = 0, 1, ...) with gradient g:
 *   clipping:  g <- g * min(1, clip_norm / |g|)   (clip_norm 0: off)
 *   schedule:  lr_k = lr * decay_factor^floor(k / decay_every) * s (decay_every 0: constant;
 *              s: the factor of ds_optim_set_lr_scale, 1 unless set)
 *   Adam:      m <- b1 m + (1-b1) g; v <- b2 v + (1-b2) g^2;
 *              x <- x - lr_k (m / (1-b1^(k+1))) / (sqrt(v / (1-b2^(k+1))) + eps)
 *   SGD:       u <- momentum u + g; x <- x - lr_k u */
typedef enum dsOptimKind { DS_OPTIM_ADAM = 0, DS_OPTIM_SGD = 1 } dsOptimKind;

typedef struct dsOptimDef {
  int kind;             /* dsOptimKind */
  double lr;            /* learning rate */
  double beta1, beta2, eps; /* Adam */
  double momentum;      /* SGD */
  double clip_norm;     /* gradient-norm clipping threshold (0: off) */
  int decay_every;      /* step decay period in steps (0: no decay) */
  double decay_factor;  /* multiplier per period */
} dsOptimDef;

typedef struct dsOptim dsOptim;

/* kind with lr 1e-2, Adam (0.9, 0.999, 1e-8), momentum 0.9 (SGD), no
 * clipping, no decay. */
DS_API dsOptimDef ds_default_optim_def(int kind);
DS_API int ds_optim_create(const dsOptimDef* def, int n, dsOptim** out);
DS_API void ds_optim_destroy(dsOptim* opt);
/* Forget the moments and the step count. */
DS_API void ds_optim_reset(dsOptim* opt);
/* One step on x (n values) with gradient g; *grad_norm (may be NULL) gets |g|
 * before clipping. */
DS_API int ds_optim_step(dsOptim* opt, double* x, const double* g, double* grad_norm);
/* Learning rate the next step will use. */
DS_API double ds_optim_lr(const dsOptim* opt);
/* Multiply the base learning rate by f > 0 (the schedule keeps applying). */
DS_API int ds_optim_scale_lr(dsOptim* opt, double f);
/* Set the factor s > 0 of the schedule above to f (it replaces the previous
 * factor; ds_optim_reset sets it back to 1). The trainer's lr_loss_power
 * sets it before every step. */
DS_API int ds_optim_set_lr_scale(dsOptim* opt, double f);

/* ---- trainer: whole-episode optimisation, MPC and baselines ----------------
 * Methods (every iteration costs one rollout of the episode from reset(env_seed)):
 *   IMAGE   the env's built-in loss (the config's loss.kind: image loss of the
 *           bundled configs); one rollout, one backward, one optimiser step.
 *   STATE   3-D state loss |com_T - target|^2 (com from the env's COM
 *           observation, target from ds_env_target) instead of the built-in
 *           loss; needs obs_state COM.
 *   RANDOM  a fresh parameter draw from the init distribution per iteration
 *           (forward only).
 *   CEM     cross-entropy method over the same parameters, one sample per
 *           iteration (so the same number of rollouts as the gradient methods):
 *           generations of cem_population samples, then mean and std from the
 *           cem_elite lowest-loss ones (std floored at cem_min_std). The first
 *           sample is the mean (the gradient methods' initial parameters).
 *           A generation's samples are drawn and run when it starts, side by
 *           side: on the env and on forward-only copies of it (made at
 *           ds_trainer_create from its definition and parameters, one per
 *           further OpenMP thread, up to the population); each iteration
 *           then reports one. Results are the same bits for any thread
 *           count, and the same as running the samples one by one.
 * The loss CEM and RANDOM rank by is the built-in loss.
 * Backtracking (IMAGE, STATE, whole episode): when the rollout after an
 * optimiser step diverges or inverts an element, the step is halved towards
 * the parameters of the previous (successful) episode and the episode run
 * again, up to max_backtracks times; the iteration reports how many. The
 * optimiser's moments are kept. The first iteration has nothing to fall back
 * on, so its failure is returned.
 * Rejected steps (IMAGE, STATE, whole episode, reject = f in (0, 1)): the
 * trainer keeps the parameters with the lowest loss so far and their
 * gradient. When an episode's loss exceeds that lowest loss, the iteration is
 * marked rejected: the learning rate is multiplied by f (for the rest of the
 * run) and the next parameters are one optimiser step from the best ones with
 * their gradient, instead of a step from the rejected ones. The optimiser's
 * moments are kept. A run thus ends on, or one shortened step from, its best
 * parameters rather than wherever an overshoot left it. Every iteration still
 * costs one rollout.
 * Loss-scaled steps (IMAGE, STATE, whole episode, lr_loss_power = p > 0): the
 * step taken after episode k uses the learning rate
 *   lr_k * min(1, (L_k / L_0)^p)        (ds_optim_set_lr_scale)
 * with L_0 the first episode's loss and L_k the loss of the parameters the
 * step starts from (the best ones after a rejection). Adam's step does not
 * shrink with the gradient, so without a schedule it keeps its length at the
 * goal; with a loss about quadratic in the distance to the goal, p = 1/2
 * makes the step proportional to that distance (a proportional controller
 * instead of a schedule by iteration count). The reported lr includes the
 * factor. MPC passes ignore it.
 * Iteration 0 of IMAGE, STATE and CEM evaluates the same initial parameters.
 *
 * Policies: SINNET (the sinusoid network, the muscle envs) or CONSTANT (one
 * action vector for every step: control-cloth's initial velocity, initialised
 * from const_init, the config's controller.initial_action). AUTO picks
 * CONSTANT for an env whose action is an initial condition
 * (ds_env_action_kind DS_ACTION_INITIAL: control-cloth).
 *
 * MPC (mpc = 1, IMAGE or STATE): one iteration is one receding-horizon pass over
 * the episode: from the executed state at step j, roll out the window
 * j .. j+H-1 mpc_inner times (each: loss at the window's end, backward, one
 * optimiser step; the env's IMAGE_LAST loss is that of the last frame rendered
 * so far), then execute steps j .. j+E-1 with the updated parameters and shift
 * j += E. Parameters and optimiser moments carry over (warm start) to the next
 * window and the next pass. The reported loss and metric are those of the
 * executed episode. The backward of a window stops at its start
 * (ds_env_backward_loss_from), so a pass costs about
 * S + mpc_inner * (S/E) * H * (1 + b) steps (b: backward/forward cost ratio). */
typedef enum dsMethod { DS_METHOD_IMAGE = 0, DS_METHOD_STATE = 1, DS_METHOD_RANDOM = 2, DS_METHOD_CEM = 3 } dsMethod;
typedef enum dsPolicyKind { DS_POLICY_AUTO = 0, DS_POLICY_SINNET = 1, DS_POLICY_CONSTANT = 2 } dsPolicyKind;

typedef struct dsTrainerDef {
  int method;            /* dsMethod */
  int policy;            /* dsPolicyKind */
  uint64_t seed;         /* parameter init, random draws, CEM samples */
  uint64_t env_seed;     /* ds_env_reset seed (goal) of every rollout */
  dsSinNetDef net;       /* outputs is set from the env */
  double const_init[3];  /* CONSTANT: initial action (first min(3, A) values, rest 0) */
  double random_scale;   /* RANDOM / CONSTANT: half-width of the uniform draw; 0: the net's init bound */
  dsOptimDef optim;
  int mpc;               /* 0: whole episode; 1: receding horizon */
  int mpc_horizon;       /* H, control steps (0: ceil(S/4)) */
  int mpc_execute;       /* E, control steps executed per window (0: ceil(H/2)) */
  int mpc_inner;         /* optimiser steps per window (>= 1) */
  int cem_population;    /* samples per generation (>= 2) */
  int cem_elite;         /* elites per generation (1 .. population) */
  double cem_init_std;   /* initial std (0: the net's init bound; CONSTANT: 1) */
  double cem_min_std;    /* std floor */
  int max_backtracks;    /* IMAGE/STATE whole episode: halvings of a step whose rollout diverged (6) */
  double reject;         /* IMAGE/STATE whole episode: 0 off; f in (0, 1): a step whose episode's loss
                            exceeds the lowest so far is rejected (see Rejected steps) */
  double lr_loss_power;  /* IMAGE/STATE whole episode: 0 off; p > 0: loss-scaled steps (see there) */
} dsTrainerDef;

/* The defaults (the only place they are defined): image method, automatic
 * policy, ds_default_sinnet_def(), ds_default_optim_def(DS_OPTIM_ADAM), whole
 * episode, CEM population 8 / elite 2, 6 backtracks, seed 0. */
DS_API dsTrainerDef ds_default_trainer_def(void);
/* Keys of a config's "controller" section (NULL-terminated; offsets into a
 * dsTrainerDef): policy, phases, omega, phase_step, strength, init_scale,
 * initial_action, random_scale, optimizer, lr, beta1, beta2, eps, momentum,
 * clip, decay_every, decay_factor, mpc, horizon, execute, inner, population,
 * elite, cem_init_std, cem_min_std, max_backtracks, reject, lr_loss_power. */
DS_API const dsConfigKey* ds_trainer_keys(void);
/* Parse the "controller" section of a run config into *def (starting from
 * *def: pass the defaults); errors name the file and "controller.key". The
 * cross-field checks are ds_trainer_def_validate's. */
DS_API int ds_trainer_def_from_text(const char* name, const char* text, dsTrainerDef* def, char* err, size_t errlen);
/* Cross-field checks (also done by ds_trainer_create). */
DS_API int ds_trainer_def_validate(const dsTrainerDef* def, char* err, size_t errlen);

/* ---- run settings: a config's "run" section ----------------------------------
 * What one `dsim run` does with the env and the controller. */
#define DS_RUN_OUT_MAX 1024
typedef struct dsRunDef {
  uint64_t seed;        /* goal (env reset) and controller seed */
  int iterations;       /* optimisation iterations, one rollout each (40) */
  int method;           /* dsMethod (image) */
  int threads;          /* OpenMP threads; 0: OMP_NUM_THREADS or all cores */
  char device[16];      /* "cpu", "cuda" or "cuda:N" (dsim/device.h); envs run on "cpu" only so far */
  char out[DS_RUN_OUT_MAX]; /* run log; "": runs/ENV-METHOD[-mpc]-sSEED.h5 */
} dsRunDef;
DS_API dsRunDef ds_default_run_def(void);
/* Keys of the "run" section: seed, iterations, method, threads, device, out. */
DS_API const dsConfigKey* ds_run_keys(void);
DS_API int ds_run_def_from_text(const char* name, const char* text, dsRunDef* def, char* err, size_t errlen);
/* "image", "state", "random", "cem" (NULL otherwise); parse: the dsMethod,
 * DS_ERR_NOTFOUND for another name, DS_ERR_INVALID for NULL. */
DS_API const char* ds_method_name(int method);
DS_API int ds_method_parse(const char* name);

typedef struct dsTrainer dsTrainer;

typedef struct dsTrainerIter {
  int iteration;          /* 0-based */
  double loss;            /* the optimised loss of the evaluated episode */
  double metric;          /* ds_env_metric at the episode's end */
  double grad_norm;       /* |dL/dparams| (0 for RANDOM, CEM; MPC: mean over the pass's windows) */
  double lr;              /* learning rate used by the step (0 when none) */
  const double* params;   /* nparams: the parameters that produced the episode */
  int nparams;
  const dsReal* actions;  /* nsteps x action_dim: the executed actions */
  int nsteps, action_dim;
  int backtracks;         /* step halvings this iteration needed (see Backtracking) */
  int rejected;           /* 1: the episode's loss exceeded the lowest so far; the next parameters
                             are a shorter step from the best (see Rejected steps) */
} dsTrainerIter;

/* The trainer drives env (which it does not own; keep env alive). */
DS_API int ds_trainer_create(dsEnv* env, const dsTrainerDef* def, dsTrainer** out, char* err, size_t errlen);
DS_API void ds_trainer_destroy(dsTrainer* tr);
/* One iteration (see above). Pointers in *it stay valid until the next call.
 * Env failures (DS_ERR_DIVERGED, ...) are returned with a message. */
DS_API int ds_trainer_iterate(dsTrainer* tr, dsTrainerIter* it);
DS_API const char* ds_trainer_last_error(const dsTrainer* tr);
DS_API int ds_trainer_num_params(const dsTrainer* tr);
/* Current parameters (writable: the optimiser's iterate / CEM mean). */
DS_API double* ds_trainer_params(dsTrainer* tr);

/* ---- episode recorder ------------------------------------------------------
 * Replays an action sequence (S x A of the source env) from reset(seed) in a
 * private env built from the source's definition with the control interval
 * g = gcd(C, R, stride) (each action repeated C/g times, the same trajectory)
 * and sqrt(T) checkpointing (no backward), to store what a run log needs:
 * positions and velocities at every stride-th substep and the last (rows of
 * a (T+1) x N x 3 array; the other rows are zero), RGBA frames as uint8 at the
 * env's render schedule (substeps 0, R, 2R, ... < T, plus T with render_last),
 * the goal image, the actions, and the loss and metric. */
/* The record type, dsEpisodeRecord, is in dsim/base.h: run logs store it as is. */

typedef struct dsRecorder dsRecorder;

DS_API int ds_recorder_create(const dsEnv* src, int stride, dsRecorder** out, char* err, size_t errlen);
DS_API void ds_recorder_destroy(dsRecorder* rec);
/* Record one episode (of optimisation iteration `iteration`, kept in the
 * record); *out stays valid until the next call. */
DS_API int ds_recorder_record(dsRecorder* rec, uint64_t seed, int iteration, const dsReal* actions,
                              const dsEpisodeRecord** out);
DS_API const char* ds_recorder_last_error(const dsRecorder* rec);

#ifdef __cplusplus
}
#endif
#endif

/* dsim batched environments: N environments of one definition (own seeds,
 * own parameters) stepped together in one call, OpenMP across the envs.
 *
 *   dsBatch* b;
 *   ds_batch_create(&def, 64, &b, err, sizeof err);   // or _from_text
 *   ds_batch_reset(b, seeds, NULL, obs, NULL, status);  // seeds: 64 values
 *   for (;;) ds_batch_step(b, actions, obs, NULL, rewards, done, status, DS_BATCH_AUTORESET);
 *   ds_batch_destroy(b);
 *
 * Arrays are env-major: actions N x action_size, obs N x obs_size, image
 * N x h x w x 4 (only with observation.image), rewards/done/status N.
 *
 * Threads. The envs are split over the threads statically (one env is never
 * shared by two threads); inside the batch every env runs single-threaded
 * (nested OpenMP regions are made inactive for the call). An env's result is
 * a function of its seed, its parameters and its actions only, so a batch
 * gives, bit for bit, what N separate envs give, for any OMP_NUM_THREADS.
 *
 * Autoreset (flag DS_BATCH_AUTORESET, Gymnasium's "next step" mode): an env
 * whose previous step ended its episode (done), or failed, is reset in this
 * call instead of stepped (its action is ignored): status DS_BATCH_RESET,
 * reward 0, done 0, obs the reset observation. Its seed is the previous
 * episode's plus N (env i of seeds s_i gets s_i, s_i + N, s_i + 2N, ...: no
 * two episodes of a batch share a seed when the s_i are distinct modulo N).
 * Without the flag, stepping such an env reports DS_ERR_STATE in its status.
 *
 * Errors. Each env's outcome is in status[i]: DS_BATCH_STEPPED (0),
 * DS_BATCH_RESET (1) or a negative code, whose message is
 * ds_env_last_error(ds_batch_env(b, i)). The call returns 0 when no env
 * failed, otherwise the code of the first failed env (by index), and
 * ds_batch_last_error then names that env ("env 3: step 12: element 7
 * inverted"). A failed env (diverged, inverted) needs a reset; the others
 * carry on. Nothing is allocated after create.
 *
 * One engine for all. On the batched engine (dsEnvDef.device a CUDA device,
 * or dsEnvDef.batch_engine) without gradients (physics.gradients false: RL),
 * the N envs share one dsBatchSim of N instances, env i its instance i: a
 * call sends every env's activations once, steps all instances together and
 * reads every state back at each frame and at the step's end, while resets,
 * frames, rewards and observations run on the host across threads. The
 * envs may be at different steps of their episodes (autoreset); an env that
 * starts over sends its own state and parameters only. Results are those of
 * separate envs, bit for bit on the CPU backend. Its envs are stepped
 * through the batch only (ds_env_step on one is refused, naming the batch);
 * reset, set_state and set_param on one are sent with the next batch step.
 * With gradients every env keeps its own engine and tape. */
#ifndef DSIM_BATCH_H
#define DSIM_BATCH_H

#include <stdint.h>

#include "dsim/base.h"
#include "dsim/env.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dsBatch dsBatch;

/* ds_batch_step flags */
#define DS_BATCH_AUTORESET 1
/* ds_batch_create_from_text_on flags */
#define DS_BATCH_LOCKSTEP 2 /* as ds_batch_create_lockstep */

/* status values (>= 0; a negative status is a DS_ERR_* code) */
#define DS_BATCH_STEPPED 0
#define DS_BATCH_RESET 1

/* n (>= 1) envs of the definition def. Errors go into err as ds_env_create's. */
DS_API int ds_batch_create(const dsEnvDef* def, int n, dsBatch** out, char* err, size_t errlen);
/* The same from a run config text (its "env" section; `name` names it in
 * messages), as ds_env_create_from_text. */
DS_API int ds_batch_create_from_text(const char* name, const char* text, int n, dsBatch** out, char* err,
                                     size_t errlen);
/* n envs that step in lockstep: reset together (ds_batch_reset with a mask
 * that leaves an env out is refused), stepped together (autoreset resets
 * them when every env needs it; an env that failed waits for the others),
 * and gone back through together by ds_batch_backward_*. On the batched
 * engine (def->device a CUDA device, or def->batch_engine) they share one
 * engine, with its tape when def->gradients is set: one episode of every
 * env forward and backward in one pass (what sysid instances and CEM
 * candidates need on a GPU). A change of one env after its episode's first
 * step (ds_env_set_state, ds_env_set_param, ds_env_reset on the env) is
 * refused at the next batch step, naming the env. */
DS_API int ds_batch_create_lockstep(const dsEnvDef* def, int n, dsBatch** out, char* err, size_t errlen);
/* From a config text on a device ("cpu", "cuda", "cuda:N"; NULL: the
 * CPU), as ds_env_set_device names it: refused with a message when the
 * build has no CUDA or the device is not there. flags: 0, or
 * DS_BATCH_LOCKSTEP for a lockstep batch. */
DS_API int ds_batch_create_from_text_on(const char* name, const char* text, int n, const char* device, int flags,
                                        dsBatch** out, char* err, size_t errlen);
DS_API void ds_batch_destroy(dsBatch* b);

DS_API int ds_batch_size(const dsBatch* b);
/* Env i (0 <= i < size; NULL otherwise): for its sizes, parameters
 * (ds_env_set_param: per-env physical parameters), state, metric, render and
 * gradients. It belongs to the batch: do not destroy it. */
DS_API dsEnv* ds_batch_env(dsBatch* b, int i);
/* Message of the last failed call, naming the env. */
DS_API const char* ds_batch_last_error(const dsBatch* b);

/* Resets the envs whose mask[i] is non-zero (every env when mask is NULL)
 * with seeds[i] (seeds may be NULL: each env's next seed, as autoreset
 * draws it; 0 + i before the first reset). obs, image and status may be
 * NULL; rows of envs not reset are left as they are. */
DS_API int ds_batch_reset(dsBatch* b, const uint64_t* seeds, const uint8_t* mask, dsReal* obs, dsReal* image,
                          int* status);
/* One control step of every env (or autoreset, see above). obs, image,
 * rewards, done and status may be NULL. done[i] is 1 when step i ended the
 * episode (its time limit). */
DS_API int ds_batch_step(dsBatch* b, const dsReal* actions, dsReal* obs, dsReal* image, dsReal* rewards,
                         uint8_t* done, int* status, int flags);
/* Every env's backward (definitions with gradients), as ds_env_backward_loss
 * and ds_env_backward_adjoints on each env: losses (n, may be NULL), and
 * env-major arrays with num_steps rows per env whatever the steps taken:
 * grad_actions n x num_steps x action_size, adj_obs n x num_steps x
 * obs_size, adj_image n x num_steps x h x w x 4, adj_reward n x num_steps
 * (each may be NULL). The parameter gradients are each env's
 * (ds_env_param_grad). Separate engines go back across threads; a lockstep
 * batch on one engine goes back in one pass, its envs at one substep.
 * status as ds_batch_step's (0 or a negative code per env). */
DS_API int ds_batch_backward_loss(dsBatch* b, dsReal* losses, dsReal* grad_actions, int* status);
DS_API int ds_batch_backward_adjoints(dsBatch* b, const dsReal* adj_obs, const dsReal* adj_image,
                                      const dsReal* adj_reward, dsReal* grad_actions, int* status);
/* Every env's ds_env_backward_adjoints_window over steps first_step ..
 * first_step + num_steps - 1, across threads: env-major arrays adj_obs
 * n x num_steps x obs_size, adj_image n x num_steps x h x w x 4, adj_reward
 * n x num_steps, adj_final_state and grad_states0 n x state_size,
 * grad_actions n x num_steps x action_size (each may be NULL). Not on a
 * lockstep batch's shared engine (DS_ERR_UNSUPPORTED). status as
 * ds_batch_step's. */
DS_API int ds_batch_backward_window(dsBatch* b, int first_step, int num_steps, const dsReal* adj_obs,
                                    const dsReal* adj_image, const dsReal* adj_reward, const dsReal* adj_final_state,
                                    dsReal* grad_actions, dsReal* grad_states0, int* status);
/* Metric of every env's current state (ds_env_metric), into metrics (n). */
DS_API int ds_batch_metric(const dsBatch* b, dsReal* metrics);

#ifdef __cplusplus
}
#endif
#endif

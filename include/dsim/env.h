/* dsim environments: walker, control-fem, control-cloth and walker-springs
 * behind one step/reset/gradient API (opaque dsEnv).
 *
 *   dsEnvDef def = ds_default_env_def(DS_ENV_CONTROL_FEM);
 *   def.substeps = 600;                         // shorten the episode
 *   dsEnv* env; ds_env_create(&def, &env, err, sizeof err);
 *   ds_env_reset(env, seed, obs, NULL);
 *   while (!done) ds_env_step(env, action, obs, NULL, &reward, &done);
 *   ds_env_backward_loss(env, &loss, grad_actions);   // steps x action_size
 *   ds_env_param_grad(env, "tet.k_mu", &g, &n);
 *   ds_env_destroy(env);
 *
 * Time. Three independent rates: the physics substep dt; the control
 * interval C (substeps per ds_env_step, the action held over them); the
 * render interval R. An episode is `substeps` substeps, i.e.
 * ceil(substeps / C) steps (the last one may be shorter). Frames are
 * rendered at substeps 0, R, 2R, ... < substeps, plus the final substep when
 * render_last is set (walker: 41 frames, gear: 96, cloth: 25 with the
 * defaults). The frame at substep 0 is rendered at reset.
 *
 * Actions (ds_env_action_size values per step):
 *   walker          one activation per triangle (104); a > 0 contracts.
 *   control-fem     one activation per tet; a > 0 contracts.
 *   control-cloth   a velocity 3-vector (m/s) added to every particle at
 *                   substep 0: only the action of the first step after
 *                   reset is used (later actions are ignored and get zero
 *                   gradient). This is the seed's "initial velocity" control.
 *   walker-springs  one per spring: the spring's rest length is L (1 + a).
 *
 * Observations. The state vector (ds_env_obs_size values) is, per
 * `obs_state`: NONE (size 0); FULL: positions then velocities of every
 * particle (2 x nparticle x 3); COM: centre of mass (3) then mass-weighted
 * mean velocity (3). With obs_image, the image observation is the RGBA render
 * (height x width x 4 dsReal in [0,1], row 0 at the top) of the state at the
 * end of the step. The reset observation is that of substep 0.
 *
 * Loss and reward. The built-in loss (loss_kind):
 *   IMAGE_LAST  image loss of the last frame rendered so far vs the goal;
 *   IMAGE_SUM   sum of the image losses of every frame rendered so far;
 *   COM         |com(x_t) - target|^2 at the current substep t (walker: the
 *               target is the start centre of mass plus the goal offset).
 * The reward of a step is minus the loss terms produced in it: IMAGE_SUM:
 * every frame rendered during the step; IMAGE_LAST: the episode's final
 * scheduled frame, in the step that renders it (0 for the other steps);
 * COM: the terminal term, in the last step of the episode. Over a complete
 * episode the rewards sum to minus the loss (IMAGE_SUM: minus the loss
 * without the frame of substep 0, which no action affects).
 *
 * Gradients. After any number of steps, ds_env_backward_loss gives
 * d(loss)/d(action of every step taken) and ds_env_backward_adjoints does the
 * same for caller-supplied adjoints of the observations and rewards; both
 * leave d/d(every named parameter) for ds_env_param_grad. Parameter names are
 * those of the engine (dsim/engine.h DS_MODEL_ARRAYS): "particle.mass",
 * "tet.k_mu", "tri.k_lambda", "contact.mu", "initial_velocity",
 * "initial_position", "spring.rest", "gravity", ...
 *
 * Every buffer is allocated at create (control-cloth with a random size
 * rebuilds its model at a reset that draws a new size); step and backward
 * allocate nothing. Distinct envs may be used from distinct threads at
 * once; one env must not be used by two threads at a time. */
#ifndef DSIM_ENV_H
#define DSIM_ENV_H

#include <stddef.h>
#include <stdint.h>

#include "dsim/base.h"
#include "dsim/scenes.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dsEnv dsEnv;

typedef enum dsEnvKind {
  DS_ENV_WALKER = 0,
  DS_ENV_CONTROL_FEM = 1,
  DS_ENV_CONTROL_CLOTH = 2,
  DS_ENV_WALKER_SPRINGS = 3,
  DS_ENV_KIND_COUNT = 4
} dsEnvKind;

typedef enum dsEnvObsState { DS_OBS_STATE_NONE = 0, DS_OBS_STATE_FULL = 1, DS_OBS_STATE_COM = 2 } dsEnvObsState;

typedef enum dsEnvLossKind {
  DS_ENV_LOSS_IMAGE_LAST = 0,
  DS_ENV_LOSS_IMAGE_SUM = 1,
  DS_ENV_LOSS_COM = 2
} dsEnvLossKind;

/* Image loss applied to frames: dsLossKind of dsim/raster.h (MSE, L1, DSSIM). */

typedef struct dsEnvDef {
  int kind;                /* dsEnvKind */
  int seed;                /* default seed for drivers (the CLI); reset takes its own */
  /* physics */
  dsReal dt;               /* substep, s */
  int substeps;            /* episode horizon, substeps */
  int control_interval;    /* substeps per step (action held) */
  int render_interval;     /* substeps between rendered frames */
  int render_last;         /* 1: also render the final substep */
  dsReal gravity[3];       /* m/s^2 */
  int ground;              /* 1: ground-plane contact at y = 0 */
  int checkpoint_every;    /* engine tape: 1 = every state, K > 1 = every K-th (O(sqrt T) memory) */
  /* material */
  dsReal particle_mass;    /* kg per particle (walker, cloth, walker-springs) */
  dsReal density;          /* kg/m^3 (control-fem; lumped V/4 per tet vertex) */
  dsReal k_mu, k_lambda, k_damp; /* triangle (per rest area) or tet (per rest volume) densities */
  dsReal bend_ke, bend_kd; /* cloth dihedral bending */
  dsReal lift, drag;       /* cloth aerodynamics (0, 0: off) */
  dsReal spring_ke, spring_kd; /* walker-springs springs, N/m and N s/m */
  /* contact with the ground */
  dsReal contact_ke, contact_kd, contact_kf, contact_mu, contact_skin;
  /* scene placement */
  dsReal start[3];         /* translation at substep 0, m: walker and walker-springs
                              as generated (feet near y = 0); gear and cloth centred on
                              their vertex centroid first (cloth: rotated, then placed
                              at start + (0, h, 0), h ~ U[height_min, height_max)) */
  dsReal velocity[3];      /* initial velocity of every particle, m/s */
  dsReal height_min, height_max; /* cloth: drop height range, m */
  int size_min, size_max;  /* cloth: cells per side D ~ U{size_min..size_max} */
  dsReal cell;             /* cloth: cell size, m */
  dsReal axis[3];          /* cloth: rotation axis (normalised inside) */
  dsReal angle;            /* cloth: rotation angle about axis, rad */
  int anchor;              /* cloth: what start (and the goal's (x_t, goal_y, goal_z)) places:
                              0 = the vertex centroid, 1 = the grid's corner vertex 0
                              (gradSim's placement; the default) */
  dsGearDef gear;          /* control-fem: gear shape */
  int legs;                /* walker-springs: 1 = two legs under the body */
  /* goal: target centroid = (x_t, goal_y, goal_z), x_t ~ U[goal_x_min, goal_x_max);
     relative: all relative to the start centroid (walker: +2 m in x); cloth with
     anchor 1: that point places the goal sheet's corner, and the target is the
     goal sheet's centroid */
  dsReal goal_x_min, goal_x_max, goal_y, goal_z;
  int goal_relative;
  /* rendering (SCENES.md "Common rendering") */
  int width, height, supersample;
  dsReal sigma, gamma;     /* SoftRas sharpness (NDC^2) and depth temperature */
  dsReal color[3];         /* face base colour RGB */
  dsReal ambient, directional;
  dsReal cam_distance, cam_elevation, cam_azimuth; /* m, degrees, degrees */
  dsReal cam_fov, cam_near, cam_far;                /* degrees, m, m */
  /* observation */
  int obs_state;           /* dsEnvObsState */
  int obs_image;           /* 1: image observation at every step */
  /* loss */
  int loss_kind;           /* dsEnvLossKind */
  int image_loss;          /* dsLossKind of each frame: MSE, L1, DSSIM (dsim/raster.h) */
  int loss_levels;         /* image pyramid levels (1: single scale; weights 1) */
  dsReal loss_moments;    /* weight of the image loss's alpha-moments term (0: off) */
  dsReal loss_moments_size; /* relative weight of the moments term's size part */
  /* controller settings carried for drivers (the env does not use them) */
  int ctrl_phases;         /* sinusoid inputs P */
  dsReal ctrl_omega;       /* rad/s */
  dsReal ctrl_phase_step;  /* phase offset between inputs, rad */
  dsReal ctrl_strength;    /* output scale */
  int ctrl_optimizer;      /* 0 adam, 1 sgd */
  dsReal ctrl_lr;
  int ctrl_decay_every;     /* step decay: lr *= ctrl_decay_factor every N iterations (0: off) */
  dsReal ctrl_decay_factor;
  dsReal ctrl_momentum;     /* SGD heavy-ball momentum */
  dsReal ctrl_clip;         /* gradient-norm clipping threshold (0: off) */
  int ctrl_iterations;
  dsReal ctrl_init[3];     /* cloth: initial guess of the velocity action, m/s */
} dsEnvDef;

/* SCENES.md defaults for a kind (DS_ENV_CONTROL_FEM for an unknown kind). */
DS_API dsEnvDef ds_default_env_def(int kind);
/* "walker", "control-fem", "control-cloth", "walker-springs" (NULL otherwise). */
DS_API const char* ds_env_kind_name(int kind);

/* Creation errors are written into err (errlen bytes, may be NULL):
 * DS_ERR_INVALID/RANGE for a bad definition, DS_ERR_MESH, DS_ERR_NOMEM. */
DS_API int ds_env_create(const dsEnvDef* def, dsEnv** out, char* err, size_t errlen);
/* From a JSON config whose "env" key names the kind; every other key is a
 * dsEnvDef field (the files in configs/ list them all with their defaults).
 * Errors name the file, key path and expected value (DS_ERR_IO, DS_ERR_PARSE,
 * DS_ERR_CONFIG). */
DS_API int ds_env_create_from_config(const char* path, dsEnv** out, char* err, size_t errlen);
/* Same from text; `name` is used in messages. */
DS_API int ds_env_create_from_text(const char* name, const char* text, dsEnv** out, char* err, size_t errlen);
/* Parse a config into *def (without creating an env). */
DS_API int ds_env_def_from_text(const char* name, const char* text, dsEnvDef* def, char* err, size_t errlen);
/* Writes the definition as a JSON config (every key) into buf (NUL-terminated);
 * returns the length it needs (excluding the NUL), or a negative code. */
DS_API int ds_env_def_to_json(const dsEnvDef* def, char* buf, size_t buflen);
DS_API void ds_env_destroy(dsEnv* env);

DS_API const char* ds_env_last_error(const dsEnv* env);
/* The JSON text the env was created from (generated from the definition for
 * ds_env_create). */
DS_API const char* ds_env_config_text(const dsEnv* env);
DS_API const dsEnvDef* ds_env_def(const dsEnv* env);

/* ---- sizes ---------------------------------------------------------------- */
DS_API int ds_env_obs_size(const dsEnv* env);
DS_API int ds_env_action_size(const dsEnv* env);
DS_API void ds_env_image_size(const dsEnv* env, int* width, int* height); /* RGBA: w*h*4 values */
DS_API int ds_env_num_steps(const dsEnv* env);     /* steps per episode */
DS_API int ds_env_steps_taken(const dsEnv* env);   /* steps since reset */
DS_API int ds_env_num_particles(const dsEnv* env);
DS_API int ds_env_state_size(const dsEnv* env);    /* 1 + 6 * nparticle */

/* ---- episode -------------------------------------------------------------- */
/* Draws the goal (and cloth size and height) from seed, rebuilds the goal
 * image (cached per seed), resets the state and the tape, renders frame 0.
 * obs (obs_size) and image (w*h*4; only with obs_image) may be NULL. */
DS_API int ds_env_reset(dsEnv* env, uint64_t seed, dsReal* obs, dsReal* image);
/* One control step. DS_ERR_STATE after the episode is done or before a
 * reset; DS_ERR_INVERTED/DIVERGED when the simulation fails (reset needed). */
DS_API int ds_env_step(dsEnv* env, const dsReal* action, dsReal* obs, dsReal* image, dsReal* reward, int* done);

/* ---- gradients ------------------------------------------------------------ */
/* Built-in loss of the episode so far (value only). */
DS_API int ds_env_loss(const dsEnv* env, dsReal* loss);
/* Backward from the built-in loss: *loss (may be NULL) and grad_actions
 * (steps_taken x action_size, overwritten; may be NULL). */
DS_API int ds_env_backward_loss(dsEnv* env, dsReal* loss, dsReal* grad_actions);
/* Backward from L = sum_k adj_obs[k].obs_k + adj_image[k].image_k +
 * adj_reward[k] r_k over the steps k taken (obs_k, image_k: the observation
 * returned by step k). Any adjoint may be NULL; adj_image needs obs_image. */
DS_API int ds_env_backward_adjoints(dsEnv* env, const dsReal* adj_obs, const dsReal* adj_image,
                                    const dsReal* adj_reward, dsReal* grad_actions);
/* The same two, back to the start of step first_step only (0 .. steps_taken):
 * the state there is held fixed. Rows first_step.. of grad_actions equal
 * those of the whole backward (bit for bit); earlier rows are 0; parameter
 * gradients cover the window only (and none of the initial state's). Cost:
 * the window's substeps, not the episode's (receding-horizon MPC). */
DS_API int ds_env_backward_loss_from(dsEnv* env, int first_step, dsReal* loss, dsReal* grad_actions);
DS_API int ds_env_backward_adjoints_from(dsEnv* env, int first_step, const dsReal* adj_obs,
                                         const dsReal* adj_image, const dsReal* adj_reward,
                                         dsReal* grad_actions);

/* ---- parameters (engine names) ------------------------------------------- */
DS_API int ds_env_param(const dsEnv* env, const char* name, const dsReal** values, int* count);
/* Only before the first step of an episode (DS_ERR_STATE otherwise);
 * initial_position / initial_velocity then apply at once. A reset keeps the
 * values, except that control-cloth re-places its sheet (initial_position)
 * and rebuilds its model (all values back to the definition's) when the
 * seed draws a new size. */
DS_API int ds_env_set_param(dsEnv* env, const char* name, const dsReal* values, int count);
/* Gradient of the last backward. */
DS_API int ds_env_param_grad(const dsEnv* env, const char* name, const dsReal** grad, int* count);

/* ---- state, rendering, metrics --------------------------------------------
 * State: [substep, x (nparticle x 3), v (nparticle x 3)]. Setting a state at
 * substep s rewinds the episode to s (steps must then continue from a step
 * boundary: s a multiple of the control interval); the tape before s is kept,
 * so gradients are exact when the state was saved from this episode. */
DS_API int ds_env_get_state(const dsEnv* env, dsReal* state, int n);
DS_API int ds_env_set_state(dsEnv* env, const dsReal* state, int n);
/* Particle positions now (nparticle x 3). */
DS_API const dsReal* ds_env_positions(const dsEnv* env);
/* Render the current state into image (w*h*4). */
DS_API int ds_env_render(dsEnv* env, dsReal* image);
/* The goal image of the current seed (w*h*4), NULL before the first reset. */
DS_API const dsReal* ds_env_goal_image(const dsEnv* env);
/* Target centroid of the current episode (m). */
DS_API int ds_env_target(const dsEnv* env, dsReal target[3]);
/* SCENES.md metric of the current state: walker and walker-springs:
 * centre-of-mass x displacement since substep 0 (the goal offset is
 * def->goal_x_min); control-fem and control-cloth: mean over x, y, z of the
 * squared error of the centre of mass to the target (ds_env_target), i.e.
 * |com - target|^2 / 3, gradSim's measure (a mean squared error over the
 * three coordinates), so that its published figures compare directly. */
DS_API int ds_env_metric(const dsEnv* env, dsReal* value);

#ifdef __cplusplus
}
#endif
#endif

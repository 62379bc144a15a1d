/* dsim environments behind one step/reset/gradient API (opaque dsEnv).
 * An environment is a class (dsEnvClass below): a bundled one (walker,
 * control-fem, control-cloth, walker-springs, rigid-toss, beam;
 * docs/scenes.md; ds_env_class_at lists them), or one a user registers from
 * C with ds_env_register.
 *
 *   dsEnvDef def = ds_default_env_def("control-fem");
 *   def.substeps = 600;                                      // shorten the episode
 *   ds_env_def_set(&def, "gear.teeth", "12", err, sizeof err); // a class key
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
 * taken at substeps 0, R, 2R, ... < substeps, plus the final substep when
 * render_last is set (walker: 41 frames, gear: 96, cloth: 25 with the
 * defaults). The frame at substep 0 is taken at reset.
 *
 * Frames are rendered when something needs them, not when they are taken:
 * the env keeps each frame's positions and renders it (and evaluates its
 * image loss) the first time the loss, a reward or the backward asks for it.
 * With loss IMAGE_LAST an episode therefore renders one frame, not every
 * scheduled one; the values are the same, bit for bit, whenever they are
 * evaluated. To see the frames, render them yourself (ds_env_render at the
 * frame's substep, as the recorder of dsim/controller.h does), or use the
 * image observation.
 *
 * Actions (ds_env_action_size values per step), by class:
 *   walker          one activation per triangle (104); a > 0 contracts.
 *   control-fem     one activation per tet; a > 0 contracts.
 *   control-cloth   a velocity 3-vector (m/s) added to every particle at
 *                   substep 0: only the action of the first step after
 *                   reset is used (later actions are ignored and get zero
 *                   gradient; ds_env_action_kind is DS_ACTION_INITIAL).
 *   walker-springs  one per spring: the spring's rest length is L (1 + a).
 *   rigid-toss      an impulse J (N s, 3 values) on the rigid body over
 *                   substep 0 at its centre of mass + scene.impulse_offset
 *                   (DS_ACTION_INITIAL, as control-cloth).
 *   smoke-control   a force 2-vector (x, y; control.force m/s^2 per unit)
 *                   per cell of the control grid, bilinear onto the fluid
 *                   (docs/fluids.md).
 *
 * Observations. The state vector (ds_env_obs_size values) is, per
 * `obs_state`: NONE (size 0); FULL: positions then velocities of every
 * particle (2 x nparticle x 3); COM: centre of mass (3) then mass-weighted
 * mean velocity (3); JOINTS (articulated models: pendulum, double-pendulum,
 * runner): the generalised coordinates q (nq: a free root's position and
 * unit quaternion, then one per hinge or slide) then the velocities qd
 * (nv), as ds_artic_q / ds_artic_qd lay them out. With obs_image, the image observation is the RGBA render
 * (height x width x 4 dsReal in [0,1], row 0 at the top) of the state at the
 * end of the step. The reset observation is that of substep 0.
 *
 * Loss and reward. The built-in loss (loss_kind):
 *   IMAGE_LAST  image loss of the last frame taken so far vs the goal;
 *   IMAGE_SUM   sum of the image losses of every frame taken so far;
 *   COM         |com(x_t) - target|^2 at the current substep t (walker: the
 *               target is the start centre of mass plus the goal offset).
 * The reward of a step is minus the loss terms produced in it: IMAGE_SUM:
 * every frame taken during the step; IMAGE_LAST: the episode's final
 * scheduled frame, in the step that takes it (0 for the other steps);
 * COM: the terminal term, in the last step of the episode. Over a complete
 * episode the rewards sum to minus the loss (IMAGE_SUM: minus the loss
 * without the frame of substep 0, which no action affects).
 * That is the sparse reward (reward_kind SPARSE, the default). DENSE: the
 * step's progress by the class's metric, whatever the loss: DISPLACEMENT
 * classes (walker, walker-springs) r_k = com_x(end of step k) - com_x(end
 * of step k-1), TARGET classes r_k = |com_{k-1} - target| - |com_k -
 * target| (the decrease of the distance to the target, m), with com_{-1} the
 * start centre of mass of the definition (the metric's origin). Over an
 * episode the dense rewards sum to the final displacement (DISPLACEMENT) or
 * to the start distance minus the final distance (TARGET). No frame is
 * rendered for a dense reward; the loss (ds_env_loss, backward) is the same.
 *
 * Targets. An episode's target, its goal image and the metric's origin (the
 * start centre of mass) are relative to the start the env's definition
 * gives: the model as built and as the class's own reset draws place it
 * (control-cloth: the sheet's height), not to initial values set later with
 * ds_env_set_param. They agree with each other, stay the same in a
 * reset / set_param / run loop, do not move with a parameter being
 * identified or optimised (initial_position included), and the backward
 * treats them as the constants they are, so gradients match finite
 * differences taken through ds_env_set_param (tests/test_env_target.c).
 * After ds_env_set_param(initial_position) shifts the walker 0.5 m forward,
 * its metric reads 0.5 before the first step: half a metre of the 2 m goal.
 * To move the goal with the body, change the definition (dsEnvDef.start).
 *
 * Gradients. After any number of steps, ds_env_backward_loss gives
 * d(loss)/d(action of every step taken) and ds_env_backward_adjoints does the
 * same for caller-supplied adjoints of the observations and rewards (sparse
 * or dense); both
 * leave d/d(every named parameter) for ds_env_param_grad. Parameter names are
 * those of the engine (dsim/engine.h DS_MODEL_ARRAYS): "particle.mass",
 * "tet.k_mu", "tri.k_lambda", "contact.mu", "initial_velocity",
 * "initial_position", "spring.rest", "gravity", ...
 *
 * Every buffer is allocated at create (a class whose reset changes the scene,
 * like control-cloth drawing a new size, rebuilds its model at that reset);
 * step and backward allocate nothing. Distinct envs may be used from
 * distinct threads at once; one env must not be used by two threads at a
 * time. */
#ifndef DSIM_ENV_H
#define DSIM_ENV_H

#include <stddef.h>
#include <stdint.h>

#include "dsim/base.h"
#include "dsim/device.h"
#include "dsim/engine.h"
#include "dsim/raster.h"
#include "dsim/scenes.h"

struct dsModel;
struct dsData;
struct dsGrad;

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dsEnv dsEnv;
typedef struct dsEnvClass dsEnvClass;

typedef enum dsEnvObsState {
  DS_OBS_STATE_NONE = 0,
  DS_OBS_STATE_FULL = 1,
  DS_OBS_STATE_COM = 2,
  DS_OBS_STATE_JOINTS = 3 /* an articulation's q then qd (refused for a model without one) */
} dsEnvObsState;

typedef enum dsEnvLossKind {
  DS_ENV_LOSS_IMAGE_LAST = 0,
  DS_ENV_LOSS_IMAGE_SUM = 1,
  DS_ENV_LOSS_COM = 2
} dsEnvLossKind;

/* The reward of a step (config key loss.reward; "Loss and reward" above). */
typedef enum dsEnvRewardKind {
  DS_ENV_REWARD_SPARSE = 0, /* minus the loss terms the step produces */
  DS_ENV_REWARD_DENSE = 1   /* the step's progress by the class's metric (no frame is rendered for it) */
} dsEnvRewardKind;

/* Image loss applied to frames: dsLossKind of dsim/raster.h (MSE, L1, DSSIM). */

/* Bytes a class's own parameter struct may take inside a dsEnvDef. */
#define DS_ENV_PARAMS_MAX 2048

/* Definition of an environment: the fields every environment shares (time,
 * contact, placement, goal, rendering, observation, loss) and the class's own
 * parameters (material, mesh, scene draws) in `params`, a struct of the class
 * (dsWalkerParams, dsControlFemParams, ... of dsim/scenes.h; read and write
 * it through ds_env_def_params or by key with ds_env_def_set). A value: copy
 * it freely. Config keys (section "env"): the common ones of
 * ds_env_common_keys() and the class's dsEnvClass.keys. */
typedef struct dsEnvDef {
  const dsEnvClass* cls;   /* the environment class (ds_env_class_find) */
  /* physics */
  dsReal dt;               /* substep, s */
  int substeps;            /* episode horizon, substeps */
  int control_interval;    /* substeps per step (action held) */
  int render_interval;     /* substeps between rendered frames */
  int render_last;         /* 1: also render the final substep */
  dsReal gravity[3];       /* m/s^2 */
  int ground;              /* 1: ground-plane contact at y = 0 */
  int checkpoint_every;    /* engine tape: 1 = every state, K > 1 = every K-th (O(sqrt T) memory) */
  int integrator;          /* dsIntegrator (dsim/engine.h): semi-implicit (default) or implicit */
  dsSolverSettings solver; /* the implicit integrator's Newton and linear-solver settings */
  int jacobian_mib;        /* implicit, with a tape: MiB for the Jacobians the forward keeps for the backward
                              (dsDataDef.jacobian_mib; 0: none) */
  int gradients;           /* 1: keep the tape for the backward; 0: forward only (no tape: RL
                              rollouts, many batched envs), the backward refused */
  /* contact with the ground */
  dsReal contact_ke, contact_kd, contact_kf, contact_mu, contact_skin;
  dsReal contact_smooth;   /* width of the approach damping's switch inside the skin, m (0: a step) */
  /* scene placement */
  dsReal start[3];         /* translation at substep 0, m (each class says of what) */
  dsReal velocity[3];      /* initial velocity of every particle, m/s */
  /* goal: target centroid = (x_t, goal_y, goal_z), x_t ~ U[goal_x_min, goal_x_max);
     relative: all relative to the start centroid (walker: +2 m in x) */
  dsReal goal_x_min, goal_x_max, goal_y, goal_z;
  int goal_relative;
  /* rendering (docs/scenes.md "Common settings") */
  int width, height, supersample;
  dsReal sigma, gamma;     /* SoftRas sharpness (NDC^2) and depth temperature */
  dsReal color[3];         /* face base colour RGB */
  dsReal ambient, directional;
  dsReal light_dir[3];     /* towards the directional light (normalised); 0, 0, 0: from the camera's eye */
  int premultiplied;       /* the renderer's dsRenderSettings.premultiplied (0; no config key: sysid.camsim sets it) */
  dsReal cam_distance, cam_elevation, cam_azimuth; /* m, degrees, degrees */
  dsReal cam_fov, cam_near, cam_far;                /* degrees, m, m */
  dsReal cam_look_at[3];   /* the point the camera looks at (distance, elevation, azimuth are about it), m */
  dsReal cam_fx, cam_fy, cam_cx, cam_cy; /* intrinsics, pixels (dsCamera): fx > 0 replaces cam_fov */
  /* a second view (camera2.*): when on, every frame's image loss is the sum
     of the loss of each view against the goal seen from it, so that depth
     along the first camera's axis is seen too; observations, ds_env_render,
     the goal image and logged frames are the first view's. Same fov, near,
     far as the first camera. */
  int cam2;
  dsReal cam2_distance, cam2_elevation, cam2_azimuth; /* m, degrees, degrees */
  /* observation */
  int obs_state;           /* dsEnvObsState */
  int obs_image;           /* 1: image observation at every step */
  /* loss */
  int loss_kind;           /* dsEnvLossKind */
  int image_loss;          /* dsLossKind of each frame: MSE, L1, DSSIM (dsim/raster.h) */
  int loss_levels;         /* image pyramid levels (1: single scale; weights 1) */
  dsReal loss_moments;     /* weight of the image loss's alpha-moments term (0: off) */
  dsReal loss_moments_size; /* relative weight of the moments term's size part */
  int reward_kind;         /* dsEnvRewardKind */
  /* where the physics runs (not keys of the env section: `dsim run` and
     `dsim sysid` take run.device). A CUDA device runs the episode's physics
     on the batched engine (dsim/engine_batch.h, B = 1): state, tape and
     adjoints stay on the device for the episode; activations go up once a
     step, states come back at frames and step ends, frame adjoints go up
     in the backward; the frames the loss counts and image observations are
     rendered there too (render/raster_batch.h). An initial action set by
     the class's hook (DS_ACTION_INITIAL without act_first: control-cloth's
     velocity) changes the host's substep-0 state, which goes up as the
     instance's; its adjoint is read back at substep 0. Classes whose
     actions enter the physics otherwise (external forces, rigid bodies:
     rigid-toss) are refused there with a message; in a batch of envs on
     one engine (dsim/batch.h) every env keeps one model size (a reset that
     would rebuild it is refused). */
  dsDevice device;         /* cpu (default) or cuda:N */
  int batch_engine;        /* 1: the batched engine on the CPU too (what a CUDA device runs; tests) */
  /* the class's own parameters */
  union {
    double align_;
    unsigned char bytes[DS_ENV_PARAMS_MAX];
  } params;
} dsEnvDef;

/* ---- environment classes ---------------------------------------------------
 * An environment is a class: its name, its parameter struct with defaults,
 * its config keys, how it builds the model, how its action enters the
 * physics (forward and adjoint) and what its metric measures. The bundled
 * classes are registered at start; ds_env_register adds one written in C,
 * which then works with the trainer, `dsim run` (its config's env.name) and
 * every binding, like the bundled ones. Hooks get the env and use the
 * accessors of "for class hooks" below (ds_env_def, ds_env_model,
 * ds_env_data, ds_env_grad, ds_env_params, ds_env_class_state, ...): the
 * bundled classes use nothing else, so a plugin can do all they do. */
typedef enum dsActionKind {
  DS_ACTION_PER_STEP = 0,  /* a new action every step, held over its substeps */
  DS_ACTION_INITIAL = 1    /* only the first step's action is used (an initial condition) */
} dsActionKind;

typedef enum dsMetricKind {
  DS_METRIC_TARGET = 0,       /* |com - target|^2 / 3 (gradSim's measure); goal 0 */
  DS_METRIC_DISPLACEMENT = 1  /* com x - com x at substep 0; goal def->goal_x_min */
} dsMetricKind;

typedef struct dsBuilder dsBuilder;

/* A class whose physics is an engine of its own rather than the particle
 * model (smoke-control: the fluid of dsim/fluid.h) sets dsEnvClass.sim.
 * The env still builds the class's particle model (build: a placeholder
 * particle is enough; the particle queries and observations then read it)
 * and keeps the time, frames, actions, goal image, image loss, rewards and
 * memory bound as for any class, but steps, renders, differentiates and
 * names parameters through these hooks, the class holding its own state
 * and tape. Such an env renders its frames from the class's kept frames.
 * Its whole-episode backward starts from the image of the current (final)
 * frame: the built-in loss IMAGE_LAST and image or reward adjoints of the
 * last step, earlier steps' image adjoints through image_adjoint. With the
 * optional state hooks (state_size, get_state, set_state: all three or
 * none) ds_env_get_state / ds_env_set_state give and take the class's
 * state; with backward_window too, windows and state adjoints work as for
 * the particle engine (ds_env_backward_adjoints_window). Without them
 * set_state and windows are refused; the batched engine is unless the
 * class sets `batched`. */
typedef struct dsEnvSim {
  /* Bytes the class's physics keeps for an episode of `substeps` substeps
   * (checkpoint_every K <= 1: every state; gradients 0: no tape); the
   * memory bound refuses an env whose total does not fit. */
  size_t (*tape_bytes)(const dsEnv* env, int substeps, int checkpoint_every, int gradients);
  /* The physics back to substep 0 (after the class's reset hook). */
  int (*reset)(dsEnv* env);
  /* Substep s of step k, the step's action held. Must not allocate. */
  int (*step)(dsEnv* env, int k, int s, const dsReal* action);
  /* Keep the current state as frame f (what render needs later). */
  void (*keep_frame)(dsEnv* env, int f);
  /* Frame f (f < 0: the current state) into image (height x width x 4). */
  int (*render)(dsEnv* env, int f, dsReal* image);
  /* The episode's goal image (after reset). */
  int (*goal)(dsEnv* env, dsReal* image);
  /* The whole episode's backward from g_image = dL/d(image of the current
   * state): adds dL/da into grad_actions (steps taken x action_size) and
   * sets the parameter gradients (grad_actions may be NULL). Must not
   * allocate. */
  int (*backward)(dsEnv* env, const dsReal* g_image, dsReal* grad_actions);
  /* Named parameters: the i-th name (NULL past the last); values and
   * gradient (of the last backward) of one, DS_ERR_NOTFOUND for others;
   * set (between episodes; the env checks that). */
  const char* (*param_name)(const dsEnv* env, int i);
  int (*param)(const dsEnv* env, const char* name, const dsReal** values, const dsReal** grad, int* count);
  int (*set_param)(dsEnv* env, const char* name, const dsReal* values, int count);
  /* ds_env_metric of the current state (lower is better, goal 0). */
  int (*metric)(const dsEnv* env, dsReal* value);
  /* Optional: a loss on the images of earlier steps too (sysid's video).
   * Called by the backward before `backward`, once for each step k before
   * the last whose image adjoint is not zero: g_image = dL/d(the image
   * ds_env_step returned at the end of step k). The class keeps it for
   * its `backward`, which then runs one sweep for all of them. NULL: such
   * adjoints are refused (DS_ERR_UNSUPPORTED). Must not allocate. */
  int (*image_adjoint)(dsEnv* env, int step, const dsReal* g_image);
  /* Optional, appended in DS_ENV_ABI_VERSION 7 (a class written for 6
   * compiles unchanged, these left NULL; its binary must be rebuilt).
   * The class's state: state_size values (ds_env_get_state puts the
   * substep before them; smoke-control: the fluid's face velocities,
   * density, temperature). get_state: the current one. set_state: rewind
   * the physics and its tape to substep s (a step boundary the episode
   * has reached; the env checks that and the values' finiteness) and put
   * state there; steps then go on from s, and a backward through s
   * differentiates the state set. */
  int (*state_size)(const dsEnv* env);
  int (*get_state)(const dsEnv* env, dsReal* state);
  int (*set_state)(dsEnv* env, int s, const dsReal* state);
  /* The backward of substeps s0 .. s1 - 1 only (s0 a step boundary, s1 a
   * step's end, both reached) from adj_final = dL/d(state at s1)
   * (state_size values; NULL: zero) and the image adjoints image_adjoint
   * kept for the steps ending in (s0, s1] (all kept ones are consumed):
   * adds dL/da into grad_actions (rows of the window's steps, from step
   * s0 / C; may be NULL), writes grad_state0 = dL/d(state at s0) (may be
   * NULL) and sets the parameter gradients to the window's. Must not
   * allocate. */
  int (*backward_window)(dsEnv* env, int s0, int s1, const dsReal* adj_final, dsReal* grad_actions,
                         dsReal* grad_state0);
  /* Appended in DS_ENV_ABI_VERSION 8. 1: the class runs its physics on
   * the batched engine itself when the definition asks for it
   * (physics.batched_engine, or a CUDA device: dsEnvDef.device), reading
   * them in its hooks (smoke-control, smoke-plume: a fluid batch of one);
   * the env then keeps its placeholder particle model on the CPU engine.
   * 0: such a definition is refused. */
  int batched;
} dsEnvSim;

struct dsEnvClass {
  const char* name;        /* "walker": config env.name, CLI argument */
  const char* doc;         /* one line */
  size_t params_size;      /* bytes of the class's parameter struct (<= DS_ENV_PARAMS_MAX) */
  const dsConfigKey* keys; /* its config keys (offsets into the parameter struct); may be NULL */
  /* Defaults: def holds the common defaults; set the class's parameters and
   * any common field the class changes (horizon, camera, goal, ...). */
  void (*defaults)(dsEnvDef* def);
  /* Optional: cross-field checks of the parameters; message into err. */
  int (*validate)(const dsEnvDef* def, char* err, size_t errlen);
  /* Optional: allocate the class's state (*state; ds_env_class_state) before
   * the first build, and free it. */
  int (*create)(dsEnv* env, void** state);
  void (*destroy)(void* state);
  /* Add particles, elements and render faces (dsim/engine.h builder); dt,
   * gravity and ground contact are set from the definition afterwards. */
  int (*build)(dsEnv* env, dsBuilder* b);
  /* Optional: after every build (buffers sized by the model). */
  int (*built)(dsEnv* env);
  /* Action values per step, for the built model. */
  int (*action_size)(const dsEnv* env);
  int action_kind;         /* dsActionKind */
  /* The common case: the action is a block of the engine's activations
   * ([tri | tet | spring]; walker: the triangles', control-fem: the tets',
   * walker-springs: the springs'). act_first gives the block's first index;
   * the env then writes the action there and takes its adjoint from the same
   * block of dL/d(act), and action_fwd / action_bwd stay NULL. */
  int (*act_first)(const dsEnv* env);
  /* Otherwise: apply action (held over step `step`) before substep s: write
   * the data's activations, external forces or state. Must not allocate. */
  void (*action_fwd)(dsEnv* env, int step, int s, const dsReal* action);
  /* After substep s was popped in backward: grad (action_size values, the
   * step's row) += d(loss)/d(action) through substep s, from adj_act
   * (nact), adj_fext (nparticle x 3) and the data's adjoints (for an
   * INITIAL action, those of the state at s = 0). May add to the parameter
   * gradients. Must not allocate. */
  void (*action_bwd)(dsEnv* env, int step, int s, const dsReal* action, const dsReal* adj_act,
                     const dsReal* adj_fext, dsReal* grad);
  int metric_kind;         /* dsMetricKind */
  /* 1: action_fwd writes the data's external forces (the tape then keeps one
   * record of them per substep); 0: it does not (one record). */
  int uses_external_force;
  /* Optional: the episode's own draws from the seed's stream, after the
   * goal's (cloth: size, height); may rebuild the model (ds_env_rebuild). */
  int (*reset)(dsEnv* env, uint64_t* rng);
  /* Optional: adjust the drawn target centroid (cloth: placed by a corner). */
  void (*target)(const dsEnv* env, dsReal target[3]);
  /* The factor an RL action in [-1, 1] is multiplied by before the env takes
   * it (ds_env_action_scale): the range the physics stands. 0: the default
   * for the action kind (5 for DS_ACTION_INITIAL, m/s or N s per unit; 1
   * otherwise). */
  double action_scale;
  /* Optional: the class's own physics (dsEnvSim above); NULL: the particle engine. */
  const dsEnvSim* sim;
};

/* Ready-made action hooks for a class whose actions are its articulation's
 * motor controls (the model's artic_nu values per step, held over the step;
 * dsim/artic.h): point .action_size, .action_fwd and .action_bwd at these
 * (envs/pendulum.c, envs/runner.c). The backward adds dL/d(control) of the
 * substep to grad. */
DS_API int ds_env_artic_action_size(const dsEnv* env);
DS_API void ds_env_artic_action_fwd(dsEnv* env, int step, int s, const dsReal* action);
DS_API void ds_env_artic_action_bwd(dsEnv* env, int step, int s, const dsReal* action, const dsReal* adj_act,
                                    const dsReal* adj_fext, dsReal* grad);

/* A plugin (`dsim run --plugin FILE.so`) exports, besides its
 *   DS_API int dsim_plugin_init(void);   (registers its classes)
 *   DS_API const int dsim_plugin_abi = DS_PLUGIN_ABI;
 * so that dsim refuses one built against headers with another layout of the
 * class or definition structs. DS_ENV_ABI_VERSION is raised by hand with any
 * change of their meaning; a change of their size shows by itself. */
#define DS_ENV_ABI_VERSION 8
#define DS_PLUGIN_ABI \
  (DS_ENV_ABI_VERSION * 1000000 + (int)sizeof(dsEnvClass) * 1000 + (int)(sizeof(dsEnvDef) % 1000))
/* The value this library expects (what dsim compares a plugin's with). */
DS_API int ds_plugin_abi(void);

/* The registry: the bundled classes (envs/classes.h: walker, control-fem,
 * control-cloth, walker-springs, rigid-toss, beam) in that order, then the
 * registered ones. ds_env_class_count() and ds_env_class_at(i) list them
 * all, each with its name and one-line doc: the CLI's usage text, the
 * config tests and the docs' table come from this list.
 * Registers cls (kept by pointer: static storage). DS_ERR_INVALID for a
 * missing name or hook (act_first, or both action_fwd and action_bwd, unless sim is set; every hook of a sim), or params_size over DS_ENV_PARAMS_MAX; DS_ERR_STATE
 * when the name is taken. Not thread-safe: register before creating envs. */
DS_API int ds_env_register(const dsEnvClass* cls);
DS_API const dsEnvClass* ds_env_class_find(const char* name);   /* NULL when unknown */
DS_API int ds_env_class_count(void);
DS_API const dsEnvClass* ds_env_class_at(int i);
/* Config keys every environment shares (section "env", NULL-terminated). */
DS_API const dsConfigKey* ds_env_common_keys(void);

/* Defaults of the class `name` (def.cls NULL when unknown: create fails). */
DS_API dsEnvDef ds_default_env_def(const char* name);
/* The class's parameter struct inside def. */
DS_API void* ds_env_def_params(dsEnvDef* def);
/* Set one env key (common or the class's) from text, checked as in a config:
 * ds_env_def_set(&def, "material.k_mu", "1000", err, sizeof err). */
DS_API int ds_env_def_set(dsEnvDef* def, const char* key, const char* value, char* err, size_t errlen);

/* Creation errors are written into err (errlen bytes, may be NULL):
 * DS_ERR_INVALID/RANGE for a bad definition, DS_ERR_MESH, DS_ERR_NOMEM. */
DS_API int ds_env_create(const dsEnvDef* def, dsEnv** out, char* err, size_t errlen);
/* From a run config (JSON): its "env" section, whose "name" picks the class;
 * every other key is a definition field (configs/ lists them all with their
 * defaults). The sections "controller" and "run" belong to their owners
 * (dsim/controller.h) and are not read here; any other top-level key is an
 * error. Errors name the file, key path and expected value (DS_ERR_IO,
 * DS_ERR_PARSE, DS_ERR_CONFIG). */
DS_API int ds_env_create_from_config(const char* path, dsEnv** out, char* err, size_t errlen);
/* Same from text; `name` is used in messages. */
DS_API int ds_env_create_from_text(const char* name, const char* text, dsEnv** out, char* err, size_t errlen);
/* Parse a config's env section into *def (without creating an env). */
DS_API int ds_env_def_from_text(const char* name, const char* text, dsEnvDef* def, char* err, size_t errlen);
/* Writes the definition as a run config with its "env" section (every key)
 * into buf (NUL-terminated); returns the length it needs (excluding the NUL),
 * or a negative code. */
DS_API int ds_env_def_to_json(const dsEnvDef* def, char* buf, size_t buflen);
DS_API void ds_env_destroy(dsEnv* env);

DS_API const char* ds_env_last_error(const dsEnv* env);
/* The JSON text the env was created from (generated from the definition for
 * ds_env_create). */
DS_API const char* ds_env_config_text(const dsEnv* env);
DS_API const dsEnvDef* ds_env_def(const dsEnv* env);
DS_API const char* ds_env_name(const dsEnv* env);   /* its class's name */
DS_API int ds_env_action_kind(const dsEnv* env);    /* dsActionKind */
/* The factor an RL action in [-1, 1] maps to (dsEnvClass.action_scale, or
 * its default for the action kind): 0.3 for control-fem's and beam's tet
 * muscles (a larger contraction can invert a tet), 5 for control-cloth's
 * initial velocity and rigid-toss's impulse, 1 for the others. The Python
 * package's Gymnasium envs use it; NaN for a NULL env. */
DS_API double ds_env_action_scale(const dsEnv* env);
/* The metric's goal value: the score of a metric m is |m - goal| (lower is
 * better): 0 for DS_METRIC_TARGET, goal_x_min for DS_METRIC_DISPLACEMENT. */
DS_API double ds_env_metric_goal(const dsEnv* env);

/* Where the env's physics runs from now on: "cpu", "cuda" or "cuda:N"
 * (dsEnvDef.device; the Python binding's device=). The sized objects are
 * rebuilt there, so the current episode ends (reset before stepping).
 * DS_ERR_PARSE for a bad name, DS_ERR_UNSUPPORTED for CUDA in a build
 * without it, a device that is not there or a class that cannot run on the
 * batched engine, each with a message (ds_env_last_error); the env is then
 * back on the CPU. */
DS_API int ds_env_set_device(dsEnv* env, const char* device);

/* ---- for class hooks -------------------------------------------------------- */
DS_API const struct dsModel* ds_env_model(const dsEnv* env);
/* On the batched engine (dsEnvDef.device CUDA or batch_engine) the data is
 * a host mirror without a tape: x, v and t at frames and step ends, act,
 * and adjoint scratch; the episode itself lives in the batch. */
DS_API struct dsData* ds_env_data(dsEnv* env);
DS_API struct dsGrad* ds_env_grad(dsEnv* env);
DS_API const void* ds_env_params(const dsEnv* env);  /* the class's parameter struct */
DS_API void* ds_env_class_state(dsEnv* env);          /* what create stored */
/* The model, writable: for reset hooks that place the body for the episode
 * (ds_model_set_param of "initial_position", ...). Elsewhere use
 * ds_env_set_param, which keeps the episode consistent. */
DS_API struct dsModel* ds_env_model_mut(dsEnv* env);
/* The start the definition gives: the particle positions (nparticle x 3, m)
 * of the built model as the class's reset placed it, and their centre of
 * mass (m; set for the episode before the target hook runs). The episode's
 * target and goal are relative to them (see "Targets" above). */
DS_API const dsReal* ds_env_start_positions(const dsEnv* env);
DS_API int ds_env_start_com(const dsEnv* env, dsReal com[3]);
/* Rebuild the model (reset hooks: a draw changed the scene); sized buffers follow. */
DS_API int ds_env_rebuild(dsEnv* env);
/* Record an error on the env (hooks); returns code. The f form formats like
 * printf. */
DS_API int ds_env_set_error(dsEnv* env, int code, const char* msg);
DS_API int ds_env_set_errorf(dsEnv* env, int code, const char* fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* The reset hook's stream of draws (its uint64_t* rng argument, splitmix64
 * seeded by the episode's seed after the goal's draw): the next 64-bit
 * value, and a uniform double in [0, 1) (its top 53 bits). */
DS_API uint64_t ds_env_rng_next(uint64_t* rng);
DS_API double ds_env_rng_uniform(uint64_t* rng);
/* Memory for a class's state: ds_calloc / ds_free (dsim/base.h), the
 * library's allocator, so allocation tests see it. */

/* ---- config sections ---------------------------------------------------------
 * Parsing a section by its key table: ds_config_parse_section, ds_config_set,
 * ds_config_check, ds_config_read_file, ... (dsim/base.h, "config keys"). */
/* Write the section's values as a JSON object body: key tree of the table,
 * indented by `indent` spaces; returns the length needed (snprintf-like). */
DS_API int ds_config_write_section(const dsConfigKey* keys, const void* source, int indent, char* buf, size_t buflen);

/* ---- sizes ---------------------------------------------------------------- */
DS_API int ds_env_obs_size(const dsEnv* env);
DS_API int ds_env_action_size(const dsEnv* env);
DS_API void ds_env_image_size(const dsEnv* env, int* width, int* height); /* RGBA: w*h*4 values */
DS_API int ds_env_num_steps(const dsEnv* env);     /* steps per episode */
DS_API int ds_env_steps_taken(const dsEnv* env);   /* steps since reset */
DS_API int ds_env_num_particles(const dsEnv* env);
DS_API int ds_env_state_size(const dsEnv* env);    /* 1 + 6 * nparticle + 13 * nbody + articulation nq + nv;
                                                      a class's own physics: 1 + its state_size */

/* ---- episode -------------------------------------------------------------- */
/* Draws the goal (and cloth size and height) from seed, rebuilds the goal
 * image (cached per seed), resets the state and the tape, takes frame 0.
 * obs (obs_size) and image (w*h*4; only with obs_image) may be NULL. */
DS_API int ds_env_reset(dsEnv* env, uint64_t seed, dsReal* obs, dsReal* image);
/* One control step. DS_ERR_STATE after the episode is done or before a
 * reset; DS_ERR_INVERTED/DIVERGED when the simulation fails (reset needed). */
DS_API int ds_env_step(dsEnv* env, const dsReal* action, dsReal* obs, dsReal* image, dsReal* reward, int* done);

/* ---- gradients ------------------------------------------------------------ */
/* Built-in loss of the episode so far (value only). Renders the frames it
 * needs that were not evaluated yet, into the env's scratch: like every
 * call, not concurrently with another call on the same env. */
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
/* Backward of a window: steps first_step .. first_step + num_steps - 1
 * (all taken; the env may have stepped past them), for learning through
 * the simulator. L = sum over the window's steps k of adj_obs[k].obs_k +
 * adj_image[k].image_k + adj_reward[k] r_k, plus adj_final_state.state at
 * the window's end (a critic's value of the last state, or the next
 * window's grad_state0 when chaining windows). Rows are window rows
 * (num_steps x obs_size, x h x w x 4, num_steps); adj_final_state and
 * grad_state0 have ds_env_state_size values in ds_env_get_state's layout.
 * Writes grad_actions (num_steps x action_size) and grad_state0 = dL/d(state
 * at the start of step first_step), a state set there with
 * ds_env_set_state included (entry 0, the substep, gets 0). Any pointer
 * may be NULL. Dense rewards have adjoints too. DS_ERR_RANGE for a window
 * outside the steps taken, or one whose start is not a multiple of
 * physics.checkpoint_every; DS_ERR_UNSUPPORTED on the batched engine, for
 * state adjoints of rigid bodies, and for a class with its own physics
 * without dsEnvSim.backward_window (the fluid envs have it: their state is
 * the fluid's, docs/fluids.md). After a failed step k (DS_ERR_INVERTED,
 * DS_ERR_DIVERGED) a window that ends at or before it (first_step +
 * num_steps <= k) still goes back, through the steps that completed, and
 * gives what a run without the failure would (bit for bit); one that reaches
 * into step k, a class with its own physics, and every other backward are
 * DS_ERR_STATE until the reset. Allocates nothing. docs/learning.md. */
DS_API int ds_env_backward_adjoints_window(dsEnv* env, int first_step, int num_steps, const dsReal* adj_obs,
                                           const dsReal* adj_image, const dsReal* adj_reward,
                                           const dsReal* adj_final_state, dsReal* grad_actions, dsReal* grad_state0);

/* External forces on the particles (a learned residual force of a hybrid
 * model, a push; docs/learning.md). force (nparticle x 3, N; NULL: zero)
 * acts on every particle over every substep from the next ds_env_step on,
 * held until set again; a reset clears it. It is taped with the steps, so
 * every backward (loss, adjoints, _from, window) also gives dL/d(force of
 * step k): ds_env_external_force_grad points at nstep x nparticle x 3 values
 * (*num_steps = ds_env_num_steps), rows of the steps the last backward
 * went back through, 0 elsewhere (the sum over the step's substeps of the
 * engine's dL/d(f_ext)). Only after a reset (DS_ERR_STATE); DS_ERR_RANGE
 * for a value that is not finite; DS_ERR_UNSUPPORTED on the batched engine,
 * for classes whose action writes the external forces, and for rigid or
 * articulated bodies. Allocates nothing. */
DS_API int ds_env_set_external_force(dsEnv* env, const dsReal* force);
DS_API int ds_env_external_force_grad(const dsEnv* env, const dsReal** grad, int* num_steps);

/* The env's image loss (its definition's loss.image, levels and moments
 * terms, at its width x height) of image against any target image (both
 * h x w x 4): *loss, and dL/d(image) into grad (may be NULL). For losses
 * against footage (system identification); uses the env's scratch, so not
 * concurrently with another call on the same env. */
DS_API int ds_env_image_loss(dsEnv* env, const dsReal* image, const dsReal* target, dsReal* loss, dsReal* grad);
/* An image loss like the env's (its pyramid levels and moments term) of
 * another kind (dsLossKind, dsim/raster.h: 0 mse, 1 l1, 2 dssim, 3 l2_dssim),
 * for code above the renderer (sysid's stages); its evaluation allocates
 * nothing. Free with ds_env_image_loss_destroy. */
typedef struct dsImageLoss dsImageLoss;
DS_API int ds_env_image_loss_create(const dsEnv* env, int kind, dsImageLoss** out, char* err, size_t errlen);
DS_API int ds_env_image_loss_eval(dsImageLoss* l, const dsReal* image, const dsReal* target, dsReal* loss,
                                  dsReal* grad);
DS_API void ds_env_image_loss_destroy(dsImageLoss* l);
/* The particles of each element of engine array `name`, for code that may
 * not read the model: tet.* (per 4), tri.* (3), spring.* (2) and body.*
 * (2: the body's vertex range [first, end)) give *idx (nelem x per);
 * particle.*, initial_position and initial_velocity give per 1 and idx NULL
 * (an element is its particle). DS_ERR_NOTFOUND for other arrays. */
DS_API int ds_env_elements(const dsEnv* env, const char* name, const int** idx, int* nelem, int* per);

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
/* Every differentiable parameter of src's model into dst's (ds_env_set_param
 * for each, so the same rules: between episodes or before the first step;
 * the models must have the same sizes, e.g. envs of one definition). On an
 * error dst's message names the parameter. */
DS_API int ds_env_copy_params(dsEnv* dst, const dsEnv* src);

/* ---- state, rendering, metrics --------------------------------------------
 * State: [substep, x (nparticle x 3), v (nparticle x 3), rigid bodies
 * (nbody x 13: p, q, v, w; none for the particle-only classes)] [an
 * articulation's q then qd (pendulum, double-pendulum)]. A rigid
 * body's vertices are posed from its state at the next substep, so their
 * x, v in a set state must be consistent with it. Setting a state at
 * substep s rewinds the episode to s (steps must then continue from a step
 * boundary: s a multiple of the control interval); the tape before s is kept,
 * so gradients are exact when the state was saved from this episode. Another
 * state acts as the episode's plus a constant: a backward across s
 * differentiates that. With a checkpointed tape (physics.checkpoint_every
 * K > 1) a backward across or from a set substep that is not a multiple of
 * K is refused (DS_ERR_RANGE): its segment would be recomputed from the
 * checkpoint before the set. */
DS_API int ds_env_get_state(const dsEnv* env, dsReal* state, int n);
DS_API int ds_env_set_state(dsEnv* env, const dsReal* state, int n);
/* Particle positions now (nparticle x 3). */
DS_API const dsReal* ds_env_positions(const dsEnv* env);
/* Render the current state into image (w*h*4). */
DS_API int ds_env_render(dsEnv* env, dsReal* image);
/* ---- other views of the env's scene (sysid's several cameras) -------------
 * A camera as DS_ENV_CAMERA_NVAL values: position (3, the eye, m), look_at
 * (3, m), fov (vertical, degrees), fx, fy, cx, cy (intrinsics, pixels; fx 0:
 * the fov is used), up +y. A view draws the env's mesh (its particles,
 * faces and colours) with the env's render settings (image size, softness,
 * lights, near and far planes) from its own camera, and differentiates the
 * image with respect to the positions and the camera (the renderer's
 * camera adjoint: eye, look-at point, fov or intrinsics). Not concurrently
 * with another call on the same view; allocation-free after create. */
#define DS_ENV_CAMERA_NVAL 11
typedef struct dsEnvView dsEnvView;
/* The env's own camera (its first view) as such values. */
DS_API int ds_env_camera(const dsEnv* env, dsReal cam[DS_ENV_CAMERA_NVAL]);
/* DS_ERR_INVALID (the reason in err) for a camera the renderer refuses. */
DS_API int ds_env_view_create(const dsEnv* env, const dsReal cam[DS_ENV_CAMERA_NVAL], dsEnvView** out, char* err,
                              size_t errlen);
DS_API void ds_env_view_destroy(dsEnvView* v);
DS_API int ds_env_view_set_camera(dsEnvView* v, const dsReal cam[DS_ENV_CAMERA_NVAL]);
/* Renders positions x (nparticle x 3) into image (w*h*4; NULL: only keep
 * the state for the backward). */
DS_API int ds_env_view_render(dsEnvView* v, const dsEnv* env, const dsReal* x, dsReal* image);
/* The adjoint of the last ds_env_view_render (same x): ACCUMULATES
 * dL/dx into d_x (nparticle x 3) and dL/d(camera) into d_cam
 * (DS_ENV_CAMERA_NVAL; the fov's entry with a fov, the intrinsics' with
 * intrinsics); either may be NULL. */
DS_API int ds_env_view_backward(dsEnvView* v, const dsEnv* env, const dsReal* x, const dsReal* d_image, dsReal* d_x,
                                dsReal* d_cam);
DS_API const char* ds_env_view_last_error(const dsEnvView* v);

/* The camera simulator (dsCamSimDef, dsim/raster.h) set to film env: def's
 * settings with the env's image size and first camera (its renderer's),
 * for the env's largest mesh. Free it with ds_camsim_destroy. */
DS_API int ds_env_camsim_create(const dsEnv* env, const dsCamSimDef* def, dsCamSim** out, char* err, size_t errlen);
/* One frame of the env's current state (its render mesh and face colours)
 * through c: ds_camsim_render(c, mesh, light, noise_seed, image). */
DS_API int ds_env_camsim_render(dsEnv* env, dsCamSim* c, dsReal light, uint64_t noise_seed, dsReal* image);
/* Paints every face of env's render mesh by the main axis of its normal at
 * the current positions (red: |n_x| the largest, green: y, blue: z), so
 * that each colour channel of a render holds one class of faces: what
 * sysid.camsim.fit_shading fits a light factor per class for. 0, or
 * DS_ERR_UNSUPPORTED for an env that renders itself (rigid bodies, smoke). */
DS_API int ds_env_camsim_paint_faces(dsEnv* env);
/* The goal image of the current seed (w*h*4), NULL before the first reset. */
DS_API const dsReal* ds_env_goal_image(const dsEnv* env);
/* Target centroid of the current episode (m). */
DS_API int ds_env_target(const dsEnv* env, dsReal target[3]);
/* The metric of the current state, by the class's dsMetricKind:
 * DISPLACEMENT (walker, walker-springs): centre-of-mass x displacement since
 * substep 0 (its goal is def->goal_x_min); TARGET (control-fem,
 * control-cloth): mean over x, y, z of the squared error of the centre of
 * mass to the target (ds_env_target), i.e. |com - target|^2 / 3, gradSim's
 * measure, so that its published figures compare directly (docs/scenes.md). */
DS_API int ds_env_metric(const dsEnv* env, dsReal* value);

#ifdef __cplusplus
}
#endif
#endif

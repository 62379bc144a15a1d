/* What the fluid envs (smoke-control, envs/smoke.c; smoke-plume,
 * envs/plume.c) share: the fluid model with its named parameters and an
 * initial density field as env parameters, the checks of a definition
 * every fluid env makes, and the normalised image error of their metrics.
 * Not installed. */
#ifndef DSIM_ENVS_SMOKE_COMMON_H
#define DSIM_ENVS_SMOKE_COMMON_H

#include "dsim/env.h"
#include "dsim/fluid.h"
#include "dsim/mesh.h"

/* An obstacle in the flow [obstacle.*]: a box (lo = hi on every axis: none)
 * and a mesh (an OBJ file; "": none) scaled then translated; both may be
 * given. Embedded in an env's parameters as `obs`. */
#define DS__SMOKE_MESH_PATH 160
typedef struct dsSmokeObstacle {
  dsReal lo[3], hi[3];             /* [obstacle.box_lo], [obstacle.box_hi] */
  char mesh[DS__SMOKE_MESH_PATH];  /* [obstacle.mesh] */
  dsReal position[3];              /* [obstacle.position] */
  dsReal scale;                    /* [obstacle.scale] */
  dsReal soft_center[3];           /* [soft_obstacle.center] */
  dsReal soft_half[3];             /* [soft_obstacle.half] */
  dsReal soft_width;               /* [soft_obstacle.wall] */
  dsReal soft_damping;             /* [soft_obstacle.damping]: 0, none */
} dsSmokeObstacle;

/* The keys of an env's `obs` member (P: the env's offsetof macro). */
#define DS__SMOKE_OBSTACLE_KEYS(P)                                                                                   \
  {"obstacle.box_lo", DS_KEY_VEC3, P(obs.lo), -1e3, 1e3, NULL, 0, "box obstacle, low corner, m (lo = hi: no box)"},       \
      {"obstacle.box_hi", DS_KEY_VEC3, P(obs.hi), -1e3, 1e3, NULL, 0, "box obstacle, high corner, m"},                    \
      {"obstacle.mesh", DS_KEY_STRING, P(obs.mesh), 0, DS__SMOKE_MESH_PATH, NULL, 0,                                \
       "mesh obstacle: a closed OBJ surface (a path, or a file of the bundled configs/models/; \"\": none), "       \
       "voxelised onto the grid (the cells whose centres it encloses are solid)"},                                 \
      {"obstacle.position", DS_KEY_VEC3, P(obs.position), -1e3, 1e3, NULL, 0,                                      \
       "translation of the mesh obstacle, m (after obstacle.scale)"},                                                \
      {"obstacle.scale", DS_KEY_REAL, P(obs.scale), 1e-6, 1e6, NULL, 0, "uniform scale of the mesh obstacle"},     \
      {"soft_obstacle.center", DS_KEY_VEC3, P(obs.soft_center), -1e3, 1e3, NULL, 0,                                 \
       "soft (penalised, differentiable) obstacle: centre, m (parameters soft.0.position.x/y/z)"},                 \
      {"soft_obstacle.half", DS_KEY_VEC3, P(obs.soft_half), 0, 1e3, NULL, 0,                                       \
       "soft obstacle: half sides, m (> 0 on the grid's axes when damping > 0)"},                                   \
      {"soft_obstacle.wall", DS_KEY_REAL, P(obs.soft_width), 1e-6, 1e3, NULL, 0,                                  \
       "soft obstacle: width of its smooth walls, m"},                                                             \
      {"soft_obstacle.damping", DS_KEY_REAL, P(obs.soft_damping), 0, 1e9, NULL, 0,                                 \
       "soft obstacle: damping rate inside, 1/s (0: none; parameter soft.0.damping; docs/fluids.md)"}

/* The fluid and its parameters as the env API reads them. */
typedef struct dsSmokeCore {
  dsFluidModel* fm;
  dsFluidData* fd;   /* the serial engine's data, or */
  dsFluidBatch* fb;  /* a batch of one on the batched engine (physics.batched_engine or a CUDA device) */
  dsDevice fb_dev;   /* fb's device */
  dsFluidDef fdef;   /* the model's definition as the class made it (its solver: the config's) */
  dsSmokeObstacle obs; /* and its obstacle */
  double* cur_dens;  /* ncell: fb's current density, read back after every change (fb only) */
  int ncell, nparam;
  double* dens0;     /* ncell: the initial density (parameter initial_density) */
  double* gdens0;    /* ncell: its gradient */
  double* pgrad;     /* nparam: the fluid parameters' gradients */
  dsReal* r_dens0;   /* the same as dsReal, what ds_env_param returns */
  dsReal* r_gdens0;
  dsReal* r_param;   /* nparam */
  dsReal* r_pgrad;
  /* states and windows (set before ds__smoke_core_alloc: T, C, grads) */
  int T, C, nstep, grads, nvel, ssize;
  double* stepd;     /* nstep x ncell: the density at the end of each step (grads) */
  double* gstep;     /* nstep x ncell: dL/d(that density), from image_adjoint */
  int* has;          /* nstep: 1 when gstep's row holds a term of the next backward */
  int* at;           /* nstep: the terms' substeps */
  const double** terms; /* nstep: their rows */
  double* sbuf;      /* ssize: a state in the fluid's layout [velocity | density | temperature] */
  double* gstate;    /* ssize: dL/d(state at a window's start) */
  double* gforce;    /* T x ncell x dim: dL/dF per substep (force-field classes; else NULL) */
} dsSmokeCore;

/* The fluid model of fd with the obstacle o (ds__smoke_fluid_create),
 * kept with both so that the engine can remake it: the batched engine
 * solves with PCG only, so there a config's solver auto (the FFT where the
 * build has it) becomes PCG. The error names the key. */
int ds__smoke_core_model(dsEnv* e, dsSmokeCore* c, const dsFluidDef* fd, const dsSmokeObstacle* o);
/* 1 when the env's definition runs the fluid on the batched engine:
 * physics.batched_engine or a CUDA device. */
int ds__smoke_batched(const dsEnvDef* def);
/* The engine the env's definition asks for, with a tape of c->T substeps
 * (checkpoint_every K; K >= T: none): the serial data, or a batch of one
 * on the definition's device; made at the first call and remade when the
 * device or engine changed (ds_env_set_device), the model's parameters
 * kept. *fresh: 1 when it was (re)made (then at substep 0, the state that
 * of a reset from rest). Errors name the engine and device. */
int ds__smoke_engine(dsEnv* e, dsSmokeCore* c, int every, int* fresh);
/* The engine's calls: reset to substep 0 (density dens; NULL: none; zero
 * velocity, ambient temperature), one step with a force field (NULL:
 * none), the current density, the steps taken. Errors go to the env's
 * message after `what`. */
int ds__smoke_reset(dsEnv* e, dsSmokeCore* c, const double* dens, const char* what);
int ds__smoke_advance(dsEnv* e, dsSmokeCore* c, const double* force, const char* what);
const double* ds__smoke_density(const dsSmokeCore* c);
int ds__smoke_steps(const dsSmokeCore* c);
/* The tape's bytes for substeps and checkpoint_every K on either engine. */
size_t ds__smoke_engine_bytes(const dsSmokeCore* c, int substeps, int every);

/* The arrays, once c->fm is made: DS_ERR_NOMEM. */
int ds__smoke_core_alloc(dsSmokeCore* c);
void ds__smoke_core_free(dsSmokeCore* c);
/* The dsEnvSim hooks' bodies: the fluid's names, then initial_density. */
const char* ds__smoke_param_name(const dsSmokeCore* c, int i);
int ds__smoke_param(const dsSmokeCore* c, const char* name, const dsReal** values, const dsReal** grad, int* count);
int ds__smoke_set_param(dsEnv* e, dsSmokeCore* c, const char* name, const dsReal* v, int count);
/* After ds_fluid_backward into c->gdens0 and c->pgrad: the dsReal copies. */
void ds__smoke_core_grads(dsSmokeCore* c);
/* Bytes of the arrays for states and windows (tape_bytes's share). */
size_t ds__smoke_core_bytes(const dsSmokeCore* c, int force_field);

/* States and windows (dsEnvSim.state_size, get_state, set_state,
 * backward_window; docs/fluids.md "Windows and states"). The state is the
 * fluid's: face velocities (x faces, then y, then z), density, temperature
 * (ncell each; the fluid always carries a temperature, the ambient one
 * where nothing heats it). */
int ds__smoke_state_size(const dsSmokeCore* c);
int ds__smoke_get_state(dsSmokeCore* c, dsReal* state);
/* Rewinds the fluid to substep s and sets state there (ds_fluid_set_state);
 * with gradients, the density at the end of the step s ends is kept anew. */
int ds__smoke_set_state(dsEnv* e, dsSmokeCore* c, int s, const dsReal* state);
/* After substep s (the step k's): the density at a step end kept for image adjoints. */
void ds__smoke_keep_step(dsSmokeCore* c, int k, int s);
/* g_k += gd (ncell): a term on the density at the end of step k (image_adjoint). */
double* ds__smoke_step_term(dsSmokeCore* c, int k);
/* The fluid's backward of substeps s0 .. s1 - 1 from adj_final (ssize
 * values or NULL) plus gdens_final (ncell, on the density; or NULL) and the image terms kept for steps ending in (s0, s1]
 * (every kept term is consumed): grad_state0 (may be NULL), c->gforce
 * rows s0 .. s1 - 1 (force-field classes), the window's parameter
 * gradients (initial_density's only when s0 = 0). */
int ds__smoke_window(dsEnv* e, dsSmokeCore* c, int s0, int s1, const dsReal* adj_final, const double* gdens_final,
                     dsReal* grad_state0);

/* The message of the fluid data's last error as the env's, after `what`. */
int ds__smoke_fail(dsEnv* e, const dsSmokeCore* c, int rc, const char* what);

/* physics.dt against the CFL limit the config states: dt max_speed / dx <=
 * cfl_max, else DS_ERR_CONFIG with the numbers and the largest dt. */
int ds__smoke_check_cfl(const dsEnvDef* def, double dx, double max_speed, double cfl_max, char* err, size_t errlen);
/* The inflow box inside [0, size] on the first `axes` axes (source.lo, source.hi). */
int ds__smoke_check_source(const dsReal lo[3], const dsReal hi[3], int axes, double size, char* err, size_t errlen);
/* The kinds a fluid env differentiates: no state observation, loss
 * image_last, sparse reward, no second camera. */
int ds__smoke_check_kinds(const dsEnvDef* def, const char* cls, char* err, size_t errlen);

/* Defaults: no box, no mesh, scale 1. */
void ds__smoke_obstacle_defaults(dsSmokeObstacle* o);
/* The box on the first `axes` axes: none, or 0 <= lo < hi <= size. */
int ds__smoke_check_obstacle(const dsSmokeObstacle* o, int axes, double size, char* err, size_t errlen);
/* The obstacle's surfaces in world coordinates (the box's 12 triangles, then
 * the mesh's), into out (ds_mesh_free; nvert 0 when there is none);
 * DS_ERR_CONFIG naming obstacle.mesh when its file is missing or bad. */
int ds__smoke_obstacle_mesh(const dsSmokeObstacle* o, dsMesh* out, char* err, size_t errlen);
/* The fluid model of fd with the obstacle: the box as fd's obstacle, the
 * mesh voxelised into solid_cells (an error names obstacle.mesh when it
 * encloses no cell centre). *out as ds_fluid_model_create's. */
int ds__smoke_fluid_create(dsFluidDef fd, const dsSmokeObstacle* o, dsFluidModel** out, char* err, size_t errlen);

/* The normalised image error over the colour channels of npix pixels:
 * sum (I - I*)^2 / sum (I* - B)^2, B the background (bg_img, npix x 4, or
 * the constant bg3 when bg_img is NULL): 1 for an empty scene, 0 at the goal. */
double ds__smoke_image_error(const dsReal* img, const dsReal* goal, const dsReal* bg_img, const double bg3[3],
                             size_t npix);

#endif

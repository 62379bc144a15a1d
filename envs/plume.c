/* smoke-plume (docs/fluids.md, "The smoke-plume env"): a 3-D buoyant smoke
 * plume (dsim/fluid.h, an n^3 MAC grid filling a closed cube of side
 * grid.size, its low corner at the origin, y up) rising from an inflow box
 * near the floor, filmed through the env's camera by emission-absorption
 * ray marching (dsim/volume.h) over a ground and a dark sky. No actions:
 * what there is to find is the physics, from the video (dsim sysid:
 * buoyancy.alpha and source.0.velocity.y; configs/sysid-plume.json).
 *
 * Frame: ds_volume_render(density) over the background B (sky colour, and
 * the ground quad at y = 0 where a ray hits it, its depth from
 * ds_volume_mesh_depth, so the march stops there). Goal: the last frame of
 * the plume with the definition's parameters, made once at create (a
 * parameter set later does not move it). Metric: the normalised image
 * error sum_rgb (I - I*)^2 / sum_rgb (I* - B)^2 (1: no smoke, 0: the goal).
 *
 * Gradients: a loss on the images of several steps (sysid's video; the
 * dsEnvSim.image_adjoint hook) is L = sum_k L_k(I_k), I_k = R(rho(t_k)), R
 * the renderer, t_k = (k + 1) C the substep ending step k. The hook runs
 * R's adjoint on the kept rho(t_k) into g_k = dL_k/drho(t_k); the backward
 * then gives all g_k to one fluid sweep (ds__smoke_window, the fluid's
 * ds_fluid_backward_window over the episode), which adds g_k to the
 * running density adjoint when it passes substep t_k. States and windows:
 * the fluid's state and window backward (envs/smoke_common.c; no actions).
 * Named parameters: the fluid's and initial_density (envs/smoke_common.h). */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "dsim/env.h"
#include "dsim/fluid.h"
#include "dsim/volume.h"
#include "envs/smoke_common.h"

typedef struct dsPlumeParams {
  int n;               /* fluid cells per side [grid.n] */
  dsReal size;         /* cube side, m [grid.size] */
  int advection;       /* 0 semi-Lagrangian, 1 MacCormack [fluid.advection] */
  dsReal alpha;        /* buoyancy per unit density, m/s^2 [fluid.buoyancy] */
  dsReal tolerance;    /* pressure solve [fluid.tolerance] */
  int max_iterations;  /* pressure solve [fluid.max_iterations] */
  dsReal cfl_max;      /* [fluid.cfl_max] */
  dsReal max_speed;    /* the speed the config expects, m/s [fluid.max_speed] */
  int pcg;             /* 1: always PCG; 0: the FFT solve where the build has it [fluid.solver] */
  dsReal source_lo[3]; /* inflow box corners, m [source.lo] */
  dsReal source_hi[3]; /* [source.hi] */
  dsReal source_rate;  /* density per s [source.rate] */
  dsReal source_speed; /* upward inflow velocity, m/s [source.speed] */
  dsReal extinction;   /* sigma_t per unit density, 1/m [render.extinction] */
  dsReal march;        /* ray-march step, fraction of a cell [render.march_step] */
  dsSmokeObstacle obs;   /* [obstacle.*] */
} dsPlumeParams;

_Static_assert(sizeof(dsPlumeParams) <= DS_ENV_PARAMS_MAX, "plume parameters fit a dsEnvDef");

#define P(f) offsetof(dsPlumeParams, f)
static const dsConfigKey keys[] = {
    {"grid.n", DS_KEY_INT, P(n), 2, 256, NULL, 0, "fluid cells per side of the cube (n^3 cells)"},
    {"grid.size", DS_KEY_REAL, P(size), 1e-3, 1e3, NULL, 0, "side of the cube, m (its low corner at the origin)"},
    {"fluid.advection", DS_KEY_ENUM, P(advection), 0, 0, "semi_lagrangian|maccormack", 0,
     "advection scheme (maccormack: second order, clamped)"},
    {"fluid.buoyancy", DS_KEY_REAL, P(alpha), -1e6, 1e6, NULL, 0,
     "buoyant acceleration per unit density, m/s^2 (parameter buoyancy.alpha)"},
    {"fluid.tolerance", DS_KEY_REAL, P(tolerance), 1e-15, 0.5, NULL, 0, "pressure solve: relative residual"},
    {"fluid.max_iterations", DS_KEY_INT, P(max_iterations), 1, 1000000, NULL, 0, "pressure solve iterations"},
    {"fluid.cfl_max", DS_KEY_REAL, P(cfl_max), 1e-3, 100, NULL, 0,
     "largest CFL number dt max|u| / dx: a step above it fails, and physics.dt must keep dt max_speed / dx below it"},
    {"fluid.max_speed", DS_KEY_REAL, P(max_speed), 1e-6, 1e6, NULL, 0,
     "the largest flow speed the config expects, m/s (for the CFL check of physics.dt)"},
    {"fluid.solver", DS_KEY_ENUM, P(pcg), 0, 0, "auto|pcg", 0,
     "pressure solve: auto, the FFT where the build has FFTW and the domain allows it (no solid cells), else and on "
     "the batched engine MIC(0)-PCG; pcg, always PCG"},
    {"source.lo", DS_KEY_VEC3, P(source_lo), -1e3, 1e3, NULL, 0, "inflow box, low corner, m"},
    {"source.hi", DS_KEY_VEC3, P(source_hi), -1e3, 1e3, NULL, 0, "inflow box, high corner, m"},
    {"source.rate", DS_KEY_REAL, P(source_rate), 0, 1e6, NULL, 0, "density added per s inside the inflow box"},
    {"source.speed", DS_KEY_REAL, P(source_speed), -1e3, 1e3, NULL, 0,
     "upward inflow velocity, m/s: the faces in the box take it every step (parameter source.0.velocity.y)"},
    {"render.extinction", DS_KEY_REAL, P(extinction), 0, 1e6, NULL, 0, "smoke extinction per unit density, 1/m"},
    {"render.march_step", DS_KEY_REAL, P(march), 0.01, 4, NULL, 0, "ray-march step, fraction of a cell"},
    DS__SMOKE_OBSTACLE_KEYS(P),
    {NULL, DS_KEY_REAL, 0, 0, 0, NULL, 0, NULL}};
#undef P

static void defaults(dsEnvDef* d) {
  dsPlumeParams* p = (dsPlumeParams*)d->params.bytes;
  d->dt = (dsReal)0.02;
  d->substeps = 32;
  d->control_interval = 4;
  d->render_interval = 4;
  d->render_last = 1;
  d->gravity[0] = d->gravity[1] = d->gravity[2] = 0;
  d->ground = 0;
  d->width = d->height = 64;
  d->supersample = 1;
  d->obs_state = DS_OBS_STATE_NONE;
  d->loss_kind = DS_ENV_LOSS_IMAGE_LAST;
  d->cam_distance = (dsReal)2.6;
  d->cam_elevation = 15;
  d->cam_azimuth = 20;
  d->cam_fov = 40;
  d->cam_near = (dsReal)0.1;
  d->cam_look_at[0] = (dsReal)0.5, d->cam_look_at[1] = (dsReal)0.45, d->cam_look_at[2] = (dsReal)0.5;
  p->n = 64;
  p->size = 1;
  p->advection = 0;
  p->alpha = 1;
  p->tolerance = 1e-6;
  p->max_iterations = 2000;
  p->cfl_max = 10;
  p->max_speed = 3;
  p->pcg = 0;
  p->source_lo[0] = 0.4, p->source_lo[1] = 0.05, p->source_lo[2] = 0.4;
  p->source_hi[0] = 0.6, p->source_hi[1] = 0.15, p->source_hi[2] = 0.6;
  p->source_rate = 4;
  p->source_speed = 0.5;
  p->extinction = 10;
  p->march = 0.5;
  ds__smoke_obstacle_defaults(&p->obs);
}

static int validate(const dsEnvDef* def, char* err, size_t errlen) {
  const dsPlumeParams* p = (const dsPlumeParams*)def->params.bytes;
  int rc = ds__smoke_check_cfl(def, (double)p->size / p->n, p->max_speed, p->cfl_max, err, errlen);
  if (!rc) rc = ds__smoke_check_source(p->source_lo, p->source_hi, 3, p->size, err, errlen);
  if (!rc) rc = ds__smoke_check_obstacle(&p->obs, 3, p->size, err, errlen);
  return rc ? rc : ds__smoke_check_kinds(def, "smoke-plume", err, errlen);
}

/* The sky behind the plume and the ground under it (RGBA). */
static const double kSky[4] = {0.05, 0.07, 0.12, 1}, kGround[4] = {0.36, 0.34, 0.30, 1},
                    kObstacle[4] = {0.45, 0.38, 0.30, 1};
/* The ground quad's half side, in cube sides, about the cube's centre. */
#define PLUME_GROUND_HALF 4.0

typedef struct PlumeState {
  dsSmokeCore c;   /* the fluid, its parameters and initial_density */
  dsVolume* vol;
  int ncell, T, C, nstep, nframe, grads;
  size_t npix;     /* pixels x 4 */
  double* frames;  /* nframe x ncell: kept densities */
  double* gdens;   /* ncell: dL/d(final density) */
  double* goal;    /* ncell: the goal density */
  dsReal* bg;      /* npix: the background image */
  dsReal* depth;   /* pixels: where rays stop (the ground) */
  dsReal* img;     /* npix: scratch */
} PlumeState;

static PlumeState* state_of(const dsEnv* e) { return (PlumeState*)ds_env_class_state((dsEnv*)e); }

static dsFluidDef fluid_def(const dsEnvDef* def, const dsPlumeParams* p) {
  dsFluidDef fd = ds_fluid_default_def();
  fd.n[0] = fd.n[1] = fd.n[2] = p->n;
  fd.dx = (double)p->size / p->n;
  fd.dt = def->dt;
  fd.advection = p->advection ? DS_FLUID_MACCORMACK : DS_FLUID_SEMI_LAGRANGIAN;
  fd.alpha = p->alpha;
  fd.beta = 0;
  fd.up_axis = 1;
  for (int k = 0; k < 3; k++) fd.gravity[k] = def->gravity[k];
  fd.cfl_max = p->cfl_max;
  fd.tolerance = p->tolerance;
  fd.max_iterations = p->max_iterations;
  fd.solver = p->pcg ? DS_FLUID_SOLVER_PCG : DS_FLUID_SOLVER_AUTO;
  fd.nsource = 1;
  dsFluidSource* s = &fd.source[0];
  for (int k = 0; k < 3; k++) s->box.lo[k] = p->source_lo[k], s->box.hi[k] = p->source_hi[k];
  s->density_rate = p->source_rate;
  s->temperature_rate = 0;
  s->set_velocity = 1;
  s->velocity[0] = 0, s->velocity[1] = p->source_speed, s->velocity[2] = 0;
  return fd;
}

static void destroy(void* st) {
  PlumeState* s = (PlumeState*)st;
  if (!s) return;
  ds__smoke_core_free(&s->c);
  ds_volume_destroy(s->vol);
  void* bufs[] = {s->frames, s->gdens, s->goal, s->bg, s->depth, s->img};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) ds_free(bufs[i]);
  ds_free(s);
}

/* The fluid model only (small); the tape and the renderer come in built(), after the memory bound. */
static int create(dsEnv* e, void** out) {
  const dsEnvDef* def = ds_env_def(e);
  const dsPlumeParams* p = (const dsPlumeParams*)ds_env_params(e);
  PlumeState* s = (PlumeState*)ds_calloc(1, sizeof *s);
  if (!s) return DS_ERR_NOMEM;
  *out = s;
  const dsFluidDef fd = fluid_def(def, p);
  int rc = ds__smoke_core_model(e, &s->c, &fd, &p->obs);
  if (rc) return rc;
  s->ncell = s->c.ncell = ds_fluid_ncell(s->c.fm);
  s->T = def->substeps;
  s->C = def->control_interval;
  s->nstep = (s->T + s->C - 1) / s->C;
  s->nframe = (def->substeps + def->render_interval - 1) / def->render_interval + (def->render_last ? 1 : 0);
  s->grads = def->gradients;
  s->npix = 4 * (size_t)def->width * def->height;
  s->c.T = s->T, s->c.C = s->C, s->c.grads = s->grads;
  return 0;
}

/* The fluid's tape, the kept densities (frames; with gradients each step's
 * and its adjoint), the env's own arrays; the renderer's buffers (a few
 * arrays per pixel and, in its backward, up to 16 grids) are not counted. */
static size_t tape_bytes(const dsEnv* e, int substeps, int every, int gradients) {
  const PlumeState* s = state_of(e);
  const size_t nc = (size_t)s->ncell;
  const size_t own = (size_t)s->nframe * nc * sizeof(double) + ds__smoke_core_bytes(&s->c, 0) +
                     nc * (4 * sizeof(double) + 2 * sizeof(dsReal)) + s->npix * 3 * sizeof(dsReal);
  return own + ds__smoke_engine_bytes(&s->c, substeps, gradients ? every : substeps);
}

/* The obstacle in the picture: where its surface is nearer than the ground,
 * the rays stop there and the background is its colour (flat). s->img is
 * the scratch of its depth. */
static int obstacle_view(dsEnv* e, PlumeState* s, const dsPlumeParams* p) {
  dsMesh om;
  char err[512] = "";
  int rc = ds__smoke_obstacle_mesh(&p->obs, &om, err, sizeof err);
  if (rc) return ds_env_set_errorf(e, rc, "%s", err);
  if (om.nvert) {
    const dsRasterMesh obm = {om.x, om.nvert, om.tri, om.ntri, NULL, DS_COLOR_FACE};
    rc = ds_volume_mesh_depth(s->vol, &obm, s->img);
  }
  for (size_t q = 0; q < s->npix / 4 && om.nvert && !rc; q++)
    if (s->img[q] < s->depth[q]) {
      s->depth[q] = s->img[q];
      for (int ch = 0; ch < 4; ch++) s->bg[4 * q + ch] = (dsReal)kObstacle[ch];
    }
  ds_mesh_free(&om);
  return rc ? ds_env_set_errorf(e, rc, "render: obstacle depth") : 0;
}

/* The renderer through the env's camera, the background and the ground's depth. */
static int make_view(dsEnv* e, PlumeState* s, const dsPlumeParams* p) {
  const dsEnvDef* def = ds_env_def(e);
  dsReal cam[DS_ENV_CAMERA_NVAL];
  int rc = ds_env_camera(e, cam);
  if (rc) return ds_env_set_errorf(e, rc, "camera: %s", ds_strerror(rc));
  dsVolumeDef vd = ds_volume_default_def();
  vd.n[0] = vd.n[1] = vd.n[2] = p->n;
  vd.dx = (double)p->size / p->n;
  vd.sigma_t = p->extinction;
  const double smoke[3] = DS_FLUID_RENDER_SMOKE;
  for (int k = 0; k < 3; k++) vd.color[k] = smoke[k];
  vd.step = p->march;
  vd.width = def->width;
  vd.height = def->height;
  const dsReal up[3] = {0, 1, 0};
  if ((rc = ds_camera_set_eye(&vd.camera, cam, cam + 3, up)))
    return ds_env_set_errorf(e, rc, "camera: the eye is the look-at point");
  vd.camera.fov_deg = cam[6] > 0 ? cam[6] : def->cam_fov;
  vd.camera.fx = cam[7], vd.camera.fy = cam[8], vd.camera.cx = cam[9], vd.camera.cy = cam[10];
  vd.camera.znear = def->cam_near;
  vd.camera.zfar = def->cam_far;
  char err[256] = "";
  if ((rc = ds_volume_create(&s->vol, &vd, err, sizeof err))) return ds_env_set_errorf(e, rc, "render: %s", err);
  const dsReal L = p->size, lo = (dsReal)(0.5 - PLUME_GROUND_HALF) * L, hi = (dsReal)(0.5 + PLUME_GROUND_HALF) * L;
  const dsReal gv[12] = {lo, 0, lo, hi, 0, lo, hi, 0, hi, lo, 0, hi};
  const int gf[6] = {0, 1, 2, 0, 2, 3};
  const dsRasterMesh ground = {gv, 4, gf, 2, NULL, DS_COLOR_FACE};
  if ((rc = ds_volume_mesh_depth(s->vol, &ground, s->depth))) return ds_env_set_errorf(e, rc, "render: ground depth");
  for (size_t q = 0; q < s->npix / 4; q++)
    for (int ch = 0; ch < 4; ch++) s->bg[4 * q + ch] = (dsReal)(isfinite((double)s->depth[q]) ? kGround : kSky)[ch];
  return obstacle_view(e, s, p);
}

static int draw(dsEnv* e, const double* rho, dsReal* image) {
  PlumeState* s = state_of(e);
  int rc = ds_volume_render(s->vol, rho, s->bg, s->depth, image);
  return rc ? ds_env_set_errorf(e, rc, "render: %s", ds_volume_last_error(s->vol)) : 0;
}

/* The goal: the plume with the definition's parameters, from rest. */
static int make_goal(dsEnv* e, PlumeState* s) {
  int rc = ds__smoke_reset(e, &s->c, NULL, "the goal rollout");
  for (int t = 0; t < s->T && !rc; t++) rc = ds__smoke_advance(e, &s->c, NULL, "the goal rollout");
  if (rc) return rc;
  memcpy(s->goal, ds__smoke_density(&s->c), sizeof(double) * (size_t)s->ncell);
  return ds__smoke_reset(e, &s->c, s->c.dens0, "reset");
}

/* The engine (made, or remade for another device: the goal and the view
 * made once, at the first), then the arrays, the view and the goal. */
static int built(dsEnv* e) {
  PlumeState* s = state_of(e);
  const dsEnvDef* def = ds_env_def(e);
  const size_t nc = (size_t)s->ncell;
  int fresh = 0, rc = ds__smoke_engine(e, &s->c, s->grads ? def->checkpoint_every : s->T, &fresh);
  if (rc || !fresh) return rc;
  if (s->goal) return ds__smoke_reset(e, &s->c, s->c.dens0, "reset");
#define PL_A(f, n, T) ok &= (s->f = (T*)ds_calloc((size_t)(n) + 1, sizeof(T))) != NULL
  int ok = 1;
  PL_A(frames, (size_t)s->nframe * nc, double);
  PL_A(gdens, nc, double);
  PL_A(goal, nc, double);
  PL_A(bg, s->npix, dsReal);
  PL_A(depth, s->npix / 4, dsReal);
  PL_A(img, s->npix, dsReal);
#undef PL_A
  if (!ok || ds__smoke_core_alloc(&s->c)) return ds_env_set_errorf(e, DS_ERR_NOMEM, "out of memory");
  if ((rc = make_view(e, s, (const dsPlumeParams*)ds_env_params(e)))) return rc;
  return make_goal(e, s);
}

/* One placeholder particle, no faces: the fluid is the physics. */
static int build(dsEnv* e, dsBuilder* b) {
  (void)e;
  const dsReal x[3] = {0, 0, 0};
  return ds_builder_add_particle(b, x, NULL, 1) < 0 ? DS_ERR_INVALID : 0;
}

static int action_size(const dsEnv* e) {
  (void)e;
  return 0;
}

static int sim_reset(dsEnv* e) {
  PlumeState* s = state_of(e);
  if (s->grads) memset(s->c.has, 0, sizeof(int) * (size_t)s->nstep);
  return ds__smoke_reset(e, &s->c, s->c.dens0, "reset");
}

static int sim_step(dsEnv* e, int k, int sub, const dsReal* action) {
  (void)action;
  PlumeState* s = state_of(e);
  int rc = ds__smoke_advance(e, &s->c, NULL, "fluid");
  if (rc) return rc;
  ds__smoke_keep_step(&s->c, k, sub);
  return 0;
}

static void keep_frame(dsEnv* e, int f) {
  PlumeState* s = state_of(e);
  if (f >= 0 && f < s->nframe)
    memcpy(s->frames + (size_t)f * s->ncell, ds__smoke_density(&s->c), sizeof(double) * (size_t)s->ncell);
}

static int render(dsEnv* e, int f, dsReal* image) {
  PlumeState* s = state_of(e);
  return draw(e, f < 0 ? ds__smoke_density(&s->c) : s->frames + (size_t)f * s->ncell, image);
}

static int goal(dsEnv* e, dsReal* image) { return draw(e, state_of(e)->goal, image); }

/* g_k += R'(rho(t_k))^T g_image (header comment) */
static int image_adjoint(dsEnv* e, int k, const dsReal* g_image) {
  PlumeState* s = state_of(e);
  double* g = ds__smoke_step_term(&s->c, k);
  if (!g) return ds_env_set_errorf(e, DS_ERR_STATE, "image adjoint of step %d", k);
  int rc = draw(e, s->c.stepd + (size_t)k * s->ncell, s->img);
  if (!rc && (rc = ds_volume_backward(s->vol, g_image, g, NULL, NULL, NULL)))
    return ds_env_set_errorf(e, rc, "render backward: %s", ds_volume_last_error(s->vol));
  return rc;
}

static int backward(dsEnv* e, const dsReal* g_image, dsReal* grad_actions) {
  (void)grad_actions; /* no actions */
  PlumeState* s = state_of(e);
  memset(s->gdens, 0, sizeof(double) * (size_t)s->ncell);
  int rc = draw(e, ds__smoke_density(&s->c), s->img);
  if (!rc && (rc = ds_volume_backward(s->vol, g_image, s->gdens, NULL, NULL, NULL)))
    return ds_env_set_errorf(e, rc, "render backward: %s", ds_volume_last_error(s->vol));
  if (rc) return rc;
  return ds__smoke_window(e, &s->c, 0, ds__smoke_steps(&s->c), NULL, s->gdens, NULL);
}

static int state_size(const dsEnv* e) { return ds__smoke_state_size(&state_of(e)->c); }
static int get_state(const dsEnv* e, dsReal* state) { return ds__smoke_get_state(&state_of(e)->c, state); }
static int set_state(dsEnv* e, int sub, const dsReal* state) {
  return ds__smoke_set_state(e, &state_of(e)->c, sub, state);
}

static int backward_window(dsEnv* e, int s0, int s1, const dsReal* adj_final, dsReal* grad_actions,
                           dsReal* grad_state0) {
  (void)grad_actions; /* no actions */
  return ds__smoke_window(e, &state_of(e)->c, s0, s1, adj_final, NULL, grad_state0);
}

static const char* param_name(const dsEnv* e, int i) { return ds__smoke_param_name(&state_of(e)->c, i); }

static int param(const dsEnv* e, const char* name, const dsReal** values, const dsReal** grad, int* count) {
  return ds__smoke_param(&state_of(e)->c, name, values, grad, count);
}

static int set_param(dsEnv* e, const char* name, const dsReal* v, int count) {
  return ds__smoke_set_param(e, &state_of(e)->c, name, v, count);
}

static int metric(const dsEnv* e, dsReal* value) {
  PlumeState* s = state_of(e);
  const dsReal* g = ds_env_goal_image(e);
  int rc = draw((dsEnv*)e, ds__smoke_density(&s->c), s->img);
  if (rc || !g) return rc ? rc : DS_ERR_STATE;
  *value = (dsReal)ds__smoke_image_error(s->img, g, s->bg, NULL, s->npix / 4);
  return 0;
}

static const dsEnvSim plume_sim = {
    .tape_bytes = tape_bytes,
    .reset = sim_reset,
    .step = sim_step,
    .keep_frame = keep_frame,
    .render = render,
    .goal = goal,
    .backward = backward,
    .param_name = param_name,
    .param = param,
    .set_param = set_param,
    .metric = metric,
    .image_adjoint = image_adjoint,
    .state_size = state_size,
    .get_state = get_state,
    .set_state = set_state,
    .backward_window = backward_window,
    .batched = 1,
};

const dsEnvClass ds__smoke_plume_class = {
    .name = "smoke-plume",
    .doc = "3-D buoyant smoke plume (the fluid module, 64^3) rendered by ray marching: no actions; identify its "
           "buoyancy and inflow velocity from the video (dsim sysid)",
    .params_size = sizeof(dsPlumeParams),
    .keys = keys,
    .defaults = defaults,
    .validate = validate,
    .create = create,
    .destroy = destroy,
    .build = build,
    .built = built,
    .action_size = action_size,
    .action_kind = DS_ACTION_PER_STEP,
    .metric_kind = DS_METRIC_TARGET,
    .action_scale = 1,
    .sim = &plume_sim,
};

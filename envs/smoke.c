/* smoke-control (docs/fluids.md, "The smoke-control env"): steer a 2-D
 * buoyant smoke plume (dsim/fluid.h, an n x n MAC grid in a closed square
 * box of side grid.size) with a force field so that the density at the
 * last frame matches a target image. The class owns its physics through
 * dsEnvClass.sim; its particle model is one placeholder particle with no
 * faces (the env's particle queries read it).
 *
 * Actions: a control grid of N x N cells (control.cells) over the box, two
 * values per cell (x then y; cell (I, J) at index 2 (I + N J)), each a
 * force per unit mass of control.force m/s^2 per unit action, held over the
 * step. The per-cell field of the fluid is their bilinear interpolation at
 * the fluid cells' centres: with u = x N / L - 1/2 clamped to [0, N - 1],
 * I0 = min(floor u, N - 2), fx = u - I0 (and the same in y),
 *   F(x) = c sum_{a,b in {0,1}} wx_a wy_b A(I0 + a, J0 + b),
 *   wx_0 = 1 - fx, wx_1 = fx,
 * a linear map W, so dL/dA = c sum over the step's substeps of W^T dL/dF
 * (dL/dF from the fluid's backward per substep).
 *
 * Frame: ds_fluid_render_density_map(density, render.opacity, the map
 * render.colormap, or render.colormap_stops when given): t = 1 -
 * exp(-opacity rho) through a colour map, by default a dark background to
 * white smoke. Goal: the image of
 * the density at the last substep of a rollout under a hidden force
 * sequence, a sideways wind target.push (action units) in x, strongest at
 * mid height (A_x(I, J) = push sin(pi (J + 1/2) / N), A_y = 0), from the
 * definition's parameters, so it is reachable; it is made once, at create,
 * and stays a constant (parameters set later do not move it). Loss:
 * IMAGE_LAST (MSE by default). Metric: the normalised image error
 *   sum_rgb (I - I*)^2 / sum_rgb (I* - bg)^2,
 * over the colour channels (alpha is 1 everywhere), relative to the goal's
 * smoke (bg: the map's colour at t = 0): 1 for an empty box, 0 at the goal.
 *
 * Named parameters: the fluid's (buoyancy.alpha, buoyancy.beta,
 * ambient_temperature, gravity.x, gravity.y, source.0.density_rate, ...)
 * and initial_density (ncell, per cell, row-major from the bottom left).
 *
 * Image adjoints of any step (image_adjoint: I_k = R(rho at step k's end),
 * R the density image, dL/drho_k = R'^T g_k, a term of the one fluid
 * sweep), the state and windows (envs/smoke_common.c): a window's sweep
 * gives dL/dF per substep, and dL/dA as above for the window's steps. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "dsim/engine.h"
#include "dsim/env.h"
#include "dsim/fluid.h"
#include "envs/smoke_common.h"

#define SMOKE_PI 3.14159265358979323846

typedef struct dsSmokeParams {
  int n;                 /* fluid cells per side [grid.n] */
  dsReal size;           /* box side, m [grid.size] */
  int advection;         /* 0 semi-Lagrangian, 1 MacCormack [fluid.advection] */
  dsReal alpha;          /* buoyancy per unit density, m/s^2 [fluid.buoyancy] */
  dsReal tolerance;      /* pressure solve [fluid.tolerance] */
  int max_iterations;    /* pressure solve [fluid.max_iterations] */
  int pcg;               /* 1: always PCG; 0: the FFT solve where the build and engine have it [fluid.solver] */
  dsReal cfl_max;        /* [fluid.cfl_max] */
  dsReal max_speed;      /* the speed the config expects, m/s: dt max_speed / dx <= cfl_max [fluid.max_speed] */
  dsReal source_lo[3];   /* inflow box corners, m (z unused) [source.lo] */
  dsReal source_hi[3];   /* [source.hi] */
  dsReal source_rate;    /* density per s [source.rate] */
  dsReal source_speed;   /* upward inflow velocity, m/s; 0: none [source.speed] */
  int cells;             /* control grid cells per side [control.cells] */
  dsReal force;          /* m/s^2 per unit action [control.force] */
  dsReal opacity;        /* render scale per unit density [render.opacity] */
  int colormap;          /* dsFluidColormapName [render.colormap] */
  dsReal stops[4 * DS_FLUID_COLORMAP_MAX]; /* t, r, g, b of each stop: a map of one's own [render.colormap_stops] */
  int nstops;            /* values given (0: none) */
  dsReal push;           /* the target's hidden wind, action units [target.push] */
  dsSmokeObstacle obs;   /* [obstacle.*] */
} dsSmokeParams;

_Static_assert(sizeof(dsSmokeParams) <= DS_ENV_PARAMS_MAX, "smoke parameters fit a dsEnvDef");

#define P(f) offsetof(dsSmokeParams, f)
static const dsConfigKey keys[] = {
    {"grid.n", DS_KEY_INT, P(n), 2, 1024, NULL, 0, "fluid cells per side (render.width and height must equal it)"},
    {"grid.size", DS_KEY_REAL, P(size), 1e-3, 1e3, NULL, 0, "side of the square box, m"},
    {"fluid.advection", DS_KEY_ENUM, P(advection), 0, 0, "semi_lagrangian|maccormack", 0,
     "advection scheme (maccormack: second order, clamped)"},
    {"fluid.buoyancy", DS_KEY_REAL, P(alpha), -1e6, 1e6, NULL, 0,
     "buoyant acceleration per unit density, m/s^2 (parameter buoyancy.alpha)"},
    {"fluid.tolerance", DS_KEY_REAL, P(tolerance), 1e-15, 0.5, NULL, 0, "pressure solve: relative residual"},
    {"fluid.max_iterations", DS_KEY_INT, P(max_iterations), 1, 1000000, NULL, 0, "pressure solve iterations"},
    {"fluid.solver", DS_KEY_ENUM, P(pcg), 0, 0, "auto|pcg", 0,
     "pressure solve: auto, the FFT where the build has FFTW and the domain allows it (no solid cells), else and on "
     "the batched engine MIC(0)-PCG; pcg, always PCG"},
    {"fluid.cfl_max", DS_KEY_REAL, P(cfl_max), 1e-3, 100, NULL, 0,
     "largest CFL number dt max|u| / dx: a step above it fails, and physics.dt must keep dt max_speed / dx below it"},
    {"fluid.max_speed", DS_KEY_REAL, P(max_speed), 1e-6, 1e6, NULL, 0,
     "the largest flow speed the config expects, m/s (for the CFL check of physics.dt)"},
    {"source.lo", DS_KEY_VEC3, P(source_lo), -1e3, 1e3, NULL, 0, "inflow box, low corner (x, y; z unused), m"},
    {"source.hi", DS_KEY_VEC3, P(source_hi), -1e3, 1e3, NULL, 0, "inflow box, high corner, m"},
    {"source.rate", DS_KEY_REAL, P(source_rate), 0, 1e6, NULL, 0, "density added per s inside the inflow box"},
    {"source.speed", DS_KEY_REAL, P(source_speed), 0, 1e3, NULL, 0, "upward inflow velocity, m/s (0: none)"},
    {"control.cells", DS_KEY_INT, P(cells), 2, 64, NULL, 0,
     "control grid cells per side (actions: 2 per cell, interpolated bilinearly)"},
    {"control.force", DS_KEY_REAL, P(force), 1e-9, 1e6, NULL, 0, "force per unit mass per unit action, m/s^2"},
    {"render.opacity", DS_KEY_REAL, P(opacity), 1e-6, 1e6, NULL, 0,
     "smoke opacity per unit density: t = 1 - exp(-opacity rho)"},
    {"render.colormap", DS_KEY_ENUM, P(colormap), 0, 0, "smoke|viridis|inferno|grey", 0,
     "colour map of t (smoke: dark blue to white; viridis, inferno: 17 stops of the published tables; grey: black "
     "to white), linear between stops"},
    {"render.colormap_stops", DS_KEY_REALS, P(stops), 0, 4 * DS_FLUID_COLORMAP_MAX, NULL, P(nstops),
     "a colour map of one's own, in place of render.colormap: t, r, g, b of each of 2 to 32 stops in turn (t from 0 "
     "up to 1, increasing; colours in [0, 1]), linear between stops"},
    {"target.push", DS_KEY_REAL, P(push), -1e3, 1e3, NULL, 0,
     "the target rollout's hidden wind in x at mid height, action units"},
    DS__SMOKE_OBSTACLE_KEYS(P),
    {NULL, DS_KEY_REAL, 0, 0, 0, NULL, 0, NULL}};
#undef P

static void defaults(dsEnvDef* d) {
  dsSmokeParams* p = (dsSmokeParams*)d->params.bytes;
  d->dt = (dsReal)0.02;
  d->substeps = 48;
  d->control_interval = 8;
  d->render_interval = 48;
  d->render_last = 1;
  d->gravity[0] = d->gravity[1] = d->gravity[2] = 0;
  d->ground = 0;
  d->width = d->height = 128;
  d->supersample = 1;
  d->obs_state = DS_OBS_STATE_NONE;
  d->loss_kind = DS_ENV_LOSS_IMAGE_LAST;
  p->n = 128;
  p->size = 1;
  p->advection = 0;
  p->alpha = 1;
  p->tolerance = 1e-4;
  p->max_iterations = 2000;
  p->cfl_max = 10;
  p->max_speed = 3;
  p->source_lo[0] = 0.4, p->source_lo[1] = 0.05, p->source_lo[2] = 0;
  p->source_hi[0] = 0.6, p->source_hi[1] = 0.15, p->source_hi[2] = 0;
  p->source_rate = 4;
  p->source_speed = 0.5;
  p->cells = 8;
  p->force = 2;
  p->opacity = 2;
  p->colormap = DS_FLUID_COLORMAP_SMOKE;
  p->push = 1;
  ds__smoke_obstacle_defaults(&p->obs);
}

/* The map of render.colormap_stops; DS_ERR_CONFIG naming the key. */
static int own_colormap(const dsSmokeParams* p, dsFluidColormap* map, char* err, size_t errlen) {
  if (p->nstops % 4 || p->nstops < 8) {
    snprintf(err, errlen,
             "render.colormap_stops: %d numbers (expected t, r, g, b for each of 2 to %d stops: a multiple of 4 from "
             "8 to %d)",
             p->nstops, DS_FLUID_COLORMAP_MAX, 4 * DS_FLUID_COLORMAP_MAX);
    return DS_ERR_CONFIG;
  }
  map->n = p->nstops / 4;
  for (int k = 0; k < map->n; k++) {
    map->t[k] = p->stops[4 * k];
    for (int c = 0; c < 3; c++) map->rgb[k][c] = p->stops[4 * k + 1 + c];
  }
  char why[256] = "";
  if (!ds_fluid_colormap_check(map, why, sizeof why)) return 0;
  snprintf(err, errlen, "render.colormap_stops: %s", why);
  return DS_ERR_CONFIG;
}

static int validate(const dsEnvDef* def, char* err, size_t errlen) {
  const dsSmokeParams* p = (const dsSmokeParams*)def->params.bytes;
  if (def->width != p->n || def->height != p->n) {
    snprintf(err, errlen, "render.width, render.height: %d x %d (expected grid.n x grid.n = %d x %d: a pixel a cell)",
             def->width, def->height, p->n, p->n);
    return DS_ERR_CONFIG;
  }
  int rc = ds__smoke_check_cfl(def, (double)p->size / p->n, p->max_speed, p->cfl_max, err, errlen);
  if (!rc) rc = ds__smoke_check_source(p->source_lo, p->source_hi, 2, p->size, err, errlen);
  if (!rc) rc = ds__smoke_check_obstacle(&p->obs, 2, p->size, err, errlen);
  dsFluidColormap map;
  if (!rc && p->nstops) rc = own_colormap(p, &map, err, errlen);
  return rc ? rc : ds__smoke_check_kinds(def, "smoke-control", err, errlen);
}

typedef struct SmokeState {
  dsSmokeCore c;   /* the fluid, its parameters and initial_density */
  int n, ncell, nc, adim, T, C, nframe;
  double opacity, cforce;
  dsFluidColormap map; /* render.colormap */
  int* wi;         /* ncell x 4: the control cells of a fluid cell's bilinear stencil */
  double* ww;      /* ncell x 4: their weights */
  double* force;   /* ncell x 2: the current step's field */
  double* gdens;   /* ncell: dL/d(final density) */
  double* frames;  /* nframe x ncell: kept densities */
  double* goal;    /* ncell: the goal density */
  dsReal* img;     /* n x n x 4: scratch of the metric */
  dsReal* act;     /* adim: the goal's hidden action */
} SmokeState;

static SmokeState* state_of(const dsEnv* e) { return (SmokeState*)ds_env_class_state((dsEnv*)e); }

/* The fluid's definition from the env's. */
static dsFluidDef fluid_def(const dsEnvDef* def, const dsSmokeParams* p) {
  dsFluidDef fd = ds_fluid_default_def();
  fd.n[0] = fd.n[1] = p->n;
  fd.n[2] = 1;
  fd.dx = (double)p->size / p->n;
  fd.dt = def->dt;
  fd.advection = p->advection ? DS_FLUID_MACCORMACK : DS_FLUID_SEMI_LAGRANGIAN;
  fd.alpha = p->alpha;
  fd.beta = 0;
  fd.up_axis = 1;
  fd.gravity[0] = def->gravity[0], fd.gravity[1] = def->gravity[1], fd.gravity[2] = 0;
  fd.force_field = 1;
  fd.cfl_max = p->cfl_max;
  fd.tolerance = p->tolerance;
  fd.max_iterations = p->max_iterations;
  fd.solver = p->pcg ? DS_FLUID_SOLVER_PCG : DS_FLUID_SOLVER_AUTO;
  fd.nsource = 1;
  dsFluidSource* s = &fd.source[0];
  s->box = (dsFluidBox){{p->source_lo[0], p->source_lo[1], 0}, {p->source_hi[0], p->source_hi[1], 1}};
  s->density_rate = p->source_rate;
  s->temperature_rate = 0;
  s->set_velocity = p->source_speed > 0;
  s->velocity[0] = 0, s->velocity[1] = p->source_speed, s->velocity[2] = 0;
  return fd;
}

static void destroy(void* st) {
  SmokeState* s = (SmokeState*)st;
  if (!s) return;
  ds__smoke_core_free(&s->c);
  void* bufs[] = {s->wi, s->ww, s->force, s->gdens, s->frames, s->goal, s->img, s->act};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) ds_free(bufs[i]);
  ds_free(s);
}

/* The fluid model only (small); the tape comes in built(), after the memory bound. */
static int create(dsEnv* e, void** out) {
  const dsEnvDef* def = ds_env_def(e);
  const dsSmokeParams* p = (const dsSmokeParams*)ds_env_params(e);
  SmokeState* s = (SmokeState*)ds_calloc(1, sizeof *s);
  if (!s) return DS_ERR_NOMEM;
  *out = s;
  const dsFluidDef fd = fluid_def(def, p);
  int rc = ds__smoke_core_model(e, &s->c, &fd, &p->obs);
  if (rc) return rc;
  s->n = p->n;
  s->ncell = s->c.ncell = p->n * p->n;
  s->nc = p->cells;
  s->adim = 2 * p->cells * p->cells;
  s->T = def->substeps;
  s->C = def->control_interval;
  s->nframe = (def->substeps + def->render_interval - 1) / def->render_interval + (def->render_last ? 1 : 0);
  s->opacity = p->opacity;
  char err[512] = "";
  if (p->nstops && (rc = own_colormap(p, &s->map, err, sizeof err))) return ds_env_set_errorf(e, rc, "%s", err);
  if (!p->nstops && (rc = ds_fluid_colormap((dsFluidColormapName)p->colormap, &s->map)))
    return ds_env_set_errorf(e, rc, "render.colormap: %d (expected smoke, viridis, inferno or grey)", p->colormap);
  s->cforce = p->force;
  s->c.T = s->T, s->c.C = s->C, s->c.grads = def->gradients;
  return 0;
}

static size_t tape_bytes(const dsEnv* e, int substeps, int every, int gradients) {
  const SmokeState* s = state_of(e);
  const size_t nc = (size_t)s->ncell;
  const size_t own = ds__smoke_core_bytes(&s->c, 1) + (size_t)s->nframe * nc * sizeof(double) +
                     nc * (4 * sizeof(int) + 10 * sizeof(double) + 2 * sizeof(dsReal));
  return own + ds__smoke_engine_bytes(&s->c, substeps, gradients ? every : substeps);
}

/* dL/dA_step += c W^T dL/dF (header comment) */
static void field_fwd(const SmokeState* s, const dsReal* a, double* f) {
  for (int c = 0; c < s->ncell; c++)
    for (int q = 0; q < 2; q++) {
      double v = 0;
      for (int j = 0; j < 4; j++) v += s->ww[4 * c + j] * a[2 * s->wi[4 * c + j] + q];
      f[2 * c + q] = s->cforce * v;
    }
}

static void field_bwd(const SmokeState* s, const double* gf, dsReal* ga) {
  for (int c = 0; c < s->ncell; c++)
    for (int q = 0; q < 2; q++)
      for (int j = 0; j < 4; j++) ga[2 * s->wi[4 * c + j] + q] += (dsReal)(s->cforce * s->ww[4 * c + j] * gf[2 * c + q]);
}

/* The bilinear stencil of every fluid cell's centre on the control grid. */
static void make_stencil(SmokeState* s) {
  const int n = s->n, N = s->nc;
  for (int j = 0; j < n; j++)
    for (int i = 0; i < n; i++) {
      double u[2] = {(i + 0.5) * N / n - 0.5, (j + 0.5) * N / n - 0.5}, f[2];
      int i0[2];
      for (int k = 0; k < 2; k++) {
        u[k] = u[k] < 0 ? 0 : u[k] > N - 1 ? N - 1 : u[k];
        i0[k] = (int)floor(u[k]);
        if (i0[k] > N - 2) i0[k] = N - 2;
        f[k] = u[k] - i0[k];
      }
      const int c = i + n * j;
      for (int b = 0; b < 2; b++)
        for (int a = 0; a < 2; a++) {
          s->wi[4 * c + 2 * b + a] = (i0[0] + a) + N * (i0[1] + b);
          s->ww[4 * c + 2 * b + a] = (a ? f[0] : 1 - f[0]) * (b ? f[1] : 1 - f[1]);
        }
    }
}

/* The goal: the hidden wind's rollout from rest (header comment). */
static int make_goal(dsEnv* e, SmokeState* s, double push) {
  dsReal* a = s->act;
  for (int J = 0; J < s->nc; J++)
    for (int I = 0; I < s->nc; I++) {
      a[2 * (I + s->nc * J)] = (dsReal)(push * sin(SMOKE_PI * (J + 0.5) / s->nc));
      a[2 * (I + s->nc * J) + 1] = 0;
    }
  field_fwd(s, a, s->force);
  int rc = ds__smoke_reset(e, &s->c, NULL, "the goal rollout");
  for (int t = 0; t < s->T && !rc; t++) rc = ds__smoke_advance(e, &s->c, s->force, "the goal rollout");
  if (rc) return rc;
  memcpy(s->goal, ds__smoke_density(&s->c), sizeof(double) * (size_t)s->ncell);
  return ds__smoke_reset(e, &s->c, s->c.dens0, "reset");
}

/* The engine (made, or remade for another device: the goal made once, at
 * the first), then the arrays and the goal. */
static int built(dsEnv* e) {
  SmokeState* s = state_of(e);
  const dsEnvDef* def = ds_env_def(e);
  const size_t nc = (size_t)s->ncell;
  int fresh = 0, rc = ds__smoke_engine(e, &s->c, def->gradients ? def->checkpoint_every : s->T, &fresh);
  if (rc || !fresh) return rc;
  if (s->goal) return ds__smoke_reset(e, &s->c, s->c.dens0, "reset");
#define SM_A(f, n, T) ok &= (s->f = (T*)ds_calloc((size_t)(n) + 1, sizeof(T))) != NULL
  int ok = 1;
  SM_A(wi, 4 * nc, int);
  SM_A(ww, 4 * nc, double);
  SM_A(force, 2 * nc, double);
  SM_A(gdens, nc, double);
  SM_A(frames, (size_t)s->nframe * nc, double);
  SM_A(goal, nc, double);
  SM_A(img, 4 * nc, dsReal);
  SM_A(act, s->adim, dsReal);
#undef SM_A
  if (!ok || ds__smoke_core_alloc(&s->c)) return ds_env_set_errorf(e, DS_ERR_NOMEM, "out of memory");
  make_stencil(s);
  return make_goal(e, s, ((const dsSmokeParams*)ds_env_params(e))->push);
}

/* One placeholder particle, no faces: the fluid is the physics. */
static int build(dsEnv* e, dsBuilder* b) {
  (void)e;
  const dsReal x[3] = {0, 0, 0};
  return ds_builder_add_particle(b, x, NULL, 1) < 0 ? DS_ERR_INVALID : 0;
}

static int action_size(const dsEnv* e) {
  const dsSmokeParams* p = (const dsSmokeParams*)ds_env_params(e);
  return 2 * p->cells * p->cells;
}

static int sim_reset(dsEnv* e) {
  SmokeState* s = state_of(e);
  if (s->c.grads) memset(s->c.has, 0, sizeof(int) * (size_t)s->c.nstep);
  return ds__smoke_reset(e, &s->c, s->c.dens0, "reset");
}

static int sim_step(dsEnv* e, int k, int sub, const dsReal* action) {
  (void)k, (void)sub;
  SmokeState* s = state_of(e);
  field_fwd(s, action, s->force);
  int rc = ds__smoke_advance(e, &s->c, s->force, "fluid");
  if (rc) return rc;
  ds__smoke_keep_step(&s->c, k, sub);
  return 0;
}

static void keep_frame(dsEnv* e, int f) {
  SmokeState* s = state_of(e);
  if (f >= 0 && f < s->nframe)
    memcpy(s->frames + (size_t)f * s->ncell, ds__smoke_density(&s->c), sizeof(double) * (size_t)s->ncell);
}

static int render(dsEnv* e, int f, dsReal* image) {
  SmokeState* s = state_of(e);
  const double* rho = f < 0 ? ds__smoke_density(&s->c) : s->frames + (size_t)f * s->ncell;
  return ds_fluid_render_density_map(s->c.fm, rho, s->opacity, &s->map, image);
}

static int goal(dsEnv* e, dsReal* image) {
  SmokeState* s = state_of(e);
  return ds_fluid_render_density_map(s->c.fm, s->goal, s->opacity, &s->map, image);
}

/* Substeps s0 .. s1 - 1 back from dL/d(state s1) (adj_final, plus
 * gdens_final on its density; either may be NULL) and the kept image
 * terms: dL/dA of the steps into grad_actions (rows from step s0 / C on),
 * dL/d(state s0). */
static int window_bwd(dsEnv* e, SmokeState* s, int s0, int s1, const dsReal* adj_final, const double* gdens_final,
                      dsReal* grad_actions, dsReal* grad_state0) {
  dsSmokeCore* c = &s->c;
  int rc = ds__smoke_window(e, c, s0, s1, adj_final, gdens_final, grad_state0);
  if (rc) return rc;
  for (int q = s0; q < s1 && grad_actions; q++)
    field_bwd(s, c->gforce + (size_t)q * 2 * s->ncell, grad_actions + (size_t)(q / s->C - s0 / s->C) * s->adim);
  return 0;
}

static int backward(dsEnv* e, const dsReal* g_image, dsReal* grad_actions) {
  SmokeState* s = state_of(e);
  memset(s->gdens, 0, sizeof(double) * (size_t)s->ncell);
  int rc = ds_fluid_render_density_map_bwd(s->c.fm, ds__smoke_density(&s->c), s->opacity, &s->map, g_image,
                                           s->gdens);
  if (rc) return ds_env_set_errorf(e, rc, "render backward (%s)", ds_strerror(rc));
  return window_bwd(e, s, 0, ds__smoke_steps(&s->c), NULL, s->gdens, grad_actions, NULL);
}

/* g_k += dI_k/drho^T g_image, I_k the image of the density at the end of step k */
static int image_adjoint(dsEnv* e, int k, const dsReal* g_image) {
  SmokeState* s = state_of(e);
  double* g = ds__smoke_step_term(&s->c, k);
  if (!g) return ds_env_set_errorf(e, DS_ERR_STATE, "image adjoint of step %d", k);
  int rc = ds_fluid_render_density_bwd(s->c.fm, s->c.stepd + (size_t)k * s->ncell, s->opacity, g_image, g);
  return rc ? ds_env_set_errorf(e, rc, "render backward (%s)", ds_strerror(rc)) : 0;
}

static int state_size(const dsEnv* e) { return ds__smoke_state_size(&state_of(e)->c); }
static int get_state(const dsEnv* e, dsReal* state) { return ds__smoke_get_state(&state_of(e)->c, state); }
static int set_state(dsEnv* e, int sub, const dsReal* state) {
  return ds__smoke_set_state(e, &state_of(e)->c, sub, state);
}

static int backward_window(dsEnv* e, int s0, int s1, const dsReal* adj_final, dsReal* grad_actions,
                           dsReal* grad_state0) {
  return window_bwd(e, state_of(e), s0, s1, adj_final, NULL, grad_actions, grad_state0);
}

static const char* param_name(const dsEnv* e, int i) { return ds__smoke_param_name(&state_of(e)->c, i); }

static int param(const dsEnv* e, const char* name, const dsReal** values, const dsReal** grad, int* count) {
  return ds__smoke_param(&state_of(e)->c, name, values, grad, count);
}

static int set_param(dsEnv* e, const char* name, const dsReal* v, int count) {
  return ds__smoke_set_param(e, &state_of(e)->c, name, v, count);
}

static int metric(const dsEnv* e, dsReal* value) {
  SmokeState* s = state_of(e);
  const dsReal* g = ds_env_goal_image(e);
  int rc = ds_fluid_render_density_map(s->c.fm, ds__smoke_density(&s->c), s->opacity, &s->map, s->img);
  if (rc || !g) return rc ? rc : DS_ERR_STATE;
  *value = (dsReal)ds__smoke_image_error(s->img, g, NULL, s->map.rgb[0], (size_t)s->ncell);
  return 0;
}

static const dsEnvSim smoke_sim = {
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

const dsEnvClass ds__smoke_control_class = {
    .name = "smoke-control",
    .doc = "2-D buoyant smoke (the fluid module, 128^2): a control grid of forces steers the plume onto a target "
           "image",
    .params_size = sizeof(dsSmokeParams),
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
    .sim = &smoke_sim,
};

/* Fluids (engine/fluid.c): the adjoint of whole episodes against central
 * differences in double (every parameter kind, SL and MacCormack, 2-D and
 * 3-D, obstacles, closed, open and periodic walls), the divergence after
 * projection, checkpointed backward = full tape bit for bit, 1 vs 2 threads
 * bit for bit, windows chained = the whole backward and set states
 * (test_windows), and refused inputs. */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#  include <omp.h>
#endif

#include "dsim/fluid.h"
#include "tests/dstest.h"
#define FLUIDCHECK_SEED 0x9e3779b97f4a7c15ull
#include "tests/fluidcheck.h"


/* An episode: the model, its inputs and a random linear loss on the final
 * state, L = wu . u_T + wr . rho_T + wT . T_T. */
typedef struct Episode {
  dsFluidModel* m;
  int steps, nv, nc, nfc;
  double *u0, *r0, *T0, *force; /* force: steps x nfc */
  double *wu, *wr, *wT;
} Episode;

static double* rnd_array(int n, double lo, double hi) {
  double* a = malloc(sizeof(double) * (size_t)n);
  for (int i = 0; i < n; i++) a[i] = lo + (hi - lo) * 0.5 * (urand() + 1);
  return a;
}

static Episode make_episode(const dsFluidDef* def, int steps, double uscale) {
  Episode e;
  char err[512];
  int rc = ds_fluid_model_create(def, &e.m, err, sizeof err);
  if (rc) {
    fprintf(stderr, "model: %s\n", err);
    exit(1);
  }
  e.steps = steps;
  e.nv = ds_fluid_nvel(e.m);
  e.nc = ds_fluid_ncell(e.m);
  e.nfc = e.nc * ds_fluid_dim(e.m);
  e.u0 = rnd_array(e.nv, -uscale, uscale);
  e.r0 = rnd_array(e.nc, 0, 1);
  e.T0 = rnd_array(e.nc, 0, 1);
  e.force = rnd_array(steps * e.nfc, -0.5, 0.5);
  e.wu = rnd_array(e.nv, -1, 1);
  e.wr = rnd_array(e.nc, -1, 1);
  e.wT = rnd_array(e.nc, -1, 1);
  return e;
}

static void free_episode(Episode* e) {
  ds_fluid_model_free(e->m);
  free(e->u0), free(e->r0), free(e->T0), free(e->force), free(e->wu), free(e->wr), free(e->wT);
}

static double dotn(const double* a, const double* b, int n) {
  double s = 0;
  for (int i = 0; i < n; i++) s += a[i] * b[i];
  return s;
}

static double rollout(Episode* e, dsFluidData* d) {
  int rc = ds_fluid_reset(e->m, d, e->u0, e->r0, e->T0);
  for (int t = 0; t < e->steps && !rc; t++) rc = ds_fluid_step(e->m, d, e->force + (size_t)t * e->nfc);
  if (rc) {
    fprintf(stderr, "rollout: %s\n", ds_fluid_last_error(d));
    return NAN;
  }
  return dotn(e->wu, ds_fluid_velocity(d), e->nv) + dotn(e->wr, ds_fluid_density(d), e->nc) +
         dotn(e->wT, ds_fluid_temperature(d), e->nc);
}

typedef struct Grads {
  double *u0, *r0, *T0, *force, *ftot, *param;
} Grads;

static Grads grads_alloc(const Episode* e) {
  Grads g;
  g.u0 = calloc((size_t)e->nv, sizeof(double));
  g.r0 = calloc((size_t)e->nc, sizeof(double));
  g.T0 = calloc((size_t)e->nc, sizeof(double));
  g.force = calloc((size_t)e->steps * e->nfc, sizeof(double));
  g.ftot = calloc((size_t)e->nfc, sizeof(double));
  g.param = calloc((size_t)ds_fluid_nparam(e->m) + 1, sizeof(double));
  return g;
}

static void grads_free(Grads* g) { free(g->u0), free(g->r0), free(g->T0), free(g->force), free(g->ftot), free(g->param); }

static int backward(Episode* e, int every, Grads* g) {
  dsFluidData* d;
  int rc = ds_fluid_data_create(e->m, e->steps, every, &d);
  if (rc) return rc;
  rollout(e, d);
  dsFluidGrad fg = {g->u0, g->r0, g->T0, g->force, g->ftot, g->param};
  rc = ds_fluid_backward(e->m, d, e->wu, e->wr, e->wT, &fg);
  if (rc) fprintf(stderr, "backward: %s\n", ds_fluid_last_error(d));
  ds_fluid_data_free(d);
  return rc;
}

/* central difference of the loss in *x (restored) */
static double fd(Episode* e, dsFluidData* d, double* x, double h) {
  double x0 = *x;
  *x = x0 + h;
  double lp = rollout(e, d);
  *x = x0 - h;
  double lm = rollout(e, d);
  *x = x0;
  return (lp - lm) / (2 * h);
}

/* the same for a force held in every step's field at entry i */
static double fd_force_const(Episode* e, dsFluidData* d, int i, double h) {
  for (int t = 0; t < e->steps; t++) e->force[(size_t)t * e->nfc + i] += h;
  double lp = rollout(e, d);
  for (int t = 0; t < e->steps; t++) e->force[(size_t)t * e->nfc + i] -= 2 * h;
  double lm = rollout(e, d);
  for (int t = 0; t < e->steps; t++) e->force[(size_t)t * e->nfc + i] += h;
  return (lp - lm) / (2 * h);
}

static double fd_param(Episode* e, dsFluidData* d, const char* name, double h) {
  double v;
  ds_fluid_param_get(e->m, name, &v);
  ds_fluid_param_set(e->m, name, v + h);
  double lp = rollout(e, d);
  ds_fluid_param_set(e->m, name, v - h);
  double lm = rollout(e, d);
  ds_fluid_param_set(e->m, name, v);
  return (lp - lm) / (2 * h);
}

/* Adjoint vs central differences. The tolerance (relative 1e-5 of the
 * larger value, absolute 1e-6 of the gradient's scale) is far below what a
 * wrong term gives (a factor, a sign, a dropped path: O(1) relative). The
 * step h = 1e-7 is small because the loss is only piecewise smooth (the
 * interpolation's cell edges, the MacCormack clamp): h = 1e-5 straddles
 * kinks on 100-step MacCormack episodes. */
static void check_fd(const char* label, Episode* e, int nprobe) {
  Grads g = grads_alloc(e);
  CHECK_INT_EQ(backward(e, 0, &g), 0);
  dsFluidData* d;
  ds_fluid_data_create(e->m, e->steps, 0, &d);
  const double h = getenv("FL_H") ? atof(getenv("FL_H")) : 1e-7, rtol = 1e-5;
  double scale = 0;
  for (int i = 0; i < e->nc; i++) scale = fmax(scale, fabs(g.r0[i]));
  /* rounding in the difference: about 1e-16 |L| / h ~ 1e-9 |L| */
  double atol = 1e-6 * fmax(scale, 1);
  int fails0 = dst_failures;
  for (int k = 0; k < nprobe; k++) {
    int c = (int)((urand() + 1) * 0.5 * e->nc), f = (int)((urand() + 1) * 0.5 * e->nv);
    int t = k * (e->steps - 1) / (nprobe > 1 ? nprobe - 1 : 1), i = (int)((urand() + 1) * 0.5 * e->nfc);
    CHECK_CLOSE(g.r0[c], fd(e, d, &e->r0[c], h), rtol, atol);
    CHECK_CLOSE(g.T0[c], fd(e, d, &e->T0[c], h), rtol, atol);
    CHECK_CLOSE(g.u0[f], fd(e, d, &e->u0[f], h), rtol, atol);
    CHECK_CLOSE(g.force[(size_t)t * e->nfc + i], fd(e, d, &e->force[(size_t)t * e->nfc + i], h), rtol, atol);
    CHECK_CLOSE(g.ftot[i], fd_force_const(e, d, i, h), rtol, atol);
  }
  for (int p = 0; p < ds_fluid_nparam(e->m); p++) {
    const char* name = ds_fluid_param_name(e->m, p);
    double v = fd_param(e, d, name, h);
    int f0 = dst_failures;
    CHECK_CLOSE(g.param[p], v, rtol, atol);
    if (dst_failures > f0) fprintf(stderr, "  (%s: parameter %s)\n", label, name);
  }
  if (dst_failures > fails0) fprintf(stderr, "  FD failures in %s\n", label);
  ds_fluid_data_free(d);
  grads_free(&g);
}

static dsFluidDef smoke_2d(int n) {
  dsFluidDef def = ds_fluid_default_def();
  def.n[0] = def.n[1] = n;
  def.n[2] = 1;
  def.dx = 1.0 / n;
  def.dt = 0.02;
  def.alpha = 0.7;
  def.beta = -0.4;
  def.ambient_temperature = 0.3;
  def.gravity[0] = 0.05;
  def.gravity[1] = -0.1;
  def.force_field = 1;
  def.tolerance = 1e-13;
  def.nsource = 1;
  def.source[0] = (dsFluidSource){{{0.35, 0.05, 0}, {0.65, 0.2, 0}}, 0.8, 0.5, 1, {0.1, 0.6, 0}};
  return def;
}

static void test_fd_2d(void) {
  /* closed box, a box obstacle, semi-Lagrangian */
  dsFluidDef def = smoke_2d(16);
  def.nobstacle = 1;
  def.obstacle[0] = (dsFluidBox){{0.4, 0.5, 0}, {0.6, 0.65, 0}};
  Episode e = make_episode(&def, 40, 0.3);
  check_fd("2-D SL closed, obstacle", &e, 2);
  free_episode(&e);
  /* MacCormack, periodic x, open top and bottom, obstacle */
  def.advection = DS_FLUID_MACCORMACK;
  def.boundary[0] = DS_FLUID_PERIODIC;
  def.boundary[1] = DS_FLUID_OPEN;
  e = make_episode(&def, 120, 0.3);
  check_fd("2-D MacCormack periodic/open, obstacle", &e, 1);
  free_episode(&e);
}

/* Soft obstacles: every parameter (positions, damping) against central
 * differences in 2-D and 3-D, beside a solid box and with two overlapping;
 * damping 0 leaves the step bitwise unchanged. */
static void test_fd_soft(void) {
  dsFluidDef def = smoke_2d(16);
  def.nsoft = 2;
  def.soft[0] = (dsFluidSoftObstacle){{0.5, 0.55, 0}, {0.12, 0.08, 0}, 0.05, 20};
  def.soft[1] = (dsFluidSoftObstacle){{0.6, 0.62, 0}, {0.1, 0.1, 0}, 0.04, 8};
  Episode e = make_episode(&def, 40, 0.3);
  check_fd("2-D SL closed, two soft obstacles", &e, 1);
  free_episode(&e);
  def.nsoft = 1;
  /* off the grid's mirror line: at x = 0.5 the damping is mirror-symmetric and a MacCormack clamp
     ties there, a kink in the loss (one-sided differences 19.870 and 19.913; the adjoint gives the
     right-hand one) */
  def.soft[0].center[0] = 0.47;
  def.nobstacle = 1;
  def.obstacle[0] = (dsFluidBox){{0.1, 0.3, 0}, {0.25, 0.5, 0}};
  def.advection = DS_FLUID_MACCORMACK;
  def.boundary[1] = DS_FLUID_OPEN;
  e = make_episode(&def, 60, 0.3);
  check_fd("2-D MacCormack open, a soft obstacle and a box", &e, 1);
  free_episode(&e);
  /* damping 0: the same bits as no soft obstacle */
  dsFluidDef d0 = smoke_2d(16), d1 = d0;
  d1.nsoft = 1;
  d1.soft[0] = (dsFluidSoftObstacle){{0.5, 0.55, 0}, {0.12, 0.08, 0}, 0.05, 0};
  Episode e0 = make_episode(&d0, 10, 0.3), e1 = make_episode(&d1, 10, 0.3);
  dsFluidData *a, *b;
  ds_fluid_data_create(e0.m, 10, 0, &a);
  ds_fluid_data_create(e1.m, 10, 0, &b);
  memcpy(e1.u0, e0.u0, sizeof(double) * (size_t)e0.nv);
  memcpy(e1.r0, e0.r0, sizeof(double) * (size_t)e0.nc);
  memcpy(e1.T0, e0.T0, sizeof(double) * (size_t)e0.nc);
  memcpy(e1.force, e0.force, sizeof(double) * (size_t)10 * e0.nfc);
  memcpy(e1.wu, e0.wu, sizeof(double) * (size_t)e0.nv);
  memcpy(e1.wr, e0.wr, sizeof(double) * (size_t)e0.nc);
  memcpy(e1.wT, e0.wT, sizeof(double) * (size_t)e0.nc);
  CHECK(rollout(&e0, a) == rollout(&e1, b));
  CHECK(memcmp(ds_fluid_velocity(a), ds_fluid_velocity(b), sizeof(double) * (size_t)e0.nv) == 0);
  /* with damping, the obstacle's inside is nearly still, the rest moves */
  ds_fluid_param_set(e1.m, "soft.0.damping", 400);
  rollout(&e1, b);
  const double* u = ds_fluid_velocity(b);
  double in = 0, out = 0;
  const int nfx = ds_fluid_nface(e1.m, 0);
  for (int f = 0; f < nfx; f++) { /* x faces at (i dx, (j + 1/2) dx), 17 per row */
    const double x = (f % 17) / 16.0, y = (f / 17 + 0.5) / 16;
    if (fabs(x - 0.5) < 0.06 && fabs(y - 0.55) < 0.03) in = fmax(in, fabs(u[f]));
    else out = fmax(out, fabs(u[f]));
  }
  fprintf(stderr, "soft obstacle, damping 400: max|u_x| inside %.3g, outside %.3g\n", in, out);
  CHECK(in < 0.1 * out);
  ds_fluid_data_free(a);
  ds_fluid_data_free(b);
  free_episode(&e0);
  free_episode(&e1);
  /* 3-D */
  dsFluidDef d3 = smoke_2d(8);
  d3.n[2] = 8;
  d3.up_axis = 2;
  d3.source[0].box = (dsFluidBox){{0.3, 0.3, 0.05}, {0.7, 0.7, 0.25}};
  d3.source[0].velocity[2] = 0.5;
  d3.nsoft = 1;
  d3.soft[0] = (dsFluidSoftObstacle){{0.45, 0.5, 0.6}, {0.2, 0.15, 0.1}, 0.08, 15};
  e = make_episode(&d3, 20, 0.3);
  check_fd("3-D SL, a soft obstacle", &e, 1);
  free_episode(&e);
  /* refusals name the field */
  char err[256];
  dsFluidModel* m = NULL;
  def.soft[0].width = 0;
  CHECK_INT_EQ(ds_fluid_model_create(&def, &m, err, sizeof err), DS_ERR_INVALID);
  CHECK_STR_CONTAINS(err, "soft[0].width");
  def.soft[0].width = 0.05;
  def.soft[0].half[1] = -1;
  CHECK_INT_EQ(ds_fluid_model_create(&def, &m, err, sizeof err), DS_ERR_INVALID);
  CHECK_STR_CONTAINS(err, "soft[0].half[1]");
}

static dsFluidDef smoke_3d(void) {
  dsFluidDef def = smoke_2d(8);
  def.n[2] = 8;
  def.up_axis = 2;
  def.gravity[2] = -0.2;
  def.source[0].box = (dsFluidBox){{0.3, 0.3, 0.05}, {0.7, 0.7, 0.25}};
  def.source[0].velocity[2] = 0.5;
  def.nobstacle = 1;
  def.obstacle[0] = (dsFluidBox){{0.2, 0.4, 0.5}, {0.6, 0.8, 0.7}};
  return def;
}

static void test_fd_3d(void) {
  dsFluidDef def = smoke_3d();
  def.advection = DS_FLUID_MACCORMACK;
  def.boundary[2] = DS_FLUID_OPEN;
  Episode e = make_episode(&def, 30, 0.3);
  check_fd("3-D MacCormack, open top, obstacle", &e, 1);
  free_episode(&e);
  def.advection = DS_FLUID_SEMI_LAGRANGIAN;
  def.boundary[0] = DS_FLUID_PERIODIC;
  e = make_episode(&def, 20, 0.3);
  check_fd("3-D SL periodic x", &e, 1);
  free_episode(&e);
}

/* max|div u| after a projection, relative to the velocity scale max|u| / dx */
static double rel_div(const dsFluidModel* m, const double* u) {
  int nc = ds_fluid_ncell(m), nv = ds_fluid_nvel(m);
  double* div = malloc(sizeof(double) * (size_t)nc), dmax = 0, umax = 0;
  ds_fluid_divergence(m, u, div);
  for (int c = 0; c < nc; c++) dmax = fmax(dmax, fabs(div[c]));
  for (int f = 0; f < nv; f++) umax = fmax(umax, fabs(u[f]));
  free(div);
  return dmax * ds_fluid_def(m)->dx / umax;
}

static void test_divergence(void) {
  dsFluidDef defs[3] = {smoke_2d(32), smoke_2d(24), smoke_3d()};
  defs[0].tolerance = defs[1].tolerance = defs[2].tolerance = 1e-10; /* the default */
  defs[0].solver = DS_FLUID_SOLVER_PCG; /* an obstacle-free closed box: PCG here, the FFT in test_fluid_fft */
  defs[1].boundary[1] = DS_FLUID_OPEN;
  defs[1].boundary[0] = DS_FLUID_PERIODIC;
  defs[1].nobstacle = 1;
  defs[1].obstacle[0] = (dsFluidBox){{0.3, 0.4, 0}, {0.5, 0.7, 0}};
  defs[2].boundary[2] = DS_FLUID_OPEN;
  for (int k = 0; k < 3; k++) {
    Episode e = make_episode(&defs[k], 3, 1.0);
    dsFluidData* d;
    ds_fluid_data_create(e.m, 3, 0, &d);
    CHECK(isfinite(rollout(&e, d)));
    double before;
    double* div = malloc(sizeof(double) * (size_t)e.nc);
    ds_fluid_divergence(e.m, e.u0, div);
    before = 0;
    for (int c = 0; c < e.nc; c++) before = fmax(before, fabs(div[c]));
    free(div);
    CHECK(before > 1); /* the random start is far from divergence-free */
    double rd = rel_div(e.m, ds_fluid_velocity(d));
    CHECK(rd <= 1e-8);
    int it;
    double res;
    ds_fluid_solver_stats(d, &it, &res);
    CHECK(it > 0 && res <= 1e-10);
    fprintf(stderr, "divergence case %d: max|div u| dx / max|u| = %.2e after %d PCG iterations\n", k, rd, it);
    ds_fluid_data_free(d);
    free_episode(&e);
  }
}

static int grads_equal(const Episode* e, const Grads* a, const Grads* b) {
  size_t nc = (size_t)e->nc, nv = (size_t)e->nv, nf = (size_t)e->nfc, np = (size_t)ds_fluid_nparam(e->m);
  return !memcmp(a->u0, b->u0, nv * 8) && !memcmp(a->r0, b->r0, nc * 8) && !memcmp(a->T0, b->T0, nc * 8) &&
         !memcmp(a->force, b->force, (size_t)e->steps * nf * 8) && !memcmp(a->ftot, b->ftot, nf * 8) &&
         !memcmp(a->param, b->param, np * 8);
}

static void test_checkpoints(void) {
  dsFluidDef def = smoke_2d(16);
  def.advection = DS_FLUID_MACCORMACK;
  def.nobstacle = 1;
  def.obstacle[0] = (dsFluidBox){{0.4, 0.5, 0}, {0.6, 0.65, 0}};
  Episode e = make_episode(&def, 50, 0.3);
  Grads full = grads_alloc(&e), ck = grads_alloc(&e), ck1 = grads_alloc(&e);
  CHECK_INT_EQ(backward(&e, 0, &full), 0);
  CHECK_INT_EQ(backward(&e, 7, &ck), 0);   /* 50 = 7 x 7 + 1: a last short segment */
  CHECK_INT_EQ(backward(&e, 50, &ck1), 0); /* one segment */
  CHECK(grads_equal(&e, &full, &ck));
  CHECK(grads_equal(&e, &full, &ck1));
  grads_free(&full), grads_free(&ck), grads_free(&ck1);
  free_episode(&e);
}

static void test_threads(void) {
#ifdef _OPENMP
  /* 65 x 65 cells and 66 x 65 faces: above the threshold of the parallel
   * loops; a loose tolerance keeps the solves short (this checks bits, not
   * accuracy) */
  dsFluidDef def = smoke_2d(65);
  def.advection = DS_FLUID_MACCORMACK;
  def.boundary[1] = DS_FLUID_OPEN;
  def.tolerance = 1e-6;
  Episode e = make_episode(&def, 1, 0.3);
  Grads g1 = grads_alloc(&e), g2 = grads_alloc(&e);
  double* s1 = malloc(sizeof(double) * (size_t)(e.nv + e.nc));
  double* s2 = malloc(sizeof(double) * (size_t)(e.nv + e.nc));
  int nt0 = omp_get_max_threads();
  for (int k = 0; k < 2; k++) {
    omp_set_num_threads(k + 1);
    dsFluidData* d;
    ds_fluid_data_create(e.m, e.steps, 0, &d);
    rollout(&e, d);
    memcpy(k ? s2 : s1, ds_fluid_velocity(d), sizeof(double) * (size_t)e.nv);
    memcpy((k ? s2 : s1) + e.nv, ds_fluid_density(d), sizeof(double) * (size_t)e.nc);
    ds_fluid_data_free(d);
    CHECK_INT_EQ(backward(&e, 0, k ? &g2 : &g1), 0);
  }
  omp_set_num_threads(nt0);
  CHECK(!memcmp(s1, s2, sizeof(double) * (size_t)(e.nv + e.nc)));
  CHECK(grads_equal(&e, &g1, &g2));
  free(s1), free(s2);
  grads_free(&g1), grads_free(&g2);
  free_episode(&e);
#else
  fprintf(stderr, "threads: built without OpenMP, not checked\n");
#endif
}

static void expect_def_error(dsFluidDef def, int code, const char* key) {
  dsFluidModel* m = NULL;
  char err[512] = "";
  CHECK_INT_EQ(ds_fluid_model_create(&def, &m, err, sizeof err), code);
  CHECK(m == NULL);
  CHECK_STR_CONTAINS(err, key);
}

static void test_bad_input(void) {
  dsFluidDef def = smoke_2d(16);
  def.n[0] = 0;
  expect_def_error(def, DS_ERR_INVALID, "n[0]");
  def = smoke_2d(16);
  def.n[0] = def.n[1] = 8192;
  expect_def_error(def, DS_ERR_RANGE, "cells");
  def = smoke_2d(16);
  def.nobstacle = 1;
  def.obstacle[0] = (dsFluidBox){{0.8, 0.2, 0}, {1.3, 0.4, 0}};
  expect_def_error(def, DS_ERR_INVALID, "obstacle[0]");
  def = smoke_2d(16);
  def.source[0].box.lo[1] = -0.5;
  expect_def_error(def, DS_ERR_INVALID, "source[0]");
  def = smoke_2d(16);
  def.dx = 0;
  expect_def_error(def, DS_ERR_INVALID, "dx");
  def.dx = 1.0 / 16;
  def.cfl_max = -1;
  expect_def_error(def, DS_ERR_INVALID, "cfl_max");

  /* NaN in an initial field; CFL; a solve that cannot converge */
  def = smoke_2d(16);
  def.cfl_max = 1;
  def.max_iterations = 2;
  def.solver = DS_FLUID_SOLVER_PCG; /* the FFT solve has no iterations to run out of */
  Episode e = make_episode(&def, 3, 0.3);
  dsFluidData* d;
  CHECK_INT_EQ(ds_fluid_data_create(e.m, 3, 0, &d), 0);
  e.r0[5] = NAN;
  CHECK_INT_EQ(ds_fluid_reset(e.m, d, e.u0, e.r0, e.T0), DS_ERR_INVALID);
  CHECK_STR_CONTAINS(ds_fluid_last_error(d), "density[5]");
  e.r0[5] = 0.5;
  CHECK_INT_EQ(ds_fluid_reset(e.m, d, e.u0, e.r0, e.T0), 0);
  CHECK_INT_EQ(ds_fluid_step(e.m, d, e.force), DS_ERR_DIVERGED);
  CHECK_STR_CONTAINS(ds_fluid_last_error(d), "step 0");
  CHECK_STR_CONTAINS(ds_fluid_last_error(d), "residual");
  CHECK_INT_EQ(ds_fluid_steps(d), 0);
  for (int f = 0; f < e.nv; f++) e.u0[f] *= 40; /* dt max|u| / dx = 0.02 x 12 x 16 > 1 */
  CHECK_INT_EQ(ds_fluid_reset(e.m, d, e.u0, e.r0, e.T0), 0);
  CHECK_INT_EQ(ds_fluid_step(e.m, d, e.force), DS_ERR_RANGE);
  CHECK_STR_CONTAINS(ds_fluid_last_error(d), "cfl_max");
  ds_fluid_data_free(d);

  /* a full tape; parameters by name */
  CHECK_INT_EQ(ds_fluid_param_set(e.m, "max_iterations", 100), DS_ERR_NOTFOUND);
  CHECK_INT_EQ(ds_fluid_param_set(e.m, "buoyancy.alpha", NAN), DS_ERR_RANGE);
  CHECK_INT_EQ(ds_fluid_param_set(e.m, "source.0.velocity.y", 0.25), 0);
  double v = 0;
  CHECK_INT_EQ(ds_fluid_param_get(e.m, "source.0.velocity.y", &v), 0);
  CHECK(v == 0.25);
  CHECK_INT_EQ(ds_fluid_param_index(e.m, "gravity.y"), 4);
  free_episode(&e);
  def = smoke_2d(8);
  e = make_episode(&def, 1, 0.1);
  ds_fluid_data_create(e.m, 1, 0, &d);
  CHECK(isfinite(rollout(&e, d)));
  CHECK_INT_EQ(ds_fluid_step(e.m, d, e.force), DS_ERR_STATE);
  ds_fluid_data_free(d);
  free_episode(&e);
}

/* the density image's adjoint against central differences; 3-D refused */
static void test_render(void) {
  dsFluidDef def = smoke_2d(12);
  def.n[0] = 10; /* not square: rows and columns kept apart */
  def.dx = 1.0 / 12;
  def.source[0].box.hi[0] = 0.6;
  def.nobstacle = 1; /* solid cells: a constant colour, no gradient */
  def.obstacle[0] = (dsFluidBox){{0.1, 0.5, 0}, {0.45, 0.8, 0}};
  Episode e = make_episode(&def, 1, 0.1);
  int np = 4 * e.nc;
  dsReal* img = malloc(sizeof(dsReal) * (size_t)np);
  dsReal* w = malloc(sizeof(dsReal) * (size_t)np);
  double* g = calloc((size_t)e.nc, sizeof(double));
  for (int i = 0; i < np; i++) w[i] = (dsReal)urand();
  CHECK_INT_EQ(ds_fluid_render_density(e.m, e.r0, 2.0, img), 0);
  CHECK_INT_EQ(ds_fluid_render_density_bwd(e.m, e.r0, 2.0, w, g), 0);
  /* cell (0, 0), bottom left, is the last row's first pixel */
  double t0 = 1 - exp(-2.0 * e.r0[0]);
  CHECK_CLOSE(img[4 * (11 * 10)], 0.05 + 0.9 * t0, 1e-6, 1e-6);
  CHECK(img[3] == 1);
  int nsolid = 0;
  for (int c = 0; c < e.nc; c++)
    if (ds_fluid_solid(e.m)[c]) {
      const dsReal* px = img + 4 * ((size_t)(11 - c / 10) * 10 + c % 10);
      CHECK(px[0] == (dsReal)0.45 && px[1] == (dsReal)0.38 && px[2] == (dsReal)0.30 && g[c] == 0);
      nsolid++;
    }
  CHECK(nsolid == 16);
  double tol = sizeof(dsReal) == sizeof(double) ? 1e-7 : 1e-2;
  for (int c = 0; c < e.nc; c += 7) {
    double x0 = e.r0[c], l[2];
    for (int k = 0; k < 2; k++) {
      e.r0[c] = x0 + (k ? -1e-6 : 1e-6);
      ds_fluid_render_density(e.m, e.r0, 2.0, img);
      l[k] = 0;
      for (int i = 0; i < np; i++) l[k] += (double)w[i] * img[i];
    }
    e.r0[c] = x0;
    CHECK_CLOSE(g[c], (l[0] - l[1]) / 2e-6, tol, tol);
  }
  free_episode(&e);
  def = smoke_3d();
  e = make_episode(&def, 1, 0.1);
  CHECK_INT_EQ(ds_fluid_render_density(e.m, e.r0, 2.0, img), DS_ERR_UNSUPPORTED);
  free_episode(&e);
  free(img), free(w), free(g);
}

/* CHECK_CLOSE's test without counting a check */
static int near_eq(double a, double b, double rtol, double atol) {
  return fabs(a - b) <= atol + rtol * fmax(fabs(a), fabs(b));
}

/* sum_i w_i img_i of the density image through map */
static double image_dot(const dsFluidModel* m, const double* rho, double scale, const dsFluidColormap* map,
                        const dsReal* w, dsReal* img, int np) {
  double l = 0;
  CHECK_INT_EQ(ds_fluid_render_density_map(m, rho, scale, map, img), 0);
  for (int i = 0; i < np; i++) l += (double)w[i] * img[i];
  return l;
}

/* densities whose t = 1 - exp(-scale rho) stays margin off every stop of
 * the map (a central difference across a stop would straddle the kink) */
static void off_stop_density(const dsFluidColormap* map, double scale, double margin, double* rho, int nc) {
  for (int c = 0; c < nc; c++) {
    int near;
    do {
      rho[c] = -0.03 + 1.6 * 0.5 * (urand() + 1);
      double t = 1 - exp(-scale * rho[c]);
      near = 0;
      for (int k = 0; k < map->n; k++) near |= fabs(t - map->t[k]) < margin;
    } while (near);
  }
}

/* One map's adjoint against central differences (h = 1e-6, off the stops;
 * single precision: h = 1e-3 over the image's float roundoff, tolerance 1e-2;
 * the map is piecewise linear in t, so the difference is exact up to
 * O(h^2) of the exponential and roundoff): the tolerance, 1e-7 in double,
 * is far below the 1% by which an adjoint scaled by 1.01 misses (checked
 * below on every cell with a gradient above 1e-3; flipping the sign of the
 * backward's slope, or taking the segment below, fails it too). */
static void colormap_fd(const dsFluidModel* m, const dsFluidColormap* map, const char* name) {
  const int nc = ds_fluid_ncell(m), np = 4 * nc;
  const double scale = 1.7;
  dsReal* img = malloc(sizeof(dsReal) * (size_t)np);
  dsReal* w = malloc(sizeof(dsReal) * (size_t)np);
  double* rho = malloc(sizeof(double) * (size_t)nc);
  double* g = calloc((size_t)nc, sizeof(double));
  for (int i = 0; i < np; i++) w[i] = (dsReal)urand();
  const int dbl = sizeof(dsReal) == sizeof(double);
  const double tol = dbl ? 1e-7 : 1e-2, h = dbl ? 1e-6 : 1e-3;
  off_stop_density(map, scale, dbl ? 1e-4 : 4e-3, rho, nc); /* scale h well inside */
  CHECK_INT_EQ(ds_fluid_render_density_map_bwd(m, rho, scale, map, w, g), 0);
  int caught = 0, big = 0;
  for (int c = 0; c < nc; c++) {
    if (ds_fluid_solid(m)[c]) {
      CHECK(g[c] == 0);
      continue;
    }
    double x0 = rho[c];
    rho[c] = x0 + h;
    double lp = image_dot(m, rho, scale, map, w, img, np);
    rho[c] = x0 - h;
    double lm = image_dot(m, rho, scale, map, w, img, np);
    rho[c] = x0;
    double fd = (lp - lm) / (2 * h);
    if (!near_eq(g[c], fd, tol, tol)) fprintf(stderr, "%s: cell %d: adjoint %.10g, fd %.10g\n", name, c, g[c], fd);
    CHECK_CLOSE(g[c], fd, tol, tol);
    if (fabs(fd) > 1e-3) big++, caught += !near_eq(1.01 * g[c], fd, tol, tol);
  }
  CHECK(big > nc / 4);
  if (dbl) CHECK_INT_EQ(caught, big);
  free(img), free(w), free(rho), free(g);
}

/* colour maps: the default's bits, the stock maps' stops, adjoints, refusals */
static void test_colormap(void) {
  dsFluidDef def = smoke_2d(12);
  def.n[0] = 10;
  def.dx = 1.0 / 12;
  def.nobstacle = 1;
  def.obstacle[0] = (dsFluidBox){{0.1, 0.5, 0}, {0.45, 0.8, 0}};
  dsFluidModel* m;
  char err[256];
  CHECK_INT_EQ(ds_fluid_model_create(&def, &m, err, sizeof err), 0);
  const int nc = ds_fluid_ncell(m), np = 4 * nc;
  dsReal* img = malloc(sizeof(dsReal) * (size_t)np);
  dsReal* w = malloc(sizeof(dsReal) * (size_t)np);
  double* rho = malloc(sizeof(double) * (size_t)nc);
  double* g = calloc((size_t)nc, sizeof(double));
  for (int c = 0; c < nc; c++) rho[c] = -0.02 + 1.5 * (c % 11) / 10.0; /* one negative: the first segment extended */
  for (int i = 0; i < np; i++) w[i] = (dsReal)urand();
  /* the default map is the original formula, bit for bit, forward and backward */
  const double bg[3] = DS_FLUID_RENDER_BG, sm[3] = DS_FLUID_RENDER_SMOKE;
  CHECK_INT_EQ(ds_fluid_render_density(m, rho, 2.0, img), 0);
  CHECK_INT_EQ(ds_fluid_render_density_bwd(m, rho, 2.0, w, g), 0);
  int same = 1;
  for (int c = 0; c < nc; c++) {
    if (ds_fluid_solid(m)[c]) continue;
    const dsReal* px = img + 4 * ((size_t)(11 - c / 10) * 10 + c % 10);
    const double t = 1 - exp(-2.0 * rho[c]), dt = 2.0 * exp(-2.0 * rho[c]);
    double s = 0;
    for (int ch = 0; ch < 3; ch++) {
      same &= px[ch] == (dsReal)(bg[ch] + (sm[ch] - bg[ch]) * t);
      s += (double)w[4 * ((size_t)(11 - c / 10) * 10 + c % 10) + ch] * (sm[ch] - bg[ch]);
    }
    same &= g[c] == s * dt;
  }
  CHECK(same);
  /* stock maps: t = 0 is the first stop, t = 1/2 viridis' and inferno's middle one */
  dsFluidColormap map;
  const double half[2][3] = {{0.127568, 0.566949, 0.550556}, {0.735683, 0.215906, 0.330245}};
  const double first[2][3] = {{0.267004, 0.004874, 0.329415}, {0.001462, 0.000466, 0.013866}};
  const double ctol = sizeof(dsReal) == sizeof(double) ? 1e-12 : 1e-6;
  for (int k = 0; k < 2; k++) {
    CHECK_INT_EQ(ds_fluid_colormap(k ? DS_FLUID_COLORMAP_INFERNO : DS_FLUID_COLORMAP_VIRIDIS, &map), 0);
    CHECK(map.n == 17 && map.t[8] == 0.5 && ds_fluid_colormap_check(&map, err, sizeof err) == 0);
    rho[0] = 0, rho[1] = log(2.0) / 2.0;
    CHECK_INT_EQ(ds_fluid_render_density_map(m, rho, 2.0, &map, img), 0);
    for (int ch = 0; ch < 3; ch++) {
      CHECK(img[4 * 110 + ch] == (dsReal)first[k][ch]); /* cell 0: the last row's first pixel */
      CHECK_CLOSE(img[4 * 111 + ch], half[k][ch], ctol, ctol);
    }
    colormap_fd(m, &map, k ? "inferno" : "viridis");
  }
  CHECK_INT_EQ(ds_fluid_colormap(DS_FLUID_COLORMAP_GREY, &map), 0);
  colormap_fd(m, &map, "grey");
  CHECK_INT_EQ(ds_fluid_colormap(DS_FLUID_COLORMAP_SMOKE, &map), 0);
  colormap_fd(m, &map, "smoke");
  /* a custom map: uneven stops */
  map = (dsFluidColormap){4, {0, 0.2, 0.7, 1}, {{0, 0, 0.3}, {0.9, 0.1, 0.2}, {0.4, 1, 0}, {1, 1, 1}}};
  CHECK_INT_EQ(ds_fluid_colormap_check(&map, err, sizeof err), 0);
  colormap_fd(m, &map, "custom");
  /* refusals, each naming what is wrong */
  const struct {
    int stop, ch;
    double v;
    const char* msg;
  } bad[] = {{-1, 0, 1, "1 stops (expected 2 to 32)"},
             {0, -1, 0.1, "expected the first at 0"},
             {3, -1, 0.95, "t = 0 ... 0.95 (expected the first at 0, the last at 1)"},
             {2, -1, 0.1, "stop 2 at t = 0.1 after 0.2"},
             {2, -1, 0.2, "stop 2 at t = 0.2 after 0.2 (expected t increasing)"},
             {1, 2, 1.2, "stop 1, channel 2 = 1.2 (expected a colour in [0, 1])"},
             {2, 0, NAN, "stop 2, channel 0 = nan"}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    dsFluidColormap b = map;
    if (bad[i].stop < 0) b.n = 1;
    else if (bad[i].ch < 0) b.t[bad[i].stop] = bad[i].v;
    else b.rgb[bad[i].stop][bad[i].ch] = bad[i].v;
    CHECK_INT_EQ(ds_fluid_colormap_check(&b, err, sizeof err), DS_ERR_INVALID);
    if (!strstr(err, bad[i].msg)) fprintf(stderr, "colour map refusal %zu: \"%s\"\n", i, err);
    CHECK(strstr(err, bad[i].msg) != NULL);
    CHECK_INT_EQ(ds_fluid_render_density_map(m, rho, 2.0, &b, img), DS_ERR_INVALID);
    CHECK_INT_EQ(ds_fluid_render_density_map_bwd(m, rho, 2.0, &b, w, g), DS_ERR_INVALID);
  }
  map.n = DS_FLUID_COLORMAP_MAX + 1;
  CHECK_INT_EQ(ds_fluid_colormap_check(&map, err, sizeof err), DS_ERR_INVALID);
  CHECK_INT_EQ(ds_fluid_colormap((dsFluidColormapName)7, &map), DS_ERR_INVALID);
  ds_fluid_model_free(m);
  free(img), free(w), free(rho), free(g);
}

static double clock_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#define DS_PI_T 3.14159265358979323846

/* ---- mesh obstacles (ds_fluid_voxelize_mesh) ---- */

/* the 12 triangles of the box [lo, hi], outward; flip: every one reversed */
static void box_mesh(const double lo[3], const double hi[3], int flip, double x[24], int tri[36]) {
  for (int v = 0; v < 8; v++)
    for (int a = 0; a < 3; a++) x[3 * v + a] = (v >> a) & 1 ? hi[a] : lo[a];
  static const int f[12][3] = {{0, 2, 1}, {1, 2, 3}, {4, 5, 6}, {5, 7, 6}, {0, 1, 4}, {1, 5, 4},
                               {2, 6, 3}, {3, 6, 7}, {0, 4, 2}, {2, 4, 6}, {1, 3, 5}, {3, 7, 5}};
  for (int t = 0; t < 12; t++)
    for (int k = 0; k < 3; k++) tri[3 * t + k] = f[t][flip ? 2 - k : k];
}

/* a UV sphere: nu x nv quads as triangles, poles shared */
static int sphere_mesh(const double c[3], double r, int nu, int nv, double* x, int* tri) {
  int n = 0, t = 0;
  x[n++] = c[0], x[n++] = c[1], x[n++] = c[2] + r;
  for (int i = 1; i < nv; i++)
    for (int j = 0; j < nu; j++) {
      const double th = DS_PI_T * i / nv, ph = 2 * DS_PI_T * j / nu;
      x[n++] = c[0] + r * sin(th) * cos(ph), x[n++] = c[1] + r * sin(th) * sin(ph), x[n++] = c[2] + r * cos(th);
    }
  x[n++] = c[0], x[n++] = c[1], x[n++] = c[2] - r;
  const int S = 1 + (nv - 1) * nu;
  for (int j = 0; j < nu; j++) {
    const int a = 1 + j, b = 1 + (j + 1) % nu;
    tri[t++] = 0, tri[t++] = a, tri[t++] = b;
    const int la = 1 + (nv - 2) * nu + j, lb = 1 + (nv - 2) * nu + (j + 1) % nu;
    tri[t++] = S, tri[t++] = lb, tri[t++] = la;
  }
  for (int i = 1; i < nv - 1; i++)
    for (int j = 0; j < nu; j++) {
      const int a = 1 + (i - 1) * nu + j, b = 1 + (i - 1) * nu + (j + 1) % nu, cc = a + nu, d = b + nu;
      tri[t++] = a, tri[t++] = cc, tri[t++] = d;
      tri[t++] = a, tri[t++] = d, tri[t++] = b;
    }
  return t / 3;
}

static void test_mesh_obstacle(void) {
  char err[256];
  /* a box mesh marks exactly the cells of the same box obstacle, in either orientation, 3-D and 2-D */
  for (int dim = 2; dim <= 3; dim++) {
    dsFluidDef def = dim == 3 ? smoke_3d() : smoke_2d(16);
    const double lo[3] = {0.2, 0.4, dim == 3 ? 0.5 : -0.5}, hi[3] = {0.6, 0.8, dim == 3 ? 0.7 : 0.5};
    def.obstacle[0] = (dsFluidBox){{lo[0], lo[1], lo[2]}, {hi[0], hi[1], hi[2]}};
    def.nobstacle = 1;
    dsFluidModel* mb = NULL;
    CHECK_INT_EQ(ds_fluid_model_create(&def, &mb, err, sizeof err), 0);
    const int nc = ds_fluid_ncell(mb);
    for (int flip = 0; flip < 2; flip++) {
      double x[24];
      int tri[36];
      box_mesh(lo, hi, flip, x, tri);
      unsigned char* sol = calloc((size_t)nc, 1);
      CHECK_INT_EQ(ds_fluid_voxelize_mesh(&def, x, 8, tri, 12, sol, err, sizeof err), 0);
      int same = 1, n = 0;
      for (int c = 0; c < nc; c++) same &= !sol[c] == !ds_fluid_solid(mb)[c], n += sol[c];
      CHECK(same && n > 0);
      /* as the model's solid_cells, without the box: the same model, the same step bits */
      dsFluidDef dm = def;
      dm.nobstacle = 0;
      dm.solid_cells = sol;
      dsFluidModel* mm = NULL;
      CHECK_INT_EQ(ds_fluid_model_create(&dm, &mm, err, sizeof err), 0);
      CHECK(memcmp(ds_fluid_solid(mm), ds_fluid_solid(mb), (size_t)nc) == 0);
      CHECK(ds_fluid_def(mm)->solid_cells == NULL);
      free(sol);
      dsFluidData *d1, *d2;
      ds_fluid_data_create(mb, 3, 0, &d1);
      ds_fluid_data_create(mm, 3, 0, &d2);
      double* f = calloc((size_t)nc * dim, sizeof(double));
      for (int t = 0; t < 3; t++) {
        CHECK_INT_EQ(ds_fluid_step(mb, d1, f), 0);
        CHECK_INT_EQ(ds_fluid_step(mm, d2, f), 0);
      }
      CHECK(memcmp(ds_fluid_velocity(d1), ds_fluid_velocity(d2), sizeof(double) * (size_t)ds_fluid_nvel(mb)) == 0);
      CHECK(memcmp(ds_fluid_density(d1), ds_fluid_density(d2), sizeof(double) * (size_t)nc) == 0);
      free(f);
      ds_fluid_data_free(d1);
      ds_fluid_data_free(d2);
      ds_fluid_model_free(mm);
    }
    ds_fluid_model_free(mb);
  }
  /* a sphere of 32 x 16 facets on 32^3: every cell a cell's diagonal inside (outside) the sphere is
     solid (fluid); two overlapping spheres are one solid (nonzero winding) */
  dsFluidDef def = ds_fluid_default_def();
  def.n[0] = def.n[1] = def.n[2] = 32;
  def.dx = 1.0 / 32;
  const int nu = 32, nvr = 16, NV = 2 + (nvr - 1) * nu, NT = 2 * nu * (nvr - 1);
  double* x = malloc(sizeof(double) * 6 * NV);
  int* tri = malloc(sizeof(int) * 6 * NT);
  const double c1[3] = {0.5, 0.45, 0.5}, c2[3] = {0.62, 0.45, 0.5}, r = 0.3;
  CHECK_INT_EQ(sphere_mesh(c1, r, nu, nvr, x, tri), NT);
  sphere_mesh(c2, r, nu, nvr, x + 3 * NV, tri + 3 * NT);
  for (int k = 0; k < 3 * NT; k++) tri[3 * NT + k] += NV;
  unsigned char* sol = calloc(32 * 32 * 32, 1);
  for (int both = 0; both < 2; both++) {
    memset(sol, 0, 32 * 32 * 32);
    CHECK_INT_EQ(ds_fluid_voxelize_mesh(&def, x, both ? 2 * NV : NV, tri, both ? 2 * NT : NT, sol, err, sizeof err), 0);
    int bad = 0, n = 0;
    const double band = sqrt(3.0) * def.dx, chord = r * (1 - cos(DS_PI_T / nvr)); /* facets lie inside by <= chord */
    for (int c = 0; c < 32 * 32 * 32; c++) {
      const double p[3] = {(c % 32 + 0.5) / 32, (c / 32 % 32 + 0.5) / 32, (c / 1024 + 0.5) / 32};
      double d1 = 0, d2 = 0;
      for (int a = 0; a < 3; a++) d1 += (p[a] - c1[a]) * (p[a] - c1[a]), d2 += (p[a] - c2[a]) * (p[a] - c2[a]);
      const double dist = both ? fmin(sqrt(d1), sqrt(d2)) : sqrt(d1);
      if (dist < r - chord - band) bad += !sol[c];
      if (dist > r + band) bad += sol[c];
      n += sol[c];
    }
    CHECK_INT_EQ(bad, 0);
    const double vol = n * pow(def.dx, 3), want = 4.0 / 3 * DS_PI_T * r * r * r;
    if (!both) CHECK_CLOSE(vol, want, 0.05, 0);
    fprintf(stderr, "sphere mesh%s: %d solid cells (%.4f m^3; one sphere %.4f)\n", both ? "es" : "", n, vol, want);
  }
  free(sol);
  /* a 2-D episode around a sphere cut at z = 0: the adjoint against central differences */
  dsFluidDef d2 = smoke_2d(16);
  const double c3[3] = {0.5, 0.55, 0};
  sphere_mesh(c3, 0.15, nu, nvr, x, tri);
  unsigned char* s2 = calloc(16 * 16, 1);
  CHECK_INT_EQ(ds_fluid_voxelize_mesh(&d2, x, NV, tri, NT, s2, err, sizeof err), 0);
  int n2 = 0;
  for (int c = 0; c < 256; c++) n2 += s2[c];
  CHECK(n2 >= 12 && n2 <= 36); /* pi 0.15^2 / (1/16)^2 = 18 */
  d2.solid_cells = s2;
  Episode e = make_episode(&d2, 30, 0.3);
  check_fd("2-D SL closed, sphere mesh obstacle", &e, 2);
  free_episode(&e);
  free(s2);
  /* bad input names the element */
  tri[4] = NV + 3;
  CHECK_INT_EQ(ds_fluid_voxelize_mesh(&def, x, NV, tri, NT, sol = calloc(32768, 1), err, sizeof err), DS_ERR_INVALID);
  CHECK_STR_CONTAINS(err, "triangle 1: vertex index");
  tri[4] = 2;
  x[7] = NAN;
  CHECK_INT_EQ(ds_fluid_voxelize_mesh(&def, x, NV, tri, NT, sol, err, sizeof err), DS_ERR_INVALID);
  CHECK_STR_CONTAINS(err, "vertex 2: coordinate y");
  free(sol);
  free(x);
  free(tri);
}

/* Windows and set states (ds_fluid_backward_window, ds_fluid_set_state):
 * three windows chained by the state adjoint equal the whole backward
 * (the force rows and the initial state's adjoint bit for bit, the
 * parameters' sums to rounding); a state set off a checkpoint refuses a
 * backward through its segment, one set on a checkpoint or left unchanged
 * does not; bad steps and values are refused. */
static void test_windows(void) {
  dsFluidDef def = smoke_2d(16);
  Episode e = make_episode(&def, 12, 0.3);
  Grads whole = grads_alloc(&e), win = grads_alloc(&e);
  CHECK_INT_EQ(backward(&e, 4, &whole), 0);
  dsFluidData* d;
  CHECK_INT_EQ(ds_fluid_data_create(e.m, e.steps, 4, &d), 0);
  CHECK(isfinite(rollout(&e, d)));
  const int nv = e.nv, nc = e.nc, np = ds_fluid_nparam(e.m);
  double* seed = calloc((size_t)(nv + 2 * nc), sizeof(double));
  double* psum = calloc((size_t)np + 1, sizeof(double));
  memcpy(seed, e.wu, sizeof(double) * (size_t)nv);
  memcpy(seed + nv, e.wr, sizeof(double) * (size_t)nc);
  memcpy(seed + nv + nc, e.wT, sizeof(double) * (size_t)nc);
  for (int t1 = 12; t1 > 0; t1 -= 4) {
    dsFluidGrad g = {win.u0, win.r0, win.T0, win.force, NULL, win.param};
    CHECK_INT_EQ(ds_fluid_backward_window(e.m, d, t1 - 4, t1, seed, seed + nv, seed + nv + nc, 0, NULL, NULL, &g), 0);
    memcpy(seed, win.u0, sizeof(double) * (size_t)nv);
    memcpy(seed + nv, win.r0, sizeof(double) * (size_t)nc);
    memcpy(seed + nv + nc, win.T0, sizeof(double) * (size_t)nc);
    for (int i = 0; i < np; i++) psum[i] += win.param[i];
  }
  CHECK(!memcmp(win.u0, whole.u0, sizeof(double) * (size_t)nv) && !memcmp(win.r0, whole.r0, sizeof(double) * (size_t)nc));
  CHECK(!memcmp(win.force, whole.force, sizeof(double) * (size_t)(e.steps * e.nfc)));
  for (int i = 0; i < np; i++) CHECK_CLOSE(psum[i], whole.param[i], 1e-12, 1e-14);
  /* set states: the current one unchanged at step 12 (no mark), a changed one at 6 (off a checkpoint) */
  dsFluidGrad g = {win.u0, win.r0, win.T0, NULL, NULL, NULL};
  memcpy(seed, ds_fluid_velocity(d), sizeof(double) * (size_t)(nv + 2 * nc));
  CHECK_INT_EQ(ds_fluid_set_state(e.m, d, 12, seed, seed + nv, seed + nv + nc), 0);
  CHECK_INT_EQ(ds_fluid_backward_window(e.m, d, 0, 12, NULL, e.wr, NULL, 0, NULL, NULL, &g), 0);
  CHECK_INT_EQ(ds_fluid_set_state(e.m, d, 13, NULL, NULL, NULL), DS_ERR_RANGE);
  seed[nv + 3] = NAN;
  CHECK_INT_EQ(ds_fluid_set_state(e.m, d, 6, seed, seed + nv, seed + nv + nc), DS_ERR_INVALID);
  printf("set_state NaN: %s\n", ds_fluid_last_error(d));
  CHECK(strstr(ds_fluid_last_error(d), "density[3]") != NULL);
  CHECK_INT_EQ(ds_fluid_steps(d), 12); /* refused: nothing changed */
  seed[nv + 3] = 0.5;
  CHECK_INT_EQ(ds_fluid_set_state(e.m, d, 6, seed, seed + nv, seed + nv + nc), 0);
  for (int t = 6; t < 12; t++) CHECK_INT_EQ(ds_fluid_step(e.m, d, e.force + (size_t)t * e.nfc), 0);
  CHECK_INT_EQ(ds_fluid_backward_window(e.m, d, 4, 12, NULL, e.wr, NULL, 0, NULL, NULL, &g), DS_ERR_RANGE);
  printf("off a checkpoint: %s\n", ds_fluid_last_error(d));
  CHECK_INT_EQ(ds_fluid_backward(e.m, d, NULL, e.wr, NULL, &g), DS_ERR_RANGE);
  CHECK_INT_EQ(ds_fluid_backward_window(e.m, d, 8, 12, NULL, e.wr, NULL, 0, NULL, NULL, &g), 0);
  CHECK_INT_EQ(ds_fluid_backward_window(e.m, d, 8, 13, NULL, e.wr, NULL, 0, NULL, NULL, &g), DS_ERR_RANGE);
  /* set again on the checkpoint at 4: the mark at 6 is gone with the tape after 4 */
  CHECK_INT_EQ(ds_fluid_set_state(e.m, d, 4, seed, seed + nv, seed + nv + nc), 0);
  for (int t = 4; t < 12; t++) CHECK_INT_EQ(ds_fluid_step(e.m, d, e.force + (size_t)t * e.nfc), 0);
  CHECK_INT_EQ(ds_fluid_backward_window(e.m, d, 0, 12, NULL, e.wr, NULL, 0, NULL, NULL, &g), 0);
  free(seed), free(psum);
  ds_fluid_data_free(d);
  grads_free(&whole), grads_free(&win);
  free_episode(&e);
}

int main(void) {
  void (*tests[])(void) = {test_bad_input, test_render,        test_colormap, test_divergence,
                           test_checkpoints, test_fd_2d,       test_fd_3d,    test_threads,
                           test_mesh_obstacle, test_fd_soft,   test_windows};
  const char* names[] = {"bad input",     "render", "colour map", "divergence", "checkpoints",      "fd 2-D",
                         "fd 3-D",        "threads", "mesh obstacle", "fd soft obstacles", "windows"};
  for (int i = 0; i < (int)(sizeof tests / sizeof tests[0]); i++) {
    double t0 = clock_s();
    tests[i]();
    fprintf(stderr, "%s: %.2f s\n", names[i], clock_s() - t0);
  }
  return DST_RESULT();
}

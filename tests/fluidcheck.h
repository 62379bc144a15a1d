/* What the fluid tests share (tests/test_fluid*.c): a xorshift generator
 * of values in [-1, 1) (a test defines FLUIDCHECK_SEED before including
 * this, so each keeps its own stream) and the fluid every batch test
 * starts from: a heated, buoyant source with inflow, gravity, a box
 * obstacle and a soft one, PCG to 1e-10, a per-cell force field. */
#ifndef DSIM_TESTS_FLUIDCHECK_H
#define DSIM_TESTS_FLUIDCHECK_H

#include <stdint.h>
#include <stdlib.h>

#include "dsim/fluid.h"

#ifndef FLUIDCHECK_SEED
#  define FLUIDCHECK_SEED 0x9e3779b97f4a7c15ull
#endif

static uint64_t rng_state = FLUIDCHECK_SEED;

static inline double urand(void) { /* [-1, 1) */
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (double)(rng_state >> 11) / 9007199254740992.0 * 2 - 1;
}

/* n values scale * urand() (malloc; one spare) */
static inline double* rnd(size_t n, double scale) {
  double* a = (double*)malloc(sizeof(double) * (n + 1));
  for (size_t i = 0; i < n; i++) a[i] = scale * urand();
  return a;
}

/* n x n (x n3) cells of 1/n m, dt 0.02 s */
static inline dsFluidDef base_def(int n, int n3) {
  dsFluidDef def = ds_fluid_default_def();
  def.n[0] = def.n[1] = n;
  def.n[2] = n3;
  def.dx = 1.0 / n;
  def.dt = 0.02;
  def.alpha = 0.7;
  def.beta = -0.4;
  def.ambient_temperature = 0.3;
  def.gravity[1] = -0.1;
  def.force_field = 1;
  def.tolerance = 1e-10;
  def.solver = DS_FLUID_SOLVER_PCG;
  def.nsource = 1;
  def.source[0] = (dsFluidSource){{{0.35, 0.05, 0.3}, {0.65, 0.2, 0.7}}, 0.8, 0.5, 1, {0.1, 0.6, 0.05}};
  def.nobstacle = 1;
  def.obstacle[0] = (dsFluidBox){{0.4, 0.5, 0.35}, {0.6, 0.65, 0.6}};
  def.nsoft = 1;
  def.soft[0] = (dsFluidSoftObstacle){{0.3, 0.75, 0.5}, {0.1, 0.08, 0.12}, 0.05, 20};
  return def;
}

#endif

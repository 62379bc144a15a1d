/* Shared scenes and rollout drivers for the engine tests: a small cloth
 * (membrane, springs, bending, lift/drag, gravity, a fixed corner) and a
 * small soft box dropped onto the ground (tets, contact with sliding and
 * sticking friction), with per-substep activations and external forces, and
 * a loss that is a weighted sum of the final and one intermediate state. */
#ifndef DSIM_TESTS_ENGINETEST_H
#define DSIM_TESTS_ENGINETEST_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsim/engine.h"

static uint64_t et_rng = 88172645463325252ULL;
static inline double et_unif(double a, double b) {
  et_rng ^= et_rng << 13;
  et_rng ^= et_rng >> 7;
  et_rng ^= et_rng << 17;
  return a + (b - a) * ((double)(et_rng >> 11) / 9007199254740992.0);
}

typedef struct etScene {
  dsModel* m;
  dsData* d;
  dsGrad* g;
  int T, tmid;
  dsReal* act;   /* T x nact */
  dsReal* fext;  /* T x nparticle x 3 */
  dsReal *cx, *cv, *cmid; /* loss weights: final x, final v, x at tmid */
  dsReal* gact;  /* T x nact: dL/d act per substep */
  dsReal* gfext; /* T x nparticle x 3 */
} etScene;

static inline void et_fail(const char* what, int rc, const char* msg) {
  fprintf(stderr, "%s failed: %s (%s)\n", what, ds_err_name(rc), msg ? msg : "");
  exit(1);
}

/* Cloth nx x ny cells, springs on the cell diagonals not used by the
 * triangles, one fixed corner. */
static inline dsModel* et_cloth_model(int nx, int ny, dsReal dt) {
  dsBuilder* b;
  dsModel* m;
  if (ds_builder_create(&b)) et_fail("builder", DS_ERR_NOMEM, "");
  dsTriMaterial tm = {60, 300, 0.5};
  dsBendMaterial bm = {0.05, 0.002};
  dsReal origin[3] = {-0.2, 1.0, 0.05}, v0[3] = {0.4, 0.3, -0.2};
  int rc = ds_builder_add_cloth_grid(b, nx, ny, 0.1, origin, 0.02, v0, &tm, &bm);
  if (rc < 0) et_fail("cloth grid", rc, ds_builder_last_error(b));
  /* springs across the other diagonal of every other cell */
  for (int j = 0; j < ny; j += 2)
    for (int i = 0; i < nx; i++) {
      int a = j * (nx + 1) + i + 1, c = (j + 1) * (nx + 1) + i;
      rc = ds_builder_add_spring(b, a, c, 20, 0.05, -1);
      if (rc < 0) et_fail("spring", rc, ds_builder_last_error(b));
    }
  ds_builder_set_aero(b, 0.8, 0.4);
  ds_builder_set_dt(b, dt);
  rc = ds_builder_finalize(b, &m);
  if (rc) et_fail("finalize", rc, ds_builder_last_error(b));
  ds_builder_free(b);
  /* fixed corner and non-uniform masses */
  dsReal mass[1024];
  for (int i = 0; i < m->nparticle; i++) mass[i] = 0.02 * (1 + 0.3 * et_unif(-1, 1));
  mass[0] = 0;
  ds_model_set_param(m, "particle.mass", mass, m->nparticle);
  /* perturb the initial shape so the rest state is not an equilibrium */
  dsReal x0[3 * 1024];
  memcpy(x0, m->x0, 3 * (size_t)m->nparticle * sizeof(dsReal));
  for (int k = 3; k < 3 * m->nparticle; k++) x0[k] += 0.01 * et_unif(-1, 1);
  ds_model_set_param(m, "initial_position", x0, 3 * m->nparticle);
  return m;
}

/* Soft box of n^3 cells (edge 0.1 m per cell), density 1000, dropped onto
 * the ground just above the skin with a sideways velocity. */
static inline dsModel* et_soft_model(int n, dsReal dt) {
  dsBuilder* b;
  dsModel* m;
  if (ds_builder_create(&b)) et_fail("builder", DS_ERR_NOMEM, "");
  dsTetMaterial tm = {2e4, 5e4, 20};
  dsReal origin[3] = {0.0, 0.012, 0.0}, v0[3] = {0.6, -0.3, 0.2};
  int rc = ds_builder_add_tet_grid(b, n, n, n, 0.1, 0.1, 0.1, origin, 1000, v0, &tm);
  if (rc < 0) et_fail("tet grid", rc, ds_builder_last_error(b));
  dsGroundDef gd = {3e4, 30, 40, 0.5, 0.01};
  ds_builder_set_ground(b, &gd);
  ds_builder_set_dt(b, dt);
  rc = ds_builder_finalize(b, &m);
  if (rc) et_fail("finalize", rc, ds_builder_last_error(b));
  ds_builder_free(b);
  return m;
}

/* Spring truss: a 3 x 2 x 2 lattice (cell 0.1 m, 0.05 kg per particle)
 * with a spring between every two particles at most a cell diagonal apart,
 * just above the ground skin and falling onto it with a sideways velocity:
 * the first substeps are out of contact, the rest in contact. Springs only,
 * so its activations are the spring block alone. */
static inline dsModel* et_truss_model(dsReal dt) {
  dsBuilder* b;
  dsModel* m;
  if (ds_builder_create(&b)) et_fail("builder", DS_ERR_NOMEM, "");
  const int nx = 3, ny = 2, nz = 2;
  const dsReal h = 0.1;
  int rc = 0;
  for (int k = 0; k < nz; k++)
    for (int j = 0; j < ny; j++)
      for (int i = 0; i < nx; i++) {
        dsReal x[3] = {h * i, 0.03 + h * j, h * k}, v[3] = {0.5, -0.4, 0.1 * (i - 1)};
        if ((rc = ds_builder_add_particle(b, x, v, 0.05)) < 0) et_fail("particle", rc, ds_builder_last_error(b));
      }
  const int n = nx * ny * nz;
  for (int p = 0; p < n; p++)
    for (int q = p + 1; q < n; q++) {
      int di = p % nx - q % nx, dj = (p / nx) % ny - (q / nx) % ny, dk = p / (nx * ny) - q / (nx * ny);
      if (di * di + dj * dj + dk * dk <= 3 && (rc = ds_builder_add_spring(b, p, q, 2e3, 2, -1)) < 0)
        et_fail("spring", rc, ds_builder_last_error(b));
    }
  dsGroundDef gd = {1e4, 20, 30, 0.5, 0.01};
  ds_builder_set_ground(b, &gd);
  ds_builder_set_dt(b, dt);
  rc = ds_builder_finalize(b, &m);
  if (rc) et_fail("finalize", rc, ds_builder_last_error(b));
  ds_builder_free(b);
  return m;
}

/* Random schedules (activations change every 25 substeps, external forces
 * every 40) and loss weights. */
static inline void et_scene_init(etScene* s, dsModel* m, int T, int ckpt, dsReal act_amp, dsReal fext_amp) {
  memset(s, 0, sizeof *s);
  s->m = m;
  s->T = T;
  s->tmid = T / 2 + 3;
  dsDataDef dd = ds_default_data_def();
  dd.max_substeps = T;
  dd.checkpoint_every = ckpt;
  int rc = ds_data_create(m, &dd, &s->d);
  if (rc) et_fail("data", rc, "");
  if ((rc = ds_grad_create(m, &s->g))) et_fail("grad", rc, "");
  size_t n3 = 3 * (size_t)m->nparticle, na = (size_t)m->nact;
  s->act = (dsReal*)calloc((size_t)T * na + 1, sizeof(dsReal));
  s->gact = (dsReal*)calloc((size_t)T * na + 1, sizeof(dsReal));
  s->fext = (dsReal*)calloc((size_t)T * n3, sizeof(dsReal));
  s->gfext = (dsReal*)calloc((size_t)T * n3, sizeof(dsReal));
  s->cx = (dsReal*)calloc(n3, sizeof(dsReal));
  s->cv = (dsReal*)calloc(n3, sizeof(dsReal));
  s->cmid = (dsReal*)calloc(n3, sizeof(dsReal));
  for (int t = 0; t < T; t++) {
    if (t % 25 == 0)
      for (size_t k = 0; k < na; k++) s->act[t * na + k] = act_amp * et_unif(-1, 1);
    else
      memcpy(s->act + t * na, s->act + (t - 1) * na, na * sizeof(dsReal));
    if (t % 40 == 0)
      for (size_t k = 0; k < n3; k++) s->fext[t * n3 + k] = fext_amp * et_unif(-1, 1);
    else
      memcpy(s->fext + t * n3, s->fext + (t - 1) * n3, n3 * sizeof(dsReal));
  }
  for (size_t k = 0; k < n3; k++) {
    s->cx[k] = et_unif(-1, 1);
    s->cv[k] = 0.1 * et_unif(-1, 1);
    s->cmid[k] = 0.5 * et_unif(-1, 1);
  }
}

static inline void et_scene_free(etScene* s) {
  ds_data_free(s->d);
  ds_grad_free(s->g);
  free(s->act);
  free(s->gact);
  free(s->fext);
  free(s->gfext);
  free(s->cx);
  free(s->cv);
  free(s->cmid);
}

/* Forward rollout; returns the loss. */
static inline double et_rollout(etScene* s) {
  const dsModel* m = s->m;
  dsData* d = s->d;
  size_t n3 = 3 * (size_t)m->nparticle, na = (size_t)m->nact;
  double L = 0;
  ds_data_reset(m, d);
  for (int t = 0; t < s->T; t++) {
    if (na) memcpy(d->act, s->act + t * na, na * sizeof(dsReal));
    memcpy(d->f_ext, s->fext + t * n3, n3 * sizeof(dsReal));
    int rc = ds_step(m, d);
    if (rc) et_fail("step", rc, ds_data_last_error(d));
    if (t + 1 == s->tmid)
      for (size_t k = 0; k < n3; k++) L += (double)s->cmid[k] * d->x[k];
  }
  for (size_t k = 0; k < n3; k++) L += (double)s->cx[k] * d->x[k] + (double)s->cv[k] * d->v[k];
  return L;
}

/* Backward of et_rollout's loss (after et_rollout): zeroes and fills s->g,
 * s->gact, s->gfext, injecting the intermediate term at tmid. */
static inline void et_backward(etScene* s) {
  const dsModel* m = s->m;
  dsData* d = s->d;
  size_t n3 = 3 * (size_t)m->nparticle, na = (size_t)m->nact;
  ds_grad_zero(s->g);
  int rc = ds_backward_begin(m, d);
  if (rc) et_fail("backward_begin", rc, ds_data_last_error(d));
  for (size_t k = 0; k < n3; k++) {
    d->adj_x[k] += s->cx[k];
    d->adj_v[k] += s->cv[k];
  }
  while (d->bt > 0) {
    size_t t = (size_t)d->bt - 1;
    rc = ds_backward_step(m, d, s->g, na ? s->gact + t * na : NULL, s->gfext + t * n3);
    if (rc) et_fail("backward_step", rc, ds_data_last_error(d));
    if (d->bt == s->tmid)
      for (size_t k = 0; k < n3; k++) d->adj_x[k] += s->cmid[k];
  }
  if ((rc = ds_backward_finish(m, d, s->g))) et_fail("backward_finish", rc, ds_data_last_error(d));
}

/* FNV-1a over bytes. */
static inline uint64_t et_hash(uint64_t h, const void* p, size_t n) {
  const unsigned char* c = (const unsigned char*)p;
  if (!h) h = 1469598103934665603ULL;
  for (size_t i = 0; i < n; i++) {
    h ^= c[i];
    h *= 1099511628211ULL;
  }
  return h;
}

#endif

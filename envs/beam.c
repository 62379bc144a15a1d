/* beam: a tetrahedral box (ds_mesh_tet_grid, 6 tets per cell) along x with
 * its x-minimum face clamped (those particles fixed: mass 0), sagging and
 * swinging under gravity from rest: gradSim's beam of the system-
 * identification experiments, whose Lame parameters show in the sag
 * (dsim sysid, configs/sysid-beam.json). With clamp off it is a free soft
 * box (thrown by `velocity`, landing on the ground). Action: one activation
 * per tet, as control-fem (a > 0 contracts). Metric: |com - target|^2 / 3.
 *
 * Placement: the box's minimum corner at `start` (-0.5, -0.1, -0.1): the
 * beam lies along x through the camera's look-at point; no ground. Mass: density lumped V/4
 * per tet vertex (the clamped vertices' mass is dropped). */
#include <stddef.h>
#include <stdio.h>

#include "dsim/engine.h"
#include "dsim/env.h"
#include "dsim/mesh.h"

#define P(f) offsetof(dsBeamParams, f)

static const dsConfigKey keys[] = {
    {"material.density", DS_KEY_REAL, P(density), DS_KEY_MIN_POSITIVE, DS_KEY_MAX, NULL, 0, "kg/m^3, lumped V/4 per vertex"},
    {"material.k_mu", DS_KEY_REAL, P(k_mu), 0, DS_KEY_MAX, NULL, 0, "shear stiffness density, Pa"},
    {"material.k_lambda", DS_KEY_REAL, P(k_lambda), DS_KEY_MIN_POSITIVE, DS_KEY_MAX, NULL, 0, "volume stiffness density, Pa"},
    {"material.k_damp", DS_KEY_REAL, P(k_damp), 0, DS_KEY_MAX, NULL, 0, "damping density"},
    {"beam.cells", DS_KEY_VEC3, P(cells), 1, 64, NULL, 0, "cells along x, y, z (integers)"},
    {"beam.size", DS_KEY_VEC3, P(size), 1e-6, 1e6, NULL, 0, "extent along x, y, z, m"},
    {"beam.clamp", DS_KEY_BOOL, P(clamp), 0, 1, NULL, 0, "fix the particles of the x-minimum face"},
    {NULL, DS_KEY_REAL, 0, 0, 0, NULL, 0, NULL}};

static void defaults(dsEnvDef* d) {
  dsBeamParams* p = (dsBeamParams*)d->params.bytes;
  d->dt = (dsReal)(1.0 / 1920.0);
  d->substeps = 1920; /* 1 s, 30 frames/s */
  d->control_interval = 64;
  d->render_interval = 64;
  d->render_last = 1;
  d->start[0] = -0.5;
  d->start[1] = -0.1;
  d->start[2] = -0.1;
  d->velocity[0] = 0;
  d->goal_x_min = 0;
  d->goal_x_max = 0;
  d->goal_y = 0;
  d->ground = 0;
  d->color[0] = 0.2;
  d->color[1] = 0.6;
  d->color[2] = 1;
  d->cam_distance = 2.5;
  /* 10 degrees above: seen exactly level, the beam's top and bottom faces
     are edge-on, where two-sided shading has its kink (the headlight's
     |n.view|; with a fixed light, a jump) */
  d->cam_elevation = 10;
  d->width = 64;
  d->height = 64;
  d->supersample = 1;
  d->loss_moments = 0;
  p->density = 2;
  p->k_mu = 1e3;
  p->k_lambda = 1e3;
  p->k_damp = 1;
  p->cells[0] = 8;
  p->cells[1] = 2;
  p->cells[2] = 2;
  p->size[0] = 1;
  p->size[1] = 0.2;
  p->size[2] = 0.2;
  p->clamp = 1;
}

static int validate(const dsEnvDef* d, char* err, size_t errlen) {
  const dsBeamParams* p = (const dsBeamParams*)d->params.bytes;
  for (int i = 0; i < 3; i++)
    if (p->cells[i] != (dsReal)(int)p->cells[i]) {
      snprintf(err, errlen, "beam.cells: expected integers, got %g", (double)p->cells[i]);
      return DS_ERR_RANGE;
    }
  return 0;
}

static int build(dsEnv* e, dsBuilder* b) {
  const dsBeamParams* p = (const dsBeamParams*)ds_env_params(e);
  const int nx = (int)p->cells[0], ny = (int)p->cells[1], nz = (int)p->cells[2];
  dsMesh mesh;
  int rc = ds_mesh_tet_grid(nx, ny, nz, p->size[0] / nx, p->size[1] / ny, p->size[2] / nz, &mesh);
  if (rc) return rc;
  ds_mesh_translate(&mesh, ds_env_def(e)->start);
  dsReal* mass = (dsReal*)ds_calloc((size_t)mesh.nvert, sizeof(dsReal));
  if (!mass) {
    ds_mesh_free(&mesh);
    return DS_ERR_NOMEM;
  }
  rc = ds_mesh_lumped_mass(&mesh, p->density, mass);
  const dsTetMaterial mat = {p->k_mu, p->k_lambda, p->k_damp};
  int first = -1;
  for (int i = 0; !rc && i < mesh.nvert; i++) {
    const int fixed = p->clamp && (i % (nx + 1)) == 0; /* vertex (0, j, k) */
    const int r = ds_builder_add_particle(b, mesh.x + 3 * i, fixed ? NULL : ds_env_def(e)->velocity, fixed ? 0 : mass[i]);
    if (r < 0) rc = r;
    if (i == 0) first = r;
  }
  for (int t = 0; !rc && t < mesh.ntet; t++) {
    const int* q = mesh.tet + 4 * t;
    const int r = ds_builder_add_tet(b, first + q[0], first + q[1], first + q[2], first + q[3], &mat);
    if (r < 0) rc = r;
  }
  for (int f = 0; !rc && f < mesh.ntri; f++) {
    const int* q = mesh.tri + 3 * f;
    const int r = ds_builder_add_face(b, first + q[0], first + q[1], first + q[2]);
    if (r < 0) rc = r;
  }
  ds_free(mass);
  ds_mesh_free(&mesh);
  return rc < 0 ? rc : 0;
}

static int action_size(const dsEnv* e) { return ds_env_model(e)->ntet; }

static int act_first(const dsEnv* e) { return ds_env_model(e)->ntri; }

const dsEnvClass ds__beam_class = {
    .name = "beam",
    .doc = "a tetrahedral beam clamped at one end, sagging under gravity (system identification of its Lame parameters)",
    .params_size = sizeof(dsBeamParams),
    .keys = keys,
    .defaults = defaults,
    .validate = validate,
    .build = build,
    .action_size = action_size,
    .action_kind = DS_ACTION_PER_STEP,
    .act_first = act_first,
    .metric_kind = DS_METRIC_TARGET,
    /* tet muscles contract by a fraction a of their rest shape: a gear whose
       every tet contracts by 0.5 inverts a tet as it lands (so do random
       +-0.5 patterns), the beam at a = 1 one in its first step; at 0.3 none
       of uniform random, all +1, all -1 or random +-1 patterns does */
    .action_scale = 0.3,
};

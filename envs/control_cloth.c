/* control-cloth (docs/scenes.md): gradSim's cloth, a D x D grid of
 * triangle-FEM with dihedral bending and aerodynamic lift and drag, no
 * ground. Each episode draws D ~ U{size_min..size_max} (a new D rebuilds the
 * model) and a drop height h ~ U[height_min, height_max) after the goal; the
 * grid is centred, rotated by `angle` about `axis`, and placed at
 * start + (0, h, 0) by its centroid or (anchor "corner", gradSim's
 * placement) by its corner vertex 0. With the corner anchor the goal point
 * places the goal sheet's corner, so the target centroid is shifted by the
 * corner-to-centroid offset.
 *
 * Action: a velocity 3-vector added to every particle at substep 0 (the
 * seed's initial-velocity control; an INITIAL action: only step 0's is
 * used). Adjoint: dL/da = sum_i dL/dv_i(0). Metric: |com - target|^2 / 3. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "dsim/engine.h"
#include "dsim/env.h"
#include "dsim/mesh.h"

#define DS_PI 3.14159265358979323846
#define P(f) offsetof(dsControlClothParams, f)

static const dsConfigKey keys[] = {
    {"material.particle_mass", DS_KEY_REAL, P(particle_mass), DS_KEY_MIN_POSITIVE, DS_KEY_MAX, NULL, 0, "kg per particle"},
    {"material.k_mu", DS_KEY_REAL, P(k_mu), 0, DS_KEY_MAX, NULL, 0, "shear stiffness density, Pa m"},
    {"material.k_lambda", DS_KEY_REAL, P(k_lambda), DS_KEY_MIN_POSITIVE, DS_KEY_MAX, NULL, 0, "area stiffness density, Pa m"},
    {"material.k_damp", DS_KEY_REAL, P(k_damp), 0, DS_KEY_MAX, NULL, 0, "damping density"},
    {"material.bend_ke", DS_KEY_REAL, P(bend_ke), 0, DS_KEY_MAX, NULL, 0, "bending stiffness"},
    {"material.bend_kd", DS_KEY_REAL, P(bend_kd), 0, DS_KEY_MAX, NULL, 0, "bending damping"},
    {"material.lift", DS_KEY_REAL, P(lift), 0, DS_KEY_MAX, NULL, 0, "lift coefficient"},
    {"material.drag", DS_KEY_REAL, P(drag), 0, DS_KEY_MAX, NULL, 0, "drag coefficient"},
    {"scene.height_min", DS_KEY_REAL, P(height_min), -1e6, 1e6, NULL, 0, "drop height h ~ U[min, max), m"},
    {"scene.height_max", DS_KEY_REAL, P(height_max), -1e6, 1e6, NULL, 0, "m"},
    {"scene.size_min", DS_KEY_INT, P(size_min), 1, 512, NULL, 0, "cells per side D ~ U{min..max}"},
    {"scene.size_max", DS_KEY_INT, P(size_max), 1, 512, NULL, 0, "cells per side"},
    {"scene.cell", DS_KEY_REAL, P(cell), 1e-6, 1e3, NULL, 0, "cell size, m"},
    {"scene.axis", DS_KEY_VEC3, P(axis), -1e6, 1e6, NULL, 0, "rotation axis (normalised)"},
    {"scene.angle", DS_KEY_REAL, P(angle), -100, 100, NULL, 0, "rotation angle, rad"},
    {"scene.anchor", DS_KEY_ENUM, P(anchor), 0, 0, "centroid|corner", 0,
     "what start and the goal point place: the centroid or the grid corner"},
    {"scene.pin", DS_KEY_ENUM, P(pin), 0, 0, "none|corner|edge", 0,
     "particles held fixed (mass 0): the top-left corner or the top edge of the sheet (a hanging cloth)"},
    {NULL, DS_KEY_REAL, 0, 0, 0, NULL, 0, NULL}};

typedef struct ClothState {
  int D;          /* cells per side of the built sheet */
  dsReal h;       /* drop height of the episode */
  dsReal* base;   /* rest positions at drop height 0, n3 */
  dsReal* x0;     /* scratch: initial positions, n3 */
} ClothState;

static void defaults(dsEnvDef* d) {
  dsControlClothParams* p = (dsControlClothParams*)d->params.bytes;
  d->dt = (dsReal)(1.0 / 960.0);
  d->substeps = 1440;
  d->control_interval = 60;
  d->render_interval = 60;
  d->render_last = 1;
  d->ground = 0;
  d->start[0] = -5;
  d->goal_x_min = 0;
  d->goal_x_max = 3;
  d->goal_y = -3;
  d->color[0] = 0;
  d->color[1] = 1;
  d->color[2] = 0;
  /* gradSim's 15 m, in a frame 1.5 times as wide as high (384 x 256): the
     vertical field of view spans +-4 m about the origin, the horizontal one
     +-6 m, so the goal sheet (x up to ~6.9 m at the largest size and goal)
     and the final frame stay in view on every seed (tests/test_cloth_view),
     at the same pixels per metre. The square 256 x 256 frame cut the goal
     at the right edge (seed 0 among others); moving the camera back to 22 m
     instead kept the square frame but halved the pixels on the sheet, and
     seeds 3, 4, 5 then missed the 0.10 target (0.125, 0.124, 0.107). */
  d->cam_distance = 15;
  d->width = 384;
  d->height = 256;
  d->cam_elevation = 0;
  /* a second view from above: the first camera looks along z, so the
     sheet's depth was seen only through its apparent size, which its
     crumpling also changes; the final error was mostly in z (0.5-0.8 m) */
  d->cam2 = 1;
  /* gradSim sums the MSE over all frames; that sum is lowest when the
     sheet leaves the view early, and it drove the sheet away (metric
     16 -> 30 over seeds 0-2). The last frame with the moments term tracks
     the metric, which is measured on the last frame. image_sum remains
     available (docs/scenes.md). */
  d->loss_kind = DS_ENV_LOSS_IMAGE_LAST;
  d->loss_moments = 5;
  p->particle_mass = 2;
  p->k_mu = 100;
  p->k_lambda = 1e4;
  p->k_damp = 100;
  p->bend_ke = 100;
  p->bend_kd = 0;
  p->lift = 10;
  p->drag = 5;
  p->height_min = 2;
  p->height_max = 3;
  p->size_min = 8;
  p->size_max = 31;
  p->cell = 0.125;
  p->axis[0] = 1;
  p->axis[1] = 0.5;
  p->axis[2] = 0;
  p->angle = (dsReal)(DS_PI / 2);
  p->anchor = 1; /* gradSim places the grid by its corner */
}

/* ranges are the key table's; what they cannot express: */
static int validate(const dsEnvDef* d, char* err, size_t errlen) {
  const dsControlClothParams* f = (const dsControlClothParams*)d->params.bytes;
  if (f->size_min < 1 || f->size_max < f->size_min)
    snprintf(err, errlen, "scene.size_max: must be >= env.scene.size_min (%d), got %d", f->size_min, f->size_max);
  else if (f->height_max < f->height_min)
    snprintf(err, errlen, "scene.height_max: must be >= env.scene.height_min (%g), got %g", (double)f->height_min,
             (double)f->height_max);
  else if (!(fabs((double)f->axis[0]) + fabs((double)f->axis[1]) + fabs((double)f->axis[2]) > 0))
    snprintf(err, errlen, "scene.axis: must not be zero");
  else
    return 0;
  return DS_ERR_RANGE;
}

static int create(dsEnv* e, void** state) {
  const dsControlClothParams* p = (const dsControlClothParams*)ds_env_params(e);
  ClothState* cs = (ClothState*)ds_calloc(1, sizeof *cs);
  if (!cs) return DS_ERR_NOMEM;
  cs->D = p->size_min;
  cs->h = p->height_min;
  *state = cs;
  return 0;
}

static void destroy(void* state) {
  ClothState* cs = (ClothState*)state;
  if (!cs) return;
  ds_free(cs->base);
  ds_free(cs->x0);
  ds_free(cs);
}

/* The sheet of D cells per side at drop height h. */
static int cloth_mesh(const dsEnvDef* def, int D, dsReal h, dsMesh* mesh) {
  const dsControlClothParams* p = (const dsControlClothParams*)def->params.bytes;
  int rc = ds_mesh_cloth_grid(D, D, p->cell, mesh);
  if (rc) return rc;
  ds_mesh_center(mesh);
  rc = ds_mesh_rotate(mesh, p->axis, p->angle);
  if (rc) {
    ds_mesh_free(mesh);
    return rc;
  }
  /* anchor 1: the corner (vertex 0) goes to start, else the centroid (at 0) */
  const dsReal zero[3] = {0, 0, 0}, *a = p->anchor == 1 ? mesh->x : zero;
  const dsReal t[3] = {def->start[0] - a[0], def->start[1] + h - a[1], def->start[2] - a[2]};
  ds_mesh_translate(mesh, t);
  return 0;
}

static int build(dsEnv* e, dsBuilder* b) {
  const dsControlClothParams* p = (const dsControlClothParams*)ds_env_params(e);
  const ClothState* cs = (const ClothState*)ds_env_class_state(e);
  dsMesh mesh;
  int rc = cloth_mesh(ds_env_def(e), cs->D, cs->h, &mesh);
  if (rc) return rc;
  const dsTriMaterial mat = {p->k_mu, p->k_lambda, p->k_damp};
  const dsBendMaterial bend = {p->bend_ke, p->bend_kd};
  /* the grid's rows are j = i / (D + 1); the top row j = D hangs the sheet */
  const int D = cs->D;
  for (int i = 0; i < mesh.nvert && rc >= 0; i++) {
    const int held = (p->pin == 1 && i == D * (D + 1)) || (p->pin == 2 && i / (D + 1) == D);
    rc = ds_builder_add_particle(b, mesh.x + 3 * i, ds_env_def(e)->velocity, held ? 0 : p->particle_mass);
  }
  for (int t = 0; t < mesh.ntri && rc >= 0; t++) {
    const int* f = mesh.tri + 3 * t;
    rc = ds_builder_add_tri(b, f[0], f[1], f[2], &mat);
    if (rc >= 0) rc = ds_builder_add_face(b, f[0], f[1], f[2]);
  }
  if (rc >= 0 && (p->bend_ke != 0 || p->bend_kd != 0)) rc = ds_builder_add_bending_from_tris(b, 0, mesh.ntri, &bend);
  if (rc >= 0 && (p->lift != 0 || p->drag != 0)) ds_builder_set_aero(b, p->lift, p->drag);
  ds_mesh_free(&mesh);
  return rc < 0 ? rc : 0;
}

/* after a build: the sheet's positions at height 0 for this D */
static int built(dsEnv* e) {
  ClothState* cs = (ClothState*)ds_env_class_state(e);
  ds_free(cs->base);
  ds_free(cs->x0);
  const size_t n3 = 3 * (size_t)ds_env_num_particles(e);
  cs->base = (dsReal*)ds_calloc(n3, sizeof(dsReal));
  cs->x0 = (dsReal*)ds_calloc(n3, sizeof(dsReal));
  if (!cs->base || !cs->x0) return ds_env_set_errorf(e, DS_ERR_NOMEM, "out of memory");
  dsMesh mesh;
  int rc = cloth_mesh(ds_env_def(e), cs->D, 0, &mesh);
  if (rc) return ds_env_set_errorf(e, rc, "cloth placement failed (%s)", ds_strerror(rc));
  memcpy(cs->base, mesh.x, 3 * (size_t)mesh.nvert * sizeof(dsReal));
  ds_mesh_free(&mesh);
  return 0;
}

static int reset(dsEnv* e, uint64_t* rng) {
  const dsControlClothParams* p = (const dsControlClothParams*)ds_env_params(e);
  ClothState* cs = (ClothState*)ds_env_class_state(e);
  const int D = p->size_min + (int)(ds_env_rng_next(rng) % (uint64_t)(p->size_max - p->size_min + 1));
  const dsReal h = (dsReal)(p->height_min + (p->height_max - p->height_min) * ds_env_rng_uniform(rng));
  cs->h = h;
  if (D != cs->D) {
    cs->D = D;
    int rc = ds_env_rebuild(e);
    if (rc) return rc;
  }
  /* the sheet lifted to its height, computed the same way whether or not the
   * model was just rebuilt (same seed, same bits; no allocation) */
  const int np = ds_env_num_particles(e);
  for (int i = 0; i < np; i++)
    for (int c = 0; c < 3; c++) cs->x0[3 * i + c] = cs->base[3 * i + c] + (c == 1 ? h : 0);
  int rc = ds_model_set_param(ds_env_model_mut(e), "initial_position", cs->x0, 3 * np);
  if (rc) return ds_env_set_errorf(e, rc, "cloth placement failed (%s)", ds_strerror(rc));
  return 0;
}

static void target(const dsEnv* e, dsReal t[3]) {
  const dsControlClothParams* p = (const dsControlClothParams*)ds_env_params(e);
  if (p->anchor == 1) { /* the point places the corner: the shift from vertex 0 to the centre of mass */
    dsReal com[3];
    ds_env_start_com(e, com);
    const dsReal* x0 = ds_env_start_positions(e);
    for (int k = 0; k < 3; k++) t[k] += com[k] - x0[k];
  }
}

static int action_size(const dsEnv* e) {
  (void)e;
  return 3;
}

static void action_fwd(dsEnv* e, int step, int s, const dsReal* a) {
  (void)step;
  if (s != 0) return;
  const int np = ds_env_num_particles(e);
  dsReal* v = ds_env_data(e)->v;
  for (int i = 0; i < np; i++)
    for (int c = 0; c < 3; c++) v[3 * i + c] += a[c];
}

static void action_bwd(dsEnv* e, int step, int s, const dsReal* a, const dsReal* adj_act, const dsReal* adj_fext,
                       dsReal* grad) {
  (void)step, (void)a, (void)adj_act, (void)adj_fext;
  if (s != 0) return;
  const int np = ds_env_num_particles(e);
  const dsReal* adj_v = ds_env_data(e)->adj_v;
  for (int i = 0; i < np; i++)
    for (int c = 0; c < 3; c++) grad[c] += adj_v[3 * i + c];
}

const dsEnvClass ds__control_cloth_class = {
    .name = "control-cloth",
    .doc = "gradSim's cloth: a sheet of random size thrown by its initial velocity towards a goal",
    .params_size = sizeof(dsControlClothParams),
    .keys = keys,
    .defaults = defaults,
    .validate = validate,
    .create = create,
    .destroy = destroy,
    .build = build,
    .built = built,
    .action_size = action_size,
    .action_kind = DS_ACTION_INITIAL,
    .action_fwd = action_fwd,
    .action_bwd = action_bwd,
    .metric_kind = DS_METRIC_TARGET,
    .reset = reset,
    .target = target,
};

/* rigid-toss (docs/scenes.md): gradSim's rigid system-identification set-up.
 * One rigid body (box, sphere or cylinder; engine/rigid.h) rests on the
 * ground (in static equilibrium) below `start`; a known impulse J, the action (INITIAL: only the first
 * step's is used), acts over substep 0 at the centre of mass plus
 * scene.impulse_offset; the video is 256 x 256 at 30 frames/s (dt 1/960 s,
 * a frame every 32 substeps). Its unknowns for system identification are the
 * engine's body parameters (body.mass, body.contact_mu, body.restitution,
 * body.contact_ke, ...), whose gradients every backward gives. The built-in
 * goal is the body at rest moved by (x_t, 0, 0), x_t ~ U[goal_x_min,
 * goal_x_max): as a control task, find the impulse that slides it there.
 *
 * Action adjoint: the impulse enters as the wrench (J/dt, r x J/dt) over
 * substep 0 (r = impulse_offset), so dL/dJ = (AF + AT x r)/dt with (AF, AT)
 * the engine's dL/d(body wrench) of substep 0. */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "dsim/engine.h"
#include "dsim/env.h"
#include "dsim/mesh.h"

#define P(f) offsetof(dsRigidTossParams, f)

static const dsConfigKey keys[] = {
    {"body.mass", DS_KEY_REAL, P(mass), 1e-6, 1e6, NULL, 0, "kg"},
    {"body.restitution", DS_KEY_REAL, P(restitution), 1e-6, 1, NULL, 0,
     "e in (0, 1]: damping of a spring-damper with restitution e (engine/rigid.h)"},
    {"scene.shape", DS_KEY_ENUM, P(shape), 0, 0, "box|sphere|cylinder", 0, "the body"},
    {"scene.size", DS_KEY_VEC3, P(size), 1e-4, 1e3, NULL, 0,
     "box: half extents; sphere: radius (first); cylinder: radius, half height, m"},
    {"scene.segments", DS_KEY_INT, P(segments), 4, 128, NULL, 0, "sphere / cylinder segments around y"},
    {"scene.impulse_offset", DS_KEY_VEC3, P(impulse_offset), -1e3, 1e3, NULL, 0,
     "where the impulse acts, relative to the centre of mass, m"},
    {NULL, DS_KEY_REAL, 0, 0, 0, NULL, 0, NULL}};

static void defaults(dsEnvDef* d) {
  dsRigidTossParams* p = (dsRigidTossParams*)d->params.bytes;
  d->dt = (dsReal)(1.0 / 960.0);
  d->substeps = 960;
  d->control_interval = 32;
  d->render_interval = 32;
  d->render_last = 1;
  d->ground = 1;
  d->contact_ke = 1e4;
  d->contact_kd = 10;
  d->contact_kf = 100;
  d->contact_mu = 0.4;
  d->contact_skin = 0;
  d->start[0] = -1;
  d->start[1] = 0;
  d->start[2] = 0;
  d->goal_relative = 1;
  d->goal_x_min = 0.5;
  d->goal_x_max = 1.5;
  d->goal_y = 0;
  d->goal_z = 0;
  d->color[0] = 1;
  d->color[1] = 0.5;
  d->color[2] = 0;
  d->cam_distance = 5;
  d->cam_elevation = 30;
  d->loss_kind = DS_ENV_LOSS_IMAGE_LAST;
  p->shape = 0;
  p->size[0] = 0.2;
  p->size[1] = 0.1;
  p->size[2] = 0.15;
  p->segments = 16;
  p->mass = 1;
  p->restitution = 0.5;
}

/* Height of the centre of mass at rest: above the lowest vertices by the
 * half height, sunk by the static penetration m g / (n ke) of the n
 * vertices of the bottom (box 4, sphere its pole, cylinder its bottom ring
 * and centre), so that the episode starts in equilibrium, away from the
 * contact switch at y = skin. */
static dsReal rest_height(const dsEnvDef* def, const dsRigidTossParams* p) {
  const dsReal h = p->shape == 1 ? p->size[0] : p->size[1];
  const int n = p->shape == 0 ? 4 : p->shape == 1 ? 1 : p->segments + 1;
  const dsReal g = def->gravity[1] < 0 ? -def->gravity[1] : 0;
  return h + def->contact_skin - (def->contact_ke > 0 ? p->mass * g / (n * def->contact_ke) : 0);
}

static int build(dsEnv* e, dsBuilder* b) {
  const dsRigidTossParams* p = (const dsRigidTossParams*)ds_env_params(e);
  dsRigidDef d = ds_default_rigid_def();
  for (int k = 0; k < 3; k++) d.position[k] = ds_env_def(e)->start[k];
  d.position[1] += rest_height(ds_env_def(e), p);
  for (int k = 0; k < 3; k++) d.velocity[k] = ds_env_def(e)->velocity[k];
  d.mass = p->mass;
  d.ke = ds_env_def(e)->contact_ke;
  d.kd = ds_env_def(e)->contact_kd;
  d.kf = ds_env_def(e)->contact_kf;
  d.mu = ds_env_def(e)->contact_mu;
  d.restitution = p->restitution;
  int rc;
  if (p->shape == 1)
    rc = ds_builder_add_rigid_sphere(b, p->size[0], p->segments, &d);
  else if (p->shape == 2)
    rc = ds_builder_add_rigid_cylinder(b, p->size[0], p->size[1], p->segments, &d);
  else
    rc = ds_builder_add_rigid_box(b, p->size, &d);
  return rc < 0 ? rc : 0;
}

static int action_size(const dsEnv* e) {
  (void)e;
  return 3;
}

static void action_fwd(dsEnv* e, int step, int s, const dsReal* a) {
  (void)step;
  const dsRigidTossParams* p = (const dsRigidTossParams*)ds_env_params(e);
  dsData* d = ds_env_data(e);
  if (s == 0) {
    const dsReal* c = d->body;
    const dsReal at[3] = {c[0] + p->impulse_offset[0], c[1] + p->impulse_offset[1], c[2] + p->impulse_offset[2]};
    ds_body_set_impulse(ds_env_model(e), d, 0, a, at);
  } else if (s == 1) {
    memset(d->body_fext, 0, 6 * sizeof(dsReal));
  }
}

static void action_bwd(dsEnv* e, int step, int s, const dsReal* a, const dsReal* adj_act, const dsReal* adj_fext,
                       dsReal* grad) {
  (void)step, (void)a, (void)adj_act, (void)adj_fext;
  if (s != 0) return;
  const dsRigidTossParams* p = (const dsRigidTossParams*)ds_env_params(e);
  const dsReal* A = ds_env_data(e)->adj_body_fext;
  const dsReal* r = p->impulse_offset;
  const dsReal t[3] = {A[4] * r[2] - A[5] * r[1], A[5] * r[0] - A[3] * r[2], A[3] * r[1] - A[4] * r[0]};
  for (int k = 0; k < 3; k++) grad[k] += (A[k] + t[k]) / ds_env_model(e)->dt;
}

const dsEnvClass ds__rigid_toss_class = {
    .name = "rigid-toss",
    .doc = "gradSim's rigid sysid set-up: a body on the ground given a known impulse (the action)",
    .params_size = sizeof(dsRigidTossParams),
    .keys = keys,
    .defaults = defaults,
    .build = build,
    .action_size = action_size,
    .action_kind = DS_ACTION_INITIAL,
    .action_fwd = action_fwd,
    .action_bwd = action_bwd,
    .metric_kind = DS_METRIC_TARGET,
};

/* pendulum and double-pendulum (docs/scenes.md, docs/articulated.md):
 * gradSim's pendulum demos as articulations (dsim/artic.h) inside the
 * particle engine. Each link is a bob (a sphere of radius scene.bob_radius
 * at its centre of mass, a point mass for the dynamics up to its inertia
 * 2/5 m r^2) on a massless rod from its hinge; the first hinge is at
 * `start`, the second at the first bob. The hinges turn about the world z
 * axis, so the default camera (azimuth 0, elevation 0: looking along +z)
 * sees the swing side on. A joint angle is measured from hanging straight
 * down, positive towards +x.
 *
 * Articulation frame (z up; the world point is (x, z, -y), dsim/engine.h):
 * hinge axis (0, -1, 0), the world's +z, so a positive angle q moves the
 * bob to +x: its centre is jp + L (sin q, 0, -cos q). Link i's joint has
 * anchor_child (0, 0, L_i) (so "joint.hingeI.anchor_child.z" is the length)
 * and joint 2 anchor_parent (0, 0, 0) (at bob 1).
 *
 * Named parameters for sysid (the articulation's, docs/articulated.md):
 * body.link1.mass, joint.hinge1.anchor_child.z, joint.hinge1.damping, ...
 * Actions: one torque per hinge (N m; motors "motor1", "motor2", gear 1,
 * smooth bound actuator.ctrl_limit), held over the step. Goal: the pose at
 * release (goal offset 0): hold the pendulum at its release angle against
 * gravity. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "dsim/artic.h"
#include "dsim/engine.h"
#include "dsim/env.h"
#include "dsim/mesh.h"

#define PEND_PI 3.14159265358979323846
#define PEND_MAX_LINKS 2
#define PEND_MAX_SEG 32 /* sphere segments around; vertices 2 + (seg/2 - 1) seg */
#define PEND_SPH_V (2 + (PEND_MAX_SEG / 2 - 1) * PEND_MAX_SEG)
#define PEND_SPH_T (2 * PEND_MAX_SEG * (PEND_MAX_SEG / 2 - 1))

typedef struct dsPendulumParams {
  int links;                      /* 1 or 2 (the class) */
  dsReal mass[PEND_MAX_LINKS];    /* bob masses, kg [linkN.mass] */
  dsReal length[PEND_MAX_LINKS];  /* rod lengths, m [linkN.length] */
  dsReal damping[PEND_MAX_LINKS]; /* hinge damping, N m s/rad [jointN.damping] */
  dsReal angle[PEND_MAX_LINKS];   /* release angles, degrees [jointN.angle] */
  dsReal bob_radius;              /* m [scene.bob_radius] */
  dsReal rod_width;               /* half width of the rod, m [scene.rod_width] */
  int segments;                   /* sphere segments [scene.segments] */
  dsReal ctrl_limit;              /* smooth torque bound, N m; 0 = none [actuator.ctrl_limit] */
} dsPendulumParams;

_Static_assert(sizeof(dsPendulumParams) <= DS_ENV_PARAMS_MAX, "pendulum parameters fit a dsEnvDef");

#define P(f) offsetof(dsPendulumParams, f)
#define LINK_KEYS(n, i)                                                                                         \
  {"link" #n ".mass", DS_KEY_REAL, P(mass) + (i) * sizeof(dsReal), 1e-6, 1e6, NULL, 0,                          \
   "bob mass, kg (body.link" #n ".mass)"},                                                                      \
      {"link" #n ".length", DS_KEY_REAL, P(length) + (i) * sizeof(dsReal), 1e-3, 100, NULL, 0,                  \
       "rod length, m (joint.hinge" #n ".anchor_child.z)"},                                                     \
      {"joint" #n ".damping", DS_KEY_REAL, P(damping) + (i) * sizeof(dsReal), 0, 1e6, NULL, 0,                  \
       "hinge damping, N m s/rad (joint.hinge" #n ".damping)"},                                                 \
      {"joint" #n ".angle", DS_KEY_REAL, P(angle) + (i) * sizeof(dsReal), -360, 360, NULL, 0,                   \
       "release angle from hanging down (joint " #n " relative to link " #n "'s parent), degrees, + towards +x"},
#define COMMON_KEYS                                                                                             \
  {"scene.bob_radius", DS_KEY_REAL, P(bob_radius), 1e-4, 10, NULL, 0, "bob sphere radius, m"},                  \
      {"scene.rod_width", DS_KEY_REAL, P(rod_width), 1e-5, 1, NULL, 0, "rod half width, m"},                    \
      {"scene.segments", DS_KEY_INT, P(segments), 4, PEND_MAX_SEG, NULL, 0, "bob sphere segments (even)"},      \
      {"actuator.ctrl_limit", DS_KEY_REAL, P(ctrl_limit), 0, 1e6, NULL, 0,                                      \
       "smooth hinge torque bound c tanh(u / c), N m; 0: none"},

static const dsConfigKey keys1[] = {LINK_KEYS(1, 0) COMMON_KEYS{NULL, DS_KEY_REAL, 0, 0, 0, NULL, 0, NULL}};
static const dsConfigKey keys2[] = {
    LINK_KEYS(1, 0) LINK_KEYS(2, 1) COMMON_KEYS{NULL, DS_KEY_REAL, 0, 0, 0, NULL, 0, NULL}};

static void defaults_common(dsEnvDef* d, int links) {
  dsPendulumParams* p = (dsPendulumParams*)d->params.bytes;
  d->dt = (dsReal)(1.0 / 960.0);
  d->substeps = 960;
  d->control_interval = 32;
  d->render_interval = 32;
  d->render_last = 1;
  d->ground = 0;
  d->start[0] = 0;
  d->start[1] = 2;
  d->start[2] = 0;
  d->goal_relative = 1;
  d->goal_x_min = d->goal_x_max = 0;
  d->goal_y = d->goal_z = 0;
  d->color[0] = 0.2;
  d->color[1] = 0.5;
  d->color[2] = 1;
  d->cam_elevation = 0;
  d->cam_azimuth = 0;
  d->loss_kind = DS_ENV_LOSS_IMAGE_LAST;
  p->links = links;
  for (int i = 0; i < PEND_MAX_LINKS; i++) {
    p->mass[i] = 1;
    p->length[i] = links == 1 ? 1 : 0.6;
    p->damping[i] = 0.05;
    p->angle[i] = i == 0 ? 60 : 30;
  }
  p->bob_radius = 0.1;
  p->rod_width = 0.015;
  p->segments = 12;
  p->ctrl_limit = 0;
  const dsReal reach = links == 1 ? p->length[0] : p->length[0] + p->length[1];
  d->cam_look_at[0] = 0;
  d->cam_look_at[1] = d->start[1] - (dsReal)0.5 * reach;
  d->cam_look_at[2] = 0;
  d->cam_distance = (dsReal)(3.2 * reach + 1);
}
static void defaults1(dsEnvDef* d) { defaults_common(d, 1); }
static void defaults2(dsEnvDef* d) { defaults_common(d, 2); }

static int validate(const dsEnvDef* def, char* err, size_t errlen) {
  const dsPendulumParams* p = (const dsPendulumParams*)def->params.bytes;
  if (p->segments % 2) {
    snprintf(err, errlen, "scene.segments: %d (expected an even number)", p->segments);
    return DS_ERR_CONFIG;
  }
  return 0;
}

/* The articulation: link i on hinge i (parent: the world or link i-1). */
static int build_artic(const dsEnvDef* def, const dsPendulumParams* p, dsArticModel** out, char* err, size_t errlen) {
  dsArticBuilder* b;
  int rc = ds_artic_builder_create(&b);
  if (rc) return rc;
  for (int i = 0; i < p->links && !rc; i++) {
    char bn[16], jn[16], an[16], pn[16];
    snprintf(bn, sizeof bn, "link%d", i + 1);
    snprintf(jn, sizeof jn, "hinge%d", i + 1);
    snprintf(an, sizeof an, "motor%d", i + 1);
    snprintf(pn, sizeof pn, "link%d", i);
    dsArticBodyDef bd = ds_artic_default_body_def();
    bd.name = bn;
    bd.mass = p->mass[i];
    for (int k = 0; k < 3; k++) bd.inertia[k] = 0.4 * p->mass[i] * p->bob_radius * p->bob_radius;
    rc = ds_artic_add_body(b, &bd);
    dsArticJointDef jd = ds_artic_default_joint_def();
    jd.name = jn;
    jd.parent = i ? pn : NULL;
    jd.child = bn;
    jd.axis[0] = 0, jd.axis[1] = -1, jd.axis[2] = 0;
    if (i == 0) { /* the world point start (y up) in the articulation's frame (z up) */
      jd.anchor_parent[0] = def->start[0];
      jd.anchor_parent[1] = -def->start[2];
      jd.anchor_parent[2] = def->start[1];
    }
    jd.anchor_child[2] = p->length[i];
    jd.damping = p->damping[i];
    if (!rc) rc = ds_artic_add_joint(b, &jd);
    dsArticActuatorDef ad = ds_artic_default_actuator_def();
    ad.name = an;
    ad.joint = jn;
    ad.ctrl_limit = p->ctrl_limit;
    if (!rc) rc = ds_artic_add_actuator(b, &ad);
  }
  dsArticOptions o = ds_artic_default_options();
  o.dt = def->dt;
  o.gravity[0] = def->gravity[0], o.gravity[1] = -def->gravity[2], o.gravity[2] = def->gravity[1];
  if (!rc) rc = ds_artic_build(b, &o, out);
  if (rc) snprintf(err, errlen, "%s", ds_artic_builder_error(b));
  ds_artic_builder_free(b);
  return rc;
}

/* Triangles turned so that their normal points away from c (closed convex
 * shapes: counter-clockwise seen from outside, as dsMesh asks). */
static void orient(dsMesh* m, const double* s, const double ac[3], const double c[3]) {
  for (int t = 0; t < m->ntri; t++) {
    int* v = m->tri + 3 * t;
    double p[3][3];
    for (int k = 0; k < 3; k++)
      for (int j = 0; j < 3; j++) p[k][j] = m->x[3 * v[k] + j] + (s ? s[v[k]] * ac[j] : 0);
    double e1[3], e2[3], n[3], d = 0;
    for (int j = 0; j < 3; j++) e1[j] = p[1][j] - p[0][j], e2[j] = p[2][j] - p[0][j];
    n[0] = e1[1] * e2[2] - e1[2] * e2[1];
    n[1] = e1[2] * e2[0] - e1[0] * e2[2];
    n[2] = e1[0] * e2[1] - e1[1] * e2[0];
    for (int j = 0; j < 3; j++) d += n[j] * ((p[0][j] + p[1][j] + p[2][j]) / 3 - c[j]);
    if (d < 0) {
      const int tmp = v[1];
      v[1] = v[2];
      v[2] = tmp;
    }
  }
}

/* UV sphere of radius r about the origin, nseg around, nseg/2 bands */
static void sphere(dsMesh* m, dsReal* x, int* tri, dsReal r, int nseg) {
  const int nlat = nseg / 2, nring = nlat - 1, bot = 1 + nring * nseg;
  int nt = 0;
  x[0] = x[1] = 0, x[2] = r;
  for (int i = 0; i < nring; i++)
    for (int j = 0; j < nseg; j++) {
      const double th = PEND_PI * (i + 1) / nlat, ph = 2 * PEND_PI * j / nseg;
      dsReal* p = x + 3 * (1 + i * nseg + j);
      p[0] = (dsReal)(r * sin(th) * cos(ph)), p[1] = (dsReal)(r * sin(th) * sin(ph)), p[2] = (dsReal)(r * cos(th));
    }
  x[3 * bot] = x[3 * bot + 1] = 0, x[3 * bot + 2] = -r;
  for (int j = 0; j < nseg; j++) {
    const int j1 = (j + 1) % nseg;
    int* t = tri + 3 * nt;
    t[0] = 0, t[1] = 1 + j, t[2] = 1 + j1, nt++;
    for (int i = 0; i + 1 < nring; i++) {
      const int a0 = 1 + i * nseg + j, a1 = 1 + i * nseg + j1, b0 = a0 + nseg, b1 = a1 + nseg;
      t = tri + 3 * nt;
      t[0] = a0, t[1] = b0, t[2] = b1, nt++;
      t = tri + 3 * nt;
      t[0] = a0, t[1] = b1, t[2] = a1, nt++;
    }
    t = tri + 3 * nt;
    t[0] = bot, t[1] = 1 + (nring - 1) * nseg + j1, t[2] = 1 + (nring - 1) * nseg + j, nt++;
  }
  m->nvert = bot + 1;
  m->x = x;
  m->ntri = nt;
  m->tri = tri;
  m->ntet = 0;
  m->tet = NULL;
}

/* The rod of link i: a box of half width w from the bob's centre (weight 0)
 * to the hinge (weight 1: it follows the length parameter). */
static int add_rod(dsBuilder* b, int i, dsReal w, dsReal len, dsReal mass) {
  dsReal x[24], s[8];
  int tri[36];
  static const int quads[6][4] = {{0, 2, 3, 1}, {4, 5, 7, 6}, {0, 1, 5, 4}, {2, 6, 7, 3}, {0, 4, 6, 2}, {1, 3, 7, 5}};
  for (int v = 0; v < 8; v++) {
    x[3 * v] = v & 1 ? w : -w;
    x[3 * v + 1] = v & 2 ? w : -w;
    x[3 * v + 2] = 0;
    s[v] = v & 4 ? 1 : 0;
  }
  for (int f = 0; f < 6; f++) {
    const int* q = quads[f];
    int* t = tri + 6 * f;
    t[0] = q[0], t[1] = q[1], t[2] = q[2], t[3] = q[0], t[4] = q[2], t[5] = q[3];
  }
  dsMesh m = {8, x, 12, tri, 0, NULL};
  double sd[8];
  for (int v = 0; v < 8; v++) sd[v] = s[v];
  const double ac[3] = {0, 0, len}, c[3] = {0, 0, 0.5 * len};
  orient(&m, sd, ac, c);
  return ds_builder_add_artic_mesh(b, i, &m, s, mass);
}

static int build(dsEnv* e, dsBuilder* b) {
  const dsEnvDef* def = ds_env_def(e);
  const dsPendulumParams* p = (const dsPendulumParams*)ds_env_params(e);
  char err[256] = "";
  dsArticModel* am = NULL;
  int rc = build_artic(def, p, &am, err, sizeof err);
  if (rc) return ds_env_set_errorf(e, rc, "%s: articulation: %s", def->cls->name, err);
  double q0[PEND_MAX_LINKS];
  for (int i = 0; i < p->links; i++) q0[i] = p->angle[i] * PEND_PI / 180;
  rc = ds_builder_set_artic(b, am, q0, NULL);
  ds_artic_model_free(am);
  for (int i = 0; i < p->links && rc >= 0; i++) {
    dsMesh sm;
    dsReal xs[3 * PEND_SPH_V];
    int ts[3 * PEND_SPH_T];
    sphere(&sm, xs, ts, p->bob_radius, p->segments);
    const double zero[3] = {0, 0, 0};
    orient(&sm, NULL, zero, zero);
    rc = ds_builder_add_artic_mesh(b, i, &sm, NULL, (dsReal)0.9 * p->mass[i]);
    if (rc >= 0) rc = add_rod(b, i, p->rod_width, p->length[i], (dsReal)0.1 * p->mass[i]);
  }
  return rc < 0 ? rc : 0;
}

const dsEnvClass ds__pendulum_class = {
    .name = "pendulum",
    .doc = "gradSim's pendulum: a bob on a rod on one hinge (an articulation); hinge torque actions",
    .params_size = sizeof(dsPendulumParams),
    .keys = keys1,
    .defaults = defaults1,
    .validate = validate,
    .build = build,
    .action_size = ds_env_artic_action_size,
    .action_kind = DS_ACTION_PER_STEP,
    .action_fwd = ds_env_artic_action_fwd,
    .action_bwd = ds_env_artic_action_bwd,
    .metric_kind = DS_METRIC_TARGET,
    .action_scale = 10,
};

const dsEnvClass ds__double_pendulum_class = {
    .name = "double-pendulum",
    .doc = "gradSim's double pendulum: two bobs on rods, two hinges (an articulation); hinge torque actions",
    .params_size = sizeof(dsPendulumParams),
    .keys = keys2,
    .defaults = defaults2,
    .validate = validate,
    .build = build,
    .action_size = ds_env_artic_action_size,
    .action_kind = DS_ACTION_PER_STEP,
    .action_fwd = ds_env_artic_action_fwd,
    .action_bwd = ds_env_artic_action_bwd,
    .metric_kind = DS_METRIC_TARGET,
    .action_scale = 10,
};

/* runner (docs/articulated.md, "The runner env"): the articulated planar
 * runner of configs/models/runner.xml (a torso on two legs of thigh, shin
 * and foot; six motors) on the ground, as an env. Any planar MJCF or URDF
 * model may replace it (scene.model): the env needs only its motors and its
 * contact geoms.
 *
 * The model. scene.model names a file: an existing path, or else a file of
 * the bundled models folder (configs/models/ next to the bundled configs,
 * ds_run_config_dir). The file's <option> sets dt and gravity; the env then
 * sets the gravity (gravity.{x,y,z}) and the ground contact (contact.{ke,
 * kd,kf,mu}) parameters from its definition, mapped from the particle world
 * (y up) to the articulation's frame (z up): a world vector (x, y, z) is the
 * articulation's (x, -z, y) (docs/articulated.md, "Frames"). The
 * definition's dt must be the file's timestep. `start` moves the first
 * body's joint anchor (its joint's anchor_parent) by start, so (0, 0, 0)
 * keeps the file's pose; the initial state is the q = 0 pose of the file
 * (the runner: standing, feet 1 cm above the ground).
 *
 * Render meshes: per contact sphere pair of a body (a capsule's two end
 * points: same body, same radius, consecutive) a capsule mesh, per lone
 * sphere a sphere; each link's render mass is its mass parameter, shared
 * among its meshes, so the env's centre of mass is the links' (up to the
 * massless carriers and geometry-less links).
 *
 * Actions: the model's controls (nu; the runner's six motors, each smoothly
 * bounded to +-1 by the file's ctrlrange and geared to +-60/40/20 N m),
 * held over the step; RL scale 1. Metric: centre-of-mass displacement along
 * x (goal +2 m), so the dense reward is its progress per step and the image
 * goal the runner moved +2 m. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "dsim/artic.h"
#include "dsim/engine.h"
#include "dsim/env.h"
#include "dsim/mesh.h"
#include "dsim/model_file.h"
#include "dsim/config_dirs.h"

#define RUN_PI 3.14159265358979323846
#define RUN_MAX_SEG 16 /* segments around a capsule */
#define RUN_MAX_V (2 + RUN_MAX_SEG * RUN_MAX_SEG)
#define RUN_MAX_T (4 * RUN_MAX_SEG * RUN_MAX_SEG)
#define RUN_PATH 256       /* scene.model, bytes */
#define RUN_PATH_MAX 4096 /* a resolved model path, bytes */

typedef struct dsRunnerParams {
  char model[RUN_PATH]; /* [scene.model] */
  int segments;         /* capsule segments around [scene.segments] */
} dsRunnerParams;

_Static_assert(sizeof(dsRunnerParams) <= DS_ENV_PARAMS_MAX, "runner parameters fit a dsEnvDef");

#define P(f) offsetof(dsRunnerParams, f)
static const dsConfigKey keys[] = {
    {"scene.model", DS_KEY_STRING, P(model), 0, RUN_PATH, NULL, 0,
     "articulated model file (MJCF or URDF): a path, or a file of the bundled configs/models/"},
    {"scene.segments", DS_KEY_INT, P(segments), 4, RUN_MAX_SEG, NULL, 0, "render capsule segments around (even)"},
    {NULL, DS_KEY_REAL, 0, 0, 0, NULL, 0, NULL}};

static void defaults(dsEnvDef* d) {
  dsRunnerParams* p = (dsRunnerParams*)d->params.bytes;
  d->dt = (dsReal)1e-3;
  d->substeps = 2000;
  d->control_interval = 20;
  d->render_interval = 100;
  d->render_last = 1;
  d->ground = 1;
  /* the contact the runner was written for (ds_artic_default_options) */
  d->contact_ke = 1e4;
  d->contact_kd = 100;
  d->contact_kf = 100;
  d->contact_mu = (dsReal)0.8;
  d->goal_x_min = d->goal_x_max = 2;
  d->goal_relative = 1;
  d->color[0] = 0.9;
  d->color[1] = 0.5;
  d->color[2] = 0.1;
  /* side on (looking along -z at the x-y plane the runner moves in), wide
     enough for the start and the goal 2 m ahead */
  d->cam_elevation = 10;
  d->cam_azimuth = 0;
  d->cam_distance = 9;
  d->cam_look_at[0] = 1;
  d->cam_look_at[1] = (dsReal)0.4;
  d->cam_look_at[2] = 0;
  /* the walker's moments term: the alpha centroid carries the displacement
     when the runner and its goal image barely overlap */
  d->loss_moments = 50;
  /* for RL (dsim/Runner-v0): the forward progress of each step as its
     reward, and the joints' coordinates and velocities as the observation
     (the built-in controller's image loss reads neither; its state method
     asks for observation.state com) */
  d->reward_kind = DS_ENV_REWARD_DENSE;
  d->obs_state = DS_OBS_STATE_JOINTS;
  snprintf(p->model, sizeof p->model, "%s", "runner.xml");
  p->segments = 8;
}

static int validate(const dsEnvDef* def, char* err, size_t errlen) {
  const dsRunnerParams* p = (const dsRunnerParams*)def->params.bytes;
  if (p->segments % 2) {
    snprintf(err, errlen, "scene.segments: %d (expected an even number)", p->segments);
    return DS_ERR_CONFIG;
  }
  return 0;
}

static int is_file(const char* path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* The model file: `name` itself when it is a file, else models/name in the
 * first bundled configs folder that has it. */
static int find_model(const char* name, char* path, size_t n, char* err, size_t errlen) {
  if (is_file(name) || strchr(name, '/')) {
    snprintf(path, n, "%s", name);
    return 0;
  }
  char dir[RUN_PATH_MAX];
  for (int i = 0; ds_run_config_dir(i, dir, sizeof dir) != DS_ERR_NOTFOUND; i++) {
    if (!dir[0]) continue;
    const int k = snprintf(path, n, "%s/models/%s", dir, name);
    if (k > 0 && (size_t)k < n && is_file(path)) return 0;
  }
  snprintf(err, errlen, "scene.model: no file '%s' (expected a path or a file of the bundled configs/models/)", name);
  return DS_ERR_NOTFOUND;
}

/* Gravity, ground contact and start from the definition (world y up ->
 * articulation z up: (x, y, z) -> (x, -z, y)). */
static int apply_def(const dsEnvDef* def, dsArticModel* am, char* err, size_t errlen) {
  const double g[3] = {def->gravity[0], -def->gravity[2], def->gravity[1]};
  const double c[4] = {def->contact_ke, def->contact_kd, def->contact_kf, def->contact_mu};
  static const char* const gn[3] = {"gravity.x", "gravity.y", "gravity.z"};
  static const char* const cn[4] = {"contact.ke", "contact.kd", "contact.kf", "contact.mu"};
  int rc = 0;
  for (int k = 0; k < 3 && !rc; k++) rc = ds_artic_param_set(am, gn[k], g[k]);
  for (int k = 0; k < 4 && !rc && def->ground; k++) rc = ds_artic_param_set(am, cn[k], c[k]);
  /* the first parameter named joint.*.anchor_parent.x is body 0's (a root) */
  const double s[3] = {def->start[0], -def->start[2], def->start[1]};
  for (int i = 0; i < ds_artic_nparam(am) && !rc; i++) {
    const char* nm = ds_artic_param_name(am, i);
    const size_t len = strlen(nm), suf = strlen(".anchor_parent.x");
    if (strncmp(nm, "joint.", 6) || len < suf || strcmp(nm + len - suf, ".anchor_parent.x")) continue;
    char base[128];
    snprintf(base, sizeof base, "%.*s", (int)(len - 1), nm);
    for (int k = 0; k < 3 && !rc; k++) {
      char pn[160];
      double v = 0;
      snprintf(pn, sizeof pn, "%s%c", base, 'x' + k);
      rc = ds_artic_param_get(am, pn, &v);
      if (!rc) rc = ds_artic_param_set(am, pn, v + s[k]);
    }
    break;
  }
  if (rc) snprintf(err, errlen, "gravity, contact or start out of the model's range");
  return rc;
}

static int load_model(const dsEnvDef* def, const dsRunnerParams* p, dsArticModel** out, char* err, size_t errlen) {
  char path[RUN_PATH_MAX];
  int rc = find_model(p->model, path, sizeof path, err, errlen);
  if (rc) return rc;
  dsArticOptions o = ds_artic_default_options();
  o.dt = def->dt;
  o.ground = def->ground;
  char lerr[512] = "";
  rc = ds_artic_load(path, &o, out, lerr, sizeof lerr);
  if (rc) {
    snprintf(err, errlen, "scene.model: %s", lerr);
    return rc;
  }
  if (ds_artic_dt(*out) != def->dt) {
    snprintf(err, errlen, "physics.dt %g differs from the timestep of %s (%g): set physics.dt to it", (double)def->dt,
             p->model, ds_artic_dt(*out));
    rc = DS_ERR_CONFIG;
  } else if (ds_artic_nu(*out) < 1) {
    snprintf(err, errlen, "%s has no actuators (expected at least one motor)", p->model);
    rc = DS_ERR_CONFIG;
  } else {
    rc = apply_def(def, *out, err, errlen);
  }
  if (rc) {
    ds_artic_model_free(*out);
    *out = NULL;
  }
  return rc;
}

/* A capsule about the segment a..b of radius r: two hemispheres of nseg/2
 * bands (nseg around) joined by a cylinder; a lone sphere when a == b. */
static void capsule(dsMesh* m, dsReal* x, int* tri, const double a[3], const double b[3], double r, int nseg) {
  double ax[3] = {b[0] - a[0], b[1] - a[1], b[2] - a[2]}, len = 0;
  for (int k = 0; k < 3; k++) len += ax[k] * ax[k];
  len = sqrt(len);
  if (len > 0)
    for (int k = 0; k < 3; k++) ax[k] /= len;
  else
    ax[0] = ax[1] = 0, ax[2] = 1;
  /* u, v: an orthonormal pair across ax */
  double u[3] = {0, 0, 0}, v[3];
  u[fabs(ax[0]) < 0.9 ? 0 : 1] = 1;
  double d = u[0] * ax[0] + u[1] * ax[1] + u[2] * ax[2], un = 0;
  for (int k = 0; k < 3; k++) u[k] -= d * ax[k], un += u[k] * u[k];
  for (int k = 0; k < 3; k++) u[k] /= sqrt(un);
  v[0] = ax[1] * u[2] - ax[2] * u[1], v[1] = ax[2] * u[0] - ax[0] * u[2], v[2] = ax[0] * u[1] - ax[1] * u[0];
  /* rings from the b pole (latitude i = 1) to the a pole (i = nseg - 1):
     nseg/2 - 1 rings per cap plus each cap's equator, so nseg rings */
  const int nlat = nseg / 2, nring = nseg, bot = 1 + nring * nseg;
  for (int k = 0; k < 3; k++) x[k] = (dsReal)(b[k] + r * ax[k]), x[3 * bot + k] = (dsReal)(a[k] - r * ax[k]);
  for (int i = 0; i < nring; i++) {
    /* rings 0 .. nlat-1 on b's cap (its equator last), then a's from its
       equator; lat: the angle from the pole's direction (+ax at b) */
    const int top = i < nlat;
    const double lat = top ? RUN_PI / 2 * (i + 1) / nlat : RUN_PI / 2 * (1 + (double)(i - nlat) / nlat);
    const double* c = top ? b : a;
    for (int j = 0; j < nseg; j++) {
      const double ph = 2 * RUN_PI * j / nseg, ca = r * cos(lat), sa = r * sin(lat);
      dsReal* pp = x + 3 * (1 + i * nseg + j);
      for (int k = 0; k < 3; k++) pp[k] = (dsReal)(c[k] + ca * ax[k] + sa * (cos(ph) * u[k] + sin(ph) * v[k]));
    }
  }
  int nt = 0;
  for (int j = 0; j < nseg; j++) {
    const int j1 = (j + 1) % nseg;
    int* t = tri + 3 * nt++;
    t[0] = 0, t[1] = 1 + j, t[2] = 1 + j1;
    for (int i = 0; i + 1 < nring; i++) {
      const int a0 = 1 + i * nseg + j, a1 = 1 + i * nseg + j1, b0 = a0 + nseg, b1 = a1 + nseg;
      t = tri + 3 * nt++;
      t[0] = a0, t[1] = b0, t[2] = b1;
      t = tri + 3 * nt++;
      t[0] = a0, t[1] = b1, t[2] = a1;
    }
    t = tri + 3 * nt++;
    t[0] = bot, t[1] = 1 + (nring - 1) * nseg + j1, t[2] = 1 + (nring - 1) * nseg + j;
  }
  /* counter-clockwise seen from outside: each triangle's normal points away
     from the segment (its nearest point on a..b) */
  for (int q = 0; q < nt; q++) {
    int* t = tri + 3 * q;
    double p3[3][3], cen[3] = {0, 0, 0};
    for (int k = 0; k < 3; k++)
      for (int c = 0; c < 3; c++) p3[k][c] = x[3 * t[k] + c], cen[c] += p3[k][c] / 3;
    double s = 0;
    for (int c = 0; c < 3; c++) s += (cen[c] - a[c]) * ax[c];
    s = s < 0 ? 0 : s > len ? len : s;
    double e1[3], e2[3], n[3], dd = 0;
    for (int c = 0; c < 3; c++) e1[c] = p3[1][c] - p3[0][c], e2[c] = p3[2][c] - p3[0][c];
    n[0] = e1[1] * e2[2] - e1[2] * e2[1], n[1] = e1[2] * e2[0] - e1[0] * e2[2], n[2] = e1[0] * e2[1] - e1[1] * e2[0];
    for (int c = 0; c < 3; c++) dd += n[c] * (cen[c] - (a[c] + s * ax[c]));
    if (dd < 0) {
      const int tmp = t[1];
      t[1] = t[2], t[2] = tmp;
    }
  }
  m->nvert = bot + 1;
  m->x = x;
  m->ntri = nt;
  m->tri = tri;
  m->ntet = 0;
  m->tet = NULL;
}

/* Spheres i and i + 1 form a capsule: same body and radius (a capsule's
 * end points are consecutive). */
static int pair_at(const dsArticModel* am, int i) {
  int b0, b1;
  double r0, r1;
  if (i + 1 >= ds_artic_nsphere(am)) return 0;
  ds_artic_sphere(am, i, &b0, NULL, &r0);
  ds_artic_sphere(am, i + 1, &b1, NULL, &r1);
  return b0 == b1 && r0 == r1;
}

/* Meshes of body `body`: its capsules (sphere pairs) and lone spheres. */
static int meshes_of(const dsArticModel* am, int body) {
  int n = 0;
  for (int i = 0; i < ds_artic_nsphere(am); i++) {
    int b;
    ds_artic_sphere(am, i, &b, NULL, NULL);
    n += b == body;
    i += pair_at(am, i);
  }
  return n;
}

/* One mesh per capsule or lone sphere; a link's mass shared by its meshes. */
static int add_meshes(dsBuilder* b, const dsArticModel* am, int nseg) {
  int rc = 0;
  for (int i = 0; i < ds_artic_nsphere(am) && rc >= 0; i++) {
    int body;
    double pa[3], pb[3], r;
    ds_artic_sphere(am, i, &body, pa, &r);
    const int pair = pair_at(am, i);
    if (pair) ds_artic_sphere(am, i + 1, NULL, pb, NULL);
    char pn[160];
    double mass = 1;
    snprintf(pn, sizeof pn, "body.%s.mass", ds_artic_body_name(am, body));
    ds_artic_param_get(am, pn, &mass);
    dsMesh m;
    dsReal x[3 * RUN_MAX_V];
    int tri[3 * RUN_MAX_T];
    capsule(&m, x, tri, pa, pair ? pb : pa, r, nseg);
    rc = ds_builder_add_artic_mesh(b, body, &m, NULL, (dsReal)(mass / meshes_of(am, body)));
    i += pair;
  }
  return rc;
}

static int build(dsEnv* e, dsBuilder* b) {
  const dsEnvDef* def = ds_env_def(e);
  const dsRunnerParams* p = (const dsRunnerParams*)ds_env_params(e);
  char err[768] = "";
  dsArticModel* am = NULL;
  int rc = load_model(def, p, &am, err, sizeof err);
  if (rc) return ds_env_set_errorf(e, rc, "%s: %s", def->cls->name, err);
  if (ds_artic_nsphere(am) < 1) {
    ds_artic_model_free(am);
    return ds_env_set_errorf(e, DS_ERR_CONFIG, "%s: %s has no geoms to draw (expected capsules or spheres)",
                             def->cls->name, p->model);
  }
  rc = ds_builder_set_artic(b, am, NULL, NULL);
  if (rc >= 0) rc = add_meshes(b, am, p->segments);
  ds_artic_model_free(am);
  return rc < 0 ? rc : 0;
}

const dsEnvClass ds__runner_class = {
    .name = "runner",
    .doc = "an articulated planar runner (configs/models/runner.xml): six motors, goal +2 m in x",
    .params_size = sizeof(dsRunnerParams),
    .keys = keys,
    .defaults = defaults,
    .validate = validate,
    .build = build,
    .action_size = ds_env_artic_action_size,
    .action_kind = DS_ACTION_PER_STEP,
    .action_fwd = ds_env_artic_action_fwd,
    .action_bwd = ds_env_artic_action_bwd,
    .metric_kind = DS_METRIC_DISPLACEMENT,
    .action_scale = 1,
};

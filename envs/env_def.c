/* Environment definitions: the registry of classes, the common defaults and
 * config keys every environment shares, validation, and the env section of a
 * config (parse, set by key, write back). The classes themselves are one file
 * each (envs/walker.c, control_fem.c, ...), listed once in envs/classes.h.
 *
 * The env section's key table is the common table merged with the class's,
 * group by group ("physics", "material", "contact", "scene", "gear", "goal",
 * "render", "camera", "camera2", "observation", "loss", then any group only the class
 * has), so that the written JSON has one object per group. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "envs/classes.h"
#include "envs/env_priv.h"

/* ---- registry ------------------------------------------------------------------ */
#define MAX_CLASSES 64
#define CLASS_PTR(c) &c,
static const dsEnvClass* g_classes[MAX_CLASSES] = {DS_ENV_CLASSES(CLASS_PTR)};
#undef CLASS_PTR
#define CLASS_ONE(c) +1
static int g_nclass = 0 DS_ENV_CLASSES(CLASS_ONE);
#undef CLASS_ONE

/* A class's own physics has every hook (dsEnvSim) but the optional ones;
 * the state hooks come together, and a window backward needs them. */
static int sim_ok(const dsEnvSim* s) {
  const int nstate = !!s->state_size + !!s->get_state + !!s->set_state;
  return s->tape_bytes && s->reset && s->step && s->keep_frame && s->render && s->goal && s->backward &&
         s->param_name && s->param && s->set_param && s->metric && (nstate == 0 || nstate == 3) &&
         (!s->backward_window || nstate == 3);
}

int ds_env_register(const dsEnvClass* c) {
  if (!c || !c->name || !c->name[0] || strlen(c->name) >= sizeof(((dsEnvParse*)0)->name) || !c->defaults ||
      !c->build || !c->action_size || (c->sim && !sim_ok(c->sim)) ||
      (!c->act_first && !c->sim && (!c->action_fwd || !c->action_bwd)) || c->params_size > DS_ENV_PARAMS_MAX ||
      (c->action_kind != DS_ACTION_PER_STEP && c->action_kind != DS_ACTION_INITIAL) ||
      (c->metric_kind != DS_METRIC_TARGET && c->metric_kind != DS_METRIC_DISPLACEMENT) || (!c->create != !c->destroy))
    return DS_ERR_INVALID;
  if (ds_env_class_find(c->name)) return DS_ERR_STATE;
  if (g_nclass >= MAX_CLASSES) return DS_ERR_RANGE;
  g_classes[g_nclass++] = c;
  return 0;
}

int ds_plugin_abi(void) { return DS_PLUGIN_ABI; }

const dsEnvClass* ds_env_class_find(const char* name) {
  if (!name) return NULL;
  for (int i = 0; i < g_nclass; i++)
    if (!strcmp(g_classes[i]->name, name)) return g_classes[i];
  return NULL;
}

int ds_env_class_count(void) { return g_nclass; }
const dsEnvClass* ds_env_class_at(int i) { return i >= 0 && i < g_nclass ? g_classes[i] : NULL; }

/* ---- common keys ------------------------------------------------------------------ */
#define O(f) offsetof(dsEnvDef, f)
#define END {NULL, DS_KEY_REAL, 0, 0, 0, NULL, 0, NULL}

static const dsConfigKey g_common[] = {
    {"physics.dt", DS_KEY_REAL, O(dt), 1e-7, 0.1, NULL, 0, "substep, s"},
    {"physics.substeps", DS_KEY_INT, O(substeps), 1, 10000000, NULL, 0, "episode horizon, substeps"},
    {"physics.control_interval", DS_KEY_INT, O(control_interval), 1, 10000000, NULL, 0,
     "substeps per step (the action is held)"},
    {"physics.render_interval", DS_KEY_INT, O(render_interval), 1, 10000000, NULL, 0, "substeps between rendered frames"},
    {"physics.render_last", DS_KEY_BOOL, O(render_last), 0, 1, NULL, 0, "also render the final substep"},
    {"physics.gravity", DS_KEY_VEC3, O(gravity), -1e4, 1e4, NULL, 0, "gravity, m/s^2"},
    {"physics.ground", DS_KEY_BOOL, O(ground), 0, 1, NULL, 0, "ground-plane contact at y = 0"},
    {"physics.checkpoint_every", DS_KEY_INT, O(checkpoint_every), 0, 1000000, NULL, 0,
     "tape: 1 = every state, K > 1 = every K-th state (recompute in backward)"},
    {"physics.integrator", DS_KEY_ENUM, O(integrator), 0, 0, "semi_implicit|implicit", 0,
     "time integrator: semi-implicit Euler, or backward Euler by Newton's method (docs/integrators.md; particle "
     "models, no rigid bodies; contact.kd 0 or contact.smooth > 0 advised)"},
    {"physics.newton_tol", DS_KEY_REAL, O(solver.newton_tol), 1e-300, 1, NULL, 0,
     "implicit: Newton's relative residual tolerance"},
    {"physics.newton_max_iter", DS_KEY_INT, O(solver.newton_max_iter), 1, 100000, NULL, 0,
     "implicit: Newton iterations before a substep fails"},
    {"physics.cg_tol", DS_KEY_REAL, O(solver.cg_tol), 1e-300, 1, NULL, 0,
     "implicit: tightest relative residual of Newton's linear solves (PCG, BiCGSTAB; each stops at its "
     "Eisenstat-Walker forcing term, at most 0.1, never below this)"},
    {"physics.cg_max_iter", DS_KEY_INT, O(solver.cg_max_iter), 1, 10000000, NULL, 0,
     "implicit: iteration cap of every linear solve"},
    {"physics.adjoint_tol", DS_KEY_REAL, O(solver.adjoint_tol), 1e-300, 1, NULL, 0,
     "implicit: relative residual of the adjoint's transposed solve (BiCGSTAB)"},
    {"physics.jacobian_memory", DS_KEY_INT, O(jacobian_mib), 0, 1048576, NULL, 0,
     "implicit: MiB for the Jacobians the forward keeps for the backward (each substep's matrix at its start "
     "state, which the adjoint of the substep before solves with; the backward assembles those not kept, the "
     "same bits either way); 0: none"},
    {"physics.gradients", DS_KEY_BOOL, O(gradients), 0, 1, NULL, 0,
     "keep the tape for gradients (false: forward only, no tape; the backward is refused)"},
    {"physics.batched_engine", DS_KEY_BOOL, O(batch_engine), 0, 1, NULL, 0,
     "the batched engine (what a CUDA device runs) on the CPU too: comparisons and tests; slower than the CPU "
     "engine"},
    {"contact.ke", DS_KEY_REAL, O(contact_ke), 0, DS_KEY_MAX, NULL, 0, "normal stiffness, N/m"},
    {"contact.kd", DS_KEY_REAL, O(contact_kd), 0, DS_KEY_MAX, NULL, 0, "normal damping, N s/m"},
    {"contact.kf", DS_KEY_REAL, O(contact_kf), 0, DS_KEY_MAX, NULL, 0, "friction viscosity, N s/m"},
    {"contact.mu", DS_KEY_REAL, O(contact_mu), 0, 100, NULL, 0, "Coulomb coefficient"},
    {"contact.skin", DS_KEY_REAL, O(contact_skin), 0, 10, NULL, 0, "contact skin, m"},
    {"contact.smooth", DS_KEY_REAL, O(contact_smooth), 0, 10, NULL, 0,
     "width over which the approach damping kd switches on inside the skin, m (0: a step at the skin; > 0 lets "
     "the implicit integrator's Newton pass it; docs/integrators.md); rigid bodies: also friction's cap through a "
     "tanh (engine/rigid.h)"},
    {"scene.start", DS_KEY_VEC3, O(start), -1e6, 1e6, NULL, 0, "translation of the body at substep 0, m"},
    {"scene.velocity", DS_KEY_VEC3, O(velocity), -1e6, 1e6, NULL, 0, "initial velocity, m/s"},
    {"goal.x_min", DS_KEY_REAL, O(goal_x_min), -1e6, 1e6, NULL, 0, "target x ~ U[x_min, x_max), m"},
    {"goal.x_max", DS_KEY_REAL, O(goal_x_max), -1e6, 1e6, NULL, 0, "m"},
    {"goal.y", DS_KEY_REAL, O(goal_y), -1e6, 1e6, NULL, 0, "target y, m"},
    {"goal.z", DS_KEY_REAL, O(goal_z), -1e6, 1e6, NULL, 0, "target z, m"},
    {"goal.relative", DS_KEY_BOOL, O(goal_relative), 0, 1, NULL, 0, "target relative to the start centre of mass"},
    {"render.width", DS_KEY_INT, O(width), 1, 8192, NULL, 0, "image width, pixels"},
    {"render.height", DS_KEY_INT, O(height), 1, 8192, NULL, 0, "image height, pixels"},
    {"render.supersample", DS_KEY_INT, O(supersample), 1, 8, NULL, 0, "supersampling factor"},
    {"render.sigma", DS_KEY_REAL, O(sigma), 1e-12, 10, NULL, 0, "SoftRas sharpness, NDC^2"},
    {"render.gamma", DS_KEY_REAL, O(gamma), 1e-12, 10, NULL, 0, "SoftRas depth temperature"},
    {"render.color", DS_KEY_VEC3, O(color), 0, 1, NULL, 0, "face colour RGB"},
    {"render.ambient", DS_KEY_REAL, O(ambient), 0, 10, NULL, 0, "ambient light"},
    {"render.directional", DS_KEY_REAL, O(directional), 0, 10, NULL, 0, "directional light factor"},
    {"render.light_dir", DS_KEY_VEC3, O(light_dir), -1e6, 1e6, NULL, 0,
     "direction towards the directional light (normalised); [0, 0, 0]: a headlight (a point light at the eye)"},
    {"camera.distance", DS_KEY_REAL, O(cam_distance), 1e-6, 1e6, NULL, 0, "eye distance to the look-at point, m"},
    {"camera.elevation", DS_KEY_REAL, O(cam_elevation), -89.9, 89.9, NULL, 0, "degrees"},
    {"camera.azimuth", DS_KEY_REAL, O(cam_azimuth), -360, 360, NULL, 0, "degrees"},
    {"camera.fov", DS_KEY_REAL, O(cam_fov), 1e-3, 179, NULL, 0, "vertical field of view, degrees"},
    {"camera.look_at", DS_KEY_VEC3, O(cam_look_at), -1e6, 1e6, NULL, 0,
     "the point looked at, m (distance, elevation and azimuth place the eye about it)"},
    {"camera.fx", DS_KEY_REAL, O(cam_fx), 0, 1e7, NULL, 0,
     "intrinsics: focal length along x, pixels (> 0: fx, fy, cx, cy replace fov; 0: fov)"},
    {"camera.fy", DS_KEY_REAL, O(cam_fy), 0, 1e7, NULL, 0, "intrinsics: focal length along y, pixels"},
    {"camera.cx", DS_KEY_REAL, O(cam_cx), -1e7, 1e7, NULL, 0,
     "intrinsics: principal point from the image's left edge, pixels (centred: width/2)"},
    {"camera.cy", DS_KEY_REAL, O(cam_cy), -1e7, 1e7, NULL, 0,
     "intrinsics: principal point from the image's top edge, pixels (centred: height/2)"},
    {"camera.near", DS_KEY_REAL, O(cam_near), 1e-6, 1e6, NULL, 0, "near plane, m"},
    {"camera.far", DS_KEY_REAL, O(cam_far), 1e-6, 1e9, NULL, 0, "far plane, m"},
    {"camera2.enabled", DS_KEY_BOOL, O(cam2), 0, 1, NULL, 0,
     "a second view in the image loss (sum over views): depth along the first camera's axis is seen"},
    {"camera2.distance", DS_KEY_REAL, O(cam2_distance), 1e-6, 1e6, NULL, 0, "second view: eye distance to camera.look_at, m"},
    {"camera2.elevation", DS_KEY_REAL, O(cam2_elevation), -89.9, 89.9, NULL, 0, "second view: degrees"},
    {"camera2.azimuth", DS_KEY_REAL, O(cam2_azimuth), -360, 360, NULL, 0, "second view: degrees"},
    {"observation.state", DS_KEY_ENUM, O(obs_state), 0, 0, "none|full|com|joints", 0,
     "state vector: none, positions+velocities, centre of mass+mean velocity, or an articulation's joint "
     "coordinates q then velocities qd"},
    {"observation.image", DS_KEY_BOOL, O(obs_image), 0, 1, NULL, 0, "RGBA image at every step"},
    {"loss.kind", DS_KEY_ENUM, O(loss_kind), 0, 0, "image_last|image_sum|com", 0, "built-in loss"},
    {"loss.image", DS_KEY_ENUM, O(image_loss), 0, 0, "mse|l1|dssim|l2_dssim", 0, "per-frame image loss (l2_dssim: 0.1 mse + 0.9 dssim)"},
    {"loss.levels", DS_KEY_INT, O(loss_levels), 1, DS_LOSS_MAX_LEVELS, NULL, 0, "image pyramid levels"},
    {"loss.moments", DS_KEY_REAL, O(loss_moments), 0, 1e6, NULL, 0,
     "weight of the alpha-moments (centroid and size) term"},
    {"loss.moments_size", DS_KEY_REAL, O(loss_moments_size), 0, 1e6, NULL, 0, "relative weight of its size part"},
    {"loss.reward", DS_KEY_ENUM, O(reward_kind), 0, 0, "sparse|dense", 0,
     "RL reward of a step: sparse (minus the loss terms of the step) or dense (the step's progress: forward "
     "displacement, or decrease of the distance to the target)"},
    END};

const dsConfigKey* ds_env_common_keys(void) { return g_common; }

/* The fields every class starts from (docs/scenes.md "Common settings").
 * Rendering, camera and loss defaults are the renderer's and the image
 * loss's own (ds_default_render_settings, ds_default_camera,
 * ds_default_loss_def): defined there once. */
static void common_defaults(dsEnvDef* d) {
  memset(d, 0, sizeof *d);
  const dsRenderSettings rs = ds_default_render_settings();
  const dsLossDef ld = ds_default_loss_def();
  d->dt = (dsReal)(1.0 / 1920.0);
  d->substeps = 1920;
  d->control_interval = 32;
  d->render_interval = 60;
  d->render_last = 0;
  d->gravity[1] = (dsReal)-9.8;
  d->ground = 1;
  d->checkpoint_every = 1;
  d->jacobian_mib = 64;
  d->gradients = 1;
  d->contact_ke = 1e4;
  d->contact_kd = 1e3;
  d->contact_kf = 1e3;
  d->contact_mu = 0.5;
  d->contact_skin = 0.01;
  d->width = rs.width;
  d->height = rs.height;
  d->supersample = rs.supersample;
  d->sigma = rs.sigma;
  d->gamma = rs.gamma;
  d->color[0] = d->color[1] = d->color[2] = 0.5;
  d->ambient = rs.ambient;
  d->directional = rs.directional;
  d->light_dir[0] = d->light_dir[1] = d->light_dir[2] = 0; /* headlight */
  d->cam_distance = 10;
  d->cam2 = 0;
  d->cam2_distance = 20;
  d->cam2_elevation = 80;
  d->cam2_azimuth = 0;
  d->cam_elevation = 30;
  d->cam_fov = rs.camera.fov_deg;
  d->cam_near = rs.camera.znear;
  d->cam_far = rs.camera.zfar;
  d->integrator = DS_INTEGRATOR_SEMI_IMPLICIT;
  d->solver = ds_default_solver_settings();
  d->obs_state = DS_OBS_STATE_COM;
  d->obs_image = 0;
  d->loss_kind = DS_ENV_LOSS_IMAGE_LAST;
  d->image_loss = ld.kind;
  d->loss_levels = ld.levels;
  d->loss_moments = ld.moments_weight;
  d->loss_moments_size = ld.moments_size;
}

dsEnvDef ds_default_env_def(const char* name) {
  dsEnvDef d;
  common_defaults(&d);
  d.cls = ds_env_class_find(name);
  if (d.cls) d.cls->defaults(&d);
  return d;
}

void* ds_env_def_params(dsEnvDef* def) { return def ? def->params.bytes : NULL; }

/* ---- key table ------------------------------------------------------------------------ */
static int group_len(const char* path) {
  const char* dot = strchr(path, '.');
  return dot ? (int)(dot - path) : 0;
}

static int in_group(const char* path, const char* group, int glen) {
  return group_len(path) == glen && !strncmp(path, group, (size_t)glen);
}

int ds__env_key_table(const dsEnvClass* cls, dsConfigKey* tab, int cap) {
  static const char* const order[] = {"physics", "material", "contact", "scene", "gear", "goal",
                                      "render",  "camera",   "camera2",  "observation", "loss"};
  const size_t poff = offsetof(dsEnvDef, params);
  const dsConfigKey* ck = cls ? cls->keys : NULL;
  int n = 0;
  if (n >= cap) return DS_ERR_RANGE;
  tab[n++] = (dsConfigKey){"name", DS_KEY_STRING, offsetof(dsEnvParse, name), 0, 64, NULL, 0, "environment class"};
  /* groups in the fixed order, then the class's other groups by first use */
  const char* groups[64];
  int glens[64], ng = 0;
  for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
    groups[ng] = order[i];
    glens[ng++] = (int)strlen(order[i]);
  }
  for (const dsConfigKey* k = ck; k && k->path; k++) {
    int gl = group_len(k->path), seen = 0;
    for (int g = 0; g < ng; g++) seen |= glens[g] == gl && !strncmp(groups[g], k->path, (size_t)gl);
    if (!seen && ng < 64) {
      groups[ng] = k->path;
      glens[ng++] = gl;
    }
  }
  for (int g = 0; g < ng; g++) {
    for (const dsConfigKey* k = g_common; k->path; k++)
      if (in_group(k->path, groups[g], glens[g])) {
        if (n + 1 >= cap) return DS_ERR_RANGE;
        tab[n++] = *k;
      }
    for (const dsConfigKey* k = ck; k && k->path; k++)
      if (in_group(k->path, groups[g], glens[g])) {
        if (n + 1 >= cap) return DS_ERR_RANGE;
        tab[n] = *k;
        tab[n].offset += poff;
        if (k->type == DS_KEY_REALS) tab[n].aux_offset += poff;
        n++;
      }
  }
  tab[n] = (dsConfigKey){NULL, DS_KEY_REAL, 0, 0, 0, NULL, 0, NULL};
  return n;
}

/* ---- validation ------------------------------------------------------------------------ */
/* Every key's type and range (the key table: the same check as a config
 * file's), then what the ranges cannot express, then the class's own
 * cross-field checks. Messages name the key path from "env.". */
int ds__env_validate_def(const dsEnvDef* f, dsErrBuf* eb) {
  if (!f->cls) return ds__seterr(eb, DS_ERR_INVALID, "env: no environment class (unknown name?)");
  dsConfigKey tab[DS__ENV_MAX_KEYS];
  if (ds__env_key_table(f->cls, tab, DS__ENV_MAX_KEYS) < 0)
    return ds__seterr(eb, DS_ERR_RANGE, "env: environment %s has too many keys", f->cls->name);
  dsEnvParse p;
  memset(&p, 0, sizeof p);
  p.def = *f;
  char m[DS_ERRMSG_LEN];
  int rc = ds_config_check("env", "env", tab + 1, &p, sizeof p, m, sizeof m);
  if (rc) return ds__seterr(eb, DS_ERR_RANGE, "%s", !strncmp(m, "env: ", 5) ? m + 5 : m);
  if (f->goal_x_max < f->goal_x_min)
    return ds__seterr(eb, DS_ERR_RANGE, "env.goal.x_max: must be >= env.goal.x_min (%g), got %g", (double)f->goal_x_min,
                      (double)f->goal_x_max);
  if (!(f->cam_far > f->cam_near))
    return ds__seterr(eb, DS_ERR_RANGE, "env.camera.far: must be > env.camera.near (%g), got %g", (double)f->cam_near,
                      (double)f->cam_far);
  if (f->cls->validate) {
    char msg[DS_ERRMSG_LEN] = "";
    rc = f->cls->validate(f, msg, sizeof msg);
    if (rc) return ds__seterr(eb, rc, "env.%s", msg[0] ? msg : ds_strerror(rc));
  }
  return 0;
}

/* ---- parsing ------------------------------------------------------------------------------ */
static void class_names(char* out, size_t n) {
  size_t k = 0;
  out[0] = '\0';
  for (int i = 0; i < g_nclass; i++) {
    int w = snprintf(out + k, n - k, "%s%s", i ? ", " : "", g_classes[i]->name);
    if (w < 0 || (size_t)w >= n - k) break;
    k += (size_t)w;
  }
}

static int env_parse(const char* file, const char* text, dsEnvDef* def, dsErrBuf* eb) {
  char m[DS_ERRMSG_LEN];
  int rc = ds_config_check_top(file, text, m, sizeof m);
  if (rc) return ds__seterr(eb, rc, "%s", m);
  char name[64];
  rc = ds_config_peek_string(text, "env", "name", name, sizeof name);
  if (rc == DS_ERR_PARSE) return ds__seterr(eb, DS_ERR_PARSE, "%s: invalid JSON", file);
  char names[512];
  class_names(names, sizeof names);
  if (rc == DS_ERR_RANGE)
    return ds__seterr(eb, DS_ERR_CONFIG, "%s: env.name: expected a string, one of: %s", file, names);
  if (rc) return ds__seterr(eb, DS_ERR_CONFIG, "%s: missing key \"env.name\" (expected one of: %s)", file, names);
  const dsEnvClass* cls = ds_env_class_find(name);
  if (!cls)
    return ds__seterr(eb, DS_ERR_CONFIG, "%s: env.name: unknown environment \"%s\" (expected one of: %s)", file, name,
                      names);
  dsConfigKey tab[DS__ENV_MAX_KEYS];
  if (ds__env_key_table(cls, tab, DS__ENV_MAX_KEYS) < 0)
    return ds__seterr(eb, DS_ERR_RANGE, "%s: environment %s has too many keys", file, name);
  dsEnvParse p;
  memset(&p, 0, sizeof p);
  p.def = ds_default_env_def(name);
  snprintf(p.name, sizeof p.name, "%s", name);
  rc = ds_config_parse_section(file, text, "env", tab, &p, sizeof p, m, sizeof m);
  if (rc) return ds__seterr(eb, rc, "%s", m);
  rc = ds__env_validate_def(&p.def, eb);
  if (rc) {
    char msg[DS_ERRMSG_LEN];
    snprintf(msg, sizeof msg, "%s", ds__errmsg(eb));
    return ds__seterr(eb, DS_ERR_CONFIG, "%s: %s", file, msg);
  }
  *def = p.def;
  return 0;
}

int ds_env_def_from_text(const char* name, const char* text, dsEnvDef* def, char* err, size_t errlen) {
  if (err && errlen) err[0] = '\0';
  if (!name || !text || !def) return DS_ERR_INVALID;
  dsErrBuf eb;
  ds__clearerr(&eb);
  int rc = env_parse(name, text, def, &eb);
  if (rc && err && errlen) snprintf(err, errlen, "%s", ds__errmsg(&eb));
  return rc;
}

int ds_env_def_set(dsEnvDef* def, const char* key, const char* value, char* err, size_t errlen) {
  if (err && errlen) err[0] = '\0';
  if (!def || !key || !value) return DS_ERR_INVALID;
  dsConfigKey tab[DS__ENV_MAX_KEYS];
  if (ds__env_key_table(def->cls, tab, DS__ENV_MAX_KEYS) < 0) return DS_ERR_RANGE;
  dsEnvParse p;
  memset(&p, 0, sizeof p);
  p.def = *def;
  if (def->cls) snprintf(p.name, sizeof p.name, "%s", def->cls->name);
  char m[DS_ERRMSG_LEN] = "";
  int rc = DS_ERR_CONFIG;
  if (!strcmp(key, "name"))
    snprintf(m, sizeof m, "env.name: the class is chosen by ds_default_env_def");
  else
    rc = ds_config_set("env", "env", tab + 1, &p, sizeof p, key, value, m, sizeof m);
  if (!rc) *def = p.def;
  /* the message names the key path already ("env.material.k_mu: ..."): drop the source */
  const char* msg = !strncmp(m, "env: ", 5) ? m + 5 : m;
  if (rc && err && errlen) snprintf(err, errlen, "%s", msg);
  return rc;
}

/* ---- writing ------------------------------------------------------------------------------- */
typedef struct Out {
  char* buf;
  size_t cap, n;
} Out;

static void put(Out* o, const char* fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void put(Out* o, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char* dst = o->buf && o->n < o->cap ? o->buf + o->n : NULL;
  size_t room = dst ? o->cap - o->n : 0;
  int w = vsnprintf(dst, room, fmt, ap);
  va_end(ap);
  if (w > 0) o->n += (size_t)w;
}

/* shortest of %.15g / %.16g / %.17g that reads back exactly */
static void put_num(Out* o, double v, int is_real) {
  char s[40];
  for (int p = 15; p <= 17; p++) {
    snprintf(s, sizeof s, "%.*g", p, v);
    if (is_real ? (dsReal)strtod(s, NULL) == (dsReal)v : strtod(s, NULL) == v) break;
  }
  put(o, "%s", s);
}

/* s[0..n) as a JSON string: '"', '\\' and the control characters escaped (RFC 8259 section 7),
 * every other byte (UTF-8 included) as it is, so that cJSON reads back the same bytes */
static void put_str(Out* o, const char* s, size_t n) {
  put(o, "\"");
  for (size_t i = 0; i < n; i++) {
    const unsigned char ch = (unsigned char)s[i];
    const char* esc = ch == '"' ? "\\\"" : ch == '\\' ? "\\\\" : ch == '\n' ? "\\n" : ch == '\t' ? "\\t"
                    : ch == '\r' ? "\\r" : ch == '\b' ? "\\b" : ch == '\f' ? "\\f" : NULL;
    if (esc)
      put(o, "%s", esc);
    else if (ch < 0x20)
      put(o, "\\u%04x", ch);
    else
      put(o, "%c", ch);
  }
  put(o, "\"");
}

static void put_value(Out* o, const dsConfigKey* f, const void* src) {
  const char* p = (const char*)src + f->offset;
  switch (f->type) {
    case DS_KEY_REAL: put_num(o, (double)*(const dsReal*)p, 1); break;
    case DS_KEY_DOUBLE: put_num(o, *(const double*)p, 0); break;
    case DS_KEY_INT: put(o, "%d", *(const int*)p); break;
    case DS_KEY_U64: put(o, "%llu", (unsigned long long)*(const uint64_t*)p); break;
    case DS_KEY_BOOL: put(o, "%s", *(const int*)p ? "true" : "false"); break;
    case DS_KEY_STRING: put_str(o, p, strlen(p)); break;
    case DS_KEY_ENUM: {
      int idx = *(const int*)p;
      const char* s = f->choices;
      for (int i = 0; i < idx && s; i++) {
        s = strchr(s, '|');
        if (s) s++;
      }
      size_t len = s ? (strchr(s, '|') ? (size_t)(strchr(s, '|') - s) : strlen(s)) : 0;
      put_str(o, s ? s : "", len);
      break;
    }
    case DS_KEY_VEC3:
    case DS_KEY_DVEC3:
      put(o, "[");
      for (int i = 0; i < 3; i++) {
        if (i) put(o, ", ");
        if (f->type == DS_KEY_VEC3)
          put_num(o, (double)((const dsReal*)p)[i], 1);
        else
          put_num(o, ((const double*)p)[i], 0);
      }
      put(o, "]");
      break;
    case DS_KEY_REALS: {
      const int n = *(const int*)((const char*)src + f->aux_offset);
      put(o, "[");
      for (int i = 0; i < n; i++) {
        if (i) put(o, ", ");
        put_num(o, (double)((const dsReal*)p)[i], 1);
      }
      put(o, "]");
      break;
    }
  }
}

/* Members of the keys' object, one level of groups ("group.key"), indented. */
static void put_section(Out* o, const dsConfigKey* keys, const void* src, int ind) {
  char group[64] = "";
  int first = 1, first_in_group = 1;
  for (const dsConfigKey* f = keys; f->path; f++) {
    /* an empty list is written as absent (a list key takes 1 or more values) */
    if (f->type == DS_KEY_REALS && *(const int*)((const char*)src + f->aux_offset) == 0) continue;
    const int gl = group_len(f->path);
    char g[64];
    snprintf(g, sizeof g, "%.*s", gl, f->path);
    const char* key = gl ? f->path + gl + 1 : f->path;
    if (strcmp(g, group)) {
      if (group[0]) put(o, "\n%*s}", ind, "");
      if (g[0]) {
        put(o, "%s\n%*s\"%s\": {", first ? "" : ",", ind, "", g);
        first = 0;
        first_in_group = 1;
      }
      snprintf(group, sizeof group, "%s", g);
    }
    if (g[0]) {
      put(o, "%s\n%*s\"%s\": ", first_in_group ? "" : ",", ind + 2, "", key);
      first_in_group = 0;
    } else {
      put(o, "%s\n%*s\"%s\": ", first ? "" : ",", ind, "", key);
      first = 0;
    }
    put_value(o, f, src);
  }
  if (group[0]) put(o, "\n%*s}", ind, "");
}

static int finish(Out* o, char* buf, size_t buflen) {
  if (buf && buflen && o->n >= buflen) buf[buflen - 1] = '\0';
  return o->n > 2147483647u ? DS_ERR_RANGE : (int)o->n;
}

int ds_config_write_section(const dsConfigKey* keys, const void* source, int indent, char* buf, size_t buflen) {
  if (!keys || !source || indent < 0) return DS_ERR_INVALID;
  Out o = {buf, buf ? buflen : 0, 0};
  if (buf && buflen) buf[0] = '\0';
  put_section(&o, keys, source, indent);
  return finish(&o, buf, buflen);
}

int ds_env_def_to_json(const dsEnvDef* def, char* buf, size_t buflen) {
  if (!def || !def->cls) return DS_ERR_INVALID;
  dsConfigKey tab[DS__ENV_MAX_KEYS];
  if (ds__env_key_table(def->cls, tab, DS__ENV_MAX_KEYS) < 0) return DS_ERR_RANGE;
  dsEnvParse p;
  memset(&p, 0, sizeof p);
  p.def = *def;
  snprintf(p.name, sizeof p.name, "%s", def->cls->name);
  Out o = {buf, buf ? buflen : 0, 0};
  if (buf && buflen) buf[0] = '\0';
  put(&o, "{\n  \"env\": {");
  put_section(&o, tab, &p, 4);
  put(&o, "\n  }\n}\n");
  return finish(&o, buf, buflen);
}

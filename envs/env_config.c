/* JSON configs of the environments: one strict key table per kind (io/cfg.h
 * does the checking and the messages), the "env" key picks the table, and
 * the reverse: a definition written back as a complete JSON config.
 *
 * Every table lists its keys grouped ("physics", "material", "contact",
 * "scene", "gear", "goal", "render", "camera", "observation", "loss",
 * "controller"), each group contiguous, so that ds_env_def_to_json can emit
 * nested objects in one pass. */
#include "config.h"

#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "envs/env_priv.h"
#include "io/cfg.h"

#define KINDS "walker|control-fem|control-cloth|walker-springs"
#define O(f) offsetof(dsEnvDef, f)
#define BIG 1e12
#define END {NULL, DS_CFG_REAL, 0, 0, 0, NULL, 0, NULL}

#define F_HEAD                                                                                          \
  {"env", DS_CFG_ENUM, O(kind), 0, 0, KINDS, 0, "environment"},                                         \
  {"seed", DS_CFG_INT, O(seed), 0, 2147483647.0, NULL, 0, "default episode seed of drivers"},

#define F_PHYSICS                                                                                       \
  {"physics.dt", DS_CFG_REAL, O(dt), 1e-7, 0.1, NULL, 0, "substep, s"},                                 \
  {"physics.substeps", DS_CFG_INT, O(substeps), 1, 10000000, NULL, 0, "episode horizon, substeps"},     \
  {"physics.control_interval", DS_CFG_INT, O(control_interval), 1, 10000000, NULL, 0,                   \
   "substeps per step (the action is held)"},                                                           \
  {"physics.render_interval", DS_CFG_INT, O(render_interval), 1, 10000000, NULL, 0,                     \
   "substeps between rendered frames"},                                                                 \
  {"physics.render_last", DS_CFG_BOOL, O(render_last), 0, 1, NULL, 0, "also render the final substep"}, \
  {"physics.gravity", DS_CFG_VEC3, O(gravity), -1e4, 1e4, NULL, 0, "gravity, m/s^2"},                   \
  {"physics.ground", DS_CFG_BOOL, O(ground), 0, 1, NULL, 0, "ground-plane contact at y = 0"},           \
  {"physics.checkpoint_every", DS_CFG_INT, O(checkpoint_every), 0, 1000000, NULL, 0,                    \
   "tape: 1 = every state, K > 1 = every K-th state (recompute in backward)"},

#define F_MASS {"material.particle_mass", DS_CFG_REAL, O(particle_mass), 1e-9, BIG, NULL, 0, "kg per particle"},
#define F_DENSITY {"material.density", DS_CFG_REAL, O(density), 1e-9, BIG, NULL, 0, "kg/m^3, lumped V/4 per vertex"},
#define F_ELASTIC(unit)                                                                         \
  {"material.k_mu", DS_CFG_REAL, O(k_mu), 0, BIG, NULL, 0, "shear stiffness density, " unit},   \
  {"material.k_lambda", DS_CFG_REAL, O(k_lambda), 1e-9, BIG, NULL, 0, "area/volume stiffness density, " unit}, \
  {"material.k_damp", DS_CFG_REAL, O(k_damp), 0, BIG, NULL, 0, "damping density"},
#define F_CLOTHMAT                                                                          \
  {"material.bend_ke", DS_CFG_REAL, O(bend_ke), 0, BIG, NULL, 0, "bending stiffness"},      \
  {"material.bend_kd", DS_CFG_REAL, O(bend_kd), 0, BIG, NULL, 0, "bending damping"},        \
  {"material.lift", DS_CFG_REAL, O(lift), 0, BIG, NULL, 0, "lift coefficient"},             \
  {"material.drag", DS_CFG_REAL, O(drag), 0, BIG, NULL, 0, "drag coefficient"},
#define F_SPRINGMAT                                                                             \
  {"material.spring_ke", DS_CFG_REAL, O(spring_ke), 0, BIG, NULL, 0, "spring stiffness, N/m"},  \
  {"material.spring_kd", DS_CFG_REAL, O(spring_kd), 0, BIG, NULL, 0, "spring damping, N s/m"},

#define F_CONTACT                                                                              \
  {"contact.ke", DS_CFG_REAL, O(contact_ke), 0, BIG, NULL, 0, "normal stiffness, N/m"},        \
  {"contact.kd", DS_CFG_REAL, O(contact_kd), 0, BIG, NULL, 0, "normal damping, N s/m"},        \
  {"contact.kf", DS_CFG_REAL, O(contact_kf), 0, BIG, NULL, 0, "friction viscosity, N s/m"},    \
  {"contact.mu", DS_CFG_REAL, O(contact_mu), 0, 100, NULL, 0, "Coulomb coefficient"},          \
  {"contact.skin", DS_CFG_REAL, O(contact_skin), 0, 10, NULL, 0, "contact skin, m"},

#define F_SCENE                                                                                       \
  {"scene.start", DS_CFG_VEC3, O(start), -1e6, 1e6, NULL, 0, "translation of the body at substep 0, m"}, \
  {"scene.velocity", DS_CFG_VEC3, O(velocity), -1e6, 1e6, NULL, 0, "initial velocity, m/s"},
#define F_CLOTHSCENE                                                                                   \
  {"scene.height_min", DS_CFG_REAL, O(height_min), -1e6, 1e6, NULL, 0, "drop height h ~ U[min, max), m"}, \
  {"scene.height_max", DS_CFG_REAL, O(height_max), -1e6, 1e6, NULL, 0, "m"},                           \
  {"scene.size_min", DS_CFG_INT, O(size_min), 1, 512, NULL, 0, "cells per side D ~ U{min..max}"},      \
  {"scene.size_max", DS_CFG_INT, O(size_max), 1, 512, NULL, 0, "cells per side"},                      \
  {"scene.cell", DS_CFG_REAL, O(cell), 1e-6, 1e3, NULL, 0, "cell size, m"},                            \
  {"scene.axis", DS_CFG_VEC3, O(axis), -1e6, 1e6, NULL, 0, "rotation axis (normalised)"},               \
  {"scene.angle", DS_CFG_REAL, O(angle), -100, 100, NULL, 0, "rotation angle, rad"},                   \
  {"scene.anchor", DS_CFG_ENUM, O(anchor), 0, 0, "centroid|corner", 0,                                 \
   "what start and the goal point place: the centroid or the grid corner"},
#define F_SPRINGSCENE {"scene.legs", DS_CFG_BOOL, O(legs), 0, 1, NULL, 0, "two legs under the body"},

#define F_GEAR                                                                                         \
  {"gear.teeth", DS_CFG_INT, O(gear.teeth), 3, 1000, NULL, 0, "number of teeth"},                      \
  {"gear.outer_radius", DS_CFG_REAL, O(gear.outer_radius), 1e-6, 1e6, NULL, 0, "tooth tip radius, m"}, \
  {"gear.root_radius", DS_CFG_REAL, O(gear.root_radius), 1e-6, 1e6, NULL, 0, "tooth root radius, m"},  \
  {"gear.hub_radius", DS_CFG_REAL, O(gear.hub_radius), 1e-6, 1e6, NULL, 0, "hole radius, m"},          \
  {"gear.half_thickness", DS_CFG_REAL, O(gear.half_thickness), 1e-6, 1e6, NULL, 0, "half extent in z, m"}, \
  {"gear.layers", DS_CFG_INT, O(gear.layers), 1, 1000, NULL, 0, "prism layers along z"},

#define F_GOAL                                                                                         \
  {"goal.x_min", DS_CFG_REAL, O(goal_x_min), -1e6, 1e6, NULL, 0, "target x ~ U[x_min, x_max), m"},     \
  {"goal.x_max", DS_CFG_REAL, O(goal_x_max), -1e6, 1e6, NULL, 0, "m"},                                 \
  {"goal.y", DS_CFG_REAL, O(goal_y), -1e6, 1e6, NULL, 0, "target y, m"},                               \
  {"goal.z", DS_CFG_REAL, O(goal_z), -1e6, 1e6, NULL, 0, "target z, m"},                               \
  {"goal.relative", DS_CFG_BOOL, O(goal_relative), 0, 1, NULL, 0, "target relative to the start centre of mass"},

#define F_RENDER                                                                                       \
  {"render.width", DS_CFG_INT, O(width), 1, 8192, NULL, 0, "image width, pixels"},                     \
  {"render.height", DS_CFG_INT, O(height), 1, 8192, NULL, 0, "image height, pixels"},                  \
  {"render.supersample", DS_CFG_INT, O(supersample), 1, 8, NULL, 0, "supersampling factor"},           \
  {"render.sigma", DS_CFG_REAL, O(sigma), 1e-12, 10, NULL, 0, "SoftRas sharpness, NDC^2"},             \
  {"render.gamma", DS_CFG_REAL, O(gamma), 1e-12, 10, NULL, 0, "SoftRas depth temperature"},            \
  {"render.color", DS_CFG_VEC3, O(color), 0, 1, NULL, 0, "face colour RGB"},                           \
  {"render.ambient", DS_CFG_REAL, O(ambient), 0, 10, NULL, 0, "ambient light"},                        \
  {"render.directional", DS_CFG_REAL, O(directional), 0, 10, NULL, 0, "directional light along +y"},

#define F_CAMERA                                                                                       \
  {"camera.distance", DS_CFG_REAL, O(cam_distance), 1e-6, 1e6, NULL, 0, "eye distance to the origin, m"}, \
  {"camera.elevation", DS_CFG_REAL, O(cam_elevation), -89.9, 89.9, NULL, 0, "degrees"},                \
  {"camera.azimuth", DS_CFG_REAL, O(cam_azimuth), -360, 360, NULL, 0, "degrees"},                      \
  {"camera.fov", DS_CFG_REAL, O(cam_fov), 1e-3, 179, NULL, 0, "vertical field of view, degrees"},      \
  {"camera.near", DS_CFG_REAL, O(cam_near), 1e-6, 1e6, NULL, 0, "near plane, m"},                      \
  {"camera.far", DS_CFG_REAL, O(cam_far), 1e-6, 1e9, NULL, 0, "far plane, m"},

#define F_OBS                                                                                          \
  {"observation.state", DS_CFG_ENUM, O(obs_state), 0, 0, "none|full|com", 0,                           \
   "state vector: none, positions+velocities, centre of mass+mean velocity"},                          \
  {"observation.image", DS_CFG_BOOL, O(obs_image), 0, 1, NULL, 0, "RGBA image at every step"},

#define F_LOSS                                                                                         \
  {"loss.kind", DS_CFG_ENUM, O(loss_kind), 0, 0, "image_last|image_sum|com", 0, "built-in loss"},      \
  {"loss.image", DS_CFG_ENUM, O(image_loss), 0, 0, "mse|l1|dssim", 0, "per-frame image loss"},         \
  {"loss.levels", DS_CFG_INT, O(loss_levels), 1, DS_LOSS_MAX_LEVELS, NULL, 0, "image pyramid levels"},     \
  {"loss.moments", DS_CFG_REAL, O(loss_moments), 0, 1e6, NULL, 0, "weight of the alpha-moments (centroid and size) term"}, \
  {"loss.moments_size", DS_CFG_REAL, O(loss_moments_size), 0, 1e6, NULL, 0, "relative weight of its size part"},

#define F_CTRL                                                                                         \
  {"controller.phases", DS_CFG_INT, O(ctrl_phases), 0, 1024, NULL, 0, "sinusoid inputs"},              \
  {"controller.omega", DS_CFG_REAL, O(ctrl_omega), 0, 1e6, NULL, 0, "angular frequency, rad/s"},       \
  {"controller.phase_step", DS_CFG_REAL, O(ctrl_phase_step), -100, 100, NULL, 0, "phase offset between inputs, rad"}, \
  {"controller.strength", DS_CFG_REAL, O(ctrl_strength), 0, 1e6, NULL, 0, "output scale"},             \
  {"controller.optimizer", DS_CFG_ENUM, O(ctrl_optimizer), 0, 0, "adam|sgd", 0, "optimiser"},          \
  {"controller.lr", DS_CFG_REAL, O(ctrl_lr), 0, 1e6, NULL, 0, "learning rate"},                        \
  {"controller.decay_every", DS_CFG_INT, O(ctrl_decay_every), 0, 100000000, NULL, 0,                    \
   "step decay: multiply the learning rate by decay_factor every N iterations (0: off)"},              \
  {"controller.decay_factor", DS_CFG_REAL, O(ctrl_decay_factor), 0, 1, NULL, 0, "step decay factor"},  \
  {"controller.momentum", DS_CFG_REAL, O(ctrl_momentum), 0, 0.999999, NULL, 0, "SGD momentum"},         \
  {"controller.clip", DS_CFG_REAL, O(ctrl_clip), 0, 1e30, NULL, 0, "gradient-norm clipping (0: off)"},   \
  {"controller.iterations", DS_CFG_INT, O(ctrl_iterations), 0, 100000000, NULL, 0, "optimisation iterations"},
#define F_CTRL_CLOTH {"controller.initial_velocity", DS_CFG_VEC3, O(ctrl_init), -1e6, 1e6, NULL, 0, "initial guess of the velocity action, m/s"},

static const dsCfgField walker_fields[] = {F_HEAD F_PHYSICS F_MASS F_ELASTIC("Pa m") F_CONTACT F_SCENE F_GOAL
                                               F_RENDER F_CAMERA F_OBS F_LOSS F_CTRL END};
static const dsCfgField fem_fields[] = {F_HEAD F_PHYSICS F_DENSITY F_ELASTIC("Pa") F_CONTACT F_SCENE F_GEAR F_GOAL
                                            F_RENDER F_CAMERA F_OBS F_LOSS F_CTRL END};
static const dsCfgField cloth_fields[] = {F_HEAD F_PHYSICS F_MASS F_ELASTIC("Pa m") F_CLOTHMAT F_CONTACT F_SCENE
                                              F_CLOTHSCENE F_GOAL F_RENDER F_CAMERA F_OBS F_LOSS F_CTRL F_CTRL_CLOTH END};
static const dsCfgField springs_fields[] = {F_HEAD F_PHYSICS F_MASS F_SPRINGMAT F_CONTACT F_SCENE F_SPRINGSCENE
                                                F_GOAL F_RENDER F_CAMERA F_OBS F_LOSS F_CTRL END};

static const dsCfgField* table_of(int kind) {
  switch (kind) {
    case DS_ENV_WALKER: return walker_fields;
    case DS_ENV_CONTROL_FEM: return fem_fields;
    case DS_ENV_CONTROL_CLOTH: return cloth_fields;
    case DS_ENV_WALKER_SPRINGS: return springs_fields;
    default: return NULL;
  }
}

int ds__env_parse(const char* name, const char* text, dsEnvDef* def, dsErrBuf* eb) {
  char kind_name[32];
  int rc = ds__cfg_peek_string(text, "env", kind_name, sizeof kind_name);
  int kind = -1;
  if (rc == 0)
    for (int k = 0; k < DS_ENV_KIND_COUNT; k++)
      if (!strcmp(kind_name, ds_env_kind_name(k))) kind = k;
  if (kind < 0) {
    /* invalid JSON, a bad "env" value or none: the control-fem table gives
     * the exact message for the first two */
    dsEnvDef tmp = ds_default_env_def(DS_ENV_CONTROL_FEM);
    tmp.kind = -1;
    rc = ds__cfg_parse(name, text, fem_fields, &tmp, sizeof tmp, eb);
    if (rc) return rc;
    if (tmp.kind < 0)
      return ds__seterr(eb, DS_ERR_CONFIG, "%s: missing key \"env\" (expected one of \"%s\")", name,
                        "walker,control-fem,control-cloth,walker-springs");
    kind = tmp.kind;
  }
  dsEnvDef d = ds_default_env_def(kind);
  rc = ds__cfg_parse(name, text, table_of(kind), &d, sizeof d, eb);
  if (rc) return rc;
  rc = ds__env_validate_def(&d, eb);
  if (rc) {
    char msg[DS_ERRMSG_LEN];
    snprintf(msg, sizeof msg, "%s", ds__errmsg(eb));
    return ds__seterr(eb, DS_ERR_CONFIG, "%s: %s", name, msg);
  }
  *def = d;
  return 0;
}

int ds_env_def_from_text(const char* name, const char* text, dsEnvDef* def, char* err, size_t errlen) {
  if (err && errlen) err[0] = '\0';
  if (!name || !text || !def) return DS_ERR_INVALID;
  dsErrBuf eb;
  ds__clearerr(&eb);
  int rc = ds__env_parse(name, text, def, &eb);
  if (rc && err && errlen) snprintf(err, errlen, "%s", ds__errmsg(&eb));
  return rc;
}

/* ---- writing ------------------------------------------------------------------ */
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
static void put_real(Out* o, dsReal v) {
  char s[40];
  for (int p = 15; p <= 17; p++) {
    snprintf(s, sizeof s, "%.*g", p, (double)v);
    if ((dsReal)strtod(s, NULL) == v) break;
  }
  /* keep JSON numbers recognisable as reals */
  put(o, "%s", s);
}

static void put_value(Out* o, const dsCfgField* f, const dsEnvDef* def) {
  const char* p = (const char*)def + f->offset;
  switch (f->type) {
    case DS_CFG_REAL: put_real(o, *(const dsReal*)p); break;
    case DS_CFG_INT: put(o, "%d", *(const int*)p); break;
    case DS_CFG_BOOL: put(o, "%s", *(const int*)p ? "true" : "false"); break;
    case DS_CFG_ENUM: {
      int idx = *(const int*)p;
      const char* s = f->choices;
      for (int i = 0; i < idx && s; i++) {
        s = strchr(s, '|');
        if (s) s++;
      }
      size_t len = s ? (strchr(s, '|') ? (size_t)(strchr(s, '|') - s) : strlen(s)) : 0;
      put(o, "\"%.*s\"", (int)len, s ? s : "");
      break;
    }
    case DS_CFG_VEC3: {
      const dsReal* v = (const dsReal*)p;
      put(o, "[");
      for (int i = 0; i < 3; i++) {
        if (i) put(o, ", ");
        put_real(o, v[i]);
      }
      put(o, "]");
      break;
    }
    default: put(o, "null"); break;
  }
}

int ds_env_def_to_json(const dsEnvDef* def, char* buf, size_t buflen) {
  if (!def) return DS_ERR_INVALID;
  const dsCfgField* t = table_of(def->kind);
  if (!t) return DS_ERR_INVALID;
  Out o = {buf, buf ? buflen : 0, 0};
  if (buf && buflen) buf[0] = '\0';
  put(&o, "{");
  char group[32] = "";
  int first = 1, first_in_group = 1;
  for (const dsCfgField* f = t; f->path; f++) {
    const char* dot = strchr(f->path, '.');
    char g[32] = "";
    const char* key = f->path;
    if (dot) {
      snprintf(g, sizeof g, "%.*s", (int)(dot - f->path), f->path);
      key = dot + 1;
    }
    if (strcmp(g, group)) {
      if (group[0]) put(&o, "\n  }");
      if (g[0]) {
        put(&o, "%s\n  \"%s\": {", first ? "" : ",", g);
        first = 0;
        first_in_group = 1;
      }
      snprintf(group, sizeof group, "%s", g);
    }
    if (g[0]) {
      put(&o, "%s\n    \"%s\": ", first_in_group ? "" : ",", key);
      first_in_group = 0;
    } else {
      put(&o, "%s\n  \"%s\": ", first ? "" : ",", key);
      first = 0;
    }
    put_value(&o, f, def);
  }
  if (group[0]) put(&o, "\n  }");
  put(&o, "\n}\n");
  if (buf && buflen && o.n >= buflen) buf[buflen - 1] = '\0';
  return o.n > 2147483647u ? DS_ERR_RANGE : (int)o.n;
}

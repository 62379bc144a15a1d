/* The bundled environment classes: one line each, in registry order (what
 * ds_env_class_at lists first). The registry (envs/env_def.c) is made from
 * this list; the CLI's usage text, the config tests and the docs' table
 * read the registry (ds_env_class_count, ds_env_class_at), so a new bundled
 * class is its file (a const dsEnvClass over dsim/env.h only, as a plugin
 * would write it), its configs/NAME.json, its docs entry and one line here.
 * Not installed. */
#ifndef DSIM_ENVS_CLASSES_H
#define DSIM_ENVS_CLASSES_H

#include "dsim/env.h"

/* X(the class object's name) */
#define DS_ENV_CLASSES(X)       \
  X(ds__walker_class)           \
  X(ds__control_fem_class)      \
  X(ds__control_cloth_class)    \
  X(ds__walker_springs_class)   \
  X(ds__rigid_toss_class)       \
  X(ds__beam_class)             \
  X(ds__pendulum_class)         \
  X(ds__double_pendulum_class) \
  X(ds__runner_class)            \
  X(ds__smoke_control_class)     \
  X(ds__smoke_plume_class)

#define DS__ENV_CLASS_DECL(c) extern const dsEnvClass c;
DS_ENV_CLASSES(DS__ENV_CLASS_DECL)
#undef DS__ENV_CLASS_DECL

#endif

/* The ABI table of include/dsim/abi.h. It sits in controllers/ because it
 * reaches the public headers of envs/ (dsEnvClass, the batch flags) and of
 * controllers/ (the run object's structs), which the include order lets
 * only controllers/ and cli/ do; the library's top area is controllers/.
 *
 * Three lists, one line per entry: ABI_STRUCTS (a struct and the fields a
 * binding mirrors), ABI_CONSTS (a public constant) and the error list of
 * dsim/base.h (every DS_ERR_* code, taken as it is). Mirroring a new field
 * or constant in a binding is one line here and one in the binding; the
 * binding's test (python/tests/test_abi.py) compares the two both ways. */
#include <stddef.h>
#include <string.h>

#include "dsim/abi.h"
#include "dsim/base.h"
#include "dsim/batch.h"
#include "dsim/env.h"
#include "dsim/run.h"
#include "dsim/runlog.h"
#include "dsim/sysid.h"

/* S(type) opens a struct, F(type, field) names one of its fields. */
#define ABI_STRUCTS(S, F)          \
  S(dsBuildInfo)                   \
  F(dsBuildInfo, version)          \
  F(dsBuildInfo, real_bytes)       \
  F(dsBuildInfo, openmp)           \
  F(dsBuildInfo, max_threads)      \
  F(dsBuildInfo, cuda)             \
  F(dsBuildInfo, cuda_devices)     \
  F(dsBuildInfo, hdf5)             \
  F(dsBuildInfo, gif)              \
  F(dsBuildInfo, hdf5_version)     \
  F(dsBuildInfo, cjson_version)    \
  F(dsBuildInfo, png_version)      \
  F(dsBuildInfo, options)          \
  S(dsConfigKey)                   \
  F(dsConfigKey, path)             \
  F(dsConfigKey, type)             \
  F(dsConfigKey, offset)           \
  F(dsConfigKey, min)              \
  F(dsConfigKey, max)              \
  F(dsConfigKey, choices)          \
  F(dsConfigKey, aux_offset)       \
  F(dsConfigKey, doc)              \
  S(dsEnvClass)                    \
  F(dsEnvClass, name)              \
  F(dsEnvClass, doc)               \
  F(dsEnvClass, params_size)       \
  F(dsEnvClass, keys)              \
  S(dsRunOptions)                  \
  F(dsRunOptions, log)             \
  F(dsRunOptions, overwrite)       \
  F(dsRunOptions, name)            \
  S(dsRunResult)                   \
  F(dsRunResult, iterations)       \
  F(dsRunResult, planned)          \
  F(dsRunResult, interrupted)      \
  F(dsRunResult, first_loss)       \
  F(dsRunResult, last_loss)        \
  F(dsRunResult, first_metric)     \
  F(dsRunResult, last_metric)      \
  F(dsRunResult, best_metric)      \
  F(dsRunResult, best_iteration)   \
  F(dsRunResult, low_loss)         \
  F(dsRunResult, low_metric)       \
  F(dsRunResult, low_iteration)    \
  F(dsRunResult, iteration_time)   \
  F(dsRunResult, nparams)          \
  F(dsRunResult, threads)          \
  F(dsRunResult, status)           \
  S(dsSysidFootage)                \
  F(dsSysidFootage, camera_file)   \
  F(dsSysidFootage, position)      \
  F(dsSysidFootage, look_at)       \
  F(dsSysidFootage, fov)           \
  F(dsSysidFootage, fx)            \
  F(dsSysidFootage, fy)            \
  F(dsSysidFootage, cx)            \
  F(dsSysidFootage, cy)            \
  F(dsSysidFootage, times)         \
  F(dsSysidFootage, frames_dir)    \
  F(dsSysidFootage, nframes)       \
  F(dsSysidFootage, width)         \
  F(dsSysidFootage, height)        \
  F(dsSysidFootage, rgba)          \
  S(dsSysidVideo)                  \
  F(dsSysidVideo, nframes)         \
  F(dsSysidVideo, width)           \
  F(dsSysidVideo, height)          \
  F(dsSysidVideo, substep)         \
  F(dsSysidVideo, rgba)            \
  F(dsSysidVideo, nviews)          \
  F(dsSysidVideo, views)           \
  S(dsSysidIter)                   \
  F(dsSysidIter, iteration)        \
  F(dsSysidIter, loss)             \
  F(dsSysidIter, grad_norm)        \
  F(dsSysidIter, values)           \
  F(dsSysidIter, evaluations)      \
  S(dsLandscapeAxis)               \
  F(dsLandscapeAxis, lo)           \
  F(dsLandscapeAxis, hi)           \
  F(dsLandscapeAxis, n)            \
  S(dsLandscapeDef)                \
  F(dsLandscapeDef, axis)          \
  F(dsLandscapeDef, geometric)     \
  F(dsLandscapeDef, object)        \
  F(dsLandscapeDef, threads)       \
  F(dsLandscapeDef, group)         \
  S(dsRunLogDef)                   \
  F(dsRunLogDef, config_text)      \
  F(dsRunLogDef, env)              \
  F(dsRunLogDef, method)           \
  F(dsRunLogDef, seed)             \
  F(dsRunLogDef, threads)          \
  F(dsRunLogDef, nparams)          \
  F(dsRunLogDef, substep_stride)   \
  F(dsRunLogDef, compression)      \
  F(dsRunLogDef, overwrite)        \
  F(dsRunLogDef, has_metric_goal)  \
  F(dsRunLogDef, metric_goal)      \
  S(dsRunIteration)                \
  F(dsRunIteration, loss)          \
  F(dsRunIteration, metric)        \
  F(dsRunIteration, wall_time)     \
  F(dsRunIteration, grad_norm)     \
  F(dsRunIteration, params)

/* Constants other than the error codes. */
#define ABI_CONSTS(C)       \
  C(DS_OK)                  \
  C(DS_ACTION_PER_STEP)     \
  C(DS_ACTION_INITIAL)      \
  C(DS_BATCH_AUTORESET)     \
  C(DS_BATCH_LOCKSTEP)      \
  C(DS_BATCH_STEPPED)       \
  C(DS_BATCH_RESET)         \
  C(DS_RUN_STATUS_MAX)      \
  C(DS_SYSID_MAX_PARAMS)

#define FIELD_SIZE(T, f) sizeof(((T*)0)->f)

/* The whole table as one list of ROW(name, value); ROW is defined at each
 * expansion. */
#define ABI_ROWS                                                        \
  ROW("sizeof:dsReal", sizeof(dsReal))                                  \
  ABI_STRUCTS(ROW_STRUCT, ROW_FIELD)                                    \
  ABI_CONSTS(ROW_CONST)                                                 \
  DS_ERRNO_ERRORS(ROW_ERR)
#define ROW_STRUCT(T) ROW("sizeof:" #T, sizeof(T))
#define ROW_FIELD(T, f) \
  ROW("offsetof:" #T "." #f, offsetof(T, f)) ROW("sizeof:" #T "." #f, FIELD_SIZE(T, f))
#define ROW_CONST(c) ROW("const:" #c, c)
#define ROW_ERR(name, val, msg) ROW("const:DS_ERR_" #name, DS_ERR_##name)

typedef struct AbiRow {
  const char* name;
  long long value;
} AbiRow;

#define ROW(n, v) {n, (long long)(v)},
static const AbiRow kRows[] = {ABI_ROWS};
#undef ROW
#define ROW(n, v) n,
static const char* const kNames[] = {ABI_ROWS NULL};
#undef ROW

int ds_abi_lookup(const char* name, long long* value) {
  if (!name || !value) return DS_ERR_INVALID;
  for (size_t i = 0; i < sizeof kRows / sizeof kRows[0]; i++)
    if (strcmp(kRows[i].name, name) == 0) {
      *value = kRows[i].value;
      return 0;
    }
  return DS_ERR_NOTFOUND;
}

const char* const* ds_abi_names(void) { return kNames; }

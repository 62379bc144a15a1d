/* dsim bundled data folders: where configs/NAME.json and the bundled models
 * (configs/models/) are read from. Part of the io area, so that env classes
 * (a model file named by a config) and the run layer (dsim/run.h, which
 * includes this header) share one search order.
 *
 * configs/NAME.json: a run config per bundled env class (walker.json, ...)
 * and the sysid experiments (sysid-beam.json, ...), what `dsim run NAME`,
 * `dsim sysid NAME` and Python's dsim.Run("NAME") read. Searched in order:
 *   1. $DSIM_CONFIG_DIR, when set;
 *   2. next to the loaded library, found at run time (dladdr), with D the
 *      folder of libdsim (or of the program linking it statically, dsim):
 *      D/configs and D/../configs (a build tree: the dsim program, and
 *      .libs/libdsim.so), D/../share/dsim/configs (an install);
 *   3. the install's share/dsim/configs compiled in.
 * A copied or moved build tree thus reads its own configs. */
#ifndef DSIM_CONFIG_DIRS_H
#define DSIM_CONFIG_DIRS_H

#include <stddef.h>

#include "dsim/base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The i-th folder of that order (i from 0) into dir: 0 (dir "" when the
 * platform cannot place the library: skip it), DS_ERR_NOTFOUND past the
 * last, DS_ERR_RANGE when it does not fit in n bytes. */
DS_API int ds_run_config_dir(int i, char* dir, size_t n);
/* The path of NAME.json in the first folder of that order holding it:
 * 0; DS_ERR_NOTFOUND (err lists the folders searched), DS_ERR_INVALID for a
 * name with '/', DS_ERR_RANGE when the path does not fit in n bytes. */
DS_API int ds_run_find_config(const char* name, char* path, size_t n, char* err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif

/* dsim: differentiable simulation and control environments.
 * Umbrella header: include this one. */
#ifndef DSIM_DSIM_H
#define DSIM_DSIM_H

#include "dsim/abi.h"
#include "dsim/artic.h"
#include "dsim/base.h"
#include "dsim/config_dirs.h"
#include "dsim/batch.h"
#include "dsim/controller.h"
#include "dsim/device.h"
#include "dsim/engine.h"
#include "dsim/engine_batch.h"
#include "dsim/env.h"
#include "dsim/fd.h"
#include "dsim/fluid.h"
#include "dsim/image.h"
#include "dsim/mesh.h"
#include "dsim/model_file.h"
#include "dsim/raster.h"
#include "dsim/run.h"
#include "dsim/runlog.h"
#include "dsim/scenes.h"
#include "dsim/sysid.h"
#include "dsim/video.h"
#include "dsim/volume.h"

#endif

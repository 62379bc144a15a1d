/* The batched renderer's backend for a device kind (render/raster_api.c):
 * the one place that chooses it. Not installed. */
#ifndef DSIM_RENDER_RASTER_API_H
#define DSIM_RENDER_RASTER_API_H

#include "dsim/device.h"
#include "render/raster_batch.h"

/* The host backend for DS_DEVICE_CPU; the CUDA backend for DS_DEVICE_CUDA,
 * NULL in a build without CUDA. */
const dsRasterBackend* ds__raster_backend(dsDeviceKind kind);

#endif

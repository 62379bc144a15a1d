/* The rasterizer's camera frame (render/raster.c), shared with the volume
 * renderer (render/volume.c) so that both project the same way. */
#ifndef DSIM_RENDER_CAMERA_FRAME_H
#define DSIM_RENDER_CAMERA_FRAME_H

#include "render/raster_kernel.h"

/* Camera basis and projection scales of cam for a width x height image;
 * DS_ERR_INVALID for a degenerate camera. */
int ds__camera_frame(const dsCamera* cam, int width, int height, dsrFrame* fr);

#endif

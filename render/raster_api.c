/* The batched renderer's public entry points (dsim/raster.h) over the
 * driver (render/raster_batch.h), on the device layer's backend of the
 * device kind (base/backend.h). */
#include "config.h"

#include <stdio.h>

#include "dsim/raster.h"
#include "render/raster_batch.h"

int ds_batch_raster_create(dsBatchRaster** out, dsDeviceKind device, void* ctx, const dsRenderSettings* s, int B,
                           int nvert, int nface, const int* faces, const dsReal* colors, int color_mode, char* err,
                           size_t errlen) {
  if (err && errlen) err[0] = '\0';
  if (!out || !s) return DS_ERR_INVALID;
  *out = NULL;
  const dsBackend* be = ds__backend(device);
  if (!be) {
    if (err && errlen) snprintf(err, errlen, "this dsim was built without CUDA");
    return DS_ERR_UNSUPPORTED;
  }
  return ds__braster_create(out, be, ctx, s, B, nvert, nface, faces, colors, color_mode, err, errlen);
}

void ds_batch_raster_destroy(dsBatchRaster* r) { ds__braster_destroy(r); }

const char* ds_batch_raster_last_error(const dsBatchRaster* r) { return r ? ds__braster_last_error(r) : ""; }

int ds_batch_raster_render(dsBatchRaster* r, const dsReal* verts, dsReal* images) {
  return r && verts ? ds__braster_render(r, verts, images) : DS_ERR_INVALID;
}

int ds_batch_raster_set_goal(dsBatchRaster* r, const dsReal* goals, int per_instance) {
  return r && goals ? ds__braster_set_goal(r, goals, per_instance) : DS_ERR_INVALID;
}

int ds_batch_raster_loss(dsBatchRaster* r, const dsLossDef* def, const dsReal* weights, dsReal* losses) {
  return r && def ? ds__braster_loss(r, def, weights, losses) : DS_ERR_INVALID;
}

int ds_batch_raster_backward(dsBatchRaster* r, const dsReal* d_images, dsReal* dverts) {
  return r && dverts ? ds__braster_backward(r, d_images, dverts) : DS_ERR_INVALID;
}

int ds_batch_raster_light_grad(dsBatchRaster* r, dsRenderSettings* d_light) {
  return r && d_light ? ds__braster_light_grad(r, d_light) : DS_ERR_INVALID;
}

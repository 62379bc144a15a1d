/* The batched renderer's driver (render/raster_batch.c): a renderer of B
 * meshes of one topology on a backend of the device layer (base/backend.h),
 * running the stages of render/raster_stages.h. Not installed. */
#ifndef DSIM_RENDER_RASTER_BATCH_H
#define DSIM_RENDER_RASTER_BATCH_H

#include "base/backend.h"
#include "render/raster_stages.h"

/* Memory is the backend's (device memory for CUDA); a renderer made on the
 * context of a batched engine (the same stream) reads the engine's state
 * where it lies. Functions return 0 or a negative DS_ERR_*. */

#ifdef __cplusplus
extern "C" {
#endif

/* render/raster.c: the single renderer's forward rows four columns at a
 * time (1, the default) or column by column (0), the same bits either way;
 * for tests that compare the two. */
void ds__raster_set_lanes(int on);
/* render/raster.c: the view of settings s (DS_ERR_INVALID for bad settings) */
int ds__raster_view(const dsRenderSettings* s, dsrView* v);
/* render/raster.c: dl += the light's gradient from the faces' parts summed
 * (dsr_light_sum): ambient and directional as they are, the direction's
 * through its normalisation (nothing for a headlight) */
void ds__raster_light_finish(const dsrView* v, const dsReal light_dir[3], const double acc[DSR_NLIGHT],
                             dsRenderSettings* dl);

typedef struct dsBatchRaster dsBatchRaster;

/* A renderer of B meshes of one topology (faces index nvert vertices;
 * colors per face or per vertex as color_mode says) with settings s, on
 * backend be with context ctx. Fails with a message naming the bad field,
 * face or size (err, errlen). */
int ds__braster_create(dsBatchRaster** out, const dsBackend* be, void* ctx, const dsRenderSettings* s, int B,
                       int nvert, int nface, const int* faces, const dsReal* colors, int color_mode, char* err,
                       size_t errlen);
void ds__braster_destroy(dsBatchRaster* r);
const char* ds__braster_last_error(const dsBatchRaster* r);
/* Renders the B meshes with vertices verts (backend memory, B x nvert x 3,
 * copied: the backward needs them); images (host, B x H x W x 4) receives
 * the images unless NULL (they stay on the backend for a loss). */
int ds__braster_render(dsBatchRaster* r, const dsReal* verts, dsReal* images);
/* The goal images (host): one for every instance, or B (per_instance). */
int ds__braster_set_goal(dsBatchRaster* r, const dsReal* goals, int per_instance);
/* The loss of the last rendered images against the goals (ds_image_loss_eval's,
 * bit for bit): losses (host, B) and, kept for ds__braster_backward, the
 * gradient times weights[b] (host, B; NULL: 1), all on the backend:
 * single-scale MSE and L1 (with or without the moments term) in two
 * stages; multi-scale and D-SSIM losses as image operations on a workspace
 * made at the first such call (about 12 doubles per image value and
 * instance). */
int ds__braster_loss(dsBatchRaster* r, const dsLossDef* def, const dsReal* weights, dsReal* losses);
/* Adds dL/d(vertices) of the last render into dverts (backend memory,
 * B x nvert x 3): d_images (host, B x H x W x 4) is dL/d(image), NULL: the
 * gradient the last ds__braster_loss kept (of this render). */
int ds__braster_backward(dsBatchRaster* r, const dsReal* d_images, dsReal* dverts);
/* d_light[b] += dL/d(light settings) of instance b from the last backward
 * (ambient, directional, light_dir; as ds_raster_backward_light's). */
int ds__braster_light_grad(dsBatchRaster* r, dsRenderSettings* d_light);

#ifdef __cplusplus
}
#endif

#endif

/* dsim volume renderer: differentiable emission-absorption ray marching of a
 * 3-D density grid (smoke) through the rasterizer's camera (dsim/raster.h),
 * composited over a rasterized background image and stopped at its depth so
 * that meshes in front hide the smoke. The math is at the top of
 * render/volume.c and in docs/fluids.md ("3-D rendering").
 *
 * Typical use, with a fluid from dsim/fluid.h (cell (i, j, k) is element
 * i + nx (j + ny k), the grid's corner at the origin):
 *
 *   dsVolumeDef def = ds_volume_default_def();
 *   def.n[0] = def.n[1] = def.n[2] = 64; def.dx = 1.0 / 64;
 *   def.width = def.height = 128; ds_camera_look_at(&def.camera, 3, 20, 30);
 *   dsVolume* v; ds_volume_create(&v, &def, err, sizeof err);
 *   ds_volume_render(v, ds_fluid_density(d), scene_rgba, scene_depth, image);
 *   ds_volume_backward(v, d_image, d_density, &d_sigma_t, d_color, d_scene);
 *
 * Images are dsReal RGBA (height x width x 4, row 0 at the top) as for the
 * rasterizer; density and its gradient are double (the fluid's type). One
 * dsVolume must not be used from two threads at once (it uses OpenMP
 * inside); results are bitwise the same whatever OMP_NUM_THREADS. */
#ifndef DSIM_VOLUME_H
#define DSIM_VOLUME_H

#include "dsim/base.h"
#include "dsim/raster.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The largest grid a renderer accepts, cells. */
#define DS_VOLUME_MAX_CELLS (1 << 24)
/* The largest image side, pixels. */
#define DS_VOLUME_MAX_SIDE 16384

typedef struct dsVolumeDef {
  int n[3];              /* cells per axis, >= 1 */
  double dx;             /* cell size, m, > 0 */
  double origin[3];      /* world position of the grid's low corner, m: cell (i, j, k) has its centre at
                          * origin + ((i + 1/2) dx, (j + 1/2) dx, (k + 1/2) dx) */
  double sigma_t;        /* extinction per unit density, 1/m, >= 0 */
  double color[3];       /* smoke RGB (emitted and scattered light, flat), >= 0 */
  double step;           /* march step as a fraction of dx, in (0, 4]: 0.5 samples about twice per cell */
  double background[4];  /* RGBA behind the smoke where the caller passes no background image, [0, 1] */
  int width, height;     /* image size, pixels, 1 .. DS_VOLUME_MAX_SIDE */
  dsCamera camera;       /* the rasterizer's camera (eye, at, up, fov or intrinsics, near, far) */
} dsVolumeDef;

/* 32^3 cells of 1/32 m at the origin, sigma_t 10, colour (0.95, 0.95,
 * 0.95), step 0.5, background (0, 0, 0, 0), 64 x 64 pixels, the default
 * camera looking at the grid's centre (0.5, 0.5, 0.5) from distance 3.5,
 * elevation 20 deg, near 0.1, far 100. */
DS_API dsVolumeDef ds_volume_default_def(void);

/* DS_OK, or DS_ERR_INVALID (DS_ERR_RANGE for a grid beyond
 * DS_VOLUME_MAX_CELLS or an image side beyond DS_VOLUME_MAX_SIDE) with the
 * field and its expected value in err ("volume: sigma_t: expected a finite
 * number >= 0, got -1"). */
DS_API int ds_volume_check(const dsVolumeDef* def, char* err, size_t errlen);

typedef struct dsVolume dsVolume;
/* Creates a renderer with every buffer it needs (render and backward
 * allocate nothing): 0 and *out, ds_volume_check's errors, DS_ERR_NOMEM. */
DS_API int ds_volume_create(dsVolume** out, const dsVolumeDef* def, char* err, size_t errlen);
DS_API void ds_volume_destroy(dsVolume* v);
DS_API const dsVolumeDef* ds_volume_def(const dsVolume* v);
/* Changes anything but the grid and image sizes (DS_ERR_INVALID, the
 * message from ds_volume_last_error): sigma_t, colour, camera, origin, dx,
 * step, background. Invalidates the state kept for backward. */
DS_API int ds_volume_set_def(dsVolume* v, const dsVolumeDef* def);
/* The message of the last failed call on v ("" after a success). */
DS_API const char* ds_volume_last_error(const dsVolume* v);

/* Renders density (ncell, >= 0 expected; trilinear between cell centres,
 * clamped to the nearest centre near the box faces) over background (h x w x
 * 4 RGBA, e.g. a rasterized scene; NULL: def.background everywhere). depth
 * (h x w, NULL: none): the camera depth Z (as ds_camera_project's ndc[2]) of
 * the surface seen at each pixel centre, where the ray stops; +INFINITY or
 * any value >= camera.zfar: no surface. Per pixel, with T the transmittance
 * of the ray's part in the box between znear and min(zfar, depth):
 *   rgb = color (1 - T) + T background.rgb,  alpha = (1 - T) + T background.a.
 * Keeps per-pixel state for ds_volume_backward. DS_ERR_INVALID for NULL
 * density or image, or a NaN or negative depth (the pixel is named). */
DS_API int ds_volume_render(dsVolume* v, const double* density, const dsReal* background, const dsReal* depth,
                            dsReal* image);

/* Adjoint of the last ds_volume_render (DS_ERR_STATE when none since
 * creation or ds_volume_set_def). The render's background array is read
 * again, so it must still hold the same values; the density and depth are
 * not (the render kept what it needs). d_image: dL/d(image). ACCUMULATES into
 * d_density (ncell), *d_sigma_t, d_color (3) and d_background (h x w x 4);
 * any may be NULL. The depth has no gradient (it moves where the march
 * stops; the smoke-mesh edge is hard). */
DS_API int ds_volume_backward(dsVolume* v, const dsReal* d_image, double* d_density, double* d_sigma_t,
                              double* d_color, dsReal* d_background);

/* Hard depth of a mesh for ds_volume_render: for each pixel centre the
 * camera depth Z of the nearest triangle the ray hits between znear and
 * zfar, +INFINITY where none (every triangle tested: meant for obstacles
 * and a ground, tens to hundreds of faces). DS_ERR_INVALID for NULL arrays,
 * DS_ERR_MESH for a vertex index out of range. */
DS_API int ds_volume_mesh_depth(const dsVolume* v, const dsRasterMesh* mesh, dsReal* depth);

#ifdef __cplusplus
}
#endif
#endif

/* dsim soft rasterizer (SoftRas-style) and image losses.
 *
 * A differentiable renderer of triangle meshes: every pixel's colour and
 * alpha are smooth functions of the vertex positions and colours, and the
 * backward pass gives the exact adjoint of the forward (up to rounding).
 * The math is written out at the top of render/raster.c and in
 * FORMULAS.md ("Soft rasterizer").
 *
 * Images are dsReal RGBA, row-major, (height x width x 4), row 0 at the top,
 * every value in [0, 1]. Loss functions take and return the same layout.
 *
 * Typical use:
 *   dsRenderSettings s = ds_default_render_settings();
 *   ds_camera_look_at(&s.camera, 13, 30, 0);
 *   dsRaster* r; ds_raster_create(&r, &s, max_faces, max_verts);
 *   dsRasterMesh m = {verts, nvert, faces, nface, colors, DS_COLOR_FACE};
 *   ds_raster_render(r, &m, image);                  // image: h*w*4
 *   ds_raster_backward(r, &m, d_image, d_verts, d_colors);  // accumulates
 */
#ifndef DSIM_RASTER_H
#define DSIM_RASTER_H

#include "dsim/base.h"
#include "dsim/device.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- camera -----------------------------------------------------------------
 * Look-at camera, y up. z_c = unit(at - eye), x_c = unit(up x z_c),
 * y_c = z_c x x_c. A point p has camera coordinates
 * (X, Y, Z) = ((p-eye).x_c, (p-eye).y_c, (p-eye).z_c) and normalised device
 * coordinates (X/(Z t a), Y/(Z t)) with t = tan(fov/2), a = width/height
 * (perspective; with intrinsics fx > 0: (2 fx X/(Z W) + 2 cx/W - 1,
 * 2 fy Y/(Z H) + 1 - 2 cy/H)) or (X/(h a), Y/h) with h = ortho_height
 * (orthographic). */
typedef struct dsCamera {
  dsReal eye[3];       /* camera position, m */
  dsReal at[3];        /* point looked at, m */
  dsReal up[3];        /* up direction (any length, not parallel to at - eye) */
  dsReal fov_deg;      /* vertical field of view, degrees (perspective) */
  dsReal znear;        /* near plane: depth Z below it is not drawn, m (> 0) */
  dsReal zfar;         /* far plane, m (> znear) */
  int orthographic;    /* 0: perspective, 1: orthographic */
  dsReal ortho_height; /* orthographic: half the visible height, m */
  /* Intrinsics, pixels of the output image (u from its left edge, v from
   * its top; a pixel spans [i, i + 1), so a centred camera has cx = W/2, cy
   * = H/2: OpenCV's cx + 0.5): u = fx X/Z + cx, v = cy - fy Y/Z. fx > 0
   * (perspective): used instead of fov_deg; 0: fov_deg, centred. */
  dsReal fx, fy, cx, cy;
} dsCamera;

/* Perspective, fov 30 deg, near 1, far 100, looking at the origin from
 * distance 13, elevation 30 deg, azimuth 0 (the gear scene). */
DS_API dsCamera ds_default_camera(void);

/* eye = (d cos e sin a, d sin e, -d cos e cos a), at = origin, up = +y.
 * Angles in degrees. DS_ERR_INVALID for d <= 0 or when the view is
 * vertical (|e| = 90 deg: up parallel to the view axis). */
DS_API int ds_camera_look_at(dsCamera* cam, dsReal distance, dsReal elevation_deg,
                             dsReal azimuth_deg);

/* Explicit eye, target and up vector. DS_ERR_INVALID when eye == at or up is
 * parallel to the view axis. */
DS_API int ds_camera_set_eye(dsCamera* cam, const dsReal eye[3], const dsReal at[3],
                             const dsReal up[3]);

/* Projects world point p for an image of width x height: ndc[0], ndc[1] in
 * normalised device coordinates ([-1, 1] across the image, y up), ndc[2] the
 * camera depth Z (m). DS_ERR_INVALID for a degenerate camera; DS_ERR_RANGE
 * when p is not in front of the camera (Z <= 0, perspective). */
DS_API int ds_camera_project(const dsCamera* cam, int width, int height, const dsReal p[3],
                             dsReal ndc[3]);

/* ---- render settings ----------------------------------------------------- */
typedef struct dsRenderSettings {
  int width, height;      /* output image size, pixels */
  int supersample;        /* k >= 1: render kW x kH, average k x k blocks */
  dsReal sigma;           /* coverage sharpness sigma, NDC units squared */
  dsReal gamma;           /* depth-softmax temperature, normalised depth units */
  dsReal eps;             /* background's normalised depth in the softmax */
  dsReal background[4];   /* RGBA of the background */
  dsReal ambient;         /* ambient light factor k_amb >= 0 */
  dsReal directional;     /* directional light factor k_dir >= 0 */
  dsReal light_dir[3];    /* direction towards the light (normalised internally); 0, 0, 0: a
                           * headlight, a point light at the eye: l = (eye - c)/|eye - c| per
                           * face (c its centroid; orthographic: the view axis) */
  dsCamera camera;
  int premultiplied;      /* 0: rgb is the mean of the k x k samples' colours; 1: the mean of
                           * alpha_s rgb_s (premultiplied colour, what a camera integrates over a
                           * pixel): composite it as rgb + (1 - alpha) B. Backward takes the
                           * adjoint of the colour the render wrote. */
} dsRenderSettings;

/* docs/scenes.md "Common rendering": 256 x 256, supersampling 2, sigma 1e-5,
 * gamma 1e-4, eps 1e-3, background (0,0,0,0), 0.5 ambient + 0.5
 * directional from a headlight (light_dir 0, 0, 0: it lights every face the
 * camera sees), ds_default_camera(). */
DS_API dsRenderSettings ds_default_render_settings(void);
/* DS_OK, or DS_ERR_INVALID with the first invalid field named and its
 * expected value in err ("render settings: sigma: expected a finite number
 * > 0, got -1", "camera: fov_deg: ..."): what ds_raster_create refuses. */
DS_API int ds_render_settings_check(const dsRenderSettings* s, char* err, size_t errlen);

/* ---- meshes -------------------------------------------------------------- */
typedef enum dsColorMode {
  DS_COLOR_FACE = 0,   /* colors: nface x 3, flat per face */
  DS_COLOR_VERTEX = 1  /* colors: nvert x 3, interpolated perspective-correctly */
} dsColorMode;

typedef struct dsRasterMesh {
  const dsReal* verts;  /* vertex positions (nvert x 3), world, m */
  int nvert;
  const int* faces;     /* vertex indices (nface x 3); either winding (double-sided) */
  int nface;
  const dsReal* colors; /* base RGB in [0,1], per face or per vertex (see color_mode) */
  int color_mode;       /* dsColorMode */
} dsRasterMesh;

/* ---- renderer ------------------------------------------------------------
 * Created once for an image size and the largest mesh it will draw; holds
 * every buffer, so render and backward allocate nothing. One renderer must
 * not be used from two threads at once (it uses OpenMP inside). */
typedef struct dsRaster dsRaster;

/* DS_ERR_INVALID for bad sizes or settings (message on *out is not
 * available: the reason is logged through the log hook), DS_ERR_NOMEM. */
DS_API int ds_raster_create(dsRaster** out, const dsRenderSettings* s, int max_faces,
                            int max_verts);
DS_API void ds_raster_destroy(dsRaster* r);

/* Changes sigma, gamma, lights, background, camera (not the image size or
 * supersampling: DS_ERR_INVALID). Invalidates the state kept for backward. */
DS_API int ds_raster_set_settings(dsRaster* r, const dsRenderSettings* s);
DS_API int ds_raster_set_camera(dsRaster* r, const dsCamera* cam);
DS_API const dsRenderSettings* ds_raster_settings(const dsRaster* r);
/* Message for the last error of a call on r ("" after a success). */
DS_API const char* ds_raster_last_error(const dsRaster* r);

/* Renders the mesh into image (height x width x 4, may be NULL to only
 * prepare backward). Faces with a vertex nearer than znear are culled (not
 * clipped). Keeps the per-pixel state that ds_raster_backward needs.
 * Errors: DS_ERR_INVALID (NULL arrays, sizes above the renderer's maxima),
 * DS_ERR_MESH (vertex index out of range), DS_ERR_DIVERGED (NaN/Inf vertex). */
DS_API int ds_raster_render(dsRaster* r, const dsRasterMesh* mesh, dsReal* image);

/* Adjoint of the last ds_raster_render, which must have been called with the
 * same mesh and settings (DS_ERR_STATE when no render precedes it or the
 * sizes differ). d_image: dL/d(image), same layout as the image. ACCUMULATES
 * dL/d(verts) into d_verts (nvert x 3) and dL/d(colors) into d_colors (same
 * shape as mesh->colors); either may be NULL. */
DS_API int ds_raster_backward(dsRaster* r, const dsRasterMesh* mesh, const dsReal* d_image,
                              dsReal* d_verts, dsReal* d_colors);

/* ds_raster_backward that also ACCUMULATES dL/d(camera) into d_camera
 * (may be NULL): eye, at, up (3 each) and fov_deg (perspective), the
 * intrinsics fx, fy, cx, cy (perspective with fx > 0; fov_deg then gets
 * nothing) or ortho_height (orthographic); its other fields are left alone. The
 * camera's influence through which side of a face is lit (piecewise
 * constant) and the near/far planes has no gradient. */
DS_API int ds_raster_backward_camera(dsRaster* r, const dsRasterMesh* mesh, const dsReal* d_image,
                                     dsReal* d_verts, dsReal* d_colors, dsCamera* d_camera);

/* ds_raster_backward_camera that also ACCUMULATES dL/d(lights) into
 * d_light (may be NULL): its ambient, directional and light_dir (the raw
 * direction: through the normalisation l = d/|d|, so the gradient is
 * orthogonal to d); its other fields are left alone. With a headlight
 * (light_dir 0, 0, 0) light_dir gets nothing (its light follows the camera
 * and the faces; their gradients take it). Where a face turns from the
 * light (n.l = 0) the gradient is that of the unlit side. Summed in face
 * order: the same bits for any thread count. */
DS_API int ds_raster_backward_light(dsRaster* r, const dsRasterMesh* mesh, const dsReal* d_image, dsReal* d_verts,
                                    dsReal* d_colors, dsCamera* d_camera, dsRenderSettings* d_light);

/* The same adjoint without relying on an earlier render: re-renders the mesh
 * first (so nothing need be kept between frames; costs one more forward). */
DS_API int ds_raster_render_backward(dsRaster* r, const dsRasterMesh* mesh, const dsReal* d_image,
                                     dsReal* d_verts, dsReal* d_colors);

/* ---- camera simulator (footage the soft rasterizer did not render) ----------
 * A second renderer, forward only, for synthetic footage that looks like a
 * camera's rather than like the identifier's own images (sysid.video
 * "camsim", dsim/sysid.h). Per output pixel k x k samples (supersample k)
 * at the centres of a kW x kH grid; each sample takes the nearest face
 * whose projected triangle contains it (hard z-buffer: depth Z interpolated
 * perspective-correctly, 1/Z = sum_i b_i / Z_i; no soft edges, no depth
 * blending), or the background. Faces with a vertex nearer than znear are
 * culled (as ds_raster_render does); both sides are drawn.
 *
 * Shading, flat per face (base colour: the face's, or the mean of its
 * vertices'), with n the unit normal turned towards the eye, l the unit
 * light direction, v the unit direction from the face's centroid to the
 * eye (orthographic: the view axis reversed) and h = unit(l + v):
 *   c = light light_color (base (ambient + diffuse max(0, n.l)) + specular max(0, n.h)^shininess)
 * (Lambert + Blinn-Phong; the specular term only where n.l > 0), clamped
 * to [0, 1]; `light` is ds_camsim_render's intensity factor. The
 * background is not lit (a self-lit backdrop): it does not change with
 * `light`.
 * The frame: the box mean of each pixel's k x k samples; then a Gaussian
 * blur (blur = sigma in output pixels, radius ceil(3 sigma), weights
 * renormalised over the taps inside the image: a constant image stays
 * constant); then sensor noise, N(0, noise^2) per pixel and colour channel,
 * and a clamp to [0, 1]. Alpha is 1 everywhere (a camera frame is opaque).
 * The noise of pixel p, channel c is a function of (noise_seed, 3 p + c)
 * alone (a counter-based stream), so a frame is bitwise reproducible for a
 * seed whatever the thread count. A cluttered background: `clutter`
 * axis-aligned rectangles and discs (half each), centres uniform over the
 * image, sizes 5-25 % of the width, colours uniform in [0.1, 0.9]^3, drawn
 * over `background` in order, each pixel covered by the fraction of its
 * k x k samples inside the shape; a seeded stream (clutter_seed). */
typedef struct dsCamSimDef {
  int width, height;        /* output image, pixels */
  int supersample;          /* k >= 1: k x k hard samples per output pixel (4) */
  dsCamera camera;          /* as the soft rasterizer's (intrinsics in output pixels) */
  dsReal light_dir[3];      /* towards the light, world (normalised inside; not 0): (-0.4, 1, -0.5) */
  dsReal light_color[3];    /* RGB of the light: (1, 0.95, 0.85), warm */
  dsReal ambient;           /* k_a (0.3) */
  dsReal diffuse;           /* k_d, Lambert (0.7) */
  dsReal specular;          /* k_s, Blinn-Phong (0.2) */
  dsReal shininess;         /* Blinn-Phong exponent (16) */
  dsReal background[3];     /* RGB behind the scene (0, 0, 0) */
  int clutter;              /* shapes drawn on the background (0: plain) */
  uint64_t clutter_seed;    /* their stream */
  dsReal blur;              /* Gaussian blur sigma, output pixels (0: none; at most DS_CAMSIM_MAX_BLUR) */
  dsReal noise;             /* sensor noise sigma on [0, 1] values (0: none) */
} dsCamSimDef;
#define DS_CAMSIM_MAX_BLUR 16

/* 64 x 64, supersample 4, ds_default_camera(), the light and material
 * above, black background, no clutter, no blur, no noise. */
DS_API dsCamSimDef ds_default_camsim_def(void);

typedef struct dsCamSim dsCamSim;
/* Holds every buffer (the kW x kH depth and colour samples, the background,
 * the blur's scratch) and draws the background; max_faces: the largest
 * mesh. DS_ERR_INVALID with the field and its expected value in err. */
DS_API int ds_camsim_create(dsCamSim** out, const dsCamSimDef* def, int max_faces, char* err, size_t errlen);
DS_API void ds_camsim_destroy(dsCamSim* c);
/* The background as the camera sees it with no scene in front (blurred, no
 * noise): height x width x 4, alpha 1. What an identifier that knows the
 * static background composites its own images over. */
DS_API const dsReal* ds_camsim_background(const dsCamSim* c);
/* One frame of mesh into image (height x width x 4), light intensity factor
 * `light` (>= 0; 1: the def's light), noise from noise_seed. Allocates
 * nothing. DS_ERR_INVALID (NULL, more faces than max_faces), DS_ERR_MESH
 * (a vertex index out of range), DS_ERR_DIVERGED (a NaN/Inf vertex). */
DS_API int ds_camsim_render(dsCamSim* c, const dsRasterMesh* mesh, dsReal light, uint64_t noise_seed,
                            dsReal* image);

/* ---- image losses -----------------------------------------------------------
 * All losses compare RGBA images img and goal (h x w x 4, all four channels)
 * and write dL/d(img) into grad (same layout, overwritten; may be NULL). */

/* mean over all 4wh values of (img - goal)^2 */
DS_API int ds_loss_mse(const dsReal* img, const dsReal* goal, int w, int h, dsReal* loss,
                       dsReal* grad);
/* mean of |img - goal|; the gradient is 0 where they are equal */
DS_API int ds_loss_l1(const dsReal* img, const dsReal* goal, int w, int h, dsReal* loss,
                      dsReal* grad);

/* DS_LOSS_L2_DSSIM: PhysDreamer's mixed loss 0.1 MSE + 0.9 D-SSIM at every
 * level (CPU renderer only; the batched renderer refuses it). */
typedef enum dsLossKind { DS_LOSS_MSE = 0, DS_LOSS_L1 = 1, DS_LOSS_DSSIM = 2, DS_LOSS_L2_DSSIM = 3 } dsLossKind;
#define DS_LOSS_MIX_L2 0.1    /* weight of the MSE in DS_LOSS_L2_DSSIM */
#define DS_LOSS_MIX_DSSIM 0.9 /* weight of the D-SSIM */

#define DS_LOSS_MAX_LEVELS 8
typedef struct dsLossDef {
  int kind;            /* dsLossKind applied at every level */
  int levels;          /* 1 = single scale; up to DS_LOSS_MAX_LEVELS pyramid levels */
  dsReal weights[DS_LOSS_MAX_LEVELS]; /* per level (level 0 = full resolution) */
  dsReal ssim_sigma;   /* D-SSIM Gaussian window sigma, pixels (1.5) */
  int ssim_radius;     /* D-SSIM window radius, pixels (5: an 11 x 11 window) */
  dsReal ssim_c1, ssim_c2; /* (0.01)^2, (0.03)^2 (data range 1) */
  dsReal moments_weight;   /* weight of the alpha-moments term (0: off), see below */
  dsReal moments_size;     /* relative weight of its size part (1) */
} dsLossDef;

/* kind MSE, 1 level, weights all 1, SSIM window 11 x 11 sigma 1.5,
 * C1 = 1e-4, C2 = 9e-4, no moments term (size part 1). */
DS_API dsLossDef ds_default_loss_def(void);

/* D-SSIM: (1 - mean SSIM)/2 over pixels and the 4 channels; SSIM with a
 * Gaussian window normalised over the in-image part near borders.
 * Multi-scale: L = sum_l weights[l] * loss(P_l(img), P_l(goal)) where P_0 is
 * the image and P_{l+1} blurs P_l with the 5-tap binomial [1 4 6 4 1]/16
 * (normalised at borders) and keeps every other pixel (size ceil(n/2)).
 * Moments term (moments_weight w > 0), from the alpha channel: the centroid
 * c = sum_p alpha_p (x_p, y_p) / m in normalised device coordinates (pixel
 * centres, x right, y up, both in (-1, 1)), m = sum_p alpha_p + 1 (the alpha
 * mass, plus one pixel), and the apparent size sqrt(m); adds
 * w (|c(img) - c(goal)|^2 + q (ln(m(img)/m(goal))/2)^2), q = moments_size.
 * Its gradient reaches across the whole frame, so it pulls an object towards
 * a goal it does not overlap, where the per-pixel losses can only shrink it;
 * the size part tells depth from sideways motion under perspective. */
typedef struct dsImageLoss dsImageLoss;
/* DS_ERR_INVALID for a bad definition or size; ds_image_loss_check says
 * which field and what it expects. */
DS_API int ds_image_loss_create(dsImageLoss** out, const dsLossDef* def, int w, int h);
DS_API int ds_image_loss_check(const dsLossDef* def, int w, int h, char* err, size_t errlen);
DS_API void ds_image_loss_destroy(dsImageLoss* l);
/* Allocation-free evaluation; grad may be NULL, and must not overlap img or
 * goal (at one level it is written while they are read). */
DS_API int ds_image_loss_eval(dsImageLoss* l, const dsReal* img, const dsReal* goal, dsReal* loss,
                              dsReal* grad);

/* ---- batched renderer -------------------------------------------------------
 * B meshes of one topology rendered, compared with goal images and
 * differentiated together, on the CPU (OpenMP) or a CUDA device: where a
 * batched engine runs (dsim/engine_batch.h), made on its context
 * (ds_bsim_context, ds_bsim_device(bs).kind) so that vertices and adjoints
 * stay in its memory. Per instance the bits are those of ds_raster_render,
 * ds_image_loss_eval and ds_raster_backward. Functions return 0 or a
 * negative DS_ERR_*; messages from ds_batch_raster_last_error. */
typedef struct dsBatchRaster dsBatchRaster;
/* faces index nvert vertices (3 per face); colors per face or per vertex as
 * color_mode (dsColorMode) says; ctx: the context of the memory the vertices
 * will be in (NULL on the CPU). DS_ERR_UNSUPPORTED for CUDA in a build
 * without it; other failures name the bad field, face or size in err. */
DS_API int ds_batch_raster_create(dsBatchRaster** out, dsDeviceKind device, void* ctx, const dsRenderSettings* s,
                                  int B, int nvert, int nface, const int* faces, const dsReal* colors, int color_mode,
                                  char* err, size_t errlen);
DS_API void ds_batch_raster_destroy(dsBatchRaster* r);
DS_API const char* ds_batch_raster_last_error(const dsBatchRaster* r);
/* Renders the B meshes with vertices verts (the backend's memory, B x nvert
 * x 3; kept for the backward); images (host, B x h x w x 4) receives the
 * images unless NULL (they stay on the backend for a loss). */
DS_API int ds_batch_raster_render(dsBatchRaster* r, const dsReal* verts, dsReal* images);
/* Goal images (host, h x w x 4 each): one for every instance, or B of them
 * (per_instance). */
DS_API int ds_batch_raster_set_goal(dsBatchRaster* r, const dsReal* goals, int per_instance);
/* The loss (def) of the last rendered images against the goals: losses
 * (host, B) and, kept for ds_batch_raster_backward, its gradient times
 * weights[b] (host, B; NULL: 1). */
DS_API int ds_batch_raster_loss(dsBatchRaster* r, const dsLossDef* def, const dsReal* weights, dsReal* losses);
/* dverts (the backend's memory, B x nvert x 3) += dL/d(vertices) of the last
 * render, from d_images (host, B x h x w x 4), or NULL: the gradient the last
 * ds_batch_raster_loss kept. */
DS_API int ds_batch_raster_backward(dsBatchRaster* r, const dsReal* d_images, dsReal* dverts);
/* d_light[b] (host, B settings) += dL/d(light) of instance b from the last
 * ds_batch_raster_backward: ambient, directional and light_dir, as
 * ds_raster_backward_light gives them (bit for bit); other fields are not
 * touched. DS_ERR_STATE before a backward of the last render. */
DS_API int ds_batch_raster_light_grad(dsBatchRaster* r, dsRenderSettings* d_light);

#ifdef __cplusplus
}
#endif
#endif

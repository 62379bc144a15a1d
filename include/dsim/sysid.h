/* System identification from video (gradSim's sysid experiments): estimate
 * physical parameters of any registered env, addressed by their engine names
 * ("particle.mass", "tet.k_mu", "initial_velocity", "contact.ke", ...), by
 * gradient descent on an image loss between the rendered episode and a
 * target video.
 *
 *   dsSysidDef sd = ds_default_sysid_def();     // or ds_sysid_def_from_text
 *   dsSysid* s; ds_sysid_create(&env_def, &sd, object, NULL, &s, err, sizeof err);
 *   for (int i = 0; i < sd.iterations; i++) { dsSysidIter it; ds_sysid_iterate(s, &it); }
 *   ds_sysid_errors(s, are);                    // absolute relative error per parameter
 *   ds_sysid_destroy(s);
 *
 * The episode. The env is created from the caller's definition with a
 * control interval C (the definition's render_interval): one ds_env_step per
 * C substeps, returning the image observation (obs_image) at its end. Each
 * video frame sits at a substep that is a multiple of C (or the last
 * substep): frame k of a synthetic video at (k + 1) C. The actions are
 * the definition's known `action` at every step (e.g. rigid-toss's
 * impulse, an INITIAL action), zero by default (control-cloth's initial
 * velocity is then the engine's "initial_velocity").
 *
 * Loss. L = (1/F) sum_f loss(render_f(x), video_f) over the F frames used,
 * loss the env's image loss (its env.loss.image: mse, l1 or dssim, with its
 * pyramid levels and moments term: ds_env_image_loss). The gradient is the
 * env's adjoint of the frames (ds_env_backward_adjoints with image adjoints)
 * and ds_env_param_grad of every identified parameter.
 *
 * Parameters. Each is an engine array of count = n x width values (width 3
 * for positions, velocities, gravity and a body's centre of mass, 4 for an
 * orientation, 9 for an inertia, 1 otherwise): shared
 * (width values, the same for every element; the gradient is the sum over
 * the elements) or per element (all count values). Bounds [lower, upper]
 * hold for every value. The optimiser works on u: u = ln(value) when
 * lower > 0 (a positive quantity: relative steps, never a sign change),
 * u = value otherwise; after every step u is clamped to the bounds (in u).
 * With lower > 0, elements whose env value is 0 stay 0 and are not
 * identified (a fixed particle has mass 0): ds_sysid_value_fixed.
 * The initial guess is `init` or, when init_range is given, a uniform draw
 * from the object's seed (one for the parameter, or one per value with
 * init_each); a synthetic video's true value is
 * `truth` or a draw from truth_range (one draw per parameter and component,
 * shared by its elements: a uniform material).
 *
 * Optimisers: Adam and SGD (ds_optim_*, dsim/controller.h) and L-BFGS
 * (ds_lbfgs_* below: two-loop recursion with a backtracking Armijo line
 * search, one line search per iteration). Iteration 0 evaluates the initial
 * guess for every optimiser. L-BFGS stops (ds_sysid_stop_reason says why;
 * later iterations report the same point with 0 evaluations) when a line
 * search from steepest descent finds no decrease, the loss is at most 1e-15
 * of its initial value, or the projected gradient (without the components
 * that push against a bound) is at most 1e-10 of its norm at iteration 0.
 *
 * Every buffer is allocated at create; iterate allocates nothing. Distinct
 * dsSysid objects may run in distinct threads (each owns its env). */
#ifndef DSIM_SYSID_H
#define DSIM_SYSID_H

#include <stddef.h>
#include <stdint.h>

#include "dsim/base.h"
#include "dsim/env.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- L-BFGS ------------------------------------------------------------------
 * Minimises f over x (n doubles), x kept inside [lo, hi] when bounds are set
 * (trial points are projected: a projected backtracking line search).
 * Iteration: d = -H g (two-loop recursion over the last `memory` pairs
 * s = x' - x, y = g' - g kept when s.y > 1e-12 |s||y|; H0 = (s.y / y.y) I,
 * or step0 / |g| before the first pair); when g.d >= 0 the memory is dropped
 * and d = -g step0/|g|. Trial x' = P(x + a d), a = 1, 1/2, 1/4, ... until
 * f(x') <= f(x) + c1 g.(x' - x) (Armijo), at most max_linesearch tries. */
typedef int (*dsObjectiveFn)(void* user, const double* x, double* f, double* g);

typedef struct dsLbfgsDef {
  int memory;            /* pairs kept (m, 8) */
  double c1;             /* Armijo constant (1e-4) */
  int max_linesearch;    /* halvings per iteration (30) */
  double step0;          /* length of the first step, in units of x (1) */
} dsLbfgsDef;

typedef struct dsLbfgs dsLbfgs;

DS_API dsLbfgsDef ds_default_lbfgs_def(void);
DS_API int ds_lbfgs_create(const dsLbfgsDef* def, int n, dsLbfgs** out);
DS_API void ds_lbfgs_destroy(dsLbfgs* o);
/* Bounds (n values each, copied; NULL: unbounded). */
DS_API int ds_lbfgs_set_bounds(dsLbfgs* o, const double* lo, const double* hi);
/* One iteration from x, with f and g the objective and gradient at x; on
 * success x, f and g are those of the accepted point. *nevals (may be NULL)
 * gets the number of objective evaluations. DS_ERR_RANGE when no step
 * decreased f enough (x, f, g unchanged: converged or a bad gradient; the
 * memory is dropped, so the next call tries steepest descent), or the
 * objective's error code. */
DS_API int ds_lbfgs_step(dsLbfgs* o, double* x, double* f, double* g, dsObjectiveFn fn, void* user, int* nevals);

/* ---- definition ------------------------------------------------------------- */
#define DS_SYSID_MAX_PARAMS 8
#define DS_SYSID_NAME_MAX 64
#define DS_SYSID_PATH_MAX 1024
#define DS_SYSID_MAX_VEC 16 /* values of init, truth (1 or width) and ranges (2) */

typedef enum dsSysidOptimKind { DS_SYSID_ADAM = 0, DS_SYSID_SGD = 1, DS_SYSID_LBFGS = 2 } dsSysidOptimKind;
/* CAMSIM: synthetic, but the true episode is filmed by the camera simulator
 * (dsCamSimDef, dsim/raster.h; dsSysidCamSim below), not by the renderer
 * that identifies it. */
typedef enum dsSysidVideoKind { DS_SYSID_SYNTHETIC = 0, DS_SYSID_FRAMES = 1, DS_SYSID_CAMSIM = 2 } dsSysidVideoKind;
/* Which frames of the video enter the loss. */
typedef enum dsSysidFrameSel { DS_SYSID_FRAMES_ALL = 0, DS_SYSID_FRAMES_FIRST_LAST = 1, DS_SYSID_FRAMES_LAST = 2 } dsSysidFrameSel;

/* A synthetic video's true value laid out as a material field over the
 * parameter's elements (per_element), which the identifier does not know:
 * each element's region comes from its centroid (the mean rest position of
 * its particles) at t = (c - min) / (max - min) along `axis` over all
 * particles. LAYERS: n equal slabs, region floor(n t) (n = the number of
 * values or ranges); BAND: region 1 (inside) for band[0] <= t < band[1],
 * else 0; 2 values or ranges: outside, inside. Region r's value is
 * values[r], or a draw from [ranges[2r], ranges[2r+1]) per object. */
typedef enum dsSysidFieldKind { DS_SYSID_FIELD_NONE = 0, DS_SYSID_FIELD_LAYERS = 1, DS_SYSID_FIELD_BAND = 2 } dsSysidFieldKind;
#define DS_SYSID_MAX_REGIONS 8
typedef struct dsSysidField {
  int kind;                              /* dsSysidFieldKind */
  int axis;                              /* 0 x, 1 y, 2 z */
  dsReal values[DS_SYSID_MAX_VEC];       /* one per region */
  int nvalues;
  dsReal ranges[DS_SYSID_MAX_VEC];       /* [lo, hi) per region, flattened */
  int nranges;
  dsReal band[DS_SYSID_MAX_VEC];         /* BAND: [from, to) as fractions of the extent */
  int nband;
} dsSysidField;

typedef struct dsSysidParam {
  char name[DS_SYSID_NAME_MAX];          /* engine name; "" ends the list */
  int per_element;                       /* 0: shared, 1: one value per element */
  dsReal lower, upper;                   /* bounds of every value */
  dsReal init[DS_SYSID_MAX_VEC];         /* initial guess: 1 or width values */
  int ninit;                             /* 0: the env's current value */
  dsReal init_range[DS_SYSID_MAX_VEC];   /* [a, b): draw the guess per value */
  int ninit_range;                       /* 0 or 2 */
  int init_each;                         /* 1: one draw per value; 0: one draw for the parameter */
  dsReal truth[DS_SYSID_MAX_VEC];        /* synthetic video: the hidden value (1 or width values) */
  int ntruth;                            /* 0: the env's value */
  dsReal truth_range[DS_SYSID_MAX_VEC];  /* [a, b): draw the hidden value per object */
  int ntruth_range;                      /* 0 or 2 */
  dsSysidField true_field;               /* synthetic video: the truth as a field (kind NONE: uniform) */
  /* Smoothness of a per-element field over the element graph (tets sharing
   * a face, triangles sharing an edge, springs sharing a particle,
   * particles sharing a spring, triangle or tet edge), on u (the optimised
   * variable: ln(value) when lower > 0), as means over the E edges (i, j):
   * tv/E sum (sqrt((u_i - u_j)^2 + eps^2) - eps) + laplacian/E sum (u_i - u_j)^2 */
  double tv;                             /* weight of the total variation (0: off) */
  double tv_eps;                         /* its smoothing eps, in u (1e-3) */
  double laplacian;                      /* weight of the squared differences (0: off) */
} dsSysidParam;

/* A stage of a schedule: only the parameters in `free_mask` (bit k:
 * paramK+1) move, the others keep their current estimates bitwise; the
 * optimiser starts afresh (Adam's moments, L-BFGS's pairs and stop). */
#define DS_SYSID_MAX_STAGES 8
typedef enum dsSysidStageLoss { DS_SYSID_LOSS_ENV = 0, DS_SYSID_LOSS_MSE = 1, DS_SYSID_LOSS_L1 = 2,
                                DS_SYSID_LOSS_DSSIM = 3, DS_SYSID_LOSS_L2_DSSIM = 4 } dsSysidStageLoss;
typedef struct dsSysidStage {
  unsigned free_mask;  /* bit k: parameter k is free */
  int iterations;      /* > 0 */
  int loss;            /* dsSysidStageLoss: env (env.loss.image), mse, l1, dssim, l2_dssim */
  double lr;           /* 0: sysid.lr */
} dsSysidStage;

/* One view of the scene (sysid.cameras; a camera file's "views"): a
 * y-up camera at `position` looking at `look_at`, with a vertical field of
 * view `fov` or the intrinsics fx, fy, cx, cy (pixels: u = fx X/Z + cx from
 * the image's left edge, v = cy - fy Y/Z from its top; fx 0: the fov).
 * Footage: `frames`, the view's folder of PNG frames (relative to
 * sysid.frames_dir unless absolute; the views share the camera file's
 * times, so every folder holds the same number of frames). Every view's images enter the
 * loss, which is the sum over the views; parameters `camera.position`,
 * `camera.look_at`, `camera.fov`, `camera.fx`, `camera.fy`, `camera.cx`,
 * `camera.cy` identify the first view's camera (`cameraK.` the K-th's,
 * K = 1 .. DS_SYSID_MAX_VIEWS; `camera1.` is `camera.`). */
#define DS_SYSID_MAX_VIEWS 8
typedef struct dsSysidView {
  double position[3];                /* eye, m */
  double look_at[3];                 /* point looked at, m */
  double fov;                        /* vertical field of view, degrees (0: intrinsics) */
  double fx, fy, cx, cy;             /* intrinsics, pixels (fx 0: fov) */
  char frames[DS_SYSID_PATH_MAX];    /* footage: the view's PNG folder */
} dsSysidView;

/* sysid.video "camsim": the synthetic video filmed by the camera simulator
 * with the env's camera and image size and cam's other settings (hard
 * z-buffer at supersample k, Lambert + Blinn-Phong under its own light,
 * background, blur, sensor noise), the light's intensity 1 - drift f/(F - 1)
 * at frame f of F (a lighting change over the clip), the noise of object i's
 * frame f seeded from (seed + i, f). The identifier is told the static
 * background (the "known background" protocol): it composites its own RGBA
 * frames over ds_camsim_background, rgb' = alpha rgb + (1 - alpha) B,
 * alpha' = 1, before the loss (the video's alpha is 1). With fit_gain it
 * does not know the light either: its colours rgb are scaled by g, per
 * frame and channel the least-squares gain against the video (the
 * gradient includes dg/dx: exact for any image loss). With fit_shading
 * the gain becomes a 3 x 3 matrix M per frame, c = M a + (1 - alpha) B,
 * the least-squares fit M = S_ua S_aa^-1 (S_ua = sum_p u_p a_p^T, S_aa =
 * sum_p a_p a_p^T + 1e-12 I) to frames whose channels are the face classes
 * of ds_env_camsim_paint_faces: a light factor per class of faces (sides
 * of a box) and colour channel, which a per-frame gain cannot give.
 *
 * The loss is image_weight times the image loss of the composite plus
 * silhouette times a foreground-mask term that does not see shading:
 *   L_sil = mean over the frames used of (1/P) sum_p (alpha_p - m_p)^2,
 * alpha_p the identifier's coverage (its alpha), m_p the video's foreground
 * coverage from background subtraction: 0 where no pixel of p's 3 x 3
 * neighbourhood differs from the background by more than mask_threshold
 * (|v - B|, RGB), 1 where all of them do, and between them (the edge) the
 * projection m_p = (v_p - B_p).(c - B_p)/|c - B_p|^2 onto the colour c of
 * p's most contrasted neighbour inside the object: the fraction of p that
 * the object covers if it has c's colour there (linear in v, so sensor
 * noise leaves it unbiased below 1; at most 1, since a brighter edge
 * pixel is another face, not more than full coverage). */
typedef struct dsSysidCamSim {
  dsCamSimDef cam;        /* width, height and camera: the env's */
  double drift;           /* fraction of the light lost from the first frame to the last (0) */
  int fit_gain;           /* 1: the identifier fits a gain per frame and channel to its colours (1) */
  int fit_shading;        /* 1: it paints its faces by their rest normal's main axis (ds_env_camsim_paint_faces)
                             and fits a 3 x 3 colour matrix per frame instead of the gain (0) */
  double image_weight;    /* weight of the image loss of the composite (1; 0: the silhouette alone) */
  double silhouette;      /* weight of the foreground-mask term L_sil (0: none) */
  double mask_threshold;  /* |v - B| above which a video pixel is the object's, [0, 1] values (0.1) */
  int premultiplied;      /* 1: the identifier renders premultiplied colour (dsRenderSettings.premultiplied) and
                             composites it as a_p + (1 - alpha_p) B_p, coverage counted once per sample (0) */
} dsSysidCamSim;

typedef struct dsSysidDef {
  dsSysidParam params[DS_SYSID_MAX_PARAMS];
  int optimizer;          /* dsSysidOptimKind */
  double lr;              /* Adam/SGD learning rate (in u); L-BFGS: first step length */
  double momentum;        /* SGD */
  int lbfgs_memory;       /* L-BFGS pairs */
  int iterations;         /* iterations (each one evaluation for Adam/SGD) */
  int video;              /* dsSysidVideoKind */
  char frames_dir[DS_SYSID_PATH_MAX];  /* DS_SYSID_FRAMES: folder of PNG frames (sorted by name) */
  char camera[DS_SYSID_PATH_MAX];      /* DS_SYSID_FRAMES: JSON camera + frame times */
  int frames;             /* dsSysidFrameSel */
  dsSysidCamSim camsim;   /* DS_SYSID_CAMSIM: the camera simulator */
  dsReal action[DS_SYSID_MAX_VEC]; /* a known action held at every step (the first naction values, the rest 0) */
  int naction;            /* 0: zero actions */
  dsSysidStage stages[DS_SYSID_MAX_STAGES]; /* sysid.stages, run in order; nstages 0: one stage, all free */
  int nstages;
  dsSysidView views[DS_SYSID_MAX_VIEWS]; /* sysid.cameras: the views of a synthetic video (nviews 0: the env's camera) */
  int nviews;
  int restarts;           /* L-BFGS stopped before the iterations ran out: start again from a new draw of
                             init_range, this many times at most; the best is the lowest loss of all (0) */
  double loss_tolerance;  /* L-BFGS stops at a loss at most this fraction of its first (1e-15: round-off) */
  uint64_t seed;          /* object draws (init_range, truth_range); object i uses seed + i
                             (not a config key: `dsim sysid` sets it from run.seed) */
} dsSysidDef;

/* Adam, lr 0.05, 60 iterations, synthetic video, all frames, no params. */
DS_API dsSysidDef ds_default_sysid_def(void);
/* Keys of a config's "sysid" section (NULL-terminated): param1 .. param8
 * (each an object: name, per_element, lower, upper, init, init_range, init_each, true,
 * true_range), optimizer, lr, momentum, lbfgs_memory, iterations, video,
 * frames_dir, camera, frames, action. */
DS_API const dsConfigKey* ds_sysid_keys(void);
/* Parse the "sysid" section into *def (holding the defaults); errors name
 * the file and "sysid.key". Checks: at least one parameter, no gap in
 * param1.., each with a name, lower < upper, init / init_range / truth
 * inside the bounds ("sysid.param2.init: 0.5 is outside the bounds
 * [1, 10]"). */
DS_API int ds_sysid_def_from_text(const char* name, const char* text, dsSysidDef* def, char* err, size_t errlen);
DS_API int ds_sysid_def_validate(const dsSysidDef* def, char* err, size_t errlen);
DS_API int ds_sysid_num_params(const dsSysidDef* def);

/* A target video: nframes RGBA frames (h x w x 4 dsReal in [0, 1], row 0 at
 * the top) at substeps (each > 0, a multiple of the control interval C or
 * the episode's last substep, increasing). */
typedef struct dsSysidVideo {
  int nframes, width, height;
  const int* substep;
  const dsReal* rgba;            /* nviews > 1: nviews x nframes frames, view by view */
  int nviews;                    /* 0 or 1: one view, the env's camera; else views[0 .. nviews) */
  const dsSysidView* views;
} dsSysidVideo;

/* Footage (video "frames"): read sd's camera file and PNG frames
 * (sd->camera, sd->frames_dir; dsim/video.h) and set def from them: the
 * image size, the camera (env.camera: look_at, distance, elevation and
 * azimuth of the position about it, fov or the intrinsics fx, fy, cx, cy;
 * the view is y-up, so not straight down or up), and the schedule (render and control interval = the greatest
 * common divisor of the frames' substeps, substeps = the last one); a frame
 * at time 0 is the initial state and left out of *out. Every input is
 * checked; errors name the file or key (DS_ERR_CONFIG, DS_ERR_IO, ...).
 * Free *out with ds_sysid_video_free. */
DS_API int ds_sysid_load_video(const dsSysidDef* sd, dsEnvDef* def, dsSysidVideo* out, char* err, size_t errlen);
DS_API void ds_sysid_video_free(dsSysidVideo* v);

/* Footage in memory or in a folder, with its camera given as values or a
 * file: what a binding (python/dsim/sysid.py) passes where `dsim sysid`
 * reads sysid.frames_dir and sysid.camera. The camera: camera_file (a
 * camera file, dsim/video.h: position, look_at, fov or intrinsics, optional
 * times) or, when it is NULL, position, look_at, and fov (vertical,
 * degrees) or the intrinsics fx, fy, cx, cy (pixels). The frames: frames_dir (PNG
 * files sorted by name) or, when it is NULL, rgba (nframes x height x
 * width x 4 in [0, 1], row 0 at the top). Frame times, in order of
 * precedence: times (nframes values, s, increasing, >= 0), the camera
 * file's, the folder's own (frames.json or the PNGs' dsim:frame chunks, as
 * `dsim export --frames` writes them); pixels without any times follow the
 * env's schedule: frame k at substep (k + 1) C, C = env.physics
 * .render_interval (the frames of a synthetic video). */
typedef struct dsSysidFootage {
  const char* camera_file;   /* NULL: position, look_at, fov */
  double position[3];        /* m */
  double look_at[3];         /* m */
  double fov;                /* degrees, (0, 180) (unused with intrinsics) */
  double fx, fy, cx, cy;     /* intrinsics, pixels (dsCamera, dsim/raster.h); fx 0: fov */
  const double* times;       /* nframes frame times, s (NULL: see above) */
  const char* frames_dir;    /* NULL: rgba */
  int nframes, width, height;
  const dsReal* rgba;        /* nframes x height x width x 4 (copied) */
} dsSysidFootage;

/* As ds_sysid_load_video, from footage: sets def's camera, image size and
 * schedule and fills *out (free it with ds_sysid_video_free). Errors name
 * "camera", "times" or "frames" and the value expected. */
DS_API int ds_sysid_footage_video(const dsSysidFootage* footage, dsEnvDef* def, dsSysidVideo* out, char* err,
                                  size_t errlen);
/* A whole sysid config's text (sections env, sysid and run, as `dsim sysid`
 * reads a file; name labels its messages) into *def and *sd: the env
 * definition, the sysid section checked (ds_sysid_def_validate), and
 * sd->seed = run.seed. */
DS_API int ds_sysid_defs_from_text(const char* name, const char* text, dsEnvDef* def, dsSysidDef* sd, char* err,
                                   size_t errlen);

typedef struct dsSysid dsSysid;

/* Create an identification of object `object` (0, 1, ...: its draws come
 * from def->seed + object) in env_def's env. video NULL: synthetic (the
 * frames at substeps C, 2C, ... rendered with the true values); otherwise
 * the caller's frames (copied; width and height must be env_def's). Every
 * parameter is checked first: a name the env does not have, one that is not
 * differentiable, a guess outside the bounds: DS_ERR_CONFIG naming
 * "sysid.paramK". */
DS_API int ds_sysid_create(const dsEnvDef* env_def, const dsSysidDef* def, int object, const dsSysidVideo* video,
                           dsSysid** out, char* err, size_t errlen);
/* ds_sysid_create from a whole config's text (ds_sysid_defs_from_text), for
 * bindings that do not mirror dsEnvDef: the video is the footage's
 * (ds_sysid_footage_video) when footage is not NULL, else the config's
 * (sysid.video "frames": ds_sysid_load_video; "synthetic": rendered). */
DS_API int ds_sysid_create_from_text(const char* name, const char* text, int object, const dsSysidFootage* footage,
                                     dsSysid** out, char* err, size_t errlen);
DS_API void ds_sysid_destroy(dsSysid* s);
DS_API const char* ds_sysid_last_error(const dsSysid* s);

typedef struct dsSysidIter {
  int iteration;          /* 0-based */
  double loss;            /* at the estimates */
  double grad_norm;       /* |dL/du| at the estimates */
  const double* values;   /* the estimates (ds_sysid_num_values), physical units */
  int evaluations;        /* episodes simulated this iteration */
} dsSysidIter;

DS_API int ds_sysid_iterate(dsSysid* s, dsSysidIter* it);
/* Why the optimiser stopped ("converged: ...", "gradient tolerance: ..."),
 * "" while it has steps left (always "" for Adam and SGD, which run every
 * iteration). A caller stops iterating when it is not "". */
DS_API const char* ds_sysid_stop_reason(const dsSysid* s);
/* Identified values (the flattened parameters, in order) and the per-param
 * split: value i belongs to parameter ds_sysid_value_param(s, i). */
DS_API int ds_sysid_num_values(const dsSysid* s);
DS_API int ds_sysid_value_param(const dsSysid* s, int i);
/* 1 when value i is held at 0 (not identified; see Parameters). */
DS_API int ds_sysid_value_fixed(const dsSysid* s, int i);
/* Current estimates (the iterate), the initial guess, and the best (lowest
 * loss) iterate seen with its loss. */
DS_API const double* ds_sysid_values(const dsSysid* s);
DS_API const double* ds_sysid_initial_values(const dsSysid* s);
DS_API const double* ds_sysid_best_values(const dsSysid* s, double* best_loss);
/* The true values (synthetic video), NULL when unknown. */
DS_API const double* ds_sysid_truth(const dsSysid* s);
/* Absolute relative error of values (NULL: the best) per parameter, into
 * are[nparams]: width 1: mean over values of |v - t| / |t|; width 3: mean
 * over rows of |v - t| / |t| (vector norms). DS_ERR_STATE without a truth. */
DS_API int ds_sysid_errors(const dsSysid* s, const double* values, double* are);
/* Material fields. Parameter k's field error at values (NULL: the best):
 * *rel_l2 = |v - t| / |t| over its identified values, and with a true
 * field (dsSysidParam.true_field) region_are[r] (DS_SYSID_MAX_REGIONS
 * values; may be NULL) the mean |v - t| / |t| over region r's elements,
 * *nregion (may be NULL) the number of regions (0: a uniform truth).
 * DS_ERR_STATE without a truth. */
DS_API int ds_sysid_field_errors(const dsSysid* s, int k, const double* values, double* rel_l2, double* region_are,
                                 int* nregion);
/* Parameter k's true-field region per element (*region: nelem values, NULL
 * without a true field); returns the number of regions (0 without). */
DS_API int ds_sysid_field_region(const dsSysid* s, int k, const int** region, int* nelem);
/* The smoothness terms (dsSysidParam.tv, .laplacian) at values: *r, and
 * dR/d(value) in physical units into grad (num_values; may be NULL). The
 * loss an iteration reports is the image loss plus r; ds_sysid_eval gives
 * the image loss alone. */
DS_API int ds_sysid_regularizer(dsSysid* s, const double* values, double* r, double* grad);
/* The stage (0-based) of sysid.stages the next iteration runs in. */
DS_API int ds_sysid_stage(const dsSysid* s);
/* Loss and gradient (dL/d(value), physical units; may be NULL) at values. */
DS_API int ds_sysid_eval(dsSysid* s, const double* values, double* loss, double* grad);
/* The frames of the last evaluation (nframes x h x w x 4) and the video's. */
DS_API const dsReal* ds_sysid_rendered(const dsSysid* s);
DS_API const dsSysidVideo* ds_sysid_video(const dsSysid* s);
/* The views the loss sums over: 1 (the env's camera) unless sysid.cameras
 * or footage of several views give more. ds_sysid_view: view v's camera
 * (position, look_at, fov or intrinsics; frames "") at the values of the
 * last evaluation or render, so camera parameters show their estimate
 * after ds_sysid_eval at it. DS_ERR_RANGE for v out of range. */
DS_API int ds_sysid_num_views(const dsSysid* s);
DS_API int ds_sysid_view(const dsSysid* s, int v, dsSysidView* out);
/* The initial state (substep 0, time 0) with values, rendered into image
 * (h x w x 4): the frame before the video's, which no parameter moves but
 * a log of the episode shows. */
DS_API int ds_sysid_render_initial(dsSysid* s, const double* values, dsReal* image);
DS_API dsEnv* ds_sysid_env(dsSysid* s);
DS_API int ds_sysid_nparams(const dsSysid* s);
DS_API const char* ds_sysid_param_name(const dsSysid* s, int p);
/* Values per element of parameter p (3 for a vector, 1 for a scalar, ...). */
DS_API int ds_sysid_param_width(const dsSysid* s, int p);

/* ---- groups ------------------------------------------------------------------
 * n objects (objects[i]: its draws, as ds_sysid_create's `object`)
 * identified together: every iteration evaluates all of them in one
 * lockstep batch (dsim/batch.h), so on a GPU (env_def->device) their
 * episodes are instances of one engine, forward and backward in one pass.
 * Each object is a dsSysid of its own (ds_sysid_group_object: values,
 * truth, errors, video, ds_sysid_eval forward only), and iterates as
 * ds_sysid_iterate would: on separate CPU engines the results are those of
 * separate objects bit for bit; on one engine to rounding. Gradient methods
 * only (adam, sgd): L-BFGS's line search is per object (DS_ERR_UNSUPPORTED). */
typedef struct dsSysidGroup dsSysidGroup;
DS_API int ds_sysid_group_create(const dsEnvDef* env_def, const dsSysidDef* def, const int* objects, int n,
                                 const dsSysidVideo* video, dsSysidGroup** out, char* err, size_t errlen);
DS_API void ds_sysid_group_destroy(dsSysidGroup* g);
DS_API int ds_sysid_group_size(const dsSysidGroup* g);
DS_API dsSysid* ds_sysid_group_object(dsSysidGroup* g, int i);
DS_API const char* ds_sysid_group_last_error(const dsSysidGroup* g);
/* One iteration of every object: its[i] as ds_sysid_iterate's, status[i]
 * (may be NULL) 0 or the object's error (ds_sysid_last_error of the
 * object); returns the first object's error or 0. An object that failed
 * stays failed; the others go on. */
DS_API int ds_sysid_group_iterate(dsSysidGroup* g, dsSysidIter* its, int* status);
/* Loss and gradient (dL/d(value), physical units) of object i at values
 * row i (n x ds_sysid_num_values), all in one pass, as ds_sysid_eval on
 * each object: losses n, grads n x values (may be NULL), status n (may be
 * NULL; a failed episode: its code, loss +inf, gradient 0). A landscape
 * evaluates a grid this way with n copies of one object. The objects'
 * iterations are not touched. */
DS_API int ds_sysid_group_eval(dsSysidGroup* g, const double* values, double* losses, double* grads, int* status);

/* ---- loss landscapes ------------------------------------------------------------
 * The loss of a sysid definition and its gradient on a grid of values of
 * the first one (1-D) or two (2-D) parameters, each a shared value (not per
 * element), every other value at its truth; the object's true values are
 * drawn from seed + object as in ds_sysid_create. With footage (video
 * "frames": ds_sysid_load_video) the truth is unknown: the other values sit
 * at their initial guesses and ds_landscape_truth is NaN. Points run in
 * parallel over `threads` objects (the values do not depend on the thread
 * count), or in lockstep batches of up to DS_LANDSCAPE_GROUP points (group:
 * on a GPU, one engine per batch). */
#define DS_LANDSCAPE_GROUP 256
#define DS_LANDSCAPE_MAX_AXIS 100000

typedef struct dsLandscapeAxis {
  double lo, hi; /* the first and last value (lo < hi) */
  int n;         /* values, 2 .. DS_LANDSCAPE_MAX_AXIS; axis[1].n = 0: a 1-D grid */
} dsLandscapeAxis;

typedef struct dsLandscapeDef {
  dsLandscapeAxis axis[2];
  int geometric;  /* 1: value i = lo (hi/lo)^(i/(n-1)) (lo > 0); 0: lo + (hi - lo) i/(n-1) */
  int object;     /* the object whose draws give the true values */
  int threads;    /* 0: ds_get_max_threads() */
  int group;      /* 1: lockstep batches (ds_sysid_group_eval) */
} dsLandscapeDef;

typedef struct dsLandscape dsLandscape;

DS_API dsLandscapeDef ds_default_landscape_def(void);
/* The definitions' checks (also made by create): axes, enough
 * parameters, shared values; errors name the key. */
DS_API int ds_landscape_check(const dsSysidDef* sd, const dsLandscapeDef* def, char* err, size_t errlen);
DS_API int ds_landscape_create(const dsEnvDef* env_def, const dsSysidDef* sd, const dsLandscapeDef* def,
                               dsLandscape** out, char* err, size_t errlen);
/* ds_landscape_create from a whole config's text, with footage as in
 * ds_sysid_create_from_text (NULL: the config's video). */
DS_API int ds_landscape_create_from_text(const char* name, const char* text, const dsLandscapeDef* def,
                                         const dsSysidFootage* footage, dsLandscape** out, char* err, size_t errlen);
DS_API void ds_landscape_destroy(dsLandscape* ls);
/* Evaluate every point (ds_set_num_threads(1) is left set on the thread
 * path: the parallelism is over the points). A diverged point is not an
 * error: its loss and gradient are NaN (ds_landscape_num_failed). */
DS_API int ds_landscape_evaluate(dsLandscape* ls);
/* Value i of an axis. */
DS_API double ds_landscape_axis_value(const dsLandscapeDef* def, int axis, int i);
DS_API int ds_landscape_dims(const dsLandscape* ls);
DS_API int ds_landscape_num_points(const dsLandscape* ls);   /* n1 (x n2) */
DS_API int ds_landscape_threads(const dsLandscape* ls);
DS_API int ds_landscape_num_failed(const dsLandscape* ls);
/* num_points rows of 5, row-major with axis 2 fastest: v1, v2 (0 in 1-D),
 * loss, d(loss)/d(v1), d(loss)/d(v2) (0 in 1-D). */
DS_API const double* ds_landscape_results(const dsLandscape* ls);
/* The point of the lowest loss (-1 when every point diverged). */
DS_API int ds_landscape_lowest(const dsLandscape* ls);
DS_API const char* ds_landscape_param_name(const dsLandscape* ls, int axis);
DS_API double ds_landscape_truth(const dsLandscape* ls, int axis);
DS_API const char* ds_landscape_last_error(const dsLandscape* ls);

#ifdef __cplusplus
}
#endif
#endif

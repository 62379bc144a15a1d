/* dsim fluids: incompressible smoke on a regular staggered (MAC) grid, 2-D
 * (nz = 1) and 3-D, with an exact hand-written adjoint of every operator.
 * docs/fluids.md gives the scheme, the boundaries and the adjoint math.
 *
 * Usage:
 *
 *   dsFluidDef def = ds_fluid_default_def();
 *   def.n[0] = def.n[1] = 64; def.n[2] = 1; def.dx = 1.0 / 64; def.dt = 0.01;
 *   def.nsource = 1; def.source[0].box = (dsFluidBox){{0.4, 0.05, 0}, {0.6, 0.15, 1}}; ...
 *   dsFluidModel* m; ds_fluid_model_create(&def, &m, err, sizeof err);
 *   dsFluidData* d; ds_fluid_data_create(m, T, 0, &d);    // tape of T steps (0: full tape)
 *   ds_fluid_reset(m, d, vel0, dens0, temp0);               // NULL: zero / ambient
 *   for (t = 0; t < T; t++) ds_fluid_step(m, d, force_t);  // force_t: NULL or ncell x dim
 *   ds_fluid_backward(m, d, dl_dvel, dl_ddens, dl_dtemp, &grad);
 *
 * Layout: cell (i, j, k) is element i + nx (j + ny k), its centre at
 * ((i + 1/2) dx, (j + 1/2) dx, (k + 1/2) dx) m. The velocity array holds the
 * normal velocities of the x faces, then the y faces, then (3-D) the z faces;
 * along its own axis a face grid has n + 1 faces (n when that axis is
 * periodic), face i lying at i dx; elsewhere it has the cells' layout.
 * ds_fluid_nface gives the counts. Units: m, s, m/s; density and
 * temperature are passive scalars in the user's units.
 *
 * Model and data as in dsim/artic.h: the model is read-only during stepping
 * and changed between rollouts by name (ds_fluid_param_set); nothing
 * allocates after ds_fluid_data_create; results are bitwise the same
 * whatever OMP_NUM_THREADS. */
#ifndef DSIM_FLUID_H
#define DSIM_FLUID_H

#include "dsim/base.h"
#include "dsim/device.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DS_FLUID_MAX_SOURCES 4
#define DS_FLUID_MAX_OBSTACLES 8
/* The largest grid a model accepts (cells); larger grids are refused. */
#define DS_FLUID_MAX_CELLS (1 << 24)

typedef enum dsFluidBoundary {
  DS_FLUID_CLOSED = 0,  /* walls: zero normal velocity on the boundary faces */
  DS_FLUID_OPEN = 1,    /* p = 0 outside (Dirichlet): flow leaves and enters freely */
  DS_FLUID_PERIODIC = 2 /* the last cell neighbours the first */
} dsFluidBoundary;

typedef enum dsFluidAdvection {
  DS_FLUID_SEMI_LAGRANGIAN = 0, /* first order, (tri)linear interpolation */
  DS_FLUID_MACCORMACK = 1       /* second order, clamped to the SL stencil's min/max (Selle et al. 2008) */
} dsFluidAdvection;

/* The pressure solver. AUTO takes the FFT solve (docs/fluids.md "FFT
 * pressure solve") when the build has FFTW and the domain allows it: no
 * solid cell and only closed or periodic walls (ds_fluid_uses_fft says
 * which); otherwise, and with PCG, MIC(0)-preconditioned conjugate
 * gradients. Both meet `tolerance`. */
typedef enum dsFluidSolver {
  DS_FLUID_SOLVER_AUTO = 0,
  DS_FLUID_SOLVER_PCG = 1
} dsFluidSolver;

/* An axis-aligned box, m (z ignored in 2-D). */
typedef struct dsFluidBox {
  double lo[3], hi[3];
} dsFluidBox;

/* An inflow: the cells whose centres lie in `box` gain density and
 * temperature at the given rates; when set_velocity is 1 the faces in the
 * box take `velocity` before the projection. Named parameters
 * source.K.density_rate, source.K.temperature_rate, source.K.velocity.{x,y,z}. */
typedef struct dsFluidSource {
  dsFluidBox box;
  double density_rate;     /* per s */
  double temperature_rate; /* per s */
  int set_velocity;
  double velocity[3]; /* m/s */
} dsFluidSource;

/* A soft obstacle (Brinkman penalisation, docs/fluids.md "Soft
 * obstacles"): a box of centre `center` and half sides `half` with
 * smooth walls of width `width`, inside which velocity, density and
 * temperature are damped at rate `damping` (implicitly, before each step's
 * advection); the projection then routes the flow round it. Unlike the
 * solid boxes it is differentiable in its position: named parameters
 * soft.K.position.{x,y,z} and soft.K.damping. It leaves every cell fluid,
 * so the FFT pressure solve stays available. */
#define DS_FLUID_MAX_SOFT 4
typedef struct dsFluidSoftObstacle {
  double center[3]; /* m */
  double half[3];   /* half sides, m, > 0 on the grid's axes */
  double width;     /* wall width, m, > 0 (about a cell or two) */
  double damping;   /* 1/s, >= 0 (some 10 / dt makes it nearly solid) */
} dsFluidSoftObstacle;

/* Named parameters: buoyancy.alpha, buoyancy.beta, ambient_temperature,
 * gravity.{x,y,z}, the sources' and the soft obstacles'. The buoyant acceleration on the faces
 * normal to axis up_axis is (alpha * density - beta * (T - ambient)) (cell
 * values averaged onto the face): alpha > 0 lifts smoke, beta < 0 lifts hot
 * gas. Obstacles are cells whose centres lie in a box or are marked in
 * solid_cells (solid: their faces carry no flow; density and temperature
 * there are zero); their position
 * is not a differentiable parameter (docs/fluids.md says why). */
typedef struct dsFluidDef {
  int n[3];                  /* cells per axis, >= 1; n[2] = 1: 2-D */
  double dx;                 /* cell size, m, > 0 */
  double dt;                 /* step, s, > 0 */
  dsFluidBoundary boundary[3];
  dsFluidAdvection advection;
  double alpha, beta;        /* buoyancy coefficients, m/s^2 per unit density / temperature */
  double ambient_temperature;
  int up_axis;               /* 0, 1 or (3-D) 2: the buoyancy direction */
  double gravity[3];         /* uniform acceleration on every face, m/s^2 */
  int force_field;           /* 1: ds_fluid_step takes a per-cell force field (kept on the tape) */
  double cfl_max;            /* a step with dt max|u| / dx above it is refused, > 0 */
  double tolerance;          /* pressure solve: max|residual| <= tolerance * max|rhs|, in (0, 1) */
  int max_iterations;        /* pressure solve, >= 1; not converging is an error */
  int nsource;
  dsFluidSource source[DS_FLUID_MAX_SOURCES];
  int nobstacle;
  dsFluidBox obstacle[DS_FLUID_MAX_OBSTACLES];
  int solver;                /* dsFluidSolver: the pressure solve (AUTO) */
  /* More solid cells (ncell, nonzero = solid; NULL: none), e.g. the
   * voxelised shape of a mesh (ds_fluid_voxelize_mesh): added to the
   * boxes' cells. Copied at create (the model's def then holds NULL). */
  const unsigned char* solid_cells;
  int nsoft;
  dsFluidSoftObstacle soft[DS_FLUID_MAX_SOFT];
} dsFluidDef;

typedef struct dsFluidModel dsFluidModel;
typedef struct dsFluidData dsFluidData;

/* Gradients of a loss, caller-owned arrays; any may be NULL (not written;
 * written ones are overwritten, not added to). */
typedef struct dsFluidGrad {
  double* velocity0;    /* nvel: the initial face velocities */
  double* density0;     /* ncell */
  double* temperature0; /* ncell */
  double* force;        /* steps x ncell x dim: each step's force field */
  double* force_total;  /* ncell x dim: the sum over steps (a force held constant) */
  double* param;        /* nparam, in ds_fluid_param_name order */
} dsFluidGrad;

/* 32 x 32 x 1, dx 1/32 m, dt 0.01 s, closed box, semi-Lagrangian, alpha 1,
 * beta 0, ambient 0, up y, no gravity, cfl_max 5, tolerance 1e-10, 2,000
 * iterations, no sources or obstacles, solver AUTO. */
DS_API dsFluidDef ds_fluid_default_def(void);
/* Validates every value (grid sizes, boxes inside the grid, finite
 * parameters, ...): 0 and *out, or DS_ERR_INVALID (DS_ERR_RANGE for a grid
 * beyond DS_FLUID_MAX_CELLS, DS_ERR_NOMEM) with the message in err naming
 * the key ("n[1]", "obstacle[0].hi", "cfl_max") and the expected value. */
DS_API int ds_fluid_model_create(const dsFluidDef* def, dsFluidModel** out, char* err, size_t errlen);
DS_API void ds_fluid_model_free(dsFluidModel* m);
DS_API int ds_fluid_dim(const dsFluidModel* m);  /* 2 or 3 */
DS_API int ds_fluid_ncell(const dsFluidModel* m);
DS_API int ds_fluid_nvel(const dsFluidModel* m); /* all faces */
/* Faces normal to axis a (0 when a >= dim). */
DS_API int ds_fluid_nface(const dsFluidModel* m, int axis);
/* Voxelises a closed triangle mesh (vertices x: nvert x 3, m; triangles
 * tri: ntri x 3 vertex indices) on def's grid: sets solid[c] = 1 for every
 * cell c whose centre the mesh encloses, leaving the other cells as they
 * are (so several meshes and def.solid_cells combine). Inside means a
 * nonzero winding number, counted along a ray in +x through the centre, so
 * the triangles' orientation does not matter and overlapping parts are
 * one solid. In 2-D (n[2] = 1) the mesh is cut by the plane z = 0. The
 * rays pass a fixed, tiny (1e-7 dx) offset from the centres, so a face or
 * an edge through a centre counts once. DS_ERR_INVALID naming the
 * vertex or triangle for a non-finite coordinate or an index out of range;
 * DS_ERR_NOMEM. */
DS_API int ds_fluid_voxelize_mesh(const dsFluidDef* def, const double* x, int nvert, const int* tri, int ntri,
                                  unsigned char* solid, char* err, size_t errlen);
/* 1 for the cells inside an obstacle (ncell). */
DS_API const unsigned char* ds_fluid_solid(const dsFluidModel* m);
DS_API const dsFluidDef* ds_fluid_def(const dsFluidModel* m);

/* Parameters by name, as ds_artic_param_*: set refuses NaN and Inf with
 * DS_ERR_RANGE; unknown names give DS_ERR_NOTFOUND. */
DS_API int ds_fluid_nparam(const dsFluidModel* m);
DS_API const char* ds_fluid_param_name(const dsFluidModel* m, int i);
DS_API int ds_fluid_param_index(const dsFluidModel* m, const char* name);
DS_API int ds_fluid_param_get(const dsFluidModel* m, const char* name, double* value);
DS_API int ds_fluid_param_set(dsFluidModel* m, const char* name, double value);

/* Data with a tape of `steps` steps. checkpoint_every K <= 1 keeps every
 * state; K > 1 keeps every K-th and the backward pass recomputes the
 * segments between them (same gradients bit for bit, memory / K). */
DS_API int ds_fluid_data_create(const dsFluidModel* m, int steps, int checkpoint_every, dsFluidData** out);
DS_API void ds_fluid_data_free(dsFluidData* d);
/* Bytes ds_fluid_data_create(m, steps, checkpoint_every) allocates (the
 * tape and the scratch): for memory bounds, before creating it. */
DS_API size_t ds_fluid_data_bytes(const dsFluidModel* m, int steps, int checkpoint_every);
/* The last error's message ("" when none). */
DS_API const char* ds_fluid_last_error(const dsFluidData* d);
/* Rewinds to step 0 with the given fields (NULL: zero velocity and density,
 * ambient temperature). Velocities on closed or solid faces are zeroed.
 * DS_ERR_INVALID naming the field and element for NaN or Inf. */
DS_API int ds_fluid_reset(const dsFluidModel* m, dsFluidData* d, const double* velocity, const double* density,
                          const double* temperature);
/* Rewinds to step t (0 .. steps taken) and puts the given fields there (as
 * ds_fluid_reset takes them: NULL zero / ambient, closed and solid faces
 * and solid cells zeroed); the tape before t is kept, steps go on from t.
 * A backward through t then differentiates the state set (the adjoint of
 * state t is that of these fields); one that goes on below t takes the
 * set state as step t - 1's output plus a constant (dsim/env.h's rule):
 * step t - 1's adjoint is evaluated at its own output, recomputed from
 * state t - 1, so full and checkpointed tapes agree bit for bit. With checkpoint_every K > 1, a state
 * set at a t that is not a multiple of K (and is not the current state
 * unchanged, unless t was marked already) cannot be recomputed by a backward, which refuses to go
 * through that segment (DS_ERR_RANGE). DS_ERR_RANGE for t out of range,
 * DS_ERR_INVALID naming the field and element for NaN or Inf (the state
 * is then unchanged). */
DS_API int ds_fluid_set_state(const dsFluidModel* m, dsFluidData* d, int t, const double* velocity,
                              const double* density, const double* temperature);
/* One step with a per-cell force field (ncell x dim accelerations, m/s^2;
 * NULL: none; non-NULL needs def.force_field). DS_ERR_STATE when the tape is
 * full, DS_ERR_RANGE when dt max|u| / dx exceeds cfl_max, DS_ERR_DIVERGED
 * when the pressure solve does not converge or a value is NaN (the message
 * names the step and the residual); a failed step is not recorded. */
DS_API int ds_fluid_step(const dsFluidModel* m, dsFluidData* d, const double* force);
DS_API int ds_fluid_steps(const dsFluidData* d);
/* The current state (after the last step). */
DS_API const double* ds_fluid_velocity(const dsFluidData* d);
DS_API const double* ds_fluid_density(const dsFluidData* d);
DS_API const double* ds_fluid_temperature(const dsFluidData* d);
/* Iterations and max|residual| / max|rhs| of the last pressure solve
 * (iterations 0: the FFT solve met the tolerance). */
DS_API void ds_fluid_solver_stats(const dsFluidData* d, int* iterations, double* residual);
/* 1 when the model's pressure solves go through the FFT (see dsFluidSolver), else 0. */
DS_API int ds_fluid_uses_fft(const dsFluidModel* m);

/* Adjoint of a loss L on the current (final) state: dl_dvel (nvel),
 * dl_ddens, dl_dtemp (ncell), NULL for zero. Writes g's non-NULL arrays.
 * DS_ERR_DIVERGED when an adjoint pressure solve does not converge. */
DS_API int ds_fluid_backward(const dsFluidModel* m, dsFluidData* d, const double* dl_dvel, const double* dl_ddens,
                             const double* dl_dtemp, const dsFluidGrad* g);

/* ds_fluid_backward for a loss that also reads the density of earlier
 * states (the frames of a video): nterm terms, the k-th dL/d(density after
 * step at[k]) in dl_ddens_at[k] (ncell; at[k] in [0, steps taken], 0: the
 * initial state; several terms may share a step), added to the final
 * state's dl_ddens. One backward sweep for all of them. DS_ERR_INVALID for
 * a step out of range (the message names the term). */
DS_API int ds_fluid_backward_terms(const dsFluidModel* m, dsFluidData* d, const double* dl_dvel,
                                   const double* dl_ddens, const double* dl_dtemp, int nterm, const int* at,
                                   const double* const* dl_ddens_at, const dsFluidGrad* g);

/* The backward of steps t0 .. t1 - 1 only (0 <= t0 <= t1 <= steps taken),
 * for windows of an episode: dl_dvel, dl_ddens, dl_dtemp (NULL: zero) are
 * dL/d(state after step t1 - 1), the terms (at[k] in [t0, t1]) as in
 * ds_fluid_backward_terms; g's state arrays (velocity0, density0,
 * temperature0) get dL/d(state at step t0), g->force rows t0 .. t1 - 1
 * (other rows untouched), force_total and param the window's sums. The
 * same recursion as the whole backward, stopped at t0: two windows
 * [t0, t1), [t1, t2) chained by the later one's state adjoint equal one
 * window [t0, t2) up to rounding. Nothing is allocated. */
DS_API int ds_fluid_backward_window(const dsFluidModel* m, dsFluidData* d, int t0, int t1, const double* dl_dvel,
                                    const double* dl_ddens, const double* dl_dtemp, int nterm, const int* at,
                                    const double* const* dl_ddens_at, const dsFluidGrad* g);

/* Divergence of a velocity field per cell (ncell, 1/s; 0 in solid cells). */
DS_API int ds_fluid_divergence(const dsFluidModel* m, const double* velocity, double* div);

/* 2-D density as an image (DS_ERR_UNSUPPORTED in 3-D): rgba (ny x nx x 4,
 * row 0 at the top, y up; alpha 1) = bg + (smoke - bg) t with
 * t = 1 - exp(-scale rho), a smooth map from a dark background to white
 * smoke (DS_FLUID_RENDER_BG, DS_FLUID_RENDER_SMOKE), scale > 0 per unit
 * density; solid cells (obstacles) in DS_FLUID_RENDER_SOLID. The backward
 * adds dL/drho = sum_ch g_rgba (smoke - bg)_ch scale exp(-scale rho) into
 * g_density (ncell; nothing for solid cells). The same as
 * ds_fluid_render_density_map with the DS_FLUID_COLORMAP_SMOKE map. */
#define DS_FLUID_RENDER_BG {0.05, 0.07, 0.12}
#define DS_FLUID_RENDER_SMOKE {0.95, 0.95, 0.95}
#define DS_FLUID_RENDER_SOLID {0.45, 0.38, 0.30}
DS_API int ds_fluid_render_density(const dsFluidModel* m, const double* density, double scale, dsReal* rgba);
DS_API int ds_fluid_render_density_bwd(const dsFluidModel* m, const double* density, double scale,
                                       const dsReal* g_rgba, double* g_density);

/* A colour map of t = 1 - exp(-scale rho) in [0, 1): n colour stops
 * (2 <= n <= DS_FLUID_COLORMAP_MAX) with t[0] = 0 < t[1] < ... < t[n-1] = 1
 * and rgb in [0, 1], linearly interpolated between stops:
 *   colour(t) = rgb[k] + (rgb[k+1] - rgb[k]) (t - t[k]) / (t[k+1] - t[k]),
 * k the last stop with t[k] <= t (k <= n - 2; t < 0, from a negative
 * density, extends the first segment). Piecewise linear in t: the
 * derivative jumps at the stops, where the backward takes the segment the
 * forward used (the one starting at the stop). */
#define DS_FLUID_COLORMAP_MAX 32
typedef struct dsFluidColormap {
  int n;                                /* stops */
  double t[DS_FLUID_COLORMAP_MAX];      /* stop positions, 0 first, 1 last, increasing */
  double rgb[DS_FLUID_COLORMAP_MAX][3]; /* stop colours, each in [0, 1] */
} dsFluidColormap;

/* The stock maps: SMOKE, today's default (DS_FLUID_RENDER_BG to
 * DS_FLUID_RENDER_SMOKE, two stops); VIRIDIS and INFERNO (17 stops of the
 * published 256-entry tables, every 16th entry and the last); GREY (black
 * to white). */
typedef enum dsFluidColormapName {
  DS_FLUID_COLORMAP_SMOKE,
  DS_FLUID_COLORMAP_VIRIDIS,
  DS_FLUID_COLORMAP_INFERNO,
  DS_FLUID_COLORMAP_GREY
} dsFluidColormapName;

/* Fills *map with a stock map; DS_ERR_INVALID for an unknown name. */
DS_API int ds_fluid_colormap(dsFluidColormapName name, dsFluidColormap* map);

/* 0 or DS_ERR_INVALID with a message in err naming the stop and the
 * expected value (a stop count out of range, t[0] != 0, t[n-1] != 1, t
 * not increasing, a colour out of [0, 1]). */
DS_API int ds_fluid_colormap_check(const dsFluidColormap* map, char* err, size_t errlen);

/* The density image through a colour map (NULL: DS_FLUID_COLORMAP_SMOKE),
 * solid cells in DS_FLUID_RENDER_SOLID. The backward adds
 *   dL/drho = sum_ch g_rgba_ch (rgb[k+1] - rgb[k])_ch / (t[k+1] - t[k])
 *             scale exp(-scale rho)
 * into g_density (nothing for solid cells). DS_ERR_INVALID for a map that
 * ds_fluid_colormap_check refuses. */
DS_API int ds_fluid_render_density_map(const dsFluidModel* m, const double* density, double scale,
                                       const dsFluidColormap* map, dsReal* rgba);
DS_API int ds_fluid_render_density_map_bwd(const dsFluidModel* m, const double* density, double scale,
                                           const dsFluidColormap* map, const dsReal* g_rgba, double* g_density);


/* ---- batches: B instances of one model on a device ------------------------
 *
 * The same step as ds_fluid_step for B instances that share the model's
 * grid, solids, sources, soft obstacles' shapes and solver settings, each
 * with its own parameter values (every name of ds_fluid_param_name:
 * buoyancy, ambient temperature, gravity, source rates and velocities,
 * soft obstacles' centres and damping; copied from the model at create)
 * and its own force field. Each instance's states are those of the serial
 * engine with that instance's parameters, bit for bit, on the CPU device
 * for any thread count (docs/fluids.md "In the batched engine and on
 * CUDA"). The pressure solve is PCG: a model whose solves would go
 * through the FFT (ds_fluid_uses_fft) is refused. Everything is allocated
 * at create; the model must outlive the batch and is not written. */
typedef struct dsFluidBatch dsFluidBatch;

/* B >= 1 instances with a tape of `steps` steps (checkpoint_every as
 * ds_fluid_data_create: states 0, K, 2K, ... kept) on `device`
 * (ds_device_cpu(), or a CUDA device). DS_ERR_INVALID naming the argument
 * (B <= 0, steps < 0, the FFT solve), DS_ERR_UNSUPPORTED for a device this
 * build or machine lacks, DS_ERR_NOMEM (the message gives the bytes). */
DS_API int ds_fluid_batch_create(const dsFluidModel* m, int B, int steps, int checkpoint_every, dsDevice device,
                                 dsFluidBatch** out, char* err, size_t errlen);
DS_API void ds_fluid_batch_free(dsFluidBatch* fb);
/* The last error's message ("" when none). */
DS_API const char* ds_fluid_batch_last_error(const dsFluidBatch* fb);
DS_API int ds_fluid_batch_size(const dsFluidBatch* fb);
DS_API int ds_fluid_batch_steps(const dsFluidBatch* fb); /* steps taken */
/* Instance b's parameter (b = -1: every instance): DS_ERR_RANGE for b out
 * of range or a value NaN or Inf, DS_ERR_NOTFOUND for an unknown name. It
 * takes effect from the next step (the ambient temperature also at the
 * next reset). */
DS_API int ds_fluid_batch_set_param(dsFluidBatch* fb, int b, const char* name, double value);
/* Instance b's value (b in 0 .. B - 1; DS_ERR_RANGE, DS_ERR_NOTFOUND). */
DS_API int ds_fluid_batch_get_param(const dsFluidBatch* fb, int b, const char* name, double* value);
/* Rewinds every instance to step 0 with the given fields, as ds_fluid_reset
 * takes them (NULL: zero velocity and density, the instance's ambient
 * temperature): per_instance 0, one field for all (nvel, ncell, ncell);
 * 1, B of them one after another (B x nvel, B x ncell, B x ncell).
 * DS_ERR_INVALID naming the field, instance and element for NaN or Inf. */
DS_API int ds_fluid_batch_reset(dsFluidBatch* fb, const double* velocity, const double* density,
                                const double* temperature, int per_instance);
/* ds_fluid_set_state for every instance: rewind to step t (0 .. steps taken) and put the fields
   there (per_instance as in ds_fluid_batch_reset; NULL: zero / the instance's ambient
   temperature; closed and solid faces and solid cells zeroed); same checkpoint rules and errors
   as ds_fluid_set_state (a set state off a checkpoint marks t, a backward recomputing through it
   is refused, a bitwise-unchanged current state leaves no mark). The batch has one tape, so the
   state counts as unchanged only when every instance's is. DS_ERR_RANGE for t out of range,
   DS_ERR_INVALID naming the field, instance and element for NaN or Inf (nothing then moves). */
DS_API int ds_fluid_batch_set_state(dsFluidBatch* fb, int t, const double* velocity,
                                    const double* density, const double* temperature, int per_instance);
/* One step of every instance with force fields (B x ncell x dim, instance
 * after instance; NULL: none; non-NULL needs def.force_field).
 * DS_ERR_STATE when the tape is full, DS_ERR_RANGE when an instance's CFL
 * number exceeds cfl_max, DS_ERR_DIVERGED when an instance's pressure solve
 * does not converge or its state has a NaN: the message names the step and
 * the first such instance, and the step is not taken (no instance moves). */
DS_API int ds_fluid_batch_step(dsFluidBatch* fb, const double* force);
/* Instance b's current state into the non-NULL arrays (nvel, ncell, ncell). */
DS_API int ds_fluid_batch_state(dsFluidBatch* fb, int b, double* velocity, double* density, double* temperature);
/* The backward of every instance's episode (the steps taken) from the
 * adjoints of its final state: dl_dvel (B x nvel), dl_ddens, dl_dtemp
 * (B x ncell), NULL for zero. Writes g's non-NULL arrays, each B times
 * ds_fluid_backward's, instance after instance: velocity0 (B x nvel),
 * density0, temperature0 (B x ncell), force (B x steps x ncell x dim),
 * force_total (B x ncell x dim), param (B x nparam). Each instance's are
 * ds_fluid_backward's with its parameters, bit for bit; with checkpoints
 * the segments are recomputed as there. DS_ERR_DIVERGED naming the step
 * and instance when an adjoint pressure solve does not converge. */
DS_API int ds_fluid_batch_backward(dsFluidBatch* fb, const double* dl_dvel, const double* dl_ddens,
                                   const double* dl_dtemp, const dsFluidGrad* g);
/* ds_fluid_backward_terms per instance: term k is dL/d(density after step at[k]) of every
   instance, dl_ddens_at[k] holding B x ncell values (instance after instance). Each instance's
   results are ds_fluid_backward_terms' bit for bit (the terms join the running adjoint on the
   device in the serial order: per step, terms in k order). DS_ERR_INVALID naming the term for a
   step out of [0, steps taken] or a NULL array; DS_ERR_RANGE for a state set off a checkpoint
   in a segment the backward would recompute. */
DS_API int ds_fluid_batch_backward_terms(dsFluidBatch* fb, const double* dl_dvel, const double* dl_ddens,
                                         const double* dl_dtemp, int nterm, const int* at,
                                         const double* const* dl_ddens_at, const dsFluidGrad* g);
/* ds_fluid_backward_window per instance: steps t0 .. t1 - 1, seeds dL/d(state t1) (B x ...),
   terms as above with at[k] in [t0, t1]; g's state arrays get dL/d(state t0) (B x ...),
   g->force rows t0 .. t1 - 1 of each instance (layout B x steps x ncell x dim as the whole
   backward's; other rows untouched), force_total and param the window's sums (B x ...).
   DS_ERR_RANGE for 0 <= t0 <= t1 <= steps taken not holding, or a set mark (as above). */
DS_API int ds_fluid_batch_backward_window(dsFluidBatch* fb, int t0, int t1, const double* dl_dvel,
                                          const double* dl_ddens, const double* dl_dtemp, int nterm,
                                          const int* at, const double* const* dl_ddens_at,
                                          const dsFluidGrad* g);
/* Instance b's last pressure solve (a step's, or a backward's):
 * iterations, max|residual| / max|rhs|. */
DS_API void ds_fluid_batch_solver_stats(const dsFluidBatch* fb, int b, int* iterations, double* residual);

#ifdef __cplusplus
}
#endif

#endif

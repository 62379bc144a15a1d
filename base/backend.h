/* The device layer: one table of what a backend does (memory, copies,
 * launches, sync, its devices), one implementation for the host and one
 * for CUDA, and the one place that picks between them (ds__backend).
 *
 * Drivers (the batched engine, engine/batch_sim.c; the batched renderer,
 * render/raster_batch.c; the envs that pair them) hold a `const dsBackend*`
 * and never ask which one it is. Which backends exist is settled by the
 * build alone: with --enable-cuda, cuda/batch.cu defines ds__cuda_backend;
 * without it base/backend_none.c does (returning NULL). No other file of
 * the library tests DS_HAVE_CUDA, and nothing calls into cuda/ except
 * through this table.
 *
 * Launches carry the stage arguments of the area that owns the stages
 * (engine/batch_body.h: dsBatchLaunch; render/raster_stages.h:
 * dsrBatchArgs; engine/fluid_batch_body.h: dsFluidBatchArgs); the table
 * names them as incomplete types, so base/ includes nothing of those
 * areas. The host's launchers are defined by the areas whose stage bodies
 * they loop over (ds__host_batch_* in engine/batch_cpu.c,
 * ds__host_raster_run in render/raster_batch.c, ds__host_fluid_run in
 * engine/fluid_batch.c) and only gathered into a table here
 * (base/backend.c). Not installed. */
#ifndef DSIM_BASE_BACKEND_H
#define DSIM_BASE_BACKEND_H

#include <stddef.h>

#include "dsim/device.h"

#ifdef __cplusplus
extern "C" {
#endif

struct dsBatchLaunch; /* engine/batch_body.h */
struct dsrBatchArgs;  /* render/raster_stages.h */
struct dsFluidBatchArgs; /* engine/fluid_batch_body.h */

/* Functions return 0 or a negative DS_ERR_*; last_error(ctx) has the
 * backend's own words for the last failure. */
typedef struct dsBackend {
  const char* name;
  /* devices */
  int (*device_count)(void);                      /* visible devices; 0 when none */
  int (*device_props)(int i, dsDeviceInfo* info); /* i < device_count() */
  /* a context: one device, one ordered stream of work */
  int (*open)(int device, void** ctx, char* err, size_t errlen);
  void (*close)(void* ctx);
  int (*free_bytes)(void* ctx, size_t* bytes); /* memory available */
  /* memory and copies (put: host to backend, get: backend to host after
   * every launch before it, copy and zero: within the backend) */
  void* (*alloc)(void* ctx, size_t bytes); /* zeroed; NULL on failure */
  void (*release)(void* ctx, void* p);
  int (*put)(void* ctx, void* dst, const void* src, size_t bytes);
  int (*get)(void* ctx, void* dst, const void* src, size_t bytes);
  int (*copy)(void* ctx, void* dst, const void* src, size_t bytes);
  int (*zero)(void* ctx, void* dst, size_t bytes);
  /* launches, in order after every launch before them */
  int (*run_batch)(void* ctx, const struct dsBatchLaunch* l); /* batched engine stages */
  int (*run_raster)(void* ctx, int stage, const struct dsrBatchArgs* a, int count, int B); /* renderer stages */
  int (*run_fluid)(void* ctx, int stage, const struct dsFluidBatchArgs* a, int count, int B); /* fluid stages */
  /* sync: wait for every launch and copy before it */
  int (*sync)(void* ctx);
  const char* (*last_error)(void* ctx);
} dsBackend;

/* The backend of a device kind; NULL when this build has none (CUDA
 * without --enable-cuda). */
const dsBackend* ds__backend(dsDeviceKind kind);

/* cuda/batch.cu with --enable-cuda, base/backend_none.c (NULL) without. */
const dsBackend* ds__cuda_backend(void);

/* The host's pieces, defined by their areas (see the top comment). */
int ds__host_batch_open(int device, void** ctx, char* err, size_t errlen);
void ds__host_batch_close(void* ctx);
int ds__host_batch_run(void* ctx, const struct dsBatchLaunch* l);
int ds__host_raster_run(void* ctx, int stage, const struct dsrBatchArgs* a, int count, int B);
int ds__host_fluid_run(void* ctx, int stage, const struct dsFluidBatchArgs* a, int count, int B);

#ifdef __cplusplus
}
#endif
#endif

/* The host backend's table and the choice of a backend (base/backend.h). */
#include "config.h"

#include "base/backend.h"
#include "base/internal.h"

static int host_count(void) { return 1; }

static int host_props(int i, dsDeviceInfo* info) {
  (void)i;
  (void)info;
  return DS_ERR_UNSUPPORTED; /* the host is described by dsim info, not as a device */
}

static int host_free_bytes(void* ctx, size_t* bytes) {
  (void)ctx;
  *bytes = ds_memory_limit();
  return 0;
}

static int host_sync(void* ctx) {
  (void)ctx;
  return 0; /* host launches return when done */
}

static const char* host_last_error(void* ctx) {
  (void)ctx;
  return "";
}

static const dsBackend kHost = {
    .name = "cpu",
    .device_count = host_count,
    .device_props = host_props,
    .open = ds__host_batch_open,
    .close = ds__host_batch_close,
    .free_bytes = host_free_bytes,
    .alloc = ds__host_alloc,
    .release = ds__host_release,
    .put = ds__host_move,
    .get = ds__host_move,
    .copy = ds__host_move,
    .zero = ds__host_zero,
    .run_batch = ds__host_batch_run,
    .run_raster = ds__host_raster_run,
    .run_fluid = ds__host_fluid_run,
    .sync = host_sync,
    .last_error = host_last_error,
};

const dsBackend* ds__backend(dsDeviceKind kind) { return kind == DS_DEVICE_CUDA ? ds__cuda_backend() : &kHost; }

// The CUDA backend of the batched engine (engine/batch_priv.h): device
// memory, transfers on one stream per batch, and one kernel launch per
// stage of engine/batch_body.h, one thread per (instance, index) pair,
// instance-major as the CPU backend's loop. The bodies are the CPU's, so
// nothing of the physics lives here; stage order, tape and offsets are
// engine/batch_sim.c's. No atomics: every thread writes its own cells.
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

#include "engine/batch_priv.h"

namespace {

struct Ctx {
  int device;
  cudaStream_t stream;
  char msg[256];
};

int fail(Ctx* c, cudaError_t e, const char* what) {
  snprintf(c->msg, sizeof c->msg, "%s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
  cudaGetLastError();
  return DS_ERR_CUDA;
}

/* The batch's context, its device made current (the calling thread may
 * have used another device since the last call). */
Ctx* use(void* ctx) {
  Ctx* c = (Ctx*)ctx;
  cudaSetDevice(c->device);
  return c;
}

template <int S>
__global__ void __launch_bounds__(256) stage_kernel(const dsBatchArgs a, int count, long long n) {
  const long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) ds__bstage_run(S, &a, (int)(k % count), (int)(k / count));
}

int cu_open(int device, void** out, char* err, size_t errlen) {
  Ctx* c = (Ctx*)calloc(1, sizeof(Ctx));
  if (!c) return DS_ERR_NOMEM;
  c->device = device;
  cudaError_t e = cudaSetDevice(device);
  if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking);
  if (e != cudaSuccess) {
    if (err && errlen)
      snprintf(err, errlen, "batch device cuda:%d: cannot start it: %s", device, cudaGetErrorString(e));
    cudaGetLastError();
    free(c);
    return DS_ERR_CUDA;
  }
  *out = c;
  return 0;
}

void cu_close(void* ctx) {
  Ctx* c = (Ctx*)ctx;
  if (!c) return;
  cudaSetDevice(c->device);
  cudaStreamSynchronize(c->stream);
  cudaStreamDestroy(c->stream);
  free(c);
}

int cu_free_bytes(void* ctx, size_t* bytes) {
  Ctx* c = (Ctx*)ctx;
  size_t fr = 0, tot = 0;
  cudaSetDevice(c->device);
  cudaError_t e = cudaMemGetInfo(&fr, &tot);
  if (e != cudaSuccess) return fail(c, e, "cudaMemGetInfo");
  const size_t margin = (size_t)256 << 20; /* the runtime's own and the kernels' stacks */
  *bytes = fr > margin ? fr - margin : 0;
  return 0;
}

void* cu_alloc(void* ctx, size_t bytes) {
  Ctx* c = (Ctx*)ctx;
  void* p = nullptr;
  cudaSetDevice(c->device);
  cudaError_t e = cudaMalloc(&p, bytes ? bytes : 1);
  if (e != cudaSuccess) {
    fail(c, e, "cudaMalloc");
    return nullptr;
  }
  e = cudaMemsetAsync(p, 0, bytes ? bytes : 1, c->stream);
  if (e == cudaSuccess) e = cudaStreamSynchronize(c->stream);
  if (e != cudaSuccess) {
    fail(c, e, "cudaMemset");
    cudaFree(p);
    return nullptr;
  }
  return p;
}

void cu_release(void* ctx, void* p) {
  Ctx* c = (Ctx*)ctx;
  if (!p || !c) return;
  cudaSetDevice(c->device);
  cudaStreamSynchronize(c->stream);
  cudaFree(p);
}

/* Host to device: pageable host memory is staged before the call returns,
 * so the caller may reuse its buffer at once. */
int cu_put(void* ctx, void* dst, const void* src, size_t bytes) {
  Ctx* c = use(ctx);
  if (!bytes) return 0;
  cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, c->stream);
  return e == cudaSuccess ? 0 : fail(c, e, "copy to the device");
}

int cu_get(void* ctx, void* dst, const void* src, size_t bytes) {
  Ctx* c = use(ctx);
  cudaError_t e = bytes ? cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, c->stream) : cudaSuccess;
  if (e == cudaSuccess) e = cudaStreamSynchronize(c->stream);
  return e == cudaSuccess ? 0 : fail(c, e, "copy from the device (or a kernel before it)");
}

int cu_copy(void* ctx, void* dst, const void* src, size_t bytes) {
  Ctx* c = use(ctx);
  if (!bytes) return 0;
  cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, c->stream);
  return e == cudaSuccess ? 0 : fail(c, e, "device copy");
}

int cu_zero(void* ctx, void* dst, size_t bytes) {
  Ctx* c = use(ctx);
  if (!bytes) return 0;
  cudaError_t e = cudaMemsetAsync(dst, 0, bytes, c->stream);
  return e == cudaSuccess ? 0 : fail(c, e, "cudaMemsetAsync");
}

int cu_run(void* ctx, int stage, const dsBatchArgs* a, int count) {
  Ctx* c = use(ctx);
  const long long n = (long long)count * a->B;
  if (n <= 0) return 0;
  const int threads = 256;
  const unsigned blocks = (unsigned)((n + threads - 1) / threads);
#define DS__LAUNCH(S) \
  case S: stage_kernel<S><<<blocks, threads, 0, c->stream>>>(*a, count, n); break;
  switch (stage) {
    DS__LAUNCH(DS__BS_SPRING_FWD)
    DS__LAUNCH(DS__BS_TRI_FWD)
    DS__LAUNCH(DS__BS_AERO_FWD)
    DS__LAUNCH(DS__BS_BEND_FWD)
    DS__LAUNCH(DS__BS_TET_FWD)
    DS__LAUNCH(DS__BS_GATHER_FWD)
    DS__LAUNCH(DS__BS_INTEG_BWD)
    DS__LAUNCH(DS__BS_SPRING_BWD)
    DS__LAUNCH(DS__BS_TRI_BWD)
    DS__LAUNCH(DS__BS_AERO_BWD)
    DS__LAUNCH(DS__BS_BEND_BWD)
    DS__LAUNCH(DS__BS_TET_BWD)
    DS__LAUNCH(DS__BS_GATHER_BWD)
    DS__LAUNCH(DS__BS_REDUCE)
    DS__LAUNCH(DS__BS_FINISH)
    DS__LAUNCH(DS__BS_CHECK)
    DS__LAUNCH(DS__BS_RESET)
    DS__LAUNCH(DS__BS_ADD_ADJ)
    DS__LAUNCH(DS__BS_ACCUMULATE)
    default:
      snprintf(c->msg, sizeof c->msg, "unknown stage %d", stage);
      return DS_ERR_INVALID;
  }
#undef DS__LAUNCH
  cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? 0 : fail(c, e, "kernel launch");
}

const char* cu_last_error(void* ctx) { return ctx ? ((Ctx*)ctx)->msg : ""; }

const dsBatchBackend cuda_backend = {"cuda", cu_open, cu_close, cu_free_bytes, cu_alloc, cu_release, cu_put,
                                     cu_get, cu_copy, cu_zero, cu_run, cu_last_error};

}  // namespace

extern "C" const dsBatchBackend* ds__cuda_batch_backend(void) { return &cuda_backend; }

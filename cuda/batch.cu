// The CUDA backend: the device layer's table (base/backend.h) for CUDA
// devices. Device memory, transfers on one stream per context, and one
// kernel launch per stage of engine/batch_body.h (the batched engine),
// render/raster_stages.h (the batched renderer) and
// engine/fluid_batch_body.h (the batched fluid), one thread per
// (instance, index) pair,
// instance-major as the CPU backend's loop. The bodies are the CPU's, so
// nothing of the physics lives here; stage order, tape and offsets are
// engine/batch_sim.c's. No atomics: every thread writes its own cells.
//
// A launch of several parts or chained stages (dsBatchLaunch: how the
// driver packs a backward substep into two launches) is one kernel whose
// blocks are dealt to the parts in order; a chain's stages run one after
// another in the pair's thread. A launch of one stage uses that stage's
// own kernel (a template: the body's switch resolved at compile time), and
// so does every stage of a launch large enough to fill the GPU by itself.
//
// REDUCE (per instance, DS__BS_NREDUCE serial sums in element order) gets one block
// per (sum, instance): the block fetches the terms into shared memory in
// parallel (ds__bs_reduce_term), then one thread adds them in order, as
// ds__bs_reduce's loop does. One thread fetching them from global memory one
// after another was most of a B = 1 backward substep.
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/backend.h"
#include "cuda/cuda_priv.h"
#include "engine/batch_body.h"
#include "engine/fluid_batch_body.h"
#include "render/raster_stages.h"

namespace {

/* SPLIT_PAIRS: from this many (index, instance) pairs a launch is split
 * into one kernel per stage (see launch); DSIM_CUDA_SPLIT_PAIRS=N sets
 * another threshold (tests: 1 splits every launch). */
enum { THREADS = 256, RTHREADS = 128, SPLIT_PAIRS = 1 << 16 };

struct Ctx {
  int device;
  long long split_pairs;
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
__global__ void __launch_bounds__(THREADS) stage_kernel(const dsBatchArgs a, int count, long long n) {
  const long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) ds__bstage_run(S, &a, (int)(k % count), (int)(k / count));
}

/* One kernel per stage, for every stage of engine/batch_body.h's enum
 * (which the force list generates): at[S] is stage_kernel<S>, so the
 * launcher has no list of stages to keep up to date. */
typedef void (*StageKernel)(const dsBatchArgs, int, long long);
template <int N, int... S>
struct stage_kernels : stage_kernels<N - 1, N - 1, S...> {};
template <int... S>
struct stage_kernels<0, S...> {
  static constexpr StageKernel at[sizeof...(S)] = {stage_kernel<S>...};
};

/* Blocks of one part of a fused launch: ceil(count B / THREADS), REDUCE
 * count B (one per sum). */
__host__ __device__ unsigned part_blocks(const dsBatchPart& q, int B) {
  const long long n = (long long)q.count * B;
  return q.stage[0] == DS__BS_REDUCE ? (unsigned)n : (unsigned)((n + THREADS - 1) / THREADS);
}

/* The part of a fused launch that block `blk` belongs to, and the block's
 * index within it; parts get ceil(count B / THREADS) blocks each, REDUCE
 * count B (one per sum). */
__device__ int part_of(const dsBatchLaunch& l, unsigned blk, unsigned* local) {
  unsigned first = 0;
  for (int p = 0; p < l.nparts; p++) {
    const unsigned nb = part_blocks(l.part[p], l.B);
    if (blk < first + nb) {
      *local = blk - first;
      return p;
    }
    first += nb;
  }
  return -1;
}

/* REDUCE's block (sum k, instance b) with blockDim.x threads. */
__device__ void reduce_block(const dsBatchArgs& a, int k, int b, dsReal* terms) {
  const int n = ds__bs_reduce_len(&a, k);
  if (n < 0) return; /* the whole block */
  const int nt = (int)blockDim.x;
  dsReal sum = 0;
  for (int base = 0; base < n; base += nt) {
    const int i = base + (int)threadIdx.x;
    if (i < n) terms[threadIdx.x] = ds__bs_reduce_term(&a, k, b, i);
    __syncthreads();
    if (threadIdx.x == 0) {
      const int m = n - base < nt ? n - base : nt;
      for (int j = 0; j < m; j++) sum += terms[j];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) ds__bs_reduce_store(&a, k, b, sum);
}

__global__ void __launch_bounds__(RTHREADS) reduce_kernel(const dsBatchArgs a, int count) {
  __shared__ dsReal terms[RTHREADS];
  reduce_block(a, (int)(blockIdx.x % (unsigned)count), (int)(blockIdx.x / (unsigned)count), terms);
}

__global__ void __launch_bounds__(THREADS) fused_kernel(const dsBatchLaunch l) {
  __shared__ dsReal terms[THREADS];
  unsigned local = 0;
  const int p = part_of(l, blockIdx.x, &local);
  if (p < 0) return;
  const dsBatchPart& q = l.part[p];
  if (q.stage[0] == DS__BS_REDUCE) { /* block-uniform */
    reduce_block(q.a[0], (int)(local % (unsigned)q.count), (int)(local / (unsigned)q.count), terms);
    return;
  }
  const long long k = (long long)local * THREADS + threadIdx.x;
  if (k >= (long long)q.count * l.B) return;
  const int e = (int)(k % q.count), b = (int)(k / q.count);
  for (int o = 0; o < q.nops; o++) ds__bstage_run(q.stage[o], &q.a[o], e, b);
}

/* One stage over count x B pairs, with its own kernel. */
cudaError_t launch_one(Ctx* c, int stage, const dsBatchArgs& a, int count, int B) {
  const long long n = (long long)count * B;
  if (stage == DS__BS_REDUCE) {
    reduce_kernel<<<(unsigned)n, RTHREADS, 0, c->stream>>>(a, count);
    return cudaGetLastError();
  }
  if (stage < 0 || stage >= DS__BS_COUNT) return cudaErrorInvalidValue;
  const unsigned blocks = (unsigned)((n + THREADS - 1) / THREADS);
  stage_kernels<DS__BS_COUNT>::at[stage]<<<blocks, THREADS, 0, c->stream>>>(a, count, n);
  return cudaGetLastError();
}

/* One launch on the stream. A launch with enough pairs to fill the GPU
 * gains nothing from fusing and loses to the fused kernel's register
 * count (the union of every stage's): its parts and chained stages then go
 * one stage at a time, which dsBatchLaunch's rules allow (parts are
 * independent; a chained stage reads only its own pair's output of the
 * stages before it). */
cudaError_t launch(Ctx* c, const dsBatchLaunch* l) {
  long long pairs = 0;
  unsigned blocks = 0;
  for (int p = 0; p < l->nparts; p++) {
    pairs += (long long)l->part[p].count * l->B;
    blocks += part_blocks(l->part[p], l->B);
  }
  if ((l->nparts == 1 && l->part[0].nops == 1) || pairs >= c->split_pairs) {
    for (int p = 0; p < l->nparts; p++)
      for (int o = 0; o < l->part[p].nops; o++) {
        cudaError_t e = launch_one(c, l->part[p].stage[o], l->part[p].a[o], l->part[p].count, l->B);
        if (e != cudaSuccess) return e;
      }
    return cudaSuccess;
  }
  if (blocks == 0) return cudaSuccess;
  fused_kernel<<<blocks, THREADS, 0, c->stream>>>(*l);
  return cudaGetLastError();
}

int cu_open(int device, void** out, char* err, size_t errlen) {
  Ctx* c = (Ctx*)calloc(1, sizeof(Ctx));
  if (!c) return DS_ERR_NOMEM;
  c->device = device;
  const char* sp = getenv("DSIM_CUDA_SPLIT_PAIRS");
  c->split_pairs = sp && atoll(sp) > 0 ? atoll(sp) : SPLIT_PAIRS;
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

int cu_run(void* ctx, const dsBatchLaunch* l) {
  Ctx* c = use(ctx);
  for (int p = 0; p < l->nparts; p++)
    if (l->part[p].stage[0] < 0 || l->part[p].stage[0] >= DS__BS_COUNT) {
      snprintf(c->msg, sizeof c->msg, "unknown stage %d", l->part[p].stage[0]);
      return DS_ERR_INVALID;
    }
  cudaError_t e = launch(c, l);
  return e == cudaSuccess ? 0 : fail(c, e, "kernel launch");
}

const char* cu_last_error(void* ctx) { return ctx ? ((Ctx*)ctx)->msg : ""; }

/* ---- the batched renderer's stages (render/raster_batch.h) on the batch's stream ---- */
template <int S>
__global__ void __launch_bounds__(THREADS) rstage_kernel(const dsrBatchArgs a, int count, long long n) {
  const long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) dsr_bstage_run(S, &a, (int)(k % count), (int)(k / count));
}

int cu_run_render(void* ctx, int stage, const dsrBatchArgs* a, int count, int B) {
  Ctx* c = use(ctx);
  const long long n = (long long)count * B;
  if (n <= 0) return 0;
  const unsigned blocks = (unsigned)((n + THREADS - 1) / THREADS);
#define DS__RLAUNCH(S) \
  case S: rstage_kernel<S><<<blocks, THREADS, 0, c->stream>>>(*a, count, n); break;
  switch (stage) {
    DSR_BS_STAGES(DS__RLAUNCH)
    default:
      snprintf(c->msg, sizeof c->msg, "unknown render stage %d", stage);
      return DS_ERR_INVALID;
  }
#undef DS__RLAUNCH
  cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? 0 : fail(c, e, "render kernel launch");
}

/* ---- the batched fluid's stages (engine/fluid_batch_body.h) --------------
 * One thread per (index, instance) pair, a kernel per stage. The stages of
 * one pair per instance (MIC(0)'s substitutions, the sums of the blocks)
 * run one thread per instance for now: each sweeps its grid serially. */
template <int S>
__global__ void __launch_bounds__(THREADS) fstage_kernel(const dsFluidBatchArgs a, int count, long long n) {
  const long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) dsf_bstage_run(S, &a, (int)(k % count), (int)(k / count));
}

int cu_run_fluid(void* ctx, int stage, const dsFluidBatchArgs* a, int count, int B) {
  Ctx* c = use(ctx);
  const long long n = (long long)count * B;
  if (n <= 0) return 0;
  const unsigned blocks = (unsigned)((n + THREADS - 1) / THREADS);
#define DS__FLAUNCH(S) \
  case S: fstage_kernel<S><<<blocks, THREADS, 0, c->stream>>>(*a, count, n); break;
  switch (stage) {
    DSF_BS_STAGES(DS__FLAUNCH)
    default:
      snprintf(c->msg, sizeof c->msg, "unknown fluid stage %d", stage);
      return DS_ERR_INVALID;
  }
#undef DS__FLAUNCH
  cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? 0 : fail(c, e, "fluid kernel launch");
}

int cu_sync(void* ctx) {
  Ctx* c = use(ctx);
  cudaError_t e = cudaStreamSynchronize(c->stream);
  return e == cudaSuccess ? 0 : fail(c, e, "waiting for the stream");
}

/* The device layer's table (base/backend.h) for CUDA. */
const dsBackend cuda_backend = {"cuda",        ds__cuda_count, ds__cuda_props, cu_open,      cu_close,
                                cu_free_bytes, cu_alloc,       cu_release,     cu_put,       cu_get,
                                cu_copy,       cu_zero,        cu_run,         cu_run_render, cu_run_fluid,
                                cu_sync,       cu_last_error};

}  // namespace

extern "C" const dsBackend* ds__cuda_backend(void) { return &cuda_backend; }

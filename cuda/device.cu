// The CUDA devices: their count and properties, the device layer's
// device_count and device_props for CUDA (base/backend.h; dsim info and the
// device checks of base/device.c reach them through the table).
#include <cuda_runtime.h>
#include <string.h>

extern "C" {
#include "cuda/cuda_priv.h"
}

// 0 (not an error) without a GPU or a driver, so programs and tests can skip.
extern "C" int ds__cuda_count(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error state
    return 0;
  }
  return n;
}

extern "C" int ds__cuda_props(int i, dsDeviceInfo* info) {
  cudaDeviceProp p;
  if (cudaGetDeviceProperties(&p, i) != cudaSuccess) {
    cudaGetLastError();
    return DS_ERR_CUDA;
  }
  strncpy(info->name, p.name, sizeof info->name - 1);
  info->name[sizeof info->name - 1] = '\0';
  info->total_memory = p.totalGlobalMem;
  info->cc_major = p.major;
  info->cc_minor = p.minor;
  info->multiprocessors = p.multiProcessorCount;
  int cur = 0;
  size_t fr = 0, tot = 0;
  if (cudaGetDevice(&cur) == cudaSuccess && cudaSetDevice(i) == cudaSuccess) {
    if (cudaMemGetInfo(&fr, &tot) == cudaSuccess) info->free_memory = fr;
    cudaSetDevice(cur);
  }
  cudaGetLastError();
  return 0;
}

// CUDA device properties for base/device.c (dsim info, device checks).
#include <cuda_runtime.h>
#include <string.h>

extern "C" {
#include "cuda/cuda_priv.h"
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

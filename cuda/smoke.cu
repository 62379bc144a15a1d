// CUDA smoke path: proves that device code compiles and links into libdsim.
// ds__cuda_count() (the table's device_count, base/backend.h) reports 0 (not
// an error) when there is no GPU or no driver, so programs and tests can
// decide to skip.
#include <cuda_runtime.h>

extern "C" {
#include "dsim/base.h"
#include "cuda/cuda_priv.h"
#include "cuda/smoke.h"
}

__global__ void axpy_kernel(int n, double a, const double* x, double* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += a * x[i];
}

extern "C" int ds__cuda_count(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error state
    return 0;
  }
  return n;
}

// y += a*x on the device for n elements (host arrays). Returns 0 or
// DS_ERR_CUDA; used by the smoke test to check the kernel really runs.
extern "C" int ds__cuda_smoke_axpy(int n, double a, const double* x, double* y) {
  double *dx = nullptr, *dy = nullptr;
  size_t bytes = (size_t)n * sizeof(double);
  int rc = DS_ERR_CUDA;
  if (cudaMalloc(&dx, bytes) != cudaSuccess) goto done;
  if (cudaMalloc(&dy, bytes) != cudaSuccess) goto done;
  if (cudaMemcpy(dx, x, bytes, cudaMemcpyHostToDevice) != cudaSuccess) goto done;
  if (cudaMemcpy(dy, y, bytes, cudaMemcpyHostToDevice) != cudaSuccess) goto done;
  axpy_kernel<<<(n + 255) / 256, 256>>>(n, a, dx, dy);
  if (cudaGetLastError() != cudaSuccess) goto done;
  if (cudaMemcpy(y, dy, bytes, cudaMemcpyDeviceToHost) != cudaSuccess) goto done;
  rc = DS_OK;
done:
  cudaFree(dx);
  cudaFree(dy);
  return rc;
}

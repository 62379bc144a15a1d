/* CUDA smoke kernel (internal, not installed): proves that a build with
 * --enable-cuda compiles, links and launches a kernel. ds_cuda_device_count()
 * and ds_cuda_built() are in dsim/base.h for every build (base/device.c,
 * through the device layer's table). */
#ifndef DSIM_CUDA_SMOKE_H
#define DSIM_CUDA_SMOKE_H

#include "dsim/base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* y += a*x computed on the first CUDA device (host arrays of n doubles).
 * 0, or DS_ERR_CUDA when no device can run it. */
int ds__cuda_smoke_axpy(int n, double a, const double* x, double* y);

#ifdef __cplusplus
}
#endif
#endif

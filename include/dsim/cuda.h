/* CUDA backend entry points (present only in a build with --enable-cuda;
 * ds_cuda_device_count() and ds_cuda_built() are in base.h for every build). */
#ifndef DSIM_CUDA_H
#define DSIM_CUDA_H

#include "dsim/base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* y += a*x computed on the first CUDA device (host arrays of n doubles).
 * 0, or DS_ERR_CUDA when no device can run it. */
DS_API int ds_cuda_smoke_axpy(int n, double a, const double* x, double* y);

#ifdef __cplusplus
}
#endif
#endif

/* What the CUDA backend (cuda/device.cu) gives base/device.c: the
 * properties of one visible device. Defined by cuda/ with --enable-cuda,
 * by base/device.c (DS_ERR_UNSUPPORTED) without it. Not installed. */
#ifndef DSIM_BASE_DEVICE_PRIV_H
#define DSIM_BASE_DEVICE_PRIV_H

#include "dsim/device.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Properties of device i, which the caller has checked is < the count. */
int ds__cuda_props(int i, dsDeviceInfo* info);

#ifdef __cplusplus
}
#endif
#endif

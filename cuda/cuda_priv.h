/* What the CUDA files give each other (not installed): the device count
 * and properties that cuda/batch.cu puts in the device layer's table. */
#ifndef DSIM_CUDA_CUDA_PRIV_H
#define DSIM_CUDA_CUDA_PRIV_H

#include "dsim/device.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Visible CUDA devices; 0 (not an error) without a GPU or a driver. */
int ds__cuda_count(void);
/* Properties of device i, which the caller has checked is < the count. */
int ds__cuda_props(int i, dsDeviceInfo* info);

#ifdef __cplusplus
}
#endif
#endif

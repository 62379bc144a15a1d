/* dsim devices: where a batched simulation runs (dsim/engine_batch.h), how a
 * device is named on the command line and in configs, and what the CUDA
 * devices of this machine are.
 *
 *   "cpu"       the CPU backend (OpenMP), always there
 *   "cuda"      CUDA device 0
 *   "cuda:N"    CUDA device N (0-based, as nvidia-smi numbers them)
 *
 * A build without --enable-cuda, or a machine without a GPU or driver, has
 * no CUDA devices: ds_device_parse accepts "cuda" only when the build has
 * the backend, and ds_device_check refuses a device that is not there, both
 * with a message that says what to do instead. */
#ifndef DSIM_DEVICE_H
#define DSIM_DEVICE_H

#include <stddef.h>

#include "dsim/base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dsDeviceKind { DS_DEVICE_CPU = 0, DS_DEVICE_CUDA = 1 } dsDeviceKind;

typedef struct dsDevice {
  dsDeviceKind kind;
  int index; /* CUDA device number; 0 for the CPU */
} dsDevice;

/* The CPU device ({DS_DEVICE_CPU, 0}). */
DS_API dsDevice ds_device_cpu(void);

/* "cpu", "cuda" or "cuda:N" -> *out. Only the syntax is checked (and, for
 * cuda, that the build has the backend): DS_ERR_PARSE for anything else,
 * DS_ERR_UNSUPPORTED for cuda in a build without it. err (may be NULL)
 * receives "--device cuda: this dsim was built without CUDA (./configure
 * --enable-cuda)" and the like, prefixed by `what` ("--device", "run.device"). */
DS_API int ds_device_parse(const char* what, const char* text, dsDevice* out, char* err, size_t errlen);
/* The device can be used now: the CPU always; cuda:N when the build has the
 * backend and N < ds_cuda_device_count() (DS_ERR_UNSUPPORTED otherwise,
 * "cuda:3: only 1 CUDA device (0)" or "cuda: no CUDA device is visible
 * (no GPU, no driver, or CUDA_VISIBLE_DEVICES hides them)"). */
DS_API int ds_device_check(const char* what, dsDevice dev, char* err, size_t errlen);
/* "cpu" or "cuda:N" into buf; returns buf. */
DS_API const char* ds_device_name(dsDevice dev, char* buf, size_t buflen);

typedef struct dsDeviceInfo {
  char name[128];        /* "NVIDIA H200" */
  size_t total_memory;   /* bytes of device memory */
  size_t free_memory;    /* bytes free now (0 when unknown) */
  int cc_major, cc_minor; /* compute capability, e.g. 9.0 */
  int multiprocessors;   /* streaming multiprocessors */
} dsDeviceInfo;

/* Properties of CUDA device i (0 <= i < ds_cuda_device_count()).
 * DS_ERR_UNSUPPORTED in a build without CUDA, DS_ERR_RANGE for a device
 * that is not there, DS_ERR_CUDA when the runtime fails. */
DS_API int ds_cuda_device_info(int i, dsDeviceInfo* info);

#ifdef __cplusplus
}
#endif
#endif

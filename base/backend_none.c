/* A build without --enable-cuda: no CUDA backend (base/backend.h). The
 * build chooses this file or cuda/batch.cu; nothing else decides. */
#include "config.h"

#include "base/backend.h"

const dsBackend* ds__cuda_backend(void) { return NULL; }

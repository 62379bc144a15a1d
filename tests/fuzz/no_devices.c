/* The run-log fuzzer links only the reader and what it uses of base/ and
 * io/ (scripts/fuzz-runlog), not the device layer, whose host backend pulls
 * in the engine and the renderer. ds_build_info (io/libinfo.c) asks for the
 * CUDA devices; here there are none. */
#include "dsim/base.h"

int ds_cuda_built(void) { return 0; }
int ds_cuda_device_count(void) { return 0; }

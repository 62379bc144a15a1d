/* run.device / --device for `dsim run` and `dsim sysid`: "cpu", "cuda" or
 * "cuda:N" (dsim/device.h). Envs and sysid run on the CPU engine; the CUDA
 * backend drives the batched engine (dsim/engine_batch.h) only, so a CUDA
 * device is refused with a message that says so, never silently replaced by
 * the CPU. */
#include <stdio.h>

#include "cli/cli.h"
#include "dsim/device.h"

int ds_cli_check_device(const char* cmd, const char* what, const char* text) {
  char err[512], name[32];
  dsDevice dev;
  int rc = ds_device_parse(what, text, &dev, err, sizeof err);
  if (!rc) rc = ds_device_check(what, dev, err, sizeof err);
  if (rc) {
    fprintf(stderr, "dsim %s: %s\n", cmd, err);
    return DS_EXIT_USAGE;
  }
  if (dev.kind == DS_DEVICE_CPU) return DS_EXIT_OK;
  fprintf(stderr,
          "dsim %s: %s %s: %s does not run on a CUDA device yet (the CUDA backend runs the batched engine, "
          "dsim/engine_batch.h, as bench_cuda does); use --device cpu\n",
          cmd, what, ds_device_name(dev, name, sizeof name), cmd[0] == 'r' ? "an env run" : "system identification");
  return DS_EXIT_USAGE;
}

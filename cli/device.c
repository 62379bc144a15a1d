/* run.device / --device for `dsim run` and `dsim sysid`: "cpu", "cuda" or
 * "cuda:N" (dsim/device.h), parsed and checked (built with CUDA, the device
 * present). On a CUDA device an env's physics runs on the batched engine
 * there (dsEnvDef.device); a class that cannot is refused when the env is
 * built, with a message, never silently moved to the CPU. */
#include <stdio.h>

#include "cli/cli.h"
#include "dsim/device.h"

int ds__cli_check_device(const char* cmd, const char* what, const char* text, dsDevice* out) {
  char err[512];
  dsDevice dev;
  int rc = ds_device_parse(what, text, &dev, err, sizeof err);
  if (!rc) rc = ds_device_check(what, dev, err, sizeof err);
  if (rc) {
    fprintf(stderr, "dsim %s: %s\n", cmd, err);
    return DS_EXIT_USAGE;
  }
  *out = dev;
  return DS_EXIT_OK;
}

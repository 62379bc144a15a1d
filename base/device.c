/* Device names ("cpu", "cuda", "cuda:N"), their checks and the CUDA device
 * list, all through the device layer's table (base/backend.h): a build
 * without CUDA has no CUDA backend, hence no CUDA devices. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/backend.h"
#include "base/internal.h"
#include "dsim/device.h"

int ds_cuda_built(void) { return ds__backend(DS_DEVICE_CUDA) != NULL; }

int ds_cuda_device_count(void) {
  const dsBackend* be = ds__backend(DS_DEVICE_CUDA);
  return be ? be->device_count() : 0;
}

dsDevice ds_device_cpu(void) {
  dsDevice d = {DS_DEVICE_CPU, 0};
  return d;
}

#define DS__NO_CUDA_BUILD "this dsim was built without CUDA (./configure --enable-cuda)"

int ds_device_parse(const char* what, const char* text, dsDevice* out, char* err, size_t errlen) {
  if (!what) what = "device";
  if (!text || !out) return ds__puterr(err, errlen, DS_ERR_INVALID, "%s: no device given", what);
  if (strcmp(text, "cpu") == 0) {
    *out = ds_device_cpu();
    return 0;
  }
  int index = 0;
  if (strncmp(text, "cuda", 4) == 0 && (text[4] == '\0' || text[4] == ':')) {
    if (text[4] == ':') {
      const char* s = text + 5;
      char* end = NULL;
      long v = (s[0] >= '0' && s[0] <= '9') ? strtol(s, &end, 10) : -1;
      if (v < 0 || !end || *end != '\0' || v > 4096)
        return ds__puterr(err, errlen, DS_ERR_PARSE,
                          "%s %s: expected cuda:N with N a device number (0, 1, ...)", what, text);
      index = (int)v;
    }
    if (!ds_cuda_built()) return ds__puterr(err, errlen, DS_ERR_UNSUPPORTED, "%s %s: " DS__NO_CUDA_BUILD, what, text);
    out->kind = DS_DEVICE_CUDA;
    out->index = index;
    return 0;
  }
  return ds__puterr(err, errlen, DS_ERR_PARSE, "%s '%s': expected cpu, cuda or cuda:N", what, text);
}

int ds_device_check(const char* what, dsDevice dev, char* err, size_t errlen) {
  if (!what) what = "device";
  if (dev.kind == DS_DEVICE_CPU) return 0;
  if (dev.kind != DS_DEVICE_CUDA || dev.index < 0)
    return ds__puterr(err, errlen, DS_ERR_INVALID, "%s: not a device (kind %d, index %d)", what, (int)dev.kind,
                      dev.index);
  if (!ds_cuda_built())
    return ds__puterr(err, errlen, DS_ERR_UNSUPPORTED, "%s cuda:%d: " DS__NO_CUDA_BUILD, what, dev.index);
  const int n = ds_cuda_device_count();
  if (n == 0)
    return ds__puterr(err, errlen, DS_ERR_UNSUPPORTED,
                      "%s cuda:%d: no CUDA device is visible (no GPU, no driver, or CUDA_VISIBLE_DEVICES "
                      "hides them); use --device cpu",
                      what, dev.index);
  if (dev.index >= n) {
    if (n == 1)
      return ds__puterr(err, errlen, DS_ERR_UNSUPPORTED, "%s cuda:%d: only 1 CUDA device (cuda:0)", what,
                        dev.index);
    return ds__puterr(err, errlen, DS_ERR_UNSUPPORTED, "%s cuda:%d: only %d CUDA devices (cuda:0 .. cuda:%d)",
                      what, dev.index, n, n - 1);
  }
  return 0;
}

const char* ds_device_name(dsDevice dev, char* buf, size_t buflen) {
  if (!buf || buflen == 0) return "";
  if (dev.kind == DS_DEVICE_CPU)
    snprintf(buf, buflen, "cpu");
  else
    snprintf(buf, buflen, "cuda:%d", dev.index);
  return buf;
}

int ds_cuda_device_info(int i, dsDeviceInfo* info) {
  if (!info) return DS_ERR_INVALID;
  memset(info, 0, sizeof *info);
  if (!ds_cuda_built()) return DS_ERR_UNSUPPORTED;
  if (i < 0 || i >= ds_cuda_device_count()) return DS_ERR_RANGE;
  return ds__backend(DS_DEVICE_CUDA)->device_props(i, info);
}

/* ds_build_info (dsim/base.h): the build options and the versions of the
 * I/O libraries dsim links, for `dsim info`. It lives in io/, the only area
 * that includes those libraries' headers, so that base/ calls nothing above it. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <png.h>
#ifdef DS_HAVE_HDF5
#  include <hdf5.h>
#endif

#include "base/internal.h"
#include "dsim/base.h"

static void lib_versions(char hdf5[32], char cjson[32], char png[32]) {
  hdf5[0] = '\0';
#ifdef DS_HAVE_HDF5
  {
    unsigned maj = 0, min = 0, rel = 0;
    if (H5get_libversion(&maj, &min, &rel) >= 0) snprintf(hdf5, 32, "%u.%u.%u", maj, min, rel);
  }
#endif
  snprintf(cjson, 32, "%s", cJSON_Version());
  /* png_access_version_number: the library actually loaded, not the header. */
  {
    png_uint_32 v = png_access_version_number();
    snprintf(png, 32, "%u.%u.%u", (unsigned)(v / 10000), (unsigned)(v / 100 % 100), (unsigned)(v % 100));
  }
}

void ds_build_info(dsBuildInfo* info) {
  memset(info, 0, sizeof *info);
  info->version = DS_VERSION_STRING;
  info->real_bytes = (int)sizeof(dsReal);
#ifdef _OPENMP
  info->openmp = 1;
#endif
  info->max_threads = ds_get_max_threads();
  info->cuda = ds_cuda_built();
  info->cuda_devices = ds_cuda_device_count();
#ifdef DS_HAVE_HDF5
  info->hdf5 = 1;
#endif
#ifdef DS_HAVE_GIF
  info->gif = 1;
#endif
  lib_versions(info->hdf5_version, info->cjson_version, info->png_version);
  info->options = DS_BUILD_OPTIONS;
}

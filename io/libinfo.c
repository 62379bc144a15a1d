/* Versions of the I/O libraries dsim links, for `dsim info`. io/ is the only
 * layer that includes their headers. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <png.h>
#ifdef DS_HAVE_HDF5
#  include <hdf5.h>
#endif

#include "engine/internal.h"

void ds__io_lib_versions(char hdf5[32], char cjson[32], char png[32]) {
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

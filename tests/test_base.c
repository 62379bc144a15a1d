/* Error names and messages, version, build info, allocator replacement. */
#include "config.h"

#include <stdlib.h>

#include "dsim/dsim.h"
#include "base/internal.h"
#include "tests/dstest.h"

static size_t g_nalloc = 0;
static void* count_malloc(size_t n) { g_nalloc++; return malloc(n); }
static void* count_realloc(void* p, size_t n) { g_nalloc++; return realloc(p, n); }
static void* count_calloc(size_t c, size_t n) { g_nalloc++; return calloc(c, n); }

static char g_logged[256];
static void log_hook(dsLogLevel lvl, const char* msg, void* user) {
  (void)lvl;
  *(int*)user += 1;
  snprintf(g_logged, sizeof g_logged, "%s", msg);
}

int main(void) {
  /* error list */
  CHECK_STR_EQ(ds_err_name(DS_OK), "DS_OK");
  CHECK_STR_EQ(ds_err_name(DS_ERR_DIVERGED), "DS_ERR_DIVERGED");
  CHECK_STR_EQ(ds_err_name(DS_ERR_INTERRUPTED), "DS_ERR_INTERRUPTED");
  CHECK_STR_EQ(ds_err_name(-999), "DS_ERR_UNKNOWN");
  CHECK_STR_EQ(ds_strerror(DS_ERR_NOMEM), "out of memory");
  CHECK_STR_EQ(ds_strerror(12345), "unknown error");
  for (int c = 0; c > -DS_ERR_COUNT_; c--) {
    CHECK(strcmp(ds_err_name(c), "DS_ERR_UNKNOWN") != 0);
    CHECK(strcmp(ds_strerror(c), "unknown error") != 0);
  }

  /* error buffer */
  dsErrBuf eb;
  ds__clearerr(&eb);
  CHECK_STR_EQ(ds__errmsg(&eb), "");
  CHECK_INT_EQ(ds__seterr(&eb, DS_ERR_MESH, "tet %d: volume %g <= 0", 7, -1.5), DS_ERR_MESH);
  CHECK_STR_EQ(ds__errmsg(&eb), "tet 7: volume -1.5 <= 0");
  CHECK_INT_EQ(ds__seterr(NULL, DS_ERR_IO, "ignored"), DS_ERR_IO);

  /* version */
  CHECK_STR_EQ(ds_version_string(), DS_VERSION_STRING);
  CHECK_INT_EQ(ds_version_number(), DS_VERSION_MAJOR * 10000 + DS_VERSION_MINOR * 100 + DS_VERSION_PATCH);

  /* build info */
  dsBuildInfo bi;
  ds_build_info(&bi);
  CHECK_STR_EQ(bi.version, DS_VERSION_STRING);
  CHECK_INT_EQ(bi.real_bytes, DS_SINGLE ? 4 : 8);
  CHECK_INT_EQ(bi.real_bytes, (int)sizeof(dsReal));
  CHECK(bi.max_threads >= 1);
  CHECK(bi.cjson_version[0] != '\0');
  CHECK_STR_CONTAINS(bi.png_version, "1.");
#ifdef DS_HAVE_HDF5
  CHECK_INT_EQ(bi.hdf5, 1);
  CHECK(bi.hdf5_version[0] != '\0');
#else
  CHECK_INT_EQ(bi.hdf5, 0);
#endif
#ifdef _OPENMP
  CHECK_INT_EQ(bi.openmp, 1);
  ds_set_num_threads(2);
  CHECK_INT_EQ(ds_get_max_threads(), 2);
#else
  CHECK_INT_EQ(bi.openmp, 0);
  CHECK_INT_EQ(ds_get_max_threads(), 1);
#endif
  CHECK(bi.cuda_devices >= 0);

  /* allocator replacement: partial sets are refused, full sets are used */
  CHECK_INT_EQ(ds_replace_allocator(count_malloc, NULL, NULL, free), DS_ERR_INVALID);
  CHECK_INT_EQ(ds_replace_allocator(count_malloc, count_realloc, count_calloc, free), DS_OK);
  char* s = ds__strdup("gear");
  CHECK_STR_EQ(s, "gear");
  ds__free(s);
  void* p = ds__calloc(3, 8);
  p = ds__realloc(p, 64);
  ds__free(p);
  CHECK_INT_EQ(g_nalloc, 3);
  CHECK_INT_EQ(ds_replace_allocator(NULL, NULL, NULL, NULL), DS_OK);
  s = ds__strdup("x");
  ds__free(s);
  CHECK_INT_EQ(g_nalloc, 3);

  /* log hook: silent by default, delivered when set */
  int nlog = 0;
  ds__log(DS_LOG_INFO, "nobody hears %d", 1);
  ds_set_log_hook(log_hook, &nlog);
  ds__log(DS_LOG_WARN, "substep %d", 42);
  CHECK_INT_EQ(nlog, 1);
  CHECK_STR_EQ(g_logged, "substep 42");
  ds_set_log_hook(NULL, NULL);

  return DST_RESULT();
}

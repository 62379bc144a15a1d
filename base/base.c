/* Library-wide basics: error names, version and build information, the
 * replaceable allocator, the log hook and thread-count wrappers. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#  include <omp.h>
#endif

#include "dsim/base.h"
#include "base/internal.h"

/* ---- errors ---------------------------------------------------------------*/
const char* ds_err_name(int code) {
  switch (code) {
    case DS_OK:
      return "DS_OK";
#define DS__ERR_NAME(name, val, msg) \
  case (val):                        \
    return "DS_ERR_" #name;
    DS_ERRNO_ERRORS(DS__ERR_NAME)
#undef DS__ERR_NAME
    default:
      return "DS_ERR_UNKNOWN";
  }
}

const char* ds_strerror(int code) {
  switch (code) {
    case DS_OK:
      return "success";
#define DS__ERR_MSG(name, val, msg) \
  case (val):                       \
    return msg;
    DS_ERRNO_ERRORS(DS__ERR_MSG)
#undef DS__ERR_MSG
    default:
      return "unknown error";
  }
}

int ds__vseterr(dsErrBuf* eb, int code, const char* fmt, va_list ap) {
  if (eb) {
    eb->code = code;
    vsnprintf(eb->msg, sizeof eb->msg, fmt, ap);
  }
  return code;
}

int ds__seterr(dsErrBuf* eb, int code, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  ds__vseterr(eb, code, fmt, ap);
  va_end(ap);
  return code;
}

int ds__puterr(char* err, size_t errlen, int code, const char* fmt, ...) {
  if (err && errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
  }
  return code;
}

void ds__clearerr(dsErrBuf* eb) {
  if (eb) {
    eb->code = 0;
    eb->msg[0] = '\0';
  }
}

const char* ds__errmsg(const dsErrBuf* eb) { return (eb && eb->code) ? eb->msg : ""; }

/* ---- allocator -------------------------------------------------------------
 * Set once before objects are created; not synchronised on purpose (the same
 * contract as libuv's uv_replace_allocator). */
static struct {
  dsMallocFn m;
  dsReallocFn r;
  dsCallocFn c;
  dsFreeFn f;
} g_alloc = {malloc, realloc, calloc, free};

int ds_replace_allocator(dsMallocFn m, dsReallocFn r, dsCallocFn c, dsFreeFn f) {
  if (!m && !r && !c && !f) {
    g_alloc.m = malloc;
    g_alloc.r = realloc;
    g_alloc.c = calloc;
    g_alloc.f = free;
    return DS_OK;
  }
  if (!m || !r || !c || !f) return DS_ERR_INVALID;
  g_alloc.m = m;
  g_alloc.r = r;
  g_alloc.c = c;
  g_alloc.f = f;
  return DS_OK;
}

void* ds__malloc(size_t size) { return g_alloc.m(size ? size : 1); }
void* ds__calloc(size_t count, size_t size) { return g_alloc.c(count ? count : 1, size ? size : 1); }
void* ds__realloc(void* ptr, size_t size) { return g_alloc.r(ptr, size ? size : 1); }
void ds__free(void* ptr) {
  if (ptr) g_alloc.f(ptr);
}

char* ds__strdup(const char* s) {
  size_t n = strlen(s) + 1;
  char* p = (char*)ds__malloc(n);
  if (p) memcpy(p, s, n);
  return p;
}

/* ---- log hook --------------------------------------------------------------*/
static dsLogFn g_log_fn = NULL;
static void* g_log_user = NULL;

void ds_set_log_hook(dsLogFn fn, void* user) {
  g_log_fn = fn;
  g_log_user = user;
}

void ds__log(dsLogLevel level, const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  if (!g_log_fn) return;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  g_log_fn(level, buf, g_log_user);
}

#ifdef DS_ENABLE_ASSERTS
void ds__assert_fail(const char* expr, const char* file, int line) {
  ds__log(DS_LOG_ERROR, "dsim internal assertion failed: %s (%s:%d)", expr, file, line);
  abort();
}
#endif

/* ---- version and build -----------------------------------------------------*/
const char* ds_version_string(void) { return DS_VERSION_STRING; }

int ds_version_number(void) {
  return DS_VERSION_MAJOR * 10000 + DS_VERSION_MINOR * 100 + DS_VERSION_PATCH;
}

void ds_set_num_threads(int n) {
#ifdef _OPENMP
  if (n > 0) omp_set_num_threads(n);
#else
  (void)n;
#endif
}

int ds_get_max_threads(void) {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

#ifndef DS_HAVE_CUDA
/* Without --enable-cuda nothing CUDA is compiled; these keep the ABI. */
int ds_cuda_device_count(void) { return 0; }
int ds_cuda_built(void) { return 0; }
#endif

/* Library-wide basics: error names, version and build information, the
 * replaceable allocator, the log hook and thread-count wrappers. */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
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

void* ds_calloc(size_t count, size_t size) { return ds__calloc(count, size); }
void ds_free(void* p) { ds__free(p); }

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

void* ds__host_alloc(void* ctx, size_t bytes) {
  (void)ctx;
  return ds__calloc(1, bytes ? bytes : 1);
}

void ds__host_release(void* ctx, void* p) {
  (void)ctx;
  ds__free(p);
}

int ds__host_move(void* ctx, void* dst, const void* src, size_t bytes) {
  (void)ctx;
  if (bytes) memmove(dst, src, bytes);
  return 0;
}

int ds__host_zero(void* ctx, void* dst, size_t bytes) {
  (void)ctx;
  if (bytes) memset(dst, 0, bytes);
  return 0;
}
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

/* ---- memory bound ------------------------------------------------------------ */
int ds_parse_size(const char* text, size_t* bytes) {
  if (!text || !bytes) return DS_ERR_INVALID;
  const char* p = text;
  while (isspace((unsigned char)*p)) p++;
  if (!*p || *p == '-' || *p == '+') return DS_ERR_PARSE;
  char* end = NULL;
  errno = 0;
  double v = strtod(p, &end);
  if (end == p || errno == ERANGE || !isfinite(v)) return end == p ? DS_ERR_PARSE : DS_ERR_RANGE;
  double mult = 1;
  switch (toupper((unsigned char)*end)) {
    case 'K': mult = 1024.0; end++; break;
    case 'M': mult = 1024.0 * 1024; end++; break;
    case 'G': mult = 1024.0 * 1024 * 1024; end++; break;
    case 'T': mult = 1024.0 * 1024 * 1024 * 1024; end++; break;
    default: break;
  }
  if (mult > 1 && toupper((unsigned char)end[0]) == 'I' && toupper((unsigned char)end[1]) == 'B') end += 2;
  else if (toupper((unsigned char)*end) == 'B') end++;
  while (isspace((unsigned char)*end)) end++;
  if (*end) return DS_ERR_PARSE;
  v *= mult;
  if (!(v >= 1) || v >= 18446744073709551615.0 || v > (double)SIZE_MAX) return DS_ERR_RANGE;
  *bytes = (size_t)v;
  return DS_OK;
}

const char* ds_format_size(size_t bytes, char* buf, size_t buflen) {
  static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = (double)bytes;
  int u = 0;
  while (v >= 1024 && u < 5) {
    v /= 1024;
    u++;
  }
  if (u == 0)
    snprintf(buf, buflen, "%zu B", bytes);
  else
    snprintf(buf, buflen, v < 10 ? "%.2f %s" : v < 100 ? "%.1f %s" : "%.0f %s", v, units[u]);
  return buf;
}

/* Three quarters of the machine's memory (the rest for the system and other
 * processes), lowered by the cgroup (v2 or v1) limit and RLIMIT_AS. */
static const char* g_memory_source = "";

static size_t default_memory_limit(void) {
  size_t lim = SIZE_MAX;
  g_memory_source = "3/4 of physical memory";
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0 && (double)pages * (double)page < (double)SIZE_MAX) lim = (size_t)pages * (size_t)page;
  static const char* const cgroup_files[] = {"/sys/fs/cgroup/memory.max",
                                             "/sys/fs/cgroup/memory/memory.limit_in_bytes"};
  for (size_t i = 0; i < sizeof cgroup_files / sizeof cgroup_files[0]; i++) {
    FILE* fp = fopen(cgroup_files[i], "r");
    if (!fp) continue;
    unsigned long long v = 0;
    if (fscanf(fp, "%llu", &v) == 1 && v > 0 && v < lim) { /* "max" does not scan */
      lim = (size_t)v;
      g_memory_source = "3/4 of the cgroup memory limit";
    }
    fclose(fp);
  }
  if (lim != SIZE_MAX) lim = lim / 4 * 3;
  struct rlimit rl;
  if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < lim) {
    lim = (size_t)rl.rlim_cur;
    g_memory_source = "RLIMIT_AS";
  }
  return lim;
}

static _Atomic size_t g_memory_limit; /* 0: not yet determined */

size_t ds_memory_limit(void) {
  size_t v = atomic_load(&g_memory_limit);
  if (v) return v;
  const char* env = getenv("DSIM_MAX_MEMORY");
  size_t b = 0;
  if (env && *env && ds_parse_size(env, &b) == DS_OK) {
    v = b;
    g_memory_source = "DSIM_MAX_MEMORY";
  } else {
    v = default_memory_limit();
  }
  atomic_store(&g_memory_limit, v);
  return v;
}

void ds_set_memory_limit(size_t bytes) {
  atomic_store(&g_memory_limit, bytes);
  g_memory_source = bytes ? "ds_set_memory_limit, dsim --max-memory" : "";
}

const char* ds_memory_limit_source(void) {
  ds_memory_limit();
  return g_memory_source;
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



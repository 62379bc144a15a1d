/* dsim base: precision, export macro, error codes, version and build
 * information, allocator and log hooks, threads. Every other public header
 * includes this one. */
#ifndef DSIM_BASE_H
#define DSIM_BASE_H

#include <stddef.h>
#include <stdint.h>

#include "dsim/build_config.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Public symbols are exported; everything else in the library is built with
 * -fvisibility=hidden. */
#if defined(_WIN32)
#  define DS_API
#elif defined(__GNUC__) || defined(__clang__)
#  define DS_API __attribute__((visibility("default")))
#else
#  define DS_API
#endif

/* Scalar type of every physical quantity. double by default (gradient checks
 * need it); float with ./configure --enable-single. */
#if DS_SINGLE
typedef float dsReal;
#  define DS_REAL_EPS 1.1920929e-07f
#else
typedef double dsReal;
#  define DS_REAL_EPS 2.220446049250313e-16
#endif

/* ---- errors ---------------------------------------------------------------
 * Fallible functions return 0 (DS_OK) or one of these negative codes. The
 * details (file, key path, element, substep, value) are kept on the object
 * that failed and read with its last-error function (ds_env_last_error,
 * ds_trainer_last_error, ...). A call that has no object to keep them on (a
 * create that failed, a parser, a reader filling a plain struct) writes them
 * into the caller's (err, errlen) buffer, its last two arguments (err may be
 * NULL). That is the one rule; there are no "_err" variants. One list gives
 * the enum (one spelling: DS_ERR_<NAME>; success is DS_OK), ds_err_name()
 * and ds_strerror(). */
#define DS_ERRNO_ERRORS(X)                                                         \
  X(NOMEM,      -1,   "out of memory")                                          \
  X(INVALID,    -2,   "invalid argument")                                       \
  X(IO,         -3,   "input/output error")                                     \
  X(PARSE,      -4,   "cannot parse input")                                     \
  X(CONFIG,     -5,   "invalid configuration")                                  \
  X(MESH,       -6,   "invalid mesh")                                           \
  X(DIVERGED,   -7,   "simulation diverged (NaN or Inf)")                       \
  X(INVERTED,   -8,   "element inverted")                                       \
  X(RANGE,      -9,   "value out of range")                                     \
  X(UNSUPPORTED,-10,  "not supported by this build")                            \
  X(ARENA,      -11,  "scratch arena exhausted")                                \
  X(STATE,      -12,  "call not valid in the current state")                    \
  X(NOTFOUND,   -13,  "no such name")                                           \
  X(CUDA,       -14,  "CUDA runtime error")                                     \
  X(FORMAT,     -15,  "file is corrupt or of a foreign format")                 \
  X(INTERRUPTED,-16,  "interrupted")

typedef enum dsErr {
  DS_OK = 0,
#define DS__ERR_ENUM(name, val, msg) DS_ERR_##name = (val),
  DS_ERRNO_ERRORS(DS__ERR_ENUM)
#undef DS__ERR_ENUM
  DS_ERR_COUNT_ = 17 /* codes 0 .. -(DS_ERR_COUNT_ - 1) */
} dsErr;

/* "DS_ERR_DIVERGED" etc.; "DS_ERR_UNKNOWN" for a code not in the list. */
DS_API const char* ds_err_name(int code);
/* Human-readable message for a code. */
DS_API const char* ds_strerror(int code);

/* ---- version and build ----------------------------------------------------*/
DS_API const char* ds_version_string(void);
/* major*10000 + minor*100 + patch */
DS_API int ds_version_number(void);

typedef struct dsBuildInfo {
  const char* version;        /* dsim version, "0.1.0" */
  int real_bytes;             /* sizeof(dsReal): 8 (double) or 4 (float) */
  int openmp;                 /* 1 when built with OpenMP */
  int max_threads;            /* threads a parallel region will use now */
  int cuda;                   /* 1 when built with --enable-cuda */
  int cuda_devices;           /* visible CUDA devices (0 without a GPU) */
  int hdf5;                   /* 1 when HDF5 run logs are built */
  int gif;                    /* 1 when GIF export is built */
  char hdf5_version[32];      /* "1.10.8" or "" */
  char cjson_version[32];     /* "1.7.15" */
  char png_version[32];       /* "1.6.39" */
  const char* options;        /* configure options summary */
} dsBuildInfo;

/* Fills *info. Never fails. */
DS_API void ds_build_info(dsBuildInfo* info);

/* ---- threads ---------------------------------------------------------------
 * Thin wrappers over OpenMP (no-ops in a build without it). Results never
 * depend on the thread count. */
DS_API void ds_set_num_threads(int n);
DS_API int ds_get_max_threads(void);

/* ---- memory bound ------------------------------------------------------------
 * The most memory dsim lets one object it creates plan to use: an env's tape
 * and buffers (ds_env_create refuses an episode that would need more, naming
 * the figure and the config key to change), or a run log's arrays read into
 * memory (refused before any allocation). By default three quarters of the
 * machine's physical memory, or of the process's cgroup memory limit when
 * lower, or RLIMIT_AS when lower still;
 * DSIM_MAX_MEMORY (read once, at the first call) or ds_set_memory_limit
 * override it. */
DS_API size_t ds_memory_limit(void);
/* 0 restores the default. */
DS_API void ds_set_memory_limit(size_t bytes);
/* Where the bound comes from, for messages: "3/4 of physical memory",
 * "DSIM_MAX_MEMORY", "set by the program" (dsim --max-memory), ... */
DS_API const char* ds_memory_limit_source(void);
/* A size in bytes from text: "123456", "1.5e9", "512M", "8G", "2T" (K/M/G/T are
 * powers of 1024, an optional trailing "B" or "iB"). DS_ERR_PARSE for anything else,
 * DS_ERR_RANGE for 0 or a size that does not fit size_t. */
DS_API int ds_parse_size(const char* text, size_t* bytes);
/* "1.5 GiB", "820 MiB", "12 KiB", "100 B" into buf. */
DS_API const char* ds_format_size(size_t bytes, char* buf, size_t buflen);

/* ---- CUDA ------------------------------------------------------------------
 * Number of visible CUDA devices: 0 with no GPU or no driver, and 0 in a build
 * without --enable-cuda. */
DS_API int ds_cuda_device_count(void);
/* 1 when the library was built with the CUDA backend. */
DS_API int ds_cuda_built(void);

/* ---- allocator -------------------------------------------------------------
 * Every allocation the library makes goes through these. Replace them before
 * creating any object (e.g. to count allocations or inject failures). Passing
 * NULL for all restores the C library's. Returns DS_ERR_INVALID when only
 * some are NULL. */
typedef void* (*dsMallocFn)(size_t size);
typedef void* (*dsReallocFn)(void* ptr, size_t size);
typedef void* (*dsCallocFn)(size_t count, size_t size);
typedef void (*dsFreeFn)(void* ptr);
DS_API int ds_replace_allocator(dsMallocFn m, dsReallocFn r, dsCallocFn c, dsFreeFn f);
/* Through the allocator in use (for plugins and env classes, whose memory
 * then counts with the library's): count x size bytes zeroed, NULL on
 * failure; ds_free(NULL) does nothing. */
DS_API void* ds_calloc(size_t count, size_t size);
DS_API void ds_free(void* p);

/* ---- config keys -----------------------------------------------------------
 * A config section (env, controller, run) is described by one table of
 * dotted key paths with the type, the range and the offset of the target
 * field in a definition struct; the table is the single place a key's type,
 * range and documentation live, whether the value comes from a config file
 * (ds_config_parse_section, dsim/env.h) or a command-line flag
 * (ds_config_set). Tables end with an entry whose path is NULL. */
typedef enum dsConfigType {
  DS_KEY_REAL,   /* JSON number -> dsReal, within [min, max] */
  DS_KEY_INT,    /* JSON integer -> int, within [min, max] */
  DS_KEY_BOOL,   /* true/false -> int 0/1 */
  DS_KEY_STRING, /* JSON string -> char[max] (max: buffer size), must fit */
  DS_KEY_ENUM,   /* JSON string, one of `choices` ("a|b|c") -> int index */
  DS_KEY_VEC3,   /* array of 3 numbers -> dsReal[3], each within [min, max] */
  DS_KEY_REALS,  /* array of 1..max numbers (max <= 128) -> dsReal[max], count in the int at aux_offset */
  DS_KEY_DOUBLE, /* JSON number -> double, within [min, max] */
  DS_KEY_DVEC3,  /* array of 3 numbers -> double[3], each within [min, max] */
  DS_KEY_U64     /* JSON integer -> uint64_t, within [min, max] */
} dsConfigType;

/* Bounds the key tables share (bundled classes and plugins alike): the
 * largest value of a material, contact or other physical key, and the
 * smallest value of one that must stay positive (masses, densities, the
 * volume modulus). */
#define DS_KEY_MAX 1e12
#define DS_KEY_MIN_POSITIVE 1e-9

typedef struct dsConfigKey {
  const char* path;     /* dotted key path within the section, e.g. "contact.ke" */
  dsConfigType type;
  size_t offset;        /* offset of the target field in the definition struct */
  double min, max;      /* inclusive range (DS_KEY_STRING: max = buffer size) */
  const char* choices;  /* DS_KEY_ENUM: "adam|sgd" */
  size_t aux_offset;    /* DS_KEY_REALS: offset of the int count */
  const char* doc;      /* one line, units included (`dsim config --keys` lists them) */
} dsConfigKey;

/* Config sections (io/config_api.c, for every owner of a section). Parse
 * `section` ("env", "controller", "run") of a config text into target
 * (which holds the defaults) by the key table; absent keys keep their values;
 * messages name the file and "section.key"; a top-level key other than a
 * section (ds_config_check_top) is an error. */
DS_API int ds_config_parse_section(const char* name, const char* text, const char* section, const dsConfigKey* keys,
                                   void* target, size_t target_size, char* err, size_t errlen);
/* One key of `section` from text (a command-line flag), checked as in a
 * config; messages read "SOURCE: section.key: expected ...". */
DS_API int ds_config_set(const char* source, const char* section, const dsConfigKey* keys, void* target,
                         size_t target_size, const char* key, const char* value, char* err, size_t errlen);
/* Check every value of a definition made in code against the table, with a
 * config file's messages ("SOURCE: section.key: expected ..."). */
DS_API int ds_config_check(const char* source, const char* section, const dsConfigKey* keys, const void* target,
                           size_t target_size, char* err, size_t errlen);
/* Read a whole text file (free it with ds_config_free_text). */
DS_API int ds_config_read_file(const char* path, char** text, char* err, size_t errlen);
DS_API void ds_config_free_text(char* text);
/* DS_ERR_CONFIG unless every top-level key of the config text is a section
 * ("env", "controller", "run", "sysid"); the message (err) names the file
 * `name` and suggests the nearest section. */
DS_API int ds_config_check_top(const char* name, const char* text, char* err, size_t errlen);
/* The string at `section.key` (section NULL: a top-level key) of a config
 * text into out (outlen bytes): DS_ERR_NOTFOUND when absent, DS_ERR_RANGE
 * when not a string or too long, DS_ERR_PARSE for invalid JSON. Picks the
 * env class before its section is parsed. */
DS_API int ds_config_peek_string(const char* text, const char* section, const char* key, char* out, size_t outlen);

/* ---- episode record ----------------------------------------------------------
 * One episode's trajectory as the recorder fills it (ds_recorder_record,
 * dsim/controller.h) and a run log stores it (ds_runlog_write_episode,
 * dsim/runlog.h): one type, passed as is. */
typedef struct dsEpisodeRecord {
  int iteration;               /* optimisation iteration that produced it */
  double loss, metric;
  double dt;                   /* physics substep, s */
  int control_interval;        /* substeps per control step */
  int render_interval;         /* substeps per rendered frame */
  int stride;                  /* positions/velocities kept every stride-th substep and the last */
  int nsubsteps, nparticles;   /* rows of positions/velocities (T + 1: substeps 0..T), N */
  float* positions;            /* nsubsteps x N x 3, m (NULL: not stored; unkept rows are 0) */
  float* velocities;           /* same, m/s */
  int nsteps, action_dim;      /* S x A actions (NULL: not stored) */
  float* actions;
  int nframes, height, width;  /* F x H x W x 4 RGBA frames (NULL: not stored) */
  uint8_t* frames;
  uint8_t* goal;               /* H x W x 4 goal image (NULL: not stored) */
  const int* frame_substep;    /* nframes substeps the frames show (NULL: the render schedule, frame f at
                                  min(f * render_interval, nsubsteps - 1)); times are substep * dt */
  double cam_eye[3];           /* the frames' camera position (y up), m */
  double cam_fov;              /* its vertical field of view, degrees (0: camera not stored) */
  double cam_look_at[3];       /* the point it looks at, m (zeros: the origin) */
  double cam_intr[4];          /* its intrinsics fx, fy, cx, cy, pixels (fx 0: none, the fov) */
  int cam_nviews;              /* views of the run (0 or 1: the camera above; up to 8): cam_views */
  const double* cam_views;     /* cam_nviews x 11: position (3), look_at (3), fov, fx, fy, cx, cy (view 0
                                  is the frames' camera) */
} dsEpisodeRecord;

/* ---- log hook --------------------------------------------------------------
 * The library never prints. Diagnostics go to this hook (none by default). */
typedef enum dsLogLevel { DS_LOG_DEBUG = 0, DS_LOG_INFO = 1, DS_LOG_WARN = 2, DS_LOG_ERROR = 3 } dsLogLevel;
typedef void (*dsLogFn)(dsLogLevel level, const char* msg, void* user);
DS_API void ds_set_log_hook(dsLogFn fn, void* user);

#ifdef __cplusplus
}
#endif
#endif

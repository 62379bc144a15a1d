/* Run logs: one HDF5 file per `dsim run`, readable by h5py, h5dump and
 * MATLAB, flushed after every iteration so that a killed run leaves a file
 * with every completed iteration. The schema is documented in docs/cli.md
 * ("Run logs (HDF5)"). In a build --without-hdf5 every function returns
 * DS_ERR_UNSUPPORTED. */
#ifndef DSIM_RUNLOG_H
#define DSIM_RUNLOG_H

#include <stdint.h>

#include "dsim/base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The value of /meta's "format" attribute; files without it are refused. */
#define DS_RUNLOG_FORMAT "dsim-run-1"

typedef struct dsRunLog dsRunLog;

typedef struct dsRunLogDef {
  const char* config_text;   /* the JSON config used (stored as /config) */
  const char* env;           /* environment name, e.g. "control-fem" */
  const char* method;        /* "image", "state", "random", "cem", ... */
  uint64_t seed;             /* run seed */
  int threads;               /* OpenMP threads used */
  int nparams;               /* length of the per-iteration parameter vector (0: none) */
  int substep_stride;        /* store every k-th substep of trajectories (>= 1; the last is always stored) */
  int compression;           /* gzip level 0..9 for frames and trajectories (default 1: level 4 cost 8% more
                                instructions per control-fem iteration for a 4% smaller file) */
  int overwrite;             /* 0 (default): refuse a path that exists; 1: replace it */
  int has_metric_goal;       /* 1: metric_goal is stored (/meta "metric_goal") */
  double metric_goal;        /* the metric's target (stored in /meta; the best iteration is the lowest loss) */
} dsRunLogDef;

DS_API dsRunLogDef ds_default_runlog_def(void);

typedef struct dsRunIteration {
  double loss;               /* optimised loss */
  double metric;             /* task metric (e.g. final centre-of-mass error, m^2) */
  double wall_time;          /* seconds since the start of the run */
  double grad_norm;          /* norm of the parameter gradient */
  const double* params;      /* nparams controller or identified parameters (may be NULL) */
} dsRunIteration;

/* Episodes are dsEpisodeRecord (dsim/base.h). */

/* Create path and write /config and /meta. An existing path is refused
 * (DS_ERR_IO, "exists") unless def->overwrite; the check and the creation
 * are one step (no race with another writer). The log is locked until
 * ds_runlog_close: a path another writer holds is refused (DS_ERR_IO, "in
 * use by another run (pid N)") before anything is replaced, even with
 * overwrite. err gets a message naming the file on failure.
 *
 * The log is built in memory and every call below commits it: the whole
 * file is written beside the path and renamed over it, so the path always
 * names a complete log, whenever the process is killed (docs/reliability.md).
 * The log's folder must therefore be writable. A symbolic link is followed
 * to its target. */
DS_API int ds_runlog_create(const char* path, const dsRunLogDef* def, dsRunLog** out, char* err, size_t errlen);
/* Append one iteration to /iterations and commit. A commit that cannot be
 * written (a full disk, RLIMIT_FSIZE: every commit but the final one also
 * keeps 64 KiB free for the final status) returns DS_ERR_IO; the log on
 * disk and in memory is then as the last commit left it, with every
 * iteration before, and still closes cleanly. */
DS_API int ds_runlog_append_iteration(dsRunLog* log, const dsRunIteration* it);
/* Write (or replace) /episodes/<which>, which is "first", "best" or "last",
 * and commit (the episode appears whole or not at all). */
DS_API int ds_runlog_write_episode(dsRunLog* log, const char* which, const dsEpisodeRecord* ep);
/* Record the end state ("completed", "interrupted", "failed: ...") in /meta,
 * commit (synced to disk) and close. NULL-safe; NULL status: close without
 * a final commit (the log keeps its last one). */
DS_API int ds_runlog_close(dsRunLog* log, const char* status);
DS_API const char* ds_runlog_last_error(const dsRunLog* log);

/* ---- reading -------------------------------------------------------------
 * A log may come from anywhere: every object is checked against the schema
 * (link and object kind, type class, rank, dimensions, byte size against
 * ds_memory_limit() and the bytes the file holds, filters) before it is read,
 * and anything else is refused with DS_ERR_FORMAT naming the object and what
 * was expected. A file corrupt enough to break libhdf5's own parsing can
 * still crash inside libhdf5 (the CLI reads logs in a child process first). */
typedef struct dsRunSummary {
  char version[32];          /* dsim version that wrote it */
  char env[64];
  char method[32];
  char status[128];          /* "running" when the writer never closed it (killed) */
  char start_time[32];       /* ISO 8601 UTC */
  uint64_t seed;
  int threads;
  int niterations;           /* completed iterations */
  int nparams;
  double first_loss, last_loss, best_loss, first_metric, last_metric, best_metric;
  int best_iteration;        /* the best logged iteration, from 0: the lowest loss (the first of equal
                                ones); best_loss and best_metric are its values; -1 when none */
  double wall_time;          /* wall time of the last iteration, s */
  int has_episode[3];        /* first, best, last */
  int best_episode_iteration; /* the iteration of /episodes/best (-1: none). A killed run's may be an
                                 older best than best_iteration (dsim/run.h says by how much) */
} dsRunSummary;

DS_API int ds_runlog_read_summary(const char* path, dsRunSummary* s, char* err, size_t errlen);
/* The per-iteration series (each an array of *n doubles, free with ds_runlog_free). */
DS_API int ds_runlog_read_iterations(const char* path, int* n, double** loss, double** metric, double** wall_time,
                                     double** grad_norm, char* err, size_t errlen);
/* The frames of /episodes/<which>: *rgba is F x H x W x 4 (free with ds_runlog_free). */
DS_API int ds_runlog_read_frames(const char* path, const char* which, int* nframes, int* height, int* width,
                                 uint8_t** rgba, char* err, size_t errlen);
/* The goal image of /episodes/<which>: *rgba is H x W x 4 (free with ds_runlog_free). */
DS_API int ds_runlog_read_goal(const char* path, const char* which, int* height, int* width, uint8_t** rgba, char* err,
                               size_t errlen);
/* What the frames of /episodes/<which> show (datasets "substeps" and
 * "times" beside "frames", camera attributes on the episode group): one
 * substep and time per frame, and the camera the frames were rendered
 * from. Logs written before frames carried their times give
 * DS_ERR_NOTFOUND. Free with ds_runlog_frame_info_free. */
#define DS_RUNLOG_MAX_FRAMES 1000000
typedef struct dsRunFrameInfo {
  int nframes;
  int* substeps;             /* nframes substeps (increasing, frame 0 at 0 when the initial state is shown) */
  double* times;             /* nframes times, s (substep x dt) */
  int has_camera;            /* 1: position, look_at and fov are the frames' camera */
  double position[3];        /* camera position, m */
  double look_at[3];         /* the point it looks at (y up), m */
  double fov;                /* vertical field of view, degrees */
  double intr[4];            /* intrinsics fx, fy, cx, cy, pixels (fx 0: none; the frames used the fov) */
  int nviews;                /* 0: one view; 2..DS_RUNLOG_MAX_VIEWS: the run's views (the frames: view 0's) */
  double views[8][11];       /* per view: position (3), look_at (3), fov, fx, fy, cx, cy */
} dsRunFrameInfo;
#define DS_RUNLOG_MAX_VIEWS 8
DS_API int ds_runlog_read_frame_info(const char* path, const char* which, dsRunFrameInfo* info, char* err,
                                     size_t errlen);
DS_API void ds_runlog_frame_info_free(dsRunFrameInfo* info);
/* The per-iteration parameters: *params is n x nparams (free with
 * ds_runlog_free); n = 0 and *params NULL when the log has none. */
DS_API int ds_runlog_read_params(const char* path, int* n, int* nparams, double** params, char* err, size_t errlen);
/* The config text (free with ds_runlog_free). */
DS_API int ds_runlog_read_config(const char* path, char** text, char* err, size_t errlen);
DS_API void ds_runlog_free(void* p);

#ifdef __cplusplus
}
#endif
#endif

/* dsim run object: what `dsim run` does, as a library object that C, Python
 * (ctypes) and tests drive the same way: a run config (sections env,
 * controller, run) -> env -> trainer -> optimisation iterations -> HDF5 run
 * log (dsim/runlog.h) with the first, best and last episodes -> summary.
 *
 *   dsRun* run;
 *   dsRunOptions opt = ds_default_run_options();
 *   if (ds_run_create_from_text("my.json", text, &opt, &run, err, sizeof err)) ...;
 *   ds_run_execute(run);               // every iteration, then ds_run_finish
 *   dsRunResult res; ds_run_result(run, &res);
 *   ds_run_destroy(run);
 *
 * or, iteration by iteration (what the CLI does to print progress):
 *
 *   while (!ds_run_done(run)) { dsTrainerIter it; if (ds_run_step(run, &it)) break; ... }
 *   ds_run_finish(run);
 *
 * Stopping: ds_run_request_stop (async-signal-safe: a SIGINT handler may call
 * it) lets the current iteration finish; the run is then done, the best and
 * last episodes are recorded and the log is closed with status
 * "interrupted". A second request before ds_run_finish skips recording the
 * episodes.
 *
 * Iterations are numbered from 0 everywhere (results, log, CLI output).
 * The best iteration is the one with the lowest loss: what the optimiser
 * minimises and returns (the metric reports on the task and is logged next
 * to it). Its episode is written with iteration 0's (first = best), then as
 * it improves while recording has taken at most 10% of the run's time
 * (recording re-simulates an episode), and otherwise once the last best
 * recording is 5 iterations old: a killed run keeps a best episode that is
 * the lowest loss of every iteration but the last 5 logged. ds_run_finish
 * writes it if the latest best was not written yet.
 *
 * Nothing is printed; errors are returned (0 or a negative DS_ERR_*) with a
 * message in ds_run_last_error (create: in err). */
#ifndef DSIM_RUN_H
#define DSIM_RUN_H

#include <stddef.h>

#include "dsim/base.h"
#include "dsim/config_dirs.h"
#include "dsim/controller.h"
#include "dsim/env.h"

#ifdef __cplusplus
extern "C" {
#endif

/* parameters logged per iteration at most (the first ones of the trainer's) */
#define DS_RUN_MAX_LOGGED_PARAMS 65536
/* length of a run's status text ("completed", "interrupted", "failed: ...") */
#define DS_RUN_STATUS_MAX 600

typedef struct dsRunOptions {
  int log;           /* 1 (default): open the run log at create (dsRunDef.out, or the default
                        name runs/ENV-METHOD[-mpc]-sSEED.h5 with the first free -1, -2, ...
                        suffix; directories are created); 0: none unless ds_run_open_log */
  int overwrite;     /* 1: the log may replace an existing file (only with dsRunDef.out set) */
  const char* name;  /* the config's name in messages (a file name); NULL: "config" */
} dsRunOptions;

DS_API dsRunOptions ds_default_run_options(void);

typedef struct dsRun dsRun;

/* The run's results so far (valid at any time; final after ds_run_finish). */
typedef struct dsRunResult {
  int iterations;          /* completed iterations */
  int planned;             /* dsRunDef.iterations */
  int interrupted;         /* 1: stopped by ds_run_request_stop */
  double first_loss, last_loss, first_metric, last_metric;
  double best_metric;      /* the metric of the best iteration (the lowest loss) ... */
  int best_iteration;      /* ... and its iteration, from 0 (-1 before the first) */
  double low_loss, low_metric; /* the lowest loss (the optimiser's result, the best) and its metric ... */
  int low_iteration;       /* ... and its iteration: always best_iteration (kept for the ABI) */
  double iteration_time;   /* s, in the trainer's iterations (recording excluded) */
  int nparams;             /* controller parameters */
  int threads;             /* OpenMP threads the run uses */
  char status[DS_RUN_STATUS_MAX]; /* the log's status: "running", "completed", "interrupted", "failed: ..." */
} dsRunResult;

/* The complete run config of the three definitions (every key with its
 * value) as JSON text, the form a run log stores as /config: a rerun from it
 * repeats the run. NULL when out of memory; free() it. */
DS_API char* ds_run_config_json(const dsEnvDef* env, const dsTrainerDef* td, const dsRunDef* rd);

/* mkdir -p of the directory part of path (for a log or output file): 0, or
 * -1 with errno set. */
DS_API int ds_make_parent_dirs(const char* path);

/* Parse a run config's three sections into *env, *td and *rd (td and rd
 * start from the defaults). name names the text in messages. Errors name the
 * file and key (DS_ERR_CONFIG, DS_ERR_PARSE, DS_ERR_NOMEM). */
DS_API int ds_run_defs_from_text(const char* name, const char* text, dsEnvDef* env, dsTrainerDef* td, dsRunDef* rd,
                                 char* err, size_t errlen);
/* Set one key "SECTION.KEY" (sections env, controller, run) to value (JSON
 * text or a bare word), checked by the section's key table; source names the
 * setting in messages (e.g. "--set"). */
DS_API int ds_run_defs_set(dsEnvDef* env, dsTrainerDef* td, dsRunDef* rd, const char* source, const char* key,
                           const char* value, char* err, size_t errlen);
/* The run section's settings the trainer takes (method; seed as the
 * controller's, the goal's and the network's seed) copied into *td. */
DS_API void ds_run_apply_def(const dsRunDef* rd, dsTrainerDef* td);

/* Create a run from the three definitions: ds_run_apply_def, the trainer
 * definition checked, rd->threads applied (ds_set_num_threads when > 0), the
 * env and trainer created, and the log opened when opt->log (opt NULL: the
 * defaults). rd->device is not checked here: env->device decides. */
DS_API int ds_run_create(const dsEnvDef* env, const dsTrainerDef* td, const dsRunDef* rd, const dsRunOptions* opt,
                         dsRun** out, char* err, size_t errlen);
/* ds_run_defs_from_text, then each override "SECTION.KEY=VALUE" (n of them,
 * may be 0), then ds_run_create. */
DS_API int ds_run_create_from_text(const char* name, const char* text, const char* const* overrides, int n,
                                   const dsRunOptions* opt, dsRun** out, char* err, size_t errlen);
DS_API void ds_run_destroy(dsRun* run);

/* The default log path (runs/ENV-METHOD[-mpc]-sSEED.h5, then -1, -2, ...:
 * the first that does not exist) into path; DS_ERR_RANGE when it does not
 * fit, DS_ERR_STATE when 100000 names are taken. */
DS_API int ds_run_default_log_path(dsRun* run, char* path, size_t len);
/* Open the run log at path (its directories are created), with overwrite as
 * dsRunOptions.overwrite; DS_ERR_STATE when one is open or an iteration ran,
 * DS_ERR_UNSUPPORTED in a build --without-hdf5 (the run goes on without). */
DS_API int ds_run_open_log(dsRun* run, const char* path, int overwrite);
/* The log's path ("" when none is open). */
DS_API const char* ds_run_log_path(const dsRun* run);

/* 1 when every iteration has run, the run was stopped, or an iteration failed. */
DS_API int ds_run_done(const dsRun* run);
/* One optimisation iteration (logged); *it as ds_trainer_iterate's (may be
 * NULL). DS_ERR_STATE when done. An env failure (DS_ERR_DIVERGED, ...) or a
 * log failure ends the run: the status becomes "failed: ...". */
DS_API int ds_run_step(dsRun* run, dsTrainerIter* it);
/* Record the best and last episodes and close the log with the status. Call
 * once, after the last step; returns the first error (the log is closed
 * regardless). A recording error after a failed or stopped run is returned
 * but leaves the status as it was. */
DS_API int ds_run_finish(dsRun* run);
/* Every remaining iteration, then ds_run_finish: 0, DS_ERR_INTERRUPTED when
 * stopped, or the first error. */
DS_API int ds_run_execute(dsRun* run);
/* Async-signal-safe: ask the run to stop after the current iteration; a
 * second request also skips recording the episodes at finish. */
DS_API void ds_run_request_stop(dsRun* run);
DS_API int ds_run_result(const dsRun* run, dsRunResult* out);

DS_API dsEnv* ds_run_env(dsRun* run);
DS_API dsTrainer* ds_run_trainer(dsRun* run);
/* "image", "image-mpc", "state", ... (the log's method) */
DS_API const char* ds_run_method_name(const dsRun* run);
/* The resolved definitions (after ds_run_apply_def). */
DS_API const dsTrainerDef* ds_run_trainer_def(const dsRun* run);
DS_API const dsRunDef* ds_run_run_def(const dsRun* run);
DS_API const char* ds_run_last_error(const dsRun* run);

/* ---- bundled configs: ds_run_config_dir, ds_run_find_config (dsim/config_dirs.h) */

#ifdef __cplusplus
}
#endif
#endif

/* The run object (dsim/run.h): the optimisation loop of `dsim run` with its
 * run log, stop requests and best-episode keeping, below the CLI so that
 * Python and tests run "a run" the same way. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, mkdir */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "dsim/controller.h"
#include "dsim/run.h"
#include "dsim/runlog.h"
#include "base/internal.h"

/* names tried for the default log path: base.h5, base-1.h5 .. base-99999.h5 */
#define RUN_MAX_LOG_SUFFIX 100000
/* Recording re-simulates an episode (a forward replay with rendering, no
 * backward). A best (the lowest loss) not yet written is written after the
 * iteration that found it while recording has taken at most RUN_RECORD_SHARE
 * of the run's time; past that share, once the last best recording is
 * RUN_BEST_LAG iterations old. So after a kill the kept best episode is the lowest loss of
 * every iteration but the last RUN_BEST_LAG logged ones, for at most one
 * extra replay per RUN_BEST_LAG iterations (and none once the best stops
 * improving). */
#define RUN_RECORD_SHARE 0.1
#define RUN_BEST_LAG 5

struct dsRun {
  dsEnv* env;
  dsTrainer* tr;
  dsTrainerDef td;
  dsRunDef rd;
  dsRunLog* log;
  dsRecorder* rec;
  char* resolved;          /* the complete config (ds_run_config_json), stored as /config */
  char out[4096];          /* the log's path ("" without one) */
  char mname[32];          /* "image", "image-mpc", ... */
  int S, A, np, nlog, nthreads;
  dsReal *best_act, *last_act; /* S x A */
  int have, last_it, finished, failed;
  int logged_best;         /* iteration of the best episode in the log (-1: none) */
  int recorded_at;         /* iteration after which the best episode was last written */
  int stopped;             /* finished after a stop request */
  double t0, t_record;
  volatile sig_atomic_t stop_requests;
  dsRunResult res;
  dsErrBuf err;
};

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

dsRunOptions ds_default_run_options(void) {
  dsRunOptions o;
  memset(&o, 0, sizeof o);
  o.log = 1;
  return o;
}

/* ---- definitions ------------------------------------------------------------ */
char* ds_run_config_json(const dsEnvDef* def, const dsTrainerDef* td, const dsRunDef* rd) {
  if (!def || !td || !rd) return NULL;
  const int n = ds_env_def_to_json(def, NULL, 0);
  const int nc = ds_config_write_section(ds_trainer_keys(), td, 4, NULL, 0);
  const int nr = ds_config_write_section(ds_run_keys(), rd, 4, NULL, 0);
  if (n < 0 || nc < 0 || nr < 0) return NULL;
  char* env = (char*)malloc((size_t)n + 1);
  char* ctrl = (char*)malloc((size_t)nc + 1);
  char* run = (char*)malloc((size_t)nr + 1);
  const size_t total = (size_t)n + (size_t)nc + (size_t)nr + 64;
  char* out = (char*)malloc(total);
  if (env && ctrl && run && out) {
    ds_env_def_to_json(def, env, (size_t)n + 1);
    ds_config_write_section(ds_trainer_keys(), td, 4, ctrl, (size_t)nc + 1);
    ds_config_write_section(ds_run_keys(), rd, 4, run, (size_t)nr + 1);
    /* env's text ends in "\n  }\n}\n": continue the object after its section */
    char* tail = strstr(env, "\n  }\n}\n");
    if (tail) tail[4] = '\0';
    snprintf(out, total, "%s,\n  \"controller\": {%s\n  },\n  \"run\": {%s\n  }\n}\n", env, ctrl, run);
  } else {
    free(out);
    out = NULL;
  }
  free(env);
  free(ctrl);
  free(run);
  return out;
}

int ds_run_defs_from_text(const char* name, const char* text, dsEnvDef* env, dsTrainerDef* td, dsRunDef* rd,
                          char* err, size_t errlen) {
  if (!text || !env || !td || !rd) return ds__puterr(err, errlen, DS_ERR_INVALID, "run config: NULL argument");
  if (!name) name = "config";
  *td = ds_default_trainer_def();
  *rd = ds_default_run_def();
  int rc = ds_env_def_from_text(name, text, env, err, errlen);
  if (!rc) rc = ds_trainer_def_from_text(name, text, td, err, errlen);
  if (!rc) rc = ds_run_def_from_text(name, text, rd, err, errlen);
  return rc;
}

int ds_run_defs_set(dsEnvDef* env, dsTrainerDef* td, dsRunDef* rd, const char* source, const char* key,
                    const char* value, char* err, size_t errlen) {
  if (!env || !td || !rd || !key || !value) return ds__puterr(err, errlen, DS_ERR_INVALID, "run config: NULL argument");
  if (!source) source = "set";
  const char* dot = strchr(key, '.');
  const size_t ns = dot ? (size_t)(dot - key) : 0;
  if (dot && ns == 3 && !strncmp(key, "env", 3)) return ds_env_def_set(env, dot + 1, value, err, errlen);
  if (dot && ns == 10 && !strncmp(key, "controller", 10))
    return ds_config_set(source, "controller", ds_trainer_keys(), td, sizeof *td, dot + 1, value, err, errlen);
  if (dot && ns == 3 && !strncmp(key, "run", 3))
    return ds_config_set(source, "run", ds_run_keys(), rd, sizeof *rd, dot + 1, value, err, errlen);
  return ds__puterr(err, errlen, DS_ERR_CONFIG, "%s: '%s': expected SECTION.KEY with section env, controller or run",
                    source, key);
}

void ds_run_apply_def(const dsRunDef* rd, dsTrainerDef* td) {
  if (!rd || !td) return;
  td->method = rd->method;
  td->seed = td->env_seed = td->net.seed = rd->seed;
}

/* ---- create ----------------------------------------------------------------- */
/* The env, trainer and action buffers of r (its definitions set). */
static int build(dsRun* r, const dsEnvDef* env, const char* name, char* err, size_t errlen) {
  int rc = ds_trainer_def_validate(&r->td, err, errlen);
  if (rc) return rc;
  if (r->rd.threads > 0) ds_set_num_threads(r->rd.threads);
  r->nthreads = ds_get_max_threads();
  r->resolved = ds_run_config_json(env, &r->td, &r->rd);
  if (!r->resolved) return ds__puterr(err, errlen, DS_ERR_NOMEM, "out of memory");
  if ((rc = ds_env_create(env, &r->env, err, errlen))) return rc;
  char msg[1024];
  if ((rc = ds_trainer_create(r->env, &r->td, &r->tr, msg, sizeof msg)))
    return ds__puterr(err, errlen, rc, "%s: %s", name, msg);
  r->S = ds_env_num_steps(r->env);
  r->A = ds_env_action_size(r->env);
  const size_t SA = (size_t)r->S * (size_t)r->A;
  r->best_act = (dsReal*)calloc(SA + 1, sizeof(dsReal));
  r->last_act = (dsReal*)calloc(SA + 1, sizeof(dsReal));
  if (!r->best_act || !r->last_act) return ds__puterr(err, errlen, DS_ERR_NOMEM, "out of memory");
  snprintf(r->mname, sizeof r->mname, "%s%s", ds_method_name(r->td.method), r->td.mpc ? "-mpc" : "");
  r->np = ds_trainer_num_params(r->tr);
  r->nlog = r->np < DS_RUN_MAX_LOGGED_PARAMS ? r->np : DS_RUN_MAX_LOGGED_PARAMS;
  return 0;
}

int ds_run_create(const dsEnvDef* env, const dsTrainerDef* td, const dsRunDef* rd, const dsRunOptions* opt,
                  dsRun** out, char* err, size_t errlen) {
  if (!out) return ds__puterr(err, errlen, DS_ERR_INVALID, "run: out is NULL");
  *out = NULL;
  if (!env || !td || !rd) return ds__puterr(err, errlen, DS_ERR_INVALID, "run: NULL definition");
  const dsRunOptions o = opt ? *opt : ds_default_run_options();
  dsRun* r = (dsRun*)calloc(1, sizeof *r);
  if (!r) return ds__puterr(err, errlen, DS_ERR_NOMEM, "out of memory");
  r->td = *td;
  r->rd = *rd;
  ds_run_apply_def(&r->rd, &r->td);
  r->logged_best = r->last_it = r->recorded_at = -1;
  r->res.best_iteration = r->res.low_iteration = -1;
  r->res.best_metric = INFINITY;
  r->res.planned = r->rd.iterations;
  snprintf(r->res.status, sizeof r->res.status, "running");
  int rc = build(r, env, o.name ? o.name : "config", err, errlen);
  if (!rc && o.log) {
    char path[sizeof r->out];
    if (r->rd.out[0])
      snprintf(path, sizeof path, "%s", r->rd.out);
    else
      rc = ds_run_default_log_path(r, path, sizeof path);
    if (!rc) rc = ds_run_open_log(r, path, o.overwrite && r->rd.out[0]);
    if (rc == DS_ERR_UNSUPPORTED) rc = 0; /* a build without HDF5 runs without a log */
    if (rc) ds__puterr(err, errlen, rc, "%s", ds__errmsg(&r->err));
  }
  if (rc) {
    ds_run_destroy(r);
    return rc;
  }
  r->res.nparams = r->np;
  r->res.threads = r->nthreads;
  *out = r;
  return 0;
}

int ds_run_create_from_text(const char* name, const char* text, const char* const* overrides, int n,
                            const dsRunOptions* opt, dsRun** out, char* err, size_t errlen) {
  if (out) *out = NULL;
  dsEnvDef ed;
  dsTrainerDef td;
  dsRunDef rd;
  int rc = ds_run_defs_from_text(name, text, &ed, &td, &rd, err, errlen);
  for (int i = 0; i < n && !rc; i++) {
    const char* kv = overrides[i];
    const char* eq = kv ? strchr(kv, '=') : NULL;
    char key[160];
    if (!eq || (size_t)(eq - kv) >= sizeof key)
      return ds__puterr(err, errlen, DS_ERR_CONFIG, "override %d: expected SECTION.KEY=VALUE, got '%s'", i,
                        kv ? kv : "(null)");
    snprintf(key, sizeof key, "%.*s", (int)(eq - kv), kv);
    rc = ds_run_defs_set(&ed, &td, &rd, "override", key, eq + 1, err, errlen);
  }
  if (rc) return rc;
  dsRunOptions o = opt ? *opt : ds_default_run_options();
  if (!o.name) o.name = name;
  return ds_run_create(&ed, &td, &rd, &o, out, err, errlen);
}

void ds_run_destroy(dsRun* r) {
  if (!r) return;
  if (r->log) ds_runlog_close(r->log, r->res.iterations ? r->res.status : "failed: setup");
  ds_recorder_destroy(r->rec);
  ds_trainer_destroy(r->tr);
  ds_env_destroy(r->env);
  free(r->resolved);
  free(r->best_act);
  free(r->last_act);
  free(r);
}

/* ---- the log ------------------------------------------------------------------ */
static int file_exists(const char* p) {
  struct stat st;
  return stat(p, &st) == 0 || errno != ENOENT;
}

int ds_run_default_log_path(dsRun* r, char* path, size_t len) {
  if (!r || !path || !len) return DS_ERR_INVALID;
  char base[3072];
  snprintf(base, sizeof base, "runs/%s-%s-s%llu", ds_env_name(r->env), r->mname, (unsigned long long)r->td.seed);
  for (int k = 0; k < RUN_MAX_LOG_SUFFIX; k++) {
    const int w = k == 0 ? snprintf(path, len, "%s.h5", base) : snprintf(path, len, "%s-%d.h5", base, k);
    if (w < 0 || (size_t)w >= len) return ds__seterr(&r->err, DS_ERR_RANGE, "%s.h5: path too long", base);
    if (!file_exists(path)) return 0;
  }
  return ds__seterr(&r->err, DS_ERR_STATE, "%s.h5 and %d numbered names after it exist; give run.out", base,
                    RUN_MAX_LOG_SUFFIX - 1);
}

/* mkdir -p of the directory part of path; 0 or -1 (errno set) */
int ds_make_parent_dirs(const char* path) {
  char buf[4096];
  if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) {
    errno = ENAMETOOLONG;
    return -1;
  }
  char* slash = strrchr(buf, '/');
  if (!slash || slash == buf) return 0;
  *slash = '\0';
  for (char* p = buf + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(buf, 0777) != 0 && errno != EEXIST) return -1;
    *p = '/';
  }
  if (mkdir(buf, 0777) != 0 && errno != EEXIST) return -1;
  return 0;
}

int ds_run_open_log(dsRun* r, const char* path, int overwrite) {
  if (!r || !path || !*path) return DS_ERR_INVALID;
  if (r->log || r->res.iterations)
    return ds__seterr(&r->err, DS_ERR_STATE, "%s: the run log is opened before the first iteration, once", path);
  if (snprintf(r->out, sizeof r->out, "%s", path) >= (int)sizeof r->out)
    return ds__seterr(&r->err, DS_ERR_RANGE, "%s: path too long", path);
  if (ds_make_parent_dirs(r->out) != 0) {
    const int e = errno;
    r->out[0] = '\0';
    return ds__seterr(&r->err, DS_ERR_IO, "%s: cannot create its directory: %s", path, strerror(e));
  }
  dsRunLogDef ld = ds_default_runlog_def();
  ld.config_text = r->resolved;
  ld.env = ds_env_name(r->env);
  ld.method = r->mname;
  ld.seed = r->td.seed;
  ld.threads = r->nthreads;
  ld.nparams = r->nlog;
  ld.substep_stride = ds_env_def(r->env)->render_interval;
  ld.overwrite = overwrite;
  ld.has_metric_goal = 1;
  ld.metric_goal = ds_env_metric_goal(r->env);
  char msg[1024];
  int rc = ds_runlog_create(r->out, &ld, &r->log, msg, sizeof msg);
  if (!rc && (rc = ds_recorder_create(r->env, ld.substep_stride, &r->rec, msg, sizeof msg))) {
    ds_runlog_close(r->log, "failed: setup");
    r->log = NULL;
  }
  if (rc) {
    r->out[0] = '\0';
    return ds__seterr(&r->err, rc, "%s", msg);
  }
  return 0;
}

const char* ds_run_log_path(const dsRun* r) { return r && r->log ? r->out : ""; }

/* ---- the loop ----------------------------------------------------------------- */
static int write_episode(dsRun* r, const char* which, int iteration, const dsReal* actions) {
  if (!r->log) return 0;
  const dsEpisodeRecord* e = NULL;
  int rc = ds_recorder_record(r->rec, r->td.env_seed, iteration, actions, &e);
  if (rc)
    return ds__seterr(&r->err, rc, "recording the %s episode: %s", which, ds_recorder_last_error(r->rec));
  rc = ds_runlog_write_episode(r->log, which, e);
  if (rc) return ds__seterr(&r->err, rc, "%s", ds_runlog_last_error(r->log));
  return 0;
}

/* The results after iteration i. The best iteration is the lowest loss: what
 * the optimiser minimises and returns (controller.reject restarts its steps
 * from it), not the metric, which a controller may not observe (image
 * losses) and which only reports on the task. */
static void note_iteration(dsRun* r, int i, const dsTrainerIter* it) {
  dsRunResult* s = &r->res;
  const size_t SA = (size_t)r->S * (size_t)r->A;
  s->iterations++;
  memcpy(r->last_act, it->actions, SA * sizeof(dsReal));
  r->last_it = i;
  s->last_metric = it->metric;
  s->last_loss = it->loss;
  if (i == 0) {
    s->first_metric = it->metric;
    s->first_loss = it->loss;
  }
  if (!r->have || it->loss < s->low_loss) {
    s->low_loss = it->loss;
    s->low_metric = s->best_metric = it->metric;
    s->low_iteration = s->best_iteration = i;
    memcpy(r->best_act, it->actions, SA * sizeof(dsReal));
  }
  r->have = 1;
}

/* Write the best iteration's episode (iteration i just logged). */
static int write_best(dsRun* r, int i) {
  const double tr = now_s();
  int rc = write_episode(r, "best", r->res.best_iteration, r->best_act);
  if (rc) {
    snprintf(r->res.status, sizeof r->res.status, "failed: cannot record the best episode");
    return rc;
  }
  r->logged_best = r->res.best_iteration;
  r->recorded_at = i;
  r->t_record += now_s() - tr;
  return 0;
}

/* The log's row of iteration i; the first episode (also the first best);
 * a best not yet written when the time share or the lag says so. */
static int log_iteration(dsRun* r, int i, const dsTrainerIter* it) {
  dsRunIteration ri;
  ri.loss = it->loss;
  ri.metric = it->metric;
  ri.wall_time = now_s() - r->t0;
  ri.grad_norm = it->grad_norm;
  ri.params = it->params;
  if (ds_runlog_append_iteration(r->log, &ri)) {
    ds__seterr(&r->err, DS_ERR_IO, "%s", ds_runlog_last_error(r->log));
    snprintf(r->res.status, sizeof r->res.status, "failed: %s", ds_runlog_last_error(r->log));
    return DS_ERR_IO;
  }
  int rc;
  if (i == 0) {
    /* one replay written twice: iteration 0 is the first and the best so far
     * (not counted in the time share: every run writes it) */
    const dsEpisodeRecord* e = NULL;
    rc = ds_recorder_record(r->rec, r->td.env_seed, 0, it->actions, &e);
    if (rc) ds__seterr(&r->err, rc, "recording the first episode: %s", ds_recorder_last_error(r->rec));
    if (!rc && (rc = ds_runlog_write_episode(r->log, "first", e)) == 0) rc = ds_runlog_write_episode(r->log, "best", e);
    if (rc) {
      if (e) ds__seterr(&r->err, rc, "%s", ds_runlog_last_error(r->log));
      snprintf(r->res.status, sizeof r->res.status, "failed: cannot record the first episode");
      return rc;
    }
    r->logged_best = r->recorded_at = 0;
    return 0;
  }
  if (r->logged_best == r->res.best_iteration) return 0;
  const int share = r->t_record <= RUN_RECORD_SHARE * (now_s() - r->t0);
  return share || i - r->recorded_at >= RUN_BEST_LAG ? write_best(r, i) : 0;
}

/* A stop request is honoured after an iteration: the first always runs. */
int ds_run_done(const dsRun* r) {
  return !r || r->failed || r->finished || r->res.iterations >= r->rd.iterations ||
         (r->stop_requests && r->res.iterations > 0);
}

int ds_run_step(dsRun* r, dsTrainerIter* out) {
  if (!r) return DS_ERR_INVALID;
  if (ds_run_done(r)) return ds__seterr(&r->err, DS_ERR_STATE, "run: no iteration left (done, stopped or failed)");
  const int i = r->res.iterations;
  if (i == 0) r->t0 = now_s();
  const double ti = now_s();
  dsTrainerIter it;
  int rc = ds_trainer_iterate(r->tr, &it);
  r->res.iteration_time += now_s() - ti;
  if (rc) {
    r->failed = 1;
    snprintf(r->res.status, sizeof r->res.status, "failed: iteration %d: %s", i, ds_trainer_last_error(r->tr));
    return ds__seterr(&r->err, rc, "iteration %d failed: %s", i, ds_trainer_last_error(r->tr));
  }
  note_iteration(r, i, &it);
  if (r->log && (rc = log_iteration(r, i, &it))) {
    r->failed = 1;
    return rc;
  }
  if (out) *out = it;
  return 0;
}

int ds_run_finish(dsRun* r) {
  if (!r) return DS_ERR_INVALID;
  if (r->finished) return ds__seterr(&r->err, DS_ERR_STATE, "run: finished already");
  r->finished = 1;
  if (!r->failed && r->stop_requests && r->have) {
    r->stopped = 1;
    r->res.interrupted = 1;
    snprintf(r->res.status, sizeof r->res.status, "interrupted");
  }
  if (!r->failed && !r->stopped) snprintf(r->res.status, sizeof r->res.status, "completed");
  int rc = 0;
  if (r->log && r->have && r->stop_requests < 2) { /* a second stop request skips the episodes */
    const int e1 = r->logged_best == r->res.best_iteration
                       ? 0
                       : write_episode(r, "best", r->res.best_iteration, r->best_act);
    const int e2 = write_episode(r, "last", r->last_it, r->last_act);
    rc = e1 ? e1 : e2;
    if (rc && !r->failed && !r->stopped)
      snprintf(r->res.status, sizeof r->res.status, "failed: cannot record the best/last episodes");
  }
  if (r->log) {
    const int c = ds_runlog_close(r->log, r->res.status);
    r->log = NULL;
    if (c && !rc && !r->failed && !r->stopped) rc = ds__seterr(&r->err, c, "%s: cannot close the run log", r->out);
  }
  return rc;
}

int ds_run_execute(dsRun* r) {
  if (!r) return DS_ERR_INVALID;
  int rc = 0;
  while (!rc && !ds_run_done(r)) rc = ds_run_step(r, NULL);
  const int f = ds_run_finish(r);
  if (!rc) rc = r->stopped ? DS_ERR_INTERRUPTED : f;
  return rc;
}

void ds_run_request_stop(dsRun* r) {
  /* a store to a volatile sig_atomic_t: what a signal handler may do */
  if (r && r->stop_requests < 2) r->stop_requests = r->stop_requests + 1;
}

int ds_run_result(const dsRun* r, dsRunResult* out) {
  if (!r || !out) return DS_ERR_INVALID;
  *out = r->res;
  return 0;
}

dsEnv* ds_run_env(dsRun* r) { return r ? r->env : NULL; }
dsTrainer* ds_run_trainer(dsRun* r) { return r ? r->tr : NULL; }
const char* ds_run_method_name(const dsRun* r) { return r ? r->mname : ""; }
const dsTrainerDef* ds_run_trainer_def(const dsRun* r) { return r ? &r->td : NULL; }
const dsRunDef* ds_run_run_def(const dsRun* r) { return r ? &r->rd : NULL; }
const char* ds_run_last_error(const dsRun* r) { return r ? ds__errmsg(&r->err) : "run is NULL"; }

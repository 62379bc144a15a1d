/* `dsim run [CONFIG|ENV-NAME] [options]`: optimise a controller against the
 * env's goal (dsim/controller.h) and log the run (dsim/runlog.h).
 *
 * Config search (ENV-NAME or no argument = "control-fem"): an argument that
 * names an existing file is that file; otherwise NAME.json is looked up in
 *   1. $DS_SRCDIR/configs            (set by `make check`)
 *   2. the source tree's configs/    (compile-time DS_CONFIGS_SRCDIR)
 *   3. next to the executable: DIR/configs, DIR/../configs, DIR/../share/dsim/configs
 *   4. the installed $(pkgdatadir)/configs (compile-time DS_CONFIGS_DATADIR).
 *
 * SIGINT: the current iteration finishes, the best and last episodes are
 * recorded (a second SIGINT skips that), the log is closed with status
 * "interrupted" and the exit status is 130.
 *
 * The best episode is the iteration with the lowest metric (control-fem,
 * control-cloth: squared distance to the target) or, for the walkers (metric:
 * displacement), the one closest to the goal offset. */
#define _POSIX_C_SOURCE 200809L /* sigaction, readlink */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#ifdef _OPENMP
#  include <omp.h>
#endif

#include "cli/cli.h"
#include "dsim/controller.h"
#include "dsim/dsim.h"
#include "dsim/env.h"
#include "dsim/runlog.h"

#ifndef DS_CONFIGS_SRCDIR
#  define DS_CONFIGS_SRCDIR ""
#endif
#ifndef DS_CONFIGS_DATADIR
#  define DS_CONFIGS_DATADIR ""
#endif

/* parameters logged per iteration at most (the first ones of the flattened W) */
#define RUN_MAX_LOGGED_PARAMS 65536

static volatile sig_atomic_t g_interrupts = 0;

static void on_sigint(int sig) {
  (void)sig;
  g_interrupts++;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void usage(FILE* out) {
  fprintf(out,
          "usage: dsim run [CONFIG|ENV-NAME] [--iterations N] [--method image|state|random|cem] [--mpc]\n"
          "                [--lr X] [--seed S] [--threads T] [--out RUN.h5] [options]\n"
          "\n"
          "Optimise the controller of an environment against its goal and log the run.\n"
          "CONFIG is a JSON config; ENV-NAME (walker, control-fem, control-cloth, walker-springs)\n"
          "picks that env's bundled config; without either, the bundled control-fem config.\n"
          "Bundled configs are searched in $DS_SRCDIR/configs, the source tree's configs/, next\n"
          "to the executable (configs, ../configs, ../share/dsim/configs), then the installed\n"
          "share/dsim/configs.\n"
          "\n"
          "  --iterations N  optimisation iterations, one rollout each (default: controller.iterations)\n"
          "  --method M      image: the config's loss (an image loss in the bundled configs);\n"
          "                  state: 3-D centre-of-mass loss; random: random parameters;\n"
          "                  cem: cross-entropy method (default image)\n"
          "  --mpc           receding-horizon MPC (image or state): an iteration is one pass\n"
          "  --horizon H     MPC window, control steps (default: a quarter of the episode)\n"
          "  --execute E     MPC steps executed per window (default: half the window)\n"
          "  --inner K       MPC optimiser steps per window (default 1)\n"
          "  --lr X          learning rate (default: controller.lr)\n"
          "  --optimizer O   adam or sgd (default: controller.optimizer)\n"
          "  --clip X        gradient-norm clipping threshold, 0: off (default: controller.clip)\n"
          "  --momentum M    SGD heavy-ball momentum in [0, 1) (default: controller.momentum)\n"
          "  --decay-every N, --decay-factor F   step-decay learning-rate schedule\n"
          "                  (default: controller.decay_every, controller.decay_factor)\n"
          "  --population K  CEM samples per generation (default 8); --elite E (default 2)\n"
          "  --seed S        goal and controller seed (default: the config's seed)\n"
          "  --threads T     OpenMP threads (default: OMP_NUM_THREADS or all cores)\n"
          "  --out FILE      run log (default runs/ENV-METHOD[-mpc]-sSEED.h5; directories are\n"
          "                  created; an existing file is overwritten)\n"
          "\n"
          "Output: a progress bar on a terminal, else one line per iteration; then a summary\n"
          "(initial and final metric, best iteration, wall time). Ctrl-C stops after the\n"
          "current iteration and closes the log (a second Ctrl-C skips recording episodes).\n"
          "Exit status: 0 done, 1 run-time failure (divergence, I/O), 2 usage error,\n"
          "3 bad config, 130 interrupted.\n");
}

static int bad_value(const char* flag, const char* what, const char* got) {
  fprintf(stderr, "dsim run: %s: expected %s, got '%s'\nRun 'dsim run --help' for the options.\n", flag, what, got);
  return DS_EXIT_USAGE;
}

static int parse_int(const char* flag, const char* s, long lo, long hi, long* out) {
  char* end = NULL;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (!*s || *end || errno || v < lo || v > hi) {
    char what[96];
    snprintf(what, sizeof what, "an integer in %ld..%ld", lo, hi);
    return bad_value(flag, what, s);
  }
  *out = v;
  return 0;
}

static int parse_real(const char* flag, const char* s, double lo, int lo_open, double* out) {
  char* end = NULL;
  errno = 0;
  double v = strtod(s, &end);
  if (!*s || *end || errno || !isfinite(v) || v < lo || (lo_open && v == lo))
    return bad_value(flag, lo_open ? "a positive number" : "a number >= 0", s);
  *out = v;
  return 0;
}

static int is_file(const char* p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* dst = a + b; -1 when it does not fit */
static int join(char* dst, size_t n, const char* a, const char* b) {
  int k = snprintf(dst, n, "%s%s", a, b);
  return k < 0 || (size_t)k >= n ? -1 : 0;
}

/* find NAME.json along the search order; 0 when found */
static int find_config(const char* name, char* path, size_t len) {
  char dirs[6][4096];
  int n = 0;
  const char* src = getenv("DS_SRCDIR");
  if (src && *src && !join(dirs[n], sizeof dirs[0], src, "/configs")) n++;
  if (*DS_CONFIGS_SRCDIR && !join(dirs[n], sizeof dirs[0], DS_CONFIGS_SRCDIR, "")) n++;
  char exe[4096];
  ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (k > 0) {
    exe[k] = 0;
    char* slash = strrchr(exe, '/');
    if (slash) {
      *slash = 0;
      if (!join(dirs[n], sizeof dirs[0], exe, "/configs")) n++;
      if (!join(dirs[n], sizeof dirs[0], exe, "/../configs")) n++;
      if (!join(dirs[n], sizeof dirs[0], exe, "/../share/dsim/configs")) n++;
    }
  }
  if (*DS_CONFIGS_DATADIR && !join(dirs[n], sizeof dirs[0], DS_CONFIGS_DATADIR, "")) n++;
  char file[512];
  if (join(file, sizeof file, "/", name) || join(file + strlen(file), sizeof file - strlen(file), ".json", ""))
    return -1;
  for (int i = 0; i < n; i++)
    if (!join(path, len, dirs[i], file) && is_file(path)) return 0;
  return -1;
}

/* mkdir -p of the directory part of path */
static int make_parent_dirs(const char* path) {
  char buf[4096];
  snprintf(buf, sizeof buf, "%s", path);
  char* slash = strrchr(buf, '/');
  if (!slash || slash == buf) return 0;
  *slash = 0;
  for (char* p = buf + 1; *p; p++) {
    if (*p != '/') continue;
    *p = 0;
    if (mkdir(buf, 0777) != 0 && errno != EEXIST) return -1;
    *p = '/';
  }
  if (mkdir(buf, 0777) != 0 && errno != EEXIST) return -1;
  return 0;
}

typedef struct RunState {
  dsEnv* env;
  dsTrainer* tr;
  dsRunLog* log;
  dsRecorder* rec;
  uint64_t seed;
  int S, A, nlog;
  dsReal *best_act, *last_act;
  int best_it, last_it, have;
  double best_metric, first_metric, last_metric, first_loss, last_loss;
} RunState;

static int write_episode(RunState* r, const char* which, int iteration, const dsReal* actions) {
  if (!r->log) return 0;
  const dsEpisodeRecord* e = NULL;
  int rc = ds_recorder_record(r->rec, r->seed, actions, &e);
  if (rc) {
    fprintf(stderr, "dsim run: recording the %s episode: %s\n", which, ds_recorder_last_error(r->rec));
    return rc;
  }
  dsRunEpisode ep;
  memset(&ep, 0, sizeof ep);
  ep.iteration = iteration;
  ep.loss = e->loss;
  ep.metric = e->metric;
  ep.dt = e->dt;
  ep.control_interval = e->control_interval;
  ep.render_interval = e->render_interval;
  ep.nsubsteps = e->nsubsteps;
  ep.nparticles = e->nparticles;
  ep.positions = e->positions;
  ep.velocities = e->velocities;
  ep.nsteps = e->nsteps;
  ep.action_dim = e->action_dim;
  ep.actions = e->actions;
  ep.nframes = e->nframes;
  ep.height = e->height;
  ep.width = e->width;
  ep.frames = e->frames;
  ep.goal = e->goal;
  rc = ds_runlog_write_episode(r->log, which, &ep);
  if (rc) fprintf(stderr, "dsim run: %s\n", ds_runlog_last_error(r->log));
  return rc;
}

/* Lower is better: the metric itself (squared distance to the target), or
 * for the walkers (metric = centre-of-mass displacement, goal offset
 * goal_x_min) the distance |metric - offset|. */
static double score(const dsEnvDef* d, double metric) {
  if (d->kind == DS_ENV_WALKER || d->kind == DS_ENV_WALKER_SPRINGS) return fabs(metric - (double)d->goal_x_min);
  return metric;
}

static void fmt_time(double s, char* buf, size_t n) {
  if (!(s >= 0) || s > 1e7) {
    snprintf(buf, n, "?");
    return;
  }
  long t = (long)(s + 0.5);
  if (t >= 3600)
    snprintf(buf, n, "%ld:%02ld:%02ld", t / 3600, (t / 60) % 60, t % 60);
  else
    snprintf(buf, n, "%ld:%02ld", t / 60, t % 60);
}

int ds_cli_run(int argc, char** argv) {
  const char* target = NULL;
  const char* out = NULL;
  long iterations = -1, threads = 0, seed = -1, horizon = 0, execute = 0, inner = 1, population = 8, elite = 2;
  long decay_every = -1;
  double lr = 0, clip = -1, decay_factor = -1, momentum = -1;
  int method = DS_METHOD_IMAGE, mpc = 0, optimizer = -1;
  for (int i = 1; i < argc; i++) {
    const char* a = argv[i];
    if (ds_cli_is_help(a)) {
      usage(stdout);
      return DS_EXIT_OK;
    }
    if (a[0] != '-' || !a[1]) {
      if (target) {
        fprintf(stderr, "dsim run: unexpected argument '%s'\nRun 'dsim run --help' for the options.\n", a);
        return DS_EXIT_USAGE;
      }
      target = a;
      continue;
    }
    /* --flag VALUE or --flag=VALUE */
    char flag[64];
    const char* val = NULL;
    const char* eq = strchr(a, '=');
    if (eq && (size_t)(eq - a) < sizeof flag) {
      memcpy(flag, a, (size_t)(eq - a));
      flag[eq - a] = 0;
      val = eq + 1;
    } else {
      snprintf(flag, sizeof flag, "%s", a);
    }
    if (!strcmp(flag, "--mpc")) {
      if (val) return bad_value("--mpc", "no value", val);
      mpc = 1;
      continue;
    }
    static const char* const valued[] = {"--iterations", "--method",     "--lr",       "--seed",         "--threads",
                                         "--out",        "--horizon",    "--execute",  "--inner",        "--optimizer",
                                         "--clip",       "--decay-every", "--decay-factor", "--population", "--elite",
                                         "--momentum"};
    int known = 0;
    for (size_t q = 0; q < sizeof valued / sizeof valued[0]; q++) known |= !strcmp(flag, valued[q]);
    if (!known) {
      fprintf(stderr, "dsim run: unknown option '%s'\nRun 'dsim run --help' for the options.\n", flag);
      return DS_EXIT_USAGE;
    }
    if (!val) {
      if (i + 1 >= argc) {
        fprintf(stderr, "dsim run: option '%s' needs a value\nRun 'dsim run --help' for the options.\n", flag);
        return DS_EXIT_USAGE;
      }
      val = argv[++i];
    }
    int e = 0;
    if (!strcmp(flag, "--iterations"))
      e = parse_int(flag, val, 1, 100000000, &iterations);
    else if (!strcmp(flag, "--method")) {
      method = ds_method_parse(val);
      if (method < 0) e = bad_value(flag, "image, state, random or cem", val);
    } else if (!strcmp(flag, "--lr"))
      e = parse_real(flag, val, 0, 1, &lr);
    else if (!strcmp(flag, "--seed"))
      e = parse_int(flag, val, 0, 2147483647L, &seed);
    else if (!strcmp(flag, "--threads"))
      e = parse_int(flag, val, 1, 4096, &threads);
    else if (!strcmp(flag, "--out")) {
      if (!*val) e = bad_value(flag, "a file name", val);
      out = val;
    } else if (!strcmp(flag, "--horizon"))
      e = parse_int(flag, val, 1, 100000000, &horizon);
    else if (!strcmp(flag, "--execute"))
      e = parse_int(flag, val, 1, 100000000, &execute);
    else if (!strcmp(flag, "--inner"))
      e = parse_int(flag, val, 1, 1000000, &inner);
    else if (!strcmp(flag, "--optimizer")) {
      optimizer = !strcmp(val, "adam") ? DS_OPTIM_ADAM : !strcmp(val, "sgd") ? DS_OPTIM_SGD : -1;
      if (optimizer < 0) e = bad_value(flag, "adam or sgd", val);
    } else if (!strcmp(flag, "--clip"))
      e = parse_real(flag, val, 0, 0, &clip);
    else if (!strcmp(flag, "--momentum")) {
      e = parse_real(flag, val, 0, 0, &momentum);
      if (!e && !(momentum < 1)) e = bad_value(flag, "a number in [0, 1)", val);
    }
    else if (!strcmp(flag, "--decay-every"))
      e = parse_int(flag, val, 0, 100000000, &decay_every);
    else if (!strcmp(flag, "--decay-factor"))
      e = parse_real(flag, val, 0, 1, &decay_factor);
    else if (!strcmp(flag, "--population"))
      e = parse_int(flag, val, 2, 1000000, &population);
    else if (!strcmp(flag, "--elite"))
      e = parse_int(flag, val, 1, 1000000, &elite);
    if (e) return e;
  }
  if (mpc && method != DS_METHOD_IMAGE && method != DS_METHOD_STATE) {
    fprintf(stderr, "dsim run: --mpc needs --method image or state, not %s\n", ds_method_name(method));
    return DS_EXIT_USAGE;
  }
  if (method == DS_METHOD_CEM && elite > population) {
    fprintf(stderr, "dsim run: --elite %ld exceeds --population %ld\n", elite, population);
    return DS_EXIT_USAGE;
  }

  /* config */
  char path[4096];
  const char* name = target ? target : "control-fem";
  if (is_file(name)) {
    snprintf(path, sizeof path, "%s", name);
  } else if (strchr(name, '/') || strstr(name, ".json")) {
    fprintf(stderr, "dsim run: %s: cannot open: No such file\n", name);
    return DS_EXIT_INPUT;
  } else if (find_config(name, path, sizeof path) != 0) {
    fprintf(stderr,
            "dsim run: '%s' is neither a config file nor a bundled environment config "
            "(walker, control-fem, control-cloth, walker-springs)\n",
            name);
    return DS_EXIT_INPUT;
  }
#ifdef _OPENMP
  if (threads > 0) omp_set_num_threads((int)threads);
  const int nthreads = omp_get_max_threads();
#else
  const int nthreads = 1;
#endif
  char err[1024];
  dsEnv* env = NULL;
  int rc = ds_env_create_from_config(path, &env, err, sizeof err);
  if (rc) {
    fprintf(stderr, "dsim run: %s\n", err);
    return rc == DS_ERR_NOMEM ? DS_EXIT_FAILURE : DS_EXIT_INPUT;
  }
  const dsEnvDef* ed = ds_env_def(env);
  const char* envname = ds_env_kind_name(ed->kind);
  dsTrainerDef td = ds_default_trainer_def(env);
  if (seed >= 0) td.seed = td.env_seed = td.net.seed = (uint64_t)seed;
  td.method = method;
  td.mpc = mpc;
  td.mpc_horizon = (int)horizon;
  td.mpc_execute = (int)execute;
  td.mpc_inner = (int)inner;
  if (optimizer >= 0) {
    const dsOptimDef keep = td.optim;
    td.optim = ds_default_optim_def(optimizer);
    td.optim.lr = keep.lr;
    td.optim.decay_every = keep.decay_every;
    td.optim.decay_factor = keep.decay_factor;
    td.optim.clip_norm = keep.clip_norm;
  }
  if (lr > 0) td.optim.lr = lr;
  if (clip >= 0) td.optim.clip_norm = clip; /* else the config's */
  if (momentum >= 0) td.optim.momentum = momentum;
  if (decay_every >= 0) td.optim.decay_every = (int)decay_every; /* else the config's */
  if (decay_factor >= 0) td.optim.decay_factor = decay_factor;
  td.cem_population = (int)population;
  td.cem_elite = (int)elite;
  if (iterations < 0) iterations = ed->ctrl_iterations > 0 ? ed->ctrl_iterations : 40;
  RunState r;
  memset(&r, 0, sizeof r);
  r.env = env;
  r.seed = td.env_seed;
  rc = ds_trainer_create(env, &td, &r.tr, err, sizeof err);
  if (rc) {
    fprintf(stderr, "dsim run: %s: %s\n", path, err);
    ds_env_destroy(env);
    return rc == DS_ERR_NOMEM ? DS_EXIT_FAILURE : DS_EXIT_INPUT;
  }
  r.S = ds_env_num_steps(env);
  r.A = ds_env_action_size(env);
  const size_t SA = (size_t)r.S * (size_t)r.A;
  r.best_act = (dsReal*)calloc(SA, sizeof(dsReal));
  r.last_act = (dsReal*)calloc(SA, sizeof(dsReal));
  int exitc = DS_EXIT_OK;
  if (!r.best_act || !r.last_act) {
    fprintf(stderr, "dsim run: out of memory\n");
    exitc = DS_EXIT_FAILURE;
    goto done;
  }

  /* run log */
  char outbuf[4096];
  char mname[32];
  snprintf(mname, sizeof mname, "%s%s", ds_method_name(method), mpc ? "-mpc" : "");
  if (!out) {
    snprintf(outbuf, sizeof outbuf, "runs/%s-%s-s%llu.h5", envname, mname, (unsigned long long)td.seed);
    out = outbuf;
  }
  const int np = ds_trainer_num_params(r.tr);
  r.nlog = np < RUN_MAX_LOGGED_PARAMS ? np : RUN_MAX_LOGGED_PARAMS;
  dsRunLogDef ld = ds_default_runlog_def();
  ld.config_text = ds_env_config_text(env);
  ld.env = envname;
  ld.method = mname;
  ld.seed = td.seed;
  ld.threads = nthreads;
  ld.nparams = r.nlog;
  ld.substep_stride = ed->render_interval;
  if (make_parent_dirs(out) != 0) {
    fprintf(stderr, "dsim run: %s: cannot create its directory: %s\n", out, strerror(errno));
    exitc = DS_EXIT_FAILURE;
    goto done;
  }
  rc = ds_runlog_create(out, &ld, &r.log, err, sizeof err);
  if (rc == DS_ERR_UNSUPPORTED) {
    fprintf(stderr, "dsim run: warning: no run log (dsim was built --without-hdf5)\n");
    r.log = NULL;
  } else if (rc) {
    fprintf(stderr, "dsim run: %s\n", err);
    exitc = DS_EXIT_FAILURE;
    goto done;
  }
  if (r.log) {
    rc = ds_recorder_create(env, ed->render_interval, &r.rec, err, sizeof err);
    if (rc) {
      fprintf(stderr, "dsim run: %s\n", err);
      exitc = DS_EXIT_FAILURE;
      goto done;
    }
  }

  const int tty = isatty(STDOUT_FILENO);
  printf("dsim run: %s (%s), method %s, seed %llu, %d thread%s, %ld iterations, %d parameters, lr %g\n", envname,
         path, mname, (unsigned long long)td.seed, nthreads, nthreads == 1 ? "" : "s", iterations, np,
         method <= DS_METHOD_STATE ? td.optim.lr : 0.0);
  printf("run log: %s%s\n", r.log ? out : "(none)", r.log ? "" : " (built --without-hdf5)");
  fflush(stdout);

  struct sigaction sa, old;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old);
  g_interrupts = 0;

  const double t0 = now_s();
  double t_iter = 0;
  char status[600] = "completed";
  int done_its = 0;
  r.best_metric = INFINITY;
  for (long i = 0; i < iterations; i++) {
    const double ti = now_s();
    dsTrainerIter it;
    rc = ds_trainer_iterate(r.tr, &it);
    t_iter += now_s() - ti;
    if (rc) {
      if (tty) printf("\n");
      fprintf(stderr, "dsim run: iteration %ld failed: %s\n", i, ds_trainer_last_error(r.tr));
      snprintf(status, sizeof status, "failed: iteration %ld: %s", i, ds_trainer_last_error(r.tr));
      exitc = DS_EXIT_FAILURE;
      break;
    }
    done_its++;
    memcpy(r.last_act, it.actions, SA * sizeof(dsReal));
    r.last_it = (int)i;
    r.last_metric = it.metric;
    r.last_loss = it.loss;
    if (i == 0) {
      r.first_metric = it.metric;
      r.first_loss = it.loss;
    }
    if (!r.have || score(ed, it.metric) < score(ed, r.best_metric)) {
      r.best_metric = it.metric;
      r.best_it = (int)i;
      memcpy(r.best_act, it.actions, SA * sizeof(dsReal));
    }
    r.have = 1;
    if (r.log) {
      dsRunIteration ri;
      ri.loss = it.loss;
      ri.metric = it.metric;
      ri.wall_time = now_s() - t0;
      ri.grad_norm = it.grad_norm;
      ri.params = it.params;
      if (ds_runlog_append_iteration(r.log, &ri)) {
        fprintf(stderr, "dsim run: %s\n", ds_runlog_last_error(r.log));
        snprintf(status, sizeof status, "failed: %s", ds_runlog_last_error(r.log));
        exitc = DS_EXIT_FAILURE;
        break;
      }
      if (i == 0 && write_episode(&r, "first", 0, it.actions)) {
        snprintf(status, sizeof status, "failed: cannot record the first episode");
        exitc = DS_EXIT_FAILURE;
        break;
      }
    }
    const double per = t_iter / (double)(i + 1);
    if (tty) {
      char eta[32];
      fmt_time(per * (double)(iterations - i - 1), eta, sizeof eta);
      const int width = 24, fill = (int)((double)width * (double)(i + 1) / (double)iterations);
      char bar[32];
      for (int q = 0; q < width; q++) bar[q] = q < fill ? '#' : '.';
      bar[width] = 0;
      printf("\r%5ld/%ld [%s] loss %.4g  metric %.4g  %.2f s/it  ETA %s   ", i + 1, iterations, bar, it.loss,
             it.metric, per, eta);
    } else {
      printf("iteration %ld/%ld loss %.6g metric %.6g grad_norm %.4g lr %.4g time %.2f s", i + 1, iterations,
             it.loss, it.metric, it.grad_norm, it.lr, now_s() - t0);
      if (it.backtracks) printf(" (step halved %d time%s: the longer step diverged)", it.backtracks,
                                it.backtracks == 1 ? "" : "s");
      printf("\n");
    }
    fflush(stdout);
    if (g_interrupts) {
      snprintf(status, sizeof status, "interrupted");
      exitc = DS_EXIT_INTERRUPTED;
      break;
    }
  }
  if (tty) printf("\n");
  if (exitc == DS_EXIT_INTERRUPTED) printf("interrupted after %d iteration%s\n", done_its, done_its == 1 ? "" : "s");
  fflush(stdout);
  /* best and last episodes (skipped on a second Ctrl-C) */
  if (r.log && r.have && g_interrupts < 2) {
    int e1 = write_episode(&r, "best", r.best_it, r.best_act);
    int e2 = 0;
    if (g_interrupts < 2) e2 = write_episode(&r, "last", r.last_it, r.last_act);
    if ((e1 || e2) && exitc == DS_EXIT_OK) {
      snprintf(status, sizeof status, "failed: cannot record the best/last episodes");
      exitc = DS_EXIT_FAILURE;
    }
  }
  const double wall = now_s() - t0;
  sigaction(SIGINT, &old, NULL);
  if (r.log) {
    if (ds_runlog_close(r.log, status) && exitc == DS_EXIT_OK) {
      fprintf(stderr, "dsim run: %s: cannot close the run log\n", out);
      exitc = DS_EXIT_FAILURE;
    }
    r.log = NULL;
  }
  if (r.have) {
    printf("summary: %s %s seed %llu: %d iteration%s, status %s\n", envname, mname, (unsigned long long)td.seed,
           done_its, done_its == 1 ? "" : "s", status);
    printf("  metric: initial %.6g -> final %.6g (best %.6g at iteration %d)\n", r.first_metric, r.last_metric,
           r.best_metric, r.best_it);
    printf("  loss:   initial %.6g -> final %.6g\n", r.first_loss, r.last_loss);
    printf("  wall time: %.2f s (%.3f s per iteration)\n", wall, t_iter / (double)done_its);
  }
  fflush(stdout);

done:
  if (r.log) ds_runlog_close(r.log, "failed: setup");
  ds_recorder_destroy(r.rec);
  ds_trainer_destroy(r.tr);
  ds_env_destroy(env);
  free(r.best_act);
  free(r.last_act);
  return exitc;
}

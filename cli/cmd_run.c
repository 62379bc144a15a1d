/* `dsim run [CONFIG|ENV-NAME] [options]`: optimise a controller against the
 * env's goal (dsim/controller.h) and log the run (dsim/runlog.h). The run
 * itself (iterations, log, best episode, stop requests) is the run object's
 * (dsim/run.h); this file parses flags, finds the config, checks the output
 * path, turns signals into stop requests and prints.
 *
 * A run config has three sections, each read by its owner: "env"
 * (ds_env_def_from_text), "controller" (ds_trainer_def_from_text) and "run"
 * (ds_run_def_from_text). Every flag is a key of one of them and is checked
 * by the same key table as the file (`--lr X` is controller.lr; `--set
 * SECTION.KEY=VALUE` reaches any key), so a flag accepts exactly what a
 * config accepts.
 *
 * Config search (ENV-NAME or no argument = "control-fem"): an argument that
 * names an existing file is that file; otherwise the bundled NAME.json
 * (ds_run_find_config, dsim/run.h, has the order of folders; `dsim config
 * --paths` prints them); otherwise, for a registered class without one (a
 * plugin's), the class's defaults: the config {"env": {"name": NAME}}.
 *
 * SIGINT, SIGTERM, SIGHUP: the current iteration finishes, the best and
 * last episodes are recorded (a second signal skips that), the log is closed
 * with status "interrupted" and the exit status is 128 + the signal (130,
 * 143, 129).
 *
 * Output: never replaces an existing file unless --force; never the run's
 * inputs (config, plugins), even with --force. Without --out the default
 * name gets a numbered suffix (-1, -2, ...) when taken.
 *
 * The best iteration is the lowest loss (dsim/run.h), numbered from 0 in
 * progress lines, the summary and the log alike. */
#define _POSIX_C_SOURCE 200809L /* sigaction */
#include "config.h"

#include <dirent.h>
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

#include "cli/cli.h"
#include "dsim/dsim.h"

#define RUN_MAX_OVERRIDES 128
/* columns of the usage text */
#define USAGE_WIDTH 86

static volatile sig_atomic_t g_interrupts = 0;
static volatile sig_atomic_t g_signal = 0; /* the first stopping signal */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void usage(FILE* out) {
  fprintf(out,
          "usage: dsim run [CONFIG|ENV-NAME] [--iterations N] [--method image|state|random|cem] [--mpc]\n"
          "                [--lr X] [--seed S] [--threads T] [--out RUN.h5] [--set KEY=VALUE]\n"
          "                [--plugin FILE.so] [options]\n"
          "\n"
          "Optimise the controller of an environment against its goal and log the run.\n"
          "CONFIG is a JSON run config (sections env, controller, run); ENV-NAME (one of the\n"
          "registered classes:");
  /* the registry's classes (bundled, and those of a --plugin given before --help),
   * wrapped at USAGE_WIDTH columns */
  int col = 19;
  for (int i = 0; i < ds_env_class_count(); i++) {
    const char* name = ds_env_class_at(i)->name;
    const int w = (int)strlen(name) + 2;
    if (col + w > USAGE_WIDTH) {
      fprintf(out, "\n");
      col = 0;
    }
    fprintf(out, "%s%s%s", col ? " " : "", name, i + 1 < ds_env_class_count() ? "," : ")");
    col += w;
  }
  fprintf(out,
          "\nruns that env's bundled config (NAME.json), or the class's defaults where it has\n"
          "none (a --plugin class); without either, the bundled control-fem config. Bundled\n"
          "configs are read from $DSIM_CONFIG_DIR, then next to the library (a build tree's\n"
          "configs/, an install's share/dsim/configs); `dsim config --paths` prints the folders.\n"
          "\n"
          "Each flag sets one config key and is checked like it (default: the config's value):\n"
          "  --iterations N  run.iterations: optimisation iterations, one rollout each\n"
          "  --method M      run.method: image (the env's loss: an image loss in the bundled\n"
          "                  configs), state (3-D centre-of-mass loss), random, cem\n"
          "  --seed S        run.seed: goal and controller seed\n"
          "  --threads T     run.threads: OpenMP threads (0: OMP_NUM_THREADS or all cores)\n"
          "  --device D      run.device: cpu (default), cuda or cuda:N: the env's physics on that\n"
          "                  GPU (batched engine, rendering and single-scale image losses; see dsim info)\n"
          "  --out FILE      run.out: run log (default runs/ENV-METHOD[-mpc]-sSEED.h5, or -1, -2, ...\n"
          "                  appended when taken; directories are created)\n"
          "  --force         replace an existing --out file (never the config or a plugin)\n"
          "  --max-memory S  refuse an episode that needs more than S (e.g. 8G; default 3/4 of\n"
          "                  physical memory, or DSIM_MAX_MEMORY)\n"
          "  --mpc           controller.mpc: receding-horizon MPC (image or state): an iteration\n"
          "                  is one pass; --horizon H, --execute E, --inner K: controller.horizon,\n"
          "                  .execute, .inner (window, steps executed per window, optimiser steps)\n"
          "  --lr X          controller.lr: learning rate\n"
          "  --optimizer O   controller.optimizer: adam or sgd\n"
          "  --clip X        controller.clip: gradient-norm clipping threshold (0: off)\n"
          "  --momentum M    controller.momentum: SGD heavy-ball momentum in [0, 1)\n"
          "  --decay-every N, --decay-factor F   controller.decay_every, .decay_factor: step decay\n"
          "  --population K, --elite E           controller.population, .elite: CEM\n"
          "  --set KEY=VALUE any key, e.g. --set env.physics.substeps=600,\n"
          "                  --set controller.phases=4, --set run.seed=2\n");
  ds__cli_plugin_usage(out, 17);
  fprintf(out,
          "\n"
          "Output: a progress bar on a terminal, else one line per iteration; then a summary\n"
          "(loss and metric, the result: the lowest-loss iteration, numbered from 0 as everywhere,\n"
          "wall time). Ctrl-C (or SIGTERM, SIGHUP)\n"
          "stops after the current iteration and closes the log with status \"interrupted\"\n"
          "(a second one skips recording episodes).\n"
          "Exit status: 0 done, 1 run-time failure (divergence, I/O, memory), 2 usage error\n"
          "(including an --out that exists), 3 bad config, 128 + signal when stopped (130 Ctrl-C,\n"
          "143 SIGTERM).\n");
}

/* ---- parse ------------------------------------------------------------------- */
typedef struct Flag {
  const char* flag;
  const char* section; /* "run", "controller" */
  const char* key;
  const char* fixed;   /* value of a flag without one (--mpc) */
} Flag;

static const Flag g_flags[] = {
    {"--iterations", "run", "iterations", NULL},     {"--method", "run", "method", NULL},
    {"--seed", "run", "seed", NULL},                 {"--threads", "run", "threads", NULL},
    {"--out", "run", "out", NULL},                   {"--mpc", "controller", "mpc", "true"},
    {"--device", "run", "device", NULL},
    {"--horizon", "controller", "horizon", NULL},    {"--execute", "controller", "execute", NULL},
    {"--inner", "controller", "inner", NULL},        {"--lr", "controller", "lr", NULL},
    {"--optimizer", "controller", "optimizer", NULL}, {"--clip", "controller", "clip", NULL},
    {"--momentum", "controller", "momentum", NULL},  {"--decay-every", "controller", "decay_every", NULL},
    {"--decay-factor", "controller", "decay_factor", NULL}, {"--population", "controller", "population", NULL},
    {"--elite", "controller", "elite", NULL},
};
#define NFLAGS (sizeof g_flags / sizeof g_flags[0])

/* One key set on the command line. */
typedef struct Override {
  char source[80];   /* "--lr" or "--set" */
  char section[16];  /* "env", "controller", "run" */
  char key[128];
  const char* value;
} Override;

typedef struct RunArgs {
  const char* target;  /* config file or env name (NULL: control-fem) */
  Override ov[RUN_MAX_OVERRIDES];
  int nov;
  int run_flags;       /* controller/run keys were given (their errors are usage errors) */
  int force;           /* --force: replace an existing --out */
} RunArgs;

static int usage_error(const char* fmt, const char* a, const char* b) {
  fprintf(stderr, "dsim run: ");
  fprintf(stderr, fmt, a, b);
  fprintf(stderr, "\nRun 'dsim run --help' for the options.\n");
  return DS_EXIT_USAGE;
}

/* Apply one override to the controller/run definitions; 0 or the code. */
static int apply_run_override(const Override* o, dsTrainerDef* td, dsRunDef* rd, char* err, size_t errlen) {
  if (!strcmp(o->section, "controller"))
    return ds_config_set(o->source, "controller", ds_trainer_keys(), td, sizeof *td, o->key, o->value, err, errlen);
  return ds_config_set(o->source, "run", ds_run_keys(), rd, sizeof *rd, o->key, o->value, err, errlen);
}

static int add_override(RunArgs* a, const char* source, const char* section, const char* key, const char* value) {
  if (a->nov >= RUN_MAX_OVERRIDES) return usage_error("too many options (%s%s)", source, "");
  Override* o = &a->ov[a->nov++];
  snprintf(o->source, sizeof o->source, "%s", source);
  snprintf(o->section, sizeof o->section, "%s", section);
  snprintf(o->key, sizeof o->key, "%s", key);
  o->value = value;
  if (strcmp(section, "env")) {
    a->run_flags = 1;
    /* checked at once against the defaults: a bad value is a usage error
     * whatever the config says */
    dsTrainerDef td = ds_default_trainer_def();
    dsRunDef rd = ds_default_run_def();
    char err[1024];
    if (apply_run_override(o, &td, &rd, err, sizeof err)) return usage_error("%s%s", err, "");
  }
  return 0;
}

/* --set SECTION.KEY=VALUE */
static int parse_set(RunArgs* a, const char* kv) {
  const char* eq = strchr(kv, '=');
  const char* dot = strchr(kv, '.');
  if (!eq || !dot || dot > eq || eq == dot + 1)
    return usage_error("--set: expected SECTION.KEY=VALUE (sections env, controller, run), got '%s'%s", kv, "");
  char section[16];
  snprintf(section, sizeof section, "%.*s", (int)(dot - kv), kv);
  if (strcmp(section, "env") && strcmp(section, "controller") && strcmp(section, "run"))
    return usage_error("--set: unknown section '%s' (expected env, controller or run)%s", section, "");
  char key[128];
  snprintf(key, sizeof key, "%.*s", (int)(eq - dot - 1), dot + 1);
  return add_override(a, "--set", section, key, eq + 1);
}

/* Command line -> RunArgs; DS_EXIT_OK to go on, -1 after --help, else an exit code. */
static int parse_args(int argc, char** argv, RunArgs* a) {
  memset(a, 0, sizeof *a);
  for (int i = 1; i < argc; i++) {
    const char* arg = argv[i];
    if (ds__cli_is_help(arg)) {
      usage(stdout);
      return -1;
    }
    if (arg[0] != '-' || !arg[1]) {
      if (a->target) return usage_error("unexpected argument '%s'%s", arg, "");
      a->target = arg;
      continue;
    }
    /* --flag VALUE or --flag=VALUE */
    char flag[64];
    const char* val = NULL;
    const char* eq = strchr(arg, '=');
    if (eq && (size_t)(eq - arg) < sizeof flag) {
      memcpy(flag, arg, (size_t)(eq - arg));
      flag[eq - arg] = 0;
      val = eq + 1;
    } else {
      snprintf(flag, sizeof flag, "%s", arg);
    }
    const Flag* f = NULL;
    for (size_t q = 0; q < NFLAGS; q++)
      if (!strcmp(flag, g_flags[q].flag)) f = &g_flags[q];
    int prc = 0;
    if (ds__cli_plugin_option("run", argc, argv, &i, &prc)) {
      if (prc) return prc;
      continue;
    }
    if (!strcmp(flag, "--force")) {
      if (val) return usage_error("%s: takes no value, got '%s'", flag, val);
      a->force = 1;
      continue;
    }
    if (!strcmp(flag, "--max-memory")) {
      if (!val && i + 1 >= argc) return usage_error("option '%s' needs a value%s", flag, "");
      if (!val) val = argv[++i];
      size_t bytes = 0;
      if (ds_parse_size(val, &bytes)) return usage_error("--max-memory '%s': expected a size such as 8G, 512M or 1e9%s", val, "");
      ds_set_memory_limit(bytes);
      continue;
    }
    if (!f && strcmp(flag, "--set")) return usage_error("unknown option '%s'%s", flag, "");
    if (f && f->fixed) {
      if (val) return usage_error("%s: takes no value, got '%s'", flag, val);
      val = f->fixed;
    } else if (!val) {
      if (i + 1 >= argc) return usage_error("option '%s' needs a value%s", flag, "");
      val = argv[++i];
    }
    int rc = f ? add_override(a, flag, f->section, f->key, val) : parse_set(a, val);
    if (rc) return rc;
  }
  return DS_EXIT_OK;
}

/* ---- set-up -------------------------------------------------------------------- */
static int is_file(const char* p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISREG(st.st_mode);
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

typedef struct Run {
  char path[4096];      /* the config file */
  char out[4096];       /* the run log's path */
  dsRun* run;
  double wall;
} Run;

/* Locate the config of target (a file or an env name). */
int ds__cli_locate_config(const char* cmd, const char* target, char* path, size_t len) {
  const char* name = target ? target : "control-fem";
  if (is_file(name)) {
    snprintf(path, len, "%s", name);
    return 0;
  }
  struct stat st;
  if (stat(name, &st) == 0) {
    fprintf(stderr, "dsim %s: %s: %s, expected a JSON config file\n", cmd, name,
            S_ISDIR(st.st_mode) ? "is a directory" : "is not a regular file");
    return DS_EXIT_INPUT;
  }
  if (strchr(name, '/') || strstr(name, ".json")) {
    fprintf(stderr, "dsim %s: %s: cannot open: %s\n", cmd, name, strerror(ENOENT));
    return DS_EXIT_INPUT;
  }
  if (ds_run_find_config(name, path, len, NULL, 0) == 0) return 0;
  /* only names that are there: the configs found (each folder of the search
   * order, first one of a name wins) */
  char names[1024] = "";
  char dir[4096];
  struct dirent** list = NULL;
  for (int i = 0; ds_run_config_dir(i, dir, sizeof dir) != DS_ERR_NOTFOUND; i++) {
    const int m = dir[0] ? scandir(dir, &list, NULL, alphasort) : -1;
    for (int q = 0; q < m; q++) {
      const struct dirent* e = list[q];
      const size_t n = strlen(e->d_name);
      char one[260], file[4096];
      if (n < 6 || strcmp(e->d_name + n - 5, ".json") || n - 5 >= sizeof one) continue;
      snprintf(one, sizeof one, "%.*s", (int)(n - 5), e->d_name);
      if (ds_run_find_config(one, file, sizeof file, NULL, 0) || strncmp(file, dir, strlen(dir)) ||
          file[strlen(dir)] != '/')
        continue; /* an earlier folder has it: listed there */
      size_t k = strlen(names);
      snprintf(names + k, sizeof names - k, "%s%s", k ? ", " : "", one);
    }
    for (int q = 0; q < m; q++) free(list[q]);
    free(list);
    list = NULL;
  }
  fprintf(stderr, "dsim %s: '%s' is neither a config file nor a bundled config (%s)\n", cmd, name,
          names[0] ? names : "none found: `dsim config --paths` lists the folders searched");
  return DS_EXIT_INPUT;
}

/* The run log's path: --out (refused when it is one of the run's inputs, a
 * directory, or exists without --force), else the default name with the
 * first free numbered suffix. */
static int choose_output(const RunArgs* a, Run* r) {
  struct stat st;
  const dsRunDef* rd = ds_run_run_def(r->run);
  if (rd->out[0]) {
    snprintf(r->out, sizeof r->out, "%s", rd->out);
    const char* what = ds__cli_same_file(r->out, r->path) ? "the run's config file" : NULL;
    for (int i = 0; i < ds__cli_plugin_count() && !what; i++)
      if (ds__cli_same_file(r->out, ds__cli_plugin_path(i))) what = "a plugin the run loads";
    if (what) {
      fprintf(stderr, "dsim run: --out %s is %s: refusing to replace an input with the run log\n", r->out, what);
      return DS_EXIT_USAGE;
    }
    if (stat(r->out, &st) == 0 && S_ISDIR(st.st_mode)) {
      fprintf(stderr, "dsim run: --out %s is a directory; give a file name (e.g. %s/run.h5)\n", r->out, r->out);
      return DS_EXIT_USAGE;
    }
    if (!a->force && stat(r->out, &st) == 0) {
      fprintf(stderr, "dsim run: --out %s exists (an earlier run's log?): give --force to replace it, or another --out\n",
              r->out);
      return DS_EXIT_USAGE;
    }
    return DS_EXIT_OK;
  }
  if (ds_run_default_log_path(r->run, r->out, sizeof r->out)) {
    fprintf(stderr, "dsim run: %s (give --out)\n", ds_run_last_error(r->run));
    return DS_EXIT_USAGE;
  }
  return DS_EXIT_OK;
}

/* 1 when target is a registered class with neither a file nor a bundled
 * config of that name (a plugin's class): the run takes its defaults. */
static int class_defaults(const char* target) {
  char path[4096];
  struct stat st;
  return target && ds_env_class_find(target) && strlen(target) < 200 && !strpbrk(target, "/\"\\") &&
         stat(target, &st) != 0 && ds_run_find_config(target, path, sizeof path, NULL, 0) != 0;
}

/* Config -> env, controller and run definitions with the command line's
 * keys applied (the command line's rules for their errors), checked. */
static int resolve(const RunArgs* a, Run* r, dsEnvDef* ed, dsTrainerDef* td, dsRunDef* rd) {
  char err[1024];
  char* text = NULL;
  int rc;
  if (class_defaults(a->target)) { /* {"env": {"name": NAME}}: the class's defaults */
    snprintf(r->path, sizeof r->path, "class defaults"); /* the header reads "dsim run: NAME (class defaults)" */
    char cfg[256];
    snprintf(cfg, sizeof cfg, "{\"env\": {\"name\": \"%s\"}}", a->target);
    rc = ds_run_defs_from_text(r->path, cfg, ed, td, rd, err, sizeof err);
  } else {
    if ((rc = ds__cli_locate_config("run", a->target, r->path, sizeof r->path))) return rc;
    if ((rc = ds_config_read_file(r->path, &text, err, sizeof err)) == 0)
      rc = ds_run_defs_from_text(r->path, text, ed, td, rd, err, sizeof err);
    ds_config_free_text(text);
  }
  if (rc) {
    fprintf(stderr, "dsim run: %s\n", err);
    return ds__cli_exit_code(rc, DS_CLI_INPUT);
  }
  for (int i = 0; i < a->nov; i++) {
    const Override* o = &a->ov[i];
    char key[160];
    snprintf(key, sizeof key, "%s.%s", o->section, o->key);
    if (ds_run_defs_set(ed, td, rd, o->source, key, o->value, err, sizeof err)) {
      fprintf(stderr, "dsim run: %s: %s\n", o->source, err);
      return DS_EXIT_USAGE;
    }
  }
  ds_run_apply_def(rd, td);
  if (ds_trainer_def_validate(td, err, sizeof err)) {
    fprintf(stderr, "dsim run: %s: %s\n", a->run_flags ? "options" : r->path, err);
    return a->run_flags ? DS_EXIT_USAGE : DS_EXIT_INPUT;
  }
  const char* what = "run.device";
  for (int i = 0; i < a->nov; i++)
    if (!strcmp(a->ov[i].section, "run") && !strcmp(a->ov[i].key, "device"))
      what = strncmp(a->ov[i].source, "--device", 8) ? "run.device" : "--device";
  return ds__cli_check_device("run", what, rd->device, &ed->device);
}

/* The run (dsim/run.h) and its log. */
static int setup(const RunArgs* a, Run* r) {
  dsEnvDef ed;
  dsTrainerDef td;
  dsRunDef rd;
  int rc = resolve(a, r, &ed, &td, &rd);
  if (rc) return rc;
  char err[1024];
  dsRunOptions opt = ds_default_run_options();
  opt.log = 0; /* opened below, after the command line's checks of its path */
  opt.name = r->path;
  if ((rc = ds_run_create(&ed, &td, &rd, &opt, &r->run, err, sizeof err))) {
    fprintf(stderr, "dsim run: %s\n", err);
    return ds__cli_exit_code(rc, DS_CLI_INPUT);
  }
  if (ed.integrator == DS_INTEGRATOR_IMPLICIT && ed.ground && ed.contact_kd > 0 && ed.contact_smooth == 0)
    fprintf(stderr,
            "dsim run: warning: env.physics.integrator implicit with contact.kd %g > 0 and contact.smooth 0: the "
            "ground's damping force jumps at the contact skin and Newton can stall where a particle crosses it; "
            "contact.smooth > 0 (e.g. the skin, %g m) avoids that (docs/integrators.md)\n",
            (double)ed.contact_kd, (double)ed.contact_skin);
  if ((rc = choose_output(a, r))) return rc;
  rc = ds_run_open_log(r->run, r->out, a->force && rd.out[0]);
  if (rc == DS_ERR_UNSUPPORTED) {
    fprintf(stderr, "dsim run: warning: no run log (dsim was built --without-hdf5)\n");
  } else if (rc) {
    fprintf(stderr, "dsim run: %s\n", ds_run_last_error(r->run));
    return ds__cli_exit_code(rc, DS_CLI_JOB);
  }
  return DS_EXIT_OK;
}

/* ---- loop ------------------------------------------------------------------------ */
static dsRun* volatile g_run = NULL; /* the run the stop signals reach */

static void on_stop_signal(int sig) {
  if (!g_interrupts) g_signal = sig;
  g_interrupts++;
  if (g_run) ds_run_request_stop(g_run);
}

static void progress(const Run* r, const dsTrainerIter* it, double t0) {
  dsRunResult res;
  ds_run_result(r->run, &res);
  const long n = res.planned, i = res.iterations - 1;
  const double per = res.iteration_time / (double)(i + 1);
  if (isatty(STDOUT_FILENO)) {
    char eta[32], bar[32];
    fmt_time(per * (double)(n - i - 1), eta, sizeof eta);
    const int width = 24, fill = (int)((double)width * (double)(i + 1) / (double)n);
    for (int q = 0; q < width; q++) bar[q] = q < fill ? '#' : '.';
    bar[width] = 0;
    printf("\r%5ld/%ld [%s] iteration %ld loss %.4g  metric %.4g  %.2f s/it  ETA %s   ", i + 1, n, bar, i, it->loss,
           it->metric, per, eta);
  } else {
    /* iterations are numbered from 0 as in the summary, the log and dsim info; (k of n) counts them */
    printf("iteration %ld (%ld of %ld) loss %.6g metric %.6g grad_norm %.4g lr %.4g time %.2f s", i, i + 1, n,
           it->loss, it->metric, it->grad_norm, it->lr, now_s() - t0);
    if (it->backtracks)
      printf(" (step halved %d time%s: the longer step diverged)", it->backtracks, it->backtracks == 1 ? "" : "s");
    if (it->rejected) printf(" (rejected: loss above the lowest; next step from the best, lr scaled)");
    printf("\n");
  }
  fflush(stdout);
}

/* The iterations, the best and last episodes, the log closed; the exit code. */
static int loop(Run* r) {
  const double t0 = now_s();
  int failed = 0;
  while (!ds_run_done(r->run)) {
    dsTrainerIter it;
    if (ds_run_step(r->run, &it)) {
      if (isatty(STDOUT_FILENO)) printf("\n");
      fprintf(stderr, "dsim run: %s\n", ds_run_last_error(r->run));
      failed = 1;
      break;
    }
    progress(r, &it, t0);
  }
  if (isatty(STDOUT_FILENO)) printf("\n");
  fflush(stdout);
  const int rc = ds_run_finish(r->run);
  dsRunResult res;
  ds_run_result(r->run, &res);
  if (res.interrupted)
    printf("interrupted (%s) after %d iteration%s\n", g_signal == SIGTERM ? "SIGTERM" : g_signal == SIGHUP ? "SIGHUP" : "SIGINT",
           res.iterations, res.iterations == 1 ? "" : "s");
  if (rc) fprintf(stderr, "dsim run: %s\n", ds_run_last_error(r->run));
  if (failed) return DS_EXIT_FAILURE;
  if (res.interrupted) return 128 + (g_signal ? (int)g_signal : SIGINT);
  return rc ? ds__cli_exit_code(rc, DS_CLI_JOB) : DS_EXIT_OK;
}

static void summary(const Run* r) {
  dsRunResult s;
  ds_run_result(r->run, &s);
  if (!s.iterations) return;
  const char* env = ds_env_name(ds_run_env(r->run));
  printf("summary: %s %s seed %llu: %d iteration%s, status %s\n", env, ds_run_method_name(r->run),
         (unsigned long long)ds_run_trainer_def(r->run)->seed, s.iterations, s.iterations == 1 ? "" : "s", s.status);
  printf("  loss:   initial %.6g -> final %.6g\n", s.first_loss, s.last_loss);
  printf("  metric: initial %.6g -> final %.6g\n", s.first_metric, s.last_metric);
  printf("  result: iteration %d (the best: the lowest loss) loss %.6g metric %.6g\n", s.best_iteration, s.low_loss,
         s.best_metric);
  printf("  wall time: %.2f s (%.3f s per iteration)\n", r->wall, s.iteration_time / (double)s.iterations);
  fflush(stdout);
}

static void header(const Run* r) {
  dsRunResult s;
  ds_run_result(r->run, &s);
  const dsTrainerDef* td = ds_run_trainer_def(r->run);
  const char* log = ds_run_log_path(r->run);
  printf("dsim run: %s (%s), method %s, seed %llu, %d thread%s, %d iterations, %d parameters, lr %g\n",
         ds_env_name(ds_run_env(r->run)), r->path, ds_run_method_name(r->run), (unsigned long long)td->seed, s.threads,
         s.threads == 1 ? "" : "s", s.planned, s.nparams, td->method <= DS_METHOD_STATE ? td->optim.lr : 0.0);
  printf("run log: %s%s\n", *log ? log : "(none)", *log ? "" : " (built --without-hdf5)");
  fflush(stdout);
}

int ds__cli_run(int argc, char** argv) {
  static RunArgs args; /* large (the overrides): not on the stack */
  int rc = parse_args(argc, argv, &args);
  if (rc) return rc < 0 ? DS_EXIT_OK : rc;
  Run* r = (Run*)calloc(1, sizeof *r);
  if (!r) {
    fprintf(stderr, "dsim run: out of memory\n");
    return DS_EXIT_FAILURE;
  }
  int exitc = setup(&args, r);
  if (exitc == DS_EXIT_OK) {
    header(r);
    static const int stop_signals[3] = {SIGINT, SIGTERM, SIGHUP};
    struct sigaction sa, old[3];
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    g_interrupts = 0;
    g_signal = 0;
    g_run = r->run;
    for (int i = 0; i < 3; i++) sigaction(stop_signals[i], &sa, &old[i]);
    const double t0 = now_s();
    exitc = loop(r);
    r->wall = now_s() - t0;
    for (int i = 0; i < 3; i++) sigaction(stop_signals[i], &old[i], NULL);
    g_run = NULL;
    summary(r);
  }
  ds_run_destroy(r->run);
  free(r);
  return exitc;
}

/* `dsim landscape CONFIG --range1 LO:HI:N [--range2 LO:HI:N]`: the sysid
 * loss (dsim/sysid.h) over a 1-D or 2-D grid of values of the config's first
 * one or two identified parameters (each shared: one value for all its
 * elements), the other parameters at their true values, with the gradient
 * at every point: gradSim's loss-landscape figures (mass; a beam's Lame
 * parameters).
 *
 * Outputs (never replacing a file without --force): OUT.csv (one row per
 * point: the values, the loss, d(loss)/d(each value)); OUT.h5, a run log
 * (method "landscape": one "iteration" per grid point, row-major with axis 2
 * fastest; loss; params = the values then the gradient); OUT.png, a plot
 * drawn by python3's matplotlib when it is installed (skipped with a note
 * otherwise). The evaluation is the library's (ds_landscape_*, dsim/sysid.h:
 * points in parallel over run.threads threads, each with its own env; the
 * values do not depend on the thread count); this file parses flags and
 * writes the outputs. */
#define _POSIX_C_SOURCE 200809L
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cli.h"
#include "dsim/dsim.h"
#include "controllers/sysid_field.h"

static void usage(FILE* out) {
  fprintf(out,
          "usage: dsim landscape CONFIG --range1 LO:HI:N [--range2 LO:HI:N] [--geometric] [--object K]\n"
          "                      [--threads T] [--device D] [--group] [--out PREFIX] [--no-plot] [--force]\n"
          "                      [--set SECTION.KEY=VALUE]\n"
          "\n"
          "Evaluate the system-identification loss of a sysid config (dsim sysid) and its\n"
          "gradient on a grid of values of sysid.param1 (and sysid.param2), the other\n"
          "parameters at their true values. Writes PREFIX.csv, PREFIX.h5 and, with python3's\n"
          "matplotlib, PREFIX.png (default PREFIX: runs/landscape-ENV-sSEED).\n"
          "\n"
          "  --range1 LO:HI:N  N values of param1 from LO to HI (N >= 2)\n"
          "  --range2 LO:HI:N  the same for param2 (a 2-D grid)\n"
          "  --geometric       geometric spacing (LO, HI > 0)\n"
          "  --object K        the object's draws (true values: seed + K)\n"
          "  --threads T       run.threads           --out PREFIX  run.out (without extension)\n"
          "  --device D        run.device: cpu (default), cuda or cuda:N (the physics on that GPU)\n"
          "  --group           evaluate the grid in lockstep batches of up to 256 points (on a GPU:\n"
          "                    one engine for a batch; the default there)\n"
          "  --set S.K=V       any config key (env, sysid or run section)\n");
  ds__cli_plugin_usage(out, 20);
  fprintf(out,
          "\n"
          "exit status: 0 success, 1 run-time failure, 2 usage error, 3 bad config.\n");
}

/* LO:HI:N */
static int parse_axis(const char* s, dsLandscapeAxis* a) {
  char extra;
  if (sscanf(s, "%lf:%lf:%d%c", &a->lo, &a->hi, &a->n, &extra) != 3 || a->n < 2 || a->n > DS_LANDSCAPE_MAX_AXIS ||
      !isfinite(a->lo) || !isfinite(a->hi) || !(a->lo < a->hi))
    return -1;
  return 0;
}

/* The plot's script: the loss (1-D: with its gradient on a second axis;
 * 2-D: filled contours with the descent direction -gradient as arrows), the
 * true value marked when known (argv[3], argv[4]: "nan" for footage), at
 * most 6 x ticks rotated so that their labels never overlap. The PNG's
 * "Description" text lists the legend entries and the number of
 * overlapping x tick labels (tests/test_landscape_plot.sh reads it). */
static const char plot_code[] =
    "import sys, csv, math\n"
    "try:\n"
    "    import matplotlib\n"
    "    matplotlib.use('Agg')\n"
    "    import matplotlib.pyplot as plt\n"
    "    from matplotlib.ticker import MaxNLocator, LogLocator, NullFormatter, ScalarFormatter\n"
    "except Exception:\n"
    "    sys.exit(3)\n"
    "dims, geo, n1, n2 = int(sys.argv[5]), int(sys.argv[6]), sys.argv[7], sys.argv[8]\n"
    "t1, t2 = float(sys.argv[3]), float(sys.argv[4])\n"
    "rows = [list(map(float, r)) for r in list(csv.reader(open(sys.argv[1])))[1:]]\n"
    "fig, ax = plt.subplots(figsize=(6.4, 4.8))\n"
    "handles = []\n"
    "if dims == 1:\n"
    "    x = [r[0] for r in rows]; l = [r[1] for r in rows]; g = [r[2] for r in rows]\n"
    "    handles += ax.plot(x, l, 'k.-', label='loss')\n"
    "    ax.set_xlabel(n1); ax.set_ylabel('loss')\n"
    "    if geo: ax.set_xscale('log')\n"
    "    ax2 = ax.twinx(); handles += ax2.plot(x, g, 'r--', label='d loss / d ' + n1)\n"
    "    ax2.set_ylabel('gradient', color='r')\n"
    "    if not math.isnan(t1): handles.append(ax.axvline(t1, color='tab:green', ls=':', lw=2, label='true value'))\n"
    "else:\n"
    "    xs = sorted(set(r[0] for r in rows)); ys = sorted(set(r[1] for r in rows))\n"
    "    L = [[0.0] * len(xs) for _ in ys]\n"
    "    for r in rows: L[ys.index(r[1])][xs.index(r[0])] = r[2]\n"
    "    c = ax.contourf(xs, ys, L, 30); fig.colorbar(c, ax=ax, label='loss')\n"
    "    handles.append(ax.quiver([r[0] for r in rows], [r[1] for r in rows], [-r[3] for r in rows],\n"
    "                             [-r[4] for r in rows], color='w', angles='xy', label='-gradient (descent direction)'))\n"
    "    ax.set_xlabel(n1); ax.set_ylabel(n2)\n"
    "    if geo: ax.set_xscale('log'); ax.set_yscale('log')\n"
    "    if not math.isnan(t1) and not math.isnan(t2):\n"
    "        handles += ax.plot([t1], [t2], marker='*', ms=14, color='tab:red', ls='none', label='true value')\n"
    "for a in ([ax.xaxis] if dims == 1 else [ax.xaxis, ax.yaxis]):\n"
    "    if geo:\n"
    "        a.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0), numticks=8))\n"
    "        a.set_major_formatter(ScalarFormatter()); a.set_minor_formatter(NullFormatter())\n"
    "    else:\n"
    "        a.set_major_locator(MaxNLocator(6))\n"
    "for t in ax.get_xticklabels(): t.set_rotation(30); t.set_horizontalalignment('right')\n"
    "ax.legend(handles=handles, loc='best', fontsize='small', framealpha=0.8)\n"
    "ax.set_title('sysid loss landscape')\n"
    "fig.tight_layout(); fig.canvas.draw()\n"
    "r = fig.canvas.get_renderer()\n"
    "boxes = [t.get_window_extent(r) for t in ax.get_xticklabels() if t.get_visible() and t.get_text()]\n"
    "over = sum(1 for i in range(len(boxes)) for j in range(i + 1, len(boxes)) if boxes[i].overlaps(boxes[j]))\n"
    "desc = 'legend: ' + ', '.join(h.get_label() for h in handles) + '; overlapping x tick labels: %d' % over\n"
    "fig.savefig(sys.argv[2], dpi=100, format='png', metadata={'Description': desc})\n";

/* Plot with matplotlib in a child python3; 0 when drawn, 1 when python3 or
 * matplotlib is missing, 2 when the plot failed. */
static int plot(const char* csv, const char* png, int dims, const char* n1, const char* n2, int geometric,
                const double truth[2]) {
  char t1[64], t2[64], sd[8], sg[8];
  snprintf(t1, sizeof t1, "%.17g", truth[0]);
  snprintf(t2, sizeof t2, "%.17g", truth[1]);
  snprintf(sd, sizeof sd, "%d", dims);
  snprintf(sg, sizeof sg, "%d", geometric);
  pid_t pid = fork();
  if (pid < 0) return 1;
  if (pid == 0) {
    execlp("python3", "python3", "-c", plot_code, csv, png, t1, t2, sd, sg, n1, n2 ? n2 : "", (char*)NULL);
    _exit(127);
  }
  int st = 0;
  if (waitpid(pid, &st, 0) < 0) return 2;
  if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return 0;
  return WIFEXITED(st) && (WEXITSTATUS(st) == 3 || WEXITSTATUS(st) == 127) ? 1 : 2;
}

typedef struct LsArgs {
  const char* target;
  dsLandscapeDef ld;
  int have_axis1, force, noplot;
  const char* sets[64][3]; /* flag, "section.key" (NULL for --set), value */
  int nsets;
} LsArgs;

/* Command line -> LsArgs; DS_EXIT_OK to go on, -1 after --help, else an exit code. */
static int parse_args(int argc, char** argv, LsArgs* a) {
  memset(a, 0, sizeof *a);
  a->ld = ds_default_landscape_def();
  for (int i = 1; i < argc; i++) {
    const char* f = argv[i];
    if (ds__cli_is_help(f)) {
      usage(stdout);
      return -1;
    }
    int prc = 0;
    if (ds__cli_plugin_option("landscape", argc, argv, &i, &prc)) {
      if (prc) return prc;
      continue;
    }
    const int needs = !strcmp(f, "--range1") || !strcmp(f, "--range2") || !strcmp(f, "--object") ||
                      !strcmp(f, "--threads") || !strcmp(f, "--out") || !strcmp(f, "--set") || !strcmp(f, "--device");
    if (needs && i + 1 >= argc) {
      fprintf(stderr, "dsim landscape: missing value after %s\n", f);
      return DS_EXIT_USAGE;
    }
    if (!strcmp(f, "--range1") || !strcmp(f, "--range2")) {
      if (parse_axis(argv[++i], &a->ld.axis[f[7] - '1'])) {
        fprintf(stderr, "dsim landscape: %s: expected LO:HI:N with LO < HI and N >= 2, got '%s'\n", f, argv[i]);
        return DS_EXIT_USAGE;
      }
      if (f[7] == '1') a->have_axis1 = 1;
    } else if (!strcmp(f, "--object")) {
      char* end;
      long k = strtol(argv[++i], &end, 10);
      if (*end || k < 0 || k > 1000000000) {
        fprintf(stderr, "dsim landscape: --object: expected an integer >= 0, got '%s'\n", argv[i]);
        return DS_EXIT_USAGE;
      }
      a->ld.object = (int)k;
    } else if (!strcmp(f, "--threads") || !strcmp(f, "--out") || !strcmp(f, "--set") || !strcmp(f, "--device")) {
      if (a->nsets >= 64) return DS_EXIT_USAGE;
      const char** st = a->sets[a->nsets++];
      st[0] = f;
      st[1] = !strcmp(f, "--threads") ? "run.threads" : !strcmp(f, "--out") ? "run.out"
            : !strcmp(f, "--device") ? "run.device" : NULL;
      st[2] = argv[++i];
    } else if (!strcmp(f, "--geometric")) {
      a->ld.geometric = 1;
    } else if (!strcmp(f, "--group")) {
      a->ld.group = 1;
    } else if (!strcmp(f, "--force")) {
      a->force = 1;
    } else if (!strcmp(f, "--no-plot")) {
      a->noplot = 1;
    } else if (f[0] == '-') {
      fprintf(stderr, "dsim landscape: unknown option '%s'\nRun 'dsim landscape --help' for the options.\n", f);
      return DS_EXIT_USAGE;
    } else if (!a->target) {
      a->target = f;
    } else {
      fprintf(stderr, "dsim landscape: more than one config: '%s'\n", f);
      return DS_EXIT_USAGE;
    }
  }
  if (!a->target || !a->have_axis1) {
    fprintf(stderr, "dsim landscape: give a sysid config and --range1 LO:HI:N\n");
    return DS_EXIT_USAGE;
  }
  if (a->ld.geometric && (a->ld.axis[0].lo <= 0 || (a->ld.axis[1].n && a->ld.axis[1].lo <= 0))) {
    fprintf(stderr, "dsim landscape: --geometric needs ranges above 0\n");
    return DS_EXIT_USAGE;
  }
  return DS_EXIT_OK;
}

/* The command line's keys on the definitions; DS_EXIT_OK or DS_EXIT_USAGE. */
static int apply_sets(const LsArgs* a, dsEnvDef* def, dsSysidDef* sd, dsRunDef* rd) {
  char err[2048];
  for (int i = 0; i < a->nsets; i++) {
    char section[16] = "", key[128] = "";
    const char* value = a->sets[i][2];
    if (a->sets[i][1]) {
      sscanf(a->sets[i][1], "%15[^.].%127s", section, key);
    } else {
      const char* eq = strchr(value, '=');
      const char* dot = strchr(value, '.');
      if (!eq || !dot || dot > eq) {
        fprintf(stderr, "dsim landscape: --set: expected SECTION.KEY=VALUE, got '%s'\n", value);
        return DS_EXIT_USAGE;
      }
      snprintf(section, sizeof section, "%.*s", (int)(dot - value), value);
      snprintf(key, sizeof key, "%.*s", (int)(eq - dot - 1), dot + 1);
      value = eq + 1;
    }
    int rc;
    if (!strcmp(section, "env"))
      rc = ds_env_def_set(def, key, value, err, sizeof err);
    else if (!strcmp(section, "sysid"))
      rc = ds_config_set(a->sets[i][0], "sysid", ds_sysid_keys(), sd, sizeof *sd, key, value, err, sizeof err);
    else if (!strcmp(section, "run"))
      rc = ds_config_set(a->sets[i][0], "run", ds_run_keys(), rd, sizeof *rd, key, value, err, sizeof err);
    else
      snprintf(err, sizeof err, "%s: the section is env, sysid or run", a->sets[i][0]), rc = DS_ERR_CONFIG;
    if (rc) {
      fprintf(stderr, "dsim landscape: %s\n", err);
      return DS_EXIT_USAGE;
    }
  }
  return DS_EXIT_OK;
}

typedef struct Ls {
  char path[4096];   /* the config */
  char* text;        /* its text (stored in the HDF5 log) */
  dsEnvDef def;
  dsSysidDef sd;
  dsRunDef rd;
  char csvp[4096], h5p[4096], pngp[4096];
  dsLandscape* ls;
} Ls;

/* The folders of an output prefix (as dsim run --out creates them). */
static int make_out_dirs(const char* prefix) {
  if (ds_make_parent_dirs(prefix) == 0) return DS_EXIT_OK;
  fprintf(stderr, "dsim landscape: %s: cannot create its folder: %s\n", prefix, strerror(errno));
  return DS_EXIT_FAILURE;
}

/* What the grid is of, and the truth when the video has one. */
static void print_header(const Ls* c) {
  const char *n1 = ds_landscape_param_name(c->ls, 0), *n2 = ds_landscape_param_name(c->ls, 1);
  const int npt = ds_landscape_num_points(c->ls), nthreads = ds_landscape_threads(c->ls);
  printf("dsim landscape: %s (%s), %s%s%s on %d point%s, %d thread%s\n", c->def.cls->name, c->path, n1, n2 ? " x " : "",
         n2 ? n2 : "", npt, npt == 1 ? "" : "s", nthreads, nthreads == 1 ? "" : "s");
  if (c->sd.video == DS_SYSID_FRAMES) {
    printf("video %s: true values unknown; other parameters at their initial values\n", c->sd.frames_dir);
    return;
  }
  printf("true values: %s = %.6g%s", n1, ds_landscape_truth(c->ls, 0), n2 ? "" : "\n");
  if (n2) printf(", %s = %.6g\n", n2, ds_landscape_truth(c->ls, 1));
}

/* Config, keys and checks, in the order their errors are reported. */
static int load(LsArgs* a, Ls* c) {
  char err[2048];
  int exitc = ds__cli_locate_config("landscape", a->target, c->path, sizeof c->path);
  if (exitc) return exitc;
  c->sd = ds_default_sysid_def();
  c->rd = ds_default_run_def();
  int rc = ds_config_read_file(c->path, &c->text, err, sizeof err);
  if (!rc) rc = ds_env_def_from_text(c->path, c->text, &c->def, err, sizeof err);
  if (!rc) rc = ds__sysid_parse_section(c->path, c->text, &c->sd, err, sizeof err);
  if (!rc) rc = ds_run_def_from_text(c->path, c->text, &c->rd, err, sizeof err);
  if (rc) {
    fprintf(stderr, "dsim landscape: %s\n", err);
    return ds__cli_exit_code(rc, DS_CLI_INPUT);
  }
  if ((exitc = apply_sets(a, &c->def, &c->sd, &c->rd))) return exitc;
  c->sd.seed = c->rd.seed;
  c->sd.iterations = 1;
  a->ld.threads = c->rd.threads;
  if ((rc = ds_landscape_check(&c->sd, &a->ld, err, sizeof err))) {
    fprintf(stderr, "dsim landscape: %s: %s\n", c->path, err);
    return ds__cli_exit_code(rc, DS_CLI_INPUT);
  }
  if ((exitc = ds__cli_check_device("landscape", "run.device", c->rd.device, &c->def.device))) return exitc;
  if (c->def.device.kind == DS_DEVICE_CUDA) a->ld.group = 1;
  /* outputs */
  char prefix[3072];
  if (c->rd.out[0]) {
    snprintf(prefix, sizeof prefix, "%s", c->rd.out);
    const size_t L = strlen(prefix);
    if (L > 3 && !strcmp(prefix + L - 3, ".h5")) prefix[L - 3] = '\0';
  } else {
    snprintf(prefix, sizeof prefix, "runs/landscape-%s-s%llu", c->def.cls->name,
             (unsigned long long)(c->rd.seed + (uint64_t)a->ld.object));
    mkdir("runs", 0777);
  }
  if ((exitc = make_out_dirs(prefix))) return exitc;
  snprintf(c->csvp, sizeof c->csvp, "%s.csv", prefix);
  snprintf(c->h5p, sizeof c->h5p, "%s.h5", prefix);
  snprintf(c->pngp, sizeof c->pngp, "%s.png", prefix);
  if ((exitc = ds__cli_check_output("landscape", c->csvp, c->path, a->force)) ||
      (exitc = ds__cli_check_output("landscape", c->h5p, c->path, a->force)) ||
      (!a->noplot && (exitc = ds__cli_check_output("landscape", c->pngp, c->path, a->force))))
    return exitc;
  if ((rc = ds_landscape_create(&c->def, &c->sd, &a->ld, &c->ls, err, sizeof err))) {
    if (rc == DS_ERR_NOMEM)
      fprintf(stderr, "dsim landscape: out of memory\n");
    else
      fprintf(stderr, "dsim landscape: %s: %s\n", c->path, err);
    return ds__cli_exit_code(rc, DS_CLI_INPUT);
  }
  return DS_EXIT_OK;
}

/* OUT.csv: one row per point (values, loss, gradient). */
static int write_csv(const Ls* c, int force) {
  char tmp[4096];
  const int dims = ds_landscape_dims(c->ls), npt = ds_landscape_num_points(c->ls);
  const char *n1 = ds_landscape_param_name(c->ls, 0), *n2 = ds_landscape_param_name(c->ls, 1);
  const double* res = ds_landscape_results(c->ls);
  int fd = ds__cli_temp_for("landscape", c->csvp, tmp, sizeof tmp);
  FILE* f = fd >= 0 ? fdopen(fd, "w") : NULL;
  if (!f) return DS_EXIT_FAILURE;
  if (dims == 1)
    fprintf(f, "%s,loss,dloss_d%s\n", n1, n1);
  else
    fprintf(f, "%s,%s,loss,dloss_d%s,dloss_d%s\n", n1, n2, n1, n2);
  for (int q = 0; q < npt; q++) {
    const double* r = res + (size_t)q * 5;
    if (dims == 1)
      fprintf(f, "%.17g,%.17g,%.17g\n", r[0], r[2], r[3]);
    else
      fprintf(f, "%.17g,%.17g,%.17g,%.17g,%.17g\n", r[0], r[1], r[2], r[3], r[4]);
  }
  if (fclose(f) != 0) {
    unlink(tmp);
    return DS_EXIT_FAILURE;
  }
  return ds__cli_commit_temp("landscape", tmp, c->csvp, force);
}

/* OUT.h5: a run log with one row per point. */
static int write_h5(const Ls* c, const dsLandscapeDef* ld, int force) {
  char err[2048];
  const int dims = ds_landscape_dims(c->ls), npt = ds_landscape_num_points(c->ls);
  const double* res = ds_landscape_results(c->ls);
  dsRunLogDef d = ds_default_runlog_def();
  d.config_text = c->text;
  d.env = c->def.cls->name;
  d.method = "landscape";
  d.seed = c->rd.seed + (uint64_t)ld->object;
  d.threads = ds_landscape_threads(c->ls);
  d.nparams = 2 * dims;
  d.overwrite = force;
  dsRunLog* log = NULL;
  int exitc = DS_EXIT_OK;
  int rc = ds_runlog_create(c->h5p, &d, &log, err, sizeof err);
  if (rc && rc != DS_ERR_UNSUPPORTED) {
    fprintf(stderr, "dsim landscape: %s\n", err);
    exitc = DS_EXIT_FAILURE;
  }
  for (int q = 0; log && q < npt && !exitc; q++) {
    const double* r = res + (size_t)q * 5;
    const double pv[4] = {r[0], dims == 2 ? r[1] : r[3], dims == 2 ? r[3] : 0, r[4]};
    const double gn = dims == 2 ? sqrt(r[3] * r[3] + r[4] * r[4]) : fabs(r[3]);
    dsRunIteration it = {r[2], r[2], 0, gn, pv};
    if (ds_runlog_append_iteration(log, &it)) exitc = DS_EXIT_FAILURE;
  }
  if (log) ds_runlog_close(log, exitc ? "failed: write" : "completed");
  return exitc;
}

/* The lowest point, the outputs' names, and the plot. */
static int report(const Ls* c, const LsArgs* a) {
  const int dims = ds_landscape_dims(c->ls), failed = ds_landscape_num_failed(c->ls);
  const char *n1 = ds_landscape_param_name(c->ls, 0), *n2 = ds_landscape_param_name(c->ls, 1);
  const double* res = ds_landscape_results(c->ls);
  const int best = ds_landscape_lowest(c->ls);
  if (best >= 0) {
    printf("lowest loss %.6g at %s = %.6g", res[(size_t)best * 5 + 2], n1, res[(size_t)best * 5]);
    if (dims == 2) printf(", %s = %.6g", n2, res[(size_t)best * 5 + 1]);
    printf("\n");
  }
  if (failed) printf("%d point%s diverged (loss NaN in the outputs)\n", failed, failed == 1 ? "" : "s");
  printf("landscape: %s, %s\n", c->csvp, c->h5p);
  if (a->noplot) return DS_EXIT_OK;
  char tmp[4096];
  int fd = ds__cli_temp_for("landscape", c->pngp, tmp, sizeof tmp);
  if (fd < 0) return DS_EXIT_OK;
  close(fd);
  const double truth[2] = {ds_landscape_truth(c->ls, 0), dims == 2 ? ds_landscape_truth(c->ls, 1) : NAN};
  const int pr = plot(c->csvp, tmp, dims, n1, n2, a->ld.geometric, truth);
  if (pr == 0) {
    const int exitc = ds__cli_commit_temp("landscape", tmp, c->pngp, a->force);
    if (!exitc) printf("plot: %s\n", c->pngp);
    return exitc;
  }
  unlink(tmp);
  printf("plot: skipped (%s)\n", pr == 1 ? "python3 with matplotlib not found" : "matplotlib failed; see above");
  return DS_EXIT_OK;
}

int ds__cli_landscape(int argc, char** argv) {
  static LsArgs a; /* large (the keys): not on the stack */
  int exitc = parse_args(argc, argv, &a);
  if (exitc) return exitc < 0 ? DS_EXIT_OK : exitc;
  static Ls c;
  memset(&c, 0, sizeof c);
  exitc = load(&a, &c);
  if (!exitc) {
    print_header(&c);
    fflush(stdout);
    const int rc = ds_landscape_evaluate(c.ls);
    if (rc) { /* nothing is written */
      fprintf(stderr, "dsim landscape: %s: %s\n", c.path, ds_landscape_last_error(c.ls));
      exitc = ds__cli_exit_code(rc, DS_CLI_JOB);
    }
    if (!exitc) exitc = write_csv(&c, a.force);
    if (!exitc) exitc = write_h5(&c, &a.ld, a.force);
    if (!exitc) exitc = report(&c, &a);
  }
  ds_landscape_destroy(c.ls);
  ds_config_free_text(c.text);
  return exitc;
}

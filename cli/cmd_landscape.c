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
 * otherwise). Points are evaluated in parallel over run.threads threads,
 * each with its own env; the values do not depend on the thread count. */
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
#ifdef _OPENMP
#  include <omp.h>
#endif

#include "cli/cli.h"
#include "dsim/dsim.h"

typedef struct Axis {
  double lo, hi;
  int n, given;
} Axis;

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
          "  --set S.K=V       any config key (env, sysid or run section)\n"
          "\n"
          "exit status: 0 success, 1 run-time failure, 2 usage error, 3 bad config.\n");
}

static int parse_axis(const char* s, Axis* a) {
  char extra;
  if (sscanf(s, "%lf:%lf:%d%c", &a->lo, &a->hi, &a->n, &extra) != 3 || a->n < 2 || a->n > 100000 ||
      !isfinite(a->lo) || !isfinite(a->hi) || !(a->lo < a->hi))
    return -1;
  a->given = 1;
  return 0;
}

static double axis_value(const Axis* a, int i, int geometric) {
  const double t = (double)i / (double)(a->n - 1);
  return geometric ? a->lo * pow(a->hi / a->lo, t) : a->lo + (a->hi - a->lo) * t;
}

/* Plot with matplotlib in a child python3; 0 when drawn, 1 when python3 or
 * matplotlib is missing, 2 when the plot failed. */
static int plot(const char* csv, const char* png, int dims, const char* n1, const char* n2, int geometric) {
  char code[4096];
  snprintf(code, sizeof code,
           "import sys, csv\n"
           "try:\n"
           "    import matplotlib\n"
           "    matplotlib.use('Agg')\n"
           "    import matplotlib.pyplot as plt\n"
           "except Exception:\n"
           "    sys.exit(3)\n"
           "rows = [list(map(float, r)) for r in list(csv.reader(open(sys.argv[1])))[1:]]\n"
           "fig, ax = plt.subplots(figsize=(6, 4.5))\n"
           "if %d == 1:\n"
           "    x = [r[0] for r in rows]; l = [r[1] for r in rows]; g = [r[2] for r in rows]\n"
           "    ax.plot(x, l, 'k.-', label='loss')\n"
           "    ax.set_xlabel('%s'); ax.set_ylabel('loss')\n"
           "    ax2 = ax.twinx(); ax2.plot(x, g, 'r--', label='d loss / d value'); ax2.set_ylabel('gradient', color='r')\n"
           "    if %d: ax.set_xscale('log')\n"
           "else:\n"
           "    xs = sorted(set(r[0] for r in rows)); ys = sorted(set(r[1] for r in rows))\n"
           "    L = [[0.0] * len(xs) for _ in ys]\n"
           "    for r in rows: L[ys.index(r[1])][xs.index(r[0])] = r[2]\n"
           "    c = ax.contourf(xs, ys, L, 30); fig.colorbar(c, ax=ax, label='loss')\n"
           "    ax.quiver([r[0] for r in rows], [r[1] for r in rows], [-r[3] for r in rows], [-r[4] for r in rows],\n"
           "              color='w', angles='xy')\n"
           "    ax.set_xlabel('%s'); ax.set_ylabel('%s')\n"
           "    if %d: ax.set_xscale('log'); ax.set_yscale('log')\n"
           "ax.set_title('sysid loss landscape')\n"
           "fig.tight_layout(); fig.savefig(sys.argv[2], dpi=100, format='png')\n",
           dims, n1, geometric, n1, n2 ? n2 : "", geometric);
  pid_t pid = fork();
  if (pid < 0) return 1;
  if (pid == 0) {
    execlp("python3", "python3", "-c", code, csv, png, (char*)NULL);
    _exit(127);
  }
  int st = 0;
  if (waitpid(pid, &st, 0) < 0) return 2;
  if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return 0;
  return WIFEXITED(st) && (WEXITSTATUS(st) == 3 || WEXITSTATUS(st) == 127) ? 1 : 2;
}

/* Grid point q's values: the truth, with the axes' parameters at the
 * point's values v. */
static void point_values(const dsSysid* s, const Axis* ax, int dims, int geometric, int q, double* x, double v[2]) {
  const int nv = ds_sysid_num_values(s);
  const int i1 = dims == 2 ? q / ax[1].n : q, i2 = dims == 2 ? q % ax[1].n : 0;
  v[0] = axis_value(&ax[0], i1, geometric);
  v[1] = dims == 2 ? axis_value(&ax[1], i2, geometric) : 0;
  memcpy(x, ds_sysid_truth(s), sizeof(double) * (size_t)nv);
  for (int i = 0; i < nv; i++) {
    const int p = ds_sysid_value_param(s, i);
    if (p < dims && !ds_sysid_value_fixed(s, i)) x[i] = v[p];
  }
}

/* Its row of the results (v1, v2, loss, g1, g2): d/d(shared value) is the
 * sum over the parameter's values (one value per component); NaN where the
 * episode diverged. */
static void point_result(const dsSysid* s, int dims, const double v[2], int ok, double L, const double* g, double* r) {
  r[0] = v[0];
  r[1] = v[1];
  if (!ok) {
    r[2] = r[3] = r[4] = NAN;
    return;
  }
  r[2] = L;
  for (int i = 0; i < ds_sysid_num_values(s); i++) {
    const int p = ds_sysid_value_param(s, i);
    if (p < dims) r[3 + p] += g[i];
  }
}

/* The grid in lockstep batches of up to 256 points (ds_sysid_group_eval on
 * copies of the object; on a GPU one engine per batch). */
static int eval_group(const dsEnvDef* def, const dsSysidDef* sd, int object, const dsSysid* s0, const Axis* ax,
                      int dims, int geometric, int npt, double* res, int* failed, char* err, size_t errlen) {
  const int G = npt < 256 ? npt : 256, nv = ds_sysid_num_values(s0);
  dsSysidDef gd = *sd; /* evaluations only: the optimiser is never stepped */
  gd.optimizer = DS_SYSID_ADAM;
  int* objs = (int*)malloc(sizeof(int) * (size_t)G);
  double* X = (double*)malloc(sizeof(double) * (size_t)G * nv);
  double* Gr = (double*)malloc(sizeof(double) * (size_t)G * nv);
  double* L = (double*)malloc(sizeof(double) * (size_t)G);
  double* V = (double*)malloc(sizeof(double) * 2 * (size_t)G);
  int* st = (int*)malloc(sizeof(int) * (size_t)G);
  dsSysidGroup* g = NULL;
  int rc = objs && X && Gr && L && V && st ? 0 : DS_ERR_NOMEM;
  for (int i = 0; i < G && !rc; i++) objs[i] = object;
  if (!rc) rc = ds_sysid_group_create(def, &gd, objs, G, NULL, &g, err, errlen);
  for (int q0 = 0; q0 < npt && !rc; q0 += G) {
    const int m = npt - q0 < G ? npt - q0 : G;
    for (int i = 0; i < G; i++) /* a short last batch repeats its last point */
      point_values(s0, ax, dims, geometric, q0 + (i < m ? i : m - 1), X + (size_t)i * nv, V + 2 * (size_t)i);
    ds_sysid_group_eval(g, X, L, Gr, st);
    for (int i = 0; i < m; i++) {
      point_result(s0, dims, V + 2 * (size_t)i, st[i] == 0, L[i], Gr + (size_t)i * nv, res + (size_t)(q0 + i) * 5);
      *failed += st[i] != 0;
    }
  }
  if (rc == DS_ERR_NOMEM) snprintf(err, errlen, "out of memory");
  ds_sysid_group_destroy(g);
  free(objs);
  free(X);
  free(Gr);
  free(L);
  free(V);
  free(st);
  return rc;
}

int ds_cli_landscape(int argc, char** argv) {
  const char* target = NULL;
  Axis ax[2];
  memset(ax, 0, sizeof ax);
  int geometric = 0, force = 0, object = 0, noplot = 0, group = 0;
  const char* sets[64][3];
  int nsets = 0;
  for (int i = 1; i < argc; i++) {
    const char* f = argv[i];
    if (ds_cli_is_help(f)) {
      usage(stdout);
      return DS_EXIT_OK;
    }
    const int needs = !strcmp(f, "--range1") || !strcmp(f, "--range2") || !strcmp(f, "--object") ||
                      !strcmp(f, "--threads") || !strcmp(f, "--out") || !strcmp(f, "--set") || !strcmp(f, "--device");
    if (needs && i + 1 >= argc) {
      fprintf(stderr, "dsim landscape: missing value after %s\n", f);
      return DS_EXIT_USAGE;
    }
    if (!strcmp(f, "--range1") || !strcmp(f, "--range2")) {
      if (parse_axis(argv[++i], &ax[f[7] - '1'])) {
        fprintf(stderr, "dsim landscape: %s: expected LO:HI:N with LO < HI and N >= 2, got '%s'\n", f, argv[i]);
        return DS_EXIT_USAGE;
      }
    } else if (!strcmp(f, "--object")) {
      char* end;
      long k = strtol(argv[++i], &end, 10);
      if (*end || k < 0 || k > 1000000000) {
        fprintf(stderr, "dsim landscape: --object: expected an integer >= 0, got '%s'\n", argv[i]);
        return DS_EXIT_USAGE;
      }
      object = (int)k;
    } else if (!strcmp(f, "--threads") || !strcmp(f, "--out") || !strcmp(f, "--set") || !strcmp(f, "--device")) {
      if (nsets >= 64) return DS_EXIT_USAGE;
      sets[nsets][0] = f;
      sets[nsets][1] = !strcmp(f, "--threads") ? "run.threads"
                       : !strcmp(f, "--out")   ? "run.out"
                       : !strcmp(f, "--device") ? "run.device"
                                                : NULL;
      sets[nsets][2] = argv[++i];
      nsets++;
    } else if (!strcmp(f, "--geometric")) {
      geometric = 1;
    } else if (!strcmp(f, "--group")) {
      group = 1;
    } else if (!strcmp(f, "--force")) {
      force = 1;
    } else if (!strcmp(f, "--no-plot")) {
      noplot = 1;
    } else if (f[0] == '-') {
      fprintf(stderr, "dsim landscape: unknown option '%s'\nRun 'dsim landscape --help' for the options.\n", f);
      return DS_EXIT_USAGE;
    } else if (!target) {
      target = f;
    } else {
      fprintf(stderr, "dsim landscape: more than one config: '%s'\n", f);
      return DS_EXIT_USAGE;
    }
  }
  if (!target || !ax[0].given) {
    fprintf(stderr, "dsim landscape: give a sysid config and --range1 LO:HI:N\n");
    return DS_EXIT_USAGE;
  }
  if (geometric && (ax[0].lo <= 0 || (ax[1].given && ax[1].lo <= 0))) {
    fprintf(stderr, "dsim landscape: --geometric needs ranges above 0\n");
    return DS_EXIT_USAGE;
  }
  char path[4096], err[2048];
  int exitc = ds_cli_locate_config("landscape", target, path, sizeof path);
  if (exitc) return exitc;
  char* text = NULL;
  dsEnvDef def;
  dsSysidDef sd = ds_default_sysid_def();
  dsRunDef rd = ds_default_run_def();
  int rc = ds_config_read_file(path, &text, err, sizeof err);
  if (!rc) rc = ds_env_def_from_text(path, text, &def, err, sizeof err);
  if (!rc) rc = ds_config_parse_section(path, text, "sysid", ds_sysid_keys(), &sd, sizeof sd, err, sizeof err);
  if (!rc) rc = ds_run_def_from_text(path, text, &rd, err, sizeof err);
  if (rc) {
    ds_config_free_text(text);
    fprintf(stderr, "dsim landscape: %s\n", err);
    return DS_EXIT_INPUT;
  }
  for (int i = 0; i < nsets && !rc; i++) {
    char section[16] = "", key[128] = "";
    const char* value = sets[i][2];
    if (sets[i][1]) {
      sscanf(sets[i][1], "%15[^.].%127s", section, key);
    } else {
      const char* eq = strchr(value, '=');
      const char* dot = strchr(value, '.');
      if (!eq || !dot || dot > eq) {
        fprintf(stderr, "dsim landscape: --set: expected SECTION.KEY=VALUE, got '%s'\n", value);
        ds_config_free_text(text);
        return DS_EXIT_USAGE;
      }
      snprintf(section, sizeof section, "%.*s", (int)(dot - value), value);
      snprintf(key, sizeof key, "%.*s", (int)(eq - dot - 1), dot + 1);
      value = eq + 1;
    }
    if (!strcmp(section, "env"))
      rc = ds_env_def_set(&def, key, value, err, sizeof err);
    else if (!strcmp(section, "sysid"))
      rc = ds_config_set(sets[i][0], "sysid", ds_sysid_keys(), &sd, sizeof sd, key, value, err, sizeof err);
    else if (!strcmp(section, "run"))
      rc = ds_config_set(sets[i][0], "run", ds_run_keys(), &rd, sizeof rd, key, value, err, sizeof err);
    else
      snprintf(err, sizeof err, "%s: the section is env, sysid or run", sets[i][0]), rc = DS_ERR_CONFIG;
    if (rc) {
      fprintf(stderr, "dsim landscape: %s\n", err);
      ds_config_free_text(text);
      return DS_EXIT_USAGE;
    }
  }
  sd.seed = rd.seed;
  sd.iterations = 1;
  const int dims = ax[1].given ? 2 : 1;
  if (sd.video != DS_SYSID_SYNTHETIC) {
    fprintf(stderr, "dsim landscape: %s: sysid.video: the landscape needs a synthetic video (true values)\n", path);
    ds_config_free_text(text);
    return DS_EXIT_INPUT;
  }
  if (ds_sysid_num_params(&sd) < dims) {
    fprintf(stderr, "dsim landscape: %s: --range2 needs sysid.param2\n", path);
    ds_config_free_text(text);
    return DS_EXIT_INPUT;
  }
  for (int a = 0; a < dims; a++)
    if (sd.params[a].per_element) {
      fprintf(stderr, "dsim landscape: %s: sysid.param%d.per_element: a grid axis is one shared value\n", path, a + 1);
      ds_config_free_text(text);
      return DS_EXIT_INPUT;
    }
  const int nthreads = rd.threads > 0 ? rd.threads : ds_get_max_threads();
  if ((exitc = ds_cli_check_device("landscape", "run.device", rd.device, &def.device))) {
    ds_config_free_text(text);
    return exitc;
  }
  if (def.device.kind == DS_DEVICE_CUDA) group = 1;
  /* outputs */
  char prefix[3072], csvp[4096], h5p[4096], pngp[4096], tmp[4096];
  if (rd.out[0]) {
    snprintf(prefix, sizeof prefix, "%s", rd.out);
    const size_t L = strlen(prefix);
    if (L > 3 && !strcmp(prefix + L - 3, ".h5")) prefix[L - 3] = '\0';
  } else {
    snprintf(prefix, sizeof prefix, "runs/landscape-%s-s%llu", def.cls->name, (unsigned long long)(rd.seed + (uint64_t)object));
    mkdir("runs", 0777);
  }
  snprintf(csvp, sizeof csvp, "%s.csv", prefix);
  snprintf(h5p, sizeof h5p, "%s.h5", prefix);
  snprintf(pngp, sizeof pngp, "%s.png", prefix);
  if ((exitc = ds_cli_check_output("landscape", csvp, path, force)) ||
      (exitc = ds_cli_check_output("landscape", h5p, path, force)) ||
      (!noplot && (exitc = ds_cli_check_output("landscape", pngp, path, force)))) {
    ds_config_free_text(text);
    return exitc;
  }
  /* one identification object per thread (each owns its env) */
  dsSysid** S = (dsSysid**)calloc((size_t)nthreads, sizeof(dsSysid*));
  for (int t = 0; S && t < nthreads && !rc; t++) {
    rc = ds_sysid_create(&def, &sd, object, NULL, &S[t], err, sizeof err);
    if (rc) fprintf(stderr, "dsim landscape: %s: %s\n", path, err);
  }
  const int npt = ax[0].n * (dims == 2 ? ax[1].n : 1);
  const int nv = S && S[0] ? ds_sysid_num_values(S[0]) : 0;
  double* res = (double*)calloc((size_t)npt * 5, sizeof(double)); /* v1, v2, loss, g1, g2 */
  if (!S || !res) rc = DS_ERR_NOMEM;
  int failed = 0;
  if (!rc) {
    const char* n1 = ds_sysid_param_name(S[0], 0);
    const char* n2 = dims == 2 ? ds_sysid_param_name(S[0], 1) : NULL;
    printf("dsim landscape: %s (%s), %s%s%s on %d point%s, %d thread%s\n", def.cls->name, path, n1, n2 ? " x " : "",
           n2 ? n2 : "", npt, npt == 1 ? "" : "s", nthreads, nthreads == 1 ? "" : "s");
    const double* tr = ds_sysid_truth(S[0]);
    printf("true values: %s = %.6g%s", n1, tr[0], n2 ? "" : "\n");
    if (n2) {
      for (int i = 0; i < nv; i++)
        if (ds_sysid_value_param(S[0], i) == 1) {
          printf(", %s = %.6g\n", n2, tr[i]);
          break;
        }
    }
    fflush(stdout);
    if (group) {
      if ((rc = eval_group(&def, &sd, object, S[0], ax, dims, geometric, npt, res, &failed, err, sizeof err))) {
        fprintf(stderr, "dsim landscape: %s: %s\n", path, err);
        exitc = DS_EXIT_FAILURE; /* nothing is written */
      }
    } else {
      ds_set_num_threads(1);
#pragma omp parallel num_threads(nthreads)
      {
        int t = 0;
#ifdef _OPENMP
        t = omp_get_thread_num();
#endif
        double* x = (double*)malloc(sizeof(double) * (size_t)nv);
        double* g = (double*)malloc(sizeof(double) * (size_t)nv);
#pragma omp for schedule(dynamic, 1)
        for (int q = 0; q < npt; q++) {
          if (!x || !g) continue;
          double v[2], L = 0;
          point_values(S[t], ax, dims, geometric, q, x, v);
          const int bad = ds_sysid_eval(S[t], x, &L, g) != 0; /* the episode diverged at this point */
          point_result(S[t], dims, v, !bad, L, g, res + (size_t)q * 5);
          if (bad) {
#pragma omp atomic
            failed++;
          }
        }
        free(x);
        free(g);
      }
    }
    /* CSV */
    int fd = exitc ? -1 : ds_cli_temp_for("landscape", csvp, tmp, sizeof tmp);
    FILE* f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (exitc) {
    } else if (!f) {
      exitc = DS_EXIT_FAILURE;
    } else {
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
        exitc = DS_EXIT_FAILURE;
      } else {
        exitc = ds_cli_commit_temp("landscape", tmp, csvp, force);
      }
    }
    /* HDF5: a run log with one row per point */
    if (!exitc) {
      dsRunLogDef ld = ds_default_runlog_def();
      ld.config_text = text;
      ld.env = def.cls->name;
      ld.method = "landscape";
      ld.seed = rd.seed + (uint64_t)object;
      ld.threads = nthreads;
      ld.nparams = 2 * dims;
      ld.overwrite = force;
      dsRunLog* log = NULL;
      rc = ds_runlog_create(h5p, &ld, &log, err, sizeof err);
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
    }
    if (!exitc) {
      int best = -1;
      for (int q = 0; q < npt; q++)
        if (!isnan(res[(size_t)q * 5 + 2]) && (best < 0 || res[(size_t)q * 5 + 2] < res[(size_t)best * 5 + 2])) best = q;
      if (best >= 0) {
        printf("lowest loss %.6g at %s = %.6g", res[(size_t)best * 5 + 2], n1, res[(size_t)best * 5]);
        if (dims == 2) printf(", %s = %.6g", n2, res[(size_t)best * 5 + 1]);
        printf("\n");
      }
      if (failed) printf("%d point%s diverged (loss NaN in the outputs)\n", failed, failed == 1 ? "" : "s");
      printf("landscape: %s, %s\n", csvp, h5p);
      if (!noplot) {
        int fd2 = ds_cli_temp_for("landscape", pngp, tmp, sizeof tmp);
        if (fd2 >= 0) {
          close(fd2);
          const int pr = plot(csvp, tmp, dims, n1, n2, geometric);
          if (pr == 0) {
            exitc = ds_cli_commit_temp("landscape", tmp, pngp, force);
            if (!exitc) printf("plot: %s\n", pngp);
          } else {
            unlink(tmp);
            printf("plot: skipped (%s)\n", pr == 1 ? "python3 with matplotlib not found" : "matplotlib failed; see above");
          }
        }
      }
    }
  } else if (rc == DS_ERR_NOMEM) {
    fprintf(stderr, "dsim landscape: out of memory\n");
  }
  if (rc && !exitc) exitc = rc == DS_ERR_NOMEM ? DS_EXIT_FAILURE : DS_EXIT_INPUT;
  for (int t = 0; S && t < nthreads; t++) ds_sysid_destroy(S[t]);
  free(S);
  free(res);
  ds_config_free_text(text);
  return exitc;
}

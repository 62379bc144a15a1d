/* `dsim report LOG... -o report.html [--force] [--png DIR]`: one
 * self-contained HTML page about run logs (cli/report.h has the parts).
 *
 * Every log is first read in a child process the way `dsim info` reads it
 * (cli/files.c: a file corrupt enough to crash libhdf5 is a corrupt file,
 * exit 3), episodes included. Logs of different kinds (`dsim run`, `dsim
 * sysid`, `dsim landscape`) go to separate sections, each with its own
 * plots: a sysid loss beside a training loss says nothing. Logs of
 * different envs are overlaid with the env in each label and a note. A log
 * whose writer never closed it (status "running": killed, crashed) is shown
 * with a banner saying so. The page is written to a temporary file beside
 * it and moved into place: an existing page is replaced only with --force. */
#define _POSIX_C_SOURCE 200809L /* fdopen */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/report.h"
#include "dsim/dsim.h"
#include "dsim/image.h"
#include "dsim/runlog.h"
#include "io/runlog_internal.h"

/* frames of an animation at most (longer episodes are subsampled) */
#define MAX_ANIM_FRAMES 120
/* parameter table rows shown open; longer tables start collapsed */
#define OPEN_ROWS 16
/* PNG plots: twice the page's 720 x 360 units */
#define PNG_W 1440
#define PNG_H 720

static const char* const kind_name[DS_REPORT_NKINDS] = {"run", "sysid", "landscape"};
static const char* const episode_name[3] = {"first", "best", "last"};

static void usage(FILE* out) {
  fprintf(out,
          "usage: dsim report LOG.h5... -o REPORT.html [--png DIR] [--force]\n"
          "\n"
          "One self-contained HTML page (no network: plots are inline SVG, pictures embedded):\n"
          "loss and metric curves of every log overlaid (a seed sweep of one config also as\n"
          "median and min-max band), the goal beside the first, best and last episodes' final\n"
          "frames and animations, the parameters, timings, the machine and build, the resolved\n"
          "config; for `dsim sysid` logs each parameter's estimate against its true value and\n"
          "the error table; for `dsim landscape` logs the loss over the grid.\n"
          "\n"
          "  -o, --out FILE  the page to write (required)\n"
          "  --png DIR       also write the plots as DIR/NAME.png (created if missing)\n"
          "  --force         replace an existing page or PNG files (never a log)\n");
}

static int parse(int argc, char** argv, dsReport* r, const char*** logs) {
  *logs = (const char**)calloc((size_t)argc, sizeof(char*));
  if (!*logs) return DS_EXIT_FAILURE;
  for (int i = 1; i < argc; i++) {
    const char* a = argv[i];
    if (ds__cli_is_help(a)) {
      usage(stdout);
      return -1;
    }
    const int takes = !strcmp(a, "-o") || !strcmp(a, "--out") || !strcmp(a, "--png");
    if (takes && i + 1 >= argc) {
      fprintf(stderr, "dsim report: option '%s' needs a value\n", a);
      return DS_EXIT_USAGE;
    }
    if (!strcmp(a, "-o") || !strcmp(a, "--out"))
      r->out = argv[++i];
    else if (!strcmp(a, "--png"))
      r->pngdir = argv[++i];
    else if (!strcmp(a, "--force"))
      r->force = 1;
    else if (a[0] == '-' && a[1]) {
      fprintf(stderr, "dsim report: unknown option '%s'\n", a);
      return DS_EXIT_USAGE;
    } else
      (*logs)[r->nlogs++] = a;
  }
  if (!r->nlogs || !r->out) {
    fprintf(stderr, "dsim report: %s\n", !r->nlogs ? "give one or more run logs (LOG.h5)"
                                                   : "give the page to write: -o REPORT.html");
    return DS_EXIT_USAGE;
  }
  return DS_EXIT_OK;
}

/* ---- reading --------------------------------------------------------------- */
static void free_log(dsReportLog* L) {
  ds_runlog_free(L->loss);
  ds_runlog_free(L->metric);
  ds_runlog_free(L->wall);
  ds_runlog_free(L->grad);
  ds_runlog_free(L->params);
  ds_runlog_free(L->config);
}

/* Names and times a log carries (env, method, version, precision, start
 * and end time) never hold HTML's special characters; one from a hostile
 * file that does gets '?' for each, so that the page prints them as they are. */
static void plain(char* s) {
  for (; *s; s++)
    if (strchr("<>&\"'", *s)) *s = '?';
}

/* The log whole (episodes aside), after the child-process probe. */
static int load_log(const char* path, dsReportLog* L) {
  char err[1024];
  int rc = ds__cli_probe_runlog("report", path, NULL);
  if (rc) return rc;
  L->path = path;
  rc = ds_runlog_read_summary(path, &L->s, err, sizeof err);
  for (int e = 0; e < 3 && !rc; e++) /* a corrupt episode crashes the probe, not this process */
    if (L->s.has_episode[e] && (rc = ds__cli_probe_runlog("report", path, episode_name[e]))) return rc;
  if (!rc) rc = ds_runlog_read_iterations(path, &L->n, &L->loss, &L->metric, &L->wall, &L->grad, err, sizeof err);
  if (!rc) rc = ds_runlog_read_params(path, &L->nrows, &L->np, &L->params, err, sizeof err);
  if (!rc) rc = ds_runlog_read_config(path, &L->config, err, sizeof err);
  if (!rc) rc = ds__runlog_read_meta_text(path, "build_options", L->build, sizeof L->build, err, sizeof err);
  if (!rc) rc = ds__runlog_read_meta_text(path, "precision", L->precision, sizeof L->precision, err, sizeof err);
  if (!rc) rc = ds__runlog_read_meta_text(path, "end_time", L->end_time, sizeof L->end_time, err, sizeof err);
  if (rc) {
    fprintf(stderr, "dsim report: %s\n", err);
    return ds__cli_exit_code(rc, DS_CLI_RUNLOG);
  }
  char* names[] = {L->s.env, L->s.method, L->s.version, L->s.start_time, L->precision, L->end_time};
  for (int k = 0; k < 6; k++) plain(names[k]);
  L->kind = !strcmp(L->s.method, "sysid") ? DS_REPORT_SYSID
            : !strcmp(L->s.method, "landscape") ? DS_REPORT_LANDSCAPE : DS_REPORT_RUN;
  if (L->nrows > L->n) L->nrows = L->n; /* rows of a killed run's unfinished iteration */
  return DS_EXIT_OK;
}

static int envs_differ(const dsReport* r, int kind) {
  const char* first = NULL;
  for (int i = 0; i < r->nlogs; i++) {
    if (r->logs[i].kind != kind) continue;
    if (first && strcmp(first, r->logs[i].s.env)) return 1;
    first = r->logs[i].s.env;
  }
  return 0;
}

static void label_logs(dsReport* r) {
  for (int i = 0; i < r->nlogs; i++) {
    dsReportLog* L = &r->logs[i];
    const char* base = strrchr(L->path, '/');
    base = base ? base + 1 : L->path;
    snprintf(L->label, sizeof L->label, "%.100s seed %llu%s%.40s%s", base, (unsigned long long)L->s.seed,
             envs_differ(r, L->kind) ? " [" : "", envs_differ(r, L->kind) ? L->s.env : "",
             envs_differ(r, L->kind) ? "]" : "");
  }
}

/* The config without what a seed sweep's runs may differ in and still be
 * one experiment: run.seed, where the log went (run.out) and the thread
 * count (results are the same on any number: tests/test_golden). dsim
 * writes a log's config resolved, one key per line, so those keys are
 * lines of the "run" object; trailing commas go too (a last key dropped
 * then compares equal). malloc'd; NULL without memory. */
static char* config_but_seed(const char* text) {
  static const char* const drop[] = {"\"seed\":", "\"out\":", "\"threads\":"};
  char* out = (char*)malloc(strlen(text) + 2); /* + a newline after a last line without one */
  size_t n = 0;
  int in_run = 0;
  for (const char* line = text; out && *line;) {
    const char* end = strchr(line, '\n');
    if (!end) end = line + strlen(line);
    const char* t = line;
    while (t < end && (*t == ' ' || *t == '\t')) t++;
    int keep = 1;
    if (!strncmp(t, "\"run\":", 6)) in_run = 1;
    else if (in_run && *t == '}') in_run = 0;
    else if (in_run)
      for (int k = 0; k < 3; k++)
        if (!strncmp(t, drop[k], strlen(drop[k]))) keep = 0;
    const char* e = end;
    while (e > t && (e[-1] == ',' || e[-1] == ' ' || e[-1] == '\r')) e--;
    if (keep) {
      memcpy(out + n, t, (size_t)(e - t));
      n += (size_t)(e - t);
      out[n++] = '\n';
    }
    line = *end ? end + 1 : end;
  }
  if (out) out[n] = '\0';
  return out;
}

/* 1 when the logs of kind are two or more runs of one env and one config
 * apart from the seed. */
static int is_sweep(const dsReport* r, int kind) {
  char* ref = NULL;
  int count = 0, same = 1;
  for (int i = 0; i < r->nlogs && same; i++) {
    const dsReportLog* L = &r->logs[i];
    if (L->kind != kind) continue;
    char* c = config_but_seed(L->config);
    if (!c) same = 0;
    else if (!ref) ref = c;
    else {
      same = !strcmp(ref, c);
      free(c);
    }
    count++;
  }
  free(ref);
  return same && count >= 2 && !envs_differ(r, kind);
}

/* ---- plots ----------------------------------------------------------------- */
static int file_exists(const char* path) {
  struct stat st;
  return stat(path, &st) == 0;
}

void ds__report_plot(dsReport* r, FILE* fp, const dsReportPlot* p) {
  fprintf(fp, "<figure>");
  ds__report_svg(fp, p);
  fprintf(fp, "</figure>\n");
  r->nplots++;
  if (!r->pngdir) return;
  char path[4400], err[1024];
  snprintf(path, sizeof path, "%s/%s.png", r->pngdir, p->name);
  if (file_exists(path) && !r->force) {
    fprintf(stderr, "dsim report: %s exists: give --force to replace it\n", path);
    if (!r->status) r->status = DS_EXIT_USAGE;
    return;
  }
  uint8_t* px = ds__report_raster(p, PNG_W, PNG_H);
  if (!px || ds_png_write(path, px, PNG_W, PNG_H, err, sizeof err)) {
    fprintf(stderr, "dsim report: %s\n", px ? err : "out of memory drawing a plot");
    if (!r->status) r->status = DS_EXIT_FAILURE;
  } else {
    r->npng++;
  }
  free(px);
}

/* Median, min and max over the logs of kind at each iteration (those logs
 * that reached it): out is 3 x n. */
static void sweep_stats(const dsReport* r, int kind, int which, int n, double* out) {
  double* v = (double*)malloc(sizeof(double) * (size_t)r->nlogs);
  for (int i = 0; v && i < n; i++) {
    int m = 0;
    for (int k = 0; k < r->nlogs; k++) {
      const dsReportLog* L = &r->logs[k];
      const double* y = which ? L->metric : L->loss;
      if (L->kind == kind && i < L->n && isfinite(y[i])) v[m++] = y[i];
    }
    for (int a = 1; a < m; a++) /* insertion sort: a sweep has a few logs */
      for (int b = a; b > 0 && v[b - 1] > v[b]; b--) {
        const double t = v[b];
        v[b] = v[b - 1];
        v[b - 1] = t;
      }
    out[i] = m ? (m % 2 ? v[m / 2] : (v[m / 2 - 1] + v[m / 2]) / 2) : NAN;
    out[n + i] = m ? v[0] : NAN;
    out[2 * n + i] = m ? v[m - 1] : NAN;
  }
  free(v);
}

void ds__report_curves(dsReport* r, FILE* fp, int kind, const char* name) {
  const int sweep = is_sweep(r, kind);
  int n = 0, count = 0;
  const char* env = "";
  for (int k = 0; k < r->nlogs; k++)
    if (r->logs[k].kind == kind) {
      if (r->logs[k].n > n) n = r->logs[k].n;
      env = r->logs[k].s.env;
      count++;
    }
  if (sweep)
    fprintf(fp, "<p>A seed sweep: %d runs of one config (env %s) apart from the seed; the median over the seeds "
            "at each iteration, with the band from the lowest to the highest.</p>\n", count, env);
  if (envs_differ(r, kind))
    fprintf(fp, "<p class='banner'>These logs are of different envs (each label names its env): their losses "
            "measure different tasks.</p>\n");
  double* st = sweep && n ? (double*)malloc(sizeof(double) * 3 * (size_t)n) : NULL;
  for (int which = 0; which < 2; which++) {
    dsReportPlot p;
    memset(&p, 0, sizeof p);
    snprintf(p.name, sizeof p.name, "%s%s", name, which ? "metric" : "loss");
    /* a sysid log's metric is the mean absolute relative error (its loss when the truth is unknown) */
    const char* metric = kind == DS_REPORT_SYSID ? "mean abs. relative error" : "metric";
    snprintf(p.title, sizeof p.title, "%s per iteration", which ? (kind == DS_REPORT_SYSID ? "Error" : "Task metric")
                                                                : "Loss");
    snprintf(p.xlabel, sizeof p.xlabel, "iteration");
    snprintf(p.ylabel, sizeof p.ylabel, "%s", which ? metric : "loss");
    p.logy = -1;
    if (st) {
      sweep_stats(r, kind, which, n, st);
      p.s[p.nseries++] = (dsReportSeries){"min-max over seeds", DS_REPORT_BAND, 0, n, NULL, st + n, st + 2 * n};
      p.s[p.nseries++] = (dsReportSeries){"median over seeds", DS_REPORT_LINE, 0, n, NULL, st, NULL};
    }
    const int lines = !st || count <= 10; /* a wide sweep: the median and band say it */
    for (int k = 0; k < r->nlogs && lines && p.nseries < DS_REPORT_MAX_SERIES; k++) {
      const dsReportLog* L = &r->logs[k];
      if (L->kind != kind) continue;
      dsReportSeries* s = &p.s[p.nseries++];
      snprintf(s->label, sizeof s->label, "%s", L->label);
      s->style = st ? DS_REPORT_DASHED : DS_REPORT_LINE;
      s->color = st ? p.nseries - 2 : p.nseries - 1; /* the sweep's median and band take colour 0 */
      s->n = L->n;
      s->y = which ? L->metric : L->loss;
    }
    ds__report_plot(r, fp, &p);
  }
  free(st);
}

/* ---- a run log's own parts ------------------------------------------------- */
/* Pixels over a white page: c a + 255 (1 - a), opaque. The renderer's
 * background is transparent; a GIF has no partial transparency, and the
 * final frame (PNG) and the animation (GIF) should look alike. */
static void over_white(uint8_t* rgba, size_t npx) {
  for (size_t i = 0; i < npx; i++) {
    uint8_t* q = rgba + 4 * i;
    for (int c = 0; c < 3; c++) q[c] = (uint8_t)((q[c] * q[3] + 255 * (255 - q[3]) + 127) / 255);
    q[3] = 255;
  }
}

/* One episode: its goal, final frame and animation, captioned. */
static void episode_figures(dsReport* r, FILE* fp, const dsReportLog* L, int e, int with_goal) {
  char err[1024], cap[200];
  int nf = 0, h = 0, w = 0, gh = 0, gw = 0;
  uint8_t *rgba = NULL, *goal = NULL;
  int rc = ds_runlog_read_frames(L->path, episode_name[e], &nf, &h, &w, &rgba, err, sizeof err);
  if (rc) {
    fprintf(fp, "<p class='note'>%s episode: no frames (", episode_name[e]);
    ds__report_escape(fp, err);
    fprintf(fp, ")</p>\n");
    return;
  }
  over_white(rgba, (size_t)nf * h * w);
  if (with_goal && !ds_runlog_read_goal(L->path, episode_name[e], &gh, &gw, &goal, err, sizeof err)) {
    over_white(goal, (size_t)gh * gw);
    fprintf(fp, "<figure>");
    ds__report_png_img(fp, r->tmpdir, goal, gw, gh, "the goal");
    fprintf(fp, "<figcaption>goal</figcaption></figure>\n");
  }
  ds_runlog_free(goal);
  const size_t fb = (size_t)h * w * 4;
  const int it = e == 0 ? 0 : e == 1 ? L->s.best_episode_iteration : L->n - 1;
  snprintf(cap, sizeof cap, "%s episode (iteration %d): final frame", episode_name[e], it);
  fprintf(fp, "<figure>");
  if (ds__report_png_img(fp, r->tmpdir, rgba + fb * (size_t)(nf - 1), w, h, cap)) r->status = DS_EXIT_FAILURE;
  fprintf(fp, "<figcaption>%s</figcaption></figure>\n", cap);
  /* the animation: every stride-th frame, at the episode's pace (from the
   * frames' times when logged) within 5 to 50 hundredths of a second */
  const int stride = (nf + MAX_ANIM_FRAMES - 1) / MAX_ANIM_FRAMES, na = (nf + stride - 1) / stride;
  double dt = 0.1 * stride;
  dsRunFrameInfo fi;
  if (nf > 1 && !ds_runlog_read_frame_info(L->path, episode_name[e], &fi, err, sizeof err)) {
    dt = (fi.times[nf - 1] - fi.times[0]) / (nf - 1) * stride;
    ds_runlog_frame_info_free(&fi);
  }
  const int delay = (int)fmin(50, fmax(5, lround(dt * 100)));
  uint8_t* anim = stride > 1 ? (uint8_t*)malloc(fb * (size_t)na) : rgba;
  for (int k = 0; anim && stride > 1 && k < na; k++) memcpy(anim + fb * k, rgba + fb * (size_t)k * stride, fb);
  snprintf(cap, sizeof cap, "%s episode: %d frames%s", episode_name[e], na, stride > 1 ? " (subsampled)" : "");
  if (anim && nf > 1) {
    fprintf(fp, "<figure>");
    if (ds__report_animation(fp, r->tmpdir, anim, na, h, w, delay, cap)) r->status = DS_EXIT_FAILURE;
    fprintf(fp, "<figcaption>%s</figcaption></figure>\n", cap);
  }
  if (anim != rgba) free(anim);
  ds_runlog_free(rgba);
}

void ds__report_episodes(dsReport* r, FILE* fp, const dsReportLog* L) {
  const int any = L->s.has_episode[0] | L->s.has_episode[1] | L->s.has_episode[2];
  fprintf(fp, "<h4>Episodes</h4>\n");
  if (!any) {
    fprintf(fp, "<p class='note'>This log has no episodes.</p>\n");
    return;
  }
  int goal_shown = 0;
  fprintf(fp, "<div class='frames'>\n");
  for (int e = 0; e < 3; e++) {
    if (!L->s.has_episode[e]) continue;
    episode_figures(r, fp, L, e, !goal_shown);
    goal_shown = 1;
  }
  fprintf(fp, "</div>\n");
}

/* The parameters of the first, best and last iterations. */
static void param_table(FILE* fp, const dsReportLog* L) {
  fprintf(fp, "<h4>Parameters</h4>\n");
  if (!L->params || L->nrows < 1) {
    fprintf(fp, "<p class='note'>No parameters logged.</p>\n");
    return;
  }
  const int best = L->s.best_iteration >= 0 && L->s.best_iteration < L->nrows ? L->s.best_iteration : 0;
  const int rows[3] = {0, best, L->nrows - 1};
  fprintf(fp, "<details%s><summary>%d parameter%s per iteration</summary>\n<table><tr><th>index</th>", 
          L->np <= OPEN_ROWS ? " open" : "", L->np, L->np == 1 ? "" : "s");
  for (int c = 0; c < 3; c++) fprintf(fp, "<th>%s (iteration %d)</th>", episode_name[c], rows[c]);
  fprintf(fp, "</tr>\n");
  for (int j = 0; j < L->np; j++) {
    fprintf(fp, "<tr><td>%d</td>", j);
    for (int c = 0; c < 3; c++) fprintf(fp, "<td>%.6g</td>", L->params[(size_t)rows[c] * L->np + j]);
    fprintf(fp, "</tr>\n");
  }
  fprintf(fp, "</table></details>\n");
}

void ds__report_log_details(FILE* fp, const dsReportLog* L) {
  double mean = L->n > 0 ? L->wall[L->n - 1] / L->n : NAN;
  fprintf(fp, "<h4>Timings, machine and build</h4>\n<table>\n");
  fprintf(fp, "<tr><th class='l'>wall time</th><td class='l'>%.3f s over %d iteration%s (%.3g s each on average)"
          "</td></tr>\n", L->n > 0 ? L->wall[L->n - 1] : 0.0, L->n, L->n == 1 ? "" : "s", mean);
  fprintf(fp, "<tr><th class='l'>started / ended</th><td class='l'>%s / %s</td></tr>\n", L->s.start_time,
          L->end_time[0] ? L->end_time : "(not closed)");
  fprintf(fp, "<tr><th class='l'>status</th><td class='l'>");
  ds__report_escape(fp, L->s.status);
  fprintf(fp, "</td></tr>\n<tr><th class='l'>threads</th><td class='l'>%d</td></tr>\n", L->s.threads);
  fprintf(fp, "<tr><th class='l'>written by</th><td class='l'>dsim ");
  ds__report_escape(fp, L->s.version);
  fprintf(fp, " (%s precision)</td></tr>\n<tr><th class='l'>build</th><td class='l'>", L->precision);
  ds__report_escape(fp, L->build);
  fprintf(fp, "</td></tr>\n</table>\n<details><summary>The resolved config</summary>\n<pre>");
  ds__report_escape(fp, L->config);
  fprintf(fp, "</pre></details>\n");
}

/* Wall time per iteration (the differences of the logged times since the start). */
static void timings(dsReport* r, FILE* fp) {
  dsReportPlot p;
  memset(&p, 0, sizeof p);
  snprintf(p.name, sizeof p.name, "wall_time");
  snprintf(p.title, sizeof p.title, "Wall time per iteration");
  snprintf(p.xlabel, sizeof p.xlabel, "iteration");
  snprintf(p.ylabel, sizeof p.ylabel, "seconds");
  p.logy = -1;
  double* d[DS_REPORT_MAX_SERIES] = {NULL};
  fprintf(fp, "<h3>Timings</h3>\n<table><tr><th class='l'>log</th><th>iterations</th><th>total s</th>"
          "<th>mean s per iteration</th></tr>\n");
  for (int k = 0; k < r->nlogs; k++) {
    const dsReportLog* L = &r->logs[k];
    if (L->kind != DS_REPORT_RUN) continue;
    fprintf(fp, "<tr><td class='l'>");
    ds__report_escape(fp, L->label);
    fprintf(fp, "</td><td>%d</td><td>%.3f</td><td>%.3g</td></tr>\n", L->n, L->n ? L->wall[L->n - 1] : 0.0,
            L->n ? L->wall[L->n - 1] / L->n : NAN);
    if (p.nseries >= DS_REPORT_MAX_SERIES || !(d[p.nseries] = (double*)malloc(sizeof(double) * (L->n + 1)))) continue;
    for (int i = 0; i < L->n; i++) d[p.nseries][i] = L->wall[i] - (i ? L->wall[i - 1] : 0);
    dsReportSeries* s = &p.s[p.nseries];
    snprintf(s->label, sizeof s->label, "%s", L->label);
    s->color = p.nseries, s->n = L->n, s->y = d[p.nseries];
    p.nseries++;
  }
  fprintf(fp, "</table>\n");
  ds__report_plot(r, fp, &p);
  for (int i = 0; i < DS_REPORT_MAX_SERIES; i++) free(d[i]);
}

static void run_section(dsReport* r, FILE* fp) {
  fprintf(fp, "<h2 id='runs'>Training runs (<code>dsim run</code>)</h2>\n<h3>Curves</h3>\n");
  ds__report_curves(r, fp, DS_REPORT_RUN, "");
  timings(r, fp);
  for (int k = 0; k < r->nlogs; k++) {
    const dsReportLog* L = &r->logs[k];
    if (L->kind != DS_REPORT_RUN) continue;
    fprintf(fp, "<h3>");
    ds__report_escape(fp, L->label);
    fprintf(fp, "</h3>\n<p>env <b>%s</b>, method %s, %d iterations; best loss %.6g at iteration %d.</p>\n", L->s.env,
            L->s.method, L->n, L->s.best_loss, L->s.best_iteration);
    ds__report_episodes(r, fp, L);
    param_table(fp, L);
    ds__report_log_details(fp, L);
  }
}

/* ---- the page -------------------------------------------------------------- */
static void overview(const dsReport* r, FILE* fp, int* nkinds) {
  int has[DS_REPORT_NKINDS] = {0};
  fprintf(fp, "<h2 id='logs'>Logs</h2>\n<table><tr><th class='l'>file</th><th class='l'>kind</th>"
          "<th class='l'>env</th><th class='l'>method</th><th>seed</th><th class='l'>status</th><th>iterations</th>"
          "<th>best loss</th><th>wall time s</th></tr>\n");
  for (int k = 0; k < r->nlogs; k++) {
    const dsReportLog* L = &r->logs[k];
    has[L->kind] = 1;
    fprintf(fp, "<tr><td class='l'>");
    ds__report_escape(fp, L->path);
    fprintf(fp, "</td><td class='l'>%s</td><td class='l'>%s</td><td class='l'>%s</td><td>%llu</td><td class='l'>",
            kind_name[L->kind], L->s.env, L->s.method, (unsigned long long)L->s.seed);
    ds__report_escape(fp, L->s.status);
    fprintf(fp, "</td><td>%d</td><td>%.6g</td><td>%.3f</td></tr>\n", L->n, L->n ? L->s.best_loss : NAN,
            L->n ? L->wall[L->n - 1] : 0.0);
  }
  fprintf(fp, "</table>\n");
  *nkinds = has[0] + has[1] + has[2];
}

/* Banners: logs that did not end cleanly, kinds mixed. */
static void banners(const dsReport* r, FILE* fp, int nkinds) {
  for (int k = 0; k < r->nlogs; k++) {
    const dsReportLog* L = &r->logs[k];
    const int running = !strcmp(L->s.status, "running");
    if (!running && !strcmp(L->s.status, "completed")) continue;
    fprintf(fp, "<div class='banner%s'><b>", running ? " bad" : "");
    ds__report_escape(fp, L->path);
    fprintf(fp, "</b>: ");
    if (running)
      fprintf(fp, "status \"running\": its writer never closed it (the run was killed or crashed). It shows the "
              "%d iterations completed before that%s.", L->n,
              L->s.has_episode[1] && L->s.best_episode_iteration != L->s.best_iteration
                  ? "; the best episode kept is an older best than the best logged iteration" : "");
    else {
      fprintf(fp, "the run ended as \"");
      ds__report_escape(fp, L->s.status);
      fprintf(fp, "\" after %d iterations.", L->n);
    }
    fprintf(fp, "</div>\n");
  }
  if (nkinds > 1) {
    fprintf(fp, "<div class='banner'>These logs are of different kinds:");
    for (int kind = 0, nk = 0; kind < DS_REPORT_NKINDS; kind++) {
      int m = 0;
      for (int k = 0; k < r->nlogs; k++) {
        if (r->logs[k].kind != kind) continue;
        fprintf(fp, "%s <b>", m ? "," : nk ? ";" : "");
        ds__report_escape(fp, r->logs[k].path);
        fprintf(fp, "</b>");
        m++;
      }
      if (m) fprintf(fp, " %s log%s of <code>dsim %s</code>", m == 1 ? "is a" : "are", m == 1 ? "" : "s", kind_name[kind]);
      nk += m > 0;
    }
    fprintf(fp, ". Each kind has its own section; their losses are not plotted together.</div>\n");
  }
}

static void write_page(dsReport* r, FILE* fp) {
  int nkinds = 0, has[DS_REPORT_NKINDS] = {0};
  char title[300];
  const char* base = strrchr(r->logs[0].path, '/');
  snprintf(title, sizeof title, "dsim report: %s%s", base ? base + 1 : r->logs[0].path,
           r->nlogs > 1 ? " and more" : "");
  ds__report_head(fp, title);
  fprintf(fp, "<h1>");
  ds__report_escape(fp, title);
  fprintf(fp, "</h1>\n");
  overview(r, fp, &nkinds);
  banners(r, fp, nkinds);
  for (int k = 0; k < r->nlogs; k++) has[r->logs[k].kind] = 1;
  if (has[DS_REPORT_RUN]) run_section(r, fp);
  if (has[DS_REPORT_SYSID]) ds__report_sysid(r, fp);
  if (has[DS_REPORT_LANDSCAPE]) ds__report_landscape(r, fp);
  ds__report_tail(fp);
}

/* --png DIR: created when missing. */
static int check_pngdir(const char* dir) {
  struct stat st;
  if (stat(dir, &st) != 0) {
    if (mkdir(dir, 0777) != 0) {
      fprintf(stderr, "dsim report: --png %s: cannot create the directory: %s\n", dir, strerror(errno));
      return DS_EXIT_FAILURE;
    }
  } else if (!S_ISDIR(st.st_mode)) {
    fprintf(stderr, "dsim report: --png %s: exists and is not a directory\n", dir);
    return DS_EXIT_USAGE;
  }
  return DS_EXIT_OK;
}

/* The page into a temporary beside out, then moved into place. */
static int write_output(dsReport* r) {
  char tmp[4400];
  int fd = ds__cli_temp_for("report", r->out, tmp, sizeof tmp);
  if (fd < 0) return DS_EXIT_FAILURE;
  FILE* fp = fdopen(fd, "w");
  if (!fp) {
    fprintf(stderr, "dsim report: %s: cannot write: %s\n", r->out, strerror(errno));
    close(fd);
    unlink(tmp);
    return DS_EXIT_FAILURE;
  }
  const char* slash = strrchr(r->out, '/');
  snprintf(r->tmpdir, sizeof r->tmpdir, "%.*s", slash ? (int)(slash - r->out) + (slash == r->out) : 1,
           slash ? r->out : ".");
  write_page(r, fp);
  int ok = !ferror(fp);
  ok = (fclose(fp) == 0) && ok;
  if (!ok) {
    fprintf(stderr, "dsim report: %s: cannot write: %s\n", r->out, strerror(errno));
    if (!r->status) r->status = DS_EXIT_FAILURE;
  }
  if (r->status) {
    unlink(tmp);
    return r->status;
  }
  return ds__cli_commit_temp("report", tmp, r->out, r->force);
}

int ds__cli_report(int argc, char** argv) {
  dsReport r;
  memset(&r, 0, sizeof r);
  const char** paths = NULL;
  int exitc = parse(argc, argv, &r, &paths);
  if (exitc) {
    free(paths);
    return exitc < 0 ? DS_EXIT_OK : exitc;
  }
  exitc = ds__cli_check_output("report", r.out, paths[0], r.force);
  for (int k = 1; k < r.nlogs && !exitc; k++) exitc = ds__cli_check_output("report", r.out, paths[k], 1);
  if (!exitc && r.pngdir) exitc = check_pngdir(r.pngdir);
  r.logs = exitc ? NULL : (dsReportLog*)calloc((size_t)r.nlogs, sizeof(dsReportLog));
  if (!exitc && !r.logs) exitc = DS_EXIT_FAILURE;
  for (int k = 0; k < r.nlogs && !exitc; k++) exitc = load_log(paths[k], &r.logs[k]);
  if (!exitc) {
    label_logs(&r);
    for (int k = 0; k < r.nlogs; k++)
      if (!strcmp(r.logs[k].s.status, "running"))
        fprintf(stderr, "dsim report: note: %s: status \"running\": the run did not end cleanly (killed or crashed); "
                "reporting its %d completed iterations\n", r.logs[k].path, r.logs[k].n);
    exitc = write_output(&r);
  }
  if (!exitc)
    printf("wrote %s (%d log%s, %d plots%s)\n", r.out, r.nlogs, r.nlogs == 1 ? "" : "s", r.nplots,
           r.pngdir ? "; PNG copies in --png" : "");
  for (int k = 0; r.logs && k < r.nlogs; k++) free_log(&r.logs[k]);
  free(r.logs);
  free(paths);
  return exitc;
}

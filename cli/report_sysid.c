/* The sections of `dsim report` for `dsim sysid` and `dsim landscape` logs.
 *
 * A sysid log stores the flattened values per iteration and, in its config,
 * the drawn true values; which value belongs to which parameter (a
 * per-element parameter has one per element, some held at 0) is the
 * object's layout, rebuilt from the config as `dsim sysid --collect` does.
 * A parameter's curve is the mean of its identified values, the quantity
 * the error table (and --collect's) reports.
 *
 * A landscape log has one row per grid point: the loss, and as parameters
 * (x, dL/dx) in 1-D or (x, y, dL/dx, dL/dy) in 2-D; its config names the
 * parameters and, for a synthetic video, their true values. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/report.h"
#include "dsim/dsim.h"
#include "dsim/env.h"
#include "dsim/run.h"
#include "dsim/sysid.h"

/* ---- sysid ------------------------------------------------------------------ */
/* The object of log L rebuilt from its config (no iterations): its layout
 * and truth; NULL with the reason in err. *known: the truth is known. */
static dsSysid* rebuild(const dsReportLog* L, int* known, char* err, size_t errlen) {
  dsEnvDef def;
  dsSysidDef sd = ds_default_sysid_def();
  dsRunDef rd = ds_default_run_def();
  dsSysid* s = NULL;
  int rc = ds_env_def_from_text(L->path, L->config, &def, err, errlen);
  if (!rc) rc = ds_sysid_def_from_text(L->path, L->config, &sd, err, errlen);
  if (!rc) rc = ds_run_def_from_text(L->path, L->config, &rd, err, errlen);
  if (!rc) {
    sd.seed = rd.seed;
    for (int p = 0; p < ds_sysid_num_params(&sd); p++) sd.params[p].ntruth_range = 0; /* "true" is the drawn value */
    sd.iterations = 1;
    rc = ds_sysid_create(&def, &sd, 0, NULL, &s, err, errlen);
  }
  if (!rc && ds_sysid_num_values(s) != L->np) {
    snprintf(err, errlen, "%s: %d values per iteration, its config gives %d", L->path, L->np, ds_sysid_num_values(s));
    ds_sysid_destroy(s);
    return NULL;
  }
  *known = sd.video != DS_SYSID_FRAMES; /* synthetic or camsim: the truth is in the config */
  return rc ? NULL : s;
}

/* The mean of parameter p's identified values in row v. */
static double param_mean(const dsSysid* s, int p, const double* v) {
  double sum = 0;
  int m = 0;
  for (int i = 0; i < ds_sysid_num_values(s); i++)
    if (ds_sysid_value_param(s, i) == p && !ds_sysid_value_fixed(s, i)) sum += v[i], m++;
  return m ? sum / m : NAN;
}

static void safe_name(char* out, size_t n, const char* prefix, const char* name) {
  snprintf(out, n, "%s%s", prefix, name);
  for (char* c = out; *c; c++)
    if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '-'))
      *c = '_';
}

typedef struct Sys {
  dsSysid* s;    /* NULL: the layout could not be rebuilt */
  int known;
  double* traj;  /* nparams x n means */
  double* truth; /* nparams means */
  char why[512];
} Sys;

static void trajectories(const dsReportLog* L, Sys* y) {
  const int np = ds_sysid_nparams(y->s);
  y->traj = (double*)malloc(sizeof(double) * ((size_t)np * L->nrows + 1));
  y->truth = (double*)malloc(sizeof(double) * ((size_t)np + 1));
  const double* t = y->known ? ds_sysid_truth(y->s) : NULL;
  for (int p = 0; p < np && y->traj && y->truth; p++) {
    for (int i = 0; i < L->nrows; i++) y->traj[(size_t)p * L->nrows + i] = param_mean(y->s, p, L->params + (size_t)i * L->np);
    y->truth[p] = t ? param_mean(y->s, p, t) : NAN;
  }
}

/* One plot per parameter of the first rebuilt log: every log's estimate
 * and, dashed in its colour, its true value. */
static void sysid_plots(dsReport* r, FILE* fp, Sys* sys) {
  const dsSysid* ref = NULL;
  for (int k = 0; k < r->nlogs && !ref; k++) ref = sys[k].s;
  for (int p = 0; ref && p < ds_sysid_nparams(ref); p++) {
    const char* pname = ds_sysid_param_name(ref, p);
    dsReportPlot pl;
    memset(&pl, 0, sizeof pl);
    safe_name(pl.name, sizeof pl.name, "sysid_", pname);
    snprintf(pl.title, sizeof pl.title, "%s: estimate and true value", pname);
    snprintf(pl.xlabel, sizeof pl.xlabel, "iteration");
    snprintf(pl.ylabel, sizeof pl.ylabel, "%s", pname);
    pl.logy = -1;
    for (int k = 0, c = 0; k < r->nlogs && pl.nseries + 2 <= DS_REPORT_MAX_SERIES; k++) {
      const Sys* y = &sys[k];
      if (!y->s || !y->traj || p >= ds_sysid_nparams(y->s) || strcmp(ds_sysid_param_name(y->s, p), pname)) continue;
      dsReportSeries* e = &pl.s[pl.nseries++];
      snprintf(e->label, sizeof e->label, "%s", r->logs[k].label);
      e->color = c, e->n = r->logs[k].nrows, e->y = y->traj + (size_t)p * r->logs[k].nrows;
      if (y->known && isfinite(y->truth[p])) {
        dsReportSeries* t = &pl.s[pl.nseries++];
        snprintf(t->label, sizeof t->label, "true value (seed %llu)", (unsigned long long)r->logs[k].s.seed);
        t->style = DS_REPORT_HLINE, t->color = c, t->n = 1, t->y = &y->truth[p];
      }
      c++;
    }
    ds__report_plot(r, fp, &pl);
  }
}

/* The estimates at each log's lowest loss against the truth, as --collect's table. */
static void error_table(const dsReport* r, FILE* fp, const Sys* sys) {
  fprintf(fp, "<h3>Errors</h3>\n<table><tr><th class='l'>log</th><th>seed</th><th class='l'>parameter</th>"
          "<th>true</th><th>estimate</th><th>abs. rel. error</th><th>at iteration</th></tr>\n");
  for (int k = 0; k < r->nlogs; k++) {
    const dsReportLog* L = &r->logs[k];
    const Sys* y = &sys[k];
    if (L->kind != DS_REPORT_SYSID || !y->s || !y->traj || L->nrows < 1) continue;
    int best = 0;
    for (int i = 1; i < L->nrows; i++)
      if (L->loss[i] < L->loss[best]) best = i;
    double are[DS_SYSID_MAX_PARAMS];
    const int have = y->known && !ds_sysid_errors(y->s, L->params + (size_t)best * L->np, are);
    for (int p = 0; p < ds_sysid_nparams(y->s); p++) {
      fprintf(fp, "<tr><td class='l'>");
      ds__report_escape(fp, L->path);
      fprintf(fp, "</td><td>%llu</td><td class='l'>", (unsigned long long)L->s.seed);
      ds__report_escape(fp, ds_sysid_param_name(y->s, p));
      fprintf(fp, "</td>");
      if (y->known)
        fprintf(fp, "<td>%.6g</td>", y->truth[p]);
      else
        fprintf(fp, "<td>-</td>");
      fprintf(fp, "<td>%.6g</td>", y->traj[(size_t)p * L->nrows + best]);
      if (have)
        fprintf(fp, "<td>%.3g</td>", are[p]);
      else
        fprintf(fp, "<td>-</td>");
      fprintf(fp, "<td>%d</td></tr>\n", best);
    }
  }
  fprintf(fp, "</table>\n<p class='note'>The estimate is the mean of a parameter's identified values at the "
          "lowest loss; - where the true values are unknown (footage).</p>\n");
}

void ds__report_sysid(dsReport* r, FILE* fp) {
  fprintf(fp, "<h2 id='sysid'>System identification (<code>dsim sysid</code>)</h2>\n<h3>Loss</h3>\n");
  ds__report_curves(r, fp, DS_REPORT_SYSID, "sysid_");
  Sys* sys = (Sys*)calloc((size_t)r->nlogs, sizeof(Sys));
  if (!sys) return;
  for (int k = 0; k < r->nlogs; k++) {
    const dsReportLog* L = &r->logs[k];
    if (L->kind != DS_REPORT_SYSID) continue;
    if (!L->params || L->nrows < 1)
      snprintf(sys[k].why, sizeof sys[k].why, "%s: no iterations logged", L->path);
    else if ((sys[k].s = rebuild(L, &sys[k].known, sys[k].why, sizeof sys[k].why)))
      trajectories(L, &sys[k]);
  }
  fprintf(fp, "<h3>Parameters</h3>\n");
  for (int k = 0; k < r->nlogs; k++)
    if (r->logs[k].kind == DS_REPORT_SYSID && !sys[k].s) {
      fprintf(fp, "<p class='banner'>No parameter trajectories for this log: ");
      ds__report_escape(fp, sys[k].why);
      fprintf(fp, "</p>\n");
    }
  sysid_plots(r, fp, sys);
  error_table(r, fp, sys);
  for (int k = 0; k < r->nlogs; k++) {
    if (r->logs[k].kind != DS_REPORT_SYSID) continue;
    fprintf(fp, "<h3>");
    ds__report_escape(fp, r->logs[k].label);
    fprintf(fp, "</h3>\n");
    ds__report_episodes(r, fp, &r->logs[k]);
    ds__report_log_details(fp, &r->logs[k]);
    ds_sysid_destroy(sys[k].s);
    free(sys[k].traj);
    free(sys[k].truth);
  }
  free(sys);
}

/* ---- landscape --------------------------------------------------------------- */
/* sysid.param<k+1>'s name and first true value (NaN for footage) from the config. */
static void axis_of(const char* path, const char* config, int k, char* name, size_t n, double* truth) {
  dsSysidDef sd = ds_default_sysid_def();
  char err[512];
  snprintf(name, n, "parameter %d", k + 1);
  *truth = NAN;
  if (ds_sysid_def_from_text(path, config, &sd, err, sizeof err) || k >= ds_sysid_num_params(&sd)) return;
  snprintf(name, n, "%s", sd.params[k].name);
  if (sd.video != DS_SYSID_FRAMES && sd.params[k].ntruth > 0) *truth = (double)sd.params[k].truth[0];
}

static int cmp_double(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

/* The distinct values of column c of the rows (sorted, into out): their count. */
static int distinct(const dsReportLog* L, int c, double* out) {
  int m = 0;
  for (int i = 0; i < L->nrows; i++) out[m++] = L->params[(size_t)i * L->np + c];
  qsort(out, (size_t)m, sizeof(double), cmp_double);
  int u = 0;
  for (int i = 0; i < m; i++)
    if (!u || out[i] != out[u - 1]) out[u++] = out[i];
  return u;
}

/* A grid spaced by a constant ratio (--geometric) rather than a constant step. */
static int geometric(const double* v, int n) {
  if (n < 3 || v[0] <= 0) return 0;
  const double ratio = v[1] / v[0], step = v[1] - v[0];
  return fabs(v[2] / v[1] - ratio) < 1e-6 * ratio && fabs((v[2] - v[1]) - step) > 1e-6 * fabs(step);
}

static int index_of(const double* v, int n, double x) {
  for (int i = 0; i < n; i++)
    if (v[i] == x) return i;
  return -1;
}

static void landscape_plot(dsReport* r, FILE* fp, const dsReportLog* L, int k) {
  const int dims = L->np == 4 ? 2 : 1;
  char n1[96], n2[96];
  double t[2], *xs = (double*)malloc(sizeof(double) * ((size_t)L->nrows + 1)),
               *ys = (double*)malloc(sizeof(double) * ((size_t)L->nrows + 1));
  axis_of(L->path, L->config, 0, n1, sizeof n1, &t[0]);
  axis_of(L->path, L->config, 1, n2, sizeof n2, &t[1]);
  dsReportPlot p;
  memset(&p, 0, sizeof p);
  snprintf(p.name, sizeof p.name, "landscape%d", k);
  snprintf(p.title, sizeof p.title, "Loss landscape%s", dims == 2 ? " (colour: loss)" : "");
  snprintf(p.xlabel, sizeof p.xlabel, "%s", n1);
  snprintf(p.ylabel, sizeof p.ylabel, "%s", dims == 2 ? n2 : "loss");
  double* z = NULL;
  if (xs && ys && dims == 1) {
    for (int i = 0; i < L->nrows; i++) xs[i] = L->params[(size_t)i * L->np];
    p.logx = geometric(xs, L->nrows);
    p.logy = -1;
    p.s[p.nseries++] = (dsReportSeries){"loss", DS_REPORT_LINE, 0, L->nrows, xs, L->loss, NULL};
    if (isfinite(t[0])) p.s[p.nseries++] = (dsReportSeries){"true value", DS_REPORT_VLINE, 2, 1, &t[0], &t[0], NULL};
  } else if (xs && ys) {
    const int nx = distinct(L, 0, xs), ny = distinct(L, 1, ys);
    z = (double*)malloc(sizeof(double) * ((size_t)nx * ny + 1));
    for (int i = 0; z && i < nx * ny; i++) z[i] = NAN; /* points a killed run never reached */
    for (int i = 0; z && i < L->nrows; i++) {
      const int a = index_of(xs, nx, L->params[(size_t)i * L->np]), b = index_of(ys, ny, L->params[(size_t)i * L->np + 1]);
      z[(size_t)b * nx + a] = L->loss[i];
    }
    p.nx = nx, p.ny = ny, p.hx = xs, p.hy = ys, p.hz = z;
    p.logx = geometric(xs, nx), p.logy = geometric(ys, ny);
    if (isfinite(t[0]) && isfinite(t[1])) p.s[p.nseries++] = (dsReportSeries){"true value", DS_REPORT_MARK, 3, 1, &t[0], &t[1], NULL};
  }
  if (xs && ys && (dims == 1 || z)) ds__report_plot(r, fp, &p);
  free(xs);
  free(ys);
  free(z);
}

void ds__report_landscape(dsReport* r, FILE* fp) {
  fprintf(fp, "<h2 id='landscape'>Loss landscapes (<code>dsim landscape</code>)</h2>\n");
  for (int k = 0; k < r->nlogs; k++) {
    const dsReportLog* L = &r->logs[k];
    if (L->kind != DS_REPORT_LANDSCAPE) continue;
    fprintf(fp, "<h3>");
    ds__report_escape(fp, L->label);
    fprintf(fp, "</h3>\n");
    if (!L->params || L->nrows < 1 || (L->np != 2 && L->np != 4))
      fprintf(fp, "<p class='banner'>No grid points in this log (%d rows of %d values; expected 2 or 4).</p>\n",
              L->nrows, L->np);
    else
      landscape_plot(r, fp, L, k);
    fprintf(fp, "<p>%d grid point%s; lowest loss %.6g.</p>\n", L->nrows, L->nrows == 1 ? "" : "s", L->s.best_loss);
    ds__report_log_details(fp, L);
  }
}

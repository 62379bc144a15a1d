/* `dsim report`: what cli/cmd_report.c (reading the logs, the page's
 * sections), cli/report_html.c (HTML, embedded pictures) and
 * cli/report_plot.c (plots as SVG and as RGBA pictures) share. Internal to
 * cli/. */
#ifndef DSIM_CLI_REPORT_H
#define DSIM_CLI_REPORT_H

#include <stdint.h>
#include <stdio.h>

#include "dsim/runlog.h"

/* ---- plots (cli/report_plot.c) ---- */
enum { DS_REPORT_MAX_SERIES = 24 };

enum {
  DS_REPORT_LINE = 0,   /* a polyline through (x, y), broken at non-finite values */
  DS_REPORT_DASHED = 1, /* the same, dashed */
  DS_REPORT_BAND = 2,   /* the area between y (lower) and y2 (upper) */
  DS_REPORT_HLINE = 3,  /* a dashed horizontal line at y[0] (a true value) */
  DS_REPORT_VLINE = 4,  /* a dashed vertical line at x[0] */
  DS_REPORT_MARK = 5    /* a star at (x[0], y[0]) */
};

typedef struct dsReportSeries {
  char label[160];
  int style;        /* DS_REPORT_* */
  int color;        /* index into the palette (cli/report_plot.c) */
  int n;            /* points */
  const double* x;  /* n abscissae; NULL: 0, 1, ..., n - 1 */
  const double* y;  /* n ordinates */
  const double* y2; /* DS_REPORT_BAND: the upper edge */
} dsReportSeries;

/* A line plot, or a heat map when hz is set: hz[j * nx + i] is the value at
 * (hx[i], hy[j]) on an increasing grid, coloured on a log scale when it is
 * positive and spans more than two decades; the series are drawn over it. */
typedef struct dsReportPlot {
  char name[64];    /* [A-Za-z0-9_-]: the PNG's file name and the SVG's id */
  char title[160], xlabel[96], ylabel[96];
  int logy;         /* -1: log scale when every y > 0 and they span more than two decades */
  int logx;         /* 1: log-scale x (a geometric grid) */
  int nseries;
  dsReportSeries s[DS_REPORT_MAX_SERIES];
  int nx, ny;
  const double *hx, *hy, *hz;
} dsReportPlot;

/* The plot as inline <svg> into fp. */
void ds__report_svg(FILE* fp, const dsReportPlot* p);
/* The plot drawn into a new w x h RGBA picture (free()); NULL without memory. */
uint8_t* ds__report_raster(const dsReportPlot* p, int w, int h);
/* A series' colour as "#rrggbb" (palette index). */
const char* ds__report_color(int index);

/* ---- HTML (cli/report_html.c) ---- */
/* text with &, <, >, " escaped */
void ds__report_escape(FILE* fp, const char* text);
/* bytes as base64 */
void ds__report_base64(FILE* fp, const uint8_t* data, size_t n);
/* An RGBA picture as an <img> with a data: PNG URI (libpng through a
 * temporary file in dir); 0 or -1 after printing why (cmd "report"). */
int ds__report_png_img(FILE* fp, const char* dir, const uint8_t* rgba, int w, int h, const char* alt);
/* Frames (nf x h x w x 4) as an animation: an animated GIF as a data: URI
 * when the build has giflib, else the frames as PNG data: URIs stepped by a
 * small inline script. delay_cs: hundredths of a second per frame. */
int ds__report_animation(FILE* fp, const char* dir, const uint8_t* rgba, int nf, int h, int w, int delay_cs,
                         const char* alt);
/* The page's head (title, style) and end. */
void ds__report_head(FILE* fp, const char* title);
void ds__report_tail(FILE* fp);

/* ---- the logs and the page (cli/cmd_report.c, cli/report_sysid.c) ---- */
enum { DS_REPORT_RUN = 0, DS_REPORT_SYSID = 1, DS_REPORT_LANDSCAPE = 2, DS_REPORT_NKINDS = 3 };

/* One log, read whole except its episodes (read when their section is written). */
typedef struct dsReportLog {
  const char* path;
  char label[160];    /* in legends: the file name, its seed, and its env when the envs differ */
  int kind;           /* DS_REPORT_* from /meta's method */
  dsRunSummary s;
  int n;              /* complete iterations */
  double *loss, *metric, *wall, *grad;
  int nrows, np;      /* params: nrows x np (NULL when none) */
  double* params;
  char* config;       /* the resolved config text */
  char build[512], precision[16], end_time[32];
} dsReportLog;

typedef struct dsReport {
  int nlogs;
  dsReportLog* logs;
  const char* out;    /* the page */
  const char* pngdir; /* --png DIR or NULL */
  int force;
  char tmpdir[4096];  /* the page's directory: temporaries for the pictures go there */
  int nplots, npng;
  int status;         /* DS_EXIT_OK, or the exit code of the first failure */
} dsReport;

/* The plot as SVG into fp and, with --png, as DIR/NAME.png. */
void ds__report_plot(dsReport* r, FILE* fp, const dsReportPlot* p);
/* A log's episodes: the goal (a sysid log's: the video's last frame)
 * beside the first, best and last episodes' final frames and animations. */
void ds__report_episodes(dsReport* r, FILE* fp, const dsReportLog* L);
/* A log's machine, build and timing table and its config (collapsed). */
void ds__report_log_details(FILE* fp, const dsReportLog* L);
/* The loss and metric curves of the logs of one kind (a seed sweep as
 * median and band); name prefixes the plots' names. */
void ds__report_curves(dsReport* r, FILE* fp, int kind, const char* name);
/* The sysid section (cli/report_sysid.c): each parameter's estimate
 * against its true value, and the error table. */
void ds__report_sysid(dsReport* r, FILE* fp);
/* The landscape section: the loss along the grid (1-D) or as a heat map. */
void ds__report_landscape(dsReport* r, FILE* fp);

#endif

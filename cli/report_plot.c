/* Plots of `dsim report`: one layout (ranges, log scales, ticks, the plot
 * box) drawn two ways, as inline SVG for the page and into an RGBA picture
 * for --png, so that both show the same axes and ticks.
 *
 * Scales: an axis is logarithmic when asked (logx: a geometric grid) or, for
 * y, when every value is positive and max/min > 100 (two decades): a loss
 * falling from 1 to 1e-6 is a straight-ish line, not a wall and a floor.
 * Linear ticks are the multiples of the step 1, 2 or 5 x 10^k that gives 4
 * to 10 ticks; log ticks are the decades (every k-th when there are more
 * than 8), or linear ticks when the range is under one decade.
 *
 * The page's geometry is in units of a 720 x 360 picture; the PNG scales it
 * (s = width / 720). Text in the PNG uses a 5 x 7 capitals font drawn here
 * (lower case shows as capitals). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/report.h"

#define PW 720.0  /* page units */
#define PH 360.0
#define BOX_L 78.0 /* the plot box */
#define BOX_R 530.0
#define BOX_T 34.0
#define BOX_B 310.0
#define LEGEND_X 545.0
#define MAX_TICKS 24
#define PI 3.14159265358979323846

static const char* const palette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                      "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
enum { NPALETTE = sizeof palette / sizeof palette[0] };

const char* ds__report_color(int index) { return palette[(index % NPALETTE + NPALETTE) % NPALETTE]; }

typedef struct Axis {
  int log;
  int integer; /* iterations: no ticks between whole numbers */
  double lo, hi; /* transformed (log10 when log) */
  int nticks;
  double tick[MAX_TICKS]; /* transformed positions */
  char label[MAX_TICKS][24];
} Axis;

typedef struct Layout {
  Axis x, y;
  int heat, heatlog; /* heat map; its colours on a log scale */
  double zlo, zhi;   /* heat map colour range (transformed) */
} Layout;

static double tr(double v, int lg) { return lg ? log10(v) : v; }

static int usable(double v, int lg) { return isfinite(v) && (!lg || v > 0); }

/* The range of the values a series contributes on one axis. */
static void extend(const dsReportSeries* s, int axis, int lg, double* lo, double* hi) {
  for (int k = 0; k < 2; k++) {
    const double* v = axis ? (k ? s->y2 : s->y) : (k ? NULL : s->x);
    int n = s->n;
    if (axis == 0 && s->style == DS_REPORT_HLINE) continue;
    if (axis == 1 && s->style == DS_REPORT_VLINE) continue;
    if ((axis == 0 && s->style == DS_REPORT_VLINE) || (axis == 1 && s->style == DS_REPORT_HLINE)) n = 1;
    if (axis == 0 && !v) {
      if (k == 0 && s->n > 0) {
        if (0 < *lo) *lo = 0;
        if (s->n - 1 > *hi) *hi = s->n - 1;
      }
      continue;
    }
    for (int i = 0; v && i < n; i++)
      if (usable(v[i], lg)) {
        const double t = tr(v[i], lg);
        if (t < *lo) *lo = t;
        if (t > *hi) *hi = t;
      }
  }
}

/* Every y positive and spanning more than two decades. */
static int wants_log(const dsReportPlot* p) {
  double lo = INFINITY, hi = -INFINITY;
  for (int i = 0; i < p->nseries; i++) {
    const dsReportSeries* s = &p->s[i];
    if (s->style == DS_REPORT_VLINE) continue;
    for (int k = 0; k < 2; k++) {
      const double* v = k ? s->y2 : s->y;
      const int n = s->style == DS_REPORT_HLINE ? 1 : s->n;
      for (int j = 0; v && j < n; j++) {
        if (!isfinite(v[j])) continue;
        if (v[j] <= 0) return 0;
        if (v[j] < lo) lo = v[j];
        if (v[j] > hi) hi = v[j];
      }
    }
  }
  return lo < hi && hi / lo > 100;
}

static void fmt_tick(char* out, size_t n, double v, double step) {
  if (fabs(v) < step * 1e-9) v = 0;
  snprintf(out, n, "%.6g", v);
}

/* Linear ticks in value space over [a, b] (values), placed with lg. */
static void linear_ticks(Axis* ax, double a, double b, int lg) {
  const double span = b - a;
  double step = pow(10, floor(log10(span / 5)));
  static const double mult[] = {1, 2, 5, 10};
  for (int i = 0; i < 4; i++)
    if (span / (step * mult[i]) <= 8) {
      step *= mult[i];
      break;
    }
  if (ax->integer && step < 1) step = 1;
  ax->nticks = 0;
  for (double k = ceil(a / step - 1e-9); k * step <= b + step * 1e-9 && ax->nticks < MAX_TICKS; k++) {
    const double v = k * step;
    if (lg && v <= 0) continue;
    ax->tick[ax->nticks] = tr(v, lg);
    fmt_tick(ax->label[ax->nticks], sizeof ax->label[0], v, step);
    ax->nticks++;
  }
}

static void axis_ticks(Axis* ax) {
  if (ax->log && ax->hi - ax->lo >= 1) {
    const int k0 = (int)ceil(ax->lo - 1e-9), k1 = (int)floor(ax->hi + 1e-9);
    const int every = (k1 - k0) / 8 + 1;
    ax->nticks = 0;
    for (int k = k0; k <= k1 && ax->nticks < MAX_TICKS; k++) {
      if ((k - k0) % every) continue;
      ax->tick[ax->nticks] = k;
      snprintf(ax->label[ax->nticks], sizeof ax->label[0], "1e%d", k);
      if (k >= 0 && k <= 3) snprintf(ax->label[ax->nticks], sizeof ax->label[0], "%g", pow(10, k));
      ax->nticks++;
    }
  } else if (ax->log) {
    linear_ticks(ax, pow(10, ax->lo), pow(10, ax->hi), 1);
  } else {
    linear_ticks(ax, ax->lo, ax->hi, 0);
  }
}

static void layout(const dsReportPlot* p, Layout* L) {
  memset(L, 0, sizeof *L);
  L->heat = p->hz != NULL && p->nx > 0 && p->ny > 0;
  L->x.log = p->logx;
  L->x.integer = !L->heat;
  for (int i = 0; i < p->nseries; i++)
    if (p->s[i].x) L->x.integer = 0;
  L->y.log = p->logy < 0 ? (!L->heat && wants_log(p)) : p->logy;
  double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
  if (L->heat) {
    xlo = tr(p->hx[0], L->x.log), xhi = tr(p->hx[p->nx - 1], L->x.log);
    ylo = tr(p->hy[0], L->y.log), yhi = tr(p->hy[p->ny - 1], L->y.log);
  }
  for (int i = 0; i < p->nseries; i++) {
    extend(&p->s[i], 0, L->x.log, &xlo, &xhi);
    extend(&p->s[i], 1, L->y.log, &ylo, &yhi);
  }
  if (!(xlo <= xhi)) xlo = 0, xhi = 1;
  if (!(ylo <= yhi)) ylo = 0, yhi = 1;
  if (xhi - xlo < 1e-12 * (fabs(xlo) + 1)) xlo -= 0.5 + fabs(xlo) * 0.1, xhi += 0.5 + fabs(xhi) * 0.1;
  if (yhi - ylo < 1e-12 * (fabs(ylo) + 1)) ylo -= 0.5 + fabs(ylo) * 0.1, yhi += 0.5 + fabs(yhi) * 0.1;
  if (L->heat) { /* cells are centred on the grid points: half a cell beyond each end */
    if (p->nx > 1) {
      const double h = (xhi - xlo) / (p->nx - 1) / 2;
      xlo -= h, xhi += h;
    }
    if (p->ny > 1) {
      const double h = (yhi - ylo) / (p->ny - 1) / 2;
      ylo -= h, yhi += h;
    }
  } else {
    const double py = (yhi - ylo) * 0.05;
    ylo -= py, yhi += py;
  }
  L->x.lo = xlo, L->x.hi = xhi, L->y.lo = ylo, L->y.hi = yhi;
  axis_ticks(&L->x);
  axis_ticks(&L->y);
  if (L->heat) {
    double lo = INFINITY, hi = -INFINITY, plo = INFINITY;
    for (int i = 0; i < p->nx * p->ny; i++)
      if (isfinite(p->hz[i])) {
        if (p->hz[i] < lo) lo = p->hz[i];
        if (p->hz[i] > hi) hi = p->hz[i];
        if (p->hz[i] > 0 && p->hz[i] < plo) plo = p->hz[i];
      }
    /* a minimum of exactly 0 (the truth on the grid) is shown at the smallest positive value */
    L->heatlog = lo >= 0 && plo < hi && hi / plo > 100;
    if (L->heatlog) lo = plo;
    if (!(lo <= hi)) lo = 0, hi = 1;
    L->zlo = tr(lo, L->heatlog), L->zhi = tr(hi, L->heatlog);
    if (L->zhi <= L->zlo) L->zhi = L->zlo + 1;
  }
}

static double px(const Layout* L, double t) { return BOX_L + (t - L->x.lo) / (L->x.hi - L->x.lo) * (BOX_R - BOX_L); }
static double py(const Layout* L, double t) { return BOX_B - (t - L->y.lo) / (L->y.hi - L->y.lo) * (BOX_B - BOX_T); }

/* The heat map's colour of z (viridis, interpolated between five of its stops). */
static void heat_rgb(const Layout* L, double z, uint8_t rgb[3]) {
  static const uint8_t stops[5][3] = {{68, 1, 84}, {59, 82, 139}, {33, 145, 140}, {94, 201, 98}, {253, 231, 37}};
  if (!isfinite(z)) {
    rgb[0] = rgb[1] = rgb[2] = 200;
    return;
  }
  double t = L->heatlog ? (z > 0 ? log10(z) : L->zlo) : z;
  t = (t - L->zlo) / (L->zhi - L->zlo);
  t = t < 0 ? 0 : t > 1 ? 1 : t;
  const int k = t >= 1 ? 3 : (int)(t * 4);
  const double f = t * 4 - k;
  for (int c = 0; c < 3; c++) rgb[c] = (uint8_t)lround(stops[k][c] + f * (stops[k + 1][c] - stops[k][c]));
}

/* A series' i-th point in page units; 0 when it is not drawable. */
static int point(const Layout* L, const dsReportSeries* s, const double* y, int i, double* X, double* Y) {
  const double xv = s->x ? s->x[i] : i;
  if (!usable(xv, L->x.log) || !usable(y[i], L->y.log)) return 0;
  *X = px(L, tr(xv, L->x.log));
  *Y = py(L, tr(y[i], L->y.log));
  return 1;
}

/* ---- SVG ------------------------------------------------------------------ */
static void svg_series(FILE* fp, const Layout* L, const dsReportSeries* s) {
  const char* col = ds__report_color(s->color);
  double X, Y;
  if (s->style == DS_REPORT_HLINE || s->style == DS_REPORT_VLINE) {
    if (s->n < 1) return;
    const int h = s->style == DS_REPORT_HLINE;
    const double v = h ? s->y[0] : s->x[0];
    if (!usable(v, h ? L->y.log : L->x.log)) return;
    const double c = h ? py(L, tr(v, L->y.log)) : px(L, tr(v, L->x.log));
    if (h)
      fprintf(fp, "<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f'", BOX_L, c, BOX_R, c);
    else
      fprintf(fp, "<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f'", c, BOX_T, c, BOX_B);
    fprintf(fp, " stroke='%s' stroke-width='2' stroke-dasharray='6 4'/>\n", col);
    return;
  }
  if (s->style == DS_REPORT_MARK) {
    if (s->n >= 1 && point(L, s, s->y, 0, &X, &Y))
      fprintf(fp, "<text x='%.1f' y='%.1f' font-size='22' text-anchor='middle' fill='%s' stroke='white' "
              "stroke-width='0.8'>&#9733;</text>\n", X, Y + 8, col);
    return;
  }
  if (s->style == DS_REPORT_BAND) {
    fprintf(fp, "<path fill='%s' fill-opacity='0.2' stroke='none' d='", col);
    int open = 0;
    for (int i = 0; i < s->n; i++) { /* each unbroken run as one closed outline */
      const int ok = point(L, s, s->y, i, &X, &Y) && point(L, s, s->y2, i, &X, &Y);
      if (ok && !open) open = i + 1;
      if ((!ok || i == s->n - 1) && open) {
        const int a = open - 1, b = ok ? i : i - 1;
        for (int j = a; j <= b; j++) {
          point(L, s, s->y, j, &X, &Y);
          fprintf(fp, "%s%.1f %.1f", j == a ? "M" : " L", X, Y);
        }
        for (int j = b; j >= a; j--) {
          point(L, s, s->y2, j, &X, &Y);
          fprintf(fp, " L%.1f %.1f", X, Y);
        }
        fprintf(fp, " Z ");
        open = 0;
      }
    }
    fprintf(fp, "'/>\n");
    return;
  }
  fprintf(fp, "<path fill='none' stroke='%s' stroke-width='%s' stroke-linejoin='round'%s d='", col,
          s->style == DS_REPORT_DASHED ? "2" : "1.6", s->style == DS_REPORT_DASHED ? " stroke-dasharray='5 3'" : "");
  int pen = 0, drawn = 0;
  for (int i = 0; i < s->n; i++) {
    if (!point(L, s, s->y, i, &X, &Y)) {
      pen = 0;
      continue;
    }
    fprintf(fp, "%s%.1f %.1f", pen ? " L" : (drawn ? " M" : "M"), X, Y);
    pen = drawn = 1;
  }
  if (!drawn) fprintf(fp, "M0 0");
  fprintf(fp, "'/>\n");
  if (s->n == 1 && point(L, s, s->y, 0, &X, &Y)) /* a lone point is a dot */
    fprintf(fp, "<circle cx='%.1f' cy='%.1f' r='3' fill='%s'/>\n", X, Y, col);
}

static void svg_heat(FILE* fp, const dsReportPlot* p, const Layout* L) {
  for (int j = 0; j < p->ny; j++)
    for (int i = 0; i < p->nx; i++) {
      /* the cell reaches halfway to each neighbour (in the axis' scale) */
      const double xc = tr(p->hx[i], L->x.log), yc = tr(p->hy[j], L->y.log);
      const double xa = i ? (xc + tr(p->hx[i - 1], L->x.log)) / 2 : L->x.lo;
      const double xb = i < p->nx - 1 ? (xc + tr(p->hx[i + 1], L->x.log)) / 2 : L->x.hi;
      const double ya = j ? (yc + tr(p->hy[j - 1], L->y.log)) / 2 : L->y.lo;
      const double yb = j < p->ny - 1 ? (yc + tr(p->hy[j + 1], L->y.log)) / 2 : L->y.hi;
      uint8_t c[3];
      heat_rgb(L, p->hz[(size_t)j * p->nx + i], c);
      fprintf(fp, "<rect x='%.1f' y='%.1f' width='%.1f' height='%.1f' fill='#%02x%02x%02x'><title>%.6g, %.6g: %.6g</title></rect>\n",
              px(L, xa), py(L, yb), px(L, xb) - px(L, xa) + 0.3, py(L, ya) - py(L, yb) + 0.3, c[0], c[1], c[2], p->hx[i],
              p->hy[j], p->hz[(size_t)j * p->nx + i]);
    }
  /* the colour bar, with its ends labelled */
  for (int k = 0; k < 50; k++) {
    const double t = L->zlo + (L->zhi - L->zlo) * (k + 0.5) / 50;
    uint8_t c[3];
    heat_rgb(L, L->heatlog ? pow(10, t) : t, c);
    fprintf(fp, "<rect x='%.1f' y='%.1f' width='16' height='%.2f' fill='#%02x%02x%02x'/>\n", LEGEND_X,
            BOX_B - (k + 1) * (BOX_B - BOX_T) / 50, (BOX_B - BOX_T) / 50 + 0.3, c[0], c[1], c[2]);
  }
  fprintf(fp, "<text x='%.1f' y='%.1f' font-size='12'>%.3g</text>\n", LEGEND_X + 22, BOX_T + 10,
          L->heatlog ? pow(10, L->zhi) : L->zhi);
  fprintf(fp, "<text x='%.1f' y='%.1f' font-size='12'>%.3g</text>\n", LEGEND_X + 22, BOX_B,
          L->heatlog ? pow(10, L->zlo) : L->zlo);
  fprintf(fp, "<text x='%.1f' y='%.1f' font-size='12'>%s</text>\n", LEGEND_X + 22, (BOX_T + BOX_B) / 2,
          L->heatlog ? "loss (log)" : "loss");
}

static void svg_axes(FILE* fp, const dsReportPlot* p, const Layout* L) {
  fprintf(fp, "<rect x='%.0f' y='%.0f' width='%.0f' height='%.0f' fill='none' stroke='#333'/>\n", BOX_L, BOX_T,
          BOX_R - BOX_L, BOX_B - BOX_T);
  for (int i = 0; i < L->x.nticks; i++) {
    const double X = px(L, L->x.tick[i]);
    fprintf(fp, "<line x1='%.1f' y1='%.0f' x2='%.1f' y2='%.0f' stroke='#333'/>", X, BOX_B, X, BOX_B + 5);
    fprintf(fp, "<text x='%.1f' y='%.0f' font-size='12' text-anchor='middle'>%s</text>\n", X, BOX_B + 18,
            L->x.label[i]);
  }
  for (int i = 0; i < L->y.nticks; i++) {
    const double Y = py(L, L->y.tick[i]);
    if (!L->heat)
      fprintf(fp, "<line x1='%.0f' y1='%.1f' x2='%.0f' y2='%.1f' stroke='#ddd'/>", BOX_L, Y, BOX_R, Y);
    fprintf(fp, "<line x1='%.0f' y1='%.1f' x2='%.0f' y2='%.1f' stroke='#333'/>", BOX_L - 5, Y, BOX_L, Y);
    fprintf(fp, "<text x='%.0f' y='%.1f' font-size='12' text-anchor='end'>%s</text>\n", BOX_L - 8, Y + 4,
            L->y.label[i]);
  }
  fprintf(fp, "<text x='%.0f' y='20' font-size='14' font-weight='bold'>", BOX_L);
  ds__report_escape(fp, p->title);
  fprintf(fp, "</text>\n<text x='%.0f' y='%.0f' font-size='13' text-anchor='middle'>", (BOX_L + BOX_R) / 2, PH - 10);
  ds__report_escape(fp, p->xlabel);
  fprintf(fp, "%s</text>\n", L->x.log ? " (log scale)" : "");
  fprintf(fp, "<text x='16' y='%.0f' font-size='13' text-anchor='middle' transform='rotate(-90 16 %.0f)'>",
          (BOX_T + BOX_B) / 2, (BOX_T + BOX_B) / 2);
  ds__report_escape(fp, p->ylabel);
  fprintf(fp, "%s</text>\n", L->y.log ? " (log scale)" : "");
}

static void svg_legend(FILE* fp, const dsReportPlot* p) {
  double Y = BOX_T + 8;
  for (int i = 0; i < p->nseries && Y < PH - 10; i++) {
    const dsReportSeries* s = &p->s[i];
    if (!s->label[0]) continue;
    const char* col = ds__report_color(s->color);
    if (s->style == DS_REPORT_BAND)
      fprintf(fp, "<rect x='%.0f' y='%.0f' width='22' height='10' fill='%s' fill-opacity='0.25'/>", LEGEND_X, Y - 5,
              col);
    else if (s->style == DS_REPORT_MARK)
      fprintf(fp, "<text x='%.0f' y='%.0f' font-size='14' fill='%s'>&#9733;</text>", LEGEND_X + 4, Y + 5, col);
    else
      fprintf(fp, "<line x1='%.0f' y1='%.0f' x2='%.0f' y2='%.0f' stroke='%s' stroke-width='2'%s/>", LEGEND_X, Y,
              LEGEND_X + 22, Y, col, s->style == DS_REPORT_LINE ? "" : " stroke-dasharray='5 3'");
    fprintf(fp, "<text x='%.0f' y='%.0f' font-size='12'>", LEGEND_X + 28, Y + 4);
    ds__report_escape(fp, s->label);
    fprintf(fp, "</text>\n");
    Y += 17;
  }
}

void ds__report_svg(FILE* fp, const dsReportPlot* p) {
  Layout L;
  layout(p, &L);
  fprintf(fp, "<svg id='plot-%s' class='plot' viewBox='0 0 %.0f %.0f' "
          "width='%.0f' height='%.0f' role='img' font-family='sans-serif'>\n", p->name, PW, PH, PW, PH);
  fprintf(fp, "<rect width='100%%' height='100%%' fill='white'/>\n");
  if (L.heat) svg_heat(fp, p, &L);
  fprintf(fp, "<svg x='%.0f' y='%.0f' width='%.0f' height='%.0f' viewBox='%.0f %.0f %.0f %.0f' overflow='hidden'>\n",
          BOX_L, BOX_T, BOX_R - BOX_L, BOX_B - BOX_T, BOX_L, BOX_T, BOX_R - BOX_L, BOX_B - BOX_T);
  for (int i = 0; i < p->nseries; i++) svg_series(fp, &L, &p->s[i]);
  fprintf(fp, "</svg>\n");
  svg_axes(fp, p, &L);
  if (!L.heat) svg_legend(fp, p);
  fprintf(fp, "</svg>\n");
}

/* ---- RGBA picture ---------------------------------------------------------- */
typedef struct Canvas {
  uint8_t* px;
  int w, h;
  double s; /* pixels per page unit */
} Canvas;

static void blend(Canvas* c, int x, int y, const uint8_t rgb[3], double a) {
  if (x < 0 || y < 0 || x >= c->w || y >= c->h) return;
  uint8_t* q = c->px + ((size_t)y * c->w + x) * 4;
  for (int k = 0; k < 3; k++) q[k] = (uint8_t)lround(q[k] * (1 - a) + rgb[k] * a);
}

static void hex_rgb(const char* hex, uint8_t rgb[3]) {
  unsigned v = (unsigned)strtoul(hex + 1, NULL, 16);
  rgb[0] = (uint8_t)(v >> 16), rgb[1] = (uint8_t)(v >> 8), rgb[2] = (uint8_t)v;
}

/* A filled rectangle in page units. */
static void fill_rect(Canvas* c, double x0, double y0, double x1, double y1, const uint8_t rgb[3], double a) {
  const int i0 = (int)lround(x0 * c->s), i1 = (int)lround(x1 * c->s), j0 = (int)lround(y0 * c->s),
            j1 = (int)lround(y1 * c->s);
  for (int j = j0; j < j1; j++)
    for (int i = i0; i < i1; i++) blend(c, i, j, rgb, a);
}

/* A line of width wd page units, dashed every dash units when dash > 0
 * (phase carries on across calls), clipped to the plot box when clip. */
static void draw_line(Canvas* c, double x0, double y0, double x1, double y1, double wd, const uint8_t rgb[3],
                      double dash, double* phase, int clip) {
  const double len = hypot(x1 - x0, y1 - y0);
  const int steps = (int)ceil(len * c->s * 2) + 1;
  const int r = (int)ceil(wd * c->s / 2);
  for (int k = 0; k <= steps; k++) {
    const double t = (double)k / steps, X = x0 + t * (x1 - x0), Y = y0 + t * (y1 - y0);
    if (dash > 0 && fmod(*phase + t * len, 2 * dash) >= dash) continue;
    if (clip && (X < BOX_L || X > BOX_R || Y < BOX_T || Y > BOX_B)) continue;
    const int ci = (int)lround(X * c->s), cj = (int)lround(Y * c->s);
    for (int dj = -r + 1; dj <= r - 1 || dj == 0; dj++)
      for (int di = -r + 1; di <= r - 1 || di == 0; di++) blend(c, ci + di, cj + dj, rgb, 1);
  }
  if (phase) *phase += len;
}

/* The 5 x 7 font: rows top to bottom, bit 4 the left column. */
typedef struct Glyph {
  char c;
  uint8_t rows[7];
} Glyph;
static const Glyph font[] = {
    {'0', {14, 17, 19, 21, 25, 17, 14}}, {'1', {4, 12, 4, 4, 4, 4, 14}},     {'2', {14, 17, 1, 2, 4, 8, 31}},
    {'3', {31, 2, 4, 2, 1, 17, 14}},     {'4', {2, 6, 10, 18, 31, 2, 2}},    {'5', {31, 16, 30, 1, 1, 17, 14}},
    {'6', {6, 8, 16, 30, 17, 17, 14}},   {'7', {31, 1, 2, 4, 8, 8, 8}},      {'8', {14, 17, 17, 14, 17, 17, 14}},
    {'9', {14, 17, 17, 15, 1, 2, 12}},   {'A', {14, 17, 17, 31, 17, 17, 17}}, {'B', {30, 17, 17, 30, 17, 17, 30}},
    {'C', {14, 17, 16, 16, 16, 17, 14}}, {'D', {28, 18, 17, 17, 17, 18, 28}}, {'E', {31, 16, 16, 30, 16, 16, 31}},
    {'F', {31, 16, 16, 30, 16, 16, 16}}, {'G', {14, 17, 16, 23, 17, 17, 15}}, {'H', {17, 17, 17, 31, 17, 17, 17}},
    {'I', {14, 4, 4, 4, 4, 4, 14}},      {'J', {7, 2, 2, 2, 2, 18, 12}},     {'K', {17, 18, 20, 24, 20, 18, 17}},
    {'L', {16, 16, 16, 16, 16, 16, 31}}, {'M', {17, 27, 21, 21, 17, 17, 17}}, {'N', {17, 17, 25, 21, 19, 17, 17}},
    {'O', {14, 17, 17, 17, 17, 17, 14}}, {'P', {30, 17, 17, 30, 16, 16, 16}}, {'Q', {14, 17, 17, 17, 21, 18, 13}},
    {'R', {30, 17, 17, 30, 20, 18, 17}}, {'S', {15, 16, 16, 14, 1, 1, 30}},   {'T', {31, 4, 4, 4, 4, 4, 4}},
    {'U', {17, 17, 17, 17, 17, 17, 14}}, {'V', {17, 17, 17, 17, 17, 10, 4}},  {'W', {17, 17, 17, 21, 21, 21, 10}},
    {'X', {17, 17, 10, 4, 10, 17, 17}},  {'Y', {17, 17, 10, 4, 4, 4, 4}},     {'Z', {31, 1, 2, 4, 8, 16, 31}},
    {'.', {0, 0, 0, 0, 0, 12, 12}},      {'-', {0, 0, 0, 31, 0, 0, 0}},      {'+', {0, 4, 4, 31, 4, 4, 0}},
    {'(', {2, 4, 8, 8, 8, 4, 2}},        {')', {8, 4, 2, 2, 2, 4, 8}},       {'/', {1, 1, 2, 4, 8, 16, 16}},
    {',', {0, 0, 0, 0, 12, 4, 8}},       {':', {0, 12, 12, 0, 12, 12, 0}},   {'_', {0, 0, 0, 0, 0, 0, 31}},
    {'=', {0, 0, 31, 0, 31, 0, 0}},      {'%', {24, 25, 2, 4, 8, 19, 3}},    {'[', {14, 8, 8, 8, 8, 8, 14}},
    {']', {14, 2, 2, 2, 2, 2, 14}},      {'*', {0, 4, 21, 14, 21, 4, 0}},    {'^', {4, 10, 17, 0, 0, 0, 0}},
    {'#', {10, 10, 31, 10, 31, 10, 10}}, {'\'', {4, 4, 8, 0, 0, 0, 0}},      {'<', {2, 4, 8, 16, 8, 4, 2}},
    {'>', {8, 4, 2, 1, 2, 4, 8}},        {'?', {14, 17, 1, 2, 4, 0, 4}},     {'!', {4, 4, 4, 4, 4, 0, 4}},
};
enum { NGLYPHS = sizeof font / sizeof font[0] };
#define GLYPH_ADVANCE 6.0 /* font pixels per character */

/* Text of height 7 x scale page units at (x, baseline y); align -1 left, 0
 * centre, 1 right; vertical: written bottom to top. */
static void draw_text(Canvas* c, double x, double y, const char* text, double scale, int align, int vertical,
                      const uint8_t rgb[3]) {
  const size_t n = strlen(text);
  const double width = (n * GLYPH_ADVANCE - 1) * scale;
  const double start = align < 0 ? 0 : align == 0 ? -width / 2 : -width;
  const double u = scale * c->s; /* device pixels per font pixel */
  for (size_t k = 0; k < n; k++) {
    char ch = text[k];
    if (ch >= 'a' && ch <= 'z') ch = (char)(ch - 'a' + 'A');
    const Glyph* g = NULL;
    for (int i = 0; i < NGLYPHS && !g; i++)
      if (font[i].c == ch) g = &font[i];
    if (!g) continue; /* a space, or a character the font lacks */
    for (int r = 0; r < 7; r++)
      for (int col = 0; col < 5; col++) {
        if (!(g->rows[r] >> (4 - col) & 1)) continue;
        const double along = start + (k * GLYPH_ADVANCE + col) * scale, across = (r - 7) * scale;
        const double X = vertical ? x + across : x + along, Y = vertical ? y - along : y + across;
        const int i0 = (int)lround(X * c->s), j0 = (int)lround(Y * c->s);
        const int di = (int)lround(u) > 0 ? (int)lround(u) : 1;
        for (int j = 0; j < di; j++)
          for (int i = 0; i < di; i++) blend(c, i0 + i, j0 + j, rgb, 1);
      }
  }
}

static void raster_series(Canvas* c, const Layout* L, const dsReportSeries* s) {
  uint8_t rgb[3];
  hex_rgb(ds__report_color(s->color), rgb);
  double X0, Y0, X1, Y1, phase = 0;
  if ((s->style == DS_REPORT_HLINE || s->style == DS_REPORT_VLINE) && s->n >= 1) {
    const int h = s->style == DS_REPORT_HLINE;
    const double v = h ? s->y[0] : s->x[0];
    if (!usable(v, h ? L->y.log : L->x.log)) return;
    const double k = h ? py(L, tr(v, L->y.log)) : px(L, tr(v, L->x.log));
    if (h)
      draw_line(c, BOX_L, k, BOX_R, k, 2, rgb, 5, &phase, 1);
    else
      draw_line(c, k, BOX_T, k, BOX_B, 2, rgb, 5, &phase, 1);
  } else if (s->style == DS_REPORT_MARK && s->n >= 1) {
    if (point(L, s, s->y, 0, &X0, &Y0))
      for (int k = 0; k < 5; k++) { /* a five-pointed star's strokes */
        const double a = PI / 2 + k * 4 * PI / 5, b = a + 4 * PI / 5;
        draw_line(c, X0 + 9 * cos(a), Y0 - 9 * sin(a), X0 + 9 * cos(b), Y0 - 9 * sin(b), 2, rgb, 0, NULL, 1);
      }
  } else if (s->style == DS_REPORT_BAND) {
    for (int i = 0; i + 1 < s->n; i++) { /* each column between two points, from lower to upper edge */
      double a0, b0, a1, b1;
      if (!point(L, s, s->y, i, &X0, &a0) || !point(L, s, s->y2, i, &X0, &b0) || !point(L, s, s->y, i + 1, &X1, &a1) ||
          !point(L, s, s->y2, i + 1, &X1, &b1))
        continue;
      for (int ci = (int)ceil(X0 * c->s); ci < (int)ceil(X1 * c->s); ci++) {
        const double t = (ci / c->s - X0) / (X1 - X0), lo = a0 + t * (a1 - a0), hi = b0 + t * (b1 - b0);
        for (int cj = (int)lround(fmin(lo, hi) * c->s); cj <= (int)lround(fmax(lo, hi) * c->s); cj++) blend(c, ci, cj, rgb, 0.2);
      }
    }
  } else {
    const double wd = s->style == DS_REPORT_DASHED ? 2 : 1.6, dash = s->style == DS_REPORT_DASHED ? 4 : 0;
    for (int i = 0; i + 1 < s->n; i++)
      if (point(L, s, s->y, i, &X0, &Y0) && point(L, s, s->y, i + 1, &X1, &Y1))
        draw_line(c, X0, Y0, X1, Y1, wd, rgb, dash, &phase, 1);
    if (s->n == 1 && point(L, s, s->y, 0, &X0, &Y0)) fill_rect(c, X0 - 3, Y0 - 3, X0 + 3, Y0 + 3, rgb, 1);
  }
}

static void raster_axes(Canvas* c, const dsReportPlot* p, const Layout* L) {
  static const uint8_t ink[3] = {51, 51, 51}, grid[3] = {221, 221, 221};
  for (int i = 0; i < L->y.nticks && !L->heat; i++)
    draw_line(c, BOX_L, py(L, L->y.tick[i]), BOX_R, py(L, L->y.tick[i]), 1, grid, 0, NULL, 0);
  draw_line(c, BOX_L, BOX_T, BOX_R, BOX_T, 1, ink, 0, NULL, 0);
  draw_line(c, BOX_L, BOX_B, BOX_R, BOX_B, 1, ink, 0, NULL, 0);
  draw_line(c, BOX_L, BOX_T, BOX_L, BOX_B, 1, ink, 0, NULL, 0);
  draw_line(c, BOX_R, BOX_T, BOX_R, BOX_B, 1, ink, 0, NULL, 0);
  for (int i = 0; i < L->x.nticks; i++) {
    const double X = px(L, L->x.tick[i]);
    draw_line(c, X, BOX_B, X, BOX_B + 5, 1, ink, 0, NULL, 0);
    draw_text(c, X, BOX_B + 17, L->x.label[i], 1.4, 0, 0, ink);
  }
  for (int i = 0; i < L->y.nticks; i++) {
    const double Y = py(L, L->y.tick[i]);
    draw_line(c, BOX_L - 5, Y, BOX_L, Y, 1, ink, 0, NULL, 0);
    draw_text(c, BOX_L - 8, Y + 5, L->y.label[i], 1.4, 1, 0, ink);
  }
  char buf[200];
  draw_text(c, BOX_L, 22, p->title, 1.6, -1, 0, ink);
  snprintf(buf, sizeof buf, "%s%s", p->xlabel, L->x.log ? " (log scale)" : "");
  draw_text(c, (BOX_L + BOX_R) / 2, PH - 8, buf, 1.4, 0, 0, ink);
  snprintf(buf, sizeof buf, "%s%s", p->ylabel, L->y.log ? " (log scale)" : "");
  draw_text(c, 20, (BOX_T + BOX_B) / 2, buf, 1.4, 0, 1, ink);
}

static void raster_legend(Canvas* c, const dsReportPlot* p, const Layout* L) {
  static const uint8_t ink[3] = {51, 51, 51};
  if (L->heat) {
    for (int k = 0; k < 50; k++) {
      const double t = L->zlo + (L->zhi - L->zlo) * (k + 0.5) / 50;
      uint8_t rgb[3];
      heat_rgb(L, L->heatlog ? pow(10, t) : t, rgb);
      fill_rect(c, LEGEND_X, BOX_B - (k + 1) * (BOX_B - BOX_T) / 50, LEGEND_X + 16, BOX_B - k * (BOX_B - BOX_T) / 50,
                rgb, 1);
    }
    char buf[32];
    snprintf(buf, sizeof buf, "%.3g", L->heatlog ? pow(10, L->zhi) : L->zhi);
    draw_text(c, LEGEND_X + 22, BOX_T + 10, buf, 1.4, -1, 0, ink);
    snprintf(buf, sizeof buf, "%.3g", L->heatlog ? pow(10, L->zlo) : L->zlo);
    draw_text(c, LEGEND_X + 22, BOX_B, buf, 1.4, -1, 0, ink);
    draw_text(c, LEGEND_X + 22, (BOX_T + BOX_B) / 2, L->heatlog ? "loss (log)" : "loss", 1.4, -1, 0, ink);
    return;
  }
  double Y = BOX_T + 8;
  for (int i = 0; i < p->nseries && Y < PH - 10; i++) {
    const dsReportSeries* s = &p->s[i];
    if (!s->label[0]) continue;
    uint8_t rgb[3];
    hex_rgb(ds__report_color(s->color), rgb);
    double phase = 0;
    if (s->style == DS_REPORT_BAND)
      fill_rect(c, LEGEND_X, Y - 5, LEGEND_X + 22, Y + 5, rgb, 0.25);
    else
      draw_line(c, LEGEND_X, Y, LEGEND_X + 22, Y, 2, rgb, s->style == DS_REPORT_LINE ? 0 : 4, &phase, 0);
    char buf[30];
    snprintf(buf, sizeof buf, "%s", s->label); /* what fits beside the plot */
    draw_text(c, LEGEND_X + 28, Y + 4, buf, 1.1, -1, 0, ink);
    Y += 17;
  }
}

uint8_t* ds__report_raster(const dsReportPlot* p, int w, int h) {
  Canvas c = {(uint8_t*)malloc((size_t)w * h * 4), w, h, w / PW};
  if (!c.px) return NULL;
  memset(c.px, 255, (size_t)w * h * 4);
  Layout L;
  layout(p, &L);
  if (L.heat)
    for (int j = 0; j < p->ny; j++)
      for (int i = 0; i < p->nx; i++) {
        const double xc = tr(p->hx[i], L.x.log), yc = tr(p->hy[j], L.y.log);
        const double xa = i ? (xc + tr(p->hx[i - 1], L.x.log)) / 2 : L.x.lo;
        const double xb = i < p->nx - 1 ? (xc + tr(p->hx[i + 1], L.x.log)) / 2 : L.x.hi;
        const double ya = j ? (yc + tr(p->hy[j - 1], L.y.log)) / 2 : L.y.lo;
        const double yb = j < p->ny - 1 ? (yc + tr(p->hy[j + 1], L.y.log)) / 2 : L.y.hi;
        uint8_t rgb[3];
        heat_rgb(&L, p->hz[(size_t)j * p->nx + i], rgb);
        fill_rect(&c, px(&L, xa), py(&L, yb), px(&L, xb), py(&L, ya), rgb, 1);
      }
  for (int i = 0; i < p->nseries; i++) raster_series(&c, &L, &p->s[i]);
  raster_axes(&c, p, &L);
  raster_legend(&c, p, &L);
  return c.px;
}

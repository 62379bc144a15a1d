/* L-BFGS (Nocedal & Wright, Numerical Optimization, Alg. 7.4 and 7.5) with a
 * projected backtracking Armijo line search; the formulas are in
 * dsim/sysid.h. */
#include "config.h"

#include <math.h>
#include <string.h>

#include "dsim/sysid.h"
#include "base/internal.h"

struct dsLbfgs {
  dsLbfgsDef def;
  int n, k, head; /* pairs stored (<= memory), index of the newest */
  double *s, *y, *rho, *alpha; /* memory x n, memory x n, memory, memory */
  double *d, *xt, *gt;         /* direction, trial point, trial gradient */
  double *lo, *hi;             /* bounds (NULL: none) */
  double* gf;                  /* gradient with the active bounds' components zeroed */
};

dsLbfgsDef ds_default_lbfgs_def(void) {
  dsLbfgsDef d;
  d.memory = 8;
  d.c1 = 1e-4;
  d.max_linesearch = 30;
  d.step0 = 1;
  return d;
}

void ds_lbfgs_destroy(dsLbfgs* o) {
  if (!o) return;
  ds__free(o->s);
  ds__free(o->y);
  ds__free(o->rho);
  ds__free(o->alpha);
  ds__free(o->d);
  ds__free(o->xt);
  ds__free(o->gt);
  ds__free(o->gf);
  ds__free(o->lo);
  ds__free(o->hi);
  ds__free(o);
}

int ds_lbfgs_create(const dsLbfgsDef* def, int n, dsLbfgs** out) {
  if (!def || !out || n < 1) return DS_ERR_INVALID;
  *out = NULL;
  if (def->memory < 1 || !(def->c1 > 0 && def->c1 < 1) || def->max_linesearch < 1 || !(def->step0 > 0)) return DS_ERR_RANGE;
  dsLbfgs* o = (dsLbfgs*)ds__calloc(1, sizeof *o);
  if (!o) return DS_ERR_NOMEM;
  o->def = *def;
  o->n = n;
  const size_t mn = (size_t)def->memory * (size_t)n;
  o->s = (double*)ds__calloc(mn, sizeof(double));
  o->y = (double*)ds__calloc(mn, sizeof(double));
  o->rho = (double*)ds__calloc((size_t)def->memory, sizeof(double));
  o->alpha = (double*)ds__calloc((size_t)def->memory, sizeof(double));
  o->d = (double*)ds__calloc((size_t)n, sizeof(double));
  o->xt = (double*)ds__calloc((size_t)n, sizeof(double));
  o->gt = (double*)ds__calloc((size_t)n, sizeof(double));
  o->gf = (double*)ds__calloc((size_t)n, sizeof(double));
  if (!o->s || !o->y || !o->rho || !o->alpha || !o->d || !o->xt || !o->gt || !o->gf) {
    ds_lbfgs_destroy(o);
    return DS_ERR_NOMEM;
  }
  *out = o;
  return DS_OK;
}

int ds_lbfgs_set_bounds(dsLbfgs* o, const double* lo, const double* hi) {
  if (!o) return DS_ERR_INVALID;
  ds__free(o->lo);
  ds__free(o->hi);
  o->lo = o->hi = NULL;
  if (!lo || !hi) return DS_OK;
  o->lo = (double*)ds__malloc((size_t)o->n * sizeof(double));
  o->hi = (double*)ds__malloc((size_t)o->n * sizeof(double));
  if (!o->lo || !o->hi) return DS_ERR_NOMEM;
  memcpy(o->lo, lo, (size_t)o->n * sizeof(double));
  memcpy(o->hi, hi, (size_t)o->n * sizeof(double));
  return DS_OK;
}

static double dot(const double* a, const double* b, int n) {
  double r = 0;
  for (int i = 0; i < n; i++) r += a[i] * b[i];
  return r;
}

/* d = -H g by the two-loop recursion; 0 when no pair is stored yet */
static int direction(dsLbfgs* o, const double* g) {
  const int n = o->n, m = o->def.memory;
  for (int i = 0; i < n; i++) o->d[i] = -g[i];
  if (o->k == 0) {
    const double gn = sqrt(dot(g, g, n));
    if (gn > 0)
      for (int i = 0; i < n; i++) o->d[i] *= o->def.step0 / gn;
    return 0;
  }
  for (int j = 0; j < o->k; j++) { /* newest to oldest */
    const int q = ((o->head - j) % m + m) % m;
    o->alpha[q] = o->rho[q] * dot(o->s + (size_t)q * n, o->d, n);
    for (int i = 0; i < n; i++) o->d[i] -= o->alpha[q] * o->y[(size_t)q * n + i];
  }
  const double* sn = o->s + (size_t)o->head * n;
  const double* yn = o->y + (size_t)o->head * n;
  const double gamma = dot(sn, yn, n) / dot(yn, yn, n);
  for (int i = 0; i < n; i++) o->d[i] *= gamma;
  for (int j = o->k - 1; j >= 0; j--) { /* oldest to newest */
    const int q = ((o->head - j) % m + m) % m;
    const double beta = o->rho[q] * dot(o->y + (size_t)q * n, o->d, n);
    for (int i = 0; i < n; i++) o->d[i] += (o->alpha[q] - beta) * o->s[(size_t)q * n + i];
  }
  return 1;
}

int ds_lbfgs_step(dsLbfgs* o, double* x, double* f, double* g, dsObjectiveFn fn, void* user, int* nevals) {
  if (nevals) *nevals = 0;
  if (!o || !x || !f || !g || !fn) return DS_ERR_INVALID;
  const int n = o->n;
  /* variables held at a bound by their gradient stay out of the direction */
  for (int i = 0; i < n; i++) {
    const int act = (o->lo && x[i] <= o->lo[i] && g[i] > 0) || (o->hi && x[i] >= o->hi[i] && g[i] < 0);
    o->gf[i] = act ? 0 : g[i];
  }
  direction(o, o->gf);
  for (int i = 0; i < n; i++)
    if (o->gf[i] == 0 && g[i] != 0) o->d[i] = 0;
  if (!(dot(g, o->d, n) < 0)) { /* not a descent direction: forget the curvature */
    o->k = 0;
    direction(o, o->gf);
  }
  double a = 1;
  for (int t = 0; t < o->def.max_linesearch; t++, a *= 0.5) {
    for (int i = 0; i < n; i++) {
      double v = x[i] + a * o->d[i];
      if (o->lo && v < o->lo[i]) v = o->lo[i];
      if (o->hi && v > o->hi[i]) v = o->hi[i];
      o->xt[i] = v;
    }
    double gs = 0; /* g.(x' - x) */
    for (int i = 0; i < n; i++) gs += g[i] * (o->xt[i] - x[i]);
    if (!(gs < 0)) continue; /* the projection left no descent */
    double ft = 0;
    int rc = fn(user, o->xt, &ft, o->gt);
    if (nevals) (*nevals)++;
    if (rc) return rc;
    if (!isfinite(ft) || ft > *f + o->def.c1 * gs) continue;
    /* accepted: store the pair when the curvature condition holds */
    const int m = o->def.memory;
    const int q = (o->head + 1) % m;
    double* sq = o->s + (size_t)q * n;
    double* yq = o->y + (size_t)q * n;
    for (int i = 0; i < n; i++) {
      sq[i] = o->xt[i] - x[i];
      yq[i] = o->gt[i] - g[i];
    }
    const double sy = dot(sq, yq, n);
    if (sy > 1e-12 * sqrt(dot(sq, sq, n) * dot(yq, yq, n)) && sy > 0) {
      o->rho[q] = 1.0 / sy;
      o->head = q;
      if (o->k < m) o->k++;
    }
    memcpy(x, o->xt, (size_t)n * sizeof(double));
    memcpy(g, o->gt, (size_t)n * sizeof(double));
    *f = ft;
    return DS_OK;
  }
  o->k = 0; /* the next call starts over from steepest descent */
  return DS_ERR_RANGE;
}

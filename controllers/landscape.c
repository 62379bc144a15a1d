/* Loss landscapes (dsim/sysid.h): the sysid loss and its gradient on a 1-D
 * or 2-D grid of values of the first one or two identified parameters, the
 * others at their true values: gradSim's landscape figures. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#  include <omp.h>
#endif

#include "dsim/sysid.h"
#include "base/internal.h"

/* values per grid point in the results: v1, v2, loss, g1, g2 */
#define LS_ROW 5

struct dsLandscape {
  dsLandscapeDef def;
  dsEnvDef env_def;
  dsSysidDef sd;
  int dims, npt, nthreads, nv, failed;
  dsSysid** S;  /* one identification object per thread (each owns its env) */
  dsSysidVideo video; /* footage (video "frames"); nframes 0: synthetic */
  double* res;  /* npt x LS_ROW */
  dsErrBuf err;
};

dsLandscapeDef ds_default_landscape_def(void) {
  dsLandscapeDef d;
  memset(&d, 0, sizeof d);
  return d;
}

static int dims_of(const dsLandscapeDef* d) { return d->axis[1].n ? 2 : 1; }

int ds_landscape_check(const dsSysidDef* sd, const dsLandscapeDef* def, char* err, size_t errlen) {
  if (!sd || !def) return ds__puterr(err, errlen, DS_ERR_INVALID, "landscape: NULL definition");
  for (int a = 0; a < 2; a++) {
    const dsLandscapeAxis* x = &def->axis[a];
    if (a == 1 && x->n == 0) continue;
    if (x->n < 2 || x->n > DS_LANDSCAPE_MAX_AXIS || !isfinite(x->lo) || !isfinite(x->hi) || !(x->lo < x->hi))
      return ds__puterr(err, errlen, DS_ERR_RANGE, "axis %d: expected lo < hi and 2 <= n <= %d, got %g:%g:%d", a + 1,
                        DS_LANDSCAPE_MAX_AXIS, x->lo, x->hi, x->n);
    if (def->geometric && x->lo <= 0)
      return ds__puterr(err, errlen, DS_ERR_RANGE, "axis %d: a geometric axis needs lo > 0, got %g", a + 1, x->lo);
  }
  const int dims = dims_of(def);
  if (ds_sysid_num_params(sd) < dims)
    return ds__puterr(err, errlen, DS_ERR_CONFIG, "a 2-D grid (--range2) needs sysid.param2");
  for (int a = 0; a < dims; a++)
    if (sd->params[a].per_element)
      return ds__puterr(err, errlen, DS_ERR_CONFIG, "sysid.param%d.per_element: a grid axis is one shared value",
                        a + 1);
  return 0;
}

/* With video NULL, the definition's (sysid.video "frames": its files; else synthetic). */
static int landscape_create(const dsEnvDef* env_def, const dsSysidDef* sd, const dsLandscapeDef* def,
                            const dsSysidVideo* footage, dsLandscape** out, char* err, size_t errlen) {
  if (!out) return ds__puterr(err, errlen, DS_ERR_INVALID, "landscape: out is NULL");
  *out = NULL;
  if (!env_def) return ds__puterr(err, errlen, DS_ERR_INVALID, "landscape: env definition is NULL");
  int rc = ds_landscape_check(sd, def, err, errlen);
  if (rc) return rc;
  dsLandscape* ls = (dsLandscape*)calloc(1, sizeof *ls);
  if (!ls) return ds__puterr(err, errlen, DS_ERR_NOMEM, "out of memory");
  ls->def = *def;
  ls->env_def = *env_def;
  ls->sd = *sd;
  ls->sd.iterations = 1; /* evaluations only */
  ls->dims = dims_of(def);
  ls->npt = def->axis[0].n * (ls->dims == 2 ? def->axis[1].n : 1);
  ls->nthreads = def->threads > 0 ? def->threads : ds_get_max_threads();
  ls->S = (dsSysid**)calloc((size_t)ls->nthreads, sizeof(dsSysid*));
  ls->res = (double*)calloc((size_t)ls->npt * LS_ROW, sizeof(double));
  if (!ls->S || !ls->res) rc = ds__puterr(err, errlen, DS_ERR_NOMEM, "out of memory");
  /* footage sets the env's camera, image size and schedule (ls->env_def) */
  if (!rc && !footage && sd->video == DS_SYSID_FRAMES)
    rc = ds_sysid_load_video(&ls->sd, &ls->env_def, &ls->video, err, errlen);
  const dsSysidVideo* video = footage ? footage : ls->video.nframes ? &ls->video : NULL;
  for (int t = 0; t < ls->nthreads && !rc; t++)
    rc = ds_sysid_create(&ls->env_def, &ls->sd, def->object, video, &ls->S[t], err, errlen);
  if (rc) {
    ds_landscape_destroy(ls);
    return rc;
  }
  ls->nv = ds_sysid_num_values(ls->S[0]);
  *out = ls;
  return 0;
}

int ds_landscape_create(const dsEnvDef* env_def, const dsSysidDef* sd, const dsLandscapeDef* def, dsLandscape** out,
                        char* err, size_t errlen) {
  return landscape_create(env_def, sd, def, NULL, out, err, errlen);
}

int ds_landscape_create_from_text(const char* name, const char* text, const dsLandscapeDef* def,
                                  const dsSysidFootage* footage, dsLandscape** out, char* err, size_t errlen) {
  if (!out) return ds__puterr(err, errlen, DS_ERR_INVALID, "landscape: out is NULL");
  *out = NULL;
  dsEnvDef* ed = (dsEnvDef*)malloc(sizeof *ed);
  dsSysidDef* sd = (dsSysidDef*)malloc(sizeof *sd);
  dsSysidVideo video;
  memset(&video, 0, sizeof video);
  int rc = ed && sd ? 0 : ds__puterr(err, errlen, DS_ERR_NOMEM, "out of memory");
  if (!rc) rc = ds_sysid_defs_from_text(name, text, ed, sd, err, errlen);
  if (!rc && footage) rc = ds_sysid_footage_video(footage, ed, &video, err, errlen);
  if (!rc) rc = landscape_create(ed, sd, def, footage ? &video : NULL, out, err, errlen);
  ds_sysid_video_free(&video);
  free(ed);
  free(sd);
  return rc;
}

void ds_landscape_destroy(dsLandscape* ls) {
  if (!ls) return;
  for (int t = 0; ls->S && t < ls->nthreads; t++) ds_sysid_destroy(ls->S[t]);
  free(ls->S);
  free(ls->res);
  ds_sysid_video_free(&ls->video);
  free(ls);
}

double ds_landscape_axis_value(const dsLandscapeDef* def, int axis, int i) {
  const dsLandscapeAxis* a = &def->axis[axis];
  const double t = (double)i / (double)(a->n - 1);
  return def->geometric ? a->lo * pow(a->hi / a->lo, t) : a->lo + (a->hi - a->lo) * t;
}

/* Grid point q's values: the truth (footage: the initial guesses), with
 * the axes' parameters at the point's values v (row-major, axis 2 fastest). */
static void point_values(const dsLandscape* ls, int q, double* x, double v[2]) {
  const dsLandscapeDef* d = &ls->def;
  const int i1 = ls->dims == 2 ? q / d->axis[1].n : q, i2 = ls->dims == 2 ? q % d->axis[1].n : 0;
  v[0] = ds_landscape_axis_value(d, 0, i1);
  v[1] = ls->dims == 2 ? ds_landscape_axis_value(d, 1, i2) : 0;
  const dsSysid* s = ls->S[0];
  const double* base = ds_sysid_truth(s) ? ds_sysid_truth(s) : ds_sysid_initial_values(s);
  memcpy(x, base, sizeof(double) * (size_t)ls->nv);
  for (int i = 0; i < ls->nv; i++) {
    const int p = ds_sysid_value_param(s, i);
    if (p < ls->dims && !ds_sysid_value_fixed(s, i)) x[i] = v[p];
  }
}

/* Its row of the results (v1, v2, loss, g1, g2): d/d(shared value) is the
 * sum over the parameter's values (one value per component); NaN where the
 * episode diverged. */
static void point_result(const dsLandscape* ls, const double v[2], int ok, double L, const double* g, double* r) {
  r[0] = v[0];
  r[1] = v[1];
  r[3] = r[4] = 0;
  if (!ok) {
    r[2] = r[3] = r[4] = NAN;
    return;
  }
  r[2] = L;
  for (int i = 0; i < ls->nv; i++) {
    const int p = ds_sysid_value_param(ls->S[0], i);
    if (p < ls->dims) r[3 + p] += g[i];
  }
}

/* The grid in lockstep batches of up to DS_LANDSCAPE_GROUP points
 * (ds_sysid_group_eval on copies of the object; on a GPU one engine per
 * batch). */
static int eval_group(dsLandscape* ls) {
  const int npt = ls->npt, G = npt < DS_LANDSCAPE_GROUP ? npt : DS_LANDSCAPE_GROUP, nv = ls->nv;
  dsSysidDef gd = ls->sd; /* evaluations only: the optimiser is never stepped */
  gd.optimizer = DS_SYSID_ADAM;
  int* objs = (int*)calloc((size_t)G, sizeof(int));
  double* X = (double*)malloc(sizeof(double) * (size_t)G * nv);
  double* Gr = (double*)malloc(sizeof(double) * (size_t)G * nv);
  double* L = (double*)malloc(sizeof(double) * (size_t)G);
  double* V = (double*)malloc(sizeof(double) * 2 * (size_t)G);
  int* st = (int*)malloc(sizeof(int) * (size_t)G);
  dsSysidGroup* g = NULL;
  char msg[1024] = "out of memory";
  int rc = objs && X && Gr && L && V && st ? 0 : DS_ERR_NOMEM;
  for (int i = 0; i < G && !rc; i++) objs[i] = ls->def.object;
  if (!rc)
    rc = ds_sysid_group_create(&ls->env_def, &gd, objs, G, ls->video.nframes ? &ls->video : NULL, &g, msg, sizeof msg);
  for (int q0 = 0; q0 < npt && !rc; q0 += G) {
    const int m = npt - q0 < G ? npt - q0 : G;
    for (int i = 0; i < G; i++) /* a short last batch repeats its last point */
      point_values(ls, q0 + (i < m ? i : m - 1), X + (size_t)i * nv, V + 2 * (size_t)i);
    ds_sysid_group_eval(g, X, L, Gr, st);
    for (int i = 0; i < m; i++) {
      point_result(ls, V + 2 * (size_t)i, st[i] == 0, L[i], Gr + (size_t)i * nv, ls->res + (size_t)(q0 + i) * LS_ROW);
      ls->failed += st[i] != 0;
    }
  }
  if (rc) ds__seterr(&ls->err, rc, "%s", msg);
  ds_sysid_group_destroy(g);
  free(objs);
  free(X);
  free(Gr);
  free(L);
  free(V);
  free(st);
  return rc;
}

/* Point by point over the threads, each with its own object (dynamic
 * schedule: a diverging point costs less than a full one). */
static int eval_threads(dsLandscape* ls) {
  int nomem = 0, failed = 0;
  ds_set_num_threads(1);
#pragma omp parallel num_threads(ls->nthreads) reduction(+ : failed, nomem)
  {
    int t = 0;
#ifdef _OPENMP
    t = omp_get_thread_num();
#endif
    double* x = (double*)malloc(sizeof(double) * (size_t)ls->nv);
    double* g = (double*)malloc(sizeof(double) * (size_t)ls->nv);
    if (!x || !g) nomem++;
#pragma omp for schedule(dynamic, 1)
    for (int q = 0; q < ls->npt; q++) {
      if (!x || !g) continue;
      double v[2], L = 0;
      point_values(ls, q, x, v);
      const int bad = ds_sysid_eval(ls->S[t], x, &L, g) != 0; /* the episode diverged at this point */
      point_result(ls, v, !bad, L, g, ls->res + (size_t)q * LS_ROW);
      failed += bad;
    }
    free(x);
    free(g);
  }
  ls->failed += failed;
  return nomem ? ds__seterr(&ls->err, DS_ERR_NOMEM, "out of memory") : 0;
}

int ds_landscape_evaluate(dsLandscape* ls) {
  if (!ls) return DS_ERR_INVALID;
  ls->failed = 0;
  return ls->def.group ? eval_group(ls) : eval_threads(ls);
}

int ds_landscape_dims(const dsLandscape* ls) { return ls ? ls->dims : DS_ERR_INVALID; }
int ds_landscape_num_points(const dsLandscape* ls) { return ls ? ls->npt : DS_ERR_INVALID; }
int ds_landscape_threads(const dsLandscape* ls) { return ls ? ls->nthreads : DS_ERR_INVALID; }
int ds_landscape_num_failed(const dsLandscape* ls) { return ls ? ls->failed : DS_ERR_INVALID; }
const double* ds_landscape_results(const dsLandscape* ls) { return ls ? ls->res : NULL; }
const char* ds_landscape_last_error(const dsLandscape* ls) { return ls ? ds__errmsg(&ls->err) : "landscape is NULL"; }

const char* ds_landscape_param_name(const dsLandscape* ls, int axis) {
  return ls && axis >= 0 && axis < ls->dims ? ds_sysid_param_name(ls->S[0], axis) : NULL;
}

double ds_landscape_truth(const dsLandscape* ls, int axis) {
  if (!ls || axis < 0 || axis >= ls->dims || !ds_sysid_truth(ls->S[0])) return NAN;
  for (int i = 0; i < ls->nv; i++)
    if (ds_sysid_value_param(ls->S[0], i) == axis) return ds_sysid_truth(ls->S[0])[i];
  return NAN;
}

int ds_landscape_lowest(const dsLandscape* ls) {
  if (!ls) return DS_ERR_INVALID;
  int best = -1;
  for (int q = 0; q < ls->npt; q++) {
    const double L = ls->res[(size_t)q * LS_ROW + 2];
    if (!isnan(L) && (best < 0 || L < ls->res[(size_t)best * LS_ROW + 2])) best = q;
  }
  return best;
}

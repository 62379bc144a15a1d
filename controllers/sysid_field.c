/* Material fields in sysid: the element graph a smoothness term runs over,
 * the regions of a synthetic true field, and the regulariser itself.
 *
 * Regulariser, on the optimised variable u (ln(value) for a positive
 * parameter), over the E edges (i, j) of the element graph:
 *   R = tv/E sum_e (sqrt(d_e^2 + eps^2) - eps) + lap/E sum_e d_e^2,  d_e = u_i - u_j
 *   dR/du_i = +(tv/E d_e / sqrt(d_e^2 + eps^2) + 2 lap/E d_e),  dR/du_j = -(the same)
 * In u rather than in the value: a jump between two materials then costs by
 * its ratio (ln(E1/E2)), not by its size in pascals, so one weight suits
 * every unit and stiffness range, and the term lives in the space whose
 * steps the optimiser takes. Means over the edges keep the weight independent
 * of the mesh resolution. */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/internal.h"
#include "controllers/sysid_field.h"
#include "dsim/image.h"

/* the element kind of an engine array name */
typedef enum { EL_NONE, EL_TET, EL_TRI, EL_SPRING, EL_PARTICLE } ElKind;
static ElKind kind_of(const char* name) {
  if (!strncmp(name, "tet.", 4)) return EL_TET;
  if (!strncmp(name, "tri.", 4)) return EL_TRI;
  if (!strncmp(name, "spring.", 7)) return EL_SPRING;
  if (!strncmp(name, "particle.", 9)) return EL_PARTICLE;
  return EL_NONE;
}

static int cmp_int3(const void* a, const void* b) {
  const int *x = (const int*)a, *y = (const int*)b;
  for (int k = 0; k < 3; k++)
    if (x[k] != y[k]) return x[k] < y[k] ? -1 : 1;
  return 0;
}
static int cmp_pair(const void* a, const void* b) {
  const int *x = (const int*)a, *y = (const int*)b;
  if (x[0] != y[0]) return x[0] < y[0] ? -1 : 1;
  return x[1] < y[1] ? -1 : x[1] > y[1];
}
static int cmp_int1(const void* a, const void* b) {
  const int *x = (const int*)a, *y = (const int*)b;
  return x[0] < y[0] ? -1 : x[0] > y[0];
}

static void sort3(int* v) {
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 2 - i; j++)
      if (v[j] > v[j + 1]) {
        const int t = v[j];
        v[j] = v[j + 1];
        v[j + 1] = t;
      }
}

/* rows of (key..., element) sorted by key: consecutive rows with the same
 * key (klen ints) make edges between their elements */
static int rows_to_pairs(int* rows, int nrow, int klen, int* pairs) {
  const int stride = klen + 1;
  qsort(rows, (size_t)nrow, sizeof(int) * (size_t)stride, klen == 3 ? cmp_int3 : klen == 2 ? cmp_pair : cmp_int1);
  int np = 0;
  for (int a = 0; a < nrow;) {
    int b = a + 1;
    while (b < nrow && !memcmp(rows + (size_t)a * stride, rows + (size_t)b * stride, sizeof(int) * (size_t)klen)) b++;
    for (int i = a; i < b; i++)
      for (int j = i + 1; j < b; j++) {
        const int ei = rows[(size_t)i * stride + klen], ej = rows[(size_t)j * stride + klen];
        if (ei == ej) continue;
        if (pairs) {
          pairs[2 * np] = ei < ej ? ei : ej;
          pairs[2 * np + 1] = ei < ej ? ej : ei;
        }
        np++;
      }
    a = b;
  }
  return np;
}

/* sort pairs and drop repeats; returns the count left */
static int unique_pairs(int* pairs, int np) {
  qsort(pairs, (size_t)np, 2 * sizeof(int), cmp_pair);
  int k = 0;
  for (int i = 0; i < np; i++)
    if (!k || pairs[2 * i] != pairs[2 * k - 2] || pairs[2 * i + 1] != pairs[2 * k - 1]) {
      pairs[2 * k] = pairs[2 * i];
      pairs[2 * k + 1] = pairs[2 * i + 1];
      k++;
    }
  return k;
}

/* particle pairs joined by a spring, a triangle edge or a tet edge */
static int particle_pairs(const dsModel* m, int* pairs) {
  int np = 0;
  for (int s = 0; s < m->nspring; s++, np++)
    if (pairs) memcpy(pairs + 2 * np, m->spring_idx + 2 * s, 2 * sizeof(int));
  for (int t = 0; t < m->ntri; t++)
    for (int a = 0; a < 3; a++, np++)
      if (pairs) {
        pairs[2 * np] = m->tri_idx[3 * t + a];
        pairs[2 * np + 1] = m->tri_idx[3 * t + (a + 1) % 3];
      }
  for (int t = 0; t < m->ntet; t++)
    for (int a = 0; a < 4; a++)
      for (int b = a + 1; b < 4; b++, np++)
        if (pairs) {
          pairs[2 * np] = m->tet_idx[4 * t + a];
          pairs[2 * np + 1] = m->tet_idx[4 * t + b];
        }
  if (pairs)
    for (int i = 0; i < np; i++)
      if (pairs[2 * i] > pairs[2 * i + 1]) {
        const int t = pairs[2 * i];
        pairs[2 * i] = pairs[2 * i + 1];
        pairs[2 * i + 1] = t;
      }
  return np;
}

/* (key, element) rows of the shared-face, shared-edge or shared-particle
 * relation; returns the row count, *klen the key length */
static int element_rows(const dsModel* m, ElKind k, int* rows, int* klen) {
  int n = 0;
  if (k == EL_TET) {
    *klen = 3;
    for (int t = 0; t < m->ntet; t++)
      for (int skip = 0; skip < 4; skip++, n++) {
        if (!rows) continue;
        int* r = rows + 4 * (size_t)n;
        for (int a = 0, q = 0; a < 4; a++)
          if (a != skip) r[q++] = m->tet_idx[4 * t + a];
        sort3(r);
        r[3] = t;
      }
  } else if (k == EL_TRI) {
    *klen = 2;
    for (int t = 0; t < m->ntri; t++)
      for (int a = 0; a < 3; a++, n++) {
        if (!rows) continue;
        int* r = rows + 3 * (size_t)n;
        const int i = m->tri_idx[3 * t + a], j = m->tri_idx[3 * t + (a + 1) % 3];
        r[0] = i < j ? i : j;
        r[1] = i < j ? j : i;
        r[2] = t;
      }
  } else {
    *klen = 1;
    for (int s = 0; s < m->nspring; s++)
      for (int a = 0; a < 2; a++, n++)
        if (rows) {
          rows[2 * (size_t)n] = m->spring_idx[2 * s + a];
          rows[2 * (size_t)n + 1] = s;
        }
  }
  return n;
}

int ds__sysid_field_graph(const dsModel* m, const char* name, const char* key, int** edges, int* nedge, char* err,
                          size_t errlen) {
  *edges = NULL;
  *nedge = 0;
  const ElKind k = kind_of(name);
  if (k == EL_NONE)
    return ds__puterr(err, errlen, DS_ERR_CONFIG,
                      "%s: a smoothness term needs a per-element parameter of tets, triangles, springs or particles "
                      "(tet.*, tri.*, spring.*, particle.*), not \"%s\"",
                      key, name);
  int np;
  int* pairs;
  if (k == EL_PARTICLE) {
    np = particle_pairs(m, NULL);
    pairs = (int*)ds__malloc(sizeof(int) * 2 * (size_t)(np > 0 ? np : 1));
    if (!pairs) return ds__puterr(err, errlen, DS_ERR_NOMEM, "%s: out of memory", key);
    particle_pairs(m, pairs);
  } else {
    int klen = 1;
    const int nrow = element_rows(m, k, NULL, &klen);
    int* rows = (int*)ds__malloc(sizeof(int) * (size_t)(klen + 1) * (size_t)(nrow > 0 ? nrow : 1));
    if (!rows) return ds__puterr(err, errlen, DS_ERR_NOMEM, "%s: out of memory", key);
    element_rows(m, k, rows, &klen);
    /* sorted rows with a key repeated r times give r(r-1)/2 pairs */
    int* tmp = (int*)ds__malloc(sizeof(int) * (size_t)(klen + 1) * (size_t)(nrow > 0 ? nrow : 1));
    if (!tmp) {
      ds__free(rows);
      return ds__puterr(err, errlen, DS_ERR_NOMEM, "%s: out of memory", key);
    }
    memcpy(tmp, rows, sizeof(int) * (size_t)(klen + 1) * (size_t)nrow);
    np = rows_to_pairs(tmp, nrow, klen, NULL);
    ds__free(tmp);
    pairs = (int*)ds__malloc(sizeof(int) * 2 * (size_t)(np > 0 ? np : 1));
    if (!pairs) {
      ds__free(rows);
      return ds__puterr(err, errlen, DS_ERR_NOMEM, "%s: out of memory", key);
    }
    rows_to_pairs(rows, nrow, klen, pairs);
    ds__free(rows);
  }
  *nedge = unique_pairs(pairs, np);
  *edges = pairs;
  return 0;
}

/* the centroid coordinate of element e along axis */
static double centroid(const dsModel* m, ElKind k, int e, int axis) {
  const int* idx = k == EL_TET ? m->tet_idx + 4 * e : k == EL_TRI ? m->tri_idx + 3 * e : m->spring_idx + 2 * e;
  const int nv = k == EL_TET ? 4 : k == EL_TRI ? 3 : k == EL_SPRING ? 2 : 1;
  if (k == EL_PARTICLE) return (double)m->x0[3 * e + axis];
  double c = 0;
  for (int a = 0; a < nv; a++) c += (double)m->x0[3 * idx[a] + axis];
  return c / nv;
}

int ds__sysid_field_regions(const dsModel* m, const char* name, const dsSysidField* f, const char* key, int* region,
                            int nelem, int* nregion, char* err, size_t errlen) {
  const ElKind k = kind_of(name);
  if (k == EL_NONE)
    return ds__puterr(err, errlen, DS_ERR_CONFIG,
                      "%s: a true field needs a per-element parameter of tets, triangles, springs or particles, not "
                      "\"%s\"",
                      key, name);
  const int n = f->nvalues ? f->nvalues : f->nranges / 2;
  if (n < 1 || (f->nvalues && f->nranges) || f->nranges % 2 || n > DS_SYSID_MAX_REGIONS)
    return ds__puterr(err, errlen, DS_ERR_CONFIG,
                      "%s: expected values (one per region) or ranges ([lo, hi] per region, flattened), 1 to %d "
                      "regions",
                      key, DS_SYSID_MAX_REGIONS);
  if (f->kind == DS_SYSID_FIELD_BAND && (n != 2 || f->nband != 2 || !(f->band[0] < f->band[1])))
    return ds__puterr(err, errlen, DS_ERR_CONFIG,
                      "%s: a band needs band [from, to] (fractions of the extent, from < to) and 2 regions (outside, "
                      "inside)",
                      key);
  double lo = INFINITY, hi = -INFINITY;
  for (int i = 0; i < m->nparticle; i++) {
    const double x = (double)m->x0[3 * i + f->axis];
    lo = x < lo ? x : lo;
    hi = x > hi ? x : hi;
  }
  const double ext = hi > lo ? hi - lo : 1;
  for (int e = 0; e < nelem; e++) {
    const double t = (centroid(m, k, e, f->axis) - lo) / ext;
    if (f->kind == DS_SYSID_FIELD_BAND) {
      region[e] = t >= (double)f->band[0] && t < (double)f->band[1];
    } else {
      int r = (int)floor(t * n);
      region[e] = r < 0 ? 0 : r >= n ? n - 1 : r;
    }
  }
  *nregion = n;
  return 0;
}

double ds__sysid_field_reg(const int* edges, int nedge, const double* u, const unsigned char* skip, double tv,
                           double eps, double laplacian, double* g) {
  if (nedge <= 0 || (tv == 0 && laplacian == 0)) return 0;
  const double a = tv / nedge, b = laplacian / nedge;
  double R = 0;
  for (int e = 0; e < nedge; e++) {
    const int i = edges[2 * e], j = edges[2 * e + 1];
    if (skip && (skip[i] || skip[j])) continue;
    const double d = u[i] - u[j], r = sqrt(d * d + eps * eps);
    R += a * (r - eps) + b * d * d;
    if (g) {
      const double gd = a * d / r + 2 * b * d;
      g[i] += gd;
      g[j] -= gd;
    }
  }
  return R;
}

/* ---- picture: true and recovered field side by side ------------------------------
 * Each element at its rest centroid, projected on the x-y plane (the
 * camera's usual view) into a grid of about nelem/4 bins of square pixels; a bin shows the
 * mean over its elements (seen through the depth) of ln(value) (linear
 * for a parameter that may change sign) on a blue-white-red scale shared
 * by both panels: the true field on top, the recovered one below, a colour
 * bar at the bottom (low to high, left to right). */
#define FIELD_WIDTH 320 /* pixels along the longer side */
#define FIELD_GAP 6     /* pixels between the panels */

static void colour(double t, uint8_t* px) {
  /* t in [0, 1]: blue (0.2, 0.3, 0.9) -> white -> red (0.9, 0.2, 0.15) */
  const double lo[3] = {0.2, 0.3, 0.9}, hi[3] = {0.9, 0.2, 0.15};
  t = t < 0 ? 0 : t > 1 ? 1 : t;
  for (int c = 0; c < 3; c++) {
    const double v = t < 0.5 ? lo[c] + (1 - lo[c]) * (2 * t) : 1 + (hi[c] - 1) * (2 * t - 1);
    px[c] = (uint8_t)(255 * v + 0.5);
  }
  px[3] = 255;
}

int ds_sysid_field_png(dsSysid* s, int k, const char* path, char* err, size_t errlen) {
  if (!s || !path || k < 0 || k >= ds_sysid_nparams(s)) return ds__puterr(err, errlen, DS_ERR_INVALID, "field png: bad arguments");
  const char* name = ds_sysid_param_name(s, k);
  const ElKind kind = kind_of(name);
  const double* truth = ds_sysid_truth(s);
  const double* est = ds_sysid_best_values(s, NULL);
  int off = 0, nval = 0;
  for (int i = 0; i < ds_sysid_num_values(s); i++)
    if (ds_sysid_value_param(s, i) == k) {
      if (!nval) off = i;
      nval++;
    }
  const dsModel* m = ds_env_model(ds_sysid_env(s));
  const int nelem = kind == EL_TET ? m->ntet : kind == EL_TRI ? m->ntri : kind == EL_SPRING ? m->nspring : m->nparticle;
  if (kind == EL_NONE || !truth || ds_sysid_param_width(s, k) != 1 || nval != nelem)
    return ds__puterr(err, errlen, DS_ERR_CONFIG,
                      "field png: parameter %d (\"%s\") is not a per-element scalar field with a known truth", k + 1,
                      name);
  double lo[2] = {INFINITY, INFINITY}, hi[2] = {-INFINITY, -INFINITY}, vlo = INFINITY, vhi = -INFINITY;
  int logv = 1;
  for (int e = 0; e < nelem; e++) {
    if (ds_sysid_value_fixed(s, off + e)) continue;
    for (int a = 0; a < 2; a++) {
      const double c = centroid(m, kind, e, a);
      lo[a] = c < lo[a] ? c : lo[a];
      hi[a] = c > hi[a] ? c : hi[a];
    }
    logv &= truth[off + e] > 0 && est[off + e] > 0;
  }
  for (int e = 0; e < nelem; e++) {
    if (ds_sysid_value_fixed(s, off + e)) continue;
    for (int q = 0; q < 2; q++) {
      const double v = q ? est[off + e] : truth[off + e], f = logv ? log(v) : v;
      vlo = f < vlo ? f : vlo;
      vhi = f > vhi ? f : vhi;
    }
  }
  const double ex = hi[0] - lo[0] > 0 ? hi[0] - lo[0] : 1, ey = hi[1] - lo[1] > 0 ? hi[1] - lo[1] : 1;
  /* about 4 elements a bin (a projected tet mesh leaves no bin empty), the bins square */
  const double nb = nelem / 4.0 > 1 ? nelem / 4.0 : 1;
  int nbx = (int)lround(sqrt(nb * ex / ey)), nby = (int)lround(sqrt(nb * ey / ex));
  nbx = nbx < 1 ? 1 : nbx > 64 ? 64 : nbx;
  nby = nby < 1 ? 1 : nby > 64 ? 64 : nby;
  const int cell = FIELD_WIDTH / (nbx > nby ? nbx : nby) > 4 ? FIELD_WIDTH / (nbx > nby ? nbx : nby) : 4;
  const int W = nbx * cell, ph = nby * cell, H = 2 * ph + 3 * FIELD_GAP + cell / 2;
  uint8_t* img = (uint8_t*)ds__calloc((size_t)W * H * 4, 1);
  double* acc = (double*)ds__calloc((size_t)nbx * nby * 2, sizeof(double));
  if (!img || !acc) {
    ds__free(img);
    ds__free(acc);
    return ds__puterr(err, errlen, DS_ERR_NOMEM, "field png: out of memory");
  }
  memset(img, 255, (size_t)W * H * 4);
  for (int q = 0; q < 2; q++) {
    memset(acc, 0, sizeof(double) * (size_t)nbx * nby * 2);
    for (int e = 0; e < nelem; e++) {
      if (ds_sysid_value_fixed(s, off + e)) continue;
      int ix = (int)((centroid(m, kind, e, 0) - lo[0]) / ex * nbx), iy = (int)((centroid(m, kind, e, 1) - lo[1]) / ey * nby);
      ix = ix >= nbx ? nbx - 1 : ix;
      iy = iy >= nby ? nby - 1 : iy;
      const double v = q ? est[off + e] : truth[off + e];
      acc[2 * ((size_t)iy * nbx + ix)] += logv ? log(v) : v;
      acc[2 * ((size_t)iy * nbx + ix) + 1] += 1;
    }
    const int y0 = FIELD_GAP + q * (ph + FIELD_GAP);
    for (int iy = 0; iy < nby; iy++)
      for (int ix = 0; ix < nbx; ix++) {
        double sum = acc[2 * ((size_t)iy * nbx + ix)], cnt = acc[2 * ((size_t)iy * nbx + ix) + 1];
        for (int dy = -1; dy <= 1 && cnt == 0; dy++) /* a bin no centroid fell in: its neighbours' mean */
          for (int dx = -1; dx <= 1; dx++)
            if (iy + dy >= 0 && iy + dy < nby && ix + dx >= 0 && ix + dx < nbx) {
              sum += acc[2 * ((size_t)(iy + dy) * nbx + ix + dx)];
              cnt += acc[2 * ((size_t)(iy + dy) * nbx + ix + dx) + 1];
            }
        if (cnt == 0) continue;
        uint8_t px[4];
        colour(vhi > vlo ? (sum / cnt - vlo) / (vhi - vlo) : 0.5, px);
        for (int r = 0; r < cell; r++)
          for (int c = 0; c < cell; c++) /* y up: row 0 at the top */
            memcpy(img + 4 * ((size_t)(y0 + (nby - 1 - iy) * cell + r) * W + ix * cell + c), px, 4);
      }
  }
  for (int x = 0; x < W; x++) { /* the colour bar */
    uint8_t px[4];
    colour((double)x / (W > 1 ? W - 1 : 1), px);
    for (int r = 0; r < cell / 2; r++) memcpy(img + 4 * ((size_t)(H - cell / 2 + r) * W + x), px, 4);
  }
  char text[256];
  snprintf(text, sizeof text, "%s: true (top) and recovered (bottom) field, colour %s from %.4g to %.4g", name,
           logv ? "log scale" : "linear", logv ? exp(vlo) : vlo, logv ? exp(vhi) : vhi);
  int rc = ds_png_write_text(path, img, W, H, "Description", text, err, errlen);
  ds__free(img);
  ds__free(acc);
  return rc;
}

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
#include <stdlib.h>
#include <string.h>

#include "base/internal.h"
#include "controllers/sysid_field.h"

/* the element kind of an engine array name */
typedef enum { EL_NONE, EL_TET, EL_TRI, EL_SPRING, EL_PARTICLE } ElKind;
static ElKind kind_of(const char* name) {
  if (!strncmp(name, "tet.", 4)) return EL_TET;
  if (!strncmp(name, "tri.", 4)) return EL_TRI;
  if (!strncmp(name, "spring.", 7)) return EL_SPRING;
  if (!strncmp(name, "particle.", 9)) return EL_PARTICLE;
  return EL_NONE;
}

/* the element lists of an env (dsim/env.h's ds_env_elements) */
typedef struct Mesh {
  const int *tet, *tri, *spring;
  int ntet, ntri, nspring, nparticle;
  const dsReal* x0; /* rest positions, nparticle x 3 */
} Mesh;

static void mesh_of(const dsEnv* env, Mesh* m) {
  int per, n;
  memset(m, 0, sizeof *m);
  if (!ds_env_elements(env, "tet.k_mu", &m->tet, &n, &per)) m->ntet = n;
  if (!ds_env_elements(env, "tri.k_mu", &m->tri, &n, &per)) m->ntri = n;
  if (!ds_env_elements(env, "spring.ke", &m->spring, &n, &per)) m->nspring = n;
  const int* none = NULL;
  if (!ds_env_elements(env, "particle.mass", &none, &n, &per)) m->nparticle = n;
  ds_env_param(env, "initial_position", &m->x0, &n);
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
static int particle_pairs(const Mesh* m, int* pairs) {
  int np = 0;
  for (int s = 0; s < m->nspring; s++, np++)
    if (pairs) memcpy(pairs + 2 * np, m->spring + 2 * s, 2 * sizeof(int));
  for (int t = 0; t < m->ntri; t++)
    for (int a = 0; a < 3; a++, np++)
      if (pairs) {
        pairs[2 * np] = m->tri[3 * t + a];
        pairs[2 * np + 1] = m->tri[3 * t + (a + 1) % 3];
      }
  for (int t = 0; t < m->ntet; t++)
    for (int a = 0; a < 4; a++)
      for (int b = a + 1; b < 4; b++, np++)
        if (pairs) {
          pairs[2 * np] = m->tet[4 * t + a];
          pairs[2 * np + 1] = m->tet[4 * t + b];
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
static int element_rows(const Mesh* m, ElKind k, int* rows, int* klen) {
  int n = 0;
  if (k == EL_TET) {
    *klen = 3;
    for (int t = 0; t < m->ntet; t++)
      for (int skip = 0; skip < 4; skip++, n++) {
        if (!rows) continue;
        int* r = rows + 4 * (size_t)n;
        for (int a = 0, q = 0; a < 4; a++)
          if (a != skip) r[q++] = m->tet[4 * t + a];
        sort3(r);
        r[3] = t;
      }
  } else if (k == EL_TRI) {
    *klen = 2;
    for (int t = 0; t < m->ntri; t++)
      for (int a = 0; a < 3; a++, n++) {
        if (!rows) continue;
        int* r = rows + 3 * (size_t)n;
        const int i = m->tri[3 * t + a], j = m->tri[3 * t + (a + 1) % 3];
        r[0] = i < j ? i : j;
        r[1] = i < j ? j : i;
        r[2] = t;
      }
  } else {
    *klen = 1;
    for (int s = 0; s < m->nspring; s++)
      for (int a = 0; a < 2; a++, n++)
        if (rows) {
          rows[2 * (size_t)n] = m->spring[2 * s + a];
          rows[2 * (size_t)n + 1] = s;
        }
  }
  return n;
}

int ds__sysid_field_graph(const dsEnv* env, const char* name, const char* key, int** edges, int* nedge, char* err,
                          size_t errlen) {
  Mesh mm, *m = &mm;
  mesh_of(env, m);
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
static double centroid(const Mesh* m, ElKind k, int e, int axis) {
  const int* idx = k == EL_TET ? m->tet + 4 * e : k == EL_TRI ? m->tri + 3 * e : m->spring + 2 * e;
  const int nv = k == EL_TET ? 4 : k == EL_TRI ? 3 : k == EL_SPRING ? 2 : 1;
  if (k == EL_PARTICLE) return (double)m->x0[3 * e + axis];
  double c = 0;
  for (int a = 0; a < nv; a++) c += (double)m->x0[3 * idx[a] + axis];
  return c / nv;
}

int ds__sysid_field_regions(const dsEnv* env, const char* name, const dsSysidField* f, const char* key, int* region,
                            int nelem, int* nregion, char* err, size_t errlen) {
  Mesh mm, *m = &mm;
  mesh_of(env, m);
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

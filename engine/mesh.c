/* Mesh basics: allocation, validation, the cloth and tet-box generators, and
 * the topology helpers (boundary surface, lumped mass, bending edges, rigid
 * placement). Pure geometry on arrays.
 *
 * Orientation conventions (see include/dsim/mesh.h):
 *   tet (x0, x1, x2, x3) is positive when V = ((x1-x0)x(x2-x0)).(x3-x0)/6 > 0,
 *   i.e. x3 lies on the side the right-hand normal of (x0, x1, x2) points to.
 *   Its outward faces are then (x1,x2,x3), (x0,x3,x2), (x0,x1,x3), (x0,x2,x1)
 *   (the face opposite vertex 0, 1, 2, 3), each counter-clockwise seen from
 *   outside. */
#include "config.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsim/mesh.h"
#include "base/internal.h"

/* ---- shared helpers ---------------------------------------------------------*/

int ds_mesh_alloc(dsMesh* m, int nvert, int ntri, int ntet) {
  memset(m, 0, sizeof *m);
  if (nvert < 0 || ntri < 0 || ntet < 0) return DS_ERR_INVALID;
  /* sizes in elements must fit an int index space times the arity */
  if ((size_t)nvert > (size_t)INT_MAX / 3 || (size_t)ntri > (size_t)INT_MAX / 3 ||
      (size_t)ntet > (size_t)INT_MAX / 4)
    return DS_ERR_INVALID;
  if (nvert > 0 && !(m->x = (dsReal*)ds__calloc((size_t)nvert * 3, sizeof(dsReal)))) goto nomem;
  if (ntri > 0 && !(m->tri = (int*)ds__calloc((size_t)ntri * 3, sizeof(int)))) goto nomem;
  if (ntet > 0 && !(m->tet = (int*)ds__calloc((size_t)ntet * 4, sizeof(int)))) goto nomem;
  m->nvert = nvert;
  m->ntri = ntri;
  m->ntet = ntet;
  return 0;
nomem:
  ds__free(m->x);
  ds__free(m->tri);
  ds__free(m->tet);
  memset(m, 0, sizeof *m);
  return DS_ERR_NOMEM;
}

double ds_tet_signed_volume(const dsReal a[3], const dsReal b[3], const dsReal c[3], const dsReal d[3]) {
  double u[3], v[3], w[3];
  for (int k = 0; k < 3; k++) {
    u[k] = (double)b[k] - (double)a[k];
    v[k] = (double)c[k] - (double)a[k];
    w[k] = (double)d[k] - (double)a[k];
  }
  /* (u x v) . w */
  return ((u[1] * v[2] - u[2] * v[1]) * w[0] + (u[2] * v[0] - u[0] * v[2]) * w[1] +
          (u[0] * v[1] - u[1] * v[0]) * w[2]) /
         6.0;
}

double ds_tri_area2(const dsReal a[3], const dsReal b[3], const dsReal c[3]) {
  double u[3], v[3];
  for (int k = 0; k < 3; k++) {
    u[k] = (double)b[k] - (double)a[k];
    v[k] = (double)c[k] - (double)a[k];
  }
  double n0 = u[1] * v[2] - u[2] * v[1], n1 = u[2] * v[0] - u[0] * v[2], n2 = u[0] * v[1] - u[1] * v[0];
  return sqrt(n0 * n0 + n1 * n1 + n2 * n2);
}

double ds_bbox_diag2(const dsReal* x, int nvert) {
  if (nvert <= 0) return 0.0;
  double lo[3], hi[3];
  for (int k = 0; k < 3; k++) lo[k] = hi[k] = (double)x[k];
  for (int i = 1; i < nvert; i++)
    for (int k = 0; k < 3; k++) {
      double v = (double)x[3 * i + k];
      if (v < lo[k]) lo[k] = v;
      if (v > hi[k]) hi[k] = v;
    }
  double d2 = 0.0;
  for (int k = 0; k < 3; k++) d2 += (hi[k] - lo[k]) * (hi[k] - lo[k]);
  return d2;
}

/* ---- free / validate ----------------------------------------------------------*/

void ds_mesh_free(dsMesh* m) {
  if (!m) return;
  ds__free(m->x);
  ds__free(m->tri);
  ds__free(m->tet);
  memset(m, 0, sizeof *m);
}

void ds_mesh_free_ints(int* p) { ds__free(p); }

int ds_mesh_validate(const dsMesh* m, char* err, size_t errlen) {
  if (!m) return ds__puterr(err, errlen, DS_ERR_INVALID, "mesh is NULL");
  if (m->nvert < 0 || m->ntri < 0 || m->ntet < 0)
    return ds__puterr(err, errlen, DS_ERR_MESH, "negative count (nvert %d, ntri %d, ntet %d)", m->nvert,
                        m->ntri, m->ntet);
  if ((m->nvert > 0 && !m->x) || (m->ntri > 0 && !m->tri) || (m->ntet > 0 && !m->tet))
    return ds__puterr(err, errlen, DS_ERR_MESH, "missing array for a non-zero count");
  for (int i = 0; i < m->nvert; i++)
    for (int k = 0; k < 3; k++)
      if (!isfinite((double)m->x[3 * i + k]))
        return ds__puterr(err, errlen, DS_ERR_MESH, "vertex %d: coordinate %d is %g (not finite)", i, k,
                            (double)m->x[3 * i + k]);
  const double diag2 = ds_bbox_diag2(m->x, m->nvert);
  for (int t = 0; t < m->ntri; t++) {
    const int* f = m->tri + 3 * t;
    for (int a = 0; a < 3; a++) {
      if (f[a] < 0 || f[a] >= m->nvert)
        return ds__puterr(err, errlen, DS_ERR_MESH, "triangle %d: vertex index %d out of range (0..%d)", t,
                            f[a], m->nvert - 1);
      for (int b = 0; b < a; b++)
        if (f[a] == f[b])
          return ds__puterr(err, errlen, DS_ERR_MESH, "triangle %d: vertex %d repeated (%d, %d, %d)", t,
                              f[a], f[0], f[1], f[2]);
    }
    /* area <= 1e-12 * bbox^2, with area = |n|/2 */
    double area = 0.5 * ds_tri_area2(m->x + 3 * f[0], m->x + 3 * f[1], m->x + 3 * f[2]);
    if (!(area > 1e-12 * diag2))
      return ds__puterr(err, errlen, DS_ERR_MESH, "triangle %d (%d, %d, %d): degenerate, area %g", t, f[0],
                          f[1], f[2], area);
  }
  for (int t = 0; t < m->ntet; t++) {
    const int* e = m->tet + 4 * t;
    for (int a = 0; a < 4; a++) {
      if (e[a] < 0 || e[a] >= m->nvert)
        return ds__puterr(err, errlen, DS_ERR_MESH, "tet %d: vertex index %d out of range (0..%d)", t, e[a],
                            m->nvert - 1);
      for (int b = 0; b < a; b++)
        if (e[a] == e[b])
          return ds__puterr(err, errlen, DS_ERR_MESH, "tet %d: vertex %d repeated (%d, %d, %d, %d)", t, e[a],
                              e[0], e[1], e[2], e[3]);
    }
    double vol = ds_tet_signed_volume(m->x + 3 * e[0], m->x + 3 * e[1], m->x + 3 * e[2], m->x + 3 * e[3]);
    if (!(vol > 0.0))
      return ds__puterr(err, errlen, DS_ERR_MESH, "tet %d (%d, %d, %d, %d): signed volume %g <= 0", t, e[0],
                          e[1], e[2], e[3], vol);
  }
  return 0;
}

/* ---- cloth grid ---------------------------------------------------------------*/

int ds_mesh_cloth_grid(int nx, int ny, dsReal cell, dsMesh* out) {
  if (!out || nx < 1 || ny < 1 || !(cell > 0) || !isfinite((double)cell)) return DS_ERR_INVALID;
  long long nv = (long long)(nx + 1LL) * (ny + 1LL), nt = 2LL * nx * ny;
  if (nv > INT_MAX / 3 || nt > INT_MAX / 3) return DS_ERR_INVALID;
  dsMesh m;
  int rc = ds_mesh_alloc(&m, (int)nv, (int)nt, 0);
  if (rc) return rc;
  for (int j = 0; j <= ny; j++)
    for (int i = 0; i <= nx; i++) {
      dsReal* p = m.x + 3 * (j * (nx + 1) + i);
      p[0] = (dsReal)i * cell;
      p[1] = (dsReal)j * cell;
      p[2] = 0;
    }
  int* f = m.tri;
  for (int j = 0; j < ny; j++)
    for (int i = 0; i < nx; i++) {
      int v00 = j * (nx + 1) + i, v10 = v00 + 1, v01 = v00 + nx + 1, v11 = v01 + 1;
      /* (v00, v10, v11) and (v00, v11, v01): counter-clockwise from +z */
      f[0] = v00, f[1] = v10, f[2] = v11;
      f[3] = v00, f[4] = v11, f[5] = v01;
      f += 6;
    }
  *out = m;
  return 0;
}

/* ---- tet grid -------------------------------------------------------------------*/

int ds_mesh_tet_grid(int nx, int ny, int nz, dsReal hx, dsReal hy, dsReal hz, dsMesh* out) {
  if (!out || nx < 1 || ny < 1 || nz < 1) return DS_ERR_INVALID;
  if (!(hx > 0) || !(hy > 0) || !(hz > 0) || !isfinite((double)hx) || !isfinite((double)hy) ||
      !isfinite((double)hz))
    return DS_ERR_INVALID;
  long long nv = (nx + 1LL) * (ny + 1LL) * (nz + 1LL), nt = 6LL * nx * ny * nz;
  if (nv > INT_MAX / 3 || nt > INT_MAX / 4) return DS_ERR_INVALID;
  dsMesh m;
  int rc = ds_mesh_alloc(&m, (int)nv, 0, (int)nt);
  if (rc) return rc;
  const int sx = 1, sy = nx + 1, sz = (nx + 1) * (ny + 1);
  for (int k = 0; k <= nz; k++)
    for (int j = 0; j <= ny; j++)
      for (int i = 0; i <= nx; i++) {
        dsReal* p = m.x + 3 * (k * sz + j * sy + i);
        p[0] = (dsReal)i * hx;
        p[1] = (dsReal)j * hy;
        p[2] = (dsReal)k * hz;
      }
  /* Kuhn split: for each ordering (a, b, c) of the axes, the tet along the
   * monotone path 000 -> e_a -> e_a+e_b -> 111 of the cube. Every cube uses
   * the same six paths, so each square face is cut by the same diagonal from
   * both sides (conforming). Its orientation is the sign of the permutation;
   * odd ones get two vertices swapped. */
  static const int perms[6][3] = {{0, 1, 2}, {1, 2, 0}, {2, 0, 1}, {0, 2, 1}, {2, 1, 0}, {1, 0, 2}};
  const int stride[3] = {sx, sy, sz};
  int* e = m.tet;
  for (int k = 0; k < nz; k++)
    for (int j = 0; j < ny; j++)
      for (int i = 0; i < nx; i++) {
        int base = k * sz + j * sy + i;
        for (int p = 0; p < 6; p++) {
          int v0 = base, v1 = v0 + stride[perms[p][0]], v2 = v1 + stride[perms[p][1]],
              v3 = v2 + stride[perms[p][2]];
          if (p < 3) {
            e[0] = v0, e[1] = v1, e[2] = v2, e[3] = v3;
          } else {
            e[0] = v0, e[1] = v2, e[2] = v1, e[3] = v3;
          }
          e += 4;
        }
      }
  rc = ds_mesh_extract_boundary(&m, NULL, 0);
  if (rc) {
    ds_mesh_free(&m);
    return rc;
  }
  *out = m;
  return 0;
}

/* ---- boundary -------------------------------------------------------------------*/

/* A tet face with its sorted vertex key and id = 4*tet + (local vertex it is opposite to). */
typedef struct FaceRec {
  int k[3];
  int id;
} FaceRec;

static int cmp_face(const void* pa, const void* pb) {
  const FaceRec *a = (const FaceRec*)pa, *b = (const FaceRec*)pb;
  for (int i = 0; i < 3; i++)
    if (a->k[i] != b->k[i]) return a->k[i] < b->k[i] ? -1 : 1;
  return (a->id > b->id) - (a->id < b->id);
}

static void sort3(int* k) {
  int t;
  if (k[0] > k[1]) t = k[0], k[0] = k[1], k[1] = t;
  if (k[1] > k[2]) t = k[1], k[1] = k[2], k[2] = t;
  if (k[0] > k[1]) t = k[0], k[0] = k[1], k[1] = t;
}

/* Outward faces of a positive tet, by the local vertex they are opposite to. */
static const int k_tet_face[4][3] = {{1, 2, 3}, {0, 3, 2}, {0, 1, 3}, {0, 2, 1}};

int ds_mesh_extract_boundary(dsMesh* m, char* err, size_t errlen) {
  if (!m || m->ntet < 0 || (m->ntet > 0 && !m->tet)) return ds__puterr(err, errlen, DS_ERR_INVALID, "bad mesh");
  if ((size_t)m->ntet > (size_t)INT_MAX / 4) return ds__puterr(err, errlen, DS_ERR_INVALID, "too many tets");
  for (int t = 0; t < m->ntet; t++)
    for (int a = 0; a < 4; a++)
      if (m->tet[4 * t + a] < 0 || m->tet[4 * t + a] >= m->nvert)
        return ds__puterr(err, errlen, DS_ERR_MESH, "tet %d: vertex index %d out of range (0..%d)", t,
                            m->tet[4 * t + a], m->nvert - 1);
  const int nface = 4 * m->ntet;
  FaceRec* rec = NULL;
  if (nface > 0 && !(rec = (FaceRec*)ds__malloc((size_t)nface * sizeof *rec)))
    return ds__puterr(err, errlen, DS_ERR_NOMEM, "out of memory");
  for (int t = 0; t < m->ntet; t++)
    for (int f = 0; f < 4; f++) {
      FaceRec* r = rec + 4 * t + f;
      for (int a = 0; a < 3; a++) r->k[a] = m->tet[4 * t + k_tet_face[f][a]];
      sort3(r->k);
      r->id = 4 * t + f;
    }
  if (nface > 1) qsort(rec, (size_t)nface, sizeof *rec, cmp_face);
  /* Mark the faces that occur once; 3+ is a non-manifold solid. */
  unsigned char* once = NULL;
  if (nface > 0 && !(once = (unsigned char*)ds__calloc((size_t)nface, 1))) {
    ds__free(rec);
    return ds__puterr(err, errlen, DS_ERR_NOMEM, "out of memory");
  }
  int nb = 0;
  for (int i = 0; i < nface;) {
    int j = i + 1;
    while (j < nface && memcmp(rec[j].k, rec[i].k, sizeof rec[i].k) == 0) j++;
    if (j - i >= 3) {
      int rc = ds__puterr(err, errlen, DS_ERR_MESH, "face (%d, %d, %d) is shared by %d tets (%d, %d, %d, ...)",
                            rec[i].k[0], rec[i].k[1], rec[i].k[2], j - i, rec[i].id / 4, rec[i + 1].id / 4,
                            rec[i + 2].id / 4);
      ds__free(once);
      ds__free(rec);
      return rc;
    }
    if (j - i == 1) {
      once[rec[i].id] = 1;
      nb++;
    }
    i = j;
  }
  ds__free(rec);
  int* tri = NULL;
  if (nb > 0 && !(tri = (int*)ds__malloc((size_t)nb * 3 * sizeof(int)))) {
    ds__free(once);
    return ds__puterr(err, errlen, DS_ERR_NOMEM, "out of memory");
  }
  /* in id order: by tet, then by local face */
  int* f = tri;
  for (int id = 0; id < nface; id++)
    if (once[id]) {
      const int* e = m->tet + 4 * (id / 4);
      for (int a = 0; a < 3; a++) f[a] = e[k_tet_face[id % 4][a]];
      f += 3;
    }
  ds__free(once);
  ds__free(m->tri);
  m->tri = tri;
  m->ntri = nb;
  return 0;
}

/* ---- lumped mass ----------------------------------------------------------------*/

int ds_mesh_lumped_mass(const dsMesh* m, dsReal density, dsReal* mass) {
  if (!m || !mass || m->nvert < 0 || m->ntet < 0 || (m->ntet > 0 && (!m->tet || !m->x))) return DS_ERR_INVALID;
  for (int t = 0; t < m->ntet; t++)
    for (int a = 0; a < 4; a++)
      if (m->tet[4 * t + a] < 0 || m->tet[4 * t + a] >= m->nvert) return DS_ERR_MESH;
  for (int i = 0; i < m->nvert; i++) mass[i] = 0;
  /* in tet order: deterministic sums */
  for (int t = 0; t < m->ntet; t++) {
    const int* e = m->tet + 4 * t;
    double v = ds_tet_signed_volume(m->x + 3 * e[0], m->x + 3 * e[1], m->x + 3 * e[2], m->x + 3 * e[3]);
    if (!(v > 0.0)) {
      ds__log(DS_LOG_ERROR, "ds_mesh_lumped_mass: tet %d: signed volume %g <= 0", t, v);
      return DS_ERR_MESH;
    }
    for (int a = 0; a < 4; a++) mass[e[a]] += (dsReal)((double)density * v * 0.25);
  }
  return 0;
}

/* ---- bending edges ----------------------------------------------------------------*/

/* A triangle edge: sorted key (lo, hi), the triangle and its local edge
 * index a (the edge runs from vertex a to vertex a+1 mod 3). */
typedef struct EdgeRec {
  int lo, hi, t, a;
} EdgeRec;

static int cmp_edge(const void* pa, const void* pb) {
  const EdgeRec *a = (const EdgeRec*)pa, *b = (const EdgeRec*)pb;
  if (a->lo != b->lo) return a->lo < b->lo ? -1 : 1;
  if (a->hi != b->hi) return a->hi < b->hi ? -1 : 1;
  if (a->t != b->t) return a->t < b->t ? -1 : 1;
  return (a->a > b->a) - (a->a < b->a);
}

int ds_mesh_bending_edges(const dsMesh* m, int* nedge, int** edges, char* err, size_t errlen) {
  if (!m || !nedge || !edges || m->ntri < 0 || (m->ntri > 0 && !m->tri))
    return ds__puterr(err, errlen, DS_ERR_INVALID, "bad arguments");
  if ((size_t)m->ntri > (size_t)INT_MAX / 3) return ds__puterr(err, errlen, DS_ERR_INVALID, "too many triangles");
  for (int t = 0; t < m->ntri; t++) {
    const int* f = m->tri + 3 * t;
    for (int a = 0; a < 3; a++)
      if (f[a] < 0 || f[a] >= m->nvert)
        return ds__puterr(err, errlen, DS_ERR_MESH, "triangle %d: vertex index %d out of range (0..%d)", t, f[a],
                            m->nvert - 1);
    if (f[0] == f[1] || f[1] == f[2] || f[0] == f[2])
      return ds__puterr(err, errlen, DS_ERR_MESH, "triangle %d: repeated vertex (%d, %d, %d)", t, f[0], f[1], f[2]);
  }
  const int nrec = 3 * m->ntri;
  EdgeRec* rec = NULL;
  if (nrec > 0 && !(rec = (EdgeRec*)ds__malloc((size_t)nrec * sizeof *rec)))
    return ds__puterr(err, errlen, DS_ERR_NOMEM, "out of memory");
  for (int t = 0; t < m->ntri; t++)
    for (int a = 0; a < 3; a++) {
      int u = m->tri[3 * t + a], v = m->tri[3 * t + (a + 1) % 3];
      EdgeRec* r = rec + 3 * t + a;
      r->lo = u < v ? u : v;
      r->hi = u < v ? v : u;
      r->t = t;
      r->a = a;
    }
  if (nrec > 1) qsort(rec, (size_t)nrec, sizeof *rec, cmp_edge);
  int n = 0;
  for (int i = 0; i < nrec;) {
    int j = i + 1;
    while (j < nrec && rec[j].lo == rec[i].lo && rec[j].hi == rec[i].hi) j++;
    if (j - i >= 3) {
      int rc = ds__puterr(err, errlen, DS_ERR_MESH, "edge (%d, %d) is shared by %d triangles (%d, %d, %d, ...)",
                            rec[i].lo, rec[i].hi, j - i, rec[i].t, rec[i + 1].t, rec[i + 2].t);
      ds__free(rec);
      return rc;
    }
    if (j - i == 2) n++;
    i = j;
  }
  int* out = NULL;
  if (n > 0 && !(out = (int*)ds__malloc((size_t)n * 4 * sizeof(int)))) {
    ds__free(rec);
    return ds__puterr(err, errlen, DS_ERR_NOMEM, "out of memory");
  }
  int* o = out;
  for (int i = 0; i < nrec;) {
    int j = i + 1;
    while (j < nrec && rec[j].lo == rec[i].lo && rec[j].hi == rec[i].hi) j++;
    if (j - i == 2) {
      /* rec[i] is the lower-index triangle (sorted by t). It traverses the
       * edge x3 -> x4; x1 is its third vertex, x2 the other triangle's. */
      const int* fa = m->tri + 3 * rec[i].t;
      const int* fb = m->tri + 3 * rec[i + 1].t;
      int a = rec[i].a;
      int x3 = fa[a], x4 = fa[(a + 1) % 3], x1 = fa[(a + 2) % 3];
      int x2 = fb[(rec[i + 1].a + 2) % 3];
      o[0] = x1, o[1] = x2, o[2] = x3, o[3] = x4;
      o += 4;
    }
    i = j;
  }
  ds__free(rec);
  *nedge = n;
  *edges = out;
  return 0;
}

/* ---- rigid placement --------------------------------------------------------------*/

void ds_mesh_translate(dsMesh* m, const dsReal t[3]) {
  if (!m || !t || !m->x) return;
  for (int i = 0; i < m->nvert; i++)
    for (int k = 0; k < 3; k++) m->x[3 * i + k] += t[k];
}

int ds_mesh_rotate(dsMesh* m, const dsReal axis[3], dsReal angle) {
  if (!m || !axis) return DS_ERR_INVALID;
  double k[3] = {(double)axis[0], (double)axis[1], (double)axis[2]};
  double len = sqrt(k[0] * k[0] + k[1] * k[1] + k[2] * k[2]);
  if (!(len > 0.0) || !isfinite(len) || !isfinite((double)angle)) return DS_ERR_INVALID;
  for (int i = 0; i < 3; i++) k[i] /= len;
  /* Rodrigues: R = c I + s [k]x + (1 - c) k k^T */
  double c = cos((double)angle), s = sin((double)angle), C = 1.0 - c;
  double R[3][3] = {
      {c + C * k[0] * k[0], C * k[0] * k[1] - s * k[2], C * k[0] * k[2] + s * k[1]},
      {C * k[1] * k[0] + s * k[2], c + C * k[1] * k[1], C * k[1] * k[2] - s * k[0]},
      {C * k[2] * k[0] - s * k[1], C * k[2] * k[1] + s * k[0], c + C * k[2] * k[2]},
  };
  for (int i = 0; i < m->nvert; i++) {
    dsReal* p = m->x + 3 * i;
    double q[3] = {(double)p[0], (double)p[1], (double)p[2]};
    for (int r = 0; r < 3; r++) p[r] = (dsReal)(R[r][0] * q[0] + R[r][1] * q[1] + R[r][2] * q[2]);
  }
  return 0;
}

void ds_mesh_centroid(const dsMesh* m, dsReal c[3]) {
  if (!c) return;
  double s[3] = {0, 0, 0};
  if (m && m->x && m->nvert > 0) {
    for (int i = 0; i < m->nvert; i++)
      for (int k = 0; k < 3; k++) s[k] += (double)m->x[3 * i + k];
    for (int k = 0; k < 3; k++) s[k] /= m->nvert;
  }
  for (int k = 0; k < 3; k++) c[k] = (dsReal)s[k];
}

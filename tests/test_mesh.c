/* Mesh generators and topology helpers: counts, orientation, volumes,
 * closed outward boundaries, lumped mass, bending-edge ordering (the
 * FORMULAS.md dihedral angle is recomputed here), gear and walker geometry,
 * rigid placement, validation messages, allocation failure. */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dsim/dsim.h"
#include "dsim/mesh.h"
#include "base/internal.h"
#include "tests/dstest.h"

/* tolerance on geometric sums: tight in double, loose in float */
#define PI 3.14159265358979323846
#define GTOL (DS_SINGLE ? 1e-5 : 1e-12)

static void sub3(double r[3], const dsReal* a, const dsReal* b) {
  for (int k = 0; k < 3; k++) r[k] = (double)a[k] - (double)b[k];
}
static void cross3(double r[3], const double a[3], const double b[3]) {
  r[0] = a[1] * b[2] - a[2] * b[1];
  r[1] = a[2] * b[0] - a[0] * b[2];
  r[2] = a[0] * b[1] - a[1] * b[0];
}
static double dot3(const double a[3], const double b[3]) { return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]; }
static double norm3(const double a[3]) { return sqrt(dot3(a, a)); }

static double tet_vol(const dsMesh* m, int t) {
  const int* e = m->tet + 4 * t;
  double u[3], v[3], w[3], n[3];
  sub3(u, m->x + 3 * e[1], m->x + 3 * e[0]);
  sub3(v, m->x + 3 * e[2], m->x + 3 * e[0]);
  sub3(w, m->x + 3 * e[3], m->x + 3 * e[0]);
  cross3(n, u, v);
  return dot3(n, w) / 6.0;
}

/* normal (not normalised, |n| = 2*area) of triangle t */
static void tri_normal(const dsMesh* m, int t, double n[3]) {
  const int* f = m->tri + 3 * t;
  double u[3], v[3];
  sub3(u, m->x + 3 * f[1], m->x + 3 * f[0]);
  sub3(v, m->x + 3 * f[2], m->x + 3 * f[0]);
  cross3(n, u, v);
}

/* FORMULAS.md dihedral angle of bending edge (x1, x2, x3, x4) */
static double dihedral(const dsReal* x, const int* e) {
  const dsReal *x1 = x + 3 * e[0], *x2 = x + 3 * e[1], *x3 = x + 3 * e[2], *x4 = x + 3 * e[3];
  double a[3], b[3], n1[3], n2[3], ed[3], c[3];
  sub3(a, x3, x1);
  sub3(b, x4, x1);
  cross3(n1, a, b);
  sub3(a, x4, x2);
  sub3(b, x3, x2);
  cross3(n2, a, b);
  sub3(ed, x4, x3);
  double l1 = norm3(n1), l2 = norm3(n2), le = norm3(ed);
  for (int k = 0; k < 3; k++) n1[k] /= l1, n2[k] /= l2, ed[k] /= le;
  cross3(c, n2, n1);
  return atan2(dot3(c, ed), dot3(n1, n2));
}

/* Sum of the total tet volume; checks every tet is positive. */
static double check_tets_positive(const dsMesh* m) {
  double vol = 0;
  int bad = 0;
  for (int t = 0; t < m->ntet; t++) {
    double v = tet_vol(m, t);
    if (!(v > 0)) bad++;
    vol += v;
  }
  CHECK_INT_EQ(bad, 0);
  return vol;
}

/* The boundary m->tri of the tets is closed (every directed edge is matched
 * by exactly one opposite directed edge, none repeated), each triangle is a
 * face of a tet with its normal pointing away from that tet's centroid, and
 * the volume it encloses (divergence theorem) equals the tet volume. Returns
 * the total boundary area. */
static double check_boundary(const dsMesh* m, double tet_volume) {
  int nt = m->ntri;
  int bad_closed = 0, bad_face = 0, bad_out = 0;
  /* directed edges: (u, v) must occur once and (v, u) once */
  for (int t = 0; t < nt; t++)
    for (int a = 0; a < 3; a++) {
      int u = m->tri[3 * t + a], v = m->tri[3 * t + (a + 1) % 3];
      int same = 0, opp = 0;
      for (int s = 0; s < nt; s++)
        for (int b = 0; b < 3; b++) {
          int p = m->tri[3 * s + b], q = m->tri[3 * s + (b + 1) % 3];
          same += (p == u && q == v);
          opp += (p == v && q == u);
        }
      if (same != 1 || opp != 1) bad_closed++;
    }
  CHECK_INT_EQ(bad_closed, 0);
  double area = 0, encl = 0;
  for (int t = 0; t < nt; t++) {
    const int* f = m->tri + 3 * t;
    int owner = -1, nown = 0;
    for (int k = 0; k < m->ntet; k++) {
      const int* e = m->tet + 4 * k;
      int hit = 0;
      for (int a = 0; a < 3; a++)
        for (int b = 0; b < 4; b++) hit += (f[a] == e[b]);
      if (hit == 3) owner = k, nown++;
    }
    if (nown != 1) {
      bad_face++;
      continue;
    }
    double n[3], c[3] = {0, 0, 0}, d[3];
    tri_normal(m, t, n);
    for (int b = 0; b < 4; b++)
      for (int k = 0; k < 3; k++) c[k] += 0.25 * (double)m->x[3 * m->tet[4 * owner + b] + k];
    for (int k = 0; k < 3; k++) d[k] = (double)m->x[3 * f[0] + k] - c[k];
    if (!(dot3(n, d) > 0)) bad_out++;
    area += 0.5 * norm3(n);
    /* enclosed volume: sum p0 . (p1 x p2) / 6 */
    double p0[3], p1[3], p2[3], cr[3];
    for (int k = 0; k < 3; k++) {
      p0[k] = m->x[3 * f[0] + k];
      p1[k] = m->x[3 * f[1] + k];
      p2[k] = m->x[3 * f[2] + k];
    }
    cross3(cr, p1, p2);
    encl += dot3(p0, cr) / 6.0;
  }
  CHECK_INT_EQ(bad_face, 0);
  CHECK_INT_EQ(bad_out, 0);
  CHECK_CLOSE(encl, tet_volume, GTOL, GTOL);
  return area;
}

static void test_cloth(void) {
  dsMesh m = {0, NULL, 0, NULL, 0, NULL};
  CHECK_INT_EQ(ds_mesh_cloth_grid(8, 8, (dsReal)0.125, &m), 0);
  CHECK_INT_EQ(m.nvert, 81);
  CHECK_INT_EQ(m.ntri, 128);
  CHECK_INT_EQ(m.ntet, 0);
  CHECK_INT_EQ(ds_mesh_validate(&m, NULL, 0), 0);
  /* vertex (i, j) at index j*(nx+1)+i */
  CHECK_CLOSE(m.x[3 * (2 * 9 + 5) + 0], 5 * 0.125, 0, 0);
  CHECK_CLOSE(m.x[3 * (2 * 9 + 5) + 1], 2 * 0.125, 0, 0);
  CHECK_CLOSE(m.x[3 * 80 + 0], 1.0, 0, 0);
  int notup = 0;
  for (int t = 0; t < m.ntri; t++) {
    double n[3];
    tri_normal(&m, t, n);
    if (!(n[2] > 0 && fabs(n[0]) < 1e-15 && fabs(n[1]) < 1e-15 && fabs(0.5 * n[2] - 0.125 * 0.125 / 2) < 1e-15))
      notup++;
  }
  CHECK_INT_EQ(notup, 0);

  int ne = -1, *ed = NULL;
  CHECK_INT_EQ(ds_mesh_bending_edges(&m, &ne, &ed, NULL, 0), 0);
  CHECK_INT_EQ(ne, 176);
  int nonzero = 0, unsorted = 0, notri = 0;
  for (int i = 0; i < ne; i++) {
    const int* e = ed + 4 * i;
    if (fabs(dihedral(m.x, e)) > 1e-12) nonzero++;
    if (i > 0) {
      const int* p = ed + 4 * (i - 1);
      int lo0 = p[2] < p[3] ? p[2] : p[3], hi0 = p[2] < p[3] ? p[3] : p[2];
      int lo1 = e[2] < e[3] ? e[2] : e[3], hi1 = e[2] < e[3] ? e[3] : e[2];
      if (!(lo0 < lo1 || (lo0 == lo1 && hi0 < hi1))) unsorted++;
    }
    /* (x1, x3, x4) and (x2, x4, x3) are triangles of the mesh, as oriented */
    int f1 = 0, f2 = 0;
    for (int t = 0; t < m.ntri; t++)
      for (int r = 0; r < 3; r++) {
        const int* f = m.tri + 3 * t;
        if (f[r] == e[0] && f[(r + 1) % 3] == e[2] && f[(r + 2) % 3] == e[3]) f1++;
        if (f[r] == e[1] && f[(r + 1) % 3] == e[3] && f[(r + 2) % 3] == e[2]) f2++;
      }
    if (f1 != 1 || f2 != 1) notri++;
  }
  CHECK_INT_EQ(nonzero, 0);
  CHECK_INT_EQ(unsorted, 0);
  CHECK_INT_EQ(notri, 0);
  ds_mesh_free_ints(ed);

  /* fold along the edge x = 0.5 of the sheet (lift the right part towards
   * the normal +z): every bending edge on the fold line has theta > 0 */
  for (int i = 0; i < m.nvert; i++)
    if (m.x[3 * i] > 0.5) {
      double dx = m.x[3 * i] - 0.5;
      m.x[3 * i] = (dsReal)(0.5 + dx * cos(0.3));
      m.x[3 * i + 2] = (dsReal)(dx * sin(0.3));
    }
  CHECK_INT_EQ(ds_mesh_bending_edges(&m, &ne, &ed, NULL, 0), 0);
  int onfold = 0, badsign = 0;
  for (int i = 0; i < ne; i++) {
    const int* e = ed + 4 * i;
    if (m.x[3 * e[2]] == (dsReal)0.5 && m.x[3 * e[3]] == (dsReal)0.5) {
      onfold++;
      if (fabs(dihedral(m.x, e) - 0.3) > (DS_SINGLE ? 1e-5 : 1e-9)) badsign++;
    } else if (fabs(dihedral(m.x, e)) > (DS_SINGLE ? 1e-5 : 1e-9)) {
      badsign++;
    }
  }
  CHECK_INT_EQ(onfold, 8);
  CHECK_INT_EQ(badsign, 0);
  ds_mesh_free_ints(ed);
  ds_mesh_free(&m);
  CHECK(m.x == NULL && m.nvert == 0 && m.tri == NULL);
  ds_mesh_free(&m); /* twice is fine */
  ds_mesh_free(NULL);

  /* counts for several sizes, square and not */
  for (int d = 1; d <= 31; d += 5) {
    CHECK_INT_EQ(ds_mesh_cloth_grid(d, d, (dsReal)0.125, &m), 0);
    CHECK_INT_EQ(m.nvert, (d + 1) * (d + 1));
    CHECK_INT_EQ(m.ntri, 2 * d * d);
    CHECK_INT_EQ(ds_mesh_bending_edges(&m, &ne, &ed, NULL, 0), 0);
    CHECK_INT_EQ(ne, 3 * d * d - 2 * d);
    ds_mesh_free_ints(ed);
    ds_mesh_free(&m);
  }
  CHECK_INT_EQ(ds_mesh_cloth_grid(3, 5, 1, &m), 0);
  CHECK_INT_EQ(ds_mesh_bending_edges(&m, &ne, &ed, NULL, 0), 0);
  CHECK_INT_EQ(ne, 3 * 6 + 4 * 5 + 3 * 5 - 2 * (3 + 5));
  ds_mesh_free_ints(ed);
  ds_mesh_free(&m);

  dsMesh keep = {0, NULL, 0, NULL, 0, NULL};
  CHECK_INT_EQ(ds_mesh_cloth_grid(0, 4, 1, &keep), DS_ERR_INVALID);
  CHECK_INT_EQ(ds_mesh_cloth_grid(4, 4, 0, &keep), DS_ERR_INVALID);
  CHECK_INT_EQ(ds_mesh_cloth_grid(4, 4, (dsReal)NAN, &keep), DS_ERR_INVALID);
  CHECK_INT_EQ(ds_mesh_cloth_grid(100000, 100000, 1, &keep), DS_ERR_INVALID);
  CHECK(keep.x == NULL);
}

/* Two triangles (x1 = 2, x3 = 0, x4 = 1 ; x2 = 3) folded both ways: the sign
 * convention of mesh.h (theta > 0 folding towards n1). */
static void test_bending_sign(void) {
  dsReal x[12] = {0, 0, 0, 1, 0, 0, (dsReal)0.5, -1, 0, (dsReal)0.5, 1, 0};
  int tri[6] = {2, 0, 1, 3, 1, 0}; /* both with normal (0,0,-1)... */
  dsMesh m = {4, x, 2, tri, 0, NULL};
  int ne, *ed;
  CHECK_INT_EQ(ds_mesh_bending_edges(&m, &ne, &ed, NULL, 0), 0);
  CHECK_INT_EQ(ne, 1);
  CHECK_INT_EQ(ed[0], 2);
  CHECK_INT_EQ(ed[1], 3);
  CHECK_INT_EQ(ed[2], 0);
  CHECK_INT_EQ(ed[3], 1);
  double n1[3];
  tri_normal(&m, 0, n1);
  CHECK(n1[2] < 0);
  CHECK_CLOSE(dihedral(x, ed), 0.0, 0, 1e-15);
  /* move x2 to the side n1 points to (-z): positive angle phi */
  double phi = 0.4;
  x[10] = (dsReal)cos(phi);
  x[11] = (dsReal)-sin(phi);
  CHECK_CLOSE(dihedral(x, ed), phi, 1e-6, 0);
  x[11] = (dsReal)sin(phi);
  CHECK_CLOSE(dihedral(x, ed), -phi, 1e-6, 0);
  ds_mesh_free_ints(ed);
  /* inconsistent orientation of the second triangle: still 0 when flat */
  x[10] = 1;
  x[11] = 0;
  int tri2[6] = {2, 0, 1, 3, 0, 1};
  m.tri = tri2;
  CHECK_INT_EQ(ds_mesh_bending_edges(&m, &ne, &ed, NULL, 0), 0);
  CHECK_INT_EQ(ne, 1);
  CHECK_CLOSE(dihedral(x, ed), 0.0, 0, 1e-15);
  ds_mesh_free_ints(ed);

  /* an edge with three triangles is refused, naming it */
  dsReal x5[15] = {0, 0, 0, 1, 0, 0, (dsReal)0.5, -1, 0, (dsReal)0.5, 1, 0, (dsReal)0.5, 0, 1};
  int tri3[9] = {2, 0, 1, 3, 1, 0, 4, 0, 1};
  dsMesh m3 = {5, x5, 3, tri3, 0, NULL};
  char err[256] = "";
  ne = 77;
  ed = NULL;
  CHECK_INT_EQ(ds_mesh_bending_edges(&m3, &ne, &ed, err, sizeof err), DS_ERR_MESH);
  CHECK_STR_CONTAINS(err, "edge (0, 1) is shared by 3 triangles");
  CHECK_INT_EQ(ne, 77);
  CHECK(ed == NULL);
  CHECK_INT_EQ(ds_mesh_bending_edges(&m3, &ne, &ed, NULL, 0), DS_ERR_MESH);
  /* no interior edges: NULL list */
  dsMesh m1 = {4, x, 1, tri, 0, NULL};
  CHECK_INT_EQ(ds_mesh_bending_edges(&m1, &ne, &ed, NULL, 0), 0);
  CHECK_INT_EQ(ne, 0);
  CHECK(ed == NULL);
}

static void test_tet_grid(void) {
  const int nx = 2, ny = 3, nz = 4;
  const double hx = 0.5, hy = 0.25, hz = 1.0;
  dsMesh m = {0, NULL, 0, NULL, 0, NULL};
  CHECK_INT_EQ(ds_mesh_tet_grid(nx, ny, nz, (dsReal)hx, (dsReal)hy, (dsReal)hz, &m), 0);
  CHECK_INT_EQ(m.nvert, 3 * 4 * 5);
  CHECK_INT_EQ(m.ntet, 6 * nx * ny * nz);
  CHECK_INT_EQ(ds_mesh_validate(&m, NULL, 0), 0);
  double a = nx * hx, b = ny * hy, c = nz * hz;
  double vol = check_tets_positive(&m);
  CHECK_CLOSE(vol, a * b * c, GTOL, 0);
  /* conforming split: every square face is cut the same way from both sides,
   * otherwise unmatched interior faces would show up in the boundary */
  CHECK_INT_EQ(m.ntri, 4 * (nx * ny + ny * nz + nx * nz));
  double area = check_boundary(&m, vol);
  CHECK_CLOSE(area, 2 * (a * b + b * c + c * a), GTOL, 0);
  /* every boundary vertex lies on the box surface */
  int inside = 0;
  for (int t = 0; t < 3 * m.ntri; t++) {
    const dsReal* p = m.x + 3 * m.tri[t];
    int on = fabs(p[0]) < 1e-12 || fabs(p[0] - a) < 1e-12 || fabs(p[1]) < 1e-12 || fabs(p[1] - b) < 1e-12 ||
             fabs(p[2]) < 1e-12 || fabs(p[2] - c) < 1e-12;
    if (!on) inside++;
  }
  CHECK_INT_EQ(inside, 0);

  /* lumped mass */
  dsReal* mass = (dsReal*)malloc(sizeof(dsReal) * (size_t)m.nvert);
  CHECK_INT_EQ(ds_mesh_lumped_mass(&m, (dsReal)7.5, mass), 0);
  double tot = 0;
  for (int i = 0; i < m.nvert; i++) tot += mass[i];
  CHECK_CLOSE(tot, 7.5 * a * b * c, GTOL, 0);
  /* corner 000 is in all 6 tets of its cell: density * Vcell / 4 */
  CHECK_CLOSE(mass[0], 7.5 * hx * hy * hz / 4, GTOL, 0);
  /* corner (nx,0,0) lies in 2 of its cell's tets */
  CHECK_CLOSE(mass[nx], 7.5 * hx * hy * hz / 6 * 2 / 4, GTOL, 0);
  CHECK_INT_EQ(ds_mesh_lumped_mass(&m, 1, NULL), DS_ERR_INVALID);
  /* an inverted tet is refused */
  int sw = m.tet[2];
  m.tet[2] = m.tet[3];
  m.tet[3] = sw;
  CHECK_INT_EQ(ds_mesh_lumped_mass(&m, 1, mass), DS_ERR_MESH);
  char err[256] = "";
  CHECK_INT_EQ(ds_mesh_validate(&m, err, sizeof err), DS_ERR_MESH);
  CHECK_STR_CONTAINS(err, "tet 0 (");
  CHECK_STR_CONTAINS(err, "signed volume -0.0208333");
  free(mass);
  ds_mesh_free(&m);

  /* one cube: 6 tets, 12 boundary triangles of total area 6 */
  CHECK_INT_EQ(ds_mesh_tet_grid(1, 1, 1, 1, 1, 1, &m), 0);
  CHECK_INT_EQ(m.ntet, 6);
  CHECK_INT_EQ(m.ntri, 12);
  CHECK_CLOSE(check_boundary(&m, check_tets_positive(&m)), 6.0, GTOL, 0);
  ds_mesh_free(&m);
  CHECK_INT_EQ(ds_mesh_tet_grid(1, 0, 1, 1, 1, 1, &m), DS_ERR_INVALID);
  CHECK_INT_EQ(ds_mesh_tet_grid(1, 1, 1, 1, -1, 1, &m), DS_ERR_INVALID);
}

static void test_boundary_single_and_bad(void) {
  dsReal x[15] = {0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, -1};
  int tet[4] = {0, 1, 2, 3};
  dsMesh m = {4, x, 0, NULL, 1, tet};
  /* ds_mesh_extract_boundary allocates m.tri; work on a copy of the arrays */
  CHECK_INT_EQ(ds_mesh_extract_boundary(&m, NULL, 0), 0);
  CHECK_INT_EQ(m.ntri, 4);
  /* faces opposite vertex 0, 1, 2, 3 in that order */
  const int want[12] = {1, 2, 3, 0, 3, 2, 0, 1, 3, 0, 2, 1};
  int same = 1;
  for (int i = 0; i < 12; i++) same &= (m.tri[i] == want[i]);
  CHECK(same);
  CHECK_CLOSE(check_boundary(&m, 1.0 / 6.0), 1.5 + sqrt(3.0) / 2, GTOL, 0);
  ds_mesh_free_ints(m.tri);
  m.tri = NULL;
  m.ntri = 0;

  /* three tets on face (0, 1, 2) */
  dsReal x6[18] = {0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, -1, 0, 0, 2};
  int tet3[12] = {0, 1, 2, 3, 0, 2, 1, 4, 0, 1, 2, 5};
  dsMesh b = {6, x6, 0, NULL, 3, tet3};
  char err[256] = "";
  CHECK_INT_EQ(ds_mesh_extract_boundary(&b, err, sizeof err), DS_ERR_MESH);
  CHECK_STR_CONTAINS(err, "face (0, 1, 2) is shared by 3 tets (0, 1, 2");
  CHECK(b.tri == NULL && b.ntri == 0);
  CHECK_INT_EQ(ds_mesh_extract_boundary(&b, NULL, 0), DS_ERR_MESH);
  tet3[5] = 9;
  CHECK_INT_EQ(ds_mesh_extract_boundary(&b, err, sizeof err), DS_ERR_MESH);
  CHECK_STR_CONTAINS(err, "tet 1: vertex index 9 out of range (0..5)");
}

static void test_validate(void) {
  dsReal x[12] = {0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1};
  int tri[3] = {0, 1, 2};
  int tet[4] = {0, 1, 2, 3};
  dsMesh m = {4, x, 1, tri, 1, tet};
  char err[256];
  CHECK_INT_EQ(ds_mesh_validate(&m, err, sizeof err), 0);
  CHECK_INT_EQ(ds_mesh_validate(NULL, err, sizeof err), DS_ERR_INVALID);
  tri[2] = 4;
  CHECK_INT_EQ(ds_mesh_validate(&m, err, sizeof err), DS_ERR_MESH);
  CHECK_STR_EQ(err, "triangle 0: vertex index 4 out of range (0..3)");
  tri[2] = 1;
  CHECK_INT_EQ(ds_mesh_validate(&m, err, sizeof err), DS_ERR_MESH);
  CHECK_STR_EQ(err, "triangle 0: vertex 1 repeated (0, 1, 1)");
  tri[2] = 2;
  x[6] = 2;
  x[7] = 0; /* vertex 2 = (2,0,0): triangle 0,1,2 collinear, tet flat */
  CHECK_INT_EQ(ds_mesh_validate(&m, err, sizeof err), DS_ERR_MESH);
  CHECK_STR_CONTAINS(err, "triangle 0 (0, 1, 2): degenerate, area 0");
  x[6] = 0;
  x[7] = 1;
  tet[3] = 0;
  CHECK_INT_EQ(ds_mesh_validate(&m, err, sizeof err), DS_ERR_MESH);
  CHECK_STR_EQ(err, "tet 0: vertex 0 repeated (0, 1, 2, 0)");
  tet[3] = -1;
  CHECK_INT_EQ(ds_mesh_validate(&m, err, sizeof err), DS_ERR_MESH);
  CHECK_STR_EQ(err, "tet 0: vertex index -1 out of range (0..3)");
  tet[3] = 3;
  tet[1] = 2;
  tet[2] = 1;
  CHECK_INT_EQ(ds_mesh_validate(&m, err, sizeof err), DS_ERR_MESH);
  CHECK_STR_CONTAINS(err, "tet 0 (0, 2, 1, 3): signed volume -0.166667 <= 0");
  tet[1] = 1;
  tet[2] = 2;
  x[5] = (dsReal)NAN;
  CHECK_INT_EQ(ds_mesh_validate(&m, err, sizeof err), DS_ERR_MESH);
  CHECK_STR_CONTAINS(err, "vertex 1: coordinate 2 is nan (not finite)");
  CHECK_INT_EQ(ds_mesh_validate(&m, NULL, 0), DS_ERR_MESH);
  x[5] = 0;
  m.x = NULL;
  CHECK_INT_EQ(ds_mesh_validate(&m, err, sizeof err), DS_ERR_MESH);
  /* small buffer: truncated, terminated */
  m.x = x;
  tet[3] = 7;
  char small[8];
  CHECK_INT_EQ(ds_mesh_validate(&m, small, sizeof small), DS_ERR_MESH);
  CHECK_STR_EQ(small, "tet 0: ");
}

static void test_gear(void) {
  dsGearDef def = ds_default_gear_def();
  dsMesh m = {0, NULL, 0, NULL, 0, NULL};
  int rc = ds_mesh_gear(&def, &m);
  CHECK_INT_EQ(rc, 0);
  if (rc) return;
  CHECK(m.nvert >= 430 && m.nvert <= 530);
  CHECK(m.ntet >= 1030 && m.ntet <= 1270);
  CHECK_INT_EQ(m.nvert, 480);
  CHECK_INT_EQ(m.ntet, 1152);
  CHECK_INT_EQ(m.ntri, 896);
  CHECK_INT_EQ(ds_mesh_validate(&m, NULL, 0), 0);
  double lo[3] = {1e9, 1e9, 1e9}, hi[3] = {-1e9, -1e9, -1e9};
  for (int i = 0; i < m.nvert; i++)
    for (int k = 0; k < 3; k++) {
      double v = m.x[3 * i + k];
      if (v < lo[k]) lo[k] = v;
      if (v > hi[k]) hi[k] = v;
    }
  CHECK(hi[0] <= 1.84 + 1e-6 && lo[0] >= -1.84 - 1e-6);
  CHECK(hi[1] <= 1.84 + 1e-6 && lo[1] >= -1.84 - 1e-6);
  CHECK(hi[2] <= 1.14 + 1e-6 && lo[2] >= -1.14 - 1e-6);
  CHECK(hi[0] > 1.8 && hi[2] > 1.13); /* and it fills them */
  double vol = check_tets_positive(&m);
  CHECK_CLOSE(vol, 9.68, 2e-3, 0);
  check_boundary(&m, vol);
  dsReal c[3];
  ds_mesh_centroid(&m, c);
  CHECK_CLOSE(c[0], 0, 0, 1e-9);
  CHECK_CLOSE(c[1], 0, 0, 1e-9);
  CHECK_CLOSE(c[2], 0, 0, 1e-9);
  /* lumped mass of density 1 sums to the volume */
  dsReal* mass = (dsReal*)malloc(sizeof(dsReal) * (size_t)m.nvert);
  CHECK_INT_EQ(ds_mesh_lumped_mass(&m, 1, mass), 0);
  double tot = 0, mmin = 1e9;
  for (int i = 0; i < m.nvert; i++) tot += mass[i], mmin = mass[i] < mmin ? mass[i] : mmin;
  CHECK_CLOSE(tot, vol, GTOL, 0);
  CHECK(mmin > 0);
  free(mass);
  ds_mesh_free(&m);

  /* other parameters: still a closed, positive solid */
  def.teeth = 7;
  def.layers = 3;
  rc = ds_mesh_gear(&def, &m);
  CHECK_INT_EQ(rc, 0);
  if (rc) return;
  CHECK_INT_EQ(m.nvert, 10 * 7 * 4);
  CHECK_INT_EQ(m.ntet, 3 * 3 * 12 * 7);
  CHECK_INT_EQ(ds_mesh_validate(&m, NULL, 0), 0);
  check_boundary(&m, check_tets_positive(&m));
  ds_mesh_free(&m);
  def = ds_default_gear_def();
  def.hub_radius = def.root_radius;
  CHECK_INT_EQ(ds_mesh_gear(&def, &m), DS_ERR_INVALID);
  def = ds_default_gear_def();
  def.teeth = 2;
  CHECK_INT_EQ(ds_mesh_gear(&def, &m), DS_ERR_INVALID);
  CHECK_INT_EQ(ds_mesh_gear(NULL, &m), DS_ERR_INVALID);
}

static void test_walker(void) {
  dsMesh m = {0, NULL, 0, NULL, 0, NULL};
  CHECK_INT_EQ(ds_mesh_walker(&m), 0);
  CHECK_INT_EQ(m.nvert, 74);
  CHECK_INT_EQ(m.ntri, 104);
  CHECK_INT_EQ(m.ntet, 0);
  CHECK_INT_EQ(ds_mesh_validate(&m, NULL, 0), 0);
  const double h = 2.0 / 9.0;
  int badarea = 0;
  for (int t = 0; t < m.ntri; t++) {
    double n[3];
    tri_normal(&m, t, n);
    /* counter-clockwise from +z and area h^2/2 */
    if (!(n[2] > 0) || fabs(0.5 * n[2] - h * h / 2) > (DS_SINGLE ? 1e-7 : 1e-12) || n[0] != 0 || n[1] != 0) badarea++;
  }
  CHECK_INT_EQ(badarea, 0);
  double ymin = 1e9, ymax = -1e9, xmin = 1e9, xmax = -1e9;
  for (int i = 0; i < m.nvert; i++) {
    ymin = fmin(ymin, m.x[3 * i + 1]);
    ymax = fmax(ymax, m.x[3 * i + 1]);
    xmin = fmin(xmin, m.x[3 * i]);
    xmax = fmax(xmax, m.x[3 * i]);
    CHECK(m.x[3 * i + 2] == 0);
  }
  CHECK_CLOSE(ymin, 0.057, GTOL, 0);
  CHECK_CLOSE(ymax, 0.057 + 8 * h, GTOL, 0);
  CHECK_CLOSE(xmin, -1, GTOL, 0);
  CHECK_CLOSE(xmax, 1, GTOL, 0);
  /* 6 vertices on each of the 4 leg rows, 10 on each of the 5 body rows */
  int rows[9] = {0};
  for (int i = 0; i < m.nvert; i++) {
    int r = (int)lround((m.x[3 * i + 1] - 0.057) / h);
    if (r >= 0 && r < 9) rows[r]++;
  }
  for (int r = 0; r < 9; r++) CHECK_INT_EQ(rows[r], r < 4 ? 6 : 10);
  /* a manifold sheet (a disk): interior edges = (3*104 - boundary edges)/2
   * with 42 boundary edges: top 9, outer sides 8 + 8, leg bottoms 2 + 2,
   * inner leg sides 4 + 4, underside of the body between the legs 5; and
   * Euler for a disk: E = V + F - 1 = 177 edges, 135 of them interior. */
  int ne, *ed;
  CHECK_INT_EQ(ds_mesh_bending_edges(&m, &ne, &ed, NULL, 0), 0);
  CHECK_INT_EQ(ne, (3 * 104 - 42) / 2);
  CHECK_INT_EQ(ne, 74 + 104 - 1 - 42);
  ds_mesh_free_ints(ed);
  ds_mesh_free(&m);
}

static void test_placement(void) {
  dsMesh a = {0, NULL, 0, NULL, 0, NULL}, b = a;
  CHECK_INT_EQ(ds_mesh_cloth_grid(3, 2, (dsReal)0.5, &a), 0);
  CHECK_INT_EQ(ds_mesh_cloth_grid(3, 2, (dsReal)0.5, &b), 0);
  const dsReal axis[3] = {1, (dsReal)0.5, 0};
  double l = sqrt(1.25);
  const dsReal unit[3] = {(dsReal)(1 / l), (dsReal)(0.5 / l), 0};
  CHECK_INT_EQ(ds_mesh_rotate(&a, axis, (dsReal)(PI / 2)), 0);
  CHECK_INT_EQ(ds_mesh_rotate(&b, unit, (dsReal)(PI / 2)), 0);
  double maxd = 0;
  for (int i = 0; i < 3 * a.nvert; i++) maxd = fmax(maxd, fabs((double)a.x[i] - (double)b.x[i]));
  CHECK(maxd < (DS_SINGLE ? 1e-6 : 1e-15));
  /* rigid: edge lengths kept (the unnormalised original sheared the sheet) */
  double d[3];
  sub3(d, a.x + 3 * 1, a.x + 0);
  CHECK_CLOSE(norm3(d), 0.5, GTOL, 0);
  sub3(d, a.x + 3 * 4, a.x + 0);
  CHECK_CLOSE(norm3(d), 0.5, GTOL, 0);
  /* the axis direction is fixed: vertex (2,1)*0.5 = (1, 0.5, 0) stays put */
  CHECK_CLOSE(a.x[3 * 6 + 0], 1.0, GTOL, GTOL);
  CHECK_CLOSE(a.x[3 * 6 + 1], 0.5, GTOL, GTOL);
  CHECK_CLOSE(a.x[3 * 6 + 2], 0.0, GTOL, GTOL);
  const dsReal zero[3] = {0, 0, 0};
  CHECK_INT_EQ(ds_mesh_rotate(&a, zero, 1), DS_ERR_INVALID);
  CHECK_INT_EQ(ds_mesh_rotate(&a, NULL, 1), DS_ERR_INVALID);
  ds_mesh_free(&a);
  ds_mesh_free(&b);

  /* rotation about z by 90 degrees maps (1,0,0) to (0,1,0); translate and centroid */
  CHECK_INT_EQ(ds_mesh_cloth_grid(2, 2, 1, &a), 0);
  const dsReal z[3] = {0, 0, 3};
  CHECK_INT_EQ(ds_mesh_rotate(&a, z, (dsReal)(PI / 2)), 0);
  CHECK_CLOSE(a.x[3 * 1 + 0], 0, 0, GTOL);
  CHECK_CLOSE(a.x[3 * 1 + 1], 1, GTOL, 0);
  const dsReal t[3] = {-5, 2, (dsReal)0.25};
  ds_mesh_translate(&a, t);
  dsReal c[3];
  ds_mesh_centroid(&a, c);
  CHECK_CLOSE(c[0], -5 - 1, GTOL, GTOL);
  CHECK_CLOSE(c[1], 2 + 1, GTOL, GTOL);
  CHECK_CLOSE(c[2], 0.25, GTOL, GTOL);
  ds_mesh_free(&a);
  ds_mesh_centroid(&a, c);
  CHECK(c[0] == 0 && c[1] == 0 && c[2] == 0);
}

/* ---- allocation failure: the k-th allocation fails ---------------------------*/
static long g_count = 0, g_fail_at = -1;
static void* fail_malloc(size_t n) { return ++g_count == g_fail_at ? NULL : malloc(n); }
static void* fail_realloc(void* p, size_t n) { return ++g_count == g_fail_at ? NULL : realloc(p, n); }
static void* fail_calloc(size_t c, size_t n) { return ++g_count == g_fail_at ? NULL : calloc(c, n); }

static int gen_all(void) {
  dsMesh m = {0, NULL, 0, NULL, 0, NULL};
  int rc, ne, *ed;
  if ((rc = ds_mesh_cloth_grid(4, 3, 1, &m))) return rc;
  rc = ds_mesh_bending_edges(&m, &ne, &ed, NULL, 0);
  ds_mesh_free(&m);
  if (rc) return rc;
  ds_mesh_free_ints(ed);
  if ((rc = ds_mesh_tet_grid(2, 1, 2, 1, 1, 1, &m))) return rc;
  ds_mesh_free(&m);
  dsGearDef g = ds_default_gear_def();
  g.teeth = 4;
  g.layers = 1;
  if ((rc = ds_mesh_gear(&g, &m))) return rc;
  ds_mesh_free(&m);
  if ((rc = ds_mesh_walker(&m))) return rc;
  ds_mesh_free(&m);
  return 0;
}

static void test_alloc_failure(void) {
  CHECK_INT_EQ(ds_replace_allocator(fail_malloc, fail_realloc, fail_calloc, free), 0);
  g_count = 0;
  g_fail_at = -1;
  CHECK_INT_EQ(gen_all(), 0);
  long total = g_count;
  CHECK(total > 5);
  int bad = 0;
  for (long k = 1; k <= total; k++) {
    g_count = 0;
    g_fail_at = k;
    if (gen_all() != DS_ERR_NOMEM) bad++;
  }
  CHECK_INT_EQ(bad, 0);
  CHECK_INT_EQ(ds_replace_allocator(NULL, NULL, NULL, NULL), 0);
}

int main(void) {
  test_cloth();
  test_bending_sign();
  test_tet_grid();
  test_boundary_single_and_bad();
  test_validate();
  test_gear();
  test_walker();
  test_placement();
  test_alloc_failure();
  return DST_RESULT();
}

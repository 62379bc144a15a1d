/* The gear of docs/scenes.md control-fem: profile -> triangulate -> extrude in
 * layers -> split prisms into tets.
 *
 * Profile (xy plane), a polar grid with M = 2*teeth angular positions
 * phi_a = 2*pi*a/M:
 *   ring rows q = 0, 1, 2 at radii r_h + q*(r_r - r_h)/2, all M positions;
 *   tooth rows q = 3, 4 at radii r_r + (q - 2)*(r_o - r_r)/2, only at the two
 *   positions a = 2t, 2t+1 of tooth t (teeth on the even sectors).
 * Profile vertices P = 3M + 4*teeth = 10*teeth. Every grid cell (rows q, q+1,
 * positions a, a+1) present is split into two counter-clockwise triangles:
 * ring 2*M cells, teeth 2*teeth cells -> 12*teeth triangles.
 * Profile area (straight chords, s = sin(2*pi/M)/2):
 *   A = M*s*(r_r^2 - r_h^2) + teeth*s*(r_o^2 - r_r^2).
 *
 * Extrusion: layers L, z_l = -h + l*2h/L, vertex (l, p) of profile vertex
 * p = (row q, position a). Each prism (triangle with profile indices
 * a < b < c, bottom A B C, top A' B' C') is split into (A,B,C,A'),
 * (B,C,A',B'), (C,A',B',C'): every quad side is cut by the diagonal from
 * the bottom of its higher-index vertex to the top of its lower-index one,
 * a rule that depends only on the shared edge, so neighbouring prisms
 * conform. Tets of negative orientation get two vertices swapped.
 * Tets: 3*L*12*teeth.
 *
 * Numbering, angle first: vertex (l, q, a) has index (5a + q)(L + 1) + l,
 * and the tets are ordered by their lowest vertex index (ties in the order
 * above: layer, profile triangle, prism part). A run of indices is then a
 * wedge of the gear, so threads sharing the particles and the tets out in
 * contiguous ranges touch each other's data only at the wedges' borders
 * (a layer-first numbering made every tet of one half share particles
 * with the other half: 1.4x instead of 1.6x on two threads).
 *
 * Defaults: teeth 16, r_o = 1.84, r_r = 1.50, h = 1.14, L = 2, and r_h solved
 * from A*2h = 9.68 m^3 (the original's volume): r_h = 1.207334 m. This gives
 * 480 vertices and 1,152 tets as the original, and 896 boundary triangles
 * (original 960). */
#include "config.h"

#include <limits.h>
#include <math.h>
#include <string.h>

#include "dsim/base.h"
#include "dsim/scenes.h"

dsGearDef ds_default_gear_def(void) {
  dsGearDef d;
  memset(&d, 0, sizeof d); /* padding too: definitions compare with memcmp */
  d.teeth = 16;
  d.outer_radius = (dsReal)1.84;
  d.root_radius = (dsReal)1.50;
  /* r_h^2 = r_r^2 - (9.68/(2h) - T*s*(r_o^2 - r_r^2)) / (M*s), s = sin(pi/16)/2 */
  d.hub_radius = (dsReal)1.2073340;
  d.half_thickness = (dsReal)1.14;
  d.layers = 2;
  return d;
}

static void sort3i(int* k) {
  int t;
  if (k[0] > k[1]) t = k[0], k[0] = k[1], k[1] = t;
  if (k[1] > k[2]) t = k[1], k[1] = k[2], k[2] = t;
  if (k[0] > k[1]) t = k[0], k[0] = k[1], k[1] = t;
}

/* index of the profile vertex at row q, angular position a (a mod M) */
#define RING(q, a) ((q) * M + ((a) % M))
#define TOOTH(q, a) (3 * M + ((a) / 2) * 4 + ((q) - 3) * 2 + ((a) % 2))
#define PV(q, a) ((q) < 3 ? RING(q, a) : TOOTH(q, a))
/* vertex index of layer l, profile vertex p (above: angle first) */
#define VID(l, p) (vid[p] + (l))

/* The profile's 12 T triangles into ptri (3 indices each): the ring's cells,
 * then the teeth's, each cell split into two counter-clockwise triangles. */
static void gear_profile(int T, int* ptri) {
  const int M = 2 * T;
  int nt = 0;
  for (int q = 0; q < 2; q++)
    for (int a = 0; a < M; a++) {
      int p00 = RING(q, a), p01 = RING(q, a + 1), p10 = RING(q + 1, a), p11 = RING(q + 1, a + 1);
      /* (radial, angular) is right-handed like (x, y): counter-clockwise */
      int* f = ptri + 3 * nt;
      f[0] = p00, f[1] = p10, f[2] = p11;
      f[3] = p00, f[4] = p11, f[5] = p01;
      nt += 2;
    }
  for (int t = 0; t < T; t++)
    for (int q = 2; q < 4; q++) {
      int a = 2 * t;
      int p00 = PV(q, a), p01 = PV(q, a + 1), p10 = PV(q + 1, a), p11 = PV(q + 1, a + 1);
      int* f = ptri + 3 * nt;
      f[0] = p00, f[1] = p10, f[2] = p11;
      f[3] = p00, f[4] = p11, f[5] = p01;
      nt += 2;
    }
}

/* The layer-0 index of every profile vertex into vid (10 T; angle first),
 * and the positions of every layer's vertices into m->x. */
static void gear_vertices(const dsGearDef* def, int* vid, dsMesh* m) {
  const int T = def->teeth, L = def->layers, M = 2 * T;
  const double ro = (double)def->outer_radius, rr = (double)def->root_radius, rh = (double)def->hub_radius,
               h = (double)def->half_thickness;
  for (int q = 0; q < 5; q++)
    for (int a = 0; a < M; a++) vid[PV(q, a)] = (5 * a + q) * (L + 1);
  for (int l = 0; l <= L; l++) {
    double z = -h + (2.0 * h * l) / L;
    if (l == L) z = h; /* exact end face */
    for (int q = 0; q < 5; q++)
      for (int a = 0; a < M; a++) {
        /* tooth rows exist at a = 2t and 2t+1 for every t, i.e. at every a */
        double r = q < 3 ? rh + q * (rr - rh) / 2.0 : rr + (q - 2) * (ro - rr) / 2.0;
        double phi = 2.0 * 3.14159265358979323846 * a / M;
        dsReal* p = m->x + 3 * VID(l, PV(q, a));
        p[0] = (dsReal)(r * cos(phi));
        p[1] = (dsReal)(r * sin(phi));
        p[2] = (dsReal)z;
      }
  }
}

/* Every prism of the NT profile triangles and L layers split into 3 tets
 * (positively oriented) into m->tet, stably by lowest vertex index: in
 * generation order into tt (ntet x 4), counted by lowest index in first
 * (nv + 1, zeroed), then a counting sort. */
static void gear_tets(int NT, int L, const int* ptri, const int* vid, int* tt, int* first, dsMesh* m) {
  const long long nv = m->nvert, ntet = 3LL * NT * L;
  int* e = tt;
  for (int l = 0; l < L; l++)
    for (int k = 0; k < NT; k++) {
      int s[3] = {ptri[3 * k], ptri[3 * k + 1], ptri[3 * k + 2]};
      sort3i(s); /* the diagonal rule orders by profile index */
      const int A = VID(l, s[0]), B = VID(l, s[1]), C = VID(l, s[2]);
      const int A1 = VID(l + 1, s[0]), B1 = VID(l + 1, s[1]), C1 = VID(l + 1, s[2]);
      const int tets[3][4] = {{A, B, C, A1}, {B, C, A1, B1}, {C, A1, B1, C1}};
      for (int j = 0; j < 3; j++) {
        for (int v = 0; v < 4; v++) e[v] = tets[j][v];
        if (ds_tet_signed_volume(m->x + 3 * e[0], m->x + 3 * e[1], m->x + 3 * e[2], m->x + 3 * e[3]) < 0) {
          int tmp = e[2];
          e[2] = e[3];
          e[3] = tmp;
        }
        int lo = e[0];
        for (int v = 1; v < 4; v++) lo = e[v] < lo ? e[v] : lo;
        first[lo + 1]++;
        e += 4;
      }
    }
  for (long long i = 0; i < nv; i++) first[i + 1] += first[i]; /* counting sort, stable */
  for (long long k = 0; k < ntet; k++) {
    const int* f = tt + 4 * k;
    int lo = f[0];
    for (int v = 1; v < 4; v++) lo = f[v] < lo ? f[v] : lo;
    memcpy(m->tet + 4 * (size_t)first[lo]++, f, 4 * sizeof(int));
  }
}
#undef VID
#undef PV
#undef TOOTH
#undef RING

int ds_mesh_gear(const dsGearDef* def, dsMesh* out) {
  if (!def || !out) return DS_ERR_INVALID;
  const int T = def->teeth, L = def->layers;
  const double ro = (double)def->outer_radius, rr = (double)def->root_radius, rh = (double)def->hub_radius,
               h = (double)def->half_thickness;
  if (T < 3 || L < 1 || !(rh > 0) || !(rh < rr) || !(rr < ro) || !(h > 0) || !isfinite(ro) || !isfinite(h))
    return DS_ERR_INVALID;
  if (T > 100000 || L > 100000) return DS_ERR_INVALID;
  const int P = 10 * T, NT = 12 * T;
  long long nv = (long long)P * (L + 1), ntet = 3LL * NT * L;
  if (nv > INT_MAX / 3 || ntet > INT_MAX / 4) return DS_ERR_INVALID;

  int* ptri = (int*)ds_calloc((size_t)NT * 3, sizeof(int));
  if (!ptri) return DS_ERR_NOMEM;
  gear_profile(T, ptri);
  dsMesh m;
  int rc = ds_mesh_alloc(&m, (int)nv, 0, (int)ntet);
  if (rc) {
    ds_free(ptri);
    return rc;
  }
  int* vid = (int*)ds_calloc((size_t)P, sizeof(int));
  int* tt = vid ? (int*)ds_calloc((size_t)ntet * 4, sizeof(int)) : NULL;
  int* first = tt ? (int*)ds_calloc((size_t)nv + 1, sizeof(int)) : NULL;
  const int have = first != NULL;
  if (have) {
    gear_vertices(def, vid, &m);
    gear_tets(NT, L, ptri, vid, tt, first, &m);
  }
  ds_free(first);
  ds_free(tt);
  ds_free(vid);
  ds_free(ptri);
  rc = have ? ds_mesh_extract_boundary(&m, NULL, 0) : DS_ERR_NOMEM;
  if (rc) {
    ds_mesh_free(&m);
    return rc;
  }
  *out = m;
  return 0;
}

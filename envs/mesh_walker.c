/* The walker of docs/scenes.md: a 2-D lattice soft body in the z = 0 plane.
 *
 * Lattice spacing h = 2/9 m, columns c = 0..9 at x = -1 + c*h (x in [-1, 1]),
 * rows r = 0..8 at y = y0 + r*h with y0 = 0.057 m. Rows 0..3 are the legs:
 * columns 0..2 and 7..9 only (3 vertices wide, at the two ends); rows 4..8
 * are the body (all 10 columns). Vertex count 4*6 + 5*10 = 74.
 *
 * Cells (r, c) between rows r, r+1 and columns c, c+1 exist where all four
 * corners exist: leg cells r = 0..3, c in {0,1,7,8} (16), body cells
 * r = 4..7, c = 0..8 (36): 52 cells, each split along the diagonal from
 * (r, c) to (r+1, c+1) into two counter-clockwise triangles of area h^2/2:
 * 104 triangles. */
#include "config.h"

#include "dsim/scenes.h"

#define WALKER_COLS 10
#define WALKER_ROWS 9
#define WALKER_LEG_ROWS 4

static int walker_has(int r, int c) {
  if (r < 0 || r >= WALKER_ROWS || c < 0 || c >= WALKER_COLS) return 0;
  return r >= WALKER_LEG_ROWS || c <= 2 || c >= WALKER_COLS - 3;
}

int ds_mesh_walker(dsMesh* out) {
  if (!out) return DS_ERR_INVALID;
  const double h = 2.0 / 9.0, y0 = 0.057;
  int id[WALKER_ROWS][WALKER_COLS];
  int nv = 0;
  for (int r = 0; r < WALKER_ROWS; r++)
    for (int c = 0; c < WALKER_COLS; c++) id[r][c] = walker_has(r, c) ? nv++ : -1;
  int nt = 0;
  for (int r = 0; r + 1 < WALKER_ROWS; r++)
    for (int c = 0; c + 1 < WALKER_COLS; c++)
      if (walker_has(r, c) && walker_has(r, c + 1) && walker_has(r + 1, c) && walker_has(r + 1, c + 1)) nt += 2;
  dsMesh m;
  int rc = ds_mesh_alloc(&m, nv, nt, 0);
  if (rc) return rc;
  for (int r = 0; r < WALKER_ROWS; r++)
    for (int c = 0; c < WALKER_COLS; c++)
      if (id[r][c] >= 0) {
        dsReal* p = m.x + 3 * id[r][c];
        p[0] = (dsReal)(-1.0 + c * h);
        p[1] = (dsReal)(y0 + r * h);
        p[2] = 0;
      }
  int* f = m.tri;
  for (int r = 0; r + 1 < WALKER_ROWS; r++)
    for (int c = 0; c + 1 < WALKER_COLS; c++) {
      int a = id[r][c], b = id[r][c + 1], d = id[r + 1][c], e = id[r + 1][c + 1];
      if (a < 0 || b < 0 || d < 0 || e < 0) continue;
      /* (a, b, e) and (a, e, d): counter-clockwise seen from +z */
      f[0] = a, f[1] = b, f[2] = e;
      f[3] = a, f[4] = e, f[5] = d;
      f += 6;
    }
  *out = m;
  return 0;
}

void ds_mesh_center(dsMesh* mesh) {
  dsReal c[3];
  ds_mesh_centroid(mesh, c);
  c[0] = -c[0];
  c[1] = -c[1];
  c[2] = -c[2];
  ds_mesh_translate(mesh, c);
}

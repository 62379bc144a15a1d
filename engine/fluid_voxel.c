/* Voxelising a closed triangle mesh onto a fluid grid (dsim/fluid.h,
 * ds_fluid_voxelize_mesh): the solid cells of a mesh obstacle.
 *
 * For each row of cells along x (fixed j, k) a ray runs in +x through the
 * cells' centres, (y_j, z_k) = ((j + 1/2) dx, (k + 1/2) dx) (in 2-D the cut
 * plane z = 0). A triangle whose projection onto the (y, z) plane holds the
 * ray's (y, z) is crossed at one x; the crossing counts +1 or -1 by the
 * sign of the triangle's normal's x component n_x = (b - a) x (c - a) . e_x,
 * which is the signed area of the projected triangle (twice). The winding
 * number of a point on the ray is the sum of the signs of the crossings
 * before it (a consistently oriented closed surface gives -1, 0 or +1 per
 * nested shell; the opposite orientation flips every sign); a cell is inside
 * where it is nonzero. Triangles seen edge-on (n_x = 0) have no crossing:
 * the faces around them close the count.
 *
 * A ray through an edge or a vertex would see the two triangles that share
 * it both or neither. The ray is therefore moved by a fixed offset of about
 * 1e-7 dx in y and z (irrational multiples, so the grid's own lines and
 * the centres of a mesh built on the grid are missed); the tests against
 * the projected edges are then strict. The result is a deterministic
 * function of the inputs. */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/internal.h"
#include "dsim/fluid.h"

typedef struct Hit {
  double x;
  int sign;
} Hit;

static int cmp_hit(const void* a, const void* b) {
  const Hit *p = (const Hit*)a, *q = (const Hit*)b;
  if (p->x < q->x) return -1;
  if (p->x > q->x) return 1;
  return p->sign - q->sign;
}

/* The crossing of the ray {(t, y, z)} with triangle (a, b, c): 1 and *x,
 * *sign when the projection of the triangle holds (y, z) strictly; else 0. */
static int cross(const double* a, const double* b, const double* c, double y, double z, double* x, int* sign) {
  /* signed areas of (p, b, c), (a, p, c), (a, b, p) in the (y, z) plane */
  const double w0 = (b[1] - y) * (c[2] - z) - (b[2] - z) * (c[1] - y);
  const double w1 = (c[1] - y) * (a[2] - z) - (c[2] - z) * (a[1] - y);
  const double w2 = (a[1] - y) * (b[2] - z) - (a[2] - z) * (b[1] - y);
  const double area = w0 + w1 + w2;
  if (area == 0) return 0;
  if (!((w0 > 0 && w1 > 0 && w2 > 0) || (w0 < 0 && w1 < 0 && w2 < 0))) return 0;
  *x = (w0 * a[0] + w1 * b[0] + w2 * c[0]) / area;
  *sign = area > 0 ? 1 : -1;
  return 1;
}

int ds_fluid_voxelize_mesh(const dsFluidDef* def, const double* x, int nvert, const int* tri, int ntri,
                           unsigned char* solid, char* err, size_t errlen) {
  if (!def || !solid || nvert < 0 || ntri < 0 || (nvert && !x) || (ntri && !tri))
    return ds__puterr(err, errlen, DS_ERR_INVALID, "voxelize: expected a definition, a solid array and a mesh");
  for (int a = 0; a < 3; a++)
    if (def->n[a] < 1)
      return ds__puterr(err, errlen, DS_ERR_INVALID, "voxelize: n[%d]: expected a grid size >= 1, got %d", a,
                        def->n[a]);
  if (!(def->dx > 0 && isfinite(def->dx)))
    return ds__puterr(err, errlen, DS_ERR_INVALID, "voxelize: dx: expected a finite value > 0, got %g", def->dx);
  for (int i = 0; i < 3 * nvert; i++)
    if (!isfinite(x[i]))
      return ds__puterr(err, errlen, DS_ERR_INVALID, "voxelize: vertex %d: coordinate %c is %g (expected finite)",
                        i / 3, 'x' + i % 3, x[i]);
  for (int t = 0; t < ntri; t++)
    for (int k = 0; k < 3; k++)
      if (tri[3 * t + k] < 0 || tri[3 * t + k] >= nvert)
        return ds__puterr(err, errlen, DS_ERR_INVALID,
                          "voxelize: triangle %d: vertex index %d is out of range (expected 0 .. %d)", t,
                          tri[3 * t + k], nvert - 1);
  Hit* hit = (Hit*)ds__malloc(((size_t)ntri + 1) * sizeof(Hit));
  if (!hit) return ds__puterr(err, errlen, DS_ERR_NOMEM, "voxelize: out of memory for %d triangles", ntri);
  const int nx = def->n[0], ny = def->n[1], nz = def->n[2];
  const double dx = def->dx, oy = 1.0471975511965976e-7 * dx, oz = 0.7071067811865476e-7 * dx;
  for (int k = 0; k < nz; k++)
    for (int j = 0; j < ny; j++) {
      const double y = (j + 0.5) * dx + oy, z = (nz == 1 ? 0 : (k + 0.5) * dx) + oz;
      int nh = 0;
      for (int t = 0; t < ntri; t++) {
        const int* f = tri + 3 * t;
        if (cross(x + 3 * f[0], x + 3 * f[1], x + 3 * f[2], y, z, &hit[nh].x, &hit[nh].sign)) nh++;
      }
      if (!nh) continue;
      qsort(hit, (size_t)nh, sizeof(Hit), cmp_hit);
      int h = 0, wind = 0;
      for (int i = 0; i < nx; i++) {
        const double xc = (i + 0.5) * dx;
        while (h < nh && hit[h].x < xc) wind += hit[h++].sign;
        if (wind) solid[i + (size_t)nx * (j + (size_t)ny * k)] = 1;
      }
    }
  ds__free(hit);
  return 0;
}

/* Meshes of the rasterizer benchmarks (bench_raster, bench_raster_batch):
 * a gear-sized closed disc and a cloth grid. */
#ifndef DSIM_BENCH_RASTER_MESHES_H
#define DSIM_BENCH_RASTER_MESHES_H

#include <math.h>
#include <stdlib.h>

#include "dsim/base.h"

#define M_PI_ 3.14159265358979323846

typedef struct Mesh {
  int nv, nf;
  dsReal* v;
  int* f;
  dsReal* c;
} Mesh;

/* Closed cylinder along z: radius R, half-thickness hz, centre (cx, cy, 0);
 * n segments, caps split into `rings` rings (fan in the middle), `layers`
 * bands on the side. Triangles: 2 n (2 rings - 1) + 2 n layers. */
static inline Mesh gear_mesh(int n, int rings, int layers, double R, double hz, double cx, double cy) {
  Mesh m;
  int nv = 2 * (1 + n * rings) + n * (layers - 1), nf = 2 * n * (2 * rings - 1) + 2 * n * layers;
  int side, i, k, l, vi = 0, fi = 0;
  int capbase[2];
  m.v = (dsReal*)malloc(sizeof(dsReal) * 3 * nv);
  m.f = (int*)malloc(sizeof(int) * 3 * nf);
  m.c = (dsReal*)malloc(sizeof(dsReal) * 3 * nf);
  for (side = 0; side < 2; side++) {
    double z = side ? hz : -hz;
    capbase[side] = vi;
    m.v[3 * vi] = cx;
    m.v[3 * vi + 1] = cy;
    m.v[3 * vi + 2] = z;
    vi++;
    for (k = 1; k <= rings; k++)
      for (i = 0; i < n; i++) {
        double a = 2 * M_PI_ * i / n, rr = R * k / rings;
        m.v[3 * vi] = cx + rr * cos(a);
        m.v[3 * vi + 1] = cy + rr * sin(a);
        m.v[3 * vi + 2] = z;
        vi++;
      }
    /* fan */
    for (i = 0; i < n; i++) {
      m.f[3 * fi] = capbase[side];
      m.f[3 * fi + 1] = capbase[side] + 1 + i;
      m.f[3 * fi + 2] = capbase[side] + 1 + (i + 1) % n;
      fi++;
    }
    for (k = 1; k < rings; k++)
      for (i = 0; i < n; i++) {
        int a0 = capbase[side] + 1 + (k - 1) * n + i, a1 = capbase[side] + 1 + (k - 1) * n + (i + 1) % n;
        int b0 = a0 + n, b1 = a1 + n;
        m.f[3 * fi] = a0, m.f[3 * fi + 1] = b0, m.f[3 * fi + 2] = b1, fi++;
        m.f[3 * fi] = a0, m.f[3 * fi + 1] = b1, m.f[3 * fi + 2] = a1, fi++;
      }
  }
  {
    /* side bands between the two outer rings, with layers-1 intermediate rings */
    int ring0 = capbase[0] + 1 + (rings - 1) * n, ring1 = capbase[1] + 1 + (rings - 1) * n;
    int mid0 = vi;
    for (l = 1; l < layers; l++)
      for (i = 0; i < n; i++) {
        double a = 2 * M_PI_ * i / n;
        m.v[3 * vi] = cx + R * cos(a);
        m.v[3 * vi + 1] = cy + R * sin(a);
        m.v[3 * vi + 2] = -hz + 2 * hz * l / layers;
        vi++;
      }
    for (l = 0; l < layers; l++) {
      int r0 = l == 0 ? ring0 : mid0 + (l - 1) * n;
      int r1 = l == layers - 1 ? ring1 : mid0 + l * n;
      for (i = 0; i < n; i++) {
        int a0 = r0 + i, a1 = r0 + (i + 1) % n, b0 = r1 + i, b1 = r1 + (i + 1) % n;
        m.f[3 * fi] = a0, m.f[3 * fi + 1] = a1, m.f[3 * fi + 2] = b1, fi++;
        m.f[3 * fi] = a0, m.f[3 * fi + 1] = b1, m.f[3 * fi + 2] = b0, fi++;
      }
    }
  }
  m.nv = vi;
  m.nf = fi;
  for (i = 0; i < 3 * fi; i++) m.c[i] = (i % 3 == 2) ? 0 : 1; /* yellow */
  return m;
}

/* n x n cells, side length L, centred at (0, 0, 0) in a plane tilted 30 deg
 * about x, with a gentle wave. */
static inline Mesh cloth_mesh(int n, double L) {
  Mesh m;
  int i, j, vi = 0, fi = 0;
  double t = 30 * M_PI_ / 180;
  m.nv = (n + 1) * (n + 1);
  m.nf = 2 * n * n;
  m.v = (dsReal*)malloc(sizeof(dsReal) * 3 * m.nv);
  m.f = (int*)malloc(sizeof(int) * 3 * m.nf);
  m.c = (dsReal*)malloc(sizeof(dsReal) * 3 * m.nf);
  for (j = 0; j <= n; j++)
    for (i = 0; i <= n; i++) {
      double u = L * ((double)i / n - 0.5), w = L * ((double)j / n - 0.5);
      double h = 0.3 * sin(1.3 * u) * cos(0.9 * w);
      m.v[3 * vi] = u;
      m.v[3 * vi + 1] = w * cos(t) - h * sin(t);
      m.v[3 * vi + 2] = w * sin(t) + h * cos(t);
      vi++;
    }
  for (j = 0; j < n; j++)
    for (i = 0; i < n; i++) {
      int a = j * (n + 1) + i, b = a + 1, c = a + n + 1, d = c + 1;
      m.f[3 * fi] = a, m.f[3 * fi + 1] = b, m.f[3 * fi + 2] = d, fi++;
      m.f[3 * fi] = a, m.f[3 * fi + 1] = d, m.f[3 * fi + 2] = c, fi++;
    }
  for (i = 0; i < 3 * m.nf; i++) m.c[i] = (i % 3 == 1) ? 0.8 : 0.2; /* green */
  return m;
}

#endif

/* Soft rasterizer timing: ms per frame, forward and forward+backward, at
 * 256 x 256 with 2x supersampling (the default render settings) for
 *   gear  - a closed disc-like mesh (a subdivided flattened cylinder) about
 *           3.7 m across, 960 triangles, camera distance 13, elevation 30 deg
 *   cloth - a 64 x 64 grid (8,192 triangles) 8 m across, distance 15
 * with 1 and 2 threads; median of 5 runs after a warm-up. The upstream
 * gradient is nonzero at every pixel (the worst case for backward).
 * Usage: bench_raster [repeats [gear|cloth]] */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dsim/raster.h"

#define M_PI_ 3.14159265358979323846

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

typedef struct Mesh {
  int nv, nf;
  dsReal* v;
  int* f;
  dsReal* c;
} Mesh;

/* Closed cylinder along z: radius R, half-thickness hz, centre (cx, cy, 0);
 * n segments, caps split into `rings` rings (fan in the middle), `layers`
 * bands on the side. Triangles: 2 n (2 rings - 1) + 2 n layers. */
static Mesh gear_mesh(int n, int rings, int layers, double R, double hz, double cx, double cy) {
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
static Mesh cloth_mesh(int n, double L) {
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

static void run(const char* name, const Mesh* mesh, double dist, double elev, int reps) {
  dsRenderSettings s = ds_default_render_settings();
  dsRaster* r = NULL;
  dsRasterMesh m = {mesh->v, mesh->nv, mesh->f, mesh->nf, mesh->c, DS_COLOR_FACE};
  size_t n = (size_t)s.width * s.height * 4, i;
  dsReal* img = (dsReal*)malloc(sizeof(dsReal) * n);
  dsReal* gimg = (dsReal*)malloc(sizeof(dsReal) * n);
  dsReal* gv = (dsReal*)calloc(3 * (size_t)mesh->nv, sizeof(dsReal));
  dsReal* gc = (dsReal*)calloc(3 * (size_t)mesh->nf, sizeof(dsReal));
  double* tf = (double*)malloc(sizeof(double) * reps);
  double* tb = (double*)malloc(sizeof(double) * reps);
  int th, k;
  ds_camera_look_at(&s.camera, dist, elev, 0);
  if (ds_raster_create(&r, &s, mesh->nf, mesh->nv) != DS_OK) {
    fprintf(stderr, "create failed\n");
    exit(1);
  }
  for (i = 0; i < n; i++) gimg[i] = (dsReal)(((i * 2654435761u) % 1000) / 1000.0 - 0.5);
  for (th = 1; th <= 2; th++) {
    double cover = 0;
    ds_set_num_threads(th);
    ds_raster_render(r, &m, img); /* warm-up */
    for (i = 0; i < n / 4; i++) cover += img[4 * i + 3];
    for (k = 0; k < reps; k++) {
      double t0 = now_ms(), t1, t2;
      ds_raster_render(r, &m, img);
      t1 = now_ms();
      ds_raster_backward(r, &m, gimg, gv, gc);
      t2 = now_ms();
      tf[k] = t1 - t0;
      tb[k] = t2 - t0;
    }
    qsort(tf, reps, sizeof(double), cmp_double);
    qsort(tb, reps, sizeof(double), cmp_double);
    printf("%-6s %5d tris  %d thread%s  forward %7.2f ms  forward+backward %7.2f ms  (coverage %.1f%%)\n",
           name, mesh->nf, th, th > 1 ? "s" : " ", tf[reps / 2], tb[reps / 2],
           100.0 * cover / (n / 4));
  }
  ds_raster_destroy(r);
  free(img);
  free(gimg);
  free(gv);
  free(gc);
  free(tf);
  free(tb);
}

int main(int argc, char** argv) {
  int reps = argc > 1 ? atoi(argv[1]) : 5;
  Mesh g = gear_mesh(48, 4, 3, 1.84, 1.14, -1.0, 2.0);
  Mesh c = cloth_mesh(64, 8.0);
  if (reps < 1) reps = 1;
  printf("bench_raster: 256x256, supersampling 2, sigma 1e-5, gamma 1e-4, median of %d\n", reps);
  if (argc <= 2 || strcmp(argv[2], "gear") == 0) run("gear", &g, 13, 30, reps);
  if (argc <= 2 || strcmp(argv[2], "cloth") == 0) run("cloth", &c, 15, 0, reps);
  free(g.v), free(g.f), free(g.c);
  free(c.v), free(c.f), free(c.c);
  return 0;
}

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
#include "bench/raster_meshes.h"

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
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

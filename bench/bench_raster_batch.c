/* The batched renderer (render/raster_batch.h): frames per second for B
 * gear meshes (bench_raster's, each instance moved a little), rendered,
 * compared with a goal (MSE) and differentiated back to the vertices,
 *   host     one renderer per thread, threads across the instances
 *            (ds_raster_render, ds_image_loss_eval, ds_raster_backward: what
 *            envs on separate engines run)
 *   batched  the batched renderer's stages on a backend: the CPU (OpenMP
 *            over instance x pixel, face, ...) or a CUDA device (the
 *            stream of a batched engine, as envs on a GPU use it)
 * and the ratio batched / host. Forward is render + loss; forward +
 * backward adds the image gradient back to the vertices. Medians of --reps
 * timed runs after one untimed run.
 *
 *   bench_raster_batch [--batch B]... [--device cpu|cuda[:N]]... [--size S] [--supersample K] [--reps R]
 *
 * Defaults: B = 1 and 16, 64 x 64 with supersampling 2, the CPU (and cuda:0
 * when a device is visible), 3 reps. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#  include <omp.h>
#endif

#include "bench/bench.h"
#include "bench/raster_meshes.h"
#include "dsim/device.h"
#include "dsim/env.h"
#include "dsim/raster.h"
#include "engine/batch_priv.h"
#include "render/raster_batch.h"

static void die(const char* what, const char* msg) {
  fprintf(stderr, "bench_raster_batch: %s: %s\n", what, msg);
  exit(1);
}

typedef struct Rates {
  double fwd, full; /* frames per second */
} Rates;

static dsReal* instance_verts(const Mesh* m, int B) {
  dsReal* v = (dsReal*)malloc(sizeof(dsReal) * 3 * (size_t)m->nv * B);
  if (!v) die("verts", "out of memory");
  for (int b = 0; b < B; b++)
    for (int i = 0; i < 3 * m->nv; i++) v[(size_t)b * 3 * m->nv + i] = m->v[i] + (dsReal)(0.01 * sin(0.7 * b + i));
  return v;
}

static Rates host_rates(const Mesh* m, const dsRenderSettings* s, int B, int reps) {
  int T = 1;
#ifdef _OPENMP
  T = omp_get_max_threads();
#endif
  const size_t npx = 4 * (size_t)s->width * s->height;
  dsReal* verts = instance_verts(m, B);
  dsRaster** r = (dsRaster**)calloc((size_t)T, sizeof *r);
  dsImageLoss** il = (dsImageLoss**)calloc((size_t)T, sizeof *il);
  dsReal* img = (dsReal*)malloc(sizeof(dsReal) * npx * T);
  dsReal* grad = (dsReal*)malloc(sizeof(dsReal) * npx * T);
  dsReal* goal = (dsReal*)calloc(npx, sizeof(dsReal));
  dsReal* dv = (dsReal*)calloc(3 * (size_t)m->nv * B, sizeof(dsReal));
  const dsLossDef ld = ds_default_loss_def();
  for (int t = 0; t < T; t++)
    if (ds_raster_create(&r[t], s, m->nf, m->nv) || ds_image_loss_create(&il[t], &ld, s->width, s->height))
      die("host", "create failed");
  Rates out;
  for (int pass = 0; pass < 2; pass++) {
    double t[16];
    for (int k = 0; k <= reps; k++) {
      const double t0 = now();
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 1)
#endif
      for (int b = 0; b < B; b++) {
        int th = 0;
#ifdef _OPENMP
        th = omp_get_thread_num();
#endif
        dsRasterMesh rm = {verts + (size_t)b * 3 * m->nv, m->nv, m->f, m->nf, m->c, DS_COLOR_FACE};
        dsReal l;
        ds_raster_render(r[th], &rm, img + npx * th);
        ds_image_loss_eval(il[th], img + npx * th, goal, &l, pass ? grad + npx * th : NULL);
        if (pass) ds_raster_backward(r[th], &rm, grad + npx * th, dv + (size_t)b * 3 * m->nv, NULL);
      }
      if (k > 0) t[k - 1] = now() - t0;
    }
    const double rate = B / median(t, reps);
    if (pass) out.full = rate;
    else out.fwd = rate;
  }
  for (int t = 0; t < T; t++) {
    ds_raster_destroy(r[t]);
    ds_image_loss_destroy(il[t]);
  }
  free(r), free(il), free(img), free(grad), free(goal), free(dv), free(verts);
  return out;
}

static Rates batched_rates(const Mesh* m, const dsRenderSettings* s, int B, int reps, const dsBackend* be,
                           void* ctx) {
  const size_t npx = 4 * (size_t)s->width * s->height;
  dsReal* verts = instance_verts(m, B);
  dsReal* goal = (dsReal*)calloc(npx, sizeof(dsReal));
  dsReal* loss = (dsReal*)calloc((size_t)B, sizeof(dsReal));
  char err[512];
  dsBatchRaster* br = NULL;
  if (ds__braster_create(&br, be, ctx, s, B, m->nv, m->nf, m->f, m->c, DS_COLOR_FACE, err, sizeof err))
    die("batched", err);
  dsReal* dverts = (dsReal*)be->alloc(ctx, sizeof(dsReal) * 3 * (size_t)m->nv * B);
  dsReal* dgrad = (dsReal*)be->alloc(ctx, sizeof(dsReal) * 3 * (size_t)m->nv * B);
  if (!dverts || !dgrad) die("batched", "out of memory on the backend");
  if (be->put(ctx, dverts, verts, sizeof(dsReal) * 3 * (size_t)m->nv * B) || ds__braster_set_goal(br, goal, 0))
    die("batched", "upload failed");
  const dsLossDef ld = ds_default_loss_def();
  Rates out;
  for (int pass = 0; pass < 2; pass++) {
    double t[16];
    for (int k = 0; k <= reps; k++) {
      const double t0 = now();
      int rc = ds__braster_render(br, dverts, NULL);
      if (!rc) rc = ds__braster_loss(br, &ld, NULL, loss); /* reads the losses back: waits for the device */
      if (!rc && pass) rc = ds__braster_backward(br, NULL, dgrad);
      if (!rc && pass) rc = be->get(ctx, verts, dgrad, sizeof(dsReal) * 3); /* waits */
      if (rc) die("batched", ds__braster_last_error(br));
      if (k > 0) t[k - 1] = now() - t0;
    }
    const double rate = B / median(t, reps);
    if (pass) out.full = rate;
    else out.fwd = rate;
  }
  be->release(ctx, dverts);
  be->release(ctx, dgrad);
  ds__braster_destroy(br);
  free(verts), free(goal), free(loss);
  return out;
}

int main(int argc, char** argv) {
  int batches[8], nb = 0, nd = 0, size = 64, k = 2, reps = 3;
  const char* devices[8];
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--batch") == 0 && i + 1 < argc && nb < 8) batches[nb++] = atoi(argv[++i]);
    else if (strcmp(argv[i], "--device") == 0 && i + 1 < argc && nd < 8) devices[nd++] = argv[++i];
    else if (strcmp(argv[i], "--size") == 0 && i + 1 < argc) size = atoi(argv[++i]);
    else if (strcmp(argv[i], "--supersample") == 0 && i + 1 < argc) k = atoi(argv[++i]);
    else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) reps = atoi(argv[++i]);
    else {
      fprintf(stderr,
              "usage: bench_raster_batch [--batch B]... [--device cpu|cuda[:N]]... [--size S] [--supersample K] "
              "[--reps R]\n");
      return 2;
    }
  }
  if (!nb) {
    batches[nb++] = 1;
    batches[nb++] = 16;
  }
  if (!nd) {
    devices[nd++] = "cpu";
    if (ds_cuda_device_count() > 0) devices[nd++] = "cuda:0";
  }
  if (reps < 1 || reps > 15 || size < 1 || k < 1) {
    fprintf(stderr, "bench_raster_batch: --reps 1..15, --size and --supersample >= 1\n");
    return 2;
  }
  dsRenderSettings s = ds_default_render_settings();
  s.width = s.height = size;
  s.supersample = k;
  ds_camera_look_at(&s.camera, 13, 30, 0);
  Mesh g = gear_mesh(48, 4, 3, 1.84, 1.14, -1.0, 2.0);
  int threads = 1;
#ifdef _OPENMP
  threads = omp_get_max_threads();
#endif
  printf("bench_raster_batch: gear (%d triangles), %dx%d, supersampling %d, MSE loss; frames/s, median of %d, %d "
         "threads\n",
         g.nf, size, size, k, reps, threads);
  printf("%-8s %6s %12s %12s %8s %14s %14s %8s\n", "device", "batch", "host fwd", "batched fwd", "ratio", "host f+b",
         "batched f+b", "ratio");
  for (int d = 0; d < nd; d++) {
    dsDevice dev;
    char err[512];
    if (ds_device_parse("--device", devices[d], &dev, err, sizeof err)) die("device", err);
    const dsBackend* be = ds__backend(DS_DEVICE_CPU);
    void* ctx = NULL;
    dsBatchSim* bs = NULL;
    dsModel* model = NULL;
    if (dev.kind == DS_DEVICE_CUDA) {
      be = ds__backend(DS_DEVICE_CUDA);
      if (!be || ds_device_check("--device", dev, err, sizeof err)) die(devices[d], be ? err : "built without CUDA");
      /* a batched engine on the device lends its stream */
      dsEnvDef def = ds_default_env_def("control-fem");
      dsEnv* env = NULL;
      if (ds_env_create(&def, &env, err, sizeof err) || ds_model_copy(ds_env_model(env), &model)) die("model", err);
      ds_env_destroy(env);
      dsBatchSimDef bd = ds_default_batch_sim_def();
      bd.device = dev;
      if (ds_bsim_create(model, &bd, &bs, err, sizeof err)) die(devices[d], err);
      ctx = ds__bsim_context(bs);
    }
    for (int q = 0; q < nb; q++) {
      const Rates h = host_rates(&g, &s, batches[q], reps);
      const Rates bt = batched_rates(&g, &s, batches[q], reps, be, ctx);
      printf("%-8s %6d %12.1f %12.1f %7.2fx %14.1f %14.1f %7.2fx\n", devices[d], batches[q], h.fwd, bt.fwd,
             bt.fwd / h.fwd, h.full, bt.full, bt.full / h.full);
      fflush(stdout);
    }
    ds_bsim_free(bs);
    ds_model_free(model);
  }
  free(g.v), free(g.f), free(g.c);
  return 0;
}

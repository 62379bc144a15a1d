/* The batched renderer (render/raster_batch.h) on the CPU backend against
 * the single renderer and ds_image_loss_eval, bit for bit, instance by
 * instance: images, losses (MSE, L1, with the moments term; multi-scale
 * MSE and L1, D-SSIM on one to three levels, a level weighted 0: all on the
 * backend), image gradients times per-instance
 * weights, and vertex gradients (from the loss's gradient and from given
 * image gradients), for perspective and orthographic cameras, flat and
 * per-vertex colours, supersampling 1 to 3, image sizes that are not tile
 * multiples, big faces (the list every tile scans), faces behind the camera,
 * degenerate and off-image faces; at 1 and 2 threads. Then a central
 * difference check of one instance's loss gradient through the batch (MSE with
 * the moments term, two-level D-SSIM), and
 * the errors a caller can meet. With a CUDA device visible, the same
 * renders, losses and gradients on cuda:0 (on a batched engine's stream)
 * against the CPU backend within 1e-10 of each block's largest value. */
#include "config.h"

#include <stdint.h>
#include <string.h>

#ifdef _OPENMP
#  include <omp.h>
#endif

#include "dsim/device.h"
#include "dsim/env.h"
#include "dsim/raster.h"
#include "engine/batch_priv.h"
#include "render/raster_batch.h"
#include "tests/dstest.h"

static uint64_t g_rng = 0x2545F4914F6CDD1Dull;
static double urand(void) {
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return (double)(g_rng >> 11) / 9007199254740992.0;
}
static double urange(double a, double b) { return a + (b - a) * urand(); }

#define B 3
#define NV 40
#define NF 36

typedef struct Mesh {
  dsReal verts[B][NV * 3];
  int faces[NF * 3];
  dsReal colors[NV * 3];
} Mesh;

/* Random small triangles around the origin, a few big ones (many tiles),
 * one degenerate, one with a vertex behind the camera (culled), one off the
 * image; every instance moves the vertices a little. */
static void make_mesh(Mesh* m) {
  for (int i = 0; i < NV; i++)
    for (int k = 0; k < 3; k++) m->verts[0][3 * i + k] = (dsReal)urange(-1.5, 1.5);
  for (int j = 0; j < NF; j++)
    for (int i = 0; i < 3; i++) m->faces[3 * j + i] = (int)(urand() * NV) % NV;
  for (int j = 0; j < NF; j++) /* distinct corners for most faces */
    if (m->faces[3 * j] == m->faces[3 * j + 1]) m->faces[3 * j + 1] = (m->faces[3 * j] + 1) % NV;
  m->faces[3 * 5 + 2] = m->faces[3 * 5 + 1]; /* degenerate */
  /* big faces: spread their corners over the view */
  for (int k = 0; k < 3; k++) {
    const int v = m->faces[3 * 7 + k];
    m->verts[0][3 * v] = (dsReal)(k == 0 ? -4.0 : k == 1 ? 4.0 : 0.5);
    m->verts[0][3 * v + 1] = (dsReal)(k == 2 ? 3.5 : -3.0);
  }
  m->verts[0][3 * m->faces[3 * 11] + 2] = (dsReal)-14.0; /* behind the default camera (eye at z = -11) */
  for (int k = 0; k < 3; k++) m->verts[0][3 * m->faces[3 * 13 + k]] += (dsReal)40.0; /* off the image */
  for (int i = 0; i < 3 * NV; i++) m->colors[i] = (dsReal)urange(0.1, 1.0);
  for (int b = 1; b < B; b++)
    for (int i = 0; i < 3 * NV; i++) m->verts[b][i] = m->verts[0][i] + (dsReal)urange(-0.05, 0.05);
}

static int same(const dsReal* a, const dsReal* b, size_t n) { return memcmp(a, b, n * sizeof(dsReal)) == 0; }

/* The light gradient's fields (ambient, directional, light_dir) bit for bit. */
static int same_light(const dsRenderSettings* a, const dsRenderSettings* b) {
  return same(&a->ambient, &b->ambient, 1) && same(&a->directional, &b->directional, 1) &&
         same(a->light_dir, b->light_dir, 3);
}

/* A light gradient to add to: values no gradient has, so "+=" shows. */
static dsRenderSettings light_start(int b) {
  dsRenderSettings s;
  memset(&s, 0, sizeof s);
  s.ambient = (dsReal)(0.25 + b);
  s.directional = (dsReal)(-0.5 * b);
  for (int k = 0; k < 3; k++) s.light_dir[k] = (dsReal)(0.125 * (k + 1));
  return s;
}

/* The loss kinds compared: single-scale MSE, L1, MSE with the moments term
 * (two stages on the backend), then the image operations: D-SSIM on two
 * levels, three-level MSE with the moments term, two-level L1, one-level
 * D-SSIM, three-level D-SSIM with a level weighted 0. */
#define NLOSS 8
static void loss_defs(dsLossDef* defs) {
  for (int d = 0; d < NLOSS; d++) defs[d] = ds_default_loss_def();
  defs[1].kind = DS_LOSS_L1;
  defs[2].moments_weight = (dsReal)0.7;
  defs[2].moments_size = (dsReal)0.5;
  defs[2].weights[0] = (dsReal)0.3;
  defs[3].kind = DS_LOSS_DSSIM;
  defs[3].levels = 2;
  defs[3].weights[1] = (dsReal)0.5;
  defs[4].levels = 3;
  defs[4].weights[2] = (dsReal)2.0;
  defs[4].moments_weight = (dsReal)0.4;
  defs[5].kind = DS_LOSS_L1;
  defs[5].levels = 2;
  defs[6].kind = DS_LOSS_DSSIM;
  defs[6].ssim_radius = 3;
  defs[6].ssim_sigma = (dsReal)1.1;
  defs[7].kind = DS_LOSS_DSSIM;
  defs[7].levels = 3;
  defs[7].weights[1] = 0;
}

typedef struct Setup {
  const char* name;
  int w, h, k, ortho, mode, light;
} Setup;

static dsRenderSettings settings_of(const Setup* su) {
  dsRenderSettings s = ds_default_render_settings();
  s.width = su->w;
  s.height = su->h;
  s.supersample = su->k;
  s.sigma = (dsReal)2e-4;
  s.camera.orthographic = su->ortho;
  s.camera.ortho_height = 3;
  if (su->light) {
    s.light_dir[0] = (dsReal)0.3;
    s.light_dir[1] = (dsReal)1.0;
    s.light_dir[2] = (dsReal)-0.4;
  }
  s.background[0] = (dsReal)0.1;
  s.background[3] = (dsReal)0.2;
  return s;
}

static void run_setup(const Setup* su, const Mesh* m, int threads) {
#ifdef _OPENMP
  omp_set_num_threads(threads);
#else
  (void)threads;
#endif
  const dsRenderSettings s = settings_of(su);
  const size_t npx = 4 * (size_t)su->w * su->h;
  const int nf = NF;
  dsReal* img = (dsReal*)calloc(B * npx, sizeof(dsReal));
  dsReal* ref = (dsReal*)calloc(npx, sizeof(dsReal));
  dsReal* goal = (dsReal*)calloc(B * npx, sizeof(dsReal));
  dsReal* rgrad = (dsReal*)calloc(npx, sizeof(dsReal));
  dsReal* dimg = (dsReal*)calloc(B * npx, sizeof(dsReal));
  dsReal dv[B][NV * 3], rdv[NV * 3];
  for (size_t i = 0; i < B * npx; i++) goal[i] = (dsReal)urand();
  for (size_t i = 0; i < B * npx; i++) dimg[i] = (dsReal)urange(-1, 1);

  dsRaster* r = NULL;
  CHECK_INT_EQ(ds_raster_create(&r, &s, nf, NV), DS_OK);
  dsBatchRaster* br = NULL;
  char err[256] = "";
  int rc = ds__braster_create(&br, ds__backend(DS_DEVICE_CPU), NULL, &s, B, NV, nf, m->faces, m->colors, su->mode, err,
                              sizeof err);
  CHECK_INT_EQ(rc, 0);
  if (rc) {
    fprintf(stderr, "  %s\n", err);
    return;
  }
  CHECK_INT_EQ(ds__braster_render(br, &m->verts[0][0], img), 0);
  for (int b = 0; b < B; b++) {
    dsRasterMesh rm = {m->verts[b], NV, m->faces, nf, m->colors, su->mode};
    /* the single renderer's rows column by column, then four columns at a
       time (render/raster_lanes.h, the default): both the batch's bits */
    for (int lanes = 0; lanes < 2; lanes++) {
      ds__raster_set_lanes(lanes);
      CHECK_INT_EQ(ds_raster_render(r, &rm, ref), DS_OK);
      if (!same(img + b * npx, ref, npx))
        DST_FAIL_AT("%s (%d threads): instance %d: image differs (%s)", su->name, threads, b,
                    lanes ? "four columns at a time" : "column by column");
    }
  }

  /* losses: backend kinds and host kinds, shared and per-instance goals */
  dsLossDef defs[NLOSS];
  loss_defs(defs);
  const dsReal wts[B] = {(dsReal)1.0, (dsReal)0.25, (dsReal)-2.0};
  for (int d = 0; d < NLOSS; d++)
    for (int per = 0; per < 2; per++) {
      dsImageLoss* il = NULL;
      CHECK_INT_EQ(ds_image_loss_create(&il, &defs[d], su->w, su->h), DS_OK);
      CHECK_INT_EQ(ds__braster_set_goal(br, goal, per), 0);
      dsReal losses[B];
      CHECK_INT_EQ(ds__braster_loss(br, &defs[d], per ? wts : NULL, losses), 0);
      memset(dv, 0, sizeof dv);
      CHECK_INT_EQ(ds__braster_backward(br, NULL, &dv[0][0]), 0);
      for (int b = 0; b < B; b++) {
        dsRasterMesh rm = {m->verts[b], NV, m->faces, nf, m->colors, su->mode};
        dsReal l = 0;
        CHECK_INT_EQ(ds_image_loss_eval(il, img + b * npx, goal + (per ? b * npx : 0), &l, rgrad), DS_OK);
        if (per)
          for (size_t p = 0; p < npx; p++) rgrad[p] *= wts[b];
        if (memcmp(&l, &losses[b], sizeof l) != 0)
          DST_FAIL_AT("%s (%d threads): loss %d goal %s: instance %d: %.17g, single %.17g", su->name, threads, d,
                      per ? "per instance" : "shared", b, (double)losses[b], (double)l);
        CHECK_INT_EQ(ds_raster_render(r, &rm, NULL), DS_OK);
        memset(rdv, 0, sizeof rdv);
        CHECK_INT_EQ(ds_raster_backward(r, &rm, rgrad, rdv, NULL), DS_OK);
        if (!same(dv[b], rdv, 3 * NV))
          DST_FAIL_AT("%s (%d threads): loss %d: instance %d: vertex gradient differs", su->name, threads, d, b);
      }
      ds_image_loss_destroy(il);
    }
  /* given image gradients, added to what is there; the light's gradient
     (ds_batch_raster_light_grad) as the single renderer's, added too */
  for (int b = 0; b < B; b++)
    for (int i = 0; i < 3 * NV; i++) dv[b][i] = (dsReal)(0.5 * i);
  CHECK_INT_EQ(ds__braster_backward(br, dimg, &dv[0][0]), 0);
  dsRenderSettings bl[B];
  for (int b = 0; b < B; b++) bl[b] = light_start(b);
  CHECK_INT_EQ(ds__braster_light_grad(br, bl), 0);
  for (int b = 0; b < B; b++) {
    dsRasterMesh rm = {m->verts[b], NV, m->faces, nf, m->colors, su->mode};
    for (int i = 0; i < 3 * NV; i++) rdv[i] = (dsReal)(0.5 * i);
    dsRenderSettings rl = light_start(b);
    CHECK_INT_EQ(ds_raster_render(r, &rm, NULL), DS_OK);
    CHECK_INT_EQ(ds_raster_backward_light(r, &rm, dimg + b * npx, rdv, NULL, NULL, &rl), DS_OK);
    if (!same(dv[b], rdv, 3 * NV)) DST_FAIL_AT("%s (%d threads): instance %d: given d_image: gradient differs", su->name, threads, b);
    if (!same_light(&bl[b], &rl))
      DST_FAIL_AT("%s (%d threads): instance %d: light gradient %.17g %.17g (%.17g %.17g %.17g), single %.17g %.17g "
                  "(%.17g %.17g %.17g)", su->name, threads, b, (double)bl[b].ambient, (double)bl[b].directional,
                  (double)bl[b].light_dir[0], (double)bl[b].light_dir[1], (double)bl[b].light_dir[2],
                  (double)rl.ambient, (double)rl.directional, (double)rl.light_dir[0], (double)rl.light_dir[1],
                  (double)rl.light_dir[2]);
    const dsRenderSettings l0 = light_start(b);
    if (su->light && same_light(&bl[b], &l0)) DST_FAIL_AT("%s: instance %d: light gradient is zero", su->name, b);
  }
  /* a render clears it: refused until the next backward */
  CHECK_INT_EQ(ds__braster_render(br, &m->verts[0][0], NULL), 0);
  CHECK_INT_EQ(ds__braster_light_grad(br, bl), DS_ERR_STATE);
  CHECK_STR_CONTAINS(ds__braster_last_error(br), "no backward");
  /* a given gradient replaced the loss's: backward(NULL) is refused */
  CHECK_INT_EQ(ds__braster_backward(br, NULL, &dv[0][0]), DS_ERR_STATE);
  CHECK_STR_CONTAINS(ds__braster_last_error(br), "no image gradient");
  ds__braster_destroy(br);
  ds_raster_destroy(r);
  free(img);
  free(ref);
  free(goal);
  free(rgrad);
  free(dimg);
}

/* dL/d(vertex) of instance 1 through the batch against central differences
 * of the batch's own loss def. */
static void fd_check(const Mesh* m0, dsLossDef def, const char* what) {
  Mesh m = *m0;
  dsRenderSettings s = ds_default_render_settings();
  s.width = 24;
  s.height = 20;
  s.supersample = 2;
  s.sigma = (dsReal)3e-4;
  const size_t npx = 4 * (size_t)s.width * s.height;
  dsReal* goal = (dsReal*)calloc(npx, sizeof(dsReal));
  for (size_t i = 0; i < npx; i++) goal[i] = (dsReal)urand();
  dsBatchRaster* br = NULL;
  char err[256];
  CHECK_INT_EQ(ds__braster_create(&br, ds__backend(DS_DEVICE_CPU), NULL, &s, B, NV, NF, m.faces, m.colors,
                                  DS_COLOR_FACE, err, sizeof err),
               0);
  if (!br) return;
  dsReal L[B], dv[B][NV * 3];
  CHECK_INT_EQ(ds__braster_set_goal(br, goal, 0), 0);
  CHECK_INT_EQ(ds__braster_render(br, &m.verts[0][0], NULL), 0);
  CHECK_INT_EQ(ds__braster_loss(br, &def, NULL, L), 0);
  memset(dv, 0, sizeof dv);
  CHECK_INT_EQ(ds__braster_backward(br, NULL, &dv[0][0]), 0);
  double worst = 0, scale = 0;
  int bad = 0;
  for (int i = 0; i < 3 * NV; i++) scale = fmax(scale, fabs((double)dv[1][i]));
  for (int i = 0; i < 3 * NV; i++) {
    const dsReal x = m.verts[1][i], h = (dsReal)1e-6;
    double lp, lm;
    m.verts[1][i] = x + h;
    ds__braster_render(br, &m.verts[0][0], NULL);
    ds__braster_loss(br, &def, NULL, L);
    lp = L[1];
    m.verts[1][i] = x - h;
    ds__braster_render(br, &m.verts[0][0], NULL);
    ds__braster_loss(br, &def, NULL, L);
    lm = L[1];
    m.verts[1][i] = x;
    const double fd = (lp - lm) / (2 * (double)h), an = dv[1][i];
    worst = fmax(worst, fabs(fd - an) / scale);
    if (!(fabs(fd - an) <= 1e-6 * scale + 1e-5 * fabs(fd))) bad++;
    /* the other instances' gradients do not see instance 1's vertex: a
     * wrong instance offset would put its gradient there */
  }
  fprintf(stderr, "  batch %s gradient vs central differences: max |fd - an| / max |an| = %.3g (max %.3g)\n", what,
          worst, scale);
  CHECK(scale > 0);
  CHECK_INT_EQ(bad, 0);
  /* a wrong adjoint (instance 0's gradient in place of 1's) is rejected */
  int bad0 = 0;
  for (int i = 0; i < 3 * NV; i++)
    if (!(fabs((double)dv[0][i] - (double)dv[1][i]) <= 1e-6 * scale)) bad0++;
  CHECK(bad0 > 0);
  ds__braster_destroy(br);
  free(goal);
}

static void errors(const Mesh* m) {
  dsRenderSettings s = ds_default_render_settings();
  s.width = 16;
  s.height = 16;
  char err[256] = "";
  dsBatchRaster* br = NULL;
  int bad_faces[3] = {0, 1, NV};
  CHECK_INT_EQ(ds__braster_create(&br, ds__backend(DS_DEVICE_CPU), NULL, &s, 2, NV, 1, bad_faces, m->colors,
                                  DS_COLOR_FACE, err, sizeof err),
               DS_ERR_MESH);
  CHECK_STR_CONTAINS(err, "face 0 refers to vertex 40");
  s.sigma = -1;
  CHECK_INT_EQ(ds__braster_create(&br, ds__backend(DS_DEVICE_CPU), NULL, &s, 2, NV, NF, m->faces, m->colors,
                                  DS_COLOR_FACE, err, sizeof err),
               DS_ERR_INVALID);
  CHECK_STR_CONTAINS(err, "sigma");
  s.sigma = (dsReal)1e-4;
  CHECK_INT_EQ(ds__braster_create(&br, ds__backend(DS_DEVICE_CPU), NULL, &s, 0, NV, NF, m->faces, m->colors,
                                  DS_COLOR_FACE, err, sizeof err),
               DS_ERR_INVALID);
  CHECK_INT_EQ(ds__braster_create(&br, ds__backend(DS_DEVICE_CPU), NULL, &s, 2, NV, NF, m->faces, m->colors, 7, err,
                                  sizeof err),
               DS_ERR_INVALID);
  CHECK_STR_CONTAINS(err, "color_mode 7");
  CHECK_INT_EQ(ds__braster_create(&br, ds__backend(DS_DEVICE_CPU), NULL, &s, 2, NV, NF, m->faces, m->colors,
                                  DS_COLOR_FACE, err, sizeof err),
               0);
  dsLossDef def = ds_default_loss_def();
  dsReal L[2], dv[2 * 3 * NV];
  CHECK_INT_EQ(ds__braster_loss(br, &def, NULL, L), DS_ERR_STATE);
  CHECK_STR_CONTAINS(ds__braster_last_error(br), "nothing rendered");
  CHECK_INT_EQ(ds__braster_backward(br, NULL, dv), DS_ERR_STATE);
  CHECK_INT_EQ(ds__braster_render(br, &m->verts[0][0], NULL), 0);
  CHECK_INT_EQ(ds__braster_loss(br, &def, NULL, L), DS_ERR_STATE);
  CHECK_STR_CONTAINS(ds__braster_last_error(br), "no goal");
  def.levels = 0;
  CHECK_INT_EQ(ds__braster_loss(br, &def, NULL, L), DS_ERR_INVALID);
  CHECK_STR_CONTAINS(ds__braster_last_error(br), "levels");
  CHECK_INT_EQ(ds__braster_backward(br, NULL, dv), DS_ERR_STATE);
  CHECK_STR_CONTAINS(ds__braster_last_error(br), "no image gradient");
  ds__braster_destroy(br);
}


/* ---- CUDA parity (a GPU visible) ---------------------------------------------------- */
typedef struct Out {
  dsReal img[B * 50 * 41 * 4];
  dsReal loss[NLOSS][B];
  dsReal dv[NLOSS][B * NV * 3];
} Out;
static Out g_cpu, g_gpu;

/* Renders, losses (the four kinds) and gradients of setup su on backend be
 * (context ctx; verts go through the backend's memory). */
static void outputs(const Setup* su, const Mesh* m, const dsBackend* be, void* ctx, Out* o) {
  const dsRenderSettings s = settings_of(su);
  const size_t npx = 4 * (size_t)su->w * su->h;
  dsReal* goal = (dsReal*)calloc(B * npx, sizeof(dsReal));
  g_rng = 77;
  for (size_t i = 0; i < B * npx; i++) goal[i] = (dsReal)urand();
  char err[256] = "";
  dsBatchRaster* br = NULL;
  CHECK_INT_EQ(ds__braster_create(&br, be, ctx, &s, B, NV, NF, m->faces, m->colors, su->mode, err, sizeof err), 0);
  dsReal* dverts = (dsReal*)be->alloc(ctx, sizeof(dsReal) * B * NV * 3);
  dsReal* dgrad = (dsReal*)be->alloc(ctx, sizeof(dsReal) * B * NV * 3);
  if (!br || !dverts || !dgrad) {
    fprintf(stderr, "  %s: %s\n", su->name, err);
    return;
  }
  CHECK_INT_EQ(be->put(ctx, dverts, &m->verts[0][0], sizeof(dsReal) * B * NV * 3), 0);
  CHECK_INT_EQ(ds__braster_render(br, dverts, o->img), 0);
  CHECK_INT_EQ(ds__braster_set_goal(br, goal, 1), 0);
  dsLossDef defs[NLOSS];
  loss_defs(defs);
  const dsReal wts[B] = {(dsReal)1.0, (dsReal)0.25, (dsReal)-2.0};
  for (int d = 0; d < NLOSS; d++) {
    CHECK_INT_EQ(ds__braster_loss(br, &defs[d], wts, o->loss[d]), 0);
    CHECK_INT_EQ(be->zero(ctx, dgrad, sizeof(dsReal) * B * NV * 3), 0);
    CHECK_INT_EQ(ds__braster_backward(br, NULL, dgrad), 0);
    CHECK_INT_EQ(be->get(ctx, o->dv[d], dgrad, sizeof(dsReal) * B * NV * 3), 0);
  }
  be->release(ctx, dverts);
  be->release(ctx, dgrad);
  ds__braster_destroy(br);
  free(goal);
}

static double rel_diff(const dsReal* a, const dsReal* b, size_t n) {
  double scale = 0, worst = 0;
  for (size_t i = 0; i < n; i++) scale = fmax(scale, fabs((double)a[i]));
  for (size_t i = 0; i < n; i++) worst = fmax(worst, fabs((double)a[i] - (double)b[i]));
  return scale > 0 ? worst / scale : worst;
}

static void cuda_parity(const Setup* setups, int ns, const Mesh* m) {
  const dsBackend* cu = ds__backend(DS_DEVICE_CUDA);
  if (!cu || ds_cuda_device_count() <= 0) {
    fprintf(stderr, "  no CUDA device: the CUDA backend's parity is not checked here\n");
    return;
  }
  /* a batched engine on cuda:0 lends its context (stream) */
  const char* name = NULL;
  dsModel* model = NULL;
  for (int c = 0; c < ds_env_class_count() && !model; c++) {
    const dsEnvClass* cls = ds_env_class_at(c);
    dsEnvDef def = ds_default_env_def(cls->name);
    dsEnv* env = NULL;
    char err[512];
    if (ds_env_create(&def, &env, err, sizeof err)) continue;
    if (ds_model_copy(ds_env_model(env), &model)) model = NULL;
    name = cls->name;
    ds_env_destroy(env);
  }
  dsBatchSimDef bd = ds_default_batch_sim_def();
  bd.device = (dsDevice){DS_DEVICE_CUDA, 0};
  dsBatchSim* bs = NULL;
  char err[512];
  CHECK(model != NULL);
  if (!model) return;
  CHECK_INT_EQ(ds_bsim_create(model, &bd, &bs, err, sizeof err), 0);
  if (!bs) {
    fprintf(stderr, "  cuda:0 (%s model): %s\n", name, err);
    ds_model_free(model);
    return;
  }
  for (int i = 0; i < ns; i++) {
    const Setup* su = &setups[i];
    const size_t npx = 4 * (size_t)su->w * su->h;
    outputs(su, m, ds__backend(DS_DEVICE_CPU), NULL, &g_cpu);
    outputs(su, m, cu, ds__bsim_context(bs), &g_gpu);
    double w = rel_diff(g_cpu.img, g_gpu.img, B * npx);
    for (int d = 0; d < NLOSS; d++) {
      w = fmax(w, rel_diff(g_cpu.loss[d], g_gpu.loss[d], B));
      w = fmax(w, rel_diff(g_cpu.dv[d], g_gpu.dv[d], B * NV * 3));
    }
    fprintf(stderr, "  cuda:0 %s: images, losses, gradients within %.3g of the CPU backend's\n", su->name, w);
    if (!(w <= 1e-10)) DST_FAIL_AT("cuda:0 %s: %.3g from the CPU backend (1e-10 allowed)", su->name, w);
  }
  ds_bsim_free(bs);
  ds_model_free(model);
}

int main(void) {
  Mesh m;
  make_mesh(&m);
  static const Setup setups[] = {
      {"perspective flat 40x30 k2", 40, 30, 2, 0, DS_COLOR_FACE, 0},
      {"perspective per-vertex 37x29 k3 directional", 37, 29, 3, 0, DS_COLOR_VERTEX, 1},
      {"orthographic flat 50x41 k1 directional", 50, 41, 1, 1, DS_COLOR_FACE, 1},
      {"orthographic per-vertex 33x33 k2", 33, 33, 2, 1, DS_COLOR_VERTEX, 0},
  };
  for (size_t i = 0; i < sizeof setups / sizeof setups[0]; i++) {
    run_setup(&setups[i], &m, 1);
    run_setup(&setups[i], &m, 2);
  }
  if (DS_SINGLE) /* float positions: a difference quotient would measure rounding */
    fprintf(stderr, "  --enable-single: the central-difference check needs double; skipped\n");
  else {
    dsLossDef mse = ds_default_loss_def(), dssim = ds_default_loss_def();
    mse.moments_weight = (dsReal)0.5;
    dssim.kind = DS_LOSS_DSSIM; /* the image operations' adjoints: filters, pyramid, SSIM maps */
    dssim.levels = 2;
    dssim.weights[1] = (dsReal)0.5;
    fd_check(&m, mse, "MSE + moments");
    fd_check(&m, dssim, "two-level D-SSIM");
  }
  errors(&m);
  cuda_parity(setups, (int)(sizeof setups / sizeof setups[0]), &m);
  return dst_result(__FILE__);
}

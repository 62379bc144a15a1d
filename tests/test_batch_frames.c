/* Frame terms of a backward on the batched engine, rendered where the
 * engine runs (envs/env_frames.c over the batched renderer of dsim/raster.h), against
 * the same backward with the frames rendered on the host env by env
 * (ds__env_set_batched_frames(0)): dL/d(actions), every parameter gradient
 * and the losses bitwise equal, for
 *   - a lockstep batch of three control-fem envs (own seeds, one heavier)
 *     and a single env on the batched engine;
 *   - the built-in loss summed over every frame and the last-frame loss,
 *     with reward adjoints (frame weights other than 1, some negative);
 *   - MSE, L1 and the moments term (two stages), a two-level D-SSIM
 *     pyramid (the batched loss's image operations);
 *   - a second camera; a checkpointed tape (frames between checkpoints);
 *   - adjoints of image observations at step ends (with frames at the same
 *     substeps: one scratch for both);
 *   - the lights' gradients (light.ambient, light.directional and, with a
 *     directional light in the camera2 variants, light.direction), which
 *     the batched renderer's light adjoint gives (nonzero: checked).
 * A mutation check: a lockstep batch whose envs got each other's goals
 * (seeds swapped for the second run only) gives other gradients. With a
 * CUDA device the shared runs also go to cuda:0 and are compared within
 * 1e-10. */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "dsim/batch.h"
#include "dsim/device.h"
#include "dsim/dsim.h"
#include "envs/env_priv.h"
#include "tests/dstest.h"

#define NB 3
#define MAXG 65536

typedef struct Variant {
  const char* name;
  int loss_kind, image_loss, levels, cam2, checkpoint;
  double moments;
  int adj_reward;
  int adj_image; /* image observations and adjoints of them */
} Variant;

static int g_cuda = 0; /* runs on cuda:0 */

static dsEnvDef def_of(const Variant* v) {
  dsEnvDef def = ds_default_env_def("control-fem");
  def.control_interval = 4;
  def.substeps = 4 * 3 + 2;
  def.render_interval = 3;
  def.render_last = 1;
  def.width = 14;
  def.height = 12;
  def.supersample = 2;
  def.gradients = 1;
  def.batch_engine = 1;
  def.loss_kind = v->loss_kind;
  def.image_loss = v->image_loss;
  def.loss_levels = v->levels;
  def.loss_moments = (dsReal)v->moments;
  def.cam2 = v->cam2;
  def.checkpoint_every = v->checkpoint;
  if (g_cuda) def.device = (dsDevice){DS_DEVICE_CUDA, 0};
  def.obs_image = v->adj_image;
  if (v->cam2) { /* a directional light (the others: the headlight) */
    def.light_dir[0] = (dsReal)0.3;
    def.light_dir[1] = (dsReal)1.0;
    def.light_dir[2] = (dsReal)-0.4;
  }
  return def;
}

static void action_of(int env, int k, int A, dsReal* a) {
  for (int j = 0; j < A; j++) a[j] = (dsReal)(0.5 * sin(0.7 * k + 0.31 * j + 1.1 * env));
}

static int grads_of(dsEnv* e, dsReal* out) {
  int n = 0;
  for (int k = 0; k < ds_param_count(); k++) {
    const dsReal* g;
    int c;
    if (ds_env_param_grad(e, ds_param_name(k), &g, &c) || c == 0 || n + c > MAXG / 2) continue;
    memcpy(out + n, g, (size_t)c * sizeof(dsReal));
    n += c;
  }
  static const char* const lights[] = {"light.ambient", "light.directional", "light.direction"};
  for (int k = 0; k < 3; k++) {
    const dsReal* g;
    int c;
    CHECK_INT_EQ(ds_env_param_grad(e, lights[k], &g, &c), 0);
    double size = 0;
    for (int i = 0; i < c; i++) size += fabs((double)g[i]);
    if (k < 2) CHECK(size > 0); /* the ambient and directional terms light every frame */
    memcpy(out + n, g, (size_t)c * sizeof(dsReal));
    n += c;
  }
  return n;
}

/* One episode of an NB lockstep batch (or, with single, env 0 alone) and its
 * backward; gradients, action gradients and losses into out. */
static int run(const Variant* v, int batched, int single, int swap, dsReal* out) {
  ds__env_set_batched_frames(batched);
  dsEnvDef def = def_of(v);
  const int n = single ? 1 : NB;
  dsBatch* b = NULL;
  dsEnv* e1 = NULL;
  char err[512] = "";
  int rc = single ? ds_env_create(&def, &e1, err, sizeof err) : ds_batch_create_lockstep(&def, n, &b, err, sizeof err);
  CHECK_INT_EQ(rc, 0);
  if (rc) {
    fprintf(stderr, "  %s\n", err);
    return 0;
  }
  dsEnv* e0 = single ? e1 : ds_batch_env(b, 0);
  const int A = ds_env_action_size(e0), S = ds_env_num_steps(e0);
  uint64_t seeds[NB] = {7, 8, 9};
  if (swap) {
    seeds[0] = 8;
    seeds[1] = 7;
  }
  if (single) {
    CHECK_INT_EQ(ds_env_reset(e1, seeds[0], NULL, NULL), 0);
  } else {
    CHECK_INT_EQ(ds_batch_reset(b, seeds, NULL, NULL, NULL, NULL), 0);
    /* env 1 heavier */
    const dsReal* p;
    int np;
    dsEnv* h = ds_batch_env(b, 1);
    CHECK_INT_EQ(ds_env_param(h, "particle.mass", &p, &np), 0);
    dsReal* m = (dsReal*)malloc(sizeof(dsReal) * (size_t)np);
    for (int i = 0; i < np; i++) m[i] = p[i] * (dsReal)1.2;
    CHECK_INT_EQ(ds_env_set_param(h, "particle.mass", m, np), 0);
    free(m);
  }
  dsReal* acts = (dsReal*)calloc((size_t)n * A, sizeof(dsReal));
  for (int k = 0; k < S; k++) {
    for (int i = 0; i < n; i++) action_of(i, k, A, acts + (size_t)i * A);
    if (single)
      CHECK_INT_EQ(ds_env_step(e1, acts, NULL, NULL, NULL, NULL), 0);
    else
      CHECK_INT_EQ(ds_batch_step(b, acts, NULL, NULL, NULL, NULL, NULL, 0), 0);
  }
  dsReal* ga = (dsReal*)calloc((size_t)n * S * A, sizeof(dsReal));
  dsReal losses[NB] = {0, 0, 0}, adj_r[NB * 64];
  for (int i = 0; i < n * S; i++) adj_r[i] = (dsReal)(0.3 + 0.5 * sin(1.7 * i)); /* some negative */
  int status[NB];
  const size_t npx = 4 * (size_t)def.width * def.height;
  dsReal* adj_img = v->adj_image ? (dsReal*)malloc(sizeof(dsReal) * npx * n * S) : NULL;
  for (size_t i = 0; adj_img && i < npx * n * S; i++) adj_img[i] = (dsReal)(0.01 * sin(0.37 * (double)i));
  if (v->adj_reward || v->adj_image) {
    rc = single ? ds_env_backward_adjoints(e1, NULL, adj_img, v->adj_reward ? adj_r : NULL, ga)
                : ds_batch_backward_adjoints(b, NULL, adj_img, v->adj_reward ? adj_r : NULL, ga, status);
  } else {
    rc = single ? ds_env_backward_loss(e1, losses, ga) : ds_batch_backward_loss(b, losses, ga, status);
  }
  CHECK_INT_EQ(rc, 0);
  if (rc) fprintf(stderr, "  %s: %s\n", v->name, single ? ds_env_last_error(e1) : ds_batch_last_error(b));
  int cnt = 0;
  for (int i = 0; i < n; i++) cnt += grads_of(single ? e1 : ds_batch_env(b, i), out + cnt);
  memcpy(out + cnt, ga, sizeof(dsReal) * (size_t)n * S * A);
  cnt += n * S * A;
  memcpy(out + cnt, losses, sizeof losses);
  cnt += NB;
  free(acts);
  free(ga);
  free(adj_img);
  if (single)
    ds_env_destroy(e1);
  else
    ds_batch_destroy(b);
  ds__env_set_batched_frames(1);
  return cnt;
}

static dsReal g_host[MAXG], g_dev[MAXG];

int main(void) {
  static const Variant vars[] = {
      {"image sum, MSE", DS_ENV_LOSS_IMAGE_SUM, DS_LOSS_MSE, 1, 0, 1, 0, 0, 0},
      {"image last, L1, reward adjoints", DS_ENV_LOSS_IMAGE_LAST, DS_LOSS_L1, 1, 0, 1, 0, 1, 0},
      {"image sum, MSE + moments, reward adjoints", DS_ENV_LOSS_IMAGE_SUM, DS_LOSS_MSE, 1, 0, 1, 0.6, 1, 0},
      {"image sum, two-level D-SSIM", DS_ENV_LOSS_IMAGE_SUM, DS_LOSS_DSSIM, 2, 0, 1, 0, 0, 0},
      {"image sum, camera2, checkpointed tape (K 5)", DS_ENV_LOSS_IMAGE_SUM, DS_LOSS_MSE, 1, 1, 5, 0, 1, 0},
      {"image observations' adjoints and reward adjoints", DS_ENV_LOSS_IMAGE_SUM, DS_LOSS_MSE, 1, 0, 1, 0, 1, 1},
      {"image observations' adjoints, camera2, checkpointed", DS_ENV_LOSS_IMAGE_LAST, DS_LOSS_MSE, 1, 1, 4, 0, 0, 1},
  };
  for (size_t q = 0; q < sizeof vars / sizeof vars[0]; q++)
    for (int single = 0; single < 2; single++) {
      const Variant* v = &vars[q];
      const int nh = run(v, 0, single, 0, g_host);
      const int nd = run(v, 1, single, 0, g_dev);
      CHECK_INT_EQ(nh, nd);
      double scale = 0;
      for (int i = 0; i < nh; i++) scale = fmax(scale, fabs((double)g_host[i]));
      if (nh != nd || memcmp(g_host, g_dev, sizeof(dsReal) * (size_t)nh) != 0) {
        int first = -1;
        for (int i = 0; i < nh && first < 0; i++)
          if (memcmp(&g_host[i], &g_dev[i], sizeof(dsReal))) first = i;
        DST_FAIL_AT("%s (%s): gradients differ from the host frames' (first at %d of %d: %.17g vs %.17g)", v->name,
                    single ? "single env" : "lockstep batch", first, nh, first >= 0 ? (double)g_host[first] : 0.0,
                    first >= 0 ? (double)g_dev[first] : 0.0);
      }
      CHECK(scale > 0);
      fprintf(stderr, "  %s (%s): %d values bitwise equal, max |g| %.3g\n", v->name,
              single ? "single env" : "lockstep batch", nh, scale);
    }
  /* on cuda:0 (frames rendered on the GPU) against the host frames on the CPU */
  if (ds_cuda_device_count() > 0) {
    for (size_t q = 0; q < sizeof vars / sizeof vars[0]; q++)
      for (int single = 0; single < 2; single++) {
        const Variant* v = &vars[q];
        const int nh = run(v, 0, single, 0, g_host);
        g_cuda = 1;
        const int nd = run(v, 1, single, 0, g_dev);
        g_cuda = 0;
        CHECK_INT_EQ(nh, nd);
        double scale = 0, worst = 0;
        for (int i = 0; i < nh; i++) scale = fmax(scale, fabs((double)g_host[i]));
        for (int i = 0; i < nh; i++) worst = fmax(worst, fabs((double)g_host[i] - (double)g_dev[i]));
        fprintf(stderr, "  cuda:0 %s (%s): within %.3g of the CPU's host frames\n", v->name,
                single ? "single env" : "lockstep batch", worst / scale);
        if (!(worst <= 1e-10 * scale)) DST_FAIL_AT("cuda:0 %s: %.3g relative (1e-10 allowed)", v->name, worst / scale);
      }
  } else {
    fprintf(stderr, "  no CUDA device: frames on a GPU not checked here\n");
  }
  /* the comparison sees a wrong goal: swapped seeds give other gradients */
  {
    const int nh = run(&vars[0], 0, 0, 0, g_host);
    const int nd = run(&vars[0], 1, 0, 1, g_dev);
    CHECK_INT_EQ(nh, nd);
    CHECK(memcmp(g_host, g_dev, sizeof(dsReal) * (size_t)nh) != 0);
  }
  return dst_result(__FILE__);
}

/* Frames rendered on demand (dsim/env.h "Frames are rendered when something
 * needs them"): the env keeps a frame's positions when it is taken and
 * renders it only when a loss, a reward or the backward needs it.
 *
 * 1. Loss and rewards equal, bit for bit, those of frames rendered as they
 *    are taken (here: ds_env_render and ds_env_image_loss at every frame's
 *    substep, the eager pipeline), for IMAGE_LAST and IMAGE_SUM, with and
 *    without rewards asked for, after every step and after a rewind
 *    (ds_env_set_state).
 * 2. A run log's episode frames (trainer, recorder, run log: what `dsim run`
 *    wires) equal a direct render of a re-run of the logged actions, and its
 *    per-iteration losses those of the trainer. */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsim/dsim.h"
#include "tests/dstest.h"

#define SEED 3

/* A small episode whose control interval C divides the render interval R,
 * so a frame's substep is a step end where the test can render it. */
static dsEnvDef small_def(const char* name, int loss_kind) {
  dsEnvDef d = ds_default_env_def(name);
  CHECK(d.cls != NULL);
  d.substeps = 200;
  d.control_interval = 10;
  d.render_interval = 40;
  d.render_last = 1;
  d.width = d.height = 24;
  d.supersample = 1;
  d.sigma = 1e-4;
  d.loss_kind = loss_kind;
  /* one view: the eager reference renders with ds_env_render, which is the
     first view's (the sum over views is checked in test_env_target) */
  d.cam2 = 0;
  if (!strcmp(name, "control-cloth")) {
    dsControlClothParams* p = (dsControlClothParams*)ds_env_def_params(&d);
    p->size_min = p->size_max = 4;
    d.start[0] = -1;
  }
  return d;
}

static void action_at(int k, int A, dsReal* a) {
  for (int i = 0; i < A; i++) a[i] = (dsReal)(0.2 * sin(0.9 * k + 0.7 * i));
}

/* the rewound episode's actions from step kmid on: other ones */
static void action_after_rewind(int k, int A, dsReal* a) { action_at(k + 7, A, a); }

/* The eager pipeline: the image loss of the current state's render. */
static dsReal eager_frame_loss(dsEnv* env, dsReal* img) {
  dsReal l = 0;
  CHECK_INT_EQ(ds_env_render(env, img), 0);
  CHECK_INT_EQ(ds_env_image_loss(env, img, ds_env_goal_image(env), &l, NULL), 0);
  return l;
}

/* 1. lazy = eager, bit for bit */
static void test_lazy_equals_eager(const char* name, int loss_kind, int with_reward) {
  dsEnvDef d = small_def(name, loss_kind);
  char err[512];
  dsEnv *lazy = NULL, *ref = NULL;
  CHECK_INT_EQ(ds_env_create(&d, &lazy, err, sizeof err), 0);
  CHECK_INT_EQ(ds_env_create(&d, &ref, err, sizeof err), 0);
  if (!lazy || !ref) {
    fprintf(stderr, "%s: %s\n", name, err);
    ds_env_destroy(lazy);
    ds_env_destroy(ref);
    return;
  }
  const int A = ds_env_action_size(lazy), S = ds_env_num_steps(lazy);
  int W = 0, H = 0;
  ds_env_image_size(lazy, &W, &H);
  dsReal* a = (dsReal*)calloc((size_t)A + 1, sizeof(dsReal));
  dsReal* img = (dsReal*)calloc((size_t)W * H * 4, sizeof(dsReal));
  const int ssz = ds_env_state_size(lazy);
  dsReal* mid = (dsReal*)calloc((size_t)ssz, sizeof(dsReal));
  CHECK_INT_EQ(ds_env_reset(lazy, SEED, NULL, NULL), 0);
  CHECK_INT_EQ(ds_env_reset(ref, SEED, NULL, NULL), 0);
  /* eager: frame 0 at reset, then at every frame substep */
  dsReal last = eager_frame_loss(ref, img), sum = last;
  dsReal l = 0;
  CHECK_INT_EQ(ds_env_loss(lazy, &l), 0);
  CHECK(l == last); /* the loss before any step: frame 0's */
  int mismatches = 0, rmismatch = 0, nframes = 1;
  const int kmid = S / 2;
  for (int pass = 0; pass < 2; pass++) {
    for (int k = pass ? kmid : 0; k < S; k++) {
      if (k == kmid && !pass) CHECK_INT_EQ(ds_env_get_state(lazy, mid, ssz), 0);
      if (pass)
        action_after_rewind(k, A, a);
      else
        action_at(k, A, a);
      dsReal r = 0, rr = 0;
      int done = 0;
      CHECK_INT_EQ(ds_env_step(lazy, a, NULL, NULL, with_reward ? &r : NULL, &done), 0);
      if (pass) continue; /* the rewound episode is compared at its end */
      CHECK_INT_EQ(ds_env_step(ref, a, NULL, NULL, NULL, NULL), 0);
      const int t = (k + 1) * d.control_interval < d.substeps ? (k + 1) * d.control_interval : d.substeps;
      if ((t < d.substeps && t % d.render_interval == 0) || t == d.substeps) {
        const dsReal lf = eager_frame_loss(ref, img);
        last = lf;
        sum += lf;
        nframes++;
        if (loss_kind == DS_ENV_LOSS_IMAGE_SUM || t == d.substeps) rr -= lf;
      }
      if (with_reward && r != rr) rmismatch++;
      CHECK_INT_EQ(ds_env_loss(lazy, &l), 0);
      if (l != (loss_kind == DS_ENV_LOSS_IMAGE_SUM ? sum : last)) mismatches++;
    }
    if (!pass) {
      CHECK_INT_EQ(nframes, 6); /* substeps 0, 40, ..., 160 and the last (200) */
      /* rewind to the middle and run the second half again */
      CHECK_INT_EQ(ds_env_set_state(lazy, mid, ssz), 0);
    }
  }
  /* the rewound episode against an eager one with the same actions: frames
   * taken again after the rewind must not keep the first pass's losses */
  CHECK_INT_EQ(ds_env_reset(ref, SEED, NULL, NULL), 0);
  last = sum = eager_frame_loss(ref, img);
  for (int k = 0; k < S; k++) {
    if (k < kmid)
      action_at(k, A, a);
    else
      action_after_rewind(k, A, a);
    CHECK_INT_EQ(ds_env_step(ref, a, NULL, NULL, NULL, NULL), 0);
    const int t = (k + 1) * d.control_interval < d.substeps ? (k + 1) * d.control_interval : d.substeps;
    if ((t < d.substeps && t % d.render_interval == 0) || t == d.substeps) {
      last = eager_frame_loss(ref, img);
      sum += last;
    }
  }
  CHECK_INT_EQ(ds_env_loss(lazy, &l), 0);
  if (l != (loss_kind == DS_ENV_LOSS_IMAGE_SUM ? sum : last)) mismatches++;
  if (mismatches || rmismatch)
    fprintf(stderr, "%s loss %d reward %d: %d loss and %d reward mismatches\n", name, loss_kind, with_reward,
            mismatches, rmismatch);
  CHECK_INT_EQ(mismatches, 0);
  CHECK_INT_EQ(rmismatch, 0);
  /* the backward still sees the frames */
  dsReal lb = 0;
  dsReal* g = (dsReal*)calloc((size_t)S * A + 1, sizeof(dsReal));
  CHECK_INT_EQ(ds_env_backward_loss(lazy, &lb, g), 0);
  CHECK(lb == l);
  free(g);
  free(a);
  free(img);
  free(mid);
  ds_env_destroy(lazy);
  ds_env_destroy(ref);
}

/* 2. a run log's frames = a direct render of a re-run */
static uint8_t to_u8(dsReal v) {
  const double x = (double)v;
  if (!(x > 0)) return 0;
  if (x >= 1) return 255;
  return (uint8_t)floor(x * 255.0 + 0.5);
}

static void test_log_frames(void) {
#ifndef DS_HAVE_HDF5
  fprintf(stderr, "log frames: skipped (built --without-hdf5)\n");
#else
  dsEnvDef d = small_def("control-fem", DS_ENV_LOSS_IMAGE_LAST);
  char err[512];
  dsEnv* env = NULL;
  CHECK_INT_EQ(ds_env_create(&d, &env, err, sizeof err), 0);
  if (!env) return;
  dsTrainerDef td = ds_default_trainer_def();
  td.seed = td.env_seed = td.net.seed = SEED;
  td.optim.lr = 0.5;
  dsTrainer* tr = NULL;
  CHECK_INT_EQ(ds_trainer_create(env, &td, &tr, err, sizeof err), 0);
  dsRecorder* rec = NULL;
  CHECK_INT_EQ(ds_recorder_create(env, 1, &rec, err, sizeof err), 0);
  const char* bdir = getenv("DS_BUILDDIR");
  char path[2300];
  snprintf(path, sizeof path, "%s/tests/test_frames_tmp.h5", bdir ? bdir : ".");
  dsRunLogDef ld = ds_default_runlog_def();
  ld.config_text = ds_env_config_text(env);
  ld.env = "control-fem";
  ld.method = "image";
  ld.overwrite = 1;
  dsRunLog* log = NULL;
  CHECK_INT_EQ(ds_runlog_create(path, &ld, &log, err, sizeof err), 0);
  if (!tr || !rec || !log) {
    fprintf(stderr, "%s\n", err);
    return;
  }
  const int S = ds_env_num_steps(env), A = ds_env_action_size(env);
  dsReal* acts = (dsReal*)calloc((size_t)S * A, sizeof(dsReal));
  double losses[3];
  for (int i = 0; i < 3; i++) {
    dsTrainerIter it;
    CHECK_INT_EQ(ds_trainer_iterate(tr, &it), 0);
    losses[i] = it.loss;
    dsRunIteration ri = {it.loss, it.metric, 0.0, it.grad_norm, NULL};
    CHECK_INT_EQ(ds_runlog_append_iteration(log, &ri), 0);
    if (i == 1) { /* log iteration 1's episode as "best" */
      memcpy(acts, it.actions, (size_t)S * A * sizeof(dsReal));
      const dsEpisodeRecord* e = NULL;
      CHECK_INT_EQ(ds_recorder_record(rec, td.env_seed, i, it.actions, &e), 0);
      if (e) CHECK_INT_EQ(ds_runlog_write_episode(log, "best", e), 0);
    }
  }
  CHECK_INT_EQ(ds_runlog_close(log, "completed"), 0);
  /* read back */
  int n = 0, F = 0, H = 0, W = 0;
  double *ll = NULL, *lm = NULL, *lw = NULL, *lg = NULL;
  uint8_t* frames = NULL;
  CHECK_INT_EQ(ds_runlog_read_iterations(path, &n, &ll, &lm, &lw, &lg, err, sizeof err), 0);
  CHECK_INT_EQ(n, 3);
  for (int i = 0; i < n && ll; i++) CHECK(ll[i] == losses[i]);
  CHECK_INT_EQ(ds_runlog_read_frames(path, "best", &F, &H, &W, &frames, err, sizeof err), 0);
  CHECK_INT_EQ(F, 6);
  CHECK_INT_EQ(H, d.height);
  CHECK_INT_EQ(W, d.width);
  /* the re-run: the same definition and actions, frames rendered at their substeps */
  dsEnv* re = NULL;
  CHECK_INT_EQ(ds_env_create(&d, &re, err, sizeof err), 0);
  const size_t px = (size_t)d.width * d.height * 4;
  dsReal* img = (dsReal*)calloc(px, sizeof(dsReal));
  long differ = 0;
  int f = 0;
  if (re && frames && F == 6) {
    CHECK_INT_EQ(ds_env_reset(re, td.env_seed, NULL, NULL), 0);
    CHECK_INT_EQ(ds_env_render(re, img), 0);
    for (size_t p = 0; p < px; p++) differ += frames[p] != to_u8(img[p]);
    f = 1;
    for (int k = 0; k < S; k++) {
      CHECK_INT_EQ(ds_env_step(re, acts + (size_t)k * A, NULL, NULL, NULL, NULL), 0);
      const int t = (k + 1) * d.control_interval < d.substeps ? (k + 1) * d.control_interval : d.substeps;
      if ((t < d.substeps && t % d.render_interval == 0) || t == d.substeps) {
        CHECK_INT_EQ(ds_env_render(re, img), 0);
        for (size_t p = 0; p < px; p++) differ += frames[(size_t)f * px + p] != to_u8(img[p]);
        f++;
      }
    }
    CHECK_INT_EQ(f, 6);
    /* the frames show the body */
    int lit = 0;
    for (size_t p = 0; p < (size_t)F * px; p++) lit += frames[p] > 0;
    CHECK(lit > 0);
  }
  CHECK_INT_EQ(differ, 0);
  ds_runlog_free(ll);
  ds_runlog_free(lm);
  ds_runlog_free(lw);
  ds_runlog_free(lg);
  ds_runlog_free(frames);
  remove(path);
  free(img);
  free(acts);
  ds_env_destroy(re);
  ds_recorder_destroy(rec);
  ds_trainer_destroy(tr);
  ds_env_destroy(env);
#endif
}

int main(void) {
  const char* names[] = {"walker", "control-fem", "control-cloth"};
  for (int i = 0; i < 3; i++)
    for (int lk = DS_ENV_LOSS_IMAGE_LAST; lk <= DS_ENV_LOSS_IMAGE_SUM; lk++)
      for (int rw = 0; rw < 2; rw++) test_lazy_equals_eager(names[i], lk, rw);
  test_log_frames();
  return DST_RESULT();
}

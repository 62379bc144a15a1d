/* The camera simulator (dsim/raster.h ds_camsim_*, render/footage.c) and
 * sysid.video "camsim": the hard z-buffer against hand-computed pixels (a
 * quad covering known pixels, a pixel whose 2 x 2 samples are half covered,
 * the nearer of two quads in either face order), sensor noise (bitwise
 * reproducible for a seed; mean ~0 and std ~sigma over a large image;
 * clamped), blur keeping the mean, the cluttered background where no surface
 * is; then sysid on camsim footage: the gradient through the composite over
 * the known background against central differences, and a short
 * identification that improves the parameter; the silhouette term's
 * gradient and an identification with it under the camera's own light. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dsim/env.h"
#include "dsim/raster.h"
#include "dsim/sysid.h"
#include "tests/dstest.h"

/* Orthographic camera on the z axis: NDC (x, y) = world (x, y) */
static dsCamSimDef flat_def(int w, int h, int k) {
  dsCamSimDef d = ds_default_camsim_def();
  d.width = w;
  d.height = h;
  d.supersample = k;
  const dsReal eye[3] = {0, 0, -5}, at[3] = {0, 0, 0}, up[3] = {0, 1, 0};
  ds_camera_set_eye(&d.camera, eye, at, up);
  d.camera.orthographic = 1;
  d.camera.ortho_height = 1;
  d.ambient = 1; /* colour = base: no light direction in the expected values */
  d.diffuse = 0;
  d.specular = 0;
  for (int q = 0; q < 3; q++) d.light_color[q] = 1;
  return d;
}

/* quad q: [x0, x1] x [y0, y1] at depth z (faces 2q, 2q + 1) */
static void quad(dsReal* v, int* f, int q, double x0, double x1, double y0, double y1, double z) {
  const double c[4][2] = {{x0, y0}, {x1, y0}, {x1, y1}, {x0, y1}};
  for (int i = 0; i < 4; i++) {
    v[3 * (4 * q + i)] = (dsReal)c[i][0];
    v[3 * (4 * q + i) + 1] = (dsReal)c[i][1];
    v[3 * (4 * q + i) + 2] = (dsReal)z;
  }
  const int t[6] = {0, 1, 2, 0, 2, 3};
  for (int i = 0; i < 6; i++) f[6 * q + i] = 4 * q + t[i];
}

static dsReal* px(dsReal* img, int w, int row, int col) { return img + 4 * ((size_t)row * w + col); }

static void test_hard_raster(void) {
  enum { W = 8, H = 8 };
  dsReal v[24], img[W * H * 4];
  int f[12];
  const dsReal base[3] = {0.2, 0.6, 0.8}, colors[12] = {0.2, 0.6, 0.8, 0.2, 0.6, 0.8, 1, 0, 0, 1, 0, 0};
  char err[256];
  /* pixel edges at NDC -1, -0.75, ..., 1: [-0.5, 0.5]^2 is pixels 2..5 exactly */
  dsCamSimDef d = flat_def(W, H, 4);
  dsCamSim* c = NULL;
  CHECK_INT_EQ(ds_camsim_create(&c, &d, 4, err, sizeof err), 0);
  quad(v, f, 0, -0.5, 0.5, -0.5, 0.5, 0);
  dsRasterMesh m = {v, 4, f, 2, colors, DS_COLOR_FACE};
  CHECK_INT_EQ(ds_camsim_render(c, &m, 1, 7, img), 0);
  int bad = 0;
  for (int r = 0; r < H; r++)
    for (int col = 0; col < W; col++) {
      const int in = r >= 2 && r <= 5 && col >= 2 && col <= 5;
      for (int q = 0; q < 3; q++) bad += fabs(px(img, W, r, col)[q] - (in ? base[q] : 0)) > 1e-15;
      bad += px(img, W, r, col)[3] != 1;
    }
  CHECK_INT_EQ(bad, 0);
  /* nearer quad (z = -1, towards the eye) over the right half: it wins in
     either face order */
  quad(v, f, 1, 0, 0.5, -0.5, 0.5, -1);
  dsReal colors2[12] = {1, 0, 0, 1, 0, 0, 0.2, 0.6, 0.8, 0.2, 0.6, 0.8};
  for (int order = 0; order < 2; order++) {
    dsRasterMesh m2 = {v, 8, f, 4, order ? colors : colors2, DS_COLOR_FACE};
    if (!order) { /* near quad first */
      int g[12];
      memcpy(g, f + 6, 6 * sizeof(int));
      memcpy(g + 6, f, 6 * sizeof(int));
      m2.faces = g;
      CHECK_INT_EQ(ds_camsim_render(c, &m2, 1, 7, img), 0);
    } else {
      CHECK_INT_EQ(ds_camsim_render(c, &m2, 1, 7, img), 0);
    }
    CHECK(px(img, W, 3, 5)[0] == 1 && px(img, W, 3, 5)[1] == 0); /* right half: red */
    CHECK(fabs(px(img, W, 3, 2)[0] - base[0]) < 1e-15 && fabs(px(img, W, 3, 2)[2] - base[2]) < 1e-15);
  }
  ds_camsim_destroy(c);
  /* 2 x 2 samples: column 3 spans NDC [-0.25, 0], samples at -0.1875 and
     -0.0625; a quad to x = -0.125 covers the left two of its four samples */
  d = flat_def(W, H, 2);
  for (int q = 0; q < 3; q++) d.background[q] = 1;
  CHECK_INT_EQ(ds_camsim_create(&c, &d, 4, err, sizeof err), 0);
  quad(v, f, 0, -0.5, -0.125, -0.5, 0.5, 0);
  CHECK_INT_EQ(ds_camsim_render(c, &m, 1, 7, img), 0);
  for (int q = 0; q < 3; q++) {
    CHECK_CLOSE(px(img, W, 3, 3)[q], 0.5 * base[q] + 0.5, 0, 1e-15);
    CHECK_CLOSE(px(img, W, 3, 2)[q], base[q], 0, 1e-15);
    CHECK(px(img, W, 3, 4)[q] == 1);
    CHECK(px(img, W, 1, 3)[q] == 1); /* row 1: above the quad */
  }
  /* a light intensity of 0.5 halves the lit colour, not the background */
  CHECK_INT_EQ(ds_camsim_render(c, &m, 0.5, 7, img), 0);
  CHECK_CLOSE(px(img, W, 3, 2)[1], 0.5 * base[1], 0, 1e-15);
  CHECK(px(img, W, 3, 6)[1] == 1);
  ds_camsim_destroy(c);
  /* refusals name the field */
  d.supersample = 0;
  CHECK_INT_EQ(ds_camsim_create(&c, &d, 4, err, sizeof err), DS_ERR_INVALID);
  CHECK_STR_CONTAINS(err, "supersample");
}

static void stats(const dsReal* img, int n, double* mean, double* sd) {
  double s = 0, s2 = 0;
  for (int p = 0; p < n; p++)
    for (int q = 0; q < 3; q++) s += img[4 * p + q];
  *mean = s / (3.0 * n);
  for (int p = 0; p < n; p++)
    for (int q = 0; q < 3; q++) s2 += (img[4 * p + q] - *mean) * (img[4 * p + q] - *mean);
  *sd = sqrt(s2 / (3.0 * n - 1));
}

static void test_noise(void) {
  enum { W = 128, H = 128 };
  static dsReal a[W * H * 4], b[W * H * 4];
  const double sigmas[2] = {0.01, 0.05};
  char err[256];
  dsRasterMesh none = {NULL, 0, NULL, 0, NULL, DS_COLOR_FACE};
  for (int i = 0; i < 2; i++) {
    dsCamSimDef d = flat_def(W, H, 1);
    for (int q = 0; q < 3; q++) d.background[q] = 0.5;
    d.noise = (dsReal)sigmas[i];
    dsCamSim* c = NULL;
    CHECK_INT_EQ(ds_camsim_create(&c, &d, 0, err, sizeof err), 0);
    CHECK_INT_EQ(ds_camsim_render(c, &none, 1, 42, a), 0);
    CHECK_INT_EQ(ds_camsim_render(c, &none, 1, 42, b), 0);
    CHECK(memcmp(a, b, sizeof a) == 0); /* the same seed: the same bits */
    CHECK_INT_EQ(ds_camsim_render(c, &none, 1, 43, b), 0);
    CHECK(memcmp(a, b, sizeof a) != 0);
    double mean, sd;
    stats(a, W * H, &mean, &sd);
    printf("noise sigma %.2f: mean - 0.5 = %.2e, std %.5f over %d values\n", sigmas[i], mean - 0.5, sd, 3 * W * H);
    /* standard error of the mean sigma/sqrt(49152) = sigma/222; of the std ~ sigma/313 */
    CHECK(fabs(mean - 0.5) < sigmas[i] / 50);
    CHECK(fabs(sd / sigmas[i] - 1) < 0.02);
    ds_camsim_destroy(c);
  }
  /* clamped to [0, 1] */
  dsCamSimDef d = flat_def(W, H, 1);
  for (int q = 0; q < 3; q++) d.background[q] = 0.98;
  d.noise = 1;
  dsCamSim* c = NULL;
  CHECK_INT_EQ(ds_camsim_create(&c, &d, 0, err, sizeof err), 0);
  CHECK_INT_EQ(ds_camsim_render(c, &none, 1, 5, a), 0);
  int out = 0, ones = 0;
  for (int p = 0; p < W * H * 4; p++) out += a[p] < 0 || a[p] > 1, ones += a[p] == 1;
  CHECK_INT_EQ(out, 0);
  CHECK(ones > W * H); /* the alpha channel and about half the colours */
  ds_camsim_destroy(c);
}

static void test_blur_background(void) {
  enum { W = 32, H = 32 };
  static dsReal sharp[W * H * 4], soft[W * H * 4];
  dsReal v[12], colors[6] = {1, 1, 1, 1, 1, 1};
  int f[6];
  char err[256];
  quad(v, f, 0, -0.25, 0.25, -0.125, 0.25, 0);
  dsRasterMesh m = {v, 4, f, 2, colors, DS_COLOR_FACE};
  dsCamSimDef d = flat_def(W, H, 4);
  for (int q = 0; q < 3; q++) d.background[q] = 0.25;
  dsCamSim *c = NULL, *cb = NULL;
  CHECK_INT_EQ(ds_camsim_create(&c, &d, 2, err, sizeof err), 0);
  d.blur = 1.5;
  CHECK_INT_EQ(ds_camsim_create(&cb, &d, 2, err, sizeof err), 0);
  CHECK_INT_EQ(ds_camsim_render(c, &m, 1, 0, sharp), 0);
  CHECK_INT_EQ(ds_camsim_render(cb, &m, 1, 0, soft), 0);
  double m0, s0, m1, s1;
  stats(sharp, W * H, &m0, &s0);
  stats(soft, W * H, &m1, &s1);
  printf("blur 1.5 px: mean %.15f -> %.15f, std %.4f -> %.4f\n", m0, m1, s0, s1);
  CHECK_CLOSE(m1, m0, 0, 1e-12); /* the quad lies more than 3 sigma inside */
  CHECK(s1 < 0.95 * s0);
  CHECK(px(soft, W, 16, 16)[0] < 1 && px(soft, W, 12, 16)[0] > 0.25); /* the edge spread */
  ds_camsim_destroy(c);
  ds_camsim_destroy(cb);
  /* clutter: where no surface is, the frame is the background */
  d = flat_def(W, H, 4);
  d.clutter = 20;
  d.clutter_seed = 3;
  CHECK_INT_EQ(ds_camsim_create(&c, &d, 2, err, sizeof err), 0);
  CHECK_INT_EQ(ds_camsim_render(c, &m, 1, 0, sharp), 0);
  const dsReal* bg = ds_camsim_background(c);
  int differ = 0, onquad = 0;
  for (int r = 0; r < H; r++)
    for (int col = 0; col < W; col++) {
      const int in = col >= 12 && col < 20 && r >= 12 && r < 18; /* x in [-0.25, 0.25], y in [-0.125, 0.25] */
      for (int q = 0; q < 4; q++) differ += !in && fabs(px(sharp, W, r, col)[q] - bg[4 * (r * W + col) + q]) > 1e-15;
      onquad += in && fabs(px(sharp, W, r, col)[0] - 1) < 1e-15;
    }
  CHECK_INT_EQ(differ, 0);
  CHECK_INT_EQ(onquad, 48);
  double bm, bs;
  stats(bg, W * H, &bm, &bs);
  CHECK(bs > 0.05); /* it is cluttered */
  dsCamSim* c2 = NULL;
  d.clutter_seed = 4;
  CHECK_INT_EQ(ds_camsim_create(&c2, &d, 2, err, sizeof err), 0);
  CHECK(memcmp(bg, ds_camsim_background(c2), W * H * 4 * sizeof(dsReal)) != 0);
  ds_camsim_destroy(c);
  ds_camsim_destroy(c2);
}

/* ---- sysid on camsim footage ------------------------------------------------ */
static dsEnvDef small_beam(void) {
  dsEnvDef ed = ds_default_env_def("beam");
  char err[256];
  ds_env_def_set(&ed, "beam.cells", "[3, 1, 1]", err, sizeof err);
  ds_env_def_set(&ed, "beam.clamp", "true", err, sizeof err);
  ed.substeps = 384;
  ed.render_interval = 64;
  ed.width = ed.height = 24;
  ed.sigma = (dsReal)1e-3;
  ed.cam_distance = 2;
  return ed;
}

static dsSysidDef camsim_sysid(double init) {
  dsSysidDef sd = ds_default_sysid_def();
  dsSysidParam* p = &sd.params[0];
  snprintf(p->name, sizeof p->name, "tet.k_mu");
  p->lower = 1;
  p->upper = 1e5;
  p->init[0] = (dsReal)init;
  p->ninit = 1;
  p->truth[0] = 1000;
  p->ntruth = 1;
  sd.video = DS_SYSID_CAMSIM;
  sd.camsim.cam.noise = (dsReal)0.01;
  sd.camsim.cam.clutter = 12;
  sd.camsim.drift = 0.1;
  sd.optimizer = DS_SYSID_LBFGS;
  sd.lr = 0.5;
  return sd;
}

/* the gradient through the fitted gain and the composite over the known
   background against central differences (L-BFGS needs it exact); under
   MSE dL/dgain = 0 at the fitted gain, D-SSIM also checks the dgain/dx part */
static void check_gradient(dsSysid* s, const char* loss) {
  double x = 800, L, g, Lp, Lm, gd;
  CHECK_INT_EQ(ds_sysid_eval(s, &x, &L, &g), 0);
  const double h = 1e-5 * x;
  double xp = x + h, xm = x - h;
  CHECK_INT_EQ(ds_sysid_eval(s, &xp, &Lp, &gd), 0);
  CHECK_INT_EQ(ds_sysid_eval(s, &xm, &Lm, &gd), 0);
  const double fd = (Lp - Lm) / (2 * h);
  printf("camsim %s loss %.6g, dL/dk_mu %.6e, central difference %.6e\n", loss, L, g, fd);
  CHECK_CLOSE(g, fd, 1e-4, 0);
}

static void test_sysid_camsim(void) {
  dsEnvDef ed = small_beam();
  dsSysidDef sd = camsim_sysid(700);
  char err[512];
  dsSysid* s = NULL;
  int rc = ds_sysid_create(&ed, &sd, 0, NULL, &s, err, sizeof err);
  if (rc) printf("create: %s\n", err);
  CHECK_INT_EQ(rc, 0);
  if (!s) return;
  /* the video is the camera simulator's: opaque, not the soft render of the truth */
  const dsSysidVideo* v = ds_sysid_video(s);
  const size_t npix = 4 * (size_t)v->width * v->height;
  int opaque = 1;
  for (size_t p = 3; p < npix * v->nframes; p += 4) opaque &= v->rgba[p] == 1;
  CHECK(opaque);
  check_gradient(s, "mse");
  dsSysidIter it;
  for (int i = 0; i < 8; i++) CHECK_INT_EQ(ds_sysid_iterate(s, &it), 0);
  double are[1];
  CHECK_INT_EQ(ds_sysid_errors(s, NULL, are), 0);
  printf("camsim identification: 700 -> %.6g (true 1000), ARE %.3g\n", ds_sysid_best_values(s, NULL)[0], are[0]);
  /* from 0.3; the rest is the bias of the unknown light (docs/sysid.md) */
  CHECK(are[0] < 0.2);
  ds_sysid_destroy(s);
  ed.image_loss = DS_LOSS_DSSIM;
  CHECK_INT_EQ(ds_sysid_create(&ed, &sd, 0, NULL, &s, err, sizeof err), 0);
  if (s) check_gradient(s, "dssim");
  ds_sysid_destroy(s);
}

/* identify k_mu from 700 (true 1000) on camsim footage; the ARE */
static double identify(const dsEnvDef* ed, const dsSysidDef* sd, int iters) {
  char err[512];
  dsSysid* s = NULL;
  int rc = ds_sysid_create(ed, sd, 0, NULL, &s, err, sizeof err);
  if (rc) printf("create: %s\n", err);
  CHECK_INT_EQ(rc, 0);
  if (!s) return INFINITY;
  dsSysidIter it;
  for (int i = 0; i < iters && !ds_sysid_stop_reason(s)[0]; i++) CHECK_INT_EQ(ds_sysid_iterate(s, &it), 0);
  double are[1] = {INFINITY};
  CHECK_INT_EQ(ds_sysid_errors(s, NULL, are), 0);
  ds_sysid_destroy(s);
  return are[0];
}

/* The silhouette term (sysid.camsim.silhouette): its adjoint (into the
   identifier's alpha, alone and beside the image loss) against central
   differences, and what it is for: under the camera simulator's own light
   (and its noise, clutter and drift) the silhouette with the identifier's
   sampling matched to the camera's (4 x 4) finds k_mu where the image loss,
   biased by the shading it cannot reproduce, does not. */
static void test_silhouette(void) {
  dsEnvDef ed = small_beam();
  ed.supersample = 4;
  ed.sigma = (dsReal)1e-4;
  dsSysidDef sd = camsim_sysid(700);
  sd.camsim.silhouette = 1;
  sd.camsim.image_weight = 0.5;
  char err[512];
  dsSysid* s = NULL;
  CHECK_INT_EQ(ds_sysid_create(&ed, &sd, 0, NULL, &s, err, sizeof err), 0);
  if (s) check_gradient(s, "mse + silhouette");
  ds_sysid_destroy(s);
  sd.camsim.image_weight = 0;
  s = NULL;
  CHECK_INT_EQ(ds_sysid_create(&ed, &sd, 0, NULL, &s, err, sizeof err), 0);
  if (s) check_gradient(s, "silhouette");
  ds_sysid_destroy(s);
  const double sil = identify(&ed, &sd, 12);
  sd.camsim.image_weight = 1;
  sd.camsim.silhouette = 0;
  const double img = identify(&ed, &sd, 12);
  /* under flat shading the mask is exact (every face as bright as its
     neighbours): what is left is the identifier's own error */
  sd.camsim.image_weight = 0;
  sd.camsim.silhouette = 1;
  sd.camsim.cam.diffuse = 0;
  sd.camsim.cam.specular = 0;
  const double flat = identify(&ed, &sd, 12);
  printf("camsim k_mu ARE: silhouette %.3g, image loss %.3g; silhouette under flat shading %.3g\n", sil, img, flat);
  CHECK(sil < 0.6 * img);
  CHECK(flat < 0.01);
  /* both weights 0: no loss, refused naming the keys */
  sd.camsim.image_weight = 0;
  sd.camsim.silhouette = 0;
  char msg[256] = "";
  CHECK(ds_sysid_def_validate(&sd, msg, sizeof msg) != 0);
  CHECK(strstr(msg, "sysid.camsim") != NULL);
}

/* fit_shading (sysid.camsim.fit_shading): the identifier's faces painted
   by class, a 3 x 3 colour matrix fitted per frame; its adjoint (through
   the fitted matrix) against central differences under MSE and D-SSIM
   (under MSE dL/dM = 0 at the fit, D-SSIM also checks the dM/dx part), and
   an identification under the camera's own light, with the identifier's
   sampling matched to the camera's: the per-class light factors remove the
   shading bias that the per-channel gain leaves. */
static void test_fit_shading(void) {
  dsEnvDef ed = small_beam();
  ed.supersample = 4;
  ed.sigma = (dsReal)1e-6;
  dsSysidDef sd = camsim_sysid(700);
  sd.camsim.fit_shading = 1;
  char err[512];
  dsSysid* s = NULL;
  for (int loss = 0; loss < 2; loss++) {
    ed.image_loss = loss ? DS_LOSS_DSSIM : DS_LOSS_MSE;
    CHECK_INT_EQ(ds_sysid_create(&ed, &sd, 0, NULL, &s, err, sizeof err), 0);
    if (s) check_gradient(s, loss ? "fit_shading dssim" : "fit_shading mse");
    ds_sysid_destroy(s);
    s = NULL;
  }
  ed.image_loss = DS_LOSS_MSE;
  const double shaded = identify(&ed, &sd, 15);
  sd.camsim.fit_shading = 0;
  const double gain = identify(&ed, &sd, 15);
  printf("camsim k_mu ARE: fit_shading %.3g, per-channel gain %.3g\n", shaded, gain);
  CHECK(shaded < 0.4 * gain);
}

/* camsim.premultiplied: the identifier's premultiplied colour composited
   as a_p + (1 - alpha_p) B_p. With the camera's light and sampling matched
   (both flat, 4 x 4 samples at the same positions, edges a hundredth of a
   pixel) the composite of the true state is the camera's frame but for the
   soft edges, so the loss at the truth is near 0; alpha rgb counts the
   coverage of edge pixels twice and leaves more. Its adjoint (gain and
   colour matrix fits, MSE and D-SSIM) against central differences. */
static void test_premultiplied(void) {
  dsEnvDef ed = small_beam();
  ed.supersample = 4;
  ed.sigma = (dsReal)1e-6;
  ed.gamma = (dsReal)1e-6;
  ed.ambient = 1;
  ed.directional = 0;
  dsSysidDef sd = camsim_sysid(700);
  sd.camsim.cam.noise = 0;
  sd.camsim.drift = 0;
  sd.camsim.cam.ambient = 1;
  sd.camsim.cam.diffuse = 0;
  sd.camsim.cam.specular = 0;
  char err[512];
  double Lt[2], x = 1000, g;
  for (int pm = 0; pm < 2; pm++) {
    dsSysid* s = NULL;
    sd.camsim.premultiplied = pm;
    CHECK_INT_EQ(ds_sysid_create(&ed, &sd, 0, NULL, &s, err, sizeof err), 0);
    if (s) CHECK_INT_EQ(ds_sysid_eval(s, &x, &Lt[pm], &g), 0);
    ds_sysid_destroy(s);
  }
  printf("camsim loss at the truth, flat and matched sampling: alpha rgb %.3g, premultiplied %.3g\n", Lt[0], Lt[1]);
  CHECK(Lt[1] < 0.1 * Lt[0]);
  sd = camsim_sysid(700);
  sd.camsim.premultiplied = 1;
  ed = small_beam();
  ed.supersample = 4;
  ed.sigma = (dsReal)1e-4;
  for (int k = 0; k < 4; k++) {
    dsSysid* s = NULL;
    sd.camsim.fit_shading = k / 2;
    ed.image_loss = k % 2 ? DS_LOSS_DSSIM : DS_LOSS_MSE;
    CHECK_INT_EQ(ds_sysid_create(&ed, &sd, 0, NULL, &s, err, sizeof err), 0);
    if (s) check_gradient(s, k == 0 ? "premultiplied mse" : k == 1 ? "premultiplied dssim" : k == 2 ? "premultiplied fit_shading mse" : "premultiplied fit_shading dssim");
    ds_sysid_destroy(s);
  }
}

int main(void) {
  test_hard_raster();
  test_noise();
  test_blur_background();
  test_sysid_camsim();
  test_silhouette();
  test_fit_shading();
  test_premultiplied();
  return dst_result(__FILE__);
}

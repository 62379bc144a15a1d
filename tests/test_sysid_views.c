/* Several views and camera calibration in sysid (controllers/sysid_views.c):
 *   - one view through the views path (the env's state observation drawn by
 *     the identification's own renderer) gives the loss and gradient of the
 *     usual path (the env's image observation);
 *   - with two views (one with intrinsics) and camera parameters, the
 *     identifier's gradient (physics and both cameras) matches central
 *     differences of the summed loss;
 *   - a thrown box's velocity along the first camera's axis (a level
 *     camera: depth only scales the image): two views identify it to
 *     round-off where the first view alone stays 70 % off;
 *   - calibration: a camera 4 cm off identified with the initial velocity;
 *   - footage of two views (PNG folders and a camera file with "views");
 *   - errors name the list entry and the key (sysid.cameras[i], views[i]). */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dsim/env.h"
#include "dsim/image.h"
#include "dsim/sysid.h"
#include "dsim/video.h"
#include "tests/dstest.h"

/* a small box thrown along x and z (z: the first camera's axis), on the ground */
static dsEnvDef thrown_box(void) {
  dsEnvDef ed = ds_default_env_def("beam");
  char err[256];
  ds_env_def_set(&ed, "beam.cells", "[3, 1, 1]", err, sizeof err);
  ds_env_def_set(&ed, "beam.clamp", "false", err, sizeof err);
  ed.substeps = 384;
  ed.render_interval = 64;
  ed.width = ed.height = 24;
  ed.sigma = (dsReal)1e-3;
  ed.cam_distance = 2;
  ed.cam_elevation = 10;
  ed.cam_azimuth = 0;
  ed.ground = 1;
  ed.contact_ke = 100;
  ed.contact_kd = 1;
  ed.contact_kf = 1;
  ed.start[1] = (dsReal)0.012;
  return ed;
}

static void set_param(dsSysidDef* sd, int k, const char* name, double lo, double hi, int n, const double* init,
                      const double* truth) {
  dsSysidParam* p = &sd->params[k];
  snprintf(p->name, sizeof p->name, "%s", name);
  p->lower = (dsReal)lo;
  p->upper = (dsReal)hi;
  for (int i = 0; i < n; i++) p->init[i] = (dsReal)init[i];
  p->ninit = n;
  if (truth) {
    for (int i = 0; i < n; i++) p->truth[i] = (dsReal)truth[i];
    p->ntruth = n;
  }
}

/* view 0: the env's camera (azimuth 0, looking along +z); view 1: from the side, with intrinsics */
static void two_views(dsSysidDef* sd, const dsEnvDef* ed, int with_side) {
  dsReal c[DS_ENV_CAMERA_NVAL];
  dsEnv* env = NULL;
  char err[256];
  CHECK_INT_EQ(ds_env_create(ed, &env, err, sizeof err), 0);
  if (!env) return;
  CHECK_INT_EQ(ds_env_camera(env, c), 0);
  ds_env_destroy(env);
  dsSysidView* v = &sd->views[0];
  memset(sd->views, 0, sizeof sd->views);
  for (int k = 0; k < 3; k++) {
    v->position[k] = c[k];
    v->look_at[k] = c[3 + k];
  }
  v->fov = c[6];
  sd->nviews = 1;
  if (!with_side) return;
  dsSysidView* w = &sd->views[1];
  w->position[0] = 2.2, w->position[1] = 0.5, w->position[2] = 0.3;
  w->look_at[0] = 0.1, w->look_at[1] = 0.05, w->look_at[2] = 0.1;
  w->fx = 40, w->fy = 38, w->cx = 12.5, w->cy = 11;
  sd->nviews = 2;
}

static dsSysid* make(const dsEnvDef* ed, const dsSysidDef* sd) {
  char err[1024];
  dsSysid* s = NULL;
  const int rc = ds_sysid_create(ed, sd, 0, NULL, &s, err, sizeof err);
  if (rc) printf("create: %s\n", err);
  CHECK_INT_EQ(rc, 0);
  return s;
}

/* one view, as a camera list: the usual path's loss and gradient */
static void test_one_view_same(void) {
  dsEnvDef ed = thrown_box();
  dsSysidDef sd = ds_default_sysid_def();
  const double v0[3] = {0.5, 0, 0.3}, vt[3] = {0.8, 0, -0.4};
  set_param(&sd, 0, "initial_velocity", -10, 10, 3, v0, vt);
  dsSysid* a = make(&ed, &sd);
  two_views(&sd, &ed, 0);
  dsSysid* b = make(&ed, &sd);
  if (!a || !b) return;
  double x[3] = {0.5, 0, 0.3}, ga[3], gb[3], la = 0, lb = 0;
  CHECK_INT_EQ(ds_sysid_eval(a, x, &la, ga), 0);
  CHECK_INT_EQ(ds_sysid_eval(b, x, &lb, gb), 0);
  printf("one view: loss %.17g (usual) %.17g (views); gradient %.10g %.10g %.10g / %.10g %.10g %.10g\n", la, lb, ga[0],
         ga[1], ga[2], gb[0], gb[1], gb[2]);
  CHECK(la > 0);
  CHECK(la == lb); /* the same images, the same loss */
  for (int i = 0; i < 3; i++) CHECK_CLOSE(gb[i], ga[i], 1e-9, 1e-12 * fabs(la));
  ds_sysid_destroy(a);
  ds_sysid_destroy(b);
}

/* two views, physics and both cameras: gradient against central differences */
static void test_gradient(void) {
  dsEnvDef ed = thrown_box();
  dsSysidDef sd = ds_default_sysid_def();
  two_views(&sd, &ed, 1);
  const double v0[3] = {0.5, 0.2, 0.3}, vt[3] = {0.8, 0.1, -0.4};
  set_param(&sd, 0, "initial_velocity", -10, 10, 3, v0, vt);
  const double k0 = 1300, kt = 1000;
  set_param(&sd, 1, "tet.k_mu", 1, 1e6, 1, &k0, &kt);
  double p0[3], l0[3];
  for (int k = 0; k < 3; k++) p0[k] = sd.views[1].position[k] + 0.03 * (k - 1), l0[k] = sd.views[0].look_at[k] + 0.02;
  set_param(&sd, 2, "camera2.position", -10, 10, 3, p0, NULL);
  set_param(&sd, 3, "camera.look_at", -10, 10, 3, l0, NULL);
  const double fx0 = 41, fov0 = 31;
  set_param(&sd, 4, "camera2.fx", 1, 1e4, 1, &fx0, NULL);
  set_param(&sd, 5, "camera.fov", 1, 179, 1, &fov0, NULL);
  const double cy0 = 11.4;
  set_param(&sd, 6, "camera2.cy", -100, 100, 1, &cy0, NULL);
  dsSysid* s = make(&ed, &sd);
  if (!s) return;
  const int n = ds_sysid_num_values(s);
  CHECK_INT_EQ(n, 3 + 1 + 3 + 3 + 1 + 1 + 1);
  double x[16], g[16], L = 0;
  memcpy(x, ds_sysid_initial_values(s), sizeof(double) * (size_t)n);
  CHECK_INT_EQ(ds_sysid_eval(s, x, &L, g), 0);
  CHECK(L > 0);
  int bad = 0;
  for (int i = 0; i < n; i++) {
    const double h = 1e-6 * fmax(fabs(x[i]), 1.0), xi = x[i];
    double lp = 0, lm = 0;
    x[i] = xi + h;
    ds_sysid_eval(s, x, &lp, NULL);
    x[i] = xi - h;
    ds_sysid_eval(s, x, &lm, NULL);
    x[i] = xi;
    const double fd = (lp - lm) / (2 * h);
    const double tol = 1e-5 * fabs(fd) + 1e-9 * L;
    const int ok = fabs(fd - g[i]) <= tol && (fabs(fd - 1.01 * g[i]) > tol || fabs(g[i]) < 1e-300);
    printf("  %-18s value %d: analytic % .10e fd % .10e%s\n", ds_sysid_param_name(s, ds_sysid_value_param(s, i)), i,
           g[i], fd, ok ? "" : "  BAD");
    bad += !ok;
  }
  CHECK_INT_EQ(bad, 0);
  ds_sysid_destroy(s);
}

/* L-BFGS from the initial guess; the largest relative error of parameter 0 (a vector) */
static double identify(const dsEnvDef* ed, const dsSysidDef* sd, int iterations, double* cam_err) {
  dsSysid* s = make(ed, sd);
  if (!s) return INFINITY;
  dsSysidIter it;
  for (int i = 0; i < iterations; i++) {
    if (ds_sysid_iterate(s, &it)) break;
  }
  double are[DS_SYSID_MAX_PARAMS] = {0};
  double bl = 0;
  const double* best = ds_sysid_best_values(s, &bl);
  ds_sysid_errors(s, best, are);
  if (cam_err) {
    /* camera.position (parameter 1): |estimate - truth| in m */
    const double* t = ds_sysid_truth(s);
    double d = 0;
    for (int k = 0; k < 3; k++) d += (best[3 + k] - t[3 + k]) * (best[3 + k] - t[3 + k]);
    *cam_err = sqrt(d);
  }
  ds_sysid_destroy(s);
  return are[0];
}

static void test_depth_two_views(void) {
  dsEnvDef ed = thrown_box();
  ed.cam_elevation = 0; /* level with the box: motion along the view axis only scales the image */
  dsSysidDef sd = ds_default_sysid_def();
  sd.optimizer = DS_SYSID_LBFGS;
  sd.lr = 0.5;
  const double v0[3] = {0.3, 0, 0.6}, vt[3] = {0.6, 0, -0.5};
  set_param(&sd, 0, "initial_velocity", -10, 10, 3, v0, vt);
  two_views(&sd, &ed, 0);
  const double one = identify(&ed, &sd, 20, NULL);
  two_views(&sd, &ed, 1);
  const double two = identify(&ed, &sd, 20, NULL);
  printf("initial velocity along the first view's axis (a level camera), 20 L-BFGS iterations: relative error %.3g "
         "(one view), %.3g (two views)\n",
         one, two);
  CHECK(two < 1e-6);
  CHECK(one > 0.1);
}

static void test_calibration(void) {
  dsEnvDef ed = thrown_box();
  dsSysidDef sd = ds_default_sysid_def();
  sd.optimizer = DS_SYSID_LBFGS;
  sd.lr = 0.2;
  two_views(&sd, &ed, 0);
  const double v0[3] = {0.5, 0, 0.3}, vt[3] = {0.8, 0, 0.2};
  set_param(&sd, 0, "initial_velocity", -10, 10, 3, v0, vt);
  double p0[3];
  for (int k = 0; k < 3; k++) p0[k] = sd.views[0].position[k];
  p0[0] += 0.03, p0[1] -= 0.02, p0[2] += 0.02; /* 4.1 cm off */
  set_param(&sd, 1, "camera.position", -10, 10, 3, p0, NULL);
  double cam = 0;
  const double are = identify(&ed, &sd, 60, &cam);
  printf("calibration: camera 4.1 cm off and the initial velocity: velocity error %.3g, camera error %.3g m\n", are,
         cam);
  CHECK(are < 1e-6);
  CHECK(cam < 1e-6);
}

static void write_text(const char* path, const char* text) {
  FILE* f = fopen(path, "w");
  CHECK(f != NULL);
  if (!f) return;
  fputs(text, f);
  fclose(f);
}

/* footage of two views: PNG folders and a camera file with "views" */
static void test_footage(void) {
  char dir[700], path[1000], err[1024], sub[800];
  const char* base = getenv("DS_BUILDDIR");
  snprintf(dir, sizeof dir, "%s/test_sysid_views.XXXXXX", base && *base ? base : "/tmp");
  if (!mkdtemp(dir)) {
    printf("test_footage: cannot make a temporary folder; not checked\n");
    return;
  }
  dsEnvDef ed = thrown_box();
  dsSysidDef sd = ds_default_sysid_def();
  two_views(&sd, &ed, 1);
  const double vt[3] = {0.6, 0, -0.5};
  set_param(&sd, 0, "initial_velocity", -10, 10, 3, vt, vt);
  dsSysid* s = make(&ed, &sd);
  if (!s) return;
  /* each view's frames: render them through a one-view identification of that view */
  const dsSysidVideo* v0 = ds_sysid_video(s);
  const int F = v0->nframes, w = v0->width, h = v0->height;
  const size_t npix = 4 * (size_t)w * h;
  for (int view = 0; view < 2; view++) {
    dsSysidDef one = sd;
    one.views[0] = sd.views[view];
    one.nviews = 1;
    dsSysid* o = make(&ed, &one);
    if (!o) return;
    snprintf(sub, sizeof sub, "%s/view%d", dir, view);
    CHECK_INT_EQ(mkdir(sub, 0755), 0);
    for (int f = 0; f < F; f++) {
      snprintf(path, sizeof path, "%s/frame_%04d.png", sub, f);
      CHECK_INT_EQ(ds_png_write_real(path, ds_sysid_video(o)->rgba + (size_t)f * npix, w, h, err, sizeof err), 0);
    }
    ds_sysid_destroy(o);
  }
  char text[4096], times[1024] = "";
  for (int f = 0; f < F; f++)
    snprintf(times + strlen(times), sizeof times - strlen(times), "%s%.17g", f ? ", " : "",
             (double)v0->substep[f] * (double)ed.dt);
  const dsSysidView* a = &sd.views[0];
  const dsSysidView* b = &sd.views[1];
  snprintf(text, sizeof text,
           "{\"times\": [%s], \"views\": [\n"
           " {\"position\": [%.17g, %.17g, %.17g], \"look_at\": [%.17g, %.17g, %.17g], \"fov\": %.17g, \"frames\": "
           "\"view0\"},\n"
           " {\"position\": [%.17g, %.17g, %.17g], \"look_at\": [%.17g, %.17g, %.17g], \"fx\": %g, \"fy\": %g, "
           "\"cx\": %g, \"cy\": %g, \"frames\": \"view1\"}]}\n",
           times, a->position[0], a->position[1], a->position[2], a->look_at[0], a->look_at[1], a->look_at[2], a->fov,
           b->position[0], b->position[1], b->position[2], b->look_at[0], b->look_at[1], b->look_at[2], b->fx, b->fy,
           b->cx, b->cy);
  snprintf(path, sizeof path, "%s/cameras.json", dir);
  write_text(path, text);
  dsSysidDef fd = ds_default_sysid_def();
  fd.params[0] = sd.params[0];
  fd.video = DS_SYSID_FRAMES;
  snprintf(fd.camera, sizeof fd.camera, "%s", path);
  snprintf(fd.frames_dir, sizeof fd.frames_dir, "%s", dir);
  dsEnvDef d2 = thrown_box();
  dsSysidVideo got;
  int rc = ds_sysid_load_video(&fd, &d2, &got, err, sizeof err);
  if (rc) printf("load video: %s\n", err);
  CHECK_INT_EQ(rc, 0);
  if (!rc) {
    CHECK_INT_EQ(got.nviews, 2);
    CHECK_INT_EQ(got.nframes, F);
    CHECK(got.views[1].fx == b->fx && got.views[1].cy == b->cy);
    /* the identification against it: at the truth the loss is the 8-bit rounding's, beside it far larger */
    dsSysid* fs = NULL;
    rc = ds_sysid_create(&d2, &fd, 0, &got, &fs, err, sizeof err);
    if (rc) printf("create from footage: %s\n", err);
    CHECK_INT_EQ(rc, 0);
    if (fs) {
      double x[3] = {vt[0], vt[1], vt[2]}, lt = 0, lo = 0;
      CHECK_INT_EQ(ds_sysid_eval(fs, x, &lt, NULL), 0);
      x[2] += 0.1;
      CHECK_INT_EQ(ds_sysid_eval(fs, x, &lo, NULL), 0);
      printf("footage of two views: loss %.3g at the truth, %.3g with v_z 0.1 m/s off\n", lt, lo);
      CHECK(lt < 1e-5);
      CHECK(lo > 100 * lt);
      ds_sysid_destroy(fs);
    }
    ds_sysid_video_free(&got);
  }
  /* a view without look_at, a view without frames: named by index and key */
  snprintf(text, sizeof text,
           "{\"times\": [0.1], \"views\": [{\"position\": [0, 0, -2], \"look_at\": [0, 0, 0], \"fov\": 30, "
           "\"frames\": \"view0\"}, {\"position\": [2, 0, 0], \"fov\": 30, \"frames\": \"view1\"}]}");
  write_text(path, text);
  dsVideo* vid = (dsVideo*)calloc(1, sizeof *vid);
  if (vid) {
    CHECK_INT_EQ(ds_video_read_camera(path, NULL, vid, err, sizeof err), DS_ERR_CONFIG);
    printf("missing look_at: %s\n", err);
    CHECK_STR_CONTAINS(err, "views[1]");
    CHECK_STR_CONTAINS(err, "look_at");
    snprintf(text, sizeof text,
             "{\"views\": [{\"position\": [0, 0, -2], \"look_at\": [0, 0, 0], \"fov\": 30}]}");
    write_text(path, text);
    CHECK_INT_EQ(ds_video_read_camera(path, NULL, vid, err, sizeof err), DS_ERR_CONFIG);
    printf("missing frames: %s\n", err);
    CHECK_STR_CONTAINS(err, "views[0]");
    CHECK_STR_CONTAINS(err, "\"frames\" is required");
    free(vid);
  }
  ds_sysid_destroy(s);
  snprintf(text, sizeof text, "rm -rf '%s'", dir);
  if (system(text) != 0) printf("could not remove %s\n", dir);
}

static const char* const CONFIG =
    "{\"env\": {\"name\": \"beam\", \"beam\": {\"cells\": [3, 1, 1]}, \"physics\": {\"substeps\": 128, "
    "\"render_interval\": 64}, \"render\": {\"width\": 16, \"height\": 16}},\n"
    " \"sysid\": {\"param1\": {\"name\": \"tet.k_mu\", \"lower\": 1, \"upper\": 1e6, \"init\": 800},\n"
    "   \"cameras\": [%s]},\n"
    " \"run\": {\"seed\": 0}}";

/* sysid.cameras in a config: read; an entry missing a key named by index and key */
static void test_config(void) {
  char text[2048], err[1024];
  dsEnvDef ed;
  dsSysidDef sd;
  snprintf(text, sizeof text, CONFIG,
           "{\"position\": [0, 1, -3], \"look_at\": [0, 0, 0], \"fov\": 30}, "
           "{\"position\": [3, 1, 0], \"look_at\": [0.1, 0, 0], \"fx\": 20, \"fy\": 20, \"cx\": 8, \"cy\": 8}");
  int rc = ds_sysid_defs_from_text("cfg.json", text, &ed, &sd, err, sizeof err);
  if (rc) printf("config: %s\n", err);
  CHECK_INT_EQ(rc, 0);
  CHECK_INT_EQ(sd.nviews, 2);
  CHECK(sd.views[1].position[0] == 3 && sd.views[1].look_at[0] == 0.1 && sd.views[1].fx == 20 && sd.views[0].fov == 30);
  snprintf(text, sizeof text, CONFIG,
           "{\"position\": [0, 1, -3], \"look_at\": [0, 0, 0], \"fov\": 30}, {\"position\": [3, 1, 0], \"fov\": 30}");
  CHECK_INT_EQ(ds_sysid_defs_from_text("cfg.json", text, &ed, &sd, err, sizeof err), DS_ERR_CONFIG);
  printf("sysid.cameras error: %s\n", err);
  CHECK_STR_CONTAINS(err, "cfg.json: sysid.cameras[1]: \"look_at\" is required");
  snprintf(text, sizeof text, CONFIG, "{\"position\": [0, 1, -3], \"look_at\": [0, 0, 0], \"fx\": 20, \"fy\": 20, \"cx\": 8}");
  CHECK_INT_EQ(ds_sysid_defs_from_text("cfg.json", text, &ed, &sd, err, sizeof err), DS_ERR_CONFIG);
  CHECK_STR_CONTAINS(err, "sysid.cameras[0]: \"cy\" is required");
  snprintf(text, sizeof text, CONFIG, "{\"position\": [0, 1, -3], \"look_at\": [0, 0, 0], \"fov\": 30, \"zoom\": 2}");
  CHECK_INT_EQ(ds_sysid_defs_from_text("cfg.json", text, &ed, &sd, err, sizeof err), DS_ERR_CONFIG);
  CHECK_STR_CONTAINS(err, "sysid.cameras[0]: unknown key \"zoom\"");
  snprintf(text, sizeof text, CONFIG, "{\"position\": [0, 1], \"look_at\": [0, 0, 0], \"fov\": 30}");
  CHECK_INT_EQ(ds_sysid_defs_from_text("cfg.json", text, &ed, &sd, err, sizeof err), DS_ERR_CONFIG);
  CHECK_STR_CONTAINS(err, "sysid.cameras[0].position: expected an array of 3 numbers");
  /* a camera parameter the views do not have */
  snprintf(text, sizeof text, CONFIG, "{\"position\": [0, 1, -3], \"look_at\": [0, 0, 0], \"fov\": 30}");
  char* p = strstr(text, "tet.k_mu");
  if (p) {
    char t2[2048];
    snprintf(t2, sizeof t2, "%.*scamera.fx%s", (int)(p - text), text, p + strlen("tet.k_mu"));
    dsSysid* s = NULL;
    CHECK_INT_EQ(ds_sysid_create_from_text("cfg.json", t2, 0, NULL, &s, err, sizeof err), DS_ERR_CONFIG);
    printf("camera parameter error: %s\n", err);
    CHECK_STR_CONTAINS(err, "sysid.param1.name: \"camera.fx\" is not a camera parameter");
    ds_sysid_destroy(s);
  }
}

int main(void) {
  test_config();
  test_one_view_same();
  test_gradient();
  test_depth_two_views();
  test_calibration();
  test_footage();
  return DST_RESULT();
}

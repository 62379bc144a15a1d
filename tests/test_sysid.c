/* System identification (dsim/sysid.h): L-BFGS on a quadratic, a bounded
 * quadratic and Rosenbrock; the sysid loss's gradient w.r.t. every kind of
 * parameter (shared and per element, log-reparameterised or not, a
 * 3-vector) against central finite differences in double; a synthetic
 * identification recovering a mass; the config checks of bad parameters;
 * a loss landscape (thread and group paths); footage read from PNG frames
 * and a camera file into an env's camera and schedule; footage in memory
 * and whole configs as text (the entry points of bindings). */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsim/env.h"
#include "dsim/image.h"
#include "dsim/sysid.h"
#include "dsim/video.h"
#include "tests/dstest.h"

/* ---- L-BFGS ---------------------------------------------------------------- */
static int quad(void* user, const double* x, double* f, double* g) {
  (void)user;
  double F = 0;
  for (int i = 0; i < 5; i++) {
    const double a = (double)(i + 1) * (i + 1), c = (double)i - 2;
    F += 0.5 * a * (x[i] - c) * (x[i] - c);
    g[i] = a * (x[i] - c);
  }
  *f = F;
  return 0;
}

static int rosen(void* user, const double* x, double* f, double* g) {
  (void)user;
  const double a = 1 - x[0], b = x[1] - x[0] * x[0];
  *f = a * a + 100 * b * b;
  g[0] = -2 * a - 400 * x[0] * b;
  g[1] = 200 * b;
  return 0;
}

static void test_lbfgs(void) {
  dsLbfgsDef d = ds_default_lbfgs_def();
  dsLbfgs* o = NULL;
  CHECK_INT_EQ(ds_lbfgs_create(&d, 5, &o), 0);
  double x[5] = {0, 0, 0, 0, 0}, g[5], f;
  quad(NULL, x, &f, g);
  int it = 0;
  while (it < 60 && f > 1e-20) {
    if (ds_lbfgs_step(o, x, &f, g, quad, NULL, NULL)) break;
    it++;
  }
  for (int i = 0; i < 5; i++) CHECK_CLOSE(x[i], i - 2.0, 0, 1e-7);
  CHECK(it <= 40);
  ds_lbfgs_destroy(o);
  /* bounds: x_i <= 0.5: the solution is min(c_i, 0.5) */
  CHECK_INT_EQ(ds_lbfgs_create(&d, 5, &o), 0);
  double lo[5] = {-10, -10, -10, -10, -10}, hi[5] = {0.5, 0.5, 0.5, 0.5, 0.5};
  CHECK_INT_EQ(ds_lbfgs_set_bounds(o, lo, hi), 0);
  memset(x, 0, sizeof x);
  quad(NULL, x, &f, g);
  for (it = 0; it < 100; it++)
    if (ds_lbfgs_step(o, x, &f, g, quad, NULL, NULL)) break;
  for (int i = 0; i < 5; i++) CHECK_CLOSE(x[i], fmin(i - 2.0, 0.5), 0, 1e-6);
  ds_lbfgs_destroy(o);
  /* Rosenbrock from (-1.2, 1) */
  d.step0 = 0.1;
  CHECK_INT_EQ(ds_lbfgs_create(&d, 2, &o), 0);
  double r[2] = {-1.2, 1}, gr[2];
  rosen(NULL, r, &f, gr);
  int nev = 0, total = 0;
  for (it = 0; it < 200 && f > 1e-18; it++) {
    if (ds_lbfgs_step(o, r, &f, gr, rosen, NULL, &nev)) break;
    total += nev;
  }
  CHECK_CLOSE(r[0], 1, 0, 1e-6);
  CHECK_CLOSE(r[1], 1, 0, 1e-6);
  printf("lbfgs rosenbrock: %d iterations, %d evaluations, f = %.3g\n", it, total, f);
  CHECK(it < 100);
  ds_lbfgs_destroy(o);
}

/* ---- the sysid loss --------------------------------------------------------- */
static dsEnvDef small_beam(int clamp) {
  dsEnvDef ed = ds_default_env_def("beam");
  char err[256];
  ds_env_def_set(&ed, "beam.cells", "[3, 1, 1]", err, sizeof err);
  ds_env_def_set(&ed, "beam.clamp", clamp ? "true" : "false", err, sizeof err);
  ed.substeps = 384;
  ed.render_interval = 64;
  ed.width = ed.height = 24;
  ed.sigma = (dsReal)1e-3;
  ed.cam_distance = 2;
  return ed;
}

static void set_param(dsSysidDef* sd, int k, const char* name, int per_element, double lo, double hi, double init,
                      double truth) {
  dsSysidParam* p = &sd->params[k];
  snprintf(p->name, sizeof p->name, "%s", name);
  p->per_element = per_element;
  p->lower = (dsReal)lo;
  p->upper = (dsReal)hi;
  p->init[0] = (dsReal)init;
  p->ninit = 1;
  p->truth[0] = (dsReal)truth;
  p->ntruth = 1;
}

/* The env's camera looking at a point other than the origin, through
 * intrinsics whose principal point is off the image centre. */
static void off_centre_camera(dsEnvDef* ed) {
  ed->cam_look_at[0] = (dsReal)0.15;
  ed->cam_look_at[1] = (dsReal)-0.05;
  ed->cam_look_at[2] = (dsReal)0.1;
  const double f = 0.5 * ed->height / tan(0.5 * (double)ed->cam_fov * 3.14159265358979323846 / 180.0);
  ed->cam_fx = (dsReal)(1.1 * f);
  ed->cam_fy = (dsReal)(1.05 * f);
  ed->cam_cx = (dsReal)(0.5 * ed->width + 2.5);
  ed->cam_cy = (dsReal)(0.5 * ed->height - 1.5);
}

/* implicit: backward Euler at 1/180 s, 10.7x small_beam's 1/1920 s, the
 * frames at the same times (every 6 substeps instead of 64), solved tightly
 * (central differences in double resolve the loss to ~1e-10, so Newton and
 * the adjoint solve must converge well below that) */
static void test_gradient(int clamp, int camera, int implicit) {
  dsEnvDef ed = small_beam(clamp);
  if (camera) off_centre_camera(&ed);
  if (!clamp) { /* a free box thrown onto the ground */
    ed.velocity[0] = 1;
    ed.ground = 1;
    ed.contact_ke = 100;
    ed.contact_kd = 1;
    ed.contact_kf = 1;
    ed.start[1] = (dsReal)0.012;
    ed.cam_elevation = 20;
  }
  if (implicit) {
    ed.integrator = DS_INTEGRATOR_IMPLICIT;
    ed.dt = (dsReal)(1.0 / 180.0);
    ed.substeps = 36;
    ed.render_interval = ed.control_interval = 6;
    ed.solver.newton_tol = 1e-12;
    ed.solver.cg_tol = 1e-12;
    ed.solver.adjoint_tol = 1e-13;
    ed.solver.newton_max_iter = 60;
    ed.solver.cg_max_iter = 2000;
    if (!clamp) ed.contact_smooth = (dsReal)0.01; /* kd's step at the skin stalls Newton (docs/integrators.md) */
  }
  dsSysidDef sd = ds_default_sysid_def();
  set_param(&sd, 0, "tet.k_mu", 0, 1, 1e6, 800, 1000);
  set_param(&sd, 1, "tet.k_lambda", 1, 1, 1e6, 1300, 1000);
  if (clamp) /* a clamped beam's fixed particles have mass 0: gravity instead */
    set_param(&sd, 2, "gravity", 0, -20, 20, -9, -9.8);
  else
    set_param(&sd, 2, "particle.mass", 1, 1e-6, 1e3, 0.004, 0.003);
  set_param(&sd, 3, "initial_velocity", 0, -10, 10, 0.5, 1);
  char err[512];
  dsSysid* s = NULL;
  int rc = ds_sysid_create(&ed, &sd, 0, NULL, &s, err, sizeof err);
  if (rc) printf("create: %s\n", err);
  CHECK_INT_EQ(rc, 0);
  if (!s) return;
  const int n = ds_sysid_num_values(s);
  double* x = (double*)malloc(sizeof(double) * (size_t)n);
  double* g = (double*)malloc(sizeof(double) * (size_t)n);
  memcpy(x, ds_sysid_initial_values(s), sizeof(double) * (size_t)n);
  double L = 0;
  rc = ds_sysid_eval(s, x, &L, g);
  if (rc) printf("eval: %s\n", ds_sysid_last_error(s));
  CHECK_INT_EQ(rc, 0);
  CHECK(L > 0);
  int bad = 0, checked = 0;
  for (int i = 0; i < n; i += (i < 8 ? 1 : 5)) {
    const double h = 1e-5 * fmax(fabs(x[i]), 1e-3);
    const double xi = x[i];
    double lp = 0, lm = 0;
    x[i] = xi + h;
    ds_sysid_eval(s, x, &lp, NULL);
    x[i] = xi - h;
    ds_sysid_eval(s, x, &lm, NULL);
    x[i] = xi;
    const double fd = (lp - lm) / (2 * h);
    const double tol = 1e-5 * fabs(fd) + 1e-9 * fabs(L) / fmax(fabs(xi), 1e-3);
    checked++;
    if (!(fabs(fd - g[i]) <= tol) || !(fabs(fd - 1.01 * g[i]) > tol || fabs(g[i]) < 1e-300)) {
      bad++;
      printf("value %d (%s): analytic %.10g fd %.10g\n", i, ds_sysid_param_name(s, ds_sysid_value_param(s, i)), g[i],
             fd);
    }
  }
  printf("sysid gradient (clamp %d%s%s): %d values checked, %d bad, loss %.4g\n", clamp,
         camera ? ", off-centre camera" : "", implicit ? ", implicit" : "", checked, bad, L);
  CHECK_INT_EQ(bad, 0);
  /* the iteration's gradient norm is in u: ln for the positive parameters */
  dsSysidIter it;
  CHECK_INT_EQ(ds_sysid_iterate(s, &it), 0);
  double nn = 0;
  for (int i = 0; i < n; i++) {
    const int k = ds_sysid_value_param(s, i);
    const double c = (k == 3 || (k == 2 && clamp)) ? 1 : x[i]; /* linear or log */
    nn += (g[i] * c) * (g[i] * c);
  }
  CHECK_CLOSE(it.grad_norm, sqrt(nn), 1e-10, 0);
  CHECK_CLOSE(it.loss, L, 1e-12, 0);
  free(x);
  free(g);
  ds_sysid_destroy(s);
}

static void test_recover_mass(int optimizer) {
  dsEnvDef ed = small_beam(1);
  dsSysidDef sd = ds_default_sysid_def();
  set_param(&sd, 0, "tet.k_mu", 0, 1, 1e5, 700, 1000);
  sd.optimizer = optimizer;
  sd.lr = optimizer == DS_SYSID_LBFGS ? 0.5 : 0.1;
  char err[512];
  dsSysid* s = NULL;
  int rc = ds_sysid_create(&ed, &sd, 0, NULL, &s, err, sizeof err);
  if (rc) printf("create: %s\n", err);
  CHECK_INT_EQ(rc, 0);
  if (!s) return;
  dsSysidIter it;
  const int iters = optimizer == DS_SYSID_LBFGS ? 15 : 80;
  for (int i = 0; i < iters; i++) CHECK_INT_EQ(ds_sysid_iterate(s, &it), 0);
  double are[1];
  CHECK_INT_EQ(ds_sysid_errors(s, NULL, are), 0);
  printf("mass recovery (%s): estimate %.6g, true %.6g, relative error %.3g\n",
         optimizer == DS_SYSID_LBFGS ? "lbfgs" : "adam", ds_sysid_best_values(s, NULL)[0], ds_sysid_truth(s)[0], are[0]);
  CHECK(are[0] < (optimizer == DS_SYSID_LBFGS ? 1e-4 : 1e-2));
  ds_sysid_destroy(s);
}

/* Table 1's set-up in small: a rigid box given a known impulse (sysid.action:
 * without it the box rests and its mass does not show) */
static void test_rigid_mass(void) {
  dsEnvDef ed = ds_default_env_def("rigid-toss");
  CHECK(ed.cls != NULL);
  if (!ed.cls) return;
  ed.width = ed.height = 32;
  ed.supersample = 1;
  ed.sigma = (dsReal)1e-4;
  ed.gamma = (dsReal)0.01;
  ed.substeps = 480;
  dsSysidDef sd = ds_default_sysid_def();
  set_param(&sd, 0, "body.mass", 0, 0.05, 10, 1.5, 1.0);
  sd.optimizer = DS_SYSID_LBFGS;
  sd.lr = 0.5;
  char err[512];
  dsSysid* s = NULL;
  /* no impulse: a flat loss (the body rests whatever its mass) */
  CHECK_INT_EQ(ds_sysid_create(&ed, &sd, 0, NULL, &s, err, sizeof err), 0);
  double x = 1.5, g = 1, L = 1;
  if (s) CHECK_INT_EQ(ds_sysid_eval(s, &x, &L, &g), 0);
  CHECK(fabs(g) < 1e-6);
  ds_sysid_destroy(s);
  sd.action[0] = 1;
  sd.naction = 1;
  CHECK_INT_EQ(ds_sysid_create(&ed, &sd, 0, NULL, &s, err, sizeof err), 0);
  if (!s) return;
  CHECK_INT_EQ(ds_sysid_param_width(s, 0), 1);
  dsSysidIter it;
  for (int i = 0; i < 15; i++) CHECK_INT_EQ(ds_sysid_iterate(s, &it), 0);
  double are[1];
  CHECK_INT_EQ(ds_sysid_errors(s, NULL, are), 0);
  printf("rigid mass: estimate %.8g (true 1), relative error %.3g\n", ds_sysid_best_values(s, NULL)[0], are[0]);
  CHECK(are[0] < 1e-6);
  ds_sysid_destroy(s);
}

static void test_bad(void) {
  dsEnvDef ed = small_beam(1);
  char err[512];
  dsSysid* s = NULL;
  dsSysidDef sd = ds_default_sysid_def();
  set_param(&sd, 0, "tet.k_muu", 0, 1, 1e6, 800, 1000);
  CHECK_INT_EQ(ds_sysid_create(&ed, &sd, 0, NULL, &s, err, sizeof err), DS_ERR_CONFIG);
  CHECK_STR_CONTAINS(err, "sysid.param1.name: env \"beam\" has no parameter \"tet.k_muu\"");
  set_param(&sd, 0, "particle.inv_mass", 0, 1, 1e6, 800, 1000);
  CHECK_INT_EQ(ds_sysid_create(&ed, &sd, 0, NULL, &s, err, sizeof err), DS_ERR_CONFIG);
  CHECK_STR_CONTAINS(err, "not a differentiable parameter");
  set_param(&sd, 0, "tet.k_mu", 0, 900, 1e6, 800, 1000);
  CHECK_INT_EQ(ds_sysid_create(&ed, &sd, 0, NULL, &s, err, sizeof err), DS_ERR_CONFIG);
  CHECK_STR_EQ(err, "sysid.param1.init: 800 is outside the bounds [900, 1e+06]");
  CHECK(s == NULL);
  /* from a config text */
  dsSysidDef d2 = ds_default_sysid_def();
  CHECK_INT_EQ(ds_sysid_def_from_text("s.json",
                                      "{\"sysid\": {\"param1\": {\"name\": \"tet.k_mu\", \"lower\": 10, \"upper\": 100,"
                                      " \"init_range\": [5, 50]}}}",
                                      &d2, err, sizeof err),
               DS_ERR_CONFIG);
  CHECK_STR_EQ(err, "s.json: sysid.param1.init_range: [5, 50] is not an interval inside the bounds [10, 100]");
  CHECK_INT_EQ(ds_sysid_def_from_text("s.json", "{\"sysid\": {\"param1\": {\"nam\": \"x\"}}}", &d2, err, sizeof err),
               DS_ERR_CONFIG);
  CHECK_STR_CONTAINS(err, "unknown key \"sysid.param1.nam\"");
  CHECK_INT_EQ(ds_sysid_def_from_text("s.json", "{\"sysid\": {\"param2\": {\"name\": \"tet.k_mu\"}}}", &d2, err,
                                      sizeof err),
               DS_ERR_CONFIG);
  CHECK_STR_EQ(err, "s.json: sysid.param2: comes after sysid.param1, which has no name");
}

/* ---- loss landscape ---------------------------------------------------------- */
static void landscape_run(int group, double* res) {
  dsEnvDef ed = small_beam(1);
  dsSysidDef sd = ds_default_sysid_def();
  set_param(&sd, 0, "tet.k_mu", 0, 1, 1e6, 800, 1000);
  dsLandscapeDef ld = ds_default_landscape_def();
  ld.axis[0].lo = 800;
  ld.axis[0].hi = 1200;
  ld.axis[0].n = 3;
  ld.threads = 2;
  ld.group = group;
  char err[512];
  dsLandscape* ls = NULL;
  int rc = ds_landscape_create(&ed, &sd, &ld, &ls, err, sizeof err);
  if (rc) printf("landscape: %s\n", err);
  CHECK_INT_EQ(rc, 0);
  if (!ls) return;
  CHECK_INT_EQ(ds_landscape_num_points(ls), 3);
  CHECK_INT_EQ(ds_landscape_dims(ls), 1);
  CHECK_STR_EQ(ds_landscape_param_name(ls, 0), "tet.k_mu");
  CHECK_CLOSE(ds_landscape_truth(ls, 0), 1000, 0, 0);
  CHECK_INT_EQ(ds_landscape_evaluate(ls), 0);
  CHECK_INT_EQ(ds_landscape_num_failed(ls), 0);
  memcpy(res, ds_landscape_results(ls), sizeof(double) * 15);
  CHECK_INT_EQ(ds_landscape_lowest(ls), 1);
  ds_landscape_destroy(ls);
}

static void test_landscape(void) {
  double r[15], rg[15];
  landscape_run(0, r);
  /* the truth renders the video itself: loss 0 there, and the slope points at it */
  CHECK_CLOSE(r[0], 800, 0, 0);
  CHECK_CLOSE(r[5], 1000, 0, 0);
  CHECK_CLOSE(r[7], 0, 0, 0);
  CHECK(r[2] > 0 && r[12] > 0);
  CHECK(r[3] < 0 && r[13] > 0);
  landscape_run(1, rg); /* lockstep batches: the same values */
  for (int i = 0; i < 15; i++) CHECK_CLOSE(rg[i], r[i], 1e-9, 1e-12);
  /* the checks name the key */
  dsSysidDef sd = ds_default_sysid_def();
  set_param(&sd, 0, "tet.k_mu", 1, 1, 1e6, 800, 1000);
  dsLandscapeDef ld = ds_default_landscape_def();
  ld.axis[0].lo = 1;
  ld.axis[0].hi = 2;
  ld.axis[0].n = 2;
  char err[512];
  CHECK_INT_EQ(ds_landscape_check(&sd, &ld, err, sizeof err), DS_ERR_CONFIG);
  CHECK_STR_CONTAINS(err, "sysid.param1.per_element");
  sd.params[0].per_element = 0;
  ld.axis[1] = ld.axis[0];
  CHECK_INT_EQ(ds_landscape_check(&sd, &ld, err, sizeof err), DS_ERR_CONFIG);
  CHECK_STR_CONTAINS(err, "sysid.param2");
  ld.axis[1].n = 0;
  sd.video = DS_SYSID_FRAMES; /* footage: a landscape without a truth (tests/test_landscape_plot.sh) */
  CHECK_INT_EQ(ds_landscape_check(&sd, &ld, err, sizeof err), DS_OK);
  sd.video = DS_SYSID_SYNTHETIC;
  ld.axis[0].hi = 0.5;
  CHECK_INT_EQ(ds_landscape_check(&sd, &ld, err, sizeof err), DS_ERR_RANGE);
}

/* ---- footage ------------------------------------------------------------------- */
/* A synthetic video written as PNG frames (plus one at time 0) with its
 * camera file, read back into a fresh env definition. */
static void test_video(void) {
  char dir[900], path[1000], err[1024]; /* paths that fit dsSysidDef.camera, .frames_dir */
  const char* base = getenv("DS_BUILDDIR");
  snprintf(dir, sizeof dir, "%s/test_sysid.XXXXXX", base && *base ? base : "/tmp");
  if (!mkdtemp(dir)) {
    printf("test_video: cannot make a temporary folder; not checked\n");
    return;
  }
  dsEnvDef ed = small_beam(1);
  ed.cam_azimuth = 0;
  ed.cam_elevation = 0;
  dsSysidDef sd = ds_default_sysid_def();
  set_param(&sd, 0, "tet.k_mu", 0, 1, 1e6, 800, 1000);
  dsSysid* s = NULL;
  CHECK_INT_EQ(ds_sysid_create(&ed, &sd, 0, NULL, &s, err, sizeof err), 0);
  if (!s) return;
  const dsSysidVideo* v = ds_sysid_video(s);
  const int F = v->nframes, w = v->width, h = v->height;
  const size_t npix = 4 * (size_t)w * (size_t)h;
  /* frame 0 at time 0 (the initial state: left out), then the video's */
  for (int f = 0; f <= F; f++) {
    snprintf(path, sizeof path, "%s/frame_%04d.png", dir, f);
    CHECK_INT_EQ(ds_png_write_real(path, v->rgba + (size_t)(f ? f - 1 : 0) * npix, w, h, err, sizeof err), 0);
  }
  snprintf(path, sizeof path, "%s/camera.json", dir);
  FILE* cf = fopen(path, "w");
  CHECK(cf != NULL);
  if (!cf) return;
  fprintf(cf, "{\"times\": [0");
  for (int f = 0; f < F; f++) fprintf(cf, ", %.17g", (double)v->substep[f] * (double)ed.dt);
  fprintf(cf, "], \"position\": [0, 0, %.17g], \"look_at\": [0, 0, 0], \"fov\": %.17g}\n", -(double)ed.cam_distance,
          (double)ed.cam_fov);
  fclose(cf);
  dsSysidDef fd = sd;
  fd.video = DS_SYSID_FRAMES;
  snprintf(fd.camera, sizeof fd.camera, "%s", path);
  snprintf(fd.frames_dir, sizeof fd.frames_dir, "%s", dir);
  dsEnvDef d2 = ds_default_env_def("beam");
  dsSysidVideo got;
  int rc = ds_sysid_load_video(&fd, &d2, &got, err, sizeof err);
  if (rc) printf("load video: %s\n", err);
  CHECK_INT_EQ(rc, 0);
  if (!rc) {
    CHECK_INT_EQ(got.nframes, F);
    CHECK_INT_EQ(d2.width, w);
    CHECK_INT_EQ(d2.height, h);
    CHECK_INT_EQ(d2.render_interval, ed.render_interval);
    CHECK_INT_EQ(d2.substeps, ed.substeps);
    CHECK_CLOSE(d2.cam_distance, ed.cam_distance, 1e-12, 0);
    CHECK_CLOSE(d2.cam_elevation, 0, 0, 1e-9);
    CHECK_CLOSE(d2.cam_azimuth, 0, 0, 1e-9);
    for (int f = 0; f < F; f++) CHECK_INT_EQ(got.substep[f], v->substep[f]);
    double maxd = 0;
    for (size_t i = 0; i < (size_t)F * npix; i++) maxd = fmax(maxd, fabs((double)(got.rgba[i] - v->rgba[i])));
    CHECK(maxd <= 0.5 / 255 + 1e-6); /* 8-bit frames */
    ds_sysid_video_free(&got);
  }
  /* a frame missing; a camera not looking at the origin */
  snprintf(path, sizeof path, "%s/frame_%04d.png", dir, F);
  remove(path);
  CHECK_INT_EQ(ds_sysid_load_video(&fd, &d2, &got, err, sizeof err), DS_ERR_CONFIG);
  CHECK_STR_CONTAINS(err, "PNG frames, but");
  snprintf(path, sizeof path, "%s/camera.json", dir);
  cf = fopen(path, "w");
  if (cf) {
    fprintf(cf, "{\"times\": [0.1], \"position\": [0.5, 3, 0.2], \"look_at\": [0.5, 1, 0.2], \"fov\": 40}\n");
    fclose(cf);
  }
  CHECK_INT_EQ(ds_sysid_load_video(&fd, &d2, &got, err, sizeof err), DS_ERR_CONFIG);
  CHECK_STR_CONTAINS(err, "straight above or below");
  snprintf(fd.frames_dir, sizeof fd.frames_dir, "%s/none", dir);
  snprintf(fd.camera, sizeof fd.camera, "%s/none.json", dir);
  CHECK(ds_sysid_load_video(&fd, &d2, &got, err, sizeof err) < 0);
  CHECK_STR_CONTAINS(err, "sysid.camera");
  ds_sysid_destroy(s);
  char cmd[2400];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) printf("could not remove %s\n", dir);
}

/* Footage in memory (ds_sysid_footage_video): the same schedule, camera and
 * pixels as the frames it came from; without times, the env's schedule;
 * bad cameras and times named. A whole config's text
 * (ds_sysid_create_from_text, ds_landscape_create_from_text) with that
 * footage: the loss is 0 at the true value, positive beside it. */
static const char* const FOOTAGE_CONFIG =
    "{\"env\": {\"name\": \"beam\", \"beam\": {\"cells\": [3, 1, 1]}, \"physics\": {\"substeps\": 384, "
    "\"render_interval\": 64}, \"render\": {\"width\": 24, \"height\": 24, \"sigma\": 0.001}, "
    "\"camera\": {\"distance\": 2, \"elevation\": 0, \"azimuth\": 0}},\n"
    " \"sysid\": {\"param1\": {\"name\": \"%s\", \"lower\": 1, \"upper\": 1e6, \"init\": 800}, \"iterations\": 1},\n"
    " \"run\": {\"seed\": 0}}";

static void test_footage(void) {
  char err[1024], text[2048];
  snprintf(text, sizeof text, FOOTAGE_CONFIG, "tet.k_mu");
  dsEnvDef ed;
  dsSysidDef sd;
  CHECK_INT_EQ(ds_sysid_defs_from_text("footage.json", text, &ed, &sd, err, sizeof err), 0);
  sd.params[0].truth[0] = 1000;
  sd.params[0].ntruth = 1;
  dsSysid* s = NULL;
  CHECK_INT_EQ(ds_sysid_create(&ed, &sd, 0, NULL, &s, err, sizeof err), 0);
  if (!s) return;
  const dsSysidVideo* v = ds_sysid_video(s);
  const int F = v->nframes;
  const size_t npix = 4 * (size_t)v->width * (size_t)v->height;
  double times[64];
  for (int f = 0; f < F && f < 64; f++) times[f] = (double)v->substep[f] * (double)ed.dt;
  dsSysidFootage ft;
  memset(&ft, 0, sizeof ft);
  ft.position[2] = -(double)ed.cam_distance;
  ft.fov = (double)ed.cam_fov;
  ft.times = times;
  ft.nframes = F;
  ft.width = v->width;
  ft.height = v->height;
  ft.rgba = v->rgba;
  dsEnvDef d2 = ds_default_env_def("beam");
  dsSysidVideo got;
  int rc = ds_sysid_footage_video(&ft, &d2, &got, err, sizeof err);
  if (rc) printf("footage: %s\n", err);
  CHECK_INT_EQ(rc, 0);
  if (!rc) {
    CHECK_INT_EQ(got.nframes, F);
    CHECK_INT_EQ(d2.render_interval, ed.render_interval);
    CHECK_INT_EQ(d2.substeps, ed.substeps);
    CHECK_INT_EQ(d2.width, v->width);
    CHECK_CLOSE(d2.cam_distance, ed.cam_distance, 1e-12, 0);
    for (int f = 0; f < F; f++) CHECK_INT_EQ(got.substep[f], v->substep[f]);
    CHECK(memcmp(got.rgba, v->rgba, (size_t)F * npix * sizeof(dsReal)) == 0);
    ds_sysid_video_free(&got);
  }
  /* no times: frame k at substep (k + 1) C of the env's C */
  dsEnvDef d3 = ds_default_env_def("beam");
  d3.render_interval = 32;
  ft.times = NULL;
  ft.nframes = 3;
  CHECK_INT_EQ(ds_sysid_footage_video(&ft, &d3, &got, err, sizeof err), 0);
  CHECK_INT_EQ(got.nframes, 3);
  if (got.nframes == 3) CHECK_INT_EQ(got.substep[2], 96);
  CHECK_INT_EQ(d3.substeps, 96);
  CHECK_INT_EQ(d3.control_interval, 32);
  ds_sysid_video_free(&got);
  /* bad input, named */
  ft.times = times;
  ft.nframes = F;
  ft.fov = 0;
  CHECK_INT_EQ(ds_sysid_footage_video(&ft, &d3, &got, err, sizeof err), DS_ERR_CONFIG);
  CHECK_STR_CONTAINS(err, "camera: fov");
  ft.fov = (double)ed.cam_fov;
  ft.fx = 20;
  ft.fy = -1;
  CHECK_INT_EQ(ds_sysid_footage_video(&ft, &d3, &got, err, sizeof err), DS_ERR_CONFIG);
  CHECK_STR_CONTAINS(err, "camera: intrinsics");
  ft.fx = ft.fy = 0;
  const double t1 = times[1];
  times[1] = times[0];
  CHECK_INT_EQ(ds_sysid_footage_video(&ft, &d3, &got, err, sizeof err), DS_ERR_CONFIG);
  CHECK_STR_CONTAINS(err, "times[1]");
  times[1] = t1;
  /* the whole config as text, with the footage: its loss is 0 at the truth only */
  dsSysid* s2 = NULL;
  rc = ds_sysid_create_from_text("footage.json", text, 0, &ft, &s2, err, sizeof err);
  if (rc) printf("create_from_text: %s\n", err);
  CHECK_INT_EQ(rc, 0);
  if (s2) {
    CHECK(ds_sysid_truth(s2) == NULL);
    double x = 1000, loss = -1, loss2 = -1;
    CHECK_INT_EQ(ds_sysid_eval(s2, &x, &loss, NULL), 0);
    CHECK(loss <= 1e-12);
    x = 1100;
    CHECK_INT_EQ(ds_sysid_eval(s2, &x, &loss2, NULL), 0);
    CHECK(loss2 > 1e-8);
    ds_sysid_destroy(s2);
  }
  dsLandscapeDef ld = ds_default_landscape_def();
  ld.axis[0].lo = 500;
  ld.axis[0].hi = 1500;
  ld.axis[0].n = 3; /* 500, 1000, 1500 */
  ld.threads = 1;
  dsLandscape* ls = NULL;
  rc = ds_landscape_create_from_text("footage.json", text, &ld, &ft, &ls, err, sizeof err);
  if (rc) printf("landscape_create_from_text: %s\n", err);
  CHECK_INT_EQ(rc, 0);
  if (ls) {
    CHECK_INT_EQ(ds_landscape_evaluate(ls), 0);
    CHECK_INT_EQ(ds_landscape_lowest(ls), 1);
    CHECK(ds_landscape_results(ls)[5 + 2] <= 1e-12);
    CHECK(isnan(ds_landscape_truth(ls, 0)));
    ds_landscape_destroy(ls);
  }
  /* a parameter the env does not have, named by its key */
  snprintf(text, sizeof text, FOOTAGE_CONFIG, "tet.no_such");
  CHECK(ds_sysid_create_from_text("footage.json", text, 0, &ft, &s2, err, sizeof err) < 0);
  CHECK_STR_CONTAINS(err, "sysid.param1");
  CHECK(s2 == NULL);
  ds_sysid_destroy(s);
}

/* One synthetic video of the small beam under env def ed (frames into out). */
static int render_video(const dsEnvDef* ed, dsReal** out, int* nframes) {
  dsSysidDef sd = ds_default_sysid_def();
  set_param(&sd, 0, "tet.k_mu", 0, 1, 1e6, 1000, 1000);
  char err[512];
  dsSysid* s = NULL;
  int rc = ds_sysid_create(ed, &sd, 0, NULL, &s, err, sizeof err);
  if (rc) {
    printf("render_video: %s\n", err);
    return rc;
  }
  const dsSysidVideo* v = ds_sysid_video(s);
  const size_t n = (size_t)v->nframes * 4 * (size_t)v->width * (size_t)v->height;
  *out = (dsReal*)malloc(n * sizeof(dsReal));
  if (*out) memcpy(*out, v->rgba, n * sizeof(dsReal));
  *nframes = v->nframes;
  ds_sysid_destroy(s);
  return *out ? 0 : DS_ERR_NOMEM;
}

/* Cameras as users have them: a camera file with any look-at point and
 * intrinsics sets the env's camera; intrinsics equal to the fov render the
 * same frames; moving the principal point by one pixel moves the image by
 * one pixel; the view about a look-at point L equals the view about the
 * origin of the scene moved by -L. */
static void test_camera(void) {
  char err[1024], dir[1200], path[1400];
  const char* base = getenv("DS_BUILDDIR");
  snprintf(dir, sizeof dir, "%s/test_sysid_cam.XXXXXX", base && *base ? base : "/tmp");
  if (!mkdtemp(dir)) {
    printf("test_camera: cannot make a temporary folder; not checked\n");
    return;
  }
  snprintf(path, sizeof path, "%s/camera.json", dir);
  FILE* cf = fopen(path, "w");
  CHECK(cf != NULL);
  if (!cf) return;
  fprintf(cf, "{\"times\": [0.1], \"position\": [1.5, 1, -0.5], \"look_at\": [0.5, 0, 0.5], \"fx\": 40, \"fy\": 42, "
              "\"cx\": 13, \"cy\": 11.5}\n");
  fclose(cf);
  dsVideo* v = (dsVideo*)calloc(1, sizeof *v);
  CHECK(v != NULL);
  if (!v) return;
  CHECK_INT_EQ(ds_video_read_camera(path, NULL, v, err, sizeof err), 0);
  CHECK(v->fx == 40 && v->fy == 42 && v->cx == 13 && v->cy == 11.5 && v->fov == 0);
  free(v);
  dsSysidFootage ft;
  memset(&ft, 0, sizeof ft);
  ft.camera_file = path;
  dsReal px[4 * 24 * 24];
  for (int i = 0; i < 4 * 24 * 24; i++) px[i] = 0.5;
  ft.rgba = px;
  ft.nframes = 1;
  ft.width = ft.height = 24;
  dsEnvDef d2 = ds_default_env_def("beam");
  dsSysidVideo got;
  int rc = ds_sysid_footage_video(&ft, &d2, &got, err, sizeof err);
  if (rc) printf("camera file: %s\n", err);
  CHECK_INT_EQ(rc, 0);
  ds_sysid_video_free(&got);
  CHECK_CLOSE(d2.cam_distance, sqrt(3.0), 1e-12, 0);
  CHECK_CLOSE(d2.cam_elevation, asin(1 / sqrt(3.0)) * 180 / 3.14159265358979323846, 1e-9, 0);
  CHECK_CLOSE(d2.cam_azimuth, 45, 1e-9, 0);
  CHECK(d2.cam_look_at[0] == (dsReal)0.5 && d2.cam_look_at[1] == 0 && d2.cam_look_at[2] == (dsReal)0.5);
  CHECK(d2.cam_fx == 40 && d2.cam_fy == 42 && d2.cam_cx == 13 && d2.cam_cy == (dsReal)11.5);
  /* only some of the intrinsics: named */
  cf = fopen(path, "w");
  if (cf) {
    fprintf(cf, "{\"position\": [0, 0, -2], \"look_at\": [0, 0, 0], \"fx\": 40}\n");
    fclose(cf);
  }
  CHECK(ds_sysid_footage_video(&ft, &d2, &got, err, sizeof err) == DS_ERR_CONFIG);
  CHECK_STR_CONTAINS(err, "fx, fy, cx, cy");
  remove(path);
  remove(dir);
  /* intrinsics equal to the fov; the principal point one pixel right */
  dsEnvDef ed = small_beam(1);
  dsReal *a = NULL, *b = NULL, *c = NULL, *d = NULL;
  int F = 0, Fb = 0;
  const int W = ed.width, H = ed.height;
  const double f = 0.5 * H / tan(0.5 * (double)ed.cam_fov * 3.14159265358979323846 / 180.0);
  if (render_video(&ed, &a, &F)) return;
  dsEnvDef ei = ed;
  ei.cam_fx = ei.cam_fy = (dsReal)f;
  ei.cam_cx = (dsReal)(0.5 * W);
  ei.cam_cy = (dsReal)(0.5 * H);
  CHECK_INT_EQ(render_video(&ei, &b, &Fb), 0);
  const size_t fb = 4 * (size_t)W * (size_t)H;
  double m1 = 0, m2 = 0, m3 = 0, seen = 0;
  for (size_t i = 0; b && i < (size_t)F * fb; i++) {
    m1 = fmax(m1, fabs((double)(a[i] - b[i])));
    seen = fmax(seen, (double)a[i]);
  }
  CHECK(seen > 0.1); /* the beam is in view */
  CHECK(m1 <= 1e-9);
  ei.cam_cx = (dsReal)(0.5 * W + 1);
  CHECK_INT_EQ(render_video(&ei, &c, &Fb), 0);
  for (int fr = 0; c && fr < F; fr++)
    for (int y = 0; y < H; y++)
      for (int x = 0; x + 1 < W; x++)
        for (int k = 0; k < 4; k++) {
          const size_t o = (size_t)fr * fb + 4 * ((size_t)y * W + x) + k;
          m2 = fmax(m2, fabs((double)(c[o + 4] - b[o])));
        }
  CHECK(m2 <= 1e-9);
  /* about the look-at point L, with the beam moved by -L (scene.start) and
     the light a headlight: the same frames as about the origin */
  dsEnvDef el = ed, eo = ed;
  const dsReal L[3] = {(dsReal)0.25, (dsReal)-0.125, (dsReal)0.5};
  for (int k = 0; k < 3; k++) {
    el.cam_look_at[k] = L[k];
    el.start[k] = eo.start[k];
  }
  dsReal *e1 = NULL, *e2 = NULL;
  CHECK_INT_EQ(render_video(&eo, &e1, &Fb), 0);
  for (int k = 0; k < 3; k++) el.start[k] = eo.start[k] + L[k];
  CHECK_INT_EQ(render_video(&el, &e2, &Fb), 0);
  for (size_t i = 0; e1 && e2 && i < (size_t)F * fb; i++) m3 = fmax(m3, fabs((double)(e1[i] - e2[i])));
  CHECK(m3 <= 1e-6);
  printf("camera: intrinsics = fov to %.3g, principal point +1 px = image +1 px to %.3g, look-at shift %.3g\n", m1,
         m2, m3);
  free(a);
  free(b);
  free(c);
  free(d);
  free(e1);
  free(e2);
}

/* sysid.restarts: after L-BFGS stops with iterations left, a new start from
 * a new draw of init_range; the run ends when the last start stops; the
 * best values (and ds_sysid_errors without values) are those of the lowest
 * loss over every start. */
static int restarts_run(int restarts, double* best_seen, double* best_loss, double* are_best, double* are_null) {
  dsEnvDef ed = small_beam(1);
  dsSysidDef sd = ds_default_sysid_def();
  set_param(&sd, 0, "tet.k_mu", 0, 1, 1e5, 700, 1000);
  sd.params[0].init_range[0] = 400;
  sd.params[0].init_range[1] = 2000;
  sd.params[0].ninit_range = 2;
  sd.optimizer = DS_SYSID_LBFGS;
  sd.lr = 0.5;
  sd.iterations = 300;
  sd.restarts = restarts;
  char err[512];
  dsSysid* s = NULL;
  CHECK_INT_EQ(ds_sysid_create(&ed, &sd, 0, NULL, &s, err, sizeof err), 0);
  if (!s) return 0;
  dsSysidIter it;
  int n = 0;
  *best_seen = INFINITY;
  while (n < sd.iterations && !ds_sysid_stop_reason(s)[0]) {
    CHECK_INT_EQ(ds_sysid_iterate(s, &it), 0);
    if (it.loss < *best_seen) *best_seen = it.loss;
    n++;
  }
  ds_sysid_best_values(s, best_loss);
  CHECK_INT_EQ(ds_sysid_errors(s, ds_sysid_best_values(s, NULL), are_best), 0);
  CHECK_INT_EQ(ds_sysid_errors(s, NULL, are_null), 0);
  ds_sysid_destroy(s);
  return n;
}

static void test_restarts(void) {
  double seen0, bl0, ab0, an0, seen, bl, ab, an;
  const int n0 = restarts_run(0, &seen0, &bl0, &ab0, &an0);
  const int n = restarts_run(2, &seen, &bl, &ab, &an);
  printf("restarts: %d iterations without, %d with 2 restarts; best loss %.3g, %.3g\n", n0, n, bl0, bl);
  CHECK(n0 > 0 && n0 < 300);  /* the first start stops on its own */
  CHECK(n > n0 + 2 && n < 300); /* two more starts, each stopping */
  CHECK(bl == seen && bl0 == seen0);
  CHECK(bl <= bl0);
  CHECK(ab == an && ab0 == an0);
  dsSysidDef d = ds_default_sysid_def();
  char err[512];
  CHECK_INT_EQ(ds_sysid_def_from_text("s.json", "{\"sysid\": {\"param1\": {\"name\": \"tet.k_mu\"}, \"restarts\": 3}}",
                                      &d, err, sizeof err), 0);
  CHECK_INT_EQ(d.restarts, 3);
}

int main(void) {
  test_lbfgs();
  test_bad();
  if (!DS_SINGLE) { /* FD of a whole float rollout resolves nothing at 1e-5 */
    test_gradient(1, 0, 0);
    test_gradient(0, 0, 0);
    test_gradient(1, 1, 0);
    test_gradient(1, 0, 1); /* Table 3's parameters through the implicit adjoint */
    test_gradient(0, 0, 1);
  } else {
    printf("single precision: sysid gradient vs finite differences needs a double build, not checked\n");
  }
  test_recover_mass(DS_SYSID_LBFGS);
  test_recover_mass(DS_SYSID_ADAM);
  test_rigid_mass();
  test_restarts();
  test_landscape();
  test_video();
  test_footage();
  test_camera();
  return DST_RESULT();
}

/* Volume renderer (render/volume.c, dsim/volume.h): analytic transmittance
 * of a constant-density slab, occlusion by a depth, the hard mesh depth,
 * the adjoint against central differences of an MSE and a D-SSIM loss
 * (density cells, sigma_t, colour, background), bits across thread counts,
 * and the errors. */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#  include <omp.h>
#endif

#include "dsim/volume.h"
#include "tests/dstest.h"

#define N 8   /* cells per axis */
#define S 16  /* image side */
#define NC (N * N * N)
#define NP (S * S)

static uint64_t rng = 88172645463325252ull;
static double urand(void) { /* xorshift64, [0, 1) */
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (double)(rng >> 11) / 9007199254740992.0;
}

static dsVolumeDef grid_def(void) {
  dsVolumeDef d = ds_volume_default_def();
  d.n[0] = d.n[1] = d.n[2] = N;
  d.dx = 1.0 / N;
  d.width = d.height = S;
  d.sigma_t = 2;
  d.color[0] = 0.9, d.color[1] = 0.8, d.color[2] = 0.7;
  d.background[0] = 0.1, d.background[1] = 0.2, d.background[2] = 0.3, d.background[3] = 0.5;
  const dsReal eye[3] = {1.9, 1.3, -1.4}, at[3] = {0.5, 0.5, 0.5}, up[3] = {0, 1, 0};
  ds_camera_set_eye(&d.camera, eye, at, up);
  d.camera.fov_deg = 45;
  return d;
}

/* A camera on the z axis of the unit box, looking down -z from z = 3. */
static dsVolumeDef slab_def(int ortho) {
  dsVolumeDef d = grid_def();
  const dsReal eye[3] = {0.5, 0.5, 3}, at[3] = {0.5, 0.5, 0.5}, up[3] = {0, 1, 0};
  ds_camera_set_eye(&d.camera, eye, at, up);
  d.camera.orthographic = ortho;
  d.camera.ortho_height = (dsReal)0.4;
  d.camera.fov_deg = 15; /* at Z = 3 the rays stay within 0.4 of the axis: all cross z = 1 and z = 0 */
  return d;
}

/* A constant density rho0: T = exp(-sigma_t rho0 L) with L the chord,
 * (Z1 - Z0) |d| where d = (x/ax, y/ay, 1) in the camera frame. */
static void test_slab(int ortho) {
  dsVolumeDef def = slab_def(ortho);
  dsVolume* v;
  char err[256];
  CHECK_INT_EQ(ds_volume_create(&v, &def, err, sizeof err), 0);
  static double rho[NC];
  static dsReal img[NP * 4], depth[NP];
  const double rho0 = 0.7, ay = ortho ? 1 / 0.4 : 1 / tan(7.5 * 3.14159265358979323846 / 180);
  for (int c = 0; c < NC; c++) rho[c] = rho0;
  for (int p = 0; p < NP; p++) depth[p] = (p % S) < S / 2 ? (dsReal)2.5 : (dsReal)INFINITY;
  /* pixels in the left half also stop at Z = 2.5: half the slab */
  for (int pass = 0; pass < 2; pass++) {
    CHECK_INT_EQ(ds_volume_render(v, rho, NULL, pass ? depth : NULL, img), 0);
    double worst = 0;
    for (int p = 0; p < NP; p++) {
      double x = (2.0 * (p % S) + 1 - S) / S, y = (S - 1 - 2.0 * (p / S)) / S;
      double len = ortho ? 1 : sqrt(1 + (x / ay) * (x / ay) + (y / ay) * (y / ay));
      if (pass && (p % S) < S / 2) len *= 0.5;
      double T = exp(-def.sigma_t * rho0 * len);
      for (int ch = 0; ch < 4; ch++) {
        double c = ch < 3 ? def.color[ch] : 1, want = c * (1 - T) + T * def.background[ch];
        double e = fabs((double)img[4 * p + ch] - want);
        worst = e > worst ? e : worst;
      }
    }
    CHECK_CLOSE(worst, 0.0, 0, DS_SINGLE ? 1e-5 : 1e-12);
  }
  /* a surface in front of the box (Z = 1 < 2): the background alone */
  for (int p = 0; p < NP; p++) depth[p] = 1;
  CHECK_INT_EQ(ds_volume_render(v, rho, NULL, depth, img), 0);
  int same = 1;
  for (int p = 0; p < NP; p++)
    for (int ch = 0; ch < 4; ch++) same &= img[4 * p + ch] == (dsReal)def.background[ch];
  CHECK(same);
  ds_volume_destroy(v);
}

/* The hard depth of the quad z = 0.5 (two triangles) seen from z = 3: Z = 2.5. */
static void test_mesh_depth(void) {
  dsVolumeDef def = slab_def(0);
  dsVolume* v;
  CHECK_INT_EQ(ds_volume_create(&v, &def, NULL, 0), 0);
  const dsReal verts[] = {-1, -1, 0.5, 2, -1, 0.5, 2, 2, 0.5, -1, 2, 0.5};
  const int faces[] = {0, 1, 2, 0, 2, 3};
  dsRasterMesh m = {verts, 4, faces, 2, NULL, DS_COLOR_FACE};
  static dsReal depth[NP];
  CHECK_INT_EQ(ds_volume_mesh_depth(v, &m, depth), 0);
  double worst = 0;
  for (int p = 0; p < NP; p++) worst = fmax(worst, fabs((double)depth[p] - 2.5));
  CHECK_CLOSE(worst, 0.0, 0, DS_SINGLE ? 1e-5 : 1e-12);
  m.nface = 0;
  CHECK_INT_EQ(ds_volume_mesh_depth(v, &m, depth), 0);
  CHECK(isinf((double)depth[0]) && isinf((double)depth[NP - 1]));
  const int bad[] = {0, 1, 4};
  m.faces = bad;
  m.nface = 1;
  CHECK_INT_EQ(ds_volume_mesh_depth(v, &m, depth), DS_ERR_MESH);
  ds_volume_destroy(v);
}

/* ---- gradients ---------------------------------------------------------------- */
typedef struct Case {
  dsVolume* v;
  dsImageLoss* loss; /* NULL: MSE */
  double* rho;
  const dsReal* bg;
  const dsReal* depth;
  const dsReal* goal;
  dsReal *img, *gimg;
} Case;

static double eval(Case* k, int want_grad) {
  dsReal L = 0;
  ds_volume_render(k->v, k->rho, k->bg, k->depth, k->img);
  if (k->loss)
    ds_image_loss_eval(k->loss, k->img, k->goal, &L, want_grad ? k->gimg : NULL);
  else
    ds_loss_mse(k->img, k->goal, S, S, &L, want_grad ? k->gimg : NULL);
  return (double)L;
}

/* Max over the checked inputs of |analytic - FD| / (max |analytic| over them). */
static double grad_error(Case* k, const char* label) {
  static double gr[NC];
  static dsReal gbg[NP * 4];
  double gs = 0, gc[3] = {0, 0, 0};
  memset(gr, 0, sizeof gr);
  memset(gbg, 0, sizeof gbg);
  eval(k, 1);
  CHECK_INT_EQ(ds_volume_backward(k->v, k->gimg, gr, &gs, gc, k->bg ? gbg : NULL), 0);
  const double h = 1e-6;
  double worst = 0, scale = 0, an[40], fd[40];
  int m = 0;
  /* 24 random cells */
  for (int t = 0; t < 24; t++, m++) {
    int c = (int)(urand() * NC);
    double r0 = k->rho[c];
    k->rho[c] = r0 + h;
    double lp = eval(k, 0);
    k->rho[c] = r0 - h;
    double lm = eval(k, 0);
    k->rho[c] = r0;
    an[m] = gr[c], fd[m] = (lp - lm) / (2 * h);
  }
  /* sigma_t and the colour */
  dsVolumeDef d0 = *ds_volume_def(k->v), d = d0;
  for (int q = 0; q < 4; q++, m++) {
    double* x = q == 0 ? &d.sigma_t : &d.color[q - 1];
    double x0 = *x;
    *x = x0 + h;
    ds_volume_set_def(k->v, &d);
    double lp = eval(k, 0);
    *x = x0 - h;
    ds_volume_set_def(k->v, &d);
    double lm = eval(k, 0);
    *x = x0;
    ds_volume_set_def(k->v, &d0);
    an[m] = q == 0 ? gs : gc[q - 1], fd[m] = (lp - lm) / (2 * h);
  }
  /* 4 background values */
  if (k->bg) {
    dsReal* bg = (dsReal*)k->bg;
    for (int t = 0; t < 4; t++, m++) {
      int i = (int)(urand() * NP * 4);
      dsReal b0 = bg[i];
      bg[i] = b0 + (dsReal)h;
      double lp = eval(k, 0);
      bg[i] = b0 - (dsReal)h;
      double lm = eval(k, 0);
      bg[i] = b0;
      an[m] = (double)gbg[i], fd[m] = (lp - lm) / (2 * h);
    }
  }
  for (int i = 0; i < m; i++) scale = fmax(scale, fabs(an[i]));
  for (int i = 0; i < m; i++) worst = fmax(worst, fabs(an[i] - fd[i]) / scale);
  printf("  %-34s max |grad| %.3e, worst relative error %.2e\n", label, scale, worst);
  CHECK(scale > 0);
  return worst;
}

static void test_gradients(void) {
  dsVolumeDef def = grid_def();
  dsVolume* v;
  CHECK_INT_EQ(ds_volume_create(&v, &def, NULL, 0), 0);
  static double rho[NC];
  static dsReal bg[NP * 4], depth[NP], goal[NP * 4], img[NP * 4], gimg[NP * 4];
  for (int c = 0; c < NC; c++) rho[c] = urand();
  for (int i = 0; i < NP * 4; i++) bg[i] = (dsReal)urand(), goal[i] = (dsReal)urand();
  /* a surface across the box's middle in half the image (the camera is
   * about 2.5 m from the box's centre) */
  for (int p = 0; p < NP; p++) depth[p] = (p / S) < S / 2 ? (dsReal)(2.2 + 0.02 * (p % S)) : (dsReal)INFINITY;
  dsLossDef ld = ds_default_loss_def();
  ld.kind = DS_LOSS_DSSIM;
  ld.ssim_radius = 3;
  dsImageLoss* ssim;
  CHECK_INT_EQ(ds_image_loss_create(&ssim, &ld, S, S), 0);
  const char* names[4] = {"MSE", "MSE, background and depth", "D-SSIM", "D-SSIM, background and depth"};
  for (int t = 0; t < 4; t++) {
    Case k = {v, t >= 2 ? ssim : NULL, rho, (t & 1) ? bg : NULL, (t & 1) ? depth : NULL, goal, img, gimg};
    double e = grad_error(&k, names[t]);
    CHECK(e < 1e-6);
  }
  ds_image_loss_destroy(ssim);
  ds_volume_destroy(v);
}

/* The same render and backward with 1 and 2 threads: the same bits. */
static void test_threads(void) {
#ifdef _OPENMP
  dsVolumeDef def = grid_def();
  dsVolume* v;
  CHECK_INT_EQ(ds_volume_create(&v, &def, NULL, 0), 0);
  static double rho[NC], gr[2][NC];
  static dsReal bg[NP * 4], depth[NP], img[2][NP * 4], gimg[NP * 4], gbg[2][NP * 4];
  double gs[2] = {0, 0}, gc[2][3] = {{0, 0, 0}, {0, 0, 0}};
  for (int c = 0; c < NC; c++) rho[c] = urand();
  for (int i = 0; i < NP * 4; i++) bg[i] = (dsReal)urand(), gimg[i] = (dsReal)(urand() - 0.5);
  for (int p = 0; p < NP; p++) depth[p] = (p % 3) ? (dsReal)INFINITY : (dsReal)2.4;
  int nt0 = omp_get_max_threads();
  memset(gr, 0, sizeof gr);
  memset(gbg, 0, sizeof gbg);
  for (int k = 0; k < 2; k++) {
    omp_set_num_threads(k + 1);
    CHECK_INT_EQ(ds_volume_render(v, rho, bg, depth, img[k]), 0);
    CHECK_INT_EQ(ds_volume_backward(v, gimg, gr[k], &gs[k], gc[k], gbg[k]), 0);
  }
  omp_set_num_threads(nt0);
  CHECK(memcmp(img[0], img[1], sizeof img[0]) == 0);
  CHECK(memcmp(gr[0], gr[1], sizeof gr[0]) == 0);
  CHECK(memcmp(gbg[0], gbg[1], sizeof gbg[0]) == 0);
  CHECK(memcmp(&gs[0], &gs[1], sizeof gs[0]) == 0);
  CHECK(memcmp(gc[0], gc[1], sizeof gc[0]) == 0);
  ds_volume_destroy(v);
#endif
}

static void test_errors(void) {
  char err[256];
  dsVolume* v;
  dsVolumeDef def = grid_def();
  def.sigma_t = -1;
  CHECK_INT_EQ(ds_volume_create(&v, &def, err, sizeof err), DS_ERR_INVALID);
  CHECK_STR_CONTAINS(err, "sigma_t");
  def = grid_def();
  def.n[1] = 0;
  CHECK_INT_EQ(ds_volume_check(&def, err, sizeof err), DS_ERR_INVALID);
  CHECK_STR_CONTAINS(err, "n[1]");
  def = grid_def();
  def.n[0] = def.n[1] = def.n[2] = 1024;
  CHECK_INT_EQ(ds_volume_check(&def, err, sizeof err), DS_ERR_RANGE);
  def = grid_def();
  def.camera.znear = 0;
  CHECK_INT_EQ(ds_volume_check(&def, err, sizeof err), DS_ERR_INVALID);
  CHECK_STR_CONTAINS(err, "camera");
  def = grid_def();
  CHECK_INT_EQ(ds_volume_create(&v, &def, err, sizeof err), 0);
  static double rho[NC];
  static dsReal img[NP * 4], depth[NP];
  CHECK_INT_EQ(ds_volume_backward(v, img, NULL, NULL, NULL, NULL), DS_ERR_STATE);
  for (int p = 0; p < NP; p++) depth[p] = 1;
  depth[37] = (dsReal)NAN;
  CHECK_INT_EQ(ds_volume_render(v, rho, NULL, depth, img), DS_ERR_INVALID);
  CHECK_STR_CONTAINS(ds_volume_last_error(v), "depth[37]");
  def.width = 8;
  CHECK_INT_EQ(ds_volume_set_def(v, &def), DS_ERR_INVALID);
  CHECK_STR_CONTAINS(ds_volume_last_error(v), "width");
  ds_volume_destroy(v);
}

int main(void) {
  test_errors();
  test_slab(0);
  test_slab(1);
  test_mesh_depth();
  test_threads();
  if (DS_SINGLE) {
    printf("finite-difference checks skipped: they need double precision\n");
    return DST_RESULT();
  }
  test_gradients();
  return DST_RESULT();
}

/* The image loss's adjoint with respect to the camera (what `dsim sysid`
 * uses to calibrate a camera from video: camera.position, camera.look_at,
 * camera.fov, camera.fx ... cy) against central finite differences, in
 * double: L = MSE(render(camera), goal) with the goal rendered from another
 * camera, for a camera looking at a point off the origin
 *   - with a field of view (eye, at, fov_deg), on a non-square image;
 *   - with intrinsics fx != fy and a principal point off the centre
 *     (eye, at, fx, fy, cx, cy);
 *   - orthographic (eye, at, ortho_height).
 * Every analytic component must match its difference quotient to 1e-6
 * relative; each one multiplied by 1.01 in turn (when not tiny) must be
 * rejected, so a wrong adjoint cannot pass. */
#include "config.h"

#include "dsim/raster.h"
#include "tests/dstest.h"

#define NV 9
#define NF 4
#define W 28
#define H 20

static const dsReal g_verts[NV * 3] = {
    /* a tilted quad (2 faces) about the look-at point, and a triangle in front of it, a second behind */
    -0.2, -0.1, -0.3, 0.8, 0.0, -0.2, 0.7, 0.6, 0.1, -0.3, 0.5, 0.0, 0.1, 0.0, 0.3, 0.6, 0.2,
    0.4, 0.3, 0.7, 0.2, 0.0, 0.3, -0.6, 0.5, -0.2, -0.5};
static const int g_faces[NF * 3] = {0, 1, 2, 0, 2, 3, 4, 5, 6, 7, 8, 1};
static const dsReal g_colors[NF * 3] = {0.9, 0.2, 0.1, 0.2, 0.8, 0.3, 0.1, 0.3, 0.9, 0.8, 0.8, 0.2};

static dsRasterMesh mesh(void) {
  dsRasterMesh m = {g_verts, NV, g_faces, NF, g_colors, DS_COLOR_FACE};
  return m;
}

static double loss_at(dsRaster* r, const dsCamera* cam, const dsReal* goal, dsReal* img, dsReal* grad) {
  dsRasterMesh m = mesh();
  dsReal l = 0;
  if (ds_raster_set_camera(r, cam) || ds_raster_render(r, &m, img)) return NAN;
  if (ds_loss_mse(img, goal, W, H, &l, grad)) return NAN;
  return (double)l;
}

/* components where |fd - an| > 1e-6 (max |an|) + 1e-6 |fd| */
static int mismatches(const char* what, const double* fd, const double* an, int n, int verbose) {
  double scale = 0;
  int bad = 0;
  for (int i = 0; i < n; i++) scale = fmax(scale, fabs(an[i]));
  for (int i = 0; i < n; i++) {
    const double tol = 1e-6 * scale + 1e-6 * fabs(fd[i]);
    if (!(fabs(fd[i] - an[i]) <= tol)) {
      if (verbose) fprintf(stderr, "  %s[%d]: fd %.12g analytic %.12g (tol %.3g)\n", what, i, fd[i], an[i], tol);
      bad++;
    }
  }
  return bad;
}

/* mode 0: fov, 1: intrinsics, 2: orthographic */
static void check_mode(int mode) {
  dsRenderSettings s = ds_default_render_settings();
  s.width = W;
  s.height = H;
  s.supersample = 1;
  s.sigma = (dsReal)3e-4;
  s.gamma = (dsReal)1e-2;
  s.background[0] = (dsReal)0.1;
  s.background[3] = (dsReal)0.0;
  const dsReal eye[3] = {0.9, 1.1, -3.2}, at[3] = {0.2, 0.15, -0.05}, up[3] = {0, 1, 0};
  CHECK_INT_EQ(ds_camera_set_eye(&s.camera, eye, at, up), DS_OK);
  s.camera.znear = (dsReal)0.5;
  s.camera.zfar = 20;
  s.camera.fov_deg = 40;
  if (mode == 1) {
    s.camera.fx = 31;
    s.camera.fy = 29;
    s.camera.cx = (dsReal)(0.5 * W + 1.7);
    s.camera.cy = (dsReal)(0.5 * H - 1.2);
  }
  if (mode == 2) {
    s.camera.orthographic = 1;
    s.camera.ortho_height = (dsReal)1.1;
  }
  dsRaster* r = NULL;
  CHECK_INT_EQ(ds_raster_create(&r, &s, NF, NV), DS_OK);
  if (!r) return;
  const size_t n = 4 * (size_t)W * H;
  dsReal *img = (dsReal*)calloc(n, sizeof(dsReal)), *goal = (dsReal*)calloc(n, sizeof(dsReal)),
         *grad = (dsReal*)calloc(n, sizeof(dsReal));
  /* the goal: the camera moved a few centimetres and turned a little */
  dsCamera gc = s.camera;
  gc.eye[0] += (dsReal)0.06;
  gc.eye[1] -= (dsReal)0.04;
  gc.at[2] += (dsReal)0.05;
  if (mode == 1) gc.cx += 1;
  (void)loss_at(r, &gc, goal, img, NULL);
  memcpy(goal, img, n * sizeof(dsReal));

  dsCamera cam = s.camera, dc;
  memset(&dc, 0, sizeof dc);
  const double L0 = loss_at(r, &cam, goal, img, grad);
  CHECK(L0 > 1e-5);
  dsRasterMesh m = mesh();
  CHECK_INT_EQ(ds_raster_backward_camera(r, &m, grad, NULL, NULL, &dc), DS_OK);

  dsReal* field[12];
  double an[12], fd[12], step[12];
  const char* name[12];
  int nf = 0;
  static const char* const ce[3] = {"eye.x", "eye.y", "eye.z"};
  static const char* const ca[3] = {"at.x", "at.y", "at.z"};
  for (int i = 0; i < 3; i++) {
    name[nf] = ce[i], field[nf] = &cam.eye[i], an[nf] = dc.eye[i], step[nf++] = 1e-6;
    name[nf] = ca[i], field[nf] = &cam.at[i], an[nf] = dc.at[i], step[nf++] = 1e-6;
  }
  if (mode == 0) name[nf] = "fov_deg", field[nf] = &cam.fov_deg, an[nf] = dc.fov_deg, step[nf++] = 1e-5;
  if (mode == 1) {
    name[nf] = "fx", field[nf] = &cam.fx, an[nf] = dc.fx, step[nf++] = 1e-5;
    name[nf] = "fy", field[nf] = &cam.fy, an[nf] = dc.fy, step[nf++] = 1e-5;
    name[nf] = "cx", field[nf] = &cam.cx, an[nf] = dc.cx, step[nf++] = 1e-5;
    name[nf] = "cy", field[nf] = &cam.cy, an[nf] = dc.cy, step[nf++] = 1e-5;
    /* with intrinsics the fov is unused: no gradient */
    CHECK(dc.fov_deg == 0);
  }
  if (mode == 2)
    name[nf] = "ortho_height", field[nf] = &cam.ortho_height, an[nf] = dc.ortho_height, step[nf++] = 1e-6;
  for (int i = 0; i < nf; i++) {
    const dsReal v0 = *field[i];
    *field[i] = v0 + (dsReal)step[i];
    const double lp = loss_at(r, &cam, goal, img, NULL);
    *field[i] = v0 - (dsReal)step[i];
    const double lm = loss_at(r, &cam, goal, img, NULL);
    *field[i] = v0;
    fd[i] = (lp - lm) / (2 * step[i]);
    fprintf(stderr, "mode %d %-12s fd % .10e analytic % .10e\n", mode, name[i], fd[i], an[i]);
  }
  CHECK_INT_EQ(mismatches("camera", fd, an, nf, 1), 0);
  /* a wrong adjoint fails: each component 1 % off in turn (all but those under 1e-3 of the largest) */
  double big = 0;
  for (int i = 0; i < nf; i++) big = fmax(big, fabs(an[i]));
  int tried = 0, caught = 0;
  for (int i = 0; i < nf; i++) {
    if (fabs(an[i]) < 1e-3 * big) continue; /* 1 % of it is still 5x the tolerance */
    const double keep = an[i];
    an[i] = keep * 1.01;
    tried++;
    caught += mismatches("perturbed", fd, an, nf, 0) > 0;
    an[i] = keep;
  }
  CHECK(tried >= nf - 1);
  CHECK_INT_EQ(caught, tried);
  free(img);
  free(goal);
  free(grad);
  ds_raster_destroy(r);
}

int main(void) {
  if (sizeof(dsReal) != sizeof(double)) DST_SKIP("the camera FD test runs in double (built with --enable-single)");
  check_mode(0);
  check_mode(1);
  check_mode(2);
  return DST_RESULT();
}

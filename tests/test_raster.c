/* Soft rasterizer forward: defaults, camera, alpha integral vs analytic
 * projected area, hard silhouette in the small-sigma limit, lighting,
 * occlusion, supersampling, orthographic projection, near-plane culling,
 * bitwise determinism for 1 and 2 threads, no allocation in render/backward,
 * and error reporting. */
#include "config.h"

#include <stdint.h>

#include "dsim/raster.h"
#include "render/raster_kernel.h"
#include "tests/dstest.h"

#define DS_TEST_PI 3.14159265358979323846
/* exact-ish comparisons: double by default, float with --enable-single */
#define TIGHT (DS_SINGLE ? 2e-6 : 1e-12)

static uint64_t g_rng = 0x1234567887654321ull;
static double urand(void) {
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return (double)(g_rng >> 11) / 9007199254740992.0;
}

static size_t g_nalloc = 0;
static void* count_malloc(size_t n) { g_nalloc++; return malloc(n); }
static void* count_realloc(void* p, size_t n) { g_nalloc++; return realloc(p, n); }
static void* count_calloc(size_t c, size_t n) { g_nalloc++; return calloc(c, n); }

static int g_fail_at = -1;
static void* fail_malloc(size_t n) { return g_fail_at-- == 0 ? NULL : malloc(n); }
static void* fail_realloc(void* p, size_t n) { return g_fail_at-- == 0 ? NULL : realloc(p, n); }
static void* fail_calloc(size_t c, size_t n) { return g_fail_at-- == 0 ? NULL : calloc(c, n); }

static double cross2(const double* a, const double* b, const double* c) {
  return (b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0]);
}

/* render one mesh with settings s; returns a malloc'd image */
static dsReal* render(const dsRenderSettings* s, const dsReal* v, int nv, const int* f, int nf,
                      const dsReal* col, int mode) {
  dsRaster* r = NULL;
  dsReal* img = (dsReal*)calloc((size_t)s->width * s->height * 4, sizeof(dsReal));
  dsRasterMesh m = {v, nv, f, nf, col, mode};
  CHECK_INT_EQ(ds_raster_create(&r, s, nf, nv), DS_OK);
  if (r) CHECK_INT_EQ(ds_raster_render(r, &m, img), DS_OK);
  ds_raster_destroy(r);
  return img;
}

static double alpha_sum(const dsReal* img, int w, int h) {
  double a = 0;
  for (int i = 0; i < w * h; i++) a += img[4 * i + 3];
  return a;
}

int main(void) {
  dsRenderSettings s;
  dsReal* img;
  int i;

  /* ---- the rasterizer's exp and sigmoid (engine/raster_kernel.h) ---- */
  {
    double worst = 0, wsig = 0;
    for (i = 0; i <= 41000; i++) {
      double x = -41.0 * i / 41000.0, e = exp(x), D, q;
      worst = fmax(worst, fabs(dsr_exp(x) - e) / e);
      dsr_sigmoid(x * 0.9, &D, &q);
      wsig = fmax(wsig, fabs(D - 1.0 / (1.0 + exp(-x * 0.9))) + fabs(q - 1.0 / (1.0 + exp(x * 0.9))));
      dsr_sigmoid(-x * 0.9, &D, &q);
      wsig = fmax(wsig, fabs(D - 1.0 / (1.0 + exp(x * 0.9))) + fabs(q - 1.0 / (1.0 + exp(-x * 0.9))));
    }
    fprintf(stderr, "dsr_exp: max relative error %.3g; sigmoid max error %.3g\n", worst, wsig);
    CHECK(worst < 1e-15);
    CHECK(wsig < 1e-15);
    /* outside the domain: clamped, never out of the tables */
    CHECK_CLOSE(dsr_exp(-1e9), exp(-41.0), 1e-15, 0);
    CHECK_CLOSE(dsr_exp(NAN), exp(-41.0), 1e-15, 0);
    CHECK(dsr_exp(3.0) == 1.0);
  }

  /* ---- defaults (docs/scenes.md) ---- */
  s = ds_default_render_settings();
  CHECK_INT_EQ(s.width, 256);
  CHECK_INT_EQ(s.height, 256);
  CHECK_INT_EQ(s.supersample, 2);
  CHECK_CLOSE(s.sigma, 1e-5, 1e-6, 0);
  CHECK_CLOSE(s.gamma, 1e-4, 1e-6, 0);
  CHECK_CLOSE(s.camera.fov_deg, 30, 0, 0);
  CHECK_CLOSE(s.camera.znear, 1, 0, 0);
  CHECK_CLOSE(s.camera.zfar, 100, 0, 0);
  CHECK_CLOSE(s.ambient, 0.5, 0, 0);
  CHECK_CLOSE(s.directional, 0.5, 0, 0);
  CHECK(s.light_dir[0] == 0 && s.light_dir[1] == 0 && s.light_dir[2] == 0); /* a headlight */
  CHECK(s.background[0] == 0 && s.background[3] == 0);
  /* eye = (d cos e sin a, d sin e, -d cos e cos a) for d 13, e 30, a 0 */
  CHECK_CLOSE(s.camera.eye[0], 0, 0, 1e-6);
  CHECK_CLOSE(s.camera.eye[1], 6.5, 1e-6, 0);
  CHECK_CLOSE(s.camera.eye[2], -13 * cos(DS_TEST_PI / 6), 1e-6, 0);

  /* ---- camera ---- */
  {
    dsCamera c = ds_default_camera();
    dsReal p[3] = {0, 0, 0}, ndc[3];
    CHECK_INT_EQ(ds_camera_look_at(&c, 10, 20, 90), DS_OK);
    CHECK_CLOSE(c.eye[0], 10 * cos(20 * DS_TEST_PI / 180), 1e-6, 0);
    CHECK_CLOSE(c.eye[2], 0, 0, 1e-6);
    CHECK_INT_EQ(ds_camera_project(&c, 64, 64, p, ndc), DS_OK);
    CHECK_CLOSE(ndc[0], 0, 0, 1e-6);
    CHECK_CLOSE(ndc[1], 0, 0, 1e-6);
    CHECK_CLOSE(ndc[2], 10, 1e-6, 0);
    /* looking from +x toward the origin with y up: +z is to the right, +y up */
    CHECK_INT_EQ(ds_camera_look_at(&c, 10, 0, 90), DS_OK);
    p[2] = 1;
    ds_camera_project(&c, 64, 64, p, ndc);
    CHECK(ndc[0] < 0 || ndc[0] > 0);
    {
      /* eye (10,0,0), z_c = -x, x_c = up x z_c = (0,1,0) x (-1,0,0) = (0,0,1) */
      CHECK_CLOSE(ndc[0], 1 / (10 * tan(15 * DS_TEST_PI / 180)), 1e-6, 0);
    }
    p[2] = 0;
    p[1] = 1;
    ds_camera_project(&c, 64, 32, p, ndc);
    CHECK_CLOSE(ndc[1], 1 / (10 * tan(15 * DS_TEST_PI / 180)), 1e-6, 0);
    /* behind the camera */
    p[0] = 20;
    p[1] = 0;
    CHECK_INT_EQ(ds_camera_project(&c, 64, 64, p, ndc), DS_ERR_RANGE);
    CHECK_INT_EQ(ds_camera_look_at(&c, 10, 90, 0), DS_ERR_INVALID);
    CHECK_INT_EQ(ds_camera_look_at(&c, -1, 0, 0), DS_ERR_INVALID);
    {
      dsReal eye[3] = {0, 5, 0}, at[3] = {0, 0, 0}, up[3] = {0, 1, 0}, up2[3] = {1, 0, 0};
      CHECK_INT_EQ(ds_camera_set_eye(&c, eye, at, up), DS_ERR_INVALID);
      CHECK_INT_EQ(ds_camera_set_eye(&c, eye, at, up2), DS_OK);
      CHECK_CLOSE(c.eye[1], 5, 0, 0);
      CHECK_INT_EQ(ds_camera_set_eye(&c, at, at, up2), DS_ERR_INVALID);
    }
  }

  /* ---- alpha integrates to the projected area ---- */
  {
    dsReal v[9] = {-1.5, -1.0, 0.3, 1.7, -0.4, -0.2, -0.2, 1.6, 0.1};
    int f[3] = {0, 1, 2};
    dsReal col[3] = {1, 1, 0};
    double P[3][3], area;
    s = ds_default_render_settings();
    s.width = s.height = 128;
    ds_camera_look_at(&s.camera, 9, 25, 20);
    for (i = 0; i < 3; i++) {
      dsReal ndc[3];
      ds_camera_project(&s.camera, 128, 128, v + 3 * i, ndc);
      P[i][0] = ndc[0], P[i][1] = ndc[1];
    }
    area = 0.5 * fabs(cross2(P[0], P[1], P[2]));
    /* the triangle spans many 16-pixel tiles (the big-face path) */
    CHECK(area > 0.2);
    img = render(&s, v, 3, f, 1, col, DS_COLOR_FACE);
    {
      double a = alpha_sum(img, 128, 128) * (2.0 / 128) * (2.0 / 128);
      fprintf(stderr, "area: alpha integral %.6f, analytic %.6f\n", a, area);
      CHECK_CLOSE(a, area, 2e-3, 0);
    }
    free(img);
    /* a blurrier boundary (sigma 1e-3): the excess outside cancels the
     * deficit inside, up to corner effects */
    s.sigma = 1e-3;
    img = render(&s, v, 3, f, 1, col, DS_COLOR_FACE);
    CHECK_CLOSE(alpha_sum(img, 128, 128) * (2.0 / 128) * (2.0 / 128), area, 3e-2, 0);
    free(img);

    /* ---- tiny sigma: the silhouette is the hard inside test ---- */
    s.sigma = 1e-10;
    s.supersample = 1;
    img = render(&s, v, 3, f, 1, col, DS_COLOR_FACE);
    {
      int mism = 0, inside = 0;
      for (int row = 0; row < 128; row++)
        for (int c = 0; c < 128; c++) {
          double p[2] = {(2.0 * c + 1 - 128) / 128, (127.0 - 2 * row) / 128};
          double e0 = cross2(P[1], P[2], p), e1 = cross2(P[2], P[0], p), e2 = cross2(P[0], P[1], p);
          int in = (e0 >= 0 && e1 >= 0 && e2 >= 0) || (e0 <= 0 && e1 <= 0 && e2 <= 0);
          double a = img[4 * (row * 128 + c) + 3];
          inside += in;
          if (in != (a > 0.5)) mism++;
          if (a > 1e-3 && a < 1 - 1e-3) mism += 0; /* boundary pixels may be soft */
        }
      CHECK(inside > 1000);
      CHECK_INT_EQ(mism, 0);
    }
    free(img);
  }

  /* ---- lighting and colour ---- */
  {
    /* horizontal triangle (normal +-y) around the origin */
    dsReal v[9] = {-2, 0, -2, 2, 0, -2, 0, 0, 2};
    dsReal vv[9] = {-2, -2, 0, 2, -2, 0, 0, 2, 0}; /* vertical, normal along z */
    int f[3] = {0, 1, 2};
    dsReal col[3] = {0.2, 0.4, 0.6}, vcol[9] = {0.2, 0.4, 0.6, 0.2, 0.4, 0.6, 0.2, 0.4, 0.6};
    int c = 32 * 64 + 32; /* centre pixel of 64 x 64 */
    s = ds_default_render_settings();
    s.width = s.height = 64;
    s.light_dir[0] = s.light_dir[2] = 0; /* a light along +y (the default is a headlight) */
    s.light_dir[1] = 1;
    ds_camera_look_at(&s.camera, 8, 40, 0); /* from above: lit, L = 0.5 + 0.5 cos(0) = 1 */
    img = render(&s, v, 3, f, 1, col, DS_COLOR_FACE);
    CHECK_CLOSE(img[4 * c + 0], 0.2, TIGHT, 0);
    CHECK_CLOSE(img[4 * c + 1], 0.4, TIGHT, 0);
    CHECK_CLOSE(img[4 * c + 2], 0.6, TIGHT, 0);
    CHECK_CLOSE(img[4 * c + 3], 1.0, TIGHT, 0);
    CHECK(img[3] == 0 && img[0] == 0); /* corner: background (0,0,0,0) */
    free(img);
    /* per-vertex colours all equal give the same image as flat */
    {
      dsReal* a = render(&s, v, 3, f, 1, col, DS_COLOR_FACE);
      dsReal* b = render(&s, v, 3, f, 1, vcol, DS_COLOR_VERTEX);
      double dmax = 0;
      for (i = 0; i < 64 * 64 * 4; i++) dmax = fmax(dmax, fabs(a[i] - b[i]));
      CHECK(dmax < TIGHT);
      free(a), free(b);
    }
    ds_camera_look_at(&s.camera, 8, -40, 0); /* from below: normal turned to -y, unlit */
    img = render(&s, v, 3, f, 1, col, DS_COLOR_FACE);
    CHECK_CLOSE(img[4 * c + 0], 0.1, TIGHT, 0);
    CHECK_CLOSE(img[4 * c + 2], 0.3, TIGHT, 0);
    free(img);
    ds_camera_look_at(&s.camera, 8, 0, 0); /* vertical face: n.l = 0 */
    img = render(&s, vv, 3, f, 1, col, DS_COLOR_FACE);
    CHECK_CLOSE(img[4 * c + 1], 0.2, TIGHT, 0);
    free(img);
    /* background colour shows where nothing is drawn */
    s.background[0] = 0.25;
    s.background[3] = 0.5;
    img = render(&s, vv, 3, f, 1, col, DS_COLOR_FACE);
    CHECK_CLOSE(img[0], 0.25, TIGHT, 0);
    CHECK_CLOSE(img[3], 0.5, TIGHT, 0);
    CHECK_CLOSE(img[4 * c + 3], 1.0, TIGHT, 0);
    free(img);
  }

  /* ---- occlusion: the nearer face wins, whatever the face order ---- */
  {
    /* camera on -z looking at +z: z = -1 is nearer than z = +1 */
    dsReal v[18] = {-2, -2, -1, 2, -2, -1, 0, 2, -1, -1.5, -1.8, 1, 2.5, -1.5, 1, 0.5, 2.5, 1};
    int f[6] = {0, 1, 2, 3, 4, 5}, g[6] = {3, 4, 5, 0, 1, 2};
    dsReal col[6] = {1, 0, 0, 0, 0, 1}, colg[6] = {0, 0, 1, 1, 0, 0};
    int c = 32 * 64 + 32;
    s = ds_default_render_settings();
    s.width = s.height = 64;
    ds_camera_look_at(&s.camera, 10, 0, 0);
    img = render(&s, v, 6, f, 2, col, DS_COLOR_FACE);
    CHECK(img[4 * c + 0] > 0.49 && img[4 * c + 2] < 1e-12); /* red (lit 0.5) */
    free(img);
    img = render(&s, v, 6, g, 2, colg, DS_COLOR_FACE);
    CHECK(img[4 * c + 0] > 0.49 && img[4 * c + 2] < 1e-12);
    free(img);
    ds_camera_look_at(&s.camera, 10, 0, 180); /* from the other side: blue */
    img = render(&s, v, 6, f, 2, col, DS_COLOR_FACE);
    CHECK(img[4 * c + 2] > 0.49 && img[4 * c + 0] < 1e-12);
    free(img);
  }

  /* ---- supersampling = block average of the larger render ---- */
  {
    dsReal v[9] = {-1.5, -1.0, 0.3, 1.7, -0.4, -0.2, -0.2, 1.6, 0.1};
    int f[3] = {0, 1, 2};
    dsReal col[3] = {0.3, 0.7, 0.9};
    dsReal *a, *b;
    double dmax = 0;
    s = ds_default_render_settings();
    s.sigma = 1e-4;
    s.width = s.height = 20;
    s.supersample = 3;
    ds_camera_look_at(&s.camera, 7, 10, 30);
    a = render(&s, v, 3, f, 1, col, DS_COLOR_FACE);
    s.width = s.height = 60;
    s.supersample = 1;
    b = render(&s, v, 3, f, 1, col, DS_COLOR_FACE);
    for (int row = 0; row < 20; row++)
      for (int cc = 0; cc < 20; cc++)
        for (int ch = 0; ch < 4; ch++) {
          double acc = 0;
          for (int y = 0; y < 3; y++)
            for (int x = 0; x < 3; x++) acc += b[4 * ((3 * row + y) * 60 + 3 * cc + x) + ch];
          dmax = fmax(dmax, fabs(acc / 9 - a[4 * (row * 20 + cc) + ch]));
        }
    CHECK(dmax < (DS_SINGLE ? 1e-6 : 1e-14));
    free(a), free(b);
  }

  /* ---- orthographic: a right triangle of legs 1 covers 1/8 of a view of
   * half-height 1 (NDC = world units); near-plane culling ---- */
  {
    dsReal v[12] = {-0.5, -0.5, 0, 0.5, -0.5, 0, -0.5, 0.5, 0, 0.5, 0.5, 0};
    int f[6] = {0, 1, 2, 1, 3, 2};
    dsReal col[6] = {1, 1, 1, 1, 1, 1};
    s = ds_default_render_settings();
    s.width = s.height = 64;
    s.camera.orthographic = 1;
    s.camera.ortho_height = 1;
    ds_camera_look_at(&s.camera, 20, 0, 0);
    img = render(&s, v, 4, f, 1, col, DS_COLOR_FACE);
    CHECK_CLOSE(alpha_sum(img, 64, 64) / (64.0 * 64), 0.125, 2e-3, 0);
    free(img);
    /* two triangles sharing the diagonal: SoftRas's seam (alpha = 1 - D(1-D)
     * >= 0.75 along an interior edge) removes a little area */
    img = render(&s, v, 4, f, 2, col, DS_COLOR_FACE);
    CHECK_CLOSE(alpha_sum(img, 64, 64) / (64.0 * 64), 0.25, 1e-2, 0);
    free(img);
    s.camera.orthographic = 0;
    ds_camera_look_at(&s.camera, 0.5, 0, 0); /* square at depth 0.5 < near = 1 */
    img = render(&s, v, 4, f, 2, col, DS_COLOR_FACE);
    CHECK(alpha_sum(img, 64, 64) == 0);
    {
      /* culled faces get exactly zero gradients (never NaN) */
      dsRaster* r = NULL;
      dsRasterMesh m = {v, 4, f, 2, col, DS_COLOR_FACE};
      dsReal gv[12], gc[6];
      for (i = 0; i < 64 * 64 * 4; i++) img[i] = 1;
      for (i = 0; i < 12; i++) gv[i] = 0;
      for (i = 0; i < 6; i++) gc[i] = 0;
      CHECK_INT_EQ(ds_raster_create(&r, &s, 2, 4), DS_OK);
      CHECK_INT_EQ(ds_raster_render_backward(r, &m, img, gv, gc), DS_OK);
      for (i = 0; i < 12; i++) CHECK(gv[i] == 0);
      for (i = 0; i < 6; i++) CHECK(gc[i] == 0);
      ds_raster_destroy(r);
    }
    free(img);
  }

  /* ---- determinism (1 vs 2 threads), no allocation, re-render contract ---- */
  {
    enum { NV = 300, NF = 400 };
    dsReal v[NV * 3], col[NF * 3];
    int f[NF * 3];
    dsRaster* r = NULL;
    dsRasterMesh m = {v, NV, f, NF, col, DS_COLOR_FACE};
    dsReal *img1, *img2, *gimg, gv1[NV * 3], gv2[NV * 3], gc1[NF * 3], gc2[NF * 3];
    dsCamera dc1, dc2;
    dsRenderSettings dl1, dl2;
    size_t n;
    for (i = 0; i < NV * 3; i++) v[i] = (dsReal)(3 * urand() - 1.5);
    for (i = 0; i < NF; i++) {
      int a = (int)(urand() * NV);
      f[3 * i] = a;
      f[3 * i + 1] = (a + 1 + (int)(urand() * 5)) % NV;
      f[3 * i + 2] = (a + 7 + (int)(urand() * 5)) % NV;
    }
    f[0] = 0, f[1] = 100, f[2] = 200; /* some big faces */
    for (i = 0; i < NF * 3; i++) col[i] = (dsReal)urand();
    s = ds_default_render_settings();
    s.width = s.height = 96;
    s.sigma = 3e-4;
    s.gamma = 1e-3;
    ds_camera_look_at(&s.camera, 6, 30, 45);
    s.light_dir[0] = -0.4, s.light_dir[1] = 1, s.light_dir[2] = -0.5; /* a light of its own: its adjoint too */
    n = (size_t)96 * 96 * 4;
    img1 = (dsReal*)malloc(n * sizeof(dsReal));
    img2 = (dsReal*)malloc(n * sizeof(dsReal));
    gimg = (dsReal*)malloc(n * sizeof(dsReal));
    for (i = 0; i < (int)n; i++) gimg[i] = (dsReal)(urand() - 0.5);
    CHECK_INT_EQ(ds_raster_create(&r, &s, NF, NV), DS_OK);
    CHECK_INT_EQ(ds_replace_allocator(count_malloc, count_realloc, count_calloc, free), DS_OK);
    g_nalloc = 0;
    ds_set_num_threads(1);
    memset(gv1, 0, sizeof gv1), memset(gc1, 0, sizeof gc1);
    memset(gv2, 0, sizeof gv2), memset(gc2, 0, sizeof gc2);
    memset(&dc1, 0, sizeof dc1), memset(&dc2, 0, sizeof dc2);
    memset(&dl1, 0, sizeof dl1), memset(&dl2, 0, sizeof dl2);
    CHECK_INT_EQ(ds_raster_render(r, &m, img1), DS_OK);
    CHECK_INT_EQ(ds_raster_backward_light(r, &m, gimg, gv1, gc1, &dc1, &dl1), DS_OK);
    ds_set_num_threads(2);
    CHECK_INT_EQ(ds_raster_render(r, &m, img2), DS_OK);
    CHECK_INT_EQ(ds_raster_backward_light(r, &m, gimg, gv2, gc2, &dc2, &dl2), DS_OK);
    CHECK_INT_EQ(g_nalloc, 0);
    ds_replace_allocator(NULL, NULL, NULL, NULL);
    CHECK(memcmp(img1, img2, n * sizeof(dsReal)) == 0);
    CHECK(memcmp(gv1, gv2, sizeof gv1) == 0);
    CHECK(memcmp(gc1, gc2, sizeof gc1) == 0);
    CHECK(memcmp(&dc1, &dc2, sizeof dc1) == 0);
    CHECK(dl1.ambient == dl2.ambient && dl1.directional == dl2.directional);
    CHECK(memcmp(dl1.light_dir, dl2.light_dir, sizeof dl1.light_dir) == 0);
    CHECK(dl1.ambient != 0 && dl1.directional != 0 && dl1.light_dir[0] != 0);
    CHECK(dc1.eye[0] != 0 && dc1.fov_deg != 0);
    CHECK(alpha_sum(img1, 96, 96) > 500);
    {
      double gmax = 0;
      for (i = 0; i < NV * 3; i++) gmax = fmax(gmax, fabs(gv1[i]));
      CHECK(gmax > 0);
    }

    /* ---- errors ---- */
    {
      int bad[3] = {0, 1, NV};
      dsRasterMesh mb = m;
      dsReal vn[9] = {0, 0, 0, 1, 0, 0, 0, NAN, 0};
      int fn[3] = {0, 1, 2};
      dsRenderSettings s2 = s;
      mb.faces = bad;
      mb.nface = 1;
      CHECK_INT_EQ(ds_raster_render(r, &mb, img1), DS_ERR_MESH);
      CHECK_STR_CONTAINS(ds_raster_last_error(r), "face 0 refers to vertex 300");
      /* a failed render invalidates the state kept for backward */
      CHECK_INT_EQ(ds_raster_backward(r, &m, gimg, gv1, gc1), DS_ERR_STATE);
      CHECK_STR_CONTAINS(ds_raster_last_error(r), "ds_raster_render");
      mb = m;
      mb.nface = NF + 1;
      CHECK_INT_EQ(ds_raster_render(r, &mb, img1), DS_ERR_INVALID);
      CHECK_STR_CONTAINS(ds_raster_last_error(r), "exceed");
      mb.nface = 1;
      mb.verts = vn;
      mb.faces = fn;
      mb.nvert = 3;
      CHECK_INT_EQ(ds_raster_render(r, &mb, img1), DS_ERR_DIVERGED);
      /* an empty mesh renders the background; NULL vertices are refused */
      mb = m;
      mb.nface = 0;
      CHECK_INT_EQ(ds_raster_render(r, &mb, img1), DS_OK);
      CHECK(alpha_sum(img1, 96, 96) == 0);
      CHECK_INT_EQ(ds_raster_backward(r, &mb, gimg, gv1, gc1), DS_OK);
      mb.verts = NULL;
      CHECK_INT_EQ(ds_raster_render(r, &mb, img1), DS_ERR_INVALID);
      mb = m;
      mb.color_mode = 5;
      CHECK_INT_EQ(ds_raster_render(r, &mb, img1), DS_ERR_INVALID);
      CHECK_INT_EQ(ds_raster_render(r, &m, img1), DS_OK);
      CHECK_STR_EQ(ds_raster_last_error(r), "");
      s2.width = 97;
      CHECK_INT_EQ(ds_raster_set_settings(r, &s2), DS_ERR_INVALID);
      CHECK_STR_CONTAINS(ds_raster_last_error(r), "97x96");
      s2 = s;
      s2.sigma = 1e-4;
      CHECK_INT_EQ(ds_raster_set_settings(r, &s2), DS_OK);
      CHECK_INT_EQ(ds_raster_backward(r, &m, gimg, gv1, gc1), DS_ERR_STATE);
      CHECK(ds_raster_settings(r)->sigma == s2.sigma);
      s2.camera.up[1] = 0;
      s2.camera.up[0] = 0;
      CHECK_INT_EQ(ds_raster_set_camera(r, &s2.camera), DS_ERR_INVALID);
    }
    ds_raster_destroy(r);
    {
      dsRaster* r2 = (dsRaster*)1;
      dsRenderSettings s3 = ds_default_render_settings();
      s3.sigma = 0;
      CHECK_INT_EQ(ds_raster_create(&r2, &s3, 10, 10), DS_ERR_INVALID);
      CHECK(r2 == NULL);
      s3 = ds_default_render_settings();
      s3.camera.znear = 0;
      CHECK_INT_EQ(ds_raster_create(&r2, &s3, 10, 10), DS_ERR_INVALID);
      s3 = ds_default_render_settings();
      CHECK_INT_EQ(ds_raster_create(&r2, &s3, -1, 10), DS_ERR_INVALID);
    }
    free(img1), free(img2), free(gimg);
  }

  /* ---- invalid settings: the field is named with its expected value ---- */
  {
    char msg[256];
    dsRaster* r = NULL;
    s = ds_default_render_settings();
    CHECK_INT_EQ(ds_render_settings_check(&s, msg, sizeof msg), DS_OK);
    s.sigma = -1;
    CHECK_INT_EQ(ds_render_settings_check(&s, msg, sizeof msg), DS_ERR_INVALID);
    CHECK_STR_CONTAINS(msg, "render settings: sigma: expected a finite number > 0, got -1");
    CHECK_INT_EQ(ds_raster_create(&r, &s, 10, 10), DS_ERR_INVALID);
    s = ds_default_render_settings();
    s.camera.fov_deg = 200;
    CHECK_INT_EQ(ds_render_settings_check(&s, msg, sizeof msg), DS_ERR_INVALID);
    CHECK_STR_CONTAINS(msg, "camera: fov_deg: expected a number in (0, 180), got 200");
    s = ds_default_render_settings();
    s.camera.zfar = s.camera.znear;
    CHECK_INT_EQ(ds_render_settings_check(&s, msg, sizeof msg), DS_ERR_INVALID);
    CHECK_STR_CONTAINS(msg, "camera: zfar: expected a finite number > znear");
    s = ds_default_render_settings();
    s.supersample = 0;
    CHECK_INT_EQ(ds_render_settings_check(&s, msg, sizeof msg), DS_ERR_INVALID);
    CHECK_STR_CONTAINS(msg, "render settings: supersample: expected 1 to 16, got 0");
    s = ds_default_render_settings();
    s.light_dir[1] = NAN;
    CHECK_INT_EQ(ds_render_settings_check(&s, msg, sizeof msg), DS_ERR_INVALID);
    CHECK_STR_CONTAINS(msg, "render settings: light_dir: expected finite components");
    s = ds_default_render_settings();
    s.ambient = -0.5;
    CHECK_INT_EQ(ds_render_settings_check(&s, msg, sizeof msg), DS_ERR_INVALID);
    CHECK_STR_CONTAINS(msg, "render settings: ambient: expected a finite number >= 0, got -0.5");
  }

  /* ---- a face in the z plane, seen from the default camera: the default
     light lights it (along +y it was edge-on and added nothing) ---- */
  {
    const dsReal zx[9] = {-1, -1, 0, 1, -1, 0, 0, 1, 0};
    const int zf[3] = {0, 1, 2};
    const dsReal zc[3] = {1, 1, 1};
    const dsRasterMesh zm = {zx, 3, zf, 1, zc, DS_COLOR_FACE};
    s = ds_default_render_settings();
    s.width = s.height = 32;
    dsReal lit = 0, flat = 0;
    for (int pass = 0; pass < 2; pass++) {
      dsRaster* r = NULL;
      dsReal* zimg = (dsReal*)malloc(32 * 32 * 4 * sizeof(dsReal));
      if (pass == 1) s.light_dir[1] = 1; /* along +y: edge-on to the face */
      CHECK_INT_EQ(ds_raster_create(&r, &s, 1, 3), DS_OK);
      CHECK_INT_EQ(ds_raster_render(r, &zm, zimg), DS_OK);
      dsReal sum = 0;
      for (int q = 0; q < 32 * 32; q++) sum += zimg[4 * q];
      if (pass == 0) lit = sum;
      else flat = sum;
      ds_raster_destroy(r);
      free(zimg);
    }
    /* ambient 0.5 alone vs about 0.5 + 0.5 cos(30 deg) with the headlight */
    CHECK(flat > 0);
    CHECK_CLOSE(lit / flat, (0.5 + 0.5 * cos(DS_TEST_PI / 6)) / 0.5, 0.02, 0);
  }

  /* ---- allocation failure at every point of create: clean error, no leak ---- */
  {
    int k, ok = 0;
    s = ds_default_render_settings();
    s.width = s.height = 16;
    for (k = 0; k < 16; k++) {
      dsRaster* r = NULL;
      int rc;
      g_fail_at = k;
      ds_replace_allocator(fail_malloc, fail_realloc, fail_calloc, free);
      rc = ds_raster_create(&r, &s, 10, 10);
      ds_replace_allocator(NULL, NULL, NULL, NULL);
      if (rc == DS_OK) {
        ok++;
        ds_raster_destroy(r);
      } else {
        CHECK_INT_EQ(rc, DS_ERR_NOMEM);
        CHECK(r == NULL);
      }
    }
    CHECK(ok > 0 && ok < 16);
  }
  return DST_RESULT();
}

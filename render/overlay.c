/* Overlays for exported pictures (render/overlay.h). Plain pixel drawing on
 * 8-bit RGBA: a silhouette outline, a projected line, a bitmap font. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "render/overlay.h"

static void put(uint8_t* img, int w, int h, int x, int y, const uint8_t rgb[3]) {
  if (x < 0 || y < 0 || x >= w || y >= h) return;
  uint8_t* p = img + 4 * ((size_t)y * (size_t)w + (size_t)x);
  p[0] = rgb[0];
  p[1] = rgb[1];
  p[2] = rgb[2];
  p[3] = 255;
}

static int differs(const uint8_t* a, const uint8_t* b) { return memcmp(a, b, 4) != 0; }

void ds__overlay_outline(uint8_t* img, int w, int h, const uint8_t* goal, const uint8_t rgb[3]) {
  const uint8_t* bg = goal;
  for (int y = 0; y < h; y++)
    for (int x = 0; x < w; x++) {
      const uint8_t* p = goal + 4 * ((size_t)y * w + x);
      if (!differs(p, bg)) continue;
      /* an edge pixel: a neighbour is background (or the image ends) */
      const int edge = x == 0 || y == 0 || x == w - 1 || y == h - 1 || !differs(p - 4, bg) || !differs(p + 4, bg) ||
                       !differs(p - 4 * (size_t)w, bg) || !differs(p + 4 * (size_t)w, bg);
      if (edge) put(img, w, h, x, y, rgb);
    }
}

/* Pixel coordinates of world point q (the renderer's convention: NDC
 * x = X ax / Z, y = Y ay / Z, column (x W + W - 1) / 2, row (H - 1 - y H) / 2);
 * 0 when q is behind the camera. */
static int project(const double eye[3], const double xc[3], const double yc[3], const double zc[3], double ay,
                   int w, int h, const double q[3], double* col, double* row) {
  double d[3] = {q[0] - eye[0], q[1] - eye[1], q[2] - eye[2]};
  const double X = d[0] * xc[0] + d[1] * xc[1] + d[2] * xc[2], Y = d[0] * yc[0] + d[1] * yc[1] + d[2] * yc[2];
  const double Z = d[0] * zc[0] + d[1] * zc[1] + d[2] * zc[2];
  if (!(Z > 1e-9)) return 0;
  const double ax = ay * h / w;
  *col = (X * ax / Z * w + w - 1) * 0.5;
  *row = (h - 1 - Y * ay / Z * h) * 0.5;
  return 1;
}

void ds__overlay_ground(uint8_t* img, int w, int h, const double eye[3], const double at[3], double fov,
                        const uint8_t rgb[3]) {
  /* the camera basis of render/raster.c: z = at - eye, x = up x z, y = z x x */
  double zc[3] = {at[0] - eye[0], at[1] - eye[1], at[2] - eye[2]};
  double n = sqrt(zc[0] * zc[0] + zc[1] * zc[1] + zc[2] * zc[2]);
  if (!(n > 0) || !(fov > 0 && fov < 180)) return;
  for (int i = 0; i < 3; i++) zc[i] /= n;
  double xc[3] = {zc[2], 0, -zc[0]}; /* (0, 1, 0) x zc */
  n = sqrt(xc[0] * xc[0] + xc[2] * xc[2]);
  if (!(n > 1e-12)) return;
  xc[0] /= n;
  xc[2] /= n;
  const double yc[3] = {zc[1] * xc[2] - zc[2] * xc[1], zc[2] * xc[0] - zc[0] * xc[2], zc[0] * xc[1] - zc[1] * xc[0]};
  const double ay = 1.0 / tan(0.5 * fov * 3.14159265358979323846 / 180.0);
  /* two points of the line y = 0 through (at.x, 0, at.z) along x (horizontal, so its depth is constant) */
  const double a[3] = {at[0] - xc[0], 0, at[2] - xc[2]}, b[3] = {at[0] + xc[0], 0, at[2] + xc[2]};
  double ca, ra, cb, rb;
  if (!project(eye, xc, yc, zc, ay, w, h, a, &ca, &ra) || !project(eye, xc, yc, zc, ay, w, h, b, &cb, &rb)) return;
  if (!(fabs(cb - ca) > 1e-9)) return;
  for (int x = 0; x < w; x++) {
    const double r = ra + (rb - ra) * (x - ca) / (cb - ca);
    if (r > -1 && r < h) put(img, w, h, x, (int)lround(r), rgb);
  }
}

/* 3 x 5 glyphs, one row per 3 bits (top row first, bit 2 the left pixel):
 * 0-9, '.', 's', '-' */
static const unsigned char glyphs[13][5] = {
    {7, 5, 5, 5, 7}, {2, 6, 2, 2, 7}, {7, 1, 7, 4, 7}, {7, 1, 7, 1, 7}, {5, 5, 7, 1, 1}, {7, 4, 7, 1, 7},
    {7, 4, 7, 5, 7}, {7, 1, 1, 1, 1}, {7, 5, 7, 5, 7}, {7, 5, 7, 1, 7}, {0, 0, 0, 0, 2}, {0, 3, 6, 3, 6},
    {0, 0, 7, 0, 0}};

void ds__overlay_time(uint8_t* img, int w, int h, double t) {
  char text[32];
  snprintf(text, sizeof text, "%.3fs", t);
  const int s = h >= 128 ? h / 64 : 1; /* pixel scale */
  const int len = (int)strlen(text), bw = (4 * len + 1) * s, bh = 7 * s;
  static const uint8_t dark[3] = {0, 0, 0}, white[3] = {255, 255, 255};
  for (int y = 0; y < bh; y++)
    for (int x = 0; x < bw; x++) put(img, w, h, x, y, dark);
  for (int i = 0; i < len; i++) {
    const char c = text[i];
    const int g = c >= '0' && c <= '9' ? c - '0' : c == '.' ? 10 : c == 's' ? 11 : 12;
    for (int r = 0; r < 5; r++)
      for (int k = 0; k < 3; k++)
        if (glyphs[g][r] >> (2 - k) & 1)
          for (int yy = 0; yy < s; yy++)
            for (int xx = 0; xx < s; xx++) put(img, w, h, (1 + 4 * i + k) * s + xx, (1 + r) * s + yy, white);
  }
}

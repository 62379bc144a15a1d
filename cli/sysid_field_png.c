/* dsim sysid --field-png: a per-element field, true (top) and recovered
 * (bottom), as a PNG. */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "dsim/env.h"
#include "dsim/image.h"
#include "dsim/sysid.h"

/* rest centroid of element e of an array with `per` particles an element (idx NULL: particles) */
static double centroid(const int* idx, int per, const dsReal* x0, int e, int axis) {
  if (!idx) return (double)x0[3 * e + axis];
  double c = 0;
  for (int a = 0; a < per; a++) c += (double)x0[3 * idx[per * e + a] + axis];
  return c / per;
}

/* Each element at its rest centroid, projected on the x-y plane (the
 * camera's usual view) into a grid of about nelem/4 bins of square pixels; a bin shows the
 * mean over its elements (seen through the depth) of ln(value) (linear
 * for a parameter that may change sign) on a blue-white-red scale shared
 * by both panels: the true field on top, the recovered one below, a colour
 * bar at the bottom (low to high, left to right). */
#define FIELD_WIDTH 320 /* pixels along the longer side */
#define FIELD_GAP 6     /* pixels between the panels */

static void colour(double t, uint8_t* px) {
  /* t in [0, 1]: blue (0.2, 0.3, 0.9) -> white -> red (0.9, 0.2, 0.15) */
  const double lo[3] = {0.2, 0.3, 0.9}, hi[3] = {0.9, 0.2, 0.15};
  t = t < 0 ? 0 : t > 1 ? 1 : t;
  for (int c = 0; c < 3; c++) {
    const double v = t < 0.5 ? lo[c] + (1 - lo[c]) * (2 * t) : 1 + (hi[c] - 1) * (2 * t - 1);
    px[c] = (uint8_t)(255 * v + 0.5);
  }
  px[3] = 255;
}

int ds__cli_field_png(dsSysid* s, int k, const char* path, char* err, size_t errlen) {
  if (!s || !path || k < 0 || k >= ds_sysid_nparams(s)) {
    snprintf(err, errlen, "field png: bad arguments");
    return DS_ERR_INVALID;
  }
  const char* name = ds_sysid_param_name(s, k);
  dsEnv* env = ds_sysid_env(s);
  const int* idx = NULL;
  const dsReal* x0 = NULL;
  int nelem = 0, per = 0, nx = 0;
  const int known = !ds_env_elements(env, name, &idx, &nelem, &per) && strncmp(name, "body.", 5) &&
                    !ds_env_param(env, "initial_position", &x0, &nx);
  const double* truth = ds_sysid_truth(s);
  const double* est = ds_sysid_best_values(s, NULL);
  int off = 0, nval = 0;
  for (int i = 0; i < ds_sysid_num_values(s); i++)
    if (ds_sysid_value_param(s, i) == k) {
      if (!nval) off = i;
      nval++;
    }
  if (!known || !truth || ds_sysid_param_width(s, k) != 1 || nval != nelem) {
    snprintf(err, errlen, "parameter %d (\"%s\") is not a per-element scalar field with a known truth", k + 1, name);
    return DS_ERR_CONFIG;
  }
  double lo[2] = {INFINITY, INFINITY}, hi[2] = {-INFINITY, -INFINITY}, vlo = INFINITY, vhi = -INFINITY;
  int logv = 1;
  for (int e = 0; e < nelem; e++) {
    if (ds_sysid_value_fixed(s, off + e)) continue;
    for (int a = 0; a < 2; a++) {
      const double c = centroid(idx, per, x0, e, a);
      lo[a] = c < lo[a] ? c : lo[a];
      hi[a] = c > hi[a] ? c : hi[a];
    }
    logv &= truth[off + e] > 0 && est[off + e] > 0;
  }
  for (int e = 0; e < nelem; e++) {
    if (ds_sysid_value_fixed(s, off + e)) continue;
    for (int q = 0; q < 2; q++) {
      const double v = q ? est[off + e] : truth[off + e], f = logv ? log(v) : v;
      vlo = f < vlo ? f : vlo;
      vhi = f > vhi ? f : vhi;
    }
  }
  const double ex = hi[0] - lo[0] > 0 ? hi[0] - lo[0] : 1, ey = hi[1] - lo[1] > 0 ? hi[1] - lo[1] : 1;
  /* about 4 elements a bin (a projected tet mesh leaves no bin empty), the bins square */
  const double nb = nelem / 4.0 > 1 ? nelem / 4.0 : 1;
  int nbx = (int)lround(sqrt(nb * ex / ey)), nby = (int)lround(sqrt(nb * ey / ex));
  nbx = nbx < 1 ? 1 : nbx > 64 ? 64 : nbx;
  nby = nby < 1 ? 1 : nby > 64 ? 64 : nby;
  const int cell = FIELD_WIDTH / (nbx > nby ? nbx : nby) > 4 ? FIELD_WIDTH / (nbx > nby ? nbx : nby) : 4;
  const int W = nbx * cell, ph = nby * cell, H = 2 * ph + 3 * FIELD_GAP + cell / 2;
  uint8_t* img = (uint8_t*)calloc((size_t)W * H * 4, 1);
  double* acc = (double*)calloc((size_t)nbx * nby * 2, sizeof(double));
  if (!img || !acc) {
    free(img);
    free(acc);
    snprintf(err, errlen, "field png: out of memory");
    return DS_ERR_NOMEM;
  }
  memset(img, 255, (size_t)W * H * 4);
  for (int q = 0; q < 2; q++) {
    memset(acc, 0, sizeof(double) * (size_t)nbx * nby * 2);
    for (int e = 0; e < nelem; e++) {
      if (ds_sysid_value_fixed(s, off + e)) continue;
      int ix = (int)((centroid(idx, per, x0, e, 0) - lo[0]) / ex * nbx), iy = (int)((centroid(idx, per, x0, e, 1) - lo[1]) / ey * nby);
      ix = ix >= nbx ? nbx - 1 : ix;
      iy = iy >= nby ? nby - 1 : iy;
      const double v = q ? est[off + e] : truth[off + e];
      acc[2 * ((size_t)iy * nbx + ix)] += logv ? log(v) : v;
      acc[2 * ((size_t)iy * nbx + ix) + 1] += 1;
    }
    const int y0 = FIELD_GAP + q * (ph + FIELD_GAP);
    for (int iy = 0; iy < nby; iy++)
      for (int ix = 0; ix < nbx; ix++) {
        double sum = acc[2 * ((size_t)iy * nbx + ix)], cnt = acc[2 * ((size_t)iy * nbx + ix) + 1];
        for (int dy = -1; dy <= 1 && cnt == 0; dy++) /* a bin no centroid fell in: its neighbours' mean */
          for (int dx = -1; dx <= 1; dx++)
            if (iy + dy >= 0 && iy + dy < nby && ix + dx >= 0 && ix + dx < nbx) {
              sum += acc[2 * ((size_t)(iy + dy) * nbx + ix + dx)];
              cnt += acc[2 * ((size_t)(iy + dy) * nbx + ix + dx) + 1];
            }
        if (cnt == 0) continue;
        uint8_t px[4];
        colour(vhi > vlo ? (sum / cnt - vlo) / (vhi - vlo) : 0.5, px);
        for (int r = 0; r < cell; r++)
          for (int c = 0; c < cell; c++) /* y up: row 0 at the top */
            memcpy(img + 4 * ((size_t)(y0 + (nby - 1 - iy) * cell + r) * W + ix * cell + c), px, 4);
      }
  }
  for (int x = 0; x < W; x++) { /* the colour bar */
    uint8_t px[4];
    colour((double)x / (W > 1 ? W - 1 : 1), px);
    for (int r = 0; r < cell / 2; r++) memcpy(img + 4 * ((size_t)(H - cell / 2 + r) * W + x), px, 4);
  }
  char text[256];
  snprintf(text, sizeof text, "%s: true (top) and recovered (bottom) field, colour %s from %.4g to %.4g", name,
           logv ? "log scale" : "linear", logv ? exp(vlo) : vlo, logv ? exp(vhi) : vhi);
  int rc = ds_png_write_text(path, img, W, H, "Description", text, err, errlen);
  free(img);
  free(acc);
  return rc;
}

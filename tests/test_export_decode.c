/* Companion of tests/test_export.sh: runs `dsim export` for PNG frames and a
 * GIF, decodes both back and compares them with the frames in the run log
 * (PNG exactly; GIF within its 256-colour palette's error).
 *   test_export_decode DSIM RUN.h5 DIR */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include "dsim/image.h"
#include "dsim/runlog.h"
#include "base/internal.h"
#include "io/gif.h"
#include "tests/dstest.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: test_export_decode DSIM RUN.h5 DIR\n");
    return 2;
  }
  const char *dsim = argv[1], *run = argv[2], *dir = argv[3];
  char cmd[8192], err[1024], path[4200];
  int nf = 0, h = 0, w = 0;
  uint8_t* frames = NULL;
  CHECK_INT_EQ(ds_runlog_read_frames(run, "last", &nf, &h, &w, &frames, err, sizeof err), DS_OK);
  if (!frames) return DST_RESULT();

  /* PNG frames: exact RGBA */
  snprintf(cmd, sizeof cmd, "'%s' export '%s' --episode last --frames '%s/frames' >/dev/null", dsim, run, dir);
  CHECK_INT_EQ(system(cmd), 0);
  for (int f = 0; f < nf; f++) {
    snprintf(path, sizeof path, "%s/frames/frame_%04d.png", dir, f);
    int pw = 0, ph = 0;
    uint8_t* px = NULL;
    CHECK_INT_EQ(ds_png_read(path, &px, &pw, &ph, err, sizeof err), DS_OK);
    CHECK_INT_EQ(pw, w);
    CHECK_INT_EQ(ph, h);
    if (px && pw == w && ph == h) CHECK(memcmp(px, frames + (size_t)f * h * w * 4, (size_t)h * w * 4) == 0);
    ds_image_free(px);
  }
  snprintf(path, sizeof path, "%s/frames/frame_%04d.png", dir, nf);
  FILE* extra = fopen(path, "rb");
  CHECK(extra == NULL); /* exactly nf frames */
  if (extra) fclose(extra);

#ifdef DS_HAVE_GIF
  /* GIF: RGB within the palette's quantisation error */
  snprintf(cmd, sizeof cmd, "'%s' export '%s' --episode last --gif '%s/a.gif' --fps 20 >/dev/null", dsim, run, dir);
  CHECK_INT_EQ(system(cmd), 0);
  snprintf(path, sizeof path, "%s/a.gif", dir);
  int gf = 0, gh = 0, gw = 0;
  uint8_t* rgb = NULL;
  CHECK_INT_EQ(ds__gif_read(path, &gf, &gh, &gw, &rgb, err, sizeof err), DS_OK);
  CHECK_INT_EQ(gf, nf);
  CHECK_INT_EQ(gh, h);
  CHECK_INT_EQ(gw, w);
  if (rgb && gf == nf && gh == h && gw == w) {
    int maxdiff = 0;
    double sum = 0;
    size_t npix = (size_t)h * w;
    for (int f = 0; f < nf; f++)
      for (size_t i = 0; i < npix; i++)
        for (int c = 0; c < 3; c++) {
          int a = frames[((size_t)f * npix + i) * 4 + c], b = rgb[((size_t)f * npix + i) * 3 + c];
          int d = abs(a - b);
          if (d > maxdiff) maxdiff = d;
          sum += d;
        }
    double mean = sum / ((double)nf * npix * 3);
    fprintf(stderr, "GIF vs logged frames: max |diff| %d, mean %.3f\n", maxdiff, mean);
    CHECK(maxdiff <= 16);
    CHECK(mean <= 4.0);
  }
  ds__free(rgb);
#endif
  ds_runlog_free(frames);
  return DST_RESULT();
}

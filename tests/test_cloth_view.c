/* control-cloth's default view frames the task: on seeds 0-9 the goal sheet
 * keeps a margin from every border of the first view, so a final frame near
 * the goal is not cut off (issue 32: in the square 256 x 256 frame the goal
 * left the view at the right edge at seed 0), and the start sheet (the first
 * frame) from the left, right and bottom borders; the highest drops start
 * with the sheet's top above the view, which falls into it within frames. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include "dsim/dsim.h"
#include "tests/dstest.h"

/* pixels between a drawn pixel and the border, at least */
#define MARGIN 4
/* alpha above which a pixel is the sheet's (the soft edge fades out) */
#define ALPHA_DRAWN 0.02

/* Bounding box x0, y0, x1, y1 of the drawn pixels; x1 < 0 when none. */
static void drawn_box(const dsReal* img, int w, int h, int* b) {
  b[0] = w, b[1] = h, b[2] = -1, b[3] = -1;
  for (int y = 0; y < h; y++)
    for (int x = 0; x < w; x++)
      if (img[4 * ((size_t)y * w + x) + 3] > ALPHA_DRAWN) {
        b[0] = x < b[0] ? x : b[0];
        b[1] = y < b[1] ? y : b[1];
        b[2] = x > b[2] ? x : b[2];
        b[3] = y > b[3] ? y : b[3];
      }
}

static void check_inside(const char* what, int seed, const int* b, int w, int h, int top) {
  const int ok = b[2] >= 0 && b[0] >= MARGIN && (!top || b[1] >= MARGIN) && b[2] < w - MARGIN && b[3] < h - MARGIN;
  CHECK(ok);
  if (!ok)
    fprintf(stderr, "  seed %d: the %s spans x %d..%d, y %d..%d of %d x %d (margin %d)\n", seed, what, b[0], b[2], b[1],
            b[3], w, h, MARGIN);
}

int main(void) {
  dsEnvDef d = ds_default_env_def("control-cloth");
  d.supersample = 1; /* the framing, not the anti-aliasing: 4x fewer pixels */
  char err[512];
  dsEnv* e = NULL;
  CHECK_INT_EQ(ds_env_create(&d, &e, err, sizeof err), DS_OK);
  if (!e) return DST_RESULT();
  int w = 0, h = 0;
  ds_env_image_size(e, &w, &h);
  dsReal* img = (dsReal*)malloc(sizeof(dsReal) * 4 * (size_t)w * (size_t)h);
  for (int seed = 0; seed < 10 && img; seed++) {
    int b[4];
    CHECK_INT_EQ(ds_env_reset(e, (uint64_t)seed, NULL, NULL), DS_OK);
    drawn_box(ds_env_goal_image(e), w, h, b);
    check_inside("goal", seed, b, w, h, 1);
    CHECK_INT_EQ(ds_env_render(e, img), DS_OK);
    drawn_box(img, w, h, b);
    check_inside("start sheet", seed, b, w, h, 0);
  }
  free(img);
  ds_env_destroy(e);
  return DST_RESULT();
}

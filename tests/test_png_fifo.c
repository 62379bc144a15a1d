/* A frame folder holding a FIFO named like a frame (issue 33 #7): reading it
 * used to block for ever in fopen/fread, hanging `dsim sysid`. ds_png_read
 * and ds_video_read_frames must refuse it at once with DS_ERR_IO naming the
 * file. The alarm turns a regression (a hang) into a failure instead of a
 * stuck `make check`; nothing here depends on timing otherwise. */
#define _POSIX_C_SOURCE 200809L
#include "config.h"

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dsim/image.h"
#include "dsim/video.h"
#include "tests/dstest.h"

static void hung(int sig) {
  (void)sig;
  static const char m[] = "test_png_fifo: FAIL: reading the FIFO blocked (a hang, not a refusal)\n";
  (void)!write(2, m, sizeof m - 1);
  _exit(1);
}

int main(void) {
  signal(SIGALRM, hung);
  alarm(15);
  char dir[] = "test_png_fifo.XXXXXX";
  if (!mkdtemp(dir)) DST_SKIP("cannot make a temporary folder");
  char fifo[256], png[256], err[512];
  snprintf(fifo, sizeof fifo, "%s/frame_0001.png", dir);
  snprintf(png, sizeof png, "%s/frame_0000.png", dir);
  if (mkfifo(fifo, 0600) != 0) {
    rmdir(dir);
    DST_SKIP("mkfifo is not supported here");
  }
  uint8_t px[2 * 2 * 4];
  memset(px, 200, sizeof px);
  CHECK_INT_EQ(ds_png_write(png, px, 2, 2, err, sizeof err), DS_OK);

  uint8_t* rgba = NULL;
  int w = 0, h = 0;
  CHECK_INT_EQ(ds_png_read(fifo, &rgba, &w, &h, err, sizeof err), DS_ERR_IO);
  CHECK(rgba == NULL);
  CHECK_STR_CONTAINS(err, fifo);
  CHECK_STR_CONTAINS(err, "is a FIFO, expected a regular PNG file");
  /* a regular frame still reads */
  CHECK_INT_EQ(ds_png_read(png, &rgba, &w, &h, err, sizeof err), DS_OK);
  CHECK_INT_EQ(w, 2);
  ds_image_free(rgba);

  /* the folder as `dsim sysid` reads it: two frame times, two *.png names */
  dsVideo* v = (dsVideo*)calloc(1, sizeof *v);
  v->nframes = 2;
  snprintf(v->camera_file, sizeof v->camera_file, "camera.json");
  CHECK_INT_EQ(ds_video_read_frames(dir, "sysid.frames_dir", v, err, sizeof err), DS_ERR_IO);
  CHECK_STR_CONTAINS(err, "frame_0001.png: is a FIFO");
  free(v->rgba);
  free(v);

  unlink(fifo);
  unlink(png);
  rmdir(dir);
  return DST_RESULT();
}

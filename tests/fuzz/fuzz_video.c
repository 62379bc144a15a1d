/* libFuzzer harness for the footage readers (io/video.c, io/png.c, and the
 * camera file's checks in io/cfg.c): the camera file, a folder's
 * frames.json and the PNG frames with their "dsim:frame" text chunks, the
 * inputs `dsim sysid` reads from users' folders.
 *
 * The first input byte picks what the rest is:
 *   0: a camera file (JSON), read by ds_video_read_camera;
 *   1: one PNG frame in a folder without frames.json (times from its text
 *      chunk, or a count error), read by ds_video_read_frames;
 *   2: frames.json, then a NUL byte, then a PNG frame: both in the folder;
 *   3: a camera file, a NUL byte, a PNG: the camera's times first, then the
 *      frame, as ds_sysid_load_video reads them.
 * Files go to a private temporary folder (the readers take paths). Built and
 * run by scripts/fuzz-video (clang, -fsanitize=fuzzer,address,undefined). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dsim/base.h"
#include "dsim/video.h"

static char g_dir[256], g_frames[300], g_camera[300], g_png[320], g_json[320];

int LLVMFuzzerInitialize(int* argc, char*** argv) {
  (void)argc;
  (void)argv;
  ds_set_memory_limit((size_t)256 << 20);
  const char* tmp = getenv("TMPDIR");
  snprintf(g_dir, sizeof g_dir, "%s/dsim-fuzz-video-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(g_dir)) abort();
  snprintf(g_frames, sizeof g_frames, "%s/frames", g_dir);
  snprintf(g_camera, sizeof g_camera, "%s/camera.json", g_dir);
  snprintf(g_png, sizeof g_png, "%s/000.png", g_frames);
  snprintf(g_json, sizeof g_json, "%s/frames.json", g_frames);
  char cmd[400];
  snprintf(cmd, sizeof cmd, "mkdir -p '%s'", g_frames);
  if (system(cmd) != 0) abort();
  return 0;
}

static void put(const char* path, const uint8_t* d, size_t n) {
  FILE* f = fopen(path, "wb");
  if (!f) abort();
  if (n && fwrite(d, 1, n, f) != n) abort();
  fclose(f);
}

/* The part before the first NUL, and the rest after it. */
static size_t split(const uint8_t* d, size_t n) {
  const uint8_t* z = memchr(d, 0, n);
  return z ? (size_t)(z - d) : n;
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const int mode = data[0] % 4;
  const uint8_t* d = data + 1;
  const size_t n = size - 1;
  remove(g_png);
  remove(g_json);
  char err[512];
  dsVideo* v = calloc(1, sizeof *v);
  if (!v) return 0;
  if (mode == 0) {
    put(g_camera, d, n);
    (void)ds_video_read_camera(g_camera, "camera", v, err, sizeof err);
  } else if (mode == 1) {
    put(g_png, d, n);
    (void)ds_video_read_frames(g_frames, "frames", v, err, sizeof err);
  } else {
    const size_t k = split(d, n);
    const uint8_t* rest = d + (k < n ? k + 1 : n);
    const size_t nrest = k < n ? n - k - 1 : 0;
    put(g_png, rest, nrest);
    if (mode == 2) {
      put(g_json, d, k);
      (void)ds_video_read_frames(g_frames, "frames", v, err, sizeof err);
    } else {
      put(g_camera, d, k);
      if (ds_video_read_camera(g_camera, "camera", v, err, sizeof err) == 0)
        (void)ds_video_read_frames(g_frames, "frames", v, err, sizeof err);
    }
  }
  /* what was read must be whole: every pixel finite and in range */
  if (v->rgba) {
    const size_t np = (size_t)v->nframes * (size_t)v->width * (size_t)v->height * 4;
    for (size_t i = 0; i < np; i++)
      if (!(v->rgba[i] >= 0 && v->rgba[i] <= 1)) abort();
  }
  ds_video_free(v);
  free(v);
  return 0;
}

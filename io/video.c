/* Footage reading (dsim/video.h): the camera file through the config
 * reader's checks (io/cfg.c), the frames through the PNG reader. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsim/image.h"
#include "dsim/video.h"
#include "base/internal.h"
#include "io/cfg.h"

#include <cjson/cJSON.h>

/* One entry of a camera file's "views": the entry without "frames", with
 * the file's times, read as a camera file of its own (io/cfg.c's checks),
 * its messages naming "FILE: views[i]". */
static int read_view(const char* path, const cJSON* times, const cJSON* e, int i, dsVideo* v, char* err,
                     size_t errlen) {
  char where[1100];
  snprintf(where, sizeof where, "%s: views[%d]", path, i);
  if (!cJSON_IsObject(e)) return ds__puterr(err, errlen, DS_ERR_CONFIG, "%s: expected an object", where);
  const cJSON* fr = cJSON_GetObjectItemCaseSensitive(e, "frames");
  if (!cJSON_IsString(fr) || !fr->valuestring[0] || strlen(fr->valuestring) >= sizeof v->views[i].frames)
    return ds__puterr(err, errlen, DS_ERR_CONFIG, "%s: \"frames\" is required: the view's folder of PNG frames (a string)",
                      where);
  cJSON* one = cJSON_Duplicate(e, 1);
  if (one && times) cJSON_AddItemToObject(one, "times", cJSON_Duplicate(times, 1));
  if (one) cJSON_DeleteItemFromObjectCaseSensitive(one, "frames");
  char* text = one ? cJSON_PrintUnformatted(one) : NULL;
  cJSON_Delete(one);
  if (!text) return ds__puterr(err, errlen, DS_ERR_NOMEM, "out of memory");
  dsErrBuf eb;
  ds__clearerr(&eb);
  dsVideoView* w = &v->views[i];
  double intr[4] = {0, 0, 0, 0};
  int n = 0;
  const int rc = ds__cfg_video_camera(where, text, v->times, DS_VIDEO_MAX_FRAMES, &n, w->position, w->look_at, &w->fov,
                                      intr, &eb);
  cJSON_free(text);
  if (rc) return ds__puterr(err, errlen, rc, "%s", ds__errmsg(&eb));
  w->fx = intr[0];
  w->fy = intr[1];
  w->cx = intr[2];
  w->cy = intr[3];
  snprintf(w->frames, sizeof w->frames, "%s", fr->valuestring);
  v->nframes = n;
  return 0;
}

/* A camera file with "views" (dsim/video.h): every entry, the first's
 * camera also in v's single-camera fields. */
static int read_views(const char* path, const cJSON* root, dsVideo* v, char* err, size_t errlen) {
  for (const cJSON* ch = root->child; ch; ch = ch->next)
    if (strcmp(ch->string, "times") && strcmp(ch->string, "views"))
      return ds__puterr(err, errlen, DS_ERR_CONFIG,
                        "%s: unknown key \"%s\" beside \"views\" (keys: times, views; each view holds its "
                        "position, look_at, fov or fx, fy, cx, cy, and frames)",
                        path, ch->string);
  const cJSON* list = cJSON_GetObjectItemCaseSensitive(root, "views");
  const int n = cJSON_IsArray(list) ? cJSON_GetArraySize(list) : -1;
  if (n < 1 || n > DS_VIDEO_MAX_VIEWS)
    return ds__puterr(err, errlen, DS_ERR_CONFIG, "%s: views: expected a list of 1 to %d views", path,
                      DS_VIDEO_MAX_VIEWS);
  const cJSON* times = cJSON_GetObjectItemCaseSensitive(root, "times");
  for (int i = 0; i < n; i++) {
    const int rc = read_view(path, times, cJSON_GetArrayItem(list, i), i, v, err, errlen);
    if (rc) return rc;
  }
  v->nviews = n;
  const dsVideoView* w = &v->views[0];
  memcpy(v->position, w->position, sizeof v->position);
  memcpy(v->look_at, w->look_at, sizeof v->look_at);
  v->fov = w->fov;
  v->fx = w->fx;
  v->fy = w->fy;
  v->cx = w->cx;
  v->cy = w->cy;
  return 0;
}

int ds_video_read_camera(const char* path, const char* label, dsVideo* v, char* err, size_t errlen) {
  if (!path || !v) return ds__puterr(err, errlen, DS_ERR_INVALID, "video: NULL argument");
  memset(v, 0, sizeof *v);
  snprintf(v->camera_file, sizeof v->camera_file, "%s", path);
  char* text = NULL;
  dsErrBuf eb;
  ds__clearerr(&eb);
  int rc = ds__read_text_file(path, &text, NULL, &eb);
  if (rc) return ds__puterr(err, errlen, rc, "%s%s%s", label ? label : "", label ? ": " : "", ds__errmsg(&eb));
  ds__clearerr(&eb);
  cJSON* root = cJSON_Parse(text);
  if (cJSON_IsObject(root) && cJSON_GetObjectItemCaseSensitive(root, "views")) {
    rc = read_views(path, root, v, err, errlen);
    cJSON_Delete(root);
    ds__free(text);
    return rc;
  }
  cJSON_Delete(root);
  double intr[4] = {0, 0, 0, 0};
  rc = ds__cfg_video_camera(path, text, v->times, DS_VIDEO_MAX_FRAMES, &v->nframes, v->position, v->look_at, &v->fov,
                            intr, &eb);
  v->fx = intr[0];
  v->fy = intr[1];
  v->cx = intr[2];
  v->cy = intr[3];
  ds__free(text);
  if (rc) return ds__puterr(err, errlen, rc, "%s", ds__errmsg(&eb));
  return 0;
}

static int cmp_str(const void* a, const void* b) { return strcmp(*(char* const*)a, *(char* const*)b); }

/* The *.png names of dir, sorted (at most DS_VIDEO_MAX_FRAMES + 1 counted:
 * *n past the cap means too many). */
static int list_frames(const char* dir, const char* label, char*** names, int* n, char* err, size_t errlen) {
  DIR* d = opendir(dir);
  if (!d)
    return ds__puterr(err, errlen, DS_ERR_IO, "%s%s%s: cannot open: %s", label ? label : "", label ? ": " : "", dir,
                      strerror(errno));
  char** nm = (char**)calloc(DS_VIDEO_MAX_FRAMES + 1, sizeof(char*));
  int k = 0, nomem = !nm;
  struct dirent* de;
  while (nm && (de = readdir(d)) != NULL) {
    const size_t L = strlen(de->d_name);
    if (L < 5 || strcmp(de->d_name + L - 4, ".png")) continue;
    if (k >= DS_VIDEO_MAX_FRAMES) {
      k++;
      break;
    }
    if (!(nm[k++] = strdup(de->d_name))) nomem = 1;
  }
  closedir(d);
  *names = nm;
  *n = k;
  if (nomem) return ds__puterr(err, errlen, DS_ERR_NOMEM, "out of memory");
  qsort(nm, (size_t)(k < DS_VIDEO_MAX_FRAMES ? k : DS_VIDEO_MAX_FRAMES), sizeof(char*), cmp_str);
  return 0;
}

/* Read frame i (path) into v: the first sets the size, the others must match it. */
static int read_frame(dsVideo* v, int i, const char* path, const char* first, char* err, size_t errlen) {
  dsReal* img = NULL;
  int w = 0, h = 0;
  char msg[1024];
  int rc = ds_png_read_real(path, &img, &w, &h, msg, sizeof msg);
  if (rc) return ds__puterr(err, errlen, rc, "frame %d: %s", i, msg);
  if (i == 0) {
    v->width = w;
    v->height = h;
    v->rgba = (dsReal*)calloc((size_t)v->nframes * 4 * (size_t)w * (size_t)h, sizeof(dsReal));
    if (!v->rgba) rc = ds__puterr(err, errlen, DS_ERR_NOMEM, "out of memory");
  } else if (w != v->width || h != v->height) {
    rc = ds__puterr(err, errlen, DS_ERR_CONFIG, "%s: %d x %d pixels, but %s is %d x %d (frames must share one size)",
                    path, w, h, first, v->width, v->height);
  }
  if (!rc) memcpy(v->rgba + (size_t)i * 4 * (size_t)w * (size_t)h, img, 4 * (size_t)w * (size_t)h * sizeof(dsReal));
  ds_image_free(img);
  return rc;
}

/* times[0..n) from a JSON array: numbers >= 0, increasing; what names the source. */
static int times_of(const cJSON* t, int n, const char* what, double* times, char* err, size_t errlen) {
  if (!cJSON_IsArray(t) || cJSON_GetArraySize(t) != n)
    return ds__puterr(err, errlen, DS_ERR_CONFIG, "%s: \"times\": expected an array of %d frame times (one per PNG)",
                      what, n);
  for (int i = 0; i < n; i++) {
    const cJSON* e = cJSON_GetArrayItem(t, i);
    if (!cJSON_IsNumber(e) || !(e->valuedouble >= 0) || (i > 0 && !(e->valuedouble > times[i - 1])))
      return ds__puterr(err, errlen, DS_ERR_CONFIG, "%s: times[%d]: expected a number >= 0 after the previous (s)",
                        what, i);
    times[i] = e->valuedouble;
  }
  return 0;
}

/* The frames' own times when the camera file gives none: DIR/frames.json
 * (dsim export writes it), else each PNG's "dsim:frame" text chunk. */
static int footage_times(const char* dir, char** names, int nn, dsVideo* v, char* err, size_t errlen) {
  char path[4096], text[512];
  snprintf(path, sizeof path, "%s/frames.json", dir);
  char* js = NULL;
  dsErrBuf eb;
  ds__clearerr(&eb);
  int rc = 0;
  if (ds__read_text_file(path, &js, NULL, &eb) == 0) {
    cJSON* root = cJSON_Parse(js);
    ds__free(js);
    if (!root) return ds__puterr(err, errlen, DS_ERR_PARSE, "%s: not valid JSON", path);
    rc = times_of(cJSON_GetObjectItemCaseSensitive(root, "times"), nn, path, v->times, err, errlen);
    cJSON_Delete(root);
    if (!rc) v->nframes = nn;
    return rc;
  }
  for (int i = 0; i < nn && !rc; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    char msg[512];
    rc = ds_png_read_text(path, "dsim:frame", text, sizeof text, msg, sizeof msg);
    if (rc == DS_ERR_NOTFOUND)
      return ds__puterr(err, errlen, DS_ERR_CONFIG,
                        "%s: no \"times\", and %s has no frames.json and %s carries no time: give the frame times "
                        "in the camera file",
                        v->camera_file, dir, names[i]);
    if (rc) return ds__puterr(err, errlen, rc, "frame %d: %s", i, msg);
    cJSON* root = cJSON_Parse(text);
    const cJSON* t = root ? cJSON_GetObjectItemCaseSensitive(root, "time") : NULL;
    if (!cJSON_IsNumber(t) || !(t->valuedouble >= 0) || (i > 0 && !(t->valuedouble > v->times[i - 1])))
      rc = ds__puterr(err, errlen, DS_ERR_CONFIG, "%s: text \"dsim:frame\": expected a time >= 0 after the previous frame's",
                      path);
    else
      v->times[i] = t->valuedouble;
    cJSON_Delete(root);
  }
  if (!rc) v->nframes = nn;
  return rc;
}

int ds_video_read_frames(const char* dir, const char* label, dsVideo* v, char* err, size_t errlen) {
  if (!dir || !v) return ds__puterr(err, errlen, DS_ERR_INVALID, "video: NULL argument");
  free(v->rgba);
  v->rgba = NULL;
  char** names = NULL;
  int nn = 0;
  int rc = list_frames(dir, label, &names, &nn, err, errlen);
  if (!rc && nn < 1) rc = ds__puterr(err, errlen, DS_ERR_CONFIG, "%s: no PNG frames", dir);
  if (!rc && nn > DS_VIDEO_MAX_FRAMES)
    rc = ds__puterr(err, errlen, DS_ERR_CONFIG, "%s: more than %d PNG frames", dir, DS_VIDEO_MAX_FRAMES);
  if (!rc && v->nframes == 0) rc = footage_times(dir, names, nn, v, err, errlen);
  if (!rc && nn != v->nframes)
    rc = ds__puterr(err, errlen, DS_ERR_CONFIG, "%s: %d PNG frame%s, but %s gives %d frame times (a frame missing?)",
                    dir, nn, nn == 1 ? "" : "s", v->camera_file, v->nframes);
  char path[4096], first[4096] = "";
  for (int i = 0; i < nn && !rc; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    if (i == 0) snprintf(first, sizeof first, "%s", path);
    rc = read_frame(v, i, path, first, err, errlen);
  }
  for (int i = 0; names && i < nn && i < DS_VIDEO_MAX_FRAMES; i++) free(names[i]);
  free(names);
  if (rc) {
    free(v->rgba);
    v->rgba = NULL;
  }
  return rc;
}

void ds_video_free(dsVideo* v) {
  if (!v) return;
  free(v->rgba);
  v->rgba = NULL;
}

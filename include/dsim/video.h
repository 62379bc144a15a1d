/* Footage for system identification: a folder of PNG frames and a camera
 * file (JSON with the keys "times": frame times in s, one per frame,
 * increasing, >= 0; "position" and "look_at": arrays of 3 numbers, m; "fov":
 * the vertical field of view in degrees, in (0, 180), or the intrinsics
 * "fx", "fy", "cx", "cy" in pixels, all four: u = fx X/Z + cx from the
 * image's left edge, v = cy - fy Y/Z from its top). "times" may be left
 * out when the frames carry their times, as `dsim export --frames` writes
 * them: the folder's frames.json ("times"), else each PNG's "dsim:frame"
 * text chunk ({"time": s, ...}). Several views of one scene: instead of
 * the camera keys, "views": a list of 1 to DS_VIDEO_MAX_VIEWS objects, each
 * with "position", "look_at", "fov" or "fx", "fy", "cx", "cy", and
 * "frames" (the view's folder of PNGs), sharing the file's "times":
 *   {"times": [0.1, 0.2], "views": [
 *     {"position": [0, 1, -4], "look_at": [0, 0, 0], "fov": 30, "frames": "front"},
 *     {"position": [4, 1, 0], "look_at": [0, 0, 0], "fx": 40, "fy": 40, "cx": 16, "cy": 16,
 *      "frames": "side"}]}
 * Reading only: what
 * the frames mean for an env (its camera, image size and substep schedule)
 * is ds_sysid_load_video's (dsim/sysid.h).
 *
 *   dsVideo v;
 *   ds_video_read_camera("camera.json", NULL, &v, err, sizeof err);
 *   ds_video_read_frames("frames", NULL, &v, err, sizeof err);
 *   ... v.rgba, v.times ...
 *   ds_video_free(&v); */
#ifndef DSIM_VIDEO_H
#define DSIM_VIDEO_H

#include <stddef.h>

#include "dsim/base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* frames (and frame times) a video may have */
#define DS_VIDEO_MAX_FRAMES 4096
/* views a camera file may list */
#define DS_VIDEO_MAX_VIEWS 8

/* One view of a camera file's "views" list. */
typedef struct dsVideoView {
  double position[3], look_at[3]; /* m */
  double fov;                     /* degrees (0: intrinsics) */
  double fx, fy, cx, cy;          /* pixels (fx 0: fov) */
  char frames[1024];              /* the view's frames folder, as written in the file */
} dsVideoView;

typedef struct dsVideo {
  int nframes;               /* frames: the camera file's times, then the PNG files (they must agree) */
  int width, height;         /* pixels (after ds_video_read_frames) */
  double times[DS_VIDEO_MAX_FRAMES]; /* frame times, s */
  double position[3];        /* camera position, m */
  double look_at[3];         /* the point the camera looks at, m */
  double fov;                /* vertical field of view, degrees (0: given by the intrinsics) */
  double fx, fy, cx, cy;     /* intrinsics, pixels (dsCamera in dsim/raster.h; fx 0: none, fov) */
  dsReal* rgba;              /* nframes x height x width x 4 in [0, 1], row 0 at the top (frames' order:
                                file names sorted); NULL until ds_video_read_frames */
  char camera_file[1024];    /* the camera file's path (messages) */
  int nviews;                /* 0: one camera (the keys above); else the file's "views" (the keys above: views[0]'s) */
  dsVideoView views[DS_VIDEO_MAX_VIEWS];
} dsVideo;

/* Read the camera file into *v (which it first clears). label names the
 * file's setting in the message of a file that cannot be read (e.g. the
 * config key "sysid.camera"; NULL: none); errors of its content name the
 * file and key (DS_ERR_PARSE, DS_ERR_CONFIG). */
DS_API int ds_video_read_camera(const char* path, const char* label, dsVideo* v, char* err, size_t errlen);
/* Read every *.png of dir, sorted by name, into v->rgba: exactly v->nframes
 * of them (the camera's times; when it gave none, the frames' own times set
 * v->times and v->nframes), all of one size. label names the folder's
 * setting in the message of a folder that cannot be opened (NULL: none).
 * DS_ERR_IO, DS_ERR_CONFIG (count, sizes), the PNG reader's errors ("frame K:
 * ..."), DS_ERR_NOMEM. */
DS_API int ds_video_read_frames(const char* dir, const char* label, dsVideo* v, char* err, size_t errlen);
/* Free v->rgba (v itself is the caller's). */
DS_API void ds_video_free(dsVideo* v);

#ifdef __cplusplus
}
#endif
#endif

/* Footage for sysid (dsim/sysid.h ds_sysid_load_video): the camera file and
 * the PNG frames (read by io, dsim/video.h) become the env's camera, image
 * size and substep schedule, and a dsSysidVideo of the frames after time 0. */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsim/sysid.h"
#include "dsim/video.h"
#include "base/internal.h"

/* frame times are whole substeps to this relative tolerance */
#define VIDEO_TIME_RTOL 1e-6
/* the last frame's substep at most (a sanity bound on times / dt) */
#define VIDEO_MAX_SUBSTEP 100000000L

static long gcd_l(long a, long b) {
  while (b) {
    long t = a % b;
    a = b;
    b = t;
  }
  return a;
}

/* The env camera of the file's: it looks at the origin from
 * eye = (d cos e sin a, d sin e, -d cos e cos a) (docs/scenes.md). */
static int set_camera(const dsVideo* v, dsEnvDef* def, char* err, size_t errlen) {
  const double* pos = v->position;
  if (v->look_at[0] != 0 || v->look_at[1] != 0 || v->look_at[2] != 0)
    return ds__puterr(err, errlen, DS_ERR_CONFIG,
                      "%s: look_at: the env's camera looks at the origin; give position (and the scene) in "
                      "coordinates centred on the look-at point, with look_at [0, 0, 0]",
                      v->camera_file);
  const double d = sqrt(pos[0] * pos[0] + pos[1] * pos[1] + pos[2] * pos[2]);
  if (!(d > 0) || fabs(pos[1]) >= d * 0.999999)
    return ds__puterr(err, errlen, DS_ERR_CONFIG,
                      "%s: position: a camera at the look-at point or straight above or below it", v->camera_file);
  def->cam_distance = (dsReal)d;
  def->cam_elevation = (dsReal)(asin(pos[1] / d) * 57.295779513082321);
  def->cam_azimuth = (dsReal)(atan2(pos[0], -pos[2]) * 57.295779513082321);
  def->cam_fov = (dsReal)v->fov;
  return 0;
}

/* Times -> substeps of the frames after time 0 (frames at time 0 are the
 * initial state); the schedule: render and control interval = their
 * greatest common divisor, the episode ends at the last. */
static int set_schedule(const dsVideo* v, int first, dsEnvDef* def, int* substep, char* err, size_t errlen) {
  long g = 0;
  for (int i = first; i < v->nframes; i++) {
    const double q = v->times[i] / (double)def->dt;
    const long s = lround(q);
    if (fabs(q - (double)s) > VIDEO_TIME_RTOL * fmax(1.0, q) || s < 1 || s > VIDEO_MAX_SUBSTEP)
      return ds__puterr(err, errlen, DS_ERR_CONFIG,
                        "%s: times[%d] = %g s is not a whole number of substeps of env.physics.dt = %g s",
                        v->camera_file, i, v->times[i], (double)def->dt);
    substep[i - first] = (int)s;
    g = gcd_l(g, s);
  }
  def->render_interval = (int)g;
  def->control_interval = (int)g;
  def->substeps = substep[v->nframes - first - 1];
  return 0;
}

int ds_sysid_load_video(const dsSysidDef* sd, dsEnvDef* def, dsSysidVideo* out, char* err, size_t errlen) {
  if (!sd || !def || !out) return ds__puterr(err, errlen, DS_ERR_INVALID, "sysid video: NULL argument");
  memset(out, 0, sizeof *out);
  dsVideo* v = (dsVideo*)calloc(1, sizeof *v);
  if (!v) return ds__puterr(err, errlen, DS_ERR_NOMEM, "out of memory");
  int rc = ds_video_read_camera(sd->camera, "sysid.camera", v, err, errlen);
  if (!rc) rc = set_camera(v, def, err, errlen);
  if (!rc) rc = ds_video_read_frames(sd->frames_dir, "sysid.frames_dir", v, err, errlen);
  int first = 0;
  while (!rc && first < v->nframes && v->times[first] == 0) first++;
  if (!rc && first == v->nframes)
    rc = ds__puterr(err, errlen, DS_ERR_CONFIG, "%s: times: every frame is at time 0", v->camera_file);
  int* substep = NULL;
  dsReal* rgba = NULL;
  const size_t frame = 4 * (size_t)v->width * (size_t)v->height;
  if (!rc) {
    substep = (int*)calloc((size_t)(v->nframes - first), sizeof(int));
    rgba = (dsReal*)malloc((size_t)(v->nframes - first) * frame * sizeof(dsReal));
    if (!substep || !rgba) rc = ds__puterr(err, errlen, DS_ERR_NOMEM, "out of memory");
  }
  if (!rc) rc = set_schedule(v, first, def, substep, err, errlen);
  if (!rc) {
    memcpy(rgba, v->rgba + (size_t)first * frame, (size_t)(v->nframes - first) * frame * sizeof(dsReal));
    def->width = v->width;
    def->height = v->height;
    out->nframes = v->nframes - first;
    out->width = v->width;
    out->height = v->height;
    out->substep = substep;
    out->rgba = rgba;
  } else {
    free(substep);
    free(rgba);
  }
  ds_video_free(v);
  free(v);
  return rc;
}

void ds_sysid_video_free(dsSysidVideo* v) {
  if (!v) return;
  /* the arrays of ds_sysid_load_video are its own (const only to readers) */
  free((void*)(uintptr_t)v->substep);
  free((void*)(uintptr_t)v->rgba);
  memset(v, 0, sizeof *v);
}

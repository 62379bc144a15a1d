/* Footage for sysid (dsim/sysid.h ds_sysid_load_video): the camera file and
 * the PNG frames (read by io, dsim/video.h) become the env's camera, image
 * size and substep schedule, and a dsSysidVideo of the frames after time 0. */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsim/controller.h"
#include "dsim/sysid.h"
#include "dsim/video.h"
#include "base/internal.h"
#include "controllers/sysid_field.h"

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

/* The env camera of the file's: it looks at look_at from
 * eye = look_at + (d cos e sin a, d sin e, -d cos e cos a) (docs/scenes.md),
 * with the file's fov or intrinsics. */
static int set_camera(const dsVideo* v, dsEnvDef* def, char* err, size_t errlen) {
  double rel[3];
  for (int i = 0; i < 3; i++) rel[i] = v->position[i] - v->look_at[i];
  const double d = sqrt(rel[0] * rel[0] + rel[1] * rel[1] + rel[2] * rel[2]);
  if (!(d > 0) || fabs(rel[1]) >= d * 0.999999)
    return ds__puterr(err, errlen, DS_ERR_CONFIG,
                      "%s: position: a camera at the look-at point or straight above or below it (the view is "
                      "y-up)", v->camera_file);
  if (!(v->fov > 0) && !(v->fx > 0))
    return ds__puterr(err, errlen, DS_ERR_CONFIG, "%s: fov: expected degrees in (0, 180), or the intrinsics fx, fy, "
                      "cx, cy", v->camera_file);
  if (v->fx > 0 && !(v->fy > 0))
    return ds__puterr(err, errlen, DS_ERR_CONFIG, "%s: fy: expected a positive number of pixels, got %g",
                      v->camera_file, v->fy);
  def->cam_distance = (dsReal)d;
  def->cam_elevation = (dsReal)(asin(rel[1] / d) * 57.295779513082321);
  def->cam_azimuth = (dsReal)(atan2(rel[0], -rel[2]) * 57.295779513082321);
  for (int i = 0; i < 3; i++) def->cam_look_at[i] = (dsReal)v->look_at[i];
  if (v->fov > 0) def->cam_fov = (dsReal)v->fov;
  def->cam_fx = (dsReal)(v->fx > 0 ? v->fx : 0);
  def->cam_fy = (dsReal)(v->fx > 0 ? v->fy : 0);
  def->cam_cx = (dsReal)(v->fx > 0 ? v->cx : 0);
  def->cam_cy = (dsReal)(v->fx > 0 ? v->cy : 0);
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

/* v's frames after time 0 (v->times given: first frames at time 0 are the
 * initial state) or, without times, the env's schedule (frame k at substep
 * (k + 1) C, C = def->render_interval, as a synthetic video), into *out and
 * def (image size, schedule). */
static int video_of(const dsVideo* v, int have_times, dsEnvDef* def, dsSysidVideo* out, char* err, size_t errlen) {
  int rc = 0, first = 0;
  while (have_times && first < v->nframes && v->times[first] == 0) first++;
  if (first == v->nframes)
    return ds__puterr(err, errlen, DS_ERR_CONFIG, "%s: times: every frame is at time 0", v->camera_file);
  const int n = v->nframes - first;
  const size_t frame = 4 * (size_t)v->width * (size_t)v->height;
  int* substep = (int*)calloc((size_t)n, sizeof(int));
  dsReal* rgba = (dsReal*)malloc((size_t)n * frame * sizeof(dsReal));
  if (!substep || !rgba) rc = ds__puterr(err, errlen, DS_ERR_NOMEM, "out of memory");
  if (!rc && have_times) {
    rc = set_schedule(v, first, def, substep, err, errlen);
  } else if (!rc) {
    const long C = def->render_interval > 0 ? def->render_interval : 1;
    if ((long)n * C > VIDEO_MAX_SUBSTEP)
      rc = ds__puterr(err, errlen, DS_ERR_CONFIG, "%s: %d frames of %ld substeps are too long an episode",
                      v->camera_file, n, C);
    for (int k = 0; !rc && k < n; k++) substep[k] = (int)((k + 1) * C);
    if (!rc) {
      def->render_interval = (int)C;
      def->control_interval = (int)C;
      def->substeps = substep[n - 1];
    }
  }
  if (!rc) {
    memcpy(rgba, v->rgba + (size_t)first * frame, (size_t)n * frame * sizeof(dsReal));
    def->width = v->width;
    def->height = v->height;
    out->nframes = n;
    out->width = v->width;
    out->height = v->height;
    out->substep = substep;
    out->rgba = rgba;
  } else {
    free(substep);
    free(rgba);
  }
  return rc;
}

/* A camera file's "views" (dsim/video.h): every view's folder (relative to
 * frames_dir unless absolute) read with the file's times (or the first
 * folder's own), all of one size and count; out gets the views and their
 * frames after time 0, view by view (video_of's schedule, from view 0). */
static int views_video(const char* frames_dir, dsVideo* v, dsEnvDef* def, dsSysidVideo* out, char* err,
                       size_t errlen) {
  const int nv = v->nviews;
  dsSysidView* views = (dsSysidView*)calloc((size_t)nv, sizeof *views);
  dsReal* all = NULL;
  int rc = views ? 0 : ds__puterr(err, errlen, DS_ERR_NOMEM, "out of memory");
  int w = 0, h = 0, n0 = 0;
  for (int i = 0; i < nv && !rc; i++) {
    const dsVideoView* vv = &v->views[i];
    char dir[DS_SYSID_PATH_MAX], label[DS_SYSID_PATH_MAX + 32];
    const int len = vv->frames[0] == '/' ? snprintf(dir, sizeof dir, "%s", vv->frames)
                                         : snprintf(dir, sizeof dir, "%s/%s", frames_dir, vv->frames);
    if (len < 0 || len >= (int)sizeof dir) {
      rc = ds__puterr(err, errlen, DS_ERR_CONFIG, "%s: views[%d].frames: the path is longer than %d characters",
                      v->camera_file, i, DS_SYSID_PATH_MAX - 1);
      break;
    }
    if (snprintf(label, sizeof label, "%s: views[%d].frames", v->camera_file, i) < 0) label[0] = '\0';
    rc = ds_video_read_frames(dir, label, v, err, errlen);
    if (!rc && i > 0 && (v->width != w || v->height != h))
      rc = ds__puterr(err, errlen, DS_ERR_CONFIG, "%s: %d x %d pixels, but views[0]'s frames are %d x %d", dir, v->width,
                      v->height, w, h);
    if (!rc && i == 0) {
      w = v->width, h = v->height, n0 = v->nframes;
      all = (dsReal*)malloc((size_t)nv * (size_t)n0 * 4 * (size_t)w * (size_t)h * sizeof(dsReal));
      if (!all) rc = ds__puterr(err, errlen, DS_ERR_NOMEM, "out of memory");
    }
    const size_t frames = (size_t)n0 * 4 * (size_t)w * (size_t)h;
    if (!rc) memcpy(all + (size_t)i * frames, v->rgba, frames * sizeof(dsReal));
    if (!rc) {
      memcpy(views[i].position, vv->position, sizeof vv->position);
      memcpy(views[i].look_at, vv->look_at, sizeof vv->look_at);
      views[i].fov = vv->fov;
      views[i].fx = vv->fx, views[i].fy = vv->fy, views[i].cx = vv->cx, views[i].cy = vv->cy;
      memcpy(views[i].frames, dir, sizeof dir);
    }
  }
  if (!rc) {
    memcpy(v->rgba, all, (size_t)n0 * 4 * (size_t)w * (size_t)h * sizeof(dsReal)); /* view 0 sets the schedule */
    rc = video_of(v, 1, def, out, err, errlen);
  }
  if (!rc && nv > 1) {
    /* the frames after time 0 of every view, view by view */
    const int n = out->nframes, first = n0 - n;
    const size_t frame = 4 * (size_t)w * (size_t)h;
    dsReal* rgba = (dsReal*)malloc((size_t)nv * (size_t)n * frame * sizeof(dsReal));
    if (!rgba) rc = ds__puterr(err, errlen, DS_ERR_NOMEM, "out of memory");
    for (int i = 0; i < nv && !rc; i++)
      memcpy(rgba + (size_t)i * n * frame, all + ((size_t)i * n0 + first) * frame, (size_t)n * frame * sizeof(dsReal));
    if (!rc) {
      free((void*)(uintptr_t)out->rgba);
      out->rgba = rgba;
    }
  }
  free(all);
  if (!rc) {
    out->nviews = nv;
    out->views = views;
  } else {
    free(views);
  }
  return rc;
}

int ds_sysid_load_video(const dsSysidDef* sd, dsEnvDef* def, dsSysidVideo* out, char* err, size_t errlen) {
  if (!sd || !def || !out) return ds__puterr(err, errlen, DS_ERR_INVALID, "sysid video: NULL argument");
  memset(out, 0, sizeof *out);
  dsVideo* v = (dsVideo*)calloc(1, sizeof *v);
  if (!v) return ds__puterr(err, errlen, DS_ERR_NOMEM, "out of memory");
  int rc = ds_video_read_camera(sd->camera, "sysid.camera", v, err, errlen);
  if (!rc) rc = set_camera(v, def, err, errlen);
  if (!rc && v->nviews > 0) {
    rc = views_video(sd->frames_dir, v, def, out, err, errlen);
    ds_video_free(v);
    free(v);
    return rc;
  }
  if (!rc) rc = ds_video_read_frames(sd->frames_dir, "sysid.frames_dir", v, err, errlen);
  if (!rc) rc = video_of(v, 1, def, out, err, errlen);
  ds_video_free(v);
  free(v);
  return rc;
}

/* The footage's camera and times into v (cleared first). */
static int footage_camera(const dsSysidFootage* f, dsVideo* v, int* have_times, char* err, size_t errlen) {
  *have_times = 0;
  if (f->camera_file) {
    const int rc = ds_video_read_camera(f->camera_file, "camera", v, err, errlen);
    if (rc) return rc;
    *have_times = v->nframes > 0;
  } else {
    memset(v, 0, sizeof *v);
    snprintf(v->camera_file, sizeof v->camera_file, "%s", "camera");
    for (int i = 0; i < 3; i++) {
      v->position[i] = f->position[i];
      v->look_at[i] = f->look_at[i];
      if (!isfinite(f->position[i]) || !isfinite(f->look_at[i]))
        return ds__puterr(err, errlen, DS_ERR_CONFIG, "camera: %s[%d] is not a finite number",
                          isfinite(f->position[i]) ? "look_at" : "position", i);
    }
    v->fov = f->fov;
    v->fx = f->fx;
    v->fy = f->fy;
    v->cx = f->cx;
    v->cy = f->cy;
    if (f->fx != 0 && !(f->fx > 0 && f->fy > 0 && isfinite(f->fx) && isfinite(f->fy) && isfinite(f->cx) &&
                        isfinite(f->cy)))
      return ds__puterr(err, errlen, DS_ERR_CONFIG,
                        "camera: intrinsics: expected fx > 0, fy > 0 and finite cx, cy (pixels), got %g, %g, %g, %g",
                        f->fx, f->fy, f->cx, f->cy);
    if (!(f->fx > 0) && !(f->fov > 0 && f->fov < 180))
      return ds__puterr(err, errlen, DS_ERR_CONFIG, "camera: fov: expected degrees in (0, 180), got %g", f->fov);
  }
  if (f->times) {
    const int n = f->nframes;
    if (n < 1 || n > DS_VIDEO_MAX_FRAMES)
      return ds__puterr(err, errlen, DS_ERR_CONFIG, "times: expected 1 to %d frame times, got %d", DS_VIDEO_MAX_FRAMES,
                        n);
    for (int i = 0; i < n; i++)
      if (!isfinite(f->times[i]) || f->times[i] < 0 || (i && !(f->times[i] > f->times[i - 1])))
        return ds__puterr(err, errlen, DS_ERR_CONFIG, "times[%d]: expected increasing times >= 0 s, got %g", i,
                          f->times[i]);
    memcpy(v->times, f->times, sizeof(double) * (size_t)n);
    v->nframes = n;
    *have_times = 1;
  }
  return 0;
}

int ds_sysid_footage_video(const dsSysidFootage* f, dsEnvDef* def, dsSysidVideo* out, char* err, size_t errlen) {
  if (!f || !def || !out) return ds__puterr(err, errlen, DS_ERR_INVALID, "sysid footage: NULL argument");
  memset(out, 0, sizeof *out);
  if (!f->frames_dir && !f->rgba) return ds__puterr(err, errlen, DS_ERR_INVALID, "frames: neither a folder nor pixels");
  dsVideo* v = (dsVideo*)calloc(1, sizeof *v);
  if (!v) return ds__puterr(err, errlen, DS_ERR_NOMEM, "out of memory");
  int have_times = 0;
  int rc = footage_camera(f, v, &have_times, err, errlen);
  if (!rc) rc = set_camera(v, def, err, errlen);
  if (!rc && f->frames_dir) {
    rc = ds_video_read_frames(f->frames_dir, "frames", v, err, errlen);
    have_times = 1; /* the camera's, or else the frames' own (read_frames fails without either) */
  } else if (!rc) {
    const int n = f->nframes;
    if (n < 1 || n > DS_VIDEO_MAX_FRAMES || f->width < 1 || f->height < 1)
      rc = ds__puterr(err, errlen, DS_ERR_CONFIG, "frames: expected 1 to %d frames of at least 1 x 1 pixels, got %d of %d x %d",
                      DS_VIDEO_MAX_FRAMES, n, f->width, f->height);
    const size_t bytes = (size_t)n * 4 * (size_t)f->width * (size_t)f->height * sizeof(dsReal);
    if (!rc && have_times && v->nframes != n)
      rc = ds__puterr(err, errlen, DS_ERR_CONFIG, "frames: %d frames, but the camera gives %d frame times", n,
                      v->nframes);
    if (!rc && !(v->rgba = (dsReal*)malloc(bytes))) rc = ds__puterr(err, errlen, DS_ERR_NOMEM, "out of memory");
    if (!rc) {
      memcpy(v->rgba, f->rgba, bytes);
      v->nframes = n;
      v->width = f->width;
      v->height = f->height;
    }
  }
  if (!rc) rc = video_of(v, have_times, def, out, err, errlen);
  ds_video_free(v);
  free(v);
  return rc;
}

int ds_sysid_defs_from_text(const char* name, const char* text, dsEnvDef* def, dsSysidDef* sd, char* err,
                             size_t errlen) {
  if (!name || !text || !def || !sd) return ds__puterr(err, errlen, DS_ERR_INVALID, "sysid config: NULL argument");
  *sd = ds_default_sysid_def();
  dsRunDef rd = ds_default_run_def();
  int rc = ds_env_def_from_text(name, text, def, err, errlen);
  if (!rc) rc = ds__sysid_parse_section(name, text, sd, err, errlen);
  if (!rc) rc = ds_run_def_from_text(name, text, &rd, err, errlen);
  if (!rc) {
    char msg[1024];
    rc = ds_sysid_def_validate(sd, msg, sizeof msg);
    if (rc) ds__puterr(err, errlen, rc, "%s: %s", name, msg);
  }
  sd->seed = rd.seed;
  return rc;
}

/* The video of a config (footage, the config's frames, or none: synthetic). */
static int video_from(const dsSysidDef* sd, const dsSysidFootage* footage, dsEnvDef* def, dsSysidVideo* video,
                         char* err, size_t errlen) {
  memset(video, 0, sizeof *video);
  if (footage) return ds_sysid_footage_video(footage, def, video, err, errlen);
  if (sd->video == DS_SYSID_FRAMES) return ds_sysid_load_video(sd, def, video, err, errlen);
  return 0;
}

int ds_sysid_create_from_text(const char* name, const char* text, int object, const dsSysidFootage* footage,
                              dsSysid** out, char* err, size_t errlen) {
  if (!out) return ds__puterr(err, errlen, DS_ERR_INVALID, "sysid: out is NULL");
  *out = NULL;
  dsEnvDef* def = (dsEnvDef*)malloc(sizeof *def);
  dsSysidDef* sd = (dsSysidDef*)malloc(sizeof *sd);
  dsSysidVideo video;
  memset(&video, 0, sizeof video);
  int rc = def && sd ? 0 : ds__puterr(err, errlen, DS_ERR_NOMEM, "out of memory");
  if (!rc) rc = ds_sysid_defs_from_text(name, text, def, sd, err, errlen);
  if (!rc) rc = video_from(sd, footage, def, &video, err, errlen);
  if (!rc) rc = ds_sysid_create(def, sd, object, video.nframes ? &video : NULL, out, err, errlen);
  ds_sysid_video_free(&video);
  free(def);
  free(sd);
  return rc;
}

void ds_sysid_video_free(dsSysidVideo* v) {
  if (!v) return;
  /* the arrays of ds_sysid_load_video are its own (const only to readers) */
  free((void*)(uintptr_t)v->substep);
  free((void*)(uintptr_t)v->rgba);
  free((void*)(uintptr_t)v->views);
  memset(v, 0, sizeof *v);
}

/* `dsim export RUN.h5 [--episode E] [--frames DIR] [--gif OUT.gif] [--csv OUT.csv]
 * [--camera CAM.json] [--goal GOAL.png] [--overlay goal,ground,time]`: turn a
 * run log into pictures and tables. The log is read in a child process first
 * (cli/files.c). Each output file is written to a uniquely named temporary
 * file beside it and moved into place, so a failure never leaves a
 * half-written file where a good one was; an existing output is replaced
 * only with --force, and the run log itself never. Exported frames describe
 * themselves: DIR/frames.json (times, substeps, size, camera) and a
 * "dsim:frame" text chunk in each PNG; --camera writes the camera file
 * `dsim sysid` reads for footage. Overlays are drawn on the exported copies
 * only. */
#define _POSIX_C_SOURCE 200809L /* fdopen */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "dsim/dsim.h"
#include "dsim/image.h"
#include "dsim/runlog.h"
#include "io/gif.h"
#include "render/overlay.h"

static void usage(FILE* out) {
  fprintf(out,
          "usage: dsim export RUN.h5 [--episode first|best|last] [--frames DIR] [--gif OUT.gif]\n"
          "                          [--fps N] [--csv OUT.csv] [--camera CAM.json] [--goal GOAL.png]\n"
          "                          [--overlay goal,ground,time] [--force]\n"
          "\n"
          "  --episode E   which logged episode to export frames from (default: best; when it\n"
          "                is missing, as in a killed run, the latest one present, said on stderr)\n"
          "  --frames DIR  write the episode's frames as DIR/frame_0000.png ... (RGBA PNG, each with\n"
          "                its time in a \"dsim:frame\" text chunk) and DIR/frames.json (times,\n"
          "                substeps, size, camera)\n"
          "  --gif FILE    write the episode's frames as a looping animated GIF\n"
          "  --fps N       GIF frame rate (default 10)\n"
          "  --csv FILE    write iteration,loss,metric,wall_time,grad_norm per iteration\n"
          "  --camera FILE write the frames' camera file (times, position, look_at, fov: what\n"
          "                dsim sysid reads with video \"frames\")\n"
          "  --goal FILE   write the episode's goal image (PNG)\n"
          "  --overlay L   draw on the exported PNG/GIF frames (not the log): a comma list of\n"
          "                goal (the goal's outline), ground (the line y = 0 under the look-at\n"
          "                point), time (the frame's time)\n"
          "  --force       replace existing output files (never the run log itself)\n");
}

/* --overlay's items */
enum { OV_GOAL = 1, OV_GROUND = 2, OV_TIME = 4 };

typedef struct ExArgs {
  const char *run, *frames, *gif, *csv, *camera, *goal, *episode;
  int fps, force, overlay;
} ExArgs;

/* The frames read from the log, with what they show. */
typedef struct Footage {
  int nf, h, w, has_info;
  uint8_t* rgba;
  dsRunFrameInfo info;
  const char* episode; /* the episode read */
} Footage;

static int write_csv(const char* run, const char* out, int force) {
  char err[1024];
  int n = 0;
  double *loss = NULL, *metric = NULL, *wall = NULL, *gn = NULL;
  int rc = ds_runlog_read_iterations(run, &n, &loss, &metric, &wall, &gn, err, sizeof err);
  if (rc) {
    fprintf(stderr, "dsim export: %s\n", err);
    return ds__cli_exit_code(rc, DS_CLI_RUNLOG);
  }
  char tmp[4400];
  int fd = ds__cli_temp_for("export", out, tmp, sizeof tmp), status = DS_EXIT_FAILURE;
  FILE* fp = fd >= 0 ? fdopen(fd, "w") : NULL;
  if (fd >= 0 && !fp) close(fd);
  if (fp) {
    fprintf(fp, "iteration,loss,metric,wall_time,grad_norm\n");
    for (int i = 0; i < n; i++) fprintf(fp, "%d,%.17g,%.17g,%.17g,%.17g\n", i, loss[i], metric[i], wall[i], gn[i]);
    int ok = !ferror(fp);
    ok = (fclose(fp) == 0) && ok;
    if (!ok) {
      fprintf(stderr, "dsim export: %s: cannot write: %s\n", out, strerror(errno));
      unlink(tmp);
    } else {
      status = ds__cli_commit_temp("export", tmp, out, force);
    }
  } else if (fd >= 0) {
    fprintf(stderr, "dsim export: %s: cannot write: %s\n", out, strerror(errno));
    unlink(tmp);
  }
  ds_runlog_free(loss);
  ds_runlog_free(metric);
  ds_runlog_free(wall);
  ds_runlog_free(gn);
  if (status == DS_EXIT_OK) printf("wrote %s (%d iterations)\n", out, n);
  return status;
}

static int write_gif(const char* out, const uint8_t* rgba, int nf, int h, int w, int fps, int force) {
  char err[1024], tmp[4400];
  int fd = ds__cli_temp_for("export", out, tmp, sizeof tmp);
  if (fd < 0) return DS_EXIT_FAILURE;
  close(fd); /* the GIF writer opens it by name: a name only this process knows */
  int delay = (100 + fps / 2) / fps;
  int rc = ds__gif_write(tmp, rgba, nf, h, w, delay, err, sizeof err);
  if (rc) {
    unlink(tmp);
    fprintf(stderr, "dsim export: %s: cannot write: %s\n", out, err);
    return DS_EXIT_FAILURE;
  }
  int status = ds__cli_commit_temp("export", tmp, out, force);
  if (status == DS_EXIT_OK) printf("wrote %s (%d frames, %d x %d)\n", out, nf, w, h);
  return status;
}

/* DIR/frames.json: what the PNG frames show. */
static int write_frames_json(const char* dir, const Footage* fo, int overlay) {
  char path[4200];
  snprintf(path, sizeof path, "%s/frames.json", dir);
  FILE* fp = fopen(path, "w");
  if (!fp) {
    fprintf(stderr, "dsim export: %s: cannot write: %s\n", path, strerror(errno));
    return DS_EXIT_FAILURE;
  }
  fprintf(fp, "{\n  \"files\": [");
  for (int f = 0; f < fo->nf; f++) fprintf(fp, "%s\"frame_%04d.png\"", f ? ", " : "", f);
  fprintf(fp, "],\n  \"width\": %d,\n  \"height\": %d", fo->w, fo->h);
  if (fo->has_info) {
    fprintf(fp, ",\n  \"times\": [");
    for (int f = 0; f < fo->nf; f++) fprintf(fp, "%s%.17g", f ? ", " : "", fo->info.times[f]);
    fprintf(fp, "],\n  \"substeps\": [");
    for (int f = 0; f < fo->nf; f++) fprintf(fp, "%s%d", f ? ", " : "", fo->info.substeps[f]);
    fprintf(fp, "]");
  }
  if (fo->has_info && fo->info.has_camera) {
    const double *p = fo->info.position, *a = fo->info.look_at;
    fprintf(fp, ",\n  \"camera\": {\"position\": [%.17g, %.17g, %.17g], \"look_at\": [%.17g, %.17g, %.17g], \"fov\": %.17g}",
            p[0], p[1], p[2], a[0], a[1], a[2], fo->info.fov);
  }
  fprintf(fp, ",\n  \"overlays\": \"%s%s%s\"\n}\n", overlay & OV_GOAL ? "goal " : "", overlay & OV_GROUND ? "ground " : "",
          overlay & OV_TIME ? "time" : "");
  const int ok = !ferror(fp) && fclose(fp) == 0;
  if (!ok) fprintf(stderr, "dsim export: %s: cannot write: %s\n", path, strerror(errno));
  return ok ? DS_EXIT_OK : DS_EXIT_FAILURE;
}

/* DIR/frame_0000.png ... one RGBA PNG per frame (with its time in a text
 * chunk when the log has it) and DIR/frames.json; DIR is created if
 * missing. Frames already there are replaced only with force. */
static int export_frames_png(const char* dir, const Footage* fo, const uint8_t* rgba, int overlay, int force) {
  struct stat st;
  if (stat(dir, &st) != 0) {
    if (mkdir(dir, 0777) != 0) {
      fprintf(stderr, "dsim export: %s: cannot create the directory: %s\n", dir, strerror(errno));
      return DS_EXIT_FAILURE;
    }
  } else if (!S_ISDIR(st.st_mode)) {
    fprintf(stderr, "dsim export: %s: exists and is not a directory\n", dir);
    return DS_EXIT_FAILURE;
  }
  char path[4200], err[1024], text[160];
  const int nf = fo->nf, h = fo->h, w = fo->w;
  size_t frame_bytes = (size_t)h * (size_t)w * 4;
  for (int f = 0; f <= nf && !force; f++) {
    if (f < nf)
      snprintf(path, sizeof path, "%s/frame_%04d.png", dir, f);
    else
      snprintf(path, sizeof path, "%s/frames.json", dir);
    if (stat(path, &st) == 0) {
      fprintf(stderr, "dsim export: %s exists: give --force to replace the frames in %s/\n", path, dir);
      return DS_EXIT_USAGE;
    }
  }
  for (int f = 0; f < nf; f++) {
    snprintf(path, sizeof path, "%s/frame_%04d.png", dir, f);
    if (fo->has_info)
      snprintf(text, sizeof text, "{\"frame\": %d, \"substep\": %d, \"time\": %.17g}", f, fo->info.substeps[f],
               fo->info.times[f]);
    if (ds_png_write_text(path, rgba + frame_bytes * (size_t)f, w, h, fo->has_info ? "dsim:frame" : NULL,
                          fo->has_info ? text : NULL, err, sizeof err)) {
      fprintf(stderr, "dsim export: %s\n", err);
      return DS_EXIT_FAILURE;
    }
  }
  int status = write_frames_json(dir, fo, overlay);
  if (status == DS_EXIT_OK) printf("wrote %d frames (%d x %d) and frames.json to %s/\n", nf, w, h, dir);
  return status;
}

/* A small text file through a temporary beside it. */
static int write_text_file(const char* out, const char* text, int force) {
  char tmp[4400];
  int fd = ds__cli_temp_for("export", out, tmp, sizeof tmp), status = DS_EXIT_FAILURE;
  FILE* fp = fd >= 0 ? fdopen(fd, "w") : NULL;
  if (fd >= 0 && !fp) close(fd);
  if (!fp) return DS_EXIT_FAILURE;
  fputs(text, fp);
  const int ok = !ferror(fp) && fclose(fp) == 0;
  if (!ok) {
    fprintf(stderr, "dsim export: %s: cannot write: %s\n", out, strerror(errno));
    unlink(tmp);
  } else {
    status = ds__cli_commit_temp("export", tmp, out, force);
  }
  return status;
}

/* One camera's keys (no braces): position, look_at, and the intrinsics
 * when it had them, else the fov. v: position (3), look_at (3), fov, fx,
 * fy, cx, cy. */
static size_t camera_keys(char* text, size_t cap, const double* v, const char* sep) {
  int n = snprintf(text, cap, "\"position\": [%.17g, %.17g, %.17g],%s\"look_at\": [%.17g, %.17g, %.17g],%s", v[0], v[1],
                   v[2], sep, v[3], v[4], v[5], sep);
  if (v[7] > 0)
    n += snprintf(text + n, cap - (size_t)n, "\"fx\": %.17g, \"fy\": %.17g, \"cx\": %.17g, \"cy\": %.17g", v[7], v[8],
                  v[9], v[10]);
  else
    n += snprintf(text + n, cap - (size_t)n, "\"fov\": %.17g", v[6]);
  return (size_t)n;
}

/* The camera file of the frames: the schema dsim sysid reads (dsim/video.h):
 * one camera, or a run's several views ("views", each with its "frames"
 * folder: view 0's the folder --frames writes, the others' named view1, ...
 * for footage of those views, which the log does not hold). */
static int write_camera(const char* run, const char* out, const char* frames, const Footage* fo, int force) {
  if (!fo->has_info || !fo->info.has_camera) {
    fprintf(stderr, "dsim export: %s: episode %s has no frame times or camera (a log of an older dsim): cannot write %s\n",
            run, fo->episode, out);
    return DS_EXIT_FAILURE;
  }
  const dsRunFrameInfo* in = &fo->info;
  size_t cap = 4096 + 32 * (size_t)fo->nf + 2 * (frames ? strlen(frames) : 0);
  char* text = (char*)malloc(cap);
  if (!text) return DS_EXIT_FAILURE;
  size_t len = (size_t)snprintf(text, cap, "{\n  \"times\": [");
  for (int f = 0; f < fo->nf; f++) len += (size_t)snprintf(text + len, cap - len, "%s%.17g", f ? ", " : "", in->times[f]);
  if (in->nviews > 1) {
    const char* base = frames ? strrchr(frames, '/') : NULL;
    base = base && base[1] ? base + 1 : frames && frames[0] ? frames : "view0";
    len += (size_t)snprintf(text + len, cap - len, "],\n  \"views\": [");
    for (int k = 0; k < in->nviews; k++) {
      len += (size_t)snprintf(text + len, cap - len, "%s\n    {", k ? "," : "");
      len += camera_keys(text + len, cap - len, in->views[k], " ");
      if (k == 0)
        len += (size_t)snprintf(text + len, cap - len, ", \"frames\": \"%s\"}", base);
      else
        len += (size_t)snprintf(text + len, cap - len, ", \"frames\": \"view%d\"}", k);
    }
    snprintf(text + len, cap - len, "\n  ]\n}\n");
  } else {
    double v[11] = {in->position[0], in->position[1], in->position[2], in->look_at[0], in->look_at[1], in->look_at[2],
                    in->fov, in->intr[0], in->intr[1], in->intr[2], in->intr[3]};
    len += (size_t)snprintf(text + len, cap - len, "],\n  ");
    len += camera_keys(text + len, cap - len, v, "\n  ");
    snprintf(text + len, cap - len, "\n}\n");
  }
  const int status = write_text_file(out, text, force);
  free(text);
  if (status == DS_EXIT_OK) printf("wrote %s (camera and %d frame times)\n", out, fo->nf);
  return status;
}

/* The episode's goal image as a PNG (through a temporary beside it). */
static int write_goal(const char* run, const char* out, const char* episode, int force) {
  char err[1024], tmp[4400];
  int h = 0, w = 0;
  uint8_t* goal = NULL;
  int rc = ds_runlog_read_goal(run, episode, &h, &w, &goal, err, sizeof err);
  if (rc) {
    fprintf(stderr, "dsim export: %s\n", err);
    return ds__cli_exit_code(rc, DS_CLI_RUNLOG);
  }
  int fd = ds__cli_temp_for("export", out, tmp, sizeof tmp), status = DS_EXIT_FAILURE;
  if (fd >= 0) {
    close(fd);
    if (ds_png_write(tmp, goal, w, h, err, sizeof err)) {
      fprintf(stderr, "dsim export: %s: cannot write: %s\n", out, err);
      unlink(tmp);
    } else {
      status = ds__cli_commit_temp("export", tmp, out, force);
    }
  }
  ds_runlog_free(goal);
  if (status == DS_EXIT_OK) printf("wrote %s (goal image, %d x %d)\n", out, w, h);
  return status;
}

/* A copy of the frames with the overlays drawn (the log's stay as they are). */
static uint8_t* overlaid(const ExArgs* a, const Footage* fo) {
  const size_t fb = 4 * (size_t)fo->w * (size_t)fo->h;
  uint8_t* out = (uint8_t*)malloc(fb * (size_t)fo->nf);
  if (!out) return NULL;
  memcpy(out, fo->rgba, fb * (size_t)fo->nf);
  uint8_t* goal = NULL;
  int gh = 0, gw = 0;
  char err[1024];
  if ((a->overlay & OV_GOAL) && ds_runlog_read_goal(a->run, fo->episode, &gh, &gw, &goal, err, sizeof err) == DS_OK &&
      (gh != fo->h || gw != fo->w)) {
    ds_runlog_free(goal);
    goal = NULL;
  }
  static const uint8_t red[3] = {255, 0, 0}, ground[3] = {90, 60, 30};
  for (int f = 0; f < fo->nf; f++) {
    uint8_t* img = out + fb * (size_t)f;
    if ((a->overlay & OV_GROUND) && fo->has_info && fo->info.has_camera)
      ds__overlay_ground(img, fo->w, fo->h, fo->info.position, fo->info.look_at, fo->info.fov, ground);
    if (goal) ds__overlay_outline(img, fo->w, fo->h, goal, red);
    if ((a->overlay & OV_TIME) && fo->has_info) ds__overlay_time(img, fo->w, fo->h, fo->info.times[f]);
  }
  ds_runlog_free(goal);
  return out;
}

/* --overlay's comma list; -1 for an unknown item. */
static int parse_overlay(const char* v) {
  int m = 0;
  char buf[256];
  snprintf(buf, sizeof buf, "%s", v);
  for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    if (!strcmp(t, "goal")) m |= OV_GOAL;
    else if (!strcmp(t, "ground")) m |= OV_GROUND;
    else if (!strcmp(t, "time")) m |= OV_TIME;
    else return -1;
  }
  return m ? m : -1;
}

/* Command line -> ExArgs: DS_EXIT_OK to go on, -1 after --help, else an exit code. */
static int parse_args(int argc, char** argv, ExArgs* x) {
  memset(x, 0, sizeof *x);
  x->episode = "best";
  x->fps = 10;
  for (int i = 1; i < argc; i++) {
    const char* a = argv[i];
    if (ds__cli_is_help(a)) {
      usage(stdout);
      return -1;
    } else if (!strcmp(a, "--force")) {
      x->force = 1;
    } else if (!strcmp(a, "--frames") || !strcmp(a, "--gif") || !strcmp(a, "--csv") || !strcmp(a, "--episode") ||
               !strcmp(a, "--fps") || !strcmp(a, "--camera") || !strcmp(a, "--goal") || !strcmp(a, "--overlay")) {
      if (i + 1 >= argc) {
        fprintf(stderr, "dsim export: option '%s' needs a value\n", a);
        return DS_EXIT_USAGE;
      }
      const char* v = argv[++i];
      if (!strcmp(a, "--frames")) x->frames = v;
      else if (!strcmp(a, "--gif")) x->gif = v;
      else if (!strcmp(a, "--csv")) x->csv = v;
      else if (!strcmp(a, "--episode")) x->episode = v;
      else if (!strcmp(a, "--camera")) x->camera = v;
      else if (!strcmp(a, "--goal")) x->goal = v;
      else if (!strcmp(a, "--overlay")) {
        if ((x->overlay = parse_overlay(v)) < 0) {
          fprintf(stderr, "dsim export: --overlay '%s': expected a comma list of goal, ground, time\n", v);
          return DS_EXIT_USAGE;
        }
      } else {
        char* end = NULL;
        long f = strtol(v, &end, 10);
        if (!*v || *end || f < 1 || f > 100) {
          fprintf(stderr, "dsim export: --fps '%s': expected an integer in 1..100\n", v);
          return DS_EXIT_USAGE;
        }
        x->fps = (int)f;
      }
    } else if (a[0] == '-') {
      fprintf(stderr, "dsim export: unknown option '%s'\n", a);
      usage(stderr);
      return DS_EXIT_USAGE;
    } else if (x->run) {
      fprintf(stderr, "dsim export: unexpected argument '%s'\n", a);
      return DS_EXIT_USAGE;
    } else {
      x->run = a;
    }
  }
  return DS_EXIT_OK;
}

/* The episode's frames (the latest present when it is missing) and what they show. */
static int read_footage(const ExArgs* x, Footage* fo) {
  char err[1024];
  static const char* const order[3] = {"last", "best", "first"};
  fo->episode = x->episode;
  int rc = ds_runlog_read_frames(x->run, x->episode, &fo->nf, &fo->h, &fo->w, &fo->rgba, err, sizeof err);
  for (int k = 0; k < 3 && rc == DS_ERR_NOTFOUND; k++) { /* a run killed before recording it */
    if (!strcmp(order[k], x->episode)) continue;
    char err2[1024];
    rc = ds_runlog_read_frames(x->run, order[k], &fo->nf, &fo->h, &fo->w, &fo->rgba, err2, sizeof err2);
    if (rc == DS_OK) {
      fprintf(stderr, "dsim export: %s: no %s episode (the run ended before recording it); exporting the %s episode\n",
              x->run, x->episode, order[k]);
      fo->episode = order[k];
    } else if (rc != DS_ERR_NOTFOUND) {
      snprintf(err, sizeof err, "%s", err2);
    }
  }
  if (rc) {
    fprintf(stderr, "dsim export: %s\n", err);
    return ds__cli_exit_code(rc, DS_CLI_RUNLOG);
  }
  rc = ds_runlog_read_frame_info(x->run, fo->episode, &fo->info, err, sizeof err);
  if (rc && rc != DS_ERR_NOTFOUND) {
    fprintf(stderr, "dsim export: %s\n", err);
    return ds__cli_exit_code(rc, DS_CLI_RUNLOG);
  }
  fo->has_info = rc == DS_OK && fo->info.nframes == fo->nf;
  dsRunSummary sum; /* a killed run's best episode may be older than its best iteration */
  if (!strcmp(fo->episode, "best") && !ds_runlog_read_summary(x->run, &sum, err, sizeof err) &&
      sum.best_episode_iteration >= 0 && sum.best_episode_iteration != sum.best_iteration)
    fprintf(stderr, "dsim export: %s: the best episode is iteration %d; the best logged iteration, %d, was not "
            "recorded before the run stopped\n", x->run, sum.best_episode_iteration, sum.best_iteration);
  return DS_EXIT_OK;
}

/* Frames, GIF and camera file of the episode. */
static int export_footage(const ExArgs* x) {
  Footage fo;
  memset(&fo, 0, sizeof fo);
  int status = read_footage(x, &fo);
  uint8_t* pics = NULL;
  if (status == DS_EXIT_OK && x->overlay && (x->frames || x->gif) && !(pics = overlaid(x, &fo))) {
    fprintf(stderr, "dsim export: out of memory\n");
    status = DS_EXIT_FAILURE;
  }
  const uint8_t* shown = pics ? pics : fo.rgba;
  if (status == DS_EXIT_OK && x->frames) status = export_frames_png(x->frames, &fo, shown, x->overlay, x->force);
  if (status == DS_EXIT_OK && x->gif) status = write_gif(x->gif, shown, fo.nf, fo.h, fo.w, x->fps, x->force);
  if (status == DS_EXIT_OK && x->camera) status = write_camera(x->run, x->camera, x->frames, &fo, x->force);
  free(pics);
  ds_runlog_free(fo.rgba);
  ds_runlog_frame_info_free(&fo.info);
  return status;
}

int ds__cli_export(int argc, char** argv) {
  ExArgs x;
  int rc = parse_args(argc, argv, &x);
  if (rc) return rc < 0 ? DS_EXIT_OK : rc;
  if (!x.run) {
    fprintf(stderr, "dsim export: missing RUN.h5\n");
    usage(stderr);
    return DS_EXIT_USAGE;
  }
  if (strcmp(x.episode, "first") && strcmp(x.episode, "best") && strcmp(x.episode, "last")) {
    fprintf(stderr, "dsim export: --episode '%s': expected first, best or last\n", x.episode);
    return DS_EXIT_USAGE;
  }
  if (!x.frames && !x.gif && !x.csv && !x.camera && !x.goal) {
    fprintf(stderr, "dsim export: nothing to do: give --frames, --gif, --csv, --camera and/or --goal\n");
    return DS_EXIT_USAGE;
  }
  /* The outputs first (nothing is read for a command that would be refused),
   * then the file once, in a child process, the way it will be read. */
  const char* outs[4] = {x.csv, x.gif, x.camera, x.goal};
  for (int k = 0; k < 4; k++) {
    if (!outs[k]) continue;
    if ((rc = ds__cli_check_output("export", outs[k], x.run, x.force))) return rc;
  }
  if (x.frames && ds__cli_same_file(x.frames, x.run)) {
    fprintf(stderr, "dsim export: --frames %s is the run log\n", x.frames);
    return DS_EXIT_USAGE;
  }
  const int footage = x.frames || x.gif || x.camera;
  if ((rc = ds__cli_probe_runlog("export", x.run, footage || x.goal ? x.episode : NULL))) return rc;
  int status = DS_EXIT_OK;
  if (x.csv) status = write_csv(x.run, x.csv, x.force);
  if (status == DS_EXIT_OK && footage) status = export_footage(&x);
  if (status == DS_EXIT_OK && x.goal) status = write_goal(x.run, x.goal, x.episode, x.force);
  return status;
}

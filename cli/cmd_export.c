/* `dsim export RUN.h5 [--episode E] [--frames DIR] [--gif OUT.gif] [--csv OUT.csv]`:
 * turn a run log into pictures and tables. The log is read in a child process
 * first (cli/files.c). Each output file is written to a uniquely named
 * temporary file beside it and moved into place, so a failure never leaves
 * a half-written file where a good one was; an existing output is replaced
 * only with --force, and the run log itself never. */
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

static void usage(FILE* out) {
  fprintf(out,
          "usage: dsim export RUN.h5 [--episode first|best|last] [--frames DIR] [--gif OUT.gif]\n"
          "                          [--fps N] [--csv OUT.csv] [--force]\n"
          "\n"
          "  --episode E   which logged episode to export frames from (default: best; when it\n"
          "                is missing, as in a killed run, the latest one present, said on stderr)\n"
          "  --frames DIR  write the episode's frames as DIR/frame_0000.png ... (RGBA PNG)\n"
          "  --gif FILE    write the episode's frames as a looping animated GIF\n"
          "  --fps N       GIF frame rate (default 10)\n"
          "  --csv FILE    write iteration,loss,metric,wall_time,grad_norm per iteration\n"
          "  --force       replace existing output files (never the run log itself)\n");
}

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

/* DIR/frame_0000.png ... one RGBA PNG per frame; DIR is created if missing.
 * Frames already there are replaced only with force. */
static int export_frames_png(const char* dir, const uint8_t* rgba, int nf, int h, int w, int force) {
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
  char path[4200], err[1024];
  size_t frame_bytes = (size_t)h * (size_t)w * 4;
  for (int f = 0; f < nf && !force; f++) {
    snprintf(path, sizeof path, "%s/frame_%04d.png", dir, f);
    if (stat(path, &st) == 0) {
      fprintf(stderr, "dsim export: %s exists: give --force to replace the frames in %s/\n", path, dir);
      return DS_EXIT_USAGE;
    }
  }
  for (int f = 0; f < nf; f++) {
    snprintf(path, sizeof path, "%s/frame_%04d.png", dir, f);
    if (ds_png_write(path, rgba + frame_bytes * (size_t)f, w, h, err, sizeof err)) {
      fprintf(stderr, "dsim export: %s\n", err);
      return DS_EXIT_FAILURE;
    }
  }
  printf("wrote %d frames (%d x %d) to %s/\n", nf, w, h, dir);
  return DS_EXIT_OK;
}

int ds__cli_export(int argc, char** argv) {
  const char *run = NULL, *frames = NULL, *gif = NULL, *csv = NULL, *episode = "best";
  int fps = 10, force = 0;
  for (int i = 1; i < argc; i++) {
    const char* a = argv[i];
    int has_val = i + 1 < argc;
    if (ds__cli_is_help(a)) {
      usage(stdout);
      return DS_EXIT_OK;
    } else if (!strcmp(a, "--force")) {
      force = 1;
    } else if (!strcmp(a, "--frames") || !strcmp(a, "--gif") || !strcmp(a, "--csv") || !strcmp(a, "--episode") ||
               !strcmp(a, "--fps")) {
      if (!has_val) {
        fprintf(stderr, "dsim export: option '%s' needs a value\n", a);
        return DS_EXIT_USAGE;
      }
      const char* v = argv[++i];
      if (!strcmp(a, "--frames")) frames = v;
      else if (!strcmp(a, "--gif")) gif = v;
      else if (!strcmp(a, "--csv")) csv = v;
      else if (!strcmp(a, "--episode")) episode = v;
      else {
        char* end = NULL;
        long f = strtol(v, &end, 10);
        if (!*v || *end || f < 1 || f > 100) {
          fprintf(stderr, "dsim export: --fps '%s': expected an integer in 1..100\n", v);
          return DS_EXIT_USAGE;
        }
        fps = (int)f;
      }
    } else if (a[0] == '-') {
      fprintf(stderr, "dsim export: unknown option '%s'\n", a);
      usage(stderr);
      return DS_EXIT_USAGE;
    } else if (run) {
      fprintf(stderr, "dsim export: unexpected argument '%s'\n", a);
      return DS_EXIT_USAGE;
    } else {
      run = a;
    }
  }
  if (!run) {
    fprintf(stderr, "dsim export: missing RUN.h5\n");
    usage(stderr);
    return DS_EXIT_USAGE;
  }
  if (strcmp(episode, "first") && strcmp(episode, "best") && strcmp(episode, "last")) {
    fprintf(stderr, "dsim export: --episode '%s': expected first, best or last\n", episode);
    return DS_EXIT_USAGE;
  }
  if (!frames && !gif && !csv) {
    fprintf(stderr, "dsim export: nothing to do: give --frames, --gif and/or --csv\n");
    return DS_EXIT_USAGE;
  }
  /* The outputs first (nothing is read for a command that would be refused),
   * then the file once, in a child process, the way it will be read. */
  const char* outs[2] = {csv, gif};
  for (int k = 0; k < 2; k++) {
    if (!outs[k]) continue;
    int rc = ds__cli_check_output("export", outs[k], run, force);
    if (rc) return rc;
  }
  if (frames && ds__cli_same_file(frames, run)) {
    fprintf(stderr, "dsim export: --frames %s is the run log\n", frames);
    return DS_EXIT_USAGE;
  }
  int rc = ds__cli_probe_runlog("export", run, (frames || gif) ? episode : NULL);
  if (rc) return rc;
  char err[1024];
  int status = DS_EXIT_OK;
  if (csv) status = write_csv(run, csv, force);
  if (status == DS_EXIT_OK && (frames || gif)) {
    int nf = 0, h = 0, w = 0;
    uint8_t* rgba = NULL;
    rc = ds_runlog_read_frames(run, episode, &nf, &h, &w, &rgba, err, sizeof err);
    if (rc == DS_ERR_NOTFOUND) {
      /* a run killed before recording it: the latest episode present */
      static const char* const order[3] = {"last", "best", "first"};
      for (int k = 0; k < 3 && rc == DS_ERR_NOTFOUND; k++) {
        if (!strcmp(order[k], episode)) continue;
        char err2[1024];
        rc = ds_runlog_read_frames(run, order[k], &nf, &h, &w, &rgba, err2, sizeof err2);
        if (rc == DS_OK) {
          fprintf(stderr, "dsim export: %s: no %s episode (the run ended before recording it); exporting the %s episode\n",
                  run, episode, order[k]);
        } else if (rc != DS_ERR_NOTFOUND) {
          snprintf(err, sizeof err, "%s", err2);
        }
      }
    }
    if (rc) {
      fprintf(stderr, "dsim export: %s\n", err);
      return ds__cli_exit_code(rc, DS_CLI_RUNLOG);
    }
    dsRunSummary sum; /* a killed run's best episode may be older than its best iteration */
    if (!strcmp(episode, "best") && !ds_runlog_read_summary(run, &sum, err, sizeof err) &&
        sum.best_episode_iteration >= 0 && sum.best_episode_iteration != sum.best_iteration)
      fprintf(stderr, "dsim export: %s: the best episode is iteration %d; the best logged iteration, %d, was not "
              "recorded before the run stopped\n", run, sum.best_episode_iteration, sum.best_iteration);
    if (frames) status = export_frames_png(frames, rgba, nf, h, w, force);
    if (status == DS_EXIT_OK && gif) status = write_gif(gif, rgba, nf, h, w, fps, force);
    ds_runlog_free(rgba);
  }
  return status;
}

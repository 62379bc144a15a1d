/* Run logs: write then read back, episode replacement and striding, refusal
 * of missing / truncated / non-HDF5 / foreign-HDF5 files, bad arguments. */
#define _GNU_SOURCE /* lstat, symlink, utimensat */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dsim/runlog.h"
#include "tests/dstest.h"
#ifdef DS_HAVE_HDF5
#  include <hdf5.h>
#endif

static char g_dir[2048];

static const char* tmp_path(const char* name) {
  static char buf[4][2300];
  static int k = 0;
  k = (k + 1) % 4;
  snprintf(buf[k], sizeof buf[k], "%s/%s", g_dir, name);
  return buf[k];
}

int main(void) {
#ifndef DS_HAVE_HDF5
  char err[256];
  dsRunLog* log = NULL;
  dsRunLogDef def = ds_default_runlog_def();
  CHECK_INT_EQ(ds_runlog_create("x.h5", &def, &log, err, sizeof err), DS_ERR_UNSUPPORTED);
  CHECK_STR_CONTAINS(err, "--without-hdf5");
  if (dst_failures) return DST_RESULT();
  DST_SKIP("built --without-hdf5");
#else
  const char* bdir = getenv("DS_BUILDDIR");
  snprintf(g_dir, sizeof g_dir, "%s/tests", bdir ? bdir : ".");
  char err[512];
  char path[2400]; /* tmp_path's buffers rotate: keep a copy */
  snprintf(path, sizeof path, "%s", tmp_path("test_runlog_tmp.h5"));

  dsRunLogDef def = ds_default_runlog_def();
  def.config_text = "{\"env\": \"control-fem\"}";
  def.env = "control-fem";
  def.method = "image";
  def.seed = 1234567890123ULL;
  def.threads = 2;
  def.nparams = 3;
  def.substep_stride = 4;
  def.overwrite = 1; /* a previous run's file */
  dsRunLog* log = NULL;
  CHECK_INT_EQ(ds_runlog_create(path, &def, &log, err, sizeof err), DS_OK);
  if (!log) return DST_RESULT();

  /* iterations */
  const double losses[5] = {4.0, 3.0, 1.0, 2.0, 0.5};
  const double metrics[5] = {4.5, 3.5, 0.2, 0.9, 0.3};
  for (int i = 0; i < 5; i++) {
    double p[3] = {i, 2.0 * i, -i};
    dsRunIteration it = {losses[i], metrics[i], 0.5 * (i + 1), 10.0 - i, p};
    CHECK_INT_EQ(ds_runlog_append_iteration(log, &it), DS_OK);
  }
  dsRunIteration noparams = {1, 1, 1, 1, NULL};
  CHECK_INT_EQ(ds_runlog_append_iteration(log, &noparams), DS_ERR_INVALID);
  CHECK_STR_CONTAINS(ds_runlog_last_error(log), "iteration 5: 3 parameters expected");

  /* episodes: T = 10 substeps (stride 4 stores 0, 4, 8, 9), 2 particles, 3 frames of 4 x 5 */
  enum { T = 10, N = 2, F = 3, H = 4, W = 5 };
  static float pos[T * N * 3], vel[T * N * 3], act[2 * 6];
  static uint8_t frames[F * H * W * 4], goal[H * W * 4];
  for (int i = 0; i < T * N * 3; i++) {
    pos[i] = (float)i;
    vel[i] = (float)-i;
  }
  for (int i = 0; i < F * H * W * 4; i++) frames[i] = (uint8_t)(i * 7);
  for (int i = 0; i < H * W * 4; i++) goal[i] = (uint8_t)(255 - i);
  dsEpisodeRecord ep = {0};
  ep.iteration = 0;
  ep.loss = 4.0;
  ep.metric = 4.5;
  ep.dt = 1.0 / 1920;
  ep.control_interval = 32;
  ep.render_interval = 60;
  ep.nsubsteps = T;
  ep.nparticles = N;
  ep.positions = pos;
  ep.velocities = vel;
  ep.nsteps = 2;
  ep.action_dim = 6;
  ep.actions = act;
  ep.nframes = F;
  ep.height = H;
  ep.width = W;
  ep.frames = frames;
  ep.goal = goal;
  CHECK_INT_EQ(ds_runlog_write_episode(log, "first", &ep), DS_OK);
  CHECK_INT_EQ(ds_runlog_write_episode(log, "best", &ep), DS_OK);
  frames[0] = 99;
  ep.iteration = 3; /* a best episode older than the lowest loss (iteration 4): a killed run's */
  CHECK_INT_EQ(ds_runlog_write_episode(log, "best", &ep), DS_OK); /* replaced */
  CHECK_INT_EQ(ds_runlog_write_episode(log, "worst", &ep), DS_ERR_INVALID);
  CHECK_STR_CONTAINS(ds_runlog_last_error(log), "expected first, best or last");
  CHECK_INT_EQ(ds_runlog_close(log, "completed"), DS_OK);

  /* read back */
  dsRunSummary s;
  CHECK_INT_EQ(ds_runlog_read_summary(path, &s, err, sizeof err), DS_OK);
  CHECK_INT_EQ(s.niterations, 5);
  CHECK_INT_EQ(s.nparams, 3);
  CHECK_STR_EQ(s.env, "control-fem");
  CHECK_STR_EQ(s.method, "image");
  CHECK_STR_EQ(s.status, "completed");
  CHECK_STR_EQ(s.version, ds_version_string());
  CHECK(s.seed == 1234567890123ULL);
  CHECK_INT_EQ(s.threads, 2);
  CHECK_INT_EQ(s.best_iteration, 4); /* the lowest loss, whatever the metric */
  CHECK_CLOSE(s.best_loss, 0.5, 0, 0);
  CHECK_CLOSE(s.best_metric, 0.3, 0, 0);
  CHECK_INT_EQ(s.best_episode_iteration, 3); /* which episode is kept as best */
  CHECK_CLOSE(s.first_loss, 4.0, 0, 0);
  CHECK_CLOSE(s.last_loss, 0.5, 0, 0);
  CHECK_CLOSE(s.wall_time, 2.5, 0, 0);
  CHECK_INT_EQ(s.has_episode[0], 1);
  CHECK_INT_EQ(s.has_episode[1], 1);
  CHECK_INT_EQ(s.has_episode[2], 0);

  int n = 0;
  double *loss = NULL, *metric = NULL, *wall = NULL, *gn = NULL;
  CHECK_INT_EQ(ds_runlog_read_iterations(path, &n, &loss, &metric, &wall, &gn, err, sizeof err), DS_OK);
  CHECK_INT_EQ(n, 5);
  for (int i = 0; i < n && loss; i++) {
    CHECK_CLOSE(loss[i], losses[i], 0, 0);
    CHECK_CLOSE(metric[i], metrics[i], 0, 0);
    CHECK_CLOSE(gn[i], 10.0 - i, 0, 0);
  }
  ds_runlog_free(loss);
  ds_runlog_free(metric);
  ds_runlog_free(wall);
  ds_runlog_free(gn);

  int nf = 0, h = 0, w = 0;
  uint8_t* rgba = NULL;
  CHECK_INT_EQ(ds_runlog_read_frames(path, "best", &nf, &h, &w, &rgba, err, sizeof err), DS_OK);
  CHECK_INT_EQ(nf, F);
  CHECK_INT_EQ(h, H);
  CHECK_INT_EQ(w, W);
  if (rgba) CHECK(memcmp(rgba, frames, sizeof frames) == 0);
  ds_runlog_free(rgba);
  rgba = NULL;
  CHECK_INT_EQ(ds_runlog_read_frames(path, "first", &nf, &h, &w, &rgba, err, sizeof err), DS_OK);
  if (rgba) CHECK_INT_EQ(rgba[0], 0); /* the first episode kept its own frames */
  ds_runlog_free(rgba);
  CHECK_INT_EQ(ds_runlog_read_frames(path, "last", &nf, &h, &w, &rgba, err, sizeof err), DS_ERR_NOTFOUND);
  CHECK_STR_CONTAINS(err, "no frames for episode \"last\"");

  char* cfg = NULL;
  CHECK_INT_EQ(ds_runlog_read_config(path, &cfg, err, sizeof err), DS_OK);
  CHECK_STR_EQ(cfg, "{\"env\": \"control-fem\"}");
  ds_runlog_free(cfg);

  /* the strided trajectory: rows 0, 4, 8, 9 with a substep attribute */
  {
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t d = H5Dopen2(f, "/episodes/first/positions", H5P_DEFAULT);
    hid_t sp = H5Dget_space(d);
    hsize_t dims[3];
    CHECK_INT_EQ(H5Sget_simple_extent_dims(sp, dims, NULL), 3);
    CHECK_INT_EQ(dims[0], 4);
    CHECK_INT_EQ(dims[1], N);
    float got[4 * N * 3];
    CHECK(H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, got) >= 0);
    CHECK_CLOSE(got[N * 3 * 1], pos[N * 3 * 4], 0, 0);
    CHECK_CLOSE(got[N * 3 * 3], pos[N * 3 * 9], 0, 0);
    int sub[4] = {0};
    hid_t a = H5Aopen(d, "substep", H5P_DEFAULT);
    CHECK(H5Aread(a, H5T_NATIVE_INT, sub) >= 0);
    CHECK_INT_EQ(sub[3], 9);
    H5Aclose(a);
    H5Sclose(sp);
    H5Dclose(d);
    H5Fclose(f);
  }

  /* bad files: missing, not HDF5, truncated, HDF5 but foreign */
  CHECK_INT_EQ(ds_runlog_read_summary(tmp_path("nonexistent.h5"), &s, err, sizeof err), DS_ERR_IO);
  CHECK_STR_CONTAINS(err, "nonexistent.h5: cannot open: No such file or directory");
  char txt[2400];
  snprintf(txt, sizeof txt, "%s", tmp_path("test_runlog_text.h5"));
  FILE* fp = fopen(txt, "w");
  fputs("this is not an HDF5 file\n", fp);
  fclose(fp);
  CHECK_INT_EQ(ds_runlog_read_summary(txt, &s, err, sizeof err), DS_ERR_FORMAT);
  CHECK_STR_CONTAINS(err, "test_runlog_text.h5: not an HDF5 file (or truncated)");
  {
    const char* tr = tmp_path("test_runlog_trunc.h5");
    FILE* in = fopen(path, "rb");
    FILE* out = fopen(tr, "wb");
    char buf[1500];
    size_t k = fread(buf, 1, sizeof buf, in);
    fwrite(buf, 1, k, out);
    fclose(in);
    fclose(out);
    CHECK_INT_EQ(ds_runlog_read_summary(tr, &s, err, sizeof err), DS_ERR_FORMAT);
    CHECK_STR_CONTAINS(err, "test_runlog_trunc.h5: ");
    remove(tr);
  }
  {
    const char* foreign = tmp_path("test_runlog_foreign.h5");
    hid_t f = H5Fcreate(foreign, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t g = H5Gcreate2(f, "data", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Gclose(g);
    H5Fclose(f);
    CHECK_INT_EQ(ds_runlog_read_summary(foreign, &s, err, sizeof err), DS_ERR_FORMAT);
    CHECK_STR_CONTAINS(err, "an HDF5 file but not a dsim run log");
    remove(foreign);
  }
  remove(txt);

  /* bad definitions and unwritable paths */
  dsRunLogDef bad = ds_default_runlog_def();
  bad.substep_stride = 0;
  CHECK_INT_EQ(ds_runlog_create(tmp_path("x.h5"), &bad, &log, err, sizeof err), DS_ERR_INVALID);
  CHECK_STR_CONTAINS(err, "substep_stride 0 >= 1");
  bad = ds_default_runlog_def();
  CHECK_INT_EQ(ds_runlog_create("/nonexistent-dir/run.h5", &bad, &log, err, sizeof err), DS_ERR_IO);
  CHECK_STR_CONTAINS(err, "/nonexistent-dir/run.h5: cannot create the run log");
  CHECK(log == NULL);
  /* an existing file is kept unless overwrite is set */
  {
    const char* keep = tmp_path("test_runlog_keep.txt");
    FILE* kfp = fopen(keep, "w");
    if (kfp) {
      fputs("keep\n", kfp);
      fclose(kfp);
    }
    dsRunLogDef d2 = ds_default_runlog_def();
    CHECK_INT_EQ(ds_runlog_create(keep, &d2, &log, err, sizeof err), DS_ERR_IO);
    CHECK_STR_CONTAINS(err, "test_runlog_keep.txt: exists; refusing to replace it");
    char line[16] = "";
    kfp = fopen(keep, "r");
    if (kfp) {
      if (!fgets(line, sizeof line, kfp)) line[0] = 0;
      fclose(kfp);
    }
    CHECK_STR_EQ(line, "keep\n");
    d2.overwrite = 1;
    CHECK_INT_EQ(ds_runlog_create(keep, &d2, &log, err, sizeof err), DS_OK);
    CHECK_INT_EQ(ds_runlog_close(log, "completed"), DS_OK);
    log = NULL;
    remove(keep);
  }
  /* commits (io/runlog.c): after every append the path names a complete
   * log another reader opens, with that many iterations */
  {
    const char* cpath = tmp_path("test_runlog_commit.h5");
    dsRunLogDef d3 = ds_default_runlog_def();
    d3.overwrite = 1;
    d3.nparams = 2000; /* a row of 16 KB: one row a chunk */
    double* row = (double*)calloc(2000, sizeof(double));
    CHECK_INT_EQ(ds_runlog_create(cpath, &d3, &log, err, sizeof err), DS_OK);
    for (int i = 0; i < 12 && log && row; i++) {
      row[i] = i;
      dsRunIteration it = {1.0 / (i + 1), 0, 0.1 * i, 1, row};
      CHECK_INT_EQ(ds_runlog_append_iteration(log, &it), DS_OK);
      dsRunSummary rs;
      CHECK_INT_EQ(ds_runlog_read_summary(cpath, &rs, err, sizeof err), DS_OK);
      CHECK_INT_EQ(rs.niterations, i + 1);
      CHECK_STR_EQ(rs.status, "running");
    }
    free(row);
    CHECK_INT_EQ(ds_runlog_close(log, "completed"), DS_OK);
    log = NULL;
    dsRunSummary rs;
    CHECK_INT_EQ(ds_runlog_read_summary(cpath, &rs, err, sizeof err), DS_OK);
    CHECK_STR_EQ(rs.status, "completed");
    remove(cpath);
  }
  /* a killed writer's temporary file: removed by the next writer of that
   * log when older than a minute and unlocked; a recent one is kept */
  {
    const char* lpath = tmp_path("test_runlog_stale.h5");
    char old_tmp[2400], new_tmp[2400];
    snprintf(old_tmp, sizeof old_tmp, "%s/.test_runlog_stale.h5.dsim-999999991.tmp", g_dir);
    snprintf(new_tmp, sizeof new_tmp, "%s/.test_runlog_stale.h5.dsim-999999992.tmp", g_dir);
    FILE* f1 = fopen(old_tmp, "w");
    FILE* f2 = fopen(new_tmp, "w");
    if (f1) fclose(f1);
    if (f2) fclose(f2);
    struct timespec ts[2] = {{0, 0}, {0, 0}};
    ts[0].tv_sec = ts[1].tv_sec = time(NULL) - 3600;
    CHECK(utimensat(AT_FDCWD, old_tmp, ts, 0) == 0);
    dsRunLogDef d4 = ds_default_runlog_def();
    d4.overwrite = 1;
    CHECK_INT_EQ(ds_runlog_create(lpath, &d4, &log, err, sizeof err), DS_OK);
    CHECK_INT_EQ(ds_runlog_close(log, "completed"), DS_OK);
    log = NULL;
    struct stat st;
    CHECK(stat(old_tmp, &st) != 0);
    CHECK(stat(new_tmp, &st) == 0);
    remove(new_tmp);
    /* a symbolic link is written through: the link stays, its target is the log */
    const char* link = tmp_path("test_runlog_link.h5");
    remove(link);
    CHECK(symlink(lpath, link) == 0);
    CHECK_INT_EQ(ds_runlog_create(link, &d4, &log, err, sizeof err), DS_OK);
    CHECK_INT_EQ(ds_runlog_close(log, "linked"), DS_OK);
    log = NULL;
    CHECK(lstat(link, &st) == 0 && S_ISLNK(st.st_mode));
    dsRunSummary rs;
    CHECK_INT_EQ(ds_runlog_read_summary(lpath, &rs, err, sizeof err), DS_OK);
    CHECK_STR_EQ(rs.status, "linked");
    remove(link);
    remove(lpath);
    /* a folder or a FIFO is not a log */
    CHECK_INT_EQ(ds_runlog_create(g_dir, &d4, &log, err, sizeof err), DS_ERR_IO);
    CHECK_STR_CONTAINS(err, "cannot create the run log: Is a directory");
    CHECK(log == NULL);
    const char* fifo = tmp_path("test_runlog_fifo.h5");
    remove(fifo);
    CHECK(mkfifo(fifo, 0600) == 0);
    CHECK_INT_EQ(ds_runlog_create(fifo, &d4, &log, err, sizeof err), DS_ERR_IO);
    CHECK_STR_CONTAINS(err, "cannot create the run log: not a regular file");
    CHECK(log == NULL);
    remove(fifo);
  }
  CHECK_INT_EQ(ds_runlog_close(NULL, "x"), DS_OK);

  remove(path);
  return DST_RESULT();
#endif
}

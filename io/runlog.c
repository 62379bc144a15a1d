/* HDF5 run logs (schema in README.md, "Run log schema").
 *
 * Crash safety: the file is created with the default (oldest compatible)
 * superblock, which carries no "file is open for writing" flag, and every
 * iteration ends with H5Fflush. A run killed between two flushes therefore
 * leaves a file that h5dump, h5py and this reader open, holding every
 * completed iteration; /meta's "status" attribute then still says "running".
 * HDF5's automatic error printing is switched off: the library never
 * prints, errors come back as codes and messages. */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "dsim/runlog.h"
#include "base/internal.h"

dsRunLogDef ds_default_runlog_def(void) {
  dsRunLogDef d;
  memset(&d, 0, sizeof d);
  d.config_text = "{}";
  d.env = "";
  d.method = "";
  d.threads = 1;
  d.substep_stride = 1;
  d.compression = 4;
  return d;
}

void ds_runlog_free(void* p) { ds__free(p); }


#ifndef DS_HAVE_HDF5

struct dsRunLog {
  int unused;
};
int ds_runlog_create(const char* path, const dsRunLogDef* def, dsRunLog** out, char* err, size_t errlen) {
  (void)def;
  *out = NULL;
  return ds__puterr(err, errlen, DS_ERR_UNSUPPORTED, "%s: dsim was built --without-hdf5: no run logs", path);
}
int ds_runlog_append_iteration(dsRunLog* log, const dsRunIteration* it) { return DS_ERR_UNSUPPORTED; }
int ds_runlog_write_episode(dsRunLog* log, const char* which, const dsEpisodeRecord* ep) { return DS_ERR_UNSUPPORTED; }
int ds_runlog_close(dsRunLog* log, const char* status) { return log ? DS_ERR_UNSUPPORTED : DS_OK; }
const char* ds_runlog_last_error(const dsRunLog* log) { return "dsim was built --without-hdf5"; }
int ds_runlog_read_summary(const char* path, dsRunSummary* s, char* err, size_t errlen) {
  return ds__puterr(err, errlen, DS_ERR_UNSUPPORTED, "%s: dsim was built --without-hdf5: cannot read run logs", path);
}
int ds_runlog_read_iterations(const char* path, int* n, double** loss, double** metric, double** wall_time,
                              double** grad_norm, char* err, size_t errlen) {
  return ds__puterr(err, errlen, DS_ERR_UNSUPPORTED, "%s: dsim was built --without-hdf5: cannot read run logs", path);
}
int ds_runlog_read_frames(const char* path, const char* which, int* nframes, int* height, int* width,
                          uint8_t** rgba, char* err, size_t errlen) {
  return ds__puterr(err, errlen, DS_ERR_UNSUPPORTED, "%s: dsim was built --without-hdf5: cannot read run logs", path);
}
int ds_runlog_read_config(const char* path, char** text, char* err, size_t errlen) {
  return ds__puterr(err, errlen, DS_ERR_UNSUPPORTED, "%s: dsim was built --without-hdf5: cannot read run logs", path);
}

#else /* DS_HAVE_HDF5 */

#include <hdf5.h>

static const char* const g_episode_names[3] = {"first", "best", "last"};

struct dsRunLog {
  hid_t file;
  hid_t d_loss, d_metric, d_wall, d_gnorm, d_params;
  int nparams;
  int stride;
  int compression;
  hsize_t n;      /* iterations written */
  char path[1024];
  dsErrBuf eb;
};

static void quiet_hdf5(void) { H5Eset_auto2(H5E_DEFAULT, NULL, NULL); }

/* ---- small writers -------------------------------------------------------- */
/* Fixed-length, NUL-padded UTF-8 string type of len bytes (at least 1), the
 * form h5py, h5dump and MATLAB all read. */
static hid_t utf8_type(size_t len) {
  hid_t t = H5Tcopy(H5T_C_S1);
  if (t < 0) return t;
  H5Tset_size(t, len ? len : 1);
  H5Tset_strpad(t, H5T_STR_NULLPAD);
  H5Tset_cset(t, H5T_CSET_UTF8);
  return t;
}

static herr_t write_str_attr(hid_t loc, const char* name, const char* value) {
  size_t len = strlen(value);
  hid_t t = utf8_type(len), s = H5Screate(H5S_SCALAR), a = -1;
  herr_t rc = -1;
  if (t < 0 || s < 0) goto out;
  if (H5Aexists(loc, name) > 0) H5Adelete(loc, name);
  a = H5Acreate2(loc, name, t, s, H5P_DEFAULT, H5P_DEFAULT);
  if (a < 0) goto out;
  rc = H5Awrite(a, t, len ? value : "");
out:
  if (a >= 0) H5Aclose(a);
  if (s >= 0) H5Sclose(s);
  if (t >= 0) H5Tclose(t);
  return rc;
}

static herr_t write_num_attr(hid_t loc, const char* name, hid_t type, const void* value) {
  hid_t s = H5Screate(H5S_SCALAR);
  if (s < 0) return -1;
  if (H5Aexists(loc, name) > 0) H5Adelete(loc, name);
  hid_t a = H5Acreate2(loc, name, type, s, H5P_DEFAULT, H5P_DEFAULT);
  herr_t rc = a >= 0 ? H5Awrite(a, type, value) : -1;
  if (a >= 0) H5Aclose(a);
  H5Sclose(s);
  return rc;
}

static herr_t write_dbl_attr(hid_t loc, const char* name, double v) {
  return write_num_attr(loc, name, H5T_NATIVE_DOUBLE, &v);
}
static herr_t write_int_attr(hid_t loc, const char* name, int v) {
  return write_num_attr(loc, name, H5T_NATIVE_INT, &v);
}

/* Fixed-length string dataset (scalar). */
static herr_t write_str_dataset(hid_t loc, const char* name, const char* text) {
  size_t len = strlen(text);
  hid_t t = utf8_type(len), s = H5Screate(H5S_SCALAR), d = -1;
  herr_t rc = -1;
  if (t < 0 || s < 0) goto out;
  d = H5Dcreate2(loc, name, t, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  if (d < 0) goto out;
  rc = H5Dwrite(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, len ? text : "");
out:
  if (d >= 0) H5Dclose(d);
  if (s >= 0) H5Sclose(s);
  if (t >= 0) H5Tclose(t);
  return rc;
}

/* Extendable (unlimited first dimension) double dataset of rank 1 or 2. */
static hid_t create_series(hid_t loc, const char* name, int cols, const char* units) {
  hsize_t dims[2] = {0, (hsize_t)cols}, maxd[2] = {H5S_UNLIMITED, (hsize_t)cols};
  hsize_t chunk[2] = {256, (hsize_t)(cols > 0 ? cols : 1)};
  int rank = cols > 0 ? 2 : 1;
  hid_t s = H5Screate_simple(rank, dims, maxd), p = H5Pcreate(H5P_DATASET_CREATE), d = -1;
  if (s >= 0 && p >= 0 && H5Pset_chunk(p, rank, chunk) >= 0)
    d = H5Dcreate2(loc, name, H5T_NATIVE_DOUBLE, s, H5P_DEFAULT, p, H5P_DEFAULT);
  if (d >= 0 && units) write_str_attr(d, "units", units);
  if (p >= 0) H5Pclose(p);
  if (s >= 0) H5Sclose(s);
  return d;
}

/* Write row n (values: cols doubles, or 1 for rank 1) after growing to n+1. */
static herr_t append_row(hid_t d, hsize_t n, int cols, const double* values) {
  int rank = cols > 0 ? 2 : 1;
  hsize_t ext[2] = {n + 1, (hsize_t)cols}, start[2] = {n, 0}, count[2] = {1, (hsize_t)cols};
  if (H5Dset_extent(d, ext) < 0) return -1;
  hid_t fs = H5Dget_space(d), ms = H5Screate_simple(rank, count, NULL);
  herr_t rc = -1;
  if (fs >= 0 && ms >= 0 && H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL) >= 0)
    rc = H5Dwrite(d, H5T_NATIVE_DOUBLE, ms, fs, H5P_DEFAULT, values);
  if (ms >= 0) H5Sclose(ms);
  if (fs >= 0) H5Sclose(fs);
  return rc;
}

/* A fixed-size, optionally compressed dataset; chunk is one leading index. */
static herr_t write_array(hid_t loc, const char* name, hid_t type, int rank, const hsize_t* dims, int level,
                          const void* data, const char* units) {
  hsize_t chunk[4];
  for (int i = 0; i < rank; i++) chunk[i] = dims[i] ? dims[i] : 1;
  chunk[0] = 1;
  hid_t s = H5Screate_simple(rank, dims, NULL), p = H5Pcreate(H5P_DATASET_CREATE), d = -1;
  herr_t rc = -1;
  if (s < 0 || p < 0) goto out;
  if (dims[0] > 0) {
    H5Pset_chunk(p, rank, chunk);
    if (level > 0) {
      H5Pset_shuffle(p);
      H5Pset_deflate(p, (unsigned)level);
    }
  }
  d = H5Dcreate2(loc, name, type, s, H5P_DEFAULT, p, H5P_DEFAULT);
  if (d < 0) goto out;
  rc = dims[0] ? H5Dwrite(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) : 0;
  if (rc >= 0 && units) rc = write_str_attr(d, "units", units);
out:
  if (d >= 0) H5Dclose(d);
  if (p >= 0) H5Pclose(p);
  if (s >= 0) H5Sclose(s);
  return rc;
}

static void iso_now(char* buf, size_t n) {
  time_t t = time(NULL);
  struct tm tmv;
  gmtime_r(&t, &tmv);
  strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tmv);
}

/* ---- writer --------------------------------------------------------------- */
int ds_runlog_create(const char* path, const dsRunLogDef* def, dsRunLog** out, char* err, size_t errlen) {
  *out = NULL;
  if (!def || !path) return ds__puterr(err, errlen, DS_ERR_INVALID, "run log: path and definition are required");
  if (def->nparams < 0 || def->substep_stride < 1 || def->compression < 0 || def->compression > 9)
    return ds__puterr(err, errlen, DS_ERR_INVALID,
                   "%s: bad run log definition (nparams %d >= 0, substep_stride %d >= 1, compression %d in 0..9)",
                   path, def->nparams, def->substep_stride, def->compression);
  quiet_hdf5();
  dsRunLog* log = (dsRunLog*)ds__calloc(1, sizeof *log);
  if (!log) return ds__puterr(err, errlen, DS_ERR_NOMEM, "%s: out of memory", path);
  log->d_loss = log->d_metric = log->d_wall = log->d_gnorm = log->d_params = -1;
  log->nparams = def->nparams;
  log->stride = def->substep_stride;
  log->compression = def->compression;
  snprintf(log->path, sizeof log->path, "%s", path);
  log->file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (log->file < 0) {
    int e = errno;
    ds__free(log);
    return ds__puterr(err, errlen, DS_ERR_IO, "%s: cannot create the run log%s%s", path, e ? ": " : "",
                   e ? strerror(e) : "");
  }
  hid_t meta = H5Gcreate2(log->file, "meta", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  hid_t iters = H5Gcreate2(log->file, "iterations", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  hid_t eps = H5Gcreate2(log->file, "episodes", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  char now[32];
  iso_now(now, sizeof now);
  dsBuildInfo bi;
  ds_build_info(&bi);
  unsigned long long seed = def->seed;
  int ok = meta >= 0 && iters >= 0 && eps >= 0;
  ok = ok && write_str_dataset(log->file, "config", def->config_text ? def->config_text : "{}") >= 0;
  ok = ok && write_str_attr(meta, "format", DS_RUNLOG_FORMAT) >= 0;
  ok = ok && write_str_attr(meta, "dsim_version", ds_version_string()) >= 0;
  ok = ok && write_str_attr(meta, "build_options", bi.options) >= 0;
  ok = ok && write_str_attr(meta, "precision", bi.real_bytes == 8 ? "double" : "single") >= 0;
  ok = ok && write_str_attr(meta, "env", def->env ? def->env : "") >= 0;
  ok = ok && write_str_attr(meta, "method", def->method ? def->method : "") >= 0;
  ok = ok && write_num_attr(meta, "seed", H5T_NATIVE_ULLONG, &seed) >= 0;
  ok = ok && write_int_attr(meta, "threads", def->threads) >= 0;
  ok = ok && write_int_attr(meta, "substep_stride", def->substep_stride) >= 0;
  ok = ok && write_str_attr(meta, "start_time", now) >= 0;
  ok = ok && write_str_attr(meta, "status", "running") >= 0;
  if (ok) {
    log->d_loss = create_series(iters, "loss", 0, "1");
    log->d_metric = create_series(iters, "metric", 0, "task metric (see /meta/env)");
    log->d_wall = create_series(iters, "wall_time", 0, "s");
    log->d_gnorm = create_series(iters, "grad_norm", 0, "1");
    if (def->nparams > 0) log->d_params = create_series(iters, "params", def->nparams, "1");
    ok = log->d_loss >= 0 && log->d_metric >= 0 && log->d_wall >= 0 && log->d_gnorm >= 0 &&
         (def->nparams == 0 || log->d_params >= 0);
  }
  if (meta >= 0) H5Gclose(meta);
  if (iters >= 0) H5Gclose(iters);
  if (eps >= 0) H5Gclose(eps);
  if (ok) ok = H5Fflush(log->file, H5F_SCOPE_GLOBAL) >= 0;
  if (!ok) {
    ds_runlog_close(log, NULL);
    return ds__puterr(err, errlen, DS_ERR_IO, "%s: cannot write the run log header", path);
  }
  *out = log;
  return DS_OK;
}

int ds_runlog_append_iteration(dsRunLog* log, const dsRunIteration* it) {
  if (!log || !it) return DS_ERR_INVALID;
  if (log->nparams > 0 && !it->params)
    return ds__seterr(&log->eb, DS_ERR_INVALID, "%s: iteration %llu: %d parameters expected, got none", log->path,
                      (unsigned long long)log->n, log->nparams);
  int ok = append_row(log->d_loss, log->n, 0, &it->loss) >= 0 && append_row(log->d_metric, log->n, 0, &it->metric) >= 0 &&
           append_row(log->d_wall, log->n, 0, &it->wall_time) >= 0 &&
           append_row(log->d_gnorm, log->n, 0, &it->grad_norm) >= 0 &&
           (log->nparams == 0 || append_row(log->d_params, log->n, log->nparams, it->params) >= 0);
  if (!ok || H5Fflush(log->file, H5F_SCOPE_GLOBAL) < 0)
    return ds__seterr(&log->eb, DS_ERR_IO, "%s: cannot append iteration %llu", log->path, (unsigned long long)log->n);
  log->n++;
  return DS_OK;
}

/* Rows 0, s, 2s, ... and always the last of a T x N x 3 float array. */
static int strided_rows(int T, int stride, int* idx) {
  int k = 0;
  for (int t = 0; t < T; t += stride) idx[k++] = t;
  if (T > 0 && idx[k - 1] != T - 1) idx[k++] = T - 1;
  return k;
}

static int write_traj(dsRunLog* log, hid_t g, const char* name, const float* src, int T, int N, const char* units) {
  int* idx = (int*)ds__malloc(sizeof(int) * ((size_t)T + 1));
  if (!idx) return -1;
  int k = strided_rows(T, log->stride, idx);
  size_t row = (size_t)N * 3;
  float* buf = (float*)ds__malloc(sizeof(float) * row * (size_t)(k ? k : 1));
  int rc = -1;
  if (buf) {
    for (int i = 0; i < k; i++) memcpy(buf + row * (size_t)i, src + row * (size_t)idx[i], sizeof(float) * row);
    hsize_t dims[3] = {(hsize_t)k, (hsize_t)N, 3};
    rc = write_array(g, name, H5T_NATIVE_FLOAT, 3, dims, log->compression, buf, units) >= 0 ? 0 : -1;
    if (rc == 0) {
      hsize_t n = (hsize_t)k;
      hid_t s = H5Screate_simple(1, &n, NULL);
      hid_t d = H5Dopen2(g, name, H5P_DEFAULT);
      hid_t a = (s >= 0 && d >= 0) ? H5Acreate2(d, "substep", H5T_NATIVE_INT, s, H5P_DEFAULT, H5P_DEFAULT) : -1;
      if (a < 0 || H5Awrite(a, H5T_NATIVE_INT, idx) < 0) rc = -1;
      if (a >= 0) H5Aclose(a);
      if (d >= 0) H5Dclose(d);
      if (s >= 0) H5Sclose(s);
    }
  }
  ds__free(buf);
  ds__free(idx);
  return rc;
}

int ds_runlog_write_episode(dsRunLog* log, const char* which, const dsEpisodeRecord* ep) {
  if (!log || !ep || !which) return DS_ERR_INVALID;
  int known = 0;
  for (int i = 0; i < 3; i++) known |= !strcmp(which, g_episode_names[i]);
  if (!known)
    return ds__seterr(&log->eb, DS_ERR_INVALID, "%s: episode name \"%s\": expected first, best or last", log->path, which);
  if ((ep->positions || ep->velocities) && (ep->nsubsteps < 1 || ep->nparticles < 1))
    return ds__seterr(&log->eb, DS_ERR_INVALID, "%s: episode %s: %d substeps x %d particles", log->path, which,
                      ep->nsubsteps, ep->nparticles);
  if ((ep->frames || ep->goal) && (ep->height < 1 || ep->width < 1 || (ep->frames && ep->nframes < 1)))
    return ds__seterr(&log->eb, DS_ERR_INVALID, "%s: episode %s: %d frames of %d x %d", log->path, which, ep->nframes,
                      ep->height, ep->width);
  char gpath[64];
  snprintf(gpath, sizeof gpath, "/episodes/%s", which);
  if (H5Lexists(log->file, gpath, H5P_DEFAULT) > 0) H5Ldelete(log->file, gpath, H5P_DEFAULT);
  hid_t g = H5Gcreate2(log->file, gpath, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  int ok = g >= 0;
  ok = ok && write_int_attr(g, "iteration", ep->iteration) >= 0 && write_dbl_attr(g, "loss", ep->loss) >= 0 &&
       write_dbl_attr(g, "metric", ep->metric) >= 0 && write_dbl_attr(g, "dt", ep->dt) >= 0 &&
       write_str_attr(g, "dt_units", "s") >= 0 && write_int_attr(g, "control_interval", ep->control_interval) >= 0 &&
       write_int_attr(g, "render_interval", ep->render_interval) >= 0 &&
       write_int_attr(g, "substep_stride", log->stride) >= 0 && write_int_attr(g, "nsubsteps", ep->nsubsteps) >= 0;
  if (ok && ep->positions) ok = write_traj(log, g, "positions", ep->positions, ep->nsubsteps, ep->nparticles, "m") == 0;
  if (ok && ep->velocities)
    ok = write_traj(log, g, "velocities", ep->velocities, ep->nsubsteps, ep->nparticles, "m/s") == 0;
  if (ok && ep->actions && ep->nsteps > 0 && ep->action_dim > 0) {
    hsize_t dims[2] = {(hsize_t)ep->nsteps, (hsize_t)ep->action_dim};
    ok = write_array(g, "actions", H5T_NATIVE_FLOAT, 2, dims, log->compression, ep->actions, "1") >= 0;
  }
  if (ok && ep->frames) {
    hsize_t dims[4] = {(hsize_t)ep->nframes, (hsize_t)ep->height, (hsize_t)ep->width, 4};
    ok = write_array(g, "frames", H5T_NATIVE_UINT8, 4, dims, log->compression > 0 ? log->compression : 4, ep->frames,
                     "RGBA 0..255") >= 0;
  }
  if (ok && ep->goal) {
    hsize_t dims[3] = {(hsize_t)ep->height, (hsize_t)ep->width, 4};
    ok = write_array(g, "goal", H5T_NATIVE_UINT8, 3, dims, log->compression > 0 ? log->compression : 4, ep->goal,
                     "RGBA 0..255") >= 0;
  }
  if (g >= 0) H5Gclose(g);
  if (!ok || H5Fflush(log->file, H5F_SCOPE_GLOBAL) < 0)
    return ds__seterr(&log->eb, DS_ERR_IO, "%s: cannot write episode %s", log->path, which);
  return DS_OK;
}

int ds_runlog_close(dsRunLog* log, const char* status) {
  if (!log) return DS_OK;
  int rc = DS_OK;
  if (status && log->file >= 0) {
    hid_t meta = H5Gopen2(log->file, "meta", H5P_DEFAULT);
    char now[32];
    iso_now(now, sizeof now);
    if (meta < 0 || write_str_attr(meta, "status", status) < 0 || write_str_attr(meta, "end_time", now) < 0)
      rc = ds__seterr(&log->eb, DS_ERR_IO, "%s: cannot record the final status", log->path);
    if (meta >= 0) H5Gclose(meta);
  }
  hid_t* ds[] = {&log->d_loss, &log->d_metric, &log->d_wall, &log->d_gnorm, &log->d_params};
  for (size_t i = 0; i < sizeof ds / sizeof ds[0]; i++)
    if (*ds[i] >= 0) H5Dclose(*ds[i]);
  if (log->file >= 0 && H5Fclose(log->file) < 0 && rc == DS_OK) rc = DS_ERR_IO;
  ds__free(log);
  return rc;
}

const char* ds_runlog_last_error(const dsRunLog* log) { return log ? ds__errmsg(&log->eb) : ""; }

/* ---- reader --------------------------------------------------------------- */
/* Open a run log read-only, telling apart a missing file, a file that is not
 * HDF5 (or truncated) and an HDF5 file that is not a dsim run log. */
static int open_run(const char* path, hid_t* file, char* err, size_t errlen) {
  struct stat st;
  quiet_hdf5();
  if (stat(path, &st) != 0) return ds__puterr(err, errlen, DS_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
  if (H5Fis_hdf5(path) <= 0)
    return ds__puterr(err, errlen, DS_ERR_FORMAT, "%s: not an HDF5 file (or truncated)", path);
  hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) return ds__puterr(err, errlen, DS_ERR_FORMAT, "%s: HDF5 file is corrupt or truncated", path);
  char fmt[64] = "";
  hid_t a = H5Aexists_by_name(f, "meta", "format", H5P_DEFAULT) > 0
                ? H5Aopen_by_name(f, "meta", "format", H5P_DEFAULT, H5P_DEFAULT)
                : -1;
  if (a >= 0) {
    hid_t t = H5Aget_type(a);
    size_t n = H5Tget_size(t);
    if (H5Tget_class(t) == H5T_STRING && !H5Tis_variable_str(t) && n < sizeof fmt) {
      H5Aread(a, t, fmt);
      fmt[n] = '\0';
    }
    H5Tclose(t);
    H5Aclose(a);
  }
  if (strcmp(fmt, DS_RUNLOG_FORMAT) != 0) {
    H5Fclose(f);
    return ds__puterr(err, errlen, DS_ERR_FORMAT, "%s: an HDF5 file but not a dsim run log (/meta format is \"%s\", expected \"%s\")",
                   path, fmt, DS_RUNLOG_FORMAT);
  }
  *file = f;
  return DS_OK;
}

static void read_str_attr(hid_t loc, const char* obj, const char* name, char* out, size_t outlen) {
  out[0] = '\0';
  if (H5Aexists_by_name(loc, obj, name, H5P_DEFAULT) <= 0) return;
  hid_t a = H5Aopen_by_name(loc, obj, name, H5P_DEFAULT, H5P_DEFAULT);
  if (a < 0) return;
  hid_t t = H5Aget_type(a);
  size_t n = H5Tget_size(t);
  if (H5Tget_class(t) == H5T_STRING && !H5Tis_variable_str(t)) {
    char* tmp = (char*)ds__malloc(n + 1);
    if (tmp && H5Aread(a, t, tmp) >= 0) {
      tmp[n] = '\0';
      snprintf(out, outlen, "%s", tmp);
    }
    ds__free(tmp);
  }
  H5Tclose(t);
  H5Aclose(a);
}

static int read_num_attr(hid_t loc, const char* obj, const char* name, hid_t type, void* out) {
  if (H5Aexists_by_name(loc, obj, name, H5P_DEFAULT) <= 0) return -1;
  hid_t a = H5Aopen_by_name(loc, obj, name, H5P_DEFAULT, H5P_DEFAULT);
  int rc = (a >= 0 && H5Aread(a, type, out) >= 0) ? 0 : -1;
  if (a >= 0) H5Aclose(a);
  return rc;
}

/* Read a 1-D double series; *n rows. */
static int read_series(hid_t f, const char* name, int* n, double** out) {
  hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
  if (d < 0) return -1;
  hid_t s = H5Dget_space(d);
  hsize_t dims[2] = {0, 0};
  int rank = H5Sget_simple_extent_dims(s, dims, NULL);
  int rc = -1;
  if (rank == 1) {
    double* buf = (double*)ds__malloc(sizeof(double) * (dims[0] ? dims[0] : 1));
    if (buf && (dims[0] == 0 || H5Dread(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) >= 0)) {
      *n = (int)dims[0];
      *out = buf;
      rc = 0;
    } else {
      ds__free(buf);
    }
  }
  H5Sclose(s);
  H5Dclose(d);
  return rc;
}

int ds_runlog_read_iterations(const char* path, int* n, double** loss, double** metric, double** wall_time,
                              double** grad_norm, char* err, size_t errlen) {
  hid_t f;
  int rc = open_run(path, &f, err, errlen);
  if (rc) return rc;
  const char* names[4] = {"/iterations/loss", "/iterations/metric", "/iterations/wall_time", "/iterations/grad_norm"};
  double** outs[4] = {loss, metric, wall_time, grad_norm};
  double* got[4] = {NULL, NULL, NULL, NULL};
  int counts[4] = {0, 0, 0, 0};
  for (int i = 0; i < 4 && rc == DS_OK; i++)
    if (read_series(f, names[i], &counts[i], &got[i]) != 0)
      rc = ds__puterr(err, errlen, DS_ERR_FORMAT, "%s: cannot read %s", path, names[i]);
  /* A run killed mid-iteration may have extended some series and not others:
   * only rows present in all of them are complete. */
  int m = counts[0];
  for (int i = 1; i < 4; i++)
    if (counts[i] < m) m = counts[i];
  for (int i = 0; i < 4; i++) {
    if (rc == DS_OK && outs[i])
      *outs[i] = got[i];
    else
      ds__free(got[i]);
  }
  if (rc == DS_OK) *n = m;
  H5Fclose(f);
  return rc;
}

int ds_runlog_read_summary(const char* path, dsRunSummary* s, char* err, size_t errlen) {
  memset(s, 0, sizeof *s);
  s->best_iteration = -1;
  double *loss = NULL, *metric = NULL, *wall = NULL;
  int n = 0;
  int rc = ds_runlog_read_iterations(path, &n, &loss, &metric, &wall, NULL, err, errlen);
  if (rc) return rc;
  hid_t f;
  rc = open_run(path, &f, err, errlen);
  if (rc == DS_OK) {
    unsigned long long seed = 0;
    read_str_attr(f, "meta", "dsim_version", s->version, sizeof s->version);
    read_str_attr(f, "meta", "env", s->env, sizeof s->env);
    read_str_attr(f, "meta", "method", s->method, sizeof s->method);
    read_str_attr(f, "meta", "status", s->status, sizeof s->status);
    read_str_attr(f, "meta", "start_time", s->start_time, sizeof s->start_time);
    read_num_attr(f, "meta", "seed", H5T_NATIVE_ULLONG, &seed);
    read_num_attr(f, "meta", "threads", H5T_NATIVE_INT, &s->threads);
    s->seed = seed;
    if (H5Lexists(f, "/iterations/params", H5P_DEFAULT) > 0) {
      hid_t d = H5Dopen2(f, "/iterations/params", H5P_DEFAULT);
      hid_t sp = H5Dget_space(d);
      hsize_t dims[2] = {0, 0};
      if (H5Sget_simple_extent_dims(sp, dims, NULL) == 2) s->nparams = (int)dims[1];
      H5Sclose(sp);
      H5Dclose(d);
    }
    if (H5Lexists(f, "/episodes", H5P_DEFAULT) > 0)
      for (int i = 0; i < 3; i++) {
        char gp[32];
        snprintf(gp, sizeof gp, "/episodes/%s", g_episode_names[i]);
        s->has_episode[i] = H5Lexists(f, gp, H5P_DEFAULT) > 0;
      }
    s->niterations = n;
    if (n > 0) {
      s->first_loss = loss[0];
      s->last_loss = loss[n - 1];
      s->first_metric = metric[0];
      s->last_metric = metric[n - 1];
      s->wall_time = wall[n - 1];
      /* The writer knows what "best" means for its task (the walkers'
       * metric is a displacement to bring to a goal, not a cost): take the
       * iteration of the logged best episode, else the lowest metric. */
      int logged = -1;
      if (s->has_episode[1] && read_num_attr(f, "/episodes/best", "iteration", H5T_NATIVE_INT, &logged) == 0 &&
          logged >= 0 && logged < n) {
        s->best_iteration = logged;
      } else {
        s->best_iteration = 0;
        for (int i = 1; i < n; i++)
          if (metric[i] < metric[s->best_iteration]) s->best_iteration = i;
      }
      s->best_loss = loss[s->best_iteration];
      s->best_metric = metric[s->best_iteration];
    }
    H5Fclose(f);
  }
  ds__free(loss);
  ds__free(metric);
  ds__free(wall);
  return rc;
}

int ds_runlog_read_frames(const char* path, const char* which, int* nframes, int* height, int* width,
                          uint8_t** rgba, char* err, size_t errlen) {
  hid_t f;
  int rc = open_run(path, &f, err, errlen);
  if (rc) return rc;
  /* H5Lexists needs every intermediate link to exist: check level by level. */
  const char* levels[3] = {"/episodes", "/episodes/%s", "/episodes/%s/frames"};
  char dp[64] = "";
  for (int i = 0; i < 3; i++) {
    snprintf(dp, sizeof dp, levels[i], which);
    if (H5Lexists(f, dp, H5P_DEFAULT) <= 0) {
      H5Fclose(f);
      return ds__puterr(err, errlen, DS_ERR_NOTFOUND, "%s: no frames for episode \"%s\" (%s is missing)", path, which, dp);
    }
  }
  hid_t d = H5Dopen2(f, dp, H5P_DEFAULT);
  hid_t s = H5Dget_space(d);
  hsize_t dims[4] = {0, 0, 0, 0};
  int rank = H5Sget_simple_extent_dims(s, dims, NULL);
  if (rank != 4 || dims[3] != 4) {
    rc = ds__puterr(err, errlen, DS_ERR_FORMAT, "%s: %s: expected F x H x W x 4 frames", path, dp);
  } else {
    size_t bytes = (size_t)(dims[0] * dims[1] * dims[2] * 4);
    uint8_t* buf = (uint8_t*)ds__malloc(bytes ? bytes : 1);
    if (!buf) {
      rc = ds__puterr(err, errlen, DS_ERR_NOMEM, "%s: out of memory reading %s", path, dp);
    } else if (H5Dread(d, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0) {
      ds__free(buf);
      rc = ds__puterr(err, errlen, DS_ERR_FORMAT, "%s: cannot read %s (corrupt?)", path, dp);
    } else {
      *nframes = (int)dims[0];
      *height = (int)dims[1];
      *width = (int)dims[2];
      *rgba = buf;
    }
  }
  H5Sclose(s);
  H5Dclose(d);
  H5Fclose(f);
  return rc;
}

int ds_runlog_read_config(const char* path, char** text, char* err, size_t errlen) {
  hid_t f;
  int rc = open_run(path, &f, err, errlen);
  if (rc) return rc;
  hid_t d = H5Dopen2(f, "/config", H5P_DEFAULT);
  hid_t t = d >= 0 ? H5Dget_type(d) : -1;
  size_t n = t >= 0 ? H5Tget_size(t) : 0;
  char* buf = (t >= 0 && !H5Tis_variable_str(t)) ? (char*)ds__malloc(n + 1) : NULL;
  if (!buf || H5Dread(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0) {
    ds__free(buf);
    rc = ds__puterr(err, errlen, DS_ERR_FORMAT, "%s: cannot read /config", path);
  } else {
    buf[n] = '\0';
    *text = buf;
  }
  if (t >= 0) H5Tclose(t);
  if (d >= 0) H5Dclose(d);
  H5Fclose(f);
  return rc;
}

#endif /* DS_HAVE_HDF5 */

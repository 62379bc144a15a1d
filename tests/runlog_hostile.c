/* Hostile run logs: a valid log with one object changed to a shape, type,
 * size or link that the schema does not allow, written with the HDF5 API at
 * test time (no binary blobs in the tree).
 *
 *   runlog_hostile            write each case into a temporary directory and
 *                             check that every reader refuses it with
 *                             DS_ERR_FORMAT and a message naming the object
 *                             and what was expected (and reads the allowed
 *                             variants, e.g. variable-length strings)
 *   runlog_hostile --write D  only write the cases into D as CASE.h5 and print
 *                             "CASE<TAB>EXPECTED" per line (the CLI test and
 *                             the fuzz harness's seed corpus use them)
 *
 * Under the sanitizer build, a reader that overflows a buffer on any case
 * fails here rather than passing quietly. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dsim/runlog.h"
#include "tests/dstest.h"
#ifdef DS_HAVE_HDF5
#  include <hdf5.h>

/* ---- a valid log ---------------------------------------------------------- */
static int write_valid(const char* path) {
  char err[512];
  dsRunLogDef def = ds_default_runlog_def();
  def.config_text = "{\"env\": {\"name\": \"walker\"}}";
  def.env = "walker";
  def.method = "image";
  def.seed = 7;
  def.threads = 1;
  def.nparams = 2;
  def.overwrite = 1;
  dsRunLog* log = NULL;
  if (ds_runlog_create(path, &def, &log, err, sizeof err)) {
    fprintf(stderr, "%s\n", err);
    return -1;
  }
  for (int i = 0; i < 3; i++) {
    double p[2] = {i, -i};
    dsRunIteration it = {3.0 - i, 2.0 - i, 0.1 * (i + 1), 1.0, p};
    ds_runlog_append_iteration(log, &it);
  }
  uint8_t frames[2 * 4 * 4 * 4];
  for (size_t i = 0; i < sizeof frames; i++) frames[i] = (uint8_t)(i * 7);
  dsEpisodeRecord ep;
  memset(&ep, 0, sizeof ep);
  ep.iteration = 2;
  ep.dt = 0.01;
  ep.control_interval = ep.render_interval = ep.stride = 1;
  ep.nframes = 2;
  ep.height = ep.width = 4;
  ep.frames = frames;
  ds_runlog_write_episode(log, "first", &ep);
  ds_runlog_write_episode(log, "best", &ep);
  ds_runlog_write_episode(log, "last", &ep);
  return ds_runlog_close(log, "completed");
}

/* ---- mutations ------------------------------------------------------------ */
static hid_t str_type(size_t n, int vlen) {
  hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, vlen ? H5T_VARIABLE : n);
  H5Tset_cset(t, H5T_CSET_UTF8);
  return t;
}

/* Replace attribute name of object obj by one of type t and shape (rank 0:
 * scalar) holding data. */
static void put_attr(hid_t f, const char* obj, const char* name, hid_t t, int rank, hsize_t n, const void* data) {
  hid_t o = H5Oopen(f, obj, H5P_DEFAULT);
  if (H5Aexists(o, name) > 0) H5Adelete(o, name);
  hid_t s = rank ? H5Screate_simple(1, &n, NULL) : H5Screate(H5S_SCALAR);
  hid_t a = H5Acreate2(o, name, t, s, H5P_DEFAULT, H5P_DEFAULT);
  H5Awrite(a, t, data);
  H5Aclose(a);
  H5Sclose(s);
  H5Oclose(o);
}

static void del(hid_t f, const char* p) { H5Ldelete(f, p, H5P_DEFAULT); }

/* A new dataset p of type t, rank/dims, chunked by chunk (NULL: contiguous,
 * unwritten), deflated when level > 0; data written when non-NULL. */
static void put_dataset(hid_t f, const char* p, hid_t t, int rank, const hsize_t* dims, const hsize_t* maxd,
                        const hsize_t* chunk, int level, const void* data) {
  if (H5Lexists(f, p, H5P_DEFAULT) > 0) del(f, p);
  hid_t s = rank ? H5Screate_simple(rank, dims, maxd) : H5Screate(H5S_SCALAR);
  hid_t pl = H5Pcreate(H5P_DATASET_CREATE);
  if (chunk) H5Pset_chunk(pl, rank, chunk);
  if (level > 0) H5Pset_deflate(pl, (unsigned)level);
  hid_t d = H5Dcreate2(f, p, t, s, H5P_DEFAULT, pl, H5P_DEFAULT);
  if (data) H5Dwrite(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, data);
  H5Dclose(d);
  H5Pclose(pl);
  H5Sclose(s);
}

typedef struct Case {
  const char* name;
  const char* expect;  /* in every reader's message ("" : the file is valid) */
  void (*mutate)(hid_t f, const char* dir);
  int readers;         /* bit 0 summary, 1 config, 2 iterations, 3 frames; which must refuse */
} Case;

#define R_SUM 1
#define R_CFG 2
#define R_IT 4
#define R_FR 8
#define R_ALL 15

static void m_format_array(hid_t f, const char* dir) {
  (void)dir;
  char v[3][64] = {"dsim-run-1", "dsim-run-1", "dsim-run-1"};
  hid_t t = str_type(64, 0);
  put_attr(f, "/meta", "format", t, 1, 3, v);
  H5Tclose(t);
}
static void m_format_long(hid_t f, const char* dir) {
  (void)dir;
  char v[5000];
  memset(v, 'x', sizeof v);
  hid_t t = str_type(sizeof v, 0);
  put_attr(f, "/meta", "format", t, 0, 1, v);
  H5Tclose(t);
}
static void m_env_array(hid_t f, const char* dir) {
  (void)dir;
  char v[4][100];
  for (int i = 0; i < 4; i++) memset(v[i], 'e', sizeof v[i]);
  hid_t t = str_type(100, 0);
  put_attr(f, "/meta", "env", t, 1, 4, v);
  H5Tclose(t);
}
static void m_env_vlen_array(hid_t f, const char* dir) {
  (void)dir;
  const char* v[3] = {"walker", "control-fem", "x"};
  hid_t t = str_type(0, 1);
  put_attr(f, "/meta", "env", t, 1, 3, v);
  H5Tclose(t);
}
static void m_env_int(hid_t f, const char* dir) {
  (void)dir;
  int v = 5;
  put_attr(f, "/meta", "env", H5T_NATIVE_INT, 0, 1, &v);
}
static void m_env_vlen_ok(hid_t f, const char* dir) {
  (void)dir;
  const char* v = "walker";
  hid_t t = str_type(0, 1);
  put_attr(f, "/meta", "env", t, 0, 1, &v);
  H5Tclose(t);
}
static void m_seed_array(hid_t f, const char* dir) {
  (void)dir;
  unsigned long long v[4] = {1, 2, 3, 4};
  put_attr(f, "/meta", "seed", H5T_NATIVE_ULLONG, 1, 4, v);
}
static void m_threads_array(hid_t f, const char* dir) {
  (void)dir;
  int v[8] = {0};
  put_attr(f, "/meta", "threads", H5T_NATIVE_INT, 1, 8, v);
}
static void m_threads_float(hid_t f, const char* dir) {
  (void)dir;
  double v = 2.5;
  put_attr(f, "/meta", "threads", H5T_NATIVE_DOUBLE, 0, 1, &v);
}
static void m_threads_negative(hid_t f, const char* dir) {
  (void)dir;
  int v = -5;
  put_attr(f, "/meta", "threads", H5T_NATIVE_INT, 0, 1, &v);
}
static void m_goal_array(hid_t f, const char* dir) {
  (void)dir;
  double v[2] = {1, 2};
  put_attr(f, "/meta", "metric_goal", H5T_NATIVE_DOUBLE, 1, 2, v);
}
static void m_goal_string(hid_t f, const char* dir) {
  (void)dir;
  char v[8] = "two";
  hid_t t = str_type(8, 0);
  put_attr(f, "/meta", "metric_goal", t, 0, 1, v);
  H5Tclose(t);
}
static void m_best_iteration_array(hid_t f, const char* dir) {
  (void)dir;
  int v[16] = {0};
  put_attr(f, "/episodes/best", "iteration", H5T_NATIVE_INT, 1, 16, v);
}
static void m_config_array(hid_t f, const char* dir) {
  (void)dir;
  char v[3][32] = {"{}", "{}", "{}"};
  hsize_t n = 3;
  hid_t t = str_type(32, 0);
  put_dataset(f, "/config", t, 1, &n, NULL, NULL, 0, v);
  H5Tclose(t);
}
static void m_config_int(hid_t f, const char* dir) {
  (void)dir;
  int v[100] = {0};
  hsize_t n = 100;
  put_dataset(f, "/config", H5T_NATIVE_INT, 1, &n, NULL, NULL, 0, v);
}
static void m_config_group(hid_t f, const char* dir) {
  (void)dir;
  del(f, "/config");
  H5Gclose(H5Gcreate2(f, "/config", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
}
static void m_config_vlen_ok(hid_t f, const char* dir) {
  (void)dir;
  const char* v = "{\"env\": {\"name\": \"walker\"}}";
  hid_t t = str_type(0, 1);
  put_dataset(f, "/config", t, 0, NULL, NULL, NULL, 0, &v);
  H5Tclose(t);
}
static void m_loss_2d(hid_t f, const char* dir) {
  (void)dir;
  double v[6] = {0};
  hsize_t d[2] = {3, 2};
  put_dataset(f, "/iterations/loss", H5T_NATIVE_DOUBLE, 2, d, NULL, NULL, 0, v);
}
static void m_loss_int(hid_t f, const char* dir) {
  (void)dir;
  int v[3] = {0};
  hsize_t d[1] = {3};
  put_dataset(f, "/iterations/loss", H5T_NATIVE_INT, 1, d, NULL, NULL, 0, v);
}
/* 2^29 rows declared, nothing written: 4 GiB to allocate from a tiny file */
static void m_loss_huge(hid_t f, const char* dir) {
  (void)dir;
  hsize_t d[1] = {(hsize_t)1 << 29}, mx[1] = {H5S_UNLIMITED}, c[1] = {256};
  put_dataset(f, "/iterations/loss", H5T_NATIVE_DOUBLE, 1, d, mx, c, 4, NULL);
}
static void m_loss_rows_past_bound(hid_t f, const char* dir) {
  (void)dir;
  hsize_t d[1] = {(hsize_t)1 << 40}, mx[1] = {H5S_UNLIMITED}, c[1] = {256};
  put_dataset(f, "/iterations/loss", H5T_NATIVE_DOUBLE, 1, d, mx, c, 0, NULL);
}
static void m_loss_filter(hid_t f, const char* dir) {
  (void)dir;
  del(f, "/iterations/loss");
  hsize_t d[1] = {3}, c[1] = {3};
  double v[3] = {1, 2, 3};
  hid_t s = H5Screate_simple(1, d, NULL), pl = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_chunk(pl, 1, c);
  H5Pset_scaleoffset(pl, H5Z_SO_FLOAT_DSCALE, 2);
  hid_t ds = H5Dcreate2(f, "/iterations/loss", H5T_NATIVE_DOUBLE, s, H5P_DEFAULT, pl, H5P_DEFAULT);
  H5Dwrite(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v);
  H5Dclose(ds);
  H5Pclose(pl);
  H5Sclose(s);
}
static void m_loss_external_storage(hid_t f, const char* dir) {
  char ext[2300];
  snprintf(ext, sizeof ext, "%s/external_storage.bin", dir);
  FILE* fp = fopen(ext, "wb");
  double v[3] = {1, 2, 3};
  if (fp) {
    fwrite(v, sizeof v, 1, fp);
    fclose(fp);
  }
  del(f, "/iterations/loss");
  hsize_t d[1] = {3};
  hid_t s = H5Screate_simple(1, d, NULL), pl = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_external(pl, ext, 0, sizeof v);
  hid_t ds = H5Dcreate2(f, "/iterations/loss", H5T_NATIVE_DOUBLE, s, H5P_DEFAULT, pl, H5P_DEFAULT);
  H5Dclose(ds);
  H5Pclose(pl);
  H5Sclose(s);
}
static void m_loss_external_link(hid_t f, const char* dir) {
  char other[2300];
  snprintf(other, sizeof other, "%s/external_target.h5", dir);
  hid_t g = H5Fcreate(other, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  double v[3] = {1, 2, 3};
  hsize_t d[1] = {3};
  put_dataset(g, "/loss", H5T_NATIVE_DOUBLE, 1, d, NULL, NULL, 0, v);
  H5Fclose(g);
  del(f, "/iterations/loss");
  H5Lcreate_external(other, "/loss", f, "/iterations/loss", H5P_DEFAULT, H5P_DEFAULT);
}
static void m_meta_soft_link(hid_t f, const char* dir) {
  (void)dir;
  H5Lmove(f, "/meta", f, "/meta_real", H5P_DEFAULT, H5P_DEFAULT);
  H5Lcreate_soft("/meta_real", f, "/meta", H5P_DEFAULT, H5P_DEFAULT);
}
static void m_meta_dataset(hid_t f, const char* dir) {
  (void)dir;
  del(f, "/meta");
  int v = 1;
  put_dataset(f, "/meta", H5T_NATIVE_INT, 0, NULL, NULL, NULL, 0, &v);
}
static void m_params_cols(hid_t f, const char* dir) {
  (void)dir;
  hsize_t d[2] = {3, (hsize_t)3 << 30}, c[2] = {1, 1024};
  put_dataset(f, "/iterations/params", H5T_NATIVE_DOUBLE, 2, d, NULL, c, 0, NULL);
}
static void m_params_1d(hid_t f, const char* dir) {
  (void)dir;
  double v[3] = {0};
  hsize_t d[1] = {3};
  put_dataset(f, "/iterations/params", H5T_NATIVE_DOUBLE, 1, d, NULL, NULL, 0, v);
}
static void m_best_dataset(hid_t f, const char* dir) {
  (void)dir;
  int v = 1;
  del(f, "/episodes/best");
  put_dataset(f, "/episodes/best", H5T_NATIVE_INT, 0, NULL, NULL, NULL, 0, &v);
}
/* F x H x W x 4 whose byte count wraps 32 bits */
static void m_frames_wrap(hid_t f, const char* dir) {
  (void)dir;
  hsize_t d[4] = {(hsize_t)1 << 29, 2, 2, 4}, c[4] = {1, 2, 2, 4};
  put_dataset(f, "/episodes/best/frames", H5T_NATIVE_UINT8, 4, d, NULL, c, 4, NULL);
}
/* 2^38 bytes declared: more than any machine here */
static void m_frames_huge(hid_t f, const char* dir) {
  (void)dir;
  hsize_t d[4] = {65536, 1024, 1024, 4}, c[4] = {1, 1024, 1024, 4};
  put_dataset(f, "/episodes/best/frames", H5T_NATIVE_UINT8, 4, d, NULL, c, 4, NULL);
}
/* 64 MiB declared, compressed, nothing written */
static void m_frames_unwritten(hid_t f, const char* dir) {
  (void)dir;
  hsize_t d[4] = {64, 512, 512, 4}, c[4] = {1, 512, 512, 4};
  put_dataset(f, "/episodes/best/frames", H5T_NATIVE_UINT8, 4, d, NULL, c, 4, NULL);
}
/* contiguous, declared but never written */
static void m_frames_contiguous_empty(hid_t f, const char* dir) {
  (void)dir;
  hsize_t d[4] = {16, 64, 64, 4};
  put_dataset(f, "/episodes/best/frames", H5T_NATIVE_UINT8, 4, d, NULL, NULL, 0, NULL);
}
static void m_frames_rank3(hid_t f, const char* dir) {
  (void)dir;
  uint8_t v[2 * 4 * 4] = {0};
  hsize_t d[3] = {2, 4, 4};
  put_dataset(f, "/episodes/best/frames", H5T_NATIVE_UINT8, 3, d, NULL, NULL, 0, v);
}
static void m_frames_float(hid_t f, const char* dir) {
  (void)dir;
  float v[2 * 4 * 4 * 4] = {0};
  hsize_t d[4] = {2, 4, 4, 4};
  put_dataset(f, "/episodes/best/frames", H5T_NATIVE_FLOAT, 4, d, NULL, NULL, 0, v);
}
static void m_frames_rgb(hid_t f, const char* dir) {
  (void)dir;
  uint8_t v[2 * 4 * 4 * 3] = {0};
  hsize_t d[4] = {2, 4, 4, 3};
  put_dataset(f, "/episodes/best/frames", H5T_NATIVE_UINT8, 4, d, NULL, NULL, 0, v);
}
static void m_frames_strings(hid_t f, const char* dir) {
  (void)dir;
  char v[2 * 4 * 4 * 4][8];
  memset(v, 'a', sizeof v);
  hsize_t d[4] = {2, 4, 4, 4};
  hid_t t = str_type(8, 0);
  put_dataset(f, "/episodes/best/frames", t, 4, d, NULL, NULL, 0, v);
  H5Tclose(t);
}

static const Case g_cases[] = {
    {"format_array", "/meta attribute \"format\": expected a scalar string, found a rank-1 array (3) of strings",
     m_format_array, R_ALL},
    {"format_long", "/meta attribute \"format\": a string of 5000 bytes, expected 1 to 4096", m_format_long, R_ALL},
    {"env_array", "/meta attribute \"env\": expected a scalar string, found a rank-1 array (4)", m_env_array, R_SUM},
    {"env_vlen_array", "/meta attribute \"env\": expected a scalar string, found a rank-1 array (3)", m_env_vlen_array,
     R_SUM},
    {"env_int", "/meta attribute \"env\": expected a string, found integer data", m_env_int, R_SUM},
    {"env_vlen_ok", "", m_env_vlen_ok, 0},
    {"seed_array", "/meta attribute \"seed\": expected a scalar integer, found a rank-1 array (4)", m_seed_array, R_SUM},
    {"threads_array", "/meta attribute \"threads\": expected a scalar integer, found a rank-1 array (8)",
     m_threads_array, R_SUM},
    {"threads_float", "/meta attribute \"threads\": expected an integer, found floating-point data", m_threads_float,
     R_SUM},
    {"threads_negative", "/meta attribute \"threads\": -5 is out of range (expected 0 to 1048576)", m_threads_negative,
     R_SUM},
    {"metric_goal_array", "/meta attribute \"metric_goal\": expected a scalar number, found a rank-1 array (2)",
     m_goal_array, R_SUM},
    {"metric_goal_string", "/meta attribute \"metric_goal\": expected a floating-point number, found string data",
     m_goal_string, R_SUM},
    {"best_iteration_array", "/episodes/best attribute \"iteration\": expected a scalar integer, found a rank-1 array (16)",
     m_best_iteration_array, R_SUM},
    {"config_array", "/config: expected a scalar string, found a rank-1 array (3) of strings", m_config_array, R_CFG},
    {"config_int", "/config: expected a string, found integer data", m_config_int, R_CFG},
    {"config_group", "/config: expected a dataset, found a group", m_config_group, R_CFG},
    {"config_vlen_ok", "", m_config_vlen_ok, 0},
    {"loss_2d", "/iterations/loss: expected a rank-1 array, found a rank-2 array (3 x 2)", m_loss_2d, R_SUM | R_IT},
    {"loss_int", "/iterations/loss: expected floating-point data, found integer", m_loss_int, R_SUM | R_IT},
    {"loss_huge", "/iterations/loss: holds 0 of its 2097152 chunks (truncated or corrupt)", m_loss_huge, R_SUM | R_IT},
    {"loss_rows_past_bound", "/iterations/loss: dimension 0 is 1099511627776, more than a run log holds",
     m_loss_rows_past_bound, R_SUM | R_IT},
    {"loss_filter", "/iterations/loss: uses filter 6; dsim reads deflate, shuffle and fletcher32 only", m_loss_filter,
     R_SUM | R_IT},
    {"loss_external_storage", "/iterations/loss: its data is stored in external files", m_loss_external_storage,
     R_SUM | R_IT},
    {"loss_external_link", "/iterations/loss: is an external link; a dsim run log holds hard links only",
     m_loss_external_link, R_SUM | R_IT},
    {"meta_soft_link", "/meta: is a soft link; a dsim run log holds hard links only", m_meta_soft_link, R_ALL},
    {"meta_dataset", "/meta: expected a group, found a dataset", m_meta_dataset, R_ALL},
    {"params_cols", "/iterations/params: 3221225472 parameters per iteration, expected 1 to 16777216", m_params_cols,
     R_SUM},
    {"params_1d", "/iterations/params: expected a rank-2 array, found a rank-1 array (3)", m_params_1d, R_SUM},
    {"best_dataset", "/episodes/best: expected a group, found a dataset", m_best_dataset, R_SUM | R_FR},
    {"frames_wrap", "/episodes/best/frames: holds 0 of its 536870912 chunks (truncated or corrupt)", m_frames_wrap,
     R_FR},
    {"frames_huge", "/episodes/best/frames: reading it needs 256 GiB, more than dsim may use", m_frames_huge, R_FR},
    {"frames_unwritten", "/episodes/best/frames: holds 0 of its 64 chunks (truncated or corrupt)", m_frames_unwritten,
     R_FR},
    {"frames_contiguous_empty",
     "/episodes/best/frames: declares 262144 elements but the file holds 0 bytes of them (truncated or corrupt)",
     m_frames_contiguous_empty, R_FR},
    {"frames_rank3", "/episodes/best/frames: expected a rank-4 array, found a rank-3 array (2 x 4 x 4)", m_frames_rank3,
     R_FR},
    {"frames_float", "/episodes/best/frames: expected integer data, found floating-point", m_frames_float, R_FR},
    {"frames_rgb", "/episodes/best/frames: expected F x H x W x 4 RGBA frames", m_frames_rgb, R_FR},
    {"frames_strings", "/episodes/best/frames: expected integer data, found string", m_frames_strings, R_FR},
};
#define NCASES (int)(sizeof g_cases / sizeof g_cases[0])

static int write_case(const char* dir, const Case* c, char* path, size_t n) {
  snprintf(path, n, "%s/%s.h5", dir, c->name);
  if (write_valid(path)) return -1;
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
  hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
  if (f < 0) return -1;
  c->mutate(f, dir);
  return H5Fclose(f) < 0 ? -1 : 0;
}

/* Every reader on path: the ones in c->readers refuse it naming the object;
 * the others succeed. */
static void check_case(const Case* c, const char* path) {
  char err[1024];
  dsRunSummary s;
  char* text = NULL;
  int n = 0, nf = 0, h = 0, w = 0;
  double *l = NULL, *m = NULL, *wt = NULL, *g = NULL;
  uint8_t* rgba = NULL;
  for (int k = 0; k < 4; k++) {
    err[0] = '\0';
    int rc = k == 0   ? ds_runlog_read_summary(path, &s, err, sizeof err)
             : k == 1 ? ds_runlog_read_config(path, &text, err, sizeof err)
             : k == 2 ? ds_runlog_read_iterations(path, &n, &l, &m, &wt, &g, err, sizeof err)
                      : ds_runlog_read_frames(path, "best", &nf, &h, &w, &rgba, err, sizeof err);
    static const char* const names[4] = {"summary", "config", "iterations", "frames"};
    if (c->readers & (1 << k)) {
      if (rc != DS_ERR_FORMAT) DST_FAIL_AT("%s: read_%s: expected DS_ERR_FORMAT, got %d (%s)", c->name, names[k], rc, err);
      if (!strstr(err, c->expect)) DST_FAIL_AT("%s: read_%s: message \"%s\" lacks \"%s\"", c->name, names[k], err, c->expect);
      if (!strstr(err, path)) DST_FAIL_AT("%s: read_%s: message \"%s\" does not name the file", c->name, names[k], err);
    } else if (rc != DS_OK) {
      DST_FAIL_AT("%s: read_%s: expected success, got %d (%s)", c->name, names[k], rc, err);
    }
    dst_checks++;
  }
  if (!strcmp(c->name, "env_vlen_ok")) CHECK_STR_EQ(s.env, "walker");
  if (!strcmp(c->name, "config_vlen_ok")) CHECK_STR_EQ(text, "{\"env\": {\"name\": \"walker\"}}");
  ds_runlog_free(text);
  ds_runlog_free(l);
  ds_runlog_free(m);
  ds_runlog_free(wt);
  ds_runlog_free(g);
  ds_runlog_free(rgba);
}

int main(int argc, char** argv) {
  if (argc == 3 && !strcmp(argv[1], "--write")) {
    char path[4096];
    snprintf(path, sizeof path, "%s/valid.h5", argv[2]);
    if (write_valid(path)) return 1;
    printf("valid\t\n");
    for (int i = 0; i < NCASES; i++) {
      if (write_case(argv[2], &g_cases[i], path, sizeof path)) {
        fprintf(stderr, "%s: cannot write\n", g_cases[i].name);
        return 1;
      }
      printf("%s\t%s\n", g_cases[i].name, g_cases[i].expect);
    }
    return 0;
  }
  const char* bdir = getenv("DS_BUILDDIR");
  char dir[2048];
  snprintf(dir, sizeof dir, "%s/tests/hostile.XXXXXX", bdir ? bdir : ".");
  if (!mkdtemp(dir)) {
    perror(dir);
    return 99;
  }
  char path[4096];
  for (int i = 0; i < NCASES; i++) {
    if (write_case(dir, &g_cases[i], path, sizeof path)) {
      DST_FAIL_AT("%s: cannot write the case", g_cases[i].name);
      continue;
    }
    check_case(&g_cases[i], path);
    remove(path);
  }
  snprintf(path, sizeof path, "%s/external_storage.bin", dir);
  remove(path);
  snprintf(path, sizeof path, "%s/external_target.h5", dir);
  remove(path);
  rmdir(dir);
  printf("%d hostile run logs\n", NCASES);
  return DST_RESULT();
}
#else
int main(void) { DST_SKIP("built --without-hdf5"); }
#endif

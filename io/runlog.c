/* HDF5 run logs (schema in docs/cli.md, "Run logs (HDF5)"; what they
 * guarantee in docs/reliability.md).
 *
 * Crash safety by whole-file commits: the writer builds the log in memory
 * (libhdf5's core driver, no backing store) and every call that changes it
 * (create, each iteration, each episode, the final status) ends with a
 * commit: the file image is written to a temporary file beside the log
 * (".NAME.dsim-PID.tmp") and renamed over it. rename(2) replaces the name
 * atomically, so the path always names a complete log written by one
 * commit: a run killed at any instant (during a commit too) leaves the log
 * of its last commit, holding every completed iteration, which h5dump,
 * h5py and this reader open; /meta's "status" then still says "running".
 * (libhdf5 writing its metadata in place, in an order of its own, made an
 * in-place flush unsafe: a kill during it could leave the file shorter
 * than the end of allocation its superblock records, refused as
 * truncated.) A commit costs one write of the image (the log's size) and
 * a rename; the image is kept small (series chunks of at most
 * RL_CHUNK_BYTES).
 *
 * A full disk (or RLIMIT_FSIZE): the commit's write fails, the temporary
 * file is removed, the log keeps its last commit, and the in-memory file
 * is unharmed, so the final status can still be attempted and the file
 * closes cleanly. A write past RLIMIT_FSIZE is refused before it is made
 * (EFBIG), so that a caller who did not ignore SIGXFSZ is not killed.
 *
 * One writer per log: the writer holds an open-file-description lock
 * (F_OFD_SETLK) on the file the path names, from before its first commit
 * to its close; each commit locks the new file before renaming it into
 * place and releases the old one after. A second writer, even with
 * overwrite, finds the lock and is refused without touching the log.
 * HDF5's automatic error printing is switched off: the library never
 * prints, errors come back as codes and messages. */
#define _GNU_SOURCE /* F_OFD_SETLK */
#include "config.h"

#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "dsim/runlog.h"
#include "base/internal.h"
#include "io/runlog_internal.h"

dsRunLogDef ds_default_runlog_def(void) {
  dsRunLogDef d;
  memset(&d, 0, sizeof d);
  d.config_text = "{}";
  d.env = "";
  d.method = "";
  d.threads = 1;
  d.substep_stride = 1;
  d.compression = 1;
  return d;
}

void ds_runlog_free(void* p) { ds__free(p); }

/* The fuzz harness's memory image (see io/runlog_internal.h); NULL: files. */
static const void* g_image;
static size_t g_image_len;

void ds__runlog_read_image(const void* image, size_t len) {
  g_image = image;
  g_image_len = image ? len : 0;
}


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
int ds_runlog_read_goal(const char* path, const char* which, int* height, int* width, uint8_t** rgba, char* err,
                        size_t errlen) {
  (void)which, (void)height, (void)width, (void)rgba;
  return ds__puterr(err, errlen, DS_ERR_UNSUPPORTED, "%s: dsim was built --without-hdf5: cannot read run logs", path);
}
int ds_runlog_read_frame_info(const char* path, const char* which, dsRunFrameInfo* fi, char* err, size_t errlen) {
  (void)which;
  if (fi) memset(fi, 0, sizeof *fi);
  return ds__puterr(err, errlen, DS_ERR_UNSUPPORTED, "%s: dsim was built --without-hdf5: cannot read run logs", path);
}
void ds_runlog_frame_info_free(dsRunFrameInfo* fi) {
  if (fi) memset(fi, 0, sizeof *fi);
}
int ds_runlog_read_config(const char* path, char** text, char* err, size_t errlen) {
  return ds__puterr(err, errlen, DS_ERR_UNSUPPORTED, "%s: dsim was built --without-hdf5: cannot read run logs", path);
}
int ds_runlog_read_params(const char* path, int* n, int* nparams, double** params, char* err, size_t errlen) {
  return ds__puterr(err, errlen, DS_ERR_UNSUPPORTED, "%s: dsim was built --without-hdf5: cannot read run logs", path);
}

#else /* DS_HAVE_HDF5 */

#include <hdf5.h>

static const char* const g_episode_names[3] = {"first", "best", "last"};

struct dsRunLog {
  hid_t file;
  hid_t d_loss, d_metric, d_wall, d_gnorm, d_params;
  int fd;         /* the file the path names, locked by this writer */
  int nparams;
  size_t chunk_rows; /* rows per chunk of the /iterations series */
  unsigned char* img; /* commit buffer */
  size_t img_cap;
  unsigned char* good; /* the last committed image */
  size_t good_len, good_cap;
  int stride;
  int compression;
  hsize_t n;      /* iterations written */
  char path[1024];
  char tmp[2100];  /* the commit's temporary file, beside path */
  char dir[1024];  /* path's folder */
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
static hid_t create_series(hid_t loc, const char* name, int cols, size_t rows, const char* units) {
  hsize_t dims[2] = {0, (hsize_t)cols}, maxd[2] = {H5S_UNLIMITED, (hsize_t)cols};
  hsize_t chunk[2] = {(hsize_t)rows, (hsize_t)(cols > 0 ? cols : 1)};
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
/* A chunk of an /iterations series holds at most this many bytes (and at
 * most 256 rows): a commit rewrites the whole image, chunks included. */
#define RL_CHUNK_BYTES ((size_t)16 << 10)
#define RL_CHUNK_ROWS 256
/* an unlocked temporary file older than this is a killed writer's */
#define RL_STALE_TMP_S 60
/* commit's answer when the file system makes no hard links (the first
 * commit then falls back to creating the file and renaming over it) */
#define ENOTSUP_LINK (-1)
/* Room kept free by every commit but the final one, so that the final
 * status can still be recorded once a write has been refused */
#define RL_MARGIN ((size_t)64 << 10)

/* A lock of type (F_WRLCK, F_RDLCK) on the byte at offset start. */
static struct flock one_byte(short type, off_t start) {
  struct flock fl;
  memset(&fl, 0, sizeof fl);
  fl.l_type = type;
  fl.l_whence = SEEK_SET;
  fl.l_start = start;
  fl.l_len = 1;
  return fl;
}

/* The writer's lock on fd (see the top of this file): 0, or the errno of
 * the refusal. An OFD
 * lock on byte 0 excludes other writers, in other processes and in this
 * one. Its owner's pid is not reported to others, so the writer also holds
 * a classic lock on byte 1 (mark_lock_owner), which F_GETLK reports with
 * the pid. */
static int take_lock(int fd) {
  struct flock fl = one_byte(F_WRLCK, 0);
#ifdef F_OFD_SETLK
  if (fcntl(fd, F_OFD_SETLK, &fl) == 0) return 0;
#else
  if (fcntl(fd, F_SETLK, &fl) == 0) return 0;
#endif
  const int e = errno;
  if (e != EAGAIN && e != EACCES) return 0; /* a file system without locks: run unlocked */
  return e;
}

static void mark_lock_owner(int fd) {
  struct flock fl = one_byte(F_RDLCK, 1);
  (void)fcntl(fd, F_SETLK, &fl); /* only for the pid in a second writer's message */
}

/* The pid marked on the file path names now (mark_lock_owner), or 0: the
 * file a refused writer locked may have been replaced by a commit, its
 * holder's marks going with it. */
static long lock_holder(const char* path) {
  for (int tries = 0; tries < 50; tries++) {
    const int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    struct flock fl = one_byte(F_WRLCK, 1);
    const int got = fd >= 0 && fcntl(fd, F_GETLK, &fl) == 0 && fl.l_type != F_UNLCK && fl.l_pid > 0;
    if (fd >= 0) close(fd);
    if (got) return (long)fl.l_pid;
    const struct timespec ms2 = {0, 2000000};
    nanosleep(&ms2, NULL);
  }
  return 0;
}

/* Splits path into its folder (or ".") and base name. */
static void split_path(const char* path, char* dir, size_t ndir, char* base, size_t nbase) {
  const char* slash = strrchr(path, '/');
  if (!slash) {
    snprintf(dir, ndir, ".");
    snprintf(base, nbase, "%s", path);
  } else {
    snprintf(dir, ndir, "%.*s", (int)(slash == path ? 1 : slash - path), path);
    snprintf(base, nbase, "%s", slash + 1);
  }
}

/* Removes temporary files of killed writers of the same log (".BASE.dsim-
 * *.tmp" in its folder, older than RL_STALE_TMP_S and not locked: a live
 * writer locks its temporary file before it writes a byte). */
static void sweep_stale_tmp(const char* dir, const char* base) {
  DIR* dp = opendir(dir);
  if (!dp) return;
  char prefix[1100];
  const int np = snprintf(prefix, sizeof prefix, ".%s.dsim-", base);
  if (np <= 0 || (size_t)np >= sizeof prefix) {
    closedir(dp);
    return;
  }
  const time_t now = time(NULL);
  struct dirent* e;
  while ((e = readdir(dp)) != NULL) {
    const size_t len = strlen(e->d_name);
    if (strncmp(e->d_name, prefix, (size_t)np) != 0 || len < (size_t)np + 4 || strcmp(e->d_name + len - 4, ".tmp"))
      continue;
    const int fd = openat(dirfd(dp), e->d_name, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && now - st.st_mtime > RL_STALE_TMP_S &&
        take_lock(fd) == 0)
      (void)unlinkat(dirfd(dp), e->d_name, 0);
    if (fd >= 0) close(fd);
  }
  closedir(dp);
}

/* Writes n bytes at fd's position; 0 or the errno. */
static int write_all(int fd, const unsigned char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return w < 0 ? errno : EIO;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

/* 0 when a file of len bytes can be written now with `margin` bytes to
 * spare, else the errno the write would meet: EFBIG past RLIMIT_FSIZE
 * (checked so that a caller who did not ignore SIGXFSZ is not killed),
 * ENOSPC when the file system has fewer free blocks (those an unprivileged
 * writer may use). The temporary file is written while the log still
 * exists, so the whole image must fit. */
static int probe_room(const dsRunLog* log, size_t len, size_t margin) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
      (unsigned long long)len + margin > (unsigned long long)rl.rlim_cur)
    return EFBIG;
  struct statvfs vf;
  if (statvfs(log->dir, &vf) == 0 && vf.f_frsize > 0 &&
      (unsigned long long)vf.f_bavail < (len + margin + vf.f_frsize - 1) / vf.f_frsize)
    return ENOSPC;
  return 0;
}

/* The commit (see the top of this file): 0, or the errno that stopped it,
 * the log on disk then unchanged (and the file in memory rolled back to
 * it: rollback). final: no margin is kept (see RL_MARGIN), and the file
 * and its folder are synced (the other commits survive a killed process,
 * not a power cut). */
static int commit(dsRunLog* log, int final) {
  if (H5Fflush(log->file, H5F_SCOPE_GLOBAL) < 0) return EIO;
  const ssize_t len = H5Fget_file_image(log->file, NULL, 0);
  if (len <= 0) return EIO;
  if ((size_t)len > log->img_cap) {
    const size_t cap = (size_t)len + (size_t)len / 2;
    unsigned char* p = (unsigned char*)ds__realloc(log->img, cap);
    if (!p) return ENOMEM;
    log->img = p;
    log->img_cap = cap;
  }
  if (H5Fget_file_image(log->file, log->img, (size_t)len) != len) return EIO;
  int e = probe_room(log, (size_t)len, final ? 0 : RL_MARGIN);
  if (e) return e;
  int fd = open(log->tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0 && errno == EEXIST) { /* left by a killed writer with this pid */
    (void)unlink(log->tmp);
    fd = open(log->tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  }
  if (fd < 0) return errno;
  (void)take_lock(fd); /* nobody else knows the file yet */
  mark_lock_owner(fd);
  e = write_all(fd, log->img, (size_t)len);
  if (!e && final && fsync(fd) != 0) e = errno;
  /* the first commit of a new log links its file in (link(2) fails with
   * EEXIST rather than replace a file that appeared meanwhile: the caller
   * decides); the others replace the file they hold */
  if (!e && log->fd < 0) {
    if (link(log->tmp, log->path) == 0)
      (void)unlink(log->tmp);
    else
      e = errno == EEXIST ? EEXIST : ENOTSUP_LINK;
  } else if (!e && rename(log->tmp, log->path) != 0) {
    e = errno;
  }
  if (e) {
    close(fd);
    (void)unlink(log->tmp);
    return e;
  }
  if (log->fd >= 0) close(log->fd); /* the replaced file, and its lock */
  log->fd = fd;
  if (final) {
    const int dfd = open(log->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
      (void)fsync(dfd);
      close(dfd);
    }
  }
  /* the committed image: what a rollback returns to */
  unsigned char* t = log->good;
  log->good = log->img;
  log->good_len = (size_t)len;
  log->img = t;
  const size_t c = log->good_cap;
  log->good_cap = log->img_cap;
  log->img_cap = c;
  return 0;
}

static void close_series(dsRunLog* log) {
  hid_t* ds[] = {&log->d_loss, &log->d_metric, &log->d_wall, &log->d_gnorm, &log->d_params};
  for (size_t i = 0; i < sizeof ds / sizeof ds[0]; i++) {
    if (*ds[i] >= 0) H5Dclose(*ds[i]);
    *ds[i] = -1;
  }
}

/* In-memory file access: grown 1 MiB at a time, no backing store (the
 * commits write the file); closing the file closes every object a failed
 * write left open. image: start from these bytes. */
static hid_t memory_fapl(const void* image, size_t len) {
  hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  if (fapl >= 0 && (H5Pset_fapl_core(fapl, (size_t)1 << 20, 0) < 0 ||
                    H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG) < 0 ||
                    (image && H5Pset_file_image(fapl, (void*)image, len) < 0))) {
    H5Pclose(fapl);
    fapl = -1;
  }
  return fapl;
}

/* After a failed write or commit: the file in memory becomes the last
 * committed image again (so that a later commit, such as the final status,
 * does not carry half of the failed write); 0, or -1 with the file closed. */
static int rollback(dsRunLog* log) {
  close_series(log);
  if (log->file >= 0) H5Fclose(log->file);
  log->file = -1;
  hid_t fapl = log->good ? memory_fapl(log->good, log->good_len) : -1;
  /* the name must not exist: libhdf5 refuses to open an image under the
   * name of an existing file */
  char name[sizeof log->tmp + 8];
  snprintf(name, sizeof name, "%s.memory", log->tmp);
  if (fapl >= 0) log->file = H5Fopen(name, H5F_ACC_RDWR, fapl);
  if (fapl >= 0) H5Pclose(fapl);
  if (log->file < 0) return -1;
  const char* names[] = {"/iterations/loss", "/iterations/metric", "/iterations/wall_time", "/iterations/grad_norm",
                         "/iterations/params"};
  hid_t* ds[] = {&log->d_loss, &log->d_metric, &log->d_wall, &log->d_gnorm, &log->d_params};
  for (int i = 0; i < 5; i++)
    if (i < 4 || log->nparams > 0) {
      *ds[i] = H5Dopen2(log->file, names[i], H5P_DEFAULT);
      if (*ds[i] < 0) return -1;
    }
  return 0;
}

/* Opens and locks the file the path names (creating it, exclusively unless
 * overwrite): DS_OK with log->fd set and *created when this call made it,
 * or a DS_ERR_* with the message in err. A writer that replaced the file
 * between this open and the lock is noticed (the path then names another
 * file) and the open repeated. */
static int open_target(dsRunLog* log, int overwrite, int* created, char* err, size_t errlen) {
  const char* path = log->path;
  for (int tries = 0; tries < 100; tries++) {
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    *created = fd >= 0;
    if (fd < 0 && errno == EEXIST && !overwrite)
      return ds__puterr(err, errlen, DS_ERR_IO, "%s: exists; refusing to replace it (dsRunLogDef.overwrite)", path);
    if (fd < 0 && errno == EEXIST) {
      fd = open(path, O_RDWR | O_CLOEXEC | O_NONBLOCK);
      if (fd < 0 && errno == ENOENT) continue; /* removed meanwhile */
    }
    if (fd < 0) return ds__puterr(err, errlen, DS_ERR_IO, "%s: cannot create the run log: %s", path, strerror(errno));
    struct stat st, now;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      close(fd);
      return ds__puterr(err, errlen, DS_ERR_IO, "%s: cannot create the run log: not a regular file", path);
    }
    if (take_lock(fd) != 0) {
      close(fd);
      const long holder = lock_holder(path);
      if (holder > 0)
        return ds__puterr(err, errlen, DS_ERR_IO, "%s: in use by another run (pid %ld); not replacing it", path, holder);
      return ds__puterr(err, errlen, DS_ERR_IO, "%s: in use by another run; not replacing it", path);
    }
    if (stat(path, &now) == 0 && now.st_ino == st.st_ino && now.st_dev == st.st_dev) {
      mark_lock_owner(fd);
      log->fd = fd;
      return DS_OK;
    }
    close(fd); /* replaced by another writer's commit meanwhile: look again */
  }
  return ds__puterr(err, errlen, DS_ERR_IO, "%s: in use by another run; not replacing it", path);
}

/* The log's path (a symbolic link is followed to its target, which the
 * commits then replace) and its commit file. */
static int set_paths(dsRunLog* log, const char* path, char* err, size_t errlen) {
  struct stat st;
  char* real = lstat(path, &st) == 0 && S_ISLNK(st.st_mode) ? realpath(path, NULL) : NULL;
  const int n = snprintf(log->path, sizeof log->path, "%s", real ? real : path);
  free(real);
  if (n < 0 || (size_t)n >= sizeof log->path)
    return ds__puterr(err, errlen, DS_ERR_INVALID, "%s: path longer than %zu bytes", path, sizeof log->path - 1);
  char base[1024];
  split_path(log->path, log->dir, sizeof log->dir, base, sizeof base);
  if (!base[0] || strlen(base) > 200)
    return ds__puterr(err, errlen, DS_ERR_IO, "%s: cannot create the run log: not a file name of 1 to 200 bytes", path);
  snprintf(log->tmp, sizeof log->tmp, "%s/.%s.dsim-%ld.tmp", log->dir, base, (long)getpid());
  return DS_OK;
}

/* The header: /config, /meta and the empty /iterations series. */
static int write_header(dsRunLog* log, const dsRunLogDef* def) {
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
  if (def->has_metric_goal) ok = ok && write_dbl_attr(meta, "metric_goal", def->metric_goal) >= 0;
  if (ok) {
    /* scalar series: RL_CHUNK_ROWS rows a chunk; params: as many as fit in
     * RL_CHUNK_BYTES (at least 1) */
    const size_t r1 = RL_CHUNK_ROWS;
    size_t rp = def->nparams > 0 ? RL_CHUNK_BYTES / (sizeof(double) * (size_t)def->nparams) : r1;
    rp = rp < 1 ? 1 : rp > r1 ? r1 : rp;
    log->d_loss = create_series(iters, "loss", 0, r1, "1");
    log->d_metric = create_series(iters, "metric", 0, r1, "task metric (see /meta/env)");
    log->d_wall = create_series(iters, "wall_time", 0, r1, "s");
    log->d_gnorm = create_series(iters, "grad_norm", 0, r1, "1");
    if (def->nparams > 0) log->d_params = create_series(iters, "params", def->nparams, rp, "1");
    ok = log->d_loss >= 0 && log->d_metric >= 0 && log->d_wall >= 0 && log->d_gnorm >= 0 &&
         (def->nparams == 0 || log->d_params >= 0);
  }
  if (meta >= 0) H5Gclose(meta);
  if (iters >= 0) H5Gclose(iters);
  if (eps >= 0) H5Gclose(eps);
  return ok ? 0 : -1;
}

/* Frees what the writer holds (the file image in memory, the lock). */
static void free_writer(dsRunLog* log) {
  close_series(log);
  if (log->file >= 0) H5Fclose(log->file);
  if (log->fd >= 0) close(log->fd); /* releases the lock */
  ds__free(log->img);
  ds__free(log->good);
  ds__free(log);
}

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
  log->file = -1;
  log->fd = -1;
  log->nparams = def->nparams;
  log->stride = def->substep_stride;
  log->compression = def->compression;
  /* an existing file is opened and locked now; a new one appears with the
   * first commit, complete (a run killed before leaves no file) */
  int created = 0;
  struct stat st;
  int rc = set_paths(log, path, err, errlen);
  if (!rc && (lstat(log->path, &st) == 0 || errno != ENOENT))
    rc = open_target(log, def->overwrite, &created, err, errlen);
  if (rc) {
    free_writer(log);
    return rc;
  }
  char base[1024];
  split_path(log->path, log->dir, sizeof log->dir, base, sizeof base);
  sweep_stale_tmp(log->dir, base);
  hid_t fapl = memory_fapl(NULL, 0);
  if (fapl >= 0) log->file = H5Fcreate(log->tmp, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
  if (fapl >= 0) H5Pclose(fapl);
  int e = log->file < 0 || write_header(log, def) != 0 ? EIO : 0;
  if (!e) e = commit(log, 0);
  if ((e == EEXIST && !def->overwrite))
    rc = ds__puterr(err, errlen, DS_ERR_IO, "%s: exists; refusing to replace it (dsRunLogDef.overwrite)", path);
  else if (e == EEXIST || e == ENOTSUP_LINK) { /* created meanwhile, or no hard links here */
    rc = open_target(log, def->overwrite, &created, err, errlen);
    e = rc ? 0 : commit(log, 0);
  }
  if (e && !rc) {
    if (created) unlink(log->path); /* the empty file this call made */
    rc = ds__puterr(err, errlen, DS_ERR_IO, "%s: cannot create the run log: %s", path,
                    e == EIO ? "cannot write its header" : strerror(e));
  }
  if (rc) {
    free_writer(log);
    return rc;
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
  const int e = ok ? commit(log, 0) : EIO;
  if (e) {
    if (rollback(log) != 0)
      return ds__seterr(&log->eb, DS_ERR_IO, "%s: cannot append iteration %llu: %s; the log keeps the %llu before it, "
                        "and no more can be written", log->path, (unsigned long long)log->n, strerror(e),
                        (unsigned long long)log->n);
    return ds__seterr(&log->eb, DS_ERR_IO, "%s: cannot append iteration %llu: %s (the log keeps the %llu before it)",
                      log->path, (unsigned long long)log->n, strerror(e), (unsigned long long)log->n);
  }
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

static herr_t write_vec_attr(hid_t loc, const char* name, const double* v, int n) {
  hsize_t dim = (hsize_t)n;
  hid_t s = H5Screate_simple(1, &dim, NULL);
  if (s < 0) return -1;
  hid_t a = H5Acreate2(loc, name, H5T_NATIVE_DOUBLE, s, H5P_DEFAULT, H5P_DEFAULT);
  herr_t rc = a >= 0 ? H5Awrite(a, H5T_NATIVE_DOUBLE, v) : -1;
  if (a >= 0) H5Aclose(a);
  H5Sclose(s);
  return rc;
}

/* What the frames show, beside them: "substeps" and "times" (one per frame;
 * time = substep * dt) and the camera as group attributes, so that exported
 * footage needs no guessing. */
static int write_frame_info(hid_t g, const dsEpisodeRecord* ep) {
  const int F = ep->nframes, last = ep->nsubsteps > 0 ? ep->nsubsteps - 1 : 0;
  int* sub = (int*)ds__malloc(sizeof(int) * (size_t)F);
  double* t = (double*)ds__malloc(sizeof(double) * (size_t)F);
  int ok = sub && t, known = 1;
  for (int f = 0; f < F && ok; f++) {
    const long s = ep->frame_substep ? ep->frame_substep[f] : (long)f * ep->render_interval;
    sub[f] = ep->frame_substep || s < last ? (int)s : last;
    t[f] = sub[f] * ep->dt;
    known = known && sub[f] >= 0 && (f == 0 || sub[f] > sub[f - 1]);
  }
  /* a record without a schedule (no dt or render interval) or with more
     frames than it has: no times rather than wrong ones */
  known = known && ep->dt > 0 && (ep->frame_substep || ep->render_interval > 0);
  hsize_t n = (hsize_t)F;
  ok = ok && (!known || (write_array(g, "substeps", H5T_NATIVE_INT, 1, &n, 0, sub, "1") >= 0 &&
                         write_array(g, "times", H5T_NATIVE_DOUBLE, 1, &n, 0, t, "s") >= 0));
  if (ok && known && ep->cam_fov > 0) {
    ok = write_vec_attr(g, "camera_position", ep->cam_eye, 3) >= 0 &&
         write_vec_attr(g, "camera_look_at", ep->cam_look_at, 3) >= 0 &&
         write_dbl_attr(g, "camera_fov", ep->cam_fov) >= 0;
    if (ok && ep->cam_intr[0] > 0) ok = write_vec_attr(g, "camera_intrinsics", ep->cam_intr, 4) >= 0;
  }
  /* several views: camera_view<k> = position, look_at, fov and camera_view<k>_intrinsics */
  const int nv = ep->cam_nviews > 1 && ep->cam_views ? (ep->cam_nviews < 8 ? ep->cam_nviews : 8) : 0;
  if (ok && known && nv) ok = write_int_attr(g, "camera_nviews", nv) >= 0;
  for (int k = 0; ok && known && k < nv; k++) {
    char name[48];
    snprintf(name, sizeof name, "camera_view%d", k);
    ok = write_vec_attr(g, name, ep->cam_views + 11 * k, 7) >= 0;
    snprintf(name, sizeof name, "camera_view%d_intrinsics", k);
    if (ok && ep->cam_views[11 * k + 7] > 0) ok = write_vec_attr(g, name, ep->cam_views + 11 * k + 7, 4) >= 0;
  }
  ds__free(sub);
  ds__free(t);
  return ok ? 0 : -1;
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
  if (log->file < 0) return ds__seterr(&log->eb, DS_ERR_IO, "%s: cannot write episode %s: the log is closed", log->path, which);
  /* the commit makes the episode appear whole or not at all: a run killed
   * while writing keeps the previous episode of that name (or none) */
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
  if (ok && ep->frames) ok = write_frame_info(g, ep) == 0;
  if (ok && ep->goal) {
    hsize_t dims[3] = {(hsize_t)ep->height, (hsize_t)ep->width, 4};
    ok = write_array(g, "goal", H5T_NATIVE_UINT8, 3, dims, log->compression > 0 ? log->compression : 4, ep->goal,
                     "RGBA 0..255") >= 0;
  }
  if (g >= 0) H5Gclose(g);
  const int e = ok ? commit(log, 0) : EIO;
  if (e) {
    const int rb = rollback(log);
    return ds__seterr(&log->eb, DS_ERR_IO, "%s: cannot write episode %s: %s%s", log->path, which,
                      e == EIO ? "the HDF5 write failed" : strerror(e), rb ? "; no more can be written" : "");
  }
  return DS_OK;
}

int ds_runlog_close(dsRunLog* log, const char* status) {
  if (!log) return DS_OK;
  int rc = DS_OK;
  if (status && log->file >= 0) {
    hid_t meta = H5Gopen2(log->file, "meta", H5P_DEFAULT);
    char now[32];
    iso_now(now, sizeof now);
    int e = meta < 0 || write_str_attr(meta, "status", status) < 0 || write_str_attr(meta, "end_time", now) < 0;
    if (meta >= 0) H5Gclose(meta);
    if (!e) e = commit(log, 1);
    /* on failure /meta keeps "running": a log that did not end cleanly */
    if (e)
      rc = ds__seterr(&log->eb, DS_ERR_IO, "%s: cannot record the final status \"%s\": %s", log->path, status,
                      e == 1 || e == EIO ? "the HDF5 write failed" : strerror(e));
  } else if (status) {
    rc = ds__seterr(&log->eb, DS_ERR_IO, "%s: cannot record the final status \"%s\": an earlier write failed",
                    log->path, status);
  }
  free_writer(log);
  return rc;
}

const char* ds_runlog_last_error(const dsRunLog* log) { return log ? ds__errmsg(&log->eb) : ""; }

/* ---- reader ----------------------------------------------------------------
 * A run log may come from anywhere (a colleague, a download, a disk that
 * failed), so the reader trusts nothing in it. Before it reads an object it
 * checks that the object is reached through hard links only (no soft or
 * external link, which would make libhdf5 open another file), that it is the
 * kind the schema says (group, dataset, attribute), and its type class, rank,
 * dimensions and byte size. Sizes are checked for overflow and against
 * ds_memory_limit() and against the bytes the file really holds (a
 * compressed chunk cannot inflate more than deflate allows, and every chunk
 * must be there) before anything is allocated. Datasets whose data lives
 * elsewhere (external storage, virtual layout) and filters other than the
 * ones dsim writes (deflate, shuffle, fletcher32) are refused, so that
 * libhdf5 parses no more of a foreign file than the schema needs. Anything
 * else gets DS_ERR_FORMAT with a message naming the object and what was
 * expected. What libhdf5 itself does with a corrupt superblock or object
 * header is out of this reader's reach: `dsim info` and `dsim export` read a
 * log in a child process first (cli/), so that a crash there is reported as
 * a corrupt file. */

#define RL_MAX_STRING 4096u         /* bytes of a string attribute */
#define RL_MAX_CONFIG (64u << 20)   /* bytes of /config */
#define RL_MAX_DIM ((hsize_t)1 << 30) /* any one dimension */
#define RL_MAX_INFLATE 1100u        /* deflate expands at most about 1032:1 */

typedef struct Rd {
  hid_t f;
  const char* path;
  char* err;
  size_t errlen;
} Rd;

/* "PATH: OBJECT: message" as DS_ERR_FORMAT. */
static int rd_bad(Rd* r, const char* obj, const char* fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return ds__puterr(r->err, r->errlen, DS_ERR_FORMAT, "%s: %s: %s", r->path, obj, msg);
}

static const char* id_kind(H5I_type_t t) {
  switch (t) {
    case H5I_GROUP: return "a group";
    case H5I_DATASET: return "a dataset";
    case H5I_DATATYPE: return "a named datatype";
    default: return "an object of another kind";
  }
}

static const char* class_name(H5T_class_t c) {
  switch (c) {
    case H5T_INTEGER: return "integer";
    case H5T_FLOAT: return "floating-point";
    case H5T_STRING: return "string";
    case H5T_COMPOUND: return "compound";
    case H5T_ARRAY: return "array";
    case H5T_VLEN: return "variable-length";
    case H5T_ENUM: return "enum";
    case H5T_OPAQUE: return "opaque";
    case H5T_REFERENCE: return "reference";
    default: return "unknown";
  }
}

/* " 3 x 4" style text of a dataspace's shape, "scalar" or "null". */
static void shape_text(hid_t space, char* buf, size_t n) {
  H5S_class_t c = H5Sget_simple_extent_type(space);
  if (c == H5S_SCALAR) {
    snprintf(buf, n, "a scalar");
    return;
  }
  if (c == H5S_NULL) {
    snprintf(buf, n, "an empty (null) dataspace");
    return;
  }
  hsize_t dims[H5S_MAX_RANK];
  int rank = H5Sget_simple_extent_dims(space, dims, NULL);
  if (rank < 0) {
    snprintf(buf, n, "an unreadable dataspace");
    return;
  }
  size_t k = (size_t)snprintf(buf, n, "a rank-%d array (", rank);
  for (int i = 0; i < rank && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, "%s%llu", i ? " x " : "", (unsigned long long)dims[i]);
  if (k < n) snprintf(buf + k, n - k, ")");
}

/* Object p (absolute path) of kind want: every link on the way must exist
 * and be hard. *out = -1 when absent and not required. */
static int rd_open(Rd* r, const char* p, H5I_type_t want, int required, hid_t* out) {
  *out = -1;
  char prefix[256];
  size_t len = strlen(p);
  if (len >= sizeof prefix) return rd_bad(r, p, "path too long");
  for (size_t i = 1; i <= len; i++) {
    if (i < len && p[i] != '/') continue;
    memcpy(prefix, p, i);
    prefix[i] = '\0';
    htri_t ex = H5Lexists(r->f, prefix, H5P_DEFAULT);
    if (ex < 0) return rd_bad(r, prefix, "cannot look up this link (corrupt group?)");
    if (ex == 0) {
      if (!required) return DS_OK;
      return rd_bad(r, prefix, "missing (a dsim run log has it)");
    }
    H5L_info_t li;
    if (H5Lget_info(r->f, prefix, &li, H5P_DEFAULT) < 0) return rd_bad(r, prefix, "cannot read this link");
    if (li.type != H5L_TYPE_HARD)
      return rd_bad(r, prefix, "is %s link; a dsim run log holds hard links only",
                    li.type == H5L_TYPE_SOFT ? "a soft" : li.type == H5L_TYPE_EXTERNAL ? "an external" : "a user-defined");
    if (i < len) { /* on the way: a group */
      hid_t g = H5Oopen(r->f, prefix, H5P_DEFAULT);
      H5I_type_t t = g >= 0 ? H5Iget_type(g) : H5I_BADID;
      if (g >= 0) H5Oclose(g);
      if (g < 0) return rd_bad(r, prefix, "cannot open (corrupt object header?)");
      if (t != H5I_GROUP) return rd_bad(r, prefix, "expected a group, found %s", id_kind(t));
    }
  }
  hid_t o = H5Oopen(r->f, p, H5P_DEFAULT);
  if (o < 0) return rd_bad(r, p, "cannot open (corrupt object header?)");
  H5I_type_t t = H5Iget_type(o);
  if (t != want) {
    H5Oclose(o);
    return rd_bad(r, p, "expected %s, found %s", id_kind(want), id_kind(t));
  }
  *out = o;
  return DS_OK;
}

static void rd_close(hid_t o) {
  if (o >= 0) H5Oclose(o);
}

/* Attribute `name` of object obj (named objname in messages). */
static int rd_attr(Rd* r, hid_t obj, const char* objname, const char* name, int required, hid_t* out, char* what,
                   size_t whatlen) {
  *out = -1;
  snprintf(what, whatlen, "%s attribute \"%s\"", objname, name);
  htri_t ex = H5Aexists(obj, name);
  if (ex < 0) return rd_bad(r, what, "cannot look up (corrupt object header?)");
  if (ex == 0) return required ? rd_bad(r, what, "missing (a dsim run log has it)") : DS_OK;
  hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
  if (a < 0) return rd_bad(r, what, "cannot open (corrupt?)");
  *out = a;
  return DS_OK;
}

/* A scalar string (fixed or variable length, at most maxlen bytes) of an
 * attribute (is_attr) or a dataset into a new NUL-terminated buffer. */
static int rd_string(Rd* r, hid_t o, int is_attr, const char* what, size_t maxlen, char** out) {
  *out = NULL;
  hid_t t = is_attr ? H5Aget_type(o) : H5Dget_type(o);
  hid_t s = is_attr ? H5Aget_space(o) : H5Dget_space(o);
  hid_t mt = -1;
  int rc = DS_OK;
  char shape[96];
  if (t < 0 || s < 0) {
    rc = rd_bad(r, what, "cannot read its type or dataspace");
    goto out;
  }
  if (H5Tget_class(t) != H5T_STRING) {
    rc = rd_bad(r, what, "expected a string, found %s data", class_name(H5Tget_class(t)));
    goto out;
  }
  if (H5Sget_simple_extent_type(s) != H5S_SCALAR) {
    shape_text(s, shape, sizeof shape);
    rc = rd_bad(r, what, "expected a scalar string, found %s of strings", shape);
    goto out;
  }
  htri_t vlen = H5Tis_variable_str(t);
  if (vlen < 0) {
    rc = rd_bad(r, what, "unreadable string type");
    goto out;
  }
  mt = H5Tcopy(H5T_C_S1);
  const H5T_cset_t cset = H5Tget_cset(t);
  if (mt >= 0 && (cset == H5T_CSET_ASCII || cset == H5T_CSET_UTF8)) H5Tset_cset(mt, cset); /* no conversion between them */
  if (vlen) {
    char* p = NULL;
    if (mt < 0 || H5Tset_size(mt, H5T_VARIABLE) < 0 ||
        (is_attr ? H5Aread(o, mt, &p) : H5Dread(o, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, &p)) < 0) {
      rc = rd_bad(r, what, "cannot read the string (corrupt?)");
      goto out;
    }
    size_t n = p ? strlen(p) : 0;
    if (n > maxlen)
      rc = rd_bad(r, what, "a string of %zu bytes, more than the %zu a run log holds there", n, maxlen);
    else if (!(*out = (char*)ds__malloc(n + 1)))
      rc = ds__puterr(r->err, r->errlen, DS_ERR_NOMEM, "%s: %s: out of memory", r->path, what);
    else
      memcpy(*out, p ? p : "", n + 1);
    if (p) H5free_memory(p);
    goto out;
  }
  size_t n = H5Tget_size(t);
  if (n == 0 || n > maxlen) {
    rc = rd_bad(r, what, "a string of %zu bytes, expected 1 to %zu", n, maxlen);
    goto out;
  }
  char* buf = (char*)ds__malloc(n + 1);
  if (!buf) {
    rc = ds__puterr(r->err, r->errlen, DS_ERR_NOMEM, "%s: %s: out of memory", r->path, what);
    goto out;
  }
  /* read through a memory type of the same size that this code built, not
   * the file's own type */
  if (mt < 0 || H5Tset_size(mt, n) < 0 || H5Tset_strpad(mt, H5T_STR_NULLPAD) < 0 ||
      (is_attr ? H5Aread(o, mt, buf) : H5Dread(o, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf)) < 0) {
    ds__free(buf);
    rc = rd_bad(r, what, "cannot read the string (corrupt?)");
    goto out;
  }
  buf[n] = '\0';
  *out = buf;
out:
  if (mt >= 0) H5Tclose(mt);
  if (s >= 0) H5Sclose(s);
  if (t >= 0) H5Tclose(t);
  return rc;
}

/* A string attribute into out (outlen bytes, truncated); "" when absent and
 * not required. */
static int rd_str_attr(Rd* r, hid_t obj, const char* objname, const char* name, int required, char* out,
                       size_t outlen) {
  out[0] = '\0';
  char what[160];
  hid_t a;
  int rc = rd_attr(r, obj, objname, name, required, &a, what, sizeof what);
  if (rc || a < 0) return rc;
  char* s = NULL;
  rc = rd_string(r, a, 1, what, RL_MAX_STRING, &s);
  H5Aclose(a);
  if (rc == DS_OK) snprintf(out, outlen, "%s", s);
  ds__free(s);
  return rc;
}

/* A scalar integer attribute within [lo, hi] (as unsigned 64-bit when
 * is_u64, then lo/hi are ignored). *present = 0 when absent. */
static int rd_int_attr(Rd* r, hid_t obj, const char* objname, const char* name, int is_u64, long long lo,
                       long long hi, long long* v, unsigned long long* u, int* present) {
  char what[160], shape[96];
  hid_t a;
  *present = 0;
  int rc = rd_attr(r, obj, objname, name, 0, &a, what, sizeof what);
  if (rc || a < 0) return rc;
  hid_t t = H5Aget_type(a), s = H5Aget_space(a);
  if (t < 0 || s < 0) {
    rc = rd_bad(r, what, "cannot read its type or dataspace");
  } else if (H5Tget_class(t) != H5T_INTEGER) {
    rc = rd_bad(r, what, "expected an integer, found %s data", class_name(H5Tget_class(t)));
  } else if (H5Sget_simple_extent_type(s) != H5S_SCALAR) {
    shape_text(s, shape, sizeof shape);
    rc = rd_bad(r, what, "expected a scalar integer, found %s", shape);
  } else if (is_u64) {
    if (H5Aread(a, H5T_NATIVE_ULLONG, u) < 0) rc = rd_bad(r, what, "cannot read (corrupt?)");
  } else {
    long long x = 0;
    if (H5Aread(a, H5T_NATIVE_LLONG, &x) < 0)
      rc = rd_bad(r, what, "cannot read (corrupt?)");
    else if (x < lo || x > hi)
      rc = rd_bad(r, what, "%lld is out of range (expected %lld to %lld)", x, lo, hi);
    else
      *v = x;
  }
  if (s >= 0) H5Sclose(s);
  if (t >= 0) H5Tclose(t);
  H5Aclose(a);
  if (rc == DS_OK) *present = 1;
  return rc;
}

/* A scalar floating-point attribute (finite); *present = 0 when absent. */
static int rd_dbl_attr(Rd* r, hid_t obj, const char* objname, const char* name, double* v, int* present) {
  char what[160], shape[96];
  hid_t a;
  *present = 0;
  int rc = rd_attr(r, obj, objname, name, 0, &a, what, sizeof what);
  if (rc || a < 0) return rc;
  hid_t t = H5Aget_type(a), s = H5Aget_space(a);
  double x = 0;
  if (t < 0 || s < 0) {
    rc = rd_bad(r, what, "cannot read its type or dataspace");
  } else if (H5Tget_class(t) != H5T_FLOAT) {
    rc = rd_bad(r, what, "expected a floating-point number, found %s data", class_name(H5Tget_class(t)));
  } else if (H5Sget_simple_extent_type(s) != H5S_SCALAR) {
    shape_text(s, shape, sizeof shape);
    rc = rd_bad(r, what, "expected a scalar number, found %s", shape);
  } else if (H5Aread(a, H5T_NATIVE_DOUBLE, &x) < 0 || !isfinite(x)) {
    rc = rd_bad(r, what, "cannot read a finite number");
  }
  if (s >= 0) H5Sclose(s);
  if (t >= 0) H5Tclose(t);
  H5Aclose(a);
  if (rc == DS_OK) {
    *v = x;
    *present = 1;
  }
  return rc;
}

/* n = a * b without overflow past limit; 0 on overflow. */
static int mul_ok(size_t a, size_t b, size_t limit, size_t* n) {
  if (a && b > limit / a) return 0;
  *n = a * b;
  return 1;
}

/* The storage of dataset d (rank, dims, elements of elsize bytes in memory)
 * is what dsim writes and really holds its data; *bytes = the bytes a read
 * allocates. may_lack_last: a series a killed run may have grown by a row
 * whose chunk it never wrote. */
static int rd_check_storage(Rd* r, hid_t d, const char* p, int rank, const hsize_t* dims, size_t elsize,
                            int may_lack_last, size_t* bytes) {
  const size_t lim = ds_memory_limit();
  size_t n = elsize;
  for (int i = 0; i < rank; i++) {
    if (dims[i] > RL_MAX_DIM) return rd_bad(r, p, "dimension %d is %llu, more than a run log holds", i, (unsigned long long)dims[i]);
    if (!mul_ok(n, (size_t)dims[i], SIZE_MAX, &n)) return rd_bad(r, p, "its size overflows");
  }
  if (n > lim) {
    char a[32], b[32];
    return rd_bad(r, p, "reading it needs %s, more than dsim may use (%s: %s)", ds_format_size(n, a, sizeof a),
                  ds_format_size(lim, b, sizeof b), ds_memory_limit_source());
  }
  *bytes = n;
  hid_t dcpl = H5Dget_create_plist(d);
  if (dcpl < 0) return rd_bad(r, p, "cannot read its creation properties");
  int rc = DS_OK;
  const H5D_layout_t layout = H5Pget_layout(dcpl);
  const int nfilt = H5Pget_nfilters(dcpl);
  if (H5Pget_external_count(dcpl) != 0) {
    rc = rd_bad(r, p, "its data is stored in external files; a dsim run log keeps it inside");
    goto out;
  }
  if (nfilt < 0) {
    rc = rd_bad(r, p, "cannot read its filters");
    goto out;
  }
  for (int i = 0; i < nfilt; i++) {
    unsigned flags = 0, fconf = 0;
    size_t nelem = 0;
    char name[64];
    H5Z_filter_t id = H5Pget_filter2(dcpl, (unsigned)i, &flags, &nelem, NULL, sizeof name, name, &fconf);
    if (id != H5Z_FILTER_DEFLATE && id != H5Z_FILTER_SHUFFLE && id != H5Z_FILTER_FLETCHER32) {
      rc = rd_bad(r, p, "uses filter %d; dsim reads deflate, shuffle and fletcher32 only", (int)id);
      goto out;
    }
  }
  if (n == 0) goto out;
  const hsize_t stored = H5Dget_storage_size(d);
  if (layout == H5D_CONTIGUOUS || layout == H5D_COMPACT) {
    /* whole and unfiltered: the file must hold every byte */
    hid_t t = H5Dget_type(d);
    size_t fel = t >= 0 ? H5Tget_size(t) : 0;
    if (t >= 0) H5Tclose(t);
    size_t need = 0;
    if (!mul_ok(fel, n / elsize, SIZE_MAX, &need) || stored < need)
      rc = rd_bad(r, p, "declares %zu elements but the file holds %llu bytes of them (truncated or corrupt)",
                  n / elsize, (unsigned long long)stored);
  } else if (layout == H5D_CHUNKED) {
    hsize_t cd[H5S_MAX_RANK];
    if (H5Pget_chunk(dcpl, rank, cd) != rank) {
      rc = rd_bad(r, p, "unreadable chunk layout");
      goto out;
    }
    /* libhdf5 1.10 trusts the chunk dimensions: a chunk wider than a
     * fixed-size dataset makes it copy past the inflated chunk's buffer
     * (a heap overflow that reads as valid data). dsim chunks whole rows:
     * every dimension after the first is the dataset's own, and no chunk is
     * larger than the dataset may grow. */
    hsize_t maxd[H5S_MAX_RANK];
    hid_t sp = H5Dget_space(d);
    const int got_rank = sp >= 0 ? H5Sget_simple_extent_dims(sp, NULL, maxd) : -1;
    if (sp >= 0) H5Sclose(sp);
    if (got_rank != rank) {
      rc = rd_bad(r, p, "unreadable maximum dimensions");
      goto out;
    }
    size_t want = 1, cbytes = elsize;
    for (int i = 0; i < rank; i++) {
      if (cd[i] < 1 || cd[i] > RL_MAX_DIM) {
        rc = rd_bad(r, p, "chunk dimension %d is %llu", i, (unsigned long long)cd[i]);
        goto out;
      }
      const hsize_t whole = dims[i] ? dims[i] : 1;
      if ((i > 0 && cd[i] != whole) || (maxd[i] != H5S_UNLIMITED && cd[i] > (maxd[i] ? maxd[i] : 1))) {
        rc = rd_bad(r, p, "chunk dimension %d is %llu, expected %s%llu (corrupt layout)", i,
                    (unsigned long long)cd[i], i > 0 ? "" : "at most ",
                    (unsigned long long)(i > 0 ? whole : (maxd[i] ? maxd[i] : 1)));
        goto out;
      }
      if (!mul_ok(want, (size_t)((dims[i] + cd[i] - 1) / cd[i]), SIZE_MAX, &want) ||
          !mul_ok(cbytes, (size_t)cd[i], lim, &cbytes)) {
        rc = rd_bad(r, p, "its chunk layout overflows");
        goto out;
      }
    }
#if H5_VERSION_GE(1, 10, 5)
    hsize_t have = 0;
    hid_t fs = H5Dget_space(d);
    herr_t got = fs >= 0 ? H5Dget_num_chunks(d, fs, &have) : -1;
    if (fs >= 0) H5Sclose(fs);
    if (got < 0) {
      rc = rd_bad(r, p, "cannot count its chunks (corrupt index?)");
      goto out;
    }
    if (have > want || have + (may_lack_last ? 1u : 0u) < want) {
      rc = rd_bad(r, p, "holds %llu of its %zu chunks (truncated or corrupt)", (unsigned long long)have, want);
      goto out;
    }
#endif
    const double room = ((double)stored + (may_lack_last ? (double)cbytes : 0.0)) * (nfilt > 0 ? RL_MAX_INFLATE : 1);
    if ((double)n > room)
      rc = rd_bad(r, p, "declares %zu bytes but the file holds %llu bytes of them (truncated or corrupt)", n,
                  (unsigned long long)stored);
  } else {
    rc = rd_bad(r, p, "has a virtual or unknown layout; a dsim run log stores its data in the file");
  }
out:
  H5Pclose(dcpl);
  return rc;
}

/* Dataset p of type class cls and rank `rank` (dims out). *d = -1 when
 * absent and not required. */
static int rd_array(Rd* r, const char* p, H5T_class_t cls, int rank, int required, hsize_t* dims, hid_t* d) {
  int rc = rd_open(r, p, H5I_DATASET, required, d);
  if (rc || *d < 0) return rc;
  hid_t t = H5Dget_type(*d), s = H5Dget_space(*d);
  char shape[96];
  if (t < 0 || s < 0) {
    rc = rd_bad(r, p, "cannot read its type or dataspace");
  } else if (H5Tget_class(t) != cls) {
    rc = rd_bad(r, p, "expected %s data, found %s", class_name(cls), class_name(H5Tget_class(t)));
  } else if (H5Sget_simple_extent_type(s) != H5S_SIMPLE || H5Sget_simple_extent_ndims(s) != rank) {
    shape_text(s, shape, sizeof shape);
    rc = rd_bad(r, p, "expected a rank-%d array, found %s", rank, shape);
  } else if (H5Sget_simple_extent_dims(s, dims, NULL) != rank) {
    rc = rd_bad(r, p, "unreadable dimensions");
  }
  if (s >= 0) H5Sclose(s);
  if (t >= 0) H5Tclose(t);
  if (rc) {
    H5Dclose(*d);
    *d = -1;
  }
  return rc;
}

/* Open a run log read-only, telling apart a missing file, a file that is not
 * HDF5 (or truncated), an HDF5 file that is not a dsim run log, and a log
 * whose /meta format is not this reader's. */
static int open_run(const char* path, Rd* r, char* err, size_t errlen) {
  struct stat st;
  quiet_hdf5();
  r->f = -1;
  r->path = path;
  r->err = err;
  r->errlen = errlen;
  hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  if (g_image) {
    /* the core (memory) driver over a copy of the image, never written back */
    if (fapl < 0 || H5Pset_fapl_core(fapl, 1 << 16, 0) < 0 || H5Pset_file_image(fapl, (void*)g_image, g_image_len) < 0) {
      if (fapl >= 0) H5Pclose(fapl);
      return ds__puterr(err, errlen, DS_ERR_NOMEM, "%s: cannot set up the memory image", path);
    }
  } else {
    int rc = DS_OK;
    if (stat(path, &st) != 0)
      rc = ds__puterr(err, errlen, DS_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    else if (S_ISDIR(st.st_mode))
      rc = ds__puterr(err, errlen, DS_ERR_IO, "%s: is a directory, expected a run log (.h5)", path);
    else if (!S_ISREG(st.st_mode))
      rc = ds__puterr(err, errlen, DS_ERR_IO, "%s: not a regular file", path);
    else if (H5Fis_hdf5(path) <= 0)
      rc = ds__puterr(err, errlen, DS_ERR_FORMAT, "%s: not an HDF5 file (or truncated)", path);
    if (rc) {
      if (fapl >= 0) H5Pclose(fapl);
      return rc;
    }
  }
  /* closing the file closes whatever a failed read left open */
  if (fapl >= 0) H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG);
  r->f = H5Fopen(path, H5F_ACC_RDONLY, fapl >= 0 ? fapl : H5P_DEFAULT);
  if (fapl >= 0) H5Pclose(fapl);
  if (r->f < 0) return ds__puterr(err, errlen, DS_ERR_FORMAT, "%s: HDF5 file is corrupt or truncated", path);
  hid_t meta;
  char fmt[64] = "";
  int rc = rd_open(r, "/meta", H5I_GROUP, 0, &meta);
  if (rc == DS_OK && meta >= 0) {
    rc = rd_str_attr(r, meta, "/meta", "format", 0, fmt, sizeof fmt);
    rd_close(meta);
  }
  if (rc == DS_OK && strcmp(fmt, DS_RUNLOG_FORMAT) != 0)
    rc = ds__puterr(err, errlen, DS_ERR_FORMAT,
                    "%s: an HDF5 file but not a dsim run log (/meta format is \"%s\", expected \"%s\")", path, fmt,
                    DS_RUNLOG_FORMAT);
  if (rc) {
    H5Fclose(r->f);
    r->f = -1;
  }
  return rc;
}

/* Read a 1-D floating-point series; *n rows. may_lack_last: see rd_check_storage. */
static int read_series(Rd* r, const char* p, int* n, double** out) {
  hsize_t dims[1] = {0};
  hid_t d;
  size_t bytes = 0;
  *out = NULL;
  int rc = rd_array(r, p, H5T_FLOAT, 1, 1, dims, &d);
  if (rc) return rc;
  rc = rd_check_storage(r, d, p, 1, dims, sizeof(double), 1, &bytes);
  if (rc == DS_OK) {
    double* buf = (double*)ds__malloc(bytes ? bytes : 1);
    if (!buf)
      rc = ds__puterr(r->err, r->errlen, DS_ERR_NOMEM, "%s: %s: out of memory", r->path, p);
    else if (dims[0] > 0 && H5Dread(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0)
      rc = rd_bad(r, p, "cannot read (corrupt data?)");
    if (rc) {
      ds__free(buf);
    } else {
      *n = (int)dims[0];
      *out = buf;
    }
  }
  H5Dclose(d);
  return rc;
}

/* The four series of an open log (outs[i] may be NULL: read and dropped). */
static int rd_iterations(Rd* r, int* n, double** const outs[4]) {
  int rc = DS_OK;
  const char* names[4] = {"/iterations/loss", "/iterations/metric", "/iterations/wall_time", "/iterations/grad_norm"};
  double* got[4] = {NULL, NULL, NULL, NULL};
  int counts[4] = {0, 0, 0, 0};
  for (int i = 0; i < 4 && rc == DS_OK; i++) rc = read_series(r, names[i], &counts[i], &got[i]);
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
  return rc;
}

int ds_runlog_read_iterations(const char* path, int* n, double** loss, double** metric, double** wall_time,
                              double** grad_norm, char* err, size_t errlen) {
  Rd r;
  int rc = open_run(path, &r, err, errlen);
  if (rc) return rc;
  double** const outs[4] = {loss, metric, wall_time, grad_norm};
  rc = rd_iterations(&r, n, outs);
  H5Fclose(r.f);
  return rc;
}

/* The frames dataset dp (F x H x W x 4 bytes), its shape and storage
 * checked; *d = -1 when absent. *bytes: what reading it allocates. */
static int rd_frames(Rd* r, const char* dp, hsize_t dims[4], hid_t* d, size_t* bytes) {
  int rc = rd_array(r, dp, H5T_INTEGER, 4, 0, dims, d);
  if (rc || *d < 0) return rc;
  if (dims[3] != 4 || dims[0] < 1 || dims[1] < 1 || dims[2] < 1 || dims[1] > 65536 || dims[2] > 65536)
    rc = rd_bad(r, dp, "expected F x H x W x 4 RGBA frames (F >= 1, 1 <= H, W <= 65536), found %llu x %llu x %llu x %llu",
                (unsigned long long)dims[0], (unsigned long long)dims[1], (unsigned long long)dims[2],
                (unsigned long long)dims[3]);
  if (rc == DS_OK) rc = rd_check_storage(r, *d, dp, 4, dims, 1, 0, bytes);
  if (rc) {
    H5Dclose(*d);
    *d = -1;
  }
  return rc;
}

/* /meta's attributes, /iterations/params' width and which episodes exist
 * (not their content: a log with a corrupt episode still has a summary; the
 * export that reads the episode refuses it). */
static int read_header(Rd* r, dsRunSummary* s, int n, double* goal, int* has_goal) {
  hid_t meta;
  int rc = rd_open(r, "/meta", H5I_GROUP, 1, &meta);
  if (rc) return rc;
  int present = 0;
  long long threads = 0;
  unsigned long long seed = 0;
  if (!rc) rc = rd_str_attr(r, meta, "/meta", "dsim_version", 0, s->version, sizeof s->version);
  if (!rc) rc = rd_str_attr(r, meta, "/meta", "env", 0, s->env, sizeof s->env);
  if (!rc) rc = rd_str_attr(r, meta, "/meta", "method", 0, s->method, sizeof s->method);
  if (!rc) rc = rd_str_attr(r, meta, "/meta", "status", 0, s->status, sizeof s->status);
  if (!rc) rc = rd_str_attr(r, meta, "/meta", "start_time", 0, s->start_time, sizeof s->start_time);
  if (!rc) rc = rd_int_attr(r, meta, "/meta", "seed", 1, 0, 0, NULL, &seed, &present);
  if (!rc) rc = rd_int_attr(r, meta, "/meta", "threads", 0, 0, 1 << 20, &threads, NULL, &present);
  if (!rc) rc = rd_dbl_attr(r, meta, "/meta", "metric_goal", goal, has_goal);
  rd_close(meta);
  if (rc) return rc;
  s->seed = seed;
  s->threads = (int)threads;
  hsize_t dims[2] = {0, 0};
  hid_t d;
  if ((rc = rd_array(r, "/iterations/params", H5T_FLOAT, 2, 0, dims, &d))) return rc;
  if (d >= 0) {
    H5Dclose(d);
    if (dims[1] < 1 || dims[1] > (1u << 24))
      return rd_bad(r, "/iterations/params", "%llu parameters per iteration, expected 1 to %u",
                    (unsigned long long)dims[1], 1u << 24);
    s->nparams = (int)dims[1];
  }
  hid_t eps;
  if ((rc = rd_open(r, "/episodes", H5I_GROUP, 0, &eps))) return rc;
  rd_close(eps);
  for (int i = 0; i < 3 && eps >= 0; i++) {
    char gp[32];
    hid_t g;
    snprintf(gp, sizeof gp, "/episodes/%s", g_episode_names[i]);
    if ((rc = rd_open(r, gp, H5I_GROUP, 0, &g))) return rc;
    s->has_episode[i] = g >= 0;
    if (i == 1 && g >= 0) {
      /* which iteration the kept best episode is: a killed run's may be
       * older than the lowest loss of the series */
      long long it = -1;
      rc = rd_int_attr(r, g, gp, "iteration", 0, 0, INT_MAX, &it, NULL, &present);
      if (rc == DS_OK && present && it < n) s->best_episode_iteration = (int)it;
    }
    rd_close(g);
    if (rc) return rc;
  }
  return DS_OK;
}

int ds_runlog_read_summary(const char* path, dsRunSummary* s, char* err, size_t errlen) {
  memset(s, 0, sizeof *s);
  s->best_iteration = s->best_episode_iteration = -1;
  double *loss = NULL, *metric = NULL, *wall = NULL;
  int n = 0;
  Rd r;
  double goal = 0;
  int has_goal = 0;
  int rc = open_run(path, &r, err, errlen); /* once: each open costs libhdf5 a new metadata cache */
  if (rc) return rc;
  double** const outs[4] = {&loss, &metric, &wall, NULL};
  rc = rd_iterations(&r, &n, outs);
  if (rc == DS_OK) rc = read_header(&r, s, n, &goal, &has_goal);
  H5Fclose(r.f);
  if (rc == DS_OK) {
    s->niterations = n;
    if (n > 0) {
      s->first_loss = loss[0];
      s->last_loss = loss[n - 1];
      s->first_metric = metric[0];
      s->last_metric = metric[n - 1];
      s->wall_time = wall[n - 1];
      /* the best is the lowest loss, what the optimiser minimises (dsim/run.h) */
      s->best_iteration = 0;
      for (int i = 1; i < n; i++)
        if (loss[i] < loss[s->best_iteration]) s->best_iteration = i;
      s->best_loss = loss[s->best_iteration];
      s->best_metric = metric[s->best_iteration];
    } else {
      s->best_iteration = -1;
    }
  } else {
    memset(s, 0, sizeof *s);
    s->best_iteration = s->best_episode_iteration = -1;
  }
  ds__free(loss);
  ds__free(metric);
  ds__free(wall);
  return rc;
}

/* The bytes of dataset d (named dp) as uint8, into a new buffer of `bytes`
 * (already checked against its stored size). */
static int rd_bytes(Rd* r, hid_t d, const char* dp, size_t bytes, uint8_t** out) {
  uint8_t* buf = (uint8_t*)ds__malloc(bytes);
  if (!buf) return ds__puterr(r->err, r->errlen, DS_ERR_NOMEM, "%s: out of memory reading %s", r->path, dp);
  if (H5Dread(d, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0) {
    ds__free(buf);
    return rd_bad(r, dp, "cannot read (corrupt data?)");
  }
  *out = buf;
  return DS_OK;
}

/* Opens the run log for one of its episodes, which must be "first", "best"
 * or "last" (ok: the caller's other arguments are valid); DS_OK with r
 * open, or the error. */
static int open_episode(const char* path, const char* which, int ok, Rd* r, char* err, size_t errlen) {
  int known = 0;
  for (int i = 0; i < 3 && which; i++) known |= !strcmp(which, g_episode_names[i]);
  if (!known || !ok)
    return ds__puterr(err, errlen, DS_ERR_INVALID, "%s: episode \"%s\": expected first, best or last", path,
                      which ? which : "(null)");
  return open_run(path, r, err, errlen);
}

int ds_runlog_read_frames(const char* path, const char* which, int* nframes, int* height, int* width,
                          uint8_t** rgba, char* err, size_t errlen) {
  Rd r;
  int rc = open_episode(path, which, 1, &r, err, errlen);
  if (rc) return rc;
  char dp[64];
  snprintf(dp, sizeof dp, "/episodes/%s/frames", which);
  hsize_t dims[4] = {0, 0, 0, 0};
  hid_t d;
  size_t bytes = 0;
  rc = rd_frames(&r, dp, dims, &d, &bytes);
  if (rc == DS_OK && d < 0)
    rc = ds__puterr(err, errlen, DS_ERR_NOTFOUND, "%s: no frames for episode \"%s\" (%s is missing)", path, which, dp);
  uint8_t* buf = NULL;
  if (rc == DS_OK && (rc = rd_bytes(&r, d, dp, bytes, &buf)) == DS_OK) {
    *nframes = (int)dims[0];
    *height = (int)dims[1];
    *width = (int)dims[2];
    *rgba = buf;
  }
  if (d >= 0) H5Dclose(d);
  H5Fclose(r.f);
  return rc;
}

int ds_runlog_read_goal(const char* path, const char* which, int* height, int* width, uint8_t** rgba, char* err,
                        size_t errlen) {
  Rd r;
  int rc = open_episode(path, which, height && width && rgba, &r, err, errlen);
  if (rc) return rc;
  char dp[64];
  snprintf(dp, sizeof dp, "/episodes/%s/goal", which);
  hsize_t dims[3] = {0, 0, 0};
  hid_t d;
  size_t bytes = 0;
  rc = rd_array(&r, dp, H5T_INTEGER, 3, 0, dims, &d);
  if (rc == DS_OK && d < 0)
    rc = ds__puterr(err, errlen, DS_ERR_NOTFOUND, "%s: no goal image for episode \"%s\" (%s is missing)", path, which, dp);
  if (rc == DS_OK && (dims[2] != 4 || dims[0] < 1 || dims[1] < 1 || dims[0] > 65536 || dims[1] > 65536))
    rc = rd_bad(&r, dp, "expected an H x W x 4 RGBA image, found %llu x %llu x %llu", (unsigned long long)dims[0],
                (unsigned long long)dims[1], (unsigned long long)dims[2]);
  if (rc == DS_OK) rc = rd_check_storage(&r, d, dp, 3, dims, 1, 0, &bytes);
  uint8_t* buf = NULL;
  if (rc == DS_OK && (rc = rd_bytes(&r, d, dp, bytes, &buf)) == DS_OK) {
    *height = (int)dims[0];
    *width = (int)dims[1];
    *rgba = buf;
  }
  if (d >= 0) H5Dclose(d);
  H5Fclose(r.f);
  return rc;
}

/* A rank-1 array attribute of n doubles (absent: *present 0). */
static int rd_vec_attr(Rd* r, hid_t obj, const char* objname, const char* name, int n, double* v, int* present) {
  char what[160], shape[96];
  hid_t a;
  *present = 0;
  int rc = rd_attr(r, obj, objname, name, 0, &a, what, sizeof what);
  if (rc || a < 0) return rc;
  hid_t t = H5Aget_type(a), sp = H5Aget_space(a);
  hsize_t dim = 0;
  double x[8] = {0};
  if (t < 0 || sp < 0) {
    rc = rd_bad(r, what, "cannot read its type or dataspace");
  } else if (H5Tget_class(t) != H5T_FLOAT) {
    rc = rd_bad(r, what, "expected floating-point numbers, found %s data", class_name(H5Tget_class(t)));
  } else if (H5Sget_simple_extent_type(sp) != H5S_SIMPLE || H5Sget_simple_extent_ndims(sp) != 1 ||
             H5Sget_simple_extent_dims(sp, &dim, NULL) != 1 || dim != (hsize_t)n || n > 8) {
    shape_text(sp, shape, sizeof shape);
    rc = rd_bad(r, what, "expected %d numbers, found %s", n, shape);
  } else if (H5Aread(a, H5T_NATIVE_DOUBLE, x) < 0) {
    rc = rd_bad(r, what, "cannot read");
  }
  for (int i = 0; i < n && !rc; i++)
    if (!isfinite(x[i])) rc = rd_bad(r, what, "element %d is not a finite number", i);
  if (sp >= 0) H5Sclose(sp);
  if (t >= 0) H5Tclose(t);
  H5Aclose(a);
  if (rc == DS_OK) {
    memcpy(v, x, sizeof(double) * (size_t)n);
    *present = 1;
  }
  return rc;
}

/* The frame substeps and times of episode group gp: F each, substeps
 * increasing from >= 0, times finite. */
static int rd_frame_series(Rd* r, const char* gp, dsRunFrameInfo* fi) {
  char ps[96], pt[96];
  snprintf(ps, sizeof ps, "%s/substeps", gp);
  snprintf(pt, sizeof pt, "%s/times", gp);
  hsize_t ds[1] = {0}, dt[1] = {0};
  hid_t d = -1;
  size_t bytes = 0;
  int rc = rd_array(r, ps, H5T_INTEGER, 1, 0, ds, &d);
  if (rc == DS_OK && d < 0)
    return ds__puterr(r->err, r->errlen, DS_ERR_NOTFOUND, "%s: %s is missing (a log written before frames carried their times)",
                      r->path, ps);
  if (rc == DS_OK && (ds[0] < 1 || ds[0] > DS_RUNLOG_MAX_FRAMES))
    rc = rd_bad(r, ps, "expected 1 to %d frames, found %llu", DS_RUNLOG_MAX_FRAMES, (unsigned long long)ds[0]);
  if (rc == DS_OK) rc = rd_check_storage(r, d, ps, 1, ds, sizeof(int), 0, &bytes);
  if (rc == DS_OK) {
    fi->substeps = (int*)ds__malloc(sizeof(int) * (size_t)ds[0]);
    fi->times = (double*)ds__malloc(sizeof(double) * (size_t)ds[0]);
    if (!fi->substeps || !fi->times)
      rc = ds__puterr(r->err, r->errlen, DS_ERR_NOMEM, "%s: %s: out of memory", r->path, ps);
    else if (H5Dread(d, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, fi->substeps) < 0)
      rc = rd_bad(r, ps, "cannot read (corrupt data?)");
  }
  if (d >= 0) H5Dclose(d);
  d = -1;
  if (rc == DS_OK) rc = rd_array(r, pt, H5T_FLOAT, 1, 1, dt, &d);
  if (rc == DS_OK && dt[0] != ds[0])
    rc = rd_bad(r, pt, "%llu times for %llu substeps", (unsigned long long)dt[0], (unsigned long long)ds[0]);
  if (rc == DS_OK) rc = rd_check_storage(r, d, pt, 1, dt, sizeof(double), 0, &bytes);
  if (rc == DS_OK && H5Dread(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, fi->times) < 0)
    rc = rd_bad(r, pt, "cannot read (corrupt data?)");
  if (d >= 0) H5Dclose(d);
  for (int f = 0; rc == DS_OK && f < (int)ds[0]; f++) {
    if (fi->substeps[f] < 0 || (f > 0 && fi->substeps[f] <= fi->substeps[f - 1]))
      rc = rd_bad(r, ps, "element %d (%d) is not after the previous frame's", f, fi->substeps[f]);
    else if (!isfinite(fi->times[f]) || fi->times[f] < 0)
      rc = rd_bad(r, pt, "element %d is not a finite time >= 0", f);
  }
  if (rc == DS_OK) fi->nframes = (int)ds[0];
  return rc;
}

/* The intrinsics and the views of an episode (absent in single-view logs,
 * and in logs written before them). */
static int rd_cameras(Rd* r, hid_t g, const char* gp, dsRunFrameInfo* fi) {
  int has = 0;
  int rc = rd_vec_attr(r, g, gp, "camera_intrinsics", 4, fi->intr, &has);
  if (rc == DS_OK && !has) fi->intr[0] = fi->intr[1] = fi->intr[2] = fi->intr[3] = 0;
  long long nv = 0;
  if (rc == DS_OK) rc = rd_int_attr(r, g, gp, "camera_nviews", 0, 2, DS_RUNLOG_MAX_VIEWS, &nv, NULL, &has);
  for (int k = 0; rc == DS_OK && k < (has ? (int)nv : 0); k++) {
    char name[48];
    int h1 = 0, h2 = 0;
    snprintf(name, sizeof name, "camera_view%d", k);
    rc = rd_vec_attr(r, g, gp, name, 7, fi->views[k], &h1);
    if (rc == DS_OK && !h1) rc = rd_bad(r, gp, "attribute %s is missing (camera_nviews is %lld)", name, nv);
    snprintf(name, sizeof name, "camera_view%d_intrinsics", k);
    if (rc == DS_OK) rc = rd_vec_attr(r, g, gp, name, 4, fi->views[k] + 7, &h2);
  }
  if (rc == DS_OK && has) fi->nviews = (int)nv;
  return rc;
}

int ds_runlog_read_frame_info(const char* path, const char* which, dsRunFrameInfo* fi, char* err, size_t errlen) {
  if (!fi) return ds__puterr(err, errlen, DS_ERR_INVALID, "ds_runlog_read_frame_info: NULL argument");
  memset(fi, 0, sizeof *fi);
  Rd r;
  int rc = open_episode(path, which, 1, &r, err, errlen);
  if (rc) return rc;
  char gp[64];
  snprintf(gp, sizeof gp, "/episodes/%s", which);
  hid_t g = -1;
  rc = rd_open(&r, gp, H5I_GROUP, 0, &g);
  if (rc == DS_OK && g < 0) rc = ds__puterr(err, errlen, DS_ERR_NOTFOUND, "%s: no episode \"%s\"", path, which);
  if (rc == DS_OK) rc = rd_frame_series(&r, gp, fi);
  int has[3] = {0, 0, 0};
  if (rc == DS_OK) rc = rd_vec_attr(&r, g, gp, "camera_position", 3, fi->position, &has[0]);
  if (rc == DS_OK) rc = rd_vec_attr(&r, g, gp, "camera_look_at", 3, fi->look_at, &has[1]);
  if (rc == DS_OK) rc = rd_dbl_attr(&r, g, gp, "camera_fov", &fi->fov, &has[2]);
  fi->has_camera = rc == DS_OK && has[0] && has[1] && has[2] && fi->fov > 0 && fi->fov < 180;
  if (rc == DS_OK) rc = rd_cameras(&r, g, gp, fi);
  rd_close(g);
  H5Fclose(r.f);
  if (rc) ds_runlog_frame_info_free(fi);
  return rc;
}

void ds_runlog_frame_info_free(dsRunFrameInfo* fi) {
  if (!fi) return;
  ds__free(fi->times);
  ds__free(fi->substeps);
  memset(fi, 0, sizeof *fi);
}

int ds_runlog_read_params(const char* path, int* n, int* nparams, double** params, char* err, size_t errlen) {
  if (!n || !nparams || !params) return DS_ERR_INVALID;
  *params = NULL;
  *n = *nparams = 0;
  Rd r;
  int rc = open_run(path, &r, err, errlen);
  if (rc) return rc;
  const char* p = "/iterations/params";
  hsize_t dims[2] = {0, 0};
  hid_t d;
  rc = rd_array(&r, p, H5T_FLOAT, 2, 0, dims, &d);
  if (rc == DS_OK && d >= 0) {
    size_t bytes = 0;
    if (dims[1] < 1 || dims[1] > (1u << 24))
      rc = rd_bad(&r, p, "%llu parameters per iteration, expected 1 to %u", (unsigned long long)dims[1], 1u << 24);
    if (rc == DS_OK) rc = rd_check_storage(&r, d, p, 2, dims, sizeof(double), 1, &bytes);
    double* buf = NULL;
    if (rc == DS_OK) {
      buf = (double*)ds__malloc(bytes ? bytes : 1);
      if (!buf)
        rc = ds__puterr(err, errlen, DS_ERR_NOMEM, "%s: %s: out of memory", path, p);
      else if (dims[0] > 0 && H5Dread(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0)
        rc = rd_bad(&r, p, "cannot read (corrupt data?)");
    }
    if (rc) {
      ds__free(buf);
    } else {
      *params = buf;
      *n = (int)dims[0];
      *nparams = (int)dims[1];
    }
    H5Dclose(d);
  }
  H5Fclose(r.f);
  return rc;
}

int ds_runlog_read_config(const char* path, char** text, char* err, size_t errlen) {
  Rd r;
  int rc = open_run(path, &r, err, errlen);
  if (rc) return rc;
  hid_t d;
  rc = rd_open(&r, "/config", H5I_DATASET, 1, &d);
  if (rc == DS_OK) {
    rc = rd_string(&r, d, 0, "/config", RL_MAX_CONFIG, text);
    H5Dclose(d);
  }
  H5Fclose(r.f);
  return rc;
}

#endif /* DS_HAVE_HDF5 */

/* ---- /meta's string attributes by name (dsim report's build and end time) ---- */
#ifdef DS_HAVE_HDF5
int ds__runlog_read_meta_text(const char* path, const char* name, char* out, size_t outlen, char* err,
                              size_t errlen) {
  Rd r;
  out[0] = '\0';
  int rc = open_run(path, &r, err, errlen);
  if (rc) return rc;
  hid_t meta;
  rc = rd_open(&r, "/meta", H5I_GROUP, 1, &meta);
  if (rc == DS_OK) {
    rc = rd_str_attr(&r, meta, "/meta", name, 0, out, outlen);
    rd_close(meta);
  }
  H5Fclose(r.f);
  return rc;
}
#else
int ds__runlog_read_meta_text(const char* path, const char* name, char* out, size_t outlen, char* err,
                              size_t errlen) {
  out[0] = '\0';
  return ds__puterr(err, errlen, DS_ERR_UNSUPPORTED, "%s: dsim was built --without-hdf5: cannot read run logs", path);
}
#endif

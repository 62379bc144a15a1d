/* PNG read/write through libpng (8-bit RGBA). libpng reports errors by
 * longjmp; every buffer that can be live at that point is reachable from the
 * context struct, which the error branch frees, so a corrupt or truncated
 * file never leaks or crashes. libpng's own allocations go through the
 * library allocator. */
#define _POSIX_C_SOURCE 200809L /* open, fstat, fdopen */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <png.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dsim/image.h"
#include "base/internal.h"

/* The most libpng may allocate at once inside a read or write session: a
 * chunk's buffer (sized by the length the file declares) or a text chunk
 * decompressed into memory (a few hundred bytes of zTXt can claim hundreds
 * of MB). Rows of the largest image (DS_PNG_MAX_SIDE, dsim/image.h), zlib's
 * state and a frame's "dsim:frame" text are far below it. */
#define DS__PNG_CHUNK_MAX ((png_alloc_size_t)4 << 20)

typedef struct PngCtx {
  const char* path;
  FILE* fp;
  int truncated;      /* the read function hit end of file */
  int io_error;       /* the read/write function failed */
  int nomem;          /* our allocation failed inside the libpng session */
  int oversize;       /* libpng asked for more than DS__PNG_CHUNK_MAX (a declared chunk length) */
  char msg[200];      /* libpng's message */
  uint8_t* buf;       /* image being read (owned until returned) */
  png_bytep* rows;    /* row pointers */
} PngCtx;


static void png_err_cb(png_structp png, png_const_charp msg) {
  PngCtx* c = (PngCtx*)png_get_error_ptr(png);
  snprintf(c->msg, sizeof c->msg, "%s", msg ? msg : "unknown error");
  png_longjmp(png, 1);
}

static void png_warn_cb(png_structp png, png_const_charp msg) {
  (void)png;
  (void)msg;
}

static png_voidp png_malloc_cb(png_structp png, png_alloc_size_t n) {
  /* libpng sizes a chunk's buffer by the length the file declares, before
   * reading it, whatever png_set_chunk_malloc_max says in this version: a
   * 68-byte file that declares a 550 MB text chunk asks for 550 MB here. Its
   * own needs (rows, zlib state) stay below the cap; refusing makes it skip
   * an ancillary chunk or fail the read as a format error. */
  if (n > DS__PNG_CHUNK_MAX) {
    PngCtx* c = (PngCtx*)png_get_mem_ptr(png);
    if (c) c->oversize = 1;
    return NULL;
  }
  void* p = ds__malloc((size_t)n);
  if (!p) {
    PngCtx* c = (PngCtx*)png_get_mem_ptr(png);
    if (c) c->nomem = 1;
  }
  return p;
}

static void png_free_cb(png_structp png, png_voidp p) {
  (void)png;
  ds__free(p);
}

static void png_read_cb(png_structp png, png_bytep data, size_t len) {
  PngCtx* c = (PngCtx*)png_get_io_ptr(png);
  if (fread(data, 1, len, c->fp) != len) {
    if (ferror(c->fp)) {
      c->io_error = 1;
      png_error(png, "read error");
    }
    c->truncated = 1;
    png_error(png, "unexpected end of file");
  }
}

static void png_write_cb(png_structp png, png_bytep data, size_t len) {
  PngCtx* c = (PngCtx*)png_get_io_ptr(png);
  if (fwrite(data, 1, len, c->fp) != len) {
    c->io_error = 1;
    png_error(png, strerror(errno));
  }
}

static void png_flush_cb(png_structp png) {
  PngCtx* c = (PngCtx*)png_get_io_ptr(png);
  if (fflush(c->fp) != 0) {
    c->io_error = 1;
    png_error(png, strerror(errno));
  }
}

/* Tell libpng the cap too (versions that honour it refuse the chunk with
 * their own message before asking png_malloc_cb). */
static void read_limits(png_structp png) {
  png_set_chunk_malloc_max(png, DS__PNG_CHUNK_MAX);
}

/* The libpng session of a read; returns 0 with c->buf holding the image, or
 * a DS_ERR code (the caller writes the message). */
static int read_session(PngCtx* c, int* width, int* height) {
  png_structp png;
  png_infop info;
  png_uint_32 w, h, y;
  int depth, ctype;
  png = png_create_read_struct_2(PNG_LIBPNG_VER_STRING, c, png_err_cb, png_warn_cb, c,
                                 png_malloc_cb, png_free_cb);
  if (!png) return DS_ERR_NOMEM;
  read_limits(png);
  info = png_create_info_struct(png);
  if (!info) {
    png_destroy_read_struct(&png, NULL, NULL);
    return DS_ERR_NOMEM;
  }
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, NULL);
    ds__free(c->rows);
    c->rows = NULL;
    ds__free(c->buf);
    c->buf = NULL;
    if (c->nomem) return DS_ERR_NOMEM;
    if (c->io_error) return DS_ERR_IO;
    return DS_ERR_FORMAT;
  }
  png_set_read_fn(png, c, png_read_cb);
  png_set_sig_bytes(png, 8);
  png_read_info(png, info);
  w = png_get_image_width(png, info);
  h = png_get_image_height(png, info);
  depth = png_get_bit_depth(png, info);
  ctype = png_get_color_type(png, info);
  if (w == 0 || h == 0 || w > DS_PNG_MAX_SIDE || h > DS_PNG_MAX_SIDE) {
    png_destroy_read_struct(&png, &info, NULL);
    *width = (int)(w > 0x7fffffff ? 0x7fffffff : w);
    *height = (int)(h > 0x7fffffff ? 0x7fffffff : h);
    return DS_ERR_RANGE;
  }
  /* everything to 8-bit RGBA */
  if (ctype == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (ctype == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  if (png_get_valid(png, info, PNG_INFO_tRNS)) png_set_tRNS_to_alpha(png);
  if (depth == 16) png_set_strip_16(png);
  if (ctype == PNG_COLOR_TYPE_GRAY || ctype == PNG_COLOR_TYPE_GRAY_ALPHA) png_set_gray_to_rgb(png);
  if (!(ctype & PNG_COLOR_MASK_ALPHA) && !png_get_valid(png, info, PNG_INFO_tRNS))
    png_set_filler(png, 0xFF, PNG_FILLER_AFTER);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  if (png_get_rowbytes(png, info) != (size_t)w * 4) png_error(png, "unsupported pixel layout");
  c->buf = (uint8_t*)ds__malloc((size_t)w * h * 4);
  c->rows = (png_bytep*)ds__malloc(sizeof(png_bytep) * h);
  if (!c->buf || !c->rows) {
    c->nomem = 1;
    png_error(png, "out of memory");
  }
  for (y = 0; y < h; y++) c->rows[y] = c->buf + (size_t)y * w * 4;
  png_read_image(png, c->rows);
  png_read_end(png, NULL);
  png_destroy_read_struct(&png, &info, NULL);
  ds__free(c->rows);
  c->rows = NULL;
  *width = (int)w;
  *height = (int)h;
  return DS_OK;
}

/* fopen(path, "rb") of a regular file only: reading a FIFO blocks until a
 * writer comes (a FIFO named frame.png in a frame folder hung `dsim sysid`)
 * and a device may never end. O_NONBLOCK makes the open itself return for a
 * FIFO without a writer; fstat of that descriptor then tells what it is. */
static FILE* open_regular(const char* path, int* rc, char* err, size_t errlen) {
  const int fd = open(path, O_RDONLY | O_NONBLOCK);
  if (fd < 0) {
    *rc = ds__puterr(err, errlen, DS_ERR_IO, "%s: cannot open (%s)", path, strerror(errno));
    return NULL;
  }
  struct stat st;
  if (fstat(fd, &st) != 0) st.st_mode = 0;
  if (!S_ISREG(st.st_mode)) {
    const char* kind = !st.st_mode               ? "unreadable (fstat failed)"
                       : S_ISFIFO(st.st_mode) ? "a FIFO"
                       : S_ISDIR(st.st_mode)  ? "a directory"
                                              : "a device or socket";
    *rc = ds__puterr(err, errlen, DS_ERR_IO, "%s: %s%s, expected a regular PNG file", path,
                     st.st_mode ? "is " : "", kind);
    close(fd);
    return NULL;
  }
  FILE* fp = fcntl(fd, F_SETFL, 0) == 0 ? fdopen(fd, "rb") : NULL;
  if (!fp) {
    *rc = ds__puterr(err, errlen, DS_ERR_IO, "%s: cannot open (%s)", path, strerror(errno));
    close(fd);
  }
  return fp;
}

int ds_png_read(const char* path, uint8_t** rgba, int* width, int* height, char* err,
                size_t errlen) {
  PngCtx c;
  unsigned char sig[8];
  size_t nsig;
  int rc, w = 0, h = 0;
  if (err && errlen) err[0] = '\0';
  if (rgba) *rgba = NULL;
  if (!path || !rgba || !width || !height)
    return ds__puterr(err, errlen, DS_ERR_INVALID, "ds_png_read: NULL argument");
  memset(&c, 0, sizeof c);
  c.path = path;
  c.fp = open_regular(path, &rc, err, errlen);
  if (!c.fp) return rc;
  nsig = fread(sig, 1, 8, c.fp);
  if (nsig < 8 || png_sig_cmp(sig, 0, 8) != 0) {
    int ioerr = ferror(c.fp);
    fclose(c.fp);
    if (ioerr) return ds__puterr(err, errlen, DS_ERR_IO, "%s: read error", path);
    if (nsig > 0 && png_sig_cmp(sig, 0, nsig) == 0)
      return ds__puterr(err, errlen, DS_ERR_FORMAT, "%s: truncated (%u bytes, inside the PNG signature)",
                    path, (unsigned)nsig);
    return ds__puterr(err, errlen, DS_ERR_FORMAT, "%s: not a PNG file", path);
  }
  rc = read_session(&c, &w, &h);
  fclose(c.fp);
  switch (rc) {
    case DS_OK:
      *rgba = c.buf;
      *width = w;
      *height = h;
      return DS_OK;
    case DS_ERR_NOMEM:
      return ds__puterr(err, errlen, rc, "%s: out of memory", path);
    case DS_ERR_RANGE:
      return ds__puterr(err, errlen, rc, "%s: %dx%d image: each side must be 1..%d pixels", path, w, h,
                    DS_PNG_MAX_SIDE);
    case DS_ERR_IO:
      return ds__puterr(err, errlen, rc, "%s: read error (libpng: %s)", path, c.msg);
    default:
      if (c.truncated) return ds__puterr(err, errlen, DS_ERR_FORMAT, "%s: truncated (libpng: %s)", path, c.msg);
      if (c.oversize)
        return ds__puterr(err, errlen, DS_ERR_FORMAT, "%s: corrupt PNG: a chunk declares more than %d MiB (libpng: %s)",
                          path, (int)(DS__PNG_CHUNK_MAX >> 20), c.msg);
      return ds__puterr(err, errlen, DS_ERR_FORMAT, "%s: corrupt PNG (libpng: %s)", path, c.msg);
  }
}

static int write_session(PngCtx* c, const uint8_t* rgba, int w, int h, const char* key, const char* text) {
  png_structp png;
  png_infop info;
  int y;
  png = png_create_write_struct_2(PNG_LIBPNG_VER_STRING, c, png_err_cb, png_warn_cb, c,
                                  png_malloc_cb, png_free_cb);
  if (!png) return DS_ERR_NOMEM;
  info = png_create_info_struct(png);
  if (!info) {
    png_destroy_write_struct(&png, NULL);
    return DS_ERR_NOMEM;
  }
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    if (c->nomem) return DS_ERR_NOMEM;
    return c->io_error ? DS_ERR_IO : DS_ERR_FORMAT;
  }
  png_set_write_fn(png, c, png_write_cb, png_flush_cb);
  png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, 8, PNG_COLOR_TYPE_RGB_ALPHA,
               PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  if (key && text) { /* before the image data: a reader finds it with the header */
    png_text t;
    memset(&t, 0, sizeof t);
    t.compression = PNG_TEXT_COMPRESSION_NONE;
    t.key = (png_charp)(uintptr_t)key;
    t.text = (png_charp)(uintptr_t)text;
    t.text_length = strlen(text);
    png_set_text(png, info, &t, 1);
  }
  png_write_info(png, info);
  for (y = 0; y < h; y++) png_write_row(png, (png_const_bytep)(rgba + (size_t)y * w * 4));
  png_write_end(png, NULL);
  png_destroy_write_struct(&png, &info);
  return DS_OK;
}

int ds_png_write(const char* path, const uint8_t* rgba, int width, int height, char* err,
                 size_t errlen) {
  return ds_png_write_text(path, rgba, width, height, NULL, NULL, err, errlen);
}

int ds_png_write_text(const char* path, const uint8_t* rgba, int width, int height, const char* key,
                      const char* text, char* err, size_t errlen) {
  PngCtx c;
  int rc;
  if (err && errlen) err[0] = '\0';
  if (!path || !rgba) return ds__puterr(err, errlen, DS_ERR_INVALID, "ds_png_write: NULL argument");
  if (width <= 0 || height <= 0 || width > DS_PNG_MAX_SIDE || height > DS_PNG_MAX_SIDE)
    return ds__puterr(err, errlen, DS_ERR_RANGE, "%s: %dx%d image: each side must be 1..%d pixels", path,
                  width, height, DS_PNG_MAX_SIDE);
  memset(&c, 0, sizeof c);
  c.path = path;
  c.fp = fopen(path, "wb");
  if (!c.fp) return ds__puterr(err, errlen, DS_ERR_IO, "%s: cannot create (%s)", path, strerror(errno));
  if (key && (!key[0] || strlen(key) > 79)) {
    fclose(c.fp);
    remove(path);
    return ds__puterr(err, errlen, DS_ERR_INVALID, "%s: text key \"%s\": expected 1 to 79 characters", path, key);
  }
  rc = write_session(&c, rgba, width, height, key, text);
  if (fclose(c.fp) != 0 && rc == DS_OK) {
    rc = DS_ERR_IO;
    snprintf(c.msg, sizeof c.msg, "%s", strerror(errno));
  }
  if (rc != DS_OK) {
    remove(path);
    if (rc == DS_ERR_NOMEM) return ds__puterr(err, errlen, rc, "%s: out of memory", path);
    return ds__puterr(err, errlen, rc, "%s: write failed (%s)", path, c.msg);
  }
  return DS_OK;
}

void ds_image_free(void* p) { ds__free(p); }

void ds_image_to_u8(const dsReal* img, int width, int height, uint8_t* out) {
  size_t n = (size_t)(width > 0 ? width : 0) * (size_t)(height > 0 ? height : 0) * 4, i;
  for (i = 0; i < n; i++) {
    double v = img[i];
    if (!(v > 0)) v = 0; /* NaN -> 0 */
    if (v > 1) v = 1;
    out[i] = (uint8_t)(v * 255.0 + 0.5);
  }
}

void ds_image_from_u8(const uint8_t* in, int width, int height, dsReal* img) {
  size_t n = (size_t)(width > 0 ? width : 0) * (size_t)(height > 0 ? height : 0) * 4, i;
  for (i = 0; i < n; i++) img[i] = (dsReal)(in[i] / 255.0);
}

int ds_png_read_real(const char* path, dsReal** img, int* width, int* height, char* err,
                     size_t errlen) {
  uint8_t* b = NULL;
  int rc;
  if (img) *img = NULL;
  if (!img) return ds__puterr(err, errlen, DS_ERR_INVALID, "ds_png_read_real: NULL argument");
  rc = ds_png_read(path, &b, width, height, err, errlen);
  if (rc) return rc;
  *img = (dsReal*)ds__malloc(sizeof(dsReal) * (size_t)*width * (size_t)*height * 4);
  if (!*img) {
    ds__free(b);
    return ds__puterr(err, errlen, DS_ERR_NOMEM, "%s: out of memory", path);
  }
  ds_image_from_u8(b, *width, *height, *img);
  ds__free(b);
  return DS_OK;
}

int ds_png_write_real(const char* path, const dsReal* img, int width, int height, char* err,
                      size_t errlen) {
  uint8_t* b;
  int rc;
  if (!img || !path) return ds__puterr(err, errlen, DS_ERR_INVALID, "ds_png_write_real: NULL argument");
  if (width <= 0 || height <= 0 || width > DS_PNG_MAX_SIDE || height > DS_PNG_MAX_SIDE)
    return ds__puterr(err, errlen, DS_ERR_RANGE, "%s: %dx%d image: each side must be 1..%d pixels", path,
                  width, height, DS_PNG_MAX_SIDE);
  b = (uint8_t*)ds__malloc((size_t)width * height * 4);
  if (!b) return ds__puterr(err, errlen, DS_ERR_NOMEM, "%s: out of memory", path);
  ds_image_to_u8(img, width, height, b);
  rc = ds_png_write(path, b, width, height, err, errlen);
  ds__free(b);
  return rc;
}

/* The header of c->fp (after the signature) up to the image data: the
 * text chunks there, key's copied into text. */
static int text_session(PngCtx* c, const char* key, char* text, size_t textlen, int* found) {
  png_structp png = png_create_read_struct_2(PNG_LIBPNG_VER_STRING, c, png_err_cb, png_warn_cb, c, png_malloc_cb,
                                             png_free_cb);
  if (!png) return DS_ERR_NOMEM;
  read_limits(png);
  png_infop info = png_create_info_struct(png);
  if (!info) {
    png_destroy_read_struct(&png, NULL, NULL);
    return DS_ERR_NOMEM;
  }
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, NULL);
    if (c->nomem) return DS_ERR_NOMEM;
    return c->io_error ? DS_ERR_IO : DS_ERR_FORMAT;
  }
  png_set_read_fn(png, c, png_read_cb);
  png_set_sig_bytes(png, 8);
  png_read_info(png, info);
  png_textp t = NULL;
  int n = 0;
  png_get_text(png, info, &t, &n);
  for (int i = 0; i < n && !*found; i++)
    if (t[i].key && !strcmp(t[i].key, key)) {
      snprintf(text, textlen, "%s", t[i].text ? t[i].text : "");
      *found = 1;
    }
  png_destroy_read_struct(&png, &info, NULL);
  return DS_OK;
}

int ds_png_read_text(const char* path, const char* key, char* text, size_t textlen, char* err, size_t errlen) {
  if (err && errlen) err[0] = '\0';
  if (!path || !key || !text || !textlen) return ds__puterr(err, errlen, DS_ERR_INVALID, "ds_png_read_text: NULL argument");
  text[0] = '\0';
  PngCtx c;
  memset(&c, 0, sizeof c);
  c.path = path;
  c.fp = fopen(path, "rb");
  if (!c.fp) return ds__puterr(err, errlen, DS_ERR_IO, "%s: cannot open (%s)", path, strerror(errno));
  unsigned char sig[8];
  const size_t nsig = fread(sig, 1, 8, c.fp);
  if (nsig < 8 || png_sig_cmp(sig, 0, 8) != 0) {
    fclose(c.fp);
    return ds__puterr(err, errlen, DS_ERR_FORMAT, "%s: not a PNG file", path);
  }
  int found = 0;
  const int rc = text_session(&c, key, text, textlen, &found);
  fclose(c.fp);
  if (rc == DS_ERR_NOMEM) return ds__puterr(err, errlen, rc, "%s: out of memory", path);
  if (rc) return ds__puterr(err, errlen, rc, "%s: corrupt PNG header (libpng: %s)", path, c.msg);
  if (!found) return ds__puterr(err, errlen, DS_ERR_NOTFOUND, "%s: no text \"%s\"", path, key);
  return DS_OK;
}

/* PNG I/O: byte-exact round trip, dsReal conversions, grey and palette
 * files (built byte by byte here with stored deflate blocks), and every kind
 * of damage - missing file, foreign file, empty file, truncation at many
 * lengths, CRC and data corruption, unwritable path, allocation failures -
 * giving an error that names the file, never a crash or a leak (run under
 * ASan in CI). Files go to a fresh directory under $DS_BUILDDIR. */
#define _POSIX_C_SOURCE 200809L
#include "config.h"

#include <stdint.h>
#include <unistd.h>

#include "dsim/image.h"
#include "tests/dstest.h"

static char g_dir[512];

static void path_of(char* out, size_t n, const char* name) { snprintf(out, n, "%s/%s", g_dir, name); }

static int write_bytes(const char* path, const uint8_t* b, size_t n) {
  FILE* f = fopen(path, "wb");
  if (!f) return -1;
  if (n && fwrite(b, 1, n, f) != n) {
    fclose(f);
    return -1;
  }
  return fclose(f);
}

static uint8_t* read_bytes(const char* path, size_t* n) {
  FILE* f = fopen(path, "rb");
  uint8_t* b;
  long len;
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  len = ftell(f);
  fseek(f, 0, SEEK_SET);
  b = (uint8_t*)malloc((size_t)len + 1);
  *n = fread(b, 1, (size_t)len, f);
  fclose(f);
  return b;
}

/* ---- a minimal PNG writer for fixtures: stored deflate blocks ---- */
static uint32_t crc_table[256];
static void crc_init(void) {
  for (uint32_t n = 0; n < 256; n++) {
    uint32_t c = n;
    for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    crc_table[n] = c;
  }
}
static uint32_t crc32_of(const uint8_t* b, size_t n) {
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; i++) c = crc_table[(c ^ b[i]) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}
static void put32(uint8_t* p, uint32_t v) {
  p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}
static size_t chunk(uint8_t* out, const char* type, const uint8_t* data, uint32_t n) {
  put32(out, n);
  memcpy(out + 4, type, 4);
  if (n) memcpy(out + 8, data, n);
  put32(out + 8 + n, crc32_of(out + 4, n + 4));
  return 12 + n;
}
/* PNG with the given IHDR colour type and raw scanlines (filter byte 0 each) */
static size_t make_png(uint8_t* out, uint32_t w, uint32_t h, uint8_t ctype, const uint8_t* raw,
                       size_t rawlen, const uint8_t* plte, uint32_t nplte, const uint8_t* trns,
                       uint32_t ntrns) {
  static const uint8_t sig[8] = {137, 80, 78, 71, 13, 10, 26, 10};
  uint8_t ihdr[13], z[1024];
  size_t n = 0, zn = 0;
  uint32_t a = 1, b = 0;
  memcpy(out, sig, 8);
  n = 8;
  put32(ihdr, w);
  put32(ihdr + 4, h);
  ihdr[8] = 8, ihdr[9] = ctype, ihdr[10] = 0, ihdr[11] = 0, ihdr[12] = 0;
  n += chunk(out + n, "IHDR", ihdr, 13);
  if (plte) n += chunk(out + n, "PLTE", plte, nplte);
  if (trns) n += chunk(out + n, "tRNS", trns, ntrns);
  /* zlib: header, one final stored block, Adler-32 */
  z[zn++] = 0x78, z[zn++] = 0x01;
  z[zn++] = 1;
  z[zn++] = (uint8_t)(rawlen & 0xFF), z[zn++] = (uint8_t)(rawlen >> 8);
  z[zn++] = (uint8_t)(~rawlen & 0xFF), z[zn++] = (uint8_t)((~rawlen >> 8) & 0xFF);
  memcpy(z + zn, raw, rawlen);
  zn += rawlen;
  for (size_t i = 0; i < rawlen; i++) a = (a + raw[i]) % 65521, b = (b + a) % 65521;
  put32(z + zn, (b << 16) | a);
  zn += 4;
  n += chunk(out + n, "IDAT", z, (uint32_t)zn);
  n += chunk(out + n, "IEND", NULL, 0);
  return n;
}

static int g_fail_after = -1;
static void* fail_malloc(size_t n) { return g_fail_after-- == 0 ? NULL : malloc(n); }
static void* fail_realloc(void* p, size_t n) { return g_fail_after-- == 0 ? NULL : realloc(p, n); }
static void* fail_calloc(size_t c, size_t n) { return g_fail_after-- == 0 ? NULL : calloc(c, n); }
static size_t g_max_alloc;
static void* max_malloc(size_t n) {
  if (n > g_max_alloc) g_max_alloc = n;
  return malloc(n);
}
static void* max_realloc(void* p, size_t n) {
  if (n > g_max_alloc) g_max_alloc = n;
  return realloc(p, n);
}
static void* max_calloc(size_t c, size_t n) {
  if (c * n > g_max_alloc) g_max_alloc = c * n;
  return calloc(c, n);
}

int main(void) {
  const char* bd = getenv("DS_BUILDDIR");
  char path[700], err[512];
  int w = 37, h = 23, rw = 0, rh = 0, i, rc;
  uint8_t* img = (uint8_t*)malloc((size_t)w * h * 4);
  uint8_t* back = NULL;
  uint8_t* file;
  size_t flen = 0;

  snprintf(g_dir, sizeof g_dir, "%s/tests/tmp-png-XXXXXX", bd && *bd ? bd : ".");
  if (!mkdtemp(g_dir)) {
    snprintf(g_dir, sizeof g_dir, "/tmp/dsim-png-XXXXXX");
    if (!mkdtemp(g_dir)) DST_SKIP("cannot create a temporary directory");
  }
  crc_init();

  /* round trip */
  for (i = 0; i < w * h * 4; i++) img[i] = (uint8_t)((i * 7919u + (i >> 3)) & 0xFF);
  path_of(path, sizeof path, "frame.png");
  CHECK_INT_EQ(ds_png_write(path, img, w, h, err, sizeof err), DS_OK);
  CHECK_INT_EQ(ds_png_read(path, &back, &rw, &rh, err, sizeof err), DS_OK);
  CHECK_INT_EQ(rw, w);
  CHECK_INT_EQ(rh, h);
  CHECK(back && memcmp(back, img, (size_t)w * h * 4) == 0);
  ds_image_free(back);
  back = NULL;

  /* dsReal conversions and their round trip */
  {
    dsReal px[8] = {0, 1, 0.5, -0.2, 1.7, 0.25, 0.999, 0.001}, q[8];
    uint8_t b[8];
    dsReal* real = NULL;
    ds_image_to_u8(px, 2, 1, b);
    CHECK_INT_EQ(b[0], 0);
    CHECK_INT_EQ(b[1], 255);
    CHECK_INT_EQ(b[2], 128);
    CHECK_INT_EQ(b[3], 0);
    CHECK_INT_EQ(b[4], 255);
    CHECK_INT_EQ(b[5], 64);
    ds_image_from_u8(b, 2, 1, q);
    CHECK_CLOSE(q[1], 1.0, 0, 0);
    CHECK_CLOSE(q[2], 128 / 255.0, 1e-6, 0);
    for (i = 0; i < 8; i++) CHECK(fabs(q[i] - fmin(fmax(px[i], 0), 1)) <= 0.5 / 255 + 1e-7);
    path_of(path, sizeof path, "real.png");
    CHECK_INT_EQ(ds_png_write_real(path, px, 2, 1, err, sizeof err), DS_OK);
    CHECK_INT_EQ(ds_png_read_real(path, &real, &rw, &rh, err, sizeof err), DS_OK);
    CHECK(real != NULL);
    if (real)
      for (i = 0; i < 8; i++) CHECK_CLOSE(real[i], q[i], 0, 0);
    ds_image_free(real);
  }

  /* grey and palette files (with transparency) come back as RGBA */
  {
    uint8_t raw[] = {0, 10, 200, 0, 255, 0}, buf[512];
    uint8_t plte[] = {255, 0, 0, 0, 255, 0}, trns[] = {128}, rawp[] = {0, 1, 0};
    size_t n = make_png(buf, 2, 2, 0, raw, sizeof raw, NULL, 0, NULL, 0);
    path_of(path, sizeof path, "grey.png");
    write_bytes(path, buf, n);
    rc = ds_png_read(path, &back, &rw, &rh, err, sizeof err);
    CHECK_INT_EQ(rc, DS_OK);
    if (rc == DS_OK) {
      static const uint8_t want[16] = {10, 10, 10, 255, 200, 200, 200, 255, 255, 255, 255, 255, 0, 0, 0, 255};
      CHECK_INT_EQ(rw, 2);
      CHECK_INT_EQ(rh, 2);
      CHECK(memcmp(back, want, 16) == 0);
    } else {
      fprintf(stderr, "grey: %s\n", err);
    }
    ds_image_free(back);
    back = NULL;
    n = make_png(buf, 2, 1, 3, rawp, sizeof rawp, plte, sizeof plte, trns, sizeof trns);
    path_of(path, sizeof path, "palette.png");
    write_bytes(path, buf, n);
    rc = ds_png_read(path, &back, &rw, &rh, err, sizeof err);
    CHECK_INT_EQ(rc, DS_OK);
    if (rc == DS_OK) {
      static const uint8_t want[8] = {0, 255, 0, 255, 255, 0, 0, 128};
      /* pixel 0: index 1 (green, opaque: no tRNS entry); pixel 1: index 0 (red, alpha 128) */
      CHECK(memcmp(back, want, 8) == 0);
    } else {
      fprintf(stderr, "palette: %s\n", err);
    }
    ds_image_free(back);
    back = NULL;
  }

  /* missing file */
  path_of(path, sizeof path, "missing.png");
  back = (uint8_t*)1;
  CHECK_INT_EQ(ds_png_read(path, &back, &rw, &rh, err, sizeof err), DS_ERR_IO);
  CHECK(back == NULL);
  CHECK_STR_CONTAINS(err, "missing.png");

  /* foreign and empty files */
  path_of(path, sizeof path, "goal.png");
  write_bytes(path, (const uint8_t*)"hello, world\n", 13);
  CHECK_INT_EQ(ds_png_read(path, &back, &rw, &rh, err, sizeof err), DS_ERR_FORMAT);
  CHECK_STR_CONTAINS(err, "goal.png: not a PNG file");
  write_bytes(path, NULL, 0);
  CHECK_INT_EQ(ds_png_read(path, &back, &rw, &rh, err, sizeof err), DS_ERR_FORMAT);
  CHECK_STR_CONTAINS(err, "goal.png: not a PNG file");

  /* truncation at every length of a real file's first 100 bytes and at a
   * spread of later lengths, up to missing the last byte */
  path_of(path, sizeof path, "frame.png");
  file = read_bytes(path, &flen);
  CHECK(file != NULL && flen > 100);
  {
    int bad = 0, tried = 0;
    path_of(path, sizeof path, "goal.png");
    for (size_t cut = 1; file && cut < flen; cut += cut < 100 ? 1 : 97) {
      write_bytes(path, file, cut);
      back = NULL;
      rc = ds_png_read(path, &back, &rw, &rh, err, sizeof err);
      tried++;
      if (rc != DS_ERR_FORMAT || back != NULL || !strstr(err, "goal.png: truncated")) {
        if (bad++ < 3) fprintf(stderr, "cut %zu: rc %d, '%s'\n", cut, rc, err);
      }
    }
    write_bytes(path, file, flen - 1);
    rc = ds_png_read(path, &back, &rw, &rh, err, sizeof err);
    CHECK_INT_EQ(rc, DS_ERR_FORMAT);
    CHECK_STR_CONTAINS(err, "goal.png: truncated (libpng: ");
    CHECK(tried > 100);
    CHECK_INT_EQ(bad, 0);
  }

  /* CRC error in IHDR, and damaged compressed data (CRC recomputed so that
   * zlib, not the CRC check, finds it) */
  if (file) {
    uint8_t* c2 = (uint8_t*)malloc(flen);
    memcpy(c2, file, flen);
    c2[17] ^= 0x40; /* inside the IHDR width */
    write_bytes(path, c2, flen);
    CHECK_INT_EQ(ds_png_read(path, &back, &rw, &rh, err, sizeof err), DS_ERR_FORMAT);
    CHECK_STR_CONTAINS(err, "goal.png: corrupt PNG (libpng: ");
    CHECK(back == NULL);
    {
      uint8_t bufz[512], raw[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 0, 9, 10, 11, 12, 13, 14, 15, 16};
      size_t n = make_png(bufz, 2, 2, 6, raw, sizeof raw, NULL, 0, NULL, 0);
      /* stored-block LEN/NLEN mismatch: fix up the IDAT CRC afterwards */
      size_t idat = 8 + 25;                /* IDAT chunk starts after sig + IHDR */
      bufz[idat + 8 + 3] ^= 0x01;          /* LEN low byte */
      put32(bufz + idat + 8 + (n - idat - 12 - 12), 0);
      {
        uint32_t len = ((uint32_t)bufz[idat] << 24) | (bufz[idat + 1] << 16) | (bufz[idat + 2] << 8) | bufz[idat + 3];
        put32(bufz + idat + 8 + len, crc32_of(bufz + idat + 4, len + 4));
      }
      write_bytes(path, bufz, n);
      back = NULL;
      rc = ds_png_read(path, &back, &rw, &rh, err, sizeof err);
      CHECK_INT_EQ(rc, DS_ERR_FORMAT);
      CHECK_STR_CONTAINS(err, "goal.png: ");
      CHECK(back == NULL);
    }
    free(c2);
  }

  /* oversized header */
  {
    uint8_t bufz[512], raw[] = {0, 1, 2, 3, 4};
    size_t n = make_png(bufz, 1, 1, 6, raw, sizeof raw, NULL, 0, NULL, 0);
    put32(bufz + 16, 100000); /* width */
    put32(bufz + 29, crc32_of(bufz + 12, 17));
    write_bytes(path, bufz, n);
    CHECK_INT_EQ(ds_png_read(path, &back, &rw, &rh, err, sizeof err), DS_ERR_RANGE);
    CHECK_STR_CONTAINS(err, "goal.png: 100000x1 image");
  }

  /* unwritable path; invalid arguments */
  path_of(path, sizeof path, "no/such/dir/out.png");
  CHECK_INT_EQ(ds_png_write(path, img, w, h, err, sizeof err), DS_ERR_IO);
  CHECK_STR_CONTAINS(err, "out.png: cannot create");
  path_of(path, sizeof path, "x.png");
  CHECK_INT_EQ(ds_png_write(path, img, 0, h, err, sizeof err), DS_ERR_RANGE);
  CHECK_INT_EQ(ds_png_write(NULL, img, w, h, err, sizeof err), DS_ERR_INVALID);
  CHECK_INT_EQ(ds_png_read(path, NULL, &rw, &rh, NULL, 0), DS_ERR_INVALID);

  /* allocation failures at every point of a read and a write: an error or
   * success, never a leak */
  {
    int k, ok_r = 0, ok_w = 0;
    path_of(path, sizeof path, "frame.png");
    for (k = 0; k < 40; k++) {
      ds_replace_allocator(fail_malloc, fail_realloc, fail_calloc, free);
      g_fail_after = k;
      back = NULL;
      rc = ds_png_read(path, &back, &rw, &rh, err, sizeof err);
      ds_replace_allocator(NULL, NULL, NULL, NULL);
      if (rc == DS_OK) {
        ok_r++;
        CHECK(memcmp(back, img, (size_t)w * h * 4) == 0);
        ds_image_free(back);
      } else {
        CHECK_INT_EQ(rc, DS_ERR_NOMEM);
        CHECK(back == NULL);
      }
    }
    path_of(path, sizeof path, "out.png");
    for (k = 0; k < 40; k++) {
      ds_replace_allocator(fail_malloc, fail_realloc, fail_calloc, free);
      g_fail_after = k;
      rc = ds_png_write(path, img, w, h, err, sizeof err);
      ds_replace_allocator(NULL, NULL, NULL, NULL);
      if (rc == DS_OK) ok_w++;
      else CHECK_INT_EQ(rc, DS_ERR_NOMEM);
    }
    CHECK(ok_r > 0);
    CHECK(ok_w > 0);
  }

  /* a text chunk that declares 553 MB in a 68-byte file (found by
   * scripts/fuzz-video): libpng sized its buffer by the declared length
   * before reading it; now no allocation inside a read exceeds a few MB and
   * both readers answer at once (the text is not there, or a format error) */
  {
    static const uint8_t liar[] = {
        0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52, 0x00,
        0x00, 0x00, 0x05, 0x00, 0x00, 0x00, 0x02, 0x08, 0x02, 0x00, 0x00, 0x00, 0x1f, 0x08, 0x81, 0x0a, 0x21,
        0x00, 0x00, 0x16, 0x74, 0x45, 0x58, 0x74, 0x64, 0x73, 0x69, 0x6d, 0x3a, 0x66, 0x72, 0x61, 0x0c, 0x5b,
        0x92, 0xbe, 0x9f, 0x37, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82};
    char text[64];
    path_of(path, sizeof path, "x.png");
    CHECK_INT_EQ(write_bytes(path, liar, sizeof liar), 0);
    ds_replace_allocator(max_malloc, max_realloc, max_calloc, free);
    g_max_alloc = 0;
    rc = ds_png_read_text(path, "dsim:frame", text, sizeof text, err, sizeof err);
    CHECK(rc == DS_OK || rc == DS_ERR_FORMAT);
    if (rc == DS_OK) CHECK_STR_EQ(text, "");
    back = NULL;
    rc = ds_png_read(path, &back, &rw, &rh, err, sizeof err);
    ds_replace_allocator(NULL, NULL, NULL, NULL);
    CHECK_INT_EQ(rc, DS_ERR_FORMAT);
    CHECK(back == NULL);
    CHECK(strstr(err, "x.png") != NULL);
    CHECK(g_max_alloc <= ((size_t)8 << 20));
  }

  /* clean up */
  {
    static const char* names[] = {"frame.png", "real.png", "grey.png", "palette.png", "goal.png",
                                  "out.png", "x.png"};
    for (i = 0; i < (int)(sizeof names / sizeof names[0]); i++) {
      path_of(path, sizeof path, names[i]);
      remove(path);
    }
    rmdir(g_dir);
  }
  free(file);
  free(img);
  return DST_RESULT();
}

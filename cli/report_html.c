/* The HTML of `dsim report`: escaping, pictures as data: URIs, the page's
 * head. Everything the page shows is in the file: pictures are PNG (libpng,
 * through ds_png_write) or GIF (giflib, through the export's writer) bytes in
 * base64 data: URIs, plots are inline SVG, the style is inline, and the
 * scripts (the frame player of a build without giflib, the pictures'
 * self-check) are inline too. */
#define _POSIX_C_SOURCE 200809L /* mkstemp */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/report.h"
#include "dsim/dsim.h"
#include "dsim/image.h"
#include "io/gif.h"

void ds__report_escape(FILE* fp, const char* text) {
  for (const char* c = text; *c; c++) {
    switch (*c) {
    case '&': fputs("&amp;", fp); break;
    case '<': fputs("&lt;", fp); break;
    case '>': fputs("&gt;", fp); break;
    case '"': fputs("&quot;", fp); break;
    case '\'': fputs("&#39;", fp); break;
    default: fputc(*c, fp);
    }
  }
}

void ds__report_base64(FILE* fp, const uint8_t* d, size_t n) {
  static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (size_t i = 0; i < n; i += 3) {
    const unsigned v = (unsigned)d[i] << 16 | (i + 1 < n ? (unsigned)d[i + 1] << 8 : 0) | (i + 2 < n ? d[i + 2] : 0);
    fputc(tab[v >> 18 & 63], fp);
    fputc(tab[v >> 12 & 63], fp);
    fputc(i + 1 < n ? tab[v >> 6 & 63] : '=', fp);
    fputc(i + 2 < n ? tab[v & 63] : '=', fp);
  }
}

/* The bytes of file path (malloc) or NULL. */
static uint8_t* slurp(const char* path, size_t* n) {
  FILE* fp = fopen(path, "rb");
  if (!fp) return NULL;
  uint8_t* buf = NULL;
  long len = -1;
  if (fseek(fp, 0, SEEK_END) == 0) len = ftell(fp);
  if (len >= 0 && fseek(fp, 0, SEEK_SET) == 0) buf = (uint8_t*)malloc((size_t)len + 1);
  if (buf && fread(buf, 1, (size_t)len, fp) != (size_t)len) {
    free(buf);
    buf = NULL;
  }
  fclose(fp);
  *n = buf ? (size_t)len : 0;
  return buf;
}

/* A private temporary name in dir (the writers open files by name). */
static int temp_name(const char* dir, char* tmp, size_t n) {
  snprintf(tmp, n, "%s/.dsim-report.XXXXXX", dir);
  int fd = mkstemp(tmp);
  if (fd < 0) {
    fprintf(stderr, "dsim report: cannot create a temporary file in %s: %s\n", dir, strerror(errno));
    return -1;
  }
  close(fd);
  return 0;
}

/* The file the writer made, as a data: URI of type mime; removes it. */
static int embed_file(FILE* fp, const char* tmp, const char* mime) {
  size_t n = 0;
  uint8_t* bytes = slurp(tmp, &n);
  unlink(tmp);
  if (!bytes) {
    fprintf(stderr, "dsim report: cannot read back %s: %s\n", tmp, strerror(errno));
    return -1;
  }
  fprintf(fp, "data:%s;base64,", mime);
  ds__report_base64(fp, bytes, n);
  free(bytes);
  return 0;
}

static int png_uri(FILE* fp, const char* dir, const uint8_t* rgba, int w, int h) {
  char tmp[4200], err[1024];
  if (temp_name(dir, tmp, sizeof tmp)) return -1;
  if (ds_png_write(tmp, rgba, w, h, err, sizeof err)) {
    unlink(tmp);
    fprintf(stderr, "dsim report: %s\n", err);
    return -1;
  }
  return embed_file(fp, tmp, "image/png");
}

int ds__report_png_img(FILE* fp, const char* dir, const uint8_t* rgba, int w, int h, const char* alt) {
  /* small pictures are scaled up without smoothing: a 24 x 24 frame stays sharp */
  const int show = w < 160 ? 160 : w > 320 ? 320 : w;
  fprintf(fp, "<img class='frame' width='%d' height='%d' alt='", show, (int)((double)h * show / w + 0.5));
  ds__report_escape(fp, alt);
  fprintf(fp, "' src='");
  int rc = png_uri(fp, dir, rgba, w, h);
  fprintf(fp, "'>");
  return rc;
}

/* The frame player of a build without giflib: the frames as PNG data: URIs
 * in a list, shown in turn by one timer. */
static int js_player(FILE* fp, const char* dir, const uint8_t* rgba, int nf, int h, int w, int delay_cs,
                     const char* alt) {
  static int players = 0;
  const int id = players++;
  const size_t bytes = (size_t)h * w * 4;
  int rc = ds__report_png_img(fp, dir, rgba, w, h, alt);
  fprintf(fp, "<script>(function(){var f=[");
  for (int k = 0; k < nf && !rc; k++) {
    fprintf(fp, "%s'", k ? "," : "");
    rc = png_uri(fp, dir, rgba + bytes * (size_t)k, w, h);
    fprintf(fp, "'");
  }
  fprintf(fp, "];var s=document.currentScript,i=s.previousElementSibling,k=0;i.id='player%d';"
          "setInterval(function(){k=(k+1)%%f.length;i.src=f[k];},%d);})();</script>", id, delay_cs * 10);
  return rc;
}

int ds__report_animation(FILE* fp, const char* dir, const uint8_t* rgba, int nf, int h, int w, int delay_cs,
                         const char* alt) {
  char tmp[4200], err[1024];
  if (temp_name(dir, tmp, sizeof tmp)) return -1;
  int rc = ds__gif_write(tmp, rgba, nf, h, w, delay_cs, err, sizeof err);
  if (rc) {
    unlink(tmp);
    if (rc == DS_ERR_UNSUPPORTED) return js_player(fp, dir, rgba, nf, h, w, delay_cs, alt); /* no giflib */
    fprintf(stderr, "dsim report: %s\n", err);
    return -1;
  }
  const int show = w < 160 ? 160 : w > 320 ? 320 : w;
  fprintf(fp, "<img class='frame' width='%d' height='%d' alt='", show, (int)((double)h * show / w + 0.5));
  ds__report_escape(fp, alt);
  fprintf(fp, "' src='");
  rc = embed_file(fp, tmp, "image/gif");
  fprintf(fp, "'>");
  return rc;
}

void ds__report_head(FILE* fp, const char* title) {
  fprintf(fp, "<!DOCTYPE html>\n<html lang='en'>\n<head>\n<meta charset='utf-8'>\n<title>");
  ds__report_escape(fp, title);
  fprintf(fp, "</title>\n<style>\n"
          "body{font-family:sans-serif;margin:1.5em auto;max-width:1100px;padding:0 1em;color:#222}\n"
          "h1{font-size:1.5em}h2{font-size:1.25em;border-bottom:1px solid #ccc;margin-top:1.6em}\n"
          "h3{font-size:1.05em}\n"
          "table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:2px 8px;"
          "text-align:right;font-variant-numeric:tabular-nums}th{background:#f3f3f3}td.l,th.l{text-align:left}\n"
          ".banner{background:#fff3cd;border:1px solid #e0b000;padding:.6em 1em;margin:.6em 0}\n"
          ".banner.bad{background:#f8d7da;border-color:#c33}\n"
          ".note{color:#555;font-size:.92em}\n"
          ".frames{display:flex;flex-wrap:wrap;gap:14px;align-items:flex-start}\n"
          ".frames figure{margin:0;text-align:center}figcaption{font-size:.85em;color:#444}\n"
          "img.frame{image-rendering:pixelated;border:1px solid #bbb;background:#fff}\n"
          "svg.plot{max-width:100%%;height:auto;display:block;margin:.4em 0}\n"
          "pre{background:#f6f6f6;padding:.6em;overflow:auto;font-size:.85em}\n"
          "details{margin:.4em 0}summary{cursor:pointer}\n"
          "</style>\n</head>\n<body>\n");
}

/* The page checks its own pictures once loaded: one that did not decode
 * says so on the console (what tests/test_report_browser.sh looks for). */
void ds__report_tail(FILE* fp) {
  fprintf(fp, "<p class='note'>Written by dsim %s (<code>dsim report</code>). This page loads nothing: "
          "plots are inline SVG, pictures are embedded.</p>\n", ds_version_string());
  fprintf(fp, "<script>window.addEventListener('load',function(){var im=document.images;"
          "for(var i=0;i<im.length;i++)if(!im[i].complete||!im[i].naturalWidth)"
          "console.error('dsim report: picture \"'+im[i].alt+'\" did not load');});</script>\n</body>\n</html>\n");
}

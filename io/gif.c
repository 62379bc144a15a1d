/* Animated GIF export through giflib (see io/gif.h). */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/internal.h"
#include "io/gif.h"


#ifndef DS_HAVE_GIF
int ds__gif_write(const char* path, const uint8_t* rgba, int nframes, int h, int w, int delay_cs, char* err,
                 size_t errlen) {
  (void)rgba; (void)nframes; (void)h; (void)w; (void)delay_cs;
  return ds__puterr(err, errlen, DS_ERR_UNSUPPORTED, "%s: dsim was built without giflib: no GIF export", path);
}
int ds__gif_read(const char* path, int* nframes, int* h, int* w, uint8_t** rgb, char* err, size_t errlen) {
  (void)nframes; (void)h; (void)w; (void)rgb;
  return ds__puterr(err, errlen, DS_ERR_UNSUPPORTED, "%s: dsim was built without giflib", path);
}
#else

#include <gif_lib.h>

int ds__gif_write(const char* path, const uint8_t* rgba, int nframes, int h, int w, int delay_cs, char* err,
                 size_t errlen) {
  if (!rgba || nframes < 1 || h < 1 || w < 1 || h > 65535 || w > 65535 || delay_cs < 0)
    return ds__puterr(err, errlen, DS_ERR_INVALID, "%s: cannot write %d frames of %d x %d as a GIF", path, nframes, h, w);
  size_t npix = (size_t)h * (size_t)w;
  uint8_t* planes = (uint8_t*)ds__malloc(npix * 4);
  if (!planes) return ds__puterr(err, errlen, DS_ERR_NOMEM, "%s: out of memory", path);
  uint8_t *r = planes, *g = planes + npix, *b = planes + 2 * npix, *idx = planes + 3 * npix;
  int gerr = 0;
  GifFileType* gif = EGifOpenFileName(path, false, &gerr);
  if (!gif) {
    ds__free(planes);
    return ds__puterr(err, errlen, DS_ERR_IO, "%s: cannot create: %s", path, GifErrorString(gerr));
  }
  EGifSetGifVersion(gif, true);
  int ok = EGifPutScreenDesc(gif, w, h, 8, 0, NULL) == GIF_OK;
  /* NETSCAPE2.0 application extension: loop forever. */
  if (ok && nframes > 1) {
    static const GifByteType app[] = {'N', 'E', 'T', 'S', 'C', 'A', 'P', 'E', '2', '.', '0'};
    static const GifByteType loop[] = {1, 0, 0};
    ok = EGifPutExtensionLeader(gif, APPLICATION_EXT_FUNC_CODE) == GIF_OK &&
         EGifPutExtensionBlock(gif, sizeof app, app) == GIF_OK &&
         EGifPutExtensionBlock(gif, sizeof loop, loop) == GIF_OK && EGifPutExtensionTrailer(gif) == GIF_OK;
  }
  for (int f = 0; ok && f < nframes; f++) {
    const uint8_t* src = rgba + npix * 4 * (size_t)f;
    for (size_t i = 0; i < npix; i++) {
      r[i] = src[4 * i];
      g[i] = src[4 * i + 1];
      b[i] = src[4 * i + 2];
    }
    GifColorType colors[256];
    int ncolors = 256;
    ok = GifQuantizeBuffer((unsigned)w, (unsigned)h, &ncolors, r, g, b, idx, colors) == GIF_OK;
    if (!ok) break;
    ColorMapObject* map = GifMakeMapObject(256, colors);
    if (!map) {
      ok = 0;
      break;
    }
    GraphicsControlBlock gcb = {DISPOSE_DO_NOT, false, delay_cs, NO_TRANSPARENT_COLOR};
    GifByteType ext[4];
    size_t len = EGifGCBToExtension(&gcb, ext);
    ok = EGifPutExtension(gif, GRAPHICS_EXT_FUNC_CODE, (int)len, ext) == GIF_OK &&
         EGifPutImageDesc(gif, 0, 0, w, h, false, map) == GIF_OK;
    for (int y = 0; ok && y < h; y++) ok = EGifPutLine(gif, idx + (size_t)y * (size_t)w, w) == GIF_OK;
    GifFreeMapObject(map);
  }
  int werr = gif->Error;
  int cerr = 0;
  int closed = EGifCloseFile(gif, &cerr) == GIF_OK;
  ds__free(planes);
  if (!ok || !closed)
    return ds__puterr(err, errlen, DS_ERR_IO, "%s: cannot write the GIF: %s", path, GifErrorString(ok ? cerr : werr));
  return DS_OK;
}

int ds__gif_read(const char* path, int* nframes, int* h, int* w, uint8_t** rgb, char* err, size_t errlen) {
  int gerr = 0;
  GifFileType* gif = DGifOpenFileName(path, &gerr);
  if (!gif) return ds__puterr(err, errlen, DS_ERR_IO, "%s: cannot open as GIF: %s", path, GifErrorString(gerr));
  int rc = DS_OK;
  if (DGifSlurp(gif) != GIF_OK) {
    rc = ds__puterr(err, errlen, DS_ERR_FORMAT, "%s: corrupt GIF: %s", path, GifErrorString(gif->Error));
  } else if (gif->ImageCount < 1) {
    rc = ds__puterr(err, errlen, DS_ERR_FORMAT, "%s: GIF has no frames", path);
  } else {
    int W = gif->SWidth, H = gif->SHeight, n = gif->ImageCount;
    size_t npix = (size_t)W * (size_t)H;
    uint8_t* out = (uint8_t*)ds__malloc(npix * 3 * (size_t)n);
    if (!out) rc = ds__puterr(err, errlen, DS_ERR_NOMEM, "%s: out of memory", path);
    for (int f = 0; out && rc == DS_OK && f < n; f++) {
      const SavedImage* im = &gif->SavedImages[f];
      const ColorMapObject* map = im->ImageDesc.ColorMap ? im->ImageDesc.ColorMap : gif->SColorMap;
      if (!map || im->ImageDesc.Left != 0 || im->ImageDesc.Top != 0 || im->ImageDesc.Width != W ||
          im->ImageDesc.Height != H) {
        rc = ds__puterr(err, errlen, DS_ERR_FORMAT, "%s: frame %d does not cover the canvas", path, f);
        break;
      }
      for (size_t i = 0; i < npix; i++) {
        int c = im->RasterBits[i];
        if (c >= map->ColorCount) c = 0;
        out[(npix * (size_t)f + i) * 3] = map->Colors[c].Red;
        out[(npix * (size_t)f + i) * 3 + 1] = map->Colors[c].Green;
        out[(npix * (size_t)f + i) * 3 + 2] = map->Colors[c].Blue;
      }
    }
    if (rc == DS_OK) {
      *nframes = n;
      *h = H;
      *w = W;
      *rgb = out;
    } else {
      ds__free(out);
    }
  }
  DGifCloseFile(gif, &gerr);
  return rc;
}
#endif

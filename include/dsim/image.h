/* dsim image I/O: 8-bit RGBA PNG files (libpng) and conversion to and from
 * the renderer's dsReal RGBA images.
 *
 * Pixels are row-major, row 0 at the top, 4 bytes per pixel (R, G, B, A).
 * Errors return DS_ERR_IO (cannot open, read or write), DS_ERR_FORMAT (not a
 * PNG, truncated or corrupt), DS_ERR_RANGE (image too large), DS_ERR_NOMEM or
 * DS_ERR_INVALID, and write a message naming the file into err (errlen
 * bytes, may be NULL/0), e.g. "goal.png: not a PNG file" or
 * "goal.png: truncated (libpng: ...)". */
#ifndef DSIM_IMAGE_H
#define DSIM_IMAGE_H

#include "dsim/base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Largest width or height accepted when reading. */
#define DS_PNG_MAX_SIDE 8192

/* Reads any PNG (palette, grey, 16-bit, with or without alpha) as 8-bit RGBA.
 * *rgba is allocated with the library allocator; free it with
 * ds_image_free. On error *rgba is NULL and nothing is leaked. */
DS_API int ds_png_read(const char* path, uint8_t** rgba, int* width, int* height, char* err,
                       size_t errlen);

/* Writes 8-bit RGBA. On error the partial file is removed. */
DS_API int ds_png_write(const char* path, const uint8_t* rgba, int width, int height, char* err,
                        size_t errlen);

/* ds_png_write with a tEXt chunk key = text (key: 1 to 79 Latin-1
 * characters; NULL key: none), written before the image data. dsim's
 * exported frames carry "dsim:frame" = {"frame": F, "substep": S, "time": T}. */
DS_API int ds_png_write_text(const char* path, const uint8_t* rgba, int width, int height, const char* key,
                             const char* text, char* err, size_t errlen);
/* The text of the first tEXt/zTXt/iTXt chunk named key before the image
 * data, into text (textlen bytes, truncated); DS_ERR_NOTFOUND when the
 * file has none. */
DS_API int ds_png_read_text(const char* path, const char* key, char* text, size_t textlen, char* err, size_t errlen);

/* Frees a buffer returned by ds_png_read / ds_png_read_real (NULL is fine). */
DS_API void ds_image_free(void* p);

/* dsReal RGBA in [0,1] -> bytes: clamped to [0,1], then round(v * 255). */
DS_API void ds_image_to_u8(const dsReal* img, int width, int height, uint8_t* out);
/* bytes -> dsReal RGBA: v / 255. */
DS_API void ds_image_from_u8(const uint8_t* in, int width, int height, dsReal* img);

/* The same for dsReal images (e.g. a goal image for a loss, a rendered frame).
 * ds_png_read_real allocates *img (free with ds_image_free). */
DS_API int ds_png_read_real(const char* path, dsReal** img, int* width, int* height, char* err,
                            size_t errlen);
DS_API int ds_png_write_real(const char* path, const dsReal* img, int width, int height, char* err,
                             size_t errlen);

#ifdef __cplusplus
}
#endif
#endif

/* Animated GIF export of rendered frames (giflib). Internal to io/ and cli/. */
#ifndef DSIM_IO_GIF_H
#define DSIM_IO_GIF_H

#include <stddef.h>
#include <stdint.h>

#include "dsim/base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Write nframes RGBA frames (nframes x h x w x 4, alpha ignored: GIF has no
 * partial transparency) as a looping animated GIF with delay_cs hundredths of
 * a second per frame. Each frame gets its own 256-colour palette (median cut).
 * 0, DS_ERR_IO (file, with the reason in err), DS_ERR_INVALID, DS_ERR_NOMEM,
 * or DS_ERR_UNSUPPORTED in a build without giflib. */
int ds__gif_write(const char* path, const uint8_t* rgba, int nframes, int h, int w, int delay_cs, char* err,
                        size_t errlen);
/* Decode a GIF into RGB frames (nframes x h x w x 3; free with ds_runlog_free
 * or free()); every frame must cover the whole canvas. */
int ds__gif_read(const char* path, int* nframes, int* h, int* w, uint8_t** rgb, char* err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif

/* Overlays for exported pictures (dsim export --overlay): drawn on 8-bit
 * RGBA copies of logged frames, never on the images a loss sees. */
#ifndef DSIM_RENDER_OVERLAY_H
#define DSIM_RENDER_OVERLAY_H

#include <stdint.h>

/* The outline of goal's silhouette (the pixels whose colour differs from
 * goal's top-left pixel, the background, with a 4-neighbour that does not)
 * drawn in rgb on img; both w x h x 4. */
void ds__overlay_outline(uint8_t* img, int w, int h, const uint8_t* goal, const uint8_t rgb[3]);
/* The ground plane y = 0 cut through the point below the look-at point,
 * across the view: a camera at eye looking at at (y up, vertical field of
 * view fov degrees). Nothing when the line is behind the camera or the
 * camera is degenerate. */
void ds__overlay_ground(uint8_t* img, int w, int h, const double eye[3], const double at[3], double fov,
                        const uint8_t rgb[3]);
/* "t" seconds as "1.234s" in a 3 x 5 pixel digit font (scaled with the
 * image), white on a dark box at the top-left corner. */
void ds__overlay_time(uint8_t* img, int w, int h, double t);

#endif

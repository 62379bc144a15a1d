/* dsim articulated models from files: an MJCF (MuJoCo XML) subset and URDF,
 * loaded into the builder of dsim/artic.h. docs/articulated.md ("Models from
 * files") lists the supported elements and what is refused.
 *
 *   dsArticModel* m; char err[512];
 *   if (ds_artic_load("configs/models/pendulum.xml", NULL, &m, err, sizeof err)) puts(err);
 *
 * Frames: dsim keeps every body at its centre of mass with principal axes;
 * the loaders move each file frame there (the joint anchors, axes and joint
 * frames follow), so q means what it means in the file for hinge and slide
 * joints (ball and free joints: see docs/articulated.md).
 *
 * Errors: DS_ERR_INVALID (or DS_ERR_PARSE for malformed XML, DS_ERR_IO for
 * an unreadable file, DS_ERR_RANGE for a file over DS_MODEL_FILE_MAX bytes,
 * DS_ERR_UNSUPPORTED when built without libxml2) with a message in err
 * (errlen bytes; err may be NULL) that names the file, the line and the
 * element, e.g. "arm.xml:12: <joint name='elbow'>: range 2 1 (expected
 * lower <= upper)"; nothing is written to *out. */
#ifndef DSIM_MODEL_FILE_H
#define DSIM_MODEL_FILE_H

#include <stddef.h>

#include "dsim/artic.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Largest model file the loaders read, bytes. */
#define DS_MODEL_FILE_MAX ((size_t)16 << 20)

/* MJCF (<mujoco> root). opt: NULL for ds_artic_default_options(); the
 * file's <option timestep gravity> replace opt's dt and gravity. */
DS_API int ds_artic_load_mjcf(const char* path, const dsArticOptions* opt, dsArticModel** out, char* err,
                              size_t errlen);
/* URDF (<robot> root); opt as above (URDF has no options). */
DS_API int ds_artic_load_urdf(const char* path, const dsArticOptions* opt, dsArticModel** out, char* err,
                              size_t errlen);
/* Either, chosen by the root element. */
DS_API int ds_artic_load(const char* path, const dsArticOptions* opt, dsArticModel** out, char* err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif

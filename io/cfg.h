/* Strict, table-driven JSON configs (cJSON underneath; this header does not
 * expose it). A section of a config is described by one flat table of dotted
 * key paths (dsConfigKey, dsim/base.h) with the type, the range and the
 * offset of the target field; loading fills a struct that already holds the
 * defaults. Every problem is an error naming the file, the key path and what
 * was expected:
 *   walker.json: env.contact.ke: expected a number in [0, 1e+12], got -5
 *   walker.json: unknown key "env.contact.kee" (did you mean "env.contact.ke"?)
 *   walker.json:3:17: invalid JSON near '}'
 * Not installed; envs/ exposes it as ds_config_* (dsim/env.h). */
#ifndef DSIM_IO_CFG_H
#define DSIM_IO_CFG_H

#include <stddef.h>

#include "base/internal.h"
#include "dsim/base.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DS_KEY_MAX_REALS 128 /* the longest DS_KEY_REALS array */
#define DS_CFG_MAX_ITEMS 16  /* the longest array a list's fields hand over (ds__cfg_walk_list) */

/* Parse `text` (NUL-terminated) as the config named `file` (used only in
 * messages) into `target` according to `fields`. With section NULL the
 * table's paths start at the top level; with a section ("env") they are
 * relative to that top-level object, messages name "section.path", and the
 * other top-level keys are left alone (an absent section leaves the
 * defaults). Keys absent from the text keep their value in target. Returns 0
 * or DS_ERR_PARSE (invalid JSON: "file:line:col: ...") or DS_ERR_CONFIG
 * (unknown key, wrong type, out of range, duplicate key), with the message in
 * eb. target is left unchanged on failure. */
int ds__cfg_parse(const char* file, const char* text, const char* section, const dsConfigKey* fields,
                  void* target, size_t target_size, dsErrBuf* eb);

/* DS_ERR_CONFIG unless every top-level key of the object `text` is one of
 * `allowed` ("env|controller|run"); the message suggests the nearest. */
int ds__cfg_check_top(const char* file, const char* text, const char* allowed, dsErrBuf* eb);

/* Set one key from text (a command-line value): a JSON value ("0.05",
 * "true", "[1, 0, 0]", "\"adam\"") or a bare word taken as a string ("adam").
 * Checked exactly as in a file; `source` names it in messages ("--lr"),
 * followed by "section.path". */
int ds__cfg_set(const char* source, const char* section, const dsConfigKey* fields, void* target,
                size_t target_size, const char* path, const char* value, dsErrBuf* eb);

/* Check every value of target (a definition made in code) against the
 * table, with the messages of a file ("SOURCE: section.key: expected a
 * number in [0, 1e+12], got -5"); target is not changed. */
int ds__cfg_check(const char* source, const char* section, const dsConfigKey* fields, const void* target,
                  size_t target_size, dsErrBuf* eb);

/* A list of small objects at section.key (section NULL: top level), which a
 * key table cannot describe (sysid.stages): taken out of `text`, each
 * object's fields handed to fn in order. *rest (free with ds__free) gets
 * the text without the list, or NULL when the list is absent
 * (DS_ERR_NOTFOUND; also for invalid JSON, which the table parse then
 * reports); *count the list's length. fn(user, i, field, items, nitems):
 * field NULL when element i is not an object; items the field's value, or
 * an array's first DS_CFG_MAX_ITEMS values (nitems -1 when it holds more;
 * 0 for an empty array; a value that is neither a number nor a string is
 * kind DS_CFG_OTHER). A value of another type at section.key: DS_ERR_CONFIG
 * with *count -1. fn's nonzero return ends the walk and is returned. */
enum { DS_CFG_NUMBER = 0, DS_CFG_STRING = 1, DS_CFG_OTHER = 2 };
typedef struct dsCfgItem {
  int kind;
  double number;
  const char* string;
} dsCfgItem;
typedef int (*dsCfgListFn)(void* user, int i, const char* field, const dsCfgItem* items, int nitems);
int ds__cfg_take_list(const char* text, const char* section, const char* key, char** rest, int* count,
                      dsCfgListFn fn, void* user);

/* Read a whole file into a NUL-terminated buffer (ds__free it). Errors name
 * the file and the reason: DS_ERR_IO. */
int ds__read_text_file(const char* path, char** text, size_t* len, dsErrBuf* eb);

/* The string at `section.key` (section NULL: top-level key), copied into
 * out; DS_ERR_NOTFOUND when absent, DS_ERR_RANGE when not a string (or
 * longer than outlen - 1), DS_ERR_PARSE for invalid JSON. Used to pick the env class before parsing its section. */
int ds__cfg_peek_string(const char* text, const char* section, const char* key, char* out, size_t outlen);

/* A video's camera file (dsim sysid, video "frames"): a JSON object with
 * the keys "times" (frame times, s: an array of 1..cap numbers >= 0,
 * increasing; optional), "position" and "look_at" (arrays of 3 numbers, m),
 * "fov" (vertical field of view, degrees, in (0, 180); *fov = 0 without it)
 * and/or the intrinsics "fx", "fy", "cx", "cy" (pixels, all four, into
 * intr; zeros without them), one of the two required. Errors name the file
 * and the key (DS_ERR_PARSE, DS_ERR_CONFIG). */
int ds__cfg_video_camera(const char* file, const char* text, double* times, int cap, int* ntimes, double pos[3],
                         double look[3], double* fov, double intr[4], dsErrBuf* eb);

#ifdef __cplusplus
}
#endif
#endif

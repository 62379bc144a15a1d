/* Strict, table-driven JSON configs (cJSON underneath; this header does not
 * expose it). A config type is described by one flat table of dotted key
 * paths ("contact.ke", "render.camera.distance") with the type, the range and
 * the offset of the target field; loading fills a struct that already holds
 * the defaults. Every problem is an error naming the file, the key path and
 * what was expected:
 *   walker.json: contact.ke: expected a number in [0, 1e+12], got -5
 *   walker.json: unknown key "contact.kee" (did you mean "contact.ke"?)
 *   walker.json:3:17: invalid JSON (unexpected character near '}')
 */
#ifndef DSIM_IO_CFG_H
#define DSIM_IO_CFG_H

#include <stddef.h>

#include "dsim/base.h"
#include "base/internal.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dsCfgType {
  DS_CFG_REAL,   /* JSON number -> dsReal, within [min, max] */
  DS_CFG_INT,    /* JSON integer -> int, within [min, max] */
  DS_CFG_BOOL,   /* true/false -> int 0/1 */
  DS_CFG_STRING, /* JSON string -> char[len] (len in `max`), must fit */
  DS_CFG_ENUM,   /* JSON string, one of `choices` ("a|b|c") -> int index */
  DS_CFG_VEC3,   /* array of 3 numbers -> dsReal[3], each within [min, max] */
  DS_CFG_REALS   /* array of numbers -> dsReal[n] with n <= `max` entries in a
                    field of `DS_CFG_MAX_REALS`; count stored in the int at
                    `aux_offset`; each value >= `min` */
} dsCfgType;

#define DS_CFG_MAX_REALS 16

typedef struct dsCfgField {
  const char* path;     /* dotted key path, e.g. "contact.ke" */
  dsCfgType type;
  size_t offset;        /* offset of the target field in the struct */
  double min, max;      /* inclusive range (DS_CFG_STRING: max = buffer size) */
  const char* choices;  /* DS_CFG_ENUM: "image|state|random" */
  size_t aux_offset;    /* DS_CFG_REALS: offset of the int count */
  const char* doc;      /* one line, units included; shown by `dsim config --keys` */
} dsCfgField;

/* Parse `text` (NUL-terminated) as the config named `file` (used only in
 * messages) into `target` according to `fields` (terminated by a NULL path).
 * Keys absent from the text keep their value in target (the defaults).
 * Returns 0 or DS_ERR_PARSE (invalid JSON: "file:line:col: ...") or
 * DS_ERR_CONFIG (unknown key, wrong type, out of range, duplicate key), with
 * the message in eb. target is left unchanged on failure. */
int ds__cfg_parse(const char* file, const char* text, const dsCfgField* fields, void* target,
                  size_t target_size, dsErrBuf* eb);

/* Read a whole file into a NUL-terminated buffer (ds__free it). Errors name
 * the file and the reason: DS_ERR_IO. */
int ds__read_text_file(const char* path, char** text, size_t* len, dsErrBuf* eb);

/* ds__read_text_file + ds__cfg_parse. */
int ds__cfg_load(const char* path, const dsCfgField* fields, void* target, size_t target_size,
                 dsErrBuf* eb);

/* The top-level value of `key` in a JSON object text if it is a string
 * (e.g. "env"), copied into out; DS_ERR_NOTFOUND when absent or not a string,
 * DS_ERR_PARSE for invalid JSON. Used to pick the table before parsing. */
int ds__cfg_peek_string(const char* text, const char* key, char* out, size_t outlen);

#ifdef __cplusplus
}
#endif
#endif

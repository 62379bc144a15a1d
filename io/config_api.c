/* The public config-key API (dsim/base.h, "config keys") over the strict
 * table-driven parser of io/cfg.h: messages come back as text (err,
 * errlen) instead of the library's internal error buffer. Every owner of a
 * config section (envs, controllers, the CLI) goes through these. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "dsim/base.h"
#include "io/cfg.h"

/* The sections a run config may have at its top level. */
#define TOP_SECTIONS "env|controller|run|sysid"

int ds_config_parse_section(const char* name, const char* text, const char* section, const dsConfigKey* keys,
                            void* target, size_t target_size, char* err, size_t errlen) {
  if (err && errlen) err[0] = '\0';
  if (!name || !text || !section || !keys || !target) return DS_ERR_INVALID;
  dsErrBuf eb;
  ds__clearerr(&eb);
  int rc = ds__cfg_check_top(name, text, TOP_SECTIONS, &eb);
  if (!rc) rc = ds__cfg_parse(name, text, section, keys, target, target_size, &eb);
  if (rc && err && errlen) snprintf(err, errlen, "%s", ds__errmsg(&eb));
  return rc;
}

int ds_config_set(const char* source, const char* section, const dsConfigKey* keys, void* target, size_t target_size,
                  const char* key, const char* value, char* err, size_t errlen) {
  if (err && errlen) err[0] = '\0';
  if (!source || !keys || !target || !key || !value) return DS_ERR_INVALID;
  dsErrBuf eb;
  ds__clearerr(&eb);
  int rc = ds__cfg_set(source, section, keys, target, target_size, key, value, &eb);
  if (rc && err && errlen) snprintf(err, errlen, "%s", ds__errmsg(&eb));
  return rc;
}

int ds_config_check(const char* source, const char* section, const dsConfigKey* keys, const void* target,
                    size_t target_size, char* err, size_t errlen) {
  if (err && errlen) err[0] = '\0';
  if (!source || !keys || !target) return DS_ERR_INVALID;
  dsErrBuf eb;
  ds__clearerr(&eb);
  int rc = ds__cfg_check(source, section, keys, (void*)target, target_size, &eb);
  if (rc && err && errlen) snprintf(err, errlen, "%s", ds__errmsg(&eb));
  return rc;
}

int ds_config_read_file(const char* path, char** text, char* err, size_t errlen) {
  if (err && errlen) err[0] = '\0';
  if (!path || !text) return DS_ERR_INVALID;
  dsErrBuf eb;
  ds__clearerr(&eb);
  int rc = ds__read_text_file(path, text, NULL, &eb);
  if (rc && err && errlen) snprintf(err, errlen, "%s", ds__errmsg(&eb));
  return rc;
}

void ds_config_free_text(char* text) { ds__free(text); }

int ds_config_check_top(const char* name, const char* text, char* err, size_t errlen) {
  if (err && errlen) err[0] = '\0';
  if (!name || !text) return DS_ERR_INVALID;
  dsErrBuf eb;
  ds__clearerr(&eb);
  int rc = ds__cfg_check_top(name, text, TOP_SECTIONS, &eb);
  if (rc && err && errlen) snprintf(err, errlen, "%s", ds__errmsg(&eb));
  return rc;
}

int ds_config_peek_string(const char* text, const char* section, const char* key, char* out, size_t outlen) {
  if (!text || !key || !out || !outlen) return DS_ERR_INVALID;
  return ds__cfg_peek_string(text, section, key, out, outlen);
}

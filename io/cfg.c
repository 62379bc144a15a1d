/* Strict table-driven JSON config loading (see io/cfg.h). */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "io/cfg.h"

#define PATH_MAX_LEN 256

int ds__read_text_file(const char* path, char** text, size_t* len, dsErrBuf* eb) {
  FILE* fp = fopen(path, "rb");
  if (!fp) return ds__seterr(eb, DS_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
  size_t cap = 4096, n = 0;
  char* buf = (char*)ds__malloc(cap);
  if (!buf) {
    fclose(fp);
    return ds__seterr(eb, DS_ERR_NOMEM, "%s: out of memory reading the file", path);
  }
  for (;;) {
    if (n + 1 >= cap) {
      char* nb = (char*)ds__realloc(buf, cap * 2);
      if (!nb) {
        ds__free(buf);
        fclose(fp);
        return ds__seterr(eb, DS_ERR_NOMEM, "%s: out of memory reading the file", path);
      }
      buf = nb;
      cap *= 2;
    }
    size_t got = fread(buf + n, 1, cap - 1 - n, fp);
    n += got;
    if (got == 0) break;
  }
  int bad = ferror(fp);
  fclose(fp);
  if (bad) {
    ds__free(buf);
    return ds__seterr(eb, DS_ERR_IO, "%s: read error", path);
  }
  buf[n] = '\0';
  if (strlen(buf) != n) {
    ds__free(buf);
    return ds__seterr(eb, DS_ERR_PARSE, "%s: contains a NUL byte (not a text file)", path);
  }
  *text = buf;
  if (len) *len = n;
  return DS_OK;
}

/* 1-based line and column of position pos in text. */
static void line_col(const char* text, const char* pos, int* line, int* col) {
  *line = 1;
  *col = 1;
  for (const char* p = text; *p && p < pos; p++) {
    if (*p == '\n') {
      (*line)++;
      *col = 1;
    } else {
      (*col)++;
    }
  }
}

static const char* json_kind(const cJSON* v) {
  if (cJSON_IsObject(v)) return "an object";
  if (cJSON_IsArray(v)) return "an array";
  if (cJSON_IsString(v)) return "a string";
  if (cJSON_IsNumber(v)) return "a number";
  if (cJSON_IsBool(v)) return "a boolean";
  if (cJSON_IsNull(v)) return "null";
  return "an invalid value";
}

/* Short rendering of a value for messages: numbers and strings verbatim,
 * other kinds by name. */
static void describe(const cJSON* v, char* out, size_t n) {
  if (cJSON_IsNumber(v))
    snprintf(out, n, "%.17g", v->valuedouble);
  else if (cJSON_IsString(v))
    snprintf(out, n, "\"%.60s\"", v->valuestring);
  else if (cJSON_IsBool(v))
    snprintf(out, n, "%s", cJSON_IsTrue(v) ? "true" : "false");
  else
    snprintf(out, n, "%s", json_kind(v));
}

/* Levenshtein distance of two short strings (truncated at 63 chars). */
static int edit_distance(const char* a, const char* b) {
  enum { L = 64 };
  int prev[L + 1], cur[L + 1];
  int na = (int)strlen(a), nb = (int)strlen(b);
  if (na > L) na = L;
  if (nb > L) nb = L;
  for (int j = 0; j <= nb; j++) prev[j] = j;
  for (int i = 1; i <= na; i++) {
    cur[0] = i;
    for (int j = 1; j <= nb; j++) {
      int sub = prev[j - 1] + (a[i - 1] != b[j - 1]);
      int del = prev[j] + 1, ins = cur[j - 1] + 1;
      cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
    }
    memcpy(prev, cur, sizeof(int) * (size_t)(nb + 1));
  }
  return prev[nb];
}

typedef struct Ctx {
  const char* file;
  const char* section; /* prefix of key paths in messages ("" for none) */
  const dsConfigKey* fields;
  char* target;
  dsErrBuf* eb;
} Ctx;

/* "section.path" for messages */
static const char* shown(const Ctx* c, const char* path, char* buf, size_t n) {
  if (!c->section[0]) return path;
  snprintf(buf, n, "%s.%s", c->section, path);
  return buf;
}

static int is_prefix_of_some_field(const dsConfigKey* fields, const char* path) {
  size_t n = strlen(path);
  for (const dsConfigKey* f = fields; f->path; f++)
    if (!strncmp(f->path, path, n) && f->path[n] == '.') return 1;
  return 0;
}

static int unknown_key(Ctx* c, const char* path) {
  const char* best = NULL;
  int bestd = 1 << 30;
  for (const dsConfigKey* f = c->fields; f->path; f++) {
    int d = edit_distance(path, f->path);
    if (d < bestd) {
      bestd = d;
      best = f->path;
    }
  }
  char b1[PATH_MAX_LEN + 64], b2[PATH_MAX_LEN + 64];
  if (best && bestd <= 3)
    return ds__seterr(c->eb, DS_ERR_CONFIG, "%s: unknown key \"%s\" (did you mean \"%s\"?)", c->file,
                      shown(c, path, b1, sizeof b1), shown(c, best, b2, sizeof b2));
  return ds__seterr(c->eb, DS_ERR_CONFIG, "%s: unknown key \"%s\"", c->file, shown(c, path, b1, sizeof b1));
}

static int range_error(Ctx* c, const char* path, const dsConfigKey* f, const cJSON* v, const char* what) {
  char got[96];
  char b1[PATH_MAX_LEN + 64];
  describe(v, got, sizeof got);
  return ds__seterr(c->eb, DS_ERR_CONFIG, "%s: %s: expected %s in [%g, %g], got %s", c->file,
                    shown(c, path, b1, sizeof b1), what, f->min, f->max, got);
}

static int type_error(Ctx* c, const char* path, const char* expected, const cJSON* v) {
  char got[96];
  char b1[PATH_MAX_LEN + 64];
  describe(v, got, sizeof got);
  return ds__seterr(c->eb, DS_ERR_CONFIG, "%s: %s: expected %s, got %s", c->file, shown(c, path, b1, sizeof b1),
                    expected, got);
}

/* An enum's refusal: the choices, and the nearest one when a string is at
 * most 2 edits from it and the edits are under half its length. */
static int enum_error(Ctx* c, const char* path, const dsConfigKey* f, const cJSON* v) {
  char expected[256], best[64] = "";
  int bestd = 3;
  snprintf(expected, sizeof expected, "one of \"%s\"", f->choices);
  for (char *p = expected + 8, *word = p;; p++) {
    if (*p && *p != '|' && *p != '"') continue;
    const char was = *p; /* '|' between choices; '"' or (truncated) 0 after the last */
    *p = 0;
    int d = cJSON_IsString(v) ? edit_distance(v->valuestring, word) : 1 << 30;
    if (d < bestd && 2 * d < (int)strlen(word)) bestd = d, snprintf(best, sizeof best, "%s", word);
    *p = was == '|' ? ',' : was;
    if (was != '|') break;
    word = p + 1;
  }
  if (!best[0]) return type_error(c, path, expected, v);
  char got[96], b1[PATH_MAX_LEN + 64];
  describe(v, got, sizeof got);
  return ds__seterr(c->eb, DS_ERR_CONFIG, "%s: %s: expected %s, got %s (did you mean \"%s\"?)", c->file,
                    shown(c, path, b1, sizeof b1), expected, got, best);
}

static int apply(Ctx* c, const dsConfigKey* f, const char* path, const cJSON* v) {
  char* dst = c->target + f->offset;
  switch (f->type) {
    case DS_KEY_REAL: {
      if (!cJSON_IsNumber(v)) return type_error(c, path, "a number", v);
      double x = v->valuedouble;
      if (!isfinite(x) || x < f->min || x > f->max) return range_error(c, path, f, v, "a number");
      *(dsReal*)dst = (dsReal)x;
      return DS_OK;
    }
    case DS_KEY_DOUBLE: {
      if (!cJSON_IsNumber(v)) return type_error(c, path, "a number", v);
      double x = v->valuedouble;
      if (!isfinite(x) || x < f->min || x > f->max) return range_error(c, path, f, v, "a number");
      *(double*)dst = x;
      return DS_OK;
    }
    case DS_KEY_U64: {
      if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble))
        return type_error(c, path, "an integer", v);
      double x = v->valuedouble;
      if (x < f->min || x > f->max) return range_error(c, path, f, v, "an integer");
      *(uint64_t*)dst = (uint64_t)x;
      return DS_OK;
    }
    case DS_KEY_INT: {
      if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble))
        return type_error(c, path, "an integer", v);
      double x = v->valuedouble;
      if (x < f->min || x > f->max) return range_error(c, path, f, v, "an integer");
      *(int*)dst = (int)x;
      return DS_OK;
    }
    case DS_KEY_BOOL:
      if (!cJSON_IsBool(v)) return type_error(c, path, "true or false", v);
      *(int*)dst = cJSON_IsTrue(v) ? 1 : 0;
      return DS_OK;
    case DS_KEY_STRING: {
      if (!cJSON_IsString(v)) return type_error(c, path, "a string", v);
      size_t cap = (size_t)f->max;
      if (strlen(v->valuestring) + 1 > cap)
      {
        char b1[PATH_MAX_LEN + 64];
        return ds__seterr(c->eb, DS_ERR_CONFIG, "%s: %s: expected a string of at most %zu characters", c->file,
                          shown(c, path, b1, sizeof b1), cap - 1);
      }
      memcpy(dst, v->valuestring, strlen(v->valuestring) + 1);
      return DS_OK;
    }
    case DS_KEY_ENUM: {
      if (cJSON_IsString(v)) {
        const char* s = f->choices;
        size_t want = strlen(v->valuestring);
        for (int idx = 0; s && *s; idx++) {
          const char* bar = strchr(s, '|');
          size_t len = bar ? (size_t)(bar - s) : strlen(s);
          if (len == want && !strncmp(s, v->valuestring, len)) {
            *(int*)dst = idx;
            return DS_OK;
          }
          s = bar ? bar + 1 : s + len;
        }
      }
      return enum_error(c, path, f, v);
    }
    case DS_KEY_VEC3:
    case DS_KEY_DVEC3: {
      if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != 3) return type_error(c, path, "an array of 3 numbers", v);
      double tmp[3];
      for (int i = 0; i < 3; i++) {
        const cJSON* e = cJSON_GetArrayItem(v, i);
        char ipath[PATH_MAX_LEN + 8];
        snprintf(ipath, sizeof ipath, "%s[%d]", path, i);
        if (!cJSON_IsNumber(e)) return type_error(c, ipath, "a number", e);
        if (!isfinite(e->valuedouble) || e->valuedouble < f->min || e->valuedouble > f->max)
          return range_error(c, ipath, f, e, "a number");
        tmp[i] = e->valuedouble;
      }
      for (int i = 0; i < 3; i++) {
        if (f->type == DS_KEY_VEC3)
          ((dsReal*)dst)[i] = (dsReal)tmp[i];
        else
          ((double*)dst)[i] = tmp[i];
      }
      return DS_OK;
    }
    case DS_KEY_REALS: {
      /* a bare number is the list of that one number ("init": 1200) */
      const int scalar = cJSON_IsNumber(v);
      int n = scalar ? 1 : cJSON_IsArray(v) ? cJSON_GetArraySize(v) : -1;
      if (n < 1 || n > (int)f->max || n > DS_KEY_MAX_REALS) {
        char expected[96];
        snprintf(expected, sizeof expected, "a number or an array of 1 to %d numbers",
                 (int)f->max < DS_KEY_MAX_REALS ? (int)f->max : DS_KEY_MAX_REALS);
        return type_error(c, path, expected, v);
      }
      dsReal tmp[DS_KEY_MAX_REALS];
      for (int i = 0; i < n; i++) {
        const cJSON* e = scalar ? v : cJSON_GetArrayItem(v, i);
        char ipath[PATH_MAX_LEN + 8];
        if (scalar)
          snprintf(ipath, sizeof ipath, "%s", path);
        else
          snprintf(ipath, sizeof ipath, "%s[%d]", path, i);
        if (!cJSON_IsNumber(e)) return type_error(c, ipath, "a number", e);
        if (!isfinite(e->valuedouble) || e->valuedouble < f->min) {
          char got[96];
          describe(e, got, sizeof got);
          char b1[PATH_MAX_LEN + 64];
          return ds__seterr(c->eb, DS_ERR_CONFIG, "%s: %s: expected a number >= %g, got %s", c->file,
                            shown(c, ipath, b1, sizeof b1), f->min, got);
        }
        tmp[i] = (dsReal)e->valuedouble;
      }
      memcpy(dst, tmp, sizeof(dsReal) * (size_t)n);
      *(int*)(c->target + f->aux_offset) = n;
      return DS_OK;
    }
  }
  return ds__seterr(c->eb, DS_ERR_INVALID, "%s: %s: bad field table entry", c->file, path);
}

static int walk(Ctx* c, const cJSON* obj, const char* prefix) {
  for (const cJSON* ch = obj->child; ch; ch = ch->next) {
    char path[PATH_MAX_LEN];
    int w = prefix[0] ? snprintf(path, sizeof path, "%s.%s", prefix, ch->string)
                      : snprintf(path, sizeof path, "%s", ch->string);
    if (w < 0 || w >= (int)sizeof path)
      return ds__seterr(c->eb, DS_ERR_CONFIG, "%s: key path too long: \"%.60s...\"", c->file, path);
    for (const cJSON* o = obj->child; o != ch; o = o->next)
      if (!strcmp(o->string, ch->string))
      {
        char b1[PATH_MAX_LEN + 64];
        return ds__seterr(c->eb, DS_ERR_CONFIG, "%s: key \"%s\" appears twice", c->file, shown(c, path, b1, sizeof b1));
      }
    const dsConfigKey* f = NULL;
    for (const dsConfigKey* g = c->fields; g->path; g++)
      if (!strcmp(g->path, path)) {
        f = g;
        break;
      }
    int rc;
    if (f)
      rc = apply(c, f, path, ch);
    else if (is_prefix_of_some_field(c->fields, path))
      rc = cJSON_IsObject(ch) ? walk(c, ch, path) : type_error(c, path, "an object", ch);
    else
      rc = unknown_key(c, path);
    if (rc) return rc;
  }
  return DS_OK;
}

/* The first \u0000 escape of text (an odd run of backslashes before "u0000"),
 * or NULL: cJSON would cut the string there ("walker\u0000x" read as
 * "walker"), so a config may not hold one. */
static const char* find_nul_escape(const char* text) {
  for (const char* p = strstr(text, "u0000"); p; p = strstr(p + 1, "u0000")) {
    int n = 0;
    for (const char* q = p - 1; q >= text && *q == '\\'; q--) n++;
    if (n % 2 == 1) return p - 1;
  }
  return NULL;
}

/* Parse text; on invalid JSON set the message and return NULL. */
static cJSON* parse_json(const char* file, const char* text, dsErrBuf* eb, int* rc) {
  const char* nul = find_nul_escape(text);
  if (nul) {
    int line, col;
    line_col(text, nul, &line, &col);
    *rc = ds__seterr(eb, DS_ERR_PARSE, "%s:%d:%d: a string holds \\u0000 (a NUL character), which no config value may",
                     file, line, col);
    return NULL;
  }
  const char* end = NULL;
  cJSON* root = cJSON_ParseWithOpts(text, &end, 1);
  if (!root) {
    int line, col;
    if (!end) end = text;
    line_col(text, end, &line, &col);
    if (!*end)
    {
      *rc = ds__seterr(eb, DS_ERR_PARSE, "%s:%d:%d: invalid JSON (unexpected end of file)", file, line, col);
      return NULL;
    }
    /* Context: up to 10 characters either side of the error, within its line,
     * without surrounding blanks. */
    char near[24];
    size_t k = 0;
    const char* a = end;
    while (a > text && a[-1] != '\n' && end - a < 10) a--;
    while (*a == ' ' || *a == '\t') a++;
    for (const char* p = a; *p && *p != '\n' && *p != '\r' && k < sizeof near - 1 && p < end + 10; p++) near[k++] = *p;
    while (k > 0 && (near[k - 1] == ' ' || near[k - 1] == '\t')) k--;
    near[k] = '\0';
    *rc = ds__seterr(eb, DS_ERR_PARSE, "%s:%d:%d: invalid JSON near '%s'", file, line, col, near);
    return NULL;
  }
  if (!cJSON_IsObject(root)) {
    *rc = ds__seterr(eb, DS_ERR_CONFIG, "%s: expected a JSON object at the top level, got %s", file, json_kind(root));
    cJSON_Delete(root);
    return NULL;
  }
  *rc = 0;
  return root;
}

int ds__cfg_parse(const char* file, const char* text, const char* section, const dsConfigKey* fields,
                  void* target, size_t target_size, dsErrBuf* eb) {
  int rc = DS_OK;
  cJSON* root = parse_json(file, text, eb, &rc);
  if (!root) return rc;
  char* scratch = NULL;
  const cJSON* obj = root;
  if (section) {
    obj = cJSON_GetObjectItemCaseSensitive(root, section);
    if (!obj) goto done; /* absent: the defaults */
    if (!cJSON_IsObject(obj)) {
      char got[96];
      describe(obj, got, sizeof got);
      rc = ds__seterr(eb, DS_ERR_CONFIG, "%s: %s: expected an object, got %s", file, section, got);
      goto done;
    }
  }
  scratch = (char*)ds__malloc(target_size);
  if (!scratch) {
    rc = ds__seterr(eb, DS_ERR_NOMEM, "%s: out of memory", file);
    goto done;
  }
  memcpy(scratch, target, target_size);
  Ctx c = {file, section ? section : "", fields, scratch, eb};
  rc = walk(&c, obj, "");
  if (rc == DS_OK) memcpy(target, scratch, target_size);
done:
  ds__free(scratch);
  cJSON_Delete(root);
  return rc;
}

/* The current value of field f in target as a JSON value (for the messages
 * and the range checks of apply); NULL for a type without a range. */
static cJSON* current_value(const dsConfigKey* f, const char* target) {
  const char* p = target + f->offset;
  switch (f->type) {
    case DS_KEY_REAL: return cJSON_CreateNumber((double)*(const dsReal*)p);
    case DS_KEY_DOUBLE: return cJSON_CreateNumber(*(const double*)p);
    case DS_KEY_INT: return cJSON_CreateNumber((double)*(const int*)p);
    case DS_KEY_U64: return cJSON_CreateNumber((double)*(const uint64_t*)p);
    case DS_KEY_BOOL: return *(const int*)p == 0 || *(const int*)p == 1 ? cJSON_CreateBool(*(const int*)p) : cJSON_CreateNumber(*(const int*)p);
    case DS_KEY_VEC3: {
      const dsReal* v = (const dsReal*)p;
      const double d[3] = {(double)v[0], (double)v[1], (double)v[2]};
      return cJSON_CreateDoubleArray(d, 3);
    }
    case DS_KEY_DVEC3: return cJSON_CreateDoubleArray((const double*)p, 3);
    case DS_KEY_ENUM: {
      /* the index as its name, or as a number when out of range */
      const int idx = *(const int*)p;
      const char* s = f->choices;
      for (int i = 0; i < idx && s; i++) {
        s = strchr(s, '|');
        if (s) s++;
      }
      if (idx < 0 || !s || !*s) return cJSON_CreateNumber(idx);
      char name[64];
      const char* bar = strchr(s, '|');
      snprintf(name, sizeof name, "%.*s", (int)(bar ? (size_t)(bar - s) : strlen(s)), s);
      return cJSON_CreateString(name);
    }
    default: return NULL; /* strings and lists: written only through apply */
  }
}

int ds__cfg_check(const char* source, const char* section, const dsConfigKey* fields, const void* target,
                  size_t target_size, dsErrBuf* eb) {
  char* scratch = (char*)ds__malloc(target_size);
  if (!scratch) return ds__seterr(eb, DS_ERR_NOMEM, "%s: out of memory", source);
  memcpy(scratch, target, target_size);
  Ctx c = {source, section ? section : "", fields, scratch, eb};
  int rc = DS_OK;
  for (const dsConfigKey* f = fields; f->path && !rc; f++) {
    cJSON* v = current_value(f, (const char*)target);
    if (v) rc = apply(&c, f, f->path, v); /* the same checks as a value read from a file */
    cJSON_Delete(v);
  }
  ds__free(scratch);
  return rc;
}

int ds__cfg_check_top(const char* file, const char* text, const char* allowed, dsErrBuf* eb) {
  int rc = DS_OK;
  cJSON* root = parse_json(file, text, eb, &rc);
  if (!root) return rc;
  for (const cJSON* ch = root->child; ch && !rc; ch = ch->next) {
    const char* best = NULL;
    int bestd = 1 << 30, found = 0;
    char name[64];
    for (const char* s = allowed; *s;) {
      const char* bar = strchr(s, '|');
      size_t len = bar ? (size_t)(bar - s) : strlen(s);
      snprintf(name, sizeof name, "%.*s", (int)len, s);
      if (!strcmp(name, ch->string)) found = 1;
      int d = edit_distance(ch->string, name);
      if (d < bestd) {
        bestd = d;
        best = s;
      }
      s = bar ? bar + 1 : s + len;
    }
    if (found) continue;
    char expected[128];
    snprintf(expected, sizeof expected, "%s", allowed);
    for (char* p = expected; *p; p++)
      if (*p == '|') *p = ',';
    if (best && bestd <= 3) {
      const char* bar = strchr(best, '|');
      rc = ds__seterr(eb, DS_ERR_CONFIG, "%s: unknown section \"%s\" (did you mean \"%.*s\"? sections: %s)", file,
                      ch->string, (int)(bar ? (size_t)(bar - best) : strlen(best)), best, expected);
    } else {
      rc = ds__seterr(eb, DS_ERR_CONFIG, "%s: unknown section \"%s\" (sections: %s)", file, ch->string, expected);
    }
  }
  cJSON_Delete(root);
  return rc;
}

int ds__cfg_set(const char* source, const char* section, const dsConfigKey* fields, void* target,
                size_t target_size, const char* path, const char* value, dsErrBuf* eb) {
  const dsConfigKey* f = NULL;
  for (const dsConfigKey* g = fields; g->path; g++)
    if (!strcmp(g->path, path)) f = g;
  char* scratch = (char*)ds__malloc(target_size);
  if (!scratch) return ds__seterr(eb, DS_ERR_NOMEM, "%s: out of memory", source);
  memcpy(scratch, target, target_size);
  Ctx c = {source, section ? section : "", fields, scratch, eb};
  int rc;
  if (!f) {
    rc = unknown_key(&c, path);
  } else {
    /* strings and enum names may be given bare (a file name, "adam") */
    const int bare = (f->type == DS_KEY_STRING || f->type == DS_KEY_ENUM) && value[0] != '"';
    cJSON* v = bare ? NULL : cJSON_ParseWithOpts(value, NULL, 1); /* the whole text: "3 4" is not 3 */
    if (!v) v = cJSON_CreateString(value); /* a bare word */
    rc = v ? apply(&c, f, path, v) : ds__seterr(eb, DS_ERR_NOMEM, "%s: out of memory", source);
    cJSON_Delete(v);
  }
  if (!rc) memcpy(target, scratch, target_size);
  ds__free(scratch);
  return rc;
}

int ds__cfg_peek_string(const char* text, const char* section, const char* key, char* out, size_t outlen) {
  cJSON* root = cJSON_Parse(text);
  if (!root) return DS_ERR_PARSE;
  int rc = DS_ERR_NOTFOUND;
  const cJSON* obj = section ? cJSON_GetObjectItemCaseSensitive(root, section) : root;
  const cJSON* v = cJSON_IsObject(obj) ? cJSON_GetObjectItemCaseSensitive(obj, key) : NULL;
  if (cJSON_IsString(v) && strlen(v->valuestring) < outlen) {
    memcpy(out, v->valuestring, strlen(v->valuestring) + 1);
    rc = DS_OK;
  } else if (v) {
    rc = DS_ERR_RANGE; /* present, but not a string (or too long) */
  }
  cJSON_Delete(root);
  return rc;
}

/* ---- a video's camera file ------------------------------------------------------ */
static int vec3_of(const char* file, const cJSON* v, const char* key, double out[3], dsErrBuf* eb) {
  if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != 3) {
    char got[96];
    describe(v, got, sizeof got);
    return ds__seterr(eb, DS_ERR_CONFIG, "%s: %s: expected an array of 3 numbers, got %s", file, key, got);
  }
  for (int i = 0; i < 3; i++) {
    const cJSON* e = cJSON_GetArrayItem(v, i);
    if (!cJSON_IsNumber(e) || !isfinite(e->valuedouble))
      return ds__seterr(eb, DS_ERR_CONFIG, "%s: %s[%d]: expected a number", file, key, i);
    out[i] = e->valuedouble;
  }
  return DS_OK;
}

int ds__cfg_video_camera(const char* file, const char* text, double* times, int cap, int* ntimes, double pos[3],
                         double look[3], double* fov, double intr[4], dsErrBuf* eb) {
  int rc = DS_OK;
  cJSON* root = parse_json(file, text, eb, &rc);
  if (!root) return rc;
  static const char* const keys[8] = {"times", "position", "look_at", "fov", "fx", "fy", "cx", "cy"};
  for (const cJSON* ch = root->child; ch && !rc; ch = ch->next) {
    int known = 0;
    for (int i = 0; i < 8; i++) known |= !strcmp(ch->string, keys[i]);
    if (!known)
      rc = ds__seterr(eb, DS_ERR_CONFIG, "%s: unknown key \"%s\" (keys: times, position, look_at, fov, fx, fy, cx, cy)",
                      file, ch->string);
  }
  /* intrinsics: all four or none; without them fov is required */
  int nintr = 0;
  for (int i = 4; i < 8; i++) nintr += cJSON_GetObjectItemCaseSensitive(root, keys[i]) != NULL;
  if (!rc && nintr != 0 && nintr != 4)
    rc = ds__seterr(eb, DS_ERR_CONFIG, "%s: intrinsics: give all of fx, fy, cx, cy (pixels) or none", file);
  for (int i = 4; i < 8 && nintr == 4 && !rc; i++) {
    const cJSON* e = cJSON_GetObjectItemCaseSensitive(root, keys[i]);
    if (!cJSON_IsNumber(e) || !isfinite(e->valuedouble) || (i < 6 && !(e->valuedouble > 0)))
      rc = ds__seterr(eb, DS_ERR_CONFIG, "%s: %s: expected a %snumber of pixels", file, keys[i],
                      i < 6 ? "positive " : "");
    else
      intr[i - 4] = e->valuedouble;
  }
  if (nintr == 0) intr[0] = intr[1] = intr[2] = intr[3] = 0;
  for (int i = 1; i < 4 && !rc; i++) /* times may come with the frames instead (dsim/video.h) */
    if (!cJSON_GetObjectItemCaseSensitive(root, keys[i]) && !(i == 3 && nintr == 4))
      rc = ds__seterr(eb, DS_ERR_CONFIG, "%s: missing key \"%s\"%s", file, keys[i],
                      i == 3 ? " (or the intrinsics fx, fy, cx, cy)" : "");
  if (!rc) {
    const cJSON* t = cJSON_GetObjectItemCaseSensitive(root, "times");
    const int n = !t ? 0 : cJSON_IsArray(t) ? cJSON_GetArraySize(t) : -1;
    if (t && (n < 1 || n > cap)) {
      char got[96];
      describe(t, got, sizeof got);
      rc = ds__seterr(eb, DS_ERR_CONFIG, "%s: times: expected an array of 1 to %d frame times (s), got %s", file, cap,
                      got);
    }
    for (int i = 0; i < n && !rc; i++) {
      const cJSON* e = cJSON_GetArrayItem(t, i);
      if (!cJSON_IsNumber(e) || !isfinite(e->valuedouble) || e->valuedouble < 0)
        rc = ds__seterr(eb, DS_ERR_CONFIG, "%s: times[%d]: expected a number >= 0 (s)", file, i);
      else if (i > 0 && !(e->valuedouble > times[i - 1]))
        rc = ds__seterr(eb, DS_ERR_CONFIG, "%s: times[%d]: %g is not after times[%d] = %g", file, i, e->valuedouble,
                        i - 1, times[i - 1]);
      else
        times[i] = e->valuedouble;
    }
    if (!rc) *ntimes = n;
  }
  if (!rc) rc = vec3_of(file, cJSON_GetObjectItemCaseSensitive(root, "position"), "position", pos, eb);
  if (!rc) rc = vec3_of(file, cJSON_GetObjectItemCaseSensitive(root, "look_at"), "look_at", look, eb);
  *fov = 0;
  if (!rc && cJSON_GetObjectItemCaseSensitive(root, "fov")) {
    const cJSON* f = cJSON_GetObjectItemCaseSensitive(root, "fov");
    if (!cJSON_IsNumber(f) || !(f->valuedouble > 0 && f->valuedouble < 180))
      rc = ds__seterr(eb, DS_ERR_CONFIG, "%s: fov: expected a number of degrees in (0, 180)", file);
    else
      *fov = f->valuedouble;
  }
  cJSON_Delete(root);
  return rc;
}

static void cfg_item(const cJSON* v, dsCfgItem* it) {
  it->kind = cJSON_IsNumber(v) ? DS_CFG_NUMBER : cJSON_IsString(v) ? DS_CFG_STRING : DS_CFG_OTHER;
  it->number = cJSON_IsNumber(v) ? v->valuedouble : 0;
  it->string = cJSON_IsString(v) ? v->valuestring : NULL;
}

/* every field of every object of arr to fn */
static int cfg_walk_list(const cJSON* arr, dsCfgListFn fn, void* user) {
  int i = 0, rc = 0;
  for (const cJSON* o = arr->child; o && !rc; o = o->next, i++) {
    if (!cJSON_IsObject(o)) {
      rc = fn(user, i, NULL, NULL, 0);
      continue;
    }
    for (const cJSON* f = o->child; f && !rc; f = f->next) {
      dsCfgItem items[DS_CFG_MAX_ITEMS];
      int n = 0;
      if (cJSON_IsArray(f)) {
        for (const cJSON* v = f->child; v; v = v->next, n++)
          if (n < DS_CFG_MAX_ITEMS) cfg_item(v, &items[n]);
        if (n > DS_CFG_MAX_ITEMS) n = -1;
      } else {
        cfg_item(f, &items[0]);
        n = 1;
      }
      rc = fn(user, i, f->string, items, n);
    }
  }
  return rc;
}

int ds__cfg_take_list(const char* text, const char* section, const char* key, char** rest, int* count,
                      dsCfgListFn fn, void* user) {
  *rest = NULL;
  *count = 0;
  if (!text || !key) return DS_ERR_INVALID;
  cJSON* root = cJSON_Parse(text);
  cJSON* parent = root && section ? cJSON_GetObjectItemCaseSensitive(root, section) : root;
  cJSON* list = cJSON_IsObject(parent) ? cJSON_DetachItemFromObjectCaseSensitive(parent, key) : NULL;
  int rc = DS_ERR_NOTFOUND;
  if (list) {
    *rest = cJSON_PrintUnformatted(root);
    char* copy = *rest ? (char*)ds__malloc(strlen(*rest) + 1) : NULL;
    if (copy) strcpy(copy, *rest);
    cJSON_free(*rest);
    *rest = copy;
    if (!copy)
      rc = DS_ERR_NOMEM;
    else if (!cJSON_IsArray(list))
      rc = DS_ERR_CONFIG, *count = -1;
    else
      *count = cJSON_GetArraySize(list), rc = fn ? cfg_walk_list(list, fn, user) : 0;
  }
  cJSON_Delete(list);
  cJSON_Delete(root);
  return rc;
}

/* Strict table-driven JSON config loading (see io/config.h). */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
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
  const dsCfgField* fields;
  char* target;
  dsErrBuf* eb;
} Ctx;

static int is_prefix_of_some_field(const dsCfgField* fields, const char* path) {
  size_t n = strlen(path);
  for (const dsCfgField* f = fields; f->path; f++)
    if (!strncmp(f->path, path, n) && f->path[n] == '.') return 1;
  return 0;
}

static int unknown_key(Ctx* c, const char* path) {
  const char* best = NULL;
  int bestd = 1 << 30;
  for (const dsCfgField* f = c->fields; f->path; f++) {
    int d = edit_distance(path, f->path);
    if (d < bestd) {
      bestd = d;
      best = f->path;
    }
  }
  if (best && bestd <= 3)
    return ds__seterr(c->eb, DS_ERR_CONFIG, "%s: unknown key \"%s\" (did you mean \"%s\"?)", c->file, path, best);
  return ds__seterr(c->eb, DS_ERR_CONFIG, "%s: unknown key \"%s\"", c->file, path);
}

static int range_error(Ctx* c, const char* path, const dsCfgField* f, const cJSON* v, const char* what) {
  char got[96];
  describe(v, got, sizeof got);
  return ds__seterr(c->eb, DS_ERR_CONFIG, "%s: %s: expected %s in [%g, %g], got %s", c->file, path, what,
                    f->min, f->max, got);
}

static int type_error(Ctx* c, const char* path, const char* expected, const cJSON* v) {
  char got[96];
  describe(v, got, sizeof got);
  return ds__seterr(c->eb, DS_ERR_CONFIG, "%s: %s: expected %s, got %s", c->file, path, expected, got);
}

static int apply(Ctx* c, const dsCfgField* f, const char* path, const cJSON* v) {
  char* dst = c->target + f->offset;
  switch (f->type) {
    case DS_CFG_REAL: {
      if (!cJSON_IsNumber(v)) return type_error(c, path, "a number", v);
      double x = v->valuedouble;
      if (!isfinite(x) || x < f->min || x > f->max) return range_error(c, path, f, v, "a number");
      *(dsReal*)dst = (dsReal)x;
      return DS_OK;
    }
    case DS_CFG_INT: {
      if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble))
        return type_error(c, path, "an integer", v);
      double x = v->valuedouble;
      if (x < f->min || x > f->max) return range_error(c, path, f, v, "an integer");
      *(int*)dst = (int)x;
      return DS_OK;
    }
    case DS_CFG_BOOL:
      if (!cJSON_IsBool(v)) return type_error(c, path, "true or false", v);
      *(int*)dst = cJSON_IsTrue(v) ? 1 : 0;
      return DS_OK;
    case DS_CFG_STRING: {
      if (!cJSON_IsString(v)) return type_error(c, path, "a string", v);
      size_t cap = (size_t)f->max;
      if (strlen(v->valuestring) + 1 > cap)
        return ds__seterr(c->eb, DS_ERR_CONFIG, "%s: %s: expected a string of at most %zu characters", c->file,
                          path, cap - 1);
      memcpy(dst, v->valuestring, strlen(v->valuestring) + 1);
      return DS_OK;
    }
    case DS_CFG_ENUM: {
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
      char expected[256];
      snprintf(expected, sizeof expected, "one of \"%s\"", f->choices);
      for (char* p = expected; *p; p++)
        if (*p == '|') *p = ',';
      return type_error(c, path, expected, v);
    }
    case DS_CFG_VEC3: {
      if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != 3) return type_error(c, path, "an array of 3 numbers", v);
      dsReal tmp[3];
      for (int i = 0; i < 3; i++) {
        const cJSON* e = cJSON_GetArrayItem(v, i);
        char ipath[PATH_MAX_LEN + 8];
        snprintf(ipath, sizeof ipath, "%s[%d]", path, i);
        if (!cJSON_IsNumber(e)) return type_error(c, ipath, "a number", e);
        if (!isfinite(e->valuedouble) || e->valuedouble < f->min || e->valuedouble > f->max)
          return range_error(c, ipath, f, e, "a number");
        tmp[i] = (dsReal)e->valuedouble;
      }
      memcpy(dst, tmp, sizeof tmp);
      return DS_OK;
    }
    case DS_CFG_REALS: {
      int n = cJSON_IsArray(v) ? cJSON_GetArraySize(v) : -1;
      if (n < 1 || n > (int)f->max || n > DS_CFG_MAX_REALS) {
        char expected[96];
        snprintf(expected, sizeof expected, "an array of 1 to %d numbers",
                 (int)f->max < DS_CFG_MAX_REALS ? (int)f->max : DS_CFG_MAX_REALS);
        return type_error(c, path, expected, v);
      }
      dsReal tmp[DS_CFG_MAX_REALS];
      for (int i = 0; i < n; i++) {
        const cJSON* e = cJSON_GetArrayItem(v, i);
        char ipath[PATH_MAX_LEN + 8];
        snprintf(ipath, sizeof ipath, "%s[%d]", path, i);
        if (!cJSON_IsNumber(e)) return type_error(c, ipath, "a number", e);
        if (!isfinite(e->valuedouble) || e->valuedouble < f->min) {
          char got[96];
          describe(e, got, sizeof got);
          return ds__seterr(c->eb, DS_ERR_CONFIG, "%s: %s: expected a number >= %g, got %s", c->file, ipath,
                            f->min, got);
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
        return ds__seterr(c->eb, DS_ERR_CONFIG, "%s: key \"%s\" appears twice", c->file, path);
    const dsCfgField* f = NULL;
    for (const dsCfgField* g = c->fields; g->path; g++)
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

int ds__cfg_parse(const char* file, const char* text, const dsCfgField* fields, void* target,
                  size_t target_size, dsErrBuf* eb) {
  const char* end = NULL;
  cJSON* root = cJSON_ParseWithOpts(text, &end, 1);
  if (!root) {
    int line, col;
    if (!end) end = text;
    line_col(text, end, &line, &col);
    if (!*end)
      return ds__seterr(eb, DS_ERR_PARSE, "%s:%d:%d: invalid JSON (unexpected end of file)", file, line, col);
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
    return ds__seterr(eb, DS_ERR_PARSE, "%s:%d:%d: invalid JSON near '%s'", file, line, col, near);
  }
  int rc = DS_OK;
  char* scratch = NULL;
  if (!cJSON_IsObject(root)) {
    rc = ds__seterr(eb, DS_ERR_CONFIG, "%s: expected a JSON object at the top level, got %s", file, json_kind(root));
    goto done;
  }
  scratch = (char*)ds__malloc(target_size);
  if (!scratch) {
    rc = ds__seterr(eb, DS_ERR_NOMEM, "%s: out of memory", file);
    goto done;
  }
  memcpy(scratch, target, target_size);
  Ctx c = {file, fields, scratch, eb};
  rc = walk(&c, root, "");
  if (rc == DS_OK) memcpy(target, scratch, target_size);
done:
  ds__free(scratch);
  cJSON_Delete(root);
  return rc;
}

int ds__cfg_load(const char* path, const dsCfgField* fields, void* target, size_t target_size, dsErrBuf* eb) {
  char* text = NULL;
  int rc = ds__read_text_file(path, &text, NULL, eb);
  if (rc) return rc;
  rc = ds__cfg_parse(path, text, fields, target, target_size, eb);
  ds__free(text);
  return rc;
}

int ds__cfg_peek_string(const char* text, const char* key, char* out, size_t outlen) {
  cJSON* root = cJSON_Parse(text);
  if (!root) return DS_ERR_PARSE;
  int rc = DS_ERR_NOTFOUND;
  const cJSON* v = cJSON_IsObject(root) ? cJSON_GetObjectItemCaseSensitive(root, key) : NULL;
  if (cJSON_IsString(v) && strlen(v->valuestring) < outlen) {
    memcpy(out, v->valuestring, strlen(v->valuestring) + 1);
    rc = DS_OK;
  }
  cJSON_Delete(root);
  return rc;
}

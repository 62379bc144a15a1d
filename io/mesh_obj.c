/* Wavefront OBJ reader (v and f statements) and the line reader shared with
 * the TetGen reader.
 *
 * Errors name the file and line ("mesh.obj:12: face index 40 out of range
 * (1..38)"). The mesh is built in local growing arrays and handed to *out
 * only on success; every failure path frees them and closes the file. */
#include "config.h"

#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsim/mesh.h"
#include "base/internal.h"
#include "io/mesh_read.h"

/* ---- shared reader helpers ------------------------------------------------------*/

#define DS_MESH_MAX_LINE ((size_t)16 << 20)

int ds__lines_open(dsMeshLines* r, const char* path, char* err, size_t errlen) {
  memset(r, 0, sizeof *r);
  r->path = path ? path : "(null)";
  if (!path) return ds__puterr(err, errlen, DS_ERR_INVALID, "no file name");
  FILE* f = fopen(path, "rb");
  if (!f) return ds__puterr(err, errlen, DS_ERR_IO, "%s: cannot open (%s)", path, strerror(errno));
  r->f = f;
  return 0;
}

void ds__lines_close(dsMeshLines* r) {
  if (r->f) fclose((FILE*)r->f);
  ds__free(r->buf);
  r->f = NULL;
  r->buf = NULL;
  r->cap = 0;
}

int ds__lines_next(dsMeshLines* r, char** line, char* err, size_t errlen) {
  FILE* f = (FILE*)r->f;
  size_t n = 0;
  int c, got = 0, nul = 0;
  while ((c = getc(f)) != EOF) {
    got = 1;
    if (c == '\n') break;
    if (c == '\0') nul = 1;
    if (n + 1 >= r->cap) {
      if (r->cap >= DS_MESH_MAX_LINE)
        return ds__puterr(err, errlen, DS_ERR_PARSE, "%s:%ld: line longer than %zu bytes", r->path,
                            r->lineno + 1, DS_MESH_MAX_LINE);
      size_t cap = r->cap ? 2 * r->cap : 256;
      char* nb = (char*)ds__realloc(r->buf, cap);
      if (!nb) return ds__puterr(err, errlen, DS_ERR_NOMEM, "%s:%ld: out of memory", r->path, r->lineno + 1);
      r->buf = nb;
      r->cap = cap;
    }
    r->buf[n++] = (char)c;
  }
  if (ferror(f)) return ds__puterr(err, errlen, DS_ERR_IO, "%s:%ld: read error", r->path, r->lineno + 1);
  if (!got) return 0;
  r->lineno++;
  if (nul) return ds__puterr(err, errlen, DS_ERR_PARSE, "%s:%ld: NUL byte (binary file?)", r->path, r->lineno);
  if (!r->buf) { /* empty first line: make a buffer */
    r->buf = (char*)ds__malloc(16);
    if (!r->buf) return ds__puterr(err, errlen, DS_ERR_NOMEM, "%s:%ld: out of memory", r->path, r->lineno);
    r->cap = 16;
  }
  r->buf[n] = '\0';
  char* hash = strchr(r->buf, '#');
  if (hash) *hash = '\0', n = (size_t)(hash - r->buf);
  while (n > 0 && (r->buf[n - 1] == '\r' || r->buf[n - 1] == ' ' || r->buf[n - 1] == '\t')) r->buf[--n] = '\0';
  *line = r->buf;
  return 1;
}

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

char* ds__mesh_token(char** cur) {
  char* p = *cur;
  while (*p && is_space(*p)) p++;
  if (!*p) {
    *cur = p;
    return NULL;
  }
  char* t = p;
  while (*p && !is_space(*p)) p++;
  if (*p) *p++ = '\0';
  *cur = p;
  return t;
}

int ds__mesh_grow(void** p, size_t* cap, size_t need, size_t elem) {
  if (need <= *cap) return 0;
  size_t nc = *cap ? *cap : 64;
  while (nc < need) {
    if (nc > ((size_t)-1 / 2) / elem) return DS_ERR_NOMEM;
    nc *= 2;
  }
  void* q = ds__realloc(*p, nc * elem);
  if (!q) return DS_ERR_NOMEM;
  *p = q;
  *cap = nc;
  return 0;
}

int ds__mesh_parse_real(const char* tok, dsReal* v) {
  char* end;
  double d = strtod(tok, &end);
  if (end == tok || *end != '\0') return -1;
  if (!isfinite(d) || fabs(d) > (double)(DS_SINGLE ? FLT_MAX : DBL_MAX)) return -1;
  *v = (dsReal)d;
  return 0;
}

int ds__mesh_parse_long(const char* tok, long* v) {
  char* end;
  errno = 0;
  long l = strtol(tok, &end, 10);
  if (end == tok || *end != '\0') return -1;
  if (errno == ERANGE) return -2;
  *v = l;
  return 0;
}

/* ---- OBJ --------------------------------------------------------------------------*/

typedef struct ObjBuild {
  dsReal* x;
  size_t capx;
  int nv;
  int* tri;
  size_t capt;
  long* tline; /* line of each triangle, for messages */
  size_t capl;
  int nt;
  int* poly; /* current face, 0-based vertex indices */
  size_t capp;
} ObjBuild;

static void obj_free(ObjBuild* b) {
  ds__free(b->x);
  ds__free(b->tri);
  ds__free(b->tline);
  ds__free(b->poly);
}

/* The vertex part of a face token "v", "v/vt", "v/vt/vn" or "v//vn": the
 * text before the first '/' (cut in place); the rest must be one or two
 * '/'-separated optional integers. Returns NULL if malformed. */
static char* face_vertex_part(char* tok) {
  char* slash = strchr(tok, '/');
  if (!slash) return tok;
  int nslash = 1;
  for (char* p = slash + 1; *p; p++) {
    if (*p == '/') {
      if (++nslash > 2) return NULL;
    } else if (!((*p >= '0' && *p <= '9') || *p == '-' || *p == '+')) {
      return NULL;
    }
  }
  *slash = '\0';
  return tok;
}

/* The out-of-memory message of a statement's line. */
static int obj_nomem(char* err, size_t errlen, const char* P, long L) {
  return ds__puterr(err, errlen, DS_ERR_NOMEM, "%s:%ld: out of memory", P, L);
}

/* "v x y z [...]": appends one vertex of three finite coordinates; further
 * numbers (w, colours) are ignored. */
static int obj_vertex(ObjBuild* b, char* cur, const char* P, long L, char* err, size_t errlen) {
  if (b->nv >= INT_MAX / 3) return ds__puterr(err, errlen, DS_ERR_PARSE, "%s:%ld: too many vertices", P, L);
  if (ds__mesh_grow((void**)&b->x, &b->capx, 3 * (size_t)b->nv + 3, sizeof(dsReal)))
    return obj_nomem(err, errlen, P, L);
  for (int k = 0; k < 3; k++) {
    char* tok = ds__mesh_token(&cur);
    if (!tok)
      return ds__puterr(err, errlen, DS_ERR_PARSE, "%s:%ld: vertex needs 3 coordinates, found %d", P, L, k);
    if (ds__mesh_parse_real(tok, &b->x[3 * (size_t)b->nv + k]))
      return ds__puterr(err, errlen, DS_ERR_PARSE, "%s:%ld: cannot parse '%.40s' as a finite coordinate", P, L,
                        tok);
  }
  b->nv++;
  return 0;
}

/* The indices of an "f" statement into b->poly as 0-based vertices (*np of
 * them): positive indices count 1..nv from the first vertex, negative ones
 * -1..-nv back from the last vertex read so far. */
static int obj_face_indices(ObjBuild* b, char* cur, size_t* np_out, const char* P, long L, char* err,
                            size_t errlen) {
  size_t np = 0;
  char* tok;
  while ((tok = ds__mesh_token(&cur)) != NULL) {
    char* vp = face_vertex_part(tok);
    long idx;
    int pr = vp ? ds__mesh_parse_long(vp, &idx) : -1;
    if (pr == -1)
      return ds__puterr(err, errlen, DS_ERR_PARSE, "%s:%ld: cannot parse '%.40s' as a face index", P, L,
                        vp ? vp : tok);
    if (pr == 0 && idx == 0)
      return ds__puterr(err, errlen, DS_ERR_PARSE, "%s:%ld: face index 0 is invalid (OBJ indices start at 1)", P,
                        L);
    if (pr == -2 || idx > b->nv || idx < -(long)b->nv) {
      if (pr == -2 ? vp[0] != '-' : idx > 0)
        return ds__puterr(err, errlen, DS_ERR_PARSE, "%s:%ld: face index %.40s out of range (1..%d)", P, L, vp,
                          b->nv);
      return ds__puterr(err, errlen, DS_ERR_PARSE, "%s:%ld: face index %.40s out of range (-%d..-1)", P, L, vp,
                        b->nv);
    }
    if (ds__mesh_grow((void**)&b->poly, &b->capp, np + 1, sizeof(int))) return obj_nomem(err, errlen, P, L);
    b->poly[np++] = idx > 0 ? (int)(idx - 1) : (int)(b->nv + idx);
  }
  *np_out = np;
  return 0;
}

/* "f i j k [...]": a polygon of np >= 3 distinct corners, appended as the
 * fan (p0, p_i, p_i+1), i = 1..np-2, each triangle remembering line L. */
static int obj_face(ObjBuild* b, char* cur, const char* P, long L, char* err, size_t errlen) {
  size_t np = 0;
  int rc = obj_face_indices(b, cur, &np, P, L, err, errlen);
  if (rc) return rc;
  if (np < 3)
    return ds__puterr(err, errlen, DS_ERR_PARSE, "%s:%ld: face has %zu vertices, needs at least 3", P, L, np);
  if ((size_t)b->nt + (np - 2) > (size_t)INT_MAX / 3)
    return ds__puterr(err, errlen, DS_ERR_PARSE, "%s:%ld: too many triangles", P, L);
  size_t need = (size_t)b->nt + (np - 2);
  if (ds__mesh_grow((void**)&b->tri, &b->capt, 3 * need, sizeof(int))) return obj_nomem(err, errlen, P, L);
  if (ds__mesh_grow((void**)&b->tline, &b->capl, need, sizeof(long))) return obj_nomem(err, errlen, P, L);
  for (size_t i = 1; i + 1 < np; i++) {
    int a = b->poly[0], c = b->poly[i], d = b->poly[i + 1];
    if (a == c || a == d || c == d) {
      int rep = (a == c || a == d) ? a : c;
      return ds__puterr(err, errlen, DS_ERR_MESH, "%s:%ld: face repeats vertex %d", P, L, rep + 1);
    }
    int* f = b->tri + 3 * (size_t)b->nt;
    f[0] = a, f[1] = c, f[2] = d;
    b->tline[b->nt++] = L;
  }
  return 0;
}

/* Statements that carry nothing the mesh keeps (normals, texture
 * coordinates, groups, materials, lines, points): skipped, not errors. */
static int obj_ignored(const char* kw) {
  return strcmp(kw, "vn") == 0 || strcmp(kw, "vt") == 0 || strcmp(kw, "vp") == 0 || strcmp(kw, "o") == 0 ||
         strcmp(kw, "g") == 0 || strcmp(kw, "s") == 0 || strcmp(kw, "usemtl") == 0 || strcmp(kw, "mtllib") == 0 ||
         strcmp(kw, "l") == 0 || strcmp(kw, "p") == 0;
}

/* The whole file read: at least one vertex, and every triangle of area
 * above 1e-12 times the squared bounding-box diagonal (a scale-free test),
 * a degenerate one named by its line. */
static int obj_check(const ObjBuild* b, const char* P, char* err, size_t errlen) {
  if (b->nv == 0) return ds__puterr(err, errlen, DS_ERR_PARSE, "%s: no vertices", P);
  double diag2 = ds_bbox_diag2(b->x, b->nv);
  for (int t = 0; t < b->nt; t++) {
    const int* f = b->tri + 3 * (size_t)t;
    double area = 0.5 * ds_tri_area2(b->x + 3 * f[0], b->x + 3 * f[1], b->x + 3 * f[2]);
    if (!(area > 1e-12 * diag2))
      return ds__puterr(err, errlen, DS_ERR_MESH, "%s:%ld: degenerate triangle (%d, %d, %d), area %g", P,
                        b->tline[t], f[0] + 1, f[1] + 1, f[2] + 1, area);
  }
  return 0;
}

int ds_mesh_read_obj(const char* path, dsMesh* out, char* err, size_t errlen) {
  if (!out) return ds__puterr(err, errlen, DS_ERR_INVALID, "output mesh is NULL");
  dsMeshLines rd;
  int rc = ds__lines_open(&rd, path, err, errlen);
  if (rc) return rc;
  ObjBuild b;
  memset(&b, 0, sizeof b);
  char* line;
  const char* P = rd.path;
  while ((rc = ds__lines_next(&rd, &line, err, errlen)) == 1) {
    char* cur = line;
    char* kw = ds__mesh_token(&cur);
    if (!kw) continue;
    long L = rd.lineno;
    rc = 0;
    if (strcmp(kw, "v") == 0)
      rc = obj_vertex(&b, cur, P, L, err, errlen);
    else if (strcmp(kw, "f") == 0)
      rc = obj_face(&b, cur, P, L, err, errlen);
    else if (!obj_ignored(kw))
      rc = ds__puterr(err, errlen, DS_ERR_PARSE, "%s:%ld: unknown statement '%.40s'", P, L, kw);
    if (rc) break;
  }
  if (!rc) rc = obj_check(&b, P, err, errlen);
  if (rc) {
    ds__lines_close(&rd);
    obj_free(&b);
    return rc;
  }
  ds__lines_close(&rd);
  ds__free(b.tline);
  ds__free(b.poly);
  out->nvert = b.nv;
  out->x = b.x;
  out->ntri = b.nt;
  out->tri = b.tri;
  out->ntet = 0;
  out->tet = NULL;
  return 0;
}

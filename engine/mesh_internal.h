/* Helpers shared by the mesh files (engine/mesh*.c, io/mesh_*.c). Not
 * installed. */
#ifndef DSIM_ENGINE_MESH_INTERNAL_H
#define DSIM_ENGINE_MESH_INTERNAL_H

#include <stddef.h>

#include "dsim/mesh.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Allocate zero-filled x (nvert x 3), tri (ntri x 3) and tet (ntet x 4) into
 * *m (zero counts give NULL arrays) and set the counts. On failure frees what
 * it allocated, leaves *m zeroed and returns DS_ERR_NOMEM (DS_ERR_INVALID for
 * negative counts or sizes that overflow). */
int ds__mesh_alloc(dsMesh* m, int nvert, int ntri, int ntet);

/* Signed volume of the tet (a, b, c, d): ((b-a)x(c-a)).(d-a) / 6, computed in
 * double. */
double ds__tet_volume(const dsReal* a, const dsReal* b, const dsReal* c, const dsReal* d);

/* Twice the area of the triangle (a, b, c): |(b-a)x(c-a)|, in double. */
double ds__tri_area2(const dsReal* a, const dsReal* b, const dsReal* c);

/* Squared diagonal of the bounding box of the nvert points x (0 when empty). */
double ds__bbox_diag2(const dsReal* x, int nvert);

/* snprintf into err (errlen bytes; err may be NULL or errlen 0); returns code. */
int ds__mesh_err(char* err, size_t errlen, int code, const char* fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

/* ---- reader helpers (io/mesh_obj.c) ----------------------------------------
 * A line reader over stdio that accepts any line length (buffer grown with
 * the library allocator), LF or CRLF endings, a last line without newline. */
typedef struct dsMeshLines {
  void* f;            /* FILE* */
  const char* path;   /* for messages */
  char* buf;          /* current line */
  size_t cap;         /* bytes in buf */
  long lineno;        /* 1-based number of the current line */
} dsMeshLines;

/* Open path for reading; DS_ERR_IO "path: cannot open (reason)". */
int ds__lines_open(dsMeshLines* r, const char* path, char* err, size_t errlen);
/* Close and free (safe on a reader that failed to open). */
void ds__lines_close(dsMeshLines* r);
/* Read the next line into r->buf with the '#' comment and the line ending
 * removed; *line points into it. Returns 1 for a line, 0 at end of file, or
 * DS_ERR_IO (read error), DS_ERR_PARSE (NUL byte, line over 16 MiB),
 * DS_ERR_NOMEM, with the message in err. */
int ds__lines_next(dsMeshLines* r, char** line, char* err, size_t errlen);
/* Next whitespace-separated token of *cur (NUL-terminated in place), NULL at
 * the end of the line. */
char* ds__mesh_token(char** cur);
/* Grow *p (elements of elem bytes, capacity *cap) to hold at least need
 * elements, doubling; on failure *p is unchanged and DS_ERR_NOMEM returned. */
int ds__mesh_grow(void** p, size_t* cap, size_t need, size_t elem);
/* Parse a whole token as a finite number (also finite as dsReal): 0 or -1. */
int ds__mesh_parse_real(const char* tok, dsReal* v);
/* Parse a whole token as a long integer: 0, -1 not an integer, -2 out of
 * the range of long. */
int ds__mesh_parse_long(const char* tok, long* v);

#ifdef __cplusplus
}
#endif
#endif

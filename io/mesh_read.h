/* Helpers of the mesh readers (io/mesh_obj.c, io/mesh_tetgen.c). Not
 * installed. */
#ifndef DSIM_IO_MESH_READ_H
#define DSIM_IO_MESH_READ_H

#include <stddef.h>

#include "dsim/mesh.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- reader helpers (defined in io/mesh_obj.c) ----------------------------------------
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

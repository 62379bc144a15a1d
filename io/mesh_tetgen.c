/* TetGen .node + .ele reader.
 *
 * .node: header "<#points> <dimension=3> <#attributes> <#markers (0|1)>",
 *        then one line per point "<number> <x> <y> <z> [attributes] [marker]".
 *        The first point's number (0 or 1) fixes the numbering base; the
 *        numbers must then be consecutive.
 * .ele:  header "<#tets> <nodes per tet=4> <#attributes>", then one line per
 *        tet "<number> <n1> <n2> <n3> <n4> [attributes]" with node numbers in
 *        the base of the .node file; tet numbers consecutive from the first.
 * '#' starts a comment; blank lines are skipped; every data line must have
 * exactly the number of fields its header announces; a file that ends
 * early or has data after the announced count is an error. Inverted tets
 * (signed volume <= 0, see dsMesh) are reported, never flipped. */
#include "config.h"

#include <limits.h>
#include <string.h>

#include "dsim/mesh.h"
#include "base/internal.h"
#include "io/mesh_read.h"

/* Next non-blank line split into at most `max` tokens: returns the token
 * count (0 at end of file; more than max means "too many") or a negative
 * error code with the message in err. */
static int next_fields(dsMeshLines* rd, char** tok, int max, char* err, size_t errlen) {
  char* line;
  int rc;
  while ((rc = ds__lines_next(rd, &line, err, errlen)) == 1) {
    char* cur = line;
    int n = 0;
    char* t;
    while ((t = ds__mesh_token(&cur)) != NULL) {
      if (n < max) tok[n] = t;
      n++;
    }
    if (n > 0) return n;
  }
  return rc;
}

/* Parse a header/index integer token in [lo, hi]; message names `what`. */
static int parse_int(const dsMeshLines* rd, const char* tok, long lo, long hi, const char* what, long* v, char* err,
                     size_t errlen) {
  int pr = ds__mesh_parse_long(tok, v);
  if (pr == -1)
    return ds__puterr(err, errlen, DS_ERR_PARSE, "%s:%ld: cannot parse '%.40s' as %s", rd->path, rd->lineno, tok,
                        what);
  if (pr == -2 || *v < lo || *v > hi)
    return ds__puterr(err, errlen, DS_ERR_PARSE, "%s:%ld: %s %.40s out of range (%ld..%ld)", rd->path, rd->lineno,
                        what, tok, lo, hi);
  return 0;
}

#define MAXF 64 /* fields kept per line; more are counted, not stored */

static int read_node(const char* path, dsReal** px, int* pn, int* pbase, char* err, size_t errlen) {
  dsMeshLines rd;
  int rc = ds__lines_open(&rd, path, err, errlen);
  if (rc) return rc;
  char* tok[MAXF];
  dsReal* x = NULL;
  size_t cap = 0;
  long n = 0, dim, nattr, nmark, base = 0;
  int nf = next_fields(&rd, tok, MAXF, err, errlen);
  if (nf < 0) {
    rc = nf;
    goto fail;
  }
  if (nf == 0) {
    rc = ds__puterr(err, errlen, DS_ERR_PARSE, "%s: empty file (no header)", rd.path);
    goto fail;
  }
  if (nf != 4) {
    rc = ds__puterr(err, errlen, DS_ERR_PARSE,
                      "%s:%ld: header has %d fields, expected 4 (points, dimension, attributes, markers)", rd.path,
                      rd.lineno, nf);
    goto fail;
  }
  if ((rc = parse_int(&rd, tok[0], 1, INT_MAX / 3, "node count", &n, err, errlen))) goto fail;
  if ((rc = parse_int(&rd, tok[1], 0, INT_MAX, "dimension", &dim, err, errlen))) goto fail;
  if (dim != 3) {
    rc = ds__puterr(err, errlen, DS_ERR_PARSE, "%s:%ld: dimension %ld, expected 3", rd.path, rd.lineno, dim);
    goto fail;
  }
  if ((rc = parse_int(&rd, tok[2], 0, MAXF - 5, "attribute count", &nattr, err, errlen))) goto fail;
  if ((rc = parse_int(&rd, tok[3], 0, 1, "boundary marker count", &nmark, err, errlen))) goto fail;
  const int want = (int)(4 + nattr + nmark);
  for (long i = 0; i < n; i++) {
    nf = next_fields(&rd, tok, MAXF, err, errlen);
    if (nf < 0) {
      rc = nf;
      goto fail;
    }
    if (nf == 0) {
      rc = ds__puterr(err, errlen, DS_ERR_PARSE, "%s:%ld: file ends after %ld of %ld nodes", rd.path, rd.lineno, i,
                        n);
      goto fail;
    }
    if (nf != want) {
      rc = ds__puterr(err, errlen, DS_ERR_PARSE, "%s:%ld: node line has %d fields, expected %d", rd.path, rd.lineno,
                        nf, want);
      goto fail;
    }
    long num;
    if (i == 0) {
      if ((rc = parse_int(&rd, tok[0], 0, 1, "first node number", &num, err, errlen))) goto fail;
      base = num;
    } else {
      if ((rc = parse_int(&rd, tok[0], LONG_MIN, LONG_MAX, "node number", &num, err, errlen))) goto fail;
      if (num != base + i) {
        rc = ds__puterr(err, errlen, DS_ERR_PARSE, "%s:%ld: node number %ld, expected %ld", rd.path, rd.lineno, num,
                          base + i);
        goto fail;
      }
    }
    if (ds__mesh_grow((void**)&x, &cap, 3 * (size_t)(i + 1), sizeof(dsReal))) goto nomem;
    for (int k = 0; k < 3; k++)
      if (ds__mesh_parse_real(tok[1 + k], &x[3 * i + k])) {
        rc = ds__puterr(err, errlen, DS_ERR_PARSE, "%s:%ld: cannot parse '%.40s' as a finite coordinate", rd.path,
                          rd.lineno, tok[1 + k]);
        goto fail;
      }
  }
  nf = next_fields(&rd, tok, MAXF, err, errlen);
  if (nf < 0) {
    rc = nf;
    goto fail;
  }
  if (nf > 0) {
    rc = ds__puterr(err, errlen, DS_ERR_PARSE, "%s:%ld: data after the %ld nodes the header announces", rd.path,
                      rd.lineno, n);
    goto fail;
  }
  ds__lines_close(&rd);
  *px = x;
  *pn = (int)n;
  *pbase = (int)base;
  return 0;
nomem:
  rc = ds__puterr(err, errlen, DS_ERR_NOMEM, "%s:%ld: out of memory", rd.path, rd.lineno);
fail:
  ds__lines_close(&rd);
  ds__free(x);
  return rc;
}

static int read_ele(const char* path, const dsReal* x, int nv, int base, int** ptet, int* pnt, char* err,
                    size_t errlen) {
  dsMeshLines rd;
  int rc = ds__lines_open(&rd, path, err, errlen);
  if (rc) return rc;
  char* tok[MAXF];
  int* tet = NULL;
  size_t cap = 0;
  long n = 0, npt, nattr, first = 0;
  int nf = next_fields(&rd, tok, MAXF, err, errlen);
  if (nf < 0) {
    rc = nf;
    goto fail;
  }
  if (nf == 0) {
    rc = ds__puterr(err, errlen, DS_ERR_PARSE, "%s: empty file (no header)", rd.path);
    goto fail;
  }
  if (nf != 3) {
    rc = ds__puterr(err, errlen, DS_ERR_PARSE,
                      "%s:%ld: header has %d fields, expected 3 (tetrahedra, nodes per tet, attributes)", rd.path,
                      rd.lineno, nf);
    goto fail;
  }
  if ((rc = parse_int(&rd, tok[0], 1, INT_MAX / 4, "tetrahedron count", &n, err, errlen))) goto fail;
  if ((rc = parse_int(&rd, tok[1], 0, INT_MAX, "nodes per tetrahedron", &npt, err, errlen))) goto fail;
  if (npt != 4) {
    rc = ds__puterr(err, errlen, npt == 10 ? DS_ERR_UNSUPPORTED : DS_ERR_PARSE,
                      "%s:%ld: %ld nodes per tetrahedron, expected 4 (linear tets)", rd.path, rd.lineno, npt);
    goto fail;
  }
  if ((rc = parse_int(&rd, tok[2], 0, MAXF - 6, "attribute count", &nattr, err, errlen))) goto fail;
  const int want = (int)(5 + nattr);
  for (long i = 0; i < n; i++) {
    nf = next_fields(&rd, tok, MAXF, err, errlen);
    if (nf < 0) {
      rc = nf;
      goto fail;
    }
    if (nf == 0) {
      rc = ds__puterr(err, errlen, DS_ERR_PARSE, "%s:%ld: file ends after %ld of %ld tetrahedra", rd.path,
                        rd.lineno, i, n);
      goto fail;
    }
    if (nf != want) {
      rc = ds__puterr(err, errlen, DS_ERR_PARSE, "%s:%ld: tetrahedron line has %d fields, expected %d", rd.path,
                        rd.lineno, nf, want);
      goto fail;
    }
    long num;
    if ((rc = parse_int(&rd, tok[0], i == 0 ? 0 : LONG_MIN, i == 0 ? 1 : LONG_MAX,
                        i == 0 ? "first tetrahedron number" : "tetrahedron number", &num, err, errlen)))
      goto fail;
    if (i == 0) first = num;
    if (num != first + i) {
      rc = ds__puterr(err, errlen, DS_ERR_PARSE, "%s:%ld: tetrahedron number %ld, expected %ld", rd.path, rd.lineno,
                        num, first + i);
      goto fail;
    }
    if (ds__mesh_grow((void**)&tet, &cap, 4 * (size_t)(i + 1), sizeof(int))) goto nomem;
    int* e = tet + 4 * i;
    for (int k = 0; k < 4; k++) {
      long v;
      int pr = ds__mesh_parse_long(tok[1 + k], &v);
      if (pr == -1) {
        rc = ds__puterr(err, errlen, DS_ERR_PARSE, "%s:%ld: tet %ld: cannot parse '%.40s' as a node number",
                          rd.path, rd.lineno, num, tok[1 + k]);
        goto fail;
      }
      if (pr == -2 || v < base || v > (long)base + nv - 1) {
        rc = ds__puterr(err, errlen, DS_ERR_PARSE, "%s:%ld: tet %ld: node %.40s out of range (%d..%d)", rd.path,
                          rd.lineno, num, tok[1 + k], base, base + nv - 1);
        goto fail;
      }
      e[k] = (int)(v - base);
      for (int j = 0; j < k; j++)
        if (e[j] == e[k]) {
          rc = ds__puterr(err, errlen, DS_ERR_MESH, "%s:%ld: tet %ld repeats node %ld", rd.path, rd.lineno, num, v);
          goto fail;
        }
    }
    double vol = ds_tet_signed_volume(x + 3 * e[0], x + 3 * e[1], x + 3 * e[2], x + 3 * e[3]);
    if (!(vol > 0.0)) {
      rc = ds__puterr(err, errlen, DS_ERR_MESH, "%s:%ld: tet %ld is inverted (signed volume %g <= 0)", rd.path,
                        rd.lineno, num, vol);
      goto fail;
    }
  }
  nf = next_fields(&rd, tok, MAXF, err, errlen);
  if (nf < 0) {
    rc = nf;
    goto fail;
  }
  if (nf > 0) {
    rc = ds__puterr(err, errlen, DS_ERR_PARSE, "%s:%ld: data after the %ld tetrahedra the header announces",
                      rd.path, rd.lineno, n);
    goto fail;
  }
  ds__lines_close(&rd);
  *ptet = tet;
  *pnt = (int)n;
  return 0;
nomem:
  rc = ds__puterr(err, errlen, DS_ERR_NOMEM, "%s:%ld: out of memory", rd.path, rd.lineno);
fail:
  ds__lines_close(&rd);
  ds__free(tet);
  return rc;
}

int ds_mesh_read_tetgen(const char* node_path, const char* ele_path, dsMesh* out, char* err, size_t errlen) {
  if (!out || !node_path || !ele_path) return ds__puterr(err, errlen, DS_ERR_INVALID, "NULL argument");
  dsReal* x = NULL;
  int* tet = NULL;
  int nv = 0, nt = 0, base = 0;
  int rc = read_node(node_path, &x, &nv, &base, err, errlen);
  if (rc) return rc;
  rc = read_ele(ele_path, x, nv, base, &tet, &nt, err, errlen);
  if (rc) {
    ds__free(x);
    return rc;
  }
  out->nvert = nv;
  out->x = x;
  out->ntri = 0;
  out->tri = NULL;
  out->ntet = nt;
  out->tet = tet;
  return 0;
}

/* Mesh readers: good OBJ and TetGen fixtures read back exactly; every bad
 * fixture gives the right code and a message naming the file and line;
 * truncated and corrupted copies never crash; allocation failure at every
 * allocation fails cleanly with DS_ERR_NOMEM (LeakSanitizer checks leaks). */
#define _POSIX_C_SOURCE 200809L
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dsim/dsim.h"
#include "dsim/mesh.h"
#include "tests/dstest.h"

static char g_path[4096], g_path2[4096];

static const char* data(const char* name) {
  const char* src = getenv("DS_SRCDIR");
  snprintf(g_path, sizeof g_path, "%s/tests/data/%s", src ? src : ".", name);
  return g_path;
}
static const char* data2(const char* name) {
  const char* src = getenv("DS_SRCDIR");
  snprintf(g_path2, sizeof g_path2, "%s/tests/data/%s", src ? src : ".", name);
  return g_path2;
}

static const dsMesh k_untouched = {-7, NULL, -7, NULL, -7, NULL};
static int untouched(const dsMesh* m) {
  return m->nvert == -7 && m->ntri == -7 && m->ntet == -7 && !m->x && !m->tri && !m->tet;
}

static void check_cube(const char* name) {
  dsMesh m;
  char err[512] = "";
  CHECK_INT_EQ(ds_mesh_read_obj(data(name), &m, err, sizeof err), 0);
  CHECK_STR_EQ(err, "");
  CHECK_INT_EQ(m.nvert, 8);
  CHECK_INT_EQ(m.ntri, 12);
  CHECK_INT_EQ(m.ntet, 0);
  CHECK(m.tet == NULL);
  static const dsReal want_x[24] = {0, 0, 0, 1, 0, 0, 1, 1, 0, 0, 1, 0, 0, 0, 1, 1, 0, 1, 1, 1, 1, 0, 1, 1};
  static const int want_t[36] = {0, 3, 2, 0, 2, 1, 4, 5, 6, 4, 6, 7, 0, 1, 5, 0, 5, 4,
                                 1, 2, 6, 1, 6, 5, 3, 7, 6, 3, 6, 2, 0, 4, 7, 0, 7, 3};
  int bad = 0;
  for (int i = 0; i < 24; i++) bad += m.x[i] != want_x[i];
  for (int i = 0; i < 36; i++) bad += m.tri[i] != want_t[i];
  CHECK_INT_EQ(bad, 0);
  CHECK_INT_EQ(ds_mesh_validate(&m, NULL, 0), 0);
  ds_mesh_free(&m);
}

static void check_bipyramid(const char* node, const char* ele) {
  dsMesh m;
  char err[512] = "";
  CHECK_INT_EQ(ds_mesh_read_tetgen(data(node), data2(ele), &m, err, sizeof err), 0);
  CHECK_STR_EQ(err, "");
  CHECK_INT_EQ(m.nvert, 5);
  CHECK_INT_EQ(m.ntet, 2);
  CHECK_INT_EQ(m.ntri, 0);
  CHECK(m.tri == NULL);
  static const dsReal want_x[15] = {0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, (dsReal)-2.25};
  static const int want_t[8] = {0, 1, 2, 3, 0, 2, 1, 4};
  int bad = 0;
  for (int i = 0; i < 15; i++) bad += m.x[i] != want_x[i];
  for (int i = 0; i < 8; i++) bad += m.tet[i] != want_t[i];
  CHECK_INT_EQ(bad, 0);
  CHECK_INT_EQ(ds_mesh_validate(&m, NULL, 0), 0);
  /* the boundary is the caller's step */
  CHECK_INT_EQ(ds_mesh_extract_boundary(&m, NULL, 0), 0);
  CHECK_INT_EQ(m.ntri, 6);
  ds_mesh_free(&m);
}

typedef struct BadCase {
  const char* file;
  int code;
  const char* msg; /* expected after "<path>" */
} BadCase;

static void test_bad_obj(void) {
  static const BadCase cases[] = {
      {"bad_index.obj", DS_ERR_PARSE, ":6: face index 40 out of range (1..4)"},
      {"bad_negative.obj", DS_ERR_PARSE, ":5: face index -9 out of range (-4..-1)"},
      {"bad_zero.obj", DS_ERR_PARSE, ":5: face index 0 is invalid (OBJ indices start at 1)"},
      {"bad_token.obj", DS_ERR_PARSE, ":2: cannot parse 'abc' as a finite coordinate"},
      {"bad_face_token.obj", DS_ERR_PARSE, ":5: cannot parse '2/x' as a face index"},
      {"bad_keyword.obj", DS_ERR_PARSE, ":5: unknown statement 'curv'"},
      {"bad_huge.obj", DS_ERR_PARSE, ":2: cannot parse '1e999' as a finite coordinate"},
      {"bad_dup.obj", DS_ERR_MESH, ":6: face repeats vertex 2"},
      {"bad_short_face.obj", DS_ERR_PARSE, ":5: face has 2 vertices, needs at least 3"},
      {"degenerate.obj", DS_ERR_MESH, ":6: degenerate triangle (1, 2, 3), area 0"},
      {"truncated.obj", DS_ERR_PARSE, ":6: vertex needs 3 coordinates, found 2"},
      {"empty.obj", DS_ERR_PARSE, ": no vertices"},
      {"no_such_file.obj", DS_ERR_IO, ": cannot open ("},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    dsMesh m = k_untouched;
    char err[512] = "", want[8192];
    int rc = ds_mesh_read_obj(data(cases[i].file), &m, err, sizeof err);
    if (rc != cases[i].code) fprintf(stderr, "case %s: %s\n", cases[i].file, err);
    CHECK_INT_EQ(rc, cases[i].code);
    snprintf(want, sizeof want, "%s%s", data(cases[i].file), cases[i].msg);
    CHECK_STR_CONTAINS(err, want);
    CHECK(untouched(&m));
  }
  /* NULL err is fine */
  dsMesh m = k_untouched;
  CHECK_INT_EQ(ds_mesh_read_obj(data("bad_zero.obj"), &m, NULL, 0), DS_ERR_PARSE);
  CHECK_INT_EQ(ds_mesh_read_obj(NULL, &m, NULL, 0), DS_ERR_INVALID);
  CHECK_INT_EQ(ds_mesh_read_obj(data("cube.obj"), NULL, NULL, 0), DS_ERR_INVALID);
  CHECK(untouched(&m));
}

typedef struct BadTet {
  const char *node, *ele;
  int code;
  int in_ele; /* the message names the .ele (1) or the .node (0) */
  const char* msg;
} BadTet;

static void test_bad_tetgen(void) {
  static const BadTet cases[] = {
      {"bad_dim.node", "bipyramid.ele", DS_ERR_PARSE, 0, ":1: dimension 2, expected 3"},
      {"bad_count.node", "bipyramid.ele", DS_ERR_PARSE, 0, ":6: file ends after 5 of 6 nodes"},
      {"bad_token.node", "bipyramid.ele", DS_ERR_PARSE, 0, ":5: cannot parse 'zero' as a finite coordinate"},
      {"bad_gap.node", "bipyramid.ele", DS_ERR_PARSE, 0, ":4: node number 4, expected 3"},
      {"bad_fields.node", "bipyramid.ele", DS_ERR_PARSE, 0, ":3: node line has 4 fields, expected 5"},
      {"no_such.node", "bipyramid.ele", DS_ERR_IO, 0, ": cannot open ("},
      {"bipyramid.node", "no_such.ele", DS_ERR_IO, 1, ": cannot open ("},
      {"bipyramid0.node", "bad_extra.ele", DS_ERR_PARSE, 1, ":3: data after the 1 tetrahedra the header announces"},
      {"bipyramid0.node", "bad_truncated.ele", DS_ERR_PARSE, 1, ":3: tetrahedron line has 3 fields, expected 5"},
      {"bipyramid0.node", "bad_inverted.ele", DS_ERR_MESH, 1, ":3: tet 1 is inverted (signed volume -0.375 <= 0)"},
      {"bipyramid.node", "bad_index.ele", DS_ERR_PARSE, 1, ":3: tet 2: node 9 out of range (1..5)"},
      {"bipyramid.node", "bad_zero.ele", DS_ERR_PARSE, 1, ":2: tet 1: node 0 out of range (1..5)"},
      {"bipyramid.node", "bad_dup.ele", DS_ERR_MESH, 1, ":3: tet 2 repeats node 3"},
      {"bipyramid.node", "bad_quadratic.ele", DS_ERR_UNSUPPORTED, 1, ":1: 10 nodes per tetrahedron, expected 4"},
      /* 1-based tets against 0-based nodes: other vertices, inverted */
      {"bipyramid0.node", "bipyramid.ele", DS_ERR_MESH, 1, ":2: tet 1 is inverted (signed volume -0.541667 <= 0)"},
      {"bipyramid.node", "bipyramid0.ele", DS_ERR_PARSE, 1, ":2: tet 0: node 0 out of range (1..5)"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    dsMesh m = k_untouched;
    char err[512] = "", want[8192];
    int rc = ds_mesh_read_tetgen(data(cases[i].node), data2(cases[i].ele), &m, err, sizeof err);
    if (rc != cases[i].code) fprintf(stderr, "case %s/%s: %s\n", cases[i].node, cases[i].ele, err);
    CHECK_INT_EQ(rc, cases[i].code);
    snprintf(want, sizeof want, "%s%s", cases[i].in_ele ? data2(cases[i].ele) : data(cases[i].node), cases[i].msg);
    CHECK_STR_CONTAINS(err, want);
    CHECK(untouched(&m));
  }
}

/* ---- temporary files under DS_BUILDDIR (or the working directory) --------------*/

static char g_tmp[4096];
static int write_tmp(const char* suffix, const char* bytes, size_t n) {
  const char* b = getenv("DS_BUILDDIR");
  snprintf(g_tmp, sizeof g_tmp, "%s/test_mesh_io_%ld%s", b ? b : ".", (long)getpid(), suffix);
  FILE* f = fopen(g_tmp, "wb");
  if (!f) return -1;
  size_t w = fwrite(bytes, 1, n, f);
  fclose(f);
  return w == n ? 0 : -1;
}

static char* slurp(const char* path, size_t* n) {
  FILE* f = fopen(path, "rb");
  if (!f) return NULL;
  char* buf = (char*)malloc(1 << 16);
  *n = fread(buf, 1, 1 << 16, f);
  fclose(f);
  return buf;
}

/* Every prefix and every single-byte corruption of a good file reads either
 * successfully or with a parse/mesh error carrying a message: no crash, no
 * leak, *out untouched on failure. */
static void test_corrupt(void) {
  size_t n = 0, nn = 0;
  char* obj = slurp(data("cube.obj"), &n);
  char* node = slurp(data("bipyramid.node"), &nn);
  CHECK(obj && n > 100 && node && nn > 50);
  if (!obj || !node) {
    free(obj);
    free(node);
    return;
  }
  int bad = 0, nok = 0;
  static const char subst[] = {'\0', 'x', '-', '9', '/', '\n', ' '};
  for (int pass = 0; pass < 2; pass++) {
    const char* src = pass ? node : obj;
    size_t len = pass ? nn : n;
    char* buf = (char*)malloc(len);
    for (size_t cut = 0; cut <= len + len * sizeof subst; cut++) {
      size_t use = len;
      memcpy(buf, src, len);
      if (cut <= len) {
        use = cut; /* prefix */
      } else {
        size_t k = cut - len - 1;
        buf[k / sizeof subst] = subst[k % sizeof subst];
      }
      if (write_tmp(pass ? ".node" : ".obj", buf, use)) {
        bad++;
        continue;
      }
      dsMesh m = k_untouched;
      char err[512] = "";
      int rc = pass ? ds_mesh_read_tetgen(g_tmp, data2("bipyramid.ele"), &m, err, sizeof err)
                    : ds_mesh_read_obj(g_tmp, &m, err, sizeof err);
      if (rc == 0) {
        nok++;
        if (ds_mesh_validate(&m, NULL, 0) != 0) bad++;
        ds_mesh_free(&m);
      } else {
        int code_ok = rc == DS_ERR_PARSE || rc == DS_ERR_MESH || (pass && rc == DS_ERR_UNSUPPORTED);
        int names = strstr(err, g_tmp) != NULL || (pass && strstr(err, "bipyramid.ele:") != NULL);
        if (!code_ok || !untouched(&m) || !names) {
          bad++;
          fprintf(stderr, "corrupt case %zu (pass %d): rc %d, %s\n", cut, pass, rc, err);
        }
      }
    }
    free(buf);
    remove(g_tmp);
  }
  CHECK_INT_EQ(bad, 0);
  CHECK(nok > 10); /* some corruptions are harmless (in comments) */
  free(obj);
  free(node);
}

/* A long comment line and a 2,000-gon (fan-triangulated) exercise the
 * growing buffers. */
static void test_big(void) {
  const int np = 2000;
  size_t cap = 200000 + (size_t)np * 64;
  char* s = (char*)malloc(cap);
  size_t n = 0;
  n += (size_t)snprintf(s + n, cap - n, "#");
  for (int i = 0; i < 100000; i++) s[n++] = 'c';
  s[n++] = '\n';
  for (int i = 0; i < np; i++) {
    double a = 6.283185307179586 * i / np;
    n += (size_t)snprintf(s + n, cap - n, "v %.17g %.17g 0\n", cos(a), sin(a));
  }
  n += (size_t)snprintf(s + n, cap - n, "f");
  for (int i = 0; i < np; i++) n += (size_t)snprintf(s + n, cap - n, " %d", i + 1);
  n += (size_t)snprintf(s + n, cap - n, "\n");
  CHECK_INT_EQ(write_tmp(".obj", s, n), 0);
  dsMesh m;
  char err[512] = "";
  CHECK_INT_EQ(ds_mesh_read_obj(g_tmp, &m, err, sizeof err), 0);
  CHECK_INT_EQ(m.nvert, np);
  CHECK_INT_EQ(m.ntri, np - 2);
  if (m.ntri == np - 2) {
    CHECK_INT_EQ(m.tri[3 * (np - 3) + 0], 0);
    CHECK_INT_EQ(m.tri[3 * (np - 3) + 1], np - 2);
    CHECK_INT_EQ(m.tri[3 * (np - 3) + 2], np - 1);
  }
  ds_mesh_free(&m);
  remove(g_tmp);
  free(s);
}

/* ---- allocation failure: the k-th allocation fails ---------------------------*/
static long g_count = 0, g_fail_at = -1;
static void* fail_malloc(size_t n) { return ++g_count == g_fail_at ? NULL : malloc(n); }
static void* fail_realloc(void* p, size_t n) { return ++g_count == g_fail_at ? NULL : realloc(p, n); }
static void* fail_calloc(size_t c, size_t n) { return ++g_count == g_fail_at ? NULL : calloc(c, n); }

static int read_all(char* err, size_t errlen) {
  dsMesh m = k_untouched;
  int rc = ds_mesh_read_obj(data("cube.obj"), &m, err, errlen);
  if (rc) return untouched(&m) ? rc : 999;
  ds_mesh_free(&m);
  m = k_untouched;
  rc = ds_mesh_read_obj(data("cube_crlf.obj"), &m, err, errlen);
  if (rc) return untouched(&m) ? rc : 999;
  ds_mesh_free(&m);
  m = k_untouched;
  rc = ds_mesh_read_tetgen(data("bipyramid.node"), data2("bipyramid.ele"), &m, err, errlen);
  if (rc) return untouched(&m) ? rc : 999;
  ds_mesh_free(&m);
  return 0;
}

static void test_alloc_failure(void) {
  char err[512];
  CHECK_INT_EQ(ds_replace_allocator(fail_malloc, fail_realloc, fail_calloc, free), 0);
  g_count = 0;
  g_fail_at = -1;
  CHECK_INT_EQ(read_all(err, sizeof err), 0);
  long total = g_count;
  CHECK(total >= 6);
  int bad = 0;
  for (long k = 1; k <= total; k++) {
    g_count = 0;
    g_fail_at = k;
    err[0] = '\0';
    int rc = read_all(err, sizeof err);
    if (rc != DS_ERR_NOMEM || !strstr(err, "out of memory")) {
      bad++;
      fprintf(stderr, "alloc failure %ld: rc %d, %s\n", k, rc, err);
    }
  }
  CHECK_INT_EQ(bad, 0);
  CHECK_INT_EQ(ds_replace_allocator(NULL, NULL, NULL, NULL), 0);
}

int main(void) {
  check_cube("cube.obj");
  check_cube("cube_crlf.obj");
  check_bipyramid("bipyramid.node", "bipyramid.ele");
  check_bipyramid("bipyramid0.node", "bipyramid0.ele");
  test_bad_obj();
  test_bad_tetgen();
  test_corrupt();
  test_big();
  test_alloc_failure();
  return DST_RESULT();
}

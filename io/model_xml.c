/* Articulated models from MJCF and URDF files, read with libxml2 into the
 * builder of dsim/artic.h (docs/articulated.md, "Models from files").
 *
 * Safety: the parser never touches the network (XML_PARSE_NONET), never
 * substitutes entities (no XML_PARSE_NOENT, no DTD loading) and the loaders
 * refuse any document with a DOCTYPE, so neither external entities nor
 * entity expansion can reach the model; files over DS_MODEL_FILE_MAX bytes
 * are refused before parsing. Every error names the file, the line
 * (xmlGetLineNo) and the element.
 *
 * Frames. A file gives each body a frame F (pose p, R in the parent's file
 * frame) and its mass properties in F: centre of mass c and an inertia
 * tensor I. dsim puts each body's frame D at the centre of mass with the
 * principal axes: D = F * (c, P) with I = P diag(lambda) P^T (P from the
 * Jacobi eigen-solver below, det P = +1; P = identity when I is diagonal).
 * A joint at point j with axis a (both in F) attaching F to its parent
 * (frames F', D' = F' * (c', P')) becomes
 *   anchor_parent = P'^T (p + R j - c')   (the joint point in D')
 *   anchor_child  = P^T (j - c)            (the joint point in D)
 *   quat          = P'^T R P               (D relative to D' at q = 0)
 *   axis          = P^T a                  (in the joint frame = D at q = 0)
 * so at q = 0 every body sits where the file puts it. */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsim/model_file.h"
#include "base/internal.h"
#include "io/model_xml.h"

#ifdef DS_HAVE_LIBXML2

#include <libxml/parser.h>
#include <libxml/tree.h>
#include <libxml/xmlerror.h>

#define NAME_LEN 64       /* the builder's longest name + 1 */
#define ATTR_LEN 1024     /* longest attribute value read */
#define MAX_DEPTH 200     /* body nesting (libxml2 itself stops at 256) */
#define MAX_NUMS 8        /* most numbers in one attribute */
#define PI 3.14159265358979323846
#define MJ_DENSITY 1000.0 /* MJCF's default geom density, kg/m^3 */

enum { KIND_JOINT = 0, KIND_GEOM = 1 };

typedef struct Cls { /* an MJCF default class */
  char name[NAME_LEN];
  int parent;           /* index, -1 for "main" */
  const xmlNode* node[2]; /* its <joint> and <geom>, NULL when none */
} Cls;

typedef struct Named { /* a builder name and the element that made it */
  char kind;           /* 'b' body, 'j' joint, 'a' actuator */
  char name[NAME_LEN];
  const xmlNode* node;
  int jtype;
} Named;

typedef struct Ctx {
  const char* file;
  char* err;
  size_t errlen;
  dsArticBuilder* b;
  dsArticOptions opt;
  double angle; /* MJCF: radians per angle unit of the file (pi/180 for degree) */
  Cls* cls;
  int ncls, ccls;
  Named* names;
  int nnames, cnames;
  int nauto; /* generated names so far */
} Ctx;

typedef struct Frame { /* a body's D frame in its file frame F */
  char name[NAME_LEN];  /* "world" for the world */
  double c[3], P[9];
} Frame;

/* ---- small math --------------------------------------------------------------------*/

static void mat_identity(double R[9]) {
  memset(R, 0, 9 * sizeof *R);
  R[0] = R[4] = R[8] = 1;
}

/* R = rotation of the unit quaternion q / |q| (w, x, y, z), row-major */
static void quat_to_mat(const double q0[4], double R[9]) {
  double n = sqrt(q0[0] * q0[0] + q0[1] * q0[1] + q0[2] * q0[2] + q0[3] * q0[3]);
  double w = q0[0] / n, x = q0[1] / n, y = q0[2] / n, z = q0[3] / n;
  R[0] = 1 - 2 * (y * y + z * z), R[1] = 2 * (x * y - w * z), R[2] = 2 * (x * z + w * y);
  R[3] = 2 * (x * y + w * z), R[4] = 1 - 2 * (x * x + z * z), R[5] = 2 * (y * z - w * x);
  R[6] = 2 * (x * z - w * y), R[7] = 2 * (y * z + w * x), R[8] = 1 - 2 * (x * x + y * y);
}

/* q = quaternion of the rotation R (Shepperd: from the largest of w, x, y, z) */
static void mat_to_quat(const double R[9], double q[4]) {
  double tr = R[0] + R[4] + R[8];
  if (tr >= R[0] && tr >= R[4] && tr >= R[8]) {
    double s = 2 * sqrt(1 + tr);
    q[0] = s / 4, q[1] = (R[7] - R[5]) / s, q[2] = (R[2] - R[6]) / s, q[3] = (R[3] - R[1]) / s;
  } else if (R[0] >= R[4] && R[0] >= R[8]) {
    double s = 2 * sqrt(1 + R[0] - R[4] - R[8]);
    q[0] = (R[7] - R[5]) / s, q[1] = s / 4, q[2] = (R[1] + R[3]) / s, q[3] = (R[2] + R[6]) / s;
  } else if (R[4] >= R[8]) {
    double s = 2 * sqrt(1 + R[4] - R[0] - R[8]);
    q[0] = (R[2] - R[6]) / s, q[1] = (R[1] + R[3]) / s, q[2] = s / 4, q[3] = (R[5] + R[7]) / s;
  } else {
    double s = 2 * sqrt(1 + R[8] - R[0] - R[4]);
    q[0] = (R[3] - R[1]) / s, q[1] = (R[2] + R[6]) / s, q[2] = (R[5] + R[7]) / s, q[3] = s / 4;
  }
}

/* C = A B (tA: A^T B) */
static void mat_mul(const double A[9], int tA, const double B[9], double C[9]) {
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++) {
      double s = 0;
      for (int k = 0; k < 3; k++) s += (tA ? A[3 * k + i] : A[3 * i + k]) * B[3 * k + j];
      C[3 * i + j] = s;
    }
}

/* y = A x (tA: A^T x) */
static void mat_vec(const double A[9], int tA, const double x[3], double y[3]) {
  for (int i = 0; i < 3; i++) {
    double s = 0;
    for (int k = 0; k < 3; k++) s += (tA ? A[3 * k + i] : A[3 * i + k]) * x[k];
    y[i] = s;
  }
}

/* Symmetric A = V diag(w) V^T by cyclic Jacobi rotations; det V = +1. A
 * diagonal A is returned as it is (V = identity), so files whose inertia is
 * already principal load without rounding. */
static void eig3(const double A0[9], double V[9], double w[3]) {
  static const int pq[3][2] = {{0, 1}, {0, 2}, {1, 2}};
  double a[9];
  memcpy(a, A0, sizeof a);
  mat_identity(V);
  for (int sweep = 0; sweep < 50; sweep++) {
    double off = a[1] * a[1] + a[2] * a[2] + a[5] * a[5];
    double diag = a[0] * a[0] + a[4] * a[4] + a[8] * a[8];
    if (!(off > 1e-32 * diag)) break;
    for (int r = 0; r < 3; r++) {
      int p = pq[r][0], q = pq[r][1];
      double apq = a[3 * p + q];
      if (apq == 0) continue;
      /* the rotation J (c s; -s c) in the (p, q) plane that zeroes a_pq */
      double th = (a[3 * q + q] - a[3 * p + p]) / (2 * apq);
      double t = (th >= 0 ? 1 : -1) / (fabs(th) + sqrt(th * th + 1));
      double c = 1 / sqrt(t * t + 1), s = t * c;
      for (int k = 0; k < 3; k++) { /* a = a J */
        double akp = a[3 * k + p], akq = a[3 * k + q];
        a[3 * k + p] = c * akp - s * akq, a[3 * k + q] = s * akp + c * akq;
      }
      for (int k = 0; k < 3; k++) { /* a = J^T a */
        double apk = a[3 * p + k], aqk = a[3 * q + k];
        a[3 * p + k] = c * apk - s * aqk, a[3 * q + k] = s * apk + c * aqk;
      }
      for (int k = 0; k < 3; k++) { /* V = V J */
        double vkp = V[3 * k + p], vkq = V[3 * k + q];
        V[3 * k + p] = c * vkp - s * vkq, V[3 * k + q] = s * vkp + c * vkq;
      }
      a[3 * p + q] = a[3 * q + p] = 0;
    }
  }
  w[0] = a[0], w[1] = a[4], w[2] = a[8];
  double det = V[0] * (V[4] * V[8] - V[5] * V[7]) - V[1] * (V[3] * V[8] - V[5] * V[6]) +
               V[2] * (V[3] * V[7] - V[4] * V[6]);
  if (det < 0)
    for (int k = 0; k < 3; k++) V[3 * k + 2] = -V[3 * k + 2];
}

/* The joint between parent frame par and child frame ch (header comment):
 * the child's file frame at (p, R) in the parent's, joint point j and axis a
 * in the child's file frame. */
static void joint_frames(const Frame* par, const double p[3], const double R[9], const Frame* ch, const double j[3],
                         const double a[3], dsArticJointDef* d) {
  double x[3], Rj[3], M[9], RP[9];
  mat_vec(R, 0, j, Rj);
  for (int k = 0; k < 3; k++) x[k] = p[k] + Rj[k] - par->c[k];
  mat_vec(par->P, 1, x, d->anchor_parent);
  for (int k = 0; k < 3; k++) x[k] = j[k] - ch->c[k];
  mat_vec(ch->P, 1, x, d->anchor_child);
  mat_mul(R, 0, ch->P, RP);
  mat_mul(par->P, 1, RP, M);
  mat_to_quat(M, d->quat);
  mat_vec(ch->P, 1, a, d->axis);
}

/* ---- messages ----------------------------------------------------------------------*/

/* Optimal string alignment distance (a transposition costs 1), case-blind */
static int edit_distance(const char* s, const char* t) {
  int n = (int)strlen(s), m = (int)strlen(t);
  if (n > 40 || m > 40) return 99;
  int d[41][41];
  for (int i = 0; i <= n; i++) d[i][0] = i;
  for (int j = 0; j <= m; j++) d[0][j] = j;
  for (int i = 1; i <= n; i++)
    for (int j = 1; j <= m; j++) {
      int cost = (s[i - 1] | 32) != (t[j - 1] | 32);
      int v = d[i - 1][j] + 1;
      if (d[i][j - 1] + 1 < v) v = d[i][j - 1] + 1;
      if (d[i - 1][j - 1] + cost < v) v = d[i - 1][j - 1] + cost;
      if (i > 1 && j > 1 && (s[i - 1] | 32) == (t[j - 2] | 32) && (s[i - 2] | 32) == (t[j - 1] | 32) &&
          d[i - 2][j - 2] + 1 < v)
        v = d[i - 2][j - 2] + 1;
      d[i][j] = v;
    }
  return d[n][m];
}

/* " (did you mean 'x'?)" for the closest of known (NULL-terminated) within
 * two edits and under half its length, else "" */
static void did_you_mean(const char* s, const char* const* known, char* out, size_t len) {
  int best = 99;
  const char* pick = NULL;
  out[0] = 0;
  for (int i = 0; known[i]; i++) {
    int d = edit_distance(s, known[i]);
    if (d < best && d <= 2 && 2 * d < (int)strlen(known[i])) best = d, pick = known[i];
  }
  if (pick) snprintf(out, len, " (did you mean '%s'?)", pick);
}

static void join_list(const char* const* known, char* out, size_t len) {
  size_t at = 0;
  out[0] = 0;
  for (int i = 0; known[i] && at + 1 < len; i++) {
    int w = snprintf(out + at, len - at, "%s%s", i ? ", " : "", known[i]);
    if (w < 0) break;
    at += (size_t)w;
  }
}

/* "FILE:LINE: <elem name='x'>: message" */
static int fail(Ctx* c, const xmlNode* n, int code, const char* fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
static int fail(Ctx* c, const xmlNode* n, int code, const char* fmt, ...) {
  char msg[512], where[128];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (!n) return ds__puterr(c->err, c->errlen, code, "%s: %s", c->file, msg);
  xmlChar* name = xmlGetProp(n, (const xmlChar*)"name");
  if (name)
    snprintf(where, sizeof where, "<%.40s name='%.40s'>", (const char*)n->name, (const char*)name);
  else
    snprintf(where, sizeof where, "<%.40s>", (const char*)n->name);
  xmlFree(name);
  return ds__puterr(c->err, c->errlen, code, "%s:%ld: %s: %s", c->file, xmlGetLineNo(n), where, msg);
}

/* An element's attributes must all be in known (NULL-terminated). */
static int check_attrs(Ctx* c, const xmlNode* n, const char* const* known) {
  for (const xmlAttr* a = n->properties; a; a = a->next) {
    int ok = 0;
    for (int i = 0; known[i] && !ok; i++) ok = !strcmp((const char*)a->name, known[i]);
    if (ok) continue;
    char hint[96], list[512];
    did_you_mean((const char*)a->name, known, hint, sizeof hint);
    join_list(known, list, sizeof list);
    return fail(c, n, DS_ERR_INVALID, "unknown or unsupported attribute '%.40s'%s (expected one of: %s)",
                (const char*)a->name, hint, list);
  }
  return 0;
}

static int unknown_element(Ctx* c, const xmlNode* n, const char* parent, const char* const* known) {
  char hint[96], list[512];
  did_you_mean((const char*)n->name, known, hint, sizeof hint);
  join_list(known, list, sizeof list);
  return fail(c, n, DS_ERR_INVALID, "unknown element <%.40s> in <%s>%s (expected one of: %s)", (const char*)n->name,
              parent, hint, list);
}

static int is(const xmlNode* n, const char* name) { return !strcmp((const char*)n->name, name); }

static int in_list(const xmlNode* n, const char* const* list) {
  for (int i = 0; list[i]; i++)
    if (is(n, list[i])) return 1;
  return 0;
}

/* ---- attributes --------------------------------------------------------------------*/

/* Attribute key of n copied into buf: 1 present, 0 absent, < 0 error */
static int raw_attr(Ctx* c, const xmlNode* n, const char* key, char* buf, size_t len) {
  xmlChar* v = xmlGetProp(n, (const xmlChar*)key);
  if (!v) return 0;
  size_t k = strlen((const char*)v);
  if (k >= len) {
    xmlFree(v);
    return fail(c, n, DS_ERR_INVALID, "attribute %s is %zu characters long (expected at most %zu)", key, k, len - 1);
  }
  memcpy(buf, v, k + 1);
  xmlFree(v);
  return 1;
}

/* MJCF: attribute key of n, else of the class chain's element of kind */
static int mj_attr(Ctx* c, const xmlNode* n, int cls, int kind, const char* key, char* buf, size_t len) {
  int rc = raw_attr(c, n, key, buf, len);
  for (int k = cls; rc == 0 && k >= 0; k = c->cls[k].parent)
    if (c->cls[k].node[kind]) rc = raw_attr(c, c->cls[k].node[kind], key, buf, len);
  return rc;
}

/* Between nmin and nmax finite numbers from s into v; *got: how many */
static int parse_nums(Ctx* c, const xmlNode* n, const char* key, const char* s, double* v, int nmin, int nmax,
                      int* got) {
  int k = 0;
  const char* p = s;
  for (;;) {
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
    if (!*p) break;
    char* end;
    errno = 0;
    double x = strtod(p, &end);
    if (end == p || !isfinite(x) || errno == ERANGE || k >= nmax) {
      if (nmin == nmax)
        return fail(c, n, DS_ERR_INVALID, "%s=\"%.60s\" (expected %d finite numbers)", key, s, nmin);
      return fail(c, n, DS_ERR_INVALID, "%s=\"%.60s\" (expected %d to %d finite numbers)", key, s, nmin, nmax);
    }
    if (*end && *end != ' ' && *end != '\t' && *end != '\n' && *end != '\r')
      return fail(c, n, DS_ERR_INVALID, "%s=\"%.60s\": '%c' after a number (expected numbers separated by spaces)",
                  key, s, *end);
    v[k++] = x;
    p = end;
  }
  if (k < nmin) {
    if (nmin == nmax) return fail(c, n, DS_ERR_INVALID, "%s=\"%.60s\" (expected %d finite numbers)", key, s, nmin);
    return fail(c, n, DS_ERR_INVALID, "%s=\"%.60s\" (expected %d to %d finite numbers)", key, s, nmin, nmax);
  }
  *got = k;
  return 0;
}

/* Numbers of attribute key (MJCF class chain when cls >= 0): 1 present, 0
 * absent (v untouched), < 0 error */
static int get_nums(Ctx* c, const xmlNode* n, int cls, int kind, const char* key, double* v, int nmin, int nmax,
                    int* got) {
  char buf[ATTR_LEN];
  int rc = cls >= 0 ? mj_attr(c, n, cls, kind, key, buf, sizeof buf) : raw_attr(c, n, key, buf, sizeof buf);
  if (rc <= 0) return rc;
  double tmp[MAX_NUMS];
  int k = 0;
  if ((rc = parse_nums(c, n, key, buf, tmp, nmin, nmax, &k))) return rc;
  memcpy(v, tmp, (size_t)k * sizeof *v);
  if (got) *got = k;
  return 1;
}

static int get_num(Ctx* c, const xmlNode* n, int cls, int kind, const char* key, double* v) {
  return get_nums(c, n, cls, kind, key, v, 1, 1, NULL);
}

/* ---- names -------------------------------------------------------------------------*/

static int add_name(Ctx* c, char kind, const char* name, const xmlNode* n, int jtype) {
  if (c->nnames == c->cnames) {
    int cap = c->cnames ? 2 * c->cnames : 32;
    Named* p = ds__realloc(c->names, (size_t)cap * sizeof *p);
    if (!p) return fail(c, n, DS_ERR_NOMEM, "out of memory");
    c->names = p, c->cnames = cap;
  }
  Named* r = &c->names[c->nnames++];
  r->kind = kind, r->node = n, r->jtype = jtype;
  snprintf(r->name, sizeof r->name, "%s", name);
  return 0;
}

static const Named* find_name(const Ctx* c, char kind, const char* name) {
  for (int i = 0; i < c->nnames; i++)
    if (c->names[i].kind == kind && !strcmp(c->names[i].name, name)) return &c->names[i];
  return NULL;
}

/* The name attribute (at most NAME_LEN - 1 characters), or prefix<k> */
static int elem_name(Ctx* c, const xmlNode* n, const char* prefix, char name[NAME_LEN]) {
  int rc = raw_attr(c, n, "name", name, NAME_LEN);
  if (rc < 0) return rc;
  if (rc == 0 || !name[0]) snprintf(name, NAME_LEN, "%s%d", prefix, c->nauto++);
  return 0;
}

/* A builder call's error, placed at element n */
static int builder_fail(Ctx* c, const xmlNode* n, int rc) {
  return fail(c, n, rc, "%s", ds_artic_builder_error(c->b));
}

/* ds_artic_build's error placed at the element of the first body, joint or
 * actuator it names (it checks the whole tree, after the adds) */
static int build_fail(Ctx* c, int rc) {
  const char* msg = ds_artic_builder_error(c->b);
  const xmlNode* at = NULL;
  const char* best = NULL;
  static const char* const kw[3] = {"body '", "joint '", "actuator '"};
  static const char kinds[3] = {'b', 'j', 'a'};
  for (int i = 0; i < c->nnames; i++) {
    char key[NAME_LEN + 16];
    for (int k = 0; k < 3; k++) {
      if (c->names[i].kind != kinds[k]) continue;
      snprintf(key, sizeof key, "%s%s'", kw[k], c->names[i].name);
      const char* hit = strstr(msg, key);
      if (hit && (!best || hit < best)) best = hit, at = c->names[i].node;
    }
  }
  return fail(c, at, rc, "%s", msg);
}

/* ---- MJCF --------------------------------------------------------------------------*/

static const char* const mj_joint_attrs[] = {"name",      "class",     "type",     "axis",
                                             "pos",       "range",     "limited",  "damping",
                                             "armature",  "stiffness", "springref", NULL};
static const char* const mj_geom_attrs[] = {"name",  "class",    "type",     "size",  "fromto",      "pos",
                                            "quat",  "euler",    "axisangle", "mass", "density",     "rgba",
                                            "group", "contype",  "conaffinity", "material", "mesh", NULL};

static int class_index(const Ctx* c, const char* name) {
  for (int i = 0; i < c->ncls; i++)
    if (!strcmp(c->cls[i].name, name)) return i;
  return -1;
}

/* class="..." of n: its index, or the inherited cls when absent */
static int mj_class_of(Ctx* c, const xmlNode* n, const char* key, int cls, int* out) {
  char name[NAME_LEN];
  int rc = raw_attr(c, n, key, name, sizeof name);
  if (rc < 0) return rc;
  *out = cls;
  if (rc == 0) return 0;
  int k = class_index(c, name);
  if (k < 0) {
    const char* known[33];
    int m = 0;
    for (int i = 0; i < c->ncls && m < 32; i++) known[m++] = c->cls[i].name;
    known[m] = NULL;
    char hint[96];
    did_you_mean(name, known, hint, sizeof hint);
    return fail(c, n, DS_ERR_INVALID, "%s '%s' is not a <default> class%s", key, name, hint);
  }
  *out = k;
  return 0;
}

static int mj_default(Ctx* c, const xmlNode* n, int parent, int depth) {
  static const char* const attrs[] = {"class", NULL};
  static const char* const kids[] = {"joint", "geom", "default", NULL};
  int rc = check_attrs(c, n, attrs);
  if (rc) return rc;
  if (depth > MAX_DEPTH) return fail(c, n, DS_ERR_INVALID, "defaults nested deeper than %d", MAX_DEPTH);
  char name[NAME_LEN] = "main";
  if ((rc = raw_attr(c, n, "class", name, sizeof name)) < 0) return rc;
  if (rc == 0 && parent >= 0) return fail(c, n, DS_ERR_INVALID, "nested <default> without class (expected class=\"...\")");
  if (class_index(c, name) >= 0) return fail(c, n, DS_ERR_INVALID, "class '%s' defined twice (expected unique classes)", name);
  if (c->ncls == c->ccls) {
    int cap = c->ccls ? 2 * c->ccls : 8;
    Cls* p = ds__realloc(c->cls, (size_t)cap * sizeof *p);
    if (!p) return fail(c, n, DS_ERR_NOMEM, "out of memory");
    c->cls = p, c->ccls = cap;
  }
  int me = c->ncls++;
  memset(&c->cls[me], 0, sizeof c->cls[me]);
  snprintf(c->cls[me].name, NAME_LEN, "%s", name);
  c->cls[me].parent = parent;
  for (const xmlNode* k = n->children; k; k = k->next) {
    if (k->type != XML_ELEMENT_NODE) continue;
    if (is(k, "default")) {
      rc = mj_default(c, k, me, depth + 1);
    } else if (is(k, "joint") || is(k, "geom")) {
      int kind = is(k, "joint") ? KIND_JOINT : KIND_GEOM;
      if (c->cls[me].node[kind]) return fail(c, k, DS_ERR_INVALID, "a second <%s> in one <default>", (const char*)k->name);
      rc = check_attrs(c, k, kind == KIND_JOINT ? mj_joint_attrs : mj_geom_attrs);
      c->cls[me].node[kind] = k;
    } else {
      rc = unknown_element(c, k, "default", kids);
    }
    if (rc) return rc;
  }
  return 0;
}

/* Orientation of n from quat, euler (intrinsic x-y-z, MJCF's default
 * eulerseq) or axisangle; identity when none. */
static int mj_orient(Ctx* c, const xmlNode* n, int cls, int kind, double R[9]) {
  double v[4] = {1, 0, 0, 0}, q[4];
  int rc, set = 0;
  mat_identity(R);
  if ((rc = get_nums(c, n, cls, kind, "quat", v, 4, 4, NULL)) < 0) return rc;
  if (rc) {
    set++;
    if (v[0] == 0 && v[1] == 0 && v[2] == 0 && v[3] == 0)
      return fail(c, n, DS_ERR_INVALID, "quat is zero (expected a nonzero quaternion w x y z)");
    memcpy(q, v, sizeof q);
  }
  if ((rc = get_nums(c, n, cls, kind, "axisangle", v, 4, 4, NULL)) < 0) return rc;
  if (rc) {
    set++;
    double l = sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]), h = 0.5 * v[3] * c->angle;
    if (!(l > 0)) return fail(c, n, DS_ERR_INVALID, "axisangle has a zero axis (expected a nonzero axis)");
    q[0] = cos(h), q[1] = sin(h) * v[0] / l, q[2] = sin(h) * v[1] / l, q[3] = sin(h) * v[2] / l;
  }
  if ((rc = get_nums(c, n, cls, kind, "euler", v, 3, 3, NULL)) < 0) return rc;
  if (rc) {
    set++;
    double Rx[9], Ry[9], Rz[9], T[9];
    double qx[4] = {cos(0.5 * v[0] * c->angle), sin(0.5 * v[0] * c->angle), 0, 0};
    double qy[4] = {cos(0.5 * v[1] * c->angle), 0, sin(0.5 * v[1] * c->angle), 0};
    double qz[4] = {cos(0.5 * v[2] * c->angle), 0, 0, sin(0.5 * v[2] * c->angle)};
    quat_to_mat(qx, Rx), quat_to_mat(qy, Ry), quat_to_mat(qz, Rz);
    mat_mul(Rx, 0, Ry, T);
    mat_mul(T, 0, Rz, R);
    mat_to_quat(R, q);
  }
  if (set > 1) return fail(c, n, DS_ERR_INVALID, "more than one of quat, euler, axisangle (expected one)");
  if (set) quat_to_mat(q, R);
  return 0;
}

typedef struct Geom {
  int type; /* 0 sphere, 1 capsule, 2 box, 3 cylinder */
  double m, p[3], R[9], size[3];
} Geom;

/* R = a rotation taking z to the unit vector d */
static void rot_z_to(const double d[3], double R[9]) {
  double q[4] = {1 + d[2], -d[1], d[0], 0};
  if (q[0] < 1e-12) q[0] = 0, q[1] = 1, q[2] = 0;
  quat_to_mat(q, R);
}

/* Mass and principal moments of a solid primitive of density rho about its
 * centre, in its own frame (capsule and cylinder along z):
 *   sphere r:     m = 4/3 pi r^3 rho, I = 2/5 m r^2
 *   box a,b,c:    m = 8abc rho (half sizes), Ixx = m (b^2 + c^2) / 3
 *   cylinder r,h: m = 2 pi r^2 h rho, Ixx = m (3 r^2 + (2h)^2) / 12, Izz = m r^2 / 2
 *   capsule r,h:  a cylinder (mc) and two hemispheres (ms together) whose
 *     centres of mass sit 3r/8 beyond the ends:
 *     Ixx = mc ((2h)^2/12 + r^2/4) + ms (2r^2/5 + h^2 + 3hr/4), Izz = mc r^2/2 + ms 2r^2/5 */
static double geom_mass_inertia(const Geom* g, double rho, double I[3]) {
  const double r = g->size[0], h = g->size[1];
  double m;
  switch (g->type) {
    case 0:
      m = rho * 4.0 / 3.0 * PI * r * r * r;
      I[0] = I[1] = I[2] = 0.4 * m * r * r;
      return m;
    case 2: {
      const double a = g->size[0], b = g->size[1], cc = g->size[2];
      m = rho * 8 * a * b * cc;
      I[0] = m * (b * b + cc * cc) / 3, I[1] = m * (a * a + cc * cc) / 3, I[2] = m * (a * a + b * b) / 3;
      return m;
    }
    case 3:
      m = rho * PI * r * r * 2 * h;
      I[0] = I[1] = m * (3 * r * r + 4 * h * h) / 12;
      I[2] = m * r * r / 2;
      return m;
    default: {
      double mc = rho * PI * r * r * 2 * h, ms = rho * 4.0 / 3.0 * PI * r * r * r;
      I[0] = I[1] = mc * (4 * h * h / 12 + r * r / 4) + ms * (0.4 * r * r + h * h + 0.75 * h * r);
      I[2] = mc * r * r / 2 + ms * 0.4 * r * r;
      return mc + ms;
    }
  }
}

/* One <geom> of a body: its type, pose and mass; *skip for zero-mass geoms */
static int mj_geom(Ctx* c, const xmlNode* n, int cls, Geom* g, double I[3]) {
  static const char* const types[] = {"sphere", "capsule", "box", "cylinder", NULL};
  char t[32] = "sphere";
  int rc = check_attrs(c, n, mj_geom_attrs);
  if (rc) return rc;
  if ((rc = mj_class_of(c, n, "class", cls, &cls))) return rc;
  if ((rc = mj_attr(c, n, cls, KIND_GEOM, "type", t, sizeof t)) < 0) return rc;
  memset(g, 0, sizeof *g);
  g->type = -1;
  for (int i = 0; types[i]; i++)
    if (!strcmp(t, types[i])) g->type = i;
  if (g->type < 0) {
    if (!strcmp(t, "mesh") || !strcmp(t, "plane") || !strcmp(t, "ellipsoid") || !strcmp(t, "hfield") ||
        !strcmp(t, "sdf"))
      return fail(c, n, DS_ERR_UNSUPPORTED,
                  "geom type '%s' on a body is not supported yet (expected sphere, capsule, box or cylinder)", t);
    char hint[96];
    did_you_mean(t, types, hint, sizeof hint);
    return fail(c, n, DS_ERR_INVALID, "unknown geom type '%s'%s (expected sphere, capsule, box or cylinder)", t, hint);
  }
  static const int nsize[4] = {1, 2, 3, 2};
  double ft[6];
  int got = 0, has_ft;
  if ((has_ft = get_nums(c, n, cls, KIND_GEOM, "fromto", ft, 6, 6, NULL)) < 0) return has_ft;
  if (has_ft && (g->type == 0 || g->type == 2))
    return fail(c, n, DS_ERR_INVALID, "fromto on a %s (expected it on a capsule or cylinder only)", t);
  int need = has_ft ? 1 : nsize[g->type];
  if ((rc = get_nums(c, n, cls, KIND_GEOM, "size", g->size, need, 3, &got)) < 0) return rc;
  if (rc == 0) return fail(c, n, DS_ERR_INVALID, "%s without size (expected %d numbers)", t, need);
  for (int k = 0; k < need; k++)
    if (!(g->size[k] > 0)) return fail(c, n, DS_ERR_INVALID, "size[%d] %g (expected > 0)", k, g->size[k]);
  if (has_ft) {
    double d[3] = {ft[3] - ft[0], ft[4] - ft[1], ft[5] - ft[2]};
    double l = sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
    if (!(l > 0)) return fail(c, n, DS_ERR_INVALID, "fromto has length zero (expected two distinct points)");
    for (int k = 0; k < 3; k++) g->p[k] = 0.5 * (ft[k] + ft[k + 3]), d[k] /= l;
    g->size[1] = 0.5 * l;
    rot_z_to(d, g->R); /* MJCF: fromto replaces pos and the orientation */
  } else {
    if ((rc = get_nums(c, n, cls, KIND_GEOM, "pos", g->p, 3, 3, NULL)) < 0) return rc;
    if ((rc = mj_orient(c, n, cls, KIND_GEOM, g->R))) return rc;
  }
  double rho = MJ_DENSITY, m;
  if ((rc = get_num(c, n, cls, KIND_GEOM, "density", &rho)) < 0) return rc;
  if (!(rho >= 0)) return fail(c, n, DS_ERR_INVALID, "density %g (expected >= 0)", rho);
  g->m = geom_mass_inertia(g, rho, I);
  if ((rc = get_num(c, n, cls, KIND_GEOM, "mass", &m)) < 0) return rc;
  if (rc) { /* the given mass with the shape's distribution: I scales with m */
    if (!(m >= 0)) return fail(c, n, DS_ERR_INVALID, "mass %g (expected >= 0)", m);
    for (int k = 0; k < 3; k++) I[k] = g->m > 0 ? I[k] * (m / g->m) : 0;
    g->m = m;
  }
  return 0;
}

/* Mass properties from the geoms (total mass, centre c, principal frame P
 * and moments w): I about c = sum R_i diag(I_i) R_i^T + m_i (|d|^2 E - d d^T),
 * d = p_i - c. */
static void geoms_mass(const Geom* g, const double (*Ig)[3], int ng, double* mass, double c[3], double P[9],
                       double w[3]) {
  double M = 0, I[9] = {0};
  c[0] = c[1] = c[2] = 0;
  for (int i = 0; i < ng; i++) {
    M += g[i].m;
    for (int k = 0; k < 3; k++) c[k] += g[i].m * g[i].p[k];
  }
  if (M > 0)
    for (int k = 0; k < 3; k++) c[k] /= M;
  for (int i = 0; i < ng; i++) {
    double d[3] = {g[i].p[0] - c[0], g[i].p[1] - c[1], g[i].p[2] - c[2]}, dd = d[0] * d[0] + d[1] * d[1] + d[2] * d[2];
    for (int r = 0; r < 3; r++)
      for (int s = 0; s < 3; s++) {
        double v = 0;
        for (int k = 0; k < 3; k++) v += g[i].R[3 * r + k] * Ig[i][k] * g[i].R[3 * s + k];
        I[3 * r + s] += v + g[i].m * ((r == s ? dd : 0) - d[r] * d[s]);
      }
  }
  *mass = M;
  eig3(I, P, w);
}

/* Contact geometry of the spheres and capsules, in the body's D frame */
static int mj_contacts(Ctx* c, const Geom* g, const xmlNode* const* gn, int ng, const Frame* f) {
  for (int i = 0; i < ng; i++) {
    if (g[i].type > 1) continue;
    dsArticGeomDef gd = ds_artic_default_geom_def();
    double x[3], e[3] = {0, 0, g[i].size[1]}, Re[3];
    gd.body = f->name;
    gd.radius = g[i].size[0];
    mat_vec(g[i].R, 0, e, Re);
    for (int k = 0; k < 3; k++) x[k] = g[i].p[k] - f->c[k];
    if (g[i].type == 0) {
      mat_vec(f->P, 1, x, gd.pos);
    } else {
      double a[3], bb[3];
      gd.type = DS_ARTIC_CAPSULE;
      for (int k = 0; k < 3; k++) a[k] = x[k] - Re[k], bb[k] = x[k] + Re[k];
      mat_vec(f->P, 1, a, gd.pos);
      mat_vec(f->P, 1, bb, gd.pos2);
    }
    int rc = ds_artic_add_geom(c->b, &gd);
    if (rc) return builder_fail(c, gn[i], rc);
  }
  return 0;
}

/* The body's joint (or a weld when jn is NULL) */
static int mj_joint(Ctx* c, const xmlNode* jn, const xmlNode* body, int cls, const Frame* par, const double p[3],
                    const double R[9], const Frame* f) {
  dsArticJointDef jd = ds_artic_default_joint_def();
  double j[3] = {0, 0, 0}, a[3] = {0, 0, 1};
  char name[NAME_LEN], t[16] = "hinge";
  int rc;
  jd.parent = par->name, jd.child = f->name, jd.name = name;
  if (!jn) {
    jd.type = DS_JOINT_FIXED;
    snprintf(name, sizeof name, "%.50s_weld", f->name);
    joint_frames(par, p, R, f, j, a, &jd);
    if ((rc = add_name(c, 'j', name, body, jd.type))) return rc;
    rc = ds_artic_add_joint(c->b, &jd);
    return rc ? builder_fail(c, body, rc) : 0;
  }
  if (is(jn, "freejoint")) {
    static const char* const fa[] = {"name", NULL};
    if ((rc = check_attrs(c, jn, fa))) return rc;
    snprintf(t, sizeof t, "free");
  } else {
    if ((rc = check_attrs(c, jn, mj_joint_attrs))) return rc;
    if ((rc = mj_class_of(c, jn, "class", cls, &cls))) return rc;
    if ((rc = mj_attr(c, jn, cls, KIND_JOINT, "type", t, sizeof t)) < 0) return rc;
  }
  if ((rc = elem_name(c, jn, "joint", name))) return rc;
  static const char* const types[] = {"fixed", "hinge", "slide", "ball", "free", NULL};
  int type = -1;
  for (int i = 1; types[i]; i++)
    if (!strcmp(t, types[i])) type = i;
  if (type < 0) {
    char hint[96];
    did_you_mean(t, types + 1, hint, sizeof hint);
    return fail(c, jn, DS_ERR_INVALID, "unknown joint type '%s'%s (expected hinge, slide, ball or free)", t, hint);
  }
  jd.type = (dsJointType)type;
  const double scale = type == DS_JOINT_HINGE ? c->angle : 1; /* ranges and springref of hinges are angles */
  if (type != DS_JOINT_FREE && !is(jn, "freejoint")) {
    double range[2];
    char lim[16] = "auto";
    int has_range;
    if ((rc = get_nums(c, jn, cls, KIND_JOINT, "pos", j, 3, 3, NULL)) < 0) return rc;
    if ((rc = get_nums(c, jn, cls, KIND_JOINT, "axis", a, 3, 3, NULL)) < 0) return rc;
    if ((has_range = get_nums(c, jn, cls, KIND_JOINT, "range", range, 2, 2, NULL)) < 0) return has_range;
    if ((rc = mj_attr(c, jn, cls, KIND_JOINT, "limited", lim, sizeof lim)) < 0) return rc;
    if (strcmp(lim, "auto") && strcmp(lim, "true") && strcmp(lim, "false"))
      return fail(c, jn, DS_ERR_INVALID, "limited=\"%s\" (expected true, false or auto)", lim);
    if (!strcmp(lim, "true") && !has_range)
      return fail(c, jn, DS_ERR_INVALID, "limited=\"true\" without range (expected range=\"lower upper\")");
    if (has_range && strcmp(lim, "false")) {
      if (type == DS_JOINT_BALL)
        return fail(c, jn, DS_ERR_UNSUPPORTED, "range on a ball joint is not supported (expected limits on hinge or slide joints)");
      if (range[0] > range[1])
        return fail(c, jn, DS_ERR_INVALID, "range %g %g (expected lower <= upper)", range[0], range[1]);
      jd.limited = 1, jd.limit_lower = range[0] * scale, jd.limit_upper = range[1] * scale;
    }
    if ((rc = get_num(c, jn, cls, KIND_JOINT, "stiffness", &jd.stiffness)) < 0) return rc;
    if ((rc = get_num(c, jn, cls, KIND_JOINT, "springref", &jd.rest)) < 0) return rc;
    jd.rest *= scale;
  }
  if (!is(jn, "freejoint")) {
    if ((rc = get_num(c, jn, cls, KIND_JOINT, "damping", &jd.damping)) < 0) return rc;
    if ((rc = get_num(c, jn, cls, KIND_JOINT, "armature", &jd.armature)) < 0) return rc;
  }
  if (!(a[0] != 0 || a[1] != 0 || a[2] != 0))
    return fail(c, jn, DS_ERR_INVALID, "axis 0 0 0 has length zero (expected a nonzero axis)");
  joint_frames(par, p, R, f, j, a, &jd);
  if ((rc = add_name(c, 'j', name, jn, type))) return rc;
  rc = ds_artic_add_joint(c->b, &jd);
  return rc ? builder_fail(c, jn, rc) : 0;
}

static int mj_body(Ctx* c, const xmlNode* n, const Frame* par, int cls, int depth);

/* Principal moments of a rigid body obey the triangle inequality: with
 * Ixx = int (y^2 + z^2) dm etc., Ixx + Iyy - Izz = 2 int z^2 dm >= 0. A file
 * whose moments break it describes no body (MuJoCo refuses it too); the
 * relative slack 1e-6 admits a flat plate (Izz = Ixx + Iyy) written with
 * rounded decimals. Non-positive moments are left to the builder's check. */
static int inertia_triangle(Ctx* c, const xmlNode* n, const char* what, const double I[3]) {
  if (!(I[0] > 0 && I[1] > 0 && I[2] > 0)) return 0;
  static const char* const axis[3] = {"Ixx", "Iyy", "Izz"};
  for (int k = 0; k < 3; k++) {
    const int i = (k + 1) % 3, j = (k + 2) % 3;
    if (I[i] + I[j] < I[k] * (1 - 1e-6))
      return fail(c, n, DS_ERR_INVALID,
                  "%s %g %g %g: %s %g > %s + %s = %g (expected each moment <= the sum of the other two, as for any rigid "
                  "body)",
                  what, I[0], I[1], I[2], axis[k], I[k], axis[i < j ? i : j], axis[i < j ? j : i], I[i] + I[j]);
  }
  return 0;
}

/* A body's <inertial>: mass, centre c and principal frame P in its frame */
static int mj_inertial(Ctx* c, const xmlNode* n, double* mass, Frame* f, double w[3]) {
  static const char* const attrs[] = {"pos", "quat", "euler", "axisangle", "mass", "diaginertia", NULL};
  int rc = check_attrs(c, n, attrs);
  if (rc) return rc;
  if ((rc = get_nums(c, n, -1, 0, "pos", f->c, 3, 3, NULL)) < 0) return rc;
  if ((rc = mj_orient(c, n, -1, 0, f->P))) return rc;
  if ((rc = get_num(c, n, -1, 0, "mass", mass)) < 0) return rc;
  if (rc == 0) return fail(c, n, DS_ERR_INVALID, "no mass (expected mass=\"kg\")");
  if ((rc = get_nums(c, n, -1, 0, "diaginertia", w, 3, 3, NULL)) < 0) return rc;
  if (rc == 0) return fail(c, n, DS_ERR_INVALID, "no diaginertia (expected diaginertia=\"Ixx Iyy Izz\")");
  return inertia_triangle(c, n, "diaginertia", w);
}

/* The children of a body other than its joint and inertial */
static int mj_body_kids(Ctx* c, const xmlNode* n, const Frame* f, int cls, int depth) {
  for (const xmlNode* k = n->children; k; k = k->next) {
    if (k->type != XML_ELEMENT_NODE || !is(k, "body")) continue;
    int rc = mj_body(c, k, f, cls, depth + 1);
    if (rc) return rc;
  }
  return 0;
}

typedef struct BodyParts {
  const xmlNode *joint, *inertial;
  const xmlNode** geom;
  int ngeom;
} BodyParts;

static int mj_body_parts(Ctx* c, const xmlNode* n, BodyParts* bp) {
  static const char* const kids[] = {"body", "joint", "freejoint", "geom", "inertial", "site", "camera", "light", NULL};
  int ng = 0;
  memset(bp, 0, sizeof *bp);
  for (const xmlNode* k = n->children; k; k = k->next)
    if (k->type == XML_ELEMENT_NODE && is(k, "geom")) ng++;
  if (ng && !(bp->geom = ds__calloc((size_t)ng, sizeof *bp->geom))) return fail(c, n, DS_ERR_NOMEM, "out of memory");
  for (const xmlNode* k = n->children; k; k = k->next) {
    if (k->type != XML_ELEMENT_NODE) continue;
    if (is(k, "joint") || is(k, "freejoint")) {
      if (bp->joint)
        return fail(c, k, DS_ERR_UNSUPPORTED,
                    "a second joint in one body is not supported (expected one joint per body; nest a body per joint)");
      bp->joint = k;
    } else if (is(k, "inertial")) {
      if (bp->inertial) return fail(c, k, DS_ERR_INVALID, "a second <inertial> (expected at most one per body)");
      bp->inertial = k;
    } else if (is(k, "geom")) {
      bp->geom[bp->ngeom++] = k;
    } else if (!in_list(k, kids)) {
      return unknown_element(c, k, "body", kids);
    }
  }
  return 0;
}

static int mj_body_mass(Ctx* c, const xmlNode* n, const BodyParts* bp, int cls, Frame* f, Geom* g, double (*Ig)[3],
                        dsArticBodyDef* bd) {
  int rc;
  for (int i = 0; i < bp->ngeom; i++)
    if ((rc = mj_geom(c, bp->geom[i], cls, &g[i], Ig[i]))) return rc;
  if (bp->inertial) {
    if ((rc = mj_inertial(c, bp->inertial, &bd->mass, f, bd->inertia))) return rc;
  } else {
    geoms_mass(g, (const double(*)[3])Ig, bp->ngeom, &bd->mass, f->c, f->P, bd->inertia);
    if (!(bd->mass > 0))
      return fail(c, n, DS_ERR_INVALID, "no mass: no <inertial> and no geom with mass (expected a body mass > 0)");
  }
  rc = ds_artic_add_body(c->b, bd);
  return rc ? builder_fail(c, bp->inertial ? bp->inertial : n, rc) : 0;
}

static int mj_body(Ctx* c, const xmlNode* n, const Frame* par, int cls, int depth) {
  static const char* const attrs[] = {"name", "pos", "quat", "euler", "axisangle", "childclass", NULL};
  int rc = check_attrs(c, n, attrs);
  if (rc) return rc;
  if (depth > MAX_DEPTH) return fail(c, n, DS_ERR_INVALID, "bodies nested deeper than %d", MAX_DEPTH);
  if ((rc = mj_class_of(c, n, "childclass", cls, &cls))) return rc;
  Frame f;
  memset(&f, 0, sizeof f);
  mat_identity(f.P);
  if ((rc = elem_name(c, n, "body", f.name))) return rc;
  double p[3] = {0, 0, 0}, R[9];
  if ((rc = get_nums(c, n, -1, 0, "pos", p, 3, 3, NULL)) < 0) return rc;
  if ((rc = mj_orient(c, n, -1, 0, R))) return rc;
  if ((rc = add_name(c, 'b', f.name, n, 0))) return rc;
  BodyParts bp;
  Geom* g = NULL;
  double(*Ig)[3] = NULL;
  if ((rc = mj_body_parts(c, n, &bp))) goto done;
  if (bp.ngeom && (!(g = ds__calloc((size_t)bp.ngeom, sizeof *g)) || !(Ig = ds__calloc((size_t)bp.ngeom, sizeof *Ig)))) {
    rc = fail(c, n, DS_ERR_NOMEM, "out of memory");
    goto done;
  }
  dsArticBodyDef bd = ds_artic_default_body_def();
  bd.name = f.name;
  if ((rc = mj_body_mass(c, n, &bp, cls, &f, g, Ig, &bd))) goto done;
  if ((rc = mj_contacts(c, g, bp.geom, bp.ngeom, &f))) goto done;
  if ((rc = mj_joint(c, bp.joint, n, cls, par, p, R, &f))) goto done;
  rc = mj_body_kids(c, n, &f, cls, depth);
done:
  ds__free(bp.geom);
  ds__free(g);
  ds__free(Ig);
  return rc;
}

static int mj_worldbody(Ctx* c, const xmlNode* n) {
  static const char* const kids[] = {"body", "geom", "site", "camera", "light", NULL};
  Frame world;
  memset(&world, 0, sizeof world);
  snprintf(world.name, sizeof world.name, "world");
  mat_identity(world.P);
  int rc = check_attrs(c, n, (const char* const[]){NULL});
  if (rc) return rc;
  for (const xmlNode* k = n->children; k; k = k->next) {
    if (k->type != XML_ELEMENT_NODE) continue;
    if (is(k, "body")) {
      if ((rc = mj_body(c, k, &world, 0, 1))) return rc;
    } else if (!in_list(k, kids)) {
      return unknown_element(c, k, "worldbody", kids);
    }
  }
  return 0;
}

/* A symmetric range "-a a" (a > 0) of attribute key: *limit = a; 0 when absent */
static int sym_range(Ctx* c, const xmlNode* n, const char* key, const char* limited_key, double* limit) {
  double r[2];
  char lim[16] = "auto";
  int rc = get_nums(c, n, -1, 0, key, r, 2, 2, NULL);
  if (rc <= 0) return rc;
  if ((rc = raw_attr(c, n, limited_key, lim, sizeof lim)) < 0) return rc;
  if (!strcmp(lim, "false")) return 0;
  if (strcmp(lim, "true") && strcmp(lim, "auto"))
    return fail(c, n, DS_ERR_INVALID, "%s=\"%s\" (expected true, false or auto)", limited_key, lim);
  if (!(r[1] > 0) || r[0] != -r[1])
    return fail(c, n, DS_ERR_UNSUPPORTED, "%s %g %g: only symmetric ranges are supported (expected -a a with a > 0)",
                key, r[0], r[1]);
  *limit = r[1];
  return 0;
}

static int mj_actuator(Ctx* c, const xmlNode* n) {
  static const char* const kids[] = {"motor", "position", NULL};
  static const char* const motor_attrs[] = {"name", "joint", "gear", "ctrlrange", "ctrllimited", NULL};
  static const char* const pos_attrs[] = {"name", "joint", "kp", "kv", "forcerange", "forcelimited", NULL};
  int rc;
  for (const xmlNode* k = n->children; k; k = k->next) {
    if (k->type != XML_ELEMENT_NODE) continue;
    if (!in_list(k, kids)) return unknown_element(c, k, "actuator", kids);
    int motor = is(k, "motor");
    if ((rc = check_attrs(c, k, motor ? motor_attrs : pos_attrs))) return rc;
    dsArticActuatorDef ad = ds_artic_default_actuator_def();
    char name[NAME_LEN], joint[NAME_LEN];
    if ((rc = raw_attr(c, k, "joint", joint, sizeof joint)) < 0) return rc;
    if (rc == 0) return fail(c, k, DS_ERR_INVALID, "no joint (expected joint=\"a hinge or slide joint's name\")");
    const Named* jn = find_name(c, 'j', joint);
    if (!jn) {
      const char* known[65];
      int m = 0;
      for (int i = 0; i < c->nnames && m < 64; i++)
        if (c->names[i].kind == 'j') known[m++] = c->names[i].name;
      known[m] = NULL;
      char hint[96];
      did_you_mean(joint, known, hint, sizeof hint);
      return fail(c, k, DS_ERR_INVALID, "joint '%s' does not exist%s", joint, hint);
    }
    if (jn->jtype != DS_JOINT_HINGE && jn->jtype != DS_JOINT_SLIDE)
      return fail(c, k, DS_ERR_UNSUPPORTED, "joint '%s' is not a hinge or slide (expected a one-dof joint)", joint);
    if ((rc = elem_name(c, k, "actuator", name))) return rc;
    ad.name = name, ad.joint = joint;
    if (motor) {
      double gear[6] = {1, 0, 0, 0, 0, 0};
      int got = 1;
      ad.type = DS_ARTIC_MOTOR;
      if ((rc = get_nums(c, k, -1, 0, "gear", gear, 1, 6, &got)) < 0) return rc;
      for (int i = 1; i < got; i++)
        if (gear[i] != 0) return fail(c, k, DS_ERR_UNSUPPORTED, "gear[%d] %g (expected one gear; the rest 0)", i, gear[i]);
      ad.gear = gear[0];
      if ((rc = sym_range(c, k, "ctrlrange", "ctrllimited", &ad.ctrl_limit))) return rc;
    } else {
      ad.type = DS_ARTIC_SERVO;
      ad.kp = 1, ad.kv = 0; /* MJCF's defaults */
      if ((rc = get_num(c, k, -1, 0, "kp", &ad.kp)) < 0) return rc;
      if ((rc = get_num(c, k, -1, 0, "kv", &ad.kv)) < 0) return rc;
      if ((rc = sym_range(c, k, "forcerange", "forcelimited", &ad.force_limit))) return rc;
    }
    if ((rc = add_name(c, 'a', name, k, 0))) return rc;
    if ((rc = ds_artic_add_actuator(c->b, &ad))) return builder_fail(c, k, rc);
  }
  return 0;
}

/* <compiler>, <option> and the defaults: read before the bodies */
static int mj_head(Ctx* c, const xmlNode* root) {
  static const char* const comp_attrs[] = {"angle", "autolimits", "inertiafromgeom", NULL};
  static const char* const opt_attrs[] = {"timestep", "gravity", NULL};
  int rc, ndef = 0;
  for (const xmlNode* k = root->children; k; k = k->next) {
    if (k->type != XML_ELEMENT_NODE) continue;
    if (is(k, "compiler")) {
      char s[16] = "degree";
      if ((rc = check_attrs(c, k, comp_attrs))) return rc;
      if ((rc = raw_attr(c, k, "angle", s, sizeof s)) < 0) return rc;
      if (strcmp(s, "degree") && strcmp(s, "radian"))
        return fail(c, k, DS_ERR_INVALID, "angle=\"%s\" (expected degree or radian)", s);
      c->angle = strcmp(s, "degree") ? 1 : PI / 180;
      if ((rc = raw_attr(c, k, "autolimits", s, sizeof s)) < 0) return rc;
      if (rc && strcmp(s, "true"))
        return fail(c, k, DS_ERR_UNSUPPORTED, "autolimits=\"%s\" (expected true: a range limits its joint)", s);
      if ((rc = raw_attr(c, k, "inertiafromgeom", s, sizeof s)) < 0) return rc;
      if (rc && strcmp(s, "auto"))
        return fail(c, k, DS_ERR_UNSUPPORTED, "inertiafromgeom=\"%s\" (expected auto: <inertial> when given, else the geoms)", s);
    } else if (is(k, "option")) {
      if ((rc = check_attrs(c, k, opt_attrs))) return rc;
      if ((rc = get_num(c, k, -1, 0, "timestep", &c->opt.dt)) < 0) return rc;
      if (rc && !(c->opt.dt > 0)) return fail(c, k, DS_ERR_INVALID, "timestep %g (expected > 0)", c->opt.dt);
      if ((rc = get_nums(c, k, -1, 0, "gravity", c->opt.gravity, 3, 3, NULL)) < 0) return rc;
    } else if (is(k, "default")) {
      if (ndef++) return fail(c, k, DS_ERR_INVALID, "a second top-level <default> (expected one, with nested classes)");
      if ((rc = mj_default(c, k, -1, 0))) return rc;
    }
  }
  if (ndef == 0) { /* an empty "main" class: every element's chain ends there */
    c->cls = ds__calloc(1, sizeof *c->cls);
    if (!c->cls) return fail(c, root, DS_ERR_NOMEM, "out of memory");
    snprintf(c->cls[0].name, NAME_LEN, "main");
    c->cls[0].parent = -1, c->ncls = c->ccls = 1;
  }
  return 0;
}

static int mj_load(Ctx* c, const xmlNode* root) {
  static const char* const kids[] = {"compiler", "option", "default", "worldbody", "actuator", "asset", "visual",
                                     "statistic", "size", "sensor", "keyframe", NULL};
  static const char* const attrs[] = {"model", NULL};
  int rc = check_attrs(c, root, attrs);
  if (rc) return rc;
  c->angle = PI / 180; /* MJCF's default: degrees */
  for (const xmlNode* k = root->children; k; k = k->next)
    if (k->type == XML_ELEMENT_NODE && !in_list(k, kids)) return unknown_element(c, k, "mujoco", kids);
  if ((rc = mj_head(c, root))) return rc;
  for (const xmlNode* k = root->children; k; k = k->next)
    if (k->type == XML_ELEMENT_NODE && is(k, "worldbody") && (rc = mj_worldbody(c, k))) return rc;
  for (const xmlNode* k = root->children; k; k = k->next)
    if (k->type == XML_ELEMENT_NODE && is(k, "actuator") && (rc = mj_actuator(c, k))) return rc;
  return 0;
}

/* ---- URDF --------------------------------------------------------------------------*/

typedef struct Link {
  const xmlNode* node;
  const xmlNode* inertial;
  char name[NAME_LEN];
  int parent_joint; /* index into the joints, -1 for a root */
  int world;        /* the root taken as the world */
  Frame f;
} Link;

typedef struct UJoint {
  const xmlNode* node;
  char name[NAME_LEN];
  int parent, child; /* link indices */
} UJoint;

typedef struct Urdf {
  Link* link;
  UJoint* joint;
  int nlink, njoint;
} Urdf;

/* The only child element called name (NULL when none; two: an error) */
static int only_child(Ctx* c, const xmlNode* n, const char* name, const xmlNode** out) {
  *out = NULL;
  for (const xmlNode* k = n->children; k; k = k->next) {
    if (k->type != XML_ELEMENT_NODE || !is(k, name)) continue;
    if (*out) return fail(c, k, DS_ERR_INVALID, "a second <%s> (expected at most one)", name);
    *out = k;
  }
  return 0;
}

/* <origin xyz rpy>: p and R = Rz(yaw) Ry(pitch) Rx(roll) (fixed axes) */
static int ur_origin(Ctx* c, const xmlNode* parent, double p[3], double R[9]) {
  static const char* const attrs[] = {"xyz", "rpy", NULL};
  const xmlNode* o;
  double rpy[3] = {0, 0, 0};
  int rc = only_child(c, parent, "origin", &o);
  p[0] = p[1] = p[2] = 0;
  mat_identity(R);
  if (rc || !o) return rc;
  if ((rc = check_attrs(c, o, attrs))) return rc;
  if ((rc = get_nums(c, o, -1, 0, "xyz", p, 3, 3, NULL)) < 0) return rc;
  if ((rc = get_nums(c, o, -1, 0, "rpy", rpy, 3, 3, NULL)) < 0) return rc;
  if (rpy[0] != 0 || rpy[1] != 0 || rpy[2] != 0) {
    double qx[4] = {cos(0.5 * rpy[0]), sin(0.5 * rpy[0]), 0, 0}, qy[4] = {cos(0.5 * rpy[1]), 0, sin(0.5 * rpy[1]), 0};
    double qz[4] = {cos(0.5 * rpy[2]), 0, 0, sin(0.5 * rpy[2])}, Rx[9], Ry[9], Rz[9], T[9];
    quat_to_mat(qx, Rx), quat_to_mat(qy, Ry), quat_to_mat(qz, Rz);
    mat_mul(Rz, 0, Ry, T);
    mat_mul(T, 0, Rx, R);
  }
  return 0;
}

/* A required numeric attribute of a child element */
static int need_num(Ctx* c, const xmlNode* n, const char* key, double* v) {
  int rc = get_num(c, n, -1, 0, key, v);
  if (rc == 0) return fail(c, n, DS_ERR_INVALID, "no %s (expected %s=\"number\")", key, key);
  return rc < 0 ? rc : 0;
}

/* <inertial>: mass, centre and principal frame (off-diagonals must be 0) */
static int ur_inertial(Ctx* c, const xmlNode* n, dsArticBodyDef* bd, Frame* f) {
  static const char* const kids[] = {"origin", "mass", "inertia", NULL};
  static const char* const mass_attrs[] = {"value", NULL};
  static const char* const in_attrs[] = {"ixx", "iyy", "izz", "ixy", "ixz", "iyz", NULL};
  const xmlNode *m, *in;
  int rc;
  for (const xmlNode* k = n->children; k; k = k->next)
    if (k->type == XML_ELEMENT_NODE && !in_list(k, kids)) return unknown_element(c, k, "inertial", kids);
  if ((rc = ur_origin(c, n, f->c, f->P))) return rc;
  if ((rc = only_child(c, n, "mass", &m)) || (rc = only_child(c, n, "inertia", &in))) return rc;
  if (!m) return fail(c, n, DS_ERR_INVALID, "no <mass> (expected <mass value=\"kg\"/>)");
  if (!in) return fail(c, n, DS_ERR_INVALID, "no <inertia> (expected <inertia ixx iyy izz .../>)");
  if ((rc = check_attrs(c, m, mass_attrs)) || (rc = need_num(c, m, "value", &bd->mass))) return rc;
  if ((rc = check_attrs(c, in, in_attrs))) return rc;
  for (int k = 0; k < 3; k++)
    if ((rc = need_num(c, in, in_attrs[k], &bd->inertia[k]))) return rc;
  for (int k = 3; k < 6; k++) {
    double v = 0;
    if ((rc = get_num(c, in, -1, 0, in_attrs[k], &v)) < 0) return rc;
    if (v != 0)
      return fail(c, in, DS_ERR_UNSUPPORTED,
                  "%s %g: off-diagonal inertia is not supported (expected 0; rotate the inertial <origin rpy> to the principal axes)",
                  in_attrs[k], v);
  }
  return inertia_triangle(c, in, "ixx iyy izz", bd->inertia);
}

static int ur_find_link(Ctx* c, const Urdf* u, const xmlNode* jn, const char* role, int* out) {
  static const char* const attrs[] = {"link", NULL};
  const xmlNode* e;
  char name[NAME_LEN];
  int rc = only_child(c, jn, role, &e);
  if (rc) return rc;
  if (!e) return fail(c, jn, DS_ERR_INVALID, "no <%s> (expected <%s link=\"...\"/>)", role, role);
  if ((rc = check_attrs(c, e, attrs)) || (rc = raw_attr(c, e, "link", name, sizeof name)) < 0) return rc;
  if (rc == 0) return fail(c, e, DS_ERR_INVALID, "no link (expected link=\"a link's name\")");
  for (int i = 0; i < u->nlink; i++)
    if (!strcmp(u->link[i].name, name)) {
      *out = i;
      return 0;
    }
  const char* known[65];
  int m = 0;
  for (int i = 0; i < u->nlink && m < 64; i++) known[m++] = u->link[i].name;
  known[m] = NULL;
  char hint[96];
  did_you_mean(name, known, hint, sizeof hint);
  return fail(c, jn, DS_ERR_INVALID, "%s link '%s' does not exist%s", role, name, hint);
}

/* Links and joints, the tree checked: every parent and child exists, a link
 * is the child of at most one joint, no cycle, one root. */
static int ur_tree(Ctx* c, const xmlNode* root, Urdf* u) {
  static const char* const kids[] = {"link", "joint", "material", "gazebo", "transmission", NULL};
  static const char* const attrs[] = {"name", NULL};
  int rc, nl = 0, nj = 0;
  if ((rc = check_attrs(c, root, attrs))) return rc;
  for (const xmlNode* k = root->children; k; k = k->next) {
    if (k->type != XML_ELEMENT_NODE) continue;
    if (!in_list(k, kids)) return unknown_element(c, k, "robot", kids);
    nl += is(k, "link"), nj += is(k, "joint");
  }
  if (nl == 0) return fail(c, root, DS_ERR_INVALID, "no <link> (expected at least one)");
  u->link = ds__calloc((size_t)nl, sizeof *u->link);
  u->joint = ds__calloc((size_t)nj + 1, sizeof *u->joint);
  if (!u->link || !u->joint) return fail(c, root, DS_ERR_NOMEM, "out of memory");
  for (const xmlNode* k = root->children; k; k = k->next) {
    if (k->type != XML_ELEMENT_NODE || !is(k, "link")) continue;
    Link* l = &u->link[u->nlink];
    if ((rc = raw_attr(c, k, "name", l->name, sizeof l->name)) < 0) return rc;
    if (rc == 0 || !l->name[0]) return fail(c, k, DS_ERR_INVALID, "no name (expected name=\"...\")");
    for (int i = 0; i < u->nlink; i++)
      if (!strcmp(u->link[i].name, l->name))
        return fail(c, k, DS_ERR_INVALID, "link '%s' defined twice (first at line %ld)", l->name,
                    xmlGetLineNo(u->link[i].node));
    l->node = k, l->parent_joint = -1;
    u->nlink++;
  }
  for (const xmlNode* k = root->children; k; k = k->next) {
    if (k->type != XML_ELEMENT_NODE || !is(k, "joint")) continue;
    UJoint* j = &u->joint[u->njoint];
    j->node = k;
    if ((rc = raw_attr(c, k, "name", j->name, sizeof j->name)) < 0) return rc;
    if (rc == 0 || !j->name[0]) return fail(c, k, DS_ERR_INVALID, "no name (expected name=\"...\")");
    if ((rc = ur_find_link(c, u, k, "parent", &j->parent)) || (rc = ur_find_link(c, u, k, "child", &j->child)))
      return rc;
    if (j->parent == j->child)
      return fail(c, k, DS_ERR_INVALID, "link '%s' is its own parent (expected another link)", u->link[j->child].name);
    Link* ch = &u->link[j->child];
    if (ch->parent_joint >= 0)
      return fail(c, k, DS_ERR_INVALID, "link '%s' is already the child of joint '%s' (line %ld; expected one parent joint)",
                  ch->name, u->joint[ch->parent_joint].name, xmlGetLineNo(u->joint[ch->parent_joint].node));
    ch->parent_joint = u->njoint++;
  }
  for (int i = 0; i < u->nlink; i++) { /* walk to the root: more steps than links is a cycle */
    int at = i, steps = 0;
    while (u->link[at].parent_joint >= 0 && steps <= u->nlink) at = u->joint[u->link[at].parent_joint].parent, steps++;
    if (steps > u->nlink)
      return fail(c, u->joint[u->link[i].parent_joint].node, DS_ERR_INVALID,
                  "the joints form a cycle through link '%s' (expected a tree)", u->link[i].name);
  }
  int root_link = -1;
  for (int i = 0; i < u->nlink; i++) {
    if (u->link[i].parent_joint >= 0) continue;
    if (root_link >= 0)
      return fail(c, u->link[i].node, DS_ERR_INVALID,
                  "links '%s' and '%s' both have no parent joint (expected one root link)", u->link[root_link].name,
                  u->link[i].name);
    root_link = i;
  }
  return 0;
}

static int ur_collision(Ctx* c, const xmlNode* n, const Link* l) {
  static const char* const kids[] = {"origin", "geometry", NULL};
  static const char* const shapes[] = {"sphere", "cylinder", "box", "mesh", NULL};
  static const char* const attrs[] = {"name", NULL};
  const xmlNode *geo, *s = NULL;
  double p[3], R[9];
  int rc = check_attrs(c, n, attrs);
  if (rc) return rc;
  for (const xmlNode* k = n->children; k; k = k->next)
    if (k->type == XML_ELEMENT_NODE && !in_list(k, kids)) return unknown_element(c, k, "collision", kids);
  if ((rc = ur_origin(c, n, p, R)) || (rc = only_child(c, n, "geometry", &geo))) return rc;
  if (!geo) return fail(c, n, DS_ERR_INVALID, "no <geometry> (expected sphere, cylinder or box)");
  for (const xmlNode* k = geo->children; k; k = k->next) {
    if (k->type != XML_ELEMENT_NODE) continue;
    if (!in_list(k, shapes)) return unknown_element(c, k, "geometry", shapes);
    if (s) return fail(c, k, DS_ERR_INVALID, "a second shape in one <geometry> (expected one)");
    s = k;
  }
  if (!s) return fail(c, geo, DS_ERR_INVALID, "no shape (expected sphere, cylinder or box)");
  if (is(s, "mesh"))
    return fail(c, s, DS_ERR_UNSUPPORTED, "mesh collision geometry is not supported yet (expected sphere, cylinder or box)");
  if (!is(s, "sphere")) return 0; /* boxes and cylinders: no ground contact in the engine (documented) */
  static const char* const sphere_attrs[] = {"radius", NULL};
  dsArticGeomDef gd = ds_artic_default_geom_def();
  double x[3];
  if ((rc = check_attrs(c, s, sphere_attrs)) || (rc = need_num(c, s, "radius", &gd.radius))) return rc;
  for (int k = 0; k < 3; k++) x[k] = p[k] - l->f.c[k];
  mat_vec(l->f.P, 1, x, gd.pos);
  gd.body = l->f.name;
  return (rc = ds_artic_add_geom(c->b, &gd)) ? builder_fail(c, s, rc) : 0;
}

static int ur_link(Ctx* c, Link* l) {
  static const char* const kids[] = {"inertial", "visual", "collision", NULL};
  static const char* const attrs[] = {"name", NULL};
  int rc = check_attrs(c, l->node, attrs);
  if (rc) return rc;
  memcpy(l->f.name, l->name, NAME_LEN);
  mat_identity(l->f.P);
  for (const xmlNode* k = l->node->children; k; k = k->next)
    if (k->type == XML_ELEMENT_NODE && !in_list(k, kids)) return unknown_element(c, k, "link", kids);
  if ((rc = only_child(c, l->node, "inertial", &l->inertial))) return rc;
  /* the root link is the world when it is called so or has no mass (a
   * massless link welded to the world is the world) */
  if (l->parent_joint < 0 && (!strcmp(l->name, "world") || !l->inertial)) {
    l->world = 1;
    snprintf(l->f.name, NAME_LEN, "world");
    return 0;
  }
  if (!l->inertial)
    return fail(c, l->node, DS_ERR_INVALID, "no <inertial> (expected a mass > 0: the engine has no massless links)");
  dsArticBodyDef bd = ds_artic_default_body_def();
  bd.name = l->name;
  if ((rc = ur_inertial(c, l->inertial, &bd, &l->f))) return rc;
  if ((rc = add_name(c, 'b', l->name, l->inertial, 0))) return rc;
  if ((rc = ds_artic_add_body(c->b, &bd))) return builder_fail(c, l->inertial, rc);
  for (const xmlNode* k = l->node->children; k; k = k->next)
    if (k->type == XML_ELEMENT_NODE && is(k, "collision") && (rc = ur_collision(c, k, l))) return rc;
  return 0;
}

/* <limit>, <dynamics> and the joint's type */
static int ur_joint_params(Ctx* c, const xmlNode* n, dsArticJointDef* jd) {
  static const char* const types[] = {"revolute", "continuous", "prismatic", "fixed", "floating", NULL};
  static const char* const lim_attrs[] = {"lower", "upper", "effort", "velocity", NULL};
  static const char* const dyn_attrs[] = {"damping", "friction", NULL};
  char t[32];
  const xmlNode *lim, *dyn;
  int rc = raw_attr(c, n, "type", t, sizeof t);
  if (rc < 0) return rc;
  if (rc == 0) return fail(c, n, DS_ERR_INVALID, "no type (expected revolute, continuous, prismatic, fixed or floating)");
  int type = -1;
  for (int i = 0; types[i]; i++)
    if (!strcmp(t, types[i])) type = i;
  if (type < 0) {
    char hint[96];
    did_you_mean(t, types, hint, sizeof hint);
    return fail(c, n, strcmp(t, "planar") ? DS_ERR_INVALID : DS_ERR_UNSUPPORTED,
                "joint type '%s' is not supported%s (expected revolute, continuous, prismatic, fixed or floating)", t,
                hint);
  }
  static const dsJointType map[] = {DS_JOINT_HINGE, DS_JOINT_HINGE, DS_JOINT_SLIDE, DS_JOINT_FIXED, DS_JOINT_FREE};
  jd->type = map[type];
  if ((rc = only_child(c, n, "limit", &lim)) || (rc = only_child(c, n, "dynamics", &dyn))) return rc;
  if (type == 0 || type == 2) { /* URDF: lower and upper default to 0 */
    if (!lim) return fail(c, n, DS_ERR_INVALID, "a %s joint without <limit> (expected <limit lower upper/>)", t);
    if ((rc = check_attrs(c, lim, lim_attrs))) return rc;
    if ((rc = get_num(c, lim, -1, 0, "lower", &jd->limit_lower)) < 0) return rc;
    if ((rc = get_num(c, lim, -1, 0, "upper", &jd->limit_upper)) < 0) return rc;
    if (jd->limit_lower > jd->limit_upper)
      return fail(c, lim, DS_ERR_INVALID, "lower %g > upper %g (expected lower <= upper)", jd->limit_lower,
                  jd->limit_upper);
    jd->limited = 1;
  } else if (lim && (rc = check_attrs(c, lim, lim_attrs))) {
    return rc;
  }
  if (dyn && jd->type != DS_JOINT_FIXED) {
    double fr = 0;
    if ((rc = check_attrs(c, dyn, dyn_attrs))) return rc;
    if ((rc = get_num(c, dyn, -1, 0, "damping", &jd->damping)) < 0) return rc;
    if ((rc = get_num(c, dyn, -1, 0, "friction", &fr)) < 0) return rc;
    if (fr != 0)
      return fail(c, dyn, DS_ERR_UNSUPPORTED, "friction %g: joint friction is not supported (expected 0)", fr);
  }
  return 0;
}

static int ur_joint(Ctx* c, const Urdf* u, const UJoint* uj) {
  static const char* const kids[] = {"origin", "parent", "child", "axis", "limit", "dynamics", "safety_controller",
                                     "calibration", NULL};
  static const char* const attrs[] = {"name", "type", NULL};
  static const char* const axis_attrs[] = {"xyz", NULL};
  const xmlNode* n = uj->node;
  const xmlNode* ax;
  const Link *par = &u->link[uj->parent], *ch = &u->link[uj->child];
  dsArticJointDef jd = ds_artic_default_joint_def();
  double p[3], R[9], j[3] = {0, 0, 0}, a[3] = {1, 0, 0}; /* URDF's default axis */
  int rc = check_attrs(c, n, attrs);
  if (rc) return rc;
  for (const xmlNode* k = n->children; k; k = k->next)
    if (k->type == XML_ELEMENT_NODE && !in_list(k, kids)) return unknown_element(c, k, "joint", kids);
  if (ch->world) return fail(c, n, DS_ERR_INVALID, "the world link '%s' as a child (expected a root)", ch->name);
  if ((rc = ur_joint_params(c, n, &jd)) || (rc = ur_origin(c, n, p, R)) || (rc = only_child(c, n, "axis", &ax)))
    return rc;
  if (ax && ((rc = check_attrs(c, ax, axis_attrs)) || (rc = get_nums(c, ax, -1, 0, "xyz", a, 3, 3, NULL)) < 0))
    return rc;
  if ((jd.type == DS_JOINT_HINGE || jd.type == DS_JOINT_SLIDE) && !(a[0] != 0 || a[1] != 0 || a[2] != 0))
    return fail(c, ax ? ax : n, DS_ERR_INVALID, "axis 0 0 0 has length zero (expected a nonzero axis)");
  if (jd.type != DS_JOINT_HINGE && jd.type != DS_JOINT_SLIDE) a[0] = 0, a[2] = 1;
  jd.name = uj->name, jd.parent = par->f.name, jd.child = ch->f.name;
  joint_frames(&par->f, p, R, &ch->f, j, a, &jd);
  if ((rc = add_name(c, 'j', uj->name, n, jd.type))) return rc;
  return (rc = ds_artic_add_joint(c->b, &jd)) ? builder_fail(c, n, rc) : 0;
}

static int ur_load(Ctx* c, const xmlNode* root) {
  Urdf u;
  memset(&u, 0, sizeof u);
  int rc = ur_tree(c, root, &u);
  for (int i = 0; !rc && i < u.nlink; i++) rc = ur_link(c, &u.link[i]);
  for (int i = 0; !rc && i < u.njoint; i++) rc = ur_joint(c, &u, &u.joint[i]);
  for (int i = 0; !rc && i < u.nlink; i++) { /* a massive root welds to the world */
    Link* l = &u.link[i];
    if (l->parent_joint >= 0 || l->world) continue;
    Frame world;
    double z[3] = {0, 0, 0}, R[9], a[3] = {0, 0, 1};
    char name[NAME_LEN];
    memset(&world, 0, sizeof world);
    snprintf(world.name, NAME_LEN, "world");
    mat_identity(world.P), mat_identity(R);
    dsArticJointDef jd = ds_artic_default_joint_def();
    snprintf(name, sizeof name, "%.50s_weld", l->name);
    jd.type = DS_JOINT_FIXED, jd.name = name, jd.parent = "world", jd.child = l->name;
    joint_frames(&world, z, R, &l->f, z, a, &jd);
    if (!(rc = add_name(c, 'j', name, l->node, jd.type)) && (rc = ds_artic_add_joint(c->b, &jd)))
      rc = builder_fail(c, l->node, rc);
  }
  ds__free(u.link);
  ds__free(u.joint);
  return rc;
}

/* ---- entry points ------------------------------------------------------------------*/

enum { WANT_ANY = 0, WANT_MJCF = 1, WANT_URDF = 2 };

static int load_doc(Ctx* c, const xmlNode* root, int want, dsArticModel** out) {
  int mjcf = is(root, "mujoco"), urdf = is(root, "robot");
  if ((!mjcf && !urdf) || (want == WANT_MJCF && !mjcf) || (want == WANT_URDF && !urdf))
    return fail(c, root, DS_ERR_FORMAT, "root element <%.40s> (expected %s)", (const char*)root->name,
                want == WANT_MJCF ? "<mujoco> (MJCF)" : want == WANT_URDF ? "<robot> (URDF)" : "<mujoco> (MJCF) or <robot> (URDF)");
  int rc = ds_artic_builder_create(&c->b);
  if (rc) return fail(c, NULL, rc, "out of memory");
  rc = mjcf ? mj_load(c, root) : ur_load(c, root);
  if (!rc && (rc = ds_artic_build(c->b, &c->opt, out))) rc = build_fail(c, rc);
  ds_artic_builder_free(c->b);
  c->b = NULL;
  return rc;
}

static int load_mem(const char* buf, size_t n, const char* name, int want, const dsArticOptions* opt,
                    dsArticModel** out, char* err, size_t errlen) {
  Ctx c;
  memset(&c, 0, sizeof c);
  c.file = name ? name : "(memory)";
  c.err = err, c.errlen = errlen;
  if (err && errlen) err[0] = 0;
  if (!out || !buf) return ds__puterr(err, errlen, DS_ERR_INVALID, "%s: no input or no output pointer", c.file);
  *out = NULL;
  if (n > DS_MODEL_FILE_MAX || n > 0x7fffffff)
    return ds__puterr(err, errlen, DS_ERR_RANGE, "%s: %zu bytes (expected at most %zu)", c.file, n, DS_MODEL_FILE_MAX);
  c.opt = opt ? *opt : ds_artic_default_options();
  xmlInitParser();
  xmlParserCtxtPtr px = xmlNewParserCtxt();
  if (!px) return ds__puterr(err, errlen, DS_ERR_NOMEM, "%s: out of memory", c.file);
  /* no NOENT and no DTDLOAD: entities are never substituted or fetched;
   * BIG_LINES: true line numbers past 65535 in messages */
  xmlDocPtr doc = xmlCtxtReadMemory(px, buf, (int)n, c.file, NULL, XML_PARSE_NONET | XML_PARSE_NOERROR |
                                                                     XML_PARSE_NOWARNING | XML_PARSE_BIG_LINES);
  int rc;
  if (!doc) {
    xmlErrorPtr e = xmlCtxtGetLastError(px);
    char msg[256] = "malformed";
    if (e && e->message) snprintf(msg, sizeof msg, "%s", e->message);
    size_t k = strlen(msg);
    while (k && (msg[k - 1] == '\n' || msg[k - 1] == ' ')) msg[--k] = 0;
    rc = ds__puterr(err, errlen, DS_ERR_PARSE, "%s:%d: not well-formed XML: %s", c.file, e ? e->line : 0, msg);
  } else if (doc->intSubset || doc->extSubset) {
    rc = ds__puterr(err, errlen, DS_ERR_UNSUPPORTED, "%s: a <!DOCTYPE> is not accepted (expected plain MJCF or URDF)",
                    c.file);
  } else if (!xmlDocGetRootElement(doc)) {
    rc = ds__puterr(err, errlen, DS_ERR_PARSE, "%s: no root element", c.file);
  } else {
    rc = load_doc(&c, xmlDocGetRootElement(doc), want, out);
  }
  if (doc) xmlFreeDoc(doc);
  xmlFreeParserCtxt(px);
  ds__free(c.cls);
  ds__free(c.names);
  return rc;
}

static int load_file(const char* path, int want, const dsArticOptions* opt, dsArticModel** out, char* err,
                     size_t errlen) {
  if (err && errlen) err[0] = 0;
  if (out) *out = NULL;
  if (!path || !out) return ds__puterr(err, errlen, DS_ERR_INVALID, "no file name or no output pointer");
  FILE* f = fopen(path, "rb");
  if (!f) return ds__puterr(err, errlen, DS_ERR_IO, "%s: cannot open (%s)", path, strerror(errno));
  size_t cap = 1 << 16, n = 0;
  char* buf = ds__malloc(cap);
  int rc = 0;
  while (buf) {
    if (n == cap) {
      if (cap > DS_MODEL_FILE_MAX) break;
      char* p = ds__realloc(buf, 2 * cap);
      if (!p) {
        ds__free(buf);
        buf = NULL;
        break;
      }
      buf = p, cap *= 2;
    }
    size_t got = fread(buf + n, 1, cap - n, f);
    n += got;
    if (got == 0) break;
  }
  if (!buf)
    rc = ds__puterr(err, errlen, DS_ERR_NOMEM, "%s: out of memory reading the file", path);
  else if (ferror(f))
    rc = ds__puterr(err, errlen, DS_ERR_IO, "%s: read error", path);
  else if (n > DS_MODEL_FILE_MAX)
    rc = ds__puterr(err, errlen, DS_ERR_RANGE, "%s: larger than %zu bytes (expected a smaller model file)", path,
                    DS_MODEL_FILE_MAX);
  fclose(f);
  if (!rc) rc = load_mem(buf, n, path, want, opt, out, err, errlen);
  ds__free(buf);
  return rc;
}

int ds__artic_load_mjcf_mem(const char* buf, size_t n, const char* name, const dsArticOptions* opt,
                            dsArticModel** out, char* err, size_t errlen) {
  return load_mem(buf, n, name, WANT_MJCF, opt, out, err, errlen);
}

int ds__artic_load_urdf_mem(const char* buf, size_t n, const char* name, const dsArticOptions* opt,
                            dsArticModel** out, char* err, size_t errlen) {
  return load_mem(buf, n, name, WANT_URDF, opt, out, err, errlen);
}

int ds_artic_load_mjcf(const char* path, const dsArticOptions* opt, dsArticModel** out, char* err, size_t errlen) {
  return load_file(path, WANT_MJCF, opt, out, err, errlen);
}

int ds_artic_load_urdf(const char* path, const dsArticOptions* opt, dsArticModel** out, char* err, size_t errlen) {
  return load_file(path, WANT_URDF, opt, out, err, errlen);
}

int ds_artic_load(const char* path, const dsArticOptions* opt, dsArticModel** out, char* err, size_t errlen) {
  return load_file(path, WANT_ANY, opt, out, err, errlen);
}

#else /* no libxml2 */

static int no_xml(dsArticModel** out, char* err, size_t errlen) {
  if (out) *out = NULL;
  return ds__puterr(err, errlen, DS_ERR_UNSUPPORTED, "model files need libxml2; this build has none (install libxml2-dev and reconfigure)");
}

int ds__artic_load_mjcf_mem(const char* buf, size_t n, const char* name, const dsArticOptions* opt,
                            dsArticModel** out, char* err, size_t errlen) {
  (void)buf, (void)n, (void)name, (void)opt;
  return no_xml(out, err, errlen);
}

int ds__artic_load_urdf_mem(const char* buf, size_t n, const char* name, const dsArticOptions* opt,
                            dsArticModel** out, char* err, size_t errlen) {
  (void)buf, (void)n, (void)name, (void)opt;
  return no_xml(out, err, errlen);
}

int ds_artic_load_mjcf(const char* path, const dsArticOptions* opt, dsArticModel** out, char* err, size_t errlen) {
  (void)path, (void)opt;
  return no_xml(out, err, errlen);
}

int ds_artic_load_urdf(const char* path, const dsArticOptions* opt, dsArticModel** out, char* err, size_t errlen) {
  (void)path, (void)opt;
  return no_xml(out, err, errlen);
}

int ds_artic_load(const char* path, const dsArticOptions* opt, dsArticModel** out, char* err, size_t errlen) {
  (void)path, (void)opt;
  return no_xml(out, err, errlen);
}

#endif

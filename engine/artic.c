/* Articulated bodies: builder and validation, named parameters, data and
 * tape, the step (CRBA mass matrix, RNEA bias, dense Cholesky) and the
 * backward pass. docs/articulated.md has the design.
 *
 * Step (semi-implicit Euler on reduced coordinates):
 *   M(q) qdd = tau(q, qd, u) - C(q, qd; g, F_ext)     C from RNEA at qdd = 0
 *   qd' = qd + dt qdd,   q' = q (+) dt qd'            (quaternions: exp map, normalised)
 * Backward: per step the reverse-mode product of engine/artic_rev.h. The
 * reference path (ds__artic_backward_tangent) forms the same product
 * column by column from tangent sweeps: for an input theta (an entry of q,
 * qd, u or the parameters), qdd solves r(theta) = 0 with
 *   r = tau - ID(q, qd, qdd; theta),   ID = RNEA with qdd (M qdd + C),
 * so dqdd/dtheta = M^-1 dr/dtheta at fixed qdd: one RNEA in complex-step
 * numbers and one solve with the Cholesky factor already made, O(n^2)
 * per column (n = nv), no mass matrix in the sweep; then the integration
 * runs in the same numbers, and adj_in[c] = (dout/din_c) . adj_out. */
#include "config.h"

#include <complex.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "base/internal.h"
#include "dsim/artic.h"
#include "engine/artic_priv.h"
#include "engine/force_contact.h"

#include <tgmath.h> /* sqrt, sin, exp, ... on double and double complex */

/* the real pass, its adjoint, the untaped substep (both backends) */
#include "engine/artic_step.h"

/* the complex copy of the dynamics for the tangent sweeps (host only) */
#define R double complex
#define FN(name) name##_c
#define ARTIC_CPLX 1
#include "engine/artic_dyn.h"
#undef R
#undef FN
#undef ARTIC_CPLX

/* ---- builder -------------------------------------------------------------------- */

typedef struct {
  char name[DS__ARTIC_NAME], parent[DS__ARTIC_NAME], child[DS__ARTIC_NAME];
  dsArticJointDef d;
} JointRec;

typedef struct {
  char body[DS__ARTIC_NAME];
  dsArticGeomDef d;
} GeomRec;

typedef struct {
  char name[DS__ARTIC_NAME], joint[DS__ARTIC_NAME];
  dsArticActuatorDef d;
} ActRec;

typedef struct {
  char name[DS__ARTIC_NAME];
  dsArticBodyDef d;
} BodyRec;

struct dsArticBuilder {
  BodyRec* body;
  JointRec* joint;
  GeomRec* geom;
  ActRec* act;
  int nbody, njoint, ngeom, nact;
  int cbody, cjoint, cgeom, cact;
  dsErrBuf err;
};

dsArticBodyDef ds_artic_default_body_def(void) {
  dsArticBodyDef d = {NULL, 1, {1e-3, 1e-3, 1e-3}};
  return d;
}

dsArticJointDef ds_artic_default_joint_def(void) {
  dsArticJointDef d;
  memset(&d, 0, sizeof d);
  d.type = DS_JOINT_HINGE;
  d.axis[2] = 1;
  d.quat[0] = 1;
  d.limit_stiffness = 100;
  d.limit_damping = 1;
  d.limit_width = 0.01;
  return d;
}

dsArticGeomDef ds_artic_default_geom_def(void) {
  dsArticGeomDef d;
  memset(&d, 0, sizeof d);
  d.type = DS_ARTIC_SPHERE;
  d.radius = 0.05;
  return d;
}

dsArticActuatorDef ds_artic_default_actuator_def(void) {
  dsArticActuatorDef d;
  memset(&d, 0, sizeof d);
  d.type = DS_ARTIC_MOTOR;
  d.gear = 1;
  return d;
}

dsArticOptions ds_artic_default_options(void) {
  dsArticOptions o = {1e-3, {0, 0, -9.81}, 0, 1e4, 100, 100, 0.8};
  return o;
}

int ds_artic_builder_create(dsArticBuilder** out) {
  if (!out) return DS_ERR_INVALID;
  *out = ds__calloc(1, sizeof(dsArticBuilder));
  return *out ? 0 : DS_ERR_NOMEM;
}

void ds_artic_builder_free(dsArticBuilder* b) {
  if (!b) return;
  ds__free(b->body);
  ds__free(b->joint);
  ds__free(b->geom);
  ds__free(b->act);
  ds__free(b);
}

const char* ds_artic_builder_error(const dsArticBuilder* b) { return b ? ds__errmsg(&b->err) : ""; }

/* Grows *arr (n used, *cap allocated) by one element of size sz. */
static int grow(dsErrBuf* err, void** arr, int n, int* cap, size_t sz) {
  if (n < *cap) return 0;
  const int nc = *cap ? 2 * *cap : 8;
  void* p = ds__realloc(*arr, (size_t)nc * sz);
  if (!p) return ds__seterr(err, DS_ERR_NOMEM, "out of memory growing the articulated builder");
  *arr = p;
  *cap = nc;
  return 0;
}

/* Copies a name into dst: DS_ERR_INVALID when NULL, empty or too long. */
static int copy_name(dsErrBuf* err, char dst[DS__ARTIC_NAME], const char* s, const char* what) {
  if (!s || !*s) return ds__seterr(err, DS_ERR_INVALID, "%s name missing (expected a non-empty string)", what);
  if (strlen(s) >= DS__ARTIC_NAME)
    return ds__seterr(err, DS_ERR_INVALID, "%s name '%.40s...' too long (expected at most %d characters)", what, s,
                      DS__ARTIC_NAME - 1);
  strcpy(dst, s);
  return 0;
}

static int bad(double v) { return !isfinite(v); }

int ds_artic_add_body(dsArticBuilder* b, const dsArticBodyDef* def) {
  if (!b || !def) return DS_ERR_INVALID;
  char name[DS__ARTIC_NAME];
  int rc = copy_name(&b->err, name, def->name, "body");
  if (rc) return rc;
  if (!strcmp(name, "world"))
    return ds__seterr(&b->err, DS_ERR_INVALID, "body 'world': the name is reserved for the world (expected another)");
  for (int i = 0; i < b->nbody; i++)
    if (!strcmp(b->body[i].name, name))
      return ds__seterr(&b->err, DS_ERR_INVALID, "body '%s' added twice (expected unique body names)", name);
  if (bad(def->mass) || !(def->mass > 0))
    return ds__seterr(&b->err, DS_ERR_INVALID, "body '%s': mass %g (expected > 0)", name, def->mass);
  for (int k = 0; k < 3; k++)
    if (bad(def->inertia[k]) || !(def->inertia[k] > 0))
      return ds__seterr(&b->err, DS_ERR_INVALID, "body '%s': inertia[%d] %g (expected > 0)", name, k, def->inertia[k]);
  if ((rc = grow(&b->err, (void**)&b->body, b->nbody, &b->cbody, sizeof(BodyRec)))) return rc;
  BodyRec* r = &b->body[b->nbody++];
  strcpy(r->name, name);
  r->d = *def;
  r->d.name = NULL;
  return 0;
}

static int check_joint_values(dsErrBuf* err, const char* n, const dsArticJointDef* d) {
  if (d->type < DS_JOINT_FIXED || d->type > DS_JOINT_FREE)
    return ds__seterr(err, DS_ERR_INVALID, "joint '%s': type %d (expected 0 fixed .. 4 free)", n, (int)d->type);
  const double a2 = d->axis[0] * d->axis[0] + d->axis[1] * d->axis[1] + d->axis[2] * d->axis[2];
  if ((d->type == DS_JOINT_HINGE || d->type == DS_JOINT_SLIDE) && (bad(a2) || !(a2 > 1e-24)))
    return ds__seterr(err, DS_ERR_INVALID, "joint '%s': axis (%g, %g, %g) has length zero (expected a nonzero axis)", n,
                      d->axis[0], d->axis[1], d->axis[2]);
  const double q2 =
      d->quat[0] * d->quat[0] + d->quat[1] * d->quat[1] + d->quat[2] * d->quat[2] + d->quat[3] * d->quat[3];
  if (bad(q2) || !(q2 > 1e-24))
    return ds__seterr(err, DS_ERR_INVALID, "joint '%s': quat has length zero (expected a nonzero quaternion)", n);
  for (int k = 0; k < 3; k++)
    if (bad(d->anchor_parent[k]) || bad(d->anchor_child[k]))
      return ds__seterr(err, DS_ERR_INVALID, "joint '%s': anchor not finite (expected finite coordinates)", n);
  const struct {
    const char* key;
    double v;
  } nonneg[] = {{"damping", d->damping},
                {"armature", d->armature},
                {"stiffness", d->stiffness},
                {"limit_stiffness", d->limit_stiffness},
                {"limit_damping", d->limit_damping}};
  for (size_t k = 0; k < sizeof nonneg / sizeof nonneg[0]; k++)
    if (bad(nonneg[k].v) || nonneg[k].v < 0)
      return ds__seterr(err, DS_ERR_INVALID, "joint '%s': %s %g (expected >= 0)", n, nonneg[k].key, nonneg[k].v);
  if (bad(d->rest)) return ds__seterr(err, DS_ERR_INVALID, "joint '%s': rest not finite", n);
  if (d->limited) {
    if (d->type != DS_JOINT_HINGE && d->type != DS_JOINT_SLIDE)
      return ds__seterr(err, DS_ERR_INVALID, "joint '%s': limits on a %s joint (expected a hinge or slide)", n,
                        d->type == DS_JOINT_BALL   ? "ball"
                        : d->type == DS_JOINT_FREE ? "free"
                                                   : "fixed");
    if (bad(d->limit_lower) || bad(d->limit_upper) || d->limit_lower > d->limit_upper)
      return ds__seterr(err, DS_ERR_INVALID, "joint '%s': limit_lower %g > limit_upper %g (expected lower <= upper)", n,
                        d->limit_lower, d->limit_upper);
    if (bad(d->limit_width) || !(d->limit_width > 0))
      return ds__seterr(err, DS_ERR_INVALID, "joint '%s': limit_width %g (expected > 0)", n, d->limit_width);
  }
  return 0;
}

int ds_artic_add_joint(dsArticBuilder* b, const dsArticJointDef* def) {
  if (!b || !def) return DS_ERR_INVALID;
  JointRec r;
  memset(&r, 0, sizeof r);
  int rc = copy_name(&b->err, r.name, def->name, "joint");
  if (rc) return rc;
  for (int i = 0; i < b->njoint; i++)
    if (!strcmp(b->joint[i].name, r.name))
      return ds__seterr(&b->err, DS_ERR_INVALID, "joint '%s' added twice (expected unique joint names)", r.name);
  if (!def->child || !*def->child)
    return ds__seterr(&b->err, DS_ERR_INVALID, "joint '%s': child missing (expected a body name)", r.name);
  if ((rc = copy_name(&b->err, r.child, def->child, "joint child"))) return rc;
  if ((rc = copy_name(&b->err, r.parent, def->parent ? def->parent : "world", "joint parent"))) return rc;
  if ((rc = check_joint_values(&b->err, r.name, def))) return rc;
  if ((rc = grow(&b->err, (void**)&b->joint, b->njoint, &b->cjoint, sizeof(JointRec)))) return rc;
  r.d = *def;
  r.d.name = r.d.parent = r.d.child = NULL;
  b->joint[b->njoint++] = r;
  return 0;
}

int ds_artic_add_geom(dsArticBuilder* b, const dsArticGeomDef* def) {
  if (!b || !def) return DS_ERR_INVALID;
  GeomRec r;
  int rc = copy_name(&b->err, r.body, def->body, "geom body");
  if (rc) return rc;
  if (def->type != DS_ARTIC_SPHERE && def->type != DS_ARTIC_CAPSULE)
    return ds__seterr(&b->err, DS_ERR_INVALID, "geom on body '%s': type %d (expected 0 sphere or 1 capsule)", r.body,
                      (int)def->type);
  if (bad(def->radius) || !(def->radius > 0))
    return ds__seterr(&b->err, DS_ERR_INVALID, "geom on body '%s': radius %g (expected > 0)", r.body, def->radius);
  for (int k = 0; k < 3; k++)
    if (bad(def->pos[k]) || bad(def->pos2[k]))
      return ds__seterr(&b->err, DS_ERR_INVALID, "geom on body '%s': position not finite", r.body);
  if ((rc = grow(&b->err, (void**)&b->geom, b->ngeom, &b->cgeom, sizeof(GeomRec)))) return rc;
  r.d = *def;
  r.d.body = NULL;
  b->geom[b->ngeom++] = r;
  return 0;
}

int ds_artic_add_actuator(dsArticBuilder* b, const dsArticActuatorDef* def) {
  if (!b || !def) return DS_ERR_INVALID;
  ActRec r;
  int rc = copy_name(&b->err, r.name, def->name, "actuator");
  if (rc) return rc;
  for (int i = 0; i < b->nact; i++)
    if (!strcmp(b->act[i].name, r.name))
      return ds__seterr(&b->err, DS_ERR_INVALID, "actuator '%s' added twice (expected unique names)", r.name);
  if ((rc = copy_name(&b->err, r.joint, def->joint, "actuator joint"))) return rc;
  if (def->type != DS_ARTIC_MOTOR && def->type != DS_ARTIC_SERVO)
    return ds__seterr(&b->err, DS_ERR_INVALID, "actuator '%s': type %d (expected 0 motor or 1 servo)", r.name,
                      (int)def->type);
  const struct {
    const char* key;
    double v;
  } nonneg[] = {{"kp", def->kp}, {"kv", def->kv}, {"ctrl_limit", def->ctrl_limit}, {"force_limit", def->force_limit}};
  for (size_t k = 0; k < sizeof nonneg / sizeof nonneg[0]; k++)
    if (bad(nonneg[k].v) || nonneg[k].v < 0)
      return ds__seterr(&b->err, DS_ERR_INVALID, "actuator '%s': %s %g (expected >= 0)", r.name, nonneg[k].key,
                        nonneg[k].v);
  if (bad(def->gear)) return ds__seterr(&b->err, DS_ERR_INVALID, "actuator '%s': gear not finite", r.name);
  if ((rc = grow(&b->err, (void**)&b->act, b->nact, &b->cact, sizeof(ActRec)))) return rc;
  r.d = *def;
  r.d.name = r.d.joint = NULL;
  b->act[b->nact++] = r;
  return 0;
}

/* ---- build: tree checks, order, parameters ----------------------------------------- */

static int find_body(const dsArticBuilder* b, const char* name) {
  for (int i = 0; i < b->nbody; i++)
    if (!strcmp(b->body[i].name, name)) return i;
  return -1;
}

/* For each body (builder order) its joint (-1: none) and parent body (-1:
 * world); checks names, one joint per body, no cycle. */
static int check_tree(dsArticBuilder* b, int* jof, int* par) {
  for (int i = 0; i < b->nbody; i++) jof[i] = -1;
  for (int j = 0; j < b->njoint; j++) {
    const JointRec* r = &b->joint[j];
    const int c = find_body(b, r->child);
    if (c < 0)
      return ds__seterr(&b->err, DS_ERR_INVALID,
                        "joint '%s': unknown child body '%s' (expected one of the added bodies)", r->name, r->child);
    int p = -1;
    if (strcmp(r->parent, "world") != 0 && (p = find_body(b, r->parent)) < 0)
      return ds__seterr(&b->err, DS_ERR_INVALID,
                        "joint '%s': unknown parent body '%s' (expected an added body or \"world\")", r->name,
                        r->parent);
    if (p == c)
      return ds__seterr(&b->err, DS_ERR_INVALID, "joint '%s': body '%s' is its own parent (expected another body)",
                        r->name, r->child);
    if (jof[c] >= 0)
      return ds__seterr(&b->err, DS_ERR_INVALID, "body '%s' is the child of joints '%s' and '%s' (expected one joint)",
                        r->child, b->joint[jof[c]].name, r->name);
    jof[c] = j;
    par[c] = p;
  }
  for (int i = 0; i < b->nbody; i++)
    if (jof[i] < 0)
      return ds__seterr(&b->err, DS_ERR_INVALID,
                        "body '%s' has no joint (expected one joint with it as the child; a fixed joint welds it)",
                        b->body[i].name);
  for (int i = 0; i < b->nbody; i++) { /* a chain of parents longer than nbody loops */
    int p = i, n = 0;
    while (p >= 0 && n <= b->nbody) {
      p = par[p];
      n++;
    }
    if (p >= 0)
      return ds__seterr(&b->err, DS_ERR_INVALID,
                        "joints form a cycle through body '%s' (expected a tree rooted at the world)", b->body[i].name);
  }
  for (int g = 0; g < b->ngeom; g++)
    if (find_body(b, b->geom[g].body) < 0)
      return ds__seterr(&b->err, DS_ERR_INVALID, "geom %d: unknown body '%s' (expected an added body)", g,
                        b->geom[g].body);
  for (int a = 0; a < b->nact; a++) {
    int j = 0;
    while (j < b->njoint && strcmp(b->joint[j].name, b->act[a].joint) != 0) j++;
    if (j == b->njoint)
      return ds__seterr(&b->err, DS_ERR_INVALID, "actuator '%s': unknown joint '%s' (expected an added joint)",
                        b->act[a].name, b->act[a].joint);
    const int t = b->joint[j].d.type;
    if (t != DS_JOINT_HINGE && t != DS_JOINT_SLIDE)
      return ds__seterr(&b->err, DS_ERR_INVALID, "actuator '%s': joint '%s' is not a hinge or slide (expected one dof)",
                        b->act[a].name, b->act[a].joint);
  }
  return 0;
}

void ds_artic_model_free(dsArticModel* m) {
  if (!m) return;
  void* arrs[] = {
      m->parent,   m->jtype,   m->qadr,       m->vadr,     m->limited,  m->axis,           m->quat0,
      m->R0,       m->limit_k, m->limit_b,    m->limit_w,  m->bp,       m->body_name,      m->joint_name,
      m->sph_body, m->sph_pos, m->sph_radius, m->act_type, m->act_body, m->act_ctrl_limit, m->act_force_limit,
      m->act_gear, m->act_kp,  m->act_kv,     m->act_name, m->param,    m->param_name};
  for (size_t k = 0; k < sizeof arrs / sizeof arrs[0]; k++) ds__free(arrs[k]);
  ds__free(m);
}

/* Every array of a model and its length (nb1, ns1, na1: at least 1). */
#define DS__ARTIC_ARRAYS(X)                                                                                          \
  X(parent, nb1) X(jtype, nb1) X(qadr, nb1) X(vadr, nb1) X(limited, nb1) X(axis, 3 * nb1) X(quat0, 4 * nb1)        \
  X(R0, 9 * nb1) X(limit_k, nb1) X(limit_b, nb1) X(limit_w, nb1) X(bp, nb1) X(body_name, nb1) X(joint_name, nb1)    \
  X(sph_body, ns1) X(sph_pos, 3 * ns1) X(sph_radius, ns1) X(act_type, na1) X(act_body, na1) X(act_ctrl_limit, na1) \
  X(act_force_limit, na1) X(act_gear, na1) X(act_kp, na1) X(act_kv, na1) X(act_name, na1) X(param, np)             \
  X(param_name, np)

/* Allocates every array (m's array pointers NULL on entry); on failure the
 * ones allocated stay set, so ds_artic_model_free(m) frees them. */
static int model_alloc(dsArticModel* m, int nb, int ns, int na, int np) {
  const int nb1 = nb ? nb : 1, ns1 = ns ? ns : 1, na1 = na ? na : 1;
#define DS__A(f, n) \
  if ((m->f = ds__calloc((size_t)(n), sizeof(*m->f))) == NULL) return DS_ERR_NOMEM;
  DS__ARTIC_ARRAYS(DS__A)
#undef DS__A
  return 0;
}

/* Appends parameter "<prefix>.<owner>.<key>" (owner NULL: "<prefix>.<key>")
 * and returns its index. */
static int add_param(dsArticModel* m, const char* prefix, const char* owner, const char* key, double v) {
  const int i = m->nparam++;
  if (owner)
    snprintf(m->param_name[i], DS__ARTIC_PNAME, "%s.%s.%s", prefix, owner, key);
  else
    snprintf(m->param_name[i], DS__ARTIC_PNAME, "%s.%s", prefix, key);
  m->param[i] = v;
  return i;
}

static int add_param3(dsArticModel* m, const char* prefix, const char* owner, const char* key, const double v[3]) {
  char k[48];
  const int i = m->nparam;
  for (int c = 0; c < 3; c++) {
    snprintf(k, sizeof k, "%s%s%c", key, *key ? "." : "", 'x' + c);
    add_param(m, prefix, owner, k, v[c]);
  }
  return i;
}

/* Body i of the model from builder body bi with joint r. */
static void fill_body(dsArticModel* m, int i, const BodyRec* br, const JointRec* r) {
  const dsArticJointDef* d = &r->d;
  dsArticBodyParams* bp = &m->bp[i];
  strcpy(m->body_name[i], br->name);
  strcpy(m->joint_name[i], r->name);
  m->jtype[i] = d->type;
  double a2 = d->axis[0] * d->axis[0] + d->axis[1] * d->axis[1] + d->axis[2] * d->axis[2];
  double q2 = d->quat[0] * d->quat[0] + d->quat[1] * d->quat[1] + d->quat[2] * d->quat[2] + d->quat[3] * d->quat[3];
  for (int k = 0; k < 3; k++) m->axis[3 * i + k] = a2 > 0 ? d->axis[k] / sqrt(a2) : 0;
  for (int k = 0; k < 4; k++) m->quat0[4 * i + k] = d->quat[k] / sqrt(q2);
  quat_mat_r(m->R0 + 9 * i, m->quat0 + 4 * i);
  m->limited[i] = d->limited;
  m->limit_k[i] = d->limit_stiffness;
  m->limit_b[i] = d->limit_damping;
  m->limit_w[i] = d->limit_width;
  bp->mass = add_param(m, "body", br->name, "mass", br->d.mass);
  bp->inertia = add_param3(m, "body", br->name, "inertia", br->d.inertia);
  bp->anchor_p = add_param3(m, "joint", r->name, "anchor_parent", d->anchor_parent);
  bp->anchor_c = add_param3(m, "joint", r->name, "anchor_child", d->anchor_child);
  bp->damping = bp->armature = bp->stiffness = bp->rest = bp->lower = bp->upper = -1;
  if (d->type != DS_JOINT_FIXED) {
    bp->damping = add_param(m, "joint", r->name, "damping", d->damping);
    bp->armature = add_param(m, "joint", r->name, "armature", d->armature);
  }
  if (d->type == DS_JOINT_HINGE || d->type == DS_JOINT_SLIDE) {
    bp->stiffness = add_param(m, "joint", r->name, "stiffness", d->stiffness);
    bp->rest = add_param(m, "joint", r->name, "rest", d->rest);
    if (d->limited) {
      bp->lower = add_param(m, "joint", r->name, "limit_lower", d->limit_lower);
      bp->upper = add_param(m, "joint", r->name, "limit_upper", d->limit_upper);
    }
  }
}

static int check_options(dsErrBuf* err, const dsArticOptions* o) {
  if (bad(o->dt) || !(o->dt > 0)) return ds__seterr(err, DS_ERR_INVALID, "options: dt %g (expected > 0)", o->dt);
  for (int k = 0; k < 3; k++)
    if (bad(o->gravity[k])) return ds__seterr(err, DS_ERR_INVALID, "options: gravity not finite");
  const double c[4] = {o->contact_ke, o->contact_kd, o->contact_kf, o->contact_mu};
  static const char* const cn[4] = {"contact_ke", "contact_kd", "contact_kf", "contact_mu"};
  for (int k = 0; k < 4; k++)
    if (bad(c[k]) || c[k] < 0) return ds__seterr(err, DS_ERR_INVALID, "options: %s %g (expected >= 0)", cn[k], c[k]);
  return 0;
}

/* Tree order: parents first, otherwise builder order. */
static void tree_order(const dsArticBuilder* b, const int* par, int* order, int* placed) {
  int n = 0;
  for (int i = 0; i < b->nbody; i++) placed[i] = 0;
  while (n < b->nbody)
    for (int i = 0; i < b->nbody; i++)
      if (!placed[i] && (par[i] < 0 || placed[par[i]])) {
        placed[i] = 1;
        order[n++] = i;
      }
}

static void fill_contacts_actuators(dsArticModel* m, const dsArticBuilder* b, const int* newof,
                                    const dsArticOptions* o) {
  int s = 0;
  for (int g = 0; g < b->ngeom; g++) {
    const dsArticGeomDef* d = &b->geom[g].d;
    const int i = newof[find_body(b, b->geom[g].body)];
    for (int e = 0; e < (d->type == DS_ARTIC_CAPSULE ? 2 : 1); e++, s++) {
      m->sph_body[s] = i;
      m->sph_radius[s] = d->radius;
      for (int k = 0; k < 3; k++) m->sph_pos[3 * s + k] = e ? d->pos2[k] : d->pos[k];
    }
  }
  m->nsphere = s;
  for (int a = 0; a < b->nact; a++) {
    const ActRec* r = &b->act[a];
    int i = 0;
    while (strcmp(m->joint_name[i], r->joint) != 0) i++;
    strcpy(m->act_name[a], r->name);
    m->act_type[a] = r->d.type;
    m->act_body[a] = i;
    m->act_ctrl_limit[a] = r->d.ctrl_limit;
    m->act_force_limit[a] = r->d.force_limit;
    m->act_gear[a] = m->act_kp[a] = m->act_kv[a] = -1;
    if (r->d.type == DS_ARTIC_MOTOR)
      m->act_gear[a] = add_param(m, "actuator", r->name, "gear", r->d.gear);
    else {
      m->act_kp[a] = add_param(m, "actuator", r->name, "kp", r->d.kp);
      m->act_kv[a] = add_param(m, "actuator", r->name, "kv", r->d.kv);
    }
  }
  m->p_gravity = add_param3(m, "gravity", NULL, "", o->gravity);
  m->p_contact = -1;
  if (o->ground) {
    m->p_contact = add_param(m, "contact", NULL, "ke", o->contact_ke);
    add_param(m, "contact", NULL, "kd", o->contact_kd);
    add_param(m, "contact", NULL, "kf", o->contact_kf);
    add_param(m, "contact", NULL, "mu", o->contact_mu);
  }
}

int ds_artic_build(dsArticBuilder* b, const dsArticOptions* opt, dsArticModel** out) {
  if (!b || !out) return DS_ERR_INVALID;
  *out = NULL;
  const dsArticOptions o = opt ? *opt : ds_artic_default_options();
  int rc = check_options(&b->err, &o);
  if (rc) return rc;
  if (b->nbody == 0) return ds__seterr(&b->err, DS_ERR_INVALID, "no bodies (expected at least one)");
  const int nb = b->nbody;
  int* tmp = ds__calloc((size_t)4 * nb, sizeof(int));
  dsArticModel* m = ds__calloc(1, sizeof(dsArticModel));
  int ns = 0;
  for (int g = 0; g < b->ngeom; g++) ns += b->geom[g].d.type == DS_ARTIC_CAPSULE ? 2 : 1;
  const int npmax = 16 * nb + 2 * b->nact + 7;
  if (!tmp || !m || model_alloc(m, nb, ns, b->nact, npmax)) {
    ds__free(tmp);
    ds_artic_model_free(m);
    return ds__seterr(&b->err, DS_ERR_NOMEM, "out of memory building the articulated model");
  }
  int *jof = tmp, *par = tmp + nb, *order = tmp + 2 * nb, *newof = tmp + 3 * nb;
  if ((rc = check_tree(b, jof, par))) {
    ds__free(tmp);
    ds_artic_model_free(m);
    return rc;
  }
  tree_order(b, par, order, newof);
  for (int i = 0; i < nb; i++) newof[order[i]] = i;
  m->nbody = nb;
  m->nu = b->nact;
  m->dt = o.dt;
  m->ground = o.ground != 0;
  for (int i = 0; i < nb; i++) {
    const int bi = order[i];
    m->parent[i] = par[bi] < 0 ? -1 : newof[par[bi]];
    fill_body(m, i, &b->body[bi], &b->joint[jof[bi]]);
    m->qadr[i] = m->nq;
    m->vadr[i] = m->nv;
    const int t = m->jtype[i];
    m->nq += t == DS_JOINT_FREE ? 7 : t == DS_JOINT_BALL ? 4 : ndof_r(t);
    m->nv += ndof_r(t);
  }
  fill_contacts_actuators(m, b, newof, &o);
  ds__free(tmp);
  ds__clearerr(&b->err);
  *out = m;
  return 0;
}

/* ---- model queries and parameters ------------------------------------------------- */

int ds_artic_nq(const dsArticModel* m) { return m ? m->nq : 0; }
int ds_artic_nv(const dsArticModel* m) { return m ? m->nv : 0; }
int ds_artic_nu(const dsArticModel* m) { return m ? m->nu : 0; }
int ds_artic_nbody(const dsArticModel* m) { return m ? m->nbody : 0; }
double ds_artic_dt(const dsArticModel* m) { return m ? m->dt : 0; }
int ds_artic_nparam(const dsArticModel* m) { return m ? m->nparam : 0; }

const char* ds_artic_body_name(const dsArticModel* m, int i) {
  return m && i >= 0 && i < m->nbody ? m->body_name[i] : NULL;
}
int ds_artic_nsphere(const dsArticModel* m) { return m ? m->nsphere : 0; }
int ds_artic_sphere(const dsArticModel* m, int i, int* body, double pos[3], double* radius) {
  if (!m) return DS_ERR_INVALID;
  if (i < 0 || i >= m->nsphere) return DS_ERR_RANGE;
  if (body) *body = m->sph_body[i];
  if (pos)
    for (int k = 0; k < 3; k++) pos[k] = m->sph_pos[3 * i + k];
  if (radius) *radius = m->sph_radius[i];
  return 0;
}

int ds_artic_joint_adr(const dsArticModel* m, const char* name, int* qadr, int* vadr) {
  if (!m || !name) return DS_ERR_INVALID;
  for (int i = 0; i < m->nbody; i++)
    if (!strcmp(m->joint_name[i], name)) {
      if (qadr) *qadr = m->qadr[i];
      if (vadr) *vadr = m->vadr[i];
      return 0;
    }
  return DS_ERR_NOTFOUND;
}

const char* ds_artic_param_name(const dsArticModel* m, int i) {
  return m && i >= 0 && i < m->nparam ? m->param_name[i] : NULL;
}

int ds_artic_param_index(const dsArticModel* m, const char* name) {
  if (!m || !name) return DS_ERR_INVALID;
  for (int i = 0; i < m->nparam; i++)
    if (!strcmp(m->param_name[i], name)) return i;
  return DS_ERR_NOTFOUND;
}

int ds_artic_param_get(const dsArticModel* m, const char* name, double* value) {
  const int i = ds_artic_param_index(m, name);
  if (i < 0) return i;
  if (value) *value = m->param[i];
  return 0;
}

static int ends_with(const char* s, const char* tail) {
  const size_t n = strlen(s), t = strlen(tail);
  return n >= t && !strcmp(s + n - t, tail);
}

int ds_artic_param_set(dsArticModel* m, const char* name, double value) {
  const int i = ds_artic_param_index(m, name);
  if (i < 0) return i;
  if (bad(value)) return DS_ERR_RANGE;
  const int positive = ends_with(name, ".mass") || strstr(name, ".inertia.") != NULL;
  const int nonneg = ends_with(name, ".damping") || ends_with(name, ".armature") || ends_with(name, ".stiffness") ||
                     ends_with(name, ".kp") || ends_with(name, ".kv") || !strncmp(name, "contact.", 8);
  if ((positive && !(value > 0)) || (nonneg && value < 0)) return DS_ERR_RANGE;
  for (int b = 0; b < m->nbody; b++) {
    if (i == m->bp[b].lower && value > m->param[m->bp[b].upper]) return DS_ERR_RANGE;
    if (i == m->bp[b].upper && value < m->param[m->bp[b].lower]) return DS_ERR_RANGE;
  }
  m->param[i] = value;
  return 0;
}

/* ---- data -------------------------------------------------------------------------- */

/* The kinematics tape of one step: per body, body_r up to its joint's
 * columns of S (the kinematics' results come first there), packed. */
static size_t kin_part(const dsArticModel* m, int i) {
  return offsetof(body_r, S) + sizeof(double) * 6 * (size_t)ndof_r(m->jtype[i]);
}

static size_t kin_bytes(const dsArticModel* m) {
  size_t n = 0;
  for (int i = 0; i < m->nbody; i++) n += kin_part(m, i);
  return n;
}

static void kin_save(const dsArticModel* m, const ws_r* w, unsigned char* tape) {
  for (int i = 0; i < m->nbody; i++) {
    const size_t n = kin_part(m, i);
    memcpy(tape, &w->b[i], n);
    tape += n;
  }
}

static void kin_load(const dsArticModel* m, ws_r* w, const unsigned char* tape) {
  for (int i = 0; i < m->nbody; i++) {
    const size_t n = kin_part(m, i);
    memcpy(&w->b[i], tape, n);
    tape += n;
  }
}

/* The RNEA tape of one step: per body A, F, P (at the step's qdd). */
static void rnea_save(const dsArticModel* m, const ws_r* w, double* tape) {
  for (int i = 0; i < m->nbody; i++, tape += 18) {
    const body_r* b = &w->b[i];
    memcpy(tape, b->A, sizeof b->A);
    memcpy(tape + 6, b->F, sizeof b->F);
    memcpy(tape + 12, b->P, sizeof b->P);
  }
}

static void rnea_load(const dsArticModel* m, ws_r* w, const double* tape) {
  for (int i = 0; i < m->nbody; i++, tape += 18) {
    body_r* b = &w->b[i];
    memcpy(b->A, tape, sizeof b->A);
    memcpy(b->F, tape + 6, sizeof b->F);
    memcpy(b->P, tape + 12, sizeof b->P);
  }
}

/* Workspace of one number type: struct, bodies and arrays in one block. */
#define DS__WS_ALLOC(SUF, T)                                                                                       \
  static ws_##SUF* ws_alloc_##SUF(const dsArticModel* m, double* cpt) {                                            \
    const size_t nb = (size_t)m->nbody,                                                                            \
                 n = (size_t)(m->nq + m->nv + m->nu + m->nparam) + 4 * (size_t)m->nv + 6 * nb + (size_t)m->nq + 8; \
    ws_##SUF* w = ds__calloc(1, sizeof(ws_##SUF) + nb * sizeof(body_##SUF) + n * sizeof(T));                       \
    if (!w) return NULL;                                                                                           \
    w->b = (body_##SUF*)(w + 1);                                                                                   \
    T* p = (T*)(w->b + nb);                                                                                        \
    w->q = p, p += m->nq;                                                                                          \
    w->qd = p, p += m->nv;                                                                                         \
    w->u = p, p += m->nu;                                                                                          \
    w->th = p, p += m->nparam;                                                                                     \
    w->tau = p, p += m->nv;                                                                                        \
    w->id = p, p += m->nv;                                                                                         \
    w->qdd = p, p += m->nv;                                                                                        \
    w->qdn = p, p += m->nv;                                                                                        \
    w->fext = p, p += 6 * nb;                                                                                      \
    w->qn = p;                                                                                                     \
    w->cpt = cpt;                                                                                                  \
    return w;                                                                                                      \
  }
DS__WS_ALLOC(r, double)
DS__WS_ALLOC(c, double complex)

void ds_artic_data_free(dsArticData* d) {
  if (!d) return;
  if (d->wr) ds__free(((ws_r*)d->wr)->cpt);
  ds__free(d->q);
  ds__free(d->qd);
  ds__free(d->act);
  ds__free(d->wr);
  ds__free(d->wc);
  ds__free(d->M);
  ds__free(d->vec);
  ds__free(d->rev);
  ds__free(d->Lt);
  ds__free(d->qddt);
  ds__free(d->kt);
  ds__free(d->rt);
  ds__free(d);
}

int ds_artic_data_create(const dsArticModel* m, int steps, dsArticData** out) {
  if (!m || !out || steps < 0) return DS_ERR_INVALID;
  *out = NULL;
  dsArticData* d = ds__calloc(1, sizeof(dsArticData));
  if (!d) return DS_ERR_NOMEM;
  d->steps = steps;
  d->nq = m->nq;
  d->nv = m->nv;
  d->nu = m->nu;
  d->nparam = m->nparam;
  const size_t S = (size_t)steps + 1, n = (size_t)(m->nq + m->nv + m->nu + m->nparam);
  double* cpt = ds__calloc(6 * (size_t)m->nsphere + 1, sizeof(double));
  d->q = ds__calloc(S * (size_t)m->nq + 1, sizeof(double));
  d->qd = ds__calloc(S * (size_t)m->nv + 1, sizeof(double));
  d->act = ds__calloc((size_t)steps * (size_t)m->nu + 1, sizeof(double));
  d->M = ds__calloc((size_t)m->nv * (size_t)m->nv + 1, sizeof(double));
  d->vec = ds__calloc(6 * n + 2 * (size_t)m->nv + (size_t)m->nq + 1, sizeof(double));
  d->rev =
      ds__calloc(1, sizeof(double) * (size_t)(m->nu + m->nparam + m->nv) + sizeof(dsArticAdjBody) * (size_t)m->nbody);
  d->wr = cpt ? ws_alloc_r(m, cpt) : NULL;
  d->wc = cpt ? ws_alloc_c(m, cpt) : NULL;
  if (!d->wr) ds__free(cpt);
  if (!d->q || !d->qd || !d->act || !d->M || !d->vec || !d->rev || !d->wr || !d->wc) {
    ds_artic_data_free(d);
    return DS_ERR_NOMEM;
  }
  const size_t nl = factor_len(m);
  if (steps > 0 && m->nv > 0 && (size_t)steps * (nl + (size_t)m->nv) * sizeof(double) <= DS__ARTIC_FACTOR_TAPE_MAX) {
    d->Lt = ds__calloc((size_t)steps * nl, sizeof(double));
    d->qddt = ds__calloc((size_t)steps * (size_t)m->nv, sizeof(double));
    if (!d->Lt || !d->qddt) {
      ds_artic_data_free(d);
      return DS_ERR_NOMEM;
    }
    d->kinb = kin_bytes(m);
    if (d->kinb * (size_t)steps <= DS__ARTIC_KIN_TAPE_MAX && !(d->kt = ds__calloc((size_t)steps, d->kinb))) {
      ds_artic_data_free(d);
      return DS_ERR_NOMEM;
    }
    const size_t rb = 18 * sizeof(double) * (size_t)m->nbody;
    if (rb * (size_t)steps <= DS__ARTIC_RNEA_TAPE_MAX && !(d->rt = ds__calloc((size_t)steps, rb))) {
      ds_artic_data_free(d);
      return DS_ERR_NOMEM;
    }
  }
  d->qdd = d->vec + 6 * n;
  d->adj = d->qdd + m->nv;
  *out = d;
  return ds_artic_reset(m, d, NULL, NULL);
}

size_t ds__artic_data_bytes(const dsArticModel* m) { /* ds_artic_data_create(m, 0)'s blocks */
  const size_t n = (size_t)(m->nq + m->nv + m->nu + m->nparam), nb = (size_t)m->nbody;
  const size_t nws = n + 4 * (size_t)m->nv + 6 * nb + (size_t)m->nq + 8;
  return sizeof(dsArticData) + (6 * (size_t)m->nsphere + 1) * sizeof(double) +
         (2 * (size_t)m->nq + 2 * (size_t)m->nv + 1 + (size_t)m->nv * (size_t)m->nv + 1 + 6 * n + 2 * (size_t)m->nv +
          (size_t)m->nq + 1 + (size_t)(m->nu + m->nparam + m->nv)) * sizeof(double) +
         sizeof(dsArticAdjBody) * nb + sizeof(ws_r) + nb * sizeof(body_r) + nws * sizeof(double) + sizeof(ws_c) +
         nb * sizeof(body_c) + nws * sizeof(double complex);
}

int ds_artic_reset(const dsArticModel* m, dsArticData* d, const double* q0, const double* qd0) {
  if (!m || !d || d->nq != m->nq || d->nv != m->nv || d->nparam != m->nparam) return DS_ERR_INVALID;
  d->t = 0;
  d->Lcur = NULL;
  for (int i = 0; i < m->nbody; i++) {
    double* q = d->q + m->qadr[i];
    const int t = m->jtype[i];
    const int nq = t == DS_JOINT_FREE ? 7 : t == DS_JOINT_BALL ? 4 : ndof_r(t);
    for (int k = 0; k < nq; k++) q[k] = q0 ? q0[m->qadr[i] + k] : 0;
    if (!q0 && t == DS_JOINT_BALL) q[0] = 1;
    if (!q0 && t == DS_JOINT_FREE) q[3] = 1;
  }
  for (int v = 0; v < m->nv; v++) d->qd[v] = qd0 ? qd0[v] : 0;
  return 0;
}

int ds_artic_steps(const dsArticData* d) { return d ? d->t : 0; }
const double* ds_artic_q(const dsArticData* d, int t) {
  return d && t >= 0 && t <= d->t ? d->q + (size_t)t * (size_t)d->nq : NULL;
}
const double* ds_artic_qd(const dsArticData* d, int t) {
  return d && t >= 0 && t <= d->t ? d->qd + (size_t)t * (size_t)d->nv : NULL;
}

/* ---- step ------------------------------------------------------------------------------ */

/* x86-64 with GCC or Clang target attributes: the step and one step of the
 * reverse pass are compiled twice, for the baseline (SSE2) and, flattened
 * (every callee inlined), for AVX2, chosen at run time; the same
 * operations either way (no FMA: -ffp-contract=off), so the same bits. On
 * a 16-link chain the AVX2 copy runs 15% fewer instructions. Elsewhere (or
 * with -DDS_NO_AVX2) one copy. */
#if defined(__x86_64__) && !defined(DS_NO_AVX2) && defined(__has_attribute)
#  if __has_attribute(target) && __has_attribute(flatten)
#    define DS__ARTIC_AVX2 1
#  endif
#endif
#ifdef DS__ARTIC_AVX2
#  define DS__ARTIC_CLONES(ret, name, params, args)                                            \
    __attribute__((flatten)) static ret name##_base params { return name##_body args; }      \
    __attribute__((target("avx2"), flatten)) static ret name##_avx2 params {                \
      return name##_body args;                                                             \
    }                                                                                      \
    static ret name params {                                                               \
      return __builtin_cpu_supports("avx2") ? name##_avx2 args : name##_base args;         \
    }
#else
#  define DS__ARTIC_CLONES(ret, name, params, args) \
    static ret name params { return name##_body args; }
#endif

/* the step after the checks: the real pass, the new state, the tapes */
static inline int step_taped_body(const dsArticModel* m, dsArticData* d, const double* action) {
  const size_t t = (size_t)d->t;
  int rc = forward(m, d, d->q + t * (size_t)m->nq, d->qd + t * (size_t)m->nv, action, d->rt != NULL);
  if (rc) return rc;
  const ws_r* w = d->wr;
  for (int k = 0; k < m->nq; k++)
    if (!isfinite(w->qn[k])) return DS_ERR_DIVERGED;
  for (int k = 0; k < m->nv; k++)
    if (!isfinite(w->qdn[k])) return DS_ERR_DIVERGED;
  memcpy(d->q + (t + 1) * (size_t)m->nq, w->qn, sizeof(double) * (size_t)m->nq);
  memcpy(d->qd + (t + 1) * (size_t)m->nv, w->qdn, sizeof(double) * (size_t)m->nv);
  for (int a = 0; a < m->nu; a++) d->act[t * (size_t)m->nu + (size_t)a] = action ? action[a] : 0;
  if (d->Lt) {
    const int nv = m->nv;
    double* L = d->Lt + t * factor_len(m);
    if (aba_model(m)) /* U and D of each body */
      for (int i = 0; i < m->nbody; i++, L += 7) {
        memcpy(L, w->b[i].U, sizeof(double) * 6);
        L[6] = w->b[i].D;
      }
    else
      for (int i = 0; i < nv; i++, L += i)
        for (int k = 0; k <= i; k++) L[k] = d->M[i * nv + k];
    memcpy(d->qddt + t * (size_t)nv, w->qdd, sizeof(double) * (size_t)nv);
  }
  if (d->kt) kin_save(m, w, d->kt + t * d->kinb);
  if (d->rt) rnea_save(m, w, d->rt + t * 18 * (size_t)m->nbody);
  d->t++;
  return 0;
}
DS__ARTIC_CLONES(int, step_taped, (const dsArticModel* m, dsArticData* d, const double* action), (m, d, action))

int ds_artic_step(const dsArticModel* m, dsArticData* d, const double* action) {
  if (!m || !d || d->nq != m->nq || d->nv != m->nv || d->nu != m->nu || d->nparam != m->nparam) return DS_ERR_INVALID;
  if (d->t >= d->steps) return DS_ERR_STATE;
  return step_taped(m, d, action);
}

/* The real pass of taped step t as the adjoint needs it (what forward(...,
 * 1) leaves: kinematics, contact points, (q', qd'), the RNEA's results at
 * qdd, the factor (d->Lcur)), from the taped factor and qdd: the same
 * numbers, without rebuilding and refactoring M, and from the kinematics
 * and RNEA tapes when there are; (q', qd') are the step's stored results. */
static void replay(const dsArticModel* m, dsArticData* d, int t) {
  ws_r* w = d->wr;
  const int nq = m->nq, nv = m->nv;
  const size_t st = (size_t)t;
  memcpy(w->q, d->q + st * nq, sizeof(double) * (size_t)nq);
  memcpy(w->qd, d->qd + st * nv, sizeof(double) * (size_t)nv);
  memcpy(w->u, d->act + st * m->nu, sizeof(double) * (size_t)m->nu);
  w->th = m->param; /* the real passes only read it */
  if (d->kt) {
    kin_load(m, w, d->kt + st * d->kinb);
  } else {
    kin_r(m, w, 0, NULL);
    d->nkin++;
  }
  contact_r(m, w);
  const int aba = aba_model(m);
  if (d->rt) {
    rnea_load(m, w, d->rt + st * 18 * (size_t)m->nbody);
  } else if (!aba) { /* as forward(..., 1): the bias pass, then its update at qdd */
    for (int v = 0; v < nv; v++) w->qdd[v] = 0;
    rnea_r(m, w, w->qdd, 0, NULL);
  }
  memcpy(w->qdd, d->qddt + st * nv, sizeof(double) * (size_t)nv);
  if (!d->rt && aba) { /* as forward(..., 1): pass 1, then pass 3 at the taped qdd */
    aba_bias(m, w, 0);
    aba_accel(m, w, w->qdd, 0, 1);
  } else if (!d->rt) {
    rnea_at_qdd(m, w, w->qdd);
  }
  memcpy(d->qdd, w->qdd, sizeof(double) * (size_t)nv);
  d->Lcur = d->Lt + st * factor_len(m);
  memcpy(w->qn, d->q + (st + 1) * nq, sizeof(double) * (size_t)nq);
  memcpy(w->qdn, d->qd + (st + 1) * nv, sizeof(double) * (size_t)nv);
}

/* ---- adjoint ------------------------------------------------------------------------------ */

/* The first body (tree order) whose kinematics, and whose RNEA forward
 * terms, input column col can change; nbody for none. */
static void first_reached(const dsArticModel* m, int col, int* kin, int* dyn) {
  const int nq = m->nq, nv = m->nv, nu = m->nu;
  *kin = *dyn = m->nbody;
  int i = -1;
  if (col < nq + nv) { /* a state entry: its joint's body */
    const int* adr = col < nq ? m->qadr : m->vadr;
    const int k = col < nq ? col : col - nq;
    i = 0;
    while (i + 1 < m->nbody && adr[i + 1] <= k) i++;
  } else if (col >= nq + nv + nu) {
    const int p = col - nq - nv - nu;
    if (p >= m->p_gravity && p < m->p_gravity + 3) *dyn = 0;
    if (m->p_contact >= 0 && p >= m->p_contact && p < m->p_contact + 4) *dyn = 0;
    for (int b = 0; b < m->nbody && i < 0; b++) {
      const dsArticBodyParams* bp = &m->bp[b];
      if (p == bp->mass || (p >= bp->inertia && p < bp->inertia + 3) || (p >= bp->anchor_p && p < bp->anchor_p + 3) ||
          (p >= bp->anchor_c && p < bp->anchor_c + 3) || p == bp->armature)
        i = b;
    }
  }
  if (i >= 0) {
    *kin = i;
    *dyn = i;
  }
}

/* One tangent sweep at the point of the last real pass, input column col
 * (q entries, then qd, u, parameters), returns dout . adj (out = (q', qd')). */
static double sweep(const dsArticModel* m, dsArticData* d, int col, const double* adj) {
  const ws_r* r = d->wr;
  ws_c* w = d->wc;
  const int nq = m->nq, nv = m->nv, nu = m->nu;
  for (int k = 0; k < nq; k++) w->q[k] = r->q[k];
  for (int k = 0; k < nv; k++) w->qd[k] = r->qd[k];
  for (int k = 0; k < nu; k++) w->u[k] = r->u[k];
  for (int k = 0; k < m->nparam; k++) w->th[k] = r->th[k];
  double complex* seed = col < nq             ? w->q + col
                         : col < nq + nv      ? w->qd + (col - nq)
                         : col < nq + nv + nu ? w->u + (col - nq - nv)
                                              : w->th + (col - nq - nv - nu);
  *seed += I * DS__ARTIC_H;
  int first_kin, first_dyn;
  first_reached(m, col, &first_kin, &first_dyn);
  kin_c(m, w, first_kin, r->b);
  contact_c(m, w);
  applied_c(m, w);
  for (int v = 0; v < nv; v++) w->qdd[v] = r->qdd[v];
  rnea_c(m, w, w->qdd, first_dyn, r->b);
  double* y = d->vec;
  for (int v = 0; v < nv; v++) y[v] = cimag(w->tau[v] - w->id[v]);
  solve_M(m, d, nv, y);
  for (int v = 0; v < nv; v++) w->qdd[v] = r->qdd[v] + I * y[v];
  integrate_c(m, w);
  double s = 0;
  for (int k = 0; k < nq; k++) s += cimag(w->qn[k]) * adj[k];
  for (int k = 0; k < nv; k++) s += cimag(w->qdn[k]) * adj[nq + k];
  return s / DS__ARTIC_H;
}

/* The real pass of taped step t back, as the adjoint needs it: from the
 * tapes (replay), else redone (forward). */
static inline int real_pass_at(const dsArticModel* m, dsArticData* d, int t) {
  const size_t st = (size_t)t;
  if (d->Lt) {
    replay(m, d, t);
    return 0;
  }
  return forward(m, d, d->q + st * m->nq, d->qd + st * m->nv, d->act + st * m->nu, 1);
}

/* One step t of the reverse pass: its real pass back, then step_vjp from
 * adj into nxt (state), gu (actions) and gth. */
static inline int reverse_step_body(const dsArticModel* m, dsArticData* d, int t, const double* adj, double* nxt,
                                    double* gu, double* gth) {
  int rc = real_pass_at(m, d, t);
  if (rc) return rc;
  double* lam = d->rev + m->nu + m->nparam;
  step_vjp(m, d, adj, nxt, nxt + m->nq, gu, gth, lam, (dsArticAdjBody*)(lam + m->nv));
  return 0;
}
DS__ARTIC_CLONES(int, reverse_step,
                 (const dsArticModel* m, dsArticData* d, int t, const double* adj, double* nxt, double* gu,
                  double* gth),
                 (m, d, t, adj, nxt, gu, gth))

/* The backward pass over the tape; reverse: step_vjp (engine/artic_rev.h),
 * else the tangent sweeps above (the same products, column by column: the
 * tests' reference). */
static int backward(const dsArticModel* m, dsArticData* d, const double* dl_dq, const double* dl_dqd,
                    const dsArticGrad* g, int reverse) {
  if (!m || !d || !g || d->nq != m->nq || d->nv != m->nv || d->nu != m->nu || d->nparam != m->nparam)
    return DS_ERR_INVALID;
  const int nq = m->nq, nv = m->nv, nu = m->nu, ns = nq + nv, T = d->t;
  double* adj = d->adj;         /* nq + nv: dL/d(state k) */
  double* nxt = d->vec + m->nv; /* scratch of ns */
  double* gu = d->rev;          /* nu, then nparam, then nv */
  /* reverse: the sum over the steps, in place; NULL when no one asked for it
     (step_vjp then skips the parameter-only terms) */
  double* gth = g->param;
  for (int k = 0; k < nq; k++) adj[k] = dl_dq ? dl_dq[(size_t)T * nq + k] : 0;
  for (int k = 0; k < nv; k++) adj[nq + k] = dl_dqd ? dl_dqd[(size_t)T * nv + k] : 0;
  if (gth)
    for (int p = 0; p < m->nparam; p++) gth[p] = 0;
  for (int t = T - 1; t >= 0; t--) {
    const size_t st = (size_t)t;
    if (reverse) {
      int rc = reverse_step(m, d, t, adj, nxt, gu, gth);
      if (rc) return rc;
      if (g->action)
        for (int a = 0; a < nu; a++) g->action[st * nu + a] = gu[a];
    } else {
      int rc = real_pass_at(m, d, t);
      if (rc) return rc;
      /* the state columns (needed to go on, or for q0/qd0 at t = 0) */
      if (t > 0 || g->q0 || g->qd0)
        for (int c = 0; c < ns; c++) nxt[c] = sweep(m, d, c, adj);
      if (g->action)
        for (int a = 0; a < nu; a++) g->action[st * nu + a] = sweep(m, d, ns + a, adj);
      if (g->param)
        for (int p = 0; p < m->nparam; p++) g->param[p] += sweep(m, d, ns + nu + p, adj);
    }
    for (int k = 0; k < nq; k++) adj[k] = nxt[k] + (dl_dq ? dl_dq[st * nq + k] : 0);
    for (int k = 0; k < nv; k++) adj[nq + k] = nxt[nq + k] + (dl_dqd ? dl_dqd[st * nv + k] : 0);
  }
  if (g->q0) memcpy(g->q0, adj, sizeof(double) * (size_t)nq);
  if (g->qd0) memcpy(g->qd0, adj + nq, sizeof(double) * (size_t)nv);
  return 0;
}

int ds_artic_backward(const dsArticModel* m, dsArticData* d, const double* dl_dq, const double* dl_dqd,
                      const dsArticGrad* g) {
  return backward(m, d, dl_dq, dl_dqd, g, 1);
}

int ds__artic_backward_tangent(const dsArticModel* m, dsArticData* d, const double* dl_dq, const double* dl_dqd,
                               const dsArticGrad* g) {
  return backward(m, d, dl_dq, dl_dqd, g, 0);
}

/* ---- energy and momentum ------------------------------------------------------------------ */

int ds_artic_energy(const dsArticModel* m, dsArticData* d, const double* q, const double* qd, double* kinetic,
                    double* potential) {
  if (!m || !d || !q || !qd || d->nq != m->nq || d->nv != m->nv) return DS_ERR_INVALID;
  ws_r* w = d->wr;
  memcpy(w->q, q, sizeof(double) * (size_t)m->nq);
  memcpy(w->qd, qd, sizeof(double) * (size_t)m->nv);
  w->th = m->param; /* the real passes only read it */
  kin_r(m, w, 0, NULL);
  double pe = 0;
  const double* g = m->param + m->p_gravity;
  for (int i = 0; i < m->nbody; i++) {
    const body_r* b = &w->b[i];
    pe -= b->m * (g[0] * b->x[0] + g[1] * b->x[1] + g[2] * b->x[2]);
    const dsArticBodyParams* bp = &m->bp[i];
    if (bp->stiffness >= 0) {
      const double e = q[m->qadr[i]] - m->param[bp->rest];
      pe += 0.5 * m->param[bp->stiffness] * e * e;
    }
  }
  crba(m, w, d->M);
  double ke = 0;
  for (int r = 0; r < m->nv; r++)
    for (int c = 0; c < m->nv; c++) ke += 0.5 * qd[r] * d->M[r * m->nv + c] * qd[c];
  if (kinetic) *kinetic = ke;
  if (potential) *potential = pe;
  return 0;
}

int ds_artic_momentum(const dsArticModel* m, dsArticData* d, const double* q, const double* qd, double lin[3],
                      double ang[3]) {
  if (!m || !d || !q || !qd || !lin || !ang || d->nq != m->nq || d->nv != m->nv) return DS_ERR_INVALID;
  ws_r* w = d->wr;
  memcpy(w->q, q, sizeof(double) * (size_t)m->nq);
  memcpy(w->qd, qd, sizeof(double) * (size_t)m->nv);
  w->th = m->param; /* the real passes only read it */
  kin_r(m, w, 0, NULL);
  for (int k = 0; k < 3; k++) lin[k] = ang[k] = 0;
  for (int i = 0; i < m->nbody; i++) {
    const body_r* b = &w->b[i];
    double P[6];
    imul_r(P, b->m, b->h, b->Ib, b->V);
    for (int k = 0; k < 3; k++) {
      ang[k] += P[k];
      lin[k] += P[3 + k];
    }
  }
  return 0;
}

/* ---- for the particle engine (engine/artic_model.c) -------------------------------------
 * A deep copy of the model (the untaped substep, its adjoint and the poses
 * are engine/artic_step.h's). */

int ds__artic_model_copy(const dsArticModel* src, dsArticModel** out) {
  *out = NULL;
  dsArticModel* m = ds__calloc(1, sizeof(dsArticModel));
  if (!m) return DS_ERR_NOMEM;
  *m = *src;
  /* the copy's own arrays: none of src's may stay in it, or freeing the
     copy after a failed allocation would free src's */
#define DS__N(f, n) m->f = NULL;
  DS__ARTIC_ARRAYS(DS__N)
#undef DS__N
  const int nb1 = src->nbody ? src->nbody : 1, ns1 = src->nsphere ? src->nsphere : 1, na1 = src->nu ? src->nu : 1,
            np = src->nparam;
  if (model_alloc(m, src->nbody, src->nsphere, src->nu, src->nparam)) {
    ds_artic_model_free(m);
    return DS_ERR_NOMEM;
  }
#define DS__C(f, n) memcpy(m->f, src->f, (size_t)(n) * sizeof(*m->f));
  DS__ARTIC_ARRAYS(DS__C)
#undef DS__C
  *out = m;
  return 0;
}

/* Every array of m placed from `base` (backend memory) at 16-byte aligned
 * offsets: out's array pointers are base + offset and, when img is not
 * NULL, the arrays' contents are copied to img + offset (the image the
 * caller uploads to base); returns the bytes of the block. */
size_t ds__artic_model_layout(const dsArticModel* m, void* base, unsigned char* img, dsArticModel* out) {
  const int nb1 = m->nbody ? m->nbody : 1, ns1 = m->nsphere ? m->nsphere : 1, na1 = m->nu ? m->nu : 1,
            np = m->nparam;
  size_t o = 0;
  if (out) *out = *m;
#define DS__L(f, n)                                                                   \
  {                                                                                   \
    const size_t b_ = (size_t)(n) * sizeof(*m->f);                                    \
    if (out) out->f = (void*)((unsigned char*)base + o);                              \
    if (img) memcpy(img + o, m->f, b_);                                               \
    o += (b_ + 15) & ~(size_t)15;                                                     \
  }
  DS__ARTIC_ARRAYS(DS__L)
#undef DS__L
  return o;
}

double* ds__artic_params(dsArticModel* m) { return m->param; }

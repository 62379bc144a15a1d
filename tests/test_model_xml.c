/* MJCF and URDF loaders (io/model_xml.c): models from tests/data/models/
 * against the same models built by hand through the builder (trajectories
 * bitwise or to 1e-14), default classes, degrees against radians, inertia
 * from geometry against the solid formulas, a 3D chain with a free and a
 * ball joint, and every bad input of issue 30 item 7 with its line. Skips
 * (77) in a build without libxml2. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsim/dsim.h"
#include "io/model_xml.h"
#include "tests/dstest.h"

#define PI 3.14159265358979323846

static char g_path[1024];
static const char* data(const char* name) {
  const char* src = getenv("DS_SRCDIR");
  snprintf(g_path, sizeof g_path, "%s/tests/data/models/%s", src ? src : ".", name);
  return g_path;
}

static dsArticModel* load(const char* name, const dsArticOptions* o) {
  char err[1024];
  dsArticModel* m = NULL;
  int rc = ds_artic_load(data(name), o, &m, err, sizeof err);
  if (rc) fprintf(stderr, "load %s: %s\n", name, err);
  CHECK_INT_EQ(rc, 0);
  return m;
}

static double param(const dsArticModel* m, const char* name) {
  double v = NAN;
  int rc = ds_artic_param_get(m, name, &v);
  if (rc) fprintf(stderr, "no parameter %s\n", name);
  CHECK_INT_EQ(rc, 0);
  return v;
}

/* Both models from (q0, qd0) for `steps` steps with action u: largest
 * difference of q and qd (0 when bitwise equal), or 1 when the sizes differ */
static double compare(const dsArticModel* a, const dsArticModel* b, const double* q0, const double* qd0,
                      const double* u, int steps) {
  if (!a || !b || ds_artic_nq(a) != ds_artic_nq(b) || ds_artic_nv(a) != ds_artic_nv(b) ||
      ds_artic_nu(a) != ds_artic_nu(b) || ds_artic_dt(a) != ds_artic_dt(b))
    return 1;
  dsArticData *da, *db;
  CHECK_INT_EQ(ds_artic_data_create(a, steps, &da), 0);
  CHECK_INT_EQ(ds_artic_data_create(b, steps, &db), 0);
  CHECK_INT_EQ(ds_artic_reset(a, da, q0, qd0), 0);
  CHECK_INT_EQ(ds_artic_reset(b, db, q0, qd0), 0);
  double worst = 0;
  for (int t = 0; t < steps; t++) {
    CHECK_INT_EQ(ds_artic_step(a, da, u), 0);
    CHECK_INT_EQ(ds_artic_step(b, db, u), 0);
  }
  for (int t = 0; t <= steps; t++) {
    for (int i = 0; i < ds_artic_nq(a); i++) worst = fmax(worst, fabs(ds_artic_q(da, t)[i] - ds_artic_q(db, t)[i]));
    for (int i = 0; i < ds_artic_nv(a); i++) worst = fmax(worst, fabs(ds_artic_qd(da, t)[i] - ds_artic_qd(db, t)[i]));
  }
  ds_artic_data_free(da);
  ds_artic_data_free(db);
  return worst;
}

static dsArticModel* build(dsArticBuilder* b, double dt, double gz) {
  dsArticOptions o = ds_artic_default_options();
  dsArticModel* m = NULL;
  o.dt = dt, o.gravity[2] = gz;
  int rc = ds_artic_build(b, &o, &m);
  if (rc) fprintf(stderr, "build: %s\n", ds_artic_builder_error(b));
  CHECK_INT_EQ(rc, 0);
  ds_artic_builder_free(b);
  return m;
}

static void body(dsArticBuilder* b, const char* name, double mass, double ix, double iy, double iz) {
  dsArticBodyDef bd = ds_artic_default_body_def();
  bd.name = name, bd.mass = mass, bd.inertia[0] = ix, bd.inertia[1] = iy, bd.inertia[2] = iz;
  CHECK_INT_EQ(ds_artic_add_body(b, &bd), 0);
}

static dsArticJointDef hinge_y(const char* name, const char* parent, const char* child, double apz, double acz,
                               double damping) {
  dsArticJointDef jd = ds_artic_default_joint_def();
  jd.name = name, jd.parent = parent, jd.child = child;
  jd.axis[0] = 0, jd.axis[1] = 1, jd.axis[2] = 0;
  jd.anchor_parent[2] = apz, jd.anchor_child[2] = acz, jd.damping = damping;
  return jd;
}

static void test_pendulum(void) {
  dsArticBuilder* b;
  CHECK_INT_EQ(ds_artic_builder_create(&b), 0);
  body(b, "link", 1, 0.084, 0.084, 0.001);
  dsArticJointDef jd = hinge_y("hinge", NULL, "link", 2, 0.5, 0.01);
  CHECK_INT_EQ(ds_artic_add_joint(b, &jd), 0);
  dsArticActuatorDef ad = ds_artic_default_actuator_def();
  ad.name = "torque", ad.joint = "hinge", ad.ctrl_limit = 2;
  CHECK_INT_EQ(ds_artic_add_actuator(b, &ad), 0);
  dsArticModel* hand = build(b, 0.001, -9.81);
  dsArticModel* mj = load("pendulum.xml", NULL);
  double q0 = 0.7, qd0 = -0.3, u = 1.5;
  CHECK(compare(hand, mj, &q0, &qd0, &u, 500) == 0);
  /* URDF has no actuators and no options */
  CHECK_INT_EQ(ds_artic_builder_create(&b), 0);
  body(b, "link", 1, 0.084, 0.084, 0.001);
  CHECK_INT_EQ(ds_artic_add_joint(b, &jd), 0);
  dsArticModel* hand2 = build(b, 0.001, -9.81);
  dsArticModel* ur = load("pendulum.urdf", NULL);
  CHECK(compare(hand2, ur, &q0, &qd0, NULL, 500) == 0);
  ds_artic_model_free(hand), ds_artic_model_free(hand2), ds_artic_model_free(mj), ds_artic_model_free(ur);
}

static void test_double_pendulum(void) {
  dsArticBuilder* b;
  CHECK_INT_EQ(ds_artic_builder_create(&b), 0);
  body(b, "upper", 1, 0.084, 0.084, 0.001);
  body(b, "lower", 0.5, 0.027, 0.027, 0.0005);
  dsArticJointDef j1 = hinge_y("shoulder", "world", "upper", 0, 0.5, 0.05);
  dsArticJointDef j2 = hinge_y("elbow", "upper", "lower", -1 - -0.5, 0.4, 0.05);
  j2.limited = 1, j2.limit_lower = -2, j2.limit_upper = 2;
  CHECK_INT_EQ(ds_artic_add_joint(b, &j1), 0);
  CHECK_INT_EQ(ds_artic_add_joint(b, &j2), 0);
  dsArticGeomDef gd = ds_artic_default_geom_def();
  gd.body = "lower", gd.radius = 0.05;
  CHECK_INT_EQ(ds_artic_add_geom(b, &gd), 0);
  dsArticModel* hand = build(b, 0.002, -9.81);
  dsArticOptions o = ds_artic_default_options();
  o.dt = 0.002;
  dsArticModel* mj = load("double_pendulum.xml", NULL);
  dsArticModel* ur = load("double_pendulum.urdf", &o);
  double q0[2] = {1.2, -1.9}, qd0[2] = {0.5, 3};
  CHECK(compare(hand, mj, q0, qd0, NULL, 1000) == 0);
  CHECK(compare(hand, ur, q0, qd0, NULL, 1000) == 0);
  CHECK_CLOSE(param(ur, "joint.elbow.limit_upper"), 2, 0, 0);
  ds_artic_model_free(hand), ds_artic_model_free(mj), ds_artic_model_free(ur);
  /* the bundled models load */
  const char* src = getenv("DS_SRCDIR");
  const char* cfg[] = {"pendulum.xml", "double_pendulum.xml", "double_pendulum.urdf"};
  for (int i = 0; i < 3; i++) {
    char path[1024], err[512];
    dsArticModel* m = NULL;
    snprintf(path, sizeof path, "%s/configs/models/%s", src ? src : ".", cfg[i]);
    int rc = ds_artic_load(path, NULL, &m, err, sizeof err);
    if (rc) fprintf(stderr, "%s\n", err);
    CHECK_INT_EQ(rc, 0);
    CHECK(m && ds_artic_nq(m) == (i ? 2 : 1));
    ds_artic_model_free(m);
  }
}

/* A free torso, an arm on a ball and a hand on a hinge (chain3d.xml) */
static void test_chain3d(void) {
  dsArticBuilder* b;
  CHECK_INT_EQ(ds_artic_builder_create(&b), 0);
  body(b, "torso", 2, 0.02, 0.03, 0.04);
  body(b, "arm", 0.5, 0.001, 0.004, 0.004);
  body(b, "hand", 0.1, 1e-4, 1e-4, 1e-4);
  dsArticJointDef jd = ds_artic_default_joint_def();
  jd.name = "root", jd.type = DS_JOINT_FREE, jd.child = "torso", jd.anchor_parent[2] = 1;
  CHECK_INT_EQ(ds_artic_add_joint(b, &jd), 0);
  jd = ds_artic_default_joint_def();
  jd.name = "shoulder", jd.type = DS_JOINT_BALL, jd.parent = "torso", jd.child = "arm", jd.damping = 0.01;
  jd.anchor_parent[0] = 0.2, jd.anchor_child[0] = 0 - 0.15;
  CHECK_INT_EQ(ds_artic_add_joint(b, &jd), 0);
  jd = ds_artic_default_joint_def();
  jd.name = "wrist", jd.parent = "arm", jd.child = "hand";
  jd.anchor_parent[0] = 0.3 - 0.15, jd.anchor_child[0] = 0 - 0.05;
  CHECK_INT_EQ(ds_artic_add_joint(b, &jd), 0);
  dsArticModel* hand = build(b, 0.001, 0);
  dsArticModel* mj = load("chain3d.xml", NULL);
  CHECK_INT_EQ(ds_artic_nq(mj), 7 + 4 + 1);
  CHECK_INT_EQ(ds_artic_nv(mj), 6 + 3 + 1);
  double q0[12] = {0.1, -0.2, 0.05, 0.9, 0.1, 0.3, -0.2, 0.8, 0.2, -0.4, 0.3, 0.6};
  double qd0[10] = {0.3, 0.1, -0.2, 1, -2, 0.5, 3, -1, 2, 4};
  CHECK(compare(hand, mj, q0, qd0, NULL, 400) == 0);
  ds_artic_model_free(hand), ds_artic_model_free(mj);
}

static void test_defaults(void) {
  dsArticModel* m = load("defaults.xml", NULL);
  if (!m) return;
  CHECK_CLOSE(param(m, "joint.ja.damping"), 0.1, 0, 0);
  CHECK_CLOSE(param(m, "joint.ja.armature"), 0.01, 0, 0);
  CHECK_CLOSE(param(m, "joint.ja.stiffness"), 0, 0, 0);
  CHECK_CLOSE(param(m, "joint.jb.damping"), 0.2, 0, 0);  /* childclass stiff */
  CHECK_CLOSE(param(m, "joint.jb.stiffness"), 5, 0, 0);
  CHECK_CLOSE(param(m, "joint.jb.armature"), 0.01, 0, 0); /* from main through stiff */
  CHECK_CLOSE(param(m, "joint.jc.damping"), 0.3, 0, 0);  /* its own */
  CHECK_CLOSE(param(m, "joint.jc.stiffness"), 9, 0, 0);  /* class stiffer */
  double v = 4.0 / 3.0 * PI * 0.1 * 0.1 * 0.1;
  CHECK_CLOSE(param(m, "body.a.mass"), 500 * v, 1e-15, 0);
  CHECK_CLOSE(param(m, "body.b.mass"), 2000 * v, 1e-15, 0); /* class heavy */
  CHECK_CLOSE(param(m, "body.c.mass"), 500 * v, 1e-15, 0);  /* stiff has no geom default: main's */
  ds_artic_model_free(m);
}

static void test_angles(void) {
  dsArticModel* deg = load("degrees.xml", NULL);
  dsArticModel* rad = load("radians.xml", NULL);
  if (!deg || !rad) return;
  CHECK_CLOSE(param(deg, "joint.hinge.limit_lower"), -PI / 2, 1e-15, 0);
  CHECK_CLOSE(param(deg, "joint.hinge.limit_upper"), PI / 4, 1e-15, 0);
  CHECK_CLOSE(param(deg, "joint.hinge.rest"), PI / 6, 1e-15, 0);
  CHECK_CLOSE(param(rad, "joint.hinge.limit_lower"), -PI / 2, 1e-15, 0);
  double q0 = 0.4, qd0 = 1;
  CHECK(compare(deg, rad, &q0, &qd0, NULL, 500) < 1e-14);
  ds_artic_model_free(deg), ds_artic_model_free(rad);
}

/* Sorted principal moments of body name */
static void moments(const dsArticModel* m, const char* name, double I[3]) {
  char key[128];
  for (int k = 0; k < 3; k++) {
    snprintf(key, sizeof key, "body.%s.inertia.%c", name, "xyz"[k]);
    I[k] = param(m, key);
  }
  for (int i = 0; i < 3; i++)
    for (int j = i + 1; j < 3; j++)
      if (I[j] < I[i]) {
        double t = I[i];
        I[i] = I[j], I[j] = t;
      }
}

static void check_body(const dsArticModel* m, const char* name, double mass, double a, double b, double c) {
  double I[3], want[3] = {a, b, c};
  moments(m, name, I);
  char key[128];
  snprintf(key, sizeof key, "body.%s.mass", name);
  CHECK_CLOSE(param(m, key), mass, 1e-14, 0);
  for (int k = 0; k < 3; k++) CHECK_CLOSE(I[k], want[k], 1e-12, 0);
}

static void test_inertia_from_geoms(void) {
  dsArticModel* m = load("geoms.xml", NULL);
  if (!m) return;
  const double rho = 1000;
  double r = 0.1, ms = rho * 4.0 / 3.0 * PI * r * r * r, is = 0.4 * ms * r * r;
  check_body(m, "sphere", ms, is, is, is);
  double mb = rho * 0.2 * 0.4 * 0.6; /* full sides 0.2 0.4 0.6: I = m (b^2 + c^2) / 12 */
  check_body(m, "box", mb, mb * (0.2 * 0.2 + 0.4 * 0.4) / 12, mb * (0.2 * 0.2 + 0.6 * 0.6) / 12,
             mb * (0.4 * 0.4 + 0.6 * 0.6) / 12);
  double rc = 0.05, L = 0.4, mc = rho * PI * rc * rc * L;
  check_body(m, "cylinder", mc, mc * rc * rc / 2, mc * (3 * rc * rc + L * L) / 12, mc * (3 * rc * rc + L * L) / 12);
  /* capsule: cylinder + two hemispheres, each's centre 3r/8 past an end;
   * hemisphere about its own centre: (2/5 - 9/64) mh r^2 (= 83/320) */
  double mcy = 800 * PI * rc * rc * L, mh = 800 * 2.0 / 3.0 * PI * rc * rc * rc, dz = L / 2 + 3 * rc / 8;
  double ixx = mcy * (3 * rc * rc + L * L) / 12 + 2 * mh * (83.0 / 320 * rc * rc + dz * dz);
  double izz = mcy * rc * rc / 2 + 2 * mh * 0.4 * rc * rc;
  check_body(m, "capsule", mcy + 2 * mh, izz, ixx, ixx);
  /* the same shape along x with mass 2: inertia scales with the mass */
  double s = 2 / (rho * PI * rc * rc * L + rho * 4.0 / 3.0 * PI * rc * rc * rc);
  double ixx1 = rho * PI * rc * rc * L * (3 * rc * rc + L * L) / 12 +
                2 * rho * 2.0 / 3.0 * PI * rc * rc * rc * (83.0 / 320 * rc * rc + dz * dz);
  double izz1 = rho * PI * rc * rc * L * rc * rc / 2 + 2 * rho * 2.0 / 3.0 * PI * rc * rc * rc * 0.4 * rc * rc;
  check_body(m, "rod", 2, s * izz1, s * ixx1, s * ixx1);
  /* two spheres 0.6 apart: parallel axes */
  check_body(m, "dumbbell", 2 * ms, 2 * is, 2 * is + 2 * ms * 0.09, 2 * is + 2 * ms * 0.09);
  ds_artic_model_free(m);
}

/* q = a * b (Hamilton, w x y z) */
static void qmul(const double a[4], const double b[4], double q[4]) {
  q[0] = a[0] * b[0] - a[1] * b[1] - a[2] * b[2] - a[3] * b[3];
  q[1] = a[0] * b[1] + a[1] * b[0] + a[2] * b[3] - a[3] * b[2];
  q[2] = a[0] * b[2] - a[1] * b[3] + a[2] * b[0] + a[3] * b[1];
  q[3] = a[0] * b[3] + a[1] * b[2] - a[2] * b[1] + a[3] * b[0];
}

static dsArticModel* load_text(int urdf, const char* text, const dsArticOptions* o) {
  char err[1024];
  dsArticModel* m = NULL;
  int rc = urdf ? ds__artic_load_urdf_mem(text, strlen(text), "text", o, &m, err, sizeof err)
                : ds__artic_load_mjcf_mem(text, strlen(text), "text", o, &m, err, sizeof err);
  if (rc) fprintf(stderr, "%s\n", err);
  CHECK_INT_EQ(rc, 0);
  return m;
}

/* Rotations: MJCF euler (intrinsic x, y, z: q = qx qy qz) against the same
 * quat, and URDF rpy (fixed axes: q = qz qy qx) against that quat in MJCF,
 * on a tilted 3D pendulum whose hinge axis is off every coordinate axis */
static void test_rotations(void) {
  const double e[3] = {0.3, -0.7, 1.1};
  double qx[4] = {cos(e[0] / 2), sin(e[0] / 2), 0, 0}, qy[4] = {cos(e[1] / 2), 0, sin(e[1] / 2), 0};
  double qz[4] = {cos(e[2] / 2), 0, 0, sin(e[2] / 2)}, t[4], qe[4], qr[4];
  qmul(qx, qy, t), qmul(t, qz, qe);
  qmul(qz, qy, t), qmul(t, qx, qr);
  static const char* mj =
      "<mujoco><compiler angle='radian'/><option timestep='0.001'/><worldbody>"
      "<body name='l' pos='0.1 0.2 1' %s='%s'><joint name='h' axis='0.3 0.5 0.8' pos='0 0.1 0'/>"
      "<inertial pos='0.2 -0.1 -0.4' mass='1.3' diaginertia='0.05 0.07 0.02'/></body></worldbody></mujoco>";
  char a[1024], b[1024], c[1024], v[256];
  snprintf(v, sizeof v, "%.17g %.17g %.17g", e[0], e[1], e[2]);
  snprintf(a, sizeof a, mj, "euler", v);
  snprintf(v, sizeof v, "%.17g %.17g %.17g %.17g", qe[0], qe[1], qe[2], qe[3]);
  snprintf(b, sizeof b, mj, "quat", v);
  snprintf(v, sizeof v, "%.17g %.17g %.17g %.17g", qr[0], qr[1], qr[2], qr[3]);
  snprintf(c, sizeof c, mj, "quat", v);
  dsArticOptions o = ds_artic_default_options();
  o.dt = 0.001;
  static const char* ur =
      "<robot name='r'><link name='base'/><joint name='h' type='continuous'><parent link='base'/>"
      "<child link='l'/><origin xyz='0.1 0.2 1' rpy='%.17g %.17g %.17g'/><axis xyz='0.3 0.5 0.8'/></joint>"
      "<link name='l'><inertial><origin xyz='0.2 -0.1 -0.4'/><mass value='1.3'/>"
      "<inertia ixx='0.05' iyy='0.07' izz='0.02'/></inertial></link></robot>";
  char d[1024];
  snprintf(d, sizeof d, ur, e[0], e[1], e[2]);
  /* the URDF joint sits at the link origin: move the MJCF one there too */
  char c0[1024];
  snprintf(c0, sizeof c0, "%s", c);
  char* at = strstr(c0, " pos='0 0.1 0'");
  if (at) memmove(at, at + 14, strlen(at + 14) + 1);
  dsArticModel *me = load_text(0, a, NULL), *mq = load_text(0, b, NULL), *mr = load_text(0, c0, NULL),
               *mu = load_text(1, d, &o);
  double q0 = 0.5, qd0 = -1;
  CHECK(compare(me, mq, &q0, &qd0, NULL, 1000) < 1e-12);
  CHECK(compare(mr, mu, &q0, &qd0, NULL, 1000) < 1e-12);
  CHECK(compare(me, mr, &q0, &qd0, NULL, 1000) > 1e-3); /* the orders differ */
  ds_artic_model_free(me), ds_artic_model_free(mq), ds_artic_model_free(mr), ds_artic_model_free(mu);
}

/* A capsule along (1, 1, 1)/sqrt(3): its body's inertia is not diagonal in
 * the body frame, so the loader rotates the body to the principal axes; the
 * same body given as <inertial> with that rotation moves the same */
static void test_principal_axes(void) {
  const double r = 0.05, h = 0.3, rho = 1000;
  double mc = rho * PI * r * r * 2 * h, ms = rho * 4.0 / 3.0 * PI * r * r * r;
  double ixx = mc * (4 * h * h / 12 + r * r / 4) + ms * (0.4 * r * r + h * h + 0.75 * h * r);
  double izz = mc * r * r / 2 + ms * 0.4 * r * r;
  /* the rotation taking z to d = (1, 1, 1)/sqrt(3): about z x d by acos(d_z) */
  const double s3 = sqrt(3.0), ang = acos(1 / s3), ax = -1 / sqrt(2.0), ay = 1 / sqrt(2.0);
  double q[4] = {cos(ang / 2), sin(ang / 2) * ax, sin(ang / 2) * ay, 0};
  double L = 2 * h / s3;
  char a[1024], b[1024];
  static const char* body =
      "<mujoco><compiler angle='radian'/><option timestep='0.001'/><worldbody><body name='l' pos='0 0 1'>"
      "<joint name='h' type='ball'/>%s</body></worldbody></mujoco>";
  char part[512];
  snprintf(part, sizeof part, "<geom type='capsule' size='%.17g' fromto='0 0 0 %.17g %.17g %.17g'/>", r, L, L, L);
  snprintf(a, sizeof a, body, part);
  snprintf(part, sizeof part,
           "<inertial pos='%.17g %.17g %.17g' quat='%.17g %.17g %.17g %.17g' mass='%.17g' diaginertia='%.17g %.17g %.17g'/>",
           L / 2, L / 2, L / 2, q[0], q[1], q[2], q[3], mc + ms, ixx, ixx, izz);
  snprintf(b, sizeof b, body, part);
  dsArticModel *mg = load_text(0, a, NULL), *mi = load_text(0, b, NULL);
  if (!mg || !mi) return;
  double I[3];
  moments(mg, "l", I);
  CHECK_CLOSE(I[0], izz, 1e-10, 0);
  CHECK_CLOSE(I[1], ixx, 1e-10, 0);
  CHECK_CLOSE(I[2], ixx, 1e-10, 0);
  /* the ball's q is the body frame's rotation, which differs between the
   * two (principal frames chosen differently for equal moments): compare
   * the motion through the energy, which does not depend on the frame */
  dsArticData *da, *db;
  CHECK_INT_EQ(ds_artic_data_create(mg, 300, &da), 0);
  CHECK_INT_EQ(ds_artic_data_create(mi, 300, &db), 0);
  CHECK_INT_EQ(ds_artic_reset(mg, da, NULL, NULL), 0);
  CHECK_INT_EQ(ds_artic_reset(mi, db, NULL, NULL), 0);
  for (int t = 0; t < 300; t++) {
    CHECK_INT_EQ(ds_artic_step(mg, da, NULL), 0);
    CHECK_INT_EQ(ds_artic_step(mi, db, NULL), 0);
  }
  double ka, pa, kb, pb;
  CHECK_INT_EQ(ds_artic_energy(mg, da, ds_artic_q(da, 300), ds_artic_qd(da, 300), &ka, &pa), 0);
  CHECK_INT_EQ(ds_artic_energy(mi, db, ds_artic_q(db, 300), ds_artic_qd(db, 300), &kb, &pb), 0);
  CHECK(ka > 0.01);
  CHECK_CLOSE(ka, kb, 1e-9, 1e-12);
  CHECK_CLOSE(pa, pb, 1e-9, 1e-12);
  ds_artic_data_free(da), ds_artic_data_free(db);
  ds_artic_model_free(mg), ds_artic_model_free(mi);
}

/* URDF floating and prismatic joints, a massive root welded to the world,
 * and a collision sphere: their coordinates and parameters */
static void test_urdf_types(void) {
  static const char* ur =
      "<robot name='r'>\n"
      "<link name='base'><inertial><mass value='3'/><inertia ixx='1' iyy='1' izz='1'/></inertial></link>\n"
      "<link name='cart'><inertial><mass value='1'/><inertia ixx='0.1' iyy='0.1' izz='0.1'/></inertial></link>\n"
      "<link name='drone'><inertial><origin xyz='0 0 0.1'/><mass value='0.5'/><inertia ixx='0.01' iyy='0.02' izz='0.03'/>"
      "</inertial><collision><geometry><sphere radius='0.2'/></geometry></collision>"
      "<collision><geometry><box size='0.1 0.1 0.1'/></geometry></collision></link>\n"
      "<joint name='rail' type='prismatic'><parent link='base'/><child link='cart'/><axis xyz='1 0 0'/>"
      "<limit lower='-0.5' upper='0.75' effort='1' velocity='1'/><dynamics damping='0.3'/></joint>\n"
      "<joint name='fly' type='floating'><parent link='base'/><child link='drone'/><origin xyz='0 0 1'/></joint>\n"
      "</robot>";
  dsArticModel* m = load_text(1, ur, NULL);
  if (!m) return;
  CHECK_INT_EQ(ds_artic_nbody(m), 3);
  CHECK_INT_EQ(ds_artic_nq(m), 1 + 7);
  CHECK_INT_EQ(ds_artic_nv(m), 1 + 6);
  CHECK_CLOSE(param(m, "joint.rail.limit_lower"), -0.5, 0, 0);
  CHECK_CLOSE(param(m, "joint.rail.limit_upper"), 0.75, 0, 0);
  CHECK_CLOSE(param(m, "joint.rail.damping"), 0.3, 0, 0);
  CHECK_CLOSE(param(m, "body.drone.inertia.z"), 0.03, 0, 0);
  int qa = -1, va = -1;
  CHECK_INT_EQ(ds_artic_joint_adr(m, "base_weld", &qa, &va), 0);
  /* the drone's joint point is its link origin, 0.1 above its centre of mass */
  CHECK_CLOSE(param(m, "joint.fly.anchor_child.z"), -0.1, 0, 0);
  CHECK_CLOSE(param(m, "joint.fly.anchor_parent.z"), 1, 0, 0);
  ds_artic_model_free(m);
}

typedef struct Bad {
  int urdf;
  const char* text;
  const char* want[3]; /* substrings of the message */
} Bad;

/* Every bad input of item 7 (and the refusals of the subset): an error
 * naming the file, line and element, and no model. */
static const Bad g_bad[] = {
    /* unknown element, with a did-you-mean */
    {0, "<mujoco>\n<worldbody>\n<body name='a'>\n<jiont/>\n</body></worldbody></mujoco>",
     {"bad:4: <jiont>", "unknown element <jiont> in <body>", "did you mean 'joint'?"}},
    {0, "<mujoco>\n<wrldbody/>\n</mujoco>", {"bad:2:", "did you mean 'worldbody'?", NULL}},
    {1, "<robot name='r'>\n<link name='a'/>\n<lnk name='b'/>\n</robot>", {"bad:3: <lnk name='b'>", "did you mean 'link'?", NULL}},
    /* unknown attribute, with a did-you-mean */
    {0, "<mujoco><worldbody>\n<body name='a'>\n<joint name='j' dampng='1'/>\n<geom size='0.1'/></body></worldbody></mujoco>",
     {"bad:3: <joint name='j'>", "unknown or unsupported attribute 'dampng'", "did you mean 'damping'?"}},
    /* a joint whose bodies do not exist */
    {1,
     "<robot name='r'>\n<link name='base'/>\n<link name='arm'><inertial><mass value='1'/><inertia ixx='1' iyy='1' izz='1'/>"
     "</inertial></link>\n<joint name='j' type='continuous'>\n<parent link='bsae'/><child link='arm'/></joint>\n</robot>",
     {"bad:4: <joint name='j'>", "parent link 'bsae' does not exist", "did you mean 'base'?"}},
    {0, "<mujoco><worldbody><body name='a'><joint name='j'/><geom size='0.1'/></body></worldbody>\n<actuator>\n"
        "<motor joint='k'/></actuator></mujoco>",
     {"bad:3: <motor>", "joint 'k' does not exist", NULL}},
    /* a cycle */
    {1,
     "<robot name='r'>\n<link name='a'><inertial><mass value='1'/><inertia ixx='1' iyy='1' izz='1'/></inertial></link>\n"
     "<link name='b'><inertial><mass value='1'/><inertia ixx='1' iyy='1' izz='1'/></inertial></link>\n"
     "<joint name='ab' type='fixed'><parent link='a'/><child link='b'/></joint>\n"
     "<joint name='ba' type='fixed'><parent link='b'/><child link='a'/></joint>\n</robot>",
     {"bad:5: <joint name='ba'>", "the joints form a cycle through link 'a'", NULL}},
    /* zero or negative mass or inertia */
    {0, "<mujoco><worldbody>\n<body name='a'>\n<inertial pos='0 0 0' mass='0' diaginertia='1 1 1'/>\n</body></worldbody></mujoco>",
     {"bad:3: <inertial>", "mass 0 (expected > 0)", NULL}},
    {0, "<mujoco><worldbody>\n<body name='a'>\n<inertial pos='0 0 0' mass='1' diaginertia='1 -1 1'/>\n</body></worldbody></mujoco>",
     {"bad:3: <inertial>", "inertia[1] -1 (expected > 0)", NULL}},
    {0, "<mujoco><worldbody>\n<body name='a'>\n<joint/>\n</body></worldbody></mujoco>", {"bad:2: <body name='a'>", "no mass", NULL}},
    {1,
     "<robot name='r'>\n<link name='base'/>\n<link name='arm'>\n<inertial><mass value='-2'/><inertia ixx='1' iyy='1' izz='1'/>"
     "</inertial></link>\n<joint name='j' type='fixed'><parent link='base'/><child link='arm'/></joint>\n</robot>",
     {"bad:4: <inertial>", "mass -2 (expected > 0)", NULL}},
    {1, "<robot name='r'>\n<link name='base'/>\n<link name='arm'/>\n<joint name='j' type='fixed'><parent link='base'/>"
        "<child link='arm'/></joint>\n</robot>",
     {"bad:3: <link name='arm'>", "no <inertial>", NULL}},
    /* an axis of length zero */
    {0, "<mujoco><worldbody>\n<body name='a'>\n<joint axis='0 0 0'/>\n<geom size='0.1'/></body></worldbody></mujoco>",
     {"bad:3: <joint>", "axis 0 0 0 has length zero", NULL}},
    {1,
     "<robot name='r'>\n<link name='base'/>\n<link name='arm'><inertial><mass value='1'/><inertia ixx='1' iyy='1' izz='1'/>"
     "</inertial></link>\n<joint name='j' type='continuous'><parent link='base'/><child link='arm'/>\n<axis xyz='0 0 0'/>"
     "</joint>\n</robot>",
     {"bad:5: <axis>", "length zero", NULL}},
    /* lower > upper */
    {0, "<mujoco><compiler angle='radian'/><worldbody>\n<body name='a'>\n<joint name='j' range='1 -1'/>\n<geom size='0.1'/>"
        "</body></worldbody></mujoco>",
     {"bad:3: <joint name='j'>", "range 1 -1 (expected lower <= upper)", NULL}},
    {1,
     "<robot name='r'>\n<link name='base'/>\n<link name='arm'><inertial><mass value='1'/><inertia ixx='1' iyy='1' izz='1'/>"
     "</inertial></link>\n<joint name='j' type='revolute'><parent link='base'/><child link='arm'/>\n"
     "<limit lower='1' upper='0.5'/></joint>\n</robot>",
     {"bad:5: <limit>", "lower 1 > upper 0.5", NULL}},
    /* principal moments that no rigid body has (a + b < c): MuJoCo refuses them, the loaders did not */
    {0, "<mujoco><worldbody>\n<body name='a'>\n<joint/><inertial pos='0 0 0' mass='1' diaginertia='1 1 5'/>\n</body>"
        "</worldbody></mujoco>",
     {"bad:3: <inertial>", "diaginertia 1 1 5: Izz 5 > Ixx + Iyy = 2", "expected each moment <= the sum"}},
    {1,
     "<robot name='r'>\n<link name='base'/>\n<link name='arm'><inertial><mass value='1'/>\n<inertia ixx='4' iyy='1' "
     "izz='2'/></inertial></link>\n<joint name='j' type='fixed'><parent link='base'/><child link='arm'/></joint>\n</robot>",
     {"bad:4: <inertia>", "Ixx 4 > Iyy + Izz = 3", NULL}},
    /* the same item 7 cases in the other places they can occur (these were refused already) */
    {1,
     "<robot name='r'>\n<link name='base'/>\n<link name='arm'><inertial><mass value='1'/><inertia ixx='1' iyy='1' izz='1'/>"
     "</inertial></link>\n<joint name='j' type='continuous'>\n<parent link='base'/><child link='amr'/></joint>\n</robot>",
     {"bad:4: <joint name='j'>", "child link 'amr' does not exist", "did you mean 'arm'?"}},
    {1,
     "<robot name='r'>\n<link name='base'/>\n<link name='arm'><inertial><mass value='1'/><inertia ixx='1' iyy='1' izz='1'/>"
     "</inertial></link>\n<joint name='j' type='continuous'>\n<parent link='arm'/><child link='arm'/></joint>\n</robot>",
     {"bad:4: <joint name='j'>", "link 'arm' is its own parent", NULL}},
    {0, "<mujoco><worldbody>\n<body name='a'>\n<joint/><inertial pos='0 0 0' mass='1' diaginertia='0 1 1'/>\n</body>"
        "</worldbody></mujoco>",
     {"bad:3: <inertial>", "inertia[0] 0 (expected > 0)", NULL}},
    {1,
     "<robot name='r'>\n<link name='base'/>\n<link name='arm'><inertial><mass value='1'/>\n<inertia ixx='1' iyy='1' "
     "izz='0'/></inertial></link>\n<joint name='j' type='fixed'><parent link='base'/><child link='arm'/></joint>\n</robot>",
     {"bad:3: <inertial>", "inertia[2] 0 (expected > 0)", NULL}},
    {0, "<mujoco><worldbody>\n<body name='a'>\n<joint/>\n<geom size='0.1' mass='-1'/>\n</body></worldbody></mujoco>",
     {"bad:4: <geom>", "mass -1 (expected >= 0)", NULL}},
    {0, "<mujoco><default><joint axis='0 0 0'/></default><worldbody>\n<body name='a'>\n<joint type='slide'/>\n"
        "<geom size='0.1'/></body></worldbody></mujoco>",
     {"bad:3: <joint>", "axis 0 0 0 has length zero", NULL}},
    {0, "<mujoco><worldbody>\n<body name='a'>\n<joint type='slide' range='1 0'/>\n<geom size='0.1'/></body></worldbody>"
        "</mujoco>",
     {"bad:3: <joint>", "range 1 0 (expected lower <= upper)", NULL}},
    {1,
     "<robot name='r'>\n<link name='base'/>\n<link name='arm'><inertial><mass value='1'/><inertia ixx='1' iyy='1' izz='1'/>"
     "</inertial></link>\n<joint name='j' type='prismatic'><parent link='base'/><child link='arm'/>\n"
     "<limit lower='2' upper='1'/></joint>\n</robot>",
     {"bad:5: <limit>", "lower 2 > upper 1", NULL}},
    {0, "<mujoco><worldbody><body name='a'><joint name='j'/><geom size='0.1'/></body></worldbody>\n<actuator>\n"
        "<motr joint='j'/></actuator></mujoco>",
     {"bad:3: <motr>", "unknown element <motr> in <actuator>", "did you mean 'motor'?"}},
    {0, "<mujoco><default>\n<jont damping='1'/></default><worldbody><body name='a'><joint/><geom size='0.1'/></body>"
        "</worldbody></mujoco>",
     {"bad:2: <jont>", "did you mean 'joint'?", NULL}},
    {1,
     "<robot name='r'>\n<link name='base'/>\n<link name='arm'><inertial><mass value='1'/><inertia ixx='1' iyy='1' izz='1'/>"
     "</inertial></link>\n<joint name='j' type='revolut'><parent link='base'/><child link='arm'/></joint>\n</robot>",
     {"bad:4: <joint name='j'>", "joint type 'revolut'", "did you mean 'revolute'?"}},
    {1,
     "<robot name='r'>\n<link name='base'/>\n<link name='arm'><inertial><mass value='1'/><inertia ixx='1' iyy='1' izz='1'/>"
     "</inertial></link>\n<joint name='j' type='continuous'><parent link='base'/><child link='arm'/>\n<axs xyz='0 0 1'/>"
     "</joint>\n</robot>",
     {"bad:5: <axs>", "unknown element <axs> in <joint>", "did you mean 'axis'?"}},
    /* refusals of the subset */
    {0, "<mujoco><worldbody>\n<body name='a'>\n<geom type='mesh' mesh='m'/></body></worldbody></mujoco>",
     {"bad:3: <geom>", "not supported", NULL}},
    {1,
     "<robot name='r'>\n<link name='base'/>\n<link name='arm'><inertial><mass value='1'/><inertia ixx='1' iyy='1' izz='1'/>"
     "</inertial>\n<collision><geometry>\n<mesh filename='arm.stl'/></geometry></collision></link>\n"
     "<joint name='j' type='fixed'><parent link='base'/><child link='arm'/></joint>\n</robot>",
     {"bad:5: <mesh>", "mesh collision geometry is not supported yet", NULL}},
    {1,
     "<robot name='r'>\n<link name='base'/>\n<link name='arm'><inertial><mass value='1'/>\n<inertia ixx='1' iyy='1' izz='1' "
     "ixy='0.1'/></inertial></link>\n<joint name='j' type='fixed'><parent link='base'/><child link='arm'/></joint>\n</robot>",
     {"bad:4: <inertia>", "ixy 0.1: off-diagonal inertia is not supported", NULL}},
    {0, "<mujoco><worldbody>\n<body name='a'>\n<joint/>\n<joint/>\n<geom size='0.1'/></body></worldbody></mujoco>",
     {"bad:4: <joint>", "a second joint in one body", NULL}},
    {0, "<mujoco><worldbody>\n<body childclass='nope'/></worldbody></mujoco>", {"bad:2: <body>", "not a <default> class", NULL}},
    {0, "<mujoco><worldbody>\n<body>\n<geom size='0.1' pos='0 0'/></body></worldbody></mujoco>",
     {"bad:3: <geom>", "pos=\"0 0\" (expected 3 finite numbers)", NULL}},
    /* not XML, and no DOCTYPE (no entity can be declared, let alone expanded) */
    {0, "<mujoco>\n<worldbody>\n</mujoco>", {"bad:3: not well-formed XML", NULL, NULL}},
    {0, "<!DOCTYPE m [<!ENTITY x SYSTEM 'file:///etc/passwd'>]>\n<mujoco model='&x;'/>", {"bad:2: not well-formed XML", NULL, NULL}},
    {0, "<!DOCTYPE m [<!ENTITY a 'aaaaaaaa'><!ENTITY b '&a;&a;&a;&a;&a;&a;&a;&a;'>]>\n<mujoco><worldbody>&b;</worldbody></mujoco>",
     {"bad: a <!DOCTYPE> is not accepted", NULL, NULL}},
    {1, "<mujoco/>", {"bad:1: <mujoco>", "expected <robot> (URDF)", NULL}},
};

static void test_bad_inputs(void) {
  char err[1024];
  dsArticModel* m = NULL;
  for (size_t i = 0; i < sizeof g_bad / sizeof g_bad[0]; i++) {
    const Bad* t = &g_bad[i];
    err[0] = 0;
    m = (dsArticModel*)&err; /* must come back NULL */
    int rc = t->urdf ? ds__artic_load_urdf_mem(t->text, strlen(t->text), "bad", NULL, &m, err, sizeof err)
                     : ds__artic_load_mjcf_mem(t->text, strlen(t->text), "bad", NULL, &m, err, sizeof err);
    CHECK(rc < 0);
    CHECK(m == NULL);
    for (int k = 0; k < 3 && t->want[k]; k++) CHECK_STR_CONTAINS(err, t->want[k]);
    if (getenv("DS_VERBOSE")) fprintf(stderr, "case %zu: %s\n", i, err);
  }
  /* a line past 65535 is named as it is */
  size_t nl = 70000, len = nl + 64;
  char* big = malloc(len);
  if (big) {
    snprintf(big, len, "<mujoco>");
    memset(big + 8, '\n', nl);
    snprintf(big + 8 + nl, len - 8 - nl, "<jiont/></mujoco>");
    CHECK_INT_EQ(ds__artic_load_mjcf_mem(big, strlen(big), "bad", NULL, &m, err, sizeof err), DS_ERR_INVALID);
    CHECK_STR_CONTAINS(err, "bad:70001: <jiont>");
    free(big);
  }
  /* from a file: the path names it */
  CHECK_INT_EQ(ds_artic_load(data("missing.xml"), NULL, &m, err, sizeof err), DS_ERR_IO);
  CHECK_STR_CONTAINS(err, "missing.xml");
  CHECK_INT_EQ(ds__artic_load_mjcf_mem("<mujoco/>", DS_MODEL_FILE_MAX + 1, "big", NULL, &m, err, sizeof err), DS_ERR_RANGE);
  CHECK(m == NULL);
}

/* The bundled runner (configs/models/runner.xml): its size and named
 * parameters, standing still on the ground unactuated, and walking forward
 * under the sinusoidal torques its comment gives. */
static void test_runner(void) {
  const char* src = getenv("DS_SRCDIR");
  char path[1024], err[1024];
  snprintf(path, sizeof path, "%s/configs/models/runner.xml", src ? src : ".");
  dsArticOptions o = ds_artic_default_options();
  o.ground = 1;
  dsArticModel* m = NULL;
  int rc = ds_artic_load_mjcf(path, &o, &m, err, sizeof err);
  if (rc) fprintf(stderr, "runner.xml: %s\n", err);
  CHECK_INT_EQ(rc, 0);
  if (!m) return;
  CHECK_INT_EQ(ds_artic_nq(m), 9);
  CHECK_INT_EQ(ds_artic_nv(m), 9);
  CHECK_INT_EQ(ds_artic_nu(m), 6);
  CHECK_INT_EQ(ds_artic_nbody(m), 9);
  CHECK_CLOSE(ds_artic_dt(m), 1e-3, 0, 0);
  /* a 1 m capsule of radius 5 cm at 1000 kg/m^3: pi r^2 (l + 4r/3) rho */
  CHECK_CLOSE(param(m, "body.torso.mass"), PI * 0.0025 * (1 + 4 * 0.05 / 3) * 1000, 1e-12, 0);
  CHECK_CLOSE(param(m, "joint.bknee.stiffness"), 60, 0, 0);
  CHECK_CLOSE(param(m, "joint.fhip.damping"), 1, 0, 0);
  CHECK_CLOSE(param(m, "joint.bankle.limit_lower"), -0.8, 0, 0);
  CHECK_CLOSE(param(m, "joint.rootx.damping"), 0, 0, 0);
  CHECK_CLOSE(param(m, "actuator.fhip.gear"), 60, 0, 0);
  CHECK_CLOSE(param(m, "actuator.bankle.gear"), 20, 0, 0);
  CHECK_CLOSE(param(m, "contact.ke"), o.contact_ke, 0, 0);
  int qx, qz, qp, va;
  CHECK_INT_EQ(ds_artic_joint_adr(m, "rootx", &qx, &va), 0);
  CHECK_INT_EQ(ds_artic_joint_adr(m, "rootz", &qz, &va), 0);
  CHECK_INT_EQ(ds_artic_joint_adr(m, "pitch", &qp, &va), 0);
  enum { T = 3000 };
  dsArticData* d;
  CHECK_INT_EQ(ds_artic_data_create(m, T, &d), 0);
  /* unactuated: it settles onto its feet (1 cm above the ground, sinking a
   * few mm into the penalty contact) and stays there */
  CHECK_INT_EQ(ds_artic_reset(m, d, NULL, NULL), 0);
  for (int t = 0; t < 2000; t++) CHECK_INT_EQ(ds_artic_step(m, d, NULL), 0);
  const double* q = ds_artic_q(d, 2000);
  CHECK(q[qz] > -0.02 && q[qz] < -0.005);
  CHECK(fabs(q[qx]) < 0.01 && fabs(q[qp]) < 0.01);
  CHECK(fabs(ds_artic_qd(d, 2000)[qz]) < 1e-3);
  /* 3 Hz torques: forward, upright */
  CHECK_INT_EQ(ds_artic_reset(m, d, NULL, NULL), 0);
  double lowest = 0, tilt = 0;
  for (int t = 0; t < T; t++) {
    const double w = 2 * PI * 3 * t * 1e-3, back = sin(w), lag = sin(w + 1.5 * PI);
    const double u[6] = {back, lag, lag, -back, -lag, -lag};
    CHECK_INT_EQ(ds_artic_step(m, d, u), 0);
    q = ds_artic_q(d, t + 1);
    lowest = fmin(lowest, q[qz]), tilt = fmax(tilt, fabs(q[qp]));
  }
  if (getenv("DS_VERBOSE")) fprintf(stderr, "runner: x %g, lowest %g, tilt %g\n", q[qx], lowest, tilt);
  CHECK(q[qx] > 0.5);
  CHECK(lowest > -0.2 && tilt < 0.3);
  ds_artic_data_free(d);
  ds_artic_model_free(m);
}

int main(void) {
  char err[512];
  dsArticModel* m = NULL;
  if (ds_artic_load(data("pendulum.xml"), NULL, &m, err, sizeof err) == DS_ERR_UNSUPPORTED)
    DST_SKIP("built without libxml2: %s", err);
  ds_artic_model_free(m);
  test_pendulum();
  test_double_pendulum();
  test_chain3d();
  test_defaults();
  test_angles();
  test_inertia_from_geoms();
  test_rotations();
  test_principal_axes();
  test_urdf_types();
  test_bad_inputs();
  test_runner();
  return DST_RESULT();
}

/* Articulated bodies (engine/artic.c): the adjoint against central
 * differences of a loss on every state of 1- and 300+-step rollouts, with
 * respect to q0, qd0, the actions and every named parameter, per joint type
 * (hinge, slide, ball, fixed, free), at limits, in and out of ground
 * contact; a pendulum's small-angle period; a double pendulum's energy
 * drift and its halving with dt; momentum of a free-floating chain;
 * determinism; and every refused input with its message. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsim/artic.h"
#include "engine/artic_priv.h"
#include "tests/dstest.h"

#ifdef _OPENMP
#include <omp.h>
#endif

/* ---- model helpers ---------------------------------------------------------------- */

static void body(dsArticBuilder* b, const char* name, double mass, double ix, double iy, double iz) {
  dsArticBodyDef d = ds_artic_default_body_def();
  d.name = name;
  d.mass = mass;
  d.inertia[0] = ix;
  d.inertia[1] = iy;
  d.inertia[2] = iz;
  CHECK_INT_EQ(ds_artic_add_body(b, &d), 0);
}

static dsArticJointDef jdef(const char* name, dsJointType t, const char* parent, const char* child) {
  dsArticJointDef j = ds_artic_default_joint_def();
  j.name = name;
  j.type = t;
  j.parent = parent;
  j.child = child;
  return j;
}

static void set3(double v[3], double x, double y, double z) {
  v[0] = x;
  v[1] = y;
  v[2] = z;
}

static dsArticModel* build(dsArticBuilder* b, const dsArticOptions* o) {
  dsArticModel* m = NULL;
  int rc = ds_artic_build(b, o, &m);
  if (rc) DST_FAIL_AT("build: %d %s", rc, ds_artic_builder_error(b));
  ds_artic_builder_free(b);
  return m;
}

/* A hinge pendulum near its upper limit, with a spring, damping, armature,
 * a motor and a servo on the same joint. */
static dsArticModel* model_hinge(void) {
  dsArticBuilder* b;
  ds_artic_builder_create(&b);
  body(b, "link", 1.3, 0.02, 0.03, 0.01);
  dsArticJointDef j = jdef("hinge", DS_JOINT_HINGE, NULL, "link");
  set3(j.axis, 0.2, 1, 0.1);
  set3(j.anchor_parent, 0, 0, 1);
  set3(j.anchor_child, 0.05, 0, 0.5);
  j.damping = 0.05;
  j.armature = 0.01;
  j.stiffness = 2;
  j.rest = 0.1;
  j.limited = 1;
  j.limit_lower = -0.3;
  j.limit_upper = 0.4;
  j.limit_stiffness = 50;
  j.limit_damping = 0.5;
  j.limit_width = 0.02;
  CHECK_INT_EQ(ds_artic_add_joint(b, &j), 0);
  dsArticActuatorDef a = ds_artic_default_actuator_def();
  a.name = "motor";
  a.joint = "hinge";
  a.gear = 0.7;
  a.ctrl_limit = 2;
  CHECK_INT_EQ(ds_artic_add_actuator(b, &a), 0);
  a.name = "servo";
  a.type = DS_ARTIC_SERVO;
  a.kp = 3;
  a.kv = 0.2;
  a.force_limit = 1.5;
  CHECK_INT_EQ(ds_artic_add_actuator(b, &a), 0);
  dsArticOptions o = ds_artic_default_options();
  o.dt = 2e-3;
  return build(b, &o);
}

/* A vertical slider on a spring between limits carrying a hinged pole. */
static dsArticModel* model_slide(void) {
  dsArticBuilder* b;
  ds_artic_builder_create(&b);
  body(b, "cart", 2, 0.05, 0.04, 0.03);
  body(b, "pole", 0.5, 0.02, 0.02, 0.001);
  dsArticJointDef j = jdef("slider", DS_JOINT_SLIDE, "world", "cart");
  set3(j.axis, 0, 0.3, 1);
  j.damping = 0.3;
  j.armature = 0.05;
  j.stiffness = 40;
  j.rest = -0.1;
  j.limited = 1;
  j.limit_lower = -0.2;
  j.limit_upper = 0.1;
  j.limit_stiffness = 200;
  j.limit_width = 0.01;
  CHECK_INT_EQ(ds_artic_add_joint(b, &j), 0);
  j = jdef("pole_hinge", DS_JOINT_HINGE, "cart", "pole");
  set3(j.axis, 1, 0, 0);
  set3(j.anchor_parent, 0.1, 0, 0.05);
  set3(j.anchor_child, 0, 0, -0.3);
  j.damping = 0.01;
  j.quat[0] = 0.9;
  j.quat[3] = 0.3;
  CHECK_INT_EQ(ds_artic_add_joint(b, &j), 0);
  dsArticActuatorDef a = ds_artic_default_actuator_def();
  a.name = "lift";
  a.joint = "slider";
  a.type = DS_ARTIC_SERVO;
  a.kp = 50;
  a.kv = 2;
  CHECK_INT_EQ(ds_artic_add_actuator(b, &a), 0);
  a = ds_artic_default_actuator_def();
  a.name = "swing";
  a.joint = "pole_hinge";
  a.gear = 0.3;
  CHECK_INT_EQ(ds_artic_add_actuator(b, &a), 0);
  dsArticOptions o = ds_artic_default_options();
  o.dt = 2e-3;
  return build(b, &o);
}

/* A spherical pendulum carrying a hinged link with a welded (fixed) weight. */
static dsArticModel* model_ball(void) {
  dsArticBuilder* b;
  ds_artic_builder_create(&b);
  body(b, "bob", 1, 0.01, 0.012, 0.008);
  body(b, "arm", 0.4, 0.004, 0.005, 0.002);
  body(b, "weight", 0.2, 0.001, 0.001, 0.001);
  dsArticJointDef j = jdef("ball", DS_JOINT_BALL, NULL, "bob");
  set3(j.anchor_parent, 0, 0, 1);
  set3(j.anchor_child, 0.1, 0, 0.4);
  j.damping = 0.02;
  j.armature = 0.001;
  CHECK_INT_EQ(ds_artic_add_joint(b, &j), 0);
  j = jdef("elbow", DS_JOINT_HINGE, "bob", "arm");
  set3(j.axis, 0, 1, 0);
  set3(j.anchor_parent, 0, 0, -0.1);
  set3(j.anchor_child, 0, 0, 0.2);
  CHECK_INT_EQ(ds_artic_add_joint(b, &j), 0);
  j = jdef("weld", DS_JOINT_FIXED, "arm", "weight");
  set3(j.anchor_parent, 0, 0.05, -0.2);
  set3(j.anchor_child, -0.02, 0, 0.03);
  j.quat[0] = 0.8;
  j.quat[1] = 0.6;
  CHECK_INT_EQ(ds_artic_add_joint(b, &j), 0);
  dsArticActuatorDef a = ds_artic_default_actuator_def();
  a.name = "elbow_motor";
  a.joint = "elbow";
  CHECK_INT_EQ(ds_artic_add_actuator(b, &a), 0);
  dsArticOptions o = ds_artic_default_options();
  o.dt = 2e-3;
  return build(b, &o);
}

/* A free body with a capsule and a hinged link with a sphere, over the
 * ground. */
static dsArticModel* model_free(double gz, int ground) {
  dsArticBuilder* b;
  ds_artic_builder_create(&b);
  body(b, "torso", 1.5, 0.02, 0.05, 0.06);
  body(b, "leg", 0.3, 0.003, 0.003, 0.0005);
  body(b, "foot", 0.2, 0.001, 0.002, 0.001);
  dsArticJointDef j = jdef("root", DS_JOINT_FREE, NULL, "torso");
  j.damping = 0.001;
  CHECK_INT_EQ(ds_artic_add_joint(b, &j), 0);
  j = jdef("hip", DS_JOINT_HINGE, "torso", "leg");
  set3(j.axis, 0, 1, 0);
  set3(j.anchor_parent, 0.15, 0, -0.02);
  set3(j.anchor_child, 0, 0, 0.12);
  j.damping = 0.02;
  j.stiffness = 0.5;
  CHECK_INT_EQ(ds_artic_add_joint(b, &j), 0);
  j = jdef("ankle", DS_JOINT_BALL, "leg", "foot");
  set3(j.anchor_parent, 0, 0, -0.12);
  set3(j.anchor_child, -0.03, 0, 0.02);
  j.damping = 0.005;
  CHECK_INT_EQ(ds_artic_add_joint(b, &j), 0);
  dsArticGeomDef g = ds_artic_default_geom_def();
  g.body = "torso";
  g.type = DS_ARTIC_CAPSULE;
  set3(g.pos, -0.2, 0, 0);
  set3(g.pos2, 0.2, 0, 0);
  g.radius = 0.04;
  CHECK_INT_EQ(ds_artic_add_geom(b, &g), 0);
  g = ds_artic_default_geom_def();
  g.body = "leg";
  set3(g.pos, 0, 0, -0.12);
  g.radius = 0.03;
  CHECK_INT_EQ(ds_artic_add_geom(b, &g), 0);
  dsArticActuatorDef a = ds_artic_default_actuator_def();
  a.name = "hip_servo";
  a.joint = "hip";
  a.type = DS_ARTIC_SERVO;
  a.kp = 5;
  a.kv = 0.1;
  a.force_limit = 3;
  CHECK_INT_EQ(ds_artic_add_actuator(b, &a), 0);
  dsArticOptions o = ds_artic_default_options();
  o.gravity[2] = gz;
  o.ground = ground;
  return build(b, &o);
}

/* ---- gradient check ---------------------------------------------------------------------- */

static unsigned long long rng_state = 12345;
static double urand(void) { /* [-1, 1) */
  rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
  return (double)(rng_state >> 11) / 9007199254740992.0 * 2 - 1;
}

typedef struct {
  const char* label;
  dsArticModel* m;
  int T;
  double *q0, *qd0, *act, *wq, *wv; /* loss L = sum_k wq_k . q_k + wv_k . qd_k + 1/2 |qd_T|^2 */
} Case;

static double rollout(const Case* c, dsArticData* d) {
  const dsArticModel* m = c->m;
  const int nq = ds_artic_nq(m), nv = ds_artic_nv(m), nu = ds_artic_nu(m);
  if (ds_artic_reset(m, d, c->q0, c->qd0)) return NAN;
  for (int t = 0; t < c->T; t++)
    if (ds_artic_step(m, d, c->act + (size_t)t * nu)) return NAN;
  double L = 0;
  for (int t = 0; t <= c->T; t++) {
    const double *q = ds_artic_q(d, t), *qd = ds_artic_qd(d, t);
    for (int k = 0; k < nq; k++) L += c->wq[(size_t)t * nq + k] * q[k];
    for (int k = 0; k < nv; k++) L += c->wv[(size_t)t * nv + k] * qd[k];
  }
  const double* qd = ds_artic_qd(d, c->T);
  for (int k = 0; k < nv; k++) L += 0.5 * qd[k] * qd[k];
  return L;
}

/* Central difference of the rollout loss in *x. */
static double cdiff(const Case* c, dsArticData* d, double* x, double eps) {
  const double x0 = *x;
  *x = x0 + eps;
  const double lp = rollout(c, d);
  *x = x0 - eps;
  const double lm = rollout(c, d);
  *x = x0;
  return (lp - lm) / (2 * eps);
}

static int ngrad_fail;
/* q[watch] over the first rollout of gradcheck: shows that a case reaches
 * the limit or the ground it claims to. */
static int watch = -1;
static double watch_min, watch_max;

static void compare(const char* label, const char* what, double a, double f, double scale, double rtol) {
  const double mx = fabs(a) > fabs(f) ? fabs(a) : fabs(f);
  dst_checks++;
  if (!(fabs(a - f) <= rtol * mx + 1e-6 * scale)) {
    ngrad_fail++;
    DST_FAIL_AT("%s: dL/d%s adjoint %.10g vs central difference %.10g", label, what, a, f);
  }
}

/* Adjoint vs central differences for every q0, qd0 and parameter entry and
 * every action entry of steps t with t % astride == 0. */
static void gradcheck(Case* c, double eps, double rtol, int astride) {
  dsArticModel* m = c->m;
  const int nq = ds_artic_nq(m), nv = ds_artic_nv(m), nu = ds_artic_nu(m), np = ds_artic_nparam(m);
  const int T = c->T;
  dsArticData* d;
  CHECK_INT_EQ(ds_artic_data_create(m, T, &d), 0);
  double* gq = calloc((size_t)nq, sizeof(double));
  double* gv = calloc((size_t)nv, sizeof(double));
  double* ga = calloc((size_t)T * nu + 1, sizeof(double));
  double* gp = calloc((size_t)np, sizeof(double));
  double* dv = calloc((size_t)(T + 1) * nv, sizeof(double));
  const double L = rollout(c, d);
  CHECK(isfinite(L));
  if (watch >= 0) {
    watch_min = 1e300;
    watch_max = -1e300;
    for (int t = 0; t <= T; t++) {
      watch_min = fmin(watch_min, ds_artic_q(d, t)[watch]);
      watch_max = fmax(watch_max, ds_artic_q(d, t)[watch]);
    }
  }
  memcpy(dv, c->wv, sizeof(double) * (size_t)(T + 1) * nv);
  const double* qdT = ds_artic_qd(d, T);
  for (int k = 0; k < nv; k++) dv[(size_t)T * nv + k] += qdT[k];
  dsArticGrad g = {gq, gv, ga, gp};
  CHECK_INT_EQ(ds_artic_backward(m, d, c->wq, dv, &g), 0);
  double scale = 0;
  for (int k = 0; k < nq; k++) scale = fmax(scale, fabs(gq[k]));
  for (int k = 0; k < nv; k++) scale = fmax(scale, fabs(gv[k]));
  char what[160];
  for (int k = 0; k < nq; k++) {
    snprintf(what, sizeof what, "q0[%d]", k);
    compare(c->label, what, gq[k], cdiff(c, d, &c->q0[k], eps), scale, rtol);
  }
  for (int k = 0; k < nv; k++) {
    snprintf(what, sizeof what, "qd0[%d]", k);
    compare(c->label, what, gv[k], cdiff(c, d, &c->qd0[k], eps), scale, rtol);
  }
  for (int t = 0; t < T; t += astride)
    for (int a = 0; a < nu; a++) {
      snprintf(what, sizeof what, "action[%d][%d]", t, a);
      compare(c->label, what, ga[(size_t)t * nu + a], cdiff(c, d, &c->act[(size_t)t * nu + a], eps), scale, rtol);
    }
  for (int p = 0; p < np; p++) {
    const double e = eps * fmax(1, fabs(m->param[p]));
    snprintf(what, sizeof what, "%s", ds_artic_param_name(m, p));
    compare(c->label, what, gp[p], cdiff(c, d, &m->param[p], e), scale, rtol);
  }
  /* the reverse pass against the forward tangents (both exact: agree to rounding) */
  {
    double* tq = calloc((size_t)nq, sizeof(double));
    double* tv = calloc((size_t)nv, sizeof(double));
    double* ta = calloc((size_t)T * nu + 1, sizeof(double));
    double* tp = calloc((size_t)np, sizeof(double));
    dsArticGrad gt = {tq, tv, ta, tp};
    rollout(c, d); /* the tape of the unperturbed inputs again */
    CHECK_INT_EQ(ds__artic_backward_tangent(m, d, c->wq, dv, &gt), 0);
    double worst = 0, big = 0;
    const double* pairs[4][2] = {{gq, tq}, {gv, tv}, {ga, ta}, {gp, tp}};
    const int len[4] = {nq, nv, T * nu, np};
    for (int s = 0; s < 4; s++)
      for (int k = 0; k < len[s]; k++) {
        worst = fmax(worst, fabs(pairs[s][0][k] - pairs[s][1][k]));
        big = fmax(big, fabs(pairs[s][1][k]));
      }
    fprintf(stderr, "%s: reverse vs tangents %.3g relative\n", c->label, worst / big);
    if (!(worst <= 1e-9 * big))
      DST_FAIL_AT("%s: reverse vs tangents differ by %.3g (largest entry %.3g)", c->label, worst, big);
    dst_checks++;
    free(tq);
    free(tv);
    free(ta);
    free(tp);
  }
  /* NULL arrays skip their sweeps and leave the others unchanged; without
   * the parameters' array the reverse pass skips the parameter-only terms,
   * which must not touch the state and action gradients (bit for bit) */
  double gq2[32];
  double* ga2 = malloc(sizeof(double) * (size_t)(T * nu + 1));
  dsArticGrad g2 = {gq2, NULL, ga2, NULL};
  rollout(c, d);
  CHECK_INT_EQ(ds_artic_backward(m, d, c->wq, dv, &g2), 0);
  CHECK(memcmp(gq2, gq, sizeof(double) * (size_t)nq) == 0);
  CHECK(memcmp(ga2, ga, sizeof(double) * (size_t)(T * nu)) == 0);
  free(ga2);
  free(gq);
  free(gv);
  free(ga);
  free(gp);
  free(dv);
  ds_artic_data_free(d);
}

/* A case over m for T steps from (q0, qd0) with random actions of size
 * amp and random loss weights. */
static Case make_case(const char* label, dsArticModel* m, int T, const double* q0, const double* qd0, double amp) {
  Case c = {label, m, T, NULL, NULL, NULL, NULL, NULL};
  const int nq = ds_artic_nq(m), nv = ds_artic_nv(m), nu = ds_artic_nu(m);
  c.q0 = malloc(sizeof(double) * (size_t)nq);
  c.qd0 = malloc(sizeof(double) * (size_t)nv);
  c.act = malloc(sizeof(double) * ((size_t)T * nu + 1));
  c.wq = malloc(sizeof(double) * (size_t)(T + 1) * nq);
  c.wv = malloc(sizeof(double) * (size_t)(T + 1) * nv);
  memcpy(c.q0, q0, sizeof(double) * (size_t)nq);
  memcpy(c.qd0, qd0, sizeof(double) * (size_t)nv);
  for (int k = 0; k < T * nu; k++) c.act[k] = amp * urand();
  for (int k = 0; k < (T + 1) * nq; k++) c.wq[k] = urand() / (T + 1);
  for (int k = 0; k < (T + 1) * nv; k++) c.wv[k] = urand() / (T + 1);
  return c;
}

static void free_case(Case* c) {
  free(c->q0);
  free(c->qd0);
  free(c->act);
  free(c->wq);
  free(c->wv);
}

static void run_grad(const char* label, dsArticModel* m, int T, const double* q0, const double* qd0, double amp,
                     double eps, double rtol, int astride) {
  Case c = make_case(label, m, T, q0, qd0, amp);
  gradcheck(&c, eps, rtol, astride);
  free_case(&c);
}

static void test_gradients(void) {
  dsArticModel* m = model_hinge();
  {
    const double q0[1] = {0.38}, qd0[1] = {1.5}; /* runs into the upper limit */
    run_grad("hinge 1 step", m, 1, q0, qd0, 1.0, 1e-6, 1e-6, 1);
    watch = 0;
    run_grad("hinge at limit, 300 steps", m, 300, q0, qd0, 1.0, 1e-6, 1e-5, 7);
    CHECK(watch_max > 0.41);                       /* past the upper limit 0.4 */
    const double q1[1] = {-0.31}, qd1[1] = {-0.2}; /* past the lower limit */
    run_grad("hinge past lower limit, 1 step", m, 1, q1, qd1, 1.0, 1e-6, 1e-6, 1);
  }
  ds_artic_model_free(m);
  m = model_slide();
  {
    const double q0[2] = {0.08, 0.3}, qd0[2] = {1.5, -1};
    watch = -1;
    run_grad("slide 1 step", m, 1, q0, qd0, 1.0, 1e-6, 1e-6, 1);
    watch = 0;
    run_grad("slide at limits, 320 steps", m, 320, q0, qd0, 0.5, 1e-6, 1e-5, 9);
    fprintf(stderr, "slide: q %.3f .. %.3f m\n", watch_min, watch_max);
    CHECK(watch_max > 0.105 && watch_min < -0.2); /* past both limits */
  }
  ds_artic_model_free(m);
  m = model_ball();
  {
    const double s = sin(0.2), c = cos(0.2);
    const double q0[5] = {c, 0.6 * s, 0.8 * s, 0, 0.4}, qd0[4] = {0.5, -1, 2, 0.3};
    watch = -1;
    run_grad("ball+fixed 1 step", m, 1, q0, qd0, 1.0, 1e-6, 1e-6, 1);
    run_grad("ball+fixed 300 steps", m, 300, q0, qd0, 0.2, 1e-6, 1e-5, 11);
  }
  ds_artic_model_free(m);
  m = model_free(-9.81, 1);
  if (sizeof(dsReal) != sizeof(double)) /* the ground kernels run in dsReal (--enable-single) */
    fprintf(stderr, "dsReal is float: the contact gradient cases are skipped\n");
  else {
    const double s = sin(0.15), c = cos(0.15);
    /* in the air: 1 step */
    const double qa[12] = {0.1, -0.2, 1.0, c, s * 0.3, s * 0.9, s * 0.3, 0.2, 1, 0, 0, 0};
    const double va[10] = {0.3, 0.1, -0.5, 0.4, -0.3, 0.8, 1, 0.5, -0.2, 0.1};
    run_grad("free out of contact, 1 step", m, 1, qa, va, 0.5, 1e-6, 1e-6, 1);
    /* sliding on the ground: 1 step (the capsule's ends and the leg's sphere in contact) */
    const double qb[12] = {0, 0, 0.035, 1, 0, 0, 0, 1.57, 1, 0, 0, 0};
    const double vb[10] = {1.0, 0.3, -0.2, 0.1, 0.2, 0.3, 0.5, 0, 0, 0};
    run_grad("free sliding contact, 1 step", m, 1, qb, vb, 0.5, 1e-6, 1e-6, 1);
    /* sticking: slow tangential motion */
    const double vs[10] = {0.001, -0.002, -0.1, 0, 0, 0, 0, 0, 0, 0};
    run_grad("free sticking contact, 1 step", m, 1, qb, vs, 0.5, 1e-6, 1e-6, 1);
    /* a fall onto the ground and on: 400 steps in and out of contact */
    const double qc[12] = {0, 0, 0.45, c, s * 0.3, s * 0.9, s * 0.3, 0.8, 1, 0, 0, 0};
    const double vc[10] = {0.5, 0, 0, 0.2, 0.5, -0.3, 1, 0.2, 0, 0};
    watch = 2;
    run_grad("free falling onto the ground, 400 steps", m, 400, qc, vc, 0.5, 1e-7, 1e-4, 13);
    fprintf(stderr, "fall: torso height %.3f .. %.3f m\n", watch_min, watch_max);
    /* in the air at first: the leg's sphere is ~0.2 m above the ground; it
     * lands when the torso is below ~0.26 m */
    CHECK(watch_max > 0.44 && watch_min < 0.26);
    watch = -1;
  }
  ds_artic_model_free(m);
}

/* ---- physics --------------------------------------------------------------------------- */

/* A point mass on a massless link: period 2 pi sqrt(L/g) at small amplitude. */
static void test_period(void) {
  dsArticBuilder* b;
  ds_artic_builder_create(&b);
  body(b, "bob", 1, 1e-9, 1e-9, 1e-9);
  const double L = 0.8, g = 9.81;
  dsArticJointDef j = jdef("pivot", DS_JOINT_HINGE, NULL, "bob");
  set3(j.axis, 0, 1, 0);
  set3(j.anchor_child, 0, 0, L);
  CHECK_INT_EQ(ds_artic_add_joint(b, &j), 0);
  dsArticOptions o = ds_artic_default_options();
  o.dt = 1e-4;
  dsArticModel* m = build(b, &o);
  const int T = 60000;
  dsArticData* d;
  CHECK_INT_EQ(ds_artic_data_create(m, T, &d), 0);
  const double q0 = 0.01;
  CHECK_INT_EQ(ds_artic_reset(m, d, &q0, NULL), 0);
  double first = -1, last = -1;
  int n = 0;
  for (int t = 0; t < T; t++) {
    CHECK_INT_EQ(ds_artic_step(m, d, NULL), 0);
    const double a = ds_artic_q(d, t)[0], c = ds_artic_q(d, t + 1)[0];
    if (a > 0 && c <= 0) { /* downward zero crossing, linear interpolation */
      const double tc = (t + a / (a - c)) * o.dt;
      if (first < 0) first = tc;
      last = tc;
      n++;
    }
  }
  CHECK(n >= 3);
  const double period = (last - first) / (n - 1), expect = 2 * 3.14159265358979323846 * sqrt(L / g);
  fprintf(stderr, "pendulum: period %.6f s, 2 pi sqrt(L/g) = %.6f s (rel. error %.2e)\n", period, expect,
          fabs(period / expect - 1));
  CHECK_CLOSE(period, expect, 5e-3, 0);
  ds_artic_data_free(d);
  ds_artic_model_free(m);
}

static dsArticModel* model_double(double dt) {
  dsArticBuilder* b;
  ds_artic_builder_create(&b);
  body(b, "upper", 1, 1.0 / 12, 1.0 / 12, 1e-3);
  body(b, "lower", 1, 1.0 / 12, 1.0 / 12, 1e-3);
  dsArticJointDef j = jdef("shoulder", DS_JOINT_HINGE, NULL, "upper");
  set3(j.axis, 0, 1, 0);
  set3(j.anchor_child, 0, 0, 0.5);
  CHECK_INT_EQ(ds_artic_add_joint(b, &j), 0);
  j = jdef("elbow", DS_JOINT_HINGE, "upper", "lower");
  set3(j.axis, 0, 1, 0);
  set3(j.anchor_parent, 0, 0, -0.5);
  set3(j.anchor_child, 0, 0, 0.5);
  CHECK_INT_EQ(ds_artic_add_joint(b, &j), 0);
  dsArticOptions o = ds_artic_default_options();
  o.dt = dt;
  return build(b, &o);
}

/* max |E(t) - E(0)| over 10 s */
static double energy_drift(double dt) {
  dsArticModel* m = model_double(dt);
  const int T = (int)(10 / dt + 0.5);
  dsArticData* d;
  CHECK_INT_EQ(ds_artic_data_create(m, T, &d), 0);
  const double q0[2] = {1.0, 0.5};
  ds_artic_reset(m, d, q0, NULL);
  double k, p, e0, worst = 0;
  ds_artic_energy(m, d, ds_artic_q(d, 0), ds_artic_qd(d, 0), &k, &p);
  e0 = k + p;
  for (int t = 0; t < T; t++) {
    CHECK_INT_EQ(ds_artic_step(m, d, NULL), 0);
    ds_artic_energy(m, d, ds_artic_q(d, t + 1), ds_artic_qd(d, t + 1), &k, &p);
    worst = fmax(worst, fabs(k + p - e0));
  }
  ds_artic_data_free(d);
  ds_artic_model_free(m);
  return worst;
}

static void test_energy(void) {
  const double e1 = energy_drift(1e-3), e2 = energy_drift(5e-4);
  fprintf(stderr, "double pendulum, 10 s: max |E - E0| %.3e J at dt 1e-3, %.3e J at dt 5e-4 (ratio %.2f)\n", e1, e2,
          e1 / e2);
  CHECK(e1 < 0.3); /* first order: 0.19 J at dt 1e-3 */
  CHECK(e1 / e2 > 1.6 && e1 / e2 < 2.5);
}

/* No gravity, no ground, no damping: linear and angular momentum of a free
 * chain, the largest relative deviation from the start over T steps. The
 * continuous dynamics conserve both; the first-order step changes them by
 * O(dt^2) per step, O(dt) over a fixed time. */
static double momentum_drift(double dt, int T, double* rel_lin) {
  dsArticModel* m = model_free(0, 0);
  m->dt = dt;
  m->param[m->bp[0].damping] = m->param[m->bp[1].damping] = m->param[m->bp[2].damping] = 0;
  m->param[m->bp[1].stiffness] = 0;
  dsArticData* d;
  CHECK_INT_EQ(ds_artic_data_create(m, T, &d), 0);
  const double q0[12] = {0.1, 0.2, 0.3, 0.9, 0.1, 0.3, 0.2, 0.4, 0.8, 0.2, 0.1, 0.3};
  const double qd0[10] = {0.3, -0.2, 0.1, 0.5, -0.7, 0.9, 2, 1.5, -1, 0.5};
  ds_artic_reset(m, d, q0, qd0);
  double l0[3], a0[3], l[3], a[3], worst_l = 0, worst_a = 0;
  ds_artic_momentum(m, d, q0, qd0, l0, a0);
  for (int t = 0; t < T; t++) {
    CHECK_INT_EQ(ds_artic_step(m, d, (const double[]){0}), 0);
    ds_artic_momentum(m, d, ds_artic_q(d, t + 1), ds_artic_qd(d, t + 1), l, a);
    for (int k = 0; k < 3; k++) {
      worst_l = fmax(worst_l, fabs(l[k] - l0[k]));
      worst_a = fmax(worst_a, fabs(a[k] - a0[k]));
    }
  }
  const double nl = sqrt(l0[0] * l0[0] + l0[1] * l0[1] + l0[2] * l0[2]);
  const double na = sqrt(a0[0] * a0[0] + a0[1] * a0[1] + a0[2] * a0[2]);
  *rel_lin = worst_l / nl;
  ds_artic_data_free(d);
  ds_artic_model_free(m);
  return worst_a / na;
}

static void test_momentum(void) {
  double rl1, rl2;
  const double ra1 = momentum_drift(1e-3, 1000, &rl1), ra2 = momentum_drift(5e-4, 2000, &rl2);
  fprintf(stderr,
          "free chain, 1 s: max relative momentum deviation: linear %.2e, angular %.2e at dt 1e-3; "
          "linear %.2e, angular %.2e at dt 5e-4\n",
          rl1, ra1, rl2, ra2);
  CHECK(rl1 < 5e-3 && ra1 < 5e-3);
  CHECK(rl1 / rl2 > 1.6 && rl1 / rl2 < 2.5);
  CHECK(ra1 / ra2 > 1.6 && ra1 / ra2 < 2.5);
  /* the continuous dynamics conserve both, dP/dt = 0: one step changes
   * them by O(dt^2), so 10x smaller dt gives 100x less */
  double rl3, rl4;
  const double ra3 = momentum_drift(1e-4, 1, &rl3), ra4 = momentum_drift(1e-5, 1, &rl4);
  fprintf(stderr, "free chain, one step: linear %.2e, angular %.2e at dt 1e-4; %.2e, %.2e at dt 1e-5\n", rl3, ra3, rl4,
          ra4);
  CHECK(rl4 < rl3 / 50 && ra4 < ra3 / 50);
}

/* Same inputs, same bits. */
static void test_determinism(void) {
  dsArticModel* m = model_free(-9.81, 1);
  dsArticData *d1, *d2;
  CHECK_INT_EQ(ds_artic_data_create(m, 200, &d1), 0);
  CHECK_INT_EQ(ds_artic_data_create(m, 200, &d2), 0);
  const double q0[12] = {0, 0, 0.2, 1, 0, 0, 0, 0.5, 1, 0, 0, 0};
  for (int r = 0; r < 2; r++) {
    dsArticData* d = r ? d2 : d1;
    ds_artic_reset(m, d, q0, NULL);
    for (int t = 0; t < 200; t++) {
      const double u = sin(0.1 * t);
      CHECK_INT_EQ(ds_artic_step(m, d, &u), 0);
    }
  }
  CHECK(memcmp(ds_artic_q(d1, 200), ds_artic_q(d2, 200), sizeof(double) * 12) == 0);
  CHECK(memcmp(ds_artic_qd(d1, 200), ds_artic_qd(d2, 200), sizeof(double) * 10) == 0);
  /* the tape is full */
  CHECK_INT_EQ(ds_artic_step(m, d1, NULL), DS_ERR_STATE);
  ds_artic_data_free(d1);
  ds_artic_data_free(d2);
  ds_artic_model_free(m);
}

/* ---- API: parameters and refused inputs ------------------------------------------------ */

static void test_params(void) {
  dsArticModel* m = model_hinge();
  double v = 0;
  CHECK_INT_EQ(ds_artic_param_get(m, "body.link.mass", &v), 0);
  CHECK_CLOSE(v, 1.3, 0, 0);
  CHECK_INT_EQ(ds_artic_param_get(m, "joint.hinge.anchor_child.z", &v), 0);
  CHECK_CLOSE(v, 0.5, 0, 0);
  const char* names[] = {"body.link.inertia.y",
                         "joint.hinge.damping",
                         "joint.hinge.armature",
                         "joint.hinge.stiffness",
                         "joint.hinge.rest",
                         "joint.hinge.limit_lower",
                         "joint.hinge.limit_upper",
                         "actuator.motor.gear",
                         "actuator.servo.kp",
                         "actuator.servo.kv",
                         "gravity.z"};
  for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
    if (ds_artic_param_index(m, names[k]) < 0) DST_FAIL_AT("no parameter %s", names[k]);
  CHECK_INT_EQ(ds_artic_param_index(m, "contact.ke"), DS_ERR_NOTFOUND); /* no ground */
  CHECK_INT_EQ(ds_artic_param_set(m, "body.link.mass", 0), DS_ERR_RANGE);
  CHECK_INT_EQ(ds_artic_param_set(m, "joint.hinge.damping", -1), DS_ERR_RANGE);
  CHECK_INT_EQ(ds_artic_param_set(m, "joint.hinge.limit_lower", 0.5), DS_ERR_RANGE);
  CHECK_INT_EQ(ds_artic_param_set(m, "joint.hinge.nope", 1), DS_ERR_NOTFOUND);
  CHECK_INT_EQ(ds_artic_param_set(m, "joint.hinge.limit_lower", -0.25), 0);
  CHECK_INT_EQ(ds_artic_param_get(m, "joint.hinge.limit_lower", &v), 0);
  CHECK_CLOSE(v, -0.25, 0, 0);
  int qa = -1, va = -1;
  CHECK_INT_EQ(ds_artic_joint_adr(m, "hinge", &qa, &va), 0);
  CHECK_INT_EQ(qa, 0);
  CHECK_INT_EQ(ds_artic_joint_adr(m, "elbow", &qa, &va), DS_ERR_NOTFOUND);
  ds_artic_model_free(m);
}

/* Builds a two-body tree after edit() changes the defs; expects build (or
 * an add) to fail with a message containing want. */
typedef struct {
  dsArticBodyDef b1, b2;
  dsArticJointDef j1, j2;
  dsArticActuatorDef a;
  int add_act;
} Tree;

static Tree good_tree(void) {
  Tree t;
  t.b1 = ds_artic_default_body_def();
  t.b1.name = "a";
  t.b2 = ds_artic_default_body_def();
  t.b2.name = "b";
  t.j1 = jdef("ja", DS_JOINT_HINGE, NULL, "a");
  t.j2 = jdef("jb", DS_JOINT_SLIDE, "a", "b");
  t.a = ds_artic_default_actuator_def();
  t.a.name = "m";
  t.a.joint = "jb";
  t.add_act = 1;
  return t;
}

static void expect_refused(const char* label, Tree t, const char* want) {
  dsArticBuilder* b;
  ds_artic_builder_create(&b);
  int rc = ds_artic_add_body(b, &t.b1);
  if (!rc) rc = ds_artic_add_body(b, &t.b2);
  if (!rc) rc = ds_artic_add_joint(b, &t.j1);
  if (!rc) rc = ds_artic_add_joint(b, &t.j2);
  if (!rc && t.add_act) rc = ds_artic_add_actuator(b, &t.a);
  dsArticModel* m = (dsArticModel*)&rc; /* must be reset to NULL */
  if (!rc)
    rc = ds_artic_build(b, NULL, &m);
  else
    m = NULL;
  if (rc != DS_ERR_INVALID) DST_FAIL_AT("%s: rc %d, expected DS_ERR_INVALID", label, rc);
  CHECK(m == NULL);
  const char* msg = ds_artic_builder_error(b);
  if (!strstr(msg, want)) DST_FAIL_AT("%s: message \"%s\" lacks \"%s\"", label, msg, want);
  dst_checks += 2;
  ds_artic_builder_free(b);
  if (m) ds_artic_model_free(m);
}

static void test_refused(void) {
  { /* the good tree builds */
    Tree t = good_tree();
    dsArticBuilder* b;
    ds_artic_builder_create(&b);
    ds_artic_add_body(b, &t.b1);
    ds_artic_add_body(b, &t.b2);
    ds_artic_add_joint(b, &t.j1);
    ds_artic_add_joint(b, &t.j2);
    ds_artic_add_actuator(b, &t.a);
    dsArticModel* m = NULL;
    CHECK_INT_EQ(ds_artic_build(b, NULL, &m), 0);
    CHECK(m != NULL);
    CHECK_INT_EQ(ds_artic_nv(m), 2);
    ds_artic_model_free(m);
    ds_artic_builder_free(b);
  }
  Tree t = good_tree();
  t.j2.parent = "c";
  expect_refused("unknown parent", t, "joint 'jb': unknown parent body 'c'");
  t = good_tree();
  t.j2.child = "z";
  expect_refused("unknown child", t, "joint 'jb': unknown child body 'z'");
  t = good_tree();
  t.j1.parent = "b"; /* a <- b <- a */
  expect_refused("cycle", t, "joints form a cycle through body 'a'");
  t = good_tree();
  t.j2.child = "a";
  t.j2.parent = NULL;
  expect_refused("two joints", t, "body 'a' is the child of joints 'ja' and 'jb'");
  t = good_tree();
  t.j2.child = "a";
  t.j2.parent = "a";
  expect_refused("own parent", t, "joint 'jb': body 'a' is its own parent");
  t = good_tree();
  t.j2.name = "ja";
  expect_refused("duplicate joint", t, "joint 'ja' added twice");
  t = good_tree();
  t.b2.mass = 0;
  expect_refused("zero mass", t, "body 'b': mass 0 (expected > 0)");
  t = good_tree();
  t.b1.mass = -2;
  expect_refused("negative mass", t, "body 'a': mass -2 (expected > 0)");
  t = good_tree();
  t.b2.inertia[1] = -1e-3;
  expect_refused("negative inertia", t, "body 'b': inertia[1] -0.001 (expected > 0)");
  t = good_tree();
  t.b2.inertia[2] = 0;
  expect_refused("zero inertia", t, "body 'b': inertia[2] 0 (expected > 0)");
  t = good_tree();
  set3(t.j2.axis, 0, 0, 0);
  expect_refused("zero axis", t, "joint 'jb': axis (0, 0, 0) has length zero");
  t = good_tree();
  t.j1.limited = 1;
  t.j1.limit_lower = 1;
  t.j1.limit_upper = 0.5;
  expect_refused("lower > upper", t, "joint 'ja': limit_lower 1 > limit_upper 0.5 (expected lower <= upper)");
  t = good_tree();
  t.j1.damping = -0.1;
  expect_refused("negative damping", t, "joint 'ja': damping -0.1 (expected >= 0)");
  t = good_tree();
  t.j2.type = DS_JOINT_BALL;
  expect_refused("actuator on a ball", t, "actuator 'm': joint 'jb' is not a hinge or slide");
  t = good_tree();
  t.a.joint = "nope";
  expect_refused("actuator on no joint", t, "actuator 'm': unknown joint 'nope'");
  t = good_tree();
  t.j2.child = "a";
  t.j2.parent = "world";
  t.j2.name = "jb";
  t.add_act = 0;
  expect_refused("body without joint", t, "body 'a' is the child of joints");
  { /* a body with no joint at all */
    dsArticBuilder* b;
    ds_artic_builder_create(&b);
    Tree u = good_tree();
    ds_artic_add_body(b, &u.b1);
    ds_artic_add_body(b, &u.b2);
    ds_artic_add_joint(b, &u.j1);
    dsArticModel* m = NULL;
    CHECK_INT_EQ(ds_artic_build(b, NULL, &m), DS_ERR_INVALID);
    CHECK(m == NULL);
    CHECK_STR_CONTAINS(ds_artic_builder_error(b), "body 'b' has no joint");
    ds_artic_builder_free(b);
  }
}

/* ---- allocation: failures clean up; none in step or backward -------------------------- */

static long a_count, a_fail_at = -1, a_live;
static void* a_malloc(size_t n) {
  if (a_fail_at >= 0 && a_count++ == a_fail_at) return NULL;
  void* p = malloc(n);
  a_live += p != NULL;
  return p;
}
static void* a_calloc(size_t c, size_t n) {
  if (a_fail_at >= 0 && a_count++ == a_fail_at) return NULL;
  void* p = calloc(c, n);
  a_live += p != NULL;
  return p;
}
static void* a_realloc(void* q, size_t n) {
  if (a_fail_at >= 0 && a_count++ == a_fail_at) return NULL;
  void* p = realloc(q, n);
  a_live += q == NULL && p != NULL;
  return p;
}
static void a_free(void* p) {
  a_live -= p != NULL;
  free(p);
}

/* builder, model and data of the free chain with the ground; rc of the first failure */
static int alloc_round(void) {
  dsArticBuilder* b = NULL;
  dsArticModel* m = NULL;
  dsArticData* d = NULL;
  int rc = ds_artic_builder_create(&b);
  const char* names[3] = {"torso", "leg", "foot"};
  for (int i = 0; i < 3 && !rc; i++) {
    dsArticBodyDef bd = ds_artic_default_body_def();
    bd.name = names[i];
    rc = ds_artic_add_body(b, &bd);
    dsArticJointDef j = ds_artic_default_joint_def();
    j.name = names[i];
    j.type = i == 0 ? DS_JOINT_FREE : i == 1 ? DS_JOINT_HINGE : DS_JOINT_BALL;
    j.parent = i ? names[i - 1] : NULL;
    j.child = names[i];
    if (!rc) rc = ds_artic_add_joint(b, &j);
    dsArticGeomDef g = ds_artic_default_geom_def();
    g.body = names[i];
    g.type = DS_ARTIC_CAPSULE;
    if (!rc) rc = ds_artic_add_geom(b, &g);
  }
  dsArticActuatorDef a = ds_artic_default_actuator_def();
  a.name = "m";
  a.joint = "leg";
  if (!rc) rc = ds_artic_add_actuator(b, &a);
  dsArticOptions o = ds_artic_default_options();
  o.ground = 1;
  if (!rc) rc = ds_artic_build(b, &o, &m);
  if (!rc) rc = ds_artic_data_create(m, 10, &d);
  ds_artic_data_free(d);
  ds_artic_model_free(m);
  ds_artic_builder_free(b);
  return rc;
}

static void test_alloc(void) {
  ds_replace_allocator(a_malloc, a_realloc, a_calloc, a_free);
  a_fail_at = -1;
  a_live = 0;
  CHECK_INT_EQ(alloc_round(), 0);
  CHECK_INT_EQ(a_live, 0);
  int failures = 0;
  for (long k = 0; k < 200; k++) {
    a_count = 0;
    a_fail_at = k;
    a_live = 0;
    const int rc = alloc_round();
    if (a_count <= k) break; /* no allocation left to fail */
    failures++;
    if (rc != DS_ERR_NOMEM) DST_FAIL_AT("allocation %ld failing: rc %d, expected DS_ERR_NOMEM", k, rc);
    if (a_live != 0) DST_FAIL_AT("allocation %ld failing: %ld blocks left", k, a_live);
  }
  CHECK(failures > 10);
  /* step and backward allocate nothing */
  a_fail_at = -1;
  dsArticModel* m = model_free(-9.81, 1);
  dsArticData* d;
  CHECK_INT_EQ(ds_artic_data_create(m, 50, &d), 0);
  double gq[12], gv[10], ga[50], gp[128];
  CHECK(ds_artic_nparam(m) <= 128);
  const double q0[12] = {0, 0, 0.1, 1, 0, 0, 0, 0.5, 1, 0, 0, 0};
  a_count = 0;
  ds_artic_reset(m, d, q0, NULL);
  for (int t = 0; t < 50; t++) CHECK_INT_EQ(ds_artic_step(m, d, NULL), 0);
  dsArticGrad g = {gq, gv, ga, gp};
  CHECK_INT_EQ(ds_artic_backward(m, d, NULL, NULL, &g), 0);
  CHECK_INT_EQ(a_count, 0);
  ds_artic_data_free(d);
  ds_artic_model_free(m);
  ds_replace_allocator(NULL, NULL, NULL, NULL);
}

/* The engine is serial: the same bits on 1 and 2 OpenMP threads. */
static void test_threads(void) {
#ifdef _OPENMP
  dsArticModel* m = model_free(-9.81, 1);
  double out[2][22];
  for (int r = 0; r < 2; r++) {
    omp_set_num_threads(r + 1);
    dsArticData* d;
    CHECK_INT_EQ(ds_artic_data_create(m, 100, &d), 0);
    const double q0[12] = {0, 0, 0.15, 1, 0, 0, 0, 0.5, 1, 0, 0, 0};
    ds_artic_reset(m, d, q0, NULL);
    for (int t = 0; t < 100; t++) {
      const double u = cos(0.2 * t);
      CHECK_INT_EQ(ds_artic_step(m, d, &u), 0);
    }
    memcpy(out[r], ds_artic_q(d, 100), sizeof(double) * 12);
    memcpy(out[r] + 12, ds_artic_qd(d, 100), sizeof(double) * 10);
    ds_artic_data_free(d);
  }
  CHECK(memcmp(out[0], out[1], sizeof out[0]) == 0);
  ds_artic_model_free(m);
#endif
}

/* The backward replays each step from the tape of M's factor and qdd
 * (dsArticData.Lt, qddt): no factorisation of M during the backward, and
 * the same gradient, bit for bit, as refactoring at every step (Lt = NULL),
 * by reverse mode and by the tangent sweeps, over a rollout in and out of
 * ground contact with every joint type but slide. */
static void test_factor_tape(void) {
  dsArticModel* m = model_free(-9.81, 1);
  const int T = 150, nq = ds_artic_nq(m), nv = ds_artic_nv(m), nu = ds_artic_nu(m), np = ds_artic_nparam(m);
  dsArticData* d;
  CHECK_INT_EQ(ds_artic_data_create(m, T, &d), 0);
  CHECK(d->Lt != NULL && d->qddt != NULL);
  double q0[16] = {0}, qd0[16] = {0};
  q0[2] = 0.3; /* the leg's sphere 4 cm up, falling at 1 m/s: lands within the rollout */
  q0[3] = 1;
  q0[nq - 4] = 1;
  qd0[0] = 0.3;
  qd0[2] = -1;
  qd0[4] = 1.5;
  CHECK_INT_EQ(ds_artic_reset(m, d, q0, qd0), 0);
  double* wq = calloc((size_t)(T + 1) * nq, sizeof(double));
  double* g[2][4];
  for (int r = 0; r < 2; r++) {
    g[r][0] = calloc((size_t)nq, sizeof(double));
    g[r][1] = calloc((size_t)nv, sizeof(double));
    g[r][2] = calloc((size_t)T * nu, sizeof(double));
    g[r][3] = calloc((size_t)np, sizeof(double));
  }
  for (int t = 0; t < T; t++) {
    double u[4];
    for (int k = 0; k < nu; k++) u[k] = 2 * urand();
    CHECK_INT_EQ(ds_artic_step(m, d, u), 0);
  }
  for (size_t k = 0; k < (size_t)(T + 1) * nq; k++) wq[k] = urand();
  CHECK(ds_artic_qd(d, T)[2] > -2.3); /* the ground stopped it: in free fall -1 - 9.81 T dt = -2.47 m/s */
  for (int tangent = 0; tangent < 2; tangent++) {
    const long nf = d->nfactor;
    double* Lt = d->Lt;
    for (int r = 0; r < 2; r++) {
      dsArticGrad gr = {g[r][0], g[r][1], g[r][2], g[r][3]};
      d->Lt = r ? NULL : Lt; /* r = 1: refactor at every step, as before the tape */
      CHECK_INT_EQ(tangent ? ds__artic_backward_tangent(m, d, wq, NULL, &gr) : ds_artic_backward(m, d, wq, NULL, &gr),
                   0);
      if (r == 0) CHECK_INT_EQ((int)(d->nfactor - nf), 0);
    }
    CHECK_INT_EQ((int)(d->nfactor - nf), T);
    d->Lt = Lt;
    CHECK(!memcmp(g[0][0], g[1][0], sizeof(double) * (size_t)nq));
    CHECK(!memcmp(g[0][1], g[1][1], sizeof(double) * (size_t)nv));
    CHECK(!memcmp(g[0][2], g[1][2], sizeof(double) * (size_t)T * nu));
    CHECK(!memcmp(g[0][3], g[1][3], sizeof(double) * (size_t)np));
  }
  for (int r = 0; r < 2; r++)
    for (int k = 0; k < 4; k++) free(g[r][k]);
  free(wq);
  ds_artic_data_free(d);
  ds_artic_model_free(m);
}

/* The step keeps a short rollout's kinematics (dsArticData.kt) and its
 * RNEA results at qdd (rt), and the backward reads them back: no kinematics
 * pass during the backward, and the same gradient, bit for bit, as redoing
 * them (kt = NULL; rt = NULL: the bias pass and its update at the taped
 * qdd), by reverse mode and by the tangent sweeps, in and out of ground
 * contact with every joint type but slide; a rollout whose tape would pass
 * DS__ARTIC_KIN_TAPE_MAX (DS__ARTIC_RNEA_TAPE_MAX) has none. */
static void test_kin_tape(void) {
  dsArticModel* m = model_free(-9.81, 1);
  const int T = 150, nq = ds_artic_nq(m), nv = ds_artic_nv(m), nu = ds_artic_nu(m), np = ds_artic_nparam(m);
  dsArticData *d, *big;
  CHECK_INT_EQ(ds_artic_data_create(m, T, &d), 0);
  CHECK(d->kt != NULL && d->kinb * (size_t)T <= DS__ARTIC_KIN_TAPE_MAX);
  CHECK_INT_EQ(ds_artic_data_create(m, (int)(DS__ARTIC_KIN_TAPE_MAX / d->kinb) + 1, &big), 0);
  CHECK(big->kt == NULL && big->Lt != NULL);
  ds_artic_data_free(big);
  const size_t rb = 18 * sizeof(double) * (size_t)ds_artic_nbody(m);
  CHECK(d->rt != NULL);
  CHECK_INT_EQ(ds_artic_data_create(m, (int)(DS__ARTIC_RNEA_TAPE_MAX / rb) + 1, &big), 0);
  CHECK(big->rt == NULL && big->Lt != NULL);
  ds_artic_data_free(big);
  double q0[16] = {0}, qd0[16] = {0};
  q0[2] = 0.3; /* lands within the rollout, as in test_factor_tape */
  q0[3] = 1;
  q0[nq - 4] = 1;
  qd0[0] = 0.3;
  qd0[2] = -1;
  qd0[4] = 1.5;
  CHECK_INT_EQ(ds_artic_reset(m, d, q0, qd0), 0);
  double* wq = calloc((size_t)(T + 1) * nq, sizeof(double));
  double* g[3][4];
  for (int r = 0; r < 3; r++) {
    g[r][0] = calloc((size_t)nq, sizeof(double));
    g[r][1] = calloc((size_t)nv, sizeof(double));
    g[r][2] = calloc((size_t)T * nu, sizeof(double));
    g[r][3] = calloc((size_t)np, sizeof(double));
  }
  const long nk0 = d->nkin;
  for (int t = 0; t < T; t++) {
    double u[4];
    for (int k = 0; k < nu; k++) u[k] = 2 * urand();
    CHECK_INT_EQ(ds_artic_step(m, d, u), 0);
  }
  CHECK_INT_EQ((int)(d->nkin - nk0), T);
  for (size_t k = 0; k < (size_t)(T + 1) * nq; k++) wq[k] = urand();
  CHECK(ds_artic_qd(d, T)[2] > -2.3); /* the ground stopped it */
  for (int tangent = 0; tangent < 2; tangent++) {
    unsigned char* kt = d->kt;
    double* rt = d->rt;
    for (int r = 0; r < 3; r++) {
      const long nk = d->nkin;
      dsArticGrad gr = {g[r][0], g[r][1], g[r][2], g[r][3]};
      d->kt = r == 1 ? NULL : kt; /* r = 1: redo the kinematics at every step */
      d->rt = r == 2 ? NULL : rt; /* r = 2: redo the RNEA */
      CHECK_INT_EQ(tangent ? ds__artic_backward_tangent(m, d, wq, NULL, &gr) : ds_artic_backward(m, d, wq, NULL, &gr),
                   0);
      CHECK_INT_EQ((int)(d->nkin - nk), r == 1 ? T : 0);
    }
    d->kt = kt;
    d->rt = rt;
    for (int r = 1; r < 3; r++) {
      CHECK(!memcmp(g[0][0], g[r][0], sizeof(double) * (size_t)nq));
      CHECK(!memcmp(g[0][1], g[r][1], sizeof(double) * (size_t)nv));
      CHECK(!memcmp(g[0][2], g[r][2], sizeof(double) * (size_t)T * nu));
      CHECK(!memcmp(g[0][3], g[r][3], sizeof(double) * (size_t)np));
    }
  }
  for (int r = 0; r < 3; r++)
    for (int k = 0; k < 4; k++) free(g[r][k]);
  free(wq);
  ds_artic_data_free(d);
  ds_artic_model_free(m);
}

int main(void) {
  test_params();
  test_refused();
  test_determinism();
  test_threads();
  test_alloc();
  test_period();
  test_energy();
  test_momentum();
  test_gradients();
  test_factor_tape();
  test_kin_tape();
  if (ngrad_fail) fprintf(stderr, "%d gradient entries differ\n", ngrad_fail);
  return DST_RESULT();
}

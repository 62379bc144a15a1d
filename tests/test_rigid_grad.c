/* Rigid-body adjoints vs central finite differences (double).
 *
 * Scene: an asymmetric box and a coarse sphere (two bodies, restitution
 * 0.5 and 0.8) plus one free particle, ground contact on. Loss: fixed
 * random weights on the final positions and velocities of every particle
 * (rigid vertices included), on the final body states, and on the
 * positions at an intermediate substep (injected during the backward).
 * Inputs checked, every component of every class: body.mass, body.com,
 * body.inertia, body.initial_position, body.initial_orientation,
 * body.initial_velocity, body.initial_angular_velocity, body.contact_ke,
 * body.contact_kd, body.contact_kf, body.contact_mu, body.restitution,
 * contact.skin, gravity, and the body wrench (an impulse over one substep).
 *
 * Cases: single substeps from free flight, resting, sliding, spinning on
 * the ground and contact onset; rollouts of 500 substeps with bounces and
 * sliding. Comparison per class: |a - fd| <= rtol max(|a|, |fd|) + atol,
 * atol = 1e-7 max over the class (1e-6 on the rollouts) + 1e-9; rtol 1e-5 on
 * single substeps, 1e-4 on rollouts. Each class also proves the check can
 * fail: its largest component scaled by 1.01, and separately its sign
 * flipped, must be rejected. A model with a soft tet box beside a rigid
 * box is checked the same way. body.restitution at its bound e = 1 (onset
 * and rollout) is checked against a second-order left difference;
 * rigid-toss's start at rest (v_y = 0, kd on) over 1 and 32 substeps like
 * the single and rollout cases; the contact kernel across the approach
 * damping's smooth switch. Also: the checkpointed tape gives the same
 * gradient bits, and 600 bodies give the same bits on 1, 2 and 3 threads. */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dsim/engine.h"
#include "dsim/env.h"
#include "engine/rigid.h"
#include "tests/dstest.h"

#define MAXP 64

static unsigned long long g_rng = 12345;
static double unif(double lo, double hi) {
  g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
  return lo + (hi - lo) * (double)(g_rng >> 11) / 9007199254740992.0;
}

typedef struct Case {
  const char* name;
  int T;            /* substeps */
  int kimp;         /* substep of the wrench (-1: none) */
  double wrench[6]; /* on body 0 */
  double rtol, atol_rel, hrel;
  double hfloor; /* FD step = hrel max(|p|, hfloor); 0: 1 */
} Case;

static dsModel* build(void) {
  dsBuilder* b;
  ds_builder_create(&b);
  dsGroundDef gd = {1e4, 10, 1e2, 0.5, 0.0};
  ds_builder_set_ground(b, &gd);
  ds_builder_set_dt(b, 1e-3);
  dsRigidDef d = ds_default_rigid_def();
  d.mass = 1;
  d.ke = 2e4;
  d.kd = 5;
  d.kf = 50;
  d.mu = 0.4;
  d.restitution = 0.5;
  const dsReal h[3] = {0.3, 0.1, 0.2};
  d.position[1] = 1;
  ds_builder_add_rigid_box(b, h, &d);
  d.mass = 0.5;
  d.restitution = 0.8;
  d.position[0] = 2;
  ds_builder_add_rigid_sphere(b, 0.2, 6, &d);
  const dsReal xp[3] = {-2, 1, 0};
  ds_builder_add_particle(b, xp, NULL, 1);
  dsModel* m = NULL;
  int rc = ds_builder_finalize(b, &m);
  if (rc) fprintf(stderr, "finalize: %s\n", ds_builder_last_error(b));
  ds_builder_free(b);
  return m;
}

typedef struct Weights {
  double* wx;   /* n3 */
  double* wv;
  double* wmid; /* n3, at substep T/2 */
  double* wb;   /* 13 nbody */
} Weights;

/* Contact statistics of the last run: per body, substeps with a vertex
 * below the ground, touch-downs (out -> in), and substeps in contact with a
 * vertex sliding faster than 1 cm/s. */
static int g_in[2], g_touch[2], g_slide[2];

static void stats(const dsModel* m, const dsData* d, int* was) {
  for (int b = 0; b < m->nbody && b < 2; b++) {
    int in = 0, sl = 0;
    for (int i = m->body_vrange[2 * b]; i < m->body_vrange[2 * b + 1]; i++)
      if (d->x[3 * i + 1] < 0) {
        in = 1;
        if (hypot(d->v[3 * i], d->v[3 * i + 2]) > 0.01) sl = 1;
      }
    g_in[b] += in;
    g_slide[b] += sl;
    g_touch[b] += in && !was[b];
    was[b] = in;
  }
}

static double run(const dsModel* m, dsData* d, const Case* c, const Weights* w, const double* wrench) {
  ds_data_reset(m, d);
  const int n3 = 3 * m->nparticle;
  double L = 0;
  int was[2] = {0, 0};
  memset(g_in, 0, sizeof g_in), memset(g_touch, 0, sizeof g_touch), memset(g_slide, 0, sizeof g_slide);
  for (int t = 0; t < c->T; t++) {
    stats(m, d, was);
    if (t == c->T / 2)
      for (int k = 0; k < n3; k++) L += w->wmid[k] * d->x[k];
    memset(d->body_fext, 0, 6 * (size_t)m->nbody * sizeof(dsReal));
    if (t == c->kimp) memcpy(d->body_fext, wrench, 6 * sizeof(double));
    if (ds_step(m, d)) {
      fprintf(stderr, "%s: step %d: %s\n", c->name, t, ds_data_last_error(d));
      return NAN;
    }
  }
  for (int k = 0; k < n3; k++) L += w->wx[k] * d->x[k] + w->wv[k] * d->v[k];
  for (int k = 0; k < 13 * m->nbody; k++) L += w->wb[k] * d->body[k];
  return L;
}

/* Analytic gradient into g; wrench gradient into gw (6). */
static int grad(const dsModel* m, dsData* d, dsGrad* g, const Case* c, const Weights* w, const double* wrench,
                double* gw) {
  ds_grad_zero(g);
  run(m, d, c, w, wrench);
  const int n3 = 3 * m->nparticle;
  int rc = ds_backward_begin(m, d);
  for (int k = 0; k < n3; k++) {
    d->adj_x[k] += w->wx[k];
    d->adj_v[k] += w->wv[k];
  }
  for (int k = 0; k < 13 * m->nbody; k++) d->adj_body[k] += w->wb[k];
  memset(gw, 0, 6 * sizeof(double));
  while (!rc && d->bt > 0) {
    rc = ds_backward_step(m, d, g, NULL, NULL);
    if (d->bt == c->kimp)
      for (int k = 0; k < 6; k++) gw[k] = d->adj_body_fext[k];
    if (d->bt == c->T / 2)
      for (int k = 0; k < n3; k++) d->adj_x[k] += w->wmid[k];
  }
  if (!rc) rc = ds_backward_finish(m, d, g);
  return rc;
}

static int compare(const double* a, const double* f, int n, double rtol, double atol) {
  for (int i = 0; i < n; i++)
    if (!(fabs(a[i] - f[i]) <= rtol * fmax(fabs(a[i]), fabs(f[i])) + atol)) return 1;
  return 0;
}

static void check_class(const char* cname, const char* pname, const double* a, const double* f, int n,
                        const Case* c) {
  double sc = 0;
  int big = 0;
  for (int i = 0; i < n; i++) {
    sc = fmax(sc, fmax(fabs(a[i]), fabs(f[i])));
    if (fabs(a[i]) > fabs(a[big])) big = i;
  }
  const double atol = c->atol_rel * sc + 1e-9; /* floor: FD rounding of a loss of O(10) */
  int bad = compare(a, f, n, c->rtol, atol);
  if (bad) {
    fprintf(stderr, "%s / %s: adjoint and FD disagree\n", cname, pname);
    for (int i = 0; i < n; i++) fprintf(stderr, "  [%d] analytic %.12g  fd %.12g\n", i, a[i], f[i]);
  }
  CHECK(!bad);
  if (0.01 * sc > atol) { /* the same check must reject a perturbed adjoint (where 1% of it is above the floor) */
    double p[MAXP];
    memcpy(p, a, (size_t)n * sizeof(double));
    p[big] *= 1.01;
    int rej1 = compare(p, f, n, c->rtol, atol);
    p[big] = -a[big];
    int rej2 = compare(p, f, n, c->rtol, atol);
    if (!rej1 || !rej2) fprintf(stderr, "%s / %s: a perturbed adjoint was accepted (%g, %g)\n", cname, pname, a[big], f[big]);
    CHECK(rej1 && rej2);
  }
}

static const char* const kParams[] = {"body.mass",        "body.com",          "body.inertia",
                                      "body.initial_position", "body.initial_orientation",
                                      "body.initial_velocity", "body.initial_angular_velocity",
                                      "body.contact_ke",  "body.contact_kd",   "body.contact_kf",
                                      "body.contact_mu",  "body.restitution",  "contact.skin",
                                      "gravity",          "initial_position"};

static int g_classes = 0;

/* initial body states (13 per body) through the parameters */
static void set_state0(dsModel* m, const double* state0) {
  for (int b = 0; b < m->nbody; b++) {
    const double* s = state0 + 13 * b;
    memcpy(m->body_x0 + 3 * b, s, 3 * sizeof(double));
    memcpy(m->body_q0 + 4 * b, s + 3, 4 * sizeof(double));
    memcpy(m->body_v0 + 3 * b, s + 7, 3 * sizeof(double));
    memcpy(m->body_w0 + 3 * b, s + 10, 3 * sizeof(double));
  }
}

/* Restitution at its upper bound e = 1 (the default, and sysid's bound):
 * e > 1 is refused, so the gradient there is the left derivative, checked
 * against the second-order left difference (3 L(1) - 4 L(1 - h) + L(1 - 2h)) / 2h
 * with the case's step and tolerances. The case must touch down while
 * approaching (the kr term acts only in contact). */
static void check_restitution_bound(dsModel* m, const Case* c, const double* state0) {
  const unsigned long long rng0 = g_rng; /* the later cases keep their random draws */
  const dsReal* pv;
  int ne;
  CHECK_INT_EQ(ds_model_param(m, "body.restitution", &pv, &ne), 0);
  dsReal e0[2], one[2] = {1, 1};
  memcpy(e0, pv, sizeof e0);
  CHECK_INT_EQ(ds_model_set_param(m, "body.restitution", one, 2), 0);
  set_state0(m, state0);
  dsDataDef dd = ds_default_data_def();
  dd.max_substeps = c->T;
  dsData* d;
  dsGrad* g;
  CHECK_INT_EQ(ds_data_create(m, &dd, &d), 0);
  CHECK_INT_EQ(ds_grad_create(m, &g), 0);
  const int n3 = 3 * m->nparticle, nb = 13 * m->nbody;
  Weights w;
  w.wx = calloc((size_t)n3, sizeof(double));
  w.wv = calloc((size_t)n3, sizeof(double));
  w.wmid = calloc((size_t)n3, sizeof(double));
  w.wb = calloc((size_t)nb, sizeof(double));
  for (int k = 0; k < n3; k++) w.wx[k] = unif(-1, 1), w.wv[k] = unif(-0.1, 0.1), w.wmid[k] = unif(-1, 1);
  for (int k = 0; k < nb; k++) w.wb[k] = unif(-1, 1);
  double gw[6], a[2], f[2];
  CHECK_INT_EQ(grad(m, d, g, c, &w, c->wrench, gw), 0);
  CHECK(g_touch[0] >= 1 && g_touch[1] >= 1);
  const double L0 = run(m, d, c, &w, c->wrench), h = c->hrel;
  for (int b = 0; b < 2; b++) {
    dsReal ev[2] = {1, 1};
    ev[b] = 1 - h;
    ds_model_set_param(m, "body.restitution", ev, 2);
    const double L1 = run(m, d, c, &w, c->wrench);
    ev[b] = 1 - 2 * h;
    ds_model_set_param(m, "body.restitution", ev, 2);
    const double L2 = run(m, d, c, &w, c->wrench);
    f[b] = (3 * L0 - 4 * L1 + L2) / (2 * h);
    a[b] = g->body_restitution[b];
    ds_model_set_param(m, "body.restitution", one, 2);
  }
  printf("%s, e = 1: dL/de analytic %.9g %.9g, left difference %.9g %.9g\n", c->name, a[0], a[1], f[0], f[1]);
  CHECK(fabs(a[0]) > 1e-6 && fabs(a[1]) > 1e-6); /* the kr term matters here: not the old zero */
  check_class(c->name, "body.restitution at e = 1 (left difference)", a, f, 2, c);
  g_classes++;
  CHECK_INT_EQ(ds_model_set_param(m, "body.restitution", e0, 2), 0);
  g_rng = rng0;
  free(w.wx), free(w.wv), free(w.wmid), free(w.wb);
  ds_grad_free(g);
  ds_data_free(d);
}

static void check_case(dsModel* m, const Case* c, const double* state0) {
  dsDataDef dd = ds_default_data_def();
  dd.max_substeps = c->T;
  dsData* d;
  dsGrad* g;
  CHECK_INT_EQ(ds_data_create(m, &dd, &d), 0);
  CHECK_INT_EQ(ds_grad_create(m, &g), 0);
  set_state0(m, state0);
  const int n3 = 3 * m->nparticle, nb = 13 * m->nbody;
  Weights w;
  w.wx = calloc((size_t)n3, sizeof(double));
  w.wv = calloc((size_t)n3, sizeof(double));
  w.wmid = calloc((size_t)n3, sizeof(double));
  w.wb = calloc((size_t)nb, sizeof(double));
  for (int k = 0; k < n3; k++) {
    w.wx[k] = unif(-1, 1);
    w.wv[k] = unif(-0.1, 0.1);
    w.wmid[k] = unif(-1, 1);
  }
  for (int k = 0; k < nb; k++) w.wb[k] = unif(-1, 1);
  double wrench[6], gw[6];
  memcpy(wrench, c->wrench, sizeof wrench);
  CHECK_INT_EQ(grad(m, d, g, c, &w, wrench, gw), 0);
  printf("%s: body 0: %d substeps in contact, %d touch-downs, %d sliding; body 1: %d, %d, %d\n", c->name,
         g_in[0], g_touch[0], g_slide[0], g_in[1], g_touch[1], g_slide[1]);
  if (c->T > 1 && m->nbody == 2) CHECK(g_touch[0] >= 2 && g_touch[1] >= 2 && g_slide[0] > 10 && g_slide[1] > 10);
  for (size_t pi = 0; pi < sizeof kParams / sizeof kParams[0]; pi++) {
    const dsReal* pv;
    dsReal* ga;
    int n, ng;
    CHECK_INT_EQ(ds_model_param(m, kParams[pi], &pv, &n), 0);
    CHECK_INT_EQ(ds_grad_param(g, kParams[pi], &ga, &ng), 0);
    if (n > MAXP) n = MAXP; /* initial_position: the first vertices */
    double a[MAXP], f[MAXP], vals[MAXP * 4];
    int nall = 0;
    ds_model_param(m, kParams[pi], &pv, &nall);
    dsReal* base = malloc((size_t)nall * sizeof(dsReal));
    memcpy(base, pv, (size_t)nall * sizeof(dsReal));
    int idx[MAXP], cnt = 0;
    if (!strcmp(kParams[pi], "initial_position")) { /* the free particle: its 3 components */
      for (int k = 0; k < 3; k++) idx[cnt++] = n3 - 3 + k;
    } else {
      for (int k = 0; k < n; k++) idx[cnt++] = k;
    }
    (void)vals;
    for (int j = 0; j < cnt; j++) {
      const int k = idx[j];
      const double h = c->hrel * fmax(fabs(base[k]), c->hfloor > 0 ? c->hfloor : 1.0);
      base[k] += h;
      ds_model_set_param(m, kParams[pi], base, nall);
      double lp = run(m, d, c, &w, wrench);
      base[k] -= 2 * h;
      ds_model_set_param(m, kParams[pi], base, nall);
      double lm = run(m, d, c, &w, wrench);
      base[k] += h;
      ds_model_set_param(m, kParams[pi], base, nall);
      f[j] = (lp - lm) / (2 * h);
      a[j] = ga[k];
    }
    free(base);
    check_class(c->name, kParams[pi], a, f, cnt, c);
    g_classes++;
  }
  if (c->kimp >= 0) {
    double f[6];
    for (int k = 0; k < 6; k++) {
      const double h = c->hrel * fmax(fabs(wrench[k]), c->hfloor > 0 ? c->hfloor : 1.0);
      wrench[k] += h;
      double lp = run(m, d, c, &w, wrench);
      wrench[k] -= 2 * h;
      double lm = run(m, d, c, &w, wrench);
      wrench[k] += h;
      f[k] = (lp - lm) / (2 * h);
    }
    check_class(c->name, "body wrench (impulse)", gw, f, 6, c);
    g_classes++;
  }
  free(w.wx);
  free(w.wv);
  free(w.wmid);
  free(w.wb);
  ds_grad_free(g);
  ds_data_free(d);
}

static void rand_quat(double q[4]) {
  double n = 0;
  for (int k = 0; k < 4; k++) {
    q[k] = unif(-1, 1);
    n += q[k] * q[k];
  }
  for (int k = 0; k < 4; k++) q[k] /= sqrt(n);
}

/* Determinism: 600 boxes (4,800 vertices: the parallel loops engage)
 * thrown onto the ground, 60 substeps and the backward, on 1, 2 and 3
 * threads: states and gradients hash to the same bits. */
static unsigned long long hash(unsigned long long h, const void* p, size_t n) {
  const unsigned char* c = (const unsigned char*)p;
  for (size_t i = 0; i < n; i++) h = (h ^ c[i]) * 1099511628211ull;
  return h;
}

static unsigned long long many_bodies(int threads) {
  ds_set_num_threads(threads);
  dsBuilder* b;
  ds_builder_create(&b);
  dsGroundDef gd = {1e4, 10, 1e2, 0.5, 0.0};
  ds_builder_set_ground(b, &gd);
  ds_builder_set_dt(b, 1e-3);
  g_rng = 99;
  for (int k = 0; k < 600; k++) {
    dsRigidDef d = ds_default_rigid_def();
    d.mass = unif(0.5, 2);
    d.restitution = unif(0.3, 1);
    d.position[0] = (k % 30) * 0.5, d.position[1] = unif(0.1, 0.15), d.position[2] = (k / 30) * 0.5;
    for (int c = 0; c < 4; c++) d.orientation[c] = unif(-1, 1);
    for (int c = 0; c < 3; c++) d.velocity[c] = unif(-1, 1), d.angular_velocity[c] = unif(-3, 3);
    const dsReal h[3] = {0.1, 0.05, 0.08};
    ds_builder_add_rigid_box(b, h, &d);
  }
  dsModel* m = NULL;
  ds_builder_finalize(b, &m);
  ds_builder_free(b);
  dsDataDef dd = ds_default_data_def();
  dd.max_substeps = 60;
  dsData* d;
  dsGrad* g;
  ds_data_create(m, &dd, &d);
  ds_grad_create(m, &g);
  for (int t = 0; t < 60; t++) ds_step(m, d);
  unsigned long long h = hash(1469598103934665603ull, d->x, 3 * (size_t)m->nparticle * sizeof(dsReal));
  h = hash(h, d->body, 13 * (size_t)m->nbody * sizeof(dsReal));
  dsReal* wx = calloc(3 * (size_t)m->nparticle, sizeof(dsReal));
  for (int k = 0; k < 3 * m->nparticle; k++) wx[k] = unif(-1, 1);
  ds_backward(m, d, g, wx, NULL, NULL, NULL);
  for (int p = 0; p < ds_param_count(); p++) {
    dsReal* gp;
    int n;
    ds_grad_param(g, ds_param_name(p), &gp, &n);
    if (n) h = hash(h, gp, (size_t)n * sizeof(dsReal));
  }
  free(wx);
  ds_grad_free(g);
  ds_data_free(d);
  ds_model_free(m);
  return h;
}

/* Bodies and deformables in one model: a 2x2x2 tet box (stable
 * Neo-Hookean) and a rigid box fall side by side onto the ground, 300
 * substeps; the loss weighs every final position. FD on tet.k_mu (first
 * tets), body.mass, body.initial_velocity, contact.ke (the soft box's
 * contact) and body.contact_kf: the element stages and the body stage
 * share the step and the backward without disturbing each other. */
static double mixed_loss(const dsModel* m, dsData* d, const dsReal* w) {
  ds_data_reset(m, d);
  for (int t = 0; t < 300; t++)
    if (ds_step(m, d)) {
      fprintf(stderr, "mixed: %s\n", ds_data_last_error(d));
      return NAN;
    }
  double L = 0;
  for (int k = 0; k < 3 * m->nparticle; k++) L += w[k] * d->x[k];
  return L;
}

static void test_mixed(void) {
  dsBuilder* b;
  ds_builder_create(&b);
  dsGroundDef gd = {1e3, 1, 5, 0.5, 0.0}; /* the soft box's vertices weigh ~10 g */
  ds_builder_set_ground(b, &gd);
  ds_builder_set_dt(b, 1e-3);
  dsTetMaterial te = {1e5, 1e5, 10};
  const dsReal o[3] = {-1, 0.05, 0}, vs[3] = {0.5, 0, 0};
  ds_builder_add_tet_grid(b, 2, 2, 2, 0.1, 0.1, 0.1, o, 500, vs, &te);
  dsRigidDef d = ds_default_rigid_def();
  d.mass = 1;
  d.restitution = 0.6;
  d.ke = 2e4;
  d.kf = 50;
  d.position[1] = 0.3;
  d.velocity[0] = 1;
  d.angular_velocity[2] = 2;
  const dsReal h[3] = {0.1, 0.1, 0.1};
  ds_builder_add_rigid_box(b, h, &d);
  dsModel* m = NULL;
  CHECK_INT_EQ(ds_builder_finalize(b, &m), 0);
  ds_builder_free(b);
  if (!m) return;
  dsDataDef dd = ds_default_data_def();
  dd.max_substeps = 300;
  dsData* da;
  dsGrad* g;
  ds_data_create(m, &dd, &da);
  ds_grad_create(m, &g);
  const int n3 = 3 * m->nparticle;
  dsReal* w = calloc((size_t)n3, sizeof(dsReal));
  for (int k = 0; k < n3; k++) w[k] = unif(-1, 1);
  mixed_loss(m, da, w);
  CHECK_INT_EQ(ds_backward(m, da, g, w, NULL, NULL, NULL), 0);
  static const char* const names[] = {"tet.k_mu", "body.mass", "body.initial_velocity", "contact.ke",
                                      "body.contact_kf"};
  Case c = {"mixed", 300, -1, {0}, 1e-4, 1e-6, 1e-6, 0};
  for (int p = 0; p < 5; p++) {
    const dsReal* pv;
    dsReal* ga;
    int n;
    ds_model_param(m, names[p], &pv, &n);
    ds_grad_param(g, names[p], &ga, &n);
    const int cnt = n < 4 ? n : 4;
    dsReal* base = malloc((size_t)n * sizeof(dsReal));
    memcpy(base, pv, (size_t)n * sizeof(dsReal));
    double a[4], f[4];
    for (int k = 0; k < cnt; k++) {
      const double hh = 1e-6 * fmax(fabs(base[k]), 1.0);
      base[k] += hh;
      ds_model_set_param(m, names[p], base, n);
      const double lp = mixed_loss(m, da, w);
      base[k] -= 2 * hh;
      ds_model_set_param(m, names[p], base, n);
      const double lm = mixed_loss(m, da, w);
      base[k] += hh;
      ds_model_set_param(m, names[p], base, n);
      /* compared as dL per relative change of the parameter */
      f[k] = (lp - lm) / (2 * hh) * fmax(fabs(base[k]), 1.0);
      a[k] = ga[k] * fmax(fabs(base[k]), 1.0);
    }
    check_class("bodies and a soft box", names[p], a, f, cnt, &c);
    free(base);
  }
  free(w);
  ds_grad_free(g);
  ds_data_free(da);
  ds_model_free(m);
}

/* The contact kernel across the smooth switch of the approach damping
 * (engine/rigid.h, a(vn) over -w < vn < 0): d f / d(v_y) and d f / d kd of
 * a vertex 1 mm deep, from the adjoint against central differences (step
 * 1e-5 w), at speeds below, inside and above the switch, and exactly at 0
 * (a is C2 there; at -w, where it is C1, value and slope are continuous). */
static void test_switch(void) {
  const double w = DS_RIGID_KD_WIDTH;
  const double vns[] = {-3 * w, -1.5 * w, -0.9 * w, -0.5 * w, -0.1 * w, -1e-2 * w, 0, 0.5 * w};
  int bad = 0;
  for (size_t i = 0; i < sizeof vns / sizeof vns[0]; i++) {
    dsRigidContact p = {2e4, 50, 50, 0.4, 1, 1, 0, 0, 0};
    const dsReal x[3] = {0, -1e-3, 0};
    dsReal v[3] = {0.3, (dsReal)vns[i], 0.1}, f[3], fp[3], fm[3];
    ds__rigid_contact_fwd(x, v, &p, f);
    const dsReal af[3] = {0.2, 1, -0.4};
    dsReal ax[3] = {0, 0, 0}, av[3] = {0, 0, 0};
    dsRigidContact ap = {0, 0, 0, 0, 0, 0, 0, 0, 0};
    ds__rigid_contact_bwd(x, v, &p, af, ax, av, &ap);
    const double h = 1e-5 * w;
    v[1] = (dsReal)(vns[i] + h);
    ds__rigid_contact_fwd(x, v, &p, fp);
    v[1] = (dsReal)(vns[i] - h);
    ds__rigid_contact_fwd(x, v, &p, fm);
    double fdv = 0, fdk = 0;
    for (int k = 0; k < 3; k++) fdv += af[k] * (fp[k] - fm[k]) / (2 * h);
    v[1] = (dsReal)vns[i];
    p.kd = 50 + 1e-4;
    ds__rigid_contact_fwd(x, v, &p, fp);
    p.kd = 50 - 1e-4;
    ds__rigid_contact_fwd(x, v, &p, fm);
    for (int k = 0; k < 3; k++) fdk += af[k] * (fp[k] - fm[k]) / 2e-4;
    /* atol: rounding of forces of 20 N over the step */
    const int ok = fabs(av[1] - fdv) <= 1e-5 * fmax(fabs(av[1]), fabs(fdv)) + 1e-6 &&
                   fabs(ap.kd - fdk) <= 1e-5 * fmax(fabs(ap.kd), fabs(fdk)) + 1e-9;
    if (!ok)
      fprintf(stderr, "switch: vn %g: dL/dvn %.10g fd %.10g, dL/dkd %.10g fd %.10g\n", vns[i], (double)av[1], fdv,
              (double)ap.kd, fdk);
    bad += !ok;
  }
  CHECK_INT_EQ(bad, 0);
  /* min(vn, 0) outside the switch, and continuity at its ends */
  dsReal da;
  CHECK(ds__rigid_approach(-2 * (dsReal)w, &da) == -2 * (dsReal)w && da == 1);
  CHECK(ds__rigid_approach((dsReal)w, &da) == 0 && da == 0);
  CHECK(fabs(ds__rigid_approach(-(dsReal)w * (1 - 1e-12), &da) + w) < 1e-12 && fabs(da - 1) < 1e-10);
}

/* rigid-toss's bundled start (issue 33 #8): the box rests in equilibrium
 * with every bottom vertex at v_y = 0 exactly, where the approach damping kd
 * switches on; the env's impulse (a wrench J/dt at the centre of mass over
 * substep 0, J = (2, 0, 0.2) N s), then 1 substep (tolerances of the single
 * cases) and 32 (the first frame; the rollout's). Every class against
 * central differences. With kd's switch a kink (min(vn, 0)) the initial
 * velocities' gradients were off by up to 3%. */
static void test_toss_start(void) {
  dsEnvDef def = ds_default_env_def("rigid-toss");
  def.width = def.height = 8;
  dsEnv* env = NULL;
  char err[512];
  CHECK_INT_EQ(ds_env_create(&def, &env, err, sizeof err), 0);
  if (!env) return;
  dsModel* m = ds_env_model_mut(env);
  CHECK(m->nbody == 1 && m->body_kd[0] > 0);
  double s[13];
  memcpy(s, m->body_x0, 3 * sizeof(double));
  memcpy(s + 3, m->body_q0, 4 * sizeof(double));
  memcpy(s + 7, m->body_v0, 3 * sizeof(double));
  memcpy(s + 10, m->body_w0, 3 * sizeof(double));
  CHECK(s[7] == 0 && s[8] == 0 && s[9] == 0);
  const double dt = m->dt;
  Case c = {"rigid-toss start: 1 substep", 1, 0, {2 / dt, 0, 0.2 / dt, 0, 0, 0}, 1e-5, 1e-7, 1e-6, 0};
  check_case(m, &c, s);
  c.name = "rigid-toss start: 32 substeps (its first frame)";
  c.T = 32, c.rtol = 1e-4, c.atol_rel = 1e-6;
  check_case(m, &c, s);
  ds_env_destroy(env);
}

/* The smooth variant of the contact (dsModel.contact_smooth = w > 0: the
 * damping faded in over the first w of depth, the friction's cap reached
 * through a tanh; engine/rigid.h): the kernel's adjoint of a weighted force
 * against central differences in every input (x, v, ke, kd, kf, mu, e, m,
 * skin) at depths inside and below the switch, tangential speeds in the
 * viscous part, at the knee and sliding, vt = 0, approaching and separating;
 * out of contact nothing. */
static double skernel_dot(const dsReal af[3], const dsReal x[3], const dsReal v[3], const dsRigidContact* p) {
  dsRigidContact q = *p;
  dsReal dz;
  q.z = ds__rigid_zeta(q.e, &dz); /* z follows e, as the model keeps it */
  dsReal f[3];
  ds__rigid_contact_fwd(x, v, &q, f);
  return (double)(af[0] * f[0] + af[1] * f[1] + af[2] * f[2]);
}

static void test_smooth_kernel(void) {
  const double w = 2e-3;
  const double depth[] = {-0.3 * w, -0.8 * w, -3 * w, 1e-4};
  const double vt[][2] = {{0, 0}, {2e-3, -1e-3}, {0.02, 0.01}, {0.5, -0.2}};
  const double vn[] = {-0.4, -0.3 * DS_RIGID_KD_WIDTH, 0.05};
  int bad = 0, n = 0;
  for (size_t a = 0; a < 4; a++)
    for (size_t b = 0; b < 4; b++)
      for (size_t c = 0; c < 3; c++) {
        dsRigidContact p = {2e4, 30, 80, 0.4, 0.6, 1.3, 1e-3, 0, (dsReal)w};
        dsReal dz;
        p.z = ds__rigid_zeta(p.e, &dz);
        dsReal x[3] = {0.1, (dsReal)(p.skin + depth[a]), -0.2}, v[3] = {(dsReal)vt[b][0], (dsReal)vn[c], (dsReal)vt[b][1]};
        const dsReal af[3] = {0.7, 1, -0.4};
        dsReal ax[3] = {0, 0, 0}, av[3] = {0, 0, 0};
        dsRigidContact ap = {0, 0, 0, 0, 0, 0, 0, 0, 0};
        ds__rigid_contact_bwd(x, v, &p, af, ax, av, &ap);
        /* inputs: x (3), v (3), then ke, kd, kf, mu, e, m, skin */
        dsReal* in[13] = {&x[0], &x[1], &x[2], &v[0], &v[1], &v[2], &p.ke, &p.kd, &p.kf, &p.mu, &p.e, &p.m, &p.skin};
        const double ad[13] = {ax[0], ax[1], ax[2], av[0], av[1], av[2], ap.ke, ap.kd, ap.kf, ap.mu, ap.e, ap.m, ap.skin};
        for (int k = 0; k < 13; k++) {
          const dsReal v0 = *in[k];
          /* steps well inside every smooth piece: 1e-3 of the switch's width for lengths and speeds */
          const double h = k < 6 ? (k == 3 || k == 5 ? 1e-7 : 1e-6 * w) : 1e-6 * fmax(fabs((double)v0), 1e-3);
          *in[k] = (dsReal)(v0 + h);
          const double lp = skernel_dot(af, x, v, &p);
          *in[k] = (dsReal)(v0 - h);
          const double lm = skernel_dot(af, x, v, &p);
          *in[k] = v0;
          const double fd = (lp - lm) / (2 * h);
          const int ok = fabs(ad[k] - fd) <= 1e-5 * fmax(fabs(ad[k]), fabs(fd)) + 1e-6;
          if (!ok)
            fprintf(stderr, "smooth kernel: depth %g vt (%g, %g) vn %g input %d: adjoint %.10g fd %.10g\n", depth[a],
                    vt[b][0], vt[b][1], vn[c], k, ad[k], fd);
          bad += !ok;
          n++;
        }
        if (depth[a] > 0) { /* out of contact: no force, no gradient */
          double s = 0;
          for (int k = 0; k < 13; k++) s += fabs(ad[k]);
          CHECK(s == 0);
        }
      }
  CHECK_INT_EQ(bad, 0);
  CHECK_INT_EQ(n, 4 * 4 * 3 * 13);
  /* continuity at touch-down: the force just inside the surface is that of the spring alone */
  dsRigidContact p = {2e4, 30, 80, 0.4, 0.6, 1.3, 0, 0, (dsReal)w};
  dsReal dz;
  p.z = ds__rigid_zeta(p.e, &dz);
  const dsReal x[3] = {0, -1e-9, 0}, v[3] = {0, -1, 0};
  dsReal f[3];
  ds__rigid_contact_fwd(x, v, &p, f);
  CHECK(fabs(f[1] - 2e4 * 1e-9) < 1e-9);
}

/* A rigid-toss rollout in the smooth variant: the box pushed (J = (1, 0.3,
 * 0.2) N s at the centre of mass), lifting, touching down and sliding to
 * rest over 400 substeps; every parameter class against central
 * differences. */
static void test_smooth_rollout(void) {
  dsEnvDef def = ds_default_env_def("rigid-toss");
  def.width = def.height = 8;
  def.contact_smooth = 2e-3;
  dsEnv* env = NULL;
  char err[512];
  CHECK_INT_EQ(ds_env_create(&def, &env, err, sizeof err), 0);
  if (!env) return;
  dsModel* m = ds_env_model_mut(env);
  CHECK(m->contact_smooth == (dsReal)2e-3);
  double s[13];
  memcpy(s, m->body_x0, 3 * sizeof(double));
  memcpy(s + 3, m->body_q0, 4 * sizeof(double));
  memcpy(s + 7, m->body_v0, 3 * sizeof(double));
  memcpy(s + 10, m->body_w0, 3 * sizeof(double));
  const double dt = m->dt;
  Case c = {"rigid-toss smooth contact: 200 substeps, a slide to rest", 200, 0,
            {0.5 / dt, 0, 0.1 / dt, 0, 0, 0}, 1e-4, 1e-6, 1e-6, 0};
  check_case(m, &c, s);
  ds_env_destroy(env);
}

int main(void) {
  test_mixed();
  {
    const int nth0 = ds_get_max_threads();
    unsigned long long h1 = many_bodies(1), h2 = many_bodies(2), h3 = many_bodies(3);
    if (h1 != h2 || h1 != h3) fprintf(stderr, "many bodies: thread count changes the bits\n");
    CHECK(h1 == h2 && h1 == h3);
    ds_set_num_threads(nth0);
  }
  if (sizeof(dsReal) != sizeof(double)) DST_SKIP("finite-difference checks need a double build");
  dsModel* m = build();
  CHECK(m != NULL);
  if (!m) return DST_RESULT();
  CHECK_INT_EQ(m->nbody, 2);
  const double qid[4] = {1, 0, 0, 0};
  double s[26];
  Case c1 = {"single", 1, 0, {3, -2, 1, 0.5, 0.2, -0.3}, 1e-5, 1e-7, 1e-6, 0};

  /* free flight, random pose and twist, high above the ground */
  for (int b = 0; b < 2; b++) {
    double* sb = s + 13 * b;
    sb[0] = unif(-1, 1) + 2 * b, sb[1] = unif(1, 2), sb[2] = unif(-1, 1);
    rand_quat(sb + 3);
    for (int k = 0; k < 3; k++) sb[7 + k] = unif(-2, 2), sb[10 + k] = unif(-5, 5);
  }
  c1.name = "single: free flight";
  check_case(m, &c1, s);

  /* resting: box flat on the ground, sinking by its weight per corner; sphere on its pole */
  memset(s, 0, sizeof s);
  memcpy(s + 3, qid, sizeof qid);
  memcpy(s + 16, qid, sizeof qid);
  s[1] = 0.1 - 9.8 * 1.0 / 4 / 2e4;
  s[13] = 2, s[14] = 0.2 - 9.8 * 0.5 / 2e4;
  /* the box approaching faster than the approach damping's switch (kd fully
     on, engine/rigid.h), the sphere separating (kd off); v_y = 0 itself is
     rigid-toss's start (test_toss_start) */
  s[8] = -2 * DS_RIGID_KD_WIDTH, s[21] = 1e-3;
  c1.name = "single: resting";
  check_case(m, &c1, s);

  /* sliding: box on the ground moving at 2 m/s (the Coulomb cap binds); sphere rolling */
  s[7] = 2, s[9] = 0.5;
  s[20] = 1, s[25] = -5;
  c1.name = "single: sliding";
  check_case(m, &c1, s);

  /* spinning on the ground about a tilted axis: sticking at some corners, sliding at others */
  s[7] = 0, s[9] = 0;
  s[10] = 0.3, s[11] = 4, s[12] = -0.2;
  s[23] = 1, s[24] = 3, s[25] = 0.5;
  c1.name = "single: spinning";
  check_case(m, &c1, s);

  /* contact onset: tilted box, one corner just below the surface, approaching */
  double qt[4] = {cos(0.2), sin(0.2) / sqrt(2), 0, sin(0.2) / sqrt(2)};
  memcpy(s + 3, qt, sizeof qt);
  s[1] = 0.22, s[7] = 0.3, s[8] = -1, s[9] = 0, s[10] = 1, s[11] = 0, s[12] = 0.5;
  {
    /* lower the box so that its lowest vertex sits 1e-4 below y = 0 */
    dsDataDef dd = ds_default_data_def();
    dsData* d;
    memcpy(m->body_x0, s, 3 * sizeof(double));
    memcpy(m->body_q0, s + 3, 4 * sizeof(double));
    ds_data_create(m, &dd, &d);
    double ymin = 1e9;
    for (int i = m->body_vrange[0]; i < m->body_vrange[1]; i++) ymin = fmin(ymin, d->x[3 * i + 1]);
    s[1] -= ymin + 1e-4;
    ds_data_free(d);
  }
  s[14] = 0.2 - 1e-4, s[21] = -0.5;
  c1.name = "single: contact onset";
  check_case(m, &c1, s);
  check_restitution_bound(m, &c1, s);

  /* rollouts: thrown, bounce (e = 0.5, 0.8), slide and spin; impulse at substep 100 */
  /* steps relative to the parameter down to 0.01 (inertia entries are ~0.02
     kg m^2: a unit floor would move touch-downs across substeps) */
  Case c2 = {"rollout", 500, 100, {40, 30, -10, 2, -1, 3}, 1e-4, 1e-6, 1e-6, 0.01};
  memset(s, 0, sizeof s);
  rand_quat(s + 3);
  s[0] = 0, s[1] = 0.5, s[2] = 0, s[7] = 1.5, s[8] = 0.5, s[9] = -0.3, s[10] = 2, s[11] = -1, s[12] = 3;
  s[13] = 2, s[14] = 0.3, s[16] = 1, s[20] = -0.5, s[23] = 1;
  c2.name = "rollout 500: bounces and sliding";
  check_case(m, &c2, s);
  check_restitution_bound(m, &c2, s);

  /* the checkpointed tape (every 16th state, segments recomputed) gives the
     same gradients bit for bit */
  {
    dsDataDef d1 = ds_default_data_def(), d2 = ds_default_data_def();
    d1.max_substeps = d2.max_substeps = c2.T;
    d2.checkpoint_every = 16;
    dsData *da, *db;
    dsGrad *ga, *gb;
    ds_data_create(m, &d1, &da);
    ds_data_create(m, &d2, &db);
    ds_grad_create(m, &ga);
    ds_grad_create(m, &gb);
    const int n3 = 3 * m->nparticle;
    Weights w;
    w.wx = calloc((size_t)n3, sizeof(double));
    w.wv = calloc((size_t)n3, sizeof(double));
    w.wmid = calloc((size_t)n3, sizeof(double));
    w.wb = calloc(26, sizeof(double));
    for (int k = 0; k < n3; k++) w.wx[k] = unif(-1, 1), w.wv[k] = unif(-1, 1), w.wmid[k] = unif(-1, 1);
    for (int k = 0; k < 26; k++) w.wb[k] = unif(-1, 1);
    double gwa[6], gwb[6];
    CHECK_INT_EQ(grad(m, da, ga, &c2, &w, c2.wrench, gwa), 0);
    CHECK_INT_EQ(grad(m, db, gb, &c2, &w, c2.wrench, gwb), 0);
    int same = memcmp(gwa, gwb, sizeof gwa) == 0;
    for (int p = 0; p < ds_param_count(); p++) {
      dsReal *pa, *pb;
      int na, nb;
      ds_grad_param(ga, ds_param_name(p), &pa, &na);
      ds_grad_param(gb, ds_param_name(p), &pb, &nb);
      if (na && memcmp(pa, pb, (size_t)na * sizeof(dsReal))) {
        fprintf(stderr, "checkpointed gradient of %s differs\n", ds_param_name(p));
        same = 0;
      }
    }
    CHECK(same);
    free(w.wx), free(w.wv), free(w.wmid), free(w.wb);
    ds_grad_free(ga), ds_grad_free(gb);
    ds_data_free(da), ds_data_free(db);
  }
  test_switch();
  test_toss_start();
  test_smooth_kernel();
  test_smooth_rollout();
  printf("%d parameter classes checked\n", g_classes);
  ds_model_free(m);
  return DST_RESULT();
}

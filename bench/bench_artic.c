/* Articulated-body benchmark (figures, not a test), one thread: forward
 * steps per second and the time to the gradient of a 1,000-step rollout
 * loss with respect to every action (and, separately, every parameter too)
 * for a double pendulum and a 16-link hinge chain (alternating axes, a
 * motor on every joint), median of 5 runs.
 * Usage: bench_artic [quick]   ("quick": 100 steps, for smoke runs) */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsim/artic.h"
#include "bench/bench.h"

static void die(const char* what, int rc, const char* msg) {
  fprintf(stderr, "bench_artic: %s: %s (%s)\n", what, ds_err_name(rc), msg ? msg : "");
  exit(1);
}

/* n links of length 0.5 m hanging from the world, hinge axes alternating y, x. */
static dsArticModel* chain(int n) {
  dsArticBuilder* b;
  ds_artic_builder_create(&b);
  char name[32], jname[32], parent[32], aname[32];
  for (int i = 0; i < n; i++) {
    dsArticBodyDef bd = ds_artic_default_body_def();
    snprintf(name, sizeof name, "link%d", i);
    bd.name = name;
    bd.mass = 1;
    bd.inertia[0] = bd.inertia[1] = 1.0 / 12 * 0.25;
    bd.inertia[2] = 1e-3;
    int rc = ds_artic_add_body(b, &bd);
    if (rc) die("add_body", rc, ds_artic_builder_error(b));
    dsArticJointDef jd = ds_artic_default_joint_def();
    snprintf(jname, sizeof jname, "joint%d", i);
    snprintf(parent, sizeof parent, "link%d", i - 1);
    jd.name = jname;
    jd.parent = i ? parent : NULL;
    jd.child = name;
    jd.axis[0] = i % 2;
    jd.axis[1] = 1 - i % 2;
    jd.axis[2] = 0;
    jd.anchor_parent[2] = i ? -0.25 : 0;
    jd.anchor_child[2] = 0.25;
    jd.damping = 0.01;
    if ((rc = ds_artic_add_joint(b, &jd))) die("add_joint", rc, ds_artic_builder_error(b));
    dsArticActuatorDef ad = ds_artic_default_actuator_def();
    snprintf(aname, sizeof aname, "motor%d", i);
    ad.name = aname;
    ad.joint = jname;
    if ((rc = ds_artic_add_actuator(b, &ad))) die("add_actuator", rc, ds_artic_builder_error(b));
  }
  dsArticOptions o = ds_artic_default_options();
  o.dt = 1e-3;
  dsArticModel* m;
  int rc = ds_artic_build(b, &o, &m);
  if (rc) die("build", rc, ds_artic_builder_error(b));
  ds_artic_builder_free(b);
  return m;
}

static void run(const char* label, int n, int T) {
  dsArticModel* m = chain(n);
  const int nq = ds_artic_nq(m), nv = ds_artic_nv(m), nu = ds_artic_nu(m), np = ds_artic_nparam(m);
  dsArticData* d;
  int rc = ds_artic_data_create(m, T, &d);
  if (rc) die("data_create", rc, "");
  double* q0 = calloc((size_t)nq, sizeof(double));
  double* act = calloc((size_t)T * nu, sizeof(double));
  double* dq = calloc((size_t)(T + 1) * nq, sizeof(double));
  double* ga = calloc((size_t)T * nu, sizeof(double));
  double* gp = calloc((size_t)np, sizeof(double));
  for (int k = 0; k < nq; k++) q0[k] = 0.3 + 0.05 * k;
  for (int k = 0; k < T * nu; k++) act[k] = 0.1 * ((k * 7919) % 13 - 6);
  for (int k = 0; k < nq; k++) dq[(size_t)T * nq + k] = 1;
  double tf[5], tg[5], tgp[5];
  for (int r = 0; r < 5; r++) {
    ds_artic_reset(m, d, q0, NULL);
    double t0 = now();
    for (int t = 0; t < T; t++)
      if ((rc = ds_artic_step(m, d, act + (size_t)t * nu))) die("step", rc, "");
    tf[r] = now() - t0;
    dsArticGrad g = {NULL, NULL, ga, NULL};
    t0 = now();
    if ((rc = ds_artic_backward(m, d, dq, NULL, &g))) die("backward", rc, "");
    tg[r] = tf[r] + now() - t0;
    dsArticGrad gall = {NULL, NULL, ga, gp};
    t0 = now();
    if ((rc = ds_artic_backward(m, d, dq, NULL, &gall))) die("backward", rc, "");
    tgp[r] = tf[r] + now() - t0;
  }
  const double f = median(tf, 5), g = median(tg, 5), gpar = median(tgp, 5);
  printf(
      "%-16s nv %2d nu %2d nparam %3d: forward %9.0f steps/s; %d-step gradient (forward + backward): "
      "actions %.4f s, actions and parameters %.4f s\n",
      label, nv, nu, np, T / f, T, g, gpar);
  free(q0);
  free(act);
  free(dq);
  free(ga);
  free(gp);
  ds_artic_data_free(d);
  ds_artic_model_free(m);
}

int main(int argc, char** argv) {
  const int T = argc > 1 && !strcmp(argv[1], "quick") ? 100 : 1000;
  run("double pendulum", 2, T);
  run("16-link chain", 16, T);
  return 0;
}

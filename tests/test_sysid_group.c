/* Sysid groups (ds_sysid_group_*): objects identified together, every
 * evaluation in one lockstep batch. Three objects (draws 0, 2 and 5: their
 * own true values and guesses) of a clamped beam, Adam on tet.k_mu and
 * gravity, against the same objects identified one by one:
 *   - on separate CPU engines: every iteration's loss, gradient norm,
 *     evaluations and estimates bitwise equal (also with a learning rate so
 *     large that steps invert elements and are halved back);
 *   - on one batched engine (def.batch_engine; what a GPU runs): within
 *     1e-9 relative over the iterations (the engine sums in other groupings);
 *   - the objects' own accessors (truth, forward evaluation) as a separate
 *     object's; L-BFGS refused with a message;
 *   - ds_sysid_group_eval (a landscape's grid: copies of one object at
 *     several points, one diverging): losses and gradients as ds_sysid_eval
 *     gives them, bitwise on separate engines, 1e-9 on one engine.
 * The beam on the implicit integrator (8x its step): a group on one
 * batched engine against the objects one by one, within 1e-9.
 * With a CUDA device visible, the small-step run also goes on cuda:0
 * (within 1e-9). */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsim/env.h"
#include "dsim/sysid.h"
#include "tests/dstest.h"

#define NOBJ 3
#define ITERS 6
static const int g_objects[NOBJ] = {0, 2, 5};

/* the beam on the implicit integrator at 8x its step */
static int g_implicit = 0;

/* mode 0: separate CPU engines; 1: one batched engine on the CPU; 2: on cuda:0 */
static dsEnvDef small_beam(int mode) {
  dsEnvDef ed = ds_default_env_def("beam");
  char err[256];
  ds_env_def_set(&ed, "beam.cells", "[3, 1, 1]", err, sizeof err);
  ds_env_def_set(&ed, "beam.clamp", "true", err, sizeof err);
  ed.substeps = 256;
  ed.render_interval = 64;
  if (g_implicit) {
    CHECK_INT_EQ(ds_env_def_set(&ed, "physics.integrator", "implicit", err, sizeof err), 0);
    ed.dt *= 8;
    ed.substeps = 32;
    ed.render_interval = 8;
  }
  ed.width = ed.height = 16;
  ed.sigma = (dsReal)1e-3;
  ed.cam_distance = 2;
  ed.batch_engine = mode >= 1;
  if (mode == 2) ed.device = (dsDevice){DS_DEVICE_CUDA, 0};
  return ed;
}

static dsSysidDef sysid_def(double lr) {
  dsSysidDef sd = ds_default_sysid_def();
  dsSysidParam* p = &sd.params[0];
  snprintf(p->name, sizeof p->name, "tet.k_mu");
  p->lower = 1;
  p->upper = (dsReal)1e12;
  const int big = lr > 1; /* far from the truth, steps that overshoot into failures */
  p->init_range[0] = big ? 800 : 500;
  p->init_range[1] = big ? 1200 : 1500;
  p->ninit_range = 2;
  p->truth_range[0] = big ? 4000 : 800;
  p->truth_range[1] = big ? 6000 : 1200;
  p->ntruth_range = 2;
  p = &sd.params[1];
  snprintf(p->name, sizeof p->name, "gravity");
  p->lower = -40;
  p->upper = 40;
  p->init[0] = -7;
  p->ninit = 1;
  p->truth[0] = (dsReal)-9.8;
  p->ntruth = 1;
  sd.optimizer = DS_SYSID_ADAM;
  sd.lr = (dsReal)lr;
  sd.seed = 11;
  return sd;
}

typedef struct Trace {
  double loss[NOBJ][ITERS], gnorm[NOBJ][ITERS], values[NOBJ][ITERS][8];
  int evals[NOBJ][ITERS], nval;
} Trace;
static Trace ref, got;

static void separate(double lr, Trace* t) {
  dsEnvDef ed = small_beam(0);
  dsSysidDef sd = sysid_def(lr);
  for (int i = 0; i < NOBJ; i++) {
    dsSysid* s = NULL;
    char err[512];
    CHECK_INT_EQ(ds_sysid_create(&ed, &sd, g_objects[i], NULL, &s, err, sizeof err), 0);
    if (!s) {
      printf("%s\n", err);
      return;
    }
    t->nval = ds_sysid_num_values(s);
    for (int k = 0; k < ITERS; k++) {
      dsSysidIter it;
      CHECK_INT_EQ(ds_sysid_iterate(s, &it), 0);
      t->loss[i][k] = it.loss;
      t->gnorm[i][k] = it.grad_norm;
      t->evals[i][k] = it.evaluations;
      memcpy(t->values[i][k], it.values, (size_t)t->nval * sizeof(double));
    }
    ds_sysid_destroy(s);
  }
}

static void grouped(double lr, int mode, Trace* t) {
  const int batch_engine = mode >= 1;
  dsEnvDef ed = small_beam(mode);
  dsSysidDef sd = sysid_def(lr);
  dsSysidGroup* g = NULL;
  char err[512];
  CHECK_INT_EQ(ds_sysid_group_create(&ed, &sd, g_objects, NOBJ, NULL, &g, err, sizeof err), 0);
  if (!g) {
    printf("%s\n", err);
    return;
  }
  CHECK_INT_EQ(ds_sysid_group_size(g), NOBJ);
  t->nval = ds_sysid_num_values(ds_sysid_group_object(g, 0));
  for (int k = 0; k < ITERS; k++) {
    dsSysidIter its[NOBJ];
    int status[NOBJ];
    CHECK_INT_EQ(ds_sysid_group_iterate(g, its, status), 0);
    for (int i = 0; i < NOBJ; i++) {
      CHECK_INT_EQ(status[i], 0);
      CHECK_INT_EQ(its[i].iteration, k);
      t->loss[i][k] = its[i].loss;
      t->gnorm[i][k] = its[i].grad_norm;
      t->evals[i][k] = its[i].evaluations;
      memcpy(t->values[i][k], its[i].values, (size_t)t->nval * sizeof(double));
    }
  }
  /* an object of the group is a dsSysid: its truth and a forward evaluation */
  dsSysid* s1 = ds_sysid_group_object(g, 1);
  dsSysid* s = NULL;
  CHECK_INT_EQ(ds_sysid_create(&ed, &sd, g_objects[1], NULL, &s, err, sizeof err), 0);
  if (s && s1) {
    CHECK(memcmp(ds_sysid_truth(s), ds_sysid_truth(s1), (size_t)t->nval * sizeof(double)) == 0);
    double l0 = 0, l1 = 0;
    CHECK_INT_EQ(ds_sysid_eval(s, ds_sysid_values(s1), &l0, NULL), 0);
    CHECK_INT_EQ(ds_sysid_eval(s1, ds_sysid_values(s1), &l1, NULL), 0);
    CHECK(l0 == l1 || batch_engine); /* the object's own env is a separate CPU env */
  }
  ds_sysid_destroy(s);
  CHECK(ds_sysid_group_object(g, NOBJ) == NULL);
  ds_sysid_group_destroy(g);
}

static void compare(const char* what, double tol) {
  CHECK_INT_EQ(got.nval, ref.nval);
  for (int i = 0; i < NOBJ; i++)
    for (int k = 0; k < ITERS; k++) {
      int bad = got.evals[i][k] != ref.evals[i][k];
      const double a[2] = {ref.loss[i][k], ref.gnorm[i][k]}, b[2] = {got.loss[i][k], got.gnorm[i][k]};
      for (int q = 0; q < 2; q++) bad |= !(fabs(a[q] - b[q]) <= tol * fabs(a[q]));
      for (int j = 0; j < ref.nval; j++)
        bad |= !(fabs(ref.values[i][k][j] - got.values[i][k][j]) <= tol * fabs(ref.values[i][k][j]));
      if (bad)
        DST_FAIL_AT("%s: object %d, iteration %d: loss %.17g / %.17g, grad %.17g / %.17g, evaluations %d / %d", what,
                    g_objects[i], k, ref.loss[i][k], got.loss[i][k], ref.gnorm[i][k], got.gnorm[i][k],
                    ref.evals[i][k], got.evals[i][k]);
    }
}

static void grid_eval(int mode) {
  dsEnvDef ed = small_beam(mode);
  dsEnvDef es = small_beam(0);
  dsSysidDef sd = sysid_def(0.05);
  const int objs[NOBJ] = {2, 2, 2};
  dsSysidGroup* g = NULL;
  dsSysid* s = NULL;
  char err[512];
  CHECK_INT_EQ(ds_sysid_group_create(&ed, &sd, objs, NOBJ, NULL, &g, err, sizeof err), 0);
  CHECK_INT_EQ(ds_sysid_create(&es, &sd, 2, NULL, &s, err, sizeof err), 0);
  if (g && s) {
    const int nv = ds_sysid_num_values(s);
    double x[NOBJ * 8], loss[NOBJ], grad[NOBJ * 8];
    int status[NOBJ];
    for (int i = 0; i < NOBJ; i++) {
      memcpy(x + (size_t)i * nv, ds_sysid_truth(s), (size_t)nv * sizeof(double));
      x[(size_t)i * nv] *= i == 2 ? 1e7 : 0.7 + 0.3 * i; /* k_mu; the last one far too stiff: it diverges */
    }
    const int rc = ds_sysid_group_eval(g, x, loss, grad, status);
    CHECK(rc != 0 && status[2] != 0 && isinf(loss[2]));
    CHECK(status[0] == 0 && status[1] == 0);
    for (int i = 0; i < 2; i++) {
      double l = 0, gr[8];
      CHECK_INT_EQ(ds_sysid_eval(s, x + (size_t)i * nv, &l, gr), 0);
      const double tol = mode ? (DS_SINGLE ? 1e-4 : 1e-9) : 0; /* the batched engine: other groupings */
      int bad = !(fabs(l - loss[i]) <= tol * fabs(l));
      for (int j = 0; j < nv; j++) bad |= !(fabs(gr[j] - grad[(size_t)i * nv + j]) <= tol * fabs(gr[j]) + 1e-300);
      if (bad) DST_FAIL_AT("group eval (mode %d), point %d: loss %.17g / %.17g", mode, i, l, loss[i]);
    }
    double l2 = 0;
    CHECK(ds_sysid_eval(s, x + 2 * (size_t)nv, &l2, NULL) != 0); /* the single object diverges there too */
  }
  ds_sysid_destroy(s);
  ds_sysid_group_destroy(g);
}

int main(void) {
  const double lrs[2] = {0.05, 9.0};
  int halved = 0;
  for (int r = 0; r < 2; r++) {
    memset(&ref, 0, sizeof ref);
    separate(lrs[r], &ref);
    for (int i = 0; i < NOBJ; i++)
      for (int k = 0; k < ITERS; k++) halved += ref.evals[i][k] > 1;
    memset(&got, 0, sizeof got);
    grouped(lrs[r], 0, &got);
    compare(r ? "separate engines, large steps" : "separate engines", 0);
    memset(&got, 0, sizeof got);
    grouped(lrs[r], 1, &got);
    compare(r ? "one engine, large steps" : "one engine", DS_SINGLE ? 1e-4 : 1e-9); /* float: its rounding */
    if (r == 0 && ds_cuda_device_count() > 0) {
      memset(&got, 0, sizeof got);
      grouped(lrs[r], 2, &got);
      compare("one engine on cuda:0", DS_SINGLE ? 1e-4 : 1e-9);
      printf("group on cuda:0 compared\n");
    }
    printf("lr %g: object %d loss %.6g -> %.6g, %d evaluations in the last iteration\n", lrs[r], g_objects[0],
           ref.loss[0][0], ref.loss[0][ITERS - 1], ref.evals[0][ITERS - 1]);
  }
  printf("iterations that halved a failed step: %d\n", halved);
  CHECK(halved > 0);
  grid_eval(0);
  grid_eval(1);
  if (ds_cuda_device_count() > 0) grid_eval(2);
  /* the implicit integrator: a group on one batched engine (its CPU backend; checked in double,
     as tests/test_implicit) */
  g_implicit = !DS_SINGLE;
  if (g_implicit) {
    memset(&ref, 0, sizeof ref);
    separate(lrs[0], &ref);
    memset(&got, 0, sizeof got);
    grouped(lrs[0], 1, &got);
    compare("one engine, implicit", 1e-9);
    printf("implicit: object %d loss %.6g -> %.6g\n", g_objects[0], ref.loss[0][0], ref.loss[0][ITERS - 1]);
    CHECK(ref.loss[0][ITERS - 1] < ref.loss[0][0]);
    g_implicit = 0;
  }
  /* L-BFGS is refused */
  dsEnvDef ed = small_beam(0);
  dsSysidDef sd = sysid_def(0.5);
  sd.optimizer = DS_SYSID_LBFGS;
  dsSysidGroup* g = NULL;
  char err[512];
  CHECK_INT_EQ(ds_sysid_group_create(&ed, &sd, g_objects, NOBJ, NULL, &g, err, sizeof err), DS_ERR_UNSUPPORTED);
  CHECK(g == NULL && strstr(err, "lbfgs"));
  return DST_RESULT();
}

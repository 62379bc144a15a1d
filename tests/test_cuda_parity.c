/* The CUDA backend of the batched engine against its CPU backend, in
 * double: for the model of every registered env without rigid bodies, two
 * instances with their own parameters, 1,000 substeps (10 control steps of
 * 100) forward and backward with a full tape and with a checkpointed one;
 * final states, control adjoints and every parameter's gradient agree
 * within 1e-10, relative to the largest magnitude of each block (state,
 * control adjoints, one parameter's gradient). Both backends run the same
 * bodies (engine/batch_body.h); the CUDA objects are built with -fmad=false,
 * so differences come from the device's libm (atan2, log, ...) only.
 * Exit 77 (skip) without a CUDA device. DSIM_PARITY_SELFTEST=1 compares the
 * CPU backend with itself instead (the test's own logic, without a GPU);
 * DSIM_PARITY_SHORT=1 runs short episodes (for compute-sanitizer).
 *
 * The device run is also repeated three times on one batch (gradients
 * zeroed between): the last must give the first run's bits (no state left
 * behind, no schedule-dependent sums on the device), and once with
 * DSIM_CUDA_SPLIT_PAIRS=1, which runs every fused launch of the backward
 * one stage at a time (the path of large batches): the same bits again.
 *
 * Articulated models (engine/batch_artic_body.h: one thread per instance
 * runs the reduced-coordinate step, its adjoint and the posing of the
 * vertices): the double pendulum, the runner (slides and hinges with
 * limits, motors, ground contact) and a chain built here (limited hinges,
 * a ball joint, a limited slide, servos, ground contact), B = 1, 3 and 64
 * instances, full and checkpointed (K = 8) tapes, 200 substeps: states,
 * the actions' adjoints and every gradient within 1e-8 relative. The
 * articulation's kernels call sin, cos, exp, log, tanh and hypot, where the
 * device's libm may differ from glibc by an ulp or two, and a chain in
 * ground contact amplifies such differences over a rollout (the particle
 * models' 1e-10 is kept for them); a wrong stage differs at O(1). */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "config.h"

#include <math.h>

#include "dstest.h"
#include "batchtest.h"
#include "dsim/artic.h"
#include "dsim/device.h"
#include "dsim/mesh.h"

/* ||a - b||_inf / ||a||_inf over n reals (0 when both are 0) */
static double rel_block(const dsReal* a, const dsReal* b, size_t n, int* bitwise) {
  double num = 0, den = 0;
  for (size_t k = 0; k < n; k++) {
    const double d = fabs((double)a[k] - (double)b[k]);
    if (!(a[k] == b[k])) *bitwise = 0;
    if (d > num || d != d) num = d;
    if (fabs((double)a[k]) > den) den = fabs((double)a[k]);
  }
  return num == 0 ? 0 : num / (den > 0 ? den : 1e-300);
}

static dsDevice g_dev = {DS_DEVICE_CUDA, 0};

/* B instances, C control steps of S substeps, checkpoint every K; tol:
 * the largest relative difference allowed */
static void parity_run(const char* name, const dsModel* m, int B, int C, int S, int K, double tol) {
  btEpisode e;
  bt_episode(&e, m, B, C, S, 0.02);
  const size_t len = bt_result_len(m, C), n3 = 3 * (size_t)m->nparticle;
  dsReal* ref = (dsReal*)calloc((size_t)B * len, sizeof(dsReal));
  dsReal* got = (dsReal*)calloc((size_t)B * len, sizeof(dsReal));
  bt_run_batch(m, &e, K, ds_device_cpu(), ref);
  bt_run_batch(m, &e, K, g_dev, got);
  dsReal* again = (dsReal*)calloc((size_t)B * len, sizeof(dsReal));
  bt_repeats = 3;
  bt_run_batch(m, &e, K, g_dev, again);
  bt_repeats = 1;
  dst_checks++;
  if (memcmp(again, got, (size_t)B * len * sizeof(dsReal)) != 0)
    DST_FAIL_AT("%s (K %d): a repeated episode differs from the first", name, K);
  setenv("DSIM_CUDA_SPLIT_PAIRS", "1", 1);
  bt_run_batch(m, &e, K, g_dev, again);
  unsetenv("DSIM_CUDA_SPLIT_PAIRS");
  dst_checks++;
  if (memcmp(again, got, (size_t)B * len * sizeof(dsReal)) != 0)
    DST_FAIL_AT("%s (K %d): launches split one stage at a time differ from fused ones", name, K);
  free(again);
  double worst = 0;
  const char* worst_at = "";
  int bitwise = 1;
  for (int b = 0; b < B; b++) {
    const dsReal* r = ref + b * len;
    const dsReal* g = got + b * len;
    size_t o = 0;
    double q;
#define BLOCK(label, n)                         \
  q = rel_block(r + o, g + o, (n), &bitwise);   \
  if (!(q <= worst)) {                          \
    worst = q;                                  \
    worst_at = (label);                         \
  }                                             \
  o += (n);
    BLOCK("x_T", n3);
    BLOCK("v_T", n3);
    BLOCK("control adjoints", (size_t)C * (bt_nact(m) + n3));
    for (int k = 0; k < ds_param_count(); k++) {
      const dsReal* p;
      int n;
      if (ds_model_param(m, ds_param_name(k), &p, &n)) continue;
      BLOCK(ds_param_name(k), (size_t)n);
    }
#undef BLOCK
  }
  dst_checks++;
  if (!(worst <= tol))
    DST_FAIL_AT("%s (B %d, K %d): CUDA differs from the CPU by %.3g (relative) in %s", name, B, K, worst, worst_at);
  printf("%-16s B %-2d K %-2d %d substeps fwd+bwd: max relative difference %.3g (%s)%s\n", name, B, K, C * S, worst,
         worst_at[0] ? worst_at : "-", bitwise ? ", bitwise equal" : "");
  free(ref);
  free(got);
  bt_episode_free(&e);
}

/* DSIM_PARITY_SHORT=1: 2 control steps of 20 substeps, articulations at B
 * = 1 and 3 only (what a run under compute-sanitizer, tens of times
 * slower, can afford: the same stages and launches, fewer of them) */
static int g_short = 0;

static void parity_env(const char* name, const dsModel* m, int K) {
  if (g_short)
    parity_run(name, m, 2, 2, 20, K > 1 ? 8 : 1, 1e-10);
  else
    parity_run(name, m, 2, 10, 100, K, 1e-10);
}

/* A 4-link chain over the ground: hinge (limited), ball, hinge (limited),
 * slide (limited), a sphere on each link, servos on the hinges and a motor
 * on the slide; each link carries a triangle of vertices. */
static dsModel* chain_model(void) {
  dsArticBuilder* ab;
  if (ds_artic_builder_create(&ab)) return NULL;
  static const char* const names[4] = {"l0", "l1", "l2", "l3"};
  static const char* const jn[4] = {"j0", "j1", "j2", "j3"};
  static const dsJointType types[4] = {DS_JOINT_HINGE, DS_JOINT_BALL, DS_JOINT_HINGE, DS_JOINT_SLIDE};
  int rc = 0;
  for (int i = 0; i < 4 && !rc; i++) {
    dsArticBodyDef bd = ds_artic_default_body_def();
    bd.name = names[i];
    bd.mass = 0.5 + 0.1 * i;
    bd.inertia[0] = bd.inertia[1] = 0.01, bd.inertia[2] = 0.002;
    rc = ds_artic_add_body(ab, &bd);
    dsArticJointDef jd = ds_artic_default_joint_def();
    jd.name = jn[i];
    jd.type = types[i];
    jd.parent = i ? names[i - 1] : NULL;
    jd.child = names[i];
    jd.axis[0] = i == 3, jd.axis[1] = i != 3, jd.axis[2] = 0;
    jd.anchor_parent[2] = i ? -0.15 : 0.5;
    jd.anchor_child[2] = 0.15;
    jd.damping = 0.05;
    jd.limited = types[i] != DS_JOINT_BALL;
    jd.limit_lower = -0.6, jd.limit_upper = 0.5;
    if (!rc) rc = ds_artic_add_joint(ab, &jd);
    dsArticGeomDef gd = ds_artic_default_geom_def();
    gd.body = names[i];
    gd.pos[2] = -0.15;
    if (!rc) rc = ds_artic_add_geom(ab, &gd);
    if (types[i] == DS_JOINT_BALL) continue;
    dsArticActuatorDef ad = ds_artic_default_actuator_def();
    ad.name = names[i];
    ad.joint = jn[i];
    ad.type = i == 3 ? DS_ARTIC_MOTOR : DS_ARTIC_SERVO;
    ad.kp = 20, ad.kv = 1, ad.force_limit = 10, ad.ctrl_limit = 5;
    if (!rc) rc = ds_artic_add_actuator(ab, &ad);
  }
  dsArticOptions o = ds_artic_default_options();
  o.ground = 1;
  dsArticModel* am = NULL;
  if (!rc) rc = ds_artic_build(ab, &o, &am);
  if (rc) fprintf(stderr, "chain: %s\n", ds_artic_builder_error(ab));
  ds_artic_builder_free(ab);
  if (rc) return NULL;
  dsBuilder* b;
  dsModel* m = NULL;
  if (ds_builder_create(&b)) return NULL;
  ds_builder_set_dt(b, (dsReal)o.dt);
  const double q0[7] = {0.3, 0.96, 0.2, 0.1, 0.15, -0.4, 0.1};
  rc = ds_builder_set_artic(b, am, q0, NULL);
  ds_artic_model_free(am);
  dsReal x[9] = {0.05, 0, 0, -0.05, 0.03, 0, 0, -0.03, 0.1};
  int tri[3] = {0, 1, 2};
  const dsMesh mesh = {3, x, 1, tri, 0, NULL};
  for (int i = 0; i < 4 && rc >= 0; i++) rc = ds_builder_add_artic_mesh(b, i, &mesh, NULL, (dsReal)0.1);
  if (rc >= 0) rc = ds_builder_finalize(b, &m);
  ds_builder_free(b);
  return rc < 0 ? NULL : m;
}

/* The articulated models at B = 1, 3, 64, full and checkpointed tapes. */
static int parity_artic(void) {
  const char* envs[2] = {"double-pendulum", "runner"};
  int n = 0;
  for (int i = 0; i < 3; i++) {
    dsModel* m = NULL;
    const char* name = i < 2 ? envs[i] : "chain";
    if (i < 2) {
      for (int k = 0; k < ds_env_class_count() && !m; k++) {
        const char* cn;
        if (!strcmp(ds_env_class_at(k)->name, name)) m = bt_env_model(k, &cn);
      }
    } else {
      m = chain_model();
    }
    if (!m || !m->artic) {
      DST_FAIL_AT("%s: no articulated model", name);
      ds_model_free(m);
      continue;
    }
    static const int Bs[3] = {1, 3, 64};
    for (int bi = 0; bi < (g_short ? 2 : 3); bi++) {
      parity_run(name, m, Bs[bi], g_short ? 2 : 4, g_short ? 20 : 50, 1, 1e-8);
      parity_run(name, m, Bs[bi], g_short ? 2 : 4, g_short ? 20 : 50, 8, 1e-8);
    }
    ds_model_free(m);
    n++;
  }
  return n;
}

int main(void) {
  const char* self = getenv("DSIM_PARITY_SELFTEST");
  const char* shrt = getenv("DSIM_PARITY_SHORT");
  g_short = shrt && shrt[0] == '1';
  if (self && self[0] == '1') {
    g_dev = ds_device_cpu();
    printf("test_cuda_parity: DSIM_PARITY_SELFTEST: the CPU backend against itself\n");
  } else if (ds_cuda_device_count() == 0) {
    printf("test_cuda_parity: no CUDA device (%s): skipped\n",
           ds_cuda_built() ? "none visible" : "built without --enable-cuda");
    return 77;
  }
  int n = 0;
  for (int i = 0; i < ds_env_class_count(); i++) {
    const char* name;
    dsModel* m = bt_env_model(i, &name);
    if (!m) continue;
    if (m->nbody) {
      printf("%-16s rigid bodies: not run by the batched engine\n", name);
    } else if (m->artic) {
      printf("%-16s articulated: below\n", name);
    } else {
      parity_env(name, m, 1);
      parity_env(name, m, 32);
      n++;
    }
    ds_model_free(m);
  }
  CHECK(n >= 3);
  CHECK_INT_EQ(parity_artic(), 3);
  return DST_RESULT();
}

/* Envs on the batched engine (dsEnvDef.batch_engine: what a CUDA device
 * runs, here on the CPU backend) against the same envs on the serial
 * engine, for every class that can run there (walker, walker-springs,
 * control-fem, beam, control-cloth): short episodes with frames inside steps, random
 * actions, then
 *   - observations, states and the loss after every step: bitwise equal
 *     (the batched engine's substeps are the serial engine's bits);
 *   - dL/d(actions) and every parameter's gradient from ds_env_backward_loss,
 *     from ds_env_backward_adjoints (observation, image and reward adjoints)
 *     and from a partial backward (first step 2): equal to 1e-11 relative
 *     to each block's largest magnitude (sums are grouped differently);
 *   - set_state back to step 2 and a different tail: bitwise equal states
 *     and close gradients again;
 *   - a checkpointed tape (control-fem, every 7 substeps), both loss kinds
 *     and a parameter change between episodes;
 *   - control-fem with the implicit integrator at 10x its step (full and
 *     checkpointed tapes; refused on CUDA);
 *   - control-cloth, whose action is an initial velocity set by its own
 *     hook (it goes up as the substep-0 state; its adjoint is read back
 *     at substep 0), with a full and a checkpointed tape;
 *   - refusals, with the class named: rigid-toss (rigid bodies).
 * With a CUDA device visible, every comparison runs again with the envs on
 * cuda:0 (dsEnvDef.device), states then within 1e-12 relative instead of
 * bitwise (the device's libm). */
#include "config.h"

#include <math.h>

#include "dstest.h"
#include "dsim/dsim.h"

static uint64_t g_rng = 0x2545F4914F6CDD1DULL;
static double unif(double a, double b) {
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return a + (b - a) * ((double)(g_rng >> 11) / 9007199254740992.0);
}

static int g_cuda = 0; /* the batched envs on cuda:0 */

static dsEnv* make(const dsEnvDef* def, int batched) {
  dsEnvDef d = *def;
  d.batch_engine = batched;
  if (batched && g_cuda) d.device = (dsDevice){DS_DEVICE_CUDA, 0};
  dsEnv* e = NULL;
  char err[512];
  int rc = ds_env_create(&d, &e, err, sizeof err);
  if (rc) {
    DST_FAIL_AT("%s (batched %d): create: %s", def->cls->name, batched, err);
    return NULL;
  }
  return e;
}

/* ||a - b||_inf / ||a||_inf (0 when both are 0) */
static double rel(const dsReal* a, const dsReal* b, size_t n) {
  double num = 0, den = 0;
  for (size_t k = 0; k < n; k++) {
    const double d = fabs((double)a[k] - (double)b[k]);
    if (d > num || d != d) num = d;
    if (fabs((double)a[k]) > den) den = fabs((double)a[k]);
  }
  return num == 0 ? 0 : num / (den > 0 ? den : 1e-300);
}

/* Bitwise-equal operations in double; in the single build the two paths
 * accumulate some sums at different precisions (float here, double there). */
#define GRAD_RTOL (DS_SINGLE ? 1e-5 : 1e-11)
/* control-cloth's parameter gradients are sums that cancel (tri.k_mu's are
 * about 4e-12 at most for a loss of 16): their groupings differ by up to
 * 7.5e-12 of the largest, so its blocks get 10x the tolerance (a wrong
 * adjoint is off by order 1) */
static double g_rtol_scale = 1;

static void close_grads(const char* what, dsEnv* a, dsEnv* b, const dsReal* ga, const dsReal* gb, size_t na) {
  double q = rel(ga, gb, na);
  dst_checks++;
  if (!(q <= GRAD_RTOL * g_rtol_scale)) DST_FAIL_AT("%s: dL/d(actions) differ by %.3g (relative)", what, q);
  double worst = 0;
  const char* at = "-";
  for (int k = 0; k < ds_param_count(); k++) {
    const char* name = ds_param_name(k);
    const dsReal *pa, *pb;
    int n1, n2;
    if (ds_env_param_grad(a, name, &pa, &n1) || ds_env_param_grad(b, name, &pb, &n2) || n1 == 0) continue;
    CHECK_INT_EQ(n1, n2);
    q = rel(pa, pb, (size_t)n1);
    if (!(q <= worst)) {
      worst = q;
      at = name;
    }
  }
  dst_checks++;
  if (!(worst <= GRAD_RTOL * g_rtol_scale)) DST_FAIL_AT("%s: parameter gradient %s differs by %.3g (relative)", what, at, worst);
  printf("  %-34s actions %.2g, parameters %.2g (%s)\n", what, rel(ga, gb, na), worst, at);
}

/* Steps first..last-1 of both envs with the same random actions; states,
 * observations, rewards bitwise equal. */
static void run_steps(const char* name, dsEnv* a, dsEnv* b, int first, int last, dsReal* keep2a, dsReal* keep2b) {
  const int A = ds_env_action_size(a), O = ds_env_obs_size(a), S = ds_env_state_size(a);
  dsReal* act = (dsReal*)calloc((size_t)A + 1, sizeof(dsReal));
  dsReal* oa = (dsReal*)calloc((size_t)O + 1, sizeof(dsReal));
  dsReal* ob = (dsReal*)calloc((size_t)O + 1, sizeof(dsReal));
  dsReal* sa = (dsReal*)calloc((size_t)S, sizeof(dsReal));
  dsReal* sb = (dsReal*)calloc((size_t)S, sizeof(dsReal));
  for (int k = first; k < last; k++) {
    for (int i = 0; i < A; i++) act[i] = (dsReal)unif(-0.3, 0.3);
    dsReal ra = 0, rb = 0;
    int da = 0, db = 0;
    int rc1 = ds_env_step(a, act, oa, NULL, &ra, &da), rc2 = ds_env_step(b, act, ob, NULL, &rb, &db);
    if (rc1 || rc2) {
      DST_FAIL_AT("%s step %d: %s / %s", name, k, ds_env_last_error(a), ds_env_last_error(b));
      break;
    }
    ds_env_get_state(a, sa, S);
    ds_env_get_state(b, sb, S);
    dst_checks++;
    const int same = g_cuda ? rel(sa, sb, (size_t)S) <= 1e-12 && rel(oa, ob, (size_t)O) <= 1e-12 &&
                                  fabs((double)ra - (double)rb) <= 1e-12 * fabs((double)ra) + 1e-300
                            : !memcmp(sa, sb, (size_t)S * sizeof(dsReal)) && !memcmp(oa, ob, (size_t)O * sizeof(dsReal)) &&
                                  ra == rb;
    if (!same || da != db)
      DST_FAIL_AT("%s step %d: state, observation or reward differ (state %.3g, reward %.17g vs %.17g)", name, k,
                  rel(sa, sb, (size_t)S), (double)ra, (double)rb);
    if (k == 1 && keep2a) {
      memcpy(keep2a, sa, (size_t)S * sizeof(dsReal));
      memcpy(keep2b, sb, (size_t)S * sizeof(dsReal));
    }
  }
  free(act);
  free(oa);
  free(ob);
  free(sa);
  free(sb);
}

static void backward_all(const char* name, dsEnv* a, dsEnv* b) {
  const int A = ds_env_action_size(a), K = ds_env_num_steps(a), O = ds_env_obs_size(a);
  int w, h;
  ds_env_image_size(a, &w, &h);
  const size_t na = (size_t)K * A, npix = (size_t)w * h * 4;
  dsReal* ga = (dsReal*)calloc(na + 1, sizeof(dsReal));
  dsReal* gb = (dsReal*)calloc(na + 1, sizeof(dsReal));
  char what[96];
  dsReal la = 0, lb = 0;
  int rc1 = ds_env_backward_loss(a, &la, ga), rc2 = ds_env_backward_loss(b, &lb, gb);
  if (rc1 || rc2) {
    DST_FAIL_AT("%s backward: %s / %s", name, ds_env_last_error(a), ds_env_last_error(b));
  } else {
    dst_checks++;
    if (g_cuda ? !(fabs((double)la - (double)lb) <= 1e-12 * fabs((double)la)) : !(la == lb))
      DST_FAIL_AT("%s: loss %.17g vs %.17g", name, (double)la, (double)lb);
    snprintf(what, sizeof what, "%s: backward_loss", name);
    close_grads(what, a, b, ga, gb, na);
  }
  rc1 = ds_env_backward_loss_from(a, 2, &la, ga);
  rc2 = ds_env_backward_loss_from(b, 2, &lb, gb);
  if (rc1 || rc2) {
    DST_FAIL_AT("%s partial backward: %s / %s", name, ds_env_last_error(a), ds_env_last_error(b));
  } else {
    snprintf(what, sizeof what, "%s: backward_loss_from(2)", name);
    close_grads(what, a, b, ga, gb, na);
  }
  dsReal* ao = (dsReal*)calloc((size_t)K * O + 1, sizeof(dsReal));
  dsReal* ai = (dsReal*)calloc((size_t)K * npix + 1, sizeof(dsReal));
  dsReal* ar = (dsReal*)calloc((size_t)K + 1, sizeof(dsReal));
  for (size_t q = 0; q < (size_t)K * O; q++) ao[q] = (dsReal)unif(-1, 1);
  for (size_t q = 0; q < (size_t)K * npix; q++) ai[q] = (dsReal)unif(-1e-3, 1e-3);
  for (int q = 0; q < K; q++) ar[q] = (dsReal)unif(-1, 1);
  rc1 = ds_env_backward_adjoints(a, ao, ai, ar, ga);
  rc2 = ds_env_backward_adjoints(b, ao, ai, ar, gb);
  if (rc1 || rc2) {
    DST_FAIL_AT("%s backward_adjoints: %s / %s", name, ds_env_last_error(a), ds_env_last_error(b));
  } else {
    snprintf(what, sizeof what, "%s: backward_adjoints", name);
    close_grads(what, a, b, ga, gb, na);
  }
  free(ao);
  free(ai);
  free(ar);
  free(ga);
  free(gb);
}

/* implicit: physics.integrator implicit at 10x the step, as
 * configs/control-fem-implicit.json (and 10x fewer substeps), on a small gear */
static void compare_class(const char* cname, int ckpt, int loss_kind, const char* set_param, int implicit) {
  dsEnvDef def = ds_default_env_def(cname);
  g_rtol_scale = strcmp(cname, "control-cloth") ? 1 : 10;
  def.control_interval = 16;
  def.render_interval = 24; /* frames inside steps */
  def.substeps = 100;       /* a short last step */
  if (implicit) {
    char err[512];
    CHECK_INT_EQ(ds_env_def_set(&def, "physics.integrator", "implicit", err, sizeof err), 0);
    CHECK_INT_EQ(ds_env_def_set(&def, "contact.smooth", "0.01", err, sizeof err), 0);
    CHECK_INT_EQ(ds_env_def_set(&def, "gear.teeth", "6", err, sizeof err), 0); /* a small gear: 120 particles */
    CHECK_INT_EQ(ds_env_def_set(&def, "gear.layers", "1", err, sizeof err), 0);
    def.dt *= 10;
    def.control_interval = 2;
    def.render_interval = 3;
    def.substeps = 13;
  }
  def.render_last = 1;
  def.width = def.height = 32;
  def.supersample = 1;
  def.obs_state = DS_OBS_STATE_FULL;
  def.obs_image = 1;
  if (ckpt) def.checkpoint_every = ckpt;
  if (loss_kind >= 0) def.loss_kind = loss_kind;
  char name[96];
  snprintf(name, sizeof name, "%s%s%s%s", cname, implicit ? " (implicit)" : "", ckpt ? " (checkpointed)" : "",
           loss_kind == DS_ENV_LOSS_IMAGE_SUM ? " (image sum)" : "");
  if (implicit && g_cuda) { /* the CUDA backend does not run it */
    dsEnv* e = NULL;
    char err[512];
    def.device = (dsDevice){DS_DEVICE_CUDA, 0};
    CHECK_INT_EQ(ds_env_create(&def, &e, err, sizeof err), DS_ERR_UNSUPPORTED);
    CHECK_STR_CONTAINS(err, "implicit integrator");
    printf("%s: refused on cuda:0\n", name);
    return;
  }
  dsEnv* a = make(&def, 0);
  dsEnv* b = make(&def, 1);
  if (!a || !b) {
    ds_env_destroy(a);
    ds_env_destroy(b);
    return;
  }
  printf("%s\n", name);
  const int K = ds_env_num_steps(a);
  int S = 0;
  dsReal *k2a = NULL, *k2b = NULL;
  for (int ep = 0; ep < 2; ep++) {
    CHECK(ds_env_reset(a, 5 + ep, NULL, NULL) == 0);
    CHECK(ds_env_reset(b, 5 + ep, NULL, NULL) == 0);
    /* a reset may rebuild the model at a new size (control-cloth's sheet) */
    S = ds_env_state_size(a);
    CHECK_INT_EQ(ds_env_state_size(b), S);
    k2a = (dsReal*)realloc(k2a, (size_t)S * sizeof(dsReal));
    k2b = (dsReal*)realloc(k2b, (size_t)S * sizeof(dsReal));
    if (ep == 1 && set_param) { /* before the first step: a parameter scaled by 1.1 */
      const dsReal* p;
      int n;
      if (!ds_env_param(a, set_param, &p, &n) && n > 0) {
        dsReal* v = (dsReal*)malloc((size_t)n * sizeof(dsReal));
        for (int j = 0; j < n; j++) v[j] = p[j] * (dsReal)1.1;
        CHECK(ds_env_set_param(a, set_param, v, n) == 0);
        CHECK(ds_env_set_param(b, set_param, v, n) == 0);
        free(v);
      } else {
        DST_FAIL_AT("%s: no parameter %s", name, set_param);
      }
    }
    run_steps(name, a, b, 0, K, k2a, k2b);
    backward_all(name, a, b);
  }
  /* back to the end of step 2 and a different tail */
  CHECK(ds_env_set_state(a, k2a, S) == 0);
  CHECK(ds_env_set_state(b, k2b, S) == 0);
  run_steps(name, a, b, 2, K, NULL, NULL);
  char what[128];
  snprintf(what, sizeof what, "%s, rewound", name);
  backward_all(what, a, b);
  free(k2a);
  free(k2b);
  ds_env_destroy(a);
  ds_env_destroy(b);
}

static void refused(const char* cname, const char* why) {
  dsEnvDef def = ds_default_env_def(cname);
  def.batch_engine = 1;
  if (g_cuda) def.device = (dsDevice){DS_DEVICE_CUDA, 0};
  dsEnv* e = NULL;
  char err[512];
  int rc = ds_env_create(&def, &e, err, sizeof err);
  CHECK_INT_EQ(rc, DS_ERR_UNSUPPORTED);
  CHECK_STR_CONTAINS(err, "runs on the CPU engine only");
  CHECK_STR_CONTAINS(err, cname);
  CHECK_STR_CONTAINS(err, why);
  ds_env_destroy(e);
}

/* ds_env_set_device: a bad name and an absent device are refused with a
 * message and leave a working CPU env; a present one is taken. */
static void set_device(void) {
  dsEnvDef def = ds_default_env_def("walker");
  def.substeps = 64;
  def.control_interval = 16;
  dsEnv* e = NULL;
  char err[512];
  if (ds_env_create(&def, &e, err, sizeof err)) {
    DST_FAIL_AT("walker: %s", err);
    return;
  }
  CHECK_INT_EQ(ds_env_set_device(e, "gpu"), DS_ERR_PARSE);
  CHECK_STR_CONTAINS(ds_env_last_error(e), "expected cpu, cuda or cuda:N");
  const int rc = ds_env_set_device(e, "cuda:0");
  if (ds_cuda_device_count() == 0) {
    CHECK_INT_EQ(rc, DS_ERR_UNSUPPORTED);
    CHECK(strstr(ds_env_last_error(e), "without CUDA") || strstr(ds_env_last_error(e), "no CUDA device is visible"));
  } else {
    CHECK_INT_EQ(rc, 0);
  }
  CHECK_INT_EQ(ds_env_set_device(e, "cpu"), 0);
  dsReal* a = (dsReal*)calloc((size_t)ds_env_action_size(e), sizeof(dsReal));
  CHECK(ds_env_reset(e, 0, NULL, NULL) == 0);
  CHECK(ds_env_step(e, a, NULL, NULL, NULL, NULL) == 0);
  free(a);
  ds_env_destroy(e);
}

/* Forward only (no tape): steps and a rewind by set_state still agree. */
static void forward_only(void) {
  dsEnvDef def = ds_default_env_def("control-fem");
  def.substeps = 96;
  def.control_interval = 16;
  def.render_interval = 24;
  def.gradients = 0;
  def.obs_state = DS_OBS_STATE_FULL;
  dsEnv* a = make(&def, 0);
  dsEnv* b = make(&def, 1);
  if (a && b) {
    const int S = ds_env_state_size(a), K = ds_env_num_steps(a);
    dsReal* k2a = (dsReal*)calloc((size_t)S, sizeof(dsReal));
    dsReal* k2b = (dsReal*)calloc((size_t)S, sizeof(dsReal));
    CHECK(ds_env_reset(a, 1, NULL, NULL) == 0);
    CHECK(ds_env_reset(b, 1, NULL, NULL) == 0);
    run_steps("control-fem (forward only)", a, b, 0, K, k2a, k2b);
    CHECK(ds_env_set_state(a, k2a, S) == 0);
    CHECK(ds_env_set_state(b, k2b, S) == 0);
    run_steps("control-fem (forward only), rewound", a, b, 2, K, NULL, NULL);
    dsReal la = 0, lb = 0;
    CHECK(ds_env_loss(a, &la) == 0 && ds_env_loss(b, &lb) == 0);
    CHECK(g_cuda ? fabs((double)la - (double)lb) <= 1e-12 * fabs((double)la) : la == lb);
    CHECK_INT_EQ(ds_env_backward_loss(b, &lb, NULL), DS_ERR_STATE);
    free(k2a);
    free(k2b);
  }
  ds_env_destroy(a);
  ds_env_destroy(b);
}

int main(void) {
  set_device();
  for (g_cuda = 0; g_cuda <= (ds_cuda_device_count() > 0); g_cuda++) {
    printf("---- batched engine on %s\n", g_cuda ? "cuda:0" : "the CPU");
    compare_class("walker", 0, -1, "initial_position", 0);
    compare_class("walker-springs", 0, DS_ENV_LOSS_IMAGE_SUM, "spring.ke", 0);
    compare_class("control-fem", 0, -1, "tet.k_mu", 0);
    compare_class("control-fem", 7, DS_ENV_LOSS_IMAGE_SUM, "particle.mass", 0);
    compare_class("beam", 0, -1, "tet.k_lambda", 0);
    if (!DS_SINGLE) { /* the implicit step is checked in double (tests/test_implicit) */
      compare_class("control-fem", 0, -1, "tet.k_mu", 1);
      compare_class("control-fem", 3, DS_ENV_LOSS_IMAGE_SUM, "particle.mass", 1);
    }
    compare_class("control-cloth", 0, -1, "tri.k_mu", 0);
    compare_class("control-cloth", 5, DS_ENV_LOSS_IMAGE_SUM, "particle.mass", 0);
    refused("rigid-toss", "rigid bodies");
    forward_only();
  }
  if (ds_cuda_device_count() == 0) printf("no CUDA device: the cuda:0 pass skipped\n");
  fflush(stdout);
  return DST_RESULT();
}

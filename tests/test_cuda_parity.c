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
 * CPU backend with itself instead (the test's own logic, without a GPU).
 *
 * The device run is also repeated three times on one batch (gradients
 * zeroed between): the last must give the first run's bits (no state left
 * behind, no schedule-dependent sums on the device), and once with
 * DSIM_CUDA_SPLIT_PAIRS=1, which runs every fused launch of the backward
 * one stage at a time (the path of large batches): the same bits again. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "config.h"

#include <math.h>

#include "dstest.h"
#include "batchtest.h"
#include "dsim/device.h"

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

static void parity_env(const char* name, const dsModel* m, int K) {
  const int B = 2, C = 10, S = 100;
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
    BLOCK("control adjoints", (size_t)C * ((size_t)m->nact + n3));
    for (int k = 0; k < ds_param_count(); k++) {
      const dsReal* p;
      int n;
      if (ds_model_param(m, ds_param_name(k), &p, &n)) continue;
      BLOCK(ds_param_name(k), (size_t)n);
    }
#undef BLOCK
  }
  dst_checks++;
  if (!(worst <= 1e-10))
    DST_FAIL_AT("%s (K %d): CUDA differs from the CPU by %.3g (relative) in %s", name, K, worst, worst_at);
  printf("%-16s K %-2d 1000 substeps fwd+bwd: max relative difference %.3g (%s)%s\n", name, K, worst,
         worst_at[0] ? worst_at : "-", bitwise ? ", bitwise equal" : "");
  free(ref);
  free(got);
  bt_episode_free(&e);
}

int main(void) {
  const char* self = getenv("DSIM_PARITY_SELFTEST");
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
    } else {
      parity_env(name, m, 1);
      parity_env(name, m, 32);
      n++;
    }
    ds_model_free(m);
  }
  CHECK(n >= 3);
  return DST_RESULT();
}

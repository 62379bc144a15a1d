/* A batch on the batched engine without gradients (what a CUDA device runs;
 * dsEnvDef.batch_engine here) steps every env as one instance of one shared
 * engine. Against the same calls on a batch of separate serial envs, for
 * every class the batched engine runs (walker, walker-springs, control-fem,
 * beam, and control-cloth, whose initial velocity goes up as each env's
 * substep-0 state when it starts an episode), on 1 and 2 threads:
 *   - statuses, observations, image observations, rewards and done flags of
 *     every call, and every env's final state: bitwise equal;
 *   - the envs drift apart in time (masked resets, a set_state back to an
 *     earlier step, autoreset at different calls), the episode's last step
 *     is shorter than the others and frames fall inside steps at different
 *     offsets for different envs, so one call runs the engine in several
 *     runs and some envs end their step before others;
 *   - per-env parameters (one env heavier, one under a crushing gravity that
 *     makes it fail): the failing env's status, step, substep and element
 *     are the serial engine's, and the others step on;
 *   - a member env refuses ds_env_step and set_device (naming the batch),
 *     while a batch with gradients keeps one engine per env;
 *   - the shared step and autoreset allocate nothing.
 * With a CUDA device visible, the shared batches run again on cuda:0, the
 * values then within 1e-9 relative instead of bitwise (the device's libm). */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "dsim/batch.h"
#include "dsim/dsim.h"
#include "tests/dstest.h"

#define NB 5
#define NCALL 18
#define W 12

static int g_cuda = 0; /* the shared batches on cuda:0 */

static dsEnvDef small_def(const char* name, int shared) {
  dsEnvDef def = ds_default_env_def(name);
  def.control_interval = 6;
  def.substeps = 4 * 6 + 3; /* 5 steps, the last one 3 substeps */
  def.render_interval = 4;  /* frames inside steps, at offsets that change from step to step */
  def.render_last = 1;
  def.width = def.height = W;
  def.supersample = 1;
  def.obs_image = 1;
  def.gradients = 0;
  def.batch_engine = shared;
  if (shared && g_cuda) def.device = (dsDevice){DS_DEVICE_CUDA, 0};
  if (!strcmp(name, "control-cloth")) { /* one sheet size for every seed: one topology for the engine */
    char err[256];
    CHECK_INT_EQ(ds_env_def_set(&def, "scene.size_min", "5", err, sizeof err), 0);
    CHECK_INT_EQ(ds_env_def_set(&def, "scene.size_max", "5", err, sizeof err), 0);
  }
  return def;
}

/* per-env parameters: env 2 heavier; env 3 (when asked) under gravity that
 * crushes it within an episode */
static int scale_param(dsEnv* e, const char* name, double f) {
  const dsReal* p;
  int n;
  if (ds_env_param(e, name, &p, &n) || n > 4096) return -1;
  dsReal buf[4096];
  for (int i = 0; i < n; i++) buf[i] = p[i] * (dsReal)f;
  return ds_env_set_param(e, name, buf, n);
}

typedef struct Call {
  int rc;
  int status[NB];
  dsReal obs[NB * 2048];
  dsReal img[NB * W * W * 4];
  dsReal rew[NB];
  uint8_t done[NB];
  char err[256];
} Call;

typedef struct Trace {
  Call call[NCALL + 3];
  int ncall;
  dsReal state[NB][8192];
} Trace;

static Trace ref, got;

static void action_of(int env, int c, int A, dsReal* a) {
  for (int j = 0; j < A; j++) a[j] = (dsReal)(0.4 * sin(0.9 * c + 0.37 * j + 1.3 * env));
}

static void record(dsBatch* b, Call* c, int rc) {
  c->rc = rc;
  snprintf(c->err, sizeof c->err, "%s", rc ? ds_batch_last_error(b) : "");
}

static void run(const char* name, int shared, double crush, int threads, Trace* t) {
  ds_set_num_threads(threads);
  dsEnvDef def = small_def(name, shared);
  dsBatch* b = NULL;
  char err[512];
  CHECK_INT_EQ(ds_batch_create(&def, NB, &b, err, sizeof err), 0);
  if (!b) {
    fprintf(stderr, "%s\n", err);
    return;
  }
  const int A = ds_env_action_size(ds_batch_env(b, 0));
  CHECK(A <= 4096);
  static dsReal act[NB * 4096];
  uint64_t seeds[NB];
  for (int i = 0; i < NB; i++) seeds[i] = 100 + (uint64_t)i;
  int n = 0;
  Call* c = &t->call[n++];
  record(b, c, ds_batch_reset(b, seeds, NULL, c->obs, c->img, c->status));
  CHECK_INT_EQ(scale_param(ds_batch_env(b, 2), "particle.mass", 1.1), 0);
  if (crush != 1) CHECK_INT_EQ(scale_param(ds_batch_env(b, 3), "gravity", crush), 0);
  uint8_t only23[NB] = {0, 0, 1, 1, 0};
  c = &t->call[n++];
  record(b, c, ds_batch_reset(b, seeds, only23, c->obs, c->img, c->status));
  static dsReal saved[8192];
  const int sdim = ds_env_state_size(ds_batch_env(b, 4));
  CHECK(sdim <= 8192);
  for (int k = 0; k < NCALL; k++) {
    if (k == 2) { /* envs 1 and 3 start over: the batch's envs are now at different steps */
      uint8_t m13[NB] = {0, 1, 0, 1, 0};
      record(b, &t->call[n], ds_batch_reset(b, NULL, m13, t->call[n].obs, t->call[n].img, t->call[n].status));
      n++;
    }
    if (k == 1) CHECK_INT_EQ(ds_env_get_state(ds_batch_env(b, 4), saved, sdim), 0); /* env 4 at step 1 */
    if (k == 3) CHECK_INT_EQ(ds_env_set_state(ds_batch_env(b, 4), saved, sdim), 0);  /* and back there */
    for (int i = 0; i < NB; i++) action_of(i, k, A, act + (size_t)i * A);
    c = &t->call[n++];
    record(b, c, ds_batch_step(b, act, c->obs, c->img, c->rew, c->done, c->status, k < 2 ? 0 : DS_BATCH_AUTORESET));
  }
  t->ncall = n;
  for (int i = 0; i < NB; i++) ds_env_get_state(ds_batch_env(b, i), t->state[i], sdim);

  if (shared) { /* members of a shared engine are stepped through the batch only */
    dsEnv* e = ds_batch_env(b, 1);
    CHECK_INT_EQ(ds_env_step(e, act, NULL, NULL, NULL, NULL), DS_ERR_STATE);
    CHECK(strstr(ds_env_last_error(e), "instance 1 of a batch") && strstr(ds_env_last_error(e), "ds_batch_step"));
    CHECK_INT_EQ(ds_env_set_device(e, "cpu"), DS_ERR_STATE);
  }
  ds_batch_destroy(b);
}

/* "env 3: step 2: substep 14: tet 5 inverted (J ..." -> the part before " (J" */
static void msg_head(const char* m, char* out, size_t n) {
  snprintf(out, n, "%s", m);
  char* p = strstr(out, " (J");
  if (p) *p = 0;
}

/* equal: bitwise on the CPU, within 1e-9 of the largest magnitude on a GPU */
static int same(const dsReal* a, const dsReal* b, size_t n) {
  if (!g_cuda) return memcmp(a, b, n * sizeof(dsReal)) == 0;
  double big = 1, d = 0;
  for (size_t k = 0; k < n; k++) {
    if (fabs((double)a[k]) > big) big = fabs((double)a[k]);
    const double e = fabs((double)a[k] - (double)b[k]);
    if (e > d || e != e) d = e;
  }
  return d <= 1e-9 * big;
}

static int compare(const char* name, int threads, int odim, int sdim) {
  int failures_seen = 0;
  CHECK_INT_EQ(got.ncall, ref.ncall);
  for (int n = 0; n < ref.ncall; n++) {
    const Call *r = &ref.call[n], *g = &got.call[n];
    if (r->rc != g->rc || memcmp(r->status, g->status, sizeof r->status)) {
      DST_FAIL_AT("%s, %d threads, call %d: rc %d/%d, statuses differ (%s | %s)", name, threads, n, r->rc, g->rc,
                  r->err, g->err);
      continue;
    }
    if (r->rc) {
      char a[256], b[256];
      msg_head(r->err, a, sizeof a);
      msg_head(g->err, b, sizeof b);
      if (strcmp(a, b)) DST_FAIL_AT("%s, call %d: messages differ: \"%s\" | \"%s\"", name, n, r->err, g->err);
      failures_seen += r->rc == DS_ERR_INVERTED || r->rc == DS_ERR_DIVERGED;
    }
    for (int i = 0; i < NB; i++) {
      if (r->status[i] < 0) continue;
      if (!same(r->obs + (size_t)i * odim, g->obs + (size_t)i * odim, (size_t)odim) ||
          !same(r->img + (size_t)i * W * W * 4, g->img + (size_t)i * W * W * 4, W * W * 4))
        DST_FAIL_AT("%s, %d threads, call %d, env %d: observation or image differs", name, threads, n, i);
      if (n >= 2 && (!same(&r->rew[i], &g->rew[i], 1) || r->done[i] != g->done[i]))
        DST_FAIL_AT("%s, %d threads, call %d, env %d: reward %.17g/%.17g, done %d/%d", name, threads, n, i,
                    (double)r->rew[i], (double)g->rew[i], r->done[i], g->done[i]);
    }
  }
  for (int i = 0; i < NB; i++)
    if (!same(ref.state[i], got.state[i], (size_t)sdim))
      DST_FAIL_AT("%s, %d threads: env %d's final state differs", name, threads, i);
  return failures_seen;
}

/* counting allocator: the shared step and autoreset allocate nothing */
static long n_alloc = 0;
static void* c_malloc(size_t n) { n_alloc++; return malloc(n); }
static void* c_realloc(void* p, size_t n) { n_alloc++; return realloc(p, n); }
static void* c_calloc(size_t c, size_t n) { n_alloc++; return calloc(c, n); }
static void c_free(void* p) { free(p); }

static void no_alloc_in_step(void) {
  CHECK_INT_EQ(ds_replace_allocator(c_malloc, c_realloc, c_calloc, c_free), 0);
  dsEnvDef def = small_def("control-fem", 1);
  dsBatch* b = NULL;
  char err[256];
  CHECK_INT_EQ(ds_batch_create(&def, 3, &b, err, sizeof err), 0);
  if (b) {
    static dsReal obs[3 * 4096], img[3 * W * W * 4];
    const int A = ds_env_action_size(ds_batch_env(b, 0)), O = ds_env_obs_size(ds_batch_env(b, 0));
    CHECK(O <= 4096);
    dsReal* act = (dsReal*)calloc(3 * (size_t)A + 1, sizeof(dsReal)); /* before the count */
    dsReal rew[3];
    uint8_t done[3];
    int status[3];
    CHECK_INT_EQ(ds_batch_reset(b, NULL, NULL, obs, img, status), 0);
    const long before = n_alloc;
    for (int k = 0; k < 12; k++)
      CHECK_INT_EQ(ds_batch_step(b, act, obs, img, rew, done, status, DS_BATCH_AUTORESET), 0);
    CHECK_INT_EQ(n_alloc - before, 0);
    free(act);
    ds_batch_destroy(b);
  }
  CHECK_INT_EQ(ds_replace_allocator(NULL, NULL, NULL, NULL), 0);
}

int main(void) {
  no_alloc_in_step();
  const char* names[] = {"walker", "walker-springs", "control-fem", "beam", "control-cloth"};
  const double crush[] = {400, 400, 400, 400, 400};
  int failures_seen = 0;
  for (g_cuda = 0; g_cuda <= (ds_cuda_device_count() > 0); g_cuda++)
  for (int c = 0; c < 5; c++) {
    dsEnvDef def = small_def(names[c], 0);
    dsEnv* e = NULL;
    char err[512];
    CHECK_INT_EQ(ds_env_create(&def, &e, err, sizeof err), 0);
    if (!e) continue;
    const int odim = ds_env_obs_size(e), sdim = ds_env_state_size(e);
    ds_env_destroy(e);
    CHECK(odim <= 2048 && sdim <= 8192);
    memset(&ref, 0, sizeof ref);
    run(names[c], 0, crush[c], 1, &ref);
    printf("%s: shared engine on %s\n", names[c], g_cuda ? "cuda:0" : "the CPU");
    for (int threads = 1; threads <= 2; threads++) {
      memset(&got, 0, sizeof got);
      run(names[c], 1, crush[c], threads, &got);
      failures_seen += compare(names[c], threads, odim, sdim);
    }
  }
  CHECK(failures_seen > 0); /* the crushing gravity made some env fail */

  g_cuda = 0;
  /* with gradients, every env keeps its own engine (a backward needs the env's own tape) */
  dsEnvDef def = small_def("walker", 1);
  def.gradients = 1;
  dsBatch* b = NULL;
  char err[256];
  CHECK_INT_EQ(ds_batch_create(&def, 2, &b, err, sizeof err), 0);
  if (b) {
    dsEnv* e = ds_batch_env(b, 1);
    static dsReal act[4096];
    memset(act, 0, sizeof act);
    CHECK_INT_EQ(ds_env_reset(e, 7, NULL, NULL), 0);
    CHECK_INT_EQ(ds_env_step(e, act, NULL, NULL, NULL, NULL), 0);
    ds_batch_destroy(b);
  }
  /* a batch on a named device: refused clearly when it is not there */
  const char* text = "{\"env\": {\"name\": \"walker-springs\", \"physics\": {\"gradients\": false}}}";
  b = NULL;
  CHECK_INT_EQ(ds_batch_create_from_text_on("t.json", text, 2, "cpu", 0, &b, err, sizeof err), 0);
  ds_batch_destroy(b);
  b = NULL;
  CHECK(ds_batch_create_from_text_on("t.json", text, 2, "tpu", 0, &b, err, sizeof err) < 0);
  CHECK(b == NULL && strstr(err, "batch: ") && strstr(err, "tpu"));
  if (ds_cuda_device_count() == 0) {
    CHECK(ds_batch_create_from_text_on("t.json", text, 2, "cuda:0", 0, &b, err, sizeof err) < 0);
    CHECK(b == NULL && strstr(err, "cuda"));
    printf("cuda:0 without a GPU: %s\n", err);
  }
  return DST_RESULT();
}

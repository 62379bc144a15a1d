/* Batched envs (include/dsim/batch.h): every env of a batch gives, bit for
 * bit, what a separate env with the same seed, parameters and actions gives,
 * on 1 and on 2 threads; autoreset (next-step mode, seeds s, s + N, ...);
 * per-env errors (a NaN action in one env) leave the others stepping; steps
 * and autoresets allocate nothing. */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "dsim/batch.h"
#include "tests/dstest.h"

#define NB 5

static void action_of(int env, int k, int A, dsReal* a) {
  for (int j = 0; j < A; j++) a[j] = (dsReal)(0.3 * sin(0.7 * k + 0.37 * j + 1.3 * env));
}

static dsEnvDef small_def(const char* name) {
  dsEnvDef def = ds_default_env_def(name);
  def.substeps = 4 * def.control_interval + def.control_interval / 2; /* 5 steps, the last short */
  def.render_interval = def.control_interval;
  def.width = def.height = 24;
  def.supersample = 1;
  return def;
}

/* per-env parameter: env 2's particles 10% heavier */
static int heavier(dsEnv* e) {
  const dsReal* m;
  int n;
  if (ds_env_param(e, "particle.mass", &m, &n)) return -1;
  dsReal buf[4096];
  if (n > 4096) return -1;
  for (int i = 0; i < n; i++) buf[i] = m[i] * (dsReal)1.1;
  return ds_env_set_param(e, "particle.mass", buf, n);
}

typedef struct Trace {
  dsReal obs[NB][8][4096];
  dsReal rew[NB][8];
  uint8_t done[NB][8];
  dsReal final_state[NB][8192];
} Trace;

static Trace ref, got;

static void run_single(const dsEnvDef* def, int steps, Trace* t) {
  for (int i = 0; i < NB; i++) {
    dsEnv* e = NULL;
    char err[512];
    CHECK_INT_EQ(ds_env_create(def, &e, err, sizeof err), 0);
    if (!e) return;
    const int A = ds_env_action_size(e);
    dsReal a[4096];
    CHECK_INT_EQ(ds_env_reset(e, 100 + (uint64_t)i, t->obs[i][0], NULL), 0);
    if (i == 2) CHECK_INT_EQ(heavier(e), 0);
    if (i == 2) ds_env_reset(e, 100 + (uint64_t)i, t->obs[i][0], NULL); /* obs after the change */
    for (int k = 0; k < steps; k++) {
      action_of(i, k, A, a);
      int d = 0;
      CHECK_INT_EQ(ds_env_step(e, a, t->obs[i][k + 1], NULL, &t->rew[i][k], &d), 0);
      t->done[i][k] = (uint8_t)d;
    }
    ds_env_get_state(e, t->final_state[i], ds_env_state_size(e));
    ds_env_destroy(e);
  }
}

static void run_batch(const dsEnvDef* def, int steps, int threads, Trace* t) {
  ds_set_num_threads(threads);
  dsBatch* b = NULL;
  char err[512];
  CHECK_INT_EQ(ds_batch_create(def, NB, &b, err, sizeof err), 0);
  if (!b) return;
  CHECK_INT_EQ(ds_batch_size(b), NB);
  const int A = ds_env_action_size(ds_batch_env(b, 0)), O = ds_env_obs_size(ds_batch_env(b, 0));
  uint64_t seeds[NB];
  for (int i = 0; i < NB; i++) seeds[i] = 100 + (uint64_t)i;
  static dsReal obs[NB * 4096], act[NB * 4096];
  dsReal rew[NB];
  uint8_t done[NB];
  int status[NB];
  CHECK_INT_EQ(ds_batch_reset(b, seeds, NULL, obs, NULL, status), 0);
  CHECK_INT_EQ(status[0], DS_BATCH_RESET);
  CHECK_INT_EQ(heavier(ds_batch_env(b, 2)), 0);
  uint8_t only2[NB] = {0, 0, 1, 0, 0};
  CHECK_INT_EQ(ds_batch_reset(b, seeds, only2, obs, NULL, status), 0);
  CHECK_INT_EQ(status[1], DS_BATCH_STEPPED); /* not reset */
  for (int i = 0; i < NB; i++) memcpy(t->obs[i][0], obs + (size_t)i * O, (size_t)O * sizeof(dsReal));
  for (int k = 0; k < steps; k++) {
    for (int i = 0; i < NB; i++) action_of(i, k, A, act + (size_t)i * A);
    CHECK_INT_EQ(ds_batch_step(b, act, obs, NULL, rew, done, status, 0), 0);
    for (int i = 0; i < NB; i++) {
      CHECK_INT_EQ(status[i], DS_BATCH_STEPPED);
      memcpy(t->obs[i][k + 1], obs + (size_t)i * O, (size_t)O * sizeof(dsReal));
      t->rew[i][k] = rew[i];
      t->done[i][k] = done[i];
    }
  }
  for (int i = 0; i < NB; i++) ds_env_get_state(ds_batch_env(b, i), t->final_state[i], ds_env_state_size(ds_batch_env(b, i)));

  /* past the end without autoreset: DS_ERR_STATE per env, message names the env */
  CHECK(ds_batch_step(b, act, obs, NULL, rew, done, status, 0) == DS_ERR_STATE);
  CHECK_INT_EQ(status[3], DS_ERR_STATE);
  CHECK(strstr(ds_batch_last_error(b), "env 0: ") != NULL);
  /* autoreset: every env is reset with seed + NB, its action ignored */
  CHECK_INT_EQ(ds_batch_step(b, act, obs, NULL, rew, done, status, DS_BATCH_AUTORESET), 0);
  for (int i = 0; i < NB; i++) {
    CHECK_INT_EQ(status[i], DS_BATCH_RESET);
    CHECK(rew[i] == 0 && done[i] == 0);
  }
  {
    dsEnv* e = NULL;
    CHECK_INT_EQ(ds_env_create(def, &e, err, sizeof err), 0);
    static dsReal o[4096];
    if (e) ds_env_reset(e, 100 + 1 + NB, o, NULL);
    CHECK(e && memcmp(o, obs + O, (size_t)O * sizeof(dsReal)) == 0);
    ds_env_destroy(e);
  }
  /* a NaN action in env 3: its status, the others step on */
  for (int i = 0; i < NB; i++) action_of(i, 0, A, act + (size_t)i * A);
  act[3 * A] = (dsReal)NAN;
  CHECK_INT_EQ(ds_batch_step(b, act, obs, NULL, rew, done, status, DS_BATCH_AUTORESET), DS_ERR_RANGE);
  CHECK_INT_EQ(status[3], DS_ERR_RANGE);
  CHECK_INT_EQ(status[4], DS_BATCH_STEPPED);
  CHECK(strstr(ds_batch_last_error(b), "env 3: ") != NULL && strstr(ds_batch_last_error(b), "not finite"));
  CHECK(ds_batch_env(b, NB) == NULL);
  ds_batch_destroy(b);
}

/* counting allocator: the batch's step and reset allocate nothing */
static long n_alloc = 0;
static void* c_malloc(size_t n) { n_alloc++; return malloc(n); }
static void* c_realloc(void* p, size_t n) { n_alloc++; return realloc(p, n); }
static void* c_calloc(size_t c, size_t n) { n_alloc++; return calloc(c, n); }
static void c_free(void* p) { free(p); }

static void no_alloc_in_step(void) {
  CHECK_INT_EQ(ds_replace_allocator(c_malloc, c_realloc, c_calloc, c_free), 0);
  dsEnvDef def = small_def("walker");
  dsBatch* b = NULL;
  char err[256];
  CHECK_INT_EQ(ds_batch_create(&def, 3, &b, err, sizeof err), 0);
  if (b) {
    static dsReal obs[3 * 64], act[3 * 256];
    dsReal rew[3];
    uint8_t done[3];
    int status[3];
    memset(act, 0, sizeof act);
    CHECK_INT_EQ(ds_batch_reset(b, NULL, NULL, obs, NULL, status), 0); /* first reset renders the goal */
    const long before = n_alloc;
    for (int k = 0; k < 12; k++) /* past the episode's end: autoreset too */
      CHECK_INT_EQ(ds_batch_step(b, act, obs, NULL, rew, done, status, DS_BATCH_AUTORESET), 0);
    CHECK_INT_EQ(n_alloc - before, 0);
    CHECK(n_alloc > 0);
    ds_batch_destroy(b);
  }
  CHECK_INT_EQ(ds_replace_allocator(NULL, NULL, NULL, NULL), 0);
}

static void compare(const char* name, int steps, int sdim, int odim) {
  for (int i = 0; i < NB; i++) {
    for (int k = 0; k <= steps; k++)
      if (memcmp(ref.obs[i][k], got.obs[i][k], (size_t)odim * sizeof(dsReal))) {
        DST_FAIL_AT("%s: env %d obs of step %d differs", name, i, k);
        break;
      }
    CHECK(memcmp(ref.rew[i], got.rew[i], (size_t)steps * sizeof(dsReal)) == 0);
    CHECK(memcmp(ref.done[i], got.done[i], (size_t)steps) == 0);
    CHECK(memcmp(ref.final_state[i], got.final_state[i], (size_t)sdim * sizeof(dsReal)) == 0);
  }
}

int main(void) {
  no_alloc_in_step();
  const char* names[] = {"walker-springs", "walker", "control-fem"};
  for (int c = 0; c < 3; c++) {
    dsEnvDef def = small_def(names[c]);
    dsEnv* e = NULL;
    char err[512];
    CHECK_INT_EQ(ds_env_create(&def, &e, err, sizeof err), 0);
    if (!e) continue;
    const int steps = ds_env_num_steps(e), sdim = ds_env_state_size(e), odim = ds_env_obs_size(e);
    ds_env_destroy(e);
    CHECK(steps == 5 && sdim <= 8192 && odim <= 4096);
    memset(&ref, 0, sizeof ref);
    run_single(&def, steps, &ref);
    CHECK_INT_EQ(ref.done[0][steps - 1], 1);
    CHECK(memcmp(ref.final_state[2], ref.final_state[1], (size_t)sdim * sizeof(dsReal)) != 0); /* envs differ */
    for (int threads = 1; threads <= 2; threads++) {
      memset(&got, 0, sizeof got);
      run_batch(&def, steps, threads, &got);
      compare(names[c], steps, sdim, odim);
    }
  }
  /* bad arguments */
  dsBatch* b = NULL;
  dsEnvDef def = small_def("walker");
  char err[256];
  CHECK_INT_EQ(ds_batch_create(&def, 0, &b, err, sizeof err), DS_ERR_RANGE);
  CHECK(b == NULL && strstr(err, ">= 1"));
  CHECK(ds_batch_create_from_text("x.json", "{\"env\": {\"name\": \"walker\", \"bogus\": 1}}", 2, &b, err,
                                  sizeof err) < 0);
  CHECK(b == NULL && strstr(err, "bogus"));
  return DST_RESULT();
}

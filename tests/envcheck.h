/* Central differences of an env episode's objective with respect to the
 * actions and named parameters, shared by the env gradient tests that
 * drive a whole episode through the public API (test_smoke_env,
 * test_artic_env, test_runner_env). Include after tests/dstest.h and
 * dsim/env.h. */
#ifndef DSIM_TESTS_ENVCHECK_H
#define DSIM_TESTS_ENVCHECK_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The objective of one episode under actions a (S x action size): the
 * caller's function resets the env, steps it and returns the loss or any
 * other scalar its backward differentiates. */
typedef double (*EnvObjective)(dsEnv* env, const dsReal* a, const void* ctx);

/* One component of a named parameter. */
typedef struct EnvParam {
  const char* name;
  int index;
} EnvParam;

/* an[k] = the gradient of the last backward with respect to p[k]. */
static inline void env_param_grads(dsEnv* env, const EnvParam* p, int np, double* an) {
  for (int k = 0; k < np; k++) {
    const dsReal* g = NULL;
    int c = 0;
    CHECK_INT_EQ(ds_env_param_grad(env, p[k].name, &g, &c), 0);
    CHECK(p[k].index < c);
    an[k] = g && p[k].index < c ? (double)g[p[k].index] : NAN;
  }
}

/* fd[0 .. na) by central differences of step ha in each action, then
 * fd[na + k] of step hrel max(1, |value|) in parameter p[k] (each value
 * set after a reset with `seed`, since parameters change between
 * episodes, and restored afterwards). a is restored too. */
static inline void env_fd(dsEnv* env, EnvObjective f, const void* ctx, dsReal* a, int na, double ha, int seed,
                          const EnvParam* p, int np, double hrel, double* fd) {
  for (int i = 0; i < na; i++) {
    const dsReal s = a[i];
    a[i] = (dsReal)(s + ha);
    const double lp = f(env, a, ctx);
    a[i] = (dsReal)(s - ha);
    const double lm = f(env, a, ctx);
    a[i] = s;
    fd[i] = (lp - lm) / (2 * ha);
  }
  for (int k = 0; k < np; k++) {
    const dsReal* v = NULL;
    int c = 0;
    CHECK_INT_EQ(ds_env_param(env, p[k].name, &v, &c), 0);
    if (!v || p[k].index >= c) {
      fd[na + k] = NAN;
      continue;
    }
    dsReal* x = (dsReal*)malloc((size_t)c * sizeof(dsReal));
    memcpy(x, v, (size_t)c * sizeof(dsReal));
    const dsReal v0 = x[p[k].index], h = (dsReal)(hrel * fmax(1, fabs((double)v0)));
    double l[2];
    for (int sgn = 0; sgn < 2; sgn++) {
      ds_env_reset(env, seed, NULL, NULL);
      x[p[k].index] = sgn ? v0 - h : v0 + h;
      CHECK_INT_EQ(ds_env_set_param(env, p[k].name, x, c), 0);
      l[sgn] = f(env, a, ctx);
    }
    ds_env_reset(env, seed, NULL, NULL);
    x[p[k].index] = v0;
    CHECK_INT_EQ(ds_env_set_param(env, p[k].name, x, c), 0);
    fd[na + k] = (l[0] - l[1]) / (2 * (double)h);
    free(x);
  }
}

/* One episode's results (loss, gradients, ...) into out[0 .. cap): their
 * count, or 0 on failure. */
typedef int (*EnvRunAll)(dsEnv* env, double* out, int cap);

/* run(a) on ta threads and run(b) on tb threads give the same count (more
 * than min_n) and the same bits: a checkpointed tape against the full one
 * (a != b), or one env on two thread counts (a == b). r1, r2: cap each. */
static inline void env_same_bits(dsEnv* a, int ta, dsEnv* b, int tb, EnvRunAll run, double* r1, double* r2, int cap,
                                 int min_n) {
  ds_set_num_threads(ta);
  const int n1 = run(a, r1, cap);
  ds_set_num_threads(tb);
  const int n2 = run(b, r2, cap);
  ds_set_num_threads(1);
  CHECK(n1 > min_n);
  CHECK_INT_EQ(n1, n2);
  CHECK(n1 == n2 && memcmp(r1, r2, (size_t)n1 * sizeof(double)) == 0);
}

#endif

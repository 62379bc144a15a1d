/* Full-episode forward + backward wall time of every environment with its
 * docs/scenes.md defaults (walker 9,600 substeps + 41 frames; control-fem 5,760 +
 * 96 frames; control-cloth 1,440 + 25 frames at D = 8..31 by seed;
 * walker-springs 1,920 + 21 frames), 2 threads, median of the repetitions.
 * Actions follow a fixed sinusoid so the bodies move.
 *
 *   bench_env [reps] [name ...]      (default 5 reps, every environment class) */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dsim/env.h"
#include "bench/bench.h"


static int cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

/* Angular frequency of the sinusoid actions: the bundled configs'
 * controller.omega (walker, walker-springs 20 rad/s; otherwise 2.5). */
static double omega_of(const char* name) {
  return !strcmp(name, "walker") || !strcmp(name, "walker-springs") ? 20.0 : 2.5;
}

static int run(const char* name, int reps) {
  dsEnvDef def = ds_default_env_def(name);
  dsEnv* env = NULL;
  char err[512];
  int rc = ds_env_create(&def, &env, err, sizeof err);
  if (rc) {
    printf("%s: create failed: %s\n", name, err);
    return 1;
  }
  /* an initial-condition action (control-cloth's velocity): a push along +x */
  const int initial = ds_env_action_kind(env) == DS_ACTION_INITIAL;
  const double omega = omega_of(name);
  double t[16], tf[16];
  dsReal loss = 0, metric = 0;
  int frames = 0;
  for (int r = 0; r < reps; r++) {
    double t0 = now();
    rc = ds_env_reset(env, 1, NULL, NULL);
    const int A = ds_env_action_size(env), S = ds_env_num_steps(env);
    dsReal* act = (dsReal*)calloc((size_t)A, sizeof(dsReal));
    dsReal* ga = (dsReal*)calloc((size_t)S * A, sizeof(dsReal));
    int done = 0;
    for (int k = 0; !rc && !done; k++) {
      const double time = (double)k * def.control_interval * def.dt;
      for (int i = 0; i < A; i++)
        act[i] = initial ? (i == 0 ? 1 : 0) : 0.1 * sin(omega * time + 0.7 * i);
      rc = ds_env_step(env, act, NULL, NULL, NULL, &done);
    }
    double t1 = now();
    if (!rc) rc = ds_env_backward_loss(env, &loss, ga);
    double t2 = now();
    if (!rc) ds_env_metric(env, &metric);
    free(act);
    free(ga);
    if (rc) {
      printf("%s: failed: %s\n", name, ds_env_last_error(env));
      ds_env_destroy(env);
      return 1;
    }
    t[r] = t2 - t0;
    tf[r] = t1 - t0;
    frames = def.substeps / def.render_interval + (def.render_last ? 1 : 0);
  }
  qsort(t, (size_t)reps, sizeof t[0], cmp);
  qsort(tf, (size_t)reps, sizeof tf[0], cmp);
  printf("%-15s %6d substeps %3d frames %5d particles  forward+backward median %.3f s (forward %.3f s) over %d  loss %.6g metric %.4g\n",
         name, def.substeps, frames, ds_env_num_particles(env), t[reps / 2], tf[reps / 2], reps,
         (double)loss, (double)metric);
  ds_env_destroy(env);
  return 0;
}

int main(int argc, char** argv) {
  int reps = argc > 1 ? atoi(argv[1]) : 5;
  if (reps < 1) reps = 1;
  if (reps > 16) reps = 16;
  ds_set_num_threads(2);
  printf("bench_env: %d threads, %s precision\n", ds_get_max_threads(), sizeof(dsReal) == 8 ? "double" : "single");
  int fail = 0;
  if (argc > 2) {
    for (int a = 2; a < argc; a++) {
      if (!ds_env_class_find(argv[a])) {
        printf("%s: unknown environment\n", argv[a]);
        fail = 1;
        continue;
      }
      fail |= run(argv[a], reps);
    }
  } else {
    for (int k = 0; k < ds_env_class_count(); k++) fail |= run(ds_env_class_at(k)->name, reps);
  }
  return fail;
}

/* Rigid-body benchmark (figures, not a test): bodies x substeps per second,
 * forward and forward + backward (full tape), for 1, 64 and 1,024 boxes
 * (8 vertices each, random orientations, 12 cm up, sliding and spinning)
 * that land within ~0.1 s and then bounce, slide and settle (contact,
 * friction, restitution),
 * 1 and 2 threads, median of 5 runs.
 * Usage: bench_rigid [quick]   ("quick": fewer substeps, for smoke runs) */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dsim/engine.h"
#include "bench/bench.h"

static void die(const char* what, int rc, const char* msg) {
  fprintf(stderr, "bench_rigid: %s: %s (%s)\n", what, ds_err_name(rc), msg ? msg : "");
  exit(1);
}

static dsModel* boxes(int n) {
  dsBuilder* b;
  ds_builder_create(&b);
  dsGroundDef gd = {1e4, 10, 1e2, 0.5, 0};
  ds_builder_set_ground(b, &gd);
  ds_builder_set_dt(b, 1.0 / 960);
  unsigned long long r = 7;
  for (int k = 0; k < n; k++) {
    dsRigidDef d = ds_default_rigid_def();
    d.mass = 1;
    d.restitution = 0.5;
    d.position[0] = (k % 32) * 0.5, d.position[1] = 0.12, d.position[2] = (k / 32) * 0.5;
    for (int c = 0; c < 4; c++) {
      r = r * 6364136223846793005ull + 1442695040888963407ull;
      d.orientation[c] = (double)(r >> 11) / 9007199254740992.0 - 0.5;
    }
    d.velocity[0] = 1, d.angular_velocity[1] = 2;
    const dsReal h[3] = {0.1, 0.05, 0.08};
    int rc = ds_builder_add_rigid_box(b, h, &d);
    if (rc < 0) die("box", rc, ds_builder_last_error(b));
  }
  dsModel* m;
  int rc = ds_builder_finalize(b, &m);
  if (rc) die("finalize", rc, ds_builder_last_error(b));
  ds_builder_free(b);
  return m;
}

static double run(const dsModel* m, dsData* d, dsGrad* g, int T, int back) {
  double t0 = now();
  ds_data_reset(m, d);
  for (int t = 0; t < T; t++) {
    int rc = ds_step(m, d);
    if (rc) die("step", rc, ds_data_last_error(d));
  }
  if (back) {
    int rc = ds_backward(m, d, g, m->x0, NULL, NULL, NULL);
    if (rc) die("backward", rc, ds_data_last_error(d));
  }
  return now() - t0;
}

int main(int argc, char** argv) {
  const int quick = argc > 1 && !strcmp(argv[1], "quick");
  const int counts[3] = {1, 64, 1024};
  for (int c = 0; c < 3; c++) {
    const int n = counts[c], T = quick ? 50 : (n == 1024 ? 240 : n == 64 ? 480 : 960);
    dsModel* m = boxes(n);
    dsDataDef dd = ds_default_data_def();
    dd.max_substeps = T;
    dsData* d;
    dsGrad* g;
    int rc = ds_data_create(m, &dd, &d);
    if (rc) die("data", rc, "");
    if ((rc = ds_grad_create(m, &g))) die("grad", rc, "");
    for (int th = 1; th <= 2; th++) {
      ds_set_num_threads(th);
      double f[5], fb[5];
      run(m, d, g, T, 1);
      for (int k = 0; k < 5; k++) {
        f[k] = run(m, d, g, T, 0);
        fb[k] = run(m, d, g, T, 1);
      }
      const double bs = (double)n * T;
      printf("rigid boxes %5d  substeps %4d  threads %d  forward %10.3g body-substeps/s  forward+backward %10.3g "
             "body-substeps/s\n",
             n, T, th, bs / median(f, 5), bs / median(fb, 5));
      fflush(stdout);
    }
    ds_grad_free(g);
    ds_data_free(d);
    ds_model_free(m);
  }
  return 0;
}

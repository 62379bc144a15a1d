/* Fluid benchmark (figures, not a test): forward and forward + backward
 * time per step of a buoyant smoke plume (MacCormack, closed box, a source
 * with inflow at the bottom, an obstacle, pressure tolerance 1e-10) at 128^2,
 * 256^2 and 64^3, the median of 5 episodes of 4 measured steps each, after a
 * 3-step warm-up so the plume is moving. Threads: OMP_NUM_THREADS.
 * Then the volume renderer (dsim/volume.h): a 64^3 density rendered at 128 x
 * 128 over a background with a depth, forward and forward + backward (to the
 * density, sigma_t, colour and background), the median of 5 (1 quick).
 * Usage: bench_fluid [quick [GRID]]   ("quick": 1 warm-up and 1 measured
 * step; GRID: only 128^2, 256^2, 64^3, fft or render). "fft": the plume
 * without its obstacle at 128^2 and 64^3, PCG and then the FFT solve (the
 * latter only in a build with FFTW). */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "dsim/fluid.h"
#include "dsim/volume.h"

static void die(const char* what, const char* msg) {
  fprintf(stderr, "bench_fluid: %s: %s\n", what, msg);
  exit(1);
}

static dsFluidDef plume(int n, int nz, int obstacle, int solver) {
  dsFluidDef def = ds_fluid_default_def();
  def.n[0] = def.n[1] = n;
  def.n[2] = nz;
  def.dx = 1.0 / n;
  def.dt = 0.5 / n; /* CFL about 0.5 at 1 m/s */
  def.advection = DS_FLUID_MACCORMACK;
  def.alpha = 1;
  def.up_axis = nz > 1 ? 2 : 1;
  def.nsource = 1;
  int up = def.up_axis, side = up == 1 ? 0 : 1;
  dsFluidSource* s = &def.source[0];
  for (int a = 0; a < 3; a++) s->box.lo[a] = 0.4, s->box.hi[a] = 0.6;
  s->box.lo[up] = 0.02, s->box.hi[up] = 0.1;
  s->density_rate = 5;
  s->set_velocity = 1;
  s->velocity[up] = 0.5;
  def.solver = solver;
  def.nobstacle = obstacle;
  for (int a = 0; a < 3; a++) def.obstacle[0].lo[a] = 0.45, def.obstacle[0].hi[a] = 0.7;
  def.obstacle[0].lo[up] = 0.5, def.obstacle[0].hi[up] = 0.55;
  def.obstacle[0].lo[side] = 0.3;
  return def;
}

static void run(const char* label, int n, int nz, int warm, int steps, int obstacle, int solver) {
  dsFluidDef def = plume(n, nz, obstacle, solver);
  char err[512];
  dsFluidModel* m;
  if (ds_fluid_model_create(&def, &m, err, sizeof err)) die("model", err);
  int total = warm + steps;
  dsFluidData* d;
  if (ds_fluid_data_create(m, total, 0, &d)) die("data", "out of memory");
  int nc = ds_fluid_ncell(m);
  double* w = malloc(sizeof(double) * (size_t)nc);
  for (int c = 0; c < nc; c++) w[c] = (double)(c % 7) / 7;
  dsFluidGrad g;
  memset(&g, 0, sizeof g);
  g.density0 = malloc(sizeof(double) * (size_t)nc);
  double tf[5], tb[5];
  int iters = 0;
  for (int r = 0; r < 5; r++) {
    ds_fluid_reset(m, d, NULL, NULL, NULL);
    for (int t = 0; t < warm; t++)
      if (ds_fluid_step(m, d, NULL)) die("step", ds_fluid_last_error(d));
    double t0 = now();
    for (int t = 0; t < steps; t++)
      if (ds_fluid_step(m, d, NULL)) die("step", ds_fluid_last_error(d));
    double t1 = now();
    ds_fluid_solver_stats(d, &iters, NULL);
    if (ds_fluid_backward(m, d, NULL, w, NULL, &g)) die("backward", ds_fluid_last_error(d));
    double t2 = now();
    tf[r] = (t1 - t0) / steps;
    /* the backward covers all `total` steps; scale it to one step */
    tb[r] = (t1 - t0) / steps + (t2 - t1) / total;
  }
  char name[64];
  snprintf(name, sizeof name, "%s%s", label, obstacle ? "" : ds_fluid_uses_fft(m) ? " no obstacle, FFT" : " no obstacle, PCG");
  printf("%-24s  forward %8.2f ms/step   forward+backward %8.2f ms/step   (PCG iterations at the last step: %d)\n",
         name, 1e3 * median(tf, 5), 1e3 * median(tb, 5), iters);
  free(w);
  free(g.density0);
  ds_fluid_data_free(d);
  ds_fluid_model_free(m);
}

/* A 64^3 plume-like density (a Gaussian column with a wider head) seen from
 * 2.5 m at 128 x 128 over a grey background, a ground plane's depth in the
 * lower part of the image. */
static void run_volume(int reps) {
  dsVolumeDef def = ds_volume_default_def();
  const int n = 64, W = 128;
  def.n[0] = def.n[1] = def.n[2] = n;
  def.dx = 1.0 / n;
  def.width = def.height = W;
  ds_camera_look_at(&def.camera, 2.5, 15, 30);
  for (int a = 0; a < 3; a++) def.camera.eye[a] += (dsReal)0.5, def.camera.at[a] = (dsReal)0.5;
  char err[512];
  dsVolume* v;
  if (ds_volume_create(&v, &def, err, sizeof err)) die("volume", err);
  size_t nc = (size_t)n * n * n, np = (size_t)W * W;
  double* rho = malloc(sizeof(double) * nc);
  double* grho = malloc(sizeof(double) * nc);
  dsReal* bg = malloc(sizeof(dsReal) * np * 4);
  dsReal* gimg = malloc(sizeof(dsReal) * np * 4);
  dsReal* gbg = malloc(sizeof(dsReal) * np * 4);
  dsReal* img = malloc(sizeof(dsReal) * np * 4);
  dsReal* depth = malloc(sizeof(dsReal) * np);
  if (!rho || !grho || !bg || !gimg || !gbg || !img || !depth) die("volume", "out of memory");
  for (int k = 0; k < n; k++)
    for (int j = 0; j < n; j++)
      for (int i = 0; i < n; i++) {
        double x = (i + 0.5) / n - 0.5, y = (j + 0.5) / n, z = (k + 0.5) / n - 0.5;
        double w = 0.08 + 0.12 * y * y;
        rho[i + n * (j + n * (size_t)k)] = exp(-(x * x + z * z) / (w * w)) * (y < 0.9);
      }
  for (size_t p = 0; p < np; p++) {
    for (int ch = 0; ch < 4; ch++) bg[4 * p + ch] = (dsReal)0.4, gimg[4 * p + ch] = (dsReal)((p * 7 + ch) % 5) / 5;
    depth[p] = p / W > 3 * W / 4 ? (dsReal)2.4 : (dsReal)INFINITY;
  }
  double tf[5], tb[5], sg = 0, gc[3] = {0, 0, 0};
  for (int r = 0; r < reps; r++) {
    double t0 = now();
    if (ds_volume_render(v, rho, bg, depth, img)) die("volume render", ds_volume_last_error(v));
    double t1 = now();
    if (ds_volume_backward(v, gimg, grho, &sg, gc, gbg)) die("volume backward", ds_volume_last_error(v));
    double t2 = now();
    tf[r] = t1 - t0;
    tb[r] = t2 - t0;
  }
  printf("render 64^3 at 128x128  forward %8.2f ms   forward+backward %8.2f ms\n", 1e3 * median(tf, reps),
         1e3 * median(tb, reps));
  free(rho), free(grho), free(bg), free(gimg), free(gbg), free(img), free(depth);
  ds_volume_destroy(v);
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  int quick = argc > 1 && !strcmp(argv[1], "quick");
  int warm = quick ? 1 : 3, steps = quick ? 1 : 4;
  const char* only = argc > 2 ? argv[2] : NULL;
  printf("bench_fluid: smoke plume, MacCormack, tolerance 1e-10, median of 5, %d + %d steps\n", warm, steps);
  if (!only || !strcmp(only, "128^2")) run("128^2", 128, 1, warm, steps, 1, DS_FLUID_SOLVER_AUTO);
  if (!only || !strcmp(only, "256^2")) run("256^2", 256, 1, warm, steps, 1, DS_FLUID_SOLVER_AUTO);
  if (!only || !strcmp(only, "64^3")) run("64^3", 64, 64, warm, steps, 1, DS_FLUID_SOLVER_AUTO);
  /* the same plume without its obstacle: the FFT solve (when built) against PCG */
  const int grids[2][2] = {{128, 1}, {64, 64}};
  for (int g = 0; g < 2; g++) {
    const char* name = g ? "64^3" : "128^2";
    if (only && strcmp(only, "fft")) continue;
    run(name, grids[g][0], grids[g][1], warm, steps, 0, DS_FLUID_SOLVER_PCG);
    run(name, grids[g][0], grids[g][1], warm, steps, 0, DS_FLUID_SOLVER_AUTO);
  }
  if (!only || !strcmp(only, "render")) run_volume(quick ? 1 : 5);
  return 0;
}

/* Batched fluid benchmark (figures, not a test): instance-steps per second
 * of ds_fluid_batch_step and of the step plus its share of
 * ds_fluid_batch_backward, on the CPU device, at B = 1, 8 and 64, for a
 * 64^2 and a 16^3 buoyant plume (semi-Lagrangian, closed box, a source
 * of density and heat with inflow, an obstacle, PCG to 1e-8). Time is process CPU time
 * (clock()), so the figures hold on a shared machine; threads:
 * OMP_NUM_THREADS. The serial engine's figures on the same plume come
 * first. Usage: bench_fluid_batch [STEPS] (default 4). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "dsim/fluid.h"

static dsFluidDef plume(int n, int nz) {
  dsFluidDef def = ds_fluid_default_def();
  def.n[0] = def.n[1] = n;
  def.n[2] = nz;
  def.dx = 1.0 / n;
  def.dt = 0.5 / n;
  def.up_axis = nz > 1 ? 2 : 1;
  def.tolerance = 1e-8;
  def.solver = DS_FLUID_SOLVER_PCG;
  def.nsource = 1;
  dsFluidSource* s = &def.source[0];
  const int up = def.up_axis;
  for (int a = 0; a < 3; a++) s->box.lo[a] = 0.4, s->box.hi[a] = 0.6;
  s->box.lo[up] = 0.02, s->box.hi[up] = 0.1;
  s->density_rate = 5;
  s->temperature_rate = 2; /* a temperature field to advect (the serial engine skips a zero one) */
  s->set_velocity = 1;
  s->velocity[up] = 0.5;
  def.nobstacle = 1;
  for (int a = 0; a < 3; a++) def.obstacle[0].lo[a] = 0.45, def.obstacle[0].hi[a] = 0.7;
  def.obstacle[0].lo[up] = 0.5, def.obstacle[0].hi[up] = 0.55;
  return def;
}

static double cpu(void) { return (double)clock() / CLOCKS_PER_SEC; }

/* the serial engine on the same plume, for reference */
static void serial(const char* name, int n, int nz, int steps) {
  dsFluidDef def = plume(n, nz);
  dsFluidModel* m;
  dsFluidData* d;
  char err[512];
  if (ds_fluid_model_create(&def, &m, err, sizeof err) || ds_fluid_data_create(m, steps, 0, &d)) {
    fprintf(stderr, "bench_fluid_batch: %s\n", err);
    exit(1);
  }
  double t0 = cpu();
  for (int t = 0; t < steps; t++) ds_fluid_step(m, d, NULL);
  double t1 = cpu();
  double* w = calloc((size_t)ds_fluid_ncell(m), sizeof(double));
  double* gp = calloc((size_t)ds_fluid_nparam(m), sizeof(double));
  for (int i = 0; i < ds_fluid_ncell(m); i++) w[i] = 1;
  dsFluidGrad g = {NULL, NULL, NULL, NULL, NULL, gp};
  ds_fluid_backward(m, d, NULL, w, NULL, &g);
  double t2 = cpu();
  printf("%-5s serial: forward %8.1f steps/s,          forward + backward %8.1f\n", name, steps / (t1 - t0),
         steps / (t2 - t0));
  free(w), free(gp);
  ds_fluid_data_free(d);
  ds_fluid_model_free(m);
}

static void bench(const char* name, int n, int nz, int B, int steps) {
  dsFluidDef def = plume(n, nz);
  dsFluidModel* m;
  dsFluidBatch* fb;
  char err[512];
  if (ds_fluid_model_create(&def, &m, err, sizeof err) ||
      ds_fluid_batch_create(m, B, steps, 0, ds_device_cpu(), &fb, err, sizeof err)) {
    fprintf(stderr, "bench_fluid_batch: %s\n", err);
    exit(1);
  }
  for (int b = 0; b < B; b++) ds_fluid_batch_set_param(fb, b, "source.0.density_rate", 5 + 0.01 * b);
  double t0 = cpu();
  for (int t = 0; t < steps; t++)
    if (ds_fluid_batch_step(fb, NULL)) {
      fprintf(stderr, "bench_fluid_batch: %s\n", ds_fluid_batch_last_error(fb));
      exit(1);
    }
  double t1 = cpu();
  double* w = calloc((size_t)B * ds_fluid_ncell(m), sizeof(double));
  double* gp = calloc((size_t)B * ds_fluid_nparam(m), sizeof(double));
  for (size_t i = 0; i < (size_t)B * ds_fluid_ncell(m); i++) w[i] = 1;
  dsFluidGrad g = {NULL, NULL, NULL, NULL, NULL, gp};
  if (ds_fluid_batch_backward(fb, NULL, w, NULL, &g)) {
    fprintf(stderr, "bench_fluid_batch: %s\n", ds_fluid_batch_last_error(fb));
    exit(1);
  }
  double t2 = cpu();
  int it = 0;
  ds_fluid_batch_solver_stats(fb, 0, &it, NULL);
  printf("%-5s B = %2d: forward %8.1f instance-steps/s, forward + backward %8.1f (CPU s: %.2f + %.2f, %d steps; "
         "last solve %d iterations)\n",
         name, B, B * steps / (t1 - t0), B * steps / (t2 - t0), t1 - t0, t2 - t1, steps, it);
  fflush(stdout);
  free(w), free(gp);
  ds_fluid_batch_free(fb);
  ds_fluid_model_free(m);
}

int main(int argc, char** argv) {
  const int steps = argc > 1 ? atoi(argv[1]) : 4;
  const int Bs[3] = {1, 8, 64};
  serial("64^2", 64, 1, steps);
  for (int k = 0; k < 3; k++) bench("64^2", 64, 1, Bs[k], steps);
  serial("16^3", 16, 16, steps);
  for (int k = 0; k < 3; k++) bench("16^3", 16, 16, Bs[k], steps);
  return 0;
}

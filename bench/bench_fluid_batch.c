/* Batched fluid benchmark (figures, not a test): instance-steps per second
 * of ds_fluid_batch_step and of the step plus its share of
 * ds_fluid_batch_backward, on the CPU device, at B = 1, 8 and 64, for a
 * 64^2 and a 16^3 buoyant plume (semi-Lagrangian, closed box, a source
 * of density and heat with inflow, an obstacle, PCG to 1e-8). Time is process CPU time
 * (clock()), so the figures hold on a shared machine; threads:
 * OMP_NUM_THREADS. The serial engine's figures on the same plume come
 * first. Usage: bench_fluid_batch [STEPS] (default 4).
 *
 * With --device (cpu, cuda[:N], repeatable): the 3-D plume only (--grid N:
 * N^3 cells, default 16) at each --batch B (default 1, 64, 1,024) on each
 * device, timed by the wall clock (a GPU's time is not the process's CPU
 * time), as cell-steps per second forward and forward + backward, and
 * CUDA / CPU where both ran:
 *   bench_fluid_batch --device cpu --device cuda:0 [--grid N] [--batch B]... [--steps S] */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dsim/device.h"
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

static double wall(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* B plumes on dev: the times of `steps` steps forward and of the backward
 * after them (clk: the clock), into *tf and *tb; the last solve's
 * iterations into *iters. */
static void run_batch(const dsFluidDef* def, dsDevice dev, int B, int steps, double (*clk)(void), double* tf, double* tb,
                      int* iters) {
  dsFluidModel* m;
  dsFluidBatch* fb;
  char err[512];
  if (ds_fluid_model_create(def, &m, err, sizeof err) ||
      ds_fluid_batch_create(m, B, steps, 0, dev, &fb, err, sizeof err)) {
    fprintf(stderr, "bench_fluid_batch: %s\n", err);
    exit(1);
  }
  for (int b = 0; b < B; b++) ds_fluid_batch_set_param(fb, b, "source.0.density_rate", 5 + 0.01 * b);
  double t0 = clk();
  for (int t = 0; t < steps; t++)
    if (ds_fluid_batch_step(fb, NULL)) {
      fprintf(stderr, "bench_fluid_batch: %s\n", ds_fluid_batch_last_error(fb));
      exit(1);
    }
  double t1 = clk();
  double* w = calloc((size_t)B * ds_fluid_ncell(m), sizeof(double));
  double* gp = calloc((size_t)B * ds_fluid_nparam(m), sizeof(double));
  for (size_t i = 0; i < (size_t)B * ds_fluid_ncell(m); i++) w[i] = 1;
  dsFluidGrad g = {NULL, NULL, NULL, NULL, NULL, gp};
  if (ds_fluid_batch_backward(fb, NULL, w, NULL, &g)) {
    fprintf(stderr, "bench_fluid_batch: %s\n", ds_fluid_batch_last_error(fb));
    exit(1);
  }
  double t2 = clk();
  *tf = t1 - t0;
  *tb = t2 - t1;
  ds_fluid_batch_solver_stats(fb, 0, iters, NULL);
  free(w), free(gp);
  ds_fluid_batch_free(fb);
  ds_fluid_model_free(m);
}

/* --device: the N^3 plume on every device at every B, wall clock, one
 * untimed run of one step first (a GPU's start-up) */
static int devices_table(const dsDevice* devs, int ndev, const int* Bs, int nb, int n, int steps) {
  const dsFluidDef def = plume(n, n);
  const double cells = (double)n * n * n;
  double fw[8][8], fwb[8][8];
  char name[32];
  printf("bench_fluid_batch: %d^3 plume, %d steps forward then the backward, wall clock; cell-steps per second\n", n,
         steps);
  printf("%-8s %6s %16s %18s %10s\n", "device", "B", "fwd cell-step/s", "fwd+bwd cell-step/s", "PCG iters");
  int cpu_k = -1;
  for (int k = 0; k < ndev; k++) {
    if (devs[k].kind == DS_DEVICE_CPU) cpu_k = k;
    double tf, tb;
    int it;
    run_batch(&def, devs[k], 1, 1, wall, &tf, &tb, &it); /* warm-up */
    for (int j = 0; j < nb; j++) {
      run_batch(&def, devs[k], Bs[j], steps, wall, &tf, &tb, &it);
      fw[k][j] = Bs[j] * steps * cells / tf;
      fwb[k][j] = Bs[j] * steps * cells / (tf + tb);
      printf("%-8s %6d %16.4g %18.4g %10d\n", ds_device_name(devs[k], name, sizeof name), Bs[j], fw[k][j], fwb[k][j],
             it);
      fflush(stdout);
    }
  }
  for (int k = 0; k < ndev && cpu_k >= 0; k++)
    if (devs[k].kind == DS_DEVICE_CUDA)
      for (int j = 0; j < nb; j++)
        printf("smoke ratio %s / cpu, B %5d: forward %.3gx, forward+backward %.3gx\n",
               ds_device_name(devs[k], name, sizeof name), Bs[j], fw[k][j] / fw[cpu_k][j], fwb[k][j] / fwb[cpu_k][j]);
  return 0;
}

static void bench(const char* name, int n, int nz, int B, int steps) {
  const dsFluidDef def = plume(n, nz);
  double tf, tb;
  int it = 0;
  run_batch(&def, ds_device_cpu(), B, steps, cpu, &tf, &tb, &it);
  printf("%-5s B = %2d: forward %8.1f instance-steps/s, forward + backward %8.1f (CPU s: %.2f + %.2f, %d steps; "
         "last solve %d iterations)\n",
         name, B, B * steps / tf, B * steps / (tf + tb), tf, tb, steps, it);
  fflush(stdout);
}

int main(int argc, char** argv) {
  dsDevice devs[8];
  int ndev = 0, Bs_dev[8], nb = 0, grid = 16, dsteps = 4;
  for (int i = 1; i < argc; i++) {
    char err[512];
    if (!strcmp(argv[i], "--device") && i + 1 < argc && ndev < 8) {
      if (ds_device_parse("--device", argv[++i], &devs[ndev], err, sizeof err) ||
          ds_device_check("--device", devs[ndev], err, sizeof err)) {
        fprintf(stderr, "bench_fluid_batch: %s\n", err);
        return 2;
      }
      ndev++;
    } else if (!strcmp(argv[i], "--batch") && i + 1 < argc && nb < 8) {
      Bs_dev[nb++] = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--grid") && i + 1 < argc) {
      grid = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--steps") && i + 1 < argc) {
      dsteps = atoi(argv[++i]);
    } else if (argv[i][0] == '-' || i > 1) {
      fprintf(stderr, "usage: bench_fluid_batch [STEPS] | --device D... [--grid N] [--batch B]... [--steps S]\n");
      return 2;
    }
  }
  if (ndev) {
    if (!nb) Bs_dev[nb++] = 1, Bs_dev[nb++] = 64, Bs_dev[nb++] = 1024;
    for (int j = 0; j < nb; j++)
      if (Bs_dev[j] < 1) return fprintf(stderr, "bench_fluid_batch: --batch: expected >= 1\n"), 2;
    if (grid < 4 || grid > 256 || dsteps < 1) return fprintf(stderr, "bench_fluid_batch: --grid 4..256, --steps >= 1\n"), 2;
    return devices_table(devs, ndev, Bs_dev, nb, grid, dsteps);
  }
  const int steps = argc > 1 ? atoi(argv[1]) : 4;
  const int Bs[3] = {1, 8, 64};
  serial("64^2", 64, 1, steps);
  for (int k = 0; k < 3; k++) bench("64^2", 64, 1, Bs[k], steps);
  serial("16^3", 16, 16, steps);
  for (int k = 0; k < 3; k++) bench("16^3", 16, 16, Bs[k], steps);
  return 0;
}

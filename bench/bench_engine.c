/* Engine benchmark (figures, not a test): ns per element-substep of the
 * tet FEM (forward; forward + backward) at ~1,000 and ~20,000 tets and of
 * the cloth (membrane + bending + lift/drag; element = triangle) on 32x32
 * and 64x64 grids, with 1 and 2 threads, median of 5 runs; then the gear
 * scene of docs/scenes.md (control-fem: ~480 particles, ~1,150 tets, 5,760
 * substeps, ground contact, activations changing every 32 substeps)
 * forward + backward in seconds, median of 3, with the full tape and with
 * a checkpoint every ~sqrt(T) substeps.
 * Usage: bench_engine [quick]   ("quick": fewer substeps, for smoke runs) */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dsim/engine.h"
#include "bench/bench.h"
#include "dsim/mesh.h"
#include "dsim/scenes.h"

static void die(const char* what, int rc, const char* msg) {
  fprintf(stderr, "bench_engine: %s: %s (%s)\n", what, ds_err_name(rc), msg ? msg : "");
  exit(1);
}

static dsModel* finalize(dsBuilder* b) {
  dsModel* m;
  int rc = ds_builder_finalize(b, &m);
  if (rc) die("finalize", rc, ds_builder_last_error(b));
  ds_builder_free(b);
  return m;
}

static dsModel* tet_box(int nx, int ny, int nz) {
  dsBuilder* b;
  ds_builder_create(&b);
  dsTetMaterial te = {1e3, 1e3, 1};
  dsReal o[3] = {0, 0.02, 0}, v[3] = {0.5, -0.2, 0};
  int rc = ds_builder_add_tet_grid(b, nx, ny, nz, 0.1, 0.1, 0.1, o, 1, v, &te); /* the gear's density */
  if (rc < 0) die("tet grid", rc, ds_builder_last_error(b));
  dsGroundDef gd = {1e4, 1, 10, 0.5, 0.01};
  ds_builder_set_ground(b, &gd);
  ds_builder_set_dt(b, 1.0 / 1920);
  return finalize(b);
}

static dsModel* cloth(int n) {
  dsBuilder* b;
  ds_builder_create(&b);
  dsTriMaterial tm = {100, 1e4, 100};
  dsBendMaterial bm = {100, 0};
  dsReal o[3] = {-5, 2.5, 0}, v[3] = {1, 0, 0};
  int rc = ds_builder_add_cloth_grid(b, n, n, 0.125, o, 2, v, &tm, &bm);
  if (rc < 0) die("cloth", rc, ds_builder_last_error(b));
  ds_builder_set_aero(b, 10, 5);
  ds_builder_set_dt(b, 1.0 / 960);
  return finalize(b);
}

/* Activation pattern held for `hold` substeps: a travelling sine. */
static void set_act(const dsModel* m, dsData* d, int t, int hold) {
  double ph = 2.5 * (t / hold) * m->dt * hold;
  for (int i = 0; i < m->nact; i++) d->act[i] = 0.3 * tanh(sin(ph + 0.01 * i));
}

/* Seconds for T substeps forward (and backward when back). */
static double run(const dsModel* m, dsData* d, dsGrad* g, int T, int back, int hold) {
  double t0 = now();
  ds_data_reset(m, d);
  for (int t = 0; t < T; t++) {
    if (t % hold == 0) set_act(m, d, t, hold);
    int rc = ds_step(m, d);
    if (rc) die("step", rc, ds_data_last_error(d));
  }
  if (back) {
    int rc = ds_backward(m, d, g, m->x0, NULL, NULL, NULL);
    if (rc) die("backward", rc, ds_data_last_error(d));
  }
  return now() - t0;
}

static void bench_model(const char* label, dsModel* m, int nelem, int T) {
  dsDataDef dd = ds_default_data_def();
  dd.max_substeps = T;
  dd.act_records = T / 32 + 1;
  dsData* d;
  dsGrad* g;
  int rc = ds_data_create(m, &dd, &d);
  if (rc) die("data", rc, "");
  if ((rc = ds_grad_create(m, &g))) die("grad", rc, "");
  for (int th = 1; th <= 2; th++) {
    ds_set_num_threads(th);
    double f[5], fb[5];
    run(m, d, g, T, 1, 32); /* warm up */
    for (int r = 0; r < 5; r++) {
      f[r] = run(m, d, g, T, 0, 32);
      fb[r] = run(m, d, g, T, 1, 32);
    }
    double scale = 1e9 / ((double)nelem * T);
    printf("%-22s %6d elem %5d substeps  threads %d  forward %8.1f ns  forward+backward %8.1f ns  (per element-substep)\n",
           label, nelem, T, th, median(f, 5) * scale, median(fb, 5) * scale);
    fflush(stdout);
  }
  ds_grad_free(g);
  ds_data_free(d);
}

static void bench_gear(int T, int reps, int ckpt) {
  dsMesh gear;
  memset(&gear, 0, sizeof gear);
  dsGearDef gd = ds_default_gear_def();
  int rc = ds_mesh_gear(&gd, &gear);
  if (rc) die("gear mesh", rc, "");
  dsReal pos[3] = {-4, 2, 0}, v[3] = {1.5, 0, 0};
  ds_mesh_translate(&gear, pos);
  dsBuilder* b;
  ds_builder_create(&b);
  dsTetMaterial te = {1e3, 1e3, 1};
  if ((rc = ds_builder_add_soft_mesh(b, &gear, 1, v, &te)) < 0) die("gear", rc, ds_builder_last_error(b));
  dsGroundDef gr = {1e4, 1, 10, 0.5, 0.01};
  ds_builder_set_ground(b, &gr);
  ds_builder_set_dt(b, 1.0 / 1920);
  dsModel* m = finalize(b);
  ds_mesh_free(&gear);
  dsDataDef dd = ds_default_data_def();
  dd.max_substeps = T;
  dd.checkpoint_every = ckpt;
  dd.act_records = T / 32 + 1;
  dd.fext_records = 1;
  dsData* d;
  dsGrad* g;
  if ((rc = ds_data_create(m, &dd, &d))) die("data", rc, "");
  if ((rc = ds_grad_create(m, &g))) die("grad", rc, "");
  for (int th = ckpt > 1 ? 2 : 1; th <= 2; th++) {
    ds_set_num_threads(th);
    double f[5], fb[5];
    for (int r = 0; r < reps; r++) {
      f[r] = run(m, d, g, T, 0, 32);
      fb[r] = run(m, d, g, T, 1, 32);
    }
    printf("gear (%d particles, %d tets, %d substeps, checkpoint every %d)  threads %d  forward %.3f s  "
           "forward+backward %.3f s  (data %.0f MB)\n",
           m->nparticle, m->ntet, T, ckpt, th, median(f, reps), median(fb, reps), ds_data_bytes(m, d) / 1e6);
    fflush(stdout);
  }
  ds_grad_free(g);
  ds_data_free(d);
  ds_model_free(m);
}

int main(int argc, char** argv) {
  int quick = argc > 1 && strcmp(argv[1], "quick") == 0;
  int div = quick ? 8 : 1;
  dsModel* m = tet_box(5, 6, 6);
  bench_model("tet FEM ~1k", m, m->ntet, 480 / div);
  ds_model_free(m);
  m = tet_box(15, 15, 15);
  bench_model("tet FEM ~20k", m, m->ntet, 64 / div);
  ds_model_free(m);
  m = cloth(32);
  bench_model("cloth 32x32", m, m->ntri, 480 / div);
  ds_model_free(m);
  m = cloth(64);
  bench_model("cloth 64x64", m, m->ntri, 128 / div);
  ds_model_free(m);
  bench_gear(quick ? 576 : 5760, 3, 1);
  bench_gear(quick ? 576 : 5760, 3, quick ? 24 : 76); /* ~sqrt(T): O(sqrt T) memory */
  return 0;
}

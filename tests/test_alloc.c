/* Allocation: step, compute_forces and backward (full and checkpointed
 * tape) allocate nothing once data and gradient exist (counting allocator),
 * the arena is empty after every call, and every creation path (builder,
 * mesh helpers, finalize, model copy, data, gradient) fails cleanly with DS_ERR_NOMEM
 * when any one allocation fails (LeakSanitizer checks nothing leaks).
 * Models with rigid bodies are covered on both counts. */
#include "config.h"

#include <string.h>

#include "tests/dstest.h"
#include "tests/enginetest.h"

static long g_count = 0, g_fail_at = -1;
static void* c_malloc(size_t n) { return g_fail_at >= 0 && g_count++ == g_fail_at ? NULL : malloc(n); }
static void* c_realloc(void* p, size_t n) { return g_fail_at >= 0 && g_count++ == g_fail_at ? NULL : realloc(p, n); }
static void* c_calloc(size_t c, size_t n) { return g_fail_at >= 0 && g_count++ == g_fail_at ? NULL : calloc(c, n); }
static void* n_malloc(size_t n) { g_count++; return malloc(n); }
static void* n_realloc(void* p, size_t n) { g_count++; return realloc(p, n); }
static void* n_calloc(size_t c, size_t n) { g_count++; return calloc(c, n); }

static void hot_paths(int ckpt) {
  et_rng = 5;
  dsModel* m = et_soft_model(2, 1e-3);
  etScene s;
  et_scene_init(&s, m, 50, ckpt, 0.1, 0.2);
  ds_replace_allocator(n_malloc, n_realloc, n_calloc, free);
  g_count = 0;
  et_rollout(&s);
  CHECK_INT_EQ(s.d->arena_top, 0);
  ds_compute_forces(m, s.d);
  et_backward(&s);
  CHECK_INT_EQ(s.d->arena_top, 0);
  CHECK(s.d->arena_peak > 0 && s.d->arena_peak <= s.d->arena_size);
  ds_replace_allocator(NULL, NULL, NULL, NULL);
  if (g_count) fprintf(stderr, "checkpoint %d: %ld allocations in step/backward\n", ckpt, g_count);
  CHECK_INT_EQ(g_count, 0);
  et_scene_free(&s);
  ds_model_free(m);
}

/* The same with rigid bodies (a box and a sphere, thrown onto the ground,
 * an impulse at substep 3) beside a free particle. */
static void hot_paths_rigid(int ckpt) {
  dsBuilder* b;
  ds_builder_create(&b);
  dsGroundDef gd = {1e4, 10, 100, 0.5, 0};
  ds_builder_set_ground(b, &gd);
  ds_builder_set_dt(b, 1e-3);
  dsRigidDef rd = ds_default_rigid_def();
  rd.restitution = 0.5;
  rd.position[1] = 0.11;
  rd.velocity[0] = 1;
  const dsReal h[3] = {0.1, 0.1, 0.1}, xp[3] = {1, 1, 1};
  ds_builder_add_rigid_box(b, h, &rd);
  rd.position[0] = 1;
  ds_builder_add_rigid_sphere(b, 0.1, 8, &rd);
  ds_builder_add_particle(b, xp, NULL, 1);
  dsModel* m = NULL;
  CHECK_INT_EQ(ds_builder_finalize(b, &m), 0);
  ds_builder_free(b);
  dsDataDef dd = ds_default_data_def();
  dd.max_substeps = 50;
  dd.checkpoint_every = ckpt;
  dsData* d;
  dsGrad* g;
  ds_data_create(m, &dd, &d);
  ds_grad_create(m, &g);
  ds_replace_allocator(n_malloc, n_realloc, n_calloc, free);
  g_count = 0;
  const dsReal J[3] = {0.1, 0.2, 0}, at[3] = {0.05, 0.1, 0};
  for (int t = 0; t < 50; t++) {
    memset(d->body_fext, 0, 12 * sizeof(dsReal));
    if (t == 3) ds_body_set_impulse(m, d, 0, J, at);
    CHECK_INT_EQ(ds_step(m, d), 0);
  }
  CHECK_INT_EQ(d->arena_top, 0);
  ds_compute_forces(m, d);
  CHECK_INT_EQ(ds_backward(m, d, g, m->x0, NULL, NULL, NULL), 0);
  CHECK_INT_EQ(d->arena_top, 0);
  ds_replace_allocator(NULL, NULL, NULL, NULL);
  if (g_count) fprintf(stderr, "rigid, checkpoint %d: %ld allocations in step/backward\n", ckpt, g_count);
  CHECK_INT_EQ(g_count, 0);
  ds_grad_free(g);
  ds_data_free(d);
  ds_model_free(m);
}

/* Builds a cloth + soft box model, a data and a gradient; returns the first
 * error code. Everything is freed. */
static int build_all(void) {
  dsBuilder* b = NULL;
  dsModel* m = NULL;
  dsData* d = NULL;
  dsGrad* g = NULL;
  int rc = ds_builder_create(&b);
  dsTriMaterial tm = {10, 100, 1};
  dsBendMaterial bm = {1, 0.1};
  dsTetMaterial te = {1e3, 1e3, 1};
  dsReal o[3] = {0, 2, 0};
  if (!rc) rc = ds_builder_add_cloth_grid(b, 3, 3, 0.1, o, 1, NULL, &tm, &bm);
  if (rc >= 0) rc = ds_builder_add_tet_grid(b, 2, 1, 1, 0.1, 0.1, 0.1, NULL, 100, NULL, &te);
  if (rc >= 0) rc = ds_builder_add_spring(b, 0, 17, 1, 0, -1);
  dsRigidDef rd = ds_default_rigid_def();
  const dsReal hb[3] = {0.1, 0.2, 0.1};
  if (rc >= 0) rc = ds_builder_add_rigid_box(b, hb, &rd);
  if (rc >= 0) rc = ds_builder_add_rigid_sphere(b, 0.1, 6, &rd);
  if (rc >= 0) rc = ds_builder_add_rigid_cylinder(b, 0.1, 0.1, 5, &rd);
  if (rc >= 0) rc = ds_builder_finalize(b, &m);
  dsDataDef dd = ds_default_data_def();
  dd.max_substeps = 10;
  dd.checkpoint_every = 3;
  if (!rc) rc = ds_data_create(m, &dd, &d);
  if (!rc) rc = ds_grad_create(m, &g);
  if (!rc) {
    dsModel* c = NULL;
    rc = ds_model_copy(m, &c);
    ds_model_free(c);
  }
  if (!rc) {
    for (int t = 0; t < 10 && !rc; t++) rc = ds_step(m, d);
    if (!rc) rc = ds_backward(m, d, g, m->x0, NULL, NULL, NULL);
  }
  ds_grad_free(g);
  ds_data_free(d);
  ds_model_free(m);
  ds_builder_free(b);
  return rc < 0 ? rc : 0;
}

int main(void) {
  hot_paths(1);
  hot_paths(4);
  hot_paths_rigid(1);
  hot_paths_rigid(4);
  /* count the allocations of a successful build, then fail each in turn */
  g_fail_at = -1;
  ds_replace_allocator(n_malloc, n_realloc, n_calloc, free);
  g_count = 0;
  CHECK_INT_EQ(build_all(), 0);
  long total = g_count;
  CHECK(total > 20);
  int nomem = 0, other = 0;
  for (long k = 0; k < total; k++) {
    ds_replace_allocator(c_malloc, c_realloc, c_calloc, free);
    g_count = 0;
    g_fail_at = k;
    int rc = build_all();
    if (rc == DS_ERR_NOMEM) nomem++;
    else other++;
    if (rc != DS_ERR_NOMEM) fprintf(stderr, "allocation %ld failing gave %s\n", k, ds_err_name(rc));
  }
  ds_replace_allocator(NULL, NULL, NULL, NULL);
  CHECK_INT_EQ(nomem, total);
  CHECK_INT_EQ(other, 0);
  return DST_RESULT();
}

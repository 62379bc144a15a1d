/* Physics sanity of the step, divergence reporting, the arena and the tape
 * limits:
 *  - the rest state is an equilibrium (zero net force at zero activation)
 *    for membranes, springs, bending and tets; a nonzero activation is not;
 *  - an undamped spring system conserves energy within a bound at small dt
 *    (and a damped one loses energy, so the measure sees a difference);
 *  - a dropped soft cube settles on the ground: never below y = 0, resting
 *    within the static penalty penetration of the skin, at rest, unsquashed;
 *  - without ground and gravity, total momentum is conserved;
 *  - fixed particles stay put;
 *  - inverted tets and NaN/Inf are reported with substep and element;
 *  - arena overflow names the caller; tape limits are errors. */
#include "config.h"

#include <math.h>
#include <stdio.h>

#include "tests/dstest.h"
#include "tests/enginetest.h"
#include "dsim/mesh.h"

static dsModel* finalize(dsBuilder* b) {
  dsModel* m = NULL;
  int rc = ds_builder_finalize(b, &m);
  if (rc) et_fail("finalize", rc, ds_builder_last_error(b));
  ds_builder_free(b);
  return m;
}

static dsData* mkdata(const dsModel* m, int T) {
  dsDataDef dd = ds_default_data_def();
  dd.max_substeps = T;
  dsData* d = NULL;
  int rc = ds_data_create(m, &dd, &d);
  if (rc) et_fail("data", rc, "");
  return d;
}

static double max_abs(const dsReal* a, size_t n) {
  double r = 0;
  for (size_t i = 0; i < n; i++) r = fmax(r, fabs((double)a[i]));
  return r;
}

static void test_rest_equilibrium(void) {
  dsBuilder* b;
  ds_builder_create(&b);
  ds_builder_set_gravity(b, 0, 0, 0);
  dsTriMaterial tm = {1e3, 1e4, 10};
  dsBendMaterial bm = {5, 0.1};
  dsTetMaterial te = {1e4, 1e5, 10};
  dsReal o1[3] = {0, 1, 0}, o2[3] = {2, 1, 0};
  ds_builder_add_cloth_grid(b, 5, 4, 0.1, o1, 0.1, NULL, &tm, &bm);
  const int n = 30; /* (5+1) x (4+1) cloth particles */
  for (int i = 0; i + 7 < n; i += 3) ds_builder_add_spring(b, i, i + 7, 100, 1, -1);
  ds_builder_add_tet_grid(b, 3, 2, 2, 0.1, 0.15, 0.1, o2, 500, NULL, &te);
  dsModel* m = finalize(b);
  dsData* d = mkdata(m, 0);
  CHECK_INT_EQ(ds_compute_forces(m, d), 0);
  size_t n3 = 3 * (size_t)m->nparticle;
  /* forces scale: k_lambda * area or volume ~ 1e2 N; zero to rounding */
  CHECK(max_abs(d->f, n3) < 1e-9);
  /* a nonzero activation (or a rotated/translated copy at rest) */
  for (int i = 0; i < m->nact; i++) d->act[i] = 0.1;
  ds_compute_forces(m, d);
  CHECK(max_abs(d->f, n3) > 1e-2);
  /* rotated rest state (rigid rotation about z) is also force-free */
  for (int i = 0; i < m->nact; i++) d->act[i] = 0;
  for (int i = 0; i < m->nparticle; i++) {
    dsReal x = m->x0[3 * i], y = m->x0[3 * i + 1], c = cos(0.7), s = sin(0.7);
    d->x[3 * i] = c * x - s * y;
    d->x[3 * i + 1] = s * x + c * y;
  }
  ds_compute_forces(m, d);
  CHECK(max_abs(d->f, n3) < 1e-9);
  ds_data_free(d);
  ds_model_free(m);
}

/* Chain of 6 particles with springs (one stretched), no damping, gravity
 * on: E = sum m v^2/2 - m g.x + sum ke (l - L)^2/2. */
static double chain_energy(const dsModel* m, const dsData* d) {
  double E = 0;
  for (int i = 0; i < m->nparticle; i++) {
    for (int c = 0; c < 3; c++) E += 0.5 * m->mass[i] * d->v[3 * i + c] * d->v[3 * i + c];
    if (m->mass[i] > 0)
      for (int c = 0; c < 3; c++) E -= m->mass[i] * m->gravity[c] * d->x[3 * i + c];
  }
  for (int e = 0; e < m->nspring; e++) {
    const dsReal* a = d->x + 3 * m->spring_idx[2 * e];
    const dsReal* bb = d->x + 3 * m->spring_idx[2 * e + 1];
    double l = sqrt((a[0] - bb[0]) * (a[0] - bb[0]) + (a[1] - bb[1]) * (a[1] - bb[1]) + (a[2] - bb[2]) * (a[2] - bb[2]));
    E += 0.5 * m->spring_ke[e] * (l - m->spring_rest[e]) * (l - m->spring_rest[e]);
  }
  return E;
}

static double energy_drift(dsReal kd) {
  dsBuilder* b;
  ds_builder_create(&b);
  ds_builder_set_dt(b, 1e-4);
  for (int i = 0; i < 6; i++) {
    dsReal x[3] = {0.3 * i, 1 + 0.05 * (i % 2), 0.02 * i}, v[3] = {0, 0.5 * (i == 3), -0.3 * (i == 5)};
    ds_builder_add_particle(b, x, v, i == 0 ? 0 : 0.5 + 0.1 * i);
  }
  for (int i = 0; i < 5; i++) ds_builder_add_spring(b, i, i + 1, 200, kd, 0.25);
  ds_builder_add_spring(b, 1, 3, 100, kd, -1);
  dsModel* m = finalize(b);
  dsData* d = mkdata(m, 0);
  double E0 = chain_energy(m, d), worst = 0;
  for (int t = 0; t < 20000; t++) {
    if (ds_step(m, d)) break;
    if (t % 100 == 99) worst = fmax(worst, fabs(chain_energy(m, d) - E0));
  }
  /* the fixed particle did not move */
  CHECK(d->x[0] == m->x0[0] && d->x[1] == m->x0[1] && d->x[2] == m->x0[2]);
  ds_data_free(d);
  ds_model_free(m);
  return worst / fabs(E0);
}

static void test_energy(void) {
  double undamped = energy_drift(0), damped = energy_drift(2);
  fprintf(stderr, "energy: relative drift undamped %.3g, damped %.3g\n", undamped, damped);
  CHECK(undamped < 2e-3);
  CHECK(damped > 0.05);
}

static void test_settle(void) {
  dsBuilder* b;
  ds_builder_create(&b);
  ds_builder_set_dt(b, 5e-4);
  dsTetMaterial te = {2e4, 5e4, 50};
  dsReal origin[3] = {0, 0.15, 0}, v[3] = {0.5, -1, 0};
  ds_builder_add_tet_grid(b, 2, 2, 2, 0.1, 0.1, 0.1, origin, 1000, v, &te);
  dsGroundDef gd = {2e4, 100, 100, 0.6, 0.01};
  ds_builder_set_ground(b, &gd);
  dsModel* m = finalize(b);
  dsData* d = mkdata(m, 0);
  double ymin_ever = 1e9, total = 0, nbottom = 0;
  for (int i = 0; i < m->nparticle; i++) {
    total += m->mass[i];
    if (m->x0[3 * i + 1] < 0.15 + 1e-9) nbottom++;
  }
  int rc = 0;
  for (int t = 0; t < 6000 && !rc; t++) {
    rc = ds_step(m, d);
    for (int i = 0; i < m->nparticle; i++) ymin_ever = fmin(ymin_ever, d->x[3 * i + 1]);
  }
  CHECK_INT_EQ(rc, 0);
  double ymin = 1e9, ymax = -1e9, vmax = 0;
  for (int i = 0; i < m->nparticle; i++) {
    ymin = fmin(ymin, d->x[3 * i + 1]);
    ymax = fmax(ymax, d->x[3 * i + 1]);
    for (int c = 0; c < 3; c++) vmax = fmax(vmax, fabs(d->v[3 * i + c]));
  }
  /* static penalty penetration: the bottom layer carries the weight (plus
   * the cube's own sag); allow 3x the uniform share */
  double pen = 3 * total * 9.8 / (nbottom * gd.ke);
  fprintf(stderr, "settle: min y ever %.5g, final min y %.5g (skin %.3g, allowed %.3g), height %.4g, max |v| %.3g\n",
          ymin_ever, ymin, gd.skin, gd.skin - pen, ymax - ymin, vmax);
  CHECK(ymin_ever > 0);
  CHECK(ymin > gd.skin - pen);
  CHECK(ymin < gd.skin);
  CHECK(vmax < 1e-2);
  CHECK_CLOSE(ymax - ymin, 0.2, 0.05, 0);
  ds_data_free(d);
  ds_model_free(m);
}

static void test_momentum(void) {
  dsBuilder* b;
  ds_builder_create(&b);
  ds_builder_set_gravity(b, 0, 0, 0);
  ds_builder_set_dt(b, 5e-4);
  dsTriMaterial tm = {100, 1e3, 1};
  dsBendMaterial bm = {0.5, 0.01};
  dsTetMaterial te = {1e4, 2e4, 5};
  dsReal o1[3] = {0, 1, 0}, o2[3] = {1, 1, 0};
  ds_builder_add_cloth_grid(b, 3, 3, 0.1, o1, 0.05, NULL, &tm, &bm);
  ds_builder_add_tet_grid(b, 2, 1, 1, 0.1, 0.1, 0.1, o2, 800, NULL, &te);
  ds_builder_add_spring(b, 15, 16, 300, 0.5, 0.3); /* links cloth to box, stretched */
  dsModel* m = finalize(b);
  dsData* d = mkdata(m, 0);
  et_rng = 99;
  for (int k = 0; k < 3 * m->nparticle; k++) {
    d->v[k] = et_unif(-1, 1);
    d->x[k] += 0.01 * et_unif(-1, 1);
  }
  for (int i = 0; i < m->nact; i++) d->act[i] = 0.05 * et_unif(-1, 1);
  double p0[3] = {0, 0, 0}, p1[3] = {0, 0, 0}, scale = 0;
  for (int i = 0; i < m->nparticle; i++)
    for (int c = 0; c < 3; c++) {
      p0[c] += m->mass[i] * d->v[3 * i + c];
      scale += m->mass[i] * fabs(d->v[3 * i + c]);
    }
  int rc = 0;
  for (int t = 0; t < 2000 && !rc; t++) rc = ds_step(m, d);
  CHECK_INT_EQ(rc, 0);
  double moved = 0;
  for (int i = 0; i < m->nparticle; i++)
    for (int c = 0; c < 3; c++) {
      p1[c] += m->mass[i] * d->v[3 * i + c];
      moved += fabs(d->x[3 * i + c] - m->x0[3 * i + c]);
    }
  for (int c = 0; c < 3; c++) CHECK_CLOSE(p1[c], p0[c], 0, 1e-12 * scale);
  CHECK(moved > 0.1); /* something happened */
  ds_data_free(d);
  ds_model_free(m);
}

static void test_divergence(void) {
  dsBuilder* b;
  ds_builder_create(&b);
  dsReal xs[5][3] = {{0, 1, 0}, {1, 1, 0}, {0, 2, 0}, {0, 1, 1}, {1, 1, 1}};
  for (int i = 0; i < 5; i++) ds_builder_add_particle(b, xs[i], NULL, 1);
  dsTetMaterial te = {1e3, 1e3, 1};
  ds_builder_add_tet(b, 0, 1, 2, 3, &te);
  ds_builder_add_tet(b, 1, 2, 3, 4, &te); /* ((x2-x1)x(x3-x1)).(x4-x1) = 1 > 0 */
  dsModel* m = NULL;
  int rc = ds_builder_finalize(b, &m);
  CHECK_INT_EQ(rc, 0);
  ds_builder_free(b);
  dsData* d = mkdata(m, 50);
  for (int t = 0; t < 3; t++) CHECK_INT_EQ(ds_step(m, d), 0);
  /* push particle 4 through the opposite face: tet 1 inverts */
  d->x[12] = 0.1;
  d->x[13] = 1.2;
  d->x[14] = 0.1;
  rc = ds_step(m, d);
  CHECK_INT_EQ(rc, DS_ERR_INVERTED);
  CHECK_STR_CONTAINS(ds_data_last_error(d), "substep 3: tet 1 inverted (J = -");
  CHECK_INT_EQ(ds_step(m, d), DS_ERR_STATE);
  CHECK_INT_EQ(ds_backward_begin(m, d), DS_ERR_STATE);
  /* NaN and Inf from an external force */
  ds_data_reset(m, d);
  CHECK_STR_EQ(ds_data_last_error(d), "");
  for (int t = 0; t < 7; t++) CHECK_INT_EQ(ds_step(m, d), 0);
  d->f_ext[3 * 3 + 1] = NAN;
  CHECK_INT_EQ(ds_step(m, d), DS_ERR_DIVERGED);
  CHECK_STR_CONTAINS(ds_data_last_error(d), "substep 7: particle 3 position is NaN");
  ds_data_reset(m, d);
  d->f_ext[3 * 2] = INFINITY;
  CHECK_INT_EQ(ds_step(m, d), DS_ERR_DIVERGED);
  CHECK_STR_CONTAINS(ds_data_last_error(d), "substep 0: particle 2 position is Inf");
  ds_data_free(d);

  /* arena overflow names the caller */
  dsDataDef dd = ds_default_data_def();
  dd.arena_bytes = 64;
  CHECK_INT_EQ(ds_data_create(m, &dd, &d), 0);
  CHECK_INT_EQ(ds_step(m, d), DS_ERR_ARENA);
  CHECK_STR_CONTAINS(ds_data_last_error(d), "ds_step");
  CHECK_INT_EQ(ds_compute_forces(m, d), DS_ERR_ARENA);
  CHECK_STR_CONTAINS(ds_data_last_error(d), "ds_compute_forces");
  ds_data_free(d);

  /* tape limits */
  dd = ds_default_data_def();
  dd.max_substeps = 3;
  dd.act_records = 2;
  ds_data_create(m, &dd, &d);
  d->act[0] = 0.1;
  CHECK_INT_EQ(ds_step(m, d), 0);
  CHECK_INT_EQ(ds_step(m, d), 0); /* same activation: no new record */
  CHECK_INT_EQ(d->act_n, 1);
  d->act[0] = 0.2;
  CHECK_INT_EQ(ds_step(m, d), 0);
  CHECK_INT_EQ(ds_step(m, d), DS_ERR_STATE);
  CHECK_STR_CONTAINS(ds_data_last_error(d), "tape full");
  ds_data_reset(m, d);
  for (int t = 0; t < 2; t++) {
    d->act[1] = 0.1 * (t + 1);
    CHECK_INT_EQ(ds_step(m, d), 0);
  }
  d->act[1] = 0.5;
  CHECK_INT_EQ(ds_step(m, d), DS_ERR_RANGE);
  CHECK_STR_CONTAINS(ds_data_last_error(d), "activation tape full");
  /* state can be set only at substep 0 */
  CHECK_INT_EQ(ds_data_set_state(m, d, m->x0, NULL), DS_ERR_STATE);
  ds_data_reset(m, d);
  CHECK_INT_EQ(ds_data_set_state(m, d, NULL, m->x0), 0);
  CHECK(d->v[4] == m->x0[4]);
  ds_data_free(d);

  /* no tape: unlimited steps, no backward */
  d = mkdata(m, 0);
  for (int t = 0; t < 10; t++) CHECK_INT_EQ(ds_step(m, d), 0);
  CHECK_INT_EQ(ds_backward_begin(m, d), DS_ERR_STATE);
  ds_data_free(d);
  ds_model_free(m);
}

/* The checks run inside the parallel substep, each thread on its own
 * particles and tets: the element reported must still be the first one,
 * and the tape must hold the state before each substep, for any thread
 * count. */
static void test_parallel_checks(void) {
  dsBuilder* b;
  ds_builder_create(&b);
  dsTetMaterial te = {1e3, 1e3, 1};
  dsReal o[3] = {0, 0.5, 0};
  ds_builder_add_tet_grid(b, 12, 3, 12, 0.1, 0.1, 0.1, o, 100, NULL, &te);
  ds_builder_set_dt(b, 1e-3);
  dsModel* m = NULL;
  CHECK_INT_EQ(ds_builder_finalize(b, &m), 0);
  ds_builder_free(b);
  const int np = m->nparticle, late = np - 5, early = 40;
  const int adaptive = ds_get_adaptive_threads();
  ds_set_adaptive_threads(0);
  for (int th = 1; th <= 4; th *= 2) {
    ds_set_num_threads(th);
    dsData* d = mkdata(m, 20);
    for (int t = 0; t < 3; t++) CHECK_INT_EQ(ds_step(m, d), 0);
    /* the tape rows are the states before each substep */
    dsData* ref = mkdata(m, 0);
    for (int t = 0; t < 3; t++) {
      for (int k = 0; k < 3 * np; k++)
        if (d->tape_x[(size_t)t * 3 * np + k] != ref->x[k] || d->tape_v[(size_t)t * 3 * np + k] != ref->v[k]) {
          CHECK(0 && "tape row differs from the state");
          t = 3;
          break;
        }
      if (t < 3) CHECK_INT_EQ(ds_step(m, ref), 0);
    }
    ds_data_free(ref);
    /* two bad particles, in different threads' shares: the first is named */
    d->f_ext[3 * late + 1] = NAN;
    d->f_ext[3 * early + 2] = INFINITY;
    CHECK_INT_EQ(ds_step(m, d), DS_ERR_DIVERGED);
    char want[96];
    snprintf(want, sizeof want, "substep 3: particle %d position is Inf", early);
    CHECK_STR_CONTAINS(ds_data_last_error(d), want);
    /* two inverted tets far apart: the first is named */
    ds_data_reset(m, d);
    const int* t0 = m->tet_idx + 4 * 3;
    const int* t1 = m->tet_idx + 4 * (m->ntet - 2);
    for (int c = 0; c < 3; c++) {
      d->x[3 * t1[3] + c] = 2 * d->x[3 * t1[0] + c] - d->x[3 * t1[3] + c]; /* reflect through vertex 0 */
      d->x[3 * t0[3] + c] = 2 * d->x[3 * t0[0] + c] - d->x[3 * t0[3] + c];
    }
    int first = -1, nbad = 0;
    for (int e = 0; e < m->ntet; e++) {
      const int* q = m->tet_idx + 4 * e;
      if (ds_tet_signed_volume(d->x + 3 * q[0], d->x + 3 * q[1], d->x + 3 * q[2], d->x + 3 * q[3]) <= 0) {
        if (first < 0) first = e;
        nbad++;
      }
    }
    CHECK(first >= 0 && first < 40 && nbad > 1);
    CHECK_INT_EQ(ds_step(m, d), DS_ERR_INVERTED);
    snprintf(want, sizeof want, "substep 0: tet %d inverted (J = -", first);
    CHECK_STR_CONTAINS(ds_data_last_error(d), want);
    ds_data_free(d);
  }
  ds_set_num_threads(0);
  ds_set_adaptive_threads(adaptive);
  ds_model_free(m);
}

int main(void) {
  if (DS_SINGLE) DST_SKIP("tolerances need double precision");
  test_parallel_checks();
  test_rest_equilibrium();
  test_energy();
  test_settle();
  test_momentum();
  test_divergence();
  return DST_RESULT();
}

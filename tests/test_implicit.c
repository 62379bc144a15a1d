/* The implicit (backward Euler) integrator (engine/implicit.c): adjoints by
 * the implicit function theorem against central differences in double, on
 * one substep and on 50, of a cloth patch (membrane, bending, springs, a
 * fixed corner; no ground), the same with lift and drag, out of contact and
 * falling onto the ground, a tet block with activations sliding on the
 * ground (contact with friction) and a spring chain with activations
 * falling onto the ground (out of, then in contact); every state, control
 * and named parameter class on a few components, and a perturbed gradient
 * (one component x 1.01) must fail the same comparison. Then: checkpointed
 * backward equals the full tape bit for bit; 1 and 2 threads give the same
 * bits; Newton's iteration cap gives DS_ERR_DIVERGED naming the substep and
 * the residual; rigid bodies are refused; a stiff spring
 * beam at 20x the semi-implicit stable step stays bounded and loses energy
 * under backward Euler, while the semi-implicit step at that size is
 * reported as DS_ERR_DIVERGED; the config keys env.physics.integrator and
 * the solver settings reach the model, and the batched engine's CUDA
 * backend refuses it (its CPU backend runs it: tests/test_batch_implicit);
 * the walker at 10x its bundled step: the activations' gradient of a planar
 * model does not change when the loss weights z by 1e10 (the adjoint's
 * row-by-row refinement); the block products' vector kernel gives the
 * scalar loop's bits.
 * With the CHOLMOD preconditioner (where the build has it): its factor
 * solves (J + J^T) / 2 to rounding, the gradients equal block-Jacobi's to
 * the solver tolerances, and checkpoints and threads keep the bits. */
#include "config.h"

#include <math.h>

#include "dsim/engine_batch.h"
#include "dsim/env.h"
#include "dsim/fd.h"
#include "dsim/mesh.h"
#include "dsim/scenes.h"
#include "tests/dstest.h"
#include "tests/enginetest.h"
#include "engine/engine_priv.h"
#include "engine/force_contact.h"
#include "engine/implicit.h"
#include "engine/sparse.h"

#define NPICK 4

/* tight solver settings: FD in double resolves the loss to ~1e-10, so
 * Newton and the adjoint solve must converge well below that */
static dsSolverSettings tight(void) {
  dsSolverSettings s = ds_default_solver_settings();
  s.newton_tol = 1e-12;
  s.cg_tol = 1e-12;
  s.adjoint_tol = 1e-13;
  s.newton_max_iter = 60;
  s.cg_max_iter = 2000;
  return s;
}

static dsModel* finish(dsBuilder* b, dsReal dt) {
  dsModel* m;
  ds_builder_set_dt(b, dt);
  dsSolverSettings s = tight();
  CHECK_INT_EQ(ds_builder_set_integrator(b, DS_INTEGRATOR_IMPLICIT), 0);
  CHECK_INT_EQ(ds_builder_set_solver(b, &s), 0);
  int rc = ds_builder_finalize(b, &m);
  if (rc) et_fail("finalize", rc, ds_builder_last_error(b));
  ds_builder_free(b);
  return m;
}

/* cloth 3 x 3 cells, springs on every other cell's free diagonal, one fixed
 * corner, no ground; with aero, lift and drag (with ground control-cloth's
 * coefficients, without a fifth of them) on a free cloth (no fixed corner: one makes it swing,
 * and faces pass through n . vb = 0, the kink of |n . vb|, which an FD
 * step must not straddle), moving along its normal (z: the grid is in the
 * xy plane; gravity along -z); with ground, its lower edge 2 cm above the ground, falling
 * onto it (no approach damping) */
static dsModel* cloth_model(dsReal dt, int aero, int ground) {
  dsBuilder* b;
  if (ds_builder_create(&b)) et_fail("builder", DS_ERR_NOMEM, "");
  const int nx = 3, ny = 3;
  dsTriMaterial tm = {60, 300, 0.5};
  dsBendMaterial bm = {0.05, 0.002};
  dsReal origin[3] = {-0.2, ground ? 0.02 : 1.0, 0.05}, v0[3] = {aero ? 0.1 : 0.4, aero ? -0.3 : 0.3, aero ? -2.0 : -0.2};
  int rc = ds_builder_add_cloth_grid(b, nx, ny, 0.1, origin, 0.02, v0, &tm, &bm);
  if (rc < 0) et_fail("cloth grid", rc, ds_builder_last_error(b));
  for (int j = 0; j < ny; j += 2)
    for (int i = 0; i < nx; i++)
      if ((rc = ds_builder_add_spring(b, j * (nx + 1) + i + 1, (j + 1) * (nx + 1) + i, 20, 0.05, -1)) < 0)
        et_fail("spring", rc, ds_builder_last_error(b));
  if (aero) ds_builder_set_aero(b, ground ? 10 : 2, ground ? 5 : 1);
  if (ground) {
    dsGroundDef gd = {2e3, 0, 30, 0.5, 0.01};
    ds_builder_set_ground(b, &gd);
  }
  dsModel* m = finish(b, dt);
  dsReal mass[64], x0[3 * 64];
  for (int i = 0; i < m->nparticle; i++) mass[i] = 0.02 * (1 + 0.3 * et_unif(-1, 1));
  if (!aero) mass[0] = 0;
  ds_model_set_param(m, "particle.mass", mass, m->nparticle);
  if (aero && !ground) { /* falling along its normal: gravity in the grid's plane would turn it edge-on */
    const dsReal gz[3] = {0, 0, -9.8};
    ds_model_set_param(m, "gravity", gz, 3);
  }
  memcpy(x0, m->x0, 3 * (size_t)m->nparticle * sizeof(dsReal));
  for (int k = 3; k < 3 * m->nparticle; k++) x0[k] += 0.01 * et_unif(-1, 1);
  ds_model_set_param(m, "initial_position", x0, 3 * m->nparticle);
  return m;
}

/* tet block nx x ny x nz cells of 0.1 m resting in ground contact (its
 * bottom at the depth where contact carries its weight), sliding sideways
 * (friction), some bottom particles lifting off and landing again; no
 * approach damping (kd = 0: see chain_model) */
static dsModel* block_model(int nx, int ny, int nz, dsReal dt) {
  dsBuilder* b;
  if (ds_builder_create(&b)) et_fail("builder", DS_ERR_NOMEM, "");
  dsTetMaterial tm = {2e4, 5e4, 20};
  dsGroundDef gd = {3e4, 0, 40, 0.5, 0.01};
  const dsReal weight = 1000 * 0.001 * nx * ny * nz * 9.8 / ((nx + 1) * (nz + 1));
  dsReal origin[3] = {0.0, gd.skin - weight / gd.ke, 0.0}, v0[3] = {0.6, 0, 0.2};
  int rc = ds_builder_add_tet_grid(b, nx, ny, nz, 0.1, 0.1, 0.1, origin, 1000, v0, &tm);
  if (rc < 0) et_fail("tet grid", rc, ds_builder_last_error(b));
  ds_builder_set_ground(b, &gd);
  return finish(b, dt);
}

/* chain of n particles along x joined by springs (and springs skipping
 * one), falling onto the ground with a sideways velocity and contact
 * without approach damping (kd = 0); or (lying) lying on it, in contact
 * throughout, sliding, with kd > 0. The approach damping makes the contact
 * force jump by kd |v_y| where a particle crosses the skin, and a
 * backward-Euler step that lands in the jump has no solution
 * (docs/integrators.md), so kd is checked where nothing crosses. */
static dsModel* chain_model(int n, int lying, dsReal dt) {
  dsBuilder* b;
  if (ds_builder_create(&b)) et_fail("builder", DS_ERR_NOMEM, "");
  dsGroundDef gd = {1e4, lying ? 100 : 0, 30, 0.5, 0.01};
  int rc;
  for (int i = 0; i < n; i++) {
    const dsReal mass = 0.05 + 0.01 * i;
    dsReal x[3] = {0.1 * i, 0.06 + 0.01 * (i % 2), 0.02 * (i % 3)}, v[3] = {0.5, -0.6, 0.1 * (i - 2)};
    if (lying) { /* each particle at the depth where contact carries its weight, pressing in with the
                  * approach damping on and overdamped (kd > 2 sqrt(ke m)), so that v_y stays < 0 away from
                  * its kink at 0 */
      x[1] = gd.skin - mass * 9.8 / gd.ke;
      v[0] = 2; /* sliding throughout: friction (mu g ~ 5 m/s^2) stops it after ~0.4 s */
      v[1] = -0.02;
    }
    if ((rc = ds_builder_add_particle(b, x, v, mass)) < 0) et_fail("particle", rc, ds_builder_last_error(b));
  }
  for (int i = 0; i + 1 < n; i++) {
    if ((rc = ds_builder_add_spring(b, i, i + 1, 2e3, 2, -1)) < 0) et_fail("spring", rc, ds_builder_last_error(b));
    if (i + 2 < n && (rc = ds_builder_add_spring(b, i, i + 2, 5e2, 1, -1)) < 0)
      et_fail("spring", rc, ds_builder_last_error(b));
  }
  ds_builder_set_ground(b, &gd);
  return finish(b, dt);
}

/* ---- central differences ------------------------------------------------------- */
/* FD step: Newton stops at a relative residual of 1e-12, which the loss
 * sees as noise of that order; h = 1e-5 |p| keeps it ~1e-7 of the
 * gradient while the truncation error stays ~1e-10, and small enough not
 * to straddle the contact's kinks (the smooth cloth uses 1e-4) */
static double g_hrel = 1e-5, g_hfloor = 0.1;
static double step_for(double p) { return g_hrel * fmax(fabs(p), g_hfloor); }
static double g_worst = 0;

static int compare(const char* label, const double* a, const double* fd, int n, double rtol) {
  double scale = 0;
  for (int i = 0; i < n; i++) scale = fmax(scale, fmax(fabs(a[i]), fabs(fd[i])));
  const double atol = 1e-7 * scale + 1e-11;
  int wi;
  double we;
  const int bad = ds_fd_compare(a, fd, n, rtol, atol, &wi, &we);
  if (bad)
    for (int i = 0; i < n; i++) fprintf(stderr, "  %s[%d]: analytic %.12g fd %.12g\n", label, i, a[i], fd[i]);
  if (wi >= 0) g_worst = fmax(g_worst, we / (atol + rtol * fmax(fabs(a[wi]), fabs(fd[wi]))));
  /* a wrong adjoint (the largest component x 1.01) must not pass, where the gradient stands out of
   * the absolute floor (1e-11) by far */
  double p[NPICK];
  int big = 0;
  for (int i = 0; i < n; i++) {
    p[i] = a[i];
    if (fabs(a[i]) > fabs(a[big])) big = i;
  }
  p[big] *= 1.01;
  if (fabs(a[big]) > 1e-8 && !ds_fd_compare(p, fd, n, rtol, atol, NULL, NULL)) {
    fprintf(stderr, "%s: a perturbed gradient was accepted (%.6g, fd %.6g)\n", label, a[big], fd[big]);
    CHECK(0);
  }
  return bad;
}

static void check_param(etScene* s, const char* name, int skip_first, double rtol, const char* scene) {
  dsReal *g, *buf;
  const dsReal* cur;
  int cnt;
  CHECK_INT_EQ(ds_grad_param(s->g, name, &g, &cnt), 0);
  ds_model_param(s->m, name, &cur, &cnt);
  int idx[NPICK], n = 0;
  if (cnt <= NPICK + skip_first) {
    for (int i = skip_first; i < cnt; i++) idx[n++] = i;
  } else {
    while (n < NPICK) {
      const int i = skip_first + (int)et_unif(0, cnt - skip_first);
      int dup = 0;
      for (int j = 0; j < n; j++) dup |= idx[j] == i;
      if (!dup && i < cnt) idx[n++] = i;
    }
  }
  buf = (dsReal*)malloc((size_t)cnt * sizeof(dsReal));
  memcpy(buf, cur, (size_t)cnt * sizeof(dsReal));
  double a[NPICK], fd[NPICK];
  for (int j = 0; j < n; j++) {
    a[j] = g[idx[j]];
    const dsReal p0 = buf[idx[j]];
    const double h = step_for(p0);
    buf[idx[j]] = p0 + h;
    ds_model_set_param(s->m, name, buf, cnt);
    const double lp = et_rollout(s);
    buf[idx[j]] = p0 - h;
    ds_model_set_param(s->m, name, buf, cnt);
    const double lm = et_rollout(s);
    buf[idx[j]] = p0;
    ds_model_set_param(s->m, name, buf, cnt);
    fd[j] = (lp - lm) / (2 * h);
  }
  free(buf);
  if (compare(name, a, fd, n, rtol)) {
    fprintf(stderr, "%s: gradient of %s disagrees with central differences\n", scene, name);
    CHECK(0);
  }
}

/* per-substep controls: activations (which = 0) or external forces (1) */
static void check_control(etScene* s, int which, double rtol, const char* scene) {
  const int T = s->T;
  const size_t len = which ? 3 * (size_t)s->m->nparticle : (size_t)s->m->nact;
  if (len == 0) return;
  dsReal* arr = which ? s->fext : s->act;
  const dsReal* grad = which ? s->gfext : s->gact;
  double a[NPICK], fd[NPICK];
  for (int j = 0; j < NPICK; j++) {
    const int t = j == 0 ? 0 : j == NPICK - 1 ? T - 1 : (int)et_unif(0, T);
    size_t k = (size_t)et_unif(0, (double)len);
    if (which && k < 3 && s->m->mass[0] == 0) k += 3; /* a fixed particle's force does nothing */
    dsReal* p = arr + (size_t)t * len + k;
    const dsReal p0 = *p;
    const double h = step_for(p0); /* small: a larger step straddles the contact's kinks (v_y = 0, stick/slip) */
    *p = p0 + h;
    const double lp = et_rollout(s);
    *p = p0 - h;
    const double lm = et_rollout(s);
    *p = p0;
    fd[j] = (lp - lm) / (2 * h);
    a[j] = grad[(size_t)t * len + k];
  }
  const char* name = which ? "f_ext per substep" : "activation per substep";
  if (compare(name, a, fd, NPICK, rtol)) {
    fprintf(stderr, "%s: gradient of %s disagrees with central differences\n", scene, name);
    CHECK(0);
  }
}

static void run_scene(dsModel* m, int T, dsReal act_amp, dsReal fext_amp, const char* const* names, int nnames,
                      const char* scene) {
  etScene s;
  et_scene_init(&s, m, T, 1, act_amp, fext_amp);
  et_rollout(&s);
  et_backward(&s);
  for (int i = 0; i < nnames; i++) check_param(&s, names[i], strcmp(names[i], "particle.mass") == 0, 1e-5, scene);
  check_control(&s, 0, 1e-5, scene);
  check_control(&s, 1, 1e-5, scene);
  et_scene_free(&s);
}

/* lowest particle height over a rollout, and whether it starts above the skin */
static void contact_span(dsModel* m, int T, int* first, int* ntouch) {
  etScene s;
  et_scene_init(&s, m, T, 1, 0, 0);
  ds_data_reset(m, s.d);
  *first = -1;
  *ntouch = 0;
  for (int t = 0; t < T; t++) {
    int touch = 0;
    for (int i = 0; i < m->nparticle; i++) touch |= s.d->x[3 * i + 1] < m->contact_skin[0];
    if (touch && *first < 0) *first = t;
    *ntouch += touch;
    CHECK_INT_EQ(ds_step(m, s.d), 0);
  }
  et_scene_free(&s);
}

/* smallest |cos| of the angle between a face's normal and its mean
 * velocity over a rollout (|n . vb| / (|n| |vb|)): lift and drag have a kink
 * at n . vb = 0, which an FD step must not straddle */
static double aero_margin(dsModel* m, int T) {
  etScene s;
  et_scene_init(&s, m, T, 1, 0, 0);
  ds_data_reset(m, s.d);
  double worst = 1;
  for (int t = 0; t <= T; t++) {
    for (int e = 0; e < m->ntri; e++) {
      const int* q = m->tri_idx + 3 * e;
      double a[3], b[3], n[3], vb[3];
      for (int c = 0; c < 3; c++) {
        a[c] = s.d->x[3 * q[1] + c] - s.d->x[3 * q[0] + c];
        b[c] = s.d->x[3 * q[2] + c] - s.d->x[3 * q[0] + c];
        vb[c] = (s.d->v[3 * q[0] + c] + s.d->v[3 * q[1] + c] + s.d->v[3 * q[2] + c]) / 3;
      }
      n[0] = a[1] * b[2] - a[2] * b[1];
      n[1] = a[2] * b[0] - a[0] * b[2];
      n[2] = a[0] * b[1] - a[1] * b[0];
      const double un = n[0] * vb[0] + n[1] * vb[1] + n[2] * vb[2];
      const double nn = sqrt(n[0] * n[0] + n[1] * n[1] + n[2] * n[2]);
      const double nv = sqrt(vb[0] * vb[0] + vb[1] * vb[1] + vb[2] * vb[2]);
      if (nn * nv > 0) worst = fmin(worst, fabs(un) / (nn * nv));
    }
    if (t < T) CHECK_INT_EQ(ds_step(m, s.d), 0);
  }
  et_scene_free(&s);
  return worst;
}

static void gradient_checks(void) {
  {
    dsModel* m = cloth_model(1e-2, 0, 0);
    CHECK(m->nbend > 0 && m->nspring > 0 && m->mass[0] == 0 && m->integrator == DS_INTEGRATOR_IMPLICIT);
    static const char* const names[] = {"initial_position", "initial_velocity", "particle.mass", "tri.k_mu",
                                        "tri.k_lambda",     "tri.k_damp",       "spring.ke",     "spring.kd",
                                        "spring.rest",      "bend.ke",          "bend.kd",       "bend.rest",
                                        "gravity"};
    const int nn = (int)(sizeof names / sizeof names[0]);
    g_hrel = 1e-4; /* smooth (no contact): a larger step lifts the Newton noise out of the differences */
    run_scene(m, 1, 0.2, 0.05, names, nn, "cloth, 1 substep");
    run_scene(m, 50, 0.2, 0.05, names, nn, "cloth, 50 substeps");
    g_hrel = 1e-5;
    ds_model_free(m);
  }
  {
    dsModel* m = block_model(2, 1, 1, 5e-3);
    CHECK(m->ntet > 0 && m->ground == 1);
    static const char* const names[] = {"initial_position", "initial_velocity", "particle.mass", "tet.k_mu",
                                        "tet.k_lambda",     "tet.k_damp",       "contact.ke",    "contact.kf",
                                        "contact.mu",       "contact.skin",     "gravity"};
    const int nn = (int)(sizeof names / sizeof names[0]);
    int first, ntouch;
    contact_span(m, 50, &first, &ntouch);
    CHECK(first == 0 && ntouch == 50);
    run_scene(m, 1, 0.1, 0.5, names, nn, "block, 1 substep");
    run_scene(m, 50, 0.1, 0.5, names, nn, "block, 50 substeps");
    ds_model_free(m);
  }
  {
    dsModel* m = chain_model(6, 0, 5e-3);
    static const char* const names[] = {"initial_position", "initial_velocity", "particle.mass", "spring.ke",
                                        "spring.kd",        "spring.rest",      "contact.ke",    "contact.kf",
                                        "contact.mu",       "contact.skin",     "gravity"};
    const int nn = (int)(sizeof names / sizeof names[0]);
    int first, ntouch;
    contact_span(m, 50, &first, &ntouch);
    fprintf(stderr, "chain: substeps from %d touch the ground (%d of 50)\n", first, ntouch);
    CHECK(first > 3 && ntouch > 10); /* out of contact first, then in */
    run_scene(m, 1, 0.1, 0.05, names, nn, "falling chain, 1 substep (out of contact)");
    run_scene(m, 50, 0.1, 0.05, names, nn, "falling chain, 50 substeps (out of, then in contact)");
    ds_model_free(m);
  }
  {
    dsModel* m = chain_model(6, 1, 5e-3);
    static const char* const names[] = {"initial_position", "initial_velocity", "particle.mass", "spring.ke",
                                        "spring.kd",        "contact.ke",       "contact.kd",    "contact.kf",
                                        "contact.mu",       "contact.skin",     "gravity"};
    const int nn = (int)(sizeof names / sizeof names[0]);
    int first, ntouch;
    contact_span(m, 10, &first, &ntouch);
    CHECK(first == 0 && ntouch == 10);
    /* 10 substeps: v_y -> 0- like exp(-t ke / kd), which a longer rollout
     * brings within an FD step of the kink */
    run_scene(m, 1, 0.1, 0.005, names, nn, "lying chain, 1 substep (in contact)");
    run_scene(m, 10, 0.1, 0.005, names, nn, "lying chain, 10 substeps (in contact)");
    ds_model_free(m);
  }
  {
    /* lift and drag: their Jacobian in the Newton matrix and the adjoint,
     * their coefficients' gradients */
    dsModel* m = cloth_model(1e-2, 1, 0);
    CHECK(m->aero == 1 && m->integrator == DS_INTEGRATOR_IMPLICIT);
    static const char* const names[] = {"initial_position", "initial_velocity", "particle.mass", "tri.k_mu",
                                        "tri.k_damp",       "bend.ke",          "spring.ke",     "aero.lift",
                                        "aero.drag",        "gravity"};
    const int nn = (int)(sizeof names / sizeof names[0]);
    const double margin = aero_margin(m, 30);
    fprintf(stderr, "cloth with lift/drag: smallest |cos(n, vb)| over 30 substeps %.3g\n", margin);
    CHECK(margin > 0.1);
    g_hrel = 1e-4;
    run_scene(m, 1, 0.2, 0.05, names, nn, "cloth with lift/drag, 1 substep");
    run_scene(m, 30, 0.2, 0.05, names, nn, "cloth with lift/drag, 30 substeps");
    g_hrel = 1e-5;
    ds_model_free(m);
  }
  {
    dsModel* m = cloth_model(1e-2, 1, 1);
    static const char* const names[] = {"initial_position", "initial_velocity", "particle.mass", "tri.k_mu",
                                        "bend.ke",          "aero.lift",        "aero.drag",     "contact.ke",
                                        "contact.kf",       "contact.mu",       "gravity"};
    const int nn = (int)(sizeof names / sizeof names[0]);
    int first, ntouch;
    const double margin = aero_margin(m, 30);
    fprintf(stderr, "cloth with lift/drag on the ground: smallest |cos(n, vb)| %.3g\n", margin);
    CHECK(margin > 0.1);
    contact_span(m, 30, &first, &ntouch);
    fprintf(stderr, "cloth with lift/drag on the ground: substeps from %d touch (%d of 30)\n", first, ntouch);
    CHECK(first >= 0 && ntouch > 10);
    run_scene(m, 30, 0.2, 0.05, names, nn, "cloth with lift/drag, 30 substeps (falling into contact)");
    ds_model_free(m);
  }
}

/* ---- bitwise: checkpoints, threads ------------------------------------------------ */
static uint64_t grad_hash(const etScene* s) {
  const dsModel* m = s->m;
  uint64_t h = 0;
  for (int i = 0; i < ds_param_count(); i++) {
    dsReal* g;
    int n;
    if (ds_grad_param(s->g, ds_param_name(i), &g, &n) == 0 && n > 0) h = et_hash(h, g, (size_t)n * sizeof(dsReal));
  }
  h = et_hash(h, s->gact, (size_t)s->T * m->nact * sizeof(dsReal));
  return et_hash(h, s->gfext, (size_t)s->T * 3 * m->nparticle * sizeof(dsReal));
}

/* A rollout and its backward (et_scene_init's schedules, seeded): the hash
 * of the gradients, *state the final state's; the data's kept Jacobians
 * set to mib MiB (nslot >= 0: that many slots instead); *reused: the
 * adjoints that took their matrix from a slot, *bytes: ds_data_bytes */
static uint64_t run_hash_kept(dsModel* m, int T, int ckpt, int mib, int nslot, uint64_t* state, long* reused,
                              size_t* bytes) {
  etScene s;
  et_rng = 12345;
  et_scene_init(&s, m, T, ckpt, 0.1, 0.5);
  ds_data_free(s.d);
  dsDataDef dd = ds_default_data_def();
  dd.max_substeps = T;
  dd.checkpoint_every = ckpt;
  dd.jacobian_mib = mib;
  CHECK_INT_EQ(ds_data_create(m, &dd, &s.d), 0);
  if (nslot >= 0) CHECK_INT_EQ(ds__implicit_keep(m, ((dsDataPriv*)s.d->err_)->imp, nslot), 0);
  *bytes = ds_data_bytes(m, s.d);
  CHECK(*bytes <= ds_data_bytes_needed(m, &dd));
  et_rollout(&s);
  *state = et_hash(et_hash(0, s.d->x, 3 * (size_t)m->nparticle * sizeof(dsReal)), s.d->v,
                   3 * (size_t)m->nparticle * sizeof(dsReal));
  et_backward(&s);
  const uint64_t h = grad_hash(&s);
  *reused = ds__implicit_reused(((dsDataPriv*)s.d->err_)->imp);
  et_scene_free(&s);
  return h;
}

static uint64_t run_hash(dsModel* m, int T, int ckpt, uint64_t* state) {
  long reused;
  size_t bytes;
  return run_hash_kept(m, T, ckpt, ds_default_data_def().jacobian_mib, -1, state, &reused, &bytes);
}

/* Kept Jacobians (engine/implicit.h): the adjoint takes the matrix from
 * the forward's slot only where state and activations match bit for bit,
 * so every setting gives the same gradient bits: a slot for every
 * substep, none, a ring of 5 slots (later substeps overwrite the ones the
 * backward needs), a checkpointed tape (the segments' replays refill the
 * slots); the activations change every 25 substeps (the adjoint of
 * substep 24 cannot use substep 25's matrix). A model with ground contact
 * keeps none (its Newton starts from the first iterate's matrix). */
static void kept_jacobian_checks(void) {
  dsModel* m = cloth_model(1e-2, 1, 0);
  CHECK(m->nact > 0 && !m->ground);
  const int T = 60;
  const int ck[4] = {1, 1, 1, 7}, mib[4] = {0, 64, 64, 64}, ns[4] = {-1, -1, 5, -1};
  uint64_t st[4], gr[4];
  long re[4];
  size_t by[4];
  for (int k = 0; k < 4; k++) gr[k] = run_hash_kept(m, T, ck[k], mib[k], ns[k], &st[k], &re[k], &by[k]);
  fprintf(stderr, "kept Jacobians: adjoints from a slot %ld (all), %ld (5 slots), %ld (checkpoint 7) of %d; %zu bytes "
          "more for all\n", re[1], re[2], re[3], T, by[1] - by[0]);
  for (int k = 1; k < 4; k++) {
    CHECK(st[k] == st[0]);
    CHECK(gr[k] == gr[0]);
  }
  CHECK(re[0] == 0);
  /* all but the last substep and the two where the activations change (24, 49) */
  CHECK(re[1] == T - 3);
  CHECK(re[2] > 0 && re[2] < re[1]);
  CHECK(re[3] == re[1]);
  CHECK(by[1] > by[2] && by[2] > by[0]);
  /* a parameter changed between two episodes on one data (as sysid does):
   * the second episode's gradient is a fresh data's, bit for bit (nothing
   * kept in the first is used) */
  {
    etScene s;
    et_rng = 12345;
    et_scene_init(&s, m, 30, 1, 0.1, 0.5);
    et_rollout(&s);
    et_backward(&s);
    dsReal km[64];
    for (int e = 0; e < m->ntri; e++) km[e] = 1.5 * m->tri_k_mu[e];
    CHECK_INT_EQ(ds_model_set_param(m, "tri.k_mu", km, m->ntri), 0);
    et_rollout(&s);
    et_backward(&s);
    const uint64_t again = grad_hash(&s);
    et_scene_free(&s);
    long r;
    size_t b;
    uint64_t s0;
    CHECK(run_hash_kept(m, 30, 1, 64, -1, &s0, &r, &b) == again);
  }
  ds_model_free(m);
  /* with ground contact: none kept, the same bits */
  m = block_model(2, 1, 1, 5e-3);
  gr[0] = run_hash_kept(m, 30, 1, 0, -1, &st[0], &re[0], &by[0]);
  gr[1] = run_hash_kept(m, 30, 1, 64, -1, &st[1], &re[1], &by[1]);
  CHECK(gr[0] == gr[1] && st[0] == st[1] && re[1] == 0 && by[0] == by[1]);
  ds_model_free(m);
}

static void bitwise_checks(void) {
  dsModel* m = block_model(2, 1, 1, 5e-3);
  uint64_t s1, s7, g1 = run_hash(m, 40, 1, &s1), g7 = run_hash(m, 40, 7, &s7);
  CHECK(s1 == s7);
  CHECK(g1 == g7); /* checkpointed backward (segments recomputed by the implicit step) == full tape */
  ds_model_free(m);
  /* large enough for every stage to run on 2 threads (> 1024 slots + particles for the forces and
   * the adjoint's element stage, >= 256 particles for the block-sparse products and solvers) */
  m = block_model(10, 3, 6, 5e-3);
  CHECK(m->nslot + m->nparticle > 1024 && m->nparticle >= 256);
  ds_set_adaptive_threads(0);
  uint64_t st[2], gt[2];
  for (int k = 0; k < 2; k++) {
    ds_set_num_threads(k + 1);
    gt[k] = run_hash(m, 6, 1, &st[k]);
  }
  ds_set_num_threads(1);
  CHECK(st[0] == st[1]);
  CHECK(gt[0] == gt[1]);
  ds_model_free(m);
}

/* The block products (engine/sparse.c): the vector kernel over the
 * column-major copy the assembly writes (valc) gives the scalar loop's
 * bits, A x and A^T x, on an assembled exact Jacobian (tets sliding in
 * contact: not symmetric, so the two products differ). Deterministic
 * inputs: the random stream stays the gradient checks'. */
static void product_checks(void) {
  dsModel* m = block_model(3, 2, 2, 5e-3);
  dsBlockSparse* A;
  CHECK_INT_EQ(ds__bsr_create(m, &A), 0);
  const size_t n3 = 3 * (size_t)m->nparticle;
  dsReal *x = malloc(sizeof(dsReal) * n3), *v = malloc(sizeof(dsReal) * n3), *u = malloc(sizeof(dsReal) * n3);
  dsReal *y[2][2];
  for (size_t k = 0; k < n3; k++) {
    x[k] = m->x0[k] + 0.003 * sin(0.7 * (double)k);
    v[k] = 0.2 * cos(1.3 * (double)k);
    u[k] = sin((double)k + 1);
  }
  ds__bsr_assemble(A, m, x, v, NULL, 5e-3, 0);
  CHECK(A->valc_ok == 1);
  for (int t = 0; t < 2; t++)
    for (int vec = 0; vec < 2; vec++) {
      y[t][vec] = malloc(sizeof(dsReal) * n3);
      A->valc_ok = vec;
      if (t) ds__bsr_matvec_t(A, u, y[t][vec]);
      else ds__bsr_matvec(A, u, y[t][vec]);
    }
  for (int t = 0; t < 2; t++) CHECK(memcmp(y[t][0], y[t][1], sizeof(dsReal) * n3) == 0);
  CHECK(memcmp(y[0][1], y[1][1], sizeof(dsReal) * n3) != 0);
  for (int t = 0; t < 2; t++)
    for (int vec = 0; vec < 2; vec++) free(y[t][vec]);
  free(x);
  free(v);
  free(u);
  ds__bsr_free(A);
  ds_model_free(m);
}

/* a cloth with lift and drag (their Jacobian in the matrix, their element
 * adjoints' shared scalars summed in element order), 17 x 17 particles:
 * the same bits on 1 and 2 threads, and checkpointed == full tape. Run
 * last: its scenes draw from the random stream the gradient checks'
 * picks come from. */
static void aero_bitwise_checks(void) {
  uint64_t st[2], gt[2], s3;
  dsBuilder* b;
  dsModel* m;
  if (ds_builder_create(&b)) et_fail("builder", DS_ERR_NOMEM, "");
  dsTriMaterial tm = {60, 300, 0.5};
  dsBendMaterial bm = {0.05, 0.002};
  dsReal origin[3] = {-0.8, 1.0, 0.0}, v0[3] = {0.2, -0.3, -1.5};
  if (ds_builder_add_cloth_grid(b, 16, 16, 0.1, origin, 0.02, v0, &tm, &bm) < 0) et_fail("cloth grid", -1, "");
  ds_builder_set_aero(b, 10, 5);
  m = finish(b, 1e-2);
  CHECK(m->aero && m->nslot + m->nparticle > 1024 && m->nparticle >= 256);
  for (int k = 0; k < 2; k++) {
    ds_set_num_threads(k + 1);
    gt[k] = run_hash(m, 4, 1, &st[k]);
  }
  ds_set_num_threads(1);
  CHECK(st[0] == st[1]);
  CHECK(gt[0] == gt[1]);
  CHECK(run_hash(m, 4, 3, &s3) == gt[0] && s3 == st[0]);
  ds_model_free(m);
}

/* ---- errors ---------------------------------------------------------------------- */
static void error_checks(void) {
  /* one Newton iteration cannot solve a stiff step in contact */
  dsBuilder* b;
  if (ds_builder_create(&b)) et_fail("builder", DS_ERR_NOMEM, "");
  dsSolverSettings s = ds_default_solver_settings();
  s.newton_tol = -1;
  CHECK_INT_EQ(ds_builder_set_solver(b, &s), DS_ERR_INVALID);
  CHECK_STR_CONTAINS(ds_builder_last_error(b), "newton_tol");
  CHECK_INT_EQ(ds_builder_set_integrator(b, 7), DS_ERR_INVALID);
  ds_builder_free(b);

  dsModel* m = block_model(2, 1, 1, 2e-2);
  m->solver.newton_max_iter = 1;
  dsData* d;
  CHECK_INT_EQ(ds_data_create(m, NULL, &d), 0);
  int rc = 0, t = 0;
  for (; t < 20 && !rc; t++) rc = ds_step(m, d);
  CHECK_INT_EQ(rc, DS_ERR_DIVERGED);
  CHECK_STR_CONTAINS(ds_data_last_error(d), "substep 0");
  CHECK_STR_CONTAINS(ds_data_last_error(d), "Newton did not converge in 1 iterations (relative residual");
  CHECK_STR_CONTAINS(ds_data_last_error(d), "); largest residual at particle ");
  CHECK(strstr(ds_data_last_error(d), "contact.smooth") == NULL); /* its ground has no damping: no hint */
  fprintf(stderr, "non-convergence: %s\n", ds_data_last_error(d));
  CHECK_INT_EQ(ds_step(m, d), DS_ERR_STATE); /* reset first */
  ds_data_free(d);
  /* a residual that is not finite, or whose norm overflows, names the substep and the particle */
  for (int inf = 0; inf < 2; inf++) {
    dsBuilder* b2;
    if (ds_builder_create(&b2)) et_fail("builder", DS_ERR_NOMEM, "");
    /* into the ground at 1e305 m/s: its contact force overflows; at 1e300 m/s the residual's norm does */
    const dsReal x0[3] = {0, 1, 0}, v0[3] = {0, 0, 0}, x1[3] = {1, 1e-3, 0}, v1[3] = {0, inf ? -1e305 : -1e300, 0};
    ds_builder_add_particle(b2, x0, v0, 1);
    ds_builder_add_particle(b2, x1, v1, 1);
    const dsGroundDef gd = {inf ? 1e10 : 1e4, 0, 0, 0, 0.01};
    ds_builder_set_ground(b2, &gd);
    dsModel* m2 = finish(b2, 0.01);
    dsData* d2;
    CHECK_INT_EQ(ds_data_create(m2, NULL, &d2), 0);
    CHECK_INT_EQ(ds_step(m2, d2), DS_ERR_DIVERGED);
    if (inf) {
      CHECK_STR_CONTAINS(ds_data_last_error(d2), "substep 0: implicit step: the residual is Inf at Newton iteration 0, "
                                                 "first at particle 1 (its force is not finite)");
    } else {
      CHECK_STR_CONTAINS(ds_data_last_error(d2), "substep 0: implicit step: the residual's norm overflows at Newton "
                                                 "iteration 0 (its largest entry ");
      CHECK_STR_CONTAINS(ds_data_last_error(d2), " at particle 1)");
    }
    fprintf(stderr, "not finite: %s\n", ds_data_last_error(d2));
    ds_data_free(d2);
    ds_model_free(m2);
  }
  /* the batched engine (CPU) reports it naming the instance; its CUDA backend refuses the model */
  {
    dsBatchSimDef bd = ds_default_batch_sim_def();
    bd.batch = 2;
    dsBatchSim* bs = NULL;
    char berr[512];
    CHECK_INT_EQ(ds_bsim_create(m, &bd, &bs, berr, sizeof berr), 0);
    CHECK_INT_EQ(ds_bsim_step(bs, 1, NULL), DS_ERR_DIVERGED);
    CHECK_STR_CONTAINS(ds_bsim_last_error(bs), "instance 0: substep 0: implicit step: Newton did not converge in 1");
    ds_bsim_free(bs);
    bs = NULL;
    bd.device = (dsDevice){DS_DEVICE_CUDA, 0};
    CHECK_INT_EQ(ds_bsim_create(m, &bd, &bs, berr, sizeof berr), DS_ERR_UNSUPPORTED);
    CHECK_STR_CONTAINS(berr, "implicit integrator");
    CHECK(bs == NULL);
  }
  ds_model_free(m);

  /* lift/drag have a Jacobian (accepted); rigid bodies have their own solver (refused) */
  if (ds_builder_create(&b)) et_fail("builder", DS_ERR_NOMEM, "");
  dsTriMaterial tm = {60, 300, 0.5};
  dsReal o[3] = {0, 1, 0};
  ds_builder_add_cloth_grid(b, 2, 2, 0.1, o, 0.02, NULL, &tm, NULL);
  ds_builder_set_aero(b, 0.8, 0.4);
  ds_builder_set_integrator(b, DS_INTEGRATOR_IMPLICIT);
  CHECK_INT_EQ(ds_builder_finalize(b, &m), 0);
  ds_model_free(m);
  ds_builder_free(b);
  if (ds_builder_create(&b)) et_fail("builder", DS_ERR_NOMEM, "");
  dsRigidDef rd = ds_default_rigid_def();
  const dsReal hb[3] = {0.1, 0.1, 0.1};
  CHECK(ds_builder_add_rigid_box(b, hb, &rd) >= 0);
  ds_builder_set_integrator(b, DS_INTEGRATOR_IMPLICIT);
  CHECK_INT_EQ(ds_builder_finalize(b, &m), DS_ERR_UNSUPPORTED);
  CHECK_STR_CONTAINS(ds_builder_last_error(b), "rigid bodies (1) are not supported");
  ds_builder_free(b);
}

/* ---- a stiff beam at 20x the stable step ------------------------------------------ */
#define BEAM_N 8
/* a 2 x 2 x BEAM_N lattice of springs (edges and face diagonals of each
 * cell) along x, clamped at x = 0 (its first four particles fixed), no
 * gravity, no damping, started with a transverse velocity growing along
 * the beam */
static dsModel* beam_model(int integrator, dsReal dt) {
  dsBuilder* b;
  if (ds_builder_create(&b)) et_fail("builder", DS_ERR_NOMEM, "");
  const dsReal c = 0.05, ke = 1e5;
  for (int i = 0; i <= BEAM_N; i++)
    for (int k = 0; k < 4; k++) {
      dsReal x[3] = {c * i, c * (k & 1), c * (k >> 1)}, v[3] = {0, 0.5 * i / BEAM_N, 0.2 * i / BEAM_N};
      ds_builder_add_particle(b, x, v, i == 0 ? 0 : 0.02);
    }
  for (int p = 0; p < 4 * (BEAM_N + 1); p++)
    for (int q = p + 1; q < 4 * (BEAM_N + 1); q++) {
      const int di = q / 4 - p / 4, dy = (q & 1) - (p & 1), dz = ((q >> 1) & 1) - ((p >> 1) & 1);
      const int d2 = di * di + dy * dy + dz * dz;
      if (di <= 1 && d2 >= 1 && d2 <= 2) ds_builder_add_spring(b, p, q, ke, 0, -1);
    }
  ds_builder_set_gravity(b, 0, 0, 0);
  ds_builder_set_dt(b, dt);
  ds_builder_set_integrator(b, integrator);
  dsModel* m;
  int rc = ds_builder_finalize(b, &m);
  if (rc) et_fail("beam", rc, ds_builder_last_error(b));
  ds_builder_free(b);
  return m;
}

static double beam_energy(const dsModel* m, const dsData* d) {
  double e = 0;
  for (int i = 0; i < m->nparticle; i++)
    for (int c = 0; c < 3; c++) e += 0.5 * m->mass[i] * d->v[3 * i + c] * d->v[3 * i + c];
  for (int s = 0; s < m->nspring; s++) {
    const int i = m->spring_idx[2 * s], j = m->spring_idx[2 * s + 1];
    double l2 = 0;
    for (int c = 0; c < 3; c++) l2 += (d->x[3 * i + c] - d->x[3 * j + c]) * (d->x[3 * i + c] - d->x[3 * j + c]);
    const double dl = sqrt(l2) - m->spring_rest[s];
    e += 0.5 * m->spring_ke[s] * dl * dl;
  }
  return e;
}

static char g_beam_err[512]; /* beam_run's last error message */

/* steps n substeps; returns the first error (0: none) and the energy range */
static int beam_run(const dsModel* m, int n, double* emin, double* emax, double* elast) {
  dsData* d;
  CHECK_INT_EQ(ds_data_create(m, NULL, &d), 0);
  int rc = 0;
  *emin = *emax = beam_energy(m, d);
  for (int t = 0; t < n && !rc; t++) {
    rc = ds_step(m, d);
    if (rc) break;
    const double e = beam_energy(m, d);
    *emin = fmin(*emin, e);
    *emax = fmax(*emax, e);
    *elast = e;
  }
  if (rc) fprintf(stderr, "beam: %s\n", ds_data_last_error(d));
  snprintf(g_beam_err, sizeof g_beam_err, "%s", rc ? ds_data_last_error(d) : "");
  ds_data_free(d);
  return rc;
}

static void beam_checks(void) {
  /* the stable step of the semi-implicit (symplectic) Euler is 2 / omega_max;
   * dt0 = 2e-4 s runs 0.2 s with its energy within a few percent */
  const dsReal dt0 = 2e-4, T = 0.2;
  dsModel* m = beam_model(DS_INTEGRATOR_SEMI_IMPLICIT, dt0);
  double emin, emax, elast, e0;
  CHECK_INT_EQ(beam_run(m, (int)(T / dt0 + 0.5), &emin, &emax, &elast), 0);
  dsData* d;
  ds_data_create(m, NULL, &d);
  e0 = beam_energy(m, d);
  ds_data_free(d);
  fprintf(stderr, "beam, semi-implicit dt %g: energy %.4g .. %.4g (start %.4g)\n", (double)dt0, emin, emax, e0);
  CHECK(emin > 0.9 * e0 && emax < 1.1 * e0);
  ds_model_free(m);
  /* 20x: semi-implicit blows up and says so */
  m = beam_model(DS_INTEGRATOR_SEMI_IMPLICIT, 20 * dt0);
  CHECK_INT_EQ(beam_run(m, 4000, &emin, &emax, &elast), DS_ERR_DIVERGED); /* within 4000 substeps */
  /* ... naming the substep, the particle and the cause, with the way out */
  CHECK_STR_CONTAINS(g_beam_err, "substep 55: particle 0 position is NaN");
  CHECK_STR_CONTAINS(g_beam_err, "semi-implicit Euler above its stable step, here dt 0.004 s");
  CHECK_STR_CONTAINS(g_beam_err, "physics.integrator implicit");
  /* and the energy grew without bound before it overflowed: unstable, not a NaN from a bad input */
  CHECK(emax > 1e6 * e0);
  ds_model_free(m);
  /* 20x: backward Euler stays bounded and dissipates */
  m = beam_model(DS_INTEGRATOR_IMPLICIT, 20 * dt0);
  CHECK_INT_EQ(beam_run(m, (int)(T / (20 * dt0) + 0.5), &emin, &emax, &elast), 0);
  fprintf(stderr, "beam, implicit dt %g: energy %.4g .. %.4g, last %.4g (start %.4g)\n", (double)(20 * dt0), emin,
          emax, elast, e0);
  CHECK(emax <= e0 * (1 + 1e-9)); /* never gains energy */
  CHECK(elast < 0.5 * e0);        /* and loses most of it */
  ds_model_free(m);
}

/* ---- the contact's smooth damping switch (env.contact.smooth) ------------------------ */
/* f (3) of the smoothed contact at (x, v); q = [ke kd kf mu skin] */
static void sc_force(const double* x, const double* v, const double* q, double w, double* f) {
  const dsContactParam p = {q[0], q[1], q[2], q[3], q[4]};
  ds__contact_sfwd(x, v, &p, w, f);
}

/* Central differences (double) of ds__contact_sfwd against ds__contact_sbwd
 * (adjoints of x, v, ke, kd, kf, mu, skin for a random G) and against
 * ds__contact_sjac (-df/dx, -df/dv), inside the switch's ramp
 * (-w < c < 0), approaching, sticking and sliding; *worst: the largest
 * error / tolerance. scale != 1 multiplies the adjoint of y (a wrong
 * adjoint the comparison must reject). */
static int sc_fd(double w, double scale, double* worst) {
  const double eps = 1e-7, tol = 1e-6;
  int bad = 0;
  *worst = 0;
  for (int cse = 0; cse < 4; cse++) {
    /* c = -0.3 w, -0.7 w (ramp), -1.5 w (plateau); sliding (kf large) or sticking */
    const double cf[4] = {-0.3, -0.7, -1.5, -0.5};
    double q[5] = {1e4, 300, cse == 3 ? 1e3 : 5, 0.5, 0.01};
    double x[3] = {0.2, q[4] + cf[cse] * w, -0.1}, v[3] = {0.4, -0.8, 0.3};
    double G[3] = {0.3, -0.7, 0.5}, f[3];
    double ax[3] = {0, 0, 0}, av[3] = {0, 0, 0};
    dsContactParam P = {q[0], q[1], q[2], q[3], q[4]}, ap = {0, 0, 0, 0, 0};
    ds__contact_sbwd(x, v, &P, w, G, ax, av, &ap);
    ax[1] *= scale;
    double Kx[9], Kv[9];
    ds__contact_sjac(x, v, &P, w, Kx, Kv);
    const double an[5] = {ap.ke, ap.kd, ap.kf, ap.mu, ap.skin};
    /* 13 inputs: x (3), v (3), q (5) */
    for (int k = 0; k < 11; k++) {
      double xp[3], vp[3], qp[5], xm[3], vm[3], qm[5], fp[3], fm[3];
      memcpy(xp, x, sizeof x), memcpy(vp, v, sizeof v), memcpy(qp, q, sizeof q);
      memcpy(xm, x, sizeof x), memcpy(vm, v, sizeof v), memcpy(qm, q, sizeof q);
      double* pp = k < 3 ? xp + k : k < 6 ? vp + k - 3 : qp + k - 6;
      double* pm = k < 3 ? xm + k : k < 6 ? vm + k - 3 : qm + k - 6;
      const double hst = eps * (fabs(*pp) > 1 ? fabs(*pp) : 1);
      *pp += hst, *pm -= hst;
      sc_force(xp, vp, qp, w, fp);
      sc_force(xm, vm, qm, w, fm);
      double dl = 0, an_k = k < 3 ? ax[k] : k < 6 ? av[k - 3] : an[k - 6];
      for (int c = 0; c < 3; c++) dl += G[c] * (fp[c] - fm[c]) / (2 * hst);
      double e = fabs(dl - an_k) / (tol * (1 + fabs(dl)));
      if (k < 6) /* the Jacobian's column k: -df/dx_k or -df/dv_k */
        for (int c = 0; c < 3; c++) {
          const double fd = -(fp[c] - fm[c]) / (2 * hst), jk = k < 3 ? Kx[3 * c + k] : Kv[3 * c + k - 3];
          const double ej = fabs(fd - jk) / (tol * (1 + fabs(fd)));
          if (ej > e) e = ej;
        }
      if (e > *worst) *worst = e;
      if (e > 1) bad++;
    }
    (void)f;
  }
  return bad;
}

/* One falling particle whose backward-Euler step lands where the approach
 * damping switches on: without the switch the residual jumps across its
 * root there (by h kd |v'_y|, several times the step's momentum change)
 * and Newton cannot converge; with a switch of width 2 cm it does. */
static int sc_drop(double w, char* err, size_t errlen) {
  dsBuilder* b;
  if (ds_builder_create(&b)) et_fail("builder", DS_ERR_NOMEM, "");
  const dsReal x[3] = {0, 0.015, 0}, v[3] = {0, -1, 0};
  ds_builder_add_particle(b, x, v, 1);
  const dsGroundDef gd = {1e4, 1000, 0, 0, 0.01};
  ds_builder_set_ground(b, &gd);
  CHECK_INT_EQ(ds_builder_set_contact_smooth(b, w), 0);
  CHECK_INT_EQ(ds_builder_set_contact_smooth(b, -1), DS_ERR_INVALID);
  CHECK_STR_CONTAINS(ds_builder_last_error(b), "contact smooth -1: expected a finite width >= 0");
  dsModel* m = finish(b, 0.01);
  CHECK_CLOSE(m->contact_smooth, w, 0, 0);
  dsData* d;
  CHECK_INT_EQ(ds_data_create(m, NULL, &d), 0);
  int rc = 0;
  for (int t = 0; t < 20 && !rc; t++) rc = ds_step(m, d);
  snprintf(err, errlen, "%s", rc ? ds_data_last_error(d) : "");
  if (!rc) CHECK(d->x[1] > 0 && d->x[1] < 0.01); /* came to rest inside the skin */
  ds_data_free(d);
  ds_model_free(m);
  return rc;
}

static void smooth_contact_checks(void) {
  double worst;
  CHECK_INT_EQ(sc_fd(0.02, 1, &worst), 0);
  fprintf(stderr, "smooth contact: FD of force, adjoint and Jacobian, worst error / tolerance %.3g\n", worst);
  CHECK(sc_fd(0.02, 1.01, &worst) > 0); /* a wrong adjoint of y is rejected */
  /* w = 0 is today's model, bit for bit */
  const dsContactParam P = {1e4, 300, 5, 0.5, 0.01};
  const dsReal x[3] = {0.2, 0.004, -0.1}, v[3] = {0.4, -0.8, 0.3}, G[3] = {0.3, -0.7, 0.5};
  dsReal f0[3], f1[3], Kx0[9], Kv0[9], Kx1[9], Kv1[9];
  dsReal ax0[3] = {0, 0, 0}, av0[3] = {0, 0, 0}, ax1[3] = {0, 0, 0}, av1[3] = {0, 0, 0};
  dsContactParam a0 = {0, 0, 0, 0, 0}, a1 = {0, 0, 0, 0, 0};
  ds__contact_fwd(x, v, &P, f0);
  ds__contact_sfwd(x, v, &P, 0, f1);
  ds__contact_bwd(x, v, &P, G, ax0, av0, &a0);
  ds__contact_sbwd(x, v, &P, 0, G, ax1, av1, &a1);
  ds__contact_jac(x, v, &P, Kx0, Kv0);
  ds__contact_sjac(x, v, &P, 0, Kx1, Kv1);
  CHECK(memcmp(f0, f1, sizeof f0) == 0 && memcmp(ax0, ax1, sizeof ax0) == 0 && memcmp(av0, av1, sizeof av0) == 0);
  CHECK(memcmp(&a0, &a1, sizeof a0) == 0 && memcmp(Kx0, Kx1, sizeof Kx0) == 0 && memcmp(Kv0, Kv1, sizeof Kv0) == 0);
  /* the drop: no switch stalls Newton, the switch lets it through */
  char err[512];
  CHECK_INT_EQ(sc_drop(0, err, sizeof err), DS_ERR_DIVERGED);
  CHECK_STR_CONTAINS(err, "Newton did not converge");
  /* the message names the particle and the way out */
  CHECK_STR_CONTAINS(err, "largest residual at particle 0 (|r| ");
  CHECK_STR_CONTAINS(err, "m above the contact skin): contact.kd > 0 with contact.smooth 0");
  CHECK_STR_CONTAINS(err, "set contact.smooth > 0 (e.g. 0.01, the skin) or contact.kd 0");
  fprintf(stderr, "smooth contact: without the switch: %s\n", err);
  CHECK_INT_EQ(sc_drop(0.02, err, sizeof err), 0);
  /* the config key reaches the model */
  char e2[512] = "";
  dsEnvDef def = ds_default_env_def("control-fem");
  CHECK_CLOSE(def.contact_smooth, 0, 0, 0);
  CHECK_INT_EQ(ds_env_def_set(&def, "contact.smooth", "0.005", e2, sizeof e2), 0);
  CHECK(ds_env_def_set(&def, "contact.smooth", "-1", e2, sizeof e2) != 0);
  def.substeps = 8;
  dsEnv* env;
  if (ds_env_create(&def, &env, e2, sizeof e2) == 0) {
    CHECK_CLOSE(ds_env_model(env)->contact_smooth, 0.005, 0, 0);
    ds_env_destroy(env);
  } else {
    CHECK(0);
  }
}

/* ---- config keys: env.physics.integrator and the solver settings ------------------ */
static void config_checks(void) {
  char err[512] = "";
  dsEnvDef def = ds_default_env_def("control-fem");
  CHECK_INT_EQ(def.integrator, DS_INTEGRATOR_SEMI_IMPLICIT);
  CHECK_INT_EQ(ds_env_def_set(&def, "physics.integrator", "implicit", err, sizeof err), 0);
  CHECK_INT_EQ(ds_env_def_set(&def, "physics.newton_tol", "1e-9", err, sizeof err), 0);
  CHECK_INT_EQ(ds_env_def_set(&def, "physics.newton_max_iter", "33", err, sizeof err), 0);
  CHECK_INT_EQ(ds_env_def_set(&def, "physics.cg_tol", "1e-4", err, sizeof err), 0);
  CHECK_INT_EQ(ds_env_def_set(&def, "physics.cg_max_iter", "77", err, sizeof err), 0);
  CHECK_INT_EQ(ds_env_def_set(&def, "physics.adjoint_tol", "1e-11", err, sizeof err), 0);
  CHECK(ds_env_def_set(&def, "physics.integrator", "explicit", err, sizeof err) != 0);
  CHECK_STR_CONTAINS(err, "semi_implicit");
  CHECK_INT_EQ(def.integrator, DS_INTEGRATOR_IMPLICIT);
  def.substeps = 64;
  dsEnv* env;
  int rc = ds_env_create(&def, &env, err, sizeof err);
  CHECK_INT_EQ(rc, 0);
  if (rc) {
    fprintf(stderr, "env: %s\n", err);
    return;
  }
  const dsModel* m = ds_env_model(env);
  CHECK_INT_EQ(m->integrator, DS_INTEGRATOR_IMPLICIT);
  CHECK_CLOSE(m->solver.newton_tol, 1e-9, 0, 0);
  CHECK_INT_EQ(m->solver.newton_max_iter, 33);
  CHECK_CLOSE(m->solver.cg_tol, 1e-4, 0, 0);
  CHECK_INT_EQ(m->solver.cg_max_iter, 77);
  CHECK_CLOSE(m->solver.adjoint_tol, 1e-11, 0, 0);
  ds_env_destroy(env);
  /* the batched engine runs it on the CPU (tests/test_batch_implicit, tests/test_env_device); its
     CUDA backend refuses it, whether or not this build has CUDA */
  def.batch_engine = 1;
  CHECK_INT_EQ(ds_env_create(&def, &env, err, sizeof err), 0);
  ds_env_destroy(env);
  def.device = (dsDevice){DS_DEVICE_CUDA, 0};
  CHECK_INT_EQ(ds_env_create(&def, &env, err, sizeof err), DS_ERR_UNSUPPORTED);
  CHECK_STR_CONTAINS(err, "implicit integrator");
  CHECK_STR_CONTAINS(err, "use device cpu");
}

/* ---- the walker at 10x its bundled step: a planar model's adjoint -------------------
 * The walker lattice lies in z = 0 and no force has a z component there,
 * so its motion stays in the plane and the in-plane adjoint is exactly
 * independent of the z one (J has no xy-z entries). Out of the plane the
 * membrane buckles under compression: dL/dz grows ~e^{7 t} backward in
 * time and passes 1e12 over a 5 s episode (docs/integrators.md). Here a
 * loss weighting the z components by 1e10 stands in for that grown
 * adjoint: the activations' gradient must not change from the loss without
 * them, and must match central differences (which the z terms do not
 * affect: z stays 0). One adjoint solve stopped at adjoint_tol |a| left
 * ~1e-10 |a_z| of error in the in-plane lambda and failed both. */
static dsModel* walker_model(dsReal dt) {
  dsMesh mesh;
  CHECK_INT_EQ(ds_mesh_walker(&mesh), 0);
  dsBuilder* b;
  if (ds_builder_create(&b)) et_fail("builder", DS_ERR_NOMEM, "");
  const dsTriMaterial mat = {1e4, 1e4, 100}; /* configs/walker.json's */
  const dsReal v0[3] = {0.3, 0, 0};
  int rc = 0;
  for (int i = 0; i < mesh.nvert && rc >= 0; i++) rc = ds_builder_add_particle(b, mesh.x + 3 * i, v0, 1);
  for (int t = 0; t < mesh.ntri && rc >= 0; t++)
    rc = ds_builder_add_tri(b, mesh.tri[3 * t], mesh.tri[3 * t + 1], mesh.tri[3 * t + 2], &mat);
  ds_mesh_free(&mesh);
  if (rc < 0) et_fail("walker", rc, ds_builder_last_error(b));
  const dsGroundDef gd = {1e4, 1000, 1000, 0.5, 0.01};
  ds_builder_set_ground(b, &gd);
  CHECK_INT_EQ(ds_builder_set_contact_smooth(b, 0.01), 0);
  ds_builder_set_dt(b, dt);
  dsSolverSettings st = tight();
  st.adjoint_tol = ds_default_solver_settings().adjoint_tol; /* the shipped setting */
  CHECK_INT_EQ(ds_builder_set_integrator(b, DS_INTEGRATOR_IMPLICIT), 0);
  CHECK_INT_EQ(ds_builder_set_solver(b, &st), 0);
  dsModel* m;
  if ((rc = ds_builder_finalize(b, &m))) et_fail("finalize", rc, ds_builder_last_error(b));
  ds_builder_free(b);
  return m;
}

static void walker_checks(void) {
  dsModel* m = walker_model(10 * 0.0005208333333333333);
  const int T = 40; /* 0.21 s: falls 5.7 cm onto the ground in the first ~21 substeps */
  etScene s;
  et_scene_init(&s, m, T, 1, 0.2, 0);
  const size_t np = (size_t)m->nparticle, na = (size_t)m->nact;
  for (size_t i = 0; i < np; i++) s.cx[3 * i + 2] = s.cv[3 * i + 2] = s.cmid[3 * i + 2] = 0;
  et_rollout(&s);
  double zmax = 0, ymin = 1;
  for (size_t i = 0; i < np; i++) {
    zmax = fmax(zmax, fabs(s.d->x[3 * i + 2]) + fabs(s.d->v[3 * i + 2]));
    ymin = fmin(ymin, s.d->x[3 * i + 1]);
  }
  CHECK(zmax == 0);                   /* planar, exactly */
  CHECK(ymin < m->contact_skin[0]);   /* in contact at the end */
  et_backward(&s);
  dsReal* g0 = (dsReal*)malloc(sizeof(dsReal) * (size_t)T * na);
  memcpy(g0, s.gact, sizeof(dsReal) * (size_t)T * na);
  for (size_t i = 0; i < np; i++) {
    s.cx[3 * i + 2] = 1e10 * et_unif(-1, 1);
    s.cv[3 * i + 2] = 1e10 * et_unif(-1, 1);
    s.cmid[3 * i + 2] = 1e10 * et_unif(-1, 1);
  }
  et_rollout(&s);
  et_backward(&s);
  double gmax = 0, dmax = 0;
  for (size_t k = 0; k < (size_t)T * na; k++) {
    gmax = fmax(gmax, fabs(g0[k]));
    dmax = fmax(dmax, fabs(s.gact[k] - g0[k]));
  }
  fprintf(stderr, "walker 10x: activation gradient max %.3g, changed by %.3g by z weights of 1e10\n", gmax, dmax);
  CHECK(gmax > 0 && dmax <= 1e-6 * gmax);
  /* a step 3x the default: at 1e-5 the differences of this in-contact
   * rollout carry Newton's noise (4e-9 on an entry of 2.4e-4, 1.25x the
   * tolerance; at 3e-6 several times that), at 3e-5 and 1e-4 they agree */
  g_hrel = 3e-5;
  check_control(&s, 0, 1e-5, "walker 10x, z-weighted loss");
  g_hrel = 1e-5;
  free(g0);
  et_scene_free(&s);
  ds_model_free(m);
}

/* ---- the CHOLMOD preconditioner ------------------------------------------------ */
static void cholmod_checks(void) {
  dsBuilder* b;
  if (ds_builder_create(&b)) et_fail("builder", DS_ERR_NOMEM, "");
  dsSolverSettings ss = ds_default_solver_settings();
  ss.precond = 5;
  CHECK_INT_EQ(ds_builder_set_solver(b, &ss), DS_ERR_INVALID);
  CHECK_STR_CONTAINS(ds_builder_last_error(b), "precond");
  ss.precond = DS_PRECOND_CHOLMOD;
  const int want = ds__chol_available() ? 0 : DS_ERR_UNSUPPORTED;
  CHECK_INT_EQ(ds_builder_set_solver(b, &ss), want);
  ds_builder_free(b);
  if (!ds__chol_available()) {
    fprintf(stderr, "CHOLMOD: not in this build, its checks skipped\n");
    return;
  }
  /* the factor of S = (J + J^T) / 2 at a state in contact, with friction (J not symmetric) */
  dsModel* m = block_model(3, 2, 2, 1e-2);
  const int n3 = 3 * m->nparticle;
  dsBlockSparse* A;
  dsChol* ch;
  CHECK_INT_EQ(ds__bsr_create(m, &A), 0);
  CHECK_INT_EQ(ds__chol_create(A, &ch), 0);
  dsReal* buf = (dsReal*)calloc(5 * (size_t)n3, sizeof(dsReal));
  dsReal *x = buf, *bb = x + n3, *y1 = bb + n3, *y2 = y1 + n3, *v = y2 + n3;
  for (int k = 0; k < n3; k++) v[k] = m->v0[k] + 0.3 * et_unif(-1, 1);
  ds__bsr_assemble(A, m, m->x0, v, NULL, m->dt, 0);
  double asym = 0;
  for (int bl = 0; bl < A->nnzb; bl++)
    for (int r = 0; r < 3; r++)
      for (int c = 0; c < 3; c++) asym = fmax(asym, fabs(A->val[9 * (size_t)bl + 3 * r + c] - A->val[9 * (size_t)A->tr[bl] + 3 * c + r]));
  CHECK(asym > 0); /* friction and x-dependent damping: the test needs an unsymmetric J */
  CHECK_INT_EQ(ds__chol_factor(ch, A), 0);
  for (int k = 0; k < n3; k++) bb[k] = et_unif(-1, 1);
  ds__chol_solve(ch, bb, x);
  ds__bsr_matvec(A, x, y1);
  ds__bsr_matvec_t(A, x, y2);
  double rn = 0, bn = 0;
  for (int k = 0; k < n3; k++) {
    const double e = 0.5 * (y1[k] + y2[k]) - bb[k];
    rn += e * e;
    bn += bb[k] * bb[k];
  }
  CHECK(sqrt(rn) <= 1e-12 * sqrt(bn));
  A->val[0] = NAN; /* a non-finite matrix: no factor */
  CHECK_INT_EQ(ds__chol_factor(ch, A), 1);
  free(buf);
  ds__chol_free(ch);
  ds__bsr_free(A);
  ds_model_free(m);

  /* gradients with either preconditioner agree to the solver tolerances; CHOLMOD keeps the bits
   * across checkpoints and threads */
  m = block_model(2, 1, 1, 5e-3);
  const int T = 40;
  etScene s;
  dsReal* gj = (dsReal*)malloc(sizeof(dsReal) * (size_t)T * m->nact);
  for (int pc = 0; pc < 2; pc++) {
    m->solver.precond = pc ? DS_PRECOND_CHOLMOD : DS_PRECOND_JACOBI;
    et_rng = 12345;
    et_scene_init(&s, m, T, 1, 0.1, 0.5);
    et_rollout(&s);
    et_backward(&s);
    double worst = 0, gmax = 0;
    for (size_t k = 0; k < (size_t)T * m->nact; k++) {
      if (pc) worst = fmax(worst, fabs(s.gact[k] - gj[k]));
      gmax = fmax(gmax, fabs(s.gact[k]));
      if (!pc) gj[k] = s.gact[k];
    }
    if (pc) {
      fprintf(stderr, "CHOLMOD vs block-Jacobi: action gradients differ by %.3g of their largest %.3g\n", worst, gmax);
      CHECK(gmax > 0 && worst <= 1e-8 * gmax);
    }
    et_scene_free(&s);
  }
  free(gj);
  uint64_t s1, s7, g1 = run_hash(m, T, 1, &s1), g7 = run_hash(m, T, 7, &s7);
  CHECK(s1 == s7);
  CHECK(g1 == g7);
  ds_model_free(m);
  m = block_model(10, 3, 6, 5e-3);
  m->solver.precond = DS_PRECOND_CHOLMOD;
  ds_set_adaptive_threads(0);
  uint64_t st[2], gt[2];
  for (int k = 0; k < 2; k++) {
    ds_set_num_threads(k + 1);
    gt[k] = run_hash(m, 6, 1, &st[k]);
  }
  ds_set_num_threads(1);
  CHECK(st[0] == st[1]);
  CHECK(gt[0] == gt[1]);
  ds_model_free(m);
}

int main(void) {
  if (DS_SINGLE) DST_SKIP("implicit-step gradients are checked in double");
  ds_set_num_threads(1);
  error_checks();
  config_checks();
  smooth_contact_checks();
  beam_checks();
  bitwise_checks();
  kept_jacobian_checks();
  cholmod_checks();
  gradient_checks();
  aero_bitwise_checks();
  walker_checks();
  product_checks();
  fprintf(stderr, "worst error / tolerance over all accepted comparisons: %.3g\n", g_worst);
  return DST_RESULT();
}

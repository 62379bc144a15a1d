/* Rigid-body physics against analytic values (figures printed):
 *   - mass properties of closed meshes: a box exactly (also translated and
 *     rotated: com and R I R^T to 1e-12), spheres and cylinders converging
 *     to the analytic solids (nseg 128: relative error < 2e-3), point
 *     masses, a body from an OBJ file (tests/data/cube.obj);
 *   - torque-free flight (no gravity, no ground) of an asymmetric box
 *     spinning near its unstable middle axis: linear momentum exact (1e-12),
 *     angular momentum L = R I R^T w and kinetic energy within 1% over 2 s
 *     at dt = 1e-3, and the drift shrinks ~linearly with dt (ratio > 1.6 for
 *     dt halved);
 *   - a box resting flat on the ground stays at rest (|v| < 1e-6 m/s,
 *     displacement < 1e-6 m over 2 s);
 *   - the explicit friction's stability limit: a box at rest, perturbed,
 *     settles at kf 3 % below 2 / (dt lambda) and chatters 3 % above;
 *   - a box sliding at 3 m/s stops after v^2 / (2 mu g) within 2%;
 *   - a sphere dropped onto its pole bounces to e^2 of its height within
 *     0.012 (e = 1, 0.9, 0.7, 0.5, 0.3, 0.1; the table is printed). */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dsim/engine.h"
#include "dsim/mesh.h"
#include "tests/dstest.h"

#define PI 3.14159265358979323846

static dsModel* finalize(dsBuilder* b) {
  dsModel* m = NULL;
  if (ds_builder_finalize(b, &m)) fprintf(stderr, "finalize: %s\n", ds_builder_last_error(b));
  ds_builder_free(b);
  return m;
}

static double rel(double a, double b) { return fabs(a - b) / fmax(fabs(b), 1e-300); }

static void test_mass_properties(void) {
  /* box via the builder: mass 2, half extents (0.3, 0.2, 0.1) */
  dsBuilder* b;
  ds_builder_create(&b);
  dsRigidDef d = ds_default_rigid_def();
  d.mass = 2;
  const dsReal h[3] = {0.3, 0.2, 0.1};
  CHECK_INT_EQ(ds_builder_add_rigid_box(b, h, &d), 0);
  d.mass = 0;
  d.density = 1000;
  CHECK_INT_EQ(ds_builder_add_rigid_sphere(b, 0.5, 128, &d), 1);
  CHECK_INT_EQ(ds_builder_add_rigid_cylinder(b, 0.3, 0.4, 128, &d), 2);
  dsModel* m = finalize(b);
  CHECK(m != NULL);
  if (!m) return;
  const dsReal* I = m->body_inertia;
  CHECK_CLOSE(m->body_mass[0], 2, 1e-14, 0);
  CHECK_CLOSE(I[0], 2.0 / 3 * (0.04 + 0.01), 1e-12, 0);
  CHECK_CLOSE(I[4], 2.0 / 3 * (0.09 + 0.01), 1e-12, 0);
  CHECK_CLOSE(I[8], 2.0 / 3 * (0.09 + 0.04), 1e-12, 0);
  CHECK(fabs(I[1]) + fabs(I[2]) + fabs(I[5]) < 1e-14);
  for (int k = 0; k < 3; k++) CHECK(fabs(m->body_com[k]) < 1e-14);
  /* sphere r = 0.5, density 1000 */
  const double Ms = 1000 * 4.0 / 3 * PI * 0.125, Is = 0.4 * Ms * 0.25;
  const dsReal* J = I + 9;
  printf("sphere nseg 128: mass %.6g (solid %.6g, rel %.2e), I %.6g (solid %.6g, rel %.2e)\n", m->body_mass[1], Ms,
         rel(m->body_mass[1], Ms), J[0], Is, rel(J[0], Is));
  CHECK(rel(m->body_mass[1], Ms) < 2e-3 && rel(J[0], Is) < 2e-3 && rel(J[4], Is) < 2e-3 && rel(J[8], Is) < 2e-3);
  /* cylinder r = 0.3, half height 0.4 */
  const double Mc = 1000 * PI * 0.09 * 0.8, Iy = 0.5 * Mc * 0.09, Ix = Mc * (3 * 0.09 + 0.64) / 12;
  const dsReal* K = I + 18;
  printf("cylinder nseg 128: mass rel %.2e, Ixx rel %.2e, Iyy rel %.2e\n", rel(m->body_mass[2], Mc), rel(K[0], Ix),
         rel(K[4], Iy));
  CHECK(rel(m->body_mass[2], Mc) < 2e-3 && rel(K[0], Ix) < 2e-3 && rel(K[4], Iy) < 2e-3 && rel(K[8], Ix) < 2e-3);
  ds_model_free(m);

  /* the box mesh translated and rotated: com moves, I -> R I R^T exactly */
  dsMesh box;
  CHECK_INT_EQ(ds_mesh_alloc(&box, 8, 12, 0), 0);
  static const int T[36] = {0, 2, 1, 1, 2, 3, 4, 5, 6, 5, 7, 6, 0, 1, 4, 1, 5, 4,
                            2, 6, 3, 3, 6, 7, 0, 4, 2, 2, 4, 6, 1, 3, 5, 3, 7, 5};
  memcpy(box.tri, T, sizeof T);
  const double ax = 0.3, ay = 0.4, az = 0.5, ang = 0.7; /* rotation about unit(ax, ay, az) */
  const double n = sqrt(ax * ax + ay * ay + az * az), u[3] = {ax / n, ay / n, az / n};
  const double c = cos(ang), s = sin(ang), R[9] = {c + u[0] * u[0] * (1 - c), u[0] * u[1] * (1 - c) - u[2] * s,
                                                   u[0] * u[2] * (1 - c) + u[1] * s, u[1] * u[0] * (1 - c) + u[2] * s,
                                                   c + u[1] * u[1] * (1 - c), u[1] * u[2] * (1 - c) - u[0] * s,
                                                   u[2] * u[0] * (1 - c) - u[1] * s, u[2] * u[1] * (1 - c) + u[0] * s,
                                                   c + u[2] * u[2] * (1 - c)};
  const double off[3] = {1.5, -2, 0.25};
  for (int i = 0; i < 8; i++) {
    double p[3];
    for (int k = 0; k < 3; k++) p[k] = ((i >> k) & 1) ? h[k] : -h[k];
    for (int r = 0; r < 3; r++) box.x[3 * i + r] = R[3 * r] * p[0] + R[3 * r + 1] * p[1] + R[3 * r + 2] * p[2] + off[r];
  }
  double V, com[3], Ib[9];
  CHECK_INT_EQ(ds_mesh_mass_properties(8, box.x, 12, box.tri, &V, com, Ib), 0);
  CHECK_CLOSE(V, 8 * 0.3 * 0.2 * 0.1, 1e-12, 0);
  for (int k = 0; k < 3; k++) CHECK_CLOSE(com[k], off[k], 0, 1e-12);
  const double D[3] = {V / 3 * (0.04 + 0.01), V / 3 * (0.09 + 0.01), V / 3 * (0.09 + 0.04)};
  for (int r = 0; r < 3; r++)
    for (int q = 0; q < 3; q++) {
      double e = 0;
      for (int k = 0; k < 3; k++) e += R[3 * r + k] * D[k] * R[3 * q + k];
      CHECK_CLOSE(Ib[3 * r + q], e, 0, 1e-12 * V);
    }
  /* an inside-out mesh is rejected */
  for (int t = 0; t < 12; t++) {
    int tmp = box.tri[3 * t + 1];
    box.tri[3 * t + 1] = box.tri[3 * t + 2];
    box.tri[3 * t + 2] = tmp;
  }
  CHECK_INT_EQ(ds_mesh_mass_properties(8, box.x, 12, box.tri, &V, com, Ib), DS_ERR_MESH);
  /* point masses: two unit masses at +-1 on x and two on z */
  dsMesh pts;
  CHECK_INT_EQ(ds_mesh_alloc(&pts, 4, 0, 0), 0);
  const dsReal px[12] = {1, 0, 0, -1, 0, 0, 0, 0, 1, 0, 0, -1}, pm[4] = {1, 1, 1, 1};
  memcpy(pts.x, px, sizeof px);
  ds_builder_create(&b);
  d = ds_default_rigid_def();
  CHECK_INT_EQ(ds_builder_add_rigid(b, &pts, pm, &d), 0);
  m = finalize(b);
  CHECK(m && fabs(m->body_mass[0] - 4) < 1e-14 && fabs(m->body_inertia[0] - 2) < 1e-14 &&
        fabs(m->body_inertia[4] - 4) < 1e-14 && fabs(m->body_inertia[8] - 2) < 1e-14);
  ds_model_free(m);
  ds_mesh_free(&pts);
  ds_mesh_free(&box);
  /* from an OBJ file: the unit cube of tests/data, density 500: mass 500 kg,
     centre (0.5, 0.5, 0.5) in its frame, I = m (1 + 1) / 12 on each axis */
  {
    char path[4096], err[256];
    const char* src = getenv("DS_SRCDIR");
    snprintf(path, sizeof path, "%s/tests/data/cube.obj", src ? src : ".");
    dsMesh cube;
    CHECK_INT_EQ(ds_mesh_read_obj(path, &cube, err, sizeof err), 0);
    ds_builder_create(&b);
    d = ds_default_rigid_def();
    d.density = 500;
    CHECK_INT_EQ(ds_builder_add_rigid(b, &cube, NULL, &d), 0);
    m = finalize(b);
    CHECK(m != NULL);
    if (m) {
      CHECK_CLOSE(m->body_mass[0], 500, 1e-13, 0);
      for (int k = 0; k < 3; k++) CHECK_CLOSE(m->body_com[k], 0.5, 1e-13, 0);
      for (int k = 0; k < 9; k++) CHECK_CLOSE(m->body_inertia[k], k % 4 == 0 ? 500.0 / 6 : 0, 1e-12, 1e-12);
      /* the vertices are placed about the body's position: centre of mass at 0 */
      double cc[3] = {0, 0, 0};
      for (int i = 0; i < 8; i++)
        for (int k = 0; k < 3; k++) cc[k] += m->x0[3 * i + k] / 8;
      for (int k = 0; k < 3; k++) CHECK(fabs(cc[k]) < 1e-14);
    }
    ds_model_free(m);
    ds_mesh_free(&cube);
  }
}

/* angular momentum R I R^T w and kinetic energy of body 0 */
static void momentum(const dsModel* m, const dsData* d, double L[3], double* E) {
  const dsReal* s = d->body;
  const double w = s[3], x = s[4], y = s[5], z = s[6];
  const double R[9] = {1 - 2 * (y * y + z * z), 2 * (x * y - w * z),     2 * (x * z + w * y),
                       2 * (x * y + w * z),     1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
                       2 * (x * z - w * y),     2 * (y * z + w * x),     1 - 2 * (x * x + y * y)};
  double wb[3], Iw[3];
  for (int k = 0; k < 3; k++) wb[k] = R[k] * s[10] + R[3 + k] * s[11] + R[6 + k] * s[12];
  for (int k = 0; k < 3; k++)
    Iw[k] = m->body_inertia[3 * k] * wb[0] + m->body_inertia[3 * k + 1] * wb[1] + m->body_inertia[3 * k + 2] * wb[2];
  for (int k = 0; k < 3; k++) L[k] = R[3 * k] * Iw[0] + R[3 * k + 1] * Iw[1] + R[3 * k + 2] * Iw[2];
  *E = 0.5 * (wb[0] * Iw[0] + wb[1] * Iw[1] + wb[2] * Iw[2]) +
       0.5 * m->body_mass[0] * (s[7] * s[7] + s[8] * s[8] + s[9] * s[9]);
}

/* worst relative drift of |L - L0| / |L0| and |E - E0| / E0 over `dur` s */
static void free_flight(double dt, double dur, double* dL, double* dE, double* dP) {
  dsBuilder* b;
  ds_builder_create(&b);
  ds_builder_set_gravity(b, 0, 0, 0);
  ds_builder_set_dt(b, dt);
  dsRigidDef d = ds_default_rigid_def();
  d.mass = 3;
  d.velocity[0] = 1, d.velocity[1] = -2, d.velocity[2] = 0.5;
  d.angular_velocity[0] = 0.1, d.angular_velocity[1] = 4, d.angular_velocity[2] = 0.2; /* near the middle axis */
  const dsReal h[3] = {0.3, 0.2, 0.1};
  ds_builder_add_rigid_box(b, h, &d);
  dsModel* m = finalize(b);
  dsData* dd;
  ds_data_create(m, NULL, &dd);
  double L0[3], E0, L[3], E;
  momentum(m, dd, L0, &E0);
  const double P0[3] = {3 * dd->body[7], 3 * dd->body[8], 3 * dd->body[9]};
  const double nL0 = sqrt(L0[0] * L0[0] + L0[1] * L0[1] + L0[2] * L0[2]);
  *dL = *dE = *dP = 0;
  const int T = (int)(dur / dt + 0.5);
  for (int t = 0; t < T; t++) {
    ds_step(m, dd);
    momentum(m, dd, L, &E);
    double e2 = 0, p2 = 0;
    for (int k = 0; k < 3; k++) {
      e2 += (L[k] - L0[k]) * (L[k] - L0[k]);
      p2 += fabs(3 * dd->body[7 + k] - P0[k]);
    }
    *dL = fmax(*dL, sqrt(e2) / nL0);
    *dE = fmax(*dE, fabs(E - E0) / E0);
    *dP = fmax(*dP, p2);
  }
  ds_data_free(dd);
  ds_model_free(m);
}

static void test_free_flight(void) {
  double dL1, dE1, dP1, dL2, dE2, dP2;
  free_flight(1e-3, 2, &dL1, &dE1, &dP1);
  free_flight(5e-4, 2, &dL2, &dE2, &dP2);
  printf("torque-free box (m 3 kg, I = diag(0.05, 0.10, 0.13) kg m^2, w0 = (0.1, 4, 0.2) rad/s), 2 s:\n"
         "  dt 1e-3: max |L - L0|/|L0| %.3e, max |E - E0|/E0 %.3e, max |P - P0| %.1e\n"
         "  dt 5e-4: max |L - L0|/|L0| %.3e, max |E - E0|/E0 %.3e, max |P - P0| %.1e\n",
         dL1, dE1, dP1, dL2, dE2, dP2);
  CHECK(dP1 < 1e-12 && dP2 < 1e-12);
  CHECK(dL1 < 1e-2 && dE1 < 1e-2);
  CHECK(dL1 / dL2 > 1.6 && dE1 / dE2 > 1.6);
}

static void test_resting(void) {
  dsBuilder* b;
  ds_builder_create(&b);
  dsGroundDef gd = {1e4, 10, 1e3, 0.5, 0};
  ds_builder_set_ground(b, &gd);
  ds_builder_set_dt(b, 1e-3);
  dsRigidDef d = ds_default_rigid_def();
  d.mass = 2;
  d.ke = 1e5;
  d.kd = 50;
  d.kf = 100; /* explicit friction: dt kf (points in contact) / m must stay < 2 */
  d.restitution = 0.5;
  d.position[1] = 0.1 - 2 * 9.8 / 4 / 1e5; /* each corner carries m g / 4 */
  const dsReal h[3] = {0.3, 0.1, 0.2};
  ds_builder_add_rigid_box(b, h, &d);
  dsModel* m = finalize(b);
  dsData* dd;
  ds_data_create(m, NULL, &dd);
  double vmax = 0, dx = 0;
  for (int t = 0; t < 2000; t++) {
    ds_step(m, dd);
    for (int k = 0; k < 3; k++) {
      vmax = fmax(vmax, fabs(dd->body[7 + k]) + fabs(dd->body[10 + k]));
      dx = fmax(dx, fabs(dd->body[k] - m->body_x0[k]));
    }
  }
  printf("resting box, 2 s at dt 1e-3: max |v| + |w| %.2e, max displacement %.2e m\n", vmax, dx);
  CHECK(vmax < 1e-6 && dx < 1e-6);
  ds_data_free(dd);
  ds_model_free(m);
}

/* Largest tangential vertex speed over the last tenth of 1 s of rigid-toss's
 * box (half extents 0.2, 0.1, 0.15 m, 1 kg, ke 1e4, kd 10, mu 0.4) at rest
 * on the ground at dt 1/960, every velocity perturbed by 1e-5 (far below
 * the Coulomb cap: the friction is kf vt). */
static double friction_perturbed(double kf) {
  dsBuilder* b;
  ds_builder_create(&b);
  dsGroundDef gd = {1e4, 10, kf, 0.4, 0};
  ds_builder_set_ground(b, &gd);
  ds_builder_set_dt(b, 1.0 / 960);
  dsRigidDef d = ds_default_rigid_def();
  d.mass = 1;
  d.ke = 1e4;
  d.kd = 10;
  d.kf = kf;
  d.mu = 0.4;
  d.restitution = 0.5;
  d.position[1] = 0.1 - 9.8 / 4 / 1e4;
  const dsReal p = 1e-5, h[3] = {0.2, 0.1, 0.15};
  d.velocity[0] = p;
  d.velocity[2] = -p;
  d.angular_velocity[0] = d.angular_velocity[1] = p;
  d.angular_velocity[2] = -p;
  ds_builder_add_rigid_box(b, h, &d);
  dsModel* m = finalize(b);
  dsData* dd;
  ds_data_create(m, NULL, &dd);
  double last = 0;
  for (int t = 0; t < 960; t++) {
    ds_step(m, dd);
    for (int i = 0; t >= 864 && i < m->nparticle; i++) last = fmax(last, hypot(dd->v[3 * i], dd->v[3 * i + 2]));
  }
  ds_data_free(dd);
  ds_model_free(m);
  return last;
}

/* The explicit friction's stability limit, dt kf lambda < 2 with lambda the
 * largest eigenvalue of M^-1 K (controllers/sysid.c rigid_check): for this
 * box the yaw, lambda = 4 rho^2 / I_yy = 3 n / m = 12 /kg, so kf 160 at dt
 * 1/960 (bisection: 160.0; the translation-only n/m put it at 480). 3 % on
 * either side: the perturbation decays by 1e-9 or grows to the cap. */
static void test_friction_limit(void) {
  const double below = friction_perturbed(155), above = friction_perturbed(165);
  printf("box at rest, dt 1/960, velocities perturbed by 1e-5: tangential speed after 1 s %.2e m/s at kf 155, "
         "%.2e at kf 165 (limit 2 / (dt 12 /kg) = 160)\n",
         below, above);
  CHECK(below < 1e-14);
  CHECK(above > 1e-4);
}

static void test_sliding(void) {
  const double mus[3] = {0.2, 0.4, 0.8}, v0 = 3, g = 9.8;
  for (int k = 0; k < 3; k++) {
    dsBuilder* b;
    ds_builder_create(&b);
    dsGroundDef gd = {1e4, 10, 1e3, 0.5, 0};
    ds_builder_set_ground(b, &gd);
    ds_builder_set_dt(b, 5e-4);
    dsRigidDef d = ds_default_rigid_def();
    d.mass = 2;
    d.ke = 1e5;
    d.kd = 100;
    d.kf = 500;
    d.mu = mus[k];
    d.position[1] = 0.1 - 2 * g / 4 / 1e5;
    d.velocity[0] = v0;
    const dsReal h[3] = {0.3, 0.1, 0.2};
    ds_builder_add_rigid_box(b, h, &d);
    dsModel* m = finalize(b);
    dsData* dd;
    ds_data_create(m, NULL, &dd);
    for (int t = 0; t < 8000; t++) ds_step(m, dd);
    const double dist = dd->body[0] - m->body_x0[0], pred = v0 * v0 / (2 * mus[k] * g);
    printf("sliding box, v0 = 3 m/s, mu = %.1f: stops after %.4f m, v^2/(2 mu g) = %.4f m (rel %.2e); final |v| %.1e\n",
           mus[k], dist, pred, rel(dist, pred), fabs(dd->body[7]));
    CHECK(rel(dist, pred) < 0.02 && fabs(dd->body[7]) < 1e-3);
    ds_data_free(dd);
    ds_model_free(m);
  }
}

/* Height ratio of the first bounce of a sphere (r 0.5, 1 kg) dropped from
 * 1 m onto its pole vertex; ke 1e6, kd 0, dt 1e-4. */
static double bounce(double e) {
  dsBuilder* b;
  ds_builder_create(&b);
  dsGroundDef gd = {1e6, 0, 1e3, 0.5, 0};
  ds_builder_set_ground(b, &gd);
  ds_builder_set_dt(b, 1e-4);
  dsRigidDef d = ds_default_rigid_def();
  d.mass = 1;
  d.ke = 1e6;
  d.kd = 0;
  d.restitution = e;
  const double r = 0.5, h0 = 1;
  d.position[1] = r + h0;
  ds_builder_add_rigid_sphere(b, r, 32, &d);
  dsModel* m = finalize(b);
  dsData* dd;
  ds_data_create(m, NULL, &dd);
  double top = -1;
  int phase = 0; /* 0: falling, 1: in contact, 2: rising */
  for (int t = 0; t < 40000 && phase < 3; t++) {
    ds_step(m, dd);
    const double y = dd->body[1] - r, vy = dd->body[8];
    if (phase == 0 && y < 0) phase = 1;
    if (phase == 1 && y > 0) phase = 2;
    if (phase == 2) {
      top = fmax(top, y);
      if (vy < 0) phase = 3;
    }
  }
  ds_data_free(dd);
  ds_model_free(m);
  return top / h0;
}

static void test_restitution(void) {
  const double es[6] = {1, 0.9, 0.7, 0.5, 0.3, 0.1};
  double prev = 2;
  printf("dropped sphere (1 m onto its pole, ke 1e6 N/m, m 1 kg, kd 0, dt 1e-4):\n   e     h1/h0    e^2\n");
  for (int k = 0; k < 6; k++) {
    const double ratio = bounce(es[k]);
    printf("  %.1f   %.4f   %.4f\n", es[k], ratio, es[k] * es[k]);
    CHECK(ratio < prev);
    CHECK(fabs(ratio - es[k] * es[k]) < 0.012);
    prev = ratio;
  }
}

/* Errors: builder checks, and a singular inertia set between episodes is a
 * divergence naming the substep and the body, not garbage. */
static void test_errors(void) {
  dsBuilder* b;
  ds_builder_create(&b);
  dsRigidDef d = ds_default_rigid_def();
  const dsReal h[3] = {0.1, 0.1, 0.1}, bad[3] = {0.1, -1, 0.1};
  d.restitution = 0;
  CHECK_INT_EQ(ds_builder_add_rigid_box(b, h, &d), DS_ERR_INVALID);
  CHECK_STR_CONTAINS(ds_builder_last_error(b), "restitution");
  d.restitution = 1;
  d.orientation[0] = 0;
  CHECK_INT_EQ(ds_builder_add_rigid_box(b, h, &d), DS_ERR_INVALID);
  d.orientation[0] = 1;
  CHECK_INT_EQ(ds_builder_add_rigid_box(b, bad, &d), DS_ERR_INVALID);
  CHECK_INT_EQ(ds_builder_add_rigid_box(b, h, &d), 0);
  /* a spring on a rigid vertex is refused at finalize */
  const dsReal xp[3] = {1, 1, 1};
  int p = ds_builder_add_particle(b, xp, NULL, 1);
  CHECK_INT_EQ(ds_builder_add_spring(b, 0, p, 10, 0, -1), 0);
  dsModel* m = NULL;
  CHECK_INT_EQ(ds_builder_finalize(b, &m), DS_ERR_INVALID);
  CHECK_STR_CONTAINS(ds_builder_last_error(b), "rigid vertices carry no elements");
  ds_builder_free(b);
  /* an absurd spin overflows the gyroscopic term: a divergence error */
  ds_builder_create(&b);
  d = ds_default_rigid_def();
  const dsReal hb[3] = {0.3, 0.2, 0.1};
  ds_builder_add_rigid_box(b, hb, &d);
  m = finalize(b);
  const dsReal zero[9] = {0}, neg = -1, spin[3] = {1e200, 2e200, 0};
  CHECK_INT_EQ(ds_model_set_param(m, "body.mass", &neg, 1), DS_ERR_RANGE);
  CHECK_STR_CONTAINS(ds_model_last_error(m), "\"body.mass\"[0]: expected a number > 0, got -1");
  CHECK_INT_EQ(ds_model_set_param(m, "body.inertia", zero, 9), DS_ERR_INVALID);
  CHECK_STR_CONTAINS(ds_model_last_error(m), "positive definite");
  CHECK_INT_EQ(ds_model_set_param(m, "body.initial_angular_velocity", spin, 3), 0);
  dsData* dd;
  ds_data_create(m, NULL, &dd);
  ds_data_reset(m, dd);
  int rc = 0;
  for (int t = 0; t < 3 && !rc; t++) rc = ds_step(m, dd);
  CHECK_INT_EQ(rc, DS_ERR_DIVERGED);
  CHECK_STR_CONTAINS(ds_data_last_error(dd), "substep 0: body 0");
  ds_data_free(dd);
  ds_model_free(m);
}

int main(void) {
  if (sizeof(dsReal) != sizeof(double)) DST_SKIP("tolerances are for double builds");
  test_errors();
  test_mass_properties();
  test_free_flight();
  test_resting();
  test_friction_limit();
  test_sliding();
  test_restitution();
  return DST_RESULT();
}

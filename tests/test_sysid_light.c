/* The renderer's lights as sysid parameters (light.ambient,
 * light.directional, light.direction: the env's own, envs/env_episode.c):
 *   - the gradient the identifier's loss gets for them (with a physical
 *     parameter beside) against central differences, on the identifier's
 *     own video and on camera-simulator footage with camsim.fit_shading and
 *     premultiplied colour (the -camsim beam configs' protocol); each
 *     analytic value x1.01 must fail the same comparison;
 *   - bad uses are refused with the key named: a negative lower bound on a
 *     light factor, a misspelt light name, light with a camera parameter. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "dsim/env.h"
#include "dsim/sysid.h"
#include "tests/dstest.h"

static dsEnvDef small_beam(void) {
  dsEnvDef ed = ds_default_env_def("beam");
  char err[256];
  ds_env_def_set(&ed, "beam.cells", "[3, 1, 1]", err, sizeof err);
  ds_env_def_set(&ed, "beam.clamp", "true", err, sizeof err);
  ed.substeps = 384;
  ed.render_interval = 64;
  ed.width = ed.height = 24;
  ed.sigma = (dsReal)1e-3;
  ed.cam_distance = 2;
  ed.ambient = (dsReal)0.4;
  ed.directional = (dsReal)0.6;
  ed.light_dir[0] = (dsReal)-0.4, ed.light_dir[1] = 1, ed.light_dir[2] = (dsReal)-0.5;
  return ed;
}

static void set_param(dsSysidDef* sd, int k, const char* name, double lo, double hi, int n, const double* init,
                      const double* truth) {
  dsSysidParam* p = &sd->params[k];
  snprintf(p->name, sizeof p->name, "%s", name);
  p->lower = (dsReal)lo;
  p->upper = (dsReal)hi;
  for (int i = 0; i < n; i++) p->init[i] = (dsReal)init[i];
  p->ninit = n;
  if (truth) {
    for (int i = 0; i < n; i++) p->truth[i] = (dsReal)truth[i];
    p->ntruth = n;
  }
}

/* k_mu, the two factors (the ambient without log: lower 0) and the direction */
static dsSysidDef light_sysid(int camsim) {
  dsSysidDef sd = ds_default_sysid_def();
  const double k0 = 800, kt = 1000, a0 = 0.35, at = 0.4, d0 = 0.7, dt = 0.6;
  const double l0[3] = {-0.3, 1, -0.6}, lt[3] = {-0.4, 1, -0.5};
  set_param(&sd, 0, "tet.k_mu", 1, 1e5, 1, &k0, &kt);
  set_param(&sd, 1, "light.ambient", 0, 10, 1, &a0, &at);
  set_param(&sd, 2, "light.directional", 0.01, 10, 1, &d0, &dt);
  set_param(&sd, 3, "light.direction", -10, 10, 3, l0, lt);
  if (camsim) {
    sd.video = DS_SYSID_CAMSIM;
    sd.camsim.cam.noise = (dsReal)0.01;
    sd.camsim.fit_shading = 1;
    sd.camsim.premultiplied = 1;
  }
  return sd;
}

static dsSysid* make(const dsEnvDef* ed, const dsSysidDef* sd, int want_rc, const char* want_msg) {
  char err[1024] = "";
  dsSysid* s = NULL;
  const int rc = ds_sysid_create(ed, sd, 0, NULL, &s, err, sizeof err);
  if (rc != want_rc) printf("create: %s\n", err);
  CHECK_INT_EQ(rc, want_rc);
  if (want_msg) {
    printf("refused: %s\n", err);
    CHECK_STR_CONTAINS(err, want_msg);
  }
  return s;
}

static void test_gradient(int camsim) {
  dsEnvDef ed = small_beam();
  dsSysidDef sd = light_sysid(camsim);
  dsSysid* s = make(&ed, &sd, 0, NULL);
  if (!s) return;
  const int n = ds_sysid_num_values(s);
  CHECK_INT_EQ(n, 1 + 1 + 1 + 3);
  double x[6], g[6], L = 0;
  memcpy(x, ds_sysid_initial_values(s), sizeof(double) * (size_t)n);
  CHECK_INT_EQ(ds_sysid_eval(s, x, &L, g), 0);
  CHECK(L > 0);
  int bad = 0;
  double dot = 0, gn = 0, xn = 0;
  for (int i = 0; i < n; i++) {
    const double h = 1e-6 * fmax(fabs(x[i]), 1.0), xi = x[i];
    double lp = 0, lm = 0;
    x[i] = xi + h;
    ds_sysid_eval(s, x, &lp, NULL);
    x[i] = xi - h;
    ds_sysid_eval(s, x, &lm, NULL);
    x[i] = xi;
    const double fd = (lp - lm) / (2 * h);
    const double tol = 1e-5 * fabs(fd) + 1e-9 * L;
    /* the tolerance rejects a 1 % error in any value that is not ~0 */
    const int ok = fabs(fd - g[i]) <= tol && (fabs(fd - 1.01 * g[i]) > tol || fabs(g[i]) < 1e-300);
    printf("  %s %-18s value %d: analytic % .10e fd % .10e%s\n", camsim ? "camsim" : "own", 
           ds_sysid_param_name(s, ds_sysid_value_param(s, i)), i, g[i], fd, ok ? "" : "  BAD");
    bad += !ok;
    CHECK(g[i] != 0);
    if (i >= 3) dot += g[i] * x[i], gn += g[i] * g[i], xn += x[i] * x[i];
  }
  CHECK_INT_EQ(bad, 0);
  /* the direction's gradient is orthogonal to it (a scale changes nothing) */
  CHECK(fabs(dot) <= 1e-9 * sqrt(gn * xn));
  ds_sysid_destroy(s);
}

static void test_errors(void) {
  dsEnvDef ed = small_beam();
  dsSysidDef sd = light_sysid(0);
  sd.params[1].lower = -1;
  make(&ed, &sd, DS_ERR_CONFIG, "sysid.param2.lower: \"light.ambient\" must stay non-negative");
  sd = light_sysid(0);
  snprintf(sd.params[2].name, sizeof sd.params[2].name, "light.diffuse");
  make(&ed, &sd, DS_ERR_CONFIG, "sysid.param3.name: env \"beam\" has no parameter \"light.diffuse\"");
  sd = light_sysid(0);
  const double fov = 30;
  set_param(&sd, 4, "camera.fov", 1, 179, 1, &fov, NULL);
  make(&ed, &sd, DS_ERR_UNSUPPORTED, "light parameters");
  /* the env refuses a negative factor, naming it */
  dsEnv* e = NULL;
  char err[256];
  CHECK_INT_EQ(ds_env_create(&ed, &e, err, sizeof err), 0);
  if (!e) return;
  const dsReal neg = -0.5, dir[3] = {0, 1, 0};
  CHECK_INT_EQ(ds_env_set_param(e, "light.directional", &neg, 1), DS_ERR_RANGE);
  CHECK_STR_CONTAINS(ds_env_last_error(e), "light.directional: expected a finite number >= 0");
  CHECK_INT_EQ(ds_env_set_param(e, "light.direction", dir, 2), DS_ERR_RANGE);
  CHECK_INT_EQ(ds_env_set_param(e, "light.direction", dir, 3), 0);
  const dsReal* v = NULL;
  int nv = 0;
  CHECK_INT_EQ(ds_env_param(e, "light.direction", &v, &nv), 0);
  CHECK_INT_EQ(nv, 3);
  if (v) CHECK(v[0] == 0 && v[1] == 1 && v[2] == 0);
  ds_env_destroy(e);
}

int main(void) {
  if (DS_SINGLE) DST_SKIP("finite-difference checks need double precision");
  test_gradient(0);
  test_gradient(1);
  test_errors();
  return DST_RESULT();
}

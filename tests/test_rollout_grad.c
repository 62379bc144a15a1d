/* Multi-step gradients vs central finite differences: 240 substeps of a
 * small cloth (membrane, springs, bending, lift/drag, gravity, a fixed
 * corner, activations of triangles and springs, external forces), of a
 * small soft box in contact with the ground (sliding then sticking
 * friction) and of a spring truss actuated through its springs' rest
 * lengths, falling onto the ground (out of, then in contact). The loss is a weighted
 * sum of the final positions and velocities plus the positions at an
 * intermediate substep (injected into the adjoint during backward). Every
 * parameter class is compared on a few random components, and a perturbed
 * gradient (one component x 1.01) must be rejected by the same comparison. */
#include "config.h"

#include <math.h>

#include "dsim/fd.h"
#include "tests/dstest.h"
#include "tests/enginetest.h"

#define NPICK 4
static double g_worst_ratio = 0;

/* Compares analytic a with central differences fd (n components). */
static int compare(const char* label, const double* a, const double* fd, int n, double rtol) {
  double scale = 0;
  for (int i = 0; i < n; i++) scale = fmax(scale, fmax(fabs(a[i]), fabs(fd[i])));
  double atol = 1e-7 * scale + 1e-11;
  int wi;
  double we;
  int bad = ds_fd_compare(a, fd, n, rtol, atol, &wi, &we);
  if (bad) {
    for (int i = 0; i < n; i++) fprintf(stderr, "  %s[%d]: analytic %.12g fd %.12g\n", label, i, a[i], fd[i]);
  }
  if (wi >= 0) {
    double r = we / (atol + rtol * fmax(fabs(a[wi]), fabs(fd[wi])));
    if (r > g_worst_ratio) g_worst_ratio = r;
  }
  return bad;
}

/* A perturbed adjoint (largest component x 1.01) must fail the comparison. */
static void check_perturbed_fails(const char* label, const double* a, const double* fd, int n, double rtol) {
  double p[64] = {0};
  int big = 0;
  for (int i = 0; i < n; i++) {
    p[i] = a[i];
    if (fabs(a[i]) > fabs(a[big])) big = i;
  }
  p[big] *= 1.01;
  double scale = 0;
  for (int i = 0; i < n; i++) scale = fmax(scale, fmax(fabs(a[i]), fabs(fd[i])));
  int bad = ds_fd_compare(p, fd, n, rtol, 1e-7 * scale + 1e-11, NULL, NULL);
  if (!bad) fprintf(stderr, "%s: perturbed gradient was accepted\n", label);
  CHECK(bad);
}

/* FD step h = g_hrel max(|p|, g_hfloor), chosen per scene. The cloth's
 * rounding noise is amplified ~1e3 over 240 substeps, so it needs a larger
 * step than the usual 1e-6 (truncation error stays ~1e-9). The soft box has
 * kinks (contact onset, the friction cap, approach damping): a large step
 * straddles one, so it uses a small step (checked: FD there is flat in h
 * from 1e-8 to 1e-6 and departs from 1e-5 on). */
static double g_hrel = 2e-5, g_hfloor = 0.05;
static double step_for(double p) { return g_hrel * fmax(fabs(p), g_hfloor); }

/* FD of a named model parameter at components idx[0..n). */
static void fd_param(etScene* s, const char* name, const int* idx, int n, double* fd) {
  const dsReal* cur;
  int cnt;
  ds_model_param(s->m, name, &cur, &cnt);
  dsReal* buf = (dsReal*)malloc((size_t)cnt * sizeof(dsReal));
  memcpy(buf, cur, (size_t)cnt * sizeof(dsReal));
  for (int j = 0; j < n; j++) {
    dsReal p0 = buf[idx[j]];
    double h = step_for(p0);
    buf[idx[j]] = p0 + h;
    ds_model_set_param(s->m, name, buf, cnt);
    double lp = et_rollout(s);
    buf[idx[j]] = p0 - h;
    ds_model_set_param(s->m, name, buf, cnt);
    double lm = et_rollout(s);
    buf[idx[j]] = p0;
    ds_model_set_param(s->m, name, buf, cnt);
    fd[j] = (lp - lm) / (2 * h);
  }
  free(buf);
}

static void check_param(etScene* s, const char* name, int skip_first, double rtol) {
  dsReal* g;
  int cnt;
  CHECK_INT_EQ(ds_grad_param(s->g, name, &g, &cnt), 0);
  int idx[NPICK], n = 0;
  if (cnt <= NPICK + skip_first) {
    for (int i = skip_first; i < cnt; i++) idx[n++] = i;
  } else {
    while (n < NPICK) {
      int i = skip_first + (int)et_unif(0, cnt - skip_first);
      int dup = 0;
      for (int j = 0; j < n; j++) dup |= idx[j] == i;
      if (!dup && i < cnt) idx[n++] = i;
    }
  }
  double a[NPICK], fd[NPICK];
  for (int j = 0; j < n; j++) a[j] = g[idx[j]];
  fd_param(s, name, idx, n, fd);
  int bad = compare(name, a, fd, n, rtol);
  if (bad) fprintf(stderr, "gradient of %s disagrees with finite differences\n", name);
  CHECK(!bad);
  check_perturbed_fails(name, a, fd, n, rtol);
}

/* Per-substep controls: activations (which = 0) or external forces (1). */
static void check_control(etScene* s, int which, double rtol) {
  const int T = s->T;
  const size_t len = which ? 3 * (size_t)s->m->nparticle : (size_t)s->m->nact;
  dsReal* arr = which ? s->fext : s->act;
  const dsReal* grad = which ? s->gfext : s->gact;
  double a[NPICK], fd[NPICK];
  for (int j = 0; j < NPICK; j++) {
    int t = j == 0 ? 0 : j == NPICK - 1 ? T - 1 : (int)et_unif(1, T - 1);
    size_t k = (size_t)et_unif(0, (double)len);
    if (which && k < 3) k += 3; /* particle 0 is fixed in the cloth */
    dsReal* p = arr + (size_t)t * len + k;
    dsReal p0 = *p;
    /* one substep's control moves the state ~dt times less than a
     * parameter does: a 100x larger step keeps the same state perturbation */
    double h = 100 * step_for(p0);
    *p = p0 + h;
    double lp = et_rollout(s);
    *p = p0 - h;
    double lm = et_rollout(s);
    *p = p0;
    fd[j] = (lp - lm) / (2 * h);
    a[j] = grad[(size_t)t * len + k];
  }
  const char* name = which ? "f_ext per substep" : "activation per substep";
  int bad = compare(name, a, fd, NPICK, rtol);
  if (bad) fprintf(stderr, "gradient of %s disagrees with finite differences\n", name);
  CHECK(!bad);
  check_perturbed_fails(name, a, fd, NPICK, rtol);
}

/* Spring activations (the spring block of act): at substeps ts[j], a random
 * spring each; activations change every 25 substeps, so these are
 * time-varying controls. */
static void check_spring_act(etScene* s, const int ts[NPICK], double rtol) {
  const dsModel* m = s->m;
  const size_t na = (size_t)m->nact, base = (size_t)(m->ntri + m->ntet);
  CHECK(m->nspring > 0 && na == base + (size_t)m->nspring);
  double a[NPICK], fd[NPICK];
  for (int j = 0; j < NPICK; j++) {
    const size_t k = base + (size_t)et_unif(0, m->nspring), o = (size_t)ts[j] * na + k;
    const dsReal p0 = s->act[o];
    const double h = 100 * step_for(p0);
    s->act[o] = p0 + h;
    double lp = et_rollout(s);
    s->act[o] = p0 - h;
    double lm = et_rollout(s);
    s->act[o] = p0;
    fd[j] = (lp - lm) / (2 * h);
    a[j] = s->gact[o];
  }
  int bad = compare("spring activation", a, fd, NPICK, rtol);
  if (bad) fprintf(stderr, "gradient of the spring activations disagrees with finite differences\n");
  CHECK(!bad);
  check_perturbed_fails("spring activation", a, fd, NPICK, rtol);
}

static void run_scene(etScene* s, const char* const* names, int nnames, double rtol) {
  et_rollout(s);
  et_backward(s);
  for (int i = 0; i < nnames; i++) check_param(s, names[i], strcmp(names[i], "particle.mass") == 0, rtol);
  check_control(s, 0, rtol);
  check_control(s, 1, rtol);
}

int main(void) {
  if (DS_SINGLE) DST_SKIP("gradient checks need double precision");
  ds_set_num_threads(1);
  {
    dsModel* m = et_cloth_model(4, 4, 1e-3);
    CHECK(m->nbend > 0 && m->nspring > 0 && m->aero == 1 && m->inv_mass[0] == 0);
    etScene s;
    et_scene_init(&s, m, 240, 1, 0.2, 0.05);
    static const char* const names[] = {"initial_position", "initial_velocity", "particle.mass", "tri.k_mu",
                                        "tri.k_lambda",     "tri.k_damp",       "spring.ke",     "spring.kd",
                                        "spring.rest",      "bend.ke",          "bend.kd",       "bend.rest",
                                        "aero.lift",        "aero.drag",        "gravity"};
    run_scene(&s, names, (int)(sizeof names / sizeof names[0]), 1e-5);
    /* out of contact (no ground): spring activations early, mid, late */
    static const int ts[NPICK] = {0, 60, 130, 239};
    et_rollout(&s);
    et_backward(&s);
    check_spring_act(&s, ts, 1e-5);
    et_scene_free(&s);
    ds_model_free(m);
  }
  {
    dsModel* m = et_soft_model(2, 1e-3);
    CHECK(m->ntet == 48 && m->ground == 1);
    etScene s;
    et_scene_init(&s, m, 240, 1, 0.1, 0.5);
    g_hrel = 1e-6;
    g_hfloor = 0.1;
    static const char* const names[] = {"initial_position", "initial_velocity", "particle.mass", "tet.k_mu",
                                        "tet.k_lambda",     "tet.k_damp",       "contact.ke",    "contact.kd",
                                        "contact.kf",       "contact.mu",       "contact.skin",  "gravity"};
    /* the box must really touch the ground, slide and come to rest in it */
    double L = et_rollout(&s);
    (void)L;
    double ymin = 1e9;
    for (int i = 0; i < m->nparticle; i++) ymin = fmin(ymin, s.d->x[3 * i + 1]);
    CHECK(ymin < m->contact_skin[0]);
    run_scene(&s, names, (int)(sizeof names / sizeof names[0]), 1e-5);
    /* both friction regimes occur: sliding (mu matters) and sticking (kf) */
    CHECK(fabs(s.g->contact_mu[0]) > 1e-3);
    CHECK(fabs(s.g->contact_kf[0]) > 1e-6);
    fprintf(stderr, "soft: dL/dmu %.4g, dL/dkf %.4g\n", s.g->contact_mu[0], s.g->contact_kf[0]);
    et_scene_free(&s);
    ds_model_free(m);
  }
  {
    dsModel* m = et_truss_model(1e-3);
    CHECK(m->nspring > 0 && m->ntri == 0 && m->ntet == 0 && m->nact == m->nspring && m->ground == 1);
    etScene s;
    et_scene_init(&s, m, 240, 1, 0.1, 0.05);
    g_hrel = 1e-6;
    g_hfloor = 0.1;
    static const char* const names[] = {"initial_position", "initial_velocity", "particle.mass", "spring.ke",
                                        "spring.kd",        "spring.rest",      "contact.ke",    "contact.kd",
                                        "contact.kf",       "contact.mu",       "contact.skin",  "gravity"};
    /* out of contact for the first substeps, then (mostly) in contact */
    ds_data_reset(m, s.d);
    int first = -1, last = -1, ncontact = 0;
    for (int t = 0; t < s.T; t++) {
      memcpy(s.d->act, s.act + (size_t)t * m->nact, (size_t)m->nact * sizeof(dsReal));
      memcpy(s.d->f_ext, s.fext + (size_t)t * 3 * m->nparticle, 3 * (size_t)m->nparticle * sizeof(dsReal));
      int touch = 0;
      for (int i = 0; i < m->nparticle; i++) touch |= s.d->x[3 * i + 1] < m->contact_skin[0];
      CHECK_INT_EQ(ds_step(m, s.d), 0);
      if (touch) { /* substep t starts in contact */
        if (first < 0) first = t;
        last = t;
        ncontact++;
      }
    }
    fprintf(stderr, "truss: substeps %d..%d touch the ground (%d of %d)\n", first, last, ncontact, s.T);
    CHECK(first > 20 && first < 120 && ncontact > 60);
    run_scene(&s, names, (int)(sizeof names / sizeof names[0]), 1e-5);
    /* spring activations before the first contact and in contact */
    const int ts[NPICK] = {0, first / 2, first + 5, last};
    check_spring_act(&s, ts, 1e-5);
    CHECK(fabs(s.g->contact_ke[0]) > 0);
    et_scene_free(&s);
    ds_model_free(m);
  }
  fprintf(stderr, "worst error / tolerance over all accepted comparisons: %.3g\n", g_worst_ratio);
  return DST_RESULT();
}

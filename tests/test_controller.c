/* Controllers: the sinusoid network's parameter gradient against central
 * finite differences; the trainer's whole-episode parameter gradient (image
 * loss, 3-D state loss, constant cloth policy) through shortened envs against
 * FD of the rollout loss; the episode recorder reproduces the trainer's
 * episode; the baselines start from the same parameters and are seeded.
 * Every FD comparison also shows that the same check rejects the analytic
 * gradient with its largest component scaled by 1.01.
 *
 * The trainer's gradient is read back through the public API by one SGD step
 * with lr 1 and no momentum: theta_new = theta - dL/dtheta. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsim/controller.h"
#include "dsim/env.h"
#include "tests/dstest.h"
#include "tests/gradcheck.h"

#define SEED 11u


/* ---- 1. the network alone: L(W) = sum_k g_k . a(t_k) ------------------------ */
static double net_loss(dsSinNet* net, const double* times, int nt, const dsReal* g, int A, dsReal* a) {
  double L = 0;
  for (int k = 0; k < nt; k++) {
    ds_sinnet_forward(net, times[k], a);
    for (int i = 0; i < A; i++) L += (double)g[k * A + i] * (double)a[i];
  }
  return L;
}

/* dL/dW of the net (L = net_loss) by its backward against central
 * differences over every weight */
static void check_net_grad(const char* label, dsSinNet* net, const double* times, int nt, const dsReal* g, int A,
                           dsReal* a) {
  const int n = ds_sinnet_num_params(net);
  double* W = ds_sinnet_params(net);
  double* an = (double*)calloc((size_t)n, sizeof(double));
  double* fd = (double*)calloc((size_t)n, sizeof(double));
  for (int k = 0; k < nt; k++) ds_sinnet_backward(net, times[k], g + k * A, an);
  for (int q = 0; q < n; q++) {
    const double w0 = W[q], h = 1e-6;
    W[q] = w0 + h;
    const double lp = net_loss(net, times, nt, g, A, a);
    W[q] = w0 - h;
    const double lm = net_loss(net, times, nt, g, A, a);
    W[q] = w0;
    fd[q] = (lp - lm) / (2 * h);
  }
  check_grad(label, an, fd, n, 1e-7, 1e-9);
  free(an);
  free(fd);
}

static void test_sinnet_grad(void) {
  dsSinNetDef d = ds_default_sinnet_def();
  d.phases = 5;
  d.outputs = 7;
  d.omega = 3.0;
  d.phase_step = 1.1;
  d.strength = 0.4;
  d.init_scale = 1.2; /* reach the curved part of tanh */
  d.seed = 3;
  dsSinNet* net = NULL;
  CHECK_INT_EQ(ds_sinnet_create(&d, &net), 0);
  const int A = 7, P = 5, n = A * P, nt = 6;
  CHECK_INT_EQ(ds_sinnet_num_params(net), n);
  double times[6] = {0.0, 0.13, 0.4, 0.77, 1.5, 2.2};
  dsReal g[6 * 7], a[7];
  for (int i = 0; i < nt * A; i++) g[i] = (dsReal)sin(1.7 * i + 0.3);
  /* forward formula spot check: a_i(t) = s tanh(sum_p W_ip sin(w t + p phi)) */
  double* W = ds_sinnet_params(net);
  ds_sinnet_forward(net, 0.4, a);
  double z = 0;
  for (int p = 0; p < P; p++) z += W[2 * P + p] * sin(3.0 * 0.4 + p * 1.1);
  CHECK_CLOSE(a[2], 0.4 * tanh(z), 1e-12, 1e-15);
  check_net_grad("sinnet dL/dW", net, times, nt, g, A, a);
  /* seeded init: same seed, same W; other seed, other W; |W| <= bound */
  dsSinNet* net2 = NULL;
  CHECK_INT_EQ(ds_sinnet_create(&d, &net2), 0);
  CHECK(!memcmp(ds_sinnet_params(net2), W, sizeof(double) * (size_t)n));
  ds_sinnet_init(net2, 4);
  CHECK(memcmp(ds_sinnet_params(net2), W, sizeof(double) * (size_t)n) != 0);
  for (int q = 0; q < n; q++) CHECK(fabs(ds_sinnet_params(net2)[q]) <= 1.2);
  ds_sinnet_destroy(net2);
  ds_sinnet_destroy(net);
}

/* harmonics and bias: inputs sin((h+1) w t + p phi) then 1; FD of dL/dW */
static void test_sinnet_harmonics(void) {
  dsSinNetDef d = ds_default_sinnet_def();
  d.phases = 2;
  d.harmonics = 3;
  d.bias = 1;
  d.outputs = 4;
  d.omega = 1.3;
  d.phase_step = 1.5707963267948966;
  d.strength = 0.5;
  d.init_scale = 1.5;
  d.seed = 11;
  dsSinNet* net = NULL;
  CHECK_INT_EQ(ds_sinnet_create(&d, &net), 0);
  const int A = 4, N = 3 * 2 + 1, n = A * N, nt = 5;
  CHECK_INT_EQ(ds_sinnet_num_params(net), n);
  double times[5] = {0.0, 0.21, 0.9, 1.7, 2.9};
  dsReal g[5 * 4], a[4];
  for (int i = 0; i < nt * A; i++) g[i] = (dsReal)cos(0.9 * i + 0.2);
  double* W = ds_sinnet_params(net);
  /* forward spot check, output 3 at t = 0.9 */
  ds_sinnet_forward(net, 0.9, a);
  double z = W[3 * N + 6]; /* bias */
  for (int h = 0; h < 3; h++)
    for (int p = 0; p < 2; p++) z += W[3 * N + 2 * h + p] * sin((h + 1) * 1.3 * 0.9 + p * 1.5707963267948966);
  CHECK_CLOSE(a[3], 0.5 * tanh(z), 1e-12, 1e-15);
  /* bias alone: a constant action whatever t */
  for (int q = 0; q < n; q++) W[q] = (q % N == 6) ? 0.3 * (q / N + 1) : 0;
  dsReal a0[4], a1[4];
  ds_sinnet_forward(net, 0.0, a0);
  ds_sinnet_forward(net, 2.5, a1);
  for (int i = 0; i < A; i++) {
    CHECK_CLOSE(a0[i], a1[i], 0, 0);
    CHECK_CLOSE(a0[i], 0.5 * tanh(0.3 * (i + 1)), 1e-14, 0);
  }
  ds_sinnet_init(net, 11);
  check_net_grad("sinnet harmonics+bias dL/dW", net, times, nt, g, A, a);
  for (int q = 0; q < n; q++) CHECK(fabs(W[q]) <= 1.5);
  /* out of range: harmonics < 0, bias not 0/1 */
  dsSinNet* bad = NULL;
  d.harmonics = -1;
  CHECK_INT_EQ(ds_sinnet_create(&d, &bad), DS_ERR_RANGE);
  d.harmonics = 2;
  d.bias = 2;
  CHECK_INT_EQ(ds_sinnet_create(&d, &bad), DS_ERR_RANGE);
  CHECK(bad == NULL);
  ds_sinnet_destroy(net);
}

/* ---- 2. the trainer's gradient through an env ---------------------------- */
static dsEnvDef small_def(const char* name, int substeps, int C) {
  dsEnvDef d = ds_default_env_def(name);
  CHECK(d.cls != NULL);
  d.substeps = substeps;
  d.control_interval = C;
  d.render_interval = substeps / 2;
  d.width = d.height = 24;
  d.supersample = 1;
  d.sigma = 1e-4;
  if (!strcmp(name, "control-cloth")) { /* a small sheet inside the view */
    dsControlClothParams* p = (dsControlClothParams*)ds_env_def_params(&d);
    p->size_min = p->size_max = 4;
    d.start[0] = -1;
  }
  return d;
}

/* The trainer settings of the bundled configs' "controller" sections
 * (configs/NAME.json, what `dsim run NAME` uses), written out here so that
 * the checks do not move with the configs; seeds SEED. */
static dsTrainerDef ctrl_def(const char* name) {
  dsTrainerDef td = ds_default_trainer_def();
  td.seed = td.env_seed = td.net.seed = SEED;
  if (!strcmp(name, "walker") || !strcmp(name, "walker-springs")) {
    td.net.phases = 4;
    td.net.omega = 20;
    td.net.phase_step = 2 * 3.14159265358979323846 / 4;
    td.net.strength = 0.2;
  }
  if (!strcmp(name, "walker")) {
    td.net.harmonics = 2;
    td.net.init_scale = 0.1;
    td.optim.lr = 0.15;
    td.optim.beta1 = 0.5;
    td.optim.clip_norm = 5;
    td.lr_loss_power = 0.5;
  }
  if (!strcmp(name, "control-fem")) {
    td.optim.lr = 0.3;
    td.optim.beta1 = 0.5;
    td.optim.beta2 = 0.9;
    td.net.phases = 2;
    td.net.harmonics = 4;
    td.net.bias = 1;
    td.net.omega = 1;
  }
  if (!strcmp(name, "control-cloth")) {
    td.optim = ds_default_optim_def(DS_OPTIM_SGD);
    td.optim.lr = 1;
    td.optim.momentum = 0.5;
    td.optim.clip_norm = 1;
    td.const_init[0] = 1;
  }
  return td;
}

typedef struct Fd {
  dsEnv* env;
  dsTrainerDef td;
  dsSinNet* net; /* SINNET: a network of the same def, W overwritten */
  int S, A, method;
  double step_dt;
  dsReal *act, *obs;
} Fd;

/* loss of a rollout with parameters x (the trainer's policy convention) */
static double fd_loss(Fd* f, const double* x, int np) {
  CHECK_INT_EQ(ds_env_reset(f->env, f->td.env_seed, NULL, NULL), 0);
  if (f->net) memcpy(ds_sinnet_params(f->net), x, sizeof(double) * (size_t)np);
  const int od = ds_env_obs_size(f->env);
  for (int k = 0; k < f->S; k++) {
    if (f->net)
      ds_sinnet_forward(f->net, k * f->step_dt, f->act);
    else
      for (int i = 0; i < f->A; i++) f->act[i] = (dsReal)x[i];
    int done;
    CHECK_INT_EQ(ds_env_step(f->env, f->act, f->obs, NULL, NULL, &done), 0);
  }
  (void)od;
  if (f->method == DS_METHOD_STATE) {
    dsReal tg[3];
    ds_env_target(f->env, tg);
    double l = 0;
    for (int j = 0; j < 3; j++) l += ((double)f->obs[j] - tg[j]) * ((double)f->obs[j] - tg[j]);
    return l;
  }
  dsReal l;
  CHECK_INT_EQ(ds_env_loss(f->env, &l), 0);
  return (double)l;
}

static void trainer_grad_case(const char* what, const char* name, int substeps, int C, int method, double h, double rtol,
                              double atol, int phases) {
  dsEnvDef d = small_def(name, substeps, C);
  char err[512];
  dsEnv* env = NULL;
  int rc = ds_env_create(&d, &env, err, sizeof err);
  CHECK_INT_EQ(rc, 0);
  if (rc) {
    printf("%s\n", err);
    return;
  }
  dsTrainerDef td = ctrl_def(name);
  td.method = method;
  td.net.phases = phases;
  td.net.init_scale = 0.8;
  td.optim = ds_default_optim_def(DS_OPTIM_SGD);
  td.optim.lr = 1;
  td.optim.momentum = 0;
  dsTrainer* tr = NULL;
  rc = ds_trainer_create(env, &td, &tr, err, sizeof err);
  CHECK_INT_EQ(rc, 0);
  if (rc) {
    printf("%s\n", err);
    ds_env_destroy(env);
    return;
  }
  const int np = ds_trainer_num_params(tr);
  double* x0 = (double*)malloc(sizeof(double) * (size_t)np);
  double* an = (double*)malloc(sizeof(double) * (size_t)np);
  double* fd = (double*)malloc(sizeof(double) * (size_t)np);
  memcpy(x0, ds_trainer_params(tr), sizeof(double) * (size_t)np);
  dsTrainerIter it;
  CHECK_INT_EQ(ds_trainer_iterate(tr, &it), 0);
  for (int q = 0; q < np; q++) an[q] = x0[q] - ds_trainer_params(tr)[q];
  double n2 = 0;
  for (int q = 0; q < np; q++) n2 += an[q] * an[q];
  CHECK_CLOSE(it.grad_norm, sqrt(n2), 1e-9, 1e-300);
  Fd f;
  memset(&f, 0, sizeof f);
  f.env = env;
  f.td = td;
  f.S = ds_env_num_steps(env);
  f.A = ds_env_action_size(env);
  f.method = method;
  f.step_dt = (double)d.control_interval * (double)d.dt;
  f.act = (dsReal*)calloc((size_t)f.A, sizeof(dsReal));
  f.obs = (dsReal*)calloc(6, sizeof(dsReal));
  if (strcmp(name, "control-cloth")) {
    dsSinNetDef nd = td.net;
    nd.outputs = f.A;
    CHECK_INT_EQ(ds_sinnet_create(&nd, &f.net), 0);
  }
  /* the loss reported is that of x0 */
  CHECK_CLOSE(fd_loss(&f, x0, np), it.loss, 1e-12, 1e-300);
  double* x = (double*)malloc(sizeof(double) * (size_t)np);
  memcpy(x, x0, sizeof(double) * (size_t)np);
  for (int q = 0; q < np; q++) {
    x[q] = x0[q] + h;
    double lp = fd_loss(&f, x, np);
    x[q] = x0[q] - h;
    double lm = fd_loss(&f, x, np);
    x[q] = x0[q];
    fd[q] = (lp - lm) / (2 * h);
  }
  check_grad(what, an, fd, np, rtol, atol);
  ds_sinnet_destroy(f.net);
  free(f.act);
  free(f.obs);
  free(x);
  free(x0);
  free(an);
  free(fd);
  ds_trainer_destroy(tr);
  ds_env_destroy(env);
}

/* Rejected steps (controller.reject = f): plain SGD on the small cloth's
 * initial velocity (3 values) with a step too long for it, so that losses
 * rise. A rejected iteration's loss exceeds the lowest so far, an accepted
 * one's does not; after a rejection the next parameters are the best ones
 * moved by f times the step that was rejected (p_next = b + f (p_rej - b):
 * the same gradient at b, the learning rate times f), and the learning rate
 * reported is f times the previous one. */
static void test_reject(void) {
  dsEnvDef d = small_def("control-cloth", 120, 60);
  char err[512];
  dsEnv* env = NULL;
  CHECK_INT_EQ(ds_env_create(&d, &env, err, sizeof err), 0);
  if (!env) return;
  dsTrainerDef td = ctrl_def("control-cloth");
  td.method = DS_METHOD_STATE;
  td.optim.momentum = 0;
  td.optim.clip_norm = 0;
  td.optim.lr = 100;
  td.reject = 0.5;
  dsTrainer* tr = NULL;
  CHECK_INT_EQ(ds_trainer_create(env, &td, &tr, err, sizeof err), 0);
  if (!tr) {
    printf("%s\n", err);
    ds_env_destroy(env);
    return;
  }
  double best = INFINITY, bp[3] = {0, 0, 0}, rej[3] = {0, 0, 0}, lr_prev = 0;
  int nrej = 0, after_rej = 0;
  for (int k = 0; k < 12; k++) {
    dsTrainerIter it;
    CHECK_INT_EQ(ds_trainer_iterate(tr, &it), 0);
    if (after_rej) { /* this episode ran the parameters chosen after a rejection */
      for (int q = 0; q < 3; q++) CHECK_CLOSE(it.params[q], bp[q] + 0.5 * (rej[q] - bp[q]), 1e-12, 1e-12);
      after_rej = 0;
    }
    if (it.rejected) {
      nrej++;
      CHECK(it.loss > best);
      CHECK_CLOSE(it.lr, 0.5 * lr_prev, 1e-15, 0);
      for (int q = 0; q < 3; q++) rej[q] = it.params[q];
      after_rej = 1;
    } else {
      CHECK(it.loss <= best);
      best = it.loss;
      for (int q = 0; q < 3; q++) bp[q] = it.params[q];
    }
    if (getenv("DSIM_TEST_VERBOSE")) printf("reject: it %d loss %g lr %g rejected %d\n", k, it.loss, it.lr, it.rejected);
    lr_prev = it.lr;
  }
  CHECK(nrej > 0); /* the step was long enough to overshoot */
  ds_trainer_destroy(tr);
  ds_env_destroy(env);
}

/* Loss-scaled steps (controller.lr_loss_power = p): plain SGD on the small
 * cloth's initial velocity. The rate reported for iteration k is
 * lr * min(1, (L_k / L_0)^p) and the next parameters are the evaluated ones
 * moved by that rate times the gradient (momentum 0, no clipping: a step of
 * length lr_k |g_k|); with p = 0 (off) the rate is lr throughout. */
static void test_lr_loss_power(void) {
  dsEnvDef d = small_def("control-cloth", 120, 60);
  char err[512];
  dsEnv* env = NULL;
  CHECK_INT_EQ(ds_env_create(&d, &env, err, sizeof err), 0);
  if (!env) return;
  for (int on = 0; on < 2; on++) {
    dsTrainerDef td = ctrl_def("control-cloth");
    td.method = DS_METHOD_STATE;
    td.optim.momentum = 0;
    td.optim.clip_norm = 0;
    td.optim.lr = 0.1;
    td.lr_loss_power = on ? 0.5 : 0;
    dsTrainer* tr = NULL;
    CHECK_INT_EQ(ds_trainer_create(env, &td, &tr, err, sizeof err), 0);
    if (!tr) {
      printf("%s\n", err);
      break;
    }
    double l0 = 0, prev[3] = {0, 0, 0}, step = 0;
    int nscaled = 0;
    for (int k = 0; k < 6; k++) {
      dsTrainerIter it;
      CHECK_INT_EQ(ds_trainer_iterate(tr, &it), 0);
      if (k == 0) l0 = it.loss;
      if (k > 0) { /* the step after iteration k - 1 */
        double n = 0;
        for (int q = 0; q < 3; q++) n += (it.params[q] - prev[q]) * (it.params[q] - prev[q]);
        CHECK_CLOSE(sqrt(n), step, 1e-12, 1e-12);
      }
      const double f = on && it.loss < l0 ? pow(it.loss / l0, 0.5) : 1;
      CHECK_CLOSE(it.lr, 0.1 * f, 1e-15, 0);
      nscaled += f < 1;
      step = it.lr * it.grad_norm;
      for (int q = 0; q < 3; q++) prev[q] = it.params[q];
      if (getenv("DSIM_TEST_VERBOSE")) printf("lr_loss_power %d: it %d loss %g lr %g\n", on, k, it.loss, it.lr);
    }
    CHECK(on ? nscaled > 0 : nscaled == 0); /* the loss fell below the first one */
    ds_trainer_destroy(tr);
  }
  ds_env_destroy(env);
}

/* ---- 3. recorder and baselines ---------------------------------------------- */
static void test_recorder_and_baselines(void) {
  dsEnvDef d = small_def("walker", 240, 16);
  d.render_interval = 40; /* not a multiple of C: the replay steps by gcd = 8 */
  d.render_last = 1;
  char err[512];
  dsEnv* env = NULL;
  CHECK_INT_EQ(ds_env_create(&d, &env, err, sizeof err), 0);
  dsTrainerDef td = ctrl_def("walker");
  td.net.init_scale = 1.0;
  dsTrainer* tr = NULL;
  CHECK_INT_EQ(ds_trainer_create(env, &td, &tr, err, sizeof err), 0);
  dsTrainerIter it;
  CHECK_INT_EQ(ds_trainer_iterate(tr, &it), 0);
  const int N = ds_env_num_particles(env), S = ds_env_num_steps(env), A = ds_env_action_size(env);
  CHECK_INT_EQ(it.nsteps, S);
  CHECK_INT_EQ(it.action_dim, A);
  const dsReal* xend = ds_env_positions(env);
  dsRecorder* rec = NULL;
  CHECK_INT_EQ(ds_recorder_create(env, 40, &rec, err, sizeof err), 0);
  const dsEpisodeRecord* r = NULL;
  CHECK_INT_EQ(ds_recorder_record(rec, td.env_seed, it.iteration, it.actions, &r), 0);
  if (r) {
    CHECK_INT_EQ(r->iteration, it.iteration);
    CHECK_CLOSE(r->metric, it.metric, DS_SINGLE ? 1e-4 : 1e-10, DS_SINGLE ? 1e-6 : 1e-12);
    CHECK_CLOSE(r->loss, it.loss, DS_SINGLE ? 1e-4 : 1e-10, DS_SINGLE ? 1e-6 : 1e-12);
    CHECK_INT_EQ(r->nsubsteps, 241);
    CHECK_INT_EQ(r->nframes, 7); /* substeps 0, 40, ..., 200 and the last (240) */
    CHECK_INT_EQ(r->nparticles, N);
    double worst = 0;
    for (int i = 0; i < 3 * N; i++) {
      double e = fabs((double)r->positions[(size_t)240 * 3 * N + i] - (double)xend[i]);
      if (e > worst) worst = e;
    }
    CHECK(worst < (DS_SINGLE ? 1e-4 : 1e-5)); /* float storage */
    /* a stored row that is not a step boundary of the source (substep 40) is filled */
    double s40 = 0;
    for (int i = 0; i < 3 * N; i++) s40 += fabs(r->positions[(size_t)40 * 3 * N + i]);
    CHECK(s40 > 0);
    int lit = 0;
    for (int i = 0; i < r->width * r->height * 4; i++) lit += r->frames[i] > 0;
    CHECK(lit > 0);
    CHECK((double)r->actions[5] == (double)(float)it.actions[5]);
  }
  ds_recorder_destroy(rec);
  const double m0 = it.metric, l0 = it.loss;
  ds_trainer_destroy(tr);
  /* RANDOM and CEM evaluate the same initial parameters at iteration 0, then differ; seeded */
  double lc[2][6];
  for (int rep = 0; rep < 2; rep++)
    for (int method = DS_METHOD_RANDOM; method <= DS_METHOD_CEM; method++) {
      dsTrainerDef t2 = td;
      t2.method = method;
      t2.cem_population = 3;
      t2.cem_elite = 1;
      CHECK_INT_EQ(ds_trainer_create(env, &t2, &tr, err, sizeof err), 0);
      for (int i = 0; i < 3; i++) {
        CHECK_INT_EQ(ds_trainer_iterate(tr, &it), 0);
        if (i == 0) {
          CHECK(it.metric == m0);
          CHECK(it.loss == l0);
        }
        if (rep == 0) lc[method - DS_METHOD_RANDOM][i] = it.loss;
        if (rep == 1) CHECK(it.loss == lc[method - DS_METHOD_RANDOM][i]);
        CHECK(it.grad_norm == 0);
      }
      CHECK(lc[method - DS_METHOD_RANDOM][1] != l0);
      ds_trainer_destroy(tr);
    }
  /* CEM runs a generation's samples at once, on forward-only copies of the
   * env beside the env itself, one per thread: two generations (and the
   * update between) give the same losses, metrics, parameters and actions
   * on 1 and on 2 threads, and the same as the sample-by-sample reference
   * (each sample's episode run on the env here from its reported actions) */
  {
    const int nthr = ds_get_max_threads();
    double cl[2][8], cm[2][8], cp[2][8];
    dsReal* ca[2][8];
    const int NS = ds_env_num_steps(env), NA = ds_env_action_size(env);
    /* a parameter set on the env before the trainer: the copies take it (ds_env_copy_params) */
    const dsReal* pm;
    int nm = 0;
    dsReal* mass0 = NULL;
    if (!ds_env_param(env, "particle.mass", &pm, &nm) && nm > 0) {
      mass0 = (dsReal*)malloc((size_t)nm * sizeof(dsReal));
      dsReal* heavier = (dsReal*)malloc((size_t)nm * sizeof(dsReal));
      memcpy(mass0, pm, (size_t)nm * sizeof(dsReal));
      for (int q = 0; q < nm; q++) heavier[q] = mass0[q] * (dsReal)1.25;
      CHECK(ds_env_reset(env, td.env_seed, NULL, NULL) == 0);
      CHECK(ds_env_set_param(env, "particle.mass", heavier, nm) == 0);
      free(heavier);
    }
    for (int thr = 1; thr <= 2; thr++) {
      ds_set_num_threads(thr);
      dsTrainerDef t2 = td;
      t2.method = DS_METHOD_CEM;
      t2.cem_population = 4;
      t2.cem_elite = 2;
      CHECK_INT_EQ(ds_trainer_create(env, &t2, &tr, err, sizeof err), 0);
      for (int i = 0; i < 8; i++) {
        CHECK_INT_EQ(ds_trainer_iterate(tr, &it), 0);
        cl[thr - 1][i] = it.loss;
        cm[thr - 1][i] = it.metric;
        cp[thr - 1][i] = it.params[it.nparams - 1];
        ca[thr - 1][i] = (dsReal*)malloc((size_t)NS * NA * sizeof(dsReal));
        memcpy(ca[thr - 1][i], it.actions, (size_t)NS * NA * sizeof(dsReal));
      }
      ds_trainer_destroy(tr);
    }
    ds_set_num_threads(nthr);
    /* the env on the batched engine (what a GPU runs): the generation's
     * samples are one lockstep batch, instances of one engine; the same
     * bits as the pool's copies */
    {
      dsEnvDef db = *ds_env_def(env);
      db.batch_engine = 1;
      dsEnv* envb = NULL;
      CHECK_INT_EQ(ds_env_create(&db, &envb, err, sizeof err), 0);
      if (envb) {
        CHECK_INT_EQ(ds_env_copy_params(envb, env), 0);
        dsTrainerDef t2 = td;
        t2.method = DS_METHOD_CEM;
        t2.cem_population = 4;
        t2.cem_elite = 2;
        CHECK_INT_EQ(ds_trainer_create(envb, &t2, &tr, err, sizeof err), 0);
        for (int i = 0; i < 8 && tr; i++) {
          CHECK_INT_EQ(ds_trainer_iterate(tr, &it), 0);
          if (!(it.loss == cl[0][i] && it.metric == cm[0][i] && it.params[it.nparams - 1] == cp[0][i] &&
                !memcmp(it.actions, ca[0][i], (size_t)NS * NA * sizeof(dsReal))))
            DST_FAIL_AT("CEM on the batched engine, iteration %d: loss %.17g / %.17g", i, it.loss, cl[0][i]);
        }
        ds_trainer_destroy(tr);
        ds_env_destroy(envb);
      }
    }
    for (int i = 0; i < 8; i++) {
      CHECK(cl[0][i] == cl[1][i] && cm[0][i] == cm[1][i] && cp[0][i] == cp[1][i]);
      CHECK(!memcmp(ca[0][i], ca[1][i], (size_t)NS * NA * sizeof(dsReal)));
      /* the reference: sample i's actions on the env, step by step */
      dsReal l = 0;
      CHECK(ds_env_reset(env, td.env_seed, NULL, NULL) == 0);
      for (int k = 0; k < NS; k++) CHECK(ds_env_step(env, ca[0][i] + (size_t)k * NA, NULL, NULL, NULL, NULL) == 0);
      CHECK(ds_env_loss(env, &l) == 0);
      CHECK((double)l == cl[0][i]);
      free(ca[0][i]);
      free(ca[1][i]);
    }
    CHECK(cl[0][4] != cl[0][0]); /* the second generation moved */
    if (mass0) {
      CHECK(ds_env_reset(env, td.env_seed, NULL, NULL) == 0);
      CHECK(ds_env_set_param(env, "particle.mass", mass0, nm) == 0);
      free(mass0);
    }
  }
  /* bad combinations are refused with a message */
  dsTrainerDef bad = td;
  bad.method = DS_METHOD_CEM;
  bad.mpc = 1;
  CHECK_INT_EQ(ds_trainer_create(env, &bad, &tr, err, sizeof err), DS_ERR_INVALID);
  CHECK_STR_CONTAINS(err, "MPC");
  bad = td;
  bad.method = DS_METHOD_CEM;
  bad.cem_elite = 0;
  CHECK_INT_EQ(ds_trainer_create(env, &bad, &tr, err, sizeof err), DS_ERR_RANGE);
  CHECK_STR_EQ(ds_method_name(DS_METHOD_STATE), "state");
  CHECK_INT_EQ(ds_method_parse("cem"), DS_METHOD_CEM);
  CHECK_INT_EQ(ds_method_parse("nope"), DS_ERR_NOTFOUND);
  CHECK_INT_EQ(ds_method_parse(NULL), DS_ERR_INVALID);
  ds_env_destroy(env);
}

/* control-cloth draws its sheet size from the seed: recorder and MPC follow */
static void test_cloth_sizes(void) {
  dsEnvDef d = small_def("control-cloth", 60, 20);
  dsControlClothParams* cp = (dsControlClothParams*)ds_env_def_params(&d);
  cp->size_min = 3;
  cp->size_max = 9;
  char err[512];
  dsEnv* env = NULL;
  CHECK_INT_EQ(ds_env_create(&d, &env, err, sizeof err), 0);
  if (!env) return;
  dsRecorder* rec = NULL;
  CHECK_INT_EQ(ds_recorder_create(env, 20, &rec, err, sizeof err), 0);
  int sizes[3];
  for (uint64_t seed = 1; seed <= 3; seed++) {
    dsTrainerDef td = ctrl_def("control-cloth");
    td.env_seed = seed;
    td.mpc = 1;
    td.mpc_horizon = 2;
    td.mpc_execute = 1;
    dsTrainer* tr = NULL;
    CHECK_INT_EQ(ds_trainer_create(env, &td, &tr, err, sizeof err), 0);
    if (!tr) continue;
    dsTrainerIter it;
    int rc = ds_trainer_iterate(tr, &it);
    CHECK_INT_EQ(rc, 0);
    if (rc) printf("  %s\n", ds_trainer_last_error(tr));
    sizes[seed - 1] = ds_env_num_particles(env);
    const dsEpisodeRecord* r = NULL;
    rc = ds_recorder_record(rec, seed, 7 + (int)seed, it.actions, &r);
    CHECK_INT_EQ(rc, 0);
    if (r) {
      CHECK_INT_EQ(r->iteration, 7 + (int)seed);
      CHECK_INT_EQ(r->nparticles, sizes[seed - 1]);
      CHECK_CLOSE(r->metric, it.metric, DS_SINGLE ? 1e-4 : 1e-10, 1e-12);
    }
    ds_trainer_destroy(tr);
  }
  printf("  cloth sizes by seed: %d %d %d particles\n", sizes[0], sizes[1], sizes[2]);
  ds_recorder_destroy(rec);
  ds_env_destroy(env);
}

/* Backtracking: on control-fem with strong muscles (strength 3, so that a
 * saturated activation inverts tets) a long SGD step makes the next rollout
 * invert an element; the trainer halves the step until the episode runs, and
 * without backtracking the same step is an error naming the element. */
static void test_backtracking(void) {
  dsEnvDef d = small_def("control-fem", 240, 16);
  char err[512];
  dsEnv* env = NULL;
  CHECK_INT_EQ(ds_env_create(&d, &env, err, sizeof err), 0);
  if (!env) return;
  for (int allow = 0; allow < 2; allow++) {
    dsTrainerDef td = ctrl_def("control-fem");
    td.net.strength = 3;
    td.net.init_scale = 0.01;
    td.optim = ds_default_optim_def(DS_OPTIM_SGD);
    td.optim.lr = 1e4;
    td.max_backtracks = allow ? 30 : 0;
    dsTrainer* tr = NULL;
    CHECK_INT_EQ(ds_trainer_create(env, &td, &tr, err, sizeof err), 0);
    if (!tr) continue;
    dsTrainerIter it;
    CHECK_INT_EQ(ds_trainer_iterate(tr, &it), 0); /* small activations: runs */
    CHECK_INT_EQ(it.backtracks, 0);
    const double l0 = it.loss;
    int rc = ds_trainer_iterate(tr, &it);
    if (allow) {
      CHECK_INT_EQ(rc, 0);
      CHECK(it.backtracks > 0);
      CHECK(isfinite(it.loss) && isfinite(it.metric));
      printf("  backtracking: %d halvings, loss %.6g -> %.6g\n", it.backtracks, l0, it.loss);
    } else {
      CHECK_INT_EQ(rc, DS_ERR_INVERTED);
      CHECK(strstr(ds_trainer_last_error(tr), "tet") != NULL);
      printf("  without backtracking: %s\n", ds_trainer_last_error(tr));
    }
    ds_trainer_destroy(tr);
  }
  dsTrainerDef bad = ctrl_def("control-fem");
  bad.max_backtracks = -1;
  dsTrainer* tr = NULL;
  CHECK_INT_EQ(ds_trainer_create(env, &bad, &tr, err, sizeof err), DS_ERR_RANGE);
  ds_env_destroy(env);
}

/* the config's "controller" section (optimiser, schedule, momentum,
 * clipping, initial action) reaches the trainer definition; bad values are
 * refused with a message naming the key; the bundled configs carry the
 * settings the environments were tuned with */
static void test_config_schedule(void) {
  char err[512];
  const dsTrainerDef def = ds_default_trainer_def();
  /* the generic defaults */
  CHECK_INT_EQ(def.method, DS_METHOD_IMAGE);
  CHECK_INT_EQ(def.policy, DS_POLICY_AUTO);
  CHECK_INT_EQ(def.net.phases, 8);
  CHECK_CLOSE(def.net.omega, 2.5, 1e-15, 0);
  CHECK_CLOSE(def.net.phase_step, 3.14159265358979323846 / 4, 1e-15, 0);
  CHECK_CLOSE(def.net.strength, 0.3, 1e-15, 0);
  CHECK_INT_EQ(def.optim.kind, DS_OPTIM_ADAM);
  CHECK_CLOSE(def.optim.lr, 1e-2, 1e-15, 0);
  CHECK(def.seed == 0 && def.env_seed == 0 && def.net.seed == 0);
  CHECK_INT_EQ(ds_trainer_def_validate(&def, err, sizeof err), 0);
  /* a section */
  {
    dsTrainerDef td = def;
    const char* t = "{\"env\": {\"name\": \"walker\"}, \"controller\": {\"optimizer\": \"sgd\", \"lr\": 0.3,"
                    " \"decay_every\": 3, \"decay_factor\": 0.5}}";
    CHECK_INT_EQ(ds_trainer_def_from_text("c.json", t, &td, err, sizeof err), 0);
    CHECK_INT_EQ(td.optim.kind, DS_OPTIM_SGD);
    CHECK_CLOSE(td.optim.lr, 0.3, 1e-15, 0);
    CHECK_INT_EQ(td.optim.decay_every, 3);
    CHECK_CLOSE(td.optim.decay_factor, 0.5, 1e-15, 0);
    /* absent keys keep their values */
    CHECK(td.optim.momentum == def.optim.momentum && td.net.phases == def.net.phases && td.mpc == def.mpc);
    /* the schedule reaches the optimiser: lr 0.3 for 3 steps, then 0.15 */
    dsOptim* opt = NULL;
    CHECK_INT_EQ(ds_optim_create(&td.optim, 1, &opt), 0);
    if (opt) {
      double x = 0, g = 1;
      for (int k = 0; k < 3; k++) {
        CHECK_CLOSE(ds_optim_lr(opt), 0.3, 1e-15, 0);
        ds_optim_step(opt, &x, &g, NULL);
      }
      CHECK_CLOSE(ds_optim_lr(opt), 0.15, 1e-15, 0);
      ds_optim_destroy(opt);
    }
    /* no controller section: the definition is left as it was */
    dsTrainerDef t2 = def;
    CHECK_INT_EQ(ds_trainer_def_from_text("n.json", "{\"env\": {\"name\": \"walker\"}}", &t2, err, sizeof err), 0);
    CHECK(t2.optim.kind == def.optim.kind && t2.optim.lr == def.optim.lr && t2.net.phases == def.net.phases);
  }
  /* bad values: refused, naming the key; the definition unchanged */
  {
    static const char* const bad[] = {
        "{\"env\": {\"name\": \"walker\"}, \"controller\": {\"decay_every\": 3, \"decay_factor\": 0}}",
        "{\"env\": {\"name\": \"walker\"}, \"controller\": {\"decay_every\": 3, \"decay_factor\": 1.5}}",
    };
    for (int i = 0; i < 2; i++) {
      dsTrainerDef td = def;
      err[0] = '\0';
      CHECK_INT_EQ(ds_trainer_def_from_text("b.json", bad[i], &td, err, sizeof err), DS_ERR_CONFIG);
      CHECK_STR_CONTAINS(err, "b.json: ");
      CHECK_STR_CONTAINS(err, "controller.decay_factor");
      CHECK(!memcmp(&td, &def, sizeof td));
    }
    dsTrainerDef td = def;
    CHECK_INT_EQ(ds_trainer_def_from_text("b.json", "{\"controller\": {\"lrr\": 0.1}}", &td, err, sizeof err),
                 DS_ERR_CONFIG);
    CHECK_STR_CONTAINS(err, "\"controller.lrr\"");
    CHECK_INT_EQ(ds_trainer_def_from_text("b.json", "{\"controller\": {\"optimizer\": \"adamw\"}}", &td, err,
                                          sizeof err),
                 DS_ERR_CONFIG);
    CHECK_STR_CONTAINS(err, "controller.optimizer");
    CHECK_INT_EQ(ds_trainer_def_from_text("b.json", "{\"controler\": {\"lr\": 0.1}}", &td, err, sizeof err),
                 DS_ERR_CONFIG);
    CHECK_STR_CONTAINS(err, "controler");
    /* the cross-field checks, and the trainer refuses what they refuse */
    td = def;
    td.optim.decay_every = 3;
    td.optim.decay_factor = 0;
    CHECK_INT_EQ(ds_trainer_def_validate(&td, err, sizeof err), DS_ERR_RANGE);
    CHECK_STR_CONTAINS(err, "controller.decay_factor");
    td.optim.decay_factor = 1.5;
    CHECK_INT_EQ(ds_trainer_def_validate(&td, err, sizeof err), DS_ERR_RANGE);
    CHECK_STR_CONTAINS(err, "controller.decay_factor");
    dsEnvDef d = small_def("walker", 64, 16);
    dsEnv* env = NULL;
    CHECK_INT_EQ(ds_env_create(&d, &env, err, sizeof err), 0);
    if (env) {
      dsTrainer* tr = NULL;
      CHECK_INT_EQ(ds_trainer_create(env, &td, &tr, err, sizeof err), DS_ERR_RANGE);
      CHECK_STR_CONTAINS(err, "controller.decay_factor");
      CHECK(tr == NULL);
      ds_env_destroy(env);
    }
  }
  /* the bundled configs' sections: the settings ctrl_def writes out */
  {
    const char* src = getenv("DS_SRCDIR");
    static const char* const names[] = {"walker", "control-fem", "control-cloth", "walker-springs"};
    for (int k = 0; k < 4; k++) {
      char path[4096];
      snprintf(path, sizeof path, "%s/configs/%s.json", src ? src : "..", names[k]);
      char* text = NULL;
      int rc = ds_config_read_file(path, &text, err, sizeof err);
      CHECK_INT_EQ(rc, 0);
      if (rc) {
        printf("%s\n", err);
        continue;
      }
      dsTrainerDef td = ds_default_trainer_def();
      rc = ds_trainer_def_from_text(path, text, &td, err, sizeof err);
      CHECK_INT_EQ(rc, 0);
      if (rc) printf("%s\n", err);
      dsTrainerDef want = ctrl_def(names[k]);
      CHECK_INT_EQ(td.optim.kind, want.optim.kind);
      CHECK_CLOSE(td.optim.lr, want.optim.lr, 1e-15, 0);
      CHECK_INT_EQ(td.optim.decay_every, want.optim.decay_every);
      CHECK_CLOSE(td.optim.decay_factor, want.optim.decay_factor, 1e-15, 0);
      CHECK_CLOSE(td.optim.clip_norm, want.optim.clip_norm, 1e-15, 0);
      if (td.optim.kind == DS_OPTIM_SGD) CHECK_CLOSE(td.optim.momentum, want.optim.momentum, 1e-15, 0);
      CHECK_INT_EQ(td.net.phases, want.net.phases);
      CHECK_INT_EQ(td.net.harmonics, want.net.harmonics);
      CHECK_INT_EQ(td.net.bias, want.net.bias);
      CHECK_CLOSE(td.optim.beta1, want.optim.beta1, 1e-15, 0);
      CHECK_CLOSE(td.net.omega, want.net.omega, 1e-15, 0);
      CHECK_CLOSE(td.net.phase_step, want.net.phase_step, 1e-15, 0);
      CHECK_CLOSE(td.net.strength, want.net.strength, 1e-15, 0);
      CHECK_CLOSE(td.net.init_scale, want.net.init_scale, 1e-15, 0);
      CHECK_CLOSE(td.lr_loss_power, want.lr_loss_power, 1e-15, 0);
      CHECK_CLOSE(td.reject, want.reject, 1e-15, 0);
      for (int i = 0; i < 3; i++) CHECK(td.const_init[i] == want.const_init[i]);
      ds_config_free_text(text);
    }
  }
}

int main(void) {
  if (DS_SINGLE) { /* actions are float: finite differences would measure rounding */
    printf("single precision: gradient checks skipped (they need double)\n");
    test_recorder_and_baselines();
    test_cloth_sizes();
    test_config_schedule();
    return DST_RESULT();
  }
  test_sinnet_grad();
  test_sinnet_harmonics();
  test_reject();
  test_lr_loss_power();
  trainer_grad_case("walker image loss dL/dW", "walker", 128, 16, DS_METHOD_IMAGE, 1e-6, 1e-5, 1e-6, 4);
  trainer_grad_case("walker-springs state loss dL/dW", "walker-springs", 128, 16, DS_METHOD_STATE, 1e-6, 1e-5,
                    1e-6, 4);
  trainer_grad_case("cloth image loss dL/dv0", "control-cloth", 60, 20, DS_METHOD_IMAGE, 1e-6, 1e-5, 1e-6, 4);
  test_recorder_and_baselines();
  test_cloth_sizes();
  test_backtracking();
  test_config_schedule();
  return DST_RESULT();
}

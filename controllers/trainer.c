/* Whole-episode optimisation, receding-horizon MPC and the baselines (random
 * parameters, 3-D state loss, CEM) over the public env API. The methods and
 * their costs are described in dsim/controller.h.
 *
 * Policy gradient. With actions a_k = pi(theta, t_k) and the env's
 * g_k = dL/da_k (ds_env_backward_loss / ds_env_backward_adjoints),
 * dL/dtheta = sum_k (da_k/dtheta)^T g_k: the sinusoid network's backward per
 * step (dsim/controller.h), or for the CONSTANT policy sum_k g_k.
 *
 * State loss. L = |c_T - target|^2 with c_T the COM observation (first three
 * values) of the last step taken, so its only adjoint is
 * dL/dobs_{last}[0..2] = 2 (c_T - target). */
#include "config.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#ifdef _OPENMP
#  include <omp.h>
#endif

#include "base/rng.h"
#include "dsim/batch.h"
#include "dsim/controller.h"
#include "base/internal.h"

struct dsTrainer {
  dsEnv* env;
  dsTrainerDef def;
  dsErrBuf eb;
  int S, A, odim, ssz, cap_ssz, policy, np, iter;
  double step_dt;   /* C dt, s */
  double init_b;    /* half-width of the parameter init draw */
  dsSinNet* net;    /* SINNET */
  double* theta;    /* np: parameters evaluated next (the net's W for SINNET) */
  double* own;      /* CONSTANT storage of theta */
  double* eval;     /* np: parameters that produced the last episode */
  double* grad;     /* np */
  double* prev;     /* np: parameters before the last optimiser step (IMAGE, STATE) */
  int have_prev;
  double* best;     /* np: parameters of the lowest loss so far (reject) */
  double* best_grad; /* np: their gradient */
  double best_loss;
  int have_best;
  double first_loss; /* loss of the first whole episode (lr_loss_power) */
  int have_first;
  dsOptim* opt;
  dsReal* act;      /* S x A executed actions */
  dsReal* gact;     /* S x A d(loss)/d(actions) */
  dsReal* obs;      /* S x odim observations (STATE) */
  dsReal* adj;      /* S x odim observation adjoints (STATE) */
  dsReal* state;    /* ssz: MPC window start */
  /* CEM */
  double *mu, *sd, *samples, *losses;
  int* order;
  dsRng rng;
  /* CEM by generation: the K samples drawn and run when a generation
     starts, each iteration then reports one. pool[0] is env; pool[1..] are
     forward-only copies, one per further thread. */
  dsEnv** pool;
  int npool;
  /* CEM on the batched engine (a GPU): the K samples as one lockstep batch
     of forward-only envs, instances of one engine; its scratch */
  dsBatch* cem_batch;
  dsReal* cem_step_act; /* K x A: one step's actions */
  int* cem_status;
  uint64_t* cem_seeds;
  double* gen_theta;  /* K x np */
  dsReal* gen_act;    /* K x S x A */
  double *gen_loss, *gen_metric;
  int* gen_rc;
  char (*gen_msg)[256];
  int gen_start;      /* iteration the cached generation starts at (-1: none) */
};

static const char* const g_methods[] = {"image", "state", "random", "cem"};

const char* ds_method_name(int method) { return method >= 0 && method < 4 ? g_methods[method] : NULL; }

int ds_method_parse(const char* name) {
  if (!name) return DS_ERR_INVALID;
  for (int i = 0; i < 4; i++)
    if (!strcmp(name, g_methods[i])) return i;
  return DS_ERR_NOTFOUND;
}

dsTrainerDef ds_default_trainer_def(void) {
  dsTrainerDef t;
  memset(&t, 0, sizeof t);
  t.method = DS_METHOD_IMAGE;
  t.policy = DS_POLICY_AUTO;
  t.net = ds_default_sinnet_def();
  t.optim = ds_default_optim_def(DS_OPTIM_ADAM);
  t.mpc_inner = 1;
  t.cem_population = 8;
  t.cem_elite = 2;
  t.cem_min_std = 1e-3;
  t.max_backtracks = 6;
  return t;
}

#define T(f) offsetof(dsTrainerDef, f)
static const dsConfigKey g_trainer_keys[] = {
    {"policy", DS_KEY_ENUM, T(policy), 0, 0, "auto|sinnet|constant", 0,
     "sinusoid network, or one constant action (auto: constant for an initial action)"},
    {"phases", DS_KEY_INT, T(net.phases), 1, 1024, NULL, 0, "sinusoid phases P per harmonic"},
    {"harmonics", DS_KEY_INT, T(net.harmonics), 1, 64, NULL, 0,
     "frequencies omega, 2 omega, ..., H omega (1: gradSim's single frequency)"},
    {"bias", DS_KEY_BOOL, T(net.bias), 0, 1, NULL, 0, "a constant input: a learned offset per action"},
    {"omega", DS_KEY_DOUBLE, T(net.omega), 0, 1e6, NULL, 0, "base angular frequency, rad/s"},
    {"phase_step", DS_KEY_DOUBLE, T(net.phase_step), -100, 100, NULL, 0, "phase offset between inputs, rad"},
    {"strength", DS_KEY_DOUBLE, T(net.strength), 0, 1e6, NULL, 0, "output scale"},
    {"init_scale", DS_KEY_DOUBLE, T(net.init_scale), 0, 1e6, NULL, 0, "weight init half-width (0: 1/sqrt(P))"},
    {"initial_action", DS_KEY_DVEC3, T(const_init), -1e6, 1e6, NULL, 0,
     "constant policy: initial action (first 3 values; control-cloth: velocity, m/s)"},
    {"random_scale", DS_KEY_DOUBLE, T(random_scale), 0, 1e6, NULL, 0,
     "random / constant draws: half-width (0: the init bound)"},
    {"optimizer", DS_KEY_ENUM, T(optim.kind), 0, 0, "adam|sgd", 0, "optimiser"},
    {"lr", DS_KEY_DOUBLE, T(optim.lr), 0, 1e6, NULL, 0, "learning rate"},
    {"beta1", DS_KEY_DOUBLE, T(optim.beta1), 0, 0.999999, NULL, 0, "Adam first-moment decay"},
    {"beta2", DS_KEY_DOUBLE, T(optim.beta2), 0, 0.999999999, NULL, 0, "Adam second-moment decay"},
    {"eps", DS_KEY_DOUBLE, T(optim.eps), 0, 1, NULL, 0, "Adam epsilon"},
    {"momentum", DS_KEY_DOUBLE, T(optim.momentum), 0, 0.999999, NULL, 0, "SGD heavy-ball momentum"},
    {"clip", DS_KEY_DOUBLE, T(optim.clip_norm), 0, 1e30, NULL, 0, "gradient-norm clipping (0: off)"},
    {"decay_every", DS_KEY_INT, T(optim.decay_every), 0, 100000000, NULL, 0,
     "step decay: multiply the learning rate by decay_factor every N iterations (0: off)"},
    {"decay_factor", DS_KEY_DOUBLE, T(optim.decay_factor), 1e-6, 1, NULL, 0, "step decay factor (multiplies the learning rate), [1e-6, 1]"},
    {"mpc", DS_KEY_BOOL, T(mpc), 0, 1, NULL, 0, "receding-horizon MPC (image or state method)"},
    {"horizon", DS_KEY_INT, T(mpc_horizon), 0, 100000000, NULL, 0, "MPC window, control steps (0: a quarter)"},
    {"execute", DS_KEY_INT, T(mpc_execute), 0, 100000000, NULL, 0, "MPC steps executed per window (0: half)"},
    {"inner", DS_KEY_INT, T(mpc_inner), 1, 1000000, NULL, 0, "MPC optimiser steps per window"},
    {"population", DS_KEY_INT, T(cem_population), 2, 1000000, NULL, 0, "CEM samples per generation"},
    {"elite", DS_KEY_INT, T(cem_elite), 1, 1000000, NULL, 0, "CEM elites per generation"},
    {"cem_init_std", DS_KEY_DOUBLE, T(cem_init_std), 0, 1e6, NULL, 0, "CEM initial std (0: the init bound)"},
    {"cem_min_std", DS_KEY_DOUBLE, T(cem_min_std), 0, 1e6, NULL, 0, "CEM std floor"},
    {"max_backtracks", DS_KEY_INT, T(max_backtracks), 0, 60, NULL, 0,
     "halvings of a step whose rollout diverged"},
    {"reject", DS_KEY_DOUBLE, T(reject), 0, 0.999999, NULL, 0,
     "0: off; f in (0, 1): a step whose loss exceeds the lowest so far is rejected, the learning rate "
     "multiplied by f and the next step taken from the best parameters"},
    {"lr_loss_power", DS_KEY_DOUBLE, T(lr_loss_power), 0, 10, NULL, 0,
     "0: off; p > 0: each step's learning rate is multiplied by min(1, (loss / first loss)^p), the loss "
     "of the parameters the step starts from (whole episode)"},
    {NULL, DS_KEY_REAL, 0, 0, 0, NULL, 0, NULL}};
#undef T

const dsConfigKey* ds_trainer_keys(void) { return g_trainer_keys; }

/* Every key's range is the key table's (the same check as a config file's);
 * here only the method and what the ranges cannot express. */
int ds_trainer_def_validate(const dsTrainerDef* def, char* err, size_t errlen) {
  if (!def) return ds__puterr(err, errlen, DS_ERR_INVALID, "trainer: NULL definition");
  char msg[512];
  if (ds_config_check("trainer", "controller", g_trainer_keys, def, sizeof *def, msg, sizeof msg))
    return ds__puterr(err, errlen, DS_ERR_RANGE, "%s", !strncmp(msg, "trainer: ", 9) ? msg + 9 : msg);
  if (def->method < 0 || def->method > DS_METHOD_CEM)
    return ds__puterr(err, errlen, DS_ERR_RANGE, "run.method: unknown method %d", def->method);
  if (def->mpc && def->method != DS_METHOD_IMAGE && def->method != DS_METHOD_STATE)
    return ds__puterr(err, errlen, DS_ERR_INVALID, "controller.mpc: MPC needs a gradient method (image or state), not %s",
                      ds_method_name(def->method));
  if (def->method == DS_METHOD_CEM && def->cem_elite > def->cem_population)
    return ds__puterr(err, errlen, DS_ERR_RANGE, "controller.elite: %d exceeds controller.population %d",
                      def->cem_elite, def->cem_population);
  if (!(def->optim.decay_factor >= 1e-6 && def->optim.decay_factor <= 1)) /* the key table's range */
    return ds__puterr(err, errlen, DS_ERR_RANGE, "controller.decay_factor: expected a number in [1e-06, 1], got %g",
                      def->optim.decay_factor);
  return 0;
}

int ds_trainer_def_from_text(const char* name, const char* text, dsTrainerDef* def, char* err, size_t errlen) {
  if (!def) return ds__puterr(err, errlen, DS_ERR_INVALID, "trainer: NULL definition");
  dsTrainerDef t = *def;
  int rc = ds_config_parse_section(name, text, "controller", g_trainer_keys, &t, sizeof t, err, errlen);
  if (rc) return rc;
  char msg[512];
  rc = ds_trainer_def_validate(&t, msg, sizeof msg);
  if (rc) return ds__puterr(err, errlen, DS_ERR_CONFIG, "%s: %s", name, msg);
  *def = t;
  return 0;
}

dsRunDef ds_default_run_def(void) {
  dsRunDef r;
  memset(&r, 0, sizeof r);
  r.seed = 0;
  r.iterations = 40;
  r.method = DS_METHOD_IMAGE;
  r.threads = 0;
  strcpy(r.device, "cpu");
  return r;
}

#define R(f) offsetof(dsRunDef, f)
static const dsConfigKey g_run_keys[] = {
    {"seed", DS_KEY_U64, R(seed), 0, 2147483647.0, NULL, 0, "goal and controller seed"},
    {"iterations", DS_KEY_INT, R(iterations), 1, 100000000, NULL, 0, "optimisation iterations, one rollout each"},
    {"method", DS_KEY_ENUM, R(method), 0, 0, "image|state|random|cem", 0,
     "image: the env's loss; state: 3-D centre-of-mass loss; random; cem"},
    {"threads", DS_KEY_INT, R(threads), 0, 4096, NULL, 0, "OpenMP threads (0: OMP_NUM_THREADS or all cores)"},
    {"device", DS_KEY_STRING, R(device), 0, 16, NULL, 0,
     "where the physics runs: cpu, cuda or cuda:N (envs: cpu only so far)"},
    {"out", DS_KEY_STRING, R(out), 0, DS_RUN_OUT_MAX, NULL, 0,
     "run log (\"\": runs/ENV-METHOD[-mpc]-sSEED.h5)"},
    {NULL, DS_KEY_REAL, 0, 0, 0, NULL, 0, NULL}};
#undef R

const dsConfigKey* ds_run_keys(void) { return g_run_keys; }

int ds_run_def_from_text(const char* name, const char* text, dsRunDef* def, char* err, size_t errlen) {
  if (!def) return ds__puterr(err, errlen, DS_ERR_INVALID, "run: NULL definition");
  return ds_config_parse_section(name, text, "run", g_run_keys, def, sizeof *def, err, errlen);
}

void ds_trainer_destroy(dsTrainer* tr) {
  if (!tr) return;
  ds_sinnet_destroy(tr->net);
  ds_optim_destroy(tr->opt);
  ds__free(tr->own);
  ds__free(tr->eval);
  ds__free(tr->grad);
  ds__free(tr->prev);
  ds__free(tr->best);
  ds__free(tr->best_grad);
  ds__free(tr->act);
  ds__free(tr->gact);
  ds__free(tr->obs);
  ds__free(tr->adj);
  ds__free(tr->state);
  ds__free(tr->mu);
  ds__free(tr->sd);
  ds__free(tr->samples);
  ds__free(tr->losses);
  ds__free(tr->order);
  for (int j = 1; j < tr->npool; j++) ds_env_destroy(tr->pool[j]);
  ds__free(tr->pool);
  ds_batch_destroy(tr->cem_batch);
  ds__free(tr->cem_step_act);
  ds__free(tr->cem_status);
  ds__free(tr->cem_seeds);
  ds__free(tr->gen_theta);
  ds__free(tr->gen_act);
  ds__free(tr->gen_loss);
  ds__free(tr->gen_metric);
  ds__free(tr->gen_rc);
  ds__free(tr->gen_msg);
  ds__free(tr);
}

const char* ds_trainer_last_error(const dsTrainer* tr) { return tr ? ds__errmsg(&tr->eb) : ""; }
int ds_trainer_num_params(const dsTrainer* tr) { return tr ? tr->np : 0; }
double* ds_trainer_params(dsTrainer* tr) { return tr ? tr->theta : NULL; }

static void draw_params(dsTrainer* tr, double* x) {
  if (tr->policy == DS_POLICY_SINNET) {
    for (int i = 0; i < tr->np; i++) x[i] = tr->init_b * (2.0 * ds__rng_uniform(&tr->rng) - 1.0);
  } else {
    for (int i = 0; i < tr->np; i++)
      x[i] = (i < 3 ? tr->def.const_init[i] : 0.0) + tr->init_b * (2.0 * ds__rng_uniform(&tr->rng) - 1.0);
  }
}

/* CEM's environments: env itself, and a forward-only copy (its
 * definition, gradients off, its current parameters) for each further
 * thread, up to one per sample. A copy's episode is bit for bit the env's
 * (the forward does not depend on the tape), so a generation's results do
 * not depend on how many there are. */
static int make_pool(dsTrainer* tr, int K, char* err, size_t errlen) {
  int P = ds_get_max_threads();
  if (P > K) P = K;
  if (P < 1) P = 1;
  tr->pool = (dsEnv**)ds__calloc((size_t)P, sizeof(dsEnv*));
  if (!tr->pool) return ds__puterr(err, errlen, DS_ERR_NOMEM, "trainer: out of memory (CEM environments)");
  tr->pool[0] = tr->env;
  tr->npool = 1;
  dsEnvDef d = *ds_env_def(tr->env);
  d.gradients = 0;
  for (int j = 1; j < P; j++) {
    dsEnv* e = NULL;
    char why[512];
    int rc = ds_env_create(&d, &e, why, sizeof why);
    if (!rc && (rc = ds_env_copy_params(e, tr->env))) snprintf(why, sizeof why, "%s", ds_env_last_error(e));
    if (rc) {
      ds_env_destroy(e);
      return ds__puterr(err, errlen, rc, "trainer: CEM: a copy of the env for thread %d: %s", j, why);
    }
    tr->pool[tr->npool++] = e;
  }
  return DS_OK;
}

/* On the batched engine (env on a GPU, or dsEnvDef.batch_engine): the K
 * samples' episodes as one lockstep batch of forward-only envs with env's
 * parameters, all instances of one engine. Their results are the env's bit
 * for bit on the CPU backend (the engine's substeps are the serial
 * engine's), so a generation does not depend on where it runs but for the
 * device's rounding. */
static int make_cem_batch(dsTrainer* tr, int K, char* err, size_t errlen) {
  dsEnvDef d = *ds_env_def(tr->env);
  d.gradients = 0;
  char why[512];
  int rc = ds_batch_create_lockstep(&d, K, &tr->cem_batch, why, sizeof why);
  for (int g = 0; g < K && !rc; g++) {
    dsEnv* e = ds_batch_env(tr->cem_batch, g);
    if ((rc = ds_env_copy_params(e, tr->env))) snprintf(why, sizeof why, "%s", ds_env_last_error(e));
  }
  if (rc) return ds__puterr(err, errlen, rc, "trainer: CEM: a batch of %d envs: %s", K, why);
  tr->cem_step_act = (dsReal*)ds__calloc((size_t)K * (size_t)(tr->A > 0 ? tr->A : 1), sizeof(dsReal));
  tr->cem_status = (int*)ds__calloc((size_t)K, sizeof(int));
  tr->cem_seeds = (uint64_t*)ds__calloc((size_t)K, sizeof(uint64_t));
  if (!tr->cem_step_act || !tr->cem_status || !tr->cem_seeds) return ds__puterr(err, errlen, DS_ERR_NOMEM, "trainer: out of memory (CEM)");
  return DS_OK;
}

/* What the definition asks of the env: gradients, actions, observations. */
static int check_env(dsEnv* env, const dsTrainerDef* def, char* err, size_t errlen) {
  const dsEnvDef* ed = ds_env_def(env);
  if ((def->method == DS_METHOD_IMAGE || def->method == DS_METHOD_STATE) && !ed->gradients)
    return ds__puterr(err, errlen, DS_ERR_INVALID,
                      "trainer: method %s needs gradients, but the env is forward only (env.physics.gradients "
                      "false); use random or cem, or set it true",
                      ds_method_name(def->method));
  if (ds_env_action_size(env) == 0)
    return ds__puterr(err, errlen, DS_ERR_INVALID,
                      "trainer: %s has no actions, so there is no controller to optimise; identify its parameters "
                      "from a video with dsim sysid instead (e.g. a bundled sysid-*.json config)",
                      ds_env_name(env));
  if (def->method == DS_METHOD_STATE && ds_env_obs_size(env) != 6)
    return ds__puterr(err, errlen, DS_ERR_INVALID,
                      "trainer: the state loss needs the centre-of-mass observation (env.observation.state \"com\", "
                      "got an observation of %d values; e.g. --set env.observation.state=com)",
                      ds_env_obs_size(env));
  return DS_OK;
}

int ds_trainer_create(dsEnv* env, const dsTrainerDef* def, dsTrainer** out, char* err, size_t errlen) {
  if (!env || !def || !out) return ds__puterr(err, errlen, DS_ERR_INVALID, "trainer: NULL argument");
  *out = NULL;
  const dsEnvDef* ed = ds_env_def(env);
  char msg[512];
  int vrc = ds_trainer_def_validate(def, msg, sizeof msg);
  if (vrc) return ds__puterr(err, errlen, vrc, "trainer: %s", msg);
  if ((vrc = check_env(env, def, err, errlen))) return vrc;
  dsTrainer* tr = (dsTrainer*)ds__calloc(1, sizeof *tr);
  if (!tr) return ds__puterr(err, errlen, DS_ERR_NOMEM, "trainer: out of memory");
  tr->env = env;
  tr->def = *def;
  tr->gen_start = -1;
  tr->S = ds_env_num_steps(env);
  tr->A = ds_env_action_size(env);
  tr->odim = ds_env_obs_size(env);
  tr->ssz = ds_env_state_size(env);
  tr->step_dt = (double)ed->control_interval * (double)ed->dt;
  tr->policy = def->policy;
  if (tr->policy == DS_POLICY_AUTO)
    tr->policy = ds_env_action_kind(env) == DS_ACTION_INITIAL ? DS_POLICY_CONSTANT : DS_POLICY_SINNET;
  if (tr->def.mpc) {
    if (tr->def.mpc_horizon <= 0) tr->def.mpc_horizon = (tr->S + 3) / 4;
    if (tr->def.mpc_horizon > tr->S) tr->def.mpc_horizon = tr->S;
    if (tr->def.mpc_execute <= 0) tr->def.mpc_execute = (tr->def.mpc_horizon + 1) / 2;
    if (tr->def.mpc_execute > tr->def.mpc_horizon) tr->def.mpc_execute = tr->def.mpc_horizon;
  }
  ds__rng_seed(&tr->rng, def->seed ^ 0x5eedc0de12345678ull);
  int rc = DS_OK;
  if (tr->policy == DS_POLICY_SINNET) {
    dsSinNetDef nd = def->net;
    nd.outputs = tr->A;
    rc = ds_sinnet_create(&nd, &tr->net);
    if (rc) {
      ds_trainer_destroy(tr);
      return ds__puterr(err, errlen, rc, "trainer: bad sinusoid network (phases %d, outputs %d): %s", nd.phases,
                        nd.outputs, ds_strerror(rc));
    }
    tr->np = ds_sinnet_num_params(tr->net);
    tr->theta = ds_sinnet_params(tr->net);
    tr->init_b = nd.init_scale > 0 ? nd.init_scale : 1.0 / sqrt((double)(tr->np / tr->A));
    if (def->method == DS_METHOD_RANDOM && def->random_scale > 0) tr->init_b = def->random_scale;
  } else {
    tr->np = tr->A;
    tr->own = (double*)ds__calloc((size_t)tr->np, sizeof(double));
    tr->theta = tr->own;
    if (tr->own)
      for (int i = 0; i < tr->np && i < 3; i++) tr->own[i] = def->const_init[i];
    tr->init_b = def->random_scale > 0 ? def->random_scale : 1.0;
  }
  const size_t SA = (size_t)tr->S * (size_t)tr->A, SO = (size_t)tr->S * (size_t)(tr->odim > 0 ? tr->odim : 1);
  tr->eval = (double*)ds__calloc((size_t)tr->np, sizeof(double));
  tr->grad = (double*)ds__calloc((size_t)tr->np, sizeof(double));
  tr->prev = (double*)ds__calloc((size_t)tr->np, sizeof(double));
  tr->best = (double*)ds__calloc((size_t)tr->np, sizeof(double));
  tr->best_grad = (double*)ds__calloc((size_t)tr->np, sizeof(double));
  tr->act = (dsReal*)ds__calloc(SA, sizeof(dsReal));
  tr->gact = (dsReal*)ds__calloc(SA, sizeof(dsReal));
  tr->obs = (dsReal*)ds__calloc(SO, sizeof(dsReal));
  tr->adj = (dsReal*)ds__calloc(SO, sizeof(dsReal));
  tr->state = (dsReal*)ds__calloc((size_t)tr->ssz, sizeof(dsReal));
  tr->cap_ssz = tr->ssz;
  int ok = tr->theta && tr->eval && tr->grad && tr->prev && tr->best && tr->best_grad && tr->act && tr->gact && tr->obs && tr->adj && tr->state;
  if (ok && def->method == DS_METHOD_CEM) {
    const size_t K = (size_t)def->cem_population;
    tr->mu = (double*)ds__calloc((size_t)tr->np, sizeof(double));
    tr->sd = (double*)ds__calloc((size_t)tr->np, sizeof(double));
    tr->samples = (double*)ds__calloc(K * (size_t)tr->np, sizeof(double));
    tr->losses = (double*)ds__calloc(K, sizeof(double));
    tr->order = (int*)ds__calloc(K, sizeof(int));
    tr->gen_theta = (double*)ds__calloc(K * (size_t)tr->np, sizeof(double));
    tr->gen_act = (dsReal*)ds__calloc(K * SA, sizeof(dsReal));
    tr->gen_loss = (double*)ds__calloc(K, sizeof(double));
    tr->gen_metric = (double*)ds__calloc(K, sizeof(double));
    tr->gen_rc = (int*)ds__calloc(K, sizeof(int));
    tr->gen_msg = (char(*)[256])ds__calloc(K, 256);
    ok = tr->mu && tr->sd && tr->samples && tr->losses && tr->order && tr->gen_theta && tr->gen_act && tr->gen_loss &&
         tr->gen_metric && tr->gen_rc && tr->gen_msg;
    const dsEnvDef* d = ds_env_def(env);
    if (ok) rc = d->device.kind == DS_DEVICE_CUDA || d->batch_engine ? make_cem_batch(tr, (int)K, err, errlen)
                                                                     : make_pool(tr, (int)K, err, errlen);
    if (ok && rc) {
      ds_trainer_destroy(tr);
      return rc;
    }
    if (ok) {
      const double s0 = def->cem_init_std > 0 ? def->cem_init_std : tr->init_b;
      memcpy(tr->mu, tr->theta, sizeof(double) * (size_t)tr->np);
      for (int i = 0; i < tr->np; i++) tr->sd[i] = s0;
    }
  }
  if (ok && (def->method == DS_METHOD_IMAGE || def->method == DS_METHOD_STATE)) {
    rc = ds_optim_create(&def->optim, tr->np, &tr->opt);
    if (rc) {
      ds_trainer_destroy(tr);
      return ds__puterr(err, errlen, rc, "trainer: bad optimiser settings (lr %g): %s", def->optim.lr,
                        ds_strerror(rc));
    }
  }
  if (!ok) {
    ds_trainer_destroy(tr);
    return ds__puterr(err, errlen, DS_ERR_NOMEM, "trainer: out of memory (%d parameters, %d x %d actions)", tr->np,
                      tr->S, tr->A);
  }
  *out = tr;
  return DS_OK;
}

static int env_fail(dsTrainer* tr, int rc, const char* what, int k) {
  return ds__seterr(&tr->eb, rc, "%s (step %d): %s", what, k, ds_env_last_error(tr->env));
}

/* action of step k from theta */
static void policy_action(dsTrainer* tr, int k, dsReal* a) {
  if (tr->policy == DS_POLICY_SINNET)
    ds_sinnet_forward(tr->net, (double)k * tr->step_dt, a);
  else
    for (int i = 0; i < tr->A; i++) a[i] = (dsReal)tr->theta[i];
}

/* grad (overwritten) = sum_{k0 <= k < k1} (da_k/dtheta)^T gact_k */
static void policy_backward(dsTrainer* tr, int k0, int k1) {
  memset(tr->grad, 0, sizeof(double) * (size_t)tr->np);
  for (int k = k0; k < k1; k++) {
    const dsReal* g = tr->gact + (size_t)k * (size_t)tr->A;
    if (tr->policy == DS_POLICY_SINNET)
      ds_sinnet_backward(tr->net, (double)k * tr->step_dt, g, tr->grad);
    else
      for (int i = 0; i < tr->A; i++) tr->grad[i] += (double)g[i];
  }
}

/* steps k0 .. k1-1 from the env's current state with the policy's actions */
static int run_steps(dsTrainer* tr, int k0, int k1) {
  for (int k = k0; k < k1; k++) {
    dsReal* a = tr->act + (size_t)k * (size_t)tr->A;
    policy_action(tr, k, a);
    int done = 0;
    int rc = ds_env_step(tr->env, a, tr->odim > 0 ? tr->obs + (size_t)k * (size_t)tr->odim : NULL, NULL, NULL, &done);
    if (rc) return env_fail(tr, rc, "env step", k);
  }
  return DS_OK;
}

/* |c - target|^2 of the COM observation of step k; with adj, its adjoint
 * (rows 0..k zeroed, row k set) */
static int state_loss(dsTrainer* tr, int k, double* loss, int adjoint) {
  dsReal tg[3];
  int rc = ds_env_target(tr->env, tg);
  if (rc) return env_fail(tr, rc, "env target", k);
  const dsReal* c = tr->obs + (size_t)k * (size_t)tr->odim;
  double l = 0;
  if (adjoint) memset(tr->adj, 0, sizeof(dsReal) * (size_t)(k + 1) * (size_t)tr->odim);
  for (int j = 0; j < 3; j++) {
    const double e = (double)c[j] - (double)tg[j];
    l += e * e;
    if (adjoint) tr->adj[(size_t)k * (size_t)tr->odim + (size_t)j] = (dsReal)(2.0 * e);
  }
  *loss = l;
  return DS_OK;
}

/* loss of the steps taken so far (k1 of them) and, with grad, d/d(actions)
 * of steps first.. (the backward stops at the start of step first) */
static int episode_loss(dsTrainer* tr, int k1, double* loss, int grad, int first) {
  int rc;
  if (tr->def.method == DS_METHOD_STATE) {
    rc = state_loss(tr, k1 - 1, loss, grad);
    if (rc) return rc;
    if (grad && (rc = ds_env_backward_adjoints_from(tr->env, first, tr->adj, NULL, NULL, tr->gact)))
      return env_fail(tr, rc, "env backward", k1);
    return DS_OK;
  }
  dsReal l = 0;
  rc = grad ? ds_env_backward_loss_from(tr->env, first, &l, tr->gact) : ds_env_loss(tr->env, &l);
  if (rc) return env_fail(tr, rc, grad ? "env backward" : "env loss", k1);
  *loss = (double)l;
  return DS_OK;
}

static int reset_env(dsTrainer* tr) {
  int rc = ds_env_reset(tr->env, tr->def.env_seed, NULL, NULL);
  return rc ? env_fail(tr, rc, "env reset", 0) : DS_OK;
}

static int metric(dsTrainer* tr, double* m) {
  dsReal v = 0;
  int rc = ds_env_metric(tr->env, &v);
  if (rc) return env_fail(tr, rc, "env metric", tr->S);
  *m = (double)v;
  return DS_OK;
}

/* one whole-episode rollout of theta: loss, metric, gradient (grad methods) */
static int whole_episode(dsTrainer* tr, dsTrainerIter* it, int grad) {
  int rc = reset_env(tr);
  if (!rc) rc = run_steps(tr, 0, tr->S);
  if (!rc) rc = episode_loss(tr, tr->S, &it->loss, grad, 0);
  if (!rc) rc = metric(tr, &it->metric);
  if (!rc && grad) policy_backward(tr, 0, tr->S);
  return rc;
}

static int mpc_pass(dsTrainer* tr, dsTrainerIter* it) {
  const int S = tr->S, H = tr->def.mpc_horizon, E = tr->def.mpc_execute;
  int rc = reset_env(tr);
  const int ssz = ds_env_state_size(tr->env);
  if (!rc && ssz > tr->cap_ssz) { /* control-cloth: the seed drew a larger sheet (once per seed) */
    dsReal* st = (dsReal*)ds__realloc(tr->state, (size_t)ssz * sizeof(dsReal));
    if (!st) return ds__seterr(&tr->eb, DS_ERR_NOMEM, "MPC: out of memory for a state of %d values", ssz);
    tr->state = st;
    tr->cap_ssz = ssz;
  }
  tr->ssz = ssz;
  double gn = 0, gsum = 0;
  int nopt = 0;
  for (int j = 0; !rc && j < S;) {
    rc = ds_env_get_state(tr->env, tr->state, tr->ssz);
    if (rc) return env_fail(tr, rc, "env get_state", j);
    const int hend = j + H < S ? j + H : S;
    for (int m = 0; !rc && m < tr->def.mpc_inner; m++) {
      if ((rc = ds_env_set_state(tr->env, tr->state, tr->ssz))) return env_fail(tr, rc, "env set_state", j);
      double wl;
      if ((rc = run_steps(tr, j, hend))) return rc;
      if ((rc = episode_loss(tr, hend, &wl, 1, j))) return rc;
      policy_backward(tr, j, hend);
      it->lr = ds_optim_lr(tr->opt);
      if ((rc = ds_optim_step(tr->opt, tr->theta, tr->grad, &gn)))
        return ds__seterr(&tr->eb, rc, "optimiser: gradient not finite (window at step %d)", j);
      gsum += gn;
      nopt++;
    }
    if ((rc = ds_env_set_state(tr->env, tr->state, tr->ssz))) return env_fail(tr, rc, "env set_state", j);
    const int eend = j + E < S ? j + E : S;
    if ((rc = run_steps(tr, j, eend))) return rc;
    j = eend;
  }
  if (!rc) rc = episode_loss(tr, S, &it->loss, 0, 0);
  if (!rc) rc = metric(tr, &it->metric);
  it->grad_norm = nopt ? gsum / nopt : 0;
  memcpy(tr->eval, tr->theta, sizeof(double) * (size_t)tr->np);
  return rc;
}

static void cem_update(dsTrainer* tr) {
  const int K = tr->def.cem_population, ne = tr->def.cem_elite, np = tr->np;
  for (int i = 0; i < K; i++) tr->order[i] = i;
  for (int i = 1; i < K; i++) { /* insertion sort by loss; ties keep sample order */
    int v = tr->order[i], j = i - 1;
    while (j >= 0 && tr->losses[tr->order[j]] > tr->losses[v]) {
      tr->order[j + 1] = tr->order[j];
      j--;
    }
    tr->order[j + 1] = v;
  }
  for (int q = 0; q < np; q++) {
    double m = 0, v = 0;
    for (int e = 0; e < ne; e++) m += tr->samples[(size_t)tr->order[e] * (size_t)np + (size_t)q];
    m /= ne;
    for (int e = 0; e < ne; e++) {
      const double d = tr->samples[(size_t)tr->order[e] * (size_t)np + (size_t)q] - m;
      v += d * d;
    }
    v /= ne;
    tr->mu[q] = m;
    tr->sd[q] = sqrt(v) > tr->def.cem_min_std ? sqrt(v) : tr->def.cem_min_std;
  }
}

/* One CEM sample's episode on env e with the actions act: loss and metric,
 * or an error with the message an iteration on the trainer's env gives. */
static int cem_episode(const dsTrainer* tr, dsEnv* e, const dsReal* act, double* loss, double* met, char* msg) {
  const char* what = "env reset";
  int k = 0, rc = ds_env_reset(e, tr->def.env_seed, NULL, NULL);
  while (!rc && k < tr->S) {
    what = "env step";
    rc = ds_env_step(e, act + (size_t)k * (size_t)tr->A, NULL, NULL, NULL, NULL);
    if (!rc) k++;
  }
  dsReal l = 0, m = 0;
  if (!rc) {
    what = "env loss";
    rc = ds_env_loss(e, &l);
  }
  if (!rc) {
    what = "env metric";
    rc = ds_env_metric(e, &m);
  }
  *loss = (double)l;
  *met = (double)m;
  if (rc) snprintf(msg, 256, "%s (step %d): %s", what, k, ds_env_last_error(e));
  return rc;
}

/* The K samples' episodes side by side in the lockstep batch: reset all
 * with the run's seed, step all, then each one's loss and metric (frames
 * rendered on the host, across threads), or the message cem_episode gives. */
static void cem_batch_generation(dsTrainer* tr) {
  const int K = tr->def.cem_population;
  const size_t SA = (size_t)tr->S * (size_t)tr->A, A = (size_t)tr->A;
  dsBatch* b = tr->cem_batch;
  int* st = tr->cem_status;
  for (int g = 0; g < K; g++) {
    tr->cem_seeds[g] = tr->def.env_seed;
    tr->gen_rc[g] = 0;
    tr->gen_loss[g] = tr->gen_metric[g] = 0;
  }
  if (ds_batch_reset(b, tr->cem_seeds, NULL, NULL, NULL, st)) {
    for (int g = 0; g < K; g++) {
      tr->gen_rc[g] = st[g] < 0 ? st[g] : DS_ERR_STATE;
      snprintf(tr->gen_msg[g], 256, "env reset (step 0): %s", ds_batch_last_error(b));
    }
    return;
  }
  for (int k = 0; k < tr->S; k++) {
    for (int g = 0; g < K; g++)
      if (A) memcpy(tr->cem_step_act + (size_t)g * A, tr->gen_act + (size_t)g * SA + (size_t)k * A, A * sizeof(dsReal));
    ds_batch_step(b, tr->cem_step_act, NULL, NULL, NULL, NULL, st, 0);
    for (int g = 0; g < K; g++)
      if (!tr->gen_rc[g] && st[g] < 0) {
        tr->gen_rc[g] = st[g];
        snprintf(tr->gen_msg[g], 256, "env step (step %d): %s", k, ds_env_last_error(ds_batch_env(b, g)));
      }
  }
#ifdef _OPENMP
  const int levels = omp_get_max_active_levels();
  if (K > 1) omp_set_max_active_levels(1);
#pragma omp parallel for schedule(dynamic, 1) if (K > 1)
#endif
  for (int g = 0; g < K; g++) {
    if (tr->gen_rc[g]) continue;
    dsEnv* e = ds_batch_env(b, g);
    dsReal l = 0, m = 0;
    const char* what = "env loss";
    int rc = ds_env_loss(e, &l);
    if (!rc) {
      what = "env metric";
      rc = ds_env_metric(e, &m);
    }
    tr->gen_loss[g] = (double)l;
    tr->gen_metric[g] = (double)m;
    tr->gen_rc[g] = rc;
    if (rc) snprintf(tr->gen_msg[g], 256, "%s (step %d): %s", what, tr->S, ds_env_last_error(e));
  }
#ifdef _OPENMP
  if (K > 1) omp_set_max_active_levels(levels);
#endif
}

/* A CEM generation (at its first iteration): the K samples drawn in
 * iteration order (the first of the run is the mean), their actions, and
 * their episodes, side by side on the pool's environments. */
static void cem_generation(dsTrainer* tr) {
  const int K = tr->def.cem_population, np = tr->np;
  const size_t SA = (size_t)tr->S * (size_t)tr->A;
  for (int g = 0; g < K; g++) {
    for (int q = 0; q < np; q++)
      tr->theta[q] = tr->iter + g == 0 ? tr->mu[q] : tr->mu[q] + tr->sd[q] * ds__rng_normal(&tr->rng);
    memcpy(tr->gen_theta + (size_t)g * (size_t)np, tr->theta, sizeof(double) * (size_t)np);
    for (int k = 0; k < tr->S; k++) policy_action(tr, k, tr->gen_act + (size_t)g * SA + (size_t)k * (size_t)tr->A);
  }
  memcpy(tr->theta, tr->mu, sizeof(double) * (size_t)np);
  if (tr->cem_batch) {
    cem_batch_generation(tr);
    return;
  }
  const int P = tr->npool;
#ifdef _OPENMP
  /* one thread per environment, nested regions inactive: each episode runs
   * on one thread, and its result does not depend on which */
  const int levels = omp_get_max_active_levels();
  if (P > 1) omp_set_max_active_levels(1);
#pragma omp parallel num_threads(P) if (P > 1)
#endif
  {
#ifdef _OPENMP
    const int j = omp_get_thread_num(), nt = omp_get_num_threads();
#else
    const int j = 0, nt = 1;
#endif
    for (int g = j; g < K; g += nt)
      tr->gen_rc[g] = cem_episode(tr, tr->pool[j], tr->gen_act + (size_t)g * SA, &tr->gen_loss[g],
                                  &tr->gen_metric[g], tr->gen_msg[g]);
  }
#ifdef _OPENMP
  if (P > 1) omp_set_max_active_levels(levels);
#endif
}

int ds_trainer_iterate(dsTrainer* tr, dsTrainerIter* it) {
  if (!tr || !it) return DS_ERR_INVALID;
  memset(it, 0, sizeof *it);
  it->iteration = tr->iter;
  int rc = DS_OK;
  const int np = tr->np;
  switch (tr->def.method) {
    case DS_METHOD_IMAGE:
    case DS_METHOD_STATE:
      if (tr->def.mpc) {
        rc = mpc_pass(tr, it);
        break;
      }
      memcpy(tr->eval, tr->theta, sizeof(double) * (size_t)np);
      rc = whole_episode(tr, it, 1);
      /* a step that made the rollout diverge or invert an element is halved
       * (towards the last parameters that ran) and the episode run again */
      while ((rc == DS_ERR_DIVERGED || rc == DS_ERR_INVERTED) && tr->have_prev &&
             it->backtracks < tr->def.max_backtracks) {
        for (int q = 0; q < np; q++) tr->theta[q] = tr->prev[q] + 0.5 * (tr->theta[q] - tr->prev[q]);
        memcpy(tr->eval, tr->theta, sizeof(double) * (size_t)np);
        it->backtracks++;
        rc = whole_episode(tr, it, 1);
      }
      if (!rc) {
        const double* g = tr->grad;
        if (tr->def.reject > 0) {
          if (!tr->have_best || it->loss <= tr->best_loss) {
            memcpy(tr->best, tr->theta, sizeof(double) * (size_t)np);
            memcpy(tr->best_grad, tr->grad, sizeof(double) * (size_t)np);
            tr->best_loss = it->loss;
            tr->have_best = 1;
          } else { /* overshoot: a shorter step from the best parameters */
            it->rejected = 1;
            ds_optim_scale_lr(tr->opt, tr->def.reject);
            memcpy(tr->theta, tr->best, sizeof(double) * (size_t)np);
            g = tr->best_grad;
          }
        }
        memcpy(tr->prev, tr->theta, sizeof(double) * (size_t)np);
        tr->have_prev = 1;
        if (tr->def.lr_loss_power > 0) { /* the step's rate from the loss where it starts */
          const double l = it->rejected ? tr->best_loss : it->loss;
          if (!tr->have_first) {
            tr->first_loss = l;
            tr->have_first = 1;
          }
          double f = 1;
          if (tr->first_loss > 0 && l >= 0 && l < tr->first_loss) f = pow(l / tr->first_loss, tr->def.lr_loss_power);
          if (!(f > 0) || !isfinite(f)) f = 1e-300; /* a zero loss: no step (f must stay > 0) */
          ds_optim_set_lr_scale(tr->opt, f);
        }
        it->lr = ds_optim_lr(tr->opt);
        double gn = 0;
        rc = ds_optim_step(tr->opt, tr->theta, g, &gn);
        if (it->rejected) { /* report the evaluated episode's gradient norm */
          gn = 0;
          for (int q = 0; q < np; q++) gn += tr->grad[q] * tr->grad[q];
          gn = sqrt(gn);
        }
        it->grad_norm = gn;
        if (rc) rc = ds__seterr(&tr->eb, rc, "optimiser: gradient not finite at iteration %d", tr->iter);
      }
      break;
    case DS_METHOD_RANDOM:
      if (tr->iter > 0) draw_params(tr, tr->theta);
      memcpy(tr->eval, tr->theta, sizeof(double) * (size_t)np);
      rc = whole_episode(tr, it, 0);
      break;
    case DS_METHOD_CEM: {
      const int K = tr->def.cem_population, g = tr->iter % K;
      const size_t SA = (size_t)tr->S * (size_t)tr->A;
      if (g == 0 && tr->gen_start != tr->iter) {
        if (tr->iter > 0) cem_update(tr);
        cem_generation(tr);
        tr->gen_start = tr->iter;
      }
      memcpy(tr->eval, tr->gen_theta + (size_t)g * (size_t)np, sizeof(double) * (size_t)np);
      memcpy(tr->act, tr->gen_act + (size_t)g * SA, SA * sizeof(dsReal));
      rc = tr->gen_rc[g];
      if (rc) {
        ds__seterr(&tr->eb, rc, "%s", tr->gen_msg[g]);
      } else {
        it->loss = tr->gen_loss[g];
        it->metric = tr->gen_metric[g];
        memcpy(tr->samples + (size_t)g * (size_t)np, tr->eval, sizeof(double) * (size_t)np);
        tr->losses[g] = it->loss;
      }
      /* the mean stays the current parameters between samples */
      break;
    }
    default:
      rc = DS_ERR_INVALID;
  }
  it->params = tr->eval;
  it->nparams = np;
  it->actions = tr->act;
  it->nsteps = tr->S;
  it->action_dim = tr->A;
  if (!rc) tr->iter++;
  return rc;
}

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
#include <string.h>

#include "base/rng.h"
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
};

static const char* const g_methods[] = {"image", "state", "random", "cem"};

const char* ds_method_name(int method) { return method >= 0 && method < 4 ? g_methods[method] : NULL; }

int ds_method_parse(const char* name) {
  if (!name) return -1;
  for (int i = 0; i < 4; i++)
    if (!strcmp(name, g_methods[i])) return i;
  return -1;
}

dsTrainerDef ds_default_trainer_def(const dsEnv* env) {
  dsTrainerDef t;
  memset(&t, 0, sizeof t);
  const dsEnvDef* d = env ? ds_env_def(env) : NULL;
  t.method = DS_METHOD_IMAGE;
  t.policy = DS_POLICY_AUTO;
  t.net = ds_default_sinnet_def();
  t.optim = ds_default_optim_def(DS_OPTIM_ADAM);
  if (d) {
    t.seed = (uint64_t)(d->seed >= 0 ? d->seed : 0);
    t.env_seed = t.seed;
    if (d->ctrl_phases > 0) t.net.phases = d->ctrl_phases;
    t.net.omega = (double)d->ctrl_omega;
    t.net.phase_step = (double)d->ctrl_phase_step;
    t.net.strength = (double)d->ctrl_strength;
    for (int i = 0; i < 3; i++) t.const_init[i] = (double)d->ctrl_init[i];
    t.optim = ds_default_optim_def(d->ctrl_optimizer == 1 ? DS_OPTIM_SGD : DS_OPTIM_ADAM);
    if (d->ctrl_lr > 0) t.optim.lr = (double)d->ctrl_lr;
    if (t.optim.kind == DS_OPTIM_SGD) t.optim.momentum = (double)d->ctrl_momentum;
    t.optim.clip_norm = (double)d->ctrl_clip;
    if (d->ctrl_decay_every > 0) {
      t.optim.decay_every = d->ctrl_decay_every;
      t.optim.decay_factor = (double)d->ctrl_decay_factor;
    }
  }
  t.net.seed = t.seed;
  t.mpc_inner = 1;
  t.cem_population = 8;
  t.cem_elite = 2;
  t.cem_min_std = 1e-3;
  t.max_backtracks = 6;
  return t;
}

void ds_trainer_destroy(dsTrainer* tr) {
  if (!tr) return;
  ds_sinnet_destroy(tr->net);
  ds_optim_destroy(tr->opt);
  ds__free(tr->own);
  ds__free(tr->eval);
  ds__free(tr->grad);
  ds__free(tr->prev);
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

int ds_trainer_create(dsEnv* env, const dsTrainerDef* def, dsTrainer** out, char* err, size_t errlen) {
  if (!env || !def || !out) return ds__puterr(err, errlen, DS_ERR_INVALID, "trainer: NULL argument");
  *out = NULL;
  const dsEnvDef* ed = ds_env_def(env);
  if (def->method < 0 || def->method > DS_METHOD_CEM)
    return ds__puterr(err, errlen, DS_ERR_RANGE, "trainer: unknown method %d", def->method);
  if (def->mpc && def->method != DS_METHOD_IMAGE && def->method != DS_METHOD_STATE)
    return ds__puterr(err, errlen, DS_ERR_INVALID, "trainer: MPC needs a gradient method (image or state), not %s",
                      ds_method_name(def->method));
  if (def->method == DS_METHOD_STATE && ds_env_obs_size(env) != 6)
    return ds__puterr(err, errlen, DS_ERR_INVALID,
                      "trainer: the state loss needs the centre-of-mass observation (observation.state \"com\")");
  if (def->mpc && (def->mpc_horizon < 0 || def->mpc_execute < 0 || def->mpc_inner < 1))
    return ds__puterr(err, errlen, DS_ERR_RANGE, "trainer: MPC horizon %d, execute %d (>= 0), inner %d (>= 1)",
                      def->mpc_horizon, def->mpc_execute, def->mpc_inner);
  if (def->max_backtracks < 0 || def->max_backtracks > 60)
    return ds__puterr(err, errlen, DS_ERR_RANGE, "trainer: max_backtracks %d (0..60)", def->max_backtracks);
  if (def->method == DS_METHOD_CEM &&
      (def->cem_population < 2 || def->cem_elite < 1 || def->cem_elite > def->cem_population ||
       !(def->cem_init_std >= 0) || !(def->cem_min_std >= 0)))
    return ds__puterr(err, errlen, DS_ERR_RANGE, "trainer: CEM population %d (>= 2), elite %d (1..population)",
                      def->cem_population, def->cem_elite);
  dsTrainer* tr = (dsTrainer*)ds__calloc(1, sizeof *tr);
  if (!tr) return ds__puterr(err, errlen, DS_ERR_NOMEM, "trainer: out of memory");
  tr->env = env;
  tr->def = *def;
  tr->S = ds_env_num_steps(env);
  tr->A = ds_env_action_size(env);
  tr->odim = ds_env_obs_size(env);
  tr->ssz = ds_env_state_size(env);
  tr->step_dt = (double)ed->control_interval * (double)ed->dt;
  tr->policy = def->policy;
  if (tr->policy == DS_POLICY_AUTO)
    tr->policy = ed->kind == DS_ENV_CONTROL_CLOTH ? DS_POLICY_CONSTANT : DS_POLICY_SINNET;
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
    tr->init_b = nd.init_scale > 0 ? nd.init_scale : 1.0 / sqrt((double)nd.phases);
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
  tr->act = (dsReal*)ds__calloc(SA, sizeof(dsReal));
  tr->gact = (dsReal*)ds__calloc(SA, sizeof(dsReal));
  tr->obs = (dsReal*)ds__calloc(SO, sizeof(dsReal));
  tr->adj = (dsReal*)ds__calloc(SO, sizeof(dsReal));
  tr->state = (dsReal*)ds__calloc((size_t)tr->ssz, sizeof(dsReal));
  tr->cap_ssz = tr->ssz;
  int ok = tr->theta && tr->eval && tr->grad && tr->prev && tr->act && tr->gact && tr->obs && tr->adj && tr->state;
  if (ok && def->method == DS_METHOD_CEM) {
    const size_t K = (size_t)def->cem_population;
    tr->mu = (double*)ds__calloc((size_t)tr->np, sizeof(double));
    tr->sd = (double*)ds__calloc((size_t)tr->np, sizeof(double));
    tr->samples = (double*)ds__calloc(K * (size_t)tr->np, sizeof(double));
    tr->losses = (double*)ds__calloc(K, sizeof(double));
    tr->order = (int*)ds__calloc(K, sizeof(int));
    ok = tr->mu && tr->sd && tr->samples && tr->losses && tr->order;
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
        memcpy(tr->prev, tr->theta, sizeof(double) * (size_t)np);
        tr->have_prev = 1;
        it->lr = ds_optim_lr(tr->opt);
        rc = ds_optim_step(tr->opt, tr->theta, tr->grad, &it->grad_norm);
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
      if (g == 0 && tr->iter > 0) cem_update(tr);
      for (int q = 0; q < np; q++)
        tr->theta[q] = tr->iter == 0 ? tr->mu[q] : tr->mu[q] + tr->sd[q] * ds__rng_normal(&tr->rng);
      memcpy(tr->eval, tr->theta, sizeof(double) * (size_t)np);
      rc = whole_episode(tr, it, 0);
      if (!rc) {
        memcpy(tr->samples + (size_t)g * (size_t)np, tr->theta, sizeof(double) * (size_t)np);
        tr->losses[g] = it->loss;
      }
      /* leave the mean as the current parameters between samples */
      memcpy(tr->theta, tr->mu, sizeof(double) * (size_t)np);
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

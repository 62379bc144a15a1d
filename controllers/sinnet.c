/* The sinusoid-network controller (gradSim's visuomotor controller, with
 * harmonics and a bias as options; inputs in dsim/controller.h):
 *   a_i(t) = strength * tanh(z_i),  z_i = sum_q W_iq s_q(t),
 *   s_{hP+p}(t) = sin((h+1) omega t + p phi),  s_{HP} = 1 (bias).
 * The phase p phi is added to the frequency times t (the original multiplied
 * it by the frequency too, which made all inputs identical for the walker).
 * Backward (chain rule through tanh and W):
 *   dL/dW_iq = dL/da_i * strength * (1 - tanh^2 z_i) * s_q(t). */
#include "config.h"

#include <math.h>
#include <string.h>

#include "base/rng.h"
#include "dsim/controller.h"
#include "base/internal.h"

struct dsSinNet {
  dsSinNetDef def;
  int P, H, N, A; /* phases, harmonics, inputs N = H P + bias, outputs */
  double* W;      /* A x N */
  double* s;      /* N: inputs at the last evaluated time */
};

dsSinNetDef ds_default_sinnet_def(void) {
  dsSinNetDef d;
  memset(&d, 0, sizeof d);
  d.phases = 8;
  d.outputs = 1;
  d.omega = 2.5;
  d.phase_step = 0.7853981633974483;
  d.strength = 0.3;
  d.init_scale = 0;
  d.seed = 0;
  d.harmonics = 1;
  d.bias = 0;
  return d;
}

int ds_sinnet_create(const dsSinNetDef* def, dsSinNet** out) {
  if (!def || !out) return DS_ERR_INVALID;
  *out = NULL;
  const int H = def->harmonics > 0 ? def->harmonics : 1;
  if (def->phases < 1 || def->outputs < 1 || def->phases > (1 << 20) || def->outputs > (1 << 24) ||
      def->harmonics < 0 || def->harmonics > 1024 || (def->bias != 0 && def->bias != 1) ||
      (long long)H * def->phases + def->bias > (1 << 20) ||
      (long long)def->outputs * ((long long)H * def->phases + def->bias) > (1LL << 30) || !isfinite(def->omega) ||
      !isfinite(def->phase_step) || !isfinite(def->strength) || !(def->init_scale >= 0))
    return DS_ERR_RANGE;
  dsSinNet* n = (dsSinNet*)ds__calloc(1, sizeof *n);
  if (!n) return DS_ERR_NOMEM;
  n->def = *def;
  n->P = def->phases;
  n->H = H;
  n->N = H * def->phases + def->bias;
  n->A = def->outputs;
  n->W = (double*)ds__calloc((size_t)n->A * (size_t)n->N, sizeof(double));
  n->s = (double*)ds__calloc((size_t)n->N, sizeof(double));
  if (!n->W || !n->s) {
    ds_sinnet_destroy(n);
    return DS_ERR_NOMEM;
  }
  ds_sinnet_init(n, def->seed);
  *out = n;
  return DS_OK;
}

void ds_sinnet_destroy(dsSinNet* net) {
  if (!net) return;
  ds__free(net->W);
  ds__free(net->s);
  ds__free(net);
}

int ds_sinnet_num_params(const dsSinNet* net) { return net ? net->A * net->N : 0; }
double* ds_sinnet_params(dsSinNet* net) { return net ? net->W : NULL; }

int ds_sinnet_init(dsSinNet* net, uint64_t seed) {
  if (!net) return DS_ERR_INVALID;
  const double b = net->def.init_scale > 0 ? net->def.init_scale : 1.0 / sqrt((double)net->N);
  dsRng r;
  ds__rng_seed(&r, seed);
  const size_t n = (size_t)net->A * (size_t)net->N;
  for (size_t i = 0; i < n; i++) net->W[i] = b * (2.0 * ds__rng_uniform(&r) - 1.0);
  return DS_OK;
}

static void inputs(dsSinNet* net, double t) {
  for (int h = 0; h < net->H; h++)
    for (int p = 0; p < net->P; p++)
      net->s[h * net->P + p] = sin((double)(h + 1) * net->def.omega * t + (double)p * net->def.phase_step);
  if (net->def.bias) net->s[net->H * net->P] = 1;
}

int ds_sinnet_forward(dsSinNet* net, double t, dsReal* action) {
  if (!net || !action) return DS_ERR_INVALID;
  inputs(net, t);
  const int N = net->N;
  for (int i = 0; i < net->A; i++) {
    const double* w = net->W + (size_t)i * (size_t)N;
    double z = 0;
    for (int p = 0; p < N; p++) z += w[p] * net->s[p];
    action[i] = (dsReal)(net->def.strength * tanh(z));
  }
  return DS_OK;
}

int ds_sinnet_backward(dsSinNet* net, double t, const dsReal* grad_action, double* grad_params) {
  if (!net || !grad_action || !grad_params) return DS_ERR_INVALID;
  inputs(net, t);
  const int N = net->N;
  for (int i = 0; i < net->A; i++) {
    const double g = (double)grad_action[i];
    if (g == 0) continue;
    const double* w = net->W + (size_t)i * (size_t)N;
    double z = 0;
    for (int p = 0; p < N; p++) z += w[p] * net->s[p];
    const double y = tanh(z), gz = g * net->def.strength * (1.0 - y * y);
    double* gw = grad_params + (size_t)i * (size_t)N;
    for (int p = 0; p < N; p++) gw[p] += gz * net->s[p];
  }
  return DS_OK;
}

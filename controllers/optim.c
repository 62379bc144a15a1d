/* Optimisers on double vectors: Adam (Kingma & Ba, bias-corrected) and SGD
 * with heavy-ball momentum, both with gradient-norm clipping and a step-decay
 * learning-rate schedule and a rate factor set per step (the formulas are in
 * dsim/controller.h). */
#include "config.h"

#include <math.h>
#include <string.h>

#include "dsim/controller.h"
#include "base/internal.h"

struct dsOptim {
  dsOptimDef def;
  int n;
  long k;    /* steps taken */
  double lr_scale; /* multiplies the schedule's rate (ds_optim_set_lr_scale; 1) */
  double* m; /* Adam first moment / SGD velocity (n) */
  double* v; /* Adam second moment (n) */
};

dsOptimDef ds_default_optim_def(int kind) {
  dsOptimDef d;
  memset(&d, 0, sizeof d);
  d.kind = kind == DS_OPTIM_SGD ? DS_OPTIM_SGD : DS_OPTIM_ADAM;
  d.lr = 1e-2; /* the one default learning rate (both kinds) */
  d.beta1 = 0.9;
  d.beta2 = 0.999;
  d.eps = 1e-8;
  d.momentum = 0.9;
  d.clip_norm = 0;
  d.decay_every = 0;
  d.decay_factor = 1;
  return d;
}

int ds_optim_create(const dsOptimDef* def, int n, dsOptim** out) {
  if (!def || !out || n < 1) return DS_ERR_INVALID;
  *out = NULL;
  if ((def->kind != DS_OPTIM_ADAM && def->kind != DS_OPTIM_SGD) || !(def->lr >= 0) || !isfinite(def->lr) ||
      !(def->beta1 >= 0 && def->beta1 < 1) || !(def->beta2 >= 0 && def->beta2 < 1) || !(def->eps >= 0) ||
      !(def->momentum >= 0 && def->momentum < 1) || !(def->clip_norm >= 0) || def->decay_every < 0 ||
      !(def->decay_factor > 0))
    return DS_ERR_RANGE;
  dsOptim* o = (dsOptim*)ds__calloc(1, sizeof *o);
  if (!o) return DS_ERR_NOMEM;
  o->def = *def;
  o->n = n;
  o->lr_scale = 1;
  o->m = (double*)ds__calloc((size_t)n, sizeof(double));
  o->v = (double*)ds__calloc((size_t)n, sizeof(double));
  if (!o->m || !o->v) {
    ds_optim_destroy(o);
    return DS_ERR_NOMEM;
  }
  *out = o;
  return DS_OK;
}

void ds_optim_destroy(dsOptim* opt) {
  if (!opt) return;
  ds__free(opt->m);
  ds__free(opt->v);
  ds__free(opt);
}

void ds_optim_reset(dsOptim* opt) {
  if (!opt) return;
  opt->k = 0;
  opt->lr_scale = 1;
  memset(opt->m, 0, sizeof(double) * (size_t)opt->n);
  memset(opt->v, 0, sizeof(double) * (size_t)opt->n);
}

double ds_optim_lr(const dsOptim* opt) {
  if (!opt) return 0;
  if (opt->def.decay_every <= 0) return opt->def.lr * opt->lr_scale;
  return opt->def.lr * pow(opt->def.decay_factor, (double)(opt->k / opt->def.decay_every)) * opt->lr_scale;
}

int ds_optim_set_lr_scale(dsOptim* opt, double f) {
  if (!opt || !(f > 0) || !isfinite(f)) return DS_ERR_INVALID;
  opt->lr_scale = f;
  return DS_OK;
}

int ds_optim_scale_lr(dsOptim* opt, double f) {
  if (!opt || !(f > 0) || !isfinite(f)) return DS_ERR_INVALID;
  opt->def.lr *= f;
  return DS_OK;
}

int ds_optim_step(dsOptim* opt, double* x, const double* g, double* grad_norm) {
  if (!opt || !x || !g) return DS_ERR_INVALID;
  double nn = 0;
  for (int i = 0; i < opt->n; i++) nn += g[i] * g[i];
  const double norm = sqrt(nn);
  if (grad_norm) *grad_norm = norm;
  if (!isfinite(norm)) return DS_ERR_RANGE;
  const double c = (opt->def.clip_norm > 0 && norm > opt->def.clip_norm) ? opt->def.clip_norm / norm : 1.0;
  const double lr = ds_optim_lr(opt);
  if (opt->def.kind == DS_OPTIM_ADAM) {
    const double b1 = opt->def.beta1, b2 = opt->def.beta2;
    const double bc1 = 1.0 - pow(b1, (double)(opt->k + 1)), bc2 = 1.0 - pow(b2, (double)(opt->k + 1));
    for (int i = 0; i < opt->n; i++) {
      const double gi = c * g[i];
      opt->m[i] = b1 * opt->m[i] + (1.0 - b1) * gi;
      opt->v[i] = b2 * opt->v[i] + (1.0 - b2) * gi * gi;
      x[i] -= lr * (opt->m[i] / bc1) / (sqrt(opt->v[i] / bc2) + opt->def.eps);
    }
  } else {
    for (int i = 0; i < opt->n; i++) {
      opt->m[i] = opt->def.momentum * opt->m[i] + c * g[i];
      x[i] -= lr * opt->m[i];
    }
  }
  opt->k++;
  return DS_OK;
}

/* dsGrad: one adjoint array per differentiable model array (the rows of
 * DS_MODEL_ARRAYS marked 1), same layout and names as the model. */
#include "config.h"

#include <string.h>

#include "dsim/artic.h"
#include "dsim/engine.h"
#include "engine/engine_priv.h"

void ds_grad_free(dsGrad* g) {
  if (!g) return;
#define DS__FREE(field, type, count, diff, name) DS__GRAD_IF_##diff(ds__free(g->field);)
  DS_MODEL_ARRAYS(DS__FREE)
#undef DS__FREE
  ds__free(g);
}

int ds_grad_create(const dsModel* m, dsGrad** out) {
  if (!m || !out) return DS_ERR_INVALID;
  *out = NULL;
  dsGrad* g = (dsGrad*)ds__calloc(1, sizeof *g);
  if (!g) return DS_ERR_NOMEM;
  g->model = m;
  const dsModel* m_ = m;
#define DS__ALLOC(field, type, count, diff, name)                        \
  DS__GRAD_IF_##diff({                                                   \
    size_t n_ = (size_t)(count);                                         \
    if (n_) {                                                            \
      g->field = (dsReal*)ds__calloc(n_, sizeof(dsReal));                \
      if (!g->field) {                                                   \
        ds_grad_free(g);                                                 \
        return DS_ERR_NOMEM;                                             \
      }                                                                  \
    }                                                                    \
  })
  DS_MODEL_ARRAYS(DS__ALLOC)
#undef DS__ALLOC
  *out = g;
  return 0;
}

void ds_grad_zero(dsGrad* g) {
  if (!g) return;
  const dsModel* m_ = g->model;
#define DS__ZERO(field, type, count, diff, name) \
  DS__GRAD_IF_##diff(if (g->field) memset(g->field, 0, (size_t)(count) * sizeof(dsReal));)
  DS_MODEL_ARRAYS(DS__ZERO)
#undef DS__ZERO
}

int ds_grad_param(const dsGrad* g, const char* name, dsReal** ptr, int* count) {
  if (!g || !name) return DS_ERR_INVALID;
  const dsModel* m_ = g->model;
  /* an articulation's parameters by their own names (one value each), first: ds_model_param's order */
  const int k = m_->artic ? ds_artic_param_index(m_->artic, name) : DS_ERR_NOTFOUND;
  if (k >= 0) {
    if (ptr) *ptr = g->artic_param + k;
    if (count) *count = 1;
    return 0;
  }
#define DS__LOOK(field, type, cnt, diff, nm) \
  DS__GRAD_IF_##diff(if (strcmp(name, nm) == 0) {  \
    if (ptr) *ptr = g->field;                      \
    if (count) *count = (int)(cnt);                \
    return 0;                                      \
  })
  DS_MODEL_ARRAYS(DS__LOOK)
#undef DS__LOOK
  return DS_ERR_NOTFOUND;
}

/* The batched engine's entry points for code that runs on its backend (the
 * envs' batched renderer, dsim/engine_batch.h): public names over the
 * driver's own (engine/batch_priv.h), so that no other area includes that
 * header. */
#include "config.h"

#include "dsim/engine_batch.h"
#include "engine/batch_priv.h"

void* ds_bsim_context(const dsBatchSim* s) { return s ? ds__bsim_context(s) : NULL; }

int ds_bsim_positions(dsBatchSim* s, const dsReal** x) {
  if (!s || !x) return DS_ERR_INVALID;
  return ds__bsim_positions(s, x);
}

int ds_bsim_adj_scratch(dsBatchSim* s, dsReal** adj_x) {
  if (!s || !adj_x) return DS_ERR_INVALID;
  return ds__bsim_adj_scratch(s, adj_x);
}

int ds_bsim_add_adj_scratch(dsBatchSim* s) { return s ? ds__bsim_add_adj_scratch(s) : DS_ERR_INVALID; }

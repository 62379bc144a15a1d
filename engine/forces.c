/* The force table (rows from DS_FORCE_MODELS) and its layout. */
#include "config.h"

#include "engine/forces.h"

const dsForceModel ds__forces[DS__NFORCE] = {
#define DS__FORCE_ROW(row, name, kind, shared, nshared) [DS__F_##row] = DS__FORCE_##row,
    DS_FORCE_MODELS(DS__FORCE_ROW)
#undef DS__FORCE_ROW
};

const dsForceJacFn ds__force_jac[DS__NFORCE] = {
#define DS__FORCE_JAC(row, name, kind, shared, nshared) DS__IF_ELEM_##kind([DS__F_##row] = ds__##name##_jac_elem, )
    DS_FORCE_MODELS(DS__FORCE_JAC)
#undef DS__FORCE_JAC
};

void ds__force_layout(const dsModel* m, dsForceLayout* L) {
  long long slot = 0;
  size_t scratch = 0;
  for (int k = 0; k < DS__NFORCE; k++) {
    const dsForceModel* F = &ds__forces[k];
    const int n = F->count(m);
    L->count[k] = n;
    L->scratch[k] = scratch;
    scratch += F->scratch * (size_t)n;
    if (F->nvert > 0) {
      L->slot[k] = slot <= (1 << 30) ? (int)slot : -1;
      slot += (long long)F->nvert * n;
    } else {
      L->slot[k] = F->fwd ? L->slot[F->into] : -1;
    }
  }
  L->nslot = slot;
  L->nscratch = scratch;
  /* activation blocks in act_order */
  int nact = 0;
  for (int k = 0; k < DS__NFORCE; k++) L->act[k] = -1;
  for (int o = 1; o <= DS__NFORCE; o++)
    for (int k = 0; k < DS__NFORCE; k++)
      if (ds__forces[k].act_order == o) {
        L->act[k] = nact;
        nact += L->count[k];
      }
  L->nact = nact;
}

/* The force list (engine/forces.h) against what each driver makes of it:
 * every row's descriptor agrees with its kind and shared columns, every
 * element row has a forward and a backward batched stage that maps back to
 * it and runs over the row's elements, the stage ranges hold exactly the
 * element rows, and REDUCE's sums cover every SHARED row's scalars once.
 * A row added to the list without a batched stage, or with a descriptor
 * that says otherwise, fails here. */
#include "config.h"

#include "engine/batch_body.h"
#include "tests/dstest.h"

enum { K_ELEM = 1, K_ELEM_J, K_PARTICLE };
#define KIND_ELEM K_ELEM
#define KIND_ELEM_J K_ELEM_J
#define KIND_PARTICLE K_PARTICLE
#define SH_SHARED 1
#define SH_NOSHARED 0

static const struct {
  int row, kind, shared, nshared;
  const char* name;
} kRows[] = {
#define ROW(row, name, kind, shared, nshared) {DS__F_##row, KIND_##kind, SH_##shared, nshared, #name},
    DS_FORCE_MODELS(ROW)
#undef ROW
};
#define NROW ((int)(sizeof kRows / sizeof kRows[0]))

static void check_descriptors(void) {
  CHECK_INT_EQ(NROW, DS__NFORCE);
  int nsh = 3;
  for (int r = 0; r < NROW; r++) {
    const dsForceModel* F = &ds__forces[kRows[r].row];
    CHECK_INT_EQ(kRows[r].row, r);
    CHECK(F->name && F->count);
    if (kRows[r].kind == K_PARTICLE) {
      CHECK(F->pfwd && F->pbwd && !F->fwd && !F->bwd);
      CHECK_INT_EQ(F->nvert, 0);
    } else {
      CHECK(F->fwd && F->bwd && !F->pfwd && !F->pbwd);
      CHECK(F->nvert > 0 || F->into < r); /* an `into` row comes after its owner */
    }
    if (kRows[r].shared) {
      /* the batch sums nshared partials per element; the serial engine its reduce */
      CHECK_INT_EQ(F->scratch, kRows[r].nshared);
      CHECK(F->reduce != NULL);
      nsh += kRows[r].nshared;
    } else if (kRows[r].kind != K_PARTICLE) {
      CHECK_INT_EQ(F->scratch, 0); /* partials the batch would not sum */
    }
  }
  CHECK_INT_EQ(nsh, DS__NSHARED);
  CHECK_INT_EQ(DS__BS_NREDUCE, DS__NSHARED);
}

static void check_stages(void) {
  dsBatchArgs a;
  memset(&a, 0, sizeof a);
  for (int r = 0; r < NROW; r++) a.count[r] = 100 + r;
  int nelem = 0, seen_fwd[DS__NFORCE] = {0}, seen_bwd[DS__NFORCE] = {0};
  for (int st = 0; st < DS__BS_COUNT; st++) {
    const int f = ds__bstage_model(st);
    const int fwd = st >= DS__BS_ELEM_FWD0 && st < DS__BS_GATHER_FWD;
    const int bwd = st >= DS__BS_ELEM_BWD0 && st < DS__BS_GATHER_BWD;
    if (!fwd && !bwd) {
      CHECK_INT_EQ(f, -1);
      continue;
    }
    CHECK(f >= 0 && f < DS__NFORCE);
    if (f < 0 || f >= DS__NFORCE) continue;
    CHECK(kRows[f].kind != K_PARTICLE);
    CHECK_INT_EQ(ds__bstage_count(&a, st), 100 + f);
    if (fwd) seen_fwd[f]++;
    if (bwd) seen_bwd[f]++;
  }
  int prev = -1;
  for (int st = DS__BS_ELEM_FWD0; st < DS__BS_GATHER_FWD; st++) { /* list order */
    CHECK(ds__bstage_model(st) > prev);
    prev = ds__bstage_model(st);
  }
  for (int r = 0; r < NROW; r++) {
    const int elem = kRows[r].kind != K_PARTICLE;
    nelem += elem;
    if (elem && (seen_fwd[r] != 1 || seen_bwd[r] != 1))
      DST_FAIL_AT("force row %s: %d forward and %d backward batched stages (expected 1 and 1)", kRows[r].name,
                  seen_fwd[r], seen_bwd[r]);
    if (!elem) {
      CHECK_INT_EQ(seen_fwd[r], 0);
      CHECK_INT_EQ(seen_bwd[r], 0);
    }
  }
  CHECK_INT_EQ(DS__BS_GATHER_FWD - DS__BS_ELEM_FWD0, nelem);
  CHECK_INT_EQ(DS__BS_GATHER_BWD - DS__BS_ELEM_BWD0, nelem);
  /* the non-element stages run over particles, controls or sums */
  a.np = 7;
  a.nact = 3;
  CHECK_INT_EQ(ds__bstage_count(&a, DS__BS_GATHER_FWD), 7);
  CHECK_INT_EQ(ds__bstage_count(&a, DS__BS_GATHER_BWD), 7);
  CHECK_INT_EQ(ds__bstage_count(&a, DS__BS_ACCUMULATE), 10);
  CHECK_INT_EQ(ds__bstage_count(&a, DS__BS_REDUCE), DS__BS_NREDUCE);
}

/* REDUCE: sums 3.. map onto the SHARED rows' scalars, each once, in list order. */
static void check_reduce(void) {
  dsBatchArgs a;
  memset(&a, 0, sizeof a);
  for (int r = 0; r < NROW; r++) a.count[r] = 5;
  a.np = 4;
  int k = 3;
  for (int r = 0; r < NROW; r++) {
    if (!kRows[r].shared) continue;
    for (int j = 0; j < kRows[r].nshared; j++, k++) {
      int jj = -1;
      CHECK_INT_EQ(ds__bs_reduce_row(k, &jj), r);
      CHECK_INT_EQ(jj, j);
      CHECK_INT_EQ(ds__bs_reduce_len(&a, k), 5);
      CHECK_INT_EQ(ds__bs_nshared(r), kRows[r].nshared);
    }
    a.count[r] = 0; /* a row that is off: its sums are skipped */
    CHECK_INT_EQ(ds__bs_reduce_len(&a, k - 1), -1);
  }
  CHECK_INT_EQ(k, DS__BS_NREDUCE);
  for (int g = 0; g < 3; g++) CHECK_INT_EQ(ds__bs_reduce_len(&a, g), 4);
}

int main(void) {
  check_descriptors();
  check_stages();
  check_reduce();
  return DST_RESULT();
}

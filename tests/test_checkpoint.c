/* The checkpointed tape (every K-th state stored, segments recomputed in
 * backward) gives gradients bitwise identical to the full tape, for K that
 * divides T and K that does not; the tape records activations and external
 * forces compactly; the whole-episode ds_backward equals the step-by-step
 * backward; running backward twice gives the same result. */
#include "config.h"

#include "tests/dstest.h"
#include "tests/enginetest.h"

/* Hash of every gradient array, the per-substep control gradients and the
 * final state. */
static uint64_t grad_hash(const etScene* s) {
  const dsModel* m_ = s->m;
  const dsGrad* g = s->g;
  uint64_t h = 0;
#define H(field, type, count, diff, name) DS__GRAD_IF_##diff(h = et_hash(h, g->field, (size_t)(count) * sizeof(dsReal));)
  DS_MODEL_ARRAYS(H)
#undef H
  h = et_hash(h, s->gact, (size_t)s->T * m_->nact * sizeof(dsReal));
  h = et_hash(h, s->gfext, (size_t)s->T * 3 * m_->nparticle * sizeof(dsReal));
  return h;
}

static uint64_t state_hash(const etScene* s) {
  size_t n3 = 3 * (size_t)s->m->nparticle * sizeof(dsReal);
  return et_hash(et_hash(0, s->d->x, n3), s->d->v, n3);
}

static void compare_modes(dsModel* m, int T, dsReal act_amp, dsReal fext_amp, const char* label) {
  const int Ks[] = {1, 7, 16, T, 3 * T};
  uint64_t h_ref = 0, s_ref = 0;
  for (size_t i = 0; i < sizeof Ks / sizeof Ks[0]; i++) {
    et_rng = 12345; /* same schedules and weights for every K */
    etScene s;
    et_scene_init(&s, m, T, Ks[i], act_amp, fext_amp);
    et_rollout(&s);
    uint64_t sh = state_hash(&s);
    et_backward(&s);
    uint64_t gh = grad_hash(&s);
    if (i == 0) {
      h_ref = gh;
      s_ref = sh;
      /* compact control records: activations change every 25 substeps,
       * external forces every 40 */
      CHECK_INT_EQ(s.d->act_n, (T + 24) / 25);
      CHECK_INT_EQ(s.d->fext_n, (T + 39) / 40);
      /* a second backward over the same tape gives the same gradient */
      et_backward(&s);
      CHECK(grad_hash(&s) == gh);
    } else {
      if (gh != h_ref) fprintf(stderr, "%s: K = %d gradient differs from the full tape\n", label, Ks[i]);
      CHECK(gh == h_ref);
      CHECK(sh == s_ref);
      CHECK(s.d->nstore < T || Ks[i] == 1);
    }
    et_scene_free(&s);
  }
}

/* ds_backward (whole episode) == begin/step/finish without injections. */
static void check_convenience(dsModel* m, int T) {
  et_rng = 777;
  etScene s;
  et_scene_init(&s, m, T, 5, 0.1, 0.1);
  memset(s.cmid, 0, 3 * (size_t)m->nparticle * sizeof(dsReal));
  et_rollout(&s);
  et_backward(&s);
  uint64_t h1 = grad_hash(&s);
  ds_grad_zero(s.g);
  CHECK_INT_EQ(ds_backward(m, s.d, s.g, s.cx, s.cv, s.gact, s.gfext), 0);
  CHECK(grad_hash(&s) == h1);
  /* state errors */
  CHECK_INT_EQ(ds_backward_finish(m, s.d, s.g), DS_ERR_STATE);
  CHECK_INT_EQ(ds_backward_step(m, s.d, s.g, NULL, NULL), DS_ERR_STATE);
  CHECK_STR_CONTAINS(ds_data_last_error(s.d), "no substep");
  et_scene_free(&s);
}

int main(void) {
  dsModel* cloth = et_cloth_model(4, 4, 1e-3);
  dsModel* soft = et_soft_model(2, 1e-3);
  compare_modes(cloth, 200, 0.2, 0.05, "cloth");
  compare_modes(soft, 200, 0.1, 0.5, "soft");
  check_convenience(soft, 60);
  ds_model_free(cloth);
  ds_model_free(soft);
  return DST_RESULT();
}

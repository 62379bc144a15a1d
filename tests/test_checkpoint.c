/* The checkpointed tape (every K-th state stored, segments recomputed in
 * backward) gives gradients bitwise identical (memcmp) to the full tape, for K that
 * divides T and K that does not; the tape records activations and external
 * forces compactly; the whole-episode ds_backward equals the step-by-step
 * backward; running backward twice gives the same result. */
#include "config.h"

#include "tests/dstest.h"
#include "tests/enginetest.h"

/* Every gradient array, the per-substep control gradients, flattened into
 * one malloc'd byte buffer (compared with memcmp). */
static unsigned char* grad_bytes(const etScene* s, size_t* len) {
  const dsModel* m_ = s->m;
  const dsGrad* g = s->g;
  size_t n = 0;
#define SZ(field, type, count, diff, name) DS__GRAD_IF_##diff(n += (size_t)(count) * sizeof(dsReal);)
  DS_MODEL_ARRAYS(SZ)
#undef SZ
  size_t na = (size_t)s->T * m_->nact * sizeof(dsReal), nf = (size_t)s->T * 3 * m_->nparticle * sizeof(dsReal);
  unsigned char* buf = (unsigned char*)malloc(n + na + nf + 1);
  size_t o = 0;
#define CP(field, type, count, diff, name)                               \
  DS__GRAD_IF_##diff(if ((count) > 0) {                                  \
    memcpy(buf + o, g->field, (size_t)(count) * sizeof(dsReal));         \
    o += (size_t)(count) * sizeof(dsReal);                               \
  })
  DS_MODEL_ARRAYS(CP)
#undef CP
  memcpy(buf + o, s->gact, na);
  memcpy(buf + o + na, s->gfext, nf);
  *len = o + na + nf;
  return buf;
}

/* 1 when the gradients of s equal ref (len bytes) bit for bit. */
static int same_grad(const etScene* s, const unsigned char* ref, size_t len) {
  size_t n;
  unsigned char* b = grad_bytes(s, &n);
  int same = n == len && memcmp(b, ref, len) == 0;
  free(b);
  return same;
}

static uint64_t state_hash(const etScene* s) {
  size_t n3 = 3 * (size_t)s->m->nparticle * sizeof(dsReal);
  return et_hash(et_hash(0, s->d->x, n3), s->d->v, n3);
}

static void compare_modes(dsModel* m, int T, dsReal act_amp, dsReal fext_amp, const char* label) {
  const int Ks[] = {1, 7, 16, T, 3 * T};
  unsigned char* ref = NULL;
  size_t ref_len = 0;
  uint64_t s_ref = 0;
  for (size_t i = 0; i < sizeof Ks / sizeof Ks[0]; i++) {
    et_rng = 12345; /* same schedules and weights for every K */
    etScene s;
    et_scene_init(&s, m, T, Ks[i], act_amp, fext_amp);
    et_rollout(&s);
    uint64_t sh = state_hash(&s);
    et_backward(&s);
    if (i == 0) {
      ref = grad_bytes(&s, &ref_len);
      s_ref = sh;
      /* compact control records: activations change every 25 substeps,
       * external forces every 40 */
      CHECK_INT_EQ(s.d->act_n, (T + 24) / 25);
      CHECK_INT_EQ(s.d->fext_n, (T + 39) / 40);
      /* a second backward over the same tape gives the same gradient */
      et_backward(&s);
      CHECK(same_grad(&s, ref, ref_len));
    } else {
      int same = same_grad(&s, ref, ref_len);
      if (!same) fprintf(stderr, "%s: K = %d gradient differs from the full tape\n", label, Ks[i]);
      CHECK(same);
      CHECK(sh == s_ref);
      CHECK(s.d->nstore < T || Ks[i] == 1);
    }
    et_scene_free(&s);
  }
  /* the comparison sees a one-ulp change */
  ref[ref_len / 2] ^= 1;
  et_rng = 12345;
  etScene s;
  et_scene_init(&s, m, T, 1, act_amp, fext_amp);
  et_rollout(&s);
  et_backward(&s);
  CHECK(!same_grad(&s, ref, ref_len));
  et_scene_free(&s);
  free(ref);
}

/* ds_backward (whole episode) == begin/step/finish without injections. */
static void check_convenience(dsModel* m, int T) {
  et_rng = 777;
  etScene s;
  et_scene_init(&s, m, T, 5, 0.1, 0.1);
  memset(s.cmid, 0, 3 * (size_t)m->nparticle * sizeof(dsReal));
  et_rollout(&s);
  et_backward(&s);
  size_t len;
  unsigned char* ref = grad_bytes(&s, &len);
  ds_grad_zero(s.g);
  CHECK_INT_EQ(ds_backward(m, s.d, s.g, s.cx, s.cv, s.gact, s.gfext), 0);
  CHECK(same_grad(&s, ref, len));
  free(ref);
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

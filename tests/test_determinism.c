/* Determinism: the same rollout and backward on 1, 2 and 3 threads give
 * bitwise identical states and gradients (hashes of every byte). The models
 * are large enough for the parallel loops to engage (a 6x6x6 tet box in
 * ground contact and a 24x24 cloth with every force model). The thread
 * choice (ds_set_adaptive_threads) is turned off so that 2 and 3 threads
 * really run every substep; with it on (the default, a mix of counts from
 * substep to substep) the bits must be the same too. */
#include "config.h"

#include "tests/dstest.h"
#include "tests/enginetest.h"

/* run_at: the data is made while `made` threads are set and the rollout
 * and backward run on `threads` (the backward's chained sums have one link
 * per thread the data was made for, and fall back to serial sums beyond). */
static uint64_t run_at(dsModel* m, int T, int made, int threads, dsReal act_amp, dsReal fext_amp) {
  ds_set_num_threads(made);
  CHECK(ds_get_adaptive_threads() == 0 || threads == 2);
  et_rng = 4242;
  etScene s;
  et_scene_init(&s, m, T, 1, act_amp, fext_amp);
  ds_set_num_threads(threads);
  et_rollout(&s);
  uint64_t h = et_hash(0, s.d->x, 3 * (size_t)m->nparticle * sizeof(dsReal));
  h = et_hash(h, s.d->v, 3 * (size_t)m->nparticle * sizeof(dsReal));
  h = et_hash(h, s.d->f, 3 * (size_t)m->nparticle * sizeof(dsReal));
  et_backward(&s);
  const dsModel* m_ = m;
  const dsGrad* g = s.g;
#define H(field, type, count, diff, name) DS__GRAD_IF_##diff(h = et_hash(h, g->field, (size_t)(count) * sizeof(dsReal));)
  DS_MODEL_ARRAYS(H)
#undef H
  h = et_hash(h, s.gact, (size_t)T * m->nact * sizeof(dsReal));
  h = et_hash(h, s.gfext, (size_t)T * 3 * m->nparticle * sizeof(dsReal));
  et_scene_free(&s);
  return h;
}

static uint64_t run(dsModel* m, int T, int threads, dsReal act_amp, dsReal fext_amp) {
  return run_at(m, T, threads, threads, act_amp, fext_amp);
}

int main(void) {
  dsModel* soft = et_soft_model(6, 5e-4);
  dsModel* cloth = et_cloth_model(24, 24, 1e-3);
  CHECK(soft->nslot + soft->nparticle >= 4096);
  CHECK(cloth->nslot + cloth->nparticle >= 4096);
  CHECK(ds_get_adaptive_threads() == 1); /* the default */
  ds_set_adaptive_threads(0);
  uint64_t s1 = run(soft, 60, 1, 0.1, 0.5), c1 = run(cloth, 60, 1, 0.2, 0.05);
  for (int th = 2; th <= 3; th++) {
    uint64_t s2 = run(soft, 60, th, 0.1, 0.5), c2 = run(cloth, 60, th, 0.2, 0.05);
    if (s2 != s1 || c2 != c1) fprintf(stderr, "%d threads: results differ from 1 thread\n", th);
    CHECK(s2 == s1);
    CHECK(c2 == c1);
  }
  /* more threads than the data was made for, and fewer */
  CHECK(run_at(soft, 60, 1, 3, 0.1, 0.5) == s1);
  CHECK(run_at(soft, 60, 4, 2, 0.1, 0.5) == s1);
  CHECK(run_at(cloth, 60, 1, 2, 0.2, 0.05) == c1);
  ds_set_adaptive_threads(1);
  CHECK(run(soft, 60, 2, 0.1, 0.5) == s1);
  CHECK(run(cloth, 60, 2, 0.2, 0.05) == c1);
  ds_set_adaptive_threads(0);
  /* a different input must change the hash (the hash sees the data) */
  dsReal g[3] = {0, -9.7, 0};
  ds_model_set_param(soft, "gravity", g, 3);
  CHECK(run(soft, 60, 1, 0.1, 0.5) != s1);
  ds_model_free(soft);
  ds_model_free(cloth);
  return DST_RESULT();
}

/* The CPU backend of the batched engine: host memory, and every stage of
 * engine/batch_body.h run in one OpenMP loop over the B x count
 * (instance, index) pairs, instance-major. Each pair writes only its own
 * cells, so any schedule and thread count give the same bits. A launch's
 * parts run last to first, a chain's stages one pair at a time
 * (dsBatchLaunch), in one parallel region per launch. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#ifdef _OPENMP
#  include <omp.h>
#endif

#include "base/internal.h"
#include "engine/batch_priv.h"

/* Below this many pairs in all a launch runs on one thread. */
#define DS__BATCH_PAR_MIN 2048

/* The backend's state: the thread choice (base/internal.h) of each kind of
 * launch, keyed by the stage of its first part. */
typedef struct dsCpuBatch {
  dsThreadPick pick[DS__BS_COUNT];
} dsCpuBatch;

int ds__host_batch_open(int device, void** ctx, char* err, size_t errlen) {
  (void)device;
  dsCpuBatch* c = (dsCpuBatch*)ds__calloc(1, sizeof *c);
  if (!c) {
    if (err && errlen) snprintf(err, errlen, "cpu: out of memory for the backend's state");
    return DS_ERR_NOMEM;
  }
  *ctx = c;
  return 0;
}

void ds__host_batch_close(void* ctx) { ds__free(ctx); }

/* One parallel region per launch, its parts one after another (each
 * part's loop ends in a barrier), on one thread or all of them as the
 * thread choice of this kind of launch says: a busy core then costs one
 * wait per launch at most, and a launch too small to gain runs on one. */
int ds__host_batch_run(void* ctx, const dsBatchLaunch* l) {
  dsCpuBatch* c = (dsCpuBatch*)ctx;
  long long work = 0;
  int imp = 0;
  for (int p = 0; p < l->nparts; p++) {
    work += (long long)l->part[p].count * l->B * (DS__BS_IS_ARTIC(l->part[p].stage[0]) ? DS__BS_ARTIC_WEIGHT : 1);
    imp |= DS__BS_IS_IMPLICIT(l->part[p].stage[0]) && l->part[p].count > 0;
  }
  if (work <= 0) return 0;
  /* An implicit substep is a Newton solve over the whole instance, whose
     own loops run on the threads the launch leaves free: over the
     instances when there are several, within the one instance otherwise */
  if (imp) work = l->B > 1 ? DS__BATCH_PAR_MIN : 0;
  const int key = l->part[l->nparts - 1].stage[0];
  dsThreadPick* pick = c && key >= 0 && key < DS__BS_COUNT ? &c->pick[key] : NULL;
  int arm;
  const int nt = ds__pick_begin(pick, work, DS__BATCH_PAR_MIN, &arm);
  const double t0 = arm >= 0 ? ds__clock() : 0;
  (void)nt;
#ifdef _OPENMP
  /* no nested teams inside a launch on several threads (an instance's
     solver loops would oversubscribe the cores) */
  const int levels = omp_get_max_active_levels();
  if (imp && nt > 1) omp_set_max_active_levels(1);
#endif
#pragma omp parallel num_threads(nt) if (nt > 1)
  for (int p = l->nparts - 1; p >= 0; p--) { /* last to first: see dsBatchLaunch */
    const dsBatchPart* q = l->part + p;
    const int count = q->count;
    const long long n = (long long)count * l->B;
    if (n <= 0) continue;
    if (q->nops == 1) {
      const int stage = q->stage[0];
      const dsBatchArgs* a = q->a;
#pragma omp for schedule(static)
      for (long long k = 0; k < n; k++) ds__bstage_run(stage, a, (int)(k % count), (int)(k / count));
    } else {
#pragma omp for schedule(static)
      for (long long k = 0; k < n; k++)
        for (int o = 0; o < q->nops; o++) ds__bstage_run(q->stage[o], q->a + o, (int)(k % count), (int)(k / count));
    }
  }
#ifdef _OPENMP
  if (imp && nt > 1) omp_set_max_active_levels(levels);
#endif
  if (arm >= 0) ds__pick_end(pick, arm, ds__clock() - t0);
  return 0;
}



/* The CPU backend of the batched engine: host memory, and every stage of
 * engine/batch_body.h run in one OpenMP loop over the B x count
 * (instance, index) pairs, instance-major. Each pair writes only its own
 * cells, so any schedule and thread count give the same bits. A launch's
 * parts run last to first, a chain's stages one pair at a time
 * (dsBatchLaunch). */
#include "config.h"

#include <string.h>

#ifdef _OPENMP
#  include <omp.h>
#endif

#include "base/internal.h"
#include "engine/batch_priv.h"

/* Below this many pairs a stage runs on one thread. */
#define DS__BATCH_PAR_MIN 2048

static int cpu_open(int device, void** ctx, char* err, size_t errlen) {
  (void)device;
  (void)err;
  (void)errlen;
  *ctx = NULL;
  return 0;
}

static void cpu_close(void* ctx) { (void)ctx; }

static int cpu_free_bytes(void* ctx, size_t* bytes) {
  (void)ctx;
  *bytes = ds_memory_limit();
  return 0;
}

static int cpu_run(void* ctx, const dsBatchLaunch* l) {
  (void)ctx;
  for (int p = l->nparts - 1; p >= 0; p--) { /* last to first: see dsBatchLaunch */
    const dsBatchPart* q = l->part + p;
    const int count = q->count;
    const long long n = (long long)count * l->B;
    if (n <= 0) continue;
    const int par = n >= DS__BATCH_PAR_MIN || (count == 1 && l->B > 1);
    (void)par;
    if (q->nops == 1) {
      const int stage = q->stage[0];
      const dsBatchArgs* a = q->a;
#pragma omp parallel for schedule(static) if (par)
      for (long long k = 0; k < n; k++) ds__bstage_run(stage, a, (int)(k % count), (int)(k / count));
    } else {
#pragma omp parallel for schedule(static) if (par)
      for (long long k = 0; k < n; k++)
        for (int o = 0; o < q->nops; o++) ds__bstage_run(q->stage[o], q->a + o, (int)(k % count), (int)(k / count));
    }
  }
  return 0;
}

static const char* cpu_last_error(void* ctx) {
  (void)ctx;
  return "";
}

const dsBatchBackend ds__cpu_batch_backend = {"cpu",          cpu_open,         cpu_close,     cpu_free_bytes,
                                              ds__host_alloc, ds__host_release, ds__host_move, ds__host_move,
                                              ds__host_move,  ds__host_zero,    cpu_run,       cpu_last_error};

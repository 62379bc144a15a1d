/* The thread choice of parallel stages (base/internal.h, "thread choice"):
 * one thread or all of them, chosen from the clock. */
#include "config.h"

#include <stdatomic.h>
#ifdef _OPENMP
#  include <omp.h>
#endif

#include "base/internal.h"

static _Atomic int g_adaptive = 1;

/* the longest probe interval of all threads, calls (base/internal.h) */
#define DS__PICK_MAX 65536

void ds__pick_set_adaptive(int on) { atomic_store(&g_adaptive, on ? 1 : 0); }
int ds__pick_adaptive(void) { return atomic_load(&g_adaptive); }

double ds__clock(void) {
#ifdef _OPENMP
  return omp_get_wtime();
#else
  return 0;
#endif
}

int ds__pick_begin(dsThreadPick* p, long long work, long long min_work, int* arm) {
  *arm = -1;
#ifdef _OPENMP
  const int nmax = omp_in_parallel() ? 1 : omp_get_max_threads();
#else
  const int nmax = 1;
#endif
  if (nmax <= 1 || work < min_work) return 1;
  if (!p || !atomic_load(&g_adaptive)) return nmax;
  if (p->nmax != nmax) { /* afresh: one thread first (a loaded machine makes a call on all threads
                          * cost tens of calls; an idle one switches after a few calls) */
    p->nmax = nmax;
    p->cur = 0;
    p->left = 4;
    p->interval = 8;
    p->est[0] = p->est[1] = -1;
    p->probes = 0;
  }
  *arm = p->left > 0 ? p->cur : 1 - p->cur;
  return *arm ? nmax : 1;
}

void ds__pick_end(dsThreadPick* p, int arm, double sec) {
  if (arm < 0) return;
  const int other = 1 - p->cur;
  if (arm == p->cur) {
    double* e = &p->est[arm];
    *e = *e < 0 ? sec : *e + (sec - *e) / 8;
    p->left--;
    /* the count in use got slower than the other was: look again now */
    if (p->est[other] > 0 && *e > p->est[other]) p->left = 0;
    return;
  }
  /* a probe of the other count, twice, keeping the faster call: one
   * preempted call must not condemn one thread, and the first call on all
   * threads after a spell on one pays for waking the sleeping workers.
   * All threads get the second call only when the first was not far slower
   * than the count in use (under load one probe can cost tens of calls). */
  if (p->probes == 0 && (arm == 0 || sec < 4 * p->est[p->cur])) {
    p->probe_min = sec;
    p->probes = 1;
    return;
  }
  if (p->probes && p->probe_min < sec) sec = p->probe_min;
  p->probes = 0;
  p->est[arm] = sec;
  if (sec < p->est[p->cur]) {
    p->cur = arm;
    p->interval = 8;
  } else if (arm == 1) {
    /* all threads lost: wait at least twice as long as before, and long
     * enough that its probes cost under ~3% of the time (32 calls per unit
     * of its slowdown: a probe 50x slower waits 1,600 calls; one that
     * waited a whole time slice for a descheduled thread, ~400x, 12,800) */
    const double r = 32 * sec / p->est[p->cur];
    int n = 2 * p->interval;
    if (r > n) n = r < DS__PICK_MAX ? (int)r : DS__PICK_MAX;
    p->interval = n < DS__PICK_MAX ? n : DS__PICK_MAX;
  } else {
    /* one thread lost: its probes are cheap, look again soon */
    p->interval = p->interval < 32 ? 2 * p->interval : 64;
  }
  p->left = p->interval;
}


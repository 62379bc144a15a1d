/* The thread choice of parallel stages (base/internal.h, "thread choice"):
 * one thread or all of them, chosen from the clock. */
#include "config.h"

#include <sched.h>
#include <stdatomic.h>
#ifdef _OPENMP
#  include <omp.h>
#endif

#include "base/internal.h"

static _Atomic int g_adaptive = 1;

/* the longest probe interval of all threads, calls (base/internal.h) */
#define DS__PICK_MAX 65536
/* how much slower than the other count's probe the count in use may
 * become before the other is probed again at once */
#define DS__PICK_MARGIN 1.25
/* the most calls of one probe of all threads */
#define DS__PICK_PROBE 4

void ds__pick_set_adaptive(int on) { atomic_store(&g_adaptive, on ? 1 : 0); }
int ds__pick_adaptive(void) { return atomic_load(&g_adaptive); }

void ds__spin_wait(unsigned spin) {
  if (spin % 1024 == 0)
    sched_yield();
  else {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
}

double ds__clock(void) {
#ifdef _OPENMP
  return omp_get_wtime();
#else
  return 0;
#endif
}

int ds__par_open(int cond) {
#ifdef _OPENMP
  return cond && omp_get_max_threads() > 1 && !omp_in_parallel();
#else
  (void)cond;
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
    /* the count in use got clearly slower than the other was: look again
     * now. The mean counts every call, the other's figure is the best of
     * its probe's: the margin keeps a few slow calls (an interrupt, a
     * migration) from flipping an idle machine's choice back and forth,
     * while a descheduled worker's time-slice waits (100x a call) exceed
     * it at once */
    if (p->est[other] > 0 && *e > DS__PICK_MARGIN * p->est[other]) p->left = 0;
    return;
  }
  /* a probe of the other count: several calls, keeping the fastest. One
   * preempted call must not condemn one thread, and the first calls on all
   * threads after a spell on one pay for waking the sleeping workers and
   * for moving their share of the data into their caches: all threads get
   * up to DS__PICK_PROBE calls, one thread two. Under load a call on all
   * threads can wait a whole time slice for a descheduled worker (100-400
   * calls of a small model), so a further call is made only while the last
   * one was not far slower than the count in use: 4x, or 64x for the first
   * call, whose wake-up alone measured 150-270 us (5-9 calls of the gear)
   * on an idle 2-vCPU machine; with the old 4x a first call always lost
   * there, and each loss doubled the wait before the next probe. */
  if (p->probes == 0 || sec < p->probe_min) p->probe_min = sec;
  p->probes++;
  if (p->probes < (arm ? DS__PICK_PROBE : 2) && (arm == 0 || sec < (p->probes == 1 ? 64 : 4) * p->est[p->cur]))
    return;
  sec = p->probe_min;
  p->probes = 0;
  p->est[arm] = sec;
  if (sec < p->est[p->cur]) {
    p->cur = arm;
    p->interval = 8;
  } else if (arm == 1) {
    /* all threads lost: wait at least twice as long as before, and long
     * enough that its probes cost about 1% of the time (100 calls per
     * unit of its slowdown: a probe 50x slower waits 5,000 calls; one that
     * waited a whole time slice for a descheduled thread, ~400x, 40,000;
     * with 32 calls, ~3%, a 2-thread gear run beside a busy process ran at
     * 0.88-1.00x of one thread, with 100 at 0.98-1.01x) */
    const double r = 100 * sec / p->est[p->cur];
    int n = 2 * p->interval;
    if (r > n) n = r < DS__PICK_MAX ? (int)r : DS__PICK_MAX;
    p->interval = n < DS__PICK_MAX ? n : DS__PICK_MAX;
  } else {
    /* one thread lost: look again after twice as long, up to 1,024 calls
     * (its probe costs its slowdown twice, 2-3x a call for a large stage;
     * a count in use that gets slower than one thread was is probed at once
     * anyway, above) */
    p->interval = p->interval < 512 ? 2 * p->interval : 1024;
  }
  p->left = p->interval;
}


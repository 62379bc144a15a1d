/* Internal helpers shared across library files (ds__ prefix): allocation
 * through the replaceable allocator, error messages kept on objects, the log
 * hook, and assertions. Not installed. */
#ifndef DSIM_BASE_INTERNAL_H
#define DSIM_BASE_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>

#include "dsim/base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Allocation: every library allocation uses these (see ds_replace_allocator). */
void* ds__malloc(size_t size);
void* ds__calloc(size_t count, size_t size);
/* Host memory as a compute backend's (the CPU backends of the batched
 * engine and the batched renderer; ctx unused): zeroed allocation, release,
 * copy (memmove) and zeroing; the int functions return 0. */
void* ds__host_alloc(void* ctx, size_t bytes);
void ds__host_release(void* ctx, void* p);
int ds__host_move(void* ctx, void* dst, const void* src, size_t bytes);
int ds__host_zero(void* ctx, void* dst, size_t bytes);
void* ds__realloc(void* ptr, size_t size);
void ds__free(void* ptr);
/* Duplicate a string with ds__malloc; NULL on failure. */
char* ds__strdup(const char* s);

/* Error detail kept on an object: the code and a message naming what failed
 * (file, key path, element, substep, value). */
#define DS_ERRMSG_LEN 512
typedef struct dsErrBuf {
  int code;
  char msg[DS_ERRMSG_LEN];
} dsErrBuf;

/* Record code and a printf-style message in eb (eb may be NULL); returns code
 * so callers can write `return ds__seterr(eb, DS_ERR_MESH, "...", ...);`. */
int ds__seterr(dsErrBuf* eb, int code, const char* fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
int ds__vseterr(dsErrBuf* eb, int code, const char* fmt, va_list ap);
/* Clear the error. */
void ds__clearerr(dsErrBuf* eb);
/* The message, or "" when none. */
const char* ds__errmsg(const dsErrBuf* eb);

/* printf-style message into a caller's (err, errlen) buffer (err may be
 * NULL); returns code. For functions that report through a char buffer
 * rather than an object. */
int ds__puterr(char* err, size_t errlen, int code, const char* fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

/* Send a message to the log hook (no output when none is set). */
void ds__log(dsLogLevel level, const char* fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Internal consistency check, compiled in with --enable-asserts. A failure is
 * a bug in dsim: it is logged and aborts. Never used for input validation. */
#ifdef DS_ENABLE_ASSERTS
void ds__assert_fail(const char* expr, const char* file, int line);
#  define DS_ASSERT(e) ((e) ? (void)0 : ds__assert_fail(#e, __FILE__, __LINE__))
#else
#  define DS_ASSERT(e) ((void)0)
#endif

/* ---- thread choice (base/threads.c) -------------------------------------------
 * A parallel stage is run on either 1 thread or all of them (nmax); every
 * count gives the same bits, so the choice is free to follow the clock. The
 * stage times each call: the count in use keeps a running mean of its
 * seconds per call, and now and then the other count is probed (the
 * fastest of up to 4 calls on all threads, or of 2 on one: the first calls on all threads after a spell on
 * one pay for waking the workers; a further call only while the last was
 * under 4x the count in use, 64x for the first, since under load one such
 * call can cost hundreds); the faster count is used. A losing probe of all
 * threads at least doubles the interval to
 * the next (8 .. 65,536 calls; 100 calls per unit of its slowdown, so a
 * probe that waited a whole time slice for a descheduled thread, some 400
 * calls' worth, is followed by ~40,000), so an unhelpful count costs about
 * 1% at most; one thread is looked at again after twice as long each
 * time it loses (8 .. 1,024 calls), and at once when the count in use
 * becomes 25% slower than the other count's probe was; a change of nmax
 * starts afresh, on one thread.
 * This is what makes a model too small to gain run on one thread, and a
 * run whose partner thread keeps being descheduled (another process on the
 * cores) fall back to one thread until the cores are free. Used by the
 * engine's substeps, the rasterizer's render and backward, the CPU
 * batched engine's launches (engine/batch_cpu.c) and the batched envs'
 * light loops over their envs (envs/batch.c); the public switch is
 * ds_set_adaptive_threads (dsim/engine.h). */
typedef struct dsThreadPick {
  int nmax;      /* thread count the estimates belong to; 0: none yet */
  int cur;       /* count in use: 0 one thread, 1 nmax threads */
  int left;      /* calls until the other count is probed */
  int interval;  /* probe interval, calls */
  double est[2]; /* seconds per call of each; < 0 unknown */
  int probes;    /* calls of the current probe so far */
  double probe_min;
} dsThreadPick;

/* Threads for the next call of a stage of `work` items (below min_work:
 * one thread, not timed); *arm: the choice made (0: one thread, 1: all),
 * -1 when not timed. Then ds__pick_end with the call's seconds
 * (ds__clock) when *arm >= 0. */
int ds__pick_begin(dsThreadPick* p, long long work, long long min_work, int* arm);
void ds__pick_end(dsThreadPick* p, int arm, double sec);
double ds__clock(void);
/* One turn of a wait for another thread (spin: turns so far, from 1): a
 * CPU pause, and every 1,024th turn a yield of the core (the awaited
 * thread may be waiting for it). */
void ds__spin_wait(unsigned spin);
void ds__pick_set_adaptive(int on);
int ds__pick_adaptive(void);
/* 1 when a parallel loop whose work warrants threads (cond) should open an
 * OpenMP region: cond, more than one thread available, and not already
 * inside a region (a nested one would run on one thread). Otherwise the
 * loop runs directly: an OpenMP region costs a futex system call even on
 * one thread or with a false `if` clause, which on the implicit solver's
 * many short loops was a fifth to a third of its CPU time. */
int ds__par_open(int cond);
/* for_statement as a `parallel for schedule(static)` when ds__par_open(cond),
 * else run directly (the same iterations in the same order). */
#ifdef _OPENMP
#  define DS__PAR_FOR(cond, ...)                                  \
    do {                                                          \
      if (ds__par_open(cond)) {                                   \
        _Pragma("omp parallel for schedule(static)") __VA_ARGS__ \
      } else {                                                    \
        __VA_ARGS__                                               \
      }                                                           \
    } while (0)
#else
#  define DS__PAR_FOR(cond, ...) \
    do {                         \
      (void)(cond);              \
      __VA_ARGS__                \
    } while (0)
#endif

#ifdef __cplusplus
}
#endif
#endif

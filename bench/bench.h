/* Shared helpers of the benchmark programs: a monotonic clock and the
 * median of several runs (figures are medians, never single runs). */
#ifndef DSIM_BENCH_H
#define DSIM_BENCH_H

#include <stdlib.h>
#include <time.h>

/* seconds, monotonic */
static inline double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

/* the median of v[0..n) (sorts v) */
static inline double median(double* v, int n) {
  qsort(v, (size_t)n, sizeof(double), cmp_double);
  return v[n / 2];
}

#endif

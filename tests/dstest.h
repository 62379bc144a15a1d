/* Minimal assertion header for dsim tests. Each check prints both operands,
 * the expression, file and line on failure and counts it; a test's main()
 * ends with `return DST_RESULT();` (0 pass, 1 fail). DST_SKIP(...) exits 77,
 * which the Automake harness reports as SKIP. */
#ifndef DSIM_TESTS_DSTEST_H
#define DSIM_TESTS_DSTEST_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int dst_failures = 0;
static int dst_checks = 0;

#define DST_FAIL_AT(...)                                          \
  do {                                                            \
    dst_failures++;                                               \
    fprintf(stderr, "%s:%d: FAIL: ", __FILE__, __LINE__);        \
    fprintf(stderr, __VA_ARGS__);                                 \
    fputc('\n', stderr);                                          \
  } while (0)

/* Boolean condition. */
#define CHECK(cond)                                           \
  do {                                                        \
    dst_checks++;                                             \
    if (!(cond)) DST_FAIL_AT("%s", #cond);                    \
  } while (0)

/* Integers (compared as long long). */
#define CHECK_INT_EQ(a, b)                                                            \
  do {                                                                                \
    long long dst_a = (long long)(a), dst_b = (long long)(b);                         \
    dst_checks++;                                                                     \
    if (dst_a != dst_b) DST_FAIL_AT("%s == %s: %lld != %lld", #a, #b, dst_a, dst_b);  \
  } while (0)

/* Strings (NULL-safe). */
#define CHECK_STR_EQ(a, b)                                                              \
  do {                                                                                  \
    const char *dst_a = (a), *dst_b = (b);                                              \
    dst_checks++;                                                                       \
    if (!dst_a || !dst_b || strcmp(dst_a, dst_b) != 0)                                  \
      DST_FAIL_AT("%s == %s: \"%s\" != \"%s\"", #a, #b, dst_a ? dst_a : "(null)",       \
                  dst_b ? dst_b : "(null)");                                            \
  } while (0)

/* a contains substring b. */
#define CHECK_STR_CONTAINS(a, b)                                                       \
  do {                                                                                 \
    const char *dst_a = (a), *dst_b = (b);                                             \
    dst_checks++;                                                                      \
    if (!dst_a || !dst_b || !strstr(dst_a, dst_b))                                     \
      DST_FAIL_AT("%s contains %s: \"%s\" lacks \"%s\"", #a, #b, dst_a ? dst_a : "(null)", \
                  dst_b ? dst_b : "(null)");                                           \
  } while (0)

/* |a - b| <= atol + rtol*max(|a|,|b|); NaN always fails. */
#define CHECK_CLOSE(a, b, rtol, atol)                                                        \
  do {                                                                                       \
    double dst_a = (double)(a), dst_b = (double)(b);                                         \
    double dst_m = fabs(dst_a) > fabs(dst_b) ? fabs(dst_a) : fabs(dst_b);                    \
    dst_checks++;                                                                            \
    if (!(fabs(dst_a - dst_b) <= (atol) + (rtol)*dst_m))                                     \
      DST_FAIL_AT("%s ~= %s: %.17g vs %.17g (diff %.3g, rtol %g, atol %g)", #a, #b, dst_a,    \
                  dst_b, fabs(dst_a - dst_b), (double)(rtol), (double)(atol));               \
  } while (0)

#define DST_SKIP(...)                           \
  do {                                          \
    fprintf(stderr, "SKIP: ");                  \
    fprintf(stderr, __VA_ARGS__);               \
    fputc('\n', stderr);                        \
    exit(77);                                   \
  } while (0)

static inline int dst_result(const char* file) {
  fprintf(stderr, "%s: %d checks, %d failures\n", file, dst_checks, dst_failures);
  return dst_failures ? 1 : 0;
}
#define DST_RESULT() dst_result(__FILE__)

#endif

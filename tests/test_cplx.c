/* base/cplx.h, the complex numbers of the kernels that run on either
 * backend: every operation gives the bits of the C99 `double complex`
 * expression it stands for (GCC's arithmetic, glibc's csqrt, ccos, csin) on
 * finite operands in the normal range, for complex-step arguments (an
 * imaginary part near 1e-20) and for general ones, so that moving a kernel
 * from `double complex` to dsCplx changes no result on the CPU. */
#include "config.h"

#include <complex.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "base/cplx.h"
#include "tests/dstest.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static double urand(void) { /* [-1, 1) */
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (double)(rng >> 11) / 4503599627370496.0 - 1;
}

static dsCplx of(double complex z) { return dsu_cx(creal(z), cimag(z)); }

/* bits equal (a NaN never is) */
static int same(double a, double b) { return memcmp(&a, &b, sizeof a) == 0; }

static int nbad = 0;

static void expect(const char* what, dsCplx got, double complex want, double complex a, double complex b) {
  dst_checks++;
  if (same(got.re, creal(want)) && same(got.im, cimag(want))) return;
  if (nbad++ < 10)
    DST_FAIL_AT("%s of (%a, %a), (%a, %a): (%a, %a), C99 (%a, %a)", what, creal(a), cimag(a), creal(b), cimag(b),
                got.re, got.im, creal(want), cimag(want));
  else
    dst_failures++;
}

/* a random operand: real part of either sign and magnitude 1e-3 .. 1e3,
 * imaginary part a complex-step seed (step) or of the same scale */
static double complex operand(int step) {
  const double re = urand() * pow(10, 3 * urand());
  const double im = step ? 1e-20 * urand() : urand() * pow(10, 3 * urand());
  return CMPLX(re, im);
}

int main(void) {
  for (int n = 0; n < 20000; n++) {
    const int step = n % 2;
    const double complex a = operand(step), b = operand(step);
    const double x = urand() * 4;
    const dsCplx za = of(a), zb = of(b);
    expect("add", dsu_cadd(za, zb), a + b, a, b);
    expect("sub", dsu_csub(za, zb), a - b, a, b);
    expect("mul", dsu_cmul(za, zb), a * b, a, b);
    expect("div", dsu_cdiv(za, zb), a / b, a, b);
    expect("real div", dsu_cdiv(dsu_cx(x, 0), zb), x / b, x, b);
    expect("scale", dsu_cscale(x, za), x * a, x, a);
    expect("divr", dsu_cdivr(za, x), a / x, a, x);
    expect("rsub", dsu_crsub(x, za), x - a, x, a);
    const double complex p = CMPLX(fabs(creal(a)), cimag(a)); /* csqrt's two branches */
    expect("sqrt", dsu_csqrt(of(p)), csqrt(p), p, 0);
    expect("sqrt", dsu_csqrt(za), csqrt(a), a, 0);
    expect("sqrt real", dsu_csqrt(dsu_cx(fabs(x), 0)), csqrt(CMPLX(fabs(x), 0)), fabs(x), 0);
    /* angles of any size; |imaginary part| < 10, where cosh and sinh are
       finite (glibc rescales beyond 709, base/cplx.h does not) */
    const double complex s = CMPLX(creal(a) * 1e-3 * (1 + 99 * step), cimag(a) * 1e-2);
    expect("cos", dsu_ccos(of(s)), ccos(s), s, 0);
    expect("sin", dsu_csin(of(s)), csin(s), s, 0);
  }
  if (nbad) fprintf(stderr, "test_cplx: %d operations differ from C99\n", nbad);
  return DST_RESULT();
}

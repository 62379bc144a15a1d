/* A complex double that compiles both as C (the CPU engine) and as CUDA C++
 * (DS_HD), for the complex-step derivatives of the kernels that run on
 * either backend (engine/artic_rev.h): C99 `double complex` and <tgmath.h>
 * have no device counterpart, and C has no operators on a struct, so each
 * operation is a function, result returned.
 *
 * Each function computes what GCC and glibc compute for the same C99
 * expression on finite operands in the normal range, in the same order, so
 * a kernel moved from `double complex` to dsCplx keeps its bits:
 *   a * b      (ar br - ai bi, ar bi + ai br)    the product before
 *                                                 Annex G's NaN recovery
 *   x * a      (x ar, x ai) for a real x          (a real operand is not
 *   a / x      (ar / x, ai / x)                    promoted to complex)
 *   x - a      (x - ar, -ai)
 *   a / b      Smith's algorithm (libgcc's __divdc3 without its rescaling
 *              near overflow and underflow, which is exact when it applies)
 *   sqrt, cos, sin: glibc's csqrt, ccos, csin formulas (cos and sin for
 *              |imaginary part| up to 709, where glibc starts rescaling).
 * tests/test_cplx checks the bits against C99 on random operands.
 * Infinities and NaNs are not treated as Annex G asks: complex-step
 * arguments are finite, with an imaginary part of about 1e-20. */
#ifndef DSIM_BASE_CPLX_H
#define DSIM_BASE_CPLX_H

#include <math.h>

#include "base/hd.h"

typedef struct dsCplx {
  double re, im;
} dsCplx;

DS_HD DS_INLINE dsCplx dsu_cx(double re, double im) { /* re + i im */
  dsCplx z;
  z.re = re;
  z.im = im;
  return z;
}

DS_HD DS_INLINE dsCplx dsu_cadd(dsCplx a, dsCplx b) { return dsu_cx(a.re + b.re, a.im + b.im); } /* a + b */
DS_HD DS_INLINE dsCplx dsu_csub(dsCplx a, dsCplx b) { return dsu_cx(a.re - b.re, a.im - b.im); } /* a - b */
DS_HD DS_INLINE dsCplx dsu_cmul(dsCplx a, dsCplx b) {                                           /* a b */
  return dsu_cx(a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re);
}
DS_HD DS_INLINE dsCplx dsu_cscale(double x, dsCplx a) { return dsu_cx(x * a.re, x * a.im); } /* x a, x real */
DS_HD DS_INLINE dsCplx dsu_cdivr(dsCplx a, double x) { return dsu_cx(a.re / x, a.im / x); }  /* a / x, x real */
DS_HD DS_INLINE dsCplx dsu_crsub(double x, dsCplx a) { return dsu_cx(x - a.re, -a.im); }     /* x - a, x real */

/* a / b by Smith's algorithm: the ratio of b's smaller part to its larger
 * one, so that no intermediate squares b. */
DS_HD DS_INLINE dsCplx dsu_cdiv(dsCplx a, dsCplx b) {
  if (fabs(b.re) < fabs(b.im)) {
    const double r = b.re / b.im, den = b.re * r + b.im;
    return dsu_cx((a.re * r + a.im) / den, (a.im * r - a.re) / den);
  }
  const double r = b.im / b.re, den = b.im * r + b.re;
  return dsu_cx((a.im * r + a.re) / den, (a.im - a.re * r) / den);
}

/* principal square root: r = sqrt((|a| + |ar|) / 2) and s = ai / (2 r)
 * (the larger part first, so d +- ar does not cancel) */
DS_HD DS_INLINE dsCplx dsu_csqrt(dsCplx a) {
  if (a.im == 0) return a.re < 0 ? dsu_cx(0, copysign(sqrt(-a.re), a.im)) : dsu_cx(sqrt(a.re), a.im);
  const double d = hypot(a.re, a.im);
  if (a.re > 0) {
    const double r = sqrt(0.5 * (d + a.re));
    return dsu_cx(r, 0.5 * (a.im / r));
  }
  const double s = sqrt(0.5 * (d - a.re));
  return dsu_cx(fabs(0.5 * (a.im / s)), copysign(s, a.im));
}

/* cos(x + iy) = cos x cosh y - i sin x sinh y */
DS_HD DS_INLINE dsCplx dsu_ccos(dsCplx a) { return dsu_cx(cos(a.re) * cosh(a.im), -(sin(a.re) * sinh(a.im))); }
/* sin(x + iy) = sin x cosh y + i cos x sinh y */
DS_HD DS_INLINE dsCplx dsu_csin(dsCplx a) { return dsu_cx(sin(a.re) * cosh(a.im), cos(a.re) * sinh(a.im)); }

#endif

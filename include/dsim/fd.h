/* Finite-difference gradient checks: users can verify the gradient of their
 * own losses (built on dsim's adjoints) against central differences. Always
 * double precision, whatever dsReal is. */
#ifndef DSIM_FD_H
#define DSIM_FD_H

#include "dsim/base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A scalar function of n doubles; user is passed through unchanged. It may
 * read x but must not keep the pointer. */
typedef double (*dsFdScalarFn)(const double* x, int n, void* user);

/* Central differences:
 *   grad[i] = (f(x + h_i e_i) - f(x - h_i e_i)) / (2 h_i),  h_i = h max(1, |x_i|).
 * x is perturbed in place one component at a time and restored exactly
 * (the saved value is written back). 2n evaluations of f.
 * Returns 0, or DS_ERR_INVALID when f, x or grad is NULL (with n > 0), n < 0,
 * or h is not finite and positive. */
DS_API int ds_fd_gradient(dsFdScalarFn f, void* user, double* x, int n, double h, double* grad);

/* Compares a and b component-wise: returns 0 when every
 * |a_i - b_i| <= atol + rtol max(|a_i|, |b_i|) (NaN never passes), else 1.
 * The worst component is the one with the largest ratio
 * |a_i - b_i| / (atol + rtol max(|a_i|, |b_i|)) (a NaN is worst of all);
 * *worst_index gets its index (-1 when n = 0) and *worst_error its
 * |a_i - b_i|, on success as on failure. Either pointer may be NULL.
 * Returns DS_ERR_INVALID when a or b is NULL (with n > 0), n < 0, or a
 * tolerance is negative or NaN. */
DS_API int ds_fd_compare(const double* a, const double* b, int n, double rtol, double atol,
                         int* worst_index, double* worst_error);

#ifdef __cplusplus
}
#endif
#endif

/* CUDA smoke test: with --enable-cuda the library carries a real kernel; on a
 * machine with a GPU it must compute y += a*x. Skips (77) without CUDA or
 * without a visible device. */
#include "config.h"

#include "dsim/dsim.h"
#include "tests/dstest.h"
#ifdef DS_HAVE_CUDA
#  include "cuda/smoke.h"
#endif

int main(void) {
  CHECK(ds_cuda_device_count() >= 0);
#ifndef DS_HAVE_CUDA
  CHECK_INT_EQ(ds_cuda_built(), 0);
  CHECK_INT_EQ(ds_cuda_device_count(), 0);
  if (dst_failures) return DST_RESULT();
  DST_SKIP("built without --enable-cuda");
#else
  CHECK_INT_EQ(ds_cuda_built(), 1);
  if (ds_cuda_device_count() == 0) DST_SKIP("no CUDA device visible");
  enum { N = 1000 };
  static double x[N], y[N];
  for (int i = 0; i < N; i++) {
    x[i] = i * 0.5;
    y[i] = 1.0;
  }
  CHECK_INT_EQ(ds__cuda_smoke_axpy(N, 2.0, x, y), DS_OK);
  for (int i = 0; i < N; i += 97) CHECK_CLOSE(y[i], 1.0 + 2.0 * i * 0.5, 0, 0);
  return DST_RESULT();
#endif
}

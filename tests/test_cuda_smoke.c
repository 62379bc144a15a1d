/* The device layer's CUDA table (base/backend.h): present exactly when the
 * build has CUDA (ds_cuda_built), and on a machine with a GPU its memory
 * operations round-trip bytes on device 0: alloc (zeroed), put, copy, zero,
 * get, free_bytes, sync. The stages' launches are test_cuda_parity's. Skips
 * (77) without CUDA or without a visible device. */
#include "config.h"

#include "base/backend.h"
#include "dsim/dsim.h"
#include "tests/dstest.h"

int main(void) {
  const dsBackend* host = ds__backend(DS_DEVICE_CPU);
  CHECK(host != NULL && host->run_batch && host->run_raster && host->sync);
  const dsBackend* be = ds__backend(DS_DEVICE_CUDA);
  CHECK_INT_EQ(be != NULL, ds_cuda_built());
  CHECK(ds_cuda_device_count() >= 0);
  if (!be) {
    CHECK_INT_EQ(ds_cuda_device_count(), 0);
    if (dst_failures) return DST_RESULT();
    DST_SKIP("built without --enable-cuda");
  }
  CHECK(be->alloc && be->release && be->put && be->get && be->copy && be->zero && be->run_batch &&
        be->run_raster && be->sync && be->open && be->close && be->last_error);
  if (ds_cuda_device_count() == 0) DST_SKIP("no CUDA device visible");
  void* ctx = NULL;
  char err[256] = "";
  CHECK_INT_EQ(be->open(0, &ctx, err, sizeof err), 0);
  enum { N = 1000 };
  static double x[N], y[N];
  for (int i = 0; i < N; i++) x[i] = i * 0.5;
  size_t avail = 0;
  CHECK_INT_EQ(be->free_bytes(ctx, &avail), 0);
  CHECK(avail >= 2 * sizeof x);
  double* a = (double*)be->alloc(ctx, sizeof x);
  double* b = (double*)be->alloc(ctx, sizeof x);
  CHECK(a && b);
  CHECK_INT_EQ(be->get(ctx, y, a, sizeof y), 0); /* zeroed */
  for (int i = 0; i < N; i += 97) CHECK_CLOSE(y[i], 0, 0, 0);
  CHECK_INT_EQ(be->put(ctx, a, x, sizeof x), 0);
  CHECK_INT_EQ(be->copy(ctx, b, a, sizeof x), 0);
  CHECK_INT_EQ(be->zero(ctx, a, sizeof x / 2), 0);
  CHECK_INT_EQ(be->sync(ctx), 0);
  CHECK_INT_EQ(be->get(ctx, y, b, sizeof y), 0);
  for (int i = 0; i < N; i += 97) CHECK_CLOSE(y[i], x[i], 0, 0);
  CHECK_INT_EQ(be->get(ctx, y, a, sizeof y), 0);
  for (int i = 0; i < N; i += 97) CHECK_CLOSE(y[i], i < N / 2 ? 0 : x[i], 0, 0);
  be->release(ctx, a);
  be->release(ctx, b);
  be->close(ctx);
  return DST_RESULT();
}

/* Device names and checks (dsim/device.h): "cpu", "cuda", "cuda:N", the
 * errors for bad names, for CUDA in a build without it and for a device
 * that is not there; the device list. Runs with and without a GPU. */
#include "config.h"

#include "dstest.h"
#include "dsim/device.h"

int main(void) {
  char err[512], name[32];
  dsDevice d;
  CHECK_INT_EQ(ds_device_parse("--device", "cpu", &d, err, sizeof err), 0);
  CHECK_INT_EQ(d.kind, DS_DEVICE_CPU);
  CHECK_INT_EQ(ds_device_check("--device", d, err, sizeof err), 0);
  CHECK_STR_EQ(ds_device_name(d, name, sizeof name), "cpu");

  /* syntax errors name what was expected */
  const char* bad[] = {"gpu", "cuda:", "cuda:x", "cuda:-1", "cuda:1x", "CPU", "cuda0", ""};
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    CHECK_INT_EQ(ds_device_parse("--device", bad[k], &d, err, sizeof err), DS_ERR_PARSE);
    CHECK(strstr(err, "expected") != NULL);
    CHECK(strstr(err, "--device") != NULL);
  }

  const int n = ds_cuda_device_count();
  int rc = ds_device_parse("--device", "cuda:3", &d, err, sizeof err);
  if (!ds_cuda_built()) {
    CHECK_INT_EQ(n, 0);
    CHECK_INT_EQ(rc, DS_ERR_UNSUPPORTED);
    CHECK_STR_EQ(err, "--device cuda:3: this dsim was built without CUDA (./configure --enable-cuda)");
    CHECK_INT_EQ(ds_device_parse("run.device", "cuda", &d, err, sizeof err), DS_ERR_UNSUPPORTED);
    CHECK(strncmp(err, "run.device cuda: this dsim was built without CUDA", 49) == 0);
    dsDeviceInfo info;
    CHECK_INT_EQ(ds_cuda_device_info(0, &info), DS_ERR_UNSUPPORTED);
    /* a device value made by hand is still checked */
    d.kind = DS_DEVICE_CUDA;
    d.index = 0;
    CHECK_INT_EQ(ds_device_check("--device", d, err, sizeof err), DS_ERR_UNSUPPORTED);
  } else {
    CHECK_INT_EQ(rc, 0);
    CHECK_INT_EQ(d.kind, DS_DEVICE_CUDA);
    CHECK_INT_EQ(d.index, 3);
    CHECK_STR_EQ(ds_device_name(d, name, sizeof name), "cuda:3");
    CHECK_INT_EQ(ds_device_parse("--device", "cuda", &d, err, sizeof err), 0);
    CHECK_INT_EQ(d.index, 0);
    d.index = n; /* one past the last */
    CHECK_INT_EQ(ds_device_check("--device", d, err, sizeof err), DS_ERR_UNSUPPORTED);
    if (n == 0)
      CHECK(strstr(err, "no CUDA device is visible") != NULL);
    else if (n == 1)
      CHECK(strstr(err, "only 1 CUDA device") != NULL);
    else
      CHECK(strstr(err, "CUDA devices (cuda:0 ..") != NULL);
    dsDeviceInfo info;
    CHECK_INT_EQ(ds_cuda_device_info(n, &info), DS_ERR_RANGE);
    for (int i = 0; i < n; i++) {
      CHECK_INT_EQ(ds_cuda_device_info(i, &info), 0);
      CHECK(info.name[0] != '\0');
      CHECK(info.total_memory > 0);
      CHECK(info.cc_major >= 3);
      printf("cuda:%d: %s, %.1f GiB, compute capability %d.%d\n", i, info.name,
             (double)info.total_memory / (1 << 30), info.cc_major, info.cc_minor);
      d.index = i;
      CHECK_INT_EQ(ds_device_check("--device", d, err, sizeof err), 0);
    }
  }
  return DST_RESULT();
}

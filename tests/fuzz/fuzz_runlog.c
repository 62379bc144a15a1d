/* libFuzzer harness for the run-log reader (io/runlog.c): each input is
 * written to a file and read by every public reader, the way `dsim info` and
 * `dsim export` read a log. Built and run by scripts/fuzz-runlog (clang,
 * -fsanitize=fuzzer,address,undefined) with a seed corpus made at build time
 * (tests/runlog_hostile --write: a valid log and every hostile case).
 *
 * A finding in dsim's reader (an overflow, a leak, an allocation past the
 * memory bound, an abort) fails the run. libhdf5 itself is not instrumented;
 * its own failures on corrupt metadata are what `dsim info`/`export` isolate
 * in a child process (cli/files.c). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dsim/base.h"
#include "dsim/runlog.h"

static char g_path[4096];

int LLVMFuzzerInitialize(int* argc, char*** argv) {
  (void)argc;
  (void)argv;
  const char* tmp = getenv("TMPDIR");
  snprintf(g_path, sizeof g_path, "%s/dsim-fuzz-runlog-%ld.h5", tmp && *tmp ? tmp : "/tmp", (long)getpid());
  /* allocations past this are refused by the reader, not attempted */
  ds_set_memory_limit((size_t)256 << 20);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FILE* fp = fopen(g_path, "wb");
  if (!fp) return 0;
  fwrite(data, 1, size, fp);
  fclose(fp);
  char err[1024];
  dsRunSummary s;
  ds_runlog_read_summary(g_path, &s, err, sizeof err);
  char* text = NULL;
  if (ds_runlog_read_config(g_path, &text, err, sizeof err) == DS_OK && text) (void)strlen(text);
  ds_runlog_free(text);
  int n = 0;
  double *l = NULL, *m = NULL, *w = NULL, *g = NULL;
  if (ds_runlog_read_iterations(g_path, &n, &l, &m, &w, &g, err, sizeof err) == DS_OK && n > 0)
    (void)(l[n - 1] + m[n - 1] + w[n - 1] + g[n - 1]); /* every row is there */
  ds_runlog_free(l);
  ds_runlog_free(m);
  ds_runlog_free(w);
  ds_runlog_free(g);
  static const char* const eps[3] = {"first", "best", "last"};
  for (int i = 0; i < 3; i++) {
    int nf = 0, h = 0, wd = 0;
    uint8_t* rgba = NULL;
    if (ds_runlog_read_frames(g_path, eps[i], &nf, &h, &wd, &rgba, err, sizeof err) == DS_OK)
      (void)rgba[(size_t)nf * (size_t)h * (size_t)wd * 4 - 1]; /* the whole buffer is there */
    ds_runlog_free(rgba);
  }
  return 0;
}

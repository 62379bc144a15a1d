/* libFuzzer harness for the run-log reader (io/runlog.c): each input is
 * read by every public reader, the way `dsim info` and `dsim export` read a
 * log, from memory (ds__runlog_read_image: libhdf5's core driver over the
 * input) rather than from a file written per input: the same parsing, at a
 * fraction of the system calls. Built and run by scripts/fuzz-runlog (clang,
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

#include <hdf5.h>

#include "dsim/base.h"
#include "dsim/runlog.h"
#include "io/runlog_internal.h"

static const char g_path[] = "fuzz-input.h5"; /* names the input in messages only */

int LLVMFuzzerInitialize(int* argc, char*** argv) {
  (void)argc;
  (void)argv;
  /* allocations past this are refused by the reader, not attempted */
  ds_set_memory_limit((size_t)256 << 20);
  /* let libhdf5 keep its freed blocks for the next input: its metadata
   * cache (over 512 KiB) passes the default per-list limit of 64 KiB and
   * otherwise goes back to the system, to be mapped and zeroed again on
   * every open (most of the time per execution was these page faults) */
  H5set_free_list_limits(64 << 20, 16 << 20, 64 << 20, 16 << 20, 64 << 20, 16 << 20);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0; /* libhdf5 refuses an empty image before reading */
  ds__runlog_read_image(data, size);
  char err[1024];
  /* the summary (dsim info: every series and /meta) on every input; then
   * one other reader, chosen by the last byte, so that each input costs two
   * opens of the file: libhdf5 sets up a new metadata cache (half a
   * megabyte, zeroed) for each, which dominated the time per execution */
  dsRunSummary s;
  ds_runlog_read_summary(g_path, &s, err, sizeof err);
  static const char* const eps[3] = {"first", "best", "last"};
  const int pick = data[size - 1] % 5;
  if (pick < 3) {
    int nf = 0, h = 0, wd = 0;
    uint8_t* rgba = NULL;
    if (ds_runlog_read_frames(g_path, eps[pick], &nf, &h, &wd, &rgba, err, sizeof err) == DS_OK)
      (void)rgba[(size_t)nf * (size_t)h * (size_t)wd * 4 - 1]; /* the whole buffer is there */
    ds_runlog_free(rgba);
  } else if (pick == 3) {
    char* text = NULL;
    if (ds_runlog_read_config(g_path, &text, err, sizeof err) == DS_OK && text) (void)strlen(text);
    ds_runlog_free(text);
  } else {
    int n = 0, np = 0;
    double* p = NULL;
    if (ds_runlog_read_params(g_path, &n, &np, &p, err, sizeof err) == DS_OK && n > 0)
      (void)p[(size_t)n * (size_t)np - 1]; /* every row is there */
    ds_runlog_free(p);
  }
  ds__runlog_read_image(NULL, 0);
  return 0;
}

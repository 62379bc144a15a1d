/* `tests/runlog_config RUN.h5`: the run log's /config text on stdout, exactly
 * as stored (for tests that rerun a run from its log without h5py). Exit 0,
 * 77 in a build without HDF5, 1 on any other error (the message on stderr). */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "dsim/dsim.h"
#include "dsim/runlog.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: runlog_config RUN.h5\n");
    return 1;
  }
  char err[1024] = "", *text = NULL;
  const int rc = ds_runlog_read_config(argv[1], &text, err, sizeof err);
  if (rc == DS_ERR_UNSUPPORTED) return 77;
  if (rc) {
    fprintf(stderr, "runlog_config: %s\n", err);
    return 1;
  }
  fwrite(text, 1, strlen(text), stdout);
  ds_runlog_free(text);
  return 0;
}

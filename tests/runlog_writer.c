/* Helper for tests/test_runlog_kill.sh: writes a run log one iteration at a
 * time, printing "iteration K" after each flushed append, and sleeping in
 * between so that the test can kill it with SIGKILL mid-run.
 *   runlog_writer PATH NITER SLEEP_MS */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "dsim/runlog.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: runlog_writer PATH NITER SLEEP_MS\n");
    return 2;
  }
  int niter = atoi(argv[2]), ms = atoi(argv[3]);
  char err[512];
  dsRunLogDef def = ds_default_runlog_def();
  def.env = "test";
  def.method = "image";
  def.nparams = 16;
  def.overwrite = 1;
  dsRunLog* log = NULL;
  if (ds_runlog_create(argv[1], &def, &log, err, sizeof err)) {
    fprintf(stderr, "%s\n", err);
    return 1;
  }
  enum { H = 32, W = 32, F = 4 };
  static unsigned char frames[F * H * W * 4];
  for (int i = 0; i < niter; i++) {
    double p[16];
    for (int k = 0; k < 16; k++) p[k] = i + 0.01 * k;
    dsRunIteration it = {1.0 / (i + 1), 2.0 / (i + 1), 0.1 * i, 1.0, p};
    if (ds_runlog_append_iteration(log, &it)) {
      fprintf(stderr, "%s\n", ds_runlog_last_error(log));
      return 1;
    }
    for (int k = 0; k < F * H * W * 4; k++) frames[k] = (unsigned char)(k + i);
    dsEpisodeRecord ep = {0};
    ep.iteration = i;
    ep.nframes = F;
    ep.height = H;
    ep.width = W;
    ep.frames = frames;
    if (ds_runlog_write_episode(log, "last", &ep)) {
      fprintf(stderr, "%s\n", ds_runlog_last_error(log));
      return 1;
    }
    printf("iteration %d\n", i);
    fflush(stdout);
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
  }
  return ds_runlog_close(log, "completed") ? 1 : 0;
}

/* `dsim info [RUN.h5]`: the build, or a summary of a run log. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "dsim/dsim.h"
#include "dsim/runlog.h"

static int info_build(void) {
  dsBuildInfo bi;
  ds_build_info(&bi);
  printf("dsim %s\n", bi.version);
  printf("precision:  %s (dsReal is %d bytes)\n", bi.real_bytes == 8 ? "double" : "single", bi.real_bytes);
  if (bi.openmp)
    printf("OpenMP:     on, %d thread%s\n", bi.max_threads, bi.max_threads == 1 ? "" : "s");
  else
    printf("OpenMP:     off (single-threaded build)\n");
  if (bi.cuda)
    printf("CUDA:       on, %d visible device%s%s\n", bi.cuda_devices, bi.cuda_devices == 1 ? "" : "s",
           bi.cuda_devices ? "" : " (no GPU, no driver, or CUDA_VISIBLE_DEVICES hides them)");
  else
    printf("CUDA:       off (configure --enable-cuda to build it)\n");
  printf("devices:    cpu%s\n", bi.cuda_devices ? "" : " (the only one)");
  for (int i = 0; i < bi.cuda_devices; i++) {
    dsDeviceInfo di;
    char mem[32], fr[32];
    if (ds_cuda_device_info(i, &di)) {
      printf("            cuda:%d  (properties unavailable)\n", i);
      continue;
    }
    printf("            cuda:%d  %s, %s (%s free), compute capability %d.%d, %d SMs\n", i, di.name,
           ds_format_size(di.total_memory, mem, sizeof mem), ds_format_size(di.free_memory, fr, sizeof fr),
           di.cc_major, di.cc_minor, di.multiprocessors);
  }
  printf("HDF5:       %s\n", bi.hdf5 ? bi.hdf5_version : "off (built --without-hdf5)");
  printf("cJSON:      %s\n", bi.cjson_version);
  printf("libpng:     %s\n", bi.png_version);
  printf("giflib:     %s\n", bi.gif ? "on" : "off");
  printf("build:      %s\n", bi.options);
  return DS_EXIT_OK;
}

static int info_run(const char* path) {
  dsRunSummary s;
  char err[1024];
  int rc = ds__cli_probe_runlog("info", path, NULL); /* in a child first: cli/files.c */
  if (rc) return rc;
  rc = ds_runlog_read_summary(path, &s, err, sizeof err);
  if (rc) {
    fprintf(stderr, "dsim info: %s\n", err);
    return ds__cli_exit_code(rc, DS_CLI_RUNLOG);
  }
  printf("run:        %s\n", path);
  printf("written by: dsim %s\n", s.version);
  printf("env:        %s\n", s.env);
  printf("method:     %s\n", s.method);
  printf("seed:       %llu\n", (unsigned long long)s.seed);
  printf("threads:    %d\n", s.threads);
  printf("started:    %s\n", s.start_time);
  printf("status:     %s\n", s.status);
  if (s.niterations > 0)
    printf("iterations: %d (numbered 0 to %d)\n", s.niterations, s.niterations - 1);
  else
    printf("iterations: 0\n");
  if (s.niterations > 0) {
    /* the best is the lowest loss (dsim/run.h); the metric is the task's own measure */
    printf("loss:       first %.6g, last %.6g, lowest %.6g at iteration %d (the best)\n", s.first_loss, s.last_loss,
           s.best_loss, s.best_iteration);
    printf("metric:     first %.6g, last %.6g, at the best iteration %.6g\n", s.first_metric, s.last_metric,
           s.best_metric);
    printf("wall time:  %.3f s\n", s.wall_time);
  }
  printf("parameters: %d per iteration\n", s.nparams);
  printf("episodes:  %s%s%s%s\n", s.has_episode[0] ? " first" : "", s.has_episode[1] ? " best" : "",
         s.has_episode[2] ? " last" : "", (s.has_episode[0] | s.has_episode[1] | s.has_episode[2]) ? "" : " none");
  /* a killed run's kept best may lag (dsim/run.h); a log of an older dsim may have chosen it by the metric */
  if (s.has_episode[1] && s.best_episode_iteration >= 0 && s.best_episode_iteration != s.best_iteration)
    printf("best episode: iteration %d, %s: iteration %d\n", s.best_episode_iteration,
           strcmp(s.status, "running") ? "not the lowest loss (its writer chose by another rule)"
                                       : "an older best: the run stopped before recording the best logged iteration",
           s.best_iteration);
  return DS_EXIT_OK;
}

int ds__cli_info(int argc, char** argv) {
  const char* path = NULL;
  for (int i = 1; i < argc; i++) {
    if (ds__cli_is_help(argv[i])) {
      printf("usage: dsim info [RUN.h5]\n\n"
             "Without an argument: the version, precision, OpenMP threads, the devices (cpu and\n"
             "every CUDA device: name, memory, compute capability) and the\n"
             "versions of the libraries dsim was built with. With a run log: its summary\n"
             "(environment, method, seed, status, iterations, loss and metric, episodes).\n");
      return DS_EXIT_OK;
    }
    if (argv[i][0] == '-') {
      fprintf(stderr, "dsim info: unknown option '%s'\n", argv[i]);
      return DS_EXIT_USAGE;
    }
    if (path) {
      fprintf(stderr, "dsim info: unexpected argument '%s'\n", argv[i]);
      return DS_EXIT_USAGE;
    }
    path = argv[i];
  }
  return path ? info_run(path) : info_build();
}

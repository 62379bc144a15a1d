/* dsim: the command-line front end. Dispatches to subcommands; no physics
 * here. */
#include <stdio.h>
#include <string.h>

#include "dsim/dsim.h"
#include "cli/cli.h"

static const dsCliCommand commands[] = {
    {"info", "print version, precision, threads, CUDA devices and library versions", ds_cli_info},
};
enum { NCOMMANDS = sizeof commands / sizeof commands[0] };

static void usage(FILE* out) {
  fprintf(out,
          "usage: dsim [--version] [--help] COMMAND [ARGS]\n"
          "\n"
          "dsim is a differentiable simulation and control environment suite.\n"
          "\n"
          "commands:\n");
  for (int i = 0; i < NCOMMANDS; i++) fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
  fprintf(out,
          "\n"
          "Run `dsim COMMAND --help` for the options of a command.\n"
          "\n"
          "exit status: 0 success, 1 run-time failure, 2 usage error, 3 bad input file,\n"
          "130 interrupted.\n");
}

int ds_cli_info(int argc, char** argv) {
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      printf("usage: dsim info\n\nPrints the version, precision, OpenMP threads, CUDA devices and the\n"
             "versions of the libraries dsim was built with.\n");
      return DS_EXIT_OK;
    }
    fprintf(stderr, "dsim info: unexpected argument '%s'\n", argv[i]);
    return DS_EXIT_USAGE;
  }
  dsBuildInfo bi;
  ds_build_info(&bi);
  printf("dsim %s\n", bi.version);
  printf("precision:  %s (dsReal is %d bytes)\n", bi.real_bytes == 8 ? "double" : "single", bi.real_bytes);
  if (bi.openmp)
    printf("OpenMP:     on, %d thread%s\n", bi.max_threads, bi.max_threads == 1 ? "" : "s");
  else
    printf("OpenMP:     off (single-threaded build)\n");
  if (bi.cuda)
    printf("CUDA:       on, %d visible device%s\n", bi.cuda_devices, bi.cuda_devices == 1 ? "" : "s");
  else
    printf("CUDA:       off (configure --enable-cuda to build it)\n");
  printf("HDF5:       %s\n", bi.hdf5 ? bi.hdf5_version : "off (built --without-hdf5)");
  printf("cJSON:      %s\n", bi.cjson_version);
  printf("libpng:     %s\n", bi.png_version);
  printf("giflib:     %s\n", bi.gif ? "on" : "off");
  printf("build:      %s\n", bi.options);
  return DS_EXIT_OK;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    usage(stderr);
    return DS_EXIT_USAGE;
  }
  const char* cmd = argv[1];
  if (!strcmp(cmd, "--version") || !strcmp(cmd, "-V")) {
    printf("dsim %s\n", ds_version_string());
    return DS_EXIT_OK;
  }
  if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
    usage(stdout);
    return DS_EXIT_OK;
  }
  for (int i = 0; i < NCOMMANDS; i++)
    if (!strcmp(cmd, commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
  if (cmd[0] == '-')
    fprintf(stderr, "dsim: unknown option '%s'\n", cmd);
  else
    fprintf(stderr, "dsim: unknown command '%s'\n", cmd);
  fprintf(stderr, "Run 'dsim --help' for the list of commands.\n");
  return DS_EXIT_USAGE;
}

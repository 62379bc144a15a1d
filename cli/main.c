/* dsim: the command-line front end. Dispatches to subcommands; no physics
 * here. */
#define _POSIX_C_SOURCE 200809L /* SIGXFSZ */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsim/dsim.h"
#include "cli/cli.h"

static const dsCliCommand commands[] = {
    {"info", "print the build (version, precision, threads, CUDA, libraries), or summarise a run log", ds__cli_info},
    {"export", "turn a run log into PNG frames, an animated GIF or a CSV of metrics", ds__cli_export},
    {"run", "optimise a controller against an environment's goal and log the run (HDF5)", ds__cli_run},
    {"sysid", "identify physical parameters from video (gradSim's system identification); --collect merges logs",
     ds__cli_sysid},
    {"landscape", "the sysid loss and its gradient on a 1-D or 2-D grid of parameter values (CSV, HDF5, PNG)",
     ds__cli_landscape},
    {"report", "one self-contained HTML page of run, sysid and landscape logs (curves, frames, parameters)",
     ds__cli_report},
    {"config", "print a complete run config (an env's defaults, or a file filled in), or list the keys", ds__cli_config},
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

int main(int argc, char** argv) {
  if (argc < 2) {
    usage(stderr);
    return DS_EXIT_USAGE;
  }
  const char* cmd = argv[1];
  /* Past a file-size limit (ulimit -f) a write fails with EFBIG instead of
   * killing the process, so a run log ends as on a full disk: the iterations
   * written so far stay readable and the command exits 1 (docs/reliability.md). */
  signal(SIGXFSZ, SIG_IGN);
  const char* mem = getenv("DSIM_MAX_MEMORY");
  size_t bytes = 0;
  if (mem && *mem && ds_parse_size(mem, &bytes)) {
    fprintf(stderr, "dsim: DSIM_MAX_MEMORY='%s': expected a size such as 8G, 512M or 1e9\n", mem);
    return DS_EXIT_USAGE;
  }
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

int ds__cli_is_help(const char* arg) { return !strcmp(arg, "--help") || !strcmp(arg, "-h"); }

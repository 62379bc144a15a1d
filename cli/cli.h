/* dsim command-line tool: shared declarations for its subcommands. */
#ifndef DSIM_CLI_H
#define DSIM_CLI_H

#include <stddef.h>
#include <stdio.h>

#include "dsim/device.h"

/* Exit codes (documented in the README and `dsim --help`). */
enum {
  DS_EXIT_OK = 0,          /* success */
  DS_EXIT_FAILURE = 1,     /* the job failed at run time (divergence, I/O) */
  DS_EXIT_USAGE = 2,       /* bad command line: unknown command or flag */
  DS_EXIT_INPUT = 3,       /* bad input file: config, mesh, run log */
  DS_EXIT_INTERRUPTED = 130 /* stopped by SIGINT after a clean close (128 + the signal: 143 SIGTERM) */
};

/* What failed, for ds__cli_exit_code (cli/exit.c has the table). */
enum {
  DS_CLI_INPUT = 0,  /* reading the inputs, building the job from them */
  DS_CLI_RUNLOG = 1, /* reading a run log (info, export) */
  DS_CLI_JOB = 2     /* the job itself: iterations, writing outputs */
};
/* The exit code of library error err (0 or a negative DS_ERR_*) at stage. */
int ds__cli_exit_code(int err, int stage);

/* --field-png (cli/sysid_field_png.c): parameter k of identification s, a
 * per-element scalar field with a truth, true (top) and recovered (bottom):
 * the elements at their rest centroids seen along z, binned, ln(value) on a
 * blue-white-red scale shared by both panels (in the PNG's Description). */
struct dsSysid;
int ds__cli_field_png(struct dsSysid* s, int k, const char* path, char* err, size_t errlen);

typedef struct dsCliCommand {
  const char* name;
  const char* summary;
  int (*fn)(int argc, char** argv); /* argv[0] is the command name */
} dsCliCommand;

int ds__cli_info(int argc, char** argv);
int ds__cli_export(int argc, char** argv);
int ds__cli_run(int argc, char** argv);
int ds__cli_config(int argc, char** argv);

/* Load a plugin (cli/plugin.c) for command cmd; DS_EXIT_OK or an exit code
 * after printing why. */
int ds__cli_load_plugin(const char* cmd, const char* path);
/* The shared --plugin option of every command that takes an env: 0 when
 * argv[*i] is not --plugin; else 1, with *i moved past its value and *rc
 * DS_EXIT_OK (loaded, or loaded before) or an exit code after printing why. */
int ds__cli_plugin_option(const char* cmd, int argc, char** argv, int* i, int* rc);
/* The plugins loaded so far (their paths as given; NULL past the count). */
int ds__cli_plugin_count(void);
const char* ds__cli_plugin_path(int i);
/* The --plugin lines of a command's usage text, the option in a column of
 * width col. */
void ds__cli_plugin_usage(FILE* out, int col);
/* run.device (text, set by `what`: "--device" or "run.device"): DS_EXIT_OK for
 * the CPU, else a message on stderr and DS_EXIT_USAGE (cli/device.c). */
int ds__cli_check_device(const char* cmd, const char* what, const char* text, dsDevice* out);

/* ---- files (cli/files.c) ----
 * Read the run log in a child process the way the command will (summary,
 * config, and the frames of episode when not NULL): DS_EXIT_OK when it reads,
 * else the exit code after printing why (a crash or hang inside libhdf5 is
 * a corrupt file, exit 3). */
int ds__cli_probe_runlog(const char* cmd, const char* path, const char* episode);
/* 1 when a and b name the same existing file. */
int ds__cli_same_file(const char* a, const char* b);
/* Before writing out: refused when it is the input, a directory, exists
 * without force, or its directory is missing (message printed). */
int ds__cli_check_output(const char* cmd, const char* out, const char* input, int force);
/* A uniquely named temporary file beside out (mkstemp): its fd (path in
 * tmp), or -1 after printing why. */
int ds__cli_temp_for(const char* cmd, const char* out, char* tmp, size_t n);
/* Move tmp to out with the user's umask; without force an existing out is
 * kept (and tmp removed). DS_EXIT_OK or an exit code after printing why. */
int ds__cli_commit_temp(const char* cmd, const char* tmp, const char* out, int force);

/* The config file of target: an existing file, or NAME.json in the bundled
 * configs (cli/cmd_run.c has the search order); DS_EXIT_OK or an exit code
 * after printing why (messages start "dsim CMD: "). */
int ds__cli_locate_config(const char* cmd, const char* target, char* path, size_t len);
int ds__cli_sysid(int argc, char** argv);
int ds__cli_landscape(int argc, char** argv);
/* `dsim report` (cli/cmd_report.c) */
int ds__cli_report(int argc, char** argv);

/* 1 when argv[i] is --help or -h. */
int ds__cli_is_help(const char* arg);

#endif

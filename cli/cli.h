/* dsim command-line tool: shared declarations for its subcommands. */
#ifndef DSIM_CLI_H
#define DSIM_CLI_H

/* Exit codes (documented in the README and `dsim --help`). */
enum {
  DS_EXIT_OK = 0,          /* success */
  DS_EXIT_FAILURE = 1,     /* the job failed at run time (divergence, I/O) */
  DS_EXIT_USAGE = 2,       /* bad command line: unknown command or flag */
  DS_EXIT_INPUT = 3,       /* bad input file: config, mesh, run log */
  DS_EXIT_INTERRUPTED = 130 /* stopped by SIGINT after a clean close */
};

typedef struct dsCliCommand {
  const char* name;
  const char* summary;
  int (*fn)(int argc, char** argv); /* argv[0] is the command name */
} dsCliCommand;

int ds_cli_info(int argc, char** argv);
int ds_cli_export(int argc, char** argv);
int ds_cli_run(int argc, char** argv);
int ds_cli_config(int argc, char** argv);

struct dsEnvDef;
struct dsTrainerDef;
struct dsRunDef;
/* The complete run config of the three definitions (every key) as JSON
 * (cli/cmd_config.c; free() it); NULL when out of memory. */
char* ds_cli_config_json(const struct dsEnvDef* def, const struct dsTrainerDef* td, const struct dsRunDef* rd);

/* Load a plugin (cli/plugin.c) for command cmd; DS_EXIT_OK or an exit code
 * after printing why. */
int ds_cli_load_plugin(const char* cmd, const char* path);

/* 1 when argv[i] is --help or -h. */
int ds_cli_is_help(const char* arg);

#endif

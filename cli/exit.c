/* The one table from library error codes (dsim/base.h) to the exit codes of
 * cli/cli.h, as the README documents them: 1 a run-time failure (divergence,
 * I/O, memory), 3 a bad input file (config, mesh, run log, video).
 *
 * The same code can be either, depending on what failed: DS_ERR_IO reading a
 * config is a bad input, writing a run log a run-time failure. Hence two
 * columns: DS_CLI_INPUT for errors of reading the inputs and building the
 * job from them (config -> env, trainer, sysid objects; a run log read by
 * info/export), DS_CLI_JOB for errors of the job itself. Out of memory is a
 * run-time failure in both; DS_ERR_UNSUPPORTED of an input is the input
 * asking for what this build or env class cannot do (3), except that a
 * build --without-hdf5 cannot read any run log (the build's failure, 1:
 * DS_CLI_RUNLOG). */
#include "config.h"

#include "cli/cli.h"
#include "dsim/base.h"

typedef struct ExitRow {
  int err;
  unsigned char input, runlog, job; /* exit code per stage */
} ExitRow;

static const ExitRow kExit[] = {
    {DS_OK, DS_EXIT_OK, DS_EXIT_OK, DS_EXIT_OK},
    {DS_ERR_NOMEM, DS_EXIT_FAILURE, DS_EXIT_FAILURE, DS_EXIT_FAILURE},
    {DS_ERR_INVALID, DS_EXIT_INPUT, DS_EXIT_INPUT, DS_EXIT_FAILURE},
    {DS_ERR_IO, DS_EXIT_INPUT, DS_EXIT_INPUT, DS_EXIT_FAILURE},
    {DS_ERR_PARSE, DS_EXIT_INPUT, DS_EXIT_INPUT, DS_EXIT_FAILURE},
    {DS_ERR_CONFIG, DS_EXIT_INPUT, DS_EXIT_INPUT, DS_EXIT_FAILURE},
    {DS_ERR_MESH, DS_EXIT_INPUT, DS_EXIT_INPUT, DS_EXIT_FAILURE},
    {DS_ERR_DIVERGED, DS_EXIT_INPUT, DS_EXIT_INPUT, DS_EXIT_FAILURE},
    {DS_ERR_INVERTED, DS_EXIT_INPUT, DS_EXIT_INPUT, DS_EXIT_FAILURE},
    {DS_ERR_RANGE, DS_EXIT_INPUT, DS_EXIT_INPUT, DS_EXIT_FAILURE},
    {DS_ERR_UNSUPPORTED, DS_EXIT_INPUT, DS_EXIT_FAILURE, DS_EXIT_FAILURE},
    {DS_ERR_ARENA, DS_EXIT_INPUT, DS_EXIT_INPUT, DS_EXIT_FAILURE},
    {DS_ERR_STATE, DS_EXIT_INPUT, DS_EXIT_INPUT, DS_EXIT_FAILURE},
    {DS_ERR_NOTFOUND, DS_EXIT_INPUT, DS_EXIT_INPUT, DS_EXIT_FAILURE},
    {DS_ERR_CUDA, DS_EXIT_FAILURE, DS_EXIT_FAILURE, DS_EXIT_FAILURE},
    {DS_ERR_FORMAT, DS_EXIT_INPUT, DS_EXIT_INPUT, DS_EXIT_FAILURE},
    {DS_ERR_INTERRUPTED, DS_EXIT_INTERRUPTED, DS_EXIT_INTERRUPTED, DS_EXIT_INTERRUPTED},
};

/* a new error code needs its row (the list in dsim/base.h ends at -(DS_ERR_COUNT_ - 1)) */
_Static_assert(sizeof kExit / sizeof kExit[0] == DS_ERR_COUNT_, "cli/exit.c: one row per DS_ERR_* code");

int ds__cli_exit_code(int err, int stage) {
  for (size_t i = 0; i < sizeof kExit / sizeof kExit[0]; i++)
    if (kExit[i].err == err)
      return stage == DS_CLI_JOB ? kExit[i].job : stage == DS_CLI_RUNLOG ? kExit[i].runlog : kExit[i].input;
  return err ? DS_EXIT_FAILURE : DS_EXIT_OK; /* a code outside the list */
}

/* The CLI's one table from error codes to exit codes (cli/exit.c) against
 * the README's rule: 1 run-time failure (memory, I/O of outputs,
 * divergence), 3 bad input file, 130 interrupted; every DS_ERR_* code has a
 * row in every stage. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli/cli.h"
#include "dsim/base.h"
#include "tests/dstest.h"

int main(void) {
  const int stages[3] = {DS_CLI_INPUT, DS_CLI_RUNLOG, DS_CLI_JOB};
  for (int q = 0; q < 3; q++) {
    CHECK_INT_EQ(ds__cli_exit_code(DS_OK, stages[q]), DS_EXIT_OK);
    CHECK_INT_EQ(ds__cli_exit_code(DS_ERR_NOMEM, stages[q]), DS_EXIT_FAILURE);
    CHECK_INT_EQ(ds__cli_exit_code(DS_ERR_INTERRUPTED, stages[q]), DS_EXIT_INTERRUPTED);
    for (int e = 0; e > -DS_ERR_COUNT_; e--) {
      const int x = ds__cli_exit_code(e, stages[q]);
      CHECK(x == DS_EXIT_OK || x == DS_EXIT_FAILURE || x == DS_EXIT_INPUT || x == DS_EXIT_INTERRUPTED);
      CHECK((x == DS_EXIT_OK) == (e == 0));
    }
  }
  /* inputs: whatever is wrong with a config, mesh or log is the input's */
  CHECK_INT_EQ(ds__cli_exit_code(DS_ERR_IO, DS_CLI_INPUT), DS_EXIT_INPUT);
  CHECK_INT_EQ(ds__cli_exit_code(DS_ERR_CONFIG, DS_CLI_INPUT), DS_EXIT_INPUT);
  CHECK_INT_EQ(ds__cli_exit_code(DS_ERR_FORMAT, DS_CLI_RUNLOG), DS_EXIT_INPUT);
  /* a class that cannot run on the asked device (a config's choice) vs a
   * build that cannot read run logs */
  CHECK_INT_EQ(ds__cli_exit_code(DS_ERR_UNSUPPORTED, DS_CLI_INPUT), DS_EXIT_INPUT);
  CHECK_INT_EQ(ds__cli_exit_code(DS_ERR_UNSUPPORTED, DS_CLI_RUNLOG), DS_EXIT_FAILURE);
  /* the job: every failure is a run-time failure */
  CHECK_INT_EQ(ds__cli_exit_code(DS_ERR_DIVERGED, DS_CLI_JOB), DS_EXIT_FAILURE);
  CHECK_INT_EQ(ds__cli_exit_code(DS_ERR_IO, DS_CLI_JOB), DS_EXIT_FAILURE);
  CHECK_INT_EQ(ds__cli_exit_code(-1000, DS_CLI_JOB), DS_EXIT_FAILURE);
  return DST_RESULT();
}

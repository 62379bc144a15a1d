# Whole-library tests: golden hashes of every bundled config (training
# losses, final state, gradients) on 1 and 2 threads, pinned bit for bit;
# and the include-order check of the areas.
check_PROGRAMS += tests/test_golden
tests_test_golden_SOURCES = tests/test_golden.c
TESTS += tests/test_golden tests/test_includes.sh tests/test_function_length.sh
EXTRA_DIST += tests/test_includes.sh tests/test_function_length.sh

# The documentation: docs/config.md is `dsim config --reference`, regenerated
# and compared (and every relative link in the pages checked) by this test.
TESTS += tests/test_config_reference.sh tests/test_docs_numbers.sh

# Config strings with quotes, backslashes, control characters and UTF-8
# round-trip through `dsim config` and a run log's /config (read back by
# tests/runlog_config).
check_PROGRAMS += tests/runlog_config
tests_runlog_config_SOURCES = tests/runlog_config.c
TESTS += tests/test_config_strings.sh
EXTRA_DIST += tests/test_config_strings.sh
EXTRA_DIST += tests/test_config_reference.sh tests/test_docs_numbers.sh CHANGELOG.md \
  docs/architecture.md docs/config.md docs/python.md docs/sysid.md docs/performance.md \
  docs/cli.md docs/control.md docs/c-api.md docs/devices.md docs/rigid-bodies.md docs/build.md \
  docs/rl.md docs/reliability.md docs/scale.md docs/articulated.md docs/integrators.md \
  docs/learning.md docs/images/sysid-field-beam-2mat.png docs/images/sysid-field-cloth-band.png \
  docs/images/runner_ppo.png docs/images/runner_control.png docs/images/smoke_control.gif docs/images/plume_sysid.gif

# Frames rendered on demand: losses and rewards equal those of frames
# rendered as they are taken; a run log's frames equal a re-run's renders.
check_PROGRAMS += tests/test_frames
tests_test_frames_SOURCES = tests/test_frames.c
TESTS += tests/test_frames

# Envs on the batched engine (dsEnvDef.batch_engine, what a CUDA device runs)
# against the serial engine: bitwise states, gradients to rounding, rewinds,
# refusals.
check_PROGRAMS += tests/test_env_device
tests_test_env_device_SOURCES = tests/test_env_device.c
TESTS += tests/test_env_device

# The ABI table (include/dsim/abi.h): names unique, every struct, field, error
# code and constant listed with the value the compiler gives it.
check_PROGRAMS += tests/test_abi
tests_test_abi_SOURCES = tests/test_abi.c
TESTS += tests/test_abi

# `dsim report` (issue 37): the HTML page of run, sysid and landscape logs and
# its bad inputs; the page in headless Chromium (skipped without chromium)
TESTS += tests/test_report.sh tests/test_report_browser.sh
EXTRA_DIST += tests/test_report.sh tests/test_report_browser.sh docs/images/report.png

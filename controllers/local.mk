# Controllers (issue 6): sinusoid network, optimisers, whole-episode
# optimisation, receding-horizon MPC, baselines, episode recorder; `dsim run`.
libdsim_core_la_SOURCES += controllers/sinnet.c controllers/optim.c controllers/trainer.c \
  controllers/recorder.c controllers/ctrl_rng.h
dsiminclude_HEADERS += include/dsim/controller.h
check_PROGRAMS += tests/test_controller tests/test_optim tests/test_mpc
tests_test_controller_SOURCES = tests/test_controller.c
tests_test_optim_SOURCES = tests/test_optim.c
tests_test_mpc_SOURCES = tests/test_mpc.c
TESTS += tests/test_controller tests/test_optim tests/test_mpc
# `dsim run`: bundled configs are looked up in the source tree and the
# installed $(pkgdatadir)/configs (see cli/cmd_run.c for the whole order).
dsim_SOURCES += cli/cmd_run.c
dsim_CPPFLAGS = $(AM_CPPFLAGS) -DDS_CONFIGS_SRCDIR='"$(abs_top_srcdir)/configs"' \
  -DDS_CONFIGS_DATADIR='"$(pkgdatadir)/configs"'
TESTS += tests/test_run_cli.sh
EXTRA_DIST += tests/test_run_cli.sh
EXTRA_DIST += scripts/reproduce-results

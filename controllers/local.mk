# controllers/: sinusoid network, optimisers, whole-episode optimisation,
# receding-horizon MPC, baselines, episode recorder. Only the env API below.
libdsim_core_la_SOURCES += controllers/sinnet.c controllers/optim.c controllers/trainer.c \
  controllers/recorder.c controllers/lbfgs.c controllers/sysid.c controllers/sysid_field.h controllers/sysid_field.c controllers/run.c controllers/landscape.c controllers/sysid_video.c \
  controllers/sysid_views.h controllers/sysid_views.c
dsiminclude_HEADERS += include/dsim/controller.h include/dsim/sysid.h include/dsim/run.h
check_PROGRAMS += tests/test_controller tests/test_optim tests/test_mpc
tests_test_controller_SOURCES = tests/test_controller.c
tests_test_optim_SOURCES = tests/test_optim.c
tests_test_mpc_SOURCES = tests/test_mpc.c
TESTS += tests/test_controller tests/test_optim tests/test_mpc
check_PROGRAMS += tests/test_sysid
tests_test_sysid_SOURCES = tests/test_sysid.c
TESTS += tests/test_sysid
# Sysid groups: objects identified together in one lockstep batch, against
# the same objects one by one (bitwise on separate engines, 1e-9 on one).
check_PROGRAMS += tests/test_sysid_group
tests_test_sysid_group_SOURCES = tests/test_sysid_group.c
TESTS += tests/test_sysid_group
# The run object (dsim/run.h): a short run through the C API against the same
# run through `dsim run` (same final loss bits), stop requests, bad configs.
check_PROGRAMS += tests/test_run
tests_test_run_SOURCES = tests/test_run.c
TESTS += tests/test_run
# bundled configs: found by io/config_find.c (dsim/config_dirs.h)
# a killed run's best episode at most RUN_BEST_LAG iterations stale (20 kills of dsim run)
TESTS += tests/test_run_kill_best.sh
EXTRA_DIST += tests/test_run_kill_best.sh
# Material fields in sysid: element graphs, TV/Laplacian gradient against
# central differences, stages (frozen values bitwise), a two-layer field
# identified on a small beam, the mixed loss, config errors naming the key.
check_PROGRAMS += tests/test_sysid_fields
tests_test_sysid_fields_SOURCES = tests/test_sysid_fields.c
TESTS += tests/test_sysid_fields
# Several views and camera calibration in sysid: one view through the views
# path equals the usual one, the two-view gradient (physics and cameras)
# against central differences, depth identified with two views, a camera
# recovered with the initial velocity, two-view footage, errors naming the
# list entry and key.
check_PROGRAMS += tests/test_sysid_views
tests_test_sysid_views_SOURCES = tests/test_sysid_views.c
TESTS += tests/test_sysid_views
check_PROGRAMS += tests/test_sysid_light
tests_test_sysid_light_SOURCES = tests/test_sysid_light.c
TESTS += tests/test_sysid_light

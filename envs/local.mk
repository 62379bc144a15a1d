# envs/: environments behind the step/reset/gradient API of
# include/dsim/env.h, their scene generators and the bundled configs.
libdsim_core_la_SOURCES += envs/env_priv.h envs/env.c envs/env_views.c envs/env_camsim.c envs/env_episode.c envs/env_backward.c envs/env_window.c \
  envs/env_force.c envs/env_frames.c \
  envs/env_def.c envs/batch_priv.h envs/batch.c envs/batch_shared.c envs/mesh_gear.c envs/mesh_walker.c
# The bundled classes: one file each, listed in envs/classes.h.
libdsim_core_la_SOURCES += envs/classes.h envs/walker.c envs/control_fem.c envs/control_cloth.c envs/walker_springs.c \
  envs/rigid_toss.c envs/beam.c envs/pendulum.c envs/runner.c envs/smoke.c \
  envs/smoke_common.h envs/smoke_common.c envs/plume.c
dsiminclude_HEADERS += include/dsim/env.h include/dsim/scenes.h include/dsim/batch.h
dist_configs_DATA += configs/walker.json configs/control-fem.json configs/control-cloth.json \
  configs/walker-springs.json configs/rigid-toss.json configs/beam.json \
  configs/sysid-mass.json configs/sysid-beam.json configs/sysid-cloth.json \
  configs/sysid-beam-mu.json configs/sysid-beam-lambda.json \
  configs/sysid-rigid-mass.json configs/sysid-rigid-contact.json configs/sysid-rigid-contact-smooth.json \
  configs/sysid-rigid-contact-slope.json \
  configs/control-fem-gradsim.json configs/walker-gradsim.json
dist_configs_DATA += configs/pendulum.json configs/double-pendulum.json configs/sysid-pendulum.json \
  configs/sysid-double-pendulum.json configs/sysid-beam-2mat.json configs/sysid-beam-3mat.json \
  configs/sysid-cloth-band.json configs/sysid-tiny-mass.json configs/control-fem-implicit.json configs/runner.json \
  configs/smoke-control.json configs/control-cloth-implicit.json configs/walker-implicit.json \
  configs/smoke-plume.json configs/sysid-plume.json configs/sysid-plume-obstacle.json \
  configs/sysid-plume-64.json
# sysid on footage from the camera simulator (docs/sysid.md, footage from a different renderer)
dist_configs_DATA += configs/sysid-mass-camsim.json configs/sysid-beam-mu-camsim.json \
  configs/sysid-beam-lambda-camsim.json configs/sysid-cloth-camsim.json
# the Table 3 rows under the implicit integrator at 10.7x the step (docs/integrators.md)
dist_configs_DATA += configs/sysid-mass-implicit.json configs/sysid-beam-mu-implicit.json \
  configs/sysid-beam-lambda-implicit.json configs/sysid-cloth-implicit.json
check_PROGRAMS += tests/test_env_grad tests/test_env_config tests/test_env tests/test_env_target tests/test_cloth_view
tests_test_cloth_view_SOURCES = tests/test_cloth_view.c
tests_test_env_grad_SOURCES = tests/test_env_grad.c
tests_test_env_config_SOURCES = tests/test_env_config.c
tests_test_env_SOURCES = tests/test_env.c
tests_test_env_target_SOURCES = tests/test_env_target.c
TESTS += tests/test_env_grad tests/test_env_config tests/test_env tests/test_env_target tests/test_cloth_view
BENCH_PROGS += bench/bench_env
BENCH_PROGS += bench/bench_batch
bench_bench_batch_SOURCES = bench/bench_batch.c
bench_bench_batch_CPPFLAGS = $(AM_CPPFLAGS) -DDS_BENCH_SRCDIR='"$(abs_top_srcdir)"'
bench_bench_env_SOURCES = bench/bench_env.c
bench_bench_env_CPPFLAGS = $(AM_CPPFLAGS) -DDS_BENCH_SRCDIR='"$(abs_top_srcdir)"'
# A user-written env class registered through ds_env_register: registry,
# config keys, gradients vs central differences, the trainer.
check_PROGRAMS += tests/test_env_register
tests_test_env_register_SOURCES = tests/test_env_register.c tests/hang_env.h
TESTS += tests/test_env_register
# Batched envs: bitwise equal to separate envs on 1 and 2 threads, autoreset,
# per-env errors.
check_PROGRAMS += tests/test_batch
tests_test_batch_SOURCES = tests/test_batch.c
TESTS += tests/test_batch
# Window backward (learning through the simulator): actions, a set start
# state and the final state's adjoint against central differences.
check_PROGRAMS += tests/test_learn_window
tests_test_learn_window_SOURCES = tests/test_learn_window.c
TESTS += tests/test_learn_window
# The same for articulated envs (runner, double-pendulum), and chained windows.
check_PROGRAMS += tests/test_artic_window
tests_test_artic_window_SOURCES = tests/test_artic_window.c
TESTS += tests/test_artic_window

# A batch on the batched engine without gradients shares one engine (env i:
# instance i): bitwise what separate serial envs give, envs out of step.
check_PROGRAMS += tests/test_batch_shared
tests_test_batch_shared_SOURCES = tests/test_batch_shared.c
TESTS += tests/test_batch_shared

# Lockstep batches with gradients: one shared engine with its tape (and
# separate engines) against separate serial envs, forward and backward.
check_PROGRAMS += tests/test_batch_lockstep
tests_test_batch_lockstep_SOURCES = tests/test_batch_lockstep.c
TESTS += tests/test_batch_lockstep
# rigid-toss: sliding distance, state with the body, image-loss gradients
# reaching the body's parameters and the impulse.
check_PROGRAMS += tests/test_rigid_env
tests_test_rigid_env_SOURCES = tests/test_rigid_env.c
TESTS += tests/test_rigid_env
check_PROGRAMS += tests/test_batch_frames
tests_test_batch_frames_SOURCES = tests/test_batch_frames.c
TESTS += tests/test_batch_frames
# The bundled classes include the public headers only and are each listed
# once in envs/classes.h.
TESTS += tests/test_env_classes.sh
EXTRA_DIST += tests/test_env_classes.sh
check_PROGRAMS += tests/test_artic_env
tests_test_artic_env_SOURCES = tests/test_artic_env.c
TESTS += tests/test_artic_env
TESTS += tests/test_artic_run.sh
EXTRA_DIST += tests/test_artic_run.sh
# runner: the articulated planar runner as an env (gradients with ground
# contact against central differences, threads bitwise, dense rewards).
check_PROGRAMS += tests/test_runner_env
tests_test_runner_env_SOURCES = tests/test_runner_env.c
TESTS += tests/test_runner_env
EXTRA_DIST += python/tests/test_runner.py
# External forces set per step (hybrid models, pushes): their gradient over
# an episode and a window against central differences.
check_PROGRAMS += tests/test_env_force
tests_test_env_force_SOURCES = tests/test_env_force.c
TESTS += tests/test_env_force
# smoke-control: the fluid env (gradients against central differences,
# checkpointed = full tape and 1 = 2 threads bitwise, bad input).
check_PROGRAMS += tests/test_smoke_env
tests_test_smoke_env_SOURCES = tests/test_smoke_env.c
TESTS += tests/test_smoke_env
EXTRA_DIST += python/tests/test_smoke.py
# smoke-plume: the 3-D fluid env (sysid gradient against central
# differences through the volume renderer, checkpointed = full, threads,
# bad input) and a small identification.
check_PROGRAMS += tests/test_plume_env
tests_test_plume_env_SOURCES = tests/test_plume_env.c
TESTS += tests/test_plume_env tests/test_sysid_plume.sh
EXTRA_DIST += tests/test_sysid_plume.sh
# the fluid envs' states and window adjoints (central differences, chained
# windows, checkpoints, threads and the batch bitwise, set_state's rules).
check_PROGRAMS += tests/test_fluid_window
tests_test_fluid_window_SOURCES = tests/test_fluid_window.c
TESTS += tests/test_fluid_window

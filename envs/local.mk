# Environments (issue 5): walker, control-fem, control-cloth, walker-springs
# behind the step/reset/gradient API of include/dsim/env.h.
libdsim_core_la_SOURCES += envs/env.c envs/env_scene.c envs/env_config.c envs/env_priv.h
dsiminclude_HEADERS += include/dsim/env.h
dist_configs_DATA += configs/walker.json configs/control-fem.json configs/control-cloth.json \
  configs/walker-springs.json
BENCH_PROGS += bench/bench_env
bench_bench_env_SOURCES = bench/bench_env.c
check_PROGRAMS += tests/test_env_grad
tests_test_env_grad_SOURCES = tests/test_env_grad.c
TESTS += tests/test_env_grad
check_PROGRAMS += tests/test_env_config
tests_test_env_config_SOURCES = tests/test_env_config.c
TESTS += tests/test_env_config
check_PROGRAMS += tests/test_env
tests_test_env_SOURCES = tests/test_env.c
TESTS += tests/test_env

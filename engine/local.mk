# Engine core: model/data/gradient structures, builders, the step and its
# adjoint, the tape (full or checkpointed).
libdsim_core_la_SOURCES += engine/model.c engine/data.c engine/grad.c engine/step.c engine/engine_priv.h
dsiminclude_HEADERS += include/dsim/engine.h

# Engine tests (one per engine file) and the engine benchmark.
EXTRA_DIST += tests/enginetest.h
check_PROGRAMS += tests/test_model tests/test_step tests/test_rollout_grad tests/test_checkpoint tests/test_determinism tests/test_alloc
tests_test_model_SOURCES = tests/test_model.c
tests_test_step_SOURCES = tests/test_step.c
tests_test_rollout_grad_SOURCES = tests/test_rollout_grad.c
tests_test_checkpoint_SOURCES = tests/test_checkpoint.c
tests_test_determinism_SOURCES = tests/test_determinism.c
TESTS += tests/test_model tests/test_step tests/test_rollout_grad tests/test_checkpoint tests/test_determinism \
  tests/test_alloc
tests_test_alloc_SOURCES = tests/test_alloc.c
BENCH_PROGS += bench/bench_engine
bench_bench_engine_SOURCES = bench/bench_engine.c

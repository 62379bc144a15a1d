# Build-level tests: error codes, version, build info, CUDA smoke, the CLI.
check_PROGRAMS += tests/test_base tests/test_cuda_smoke
tests_test_base_SOURCES = tests/test_base.c
tests_test_cuda_smoke_SOURCES = tests/test_cuda_smoke.c
TESTS += tests/test_base tests/test_cuda_smoke tests/test_cli.sh
EXTRA_DIST += tests/test_cli.sh
# Golden hashes of every bundled config (training losses, final state,
# gradients) on 1 and 2 threads: behaviour pinned bit for bit.
check_PROGRAMS += tests/test_golden
tests_test_golden_SOURCES = tests/test_golden.c
TESTS += tests/test_golden

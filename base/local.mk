# base/: errors, the replaceable allocator, the log hook, the RNG, version
# and threads. Every other area may include it; it includes nothing of theirs.
libdsim_core_la_SOURCES += base/base.c base/threads.c base/internal.h base/hd.h base/rng.h
dsiminclude_HEADERS += include/dsim/base.h
check_PROGRAMS += tests/test_base
tests_test_base_SOURCES = tests/test_base.c
TESTS += tests/test_base

# base/: errors, the replaceable allocator, the log hook, the RNG, version
# and threads. Every other area may include it; it includes nothing of theirs.
libdsim_core_la_SOURCES += base/base.c base/threads.c base/internal.h base/hd.h base/cplx.h base/rng.h \
  base/backend.h base/backend.c
# The device layer's one build-time choice (base/backend.h): without CUDA
# this file says there is no CUDA backend; with it, cuda/batch.cu defines it.
if !DS_HAVE_CUDA
libdsim_core_la_SOURCES += base/backend_none.c
endif
dsiminclude_HEADERS += include/dsim/base.h
check_PROGRAMS += tests/test_base
tests_test_base_SOURCES = tests/test_base.c
TESTS += tests/test_base

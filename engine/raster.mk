# Soft rasterizer, image losses and PNG I/O (issue 4).
libdsim_core_la_SOURCES += engine/raster.c engine/raster_kernel.h
dsiminclude_HEADERS += include/dsim/raster.h
check_PROGRAMS += tests/test_raster_grad
tests_test_raster_grad_SOURCES = tests/test_raster_grad.c
TESTS += tests/test_raster_grad
BENCH_PROGS += bench/bench_raster
bench_bench_raster_SOURCES = bench/bench_raster.c

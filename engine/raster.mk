# Soft rasterizer, image losses and PNG I/O (issue 4).
libdsim_core_la_SOURCES += engine/raster.c engine/raster_kernel.h engine/loss.c io/png.c
dsiminclude_HEADERS += include/dsim/raster.h include/dsim/image.h

check_PROGRAMS += tests/test_raster tests/test_raster_grad tests/test_loss tests/test_png
tests_test_raster_SOURCES = tests/test_raster.c
tests_test_raster_grad_SOURCES = tests/test_raster_grad.c
tests_test_loss_SOURCES = tests/test_loss.c
tests_test_png_SOURCES = tests/test_png.c
TESTS += tests/test_raster tests/test_raster_grad tests/test_loss tests/test_png

BENCH_PROGS += bench/bench_raster
bench_bench_raster_SOURCES = bench/bench_raster.c

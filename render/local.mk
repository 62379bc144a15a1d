# render/: the soft rasterizer and the image losses. Takes vertices, faces
# and a camera; knows nothing of the engine's model.
libdsim_core_la_SOURCES += render/raster.c render/raster_kernel.h render/loss.c
dsiminclude_HEADERS += include/dsim/raster.h include/dsim/image.h
check_PROGRAMS += tests/test_raster tests/test_raster_grad tests/test_loss
tests_test_raster_SOURCES = tests/test_raster.c
tests_test_raster_grad_SOURCES = tests/test_raster_grad.c
tests_test_loss_SOURCES = tests/test_loss.c
TESTS += tests/test_raster tests/test_raster_grad tests/test_loss
BENCH_PROGS += bench/bench_raster
bench_bench_raster_SOURCES = bench/bench_raster.c

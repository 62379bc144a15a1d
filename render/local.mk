# render/: the soft rasterizer and the image losses. Takes vertices, faces
# and a camera; knows nothing of the engine's model.
libdsim_core_la_SOURCES += render/raster.c render/raster_kernel.h render/raster_lanes.h render/loss.c render/loss_kernel.h \
  render/raster_stages.h render/raster_batch.h render/raster_batch.c
libdsim_core_la_SOURCES += render/raster_api.c render/overlay.c render/overlay.h render/footage.c
dsiminclude_HEADERS += include/dsim/raster.h include/dsim/image.h
check_PROGRAMS += tests/test_raster tests/test_raster_grad tests/test_loss tests/test_batch_render
tests_test_raster_SOURCES = tests/test_raster.c
tests_test_raster_grad_SOURCES = tests/test_raster_grad.c
check_PROGRAMS += tests/test_camera_grad
tests_test_camera_grad_SOURCES = tests/test_camera_grad.c
TESTS += tests/test_camera_grad
tests_test_loss_SOURCES = tests/test_loss.c
tests_test_batch_render_SOURCES = tests/test_batch_render.c
TESTS += tests/test_raster tests/test_raster_grad tests/test_loss tests/test_batch_render
BENCH_PROGS += bench/bench_raster bench/bench_raster_batch
bench_bench_raster_SOURCES = bench/bench_raster.c
bench_bench_raster_batch_SOURCES = bench/bench_raster_batch.c
EXTRA_DIST += bench/raster_meshes.h
# Emission-absorption volume rendering of a 3-D density grid through the
# rasterizer's camera, with its adjoint (docs/fluids.md "3-D rendering").
libdsim_core_la_SOURCES += render/volume.c render/camera_frame.h
dsiminclude_HEADERS += include/dsim/volume.h
check_PROGRAMS += tests/test_volume
tests_test_volume_SOURCES = tests/test_volume.c
TESTS += tests/test_volume
# The camera simulator (render/footage.c) and sysid.video "camsim": hard
# z-buffer pixels, noise, blur, background, a short identification.
check_PROGRAMS += tests/test_sysid_footage
tests_test_sysid_footage_SOURCES = tests/test_sysid_footage.c
TESTS += tests/test_sysid_footage

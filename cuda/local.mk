# Devices and the batched engine (dsim/device.h, dsim/engine_batch.h): the
# device names and checks (base/device.c), the backend-neutral driver and
# the CPU backend of the batched engine (engine/batch_*), built always; and
# cuda/: the optional CUDA backend (./configure --enable-cuda), compiled by
# nvcc through scripts/cudalt into libtool objects of the core library. The
# kernels' bodies are engine/batch_body.h, shared with the CPU backend.
libdsim_core_la_SOURCES += base/device.c engine/batch_body.h engine/batch_priv.h \
  engine/batch_sim.c engine/batch_cpu.c engine/batch_artic.c engine/batch_artic.h engine/batch_artic_body.h \
  engine/batch_implicit.c engine/batch_implicit.h
dsiminclude_HEADERS += include/dsim/device.h include/dsim/engine_batch.h
CUDA_SOURCES = cuda/device.cu cuda/batch.cu
EXTRA_DIST += cuda/cuda_priv.h
EXTRA_DIST += $(CUDA_SOURCES) scripts/cudalt scripts/gpu-check
NVCC_CPPFLAGS = -I$(top_srcdir)/include -I$(top_builddir)/include -I$(top_srcdir) -I$(top_builddir)
if DS_HAVE_CUDA
CUDA_LTOBJS = $(CUDA_SOURCES:.cu=.lo)
libdsim_core_la_LIBADD += $(CUDA_LTOBJS) $(CUDA_LIBS)
EXTRA_libdsim_core_la_DEPENDENCIES += $(CUDA_LTOBJS)
endif
SUFFIXES = .cu .lo
# -fmad=false: no fused multiply-adds, so the device rounds as the CPU build
# (-ffp-contract=off) does and parity differences come from libm only.
.cu.lo:
	$(AM_V_GEN)$(SHELL) $(top_srcdir)/scripts/cudalt $@ $(NVCC) $(NVCC_CPPFLAGS) $(DS_NVCC_ARCH) \
	  -O3 -std=c++17 -fmad=false -DHAVE_CONFIG_H $(NVCCFLAGS) -c $<
CLEANFILES += cuda/*.lo cuda/*.o cuda/.libs/*.o
# the headers the CUDA objects include: rebuild them when these change
cuda/batch.lo: $(top_srcdir)/base/backend.h $(top_srcdir)/cuda/cuda_priv.h $(top_srcdir)/engine/batch_body.h \
  $(top_srcdir)/engine/forces.h $(top_srcdir)/engine/step_body.h $(top_srcdir)/engine/rigid.h $(top_srcdir)/engine/force_tet.h \
  $(top_srcdir)/engine/force_tri.h $(top_srcdir)/engine/force_spring.h $(top_srcdir)/engine/force_bend.h \
  $(top_srcdir)/engine/force_aero.h $(top_srcdir)/engine/force_contact.h $(top_srcdir)/engine/dsmath.h \
  $(top_srcdir)/render/raster_stages.h $(top_srcdir)/render/raster_kernel.h $(top_srcdir)/render/loss_kernel.h \
  $(top_srcdir)/engine/batch_artic_body.h $(top_srcdir)/engine/artic_model_body.h $(top_srcdir)/engine/artic_step.h \
  $(top_srcdir)/engine/artic_dyn.h $(top_srcdir)/engine/artic_rev.h $(top_srcdir)/engine/artic_priv.h \
  $(top_srcdir)/engine/artic_model.h $(top_srcdir)/base/cplx.h $(top_srcdir)/base/hd.h \
  $(top_srcdir)/engine/fluid_batch_body.h $(top_srcdir)/engine/fluid_body.h $(top_srcdir)/include/dsim/fluid.h
cuda/device.lo: $(top_srcdir)/cuda/cuda_priv.h $(top_srcdir)/include/dsim/device.h
check_PROGRAMS += tests/test_cuda_smoke tests/test_device tests/test_batch_sim tests/test_batch_artic tests/test_batch_implicit \
  tests/test_cuda_parity
tests_test_cuda_smoke_SOURCES = tests/test_cuda_smoke.c
tests_test_device_SOURCES = tests/test_device.c
tests_test_batch_sim_SOURCES = tests/test_batch_sim.c
tests_test_batch_artic_SOURCES = tests/test_batch_artic.c
tests_test_batch_implicit_SOURCES = tests/test_batch_implicit.c
tests_test_cuda_parity_SOURCES = tests/test_cuda_parity.c
EXTRA_DIST += tests/batchtest.h tests/test_device_cli.sh
TESTS += tests/test_cuda_smoke tests/test_device tests/test_batch_sim tests/test_batch_artic tests/test_batch_implicit \
  tests/test_cuda_parity tests/test_device_cli.sh
BENCH_PROGS += bench/bench_cuda
bench_bench_cuda_SOURCES = bench/bench_cuda.c

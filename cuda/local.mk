# cuda/: the optional CUDA backend (./configure --enable-cuda), compiled by
# nvcc through scripts/cudalt into libtool objects of the core library.
CUDA_SOURCES = cuda/smoke.cu
EXTRA_DIST += cuda/smoke.h
EXTRA_DIST += $(CUDA_SOURCES) scripts/cudalt
NVCC_CPPFLAGS = -I$(top_srcdir)/include -I$(top_builddir)/include -I$(top_srcdir) -I$(top_builddir)
if DS_HAVE_CUDA
CUDA_LTOBJS = $(CUDA_SOURCES:.cu=.lo)
libdsim_core_la_LIBADD += $(CUDA_LTOBJS) $(CUDA_LIBS)
EXTRA_libdsim_core_la_DEPENDENCIES += $(CUDA_LTOBJS)
endif
SUFFIXES = .cu .lo
.cu.lo:
	$(AM_V_GEN)$(SHELL) $(top_srcdir)/scripts/cudalt $@ $(NVCC) $(NVCC_CPPFLAGS) $(DS_NVCC_ARCH) \
	  -O3 -std=c++17 -DHAVE_CONFIG_H $(NVCCFLAGS) -c $<
CLEANFILES += cuda/*.lo cuda/*.o cuda/.libs/*.o
check_PROGRAMS += tests/test_cuda_smoke
tests_test_cuda_smoke_SOURCES = tests/test_cuda_smoke.c
TESTS += tests/test_cuda_smoke

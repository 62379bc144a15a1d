# Per-element force models (forward + adjoint side by side, one header each,
# compiled into the engine's element loops and the CUDA kernels), the math
# helpers they share, and the public finite-difference utility.
libdsim_core_la_SOURCES += engine/dsmath.h engine/force_spring.h engine/force_contact.h \
  engine/force_tri.h engine/force_tet.h engine/force_bend.h engine/force_aero.h \
  engine/fd.c
dsiminclude_HEADERS += include/dsim/fd.h

# Tests: one per force model (adjoint vs central differences, forward vs
# energy or reference) and one for the FD utility. forcecheck.h is the
# shared gradient-check harness.
EXTRA_DIST += tests/forcecheck.h
check_PROGRAMS += tests/test_force_spring tests/test_force_contact tests/test_force_tri \
  tests/test_force_tet tests/test_force_bend tests/test_force_aero tests/test_fd
tests_test_force_spring_SOURCES = tests/test_force_spring.c
tests_test_force_contact_SOURCES = tests/test_force_contact.c
tests_test_force_tri_SOURCES = tests/test_force_tri.c
tests_test_force_tet_SOURCES = tests/test_force_tet.c
tests_test_force_bend_SOURCES = tests/test_force_bend.c
tests_test_force_aero_SOURCES = tests/test_force_aero.c
tests_test_fd_SOURCES = tests/test_fd.c
TESTS += tests/test_force_spring tests/test_force_contact tests/test_force_tri \
  tests/test_force_tet tests/test_force_bend tests/test_force_aero tests/test_fd

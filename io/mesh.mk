# Meshes: readers (io/), generators and topology helpers (engine/).
libdsim_core_la_SOURCES += engine/mesh.c engine/mesh_internal.h
dsiminclude_HEADERS += include/dsim/mesh.h
libdsim_core_la_SOURCES += engine/mesh_gear.c engine/mesh_walker.c
check_PROGRAMS += tests/test_mesh
tests_test_mesh_SOURCES = tests/test_mesh.c
TESTS += tests/test_mesh
libdsim_core_la_SOURCES += io/mesh_obj.c io/mesh_tetgen.c
check_PROGRAMS += tests/test_mesh_io
tests_test_mesh_io_SOURCES = tests/test_mesh_io.c
TESTS += tests/test_mesh_io
EXTRA_DIST += \
  tests/data/cube.obj tests/data/cube_crlf.obj tests/data/empty.obj \
  tests/data/bad_index.obj tests/data/bad_negative.obj tests/data/bad_zero.obj \
  tests/data/bad_token.obj tests/data/bad_face_token.obj tests/data/bad_keyword.obj \
  tests/data/bad_huge.obj tests/data/bad_dup.obj tests/data/bad_short_face.obj \
  tests/data/degenerate.obj tests/data/truncated.obj \
  tests/data/bipyramid.node tests/data/bipyramid.ele \
  tests/data/bipyramid0.node tests/data/bipyramid0.ele \
  tests/data/bad_dim.node tests/data/bad_count.node tests/data/bad_token.node \
  tests/data/bad_gap.node tests/data/bad_fields.node \
  tests/data/bad_extra.ele tests/data/bad_truncated.ele tests/data/bad_inverted.ele \
  tests/data/bad_index.ele tests/data/bad_zero.ele tests/data/bad_dup.ele \
  tests/data/bad_quadratic.ele

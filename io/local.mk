# io/: config text (cJSON), HDF5 run logs, PNG and GIF, mesh readers, and the
# library versions of `dsim info`. The only area that includes cJSON.h,
# hdf5.h, png.h and gif_lib.h.
libdsim_core_la_SOURCES += io/cfg.c io/cfg.h io/runlog.c io/runlog_internal.h io/gif.c io/gif.h io/png.c io/libinfo.c \
  io/mesh_obj.c io/mesh_tetgen.c io/mesh_read.h io/video.c
libdsim_core_la_SOURCES += io/config_api.c
dsiminclude_HEADERS += include/dsim/runlog.h include/dsim/video.h
check_PROGRAMS += tests/test_config tests/test_runlog tests/runlog_writer tests/runlog_hostile tests/test_png tests/test_mesh_io \
  tests/test_png_fifo
tests_test_config_SOURCES = tests/test_config.c
tests_test_runlog_SOURCES = tests/test_runlog.c
tests_test_runlog_CPPFLAGS = $(AM_CPPFLAGS) $(HDF5_CFLAGS)
tests_runlog_writer_SOURCES = tests/runlog_writer.c
tests_runlog_hostile_SOURCES = tests/runlog_hostile.c
tests_runlog_hostile_CPPFLAGS = $(AM_CPPFLAGS) $(HDF5_CFLAGS)
tests_runlog_hostile_LDADD = $(LDADD) $(HDF5_LIBS)
tests_test_png_SOURCES = tests/test_png.c
tests_test_mesh_io_SOURCES = tests/test_mesh_io.c
tests_test_png_fifo_SOURCES = tests/test_png_fifo.c
TESTS += tests/test_config tests/test_runlog tests/runlog_hostile tests/test_runlog_kill.sh tests/test_png tests/test_mesh_io \
  tests/test_png_fifo tests/test_runlog_full.sh tests/test_runlog_concurrent.sh tests/test_runlog_flipped.sh
EXTRA_DIST += tests/test_runlog_kill.sh tests/test_runlog_full.sh tests/test_runlog_concurrent.sh \
  tests/test_runlog_flipped.sh scripts/flip-runlog tests/data/runlog/chunk_wider_first.h5.gz \
  tests/data/runlog/chunk_wider_best.h5.gz tests/data/runlog/chunk_wider_last.h5.gz tests/data/runlog/meta_header.h5.gz \
  tests/data/runlog/frames_header_alloc.h5.gz tests/data/runlog/meta_header_alloc.h5.gz \
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
# MJCF and URDF model files (libxml2, optional): the only area that includes
# libxml/*.h.
libdsim_core_la_SOURCES += io/model_xml.c io/model_xml.h
libdsim_core_la_CPPFLAGS += $(XML_CFLAGS)
libdsim_core_la_LIBADD += $(XML_LIBS)
dsiminclude_HEADERS += include/dsim/model_file.h
check_PROGRAMS += tests/test_model_xml
tests_test_model_xml_SOURCES = tests/test_model_xml.c
TESTS += tests/test_model_xml
# the bundled models, installed beside the configs
modelsdir = $(configsdir)/models
dist_models_DATA = configs/models/pendulum.xml configs/models/double_pendulum.xml configs/models/double_pendulum.urdf
dist_models_DATA += configs/models/runner.xml configs/models/chain16.xml
EXTRA_DIST += scripts/fuzz-video tests/fuzz/fuzz_video.c scripts/fuzz-mesh tests/fuzz/fuzz_mesh.c scripts/fuzz-triage
EXTRA_DIST += scripts/fuzz-model-xml tests/fuzz/fuzz_model_xml.c tests/data/models/pendulum.xml \
  tests/data/models/pendulum.urdf tests/data/models/double_pendulum.xml tests/data/models/double_pendulum.urdf \
  tests/data/models/chain3d.xml tests/data/models/defaults.xml tests/data/models/degrees.xml \
  tests/data/models/radians.xml tests/data/models/geoms.xml

# bundled data folders (dsim/config_dirs.h): configs and models, found beside the library
libdsim_core_la_SOURCES += io/config_find.c
libdsim_core_la_CPPFLAGS += -DDS_CONFIGS_DATADIR='"$(pkgdatadir)/configs"'
dsiminclude_HEADERS += include/dsim/config_dirs.h

# I/O layer: configs (cJSON). io/ is the only code that includes cJSON.h,
# hdf5.h and png.h.
libdsim_core_la_SOURCES += io/cfg.c io/cfg.h
check_PROGRAMS += tests/test_config
tests_test_config_SOURCES = tests/test_config.c
TESTS += tests/test_config

# HDF5 run logs
libdsim_core_la_SOURCES += io/runlog.c
dsiminclude_HEADERS += include/dsim/runlog.h
check_PROGRAMS += tests/test_runlog
tests_test_runlog_SOURCES = tests/test_runlog.c
tests_test_runlog_CPPFLAGS = $(AM_CPPFLAGS) $(HDF5_CFLAGS)
TESTS += tests/test_runlog
check_PROGRAMS += tests/runlog_writer
tests_runlog_writer_SOURCES = tests/runlog_writer.c
TESTS += tests/test_runlog_kill.sh
EXTRA_DIST += tests/test_runlog_kill.sh

# GIF export
libdsim_core_la_SOURCES += io/gif.c io/gif.h

# run-log export through the CLI (dsim export)
check_PROGRAMS += tests/test_export_decode
tests_test_export_decode_SOURCES = tests/test_export_decode.c
TESTS += tests/test_export.sh
EXTRA_DIST += tests/test_export.sh

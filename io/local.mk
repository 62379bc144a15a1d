# I/O layer: configs (cJSON). io/ is the only code that includes cJSON.h,
# hdf5.h and png.h.
libdsim_core_la_SOURCES += io/config.c io/config.h
check_PROGRAMS += tests/test_config
tests_test_config_SOURCES = tests/test_config.c
TESTS += tests/test_config

# cli/: the dsim program (run, info, export). Wires config -> env ->
# controller -> logs; no physics. Linked with the static core so that it may
# use internal io/ helpers (GIF, PNG export); the installed library still
# exports only the DS_API symbols. Bundled configs are looked up in the source
# tree and the installed $(pkgdatadir)/configs (cli/cmd_run.c has the order).
bin_PROGRAMS = dsim
dsim_SOURCES = cli/main.c cli/cli.h cli/cmd_info.c cli/cmd_export.c cli/cmd_run.c cli/cmd_config.c
dsim_LDADD = libdsim_core.la
dsim_CPPFLAGS = $(AM_CPPFLAGS) -DDS_CONFIGS_SRCDIR='"$(abs_top_srcdir)/configs"' \
  -DDS_CONFIGS_DATADIR='"$(pkgdatadir)/configs"'
check_PROGRAMS += tests/test_export_decode
tests_test_export_decode_SOURCES = tests/test_export_decode.c
TESTS += tests/test_cli.sh tests/test_run_cli.sh tests/test_export.sh
EXTRA_DIST += tests/test_cli.sh tests/test_run_cli.sh tests/test_export.sh scripts/reproduce-results

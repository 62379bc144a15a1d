# cli/: the dsim program (run, info, export). Wires config -> env ->
# controller -> logs; no physics. Linked with the static core so that it may
# use internal io/ helpers (GIF, PNG export); the installed library still
# exports only the DS_API symbols. Bundled configs are looked up in the source
# tree and the installed $(pkgdatadir)/configs (cli/cmd_run.c has the order).
bin_PROGRAMS = dsim
dsim_SOURCES = cli/main.c cli/cli.h cli/cmd_info.c cli/cmd_export.c cli/cmd_run.c cli/cmd_config.c cli/plugin.c cli/files.c cli/cmd_sysid.c cli/cmd_landscape.c cli/device.c cli/exit.c \
  cli/cmd_report.c cli/report.h cli/report_html.c cli/report_plot.c cli/report_sysid.c cli/sysid_field_png.c
# --plugin objects resolve their ds_* references to this program
dsim_LDFLAGS = $(AM_LDFLAGS) -export-dynamic
dsim_LDADD = libdsim_core.la
dsim_CPPFLAGS = $(AM_CPPFLAGS) -DDS_CONFIGS_SRCDIR='"$(abs_top_srcdir)/configs"' \
  -DDS_CONFIGS_DATADIR='"$(pkgdatadir)/configs"'
# a plugin with a user-written env class (tests/hang_env.h) for test_run_cli.sh;
# -rpath makes libtool build it shared although it is never installed
check_LTLIBRARIES = tests/hang_plugin.la
tests_hang_plugin_la_SOURCES = tests/hang_plugin.c tests/hang_env.h
tests_hang_plugin_la_LDFLAGS = -module -avoid-version -shared -rpath $(abs_builddir)/tests
tests_hang_plugin_la_LIBADD =
check_PROGRAMS += tests/test_export_decode
tests_test_export_decode_SOURCES = tests/test_export_decode.c
TESTS += tests/test_cli.sh tests/test_run_cli.sh tests/test_export.sh tests/test_outputs.sh tests/test_sysid_cli.sh tests/test_sysid_views_cli.sh
EXTRA_DIST += tests/test_cli.sh tests/test_run_cli.sh tests/test_export.sh tests/test_outputs.sh tests/test_sysid_cli.sh tests/test_sysid_views_cli.sh scripts/reproduce-results scripts/reproduce-sysid
# the Table 3 sysid configs under the implicit integrator (configs/sysid-*-implicit.json)
TESTS += tests/test_sysid_implicit.sh
EXTRA_DIST += tests/test_sysid_implicit.sh
# the table from error codes to exit codes (cli/exit.c)
check_PROGRAMS += tests/test_exit_codes
tests_test_exit_codes_SOURCES = tests/test_exit_codes.c cli/exit.c
TESTS += tests/test_exit_codes
# the plugin template of docs/plugins.md, built as the page says and run by
# every command that takes an env; bundled configs found from a copied tree
TESTS += tests/test_plugin_template.sh tests/test_plugin_configs.sh
EXTRA_DIST += tests/test_plugin_template.sh tests/test_plugin_configs.sh examples/plugin/myenv.c \
  examples/plugin/myenv-sysid.json docs/plugins.md
# the test plugin sees the public headers only, as a user's would
tests_hang_plugin_la_CPPFLAGS = -I$(top_srcdir)/include -I$(top_builddir)/include
# configure links configs/ into a build outside the source tree (configure.ac)
distclean-local:
	-test ! -L configs || rm -f configs
# Self-describing footage and the landscape's outputs (issue 32)
TESTS += tests/test_export_footage.sh tests/test_landscape_plot.sh tests/test_fuzz_triage.sh
EXTRA_DIST += tests/test_export_footage.sh tests/test_landscape_plot.sh tests/test_fuzz_triage.sh

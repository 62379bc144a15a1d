#!/bin/sh
# The plugin template (examples/plugin/myenv.c) as docs/plugins.md tells a
# user to build and use it: compiled with the documented command against this
# uninstalled build tree (dsim-uninstalled.pc through PKG_CONFIG_PATH), then
# `dsim run myenv --plugin ./myenv.so` with the class's defaults (it has no
# config file), sysid and landscape of its spring stiffness with --plugin,
# --plugin on config, twice, and in the --help list; the not-found message
# lists only names that run. Skips (77) without pkg-config or shared objects.
set -u
: "${DSIM:?DSIM must name the dsim binary}" "${DS_SRCDIR:?}" "${DS_BUILDDIR:?}"
fail=0
. "$DS_SRCDIR/tests/clicheck.sh"
command -v pkg-config >/dev/null 2>&1 || { echo "no pkg-config: skipped"; exit 77; }
[ -f "$DS_BUILDDIR/dsim-uninstalled.pc" ] || { echo "FAIL: $DS_BUILDDIR/dsim-uninstalled.pc missing"; exit 1; }
dir=$(mktemp -d "$DS_BUILDDIR/tests/plugtpl.XXXXXX")
trap 'rm -rf "$dir"' EXIT
cp "$DS_SRCDIR/examples/plugin/myenv.c" "$DS_SRCDIR/examples/plugin/myenv-sysid.json" "$dir/"
cd "$dir" || exit 99

# the documented command, BUILD = the build tree (docs/plugins.md "Compile")
cc=${CC:-cc}
# shellcheck disable=SC2046
if ! $cc -shared -fPIC -O2 -o myenv.so myenv.c $(PKG_CONFIG_PATH="$DS_BUILDDIR" pkg-config --cflags dsim) 2>cc.txt; then
  echo "FAIL: the template does not compile with the documented command:"; sed 's/^/  | /' cc.txt; exit 1
fi
# tests/hang_plugin.c, which make check builds, needs nothing more than a user's plugin
cp "$DS_SRCDIR/tests/hang_plugin.c" "$DS_SRCDIR/tests/hang_env.h" "$dir/"
# shellcheck disable=SC2046
if ! $cc -shared -fPIC -o hang.so hang_plugin.c $(PKG_CONFIG_PATH="$DS_BUILDDIR" pkg-config --cflags dsim) 2>cc.txt; then
  echo "FAIL: tests/hang_plugin.c does not compile with the public headers alone:"; sed 's/^/  | /' cc.txt; fail=1
fi
case $(PKG_CONFIG_PATH="$DS_BUILDDIR" pkg-config --cflags dsim) in
  *"$DS_BUILDDIR"*|*"$DS_SRCDIR"*) ;;
  *) echo "FAIL: pkg-config did not pick dsim-uninstalled.pc: $(PKG_CONFIG_PATH="$DS_BUILDDIR" pkg-config --cflags dsim)"; fail=1 ;;
esac

# a registered class without a config file runs with its defaults
check "run myenv" 0 "$DSIM" run myenv --plugin ./myenv.so --iterations 2 --out run.h5
expect "run myenv: defaults" "dsim run: myenv (class defaults)"
expect "run myenv: summary" "summary: myenv image seed 0: 2 iterations, status completed"
check "run myenv, --plugin=FILE after the name" 0 "$DSIM" run myenv --iterations 1 --plugin=./myenv.so --out run1.h5
check "the same plugin twice" 0 "$DSIM" run myenv --plugin ./myenv.so --plugin "$dir/myenv.so" --iterations 1 --out run2.h5
check "without the plugin" 3 "$DSIM" run myenv --iterations 1 --out run3.h5
expect "without the plugin" "'myenv' is neither a config file nor a bundled config"
case $LAST in *"myenv,"*|*"myenv)"*) echo "FAIL: the not-found list names myenv, which it refuses"; fail=1 ;; esac
check "unknown name, plugin loaded" 3 "$DSIM" run nosuch --plugin ./myenv.so --iterations 1 --out run4.h5
case $LAST in *"myenv,"*|*"myenv)"*) echo "FAIL: the not-found list names myenv (it runs, but not as a config)"; fail=1 ;; esac
# every name the message lists is a bundled config (one of dsim config --paths' folders has it)
names=$(printf '%s\n' "$LAST" | sed -n "s/.*bundled config (\(.*\))$/\1/p" | tr ',' ' ')
[ -n "$names" ] || { echo "FAIL: the not-found message lists no bundled configs"; fail=1; }
dirs=$("$DSIM" config --paths | sed -n 's/^  \([^ ]*\).*/\1/p')
for n in $names; do
  found=0
  for d in $dirs; do [ -f "$d/$n.json" ] && found=1; done
  [ $found = 1 ] || { echo "FAIL: the not-found message lists '$n', which has no config"; fail=1; }
done

# --help: every registered class (beam included, and the plugin's)
check "run --help" 0 "$DSIM" run --plugin ./myenv.so --help
for c in walker control-fem control-cloth walker-springs rigid-toss beam myenv; do
  expect "run --help lists $c" "$c"
done
expect "run --help: class defaults" "the class's defaults"
expect "run --help: --plugin" "--plugin FILE"

# the other commands that take an env
check "config --plugin" 0 "$DSIM" config --plugin ./myenv.so --keys myenv
expect "config --plugin" "env.material.spring_ke"
check "sysid --plugin" 0 "$DSIM" sysid myenv-sysid.json --plugin ./myenv.so --iterations 2 --quiet --out sysid.h5
expect "sysid --plugin" "spring.ke"
check "sysid without it" 3 "$DSIM" sysid myenv-sysid.json --iterations 2 --quiet --out sysid0.h5
check "landscape --plugin" 0 "$DSIM" landscape myenv-sysid.json --plugin ./myenv.so --range1 100:400:3 --no-plot --out land
[ -f land.csv ] || { echo "FAIL: landscape --plugin wrote no land.csv"; fail=1; }
check "--plugin without a value" 2 "$DSIM" landscape myenv-sysid.json --plugin
expect "--plugin without a value" "option '--plugin' needs a value"
exit $fail

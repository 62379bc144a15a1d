#!/bin/sh
# Bundled configs are found relative to the code that reads them (dsim/run.h
# ds_run_find_config), not at the source path compiled in: a copied, then
# moved, build tree (the dsim program with a configs/ folder, and
# .libs/libdsim.so for Python) reads its own edited configs; $DSIM_CONFIG_DIR
# wins over them; `dsim config --paths` names the folders. The copy's
# walker.json is made invalid so that reading it shows at once (exit 3 naming
# the file), while reading any other walker.json would start a run.
set -u
: "${DSIM:?DSIM must name the dsim binary}" "${DS_SRCDIR:?}" "${DS_BUILDDIR:?}"
fail=0
. "$DS_SRCDIR/tests/clicheck.sh"
unset DSIM_CONFIG_DIR
dir=$(mktemp -d "$DS_BUILDDIR/tests/plugcfg.XXXXXX")
trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir/tree/.libs" "$dir/other"
cp "$DSIM" "$dir/tree/dsim" || exit 99
cp -RL "$DS_BUILDDIR/configs" "$dir/tree/configs" 2>/dev/null || cp -R "$DS_SRCDIR/configs" "$dir/tree/configs"
printf '{"env": {"name": "walker", "physics": {"substeps": "edited-copy"}}}\n' >"$dir/tree/configs/walker.json"
printf '{"env": {"name": "walker", "physics": {"substeps": "edited-other"}}}\n' >"$dir/other/walker.json"
# a guard: the original config, if read, must not start a long run
guard="--iterations 1 --set env.physics.substeps=16 --out $dir/x.h5"

for t in tree moved; do
  [ $t = moved ] && { mv "$dir/tree" "$dir/moved" || exit 99; }
  T="$dir/$t"
  # shellcheck disable=SC2086
  check "$t: run walker reads its own configs/" 3 "$T/dsim" run walker $guard
  expect "$t: run walker reads its own configs/" "$T/configs/walker.json: env.physics.substeps: expected an integer"
  check "$t: config --paths" 0 "$T/dsim" config --paths
  expect "$t: config --paths" "  $T/configs
"
  # shellcheck disable=SC2086
  check "$t: DSIM_CONFIG_DIR wins" 3 env DSIM_CONFIG_DIR="$dir/other" "$T/dsim" run walker $guard
  expect "$t: DSIM_CONFIG_DIR wins" "$dir/other/walker.json: env.physics.substeps"
  check "$t: config --paths with DSIM_CONFIG_DIR" 0 env DSIM_CONFIG_DIR="$dir/other" "$T/dsim" config --paths
  expect "$t: config --paths with DSIM_CONFIG_DIR" "  $dir/other
  $T/configs"
done

# Python: the library in a copied tree's .libs/ reads that tree's configs/
lib="$DS_BUILDDIR/.libs/libdsim.so"
# (not in a sanitizer build: its library cannot be loaded into a plain python3,
# as tests/test_python.sh says)
sanitized=0
if [ -f "$lib" ] && { grep -aq 'sanitizers=yes' "$lib" ||
   { command -v ldd >/dev/null 2>&1 && ldd "$lib" 2>/dev/null | grep -Eq 'lib(a|ub)san'; }; }; then
  sanitized=1
fi
if [ -f "$lib" ] && [ "$sanitized" = 0 ] && python3 -c "import numpy" 2>/dev/null; then
  T="$dir/moved"
  mkdir -p "$T/.libs" && cp "$(readlink -f "$lib")" "$T/.libs/libdsim.so"
  got=$(DSIM_LIBRARY="$T/.libs/libdsim.so" PYTHONPATH="$DS_SRCDIR/python" python3 -c \
    'import dsim.run; print(dsim.run.bundled_config("walker"))' 2>&1)
  [ "$got" = "$T/configs/walker.json" ] || { echo "FAIL: Python bundled_config in a copied tree: '$got'"; fail=1; }
  got=$(DSIM_CONFIG_DIR="$dir/other" DSIM_LIBRARY="$T/.libs/libdsim.so" PYTHONPATH="$DS_SRCDIR/python" python3 -c \
    'import dsim.run; print(dsim.run.bundled_config("walker"))' 2>&1)
  [ "$got" = "$dir/other/walker.json" ] || { echo "FAIL: Python bundled_config with DSIM_CONFIG_DIR: '$got'"; fail=1; }
else
  echo "no shared library, a sanitizer build or no numpy: the Python part skipped"
fi
exit $fail

#!/bin/sh
# The Python package (python/dsim) against the library of this build: pytest
# over python/tests (Gymnasium envs, batched vector env, torch bridge, error
# handling, PPO smoke test, and the binding itself: its structs and constants
# against the library's ABI table, no raw calls outside dsim/_lib.py, no
# import circle). Exit 77 (SKIP) when python3, numpy, gymnasium or
# pytest is missing, when the build has no shared library, and in a
# sanitizer build: an ASan/UBSan libdsim.so cannot be loaded into a python3
# that was not itself started under the sanitizer runtime. With
# DSIM_REQUIRE_PYTHON=1 (CI, after scripts/install-deps) missing Python
# packages are a hard error (99) instead of a skip.
set -u
src=${DS_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
build=${DS_BUILDDIR:-$src}
PY=${PYTHON:-python3}
missing=77
[ "${DSIM_REQUIRE_PYTHON:-0}" = 1 ] && missing=99

lib="$build/.libs/libdsim.so"
if [ ! -f "$lib" ]; then
  echo "test_python: no shared library $lib (--disable-shared?): SKIP"; exit 77
fi
if grep -aq 'sanitizers=yes' "$lib" ||
   (command -v ldd >/dev/null 2>&1 && ldd "$lib" 2>/dev/null | grep -Eq 'lib(a|ub)san'); then
  echo "test_python: sanitizer build: the library cannot be loaded into a plain python3: SKIP"; exit 77
fi
if ! command -v "$PY" >/dev/null 2>&1; then
  echo "test_python: $PY not found"; exit $missing
fi
if ! "$PY" -c 'import numpy, gymnasium, pytest' 2>/dev/null; then
  echo "test_python: numpy, gymnasium or pytest missing for $PY (scripts/install-deps installs them)"; exit $missing
fi

DSIM_LIBRARY=$lib; export DSIM_LIBRARY
DSIM_PLUGIN="$build/tests/.libs/hang_plugin.so"; export DSIM_PLUGIN
PYTHONDONTWRITEBYTECODE=1; export PYTHONDONTWRITEBYTECODE
# ASan options of the harness do not apply to a plain interpreter
unset ASAN_OPTIONS UBSAN_OPTIONS
cd "$build" || exit 99
exec "$PY" -m pytest -q -p no:cacheprovider "$src/python/tests"

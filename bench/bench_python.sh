#!/bin/sh
# make bench: the Python vector-env benchmark (python/bench_vector.py) against
# the library of this build; prints a skip line without python3, numpy or
# gymnasium, or in a sanitizer build.
src=${DS_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
build=${DS_BUILDDIR:-$src}
PY=${PYTHON:-python3}
lib="$build/.libs/libdsim.so"
if ! command -v "$PY" >/dev/null 2>&1 || ! "$PY" -c 'import numpy, gymnasium' 2>/dev/null; then
  echo "bench_python: skipped (python3 with numpy and gymnasium needed; scripts/install-deps installs them)"; exit 0
fi
if [ ! -f "$lib" ] || grep -aq 'sanitizers=yes' "$lib"; then
  echo "bench_python: skipped (no shared library, or a sanitizer build)"; exit 0
fi
DSIM_LIBRARY=$lib PYTHONDONTWRITEBYTECODE=1 exec "$PY" "$src/python/bench_vector.py" "$@"

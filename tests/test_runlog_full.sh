#!/bin/sh
# A full disk (issue 33 #1): `dsim run` whose log cannot grow (RLIMIT_FSIZE via
# `ulimit -f`, SIGXFSZ ignored so that a write past it fails with EFBIG as on
# a full file system) exits 1 with the reason, not with a crash in libhdf5's
# exit-time cleanup, and the log keeps the iterations written before the
# limit: `dsim info` reads it, and says the run failed. The limit falls
# inside the second chunk of /iterations/params (832 parameters: a chunk of
# 256 rows is 1.7 MB), so the failing write is an append, at iteration 256.
set -u
: "${DSIM:?}" "${DS_BUILDDIR:?}" "${DS_SRCDIR:?}"
"$DSIM" info | grep -q "HDF5:       off" && { echo "SKIP: built --without-hdf5"; exit 77; }
fail=0
. "$DS_SRCDIR/tests/clicheck.sh"
dir=$(mktemp -d "$DS_BUILDDIR/tests/runlogfull.XXXXXX")
trap 'rm -rf "$dir"' EXIT
cat >"$dir/w.json" <<'JSON'
{ "env": { "name": "walker",
    "physics": {"substeps": 64, "control_interval": 16, "render_interval": 32, "render_last": true},
    "render": {"width": 16, "height": 16, "supersample": 1, "sigma": 1e-4} },
  "run": {"iterations": 300} }
JSON
limited() { # KiB, command...: run with the file-size limit, SIGXFSZ ignored
  kib=$1; shift
  (ulimit -f "$kib" && trap '' XFSZ && exec "$@")
}
check "run on a full disk" 1 limited 2500 "$DSIM" run "$dir/w.json" --out "$dir/full.h5"
expect "run on a full disk" "cannot append iteration 256: File too large"
check "info after a full disk" 0 "$DSIM" info "$dir/full.h5"
expect "info: iterations kept" "iterations: 256"
expect "info: status" "status:     failed:"
check "export after a full disk" 0 "$DSIM" export "$dir/full.h5" --csv "$dir/full.csv"
n=$(($(wc -l <"$dir/full.csv") - 1))
[ "$n" = 256 ] || { echo "FAIL: export wrote $n rows, expected 256"; fail=1; }
# no room even for the header: refused before anything is written
# the same limit with SIGXFSZ at its default (dsim ignores it itself: a
# write past the limit fails with EFBIG instead of killing the run)
sized() { kib=$1; shift; (ulimit -f "$kib" && trap - XFSZ && exec "$@"); }
check "run past ulimit -f, SIGXFSZ not ignored by the caller" 1 sized 2500 "$DSIM" run "$dir/w.json" --out "$dir/full2.h5"
check "info after the limit" 0 "$DSIM" info "$dir/full2.h5"
expect "info: iterations kept" "iterations: 256"
check "run with no room at all" 1 limited 16 "$DSIM" run "$dir/w.json" --out "$dir/none.h5"
expect "no room" "none.h5: cannot create the run log: File too large"
exit $fail

#!/bin/sh
# dsim export: CSV, PNG frames and GIF from a run log, decoded back and
# compared with the logged values; usage and bad-file errors.
set -u
: "${DSIM:?}" "${DS_BUILDDIR:?}"
"$DSIM" info | grep -q "HDF5:       off" && { echo "SKIP: built --without-hdf5"; exit 77; }
dir=$(mktemp -d "$DS_BUILDDIR/tests/exporttest.XXXXXX")
trap 'rm -rf "$dir"' EXIT
fail=0
run="$dir/run.h5"
"$DS_BUILDDIR/tests/runlog_writer" "$run" 3 0 >/dev/null || { echo "FAIL: writer"; exit 1; }

# CSV: header + 3 rows, values as logged (loss = 1/(i+1))
"$DSIM" export "$run" --csv "$dir/m.csv" >/dev/null || { echo "FAIL: export --csv"; fail=1; }
[ "$(head -1 "$dir/m.csv")" = "iteration,loss,metric,wall_time,grad_norm" ] || { echo "FAIL: csv header"; fail=1; }
[ "$(wc -l < "$dir/m.csv")" -eq 4 ] || { echo "FAIL: csv rows"; cat "$dir/m.csv"; fail=1; }
grep -q '^2,0.33333333333333331,' "$dir/m.csv" || { echo "FAIL: csv value"; cat "$dir/m.csv"; fail=1; }

# frames and GIF are checked pixel by pixel by the C test
"$DS_BUILDDIR/tests/test_export_decode" "$DSIM" "$run" "$dir" || fail=1

# errors
out=$("$DSIM" export "$run" 2>&1); [ $? -eq 2 ] || { echo "FAIL: nothing to do should be usage"; fail=1; }
case $out in *"nothing to do"*) ;; *) echo "FAIL: message: $out"; fail=1 ;; esac
out=$("$DSIM" export "$run" --episode worst --csv x 2>&1); [ $? -eq 2 ] || { echo "FAIL: bad episode"; fail=1; }
out=$("$DSIM" export "$run" --fps 0 --gif x 2>&1); [ $? -eq 2 ] || { echo "FAIL: bad fps"; fail=1; }
case $out in *"--fps '0': expected an integer in 1..100"*) ;; *) echo "FAIL: fps message: $out"; fail=1 ;; esac
out=$("$DSIM" export "$run" --bogus 2>&1); [ $? -eq 2 ] || { echo "FAIL: bad flag"; fail=1; }
case $out in *"unknown option '--bogus'"*) ;; *) echo "FAIL: flag message: $out"; fail=1 ;; esac
echo "not hdf5" > "$dir/bad.h5"
out=$("$DSIM" export "$dir/bad.h5" --csv "$dir/bad.csv" 2>&1); [ $? -eq 3 ] || { echo "FAIL: bad file exit"; fail=1; }
case $out in *"bad.h5: not an HDF5 file"*) ;; *) echo "FAIL: bad file message: $out"; fail=1 ;; esac
[ ! -e "$dir/bad.csv" ] || { echo "FAIL: output written for a bad file"; fail=1; }
head -c 2000 "$run" > "$dir/trunc.h5"
out=$("$DSIM" export "$dir/trunc.h5" --csv "$dir/t.csv" 2>&1); [ $? -eq 3 ] || { echo "FAIL: truncated exit: $out"; fail=1; }
# an existing output is not clobbered by a failed export
echo keep > "$dir/keep.csv"
"$DSIM" export "$dir/bad.h5" --csv "$dir/keep.csv" >/dev/null 2>&1
[ "$(cat "$dir/keep.csv")" = keep ] || { echo "FAIL: existing output lost"; fail=1; }
exit $fail

#!/bin/sh
# Crash safety: a run-log writer killed with SIGKILL leaves a file that h5dump
# and `dsim info` read, holding every iteration it had completed.
set -u
: "${DSIM:?}" "${DS_BUILDDIR:?}"
W="$DS_BUILDDIR/tests/runlog_writer"
"$DSIM" info | grep -q "HDF5:       off" && { echo "SKIP: built --without-hdf5"; exit 77; }
dir=$(mktemp -d "$DS_BUILDDIR/tests/killtest.XXXXXX")
trap 'rm -rf "$dir"' EXIT
fail=0
for round in 1 2 3; do
  log="$dir/run$round.h5"; out="$dir/out$round.txt"
  "$W" "$log" 1000 $((5 * round)) >"$out" 2>&1 &
  pid=$!
  # wait until at least 5 iterations are reported complete (at most ~20 s)
  n=0; tries=0
  while [ "$n" -lt 5 ] && [ "$tries" -lt 400 ]; do
    n=$(grep -c '^iteration' "$out" 2>/dev/null || true); n=${n:-0}
    tries=$((tries + 1)); sleep 0.05
  done
  kill -9 "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
  done_iters=$(grep -c '^iteration' "$out")
  if [ "$done_iters" -lt 5 ]; then echo "FAIL: round $round: writer reported only $done_iters iterations"; cat "$out"; fail=1; continue; fi
  info=$("$DSIM" info "$log" 2>&1) || { echo "FAIL: round $round: dsim info failed on the killed file:"; echo "$info"; fail=1; continue; }
  got=$(echo "$info" | sed -n 's/^iterations: *\([0-9]*\).*/\1/p')
  if [ -z "$got" ] || [ "$got" -lt "$done_iters" ]; then
    echo "FAIL: round $round: file holds ${got:-?} iterations, writer had completed $done_iters"; echo "$info"; fail=1
  fi
  echo "$info" | grep -q "status: *running" || { echo "FAIL: round $round: status should be 'running'"; echo "$info"; fail=1; }
  if command -v h5dump >/dev/null 2>&1; then
    h5dump -H "$log" >/dev/null 2>&1 || { echo "FAIL: round $round: h5dump cannot read the killed file"; fail=1; }
  fi
  echo "round $round: killed after $done_iters reported iterations; file holds $got"
done
# a clean run says completed
"$W" "$dir/clean.h5" 3 0 >/dev/null || fail=1
"$DSIM" info "$dir/clean.h5" | grep -q "status: *completed" || { echo "FAIL: clean run not 'completed'"; fail=1; }
exit $fail

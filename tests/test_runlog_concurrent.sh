#!/bin/sh
# Two runs with --force on one --out (issue 33 #2), 20 times: a second
# writer must not truncate the log of a run in progress. Whichever order the
# two take, each exits 0 (it had the file to itself, or replaced a finished
# log as --force asks) or 1 with "in use by another run (pid N)", at least
# one wins,
# and the file left is a complete log that `dsim info` reads. Nothing here
# depends on timing: a round where the runs do not overlap checks the same.
set -u
: "${DSIM:?}" "${DS_BUILDDIR:?}" "${DS_SRCDIR:?}"
"$DSIM" info | grep -q "HDF5:       off" && { echo "SKIP: built --without-hdf5"; exit 77; }
fail=0
dir=$(mktemp -d "$DS_BUILDDIR/tests/runlogconc.XXXXXX")
trap 'rm -rf "$dir"' EXIT
cat >"$dir/w.json" <<'JSON'
{ "env": { "name": "walker",
    "physics": {"substeps": 64, "control_interval": 16, "render_interval": 32, "render_last": true},
    "render": {"width": 16, "height": 16, "supersample": 1, "sigma": 1e-4} },
  "run": {"iterations": 20} }
JSON
log="$dir/one.h5"
refused=0 withpid=0
for round in $(seq 1 20); do
  "$DSIM" run "$dir/w.json" --out "$log" --force >"$dir/a.txt" 2>&1 &
  a=$!
  "$DSIM" run "$dir/w.json" --out "$log" --force >"$dir/b.txt" 2>&1 &
  b=$!
  wait $a; ra=$?
  wait $b; rb=$?
  for x in "a $ra" "b $rb"; do
    set -- $x
    case $2 in
      0) ;;
      1) if grep -q "one.h5: in use by another run" "$dir/$1.txt"; then refused=$((refused + 1)); else
           echo "FAIL: round $round: run $1 exited 1 without 'in use by another run':"; sed 's/^/  | /' "$dir/$1.txt"; fail=1
         fi
         grep -q "in use by another run (pid [0-9]*)" "$dir/$1.txt" && withpid=$((withpid + 1)) ;;
      *) echo "FAIL: round $round: run $1 exited $2"; sed 's/^/  | /' "$dir/$1.txt"; fail=1 ;;
    esac
  done
  [ "$ra" = 0 ] || [ "$rb" = 0 ] || { echo "FAIL: round $round: neither run succeeded"; fail=1; }
  info=$("$DSIM" info "$log" 2>&1) || { echo "FAIL: round $round: the log left is unreadable:"; echo "$info" | sed 's/^/  | /'; fail=1; continue; }
  echo "$info" | grep -q "status: *completed" || { echo "FAIL: round $round: status is not completed"; echo "$info" | sed 's/^/  | /'; fail=1; }
  echo "$info" | grep -q "iterations: *20" || { echo "FAIL: round $round: not 20 iterations"; echo "$info" | sed 's/^/  | /'; fail=1; }
done
# the pid is looked up for the message only (see io/runlog.c, take_lock)
echo "20 rounds: $refused runs refused as in use, $withpid of them naming the pid"
exit $fail

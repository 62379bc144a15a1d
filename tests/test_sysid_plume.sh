#!/bin/sh
# `dsim sysid` on the smoke-plume env (envs/plume.c), small: an 8^3 plume
# filmed over 4 frames at 16 x 16 pixels; buoyancy.alpha and the inflow
# velocity recovered from the synthetic video to a relative error below
# 1e-3 each (the loss reads every frame: image adjoints of every step).
# Then sysid.loss_tolerance: a run told to stop at 1e-6 of the first loss
# stops on it, earlier than the first, with errors below 1e-2.
set -u
: "${DSIM:?DSIM must name the dsim binary}" "${DS_BUILDDIR:?}"
if "$DSIM" info | grep -q "HDF5:       off"; then echo "SKIP: built without HDF5"; exit 77; fi
dir=$(mktemp -d "$DS_BUILDDIR/tests/sysidplume.XXXXXX")
trap 'rm -rf "$dir"' EXIT
cat >"$dir/p.json" <<'JSON'
{ "env": { "name": "smoke-plume", "grid": {"n": 8},
    "physics": {"dt": 0.04, "substeps": 8, "render_interval": 2, "control_interval": 2},
    "render": {"width": 16, "height": 16},
    "fluid": {"tolerance": 1e-12},
    "source": {"lo": [0.3, 0.1, 0.3], "hi": [0.7, 0.3, 0.7], "rate": 20} },
  "sysid": {
    "param1": {"name": "buoyancy.alpha", "lower": 0.05, "upper": 10, "init_range": [0.5, 2], "true_range": [0.5, 2]},
    "param2": {"name": "source.0.velocity.y", "lower": 0.05, "upper": 3, "init_range": [0.3, 0.8], "true_range": [0.3, 0.8]},
    "optimizer": "lbfgs", "lr": 0.5, "iterations": 30, "video": "synthetic", "frames": "all" },
  "run": {"seed": 3, "threads": 1} }
JSON
"$DSIM" sysid "$dir/p.json" --out "$dir/p.h5" --csv "$dir/p.csv" >"$dir/out.txt" 2>&1
rc=$?
cat "$dir/out.txt"
[ $rc -eq 0 ] || { echo "FAIL: dsim sysid exited $rc"; exit 1; }
cat "$dir/p.csv"
fail=0
for name in buoyancy.alpha source.0.velocity.y; do
  are=$(awk -F, -v n="$name" '$0 ~ n { print $5 }' "$dir/p.csv")
  echo "$name: ARE $are"
  awk -v a="$are" 'BEGIN { exit !(a != "" && a < 1e-3) }' || { echo "FAIL: $name: relative error '$are', expected < 1e-3"; fail=1; }
done
# the loss tolerance: stops there, sooner than the round-off stop above
"$DSIM" sysid "$dir/p.json" --set sysid.loss_tolerance=1e-6 --out "$dir/q.h5" --csv "$dir/q.csv" >"$dir/q.txt" 2>&1 ||
  { cat "$dir/q.txt"; echo "FAIL: dsim sysid with sysid.loss_tolerance exited $?"; exit 1; }
cat "$dir/q.txt"
stop_at() { sed -n 's/^stopped after iteration \([0-9]*\): .*/\1/p' "$1"; }
n1=$(stop_at "$dir/out.txt") n2=$(stop_at "$dir/q.txt")
grep -q "^stopped after iteration [0-9]*: converged: loss at most sysid.loss_tolerance" "$dir/q.txt" ||
  { echo "FAIL: the run with sysid.loss_tolerance=1e-6 did not stop on it"; fail=1; }
[ -n "$n1" ] && [ -n "$n2" ] && [ "$n2" -lt "$n1" ] ||
  { echo "FAIL: stopped after iteration '$n2' with the tolerance, '$n1' without (expected fewer)"; fail=1; }
for name in buoyancy.alpha source.0.velocity.y; do
  are=$(awk -F, -v n="$name" '$0 ~ n { print $5 }' "$dir/q.csv")
  echo "loss_tolerance 1e-6: $name: ARE $are"
  awk -v a="$are" 'BEGIN { exit !(a != "" && a < 1e-2) }' || { echo "FAIL: $name: relative error '$are', expected < 1e-2"; fail=1; }
done
exit $fail

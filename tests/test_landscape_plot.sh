#!/bin/sh
# dsim landscape (issue 32): --out creates missing folders as dsim run --out
# does; the plot marks the true value, has a legend for the curves and the
# arrows, and no overlapping x tick labels (the plot script records its
# legend entries and the overlap count in the PNG's Description text; this
# part needs python3 with matplotlib); footage (video "frames", no truth)
# gives a landscape too.
set -u
: "${DSIM:?}" "${DS_BUILDDIR:?}" "${DS_SRCDIR:?}"
fail=0
. "$DS_SRCDIR/tests/clicheck.sh"
if "$DSIM" info | grep -q "HDF5:       off"; then echo "SKIP: built without HDF5"; exit 77; fi
dir=$(mktemp -d "$DS_BUILDDIR/tests/landplot.XXXXXX")
trap 'rm -rf "$dir"' EXIT
cat >"$dir/l.json" <<'JSON'
{ "env": { "name": "beam", "beam": {"cells": [3, 1, 1]},
    "physics": {"substeps": 256, "render_interval": 64, "control_interval": 64},
    "render": {"width": 24, "height": 24, "supersample": 1, "sigma": 1e-3} },
  "sysid": {
    "param1": {"name": "tet.k_mu", "lower": 10, "upper": 100000, "init": [800], "true": [1000]},
    "param2": {"name": "tet.k_lambda", "lower": 10, "upper": 100000, "init": [800], "true": [1000]},
    "optimizer": "lbfgs", "lr": 0.5, "iterations": 1 },
  "run": {"seed": 4, "threads": 1} }
JSON
check "folders created" 0 "$DSIM" landscape "$dir/l.json" --range1 300:3000:9 --geometric --out "$dir/a/b/land"
[ -f "$dir/a/b/land.csv" ] || { echo "FAIL: $dir/a/b/land.csv not written"; fail=1; }
if python3 -c 'import matplotlib' 2>/dev/null; then
  grep -qaF "legend: loss, d loss / d tet.k_mu, true value; overlapping x tick labels: 0" "$dir/a/b/land.png" ||
    { echo "FAIL: 1-D plot: legend or ticks"; grep -ao "legend: [^;]*; overlapping x tick labels: [0-9]*" "$dir/a/b/land.png"; fail=1; }
  check "linear axis" 0 "$DSIM" landscape "$dir/l.json" --range1 800:1200:41 --out "$dir/lin"
  grep -qaF "overlapping x tick labels: 0" "$dir/lin.png" || { echo "FAIL: linear axis tick labels overlap"; fail=1; }
  check "2-D" 0 "$DSIM" landscape "$dir/l.json" --range1 500:2000:4 --range2 500:2000:4 --geometric --out "$dir/two"
  grep -qaF "legend: -gradient (descent direction), true value; overlapping x tick labels: 0" "$dir/two.png" ||
    { echo "FAIL: 2-D plot: legend or ticks"; grep -ao "legend: [^;]*; overlapping x tick labels: [0-9]*" "$dir/two.png"; fail=1; }
else
  echo "note: python3 with matplotlib not found: the plot checks are skipped"
fi
# footage (no truth): the frames of the truth, exported with their camera file
check "truth video" 0 "$DSIM" sysid "$dir/l.json" --set sysid.param1.init=[1000] --set sysid.param2.init=[1000] --out "$dir/v.h5" --quiet
check "export" 0 "$DSIM" export "$dir/v.h5" --episode first --frames "$dir/fr" --camera "$dir/cam.json"
check "footage landscape" 0 "$DSIM" landscape "$dir/l.json" --set sysid.video=frames --set "sysid.frames_dir=$dir/fr" \
  --set "sysid.camera=$dir/cam.json" --set sysid.param2.init=[1000] --range1 800:1200:5 --out "$dir/foot" --no-plot
expect "footage landscape" "true values unknown"
expect "footage lowest" "at tet.k_mu = 1000"
exit $fail

#!/bin/sh
# `dsim sysid` with several views and an identified camera, then `dsim
# export --camera`: a run whose camera has intrinsics exports fx, fy, cx, cy
# (not a fov it never used); a run of two views exports the "views" list with
# the second camera's estimate; the run log's /config keeps sysid.cameras;
# the exported camera file reads back (dsim sysid refuses only its missing
# view folder, named by the view's index).
set -u
: "${DSIM:?DSIM must name the dsim binary}" "${DS_BUILDDIR:?}"
if "$DSIM" info | grep -q "HDF5:       off"; then echo "SKIP: built without HDF5"; exit 77; fi
dir=$(mktemp -d "$DS_BUILDDIR/tests/sysidviews.XXXXXX")
trap 'rm -rf "$dir"' EXIT
fail=0
check() { # what, command...
  what=$1
  shift
  if ! "$@"; then echo "FAIL: $what"; fail=1; fi
}

cat >"$dir/intr.json" <<'JSON'
{ "env": { "name": "beam", "beam": {"cells": [3, 1, 1], "clamp": false},
    "physics": {"substeps": 192, "render_interval": 64, "ground": false, "gravity": [0, 0, 0]},
    "render": {"width": 16, "height": 16, "sigma": 0.001},
    "camera": {"distance": 2, "elevation": 0, "azimuth": 0, "fx": 20, "fy": 21, "cx": 8.5, "cy": 7.5} },
  "sysid": {
    "param1": {"name": "initial_velocity", "lower": -10, "upper": 10, "init": [0.1, 0, 0], "true": [0.2, 0, 0]},
    "optimizer": "lbfgs", "iterations": 2 },
  "run": {"seed": 0, "threads": 1} }
JSON
"$DSIM" sysid "$dir/intr.json" --out "$dir/intr" >"$dir/out1" 2>&1 || { cat "$dir/out1"; echo "FAIL: sysid intr"; fail=1; }
"$DSIM" export "$dir/intr" --camera "$dir/intr_cam.json" >/dev/null 2>&1 || { echo "FAIL: export intr"; fail=1; }
check "intrinsics exported" grep -q '"fx": 20, "fy": 21, "cx": 8.5, "cy": 7.5' "$dir/intr_cam.json"
check "no fov beside the intrinsics" sh -c "! grep -q fov '$dir/intr_cam.json'"

sed -e 's/, "fx": 20, "fy": 21, "cx": 8.5, "cy": 7.5//' \
    -e 's/"iterations": 2 }/"iterations": 3, "cameras": [{"position": [0, 0, -2], "look_at": [0, 0, 0], "fov": 30}, {"position": [2, 0.4, 0.2], "look_at": [0, 0, 0], "fx": 20, "fy": 20, "cx": 8, "cy": 8}],\n    "param2": {"name": "camera2.position", "lower": -10, "upper": 10, "init": [2.02, 0.39, 0.21]} }/' \
    "$dir/intr.json" >"$dir/two.json"
"$DSIM" sysid "$dir/two.json" --out "$dir/two" >"$dir/out2" 2>&1 || { cat "$dir/out2"; echo "FAIL: sysid two views"; fail=1; }
"$DSIM" export "$dir/two" --frames "$dir/front" --camera "$dir/two_cam.json" >/dev/null 2>&1 || { echo "FAIL: export two"; fail=1; }
check "views exported" grep -q '"views"' "$dir/two_cam.json"
check "view 0's frames folder" grep -q '"frames": "front"' "$dir/two_cam.json"
check "view 1 with intrinsics" grep -q '"fx": 20, "fy": 20, "cx": 8, "cy": 8, "frames": "view1"' "$dir/two_cam.json"
# --collect rebuilds the object from the log's /config: camera2.position needs its sysid.cameras
check "the log's config keeps sysid.cameras" sh -c "'$DSIM' sysid --collect '$dir/two' >'$dir/out4' 2>&1"
check "the collected table" grep -q 'camera2.position' "$dir/out4"
# the exported file as footage: view 1's folder is not in the log
cat >"$dir/foot.json" <<JSON
{ "env": { "name": "beam", "beam": {"cells": [3, 1, 1], "clamp": false},
    "physics": {"substeps": 192, "render_interval": 64, "ground": false, "gravity": [0, 0, 0]},
    "render": {"width": 16, "height": 16, "sigma": 0.001} },
  "sysid": { "param1": {"name": "initial_velocity", "lower": -10, "upper": 10, "init": [0.1, 0, 0]},
    "iterations": 1, "video": "frames", "frames_dir": "$dir", "camera": "$dir/two_cam.json" },
  "run": {"seed": 0, "threads": 1} }
JSON
"$DSIM" sysid "$dir/foot.json" --out "$dir/foot" >"$dir/out3" 2>&1
check "a missing view folder named" grep -q 'views\[1\].frames' "$dir/out3"
[ $fail = 0 ] || { cat "$dir/intr_cam.json" "$dir/two_cam.json" "$dir/out3"; }
exit $fail

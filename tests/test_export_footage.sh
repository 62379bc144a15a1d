#!/bin/sh
# Self-describing footage (issue 32): a sysid log's frames carry their times,
# substeps and camera, t = 0 included; `dsim export` writes them into
# frames.json and each PNG's "dsim:frame" text chunk, and --camera writes the
# camera file, so that `dsim sysid` reads the exported frames back with no
# times to guess (from frames.json, else from the PNGs); footage without any
# times is refused with a message; --goal and --overlay; a log without frame
# times (an older or hand-written one) still exports.
set -u
: "${DSIM:?}" "${DS_BUILDDIR:?}" "${DS_SRCDIR:?}"
fail=0
. "$DS_SRCDIR/tests/clicheck.sh"
if "$DSIM" info | grep -q "HDF5:       off"; then echo "SKIP: built without HDF5"; exit 77; fi
if "$DSIM" info | grep -q "precision:  single"; then echo "SKIP: the estimate check needs a double build"; exit 77; fi
dir=$(mktemp -d "$DS_BUILDDIR/tests/footage.XXXXXX")
trap 'rm -rf "$dir"' EXIT

cat >"$dir/l.json" <<'JSON'
{ "env": { "name": "beam", "beam": {"cells": [3, 1, 1]},
    "physics": {"substeps": 256, "render_interval": 64, "control_interval": 64},
    "render": {"width": 24, "height": 24, "supersample": 1, "sigma": 1e-3} },
  "sysid": {
    "param1": {"name": "tet.k_mu", "lower": 10, "upper": 100000, "init": [1000], "true": [1000]},
    "optimizer": "lbfgs", "lr": 0.5, "iterations": 1 },
  "run": {"seed": 4, "threads": 1} }
JSON
check "truth video" 0 "$DSIM" sysid "$dir/l.json" --out "$dir/v.h5" --quiet
check "export" 0 "$DSIM" export "$dir/v.h5" --episode first --frames "$dir/fr" --camera "$dir/cam.json" --goal "$dir/goal.png"
expect "export frames" "wrote 5 frames (24 x 24) and frames.json"
expect "export camera" "wrote $dir/cam.json (camera and 5 frame times)"
expect "export goal" "wrote $dir/goal.png (goal image, 24 x 24)"
n=$(ls "$dir/fr/"*.png | wc -l)
[ "$n" -eq 5 ] || { echo "FAIL: $n frames exported, expected 5 (t = 0 and the video's 4)"; fail=1; }
times='"times": [0, 0.033333333333333333, 0.066666666666666666, 0.10000000000000001, 0.13333333333333333]'
grep -qF "$times" "$dir/fr/frames.json" || { echo "FAIL: frames.json times"; cat "$dir/fr/frames.json"; fail=1; }
grep -qF '"substeps": [0, 64, 128, 192, 256]' "$dir/fr/frames.json" || { echo "FAIL: frames.json substeps"; fail=1; }
grep -qF '"camera": {"position": [0, 0.434120444167325' "$dir/fr/frames.json" || { echo "FAIL: frames.json camera"; fail=1; }
grep -qF "$times" "$dir/cam.json" || { echo "FAIL: camera file times"; cat "$dir/cam.json"; fail=1; }
grep -qF '"fov": 30' "$dir/cam.json" || { echo "FAIL: camera file fov"; fail=1; }
grep -qaF '{"frame": 2, "substep": 128, "time": 0.066666666666666666}' "$dir/fr/frame_0002.png" ||
  { echo "FAIL: frame_0002.png has no dsim:frame text chunk"; fail=1; }
[ "$(head -c 4 "$dir/goal.png" | od -An -c | tr -d ' ')" = "211PNG" ] || { echo "FAIL: goal.png is not a PNG"; fail=1; }

# footage read back: the camera file without times; the times come from the frames
sed '/"times"/d' "$dir/cam.json" >"$dir/cam_nt.json"
cat >"$dir/f.json" <<JSON
{ "env": { "name": "beam", "beam": {"cells": [3, 1, 1]}, "render": {"supersample": 1, "sigma": 1e-3} },
  "sysid": {
    "param1": {"name": "tet.k_mu", "lower": 10, "upper": 100000, "init": [800]},
    "optimizer": "lbfgs", "lr": 0.5, "iterations": 10,
    "video": "frames", "frames_dir": "$dir/fr", "camera": "$dir/cam_nt.json" },
  "run": {"threads": 1} }
JSON
for how in frames.json png; do
  [ $how = png ] && rm "$dir/fr/frames.json"
  check "footage, times from $how" 0 "$DSIM" sysid "$dir/f.json" --out "$dir/f-$how.h5" --csv "$dir/f-$how.csv"
  expect "footage frames ($how)" "video $dir/fr (4 frames)"
  est=$(awk -F, 'NR == 2 { print $4 }' "$dir/f-$how.csv")
  awk -v e="$est" 'BEGIN { exit !(e > 990 && e < 1010) }' || { echo "FAIL: estimate $est ($how), expected 1000 +- 1 %"; fail=1; }
done
# a camera that looks elsewhere than the origin: the log records its look-at
# point, the exported camera file reproduces the view, and the footage read
# back with it identifies the same value
sed 's/"render": {"width": 24, "height": 24, "supersample": 1, "sigma": 1e-3} },/"render": {"width": 24, "height": 24, "supersample": 1, "sigma": 1e-3},\
    "camera": {"look_at": [0.1, 0.05, 0]} },/' "$dir/l.json" >"$dir/la.json"
check "truth video, look-at" 0 "$DSIM" sysid "$dir/la.json" --out "$dir/la.h5" --quiet
check "export, look-at" 0 "$DSIM" export "$dir/la.h5" --episode first --frames "$dir/fla" --camera "$dir/cla.json"
grep -qF '"look_at": [0.10000000000000001, 0.050000000000000003, 0]' "$dir/cla.json" ||
  { echo "FAIL: the exported camera file lacks the look-at point"; cat "$dir/cla.json"; fail=1; }
grep -qF '"position": [0.10000000000000001, 0.4841204441673258,' "$dir/cla.json" ||
  { echo "FAIL: the exported camera position is not about the look-at point"; cat "$dir/cla.json"; fail=1; }
check "footage, look-at" 0 "$DSIM" sysid "$dir/f.json" --set "sysid.frames_dir=$dir/fla" --set "sysid.camera=$dir/cla.json" \
  --out "$dir/fla.h5" --csv "$dir/fla.csv"
est=$(awk -F, 'NR == 2 { print $4 }' "$dir/fla.csv")
awk -v e="$est" 'BEGIN { exit !(e > 990 && e < 1010) }' || { echo "FAIL: estimate $est (look-at), expected 1000 +- 1 %"; fail=1; }
# a user's own footage without times anywhere is refused, naming what to give
mkdir "$dir/own" && for k in 0 1 2 3; do cp "$dir/goal.png" "$dir/own/f$k.png"; done
check "no times" 3 "$DSIM" sysid "$dir/f.json" --set "sysid.frames_dir=$dir/own" --out "$dir/x.h5"
expect "no times" "cam_nt.json: no \"times\", and $dir/own has no frames.json and f0.png carries no time"
# ... and works as before with times in the camera file
sed 's/"times": \[0, /"times": [/' "$dir/cam.json" >"$dir/cam4.json"
check "own footage with camera times" 0 "$DSIM" sysid "$dir/f.json" --set "sysid.frames_dir=$dir/own" \
  --set "sysid.camera=$dir/cam4.json" --iterations 1 --out "$dir/own2.h5"

# overlays change the exported pictures only
check "plain again" 0 "$DSIM" export "$dir/v.h5" --episode first --frames "$dir/p1"
check "overlay" 0 "$DSIM" export "$dir/v.h5" --episode first --frames "$dir/ov" --gif "$dir/ov.gif" --overlay goal,ground,time
check "plain after" 0 "$DSIM" export "$dir/v.h5" --episode first --frames "$dir/p2"
cmp -s "$dir/p1/frame_0003.png" "$dir/p2/frame_0003.png" || { echo "FAIL: the log's frames changed"; fail=1; }
cmp -s "$dir/p1/frame_0003.png" "$dir/ov/frame_0003.png" && { echo "FAIL: --overlay drew nothing"; fail=1; }
grep -qF '"overlays": "goal ground time"' "$dir/ov/frames.json" || { echo "FAIL: frames.json overlays"; fail=1; }
check "bad overlay" 2 "$DSIM" export "$dir/v.h5" --frames "$dir/o2" --overlay goal,sky
expect "bad overlay" "--overlay 'goal,sky': expected a comma list of goal, ground, time"

# a log without frame times (hand-written: no schedule) exports frames, and no camera
"$DS_BUILDDIR/tests/runlog_writer" "$dir/w.h5" 1 0 >/dev/null || { echo "FAIL: writer"; fail=1; }
check "old log frames" 0 "$DSIM" export "$dir/w.h5" --episode last --frames "$dir/w"
grep -q '"times"' "$dir/w/frames.json" && { echo "FAIL: times invented for a log without them"; fail=1; }
check "old log camera" 1 "$DSIM" export "$dir/w.h5" --episode last --camera "$dir/wc.json"
expect "old log camera" "has no frame times or camera"
exit $fail

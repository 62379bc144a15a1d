#!/bin/sh
# `dsim sysid` and `dsim landscape` on a small beam: a synthetic
# identification and its log; results independent of the thread count;
# --shard i/n logs merged by --collect equal the unsharded run; landscape
# values equal the loss of a direct evaluation; footage (PNG frames + camera
# file) recovering the value it was rendered with; and every bad input of the
# issue (a frame missing, of another size or unreadable, a camera key
# missing, an unknown parameter, bounds excluding the guess) refused with a
# message naming the file or key before anything runs.
set -u
: "${DSIM:?DSIM must name the dsim binary}" "${DS_BUILDDIR:?}"
fail=0
. "$DS_SRCDIR/tests/clicheck.sh"
if "$DSIM" info | grep -q "HDF5:       off"; then echo "SKIP: built without HDF5"; exit 77; fi
# the tables compare the run's estimates with those read back from the logs
# digit for digit; a single-precision build logs float values
if "$DSIM" info | grep -q "precision:  single"; then echo "SKIP: the table comparisons need a double build"; exit 77; fi
dir=$(mktemp -d "$DS_BUILDDIR/tests/sysidcli.XXXXXX")
trap 'rm -rf "$dir"' EXIT

cat >"$dir/m.json" <<'JSON'
{ "env": { "name": "beam", "beam": {"cells": [3, 1, 1]},
    "physics": {"substeps": 256, "render_interval": 64, "control_interval": 64},
    "render": {"width": 24, "height": 24, "supersample": 1, "sigma": 1e-3} },
  "sysid": {
    "param1": {"name": "tet.k_mu", "lower": 10, "upper": 100000, "init_range": [500, 2000], "true_range": [500, 2000]},
    "optimizer": "lbfgs", "lr": 0.5, "iterations": 10 },
  "run": {"seed": 4, "threads": 1} }
JSON

# a synthetic identification
check "synthetic" 0 "$DSIM" sysid "$dir/m.json" --out "$dir/a.h5" --csv "$dir/a.csv"
expect "progress" "iteration 0 (1 of 10) loss"
expect "table" "tet.k_mu"
[ -f "$dir/a.h5" ] || { echo "FAIL: no log"; fail=1; }
are=$(awk -F, 'NR == 2 { print $5 }' "$dir/a.csv")
awk -v a="$are" 'BEGIN { exit !(a < 1e-4) }' || { echo "FAIL: relative error $are, expected < 1e-4"; fail=1; }
check "the log reads" 0 "$DSIM" info "$dir/a.h5"
expect "method" "sysid"
check "exists" 2 "$DSIM" sysid "$dir/m.json" --out "$dir/a.h5"
expect "exists" "exists"
check "force" 0 "$DSIM" sysid "$dir/m.json" --out "$dir/a.h5" --force --quiet --iterations 2

# objects in parallel: the same results with 1 and 2 threads
check "objects, 1 thread" 0 "$DSIM" sysid "$dir/m.json" --objects 3 --threads 1 --out "$dir/t1" --csv "$dir/t1.csv" --quiet
check "objects, 2 threads" 0 "$DSIM" sysid "$dir/m.json" --objects 3 --threads 2 --out "$dir/t2" --csv "$dir/t2.csv" --quiet
cut -d, -f1-5,7 "$dir/t1.csv" >"$dir/t1.cut"
cut -d, -f1-5,7 "$dir/t2.csv" >"$dir/t2.cut"
cmp -s "$dir/t1.cut" "$dir/t2.cut" || { echo "FAIL: results differ with 1 and 2 threads"; diff "$dir/t1.cut" "$dir/t2.cut"; fail=1; }
[ "$(wc -l <"$dir/t1.cut")" -eq 4 ] || { echo "FAIL: expected 3 rows"; cat "$dir/t1.cut"; fail=1; }

# objects together (--group: one lockstep batch per iteration; adam): the
# same table and the same logs, digit for digit, as the objects one by one
check "adam, one by one" 0 "$DSIM" sysid "$dir/m.json" --objects 3 --optimizer adam --lr 0.1 --iterations 4 --out "$dir/g1" --csv "$dir/g1.csv" --quiet
check "adam, --group" 0 "$DSIM" sysid "$dir/m.json" --objects 3 --optimizer adam --lr 0.1 --iterations 4 --group --out "$dir/g2" --csv "$dir/g2.csv"
expect "group" "objects evaluated together"
expect "group progress" "iteration 3 (4 of 4): 3 of 3 objects going"
cut -d, -f1-5,7 "$dir/g1.csv" >"$dir/g1.cut"
cut -d, -f1-5,7 "$dir/g2.csv" >"$dir/g2.cut"
cmp -s "$dir/g1.cut" "$dir/g2.cut" || { echo "FAIL: --group results differ"; diff "$dir/g1.cut" "$dir/g2.cut"; fail=1; }
if command -v h5dump >/dev/null 2>&1; then
  for k in 0 1 2; do
    for d in /iterations/loss /iterations/params /iterations/grad_norm /episodes/best/frames; do
      h5dump -d "$d" -m %.17g "$dir/g1-o$k.h5" | tail -n +2 >"$dir/h1"
      h5dump -d "$d" -m %.17g "$dir/g2-o$k.h5" | tail -n +2 >"$dir/h2"
      cmp -s "$dir/h1" "$dir/h2" || { echo "FAIL: --group log of object $k differs in $d"; fail=1; }
    done
  done
fi
check "--group with lbfgs" 2 "$DSIM" sysid "$dir/m.json" --objects 2 --group --out "$dir/g3"
expect "--group with lbfgs" "--group: optimizer lbfgs runs a line search of its own per object"

# shards, then --collect: the unsharded table
check "shard 0/2" 0 "$DSIM" sysid "$dir/m.json" --objects 3 --shard 0/2 --out "$dir/s" --quiet
[ -f "$dir/s-o0.h5" ] && [ -f "$dir/s-o2.h5" ] && [ ! -f "$dir/s-o1.h5" ] || { echo "FAIL: shard 0/2 logs"; ls "$dir"; fail=1; }
check "shard 1/2" 0 "$DSIM" sysid "$dir/m.json" --objects 3 --shard 1/2 --out "$dir/s" --quiet
check "collect" 0 "$DSIM" sysid --collect "$dir/s-o0.h5" "$dir/s-o1.h5" "$dir/s-o2.h5" --csv "$dir/c.csv"
expect "collect" "collected 3 logs"
cut -d, -f1-5,7 "$dir/c.csv" >"$dir/c.cut"
cmp -s "$dir/t1.cut" "$dir/c.cut" || { echo "FAIL: collected table differs"; diff "$dir/t1.cut" "$dir/c.cut"; fail=1; }
# per-particle masses of a clamped beam (its fixed particles stay out): the
# collected table equals the run's
sed 's/"name": "tet.k_mu", "lower": 10, "upper": 100000, "init_range": \[500, 2000\], "true_range": \[500, 2000\]/"name": "particle.mass", "per_element": true, "lower": 1e-5, "upper": 1, "init_range": [0.001, 0.003], "true_range": [0.001, 0.003]/; s/"optimizer": "lbfgs", "lr": 0.5, "iterations": 10/"optimizer": "adam", "lr": 0.1, "iterations": 4/' "$dir/m.json" >"$dir/pm.json"
check "per-particle mass" 0 "$DSIM" sysid "$dir/pm.json" --objects 2 --out "$dir/pm" --csv "$dir/pm.csv" --quiet
check "collect per-particle mass" 0 "$DSIM" sysid --collect "$dir/pm-o0.h5" "$dir/pm-o1.h5" --csv "$dir/pmc.csv"
cut -d, -f1-5,7 "$dir/pm.csv" >"$dir/pm.cut"
cut -d, -f1-5,7 "$dir/pmc.csv" >"$dir/pmc.cut"
cmp -s "$dir/pm.cut" "$dir/pmc.cut" || { echo "FAIL: collected per-particle table differs"; diff "$dir/pm.cut" "$dir/pmc.cut"; fail=1; }
grep -q particle.mass "$dir/pm.cut" || { echo "FAIL: no particle.mass rows"; fail=1; }
check "shard out of range" 2 "$DSIM" sysid "$dir/m.json" --shard 2/2
expect "shard" "--shard: expected I/N"
check "collect a dsim run log" 3 "$DSIM" sysid --collect "$dir/nothing.h5"
expect "collect missing" "nothing.h5"

# landscape: grid values equal direct evaluations (iteration 0 of a run from that value)
sed 's/"init_range": \[500, 2000\], "true_range": \[500, 2000\]/"init": [800], "true": [1000]/' "$dir/m.json" >"$dir/l.json"
check "landscape" 0 "$DSIM" landscape "$dir/l.json" --range1 800:1200:3 --out "$dir/land" --no-plot
expect "landscape lowest" "lowest loss 0 at tet.k_mu = 1000"
[ -f "$dir/land.csv" ] && [ -f "$dir/land.h5" ] || { echo "FAIL: landscape outputs"; fail=1; }
check "direct" 0 "$DSIM" sysid "$dir/l.json" --iterations 1 --out "$dir/d.h5" --quiet
check "export" 0 "$DSIM" export "$dir/d.h5" --csv "$dir/d.csv"
l1=$(awk -F, 'NR == 2 { print $2 }' "$dir/land.csv")
l2=$(awk -F, 'NR == 2 { print $2 }' "$dir/d.csv")
[ "$l1" = "$l2" ] || { echo "FAIL: landscape loss $l1, direct loss $l2"; fail=1; }
g1=$(awk -F, 'NR == 2 { print $3 }' "$dir/land.csv")
awk -v g="$g1" 'BEGIN { exit !(g < 0) }' || { echo "FAIL: gradient below the truth should be negative, got $g1"; fail=1; }
# the grid in lockstep batches (--group): the same CSV digit for digit
check "landscape --group" 0 "$DSIM" landscape "$dir/l.json" --range1 800:1200:3 --group --out "$dir/landg" --no-plot
cmp -s "$dir/land.csv" "$dir/landg.csv" || { echo "FAIL: landscape --group differs"; diff "$dir/land.csv" "$dir/landg.csv"; fail=1; }
check "landscape exists" 2 "$DSIM" landscape "$dir/l.json" --range1 800:1200:3 --out "$dir/land" --no-plot
check "landscape range" 2 "$DSIM" landscape "$dir/l.json" --range1 800:700:3
expect "landscape range" "--range1: expected LO:HI:N"

# footage: the frames of the true value as PNGs (t = 0, the initial state,
# first), a camera file (the beam's own camera: 2.5 m away, 10 degrees
# above), a guess off by 20 %
check "truth video" 0 "$DSIM" sysid "$dir/l.json" --iterations 1 --set sysid.param1.init=[1000] --out "$dir/v.h5" --quiet
check "frames" 0 "$DSIM" export "$dir/v.h5" --episode first --frames "$dir/frames"
cat >"$dir/camera.json" <<'JSON'
{ "times": [0, 0.033333333333333333, 0.066666666666666667, 0.1, 0.13333333333333333],
  "position": [0, 0.43412044416732576, -2.4620193825305203], "look_at": [0, 0, 0], "fov": 30 }
JSON
cat >"$dir/f.json" <<JSON
{ "env": { "name": "beam", "beam": {"cells": [3, 1, 1]},
    "render": {"supersample": 1, "sigma": 1e-3} },
  "sysid": {
    "param1": {"name": "tet.k_mu", "lower": 10, "upper": 100000, "init": [800]},
    "optimizer": "lbfgs", "lr": 0.5, "iterations": 10,
    "video": "frames", "frames_dir": "$dir/frames", "camera": "$dir/camera.json" },
  "run": {"threads": 1} }
JSON
check "footage" 0 "$DSIM" sysid "$dir/f.json" --out "$dir/f.h5" --csv "$dir/f.csv"
expect "footage frames" "video $dir/frames (4 frames)"
est=$(awk -F, 'NR == 2 { print $4 }' "$dir/f.csv")
awk -v e="$est" 'BEGIN { exit !(e > 990 && e < 1010) }' || { echo "FAIL: footage estimate $est, expected 1000 +- 1 %"; fail=1; }
# footage has no true values: "-" instead of nan; "loss" once per progress line
case $LAST in *nan*) echo "FAIL: footage output prints nan"; echo "$LAST"; fail=1 ;; esac
echo "$LAST" | grep '^iteration' | grep -q 'loss.* loss ' && { echo "FAIL: a progress line prints loss twice"; echo "$LAST"; fail=1; }
echo "$LAST" | grep -q '^0 *tet.k_mu *- *[0-9.e+]* *- ' || { echo "FAIL: footage table row: true and error not '-'"; echo "$LAST"; fail=1; }
# L-BFGS stops with its reason instead of iterating with 0 evaluations
check "footage, 40 iterations" 0 "$DSIM" sysid "$dir/f.json" --iterations 40 --out "$dir/f40.h5" --force
case $LAST in *"evaluations 0 "*) echo "FAIL: L-BFGS iterated after it stopped"; echo "$LAST"; fail=1 ;; esac
expect "footage stops" "stopped after iteration"
check "guess at the truth" 0 "$DSIM" sysid "$dir/l.json" --set sysid.param1.init=[1000] --iterations 5 --out "$dir/t5.h5"
expect "guess at the truth" "stopped after iteration 0: converged: loss at most 1e-15 of its initial value"
# a bare number for a one-value list; `dsim config` keeps the sysid section
sed 's/"init": \[800\]/"init": 1200/' "$dir/f.json" >"$dir/scalar.json"
check "init as a number" 0 "$DSIM" sysid "$dir/scalar.json" --iterations 1 --out "$dir/sc.h5" --quiet
check "init as a number (flag)" 0 "$DSIM" sysid "$dir/l.json" --set sysid.param1.init=900 --iterations 1 --out "$dir/sc2.h5" --quiet
check "init_range as a number" 3 "$DSIM" sysid "$dir/m.json" --set sysid.param1.init_range=700 --out "$dir/x.h5"
expect "init_range as a number" "sysid.param1.init_range: expected [a, b]"
check "config of a sysid config" 0 "$DSIM" config "$dir/scalar.json"
echo "$LAST" >"$dir/rt.json"
expect "config sysid section" '"sysid": {'
expect "config sysid init" '"init": [1200]'
case $LAST in *'"controller"'*|*param2*) echo "FAIL: dsim config of a sysid config: controller section or unused parameters"; echo "$LAST"; fail=1 ;; esac
check "config round trip" 0 "$DSIM" config "$dir/rt.json"
[ "$LAST" = "$(cat "$dir/rt.json")" ] || { echo "FAIL: dsim config of its own output differs"; fail=1; }
check "sysid from dsim config" 0 "$DSIM" sysid "$dir/rt.json" --iterations 1 --out "$dir/rt.h5" --quiet

# bad input, each refused before anything runs (no log)
check "unknown parameter" 3 "$DSIM" sysid "$dir/m.json" --set sysid.param1.name=tet.k_muu --out "$dir/x.h5"
expect "unknown parameter" "sysid.param1.name: env \"beam\" has no parameter \"tet.k_muu\""
check "bounds exclude the guess" 3 "$DSIM" sysid "$dir/l.json" --set sysid.param1.lower=900 --out "$dir/x.h5"
expect "bounds" "sysid.param1.init: 800 is outside the bounds [900, 100000]"
check "range outside the bounds" 3 "$DSIM" sysid "$dir/m.json" --set sysid.param1.upper=1000 --out "$dir/x.h5"
expect "range bounds" "sysid.param1.init_range: [500, 2000] is not an interval inside the bounds [10, 1000]"
sed 's/, "fov": 30//' "$dir/camera.json" >"$dir/cam2.json"
check "camera key missing" 3 "$DSIM" sysid "$dir/f.json" --set "sysid.camera=$dir/cam2.json" --out "$dir/x.h5"
expect "camera key" "cam2.json: missing key \"fov\""
sed 's/"look_at"/"lookat"/' "$dir/camera.json" >"$dir/cam3.json"
check "camera key misspelt" 3 "$DSIM" sysid "$dir/f.json" --set "sysid.camera=$dir/cam3.json" --out "$dir/x.h5"
expect "camera key misspelt" "cam3.json: unknown key \"lookat\""
mkdir "$dir/missing" && cp "$dir/frames/"*.png "$dir/missing/" && rm "$dir/missing/frame_0002.png"
check "frame missing" 3 "$DSIM" sysid "$dir/f.json" --set "sysid.frames_dir=$dir/missing" --out "$dir/x.h5"
expect "frame missing" "missing: 4 PNG frames, but $dir/camera.json gives 5 frame times"
check "small video" 0 "$DSIM" sysid "$dir/l.json" --iterations 1 --set env.render.width=16 --set env.render.height=16 --out "$dir/v16.h5" --quiet
check "small frames" 0 "$DSIM" export "$dir/v16.h5" --episode first --frames "$dir/f16"
mkdir "$dir/sized" && cp "$dir/frames/"*.png "$dir/sized/" && cp "$dir/f16/frame_0001.png" "$dir/sized/frame_0001.png"
check "frame of another size" 3 "$DSIM" sysid "$dir/f.json" --set "sysid.frames_dir=$dir/sized" --out "$dir/x.h5"
expect "frame size" "sized/frame_0001.png: 16 x 16 pixels, but $dir/sized/frame_0000.png is 24 x 24"
mkdir "$dir/broken" && cp "$dir/frames/"*.png "$dir/broken/" && echo "not a png" >"$dir/broken/frame_0003.png"
check "unreadable frame" 3 "$DSIM" sysid "$dir/f.json" --set "sysid.frames_dir=$dir/broken" --out "$dir/x.h5"
expect "unreadable frame" "broken/frame_0003.png"
check "no frames folder" 3 "$DSIM" sysid "$dir/f.json" --set "sysid.frames_dir=$dir/none" --out "$dir/x.h5"
expect "no frames folder" "sysid.frames_dir: $dir/none: cannot open"
[ ! -f "$dir/x.h5" ] || { echo "FAIL: a refused input left a log"; fail=1; }
check "unknown sysid key (flag)" 2 "$DSIM" sysid "$dir/m.json" --set sysid.param1.nam=x
expect "unknown key" "unknown key \"sysid.param1.nam\" (did you mean \"sysid.param1.name\"?)"
sed "s/\"optimizer\"/\"optimiser\"/" "$dir/m.json" >"$dir/bad.json"
check "unknown sysid key (file)" 3 "$DSIM" sysid "$dir/bad.json"
expect "unknown key in file" "bad.json: unknown key \"sysid.optimiser\""
check "bad flag" 2 "$DSIM" sysid "$dir/m.json" --objects 0
exit $fail

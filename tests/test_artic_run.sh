#!/bin/sh
# The articulated envs from the command line: `dsim run` on the bundled
# configs/pendulum.json and configs/double-pendulum.json (two iterations,
# shortened and at 32 x 32 to stay fast) completes and logs; `dsim sysid`
# on configs/sysid-pendulum.json (one object, 1 s) recovers the length and
# the damping; the batched engine is refused naming the env; the runner's
# bundled config moves it on its first pass.
set -u
: "${DSIM:?DSIM must name the dsim binary}"
: "${DS_SRCDIR:?DS_SRCDIR must name the source tree}"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dsim-artic.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
fail=0
small="--set env.physics.substeps=192 --set env.render.width=32 --set env.render.height=32"
for env in pendulum double-pendulum; do
  # shellcheck disable=SC2086
  if ! "$DSIM" run "$DS_SRCDIR/configs/$env.json" --iterations 2 --threads 1 $small --out "$tmp/$env.h5" \
      >"$tmp/$env.txt" 2>&1; then
    echo "FAIL: dsim run configs/$env.json:"; cat "$tmp/$env.txt"; fail=1
  elif ! grep -q "2 iterations, status completed" "$tmp/$env.txt" || [ ! -s "$tmp/$env.h5" ]; then
    echo "FAIL: dsim run configs/$env.json did not complete and log:"; cat "$tmp/$env.txt"; fail=1
  fi
done
# shellcheck disable=SC2086
if ! "$DSIM" sysid "$DS_SRCDIR/configs/sysid-pendulum.json" --objects 1 --seed 3 --threads 1 \
    --set env.physics.substeps=960 --out "$tmp/sysid" --csv "$tmp/sysid.csv" >"$tmp/sysid.txt" 2>&1; then
  echo "FAIL: dsim sysid configs/sysid-pendulum.json:"; cat "$tmp/sysid.txt"; fail=1
else
  awk -F, 'NR > 1 && !($5 + 0 < 1e-4) { print "FAIL: sysid-pendulum: " $2 " ARE " $5 " (expected < 1e-4)"; bad = 1 }
           END { exit bad }' "$tmp/sysid.csv" || fail=1
fi
# the batched engine runs it too (docs/articulated.md "Batched engine"): the same first iteration
if ! "$DSIM" run pendulum --iterations 1 --set env.physics.batched_engine=true $small --out "$tmp/b.h5" \
    >"$tmp/b.txt" 2>&1; then
  echo "FAIL: dsim run pendulum on the batched engine:"; cat "$tmp/b.txt"; fail=1
elif ! "$DSIM" run pendulum --iterations 1 $small --out "$tmp/c.h5" >"$tmp/c.txt" 2>&1; then
  echo "FAIL: dsim run pendulum:"; cat "$tmp/c.txt"; fail=1
else
  lb=$(awk '$1 == "iteration" && $6 == "loss" { print $7; exit }' "$tmp/b.txt")
  lc=$(awk '$1 == "iteration" && $6 == "loss" { print $7; exit }' "$tmp/c.txt")
  if [ -z "$lb" ] || [ "$lb" != "$lc" ]; then
    echo "FAIL: the first iteration's loss on the batched engine ($lb) differs from the serial engine's ($lc)"; fail=1
  fi
fi
# the runner's bundled config (MPC, issue 30 item 5): its first pass on seed 1 walks 2.0 m; the
# whole-episode controller it replaced stood still in its first iteration (0.001 m)
if ! "$DSIM" run "$DS_SRCDIR/configs/runner.json" --iterations 1 --seed 1 --threads 1 --out "$tmp/r.h5" \
    >"$tmp/r.txt" 2>&1; then
  echo "FAIL: dsim run configs/runner.json:"; cat "$tmp/r.txt"; fail=1
else
  awk '$1 == "iteration" && $8 == "metric" { m = $9 } END { exit !(m + 0 > 1.5) }' "$tmp/r.txt" ||
    { echo "FAIL: configs/runner.json, seed 1, first pass: dx not above 1.5 m:"; cat "$tmp/r.txt"; fail=1; }
fi
[ $fail = 0 ] && echo "test_artic_run: dsim run on both configs, sysid-pendulum, the batched refusal, the runner's first pass"
exit $fail

#!/bin/sh
# `dsim run`: flags and their errors (exit codes of cli/cli.h), config lookup
# by env name (through $DSIM_CONFIG_DIR), short runs of every method and of
# MPC on shortened scenes, the run log they leave, and SIGINT / SIGTERM: the
# current iteration finishes, the log is closed as "interrupted", exit status
# 130 / 143.
set -u
: "${DSIM:?DSIM must name the dsim binary}" "${DS_BUILDDIR:?}"
fail=0
. "$DS_SRCDIR/tests/clicheck.sh"
dir=$(mktemp -d "$DS_BUILDDIR/tests/runcli.XXXXXX")
trap 'rm -rf "$dir"' EXIT
hdf5=1
"$DSIM" info | grep -q "HDF5:       off" && hdf5=0

# shortened scenes, found by name through $DSIM_CONFIG_DIR
mkdir -p "$dir/src/configs"
small_config walker "$dir/src/configs/walker.json" 3
small_config control-fem "$dir/src/configs/control-fem.json"
cat >"$dir/bad.json" <<'JSON'
{ "env": {"name": "walker", "physics": {"substeps": "many"}} }
JSON
cat >"$dir/badsec.json" <<'JSON'
{ "env": {"name": "walker"}, "controler": {"lr": 0.1} }
JSON
W="$dir/src/configs/walker.json"

check "run --help" 0 "$DSIM" run --help;                   expect "run --help" "usage: dsim run"
expect "run --help exit codes" "130 Ctrl-C"
check "dsim --help lists run" 0 "$DSIM" --help;            expect "dsim --help lists run" "run "
check "unknown flag" 2 "$DSIM" run "$W" --frob;            expect "unknown flag" "unknown option '--frob'"
check "bad iterations" 2 "$DSIM" run "$W" --iterations abc; expect "bad iterations" "--iterations: run.iterations: expected an integer"
check "zero iterations" 2 "$DSIM" run "$W" --iterations 0; expect "zero iterations" "--iterations"
check "bad lr" 2 "$DSIM" run "$W" --lr=-1;                 expect "bad lr" "--lr: controller.lr: expected a number in [0, 1e+06], got -1"
# an env without actions (smoke-plume) has nothing for the controller: a clear refusal, no log
check "no actions" 3 "$DSIM" run smoke-plume --set env.grid.n=8 --out "$dir/noact.h5"
expect "no actions" "smoke-plume has no actions"
[ ! -e "$dir/noact.h5" ] || { echo "FAIL: no actions: a log was written"; fail=1; }
# the implicit switch alone on a scene with a damping step at the contact skin:
# warned before the run, and the stall names the particle and the way out
check "implicit stall" 1 "$DSIM" run "$W" --iterations 1 --out "$dir/imp.h5" --set env.physics.integrator=implicit
expect "implicit stall: warning" "warning: env.physics.integrator implicit with contact.kd 1000 > 0 and contact.smooth 0"
expect "implicit stall: particle" "Newton did not converge in 50 iterations"
expect "implicit stall: way out" "set contact.smooth > 0 (e.g. 0.01, the skin) or contact.kd 0"
check "implicit smooth" 0 "$DSIM" run "$W" --iterations 1 --out "$dir/imp2.h5" --set env.physics.integrator=implicit \
  --set env.contact.smooth=0.01
case $LAST in *warning*) echo "FAIL: implicit smooth: a warning"; echo "$LAST" | sed 's/^/  | /'; fail=1 ;; esac
check "bad method" 2 "$DSIM" run "$W" --method foo;        expect "bad method" "--method: run.method: expected one of \"image,state,random,cem\", got \"foo\""
check "mpc with cem" 2 "$DSIM" run "$W" --mpc --method cem; expect "mpc with cem" "controller.mpc: MPC needs a gradient method (image or state), not cem"
check "missing value" 2 "$DSIM" run "$W" --out;            expect "missing value" "option '--out' needs a value"
check "decay factor out of range" 2 "$DSIM" run "$W" --decay-factor 1.5; expect "decay factor out of range" "controller.decay_factor: expected a number in [1e-06, 1], got 1.5"
check "set: unknown key" 2 "$DSIM" run "$W" --set env.physic.substeps=9; expect "set: unknown key" "did you mean \"env.physics.substeps\""
check "set: bad value" 2 "$DSIM" run "$W" --set controller.phases=0; expect "set: bad value" "controller.phases: expected an integer in [1, 1024], got 0"
check "set: applies" 0 "$DSIM" run "$W" --set run.iterations=2 --set env.physics.substeps=128 --set controller.phases=2 \
  --out "$dir/set.h5"
expect "set: applies" "2 iterations, 208 parameters"
# the log keeps the resolved config (flags applied): a rerun from it repeats the run
if [ "$hdf5" = 1 ] && /usr/bin/env python3 -c "import h5py" 2>/dev/null; then
  python3 -c "import h5py, sys; d = h5py.File(sys.argv[1], 'r')['/config'][()]; \
open(sys.argv[2], 'wb').write(d if isinstance(d, bytes) else d.encode())" "$dir/set.h5" "$dir/resolved.json"
  check "resolved config rerun" 0 "$DSIM" run "$dir/resolved.json" --out "$dir/set2.h5"
  expect "resolved config rerun" "2 iterations, 208 parameters"
  "$DSIM" run "$W" --set run.iterations=2 --set env.physics.substeps=128 --set controller.phases=2 --out "$dir/set3.h5" \
    | grep '^  loss:' >"$dir/loss_a.txt"
  "$DSIM" run "$dir/resolved.json" --out "$dir/set4.h5" | grep '^  loss:' >"$dir/loss_b.txt"
  cmp -s "$dir/loss_a.txt" "$dir/loss_b.txt" || { echo "FAIL: rerun from the logged config differs"; fail=1; }
fi
check "set: no section" 2 "$DSIM" run "$W" --set lr=3; expect "set: no section" "--set: expected SECTION.KEY=VALUE"
check "config: unknown section" 3 "$DSIM" run "$dir/badsec.json"; expect "config: unknown section" "unknown section \"controler\" (did you mean \"controller\"?"
check "two configs" 2 "$DSIM" run "$W" "$W";               expect "two configs" "unexpected argument"
check "bad threads" 2 "$DSIM" run "$W" --threads -1;       expect "bad threads" "--threads: run.threads: expected an integer in [0, 4096]"
check "missing config" 3 "$DSIM" run "$dir/none.json";     expect "missing config" "none.json: cannot open"
check "unknown env" 3 env DSIM_CONFIG_DIR="$dir/src/configs" "$DSIM" run frobnicator; expect "unknown env" "'frobnicator' is neither"
check "bad config" 3 "$DSIM" run "$dir/bad.json" --out "$dir/bad.h5"; expect "bad config" "env.physics.substeps: expected an integer"

# by env name, default output path (runs/ in the current directory), the config's iterations
( cd "$dir" && DSIM_CONFIG_DIR="$dir/src/configs" "$DSIM" run walker ) >"$dir/name.txt" 2>&1; st=$?
LAST=$(cat "$dir/name.txt")
[ "$st" = 0 ] || { echo "FAIL: run walker by name: exit $st"; sed 's/^/  | /' "$dir/name.txt"; fail=1; }
expect "by name: progress lines" "iteration 2 (3 of 3) loss"
expect "by name: summary" "metric: initial"
expect "by name: wall time" "wall time:"
expect "by name: seed from the config" "seed 3"
if [ "$hdf5" = 1 ]; then
  [ -f "$dir/runs/walker-image-s3.h5" ] || { echo "FAIL: default run log runs/walker-image-s3.h5 missing"; ls -R "$dir" | head; fail=1; }
  check "info of the run" 0 "$DSIM" info "$dir/runs/walker-image-s3.h5"
  expect "info: completed" "status:     completed"
  expect "info: iterations" "iterations: 3"
  expect "info: episodes" "episodes:   first best last"
  expect "info: parameters" "parameters: 416 per iteration"
  # one numbering (from 0), one best (the lowest loss): the progress lines, the summary and info agree
  p=$(awk '/^iteration [0-9]+ \([0-9]+ of [0-9]+\) loss / { if (n++ == 0 || $7 + 0 < b) { b = $7 + 0; it = $2 } } END { print it }' "$dir/name.txt")
  r=$(sed -n 's/^  result: iteration \([0-9]*\) (the best: the lowest loss).*/\1/p' "$dir/name.txt")
  i=$(echo "$LAST" | sed -n 's/^loss:.*lowest .* at iteration \([0-9]*\) (the best).*/\1/p')
  [ -n "$p" ] && [ "$p" = "$r" ] && [ "$r" = "$i" ] || {
    echo "FAIL: best iteration: progress lines '$p', summary '$r', info '$i'"; cat "$dir/name.txt"; echo "$LAST"; fail=1; }
  case $LAST in *"best episode:"*) echo "FAIL: a completed run's best episode is not its best iteration"; echo "$LAST"; fail=1 ;; esac
fi

# no argument: the bundled control-fem config
check "default config" 0 env DSIM_CONFIG_DIR="$dir/src/configs" "$DSIM" run --out "$dir/fem.h5" --threads 1
expect "default config" "control-fem"
expect "default config: threads" "1 thread,"

# every method, and MPC
for m in state random cem; do
  check "method $m" 0 "$DSIM" run "$W" --method $m --iterations 3 --seed 4 --out "$dir/$m.h5" --population 2 --elite 1
  expect "method $m" "method $m, seed 4"
done
check "mpc" 0 "$DSIM" run "$W" --mpc --horizon 4 --execute 2 --inner 2 --iterations 2 --out "$dir/mpc.h5"
expect "mpc" "method image-mpc"
check "sgd, clip, decay" 0 "$DSIM" run "$W" --optimizer sgd --lr 0.5 --clip 0.1 --decay-every 1 --decay-factor 0.5 \
  --iterations 3 --out "$dir/sgd.h5"
expect "sgd decay" "lr 0.125"
[ "$hdf5" = 1 ] && { "$DSIM" info "$dir/mpc.h5" | grep -q "method:     image-mpc" || { echo "FAIL: mpc log method"; fail=1; }; }

# a user-written env class from a plugin (tests/hang_plugin.c) runs like a bundled one
plug="$DS_BUILDDIR/tests/.libs/hang_plugin.so"
cat >"$dir/hang.json" <<'JSON'
{ "env": {"name": "hanging-spring", "material": {"mass": 0.4}},
  "controller": {"strength": 20, "lr": 0.05},
  "run": {"iterations": 8, "seed": 7} }
JSON
check "plugin: class unknown without it" 3 "$DSIM" run "$dir/hang.json" --out "$dir/hang0.h5"
expect "plugin: class unknown without it" "env.name: unknown environment \"hanging-spring\""
check "plugin: missing file" 3 "$DSIM" run "$dir/hang.json" --plugin "$dir/none.so"
expect "plugin: missing file" "--plugin $dir/none.so: cannot load"
if [ -f "$plug" ]; then
  check "plugin: run" 0 "$DSIM" run "$dir/hang.json" --plugin "$plug" --out "$dir/hang.h5"
  expect "plugin: run" "summary: hanging-spring image seed 7: 8 iterations, status completed"
  check "plugin: its keys" 0 "$DSIM" config --plugin "$plug" --keys hanging-spring
  expect "plugin: its keys" "env.material.spring_ke"
  check "plugin: its key checked" 2 "$DSIM" run "$dir/hang.json" --plugin "$plug" --set env.material.mass=-1
  expect "plugin: its key checked" "env.material.mass: expected a number in [1e-06, 1e+06], got -1"
  [ "$hdf5" = 1 ] && { "$DSIM" info "$dir/hang.h5" | grep -q "env:        hanging-spring" || { echo "FAIL: plugin run log"; fail=1; }; }
else
  echo "plugin: $plug not built (shared libraries disabled?); plugin run not checked"
fi

# SIGINT / SIGTERM after a few iterations: clean close, exit 128 + signal
# (each run its own output file, made empty before the run starts: the
# background job's redirection truncates it only once the child runs, and a
# poll of a file the previous run filled would signal the new run before its
# handlers are in place)
for sig in INT TERM; do
  out="$dir/int$sig.txt"
  : >"$out"
  "$DSIM" run "$W" --iterations 1000000 --out "$dir/int$sig.h5" >"$out" 2>&1 &
  pid=$!
  n=0; tries=0
  # up to 120 s for 3 iterations (a loaded machine); a signal before the
  # handlers are in place would end the run by the default action
  while [ "$n" -lt 3 ] && [ "$tries" -lt 2400 ]; do
    n=$(grep -c '^iteration' "$out" 2>/dev/null || true); n=${n:-0}
    tries=$((tries + 1)); sleep 0.05
  done
  [ "$n" -ge 3 ] || { echo "FAIL: SIG$sig: the run printed $n iterations in 120 s (machine too loaded?)"; fail=1; }
  kill -$sig "$pid"; wait "$pid"; st=$?
  want=130; [ $sig = TERM ] && want=143
  [ "$st" = $want ] || { echo "FAIL: SIG$sig: exit $st, expected $want"; sed 's/^/  | /' "$out"; fail=1; }
  grep -q "interrupted (SIG$sig) after" "$out" || { echo "FAIL: SIG$sig: no 'interrupted (SIG$sig) after' line"; fail=1; }
  if [ "$hdf5" = 1 ]; then
    LAST=$("$DSIM" info "$dir/int$sig.h5" 2>&1)
    expect "SIG$sig: status" "status:     interrupted"
    expect "SIG$sig: episodes" "episodes:   first best last"
    done_its=$(grep -c '^iteration' "$out")
    got=$(echo "$LAST" | sed -n 's/^iterations: *\([0-9]*\).*/\1/p')
    [ "${got:-0}" = "$done_its" ] || { echo "FAIL: SIG$sig: log holds ${got:-?} iterations, printed $done_its"; fail=1; }
  fi
done
# SIGKILL mid-run: the log keeps every iteration the run had printed (each
# is flushed before its line is printed) and h5dump and dsim info read it
if [ "$hdf5" = 1 ]; then
  "$DSIM" run "$W" --iterations 1000000 --out "$dir/kill.h5" >"$dir/kill.txt" 2>&1 &
  pid=$!
  n=0; tries=0
  while [ "$n" -lt 4 ] && [ "$tries" -lt 2400 ]; do
    n=$(grep -c '^iteration' "$dir/kill.txt" 2>/dev/null || true); n=${n:-0}
    tries=$((tries + 1)); sleep 0.05
  done
  kill -KILL "$pid"; wait "$pid" 2>/dev/null
  printed=$(grep -c '^iteration' "$dir/kill.txt")
  LAST=$("$DSIM" info "$dir/kill.h5" 2>&1) || { echo "FAIL: SIGKILL: dsim info cannot read the log"; echo "$LAST"; fail=1; }
  expect "SIGKILL: status" "status:     running"
  got=$(echo "$LAST" | sed -n 's/^iterations: *\([0-9]*\).*/\1/p')
  [ "${got:-0}" -ge "$printed" ] || { echo "FAIL: SIGKILL: log holds ${got:-?} iterations, printed $printed"; fail=1; }
  if command -v h5dump >/dev/null 2>&1; then
    h5dump -H "$dir/kill.h5" >/dev/null 2>&1 || { echo "FAIL: SIGKILL: h5dump cannot read the log"; fail=1; }
  fi
fi
exit $fail

#!/bin/sh
# --device / run.device on `dsim run` and `dsim sysid`, and the device list
# of `dsim info`: cpu is accepted; a bad name, CUDA in a build without it, a
# device that is not there are refused (exit 2) with a message saying which
# and what to do; with a GPU, an env class that cannot run on one
# (rigid-toss) is refused when the env is built (exit 3). Also the scripts
# that run where a GPU is (scripts/gpu-check, and the experiments of
# scripts/reproduce-results it calls): they parse, print their usage and
# refuse what they do not know. Runs nothing long.
set -u
: "${DSIM:?DSIM must name the dsim binary}"
fail=0
. "$DS_SRCDIR/tests/clicheck.sh"

check "info" 0 "$DSIM" info; expect "info lists the cpu" "devices:    cpu"
check "bad device" 2 "$DSIM" run walker --device gpu
expect "bad device" "--device 'gpu': expected cpu, cuda or cuda:N"
check "bad device index" 2 "$DSIM" run walker --device cuda:x
expect "bad device index" "expected cuda:N with N a device number"
check "bad device key" 2 "$DSIM" run walker --set run.device=tpu
expect "bad device key" "run.device 'tpu': expected cpu, cuda or cuda:N"
check "sysid bad device" 2 "$DSIM" sysid sysid-mass --device gpu
expect "sysid bad device" "dsim sysid: --device 'gpu'"
if "$DSIM" info | grep -q "^CUDA: *off"; then
  check "cuda not built" 2 "$DSIM" run walker --device cuda
  expect "cuda not built" "--device cuda: this dsim was built without CUDA (./configure --enable-cuda)"
  check "sysid cuda not built" 2 "$DSIM" sysid sysid-mass --device cuda:0
  expect "sysid cuda not built" "this dsim was built without CUDA"
elif "$DSIM" info | grep -q "^CUDA: *on, 0 visible"; then
  check "no cuda device" 2 "$DSIM" run walker --device cuda
  expect "no cuda device" "--device cuda:0: no CUDA device is visible"
else
  n=$("$DSIM" info | sed -n 's/^CUDA: *on, \([0-9]*\) visible.*/\1/p')
  check "cuda device past the last" 2 "$DSIM" run walker --device "cuda:$n"
  expect "cuda device past the last" "CUDA device"
  check "cuda for rigid bodies" 3 "$DSIM" run rigid-toss --device cuda:0 --iterations 1
  expect "cuda for rigid bodies" "rigid-toss: runs on the CPU engine only, not on cuda:0"
fi
gc="$DS_SRCDIR/scripts/gpu-check"
check "gpu-check parses" 0 sh -n "$gc"
check "gpu-check help" 0 sh "$gc" --help
expect "gpu-check help" "scripts/reproduce-results"
expect "gpu-check help" "usage: scripts/gpu-check"
check "gpu-check bad option" 2 sh "$gc" --bogus
expect "gpu-check bad option" "unknown option '--bogus'"
rr="$DS_SRCDIR/scripts/reproduce-results"
check "reproduce-results parses" 0 sh -n "$rr"
tmp=$(mktemp -d) || exit 1
check "reproduce-results unknown" 2 env DSIM="$DSIM" OUT="$tmp" sh "$rr" nosuch
expect "reproduce-results unknown" "unknown experiment 'nosuch'"
rm -rf "$tmp"
exit $fail

#!/bin/sh
# The dsim command line: version, help, info, and usage errors with their
# documented exit codes.
set -u
fail=0
. "$DS_SRCDIR/tests/clicheck.sh"
: "${DSIM:?DSIM must name the dsim binary}"

check "--version" 0 "$DSIM" --version;         expect "--version" "dsim "
check "--help" 0 "$DSIM" --help;               expect "--help" "usage: dsim"
expect "--help lists info" "info"
check "info" 0 "$DSIM" info;                   expect "info" "precision:"
expect "info OpenMP line" "OpenMP:"
expect "info CUDA line" "CUDA:"
expect "info cJSON line" "cJSON:      1."
expect "info libpng line" "libpng:     1."
check "info --help" 0 "$DSIM" info --help;     expect "info --help" "usage: dsim info"
check "no arguments" 2 "$DSIM";                expect "no arguments" "usage: dsim"
check "unknown command" 2 "$DSIM" frobnicate;  expect "unknown command" "unknown command 'frobnicate'"
check "unknown flag" 2 "$DSIM" --frob;         expect "unknown flag" "unknown option '--frob'"
check "info two args" 2 "$DSIM" info a.h5 b.h5; expect "info two args" "unexpected argument 'b.h5'"
check "info bad flag" 2 "$DSIM" info --frob;   expect "info bad flag" "unknown option '--frob'"
check "info missing run" 3 "$DSIM" info /nonexistent/run.h5
expect "info missing run" "/nonexistent/run.h5: cannot open: No such file or directory"
OMP_NUM_THREADS=2 check "info threads" 0 "$DSIM" info
if "$DSIM" info | grep -q "OpenMP:     on"; then expect "info threads" "2 threads"; fi
# dsim config: complete configs and the key list, from the same tables as the files
check "config --keys" 0 "$DSIM" config --keys control-fem; expect "config --keys" "env.gear.hub_radius"
expect "config --keys: controller" "controller.decay_factor"
expect "config --keys: run" "run.iterations"
check "config unknown env" 2 "$DSIM" config --keys frob; expect "config unknown env" "unknown environment 'frob'"
check "config bad option" 2 "$DSIM" config --frob; expect "config bad option" "unknown option '--frob'"
# every bundled config lists every key: `dsim config FILE` (the file with its
# missing keys filled in) gives the file back unchanged; the sysid configs
# (sections env, sysid, run: `dsim sysid`) give only what they change
# (a single-precision build prints its float values, such as dt = 1/1920,
# with their float digits: the files hold the double ones)
single=0
"$DSIM" info | grep -q "precision:  single" && single=1
[ $single = 1 ] && echo "single precision: canonical-config check skipped (the files hold double values)"
for c in "$DS_SRCDIR"/configs/*.json; do
  [ $single = 1 ] && break
  case ${c##*/} in sysid-*) continue ;; esac
  out=$("$DSIM" config "$c" 2>&1)
  if [ "$out" != "$(cat "$c")" ]; then
    echo "FAIL: $c is not complete and canonical (diff against dsim config):"
    printf '%s\n' "$out" | diff "$c" - | sed 's/^/  | /' | head -20
    fail=1
  fi
done
exit $fail

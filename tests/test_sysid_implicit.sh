#!/bin/sh
# The Table 3 sysid configs under the implicit integrator
# (configs/sysid-*-implicit.json: backward Euler at 10.7x the bundled step,
# the true video rendered with it): each runs 3 iterations of its optimiser
# from seed 100 and ends with a lower loss and a lower parameter error than
# it started with; scripts/reproduce-sysid's INTEGRATOR switch picks them
# and refuses a value it does not know.
set -u
: "${DSIM:?DSIM must name the dsim binary}" "${DS_BUILDDIR:?}" "${DS_SRCDIR:?}"
fail=0
. "$DS_SRCDIR/tests/clicheck.sh"
if "$DSIM" info | grep -q "HDF5:       off"; then echo "SKIP: built without HDF5"; exit 77; fi
dir=$(mktemp -d "$DS_BUILDDIR/tests/sysidimpl.XXXXXX")
trap 'rm -rf "$dir"' EXIT

for c in sysid-beam-mu sysid-beam-lambda sysid-mass sysid-cloth; do
  cfg="$DS_SRCDIR/configs/$c-implicit.json"
  check "$c-implicit: config" 0 "$DSIM" config "$cfg"
  expect "$c-implicit: integrator" '"integrator": "implicit"'
  check "$c-implicit" 0 "$DSIM" sysid "$cfg" --objects 1 --seed 100 --threads 1 --iterations 3 --out "$dir/$c.h5"
  echo "$LAST" | grep '^iteration'
  # first and last progress lines: loss and error
  first=$(echo "$LAST" | awk '/^iteration / { for (i = 1; i < NF; i++) { if ($i == "loss") l = $(i + 1); if ($i == "error") e = $(i + 1) }
                                               print l, e; exit }')
  last=$(echo "$LAST" | awk '/^iteration / { for (i = 1; i < NF; i++) { if ($i == "loss") l = $(i + 1); if ($i == "error") e = $(i + 1) } }
                              END { print l, e }')
  echo "$c-implicit: first (loss, error) $first, last $last"
  echo "$first $last" | awk '{ exit !(NF == 4 && $3 < $1 && $4 < $2) }' ||
    { echo "FAIL: $c-implicit: loss or error did not drop over 3 iterations ($first -> $last)"; fail=1; }
done

# the script's switch: a row without an implicit config says so, an unknown value is refused
out=$(cd "$DS_SRCDIR" && INTEGRATOR=implicit OBJECTS=1 DSIM="$DSIM" OUT="$dir/rs" sh scripts/reproduce-sysid rigid 2>&1)
case $out in *"no implicit config"*) ;; *) echo "FAIL: INTEGRATOR=implicit rigid: $out"; fail=1 ;; esac
out=$(cd "$DS_SRCDIR" && INTEGRATOR=explicit DSIM="$DSIM" OUT="$dir/rs" sh scripts/reproduce-sysid mu 2>&1)
st=$?
[ $st = 2 ] || { echo "FAIL: INTEGRATOR=explicit: exit $st, expected 2"; fail=1; }
case $out in *"INTEGRATOR: 'explicit' is not semi_implicit or implicit"*) ;; *) echo "FAIL: INTEGRATOR=explicit: $out"; fail=1 ;; esac
exit $fail

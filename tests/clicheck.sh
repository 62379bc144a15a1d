# Shell helpers for the CLI tests (sourced, not run): `check DESC STATUS CMD...`
# runs CMD, fails the test unless it exits with STATUS, and keeps its output in
# $LAST; `expect DESC TEXT` fails unless $LAST contains TEXT. Both set fail=1.
check() { # description, expected status, command...
  desc=$1; want=$2; shift 2
  out=$("$@" 2>&1); got=$?
  if [ "$got" != "$want" ]; then
    echo "FAIL: $desc: exit $got, expected $want"; echo "$out" | sed 's/^/  | /'; fail=1
  fi
  LAST=$out
}
expect() { # description, substring
  case $LAST in *"$2"*) ;; *) echo "FAIL: $1: output lacks '$2'"; echo "$LAST" | sed 's/^/  | /'; fail=1 ;; esac
}

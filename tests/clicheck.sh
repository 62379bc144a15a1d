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
# small_config KIND FILE [SEED]: a shortened scene for the CLI tests, written
# to FILE. KIND walker: 256 substeps, 24 x 24 frames, 3 iterations (seed SEED,
# default 0); control-fem: 128 substeps, 2 iterations.
small_config() {
  case $1 in
    walker) cat >"$2" <<JSON
{ "env": { "name": "walker",
    "physics": {"substeps": 256, "control_interval": 16, "render_interval": 64, "render_last": true},
    "render": {"width": 24, "height": 24, "supersample": 1, "sigma": 1e-4} },
  "controller": {"lr": 0.05, "phases": 4},
  "run": {"seed": ${3:-0}, "iterations": 3} }
JSON
      ;;
    control-fem) cat >"$2" <<'JSON'
{ "env": { "name": "control-fem",
    "physics": {"substeps": 128, "control_interval": 32, "render_interval": 64},
    "render": {"width": 24, "height": 24, "supersample": 1, "sigma": 1e-4} },
  "controller": {"lr": 0.05},
  "run": {"iterations": 2} }
JSON
      ;;
    *) echo "small_config: unknown kind $1" >&2; return 1 ;;
  esac
}

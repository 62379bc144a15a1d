#!/bin/sh
# Config strings round-trip: a string value holding quotes, backslashes,
# control characters (\n, \t, \x01) and non-ASCII UTF-8 (here run.out, a file
# name) comes out of `dsim config` as valid JSON that reads back equal, and a
# run's log keeps it in /config so that `dsim run` on that text repeats the run
# with the same value (docs/cli.md); sysid's per-object config in its log
# keeps frames_dir and camera holding the same characters. Needs python3 (its
# json module).
set -u
: "${DSIM:?DSIM must name the dsim binary}" "${DS_BUILDDIR:?}"
command -v python3 >/dev/null 2>&1 || { echo "SKIP: no python3"; exit 77; }
fail=0
. "$DS_SRCDIR/tests/clicheck.sh"
dir=$(mktemp -d "$DS_BUILDDIR/tests/cfgstr.XXXXXX")
trap 'rm -rf "$dir"' EXIT

# the value, and a short walker config that sets it (written by python's json)
cat >"$dir/value.py" <<'PY'
W = 'q"uo\\te\\\\d \n\t\x01 caf\u00e9 \u2713 \U0001f600 \x7f.h5'
PY
(cd "$dir" && python3 -c '
import json
from value import W
json.dump({"env": {"name": "walker",
                   "physics": {"substeps": 64, "control_interval": 16, "render_interval": 64, "render_last": True},
                   "render": {"width": 16, "height": 16, "supersample": 1, "sigma": 1e-4}},
           "controller": {"phases": 2},
           "run": {"iterations": 1, "seed": 2, "out": W}}, open("c.json", "w"), ensure_ascii=False)
') || { echo "FAIL: cannot write the config"; exit 1; }

# `dsim config` prints JSON that parses and holds the same string
check "dsim config" 0 "$DSIM" config "$dir/c.json"
printf '%s\n' "$LAST" >"$dir/resolved.json"
check "dsim config output parses and reads back equal" 0 sh -c "cd '$dir' && python3 -c '
import json, sys
from value import W
d = json.load(open(\"resolved.json\", encoding=\"utf-8\"))
v = d[\"run\"][\"out\"]
sys.exit(0 if v == W else \"read back %r, expected %r\" % (v, W))
'"
# and dsim reads it back: the resolved config resolves to itself
check "dsim config of its own output" 0 "$DSIM" config "$dir/resolved.json"
printf '%s\n' "$LAST" >"$dir/resolved2.json"
cmp -s "$dir/resolved.json" "$dir/resolved2.json" || { echo "FAIL: dsim config of its output differs"; fail=1; }

# the run log's /config repeats the run (`dsim run` on it), with the same run.out
RC="$DS_BUILDDIR/tests/runlog_config"
if "$DSIM" info | grep -q "HDF5:       off"; then
  echo "log part skipped (a build without HDF5)"
else
  check "run" 0 sh -c "cd '$dir' && '$DSIM' run c.json"
  expect "run" "1 iterations"
  (cd "$dir" && "$RC" "$(python3 -c 'from value import W; print(W, end="")')") >"$dir/logged.json" ||
    { echo "FAIL: no /config in the log named by run.out"; fail=1; }
  cmp -s "$dir/resolved.json" "$dir/logged.json" || { echo "FAIL: the log's /config differs from dsim config's"; fail=1; }
  check "rerun from the log's config" 0 sh -c "cd '$dir' && '$DSIM' run logged.json --force"
  expect "rerun from the log's config" "1 iterations"
  (cd "$dir" && "$RC" "$(python3 -c 'from value import W; print(W, end="")')") >"$dir/logged2.json" ||
    { echo "FAIL: the rerun left no log at run.out"; fail=1; }
  cmp -s "$dir/logged.json" "$dir/logged2.json" || { echo "FAIL: the rerun's /config differs"; fail=1; }

  # sysid's per-object config (its log's /config): frames_dir and camera with the same characters
  cat >"$dir/t.json" <<'JSON'
{ "env": { "name": "beam", "beam": {"cells": [3, 1, 1]},
    "physics": {"substeps": 128, "render_interval": 64, "control_interval": 64},
    "render": {"width": 16, "height": 16, "supersample": 1, "sigma": 1e-3} },
  "sysid": { "param1": {"name": "tet.k_mu", "lower": 10, "upper": 100000, "init": [1000], "true": [1000]},
    "iterations": 1 },
  "run": {"seed": 4, "threads": 1} }
JSON
  check "sysid: truth video" 0 "$DSIM" sysid "$dir/t.json" --out "$dir/t.h5" --quiet
  (cd "$dir" && python3 -c '
import json, os, shutil, subprocess, sys
from value import W
subprocess.check_call([os.environ["DSIM"], "export", "t.h5", "--episode", "first", "--frames", W + "frames",
                       "--camera", W + "camera.json"], stdout=subprocess.DEVNULL)
d = json.load(open("t.json"))
d["sysid"].update({"video": "frames", "frames_dir": W + "frames", "camera": W + "camera.json"})
json.dump(d, open("f.json", "w"), ensure_ascii=False)
') || { echo "FAIL: sysid footage set-up"; fail=1; }
  check "sysid from frames" 0 sh -c "cd '$dir' && '$DSIM' sysid f.json --out s.h5 --quiet"
  "$RC" "$dir/s.h5" >"$dir/slog.json" || { echo "FAIL: no /config in the sysid log"; fail=1; }
  check "sysid: logged config parses with the same strings" 0 sh -c "cd '$dir' && python3 -c '
import json, sys
from value import W
s = json.load(open(\"slog.json\", encoding=\"utf-8\"))[\"sysid\"]
sys.exit(0 if (s[\"frames_dir\"], s[\"camera\"]) == (W + \"frames\", W + \"camera.json\") else repr(s))
'"
fi
exit $fail

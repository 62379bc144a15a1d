#!/bin/sh
# `dsim report`'s page in a real browser (issue 37): headless Chromium loads
# a report of a tiny run and a tiny sysid log; any console message fails the
# test (the page logs nothing unless a script fails or one of its pictures
# does not decode: its own check says which), and the screenshot must exist
# and not be blank. Skipped (77) without chromium or chromium-browser on
# PATH. DS_REPORT_SCREENSHOT=FILE keeps the screenshot (docs/images/report.png
# was made so).
set -u
: "${DSIM:?DSIM must name the dsim binary}" "${DS_BUILDDIR:?}"
fail=0
if "$DSIM" info | grep -q "HDF5:       off"; then echo "SKIP: built without HDF5"; exit 77; fi
browser=$(command -v chromium || command -v chromium-browser || true)
[ -n "$browser" ] || { echo "SKIP: no chromium or chromium-browser on PATH"; exit 77; }
command -v python3 >/dev/null 2>&1 || { echo "SKIP: the screenshot check needs python3"; exit 77; }
dir=$(mktemp -d "$DS_BUILDDIR/tests/reportb.XXXXXX")
trap 'rm -rf "$dir"' EXIT

cat >"$dir/w.json" <<'JSON'
{ "env": { "name": "walker",
    "physics": {"substeps": 256, "control_interval": 16, "render_interval": 32, "render_last": true},
    "render": {"width": 48, "height": 48, "supersample": 1, "sigma": 1e-4} },
  "controller": {"lr": 0.05, "phases": 4},
  "run": {"seed": 0, "iterations": 4} }
JSON
cat >"$dir/m.json" <<'JSON'
{ "env": { "name": "beam", "beam": {"cells": [3, 1, 1]},
    "physics": {"substeps": 256, "render_interval": 64, "control_interval": 64},
    "render": {"width": 24, "height": 24, "supersample": 1, "sigma": 1e-3} },
  "sysid": {
    "param1": {"name": "tet.k_mu", "lower": 10, "upper": 100000, "init": [800], "true": [1000]},
    "optimizer": "lbfgs", "lr": 0.5, "iterations": 4 },
  "run": {"seed": 4, "threads": 1} }
JSON
for s in 0 1; do
  "$DSIM" run "$dir/w.json" --set run.seed=$s --out "$dir/r$s.h5" >/dev/null || { echo "FAIL: run seed $s"; exit 1; }
done
"$DSIM" sysid "$dir/m.json" --out "$dir/s.h5" --quiet >/dev/null || { echo "FAIL: sysid"; exit 1; }
"$DSIM" report "$dir/r0.h5" "$dir/r1.h5" "$dir/s.h5" -o "$dir/report.html" || { echo "FAIL: report"; exit 1; }

# a profile of its own (nothing read from or left in $HOME); the time
# budget lets the load event and the pictures' check run
shot="$dir/shot.png"
timeout 120 "$browser" --headless --disable-gpu --no-sandbox --user-data-dir="$dir/profile" \
  --virtual-time-budget=3000 --window-size=1100,2400 --screenshot="$shot" --enable-logging=stderr --v=0 \
  "file://$dir/report.html" >"$dir/browser.log" 2>&1
st=$?
[ "$st" = 0 ] || { echo "FAIL: $browser exited $st"; tail -20 "$dir/browser.log"; fail=1; }
if grep -E "CONSOLE|Uncaught" "$dir/browser.log"; then
  echo "FAIL: the page wrote to the console (above)"; fail=1
fi
# not blank: the decoded rows of a blank page hold one or two byte values,
# a page with plots and frames hundreds
python3 - "$shot" <<'PY' || fail=1
import struct, sys, zlib
try:
    data = open(sys.argv[1], "rb").read()
except OSError as e:
    print("FAIL: no screenshot:", e); sys.exit(1)
if not data.startswith(b"\x89PNG\r\n\x1a\n"): print("FAIL: the screenshot is not a PNG"); sys.exit(1)
pos, idat, size = 8, b"", None
while pos < len(data):
    n, kind = struct.unpack(">I4s", data[pos:pos + 8])
    if kind == b"IHDR": size = struct.unpack(">II", data[pos + 8:pos + 16])
    if kind == b"IDAT": idat += data[pos + 8:pos + 8 + n]
    pos += 12 + n
values = len(set(zlib.decompress(idat)))
print("screenshot: %d x %d, %d distinct byte values" % (size[0], size[1], values))
if values < 32: print("FAIL: the screenshot is blank"); sys.exit(1)
PY
if [ -n "${DS_REPORT_SCREENSHOT:-}" ] && [ -f "$shot" ]; then cp "$shot" "$DS_REPORT_SCREENSHOT"; fi
exit $fail

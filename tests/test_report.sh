#!/bin/sh
# `dsim report` (issue 37): a seed sweep of a tiny walker (seeds 0, 1, 2)
# and a tiny sysid log on one page, well formed (every tag closed in order),
# with its sections, the sweep's median and band, every picture an embedded
# PNG or GIF that decodes, and no http(s) reference; --png writes the same
# plots as PNG files; and the bad inputs: an existing page or PNG kept
# without --force, an unwritable output, a log of a killed run (banner),
# logs of different envs (labelled), a corrupt log and a crash inside
# libhdf5 (exit 3, as `dsim info`), a file that is not a log.
set -u
: "${DSIM:?DSIM must name the dsim binary}" "${DS_BUILDDIR:?}" "${DS_SRCDIR:?}"
fail=0
. "$DS_SRCDIR/tests/clicheck.sh"
if "$DSIM" info | grep -q "HDF5:       off"; then echo "SKIP: built without HDF5"; exit 77; fi
command -v python3 >/dev/null 2>&1 || { echo "SKIP: the page checks need python3"; exit 77; }
dir=$(mktemp -d "$DS_BUILDDIR/tests/report.XXXXXX")
trap 'rm -rf "$dir"' EXIT

small_config walker "$dir/w.json" 0
small_config control-fem "$dir/c.json"
cat >"$dir/m.json" <<'JSON'
{ "env": { "name": "beam", "beam": {"cells": [3, 1, 1]},
    "physics": {"substeps": 256, "render_interval": 64, "control_interval": 64},
    "render": {"width": 24, "height": 24, "supersample": 1, "sigma": 1e-3} },
  "sysid": {
    "param1": {"name": "tet.k_mu", "lower": 10, "upper": 100000, "init": [800], "true": [1000]},
    "optimizer": "lbfgs", "lr": 0.5, "iterations": 4 },
  "run": {"seed": 4, "threads": 1} }
JSON
for s in 0 1 2; do
  check "run seed $s" 0 "$DSIM" run "$dir/w.json" --set run.seed=$s --out "$dir/r$s.h5"
done
check "sysid" 0 "$DSIM" sysid "$dir/m.json" --out "$dir/s.h5" --quiet
check "help" 0 "$DSIM" report --help
expect "help" "usage: dsim report LOG.h5... -o REPORT.html"
check "listed" 0 "$DSIM" --help
expect "listed" "report "

# The page's checks: tags balanced, ids present, pictures decode, nothing
# fetched. argv: page, then the ids (#id) and texts it must have; @png: at
# least one embedded PNG.
cat >"$dir/check.py" <<'PY'
import base64, re, sys
from html.parser import HTMLParser
VOID = {"meta", "img", "br", "hr", "input", "link", "rect", "line", "circle", "path"}
class Page(HTMLParser):
    def __init__(self):
        super().__init__(); self.stack = []; self.errors = []; self.ids = set(); self.srcs = []
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a: self.ids.add(a["id"])
        if tag == "img": self.srcs.append(a.get("src", ""))
        if tag not in VOID: self.stack.append((tag, self.getpos()))
    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag not in VOID: self.stack.pop()
    def handle_endtag(self, tag):
        if tag in VOID: return
        if not self.stack or self.stack[-1][0] != tag:
            self.errors.append("</%s> at line %d closes %s" % (tag, self.getpos()[0], self.stack[-1] if self.stack else "nothing"))
        else: self.stack.pop()
text = open(sys.argv[1], encoding="utf-8").read()
p = Page(); p.feed(text); p.close()
bad = p.errors[:3] + ["unclosed <%s> from line %d" % (t, l[0]) for t, l in p.stack[:3]]
if not text.startswith("<!DOCTYPE html>"): bad.append("no doctype")
if re.search(r"https?://", text): bad.append("a http(s):// reference: " + re.search(r".{30}https?://.{30}", text).group(0))
for want in sys.argv[2:]:
    if want == "@png": continue
    if want.startswith("#"):
        if want[1:] not in p.ids: bad.append("no element with id " + want[1:])
    elif want not in text: bad.append("lacks the text: " + want)
kinds = {"png": 0, "gif": 0}
for s in p.srcs:
    m = re.match(r"data:image/(png|gif);base64,([A-Za-z0-9+/=]+)$", s)
    if not m: bad.append("an image not embedded: " + s[:60]); continue
    data = base64.b64decode(m.group(2))
    if not data.startswith(b"\x89PNG\r\n\x1a\n" if m.group(1) == "png" else b"GIF89a"): bad.append("a %s that is not one" % m.group(1))
    kinds[m.group(1)] += 1
if "@png" in sys.argv and not kinds["png"]: bad.append("no embedded PNG")
for b in bad: print("  page:", b)
print("page: %d PNG, %d GIF pictures" % (kinds["png"], kinds["gif"]))
sys.exit(1 if bad else 0)
PY
page_ok() { # description, page, wants...
  d=$1; shift
  python3 "$dir/check.py" "$@" >"$dir/check.txt" 2>&1 || { echo "FAIL: $d:"; cat "$dir/check.txt"; fail=1; }
}

# the sweep and the sysid log on one page, the plots also as PNG files
check "report" 0 "$DSIM" report "$dir/r0.h5" "$dir/r1.h5" "$dir/r2.h5" "$dir/s.h5" -o "$dir/rep.html" --png "$dir/png"
expect "report" "wrote $dir/rep.html (4 logs"
page_ok "sweep + sysid" "$dir/rep.html" @png "#logs" "#runs" "#sysid" "#plot-loss" "#plot-metric" "#plot-wall_time" \
  "#plot-sysid_loss" "#plot-sysid_tet_k_mu" "A seed sweep: 3 runs" "median over seeds" "min-max over seeds" \
  "r1.h5 seed 1" "goal" "best episode (iteration" "The resolved config" "true value (seed 4)" "abs. rel. error" \
  "different kinds" "build</th>" "wall time</th>"
if "$DSIM" info | grep -q "giflib:     on"; then
  grep -q "data:image/gif;base64," "$dir/rep.html" || { echo "FAIL: no animated GIF in a build with giflib"; fail=1; }
fi
for p in loss metric wall_time sysid_loss sysid_tet_k_mu; do
  [ -s "$dir/png/$p.png" ] || { echo "FAIL: --png: $p.png missing"; ls "$dir/png"; fail=1; }
done

# nothing replaced without --force: the page, the PNG files
cp "$dir/rep.html" "$dir/keep.html"
check "page exists" 2 "$DSIM" report "$dir/r0.h5" -o "$dir/rep.html"
expect "page exists" "rep.html exists: give --force to replace it"
cmp -s "$dir/rep.html" "$dir/keep.html" || { echo "FAIL: the page was replaced without --force"; fail=1; }
check "pngs exist" 2 "$DSIM" report "$dir/r0.h5" -o "$dir/other.html" --png "$dir/png"
expect "pngs exist" "loss.png exists: give --force to replace it"
[ ! -e "$dir/other.html" ] || { echo "FAIL: a page written although its PNG files were refused"; fail=1; }
check "force" 0 "$DSIM" report "$dir/r0.h5" -o "$dir/rep.html" --png "$dir/png" --force
page_ok "one log" "$dir/rep.html" @png "#runs" "r0.h5 seed 0"
if grep -q "A seed sweep" "$dir/rep.html"; then echo "FAIL: one log called a sweep"; fail=1; fi
check "the log itself" 2 "$DSIM" report "$dir/r0.h5" "$dir/r1.h5" -o "$dir/r1.h5" --force
expect "the log itself" "r1.h5 is the input: refusing to replace it"

# unwritable outputs
check "missing directory" 1 "$DSIM" report "$dir/r0.h5" -o "$dir/none/rep.html"
expect "missing directory" "cannot write: directory $dir/none does not exist"
check "a directory" 2 "$DSIM" report "$dir/r0.h5" -o "$dir/png"
expect "a directory" "is a directory; give a file name"
check "under a file" 1 "$DSIM" report "$dir/r0.h5" -o "$dir/w.json/rep.html"
expect "under a file" "is not a directory"
check "png under a file" 1 "$DSIM" report "$dir/r0.h5" -o "$dir/p.html" --png "$dir/w.json/png"
expect "png under a file" "--png $dir/w.json/png: cannot create the directory"
check "usage: no output" 2 "$DSIM" report "$dir/r0.h5"
expect "usage: no output" "give the page to write: -o REPORT.html"
check "usage: no log" 2 "$DSIM" report -o "$dir/x.html"
check "usage: unknown option" 2 "$DSIM" report "$dir/r0.h5" -o "$dir/x.html" --frob
expect "usage: unknown option" "unknown option '--frob'"

# not a sweep: another learning rate
check "other lr" 0 "$DSIM" run "$dir/w.json" --set run.seed=1 --set controller.lr=0.1 --out "$dir/lr.h5"
check "not a sweep" 0 "$DSIM" report "$dir/r0.h5" "$dir/lr.h5" -o "$dir/lr.html"
if grep -q "A seed sweep" "$dir/lr.html"; then echo "FAIL: runs of two learning rates called a seed sweep"; fail=1; fi

# landscapes: the loss along a 1-D grid, a heat map of a 2-D one with the truth marked
check "landscape 1-D" 0 "$DSIM" landscape "$dir/m.json" --range1 500:2000:4 --geometric --out "$dir/l1" --no-plot
sed 's/"optimizer"/"param2": {"name": "tet.k_lambda", "lower": 10, "upper": 100000, "init": [800], "true": [1000]},\n    "optimizer"/' \
  "$dir/m.json" >"$dir/m2.json"
check "landscape 2-D" 0 "$DSIM" landscape "$dir/m2.json" --range1 500:2000:3 --range2 500:2000:3 --out "$dir/l2" --no-plot
check "report landscapes" 0 "$DSIM" report "$dir/l1.h5" "$dir/l2.h5" -o "$dir/land.html" --png "$dir/lpng"
page_ok "landscapes" "$dir/land.html" "#landscape" "#plot-landscape0" "#plot-landscape1" "tet.k_mu (log scale)" \
  "tet.k_lambda" "&#9733;" "9 grid points"
[ -s "$dir/lpng/landscape1.png" ] || { echo "FAIL: --png: landscape1.png missing"; fail=1; }

# different envs overlaid, each labelled with its env
check "control-fem" 0 "$DSIM" run "$dir/c.json" --out "$dir/c.h5"
check "two envs" 0 "$DSIM" report "$dir/r0.h5" "$dir/c.h5" -o "$dir/envs.html"
page_ok "two envs" "$dir/envs.html" "r0.h5 seed 0 [walker]" "c.h5 seed 0 [control-fem]" "different envs"

# a killed run (status "running"): reported, with a banner; the dsim run is
# stopped once its log holds two iterations (each is flushed before printed)
"$DSIM" run "$dir/w.json" --iterations 1000000 --out "$dir/k.h5" >"$dir/k.txt" 2>&1 &
pid=$!
n=0; tries=0
while [ "$n" -lt 2 ] && [ "$tries" -lt 2400 ]; do
  n=$(grep -c '^iteration' "$dir/k.txt" 2>/dev/null || true); n=${n:-0}
  tries=$((tries + 1)); sleep 0.05
done
kill -KILL "$pid"; wait "$pid" 2>/dev/null
check "killed run" 0 "$DSIM" report "$dir/k.h5" -o "$dir/k.html"
expect "killed run note" "status \"running\": the run did not end cleanly"
page_ok "killed run" "$dir/k.html" "class='banner bad'" "its writer never closed it (the run was killed or crashed)"

# logs with little in them (tests/runlog_writer: config "{}", no goal, no
# frame times; one with no iteration at all)
"$DS_BUILDDIR/tests/runlog_writer" "$dir/z0.h5" 0 0 >/dev/null && "$DS_BUILDDIR/tests/runlog_writer" "$dir/z3.h5" 3 0 >/dev/null ||
  { echo "FAIL: runlog_writer"; fail=1; }
check "sparse logs" 0 "$DSIM" report "$dir/z0.h5" "$dir/z3.h5" -o "$dir/z.html" --png "$dir/zpng"
page_ok "sparse logs" "$dir/z.html" @png "This log has no episodes." "last episode (iteration 2): final frame"

# corrupt logs: refused with the file named, exit 3
head -c 3000 "$dir/r0.h5" >"$dir/trunc.h5"
check "truncated" 3 "$DSIM" report "$dir/r0.h5" "$dir/trunc.h5" -o "$dir/t.html"
expect "truncated" "trunc.h5"
[ ! -e "$dir/t.html" ] || { echo "FAIL: a page written from a corrupt log"; fail=1; }
check "libhdf5 crash" 3 env DSIM_TEST_PROBE_SIGNAL=11 "$DSIM" report "$dir/r0.h5" -o "$dir/t.html"
expect "libhdf5 crash" "the HDF5 library failed on this file"
check "not a log" 3 "$DSIM" report "$dir/w.json" -o "$dir/t.html"
expect "not a log" "w.json: not an HDF5 file"
check "missing log" 3 "$DSIM" report "$dir/none.h5" -o "$dir/t.html"
expect "missing log" "none.h5: cannot open"
exit $fail

#!/bin/sh
# bench/newton-compare is not run by make check (it needs a private Python
# environment with newton): its --help works without one, its Python half
# parses, and its dsim half (bench/side_by_side_dsim --traj with an
# "integrator implicit" scene line) runs a clamped stiff tet: the free vertex
# sags by some 3e-5 m in three steps of 1/60 s, where the semi-implicit step
# (the same scene without that line) throws it 20 m.
set -u
: "${DS_SRCDIR:?}" "${DS_BUILDDIR:?}"
out=$("$DS_SRCDIR/bench/newton-compare" --help) || { echo "FAIL: bench/newton-compare --help exited $?"; exit 1; }
case $out in *--install*--quick*) ;; *) echo "FAIL: bench/newton-compare --help: $out"; exit 1 ;; esac
if command -v python3 >/dev/null 2>&1; then
  python3 -c 'import ast, sys; ast.parse(open(sys.argv[1]).read())' "$DS_SRCDIR/bench/newton_compare.py" ||
    { echo "FAIL: bench/newton_compare.py does not parse"; exit 1; }
fi
prog="$DS_BUILDDIR/bench/side_by_side_dsim"
[ -x "$prog" ] || { echo "FAIL: $prog not built"; exit 1; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
scene() { # $1: the integrator line (or nothing)
  cat <<EOS
dt 0.016666666666666666
substeps 3
gravity 0 0 -9.81
tet_material 1e7 1e7 0
tri_material 0 0 0
bend_material 0 0
particles 4
0 0 1 0 0 1 0 0 0 0
0.1 0 1 0.1 0 1 0 0 0 0
0 0.1 1 0 0.1 1 0 0 0 0
0 0 1.1 0 0 1.1 0 0 0 1
tets 1
0 1 2 3
tris 0
bends 0
$1
EOS
}
scene "integrator implicit 1e-10 50" >"$tmp/ok.scene"
"$prog" --traj "$tmp/ok.scene" 1 1 "$tmp/ok.traj" >"$tmp/ok.out" || { echo "FAIL: side_by_side_dsim --traj"; exit 1; }
grep -q '^forward [0-9.]*$' "$tmp/ok.out" || { echo "FAIL: no forward time: $(cat "$tmp/ok.out")"; exit 1; }
size=$(wc -c <"$tmp/ok.traj")
[ "$size" -eq $((4 * 4 * 3 * 8)) ] || { echo "FAIL: trajectory of $size bytes, expected 384 (4 frames x 4 particles x 3 doubles)"; exit 1; }
# the free vertex's z in the last frame (the 48th double) against its start
z=$(od -A n -t f8 -v "$tmp/ok.traj" | tr -s ' ' '\n' | sed '/^$/d' | sed -n 48p)
awk -v z="$z" 'BEGIN { d = 1.1 - z; exit !(d > 1e-8 && d < 1e-4) }' ||
  { echo "FAIL: the free vertex's sag after 3 implicit steps is $(awk -v z="$z" 'BEGIN { print 1.1 - z }') m, expected (0, 1e-4)"; exit 1; }
scene "integrator explicit 1e-10 50" >"$tmp/bad.scene"
if "$prog" --traj "$tmp/bad.scene" 1 1 - 2>"$tmp/bad.err"; then echo "FAIL: a bad integrator line was accepted"; exit 1; fi
grep -q 'integrator implicit' "$tmp/bad.err" || { echo "FAIL: bad integrator line: $(cat "$tmp/bad.err")"; exit 1; }
echo "ok: newton-compare --help, its Python parses, side_by_side_dsim --traj (implicit) sags by $(awk -v z="$z" 'BEGIN { print 1.1 - z }') m"

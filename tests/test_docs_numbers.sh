#!/bin/sh
# docs/scenes.md's beam camera and light are the code's defaults: the numbers
# of the beam section's "Camera:" item against `dsim config beam` (issue 32:
# the page said elevation 0 and a light along +y after both had changed).
set -u
: "${DSIM:?}" "${DS_SRCDIR:?}"
fail=0
doc="$DS_SRCDIR/docs/scenes.md"
# the beam section's camera item (it may wrap over lines)
item=$(awk '/^## beam/ { b = 1 } /^## / && !/^## beam/ { b = 0 }
            b && /^- Camera:/ { c = 1 } b && c { printf "%s ", $0 } b && c && /^- / && !/^- Camera:/ { exit }' "$doc")
[ -n "$item" ] || { echo "FAIL: no '- Camera:' item in the beam section of docs/scenes.md"; exit 1; }
num() { printf '%s\n' "$item" | sed -n "s/.*$1 \\([-0-9.]*\\).*/\\1/p"; }
cfg=$("$DSIM" config beam) || { echo "FAIL: dsim config beam"; exit 1; }
key() { # the value of "$2" inside the "$1" object of the config
  printf '%s\n' "$cfg" | awk -v sec="\"$1\"" -v k="\"$2\"" '$1 == sec":" { s = 1 } s && $1 == k":" { v = $0; sub(/^[^:]*: */, "", v); sub(/,$/, "", v); print v; exit }'
}
for pair in "distance:camera:distance" "elevation:camera:elevation" "azimuth:camera:azimuth"; do
  word=${pair%%:*}; rest=${pair#*:}; sec=${rest%%:*}; k=${rest#*:}
  d=$(num "$word"); c=$(key "$sec" "$k")
  awk -v a="$d" -v b="$c" 'BEGIN { exit !(a != "" && a + 0 == b + 0) }' ||
    { echo "FAIL: docs/scenes.md beam $word '$d', dsim config beam $sec.$k '$c'"; fail=1; }
done
dl=$(printf '%s\n' "$item" | sed -n 's/.*light_dir`[^[]*\(\[[^]]*\]\).*/\1/p')
cl=$(key render light_dir)
[ -n "$dl" ] && [ "$dl" = "$cl" ] || { echo "FAIL: docs/scenes.md beam light_dir '$dl', dsim config beam '$cl'"; fail=1; }
w=$(key render width); h=$(key render height)
case $item in *"image $w × $h"*) ;; *) echo "FAIL: docs/scenes.md beam image size, dsim config beam $w x $h"; fail=1 ;; esac
exit $fail

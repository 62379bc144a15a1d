#!/bin/sh
# The bundled env classes are written as a plugin would be: every file under
# envs/ that defines a dsEnvClass includes only public headers (dsim/*.h) and
# the C library, and every class object is listed once in envs/classes.h
# (the list the registry is made from). A helper shared by classes (envs/X.h
# with its envs/X.c, e.g. the fluid envs' smoke_common) is allowed when it
# too includes only public headers: the classes still use nothing a plugin
# could not (it could carry a copy). Prints every violation.
set -u
top=${DS_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$top" || exit 99
fail=0 n=0
for f in envs/*.c; do
  classes=$(sed -n 's/^const dsEnvClass \([A-Za-z0-9_]*\) = {.*/\1/p' "$f")
  [ -n "$classes" ] || continue
  for inc in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f"); do
    case $inc in
      dsim/*) ;;
      envs/*.h)
        if [ -f "$inc" ] && [ -f "${inc%.h}.c" ] &&
           ! sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$inc" "${inc%.h}.c" |
             grep -v -e '^dsim/' -e "^$inc\$" >/dev/null; then
          :
        else
          echo "$f: includes \"$inc\"; a class uses the public headers only (dsim/env.h), or a shared envs/ helper that does"
          fail=1
        fi ;;
      *) echo "$f: includes \"$inc\"; a class uses the public headers only (dsim/env.h)"; fail=1 ;;
    esac
  done
  for cls in $classes; do # a file may define several (envs/pendulum.c)
    n=$((n + 1))
    if [ "$(grep -c "X($cls)" envs/classes.h)" != 1 ]; then
      echo "$f: $cls is not listed once in envs/classes.h"
      fail=1
    fi
  done
done
if [ "$n" -lt 1 ]; then
  echo "test_env_classes: no class found under $top/envs: wrong directory?"
  exit 99
fi
[ "$fail" -eq 0 ] && echo "test_env_classes: $n classes, public headers only, each listed once"
exit "$fail"

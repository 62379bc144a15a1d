#!/bin/sh
# docs/config.md is the output of `dsim config --reference` (the key tables as
# Markdown); this test regenerates it and fails with a diff, and the command
# that brings it up to date, when a key, default, range or description has
# changed without the page. It also checks that every relative link in
# README.md, CHANGELOG.md, python/README.md and docs/*.md names a file or
# folder that exists, and that README.md stays within 300 lines.
set -u
: "${DSIM:?DSIM must name the dsim binary}"
: "${DS_SRCDIR:?DS_SRCDIR must name the source tree}"
fail=0
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dsim-ref.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT

# A single-precision build prints its float defaults (dt = 1/1920 and the
# like) with float digits, and the page holds the double ones.
if "$DSIM" info | grep -q "precision:  single"; then
  echo "single precision: config reference comparison skipped (the page holds double defaults)"
  skip_ref=1
else
  skip_ref=0
fi

if [ $skip_ref = 0 ]; then
  if ! "$DSIM" config --reference >"$tmp/config.md" 2>"$tmp/err"; then
    echo "FAIL: dsim config --reference exited with an error:"; cat "$tmp/err"; fail=1
  elif ! diff -u "$DS_SRCDIR/docs/config.md" "$tmp/config.md" >"$tmp/diff"; then
    echo "FAIL: docs/config.md is out of date with the key tables (- the page, + the tables):"
    cat "$tmp/diff"
    echo "Bring it up to date (and commit it) with:"
    echo "  $DSIM config --reference > $DS_SRCDIR/docs/config.md"
    fail=1
  fi
  # a usage error rather than a silent choice
  if "$DSIM" config --reference walker >/dev/null 2>&1; then
    echo "FAIL: dsim config --reference walker: accepted an argument it ignores"; fail=1
  fi
fi

# The environments table of README.md lists exactly the registered classes
# (the class list in envs/classes.h is the one source; this catches a class
# added without its docs entry, or a row left for a class removed).
"$DSIM" config --help 2>&1 | sed -n 's/.*Environments: //p' | tr -d '.' | tr ',' '\n' | sed 's/^ *//' | grep . | sort >"$tmp/classes"
sed -n '/^## Environments/,/^## /p' "$DS_SRCDIR/README.md" | sed -n 's/^| `\([a-z0-9-]*\)` |.*/\1/p' | sort >"$tmp/readme_envs"
if [ ! -s "$tmp/classes" ]; then
  echo "FAIL: dsim config --help lists no environments"; fail=1
elif ! diff -u "$tmp/classes" "$tmp/readme_envs" >"$tmp/envdiff"; then
  echo "FAIL: README.md's environments table and the registered classes differ (- registry, + README):"
  cat "$tmp/envdiff"; fail=1
fi

# Relative links: [text](target) where target is neither a URL nor a bare
# #anchor; the #anchor part of target is dropped and the rest must exist
# beside the page that links it.
for page in README.md CHANGELOG.md python/README.md $(cd "$DS_SRCDIR" && ls docs/*.md); do
  [ -f "$DS_SRCDIR/$page" ] || { echo "FAIL: $page is missing"; fail=1; continue; }
  dir=$(dirname "$DS_SRCDIR/$page")
  grep -o '\]([^)]*)' "$DS_SRCDIR/$page" | sed 's/^](//; s/)$//; s/#.*//; s/ .*//' | while read -r target; do
    case $target in
      ''|http://*|https://*|mailto:*) continue ;;
    esac
    if [ ! -e "$dir/$target" ]; then
      echo "FAIL: $page: link to '$target': no such file"
      echo x >>"$tmp/badlinks"
    fi
  done
done
[ -f "$tmp/badlinks" ] && fail=1

# The README stays a page (what dsim is, how to start, a tour, results,
# links); the subjects live in docs/.
n=$(wc -l <"$DS_SRCDIR/README.md")
if [ "$n" -gt 300 ]; then
  echo "FAIL: README.md has $n lines (at most 300: move the detail into a page under docs/)"; fail=1
fi

[ $fail = 0 ] && echo "config reference current, links resolve"
exit $fail

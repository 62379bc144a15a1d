#!/bin/sh
# No function in cli/, controllers/ or envs/ is longer than 120 lines (from
# the line that opens its body to the line that closes it): the areas above
# the engine stay cut into named steps. A function is a definition that
# starts in column 0 and whose body's braces close in column 0 (the style
# every file here follows). Prints each offender with its length.
top=${DS_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$top" || exit 99
LIMIT=120
out=$(awk -v limit=$LIMIT '
  FNR == 1 { inbody = 0; cand = 0 }
  # a definition starts in column 0 (its signature may go on over several lines)
  !inbody && /^[A-Za-z_]/ && !/;[[:space:]]*$/ && !/^(typedef|struct|enum|union)[[:space:]]/ && !/=/ { cand = 1; name = $0 }
  !inbody && cand && /\)[[:space:]]*\{[[:space:]]*$/ { inbody = 1; cand = 0; start = FNR; next }
  !inbody && /;[[:space:]]*$/ { cand = 0 }
  inbody && /^\}/ {
    n = FNR - start + 1
    if (n > limit) { sub(/\(.*/, "", name); printf "%s:%d: %s: %d lines (limit %d)\n", FILENAME, start, name, n, limit }
    if (n > longest) { longest = n; lname = FILENAME ":" start }
    inbody = 0
  }
  END { printf "longest: %d lines at %s\n", longest, lname > "/dev/stderr" }
' cli/*.c controllers/*.c envs/*.c)
if [ -n "$out" ]; then
  echo "$out"
  echo "test_function_length: functions over $LIMIT lines (split them into named steps)"
  exit 1
fi
echo "test_function_length: every function in cli/, controllers/, envs/ is at most $LIMIT lines"

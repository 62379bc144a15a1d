#!/bin/sh
# A killed `dsim run` keeps a best episode at most RUN_BEST_LAG (5) logged
# iterations stale (dsim/run.h), and `dsim info` and `dsim export --episode
# best` agree on it: 20 runs, each killed with SIGKILL after a random number
# of progress lines (1 to 30). After each kill:
#   - info's best ("lowest ... at iteration B") is the lowest loss of the CSV
#     (the first of equal ones), counted from 0 like the CSV;
#   - the kept best episode E (info's "best episode: iteration E" line, or B
#     when there is none) has a loss no higher than every iteration but the
#     last 5 the log holds: loss[E] <= min(loss[0 .. N-6]);
#   - export --episode best exports it (never a half-written episode: one is
#     linked as best only once complete) and names the same iteration E when
#     it differs from B.
# The check holds for every kill point, so the random delay makes no
# timing assumption.
set -u
: "${DSIM:?}" "${DS_BUILDDIR:?}"
"$DSIM" info | grep -q "HDF5:       off" && { echo "SKIP: built --without-hdf5"; exit 77; }
LAG=5
dir=$(mktemp -d "$DS_BUILDDIR/tests/killbest.XXXXXX")
trap 'rm -rf "$dir"' EXIT
# small and fast: a few substeps, tiny frames, a rising best (Adam on the walker)
cat >"$dir/fast.json" <<'JSON'
{ "env": { "name": "walker",
    "physics": {"substeps": 32, "control_interval": 8, "render_interval": 8, "render_last": true},
    "render": {"width": 16, "height": 16, "supersample": 1, "sigma": 1e-4} },
  "controller": {"lr": 0.2},
  "run": {"iterations": 1000000, "threads": 1} }
JSON
fail=0
seed=${KILL_SEED:-$$}
round=0
stale_rounds=0
while [ $round -lt 20 ]; do
  round=$((round + 1))
  log="$dir/r$round.h5"; out="$dir/r$round.txt"
  want=$(awk -v s="$seed" -v r="$round" 'BEGIN { srand(s * 31 + r); print 1 + int(rand() * 30) }')
  "$DSIM" run "$dir/fast.json" --out "$log" >"$out" 2>&1 &
  pid=$!
  k=0; tries=0
  while [ "$k" -lt "$want" ] && [ "$tries" -lt 1000 ] && kill -0 "$pid" 2>/dev/null; do
    k=$(grep -c '^iteration' "$out" 2>/dev/null || true); k=${k:-0}
    tries=$((tries + 1)); sleep 0.01
  done
  kill -KILL "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
  info=$("$DSIM" info "$log" 2>&1) || { echo "FAIL: round $round: dsim info failed:"; echo "$info"; fail=1; continue; }
  n=$(echo "$info" | sed -n 's/^iterations: *\([0-9]*\).*/\1/p')
  [ "${n:-0}" -ge 1 ] || { echo "round $round: killed before the first iteration was logged"; continue; }
  b=$(echo "$info" | sed -n 's/^loss:.*lowest .* at iteration \([0-9]*\) (the best).*/\1/p')
  e=$(echo "$info" | sed -n 's/^best episode: iteration \([0-9]*\),.*/\1/p')
  "$DSIM" export "$log" --csv "$dir/r$round.csv" >/dev/null 2>&1 || { echo "FAIL: round $round: export --csv"; fail=1; continue; }
  # the lowest loss of the rows (the first of equal ones) and of the rows but the last LAG
  read -r lowest prefix <<EOF
$(awk -F, -v lag=$LAG 'NR > 1 { i = $1; l = $2 + 0; L[i] = l; if (NR == 2 || l < best) { best = l; it = i } n++ }
  END { m = ""; for (j = 0; j < n - lag; j++) if (m == "" || L[j] < m) m = L[j]
        print it, (m == "" ? "none" : sprintf("%.17g", m)) }' "$dir/r$round.csv")
EOF
  if [ -z "$b" ] || [ "$b" != "$lowest" ]; then
    echo "FAIL: round $round: info's best iteration '$b', the CSV's lowest loss is at $lowest"; echo "$info"; fail=1; continue
  fi
  case $(echo "$info" | grep '^episodes:') in
    *best*) ;;
    *) # killed while iteration 0's episode was being recorded: nothing kept yet
       [ "$n" = 1 ] || { echo "FAIL: round $round: $n iterations logged and no best episode"; echo "$info"; fail=1; }
       echo "round $round: killed while recording iteration 0"; continue ;;
  esac
  [ -n "$e" ] && stale_rounds=$((stale_rounds + 1))
  [ -n "$e" ] || e=$b
  le=$(awk -F, -v e="$e" 'NR > 1 && $1 == e { print $2 }' "$dir/r$round.csv")
  if [ "$prefix" != "none" ] && ! awk -v a="$le" -v m="$prefix" 'BEGIN { exit !(a + 0 <= m + 0) }'; then
    echo "FAIL: round $round: kept best episode $e (loss $le) is staler than $LAG iterations: the rows up to $((n - 1 - LAG)) reach $prefix"
    echo "$info"; fail=1
  fi
  msg=$("$DSIM" export "$log" --episode best --frames "$dir/f$round" 2>&1) || {
    echo "FAIL: round $round: export --episode best:"; echo "$msg"; fail=1; continue; }
  if [ "$e" != "$b" ]; then
    case $msg in *"best episode is iteration $e"*) ;; *) echo "FAIL: round $round: export does not name iteration $e"; echo "$msg"; fail=1 ;; esac
  fi
  echo "round $round: killed after $k progress lines; $n iterations logged, best $b, kept best episode $e"
done
echo "$stale_rounds of 20 kills kept an older best episode than the best logged iteration"
exit $fail

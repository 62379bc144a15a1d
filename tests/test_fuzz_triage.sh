#!/bin/sh
# scripts/fuzz-triage (how CI's fuzzers decide whose a finding is), against a
# stand-in harness: a finding in a library counts as the library's; one in
# dsim's sources fails; one that no longer fails alone is dropped; and an
# out-of-memory finding whose first re-run ended on libFuzzer's RSS watchdog
# with no stack (ASan's shadow of a huge allocation passing -rss_limit_mb
# before the malloc-limit hook reports it, as on one CI run) is re-run
# without the watchdog and attributed by the malloc hook's stack.
set -u
: "${DS_BUILDDIR:?}" "${DS_SRCDIR:?}"
dir=$(mktemp -d "$DS_BUILDDIR/tests/triage.XXXXXX")
trap 'rm -rf "$dir"' EXIT
fail=0
mkdir "$dir/f"
printf a >"$dir/f/oom-lib"
printf b >"$dir/f/crash-ours"
printf c >"$dir/f/crash-gone"
printf d >"$dir/f/oom-nostack"
cat >"$dir/h" <<'SH'
#!/bin/sh
for a; do f=$a; case $a in -rss_limit_mb=*) rss=${a#*=} ;; esac; done
case $f in
  *oom-lib|*oom-nostack)
    if [ "$rss" != 0 ]; then
      echo "==1== ERROR: libFuzzer: out-of-memory (used: 1066Mb; limit: ${rss}Mb)"
      case $f in *oom-nostack) exit 1 ;; esac
    fi
    echo "==1== ERROR: libFuzzer: out-of-memory (malloc(8589934672))"
    echo "    #7 0x5 in malloc (/x/fuzz_h+0xf81ad)"
    echo "    #8 0x7f in H5FL_blk_malloc (/lib/x86_64-linux-gnu/libhdf5_serial.so.103+0x123af1)"
    exit 1 ;;
  *crash-ours)
    echo "==2== ERROR: AddressSanitizer: heap-buffer-overflow"
    echo "    #0 0x5 in __interceptor_strdup (/x/fuzz_h+0x1)"
    echo "    #1 0x5 in rd_bytes /src/io/runlog.c:12:3"
    echo "    #2 0x7f in H5Dread (/lib/x86_64-linux-gnu/libhdf5_serial.so.103+0x1)"
    exit 1 ;;
  *) exit 0 ;;
esac
SH
chmod +x "$dir/h"
out=$(cd "$dir" && sh "$DS_SRCDIR/scripts/fuzz-triage" t ./h f 'libhdf5' 'libhdf5')
rc=$?
echo "$out"
check() { if eval "$2"; then echo "PASS: $1"; else echo "FAIL: $1"; fail=1; fi; }
check "a finding in dsim fails the triage" '[ "$rc" -ne 0 ]'
check "two library findings (one re-run without the RSS watchdog), one in dsim" \
  'echo "$out" | grep -q "t: findings inside libhdf5: 2; in dsim: 1"'
check "the one in dsim is named" 'echo "$out" | grep -q "FINDING in dsim: f/crash-ours"'
rm "$dir/f/crash-ours"
# a fork-mode log (-fork=1): one progress line per job
printf '#2: cov: 5 ft: 4 corp: 1 exec/s 0\n#4096: cov: 9 ft: 12 corp: 3 exec/s 900\n#8191: cov: 9 ft: 13 corp: 3 exec/s 950 time: 9s\n' >"$dir/fuzz.log"
out=$(cd "$dir" && sh "$DS_SRCDIR/scripts/fuzz-triage" t ./h f 'libhdf5' 'libhdf5' fuzz.log)
check "library findings alone pass" '[ $? -eq 0 ] && echo "$out" | grep -q "in dsim: 0"'
check "the run's log gives the inputs tried" 'echo "$out" | grep -q "^t: 8191 inputs" && echo "$out" | grep -q "^#8191: .*time: 9s"'
out=$(cd "$dir" && sh "$DS_SRCDIR/scripts/fuzz-triage" t ./h f '' '')
check "without a library pattern every finding is dsim's" '[ $? -ne 0 ] && echo "$out" | grep -q "t: findings: 2"'
exit $fail

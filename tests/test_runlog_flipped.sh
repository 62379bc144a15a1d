#!/bin/sh
# Corrupt run logs that read as valid (issue 33 #3): valid logs with 1 to 4
# bytes flipped (scripts/flip-runlog tests/.../valid.h5 OUT --seed 33 and
# --seed 34, from the log tests/runlog_hostile writes), kept because the
# reader before the fix overflowed a buffer inside libhdf5 on them (seen
# with AddressSanitizer) and, without a sanitizer, exported garbage with
# exit 0 or crashed. Each must now be refused with exit 3 by the command that
# reads the corrupt part, naming the object; the others may read it (a log
# with one corrupt episode keeps its summary and its other episodes).
#   chunk_wider_*: the chunk dimensions of an episode's frames grown past the
#     dataset's (libhdf5 1.10 then copies past the inflated chunk);
#   meta_header: /meta's object header (libhdf5 crashes iterating it; the CLI
#     reads logs in a child process and reports the crash as a corrupt file);
#   *_header_alloc: an object header that makes libhdf5's metadata cache ask
#     for petabytes (an abort under AddressSanitizer, a failed open without).
set -u
: "${DSIM:?}" "${DS_BUILDDIR:?}" "${DS_SRCDIR:?}"
"$DSIM" info | grep -q "HDF5:       off" && { echo "SKIP: built --without-hdf5"; exit 77; }
# In a sanitizer build, let the huge allocations fail as they do without
# AddressSanitizer (malloc returns NULL, libhdf5 refuses the object) instead
# of aborting the reading child, so both builds give the same message.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}allocator_may_return_null=1"
fail=0
. "$DS_SRCDIR/tests/clicheck.sh"
dir=$(mktemp -d "$DS_BUILDDIR/tests/runlogflip.XXXXXX")
trap 'rm -rf "$dir"' EXIT
for f in "$DS_SRCDIR"/tests/data/runlog/*.h5.gz; do
  b=$(basename "$f" .gz)
  gzip -dc "$f" >"$dir/$b"
done
refused() { # file, episode, message
  check "$1 --episode $2" 3 "$DSIM" export "$dir/$1" --episode "$2" --frames "$dir/frames" --force
  expect "$1 --episode $2" "$3"
}
refused chunk_wider_first.h5 first "/episodes/first/frames: chunk dimension 2 is 26, expected 4 (corrupt layout)"
refused chunk_wider_best.h5 best "/episodes/best/frames: chunk dimension 2 is 11268, expected 4 (corrupt layout)"
refused chunk_wider_last.h5 last "/episodes/last/frames: chunk dimension 2 is 11468804, expected 4 (corrupt layout)"
for e in first best last; do
  check "meta_header.h5 --episode $e" 3 "$DSIM" export "$dir/meta_header.h5" --episode $e --frames "$dir/frames" --force
  expect "meta_header.h5 --episode $e" "meta_header.h5: "
done
check "meta_header.h5 info" 3 "$DSIM" info "$dir/meta_header.h5"
check "meta_header_alloc.h5 info" 3 "$DSIM" info "$dir/meta_header_alloc.h5"
expect "meta_header_alloc.h5 info" "meta_header_alloc.h5: /meta: cannot open (corrupt object header?)"
refused frames_header_alloc.h5 first "/episodes/first/frames: cannot open (corrupt object header?)"
# the intact parts of the chunk_wider logs still read
check "chunk_wider_first.h5 info" 0 "$DSIM" info "$dir/chunk_wider_first.h5"
check "chunk_wider_first.h5 --episode last" 0 "$DSIM" export "$dir/chunk_wider_first.h5" --episode last --frames "$dir/frames" --force
exit $fail

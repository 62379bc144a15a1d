#!/bin/sh
# Include order of the areas (ARCHITECTURE.md): every `#include "..."` of the
# library's sources and public headers must point at the same area or one
# below it:
#
#   base  <-  engine, render  <-  envs  <-  controllers  <-  cli
#   io (configs, logs, images, meshes) may use base, engine and render types
#   and is used by envs, controllers (the run object's log) and cli; cuda may use base, engine and render.
#
# Public headers belong to an area: include/dsim/base.h (and the generated
# build_config.h, device.h) to base; engine.h, engine_batch.h, fd.h, mesh.h, artic.h, fluid.h to engine; raster.h,
# image.h, volume.h to render; runlog.h, video.h, model_file.h, config_dirs.h to io; env.h, scenes.h, batch.h to envs; controller.h, sysid.h, run.h, abi.h
# to controllers; the umbrella dsim.h to cli. Only io/ may include the
# headers of cJSON, HDF5, libpng and giflib. Prints every violation.
set -u
top=${DS_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$top" || exit 99

area_of_header() { # include path -> area ("" when unknown)
  case $1 in
    dsim/base.h|dsim/build_config.h|dsim/device.h) echo base ;;
    dsim/engine.h|dsim/fd.h|dsim/mesh.h|dsim/engine_batch.h|dsim/artic.h|dsim/fluid.h) echo engine ;;
    dsim/raster.h|dsim/image.h|dsim/volume.h) echo render ;;
    dsim/runlog.h|dsim/video.h|dsim/model_file.h|dsim/config_dirs.h) echo io ;;
    dsim/env.h|dsim/scenes.h|dsim/batch.h) echo envs ;;
    dsim/controller.h|dsim/sysid.h|dsim/run.h|dsim/abi.h) echo controllers ;;
    dsim/dsim.h) echo cli ;;
    base/*|engine/*|render/*|io/*|envs/*|controllers/*|cli/*|cuda/*) echo "${1%%/*}" ;;
    *) echo "" ;;
  esac
}

allowed() { # area -> the areas it may include
  case $1 in
    base) echo "base" ;;
    engine) echo "base engine" ;;
    render) echo "base render" ;;
    io) echo "base engine render io" ;;
    envs) echo "base engine render io envs" ;;
    controllers) echo "base envs io controllers" ;;
    cli) echo "base engine render io envs controllers cli" ;;
    cuda) echo "base engine render cuda" ;;
  esac
}

fail=0 checked=0
files=$(find base engine render io envs controllers cli cuda include/dsim \
  \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.h.in' \) 2>/dev/null | sort)
for f in $files; do
  case $f in
    include/dsim/*) from=$(area_of_header "dsim/${f#include/dsim/}"); from=${from:-base} ;;
    *) from=${f%%/*} ;;
  esac
  ok=$(allowed "$from")
  # quoted includes
  for inc in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f"); do
    [ "$inc" = config.h ] && continue
    checked=$((checked + 1))
    to=$(area_of_header "$inc")
    if [ -z "$to" ]; then
      echo "$f: includes \"$inc\", which belongs to no area"
      fail=1
      continue
    fi
    case " $ok " in
      *" $to "*) ;;
      *) echo "$f: includes \"$inc\" ($to), but $from may include only: $ok"; fail=1 ;;
    esac
  done
  # third-party I/O libraries: io/ only
  if [ "$from" != io ] && grep -Eq '^[[:space:]]*#[[:space:]]*include[[:space:]]*<(cjson/cJSON|hdf5|png|gif_lib|libxml/[a-zA-Z]+)\.h>' "$f"; then
    echo "$f: includes an I/O library header (cJSON, HDF5, libpng, giflib, libxml2); only io/ may"
    fail=1
  fi
done
# The device layer (base/backend.h): cuda/ reaches the engine and the
# renderer only through the headers a backend needs (the stage bodies), and
# only the layer's files ask whether CUDA is compiled in.
for f in $(find cuda -name '*.cu' -o -name '*.h' 2>/dev/null); do
  for inc in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\(engine\/[^"]*\|render\/[^"]*\|envs\/[^"]*\)".*/\1/p' "$f"); do
    case $inc in
      engine/batch_body.h|engine/fluid_batch_body.h|render/raster_stages.h) ;;
      *) echo "$f: includes \"$inc\"; cuda/ may include only base/backend.h, engine/batch_body.h, engine/fluid_batch_body.h and render/raster_stages.h of the other areas"; fail=1 ;;
    esac
  done
done
for f in $files; do
  case $f in
    base/backend.h|base/backend.c|base/backend_none.c|cuda/*) continue ;;
  esac
  if grep -q 'DS_HAVE_CUDA' "$f"; then
    echo "$f: tests DS_HAVE_CUDA; only the device layer's files (base/backend*, cuda/) may"
    fail=1
  fi
done
if [ "$checked" -lt 50 ]; then
  echo "test_includes: only $checked includes found under $top: wrong directory?"
  exit 99
fi
[ "$fail" -eq 0 ] && echo "test_includes: $checked includes in $(echo "$files" | wc -l) files follow the area order"
exit "$fail"

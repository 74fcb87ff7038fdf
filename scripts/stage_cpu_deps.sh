#!/usr/bin/env bash
# Stages OpenBLAS's static library (pthread build) and its headers for a build machine that lacks the package (the
# GPU machine): writes .cpu-deps/openblas-pthread.tar.xz (git-ignored, ~4 MB), which cmake/openblas.cmake
# unpacks into the build folder when the system has no libopenblas-pthread-dev. Run from the project root
# after `bash ../shared/tools/device-deps.sh`, before copying the tree to the device.
set -euo pipefail
cd "$(dirname "$0")/.."
lib=/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.a
inc=/usr/include/x86_64-linux-gnu/openblas-pthread
for f in "$lib" "$inc/cblas.h" "$inc/openblas_config.h"; do
  [ -e "$f" ] || {
    echo "stage_cpu_deps: $f is missing; run scripts/setup.sh (libopenblas-pthread-dev) first" >&2
    exit 1
  }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/lib" "$tmp/include" .cpu-deps
cp -L "$lib" "$tmp/lib/libopenblas.a"
cp -L "$inc/cblas.h" "$inc/openblas_config.h" "$tmp/include/"
tar -C "$tmp" -cJf .cpu-deps/openblas-pthread.tar.xz lib include
echo "staged $(du -h .cpu-deps/openblas-pthread.tar.xz | cut -f1) in .cpu-deps/openblas-pthread.tar.xz"

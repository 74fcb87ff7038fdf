#!/usr/bin/env bash
# Installs the built project into a temporary prefix, builds examples/ against it with find_package(mlalpha)
# alone (no path into the source tree), and runs the example. A ctest (label cpu) calls it.
# Usage: scripts/check_example.sh BUILD_DIR
set -euo pipefail
build=$(cd "${1:?usage: check_example.sh BUILD_DIR}" && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >"$tmp/install.log" || { cat "$tmp/install.log"; exit 1; }
[ -f "$tmp/prefix/lib/cmake/mlalpha/mlalphaConfig.cmake" ] || { echo "no mlalphaConfig.cmake installed"; exit 1; }
[ -f "$tmp/prefix/include/mlalpha/run.h" ] || { echo "public headers not installed"; exit 1; }
# The example sees only the installed headers: copy it out of the tree so no relative include can leak in.
cp -r "$src/examples" "$tmp/examples"
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
cmake -S "$tmp/examples" -B "$tmp/build" "${gen[@]}" -DCMAKE_PREFIX_PATH="$tmp/prefix" -DCMAKE_BUILD_TYPE=Release \
  >"$tmp/configure.log" || { cat "$tmp/configure.log"; exit 1; }
cmake --build "$tmp/build" >"$tmp/build.log" 2>&1 || { cat "$tmp/build.log"; exit 1; }
"$tmp/build/train_synthetic" "$tmp/run"

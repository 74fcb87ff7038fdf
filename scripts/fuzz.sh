#!/usr/bin/env bash
# Fuzz the input readers with libFuzzer (Debian's clang), a fixed time budget per target:
#   npy          .npy files and the panel assembly (fuzz/fuzz_npy.cpp)
#   csv          the CSV reader, three delimiters (fuzz/fuzz_csv.cpp)
#   safetensors  the safetensors reader, its checksums, the checkpoint metadata parsers (fuzz/fuzz_safetensors.cpp)
#   toml         the TOML run config and command-line overrides (fuzz/fuzz_toml.cpp)
#   scripts/fuzz.sh [seconds per target, default 60] [targets..., default all]
# Builds each target with ASan + UBSan into $FUZZ_DIR (default build-fuzz), seeds each corpus with small
# valid files (fuzz/make_seeds.cpp, plus configs/*.toml), runs each target, and exits non-zero if any run
# finds a crash, a sanitizer report, a leak, an input slower than 10 s or one using > 2 GB.
# Crashing inputs are kept in $FUZZ_DIR/artifacts; replay one with $FUZZ_DIR/fuzz_<target> <file>.
set -euo pipefail
cd "$(dirname "$0")/.."

SECS="${1:-60}"
DIR="${FUZZ_DIR:-build-fuzz}"
CXX="${CLANGXX:-clang++}"
[[ "$SECS" =~ ^[0-9]+$ ]] || { echo "fuzz.sh: the budget must be a whole number of seconds, got '$SECS'" >&2; exit 2; }
if ! command -v "$CXX" >/dev/null && [ "$CXX" = clang++ ] && [ "$(id -u)" -eq 0 ]; then
  echo "== installing clang (libFuzzer)"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang >/dev/null
fi
command -v "$CXX" >/dev/null || { echo "fuzz.sh: $CXX not found (apt-get install clang)" >&2; exit 2; }

COMMON=(src/data/fileio.cpp src/core/atomic_file.cpp)
declare -A SOURCES=(
  [npy]="src/data/npy.cpp"
  [csv]="src/data/csv.cpp src/data/time_axis.cpp src/core/suggest.cpp"
  [safetensors]="src/checkpoint/safetensors.cpp src/checkpoint/config_json.cpp src/core/config_types.cpp"
  [toml]="$(echo src/config/*.cpp) src/core/config_types.cpp src/data/split.cpp src/data/csv.cpp src/data/time_axis.cpp src/core/suggest.cpp src/data/normalize.cpp src/data/panel_setup.cpp src/data/npy.cpp src/data/synthetic.cpp src/data/targets.cpp src/core/rng.cpp"
)
TARGETS=("${@:2}")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(npy csv safetensors toml)
for t in "${TARGETS[@]}"; do
  [ -n "${SOURCES[$t]:-}" ] || { echo "fuzz.sh: unknown target '$t' (npy, csv, safetensors, toml)" >&2; exit 2; }
done
FLAGS=(-std=c++20 -O1 -g -fno-omit-frame-pointer -Iinclude -Isrc
       -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined)

mkdir -p "$DIR/artifacts"
echo "== building fuzz targets in $DIR"
"$CXX" -std=c++20 -O1 -Iinclude -Isrc fuzz/make_seeds.cpp src/data/npy.cpp src/checkpoint/safetensors.cpp \
  src/checkpoint/config_json.cpp src/core/config_types.cpp "${COMMON[@]}" -o "$DIR/make_seeds"
for t in "${TARGETS[@]}"; do
  # toml++ 3.3.0 (Debian's) asserts on some malformed documents in debug builds (fuzz/fuzz_toml.cpp lists
  # them); NDEBUG builds it as the release binary is, so the fuzzer gets past them into our code.
  extra=()
  [ "$t" = toml ] && extra=(-DNDEBUG)
  # shellcheck disable=SC2086  # SOURCES holds space-separated paths
  "$CXX" "${FLAGS[@]}" "${extra[@]}" "fuzz/fuzz_$t.cpp" ${SOURCES[$t]} "${COMMON[@]}" -o "$DIR/fuzz_$t"
done
"$DIR/make_seeds" "$DIR/seeds"
cp configs/*.toml "$DIR/seeds/toml/"

status=0
for t in "${TARGETS[@]}"; do
  mkdir -p "$DIR/corpus/$t"
  echo "== fuzz_$t for ${SECS}s"
  # New interesting inputs go to the first corpus folder; the seeds are read only.
  if ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
     "$DIR/fuzz_$t" -max_total_time="$SECS" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
       -dict="fuzz/$t.dict" -artifact_prefix="$DIR/artifacts/$t-" "$DIR/corpus/$t" "$DIR/seeds/$t" \
       >"$DIR/fuzz_$t.log" 2>&1; then
    grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb|^Done" "$DIR/fuzz_$t.log" || true
    echo "fuzz_$t: no crash"
  else
    status=1
    tail -n 40 "$DIR/fuzz_$t.log"
    echo "fuzz_$t: FAILED (log: $DIR/fuzz_$t.log, input: $DIR/artifacts/$t-*)" >&2
  fi
done
exit $status

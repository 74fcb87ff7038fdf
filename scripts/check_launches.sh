#!/usr/bin/env bash
# Every kernel launch in the library (`kernel<<<...>>>` or cudaLaunchKernelEx) is followed, within the
# next 12 lines, by MLALPHA_CHECK_LAUNCH (src/core/cuda_check.h): an unchecked launch error would surface
# at some later CUDA call and name the wrong place. Launch checks without the stream argument are listed
# as notes: they read the launch error but cannot synchronise in debug builds (MLALPHA_CHECK_LAUNCHES).
# Usage: scripts/check_launches.sh [source-dir...]   (default: src). Exits 1 naming each unchecked launch.
set -euo pipefail
cd "$(dirname "$0")/.."
dirs=${*:-src}
status=0
# shellcheck disable=SC2086
while IFS= read -r f; do
  awk -v file="$f" '
    { line[NR] = $0 }
    END {
      for (i = 1; i <= NR; ++i) {
        l = line[i]; sub(/\/\/.*/, "", l)
        if (l ~ /<<<.*>>>/ || l ~ /cudaLaunchKernelEx[ \t]*\(/) {
          ok = 0
          for (j = i; j <= i + 12 && j <= NR; ++j) if (line[j] ~ /MLALPHA_CHECK_LAUNCH[ \t]*\(/) { ok = 1; break }
          if (!ok) { printf "%s:%d: kernel launch without MLALPHA_CHECK_LAUNCH in the next 12 lines\n", file, i; bad = 1 }
        }
        if (line[i] ~ /MLALPHA_CHECK_LAUNCH[ \t]*\([ \t]*\)/ && file !~ /cuda_check\.h$/)
          printf "note: %s:%d: MLALPHA_CHECK_LAUNCH() without the stream (no debug-build synchronisation)\n", file, i
      }
      exit bad
    }' "$f" || status=1
done < <(find $dirs -name '*.cu' -o -name '*.cuh' -o -name '*.cpp' -o -name '*.h' | sort)
[ $status -eq 0 ] && echo "check_launches: every kernel launch under $dirs is followed by MLALPHA_CHECK_LAUNCH"
exit $status

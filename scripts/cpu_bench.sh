#!/usr/bin/env bash
# The fast CPU model against PyTorch on the same machine and thread counts (docs/benchmarks.md, "CPU"):
# ml-alpha-cpu-bench (already built in the build folder; the reference model's step too) and
# bench/torch_reference.py cpu (when python3 can import torch), default and S configurations.
# Usage: scripts/cpu_bench.sh [build-dir] [threads, e.g. 1,2,4,8,16]   (default threads: 1, 2, 4, ... up to nproc)
set -euo pipefail
build=${1:-build}
[ -d "$build" ] && build=$(cd "$build" && pwd)  # a folder relative to where it is called from
cd "$(dirname "$0")/.."
bin="$build/ml-alpha-cpu-bench"
[ -x "$bin" ] || { echo "cpu_bench: $bin is missing: build the target ml-alpha-cpu-bench first" >&2; exit 1; }
if [ -n "${2:-}" ]; then
  threads=$2
else
  n=$(nproc); [ "$n" -gt 64 ] && n=64  # a model runs at most 64 threads (kMaxCpuThreads)
  threads=1; t=2
  while [ "$t" -lt "$n" ]; do threads="$threads,$t"; t=$((t * 2)); done
  [ "$n" -gt 1 ] && threads="$threads,$n"
fi
echo "# $(date -u +%F) $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs; threads $threads"
"$bin" --configs default,S --threads "$threads" --steps 30 --warmup 3 --ref
echo
py=${PYTHON:-python3}
if "$py" -c "import torch" 2>/dev/null; then
  "$py" bench/torch_reference.py cpu --configs default,S --threads "$threads" --steps 20 --warmup 2
else
  echo "(PyTorch not importable by $py: set PYTHON=<python with torch> for the PyTorch rows)"
fi

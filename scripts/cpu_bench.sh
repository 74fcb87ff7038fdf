#!/usr/bin/env bash
# The fast CPU model against PyTorch on the same machine and thread counts, one after the other in one run
# (docs/benchmarks.md, "The fast CPU path"): `ml-alpha bench --device cpu` (the CPU trainer's step, and the
# reference model's) and bench/torch_reference.py cpu (when the Python can import torch), default and S.
# Usage: scripts/cpu_bench.sh [build-dir] [threads, e.g. 1,2,4,8,16]   (default threads: 1, 2, 4, ... up to nproc)
#        PYTHON=<python with torch> for the PyTorch rows (default python3).
set -euo pipefail
build=${1:-build}
[ -d "$build" ] && build=$(cd "$build" && pwd)  # a folder relative to where it is called from
cd "$(dirname "$0")/.."
bin="$build/ml-alpha"
[ -x "$bin" ] || { echo "cpu_bench: $bin is missing: build ml-alpha first (scripts/setup.sh)" >&2; exit 1; }
if [ -n "${2:-}" ]; then
  threads=$2
else
  n=$(nproc); [ "$n" -gt 64 ] && n=64  # a model runs at most 64 threads (kMaxCpuThreads)
  threads=1; t=2
  while [ "$t" -lt "$n" ]; do threads="$threads,$t"; t=$((t * 2)); done
  [ "$n" -gt 1 ] && threads="$threads,$n"
fi
echo "# $(date -u +%F) $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs; threads $threads"
"$bin" bench --device cpu --configs default,S --threads "$threads" --steps 30 --warmup 3 --reference
echo
py=${PYTHON:-python3}
if "$py" -c "import torch" 2>/dev/null; then
  "$py" bench/torch_reference.py cpu --configs default,S --threads "$threads" --steps 20 --warmup 2
else
  echo "(PyTorch not importable by $py: set PYTHON=<python with torch> for the PyTorch rows)"
fi

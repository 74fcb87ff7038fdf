#!/usr/bin/env bash
# Builds bench/blas_candidates.cpp once per Debian BLAS candidate and times each on the model's GEMM shapes
# at 1 thread and at $threads (the library's own threads, and the serial library split over std::threads).
# Needs libopenblas-{serial,pthread,openmp}-dev, libblis-{serial,pthread,openmp}-dev, libdnnl-dev.
# Usage: scripts/blas_candidates.sh [threads] > log   (docs/benchmarks.md, "BLAS candidates")
set -euo pipefail
cd "$(dirname "$0")/.."
threads=${1:-$(nproc)}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
inc=/usr/include/x86_64-linux-gnu
lib=/usr/lib/x86_64-linux-gnu
build() {  # name, flags...
  local name=$1; shift
  g++ -O2 -std=c++17 bench/blas_candidates.cpp -o "$out/$name" "$@" -lpthread -lm
}
for v in serial pthread openmp; do
  build openblas-$v -I$inc/openblas-$v $lib/openblas-$v/libopenblas.a -fopenmp
  build blis-$v -I$inc/blis-$v $lib/blis-$v/libblis.a -fopenmp
done
build onednn -DUSE_DNNL -ldnnl
for b in openblas-serial blis-serial onednn; do
  OMP_NUM_THREADS=1 DNNL_VERBOSE=0 "$out/$b" "$b/1thr" 1
done
OPENBLAS_NUM_THREADS=1 "$out/openblas-pthread" "openblas-pthread/1thr" 1
# split: our workers each call a single-threaded library on a band of rows (how src/cpu uses it); OpenBLAS
# through its pthread build set to one thread, since the serial build is not safe to call concurrently.
OPENBLAS_NUM_THREADS=1 "$out/openblas-pthread" "openblas-pthread1/split$threads" "$threads"
"$out/blis-serial" "blis-serial/split$threads" "$threads"
for b in openblas-pthread openblas-openmp blis-pthread blis-openmp onednn; do
  OPENBLAS_NUM_THREADS=$threads BLIS_NUM_THREADS=$threads OMP_NUM_THREADS=$threads "$out/$b" "$b/$threads" 1
done

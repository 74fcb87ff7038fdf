#!/usr/bin/env bash
# Set up, build and run every test: the C++ suites (ctest; GPU suites report "skipped" on a machine without
# a GPU), then the Python package's suite (scripts/test_python.sh: installs the engine, builds python/
# against it, runs pytest). Arguments go to ctest. MLALPHA_SKIP_PYTHON=1 leaves the Python suite out.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh build
ctest --test-dir build --output-on-failure "$@"
if [ "${MLALPHA_SKIP_PYTHON:-0}" != 1 ]; then
  scripts/test_python.sh build
fi

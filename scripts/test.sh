#!/usr/bin/env bash
# Set up, build and run every test. GPU suites report "skipped" on a machine without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh build
ctest --test-dir build --output-on-failure "$@"

#!/usr/bin/env bash
# The main job: set up, build, and train on the built-in synthetic dataset. Extra arguments go to
# `ml-alpha train` (try --help).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh build
exec build/ml-alpha train "$@"

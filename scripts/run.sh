#!/usr/bin/env bash
# The main job: set up, build, and train on the built-in synthetic dataset. Extra arguments go to
# `ml-alpha train` (try --help). Without an output folder (-o, --out-dir, --config or --resume) each run
# gets its own, runs/<date-time>, since train never replaces a run it did not create.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh build
for a in "$@"; do
  case $a in -o|--out-dir|--out-dir=*|-c|--config|--config=*|--resume|--resume=*|*run.out_dir*) exec build/ml-alpha train "$@" ;; esac
done
exec build/ml-alpha train -o "runs/$(date +%Y%m%d-%H%M%S)" "$@"

#!/usr/bin/env bash
# Carry-trained vs zero-state-trained on the real daily panel (scripts/real_panel.py builds data/sp500.csv), both
# scored on the test range in mode carry (and window, for reference): docs/benchmarks.md, "Stateful training on a
# real daily panel". Usage: scripts/real_panel_bench.sh <ml-alpha binary> <panel.csv> <out folder> [windows|time]
# Environment: SEEDS (1 2 3), STEPS (1500), INSTRUMENTS (16, time batches' G), FEATURES (a TOML list; all eight).
set -euo pipefail
bin=$1 csv=$2 out=$3 mode=${4:-windows}
steps=${STEPS:-1500}
data=(--set 'data.source="csv"' --set "data.csv=\"$csv\"" --set 'data.time_column="date"'
      --set 'data.instrument_column="ticker"'
      --set "data.feature_columns=${FEATURES:-[\"r1\",\"r5\",\"r20\",\"r60\",\"hl\",\"oc\",\"vchg\",\"vol20\"]}"
      --set 'data.target_columns=["fwd5"]' --set 'data.feature_norm="zscore"' --set 'data.target_norm="zscore"'
      --set split.train_end=0.7 --set split.valid_end=0.85 --set split.gap=5)
if [ "$mode" = time ]; then
  batch=(--set 'train.batch="time"' --set train.dates=4 --set train.instruments=${INSTRUMENTS:-16} --set 'train.loss="ic"')
else
  batch=(--set train.batch=16)
fi
mkdir -p "$out"
for seed in ${SEEDS:-1 2 3}; do
  for st in zero carry; do
    run=$out/$mode-$st-$seed
    "$bin" train --device cpu --threads 2 "${data[@]}" "${batch[@]}" --set train.seq_len=64 --steps "$steps" \
      --set run.eval_every=100 --set train.log_every=500 --seed "$seed" --set "train.state=\"$st\"" -o "$run" \
      > "$run.log" 2>&1
    for m in carry window; do
      "$bin" eval --checkpoint "$run/best.safetensors" --device cpu --threads 2 --mode $m > "$run.eval-$m.log" 2>&1
    done
  done
done

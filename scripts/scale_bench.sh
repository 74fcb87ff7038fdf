#!/usr/bin/env bash
# Data at scale (docs/benchmarks.md, "Data at scale"): an Alpha158-sized panel, 5000 instruments × 2500
# dates × 158 features (7.9 GB of float32 features), made by `ml-alpha synth`, read memory-mapped from .npy,
# preprocessed and trained on the GPU with cross-sectional (time) batches for S- and M-sized models; then
# the CSV reader's speed on a 10M-row file. Needs a GPU machine with ~40 GB of free disk and ~64 GB of RAM.
# Usage: scripts/scale_bench.sh [bin-dir]   (default: build). SCALE_DIR holds the data (default
# /tmp/mlalpha-scale, removed at the end unless SCALE_KEEP=1); logs go to $OUT (or ./scale-logs).
# SCALE_N / SCALE_T / SCALE_F / CSV_N / CSV_T shrink it for a trial run.
set -euo pipefail
bin=$(cd "${1:-build}" && pwd)
out=${OUT:-scale-logs}
dir=${SCALE_DIR:-/tmp/mlalpha-scale}
N=${SCALE_N:-5000} T=${SCALE_T:-2500} F=${SCALE_F:-158}
csv_n=${CSV_N:-4000} csv_t=${CSV_T:-2500}  # 10M rows
steps=${SCALE_STEPS:-300}
mkdir -p "$out" "$dir"
[ "${SCALE_KEEP:-0}" = 1 ] || trap 'rm -rf "$dir"' EXIT
log() { echo "$*" | tee -a "$out/scale.txt"; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.0f", a / b }'; }
timer=(); [ -x /usr/bin/time ] && timer=(/usr/bin/time -v)  # peak RSS where GNU time exists

log "== scale bench $(date -u +%FT%TZ) on $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"
log "host: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GB RAM; disk free $(df -h "$dir" | awk 'NR==2 {print $4}')"

t=$(now)
"$bin/ml-alpha" synth --instruments "$N" --timesteps "$T" --features "$F" --format npy -o "$dir/npy" >"$out/synth.log"
log "synth ${N}x${T}x${F} npy: $(since "$t") s, $(du -sh "$dir/npy/features.npy" | cut -f1) features"

# Raw read bandwidth of the features file (page cache after the write: memory speed; cold: the disk).
t=$(now)
dd if="$dir/npy/features.npy" of=/dev/null bs=16M 2>"$out/dd.log"
log "dd read of features.npy: $(since "$t") s ($(tail -n 1 "$out/dd.log" | awk -F, '{print $NF}'))"

train() {  # name, model settings...
  local name=$1
  shift
  cat >"$dir/$name.toml" <<EOF
[data]
source = "npy"
features = "$dir/npy/features.npy"
targets = "$dir/npy/targets.npy"
[train]
batch = "time"
dates = 1
instruments = 64
steps = $steps
warmup = 20
log_every = 100
[run]
device = "${SCALE_DEVICE:-gpu}"
eval_every = 0
out_dir = "$dir/run-$name"
EOF
  local t0
  t0=$(now)
  "${timer[@]}" "$bin/ml-alpha" train -c "$dir/$name.toml" --overwrite "$@" >"$out/train-$name.log" 2>"$out/time-$name.log" ||
    { log "train $name failed:"; tail -n 5 "$out/train-$name.log" "$out/time-$name.log" | tee -a "$out/scale.txt"; return 1; }
  log "train $name: $(since "$t0") s wall, peak host RSS $(awk '/Maximum resident/ {printf "%.1f GB", $NF/1e6}' "$out/time-$name.log" || true)"
  grep -E "read in|prepared in|steps/s|^valid|^test" "$out/train-$name.log" | sed "s/^/  $name: /" | tee -a "$out/scale.txt"
}
# S and M shapes of DESIGN section 5 (B = dates × instruments = 64 windows of L).
train S --set model.d_model=128 --set model.layers=4 --set model.d_state=64 --set model.head_dim=32 --set model.chunk=64 --set train.seq_len=256
train M --set model.d_model=256 --set model.layers=6 --set model.d_state=64 --set model.head_dim=64 --set model.chunk=128 --set train.seq_len=512 --set train.instruments=32

rm -rf "$dir/npy" "$dir"/run-*
t=$(now)
"$bin/ml-alpha" synth --instruments "$csv_n" --timesteps "$csv_t" --features 8 --format csv -o "$dir/csv" >"$out/synth-csv.log"
rows=$((csv_n * csv_t))
log "synth csv ${rows} rows: $(since "$t") s, $(du -sh "$dir/csv/panel.csv" | cut -f1)"
cat >"$dir/csv.toml" <<EOF
[data]
source = "csv"
csv = "$dir/csv/panel.csv"
feature_columns = ["f0", "f1", "f2", "f3", "f4", "f5", "f6", "f7"]
target_columns = ["y0"]
[train]
steps = 2
warmup = 1
log_every = 1
[run]
device = "${SCALE_DEVICE:-gpu}"
eval_every = 0
out_dir = "$dir/run-csv"
EOF
"$bin/ml-alpha" train -c "$dir/csv.toml" --overwrite >"$out/train-csv.log" 2>&1 ||
  { log "csv train failed:"; tail -n 5 "$out/train-csv.log" | tee -a "$out/scale.txt"; exit 1; }
secs=$(grep -o 'read in [0-9.]* s' "$out/train-csv.log" | awk '{print $3}')
mb=$(du -m "$dir/csv/panel.csv" | cut -f1)
log "csv read: $rows rows in $secs s = $(ratio "$rows" "$secs") rows/s ($mb MB: $(ratio "$mb" "$secs") MB/s)"

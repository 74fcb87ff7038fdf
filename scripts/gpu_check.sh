#!/usr/bin/env bash
# Runs on a GPU machine: every GPU suite, then compute-sanitizer memcheck, racecheck and synccheck over the kernel
# suites, a short GPU training run, the benchmark table and the per-kernel time breakdown. Logs go to $OUT
# (or ./gpu-logs).
# Usage: scripts/gpu_check.sh [bin-dir] [what...]   what: tests sanitize train bench kernels torchref
#   (default: all). bin-dir holds ml-alpha, ml-alpha-kernels and the GPU suites, either as a build tree
#   (build/) or as the ignored dist/ folder the built binaries are copied into (dist/tests/test_*_gpu).
set -uo pipefail
bin=${1:-build}
shift || true
what=${*:-tests sanitize train bench kernels torchref}
out=${OUT:-gpu-logs}
mkdir -p "$out"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/extras/CUPTI/lib64:${LD_LIBRARY_PATH:-}
tests=$(ls "$bin"/tests/test_*_gpu 2>/dev/null || ls "$bin"/test_*_gpu)
nvidia-smi -L | tee "$out/device.txt"
status=0
for w in $what; do
  case $w in
    tests)
      for t in $tests; do
        echo "== $(basename "$t")"
        "$t" --gtest_brief=1 >"$out/$(basename "$t").log" 2>&1
        rc=$?
        tail -n 3 "$out/$(basename "$t").log"
        [ $rc -eq 0 ] || { echo "FAILED: $(basename "$t") rc=$rc"; grep -E 'Failure|Actual|error' -A3 "$out/$(basename "$t").log" | head -40; status=1; }
      done ;;
    sanitize)
      # synccheck: __syncthreads / __syncwarp / *_sync reached by a subset of the threads or lanes named (the
      # warp-mask bug class that scripts/check_ptx.sh catches statically for constant masks).
      # All three over every suite take more than one 10-minute device call: SANITIZERS="racecheck" picks.
      for tool in ${SANITIZERS:-memcheck racecheck synccheck}; do
        for t in $tests; do
          # SANITIZE_SUITES="test_loss_gpu test_sampler_gpu" limits the sanitizers to the suites of changed kernels.
          [ -z "${SANITIZE_SUITES:-}" ] || [[ " $SANITIZE_SUITES " == *" $(basename "$t") "* ]] || continue
          case $(basename "$t") in test_cupti_gpu|test_trainer_gpu) continue ;; esac  # CUPTI clashes; the trainer's kernels are covered by the op suites
          filt='*'
          [ "$(basename "$t")" = test_model_gpu ] && filt='*tiny*:*ragged*'
          r=$(compute-sanitizer --tool $tool --error-exitcode 9 "$t" --gtest_brief=1 --gtest_filter="$filt" 2>&1 | tail -n 2 | tr '\n' ' ')
          echo "$tool $(basename "$t"): $r" | tee -a "$out/sanitizer.log"
        done
      done ;;
    train)
      "$bin"/ml-alpha train --steps 300 --log-every 100 2>&1 | tee "$out/train.log" ;;
    bench)
      # the default table (S, M fp32; L tf32 and fp32), then every configuration in bf16
      { "$bin"/ml-alpha bench && "$bin"/ml-alpha bench --precision bf16 --no-optimizer; } 2>&1 | tee "$out/bench.log" ;;
    kernels)
      # GPU time per kernel of one training step (bench/kernel_times.cpp). Every configuration goes into
      # one log: the device machine returns only a few files.
      : >"$out/kernels.log"
      for args in "--config S" "--config M" "--config L --precision tf32" "--config S --precision bf16" \
                  "--config M --precision bf16" "--config L --precision bf16"; do
        echo "== ml-alpha-kernels $args" | tee -a "$out/kernels.log"
        "$bin"/ml-alpha-kernels $args 2>&1 | tee -a "$out/kernels.log"
        rc=${PIPESTATUS[0]}
        [ "$rc" -eq 0 ] || { echo "FAILED: ml-alpha-kernels $args rc=$rc" | tee -a "$out/kernels.log"; status=1; }
        echo | tee -a "$out/kernels.log"
      done ;;
    torchref)
      # The independent PyTorch model reproduces a GPU-trained checkpoint's predictions and loss, then
      # the usual PyTorch training step is timed on the same shapes (eager and CUDA graph).
      d=$(mktemp -d)
      data="--set data.source=npy --set data.features=$d/features.npy --set data.targets=$d/targets.npy"
      "$bin"/ml-alpha synth -o "$d" --instruments 8 --timesteps 600 --format npy >/dev/null &&
        "$bin"/ml-alpha train $data --steps 60 --eval-every 0 --log-every 60 --set model.groups=2 --chunk 24 \
          -L 50 --d-model 32 --head-dim 8 -o "$d/run" >/dev/null &&
        "$bin"/ml-alpha predict $data --checkpoint "$d/run/last.safetensors" --split all -o "$d/all" >/dev/null &&
        python3 bench/torch_reference.py check --checkpoint "$d/run/last.safetensors" --features "$d/features.npy" \
          --targets "$d/targets.npy" --pred "$d/all.npy" 2>&1 | tee "$out/torch_check.log" || status=1
      { python3 bench/torch_reference.py bench && python3 bench/torch_reference.py bench --precision bf16; } 2>&1 |
        tee "$out/torch_bench.log" ;;
  esac
done
exit $status

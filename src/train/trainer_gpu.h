#pragma once
// The GPU-resident training step of one model (DESIGN section 2): sample on the device → forward → loss →
// backward into the flat gradient arena → global norm (two phases) → clip scale + schedule → AdamW, all on
// one stream, no device→host copy, no host synchronisation, no allocation. The step is captured once as a
// CUDA graph and replayed; `graph = false` keeps the eager path for debugging. Per-step loss, norm, scale,
// lr and skip flag land in a mapped-pinned ring the host reads only when it logs.
//
// It is the population of one (src/train/population_trainer.h): a single model and each member of a
// population run the same kernels in the same order, so they train to the same bits.
#include <cstdint>
#include <vector>

#include "train/population_trainer.h"

namespace mlalpha {

class GpuTrainer {
 public:
  GpuTrainer(Context& ctx, const ModelConfig& mc, const TrainConfig& tc, const Panel& data,
             const GpuTrainerOptions& opt = {})
      : pop_(ctx, mc, {{tc, &data}}, opt) {}

  // Enqueue one step; returns at once (nothing waits on the device).
  void step() { pop_.step(); }
  int64_t steps_enqueued() const { return pop_.steps_enqueued(0); }
  // Read the record of step s (1-based, within the ring's reach); waits for the device only when step s
  // is not known complete yet, and then for every step enqueued so far.
  StepRecord record(int64_t s) { return pop_.record(0, s); }
  // Wait, then download the parameters (table.total()).
  std::vector<float> params() { return pop_.params(0); }
  const ModelLayout& layout() const { return pop_.layout(); }
  void synchronize() { pop_.synchronize(); }
  // The live parameter arena (table.total()) in device memory, e.g. for validation predictions on the
  // same stream between steps.
  const float* device_params() const { return pop_.device_params(0); }
  Context& context() { return pop_.context(); }
  // Device memory the model holds for activations and op scratch (GpuModel::activation_bytes()), the
  // figure estimate_gpu_training() predicts as activations + the model's share of workspaces.
  size_t activation_bytes() const { return pop_.activation_bytes(); }
  // Wait, then download weights, AdamW moments and the step counters (for a checkpoint).
  TrainState state() { return pop_.state(0); }
  // Continue from `s`, before the first step or between steps: uploads into the same buffers (a captured
  // graph stays valid) and sets the device counters, so the next step is s.step + 1 and equals that step
  // of an uninterrupted run bitwise. steps_enqueued() and record() then count from s.step. Rejects arenas
  // of another size and a seed other than this trainer's.
  void load_state(const TrainState& s) { pop_.load_state(0, s); }

 private:
  PopulationTrainer pop_;
};

}  // namespace mlalpha

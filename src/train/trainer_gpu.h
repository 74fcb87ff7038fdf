#pragma once
// The GPU-resident training step (DESIGN section 2): sample on the device → forward → loss → backward
// into the flat gradient arena → global norm (two phases) → clip scale + schedule → AdamW, all on one
// stream, no device→host copy, no host synchronisation, no allocation. The step is captured once as a
// CUDA graph and replayed; `graph = false` keeps the eager path for debugging. Per-step loss, norm,
// scale, lr and skip flag land in a mapped-pinned ring the host reads only when it logs.
#include <cstdint>
#include <memory>
#include <vector>

#include "core/context.h"
#include "core/cuda_graph.h"
#include "core/device_arena.h"
#include "core/mapped_buffer.h"
#include "data/panel.h"
#include "mlalpha/config.h"
#include "model/layout.h"
#include "model/model_gpu.h"
#include "train/checkpoint.h"
#include "train/optim.h"

namespace mlalpha {

struct GpuTrainerOptions {
  bool graph = true;   // capture the step as a CUDA graph (from the second step on)
  bool tf32 = false;   // GEMMs and the SSD's chunk products on the tensor cores in tf32
  int ring_size = 0;   // slots of the step-record ring; 0 = max(1024, 2·log_every)
};

class GpuTrainer {
 public:
  GpuTrainer(Context& ctx, const ModelConfig& mc, const TrainConfig& tc, const Panel& data,
             const GpuTrainerOptions& opt = {});
  ~GpuTrainer();
  GpuTrainer(const GpuTrainer&) = delete;
  GpuTrainer& operator=(const GpuTrainer&) = delete;

  // Enqueue one step; returns at once (nothing waits on the device).
  void step();
  int64_t steps_enqueued() const { return enqueued_; }
  // Read the record of step s (1-based, within the ring's reach); waits for the device only when step s
  // is not known complete yet, and then for every step enqueued so far.
  StepRecord record(int64_t s);
  // Wait, then download the parameters (table.total()).
  std::vector<float> params();
  const ModelLayout& layout() const { return layout_; }
  void synchronize() { ctx_.synchronize(); }
  // The live parameter arena (table.total()) in device memory, e.g. for validation predictions on the
  // same stream between steps.
  const float* device_params() const { return arena_.params.data(); }
  Context& context() { return ctx_; }
  // Device memory the model holds for activations and op scratch (GpuModel::activation_bytes()), the
  // figure estimate_gpu_training() predicts as activations + the model's share of workspaces.
  size_t activation_bytes() const { return model_.activation_bytes(); }
  // Wait, then download weights, AdamW moments and the step counters (for a checkpoint).
  TrainState state();
  // Continue from `s`, before the first step or between steps: uploads into the same buffers (a captured
  // graph stays valid) and sets the device counters, so the next step is s.step + 1 and equals that step
  // of an uninterrupted run bitwise. steps_enqueued() and record() then count from s.step. Rejects arenas
  // of another size and a seed other than this trainer's.
  void load_state(const TrainState& s);

 private:
  void enqueue_step();

  Context& ctx_;
  ModelLayout layout_;
  TrainConfig tc_;
  GpuTrainerOptions opt_;
  DeviceArena arena_;
  GpuModel model_;
  DeviceBuffer<float> data_x_, data_y_, xb_, yb_, norm_partials_;
  DeviceBuffer<DeviceStepState> state_;
  MappedBuffer<StepRecord> ring_;
  int N_, T_;
  int64_t enqueued_ = 0, synced_ = 0;
  int64_t first_step_ = 1;   // the first step this trainer ran or will run (s.step + 1 after load_state)
  bool warmed_up_ = false;   // the eager first step has run (cuBLASLt plans exist): later steps may be captured
  CudaGraphExec graph_exec_;  // the captured step, replayed from the second step on
};

}  // namespace mlalpha

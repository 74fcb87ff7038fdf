#pragma once
// The CPU training step (DESIGN section 2 on the CPU backend): sample → forward → loss → backward →
// global norm → clip → AdamW with the scheduled lr. The oracle for the GPU trainer and the fallback
// of `ml-alpha train` on a machine without a GPU.
#include <cstdint>
#include <vector>

#include "data/panel.h"
#include "mlalpha/config.h"
#include "model/layout.h"
#include "model/model_ref.h"
#include "train/train_plan.h"
#include "train/optim.h"
#include "checkpoint/checkpoint.h"

namespace mlalpha {

// What the constructor checks before it allocates: the settings against the data and range, and the host
// memory of `members` such trainers (a population on the CPU) against what this machine has available.
void check_cpu_training(const ModelConfig& mc, const TrainConfig& tc, const Panel& data, TrainRange range,
                        int members = 1);

class CpuTrainer {
 public:
  // Samples the time steps `range` of `data` (which must outlive the trainer).
  CpuTrainer(const ModelConfig& mc, const TrainConfig& tc, const Panel& data, TrainRange range = {});
  // The same record the GPU trainer writes to its ring (train/optim.h).
  StepRecord step();
  const std::vector<float>& params() const { return params_; }
  const ModelLayout& layout() const { return layout_; }
  int64_t steps_done() const { return step_; }
  int64_t skipped_total() const { return skipped_; }
  // Everything needed to continue bit-exactly (weights, AdamW moments, counters, seed): a copy.
  TrainState state() const;
  // Continue from `s` (before the first step or between steps): the next step is s.step + 1 and equals
  // that step of an uninterrupted run bitwise. Rejects arenas of another size and a seed other than this
  // trainer's (the sampler's windows would differ).
  void load_state(const TrainState& s);

 private:
  ModelLayout layout_;
  TrainConfig tc_;
  const Panel& data_;
  GatherParams gather_;
  RefModel<float> model_;
  std::vector<float> params_, grads_, m_, v_, xb_, yb_;
  std::vector<unsigned char> decay_;
  int64_t step_ = 0, skipped_ = 0;
};

}  // namespace mlalpha

#pragma once
// The CPU training step (DESIGN section 2 on the CPU backend): sample → forward → loss → backward →
// global norm → clip → AdamW with the scheduled lr. With train.state = "carry" the batch's lanes walk consecutive
// windows (data/carry_sampler.h; with time batches, all lanes of a cross-section on the same dates:
// data/carry_sampler_time.h) and each lane's conv windows and SSM states go from one step's forward into the
// next's (zeroed where the sampler resets the lane), part of the trainer's state. `ml-alpha train`'s step on a machine without a GPU: the
// fast CPU model (src/cpu: OpenBLAS, all cores) by default, or the reference model (RefModel<float>, one
// thread, the ref:: optimizer passes), the oracle the GPU trainer's tests compare with.
#include <cstdint>
#include <memory>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "data/carry_sampler.h"
#include "data/panel.h"
#include "mlalpha/compute.h"
#include "mlalpha/config.h"
#include "model/layout.h"
#include "predict/window_plan.h"
#include "train/optim.h"
#include "train/train_plan.h"

namespace mlalpha {

namespace cpu {
class CpuModel;
class ThreadPool;
}  // namespace cpu
template <typename T>
class RefModel;

// What the constructor checks before it allocates, beyond the member's own checks (plan_member): the host memory
// of `members` such trainers (a population on the CPU) against what this machine has available.
void check_cpu_training(const Member& member, int members = 1, const Compute& compute = {});

struct CpuTrainerOptions {
  Compute compute;  // its CPU side: the threads and the kernels (fast or reference)
  // The fast model's threads from a pool shared with other trainers stepped in turn (a population's members;
  // compute.threads() is then not used). It must outlive the trainer.
  cpu::ThreadPool* pool = nullptr;
  // train.state = "carry" with windows: the present rows of the member's panel over its training range, shared by
  // the members of one panel (a population's); null: the trainer finds them.
  std::shared_ptr<const PresentRows> present = nullptr;
};

// Wall seconds of the parts of the last step (`ml-alpha bench --device cpu` prints them).
struct CpuStepTimes {
  double forward = 0;    // gather the batch, zero the gradients, forward, loss
  double backward = 0;   // backward into the gradient arena
  double optimizer = 0;  // global norm, clip, AdamW
};

class CpuTrainer {
 public:
  // Trains `member` (checked: plan_member), sampling the time steps of its range of its panel (which must outlive
  // the trainer).
  explicit CpuTrainer(const Member& member, const CpuTrainerOptions& opt = {});
  // The same for settings not checked yet: plan_member(mc, tc, data, range) first.
  CpuTrainer(const ModelConfig& mc, const TrainConfig& tc, const Panel& data, TrainRange range = {},
             const CpuTrainerOptions& opt = {});
  ~CpuTrainer();
  CpuTrainer(const CpuTrainer&) = delete;
  CpuTrainer& operator=(const CpuTrainer&) = delete;
  // The same record the GPU trainer writes to its ring (train/optim.h).
  StepRecord step();
  const CpuStepTimes& step_times() const { return times_; }
  const std::vector<float>& params() const { return params_; }
  const ModelLayout& layout() const { return layout_; }
  int64_t steps_done() const { return step_; }
  int64_t skipped_total() const { return skipped_; }
  // The worker threads of the fast model (1 for the reference).
  int threads() const;
  bool reference() const { return ref_ != nullptr; }
  // Predictions (N, T, K) of `p` (the panel the trainer samples, or another of the same F and K) by `plan`
  // with this trainer's model (its threads, its inference buffers; the training state is untouched), with
  // the live weights or with `params` when non-null, in windows of B.
  std::vector<float> predict(const Panel& p, const WindowPlan& plan, int B, const std::vector<float>* params = nullptr);
  // Predictions (N, T, K) of `p` in mode carry over the dates [t0, t1) (predict.h, predict_carry), by this
  // trainer's model, with the live weights or `params`.
  std::vector<float> predict_carry(const Panel& p, int t0, int t1, const std::vector<float>* params = nullptr);
  // Everything needed to continue bit-exactly (weights, AdamW moments, counters, seed): a copy.
  TrainState state() const;
  // Continue from `s` (before the first step or between steps): the next step is s.step + 1 and equals
  // that step of an uninterrupted run bitwise. Rejects arenas of another size and a seed other than this
  // trainer's (the sampler's windows would differ).
  void load_state(const TrainState& s);

 private:
  void reset_lanes();

  ModelLayout layout_;
  TrainConfig tc_;
  Compute compute_;  // the CPU side of it: the threads and the kernels
  const Panel& data_;
  GatherParams gather_;
  std::unique_ptr<cpu::CpuModel> fast_;     // one of the two
  std::unique_ptr<RefModel<float>> ref_;
  std::vector<float> params_, grads_, m_, v_, xb_, yb_;
  // train.state = "carry": the sampler of consecutive windows (windows mode; time mode: time_carry_, the pure
  // functions of data/carry_sampler_time.h), the lanes' states (layer-major, CarryState) and which lanes start
  // from zero this step.
  std::unique_ptr<CarrySampler> carry_;
  std::unique_ptr<TimeCarryParams> time_carry_;
  std::vector<float> carry_conv_, carry_ssm_;  // (NL, B, W − 1, conv_dim), (NL, B, H, P, N)
  std::vector<unsigned char> reset_;           // (B)
  std::vector<int> lane_rows_, lane_dates_;    // time carry: (B), (B, L) each lane's present rows (RowMap)
  std::vector<double> norm_partials_;       // (cpu::norm_blocks(params)): the fast global norm's scratch
  std::vector<unsigned char> decay_;
  int64_t step_ = 0, skipped_ = 0;
  CpuStepTimes times_;
};

}  // namespace mlalpha

#pragma once
// A population of E models of one architecture trained in one captured GPU step (DESIGN sections 2 and 7).
//
// One arena holds every member's weights, gradients and AdamW moments, (E, n) each, member m's slice at
// m·n. The step is one stream (one CUDA graph from the second step on):
//   one memset zeroes every member's gradients;
//   for each member m: sample its own windows (its seed, its step counter, its training panel) → forward
//     with its weights → its loss → backward into its gradient slice. The members are dealt round-robin to
//     a few lanes, each a stream (forked from and joined to the step's stream, so one graph holds them all)
//     with its own activation buffers: members of a lane take turns, lanes run side by side and fill the
//     GPU where one model's kernels leave it idle; activation memory grows with the lanes, not with E;
//   then, for all members in one launch each: the global norm (phase 1 over a grid (blocks, E), phase 2 one
//     block a member), clip scale + schedule (one thread a member: its own lr, warm-up, clip, skip flag),
//     AdamW (grid (blocks, E), its own lr and weight decay).
// Every per-model scalar is indexed by m and every kernel does for member m exactly the arithmetic of a
// population of one, in the same order: a member's weights after N steps equal bitwise those of the same
// model trained alone (GpuTrainer is the population of one). One member's NaN batch only sets its own skip flag.
// The rules of DESIGN section 2 hold for the whole population: no device→host copy, no host
// synchronisation, no atomics, no allocation in the step.
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/context.h"
#include "core/cuda_event.h"
#include "core/cuda_graph.h"
#include "core/device_arena.h"
#include "core/mapped_buffer.h"
#include "data/carry_sampler_gpu.h"
#include "data/panel.h"
#include "mlalpha/config.h"
#include "model/layout.h"
#include "model/model_gpu.h"
#include "predict/predict_gpu.h"
#include "predict/window_plan.h"
#include "checkpoint/checkpoint.h"
#include "train/optim.h"
#include "train/train_plan.h"

namespace mlalpha {

namespace dist {
class Communicator;
}

struct GpuTrainerOptions {
  bool graph = true;   // capture the step as a CUDA graph (from the second step on)
  int ring_size = 0;   // slots of the step-record ring per member; 0 = max(1024, 2·log_every)
  int lanes = 0;       // populations: streams the members are dealt to; 0 = min(E, 8), fewer when memory is short
  // Data-parallel training (docs/decisions.md "Several GPUs"): this process is rank
  // comm->rank() of comm->world(); null trains alone. Each rank samples its own windows (the sampler's
  // seed keyed by the rank), the gradients and losses are summed over the ranks inside the step (in the
  // captured graph) and divided by the world size before the norm, so every rank applies the same update;
  // the host's waits (record, params, state) become bounded waits that fail when a peer dies or hangs.
  // A world of one does exactly the arithmetic of a plain run. Not owned; must outlive the trainer.
  dist::Communicator* comm = nullptr;
  std::chrono::milliseconds dist_timeout{std::chrono::minutes(5)};  // the bound on those waits
};

// One member as given, not checked yet: its training settings, the panel it samples and the time steps of it it
// trains on (members may share a panel, which is then held on the device once; it must outlive the constructor
// only). The whole panel goes to the device, so predictions (predict()) read any range of it in place.
// plan_population checks them (plan_member each) into the Members the trainer takes.
struct PopulationMember {
  PopulationMember() = default;
  PopulationMember(const TrainConfig& t, const Panel* d, TrainRange r = {}) : train(t), data(d), range(r) {}
  TrainConfig train;
  const Panel* data = nullptr;
  TrainRange range;  // the training range of `data` (default: all of it)
};

// The device memory of a population, split into what each member adds, what each lane adds and what all
// share; `members` estimates E members on `lanes` lanes and `fitting` says how many fit into `available` bytes.
struct PopulationMemory {
  double per_member = 0;  // weights, gradients, moments, norm partials, step state, records
  double per_lane = 0;    // activations, workspaces (a lane's own context included), the batch
  double shared = 0;      // the decay mask, the training panels
  double members(int E, int lanes) const { return shared + per_lane * lanes + per_member * E; }
  int fitting(double available, int lanes) const;
};
PopulationMemory estimate_gpu_population(const ModelConfig& mc, const std::vector<Member>& members, int ring_slots);

// Each member checked (plan_member), its errors prefixed "population member m: " when there are several.
std::vector<Member> plan_population(const ModelConfig& mc, const std::vector<PopulationMember>& members);

// Everything the constructor checks before it allocates beyond each member's own checks: the members against
// each other (one step shape), the device memory against what the GPU has free. Throws Error naming the setting.
void check_gpu_population(const std::vector<Member>& members, const GpuTrainerOptions& opt = {});

class PopulationTrainer {
 public:
  // Members checked (plan_member; one model config, the same batch B and seq_len for all): checks the memory
  // before the first allocation.
  PopulationTrainer(Context& ctx, const std::vector<Member>& members, const GpuTrainerOptions& opt = {});
  // The same for members not checked yet: plan_population(mc, members) first.
  PopulationTrainer(Context& ctx, const ModelConfig& mc, const std::vector<PopulationMember>& members,
                    const GpuTrainerOptions& opt = {});
  ~PopulationTrainer();
  PopulationTrainer(const PopulationTrainer&) = delete;
  PopulationTrainer& operator=(const PopulationTrainer&) = delete;

  int members() const { return int(tc_.size()); }
  // train.precision, the same for every member (one architecture, one step).
  Precision precision() const { return precision_; }
  // Enqueue one step of every member that is not frozen; returns at once.
  void step();
  // Steps member m has taken or has enqueued (its counter; a frozen member's stops).
  int64_t steps_enqueued(int m) const { return enqueued_[size_t(m)]; }
  // The record of member m's step s (within the ring's reach); waits for the device only when that step
  // is not known complete yet, and then for everything enqueued so far.
  StepRecord record(int m, int64_t s);
  // Member m's live weights (table.total()) in device memory.
  const float* device_params(int m) const { return arena_.params.data() + size_t(m) * n_; }
  std::vector<float> params(int m);
  TrainState state(int m);
  // Predictions (N, T, K) of member m's panel by `plan` (predict/window_plan.h), with its live weights or with
  // `params` (table.total(), host) when non-null, on the step's stream between steps: lane 0's model and batch
  // buffer do the forwards, the windows are gathered from the panel already on the device, and the host waits
  // once, for the download of the kept rows. The tiles hold the members' batch B of windows.
  std::vector<float> predict(int m, const WindowPlan& plan, const std::vector<float>* params);
  // Member m continues from `s` (before the first step or between steps), as GpuTrainer::load_state.
  void load_state(int m, const TrainState& s);
  // Member m takes no further steps (its early stop): weights, moments and counters stay. The step is
  // captured again without its forward and backward.
  void freeze(int m);
  bool frozen(int m) const { return frozen_host_[size_t(m)] != 0; }

  const ModelLayout& layout() const { return layout_; }
  Context& context() { return ctx_; }
  void synchronize() { wait_device("the GPU's steps"); }
  // Activation and op scratch memory of one lane (GpuModel::activation_bytes()).
  size_t activation_bytes() const { return lanes_[0].model->activation_bytes(); }
  int lanes() const { return int(lanes_.size()); }

 private:
  void enqueue_step();
  struct Dataset;
  struct MemberCarry;
  void setup_carry(const std::vector<Member>& members);
  void save_carry(int m, TrainState& s);
  void load_carry(int m, const TrainState& s);
  GatherParams rank_gather_params(int m) const;  // member m's sampler on this rank
  void reduce_over_ranks(cudaStream_t st);
  void wait_device(const char* what);
  int first_active() const;

  Context& ctx_;
  ModelLayout layout_;
  std::vector<TrainConfig> tc_;
  GpuTrainerOptions opt_;
  size_t n_;  // table.total(): one member's arena length
  int E_;
  Precision precision_;
  DeviceArena arena_;
  // A lane: a stream with its own model buffers and batch. Lane 0 runs on the trainer's context; the others
  // own theirs (stream, cuBLASLt handle and workspace).
  struct Lane {
    std::unique_ptr<Context> own;
    std::unique_ptr<GpuModel> model;
    DeviceBuffer<float> xb, yb;  // (B, L, F), (B, L, K)
    CudaEvent done{cudaEventDisableTiming};
    Context& ctx(Context& main) { return own ? *own : main; }
  };
  std::vector<Lane> lanes_;
  CudaEvent fork_{cudaEventDisableTiming};
  // The distinct panels on the device, which one each member samples and the range of it.
  struct Dataset {
    const Panel* host = nullptr;
    int N = 0, T = 0;
    DeviceBuffer<float> x, y;  // (N, T, F), (N, T, K)
  };
  std::vector<Dataset> data_;
  std::vector<int> data_of_;          // (E)
  std::vector<GatherParams> gather_;  // (E): each member's windows: its panel, range, seed (and rank)
  // Predictions: weights given by the caller (and their bf16 copy), the window table and the kept rows.
  DeviceBuffer<float> predict_params_;
  DeviceBuffer<__nv_bfloat16> predict_params16_;
  PlanBuffers plan_buffers_;
  DeviceBuffer<float> norm_partials_, losses_;  // losses_ (E)
  DeviceBuffer<__nv_bfloat16> params16_;        // (E, n): BF16 only, the weights' bf16 copy (empty otherwise)
  DeviceBuffer<DeviceStepState> state_;                   // (E)
  DeviceBuffer<gpu::MemberOptim> optim_;                  // (E)
  DeviceBuffer<int> frozen_;                              // (E)
  std::vector<int> frozen_host_;
  MappedBuffer<StepRecord> ring_;  // (E, ring_size)
  std::vector<int64_t> enqueued_, synced_, first_step_;  // (E) each
  bool warmed_up_ = false;
  CudaGraphExec graph_exec_;
  // train.state = "carry" (docs/decisions.md "Stateful training"): member m's sampler of consecutive windows on
  // the device and its lanes' carried states, layer-major as CpuTrainer's (NL, B, W − 1, conv_dim) and (NL, B,
  // H, P, N): the forward reads and writes them in place, a reset kernel zeroes the lanes the sampler resets
  // before it, and a skipped step zeroes them all after the optimizer's skip flag is known. Null for a zero-state
  // member. They leave the device only for state() (a checkpoint).
  struct MemberCarry {
    std::unique_ptr<DeviceCarrySampler> sampler;
    DeviceBuffer<float> conv, ssm;
    DeviceBuffer<int> lane_rows, lane_dates;  // time batches: (B), (B, L) the lanes' present rows (RowMap)
  };
  std::vector<std::unique_ptr<MemberCarry>> carry_;  // (E)
};

}  // namespace mlalpha

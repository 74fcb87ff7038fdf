#pragma once
// What a trainer checks and sizes before it allocates anything, in one place for both backends:
// the configs and the dataset agree (validate_training), and the memory the run will hold fits
// (estimate_*_training, check_*_memory), so a config too large for the machine is refused with the bytes
// needed and available and the settings to change, instead of failing inside an allocation.
#include <cstddef>
#include <cstdint>
#include <string>

#include "data/panel.h"
#include "data/sampler.h"
#include "mlalpha/compute.h"
#include "mlalpha/config.h"

namespace mlalpha {

// The time steps of a panel a trainer samples: [begin, end); end < 0 means the panel's end.
struct TrainRange {
  int begin = 0, end = -1;
  int end_of(const Panel& p) const { return end < 0 ? p.T : end; }
};

// ModelConfig::validate, TrainConfig::validate, Panel::validate, and the dataset's F, K and the training range
// against the configs (train.seq_len <= its length). Throws mlalpha::Error naming the setting.
void validate_training(const ModelConfig& mc, const TrainConfig& tc, const Panel& data, TrainRange range = {});

// One model to train: its settings checked once against its panel and training range (validate_training), with
// its training plan computed then: the windows of a step (the batch) and the gather that samples them. Made by
// plan_member() only, so a function that takes a Member takes it checked: the engine, the trainers and the memory
// checks carry it and check none of it again. The panel must outlive it.
class Member {
 public:
  const ModelConfig& model() const { return mc_; }
  const TrainConfig& train() const { return tc_; }  // models = 1
  const Panel& panel() const { return *panel_; }
  TrainRange range() const { return range_; }
  int batch() const { return batch_; }                    // train.windows_per_step(panel().N)
  const GatherParams& gather() const { return gather_; }  // gather_params(train(), panel(), range())
  // This member on `panel`, a panel of the shape it was checked on (N, T, F, K): a fold's prepared panel, checked
  // through the raw one it was made from. Its plan is the same but for the panel it reads.
  Member on(const Panel& panel) const;

 private:
  friend Member plan_member(const ModelConfig& mc, const TrainConfig& tc, const Panel& data, TrainRange range);
  Member() = default;
  ModelConfig mc_;
  TrainConfig tc_;
  const Panel* panel_ = nullptr;
  TrainRange range_;
  int batch_ = 0;
  GatherParams gather_;
};
// validate_training, then the member's plan.
Member plan_member(const ModelConfig& mc, const TrainConfig& tc, const Panel& data, TrainRange range = {});

// The gather of a step on a panel of N instruments × T steps (F features, K targets): train.batch windows, or
// train.dates cross-sections of tc.cross_section(N) instruments (src/data/sampler.h).
GatherParams gather_params(const TrainConfig& tc, int N, int T, int F, int K);
// The same over the range [range.begin, end) of `data`, read in place (GatherParams::t_begin, row_stride).
GatherParams gather_params(const TrainConfig& tc, const Panel& data, TrainRange range);
// "train.batch = 16", or "train.batch = \"time\" (4 train.dates × 16 instruments)", for messages.
std::string batch_text(const TrainConfig& tc, int N);

// Bytes a trainer allocates for its whole run, by part. Doubles: a config far too large still gets an
// exact-enough figure for the message instead of a wrapped size_t.
struct MemoryEstimate {
  double params = 0;       // weights, gradients, AdamW m and v (4 floats each) and the decay mask (1 byte each)
  double activations = 0;  // what forward saves for backward plus backward's gradients of activations
  double workspaces = 0;   // op scratch and the side stream's cuBLASLt workspace
  double dataset = 0;      // the device copy of the panel (GPU) x (N, T, F) and y (N, T, K)
  double batch = 0;        // the gathered batch xb (B, L, F), yb (B, L, K)
  double other = 0;        // norm partials, step state, the step-record ring
  double prediction = 0;   // (GPU) validation and test predictions: the kept rows of a panel, the window
                           // table, a second set of weights (the best ones) and its bf16 copy; (both) with
                           // train.state = "carry", the forward model of mode carry's tiles
  double total() const { return params + activations + workspaces + dataset + batch + other + prediction; }
};

// Floats of the activation buffers a model holds per row of a batch (B·L rows) in `precision`: what forward saves
// for backward and backward's gradients of activations, as GpuModel (and RefModel) allocate them. xbc16: the conv
// output xbc and the gated norm's dy in bf16 (GpuModel in bf16 where the SSD takes the walks, gpu::ssd_uses_walk: a
// rule of the shape that the GPU-side estimate asks, train_plan_gpu.cpp); false (the CPU side, which cannot ask it)
// counts them in fp32, conservative by 2 bytes a conv channel a row a layer and 2 a d_inner channel a row.
double activation_floats_per_row(const ModelConfig& c, Precision precision, bool xbc16 = false);

// The GPU trainer's device memory (GPU code: train_plan_gpu.cpp; GpuTrainer's arena, GpuModel's buffers, the dataset
// copy, the batch and the ring of `ring_slots` records), for a panel of N instruments × T steps. mc and tc are valid
// (a Member's, or checked by the caller: the estimates check nothing).
MemoryEstimate estimate_gpu_training(const ModelConfig& mc, const TrainConfig& tc, int N, int T, int ring_slots);
// The CPU trainer's host memory beyond the panel of N instruments it reads in place (weights, AdamW state,
// activations and scratch of the fast model on compute.threads() threads, or of the reference model).
MemoryEstimate estimate_cpu_training(const ModelConfig& mc, const TrainConfig& tc, int N, const Compute& compute = {});

// Throws mlalpha::Error when `need` exceeds `available` bytes, e.g. "the GPU training step needs 93.1 GiB
// (activations 80.2 GiB for train.batch = 4096 × train.seq_len = 2048, ...), the GPU has 79.3 GiB free;
// reduce train.batch or train.seq_len". `where` names the memory ("the GPU", "this machine").
void check_memory(const MemoryEstimate& need, const TrainConfig& tc, int N, int T, double available,
                  const char* what, const char* where);
// Free device memory of the current device (GPU code: cudaMemGetInfo).
double gpu_free_bytes();
// Memory available to a new allocation: MemAvailable of /proc/meminfo (else sysconf's free pages), at most the
// address space RLIMIT_AS leaves (ulimit -v) and what the cgroup's memory.max (v1: memory.limit_in_bytes) leaves.
double host_available_bytes();

// "93.1 GiB", "512.0 MiB", "12 B".
std::string format_bytes(double bytes);

}  // namespace mlalpha

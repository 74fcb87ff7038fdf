#pragma once
// The perception model advanced one bar at a time for I instruments (DESIGN section 7, "Streaming", `carry`):
// per layer and instrument a conv window (W − 1 rows of conv_dim) and an SSM state (H, P, N), fp32. A bar
// takes one row x (I, F) and returns out (I, K), which equals the full-sequence forward's output at the
// instrument's next position (the forward over the instrument's present rows; tests/cpu/test_model_step.cpp).
//
// Rows and the NaN rule (docs/decisions.md, "Streaming: presence and the NaN rule"):
//   - instrument i is present at a bar when mask[i] != 0 (mask null: every instrument) and at least one of its
//     features is finite. An absent instrument's state is left untouched and its outputs are NaN.
//   - a present row's non-finite features count as 0 (the panel path's fill value) before the input projection.
// State: StepState below, plain arrays; a stepper restored from an exported state continues bit-exactly.
//
// CpuStepper: fp32 on the host, blocks of instruments on a thread pool (each instrument's bits do not depend on
// the split or the thread count); the fast kernels of ops/mamba_step/mamba_step_cpu.h, or the reference ops.
// Move-only.
// GpuStepper (model_step_gpu.h): the same bar as one CUDA graph.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "ops/mamba_step/mamba_step_cpu.h"
#include "cpu/thread_pool.h"
#include "model/layout.h"
#include "ops/mamba_step/mamba_step.h"

namespace mlalpha {

// The dimensions of a bar of I instruments of this model.
StepDims step_dims(const ModelConfig& cfg, int instruments);

// A stepper's state as plain arrays, layer-major: conv (NL, I, W − 1, conv_dim), the last W − 1 pre-conv
// xBC rows of each instrument, oldest first (zeros before its first row); ssm (NL, I, H, P, N). The shape fields
// say what the arrays hold, so a state is checked against the model before it is used.
struct StepState {
  int layers = 0, instruments = 0;
  int conv_rows = 0, conv_dim = 0;         // W − 1, conv_dim
  int heads = 0, head_dim = 0, d_state = 0;  // H, P, N
  std::vector<float> conv, ssm;

  // The zero state (no row seen yet) of `instruments` instruments of this model.
  static StepState zeros(const ModelConfig& cfg, int instruments);
  size_t conv_per_instrument() const { return size_t(conv_rows) * conv_dim; }
  size_t ssm_per_instrument() const { return size_t(heads) * head_dim * d_state; }
  // Throws naming the first field that differs from this model's, or arrays of the wrong length, or a
  // non-finite value (no state a stepper writes has one).
  void check(const ModelConfig& cfg) const;
  // Instrument j of the result is instrument from[j] of this state, or a fresh zero state where from[j] = −1
  // (add, remove, reorder instruments). Throws on an index outside [−1, instruments).
  StepState remapped(std::span<const int> from) const;
  // Zeroes the given instruments' state (each index in [0, instruments)).
  void reset(std::span<const int> which);
};

struct CpuStepperOptions {
  int threads = 0;         // instruments are split over this many threads (1 to 64); 0: every available CPU, at most 64
                           // (CpuOptions' rule; a run passes its resolved Compute::threads())
  bool reference = false;  // the reference ops (bit for bit RefModel<float>'s arithmetic) instead of the fast
                           // kernels (ops/mamba_step/mamba_step_cpu.h: fused multiply-adds on AVX2, equal within
                           // fp32 rounding)
  // A pool shared with other steppers or models that run in turn, never at once (an ensemble's members): it must
  // outlive the stepper, and `threads` is then not used.
  cpu::ThreadPool* pool = nullptr;
};

// What a stream's carry engine asks of a stepper (CpuStepper here, GpuStepper in model_step_gpu.h): one bar, and
// the state to save, restore and re-map.
class Stepper {
 public:
  virtual ~Stepper() = default;
  virtual void step(const float* x, const uint8_t* mask, float* out) = 0;
  virtual void reset(std::span<const int> which) = 0;
  virtual void remap(std::span<const int> from) = 0;
  virtual StepState export_state() const = 0;
  virtual void import_state(const StepState& s) = 0;
};

class CpuStepper : public Stepper {
 public:
  // params: the trained fp32 arena (layout.table.total() floats), copied.
  CpuStepper(const ModelLayout& layout, std::span<const float> params, int instruments,
             CpuStepperOptions options = {});

  int instruments() const { return state_.instruments; }
  const ModelConfig& config() const { return lay_.cfg; }

  // x (I, F), mask (I) or null, out (I, K): one bar (see the rules above).
  void step(const float* x, const uint8_t* mask, float* out) override;

  void reset();                         // every instrument back to the zero state
  void reset(std::span<const int> which) override;
  StepState export_state() const override { return state_; }
  // Takes the state's instrument count. Checked before anything changes.
  void import_state(const StepState& s) override;
  // Instrument j becomes old instrument from[j] (−1: a new one with the zero state).
  void remap(std::span<const int> from) override;

 private:
  // One worker's activations for a block of up to kMaxBlockRows instruments.
  struct Scratch {
    std::vector<float> x, h, hn, rstd, zx, xbc, delta, y, gout, grstd, head, acc;
    std::vector<uint8_t> present;
  };
  // Instruments a task runs through the model together: each weight matrix is streamed once a block. Every row's
  // bits are its own whatever the block (both kernel sets sum each output in a fixed per-row order), so the
  // blocks are sized for the thread count (step()).
  static constexpr int kMaxBlockRows = 64;
  void prepare_rows(int first, int rows, const float* x, const uint8_t* mask, Scratch& s) const;
  void rows_reference(int first, int rows, Scratch& s);
  void rows_fast(int first, int rows, Scratch& s);
  void write_rows(int first, int rows, const Scratch& s, float* out) const;

  ModelLayout lay_;
  StepDims dims_;                   // with I = 1: the per-row shapes
  std::vector<float> P_;            // the weights (table.total())
  bool reference_;
  // Reference kernels: Linear weights transposed to (IN, OUT), so a row's outputs accumulate along contiguous
  // memory. Fast kernels: packed panels, and the conv weights transposed to (W, conv_dim).
  std::vector<float> in_wT_, head_wT_;
  std::vector<std::vector<float>> in_proj_wT_, out_proj_wT_;  // per layer
  cpu::PackedLinear in_fast_, head_fast_;
  std::vector<cpu::PackedLinear> in_proj_fast_, out_proj_fast_;
  std::vector<std::vector<float>> conv_wT_;
  StepState state_;
  std::unique_ptr<cpu::ThreadPool> own_pool_;  // unless the options gave one
  cpu::ThreadPool* pool_ = nullptr;
  std::vector<Scratch> scratch_;  // one per worker
};

}  // namespace mlalpha

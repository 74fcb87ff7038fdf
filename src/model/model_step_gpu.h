#pragma once
// The perception model advanced one bar at a time on the GPU (model_step.h gives the semantics, the NaN rule
// and the state; CpuStepper is its oracle). Every buffer is allocated when the stepper is made (or resized);
// a bar is one captured CUDA graph of 2 + 3·NL kernels (ops/mamba_step/mamba_step.h), or with
// GpuStepperOptions::fused of NL + 2 (the input projection, one fused kernel a layer, the head;
// ops/mamba_step/step_fused.cu), replayed per bar. The only host traffic is the row in and the predictions out,
// both in pinned host memory: the row and the mask are copied to the device by one memcpy as the bar starts (a
// node of the graph), the last kernel writes the predictions into host memory mapped into the device. fp32
// throughout: the state,
// the element-wise math and the projections (3xTF32 on the tensor cores, fp32 accuracy).
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/cuda_graph.h"
#include "core/device_buffer.h"
#include "core/mapped_buffer.h"
#include "model/model_step.h"

namespace mlalpha {

struct GpuStepperOptions {
  bool graph = true;  // the bar as one captured CUDA graph; false: the same kernels launched one by one
  bool pdl = true;    // programmatic dependent launch between the bar's kernels (used on sm_90 and newer)
  // One kernel a layer (a thread-block cluster of the heads per 8 or 4 instruments) where the model and the device
  // allow it (fused_step_unsupported; where they do not, fused_refusal() says why and the three kernels run).
  // Not the default: measured on an H100 (docs/benchmarks.md, "The i38-int stack measured") it is faster at 1 and
  // 100 instruments (S 63 vs 77 and 97 vs 134 µs a bar) but 1.4× slower at 5000, and the path must not depend on
  // the instrument count (the two are within fp32 rounding of the CPU stepper, not the same bits).
  bool fused = false;
};

class GpuStepper : public Stepper {
 public:
  // params: the trained fp32 arena on the host (layout.table.total() floats), copied to the device.
  GpuStepper(Context& ctx, const ModelLayout& layout, std::span<const float> params, int instruments,
             GpuStepperOptions options = {});

  int instruments() const { return I_; }
  const ModelConfig& config() const { return lay_.cfg; }
  bool uses_pdl() const { return pdl_; }
  bool uses_fused() const { return fused_; }
  int kernels_per_bar() const { return fused_ ? lay_.cfg.NL + 2 : 2 + 3 * lay_.cfg.NL; }
  // Why the fused layer is not used although asked for (empty when it is used or was not asked for).
  const std::string& fused_refusal() const { return fused_refusal_; }

  // x (I, F), mask (I) or null, out (I, K), all host memory: one bar; returns when out is written.
  void step(const float* x, const uint8_t* mask, float* out) override;

  // step() in pieces, for a caller that overlaps host work with the bar: write the row into x_in() and
  // mask_in() (pinned), launch(), then after wait() read out(). Write the next row only after wait(): the bar
  // copies both when it starts on the device, which may be after launch() returns.
  float* x_in() { return const_cast<float*>(row_in_.host()); }  // (I, F)
  uint8_t* mask_in() { return reinterpret_cast<uint8_t*>(x_in() + size_t(I_) * lay_.cfg.F); }  // (I)
  void launch();
  void wait() const { ctx_.synchronize(); }
  const float* out() const { return const_cast<const float*>(out_.host()); }  // (I, K)

  void reset();
  void reset(std::span<const int> which) override;
  StepState export_state() const override;
  // Takes the state's instrument count (reallocating and recapturing when it differs). Checked first.
  void import_state(const StepState& s) override;
  void remap(std::span<const int> from) override;

 private:
  void allocate(int instruments);  // the per-instrument buffers, then the graph
  void enqueue();                  // the bar's kernels on the context's stream

  Context& ctx_;
  ModelLayout lay_;
  GpuStepperOptions opt_;
  bool pdl_ = false;
  bool fused_ = false;
  std::string fused_refusal_;
  int I_ = 0;
  DeviceBuffer<float> params_, w_inT_;  // the weights (table.total()); input_proj.weight transposed (F, D)
  DeviceBuffer<float> fused_w_;         // per layer: in_proj then out_proj, packed (pack_fused_weights)
  std::vector<StepLayerWeights> layer_w_;
  DeviceBuffer<float> conv_, ssm_;      // (NL, I, W−1, cd), (NL, I, H, P, N)
  DeviceBuffer<float> h_, zxo_, v_, ss_;
  DeviceBuffer<uint8_t> present_;
  // The row then the mask (I·F floats, then I bytes): pinned on the host (row_in_) and its device copy (row_), one
  // contiguous range, so one copy a bar.
  MappedBuffer<float> row_in_, out_;
  DeviceBuffer<float> row_;
  CudaGraphExec graph_;
};

}  // namespace mlalpha

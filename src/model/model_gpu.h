#pragma once
// The perception model on the GPU (DESIGN section 1), the same computation as RefModel<float>:
// forward saving what backward needs, the masked loss kept on the device, and backward accumulating
// into the flat gradient arena. Every buffer is allocated once in the constructor, for a fixed (B, L);
// forward/loss/backward only launch work on the context's stream. They can be captured in a CUDA graph
// after one eager pass: that pass creates the cuBLASLt plans, whose creation allocates (GpuTrainer runs
// its first step eagerly for this reason).
#include <memory>
#include <vector>

#include "core/context.h"
#include "core/device_buffer.h"
#include "core/side_stream.h"
#include "model/layer_shapes.h"
#include "model/layout.h"
#include "ops/linear/linear.h"

#include <cuda_bf16.h>
#include "ops/loss/loss.h"

namespace mlalpha {

// What a model is built for. kForward (predict, stream, evaluation): forward() and loss() only, without the
// backward's parameter partials (GradPartials: S bf16 31 MB, M 80 MB, mostly the weight gradients' K-split
// partials); backward() refuses. kTrain allocates them in the constructor, outside any graph capture.
enum class ModelUse { kTrain, kForward };

class GpuModel {
 public:
  GpuModel(Context& ctx, const ModelLayout& layout, int B, int L, Precision precision = Precision::FP32,
           ModelUse use = ModelUse::kTrain);

  // params (table.total()), x (B, L, F): both device memory; x must stay valid until backward().
  // params16 (table.total()): the weights in bf16 (the optimizer's copy), required in BF16 precision and
  // ignored otherwise; it must stay valid until backward().
  // carry (train.state = "carry"; model/layer_shapes.h), when non-null: device pointers to the in states (a null
  // one: zeros) and the out states, which may be the in buffers themselves: the in states are copied into the
  // model's own buffers first (the backward recomputes the conv's pre-activation from window0; the SSD saves h0
  // as its first chunk state), so nothing but the out states is written and nothing needs to outlive the call.
  // Null: no state (today's forward, the same launches).
  // x16_written (BF16): input16() already holds x rounded to bf16 (the sampler wrote it), so no cast runs.
  void forward(const float* params, const float* x, const __nv_bfloat16* params16 = nullptr,
               const CarryState<float>* carry = nullptr, bool x16_written = false);
  // BF16: the model's bf16 copy of x (B, L, F), for a sampler to write along with x; null in other precisions.
  __nv_bfloat16* input16() { return x16_.data(); }
  // y (B, L, K) device targets; loss() (1) and count() (1) stay in device memory. loss_out (1), when
  // non-null, receives the loss instead of loss_value() (a population keeps one per member).
  void loss(const float* y, const LossParams& lp, float* loss_out = nullptr);
  // grads (table.total()) += ∂loss/∂params; dx (B, L, F) = ∂loss/∂x when non-null. params16 as in forward.
  void backward(const float* params, float* grads, float* dx, const __nv_bfloat16* params16 = nullptr);
  Precision precision() const { return gemm_.precision; }

  const float* out() const { return out_.data(); }  // (B, L, K)
  const float* loss_value() const { return loss_.data(); }
  const int* count() const { return count_.data(); }
  int B() const { return B_; }
  int L() const { return L_; }
  // G: windows per cross-section (TrainConfig::cross_section), used by the IC loss.
  LossParams loss_params(const TrainConfig& tc, int G) const;
  // Activation + op scratch memory held, in bytes (GpuTrainer::activation_bytes(); estimate_gpu_training()
  // predicts it before anything is allocated, and test_trainer_gpu checks that the two agree).
  size_t activation_bytes() const { return bytes_; }
  // Bytes of the backward's parameter partials held (0 for ModelUse::kForward), part of activation_bytes().
  size_t partials_bytes() const { return partials_.bytes(); }

 private:
  using bf16 = __nv_bfloat16;
  struct LayerActs {
    // h_in (M, D): the layer's input h_l, written by the previous layer's out_proj (by the input
    // projection for l = 0) and read in place by this layer's forward and backward.
    DeviceBuffer<float> h_in, hn, rstd, zx, xbc, delta, y, gout, grstd, states;
    // BF16: hn (M, D) and gout (M, di) are only GEMM operands, so they are stored in bf16 instead; in_proj writes
    // zx (M, proj) in bf16 (zx16), which conv, softplus and the gated norm read as bf16; y (M, di) in bf16 (y16),
    // which the SSD writes and the gated norm alone reads. xbc (M, conv_dim) in bf16 (xbc16) instead of xbc where
    // the SSD takes the walks (xbc16_): the conv writes it, the walks alone read it (their tiles are bf16 anyway).
    DeviceBuffer<bf16> hn16, gout16, zx16, y16, xbc16;
  };
  // BF16 and the SSD on the walks (gpu::ssd_uses_walk of the layer's shape, the same for every layer): xbc in bf16,
  // and the gated norm's dy (dy16_), the reverse walk's other staged input. A rule of the shape and precision only,
  // as the memory estimate's (train/train_plan_gpu.cpp).
  bool xbc16_ = false;
  DeviceBuffer<float> alloc(size_t n);
  DeviceBuffer<bf16> alloc16(size_t n);
  bool is_bf16() const { return gemm_.precision == Precision::BF16; }
  // A GEMM operand in both precisions' buffers; the model's precision picks which one is read (the other
  // is an empty buffer's null).
  struct Operand {
    const float* f32 = nullptr;
    const bf16* b16 = nullptr;
  };
  void linear_fwd(gpu::Gemm& g, const LinearParams& p, Operand x, size_t w_off, const float* b, const float* r,
                  float* y, cudaStream_t st);
  void linear_bwd(gpu::Gemm& g, const LinearParams& p, Operand x, size_t w_off, Operand dy,
                  const LinearGrads<float>& grads, cudaStream_t st, float* db_part = nullptr,
                  float* dw_part = nullptr);
  // h_l (M, D), the residual stream entering layer l: acts_[l].h_in for l < NL, h_ for l = NL.
  float* resid(int l);

  Context& ctx_;
  const ModelLayout& lay_;
  int B_, L_, M_;
  size_t bytes_ = 0;
  gpu::Gemm gemm_;
  // The layers' weight-gradient GEMMs run on a side stream, overlapping the backward's other work (see
  // backward()), with their own GEMM engine and workspace so that they share no scratch with the main stream.
  SideStream side_;
  DeviceBuffer<unsigned char> side_ws_;
  gpu::Gemm gemm_side_;
  const float* x_ = nullptr;
  const float* P_ = nullptr;   // the weights of the current forward / backward (table.total())
  const bf16* P16_ = nullptr;  // their bf16 copy (BF16)
  std::vector<LayerActs> acts_;
  DeviceBuffer<float> h_, hfn_, rstdf_, out_, dout_, loss_;  // h_ (M, D): h_NL, the final norm's input
  DeviceBuffer<int> count_;
  DeviceBuffer<float> dhfn_, dh_, dg_, dy_, dzx_, dxbc_, ddelta_, dhn_, ws_;
  DeviceBuffer<float> partials_;  // GradPartials(shapes, NL, precision).total: the backward's parameter partials;
                                  // empty for ModelUse::kForward
  gpu::ColsumBatch colsums_;      // their sums, recorded by the ops and run at the end of backward()
  // BF16 only: hfn (M, D) and dzx (M, proj) in bf16 instead of hfn_ and dzx_ (GEMM operands only), out_proj's
  // dx dg (M, di) in bf16 instead of dg_ (the gated norm's backward reads it as bf16), and the bf16 copies of the
  // GEMM operands x (M, F), dout (M, K), dh (M, D). Where xbc16_: the gated norm's dy (M, di) in bf16 (dy16_)
  // instead of dy_, read by the reverse walk alone (its dy tile is bf16 anyway).
  DeviceBuffer<bf16> hfn16_, x16_, dout16_, dh16_, dzx16_, dg16_, dy16_;
  bool dout16_written_ = false;  // the last loss() wrote dout16_ (BF16, MSE / Huber without a row map)
  // the last loss() wrote the head bias's partials into partials_ (K = 1, MSE / Huber without a row map, kTrain)
  bool head_db_written_ = false;
  // Carry: the conv's in windows of the current forward, copied (the out windows may overwrite the caller's in
  // buffer, and the conv's window_last must not be its window0). The SSM's h0 needs no copy: ssd_fwd saves it as
  // the first chunk state, which ssd_bwd reads, and its h_last may be its h0. Allocated by the first forward that
  // carries (an eager one: GpuTrainer runs its first step eagerly), not counted in activation_bytes(); a forward
  // without carry leaves carried_ false and the backward reads no window.
  DeviceBuffer<float> conv_in_;  // (NL, B, W − 1, conv_dim)
  bool carried_ = false;
  // The last forward's present rows (CarryState::rows, dates: device pointers the caller keeps until backward();
  // null: every lane full) and, allocated by the first forward with them, out and dout in date order.
  RowMap map_;
  DeviceBuffer<float> outd_, doutd_;  // (B, L, K)
};

}  // namespace mlalpha

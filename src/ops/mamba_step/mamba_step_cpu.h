#pragma once
// The fast CPU path's pieces of a streamed bar (model/model_step.h: CpuStepper's default kernels): a Linear
// over a block of rows with its weight packed in panels, the conv step and the SSM step, in fused multiply-adds
// on AVX2 vectors. They compute what the references compute (ref::linear_fwd, ref::conv_step, ref::ssd_step)
// in another order and with fused roundings: equal within fp32 rounding (tests/cpu/test_model_step.cpp), not
// bit for bit.
//
// The rule that lets a stepper group instruments freely: every row's result is a fixed sequence of operations
// on that row alone (its own accumulators, the same order for every row), so which rows share a call, and how
// many, changes no bit of any row; a stepper's outputs do not depend on its thread count or block size.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "ops/mamba_step/mamba_step.h"

namespace mlalpha::cpu {

// A Linear's weight W (OUT, IN) packed in panels of kPanel outputs, (⌈OUT/kPanel⌉, IN, kPanel) with the outputs
// past OUT zero, so a block of rows streams each panel once from memory and then from L1.
class PackedLinear {
 public:
  static constexpr int kPanel = 16;
  PackedLinear() = default;
  // w (OUT, IN) row-major, bias (OUT) or null; both copied.
  PackedLinear(const float* w, const float* bias, int out, int in);

  int in() const { return in_; }
  int out() const { return out_; }
  // y (M, ldy), first OUT columns: x (M, ldx)·Wᵀ + bias, or y += x·Wᵀ when add (the product summed from 0 and
  // then added, as ref::linear_fwd_add; the bias is not used). Each output: the bias (or 0), then
  // fma(x[i], W[o, i], ·) for i = 0 … IN − 1 in order.
  void apply(int M, const float* x, int ldx, float* y, int ldy, bool add) const;

 private:
  int in_ = 0, out_ = 0, panels_ = 0;
  std::vector<float> w_;     // (panels, IN, kPanel)
  std::vector<float> bias_;  // (panels · kPanel), empty without a bias
};

// ref::conv_step with the weight transposed: wT (W, C) (the weight (C, W) transposed), bias (C);
// xnew (M, ld_x)→(C); window (M, W − 1, C), shifted where commit[m] != 0 (null: every row); y (M, C) written.
// Each channel: bias, then fma over the taps oldest first, then SiLU (vmath.h's).
void conv_step(int M, int C, int W, int ld_x, const float* xnew, const float* wT, const float* bias, float* window,
               float* y, const uint8_t* commit);

// ref::ssd_step (same arguments): state (M, H, P, N) ← exp(Δ A) state + Δ x Bᵀ where commit[m] != 0,
// y (M, H, P) = state C + D x from the advanced state either way. Each state row's sum over n runs in 8 lanes
// (lane j takes n ≡ j mod 8 below ⌊N/8⌋·8), the lanes added in a fixed tree, then the tail n in order.
void ssd_step(const StepDims& d, int M, int ld, const float* x, const float* delta, const float* A_log,
              const float* Bm, const float* Cm, const float* Dskip, float* state, float* y, const uint8_t* commit);

}  // namespace mlalpha::cpu

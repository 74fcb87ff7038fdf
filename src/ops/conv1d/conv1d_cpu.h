#pragma once
// The causal depthwise conv1d + SiLU on the CPU, fast, with the weight transposed.
// The fast CPU path's kernels of this op (docs/decisions.md, "The fast CPU path"): the formulas of its reference
// (ref::, the oracle) over a range of rows, so the model hands fixed row blocks to the ThreadPool; a parameter
// gradient's block partial is written, never accumulated (cpu/rows.h).
#include "cpu/rows.h"
#include "ops/conv1d/conv1d.h"

namespace mlalpha::cpu {

// The causal depthwise conv + bias + SiLU (conv1d.h) with its weight transposed, so the loops run along
// channels. Row r is time t = r mod L of its sequence.
struct ConvInputsT {
  const float* x = nullptr;     // (B, L, ld_x) first C columns used
  const float* wT = nullptr;    // (W, C) the weight (C, W) transposed
  const float* bias = nullptr;  // (C)
  const float* window0 = nullptr;  // (B, W−1, C) the inputs before t = 0 (Conv1dInputs::window0); null: zeros
  float* window_last = nullptr;    // (B, W−1, C) written when non-null (Conv1dInputs::window_last)
};
// y (M, C) written; in.window_last's rows written by the rows of the block that own them (row t = 0 of a
// sequence writes what comes from window0 when L < W − 1, row t ≥ L − (W−1) its own input), so every block
// together write it once.
void conv_silu_fwd(Rows rows, const Conv1dParams& p, const ConvInputsT& in, float* y);
// dpre (M, C) = dy · SiLU'(pre) (pre recomputed) written; g.dw (W, C: transposed!) = this block's
// Σ_t dpre[t] x[t − W + 1 + k], g.dbias (C) = Σ_t dpre[t], written; g.dx is not touched (conv_bwd_dx).
void conv_silu_bwd_pre(Rows rows, const Conv1dParams& p, const ConvInputsT& in, const float* dy, float* dpre,
                       const Conv1dGrads<float>& g);
// dx (M, ld_x) first C columns = Σ_k w[c, k] dpre[t + W − 1 − k] within the sequence; reads other blocks'
// dpre, so it runs after conv_silu_bwd_pre has covered every row.
void conv_bwd_dx(Rows rows, const Conv1dParams& p, const float* wT, const float* dpre, float* dx);
// g.dwindow0 (B, W−1, C) of every sequence whose row t = 0 is in rows = Σ_k w[c, k] dpre[j − k] (window row j is
// input time j − (W−1)); after conv_silu_bwd_pre, like conv_bwd_dx. Nothing when g.dwindow0 is null.
void conv_bwd_dwindow0(Rows rows, const Conv1dParams& p, const float* wT, const float* dpre,
                       const Conv1dGrads<float>& g);

}  // namespace mlalpha::cpu

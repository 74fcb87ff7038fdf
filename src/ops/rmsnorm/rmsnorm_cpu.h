#pragma once
// RMSNorm on the CPU, fast: y = x · rsqrt(mean(x²) + eps) ⊙ w and its backward.
// The fast CPU path's kernels of this op (docs/decisions.md, "The fast CPU path"): the formulas of its reference
// (ref::, the oracle) over a range of rows, so the model hands fixed row blocks to the ThreadPool; a parameter
// gradient's block partial is written, never accumulated (cpu/rows.h).
#include "cpu/rows.h"
#include "ops/rmsnorm/rmsnorm.h"

namespace mlalpha::cpu {

// RMSNorm: y (M, D) = x · rsqrt(mean(x²) + eps) ⊙ w, rstd (M).
void rmsnorm_fwd(Rows rows, const RmsNormParams& p, const RmsNormInputs<float>& in, float* y, float* rstd);
// g.dx (M, D) written (or added to when accumulate) = r w dy − x r³/D Σ dy w x; g.dw (D) = this block's
// Σ dy x r, written.
void rmsnorm_bwd(Rows rows, const RmsNormParams& p, const RmsNormInputs<float>& in, const float* rstd,
                 const float* dy, const RmsNormGrads<float>& g, bool accumulate);

}  // namespace mlalpha::cpu

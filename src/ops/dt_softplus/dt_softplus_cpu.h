#pragma once
// Δ = clamp(softplus(dt + dt_bias)) on the CPU, fast, and its backward.
// The fast CPU path's kernels of this op (docs/decisions.md, "The fast CPU path"): the formulas of its reference
// (ref::, the oracle) over a range of rows, so the model hands fixed row blocks to the ThreadPool; a parameter
// gradient's block partial is written, never accumulated (cpu/rows.h).
#include "cpu/rows.h"
#include "ops/dt_softplus/dt_softplus.h"

namespace mlalpha::cpu {

// Δ (M, H) = clamp(softplus(dt + dt_bias), lo, hi).
void dt_fwd(Rows rows, const DtParams& p, const DtInputs<float>& in, float* delta);
// ddelta (M, H) → g.ddt (M, ld_dt) first H columns written; g.ddt_bias (H) = this block's sum, written.
void dt_bwd(Rows rows, const DtParams& p, const DtInputs<float>& in, const float* ddelta, const DtGrads<float>& g);

}  // namespace mlalpha::cpu

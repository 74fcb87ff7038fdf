#pragma once
// Gated RMSNorm on the CPU, fast, and its backward.
// The fast CPU path's kernels of this op (docs/decisions.md, "The fast CPU path"): the formulas of its reference
// (ref::, the oracle) over a range of rows, so the model hands fixed row blocks to the ThreadPool; a parameter
// gradient's block partial is written, never accumulated (cpu/rows.h).
#include "cpu/rows.h"
#include "ops/gated_rmsnorm/gated_rmsnorm.h"

namespace mlalpha::cpu {

// Gated RMSNorm (gated_rmsnorm.h): u = y ⊙ SiLU(z), out (M, Dn) = u · rsqrt(mean_group(u²) + eps) ⊙ w,
// rstd (M, G).
void gated_fwd(Rows rows, const GatedNormParams& p, const GatedNormInputs<float>& in, float* out, float* rstd);
// dout (M, Dn) → g.dy (M, Dn), g.dz (M, ld_z) first Dn columns written; g.dw (Dn) = this block's sum, written.
void gated_bwd(Rows rows, const GatedNormParams& p, const GatedNormInputs<float>& in, const float* rstd,
               const float* dout, const GatedNormGrads<float>& g);

}  // namespace mlalpha::cpu

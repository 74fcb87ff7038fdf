#pragma once
// The fast CPU path's elementwise and row-reduction kernels (DESIGN section 1 ops; the formulas are those
// of the CPU references in src/ops/*/*_ref.cpp, and so are the parameter and input structs), each over a
// range of rows of an (M, ·) activation so the model can hand fixed row blocks to the ThreadPool. A
// parameter gradient is never accumulated across blocks here: where the op's Grads struct says "+=", these
// kernels write the block's partial instead (=), and the model adds the partials in block order
// (reduce_partials), which keeps the bits independent of the thread count.
#include <cstddef>

#include "ops/conv1d/conv1d.h"
#include "ops/dt_softplus/dt_softplus.h"
#include "ops/gated_rmsnorm/gated_rmsnorm.h"
#include "ops/rmsnorm/rmsnorm.h"

namespace mlalpha::cpu {

class ThreadPool;

// Rows per block of every row-parallel op (fixed: the partials, hence the bits, do not depend on threads).
constexpr int kRowBlock = 64;

// Rows [begin, end) of an (M, ·) activation.
struct Rows {
  int begin, end;
};

// RMSNorm: y (M, D) = x · rsqrt(mean(x²) + eps) ⊙ w, rstd (M).
void rmsnorm_fwd(Rows rows, const RmsNormParams& p, const RmsNormInputs<float>& in, float* y, float* rstd);
// g.dx (M, D) written (or added to when accumulate) = r w dy − x r³/D Σ dy w x; g.dw (D) = this block's
// Σ dy x r, written.
void rmsnorm_bwd(Rows rows, const RmsNormParams& p, const RmsNormInputs<float>& in, const float* rstd,
                 const float* dy, const RmsNormGrads<float>& g, bool accumulate);

// The causal depthwise conv + bias + SiLU (conv1d.h) with its weight transposed, so the loops run along
// channels. Row r is time t = r mod L of its sequence.
struct ConvInputsT {
  const float* x = nullptr;     // (B, L, ld_x) first C columns used
  const float* wT = nullptr;    // (W, C) the weight (C, W) transposed
  const float* bias = nullptr;  // (C)
};
// y (M, C) written.
void conv_silu_fwd(Rows rows, const Conv1dParams& p, const ConvInputsT& in, float* y);
// dpre (M, C) = dy · SiLU'(pre) (pre recomputed) written; g.dw (W, C: transposed!) = this block's
// Σ_t dpre[t] x[t − W + 1 + k], g.dbias (C) = Σ_t dpre[t], written; g.dx is not touched (conv_bwd_dx).
void conv_silu_bwd_pre(Rows rows, const Conv1dParams& p, const ConvInputsT& in, const float* dy, float* dpre,
                       const Conv1dGrads<float>& g);
// dx (M, ld_x) first C columns = Σ_k w[c, k] dpre[t + W − 1 − k] within the sequence; reads other blocks'
// dpre, so it runs after conv_silu_bwd_pre has covered every row.
void conv_bwd_dx(Rows rows, const Conv1dParams& p, const float* wT, const float* dpre, float* dx);

// Δ (M, H) = clamp(softplus(dt + dt_bias), lo, hi).
void dt_fwd(Rows rows, const DtParams& p, const DtInputs<float>& in, float* delta);
// ddelta (M, H) → g.ddt (M, ld_dt) first H columns written; g.ddt_bias (H) = this block's sum, written.
void dt_bwd(Rows rows, const DtParams& p, const DtInputs<float>& in, const float* ddelta, const DtGrads<float>& g);

// Gated RMSNorm (gated_rmsnorm.h): u = y ⊙ SiLU(z), out (M, Dn) = u · rsqrt(mean_group(u²) + eps) ⊙ w,
// rstd (M, G).
void gated_fwd(Rows rows, const GatedNormParams& p, const GatedNormInputs<float>& in, float* out, float* rstd);
// dout (M, Dn) → g.dy (M, Dn), g.dz (M, ld_z) first Dn columns written; g.dw (Dn) = this block's sum, written.
void gated_bwd(Rows rows, const GatedNormParams& p, const GatedNormInputs<float>& in, const float* rstd,
               const float* dout, const GatedNormGrads<float>& g);

// part (n) = Σ_rows a[r·lda + i] (a bias gradient's block partial), written.
void colsum(Rows rows, int n, const float* a, int lda, float* part);

// out (n) += Σ_b part[b·n + i] for b in [0, blocks), in block order; parallel over fixed column ranges.
void reduce_partials(ThreadPool& pool, const float* part, int blocks, int n, float* out);

}  // namespace mlalpha::cpu

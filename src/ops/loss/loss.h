#pragma once
// Masked regression loss (DESIGN section 1):
//   loss = Σ m·ℓ(out − y) / max(1, Σ m),  ℓ(e) = e² (MSE) or Huber_δ(e) = ½e² if |e| ≤ δ else δ(|e| − ½δ);
//   m = 0 for NaN targets and for positions t < burn_in.
// Cross-sectional IC loss (kind IC, train.loss = "ic"; B = (B / G) cross-sections of G windows, date-major,
// src/data/sampler.h). Group (g, l, k), g < B / G, l < L, k < K, has the members i < G at element
// ((g·G + i)·L + l)·K + k; its valid set V holds the i with a finite target, empty when l < burn_in; n = |V|.
// A group counts when n >= 3. Over V:
//   p̄ = Σ p_i / n,  ȳ = Σ y_i / n,  a_i = p_i − p̄,  c_i = y_i − ȳ,
//   S_pp = Σ a_i²,  S_yy = Σ c_i²,  S_py = Σ a_i c_i,  A = S_pp + n·ε,  C = S_yy + n·ε,  ε = kIcEps,
//   ρ = S_py / √(A·C)                       (Pearson's correlation with a floor ε on each variance, so a
//                                            constant prediction or target gives ρ = 0, not 0/0)
//   loss = −Σ_counted ρ / max(1, M),  M = the number of counted groups (the op's count),
//   ∂loss/∂p_i = −(c_i / √(A·C) − ρ · a_i / A) / max(1, M)  for i in V of a counted group, else 0.
// The gradient is exact for the ε'd ρ: Σ a = Σ c = 0 makes the mean terms of ∂S_py and ∂S_pp vanish.
#include <cstddef>

#include "core/cuda_fwd.h"
#include "mlalpha/config_types.h"

namespace mlalpha {

struct LossParams {
  int B = 0, L = 0, K = 0;
  LossKind kind = LossKind::MSE;
  float delta = 1.0f;  // Huber δ
  int burn_in = 0;
  int G = 0;  // kind IC: windows per cross-section (B a multiple of G); unused otherwise
};

// The variance floor of the IC loss (per point, in target and prediction units²): far below the variance of
// any normalised target or trained prediction, large enough that a constant group gives ρ = 0 exactly.
constexpr double kIcEps = 1e-8;

// The op's inputs: both (B, L, K), so named rather than positional.
template <typename T>
struct LossInputs {
  const T* out = nullptr;  // (B, L, K) the model's predictions
  const T* y = nullptr;    // (B, L, K) the targets; NaN: masked
};

namespace ref {
template <typename T>
struct LossResult {
  T loss;
  long long count;  // Σ m; kind IC: the counted groups M
};
// dout (B, L, K) = ∂loss/∂out, written when non-null (0 where masked). Kind IC calls ic_loss_fwd_bwd.
template <typename T>
LossResult<T> loss_fwd_bwd(const LossParams& p, const LossInputs<T>& in, T* dout);
// The IC loss alone (header formula), groups and members in ascending order.
template <typename T>
LossResult<T> ic_loss_fwd_bwd(const LossParams& p, const LossInputs<T>& in, T* dout);
}  // namespace ref

namespace gpu {
// Loss and its gradient with the loss kept on the device (DESIGN section 2, step 3), deterministic:
//   1. per-block partial sums of ℓ and of m (fixed 2048 elements per block) into workspace;
//   2. one block adds the partials in a fixed order: loss_out = Σℓ / max(1, Σm), count_out = Σm, and
//      1 / max(1, Σm) kept in workspace;
//   3. dout = m · ℓ'(out − y) / max(1, Σm), recomputed from out and y once the count is known (same bytes
//      moved as writing an unscaled dout in pass 1 and rescaling it).
// Kind IC (ic_loss.cu), also deterministic:
//   1. one block per group: n, Σp, Σy, then S_pp, S_yy, S_py in a fixed-order block reduction; ρ and the
//      group's p̄, ȳ, 1/√(A·C), ρ/A into workspace (zeros for a group that does not count);
//   2. one block adds ρ and the counted flags over the groups in ascending order: loss, count = M;
//   3. dout per element from its group's four values.
// Floats of scratch loss_fwd_bwd needs (the per-block count partials are stored as int in float slots); for
// kind IC it depends on G (6 floats per group).
size_t loss_fwd_bwd_workspace_floats(const LossParams& p);
// The most any kind needs for a (B, L, K) batch (kind IC with G = 1, one group per element): what a model
// allocates once so that every loss fits.
size_t loss_workspace_floats_any(int B, int L, int K);
// What the GPU loss writes, all device memory.
struct LossOutputs {
  float* loss = nullptr;  // (1) required
  int* count = nullptr;   // (1) Σ m; may be null
  float* dout = nullptr;  // (B, L, K) ∂loss/∂out, 0 where masked; may be null (loss only)
  // (B, L, K) dout rounded to bf16 (nearest even, cast_bf16's bits), written with it when non-null (needs dout):
  // the bf16 step's GEMM operand. MSE / Huber only (ic_loss_fwd_bwd rejects it).
  __nv_bfloat16* dout16 = nullptr;
  // K = 1, MSE / Huber: (ceil(B·L / kLinearDbChunk)) written when non-null (needs dout): the partials of the
  // head bias's gradient Σ dout, per chunk of 256 rows in gpu::linear_bias_grad's order and bits (linear.h),
  // for gpu::linear_bias_grad_sum to add; the backward then launches no partials kernel of its own.
  float* db_partial = nullptr;
};
// B·L·K < 2^31. workspace: loss_fwd_bwd_workspace_floats(p) floats, need not be initialised. Kind IC calls
// ic_loss_fwd_bwd.
void ic_loss_fwd_bwd(const LossParams& p, const LossInputs<float>& in, const LossOutputs& o, float* workspace,
                     cudaStream_t stream);
size_t ic_loss_workspace_floats(const LossParams& p);
void loss_fwd_bwd(const LossParams& p, const LossInputs<float>& in, const LossOutputs& o, float* workspace,
                  cudaStream_t stream);
}  // namespace gpu

}  // namespace mlalpha

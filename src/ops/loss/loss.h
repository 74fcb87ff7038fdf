#pragma once
// Masked regression loss (DESIGN section 1):
//   loss = Σ m·ℓ(out − y) / max(1, Σ m),  ℓ(e) = e² (MSE) or Huber_δ(e) = ½e² if |e| ≤ δ else δ(|e| − ½δ);
//   m = 0 for NaN targets and for positions t < burn_in.
#include <cuda_runtime.h>

#include <cstddef>

#include "mlalpha/config.h"

namespace mlalpha {

struct LossParams {
  int B = 0, L = 0, K = 0;
  LossKind kind = LossKind::MSE;
  float delta = 1.0f;  // Huber δ
  int burn_in = 0;
};

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
  long long count;  // Σ m
};
// dout (B, L, K) = ∂loss/∂out, written when non-null (0 where masked)
template <typename T>
LossResult<T> loss_fwd_bwd(const LossParams& p, const LossInputs<T>& in, T* dout);
}  // namespace ref

namespace gpu {
// Loss and its gradient with the loss kept on the device (DESIGN section 2, step 3), deterministic:
//   1. per-block partial sums of ℓ and of m (fixed 2048 elements per block) into workspace;
//   2. one block adds the partials in a fixed order: loss_out = Σℓ / max(1, Σm), count_out = Σm, and
//      1 / max(1, Σm) kept in workspace;
//   3. dout = m · ℓ'(out − y) / max(1, Σm), recomputed from out and y once the count is known (same bytes
//      moved as writing an unscaled dout in pass 1 and rescaling it).
// Floats of scratch loss_fwd_bwd needs (the per-block count partials are stored as int in float slots).
size_t loss_fwd_bwd_workspace_floats(const LossParams& p);
// What the GPU loss writes, all device memory.
struct LossOutputs {
  float* loss = nullptr;  // (1) required
  int* count = nullptr;   // (1) Σ m; may be null
  float* dout = nullptr;  // (B, L, K) ∂loss/∂out, 0 where masked; may be null (loss only)
};
// B·L·K < 2^31. workspace: loss_fwd_bwd_workspace_floats(p) floats, need not be initialised.
void loss_fwd_bwd(const LossParams& p, const LossInputs<float>& in, const LossOutputs& o, float* workspace,
                  cudaStream_t stream);
}  // namespace gpu

}  // namespace mlalpha

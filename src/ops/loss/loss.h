#pragma once
// Masked regression loss (DESIGN section 1):
//   loss = Σ m·ℓ(out − y) / max(1, Σ m),  ℓ(e) = e² (MSE) or Huber_δ(e) = ½e² if |e| ≤ δ else δ(|e| − ½δ);
//   m = 0 for NaN targets and for positions t < burn_in.
#include "mlalpha/config.h"

namespace mlalpha {

struct LossParams {
  int B = 0, L = 0, K = 0;
  LossKind kind = LossKind::MSE;
  float delta = 1.0f;  // Huber δ
  int burn_in = 0;
};

namespace ref {
template <typename T>
struct LossResult {
  T loss;
  long long count;  // Σ m
};
// out, y (B, L, K); dout (B, L, K) = ∂loss/∂out, written when non-null (0 where masked)
template <typename T>
LossResult<T> loss_fwd_bwd(const LossParams& p, const T* out, const T* y, T* dout);
}  // namespace ref

}  // namespace mlalpha

#pragma once
// The perception model on the CPU (DESIGN section 1), in T = double (gradient checks) or float
// (running without a GPU, and the oracle for the GPU model):
//   h = x·W_inᵀ + b_in;  h += Mamba2_ℓ(RMSNorm_ℓ(h)) for each layer;  out = RMSNorm_f(h)·W_headᵀ + b_head.
// Usage: forward() caches activations, loss() computes the loss and ∂loss/∂out, backward() accumulates
// parameter gradients into a flat arena with the layout's offsets. A forward may start from carried states
// (CarryState, layer_shapes.h) and write the states it ends with; the backward stops at them.
#include <vector>

#include "model/layer_shapes.h"
#include "model/layout.h"
#include "ops/loss/loss.h"

namespace mlalpha {

template <typename T>
class RefModel {
 public:
  explicit RefModel(const ModelLayout& layout, bool chunked_ssd = false);

  // params (table.total()), x (B, L, F). Returns out (B, L, K), valid until the next forward. carry, when
  // non-null: the windows start from its in states (null pointers: zeros) and its out states are written; the
  // in states are copied, so backward() needs no pointer of the caller's.
  const std::vector<T>& forward(const T* params, const T* x, int B, int L, const CarryState<T>* carry = nullptr);
  // y (B, L, K) targets (NaN = masked). Uses the last forward's output; keeps ∂loss/∂out for backward.
  ref::LossResult<T> loss(const T* y, const LossParams& lp);
  // grads (table.total()) += ∂loss/∂params; dx (B, L, F) = ∂loss/∂x when non-null.
  void backward(const T* params, T* grads, T* dx);

 private:
  struct LayerActs {
    std::vector<T> h_in, hn, rstd, zx, xbc, delta, y, gout, grstd;
  };
  const ModelLayout& lay_;
  bool chunked_;
  int B_ = 0, L_ = 0;
  std::vector<T> x_, h_, hfn_, rstdf_, out_, dout_;
  std::vector<T> conv_in_, ssm_in_;  // the last forward's carried in states (empty: zeros), layer-major
  std::vector<int> rows_, dates_;    // the last forward's present rows (CarryState::rows, dates; empty: full)
  std::vector<LayerActs> acts_;
};

extern template class RefModel<float>;
extern template class RefModel<double>;

}  // namespace mlalpha

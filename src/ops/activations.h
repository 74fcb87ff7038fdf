#pragma once
// Scalar activations shared by the CPU references and the CUDA kernels (one definition, same math).
#include <cmath>

#include "core/hd.h"

namespace mlalpha {

template <typename T>
MLALPHA_HD T sigmoid(T u) {
  return T(1) / (T(1) + exp(-u));
}
template <typename T>
MLALPHA_HD T silu(T u) {
  return u * sigmoid(u);
}
// d silu / du = σ(u) (1 + u (1 − σ(u)))
template <typename T>
MLALPHA_HD T silu_grad(T u) {
  const T s = sigmoid(u);
  return s * (T(1) + u * (T(1) - s));
}
// softplus with PyTorch's threshold: u > 20 returns u (the two agree to fp32 precision there)
template <typename T>
MLALPHA_HD T softplus(T u) {
  return u > T(20) ? u : log1p(exp(u));
}

}  // namespace mlalpha

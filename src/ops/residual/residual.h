#pragma once
// Residual add of the perception model (DESIGN section 1): h ← h + mix, elementwise.
#include <cuda_runtime.h>

#include <cstddef>

namespace mlalpha {
namespace ref {
template <typename T>
void residual_add(T* h, const T* mix, size_t n) {  // h (n) +=, mix (n)
  for (size_t i = 0; i < n; ++i) h[i] += mix[i];
}
}  // namespace ref
namespace gpu {
// h (n) += mix (n)
void residual_add(float* h, const float* mix, size_t n, cudaStream_t stream);
}  // namespace gpu
}  // namespace mlalpha

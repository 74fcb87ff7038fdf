#pragma once
// fp32 → bf16 conversion (round to nearest even), the bf16 mode's only standalone cast: the
// model's input batch, the loss gradient and in_proj's dy (whose three producers write fp32 column slices of
// one buffer) become GEMM operands, and a fresh or loaded set of weights gets its bf16 copy (the optimizer
// keeps it current afterwards). CPU: bf16_round (core/bf16.h) is the same rounding, the oracle.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>

namespace mlalpha::gpu {

// y (n) = bf16(x (n)). Elementwise: the grid does not affect the result.
void cast_bf16(const float* x, __nv_bfloat16* y, size_t n, cudaStream_t stream);

}  // namespace mlalpha::gpu

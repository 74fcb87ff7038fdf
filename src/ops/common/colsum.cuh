#pragma once
// The device helpers of the fixed-order partial sums (colsum.h), for .cu files only.
#include "ops/common/colsum.h"

namespace mlalpha::gpu {

// A block's partial row from its kAcc shared accumulators of D floats: partial_row[i] = Σ_k acc[k·D + i]
// (k ascending), the block's kThreads threads (1-D) striding the columns. Call after the __syncthreads
// that ends the accumulation.
template <int kAcc, int kThreads>
__device__ __forceinline__ void store_block_partial(const float* acc, int D, float* __restrict__ partial_row) {
  for (int i = threadIdx.x; i < D; i += kThreads) {
    float s = 0.f;
    for (int k = 0; k < kAcc; ++k) s += acc[size_t(k) * D + i];
    partial_row[i] = s;
  }
}

// Σ_k s[k][threadIdx.x], k ascending: column threadIdx.x of a (kSlices, kTile) tile of per-slice sums.
template <int kSlices, int kTile>
__device__ __forceinline__ float sum_slices(const float (&s)[kSlices][kTile]) {
  float t = 0.f;
  for (int k = 0; k < kSlices; ++k) t += s[k][threadIdx.x];
  return t;
}

}  // namespace mlalpha::gpu

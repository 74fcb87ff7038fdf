#pragma once
// Fixed-order sums of per-block partials, for the parameter gradients that the backward kernels reduce over
// rows without atomics (rmsnorm, gated_rmsnorm, dt_softplus): each backward block writes one partial row of
// D floats, then colsum_add adds the rows in a fixed order. Every order depends on the shape only, so the
// results are bitwise reproducible. Device helpers here are for .cu files only.
#include <cuda_runtime.h>

#include <cstddef>

namespace mlalpha::gpu {

// dw[c] += Σ_b partial[b][c] for c < D, b < nb (partial is (nb, D), row-major), in a fixed order: slice t
// sums b = t, t + 16, …; the 16 slices then add in order. One launch on `stream`, checked.
void colsum_add(int nb, int D, const float* partial, float* dw, cudaStream_t stream);

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

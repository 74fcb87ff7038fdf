// colsum_add (colsum.cuh): the fixed-order column sum of per-block partials, one kernel for every op.
#include "ops/common/colsum.cuh"

#include "core/cuda_check.h"

namespace mlalpha::gpu {
namespace {

constexpr int kColTile = 32, kSlices = 16;  // colsum_add_kernel block: 32 columns × 16 slices of partials

// dw[c] += Σ_b partial[b][c] in a fixed order: slice t sums b = t, t + kSlices, …; slices then add in order.
__global__ void __launch_bounds__(kColTile* kSlices)
    colsum_add_kernel(int nb, int D, const float* __restrict__ partial, float* __restrict__ dw) {
  __shared__ float s[kSlices][kColTile];
  const int c = blockIdx.x * kColTile + threadIdx.x;
  float acc = 0.f;
  if (c < D) {
    // kBatch loads in flight before they are added (in the same order as one at a time): a slice has
    // nb / kSlices rows (64 for M = 16K rows in blocks of 16), and each round trip to L2 is latency-bound
    constexpr int kBatch = 8;
    int b = threadIdx.y;
    for (; b + (kBatch - 1) * kSlices < nb; b += kBatch * kSlices) {
      float v[kBatch];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) v[u] = partial[size_t(b + u * kSlices) * D + c];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) acc += v[u];
    }
    for (; b < nb; b += kSlices) acc += partial[size_t(b) * D + c];
  }
  s[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && c < D) dw[c] += sum_slices(s);
}

}  // namespace

void colsum_add(int nb, int D, const float* partial, float* dw, cudaStream_t stream) {
  colsum_add_kernel<<<(D + kColTile - 1) / kColTile, dim3(kColTile, kSlices), 0, stream>>>(nb, D, partial, dw);
  MLALPHA_CHECK_LAUNCH(stream);
}

}  // namespace mlalpha::gpu

#pragma once
// The softplus op's device code (dt_softplus.h for the math), shared by its own kernels (dt_softplus.cu) and the
// launch that joins it to the conv's (conv1d.h, conv1d_dt_fwd_bf16 / conv1d_dt_bwd_bf16): one copy of the arithmetic,
// so a joined launch writes the same bits as the op's own.
#include <cuda_bf16.h>

#include "ops/activations.h"
#include "ops/common/bf16_pack.cuh"
#include "ops/common/colsum.cuh"

namespace mlalpha::gpu {

constexpr int kDtBwdRows = 64;  // rows per backward block: fixes the ddt_bias partials (shape only)
constexpr int kDtBwdThreads = 256;  // the op's own backward block: kTile heads × kThreads / kTile row slices
template <int kTile>
constexpr int kDtRowSlices = kDtBwdThreads / kTile;

// The ref's clamp, written the same way: NaN passes through, hi = +inf never clamps.
__device__ __forceinline__ float dt_clamp_ref(float v, float lo, float hi) { return v < lo ? lo : (v > hi ? hi : v); }

// Δ at flat index idx = m·H + h (< M·H). TIn: float, or bf16 (the bf16 in_proj output), widened exactly to fp32.
template <typename TIn>
__device__ __forceinline__ float dt_softplus_value(long long idx, int H, int ld_dt, float lo, float hi,
                                                   const TIn* __restrict__ dt /* (M, ld_dt) */,
                                                   const float* __restrict__ dt_bias /* (H) */) {
  const int m = int(idx / H), h = int(idx % H);
  return dt_clamp_ref(softplus(to_f32(dt[size_t(m) * ld_dt + h]) + dt_bias[h]), lo, hi);
}

__device__ __forceinline__ void dt_store_as(float* p, float v) { *p = v; }
__device__ __forceinline__ void dt_store_as(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }

// One backward block (row block bx, head tile by) run by kThreadsUsed threads (tid = the linear thread index; the
// block's threads with tid < kTile must have threadIdx.x == tid, as sum_slices reads s[.][threadIdx.x]).
// Virtual thread (x, y) = (tid % kTile, slice y) with y = tid / kTile, tid / kTile + nthreads / kTile, …: with
// kThreadsUsed = kDtBwdThreads each thread is one slice (the op's own launch); with fewer each takes several, and
// every slice still sums its rows row0 + y, row0 + y + kSlices, … in the same order, so the partial keeps its bits.
//   g = ddelta · σ(u) where lo ≤ softplus(u) ≤ hi, else 0 (u > 20: slope 1, as the ref); ddt = g;
//   partial[bx][h] = Σ_rows g, the row slices of a head added in ascending order.
template <int kTile, int kThreadsUsed, typename TOut, typename TIn>
__device__ __forceinline__ void dt_softplus_bwd_block(int bx, int by, int tid, int M, int H, int ld_dt,
                                                      float lo, float hi, const TIn* __restrict__ dt /* (M, ld_dt) */,
                                                      const float* __restrict__ dt_bias /* (H) */,
                                                      const float* __restrict__ ddelta /* (M, H) */,
                                                      TOut* __restrict__ ddt /* (M, ld_dt) */,
                                                      float* __restrict__ partial /* (row blocks, H) */) {
  constexpr int kSlices = kDtRowSlices<kTile>;
  static_assert(kThreadsUsed % kTile == 0 && kThreadsUsed <= kDtBwdThreads && kThreadsUsed >= kTile, "whole slices");
  __shared__ float s[kSlices][kTile];
  const int h = by * kTile + tid % kTile;
  const int row0 = bx * kDtBwdRows;
  const int row_end = min(M, row0 + kDtBwdRows);
  for (int y = tid / kTile; y < kSlices; y += kThreadsUsed / kTile) {
    float acc = 0.f;
    if (h < H) {
      const float b = dt_bias[h];
      for (int m = row0 + y; m < row_end; m += kSlices) {
        const float u = to_f32(dt[size_t(m) * ld_dt + h]) + b;
        const float v = softplus(u);
        const bool pass = v >= lo && v <= hi;
        const float g = pass ? ddelta[size_t(m) * H + h] * (u > 20.f ? 1.f : sigmoid(u)) : 0.f;
        dt_store_as(ddt + size_t(m) * ld_dt + h, g);
        acc += g;
      }
    }
    s[y][tid % kTile] = acc;
  }
  __syncthreads();
  if (tid < kTile && h < H) partial[size_t(bx) * H + h] = sum_slices(s);
}

}  // namespace mlalpha::gpu

// Device twin of the CPU gather (sampler.cpp): both copy the floats window_offsets() names.
#include <algorithm>

#include <cuda_bf16.h>

#include "core/cuda_check.h"
#include "core/error.h"
#include "data/sampler.h"

namespace mlalpha::gpu {

namespace {
// Grid (B, slices): block (b, s) copies floats [s·S, (s+1)·S) of window b's contiguous L·F features and of
// its L·K targets, S = kGatherThreads · kGatherLoads, with kGatherLoads loads in flight per thread (one
// block per window left the L configuration's 8 windows on 8 SMs: 200 µs a step). B is on grid.x because a
// cross-sectional batch (dates × instruments) can hold more than grid.y's 65535 windows.
constexpr int kGatherThreads = 256, kGatherLoads = 8;
constexpr size_t kGatherSlice = size_t(kGatherThreads) * kGatherLoads;
// dst16, when non-null, receives each copied float rounded to bf16 (nearest even, cast_bf16's bits).
__device__ void copy_slice(const float* __restrict__ src, float* __restrict__ dst, size_t n,
                           __nv_bfloat16* __restrict__ dst16 = nullptr) {
  const size_t i0 = blockIdx.y * kGatherSlice + threadIdx.x;
  float v[kGatherLoads];
#pragma unroll
  for (int u = 0; u < kGatherLoads; ++u) {
    const size_t i = i0 + size_t(u) * kGatherThreads;
    v[u] = i < n ? src[i] : 0.f;
  }
#pragma unroll
  for (int u = 0; u < kGatherLoads; ++u) {
    const size_t i = i0 + size_t(u) * kGatherThreads;
    if (i < n) {
      dst[i] = v[u];
      if (dst16) dst16[i] = __float2bfloat16_rn(v[u]);
    }
  }
}
__global__ void __launch_bounds__(kGatherThreads) gather_kernel(GatherParams p, const float* __restrict__ x,
                                                               const float* __restrict__ y,
                                                               const long long* __restrict__ step,
                                                               float* __restrict__ xb, float* __restrict__ yb,
                                                               __nv_bfloat16* __restrict__ xb16) {
  const int b = blockIdx.x;
  const WindowOffsets w = window_offsets(p, *step, b);
  const size_t nx = size_t(p.L) * p.F, ny = size_t(p.L) * p.K;
  copy_slice(x + w.x_offset, xb + size_t(b) * nx, nx, xb16 ? xb16 + size_t(b) * nx : nullptr);
  copy_slice(y + w.y_offset, yb + size_t(b) * ny, ny);
}
// Grid (B, slices) as gather_kernel; window b of the tile is windows[first + min(b, count − 1)].
__global__ void __launch_bounds__(kGatherThreads) gather_windows_kernel(const int4* __restrict__ windows, int first,
                                                                       int count, int L, const float* __restrict__ x,
                                                                       int T, int F, float* __restrict__ xb) {
  const int b = blockIdx.x;
  const int4 w = windows[first + (b < count ? b : count - 1)];
  const size_t nx = size_t(L) * F;
  copy_slice(x + (size_t(w.x) * T + size_t(w.y)) * F, xb + size_t(b) * nx, nx);
}
}  // namespace

void gather_batch(const GatherParams& p, const float* x, const float* y, const long long* step, float* xb, float* yb,
                  cudaStream_t stream, __nv_bfloat16* xb16) {
  check_gather(p);
  const size_t n = size_t(p.L) * size_t(std::max(p.F, p.K));
  const size_t slices = (n + kGatherSlice - 1) / kGatherSlice;
  require(slices <= 65535, "gather_batch: window too large for one grid (L · max(F, K) > 65535 · 2048)");
  gather_kernel<<<dim3(unsigned(p.B), unsigned(slices)), kGatherThreads, 0, stream>>>(p, x, y, step, xb, yb, xb16);
  MLALPHA_CHECK_LAUNCH(stream);
}

void gather_windows(const int4* windows, int first, int count, int B, int L, const float* x, int T, int F, float* xb,
                    cudaStream_t stream) {
  require(B >= 1 && L >= 1 && L <= T && F >= 1 && count >= 1 && first >= 0,
          "gather_windows: need B, L, F, count >= 1, L <= T and first >= 0, got B = " + std::to_string(B) +
              ", L = " + std::to_string(L) + ", T = " + std::to_string(T) + ", F = " + std::to_string(F) +
              ", count = " + std::to_string(count) + ", first = " + std::to_string(first));
  const size_t slices = (size_t(L) * F + kGatherSlice - 1) / kGatherSlice;
  require(slices <= 65535, "gather_windows: window too large for one grid (L · F > 65535 · 2048)");
  gather_windows_kernel<<<dim3(unsigned(B), unsigned(slices)), kGatherThreads, 0, stream>>>(windows, first, count, L, x,
                                                                                          T, F, xb);
  MLALPHA_CHECK_LAUNCH(stream);
}

}  // namespace mlalpha::gpu

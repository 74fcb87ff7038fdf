#pragma once
// What the two 3xTF32 GEMM kernels share (gemm_3xtf32.cu: mma.sync; gemm_wgmma_sm90a.cu: Hopper's wgmma):
// the k-tile, the layout of an operand's k-tile in shared memory, its cp.async copy, the A fragment of an
// m16 × k8 piece, and the epilogue's store of a pair of columns. For .cu files.
#include <cstddef>
#include <cstdint>

#include "ops/common/tf32_mma.cuh"
#include "ops/linear/gemm_3xtf32.h"

namespace mlalpha::gpu::gemm_detail {

constexpr int kTileK = 32;  // k per pipeline stage

// Row stride (floats) and size of a stage's tile of an operand: K-major rows of kTileK, else rows of
// `outer`. The strides make a fragment's 32 loads hit 32 banks (gemm_3xtf32.cu says how).
constexpr int tile_ld(bool kmajor, int outer) { return kmajor ? kTileK + 4 : outer + 8; }
constexpr int tile_floats(bool kmajor, int outer) { return kmajor ? outer * (kTileK + 4) : kTileK * (outer + 8); }

// 16 bytes from global to shared memory, or 16 zero bytes when !ok (src-size 0: nothing is read).
__device__ __forceinline__ void cp_async16_or_zero(float* dst, const float* src, bool ok) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(unsigned(__cvta_generic_to_shared(dst))),
               "l"(src), "r"(ok ? 16 : 0));
}

// One operand's k-tile [k0, k0 + kTileK) × [o0, o0 + OUTER) into shared memory (zero outside [k0, k_end) ×
// [0, n_outer)) by kThreads threads, this one `tid`. K-major: src[o·ld + k]; else src[k·ld + o].
// Consecutive threads take consecutive 16-byte pieces of a row: coalesced.
template <bool kKMajor, int OUTER, int kThreads>
__device__ __forceinline__ void load_tile(float* dst, const float* src, int64_t ld, int o0, int n_outer, int k0,
                                          int k_end, int tid) {
  constexpr int kLd = tile_ld(kKMajor, OUTER);
  constexpr int kPerRow = (kKMajor ? kTileK : OUTER) / 4, kChunks = OUTER * kTileK / 4;
  static_assert(kChunks % kThreads == 0, "whole rounds of copies");
#pragma unroll
  for (int i = 0; i < kChunks / kThreads; ++i) {
    const int c = i * kThreads + tid;
    const int r = c / kPerRow, c4 = (c % kPerRow) * 4;
    const int o = kKMajor ? o0 + r : o0 + c4, k = kKMajor ? k0 + c4 : k0 + r;
    const bool ok = o < n_outer && k < k_end;
    const float* s = ok ? (kKMajor ? src + o * ld + k : src + k * ld + o) : src;
    cp_async16_or_zero(dst + r * kLd + c4, s, ok);
  }
}

// The m16n8k8 A fragment of rows r, r + 8 and columns kk + q, kk + q + 4 of an A k-tile with row stride
// kLd, split into tf32 hi and lo.
template <bool kKMajor, int kLd>
__device__ __forceinline__ void a_fragment(const float* sa, int r, int kk, int q, uint32_t (&hi)[4],
                                           uint32_t (&lo)[4]) {
  float v[4];
  if constexpr (kKMajor) {
    const float* a = sa + r * kLd + kk + q;
    v[0] = a[0], v[1] = a[8 * kLd], v[2] = a[4], v[3] = a[8 * kLd + 4];
  } else {
    const float* a = sa + (kk + q) * kLd + r;
    v[0] = a[0], v[1] = a[8], v[2] = a[4 * kLd], v[3] = a[4 * kLd + 8];
  }
#pragma unroll
  for (int e = 0; e < 4; ++e) split_tf32(v[e], hi[e], lo[e]);
}

// C[row, col..col+1] = v + bias + R, or with a split of K (partial != null) slice z's v into partial
// (splits, M, N). N is a multiple of 4, so a pair of columns is inside C or outside it whole.
__device__ __forceinline__ void store_pair(const Gemm3Params& p, float* partial, int z, int row, int col, float2 v) {
  if (row >= p.M || col >= p.N) return;
  if (partial) {
    *reinterpret_cast<float2*>(partial + (size_t(z) * p.M + row) * p.N + col) = v;
    return;
  }
  if (p.bias) v.x += p.bias[col], v.y += p.bias[col + 1];
  if (p.R) {
    const float2 r = *reinterpret_cast<const float2*>(p.R + row * p.ldc + col);
    v.x += r.x, v.y += r.y;
  }
  *reinterpret_cast<float2*>(p.C + row * p.ldc + col) = v;
}

}  // namespace mlalpha::gpu::gemm_detail

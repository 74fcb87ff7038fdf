#pragma once
// What the bar's kernels share (step_proj.cu, step_ssd.cu), for .cu files:
//  - programmatic dependent launch: every kernel waits (griddepcontrol.wait) before it reads anything an
//    earlier kernel wrote, in every block and before any exit, so a grid's completion implies that of all
//    the grids before it; it then lets its dependents be scheduled (launch_dependents), which only lets their
//    blocks become resident and wait: their reads still come after this grid has completed and flushed.
//  - the launch helper (cudaLaunchKernelEx with or without the PDL attribute);
//  - the projection tile: C (rows, OUT) = A (rows, K)·Wᵀ with W (OUT, K) a PyTorch Linear weight, in 3xTF32
//    (each operand split into tf32 hi + lo, products lo·hi + hi·lo + hi·hi accumulated in fp32: fp32
//    accuracy, as the model's own GEMMs, ops/linear/gemm_3xtf32.h).
#include <cuda_runtime.h>

#include <cstdint>
#include <utility>

#include "core/cuda_check.h"
#include "ops/common/tf32_mma.cuh"
#include "ops/mamba_step/mamba_step.h"

namespace mlalpha::gpu::step_detail {

__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
// The two places a bar's kernel lets its dependents be scheduled (StepDims::early_dependents): right after its
// wait on a small bar, at the end of its work on a large one. Only the first launch_dependents of a block counts,
// so a kernel calls both; every thread of the block reaches each call.
__device__ __forceinline__ void dependents_early(const StepDims& d) {
  if (d.early_dependents) pdl_launch_dependents();
}
__device__ __forceinline__ void dependents_late() { pdl_launch_dependents(); }

// Launches kernel<<<grid, block, smem, l.stream>>>(args...), as a programmatic dependent of the previous
// work on the stream when l.pdl (the caller has checked the device is sm_90 or newer).
template <typename... Params, typename... Args>
void launch(const StepLaunch& l, dim3 grid, dim3 block, size_t smem, void (*kernel)(Params...), Args&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = l.stream;
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = l.pdl ? 1 : 0;
  MLALPHA_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...));
  MLALPHA_CHECK_LAUNCH(l.stream);
}

constexpr int kThreads = 128;  // every projection block: 4 warps

// A block tile of BM rows × BN output columns, K staged through shared memory KC at a time. The 4 warps
// split it WR × WC (WR = BM / 16: each warp owns 16 rows, one m16 tile, and BN / WC columns as n8 tiles).
// The smem row stride KC + 4 is ≡ 4 (mod 32) (KC a multiple of 32), so the 32 loads of a fragment, lane (g, q)
// at row g, column q, hit 32 different banks.
template <int BM_, int BN_, int KC_>
struct Tile {
  static constexpr int BM = BM_, BN = BN_, KC = KC_, kLd = KC + 4;
  static constexpr int kWR = BM / 16, kWC = 4 / kWR, kWN = BN / kWC, kNT = kWN / 8;
  static_assert(BM % 16 == 0 && kWR * kWC == 4 && kWN % 8 == 0 && KC % 32 == 0, "tile shape");
  static_assert(BN + 1 <= kLd, "the staged C tile (BM, BN + 1) fits in the A tile's shared memory");
  static_assert(BM * KC % kThreads == 0 && BN * KC % kThreads == 0 && BM * BN % kThreads == 0, "whole rounds of 128 threads");
};
// Small instrument counts: more blocks along the columns, the whole K of in_proj (D ≤ 128) in one stage.
using TileSmall = Tile<16, 32, 128>;
// Large counts: twice the rows and columns a block, so A and W are re-read from L2 half as often.
using TileLarge = Tile<32, 64, 64>;

template <class T>
struct TileSmem {
  float a[T::BM * T::kLd];  // (BM, KC) of A, then (BM, BN + 1) of the staged C tile
  float w[T::BN * T::kLd];  // (BN, KC) of W
};

// The tiles travel global → shared memory by cp.async (4 bytes each, zero-filled outside the matrix): every
// copy of a chunk is in flight at once and none passes through registers. (A block that stored each loaded
// value as it arrived would wait one memory latency per element, which is what bounds these kernels at small
// instrument counts.) Completed by cp_async_wait_all() and a barrier.
__device__ __forceinline__ void cp_async4_or_zero(float* dst, const float* src, bool ok) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(unsigned(__cvta_generic_to_shared(dst))),
               "l"(src), "r"(ok ? 4 : 0)
               : "memory");
}
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;" ::: "memory"); }

// tile (R, KC) of shared memory (row stride kLd) ← src rows [o0, o0 + R) × columns [k0, k0 + KC) of a
// row-major (n_rows, K) matrix with row stride ld; zero outside it. Consecutive threads take consecutive k.
template <class T, int R>
__device__ __forceinline__ void issue_chunk(float* tile, const float* __restrict__ src, int64_t ld, int n_rows,
                                            int K, int o0, int k0) {
  constexpr int kPer = R * T::KC / kThreads;
  static_assert(R * T::KC % kThreads == 0, "whole rounds of the block's threads");
#pragma unroll 1
  for (int u = 0; u < kPer; ++u) {
    const int e = u * kThreads + threadIdx.x, r = e / T::KC, c = e % T::KC, o = o0 + r, k = k0 + c;
    const bool ok = o < n_rows && k < K;
    cp_async4_or_zero(tile + r * T::kLd + c, ok ? src + o * ld + k : src, ok);
  }
}

// The operands of a tile product: A's rows [a0, a0 + BM) of a (a_rows, K) matrix (row stride lda), transformed
// in shared memory by transform(r, k, value) (the norm's scale) before the product; W (OUT, K) row-major, its
// rows [n0, n0 + BN).
struct TileOperands {
  const float* a;
  int64_t lda;
  int a_rows, a0;
  const float* w;
  int OUT, n0;
  int K;
};

template <class T>
__device__ __forceinline__ void issue_w(TileSmem<T>& sm, const TileOperands& op, int k0) {
  issue_chunk<T, T::BN>(sm.w, op.w, op.K, op.OUT, op.K, op.n0, k0);
}
template <class T>
__device__ __forceinline__ void issue_a(TileSmem<T>& sm, const TileOperands& op, int k0) {
  issue_chunk<T, T::BM>(sm.a, op.a, op.lda, op.a_rows, op.K, op.a0, k0);
}

// acc (kNT, 4) = transform(A) (tile rows, K)·W (n0.., K)ᵀ over the whole K, chunk by chunk in ascending k, each
// chunk's k8 steps in ascending order: an output's sum order depends on K only (not on the tile), so a row's
// result is the same whatever the instrument count. The first chunk's copies were issued by the caller (W's
// before it waited on its predecessor: weights do not change during a bar). transform(r, k, a) reads shared
// memory only; rows past a_rows and columns past K stay 0. Accumulator element (nt, e) is tile row
// wm + g + 8·(e / 2), column wn + 8·nt + 2q + e % 2 (fragment_row / fragment_col). Ends with a barrier: the
// caller may reuse sm.a right after.
template <class T, class Transform>
__device__ __forceinline__ void tile_gemm(TileSmem<T>& sm, const TileOperands& op, Transform transform,
                                          float (&acc)[T::kNT][4]) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, q = lane & 3;
  const int wm = (warp / T::kWC) * 16, wn = (warp % T::kWC) * T::kWN;
#pragma unroll
  for (int nt = 0; nt < T::kNT; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[nt][e] = 0.f;
  for (int k0 = 0; k0 < op.K; k0 += T::KC) {
    if (k0 > 0) {
      issue_w<T>(sm, op, k0);
      issue_a<T>(sm, op, k0);
    }
    cp_async_wait_all();
    __syncthreads();
    constexpr int kPer = T::BM * T::KC / kThreads;
#pragma unroll
    for (int u = 0; u < kPer; ++u) {
      const int e = u * kThreads + threadIdx.x, r = e / T::KC, c = e % T::KC, k = k0 + c;
      float& v = sm.a[r * T::kLd + c];
      if (op.a0 + r < op.a_rows && k < op.K) v = transform(r, k, v);
    }
    __syncthreads();
    const int kc = min(T::KC, op.K - k0);
    for (int kk = 0; kk < kc; kk += 8) {
      uint32_t ah[4], al[4];
      const float* a = sm.a + (wm + g) * T::kLd + kk + q;
      split_tf32(a[0], ah[0], al[0]);
      split_tf32(a[8 * T::kLd], ah[1], al[1]);
      split_tf32(a[4], ah[2], al[2]);
      split_tf32(a[8 * T::kLd + 4], ah[3], al[3]);
#pragma unroll
      for (int nt = 0; nt < T::kNT; ++nt) {
        const float* b = sm.w + (wn + 8 * nt + g) * T::kLd + kk + q;
        uint32_t bh[2], bl[2];
        split_tf32(b[0], bh[0], bl[0]);
        split_tf32(b[4], bh[1], bl[1]);
        mma_tf32(acc[nt], al, bh);  // the small terms first, then hi·hi (as the model's GEMMs)
        mma_tf32(acc[nt], ah, bl);
        mma_tf32(acc[nt], ah, bh);
      }
    }
    __syncthreads();
  }
}

template <class T>
__device__ __forceinline__ int fragment_row(int e) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  return (warp / T::kWC) * 16 + (lane >> 2) + 8 * (e >> 1);
}
template <class T>
__device__ __forceinline__ int fragment_col(int nt, int e) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  return (warp % T::kWC) * T::kWN + 8 * nt + 2 * (lane & 3) + (e & 1);
}

}  // namespace mlalpha::gpu::step_detail

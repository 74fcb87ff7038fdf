#pragma once
// Building blocks of the row-wise norm kernels (rmsnorm, gated_rmsnorm), for .cu files.
//
// A "team" of kThreads threads handles one row segment of n <= 4·kThreads·kQuads columns at a time, holding
// it in registers: thread `lane` (0 <= lane < kThreads) owns the quads q = lane + k·kThreads (k < kQuads),
// i.e. columns 4q .. 4q+3. So a row is read from memory once (no second pass over it), and because a thread
// owns the same columns for every row its team handles, per-column sums over rows (dw) stay in registers.
// A block holds kTeams teams, which interleave over the block's rows (team t: rows t, t + kTeams, …).
//
// Reproducibility: the column → thread map, the team size and every sum order depend on n only. Loads and
// stores are float4 when the caller has checked that n % 4 == 0 and every row starts 16-byte aligned (kVec),
// else scalar with the same map, so both paths compute the same bits.
#include <cuda_bf16.h>

#include <cstdint>
#include <initializer_list>

#include "ops/common/bf16_pack.cuh"
#include "ops/common/reduce.cuh"

namespace mlalpha::gpu {

// Longest row segment a team holds (Team<512, 4> below).
constexpr int kMaxTeamCols = 8192;

template <int kThreads_, int kQuads_>
struct Team {
  static constexpr int kThreads = kThreads_;                           // threads per row segment
  static constexpr int kQuads = kQuads_;                               // quads (4 columns) per thread
  static constexpr int kCols = 4 * kThreads * kQuads;                  // most columns a team holds
  static constexpr int kTeams = kThreads >= 256 ? 1 : 256 / kThreads;  // teams per block: >= 256 threads a block
  static constexpr int kBlock = kTeams * kThreads;
  // Blocks per SM the register budget must allow (__launch_bounds__): 64 registers a thread while a thread
  // holds at most 8 columns, 128 above (a 64K-register SM).
  static constexpr int kMinBlocks = 65536 / (kBlock * (kQuads <= 2 ? 64 : 128));
  static_assert(kThreads % 32 == 0 && kMinBlocks >= 1, "whole warps, and at least one block per SM");
};

// Calls f(Team<…>{}) with the smallest team that holds n columns, 1 <= n <= kMaxTeamCols (the caller checks).
// A team has at least 64 threads, so segments under 256 columns leave some idle (what matters there is rows
// in flight, which the teams per block and blocks per SM give); up to 1024 columns a thread holds one quad,
// which keeps the backward kernels under 64 registers.
template <typename F>
void with_team(int n, F&& f) {
  const int nq = (n + 3) / 4;
  if (nq <= 64)
    f(Team<64, 1>{});
  else if (nq <= 128)
    f(Team<128, 1>{});
  else if (nq <= 256)
    f(Team<256, 1>{});
  else if (nq <= 512)
    f(Team<256, 2>{});
  else if (nq <= 1024)
    f(Team<256, 4>{});
  else
    f(Team<512, 4>{});
}

// True when every pointer is 16-byte aligned (host side; decides kVec together with the shape).
inline bool all_aligned16(std::initializer_list<const void*> ptrs) {
  for (const void* p : ptrs)
    if (reinterpret_cast<std::uintptr_t>(p) % 16 != 0) return false;
  return true;
}

// v[k][j] = row[4q + j] with q = lane + k·kThreads; 0 for columns >= n. kVec: n % 4 == 0, row 16-byte aligned.
template <bool kVec, int kThreads, int kQuads>
__device__ __forceinline__ void load_quads(const float* __restrict__ row, int n, int lane, float (&v)[kQuads][4]) {
#pragma unroll
  for (int k = 0; k < kQuads; ++k) {
    const int c = 4 * (lane + k * kThreads);
    if constexpr (kVec) {
      float4 t = make_float4(0.f, 0.f, 0.f, 0.f);
      if (c < n) t = *reinterpret_cast<const float4*>(row + c);  // n % 4 == 0: the quad is whole
      v[k][0] = t.x, v[k][1] = t.y, v[k][2] = t.z, v[k][3] = t.w;
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j) v[k][j] = c + j < n ? row[c + j] : 0.f;
    }
  }
}

// The same load from a bf16 row, each value widened exactly to fp32 (bf16 precision's activations: the z columns
// of in_proj's output, out_proj's dx). kVec: one 8-byte load per quad (n % 4 == 0, row 8-byte aligned).
template <bool kVec, int kThreads, int kQuads>
__device__ __forceinline__ void load_quads(const __nv_bfloat16* __restrict__ row, int n, int lane,
                                           float (&v)[kQuads][4]) {
#pragma unroll
  for (int k = 0; k < kQuads; ++k) {
    const int c = 4 * (lane + k * kThreads);
    if constexpr (kVec) {
      uint2 t = make_uint2(0u, 0u);
      if (c < n) t = *reinterpret_cast<const uint2*>(row + c);
      unpack_bf16x4(t, v[k]);
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j) v[k][j] = c + j < n ? __bfloat162float(row[c + j]) : 0.f;
    }
  }
}

// row[4q + j] = v[k][j] for the columns < n (same map and preconditions as load_quads). kShared: row is in
// shared memory (__stwb is a global-memory store: on a shared address it faults with
// cudaErrorInvalidAddressSpace).
template <bool kVec, int kThreads, int kQuads, bool kShared = false>
__device__ __forceinline__ void store_quads(float* __restrict__ row, int n, int lane, const float (&v)[kQuads][4]) {
#pragma unroll
  for (int k = 0; k < kQuads; ++k) {
    const int c = 4 * (lane + k * kThreads);
    if constexpr (kVec) {
      const float4 t = make_float4(v[k][0], v[k][1], v[k][2], v[k][3]);
      if (c >= n) continue;
      // __stwb: one 16-byte write-back store (nvcc splits a plain float4 assignment here into four 4-byte ones)
      if constexpr (kShared) *reinterpret_cast<float4*>(row + c) = t;
      else __stwb(reinterpret_cast<float4*>(row + c), t);
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j)
        if (c + j < n) row[c + j] = v[k][j];
    }
  }
}

// The same store rounding each value to bf16 (round to nearest even): the bf16 GEMM operands the norms write
// in bf16 precision (docs/decisions.md, "bf16"). kVec: one 8-byte store per quad (n % 4 == 0, row 8-byte aligned).
template <bool kVec, int kThreads, int kQuads>
__device__ __forceinline__ void store_quads(__nv_bfloat16* __restrict__ row, int n, int lane,
                                            const float (&v)[kQuads][4]) {
#pragma unroll
  for (int k = 0; k < kQuads; ++k) {
    const int c = 4 * (lane + k * kThreads);
    if constexpr (kVec) {
      if (c >= n) continue;
      *reinterpret_cast<uint2*>(row + c) = pack_bf16x4(v[k][0], v[k][1], v[k][2], v[k][3]);
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j)
        if (c + j < n) row[c + j] = __float2bfloat16_rn(v[k][j]);
    }
  }
}

// Σ of v over the team of the calling thread, the same bits in every thread of the team: a butterfly in each
// warp, then the team's warps in ascending order (put_warp_sum, sum_slots: reduce.cuh). Every thread of the
// block must call it (one __syncthreads). slots: 2 × (warps of the block) shared floats; pass parity = call
// count % 2: a thread that writes a slot set again has passed the barrier of the call in between, which no
// thread reaches before it has read that set, so one barrier per call is enough.
template <int kThreads, int kBlock>
__device__ __forceinline__ float team_sum(float v, float (&slots)[2][kBlock / 32], int parity) {
  constexpr int kWarps = kThreads / 32;
  put_warp_sum(v, slots[parity]);
  __syncthreads();
  const int warp = threadIdx.x / 32, first = warp - warp % kWarps;  // the team's first warp
  return sum_slots<kWarps - 1>(slots[parity], first + 1, slots[parity][first]);
}

}  // namespace mlalpha::gpu

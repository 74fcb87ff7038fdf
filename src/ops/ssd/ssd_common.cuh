#pragma once
// What the SSD kernels share (ssd_fwd.cu, ssd_bwd.cu, ssd_chunks.cu): the argument block, the thread
// layout of a head's P×N state, shared-memory staging of per-step inputs and the template dispatch.
//
// Thread layout. A head's state (P×N) is spread over a block: lanes of a warp split into PL = 32/NL groups
// of NL lanes; lane nl of a group owns the n values nl·NPT + k (k < NPT, N is zero-padded to NS = NL·NPT; NL
// is picked so that NPT ≈ 8, which keeps the shuffle levels per row reduction few), and each thread owns RP
// rows p = j·(W·PL) + w·PL + pl (j < RP, warp w of W). So the state lives in registers (RP·NPT values a
// thread), a step's B_t, C_t values are read from shared memory once (vector loads of the lane's contiguous
// n) and reused for all RP rows, row reductions over n are xor butterflies over the NL lanes of a group (a fixed order, identical
// in every lane) and sums over p go within a thread over j, across the PL groups by xor shuffles, then
// across warps through shared memory in warp order. Nothing depends on the device: bit-reproducible.
//
// Every kernel runs over one chunk of Q steps of one (b, h): grid (chunks, H, B). The chunk-parallel
// form needs the state entering each chunk (forward) and the adjoint state leaving it (backward); both
// come from ssd_chunks.cu: a scan of each chunk from zero, then a short sequential pass over the chunks.
#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>

#include "core/cuda_check.h"
#include "core/error.h"
#include "ops/common/warp_sum.cuh"
#include "ops/ssd/ssd.h"

namespace mlalpha::gpu::ssd_detail {

constexpr unsigned kFull = 0xffffffffu;
constexpr int kMaxWarps = 8;                  // W ≤ 8 (256 threads)
constexpr int kMaxTs = 32;                    // steps staged at a time
constexpr int kSmemBudgetBytes = 46 * 1024;  // under the 48 KiB default: no opt-in attribute needed
constexpr int kMaxN = 256;                    // NPT ≤ 8
constexpr int kMaxRp = 16;
// The backward's recurrences and per-step scalars (see ssd_bwd.cu). MLALPHA_SSD_FLOAT_ACC builds them in
// fp32 instead: only for measuring what double costs; the tolerances in the tests assume double.
#ifdef MLALPHA_SSD_FLOAT_ACC
using Acc = float;
#else
using Acc = double;
#endif

// Everything a kernel needs, passed by value.
struct Args {
  int B, L, H, P, G, N, Q, ld, nchunks;
  int NL, NS, PL, W, PT, TS;  // layout (see the top of the file); PT = P rounded up to W·PL·RP
  const float *x, *delta, *A_log, *Bm, *Cm, *Dskip, *dy;
  float* y;        // (B, L, H, P) forward output
  float* states;   // (B, H, nchunks, P, N) state entering each chunk
  float* dx;       // (B, L, ld)→(H, P)
  float* ddelta;   // (B, L, H)
  float* wsB;      // (B, L, H, N) per-head dB
  float* wsC;      // (B, L, H, N) per-head dC
  Acc* wsZ;        // (B, L, H) z_t = a_t Σ_p dy_t[p] (s_{t−1} C_t)[p]
  Acc* wsG;        // (B, H, nchunks, P, N) adjoint state g at each chunk start (chunks ≥ 1)
  float* wsA;      // (B, H, nchunks) per-(b, h, chunk) dA_log partial
  float* wsD;      // (B, H, nchunks) per-(b, h, chunk) dD partial
};

__host__ __device__ inline int ceil_div(int a, int b) { return (a + b - 1) / b; }
__device__ __forceinline__ size_t row_of(const Args& a, int b, int t) { return size_t(b) * a.L + t; }
// First step of chunk c and one past its last.
__device__ __forceinline__ int chunk_begin(const Args& a, int c) { return c * a.Q; }
__device__ __forceinline__ int chunk_end(const Args& a, int c) { return min(a.L, (c + 1) * a.Q); }
// (P, N) block of a per-(b, h, chunk) state array.
template <typename T>
__device__ __forceinline__ T* state_at(const Args& a, T* base, int b, int h, int c) {
  return base + ((size_t(b) * a.H + h) * a.nchunks + c) * size_t(a.P) * a.N;
}
// Row p of thread slot j, and whether (p, n) of lane slot k is a real element.
__device__ __forceinline__ int local_row(const Args& a, int j) {
  const int lane = threadIdx.x & 31;
  return j * (a.W * a.PL) + (threadIdx.x >> 5) * a.PL + lane / a.NL;
}
template <int NPT>
__device__ __forceinline__ int lane_n(const Args& a, int k) { return (threadIdx.x & 31 & (a.NL - 1)) * NPT + k; }
// The lane's NPT values of a staged row (B_t, C_t or a partial), 16-byte vector loads where NPT allows
// (rows start at multiples of NS floats from 16-byte aligned arrays).
template <int NPT, typename T>
__device__ __forceinline__ void load_lane(const Args& a, const float* row, T (&v)[NPT]) {
  const float* src = row + lane_n<NPT>(a, 0);
  if constexpr (NPT % 4 == 0) {
#pragma unroll
    for (int q = 0; q < NPT / 4; ++q) {
      const float4 f = reinterpret_cast<const float4*>(src)[q];
      v[4 * q] = T(f.x), v[4 * q + 1] = T(f.y), v[4 * q + 2] = T(f.z), v[4 * q + 3] = T(f.w);
    }
  } else {
#pragma unroll
    for (int k = 0; k < NPT; ++k) v[k] = T(src[k]);
  }
}
// Acc values placed before the float arrays in shared memory, rounded up so the floats stay 16-byte aligned
// (the host adds kAccPadBytes to the dynamic shared memory for it).
constexpr int kAccPadBytes = 16;
__host__ __device__ inline int acc_slots(int n) {
  constexpr int per16 = 16 / int(sizeof(Acc));
  return (n + per16 - 1) / per16 * per16;
}

// The thread's elements of a (P, N) state into registers (zero where padded, or everywhere when S is null),
// and back.
template <int NPT, int RP, typename T, typename U>
__device__ __forceinline__ void load_state(const Args& a, const U* S, T (&s)[RP][NPT]) {
#pragma unroll
  for (int j = 0; j < RP; ++j) {
    const int p = local_row(a, j);
#pragma unroll
    for (int k = 0; k < NPT; ++k) {
      const int n = lane_n<NPT>(a, k);
      s[j][k] = (S != nullptr && p < a.P && n < a.N) ? T(S[size_t(p) * a.N + n]) : T(0);
    }
  }
}
template <int NPT, int RP, typename T>
__device__ __forceinline__ void store_state(const Args& a, const T (&s)[RP][NPT], T* S) {
#pragma unroll
  for (int j = 0; j < RP; ++j) {
    const int p = local_row(a, j);
#pragma unroll
    for (int k = 0; k < NPT; ++k) {
      const int n = lane_n<NPT>(a, k);
      if (p < a.P && n < a.N) S[size_t(p) * a.N + n] = s[j][k];
    }
  }
}

// Sum over the NL lanes of a group (offsets < NL stay inside the aligned group).
template <typename T>
__device__ __forceinline__ T sum_n_lanes(T v, int NL) {
  for (int off = NL >> 1; off > 0; off >>= 1) v += __shfl_xor_sync(kFull, v, off);
  return v;
}
// Sum over the PL groups of a warp (offsets ≥ NL keep the lane's n).
template <typename T>
__device__ __forceinline__ T sum_p_lanes(T v, int NL) {
  for (int off = NL; off < 32; off <<= 1) v += __shfl_xor_sync(kFull, v, off);
  return v;
}

// Staging of ts steps from t0 into shared memory, a warp per step row and lanes along the row (coalesced,
// no index division). B or C rows: NS columns, zero past N; x or dy rows: PT columns, zero past P.
__device__ inline void stage_bc(const Args& a, const float* src, float* dst, int b, int g, int t0, int ts) {
  for (int t = threadIdx.x >> 5; t < ts; t += blockDim.x >> 5) {
    const float* row = src + row_of(a, b, t0 + t) * a.ld + size_t(g) * a.N;
    for (int n = threadIdx.x & 31; n < a.NS; n += 32) dst[t * a.NS + n] = n < a.N ? row[n] : 0.f;
  }
}
// x (stride ld, head offset h·P) or dy ((B, L, H, P)).
__device__ inline void stage_rows(const float* src, size_t row_stride, size_t first, int P, int PT, float* dst,
                                  int ts) {
  for (int t = threadIdx.x >> 5; t < ts; t += blockDim.x >> 5) {
    const float* row = src + first + size_t(t) * row_stride;
    for (int p = threadIdx.x & 31; p < PT; p += 32) dst[t * PT + p] = p < P ? row[p] : 0.f;
  }
}
__device__ inline void stage_x(const Args& a, float* dst, int b, int h, int t0, int ts) {
  stage_rows(a.x, a.ld, row_of(a, b, t0) * a.ld + size_t(h) * a.P, a.P, a.PT, dst, ts);
}
__device__ inline void stage_dy(const Args& a, float* dst, int b, int h, int t0, int ts) {
  stage_rows(a.dy, size_t(a.H) * a.P, (row_of(a, b, t0) * a.H + h) * a.P, a.P, a.PT, dst, ts);
}
// Δ_t and a_t = exp(Δ_t A).
__device__ inline void stage_dt(const Args& a, float* sdt, float* sa, float A, int b, int h, int t0, int ts) {
  for (int t = threadIdx.x; t < ts; t += blockDim.x) {
    const float dt = a.delta[row_of(a, b, t0 + t) * a.H + h];
    sdt[t] = dt;
    sa[t] = expf(dt * A);
  }
}

// The per-step inputs of a TS-step tile in shared memory, carved from `base` in this order: B, C (TS, NS),
// x (TS, PT), dy (TS, PT) when the kernel needs it, Δ, a (TS); `end` is where the kernel's own arrays go.
struct StepTiles {
  float *B, *C, *x, *dy, *dt, *a, *end;
};
__device__ inline StepTiles carve_tiles(const Args& a, float* base, bool with_dy) {
  StepTiles s;
  s.B = base;
  s.C = s.B + a.TS * a.NS;
  s.x = s.C + a.TS * a.NS;
  s.dy = with_dy ? s.x + a.TS * a.PT : nullptr;
  s.dt = s.x + (with_dy ? 2 : 1) * a.TS * a.PT;
  s.a = s.dt + a.TS;
  s.end = s.a + a.TS;
  return s;
}
// Stages steps [t0, t0 + ts) of (b, h) into the tiles (the caller synchronises).
__device__ inline void stage_tiles(const Args& a, const StepTiles& s, float A, int b, int h, int t0, int ts) {
  const int g = h * a.G / a.H;
  stage_bc(a, a.Bm, s.B, b, g, t0, ts);
  stage_bc(a, a.Cm, s.C, b, g, t0, ts);
  stage_x(a, s.x, b, h, t0, ts);
  if (s.dy != nullptr) stage_dy(a, s.dy, b, h, t0, ts);
  stage_dt(a, s.dt, s.a, A, b, h, t0, ts);
}

// Fixed-order block sum (warp butterflies, then warps in order); every thread gets the result. `red` holds
// kMaxWarps values; the block is synchronised on entry and exit.
template <typename T>
__device__ inline T block_sum(T v, T* red) {
  v = warp_sum(v);
  __syncthreads();
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  T s = 0;
  for (int w = 0; w < int(blockDim.x >> 5); ++w) s += red[w];
  __syncthreads();
  return s;
}

// ----- host side -----
void validate(const SsdParams& p);
// The layout from the shape only (so results never depend on the device).
Args make_layout(const SsdParams& p);
inline int rp_of(const Args& a) { return a.PT / (a.W * a.PL); }
inline int npt_of(const Args& a) { return a.NS / a.NL; }
// Steps staged at a time so that the dynamic shared memory stays under the budget.
inline int pick_ts(size_t bytes_per_step) {
  return int(std::max<size_t>(1, std::min<size_t>(kMaxTs, kSmemBudgetBytes / bytes_per_step)));
}

// Calls f(std::integral_constant<int, NPT>, std::integral_constant<int, RP>) for the layout's template values.
template <int NPT, class F>
void dispatch_rp(int rp, F&& f) {
  switch (rp) {
    case 1: return f(std::integral_constant<int, NPT>{}, std::integral_constant<int, 1>{});
    case 2: return f(std::integral_constant<int, NPT>{}, std::integral_constant<int, 2>{});
    case 4: return f(std::integral_constant<int, NPT>{}, std::integral_constant<int, 4>{});
    case 8: return f(std::integral_constant<int, NPT>{}, std::integral_constant<int, 8>{});
    case 16: return f(std::integral_constant<int, NPT>{}, std::integral_constant<int, 16>{});
  }
  throw Error("ssd (gpu): internal: no kernel for RP=" + std::to_string(rp));
}
template <class F>
void dispatch(const Args& a, F&& f) {
  switch (npt_of(a)) {
    case 1: return dispatch_rp<1>(rp_of(a), f);
    case 2: return dispatch_rp<2>(rp_of(a), f);
    case 4: return dispatch_rp<4>(rp_of(a), f);
    case 8: return dispatch_rp<8>(rp_of(a), f);
  }
  throw Error("ssd (gpu): internal: no kernel for NPT=" + std::to_string(npt_of(a)));
}

// ssd_chunks.cu. Forward: states[c] = the state entering chunk c (states[0] = 0), from a scan of every chunk
// from zero and the pass S_{c+1} = (Π_{t∈c} a_t) S_c + local_c. Backward: wsG[c] = g at the first step of
// chunk c ≥ 1, from a reverse scan of every chunk from zero and G_c = (Π_{t=cQ+1}^{(c+1)Q} a_t) G_{c+1} + local_c.
void chunk_entry_states(const Args& a, cudaStream_t stream);
void chunk_adjoint_states(const Args& a, cudaStream_t stream);

}  // namespace mlalpha::gpu::ssd_detail

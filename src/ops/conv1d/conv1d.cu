// Causal depthwise conv1d + bias + SiLU on the GPU (DESIGN section 1, conv1d.h for the math).
//
// Layout: a thread owns a quad of 4 consecutive channels c .. c+3 and a tile of kTT consecutive time steps of
// one sequence, and slides a register window of the last W input rows over its tile, so each x is loaded
// once (plus a W−1 halo, an L2 hit: the neighbouring tile's thread loads it at about the same time). A warp
// owns 32 quads = 128 consecutive channels at one time step: every access is 512 contiguous bytes.
// A block is kQuads quads × kTiles tiles = 128 channels × 128 time steps of one sequence (128 threads).
//
// Why this is fast: the kernels are bound by DRAM bandwidth (x and y, or x, dy and dx, each B·L·C floats),
// which needs tens of KB of loads in flight per SM. A thread loads 16 bytes per row (float4) and issues the
// loads of a group of kFwdGroup / kBwdGroup rows together before computing them, so it keeps 128 bytes in
// flight (the one-channel-per-thread version had 4 to 64, too few to cover DRAM latency), and a quad shares
// one address computation, predicate and loop step among 4 channels. The backward issues the next group's
// loads before it computes the current one, so they stay in flight through its longer arithmetic (H200,
// 'L' layer: 175 -> 140 us, from 56% of the DRAM bandwidth); the same pipeline in the forward gained 4% on
// 'L', lost 15% on 'M' (one block per SM fewer), and was dropped.
//
// A carried window (conv1d.h: window0, a (B, W−1, C) tensor, oldest row first) takes the place of the zeros
// before t = 0: the threads of the first tile (t0 = 0, the only ones whose window reaches back past t = 0, as
// W − 1 < kTT) load their register window's first rows from it, so the forward's outputs and the backward's dw
// see it; in the backward, the same threads' dx of the steps before t = 0 is dwindow0. window_last, the last W − 1
// inputs, is a small kernel of its own (window_last_kernel).
//
// float4 loads and stores need C % 4 == 0, ld_x % 4 == 0 and 16-byte aligned x, y, dy, dx, window0, dwindow0
// (decided on the host); otherwise the same kernels run with scalar accesses and the same channel → thread map and the same
// arithmetic, so both paths give the same bits.
//
// Backward: each thread recomputes the pre-activation, forms dpre = dy · SiLU'(pre) for its tile plus the
// W−1 steps after it (the taps that reach back into its tile), writes dx for its tile, and sums dw, dbias
// over its tile in registers. The block adds its kTiles tile sums in ascending order and stores one partial
// per (sequence, 128-step block); colsum_add (ops/common/colsum.cuh) then adds the partials in a fixed order
// into dw and dbias. No atomics: every sum order depends on the shape only, so results are bitwise
// reproducible.
#include <algorithm>
#include <type_traits>

#include "core/cuda_check.h"
#include "ops/activations.h"
#include "ops/common/bf16_pack.cuh"
#include "ops/common/colsum.cuh"
#include "ops/common/row_team.cuh"
#include "ops/conv1d/conv1d.h"
#include "ops/dt_softplus/dt_softplus.cuh"

namespace mlalpha::gpu {

namespace {

constexpr int kQuads = 32;              // channel quads per block (one warp wide: 128 channels)
constexpr int kBlockC = 4 * kQuads;     // channels per block
constexpr int kTiles = 4;               // time tiles per block (threadIdx.y)
constexpr int kTT = 32;                 // time steps per thread
constexpr int kBlockT = kTiles * kTT;   // time steps per block (fixes the dw partials: see conv1d.h)
constexpr int kFwdGroup = 8;            // forward: rows whose loads are issued together (8 × 16 B a thread)
constexpr int kBwdGroup = 4;            // backward: rows of x and of dy issued together (2 × 4 × 16 B)
static_assert(kTT % kFwdGroup == 0 && kTT % kBwdGroup == 0, "a full tile is whole groups");

// Blocks per SM that __launch_bounds__ asks the register budget to allow (64K registers an SM, 128 threads
// a block): as many as fit without spilling (checked with -Xptxas -v). Unbounded, ptxas spends registers on
// scheduling freedom (fwd W = 4: 118 registers → 4 blocks) that occupancy pays for; capped further it spills.
// fwd: W <= 4 at <= 96 registers (5 blocks), W <= 7 at <= 128 (4 blocks), W = 8 at <= 168 (3 blocks).
// bwd (with its loads pipelined a group ahead): W = 1 at <= 128 (4 blocks), W = 2 .. 4 at <= 168 (3 blocks:
// W = 4 needs 166), wider <= 255 (2 blocks).
constexpr int fwd_min_blocks(int W) { return W <= 4 ? 5 : W <= 7 ? 4 : 3; }
constexpr int bwd_min_blocks(int W) { return W <= 1 ? 4 : W <= 4 ? 3 : 2; }

// v[j] = p[j] for j < nc when ok, else 0. kVec: nc == 4 and p 16-byte aligned (checked on the host).
template <bool kVec>
__device__ __forceinline__ void load_quad(const float* __restrict__ p, int nc, bool ok, float (&v)[4]) {
  if constexpr (kVec) {
    float4 t = make_float4(0.f, 0.f, 0.f, 0.f);
    if (ok) t = *reinterpret_cast<const float4*>(p);
    v[0] = t.x, v[1] = t.y, v[2] = t.z, v[3] = t.w;
  } else {
#pragma unroll
    for (int j = 0; j < 4; ++j) v[j] = ok && j < nc ? p[j] : 0.f;
  }
}

// The same from bf16 x (bf16 mode: x is the bf16 in_proj output), each value widened exactly to fp32; kVec: one
// 8-byte load (nc == 4, p 8-byte aligned: the 16-byte check on the host covers it).
template <bool kVec>
__device__ __forceinline__ void load_quad(const __nv_bfloat16* __restrict__ p, int nc, bool ok, float (&v)[4]) {
  if constexpr (kVec) {
    uint2 t = make_uint2(0u, 0u);
    if (ok) t = *reinterpret_cast<const uint2*>(p);
    unpack_bf16x4(t, v);
  } else {
#pragma unroll
    for (int j = 0; j < 4; ++j) v[j] = ok && j < nc ? __bfloat162float(p[j]) : 0.f;
  }
}

// p[j] = v[j] for j < nc (same preconditions as load_quad).
template <bool kVec>
__device__ __forceinline__ void store_quad(float* __restrict__ p, int nc, const float (&v)[4]) {
  if constexpr (kVec) {
    // a plain (weak) store: ptxas emits one STG.E.128 here (checked in the SASS)
    *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
  } else {
#pragma unroll
    for (int j = 0; j < 4; ++j)
      if (j < nc) p[j] = v[j];
  }
}
// The same rounded to bf16 (bf16 mode: dx is in_proj's GEMM operand dy); kVec: one 8-byte store.
template <bool kVec>
__device__ __forceinline__ void store_quad(__nv_bfloat16* __restrict__ p, int nc, const float (&v)[4]) {
  if constexpr (kVec) {
    *reinterpret_cast<uint2*>(p) = pack_bf16x4(v[0], v[1], v[2], v[3]);
  } else {
#pragma unroll
    for (int j = 0; j < 4; ++j)
      if (j < nc) p[j] = __float2bfloat16_rn(v[j]);
  }
}

// wk[k][j] = w[c+j, k], bc[j] = bias[c+j] for the nc channels of the quad, 0 for the others. Scalar loads on
// both paths: W·4 + 4 floats once per thread (L1/L2 hits), and w, bias need no alignment.
template <int W>
__device__ __forceinline__ void load_taps(const float* __restrict__ w /* (C, W) */,
                                          const float* __restrict__ bias /* (C) */, int c, int nc,
                                          float (&wk)[W][4], float (&bc)[4]) {
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    bc[j] = j < nc ? bias[c + j] : 0.f;
#pragma unroll
    for (int k = 0; k < W; ++k) wk[k][j] = j < nc ? w[size_t(c + j) * W + k] : 0.f;
  }
}

// The register window's first W − 1 rows for the tile starting at t0: xs[i] = x at t0 − (W−1) + i, or before
// t = 0 window0's row W − 1 + t0 − back (t0 = 0 then) when one is given, else 0.
// TX: x's type (float, or bf16 in bf16 mode); window0 is fp32 always (the carried state).
template <int W, int N, bool kVec, typename TX>
__device__ __forceinline__ void load_halo(const TX* __restrict__ xq /* x[b, t0, c] */, size_t ldx, int t0,
                                          const float* __restrict__ win /* window0[b, 0, c] or null */, int C, int nc,
                                          float (&xs)[N][4]) {
#pragma unroll
  for (int i = 0; i < W - 1; ++i) {
    const int back = W - 1 - i;  // rows before t0
    const bool in_x = t0 >= back;
    if constexpr (std::is_same_v<TX, float>) {
      const float* src = in_x ? xq - back * ldx : win ? win + size_t(W - 1 + t0 - back) * C : xq;
      load_quad<kVec>(src, nc, in_x || win, xs[i]);
    } else {  // x and the window differ in type: two loads, one of them predicated off
      if (in_x) load_quad<kVec>(xq - back * ldx, nc, true, xs[i]);
      else load_quad<kVec>(win ? win + size_t(W - 1 + t0 - back) * C : nullptr, nc, win != nullptr, xs[i]);
    }
  }
}

// pre[j] = bias[c+j] + Σ_{k<W} w[c+j,k] · xs[k][j] (k ascending), xs[k] = x at t − (W−1) + k.
template <int W, int N>
__device__ __forceinline__ void pre_act(const float (&wk)[W][4], const float (&bc)[4], const float (&xs)[N][4],
                                        int u, float (&pre)[4]) {
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    float acc = bc[j];
#pragma unroll
    for (int k = 0; k < W; ++k) acc += wk[k][j] * xs[u + k][j];
    pre[j] = acc;
  }
}

// forward: y[b,t,c] = SiLU(bias[c] + Σ_k w[c,k] · x[b, t−(W−1)+k, c]). TX: float, or bf16 in bf16 mode. TY:
// float, or bf16 where the SSD walks read xbc in bf16 (store_quad rounds the fp32 value to nearest even).
// The block's work as a function of its block index (bid: blockIdx, or a joined launch's decoded index, conv1d.h
// conv1d_dt_fwd_bf16), so a joined grid runs the same code.
template <int W, bool kVec, typename TX, typename TY>
__device__ __forceinline__ void conv1d_silu_fwd_block(uint3 bid, const Conv1dParams& p,
                                                      const TX* __restrict__ x /* (B, L, ld_x) */,
                                                      const float* __restrict__ w /* (C, W) */,
                                                      const float* __restrict__ bias /* (C) */,
                                                      const float* __restrict__ window0 /* (B, W−1, C) or null */,
                                                      TY* __restrict__ y /* (B, L, C) */) {
  constexpr int G = kFwdGroup;
  const int c = 4 * (bid.x * kQuads + threadIdx.x);
  const int b = bid.z;
  const int t0 = bid.y * kBlockT + threadIdx.y * kTT;
  if (c >= p.C || t0 >= p.L) return;  // no shared memory, no barrier: early exit is safe
  const int nc = min(4, p.C - c), nt = min(kTT, p.L - t0);
  float wk[W][4], bc[4];
  load_taps<W>(w, bias, c, nc, wk, bc);
  const size_t ldx = size_t(p.ld_x);
  const TX* xq = x + (size_t(b) * p.L + t0) * ldx + c;  // x[b, t0, c]
  TY* yq = y + (size_t(b) * p.L + t0) * p.C + c;        // y[b, t0, c]
  // xs[i] = x at t0 + g − (W−1) + i for the group starting at step g (window0 or zero before t = 0)
  float xs[W - 1 + G][4];
  load_halo<W, W - 1 + G, kVec>(xq, ldx, t0, window0 ? window0 + size_t(b) * (W - 1) * p.C + c : nullptr, p.C, nc,
                                xs);
  for (int g = 0; g < nt; g += G) {
#pragma unroll
    for (int u = 0; u < G; ++u) load_quad<kVec>(xq + size_t(g + u) * ldx, nc, g + u < nt, xs[W - 1 + u]);
#pragma unroll
    for (int u = 0; u < G; ++u) {
      if (g + u < nt) {
        float v[4];
        pre_act<W>(wk, bc, xs, u, v);
#pragma unroll
        for (int j = 0; j < 4; ++j) v[j] = silu(v[j]);
        store_quad<kVec>(yq + size_t(g + u) * p.C, nc, v);
      }
    }
#pragma unroll
    for (int i = 0; i < W - 1; ++i)  // the window's last W−1 rows start the next group
#pragma unroll
      for (int j = 0; j < 4; ++j) xs[i][j] = xs[G + i][j];
  }
}

template <int W, bool kVec, typename TX, typename TY>
__global__ void __launch_bounds__(kQuads* kTiles, fwd_min_blocks(W))
    conv1d_silu_fwd_kernel(Conv1dParams p, const TX* __restrict__ x /* (B, L, ld_x) */,
                           const float* __restrict__ w /* (C, W) */, const float* __restrict__ bias /* (C) */,
                           const float* __restrict__ window0 /* (B, W−1, C) or null */,
                           TY* __restrict__ y /* (B, L, C) */) {
  conv1d_silu_fwd_block<W, kVec>(blockIdx, p, x, w, bias, window0, y);
}

// backward, pass 1: dx for the thread's tile; dw, dbias partials of the block (blk = b · gridDim.y +
// blockIdx.y) into part_w[blk] (C, W) (dw's layout) and part_b[blk] (C).
//   dpre[t] = dy[t] · SiLU'(pre[t]) (0 for t >= L);  dx[s] = Σ_k w[k] · dpre[s+(W−1)−k];
//   dw[k] += Σ_t dpre[t] · x[t−(W−1)+k];  dbias += Σ_t dpre[t];  x before t = 0: window0 (or 0), and
//   dwindow0[j] = dx[j − (W−1)] by the same sum (first tile only).
// bid, grid_y: blockIdx and gridDim.y, or a joined launch's decoded ones (conv1d_dt_bwd_bf16).
template <int W, bool kVec, typename TDx, typename TX>
__device__ __forceinline__ void conv1d_silu_bwd_block(uint3 bid, unsigned grid_y, const Conv1dParams& p,
                                                      const TX* __restrict__ x /* (B, L, ld_x) */,
                                                      const float* __restrict__ w /* (C, W) */,
                                                      const float* __restrict__ bias /* (C) */,
                                                      const float* __restrict__ dy /* (B, L, C) */,
                                                      TDx* __restrict__ dx /* (B, L, ld_x) */,
                                                      const float* __restrict__ window0 /* (B, W−1, C) or null */,
                                                      float* __restrict__ dwindow0 /* (B, W−1, C) or null */,
                                                      float* __restrict__ part_w /* (nblocks, C, W) */,
                                                      float* __restrict__ part_b /* (nblocks, C) */) {
  constexpr int G = kBwdGroup;
  __shared__ __align__(16) float red[kTiles][W + 1][kBlockC];
  const int c0 = bid.x * kBlockC;  // the block's first channel
  const int c = c0 + 4 * threadIdx.x;
  const int b = bid.z;
  const int t0 = bid.y * kBlockT + threadIdx.y * kTT;
  float gw[W + 1][4] = {};  // gw[k][j] = Σ_t dpre[t] · x[t−(W−1)+k] (k < W), gw[W][j] = Σ_t dpre[t]

  if (c < p.C && t0 < p.L) {
    const int nc = min(4, p.C - c), nt = min(kTT, p.L - t0);
    const int ns = nt + W - 1;            // steps t0 .. t0+ns−1: the tile and the W−1 steps whose taps reach it
    const int ne = min(ns, p.L - t0);     // of those, the steps inside the sequence (dpre = 0 after it)
    float wk[W][4], bc[4];
    load_taps<W>(w, bias, c, nc, wk, bc);
    const size_t ldx = size_t(p.ld_x);
    const TX* xq = x + (size_t(b) * p.L + t0) * ldx + c;        // x[b, t0, c]
    const float* dyq = dy + (size_t(b) * p.L + t0) * p.C + c;   // dy[b, t0, c]
    TDx* dxq = dx + (size_t(b) * p.L + t0) * ldx + c;           // dx[b, t0, c]
    float xs[W - 1 + G][4];  // xs[i] = x at t0 + g − (W−1) + i (window0 or zero before t = 0)
    float dp[W][4] = {};     // dp[i] = dpre at step t − (W−1) + i (those before t0: 0, read only for dwindow0)
    load_halo<W, W - 1 + G, kVec>(xq, ldx, t0, window0 ? window0 + size_t(b) * (W - 1) * p.C + c : nullptr, p.C,
                                  nc, xs);
    // Software pipeline: the next group's rows are loaded while this group is computed, so a thread keeps
    // its loads in flight through the arithmetic (G rows of x and of dy, 16 bytes each). bf16 x on the 8-byte
    // path stays packed until it is used (2 registers a row, not 4: unpacked at load, W = 4 spilled 16 bytes).
    constexpr bool kPacked = kVec && !std::is_same_v<TX, float>;
    float nx[kPacked ? 1 : G][4], ndy[G][4];
    uint2 nxp[kPacked ? G : 1];
    auto load_group = [&](int g) {
#pragma unroll
      for (int u = 0; u < G; ++u) {
        const bool ok = g + u < ne;
        if constexpr (kPacked)
          nxp[u] = ok ? *reinterpret_cast<const uint2*>(xq + size_t(g + u) * ldx) : make_uint2(0u, 0u);
        else load_quad<kVec>(xq + size_t(g + u) * ldx, nc, ok, nx[u]);
        load_quad<kVec>(dyq + size_t(g + u) * p.C, nc, ok, ndy[u]);
      }
    };
    load_group(0);
    for (int g = 0; g < ns; g += G) {
      float dyv[G][4];
#pragma unroll
      for (int u = 0; u < G; ++u) {
        if constexpr (kPacked) unpack_bf16x4(nxp[u], xs[W - 1 + u]);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          if constexpr (!kPacked) xs[W - 1 + u][j] = nx[u][j];
          dyv[u][j] = ndy[u][j];
        }
      }
      if (g + G < ns) load_group(g + G);
#pragma unroll
      for (int u = 0; u < G; ++u) {
        const int i = g + u;  // step t = t0 + i
        if (i < ns) {
          float d[4] = {};
          if (i < ne) {
            pre_act<W>(wk, bc, xs, u, d);
#pragma unroll
            for (int j = 0; j < 4; ++j) d[j] = dyv[u][j] * silu_grad(d[j]);
          }
          if (i < nt) {  // parameter gradients only over the thread's own tile (no double counting)
#pragma unroll
            for (int j = 0; j < 4; ++j) {
#pragma unroll
              for (int k = 0; k < W; ++k) gw[k][j] += d[j] * xs[u + k][j];
              gw[W][j] += d[j];
            }
          }
#pragma unroll
          for (int j = 0; j < 4; ++j) dp[W - 1][j] = d[j];
          // s = t − (W−1) is in the tile: dx[s] = Σ_k w[k] · dpre[t − k], and dpre[t − k] = dp[W−1−k]; in the
          // first tile, s < 0 is window row i (dpre before t = 0 is 0)
          if (i >= W - 1 || (dwindow0 && t0 == 0)) {
            float v[4];
#pragma unroll
            for (int j = 0; j < 4; ++j) {
              float acc = 0.f;
#pragma unroll
              for (int k = 0; k < W; ++k) acc += wk[k][j] * dp[W - 1 - k][j];
              v[j] = acc;
            }
            if (i >= W - 1) store_quad<kVec>(dxq + size_t(i - (W - 1)) * ldx, nc, v);
            else store_quad<kVec>(dwindow0 + (size_t(b) * (W - 1) + i) * p.C + c, nc, v);
          }
#pragma unroll
          for (int k = 0; k < W - 1; ++k)
#pragma unroll
            for (int j = 0; j < 4; ++j) dp[k][j] = dp[k + 1][j];
        }
      }
#pragma unroll
      for (int i = 0; i < W - 1; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) xs[i][j] = xs[G + i][j];
    }
  }

  // The block's tile sums, tiles in ascending order. Every thread (active or not) takes part in the barrier;
  // inactive ones contribute zeros.
#pragma unroll
  for (int k = 0; k <= W; ++k)
    *reinterpret_cast<float4*>(&red[threadIdx.y][k][4 * threadIdx.x]) =
        make_float4(gw[k][0], gw[k][1], gw[k][2], gw[k][3]);
  __syncthreads();
  const size_t blk = size_t(b) * grid_y + bid.y;
  const int nch = min(kBlockC, p.C - c0);  // the block's channels inside C
  const int tid = threadIdx.y * kQuads + threadIdx.x;
  // part_w[blk][c0 + ch][k] = part_w[blk] + c0·W + i with i = ch·W + k: the block's row slice is contiguous
  for (int i = tid; i < nch * W; i += kQuads * kTiles) {
    const int ch = i / W, k = i - ch * W;
    float s = red[0][k][ch];
#pragma unroll
    for (int r = 1; r < kTiles; ++r) s += red[r][k][ch];
    part_w[(blk * p.C + c0) * W + i] = s;
  }
  for (int ch = tid; ch < nch; ch += kQuads * kTiles) {
    float s = red[0][W][ch];
#pragma unroll
    for (int r = 1; r < kTiles; ++r) s += red[r][W][ch];
    part_b[blk * p.C + c0 + ch] = s;
  }
}

template <int W, bool kVec, typename TDx, typename TX>
__global__ void __launch_bounds__(kQuads* kTiles, bwd_min_blocks(W))
    conv1d_silu_bwd_kernel(Conv1dParams p, const TX* __restrict__ x /* (B, L, ld_x) */,
                           const float* __restrict__ w /* (C, W) */, const float* __restrict__ bias /* (C) */,
                           const float* __restrict__ dy /* (B, L, C) */, TDx* __restrict__ dx /* (B, L, ld_x) */,
                           const float* __restrict__ window0 /* (B, W−1, C) or null */,
                           float* __restrict__ dwindow0 /* (B, W−1, C) or null */,
                           float* __restrict__ part_w /* (nblocks, C, W) */,
                           float* __restrict__ part_b /* (nblocks, C) */) {
  conv1d_silu_bwd_block<W, kVec>(blockIdx, gridDim.y, p, x, w, bias, dy, dx, window0, dwindow0, part_w, part_b);
}

// window_last[b, j, c] = the input at time s = L − (W−1) + j: x for s ≥ 0, else window0's row W − 1 + s (or 0).
// One thread an element (B · (W−1) · C of them, a few KB: not worth the quads).
template <typename TX>
__global__ void window_last_kernel(Conv1dParams p, const TX* __restrict__ x /* (B, L, ld_x) */,
                                   const float* __restrict__ window0 /* (B, W−1, C) or null */,
                                   float* __restrict__ window_last /* (B, W−1, C) */) {
  const int W1 = p.W - 1;
  const size_t n = size_t(p.B) * W1 * p.C;
  for (size_t e = size_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += size_t(gridDim.x) * blockDim.x) {
    const int c = int(e % p.C), j = int((e / p.C) % W1), b = int(e / (size_t(p.C) * W1));
    const int s = p.L - W1 + j;
    window_last[e] = s >= 0        ? to_f32(x[(size_t(b) * p.L + s) * p.ld_x + c])
                     : window0     ? window0[(size_t(b) * W1 + W1 + s) * p.C + c]
                                   : 0.f;
  }
}

// The conv and the softplus joined in one grid (conv1d.h, conv1d_dt_fwd_bf16): blocks [0, conv_blocks) are the conv's
// (3-D index decoded from the flat one), the rest the softplus's, kQuads · kTiles elements each. Each job runs its own
// op's code (conv1d_silu_fwd_block, dt_softplus_value), so both outputs keep their bits; the kernel keeps the conv's
// block (128 threads) and launch bounds, the softplus's element a thread needs no more.
struct JoinGrid {
  unsigned conv_blocks, gx, gy;  // the conv's grid: gx · gy · B blocks
};
__device__ __forceinline__ uint3 conv_block_index(unsigned i, const JoinGrid& j) {
  return make_uint3(i % j.gx, (i / j.gx) % j.gy, i / (j.gx * j.gy));
}
template <int W, typename TY>
__global__ void __launch_bounds__(kQuads* kTiles, fwd_min_blocks(W))
    conv1d_dt_fwd_kernel(JoinGrid jg, Conv1dParams p, const __nv_bfloat16* __restrict__ x /* (B, L, ld_x) */,
                         const float* __restrict__ w /* (C, W) */, const float* __restrict__ bias /* (C) */,
                         const float* __restrict__ window0 /* (B, W−1, C) or null */, TY* __restrict__ y /* (B, L, C) */,
                         DtParams dp, const __nv_bfloat16* __restrict__ dt /* (M, ld_dt) */,
                         const float* __restrict__ dt_bias /* (H) */, float* __restrict__ delta /* (M, H) */) {
  if (blockIdx.x < jg.conv_blocks) {
    conv1d_silu_fwd_block<W, true>(conv_block_index(blockIdx.x, jg), p, x, w, bias, window0, y);
    return;
  }
  const long long idx = (long long)(blockIdx.x - jg.conv_blocks) * (kQuads * kTiles) + threadIdx.y * kQuads + threadIdx.x;
  if (idx < (long long)dp.M * dp.H) delta[idx] = dt_softplus_value(idx, dp.H, dp.ld_dt, dp.lo, dp.hi, dt, dt_bias);
}

// The backwards joined the same way (conv1d_dt_bwd_bf16): the softplus's blocks are (row block, head tile) pairs,
// row block fastest, each run by the conv's 128 threads (dt_softplus_bwd_block: each thread two or four slices of the
// op's 256-thread block, the same sums in the same order). The block's barrier is inside each job's own branch.
template <int W, int kTile>
__global__ void __launch_bounds__(kQuads* kTiles, bwd_min_blocks(W))
    conv1d_dt_bwd_kernel(JoinGrid jg, Conv1dParams p, const __nv_bfloat16* __restrict__ x /* (B, L, ld_x) */,
                         const float* __restrict__ w /* (C, W) */, const float* __restrict__ bias /* (C) */,
                         const float* __restrict__ dy /* (B, L, C) */, __nv_bfloat16* __restrict__ dx /* (B, L, ld_x) */,
                         const float* __restrict__ window0 /* (B, W−1, C) or null */,
                         float* __restrict__ dwindow0 /* (B, W−1, C) or null */,
                         float* __restrict__ part_w /* (conv row blocks, C, W) */,
                         float* __restrict__ part_b /* (conv row blocks, C) */, DtParams dp, int dt_row_blocks,
                         const __nv_bfloat16* __restrict__ dt /* (M, ld_dt) */, const float* __restrict__ dt_bias /* (H) */,
                         const float* __restrict__ ddelta /* (M, H) */, __nv_bfloat16* __restrict__ ddt /* (M, ld_dt) */,
                         float* __restrict__ dt_part /* (dt row blocks, H) */) {
  if (blockIdx.x < jg.conv_blocks) {
    conv1d_silu_bwd_block<W, true>(conv_block_index(blockIdx.x, jg), jg.gy, p, x, w, bias, dy, dx, window0, dwindow0,
                                   part_w, part_b);
    return;
  }
  const int j = int(blockIdx.x - jg.conv_blocks);
  dt_softplus_bwd_block<kTile, kQuads * kTiles>(j % dt_row_blocks, j / dt_row_blocks, threadIdx.y * kQuads + threadIdx.x,
                                                dp.M, dp.H, dp.ld_dt, dp.lo, dp.hi, dt, dt_bias, ddelta, ddt, dt_part);
}

// Calls f(std::integral_constant<int, W>) for the runtime width W ∈ [1, kConv1dMaxW].
template <typename F>
void dispatch_width(int W, F&& f) {
  switch (W) {
    case 1: f(std::integral_constant<int, 1>{}); break;
    case 2: f(std::integral_constant<int, 2>{}); break;
    case 3: f(std::integral_constant<int, 3>{}); break;
    case 4: f(std::integral_constant<int, 4>{}); break;
    case 5: f(std::integral_constant<int, 5>{}); break;
    case 6: f(std::integral_constant<int, 6>{}); break;
    case 7: f(std::integral_constant<int, 7>{}); break;
    case 8: f(std::integral_constant<int, 8>{}); break;
    default: require(false, "conv1d: unsupported width W=" + std::to_string(W));
  }
}

void check_params(const Conv1dParams& p) {
  require(p.B >= 0 && p.L >= 0 && p.C >= 0, "conv1d: B, L, C must be >= 0, got B=" + std::to_string(p.B) +
                                                " L=" + std::to_string(p.L) + " C=" + std::to_string(p.C));
  require(p.W >= 1 && p.W <= kConv1dMaxW, "conv1d: the GPU supports widths 1.." + std::to_string(kConv1dMaxW) +
                                              ", got W=" + std::to_string(p.W));
  require(p.ld_x >= p.C, "conv1d: ld_x (" + std::to_string(p.ld_x) + ") must be >= C (" + std::to_string(p.C) + ")");
  require(p.B <= 65535, "conv1d: B must be <= 65535 (grid z), got " + std::to_string(p.B));
  require((p.L + kBlockT - 1) / kBlockT <= 65535, "conv1d: L too long for the grid (" + std::to_string(p.L) + ")");
}

dim3 grid_of(const Conv1dParams& p) {
  return dim3((p.C + kBlockC - 1) / kBlockC, (p.L + kBlockT - 1) / kBlockT, p.B);
}

// float4 path: whole quads (C % 4 == 0), rows of x and dx starting 16-byte aligned (ld_x % 4 == 0), and
// 16-byte aligned base pointers.
bool vec_ok(const Conv1dParams& p, std::initializer_list<const void*> ptrs) {
  return p.C % 4 == 0 && p.ld_x % 4 == 0 && all_aligned16(ptrs);
}

}  // namespace

namespace {
// The softplus job a joined launch carries (conv1d.h conv1d_dt_fwd_bf16 / conv1d_dt_bwd_bf16).
struct DtRide {
  DtParams p;
  DtInputsBf16 in;
  float* delta = nullptr;                 // fwd: (M, H)
  const float* ddelta = nullptr;          // bwd: (M, H)
  float* ddt_bias = nullptr;              // bwd: (H) +=
  float* workspace = nullptr;             // bwd: dt_softplus_bwd_workspace_floats(p)
  __nv_bfloat16* ddt16 = nullptr;         // bwd: (M, ld_dt)
};

void check_dt(const DtParams& p) {
  require(p.M >= 0 && p.H >= 1 && p.ld_dt >= p.H && p.lo <= p.hi,
          "conv1d_dt: softplus params need M >= 0, H >= 1, ld_dt >= H, lo <= hi (got M=" + std::to_string(p.M) +
              " H=" + std::to_string(p.H) + " ld_dt=" + std::to_string(p.ld_dt) + ")");
}

// dtr, when non-null: softplus rides in the conv's launch where both have work and the conv takes its 16-byte path
// (the model's shapes); otherwise the two ops launch separately (the same bits either way).
template <typename TX, typename TY>
void fwd(const Conv1dParams& p, const TX* x, const Conv1dInputs<float>& in, TY* y, cudaStream_t stream,
         const DtRide* dtr = nullptr) {
  const float *w = in.w, *bias = in.bias, *win = in.window0;
  check_params(p);
  require(!in.window_last || in.window_last != in.window0,
          "conv1d_silu_fwd: window_last must not be window0 (conv1d.h)");
  if (p.B == 0 || p.C == 0) return;
  if (in.window_last && p.W > 1) {  // also for L = 0 (then window0 itself, or zeros)
    require(p.L == 0 || x, "conv1d_silu_fwd: x must be non-null");
    const size_t n = size_t(p.B) * (p.W - 1) * p.C;
    const int blocks = int(std::min<size_t>((n + 255) / 256, 1024));
    window_last_kernel<<<blocks, 256, 0, stream>>>(p, x, win, in.window_last);
    MLALPHA_CHECK_LAUNCH(stream);
  }
  if (p.L == 0) return;
  require(x && w && bias && y, "conv1d_silu_fwd: x, w, bias and y must be non-null");
  const bool vec = vec_ok(p, {x, y, win});
  if constexpr (std::is_same_v<TX, __nv_bfloat16>) {
    if (dtr && vec && (long long)dtr->p.M * dtr->p.H > 0) {
      require(dtr->in.dt && dtr->in.dt_bias && dtr->delta, "conv1d_dt_fwd_bf16: dt, dt_bias and delta must be non-null");
      const dim3 cg = grid_of(p);
      const long long dt_blocks = ((long long)dtr->p.M * dtr->p.H + kQuads * kTiles - 1) / (kQuads * kTiles);
      const long long conv_blocks = (long long)cg.x * cg.y * cg.z;
      require(conv_blocks + dt_blocks < (1ll << 31), "conv1d_dt_fwd_bf16: too many blocks for one grid");
      const JoinGrid jg{unsigned(conv_blocks), cg.x, cg.y};
      dispatch_width(p.W, [&](auto wc) {
        constexpr int W = decltype(wc)::value;
        conv1d_dt_fwd_kernel<W, TY><<<unsigned(conv_blocks + dt_blocks), dim3(kQuads, kTiles), 0, stream>>>(
            jg, p, x, w, bias, win, y, dtr->p, dtr->in.dt, dtr->in.dt_bias, dtr->delta);
        MLALPHA_CHECK_LAUNCH(stream);
      });
      return;
    }
  }
  dispatch_width(p.W, [&](auto wc) {
    constexpr int W = decltype(wc)::value;
    const dim3 grid = grid_of(p), block(kQuads, kTiles);
    if (vec)
      conv1d_silu_fwd_kernel<W, true, TX, TY><<<grid, block, 0, stream>>>(p, x, w, bias, win, y);
    else
      conv1d_silu_fwd_kernel<W, false, TX, TY><<<grid, block, 0, stream>>>(p, x, w, bias, win, y);
    MLALPHA_CHECK_LAUNCH(stream);
  });  if (dtr) dt_softplus_fwd(dtr->p, dtr->in, dtr->delta, stream);
}
}  // namespace

void conv1d_silu_fwd(const Conv1dParams& p, const Conv1dInputs<float>& in, float* y, cudaStream_t stream) {
  fwd(p, in.x, in, y, stream);
}
void conv1d_silu_fwd(const Conv1dParams& p, const __nv_bfloat16* x16, const Conv1dInputs<float>& in, float* y,
                     cudaStream_t stream) {
  fwd(p, x16, in, y, stream);
}
void conv1d_silu_fwd_bf16(const Conv1dParams& p, const __nv_bfloat16* x16, const Conv1dInputs<float>& in,
                          __nv_bfloat16* y16, cudaStream_t stream) {
  require(p.L == 0 || p.B == 0 || p.C == 0 || y16, "conv1d_silu_fwd_bf16: y16 must be non-null");
  fwd(p, x16, in, y16, stream);
}

namespace {
template <typename TY>
void fwd_dt(const Conv1dParams& p, const __nv_bfloat16* x16, const Conv1dInputs<float>& in, TY* y, const DtParams& dp,
            const DtInputsBf16& din, float* delta, cudaStream_t stream) {
  check_dt(dp);
  if (p.B == 0 || p.C == 0 || p.L == 0) {  // the conv has no grid (or only its window): two launches
    fwd(p, x16, in, y, stream);
    dt_softplus_fwd(dp, din, delta, stream);
    return;
  }
  const DtRide r{.p = dp, .in = din, .delta = delta};
  fwd(p, x16, in, y, stream, &r);
}
}  // namespace

void conv1d_dt_fwd_bf16(const Conv1dParams& p, const __nv_bfloat16* x16, const Conv1dInputs<float>& in, float* y,
                        const DtParams& dp, const DtInputsBf16& din, float* delta, cudaStream_t stream) {
  fwd_dt(p, x16, in, y, dp, din, delta, stream);
}
void conv1d_dt_fwd_bf16(const Conv1dParams& p, const __nv_bfloat16* x16, const Conv1dInputs<float>& in,
                        __nv_bfloat16* y16, const DtParams& dp, const DtInputsBf16& din, float* delta,
                        cudaStream_t stream) {
  require(p.L == 0 || p.B == 0 || p.C == 0 || y16, "conv1d_dt_fwd_bf16: y16 must be non-null");
  fwd_dt(p, x16, in, y16, dp, din, delta, stream);
}

size_t conv1d_silu_bwd_workspace_floats(const Conv1dParams& p) {
  check_params(p);
  const size_t nblocks = size_t(p.B) * size_t((p.L + kBlockT - 1) / kBlockT);
  return nblocks * size_t(p.W + 1) * size_t(p.C);
}

namespace {
template <typename TDx, typename TX>
void bwd(const Conv1dParams& p, const TX* x, const Conv1dInputs<float>& in, const float* dy, TDx* dx, float* dw,
         float* dbias, float* dwindow0, float* workspace, cudaStream_t stream, ColsumBatch* defer) {
  const float *w = in.w, *bias = in.bias, *win = in.window0;
  check_params(p);
  if (p.B == 0 || p.C == 0) return;
  if (p.L == 0) {  // dx empty; dw, dbias += empty sums; the window reaches no output
    if (dwindow0 && p.W > 1)
      MLALPHA_CUDA_CHECK(cudaMemsetAsync(dwindow0, 0, size_t(p.B) * (p.W - 1) * p.C * sizeof(float), stream));
    return;
  }
  require(x && w && bias && dy && dx && dw && dbias, "conv1d_silu_bwd: all tensors must be non-null");
  require(workspace != nullptr, "conv1d_silu_bwd: needs conv1d_silu_bwd_workspace_floats(p) floats of workspace");
  const dim3 grid = grid_of(p), block(kQuads, kTiles);
  const size_t nblocks = size_t(grid.y) * grid.z;
  require(nblocks <= 0x7fffffff && size_t(p.C) * p.W <= 0x7fffffff,
          "conv1d_silu_bwd: B · ceil(L / 128) or C · W too large");
  float* part_w = workspace;                          // (nblocks, C, W)
  float* part_b = workspace + nblocks * p.C * p.W;    // (nblocks, C)
  const bool vec = vec_ok(p, {x, dy, dx, win, dwindow0});
  dispatch_width(p.W, [&](auto wc) {
    constexpr int W = decltype(wc)::value;
    if (vec)
      conv1d_silu_bwd_kernel<W, true, TDx, TX>
          <<<grid, block, 0, stream>>>(p, x, w, bias, dy, dx, win, dwindow0, part_w, part_b);
    else
      conv1d_silu_bwd_kernel<W, false, TDx, TX>
          <<<grid, block, 0, stream>>>(p, x, w, bias, dy, dx, win, dwindow0, part_w, part_b);
    MLALPHA_CHECK_LAUNCH(stream);
  });
  colsum_add_or_defer(defer, int(nblocks), p.C * p.W, part_w, dw, stream);  // dw (C, W): the partials' rows
  colsum_add_or_defer(defer, int(nblocks), p.C, part_b, dbias, stream);
}
}  // namespace

void conv1d_silu_bwd(const Conv1dParams& p, const Conv1dInputs<float>& in, const float* dy,
                     const Conv1dGrads<float>& g, float* workspace, cudaStream_t stream, __nv_bfloat16* dx16,
                     ColsumBatch* defer) {
  if (dx16) bwd(p, in.x, in, dy, dx16, g.dw, g.dbias, g.dwindow0, workspace, stream, defer);
  else bwd(p, in.x, in, dy, g.dx, g.dw, g.dbias, g.dwindow0, workspace, stream, defer);
}
void conv1d_silu_bwd(const Conv1dParams& p, const __nv_bfloat16* x16, const Conv1dInputs<float>& in, const float* dy,
                     const Conv1dGrads<float>& g, float* workspace, cudaStream_t stream, __nv_bfloat16* dx16,
                     ColsumBatch* defer) {
  require(p.L == 0 || p.B == 0 || p.C == 0 || dx16, "conv1d_silu_bwd: bf16 x writes dx in bf16 only (dx16)");
  bwd(p, x16, in, dy, dx16, g.dw, g.dbias, g.dwindow0, workspace, stream, defer);
}

}  // namespace mlalpha::gpu

namespace mlalpha::gpu {

void conv1d_dt_bwd_bf16(const Conv1dParams& p, const __nv_bfloat16* x16, const Conv1dInputs<float>& in,
                        const float* dy, const Conv1dGrads<float>& g, float* workspace, __nv_bfloat16* dx16,
                        const DtParams& dp, const DtInputsBf16& din, const float* ddelta, float* ddt_bias,
                        float* dt_workspace, __nv_bfloat16* ddt16, cudaStream_t stream, ColsumBatch* defer) {
  check_params(p);
  check_dt(dp);
  const bool vec = p.B > 0 && p.C > 0 && p.L > 0 && dp.M > 0 && x16 && dy && dx16 &&
                   vec_ok(p, {x16, dy, dx16, in.window0, g.dwindow0});
  if (!vec) {  // the two ops' own launches, in the model's order (the softplus's partial sum recorded first)
    dt_softplus_bwd(dp, din, ddelta, {.ddt_bias = ddt_bias}, dt_workspace, stream, ddt16, defer);
    conv1d_silu_bwd(p, x16, in, dy, g, workspace, stream, dx16, defer);
    return;
  }
  require(in.w && in.bias && g.dw && g.dbias && workspace, "conv1d_dt_bwd_bf16: conv w, bias, dw, dbias and workspace "
                                                          "must be non-null");
  require(din.dt && din.dt_bias && ddelta && ddt_bias && dt_workspace && ddt16,
          "conv1d_dt_bwd_bf16: dt, dt_bias, ddelta, ddt_bias, dt_workspace and ddt16 must be non-null");
  const dim3 cg = grid_of(p);
  const size_t nblocks = size_t(cg.y) * cg.z;
  require(nblocks <= 0x7fffffff && size_t(p.C) * p.W <= 0x7fffffff,
          "conv1d_dt_bwd_bf16: B · ceil(L / 128) or C · W too large");
  float* part_w = workspace;                        // (nblocks, C, W)
  float* part_b = workspace + nblocks * p.C * p.W;  // (nblocks, C)
  const int nb = (dp.M + kDtBwdRows - 1) / kDtBwdRows;  // dt_softplus_bwd_workspace_floats' row blocks
  const bool narrow = dp.H <= 8;                        // dt_softplus.cu's bwd_tile
  const int tiles = narrow ? (dp.H + 7) / 8 : (dp.H + 31) / 32;
  const long long conv_blocks = (long long)cg.x * cg.y * cg.z;
  const long long dt_blocks = (long long)nb * tiles;
  require(conv_blocks + dt_blocks < (1ll << 31), "conv1d_dt_bwd_bf16: too many blocks for one grid");
  const JoinGrid jg{unsigned(conv_blocks), cg.x, cg.y};
  dispatch_width(p.W, [&](auto wc) {
    constexpr int W = decltype(wc)::value;
    auto launch = [&](auto kernel) {
      kernel<<<unsigned(conv_blocks + dt_blocks), dim3(kQuads, kTiles), 0, stream>>>(
          jg, p, x16, in.w, in.bias, dy, dx16, in.window0, g.dwindow0, part_w, part_b, dp, nb, din.dt, din.dt_bias,
          ddelta, ddt16, dt_workspace);
    };
    if (narrow) launch(conv1d_dt_bwd_kernel<W, 8>);
    else launch(conv1d_dt_bwd_kernel<W, 32>);
    MLALPHA_CHECK_LAUNCH(stream);
  });
  // the partial sums in the separate launches' order: ddt_bias, then dw, dbias
  colsum_add_or_defer(defer, nb, dp.H, dt_workspace, ddt_bias, stream);
  colsum_add_or_defer(defer, int(nblocks), p.C * p.W, part_w, g.dw, stream);
  colsum_add_or_defer(defer, int(nblocks), p.C, part_b, g.dbias, stream);
}

}  // namespace mlalpha::gpu

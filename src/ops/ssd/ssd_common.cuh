#pragma once
// What the SSD kernels share (ssd_fwd.cu, ssd_bwd.cu, ssd_chunks.cu, ssd_group.cu): the argument block, the
// chunk's cumulative decay, shared-memory tiles and the block-level matrix product they are built from.
//
// Matmul (state-space-dual) form. Within a chunk of T steps starting from state S_in, with the inclusive
// cumulative log-decay cs_t = A Σ_{k≤t} Δ_k (cs_{−1} = 0):
//     s_t = e^{cs_t} S_in + Σ_{j≤t} e^{cs_t − cs_j} Δ_j x_j B_jᵀ,
// so y = diag(e^{cs}) (C S_inᵀ) + (C Bᵀ ∘ Ldec) diag(Δ) X + D X with the causal decay matrix
// Ldec[i, j] = e^{cs_i − cs_j} for j ≤ i, 0 otherwise. Every quantity of the forward and the backward is a
// product of such (T, T), (T, N), (T, P) and (P, N) matrices (ssd_fwd.cu, ssd_bwd.cu), computed from shared
// memory by mm() below: no recurrence runs over the chunk, so nothing accumulates rounding step by step and
// fp32 is enough. The state entering each chunk (forward) and the adjoint state at each chunk start
// (backward) come from ssd_chunks.cu.
//
// Chunk length: T = min(Q, 64), halved while the backward's tiles exceed the shared memory a block may use
// (ssd_layout.cu); it depends on the shape only, so results never depend on the device.
//
// Products: a block (8 warps; 16 in the backward) computes one 64×64 output tile with tensor-core mma on
// fp32 tiles, in one of three modes (MmaMode, from SsdParams::precision; every kernel is a template on it):
// the 3xTF32 split (fp32 accuracy), single-pass tf32 (the model's tf32 mode, like its GEMMs) or bf16
// operands (the model's bf16 mode), always with fp32 accumulation; see mma_step(). Only the products'
// operands are rounded, in registers: the tiles, decays, states, state passing and the elementwise work
// stay fp32 in every mode. Tiles are stored row-major with a row stride ≡ 12 (mod 32) floats (tile_ld): an
// mma operand fragment reads 8 rows × 4 columns or 4 rows × 8 columns, which then fall in different banks
// (all 32 for the first, all but a few for the second).
#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>

#include "core/cuda_check.h"
#include "core/error.h"
#include "ops/common/bf16_mma.cuh"
#include "ops/common/tf32_mma.cuh"
#include "ops/common/reduce.cuh"
#include "ops/ssd/ssd.h"

namespace mlalpha::gpu::ssd_detail {

constexpr int kTile = 64;                    // rows or columns of one output tile
constexpr int kRowWarps = 4;                 // warps along an output tile's rows, 16 rows each
constexpr int kMaxChunk = 64;                // T ≤ 64: one output tile spans the chunk
constexpr int kStateCols = 2 * kTile;        // columns of N per block of the chunk-state walk (ssd_chunks.cu)
constexpr int kMinChunk = 8;
constexpr int kSmemLimitBytes = 227 * 1024;  // sm_90 opt-in maximum per block
// Warps per block of the backward kernel (ssd_bwd.cu sets MLALPHA_SSD_WARPS to it). Its tiles take
// bwd_smem_bytes (ssd_layout.cu): 221 KiB for L's layers, 157 KiB for M's, 112 KiB for S's, so for M and L
// one block runs per SM; 16 warps instead of 8 then keep
// twice as many warps per scheduler to hide the shared-memory and mma latencies (H200, L: 2.54 → 2.17 ms
// per layer, M: 0.60 → 0.49 ms; S, whose 8-warp blocks ran two per SM, lost 5%). ssd_bwd.cu caps the
// registers at 64 so that S's 16-warp blocks still run two per SM.
constexpr int kBwdWarps = 16;

// How mm() forms its products (mma_step): the 3xTF32 split (fp32 accuracy, Precision::FP32), single-pass
// tf32 (~2^-11 relative per operand, Precision::TF32) or bf16 operands (~2^-8, Precision::BF16:
// 7 stored mantissa bits against tf32's 10).
enum class MmaMode { k3xTF32, kTF32, kBF16 };

// Everything a kernel needs, passed by value.
struct Args {
  int B, L, H, P, G, N, ld;
  int T, nchunks;          // chunk length and count
  int Ts;                  // stride of the per-step arrays in shared memory: T rounded up to a multiple of 4,
                           // so that every tile after them starts 16-byte aligned (ldmatrix, cp.async 16)
  MmaMode mode;            // how the chunk products are formed (the kernels' kMode)
  int ldN, ldP, ldT;       // tile row strides for N, P and T columns (tile_ld)
  bool sin_own;            // backward: S_in has a tile of its own (staged with the others at the start)
                           // rather than replacing G_{c+1}'s after dB (when it would cost blocks per SM)
  int cluster_heads;       // backward: heads per thread-block cluster that add their dB, dC in shared
                           // memory (ssd_bwd.cu, pairs: 2); 1: every head writes its own partial
  bool vec4;               // walks (ssd_walk.cuh): every row of x, dy, B, C, S_in and of dB, dC starts 16-byte
                           // aligned with whole quads of columns (16-byte loads and stores)
  int seg_steps, nseg;     // the chunk-state walks (ssd_chunks.cu) in nseg segments of seg_steps steps
                           // (the last may be shorter); nseg = 1: one walk over all nchunks − 1 steps
  const float *x, *delta, *A_log, *Bm, *Cm, *Dskip;
  // dy (B, L, H, P). The reverse walk with bf16 inputs (SsdXbcBf16) reads dy in bf16: then this holds the address
  // of the bf16 dy (ssd_walk.cuh, dy_bf16), so that Args keeps its size, which the other kernels' code depends on
  // (one pointer more at the end changed the PTX of 15 chunk-parallel kernels, a union of the two of 21: the same
  // operations, scheduled and numbered differently).
  const float* dy;
  float* y;       // (B, L, H, P) forward output (null when y16 is set)
  __nv_bfloat16* y16 = nullptr;  // (B, L, H, P) the forward output in bf16 (bf16 precision: the gated norm's input)
  float* states;  // (B, H, nchunks, P, N) state entering each chunk
  float* cb;      // (B, nchunks, G, T, T) each chunk's C_i·B_j for j ≤ i (0 above), row stride T: computed
                  // once per group (ssd_group.cu), shared by the group's heads in the forward and backward
  float* dx;      // (B, L, ld)→(H, P)
  float* ddelta;  // (B, L, H)
  float *dB, *dC;  // (B, L, ld)→(G, N)
  float* wsG;     // (B, H, nchunks, P, N) adjoint state g at each chunk start (chunks ≥ 1)
  float* wsB;     // (B, L, H / cluster_heads, N) per-head (per-cluster) dB
  float* wsC;     // (B, L, H / cluster_heads, N) per-head (per-cluster) dC
  float* wsA;     // (B, H, nchunks) per-(b, h, chunk) dA_log partial
  float* wsD;     // (B, H, nchunks) per-(b, h, chunk) dD partial
  float* wsDX;    // (B, nchunks, H, T, T) per-head DX diag(Δ) of each chunk, row stride T (ssd_bwd.cu)
  float* wsE;     // (B, H, nchunks − 1) nseg > 1: each walk step's decay exponent summed from its segment's
                  // start (ssd_chunks.cu), in the forward's saved buffer or the backward's workspace
  // The carried state (ssd.h; null: none). The forward enters chunk 0 with h0 (saved as states[0], which the
  // backward then reads as chunk 0's S_in like any other chunk's) and writes the state after the last chunk to
  // h_last; the backward writes dh0 = a_0 g_0. All fp32 in every mode, like the chunk states.
  const float* h0;  // (B, H, P, N)
  float* h_last;    // (B, H, P, N)
  float* dh0;       // (B, H, P, N)
  bool tail;        // ssd_chunks.cu: this launch walks only the final step (into h_last or dh0), after the
                    // segments and their carries (nseg > 1)
  // A member-batched call (SsdParams::members): batch rows b of member b / member_B, whose A_log, Dskip start
  // member_stride elements after the previous member's (member_B = B, member_stride = 0 for one model).
  int member_B;
  size_t member_stride;
  // Walks only (SsdXbcBf16): x, B, C in bf16 instead of x, Bm, Cm (null then); null on every other path. Last:
  // the other fields keep their offsets.
  const __nv_bfloat16 *x16 = nullptr, *B16 = nullptr, *C16 = nullptr;
};

// Offset of batch row b's member in A_log, Dskip (Args::member_B, member_stride): 0 for one model.
__device__ __forceinline__ size_t member_offset(const Args& a, int b) {
  return size_t(b / a.member_B) * a.member_stride;
}

__host__ __device__ constexpr int ceil_div(int a, int b) { return (a + b - 1) / b; }
// Row stride of a tile with `cols` columns: the least ld ≥ cols with ld ≡ 12 (mod 32) (see the top).
__host__ __device__ constexpr int tile_ld(int cols) { return cols + ((12 - cols) % 32 + 32) % 32; }
__host__ __device__ constexpr int scalar_stride(int T) { return (T + 3) / 4 * 4; }  // Args::Ts

// Every kernel is instantiated for the model's layer shapes — chunks of 64 with (N, P) = (128, 64), (64, 64)
// or (64, 32) — with those sizes as compile-time constants, and once generic (kN = kP = 0: every size
// from Args). A kernel starts with `const Args a = fixed_dims<kN, kP>(args)`: with the tile strides known,
// the compiler folds the operand addresses of the products into the load instructions' offsets and
// unrolls their loops (without it the products' pointer arithmetic is about half of the backward's
// instructions on 'L', Nsight Compute). The arithmetic is the same in both; with_dims() on the host picks the instance.
template <int kN, int kP>
__host__ __device__ __forceinline__ Args fixed_dims(Args a) {
  if constexpr (kN > 0) {
    a.T = kMaxChunk, a.Ts = scalar_stride(kMaxChunk), a.N = kN, a.P = kP;
    a.ldN = tile_ld(kN), a.ldP = tile_ld(kP), a.ldT = tile_ld(kMaxChunk);
  }
  return a;
}
// The fixed-shape instances also come with kFullChunks = true when every chunk has kMaxChunk steps (L a
// multiple of 64, as in the benchmark configurations): the chunk length is then a constant too
// (chunk_steps), which removes the bounds checks of the products and their last partial k-step and lets the
// compiler unroll the loops over a chunk's steps.
template <class F>
void with_dims(const Args& a, F f) {
  auto is = [&](int n, int p) { return a.T == kMaxChunk && a.N == n && a.P == p; };
  using I128 = std::integral_constant<int, 128>;
  using I64 = std::integral_constant<int, 64>;
  using I32 = std::integral_constant<int, 32>;
  using I0 = std::integral_constant<int, 0>;
  auto go = [&](auto n, auto p) {
    if (a.L % kMaxChunk == 0) f(n, p, std::true_type{});
    else f(n, p, std::false_type{});
  };
  if (is(128, 64)) go(I128{}, I64{});
  else if (is(64, 64)) go(I64{}, I64{});
  else if (is(64, 32)) go(I64{}, I32{});
  else f(I0{}, I0{}, std::false_type{});
}
// Steps of chunk c (starting at step t0 = c·T; the last chunk may be shorter): a constant in the
// kFullChunks instances.
template <bool kFullChunks>
__device__ __forceinline__ int chunk_steps(const Args& a, int c, int t0) {
  if constexpr (kFullChunks) return kMaxChunk;
  else return min(a.L, (c + 1) * a.T) - t0;
}
// Row stride ≡ 8 (mod 32) for tiles that are only read as 4 rows × 8 columns (operand element (k, j) at
// row k, column j, as in ssd_chunks.cu): those reads then fall in 32 different banks.
__host__ __device__ inline int tile_ld_kn(int cols) { return cols + ((8 - cols) % 32 + 32) % 32; }
__device__ __forceinline__ size_t row_of(const Args& a, int b, int t) { return size_t(b) * a.L + t; }
__device__ __forceinline__ int chunk_begin(const Args& a, int c) { return c * a.T; }
// (T, T) tiles, row stride T: chunk c's C·Bᵀ of group g, and its DX diag(Δ) of head h.
__device__ __forceinline__ float* cb_at(const Args& a, int b, int c, int g) {
  return a.cb + ((size_t(b) * a.nchunks + c) * a.G + g) * size_t(a.T) * a.T;
}
__device__ __forceinline__ float* dx_at(const Args& a, int b, int c, int h) {
  return a.wsDX + ((size_t(b) * a.nchunks + c) * a.H + h) * size_t(a.T) * a.T;
}
// The heads of group g: [⌈gH/G⌉, ⌈(g+1)H/G⌉) (head h reads group ⌊hG/H⌋).
__host__ __device__ inline int group_head_lo(int g, int H, int G) { return (g * H + G - 1) / G; }
// (P, N) block of a per-(b, h, chunk) state array.
__device__ __forceinline__ float* state_at(const Args& a, float* base, int b, int h, int c) {
  return base + ((size_t(b) * a.H + h) * a.nchunks + c) * size_t(a.P) * a.N;
}

// Everything below up to the host side depends on the block size: each kernel file may set
// MLALPHA_SSD_WARPS before including this header (default 8), and gets its own copy of these helpers in an
// inline namespace named after it (so two files with different sizes define different functions).
#ifndef MLALPHA_SSD_WARPS
#define MLALPHA_SSD_WARPS 8
#endif
#define MLALPHA_SSD_CAT2(a, b) a##b
#define MLALPHA_SSD_CAT(a, b) MLALPHA_SSD_CAT2(a, b)
inline namespace MLALPHA_SSD_CAT(warps, MLALPHA_SSD_WARPS) {

constexpr int kThreads = 32 * MLALPHA_SSD_WARPS;      // one 64×64 output tile per block
constexpr int kColWarps = kThreads / 32 / kRowWarps;  // warps along its columns
constexpr int kWarpCols = kTile / kColWarps;          // columns per warp
constexpr int kSub = kWarpCols / 8;                   // m16n8 subtiles per warp
static_assert(kColWarps >= 1 && kTile % kColWarps == 0 && kWarpCols % 8 == 0, "4, 8, 16 or 32 warps");
using Acc = float[kSub][4];                           // a thread's accumulators (mma layout)

// ----- staging (a warp per row, lanes along the row: coalesced) -----
// rows × cols of a row-major global matrix (row stride src_ld) into a tile (row stride dst_ld) with
// asynchronous copies (cp.async): every copy of the block is in flight at once instead of one load per
// thread at a time. stage_wait() then __syncthreads() before the tile is read.
__device__ __forceinline__ void cp_async4(float* dst, const float* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(unsigned(__cvta_generic_to_shared(dst))), "l"(src));
}
__device__ __forceinline__ void cp_async16(unsigned dst, const float* src) {  // both 16-byte aligned
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src));
}
// Four floats a copy when every row starts 16-byte aligned on both sides (the model's shapes: N, P and the
// row strides multiples of 4), with the row pointers stepped instead of recomputed: the issue-bound kernels
// spent ~15% of their instructions on one-float copies and their 64-bit address arithmetic. A row of c4
// quads takes min(32, c4) lanes; when c4 divides 32, a warp copies 32 / c4 rows at a time. Otherwise one
// float a copy.
__device__ inline void stage(const float* src, size_t src_ld, int rows, int cols, float* dst, int dst_ld) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, c4 = cols >> 2;
  const bool vec = (cols | dst_ld) % 4 == 0 && src_ld % 4 == 0 && c4 > 0 &&
                   ((reinterpret_cast<uintptr_t>(src) | reinterpret_cast<uintptr_t>(dst)) & 15) == 0;
  if (vec && (c4 >= 32 || 32 % c4 == 0)) {
    const int lanes = min(c4, 32), rpw = 32 / lanes;       // lanes per row, rows per warp and step
    const int sub = lane / lanes, q0 = lane % lanes;       // this lane's row in the step, first quad
    const int r0 = warp * rpw + sub, rstep = (kThreads / 32) * rpw;
    const float* s = src + size_t(r0) * src_ld + 4 * q0;
    unsigned d = unsigned(__cvta_generic_to_shared(dst + r0 * dst_ld + 4 * q0));
    const size_t sstep = size_t(rstep) * src_ld;
    const unsigned dstep = unsigned(rstep * dst_ld * sizeof(float));
    for (int r = r0; r < rows; r += rstep, s += sstep, d += dstep)
      for (int q = 0; q + q0 < c4; q += 32) cp_async16(d + 16u * q, s + 4 * q);
  } else {
    for (int r = warp; r < rows; r += kThreads / 32)
      for (int k = lane; k < cols; k += 32) cp_async4(dst + r * dst_ld + k, src + size_t(r) * src_ld + k);
  }
}
__device__ __forceinline__ void stage_wait() { asm volatile("cp.async.wait_all;" ::: "memory"); }
// For a pipeline: stage_commit() closes the copies issued so far into a group; stage_wait_but_one() waits
// for all groups but the newest (the prefetch still in flight).
__device__ __forceinline__ void stage_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
__device__ __forceinline__ void stage_wait_but_one() { asm volatile("cp.async.wait_group 1;" ::: "memory"); }
// Waits for all groups but the kPending newest (a kernel that stages its tiles in the order it reads them).
template <int kPending>
__device__ __forceinline__ void stage_wait_pending() {
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending) : "memory");
}
// Column slices of the (B, L, ld) activation for steps [t0, t0 + rows) of batch b.
__device__ inline const float* group_rows(const Args& a, const float* m, int b, int g, int t0) {
  return m + row_of(a, b, t0) * a.ld + size_t(g) * a.N;
}
__device__ inline const float* bc_rows(const Args& a, const float* m, int b, int h, int t0) {
  return group_rows(a, m, b, h * a.G / a.H, t0);  // head h reads group ⌊hG/H⌋
}
__device__ inline const float* x_rows(const Args& a, int b, int h, int t0) {
  return a.x + row_of(a, b, t0) * a.ld + size_t(h) * a.P;
}
__device__ inline const float* dy_rows(const Args& a, int b, int h, int t0) {
  return a.dy + (row_of(a, b, t0) * a.H + h) * a.P;
}

// The chunk's Δ_t and cs_t = A Σ_{k≤t} Δ_k, the sum in double (e^{cs_i − cs_j} is then accurate to fp32
// rounding however long the chunk and strong the decay) by warp 0: lane l adds steps 2l and 2l + 1, then a
// shuffle scan over the lanes (a fixed order). T ≤ 64. Synchronises. load_deltas() gives lane l its two
// Δ (0 past the chunk), so that a pipeline can load them ahead (chunk_decay_of).
struct LaneDeltas {
  float d0 = 0.f, d1 = 0.f;
};
__device__ inline LaneDeltas load_deltas(const Args& a, int b, int h, int t0, int tc) {
  const int t = 2 * (threadIdx.x & 31);
  LaneDeltas d;
  if (t < tc) d.d0 = a.delta[row_of(a, b, t0 + t) * a.H + h];
  if (t + 1 < tc) d.d1 = a.delta[row_of(a, b, t0 + t + 1) * a.H + h];
  return d;
}
__device__ inline void chunk_decay_of(LaneDeltas d, float A, int tc, float* sdt, double* scs) {
  if (threadIdx.x < 32) {
    const int t = 2 * threadIdx.x;
    const double s0 = d.d0, s1 = s0 + double(d.d1);
    const double incl = warp_inclusive_scan(s1), excl = incl - s1;
    if (t < tc) sdt[t] = d.d0, scs[t] = double(A) * (excl + s0);
    if (t + 1 < tc) sdt[t + 1] = d.d1, scs[t + 1] = double(A) * incl;
  }
  __syncthreads();
}
__device__ inline void chunk_decay(const Args& a, float A, int b, int h, int t0, int tc, float* sdt, double* scs) {
  chunk_decay_of(threadIdx.x < 32 ? load_deltas(a, b, h, t0, tc) : LaneDeltas{}, A, tc, sdt, scs);
}
// e^{cs_i − cs_j} (≤ 1 for j ≤ i).
__device__ __forceinline__ float decay(const double* scs, int i, int j) { return expf(float(scs[i] - scs[j])); }

// ----- the block product -----
// One 64×64 output tile per call, on the tensor cores. A warp owns rows i0 + 16·wr + [0, 16) and columns
// j0 + W·wc + [0, W) of it, W / 8 m16n8k8 subtiles (WarpTile<W>); by default the block's warps split the
// tile, warp w at wr = w % 4, wc = w / 4 with W = kWarpCols. Lane (g = lane / 4, q = lane % 4) holds
// acc[s][e] for subtile s at row i0 + 16·wr + g + 8·(e / 2), column j0 + W·wc + 8s + 2q + (e % 2) (the mma
// accumulator layout). The operands are fp32 tiles in shared memory; mma_step says how each mode rounds
// them. Fixed order throughout: bit-reproducible in every mode.
template <int kW = kWarpCols>
struct WarpTile {
  static constexpr int kWidth = kW, kS = kW / 8;  // columns, subtiles
  using Acc = float[kS][4];
  int wr, wc;
  // (wc masked although threadIdx.x < kThreads: the compiler then knows every column is inside the tile)
  __device__ WarpTile() : wr((threadIdx.x >> 5) & 3), wc((threadIdx.x >> 7) & (kColWarps - 1)) {}
  __device__ WarpTile(int r, int c) : wr(r), wc(c) {}
  __device__ int row(int i0, int e) const { return i0 + 16 * wr + ((threadIdx.x & 31) >> 2) + 8 * (e >> 1); }
  __device__ int col(int j0, int s, int e) const { return j0 + kW * wc + 8 * s + 2 * (threadIdx.x & 3) + (e & 1); }
};
// One k-step of 8: the A fragment (rows ilo, ihi; columns q, q + 4: av = (g, q), (g + 8, q), (g, q + 4),
// (g + 8, q + 4), the tf32 m16n8k8 layout) and the kSub B fragments (bv[s] = rows q, q + 4 of column g),
// into each subtile:
// - k3xTF32: each operand split into tf32 hi + lo and the product taken as lo·hi + hi·lo + hi·hi; the
//   dropped terms are ~2^-21 relative, so results match an fp32 product to a few ulps (the tests'
//   tolerances are those of the fp32 kernels).
// - kTF32: only hi·hi, the single-pass product of tf32 mode, ~2^-11 relative per operand as in cuBLAS's
//   tf32 GEMMs.
// - kBF16: the operands rounded to bf16 (≤ 2^-8 relative each) for one bf16 m16n8k8 mma, fp32 accumulation.
//   Its lane holds physical columns 2q, 2q + 1 of A and rows 2q, 2q + 1 of B (bf16_mma.cuh) where the tf32
//   layout has q, q + 4. A product sums over k, so any permutation of k applied to A's columns and B's rows
//   alike leaves it unchanged: with physical k 2q ↔ logical q and 2q + 1 ↔ logical q + 4 (a bijection of
//   0 … 7) the tf32-layout fragments pack as they are, A's rows as (av[0], av[2]) and (av[1], av[3]), B as
//   (bv[s][0], bv[s][1]). So mm() loads the same fragments in every mode.
template <int kS>
__device__ __forceinline__ void pack_bf16_step(const float (&av)[4], const float (&bv)[kS][2], uint32_t (&ap)[2],
                                               uint32_t (&bp)[kS]) {
  ap[0] = pack_bf16x2(av[0], av[2]);  // row g, logical k = q, q + 4
  ap[1] = pack_bf16x2(av[1], av[3]);  // row g + 8
#pragma unroll
  for (int s = 0; s < kS; ++s) bp[s] = pack_bf16x2(bv[s][0], bv[s][1]);
}
template <MmaMode kMode, int kS>
__device__ __forceinline__ void mma_step(float (&acc)[kS][4], const float (&av)[4], const float (&bv)[kS][2]) {
  if constexpr (kMode == MmaMode::kBF16) {
    uint32_t ap[2], bp[kS];
    pack_bf16_step(av, bv, ap, bp);
#pragma unroll
    for (int s = 0; s < kS; ++s) mma_bf16_k8(acc[s], ap, bp[s]);
  } else {
    constexpr bool kExact = kMode == MmaMode::k3xTF32;
    uint32_t ah[4], al[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      if constexpr (kExact) split_tf32(av[e], ah[e], al[e]);
      else ah[e] = round_tf32(av[e]);
    }
#pragma unroll
    for (int s = 0; s < kS; ++s) {
      uint32_t bh[2], bl[2];
      if constexpr (kExact) {
        split_tf32(bv[s][0], bh[0], bl[0]);
        split_tf32(bv[s][1], bh[1], bl[1]);
        mma_tf32(acc[s], al, bh);
        mma_tf32(acc[s], ah, bl);
      } else {
        bh[0] = round_tf32(bv[s][0]), bh[1] = round_tf32(bv[s][1]);
      }
      mma_tf32(acc[s], ah, bh);
    }
  }
}
// Two consecutive k-steps of 8 (fragments 0 at k0, 1 at k0 + 8) as one bf16 m16n8k16 mma, half the mma of
// two mma_step<kBF16>: its A registers are m16n8k8's at columns 2q, 2q + 1 and then at 2q + 8, 2q + 9, its
// B registers likewise at rows 2q, 2q + 1 and 2q + 8, 2q + 9 (bf16_mma.cuh), so the permutation of
// mma_step maps each half to one step's fragments.
template <int kS>
__device__ __forceinline__ void mma_step_bf16_pair(float (&acc)[kS][4], const float (&av0)[4],
                                                   const float (&bv0)[kS][2], const float (&av1)[4],
                                                   const float (&bv1)[kS][2]) {
  uint32_t ap0[2], bp0[kS], ap1[2], bp1[kS];
  pack_bf16_step(av0, bv0, ap0, bp0);
  pack_bf16_step(av1, bv1, ap1, bp1);
  const uint32_t ap[4] = {ap0[0], ap0[1], ap1[0], ap1[1]};
#pragma unroll
  for (int s = 0; s < kS; ++s) {
    const uint32_t bp[2] = {bp0[s], bp1[s]};
    mma_bf16_k16(acc[s], ap, bp);
  }
}
// ldmatrix with 32-bit elements: block m of the x4 (x2) form is 8 rows of 4 floats whose row addresses come
// from lanes 8m … 8m + 7 (16-byte aligned); lane (g = lane / 4, q = lane % 4) receives row g, float q of
// each block, which is the position of mma operand element (g, q). So one instruction loads a whole A
// fragment (rows g, g + 8 × columns q, q + 4) or the B fragments of two subtiles, where four or two
// plain loads each were needed, whenever the operand's k runs along its rows.
__device__ __forceinline__ void ldsm_x4(float (&r)[4], unsigned addr) {
  uint32_t u[4];
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(u[0]), "=r"(u[1]), "=r"(u[2]), "=r"(u[3])
               : "r"(addr));
#pragma unroll
  for (int e = 0; e < 4; ++e) r[e] = __uint_as_float(u[e]);
}
__device__ __forceinline__ void ldsm_x2(float (&r)[2], unsigned addr) {
  uint32_t u[2];
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];" : "=r"(u[0]), "=r"(u[1]) : "r"(addr));
  r[0] = __uint_as_float(u[0]), r[1] = __uint_as_float(u[1]);
}
// acc += A·B over the thread's outputs for tiles in shared memory: A (M, K) row-major with row stride lda,
// or stored transposed (element (i, k) at A[k·lda + i]) when kTransA; B (K, Ncols) row-major with stride
// ldb, or transposed (element (k, j) at B[j·ldb + k]) when kTransB. Rows i ≥ M and columns j ≥ Ncols read
// row or column 0 instead (any finite or non-finite value there only reaches outputs that for_out skips),
// so only the last partial k-step needs a bounds check. An operand whose k runs along its rows (A plain,
// B transposed) is loaded with ldmatrix: every tile starts 16-byte aligned and its row stride is a
// multiple of 4 floats (Args::Ts, tile_ld), as ldmatrix requires; the others one float a load.
// With a KScale ks (KScale::kOn), A's column k is scaled by ks(k) as it is loaded: A diag(ks) B without a
// pass over a tile in shared memory and the barrier after it. In kBF16 mode the full k-steps go in pairs,
// one m16n8k16 mma each (mma_step_bf16_pair), and a last unpaired one and the partial step as m16n8k8.
struct NoKScale {
  static constexpr bool kOn = false;
  __device__ float operator()(int) const { return 1.f; }
};
struct KScale {
  static constexpr bool kOn = true;
  const float* s;  // (K)
  __device__ float operator()(int k) const { return s[k]; }
};
template <MmaMode kMode, bool kTransA, bool kTransB, int kW = kWarpCols, class KS = NoKScale>
__device__ __forceinline__ void mm(typename WarpTile<kW>::Acc& acc, const float* A, int lda, const float* B, int ldb,
                                   int i0, int M, int j0, int Ncols, int K, WarpTile<kW> w = WarpTile<kW>(),
                                   KS ks = KS()) {
  constexpr int kSub = WarpTile<kW>::kS;
  constexpr bool kSmA = !kTransA, kSmB = kTransB;  // loaded with ldmatrix
  static_assert(kSub == 1 || kSub % 2 == 0, "B fragments go in pairs (x4) or alone (x2)");
  constexpr int kSmB4 = kSub / 2, kSmBn = (kSub + 1) / 2;  // x4 loads, all ldmatrix loads of B per k-step
  const int lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
  int ilo = w.row(i0, 0), ihi = ilo + 8;
  ilo = ilo < M ? ilo : 0, ihi = ihi < M ? ihi : 0;
  // Element offsets of the thread's operands at k = 0 and their step along k.
  const float* alo = kTransA ? A + q * lda + ilo : A + ilo * lda + q;
  const float* ahi = kTransA ? A + q * lda + ihi : A + ihi * lda + q;
  const int ak = kTransA ? lda : 1;  // stride of A along k
  const int jw = w.col(j0, 0, 0) - 2 * q;  // the warp's first column
  const float* bp[kSub];
#pragma unroll
  for (int s = 0; s < kSub; ++s) {
    int j = jw + 8 * s + g;
    j = j < Ncols ? j : 0;
    bp[s] = kTransB ? B + j * ldb + q : B + q * ldb + j;
  }
  const int bk = kTransB ? 1 : ldb;  // stride of B along k
  // ldmatrix row addresses, stepped along k: A's block m = lane / 8 is rows 8·(m % 2) + [0, 8) of the warp's
  // 16 rows, columns 4·(m / 2) + [0, 4); B's block m of x4 number t is subtile 2t + m / 2, columns
  // 4·(m % 2) + [0, 4) (x2: lanes 0–15 count, subtile kSub − 1).
  unsigned a_sm = 0, b_sm[kSmBn] = {};
  if constexpr (kSmA) {
    int i = w.row(i0, 0) - g + (lane & 7) + 8 * ((lane >> 3) & 1);
    i = i < M ? i : 0;
    a_sm = unsigned(__cvta_generic_to_shared(A + i * lda + 4 * (lane >> 4)));
  }
  if constexpr (kSmB) {
#pragma unroll
    for (int t = 0; t < kSmBn; ++t) {
      const int s = t < kSmB4 ? 2 * t + (lane >> 4) : kSub - 1;
      int j = jw + 8 * s + (lane & 7);
      j = j < Ncols ? j : 0;
      b_sm[t] = unsigned(__cvta_generic_to_shared(B + j * ldb + 4 * ((lane >> 3) & 1)));
    }
  }
  // One full k-step of 8 at k0: the fragments loaded (A's columns scaled) and the pointers stepped.
  auto load_step = [&](int k0, float (&av)[4], float (&bv)[kSub][2]) {
    if constexpr (kSmA) {
      ldsm_x4(av, a_sm);
      a_sm += 32u;
    } else {
      av[0] = alo[0], av[1] = ahi[0], av[2] = alo[4 * ak], av[3] = ahi[4 * ak];
      alo += 8 * ak, ahi += 8 * ak;
    }
    if constexpr (kSmB) {
#pragma unroll
      for (int t = 0; t < kSmB4; ++t) {
        float r[4];
        ldsm_x4(r, b_sm[t]);
        bv[2 * t][0] = r[0], bv[2 * t][1] = r[1], bv[2 * t + 1][0] = r[2], bv[2 * t + 1][1] = r[3];
      }
      if constexpr (kSub % 2 == 1) ldsm_x2(bv[kSub - 1], b_sm[kSmBn - 1]);
#pragma unroll
      for (int t = 0; t < kSmBn; ++t) b_sm[t] += 32u;
    } else {
#pragma unroll
      for (int s = 0; s < kSub; ++s) bv[s][0] = bp[s][0], bv[s][1] = bp[s][4 * bk], bp[s] += 8 * bk;
    }
    if constexpr (KS::kOn) {  // elements 0, 1 of the A fragment are at k0 + q, elements 2, 3 at k0 + q + 4
      const float s0 = ks(k0 + q), s1 = ks(k0 + q + 4);
      av[0] *= s0, av[1] *= s0, av[2] *= s1, av[3] *= s1;
    }
  };
  int k0 = 0;
  if constexpr (kMode == MmaMode::kBF16) {  // pairs of k-steps as one m16n8k16 mma; a last full k8 step below
    for (; k0 + 16 <= K; k0 += 16) {
      float av0[4], bv0[kSub][2], av1[4], bv1[kSub][2];
      load_step(k0, av0, bv0);
      load_step(k0 + 8, av1, bv1);
      mma_step_bf16_pair(acc, av0, bv0, av1, bv1);
    }
  }
  for (; k0 + 8 <= K; k0 += 8) {
    float av[4], bv[kSub][2];
    load_step(k0, av, bv);
    mma_step<kMode>(acc, av, bv);
  }
  if (k0 < K) {  // the last partial step: k ≥ K counts as 0 (the ldmatrix operands' pointers were not stepped)
    const int ka = kSmA ? k0 * ak : 0, kb = kSmB ? k0 * bk : 0;
    const bool v0 = k0 + q < K, v1 = k0 + q + 4 < K;
    float av[4], bv[kSub][2];
    av[0] = v0 ? alo[ka] : 0.f, av[1] = v0 ? ahi[ka] : 0.f;
    av[2] = v1 ? alo[ka + 4 * ak] : 0.f, av[3] = v1 ? ahi[ka + 4 * ak] : 0.f;
#pragma unroll
    for (int s = 0; s < kSub; ++s)
      bv[s][0] = v0 ? bp[s][kb] : 0.f, bv[s][1] = v1 ? bp[s][kb + 4 * bk] : 0.f;
    if constexpr (KS::kOn) {
      const float s0 = v0 ? ks(k0 + q) : 0.f, s1 = v1 ? ks(k0 + q + 4) : 0.f;
      av[0] *= s0, av[1] *= s0, av[2] *= s1, av[3] *= s1;
    }
    mma_step<kMode>(acc, av, bv);
  }
}
template <int kS>
__device__ __forceinline__ void zero(float (&acc)[kS][4]) {
#pragma unroll
  for (int s = 0; s < kS; ++s)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[s][e] = 0.f;
}
// Calls f(s, e, i, j) for the thread's outputs with i < M and j < Ncols.
template <int kW = kWarpCols, class F>
__device__ __forceinline__ void for_out(int i0, int M, int j0, int Ncols, F f, WarpTile<kW> w = WarpTile<kW>()) {
#pragma unroll
  for (int s = 0; s < WarpTile<kW>::kS; ++s)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int i = w.row(i0, e), j = w.col(j0, s, e);
      if (i < M && j < Ncols) f(s, e, i, j);
    }
}
// Calls f(s, h, i, j, two) for the pairs of adjacent outputs (acc[s][2h], acc[s][2h + 1]) at row i, columns
// j and j + 1 with i < M and j < Ncols; two: j + 1 < Ncols as well. One 8-byte store per pair instead of two
// 4-byte ones (store_pair).
template <int kW = kWarpCols, class F>
__device__ __forceinline__ void for_pairs(int i0, int M, int j0, int Ncols, F f, WarpTile<kW> w = WarpTile<kW>()) {
#pragma unroll
  for (int s = 0; s < WarpTile<kW>::kS; ++s)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int i = w.row(i0, 2 * h), j = w.col(j0, s, 0);
      if (i < M && j < Ncols) f(s, h, i, j, j + 1 < Ncols);
    }
}
// dst[0] = v0 and, if two, dst[1] = v1: as one 8-byte store where dst is 8-byte aligned.
__device__ __forceinline__ void store_pair(float* dst, float v0, float v1, bool two) {
  if (two && (reinterpret_cast<uintptr_t>(dst) & 7) == 0) {
    *reinterpret_cast<float2*>(dst) = make_float2(v0, v1);
  } else {
    dst[0] = v0;
    if (two) dst[1] = v1;
  }
}
// The same pair rounded to bf16 (round to nearest even, as __float2bfloat16_rn), as one 4-byte store where aligned:
// y's bf16 form.
__device__ __forceinline__ void store_pair(__nv_bfloat16* dst, float v0, float v1, bool two) {
  if (two && (reinterpret_cast<uintptr_t>(dst) & 3) == 0) {
    *reinterpret_cast<__nv_bfloat162*>(dst) = __floats2bfloat162_rn(v0, v1);
  } else {
    dst[0] = __float2bfloat16_rn(v0);
    if (two) dst[1] = __float2bfloat16_rn(v1);
  }
}
// Per-row sums of values produced in for_out over one or more column tiles: add(e, v) in the callback,
// end_tile() after each tile (sums the 4 lanes of a quad), then write(dst) stores each warp column's sum at
// dst[(w / 4)·ld + i] (kColWarps partials per row, added in order by partial_sum after a __syncthreads).
struct RowSums {
  float part[2] = {0.f, 0.f}, total[2] = {0.f, 0.f};
  __device__ __forceinline__ void add(int e, float v) { part[e >> 1] += v; }
  __device__ __forceinline__ void end_tile() {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      total[h] += lane_group_sum<4>(part[h]);
      part[h] = 0.f;
    }
  }
  __device__ __forceinline__ void write(float* dst, int ld, int M) {
    write(dst, ld, M, WarpTile<>(), threadIdx.x >> 7);
  }
  // The sums of a warp at rows WarpTile::row into partial slot `slot`.
  template <int kW>
  __device__ __forceinline__ void write(float* dst, int ld, int M, WarpTile<kW> w, int slot) {
    if ((threadIdx.x & 3) == 0)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int i = w.row(0, 2 * h);
        if (i < M) dst[slot * ld + i] = total[h];
      }
  }
};

// Σ_k src[k·ld + i] for k < kParts, in order: the per-warp partials RowSums writes.
template <int kParts>
__device__ __forceinline__ float partial_sum(const float* src, int ld, int i) {
  float v = src[i];
#pragma unroll
  for (int k = 1; k < kParts; ++k) v += src[k * ld + i];
  return v;
}

// The block sums of reduce.cuh over this file's block: `red` holds kThreads / 32 values (block_sum), `red2`
// 2·kThreads / 32 (block_sum2_first: results in thread 0 only, one barrier).
template <typename T>
__device__ inline T block_sum(T v, T* red) {
  return gpu::block_sum<kThreads / 32>(v, red);
}
__device__ inline void block_sum2_first(float& u, float& v, float* red2) {
  gpu::block_sum2_first<kThreads / 32>(u, v, red2, red2 + kThreads / 32);
}

}  // inline namespace warps<N>

// ----- host side -----
void validate(const SsdParams& p);
// The chunk length and strides from the shape only (so results never depend on the device).
Args make_layout(const SsdParams& p);
// The op's inputs into the argument block.
// The checks of a call with bf16 x, B, C (SsdXbcBf16): the walks take p (which implies bf16 precision), the
// three bf16 pointers are given and the fp32 ones are not (one source for each, never a silent choice).
void require_xbc16(const SsdParams& p, const SsdInputs<float>& in, const SsdXbcBf16& xbc, const char* op);
inline void set_inputs(Args& a, const SsdInputs<float>& in) {
  a.x = in.x, a.delta = in.delta, a.A_log = in.A_log, a.Bm = in.Bm, a.Cm = in.Cm, a.Dskip = in.Dskip;
  a.h0 = in.h0, a.h_last = in.h_last;
}
// Dynamic shared memory of each kernel for a layout.
size_t fwd_smem_bytes(const Args& a);
size_t bwd_smem_bytes(const Args& a);
size_t states_smem_bytes(const Args& a);
// Offset (floats) of the per-chunk C·Bᵀ tiles (Args::cb) in the forward's saved buffer, after the states.
size_t saved_cb_offset(const Args& a);
// Offsets (floats) of the backward's scratch regions (Args::wsDX, wsG, wsB, wsC, wsA, wsD), 16-byte aligned.
struct BwdWorkspace {
  size_t dx, g, b, c, a, d, e, total;
};
// Offset (floats) of the forward's wsE in its saved buffer, after the C·Bᵀ tiles.
size_t saved_e_offset(const Args& a);
// Floats of wsE: B · H · (nchunks − 1) when the walks are segmented, else 0.
size_t walk_exponent_floats(const Args& a);
BwdWorkspace bwd_workspace(const Args& a);
// Launches pick(mode), mode = std::integral_constant<MmaMode, a.mode> (a kernel's kMode is
// decltype(mode)::value), with `smem` bytes of dynamic shared memory, above the 48 KiB
// default where needed, in thread-block clusters of `cluster` blocks where that is not (1, 1, 1).
template <class Pick>
void launch_kernel(const Args& a, Pick pick, dim3 grid, int threads, size_t smem, cudaStream_t stream,
                   dim3 cluster = dim3(1, 1, 1)) {
  auto go = [&](auto mode) {
    const auto kernel = pick(mode);
    MLALPHA_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    if (cluster.x * cluster.y * cluster.z == 1) {
      kernel<<<grid, threads, smem, stream>>>(a);
    } else {
      cudaLaunchConfig_t cfg{};
      cfg.gridDim = grid, cfg.blockDim = dim3(threads), cfg.dynamicSmemBytes = smem, cfg.stream = stream;
      cudaLaunchAttribute attr{};
      attr.id = cudaLaunchAttributeClusterDimension;
      attr.val.clusterDim.x = cluster.x, attr.val.clusterDim.y = cluster.y, attr.val.clusterDim.z = cluster.z;
      cfg.attrs = &attr, cfg.numAttrs = 1;
      MLALPHA_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, a));
    }
    MLALPHA_CHECK_LAUNCH(stream);
  };
  switch (a.mode) {
    case MmaMode::k3xTF32: go(std::integral_constant<MmaMode, MmaMode::k3xTF32>{}); break;
    case MmaMode::kTF32: go(std::integral_constant<MmaMode, MmaMode::kTF32>{}); break;
    case MmaMode::kBF16: go(std::integral_constant<MmaMode, MmaMode::kBF16>{}); break;
  }
}

// ssd_bwd.cu: dB, dC of group g = Σ over its `parts` per-head (or per-cluster) partials (B·L rows, (rows,
// parts, N) each): runs of `run` partials in order, then the runs in order (run 1: one sum in order);
// dA_log[h] += Σ_{b, c} wsA[b, h, c], dD[h] += Σ_{b, c} wsD[b, h, c] in a fixed order.
void group_sum(int rows, int parts, int G, int N, int ld, int run, const float* wsB, const float* wsC, float* dB,
               float* dC, cudaStream_t stream);
// A member-batched call (SsdParams::members) sums each member's own B / members rows of partials into its dA_log,
// dD at m·member_stride, in the order of a call on that member alone.
void param_reduce(int B, int H, int nchunks, const float* wsA, const float* wsD, float* dA_log, float* dD,
                  cudaStream_t stream, int members = 1, size_t member_stride = 0);
// ssd_layout.cu: whether p runs on the chunk walks (ssd.h: SsdAlgo; validates p).
bool uses_walk(const SsdParams& p);

// ssd_chunks.cu. Forward: states[c] = the state entering chunk c (states[0] = h0, or 0), by the pass
// S_{c+1} = e^{A Σ_{t∈c} Δ_t} S_c + Σ_j e^{cs_last − cs_j} Δ_j x_j B_jᵀ over the chunks in order; with
// a.h_last, S_nchunks into it. Backward: wsG[c] = g at the first step of chunk c ≥ 1, by
// G_c = e^{A Σ_{t=cT+1}^{(c+1)T} Δ_t} G_{c+1} + Σ_i e^{cs_i − cs_0} dy_i C_iᵀ over the chunks in reverse; with
// a.dh0, dh0 = a_0 G_0 = e^{cs_last + A Δ_T} G_1 + Σ_i e^{cs_i} dy_i C_iᵀ (chunk 0's cs).
void chunk_entry_states(const Args& a, cudaStream_t stream);
void chunk_adjoint_states(const Args& a, cudaStream_t stream);
// ssd_group.cu: the products a group's heads share. chunk_cb: a.cb ← each chunk's C·Bᵀ. group_dx_products:
// a.dB += (Σ_h DX_h diag(Δ_h))ᵀ C and a.dC += (Σ_h DX_h diag(Δ_h)) B per group, from a.wsDX.
void chunk_cb(const Args& a, cudaStream_t stream);
void group_dx_products(const Args& a, cudaStream_t stream);

}  // namespace mlalpha::gpu::ssd_detail

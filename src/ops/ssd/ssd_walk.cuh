#pragma once
// What the SSD chunk walks share (ssd_fwd_walk.cu, ssd_bwd_walk.cu).
//
// A walk is one block per (b, h) that visits the chunks of T = ssd_chunk_len steps in order (forward) or in
// reverse (backward) and carries the chunk state (forward) or the adjoint state (backward) in fp32
// registers, in the mma accumulator layout, from one chunk to the next. Everything inside a chunk is the
// matmul form of ssd_common.cuh; C·Bᵀ and the decays are recomputed in both directions, so the only saved
// tensor is the state entering each chunk (fp32, written by the forward walk, read by the backward walk).
//
// Tiles. Every chunk tile has kRows = 64 rows (a chunk's steps; rows past a short last chunk, or past
// T < 64, are zeros) and its columns padded with zeros to the kernel's kP (head dim: 32 or 64) or kN
// (state: 64 or 128). With zero padding every product is exact without bounds checks: padded steps carry
// Δ = 0, so the cumulative decay stays flat and finite past the chunk, and their rows of x, dy, B, C are 0.
// The tiles hold bf16 in bf16 mode (m16n8k16 mma, operands through ldmatrix / ldmatrix.trans: mm16 below)
// and fp32 in fp32 and tf32 mode (ssd_common.cuh's mm(): 3xTF32 or tf32 m16n8k8). Inputs arrive in fp32;
// staging loads them into registers (16-byte loads, several in flight) and writes the tile's type, so the
// bf16 rounding happens once, where the chunk-parallel kernels rounded each fragment as they loaded it.
//
// Warps. A block has kWarps = 4 · (kN / 64) warps. A 64-row product gives warp w rows 16 (w % 4) + [0, 16)
// and column block w / 4 of its output; the (kP, kN) state is split into kP / 16 row blocks and
// kWarps / (kP / 16) column blocks. Fixed orders everywhere: bit-reproducible, no atomics.
#include <cuda_bf16.h>

#include <initializer_list>
#include <type_traits>

#include "ops/ssd/ssd_common.cuh"

namespace mlalpha::gpu::ssd_detail::walk {

constexpr int kRows = kMaxChunk;  // tile rows (64): a chunk's steps, zeros past its end
// The walks run at most this many chunks per (b, h) (ssd_uses_walk): longer windows keep the chunk-parallel
// path with its segmented state walks (few (b, h) chains of many steps would leave the GPU idle).
constexpr int kMaxWalkChunks = 64;

using bf16 = __nv_bfloat16;
template <MmaMode kMode>
using Elem = std::conditional_t<kMode == MmaMode::kBF16, bf16, float>;

// Row stride (elements) of a tile of `cols` columns: fp32 tiles as ssd_common.cuh's (≡ 12 mod 32 floats, what
// mm() expects); bf16 tiles 16 bytes longer than their row, so that the 8 rows an ldmatrix reads start in 8
// different 16-byte bank groups.
template <typename E>
__host__ __device__ constexpr int ld_of(int cols) {
  if constexpr (std::is_same_v<E, float>) return tile_ld(cols);
  else return cols + 8;
}

// ----- element access (tiles of either type; values in fp32) -----
__device__ __forceinline__ float bf_lo(uint32_t u) { return __uint_as_float(u << 16); }
__device__ __forceinline__ float bf_hi(uint32_t u) { return __uint_as_float(u & 0xffff0000u); }
__device__ __forceinline__ float ld1(const float* p) { return *p; }
__device__ __forceinline__ float ld1(const bf16* p) { return __bfloat162float(*p); }
// Two adjacent elements; p 8-byte (fp32) or 4-byte (bf16) aligned.
__device__ __forceinline__ float2 ld2(const float* p) { return *reinterpret_cast<const float2*>(p); }
__device__ __forceinline__ float2 ld2(const bf16* p) {
  const uint32_t u = *reinterpret_cast<const uint32_t*>(p);
  return make_float2(bf_lo(u), bf_hi(u));
}
__device__ __forceinline__ void st2(float* p, float a, float b) { *reinterpret_cast<float2*>(p) = make_float2(a, b); }
__device__ __forceinline__ void st2(bf16* p, float a, float b) { *reinterpret_cast<uint32_t*>(p) = pack_bf16x2(a, b); }
// Four; p 16-byte (fp32) or 8-byte (bf16) aligned.
__device__ __forceinline__ void st4(float* p, float4 v) { *reinterpret_cast<float4*>(p) = v; }
__device__ __forceinline__ void st4(bf16* p, float4 v) {
  *reinterpret_cast<uint2*>(p) = make_uint2(pack_bf16x2(v.x, v.y), pack_bf16x2(v.z, v.w));
}
__device__ __forceinline__ void st1(float* p, float v) { *p = v; }
__device__ __forceinline__ void st1(bf16* p, float v) { *p = __float2bfloat16_rn(v); }
// Eight bf16 already rounded (a bf16 source, SsdXbcBf16), p 16-byte aligned: copied, the bits st4 of their fp32
// originals would write.
__device__ __forceinline__ void st4(bf16* p, uint4 v) { *reinterpret_cast<uint4*>(p) = v; }

// A source element of a staged matrix (fp32, or bf16 widened exactly) and the 4-element load of the vec path.
__device__ __forceinline__ float ldg1(const float* p) { return __ldg(p); }
__device__ __forceinline__ float ldg1(const bf16* p) { return __bfloat162float(__ldg(p)); }
// One 16-byte load of consecutive source elements: a float4 of 4 fp32, or a uint4 of 8 bf16 (kPerLoad).
template <typename S>
using Quad = std::conditional_t<std::is_same_v<S, float>, float4, uint4>;
template <typename S>
constexpr int kPerLoad = std::is_same_v<S, float> ? 4 : 8;

// ----- staging -----
// Tile rows [0, kR) × columns [0, kC) (row stride dld) from a row-major fp32 or bf16 matrix S (row stride sld):
// element (r, c) for r < rows and c < cols, 0 elsewhere. vec: cols, sld and src's offset are multiples of 4 (fp32)
// or 8 (bf16) elements and src is 16-byte aligned (Args::vec4): 16-byte loads, all of a thread's in flight before
// the first store: a bf16 tile takes half the loads (and registers) of its fp32 original. A bf16 source goes to bf16 tiles only (bf16 mode), copied bit for bit: the same
// bits as its fp32 original staged through st4 / st1's round to nearest even.
template <int kR, int kC, int kTh, typename E, typename S>
__device__ __forceinline__ void stage_tile(E* dst, int dld, const S* __restrict__ src, size_t sld, int rows,
                                           int cols, bool vec) {
  static_assert(std::is_same_v<S, float> || std::is_same_v<E, bf16>, "bf16 sources fill bf16 tiles only");
  // The thread index through an opaque move: the per-element offsets below are then recomputed at each call
  // (a few integer ops) rather than hoisted out of the walk's chunk loop, where they held dozens of registers
  // for the whole walk (spilled in the 'L' reverse walk).
  int tid = threadIdx.x;
  asm volatile("" : "+r"(tid));
  if (vec) {
    constexpr int kE = kPerLoad<S>, kQ = kC / kE, kPer = kR * kQ / kTh;
    static_assert(kC % kE == 0 && (kR * kQ) % kTh == 0, "whole loads, the same count for every thread");
    using V = Quad<S>;
    V v[kPer];
#pragma unroll
    for (int u = 0; u < kPer; ++u) {
      const int it = tid + u * kTh, r = it / kQ, c = kE * (it % kQ);
      v[u] = r < rows && c < cols ? __ldg(reinterpret_cast<const V*>(src + size_t(r) * sld + c)) : V{};
    }
#pragma unroll
    for (int u = 0; u < kPer; ++u) {
      const int it = tid + u * kTh, r = it / kQ, c = kE * (it % kQ);
      st4(dst + r * dld + c, v[u]);
    }
  } else {
    for (int it = tid; it < kR * kC; it += kTh) {
      const int r = it / kC, c = it % kC;
      if constexpr (std::is_same_v<S, float>) {
        st1(dst + r * dld + c, r < rows && c < cols ? __ldg(src + size_t(r) * sld + c) : 0.f);
      } else {  // the bf16 bits copied (0 is +0.0)
        const unsigned short* s16 = reinterpret_cast<const unsigned short*>(src);
        reinterpret_cast<unsigned short*>(dst)[r * dld + c] =
            r < rows && c < cols ? __ldg(s16 + size_t(r) * sld + c) : (unsigned short)0;
      }
    }
  }
}

// A bf16 tile from a bf16 source with asynchronous copies (cp.async, 16 bytes: no registers hold the data), zeros
// (src-size 0) past rows, cols; the vec layout of stage_tile (cols, sld multiples of 8, src 16-byte aligned).
// stage_commit() / stage_wait*() (ssd_common.cuh), then a barrier, before the tile is read.
template <int kR, int kC, int kTh>
__device__ __forceinline__ void stage_tile_async(bf16* dst, int dld, const bf16* __restrict__ src, size_t sld,
                                                 int rows, int cols) {
  int tid = threadIdx.x;
  asm volatile("" : "+r"(tid));
  constexpr int kQ = kC / 8, kPer = kR * kQ / kTh;
  static_assert(kC % 8 == 0 && (kR * kQ) % kTh == 0, "whole loads, the same count for every thread");
#pragma unroll
  for (int u = 0; u < kPer; ++u) {
    const int it = tid + u * kTh, r = it / kQ, c = 8 * (it % kQ);
    const bool in = r < rows && c < cols;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(
                     unsigned(__cvta_generic_to_shared(dst + r * dld + c))),
                 "l"(in ? src + size_t(r) * sld + c : src), "r"(in ? 16 : 0));
  }
}

// One thread's share of a tile staged through registers (vec4 only: 16-byte loads of 4 fp32 or 8 bf16, S as
// stage_tile's): load() issues the loads of the (kR, kC) tile of a row-major matrix (zeros past rows, cols),
// store() writes them to the tile. A walk issues every tile of the next chunk at once at the end of a chunk
// step, so that their latency overlaps the step's last barrier, and stores them after it. A bf16 source holds
// half the loads and registers.
template <int kR, int kC, int kTh, typename S = float>
struct TileLoad {
  static constexpr int kE = kPerLoad<S>, kQ = kC / kE, kPer = kR * kQ / kTh;
  static_assert(kC % kE == 0 && (kR * kQ) % kTh == 0, "whole loads, the same count for every thread");
  using V = Quad<S>;
  V v[kPer];
  __device__ __forceinline__ void load(const S* __restrict__ src, size_t sld, int rows, int cols) {
    int tid = threadIdx.x;
    asm volatile("" : "+r"(tid));  // offsets recomputed here, not held through the walk (stage_tile)
#pragma unroll
    for (int u = 0; u < kPer; ++u) {
      const int it = tid + u * kTh, r = it / kQ, c = kE * (it % kQ);
      v[u] = r < rows && c < cols ? __ldg(reinterpret_cast<const V*>(src + size_t(r) * sld + c)) : V{};
    }
  }
  template <typename E>
  __device__ __forceinline__ void store(E* dst, int dld) const {
    static_assert(std::is_same_v<S, float> || std::is_same_v<E, bf16>, "bf16 sources fill bf16 tiles only");
    int tid = threadIdx.x;
    asm volatile("" : "+r"(tid));
#pragma unroll
    for (int u = 0; u < kPer; ++u) {
      const int it = tid + u * kTh, r = it / kQ, c = kE * (it % kQ);
      st4(dst + r * dld + c, v[u]);
    }
  }
};

// The walks' x, B, C source: fp32 (Args::x, Bm, Cm) or, kIn16, bf16 (Args::x16, B16, C16; SsdXbcBf16). A
// compile-time choice like the forward's kY16.
template <bool kIn16>
using InElem = std::conditional_t<kIn16, bf16, float>;
template <bool kIn16>
__device__ __forceinline__ const InElem<kIn16>* in_cols(const float* f32, const bf16* b16) {
  if constexpr (kIn16) return b16;
  else return f32;
}

// The reverse walk's bf16 dy (B, L, H, P) where it reads x, B, C in bf16 (kIn16): Args::dy holds its address then
// (ssd_bwd_walk sets it so; Args keeps its layout for every other kernel).
__device__ __forceinline__ const bf16* dy_bf16(const Args& a) { return reinterpret_cast<const bf16*>(a.dy); }

// ----- the chunk's decays -----
// The causal decay e^{cs_i − cs_j} (j ≤ i) of the walks. fp32 and tf32 mode: ssd_common.cuh's decay(), the
// difference taken in double (fp32 accuracy however strong the decay). bf16 mode: 2^{u_i − u_j} with
// u_t = log2(e) cs_t in fp32 (warp 0 writes them beside cs) by one ex2.approx: an error ~|u| 2^-23 in the
// exponent (≤ 2.4e-4 relative in the strongest decay the tests use, against bf16's 2^-9 per operand) for
// three instructions instead of ~20, in the walks' busiest elementwise loops.
__device__ __forceinline__ float ex2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
constexpr double kLog2e = 1.4426950408889634;
template <MmaMode kMode>
__device__ __forceinline__ float walk_decay(const double* scs, const float* su, int i, int j) {
  if constexpr (kMode == MmaMode::kBF16) return ex2_approx(su[i] - su[j]);
  else return decay(scs, i, j);
}

// Warp 0: lane l takes steps 2l, 2l + 1 of the 64 tile rows (Δ = 0 past the chunk, as load_deltas gives), writes
// Δ_t to sdt, cs_t = A Σ_{k≤t} Δ_k to scs (the sum in double, as chunk_decay_of) and log2(e) cs_t to su, for all
// 64 rows; returns cs_last = cs_63 = cs_{tc−1} to every lane.
__device__ __forceinline__ double walk_cumsum(LaneDeltas d, float A, float* sdt, double* scs, float* su) {
  const int t = 2 * (threadIdx.x & 31);
  const double s0 = d.d0, s1 = s0 + double(d.d1);
  const double incl = warp_inclusive_scan(s1), excl = incl - s1;
  sdt[t] = d.d0, sdt[t + 1] = d.d1;
  const double c0 = double(A) * (excl + s0), c1 = double(A) * incl;
  scs[t] = c0, scs[t + 1] = c1;
  su[t] = float(c0 * kLog2e), su[t + 1] = float(c1 * kLog2e);  // walk_decay's bf16 exponents
  return double(A) * __shfl_sync(kWarpMask, incl, 31);
}

// e^{x} of a per-step decay exponent x ≤ 0: in double as the chunk-parallel kernels (fp32, tf32 mode), or in bf16
// mode as 2^{u} with u = log2(e) x in fp32 (walk_decay).
template <MmaMode kMode>
__device__ __forceinline__ float walk_exp(double x) {
  if constexpr (kMode == MmaMode::kBF16) return ex2_approx(float(x * kLog2e));
  else return float(exp(x));
}

// ----- bf16 tile products (bf16 mode) -----
__device__ __forceinline__ unsigned smem_u32(const void* p) { return unsigned(__cvta_generic_to_shared(p)); }
__device__ __forceinline__ void ldsm4(uint32_t (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldsm4t(uint32_t (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
// acc += A·B on bf16 tiles for the warp's 16 rows r0 = 16·w.wr + [0, 16) and kW columns c0 = kW·w.wc + [0, kW)
// of the output (WarpTile's accumulator layout), K a multiple of 16, no bounds (zero-padded tiles). Operand
// layouts as mm()'s: A (M, K) row-major, or transposed (element (i, k) at A[k·lda + i]) when kTransA; B (K, N)
// row-major, or transposed (element (k, j) at B[j·ldb + k]) when kTransB. Fragments (PTX ISA, m16n8k16 .bf16,
// lane g = lane / 4, q = lane % 4): A {(g, 2q..2q+1), (g+8, 2q..), (g, 2q+8..), (g+8, 2q+8..)}, B {(k = 2q..2q+1,
// n = g), (k = 2q+8.., g)}. An ldmatrix x4 gives lane (g, q) row g, elements 2q, 2q+1 of each of its four 8×8
// matrices (lanes 8m … 8m+7 address the rows of matrix m); .trans gives row 2q and 2q+1 of column g. So:
//   A plain:  matrices (rows 0–7, k 0–7), (rows 8–15, k 0–7), (rows 0–7, k 8–15), (rows 8–15, k 8–15);
//   A trans:  memory rows are k: (k 0–7, i 0–7), (k 0–7, i 8–15), (k 8–15, i 0–7), (k 8–15, i 8–15), .trans;
//   B trans:  memory rows are j: (j 0–7, k 0–7), (j 0–7, k 8–15), (j 8–15, k 0–7), (j 8–15, k 8–15): the b0, b1
//             of two n8 subtiles;
//   B plain:  memory rows are k: (k 0–7, j 0–7), (k 8–15, j 0–7), (k 0–7, j 8–15), (k 8–15, j 8–15), .trans.
// KScale ks scales A's column k by ks(k) in registers (k = 2q, 2q+1 of each 8-wide half of the k-step).
// kSwzA: A is a swizzled 64-wide tile (swz64 below; lda = 64), not a padded one.
template <bool kTransA, bool kTransB, int kW, class KS = NoKScale, bool kSwzA = false>
__device__ __forceinline__ void mm16(typename WarpTile<kW>::Acc& acc, const bf16* A, int lda, const bf16* B, int ldb,
                                     int K, WarpTile<kW> w, KS ks = KS()) {
  constexpr int kS = kW / 8;
  static_assert(kS % 2 == 0, "subtiles in pairs (one ldmatrix x4 of B each)");
  int lane = threadIdx.x & 31;
  asm volatile("" : "+r"(lane));  // the addresses recomputed per product, not held through the walk (stage_tile)
  const int r0 = 16 * w.wr, c0 = kW * w.wc;
  const int l7 = lane & 7, l8 = (lane >> 3) & 1, l16 = lane >> 4;
  unsigned a_addr, a_step;
  if constexpr (kSwzA) {
    // The rows an ldmatrix lane addresses have row & 7 = l7 (r0 and k0 are multiples of 16), so the 16-byte
    // chunk it reads sits at chunk ^ l7: plain, chunk k0 / 8 + l16 of row r0 + l7 + 8 l8 (set per k-step below);
    // transposed, the fixed chunk r0 / 8 + l8 of rows k0 + l7 + 8 l16, one constant step a k-step as padded.
    if constexpr (!kTransA) {
      a_addr = smem_u32(A + (r0 + l7 + 8 * l8) * lda);
      a_step = 0;
    } else {
      a_addr = smem_u32(A + (l7 + 8 * l16) * lda + 8 * ((r0 / 8 + l8) ^ l7));
      a_step = unsigned(16 * lda * sizeof(bf16));
    }
  } else if constexpr (!kTransA) {
    a_addr = smem_u32(A + (r0 + l7 + 8 * l8) * lda + 8 * l16);
    a_step = 16 * sizeof(bf16);
  } else {
    a_addr = smem_u32(A + (l7 + 8 * l16) * lda + r0 + 8 * l8);
    a_step = unsigned(16 * lda * sizeof(bf16));
  }
  unsigned b_addr[kS / 2], b_step;
#pragma unroll
  for (int t = 0; t < kS / 2; ++t) {
    if constexpr (kTransB) b_addr[t] = smem_u32(B + (c0 + 16 * t + l7 + 8 * l16) * ldb + 8 * l8);
    else b_addr[t] = smem_u32(B + (l7 + 8 * l8) * ldb + c0 + 16 * t + 8 * l16);
  }
  if constexpr (kTransB) b_step = 16 * sizeof(bf16);
  else b_step = unsigned(16 * ldb * sizeof(bf16));
  const int q2 = 2 * (lane & 3);
#pragma unroll
  for (int k0 = 0; k0 < K; k0 += 16) {
    uint32_t a[4];
    if constexpr (kSwzA && !kTransA) ldsm4(a, a_addr + 16u * unsigned((k0 / 8 + l16) ^ l7));
    else if constexpr (kTransA) ldsm4t(a, a_addr);
    else ldsm4(a, a_addr);
    a_addr += a_step;
    if constexpr (KS::kOn) {
      const float s0 = ks(k0 + q2), s1 = ks(k0 + q2 + 1), s2 = ks(k0 + q2 + 8), s3 = ks(k0 + q2 + 9);
      a[0] = pack_bf16x2(bf_lo(a[0]) * s0, bf_hi(a[0]) * s1);
      a[1] = pack_bf16x2(bf_lo(a[1]) * s0, bf_hi(a[1]) * s1);
      a[2] = pack_bf16x2(bf_lo(a[2]) * s2, bf_hi(a[2]) * s3);
      a[3] = pack_bf16x2(bf_lo(a[3]) * s2, bf_hi(a[3]) * s3);
    }
#pragma unroll
    for (int t = 0; t < kS / 2; ++t) {
      uint32_t b[4];
      if constexpr (kTransB) ldsm4(b, b_addr[t]);
      else ldsm4t(b, b_addr[t]);
      b_addr[t] += b_step;
      const uint32_t b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
      mma_bf16_k16(acc[2 * t], a, b0);
      mma_bf16_k16(acc[2 * t + 1], a, b1);
    }
  }
}

// A swizzled 64-wide bf16 tile (rows of 128 bytes, no padding): element (i, j) sits in 16-byte chunk
// (j / 8) ^ (i % 8) of row i, so the 8 rows an ldmatrix reads, and the 8 rows of an mma tile's pair stores,
// fall in 8 different bank groups as the padded tiles' do, in 1 KiB less a 64-row tile.
__host__ __device__ constexpr int swz64(int i, int j) { return 64 * i + 8 * ((j >> 3) ^ (i & 7)) + (j & 7); }

// acc += A·B for the warp's part of a tile product in the walk's mode: bf16 tiles through mm16, fp32 tiles
// through mm() (3xTF32 or tf32). K: a multiple of 16 (of 8 in fp32). kSwzA (bf16 only): A is a swz64 tile.
template <MmaMode kMode, bool kTransA, bool kTransB, int kW, class KS = NoKScale, bool kSwzA = false>
__device__ __forceinline__ void wmm(typename WarpTile<kW>::Acc& acc, const Elem<kMode>* A, int lda,
                                    const Elem<kMode>* B, int ldb, int K, WarpTile<kW> w, KS ks = KS()) {
  if constexpr (kMode == MmaMode::kBF16) {
    mm16<kTransA, kTransB, kW, KS, kSwzA>(acc, A, lda, B, ldb, K, w, ks);
  } else {
    static_assert(!kSwzA, "swizzled tiles are bf16");
    constexpr int kAll = 1 << 20;  // no row or column is out of bounds in a padded tile
    mm<kMode, kTransA, kTransB, kW>(acc, A, lda, B, ldb, 0, kAll, 0, kAll, K, w, ks);
  }
}

// The thread index through an opaque move. The walks take it at the top of every chunk step and derive every
// lane-dependent offset from it there: offsets derived from threadIdx.x are loop-invariant, and the compiler
// hoisted dozens of them out of the chunk loop, holding registers (and spilling) through the whole walk.
__device__ __forceinline__ int opaque_tid() {
  int tid = threadIdx.x;
  asm volatile("" : "+r"(tid));
  return tid;
}
// WarpTile whose row and column offsets come from a lane given at construction (opaque_tid) rather than from
// threadIdx.x. Passed to mm() and mm16() it is its WarpTile (they only read wr and wc, or threadIdx.x).
template <int kW>
struct LaneTile : WarpTile<kW> {
  int lane;
  __device__ LaneTile(int r, int c, int lane_) : WarpTile<kW>(r, c), lane(lane_) {}
  __device__ int row(int i0, int e) const { return i0 + 16 * this->wr + (lane >> 2) + 8 * (e >> 1); }
  __device__ int col(int j0, int s, int e) const { return j0 + kW * this->wc + 8 * s + 2 * (lane & 3) + (e & 1); }
};

// Calls f(s, hv, i, j) for each pair of adjacent outputs (acc[s][2hv], acc[s][2hv + 1]) of a warp's tile: row
// i, columns j, j + 1 (j even).
template <class Tile, class F>
__device__ __forceinline__ void for_pairs_all(Tile w, F f) {
#pragma unroll
  for (int s = 0; s < Tile::kS; ++s)
#pragma unroll
    for (int hv = 0; hv < 2; ++hv) f(s, hv, w.row(0, 2 * hv), w.col(0, s, 0));
}

// The (kP, kN) state tile of a walk block: which warp holds which block of it.
template <int kP, int kN, int kWarps>
struct StateLayout {
  static constexpr int kRowBlocks = kP / 16, kColBlocks = kWarps / kRowBlocks, kW = kN / kColBlocks;
  static_assert(kWarps % kRowBlocks == 0 && kN % kColBlocks == 0 && kW % 16 == 0, "state split");
  using Tile = LaneTile<kW>;
  using Acc = typename Tile::Acc;
  __device__ static Tile tile(int tid) {
    const int warp = tid >> 5;
    return Tile(warp % kRowBlocks, warp / kRowBlocks, tid & 31);
  }
};

// The tile shape instances (kP, kN) of the walks: P ≤ 32 with N ≤ 64, else P ≤ 64 with N ≤ 64 or ≤ 128.
// f(std::integral_constant kP, kN).
template <class F>
void with_walk_dims(int P, int N, F f) {
  using I32 = std::integral_constant<int, 32>;
  using I64 = std::integral_constant<int, 64>;
  using I128 = std::integral_constant<int, 128>;
  if (P <= 32 && N <= 64) f(I32{}, I64{});
  else if (N <= 64) f(I64{}, I64{});
  else f(I64{}, I128{});
}

// ----- host side -----
// The shapes the walks take: P ≤ 64, N ≤ 128 (the tile instances) and at most kMaxWalkChunks chunks of T.
bool walk_shape(const SsdParams& p, int T);
// Heads per thread-block cluster of the reverse walk: the largest of 8, 4, 2 that divides the heads of a group
// (when H is a multiple of G), else 1.
int cluster_heads(int H, int G);
// Clusters of 2 heads (4 partials a group of 8, which group_sum adds) where the GPU cannot hold all of the reverse
// walk's clusters of cluster_heads(H, G) at once but can hold all of its clusters of 2 (ssd_bwd_walk.cu). The
// sums have the same order either way, so this changes no bit; it costs the partials' scratch and group_sum.
constexpr bool kPairsWhereLargerTakeTwoRounds = true;
// ssd_walk_bwd_force_cluster_heads's value (0: the run-time choice).
int forced_cluster_heads();
// Whether the clusters of cs heads are whole groups (dB, dC written directly) or partials for group_sum.
inline bool whole_groups(int H, int G, int cs) { return H % G == 0 && H / G == cs; }
// The reverse walk's scratch (offsets in floats, 16-byte aligned): wsA, wsD (B, H); with partials (not whole
// groups) wsB, wsC (B·L, H / cs, N) each.
struct Workspace {
  size_t a, d, b, c, total;
  bool partials;
};
Workspace workspace(const SsdParams& p);
// Args::vec4 for p and the pointers the walk reads or writes by rows.
bool vec4_ok(const SsdParams& p, std::initializer_list<const void*> rows);
// The same where x, B, C are bf16 (SsdXbcBf16), staged 8 to a 16-byte load: ld, P and N multiples of 8 too.
bool vec4_ok_xbc16(const SsdParams& p, std::initializer_list<const void*> rows);
// ssd_fwd and ssd_bwd on the walks (ssd_fwd_walk.cu, ssd_bwd_walk.cu), after validation.
// y16 non-null: y written in bf16 there instead (y not written).
// xbc16 non-null: x, B, C read in bf16 from it (in.x, in.Bm, in.Cm unused; bf16 mode only).
void ssd_fwd_walk(const SsdParams& p, const SsdInputs<float>& in, const SsdXbcBf16* xbc16, float* y,
                  __nv_bfloat16* y16, float* saved, cudaStream_t stream);
// xbc16 non-null: dy read in bf16 from dy16 too (dy unused): both or neither. defer: ssd.h SsdParamDefer.
void ssd_bwd_walk(const SsdParams& p, const SsdInputs<float>& in, const SsdXbcBf16* xbc16, const float* saved,
                  const float* dy, const __nv_bfloat16* dy16, const SsdGrads<float>& g, float* workspace,
                  cudaStream_t stream, const SsdParamDefer* defer);

}  // namespace mlalpha::gpu::ssd_detail::walk

// One Mamba2 layer of a bar (mamba_step.h) as ONE kernel: h ← h + out_proj(gated_norm(SSM(conv(in_proj(
// RMSNorm(h)))))) for a tile of R instruments (R = 8, or 4 on bars of fewer than 256 instruments, where more and
// shorter blocks pay), computed by a thread-block cluster of H blocks, one per head.
// Block h of a tile's cluster:
//   1. RMSNorm of the tile's rows (every block of the cluster, the same arithmetic), then its in_proj columns:
//      z and x of head h (P each), its share of the B|C channels (nbc = ⌈2GN/H⌉), Δ of head h (FusedShape) —
//      on the tensor cores, transposed: projᵀ (nc, rows) = W_h (nc, D)·RMSNorm(h)ᵀ (D, rows), m16n8k8 tiles in
//      3xTF32 (fragment_product below) with the tile's rows as the 8 columns of an n8 tile;
//   2. the conv step + SiLU on its x and B|C channels (the window shifted where present), Δ = softplus;
//   3. cluster barrier; B and C of its group gathered from their owners' shared memory (distributed smem);
//   4. the SSM step of head h for the tile's rows (state read once, written once where present), the gate
//      u = (y + D x) ⊙ SiLU(z), v = u ⊙ gnorm_w, the head's Σ_p u_p², and its partial out_proj product
//      part_hᵀ (D, rows) = W_out[:, hP : hP + P] (D, P)·vᵀ (P, rows), the same 3xTF32 tiles;
//   5. cluster barrier; for its D/H output columns: 1/rms per group from the heads' Σu² (heads in order),
//      out = Σ_g rstd_g · Σ_{h∈g} part_h (groups and heads in order), h ← h + out; a last barrier before exit
//      (no block leaves while another reads its shared memory).
// Every sum has a fixed order that depends on the model's dimensions only, never on the instrument count or a
// row's place in its tile, so an instrument's bits are the same at any count (the remap test): a product's k-steps
// go in a fixed order set by D or P alone, and a tensor-core output does not depend on the other columns of its
// tile. The arithmetic is not the unfused path's (its tiles are (rows, columns), K in chunks): both are within fp32
// rounding of the CPU stepper.
#include <cooperative_groups.h>

#include <cmath>
#include <string>

#include "core/cuda_check.h"
#include "core/error.h"
#include "ops/activations.h"
#include "ops/common/reduce.cuh"
#include "ops/mamba_step/step_common.cuh"

namespace mlalpha::gpu {

namespace cg = cooperative_groups;

namespace {

using namespace step_detail;

constexpr float kEps = 1e-5f;          // every RMSNorm of the model (DESIGN section 1)
constexpr int kMaxRows = 8;            // instruments a cluster (the tile) on large bars: weights read once per 8
constexpr int kSmallRows = 4;          // … on bars of fewer than kLargeFrom instruments: twice the clusters
constexpr int kLargeFrom = 256;
constexpr int kFusedThreads = 256;     // 8 warps; warp r owns row r where a phase goes by rows
constexpr int kFusedWarps = kFusedThreads / 32;
constexpr int kMaxClusterHeads = 8;    // the portable cluster size: one block per head
constexpr int kMaxTaps = 7;            // W − 1, as the unfused path
constexpr int kMaxStateRegs = 32;      // state floats a thread holds for a batch of rows
// Weight slices at most this many floats are staged in shared memory (cp.async, before the wait); larger ones
// are read from L2 in the product loops. Either way the same products in the same order: the same bits.
constexpr int kStageInFloats = 12 * 1024, kStageOutFloats = 8 * 1024;
static_assert(kMaxRows <= kFusedWarps, "the norm and Σu² phases give each row a warp");
static_assert(kMaxRows <= 8, "a tile's rows are the 8 columns of an n8 tensor-core tile");
constexpr int kFrag = 32 * 4;  // floats of one m16n8k8 operand in fragment order: 32 lanes × 4
// k-steps of a product whose loads are in flight at once (fragment_product's KA): one where both weight slices are
// staged in shared memory (a short latency; fewer registers), eight where a slice is read from L2.
constexpr int kAheadShared = 1, kAheadL2 = 4;

// Per-block shape and the shared-memory plan (floats; every array starts on 16 bytes).
struct FusedShape {
  int nbc = 0;  // B|C channels a block owns: [h·nbc, (h+1)·nbc) of the 2GN (the last ones may be padding)
  int nch = 0;  // conv channels a block owns: x of its head (P), then its B|C share
  int nc = 0;   // in_proj columns a block computes: z (P) | x (P) | B|C share (nbc) | Δ (1)
  int dc = 0;   // output columns a block finishes: [h·dc, (h+1)·dc) ∩ [0, D)
  // The products as m16n8k8 tiles: in_proj mt_in × ks_in (columns by 16, D by 8), out_proj mt_out × ks_out
  // (D by 16, P by 8); each padded with zeros.
  int mt_in = 0, ks_in = 0, mt_out = 0, ks_out = 0;
  bool stage_in = false, stage_out = false;
  int hs = 0, hn = 0, nw = 0, gw = 0, cw = 0, win = 0, proj = 0, bc = 0, u = 0, v = 0, ssq = 0, rg = 0, part = 0,
      pres = 0, w_in = 0, w_out = 0, total = 0;
};

__host__ __device__ inline int align4(int n) { return (n + 3) / 4 * 4; }

__host__ __device__ inline FusedShape fused_shape(const StepDims& d, int R) {
  FusedShape f;
  f.nbc = (2 * d.G * d.N + d.H - 1) / d.H;
  f.nch = d.P + f.nbc;
  f.nc = 2 * d.P + f.nbc + 1;
  f.dc = (d.D + d.H - 1) / d.H;
  f.mt_in = (f.nc + 15) / 16, f.ks_in = (d.D + 7) / 8;
  f.mt_out = (d.D + 15) / 16, f.ks_out = (d.P + 7) / 8;
  f.stage_in = f.mt_in * f.ks_in * kFrag <= kStageInFloats;
  f.stage_out = f.mt_out * f.ks_out * kFrag <= kStageOutFloats;
  int o = 0;
  auto take = [&](int n) {
    const int at = o;
    o += align4(n);
    return at;
  };
  f.hs = take(R * d.D);                  // (R, D) the rows of h as read (the residual)
  f.hn = take(f.ks_in * kFrag);          // (ks_in, 32, 4) RMSNorm(h)ᵀ as B fragments, split: hi, hi, lo, lo
  f.nw = take(d.D);                          // (D) the RMSNorm weight
  f.gw = take(d.P);                          // (P) the gated norm's weight, head h
  f.cw = take(f.nch * (d.W + 1));            // (nch, W + 1) conv taps, then the bias
  f.win = take(R * (d.W - 1) * f.nch);   // (R, W−1, nch) the windows of the block's channels
  f.proj = take(R * f.nc);               // (R, nc) in_proj columns, then (in place) after their epilogue
  f.bc = take(R * 2 * d.N);              // (R, 2N) B | C of the head's group
  f.u = take(R * d.P);                   // (R, P) u = (y + D x) ⊙ SiLU(z)
  f.v = take(f.ks_out * kFrag);          // (ks_out, 32, 4) vᵀ = (u ⊙ gnorm_w)ᵀ as B fragments, split
  f.ssq = take(R);                       // (R) Σ_p u²
  f.rg = take(R * d.G);                  // (R, G) 1/rms of the gated norm
  f.part = take(R * d.D);                // (R, D) this head's out_proj partial
  f.pres = take(R);                      // (R) present flags (as floats)
  f.w_in = f.stage_in ? take(f.mt_in * f.ks_in * kFrag) : o;      // (mt_in, ks_in, 32, 4)
  f.w_out = f.stage_out ? take(f.mt_out * f.ks_out * kFrag) : o;  // (mt_out, ks_out, 32, 4)
  f.total = o;
  return f;
}

// Fragment order (the m16n8k8 tf32 operands, PTX ISA "mma.m16n8k8"; lane = 4g + q): an A tile (16 × 8, rows m,
// k-step columns kk) is 32 float4, lane's = (A[g][q], A[g+8][q], A[g][q+4], A[g+8][q+4]); a B tile (8 × 8, rows
// kk, columns n) is lane's (B[q][g], B[q+4][g]), stored split as (hi, hi, lo, lo). Slot of A[m][kk] and of B[kk][n]:
__host__ __device__ inline int frag_a_slot(int m, int kk) {
  return ((m & 7) * 4 + (kk & 3)) * 4 + (m >> 3) + 2 * (kk >> 2);
}
__host__ __device__ inline int frag_b_slot(int kk, int n) { return (n * 4 + (kk & 3)) * 4 + (kk >> 2); }

// The in_proj row (of the (proj, D) weight) that block h's column c computes; −1 for a padding column.
__host__ __device__ inline int fused_in_col(const StepDims& d, const FusedShape& f, int h, int c) {
  if (c < d.P) return h * d.P + c;                    // z
  if (c < 2 * d.P) return d.di + h * d.P + (c - d.P);  // x (xBC channel h·P + c − P)
  if (c < 2 * d.P + f.nbc) {                           // B|C
    const int b = h * f.nbc + (c - 2 * d.P);
    return b < 2 * d.G * d.N ? 2 * d.di + b : -1;
  }
  return d.di + d.cd + h;  // Δ
}
// The xBC channel of block h's conv channel q (q < nch); −1 for padding.
__device__ inline int fused_conv_channel(const StepDims& d, const FusedShape& f, int h, int q) {
  if (q < d.P) return h * d.P + q;
  const int b = h * f.nbc + (q - d.P);
  return b < 2 * d.G * d.N ? d.di + b : -1;
}

__device__ __forceinline__ void prefetch_l2(const float* p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }

__device__ __forceinline__ void cp_async16(float* dst, const float* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(unsigned(__cvta_generic_to_shared(dst))), "l"(src)
               : "memory");
}

// out (4) = one m16n8k8 output tile of A·B over KS k-steps: a (KS, 32) float4 the A tiles in fragment order,
// fp32 (packed weights, shared or global memory); b (KS, 32) float4 the B tiles, already split (hi, hi, lo, lo).
// 3xTF32 (step_common.cuh): per k-step lo·hi, hi·lo, then hi·hi; the even k-steps accumulate in one chain, the odd
// ones in another (two MMA latencies overlap), added at the end: a fixed order set by KS alone. KA k-steps' loads
// are in flight at once. Element e of out is tile row g + 8·(e / 2), column 2q + e % 2.
template <int KA>
__device__ __forceinline__ void fragment_product(const float4* a, const float4* b, int KS, int lane, float (&out)[4]) {
  // k-steps a pass, even, so that k-step k0 + u is in chain u % 2 (an index known at compile time: the chains stay
  // in registers); with KA = 1 each k-step's loads are issued just before its products.
  constexpr int kStep = KA < 2 ? 2 : KA;
  float c[2][4] = {};
  for (int k0 = 0; k0 < KS; k0 += kStep) {
    float4 av[kStep], bv[kStep];
    if constexpr (KA >= 2) {
#pragma unroll
      for (int u = 0; u < kStep; ++u)
        if (k0 + u < KS) {
          av[u] = a[(k0 + u) * 32 + lane];
          bv[u] = b[(k0 + u) * 32 + lane];
        }
    }
#pragma unroll
    for (int u = 0; u < kStep; ++u) {
      if (k0 + u >= KS) break;
      if constexpr (KA < 2) {
        av[u] = a[(k0 + u) * 32 + lane];
        bv[u] = b[(k0 + u) * 32 + lane];
      }
      uint32_t ah[4], al[4];
      split_tf32(av[u].x, ah[0], al[0]);
      split_tf32(av[u].y, ah[1], al[1]);
      split_tf32(av[u].z, ah[2], al[2]);
      split_tf32(av[u].w, ah[3], al[3]);
      const uint32_t bh[2] = {__float_as_uint(bv[u].x), __float_as_uint(bv[u].y)};
      const uint32_t bl[2] = {__float_as_uint(bv[u].z), __float_as_uint(bv[u].w)};
      mma_tf32(c[u & 1], al, bh);
      mma_tf32(c[u & 1], ah, bl);
      mma_tf32(c[u & 1], ah, bh);
    }
  }
#pragma unroll
  for (int e = 0; e < 4; ++e) out[e] = c[0][e] + c[1][e];
}

// Stores x split into B-fragment slot `at` (frag_b_slot): hi there, lo two floats on.
__device__ __forceinline__ void put_split(float* frag, int at, float x) {
  uint32_t hi, lo;
  split_tf32(x, hi, lo);
  frag[at] = __uint_as_float(hi);
  frag[at + 2] = __uint_as_float(lo);
}

// RW rows p a warp (P ≤ 8·RW), NE columns n a lane (N ≤ 32·NE); RB rows of the tile whose state is in registers
// at once (all their loads in flight before the first use).
template <int ROWS, int RW, int NE, int KA>
__global__ void __launch_bounds__(kFusedThreads, 2)
    fused_layer_kernel(const StepDims d, const StepLayerWeights w, const StepLayerState s, const StepBuffers buf) {
  constexpr int RB = (RW * NE >= kMaxStateRegs) ? 1 : (kMaxStateRegs / (RW * NE) >= ROWS ? ROWS : kMaxStateRegs / (RW * NE));
  static_assert(ROWS <= kMaxRows, "a tile's rows are the columns of an n8 tensor-core tile");
  static_assert(ROWS % RB == 0, "whole batches of rows");
  static_assert(RB * RW <= 32, "a lane finishes each (row, p) of a batch");
  extern __shared__ __align__(16) float sm[];
  cg::cluster_group cl = cg::this_cluster();
  const FusedShape f = fused_shape(d, ROWS);
  const int h = int(cl.block_rank());  // the cluster is (H, 1, 1): its rank is the head
  const int i0 = int(blockIdx.x / unsigned(d.H)) * ROWS, rows = min(ROWS, d.I - i0);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, taps = d.W - 1;
  float *hs = sm + f.hs, *hn = sm + f.hn, *nw = sm + f.nw, *gw = sm + f.gw, *cw = sm + f.cw, *win = sm + f.win,
        *proj = sm + f.proj, *bc = sm + f.bc, *su = sm + f.u, *vf = sm + f.v, *ssq = sm + f.ssq, *rg = sm + f.rg,
        *part = sm + f.part, *pres = sm + f.pres;
  const int in_floats = f.mt_in * f.ks_in * kFrag, out_floats = f.mt_out * f.ks_out * kFrag;
  const float* in_src = w.in_proj_fused + size_t(h) * in_floats;     // (mt_in, ks_in, 32, 4)
  const float* out_src = w.out_proj_fused + size_t(h) * out_floats;  // (mt_out, ks_out, 32, 4)
  // KA = kAheadShared is the instance of both slices staged (kernel_ka): its products then read shared memory
  // through pointers the compiler knows are shared (LDS, not generic loads).
  constexpr bool kStaged = KA == kAheadShared;
  const float4* w_in = reinterpret_cast<const float4*>(kStaged || f.stage_in ? sm + f.w_in : in_src);
  const float4* w_out = reinterpret_cast<const float4*>(kStaged || f.stage_out ? sm + f.w_out : out_src);

  // ---- Before the wait: what no kernel of this bar writes before this one (the weights; the layer's windows
  // and SSM state, last written by this kernel in the previous bar, which completed before the bar began).
  if (f.stage_in)
    for (int e = 4 * tid; e < in_floats; e += 4 * kFusedThreads) cp_async16(sm + f.w_in + e, in_src + e);
  if (f.stage_out)
    for (int e = 4 * tid; e < out_floats; e += 4 * kFusedThreads) cp_async16(sm + f.w_out + e, out_src + e);
  // The B fragments' padding (rows past the tile, k past D or P) must be zeros: all of them zeroed here, the
  // values written over them after the wait.
  for (int e = tid; e < f.ks_in * kFrag; e += kFusedThreads) hn[e] = 0.f;
  for (int e = tid; e < f.ks_out * kFrag; e += kFusedThreads) vf[e] = 0.f;
  for (int e = tid; e < ROWS * taps * f.nch; e += kFusedThreads) {  // zeros past the last row and channel
    const int r = e / (taps * f.nch), k = (e / f.nch) % taps, q = e % f.nch, ch = fused_conv_channel(d, f, h, q);
    const bool ok = r < rows && ch >= 0;
    cp_async4_or_zero(win + e, ok ? s.conv + (size_t(i0 + r) * taps + k) * d.cd + ch : s.conv, ok);
  }
  for (int e = tid; e < f.nch * (d.W + 1); e += kFusedThreads) {
    const int q = e / (d.W + 1), k = e % (d.W + 1), ch = fused_conv_channel(d, f, h, q);
    cw[e] = ch < 0 ? 0.f : (k < d.W ? w.conv_w[size_t(ch) * d.W + k] : w.conv_b[ch]);
  }
  for (int k = tid; k < d.D; k += kFusedThreads) nw[k] = w.norm_w[k];
  for (int p = tid; p < d.P; p += kFusedThreads) gw[p] = w.gnorm_w[h * d.P + p];
  const float A = -expf(w.A_log[h]), Dh = w.Dskip[h], dt_bias = w.dt_bias[h];
  // State of rows [b0, b0 + RB): warp rows p = warp + 8·rr, lane columns n = lane + 32·e (whole rows a warp).
  float st[RB][RW][NE];
  auto state_at = [&](int r, int p, int n) { return s.ssm + ((size_t(i0 + r) * d.H + h) * d.P + p) * d.N + n; };
  auto load_state = [&](int b0) {
#pragma unroll
    for (int rb = 0; rb < RB; ++rb)
#pragma unroll
      for (int rr = 0; rr < RW; ++rr)
#pragma unroll
        for (int e = 0; e < NE; ++e) {
          const int r = b0 + rb, p = warp + kFusedWarps * rr, n = lane + 32 * e;
          st[rb][rr][e] = r < rows && p < d.P && n < d.N ? *state_at(r, p, n) : 0.f;
        }
  };
  // The tile's state is only prefetched into L2 here (no registers held across the products); the first batch is
  // loaded after in_proj, its L2 latency covered by the conv epilogue, the cluster barrier and the B|C gather.
  for (int e = tid; e < rows * ((d.P * d.N + 31) / 32); e += kFusedThreads) {
    const int per = (d.P * d.N + 31) / 32, r = e / per, o = min(32 * (e % per), d.P * d.N - 1);
    prefetch_l2(s.ssm + (size_t(i0 + r) * d.H + h) * d.P * d.N + o);
  }

  pdl_wait();
  dependents_early(d);

  // ---- 1. RMSNorm, then the block's in_proj columns.
  for (int e0 = tid; e0 < ROWS * d.D; e0 += 4 * kFusedThreads) {  // 4 loads in flight a thread
    float t[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int e = e0 + u * kFusedThreads;
      t[u] = e < rows * d.D ? buf.h[size_t(i0) * d.D + e] : 0.f;
    }
#pragma unroll
    for (int u = 0; u < 4; ++u)
      if (e0 + u * kFusedThreads < ROWS * d.D) hs[e0 + u * kFusedThreads] = t[u];
  }
  if (tid < ROWS) pres[tid] = tid < rows && buf.present[i0 + tid] != 0 ? 1.f : 0.f;
  __syncthreads();
  if (warp < ROWS) {
    const int r = warp;
    float q = 0.f;
    for (int k = lane; k < d.D; k += 32) q += hs[r * d.D + k] * hs[r * d.D + k];
    const float rs = rsqrtf(warp_sum(q) / float(d.D) + kEps);
    for (int k = lane; k < d.D; k += 32)
      put_split(hn, (k >> 3) * kFrag + frag_b_slot(k & 7, r), hs[r * d.D + k] * rs * nw[k]);
  }
  cp_async_wait_all();
  __syncthreads();
  // Warp item: m-tile mt of projᵀ, columns [16·mt, 16·mt + 16) of the block's nc, all the tile's rows.
  for (int mt = warp; mt < f.mt_in; mt += kFusedWarps) {
    float o[4];
    fragment_product<KA>(w_in + size_t(mt) * f.ks_in * 32, reinterpret_cast<const float4*>(hn), f.ks_in, lane, o);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int c = 16 * mt + (lane >> 2) + 8 * (e >> 1), r = 2 * (lane & 3) + (e & 1);
      if (r < ROWS && c < f.nc) proj[r * f.nc + c] = o[e];
    }
  }
  load_state(0);
  __syncthreads();

  // ---- 2. The column epilogue: conv step + SiLU (window shifted where present), Δ = softplus; z stays raw.
  for (int it = tid; it < ROWS * f.nc; it += kFusedThreads) {
    const int r = it / f.nc, c = it % f.nc;
    if (c < d.P) continue;
    const float v = proj[it];
    float out;
    if (c == f.nc - 1) {
      out = softplus(v + dt_bias);
      out = out < d.dt_lo ? d.dt_lo : (out > d.dt_hi ? d.dt_hi : out);
    } else {
      const int q = c - d.P, ch = fused_conv_channel(d, f, h, q);
      const float* cq = cw + q * (d.W + 1);
      const float* wq = win + r * taps * f.nch + q;  // (W−1) values, stride nch
      float pre = cq[d.W];
      for (int k = 0; k < taps; ++k) pre += cq[k] * wq[k * f.nch];
      pre += cq[taps] * v;
      out = ch < 0 ? 0.f : silu(pre);
      if (ch >= 0 && taps > 0 && pres[r] != 0.f) {
        float* wr = s.conv + size_t(i0 + r) * taps * d.cd + ch;  // (W−1) values, stride cd
        for (int k = 0; k + 1 < taps; ++k) wr[size_t(k) * d.cd] = wq[(k + 1) * f.nch];
        wr[size_t(taps - 1) * d.cd] = v;
      }
    }
    proj[it] = out;
  }
  cl.sync();  // every block's columns are final: B|C may be read across the cluster

  // ---- 3. B and C of the head's group from their owners.
  {
    const int g = h * d.G / d.H;
    const int total = ROWS * 2 * d.N;
    for (int e0 = tid; e0 < total; e0 += 4 * kFusedThreads) {  // 4 remote loads in flight a thread
      float t4[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int e = e0 + u * kFusedThreads;
        t4[u] = 0.f;
        if (e < total) {
          const int r = e / (2 * d.N), t = e % (2 * d.N);
          const int b = t < d.N ? g * d.N + t : d.G * d.N + g * d.N + (t - d.N);  // index in the 2GN B|C channels
          t4[u] = cl.map_shared_rank(proj, unsigned(b / f.nbc))[r * f.nc + 2 * d.P + b % f.nbc];
        }
      }
#pragma unroll
      for (int u = 0; u < 4; ++u)
        if (e0 + u * kFusedThreads < total) bc[e0 + u * kFusedThreads] = t4[u];
    }
  }
  __syncthreads();

  // ---- 4. The SSM step, the gate, Σu², the partial out_proj.
  // Rows past the last instrument (a tile's padding) are computed in the product phases and never stored; the
  // SSM phase skips the batches made only of them (their u: the zeros written here, by other threads than the
  // batches' writers, to other rows; their v fragments stay the zeros written before the wait).
  const int rows_stepped = (rows + RB - 1) / RB * RB;
  for (int e = rows_stepped * d.P + tid; e < ROWS * d.P; e += kFusedThreads) su[e] = 0.f;
#pragma unroll 1
  for (int b0 = 0; b0 < rows; b0 += RB) {
    if (b0 > 0) load_state(b0);
    float y[RB][RW];  // this lane's share of y_p for the batch's rows, then (after the butterflies) y_p
#pragma unroll
    for (int rb = 0; rb < RB; ++rb) {
      const int r = b0 + rb;
      const float* pr = proj + r * f.nc;  // z (P) | x (P) | B|C share | Δ
      const float *sB = bc + r * 2 * d.N, *sC = sB + d.N;
      const float dt = pr[f.nc - 1], a = expf(dt * A);
      const bool keep = pres[r] != 0.f;
#pragma unroll
      for (int rr = 0; rr < RW; ++rr) {
        const int p = warp + kFusedWarps * rr;
        y[rb][rr] = 0.f;
        if (p >= d.P) continue;  // warp-uniform
        const float dx = dt * pr[d.P + p];
#pragma unroll
        for (int e = 0; e < NE; ++e) {
          const int n = lane + 32 * e;
          if (n < d.N) {
            const float v = fmaf(a, st[rb][rr][e], dx * sB[n]);
            if (keep) *state_at(r, p, n) = v;
            y[rb][rr] += v * sC[n];
          }
        }
      }
    }
    // warp_sum's butterfly (offsets 16 … 1) on every (row, p) at once: the same order, independent chains.
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
#pragma unroll
      for (int rb = 0; rb < RB; ++rb)
#pragma unroll
        for (int rr = 0; rr < RW; ++rr) y[rb][rr] += __shfl_xor_sync(kWarpMask, y[rb][rr], o);
    if (lane < RB * RW) {  // lane (rb, rr) finishes row b0 + rb, p = warp + 8·rr
#pragma unroll
      for (int rb = 0; rb < RB; ++rb)
#pragma unroll
        for (int rr = 0; rr < RW; ++rr) {
          const int r = b0 + rb, p = warp + kFusedWarps * rr;
          if (lane != rb * RW + rr || p >= d.P) continue;
          const float* pr = proj + r * f.nc;
          const float u = (y[rb][rr] + Dh * pr[d.P + p]) * silu(pr[p]);
          su[r * d.P + p] = u;
          put_split(vf, (p >> 3) * kFrag + frag_b_slot(p & 7, r), u * gw[p]);
        }
    }
  }
  __syncthreads();
  if (warp < ROWS) {
    const int r = warp;
    float q = 0.f;
    for (int p = lane; p < d.P; p += 32) q += su[r * d.P + p] * su[r * d.P + p];
    q = warp_sum(q);
    if (lane == 0) ssq[r] = q;
  }
  // Warp item: m-tile mt of part_hᵀ, output columns [16·mt, 16·mt + 16), all the tile's rows.
  for (int mt = warp; mt < f.mt_out; mt += kFusedWarps) {
    float o[4];
    fragment_product<KA>(w_out + size_t(mt) * f.ks_out * 32, reinterpret_cast<const float4*>(vf), f.ks_out, lane, o);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int j = 16 * mt + (lane >> 2) + 8 * (e >> 1), r = 2 * (lane & 3) + (e & 1);
      if (r < ROWS && j < d.D) part[r * d.D + j] = o[e];
    }
  }
  cl.sync();  // every head's Σu² and partial are final

  // ---- 5. The block's output columns: 1/rms per group, the heads' partials in order, the residual.
  const int hpg = d.H / d.G;
  for (int e = tid; e < ROWS * d.G; e += kFusedThreads) {
    const int r = e / d.G, g = e % d.G;
    float t[kMaxClusterHeads];
#pragma unroll
    for (int hh = 0; hh < kMaxClusterHeads; ++hh) t[hh] = hh < d.H ? cl.map_shared_rank(ssq, unsigned(hh))[r] : 0.f;
    float q = 0.f;
#pragma unroll
    for (int hh = 0; hh < kMaxClusterHeads; ++hh)
      if (hh >= g * hpg && hh < (g + 1) * hpg) q += t[hh];
    rg[e] = rsqrtf(q / float(d.di / d.G) + kEps);
  }
  __syncthreads();
  for (int e = tid; e < rows * f.dc; e += kFusedThreads) {
    const int r = e / f.dc, j = h * f.dc + e % f.dc;
    if (j >= d.D) continue;
    float t[kMaxClusterHeads];  // every head's partial in flight at once
#pragma unroll
    for (int hh = 0; hh < kMaxClusterHeads; ++hh)
      t[hh] = hh < d.H ? cl.map_shared_rank(part, unsigned(hh))[r * d.D + j] : 0.f;
    float out = 0.f;
    for (int g = 0; g < d.G; ++g) {
      float sum = 0.f;
#pragma unroll
      for (int hh = 0; hh < kMaxClusterHeads; ++hh)
        if (hh >= g * hpg && hh < (g + 1) * hpg) sum += t[hh];
      out = fmaf(rg[r * d.G + g], sum, out);
    }
    buf.h[size_t(i0 + r) * d.D + j] = hs[r * d.D + j] + out;
  }
  dependents_late();
  cl.sync();  // no block leaves while another may still read its shared memory
}

using FusedKernel = void (*)(StepDims, StepLayerWeights, StepLayerState, StepBuffers);

int pow2_at_least(int v) {
  int p = 1;
  while (p < v) p *= 2;
  return p;
}

// RW ∈ {1, 2, 4, 8}, NE ∈ {1, 2, 4}: P ≤ 64, N ≤ 128 (the S and M models: P 32 and 64, N 64).
constexpr int kFusedMaxP = kFusedWarps * 8, kFusedMaxN = 32 * 4;

// The tile: a row's arithmetic is the same in either, so the choice changes no bit.
int fused_rows(const StepDims& d) { return d.I >= kLargeFrom ? kMaxRows : kSmallRows; }

template <int ROWS, int RW, int KA>
FusedKernel kernel_ne(int ne) {
  switch (ne) {
    case 1: return fused_layer_kernel<ROWS, RW, 1, KA>;
    case 2: return fused_layer_kernel<ROWS, RW, 2, KA>;
    default: return fused_layer_kernel<ROWS, RW, 4, KA>;
  }
}
template <int ROWS, int RW>
FusedKernel kernel_ka(const StepDims& d, int ne) {
  const FusedShape f = fused_shape(d, ROWS);
  return f.stage_in && f.stage_out ? kernel_ne<ROWS, RW, kAheadShared>(ne) : kernel_ne<ROWS, RW, kAheadL2>(ne);
}

template <int ROWS>
FusedKernel kernel_rw(const StepDims& d) {
  const int rw = pow2_at_least((d.P + kFusedWarps - 1) / kFusedWarps), ne = pow2_at_least((d.N + 31) / 32);
  switch (rw) {
    case 1: return kernel_ka<ROWS, 1>(d, ne);
    case 2: return kernel_ka<ROWS, 2>(d, ne);
    case 4: return kernel_ka<ROWS, 4>(d, ne);
    default: return kernel_ka<ROWS, 8>(d, ne);
  }
}

FusedKernel fused_kernel(const StepDims& d, int rows) {
  return rows == kMaxRows ? kernel_rw<kMaxRows>(d) : kernel_rw<kSmallRows>(d);
}

cudaLaunchConfig_t fused_config(const StepDims& d, int rows, const StepLaunch& l, cudaLaunchAttribute (&attrs)[2]) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(unsigned((d.I + rows - 1) / rows) * unsigned(d.H));
  cfg.blockDim = dim3(kFusedThreads);
  cfg.dynamicSmemBytes = size_t(fused_shape(d, rows).total) * sizeof(float);
  cfg.stream = l.stream;
  attrs[0].id = cudaLaunchAttributeClusterDimension;
  attrs[0].val.clusterDim.x = unsigned(d.H);
  attrs[0].val.clusterDim.y = 1;
  attrs[0].val.clusterDim.z = 1;
  attrs[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attrs[1].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attrs;
  cfg.numAttrs = l.pdl ? 2 : 1;
  return cfg;
}

}  // namespace

std::string fused_step_unsupported(const StepDims& d, int device) {
  if (d.H > kMaxClusterHeads) return "the model has " + std::to_string(d.H) + " heads (the fused bar takes at most 8)";
  if (d.P > kFusedMaxP || d.N > kFusedMaxN)
    return "head_dim " + std::to_string(d.P) + " and d_state " + std::to_string(d.N) + " (the fused bar takes at most " +
           std::to_string(kFusedMaxP) + " and " + std::to_string(kFusedMaxN) + ")";
  if (d.W - 1 > kMaxTaps) return "conv_width " + std::to_string(d.W);
  int cluster = 0, max_smem = 0;
  MLALPHA_CUDA_CHECK(cudaDeviceGetAttribute(&cluster, cudaDevAttrClusterLaunch, device));
  if (!cluster) return "the device cannot launch thread-block clusters";
  MLALPHA_CUDA_CHECK(cudaDeviceGetAttribute(&max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  for (const int rows : {kSmallRows, kMaxRows}) {  // both tiles: the instrument count may change (import, remap)
    const size_t smem = size_t(fused_shape(d, rows).total) * sizeof(float);
    if (smem > size_t(max_smem))
      return "a block needs " + std::to_string(smem) + " bytes of shared memory, the device gives " +
             std::to_string(max_smem);
    const FusedKernel k = fused_kernel(d, rows);
    MLALPHA_CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    // Can a cluster of H such blocks be resident at all (shared memory, registers, the GPC)?
    StepDims one = d;
    one.I = rows;
    cudaLaunchAttribute attrs[2];
    cudaLaunchConfig_t cfg = fused_config(one, rows, StepLaunch{}, attrs);
    cfg.numAttrs = 1;
    int clusters = 0;
    MLALPHA_CUDA_CHECK(cudaOccupancyMaxActiveClusters(&clusters, k, &cfg));
    if (clusters < 1) return "no cluster of " + std::to_string(d.H) + " blocks fits on the device";
  }
  return {};
}

size_t fused_in_proj_floats(const StepDims& d) {
  const FusedShape f = fused_shape(d, kMaxRows);  // the products' tiles do not depend on the tile of rows
  return size_t(d.H) * f.mt_in * f.ks_in * kFrag;
}
size_t fused_out_proj_floats(const StepDims& d) {
  const FusedShape f = fused_shape(d, kMaxRows);
  return size_t(d.H) * f.mt_out * f.ks_out * kFrag;
}

void pack_fused_weights(const StepDims& d, const float* in_proj_w, const float* out_proj_w, float* in_pack,
                        float* out_pack) {
  const FusedShape f = fused_shape(d, kMaxRows);
  for (int h = 0; h < d.H; ++h) {
    // A of in_proj: A[c][k] = in_proj_w[fused_in_col(c)][k], c < nc, k < D; zeros elsewhere.
    float* wi = in_pack + size_t(h) * f.mt_in * f.ks_in * kFrag;  // (mt_in, ks_in, 32, 4)
    for (int mt = 0; mt < f.mt_in; ++mt)
      for (int ks = 0; ks < f.ks_in; ++ks)
        for (int m = 0; m < 16; ++m)
          for (int kk = 0; kk < 8; ++kk) {
            const int c = 16 * mt + m, k = 8 * ks + kk, row = c < f.nc ? fused_in_col(d, f, h, c) : -1;
            wi[(size_t(mt) * f.ks_in + ks) * kFrag + frag_a_slot(m, kk)] =
                row >= 0 && k < d.D ? in_proj_w[size_t(row) * d.D + k] : 0.f;
          }
    // A of head h's out_proj partial: A[j][p] = out_proj_w[j][hP + p], j < D, p < P; zeros elsewhere.
    float* wo = out_pack + size_t(h) * f.mt_out * f.ks_out * kFrag;  // (mt_out, ks_out, 32, 4)
    for (int mt = 0; mt < f.mt_out; ++mt)
      for (int ks = 0; ks < f.ks_out; ++ks)
        for (int m = 0; m < 16; ++m)
          for (int kk = 0; kk < 8; ++kk) {
            const int j = 16 * mt + m, p = 8 * ks + kk;
            wo[(size_t(mt) * f.ks_out + ks) * kFrag + frag_a_slot(m, kk)] =
                j < d.D && p < d.P ? out_proj_w[size_t(j) * d.di + h * d.P + p] : 0.f;
          }
  }
}

void step_layer_fused(const StepDims& d, const StepLayerWeights& w, const StepLayerState& s, const StepBuffers& buf,
                      StepLaunch l) {
  require(w.in_proj_fused != nullptr && w.out_proj_fused != nullptr, "step_layer_fused: the packed weights are missing");
  require(d.I >= 1 && d.I <= 1000000, "mamba_step: at most 1,000,000 instruments a bar, got " + std::to_string(d.I));
  cudaLaunchAttribute attrs[2];
  const int rows = fused_rows(d);
  const cudaLaunchConfig_t cfg = fused_config(d, rows, l, attrs);
  MLALPHA_CUDA_CHECK(cudaLaunchKernelEx(&cfg, fused_kernel(d, rows), d, w, s, buf));
  MLALPHA_CHECK_LAUNCH(l.stream);
}

}  // namespace mlalpha::gpu

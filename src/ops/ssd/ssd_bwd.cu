// SSD backward on the GPU: the recurrence's backward (DESIGN section 1, same formulas as ref::ssd_bwd in
// ssd_ref.cpp) in matmul form (ssd_common.cuh), from the forward's saved chunk states S_in and the adjoint
// chunk states (ssd_chunks.cu). Per chunk of one (b, h), with Gs = a_{next} G_{c+1} (the gradient reaching
// the chunk's last state from later chunks; 0 in the last chunk), dec_in_t = e^{cs_t},
// dec_out_t = e^{cs_last − cs_t}, CB[i, j] = (C_i·B_j) e^{cs_i − cs_j} and DX[i, j] = (dy_i·x_j) e^{cs_i − cs_j}
// for j ≤ i (0 above the diagonal), the adjoint state is
//     g_t = Σ_{i≥t} e^{cs_i − cs_t} dy_i C_iᵀ + dec_out_t Gs,
// which gives, as products of shared-memory tiles:
//     v_t   = (CBᵀ dy)_t + dec_out_t (Gs B_t)                    dx_t = Δ_t v_t + D dy_t
//     dB_t  = Δ_t [(DXᵀ C)_t + dec_out_t (x_tᵀ Gs)]              (summed over the group's heads)
//     dC_t  = (DX diag(Δ) B)_t + dec_in_t (dy_tᵀ S_in)            (summed over the group's heads)
// and the decay term e_t = a_t Σ g_t·s_{t−1} (dΔ_t = x_t·v_t + A e_t, dA = Σ_t Δ_t e_t) as a plain sum of
// products, with no recurrence and no difference of large terms:
//     e_t = Σ_{i≥t} Σ_{j<t} W[i, j] + Σ_{i≥t} yoff_i + Σ_{j<t} sout_j + e^{cs_last} Σ Gs·S_in,
//     W[i, j] = CB[i, j] (dy_i·x_j) Δ_j,  yoff_i = dec_in_i (dy_iᵀ S_in)·C_i,  sout_j = Δ_j dec_out_j (x_jᵀ Gs)·B_j.
// The DX terms of dB and dC are linear in DX with the group's B and C, so they are taken once per group from
// Σ_h DX_h diag(Δ_h) (ssd_group.cu); a head's block computes the other terms and writes its DX diag(Δ).
// A carried state h0 is chunk 0's S_in, saved by the forward as states[0]: chunk 0 takes the S_in terms of dC, of
// e_t (yoff, c0) and so of dΔ and dA_log as every chunk does (they are zeros without one); dh0 comes from
// chunk_adjoint_states. Kernels: (a) chunk_adjoint_states; (b) bwd_kernel, grid (nchunks, H, B), on the 'L' head shape in
// clusters of two heads that add their dB, dC terms first (pairs); (c) group_sum_kernel: dB, dC ←
// the per-head (or per-pair) partials of each group summed in order; (d) group_dx_products: dB, dC += the
// DX terms; (e) param_reduce_kernel: dA_log, dD += Σ over (b, chunk) of the per-block partials, in order.
#define MLALPHA_SSD_WARPS 16  // = kBwdWarps (ssd_common.cuh says why)
#include <cooperative_groups.h>

#include "ops/ssd/ssd_common.cuh"
#include "ops/ssd/ssd_walk.cuh"

namespace mlalpha::gpu {
namespace ssd_detail {
namespace {
static_assert(kThreads == 32 * kBwdWarps, "MLALPHA_SSD_WARPS above must equal kBwdWarps");

// Σ_{p,n} Gs[p, n] S[p, n] for S (P, N) in global memory and Gs a tile (P, ldN): this thread's share, several
// loads in flight per thread. Element (or quad) i of S is at (p, n) = (i / w, i % w) for rows of w, stepped
// without a division. (Used where S_in has no tile of its own: Gs's tile is overwritten by it after.)
__device__ float gs_dot_global(const Args& a, const float* S, const float* sS) {
  float c0 = 0.f;
  auto walk = [&](int w, int per_thread, auto load, auto dot) {
    const int total = a.P * w, dp = kThreads / w, dn = kThreads % w;
    int p = threadIdx.x / w, n = threadIdx.x % w;
    for (int i0 = threadIdx.x; i0 < total; i0 += per_thread * kThreads) {
      decltype(load(0)) v[8];
#pragma unroll
      for (int u = 0; u < per_thread; ++u) v[u] = load(i0 + u * kThreads < total ? i0 + u * kThreads : -1);
#pragma unroll
      for (int u = 0; u < per_thread; ++u) {
        if (i0 + u * kThreads < total) c0 += dot(p, n, v[u]);
        p += dp, n += dn;
        if (n >= w) n -= w, ++p;
      }
    }
  };
  if (a.N % 4 == 0 && ((reinterpret_cast<uintptr_t>(S) | reinterpret_cast<uintptr_t>(sS)) & 15) == 0) {
    const float4* S4 = reinterpret_cast<const float4*>(S);  // quads: a quarter of the loads and index steps
    walk(a.N / 4, 4, [&](int i) { return i >= 0 ? S4[i] : make_float4(0.f, 0.f, 0.f, 0.f); },
         [&](int p, int n4, float4 v) {
           const float4 g = *reinterpret_cast<const float4*>(sS + p * a.ldN + 4 * n4);
           return g.x * v.x + g.y * v.y + g.z * v.z + g.w * v.w;
         });
  } else {
    walk(a.N, 8, [&](int i) { return i >= 0 ? S[i] : 0.f; },
         [&](int p, int n, float v) { return sS[p * a.ldN + n] * v; });
  }
  return c0;
}

// The fixed shapes whose backward computes dB and dC concurrently: chunks of 64 with P = 64 and N = 64 or 128
// (their S_in gets a tile of its own, Args::sin_own; ssd_bwd checks).
constexpr bool bwd_concurrent(int n, int p) { return p == 64 && (n == 64 || n == 128); }
// Registers capped at 64 where two blocks fit an SM's shared memory (the 'S' shape, and the generic kernel
// for small shapes); the 'M' and 'L' shapes' tiles fill it with one, so their unrolled products may use more.
template <int kN, int kP>
constexpr int kBwdMinBlocks = kN == 0 || kN * kP <= 64 * 32 ? 2 : 1;

// ----- the backward kernel (b): one block per chunk c of head h of batch b, phase by phase -----
// Each phase function names the DESIGN section 1 gradient terms it computes, in the matmul form of the top
// of this file; the kernel calls them in order and places the barriers and copy waits between them.

// Where the block is and the scalars every phase reads.
struct BwdChunk {
  int b, h, c, t0, tc;  // batch, head, chunk, its first step, its steps
  bool last;            // the last chunk: no G_{c+1} (Gs = 0)
  float A, Dh;          // A_h = −exp(A_log_h), D_h
  float a_next;         // a_{t0+tc} = e^{Δ A} of the step after the chunk (0 in the last chunk)
};
// The block's shared memory (bwd_smem_bytes in ssd_layout.cu sizes it).
struct BwdTiles {
  double* scs;   // (T) cs_t
  float* sdt;    // (T) Δ_t
  float* sdin;   // (T) dec_in_t, then Σ_{i≥t} yoff_i
  float* sdout;  // (T) dec_out_t, then Σ_{j<t} sout_j
  float* syoff;  // (kColWarps, T) yoff_t, partials (RowSums)
  float* sout;   // (kColWarps, T) sout_t
  float* sdd;    // (kColWarps, T) x_t·v_t
  float* sEq;    // (T) Σ_{i≥t} Σ_{j<t} W[i, j]
  float* red;    // (kThreads / 32) block sums
  float* sB;     // (T, ldN) B
  float* sC;     // (T, ldN)
  float* sX;     // (T, ldP)
  float* sDY;    // (T, ldP)
  float* sCB;    // (T, ldT) CBᵀ (CB[i, j] at (j, i): v reads CBᵀ)
  float* sDX;    // (T, ldT) the group's C·Bᵀ as staged, then DX (W[i, j], then its suffix sums, at (j, i) above
                 // the diagonal)
  float* sS;     // (P, ldN) G_{c+1}
  float* sSin;   // (P, ldN) S_in (replaces G_{c+1} unless sin_own)
};
__device__ __forceinline__ BwdTiles bwd_tiles(const Args& a, double* smem_d) {
  BwdTiles s;
  s.scs = smem_d;
  s.sdt = reinterpret_cast<float*>(s.scs + a.Ts);
  s.sdin = s.sdt + a.Ts;
  s.sdout = s.sdin + a.Ts;
  s.syoff = s.sdout + a.Ts;
  s.sout = s.syoff + kColWarps * a.Ts;
  s.sdd = s.sout + kColWarps * a.Ts;
  s.sEq = s.sdd + kColWarps * a.Ts;
  s.red = s.sEq + a.Ts;
  s.sB = s.red + kThreads / 32;
  s.sC = s.sB + a.T * a.ldN;
  s.sX = s.sC + a.T * a.ldN;
  s.sDY = s.sX + a.T * a.ldP;
  s.sCB = s.sDY + a.T * a.ldP;
  s.sDX = s.sCB + a.T * a.ldT;
  s.sS = s.sDX + a.T * a.ldT;
  s.sSin = a.sin_own ? s.sS + a.P * a.ldN : s.sS;
  return s;
}

// Phase 1: the tiles staged, and the decays of the chunk: Δ_t, cs_t, dec_in_t = e^{cs_t} and
// dec_out_t = a_next e^{cs_last − cs_t} (Gs = a_next G_{c+1} enters only through dec_out_t Gs and
// e^{cs_last} Gs: a_next goes into those factors). Returns with C·Bᵀ, x and dy in place; the copies of B, C,
// G_{c+1} and S_in still in flight (one group each, in that order).
template <bool kFullChunks>
__device__ __forceinline__ BwdChunk bwd_stage_and_decay(const Args& a, const BwdTiles& s) {
  BwdChunk k;
  k.c = blockIdx.x, k.h = blockIdx.y, k.b = blockIdx.z;
  k.t0 = chunk_begin(a, k.c), k.tc = chunk_steps<kFullChunks>(a, k.c, k.t0);
  k.last = k.c + 1 == a.nchunks;
  const int b = k.b, h = k.h, c = k.c, t0 = k.t0, tc = k.tc;
  // The global loads the first phases wait on, issued before the copies: Δ of the chunk (warp 0) and of the
  // step after it, A.
  const LaneDeltas deltas = threadIdx.x < 32 ? load_deltas(a, b, h, t0, tc) : LaneDeltas{};
  const float delta_next = k.last ? 0.f : a.delta[row_of(a, b, t0 + tc) * a.H + h];
  const size_t mo = member_offset(a, b);
  k.A = -expf(a.A_log[mo + h]), k.Dh = a.Dskip[mo + h];

  // The tiles in the order the phases read them, one copy group each (empty groups keep the count fixed):
  // the group's C·Bᵀ (ssd_group.cu; staged where DX goes later), x and dy first, for CBᵀ and DX.
  stage(cb_at(a, b, c, h * a.G / a.H), a.T, tc, tc, s.sDX, a.ldT);
  stage(x_rows(a, b, h, t0), a.ld, tc, a.P, s.sX, a.ldP);
  stage(dy_rows(a, b, h, t0), size_t(a.H) * a.P, tc, a.P, s.sDY, a.ldP);
  stage_commit();
  stage(bc_rows(a, a.Bm, b, h, t0), a.ld, tc, a.N, s.sB, a.ldN);
  stage(bc_rows(a, a.Cm, b, h, t0), a.ld, tc, a.N, s.sC, a.ldN);
  stage_commit();
  if (!k.last) stage(state_at(a, a.wsG, b, h, c + 1), a.N, a.P, a.N, s.sS, a.ldN);
  stage_commit();
  if (a.sin_own) stage(state_at(a, a.states, b, h, c), a.N, a.P, a.N, s.sSin, a.ldN);
  stage_commit();
  k.a_next = k.last ? 0.f : expf(delta_next * k.A);
  chunk_decay_of(deltas, k.A, tc, s.sdt, s.scs);  // while the copies are in flight
  for (int t = threadIdx.x; t < tc; t += kThreads) {
    s.sdin[t] = float(exp(s.scs[t]));
    s.sdout[t] = k.a_next * float(exp(s.scs[tc - 1] - s.scs[t]));
  }
  stage_wait_pending<3>();  // C·Bᵀ, x, dy
  __syncthreads();
  return k;
}

// Phase 2, the pieces of g_t = Σ_{i≥t} e^{cs_i − cs_t} dy_i C_iᵀ + dec_out_t Gs inside the chunk:
// CB[i, j] = (C_i·B_j) e^{cs_i − cs_j} into sCB transposed (v reads CBᵀ), DX[i, j] diag(Δ) = (dy_i·x_j)
// e^{cs_i − cs_j} Δ_j (Δ_j folded in here: group_dx_products reads only that) and the decay term's
// W[i, j] = CB[i, j] (dy_i·x_j) Δ_j into the unused upper triangle. Each thread takes the decays and CB of
// the (i, j) it owns in the DX product once, for both.
template <MmaMode kMode>
__device__ __forceinline__ void bwd_cb_dx(const Args& a, const BwdChunk& k, const BwdTiles& s) {
  const int tc = k.tc;
  Acc acc, ldec, cb;
  zero(acc);
  mm<kMode, false, true>(acc, s.sDY, a.ldP, s.sX, a.ldP, 0, tc, 0, tc, a.P);
  for_out(0, tc, 0, tc, [&](int r, int cc, int i, int j) {
    ldec[r][cc] = j <= i ? decay(s.scs, i, j) : 0.f;
    cb[r][cc] = j <= i ? s.sDX[i * a.ldT + j] * ldec[r][cc] : 0.f;  // sDX holds the group's C·Bᵀ
    s.sCB[j * a.ldT + i] = cb[r][cc];
  });
  __syncthreads();  // C·Bᵀ read
  for_out(0, tc, 0, tc, [&](int r, int cc, int i, int j) {
    const float w = acc[r][cc] * s.sdt[j];
    if (j <= i) s.sDX[i * a.ldT + j] = w * ldec[r][cc];
    if (j < i) s.sDX[j * a.ldT + i] = cb[r][cc] * w;
  });
}

// Phase 3, the first term of the decay term e_t = a_t r_t (r_t = Σ_{p,n} g_t[p,n] s_{t−1}[p,n]):
// E_t = Σ_{i≥t} Σ_{j<t} W[i, j] = Σ_{j<t} Q[j, t] with the suffix sums Q[j, t] = Σ_{i≥t} W[i, j] (t > j).
// W[i, j] sits at (j, i) above the diagonal of sDX: a warp turns row j into Q[j, ·] in place (a scan from
// the row's end, two steps a lane), then 8 threads per t sum column t above the diagonal. Fixed order
// throughout.
__device__ __forceinline__ void bwd_w_sums(const Args& a, const BwdChunk& k, const BwdTiles& s) {
  static_assert(kMaxChunk <= 64, "one warp scans a row of W, two steps a lane");
  const int tc = k.tc, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int j = warp; j < tc; j += kThreads / 32) {
    float* row = s.sDX + j * a.ldT;
    const int i0 = 2 * (31 - lane), i1 = i0 + 1;  // lane 0 holds the last two steps
    const bool v0 = i0 > j && i0 < tc, v1 = i1 > j && i1 < tc;
    const float w0 = v0 ? row[i0] : 0.f, w1 = v1 ? row[i1] : 0.f;
    const float incl = warp_inclusive_scan(w0 + w1);
    float excl = __shfl_up_sync(kWarpMask, incl, 1);
    excl = lane == 0 ? 0.f : excl;
    const float q1 = excl + w1;
    if (v0) row[i0] = q1 + w0;
    if (v1) row[i1] = q1;
  }
  __syncthreads();
  constexpr int kPer = 8;  // threads per column t; the loop bound is the same for the whole warp (shuffles)
  for (int tb = 0; tb < a.T; tb += kThreads / kPer) {
    const int t = tb + threadIdx.x / kPer, sub = threadIdx.x % kPer;
    float v = 0.f;
    if (t < tc)
      for (int j = sub; j < t; j += kPer) v += s.sDX[j * a.ldT + t];
    v = lane_group_sum<kPer>(v);
    if (sub == 0 && t < tc) s.sEq[t] = v;
  }
}

// This head's DX diag(Δ) to the scratch for group_dx_products, which adds the DX terms of dB and dC
// (dB_t ∋ Δ_t (DXᵀ C)_t, dC_t ∋ (DX diag(Δ) B)_t) once per group; the upper triangle (Q there) as 0. The
// stores drain while v is computed.
__device__ __forceinline__ void bwd_store_dx(const Args& a, const BwdChunk& k, const BwdTiles& s) {
  const int tc = k.tc, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float* gdx = dx_at(a, k.b, k.c, k.h);  // (T, T)
  if (tc % 4 == 0 && a.T % 4 == 0) {
    const int q4 = tc / 4;
    for (int e = threadIdx.x; e < tc * q4; e += kThreads) {
      const int i = e / q4, j = 4 * (e % q4);
      float4 v = *reinterpret_cast<const float4*>(s.sDX + i * a.ldT + j);
      if (j > i) v.x = 0.f;
      if (j + 1 > i) v.y = 0.f;
      if (j + 2 > i) v.z = 0.f;
      if (j + 3 > i) v.w = 0.f;
      *reinterpret_cast<float4*>(gdx + i * a.T + j) = v;
    }
  } else {
    for (int i = warp; i < tc; i += kThreads / 32)
      for (int j = lane; j < tc; j += 32) gdx[i * a.T + j] = j > i ? 0.f : s.sDX[i * a.ldT + j];
  }
}

// Phase 4, dx_t[p] = Δ_t v_t[p] + D_h dy_t[p] with v_t[p] = Σ_n g_t[p,n] B_t[n] = (CBᵀ dy)_t + dec_out_t
// (Gs B_t), and the row sums x_t·v_t (the first term of dΔ_t) into sdd.
template <MmaMode kMode>
__device__ __forceinline__ void bwd_dx(const Args& a, const BwdChunk& k, const BwdTiles& s) {
  const int tc = k.tc;
  RowSums xv;
  for (int p0 = 0; p0 < a.P; p0 += kTile) {
    Acc acc;
    zero(acc);
    if (!k.last) {
      mm<kMode, false, true>(acc, s.sB, a.ldN, s.sS, a.ldN, 0, tc, p0, a.P, a.N);
      for_out(0, tc, p0, a.P, [&](int r, int cc, int t, int) { acc[r][cc] *= s.sdout[t]; });
    }
    mm<kMode, false, false>(acc, s.sCB, a.ldT, s.sDY, a.ldP, 0, tc, p0, a.P, tc);
    for_pairs(0, tc, p0, a.P, [&](int r, int hh, int t, int p, bool two) {
      const float2 dy2 = *reinterpret_cast<const float2*>(s.sDY + t * a.ldP + p);  // p even, ldP % 4 == 0
      const float2 x2 = *reinterpret_cast<const float2*>(s.sX + t * a.ldP + p);
      const float v0 = acc[r][2 * hh], v1 = two ? acc[r][2 * hh + 1] : 0.f;
      store_pair(a.dx + row_of(a, k.b, k.t0 + t) * a.ld + size_t(k.h) * a.P + p, s.sdt[t] * v0 + k.Dh * dy2.x,
                 s.sdt[t] * v1 + k.Dh * dy2.y, two);
      xv.add(2 * hh, two ? x2.x * v0 + x2.y * v1 : x2.x * v0);  // x2.y is padding when !two
    });
    xv.end_tile();
  }
  xv.write(s.sdd, a.Ts, tc);
}

// Phase 5, the last term of e_t: c0 = e^{cs_last} Σ Gs·S_in, from the two tiles, or, where S_in replaces Gs,
// with S_in read from global memory. Every thread gets it (synchronises).
__device__ __forceinline__ float bwd_gs_sin(const Args& a, const BwdChunk& k, const BwdTiles& s) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float c0 = 0.f;
  if (a.sin_own) {
    stage_wait_pending<0>();  // S_in
    __syncthreads();
    if (!k.last && a.N % 4 == 0) {  // quads (the tiles' rows start 16-byte aligned)
      for (int p = warp; p < a.P; p += kThreads / 32)
        for (int n = 4 * lane; n < a.N; n += 128) {
          const float4 g = *reinterpret_cast<const float4*>(s.sS + p * a.ldN + n);
          const float4 v = *reinterpret_cast<const float4*>(s.sSin + p * a.ldN + n);
          c0 += g.x * v.x + g.y * v.y + g.z * v.z + g.w * v.w;
        }
    } else if (!k.last) {
      for (int p = warp; p < a.P; p += kThreads / 32)
        for (int n = lane; n < a.N; n += 32) c0 += s.sS[p * a.ldN + n] * s.sSin[p * a.ldN + n];
    }
  } else if (!k.last) {
    c0 = gs_dot_global(a, state_at(a, a.states, k.b, k.h, k.c), s.sS);
  }
  return block_sum(c0, s.red) * (k.a_next * float(exp(s.scs[k.tc - 1])));
}

// Phase 6, this head's dB and dC terms that are not linear in DX (DESIGN: dB_t[n] = Σ_p g_t[p,n] Δ_t x_t[p],
// dC_t[n] = Σ_p s_t[p,n] dy_t[p]): dB_t ∋ Δ_t dec_out_t (x_tᵀ Gs), dC_t ∋ dec_in_t (dy_tᵀ S_in), as
// per-head (or per-pair) partials in wsB, wsC, and the row sums sout_j = (those dB terms)·B_j and
// yoff_i = (those dC terms)·C_i of the decay term into sout, syoff (kSumSlots partials per step).
template <MmaMode kMode, int kN, bool kConcurrent>
__device__ __forceinline__ void bwd_db_dc(const Args& a, const BwdChunk& k, const BwdTiles& s) {
  const int tc = k.tc, warp = threadIdx.x >> 5;
  // One 64-column tile of dB (and the row sums of sout) or of dC (and of yoff) into the accumulators of the
  // warps of WarpTile wt; store() writes it as this head's partial.
  auto db_tile = [&](auto wt, int n0, RowSums& rs, auto& acc) {
    constexpr int kW = decltype(wt)::kWidth;
    zero(acc);
    if (!k.last) {
      mm<kMode, false, false, kW>(acc, s.sX, a.ldP, s.sS, a.ldN, 0, tc, n0, a.N, a.P, wt);
      for_out<kW>(0, tc, n0, a.N, [&](int r, int cc, int t, int n) {
        acc[r][cc] *= s.sdt[t] * s.sdout[t];
        rs.add(cc, acc[r][cc] * s.sB[t * a.ldN + n]);
      }, wt);
    }
    rs.end_tile();
  };
  auto dc_tile = [&](auto wt, int n0, RowSums& rs, auto& acc) {
    constexpr int kW = decltype(wt)::kWidth;
    zero(acc);
    mm<kMode, false, false, kW>(acc, s.sDY, a.ldP, s.sSin, a.ldN, 0, tc, n0, a.N, a.P, wt);
    for_out<kW>(0, tc, n0, a.N, [&](int r, int cc, int t, int n) {
      acc[r][cc] *= s.sdin[t];
      rs.add(cc, acc[r][cc] * s.sC[t * a.ldN + n]);
    }, wt);
    rs.end_tile();
  };
  auto store = [&](auto wt, int n0, const auto& acc, float* ws) {  // ws (B, L, H, N)
    for_pairs<decltype(wt)::kWidth>(0, tc, n0, a.N, [&](int r, int hh, int t, int n, bool two) {
      store_pair(ws + (row_of(a, k.b, k.t0 + t) * a.H + k.h) * a.N + n, acc[r][2 * hh], acc[r][2 * hh + 1], two);
    }, wt);
  };
  if constexpr (kConcurrent) {
    // The 2·N/64 tiles of dB and dC at once, each by a group of kGroupWarps warps: a warp's tile is 16 × kW
    // instead of 16 × 16, so each A fragment it loads feeds kW / 8 mma rather than 2 (these products were
    // bound by shared-memory loads). Row-sum partials: slot = the warp's column block among the product's.
    constexpr int kTilesN = kN / kTile, kGroupWarps = (kThreads / 32) / (2 * kTilesN);
    constexpr int kW = kTile * 4 / kGroupWarps;
    const int grp = warp / kGroupWarps, gw = warp % kGroupWarps;
    const WarpTile<kW> wt(gw & 3, gw >> 2);
    const int n0 = (grp % kTilesN) * kTile, slot = (grp % kTilesN) * (kGroupWarps / 4) + (gw >> 2);
    RowSums rs;
    typename WarpTile<kW>::Acc acc;
    if (grp < kTilesN) {
      db_tile(wt, n0, rs, acc);
      rs.write(s.sout, a.Ts, tc, wt, slot);
    } else {
      dc_tile(wt, n0, rs, acc);
      rs.write(s.syoff, a.Ts, tc, wt, slot);
    }
    if (kN != 128 || a.cluster_heads == 1) {
      store(wt, n0, acc, grp < kTilesN ? a.wsB : a.wsC);
    } else if constexpr (kN == 128) {
      // Pairs of heads (ranks 0, 1 of a cluster: heads 2k, 2k + 1 of one group, same chunk) write one partial
      // of dB and dC per pair: rank 0 sends its dC tiles to rank 1 and receives rank 1's dB tiles, through
      // distributed shared memory into the receiver's dead C·Bᵀ and DX tiles; each then adds and stores
      // half. Stores to the partner, not loads from it: nothing waits on the remote memory's latency.
      namespace cg = cooperative_groups;
      static_assert(kMaxChunk * (kN + 8) <= 2 * kMaxChunk * tile_ld(kMaxChunk),
                    "the partner's tile fits the C·Bᵀ and DX tiles");
      constexpr int kRecvLd = kN + 8;  // ≡ 8 (mod 32): a warp's 8-byte stores of 8 rows hit 2 rows a bank
      cg::cluster_group cl = cg::this_cluster();
      const int rank = int(cl.block_rank());
      const bool is_db = grp < kTilesN, send = (rank == 0) != is_db;
      float* recv = s.sCB;  // (T, kRecvLd)
      __cluster_barrier_wait();  // the partner has arrived past its last use of these tiles
      if (send) {
        float* remote = cl.map_shared_rank(recv, rank ^ 1);
        for_pairs<kW>(0, tc, n0, a.N, [&](int r, int hh, int t, int n, bool) {
          *reinterpret_cast<float2*>(remote + t * kRecvLd + n) = make_float2(acc[r][2 * hh], acc[r][2 * hh + 1]);
        }, wt);
      }
      cl.sync();  // the tiles are in (release / acquire); no block reads the other's memory after this
      if (!send) {
        float* ws = is_db ? a.wsB : a.wsC;  // (B, L, H / 2, N)
        const int HK = a.H / 2;
        for_pairs<kW>(0, tc, n0, a.N, [&](int r, int hh, int t, int n, bool two) {
          const float2 o = *reinterpret_cast<const float2*>(recv + t * kRecvLd + n);
          // the sum of the pair's two values (fp32 addition is commutative: the same bits on either rank)
          store_pair(ws + (row_of(a, k.b, k.t0 + t) * HK + k.h / 2) * a.N + n, acc[r][2 * hh] + o.x,
                     acc[r][2 * hh + 1] + o.y, two);
        }, wt);
      }
    }
  } else {
    RowSums so, yo;
    for (int n0 = 0; n0 < a.N; n0 += kTile) {
      typename WarpTile<>::Acc acc;
      db_tile(WarpTile<>(), n0, so, acc);
      store(WarpTile<>(), n0, acc, a.wsB);
    }
    so.write(s.sout, a.Ts, tc);
    if (!a.sin_own) {  // S_in replaces Gs once every warp is done with it
      __syncthreads();
      stage(state_at(a, a.states, k.b, k.h, k.c), a.N, a.P, a.N, s.sSin, a.ldN);
      stage_wait();
      __syncthreads();
    }
    for (int n0 = 0; n0 < a.N; n0 += kTile) {
      typename WarpTile<>::Acc acc;
      dc_tile(WarpTile<>(), n0, yo, acc);
      store(WarpTile<>(), n0, acc, a.wsC);
    }
    yo.write(s.syoff, a.Ts, tc);
  }
}

// Phase 7, the middle terms of e_t: Σ_{i≥t} yoff_i into sdin, Σ_{j<t} sout_j into sdout (both free now):
// warp 0 scans yoff from the end, warp 1 sout from the start, two steps a lane, a fixed order.
template <int kSumSlots>
__device__ __forceinline__ void bwd_offset_sums(const Args& a, const BwdChunk& k, const BwdTiles& s) {
  const int tc = k.tc, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (warp < 2) {
    const float* src = warp == 0 ? s.syoff : s.sout;
    float* dst = warp == 0 ? s.sdin : s.sdout;
    const int ta = warp == 0 ? tc - 1 - 2 * lane : 2 * lane, tb = warp == 0 ? ta - 1 : ta + 1;
    const bool va = ta >= 0 && ta < tc, vb = tb >= 0 && tb < tc;
    const float v0 = va ? partial_sum<kSumSlots>(src, a.Ts, ta) : 0.f;
    const float v1 = vb ? partial_sum<kSumSlots>(src, a.Ts, tb) : 0.f;
    const float incl = warp_inclusive_scan(v0 + v1);
    float excl = __shfl_up_sync(kWarpMask, incl, 1);
    excl = lane == 0 ? 0.f : excl;
    if (warp == 0) {  // inclusive suffix sums
      if (va) dst[ta] = excl + v0;
      if (vb) dst[tb] = incl;
    } else {  // exclusive prefix sums
      if (va) dst[ta] = excl;
      if (vb) dst[tb] = excl + v0;
    }
  }
}

// Phase 8, dΔ_t = Σ_p x_t[p] v_t[p] + A e_t with e_t = c0 + E_t + Σ_{i≥t} yoff_i + Σ_{j<t} sout_j, and this
// block's partials of dA_log = A Σ_t Δ_t e_t (∂A/∂A_log = A) and dD_h = Σ_t Σ_p dy_t[p] x_t[p].
__device__ __forceinline__ void bwd_ddelta_params(const Args& a, const BwdChunk& k, const BwdTiles& s, float c0) {
  const int tc = k.tc, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float dA = 0.f, dD = 0.f;
  for (int t = threadIdx.x; t < tc; t += kThreads) {
    const float e = c0 + s.sEq[t] + s.sdin[t] + s.sdout[t];
    a.ddelta[row_of(a, k.b, k.t0 + t) * a.H + k.h] = partial_sum<kColWarps>(s.sdd, a.Ts, t) + k.A * e;
    dA += s.sdt[t] * e;
  }
  for (int t = warp; t < tc; t += kThreads / 32)
    for (int p = lane; p < a.P; p += 32) dD += s.sDY[t * a.ldP + p] * s.sX[t * a.ldP + p];
  block_sum2_first(dA, dD, s.syoff);  // syoff, sout (8·Ts ≥ 32 floats) were last read by the scans above
  if (threadIdx.x == 0) {
    const size_t slot = (size_t(k.b) * a.H + k.h) * a.nchunks + k.c;
    a.wsA[slot] = dA * k.A;  // ∂A/∂A_log = A
    a.wsD[slot] = dD;
  }
}

template <MmaMode kMode, int kN, int kP, bool kFullChunks>
__global__ void __launch_bounds__(kThreads, (kBwdMinBlocks<kN, kP>)) bwd_kernel(Args args) {
  extern __shared__ __align__(16) double smem_d[];
  const Args a = fixed_dims<kN, kP>(args);
  // dB and dC computed concurrently (bwd_db_dc) for the 'M' and 'L' shapes, where S_in has a tile of its own.
  constexpr bool kConcurrent = bwd_concurrent(kN, kP);
  constexpr int kSumSlots = kConcurrent ? 2 : kColWarps;  // row-sum partials of sout and yoff per step
  const BwdTiles s = bwd_tiles(a, smem_d);
  const BwdChunk k = bwd_stage_and_decay<kFullChunks>(a, s);
  bwd_cb_dx<kMode>(a, k, s);
  __syncthreads();
  bwd_w_sums(a, k, s);
  bwd_store_dx(a, k, s);
  stage_wait_pending<1>();  // B, C, G_{c+1}
  __syncthreads();
  bwd_dx<kMode>(a, k, s);
  // Pairs of heads (a.cluster_heads == 2): this block is past the last reader of its C·Bᵀ and DX tiles, so
  // its partner may write into them (bwd_db_dc); the partner waits for this arrival before it does.
  if (kConcurrent && kN == 128 && a.cluster_heads > 1) __cluster_barrier_arrive();
  const float c0 = bwd_gs_sin(a, k, s);  // synchronises
  bwd_db_dc<kMode, kN, kConcurrent>(a, k, s);
  __syncthreads();  // the row and column sums of every warp are in place
  bwd_offset_sums<kSumSlots>(a, k, s);
  __syncthreads();
  bwd_ddelta_params(a, k, s, c0);
}

// (c) dB, dC of group g = Σ over its heads h ∈ [⌈gH/G⌉, ⌈(g+1)H/G⌉) of the per-head partials. kRuns: runs of
// `run` consecutive partials summed in order from 0, then the runs' sums in order from 0 (the reverse walk's
// clusters of 2 in place of larger ones, so that dB, dC have the same bits at either size: ssd_bwd_walk.cu,
// cluster_sums); else one sum in order, the loop the compiler pipelines (one nested loop for both cost the
// chunk-parallel backward ~12 µs on 'S', H100).
template <bool kRuns>
__global__ void group_sum_kernel(int rows, int H, int G, int N, int ld, int run, const float* wsB, const float* wsC,
                                 float* dB, float* dC) {
  const size_t total = size_t(rows) * G * N;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += size_t(gridDim.x) * blockDim.x) {
    const int n = int(i % N), g = int((i / N) % G);
    const size_t row = i / (size_t(N) * G);
    const int h_lo = (g * H + G - 1) / G, h_hi = ((g + 1) * H + G - 1) / G;
    float sb = 0.f, sc = 0.f;
    if constexpr (kRuns) {
      for (int h0 = h_lo; h0 < h_hi; h0 += run) {
        float rb = 0.f, rc = 0.f;
        for (int h = h0; h < min(h0 + run, h_hi); ++h) {
          rb += wsB[(row * H + h) * N + n];
          rc += wsC[(row * H + h) * N + n];
        }
        sb += rb, sc += rc;
      }
    } else {
      for (int h = h_lo; h < h_hi; ++h) {
        sb += wsB[(row * H + h) * N + n];
        sc += wsC[(row * H + h) * N + n];
      }
    }
    dB[row * ld + size_t(g) * N + n] = sb;
    dC[row * ld + size_t(g) * N + n] = sc;
  }
}

// (d) dA_log[h] += Σ_{b, c}, dD[h] += Σ_{b, c} of the per-(b, h, chunk) partials: a block per (head, member),
// each thread a fixed strided subset of the member's Bm = B / members rows in order, then a fixed-order block
// sum; member m's sums go to dA_log, dD + m·member_stride. One member: grid (H, 1), the rows 0..B.
// ColsumOrder::kBlock512 (colsum.h) is this order at nchunks = 1, for the walks' deferred sums (SsdParamDefer).
static_assert(kThreads == 512, "param_reduce's block is the 512 threads of ColsumOrder::kBlock512");
__global__ void __launch_bounds__(kThreads) param_reduce_kernel(int Bm, int H, int nchunks, const float* wsA,
                                                                const float* wsD, float* dA_log, float* dD,
                                                                size_t member_stride) {
  __shared__ float red[2 * kThreads / 32];
  const int h = blockIdx.x, m = blockIdx.y;
  wsA += size_t(m) * Bm * H * nchunks, wsD += size_t(m) * Bm * H * nchunks;
  float sa = 0.f, sd = 0.f;
  for (int k = threadIdx.x; k < Bm * nchunks; k += kThreads) {
    const int b = k / nchunks, c = k % nchunks;
    sa += wsA[(size_t(b) * H + h) * nchunks + c];
    sd += wsD[(size_t(b) * H + h) * nchunks + c];
  }
  block_sum2_first(sa, sd, red);
  if (threadIdx.x == 0) dA_log[m * member_stride + h] += sa, dD[m * member_stride + h] += sd;
}

}  // namespace

void group_sum(int rows, int parts, int G, int N, int ld, int run, const float* wsB, const float* wsC, float* dB,
               float* dC, cudaStream_t stream) {
  require(run >= 1, "ssd: group_sum's run of partials must be at least 1");
  const size_t total = size_t(rows) * G * N;  // fixed grid from the shape
  const int threads = 256;
  const int blocks = int(std::min<size_t>((total + threads - 1) / threads, 65535));
  if (run > 1)
    group_sum_kernel<true><<<blocks, threads, 0, stream>>>(rows, parts, G, N, ld, run, wsB, wsC, dB, dC);
  else
    group_sum_kernel<false><<<blocks, threads, 0, stream>>>(rows, parts, G, N, ld, run, wsB, wsC, dB, dC);
  MLALPHA_CHECK_LAUNCH(stream);
}

void param_reduce(int B, int H, int nchunks, const float* wsA, const float* wsD, float* dA_log, float* dD,
                  cudaStream_t stream, int members, size_t member_stride) {
  param_reduce_kernel<<<dim3(H, members), kThreads, 0, stream>>>(B / members, H, nchunks, wsA, wsD, dA_log, dD,
                                                                 member_stride);
  MLALPHA_CHECK_LAUNCH(stream);
}

}  // namespace ssd_detail

namespace {
// ssd_bwd; xbc16 non-null: x, B, C in bf16 and dy in bf16 (dy16; dy null), the walks only, checked by the caller.
void bwd(const SsdParams& p, const SsdInputs<float>& in, const SsdXbcBf16* xbc16, const float* saved, const float* dy,
         const __nv_bfloat16* dy16, const SsdGrads<float>& g, float* workspace, cudaStream_t stream,
         const SsdParamDefer* defer) {
  using namespace ssd_detail;
  validate(p);
  if (p.B == 0) return;
  if (p.L == 0) {  // nothing else is written, the accumulators get += 0; h0 reaches nothing
    if (g.dh0) MLALPHA_CUDA_CHECK(cudaMemsetAsync(g.dh0, 0, size_t(p.B) * p.H * p.P * p.N * sizeof(float), stream));
    return;
  }
  if (uses_walk(p)) return walk::ssd_bwd_walk(p, in, xbc16, saved, dy, dy16, g, workspace, stream, defer);
  require(xbc16 == nullptr && dy16 == nullptr, "ssd_bwd: bf16 x, B, C, dy on the chunk-parallel path");
  Args a = make_layout(p);
  set_inputs(a, in);
  a.h_last = nullptr;  // an output of the forward only
  a.dh0 = g.dh0;
  a.dy = dy;
  a.states = const_cast<float*>(saved);  // read only in the backward
  a.cb = a.states + saved_cb_offset(a);
  a.dx = g.dx, a.ddelta = g.ddelta, a.dB = g.dB, a.dC = g.dC;
  const size_t rows = size_t(p.B) * p.L;
  const BwdWorkspace w = bwd_workspace(a);
  a.wsDX = workspace + w.dx, a.wsG = workspace + w.g, a.wsB = workspace + w.b, a.wsC = workspace + w.c;
  a.wsA = workspace + w.a, a.wsD = workspace + w.d, a.wsE = workspace + w.e;

  chunk_adjoint_states(a, stream);  // (a)
  with_dims(a, [&](auto n, auto pp, auto full) {  // (b)
    constexpr bool kConcurrent = bwd_concurrent(decltype(n)::value, decltype(pp)::value);
    require(!kConcurrent || a.sin_own, "ssd_bwd: the concurrent dB/dC path needs S_in's own tile");
    // Pairs of heads add their dB, dC in shared memory (a cluster of two) on the 'L' head shape (N = 128), when a
    // group's heads pair up. H200, per layer (backward + group sum): L 1777 -> 1724 us with pairs, 1861 with
    // clusters of 4; M 373 -> 387 with pairs (its blocks are short, the cluster barriers cost more than
    // the group sum saves), so M and the rest keep one partial per head.
    constexpr int kPairs = kConcurrent && decltype(n)::value == 128 ? 2 : 1;
    if (kPairs > 1 && p.H % p.G == 0 && (p.H / p.G) % kPairs == 0 && p.N % 4 == 0) a.cluster_heads = kPairs;
    auto pick = [](auto mode) {
      return bwd_kernel<decltype(mode)::value, decltype(n)::value, decltype(pp)::value, decltype(full)::value>;
    };
    launch_kernel(a, pick, dim3(a.nchunks, p.H, p.B), kThreads, bwd_smem_bytes(a), stream,
                  dim3(1, a.cluster_heads, 1));
  });
  group_sum(int(rows), p.H / a.cluster_heads, p.G, p.N, p.ld, 1, a.wsB, a.wsC, g.dB, g.dC, stream);  // (c)
  group_dx_products(a, stream);                                                                   // (d)
  param_reduce(p.B, p.H, a.nchunks, a.wsA, a.wsD, g.dA_log, g.dD, stream, p.members, p.member_stride);  // (e)
}

}  // namespace

void ssd_bwd(const SsdParams& p, const SsdInputs<float>& in, const float* saved, const float* dy,
             const SsdGrads<float>& g, float* workspace, cudaStream_t stream, const SsdParamDefer* defer) {
  bwd(p, in, nullptr, saved, dy, nullptr, g, workspace, stream, defer);
}

void ssd_bwd(const SsdParams& p, const SsdInputs<float>& in, const SsdXbcBf16& xbc, const float* saved,
             const __nv_bfloat16* dy16, const SsdGrads<float>& g, float* workspace, cudaStream_t stream,
             const SsdParamDefer* defer) {
  ssd_detail::require_xbc16(p, in, xbc, "ssd_bwd");
  require(p.B == 0 || p.L == 0 || dy16, "ssd_bwd: dy16 is null (bf16 x, B, C come with bf16 dy)");
  bwd(p, in, &xbc, saved, nullptr, dy16, g, workspace, stream, defer);
}

}  // namespace mlalpha::gpu

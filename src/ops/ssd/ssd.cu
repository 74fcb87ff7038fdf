// SSD selective scan on the GPU (DESIGN section 1): the scan parallel over (batch, head, p, n) with the
// state saved at chunk boundaries. Math and shapes: ssd.h; the oracle: ssd_ref.cpp.
//
// Thread layout (all three scan kernels). A head's state s (P×N) is spread over a block: lanes of a warp
// split into PL = 32/NL groups of NL lanes; lane nl of a group owns the n values nl + NL·k (k < NPT, N is
// zero-padded to NS = NL·NPT; NL is picked so that NPT ≈ 8, which keeps the shuffle levels per row reduction
// few), and each thread owns RP rows p = j·(W·PL) + w·PL + pl (j < RP, warp w of W).
// So the state lives in registers (RP·NPT values a thread), y_t[p] = Σ_n s[p,n] C_t[n] and v_t[p] are
// reductions over the NL lanes of a group (xor butterfly: a fixed order, identical in every lane), and the
// sums over p (dC, dB, the per-step scalars) go within a thread over j, across the PL groups of a warp by
// xor shuffles, then across warps through shared memory in warp order. Nothing depends on the device, so
// results are bit-reproducible. Per-step inputs (B, C, x, dy, Δ, a) are staged in shared memory TS steps at a
// time with coalesced row loads; outputs are staged and written back the same way.
//
// Forward  ssd_fwd_kernel        grid (p-tiles, H, B): rows are independent in the forward, so a block owns
//          PT = W·PL·RP rows of one (b, h) and runs t = 0..L−1, saving s at every t with t % Q == 0 (the state
//          entering chunk t/Q) into chunk_states.
// Backward (a) ssd_bwd_chunk_kernel grid (nchunks, H, B), all P rows: from the saved state entering the
//          chunk, recompute s_t over the chunk; write per-head dC_t[n] = Σ_p s_t[p,n] dy_t[p] and the scalar
//          z_t = a_t Σ_p dy_t[p] (s_{t−1} C_t)[p] to the workspace.
//          (b) ssd_bwd_scan_kernel grid (H, B), all P rows: the reverse scan g_t = dy_t C_tᵀ + a_{t+1} g_{t+1};
//          v_t, dx_t, per-head dB_t, dd_t = Σ_p x_t[p] v_t[p]. The term e_t = a_t r_t = a_t Σ g_t·s_{t−1} needs
//          s_{t−1}, which is not at hand in a reverse scan. Expanding g_t = dy_t C_tᵀ + a_{t+1} g_{t+1} and
//          s_t = a_t s_{t−1} + u_t (u_t = Δ_t x_t B_tᵀ) in e_{t+1} gives a reverse cumsum of per-step scalars
//              e_t = e_{t+1} + z_t − a_{t+1} Δ_t Σ_p x_t[p] (g_{t+1} B_t)[p],   e_L = 0,
//          whose increments are each O(a), so strong decays (e_t → 0) do not leave a difference of large
//          terms. It is re-anchored exactly at every chunk start c·Q with e = a_t Σ g_t·S_c from the saved
//          state S_c. Rounding in the increments would still add up coherently (e_t carries all of them
//          back to the chunk end, and dA sums e_t again: error ~ Q^1.5·eps relative, 7e-5 in fp32 with
//          Q = 256 and Δ ~ 1), so the backward's recurrences s, g and the increments run in double
//          (Acc below); the inputs, the saved states and all outputs stay fp32.
//          Then ddelta_t = dd_t + A e_t and dA += Δ_t e_t (per-(b, h) partials).
//          (c) ssd_group_sum_kernel: dB, dC = Σ over the heads of each group, in head order.
//          (d) ssd_param_reduce_kernel: dA_log, dD += Σ over b of the per-(b, h) partials, in b order.
#include <algorithm>
#include <cstdint>
#include <string>

#include "core/cuda_check.h"
#include "ops/common/warp_sum.cuh"
#include "ops/ssd/ssd.h"

namespace mlalpha::gpu {
namespace {

constexpr unsigned kFull = 0xffffffffu;
constexpr int kMaxWarps = 8;                         // all-rows kernels: W ≤ 8 (256 threads)
constexpr int kFwdWarps = 4;                         // forward blocks: 4 warps over a p-tile
constexpr int kMaxTs = 32;                           // steps staged at a time
constexpr int kSmemBudgetBytes = 46 * 1024;         // under the 48 KiB default: no opt-in attribute needed
constexpr int kMaxN = 256;                           // NPT ≤ 8
constexpr int kMaxRp = 16;
using Acc = double;  // the backward's recurrences and per-step scalars (see the top of the file)

// Everything a scan kernel needs, passed by value.
struct Args {
  int B, L, H, P, G, N, Q, ld, nchunks;
  int NL, NS, PL, W, PT, TS;  // layout (see the top of the file)
  const float *x, *delta, *A_log, *Bm, *Cm, *Dskip, *dy;
  float* y;        // (B, L, H, P) forward output
  float* states;   // (B, H, nchunks, P, N)
  float* dx;       // (B, L, ld)→(H, P)
  float* ddelta;   // (B, L, H)
  float* wsB;      // (B, L, H, N) per-head dB
  float* wsC;      // (B, L, H, N) per-head dC
  Acc* wsZ;        // (B, L, H) z_t = a_t Σ_p dy_t[p] (s_{t−1} C_t)[p]
  float* wsA;      // (B, H) per-(b, h) dA_log partial
  float* wsD;      // (B, H) per-(b, h) dD partial
};

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

__device__ __forceinline__ size_t row_of(const Args& a, int b, int t) { return size_t(b) * a.L + t; }

// Stage TS-step slices into shared memory: rows of B or C (zero-padded to NS columns), x or dy columns
// of rows p0..p0+PT (zero past P), and Δ_t, a_t = exp(Δ_t A). Coalesced along the row.
__device__ void stage_bc(const Args& a, const float* src, float* dst, int b, int g, int t0, int ts) {
  for (int i = threadIdx.x; i < ts * a.NS; i += blockDim.x) {
    const int t = i / a.NS, n = i % a.NS;
    dst[i] = n < a.N ? src[row_of(a, b, t0 + t) * a.ld + size_t(g) * a.N + n] : 0.f;
  }
}
__device__ void stage_x(const Args& a, float* dst, int b, int h, int p0, int t0, int ts) {
  for (int i = threadIdx.x; i < ts * a.PT; i += blockDim.x) {
    const int t = i / a.PT, p = p0 + i % a.PT;
    dst[i] = p < a.P ? a.x[row_of(a, b, t0 + t) * a.ld + size_t(h) * a.P + p] : 0.f;
  }
}
__device__ void stage_dy(const Args& a, float* dst, int b, int h, int p0, int t0, int ts) {
  for (int i = threadIdx.x; i < ts * a.PT; i += blockDim.x) {
    const int t = i / a.PT, p = p0 + i % a.PT;
    dst[i] = p < a.P ? a.dy[(row_of(a, b, t0 + t) * a.H + h) * a.P + p] : 0.f;
  }
}
__device__ void stage_dt(const Args& a, float* sdt, float* sa, float A, int b, int h, int t0, int ts) {
  for (int t = threadIdx.x; t < ts; t += blockDim.x) {
    const float dt = a.delta[row_of(a, b, t0 + t) * a.H + h];
    sdt[t] = dt;
    sa[t] = expf(dt * A);
  }
}

// ---------------------------------------------------------------------------------------------------
// Forward: s_t = a_t s_{t−1} + Δ_t x_t B_tᵀ, y_t = s_t C_t + D x_t; saves s at chunk starts.
template <int NPT, int RP>
__global__ void __launch_bounds__(kMaxWarps * 32) ssd_fwd_kernel(Args a) {
  extern __shared__ float smem[];
  const int h = blockIdx.y, b = blockIdx.z, g = h * a.G / a.H, p0 = blockIdx.x * a.PT;
  float* sB = smem;                 // (TS, NS)
  float* sC = sB + a.TS * a.NS;     // (TS, NS)
  float* sx = sC + a.TS * a.NS;     // (TS, PT)
  float* sy = sx + a.TS * a.PT;     // (TS, PT)
  float* sdt = sy + a.TS * a.PT;    // (TS)
  float* sa = sdt + a.TS;           // (TS)
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nl = lane & (a.NL - 1), pl = lane / a.NL;
  const float A = -expf(a.A_log[h]), Dh = a.Dskip[h];

  float s[RP][NPT];
#pragma unroll
  for (int j = 0; j < RP; ++j)
#pragma unroll
    for (int k = 0; k < NPT; ++k) s[j][k] = 0.f;

  for (int t0 = 0; t0 < a.L; t0 += a.TS) {
    const int ts = min(a.TS, a.L - t0);
    stage_bc(a, a.Bm, sB, b, g, t0, ts);
    stage_bc(a, a.Cm, sC, b, g, t0, ts);
    stage_x(a, sx, b, h, p0, t0, ts);
    stage_dt(a, sdt, sa, A, b, h, t0, ts);
    __syncthreads();
    for (int t = 0; t < ts; ++t) {
      const int tt = t0 + t;
      if (a.states != nullptr && tt % a.Q == 0) {  // the state entering chunk tt/Q (uniform branch)
        float* S = a.states + (size_t(b) * a.H + h) * a.nchunks * a.P * a.N + size_t(tt / a.Q) * a.P * a.N;
#pragma unroll
        for (int j = 0; j < RP; ++j) {
          const int p = p0 + j * (a.W * a.PL) + w * a.PL + pl;
#pragma unroll
          for (int k = 0; k < NPT; ++k) {
            const int n = nl + a.NL * k;
            if (p < a.P && n < a.N) S[size_t(p) * a.N + n] = s[j][k];
          }
        }
      }
      const float dt = sdt[t], at = sa[t];
      const float* Bt = sB + t * a.NS;
      const float* Ct = sC + t * a.NS;
#pragma unroll
      for (int j = 0; j < RP; ++j) {
        const int lr = j * (a.W * a.PL) + w * a.PL + pl;
        const float xv = sx[t * a.PT + lr], u = dt * xv;
        float acc = 0.f;
#pragma unroll
        for (int k = 0; k < NPT; ++k) {
          const int n = nl + a.NL * k;
          s[j][k] = at * s[j][k] + u * Bt[n];
          acc += s[j][k] * Ct[n];
        }
        acc = sum_n_lanes(acc, a.NL);
        if (nl == 0) sy[t * a.PT + lr] = acc + Dh * xv;
      }
    }
    __syncthreads();
    for (int i = threadIdx.x; i < ts * a.PT; i += blockDim.x) {
      const int t = i / a.PT, p = p0 + i % a.PT;
      if (p < a.P) a.y[(row_of(a, b, t0 + t) * a.H + h) * a.P + p] = sy[i];
    }
    __syncthreads();  // sy and the staged inputs are rewritten next round
  }
}

// ---------------------------------------------------------------------------------------------------
// Backward (a): per chunk, recompute s_t (in Acc) from the saved chunk state; per-head dC_t and z_t.
template <int NPT, int RP>
__global__ void __launch_bounds__(kMaxWarps * 32) ssd_bwd_chunk_kernel(Args a) {
  extern __shared__ Acc smem_acc[];  // Acc arrays first: alignment
  const int c = blockIdx.x, h = blockIdx.y, b = blockIdx.z, g = h * a.G / a.H;
  Acc* sZ = smem_acc;                                        // (W, TS) per-warp z partials
  float* sB = reinterpret_cast<float*>(sZ + a.W * a.TS);     // (TS, NS)
  float* sC = sB + a.TS * a.NS;     // (TS, NS)
  float* sx = sC + a.TS * a.NS;     // (TS, PT)
  float* sdy = sx + a.TS * a.PT;    // (TS, PT)
  float* sdt = sdy + a.TS * a.PT;   // (TS)
  float* sa = sdt + a.TS;           // (TS)
  float* sPart = sa + a.TS;         // (W, TS, NS) per-warp dC partials
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nl = lane & (a.NL - 1), pl = lane / a.NL;
  const float A = -expf(a.A_log[h]);

  Acc s[RP][NPT];
  const float* S = a.states + ((size_t(b) * a.H + h) * a.nchunks + c) * a.P * a.N;
#pragma unroll
  for (int j = 0; j < RP; ++j) {
    const int p = j * (a.W * a.PL) + w * a.PL + pl;
#pragma unroll
    for (int k = 0; k < NPT; ++k) {
      const int n = nl + a.NL * k;
      s[j][k] = (p < a.P && n < a.N) ? Acc(S[size_t(p) * a.N + n]) : Acc(0);
    }
  }

  const int cbeg = c * a.Q, cend = min(a.L, cbeg + a.Q);
  for (int t0 = cbeg; t0 < cend; t0 += a.TS) {
    const int ts = min(a.TS, cend - t0);
    stage_bc(a, a.Bm, sB, b, g, t0, ts);
    stage_bc(a, a.Cm, sC, b, g, t0, ts);
    stage_x(a, sx, b, h, 0, t0, ts);
    stage_dy(a, sdy, b, h, 0, t0, ts);
    stage_dt(a, sdt, sa, A, b, h, t0, ts);
    __syncthreads();
    for (int t = 0; t < ts; ++t) {
      const Acc at = sa[t];
      const float dt = sdt[t];
      const float* Bt = sB + t * a.NS;
      const float* Ct = sC + t * a.NS;
      float dcp[NPT];
#pragma unroll
      for (int k = 0; k < NPT; ++k) dcp[k] = 0.f;
      Acc zp = 0;
#pragma unroll
      for (int j = 0; j < RP; ++j) {
        const int lr = j * (a.W * a.PL) + w * a.PL + pl;
        const Acc u = dt * sx[t * a.PT + lr];
        const float dyv = sdy[t * a.PT + lr];
        Acc acc = 0;
#pragma unroll
        for (int k = 0; k < NPT; ++k) {
          const int n = nl + a.NL * k;
          acc += s[j][k] * Ct[n];  // (s_{t−1} C_t)[p]
          s[j][k] = at * s[j][k] + u * Bt[n];
          dcp[k] += float(s[j][k]) * dyv;  // dC_t[n] = Σ_p s_t[p,n] dy_t[p]
        }
        zp += dyv * sum_n_lanes(acc, a.NL);
      }
      zp = warp_sum(nl == 0 ? zp : Acc(0));  // every lane of a group holds the same row sums: count one
#pragma unroll
      for (int k = 0; k < NPT; ++k) dcp[k] = sum_p_lanes(dcp[k], a.NL);
      if (pl == 0) {
#pragma unroll
        for (int k = 0; k < NPT; ++k) sPart[(w * a.TS + t) * a.NS + nl + a.NL * k] = dcp[k];
      }
      if (lane == 0) sZ[w * a.TS + t] = zp;
    }
    __syncthreads();
    for (int i = threadIdx.x; i < ts * a.N; i += blockDim.x) {
      const int t = i / a.N, n = i % a.N;
      float v = 0.f;
      for (int ww = 0; ww < a.W; ++ww) v += sPart[(ww * a.TS + t) * a.NS + n];
      a.wsC[(row_of(a, b, t0 + t) * a.H + h) * a.N + n] = v;
    }
    for (int t = threadIdx.x; t < ts; t += blockDim.x) {
      Acc v = 0;
      for (int ww = 0; ww < a.W; ++ww) v += sZ[ww * a.TS + t];
      a.wsZ[row_of(a, b, t0 + t) * a.H + h] = Acc(sa[t]) * v;  // z_t = a_t Σ_p dy_t[p] (s_{t−1} C_t)[p]
    }
    __syncthreads();
  }
}

// ---------------------------------------------------------------------------------------------------
// Backward (b): reverse scan over the whole sequence of one (b, h), g in Acc.
template <int NPT, int RP>
__global__ void __launch_bounds__(kMaxWarps * 32) ssd_bwd_scan_kernel(Args a) {
  extern __shared__ Acc smem_acc[];  // Acc arrays first: alignment
  __shared__ Acc sRed[kMaxWarps];
  const int h = blockIdx.x, b = blockIdx.y, g = h * a.G / a.H;
  Acc* sz = smem_acc;                 // (TS) z_t
  Acc* sDD = sz + a.TS;               // (W, TS) per-warp dd_t partials
  Acc* sGU = sDD + a.W * a.TS;        // (W, TS) per-warp a_{t+1} Σ g_{t+1}·u_t partials
  Acc* sRho = sGU + a.W * a.TS;       // (W, TS) per-warp Σ g_t·S_c at chunk starts
  float* sB = reinterpret_cast<float*>(sRho + a.W * a.TS);  // (TS, NS)
  float* sC = sB + a.TS * a.NS;     // (TS, NS)
  float* sx = sC + a.TS * a.NS;     // (TS, PT)
  float* sdy = sx + a.TS * a.PT;    // (TS, PT)
  float* sdx = sdy + a.TS * a.PT;   // (TS, PT)
  float* sdt = sdx + a.TS * a.PT;   // (TS)
  float* sa = sdt + a.TS;           // (TS)
  float* sPart = sa + a.TS;         // (W, TS, NS) per-warp dB partials
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nl = lane & (a.NL - 1), pl = lane / a.NL;
  const float A = -expf(a.A_log[h]), Dh = a.Dskip[h];
  const float* Sbh = a.states + (size_t(b) * a.H + h) * a.nchunks * a.P * a.N;

  Acc gs[RP][NPT];
#pragma unroll
  for (int j = 0; j < RP; ++j)
#pragma unroll
    for (int k = 0; k < NPT; ++k) gs[j][k] = 0;
  Acc a_next = 0;          // a_{t+1}; g_L = 0
  Acc dDp = 0;             // this thread's Σ dy·x (lanes nl == 0)
  Acc e = 0, dA = 0;       // thread 0: e_{t+1} = a_{t+1} r_{t+1}, Σ Δ_t e_t

  for (int t1 = a.L; t1 > 0; t1 -= a.TS) {
    const int t0 = max(0, t1 - a.TS), ts = t1 - t0;
    stage_bc(a, a.Bm, sB, b, g, t0, ts);
    stage_bc(a, a.Cm, sC, b, g, t0, ts);
    stage_x(a, sx, b, h, 0, t0, ts);
    stage_dy(a, sdy, b, h, 0, t0, ts);
    stage_dt(a, sdt, sa, A, b, h, t0, ts);
    for (int t = threadIdx.x; t < ts; t += blockDim.x) sz[t] = a.wsZ[row_of(a, b, t0 + t) * a.H + h];
    __syncthreads();
    for (int t = ts - 1; t >= 0; --t) {
      const int tt = t0 + t;
      const float dt = sdt[t];
      const float* Bt = sB + t * a.NS;
      const float* Ct = sC + t * a.NS;
      float dbp[NPT];
#pragma unroll
      for (int k = 0; k < NPT; ++k) dbp[k] = 0.f;
      Acc ddp = 0, gup = 0;
#pragma unroll
      for (int j = 0; j < RP; ++j) {
        const int lr = j * (a.W * a.PL) + w * a.PL + pl;
        const float xv = sx[t * a.PT + lr], dyv = sdy[t * a.PT + lr], u = dt * xv;
        float v = 0.f;
        Acc vn = 0;
#pragma unroll
        for (int k = 0; k < NPT; ++k) {
          const int n = nl + a.NL * k;
          vn += gs[j][k] * Bt[n];                           // (g_{t+1} B_t)[p]
          gs[j][k] = a_next * gs[j][k] + Acc(dyv) * Ct[n];  // g_t = dy_t C_tᵀ + a_{t+1} g_{t+1}
          const float gf = float(gs[j][k]);
          v += gf * Bt[n];                                  // v_t[p] = Σ_n g_t[p,n] B_t[n]
          dbp[k] += gf * u;                                 // dB_t[n] = Σ_p g_t[p,n] Δ_t x_t[p]
        }
        v = sum_n_lanes(v, a.NL);
        vn = sum_n_lanes(vn, a.NL);
        if (nl == 0) {
          gup += Acc(dt) * xv * vn;
          sdx[t * a.PT + lr] = dt * v + Dh * dyv;  // dx_t = Δ_t v_t + D dy_t
          ddp += Acc(xv * v);
          dDp += Acc(dyv) * xv;
        }
      }
      ddp = warp_sum(ddp);  // lanes nl ≠ 0 added nothing
      gup = warp_sum(gup);
#pragma unroll
      for (int k = 0; k < NPT; ++k) dbp[k] = sum_p_lanes(dbp[k], a.NL);
      if (pl == 0) {
#pragma unroll
        for (int k = 0; k < NPT; ++k) sPart[(w * a.TS + t) * a.NS + nl + a.NL * k] = dbp[k];
      }
      if (lane == 0) {
        sDD[w * a.TS + t] = ddp;
        sGU[w * a.TS + t] = a_next * gup;  // a_{t+1} Σ g_{t+1}·u_t
      }
      if (tt % a.Q == 0) {  // chunk start (uniform branch): Σ g_t·S_c with S_c = s_{t−1} saved by the forward
        const float* S = Sbh + size_t(tt / a.Q) * a.P * a.N;
        Acc rho = 0;
#pragma unroll
        for (int j = 0; j < RP; ++j) {
          const int p = j * (a.W * a.PL) + w * a.PL + pl;
#pragma unroll
          for (int k = 0; k < NPT; ++k) {
            const int n = nl + a.NL * k;
            if (p < a.P && n < a.N) rho += gs[j][k] * S[size_t(p) * a.N + n];
          }
        }
        rho = warp_sum(rho);
        if (lane == 0) sRho[w * a.TS + t] = rho;
      }
      a_next = sa[t];
    }
    __syncthreads();
    for (int i = threadIdx.x; i < ts * a.PT; i += blockDim.x) {
      const int t = i / a.PT, p = i % a.PT;
      if (p < a.P) a.dx[row_of(a, b, t0 + t) * a.ld + size_t(h) * a.P + p] = sdx[i];
    }
    for (int i = threadIdx.x; i < ts * a.N; i += blockDim.x) {
      const int t = i / a.N, n = i % a.N;
      float v = 0.f;
      for (int ww = 0; ww < a.W; ++ww) v += sPart[(ww * a.TS + t) * a.NS + n];
      a.wsB[(row_of(a, b, t0 + t) * a.H + h) * a.N + n] = v;
    }
    if (threadIdx.x == 0) {
      // e_t = e_{t+1} + z_t − a_{t+1} Σ g_{t+1}·u_t, exact at chunk starts: e_t = a_t Σ g_t·S_c.
      for (int t = ts - 1; t >= 0; --t) {
        const int tt = t0 + t;
        Acc dd = 0;
        for (int ww = 0; ww < a.W; ++ww) dd += sDD[ww * a.TS + t];
        if (tt % a.Q == 0) {
          Acc rho = 0;
          for (int ww = 0; ww < a.W; ++ww) rho += sRho[ww * a.TS + t];
          e = Acc(sa[t]) * rho;
        } else {
          Acc gu = 0;
          for (int ww = 0; ww < a.W; ++ww) gu += sGU[ww * a.TS + t];
          e += sz[t] - gu;
        }
        a.ddelta[row_of(a, b, tt) * a.H + h] = float(dd + Acc(A) * e);  // dd_t + A a_t r_t
        dA += Acc(sdt[t]) * e;                                           // Δ_t a_t r_t
      }
    }
    __syncthreads();  // staged inputs and partials are rewritten next round
  }

  // dD partial of this (b, h): fixed-order block reduction.
  dDp = warp_sum(dDp);
  if (lane == 0) sRed[w] = dDp;
  __syncthreads();
  if (threadIdx.x == 0) {
    Acc d = 0;
    for (int ww = 0; ww < a.W; ++ww) d += sRed[ww];
    a.wsA[size_t(b) * a.H + h] = float(dA * Acc(A));  // ∂A/∂A_log = A
    a.wsD[size_t(b) * a.H + h] = float(d);
  }
}

// ---------------------------------------------------------------------------------------------------
// Backward (c): dB, dC of group g = Σ over its heads h ∈ [⌈gH/G⌉, ⌈(g+1)H/G⌉) of the per-head partials.
__global__ void ssd_group_sum_kernel(int rows, int H, int G, int N, int ld, const float* wsB, const float* wsC,
                                     float* dB, float* dC) {
  const size_t total = size_t(rows) * G * N;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += size_t(gridDim.x) * blockDim.x) {
    const int n = int(i % N), g = int((i / N) % G);
    const size_t row = i / (size_t(N) * G);
    const int h_lo = (g * H + G - 1) / G, h_hi = ((g + 1) * H + G - 1) / G;
    float sb = 0.f, sc = 0.f;
    for (int h = h_lo; h < h_hi; ++h) {
      sb += wsB[(row * H + h) * N + n];
      sc += wsC[(row * H + h) * N + n];
    }
    dB[row * ld + size_t(g) * N + n] = sb;
    dC[row * ld + size_t(g) * N + n] = sc;
  }
}

// Backward (d): dA_log[h] += Σ_b, dD[h] += Σ_b of the per-(b, h) partials, b in order.
__global__ void ssd_param_reduce_kernel(int B, int H, const float* wsA, const float* wsD, float* dA_log, float* dD) {
  const int h = blockIdx.x * blockDim.x + threadIdx.x;
  if (h >= H) return;
  float sa = 0.f, sd = 0.f;
  for (int b = 0; b < B; ++b) {
    sa += wsA[size_t(b) * H + h];
    sd += wsD[size_t(b) * H + h];
  }
  dA_log[h] += sa;
  dD[h] += sd;
}

// ---------------------------------------------------------------------------------------------------
// Host side: layout choice (from the shape only) and template dispatch.
int pow2_ceil(int v) {
  int r = 1;
  while (r < v) r <<= 1;
  return r;
}
int ceil_div(int a, int b) { return (a + b - 1) / b; }

void validate(const SsdParams& p) {
  require(p.B >= 0 && p.L >= 0, "ssd: B and L must be >= 0, got B=" + std::to_string(p.B) + " L=" + std::to_string(p.L));
  require(p.H >= 1 && p.P >= 1 && p.G >= 1 && p.N >= 1 && p.Q >= 1,
          "ssd: H, P, G, N, Q must be >= 1, got H=" + std::to_string(p.H) + " P=" + std::to_string(p.P) +
              " G=" + std::to_string(p.G) + " N=" + std::to_string(p.N) + " Q=" + std::to_string(p.Q));
  require(p.ld >= p.H * p.P && p.ld >= p.G * p.N,
          "ssd: ld=" + std::to_string(p.ld) + " must be >= H*P=" + std::to_string(p.H * p.P) +
              " and >= G*N=" + std::to_string(p.G * p.N));
  require(p.B <= 65535 && p.H <= 65535, "ssd (gpu): B and H must be <= 65535 (grid dimensions)");
  require(p.N <= kMaxN, "ssd (gpu): N=" + std::to_string(p.N) + " is unsupported (N <= 256: the state lives in "
                        "registers, N/32 values per lane)");
}

// Layout of the all-rows kernels (one block holds all P rows of a head); the forward narrows it to a p-tile.
Args make_layout(const SsdParams& p, bool all_rows) {
  Args a{};
  a.B = p.B, a.L = p.L, a.H = p.H, a.P = p.P, a.G = p.G, a.N = p.N, a.Q = p.Q, a.ld = p.ld;
  a.nchunks = ceil_div(p.L, p.Q);
  // ~8 n values a lane: fewer shuffle levels per row reduction than one n a lane (shuffles dominate).
  a.NL = std::min(32, pow2_ceil(ceil_div(p.N, 8)));
  const int npt = pow2_ceil(ceil_div(p.N, a.NL));
  a.NS = a.NL * npt;
  a.PL = 32 / a.NL;
  int rp = 1;
  while (rp <= kMaxRp && ceil_div(p.P, a.PL * rp) > kMaxWarps) rp <<= 1;
  require(rp <= kMaxRp, "ssd (gpu): P=" + std::to_string(p.P) + " with N=" + std::to_string(p.N) +
                            " is unsupported (P <= " + std::to_string(kMaxWarps * kMaxRp * a.PL) +
                            ": one block holds a head's P x N state in registers)");
  if (all_rows) {
    a.W = ceil_div(p.P, a.PL * rp);
  } else {
    rp = std::max(1, std::min(8 / npt, rp));  // ~8 state floats per thread, more blocks
    a.W = std::min(kFwdWarps, ceil_div(p.P, a.PL * rp));
  }
  a.PT = a.W * a.PL * rp;
  return a;
}
int rp_of(const Args& a) { return a.PT / (a.W * a.PL); }
int npt_of(const Args& a) { return a.NS / a.NL; }
// Steps staged at a time so that the dynamic shared memory stays under the budget.
int pick_ts(size_t bytes_per_step) {
  return int(std::max<size_t>(1, std::min<size_t>(kMaxTs, kSmemBudgetBytes / bytes_per_step)));
}

using KernelFn = void (*)(Args);
enum class Which { kFwd, kChunk, kScan };

template <int NPT, int RP>
KernelFn pick(Which k) {
  switch (k) {
    case Which::kFwd: return ssd_fwd_kernel<NPT, RP>;
    case Which::kChunk: return ssd_bwd_chunk_kernel<NPT, RP>;
    default: return ssd_bwd_scan_kernel<NPT, RP>;
  }
}
template <int NPT>
KernelFn pick_rp(Which k, int rp) {
  switch (rp) {
    case 1: return pick<NPT, 1>(k);
    case 2: return pick<NPT, 2>(k);
    case 4: return pick<NPT, 4>(k);
    case 8: return pick<NPT, 8>(k);
    case 16: return pick<NPT, 16>(k);
  }
  throw Error("ssd (gpu): internal: no kernel for RP=" + std::to_string(rp));
}
KernelFn select(Which k, const Args& a) {
  const int rp = rp_of(a);
  switch (npt_of(a)) {
    case 1: return pick_rp<1>(k, rp);
    case 2: return pick_rp<2>(k, rp);
    case 4: return pick_rp<4>(k, rp);
    case 8: return pick_rp<8>(k, rp);
  }
  throw Error("ssd (gpu): internal: no kernel for NPT=" + std::to_string(npt_of(a)));
}

}  // namespace

size_t ssd_chunk_states_floats(const SsdParams& p) {
  const size_t nchunks = p.Q > 0 ? size_t((p.L + p.Q - 1) / p.Q) : 0;
  return size_t(p.B) * p.H * nchunks * p.P * p.N;
}

// Workspace layout: z (B, L, H) in Acc first (so it stays 8-byte aligned), then per-head dB, dC
// (B, L, H, N) each, then the per-(b, h) partials of dA_log and dD (B, H) each.
size_t ssd_bwd_workspace_floats(const SsdParams& p) {
  const size_t rows = size_t(p.B) * p.L;
  return rows * p.H * (sizeof(Acc) / sizeof(float)) + 2 * rows * p.H * p.N + 2 * size_t(p.B) * p.H;
}

void ssd_fwd(const SsdParams& p, const float* x, const float* delta, const float* A_log, const float* Bm,
             const float* Cm, const float* Dskip, float* y, float* chunk_states, cudaStream_t stream) {
  validate(p);
  if (p.B == 0 || p.L == 0) return;
  Args a = make_layout(p, /*all_rows=*/false);
  const size_t per_step = (2 * a.NS + 2 * a.PT + 2) * sizeof(float);
  a.TS = pick_ts(per_step);
  a.x = x, a.delta = delta, a.A_log = A_log, a.Bm = Bm, a.Cm = Cm, a.Dskip = Dskip, a.y = y, a.states = chunk_states;
  const size_t smem = a.TS * per_step;
  const dim3 grid(ceil_div(p.P, a.PT), p.H, p.B);
  select(Which::kFwd, a)<<<grid, a.W * 32, smem, stream>>>(a);
  MLALPHA_CHECK_LAUNCH();
}

void ssd_bwd(const SsdParams& p, const float* x, const float* delta, const float* A_log, const float* Bm,
             const float* Cm, const float* Dskip, const float* chunk_states, const float* dy, float* dx,
             float* ddelta, float* dA_log, float* dB, float* dC, float* dD, float* workspace, cudaStream_t stream) {
  validate(p);
  if (p.B == 0 || p.L == 0) return;  // nothing is written, the accumulators get += 0
  Args a = make_layout(p, /*all_rows=*/true);
  a.x = x, a.delta = delta, a.A_log = A_log, a.Bm = Bm, a.Cm = Cm, a.Dskip = Dskip, a.dy = dy;
  a.states = const_cast<float*>(chunk_states);  // read only in the backward
  a.dx = dx, a.ddelta = ddelta;
  require(reinterpret_cast<uintptr_t>(workspace) % alignof(Acc) == 0,
          "ssd_bwd: workspace must be " + std::to_string(alignof(Acc)) + "-byte aligned");
  const size_t rows = size_t(p.B) * p.L;
  a.wsZ = reinterpret_cast<Acc*>(workspace);
  a.wsB = workspace + rows * p.H * (sizeof(Acc) / sizeof(float));
  a.wsC = a.wsB + rows * p.H * p.N;
  a.wsA = a.wsC + rows * p.H * p.N;
  a.wsD = a.wsA + size_t(p.B) * p.H;

  {  // (a) chunk-parallel recompute: dC partials, z
    const size_t per_step = (2 * a.NS + 2 * a.PT + 2 + a.W * a.NS) * sizeof(float) + a.W * sizeof(Acc);
    a.TS = pick_ts(per_step);
    const dim3 grid(a.nchunks, p.H, p.B);
    select(Which::kChunk, a)<<<grid, a.W * 32, a.TS * per_step, stream>>>(a);
    MLALPHA_CHECK_LAUNCH();
  }
  {  // (b) reverse scan
    const size_t per_step = (2 * a.NS + 3 * a.PT + 2 + a.W * a.NS) * sizeof(float) + (1 + 3 * a.W) * sizeof(Acc);
    a.TS = pick_ts(per_step);
    const dim3 grid(p.H, p.B);
    select(Which::kScan, a)<<<grid, a.W * 32, a.TS * per_step, stream>>>(a);
    MLALPHA_CHECK_LAUNCH();
  }
  {  // (c) group sums of dB, dC; fixed grid from the shape
    const size_t total = rows * p.G * p.N;
    const int threads = 256;
    const int blocks = int(std::min<size_t>((total + threads - 1) / threads, 65535));
    ssd_group_sum_kernel<<<blocks, threads, 0, stream>>>(int(rows), p.H, p.G, p.N, p.ld, a.wsB, a.wsC, dB, dC);
    MLALPHA_CHECK_LAUNCH();
  }
  {  // (d) parameter gradients
    ssd_param_reduce_kernel<<<ceil_div(p.H, 128), 128, 0, stream>>>(p.B, p.H, a.wsA, a.wsD, dA_log, dD);
    MLALPHA_CHECK_LAUNCH();
  }
}

}  // namespace mlalpha::gpu

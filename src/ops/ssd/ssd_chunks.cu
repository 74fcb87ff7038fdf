// The states at chunk boundaries that make the SSD scans chunk-parallel (ssd_common.cuh).
//
// Forward. s_t = a_t s_{t−1} + Δ_t x_t B_tᵀ is linear, so the state entering chunk c+1 is
//     S_{c+1} = (Π_{t∈c} a_t) S_c + Σ_{t∈c} (Π_{k∈c, k>t} a_k) Δ_t x_t B_tᵀ,
// the second term being chunk c's scan started from zero. Every chunk's scan runs in parallel
// (chunk_sum_kernel), then one short pass over the chunks per (b, h) adds the carried state (pass_kernel).
// Backward. The adjoint state g_t = dy_t C_tᵀ + a_{t+1} g_{t+1} runs backwards; at the first step of chunk c,
//     G_c = (Π_{t=cQ+1}^{(c+1)Q} a_t) G_{c+1} + (chunk c's reverse scan from zero, at its first step),
// the same two kernels with time reversed. G_c is needed for c ≥ 1 only (the scan of chunk c−1 starts from it).
// The chunk decays are exp(A Σ Δ) with the sum in double, in step order.
#include "ops/ssd/ssd_common.cuh"

namespace mlalpha::gpu::ssd_detail {
namespace {

// kReverse = false: chunk c = blockIdx.x ∈ [0, nchunks−1): s = Σ_{t∈c} (Π_{k>t} a_k) Δ_t x_t B_tᵀ → states[c+1].
// kReverse = true:  chunk c = blockIdx.x + 1 ∈ [1, nchunks): g = Σ_{t∈c} (Π_{cQ<k≤t} a_k) dy_t C_tᵀ → wsG[c].
template <int NPT, int RP, bool kReverse>
__global__ void __launch_bounds__(kMaxWarps * 32) chunk_sum_kernel(Args a) {
  using T = std::conditional_t<kReverse, Acc, float>;
  extern __shared__ __align__(16) float smem[];
  const int c = blockIdx.x + (kReverse ? 1 : 0), h = blockIdx.y, b = blockIdx.z, g = h * a.G / a.H;
  float* sR = smem;                 // (TS, NS) B_t (forward) or C_t (reverse)
  float* sV = sR + a.TS * a.NS;     // (TS, PT) x_t or dy_t
  float* sdt = sV + a.TS * a.PT;    // (TS)
  float* sa = sdt + a.TS;           // (TS)
  const float A = -expf(a.A_log[h]);

  T s[RP][NPT];
#pragma unroll
  for (int j = 0; j < RP; ++j)
#pragma unroll
    for (int k = 0; k < NPT; ++k) s[j][k] = T(0);

  const int cbeg = chunk_begin(a, c), cend = chunk_end(a, c);
  T a_next = 0;  // reverse: a_{t+1} (g = 0 before the first step processed, so its value is irrelevant)
  for (int i0 = cbeg; i0 < cend; i0 += a.TS) {
    const int ts = min(a.TS, cend - i0);
    const int t0 = kReverse ? cend - i0 - ts + cbeg : i0;  // the reverse visits tiles from the chunk end
    stage_bc(a, kReverse ? a.Cm : a.Bm, sR, b, g, t0, ts);
    if (kReverse) stage_dy(a, sV, b, h, t0, ts); else stage_x(a, sV, b, h, t0, ts);
    stage_dt(a, sdt, sa, A, b, h, t0, ts);
    __syncthreads();
    for (int i = 0; i < ts; ++i) {
      const int t = kReverse ? ts - 1 - i : i;
      const T dec = kReverse ? a_next : T(sa[t]);
      const float scale = kReverse ? 1.f : sdt[t];
      T R[NPT];
      load_lane(a, sR + t * a.NS, R);
#pragma unroll
      for (int j = 0; j < RP; ++j) {
        const T u = T(scale * sV[t * a.PT + local_row(a, j)]);
#pragma unroll
        for (int k = 0; k < NPT; ++k) s[j][k] = dec * s[j][k] + u * R[k];
      }
      if (kReverse) a_next = sa[t];
    }
    __syncthreads();  // the staged tile is rewritten next round
  }

  store_state(a, s, kReverse ? reinterpret_cast<T*>(state_at(a, a.wsG, b, h, c))
                               : reinterpret_cast<T*>(state_at(a, a.states, b, h, c + 1)));
}

// One block per (b, h): the sequential pass over chunk boundaries, in place.
// Forward: states[0] = 0; states[c+1] = exp(A Σ_{t∈[cQ, (c+1)Q)} Δ_t) states[c] + states[c+1].
// Reverse: for c = nchunks−2 … 1: wsG[c] = exp(A Σ_{t∈(cQ, (c+1)Q]} Δ_t) wsG[c+1] + wsG[c].
template <bool kReverse>
__global__ void __launch_bounds__(256) pass_kernel(Args a) {
  using T = std::conditional_t<kReverse, Acc, float>;
  __shared__ double red[kMaxWarps];
  const int h = blockIdx.x, b = blockIdx.y;
  const double A = -exp(double(a.A_log[h]));
  const size_t PN = size_t(a.P) * a.N;
  T* base = kReverse ? reinterpret_cast<T*>(state_at(a, a.wsG, b, h, 0))
                     : reinterpret_cast<T*>(state_at(a, a.states, b, h, 0));
  if (!kReverse)
    for (size_t i = threadIdx.x; i < PN; i += blockDim.x) base[i] = 0.f;
  for (int s = 0; s < a.nchunks - (kReverse ? 2 : 1); ++s) {
    const int c = kReverse ? a.nchunks - 2 - s : s;  // reverse: c from nchunks−2 down to 1
    const int t_lo = chunk_begin(a, c) + (kReverse ? 1 : 0), t_hi = chunk_end(a, c) + (kReverse ? 1 : 0);
    double part = 0;
    for (int t = t_lo + int(threadIdx.x); t < t_hi; t += blockDim.x) part += a.delta[row_of(a, b, t) * a.H + h];
    const T dec = T(exp(A * block_sum(part, red)));
    const T* from = base + size_t(kReverse ? c + 1 : c) * PN;
    T* to = base + size_t(kReverse ? c : c + 1) * PN;
    for (size_t i = threadIdx.x; i < PN; i += blockDim.x) to[i] = dec * from[i] + to[i];  // own elements only
  }
}

template <bool kReverse>
void launch(const Args& a, cudaStream_t stream) {
  if (a.B == 0 || a.L == 0) return;
  if (a.nchunks >= 2) {
    const size_t per_step = (a.NS + a.PT + 2) * sizeof(float);
    Args k = a;
    k.TS = pick_ts(per_step);
    const dim3 grid(a.nchunks - 1, a.H, a.B);
    dispatch(k, [&](auto npt, auto rp) {
      chunk_sum_kernel<decltype(npt)::value, decltype(rp)::value, kReverse>
          <<<grid, k.W * 32, k.TS * per_step, stream>>>(k);
    });
    MLALPHA_CHECK_LAUNCH();
  }
  if (kReverse && a.nchunks < 3) return;  // G_{nchunks−1} is chunk nchunks−1's own sum: nothing to carry
  pass_kernel<kReverse><<<dim3(a.H, a.B), 256, 0, stream>>>(a);  // forward: also zeroes states[0]
  MLALPHA_CHECK_LAUNCH();
}

}  // namespace

void chunk_entry_states(const Args& a, cudaStream_t stream) { launch<false>(a, stream); }
void chunk_adjoint_states(const Args& a, cudaStream_t stream) { launch<true>(a, stream); }

}  // namespace mlalpha::gpu::ssd_detail

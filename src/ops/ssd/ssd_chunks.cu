// The states at chunk boundaries that make the SSD chunks independent (ssd_common.cuh).
//
// Forward. s_t = a_t s_{t−1} + Δ_t x_t B_tᵀ is linear, so the state entering chunk c+1 is
//     S_{c+1} = e^{A Σ_{t∈c} Δ_t} S_c + Σ_{j∈c} e^{cs_last − cs_j} Δ_j x_j B_jᵀ,
// the second term being chunk c's own contribution, a (P, T)·(T, N) product (local_kernel, every chunk in
// parallel); one short pass over the chunks per (b, h) then adds the carried state (pass_kernel).
// Backward. The adjoint state g_t = dy_t C_tᵀ + a_{t+1} g_{t+1} runs backwards; at the first step of chunk c,
//     G_c = e^{A Σ_{t=cT+1}^{(c+1)T} Δ_t} G_{c+1} + Σ_{i∈c} e^{cs_i − cs_0} dy_i C_iᵀ,
// the same two kernels with time reversed. G_c is needed for c ≥ 1 only (the backward of chunk c−1 reads it).
// The chunk decays are exp(A Σ Δ) with the sum in double, in step order.
#include "ops/ssd/ssd_common.cuh"

namespace mlalpha::gpu::ssd_detail {
namespace {

// kReverse = false: chunk c = blockIdx.x ∈ [0, nchunks−1) → states[c+1] = Xᵀ diag(Δ_j e^{cs_last − cs_j}) B.
// kReverse = true:  chunk c = blockIdx.x + 1 ∈ [1, nchunks) → wsG[c] = dyᵀ diag(e^{cs_i − cs_0}) C.
template <bool kReverse, bool kExact>
__global__ void __launch_bounds__(kThreads) local_kernel(Args a) {
  extern __shared__ __align__(16) double smem_d[];
  const int c = blockIdx.x + (kReverse ? 1 : 0), h = blockIdx.y, b = blockIdx.z;
  const int t0 = chunk_begin(a, c), tc = chunk_end(a, c) - t0;
  double* scs = smem_d;                              // (T) cs_t
  float* sdt = reinterpret_cast<float*>(scs + a.T);  // (T) Δ_t
  float* sw = sdt + a.T;                             // (T) row weights of sR
  float* sR = sw + a.T;                              // (T, ldN) B_j or C_i, then times sw
  float* sV = sR + a.T * a.ldN;                      // (T, ldP) x_j or dy_i
  const float A = -expf(a.A_log[h]);
  if (kReverse) {
    stage(bc_rows(a, a.Cm, b, h, t0), a.ld, tc, a.N, sR, a.ldN);
    stage(dy_rows(a, b, h, t0), size_t(a.H) * a.P, tc, a.P, sV, a.ldP);
  } else {
    stage(bc_rows(a, a.Bm, b, h, t0), a.ld, tc, a.N, sR, a.ldN);
    stage(x_rows(a, b, h, t0), a.ld, tc, a.P, sV, a.ldP);
  }
  chunk_decay(a, A, b, h, t0, tc, sdt, scs);
  for (int t = threadIdx.x; t < tc; t += kThreads)  // e^{cs_i − cs_0}, or Δ_j e^{cs_last − cs_j}
    sw[t] = kReverse ? float(exp(scs[t] - scs[0])) : sdt[t] * float(exp(scs[tc - 1] - scs[t]));
  stage_wait();
  __syncthreads();
  for (int t = threadIdx.x >> 5; t < tc; t += kThreads / 32)
    for (int n = threadIdx.x & 31; n < a.N; n += 32) sR[t * a.ldN + n] *= sw[t];
  __syncthreads();
  float* out = kReverse ? state_at(a, a.wsG, b, h, c) : state_at(a, a.states, b, h, c + 1);
  for (int p0 = 0; p0 < a.P; p0 += kTile)
    for (int n0 = 0; n0 < a.N; n0 += kTile) {
      Acc acc;
      zero(acc);
      mm<kExact, true, false>(acc, sV, a.ldP, sR, a.ldN, p0, a.P, n0, a.N, tc);
      for_out(p0, a.P, n0, a.N, [&](int r, int cc, int p, int n) { out[size_t(p) * a.N + n] = acc[r][cc]; });
    }
}

// The sequential pass over chunk boundaries, in place; grid (⌈P·N / 256⌉, H, B), a thread per state element
// (the elements are independent; the chunk decays are the same for all of them).
// Forward: states[0] = 0; states[c+1] = exp(A Σ_{t∈[cT, (c+1)T)} Δ_t) states[c] + states[c+1].
// Reverse: for c = nchunks−2 … 1: wsG[c] = exp(A Σ_{t∈(cT, (c+1)T]} Δ_t) wsG[c+1] + wsG[c].
constexpr int kPassBatch = 2048;  // chunk decays held in shared memory at a time
template <bool kReverse>
__global__ void __launch_bounds__(kThreads) pass_kernel(Args a) {
  __shared__ float sdec[kPassBatch];
  const int h = blockIdx.y, b = blockIdx.z, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const double A = -exp(double(a.A_log[h]));
  const size_t PN = size_t(a.P) * a.N, i = size_t(blockIdx.x) * kThreads + threadIdx.x;
  float* base = state_at(a, kReverse ? a.wsG : a.states, b, h, 0);
  const int nsteps = a.nchunks - (kReverse ? 2 : 1);
  float v = 0.f;  // forward: states[0] = 0; reverse: wsG[nchunks−1] is its own chunk's sum
  if (i < PN) {
    if (kReverse) v = base[size_t(a.nchunks - 1) * PN + i];
    else base[i] = 0.f;
  }
  for (int s0 = 0; s0 < nsteps; s0 += kPassBatch) {
    const int nb = min(kPassBatch, nsteps - s0);
    __syncthreads();  // the previous batch's decays are consumed
    for (int k = warp; k < nb; k += kThreads / 32) {  // a warp per chunk: Σ Δ in double, fixed order
      const int c = kReverse ? a.nchunks - 2 - (s0 + k) : s0 + k;
      const int t_lo = chunk_begin(a, c) + (kReverse ? 1 : 0), t_hi = chunk_end(a, c) + (kReverse ? 1 : 0);
      double part = 0;
      for (int t = t_lo + lane; t < t_hi; t += 32) part += a.delta[row_of(a, b, t) * a.H + h];
      part = warp_sum(part);
      if (lane == 0) sdec[k] = float(exp(A * part));
    }
    __syncthreads();
    if (i < PN) {
      // The state written at step k; eight loads are issued before their stores so they overlap.
      auto at = [&](int k) { return base + size_t(kReverse ? a.nchunks - 2 - (s0 + k) : s0 + k + 1) * PN + i; };
      for (int k0 = 0; k0 < nb; k0 += 8) {
        float local[8];
#pragma unroll
        for (int u = 0; u < 8; ++u)
          if (k0 + u < nb) local[u] = *at(k0 + u);
#pragma unroll
        for (int u = 0; u < 8; ++u)
          if (k0 + u < nb) *at(k0 + u) = v = sdec[k0 + u] * v + local[u];
      }
    }
  }
}

template <bool kReverse>
void launch(const Args& a, cudaStream_t stream) {
  if (a.B == 0 || a.L == 0) return;
  if (a.nchunks >= 2) {
    const size_t smem = local_smem_bytes(a);
    with_precision(a, [&](auto exact) {
      const auto kernel = local_kernel<kReverse, decltype(exact)::value>;
      allow_smem(kernel, smem);
      kernel<<<dim3(a.nchunks - 1, a.H, a.B), kThreads, smem, stream>>>(a);
      MLALPHA_CHECK_LAUNCH();
    });
  }
  if (kReverse && a.nchunks < 3) return;  // G_{nchunks−1} is chunk nchunks−1's own sum: nothing to carry
  const int blocks = ceil_div(a.P * a.N, kThreads);
  pass_kernel<kReverse><<<dim3(blocks, a.H, a.B), kThreads, 0, stream>>>(a);  // forward: also zeroes states[0]
  MLALPHA_CHECK_LAUNCH();
}

}  // namespace

void chunk_entry_states(const Args& a, cudaStream_t stream) { launch<false>(a, stream); }
void chunk_adjoint_states(const Args& a, cudaStream_t stream) { launch<true>(a, stream); }

}  // namespace mlalpha::gpu::ssd_detail

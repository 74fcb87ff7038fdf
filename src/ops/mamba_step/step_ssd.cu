// The SSM step of one bar (mamba_step.h) on the GPU, with the gate of the gated norm:
//   s ← exp(Δ A) s + Δ x Bᵀ (stored where present),  y = s C + D x,  u = y ⊙ SiLU(z),
//   v = u ⊙ gnorm_w (I, di) and ss_h = Σ_p u_p² (I, H) for the out_proj kernel (step_proj.cu).
// One block per (instrument, head): its (P, N) state is read once and written once, in whole rows: warp w
// owns rows p = w, w + 8, … and lane l the columns n = l, l + 32, …, so each load instruction of a warp
// covers 32 consecutive floats. All of a thread's state loads are issued before the first is used. y_p is a
// warp butterfly (fixed order), ss a fixed-order sum over p: no atomics, the same bits every run.
#include <algorithm>
#include <string>

#include "core/error.h"
#include "ops/activations.h"
#include "ops/common/reduce.cuh"
#include "ops/mamba_step/step_common.cuh"

namespace mlalpha::gpu::step_detail {

namespace {

constexpr int kSsdThreads = 256;
constexpr int kSsdWarps = kSsdThreads / 32;

// RW: rows per warp (P ≤ 8·RW); NE: columns per lane (N ≤ 32·NE).
// Before waiting on its predecessor the block loads what no kernel of this bar writes before it: its slice of
// the state (last written by this kernel in the previous bar, which completed before the bar's first kernel
// started) and the head's weights, so the state's latency overlaps the previous kernel's tail.
template <int RW, int NE>
__global__ void __launch_bounds__(kSsdThreads)
    ssd_step_kernel(const StepDims d, const StepLayerWeights w, const StepLayerState s, const StepBuffers buf) {
  extern __shared__ float sm[];  // B (N), C (N), x (P), z (P), gnorm_w (P), u (P)
  float *sB = sm, *sC = sB + d.N, *sx = sC + d.N, *sz = sx + d.P, *sw = sz + d.P, *su = sw + d.P;
  const int i = blockIdx.x / d.H, h = blockIdx.x % d.H, g = h * d.G / d.H;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float* st = s.ssm + (size_t(i) * d.H + h) * d.P * d.N;  // (P, N)
  float sv[RW][NE];
#pragma unroll
  for (int r = 0; r < RW; ++r)
#pragma unroll
    for (int e = 0; e < NE; ++e) {
      const int p = warp + kSsdWarps * r, n = lane + 32 * e;
      sv[r][e] = p < d.P && n < d.N ? st[size_t(p) * d.N + n] : 0.f;
    }
  const float A = -expf(w.A_log[h]), Dh = w.Dskip[h];
  for (int t = threadIdx.x; t < d.P; t += kSsdThreads) sw[t] = w.gnorm_w[h * d.P + t];
  pdl_wait();
  pdl_launch_dependents();
  const float* zx = buf.zxo + size_t(i) * d.proj;  // z (di) | x (di) B (G·N) C (G·N) after the conv | Δ (H)
  const float* xbc = zx + d.di;
  for (int t = threadIdx.x; t < d.N; t += kSsdThreads) {
    sB[t] = xbc[d.di + g * d.N + t];
    sC[t] = xbc[d.di + d.G * d.N + g * d.N + t];
  }
  for (int t = threadIdx.x; t < d.P; t += kSsdThreads) {
    sx[t] = xbc[h * d.P + t];
    sz[t] = zx[h * d.P + t];
  }
  const float dt = zx[d.di + d.cd + h];
  const bool keep = buf.present[i] != 0;
  const float a = expf(dt * A);
  __syncthreads();
#pragma unroll
  for (int r = 0; r < RW; ++r) {
    const int p = warp + kSsdWarps * r;
    if (p >= d.P) break;  // warp-uniform
    const float xv = sx[p], dx = dt * xv;
    float acc = 0.f;
#pragma unroll
    for (int e = 0; e < NE; ++e) {
      const int n = lane + 32 * e;
      if (n < d.N) {
        const float v = a * sv[r][e] + dx * sB[n];
        if (keep) st[size_t(p) * d.N + n] = v;
        acc += v * sC[n];
      }
    }
    acc = warp_sum(acc);
    if (lane == 0) {
      const float u = (acc + Dh * xv) * silu(sz[p]);
      su[p] = u;
      buf.v[size_t(i) * d.di + h * d.P + p] = u * sw[p];
    }
  }
  __syncthreads();
  if (warp == 0) {
    float q = 0.f;
    for (int p = lane; p < d.P; p += 32) q += su[p] * su[p];
    q = warp_sum(q);
    if (lane == 0) buf.ss[size_t(i) * d.H + h] = q;
  }
}

int pow2_at_least(int v) {
  int p = 1;
  while (p < v) p *= 2;
  return p;
}

template <int RW>
void launch_rw(const StepDims& d, const StepLayerWeights& w, const StepLayerState& s, const StepBuffers& buf,
               StepLaunch l, int ne) {
  const dim3 grid(unsigned(d.I) * unsigned(d.H));
  const size_t smem = size_t(2 * d.N + 4 * d.P) * sizeof(float);
  switch (ne) {
    case 1: launch(l, grid, dim3(kSsdThreads), smem, ssd_step_kernel<RW, 1>, d, w, s, buf); break;
    case 2: launch(l, grid, dim3(kSsdThreads), smem, ssd_step_kernel<RW, 2>, d, w, s, buf); break;
    case 4: launch(l, grid, dim3(kSsdThreads), smem, ssd_step_kernel<RW, 4>, d, w, s, buf); break;
    default: launch(l, grid, dim3(kSsdThreads), smem, ssd_step_kernel<RW, 8>, d, w, s, buf); break;
  }
}

}  // namespace

// The most a step supports: P ≤ 8 warps × 16 rows, N ≤ 32 lanes × 8 columns (registers: RW·NE floats a thread).
constexpr int kStepMaxP = kSsdWarps * 16, kStepMaxN = 32 * 8;

void launch_ssd_step(const StepDims& d, const StepLayerWeights& w, const StepLayerState& s, const StepBuffers& buf,
                     StepLaunch l) {
  require(d.P <= kStepMaxP && d.N <= kStepMaxN,
          "the streaming step supports model.head_dim <= " + std::to_string(kStepMaxP) + " and model.d_state <= " +
              std::to_string(kStepMaxN) + ", got " + std::to_string(d.P) + " and " + std::to_string(d.N));
  require(size_t(d.I) * d.H < (size_t(1) << 31), "mamba_step: instruments × heads exceeds the grid");
  const int rw = pow2_at_least((d.P + kSsdWarps - 1) / kSsdWarps), ne = pow2_at_least((d.N + 31) / 32);
  switch (rw) {
    case 1: launch_rw<1>(d, w, s, buf, l, ne); break;
    case 2: launch_rw<2>(d, w, s, buf, l, ne); break;
    case 4: launch_rw<4>(d, w, s, buf, l, ne); break;
    case 8: launch_rw<8>(d, w, s, buf, l, ne); break;
    default: launch_rw<16>(d, w, s, buf, l, ne); break;
  }
}

}  // namespace mlalpha::gpu::step_detail

// The SSM step of one bar (mamba_step.h) on the GPU, with the gate of the gated norm:
//   s ← exp(Δ A) s + Δ x Bᵀ (stored where present),  y = s C + D x,  u = y ⊙ SiLU(z),
//   v = u ⊙ gnorm_w (I, di) and ss_h = Σ_p u_p² (I, H) for the out_proj kernel (step_proj.cu).
// A block takes HPB heads of one instrument (one on small bars; four on large ones, whose tiny blocks could not
// keep enough state loads in flight per SM to stream it at copy speed): each head's (P, N) state is read once and
// written once, in whole rows: warp w owns rows p = w, w + 8, … and lane l the columns n = l, l + 32, …, so each
// load instruction of a warp covers 32 consecutive floats. All of a thread's state loads (every head of the block)
// are issued before the first is used. y_p is a warp butterfly (fixed order), ss a fixed-order sum over p: no
// atomics, and a head's arithmetic is the same whatever HPB, so the same bits on any instrument count.
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

// RW: rows per warp (P ≤ 8·RW); NE: columns per lane (N ≤ 32·NE); HPB: heads per block (≤ kSsdWarps).
// Before waiting on its predecessor the block loads what no kernel of this bar writes before it: its slices of
// the state (last written by this kernel in the previous bar, which completed before the bar's first kernel
// started) and the heads' weights, so the state's latency overlaps the previous kernel's tail.
template <int RW, int NE, int HPB>
__global__ void __launch_bounds__(kSsdThreads)
    ssd_step_kernel(const StepDims d, const StepLayerWeights w, const StepLayerState s, const StepBuffers buf) {
  extern __shared__ float sm[];  // per head of the block: B (N), C (N), x (P), z (P), gnorm_w (P), u (P)
  const int per_head = 2 * d.N + 4 * d.P, blocks_per_i = (d.H + HPB - 1) / HPB;
  const int i = blockIdx.x / blocks_per_i, h0 = (blockIdx.x % blocks_per_i) * HPB;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  auto smem = [&](int hh) { return sm + hh * per_head; };  // sB = smem, sC = +N, sx = +2N, sz, sw, su
  float sv[HPB][RW][NE], A[HPB], Dh[HPB];
#pragma unroll
  for (int hh = 0; hh < HPB; ++hh) {
    const int h = h0 + hh;
    const bool real = h < d.H;
    const float* st = s.ssm + (size_t(i) * d.H + (real ? h : 0)) * d.P * d.N;  // (P, N)
#pragma unroll
    for (int r = 0; r < RW; ++r)
#pragma unroll
      for (int e = 0; e < NE; ++e) {
        const int p = warp + kSsdWarps * r, n = lane + 32 * e;
        sv[hh][r][e] = real && p < d.P && n < d.N ? st[size_t(p) * d.N + n] : 0.f;
      }
    A[hh] = real ? -expf(w.A_log[h]) : 0.f;
    Dh[hh] = real ? w.Dskip[h] : 0.f;
    float* sw = smem(hh) + 2 * d.N + 2 * d.P;
    if (real)
      for (int t = threadIdx.x; t < d.P; t += kSsdThreads) sw[t] = w.gnorm_w[h * d.P + t];
  }
  pdl_wait();
  dependents_early(d);
  const float* zx = buf.zxo + size_t(i) * d.proj;  // z (di) | x (di) B (G·N) C (G·N) after the conv | Δ (H)
  const float* xbc = zx + d.di;
  float a[HPB], dt[HPB] = {};
#pragma unroll
  for (int hh = 0; hh < HPB; ++hh) {
    const int h = h0 + hh, g = h * d.G / d.H;
    if (h < d.H) {  // block-uniform
      float *sB = smem(hh), *sC = sB + d.N, *sx = sC + d.N, *sz = sx + d.P;
      for (int t = threadIdx.x; t < d.N; t += kSsdThreads) {
        sB[t] = xbc[d.di + g * d.N + t];
        sC[t] = xbc[d.di + d.G * d.N + g * d.N + t];
      }
      for (int t = threadIdx.x; t < d.P; t += kSsdThreads) {
        sx[t] = xbc[h * d.P + t];
        sz[t] = zx[h * d.P + t];
      }
      dt[hh] = zx[d.di + d.cd + h];
    }
  }
  const bool keep = buf.present[i] != 0;
#pragma unroll
  for (int hh = 0; hh < HPB; ++hh) a[hh] = expf(dt[hh] * A[hh]);  // 1 for a head past H (unused)
  __syncthreads();
#pragma unroll
  for (int hh = 0; hh < HPB; ++hh) {
    const int h = h0 + hh;
    if (h >= d.H) continue;  // block-uniform
    const float *sB = smem(hh), *sC = sB + d.N, *sx = sC + d.N, *sz = sx + d.P, *sw = sz + d.P;
    float* su = smem(hh) + 2 * d.N + 3 * d.P;
    float* st = s.ssm + (size_t(i) * d.H + h) * d.P * d.N;
#pragma unroll
    for (int r = 0; r < RW; ++r) {
      const int p = warp + kSsdWarps * r;
      if (p >= d.P) break;  // warp-uniform
      const float xv = sx[p], dx = dt[hh] * xv;
      float acc = 0.f;
#pragma unroll
      for (int e = 0; e < NE; ++e) {
        const int n = lane + 32 * e;
        if (n < d.N) {
          // The contraction spelled out: every instance (HPB) rounds the same way.
          const float v = fmaf(a[hh], sv[hh][r][e], dx * sB[n]);
          if (keep) st[size_t(p) * d.N + n] = v;
          acc += v * sC[n];
        }
      }
      acc = warp_sum(acc);
      if (lane == 0) {
        const float u = (acc + Dh[hh] * xv) * silu(sz[p]);
        su[p] = u;
        buf.v[size_t(i) * d.di + h * d.P + p] = u * sw[p];
      }
    }
  }
  __syncthreads();
  if (warp < HPB && h0 + warp < d.H) {  // warp hh sums head hh's u²
    const float* su = smem(warp) + 2 * d.N + 3 * d.P;
    float q = 0.f;
    for (int p = lane; p < d.P; p += 32) q += su[p] * su[p];
    q = warp_sum(q);
    if (lane == 0) buf.ss[size_t(i) * d.H + h0 + warp] = q;
  }
  dependents_late();
}

int pow2_at_least(int v) {
  int p = 1;
  while (p < v) p *= 2;
  return p;
}

// One head a block at every size. Four heads a block from 256 instruments (all their state loads in flight at
// once) was measured slower on the H200: S at 5000 instruments 2081 µs a bar against 1657 with one head
// (docs/benchmarks.md, "Streaming"), so the kernel's HPB > 1 instances are not launched.
template <int RW, int NE>
void launch_ssd(const StepDims& d, const StepLayerWeights& w, const StepLayerState& s, const StepBuffers& buf,
                StepLaunch l) {
  constexpr int HPB = 1;
  const dim3 grid(unsigned(d.I) * unsigned(d.H));
  const size_t smem = size_t(HPB) * (2 * d.N + 4 * d.P) * sizeof(float);
  launch(l, grid, dim3(kSsdThreads), smem, ssd_step_kernel<RW, NE, HPB>, d, w, s, buf);
}

template <int RW>
void launch_rw(const StepDims& d, const StepLayerWeights& w, const StepLayerState& s, const StepBuffers& buf,
               StepLaunch l, int ne) {
  switch (ne) {
    case 1: launch_ssd<RW, 1>(d, w, s, buf, l); break;
    case 2: launch_ssd<RW, 2>(d, w, s, buf, l); break;
    case 4: launch_ssd<RW, 4>(d, w, s, buf, l); break;
    default: launch_ssd<RW, 8>(d, w, s, buf, l); break;
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

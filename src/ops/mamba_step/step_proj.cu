// The row-wise parts of one bar (mamba_step.h) on the GPU: the input projection, each layer's RMSNorm +
// in_proj with the conv step and softplus in its epilogue, the gated norm's 1/rms + out_proj + residual, and
// the final norm + head. The SSM step between in_proj and out_proj is step_ssd.cu; step_layer launches the three.
#include <cmath>
#include <string>

#include "core/cuda_check.h"
#include "core/error.h"
#include "ops/activations.h"
#include "ops/common/reduce.cuh"
#include "ops/mamba_step/step_common.cuh"

namespace mlalpha::gpu {

namespace step_detail {
// Defined in step_ssd.cu.
void launch_ssd_step(const StepDims& d, const StepLayerWeights& w, const StepLayerState& s, const StepBuffers& buf,
                     StepLaunch launch);
}  // namespace step_detail

namespace {

using namespace step_detail;

constexpr float kEps = 1e-5f;  // every RMSNorm of the model (DESIGN section 1)
constexpr int kInputRows = 8;  // instruments per block of the input and head kernels

// present[i] = mask[i] != 0 and row i has a finite feature; x's non-finite features become 0 (the NaN fill);
// h (I, D) = x·W_inᵀ + b, summed as the reference Linear: b, then the features in order.
// Block: kInputRows instruments. x and mask may be host-mapped memory: each is read once, all at once.
__global__ void __launch_bounds__(kThreads)
    input_step_kernel(const StepDims d, const float* __restrict__ x /* (I, F) */,
                      const uint8_t* __restrict__ mask /* (I) */, const float* __restrict__ w_inT /* (F, D) */,
                      const float* __restrict__ b_in /* (D) */, const StepBuffers buf) {
  extern __shared__ float xs[];  // (kInputRows, F)
  __shared__ uint8_t ms[kInputRows];
  pdl_wait();
  dependents_early(d);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int i0 = blockIdx.x * kInputRows, rows = min(kInputRows, d.I - i0);
#pragma unroll 4
  for (int e = threadIdx.x; e < kInputRows * d.F; e += kThreads) xs[e] = e < rows * d.F ? x[size_t(i0) * d.F + e] : 0.f;
  if (threadIdx.x < rows) ms[threadIdx.x] = mask[i0 + threadIdx.x];
  __syncthreads();
  for (int r = warp; r < rows; r += kThreads / 32) {  // warp-uniform
    bool finite = false;
    for (int f = lane; f < d.F; f += 32) {
      const bool ok = isfinite(xs[r * d.F + f]);
      finite |= ok;
      if (!ok) xs[r * d.F + f] = 0.f;
    }
    finite = __any_sync(kWarpMask, finite);
    if (lane == 0) buf.present[i0 + r] = finite && ms[r] != 0 ? 1 : 0;
  }
  __syncthreads();
  // A thread owns output columns c and keeps all kInputRows rows' sums: one load of W_inᵀ[f, c] serves them all.
  for (int c = threadIdx.x; c < d.D; c += kThreads) {
    float acc[kInputRows];
    const float b = b_in[c];
#pragma unroll
    for (int r = 0; r < kInputRows; ++r) acc[r] = b;
#pragma unroll 8
    for (int f = 0; f < d.F; ++f) {
      const float wv = w_inT[size_t(f) * d.D + c];
#pragma unroll
      for (int r = 0; r < kInputRows; ++r) acc[r] += xs[r * d.F + f] * wv;
    }
#pragma unroll
    for (int r = 0; r < kInputRows; ++r)
      if (r < rows) buf.h[size_t(i0 + r) * d.D + c] = acc[r];
  }
  dependents_late();
}

// The most taps (W − 1) the in_proj epilogue holds in registers (the conv op's limit, ops/conv1d/conv1d.h).
constexpr int kMaxTaps = 7;
// Resident projection blocks an SM must fit (at most 128 registers a thread): enough tiles in flight at large
// instrument counts, where the kernels stream A and W from L2.
constexpr int kProjBlocksPerSM = 4;

// zxo tile = RMSNorm(h)·in_projᵀ, then per column (DESIGN section 1 split z | xBC | dt):
//   z: stored raw; xBC channel c: SiLU(conv_b + Σ_k conv_w[c,k]·window[k,c] + conv_w[c,W−1]·v), the window
//   shifted to take v where present (each (row, channel) belongs to one thread: read, then written);
//   dt column h: clamp(softplus(v + dt_bias[h]), lo, hi).
// Before waiting on its predecessor the block loads what no kernel of this bar writes: W's first chunk and its
// column's conv weights (weights), so they arrive while the previous kernel drains.
template <class T>
__global__ void __launch_bounds__(kThreads, kProjBlocksPerSM)
    in_proj_step_kernel(const StepDims d, const StepLayerWeights w, const StepLayerState s, const StepBuffers buf) {
  __shared__ TileSmem<T> sm;
  __shared__ float rs[T::BM];    // 1/rms of each tile row
  extern __shared__ float nw[];  // (D) the RMSNorm weight
  constexpr int kRowsPer = T::BM * T::BN / kThreads, kRowStep = kThreads / T::BN;  // epilogue rows a thread
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int i0 = blockIdx.y * T::BM, n0 = blockIdx.x * T::BN;
  const TileOperands op{buf.h, d.D, d.I, i0, w.in_proj_w, d.proj, n0, d.D};
  // The epilogue's column: this thread's for every row it finishes.
  const int c = threadIdx.x % T::BN, r0 = threadIdx.x / T::BN, j = n0 + c, taps = d.W - 1;
  const bool is_conv = j >= d.di && j < d.di + d.cd, is_dt = j >= d.di + d.cd && j < d.proj;
  const int ch = j - d.di;
  issue_w<T>(sm, op, 0);
  for (int k = threadIdx.x; k < d.D; k += kThreads) nw[k] = w.norm_w[k];
  float cw[kMaxTaps] = {}, cw_new = 0.f, bias = 0.f;  // the taps on the window, the tap on this bar's value
  if (is_conv) {
    bias = w.conv_b[ch];
#pragma unroll
    for (int k = 0; k < kMaxTaps; ++k)
      if (k < taps) cw[k] = w.conv_w[size_t(ch) * d.W + k];
    cw_new = w.conv_w[size_t(ch) * d.W + taps];
  } else if (is_dt) {
    bias = w.dt_bias[j - d.di - d.cd];
  }
  pdl_wait();
  dependents_early(d);
  issue_a<T>(sm, op, 0);
  {  // 1/rms of each row: warp w takes rows w, w + 4, …, all of them at once (the same sum order per row)
    constexpr int kRowsPerWarp = T::BM / (kThreads / 32);
    float ss[kRowsPerWarp] = {};
#pragma unroll 4
    for (int k = lane; k < d.D; k += 32)
#pragma unroll
      for (int u = 0; u < kRowsPerWarp; ++u) {
        const int i = i0 + warp + u * (kThreads / 32);
        const float v = i < d.I ? buf.h[size_t(i) * d.D + k] : 0.f;
        ss[u] += v * v;
      }
#pragma unroll
    for (int u = 0; u < kRowsPerWarp; ++u) {
      const float t = warp_sum(ss[u]);
      if (lane == 0) rs[warp + u * (kThreads / 32)] = rsqrtf(t / float(d.D) + kEps);
    }
  }
  __syncthreads();
  float acc[T::kNT][4];
  tile_gemm<T>(sm, op, [&](int r, int k, float a) { return a * rs[r] * nw[k]; }, acc);
  // Stage the tile so that the epilogue's threads walk consecutive columns (coalesced window and zxo access).
  float* c_tile = sm.a;  // (BM, BN + 1)
#pragma unroll
  for (int nt = 0; nt < T::kNT; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) c_tile[fragment_row<T>(e) * (T::BN + 1) + fragment_col<T>(nt, e)] = acc[nt][e];
  __syncthreads();
  dependents_late();        // the product is done; the epilogue's loads and stores remain
  if (j >= d.proj) return;  // after every barrier and the wait
  // Rows in batches of 4: each batch's window values and flags are loaded before any is used or written.
  constexpr int kBatch = kRowsPer < 4 ? kRowsPer : 4;
#pragma unroll
  for (int b0 = 0; b0 < kRowsPer; b0 += kBatch) {
    float win[kBatch][kMaxTaps] = {};
    bool live[kBatch], keep[kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int i = i0 + r0 + (b0 + u) * kRowStep;
      live[u] = i < d.I;
      keep[u] = live[u] && is_conv && taps > 0 && buf.present[i] != 0;
      if (live[u] && is_conv)
#pragma unroll
        for (int k = 0; k < kMaxTaps; ++k)
          if (k < taps) win[u][k] = s.conv[(size_t(i) * taps + k) * d.cd + ch];
    }
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      if (!live[u]) continue;
      const int r = r0 + (b0 + u) * kRowStep, i = i0 + r;
      const float v = c_tile[r * (T::BN + 1) + c];
      float out = v;  // z
      if (is_conv) {
        float pre = bias;
#pragma unroll
        for (int k = 0; k < kMaxTaps; ++k)
          if (k < taps) pre += cw[k] * win[u][k];
        pre += cw_new * v;
        out = silu(pre);
        if (keep[u]) {
          float* wr = s.conv + size_t(i) * taps * d.cd + ch;  // (W−1) values, stride cd
#pragma unroll
          for (int k = 0; k + 1 < kMaxTaps; ++k)
            if (k + 1 < taps) wr[size_t(k) * d.cd] = win[u][k + 1];
          wr[size_t(taps - 1) * d.cd] = v;
        }
      } else if (is_dt) {
        out = softplus(v + bias);
        out = out < d.dt_lo ? d.dt_lo : (out > d.dt_hi ? d.dt_hi : out);
      }
      buf.zxo[size_t(i) * d.proj + j] = out;
    }
  }
}

// h += (v ⊙ rstd_group)·out_projᵀ: the gated norm's 1/rms per (row, group) from the per-head sums of squares
// (heads of group g: [g·H/G, (g+1)·H/G), which are exactly its columns), then the product and the residual.
template <class T>
__global__ void __launch_bounds__(kThreads, kProjBlocksPerSM)
    out_proj_step_kernel(const StepDims d, const float* __restrict__ out_w /* (D, di) */, const StepBuffers buf) {
  __shared__ TileSmem<T> sm;
  extern __shared__ float rg[];  // (BM, G): 1/rms of each tile row's groups
  const int i0 = blockIdx.y * T::BM, n0 = blockIdx.x * T::BN;
  const TileOperands op{buf.v, d.di, d.I, i0, out_w, d.D, n0, d.di};
  issue_w<T>(sm, op, 0);  // weights: before the wait
  pdl_wait();
  dependents_early(d);
  issue_a<T>(sm, op, 0);
  const int hpg = d.H / d.G, gs = d.di / d.G;
  for (int e = threadIdx.x; e < T::BM * d.G; e += kThreads) {
    const int r = e / d.G, g = e % d.G, i = i0 + r;
    float ss = 0.f;
    if (i < d.I)
      for (int h = g * hpg; h < (g + 1) * hpg; ++h) ss += buf.ss[size_t(i) * d.H + h];
    rg[e] = rsqrtf(ss / float(gs) + kEps);
  }
  __syncthreads();
  float acc[T::kNT][4];
  tile_gemm<T>(sm, op, [&](int r, int k, float a) { return a * rg[r * d.G + k / gs]; }, acc);
  dependents_late();
  // the residual: every h value of the thread loaded before the first is written
  float old[T::kNT][4];
#pragma unroll
  for (int nt = 0; nt < T::kNT; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int i = i0 + fragment_row<T>(e), j = n0 + fragment_col<T>(nt, e);
      old[nt][e] = i < d.I && j < d.D ? buf.h[size_t(i) * d.D + j] : 0.f;
    }
#pragma unroll
  for (int nt = 0; nt < T::kNT; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int i = i0 + fragment_row<T>(e), j = n0 + fragment_col<T>(nt, e);
      if (i < d.I && j < d.D) buf.h[size_t(i) * d.D + j] = old[nt][e] + acc[nt][e];
    }
}

// out (I, K) = RMSNorm_f(h)·W_headᵀ + b where present, NaN elsewhere. One warp per instrument.
__global__ void __launch_bounds__(kThreads)
    head_step_kernel(const StepDims d, const float* __restrict__ norm_f /* (D) */,
                     const float* __restrict__ w_head /* (K, D) */, const float* __restrict__ b_head /* (K) */,
                     const StepBuffers buf, float* __restrict__ out /* (I, K) */) {
  pdl_wait();
  // The bar's last kernel: its dependent is the next bar's first, which is no programmatic dependent.
  dependents_late();
  const int lane = threadIdx.x & 31, i = blockIdx.x * (kThreads / 32) + (threadIdx.x >> 5);
  if (i >= d.I) return;  // after the wait (see step_common.cuh); warp-uniform
  const float* h = buf.h + size_t(i) * d.D;
  float ss = 0.f;
#pragma unroll 4
  for (int k = lane; k < d.D; k += 32) ss += h[k] * h[k];
  const float r = rsqrtf(warp_sum(ss) / float(d.D) + kEps);
  const bool present = buf.present[i] != 0;
  for (int o = 0; o < d.K; ++o) {
    float dot = 0.f;
#pragma unroll 4
    for (int k = lane; k < d.D; k += 32) dot += h[k] * r * norm_f[k] * w_head[size_t(o) * d.D + k];
    dot = warp_sum(dot);
    if (lane == 0) out[size_t(i) * d.K + o] = present ? dot + b_head[o] : __int_as_float(0x7fc00000);
  }
}

// Small counts take the tile with more blocks; the choice changes no bits (tile_gemm's sum order).
constexpr int kLargeTileFrom = 256;

template <class T>
void launch_layer_projections(const StepDims& d, const StepLayerWeights& w, const StepLayerState& s,
                              const StepBuffers& buf, StepLaunch l, bool in_proj) {
  const int rows = (d.I + T::BM - 1) / T::BM;
  if (in_proj) {
    const dim3 grid((d.proj + T::BN - 1) / T::BN, rows);
    launch(l, grid, dim3(kThreads), size_t(d.D) * sizeof(float), in_proj_step_kernel<T>, d, w, s, buf);
  } else {
    const dim3 grid((d.D + T::BN - 1) / T::BN, rows);
    launch(l, grid, dim3(kThreads), size_t(T::BM) * d.G * sizeof(float), out_proj_step_kernel<T>, d,
           w.out_proj_w, buf);
  }
}

void check_dims(const StepDims& d) {
  require(d.W >= 1 && d.W - 1 <= kMaxTaps, "the streaming step supports model.conv_width <= " +
                                              std::to_string(kMaxTaps + 1) + ", got " + std::to_string(d.W));
  require(d.I >= 1 && d.F >= 1 && d.K >= 1 && d.D >= 1 && d.H >= 1 && d.P >= 1 && d.G >= 1 && d.N >= 1 &&
              d.W >= 1 && d.H % d.G == 0 && d.di == d.H * d.P && d.cd == d.di + 2 * d.G * d.N &&
              d.proj == 2 * d.di + 2 * d.G * d.N + d.H,
          "mamba_step: inconsistent StepDims");
  // the projection grids put the instrument tiles on gridDim.y (at most 65535 of 16 rows)
  require(d.I <= 1000000, "mamba_step: at most 1,000,000 instruments a bar, got " + std::to_string(d.I));
}

}  // namespace

void step_input(const StepDims& d, const float* x, const uint8_t* mask, const float* w_inT, const float* b_in,
                const StepBuffers& buf, StepLaunch l) {
  check_dims(d);
  const dim3 grid((d.I + kInputRows - 1) / kInputRows);
  // The bar's first kernel is never a programmatic dependent: the work before it (the previous bar's head,
  // or nothing inside a graph) gains nothing from the overlap.
  l.pdl = false;
  launch(l, grid, dim3(kThreads), size_t(kInputRows) * d.F * sizeof(float), input_step_kernel, d, x, mask, w_inT,
         b_in, buf);
}

void step_layer(const StepDims& d, const StepLayerWeights& w, const StepLayerState& s, const StepBuffers& buf,
                StepLaunch l) {
  check_dims(d);
  const bool large = d.I >= kLargeTileFrom;
  if (large)
    launch_layer_projections<TileLarge>(d, w, s, buf, l, true);
  else
    launch_layer_projections<TileSmall>(d, w, s, buf, l, true);
  launch_ssd_step(d, w, s, buf, l);
  if (large)
    launch_layer_projections<TileLarge>(d, w, s, buf, l, false);
  else
    launch_layer_projections<TileSmall>(d, w, s, buf, l, false);
}

void step_head(const StepDims& d, const float* norm_f, const float* w_head, const float* b_head,
               const StepBuffers& buf, float* out, StepLaunch l) {
  check_dims(d);
  const dim3 grid((d.I + kThreads / 32 - 1) / (kThreads / 32));
  launch(l, grid, dim3(kThreads), 0, head_step_kernel, d, norm_f, w_head, b_head, buf, out);
}

}  // namespace mlalpha::gpu

// Causal depthwise conv1d + bias + SiLU on the GPU (DESIGN section 1, conv1d.h for the math).
//
// Layout: a thread owns one channel c and a tile of kTT consecutive time steps of one sequence, and slides
// a register window of the last W inputs over its tile, so each x is loaded ~once (plus a W−1 halo).
// Threads of a warp own consecutive channels at the same time step: every load and store is coalesced
// over channels (x rows are strided by ld_x, channels within a row contiguous).
// A block is kCh channels × kTiles tiles = kCh channels × 128 time steps of one sequence (256 threads;
// no __launch_bounds__: with it ptxas spilled the register windows).
//
// Backward: each thread recomputes the pre-activation, forms dpre = dy · SiLU'(pre) for its tile plus
// the W−1 steps after it (the taps that reach back into its tile), writes dx for its tile, and sums
// dw, dbias over its tile. The block then adds its kTiles partial sums in a fixed order and stores one
// (W+1, C) partial; a second kernel adds the partials of all blocks in a fixed order into dw, dbias.
// No atomics: bitwise reproducible, and the partial layout depends on the shape only.
#include <type_traits>

#include "core/cuda_check.h"
#include "ops/activations.h"
#include "ops/conv1d/conv1d.h"

namespace mlalpha::gpu {

namespace {

constexpr int kCh = 64;                 // channels per block (two warps wide)
constexpr int kTiles = 4;               // time tiles per block (threadIdx.y)
constexpr int kTT = 32;                 // time steps per thread
constexpr int kBlockT = kTiles * kTT;   // time steps per block
constexpr int kPre = 8;                 // backward: time steps whose loads are issued together

// forward: y[b,t,c] = SiLU(bias[c] + Σ_k w[c,k] · x[b, t−(W−1)+k, c])
template <int W>
__global__ void conv1d_silu_fwd_kernel(Conv1dParams p, const float* __restrict__ x, const float* __restrict__ w,
                                       const float* __restrict__ bias, float* __restrict__ y) {
  const int c = blockIdx.x * kCh + threadIdx.x;
  const int b = blockIdx.z;
  const int t0 = blockIdx.y * kBlockT + threadIdx.y * kTT;
  if (c >= p.C || t0 >= p.L) return;  // no shared memory, no barrier: early exit is safe
  const int t1 = min(t0 + kTT, p.L);
  float wk[W];
#pragma unroll
  for (int k = 0; k < W; ++k) wk[k] = w[size_t(c) * W + k];
  const float bc = bias[c];
  const float* xc = x + size_t(b) * p.L * p.ld_x + c;
  float* yc = y + size_t(b) * p.L * p.C + c;
  // xs[k] = x at time t − (W−1) + k (zero before t = 0)
  float xs[W];
#pragma unroll
  for (int k = 0; k < W - 1; ++k) {
    const int s = t0 - (W - 1) + k;
    xs[k] = s >= 0 ? xc[size_t(s) * p.ld_x] : 0.f;
  }
  for (int t = t0; t < t1; ++t) {
    xs[W - 1] = xc[size_t(t) * p.ld_x];
    float acc = bc;
#pragma unroll
    for (int k = 0; k < W; ++k) acc += wk[k] * xs[k];
    yc[size_t(t) * p.C] = silu(acc);
#pragma unroll
    for (int k = 0; k < W - 1; ++k) xs[k] = xs[k + 1];
  }
}

// backward, pass 1: dx for the thread's tile; dw, dbias partials per block into part (nblocks, W+1, C),
// block index = b · gridDim.y + blockIdx.y; row k < W holds dw[:, k], row W holds dbias.
template <int W>
__global__ void conv1d_silu_bwd_kernel(Conv1dParams p, const float* __restrict__ x, const float* __restrict__ w,
                                       const float* __restrict__ bias, const float* __restrict__ dy,
                                       float* __restrict__ dx, float* __restrict__ part) {
  __shared__ float red[kTiles][W + 1][kCh];
  const int c = blockIdx.x * kCh + threadIdx.x;
  const int b = blockIdx.z;
  const int t0 = blockIdx.y * kBlockT + threadIdx.y * kTT;
  float gw[W + 1];  // gw[k] = Σ_t dpre[t] · x[t−(W−1)+k] for k < W; gw[W] = Σ_t dpre[t]
#pragma unroll
  for (int k = 0; k <= W; ++k) gw[k] = 0.f;

  if (c < p.C && t0 < p.L) {
    const int t1 = min(t0 + kTT, p.L);
    float wk[W];
#pragma unroll
    for (int k = 0; k < W; ++k) wk[k] = w[size_t(c) * W + k];
    const float bc = bias[c];
    const float* xc = x + size_t(b) * p.L * p.ld_x + c;
    const float* dyc = dy + size_t(b) * p.L * p.C + c;
    float* dxc = dx + size_t(b) * p.L * p.ld_x + c;
    float xs[W];  // xs[k] = x at time t − (W−1) + k
    float dp[W];  // dp[j] = dpre at time t − (W−1) + j (zero past the end of the sequence)
#pragma unroll
    for (int k = 0; k < W - 1; ++k) {
      const int s = t0 - (W - 1) + k;
      xs[k] = s >= 0 ? xc[size_t(s) * p.ld_x] : 0.f;
    }
#pragma unroll
    for (int k = 0; k < W; ++k) dp[k] = 0.f;
    // t runs over the tile and the W−1 steps after it: x[s] feeds outputs t = s + (W−1) − k, k ∈ [0, W).
    // Steps go in groups of kPre whose x and dy loads are all issued before the group is computed, so a
    // thread has kPre load pairs in flight instead of one.
    const int t_end = t1 + W - 1;
    for (int tb = t0; tb < t_end; tb += kPre) {
      float xn[kPre], dn[kPre];
#pragma unroll
      for (int u = 0; u < kPre; ++u) {
        const int t = tb + u;
        const bool ok = t < t_end && t < p.L;
        xn[u] = ok ? xc[size_t(t) * p.ld_x] : 0.f;
        dn[u] = ok ? dyc[size_t(t) * p.C] : 0.f;
      }
#pragma unroll
      for (int u = 0; u < kPre; ++u) {
        const int t = tb + u;
        if (t < t_end) {
          float g = 0.f;
          if (t < p.L) {
            xs[W - 1] = xn[u];
            float pre = bc;
#pragma unroll
            for (int k = 0; k < W; ++k) pre += wk[k] * xs[k];
            g = dn[u] * silu_grad(pre);
            if (t < t1) {  // parameter gradients only over the thread's own tile (no double counting)
#pragma unroll
              for (int k = 0; k < W; ++k) gw[k] += g * xs[k];
              gw[W] += g;
            }
          }
          dp[W - 1] = g;
          // dx[s] = Σ_k w[c,k] · dpre[s + (W−1) − k] with s = t − (W−1); dpre[t − k] = dp[W−1−k]
          const int s = t - (W - 1);
          if (s >= t0) {
            float acc = 0.f;
#pragma unroll
            for (int k = 0; k < W; ++k) acc += wk[k] * dp[W - 1 - k];
            dxc[size_t(s) * p.ld_x] = acc;
          }
#pragma unroll
          for (int k = 0; k < W - 1; ++k) {
            xs[k] = xs[k + 1];
            dp[k] = dp[k + 1];
          }
        }
      }
    }
  }

  // Every thread (active or not) takes part in the barrier; inactive ones contribute zeros.
#pragma unroll
  for (int k = 0; k <= W; ++k) red[threadIdx.y][k][threadIdx.x] = gw[k];
  __syncthreads();
  if (c < p.C) {
    const size_t blk = size_t(b) * gridDim.y + blockIdx.y;
    for (int k = threadIdx.y; k <= W; k += kTiles) {
      float s = red[0][k][threadIdx.x];
#pragma unroll
      for (int r = 1; r < kTiles; ++r) s += red[r][k][threadIdx.x];
      part[(blk * (W + 1) + k) * p.C + c] = s;
    }
  }
}

// backward, pass 2: one thread per (k, c): Σ over the nblocks partials in ascending block order, added
// into dw[c, k] (k < W) or dbias[c] (k = W).
__global__ void conv1d_param_grad_kernel(int nblocks, int W, int C, const float* __restrict__ part,
                                         float* __restrict__ dw, float* __restrict__ dbias) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= (W + 1) * C) return;
  const int k = i / C, c = i % C;
  float s = 0.f;
  for (int blk = 0; blk < nblocks; ++blk) s += part[(size_t(blk) * (W + 1) + k) * C + c];
  if (k < W)
    dw[size_t(c) * W + k] += s;
  else
    dbias[c] += s;
}

// Calls f(std::integral_constant<int, W>) for the runtime width W ∈ [1, kConv1dMaxW].
template <typename F>
void dispatch_width(int W, F&& f) {
  switch (W) {
    case 1: f(std::integral_constant<int, 1>{}); break;
    case 2: f(std::integral_constant<int, 2>{}); break;
    case 3: f(std::integral_constant<int, 3>{}); break;
    case 4: f(std::integral_constant<int, 4>{}); break;
    case 5: f(std::integral_constant<int, 5>{}); break;
    case 6: f(std::integral_constant<int, 6>{}); break;
    case 7: f(std::integral_constant<int, 7>{}); break;
    case 8: f(std::integral_constant<int, 8>{}); break;
    default: require(false, "conv1d: unsupported width W=" + std::to_string(W));
  }
}

void check_params(const Conv1dParams& p) {
  require(p.B >= 0 && p.L >= 0 && p.C >= 0, "conv1d: B, L, C must be >= 0, got B=" + std::to_string(p.B) +
                                                " L=" + std::to_string(p.L) + " C=" + std::to_string(p.C));
  require(p.W >= 1 && p.W <= kConv1dMaxW, "conv1d: the GPU supports widths 1.." + std::to_string(kConv1dMaxW) +
                                              ", got W=" + std::to_string(p.W));
  require(p.ld_x >= p.C, "conv1d: ld_x (" + std::to_string(p.ld_x) + ") must be >= C (" + std::to_string(p.C) + ")");
  require(p.B <= 65535, "conv1d: B must be <= 65535 (grid z), got " + std::to_string(p.B));
  require((p.L + kBlockT - 1) / kBlockT <= 65535, "conv1d: L too long for the grid (" + std::to_string(p.L) + ")");
}

dim3 grid_of(const Conv1dParams& p) {
  return dim3((p.C + kCh - 1) / kCh, (p.L + kBlockT - 1) / kBlockT, p.B);
}

}  // namespace

void conv1d_silu_fwd(const Conv1dParams& p, const float* x, const float* w, const float* bias, float* y,
                     cudaStream_t stream) {
  check_params(p);
  if (p.B == 0 || p.L == 0 || p.C == 0) return;
  require(x && w && bias && y, "conv1d_silu_fwd: x, w, bias and y must be non-null");
  dispatch_width(p.W, [&](auto wc) {
    constexpr int W = decltype(wc)::value;
    conv1d_silu_fwd_kernel<W><<<grid_of(p), dim3(kCh, kTiles), 0, stream>>>(p, x, w, bias, y);
    MLALPHA_CHECK_LAUNCH();
  });
}

size_t conv1d_silu_bwd_workspace_floats(const Conv1dParams& p) {
  check_params(p);
  const size_t nblocks = size_t(p.B) * size_t((p.L + kBlockT - 1) / kBlockT);
  return nblocks * size_t(p.W + 1) * size_t(p.C);
}

void conv1d_silu_bwd(const Conv1dParams& p, const float* x, const float* w, const float* bias, const float* dy,
                     float* dx, float* dw, float* dbias, float* workspace, cudaStream_t stream) {
  check_params(p);
  if (p.B == 0 || p.L == 0 || p.C == 0) return;  // dx empty; dw, dbias += empty sums
  require(x && w && bias && dy && dx && dw && dbias, "conv1d_silu_bwd: all tensors must be non-null");
  require(workspace != nullptr, "conv1d_silu_bwd: needs conv1d_silu_bwd_workspace_floats(p) floats of workspace");
  const dim3 grid = grid_of(p);
  const size_t nblocks = size_t(grid.y) * grid.z;
  require(nblocks <= 0x7fffffff, "conv1d_silu_bwd: B · ceil(L / 128) too large");
  dispatch_width(p.W, [&](auto wc) {
    constexpr int W = decltype(wc)::value;
    conv1d_silu_bwd_kernel<W><<<grid, dim3(kCh, kTiles), 0, stream>>>(p, x, w, bias, dy, dx, workspace);
    MLALPHA_CHECK_LAUNCH();
  });
  const int n = (p.W + 1) * p.C;
  conv1d_param_grad_kernel<<<(n + 255) / 256, 256, 0, stream>>>(int(nblocks), p.W, p.C, workspace, dw, dbias);
  MLALPHA_CHECK_LAUNCH();
}

}  // namespace mlalpha::gpu

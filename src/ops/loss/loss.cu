// Masked MSE / Huber loss and its gradient on the GPU (DESIGN sections 1 and 2), fp32, the result left in
// device memory. Two stream-ordered kernels, no atomics, fixed grid (from the shape only):
//   loss_partials_kernel  per block of kChunk elements: Σℓ (float) and Σm (int) into workspace
//   loss_finish_kernel    every block adds the partials in one fixed order (so each has the same Σℓ, Σm and
//                         1/max(1, Σm)); block 0 writes loss and count; each block writes its dout elements
//                         m·ℓ'(e)/max(1, Σm), recomputed from out and y now that the count is known, and their
//                         bf16 rounding when asked (the bf16 step's GEMM operand: no cast launch)
// The partials are few (S: 8), so re-adding them in every block costs less than the launch a separate
// finalising kernel took. Workspace (floats): [0, nb) Σℓ partials | [nb, 2nb) Σm partials stored as int | [2nb]
// one spare float the kernels never touch: it keeps the workspace non-empty at n = 0, where the loss still runs
// (loss 0, count 0) and requires one.
#include <cuda_bf16.h>

#include <algorithm>
#include <climits>

#include "core/cuda_check.h"
#include "ops/common/reduce.cuh"
#include "ops/linear/linear.h"
#include "ops/loss/loss.h"

namespace mlalpha::gpu {
namespace {

constexpr int kThreads = 256;
constexpr int kPerThread = 8;
constexpr int kChunk = kThreads * kPerThread;  // elements per partials block
constexpr int kWarps = kThreads / 32;

// m = 0 for positions t < burn_in and for NaN targets (element i of (B, L, K) is at t = (i / K) mod L)
__device__ __forceinline__ bool masked(long long i, int L, int K, int burn_in, float yi) {
  const int t = int((i / K) % L);
  return t < burn_in || isnan(yi);
}

// ℓ(e) and ℓ'(e): e² and 2e, or Huber_δ: ½e², e where |e| ≤ δ, else δ(|e| − ½δ), ±δ
__device__ __forceinline__ void loss_term(bool huber, float d, float e, float& l, float& g) {
  if (!huber) {
    l = e * e;
    g = 2.f * e;
  } else if (fabsf(e) <= d) {
    l = 0.5f * e * e;
    g = e;
  } else {
    l = d * (fabsf(e) - 0.5f * d);
    g = e > 0.f ? d : -d;
  }
}

// Block-wide sum of (s, c) in a fixed order (warp butterflies, then warps 0..kWarps−1: reduce.cuh); valid in
// thread 0.
__device__ __forceinline__ void block_sum(float& s, int& c) {
  __shared__ float ss[kWarps];
  __shared__ int sc[kWarps];
  block_sum2_first<kWarps>(s, c, ss, sc);
}

__global__ void __launch_bounds__(kThreads)
    loss_partials_kernel(long long n, int L, int K, int burn_in, bool huber, float delta,
                         const float* __restrict__ out, const float* __restrict__ y, float* __restrict__ psum,
                         int* __restrict__ pcnt) {
  float s = 0.f;
  int c = 0;
  const long long base = (long long)blockIdx.x * kChunk + threadIdx.x;
  for (int k = 0; k < kPerThread; ++k) {
    const long long i = base + (long long)k * kThreads;
    if (i >= n) break;
    const float yi = y[i];
    if (masked(i, L, K, burn_in, yi)) continue;
    float l, g;
    loss_term(huber, delta, out[i] - yi, l, g);
    s += l;
    ++c;
  }
  block_sum(s, c);
  if (threadIdx.x == 0) psum[blockIdx.x] = s, pcnt[blockIdx.x] = c;
}

// K = 1: the block's kThreads elements of dout are one chunk of linear_bias_grad's rows (linear.h), row
// r = threadIdx.x holding g (0 past the end: + 0 leaves a sum that started from +0 unchanged, so a short last
// chunk has the bits of the shorter sum). partial[blockIdx.x] = the 8 strided sums (row r + 8k into sum r, from
// 0, k ascending), added in order from sum 0: db_partial_kernel's arithmetic for one column, so its bits.
constexpr int kDbStrides = 8;
static_assert(kThreads == kLinearDbChunk, "a block of the loss's gradient is one chunk of the bias gradient's rows");
__device__ __forceinline__ void db_chunk_partial(float g, float* __restrict__ db_partial) {
  __shared__ float rows[kThreads];
  __shared__ float sums[kDbStrides];
  rows[threadIdx.x] = g;
  __syncthreads();
  if (threadIdx.x < kDbStrides) {
    float s = 0.f;
    for (int m = threadIdx.x; m < kThreads; m += kDbStrides) s += rows[m];
    sums[threadIdx.x] = s;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float t = sums[0];
    for (int r = 1; r < kDbStrides; ++r) t += sums[r];
    db_partial[blockIdx.x] = t;
  }
}

// Thread t adds partials t, t + kThreads, … in order, then block_sum; loss = Σℓ · 1/max(1, Σm). Every block does
// this (the same bits in each), block 0 writes loss and count; then each block's kThreads elements of dout
// (and dout16 when non-null), n = 0 when no gradient is asked.
__global__ void __launch_bounds__(kThreads)
    loss_finish_kernel(long long n, int L, int K, int burn_in, bool huber, float delta, const float* __restrict__ out,
                       const float* __restrict__ y, int nb, const float* __restrict__ psum,
                       const int* __restrict__ pcnt, float* __restrict__ loss_out, int* __restrict__ count_out,
                       float* __restrict__ dout, __nv_bfloat16* __restrict__ dout16, float* __restrict__ db_partial) {
  __shared__ float inv_s;
  float s = 0.f;
  int c = 0;
  for (int b = threadIdx.x; b < nb; b += kThreads) s += psum[b], c += pcnt[b];
  block_sum(s, c);
  if (threadIdx.x == 0) {
    const float inv = 1.f / float(c > 0 ? c : 1);
    inv_s = inv;
    if (blockIdx.x == 0) {
      *loss_out = s * inv;
      if (count_out) *count_out = c;
    }
  }
  __syncthreads();
  const long long i = (long long)blockIdx.x * kThreads + threadIdx.x;
  float g = 0.f;
  if (i < n) {
    const float yi = y[i];
    if (!masked(i, L, K, burn_in, yi)) {
      float l;
      loss_term(huber, delta, out[i] - yi, l, g);
      g *= inv_s;
    }
    dout[i] = g;
    if (dout16) dout16[i] = __float2bfloat16_rn(g);
  }
  if (db_partial) db_chunk_partial(g, db_partial);  // block-uniform
}

long long numel(const LossParams& p) { return (long long)p.B * p.L * p.K; }
int partial_blocks(const LossParams& p) { return int((numel(p) + kChunk - 1) / kChunk); }
}  // namespace

size_t loss_fwd_bwd_workspace_floats(const LossParams& p) {
  return p.kind == LossKind::IC ? ic_loss_workspace_floats(p) : 2 * size_t(partial_blocks(p)) + 1;
}

size_t loss_workspace_floats_any(int B, int L, int K) {
  const LossParams mse{B, L, K, LossKind::MSE, 1.0f, 0, 0}, ic{B, L, K, LossKind::IC, 1.0f, 0, 1};
  return std::max(loss_fwd_bwd_workspace_floats(mse), loss_fwd_bwd_workspace_floats(ic));
}

void loss_fwd_bwd(const LossParams& p, const LossInputs<float>& in, const LossOutputs& o, float* workspace,
                  cudaStream_t stream) {
  if (p.kind == LossKind::IC) return ic_loss_fwd_bwd(p, in, o, workspace, stream);
  const float *out = in.out, *y = in.y;
  float *dout = o.dout, *loss_out = o.loss;
  int* count_out = o.count;
  require(p.B >= 0 && p.L >= 0 && p.K >= 0, "gpu::loss_fwd_bwd: B, L, K must be >= 0, got B=" + std::to_string(p.B) +
                                                " L=" + std::to_string(p.L) + " K=" + std::to_string(p.K));
  require(numel(p) <= INT_MAX, "gpu::loss_fwd_bwd: B·L·K must be < 2^31 (int mask count)");
  require(p.kind == LossKind::MSE || p.delta > 0.f,
          "gpu::loss_fwd_bwd: Huber delta must be > 0, got " + std::to_string(p.delta));
  require(loss_out != nullptr && workspace != nullptr, "gpu::loss_fwd_bwd: loss_out and workspace must be non-null");
  require(!o.dout16 || dout, "gpu::loss_fwd_bwd: dout16 needs dout");
  require(!o.db_partial || (dout && p.K == 1), "gpu::loss_fwd_bwd: db_partial needs dout and K = 1, got K=" +
                                                   std::to_string(p.K));
  const long long n = numel(p);
  const int nb = partial_blocks(p);
  const bool huber = p.kind == LossKind::Huber;
  float* psum = workspace;
  int* pcnt = reinterpret_cast<int*>(workspace + nb);
  if (nb > 0) {
    loss_partials_kernel<<<nb, kThreads, 0, stream>>>(n, p.L, p.K, p.burn_in, huber, p.delta, out, y, psum, pcnt);
    MLALPHA_CHECK_LAUNCH(stream);
  }
  // Runs even for n = 0 so the scalars are always written (loss 0, count 0): at least one block.
  const long long grad_n = dout ? n : 0;
  const long long grid = std::max<long long>(1, (grad_n + kThreads - 1) / kThreads);
  loss_finish_kernel<<<unsigned(grid), kThreads, 0, stream>>>(grad_n, p.L, p.K, p.burn_in, huber, p.delta, out, y, nb,
                                                              psum, pcnt, loss_out, count_out, dout, o.dout16,
                                                              grad_n > 0 ? o.db_partial : nullptr);
  MLALPHA_CHECK_LAUNCH(stream);
}

}  // namespace mlalpha::gpu

// RMSNorm on the GPU (DESIGN section 1), fp32: one warp per row, so a row's reduction is one butterfly of
// shuffles (every lane ends with the same bits). dw is reduced without atomics: each block of kBwdRows rows
// writes one partial row of D floats, then colsum_add (ops/common/colsum.cuh) adds the partials in a fixed
// order.
#include "core/cuda_check.h"
#include "ops/common/colsum.cuh"
#include "ops/common/warp_sum.cuh"
#include "ops/rmsnorm/rmsnorm.h"

namespace mlalpha::gpu {
namespace {

constexpr int kWarps = 4;            // warps (= rows in flight) per block
constexpr int kThreads = 32 * kWarps;
constexpr int kBwdRows = 32;         // rows per backward block: fixed by the shape only, so the sum order is too
constexpr int kMaxBwdD = 3072;       // kWarps dw accumulators of D floats in shared memory: 48 KiB at most

// y = x · r ⊙ w with r = rsqrt(mean(x²) + eps)
__global__ void __launch_bounds__(kThreads)
    rmsnorm_fwd_kernel(int M, int D, float eps, const float* __restrict__ x, const float* __restrict__ w,
                       float* __restrict__ y, float* __restrict__ rstd) {
  const int row = blockIdx.x * kWarps + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= M) return;  // row depends on the warp only: whole warps leave, the shuffles see full warps
  const float* xr = x + size_t(row) * D;
  float ss = 0.f;
  for (int i = lane; i < D; i += 32) ss += xr[i] * xr[i];
  const float r = rsqrtf(warp_sum(ss) / float(D) + eps);
  if (lane == 0 && rstd) rstd[row] = r;
  float* yr = y + size_t(row) * D;
  for (int i = lane; i < D; i += 32) yr[i] = xr[i] * r * w[i];
}

// dx_i = r·w_i·dy_i − x_i·r³/D·Σ_j dy_j w_j x_j  (written or added); partial[block] = Σ_rows dy_i x_i r.
// Lane l of every warp owns columns l + 32k of its warp's shared accumulator, so no two threads touch the
// same shared float until the __syncthreads before the cross-warp sum.
__global__ void __launch_bounds__(kThreads)
    rmsnorm_bwd_kernel(int M, int D, const float* __restrict__ x, const float* __restrict__ w,
                       const float* __restrict__ rstd, const float* __restrict__ dy, float* __restrict__ dx,
                       bool accumulate, float* __restrict__ partial /* (gridDim.x, D) */) {
  extern __shared__ float s_dw[];  // (kWarps, D)
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float* acc = s_dw + size_t(warp) * D;
  for (int i = lane; i < D; i += 32) acc[i] = 0.f;
  const int row0 = blockIdx.x * kBwdRows;
  const int row_end = min(M, row0 + kBwdRows);
  for (int row = row0 + warp; row < row_end; row += kWarps) {
    const float* xr = x + size_t(row) * D;
    const float* dyr = dy + size_t(row) * D;
    float* dxr = dx + size_t(row) * D;
    const float r = rstd[row];
    float dot = 0.f;
    for (int i = lane; i < D; i += 32) dot += dyr[i] * w[i] * xr[i];
    const float c = r * r * r * warp_sum(dot) / float(D);
    for (int i = lane; i < D; i += 32) {
      const float xi = xr[i], dyi = dyr[i];
      const float g = r * w[i] * dyi - xi * c;
      dxr[i] = accumulate ? dxr[i] + g : g;
      acc[i] += dyi * xi * r;
    }
  }
  __syncthreads();
  store_block_partial<kWarps, kThreads>(s_dw, D, partial + size_t(blockIdx.x) * D);
}

int bwd_blocks(const RmsNormParams& p) { return (p.M + kBwdRows - 1) / kBwdRows; }

void check_params(const RmsNormParams& p, const char* who) {
  require(p.M >= 0, std::string(who) + ": M must be >= 0, got " + std::to_string(p.M));
  require(p.D >= 1, std::string(who) + ": D must be >= 1, got " + std::to_string(p.D));
  require(p.eps >= 0.f, std::string(who) + ": eps must be >= 0");
}

}  // namespace

void rmsnorm_fwd(const RmsNormParams& p, const float* x, const float* w, float* y, float* rstd, cudaStream_t stream) {
  check_params(p, "gpu::rmsnorm_fwd");
  if (p.M == 0) return;
  const int grid = (p.M + kWarps - 1) / kWarps;
  rmsnorm_fwd_kernel<<<grid, kThreads, 0, stream>>>(p.M, p.D, p.eps, x, w, y, rstd);
  MLALPHA_CHECK_LAUNCH();
}

size_t rmsnorm_bwd_workspace_floats(const RmsNormParams& p) { return size_t(bwd_blocks(p)) * size_t(p.D); }

void rmsnorm_bwd(const RmsNormParams& p, const float* x, const float* w, const float* rstd, const float* dy, float* dx,
                 float* dw, bool accumulate, float* workspace, cudaStream_t stream) {
  check_params(p, "gpu::rmsnorm_bwd");
  require(p.D <= kMaxBwdD, "gpu::rmsnorm_bwd: D must be <= " + std::to_string(kMaxBwdD) +
                               " (per-warp dw accumulators in shared memory), got " + std::to_string(p.D));
  if (p.M == 0) return;  // dw += 0, no dx rows
  require(workspace != nullptr, "gpu::rmsnorm_bwd: workspace is null (needs rmsnorm_bwd_workspace_floats)");
  const int nb = bwd_blocks(p);
  const size_t smem = size_t(kWarps) * p.D * sizeof(float);
  rmsnorm_bwd_kernel<<<nb, kThreads, smem, stream>>>(p.M, p.D, x, w, rstd, dy, dx, accumulate, workspace);
  MLALPHA_CHECK_LAUNCH();
  colsum_add(nb, p.D, workspace, dw, stream);
}

}  // namespace mlalpha::gpu

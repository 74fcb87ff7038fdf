// Δ = clamp(softplus(dt + dt_bias), lo, hi) on the GPU (DESIGN section 1), fp32, elementwise over (M, H).
// ddt_bias is reduced without atomics: each block of kBwdRows rows writes one partial (H), then
// colsum_add (ops/common/colsum.cuh) adds the partials in a fixed order.
#include <cuda_bf16.h>

#include <type_traits>

#include "core/cuda_check.h"
#include "ops/activations.h"
#include "ops/common/bf16_pack.cuh"
#include "ops/common/colsum.cuh"
#include "ops/dt_softplus/dt_softplus.h"
#include "ops/dt_softplus/dt_softplus.cuh"

namespace mlalpha::gpu {
namespace {

constexpr int kThreads = 256;
constexpr int kBwdRows = kDtBwdRows;
// Backward block: kTile heads × kThreads / kTile row slices. kTile = 8 where H ≤ 8 (the models' shapes: S and M have
// 8 heads), so no lane idles; 32 heads a tile otherwise. With 32 columns at H = 8 three lanes in four idled and each
// thread walked 8 rows in turn (S: 9.4 µs a call, latency-bound, H100).
static_assert(kThreads == kDtBwdThreads, "the backward block is dt_softplus.cuh's");
template <int kTile>
constexpr int kRowSlices = kDtRowSlices<kTile>;
int bwd_tile(int H) { return H <= 8 ? 8 : 32; }

template <typename TIn>
__global__ void __launch_bounds__(kThreads)
    dt_softplus_fwd_kernel(int M, int H, int ld_dt, float lo, float hi, const TIn* __restrict__ dt,
                           const float* __restrict__ dt_bias, float* __restrict__ delta) {
  const long long idx = (long long)blockIdx.x * kThreads + threadIdx.x;
  if (idx >= (long long)M * H) return;
  delta[idx] = dt_softplus_value(idx, H, ld_dt, lo, hi, dt, dt_bias);
}

// TOut: float, or __nv_bfloat16 in bf16 mode (ddt is then only in_proj's GEMM operand dy); TIn as the forward's.
template <int kTile, typename TOut, typename TIn>
__global__ void __launch_bounds__(kThreads)
    dt_softplus_bwd_kernel(int M, int H, int ld_dt, float lo, float hi, const TIn* __restrict__ dt,
                           const float* __restrict__ dt_bias, const float* __restrict__ ddelta,
                           TOut* __restrict__ ddt /* (M, ld_dt) */, float* __restrict__ partial /* (gridDim.x, H) */) {
  dt_softplus_bwd_block<kTile, kThreads>(blockIdx.x, blockIdx.y, threadIdx.y * kTile + threadIdx.x, M, H, ld_dt, lo, hi,
                                         dt, dt_bias, ddelta, ddt, partial);
}

int bwd_blocks(const DtParams& p) { return (p.M + kBwdRows - 1) / kBwdRows; }

void check_params(const DtParams& p, const char* who) {
  const std::string w(who);
  require(p.M >= 0, w + ": M must be >= 0, got " + std::to_string(p.M));
  require(p.H >= 1, w + ": H must be >= 1, got " + std::to_string(p.H));
  require(p.ld_dt >= p.H, w + ": ld_dt must be >= H, got ld_dt=" + std::to_string(p.ld_dt) +
                              " H=" + std::to_string(p.H));
  require(p.lo <= p.hi, w + ": the clamp needs lo <= hi (hi = +inf for no upper clamp), got lo=" +
                            std::to_string(p.lo) + " hi=" + std::to_string(p.hi));
}

}  // namespace

namespace {
template <typename TIn>
void fwd(const DtParams& p, const TIn* dt, const float* dt_bias, float* delta, cudaStream_t stream) {
  check_params(p, "gpu::dt_softplus_fwd");
  const long long n = (long long)p.M * p.H;
  if (n == 0) return;
  const long long grid = (n + kThreads - 1) / kThreads;
  require(grid < (1ll << 31), "gpu::dt_softplus_fwd: M·H too large");
  dt_softplus_fwd_kernel<<<unsigned(grid), kThreads, 0, stream>>>(p.M, p.H, p.ld_dt, p.lo, p.hi, dt, dt_bias, delta);
  MLALPHA_CHECK_LAUNCH(stream);
}
}  // namespace

void dt_softplus_fwd(const DtParams& p, const DtInputs<float>& in, float* delta, cudaStream_t stream) {
  fwd(p, in.dt, in.dt_bias, delta, stream);
}
void dt_softplus_fwd(const DtParams& p, const DtInputsBf16& in, float* delta, cudaStream_t stream) {
  fwd(p, in.dt, in.dt_bias, delta, stream);
}

size_t dt_softplus_bwd_workspace_floats(const DtParams& p) { return size_t(bwd_blocks(p)) * size_t(p.H); }

namespace {
template <typename TIn>
void bwd(const DtParams& p, const TIn* dt, const float* dt_bias, const float* ddelta, float* ddt, float* ddt_bias,
         float* workspace, cudaStream_t stream, __nv_bfloat16* ddt16, ColsumBatch* defer) {
  check_params(p, "gpu::dt_softplus_bwd");
  if (p.M == 0) return;  // ddt_bias += 0
  require(workspace != nullptr, "gpu::dt_softplus_bwd: workspace is null (needs dt_softplus_bwd_workspace_floats)");
  const int nb = bwd_blocks(p);
  auto launch = [&](auto tile, auto* out) {
    constexpr int kTile = decltype(tile)::value;
    const int tiles = (p.H + kTile - 1) / kTile;
    require(tiles <= 65535, "gpu::dt_softplus_bwd: H too large");
    dt_softplus_bwd_kernel<kTile><<<dim3(nb, tiles), dim3(kTile, kRowSlices<kTile>), 0, stream>>>(
        p.M, p.H, p.ld_dt, p.lo, p.hi, dt, dt_bias, ddelta, out, workspace);
  };
  const bool narrow = bwd_tile(p.H) == 8;
  if (ddt16) narrow ? launch(std::integral_constant<int, 8>{}, ddt16) : launch(std::integral_constant<int, 32>{}, ddt16);
  else narrow ? launch(std::integral_constant<int, 8>{}, ddt) : launch(std::integral_constant<int, 32>{}, ddt);
  MLALPHA_CHECK_LAUNCH(stream);
  colsum_add_or_defer(defer, nb, p.H, workspace, ddt_bias, stream);
}
}  // namespace

void dt_softplus_bwd(const DtParams& p, const DtInputs<float>& in, const float* ddelta, const DtGrads<float>& g,
                     float* workspace, cudaStream_t stream, __nv_bfloat16* ddt16, ColsumBatch* defer) {
  bwd(p, in.dt, in.dt_bias, ddelta, g.ddt, g.ddt_bias, workspace, stream, ddt16, defer);
}
void dt_softplus_bwd(const DtParams& p, const DtInputsBf16& in, const float* ddelta, const DtGrads<float>& g,
                     float* workspace, cudaStream_t stream, __nv_bfloat16* ddt16, ColsumBatch* defer) {
  require(p.M == 0 || ddt16, "gpu::dt_softplus_bwd: bf16 dt writes ddt in bf16 only (ddt16)");
  bwd(p, in.dt, in.dt_bias, ddelta, static_cast<float*>(nullptr), g.ddt_bias, workspace, stream, ddt16, defer);
}

}  // namespace mlalpha::gpu

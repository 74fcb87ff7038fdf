// Gated RMSNorm on the GPU (DESIGN section 1, norm_before_gate = False), fp32: one warp per (row, group) of
// gs = Dn / G channels, so a group's reduction is one butterfly of shuffles. u = y·SiLU(z) is recomputed in
// each pass instead of stored. dw is reduced without atomics: each block of kBwdRows rows writes one partial
// row of Dn floats, then colsum_add (ops/common/colsum.cuh) adds the partials in a fixed order.
#include "core/cuda_check.h"
#include "ops/activations.h"
#include "ops/common/colsum.cuh"
#include "ops/common/warp_sum.cuh"
#include "ops/gated_rmsnorm/gated_rmsnorm.h"

namespace mlalpha::gpu {
namespace {

constexpr int kWarps = 4;            // warps (= (row, group) items in flight) per block
constexpr int kThreads = 32 * kWarps;
constexpr int kBwdRows = 8;          // rows per backward block: fixed by the shape only, so the sum order is too
                                     // (8, not more: enough blocks to keep the memory system busy, e.g. 2048
                                     // for 16K rows; L's layer took 3x its memory time with 32)
constexpr int kMaxBwdDn = 3072;      // kWarps dw accumulators of Dn floats in shared memory: 48 KiB at most

// out = u · r ⊙ w with u = y·SiLU(z), r = rsqrt(mean_group(u²) + eps); item = row·G + g
__global__ void __launch_bounds__(kThreads)
    gated_rmsnorm_fwd_kernel(int M, int Dn, int G, int ld_z, float eps, const float* __restrict__ y,
                             const float* __restrict__ z, const float* __restrict__ w, float* __restrict__ out,
                             float* __restrict__ rstd) {
  const long long item = (long long)blockIdx.x * kWarps + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (item >= (long long)M * G) return;  // item depends on the warp only: whole warps leave
  const int row = int(item / G), g = int(item % G), gs = Dn / G;
  const float* yr = y + size_t(row) * Dn + size_t(g) * gs;
  const float* zr = z + size_t(row) * ld_z + size_t(g) * gs;
  const float* wg = w + size_t(g) * gs;
  float ss = 0.f;
  for (int j = lane; j < gs; j += 32) {
    const float u = yr[j] * silu(zr[j]);
    ss += u * u;
  }
  const float r = rsqrtf(warp_sum(ss) / float(gs) + eps);
  if (lane == 0) rstd[item] = r;  // rstd (M, G): index row·G + g = item
  float* outr = out + size_t(row) * Dn + size_t(g) * gs;
  for (int j = lane; j < gs; j += 32) outr[j] = yr[j] * silu(zr[j]) * r * wg[j];
}

// RMSNorm backward on u (rmsnorm.cu), then through u = y·SiLU(z):
//   du = r·w·dout − u·r³/gs·Σ dout·w·u;  dy = du·SiLU(z);  dz = du·y·SiLU'(z);  partial[block] = Σ dout·u·r.
// Within a group, column g·gs + j always belongs to lane j % 32 of the warp that holds the item, and each
// warp has its own shared accumulator, so shared floats are private until the __syncthreads.
__global__ void __launch_bounds__(kThreads)
    gated_rmsnorm_bwd_kernel(int M, int Dn, int G, int ld_z, const float* __restrict__ y,
                             const float* __restrict__ z, const float* __restrict__ w,
                             const float* __restrict__ rstd, const float* __restrict__ dout,
                             float* __restrict__ dy, float* __restrict__ dz,
                             float* __restrict__ partial /* (gridDim.x, Dn) */) {
  extern __shared__ float s_dw[];  // (kWarps, Dn)
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int gs = Dn / G;
  float* acc = s_dw + size_t(warp) * Dn;
  for (int g = 0; g < G; ++g)  // zeroed with the same column → lane map as the accumulation below
    for (int j = lane; j < gs; j += 32) acc[g * gs + j] = 0.f;
  const int row0 = blockIdx.x * kBwdRows;
  const int rows = min(M, row0 + kBwdRows) - row0;
  for (int it = warp; it < rows * G; it += kWarps) {
    const int row = row0 + it / G, g = it % G;
    const size_t oy = size_t(row) * Dn + size_t(g) * gs;   // into y, dout, dy
    const size_t oz = size_t(row) * ld_z + size_t(g) * gs;  // into z, dz
    const float* wg = w + size_t(g) * gs;
    float* ag = acc + size_t(g) * gs;
    const float r = rstd[size_t(row) * G + g];
    float dot = 0.f;
    for (int j = lane; j < gs; j += 32) dot += dout[oy + j] * wg[j] * (y[oy + j] * silu(z[oz + j]));
    const float c = r * r * r * warp_sum(dot) / float(gs);
    for (int j = lane; j < gs; j += 32) {
      const float zj = z[oz + j], yj = y[oy + j], d = dout[oy + j];
      const float u = yj * silu(zj);
      const float du = r * wg[j] * d - u * c;
      ag[j] += d * u * r;
      dy[oy + j] = du * silu(zj);
      dz[oz + j] = du * yj * silu_grad(zj);
    }
  }
  __syncthreads();
  store_block_partial<kWarps, kThreads>(s_dw, Dn, partial + size_t(blockIdx.x) * Dn);
}

int bwd_blocks(const GatedNormParams& p) { return (p.M + kBwdRows - 1) / kBwdRows; }

void check_params(const GatedNormParams& p, const char* who) {
  const std::string w(who);
  require(p.M >= 0, w + ": M must be >= 0, got " + std::to_string(p.M));
  require(p.G >= 1, w + ": G must be >= 1, got " + std::to_string(p.G));
  require(p.Dn >= 1 && p.Dn % p.G == 0,
          w + ": Dn must be a positive multiple of G, got Dn=" + std::to_string(p.Dn) + " G=" + std::to_string(p.G));
  require(p.ld_z >= p.Dn, w + ": ld_z must be >= Dn, got ld_z=" + std::to_string(p.ld_z) +
                              " Dn=" + std::to_string(p.Dn));
  require((long long)p.M * p.G < (1ll << 31), w + ": M·G must be < 2^31");
  require(p.eps >= 0.f, w + ": eps must be >= 0");
}

}  // namespace

void gated_rmsnorm_fwd(const GatedNormParams& p, const float* y, const float* z, const float* w, float* out,
                       float* rstd, cudaStream_t stream) {
  check_params(p, "gpu::gated_rmsnorm_fwd");
  if (p.M == 0) return;
  const long long items = (long long)p.M * p.G;
  const int grid = int((items + kWarps - 1) / kWarps);
  gated_rmsnorm_fwd_kernel<<<grid, kThreads, 0, stream>>>(p.M, p.Dn, p.G, p.ld_z, p.eps, y, z, w, out, rstd);
  MLALPHA_CHECK_LAUNCH();
}

size_t gated_rmsnorm_bwd_workspace_floats(const GatedNormParams& p) {
  return size_t(bwd_blocks(p)) * size_t(p.Dn);
}

void gated_rmsnorm_bwd(const GatedNormParams& p, const float* y, const float* z, const float* w, const float* rstd,
                       const float* dout, float* dy, float* dz, float* dw, float* workspace, cudaStream_t stream) {
  check_params(p, "gpu::gated_rmsnorm_bwd");
  require(p.Dn <= kMaxBwdDn, "gpu::gated_rmsnorm_bwd: Dn must be <= " + std::to_string(kMaxBwdDn) +
                                 " (per-warp dw accumulators in shared memory), got " + std::to_string(p.Dn));
  if (p.M == 0) return;  // dw += 0, nothing written
  require(workspace != nullptr, "gpu::gated_rmsnorm_bwd: workspace is null (needs gated_rmsnorm_bwd_workspace_floats)");
  const int nb = bwd_blocks(p);
  const size_t smem = size_t(kWarps) * p.Dn * sizeof(float);
  gated_rmsnorm_bwd_kernel<<<nb, kThreads, smem, stream>>>(p.M, p.Dn, p.G, p.ld_z, y, z, w, rstd, dout, dy, dz,
                                                           workspace);
  MLALPHA_CHECK_LAUNCH();
  colsum_add(nb, p.Dn, workspace, dw, stream);
}

}  // namespace mlalpha::gpu

// Cross-sectional IC loss and its gradient on the GPU (loss.h gives the formula), fp32, the result left in
// device memory. Three stream-ordered kernels, no atomics, fixed grid (from the shape only):
//   ic_group_kernel     one block per group (g, l, k): n, Σp, Σy, then S_pp, S_yy, S_py (fixed-order block
//                       sums); ρ, the counted flag and (p̄, ȳ, 1/√(A·C), ρ/A) into workspace
//   ic_finalize_kernel  one block: Σρ and M over the groups in ascending order; loss, count, 1/max(1, M)
//   ic_grad_kernel      dout per element from its group's four values
// Workspace (floats), ng = (B / G)·L·K groups: [0, 4ng) group stats | [4ng, 5ng) ρ | [5ng, 6ng) counted flag
// stored as int | [6ng] 1/max(1, M).
#include <climits>
#include <string>

#include "core/cuda_check.h"
#include "core/error.h"
#include "ops/common/reduce.cuh"
#include "ops/loss/loss.h"

namespace mlalpha::gpu {
namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;

struct IcShape {
  int G, L, K, burn_in;
  int ng;  // groups
};

// Group q = (g·L + l)·K + k; member i sits at element ((g·G + i)·L + l)·K + k.
__device__ __forceinline__ long long member_at(const IcShape& s, int q, int i) {
  const int k = q % s.K, l = (q / s.K) % s.L, g = q / (s.K * s.L);
  return ((long long)(g) * s.G + i) * s.L * s.K + (long long)l * s.K + k;
}

__global__ void __launch_bounds__(kThreads)
    ic_group_kernel(IcShape s, const float* __restrict__ out, const float* __restrict__ y, float4* __restrict__ stats,
                    float* __restrict__ rho_out, int* __restrict__ counted) {
  __shared__ float fs[kWarps];
  __shared__ int is[kWarps];
  const int q = blockIdx.x;
  const int l = (q / s.K) % s.L;
  const bool live = l >= s.burn_in;
  int n = 0;
  float sp = 0.f, sy = 0.f;
  if (live)
    for (int i = threadIdx.x; i < s.G; i += kThreads) {
      const long long e = member_at(s, q, i);
      const float yi = y[e];
      if (!isfinite(yi)) continue;
      ++n, sp += out[e], sy += yi;
    }
  n = block_sum<kWarps>(n, is);
  if (n < 3) {  // uniform across the block: every thread has the same n
    if (threadIdx.x == 0) stats[q] = make_float4(0.f, 0.f, 0.f, 0.f), rho_out[q] = 0.f, counted[q] = 0;
    return;
  }
  sp = block_sum<kWarps>(sp, fs);
  sy = block_sum<kWarps>(sy, fs);
  const float pm = sp / float(n), ym = sy / float(n);
  float spp = 0.f, syy = 0.f, spy = 0.f;
  for (int i = threadIdx.x; i < s.G; i += kThreads) {
    const long long e = member_at(s, q, i);
    const float yi = y[e];
    if (!isfinite(yi)) continue;
    const float a = out[e] - pm, c = yi - ym;
    spp += a * a, syy += c * c, spy += a * c;
  }
  spp = block_sum<kWarps>(spp, fs);
  syy = block_sum<kWarps>(syy, fs);
  spy = block_sum<kWarps>(spy, fs);
  if (threadIdx.x == 0) {
    const float A = spp + float(n) * float(kIcEps), C = syy + float(n) * float(kIcEps);
    const float r = rsqrtf(A) * rsqrtf(C);  // A·C may underflow in float; the two roots do not
    const float rho = spy * r;
    stats[q] = make_float4(pm, ym, r, rho / A);
    rho_out[q] = rho;
    counted[q] = 1;
  }
}

// One block: thread t adds groups t, t + kThreads, … in order, then the fixed-order block sum.
__global__ void __launch_bounds__(kThreads)
    ic_finalize_kernel(int ng, const float* __restrict__ rho, const int* __restrict__ counted, float* __restrict__ inv_out,
                       float* __restrict__ loss_out, int* __restrict__ count_out) {
  __shared__ float fs[kWarps];
  __shared__ int is[kWarps];
  float s = 0.f;
  int c = 0;
  for (int q = threadIdx.x; q < ng; q += kThreads) s += rho[q], c += counted[q];
  block_sum2_first<kWarps>(s, c, fs, is);
  if (threadIdx.x == 0) {
    const float inv = 1.f / float(c > 0 ? c : 1);
    *inv_out = inv;
    *loss_out = -s * inv;
    if (count_out) *count_out = c;
  }
}

// Element e of (B, L, K): b = e / (L·K), group q = ((b / G)·L + l)·K + k.
__global__ void __launch_bounds__(256)
    ic_grad_kernel(long long n, IcShape s, const float* __restrict__ out, const float* __restrict__ y,
                   const float4* __restrict__ stats, const float* __restrict__ inv, float* __restrict__ dout) {
  const long long e = (long long)blockIdx.x * 256 + threadIdx.x;
  if (e >= n) return;
  const float yi = y[e];
  const int k = int(e % s.K), l = int((e / s.K) % s.L);
  const long long b = e / ((long long)s.L * s.K);
  if (!isfinite(yi) || l < s.burn_in) {
    dout[e] = 0.f;
    return;
  }
  const int q = int((b / s.G) * s.L * s.K + (long long)l * s.K + k);
  const float4 g = stats[q];
  dout[e] = -*inv * ((yi - g.y) * g.z - (out[e] - g.x) * g.w);
}

int groups(const LossParams& p) { return p.G > 0 ? int((long long)(p.B / p.G) * p.L * p.K) : 0; }

}  // namespace

size_t ic_loss_workspace_floats(const LossParams& p) { return 6 * size_t(groups(p)) + 1; }

void ic_loss_fwd_bwd(const LossParams& p, const LossInputs<float>& in, const LossOutputs& o, float* workspace,
                     cudaStream_t stream) {
  require(p.G >= 1 && p.B >= 0 && p.B % p.G == 0 && p.L >= 0 && p.K >= 0,
          "gpu::ic_loss_fwd_bwd: B = " + std::to_string(p.B) + " must be a multiple of the cross-section size G = " +
              std::to_string(p.G) + " >= 1 (L = " + std::to_string(p.L) + ", K = " + std::to_string(p.K) + ")");
  const long long n = (long long)p.B * p.L * p.K;
  require(n <= INT_MAX, "gpu::ic_loss_fwd_bwd: B·L·K must be < 2^31");
  require(o.loss != nullptr && workspace != nullptr, "gpu::ic_loss_fwd_bwd: loss and workspace must be non-null");
  require(o.dout16 == nullptr, "gpu::ic_loss_fwd_bwd: no bf16 dout (cast it: the IC loss writes fp32 only)");
  require(o.db_partial == nullptr, "gpu::ic_loss_fwd_bwd: no bias partials (the IC loss's dout keeps the launch)");
  const IcShape s{p.G, p.L, p.K, p.burn_in, groups(p)};
  float4* stats = reinterpret_cast<float4*>(workspace);  // cudaMalloc'd workspace: 16-byte aligned
  float* rho = workspace + 4 * size_t(s.ng);
  int* counted = reinterpret_cast<int*>(workspace + 5 * size_t(s.ng));
  float* inv = workspace + 6 * size_t(s.ng);
  if (s.ng > 0) {
    ic_group_kernel<<<s.ng, kThreads, 0, stream>>>(s, in.out, in.y, stats, rho, counted);
    MLALPHA_CHECK_LAUNCH(stream);
  }
  // Runs even with no groups so the scalars are always written (loss 0, count 0).
  ic_finalize_kernel<<<1, kThreads, 0, stream>>>(s.ng, rho, counted, inv, o.loss, o.count);
  MLALPHA_CHECK_LAUNCH(stream);
  if (o.dout && n > 0) {
    ic_grad_kernel<<<unsigned((n + 255) / 256), 256, 0, stream>>>(n, s, in.out, in.y, stats, inv, o.dout);
    MLALPHA_CHECK_LAUNCH(stream);
  }
}

}  // namespace mlalpha::gpu

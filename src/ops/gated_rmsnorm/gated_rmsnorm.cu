// Gated RMSNorm on the GPU (DESIGN section 1, norm_before_gate = False), fp32. A team of threads
// (ops/common/row_team.cuh) holds one (row, group) segment of gs = Dn / G channels in registers, so y, z and
// dout are read from memory once, SiLU's sigmoid is evaluated once per element, and the group's reduction is
// one team_sum (a block works on one group, blockIdx.y, so every sum is exact per group). dw is reduced
// without atomics: a thread owns the same columns for all the rows of its block, sums dout·u·r for them in
// registers, each block writes one partial row (its teams added in order), then colsum_add
// (ops/common/colsum.cuh) adds the partials in a fixed order. Every order depends on the shape only.
#include "core/cuda_check.h"
#include "ops/common/colsum.cuh"
#include "ops/common/row_team.cuh"
#include "ops/gated_rmsnorm/gated_rmsnorm.h"

namespace mlalpha::gpu {
namespace {

// Rows per backward block, shared by its teams: fixed, so the dw sum order depends on the shape only. 16
// keeps the partials small (M/16 rows of Dn: 2.4% of the layer's traffic at Dn = 2048) while leaving
// ~2 waves of blocks at M = 16K (L: 1024 blocks, 4 per SM), so the last wave is not a thin tail.
constexpr int kBwdRows = 16;

// σ(z) = 1 / (1 + exp(−z)) as in ops/activations.h, but with the approximate reciprocal (MUFU.RCP, within
// 1 ulp; 0 once exp(−z) > 2^126, where σ < 1e-38): the correctly rounded division brings a slow-path call
// whose saved registers made the Dn = 2048 backward spill.
__device__ __forceinline__ float sigmoid_rcp(float z) { return __fdividef(1.f, 1.f + expf(-z)); }

// out = u · r ⊙ w with u = y·SiLU(z), r = rsqrt(mean_group(u²) + eps). One (row, group) per team: the
// forward needs no sums across rows, and short blocks balance best.
// TOut: float, or __nv_bfloat16 in bf16 mode (out is then only out_proj's GEMM operand). TZ: float, or
// __nv_bfloat16 in bf16 mode (z the bf16 in_proj output, y the SSD's bf16 output), widened exactly as loaded.
template <class Tm, bool kVec, typename TOut, typename TZ>
__global__ void __launch_bounds__(Tm::kBlock)
    gated_rmsnorm_fwd_kernel(GatedNormParams p, const TZ* __restrict__ y /* (M, Dn) */,
                             const TZ* __restrict__ z /* (M, ld_z) */, const float* __restrict__ w /* (Dn) */,
                             TOut* __restrict__ out /* (M, Dn) */, float* __restrict__ rstd /* (M, G) */) {
  constexpr int T = Tm::kThreads, Q = Tm::kQuads;
  __shared__ float slots[2][Tm::kBlock / 32];
  const int team = threadIdx.x / T, lane = threadIdx.x % T;
  const int g = blockIdx.y, gs = p.Dn / p.G;
  const int row = blockIdx.x * Tm::kTeams + team;
  const int n = row < p.M ? gs : 0;  // a team past the last row works on zeros: it must still reach the barrier
  const size_t oy = size_t(row) * p.Dn + size_t(g) * gs, oz = size_t(row) * p.ld_z + size_t(g) * gs;
  float u[Q][4], zv[Q][4];
  load_quads<kVec, T, Q>(y + oy, n, lane, u);
  load_quads<kVec, T, Q>(z + oz, n, lane, zv);
  float ss = 0.f;
#pragma unroll
  for (int k = 0; k < Q; ++k)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      u[k][j] *= zv[k][j] * sigmoid_rcp(zv[k][j]);  // y·SiLU(z)
      ss += u[k][j] * u[k][j];
    }
  const float r = rsqrtf(team_sum<T, Tm::kBlock>(ss, slots, 0) / float(gs) + p.eps);
  if (n == 0) return;
  if (lane == 0) rstd[size_t(row) * p.G + g] = r;
  float wv[Q][4];
  load_quads<kVec, T, Q>(w + size_t(g) * gs, n, lane, wv);
#pragma unroll
  for (int k = 0; k < Q; ++k)
#pragma unroll
    for (int j = 0; j < 4; ++j) u[k][j] = u[k][j] * r * wv[k][j];
  store_quads<kVec, T, Q>(out + oy, n, lane, u);
}

// Blocks per SM for the backward's __launch_bounds__. The scalar fallback (four loads a quad, each with its
// own bound) needs more registers than the float4 path: ~80 at 8 columns a thread (Team<256, 2>), where
// Tm::kMinBlocks = 4 would cap it at 64 and make it spill; so it runs 3 blocks per SM there.
template <class Tm, bool kVec>
constexpr int bwd_min_blocks() {
  return !kVec && Tm::kQuads == 2 ? 3 : Tm::kMinBlocks;
}

// RMSNorm backward on u (rmsnorm.cu), then through u = y·SiLU(z), with σ = sigmoid(z):
//   du = r·w·dout − u·c, c = r³/gs·Σ_group dout·w·u;  dy = du·SiLU(z);  dz = du·y·SiLU'(z),
//   SiLU(z) = z·σ, SiLU'(z) = σ·(1 + z·(1 − σ)) (ops/activations.h);  partial[block] = Σ_rows dout·u·r.
// Everything but c is known before the team's sum, so the output pass keeps four values per column in
// registers (r·w·dout, u, SiLU(z), y·SiLU'(z)) and dw is accumulated before the barrier.
// TDz: float, or __nv_bfloat16 in bf16 mode (dz is then only in_proj's GEMM operand dy). TZ, TDout: float, or
// __nv_bfloat16 in bf16 mode (y the SSD's and z in_proj's bf16 output, dout out_proj's bf16 dx), widened exactly as
// loaded. TDy: float, or __nv_bfloat16 where the SSD's reverse walk reads dy (its tiles are bf16 anyway), rounded
// to nearest even as stored.
template <class Tm, bool kVec, typename TDz, typename TZ, typename TDout, typename TDy = float>
__global__ void __launch_bounds__(Tm::kBlock, (bwd_min_blocks<Tm, kVec>()))
    gated_rmsnorm_bwd_kernel(GatedNormParams p, const TZ* __restrict__ y /* (M, Dn) */,
                             const TZ* __restrict__ z /* (M, ld_z) */, const float* __restrict__ w /* (Dn) */,
                             const float* __restrict__ rstd /* (M, G) */, const TDout* __restrict__ dout /* (M, Dn) */,
                             TDy* __restrict__ dy /* (M, Dn) */, TDz* __restrict__ dz /* (M, ld_z) */,
                             float* __restrict__ partial /* (gridDim.x, Dn) */) {
  constexpr int T = Tm::kThreads, Q = Tm::kQuads;
  __shared__ float slots[2][Tm::kBlock / 32];
  __shared__ __align__(16) float s_acc[Tm::kTeams > 1 ? Tm::kTeams * Tm::kCols : 1];  // (kTeams, gs)
  const int team = threadIdx.x / T, lane = threadIdx.x % T;
  const int g = blockIdx.y, gs = p.Dn / p.G;
  const int row0 = blockIdx.x * kBwdRows, rows = min(p.M - row0, kBwdRows);
  const int iters = (rows + Tm::kTeams - 1) / Tm::kTeams;  // the same for all teams: team_sum has a barrier
  const float* wg = w + size_t(g) * gs;
  float acc[Q][4] = {};  // this thread's columns of Σ_rows dout·u·r, rows in ascending order
  for (int it = 0; it < iters; ++it) {
    const int row = row0 + it * Tm::kTeams + team;  // teams interleave, so neighbouring rows load together
    const int n = row < row0 + rows ? gs : 0;      // no row left for this team: zeros in, nothing out
    const size_t oy = size_t(row) * p.Dn + size_t(g) * gs, oz = size_t(row) * p.ld_z + size_t(g) * gs;
    const float r = n > 0 ? rstd[size_t(row) * p.G + g] : 0.f;
    float yv[Q][4], zv[Q][4], dv[Q][4], wv[Q][4];
    load_quads<kVec, T, Q>(y + oy, n, lane, yv);
    load_quads<kVec, T, Q>(z + oz, n, lane, zv);
    load_quads<kVec, T, Q>(dout + oy, n, lane, dv);
    load_quads<kVec, T, Q>(wg, n, lane, wv);
    float dot = 0.f;
#pragma unroll
    for (int k = 0; k < Q; ++k)
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float zj = zv[k][j], s = sigmoid_rcp(zj), d = dv[k][j];
        const float sz = zj * s, u = yv[k][j] * sz;
        dot += d * wv[k][j] * u;
        acc[k][j] += d * u * r;
        wv[k][j] = r * wv[k][j] * d;                          // r·w·dout
        dv[k][j] = u;                                         // u
        zv[k][j] = sz;                                        // SiLU(z)
        yv[k][j] = yv[k][j] * (s * (1.f + zj * (1.f - s)));  // y·SiLU'(z)
      }
    const float c = r * r * r * team_sum<T, Tm::kBlock>(dot, slots, it & 1) / float(gs);
#pragma unroll
    for (int k = 0; k < Q; ++k)
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float du = wv[k][j] - dv[k][j] * c;
        dv[k][j] = du * zv[k][j];  // dy
        yv[k][j] = du * yv[k][j];  // dz
      }
    store_quads<kVec, T, Q>(dy + oy, n, lane, dv);
    store_quads<kVec, T, Q>(dz + oz, n, lane, yv);
  }
  float* prow = partial + size_t(blockIdx.x) * p.Dn + size_t(g) * gs;
  if constexpr (Tm::kTeams == 1) {
    store_quads<kVec, T, Q>(prow, gs, lane, acc);
  } else {  // the teams' sums, team 0 first
    store_quads<kVec, T, Q, true>(s_acc + size_t(team) * gs, gs, lane, acc);
    __syncthreads();
    store_block_partial<Tm::kTeams, Tm::kBlock>(s_acc, gs, prow);
  }
}

int bwd_blocks(const GatedNormParams& p) { return (p.M + kBwdRows - 1) / kBwdRows; }

void check_params(const GatedNormParams& p, const char* who) {
  const std::string w(who);
  require(p.M >= 0, w + ": M must be >= 0, got " + std::to_string(p.M));
  require(p.G >= 1 && p.G <= 65535, w + ": G must be in [1, 65535] (a grid dimension), got " + std::to_string(p.G));
  require(p.Dn >= 1 && p.Dn % p.G == 0,
          w + ": Dn must be a positive multiple of G, got Dn=" + std::to_string(p.Dn) + " G=" + std::to_string(p.G));
  require(p.Dn / p.G <= kMaxTeamCols, w + ": the group size Dn/G must be <= " + std::to_string(kMaxTeamCols) +
                                          " (one group is held in registers), got " + std::to_string(p.Dn / p.G));
  require(p.ld_z >= p.Dn, w + ": ld_z must be >= Dn, got ld_z=" + std::to_string(p.ld_z) +
                              " Dn=" + std::to_string(p.Dn));
  require(p.eps >= 0.f, w + ": eps must be >= 0");
}

// float4 loads and stores need whole quads in every group and 16-byte aligned (row, group) segments.
bool vec_ok(const GatedNormParams& p, std::initializer_list<const void*> ptrs) {
  return (p.Dn / p.G) % 4 == 0 && p.ld_z % 4 == 0 && all_aligned16(ptrs);
}

}  // namespace

namespace {
template <typename TOut, typename TZ>
void fwd(const GatedNormParams& p, const TZ* y, const TZ* z, const float* w, TOut* out, float* rstd,
         cudaStream_t stream) {
  check_params(p, "gpu::gated_rmsnorm_fwd");
  if (p.M == 0) return;
  const bool vec = vec_ok(p, {y, z, w, out});
  with_team(p.Dn / p.G, [&](auto tm) {
    using Tm = decltype(tm);
    const dim3 grid((p.M + Tm::kTeams - 1) / Tm::kTeams, p.G);
    if (vec)
      gated_rmsnorm_fwd_kernel<Tm, true, TOut, TZ><<<grid, Tm::kBlock, 0, stream>>>(p, y, z, w, out, rstd);
    else
      gated_rmsnorm_fwd_kernel<Tm, false, TOut, TZ><<<grid, Tm::kBlock, 0, stream>>>(p, y, z, w, out, rstd);
    MLALPHA_CHECK_LAUNCH(stream);
  });
}
}  // namespace

void gated_rmsnorm_fwd(const GatedNormParams& p, const GatedNormInputs<float>& in, float* out, float* rstd,
                       cudaStream_t stream) {
  fwd(p, in.y, in.z, in.w, out, rstd, stream);
}
void gated_rmsnorm_fwd(const GatedNormParams& p, const GatedNormInputs<float>& in, __nv_bfloat16* out, float* rstd,
                       cudaStream_t stream) {
  fwd(p, in.y, in.z, in.w, out, rstd, stream);
}
void gated_rmsnorm_fwd(const GatedNormParams& p, const GatedNormInputsBf16& in, __nv_bfloat16* out, float* rstd,
                       cudaStream_t stream) {
  fwd(p, in.y, in.z, in.w, out, rstd, stream);
}

size_t gated_rmsnorm_bwd_workspace_floats(const GatedNormParams& p) {
  return size_t(bwd_blocks(p)) * size_t(p.Dn);
}

namespace {
template <typename TDz, typename TZ, typename TDout, typename TDy>
void bwd(const GatedNormParams& p, const TZ* y, const TZ* z, const float* w, const float* rstd, const TDout* dout,
         TDy* dy, TDz* dz, float* dw, float* workspace, cudaStream_t stream, ColsumBatch* defer) {
  check_params(p, "gpu::gated_rmsnorm_bwd");
  if (p.M == 0) return;  // dw += 0, nothing written
  require(workspace != nullptr, "gpu::gated_rmsnorm_bwd: workspace is null (needs gated_rmsnorm_bwd_workspace_floats)");
  const int nb = bwd_blocks(p);
  const bool vec = vec_ok(p, {y, z, w, dout, dy, dz, workspace});
  with_team(p.Dn / p.G, [&](auto tm) {
    using Tm = decltype(tm);
    const dim3 grid(nb, p.G);
    if (vec)
      gated_rmsnorm_bwd_kernel<Tm, true, TDz, TZ, TDout, TDy>
          <<<grid, Tm::kBlock, 0, stream>>>(p, y, z, w, rstd, dout, dy, dz, workspace);
    else
      gated_rmsnorm_bwd_kernel<Tm, false, TDz, TZ, TDout, TDy>
          <<<grid, Tm::kBlock, 0, stream>>>(p, y, z, w, rstd, dout, dy, dz, workspace);
    MLALPHA_CHECK_LAUNCH(stream);
  });
  colsum_add_or_defer(defer, nb, p.Dn, workspace, dw, stream);
}
}  // namespace

void gated_rmsnorm_bwd(const GatedNormParams& p, const GatedNormInputs<float>& in, const float* rstd,
                       const float* dout, const GatedNormGrads<float>& g, float* workspace, cudaStream_t stream,
                       __nv_bfloat16* dz16, ColsumBatch* defer) {
  if (dz16) bwd(p, in.y, in.z, in.w, rstd, dout, g.dy, dz16, g.dw, workspace, stream, defer);
  else bwd(p, in.y, in.z, in.w, rstd, dout, g.dy, g.dz, g.dw, workspace, stream, defer);
}
void gated_rmsnorm_bwd(const GatedNormParams& p, const GatedNormInputsBf16& in, const float* rstd, const float* dout,
                       const GatedNormGrads<float>& g, float* workspace, cudaStream_t stream, __nv_bfloat16* dz16,
                       ColsumBatch* defer) {
  require(p.M == 0 || dz16, "gpu::gated_rmsnorm_bwd: bf16 z writes dz in bf16 only (dz16)");
  bwd(p, in.y, in.z, in.w, rstd, dout, g.dy, dz16, g.dw, workspace, stream, defer);
}
void gated_rmsnorm_bwd(const GatedNormParams& p, const GatedNormInputsBf16& in, const float* rstd,
                       const __nv_bfloat16* dout, const GatedNormGrads<float>& g, float* workspace, cudaStream_t stream,
                       __nv_bfloat16* dz16, ColsumBatch* defer) {
  require(p.M == 0 || dz16, "gpu::gated_rmsnorm_bwd: bf16 z writes dz in bf16 only (dz16)");
  bwd(p, in.y, in.z, in.w, rstd, dout, g.dy, dz16, g.dw, workspace, stream, defer);
}
void gated_rmsnorm_bwd(const GatedNormParams& p, const GatedNormInputsBf16& in, const float* rstd,
                       const __nv_bfloat16* dout, const GatedNormGrads<float>& g, float* workspace, cudaStream_t stream,
                       __nv_bfloat16* dz16, __nv_bfloat16* dy16, ColsumBatch* defer) {
  require(p.M == 0 || (dz16 && dy16), "gpu::gated_rmsnorm_bwd: dz and dy in bf16 need dz16 and dy16");
  require(!g.dy && !g.dz, "gpu::gated_rmsnorm_bwd: fp32 dy or dz given beside dy16, dz16 (one output each)");
  bwd(p, in.y, in.z, in.w, rstd, dout, dy16, dz16, g.dw, workspace, stream, defer);
}

}  // namespace mlalpha::gpu

// RMSNorm on the GPU (DESIGN section 1), fp32. A team of threads (ops/common/row_team.cuh) holds one row in
// registers, so x and dy are read from memory once and the row's reduction is one team_sum (the same bits in
// every thread). dw is reduced without atomics: a thread owns the same columns for all the rows of its block,
// sums dy·x·r for them in registers, each block writes one partial row (its teams added in order), then
// colsum_add (ops/common/colsum.cuh) adds the partials in a fixed order. Every order depends on the shape only.
#include "core/cuda_check.h"
#include "ops/common/colsum.cuh"
#include "ops/common/row_team.cuh"
#include "ops/rmsnorm/rmsnorm.h"

namespace mlalpha::gpu {
namespace {

// Rows per backward block, shared by its teams: fixed, so the dw sum order depends on the shape only; the
// partials are M/16 rows of D (1/48 of the traffic of x, dy, dx).
constexpr int kBwdRows = 16;

// y = x · r ⊙ w with r = rsqrt(mean(x²) + eps). One row per team: no sums across rows, short blocks.
// TOut: float, or __nv_bfloat16 in bf16 mode (y is then only a GEMM operand).
template <class Tm, bool kVec, typename TOut>
__global__ void __launch_bounds__(Tm::kBlock)
    rmsnorm_fwd_kernel(RmsNormParams p, const float* __restrict__ x /* (M, D) */, const float* __restrict__ w /* (D) */,
                       TOut* __restrict__ y /* (M, D) */, float* __restrict__ rstd /* (M) or null */) {
  constexpr int T = Tm::kThreads, Q = Tm::kQuads;
  __shared__ float slots[2][Tm::kBlock / 32];
  const int team = threadIdx.x / T, lane = threadIdx.x % T;
  const int row = blockIdx.x * Tm::kTeams + team;
  const int n = row < p.M ? p.D : 0;  // a team past the last row works on zeros: it must still reach the barrier
  const size_t off = size_t(row) * p.D;
  float xv[Q][4];
  load_quads<kVec, T, Q>(x + off, n, lane, xv);
  float ss = 0.f;
#pragma unroll
  for (int k = 0; k < Q; ++k)
#pragma unroll
    for (int j = 0; j < 4; ++j) ss += xv[k][j] * xv[k][j];
  const float r = rsqrtf(team_sum<T, Tm::kBlock>(ss, slots, 0) / float(p.D) + p.eps);
  if (n == 0) return;
  if (lane == 0 && rstd) rstd[row] = r;
  float wv[Q][4];
  load_quads<kVec, T, Q>(w, n, lane, wv);
#pragma unroll
  for (int k = 0; k < Q; ++k)
#pragma unroll
    for (int j = 0; j < 4; ++j) xv[k][j] = xv[k][j] * r * wv[k][j];
  store_quads<kVec, T, Q>(y + off, n, lane, xv);
}

// dx_i = r·w_i·dy_i − x_i·c with c = r³/D·Σ_j dy_j w_j x_j (written or added); partial[block] = Σ_rows dy_i x_i r.
// Everything but c is known before the team's sum: the output pass keeps r·w·dy and x, and dw is accumulated
// before the barrier.
template <class Tm, bool kVec>
__global__ void __launch_bounds__(Tm::kBlock, Tm::kMinBlocks)
    rmsnorm_bwd_kernel(RmsNormParams p, const float* __restrict__ x /* (M, D) */, const float* __restrict__ w /* (D) */,
                       const float* __restrict__ rstd /* (M) */, const float* __restrict__ dy /* (M, D) */,
                       float* __restrict__ dx /* (M, D) */, __nv_bfloat16* __restrict__ dx16 /* (M, D) or null */,
                       bool accumulate, float* __restrict__ partial /* (gridDim.x, D) */) {
  constexpr int T = Tm::kThreads, Q = Tm::kQuads;
  __shared__ float slots[2][Tm::kBlock / 32];
  __shared__ __align__(16) float s_acc[Tm::kTeams > 1 ? Tm::kTeams * Tm::kCols : 1];  // (kTeams, D)
  const int team = threadIdx.x / T, lane = threadIdx.x % T;
  const int row0 = blockIdx.x * kBwdRows, rows = min(p.M - row0, kBwdRows);
  const int iters = (rows + Tm::kTeams - 1) / Tm::kTeams;  // the same for all teams: team_sum has a barrier
  float acc[Q][4] = {};  // this thread's columns of Σ_rows dy·x·r, rows in ascending order
  for (int it = 0; it < iters; ++it) {
    const int row = row0 + it * Tm::kTeams + team;  // teams interleave, so neighbouring rows load together
    const int n = row < row0 + rows ? p.D : 0;     // no row left for this team: zeros in, nothing out
    const size_t off = size_t(row) * p.D;
    const float r = n > 0 ? rstd[row] : 0.f;
    float xv[Q][4], dv[Q][4], wv[Q][4], old[Q][4] = {};
    load_quads<kVec, T, Q>(x + off, n, lane, xv);
    load_quads<kVec, T, Q>(dy + off, n, lane, dv);
    load_quads<kVec, T, Q>(w, n, lane, wv);
    // the residual gradient dx is added to: loaded with the others, not after the barrier (one round trip)
    if (accumulate) load_quads<kVec, T, Q>(dx + off, n, lane, old);
    float dot = 0.f;
#pragma unroll
    for (int k = 0; k < Q; ++k)
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float d = dv[k][j];
        dot += d * wv[k][j] * xv[k][j];
        acc[k][j] += d * xv[k][j] * r;
        wv[k][j] = r * wv[k][j] * d;  // r·w·dy
      }
    const float c = r * r * r * team_sum<T, Tm::kBlock>(dot, slots, it & 1) / float(p.D);
#pragma unroll
    for (int k = 0; k < Q; ++k)
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float gx = wv[k][j] - xv[k][j] * c;  // this row's gradient
        wv[k][j] = accumulate ? old[k][j] + gx : gx;
      }
    store_quads<kVec, T, Q>(dx + off, n, lane, wv);
    if (dx16) store_quads<kVec, T, Q>(dx16 + off, n, lane, wv);  // the bf16 copy for the next GEMMs' dy
  }
  float* prow = partial + size_t(blockIdx.x) * p.D;
  if constexpr (Tm::kTeams == 1) {
    store_quads<kVec, T, Q>(prow, p.D, lane, acc);
  } else {  // the teams' sums, team 0 first
    store_quads<kVec, T, Q, true>(s_acc + size_t(team) * p.D, p.D, lane, acc);
    __syncthreads();
    store_block_partial<Tm::kTeams, Tm::kBlock>(s_acc, p.D, prow);
  }
}

int bwd_blocks(const RmsNormParams& p) { return (p.M + kBwdRows - 1) / kBwdRows; }

void check_params(const RmsNormParams& p, const char* who) {
  require(p.M >= 0, std::string(who) + ": M must be >= 0, got " + std::to_string(p.M));
  require(p.D >= 1 && p.D <= kMaxTeamCols, std::string(who) + ": D must be in [1, " + std::to_string(kMaxTeamCols) +
                                               "] (a row is held in registers), got " + std::to_string(p.D));
  require(p.eps >= 0.f, std::string(who) + ": eps must be >= 0");
}

template <typename TOut>
void fwd(const RmsNormParams& p, const RmsNormInputs<float>& in, TOut* y, float* rstd, cudaStream_t stream) {
  const float *x = in.x, *w = in.w;
  check_params(p, "gpu::rmsnorm_fwd");
  if (p.M == 0) return;
  const bool vec = p.D % 4 == 0 && all_aligned16({x, w, y});
  with_team(p.D, [&](auto tm) {
    using Tm = decltype(tm);
    const int grid = (p.M + Tm::kTeams - 1) / Tm::kTeams;
    if (vec)
      rmsnorm_fwd_kernel<Tm, true><<<grid, Tm::kBlock, 0, stream>>>(p, x, w, y, rstd);
    else
      rmsnorm_fwd_kernel<Tm, false><<<grid, Tm::kBlock, 0, stream>>>(p, x, w, y, rstd);
    MLALPHA_CHECK_LAUNCH(stream);
  });
}

}  // namespace

void rmsnorm_fwd(const RmsNormParams& p, const RmsNormInputs<float>& in, float* y, float* rstd, cudaStream_t stream) {
  fwd(p, in, y, rstd, stream);
}
void rmsnorm_fwd(const RmsNormParams& p, const RmsNormInputs<float>& in, __nv_bfloat16* y, float* rstd,
                 cudaStream_t stream) {
  fwd(p, in, y, rstd, stream);
}

size_t rmsnorm_bwd_workspace_floats(const RmsNormParams& p) { return size_t(bwd_blocks(p)) * size_t(p.D); }

void rmsnorm_bwd(const RmsNormParams& p, const RmsNormInputs<float>& in, const float* rstd, const float* dy,
                 const RmsNormGrads<float>& g, bool accumulate, float* workspace, cudaStream_t stream,
                 __nv_bfloat16* dx16, ColsumBatch* defer) {
  const float *x = in.x, *w = in.w;
  float *dx = g.dx, *dw = g.dw;
  check_params(p, "gpu::rmsnorm_bwd");
  if (p.M == 0) return;  // dw += 0, no dx rows
  require(workspace != nullptr, "gpu::rmsnorm_bwd: workspace is null (needs rmsnorm_bwd_workspace_floats)");
  const int nb = bwd_blocks(p);
  const bool vec = p.D % 4 == 0 && all_aligned16({x, w, dy, dx, workspace, dx16});
  with_team(p.D, [&](auto tm) {
    using Tm = decltype(tm);
    if (vec)
      rmsnorm_bwd_kernel<Tm, true><<<nb, Tm::kBlock, 0, stream>>>(p, x, w, rstd, dy, dx, dx16, accumulate, workspace);
    else
      rmsnorm_bwd_kernel<Tm, false><<<nb, Tm::kBlock, 0, stream>>>(p, x, w, rstd, dy, dx, dx16, accumulate, workspace);
    MLALPHA_CHECK_LAUNCH(stream);
  });
  colsum_add_or_defer(defer, nb, p.D, workspace, dw, stream);
}

}  // namespace mlalpha::gpu

#include "ops/conv1d/conv1d_cpu.h"

#include <algorithm>
#include <cmath>

#include "cpu/simd.h"

MLALPHA_CPU_KERNELS_BEGIN
#include "cpu/vmath.h"

namespace mlalpha::cpu {

namespace {
// pre (C) = bias + Σ_k w[·, k] ⊙ x[t − (W − 1) + k] for row r (time t = r mod L; x = 0 before t = 0).
void conv_pre_row(int r, const Conv1dParams& p, const ConvInputsT& in, float* pre) {
  const int t = r % p.L, C = p.C;
  std::copy(in.bias, in.bias + C, pre);
  for (int k = 0; k < p.W; ++k) {
    const int s = t - (p.W - 1) + k;
    if (s < 0) continue;
    const float* xs = in.x + size_t(r - t + s) * p.ld_x;
    const float* wk = in.wT + size_t(k) * C;
#pragma omp simd
    for (int c = 0; c < C; ++c) pre[c] += wk[c] * xs[c];
  }
}
}  // namespace

void conv_silu_fwd(Rows rows, const Conv1dParams& p, const ConvInputsT& in, float* y) {
  const int C = p.C;
  for (int r = rows.begin; r < rows.end; ++r) {
    float* yr = y + size_t(r) * C;
    conv_pre_row(r, p, in, yr);
#pragma omp simd
    for (int c = 0; c < C; ++c) yr[c] = vsilu(yr[c]);
  }
}

void conv_silu_bwd_pre(Rows rows, const Conv1dParams& p, const ConvInputsT& in, const float* dy, float* dpre,
                       const Conv1dGrads<float>& g) {
  const int C = p.C, W = p.W;
  float *dw_part = g.dw, *db_part = g.dbias;
  std::fill(dw_part, dw_part + size_t(W) * C, 0.0f);
  std::fill(db_part, db_part + C, 0.0f);
  for (int r = rows.begin; r < rows.end; ++r) {
    const int t = r % p.L;
    float* pr = dpre + size_t(r) * C;
    conv_pre_row(r, p, in, pr);  // the pre-activation first, in dpre's row
    const float* dyr = dy + size_t(r) * C;
#pragma omp simd
    for (int c = 0; c < C; ++c) {
      pr[c] = dyr[c] * vsilu_grad(pr[c]);
      db_part[c] += pr[c];
    }
    for (int k = 0; k < W; ++k) {
      const int s = t - (W - 1) + k;
      if (s < 0) continue;
      const float* xs = in.x + size_t(r - t + s) * p.ld_x;
      float* dwk = dw_part + size_t(k) * C;
#pragma omp simd
      for (int c = 0; c < C; ++c) dwk[c] += pr[c] * xs[c];
    }
  }
}

void conv_bwd_dx(Rows rows, const Conv1dParams& p, const float* wT, const float* dpre, float* dx) {
  const int C = p.C, W = p.W, L = p.L;
  for (int r = rows.begin; r < rows.end; ++r) {
    const int s = r % L;
    float* dxr = dx + size_t(r) * p.ld_x;
    std::fill(dxr, dxr + C, 0.0f);
    for (int k = 0; k < W; ++k) {  // x[s] feeds t = s + (W − 1) − k
      const int t = s + (W - 1) - k;
      if (t >= L) continue;
      const float* pt = dpre + size_t(r - s + t) * C;
      const float* wk = wT + size_t(k) * C;
#pragma omp simd
      for (int c = 0; c < C; ++c) dxr[c] += wk[c] * pt[c];
    }
  }
}

}  // namespace mlalpha::cpu

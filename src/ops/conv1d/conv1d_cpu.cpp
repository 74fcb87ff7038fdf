#include "ops/conv1d/conv1d_cpu.h"

#include <algorithm>
#include <cmath>

#include "cpu/simd.h"

MLALPHA_CPU_KERNELS_BEGIN
#include "cpu/vmath.h"

namespace mlalpha::cpu {

namespace {
// Input time s (−(W−1) ≤ s < L) of row r's sequence (r at time t): x for s ≥ 0, the initial window before;
// null where it is zero (before t = 0 without a window).
const float* input_row(int r, int t, int s, const Conv1dParams& p, const ConvInputsT& in) {
  if (s >= 0) return in.x + size_t(r - t + s) * p.ld_x;
  if (!in.window0) return nullptr;
  return in.window0 + (size_t(r / p.L) * (p.W - 1) + (p.W - 1 + s)) * p.C;
}

// pre (C) = bias + Σ_k w[·, k] ⊙ x[t − (W − 1) + k] for row r (time t = r mod L; x before t = 0: window0 or 0).
void conv_pre_row(int r, const Conv1dParams& p, const ConvInputsT& in, float* pre) {
  const int t = r % p.L, C = p.C;
  std::copy(in.bias, in.bias + C, pre);
  for (int k = 0; k < p.W; ++k) {
    const float* xs = input_row(r, t, t - (p.W - 1) + k, p, in);
    if (!xs) continue;
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
    if (!in.window_last) continue;
    // Final window row j is input time L − (W−1) + j: this row's input, or (from row t = 0) window0's rows.
    const int t = r % p.L, W1 = p.W - 1;
    float* wl = in.window_last + size_t(r / p.L) * W1 * C;
    const float* xr = in.x + size_t(r) * p.ld_x;
    if (t >= p.L - W1) std::copy(xr, xr + C, wl + size_t(t - p.L + W1) * C);
    if (t == 0)
      for (int j = 0; j < W1 - p.L; ++j) {
        const float* xs = input_row(r, t, p.L - W1 + j, p, in);
        if (xs)
          std::copy(xs, xs + C, wl + size_t(j) * C);
        else
          std::fill(wl + size_t(j) * C, wl + size_t(j + 1) * C, 0.0f);
      }
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
      const float* xs = input_row(r, t, t - (W - 1) + k, p, in);
      if (!xs) continue;
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

void conv_bwd_dwindow0(Rows rows, const Conv1dParams& p, const float* wT, const float* dpre,
                       const Conv1dGrads<float>& g) {
  if (!g.dwindow0) return;
  const int C = p.C, W = p.W, L = p.L;
  for (int r = rows.begin; r < rows.end; ++r) {
    if (r % L != 0) continue;  // one row per sequence owns its window
    float* dw0 = g.dwindow0 + size_t(r / L) * (W - 1) * C;
    for (int j = 0; j < W - 1; ++j) {  // window row j feeds t = j − k
      float* dj = dw0 + size_t(j) * C;
      std::fill(dj, dj + C, 0.0f);
      for (int k = 0; k < W; ++k) {
        const int t = j - k;
        if (t < 0 || t >= L) continue;
        const float* pt = dpre + size_t(r + t) * C;
        const float* wk = wT + size_t(k) * C;
#pragma omp simd
        for (int c = 0; c < C; ++c) dj[c] += wk[c] * pt[c];
      }
    }
  }
}

}  // namespace mlalpha::cpu

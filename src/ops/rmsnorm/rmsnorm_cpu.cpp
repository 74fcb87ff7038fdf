#include "ops/rmsnorm/rmsnorm_cpu.h"

#include <algorithm>
#include <cmath>

#include "cpu/simd.h"

MLALPHA_CPU_KERNELS_BEGIN
#include "cpu/vmath.h"

namespace mlalpha::cpu {

void rmsnorm_fwd(Rows rows, const RmsNormParams& p, const RmsNormInputs<float>& in, float* y, float* rstd) {
  const int D = p.D;
  const float *x = in.x, *w = in.w, eps = p.eps;
  for (int r = rows.begin; r < rows.end; ++r) {
    const float* xr = x + size_t(r) * D;
    float* yr = y + size_t(r) * D;
    float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
    for (int i = 0; i < D; ++i) ss += xr[i] * xr[i];
    const float rs = 1.0f / std::sqrt(ss / float(D) + eps);
    rstd[r] = rs;
#pragma omp simd
    for (int i = 0; i < D; ++i) yr[i] = xr[i] * rs * w[i];
  }
}

void rmsnorm_bwd(Rows rows, const RmsNormParams& p, const RmsNormInputs<float>& in, const float* rstd,
                 const float* dy, const RmsNormGrads<float>& g, bool accumulate) {
  const int D = p.D;
  const float *x = in.x, *w = in.w;
  float *dx = g.dx, *dw_part = g.dw;
  std::fill(dw_part, dw_part + D, 0.0f);
  for (int r = rows.begin; r < rows.end; ++r) {
    const float* xr = x + size_t(r) * D;
    const float* dyr = dy + size_t(r) * D;
    float* dxr = dx + size_t(r) * D;
    const float rs = rstd[r];
    float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
    for (int i = 0; i < D; ++i) dot += dyr[i] * w[i] * xr[i];
    const float c = rs * rs * rs * dot / float(D);
    // Written, not 0 · old + new: the buffer may hold a non-finite value of an earlier (skipped) step.
    if (accumulate) {
#pragma omp simd
      for (int i = 0; i < D; ++i) dxr[i] += rs * w[i] * dyr[i] - xr[i] * c;
    } else {
#pragma omp simd
      for (int i = 0; i < D; ++i) dxr[i] = rs * w[i] * dyr[i] - xr[i] * c;
    }
#pragma omp simd
    for (int i = 0; i < D; ++i) dw_part[i] += dyr[i] * xr[i] * rs;
  }
}

}  // namespace mlalpha::cpu

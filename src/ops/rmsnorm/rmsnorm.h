#pragma once
// RMSNorm (DESIGN section 1): y = x · rsqrt(mean(x²) + eps) ⊙ w, per row of D.
namespace mlalpha {

struct RmsNormParams {
  int M = 0;          // rows (B*L)
  int D = 0;          // row width
  float eps = 1e-5f;
};

namespace ref {
// y (M, D), rstd (M) saved for backward
template <typename T>
void rmsnorm_fwd(const RmsNormParams& p, const T* x, const T* w, T* y, T* rstd);
// dx (M, D): written, or added to when accumulate (the residual stream); dw (D) +=
template <typename T>
void rmsnorm_bwd(const RmsNormParams& p, const T* x, const T* w, const T* rstd, const T* dy, T* dx, T* dw,
                 bool accumulate);
}  // namespace ref

}  // namespace mlalpha

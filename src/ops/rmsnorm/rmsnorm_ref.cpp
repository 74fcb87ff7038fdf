#include <cmath>
#include <cstddef>

#include "ops/rmsnorm/rmsnorm.h"

namespace mlalpha::ref {

template <typename T>
void rmsnorm_fwd(const RmsNormParams& p, const RmsNormInputs<T>& in, T* y, T* rstd) {
  const T *x = in.x, *w = in.w;
  for (int m = 0; m < p.M; ++m) {
    const T* xr = x + size_t(m) * p.D;
    T ss = 0;
    for (int i = 0; i < p.D; ++i) ss += xr[i] * xr[i];
    const T r = T(1) / std::sqrt(ss / T(p.D) + T(p.eps));
    rstd[m] = r;
    for (int i = 0; i < p.D; ++i) y[size_t(m) * p.D + i] = xr[i] * r * w[i];
  }
}

// With r = (mean(x²)+eps)^-1/2:  dx_i = r·w_i·dy_i − x_i · r³/D · Σ_j dy_j w_j x_j ;  dw_i += dy_i x_i r.
template <typename T>
void rmsnorm_bwd(const RmsNormParams& p, const RmsNormInputs<T>& in, const T* rstd, const T* dy,
                 const RmsNormGrads<T>& g, bool accumulate) {
  const T *x = in.x, *w = in.w;
  T *dx = g.dx, *dw = g.dw;
  for (int m = 0; m < p.M; ++m) {
    const T* xr = x + size_t(m) * p.D;
    const T* dyr = dy + size_t(m) * p.D;
    T* dxr = dx + size_t(m) * p.D;
    const T r = rstd[m];
    T dot = 0;
    for (int i = 0; i < p.D; ++i) dot += dyr[i] * w[i] * xr[i];
    const T c = r * r * r * dot / T(p.D);
    for (int i = 0; i < p.D; ++i) {
      const T g = r * w[i] * dyr[i] - xr[i] * c;
      dxr[i] = accumulate ? dxr[i] + g : g;
      dw[i] += dyr[i] * xr[i] * r;
    }
  }
}

template void rmsnorm_fwd<float>(const RmsNormParams&, const RmsNormInputs<float>&, float*, float*);
template void rmsnorm_fwd<double>(const RmsNormParams&, const RmsNormInputs<double>&, double*, double*);
template void rmsnorm_bwd<float>(const RmsNormParams&, const RmsNormInputs<float>&, const float*, const float*,
                                 const RmsNormGrads<float>&, bool);
template void rmsnorm_bwd<double>(const RmsNormParams&, const RmsNormInputs<double>&, const double*, const double*,
                                  const RmsNormGrads<double>&, bool);

}  // namespace mlalpha::ref

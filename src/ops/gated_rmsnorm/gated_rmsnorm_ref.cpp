#include <cmath>
#include <cstddef>

#include "ops/activations.h"
#include "ops/gated_rmsnorm/gated_rmsnorm.h"

namespace mlalpha::ref {

template <typename T>
void gated_rmsnorm_fwd(const GatedNormParams& p, const GatedNormInputs<T>& in, T* out, T* rstd) {
  const T *y = in.y, *z = in.z, *w = in.w;
  const int gs = p.Dn / p.G;
  for (int m = 0; m < p.M; ++m)
    for (int g = 0; g < p.G; ++g) {
      T ss = 0;
      for (int i = g * gs; i < (g + 1) * gs; ++i) {
        const T u = y[size_t(m) * p.Dn + i] * silu(z[size_t(m) * p.ld_z + i]);
        ss += u * u;
      }
      const T r = T(1) / std::sqrt(ss / T(gs) + T(p.eps));
      rstd[size_t(m) * p.G + g] = r;
      for (int i = g * gs; i < (g + 1) * gs; ++i)
        out[size_t(m) * p.Dn + i] = y[size_t(m) * p.Dn + i] * silu(z[size_t(m) * p.ld_z + i]) * r * w[i];
    }
}

// RMSNorm backward on u (see rmsnorm_ref.cpp), then through u = y·SiLU(z).
template <typename T>
void gated_rmsnorm_bwd(const GatedNormParams& p, const GatedNormInputs<T>& in, const T* rstd, const T* dout,
                       const GatedNormGrads<T>& grads) {
  const T *y = in.y, *z = in.z, *w = in.w;
  T *dy = grads.dy, *dz = grads.dz, *dw = grads.dw;
  const int gs = p.Dn / p.G;
  for (int m = 0; m < p.M; ++m)
    for (int g = 0; g < p.G; ++g) {
      const T r = rstd[size_t(m) * p.G + g];
      T dot = 0;
      for (int i = g * gs; i < (g + 1) * gs; ++i) {
        const T u = y[size_t(m) * p.Dn + i] * silu(z[size_t(m) * p.ld_z + i]);
        dot += dout[size_t(m) * p.Dn + i] * w[i] * u;
      }
      const T c = r * r * r * dot / T(gs);
      for (int i = g * gs; i < (g + 1) * gs; ++i) {
        const T zi = z[size_t(m) * p.ld_z + i], yi = y[size_t(m) * p.Dn + i];
        const T u = yi * silu(zi);
        const T d = dout[size_t(m) * p.Dn + i];
        const T du = r * w[i] * d - u * c;
        dw[i] += d * u * r;
        dy[size_t(m) * p.Dn + i] = du * silu(zi);
        dz[size_t(m) * p.ld_z + i] = du * yi * silu_grad(zi);
      }
    }
}

template void gated_rmsnorm_fwd<float>(const GatedNormParams&, const GatedNormInputs<float>&, float*, float*);
template void gated_rmsnorm_fwd<double>(const GatedNormParams&, const GatedNormInputs<double>&, double*, double*);
template void gated_rmsnorm_bwd<float>(const GatedNormParams&, const GatedNormInputs<float>&, const float*,
                                       const float*, const GatedNormGrads<float>&);
template void gated_rmsnorm_bwd<double>(const GatedNormParams&, const GatedNormInputs<double>&, const double*,
                                        const double*, const GatedNormGrads<double>&);

}  // namespace mlalpha::ref

#include <cstddef>

#include "ops/activations.h"
#include "ops/dt_softplus/dt_softplus.h"

namespace mlalpha::ref {

template <typename T>
void dt_softplus_fwd(const DtParams& p, const DtInputs<T>& in, T* delta) {
  const T *dt = in.dt, *dt_bias = in.dt_bias;
  for (int m = 0; m < p.M; ++m)
    for (int h = 0; h < p.H; ++h) {
      T v = softplus(dt[size_t(m) * p.ld_dt + h] + dt_bias[h]);
      v = v < T(p.lo) ? T(p.lo) : (v > T(p.hi) ? T(p.hi) : v);
      delta[size_t(m) * p.H + h] = v;
    }
}

template <typename T>
void dt_softplus_bwd(const DtParams& p, const DtInputs<T>& in, const T* ddelta, const DtGrads<T>& grads) {
  const T *dt = in.dt, *dt_bias = in.dt_bias;
  T *ddt = grads.ddt, *ddt_bias = grads.ddt_bias;
  for (int m = 0; m < p.M; ++m)
    for (int h = 0; h < p.H; ++h) {
      const T u = dt[size_t(m) * p.ld_dt + h] + dt_bias[h];
      const T v = softplus(u);
      const bool pass = v >= T(p.lo) && v <= T(p.hi);
      const T g = pass ? ddelta[size_t(m) * p.H + h] * (u > T(20) ? T(1) : sigmoid(u)) : T(0);
      ddt[size_t(m) * p.ld_dt + h] = g;
      ddt_bias[h] += g;
    }
}

template void dt_softplus_fwd<float>(const DtParams&, const DtInputs<float>&, float*);
template void dt_softplus_fwd<double>(const DtParams&, const DtInputs<double>&, double*);
template void dt_softplus_bwd<float>(const DtParams&, const DtInputs<float>&, const float*, const DtGrads<float>&);
template void dt_softplus_bwd<double>(const DtParams&, const DtInputs<double>&, const double*, const DtGrads<double>&);

}  // namespace mlalpha::ref

#include <cmath>
#include <cstddef>

#include "ops/loss/loss.h"

namespace mlalpha::ref {

template <typename T>
LossResult<T> loss_fwd_bwd(const LossParams& p, const LossInputs<T>& in, T* dout) {
  if (p.kind == LossKind::IC) return ic_loss_fwd_bwd(p, in, dout);
  const T *out = in.out, *y = in.y;
  const size_t n = size_t(p.B) * p.L * p.K;
  auto masked = [&](size_t i) {
    const int t = int((i / p.K) % p.L);
    return t < p.burn_in || std::isnan(y[i]);
  };
  long long count = 0;
  for (size_t i = 0; i < n; ++i) count += masked(i) ? 0 : 1;
  const T inv = T(1) / T(count > 0 ? count : 1);
  const T d = T(p.delta);
  T sum = 0;
  for (size_t i = 0; i < n; ++i) {
    if (masked(i)) {
      if (dout) dout[i] = T(0);
      continue;
    }
    const T e = out[i] - y[i];
    T l, g;
    if (p.kind == LossKind::MSE) {
      l = e * e;
      g = T(2) * e;
    } else if (std::abs(e) <= d) {
      l = T(0.5) * e * e;
      g = e;
    } else {
      l = d * (std::abs(e) - T(0.5) * d);
      g = e > 0 ? d : -d;
    }
    sum += l;
    if (dout) dout[i] = g * inv;
  }
  return {sum * inv, count};
}

template LossResult<float> loss_fwd_bwd<float>(const LossParams&, const LossInputs<float>&, float*);
template LossResult<double> loss_fwd_bwd<double>(const LossParams&, const LossInputs<double>&, double*);

}  // namespace mlalpha::ref

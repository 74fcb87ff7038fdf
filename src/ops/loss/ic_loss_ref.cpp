// CPU reference of the cross-sectional IC loss (loss.h gives the formula): two passes per group (means, then
// centred sums), groups and members in ascending order.
#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include "core/error.h"
#include "ops/loss/loss.h"

namespace mlalpha::ref {

template <typename T>
LossResult<T> ic_loss_fwd_bwd(const LossParams& p, const LossInputs<T>& in, T* dout) {
  require(p.G >= 1 && p.B % p.G == 0, "ic loss: B = " + std::to_string(p.B) +
                                          " must be a positive multiple of the cross-section size G = " +
                                          std::to_string(p.G));
  const T *out = in.out, *y = in.y;
  const int groups = p.B / p.G;
  const size_t n_all = size_t(p.B) * p.L * p.K;
  if (dout)
    for (size_t i = 0; i < n_all; ++i) dout[i] = T(0);
  auto at = [&](int g, int i, int l, int k) { return ((size_t(g) * p.G + i) * p.L + l) * p.K + k; };
  // Pass over the groups: ρ and, for the gradient, each group's p̄, ȳ, 1/√(A·C) and ρ/A.
  struct Stats {
    T pm, ym, r, q;
  };
  std::vector<Stats> st(size_t(groups) * p.L * p.K, Stats{0, 0, 0, 0});
  T sum = 0;
  long long counted = 0;
  for (int g = 0; g < groups; ++g)
    for (int l = p.burn_in; l < p.L; ++l)
      for (int k = 0; k < p.K; ++k) {
        long long n = 0;
        T sp = 0, sy = 0;
        for (int i = 0; i < p.G; ++i) {
          const size_t e = at(g, i, l, k);
          if (!std::isfinite(y[e])) continue;
          ++n, sp += out[e], sy += y[e];
        }
        if (n < 3) continue;
        const T pm = sp / T(n), ym = sy / T(n);
        T spp = 0, syy = 0, spy = 0;
        for (int i = 0; i < p.G; ++i) {
          const size_t e = at(g, i, l, k);
          if (!std::isfinite(y[e])) continue;
          const T a = out[e] - pm, c = y[e] - ym;
          spp += a * a, syy += c * c, spy += a * c;
        }
        const T A = spp + T(n) * T(kIcEps), C = syy + T(n) * T(kIcEps);
        const T r = T(1) / std::sqrt(A * C);
        const T rho = spy * r;
        st[(size_t(g) * p.L + l) * p.K + k] = {pm, ym, r, rho / A};
        sum += rho;
        ++counted;
      }
  const T inv = T(1) / T(counted > 0 ? counted : 1);
  if (dout)
    for (int g = 0; g < groups; ++g)
      for (int l = p.burn_in; l < p.L; ++l)
        for (int k = 0; k < p.K; ++k) {
          const Stats& s = st[(size_t(g) * p.L + l) * p.K + k];
          for (int i = 0; i < p.G; ++i) {
            const size_t e = at(g, i, l, k);
            if (!std::isfinite(y[e])) continue;
            dout[e] = -inv * ((y[e] - s.ym) * s.r - (out[e] - s.pm) * s.q);
          }
        }
  return {-sum * inv, counted};
}

template LossResult<float> ic_loss_fwd_bwd<float>(const LossParams&, const LossInputs<float>&, float*);
template LossResult<double> ic_loss_fwd_bwd<double>(const LossParams&, const LossInputs<double>&, double*);

}  // namespace mlalpha::ref

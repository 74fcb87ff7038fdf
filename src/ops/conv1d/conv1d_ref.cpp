#include <cstddef>
#include <vector>

#include "ops/activations.h"
#include "ops/conv1d/conv1d.h"

namespace mlalpha::ref {

namespace {
template <typename T>
T conv_pre(const Conv1dParams& p, const T* x, const T* w, const T* bias, int b, int t, int c) {
  T acc = bias[c];
  for (int k = 0; k < p.W; ++k) {
    const int s = t - (p.W - 1) + k;
    if (s >= 0) acc += w[size_t(c) * p.W + k] * x[(size_t(b) * p.L + s) * p.ld_x + c];
  }
  return acc;
}
}  // namespace

template <typename T>
void conv1d_silu_fwd(const Conv1dParams& p, const Conv1dInputs<T>& in, T* y) {
  const T *x = in.x, *w = in.w, *bias = in.bias;
  for (int b = 0; b < p.B; ++b)
    for (int t = 0; t < p.L; ++t)
      for (int c = 0; c < p.C; ++c) y[(size_t(b) * p.L + t) * p.C + c] = silu(conv_pre(p, x, w, bias, b, t, c));
}

template <typename T>
void conv1d_silu_bwd(const Conv1dParams& p, const Conv1dInputs<T>& in, const T* dy, const Conv1dGrads<T>& grads) {
  const T *x = in.x, *w = in.w, *bias = in.bias;
  T *dx = grads.dx, *dw = grads.dw, *dbias = grads.dbias;
  std::vector<T> dpre(size_t(p.L) * p.C);
  for (int b = 0; b < p.B; ++b) {
    for (int t = 0; t < p.L; ++t)
      for (int c = 0; c < p.C; ++c) {
        const size_t i = size_t(t) * p.C + c;
        dpre[i] = dy[size_t(b) * p.L * p.C + i] * silu_grad(conv_pre(p, x, w, bias, b, t, c));
      }
    for (int s = 0; s < p.L; ++s)
      for (int c = 0; c < p.C; ++c) {
        // x[s] feeds outputs t = s + (W−1) − k for k in [0, W)
        T acc = 0;
        for (int k = 0; k < p.W; ++k) {
          const int t = s + (p.W - 1) - k;
          if (t < p.L) acc += w[size_t(c) * p.W + k] * dpre[size_t(t) * p.C + c];
        }
        dx[(size_t(b) * p.L + s) * p.ld_x + c] = acc;
      }
    for (int t = 0; t < p.L; ++t)
      for (int c = 0; c < p.C; ++c) {
        const T g = dpre[size_t(t) * p.C + c];
        dbias[c] += g;
        for (int k = 0; k < p.W; ++k) {
          const int s = t - (p.W - 1) + k;
          if (s >= 0) dw[size_t(c) * p.W + k] += g * x[(size_t(b) * p.L + s) * p.ld_x + c];
        }
      }
  }
}

template void conv1d_silu_fwd<float>(const Conv1dParams&, const Conv1dInputs<float>&, float*);
template void conv1d_silu_fwd<double>(const Conv1dParams&, const Conv1dInputs<double>&, double*);
template void conv1d_silu_bwd<float>(const Conv1dParams&, const Conv1dInputs<float>&, const float*,
                                     const Conv1dGrads<float>&);
template void conv1d_silu_bwd<double>(const Conv1dParams&, const Conv1dInputs<double>&, const double*,
                                      const Conv1dGrads<double>&);

}  // namespace mlalpha::ref

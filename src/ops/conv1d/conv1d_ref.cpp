#include <cstddef>
#include <vector>

#include "ops/activations.h"
#include "ops/conv1d/conv1d.h"

namespace mlalpha::ref {

namespace {
// Where input time s (−(W−1) ≤ s < L) of sequence b, channel c lives: x for s ≥ 0, the initial window before;
// null where it is a zero (before t = 0 without a window).
template <typename T>
const T* input_at(const Conv1dParams& p, const Conv1dInputs<T>& in, int b, int s, int c) {
  if (s >= 0) return &in.x[(size_t(b) * p.L + s) * p.ld_x + c];
  if (!in.window0) return nullptr;
  return &in.window0[(size_t(b) * (p.W - 1) + (p.W - 1 + s)) * p.C + c];
}
template <typename T>
T conv_pre(const Conv1dParams& p, const Conv1dInputs<T>& in, int b, int t, int c) {
  T acc = in.bias[c];
  for (int k = 0; k < p.W; ++k)
    if (const T* xs = input_at(p, in, b, t - (p.W - 1) + k, c)) acc += in.w[size_t(c) * p.W + k] * *xs;
  return acc;
}
}  // namespace

template <typename T>
void conv1d_silu_fwd(const Conv1dParams& p, const Conv1dInputs<T>& in, T* y) {
  for (int b = 0; b < p.B; ++b) {
    for (int t = 0; t < p.L; ++t)
      for (int c = 0; c < p.C; ++c) y[(size_t(b) * p.L + t) * p.C + c] = silu(conv_pre(p, in, b, t, c));
    if (in.window_last)  // row j of the final window is input time L − (W−1) + j
      for (int j = 0; j < p.W - 1; ++j)
        for (int c = 0; c < p.C; ++c) {
          const T* xs = input_at(p, in, b, p.L - (p.W - 1) + j, c);
          in.window_last[(size_t(b) * (p.W - 1) + j) * p.C + c] = xs ? *xs : T(0);
        }
  }
}

template <typename T>
void conv1d_silu_bwd(const Conv1dParams& p, const Conv1dInputs<T>& in, const T* dy, const Conv1dGrads<T>& grads) {
  const T* w = in.w;
  T *dx = grads.dx, *dw = grads.dw, *dbias = grads.dbias;
  std::vector<T> dpre(size_t(p.L) * p.C);
  for (int b = 0; b < p.B; ++b) {
    for (int t = 0; t < p.L; ++t)
      for (int c = 0; c < p.C; ++c) {
        const size_t i = size_t(t) * p.C + c;
        dpre[i] = dy[size_t(b) * p.L * p.C + i] * silu_grad(conv_pre(p, in, b, t, c));
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
    if (grads.dwindow0)  // window row j is input time s = j − (W−1): the same sum as dx's
      for (int j = 0; j < p.W - 1; ++j)
        for (int c = 0; c < p.C; ++c) {
          T acc = 0;
          for (int k = 0; k < p.W; ++k) {
            const int t = j - k;
            if (t >= 0 && t < p.L) acc += w[size_t(c) * p.W + k] * dpre[size_t(t) * p.C + c];
          }
          grads.dwindow0[(size_t(b) * (p.W - 1) + j) * p.C + c] = acc;
        }
    for (int t = 0; t < p.L; ++t)
      for (int c = 0; c < p.C; ++c) {
        const T g = dpre[size_t(t) * p.C + c];
        dbias[c] += g;
        for (int k = 0; k < p.W; ++k)
          if (const T* xs = input_at(p, in, b, t - (p.W - 1) + k, c)) dw[size_t(c) * p.W + k] += g * *xs;
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

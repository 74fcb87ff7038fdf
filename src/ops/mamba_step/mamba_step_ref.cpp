// CPU references of one bar's recurrent pieces (mamba_step.h): the conv step and the SSM step. Each performs
// the full-sequence reference's arithmetic at one position, in the same order (conv1d_ref.cpp, ssd_ref.cpp),
// so a sequence of steps reproduces the forward.
#include <algorithm>
#include <cmath>
#include <cstddef>

#include "ops/activations.h"
#include "ops/mamba_step/mamba_step.h"

namespace mlalpha::ref {

template <typename T>
void conv_step(int M, int C, int W, int ld_x, const T* xnew, const T* w, const T* bias, T* window, T* y,
               const uint8_t* commit) {
  const int taps = W - 1;  // window rows
  for (int m = 0; m < M; ++m) {
    const T* xr = xnew + size_t(m) * ld_x;
    T* win = window + size_t(m) * taps * C;  // (W−1, C), oldest row first
    const bool keep = commit == nullptr || commit[m] != 0;
    for (int c = 0; c < C; ++c) {
      T acc = bias[c];
      for (int k = 0; k < taps; ++k) acc += w[size_t(c) * W + k] * win[size_t(k) * C + c];
      acc += w[size_t(c) * W + taps] * xr[c];
      y[size_t(m) * C + c] = silu(acc);
    }
    if (!keep || taps == 0) continue;
    for (int k = 0; k + 1 < taps; ++k)
      for (int c = 0; c < C; ++c) win[size_t(k) * C + c] = win[size_t(k + 1) * C + c];
    for (int c = 0; c < C; ++c) win[size_t(taps - 1) * C + c] = xr[c];
  }
}

// Rows p are taken kRows at a time so that their sums over n, each in the recurrence's order, run side by side
// as independent dependency chains (one chain at a time waits on the adder's latency at every n).
template <typename T>
void ssd_step(const StepDims& d, int M, int ld, const T* x, const T* delta, const T* A_log, const T* Bm,
              const T* Cm, const T* Dskip, T* state, T* y, const uint8_t* commit) {
  constexpr int kRows = 8;
  for (int m = 0; m < M; ++m) {
    const bool keep = commit == nullptr || commit[m] != 0;
    const T* xr = x + size_t(m) * ld;
    for (int h = 0; h < d.H; ++h) {
      const int g = h * d.G / d.H;
      const T* B = Bm + size_t(m) * ld + size_t(g) * d.N;
      const T* Cv = Cm + size_t(m) * ld + size_t(g) * d.N;
      const T A = -std::exp(A_log[h]);
      const T dt = delta[size_t(m) * d.H + h], a = std::exp(dt * A);
      T* s = state + (size_t(m) * d.H + h) * d.P * d.N;  // (P, N)
      for (int p0 = 0; p0 < d.P; p0 += kRows) {
        const int rows = std::min(kRows, d.P - p0);
        T acc[kRows] = {}, dx[kRows] = {};
        for (int j = 0; j < rows; ++j) dx[j] = dt * xr[size_t(h) * d.P + p0 + j];
        for (int n = 0; n < d.N; ++n)
          for (int j = 0; j < rows; ++j) {
            T& sn = s[size_t(p0 + j) * d.N + n];
            const T sv = a * sn + dx[j] * B[n];
            if (keep) sn = sv;
            acc[j] += sv * Cv[n];
          }
        for (int j = 0; j < rows; ++j)
          y[(size_t(m) * d.H + h) * d.P + p0 + j] = acc[j] + Dskip[h] * xr[size_t(h) * d.P + p0 + j];
      }
    }
  }
}

template void conv_step<float>(int, int, int, int, const float*, const float*, const float*, float*, float*,
                               const uint8_t*);
template void conv_step<double>(int, int, int, int, const double*, const double*, const double*, double*, double*,
                                const uint8_t*);
template void ssd_step<float>(const StepDims&, int, int, const float*, const float*, const float*, const float*,
                              const float*, const float*, float*, float*, const uint8_t*);
template void ssd_step<double>(const StepDims&, int, int, const double*, const double*, const double*,
                               const double*, const double*, const double*, double*, double*, const uint8_t*);

}  // namespace mlalpha::ref

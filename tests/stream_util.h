#pragma once
// Helpers of the streaming suites (test_model_step, test_model_step_gpu): a stream of bars with absent
// instruments, NaN rows and NaN/Inf cells, and the full-sequence reference of a stream, which defines what a
// streamed output must be: instrument i's output at a bar where it is present is RefModel's output at the last
// position of the forward over i's present rows up to that bar (non-finite features as 0); where it is absent,
// NaN (model/model_step.h).
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "model/layout.h"
#include "model/model_ref.h"
#include "test_util.h"

namespace mlalpha::test {

inline ModelConfig step_config(int F, int K, int D, int NL, int P, int G, int N, int W) {
  ModelConfig c;
  c.F = F, c.K = K, c.D = D, c.NL = NL, c.P = P, c.G = G, c.N = N, c.W = W;
  return c;
}

// The model's initial weights plus noise, so no weight is a round 0 or 1.
inline std::vector<float> noisy_params(const ModelLayout& lay, std::mt19937_64& rng) {
  std::vector<float> p = init_params(lay, rng());
  const std::vector<float> noise = random_vec<float>(p.size(), rng, -0.2, 0.2);
  for (const auto& t : lay.table.tensors())
    for (size_t i = t.offset; i < t.offset + t.numel; ++i) p[i] += noise[i];
  return p;
}

struct Stream {
  int T = 0, I = 0, F = 0;
  std::vector<float> x;        // (T, I, F)
  std::vector<uint8_t> mask;   // (T, I)
  const float* row(int t) const { return x.data() + size_t(t) * I * F; }
  const uint8_t* mask_at(int t) const { return mask.data() + size_t(t) * I; }
  // The stepper's presence rule: the mask, and at least one finite feature.
  bool present(int t, int i) const {
    if (!mask[size_t(t) * I + i]) return false;
    for (int f = 0; f < F; ++f)
      if (std::isfinite(x[(size_t(t) * I + i) * F + f])) return true;
    return false;
  }
};

// Random rows in (−2, 2) with, when there are enough bars and instruments: instrument 1 masked out at bars 3,
// 4 and 10; instrument 2 an all-NaN row at bar 7; instrument 3 a NaN cell at bars 5 and 6 and an Inf cell
// at bar 8 (present rows, those cells count as 0); instrument 4 masked out before bar 6 (listed later).
inline Stream make_stream(int T, int I, int F, std::mt19937_64& rng) {
  Stream s;
  s.T = T, s.I = I, s.F = F;
  s.x = random_vec<float>(size_t(T) * I * F, rng, -2.0, 2.0);
  s.mask.assign(size_t(T) * I, 1);
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  auto cell = [&](int t, int i, int f) -> float& { return s.x[(size_t(t) * I + i) * F + f]; };
  if (I > 1)
    for (int t : {3, 4, 10})
      if (t < T) s.mask[size_t(t) * I + 1] = 0;
  if (I > 2 && T > 7)
    for (int f = 0; f < F; ++f) cell(7, 2, f) = nan;
  if (I > 3 && T > 8) cell(5, 3, 0) = nan, cell(6, 3, F - 1) = nan, cell(8, 3, 0) = inf;
  if (I > 4)
    for (int t = 0; t < std::min(T, 6); ++t) s.mask[size_t(t) * I + 4] = 0;
  return s;
}

// The reference outputs (T, I, K) in double: RefModel<R> (R = double or float, the recurrent SSD) over each
// instrument's present rows; NaN where absent.
template <typename R>
std::vector<double> stream_reference(const ModelLayout& lay, const std::vector<float>& params, const Stream& s) {
  const ModelConfig& c = lay.cfg;
  const std::vector<R> P(params.begin(), params.end());
  std::vector<double> out(size_t(s.T) * s.I * c.K, std::numeric_limits<double>::quiet_NaN());
  RefModel<R> ref(lay);
  for (int i = 0; i < s.I; ++i) {
    std::vector<R> rows;
    std::vector<int> bars;
    for (int t = 0; t < s.T; ++t) {
      if (!s.present(t, i)) continue;
      bars.push_back(t);
      for (int f = 0; f < s.F; ++f) {
        const float v = s.x[(size_t(t) * s.I + i) * s.F + f];
        rows.push_back(std::isfinite(v) ? R(v) : R(0));
      }
    }
    if (bars.empty()) continue;
    const std::vector<R>& o = ref.forward(P.data(), rows.data(), 1, static_cast<int>(bars.size()));
    for (size_t k = 0; k < bars.size(); ++k)
      for (int j = 0; j < c.K; ++j) out[(size_t(bars[k]) * s.I + i) * c.K + j] = double(o[k * c.K + j]);
  }
  return out;
}

// Where a stream's outputs must be NaN (absent instruments), (T, I, K).
inline std::vector<bool> absent_mask(const Stream& s, int K) {
  std::vector<bool> nan(size_t(s.T) * s.I * K);
  for (int t = 0; t < s.T; ++t)
    for (int i = 0; i < s.I; ++i)
      for (int k = 0; k < K; ++k) nan[(size_t(t) * s.I + i) * K + k] = !s.present(t, i);
  return nan;
}

// Runs every bar of `s` through a stepper (CpuStepper or GpuStepper) from its current state: outputs (T, I, K).
template <class Stepper>
std::vector<float> run_stream(Stepper& st, const Stream& s, int K, int from = 0, int to = -1) {
  if (to < 0) to = s.T;
  std::vector<float> out(size_t(to - from) * s.I * K);
  for (int t = from; t < to; ++t) st.step(s.row(t), s.mask_at(t), out.data() + size_t(t - from) * s.I * K);
  return out;
}

}  // namespace mlalpha::test

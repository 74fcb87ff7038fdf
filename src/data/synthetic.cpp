#include "data/synthetic.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/rng.h"

namespace mlalpha {

void Panel::validate() const {
  require(N >= 1 && T >= 1 && F >= 1 && K >= 1, "panel shape must be positive, got N=" + std::to_string(N) +
                                                    " T=" + std::to_string(T) + " F=" + std::to_string(F) +
                                                    " K=" + std::to_string(K));
  require(x.size() == size_t(N) * T * F, "panel features hold " + std::to_string(x.size()) + " values, expected N*T*F");
  require(y.size() == size_t(N) * T * K, "panel targets hold " + std::to_string(y.size()) + " values, expected N*T*K");
  require(instruments.empty() || instruments.size() == size_t(N), "panel has " + std::to_string(instruments.size()) +
                                                                     " instrument labels for N = " + std::to_string(N));
  require(times.empty() || times.size() == size_t(T),
          "panel has " + std::to_string(times.size()) + " time labels for T = " + std::to_string(T));
  require(time_values.empty() || time_values.size() == size_t(T),
          "panel has " + std::to_string(time_values.size()) + " time values for T = " + std::to_string(T));
  require(feature_names.empty() || feature_names.size() == size_t(F), "panel feature names do not match F");
  require(target_names.empty() || target_names.size() == size_t(K), "panel target names do not match K");
  require(input_rows.empty() || input_rows.size() == size_t(N) * T,
          "panel input rows hold " + std::to_string(input_rows.size()) + " flags, expected N*T");
}

Panel make_synthetic(const SynthParams& p) {
  require(p.N >= 1 && p.T >= 2 && p.F >= 1 && p.K >= 1, "synthetic panel needs N>=1, T>=2, F>=1, K>=1");
  require(p.noise >= 0, "synthetic noise must be >= 0, got " + std::to_string(p.noise));
  Panel out;
  out.N = p.N;
  out.T = p.T;
  out.F = p.F;
  out.K = p.K;
  out.x.resize(size_t(p.N) * p.T * p.F);
  out.y.resize(size_t(p.N) * p.T * p.K);
  // Each instrument draws from its own counter-based stream, so instruments are generated in parallel
  // with the same values as one after another (panels of billions of values: the Alpha158-sized bench).
  float* const xs = out.x.data();
  float* const ys = out.y.data();
  const auto one = [&](int i) {
    HostRng r(p.seed, uint64_t(i));
    float* x = xs + size_t(i) * p.T * p.F;
    for (int t = 0; t < p.T; ++t)
      for (int f = 0; f < p.F; ++f) {
        const double phi = p.F == 1 ? 0.6 : 0.2 + 0.75 * f / (p.F - 1);
        const double prev = t > 0 ? x[size_t(t - 1) * p.F + f] : r.normal();
        x[size_t(t) * p.F + f] = float(phi * prev + std::sqrt(1 - phi * phi) * r.normal());
      }
    if (p.memory > 0) {
      const double alpha = 1.0 / p.memory, s = std::sqrt((2.0 - alpha) / alpha);
      for (int k = 0; k < p.K; ++k) {
        double m = 0;
        for (int t = 0; t < p.T; ++t) {
          m = (1 - alpha) * m + alpha * x[size_t(t) * p.F + k % p.F];
          ys[(size_t(i) * p.T + t) * p.K + k] = float(s * m + p.noise * r.normal());
        }
      }
      return;
    }
    for (int k = 0; k < p.K; ++k) {
      const int a = k % p.F, b = (k + 1) % p.F, c = (k + 2) % p.F;
      double ema = 0;
      for (int t = 0; t < p.T; ++t) {
        ema = 0.8 * ema + 0.2 * x[size_t(t) * p.F + c];
        const double prev_b = t > 0 ? x[size_t(t - 1) * p.F + b] : 0.0;
        const double v = 0.8 * std::tanh(1.5 * ema) + 0.5 * x[size_t(t) * p.F + a] * prev_b + p.noise * r.normal();
        ys[(size_t(i) * p.T + t) * p.K + k] = float(v);
      }
    }
  };
  const size_t work = size_t(p.N) * p.T * (p.F + p.K);
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const int threads = work < (size_t(1) << 22) ? 1 : int(std::min(cores, unsigned(p.N)));
  std::vector<std::thread> pool;
  for (int w = 1; w < threads; ++w)
    pool.emplace_back([&, w] { for (int i = w; i < p.N; i += threads) one(i); });
  for (int i = 0; i < p.N; i += threads) one(i);
  for (auto& th : pool) th.join();
  return out;
}

}  // namespace mlalpha

#include "data/normalize.h"

#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"

namespace mlalpha {
namespace {

// "instrument 3 ('AAPL'), time 17 ('2024-01-05'), feature 2 ('ret_5')": indices always, labels when known.
std::string where(const Panel& p, int i, int t, int f) {
  auto one = [](const char* what, int idx, const std::vector<std::string>& labels) {
    std::string s = std::string(what) + " " + std::to_string(idx);
    if (size_t(idx) < labels.size()) s += " ('" + labels[idx] + "')";
    return s;
  };
  return one("instrument", i, p.instruments) + ", " + one("time", t, p.times) + ", " + one("feature", f, p.feature_names);
}

std::string feature_name(const Panel& p, int f) {
  return "feature " + std::to_string(f) + (size_t(f) < p.feature_names.size() ? " ('" + p.feature_names[f] + "')" : "");
}

// ±Inf anywhere in times [t0, t1) is an error.
void require_no_inf(const Panel& p, int t0, int t1) {
  for (int i = 0; i < p.N; ++i)
    for (int t = t0; t < t1; ++t) {
      const float* x = p.x.data() + (size_t(i) * p.T + t) * p.F;
      for (int f = 0; f < p.F; ++f)
        if (std::isinf(x[f]))
          throw Error(std::string("feature value ") + (x[f] > 0 ? "+inf" : "-inf") + " at " + where(p, i, t, f) +
                      ": features must be finite or NaN");
    }
}

}  // namespace

FeatureStats compute_feature_stats(const Panel& p, int t0, int t1) {
  require(p.F >= 1 && p.x.size() == size_t(p.N) * p.T * p.F, "compute_feature_stats: the panel's features hold " +
                                                                   std::to_string(p.x.size()) + " values, expected N*T*F");
  require(0 <= t0 && t0 < t1 && t1 <= p.T, "compute_feature_stats: training range [" + std::to_string(t0) + ", " +
                                               std::to_string(t1) + ") must be a non-empty part of [0, T=" +
                                               std::to_string(p.T) + ")");
  require_no_inf(p, t0, t1);
  // Two passes in double: the mean, then the squared deviations (no cancellation for large means).
  std::vector<double> sum(p.F, 0.0), sq(p.F, 0.0), lo(p.F, INFINITY), hi(p.F, -INFINITY);
  std::vector<size_t> count(p.F, 0);
  for (int i = 0; i < p.N; ++i)
    for (int t = t0; t < t1; ++t) {
      const float* x = p.x.data() + (size_t(i) * p.T + t) * p.F;
      for (int f = 0; f < p.F; ++f)
        if (!std::isnan(x[f])) {
          sum[f] += x[f];
          ++count[f];
          lo[f] = std::min(lo[f], double(x[f]));
          hi[f] = std::max(hi[f], double(x[f]));
        }
    }
  for (int f = 0; f < p.F; ++f)
    require(count[f] > 0, "compute_feature_stats: " + feature_name(p, f) + " has no value (all NaN) in the training range [" +
                              std::to_string(t0) + ", " + std::to_string(t1) + ")" +
                              (p.times.size() == size_t(p.T) ? " (times '" + p.times[t0] + "' to '" + p.times[t1 - 1] + "')"
                                                            : std::string()) +
                              "; drop it from data.feature_columns or move split.train_end");
  std::vector<double> mean(p.F);
  for (int f = 0; f < p.F; ++f) mean[f] = sum[f] / double(count[f]);
  for (int i = 0; i < p.N; ++i)
    for (int t = t0; t < t1; ++t) {
      const float* x = p.x.data() + (size_t(i) * p.T + t) * p.F;
      for (int f = 0; f < p.F; ++f)
        if (!std::isnan(x[f])) sq[f] += (x[f] - mean[f]) * (x[f] - mean[f]);
    }
  FeatureStats s;
  s.mean.resize(p.F);
  s.stdev.resize(p.F);
  for (int f = 0; f < p.F; ++f) {
    s.mean[f] = float(mean[f]);
    const float sd = float(std::sqrt(sq[f] / double(count[f])));
    // A constant feature (tested exactly: min == max, not "a small stdev", which is a scale choice the
    // user made) only shifts to 0; dividing by its zero stdev would give NaN.
    s.stdev[f] = (lo[f] == hi[f] || !(sd > 0)) ? 1.0f : sd;
  }
  return s;
}

void normalize_features(Panel& p, const FeatureStats& s) {
  require(s.mean.size() == size_t(p.F) && s.stdev.size() == size_t(p.F),
          "normalize_features: stats for " + std::to_string(s.mean.size()) + " means / " + std::to_string(s.stdev.size()) +
              " stdevs, the panel has F = " + std::to_string(p.F) + " features");
  require(p.x.size() == size_t(p.N) * p.T * p.F, "normalize_features: the panel's features hold " +
                                                     std::to_string(p.x.size()) + " values, expected N*T*F");
  for (int f = 0; f < p.F; ++f)
    require(std::isfinite(s.mean[f]) && std::isfinite(s.stdev[f]) && s.stdev[f] > 0,
            "normalize_features: " + feature_name(p, f) + " has mean " + std::to_string(s.mean[f]) + " and stdev " +
                std::to_string(s.stdev[f]) + "; expected a finite mean and a finite stdev > 0");
  require_no_inf(p, 0, p.T);  // before any change, so a failure leaves the panel as it was
  const size_t rows = size_t(p.N) * p.T;
  for (size_t r = 0; r < rows; ++r) {
    float* x = p.x.data() + r * p.F;
    for (int f = 0; f < p.F; ++f) x[f] = std::isnan(x[f]) ? 0.0f : (x[f] - s.mean[f]) / s.stdev[f];
  }
}

}  // namespace mlalpha

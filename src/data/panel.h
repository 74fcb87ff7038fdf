#pragma once
// A panel of market time series: N instruments × T time steps × F features, targets N × T × K, all
// instruments on one shared time axis. NaN targets are allowed (masked out of the loss and metrics);
// NaN features are replaced by the training-split mean before training (docs/data.md).
#include <cstddef>
#include <string>
#include <vector>

namespace mlalpha {

struct Panel {
  int N = 0, T = 0, F = 0, K = 0;
  std::vector<float> x;  // (N, T, F)
  std::vector<float> y;  // (N, T, K)
  // Labels for output alignment; empty means "use indices".
  std::vector<std::string> instruments;  // (N)
  std::vector<std::string> times;        // (T), in chronological order
  std::vector<std::string> feature_names, target_names;  // (F), (K)
  void validate() const;  // shapes agree, sizes positive, label counts match when present
};

// Per-feature statistics of the training split, stored with the model so inference normalises the
// same way: x ← (x − mean) / stdev.
struct FeatureStats {
  std::vector<float> mean;   // (F)
  std::vector<float> stdev;  // (F), > 0
};

}  // namespace mlalpha

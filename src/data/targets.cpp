#include "data/targets.h"

#include <cmath>

#include "core/error.h"

namespace mlalpha {

std::vector<int64_t> count_finite_targets(const Panel& p, int t0, int t1) {
  require(0 <= t0 && t0 < t1 && t1 <= p.T, "count_finite_targets: range [" + std::to_string(t0) + ", " +
                                               std::to_string(t1) + ") is not a non-empty range of T = " +
                                               std::to_string(p.T));
  require(p.y.size() == size_t(p.N) * size_t(p.T) * size_t(p.K), "count_finite_targets: the panel's y has " +
                                                                     std::to_string(p.y.size()) + " values, not N·T·K");
  std::vector<int64_t> count(size_t(p.K), 0);
  for (int i = 0; i < p.N; ++i)
    for (int t = t0; t < t1; ++t) {
      const float* y = p.y.data() + (size_t(i) * p.T + t) * p.K;  // (K)
      for (int k = 0; k < p.K; ++k) count[k] += std::isfinite(y[k]) ? 1 : 0;
    }
  return count;
}

void require_valid_targets(const Panel& p, int t0, int t1, const std::string& what, const std::string& source) {
  const std::vector<int64_t> count = count_finite_targets(p, t0, t1);
  for (int k = 0; k < p.K; ++k) {
    if (count[k] > 0) continue;
    std::string range = what + " [" + std::to_string(t0) + ", " + std::to_string(t1) + ")";
    if (p.times.size() == size_t(p.T)) range += " (times '" + p.times[t0] + "' to '" + p.times[t1 - 1] + "')";
    const std::string target = k < int(p.target_names.size()) ? "target '" + p.target_names[k] + "' (target " +
                                                                     std::to_string(k + 1) + " of " + std::to_string(p.K) + ")"
                                                               : "target " + std::to_string(k + 1) + " of " + std::to_string(p.K);
    const int64_t values = int64_t(p.N) * (t1 - t0);
    throw Error(range + " has no finite value of " + target + (source.empty() ? "" : " in " + source) + ": all " +
                std::to_string(values) + (values == 1 ? " value there is NaN" : " values there are NaN") +
                "; check the label columns (data.target_columns; a forward-looking target is NaN where its horizon runs past "
                "the data) or move the split (split.train_end, split.valid_end)");
  }
}

}  // namespace mlalpha

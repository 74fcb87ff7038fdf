#pragma once
// A walk-forward member's validation blocks of every fold, placed one after another on a time axis of their own
// (blocks overlap in time when split.walk_forward_valid_size exceeds the test size) and scored as one range: the
// pooled validation a walk-forward population's leaderboard ranks by, which no test block has influenced.
#include <vector>

#include "data/panel.h"
#include "mlalpha/metrics.h"

namespace mlalpha {

class ValidPool {
 public:
  // pred (N, T, K) of `targets`' shape: the fold's best weights' predictions, used over s's validation range.
  void add(const Panel& targets, const Split& s, const std::vector<float>& pred);
  bool any() const { return !blocks_.empty(); }
  // The metrics of the blocks pooled (no training-mean baseline: mse_mean is NaN).
  MetricsResult score(int quantiles, double periods_per_year) const;

 private:
  struct Block {
    int len = 0;
    std::vector<float> pred, y;  // (N, len, K)
  };
  int N_ = 0, K_ = 0;
  std::vector<Block> blocks_;
};

}  // namespace mlalpha

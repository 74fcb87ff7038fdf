#pragma once
// The pooled out-of-sample predictions of a walk-forward run: each fold's test block, predicted by that fold's
// best weights, copied into one (N, T, K) array; the fold of each time step is remembered.
#include <climits>
#include <filesystem>
#include <vector>

#include "data/panel.h"
#include "eval/folds.h"
#include "mlalpha/config.h"
#include "run/folds.h"

namespace mlalpha {

class OosPool {
 public:
  OosPool(const Panel& p, const RunConfig& cfg);
  // pred (N, T, K): the fold's predictions, used over its test block.
  void add(const FoldPlan& plan, const std::vector<float>& pred);
  bool any() const { return t0_ < t1_; }
  // Writes <prefix>.csv / .npy and scores the pooled predictions; mse_mean uses each time step's own
  // fold's training mean.
  OosSummary write(const std::filesystem::path& prefix) const;

 private:
  const Panel& p_;
  const RunConfig& cfg_;
  std::vector<float> pred_;   // (N, T, K)
  std::vector<int> fold_;     // (T): the fold whose test block holds t; -1 outside every test block
  std::vector<double> base_;  // (T, K): that fold's training mean
  int t0_ = INT_MAX, t1_ = 0;  // the pooled range [first test step, last test end)
};

}  // namespace mlalpha

#pragma once
// The mean of several models' predictions (N, T, K), as a population's mean-ensemble forms it
// (docs/populations.md): each element summed in double over the models in the order they are added, then
// divided by their count and rounded once to float. A NaN from any model makes that element NaN.
#include <cstddef>
#include <vector>

#include "core/error.h"

namespace mlalpha {

class PredictionMean {
 public:
  void add(const std::vector<float>& pred) {  // (N, T, K)
    if (count_ == 0) sum_.assign(pred.size(), 0.0);
    require(pred.size() == sum_.size(), "ensemble: a member predicts " + std::to_string(pred.size()) +
                                            " values, the first " + std::to_string(sum_.size()));
    for (size_t i = 0; i < pred.size(); ++i) sum_[i] += double(pred[i]);
    ++count_;
  }
  bool empty() const { return count_ == 0; }
  std::vector<float> mean() const {  // (N, T, K); empty when nothing was added
    std::vector<float> out(sum_.size());
    for (size_t i = 0; i < out.size(); ++i) out[i] = float(sum_[i] / double(count_));
    return out;
  }

 private:
  std::vector<double> sum_;  // (N, T, K)
  size_t count_ = 0;
};

}  // namespace mlalpha

#pragma once
// A panel of market time series: N instruments × T time steps × F features, targets N × T × K.
// NaN targets are allowed (masked out of the loss); features must be finite.
#include <cstddef>
#include <vector>

namespace mlalpha {

struct Panel {
  int N = 0, T = 0, F = 0, K = 0;
  std::vector<float> x;  // (N, T, F)
  std::vector<float> y;  // (N, T, K)
  void validate() const;  // shapes agree, sizes positive
};

}  // namespace mlalpha

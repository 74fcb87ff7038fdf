// One bar processed as a panel's date (stream_bar.h).
#include "predict/stream_bar.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "core/error.h"
#include "data/normalize.h"

namespace mlalpha {

BarProcessor::BarProcessor(const DataConfig& data, const FeatureStats& stats, int F, int instruments)
    : data_(data), stats_(stats), F_(F), I_(instruments), ffill_(data.nan_fill == "ffill") {
  check_preprocessing(data_);
  require(F >= 1 && instruments >= 1, "stream: F and the instrument count must be >= 1");
  // The targets play no part: prepare_panel processes them per date, here a column of NaN.
  data_.target_norm = "none";
  last_.assign(size_t(I_) * F_, std::numeric_limits<float>::quiet_NaN());
  day_.N = I_ + 1, day_.T = 1, day_.F = F_, day_.K = 1;
  day_.y.assign(size_t(I_ + 1), std::numeric_limits<float>::quiet_NaN());
}

void BarProcessor::process(const float* raw, const uint8_t* present, float* out, float* fill) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  day_.x.assign(size_t(I_ + 1) * F_, nan);
  float* x = day_.x.data();
  for (int i = 0; i < I_; ++i) {
    float* row = x + size_t(i) * F_;
    float* last = last_.data() + size_t(i) * F_;
    if (present[i]) std::copy_n(raw + size_t(i) * F_, F_, row);
    if (!ffill_) continue;
    // Step 1, nan_fill = ffill: a NaN takes the instrument's last observed value (normalize.cpp, forward_fill).
    for (int f = 0; f < F_; ++f) {
      if (std::isnan(row[f])) row[f] = last[f];
      else last[f] = row[f];
    }
  }
  prepare_panel(day_, data_, stats_, 1);
  std::copy_n(x, size_t(I_) * F_, out);
  std::copy_n(x + size_t(I_) * F_, F_, fill);
}

void BarProcessor::set_last_values(std::vector<float> v) {
  require(v.size() == size_t(I_) * F_, "stream: the forward-fill state holds " + std::to_string(v.size()) +
                                           " values, expected instruments x features = " +
                                           std::to_string(size_t(I_) * F_));
  for (float f : v) require(!std::isinf(f), "stream: the forward-fill state holds an infinite value");
  last_ = std::move(v);
}

void BarProcessor::reset(std::span<const int> which) {
  for (int i : which) std::fill_n(last_.begin() + ptrdiff_t(i) * F_, F_, std::numeric_limits<float>::quiet_NaN());
}

void BarProcessor::remap(std::span<const int> from) {
  std::vector<float> next(from.size() * F_, std::numeric_limits<float>::quiet_NaN());
  for (size_t j = 0; j < from.size(); ++j)
    if (from[j] >= 0) std::copy_n(last_.begin() + ptrdiff_t(from[j]) * F_, F_, next.begin() + ptrdiff_t(j) * F_);
  I_ = int(from.size());
  last_ = std::move(next);
  day_.N = I_ + 1;
  day_.y.assign(size_t(I_ + 1), std::numeric_limits<float>::quiet_NaN());
}

}  // namespace mlalpha

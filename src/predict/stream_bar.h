#pragma once
// One bar of raw rows processed as `prepared()` processes that date of a panel (data/normalize.h, steps 1 to 3:
// the forward fill from the state, the per-date or global normalisation, the fill), for the streaming predictor.
// The date's rows go through prepare_panel itself, as a panel of one time step, so a streamed row is bitwise the
// row a panel of the whole history would hold: per-date processing reads only that date, global statistics are
// the checkpoint's, and the forward-fill state is the last observed value of each (instrument, feature).
#include <cstdint>
#include <span>
#include <vector>

#include "data/panel.h"

namespace mlalpha {

class BarProcessor {
 public:
  BarProcessor(const DataConfig& data, const FeatureStats& stats, int F, int instruments);

  int instruments() const { return I_; }
  // raw (I, F) → out (I, F); present (I): 0 where the instrument has no row at this bar (its raw values are
  // then ignored: it enters the date as a missing row). fill (F) receives what a missing row of an instrument
  // without any earlier value becomes at this date (0, or the date's mean under nan_fill = mean). Advances the
  // forward-fill state. Rows must hold no ±Inf (the caller refuses them first).
  void process(const float* raw, const uint8_t* present, float* out, float* fill);

  // The forward-fill state: (I, F) the last observed raw value of each instrument and feature (NaN: none yet).
  const std::vector<float>& last_values() const { return last_; }
  void set_last_values(std::vector<float> v);  // (I, F)
  void reset(std::span<const int> which);       // those instruments forget their last values
  void remap(std::span<const int> from);        // instrument j ← from[j] (−1: none yet)

 private:
  DataConfig data_;
  FeatureStats stats_;
  int F_, I_;
  bool ffill_;
  std::vector<float> last_;  // (I, F)
  Panel day_;                // (I + 1, 1, F): the bar's rows and, last, a row without any value (for `fill`)
};

}  // namespace mlalpha

#pragma once
// Per-feature normalisation with statistics of the training time range only (no look-ahead), and the NaN
// feature rule (docs/data.md):
//   1. mean and stdev of each feature over all instruments and the training times [t0, t1), NaN ignored;
//      population stdev (divide by the count); a feature constant over that range gets stdev 1
//   2. x ← (x − mean) / stdev over the whole panel
//   3. NaN features ← 0, which is the training mean: a missing value carries no signal
// Features must otherwise be finite: ±Inf is an error naming the instrument, time and feature.
#include "data/panel.h"

namespace mlalpha {

// Errors: a range outside [0, T) or empty, ±Inf in the range, a feature with no value in the range.
FeatureStats compute_feature_stats(const Panel& panel, int t0, int t1);

// Applies the stats in place. Checks everything before changing anything: on error the panel is unchanged.
void normalize_features(Panel& panel, const FeatureStats& stats);

}  // namespace mlalpha

#pragma once
// What the model sees of a panel (docs/data.md, "Normalisation"), set by the [data] keys feature_norm,
// robust_clip, target_norm and nan_fill. In this order:
//   1. nan_fill = ffill: a NaN feature ← the last observed value of the same instrument and feature at an
//      earlier time of the given panel (it stays NaN before the first observation)
//   2. feature_norm, NaN staying NaN:
//        global  x ← (x − mean_f) / stdev_f with statistics of the training range (FeatureStats):
//                mean and population stdev over all instruments and training times, NaN ignored; a
//                feature constant there gets stdev 1; one with no value there is an error
//        zscore  per date t, over the n instruments with a value: (x − mean_t) / std_t, population std
//        rank    per date: 2·(r − 1) / (n − 1) − 1 with r the 1-based rank (ties get their average rank),
//                so the smallest value is −1, the largest +1, the median 0
//        robust  per date: clip((x − median_t) / (1.4826 · MAD_t), ±robust_clip), MAD_t = median |x − median_t|;
//                when MAD_t = 0 (more than half the values equal) the scale is 1.2533 · mean |x − median_t|
//      A per-date mode maps the values of a date with fewer than 2 values, or with all values equal, to 0.
//   3. each NaN left ← 0 (nan_fill = zero or ffill), or ← the mean of the date's processed values of that
//      feature (nan_fill = mean; 0 at a date without any)
//   4. target_norm = zscore | rank: each target per date as in 2; NaN targets stay NaN (masked)
// Features must otherwise be finite: ±Inf is an error naming the instrument, time and feature.
//
// Large panels: the work is split into contiguous blocks of instruments or dates, one thread each
// (`threads`; 0: the hardware's). Every value is computed by one thread with the same arithmetic in the
// same order whatever the split, so the result is bitwise the same for any thread count.
#include <cstdint>
#include <vector>

#include "data/panel.h"

namespace mlalpha {

// Refuses unknown mode names and a robust_clip that is not > 0, naming the key (data.feature_norm ...).
void check_preprocessing(const DataConfig& d);

// The global statistics of features over times [t0, t1); with `ffill`, of the forward-filled values
// (the fill looks back to time 0, before t0). Errors: a range outside [0, T) or empty, ±Inf in [0, t1),
// a feature with no value in the range.
FeatureStats compute_feature_stats(const Panel& panel, int t0, int t1, bool ffill = false, int threads = 0);

// Steps 1 to 4 in place. `stats` is used (and required, (F) each) only for feature_norm = global.
// Checks everything before changing anything: on error the panel is unchanged.
void prepare_panel(Panel& panel, const DataConfig& d, const FeatureStats& stats, int threads = 0);

// The default processing (global statistics, NaN → 0), in place.
void normalize_features(Panel& panel, const FeatureStats& stats, int threads = 0);

// One date's values of one feature or target over the instruments, step 2 of a per-date mode in place.
enum class CrossNorm { zscore, rank, robust };
struct CrossScratch {  // reused between calls: no allocation per date once grown
  std::vector<int> valid;
  std::vector<double> sorted;
  std::vector<uint64_t> keys;
};
void cross_normalize(float* v /* (n) */, int n, CrossNorm kind, float clip, CrossScratch& scratch);

}  // namespace mlalpha

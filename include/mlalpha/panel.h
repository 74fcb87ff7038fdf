#pragma once
// A panel of market time series and what a run does with it before training: load it as the data
// settings say, split its time axis, slice and normalise it (docs/data.md).
//
// N instruments × T time steps × F features, targets N × T × K, all instruments on one shared time axis.
// NaN targets are allowed (masked out of the loss and metrics); NaN features are filled before training
// (data.nan_fill).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "mlalpha/config_types.h"
#include "mlalpha/error.h"
#include "mlalpha/float_values.h"

namespace mlalpha {

struct Panel {
  int N = 0, T = 0, F = 0, K = 0;
  FloatValues x;  // (N, T, F), owned or borrowed (a memory-mapped file, a NumPy array)
  FloatValues y;  // (N, T, K)
  // Labels for output alignment; empty means "use indices".
  std::vector<std::string> instruments;  // (N)
  std::vector<std::string> times;        // (T), in chronological order, spelled as in the file
  // (T) the times as numbers, for ordering, date splits and the periods per year: seconds since
  // 1970-01-01T00:00:00Z for dates and datetimes, the value itself for numeric times. Empty when the
  // panel has no time labels or they are not parsed.
  std::vector<double> time_values;
  bool times_are_dates = false;  // time_values are seconds since the epoch (not plain numbers)
  std::string time_format;       // the data.time_format the times were read with ("": numbers or ISO 8601)
  std::vector<std::string> feature_names, target_names;  // (F), (K)
  // (N, T) or empty: what the raw input held at each (instrument, time), kept by prepared() because its fill
  // hides it (a missing row and a row of NaN features both read as the fill afterwards): kRowFeatures when some
  // feature was finite, kRowTargets when some target was. Empty: a raw panel, read from x and y (input_row).
  std::vector<uint8_t> input_rows;

  void validate() const;  // shapes agree, sizes positive, label counts match when present
};

// The bits of Panel::input_rows.
constexpr uint8_t kRowFeatures = 1, kRowTargets = 2;
// What the raw input held at (instrument i, time t): Panel::input_rows when set, else from x and y (NaN =
// missing). 0: the row was missing (docs/data.md: all features and targets NaN), so `observed` is 0.
uint8_t input_row(const Panel& p, int i, int t);

// Per-feature statistics of the training split, stored with the model so inference normalises the
// same way: x ← (x − mean) / stdev (data.feature_norm = "global"; the per-date modes fit nothing).
struct FeatureStats {
  std::vector<float> mean;   // (F)
  std::vector<float> stdev;  // (F), > 0
  // (K), > 0, or empty: data.target_scale = "std" trains on y / target_scale[k] and multiplies the
  // predictions back (scale_targets / unscale_predictions).
  std::vector<float> target_scale;
};

// Reads the panel's time labels (numbers, ISO 8601, or `time_format`) into time_values / times_are_dates,
// for panels built in memory (the CSV reader does it itself). Labels that are not all readable leave
// time_values empty (plain labels); readable ones must be strictly increasing, or this throws naming the
// first pair out of order.
void parse_panel_times(Panel& p, const std::string& time_format = "");

// Time labels read as the CSV reader reads them (numbers, ISO 8601, or `time_format`; docs/data.md, "Time
// axis"), in any order: their values (seconds since the epoch for dates) and whether they are dates. A label
// that is neither, or labels mixing numbers and dates, throw an Error that starts with `what` and names the
// label and the data.time_format that would read it (a two-digit year that wraps, too).
struct TimeValues {
  std::vector<double> values;
  bool are_dates = false;
};
TimeValues parse_times(const std::vector<std::string>& labels, const std::string& time_format, const std::string& what);

// Time steps per year implied by the time axis when the times are dates; NaN otherwise (then the periods
// per year must come from a setting). Over a span of at least a quarter of a year it counts steps: (T − 1)
// over the span in years, so business-daily data gives ~252-261 (weekends and holidays are no steps);
// over a shorter span, 365.25 days over the median spacing (docs/data.md).
double periods_per_year(const Panel& p);

// The panel the data settings describe (synthetic, .npy or CSV), validated. Errors name the file, line
// and setting.
Panel load_panel(const DataConfig& d);
// The splits of a run: one, or split.walk_forward_folds consecutive folds (fold 0 the earliest).
std::vector<Split> make_splits(const SplitConfig& s, const Panel& p);
// Time steps [t0, t1) of every instrument, labels included.
Panel slice_panel(const Panel& p, int t0, int t1);
// Statistics of the features over the time range [t0, t1) (docs/data.md gives the rules).
FeatureStats feature_stats(const Panel& p, int t0, int t1);
// A copy of p normalised with `stats` (NaN features → 0, docs/data.md).
Panel normalized(const Panel& p, const FeatureStats& stats);
// What a run fits on the training range [t0, t1) for the data settings `d`: the global statistics when
// d.feature_norm = "global" (of the forward-filled values when d.nan_fill = "ffill"), none (empty) for
// the per-date modes.
// With d.target_scale = "std", also each target's population standard deviation over [t0, t1) (finite
// values; a target constant there is an error naming it).
FeatureStats fit_feature_stats(const Panel& p, const DataConfig& d, int t0, int t1);
// data.target_scale: p's targets divided by stats.target_scale (nothing when it is empty), in place.
void scale_targets(Panel& p, const FeatureStats& stats);
// The inverse for predictions (N, T, K) of a panel of K targets: multiplied by stats.target_scale.
void unscale_predictions(std::vector<float>& pred, int K, const FeatureStats& stats);
// A copy of p as the model sees it under the data settings `d` (feature_norm, robust_clip, target_norm,
// nan_fill; docs/data.md, "Normalisation"): features normalised and filled, targets processed. Training,
// validation, eval and predict all go through this, so metrics are on the processed targets and
// predictions are in their units. Multi-threaded; the result does not depend on the thread count.
Panel prepared(const Panel& p, const DataConfig& d, const FeatureStats& stats);
// Refuses a time range in which some target has no finite value: `what` names the range ("the training
// range"), `source` where the targets came from ("data.csv = 'd.csv'"; may be empty).
void require_finite_targets(const Panel& p, int t0, int t1, const std::string& what, const std::string& source = "");
// A 64-bit fingerprint of the panel's shape, values and labels: a resume checks that it continues on the
// data the checkpoint was trained on.
uint64_t panel_fingerprint(const Panel& p);
// Writes a panel as features.npy / targets.npy and/or a long-format panel.csv (time, instrument, f0..,
// y0..) into `dir` (created when missing), each file atomically. format: npy | csv | both. A file of that name
// already there is refused (naming it) unless `overwrite`. Returns the paths written.
std::vector<std::string> write_panel_files(const Panel& p, const std::string& dir, const std::string& format,
                                           bool overwrite = false);

}  // namespace mlalpha

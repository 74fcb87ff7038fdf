#pragma once
// Chronological train / validation / test splits on the panel's time axis (docs/data.md). All instruments
// share the time axis, so a split is three half-open time-index ranges:
//   train [train_begin, train_end)  ·gap·  valid [valid_begin, valid_end)  ·gap·  test [test_begin, test_end)
// The gap drops time steps from the start of the following range, so targets that look ahead (a 5-day
// forward return needs gap >= 4) cannot leak from one range into the next.
#include <cstdint>
#include <string>
#include <vector>

#include "mlalpha/config_types.h"  // SplitPoint, SplitSpec, Split

namespace mlalpha {

// The time axis as a time split point reads it (from a Panel: its times, time_values, times_are_dates and
// time_format).
struct SplitTimes {
  std::vector<std::string> labels;  // (T) as spelled in the data; empty: no labels (a time point is an error)
  std::vector<double> values;       // (T) the parsed labels, ascending; empty: parsed here (data/time_axis.h)
  bool are_dates = false;           // values are seconds since the epoch
  std::string format;               // data.time_format ("" = numbers or ISO 8601)
};

// The time index a point stands for on an axis of T steps. A time point is read with the axis' rules (a
// number on a numeric axis; ISO 8601, or data.time_format when set, on a date axis) and is the first step
// at or after it. `field` names the point in messages ("split.train_end").
int resolve_split_point(const SplitPoint& point, int T, const SplitTimes& times, const std::string& field);
int resolve_split_point(const SplitPoint& point, int T, const std::vector<std::string>& times, const std::string& field);

// Resolves and checks a spec: train and valid non-empty, test non-empty unless valid_end is T (then there
// is no test range: [T, T)). Errors name the fields and the resolved indices (and, for time points, the
// axis' first and last time).
Split make_split(const SplitSpec& spec, int T, const SplitTimes& times);
Split make_split(const SplitSpec& spec, int T, const std::vector<std::string>& times = {});

// Checks the invariants of any split on an axis of T steps (one loaded from a checkpoint, a fold):
// 0 <= train_begin < train_end <= valid_begin < valid_end <= test_begin <= test_end <= T.
void validate_split(const Split& s, int T);

// Walk-forward evaluation: `folds` consecutive folds whose test blocks tile the end of the time axis
// (the last fold's test block ends at T), each preceded by its gap, its valid block, a gap and its train
// range. Fold k+1 is fold k shifted by test_size steps later.
struct WalkForwardSpec {
  int folds = 5;
  int test_size = 0;   // steps per test block; 0: (T − 2·gap) / (folds + 2)
  int valid_size = 0;  // steps per valid block; 0: test_size
  int train_size = 0;  // 0: expanding window (every train range starts at 0); > 0: rolling window of this length
  int gap = 0;
};

std::vector<Split> walk_forward(int T, const WalkForwardSpec& spec);

}  // namespace mlalpha

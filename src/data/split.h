#pragma once
// Chronological train / validation / test splits on the panel's time axis (docs/data.md). All instruments
// share the time axis, so a split is three half-open time-index ranges:
//   train [train_begin, train_end)  ·gap·  valid [valid_begin, valid_end)  ·gap·  test [test_begin, test_end)
// The gap drops time steps from the start of the following range, so targets that look ahead (a 5-day
// forward return needs gap >= 4) cannot leak from one range into the next.
#include <cstdint>
#include <string>
#include <vector>

namespace mlalpha {

// One boundary on the time axis, in one of three units. In a TOML config: a float is a fraction, an integer
// an index, a string a time value (train_end = 0.7 | 1500 | "2020-01-01").
struct SplitPoint {
  enum class Kind { fraction, index, time };
  Kind kind = Kind::fraction;
  double fraction = 0;  // kind fraction: in [0, 1]; the boundary index is round(fraction · T)
  int64_t index = 0;    // kind index: a time index in [0, T]
  std::string time;     // kind time: the boundary is the first time step whose label is >= this value
                        // (numeric comparison when this value and every time label are numbers)

  static SplitPoint at_fraction(double f);
  static SplitPoint at_index(int64_t i);
  static SplitPoint at_time(std::string t);
  std::string to_string() const;  // "fraction 0.7", "index 1500", "time '2020-01-01'"
};

struct SplitSpec {
  SplitPoint train_end = SplitPoint::at_fraction(0.7);   // train is [0, train_end)
  SplitPoint valid_end = SplitPoint::at_fraction(0.85);  // valid is [train_end + gap, valid_end)
  int gap = 0;                                           // test is [valid_end + gap, T)
};

struct Split {
  int train_begin = 0, train_end = 0, valid_begin = 0, valid_end = 0, test_begin = 0, test_end = 0;
  bool has_test() const { return test_end > test_begin; }
  std::string to_string() const;  // "train [0, 700) valid [705, 850) test [855, 1000)"
};

// The time index a point stands for on an axis of T steps with these labels (empty: no labels, so a
// time point is an error). `field` names the point in messages ("split.train_end").
int resolve_split_point(const SplitPoint& point, int T, const std::vector<std::string>& times, const std::string& field);

// Resolves and checks a spec: train and valid non-empty, test non-empty unless valid_end is T (then there
// is no test range: [T, T)). Errors name the fields and the resolved indices.
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

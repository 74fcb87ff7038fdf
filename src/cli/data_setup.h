#pragma once
// From a run config to panels ready for training and evaluation: load (synthetic / npy / csv), split
// chronologically (or walk-forward), normalise with training-range statistics.
#include <vector>

#include "cli/run_config.h"
#include "data/panel.h"
#include "data/split.h"

namespace mlalpha {

Panel load_panel(const DataConfig& d);
// The splits of a run: one, or walk_forward_folds consecutive folds.
std::vector<Split> make_splits(const SplitConfig& s, const Panel& p);
// Time steps [t0, t1) of every instrument, labels included.
Panel slice_panel(const Panel& p, int t0, int t1);
// A copy of p normalised with `stats` (NaN features → 0, docs/data.md).
Panel normalized(const Panel& p, const FeatureStats& stats);

}  // namespace mlalpha

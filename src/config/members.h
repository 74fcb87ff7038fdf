#pragma once
// The members a run configuration describes (DESIGN section 7, docs/config.md "Populations"): E models of
// one architecture trained together — seeds (train.models), optimiser sweeps ([sweep]) and, with run.parallel_folds, walk-forward
// folds. A member is everything that may differ between models of one step: its training settings (seed,
// lr, weight decay, clip, warm-up) and the training panel it samples. Its result is bitwise what the same
// model trained alone would be; members never exchange data.
#include <string>
#include <utility>
#include <vector>

#include "mlalpha/config.h"

namespace mlalpha {

struct MemberSpec {
  int index = 0;       // position in the population, 0-based
  std::string name;    // "member-03": its folder (under the fold's folder for walk-forward runs); the same in
                       // every fold, numbered within a fold
  TrainConfig train;   // its training settings: the run's, with the seed and the swept values set, models = 1
  int fold = 0;        // the walk-forward fold whose ranges it trains and validates on
  // What sets it apart, in the order the population varies it: {"lr", "0.0003"}, {"seed", "3"}.
  std::vector<std::pair<std::string, std::string>> settings;
};

// The members of a run: the product of the [sweep] lists (lr outermost, then weight_decay, clip, warmup),
// each with train.models seeds train.seed + r (r innermost), and, when `folds` > 1 and run.parallel_folds,
// each of those once per fold (fold outermost). One member (the run's own settings) when nothing is swept,
// train.models = 1 and the folds run in turn. Throws Error naming the setting on an invalid sweep.
std::vector<MemberSpec> expand_population(const RunConfig& cfg, int folds);

// True when the run trains a population: train.models > 1, a non-empty [sweep], or walk-forward folds
// trained together (run.parallel_folds with split.walk_forward_folds > 1).
bool is_population(const RunConfig& cfg);

}  // namespace mlalpha

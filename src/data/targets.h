#pragma once
// Checks that a time range of a panel holds targets to learn from or score against. A range whose
// targets are all NaN (a label column that is empty, mis-named upstream or shifted past the data) trains
// nothing and gives NaN metrics; these checks turn that into an error before any work is done.
#include <cstdint>
#include <string>
#include <vector>

#include "data/panel.h"

namespace mlalpha {

// Finite target values of each target k over every instrument and the time steps [t0, t1): (K) counts.
std::vector<int64_t> count_finite_targets(const Panel& p, int t0, int t1);

// Throws unless every target has at least one finite value in [t0, t1). `what` names the range ("the
// training range", "the validation range of fold 2"); `source` names where the targets came from
// ("data.targets = 'y.npy'", "data.csv = 'd.csv'"; empty: not named). The message gives the range, its
// time labels when the panel has them, the target's name and its count of values, e.g.
//   the training range [0, 700) (times '1' to '700') has no finite value of target 'fwd_ret' (target 1 of
//   2) in data.csv = 'd.csv': all 11200 values there are NaN; check the label columns
void require_valid_targets(const Panel& p, int t0, int t1, const std::string& what, const std::string& source = "");

}  // namespace mlalpha

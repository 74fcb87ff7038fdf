#pragma once
// Populations (DESIGN section 7, docs/config.md "Populations"): E models of one architecture trained
// together — seeds (train.models), optimiser sweeps ([sweep]) and, with run.parallel_folds, walk-forward
// folds. A member is everything that may differ between models of one step: its training settings (seed,
// lr, weight decay, clip, warm-up) and the training panel it samples. Its result is bitwise what the same
// model trained alone would be; members never exchange data.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "data/panel.h"
#include "mlalpha/config.h"
#include "mlalpha/run.h"
#include "train/checkpoint.h"
#include "train/predict.h"

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

// The population's trainers behind one interface, for the run loop. Members step together; a frozen
// member (its early stop) keeps its weights and counters from then on while the others go on.
class PopulationBackend {
 public:
  virtual ~PopulationBackend() = default;
  virtual const char* name() const = 0;  // "gpu" | "cpu"
  virtual int members() const = 0;
  // One step of every member that is not frozen.
  virtual void step() = 0;
  // The record of member m's step s (1-based; every step since the last read of that member is kept).
  virtual TrainPoint point(int m, int64_t s) = 0;
  // Member m's predictions (N, T, K) for spec's range with its live weights, or with `params` when non-null.
  virtual std::vector<float> predict(int m, const Panel& p, const PredictSpec& spec, const std::vector<float>* params) = 0;
  virtual TrainState state(int m) = 0;
  // Member m continues from `s` (a resume; before its first step).
  virtual void load_state(int m, const TrainState& s) = 0;
  // Member m takes no more steps: its weights, moments and counters stay as they are now.
  virtual void freeze(int m) = 0;
};

// train[m] (member m's training panel, already prepared and sliced; members of one fold pass the same panel,
// which a GPU backend then holds once). Validates every member against its panel and, on the GPU, refuses
// a population whose memory does not fit, saying how many members would.
std::unique_ptr<PopulationBackend> make_population_backend(const RunConfig& cfg, const std::vector<MemberSpec>& members,
                                                           const std::vector<const Panel*>& train);

}  // namespace mlalpha

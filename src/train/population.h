#pragma once
// The population's trainers behind one interface, for the run loop (src/train/population_backends.h has the
// GPU and CPU implementations).
#include <memory>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "config/members.h"
#include "data/panel.h"
#include "mlalpha/records.h"
#include "predict/predict.h"

namespace mlalpha {

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

#pragma once
// One interface over the CPU and GPU trainers for the commands: step, read step records, predict with
// the live or given weights, export/import state.
#include <memory>
#include <vector>

#include "cli/run_config.h"
#include "data/panel.h"
#include "train/checkpoint.h"
#include "train/predict.h"
#include "train/report.h"

namespace mlalpha {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;
  virtual void step() = 0;
  // The record of step s (the CPU backend keeps the last steps since the previous read).
  virtual TrainPoint point(int64_t s) = 0;
  // Predictions (N, T, K) for spec's range with the live weights, or with `params` when non-null.
  virtual std::vector<float> predict(const Panel& p, const PredictSpec& spec, const std::vector<float>* params) = 0;
  virtual TrainState state() = 0;
  virtual void load_state(const TrainState& s) = 0;
};

// "gpu" when run.device is gpu, or auto with a GPU present; else "cpu". `train` is the training panel.
std::unique_ptr<Backend> make_backend(const RunConfig& cfg, const Panel& train);
// Predictions with given weights on the configured device, for eval / predict.
std::vector<float> predict_with(const RunConfig& cfg, const ModelLayout& layout, const std::vector<float>& params,
                                const Panel& p, const PredictSpec& spec);

}  // namespace mlalpha

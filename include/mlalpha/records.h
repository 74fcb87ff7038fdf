#pragma once
// The records a training run keeps of its steps and validations: what the JSONL log, the progress display,
// the run's events and its results carry.
#include <cstdint>

#include "mlalpha/metrics.h"

namespace mlalpha {

// One training step as the reporters see it.
struct TrainPoint {
  int64_t step = 0;  // 1-based
  double loss = 0, lr = 0, grad_norm = 0;
  bool skipped = false;  // non-finite gradient: nothing was updated, the loss is left out of the mean
};

struct Evaluation {
  int64_t step = 0;
  MetricsResult metrics;
  double value = 0;   // metrics.mean's run.metric
  bool best = false;  // a new best: best.safetensors was written
};

}  // namespace mlalpha

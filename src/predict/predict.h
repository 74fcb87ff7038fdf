#pragma once
// Predictions over a time range of a (normalised) panel, aligned with (instrument, time).
// The model is applied to windows of the training length L, exactly as it was trained: each window
// starts from a zero state, and only positions at or after `burn_in` inside a window are kept (a window
// that starts at the first time step keeps every position: there is no earlier history to warm up on).
// Windows advance by L − burn_in, so every time step in range gets exactly one prediction.
#include <cstdint>
#include <vector>

#include "core/context.h"
#include "data/panel.h"
#include "model/layout.h"

namespace mlalpha {

struct PredictSpec {
  int L = 64;        // window length (the training L)
  int burn_in = 0;   // leading positions of a window whose predictions are dropped
  int B = 16;        // windows per forward pass
  int t0 = 0, t1 = 0;  // half-open time range to predict
};

// One window: instrument, first time step, and the time steps [keep_from, keep_to) it predicts.
struct PredictWindow {
  int instrument, start, keep_from, keep_to;
};
std::vector<PredictWindow> plan_windows(const Panel& panel, const PredictSpec& spec);

// Predictions (N, T, K) with NaN outside [t0, t1). params (table.total()) on the host.
std::vector<float> predict_cpu(const ModelLayout& layout, const std::vector<float>& params, const Panel& panel,
                               const PredictSpec& spec);
// The same on the GPU; params (table.total()) in device memory (e.g. the trainer's arena). Runs on
// ctx's stream and synchronises once at the end.
std::vector<float> predict_gpu(Context& ctx, const ModelLayout& layout, const float* params_dev, const Panel& panel,
                               const PredictSpec& spec, Precision precision);
// The same with params (table.total()) on the host: uploaded to the device first.
std::vector<float> predict_gpu(Context& ctx, const ModelLayout& layout, const std::vector<float>& params,
                               const Panel& panel, const PredictSpec& spec, Precision precision);

// Predictions with given weights on `device` (auto | cpu | gpu), for eval / predict.
std::vector<float> predict_with(const std::string& device, Precision precision, const ModelLayout& layout,
                                const std::vector<float>& params, const Panel& p, const PredictSpec& spec);

}  // namespace mlalpha

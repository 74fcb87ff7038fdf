#pragma once
// Predictions of several weight sets of one architecture on one panel (an ensemble's members, or a single model),
// with one model object and one loaded panel: on the GPU one GpuModel, one Context and one upload of the panel's
// features, each member's weights uploaded into the same buffer in turn; on the CPU one fast CPU model (its threads
// and inference buffers). Each member's predictions are bitwise those of predict_with on its own (the same kernels
// on the same shapes; tests/cpu/test_ensemble.cpp, tests/gpu/test_predict_gpu.cpp).
#include <memory>
#include <vector>

#include "data/panel.h"
#include "mlalpha/compute.h"
#include "mlalpha/ensemble.h"
#include "mlalpha/model.h"
#include "model/layout.h"
#include "predict/window_plan.h"

namespace mlalpha {

// What a session built and loaded (tests read it: an ensemble of E members builds one model and loads one panel).
struct PredictStats {
  int models_built = 0;   // GPU models (or fast CPU models) constructed
  int panels_loaded = 0;  // prepared panels loaded (on the GPU: uploads of the features)
};

class PredictSession {
 public:
  // Predictions of models of `mc`, trained with `tc` (its seq_len and batch size the windows and tiles).
  PredictSession(const Compute& compute, const ModelConfig& mc, const TrainConfig& tc, PredictStats* stats = nullptr);
  ~PredictSession();
  PredictSession(const PredictSession&) = delete;
  PredictSession& operator=(const PredictSession&) = delete;

  // The prepared panel the next predictions read, for dates in `range` as `mode` says; kept by reference (it must
  // outlive the calls of predict), uploaded once on the GPU.
  void load(const Panel& prepared, TimeRange range, PredictMode mode);
  // (N, T, K) of the loaded panel with `params` (table.total()), NaN outside the range; in the units of the
  // processed targets before data.target_scale is inverted (the caller's, per model).
  std::vector<float> predict(const std::vector<float>& params);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The GPU side of a session (GPU code: predict_session_gpu.cpp; a CPU-only build refuses it, predict_nogpu.cpp): one
// context, one model of B windows of L rows and the loaded panel's features on the device, kept while weight sets
// are predicted in turn.
class SessionGpu {
 public:
  virtual ~SessionGpu() = default;
  // Uploads source's features x (N, T, F); builds the model when (B, L) changed, and says whether it built one.
  virtual bool load(const Panel& source, int B, int L) = 0;
  // The plan on the loaded features with params (table.total()) on the host: predict_gpu's (N, T, K).
  virtual std::vector<float> predict(const std::vector<float>& params, const Panel& source, const WindowPlan& plan) = 0;
};
std::unique_ptr<SessionGpu> make_session_gpu(const ModelLayout& layout, Precision precision);

// Ensemble::predict with what its session built and loaded counted in `stats` (when not null); `first_norm`
// receives member 0's prepared panel when not null (Ensemble::evaluate scores against it).
std::vector<float> predict_ensemble(const Ensemble& ensemble, const Panel& raw, TimeRange range, const Compute& compute,
                                    PredictMode mode, Panel* first_norm = nullptr, PredictStats* stats = nullptr);

}  // namespace mlalpha

// One model object and one loaded panel for several weight sets (predict_session.h).
#include "predict/predict_session.h"

#include <limits>

#include "core/error.h"
#include "model/model_cpu.h"
#include "predict/predict.h"

namespace mlalpha {

struct PredictSession::Impl {
  Compute compute;
  ModelLayout layout;  // the models keep a reference to it: Impl lives on the heap and never moves
  TrainConfig tc;
  PredictStats* stats = nullptr;

  // The loaded panel: what the plan reads (`source`: the prepared panel, or carry's compacted copy of it).
  const Panel* prepared = nullptr;
  PredictMode mode = PredictMode::window;
  CarryInput carry;
  WindowPlan plan;
  const Panel* source = nullptr;
  int B = 0;  // windows per tile

  std::unique_ptr<cpu::CpuModel> cpu_model;  // the fast CPU model (the reference is made per call: it holds nothing)
  std::unique_ptr<SessionGpu> gpu;           // GPU: its context, model, the features and buffers

  Impl(const Compute& c, const ModelConfig& mc, const TrainConfig& t, PredictStats* s)
      : compute(c), layout(mc), tc(t), stats(s) {}
  void count(int PredictStats::*field) {
    if (stats) ++(stats->*field);
  }
};

PredictSession::PredictSession(const Compute& compute, const ModelConfig& mc, const TrainConfig& tc, PredictStats* stats)
    : impl_(std::make_unique<Impl>(compute, mc, tc, stats)) {}
PredictSession::~PredictSession() = default;

void PredictSession::load(const Panel& p, TimeRange range, PredictMode mode) {
  Impl& s = *impl_;
  require(p.F == s.layout.cfg.F && p.K == s.layout.cfg.K,
          "predict: the data has F = " + std::to_string(p.F) + ", K = " + std::to_string(p.K) +
              " but the model expects F = " + std::to_string(s.layout.cfg.F) + ", K = " + std::to_string(s.layout.cfg.K));
  s.prepared = &p;
  s.mode = mode;
  if (mode == PredictMode::carry) {
    s.carry = carry_input(p, range.t0, range.t1);
    s.plan = s.carry.plan;
    s.source = &s.carry.compact;
  } else {
    s.carry = {};
    s.plan = date_windows(p.N, p.T, s.tc.L, range.t0, range.t1);
    s.source = &p;
  }
  s.count(&PredictStats::panels_loaded);
  if (s.plan.windows.empty()) return;  // nothing to predict: no model, no upload
  const int B = mode == PredictMode::carry ? carry_prediction_tile(s.tc, p.N, s.plan.L)
                                            : prediction_tile(s.tc, p.N, s.plan.L);
  if (!s.compute.gpu()) {
    if (!s.compute.reference() && !s.cpu_model) {
      s.cpu_model = std::make_unique<cpu::CpuModel>(s.layout, cpu::CpuOptions{.threads = s.compute.threads()});
      s.count(&PredictStats::models_built);
    }
    s.B = B;
    return;
  }
  if (!s.gpu) s.gpu = make_session_gpu(s.layout, s.compute.precision());
  if (s.gpu->load(*s.source, B, s.plan.L)) s.count(&PredictStats::models_built);
  s.B = B;
}

std::vector<float> PredictSession::predict(const std::vector<float>& params) {
  Impl& s = *impl_;
  require(s.prepared != nullptr, "PredictSession::predict: no panel loaded");
  require(params.size() == s.layout.table.total(), "predict: parameter arena has the wrong size");
  std::vector<float> got;
  if (s.plan.windows.empty()) {
    if (s.mode == PredictMode::carry) return carry_output(s.carry, got, *s.prepared);
    const Panel& p = *s.prepared;
    return std::vector<float>(size_t(p.N) * p.T * p.K, std::numeric_limits<float>::quiet_NaN());
  }
  if (!s.compute.gpu()) {
    got = s.cpu_model ? predict_cpu(*s.cpu_model, params, *s.source, s.plan, s.B)
                      : predict_cpu(s.layout, params, *s.source, s.plan, s.B, s.compute);
  } else {
    got = s.gpu->predict(params, *s.source, s.plan);
  }
  return s.mode == PredictMode::carry ? carry_output(s.carry, got, *s.prepared) : got;
}

}  // namespace mlalpha

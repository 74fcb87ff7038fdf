// Predictions by a window plan on the CPU (predict.h), and the choice of device; the GPU's are predict_gpu.cpp.
#include "predict/predict.h"

#include <algorithm>
#include <limits>

#include "core/error.h"
#include "model/model_cpu.h"
#include "model/model_ref.h"

namespace mlalpha {

void check_panel(const ModelLayout& lay, int F, int K) {
  require(F == lay.cfg.F && K == lay.cfg.K, "predict: the data has F = " + std::to_string(F) + ", K = " +
                                                std::to_string(K) + " but the model expects F = " +
                                                std::to_string(lay.cfg.F) + ", K = " + std::to_string(lay.cfg.K));
}

namespace {

// The plan's windows B at a time through forward(xb (B, L, F)) → out (B, L, K), the kept rows scattered.
template <typename Forward>
std::vector<float> run_windows(const ModelLayout& lay, const std::vector<float>& params, const Panel& p,
                               const WindowPlan& plan, int B, Forward&& forward) {
  check_panel(lay, p.F, p.K);
  check_plan(plan);
  require(plan.N == p.N && plan.T == p.T, "predict: the plan reads a panel of " + std::to_string(plan.N) + " × " +
                                              std::to_string(plan.T) + ", the data is " + std::to_string(p.N) + " × " +
                                              std::to_string(p.T));
  require(params.size() == lay.table.total(), "predict: parameter arena has the wrong size");
  require(B >= 1, "predict: the batch must hold at least one window");
  const int L = plan.L;
  const auto& windows = plan.windows;
  std::vector<float> pred(size_t(p.N) * p.T * p.K, std::numeric_limits<float>::quiet_NaN());
  std::vector<float> xb(std::min(windows.size(), size_t(B)) * L * p.F);
  for (size_t w0 = 0; w0 < windows.size(); w0 += size_t(B)) {
    const size_t nb = std::min(windows.size() - w0, size_t(B));  // a short last tile runs its windows only
    for (size_t b = 0; b < nb; ++b) {
      const PlanWindow& w = windows[w0 + b];
      const float* src = p.x.data() + (size_t(w.instrument) * p.T + w.start) * p.F;
      std::copy_n(src, size_t(L) * p.F, xb.begin() + b * L * p.F);
    }
    const float* out = forward(xb.data(), int(nb), L);
    for (size_t b = 0; b < nb; ++b) {
      const PlanWindow& w = windows[w0 + b];
      for (int t = w.keep_from; t < w.keep_to; ++t)
        for (int k = 0; k < p.K; ++k)
          pred[(size_t(w.instrument) * p.T + t) * p.K + k] = out[(b * L + (t - w.start)) * p.K + k];
    }
  }
  return pred;
}

}  // namespace

std::vector<float> predict_cpu(cpu::CpuModel& model, const std::vector<float>& params, const Panel& p,
                               const WindowPlan& plan, int B) {
  std::vector<float> out;
  return run_windows(model.layout(), params, p, plan, B, [&](const float* xb, int b, int L) {
    out.resize(size_t(b) * L * p.K);
    model.infer(params.data(), xb, b, L, out.data());
    return out.data();
  });
}

std::vector<float> predict_cpu(const ModelLayout& lay, const std::vector<float>& params, const Panel& p,
                               const WindowPlan& plan, int B, const Compute& compute) {
  if (compute.reference()) {
    RefModel<float> model(lay);
    return run_windows(lay, params, p, plan, B, [&](const float* xb, int b, int L) {
      return model.forward(params.data(), xb, b, L).data();
    });
  }
  check_panel(lay, p.F, p.K);  // before the model's threads start
  cpu::CpuModel model(lay, {.threads = compute.threads()});
  return predict_cpu(model, params, p, plan, B);
}

int prediction_tile(const TrainConfig& tc, int N, int L) {
  require(L >= 1, "prediction_tile: L must be >= 1");
  return std::max(tc.windows_per_step(N), (kPredictTileRows + L - 1) / L);
}

double carry_tile_rows(const TrainConfig& tc, int N) {
  return std::max(double(tc.windows_per_step(N)) * tc.L, double(kPredictTileRows));
}

int carry_prediction_tile(const TrainConfig& tc, int N, int L) {
  require(L >= 1, "carry_prediction_tile: L must be >= 1");
  return std::max(1, int(carry_tile_rows(tc, N) / L));
}

CarryInput carry_input(const Panel& p, int t0, int t1) {
  require(0 <= t0 && t0 <= t1 && t1 <= p.T, "predict: time range [" + std::to_string(t0) + ", " + std::to_string(t1) +
                                                ") is not inside [0, " + std::to_string(p.T) + ")");
  CarryInput in;
  // rows[i]: instrument i's present time steps up to t1 (later rows cannot reach a kept output).
  in.rows.resize(size_t(p.N));
  int longest = 0;
  for (int i = 0; i < p.N; ++i) {
    for (int t = 0; t < t1; ++t)
      if (input_row(p, i, t) & kRowFeatures) in.rows[size_t(i)].push_back(t);
    longest = std::max(longest, int(in.rows[size_t(i)].size()));
  }
  if (longest == 0) return in;
  // The compacted panel: instrument i's present rows at [0, n_i), zeros after; window i keeps the rows whose
  // time lies in [t0, t1).
  Panel& c = in.compact;
  c.N = p.N, c.T = longest, c.F = p.F, c.K = p.K;
  c.x.assign(size_t(c.N) * c.T * c.F, 0.0f);
  c.y.assign(size_t(c.N) * c.T * c.K, std::numeric_limits<float>::quiet_NaN());
  WindowPlan& plan = in.plan;
  plan.N = c.N, plan.T = c.T, plan.L = c.T, plan.t0 = 0, plan.t1 = c.T;
  for (int i = 0; i < p.N; ++i) {
    const std::vector<int>& r = in.rows[size_t(i)];
    for (size_t j = 0; j < r.size(); ++j)
      std::copy_n(p.x.data() + (size_t(i) * p.T + r[j]) * p.F, p.F, c.x.data() + (size_t(i) * c.T + j) * c.F);
    const int from = int(std::lower_bound(r.begin(), r.end(), t0) - r.begin());
    if (from < int(r.size())) plan.windows.push_back({i, 0, from, int(r.size())});
  }
  return in;
}

std::vector<float> carry_output(const CarryInput& in, const std::vector<float>& got, const Panel& p) {
  std::vector<float> pred(size_t(p.N) * p.T * p.K, std::numeric_limits<float>::quiet_NaN());
  const Panel& c = in.compact;
  for (const PlanWindow& w : in.plan.windows)
    for (int j = w.keep_from; j < w.keep_to; ++j)
      std::copy_n(got.data() + (size_t(w.instrument) * c.T + j) * p.K, p.K,
                  pred.data() + (size_t(w.instrument) * p.T + in.rows[size_t(w.instrument)][size_t(j)]) * p.K);
  return pred;
}

std::vector<float> predict_carry(const Compute& compute, const ModelLayout& layout, const std::vector<float>& params,
                                 const Panel& p, int t0, int t1, const TrainConfig& tc) {
  check_panel(layout, p.F, p.K);
  const CarryInput in = carry_input(p, t0, t1);
  if (in.plan.windows.empty()) return carry_output(in, {}, p);
  const std::vector<float> got =
      predict_with(compute, layout, params, in.compact, in.plan, carry_prediction_tile(tc, p.N, in.plan.L));
  return carry_output(in, got, p);
}

std::vector<float> predict_with(const Compute& compute, const ModelLayout& layout, const std::vector<float>& params,
                                const Panel& p, const WindowPlan& plan, int B) {
  if (!compute.gpu()) return predict_cpu(layout, params, p, plan, B, compute);
  return predict_gpu(layout, params, p, plan, B, compute.precision());
}

}  // namespace mlalpha

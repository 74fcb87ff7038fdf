#include "predict/predict.h"

#include <algorithm>
#include <limits>

#include "core/device.h"
#include "core/error.h"
#include "model/model_gpu.h"
#include "model/model_ref.h"
#include "ops/cast/cast.h"

namespace mlalpha {

std::vector<PredictWindow> plan_windows(const Panel& p, const PredictSpec& s) {
  require(s.L >= 1 && s.L <= p.T, "predict: window length L = " + std::to_string(s.L) + " must be in [1, T = " +
                                      std::to_string(p.T) + "]");
  require(s.burn_in >= 0 && s.burn_in < s.L, "predict: burn_in must be in [0, L)");
  require(s.t0 >= 0 && s.t0 <= s.t1 && s.t1 <= p.T, "predict: time range [" + std::to_string(s.t0) + ", " +
                                                         std::to_string(s.t1) + ") is not inside [0, " +
                                                         std::to_string(p.T) + ")");
  std::vector<PredictWindow> out;
  for (int i = 0; i < p.N; ++i)
    for (int t = s.t0; t < s.t1;) {
      // The window whose kept part starts at t: it starts burn_in steps earlier (clamped to the panel) and
      // keeps up to L − burn_in steps.
      int start = t - s.burn_in;
      if (start < 0) start = 0;
      if (start + s.L > p.T) start = p.T - s.L;
      const int keep_from = start == 0 ? t : std::max(t, start + s.burn_in);
      const int keep_to = std::min(s.t1, start + s.L);
      out.push_back({i, start, keep_from, keep_to});
      t = keep_to;
    }
  return out;
}

namespace {

// Runs `forward(xb) -> out (B, L, K)` over batches of windows and scatters the kept positions.
template <typename Forward>
std::vector<float> run_windows(const Panel& p, const PredictSpec& s, Forward&& forward) {
  const auto windows = plan_windows(p, s);
  std::vector<float> pred(size_t(p.N) * p.T * p.K, std::numeric_limits<float>::quiet_NaN());
  std::vector<float> xb(size_t(s.B) * s.L * p.F);
  for (size_t w0 = 0; w0 < windows.size(); w0 += size_t(s.B)) {
    const size_t nb = std::min(windows.size() - w0, size_t(s.B));
    for (size_t b = 0; b < size_t(s.B); ++b) {  // a short last batch repeats its last window
      const PredictWindow& w = windows[w0 + std::min(b, nb - 1)];
      const float* src = p.x.data() + (size_t(w.instrument) * p.T + w.start) * p.F;
      std::copy_n(src, size_t(s.L) * p.F, xb.begin() + b * s.L * p.F);
    }
    const std::vector<float>& out = forward(xb);
    for (size_t b = 0; b < nb; ++b) {
      const PredictWindow& w = windows[w0 + b];
      for (int t = w.keep_from; t < w.keep_to; ++t)
        for (int k = 0; k < p.K; ++k)
          pred[(size_t(w.instrument) * p.T + t) * p.K + k] = out[(b * s.L + (t - w.start)) * p.K + k];
    }
  }
  return pred;
}

void check_panel(const ModelLayout& lay, const Panel& p) {
  require(p.F == lay.cfg.F && p.K == lay.cfg.K, "predict: the data has F = " + std::to_string(p.F) + ", K = " +
                                                    std::to_string(p.K) + " but the model expects F = " +
                                                    std::to_string(lay.cfg.F) + ", K = " + std::to_string(lay.cfg.K));
}

}  // namespace

std::vector<float> predict_cpu(const ModelLayout& lay, const std::vector<float>& params, const Panel& p,
                               const PredictSpec& s) {
  check_panel(lay, p);
  require(params.size() == lay.table.total(), "predict: parameter arena has the wrong size");
  RefModel<float> model(lay);
  return run_windows(p, s, [&](const std::vector<float>& xb) -> const std::vector<float>& {
    return model.forward(params.data(), xb.data(), s.B, s.L);
  });
}

std::vector<float> predict_gpu(Context& ctx, const ModelLayout& lay, const float* params_dev, const Panel& p,
                               const PredictSpec& s, Precision precision) {
  check_panel(lay, p);
  GpuModel model(ctx, lay, s.B, s.L, precision);
  DeviceBuffer<float> xdev(size_t(s.B) * s.L * p.F);
  // BF16: the weights' bf16 copy the model's GEMMs read, made once (the trainer's optimizer keeps its own).
  DeviceBuffer<__nv_bfloat16> params16(precision == Precision::BF16 ? lay.table.total() : 0);
  if (params16.size()) gpu::cast_bf16(params_dev, params16.data(), params16.size(), ctx.stream());
  std::vector<float> out(size_t(s.B) * s.L * p.K);
  return run_windows(p, s, [&](const std::vector<float>& xb) -> const std::vector<float>& {
    MLALPHA_CUDA_CHECK(cudaMemcpyAsync(xdev.data(), xb.data(), xb.size() * sizeof(float), cudaMemcpyHostToDevice,
                                       ctx.stream()));
    model.forward(params_dev, xdev.data(), params16.size() ? params16.data() : nullptr);
    MLALPHA_CUDA_CHECK(cudaMemcpyAsync(out.data(), model.out(), out.size() * sizeof(float), cudaMemcpyDeviceToHost,
                                       ctx.stream()));
    ctx.synchronize();
    return out;
  });
}

std::vector<float> predict_gpu(Context& ctx, const ModelLayout& lay, const std::vector<float>& params, const Panel& p,
                               const PredictSpec& s, Precision precision) {
  DeviceBuffer<float> d(params.size());
  d.upload(params);
  return predict_gpu(ctx, lay, d.data(), p, s, precision);
}

std::vector<float> predict_with(const std::string& device, Precision precision, const ModelLayout& layout,
                                const std::vector<float>& params, const Panel& p, const PredictSpec& spec) {
  if (!use_gpu(device)) return predict_cpu(layout, params, p, spec);
  Context ctx(0);
  return predict_gpu(ctx, layout, params, p, spec, precision);
}

}  // namespace mlalpha

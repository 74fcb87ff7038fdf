// The GPU's parts of a stream's engines (stream_engine.h): the carry engine's GpuStepper, the window engine's
// model, weights and buffers on the device, and the stream's context.
#include <cuda_bf16.h>

#include "core/context.h"
#include "core/device_buffer.h"
#include "model/model_gpu.h"
#include "model/model_step_gpu.h"
#include "ops/cast/cast.h"
#include "predict/predict_gpu.h"
#include "predict/stream_engine.h"

namespace mlalpha {

namespace {

// The model of `tile` windows of C rows and the weights (and their bf16 copy), on the device once; each bar
// uploads its windows and runs the prediction path `predict` uses (predict_gpu).
class GpuWindowRunner : public WindowRunner {
 public:
  GpuWindowRunner(const StreamEngineSpec& s, int tile)
      : ctx_(*s.ctx), lay_(*s.layout), model_(ctx_, lay_, tile, s.train.L, s.compute.precision(), ModelUse::kForward),
        dparams_(s.params->size()), xb_(size_t(tile) * s.train.L * s.layout->cfg.F) {
    dparams_.upload(*s.params);
    if (s.compute.precision() == Precision::BF16) {
      dparams16_ = DeviceBuffer<__nv_bfloat16>(s.params->size());
      gpu::cast_bf16(dparams_.data(), dparams16_.data(), s.params->size(), ctx_.stream());
    }
  }
  std::vector<float> run(const Panel& w, const WindowPlan& plan) override {
    if (dx_.size() < w.x.size()) dx_ = DeviceBuffer<float>(w.x.size());
    dx_.upload(w.x.data(), w.x.size());
    return predict_gpu(ctx_, lay_, model_, xb_.data(), dparams_.data(), dparams16_.size() ? dparams16_.data() : nullptr,
                       {dx_.data(), w.N, w.T, w.F}, plan, buffers_);
  }

 private:
  Context& ctx_;
  const ModelLayout& lay_;
  GpuModel model_;
  DeviceBuffer<float> dparams_;  // (table.total())
  DeviceBuffer<float> xb_;       // (tile, C, F)
  DeviceBuffer<float> dx_;       // (N, C, F): this bar's windows
  DeviceBuffer<__nv_bfloat16> dparams16_;  // (table.total()), bf16 only
  PlanBuffers buffers_;
};

}  // namespace

std::unique_ptr<WindowRunner> make_gpu_window_runner(const StreamEngineSpec& s, int tile) {
  return std::make_unique<GpuWindowRunner>(s, tile);
}

std::unique_ptr<Stepper> make_gpu_stepper(const StreamEngineSpec& s) {
  return std::make_unique<GpuStepper>(*s.ctx, *s.layout, *s.params, s.instruments);
}

std::shared_ptr<Context> make_gpu_context() { return std::make_shared<Context>(0); }

}  // namespace mlalpha

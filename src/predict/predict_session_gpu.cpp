// The GPU side of a PredictSession (predict_session.h): one context, one model, the loaded features and the
// current weights on the device.
#include <cuda_bf16.h>

#include <memory>

#include "core/context.h"
#include "core/device_buffer.h"
#include "model/model_gpu.h"
#include "ops/cast/cast.h"
#include "predict/predict_gpu.h"
#include "predict/predict_session.h"

namespace mlalpha {

namespace {

class DeviceSession : public SessionGpu {
 public:
  DeviceSession(const ModelLayout& layout, Precision precision) : ctx_(0), layout_(layout), precision_(precision) {}

  bool load(const Panel& source, int B, int L) override {
    bool built = false;
    if (!model_ || model_->B() != B || model_->L() != L) {
      model_ = std::make_unique<GpuModel>(ctx_, layout_, B, L, precision_, ModelUse::kForward);
      xb_ = DeviceBuffer<float>(size_t(B) * L * source.F);
      built = true;
    }
    x_ = DeviceBuffer<float>(source.x.size());
    x_.upload(source.x.data(), source.x.size());
    return built;
  }

  std::vector<float> predict(const std::vector<float>& params, const Panel& source, const WindowPlan& plan) override {
    if (params_.size() != params.size()) params_ = DeviceBuffer<float>(params.size());
    params_.upload(params);
    // bf16: the weights' copy the model's GEMMs read, made once per weight set.
    if (precision_ == Precision::BF16) {
      if (params16_.size() != params.size()) params16_ = DeviceBuffer<__nv_bfloat16>(params.size());
      gpu::cast_bf16(params_.data(), params16_.data(), params16_.size(), ctx_.stream());
    }
    return predict_gpu(ctx_, layout_, *model_, xb_.data(), params_.data(), params16_.size() ? params16_.data() : nullptr,
                       {x_.data(), source.N, source.T, source.F}, plan, buffers_);
  }

 private:
  Context ctx_;
  const ModelLayout& layout_;  // the session's, which outlives this
  Precision precision_;
  std::unique_ptr<GpuModel> model_;          // of (B, L)
  DeviceBuffer<float> x_;                    // (N, T, F): the source's features
  DeviceBuffer<float> xb_;                   // (B, L, F): the gathered windows
  DeviceBuffer<float> params_;               // (table.total()): the current weights
  DeviceBuffer<__nv_bfloat16> params16_;     // (table.total()) with bf16: their copy the GEMMs read
  PlanBuffers buffers_;
};

}  // namespace

std::unique_ptr<SessionGpu> make_session_gpu(const ModelLayout& layout, Precision precision) {
  return std::make_unique<DeviceSession>(layout, precision);
}

}  // namespace mlalpha

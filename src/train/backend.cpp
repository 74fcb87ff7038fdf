#include "train/backend.h"

#include <map>

#include "core/context.h"
#include "train/trainer_cpu.h"
#include "train/trainer_gpu.h"

namespace mlalpha {

namespace {

TrainPoint to_point(const StepRecord& r) { return {r.step, r.loss, r.lr, r.grad_norm, r.skipped != 0}; }

class CpuBackend : public Backend {
 public:
  CpuBackend(const RunConfig& c, const Panel& train) : tr_(c.model, c.train, train) {}
  const char* name() const override { return "cpu"; }
  void step() override {
    const StepRecord s = tr_.step();
    recent_[s.step] = to_point(s);
  }
  TrainPoint point(int64_t s) override {
    auto it = recent_.find(s);
    require(it != recent_.end(), "no record of step " + std::to_string(s));
    const TrainPoint p = it->second;
    recent_.erase(recent_.begin(), std::next(it));
    return p;
  }
  std::vector<float> predict(const Panel& p, const PredictSpec& spec, const std::vector<float>* params) override {
    return predict_cpu(tr_.layout(), params ? *params : tr_.params(), p, spec);
  }
  TrainState state() override { return tr_.state(); }
  void load_state(const TrainState& s) override { tr_.load_state(s); }

 private:
  CpuTrainer tr_;
  std::map<int64_t, TrainPoint> recent_;
};

class GpuBackend : public Backend {
 public:
  GpuBackend(const RunConfig& c, const Panel& train)
      : ctx_(0), tr_(ctx_, c.model, c.train, train, {c.run.graph, 0}), precision_(c.train.precision) {}
  const char* name() const override { return "gpu"; }
  void step() override { tr_.step(); }
  TrainPoint point(int64_t s) override {
    return to_point(tr_.record(s));
  }
  std::vector<float> predict(const Panel& p, const PredictSpec& spec, const std::vector<float>* params) override {
    if (!params) return predict_gpu(ctx_, tr_.layout(), tr_.device_params(), p, spec, precision_);
    return predict_gpu(ctx_, tr_.layout(), *params, p, spec, precision_);
  }
  TrainState state() override { return tr_.state(); }
  void load_state(const TrainState& s) override { tr_.load_state(s); }

 private:
  Context ctx_;
  GpuTrainer tr_;
  Precision precision_;
};

}  // namespace

bool use_gpu(const std::string& device) {
  require(device == "auto" || device == "cpu" || device == "gpu",
          "run.device must be 'auto', 'cpu' or 'gpu', got '" + device + "'");
  if (device == "cpu") return false;
  const int gpus = cuda_device_count();
  require(device != "gpu" || gpus > 0, "run.device = 'gpu' but no CUDA device was found (use 'auto' or 'cpu')");
  return gpus > 0;
}

std::unique_ptr<Backend> make_backend(const RunConfig& cfg, const Panel& train) {
  if (use_gpu(cfg.run.device)) return std::make_unique<GpuBackend>(cfg, train);
  return std::make_unique<CpuBackend>(cfg, train);
}

std::vector<float> predict_with(const std::string& device, Precision precision, const ModelLayout& layout,
                                const std::vector<float>& params, const Panel& p, const PredictSpec& spec) {
  if (!use_gpu(device)) return predict_cpu(layout, params, p, spec);
  Context ctx(0);
  return predict_gpu(ctx, layout, params, p, spec, precision);
}

}  // namespace mlalpha

// The carry and window engines of a stream (stream_engine.h).
#include "predict/stream_engine.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "model/model_cpu.h"
#include "model/model_step.h"
#include "predict/predict.h"

namespace mlalpha {

namespace {

// The array `name` of `file` with exactly this shape, or an Error naming what differs.
const LoadedTensor& array_of(const SafetensorsFile& file, const std::string& name, const std::vector<int64_t>& shape) {
  const LoadedTensor* t = file.find(name);
  require(t != nullptr, file.path + ": no array '" + name + "' (a state file of another mode or model)");
  require(t->shape == shape, file.path + ": array '" + name + "' has shape " + shape_string(t->shape) + ", expected " +
                                 shape_string(shape) + " (a state file of another model)");
  return *t;
}

// ---- carry: the recurrent state ----

class CarryEngine : public StreamEngine {
 public:
  explicit CarryEngine(const StreamEngineSpec& s) : lay_(*s.layout) {
    if (s.ctx)
      stepper_ = make_gpu_stepper(s);
    else
      stepper_ = std::make_unique<CpuStepper>(lay_, *s.params, s.instruments,
                                              CpuStepperOptions{s.compute.threads(), s.compute.reference(), s.pool});
  }
  void bar(const float* x, const uint8_t* present, const float*, const int*, int64_t, float* out) override {
    stepper_->step(x, present, out);
  }
  void reset(std::span<const int> which) override { stepper_->reset(which); }
  void remap(std::span<const int> from, int64_t) override { stepper_->remap(from); }
  std::vector<LoadedTensor> state(const std::string& prefix, int64_t) const override {
    StepState s = stepper_->export_state();
    return {{prefix + "conv", {s.layers, s.instruments, s.conv_rows, s.conv_dim}, std::move(s.conv)},
            {prefix + "ssm", {s.layers, s.instruments, s.heads, s.head_dim, s.d_state}, std::move(s.ssm)}};
  }
  void check(const SafetensorsFile& file, const std::string& prefix, int instruments) const override {
    read(file, prefix, instruments).check(lay_.cfg);
  }
  void restore(const SafetensorsFile& file, const std::string& prefix, int instruments, int64_t) override {
    stepper_->import_state(read(file, prefix, instruments));
  }

 private:
  StepState read(const SafetensorsFile& file, const std::string& prefix, int instruments) const {
    StepState s = StepState::zeros(lay_.cfg, instruments);
    s.conv = array_of(file, prefix + "conv", {s.layers, s.instruments, s.conv_rows, s.conv_dim}).data;
    s.ssm = array_of(file, prefix + "ssm", {s.layers, s.instruments, s.heads, s.head_dim, s.d_state}).data;
    return s;
  }

  const ModelLayout& lay_;
  std::unique_ptr<Stepper> stepper_;  // CpuStepper, or the GPU's
};

// ---- window: the last C processed rows ----

// Rows of bar b sit in slot b mod C of each instrument's (C, F) ring; the fill of bar b in the fill ring's slot.
class WindowEngine : public StreamEngine {
 public:
  explicit WindowEngine(const StreamEngineSpec& s)
      : lay_(*s.layout), params_(*s.params), C_(s.train.L), F_(s.layout->cfg.F), K_(s.layout->cfg.K),
        I_(s.instruments), tile_(prediction_tile(s.train, s.instruments, s.train.L)), compute_(s.compute) {
    require(C_ >= 1, "stream: train.seq_len must be >= 1");
    // The CPU's model is made once (its threads and inference buffers serve every bar); the reference is made
    // per bar by predict_cpu (it holds nothing worth keeping).
    if (s.ctx) gpu_ = make_gpu_window_runner(s, tile_);
    else if (!compute_.reference())
      cpu_model_ = std::make_unique<cpu::CpuModel>(lay_, cpu::CpuOptions{.threads = compute_.threads(), .pool = s.pool});
    ring_.assign(size_t(I_) * C_ * F_, 0.0f);
    fill_.assign(size_t(C_) * F_, 0.0f);
  }

  void bar(const float* x, const uint8_t* present, const float* fill, const int* history, int64_t bar,
           float* out) override {
    const size_t slot = size_t(bar % C_);
    for (int i = 0; i < I_; ++i) std::copy_n(x + size_t(i) * F_, F_, row(i, slot));
    std::copy_n(fill, F_, fill_.begin() + ptrdiff_t(slot) * F_);
    // The present instruments' windows: instrument i's last history[i] rows, oldest first, at the start of a
    // window of C rows (zeros after: the model is causal), keeping the row of this bar.
    std::vector<int> who;
    for (int i = 0; i < I_; ++i)
      if (present[i]) who.push_back(i);
    std::fill_n(out, size_t(I_) * K_, std::numeric_limits<float>::quiet_NaN());
    if (who.empty()) return;
    Panel w;
    w.N = int(who.size()), w.T = C_, w.F = F_, w.K = K_;
    w.x.assign(size_t(w.N) * C_ * F_, 0.0f);
    w.y.assign(size_t(w.N) * C_ * K_, std::numeric_limits<float>::quiet_NaN());
    WindowPlan plan;
    plan.N = w.N, plan.T = C_, plan.L = C_, plan.t0 = 0, plan.t1 = C_;
    for (int j = 0; j < w.N; ++j) {
      const int i = who[size_t(j)], h = history[i];
      require(h >= 1 && h <= C_, "stream: instrument " + std::to_string(i) + " has " + std::to_string(h) +
                                     " rows of history, expected 1 to " + std::to_string(C_));
      for (int q = 0; q < h; ++q)
        std::copy_n(row(i, size_t((bar - h + 1 + q) % C_)), F_, w.x.data() + (size_t(j) * C_ + q) * F_);
      plan.windows.push_back({j, 0, h - 1, h});
    }
    const std::vector<float> pred = gpu_ ? gpu_->run(w, plan) : run_cpu(w, plan);
    for (int j = 0; j < w.N; ++j)
      std::copy_n(pred.data() + (size_t(j) * C_ + history[who[size_t(j)]] - 1) * K_, K_,
                  out + size_t(who[size_t(j)]) * K_);
  }

  void reset(std::span<const int>) override {}  // the history counts (the predictor's) say which rows count

  void remap(std::span<const int> from, int64_t bars) override {
    std::vector<float> next(from.size() * size_t(C_) * F_, 0.0f);
    for (size_t j = 0; j < from.size(); ++j) {
      float* dst = next.data() + j * size_t(C_) * F_;
      if (from[j] >= 0) std::copy_n(row(from[j], 0), size_t(C_) * F_, dst);
      else std::copy(fill_.begin(), fill_.end(), dst);  // a new instrument's past bars: missing rows
    }
    (void)bars;
    ring_ = std::move(next);
    I_ = int(from.size());
  }

  // Rows in time order: logical row k is bar bars − C + k (zeros before the first bar).
  std::vector<LoadedTensor> state(const std::string& prefix, int64_t bars) const override {
    LoadedTensor ring{prefix + "window", {I_, C_, F_}, std::vector<float>(size_t(I_) * C_ * F_, 0.0f)};
    LoadedTensor fill{prefix + "window_fill", {C_, F_}, std::vector<float>(size_t(C_) * F_, 0.0f)};
    for (int k = 0; k < C_; ++k) {
      const int64_t b = bars - C_ + k;
      if (b < 0) continue;
      const size_t slot = size_t(b % C_);
      for (int i = 0; i < I_; ++i) std::copy_n(row(i, slot), F_, ring.data.data() + (size_t(i) * C_ + k) * F_);
      std::copy_n(fill_.begin() + ptrdiff_t(slot) * F_, F_, fill.data.begin() + ptrdiff_t(k) * F_);
    }
    return {std::move(ring), std::move(fill)};
  }

  void check(const SafetensorsFile& file, const std::string& prefix, int instruments) const override {
    const LoadedTensor& ring = array_of(file, prefix + "window", {instruments, C_, F_});
    const LoadedTensor& fill = array_of(file, prefix + "window_fill", {C_, F_});
    for (const LoadedTensor* t : {&ring, &fill})
      for (float v : t->data) require(std::isfinite(v), file.path + ": array '" + t->name + "' holds a non-finite value");
  }
  void restore(const SafetensorsFile& file, const std::string& prefix, int instruments, int64_t bars) override {
    const LoadedTensor& ring = *file.find(prefix + "window");
    const LoadedTensor& fill = *file.find(prefix + "window_fill");
    I_ = instruments;
    ring_.assign(size_t(I_) * C_ * F_, 0.0f);
    fill_.assign(size_t(C_) * F_, 0.0f);
    for (int k = 0; k < C_; ++k) {
      const int64_t b = bars - C_ + k;
      if (b < 0) continue;
      const size_t slot = size_t(b % C_);
      for (int i = 0; i < I_; ++i) std::copy_n(ring.data.data() + (size_t(i) * C_ + k) * F_, F_, row(i, slot));
      std::copy_n(fill.data.begin() + ptrdiff_t(k) * F_, F_, fill_.begin() + ptrdiff_t(slot) * F_);
    }
  }

 private:
  float* row(int i, size_t slot) { return ring_.data() + (size_t(i) * C_ + slot) * F_; }
  const float* row(int i, size_t slot) const { return ring_.data() + (size_t(i) * C_ + slot) * F_; }

  std::vector<float> run_cpu(const Panel& w, const WindowPlan& plan) {
    return cpu_model_ ? predict_cpu(*cpu_model_, params_, w, plan, tile_)
                      : predict_cpu(lay_, params_, w, plan, tile_, compute_);
  }

  const ModelLayout& lay_;
  const std::vector<float>& params_;
  int C_, F_, K_, I_, tile_;
  std::vector<float> ring_;  // (I, C, F)
  std::vector<float> fill_;  // (C, F)
  Compute compute_;
  std::unique_ptr<cpu::CpuModel> cpu_model_;  // the CPU's fast model (null: the reference, or the GPU)
  std::unique_ptr<WindowRunner> gpu_;         // the GPU's model and buffers (null: the CPU)
};

}  // namespace

std::unique_ptr<StreamEngine> make_stream_engine(const StreamEngineSpec& s) {
  require(s.layout && s.params && s.instruments >= 1, "stream: an engine needs a model and at least one instrument");
  if (s.mode == PredictMode::carry) return std::make_unique<CarryEngine>(s);
  return std::make_unique<WindowEngine>(s);
}

}  // namespace mlalpha

// The GPU population backend: one PopulationTrainer (src/train/population_trainer.h) behind PopulationBackend.
#include "core/context.h"
#include "core/error.h"
#include "train/population_backends.h"
#include "train/population_trainer.h"

namespace mlalpha {

namespace {

std::vector<PopulationMember> members_of(const std::vector<MemberSpec>& specs, const std::vector<const Panel*>& train) {
  require(specs.size() == train.size(), "make_gpu_population: one training panel per member");
  std::vector<PopulationMember> out;
  for (size_t m = 0; m < specs.size(); ++m) out.push_back({specs[m].train, train[m]});
  return out;
}

class GpuPopulation : public PopulationBackend {
 public:
  GpuPopulation(const RunConfig& c, const std::vector<MemberSpec>& specs, const std::vector<const Panel*>& train)
      : ctx_(0), tr_(ctx_, c.model, members_of(specs, train), {c.run.graph, 0}), precision_(c.train.precision) {}
  const char* name() const override { return "gpu"; }
  int members() const override { return tr_.members(); }
  void step() override { tr_.step(); }
  TrainPoint point(int m, int64_t s) override {
    const StepRecord r = tr_.record(m, s);
    return {r.step, r.loss, r.lr, r.grad_norm, r.skipped != 0};
  }
  std::vector<float> predict(int m, const Panel& p, const PredictSpec& spec, const std::vector<float>* params) override {
    if (!params) return predict_gpu(ctx_, tr_.layout(), tr_.device_params(m), p, spec, precision_);
    return predict_gpu(ctx_, tr_.layout(), *params, p, spec, precision_);
  }
  TrainState state(int m) override { return tr_.state(m); }
  void load_state(int m, const TrainState& s) override { tr_.load_state(m, s); }
  void freeze(int m) override { tr_.freeze(m); }

 private:
  Context ctx_;
  PopulationTrainer tr_;
  Precision precision_;
};

}  // namespace

std::unique_ptr<PopulationBackend> make_gpu_population(const RunConfig& cfg, const std::vector<MemberSpec>& members,
                                                       const std::vector<const Panel*>& train) {
  return std::make_unique<GpuPopulation>(cfg, members, train);
}

}  // namespace mlalpha

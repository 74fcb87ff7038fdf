// The GPU engine: one PopulationTrainer (population_trainer.h) for every member, on the data-parallel
// session's GPU and communicator when there is one.
#include "core/context.h"
#include "core/error.h"
#include "train/engine.h"
#include "train/population_trainer.h"

namespace mlalpha {

namespace {

GpuTrainerOptions trainer_options(const EngineOptions& o) {
  GpuTrainerOptions t;
  t.graph = o.graph;
  t.comm = session_communicator(o.dist);
  return t;
}

class GpuEngine : public Engine {
 public:
  GpuEngine(const std::vector<Member>& members, const EngineOptions& o)
      : ctx_(session_device(o.dist)), tr_(ctx_, members, trainer_options(o)) {}
  const char* name() const override { return "gpu"; }
  int members() const override { return tr_.members(); }
  void step() override { tr_.step(); }
  TrainPoint point(int m, int64_t s) override {
    const StepRecord r = tr_.record(m, s);
    return {r.step, r.loss, r.lr, r.grad_norm, r.skipped != 0};
  }
  std::vector<float> predict(int m, const WindowPlan& plan, const std::vector<float>* params) override {
    return tr_.predict(m, plan, params);
  }
  TrainState state(int m) override { return tr_.state(m); }
  void load_state(int m, const TrainState& s) override { tr_.load_state(m, s); }
  void freeze(int m) override { tr_.freeze(m); }

 private:
  Context ctx_;
  PopulationTrainer tr_;
};

}  // namespace

void check_gpu_engine(const std::vector<Member>& members, const EngineOptions& o) {
  check_gpu_population(members, trainer_options(o));
}

std::unique_ptr<Engine> make_gpu_engine(const std::vector<Member>& members, const EngineOptions& o) {
  return std::make_unique<GpuEngine>(members, o);
}

}  // namespace mlalpha

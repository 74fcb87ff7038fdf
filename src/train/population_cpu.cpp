// The CPU population backend: one CpuTrainer per member, stepped in turn. Members share nothing but the
// panels they read, so each member's steps are bitwise those of the same model trained alone.
#include <map>

#include "core/error.h"
#include "train/population_backends.h"
#include "train/trainer_cpu.h"

namespace mlalpha {

namespace {

class CpuPopulation : public PopulationBackend {
 public:
  CpuPopulation(const RunConfig& cfg, const std::vector<MemberSpec>& members, const std::vector<const Panel*>& train) {
    require(members.size() == train.size(), "make_cpu_population: " + std::to_string(members.size()) + " members, " +
                                                std::to_string(train.size()) + " training panels");
    for (size_t m = 0; m < members.size(); ++m) {
      trainers_.push_back(std::make_unique<CpuTrainer>(cfg.model, members[m].train, *train[m]));
    }
    recent_.resize(members.size());
    frozen_.assign(members.size(), false);
  }
  const char* name() const override { return "cpu"; }
  int members() const override { return int(trainers_.size()); }
  void step() override {
    for (size_t m = 0; m < trainers_.size(); ++m) {
      if (frozen_[m]) continue;
      const StepRecord r = trainers_[m]->step();
      recent_[m][r.step] = {r.step, r.loss, r.lr, r.grad_norm, r.skipped != 0};
    }
  }
  TrainPoint point(int m, int64_t s) override {
    auto& recent = recent_.at(size_t(m));
    auto it = recent.find(s);
    require(it != recent.end(), "member " + std::to_string(m) + ": no record of step " + std::to_string(s));
    const TrainPoint p = it->second;
    recent.erase(recent.begin(), std::next(it));
    return p;
  }
  std::vector<float> predict(int m, const Panel& p, const PredictSpec& spec, const std::vector<float>* params) override {
    const CpuTrainer& tr = *trainers_.at(size_t(m));
    return predict_cpu(tr.layout(), params ? *params : tr.params(), p, spec);
  }
  TrainState state(int m) override { return trainers_.at(size_t(m))->state(); }
  void load_state(int m, const TrainState& s) override { trainers_.at(size_t(m))->load_state(s); }
  void freeze(int m) override { frozen_.at(size_t(m)) = true; }

 private:
  std::vector<std::unique_ptr<CpuTrainer>> trainers_;  // (E)
  std::vector<std::map<int64_t, TrainPoint>> recent_;  // (E): the records since each member's last read
  std::vector<bool> frozen_;                           // (E)
};

}  // namespace

std::unique_ptr<PopulationBackend> make_cpu_population(const RunConfig& cfg, const std::vector<MemberSpec>& members,
                                                       const std::vector<const Panel*>& train) {
  return std::make_unique<CpuPopulation>(cfg, members, train);
}

}  // namespace mlalpha

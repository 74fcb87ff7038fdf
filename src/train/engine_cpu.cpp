// The CPU engine: one CpuTrainer per member, stepped in turn on one pool of worker threads (the fast model)
// or one thread (the reference). Members share nothing but the pool and the panels they read, and the bits
// do not depend on the thread count, so each member's steps are bitwise those of the same model trained alone.
#include <map>
#include <tuple>

#include "core/error.h"
#include "model/model_cpu.h"
#include "cpu/thread_pool.h"
#include "train/engine.h"
#include "train/trainer_cpu.h"

namespace mlalpha {

namespace {

TrainPoint to_point(const StepRecord& r) { return {r.step, r.loss, r.lr, r.grad_norm, r.skipped != 0}; }

class CpuEngine : public Engine {
 public:
  CpuEngine(const std::vector<Member>& members, const Compute& compute) : members_(members) {
    if (!compute.reference()) pool_ = std::make_unique<cpu::ThreadPool>(compute.threads());
    // Carry: the members of one panel and training range share its present rows (the sampler's lists; time
    // batches keep the dates aligned and have none).
    std::map<std::tuple<const Panel*, int, int>, std::shared_ptr<const PresentRows>> present;
    for (const Member& m : members) {
      CpuTrainerOptions opt{compute, pool_.get(), nullptr};
      if (m.train().state == StateMode::Carry && m.train().batch_mode == BatchMode::Windows) {
        const GatherParams& g = m.gather();
        auto& rows = present[{&m.panel(), g.t_begin, g.t_begin + g.T}];
        if (!rows) rows = present_rows(m.panel(), g.t_begin, g.t_begin + g.T);
        opt.present = rows;
      }
      trainers_.push_back(std::make_unique<CpuTrainer>(m, opt));
    }
    recent_.resize(members.size());
    frozen_.assign(members.size(), false);
  }
  const char* name() const override { return "cpu"; }
  std::string detail() const override {
    const int t = trainers_.front()->threads();
    return (pool_ ? "" : "reference model, ") + std::to_string(t) + (t == 1 ? " thread" : " threads");
  }
  int members() const override { return int(trainers_.size()); }
  void step() override {
    for (size_t m = 0; m < trainers_.size(); ++m) {
      if (frozen_[m]) continue;
      const StepRecord r = trainers_[m]->step();
      recent_[m][r.step] = to_point(r);
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
  std::vector<float> predict(int m, const WindowPlan& plan, const std::vector<float>* params) override {
    const Member& em = members_.at(size_t(m));
    return trainers_.at(size_t(m))->predict(em.panel(), plan, em.batch(), params);
  }
  std::vector<float> predict_carry(int m, int t0, int t1, const std::vector<float>* params) override {
    return trainers_.at(size_t(m))->predict_carry(members_.at(size_t(m)).panel(), t0, t1, params);
  }
  TrainState state(int m) override { return trainers_.at(size_t(m))->state(); }
  void load_state(int m, const TrainState& s) override { trainers_.at(size_t(m))->load_state(s); }
  void freeze(int m) override { frozen_.at(size_t(m)) = true; }

 private:
  std::vector<Member> members_;
  std::unique_ptr<cpu::ThreadPool> pool_;              // the fast model's workers, shared by the members
  std::vector<std::unique_ptr<CpuTrainer>> trainers_;  // (E); destroyed before the pool they use
  std::vector<std::map<int64_t, TrainPoint>> recent_;  // (E): the records since each member's last read
  std::vector<bool> frozen_;                           // (E)
};

}  // namespace

std::unique_ptr<Engine> make_cpu_engine(const std::vector<Member>& members, const Compute& compute) {
  return std::make_unique<CpuEngine>(members, compute);
}

}  // namespace mlalpha

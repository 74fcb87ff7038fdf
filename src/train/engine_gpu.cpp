// The GPU engine: one PopulationTrainer (population_trainer.h) for every member, on the data-parallel
// session's GPU and communicator when there is one; and that session.
#include "core/context.h"
#include "core/cuda_check.h"
#include "core/device.h"
#include "core/error.h"
#include "dist/nccl.h"
#include "predict/predict.h"
#include "predict/predict_gpu.h"
#include "train/engine.h"
#include "train/population_trainer.h"

namespace mlalpha {

struct DistSession {
  int local_rank = 0;  // the GPU this rank trains on
  std::shared_ptr<const dist::NcclLib> lib;
  std::unique_ptr<dist::Communicator> comm;
};
void DistSessionDeleter::operator()(DistSession* s) const { delete s; }

dist::Communicator* session_communicator(DistSession* s) { return s ? s->comm.get() : nullptr; }
int session_device(DistSession* s) { return s ? s->local_rank : 0; }

DistSessionPtr open_dist_session(int rank, int world, int local_rank) {
  const int gpus = cuda_device_count();
  // A scheduler that binds one GPU to each task (srun --gpus-per-task 1) shows each rank only its own, as
  // device 0, whatever its local rank; otherwise the local rank picks the GPU.
  const int device = gpus == 1 ? 0 : local_rank;
  require(device >= 0 && device < gpus,
          "data-parallel rank " + std::to_string(rank) + " of " + std::to_string(world) + " is to use GPU " +
              std::to_string(local_rank) + " (its local rank), but this host shows " + std::to_string(gpus) +
              " GPU(s) (CUDA_VISIBLE_DEVICES may hide some)");
  MLALPHA_CUDA_CHECK(cudaSetDevice(device));  // the communicator binds to the current device
  DistSessionPtr s(new DistSession);
  s->local_rank = device;
  s->lib = std::make_shared<const dist::NcclLib>();
  const dist::RankInfo r{rank, world, local_rank, "run"};
  s->comm = std::make_unique<dist::Communicator>(
      dist::make_communicator(s->lib, r, dist::id_exchange_from_env(dist::process_env(), r), {}));
  return s;
}

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
      : members_(members), ctx_(session_device(o.dist)), tr_(ctx_, members, trainer_options(o)) {}
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
  // Mode carry as `predict --mode carry` runs it on the GPU (predict.h): one forward per instrument over its
  // present rows, compacted, in tiles of CpuTrainer::predict_carry's size, on the trainer's stream after its steps.
  std::vector<float> predict_carry(int m, int t0, int t1, const std::vector<float>* params) override {
    const Member& em = members_.at(size_t(m));
    const Panel& p = em.panel();
    const CarryInput in = carry_input(p, t0, t1);
    if (in.plan.windows.empty()) return carry_output(in, {}, p);
    const std::vector<float> live = params ? std::vector<float>() : tr_.params(m);
    const std::vector<float> got = predict_gpu(ctx_, tr_.layout(), params ? *params : live, in.compact, in.plan,
                                               carry_prediction_tile(em.train(), p.N, in.plan.L), tr_.precision());
    return carry_output(in, got, p);
  }
  TrainState state(int m) override { return tr_.state(m); }
  void load_state(int m, const TrainState& s) override { tr_.load_state(m, s); }
  void freeze(int m) override { tr_.freeze(m); }

 private:
  std::vector<Member> members_;
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

#include "train/backend.h"

#include <map>

#include "core/context.h"
#include "core/cuda_check.h"
#include "dist/nccl.h"
#include "train/trainer_cpu.h"
#include "train/trainer_gpu.h"

namespace mlalpha {

struct DistSession {
  int local_rank = 0;  // the GPU this rank trains on
  std::shared_ptr<const dist::NcclLib> lib;
  std::unique_ptr<dist::Communicator> comm;
};
void DistSessionDeleter::operator()(DistSession* s) const { delete s; }

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
  GpuBackend(const RunConfig& c, const Panel& train, DistSession* dist)
      : ctx_(dist ? dist->local_rank : 0),
        tr_(ctx_, c.model, c.train, train, options(c, dist)),
        precision_(c.train.precision) {}
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
  static GpuTrainerOptions options(const RunConfig& c, DistSession* dist) {
    GpuTrainerOptions o;
    o.graph = c.run.graph;
    o.comm = dist ? dist->comm.get() : nullptr;
    return o;
  }
  Context ctx_;
  GpuTrainer tr_;
  Precision precision_;
};

}  // namespace

std::unique_ptr<Backend> make_backend(const RunConfig& cfg, const Panel& train, DistSession* dist) {
  if (dist) {
    require(use_gpu(cfg.run.device), "data-parallel training runs on GPUs: run.device = '" + cfg.run.device +
                                         "' found none (or says cpu)");
    return std::make_unique<GpuBackend>(cfg, train, dist);
  }
  if (use_gpu(cfg.run.device)) return std::make_unique<GpuBackend>(cfg, train, nullptr);
  return std::make_unique<CpuBackend>(cfg, train);
}

}  // namespace mlalpha

// The engine's checks, its choice of device and the data-parallel session (engine.h).
#include "train/engine.h"

#include "core/context.h"
#include "core/cuda_check.h"
#include "core/error.h"
#include "dist/nccl.h"
#include "train/trainer_cpu.h"

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

bool engine_on_gpu(const EngineOptions& o) {
  require(!o.dist || o.compute.gpu(), "data-parallel training runs on GPUs: this run computes on the CPU (run.device)");
  return o.compute.gpu();
}

std::vector<Member> check_engine(const ModelConfig& mc, const std::vector<EngineMember>& members,
                                 const std::vector<std::string>& names, const EngineOptions& o) {
  require(!members.empty(), "an engine needs at least one member");
  require(names.size() == members.size(), "check_engine: " + std::to_string(members.size()) + " members but " +
                                              std::to_string(names.size()) + " names");
  std::vector<Member> checked;
  for (size_t m = 0; m < members.size(); ++m) {
    require(members[m].panel != nullptr, names[m] + ": no training panel");
    try {
      checked.push_back(plan_member(mc, members[m].train, *members[m].panel, members[m].range));
    } catch (const Error& e) {
      throw Error(members.size() > 1 ? names[m] + ": " + e.what() : std::string(e.what()));
    }
  }
  if (engine_on_gpu(o)) check_gpu_engine(checked, o);
  else check_cpu_training(checked[0], int(checked.size()), o.compute);
  return checked;
}

std::unique_ptr<Engine> make_engine(const std::vector<Member>& members, const EngineOptions& o) {
  require(!members.empty(), "an engine needs at least one member");
  if (engine_on_gpu(o)) return make_gpu_engine(members, o);
  return make_cpu_engine(members, o.compute);
}

}  // namespace mlalpha

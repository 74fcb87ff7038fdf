// The engine's checks and its choice of device (engine.h).
#include "train/engine.h"

#include "core/error.h"
#include "train/trainer_cpu.h"

namespace mlalpha {

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

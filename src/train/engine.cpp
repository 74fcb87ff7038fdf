// The engine's checks and its choice of device (engine.h).
#include "train/engine.h"

#include "core/device.h"
#include "core/error.h"
#include "train/trainer_cpu.h"

namespace mlalpha {

bool engine_on_gpu(const EngineOptions& o) {
  if (!o.dist) return use_gpu(o.device);
  require(use_gpu(o.device),
          "data-parallel training runs on GPUs: run.device = '" + o.device + "' found none (or says cpu)");
  return true;
}

void check_engine(const ModelConfig& mc, const std::vector<EngineMember>& members, const std::vector<std::string>& names,
                  const EngineOptions& o) {
  require(!members.empty(), "an engine needs at least one member");
  require(names.size() == members.size(), "check_engine: " + std::to_string(members.size()) + " members but " +
                                              std::to_string(names.size()) + " names");
  for (size_t m = 0; m < members.size(); ++m) {
    require(members[m].panel != nullptr, names[m] + ": no training panel");
    try {
      validate_training(mc, members[m].train, *members[m].panel, members[m].range);
    } catch (const Error& e) {
      throw Error(members.size() > 1 ? names[m] + ": " + e.what() : std::string(e.what()));
    }
  }
  if (engine_on_gpu(o)) check_gpu_engine(mc, members, o);
  else check_cpu_training(mc, members[0].train, *members[0].panel, members[0].range, int(members.size()), o.cpu);
}

std::unique_ptr<Engine> make_engine(const ModelConfig& mc, const std::vector<EngineMember>& members,
                                    const EngineOptions& o) {
  require(!members.empty(), "an engine needs at least one member");
  if (engine_on_gpu(o)) return make_gpu_engine(mc, members, o);
  return make_cpu_engine(mc, members, o.cpu);
}

}  // namespace mlalpha

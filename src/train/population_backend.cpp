// make_population_backend (src/train/population.h): every member checked against its panel, then the GPU
// or the CPU implementation.
#include "core/error.h"
#include "train/backend.h"
#include "train/population.h"
#include "train/population_backends.h"
#include "train/train_plan.h"

namespace mlalpha {

std::unique_ptr<PopulationBackend> make_population_backend(const RunConfig& cfg, const std::vector<MemberSpec>& members,
                                                           const std::vector<const Panel*>& train) {
  require(!members.empty(), "a population needs at least one member");
  require(members.size() == train.size(), "make_population_backend: " + std::to_string(members.size()) +
                                              " members but " + std::to_string(train.size()) + " training panels");
  for (size_t m = 0; m < members.size(); ++m) {
    require(train[m] != nullptr, members[m].name + ": no training panel");
    try {
      validate_training(cfg.model, members[m].train, *train[m]);
    } catch (const Error& e) {
      throw Error(members[m].name + ": " + e.what());
    }
  }
  if (use_gpu(cfg.run.device)) return make_gpu_population(cfg, members, train);
  return make_cpu_population(cfg, members, train);
}

}  // namespace mlalpha

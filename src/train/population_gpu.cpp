// The GPU population backend: one PopulationTrainer (src/train/population_trainer.h) behind PopulationBackend.
#include "core/error.h"
#include "train/population_backends.h"

namespace mlalpha {

std::unique_ptr<PopulationBackend> make_gpu_population(const RunConfig&, const std::vector<MemberSpec>&,
                                                       const std::vector<const Panel*>&) {
  throw Error("populations on the GPU are not built yet");
}

}  // namespace mlalpha

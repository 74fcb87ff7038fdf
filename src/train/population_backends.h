#pragma once
// The two implementations behind make_population_backend (src/train/population.h).
#include <memory>
#include <vector>

#include "train/population.h"

namespace mlalpha {

// Members step in turn, each a CpuTrainer (src/train/population_cpu.cpp).
std::unique_ptr<PopulationBackend> make_cpu_population(const RunConfig& cfg, const std::vector<MemberSpec>& members,
                                                       const std::vector<const Panel*>& train);
// All members in one captured step on the GPU (src/train/population_gpu.cpp).
std::unique_ptr<PopulationBackend> make_gpu_population(const RunConfig& cfg, const std::vector<MemberSpec>& members,
                                                       const std::vector<const Panel*>& train);

}  // namespace mlalpha

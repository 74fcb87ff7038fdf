// The GPU engine's entry points (engine.h) in a CPU-only build, where the GPU engine is not built
// (docs/decisions.md, "A CPU-only build"). They are not reached: every caller asks engine_on_gpu first, and
// resolve() (mlalpha/compute.h) refuses 'gpu' in such a build; were one reached, it says so in the same sentence.
#include "core/device.h"
#include "core/error.h"
#include "train/engine.h"

namespace mlalpha {

// No session is ever made here, so there is none to delete.
void DistSessionDeleter::operator()(DistSession*) const {}
dist::Communicator* session_communicator(DistSession*) { return nullptr; }
int session_device(DistSession*) { return 0; }

DistSessionPtr open_dist_session(int, int, int) {
  throw Error(no_gpu_support("data-parallel training (several GPUs) was asked for"));
}

void check_gpu_engine(const std::vector<Member>&, const EngineOptions&) {
  throw Error(no_gpu_support("run.device = 'gpu'"));
}

std::unique_ptr<Engine> make_gpu_engine(const std::vector<Member>&, const EngineOptions&) {
  throw Error(no_gpu_support("run.device = 'gpu'"));
}

}  // namespace mlalpha

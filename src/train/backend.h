#pragma once
// One interface over the CPU and GPU trainers for the run loop: step, read step records, predict with
// the live or given weights, export/import state.
#include <memory>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "core/device.h"
#include "data/panel.h"
#include "mlalpha/config.h"
#include "mlalpha/records.h"
#include "predict/predict.h"

namespace mlalpha {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;
  virtual void step() = 0;
  // The record of step s (the CPU backend keeps the last steps since the previous read).
  virtual TrainPoint point(int64_t s) = 0;
  // Predictions (N, T, K) for spec's range with the live weights, or with `params` when non-null.
  virtual std::vector<float> predict(const Panel& p, const PredictSpec& spec, const std::vector<float>* params) = 0;
  virtual TrainState state() = 0;
  virtual void load_state(const TrainState& s) = 0;
};

// A data-parallel run's NCCL communicator, made once per process (every fold's trainer uses it): on the
// rank's GPU, joined through the exchange the environment names (dist::id_exchange_from_env).
struct DistSession;
struct DistSessionDeleter {
  void operator()(DistSession* s) const;
};
using DistSessionPtr = std::unique_ptr<DistSession, DistSessionDeleter>;
// Checks that GPU local_rank exists, makes it current and joins the communicator (bounded by a timeout
// that names the missing ranks); throws Error otherwise.
DistSessionPtr open_dist_session(int rank, int world, int local_rank);

// "gpu" when run.device is gpu, or auto with a GPU present; else "cpu". `train` is the training panel.
// dist, when non-null: the GPU trainer on the session's GPU, its gradients averaged over the ranks.
std::unique_ptr<Backend> make_backend(const RunConfig& cfg, const Panel& train, DistSession* dist = nullptr);

}  // namespace mlalpha

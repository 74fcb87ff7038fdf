#pragma once
// The training engine behind the run loop (DESIGN sections 2 and 7): E members of one architecture stepped
// together, E = 1 for a solo run. On the GPU one PopulationTrainer (one captured step for every member,
// data-parallel over NCCL when given a communicator); on the CPU one CpuTrainer per member, stepped in turn on
// one pool of threads.
// Either way a member's result is bitwise what the same model trained alone would be, and a frozen member
// (its early stop) keeps its weights and counters while the others go on.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "data/panel.h"
#include "mlalpha/compute.h"
#include "mlalpha/config_types.h"
#include "mlalpha/records.h"
#include "predict/window_plan.h"
#include "train/train_plan.h"

namespace mlalpha {

namespace dist {
class Communicator;
}

// One member as given: its settings, its fold's panel (the whole time axis: the training range is sampled from it
// and predictions read any range of it) and its training range. Members of one fold share the panel, which the
// GPU engine then holds once. check_engine checks them into Members (train_plan.h), which the engine takes.
struct EngineMember {
  TrainConfig train;  // models = 1
  const Panel* panel = nullptr;
  TrainRange range;
};

// A data-parallel run's NCCL communicator, made once per process (every fold's engine uses it): on the rank's
// GPU, joined through the exchange the environment names (dist::id_exchange_from_env).
struct DistSession;
struct DistSessionDeleter {
  void operator()(DistSession* s) const;
};
using DistSessionPtr = std::unique_ptr<DistSession, DistSessionDeleter>;
// Checks that GPU local_rank exists, makes it current and joins the communicator (bounded by a timeout that
// names the missing ranks); throws Error otherwise.
DistSessionPtr open_dist_session(int rank, int world, int local_rank);
// The session's communicator and GPU (a null session: none, GPU 0).
dist::Communicator* session_communicator(DistSession* s);
int session_device(DistSession* s);

struct EngineOptions {
  Compute compute;              // resolved where the run starts: the device, and on the CPU the model and threads
  bool graph = true;            // run.graph: replay the GPU step as a CUDA graph
  DistSession* dist = nullptr;  // data-parallel: the gradients averaged over its ranks (GPU only)
};

class Engine {
 public:
  virtual ~Engine() = default;
  virtual const char* name() const = 0;  // "gpu" | "cpu"
  // How it computes, for the log: "" (GPU), "2 threads" or "reference model, 1 thread" (CPU).
  virtual std::string detail() const { return ""; }
  virtual int members() const = 0;
  // One step of every member that is not frozen.
  virtual void step() = 0;
  // The record of member m's step s (1-based; every step since the last read of that member is kept).
  virtual TrainPoint point(int m, int64_t s) = 0;
  // Predictions (N, T, K) of member m's panel by `plan`, with its live weights or with `params` when non-null,
  // in windows of its training batch.
  virtual std::vector<float> predict(int m, const WindowPlan& plan, const std::vector<float>* params) = 0;
  // Predictions (N, T, K) of member m's panel in mode carry (predict.h, predict_carry): each instrument's state
  // carried over its present rows from the panel's first step, kept at the dates [t0, t1), NaN elsewhere.
  virtual std::vector<float> predict_carry(int m, int t0, int t1, const std::vector<float>* params) = 0;
  virtual TrainState state(int m) = 0;
  // Member m continues from `s` (a resume; before its first step).
  virtual void load_state(int m, const TrainState& s) = 0;
  // Member m takes no more steps: its weights, moments and counters stay as they are now.
  virtual void freeze(int m) = 0;
};

// Whether the engine trains on the GPU (o.compute says); with a data-parallel session it must.
bool engine_on_gpu(const EngineOptions& o);
// The checks of an engine without building it, for a run to make before it touches its folder: every member
// against its panel and range, once (plan_member; messages start with the member's name, names[m], when the
// engine has several), then the memory (device or host), refusing a population that does not fit with the number
// of members that would. Returns the checked members, which the run carries to make_engine (Member::on its
// fold's prepared panel).
std::vector<Member> check_engine(const ModelConfig& mc, const std::vector<EngineMember>& members,
                                 const std::vector<std::string>& names, const EngineOptions& o);
// The engine of checked members (one model config); its trainers check the memory again before they allocate (a
// class that owns memory cannot rely on its caller's checks), not the settings.
std::unique_ptr<Engine> make_engine(const std::vector<Member>& members, const EngineOptions& o);

// The two implementations (engine_cpu.cpp, engine_gpu.cpp).
std::unique_ptr<Engine> make_cpu_engine(const std::vector<Member>& members, const Compute& compute = {});
std::unique_ptr<Engine> make_gpu_engine(const std::vector<Member>& members, const EngineOptions& o);
// The GPU engine's memory checks alone (PopulationTrainer's, without allocating).
void check_gpu_engine(const std::vector<Member>& members, const EngineOptions& o);

}  // namespace mlalpha

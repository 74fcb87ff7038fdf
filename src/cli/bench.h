#pragma once
// `ml-alpha bench`: DESIGN section 5 configurations timed on the GPU (or, --device cpu, on the CPU). The configuration table and the
// trainer it times are exposed so that other timing tools (bench/kernel_times.cpp) measure the very same
// step instead of a copy that drifts.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "mlalpha/config_types.h"
#include "mlalpha/precision.h"

namespace mlalpha {

class Context;
class GpuTrainer;

struct BenchArgs {
  std::string configs = "S,M,L";  // which model configurations
  int warmup = 10;                // untimed steps after the first (eager) one
  int steps = 60;                 // timed steps (median reported)
  bool optimizer = true;          // also the AdamW + clip case over 25M and 100M parameters
  // Every model configuration (and the population bench) in this precision; none: S and M in fp32, L in
  // tf32 and then fp32 (the population bench fp32).
  std::optional<Precision> precision;
  std::string models;             // "16,64": time populations of these sizes instead (run_population_bench)
  std::string lanes = "0";        // populations: the lane counts timed (PopulationTrainer's streams; 0 = its default)
  int batch = 0;                  // populations: windows per step instead of the configuration's B (0 = its B)
  std::string device = "gpu";     // gpu | cpu (run_cpu_bench)
  std::string threads;            // cpu: the thread counts timed, "1,16" ("" = 1 and every CPU available)
  bool reference = false;         // cpu: also the reference model's step (one thread)
  bool carry = false;             // also the step with train.state = "carry" (the lanes' states carried), on either device
  bool time_batches = false;      // every trained step with train.batch = "time" (bench_time_batches), on either device
  // --predict: predict's throughput over a panel of N,T,F with windows of predict_seq_len rows, the last
  // predict_dates dates (0: all).
  bool predict = false;
  std::string predict_panel = "5000,2500,158";
  int predict_seq_len = 64;
  int predict_dates = 0;
};

int run_bench(const BenchArgs& a, double process_start_seconds);
// `ml-alpha bench --device cpu`: the CPU trainer's step (the fast CPU model) for each configuration and thread
// count, its parts, its scaling over the first thread count, and (a.reference) the reference model's step;
// then whether the weights after two steps are the same bits on every thread count (src/cli/bench_cpu.cpp).
int run_cpu_bench(const BenchArgs& a);
// `ml-alpha bench --models E,...`: for each configuration and population size E, one model's step against
// a population of E in one captured step, E trainers each replaying its own graph on its own stream, and
// E sequential runs (src/cli/bench_population_gpu.cpp).
int run_population_bench(const BenchArgs& a);
// `ml-alpha bench --predict` (src/cli/bench_predict_gpu.cpp).
int run_predict_bench(const BenchArgs& a);

// One DESIGN section 5 configuration.
struct BenchShape {
  const char* name;
  int B, L, F, D, NL, N, P, Q;
};
// The configuration called `name` (default, S, M, L, W256, W16K, W64K); throws naming the choices for anything else.
const BenchShape& bench_shape(const std::string& name);
// The trainer `ml-alpha bench` times for `s`: K = 1, MSE, AdamW (lr 1e-3, wd 0.01), clip 1.0, graph
// replay, a synthetic panel. `total_steps` is every step the caller will run (it sets the LR schedule
// and the log interval, so no step logs). state: train.state (carry: consecutive windows, states carried).
std::unique_ptr<GpuTrainer> make_bench_trainer(Context& ctx, const BenchShape& s, Precision precision, int64_t total_steps,
                                               StateMode state = StateMode::Zero, bool time_batches = false);
struct ModelConfig;
struct TrainConfig;
// The model and training settings make_bench_trainer uses for `s`.
ModelConfig bench_model_config(const BenchShape& s);
TrainConfig bench_train_config(const BenchShape& s, int64_t total_steps);
// tc with time batches of the same B windows: B / 16 dates × the bench panel's 16 instruments (the IC loss's
// cross-sections). Throws unless B is a multiple of 16.
TrainConfig bench_time_batches(TrainConfig tc, const BenchShape& s);
// make_bench_trainer's synthetic panel for `s`.
struct Panel;
Panel bench_panel(const BenchShape& s);

}  // namespace mlalpha

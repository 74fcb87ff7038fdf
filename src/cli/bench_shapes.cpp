// The benchmark configurations (bench.h), shared by the GPU and CPU benches and bench/kernel_times.cpp.
#include <algorithm>

#include "cli/bench.h"
#include "core/error.h"
#include "data/synthetic.h"
#include "mlalpha/config.h"

namespace mlalpha {

namespace {

// S, M, L: DESIGN section 5. W256, W16K, W64K: 65,536 tokens a step with D 256 and 4 layers as 256 windows
// of 256, 4 of 16,384 and 1 of 65,536 (the long-window case: one window's length against the SSD's parallelism over B·H).
// default: the model and batch `ml-alpha train` uses when nothing is set (the CPU bench's small case).
constexpr BenchShape kShapes[] = {{"default", 16, 64, 8, 32, 2, 16, 16, 64},
                                  {"S", 64, 256, 32, 128, 4, 64, 32, 64},
                                  {"M", 32, 512, 64, 256, 6, 64, 64, 128},
                                  {"L", 8, 2048, 64, 1024, 8, 128, 64, 256},
                                  {"W256", 256, 256, 64, 256, 4, 64, 64, 64},
                                  {"W16K", 4, 16384, 64, 256, 4, 64, 64, 64},
                                  {"W64K", 1, 65536, 64, 256, 4, 64, 64, 64}};

}  // namespace

const BenchShape& bench_shape(const std::string& name) {
  for (const BenchShape& k : kShapes)
    if (name == k.name) return k;
  throw Error("unknown configuration '" + name + "' (expected default, S, M, L, W256, W16K or W64K)");
}

ModelConfig bench_model_config(const BenchShape& s) {
  ModelConfig mc;
  mc.F = s.F; mc.K = 1; mc.D = s.D; mc.NL = s.NL; mc.N = s.N; mc.P = s.P; mc.Q = s.Q;
  return mc;
}

TrainConfig bench_train_config(const BenchShape& s, int64_t total_steps) {
  TrainConfig tc;
  tc.B = s.B; tc.L = s.L; tc.steps = total_steps; tc.lr = 1e-3f; tc.weight_decay = 0.01f; tc.clip = 1.0f;
  tc.log_every = tc.steps;
  tc.warmup = std::min<int64_t>(tc.warmup, total_steps - 1);  // short traces (ml-alpha-kernels --steps 5)
  return tc;
}

constexpr int kBenchInstruments = 16;

TrainConfig bench_time_batches(TrainConfig tc, const BenchShape& s) {
  require(s.B % kBenchInstruments == 0, std::string("bench --time-batches: configuration ") + s.name + " has B = " +
                                            std::to_string(s.B) + " windows, not a multiple of the bench panel's " +
                                            std::to_string(kBenchInstruments) + " instruments (a date's cross-section)");
  tc.batch_mode = BatchMode::Time;
  tc.dates = s.B / kBenchInstruments;
  tc.instruments = kBenchInstruments;
  tc.loss = LossKind::IC;
  return tc;
}

Panel bench_panel(const BenchShape& s) { return make_synthetic({kBenchInstruments, s.L + 512, s.F, 1, 0.1f, 1, 0}); }

}  // namespace mlalpha

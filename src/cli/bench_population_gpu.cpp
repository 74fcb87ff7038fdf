// `ml-alpha bench --models E,...`: populations against their simple alternatives, on the same
// configuration, in one process. Four ways to train E models of configuration s for a step each:
//   one model     one GpuTrainer (the ratios' unit);
//   population    one PopulationTrainer of E members (seeds 1..E, learning rates swept), one captured step;
//   E streams     E GpuTrainers, each with its own context and stream, each replaying its own graph;
//   sequential    E runs one after another: E × one model's step (every step of a model costs the same).
// Each is timed by the host clock over the timed steps between two device synchronisations, after its
// eager step and the warm-up (graph capture included there), so streams running side by side are timed
// like one stream.
#include <chrono>
#include <cstdio>
#include <memory>
#include <sstream>
#include <vector>

#include "cli/bench.h"
#include "core/context.h"
#include "core/cuda_check.h"
#include "data/panel.h"
#include "train/population_trainer.h"
#include "train/trainer_gpu.h"

namespace mlalpha {

namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Milliseconds a step of `step()` takes: warm-up, then `steps` timed between device synchronisations.
template <typename F>
double ms_per_step(const BenchArgs& a, F&& step) {
  for (int i = 0; i < 1 + a.warmup; ++i) step();
  MLALPHA_CUDA_CHECK(cudaDeviceSynchronize());
  const double t0 = now_seconds();
  for (int i = 0; i < a.steps; ++i) step();
  MLALPHA_CUDA_CHECK(cudaDeviceSynchronize());
  return (now_seconds() - t0) * 1e3 / a.steps;
}

struct Timing {
  double ms = 0;
  std::string note;  // why it has no time (did not fit)
};

Timing time_population(const BenchShape& s, int E, int& lanes, const BenchArgs& a, const Panel& data, size_t* bytes) {
  const int64_t total = 1 + a.warmup + a.steps;
  std::vector<PopulationMember> members;
  for (int m = 0; m < E; ++m) {
    members.push_back({bench_train_config(s, total), &data});
    members.back().train.seed = uint64_t(1 + m);
    members.back().train.lr = 1e-3f * float(1 + m % 4) / 2;
    members.back().train.precision = a.precision.value_or(Precision::FP32);
  }
  size_t free0 = 0, total_b = 0;
  MLALPHA_CUDA_CHECK(cudaMemGetInfo(&free0, &total_b));
  Context ctx(0);
  try {
    PopulationTrainer pop(ctx, bench_model_config(s), members, {true, 0, lanes});
    size_t free1 = 0;
    MLALPHA_CUDA_CHECK(cudaMemGetInfo(&free1, &total_b));
    *bytes = free0 - free1;
    lanes = pop.lanes();
    return {ms_per_step(a, [&] { pop.step(); }), ""};
  } catch (const Error& e) {
    return {0, e.what()};
  }
}

Timing time_streams(const BenchShape& s, int E, const BenchArgs& a) {
  const int64_t total = 1 + a.warmup + a.steps;
  try {
    std::vector<std::unique_ptr<Context>> ctx;
    std::vector<std::unique_ptr<GpuTrainer>> tr;
    for (int m = 0; m < E; ++m) {
      ctx.push_back(std::make_unique<Context>(0));
      tr.push_back(make_bench_trainer(*ctx.back(), s, a.precision.value_or(Precision::FP32), total));
    }
    return {ms_per_step(a, [&] {
              for (auto& t : tr) t->step();
            }),
            ""};
  } catch (const Error& e) {
    return {0, e.what()};
  }
}

// "16,64" → {16, 64}, each in [min, max]; an error names the option and the bad entry.
std::vector<int> int_list(const std::string& text, const char* option, int min, int max, const char* what) {
  std::vector<int> out;
  std::stringstream ls(text);
  for (std::string e; std::getline(ls, e, ',');) {
    int v = min - 1;
    try {
      size_t used = 0;
      v = std::stoi(e, &used);
      if (used != e.size()) v = min - 1;
    } catch (const std::exception&) {
      v = min - 1;
    }
    require(v >= min && v <= max, std::string("bench ") + option + ": '" + e + "' is not " + what + " in [" +
                                      std::to_string(min) + ", " + std::to_string(max) + "] (e.g. " + option + " 1,4)");
    out.push_back(v);
  }
  return out;
}

}  // namespace

int run_population_bench(const BenchArgs& a) {
  require(a.steps >= 1 && a.warmup >= 0, "bench: --steps must be >= 1 and --warmup >= 0");
  const std::vector<int> sizes = int_list(a.models, "--models", 1, 4096, "a population size");
  const std::vector<int> lane_counts = int_list(a.lanes, "--lanes", 0, 64, "a lane count (0: the default)");
  std::printf("ml-alpha bench --models on %s; %s; ms per step of all E models, host clock over %d steps after %d "
              "warm-up steps\n",
              cuda_device_summary(0).c_str(), to_string(a.precision.value_or(Precision::FP32)).c_str(), a.steps,
              a.warmup);
  std::printf("| config | E | lanes | one model ms | population ms | x one | models/s | E streams ms | x one | "
              "sequential ms | population vs streams | population memory |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  std::stringstream list(a.configs);
  for (std::string name; std::getline(list, name, ',');) {
    BenchShape s = bench_shape(name);
    if (a.batch > 0) s.B = a.batch;
    const Panel data = bench_panel(s);
    size_t solo_bytes = 0;
    int one_lane = 1;
    const Timing one = time_population(s, 1, one_lane, a, data, &solo_bytes);
    require(one.note.empty(), "bench --models: one " + name + " model does not run: " + one.note);
    for (int E : sizes) {
      const Timing str = time_streams(s, E, a);
      for (int lanes : lane_counts) {
        if (lanes > E) continue;  // 0: the population's own choice, reported
        size_t bytes = 0;
        const Timing pop = time_population(s, E, lanes, a, data, &bytes);
        auto cell = [](const Timing& t, double unit) {
          char b[64];
          if (t.ms <= 0) return std::string("did not fit | -");
          std::snprintf(b, sizeof b, "%.3f | %.2f", t.ms, t.ms / unit);
          return std::string(b);
        };
        char models_s[32] = "-", vs[32] = "-";
        if (pop.ms > 0) std::snprintf(models_s, sizeof models_s, "%.0f", E / (pop.ms / 1e3));
        if (pop.ms > 0 && str.ms > 0) std::snprintf(vs, sizeof vs, "%.2fx", str.ms / pop.ms);
        const std::string label = a.batch > 0 ? name + " (B " + std::to_string(s.B) + ")" : name;
        std::printf("| %s | %d | %d | %.3f | %s | %s | %s | %.3f | %s | %s |\n", label.c_str(), E, lanes, one.ms,
                    cell(pop, one.ms).c_str(), models_s, cell(str, one.ms).c_str(), E * one.ms, vs,
                    pop.ms > 0 ? format_bytes(double(bytes)).c_str() : "-");
        if (!pop.note.empty()) std::printf("  population: %s\n", pop.note.c_str());
        std::fflush(stdout);
      }
      if (!str.note.empty()) std::printf("  E streams: %s\n", str.note.c_str());
    }
  }
  return 0;
}

}  // namespace mlalpha

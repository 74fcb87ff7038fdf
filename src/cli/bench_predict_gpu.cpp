// `ml-alpha bench --predict`: the throughput of `predict` on the GPU over an Alpha158-sized panel (docs/benchmarks.md,
// "Predicting every date"). Mode window runs one window of C rows per (instrument, date), C times the rows of
// mode carry (one forward per instrument over its T rows); the tiled plan (windows laid from the range's start)
// is the old evaluation layout, for reference. Each is timed on the device from the panel already in device
// memory to the predictions on the host (predict_gpu: gather, forward, scatter in tiles, one download).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>
#include <thread>

#include "cli/bench.h"
#include "core/context.h"
#include "core/device_buffer.h"
#include "core/error.h"
#include "model/layout.h"
#include "model/model_gpu.h"
#include "predict/predict_gpu.h"
#include "ops/cast/cast.h"
#include "predict/window_plan.h"

namespace mlalpha {

namespace {

// Features in (−2, 2), filled on every core (a 7.9 GB panel): a counter-based hash, so any split gives the same.
std::vector<float> random_panel(size_t n) {
  std::vector<float> x(n);
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      for (size_t i = n * t / threads; i < n * (t + 1) / threads; ++i) {
        uint64_t z = (i + 1) * 0x9E3779B97F4A7C15ull;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        x[i] = float(double(z >> 40) / double(1ull << 24) * 4.0 - 2.0);
      }
    });
  for (std::thread& th : pool) th.join();
  return x;
}

struct Timed {
  double seconds = 0;
  size_t windows = 0, rows = 0, kept = 0;
  int tile = 0;
};

Timed time_plan(Context& ctx, const ModelLayout& lay, const TrainConfig& tc, const DeviceBuffer<float>& params,
                const DeviceFeatures& x, const WindowPlan& plan, Precision precision) {
  Timed r;
  r.tile = prediction_tile(tc, x.N, plan.L);
  GpuModel model(ctx, lay, r.tile, plan.L, precision, ModelUse::kForward);
  DeviceBuffer<float> xb(size_t(r.tile) * plan.L * x.F);
  DeviceBuffer<__nv_bfloat16> p16(precision == Precision::BF16 ? params.size() : 0);
  if (p16.size()) gpu::cast_bf16(params.data(), p16.data(), params.size(), ctx.stream());
  PlanBuffers buf;
  WindowPlan warm = plan;  // a few tiles first: the GEMM plans, the buffers
  warm.windows.resize(std::min(plan.windows.size(), size_t(r.tile) * 2));
  predict_gpu(ctx, lay, model, xb.data(), params.data(), p16.size() ? p16.data() : nullptr, x, warm, buf);
  const auto t0 = std::chrono::steady_clock::now();
  predict_gpu(ctx, lay, model, xb.data(), params.data(), p16.size() ? p16.data() : nullptr, x, plan, buf);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.windows = plan.windows.size();
  r.rows = r.windows * size_t(plan.L);
  for (const PlanWindow& w : plan.windows) r.kept += size_t(w.keep_to - w.keep_from);
  return r;
}

}  // namespace

int run_predict_bench(const BenchArgs& a) {
  std::vector<int> dims;
  std::stringstream in(a.predict_panel);
  for (std::string v; std::getline(in, v, ',');) dims.push_back(std::stoi(v));
  require(dims.size() == 3 && dims[0] >= 1 && dims[1] >= 2 && dims[2] >= 1,
          "bench --predict: --panel is N,T,F (e.g. 5000,2500,158), got '" + a.predict_panel + "'");
  const int N = dims[0], T = dims[1], F = dims[2], C = a.predict_seq_len;
  const int dates = a.predict_dates > 0 ? std::min(a.predict_dates, T) : T;
  require(C >= 1 && C <= T, "bench --predict: --seq-len must be in [1, T]");
  const Precision precision = a.precision.value_or(Precision::FP32);
  Context ctx(0);
  std::printf("ml-alpha predict bench on %s; panel N = %d x T = %d x F = %d (%.1f GB), train.seq_len C = %d, the last "
              "%d dates predicted, %s; seconds from the panel in device memory to the predictions on the host\n",
              cuda_device_summary(0).c_str(), N, T, F, double(N) * T * F * 4 / 1e9, C, dates, to_string(precision).c_str());
  DeviceBuffer<float> x(size_t(N) * T * F);
  {
    const std::vector<float> host = random_panel(x.size());
    x.upload(host);
  }
  const DeviceFeatures feats{x.data(), N, T, F};
  std::printf("| model | mode | windows | rows of C | tile | seconds | dates/s | Mrows/s | all %d x %d dates, s |\n"
              "|---|---|---|---|---|---|---|---|---|\n", N, T);
  std::stringstream list(a.configs);
  for (std::string name; std::getline(list, name, ',');) {
    const BenchShape& s = bench_shape(name);
    BenchShape shape = s;
    shape.F = F;
    const ModelLayout lay(bench_model_config(shape));
    TrainConfig tc = bench_train_config(shape, 1);
    tc.L = C;
    DeviceBuffer<float> params(lay.table.total());
    params.upload(init_params(lay, 1));
    const WindowPlan window = date_windows(N, T, C, T - dates, T);
    WindowPlan carry;  // one window per instrument over all its rows, keeping the predicted dates
    carry.N = N, carry.T = T, carry.L = T, carry.t0 = T - dates, carry.t1 = T;
    for (int i = 0; i < N; ++i) carry.windows.push_back({i, 0, T - dates, T});
    const WindowPlan tiled = tiled_windows(N, T, C, 0, T - dates, T);
    for (const auto& [mode, plan] : {std::pair<const char*, const WindowPlan*>{"window", &window}, {"carry", &carry},
                                     {"tiled (old)", &tiled}}) {
      const Timed r = time_plan(ctx, lay, tc, params, feats, *plan, precision);
      // Every date of the panel: window and tiled scale with the dates, carry's forward covers them all already.
      const double all = plan == &carry ? r.seconds : r.seconds / double(r.kept) * double(N) * T;
      std::printf("| %s | %s | %zu | %.3g | %d | %.3f | %.3g | %.1f | %.1f |\n", name.c_str(), mode, r.windows,
                  double(r.rows) / C, r.tile, r.seconds, double(r.kept) / r.seconds, double(r.rows) / r.seconds / 1e6,
                  all);
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace mlalpha

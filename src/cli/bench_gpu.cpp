// `ml-alpha bench` on the GPU (bench.h): the DESIGN section 5 configurations' training step, and AdamW + clip alone.
#include "cli/bench.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <sstream>
#include <vector>

#include "core/context.h"
#include "core/cuda_event.h"
#include "train/trainer_gpu.h"

namespace mlalpha {

namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : (v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]));
}

// Times `steps` calls of f with CUDA events around each; returns per-call milliseconds.
template <typename F>
std::vector<float> time_calls(cudaStream_t st, int steps, F&& f) {
  std::vector<CudaEvent> ev(steps + 1);
  ev[0].record(st);
  for (int i = 0; i < steps; ++i) {
    f();
    ev[i + 1].record(st);
  }
  ev[steps].synchronize();
  std::vector<float> ms(steps);
  for (int i = 0; i < steps; ++i) ms[i] = elapsed_ms(ev[i], ev[i + 1]);
  return ms;
}

// Returns the median step in ms. carry: train.state = "carry" (the same batch shape, consecutive windows, the lanes'
// states carried), marked "c" after the precision.
double bench_model(Context& ctx, const BenchShape& s, Precision precision, const BenchArgs& a, double t_start, bool first,
                   bool carry = false) {
  const std::unique_ptr<GpuTrainer> trainer =
      make_bench_trainer(ctx, s, precision, 1 + a.warmup + a.steps, carry ? StateMode::Carry : StateMode::Zero,
                         a.time_batches);
  GpuTrainer& tr = *trainer;
  tr.step();
  const StepRecord r1 = tr.record(1);
  const double first_step_s = now_seconds() - t_start;
  for (int i = 0; i < a.warmup; ++i) tr.step();
  const auto ms = time_calls(ctx.stream(), a.steps, [&] { tr.step(); });
  const StepRecord last = tr.record(tr.steps_enqueued());
  const double med = median(ms);
  std::printf("| %-2s %-4s%s | %4d | %5d | %5d | %2d | %9.1fM | %9.3f | %9.3f | %12.0f | %9.2f%s | %8.4f -> %.4f | %10s |\n",
              s.name, to_string(precision).c_str(), carry ? " c" : "", s.B, s.L, s.D, s.NL, double(tr.layout().table.count()) / 1e6, med,
              double(*std::min_element(ms.begin(), ms.end())), double(s.B) * s.L / (med / 1e3), first_step_s,
              first ? "" : "*", double(r1.loss), double(last.loss), format_bytes(double(tr.activation_bytes())).c_str());
  std::fflush(stdout);
  return med;
}

void bench_optimizer(Context& ctx, size_t n, int steps) {
  n = (n + 63) / 64 * 64;
  DeviceBuffer<float> p(n), g(n), m(n), v(n), partials(gpu::grad_norm_blocks(n)), copy_src(n), copy_dst(n);
  DeviceBuffer<unsigned char> decay(n);
  // Non-zero, non-constant contents: zeros can time faster than real data.
  for (auto* b : {&p, &g, &m, &v, &copy_src}) b->fill_bytes(0x3C, ctx.stream());  // 0x3C3C3C3C ≈ 0.0115f
  decay.fill_bytes(1, ctx.stream());
  DeviceBuffer<DeviceStepState> st(1);
  st.fill_bytes(0, ctx.stream());
  const gpu::MemberOptim mo{{1.0f, 0.9f, 0.999f, {1e-3f, 0.1f, 0, 1000000, true}}, {0.9f, 0.999f, 1e-8f, 0.01f}};
  DeviceBuffer<gpu::MemberOptim> opt(1);
  opt.upload(&mo, 1);
  auto opt_step = [&] {
    gpu::grad_norm_sq_phase1(g.data(), n, 1, partials.data(), ctx.stream());
    gpu::grad_norm_sq_phase2_clip(partials.data(), gpu::grad_norm_blocks(n), opt.data(), 1, st.data(), nullptr, nullptr,
                                  nullptr, 0, ctx.stream());  // as the trainer's step
    gpu::adamw_step_devscale(p.data(), g.data(), m.data(), v.data(), decay.data(), n, 1, opt.data(), st.data(),
                             ctx.stream());
  };
  for (int i = 0; i < 5; ++i) opt_step();
  const double opt_ms = median(time_calls(ctx.stream(), steps, opt_step));
  auto copy = [&] {
    MLALPHA_CUDA_CHECK(cudaMemcpyAsync(copy_dst.data(), copy_src.data(), n * 4, cudaMemcpyDeviceToDevice, ctx.stream()));
  };
  copy();
  const double copy_ms = median(time_calls(ctx.stream(), steps, copy));
  // Bytes the optimizer must move: norm reads g (4); AdamW reads p, g, m, v (16) + decay (1), writes p, m, v (12).
  const double opt_bytes = 33.0 * double(n), copy_bytes = 8.0 * double(n);
  const double opt_bw = opt_bytes / (opt_ms / 1e3) / 1e9, copy_bw = copy_bytes / (copy_ms / 1e3) / 1e9;
  std::printf("| AdamW+clip %5.0fM params | %8.3f ms | %7.0f GB/s (33 B/param) | copy %7.0f GB/s | %5.1f%% of copy |\n",
              double(n) / 1e6, opt_ms, opt_bw, copy_bw, 100.0 * opt_bw / copy_bw);
  std::fflush(stdout);
}

}  // namespace

std::unique_ptr<GpuTrainer> make_bench_trainer(Context& ctx, const BenchShape& s, Precision precision, int64_t total_steps,
                                               StateMode state, bool time_batches) {
  const Panel data = bench_panel(s);  // the trainer keeps a device copy
  TrainConfig tc = bench_train_config(s, total_steps);
  if (time_batches) tc = bench_time_batches(tc, s);
  tc.precision = precision;
  tc.state = state;
  return std::make_unique<GpuTrainer>(ctx, bench_model_config(s), tc, data, GpuTrainerOptions{true, 0});
}

int run_bench(const BenchArgs& a, double t_start) {
  require(a.steps >= 1 && a.warmup >= 0, "bench: --steps must be >= 1 and --warmup >= 0");
  if (a.time_batches) {  // every configuration's time batches checked before the first output
    std::stringstream names(a.configs);
    for (std::string name; std::getline(names, name, ',');) bench_time_batches({}, bench_shape(name));
  }
  Context ctx(0);
  const std::string precision = a.precision ? to_string(*a.precision) : "fp32 (L: tf32, then fp32)";
  std::printf("ml-alpha bench on %s; %s; median of %d steps after %d warm-up steps (CUDA events, graph replay)\n",
              cuda_device_summary(0).c_str(), precision.c_str(), a.steps, a.warmup);
  std::printf("| config    |    B |     L |     D | NL |    params |    ms/step |     min ms |     tokens/s | first step s | loss first -> last | activations |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  bool first = true;
  std::vector<std::string> ratios;
  // --carry: each configuration's step again with train.state = "carry", right after its zero-state step.
  auto both = [&](const BenchShape& s, Precision p, bool f) {
    const double zero = bench_model(ctx, s, p, a, t_start, f);
    if (!a.carry) return;
    const double carry = bench_model(ctx, s, p, a, t_start, false, true);
    char line[128];
    std::snprintf(line, sizeof line, "%s %s: the carry step is %.3f× the zero-state step (%.3f / %.3f ms)", s.name,
                  to_string(p).c_str(), carry / zero, carry, zero);
    ratios.push_back(line);
  };
  std::stringstream list(a.configs);
  for (std::string name; std::getline(list, name, ',');) {
    const BenchShape& s = bench_shape(name);
    if (a.precision) {
      both(s, *a.precision, first);
    } else if (name == "L") {
      both(s, Precision::TF32, first);
      both(s, Precision::FP32, false);
    } else {
      both(s, Precision::FP32, first);
    }
    first = false;
  }
  std::printf("(* first step s: from process start, so it includes the configurations timed before it)\n");
  if (a.carry) std::printf("(c: train.state = 'carry', the same batch of consecutive windows with the states carried)\n");
  if (a.time_batches) std::printf("(every step with time batches: B / 16 dates × 16 instruments, the IC loss)\n");
  for (const std::string& r : ratios) std::printf("%s\n", r.c_str());
  if (a.optimizer) {
    for (size_t n : {size_t(25'000'000), size_t(100'000'000)}) bench_optimizer(ctx, n, a.steps);
  }
  return 0;
}

}  // namespace mlalpha

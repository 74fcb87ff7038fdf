// `ml-alpha bench --device cpu`: the CPU trainer's step (the fast CPU model, src/cpu) on the configurations
// asked, at each thread count asked, and optionally the reference model's step (bench.h, run_cpu_bench).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli/bench.h"
#include "core/error.h"
#include "cpu/blas.h"
#include "model/model_cpu.h"
#include "cpu/thread_pool.h"
#include "data/synthetic.h"
#include "train/trainer_cpu.h"

namespace mlalpha {

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string tok; std::getline(ss, tok, ',');)
    if (!tok.empty()) out.push_back(tok);
  return out;
}

// "Intel(R) Xeon(R) Platinum 8480+" from /proc/cpuinfo ("" where there is none).
std::string cpu_model_name() {
  std::ifstream f("/proc/cpuinfo");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      return colon == std::string::npos ? "" : line.substr(line.find_first_not_of(' ', colon + 1));
    }
  return "";
}

struct StepTimes {
  double step, forward, backward, optimizer;  // medians, seconds
};

// Times `steps` steps of `tr` after `warmup` untimed ones: the whole step (wall) and its parts.
StepTimes time_trainer(CpuTrainer& tr, int warmup, int steps) {
  for (int i = 0; i < warmup; ++i) tr.step();
  std::vector<double> whole, fwd, bwd, opt;
  for (int i = 0; i < steps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    tr.step();
    whole.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    const CpuStepTimes& p = tr.step_times();
    fwd.push_back(p.forward), bwd.push_back(p.backward), opt.push_back(p.optimizer);
  }
  return {median(whole), median(fwd), median(bwd), median(opt)};
}

void row(const char* impl, const BenchShape& s, int threads, const StepTimes& t, double scaling) {
  char sc[16] = "";
  if (scaling > 0) std::snprintf(sc, sizeof sc, "%.2fx", scaling);
  std::printf("| %-9s | %-7s | %3d | %10.3f ms | %8.3f | %8.3f | %8.3f | %10.0f | %7s |\n", impl, s.name, threads,
              t.step * 1e3, t.forward * 1e3, t.backward * 1e3, t.optimizer * 1e3, double(s.B) * s.L / t.step, sc);
  std::fflush(stdout);
}

}  // namespace

int run_cpu_bench(const BenchArgs& a) {
  require(a.steps >= 1 && a.warmup >= 0, "bench: --steps must be >= 1 and --warmup >= 0");
  const int available = cpu::available_cpus();
  std::vector<int> threads;
  if (a.threads.empty()) {
    threads = {1};
    if (std::min(available, cpu::kMaxCpuThreads) > 1) threads.push_back(std::min(available, cpu::kMaxCpuThreads));
  } else {
    for (const std::string& t : split_list(a.threads)) {
      size_t used = 0;
      int v = -1;
      try {
        v = std::stoi(t, &used);
      } catch (const std::exception&) {
      }
      require(used == t.size() && v >= 1 && v <= cpu::kMaxCpuThreads,
              "bench: --threads takes thread counts from 1 to " + std::to_string(cpu::kMaxCpuThreads) + ", got '" + t + "'");
      threads.push_back(v);
    }
    require(!threads.empty(), "bench: --threads is empty");
  }
  const std::vector<std::string> configs = split_list(a.configs);
  for (const std::string& name : configs)  // every name (and its time batches) checked before the first timing
    if (a.time_batches) bench_time_batches({}, bench_shape(name));
    else bench_shape(name);
  std::printf("ml-alpha bench --device cpu: the CPU trainer's step (gather the batch, zero the gradients, forward, loss, "
              "backward, global norm, clip, AdamW), median of %d steps (S and larger: %d) after %d warm-up\n",
              a.steps, std::max(5, a.steps / 3), a.warmup);
  const std::string name = cpu_model_name();
  std::printf("CPU: %s, %d CPUs available to this process\nBLAS: %s\n\n", name.empty() ? "?" : name.c_str(), available,
              cpu::blas_description().c_str());
  if (a.time_batches) std::printf("Every step with time batches: B / 16 dates × 16 instruments, the IC loss.\n\n");
  std::printf("| model     | config  | thr | step          | fwd ms   | bwd ms   | optim ms | tokens/s   | scaling |\n"
              "|---|---|---|---|---|---|---|---|---|\n");
  std::vector<std::string> checks;
  for (const std::string& cname : configs) {
    const BenchShape& s = bench_shape(cname);
    const bool large = s.B * s.L >= 8192;  // ~1 s a step on one thread: fewer steps
    const int steps = large ? std::max(5, a.steps / 3) : a.steps;
    const Panel panel = bench_panel(s);
    const ModelConfig mc = bench_model_config(s);
    const TrainConfig tc = a.time_batches ? bench_time_batches(bench_train_config(s, 2 + a.warmup + steps), s)
                                          : bench_train_config(s, 2 + a.warmup + steps);
    // The bits do not depend on the thread count: two steps' weights on each, against the first.
    std::vector<float> first;
    std::string verdict = std::string(s.name) + ": the weights after 2 steps, against " + std::to_string(threads[0]) +
                          " thread(s):";
    for (int t : threads) {
      CpuTrainer tr(mc, tc, panel, {}, {.compute = resolve({.device = "cpu", .threads = t})});
      tr.step();
      tr.step();
      if (first.empty()) first = tr.params();
      verdict += " " + std::to_string(t) + (tr.params() == first ? " same" : " DIFFERENT");
    }
    checks.push_back(verdict);
    double first_step = 0;
    for (int t : threads) {
      CpuTrainer tr(mc, tc, panel, {}, {.compute = resolve({.device = "cpu", .threads = t})});
      const StepTimes st = time_trainer(tr, a.warmup, steps);
      if (first_step == 0) first_step = st.step;
      row("fast", s, t, st, first_step / st.step);
      if (a.carry) {  // the same windows' count and shape, consecutive, with the states carried between steps
        TrainConfig ct = tc;
        ct.state = StateMode::Carry;
        CpuTrainer cr(mc, ct, panel, {}, {.compute = resolve({.device = "cpu", .threads = t})});
        const StepTimes cs = time_trainer(cr, a.warmup, steps);
        row("carry", s, t, cs, 0.0);
        char ratio[96];
        std::snprintf(ratio, sizeof ratio, "%s, %d thread(s): the carry step is %.3f× the zero-state step", s.name, t,
                      cs.step / st.step);
        checks.push_back(ratio);
      }
    }
    if (a.reference) {  // plain loops on one thread: seconds a step for S, so a few steps
      CpuTrainer tr(mc, tc, panel, {}, {.compute = resolve({.device = "cpu", .threads = 1, .kernels = "reference"})});
      row("reference", s, 1, time_trainer(tr, 1, large ? 2 : std::max(3, a.steps / 3)), 0.0);
    }
  }
  std::printf("\n");
  for (const std::string& c : checks) std::printf("%s\n", c.c_str());
  return 0;
}

}  // namespace mlalpha

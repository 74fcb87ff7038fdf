// Step time of the fast CPU model (src/cpu) on the default and S configurations, at the thread counts
// asked, and optionally of the reference model (RefModel<float>, one thread): the whole training step as
// the CPU trainer would run it — gather a batch of windows from an in-memory panel, zero the gradient
// arena, forward, loss, backward, global norm, clip, AdamW — median over the timed steps.
//   ml-alpha-cpu-bench [--configs default,S] [--threads 1,16] [--steps 30] [--warmup 3] [--ref]
// Prints one Markdown table row per (configuration, threads); bench/torch_reference.py cpu prints the
// matching PyTorch rows (scripts/cpu_bench.sh runs both).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "cpu/blas.h"
#include "cpu/model_cpu.h"
#include "cpu/optim_cpu.h"
#include "cpu/thread_pool.h"
#include "model/model_ref.h"
#include "train/optim.h"

namespace {

using namespace mlalpha;

struct Shape {
  std::string name;
  int B, L, F, D, NL, N, P, Q;
};
const Shape kShapes[] = {{"default", 16, 64, 8, 32, 2, 16, 16, 64}, {"S", 64, 256, 32, 128, 4, 64, 32, 64}};

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

std::vector<int> parse_ints(const std::string& s) {
  std::vector<int> out;
  std::stringstream ss(s);
  for (std::string tok; std::getline(ss, tok, ',');) out.push_back(std::atoi(tok.c_str()));
  return out;
}

// A panel of 16 instruments × (L + 512) steps and a sampler of B random windows per step (fixed seed).
struct Data {
  int inst = 16, T, F, K = 1, B, L;
  std::vector<float> px, py, x, y;
  std::mt19937_64 rng{12345};
  Data(const Shape& s) : T(s.L + 512), F(s.F), B(s.B), L(s.L) {
    std::normal_distribution<float> n;
    px.resize(size_t(inst) * T * F);
    py.resize(size_t(inst) * T * K);
    for (float& v : px) v = n(rng);
    for (float& v : py) v = n(rng);
    x.resize(size_t(B) * L * F);
    y.resize(size_t(B) * L * K);
  }
  void sample() {
    for (int b = 0; b < B; ++b) {
      const int i = int(rng() % inst), t0 = int(rng() % (T - L + 1));
      std::memcpy(&x[size_t(b) * L * F], &px[(size_t(i) * T + t0) * F], sizeof(float) * L * F);
      std::memcpy(&y[size_t(b) * L * K], &py[(size_t(i) * T + t0) * K], sizeof(float) * L * K);
    }
  }
};

ModelConfig config_of(const Shape& s) {
  ModelConfig c;
  c.F = s.F;
  c.D = s.D;
  c.NL = s.NL;
  c.N = s.N;
  c.P = s.P;
  c.Q = s.Q;
  return c;
}

// Times `steps` steps of `step` after `warmup`; returns the median seconds of the whole step and of its parts.
template <typename Step>
std::vector<double> time_steps(int warmup, int steps, Step&& step) {
  std::vector<std::vector<double>> t(4);
  for (int i = 0; i < warmup + steps; ++i) {
    double ph[4];
    step(ph);
    if (i >= warmup)
      for (int k = 0; k < 4; ++k) t[k].push_back(ph[k]);
  }
  return {median(t[0]), median(t[1]), median(t[2]), median(t[3])};
}

// speedup: the first thread count's step time over this one's (0: not shown).
void row(const char* impl, const Shape& s, int threads, const std::vector<double>& t, double speedup) {
  char sp[16] = "";
  if (speedup > 0) std::snprintf(sp, sizeof sp, "%.2fx", speedup);
  std::printf("| %-14s | %-7s | %3d | %10.3f ms | %8.3f | %8.3f | %8.3f | %11.0f tok/s | %7s |\n", impl,
              s.name.c_str(), threads, t[0] * 1e3, t[1] * 1e3, t[2] * 1e3, t[3] * 1e3, s.B * s.L / t[0], sp);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  std::string configs = "default,S", threads_arg;
  int steps = 30, warmup = 3;
  bool with_ref = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--configs") configs = next();
    else if (a == "--threads") threads_arg = next();
    else if (a == "--steps") steps = std::atoi(next().c_str());
    else if (a == "--warmup") warmup = std::atoi(next().c_str());
    else if (a == "--ref") with_ref = true;
    else {
      std::fprintf(stderr, "usage: ml-alpha-cpu-bench [--configs default,S] [--threads 1,N] [--steps 30] "
                           "[--warmup 3] [--ref]\n");
      return 2;
    }
  }
  const int hw = cpu::available_cpus();
  const std::vector<int> thread_counts = threads_arg.empty() ? std::vector<int>{1, hw} : parse_ints(threads_arg);
  std::printf("ml-alpha fast CPU model: median of %d steps (S: %d) after %d warm-up (whole step: gather, zero grads, "
              "forward, loss, backward, norm, clip, AdamW); %d CPUs available\n", steps, std::max(5, steps / 3),
              warmup, hw);
  std::printf("BLAS: %s\n\n", cpu::blas_description().c_str());
  std::printf("| impl           | config  | thr | step          | fwd ms   | bwd ms   | optim ms | throughput        | "
              "scaling |\n|---|---|---|---|---|---|---|---|---|\n");
  std::vector<std::string> checks;
  for (const std::string& name : [&] {
         std::vector<std::string> v;
         std::stringstream ss(configs);
         for (std::string t; std::getline(ss, t, ',');) v.push_back(t);
         return v;
       }()) {
    const Shape* sp = nullptr;
    for (const Shape& s : kShapes)
      if (s.name == name) sp = &s;
    if (!sp) {
      std::fprintf(stderr, "unknown configuration %s (default, S)\n", name.c_str());
      return 2;
    }
    const Shape& s = *sp;
    const ModelLayout lay(config_of(s));
    const size_t n = lay.table.total();
    const std::vector<unsigned char> decay = lay.table.decay_mask();
    const LossParams lp{s.B, s.L, 1, LossKind::MSE, 1.0f, 0};
    {  // Bit-reproducibility across thread counts on this machine: one step's loss and gradients each.
      Data d(s);
      d.sample();
      const std::vector<float> P = init_params(lay, 1);
      std::vector<float> first;
      std::string verdict = s.name + ": one step's gradients, bitwise against " + std::to_string(thread_counts[0]) +
                            " threads:";
      for (int threads : thread_counts) {
        cpu::CpuModel model(lay, {.threads = threads});
        model.forward(P.data(), d.x.data(), s.B, s.L);
        model.loss(d.y.data(), lp);
        std::vector<float> G(n, 0.0f);
        model.backward(P.data(), G.data(), nullptr);
        if (first.empty()) first = G;
        const bool same = std::memcmp(first.data(), G.data(), n * sizeof(float)) == 0;
        char buf[64];
        std::snprintf(buf, sizeof buf, " %d %s", threads, same ? "same" : "DIFFERENT");
        verdict.append(buf);
      }
      checks.push_back(verdict);
    }
    double first_step = 0;  // the first thread count's step, for the scaling column
    for (int threads : thread_counts) {
      Data d(s);
      std::vector<float> P = init_params(lay, 1), G(n), m(n, 0.0f), v(n, 0.0f);
      cpu::CpuModel model(lay, {.threads = threads});
      model.reserve(s.B, s.L);
      std::vector<double> part(cpu::norm_blocks(n));
      int64_t step_no = 0;
      const int n_steps = s.name == "S" ? std::max(5, steps / 3) : steps;  // S: ~1 s a step on one thread
      const auto t = time_steps(warmup, n_steps, [&](double* ph) {
        const double t0 = now();
        d.sample();
        std::fill(G.begin(), G.end(), 0.0f);
        model.forward(P.data(), d.x.data(), s.B, s.L);
        volatile float loss = model.loss(d.y.data(), lp).loss;
        (void)loss;
        const double t1 = now();
        model.backward(P.data(), G.data(), nullptr);
        const double t2 = now();
        const ClipResult clip = clip_scale(cpu::grad_norm_sq(model.pool(), G.data(), n, part.data()), 1.0f);
        if (!clip.skip)
          cpu::adamw(model.pool(), P.data(), G.data(), m.data(), v.data(), decay.data(), n,
                     {.lr = 1e-3f, .weight_decay = 0.01f, .step = ++step_no}, clip.scale);
        const double t3 = now();
        ph[0] = t3 - t0, ph[1] = t1 - t0, ph[2] = t2 - t1, ph[3] = t3 - t2;
      });
      if (first_step == 0) first_step = t[0];
      row("ml-alpha cpu", s, threads, t, first_step / t[0]);
    }
    if (with_ref) {  // the reference, one thread; S takes seconds a step, so few steps
      Data d(s);
      std::vector<float> P = init_params(lay, 1), G(n), m(n, 0.0f), v(n, 0.0f);
      RefModel<float> ref(lay, true);
      int64_t step_no = 0;
      const int rs = s.name == "S" ? 2 : std::max(3, steps / 3);
      const auto t = time_steps(1, rs, [&](double* ph) {
        const double t0 = now();
        d.sample();
        std::fill(G.begin(), G.end(), 0.0f);
        ref.forward(P.data(), d.x.data(), s.B, s.L);
        volatile float loss = ref.loss(d.y.data(), lp).loss;
        (void)loss;
        const double t1 = now();
        ref.backward(P.data(), G.data(), nullptr);
        const double t2 = now();
        const ClipResult clip = clip_scale(ref::grad_norm_sq(G.data(), n), 1.0f);
        AdamWParams a;
        a.weight_decay = 0.01f;
        a.step = ++step_no;
        if (!clip.skip) ref::adamw(P.data(), G.data(), m.data(), v.data(), decay.data(), n, a, clip.scale);
        const double t3 = now();
        ph[0] = t3 - t0, ph[1] = t1 - t0, ph[2] = t2 - t1, ph[3] = t3 - t2;
      });
      row("reference", s, 1, t, 0.0);
    }
  }
  std::printf("\n");
  for (const std::string& c : checks) std::printf("%s\n", c.c_str());
  return 0;
}

// ml-alpha: the command-line front end. Subcommands: train (built-in synthetic data for now), info.
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <exception>
#include <string>

#include "cli/bench.h"
#include "core/context.h"
#include "data/synthetic.h"
#include "mlalpha/config.h"
#include "train/trainer_cpu.h"
#include "train/trainer_gpu.h"

using namespace mlalpha;

namespace {

struct TrainArgs {
  ModelConfig model;
  TrainConfig train;
  SynthParams synth;
  std::string device = "auto";
  bool tf32 = false, no_graph = false;
  std::string loss = "mse", schedule = "cosine";
};

void add_train_options(CLI::App& cmd, TrainArgs& a) {
  cmd.add_option("--steps", a.train.steps, "optimizer steps")->capture_default_str();
  cmd.add_option("--batch,-B", a.train.B, "windows per batch")->capture_default_str();
  cmd.add_option("--seq-len,-L", a.train.L, "window length")->capture_default_str();
  cmd.add_option("--lr", a.train.lr, "peak learning rate")->capture_default_str();
  cmd.add_option("--min-lr-ratio", a.train.min_lr_ratio, "cosine floor as a fraction of lr")->capture_default_str();
  cmd.add_option("--warmup", a.train.warmup, "linear warm-up steps")->capture_default_str();
  cmd.add_option("--schedule", a.schedule, "cosine | constant")->capture_default_str();
  cmd.add_option("--weight-decay", a.train.weight_decay, "AdamW decoupled weight decay")->capture_default_str();
  cmd.add_option("--clip", a.train.clip, "global gradient-norm clip (<= 0 disables)")->capture_default_str();
  cmd.add_option("--loss", a.loss, "mse | huber")->capture_default_str();
  cmd.add_option("--huber-delta", a.train.huber_delta, "Huber delta")->capture_default_str();
  cmd.add_option("--burn-in", a.train.burn_in, "leading positions of each window left out of the loss")
      ->capture_default_str();
  cmd.add_option("--seed", a.train.seed, "seed for initialisation and sampling")->capture_default_str();
  cmd.add_option("--log-every", a.train.log_every, "print the loss every N steps")->capture_default_str();
  cmd.add_option("--device", a.device, "auto | cpu | gpu (auto: the GPU when there is one)")->capture_default_str();
  cmd.add_flag("--tf32", a.tf32, "GPU GEMMs in tf32 on the tensor cores (default: exact fp32)");
  cmd.add_flag("--no-graph", a.no_graph, "GPU: launch each step eagerly instead of replaying a CUDA graph (debugging)");
  cmd.add_option("--d-model", a.model.D, "model width D")->capture_default_str();
  cmd.add_option("--layers", a.model.NL, "Mamba2 layers")->capture_default_str();
  cmd.add_option("--d-state", a.model.N, "SSM state size N")->capture_default_str();
  cmd.add_option("--head-dim", a.model.P, "head dim P")->capture_default_str();
  cmd.add_option("--groups", a.model.G, "B/C groups G")->capture_default_str();
  cmd.add_option("--chunk", a.model.Q, "SSD chunk length Q")->capture_default_str();
  cmd.add_option("--features", a.synth.F, "synthetic features F")->capture_default_str();
  cmd.add_option("--instruments", a.synth.N, "synthetic instruments")->capture_default_str();
  cmd.add_option("--timesteps", a.synth.T, "synthetic time steps per instrument")->capture_default_str();
  cmd.add_option("--noise", a.synth.noise, "synthetic target noise")->capture_default_str();
  cmd.add_option("--data-seed", a.synth.seed, "synthetic data seed")->capture_default_str();
}

int run_train(TrainArgs& a) {
  a.train.loss = parse_loss(a.loss);
  a.train.schedule = parse_schedule(a.schedule);
  a.model.F = a.synth.F;
  a.model.K = a.synth.K;
  a.model.validate();
  a.train.validate();
  if (a.device != "auto" && a.device != "cpu" && a.device != "gpu")
    throw Error("--device must be auto, cpu or gpu, got '" + a.device + "'");
  const int gpus = cuda_device_count();
  if (a.device == "gpu" && gpus == 0) throw Error("--device gpu: no CUDA device found");
  const bool on_gpu = a.device == "gpu" || (a.device == "auto" && gpus > 0);

  const Panel data = make_synthetic(a.synth);
  const ModelLayout layout(a.model);
  const ModelConfig& m = a.model;
  std::printf("ml-alpha train: device %s\n", on_gpu ? ("gpu: " + cuda_device_summary(0)).c_str() : "cpu");
  std::printf("data: synthetic panel N=%d T=%d F=%d K=%d noise=%g | model: D=%d NL=%d H=%d P=%d N=%d G=%d, %zu params\n",
              data.N, data.T, data.F, data.K, double(a.synth.noise), m.D, m.NL, m.H(), m.P, m.N, m.G,
              layout.table.count());
  std::printf("train: B=%d L=%d steps=%lld lr=%g (%s, warm-up %lld) wd=%g clip=%g loss=%s seed=%llu\n", a.train.B,
              a.train.L, static_cast<long long>(a.train.steps), double(a.train.lr), a.schedule.c_str(),
              static_cast<long long>(a.train.warmup), double(a.train.weight_decay), double(a.train.clip),
              a.loss.c_str(), static_cast<unsigned long long>(a.train.seed));

  const auto t0 = std::chrono::steady_clock::now();
  double first_loss = 0, window_loss = 0;
  int64_t window_n = 0, skipped = 0;
  // Both trainers report through StepRecord; the GPU one is read only at log points.
  auto report = [&](const StepRecord& r) {
    if (r.step == 1) first_loss = r.loss;
    skipped += r.skipped;
    if (!r.skipped) window_loss += r.loss, ++window_n;
    if (r.step % a.train.log_every == 0 || r.step == a.train.steps) {
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::printf("step %6lld  loss %.5g  grad_norm %.4g  lr %.2e  %.1f steps/s%s\n", r.step,
                  window_n ? window_loss / double(window_n) : 0.0, double(r.grad_norm), double(r.lr),
                  double(r.step) / secs, skipped ? ("  (" + std::to_string(skipped) + " skipped)").c_str() : "");
      std::fflush(stdout);
      window_loss = 0;
      window_n = 0;
    }
  };
  if (on_gpu) {
    Context ctx(0);
    GpuTrainer trainer(ctx, a.model, a.train, data, {!a.no_graph, a.tf32, 0});
    int64_t reported = 0;
    for (int64_t s = 1; s <= a.train.steps; ++s) {
      trainer.step();
      if (s % a.train.log_every == 0 || s == a.train.steps)
        while (reported < s) report(trainer.record(++reported));
    }
  } else {
    CpuTrainer trainer(a.model, a.train, data);
    for (int64_t s = 0; s < a.train.steps; ++s) {
      const StepStats st = trainer.step();
      report({st.step, st.loss, st.grad_norm, st.clip_scale, st.lr, st.skipped, 0});
    }
  }
  std::printf("done: first-step loss %.5g, %lld skipped steps\n", first_loss, static_cast<long long>(skipped));
  return 0;
}

int run_info() {
  const int n = cuda_device_count();
  std::printf("ml-alpha: CUDA devices: %d\n", n);
  for (int i = 0; i < n; ++i) std::printf("  [%d] %s\n", i, cuda_device_summary(i).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const double t_start =
      std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  CLI::App app{"ml-alpha: train Mamba2 sequence models on market time series, on the GPU"};
  app.require_subcommand(1);
  TrainArgs targs;
  CLI::App* train = app.add_subcommand("train", "train a model (built-in synthetic dataset)");
  add_train_options(*train, targs);
  CLI::App* info = app.add_subcommand("info", "print the CUDA devices this build can see");
  BenchArgs bargs;
  CLI::App* bench = app.add_subcommand("bench", "time the DESIGN section 5 configurations on the GPU");
  bench->add_option("--configs", bargs.configs, "comma-separated subset of S,M,L")->capture_default_str();
  bench->add_option("--steps", bargs.steps, "timed steps per configuration (median reported)")->capture_default_str();
  bench->add_option("--warmup", bargs.warmup, "untimed steps before timing")->capture_default_str();
  bench->add_flag("--tf32", bargs.tf32, "run every configuration in tf32 (L always runs tf32 and fp32)");
  bench->add_flag("!--no-optimizer", bargs.optimizer, "skip the AdamW + clip over 25M/100M parameters case");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    if (*train) return run_train(targs);
    if (*info) return run_info();
    if (*bench) {
      require(cuda_device_count() > 0, "bench needs a CUDA device and found none");
      return run_bench(bargs, t_start);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ml-alpha: error: %s\n", e.what());
    return 1;
  }
  return 0;
}

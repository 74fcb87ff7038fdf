// ml-alpha: the command-line front end. Every subcommand takes --config FILE (TOML, configs/example.toml)
// and --set section.key=value overrides; the common settings also have their own flags.
#include <CLI/CLI.hpp>

#include <charconv>
#include <chrono>
#include <cstdio>
#include <exception>
#include <optional>
#include <string>

#include "cli/bench.h"
#include "cli/commands.h"
#include "mlalpha/device.h"
#include "mlalpha/error.h"

using namespace mlalpha;

namespace {

// A flag that becomes the override "key=value" when given.
template <typename T>
struct Flag {
  std::string key;
  std::optional<T> value;
};

// Integers are kept as the text the user typed and checked here, so an out-of-range count is an error
// instead of CLI11's silent saturation to the largest int64.
struct Int {
  std::string text;
};
const CLI::Validator kInteger(
    [](std::string& s) -> std::string {
      int64_t v = 0;
      const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
      if (r.ec == std::errc::result_out_of_range) return "'" + s + "' is out of range for an integer";
      if (r.ec != std::errc() || r.ptr != s.data() + s.size() || s.empty()) return "'" + s + "' is not an integer";
      return "";
    },
    "INT");
// train.batch: an integer, or "time" for cross-sectional batches (docs/config.md).
const CLI::Validator kBatch(
    [](std::string& s) -> std::string {
      if (s == "time" || kInteger(s).empty()) return "";
      return "'" + s + "' is neither an integer (windows per step) nor 'time' (cross-sectional batches)";
    },
    "INT|time");

// --precision P and its older spelling --tf32; precision_flag (commands.h) reads them after parsing.
void add_precision(CLI::App& c, std::string& precision, bool& tf32, const std::string& key_note) {
  c.add_option("--precision", precision, std::string(kPrecisionHelp) + key_note)->type_name("fp32|tf32|bf16");
  c.add_flag("--tf32", tf32, "the older spelling of --precision tf32");
}

struct Flags {
  Flag<Int> steps{"train.steps", {}}, batch{"train.batch", {}}, seq_len{"train.seq_len", {}},
      warmup{"train.warmup", {}}, log_every{"train.log_every", {}}, seed{"train.seed", {}},
      eval_every{"run.eval_every", {}}, patience{"run.patience", {}}, d_model{"model.d_model", {}},
      layers{"model.layers", {}}, d_state{"model.d_state", {}}, head_dim{"model.head_dim", {}},
      chunk{"model.chunk", {}}, instruments{"data.instruments", {}}, timesteps{"data.timesteps", {}},
      n_features{"data.n_features", {}}, burn_in{"train.burn_in", {}}, stop_after{"run.stop_after", {}},
      save_every{"run.save_every", {}}, models{"train.models", {}};
  Flag<double> lr{"train.lr", {}}, weight_decay{"train.weight_decay", {}}, clip{"train.clip", {}},
      noise{"data.noise", {}};
  Flag<std::string> device{"run.device", {}}, out_dir{"run.out_dir", {}}, metric{"run.metric", {}},
      loss{"train.loss", {}}, schedule{"train.schedule", {}};
  std::string precision;  // --precision as given ("" = the config's)
  bool tf32 = false, no_graph = false;
  std::vector<std::string> sweep;  // --sweep KEY=V1,V2,... as given

  template <typename T>
  static void add(CLI::App& c, const char* name, Flag<T>& f, const char* help) {
    c.add_option(name, f.value, std::string(help) + " (" + f.key + ")");
  }
  // An integer option; `check` replaces the integer check where other forms are accepted (train.batch).
  static void add(CLI::App& c, const char* name, Flag<Int>& f, const char* help,
                  const CLI::Validator& check = kInteger) {
    c.add_option_function<std::string>(name, [&f](const std::string& v) { f.value = Int{v}; },
                                       std::string(help) + " (" + f.key + ")")
        ->check(check);
  }
  void add_all(CLI::App& c, bool training) {
    add(c, "--device", device, "auto | cpu | gpu");
    add_precision(c, precision, tf32, " (train.precision)");
    if (!training) return;
    add(c, "--steps", steps, "optimizer steps");
    add(c, "--batch,-B", batch, "windows per step, or 'time': train.dates cross-sections of train.instruments instruments",
        kBatch);
    add(c, "--seq-len,-L", seq_len, "window length");
    add(c, "--lr", lr, "peak learning rate");
    add(c, "--warmup", warmup, "linear warm-up steps");
    add(c, "--schedule", schedule, "cosine | constant");
    add(c, "--weight-decay", weight_decay, "AdamW decoupled weight decay");
    add(c, "--clip", clip, "global gradient-norm clip, <= 0 disables");
    add(c, "--loss", loss, "mse | huber | ic (ic needs --batch time)");
    add(c, "--burn-in", burn_in, "leading positions of each window left out of the loss");
    add(c, "--seed", seed, "initialisation and sampling seed");
    add(c, "--models", models, "train this many models together, member r with seed + r");
    c.add_option("--sweep", sweep,
                 "train a population over these values, KEY one of lr, weight_decay, clip, warmup: --sweep "
                 "lr=1e-3,3e-4 (repeatable, one KEY each; sets sweep.KEY)")
        ->allow_extra_args(false)
        ->type_name("KEY=V1,V2,...")
        ->check(CLI::Validator(
            [](std::string& s) -> std::string {
              try {
                sweep_override(s);
                return "";
              } catch (const Error& e) {
                return e.what();
              }
            },
            ""));
    add(c, "--log-every", log_every, "log interval in steps");
    add(c, "--eval-every", eval_every, "validation interval in steps (0: at the end)");
    add(c, "--metric", metric, "early-stopping metric: mse | ic | rank_ic | icir | dir_acc");
    add(c, "--patience", patience, "evaluations without improvement before stopping (0: never)");
    add(c, "--out-dir,-o", out_dir, "where metrics, plot and checkpoints go");
    add(c, "--stop-after", stop_after, "end this invocation after N steps, saving the last checkpoint");
    add(c, "--save-every", save_every,
        "also save the last checkpoint every N steps, so a crash or kill loses at most N steps (0: at the end only)");
    add(c, "--d-model", d_model, "model width D");
    add(c, "--layers", layers, "Mamba2 layers");
    add(c, "--d-state", d_state, "SSM state size N");
    add(c, "--head-dim", head_dim, "head dim P");
    add(c, "--chunk", chunk, "SSD chunk length Q");
    add(c, "--instruments", instruments, "synthetic data: instruments");
    add(c, "--timesteps", timesteps, "synthetic data: time steps");
    add(c, "--features", n_features, "synthetic data: features");
    add(c, "--noise", noise, "synthetic data: target noise");
    c.add_flag("--no-graph", no_graph, "launch each GPU step eagerly instead of replaying a CUDA graph (run.graph)");
  }
  template <typename T>
  static void emit(std::vector<std::string>& out, const Flag<T>& f) {
    if (!f.value) return;
    if constexpr (std::is_same_v<T, Int>)
      out.push_back(f.key + "=" + f.value->text);
    else if constexpr (std::is_same_v<T, std::string>)
      out.push_back(f.key + "=\"" + *f.value + "\"");
    else
      out.push_back(f.key + "=" + (std::is_floating_point_v<T> ? CLI::detail::to_string(*f.value) : std::to_string(*f.value)));
  }
  // Flags come after --set overrides, so a flag wins over a --set of the same key.
  std::vector<std::string> overrides(std::vector<std::string> sets) const {
    for (const auto* f : {&steps, &batch, &seq_len, &warmup, &log_every, &seed, &eval_every, &patience, &d_model,
                          &layers, &d_state, &head_dim, &chunk, &instruments, &timesteps, &n_features, &burn_in,
                          &stop_after, &save_every, &models})
      emit(sets, *f);
    for (const auto* f : {&lr, &weight_decay, &clip, &noise}) emit(sets, *f);
    for (const auto* f : {&device, &out_dir, &metric, &loss, &schedule}) emit(sets, *f);
    if (const std::optional<Precision> p = precision_flag(precision, tf32)) {
      sets.push_back("train.precision=\"" + to_string(*p) + "\"");
      // The flag decides, over a config file's older spelling run.tf32 = true as well.
      sets.push_back("run.tf32=false");
    }
    if (no_graph) sets.push_back("run.graph=false");
    for (std::string& s : sweep_overrides(sweep)) sets.push_back(std::move(s));
    return sets;
  }
};

void add_common(CLI::App& c, CommonArgs& a, std::vector<std::string>& sets) {
  c.add_option("--config,-c", a.config, "TOML run configuration (see configs/example.toml)")->check(CLI::ExistingFile);
  c.add_option("--set", sets, "override a config key: --set train.lr=2e-3 (repeatable)");
}

}  // namespace

int main(int argc, char** argv) {
  const double t_start = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  CLI::App app{"ml-alpha: train Mamba2 sequence models on market time series, on the GPU"};
  app.require_subcommand(1);
  app.get_formatter()->column_width(34);

  TrainArgs targs;
  targs.argv.assign(argv, argv + argc);
  Flags tflags;
  std::vector<std::string> tsets;
  CLI::App* train = app.add_subcommand("train", "train a model (default data: the built-in synthetic panel)");
  add_common(*train, targs, tsets);
  train->add_option("--resume", targs.resume,
                    "continue bit-exactly from this checkpoint, or a population from its run.out_dir (its settings "
                    "and data govern)")
      ->check(CLI::ExistingPath);
  train->add_flag("--overwrite", targs.overwrite, "replace a run already in run.out_dir");
  train->add_option("--gpus", targs.gpus,
                    "data-parallel training on this many GPUs of this host: one process per GPU (ranks 1 and up "
                    "log to a folder it names), gradients averaged over NCCL; under torchrun, mpirun or srun "
                    "leave it out (their RANK / WORLD_SIZE variables set the ranks)")
      ->check(CLI::Range(1, 1024));
  tflags.add_all(*train, true);

  EvalArgs eargs;
  Flags eflags;
  std::vector<std::string> esets;
  CLI::App* eval = app.add_subcommand("eval", "metrics of a checkpoint on a split of the configured data");
  add_common(*eval, eargs, esets);
  eval->add_option("--checkpoint", eargs.checkpoint,
                   "weights (.safetensors) written by train, or a population run folder (its members' mean)")
      ->required()
      ->check(CLI::ExistingPath);
  eval->add_option("--members", eargs.members,
                   "with a population run folder: all (the default), top:K (by leaderboard.csv) or names "
                   "(member-00,member-03)");
  eval->add_option("--split", eargs.split, "train | valid | test")->capture_default_str();
  eval->add_option("--fold", eargs.fold, "walk-forward fold, 0-based (default: the checkpoint's; a population's members are that fold's)");
  eval->add_option("--long-short-svg", eargs.long_short_svg, "also write the cumulative long-short plot of the range here");
  eflags.add_all(*eval, false);

  PredictArgs pargs;
  Flags pflags;
  std::vector<std::string> psets;
  CLI::App* predict = app.add_subcommand("predict", "predictions aligned with (instrument, time) as .npy and CSV");
  add_common(*predict, pargs, psets);
  predict->add_option("--checkpoint", pargs.checkpoint,
                   "weights (.safetensors) written by train, or a population run folder (its members' mean)")
      ->required()
      ->check(CLI::ExistingPath);
  predict->add_option("--members", pargs.members,
                   "with a population run folder: all (the default), top:K (by leaderboard.csv) or names "
                   "(member-00,member-03)");
  predict->add_option("--split", pargs.split, "train | valid | test | all")->capture_default_str();
  predict->add_option("--fold", pargs.fold, "walk-forward fold, 0-based (default: the checkpoint's; a population's members are that fold's)");
  predict->add_option("--out,-o", pargs.out, "output prefix: writes <out>.npy and <out>.csv")->required();
  pflags.add_all(*predict, false);

  SynthArgs sargs;
  std::vector<std::string> ssets;
  Flags sflags;
  CLI::App* synth = app.add_subcommand("synth", "write the synthetic panel as .npy and/or long-format CSV");
  add_common(*synth, sargs, ssets);
  synth->add_option("--out-dir,-o", sargs.out_dir, "directory for features.npy, targets.npy, panel.csv")->capture_default_str();
  synth->add_option("--format", sargs.format, "npy | csv | both")->capture_default_str();
  Flags::add(*synth, "--instruments", sflags.instruments, "instruments");
  Flags::add(*synth, "--timesteps", sflags.timesteps, "time steps");
  Flags::add(*synth, "--features", sflags.n_features, "features");
  Flags::add(*synth, "--noise", sflags.noise, "target noise");
  sflags.seed.key = "data.seed";
  Flags::add(*synth, "--seed", sflags.seed, "data seed");

  std::string info_ckpt;
  CLI::App* info = app.add_subcommand("info", "CUDA devices, and a checkpoint's config and tensors");
  info->add_option("--checkpoint", info_ckpt, "a checkpoint, or a population run folder, to describe")
      ->check(CLI::ExistingPath);
  int info_fold = -1;
  info->add_option("--fold", info_fold, "with a walk-forward population's run folder: list that fold's members");

  BenchArgs bargs;
  CLI::App* bench = app.add_subcommand("bench", "time the DESIGN section 5 configurations on the GPU");
  bench->add_option("--configs", bargs.configs, "comma-separated subset of S,M,L (DESIGN section 5) and W256,W16K,W64K (65,536 tokens a step as 256 windows of 256, 4 of 16,384, 1 of 65,536)")->capture_default_str();
  bench->add_option("--steps", bargs.steps, "timed steps per configuration (median reported)")->capture_default_str();
  bench->add_option("--warmup", bargs.warmup, "untimed steps before timing")->capture_default_str();
  std::string bench_precision;
  bool bench_tf32 = false;
  add_precision(*bench, bench_precision, bench_tf32,
                ". Every configuration runs in it; without it S and M run fp32, L tf32 and then fp32");
  bench->add_flag("!--no-optimizer", bargs.optimizer, "skip the AdamW + clip over 25M/100M parameters case");
  CLI::Option* bench_configs = bench->get_option("--configs");
  bench->add_option("--models", bargs.models,
                    "time populations of these sizes (e.g. 16,64) against one model, E streams and E sequential runs; "
                    "the configurations default to S,M");
  bench->add_option("--lanes", bargs.lanes, "with --models: the lane counts (streams of the population) to time; 0 = the default")
      ->capture_default_str();
  bench->add_option("--batch", bargs.batch, "with --models: windows per step instead of the configuration's B")
      ->check(CLI::Range(1, 65536));

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    // Flag errors read like every other error, and exit 1 like them.
    std::fprintf(stderr, "ml-alpha: error: %s\nRun with --help for more information.\n", e.what());
    return 1;
  }
  try {
    if (*train) {
      targs.overrides = tflags.overrides(tsets);
      return cmd_train(targs);
    }
    if (*eval) {
      eargs.overrides = eflags.overrides(esets);
      return cmd_eval(eargs);
    }
    if (*predict) {
      pargs.overrides = pflags.overrides(psets);
      return cmd_predict(pargs);
    }
    if (*synth) {
      sargs.overrides = sflags.overrides(ssets);
      return cmd_synth(sargs);
    }
    if (*info) return cmd_info(info_ckpt, info_fold);
    if (*bench) {
      bargs.precision = precision_flag(bench_precision, bench_tf32);
      if (gpu_devices().empty()) throw std::runtime_error("bench needs a CUDA device and found none");
      if (!bargs.models.empty()) {
        if (bench_configs->count() == 0) bargs.configs = "S,M";
        return run_population_bench(bargs);
      }
      return run_bench(bargs, t_start);
    }
  } catch (const std::exception& e) {
    std::fflush(stdout);  // what was printed before the error comes first
    std::fprintf(stderr, "ml-alpha: error: %s\n", e.what());
    return 1;
  }
  return 0;
}

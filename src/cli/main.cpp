// ml-alpha: the command-line front end. Every subcommand takes --config FILE (TOML, configs/example.toml)
// and --set section.key=value overrides; the common settings also have their own flags (flags.h). This file
// only declares the subcommands and dispatches to them (commands.h).
#include <CLI/CLI.hpp>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <sstream>
#include <string>

#include "bench.h"
#include "bench_stream.h"
#include "commands.h"
#include "flags.h"
#include "mlalpha/device.h"
#include "mlalpha/error.h"

using namespace mlalpha;

namespace {

// A value that must not be empty: `--state ''` or `--members ''` would otherwise mean "not given" silently.
CLI::Validator not_empty() {
  return CLI::Validator(
      [](std::string& v) { return v.empty() ? std::string("an empty value; give one, or leave the flag out") : std::string(); },
      "", "not empty");
}
// A walk-forward fold: 0-based; -1 inside means "not given", so a negative value given would pass silently.
CLI::Validator fold_check() {
  return CLI::Validator(
      [](std::string& v) { return !v.empty() && v[0] == '-' ? "folds count from 0 (the first fold), got " + v : std::string(); },
      "", "fold");
}

// A failed command leaves with its status without the libraries' exit handlers: what the command did was undone as
// the error unwound (files, locks, the run folder), and OpenBLAS's handler joins its worker threads, which start
// before main and take a work buffer each: under an address-space limit too small for one (ulimit -v, the
// refusal of cpu/blas.h's check_blas_address_space) a worker retries that allocation forever, and the join would
// hang after the message.
[[noreturn]] void fail(int status) {
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(status);
}

}  // namespace

int main(int argc, char** argv) {
  // Every command, not only train: past the file size limit (ulimit -f) a write fails with EFBIG, and the file's
  // writer removes its temporary and names the file. Left at its default, SIGXFSZ killed synth, predict, eval
  // and the stream without a word, leaving a *.tmp-* file behind.
  std::signal(SIGXFSZ, SIG_IGN);
  const double t_start = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  CLI::App app{"ml-alpha: train Mamba2 sequence models on market time series, on the GPU"};
  app.require_subcommand(1);
  app.get_formatter()->column_width(34);

  TrainArgs targs;
  targs.argv.assign(argv, argv + argc);
  Flags tflags;
  CLI::App* train = app.add_subcommand("train", "train a model (default data: the built-in synthetic panel)");
  add_common(*train, targs);
  train->add_option("--resume", targs.resume,
                    "continue a run bit-exactly in its own folder: the run folder, or a last.safetensors of it "
                    "(its recorded settings and data govern)")
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
  CLI::App* eval = app.add_subcommand("eval", "metrics of a checkpoint on a split of the configured data");
  add_common(*eval, eargs);
  eval->add_option("--checkpoint", eargs.checkpoint,
                   "weights (.safetensors) written by train, or a population run folder (its members' mean)")
      ->required()
      ->check(CLI::ExistingPath);
  eval->add_option("--members", eargs.members,
                   "with a population run folder: all (the default), top:K (by leaderboard.csv) or names "
                   "(member-00,member-03)")
      ->check(not_empty());
  eval->add_option("--split", eargs.split, "train | valid | test")->capture_default_str();
  eval->add_option("--fold", eargs.fold, "walk-forward fold, 0-based (default: the checkpoint's; a population's members are that fold's)")
      ->check(fold_check());
  eval->add_option("--long-short-svg", eargs.long_short_svg, "also write the cumulative long-short plot of the range here");
  eval->add_option("--mode", eargs.mode,
                   "what a date's prediction is: window (the window of its last train.seq_len rows) | carry (the state "
                   "carried from each instrument's first row, as the stream); default: carry for a model trained with "
                   "train.state = 'carry', else window (as validated)");
  eflags.add_all(*eval, false);

  PredictArgs pargs;
  Flags pflags;
  CLI::App* predict = app.add_subcommand("predict", "predictions aligned with (instrument, time) as .npy and CSV");
  add_common(*predict, pargs);
  predict->add_option("--checkpoint", pargs.checkpoint,
                   "weights (.safetensors) written by train, or a population run folder (its members' mean)")
      ->required()
      ->check(CLI::ExistingPath);
  predict->add_option("--members", pargs.members,
                   "with a population run folder: all (the default), top:K (by leaderboard.csv) or names "
                   "(member-00,member-03)")
      ->check(not_empty());
  predict->add_option("--split", pargs.split, "train | valid | test | all")->capture_default_str();
  predict->add_option("--fold", pargs.fold, "walk-forward fold, 0-based (default: the checkpoint's; a population's members are that fold's)")
      ->check(fold_check());
  predict->add_option("--out,-o", pargs.out, "output prefix: writes <out>.npy and <out>.csv")->required();
  predict->add_option("--mode", pargs.mode,
                      "what a date's prediction is: window (the window of its last train.seq_len rows) | carry (the "
                      "state carried from each instrument's first row, as the stream); default: carry for a model "
                      "trained with train.state = 'carry', else window (as validated)");
  pflags.add_all(*predict, false);

  StreamArgs stargs;
  Flags stflags;
  CLI::App* stream = app.add_subcommand(
      "stream", "predict live: CSV rows (time, instrument, features) in, one prediction row per row out as soon as its "
                "time step is complete");
  add_common(*stream, stargs);
  stream->add_option("--checkpoint", stargs.checkpoint,
                     "weights (.safetensors) written by train, or a population run folder (its members' mean)")
      ->required()
      ->check(CLI::ExistingPath);
  stream->add_option("--members", stargs.members, "with a population run folder: all (the default), top:K or names")
      ->check(not_empty());
  stream->add_option("--fold", stargs.fold, "with a walk-forward population's run folder: its fold, 0-based")->check(fold_check());
  stream->add_option("--input,-i", stargs.input,
                     "the rows, long-format CSV with the checkpoint's time, instrument and feature columns "
                     "(docs/data.md); - for standard input")
      ->capture_default_str()
      ->check(not_empty());
  stream->add_option("--output,-o", stargs.output, "where the predictions go; - for standard output")
      ->capture_default_str()
      ->check(not_empty());
  stream->add_option("--mode", stargs.mode,
                     "carry (the state carried bar to bar: O(1) a bar) | window (each bar from the window of the last "
                     "train.seq_len rows, as predict's default)")
      ->capture_default_str();
  stream->add_option("--instruments", stargs.instruments, "the stream's instruments: a,b,c")->check(not_empty());
  stream->add_option("--instruments-file", stargs.instruments_file, "the stream's instruments, one a line")
      ->check(CLI::ExistingFile);
  stream->add_option("--history", stargs.history,
                     "warm up on these earlier rows (CSV as the input) before reading the input; its instruments "
                     "join the stream")
      ->check(CLI::ExistingFile);
  stream->add_option("--state", stargs.state,
                     "continue the stream saved in this file when it exists; the state is written to it (atomically) "
                     "after every complete time step, so a restarted stream continues bit-exactly (one stream a state: "
                     "FILE.lock holds it)")
      ->check(not_empty());
  stream->add_flag("--new-instruments", stargs.new_instruments,
                   "an instrument not in the stream joins it when its first row arrives (else it is an error)");
  stflags.add_all(*stream, false);

  SynthArgs sargs;
  Flags sflags;
  CLI::App* synth = app.add_subcommand("synth", "write the synthetic panel as .npy and/or long-format CSV");
  add_common(*synth, sargs);
  synth->add_option("--out-dir,-o", sargs.out_dir, "directory for features.npy, targets.npy, panel.csv")->capture_default_str();
  synth->add_option("--format", sargs.format, "npy | csv | both")->capture_default_str();
  synth->add_flag("--overwrite", sargs.overwrite, "replace the files of a panel already in the folder");
  Flags::add(*synth, "--instruments", sflags.instruments, "instruments");
  Flags::add(*synth, "--timesteps", sflags.timesteps, "time steps");
  Flags::add(*synth, "--features", sflags.n_features, "features");
  Flags::add(*synth, "--noise", sflags.noise, "target noise");
  sflags.seed.key = "data.seed";
  sflags.seed.kind = ConfigSetting::Kind::integer;
  Flags::add(*synth, "--seed", sflags.seed, "data seed");

  std::string info_ckpt;
  CLI::App* info = app.add_subcommand("info", "CUDA devices, and a checkpoint's config and tensors, or a stream's state");
  info->add_option("--checkpoint", info_ckpt, "a checkpoint, a population run folder or a stream's state file, to describe")
      ->check(CLI::ExistingPath);
  int info_fold = -1;
  info->add_option("--fold", info_fold, "with a walk-forward population's run folder: list that fold's members")
      ->check(fold_check());
  std::string info_state;
  info->add_option("--state", info_state,
                   "a stream's state file: its checkpoint, mode, instruments and last time (where to restart)")
      ->check(CLI::ExistingFile);

  BenchArgs bargs;
  CLI::App* bench = app.add_subcommand("bench", "time the DESIGN section 5 configurations on the GPU (or on the CPU: --device cpu)");
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
  bench->add_option("--device", bargs.device,
                    "gpu, or cpu: the CPU trainer's step (the fast CPU model) on the configurations default,S unless "
                    "--configs says (default: the model `train` uses without settings), 30 steps (S: 10) after 3 unless "
                    "--steps / --warmup say")
      ->check(CLI::IsMember({"gpu", "cpu"}))
      ->capture_default_str();
  bench->add_option("--threads", bargs.threads, "with --device cpu: the thread counts to time, e.g. 1,2,4,8,16 (default: 1 "
                                                "and every CPU available)");
  bench->add_flag("--reference", bargs.reference, "with --device cpu: also the reference model's step (one thread)");
  bench->add_flag("--carry", bargs.carry,
                  "also the step with train.state = 'carry' (consecutive windows, states carried) and its ratio to the "
                  "zero-state step");
  bench->add_flag("--time-batches", bargs.time_batches,
                  "train every timed step with train.batch = 'time': B / 16 dates × the bench panel's 16 instruments, "
                  "the IC loss (with --carry: the time-batch carry schedule)");
  StreamBenchOptions sopt;
  bool bench_stream = false, no_torch = false;
  std::string stream_instruments = "1,100,5000";
  bench->add_flag("--stream", bench_stream,
                  "time one bar of the streaming predictor (GPU and CPU) against the state floor and PyTorch stepping as "
                  "Mamba2.step; the configurations default to S,M");
  bench->add_option("--instruments", stream_instruments, "with --stream: the instrument counts")->capture_default_str();
  bench->add_option("--gpu-bars", sopt.gpu_bars, "with --stream: bars per timed GPU repetition")->capture_default_str();
  bench->add_option("--cpu-seconds", sopt.cpu_seconds, "with --stream: timed CPU bars per case (seconds)")
      ->capture_default_str();
  bench->add_option("--cpu-threads", sopt.cpu_threads, "with --stream: the all-threads CPU case (0: every CPU)")
      ->capture_default_str();
  bench->add_flag("!--no-cpu", sopt.cpu, "with --stream: no CPU cases");
  bench->add_flag("!--no-gpu", sopt.gpu, "with --stream: no GPU cases");
  bench->add_option("--torch-script", sopt.torch_script, "with --stream: PyTorch's side (python3 SCRIPT stream)")
      ->capture_default_str();
  bench->add_flag("--no-torch", no_torch, "with --stream: no PyTorch side");
  bench->add_flag("--predict", bargs.predict,
                  "time predict on the GPU over a panel (every date's window, the carried forward, the old tiled plan); "
                  "the configurations default to S");
  bench->add_option("--panel", bargs.predict_panel, "with --predict: N,T,F")->capture_default_str();
  bench->add_option("--seq-len", bargs.predict_seq_len, "with --predict: train.seq_len, the rows of each date's window")
      ->capture_default_str();
  bench->add_option("--dates", bargs.predict_dates, "with --predict: predict the last DATES dates (0: all)")
      ->capture_default_str();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    // Flag errors read like every other error, and exit 1 like them.
    std::fprintf(stderr, "ml-alpha: error: %s\nRun with --help for more information.\n", e.what());
    fail(1);
  }
  try {
    if (*train) {
      targs.settings = tflags.settings();
      return cmd_train(targs);
    }
    if (*eval) {
      eargs.settings = eflags.settings();
      return cmd_eval(eargs);
    }
    if (*predict) {
      pargs.settings = pflags.settings();
      return cmd_predict(pargs);
    }
    if (*stream) {
      stargs.settings = stflags.settings();
      return cmd_stream(stargs);
    }
    if (*synth) {
      sargs.settings = sflags.settings();
      return cmd_synth(sargs);
    }
    if (*info) return cmd_info(info_ckpt, info_fold, info_state);
    if (*bench) {
      if (bargs.device == "cpu") {
        require(bargs.models.empty() && bench_precision.empty() && !bench_tf32,
                "bench --device cpu times one model in fp32: --models and --precision are for the GPU");
        if (bench_configs->count() == 0) bargs.configs = "default,S";
        if (bench->get_option("--steps")->count() == 0) bargs.steps = 30;
        if (bench->get_option("--warmup")->count() == 0) bargs.warmup = 3;
        return run_cpu_bench(bargs);
      }
      require(bargs.threads.empty() && !bargs.reference, "bench: --threads and --reference go with --device cpu");
      require(!bargs.carry || (!bench_stream && !bargs.predict && bargs.models.empty()),
              "bench: --carry times the training step (with --configs), not --stream, --predict or --models");
      require(!bargs.time_batches || (!bench_stream && !bargs.predict && bargs.models.empty()),
              "bench: --time-batches times the training step (with --configs), not --stream, --predict or --models");
      bargs.precision = precision_flag(bench_precision, bench_tf32);
      if (bench_stream) {  // the CPU side runs without a GPU
        std::stringstream configs(bench_configs->count() ? bargs.configs : "S,M"), inst(stream_instruments);
        sopt.configs.clear(), sopt.instruments.clear();
        for (std::string v; std::getline(configs, v, ',');) sopt.configs.push_back(v);
        for (std::string v; std::getline(inst, v, ',');) sopt.instruments.push_back(std::stoi(v));
        const StreamBenchResult r = run_stream_bench(sopt);
        print_stream_bench(r);
        if (!no_torch && !sopt.torch_script.empty()) print_stream_ratios(r, run_torch_stream(sopt, sopt.torch_script));
        return 0;
      }
      // A CPU-only build's GPU benches say what it lacks (cli/bench_nogpu.cpp); a GPU build without a GPU, this.
      if (gpu_support_built() && gpu_devices().empty()) throw std::runtime_error("bench needs a CUDA device and found none");
      if (bargs.predict) {
        if (bench_configs->count() == 0) bargs.configs = "S";
        return run_predict_bench(bargs);
      }
      if (!bargs.models.empty()) {
        if (bench_configs->count() == 0) bargs.configs = "S,M";
        return run_population_bench(bargs);
      }
      return run_bench(bargs, t_start);
    }
  } catch (const std::exception& e) {
    std::fflush(stdout);  // what was printed before the error comes first
    std::fprintf(stderr, "ml-alpha: error: %s\n", e.what());
    fail(1);
  }
  return 0;
}

// `ml-alpha train`: call run_training (include/mlalpha/run.h) with the parsed settings, print what its events
// carry; nothing is resolved, read or checked here that the library does.
#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <memory>

#include "commands.h"
#include "mlalpha/config.h"
#include "mlalpha/device.h"
#include "mlalpha/error.h"
#include "mlalpha/metric_table.h"
#include "mlalpha/run.h"
#include "mlalpha/progress.h"

namespace mlalpha {

namespace {

// SIGINT (Ctrl-C), SIGTERM, SIGHUP (the terminal closed), SIGPIPE (the output closed, e.g. `| head`), SIGXCPU
// (the CPU time limit's soft warning) and SIGUSR1 (a batch system's notice) finish the current step, then save
// `last` and the plot like a normal end; the signal is remembered for the message on stderr. A closed stdout
// must not kill the run, so SIGPIPE is caught too. SIGXFSZ (the file size limit) is ignored, so the write that
// passes the limit fails with EFBIG and its message names the file, as a full disk does.
std::atomic<bool>& stop_flag() {
  static std::atomic<bool> flag{false};
  return flag;
}
std::atomic<int>& stop_signal() {
  static std::atomic<int> sig{0};
  return sig;
}
extern "C" void on_stop_signal(int sig) {
  int none = 0;
  stop_signal().compare_exchange_strong(none, sig);
  stop_flag().store(true);
}
void catch_stop_signals() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGXCPU, SIGUSR1}) sigaction(sig, &sa, nullptr);
  std::signal(SIGXFSZ, SIG_IGN);
}
const char* signal_name(int sig) {
  switch (sig) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP (the terminal closed)";
    case SIGPIPE: return "SIGPIPE (the output was closed)";
    case SIGXCPU: return "SIGXCPU (the CPU time limit, ulimit -t)";
    case SIGUSR1: return "SIGUSR1";
    default: return "a signal";
  }
}

// After the device's name: the GPU's arithmetic; the CPU computes fp32 whatever train.precision says.
std::string precision_note(const std::string& device, Precision p) {
  if (device != "cpu") return " (" + to_string(p) + ")";
  return p == Precision::FP32 ? "" : " (fp32: train.precision = " + to_string(p) + " applies to the GPU only)";
}

std::string fmt_metrics(const Metrics& m) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "mse %.5g  ic %.4f  rank_ic %.4f  icir %.3f  dir_acc %.4f  (%lld points)", m.mse, m.ic,
                m.rank_ic, m.icir, m.dir_acc, static_cast<long long>(m.points));
  return buf;
}

// The end of a population run: the leaderboard file, each member's best, and the ensemble (the
// leaderboard's top rows arrived as a message already).
void print_population(const RunResult& r) {
  for (const MemberResult& m : r.members) {
    std::string settings;
    for (const auto& [k, v] : m.settings) settings += (settings.empty() ? " (" : " ") + k + "=" + v;
    if (!settings.empty()) settings += ")";
    std::printf("%s%s%s: best %s %.5g at step %lld%s%s%s\n",
                r.config.split.walk_forward_folds > 1 ? ("fold " + std::to_string(m.fold) + " ").c_str() : "",
                m.name.c_str(), settings.c_str(), r.config.run.metric.c_str(), m.best_value,
                static_cast<long long>(m.best_step), m.early_stopped ? " (stopped early)" : "",
                m.has_test ? "; test " : "", m.has_test ? fmt_metrics(m.test.mean).c_str() : "");
  }
  if (r.has_ensemble)
    std::printf("mean-ensemble of the members' best weights (%s): %s\n",
                r.config.split.walk_forward_folds > 1 ? "pooled over the folds' test blocks"
                : r.members.front().has_test       ? "test range"
                                                   : "validation range",
                fmt_metrics(r.ensemble.mean).c_str());
  if (!r.leaderboard_file.empty()) std::printf("leaderboard: %s\n", r.leaderboard_file.c_str());
}

// The end of a solo run: each fold's best step and its test metrics; walk-forward, the mean ± std of every
// test metric over the folds and the pooled out-of-sample metrics (docs/data.md).
void print_solo(const RunResult& r) {
  for (const FoldResult& f : r.folds) {
    const std::string prefix = r.folds.size() > 1 || f.fold > 0 ? "fold " + std::to_string(f.fold) + ": " : "";
    if (f.best_step > 0)
      std::printf("%sbest %s %.5g at step %lld (checkpoint %s/best.safetensors)\n", prefix.c_str(),
                  r.config.run.metric.c_str(), f.best_value, static_cast<long long>(f.best_step), f.dir.c_str());
    else
      std::printf("%sno validation ran before the end at step %lld: no best checkpoint\n", prefix.c_str(),
                  static_cast<long long>(f.steps));
    if (f.has_test) std::printf("%stest  %s\n", prefix.c_str(), fmt_metrics(f.test.mean).c_str());
  }
  if (r.config.split.walk_forward_folds <= 1) return;
  std::printf("walk-forward summary (test split of each fold, best checkpoint): %s/folds.csv and folds.json\n",
              r.run_dir.c_str());
  std::printf("folds: metric mean ± std over the folds\n");
  for (const std::string& name : metric_names())
    std::printf("  %-10s %.6g ± %.6g\n", name.c_str(), metric_by_name(r.fold_test_mean, name),
                metric_by_name(r.fold_test_std, name));
  if (r.has_oos)
    std::printf("pooled out-of-sample (%s): %s\n  ls_mean %.5g  ls_sharpe %.3f  turnover %.4f  mse_zero %.5g  "
                "mse_mean %.5g\n",
                r.oos_file.c_str(), fmt_metrics(r.oos.mean).c_str(), r.oos.mean.ls_mean, r.oos.mean.ls_sharpe,
                r.oos.mean.turnover, r.oos.mean.mse_zero, r.oos.mean.mse_mean);
}

// --gpus N: this process starts N ranks, one per GPU, each running this same command line (launch_local_ranks),
// and waits for them; rank 0's output is this terminal's, the others' go to a log folder named here.
int launch_ranks(const TrainArgs& a) {
  const int have = int(gpu_devices().size());
  require(have >= a.gpus, "--gpus " + std::to_string(a.gpus) + ": this host shows " + std::to_string(have) +
                              " GPU(s) (CUDA_VISIBLE_DEVICES may hide some)");
  const std::string dir = make_temp_folder("ml-alpha-ranks-", "--gpus: the ranks' log folder");
  std::cout << "ml-alpha train: " << a.gpus << " rank(s), one per GPU, over NCCL; rank 0's output follows";
  if (a.gpus > 1) std::cout << ", ranks 1 to " << a.gpus - 1 << " log to " << dir << "/rank<k>.log";
  std::cout << std::endl;
  launch_local_ranks(a.gpus, a.argv, dir);
  return 0;
}

}  // namespace

int cmd_train(const TrainArgs& a) {
  const RankEnvironment rank = rank_environment();
  const bool launched = rank.launched;
  if (a.gpus > 0 && !launched) {
    require(rank.world == 1, "--gpus " + std::to_string(a.gpus) + ": this process is already rank " +
                                 std::to_string(rank.rank) + " of " + std::to_string(rank.world) + " (" + rank.source +
                                 " variables); the launcher starts the ranks, so leave --gpus out");
    load_run_config(a.config, a.overrides, a.settings).validate();  // a bad setting fails once, here, not in every rank
    return launch_ranks(a);
  }
  require(!launched || a.gpus == 0 || rank.world == a.gpus,
          "this rank's WORLD_SIZE (" + std::to_string(rank.world) + ") differs from --gpus " + std::to_string(a.gpus));
  const RunConfig given = load_run_config(a.config, a.overrides, a.settings);

  std::unique_ptr<ProgressReporter> progress;
  RunConfig cfg;  // the settings the run uses (a resume's are its folder's), from the start event
  auto say = [&](const std::string& line) {
    if (progress) progress->message(line);
    else std::cout << line << std::endl;
  };
  RunOptions opt;
  opt.resume = a.resume;
  opt.overwrite = a.overwrite;
  opt.stop = &stop_flag();
  opt.rank = rank.rank, opt.world = rank.world, opt.local_rank = rank.local_rank;
  opt.data_parallel = launched || rank.world > 1;
  if (rank.world > 1)
    std::cout << "rank " << rank.rank << " of " << rank.world << " (" << rank.source << "), GPU " << rank.local_rank
              << (rank.rank > 0 ? "; rank 0 writes the run" : "") << std::endl;
  int64_t shown = 0;  // a population's progress bar: the latest step any member reported
  opt.callback = [&](const RunEvent& e) {
    if (stop_signal() == SIGPIPE) std::cout.setstate(std::ios::badbit);  // nowhere to write: stop writing
    switch (e.kind) {
      case RunEvent::Kind::start: {
        cfg = *e.config;
        char read_in[48];
        std::snprintf(read_in, sizeof read_in, " (read in %.2f s)", e.read_seconds);
        std::cout << "ml-alpha train: data " << cfg.data.source << ": N=" << e.N << " instruments, T=" << e.T
                  << " steps, F=" << e.F << " features, K=" << e.K << " targets" << (e.read_seconds >= 0 ? read_in : "")
                  << std::endl;
        break;
      }
      case RunEvent::Kind::fold_start: {
        if (e.folds > 1)
          std::cout << "== walk-forward fold " << e.fold << " (folds 0 to " << e.folds - 1 << ", fold 0 the earliest)\n";
        std::cout << "device " << e.device << precision_note(e.device, cfg.train.precision) << " | split "
                  << e.split.to_string() << " | model " << e.params << " params" << std::endl;
        ProgressOptions po;
        po.total_steps = cfg.train.steps;
        po.log_every = cfg.train.log_every;
        po.metric = cfg.run.metric;
        po.columns = ProgressReporter::terminal_columns();
        progress = std::make_unique<ProgressReporter>(po, std::cout, ProgressReporter::stdout_is_terminal());
        shown = e.start_step;
        break;
      }
      case RunEvent::Kind::log:
        // A population's members log the same steps: the bar follows member 0, then whichever member
        // still trains after it stopped early.
        for (const TrainPoint& p : e.points)
          if (e.member < 0 || p.step > shown) progress->step(p), shown = p.step;
        break;
      case RunEvent::Kind::eval:
        // A population: member 0's metrics in full (the library's summary line gives every member's spread).
        if (e.member <= 0) {
          const std::string split = e.member == 0 ? e.member_name + " valid" : std::string("valid");
          progress->validation(e.step, e.evaluation.metrics.mean, e.evaluation.best, split);
        }
        break;
      case RunEvent::Kind::message:
        say(e.message);
        break;
      case RunEvent::Kind::fold_end:
        progress->finish();
        progress.reset();
        std::cout << e.message << std::endl;
        break;
    }
    return true;
  };
  catch_stop_signals();
  const RunResult r = run_training(given, opt);
  if (const int sig = stop_signal(); sig != 0) {
    int64_t step = 0;
    for (const FoldResult& f : r.folds) step = std::max(step, f.steps);
    for (const MemberResult& m : r.members) step = std::max(step, m.steps);
    std::fprintf(stderr, "ml-alpha train: stopped by %s at step %lld; the last checkpoint is saved: continue with "
                 "ml-alpha train --resume %s\n", signal_name(sig), static_cast<long long>(step), r.run_dir.c_str());
    if (sig == SIGPIPE) return 128 + sig;  // stdout is closed: nothing more to print there
  }
  // The run's result, as the library returns it (it prints nothing itself); a stopped run has one too.
  if (r.members.empty()) print_solo(r);
  else print_population(r);
  std::fflush(stdout);
  if (const int sig = stop_signal(); sig != 0) return 128 + sig;
  return r.stopped ? 130 : 0;
}

}  // namespace mlalpha

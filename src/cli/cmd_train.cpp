// `ml-alpha train`: parse, call run_training (include/mlalpha/run.h), print what it reports.
#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "core/context.h"
#include "core/temp_dir.h"
#include "dist/bootstrap.h"
#include "dist/launch.h"
#include "mlalpha/config.h"
#include "mlalpha/error.h"
#include "mlalpha/run.h"
#include "mlalpha/progress.h"

namespace mlalpha {

namespace {

// Ctrl-C and SIGTERM finish the current step, then save `last` and the plot like a normal end.
std::atomic<bool>& stop_flag() {
  static std::atomic<bool> flag{false};
  return flag;
}
extern "C" void on_stop_signal(int) { stop_flag().store(true); }

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

// One value of a --sweep list, written back as TOML: the number as read (shortest form), so text that
// std::from_chars takes but TOML does not (".5", "5.") still parses.
std::string sweep_value(const std::string& part, bool integer, const std::string& arg) {
  const char* b = part.data() + (!part.empty() && part[0] == '+');
  const char* e = part.data() + part.size();
  require(!part.empty(), "'" + arg + "' has an empty value (two commas, or a comma at either end)");
  char buf[40];
  if (integer) {
    int64_t v = 0;
    const auto r = std::from_chars(b, e, v);
    require(r.ec != std::errc::result_out_of_range, "'" + part + "' in '" + arg + "' is out of range for an integer");
    require(r.ec == std::errc() && r.ptr == e, "'" + part + "' in '" + arg + "' is not an integer");
    return std::string(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
  }
  double v = 0;
  const auto r = std::from_chars(b, e, v);
  require(r.ec == std::errc() && r.ptr == e, "'" + part + "' in '" + arg + "' is not a number");
  // Without an exponent where that is about as short ("0.0003", not "3e-04").
  const std::string plain(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
  const auto f = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed);
  return f.ec == std::errc() && size_t(f.ptr - buf) <= plain.size() + 4 ? std::string(buf, f.ptr) : plain;
}

// The end of a population run: the leaderboard file, each member's best, and the ensemble (the
// leaderboard's top rows arrived as a message already).
void print_population(const RunResult& r) {
  for (const MemberResult& m : r.members) {
    std::string settings;
    for (const auto& [k, v] : m.settings) settings += (settings.empty() ? "" : " ") + k + "=" + v;
    std::printf("%s%s (%s): best %s %.5g at step %lld%s%s%s\n",
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

// --gpus N: this process starts N ranks, one per GPU, each running this same command line (dist/launch.h),
// and waits for them; rank 0's output is this terminal's, the others' go to a log folder named here.
int launch_ranks(const TrainArgs& a) {
  const int have = cuda_device_count();
  require(have >= a.gpus, "--gpus " + std::to_string(a.gpus) + ": this host shows " + std::to_string(have) +
                              " GPU(s) (CUDA_VISIBLE_DEVICES may hide some)");
  const std::string dir = make_temp_dir("ml-alpha-ranks-", "--gpus: the ranks' log folder").string();
  std::cout << "ml-alpha train: " << a.gpus << " rank(s), one per GPU, over NCCL; rank 0's output follows";
  if (a.gpus > 1) std::cout << ", ranks 1 to " << a.gpus - 1 << " log to " << dir << "/rank<k>.log";
  std::cout << std::endl;
  dist::LaunchOptions o;
  o.processes = a.gpus;
  o.argv = a.argv;
  o.log_dir = dir;
  dist::launch_local(o);
  return 0;
}

}  // namespace

std::string sweep_override(const std::string& arg) {
  static const char* kKeys[] = {"lr", "weight_decay", "clip", "warmup"};
  const size_t eq = arg.find('=');
  require(eq != std::string::npos && eq > 0,
          "expected KEY=V1,V2,... (KEY one of lr, weight_decay, clip, warmup; e.g. lr=1e-3,3e-4), got '" + arg + "'");
  const std::string key = arg.substr(0, eq);
  if (std::find(std::begin(kKeys), std::end(kKeys), key) == std::end(kKeys)) {
    std::string msg = "unknown key '" + key + "' in '" + arg + "'";
    const std::string best = suggest_run_config_key("sweep." + key);
    if (best.rfind("sweep.", 0) == 0) msg += "; did you mean '" + best.substr(6) + "'?";
    throw Error(msg + " (KEY is one of lr, weight_decay, clip, warmup)");
  }
  std::string list;
  for (size_t at = eq + 1;;) {
    const size_t comma = arg.find(',', at);
    const std::string part = arg.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    list += (list.empty() ? "" : ", ") + sweep_value(part, key == "warmup", arg);
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return "sweep." + key + "=[" + list + "]";
}

std::vector<std::string> sweep_overrides(const std::vector<std::string>& args) {
  std::vector<std::string> out, keys;
  for (const std::string& a : args) {
    const std::string ov = sweep_override(a);
    const std::string key = ov.substr(6, ov.find('=') - 6);
    require(std::find(keys.begin(), keys.end(), key) == keys.end(),
            "--sweep " + key + " is given twice; list all its values in one: --sweep " + key + "=V1,V2,...");
    keys.push_back(key);
    out.push_back(ov);
  }
  return out;
}

int cmd_train(const TrainArgs& a) {
  const dist::EnvLookup env = dist::process_env();
  const dist::RankInfo rank = dist::rank_from_env(env);
  const bool launched = dist::is_launched_rank(env);
  if (a.gpus > 0 && !launched) {
    require(rank.world == 1, "--gpus " + std::to_string(a.gpus) + ": this process is already rank " +
                                 std::to_string(rank.rank) + " of " + std::to_string(rank.world) + " (" + rank.source +
                                 " variables); the launcher starts the ranks, so leave --gpus out");
    load_run_config(a.config, a.overrides).validate();  // a bad setting fails once, here, not in every rank
    return launch_ranks(a);
  }
  require(!launched || a.gpus == 0 || rank.world == a.gpus,
          "this rank's WORLD_SIZE (" + std::to_string(rank.world) + ") differs from --gpus " + std::to_string(a.gpus));
  const RunConfig given = load_run_config(a.config, a.overrides);
  const RunConfig cfg = resolve_run_config(given, a.resume, nullptr);
  cfg.validate();  // every setting before the data is read (F and K are checked again against the data)
  const auto t_read = std::chrono::steady_clock::now();
  const Panel panel = load_panel(cfg.data);
  char read_in[48];
  std::snprintf(read_in, sizeof read_in, " (read in %.2f s)",
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t_read).count());
  std::cout << "ml-alpha train: data " << cfg.data.source << ": N=" << panel.N << " instruments, T=" << panel.T
            << " steps, F=" << panel.F << " features, K=" << panel.K << " targets" << read_in << std::endl;

  std::unique_ptr<ProgressReporter> progress;
  std::string metric;
  auto say = [&](const std::string& line) {
    if (progress) progress->message(line);
    else std::cout << line << std::endl;
  };
  RunOptions opt;
  opt.resume = a.resume;
  opt.overwrite = a.overwrite;
  opt.stop = &stop_flag();
  opt.panel_from_config = true;  // the panel is load_panel(cfg.data)
  opt.rank = rank.rank, opt.world = rank.world, opt.local_rank = rank.local_rank;
  opt.data_parallel = launched || rank.world > 1;
  if (rank.world > 1)
    std::cout << "rank " << rank.rank << " of " << rank.world << " (" << rank.source << "), GPU " << rank.local_rank
              << (rank.rank > 0 ? "; rank 0 writes the run" : "") << std::endl;
  int64_t shown = 0;  // a population's progress bar: the latest step any member reported
  opt.callback = [&](const RunEvent& e) {
    switch (e.kind) {
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
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  const RunResult r = run_training(given, panel, opt);
  if (!r.members.empty()) print_population(r);
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
  if (r.members.empty() && r.config.split.walk_forward_folds > 1) {
    std::printf("walk-forward summary (test split of each fold, best checkpoint): %s/folds.csv and folds.json\n",
                r.config.run.out_dir.c_str());
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
  std::fflush(stdout);
  return r.stopped ? 130 : 0;
}

}  // namespace mlalpha

// `ml-alpha train`: load and split the data, normalise with training statistics, train on the GPU (or
// CPU) with validation every eval_every steps, keep the best checkpoint, stop early on the chosen metric,
// and leave metrics.jsonl, curves.svg, best/last checkpoints and a summary in run.out_dir.
#include <atomic>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "cli/backend.h"
#include "cli/commands.h"
#include "cli/data_setup.h"
#include <nlohmann/json.hpp>

#include "data/fileio.h"
#include "data/normalize.h"
#include "train/metrics.h"

namespace mlalpha {

namespace {

// Ctrl-C finishes the current step, then saves `last` and the plot like a normal end.
std::atomic<bool>& interrupted() {
  static std::atomic<bool> flag{false};
  return flag;
}
extern "C" void on_sigint(int) { interrupted().store(true); }

struct FoldResult {
  int64_t best_step = 0, steps = 0;
  double best_value = 0;
  MetricsResult test;
  bool has_test = false;
};

std::string fmt_metrics(const Metrics& m) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "mse %.5g  ic %.4f  rank_ic %.4f  icir %.3f  dir_acc %.4f  (%lld points)", m.mse, m.ic,
                m.rank_ic, m.icir, m.dir_acc, static_cast<long long>(m.points));
  return buf;
}

MetricsResult evaluate(Backend& be, const Panel& norm, const RunConfig& cfg, int t0, int t1,
                       const std::vector<float>* params) {
  const PredictSpec spec{cfg.train.L, cfg.train.burn_in, cfg.train.B, t0, t1};
  const std::vector<float> pred = be.predict(norm, spec, params);
  MetricsInput in;
  in.pred = pred;
  in.y = norm.y;
  in.N = norm.N;
  in.T = norm.T;
  in.K = norm.K;
  in.t0 = t0;
  in.t1 = t1;
  return compute_metrics(in);
}

FoldResult train_fold(RunConfig cfg, const Panel& panel, const Split& split, const std::filesystem::path& out,
                      const std::string& resume) {
  namespace fs = std::filesystem;
  fs::create_directories(out);
  const FeatureStats stats = compute_feature_stats(panel, split.train_begin, split.train_end);
  const Panel norm = normalized(panel, stats);
  const Panel train = slice_panel(norm, split.train_begin, split.train_end);
  require(cfg.train.L <= train.T, "train.seq_len = " + std::to_string(cfg.train.L) + " is longer than the training range (" +
                                      std::to_string(train.T) + " steps: " + split.to_string() + ")");
  const ModelLayout layout(cfg.model);
  auto be = make_backend(cfg, train);
  const CheckpointMeta meta{cfg.model, cfg.train, stats, panel.feature_names, panel.target_names};

  int64_t start = 0;
  if (!resume.empty()) {
    const Checkpoint ck = load_checkpoint(resume, cfg.model);
    require(ck.state.seed == cfg.train.seed, resume + ": was trained with train.seed = " +
                                                 std::to_string(ck.state.seed) + ", the config says " +
                                                 std::to_string(cfg.train.seed));
    be->load_state(ck.state);
    start = ck.state.step;
    std::printf("resumed from %s at step %lld\n", resume.c_str(), static_cast<long long>(start));
  }

  std::printf("device %s | split %s | model %zu params\n", be->name(), split.to_string().c_str(), layout.table.count());
  JsonlWriter jsonl(out / "metrics.jsonl", start > 0 ? JsonlWriter::Mode::append : JsonlWriter::Mode::truncate);
  ProgressOptions po;
  po.total_steps = cfg.train.steps;
  po.log_every = cfg.train.log_every;
  po.metric = cfg.run.metric;
  ProgressReporter progress(po, std::cout, ProgressReporter::stdout_is_terminal());
  CurvesPlot plot;
  plot.metric = cfg.run.metric;
  plot.title = "ml-alpha: " + out.string();

  FoldResult res;
  res.best_value = higher_is_better(cfg.run.metric) ? -INFINITY : INFINITY;
  std::vector<float> best_params;
  // best.json remembers the best evaluation so a resumed run keeps comparing against it.
  const fs::path best_json = out / "best.json";
  if (start > 0 && fs::exists(best_json) && fs::exists(out / "best.safetensors")) {
    const auto j = nlohmann::json::parse(read_file_bytes(best_json.string()), nullptr, false);
    if (j.is_object() && j.value("metric", "") == cfg.run.metric && j.contains("value") && j["value"].is_number()) {
      res.best_value = j["value"].get<double>();
      res.best_step = j.value("step", int64_t(0));
      best_params = load_checkpoint_weights((out / "best.safetensors").string(), cfg.model).params;
    }
  }
  int bad_evals = 0;
  int64_t reported = start;
  const int64_t eval_every = cfg.run.eval_every > 0 ? cfg.run.eval_every : cfg.train.steps;
  int64_t s = start;
  for (s = start + 1; s <= cfg.train.steps; ++s) {
    be->step();
    const bool eval_now = s % eval_every == 0 || s == cfg.train.steps;
    const bool pause = cfg.run.stop_after > 0 && s - start >= cfg.run.stop_after;
    const bool stop = interrupted().load() || pause;
    if (s % cfg.train.log_every == 0 || eval_now || stop || s == cfg.train.steps) {
      for (; reported < s; ) {  // the GPU backend syncs once here for all these records
        const TrainPoint p = be->point(++reported);
        progress.step(p);
        jsonl.train(p);
        plot.train.push_back({double(p.step), p.loss});
      }
    }
    if (eval_now) {
      const MetricsResult m = evaluate(*be, norm, cfg, split.valid_begin, split.valid_end, nullptr);
      const double v = metric_by_name(m.mean, cfg.run.metric);
      const bool best = is_improvement(cfg.run.metric, v, res.best_value) || best_params.empty();
      jsonl.metrics(s, "valid", m);
      plot.valid.push_back({double(s), v});
      progress.validation(s, m.mean, best);
      if (best) {
        res.best_value = v;
        res.best_step = s;
        bad_evals = 0;
        const TrainState st = be->state();
        best_params = st.params;
        save_checkpoint((out / "best.safetensors").string(), layout, st, meta);
        write_file_atomic(best_json.string(),
                          nlohmann::json{{"metric", cfg.run.metric}, {"value", v}, {"step", s}}.dump() + "\n");
      } else if (cfg.run.patience > 0 && ++bad_evals >= cfg.run.patience) {
        progress.message("early stop at step " + std::to_string(s) + ": no " + cfg.run.metric + " improvement in " +
                         std::to_string(bad_evals) + " evaluations (best " + std::to_string(res.best_value) +
                         " at step " + std::to_string(res.best_step) + ")");
        break;
      }
    }
    if (stop) {
      progress.message((pause ? "stopping after " + std::to_string(cfg.run.stop_after) + " steps" : std::string("interrupted")) +
                       " at step " + std::to_string(s) + ": saving the last checkpoint (continue with --resume)");
      break;
    }
  }
  progress.finish();
  res.steps = std::min<int64_t>(s, cfg.train.steps);
  save_checkpoint((out / "last.safetensors").string(), layout, be->state(), meta);
  write_curves_svg(out / "curves.svg", plot);
  if (split.has_test() && !best_params.empty()) {
    res.test = evaluate(*be, norm, cfg, split.test_begin, split.test_end, &best_params);
    res.has_test = true;
    jsonl.metrics(res.best_step, "test", res.test);
  }
  std::printf("best %s %.5g at step %lld (checkpoint %s)\n", cfg.run.metric.c_str(), res.best_value,
              static_cast<long long>(res.best_step), (out / "best.safetensors").c_str());
  if (res.has_test) std::printf("test  %s\n", fmt_metrics(res.test.mean).c_str());
  std::printf("wrote %s, %s, %s\n", (out / "metrics.jsonl").c_str(), (out / "curves.svg").c_str(),
              (out / "last.safetensors").c_str());
  return res;
}

}  // namespace

int cmd_train(const TrainArgs& a) {
  RunConfig cfg = load_run_config(a.config, a.overrides);
  const Panel panel = load_panel(cfg.data);
  panel.validate();
  cfg.model.F = panel.F;
  cfg.model.K = panel.K;
  cfg.validate();
  const std::vector<Split> splits = make_splits(cfg.split, panel);
  std::printf("ml-alpha train: data %s: N=%d instruments, T=%d steps, F=%d features, K=%d targets\n",
              cfg.data.source.c_str(), panel.N, panel.T, panel.F, panel.K);
  std::signal(SIGINT, on_sigint);
  const std::filesystem::path out(cfg.run.out_dir);
  std::vector<FoldResult> results;
  for (size_t f = 0; f < splits.size(); ++f) {
    if (splits.size() > 1) std::printf("== walk-forward fold %zu of %zu\n", f + 1, splits.size());
    results.push_back(train_fold(cfg, panel, splits[f], splits.size() > 1 ? out / ("fold-" + std::to_string(f)) : out,
                                 f == 0 ? a.resume : ""));
    if (interrupted().load()) break;
  }
  if (results.size() > 1) {
    std::printf("walk-forward summary (test split of each fold, best checkpoint):\n");
    for (size_t f = 0; f < results.size(); ++f)
      if (results[f].has_test) std::printf("  fold %zu: %s\n", f, fmt_metrics(results[f].test.mean).c_str());
  }
  return interrupted().load() ? 130 : 0;
}

}  // namespace mlalpha

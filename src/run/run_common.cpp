// The parts of the run loops both solo runs and populations use (run_common.h).
#include "run/run_common.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>

#include "core/error.h"
#include "data/fileio.h"
#include "mlalpha/metrics.h"
#include "mlalpha/model.h"

namespace mlalpha {

namespace fs = std::filesystem;

// ---- output folders and files

void CreatedDirs::create(const fs::path& dir) {
  std::vector<fs::path> missing;
  for (fs::path p = dir; !p.empty() && !fs::exists(p); p = p.parent_path()) {
    missing.push_back(p);
    if (p == p.parent_path()) break;
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  require(!ec, dir.string() + ": cannot create the run folder: " + ec.message() + " (check run.out_dir)");
  created_.insert(created_.end(), missing.begin(), missing.end());  // deepest first
}

CreatedDirs::~CreatedDirs() {
  for (const fs::path& p : created_) {
    std::error_code ec;
    if (fs::is_directory(p, ec) && fs::is_empty(p, ec)) fs::remove(p, ec);
  }
}

namespace {

const char* const kRunFiles[] = {"metrics.jsonl",  "curves.svg",     "best.json",    "best.safetensors",
                                 "last.safetensors", "folds.csv",    "folds.json",   "long_short.svg",
                                 "oos_pred.csv",   "oos_pred.npy",   "leaderboard.csv",
                                 "population.json", "member.json", "last.json"};
const char* const kEnsembleFiles[] = {"pred.csv", "pred.npy"};

bool starts_with(const fs::path& p, const char* prefix) { return p.filename().string().rfind(prefix, 0) == 0; }

}  // namespace

std::vector<fs::path> run_files(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  auto scan = [&](const fs::path& d) {
    for (const char* f : kRunFiles) {
      if (fs::exists(d / f, ec)) out.push_back(d / f);
      if (fs::exists(d / (std::string(f) + ".optim.safetensors"), ec)) out.push_back(d / (std::string(f) + ".optim.safetensors"));
    }
    for (const char* f : kEnsembleFiles)
      if (fs::exists(d / "ensemble" / f, ec)) out.push_back(d / "ensemble" / f);
  };
  // A folder and its member-XX folders.
  auto scan_with_members = [&](const fs::path& d) {
    scan(d);
    for (const auto& e : fs::directory_iterator(d, ec))
      if (e.is_directory() && starts_with(e.path(), "member-")) scan(e.path());
  };
  scan_with_members(dir);
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_directory() && starts_with(e.path(), "fold-")) scan_with_members(e.path());
  return out;
}

void claim_out_dir(const fs::path& out, const RunOptions& options) {
  const std::vector<fs::path> existing = run_files(out);
  std::error_code ec;
  if (!existing.empty() && !options.overwrite && options.resume.empty()) {
    std::string list;
    for (size_t i = 0; i < existing.size() && i < 3; ++i) list += (i ? ", " : "") + existing[i].filename().string();
    throw Error("run.out_dir '" + out.string() + "' already holds a run (" + list + (existing.size() > 3 ? ", ..." : "") +
                "): pass --overwrite to replace it, --resume " +
                (fs::exists(out / "population.json", ec) ? out : out / "last.safetensors").string() +
                " to continue it, or choose another run.out_dir");
  }
  if (options.overwrite && options.resume.empty())
    for (const fs::path& f : existing) fs::remove(f);
}

void Reporter::message(const std::string& m, int fold, int64_t step, int member, const std::string& member_name) {
  RunEvent e;
  e.kind = RunEvent::Kind::message;
  e.fold = fold;
  e.step = step;
  e.member = member;
  e.member_name = member_name;
  e.message = m;
  emit(e);
}

// ---- scoring

ScoreSpec score_spec(const RunConfig& cfg, const Panel& panel, const Split& split) {
  ScoreSpec sc;
  sc.quantiles = cfg.run.quantiles;
  sc.periods_per_year = cfg.run.periods_per_year > 0 ? cfg.run.periods_per_year : periods_per_year(panel);
  sc.train_mean = target_means(panel.y, panel.N, panel.T, panel.K, split.train_begin, split.train_end);
  return sc;
}

PredictSpec predict_spec(const TrainConfig& tc, const Panel& norm, int t0, int t1) {
  return PredictSpec{tc.L, tc.burn_in, tc.windows_per_step(norm.N), t0, t1};
}

MetricsResult score_range(const std::vector<float>& pred, const Panel& norm, const ScoreSpec& sc, int t0, int t1) {
  MetricsInput in;
  in.pred = pred;
  in.y = norm.y;
  in.N = norm.N;
  in.T = norm.T;
  in.K = norm.K;
  in.t0 = t0;
  in.t1 = t1;
  in.quantiles = sc.quantiles;
  in.periods_per_year = sc.periods_per_year;
  in.train_mean = sc.train_mean;
  return compute_metrics(in);
}

std::string seconds_text(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f s", seconds);
  return buf;
}
std::string seconds_text(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return seconds_text(std::chrono::duration<double>(b - a).count());
}

// ---- folds

std::vector<FoldPlan> plan_folds(const RunConfig& cfg, const Panel& panel, double load_seconds) {
  const std::vector<Split> splits = make_splits(cfg.split, panel);
  const int folds = int(splits.size());
  const fs::path out(cfg.run.out_dir);
  const std::string source = cfg.data.source == "csv" ? "data.csv = '" + cfg.data.csv + "'"
                             : cfg.data.source == "npy" ? "data.targets = '" + cfg.data.targets + "'"
                                                        : std::string("the synthetic panel");
  std::vector<FoldPlan> plans;
  for (int f = 0; f < folds; ++f) {
    FoldPlan p;
    p.fold = f;
    p.split = splits[f];
    p.dir = folds > 1 ? out / fold_dir_name(f) : out;
    if (f == 0) p.read_seconds = load_seconds;
    const std::string where = folds > 1 ? "walk-forward fold " + std::to_string(f) + ": " : std::string();
    const int train_len = p.split.train_end - p.split.train_begin;
    require(cfg.train.L <= train_len, where + "train.seq_len = " + std::to_string(cfg.train.L) +
                                          " is longer than the training range (" + std::to_string(train_len) +
                                          " steps: " + p.split.to_string() + "); lower train.seq_len or move split.train_end");
    require_finite_targets(panel, p.split.train_begin, p.split.train_end, where + "the training range", source);
    require_finite_targets(panel, p.split.valid_begin, p.split.valid_end, where + "the validation range", source);
    if (p.split.has_test())
      require_finite_targets(panel, p.split.test_begin, p.split.test_end, where + "the test range", source);
    p.stats = fit_feature_stats(panel, cfg.data, p.split.train_begin, p.split.train_end);
    plans.push_back(std::move(p));
  }
  return plans;
}

// ---- pooled out-of-sample predictions

OosPool::OosPool(const Panel& p, const RunConfig& cfg)
    : p_(p), cfg_(cfg), pred_(size_t(p.N) * p.T * p.K, NAN), fold_(size_t(p.T), -1), base_(size_t(p.T) * p.K, NAN) {}

void OosPool::add(const FoldPlan& plan, const std::vector<float>& pred) {
  const Split& s = plan.split;
  const std::vector<double> mean = target_means(p_.y, p_.N, p_.T, p_.K, s.train_begin, s.train_end);
  for (int t = s.test_begin; t < s.test_end; ++t) {
    fold_[size_t(t)] = plan.fold;
    for (int k = 0; k < p_.K; ++k) base_[size_t(t) * p_.K + k] = mean[size_t(k)];
    for (int i = 0; i < p_.N; ++i)
      for (int k = 0; k < p_.K; ++k) {
        const size_t at = (size_t(i) * p_.T + t) * p_.K + k;
        pred_[at] = pred[at];
      }
  }
  t0_ = std::min(t0_, s.test_begin);
  t1_ = std::max(t1_, s.test_end);
}

OosSummary OosPool::write(const fs::path& prefix) const {
  const PredictionFiles f = write_predictions(prefix.string(), p_, pred_, {t0_, t1_}, fold_);
  OosSummary o;
  o.file = f.csv;
  ScoreOptions so;
  so.quantiles = cfg_.run.quantiles;
  so.periods_per_year = cfg_.run.periods_per_year;
  o.metrics = score(pred_, p_, {t0_, t1_}, so);
  for (int k = 0; k < p_.K; ++k) {  // the training-mean baseline, fold by fold
    double ss = 0;
    int64_t n = 0;
    for (int i = 0; i < p_.N; ++i)
      for (int t = t0_; t < t1_; ++t) {
        const size_t at = (size_t(i) * p_.T + t) * p_.K + k;
        const double y = p_.y[at], b = base_[size_t(t) * p_.K + k];
        if (std::isnan(pred_[at]) || std::isnan(y) || std::isnan(b)) continue;
        ss += (b - y) * (b - y), ++n;
      }
    o.metrics.per_target[size_t(k)].mse_mean = n ? ss / double(n) : NAN;
  }
  double s = 0;
  int n = 0;
  for (const Metrics& m : o.metrics.per_target)
    if (!std::isnan(m.mse_mean)) s += m.mse_mean, ++n;
  o.metrics.mean.mse_mean = n ? s / n : NAN;
  return o;
}

// ---- one model's records

namespace {

// A resumed model's metrics.jsonl keeps the records of steps up to `start`: a crashed invocation may have
// logged steps after its last save, which the resume trains and logs again. A torn last line (a kill
// during the write) goes too. The file is rewritten (atomically) only when something is dropped.
const fs::path& keep_records_to(const fs::path& path, int64_t start) {
  std::error_code ec;
  if (start <= 0 || !fs::exists(path, ec)) return path;
  const std::string text = read_file_bytes(path.string());
  std::string kept;
  bool dropped = false;
  for (size_t at = 0; at < text.size();) {
    const size_t nl = text.find('\n', at);
    if (nl == std::string::npos) {  // no newline: a torn line
      dropped = true;
      break;
    }
    const std::string line = text.substr(at, nl - at);
    at = nl + 1;
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.contains("step") && j["step"].is_number_integer() && j["step"].get<int64_t>() > start) {
      dropped = true;
      continue;
    }
    if (j.is_discarded()) {
      dropped = true;
      continue;
    }
    kept += line + "\n";
  }
  if (dropped) write_file_atomic(path.string(), kept);
  return path;
}

}  // namespace

ModelRecorder::ModelRecorder(const RunConfig& cfg, const TrainConfig& tc, const Panel& norm, const ScoreSpec& sc,
                             Where where, CheckpointMeta meta, Access access, int64_t start)
    : cfg_(cfg),
      tc_(tc),
      norm_(norm),
      sc_(sc),
      where_(std::move(where)),
      meta_(std::move(meta)),
      access_(std::move(access)),
      layout_(cfg.model),
      jsonl_(keep_records_to(where_.dir / "metrics.jsonl", start),
             start > 0 ? JsonlWriter::Mode::append : JsonlWriter::Mode::truncate),
      reported_(start) {
  plot_.metric = cfg.run.metric;
  plot_.valid_loss_label = "validation mse";
  plot_.title = "ml-alpha: " + where_.dir.string();
  res_.fold = where_.plan->fold;
  res_.split = where_.plan->split;
  res_.dir = where_.dir.string();
  res_.best_value = higher_is_better(cfg.run.metric) ? -INFINITY : INFINITY;
  // best.json remembers the best evaluation so a resumed run keeps comparing against it.
  const fs::path best_json = where_.dir / "best.json";
  if (start > 0 && fs::exists(best_json) && fs::exists(where_.dir / "best.safetensors")) {
    const auto j = nlohmann::json::parse(read_file_bytes(best_json.string()), nullptr, false);
    if (j.is_object() && j.value("metric", "") == cfg.run.metric && j.contains("value") && j["value"].is_number()) {
      res_.best_value = j["value"].get<double>();
      res_.best_step = j.value("step", int64_t(0));
      best_params_ = load_checkpoint_weights((where_.dir / "best.safetensors").string(), cfg.model).params;
    }
  }
  // A periodic save at step `start`: the best as of that step. best.safetensors may hold a later best (the
  // crashed invocation went on); the resume finds that step's best again and writes the same weights.
  const fs::path last_json = where_.dir / kLastStateFile;
  if (start > 0 && fs::exists(last_json)) {
    const auto j = nlohmann::json::parse(read_file_bytes(last_json.string()), nullptr, false);
    if (j.is_object() && j.value("step", int64_t(-1)) == start && j.value("metric", "") == cfg.run.metric &&
        j.contains("best_step") && j["best_step"].is_number_integer() && j.contains("bad_evals") &&
        j["bad_evals"].is_number_integer()) {
      res_.best_step = j["best_step"].get<int64_t>();
      bad_evals_ = j["bad_evals"].get<int>();
      best_params_.clear();
      res_.best_value = higher_is_better(cfg.run.metric) ? -INFINITY : INFINITY;
      if (res_.best_step > 0 && fs::exists(where_.dir / "best.safetensors")) {
        res_.best_value = j.contains("best_value") && j["best_value"].is_number() ? j["best_value"].get<double>() : NAN;
        best_params_ = load_checkpoint_weights((where_.dir / "best.safetensors").string(), cfg.model).params;
      }
    }
  }
}

void ModelRecorder::save(int64_t s) {
  save_checkpoint((where_.dir / "last.safetensors").string(), layout_, access_.state(), meta_);
  nlohmann::json j{{"step", s}, {"metric", cfg_.run.metric}, {"best_step", res_.best_step}, {"bad_evals", bad_evals_}};
  j["best_value"] = res_.best_step > 0 && std::isfinite(res_.best_value) ? nlohmann::json(res_.best_value) : nlohmann::json();
  write_file_atomic((where_.dir / kLastStateFile).string(), j.dump() + "\n");
  write_curves_svg(where_.dir / "curves.svg", plot_);
}

RunEvent ModelRecorder::event(RunEvent::Kind kind, int64_t s) const {
  RunEvent e;
  e.kind = kind;
  e.fold = where_.plan->fold;
  e.step = s;
  e.member = where_.member;
  e.member_name = where_.member_name;
  return e;
}

void ModelRecorder::log(int64_t s, Reporter& rep) {
  RunEvent e = event(RunEvent::Kind::log, s);
  for (; reported_ < s;) {  // the GPU backend syncs once here for all these records
    const TrainPoint p = access_.point(++reported_);
    jsonl_.train(p);
    plot_.train.push_back({double(p.step), p.loss});
    res_.history.push_back(p);
    e.points.push_back(p);
  }
  rep.emit(e);
}

bool ModelRecorder::validate(int64_t s, Reporter& rep) {
  const Split& split = where_.plan->split;
  Evaluation ev;
  ev.step = s;
  ev.metrics = score_range(access_.predict(predict_spec(tc_, norm_, split.valid_begin, split.valid_end), nullptr), norm_,
                           sc_, split.valid_begin, split.valid_end);
  ev.value = metric_by_name(ev.metrics.mean, cfg_.run.metric);
  ev.best = is_improvement(cfg_.run.metric, ev.value, res_.best_value) || best_params_.empty();
  jsonl_.metrics(s, "valid", ev.metrics);
  plot_.valid.push_back({double(s), ev.value});
  plot_.valid_loss.push_back({double(s), ev.metrics.mean.mse});
  if (ev.best) {
    best_eval_ = ev.metrics;
    res_.best_value = ev.value;
    res_.best_step = s;
    bad_evals_ = 0;
    const TrainState st = access_.state();
    best_params_ = st.params;
    save_checkpoint((where_.dir / "best.safetensors").string(), layout_, st, meta_);
    write_file_atomic((where_.dir / "best.json").string(),
                      nlohmann::json{{"metric", cfg_.run.metric}, {"value", ev.value}, {"step", s}}.dump() + "\n");
  } else if (cfg_.run.patience > 0) {
    ++bad_evals_;
  }
  res_.evaluations.push_back(ev);
  RunEvent e = event(RunEvent::Kind::eval, s);
  e.evaluation = ev;
  rep.emit(e);
  if (cfg_.run.patience > 0 && bad_evals_ >= cfg_.run.patience && s < tc_.steps) {
    res_.early_stopped = true;
    rep.message((where_.member >= 0 ? where_.member_name + ": " : std::string()) + "early stop at step " +
                    std::to_string(s) + ": no " + cfg_.run.metric + " improvement in " + std::to_string(bad_evals_) +
                    " evaluations (best " + std::to_string(res_.best_value) + " at step " +
                    std::to_string(res_.best_step) + ")",
                where_.plan->fold, s, where_.member, where_.member_name);
    return true;
  }
  return false;
}

std::string ModelRecorder::finish(int64_t steps, std::vector<float>* test_pred) {
  const Split& split = where_.plan->split;
  const fs::path& out = where_.dir;
  res_.steps = steps;
  save_checkpoint((out / "last.safetensors").string(), layout_, access_.state(), meta_);
  write_curves_svg(out / "curves.svg", plot_);
  const fs::path ls_svg = out / "long_short.svg";
  bool wrote_ls = false;
  if (split.has_test() && !best_params_.empty()) {
    std::vector<float> pred = access_.predict(predict_spec(tc_, norm_, split.test_begin, split.test_end), &best_params_);
    res_.test = score_range(pred, norm_, sc_, split.test_begin, split.test_end);
    res_.has_test = true;
    jsonl_.metrics(res_.best_step, "test", res_.test);
    write_long_short_plot(ls_svg.string(), res_.test, *where_.raw,
                          "test, best checkpoint (step " + std::to_string(res_.best_step) + "),");
    wrote_ls = true;
    if (test_pred) *test_pred = std::move(pred);
  } else if (!best_eval_.portfolios.empty()) {
    write_long_short_plot(ls_svg.string(), best_eval_, *where_.raw, "validation, best step " + std::to_string(res_.best_step) + ",");
    wrote_ls = true;
  }
  return (out / "metrics.jsonl").string() + ", " + (out / "curves.svg").string() + ", " +
         (wrote_ls ? ls_svg.string() + ", " : std::string()) +
         (best_params_.empty() ? std::string() : (out / "best.safetensors").string() + ", ") +
         (out / "last.safetensors").string() +
         (best_params_.empty() ? " (no validation ran, so there is no best checkpoint)" : "");
}

void ModelRecorder::retest(int64_t steps, std::vector<float>* test_pred) {
  const Split& split = where_.plan->split;
  res_.steps = steps;
  if (!split.has_test() || best_params_.empty()) return;
  std::vector<float> pred = access_.predict(predict_spec(tc_, norm_, split.test_begin, split.test_end), &best_params_);
  res_.test = score_range(pred, norm_, sc_, split.test_begin, split.test_end);
  res_.has_test = true;
  if (test_pred) *test_pred = std::move(pred);
}

}  // namespace mlalpha

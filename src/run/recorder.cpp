// One model's records in its folder (recorder.h).
#include "run/recorder.h"

#include <nlohmann/json.hpp>

#include <cmath>

#include "core/atomic_file.h"
#include "core/error.h"
#include "data/fileio.h"
#include "mlalpha/eval.h"

namespace mlalpha {

namespace fs = std::filesystem;

namespace {

// A resumed model's metrics.jsonl keeps the records of steps up to `start`: a crashed invocation may have
// logged steps after its last save, which the resume trains and logs again. A torn last line (a kill
// during the write) goes too, and so does a test record of a model that is not finished (the end of a run
// writes it before the last checkpoint that says the model is finished; the resume tests again). The file is
// rewritten (atomically) only when something is dropped.
const fs::path& keep_records_to(const fs::path& path, int64_t start, bool finished) {
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
    if (j.is_discarded() ||
        (j.is_object() && j.contains("step") && j["step"].is_number_integer() && j["step"].get<int64_t>() > start) ||
        (!finished && j.is_object() && j.value("split", "") == "test")) {
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
                             Where where, CheckpointMeta meta, Access access, int64_t start, const ModelState& state)
    : cfg_(cfg),
      tc_(tc),
      norm_(norm),
      sc_(sc),
      where_(std::move(where)),
      meta_(std::move(meta)),
      access_(std::move(access)),
      layout_(cfg.model),
      jsonl_(keep_records_to(where_.dir / "metrics.jsonl", start,
                             state.present && state.step == start && (state.early_stopped || start >= tc.steps)),
             start > 0 ? JsonlWriter::Mode::append : JsonlWriter::Mode::truncate),
      reported_(start) {
  plot_.metric = cfg.run.metric;
  plot_.valid_loss_label = "validation mse";
  // The training loss's own axis: its kind, and its units when the targets were rescaled.
  const std::string units = !target_units(cfg.data).empty() ? ", " + target_units(cfg.data) + " targets"
                            : cfg.data.target_scale == "std" ? ", scaled targets"
                                                            : std::string();
  plot_.loss_label = tc.loss == LossKind::IC      ? "training loss: -IC"
                     : tc.loss == LossKind::Huber ? "training huber" + units
                                                  : "training mse" + units;
  plot_.title = "ml-alpha training: " + where_.dir.string();
  res_.fold = where_.plan->fold;
  res_.split = where_.plan->split;
  res_.dir = where_.dir.string();
  const double worst = higher_is_better(cfg.run.metric) ? -INFINITY : INFINITY;
  res_.best_value = worst;
  if (start <= 0) return;
  const fs::path best_file = where_.dir / "best.safetensors";
  const bool at_start = state.present && state.step == start;
  res_.early_stopped = at_start && state.early_stopped;
  if (at_start && state.best_known && state.metric == cfg.run.metric) {
    // The best as of step `start`. best.safetensors may hold a later best (a crashed invocation went on); the
    // resume finds that step's best again and writes the same weights.
    res_.best_step = state.best_step;
    bad_evals_ = state.bad_evals;
    if (res_.best_step > 0 && fs::exists(best_file)) {
      res_.best_value = state.best_value;
      best_params_ = load_checkpoint_weights(best_file.string(), cfg.model).params;
    }
    return;
  }
  // best.json remembers the best evaluation so a resumed run keeps comparing against it.
  const bool same_metric = state.metric.empty() || state.metric == cfg.run.metric;
  bad_evals_ = at_start && same_metric ? state.bad_evals : 0;
  const fs::path best_json = where_.dir / "best.json";
  if (fs::exists(best_json) && fs::exists(best_file)) {
    const auto j = nlohmann::json::parse(read_file_bytes(best_json.string()), nullptr, false);
    if (j.is_object() && j.value("metric", "") == cfg.run.metric && j.contains("value") && j["value"].is_number()) {
      res_.best_value = j["value"].get<double>();
      res_.best_step = j.value("step", int64_t(0));
      best_params_ = load_checkpoint_weights(best_file.string(), cfg.model).params;
    }
  }
}

void ModelRecorder::save_last(int64_t s, AtomicFileSet& set) {
  // The weights, the optimizer state and state.json (where the model stood) become current in one step, with
  // the other members' of a population.
  write_checkpoint(set, (where_.dir / "last.safetensors").string(), layout_, access_.state(), meta_);
  ModelState st;
  st.present = st.best_known = true;
  st.step = s;
  st.metric = cfg_.run.metric;
  st.best_step = res_.best_step;
  st.best_value = res_.best_value;
  st.bad_evals = bad_evals_;
  st.early_stopped = res_.early_stopped;
  const std::string text = model_state_text(st);
  set.add((where_.dir / kModelStateFile).string()).write(text.data(), text.size());
}

void ModelRecorder::save(int64_t s, AtomicFileSet& set) {
  write_curves_svg(where_.dir / "curves.svg", plot_);
  save_last(s, set);
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
  for (; reported_ < s;) {  // the GPU engine syncs once here for all these records
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
  ev.metrics = score_range(access_.predict(split.valid_begin, split.valid_end, nullptr), norm_, sc_, split.valid_begin,
                           split.valid_end);
  ev.value = metric_by_name(ev.metrics.mean, cfg_.run.metric);
  ev.best = is_improvement(cfg_.run.metric, ev.value, res_.best_value) || best_params_.empty();
  jsonl_.metrics(s, "valid", ev.metrics);
  plot_.valid.push_back({double(s), ev.value});
  // The validation mse shares the loss panel only with an mse loss in the same units (not an IC or a Huber loss,
  // nor targets divided by their scale for training while the metrics are in the targets' units).
  if (tc_.loss == LossKind::MSE && cfg_.data.target_scale == "none") plot_.valid_loss.push_back({double(s), ev.metrics.mean.mse});
  if (ev.best) {
    best_eval_ = ev.metrics;
    res_.best_value = ev.value;
    res_.best_step = s;
    bad_evals_ = 0;
    const TrainState st = access_.state();
    best_params_ = st.params;
    // The best weights with their optimizer state and best.json, in one step.
    AtomicFileSet set((where_.dir / "best.journal").string());
    write_checkpoint(set, (where_.dir / "best.safetensors").string(), layout_, st, meta_);
    const std::string text =
        nlohmann::json{{"metric", cfg_.run.metric}, {"value", ev.value}, {"step", s}}.dump() + "\n";
    set.add((where_.dir / "best.json").string()).write(text.data(), text.size());
    if (access_.before_save) access_.before_save();
    set.commit();
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

std::vector<float> ModelRecorder::test(std::vector<float>* test_pred) {
  const Split& split = where_.plan->split;
  std::vector<float> pred = access_.predict(split.test_begin, split.test_end, &best_params_);
  res_.test = score_range(pred, norm_, sc_, split.test_begin, split.test_end);
  res_.has_test = true;
  if (test_pred) *test_pred = pred;
  return pred;
}

std::string ModelRecorder::finish(int64_t steps, std::vector<float>* test_pred, AtomicFileSet& set) {
  const Split& split = where_.plan->split;
  const fs::path& out = where_.dir;
  res_.steps = steps;
  write_curves_svg(out / "curves.svg", plot_);
  const fs::path ls_svg = out / "long_short.svg";
  bool wrote_ls = false;
  if (split.has_test() && !best_params_.empty()) {
    test(test_pred);
    jsonl_.metrics(res_.best_step, "test", res_.test);
    write_long_short_plot(ls_svg.string(), res_.test, *where_.raw,
                          "test range, best checkpoint (step " + std::to_string(res_.best_step) + ")", target_units(cfg_.data));
    wrote_ls = true;
  } else if (!best_eval_.portfolios.empty()) {
    write_long_short_plot(ls_svg.string(), best_eval_, *where_.raw,
                          "validation range, best step " + std::to_string(res_.best_step), target_units(cfg_.data));
    wrote_ls = true;
  }
  // Last: the checkpoint whose state.json says the model is finished, current when `set` commits. A kill before
  // that resumes the model from its previous save, which writes the test record and the plots again
  // (keep_records_to).
  save_last(steps, set);
  return (out / "metrics.jsonl").string() + ", " + (out / "curves.svg").string() + ", " +
         (wrote_ls ? ls_svg.string() + ", " : std::string()) +
         (best_params_.empty() ? std::string() : (out / "best.safetensors").string() + ", ") +
         (out / "last.safetensors").string() +
         (best_params_.empty() ? " (no validation ran, so there is no best checkpoint)" : "");
}

void ModelRecorder::retest(int64_t steps, std::vector<float>* test_pred) {
  res_.steps = steps;
  if (where_.plan->split.has_test() && !best_params_.empty()) test(test_pred);
}

}  // namespace mlalpha

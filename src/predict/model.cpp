// Model (include/mlalpha/model.h): a checkpoint's weights and settings, prediction and scoring.
#include "mlalpha/model.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <sstream>

#include "checkpoint/checkpoint.h"
#include "checkpoint/run_record.h"
#include "core/error.h"
#include "data/fileio.h"
#include "model/layout.h"
#include "predict/model_parts.h"
#include "predict/predict.h"
#include "predict/predict_session.h"

namespace mlalpha {

std::string to_string(PredictMode m) { return m == PredictMode::carry ? "carry" : "window"; }

PredictMode parse_predict_mode(const std::string& s, const std::string& what) {
  if (s == "window") return PredictMode::window;
  if (s == "carry") return PredictMode::carry;
  throw Error(what + " must be 'window' (each date from the window of its last train.seq_len rows, the default) or "
                     "'carry' (the state carried from each instrument's first row, as the stream), got '" + s + "'");
}

PredictMode default_predict_mode(const TrainConfig& tc) {
  return tc.state == StateMode::Carry ? PredictMode::carry : PredictMode::window;
}

PredictMode resolve_predict_mode(const std::string& s, const TrainConfig& tc, const std::string& what,
                                 std::string* note) {
  if (!s.empty()) return parse_predict_mode(s, what);
  const PredictMode m = default_predict_mode(tc);
  if (note && m == PredictMode::carry)
    *note = "mode carry: the model was trained with train.state = 'carry', so each instrument's state is carried from "
            "its first row (" + what + " window for each date from its own window)";
  return m;
}

struct Model::Impl {
  CheckpointMeta meta;
  TrainState state;  // params always; m, v and counters when has_optim
  bool has_optim = false;
  bool has_data = false;
  bool has_split = false;  // the run record is present: recorded.split is the split trained with
  RunConfig recorded;  // data and split sections, when has_data
  int fold = 0;
};

Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;
Model::~Model() = default;

namespace {
Model load_model(const std::string& path, bool with_optimizer);
}  // namespace

Model Model::load(const std::string& path) { return load_model(path, true); }
Model Model::load_weights(const std::string& path) { return load_model(path, false); }

namespace {
Model load_model(const std::string& path, bool with_optimizer) {
  auto impl = std::make_unique<Model::Impl>();
  std::error_code ec;
  if (with_optimizer && std::filesystem::exists(optim_sidecar_path(path), ec)) {
    Checkpoint ck = load_checkpoint(path);
    impl->meta = std::move(ck.meta);
    impl->state = std::move(ck.state);
    impl->has_optim = true;
  } else {
    CheckpointWeights w = load_checkpoint_weights(path);
    impl->meta = std::move(w.meta);
    impl->state.params = std::move(w.params);
    impl->state.step = w.step;
    impl->state.adam_step = w.step;
    impl->state.seed = impl->meta.train.seed;
  }
  // Non-finite weights and corrupted bytes were refused by the checkpoint reader.
  const RunRecord rec = decode_run_record(impl->meta.data_json, path);
  impl->has_data = rec.present && rec.described;
  impl->has_split = rec.present;
  impl->recorded = rec.settings;
  impl->fold = rec.fold;
  return Model(std::move(impl));
}
}  // namespace

void Model::save(const std::string& path) const {
  const ModelLayout layout(impl_->meta.model);
  TrainState st = impl_->state;
  if (!impl_->has_optim) {
    // Without optimizer state the sidecar holds zero moments: the checkpoint predicts like the original;
    // a resume from it restarts AdamW's moments (the bias corrections restart with them).
    st.m.assign(st.params.size(), 0.0f);
    st.v.assign(st.params.size(), 0.0f);
    st.adam_step = st.step;
    st.skipped_total = 0;
  }
  save_checkpoint(path, layout, st, impl_->meta);
}

const std::vector<float>& model_params(const Model& model) { return model.impl().state.params; }

const ModelConfig& Model::model_config() const { return impl_->meta.model; }
const TrainConfig& Model::train_config() const { return impl_->meta.train; }
const FeatureStats& Model::feature_stats() const { return impl_->meta.stats; }
const std::vector<std::string>& Model::feature_names() const { return impl_->meta.feature_names; }
const std::vector<std::string>& Model::target_names() const { return impl_->meta.target_names; }
int64_t Model::step() const { return impl_->state.step; }
size_t Model::parameters() const { return ModelLayout(impl_->meta.model).table.count(); }
bool Model::has_optimizer_state() const { return impl_->has_optim; }
int Model::fold() const { return impl_->fold; }
std::vector<Model::Tensor> Model::tensors() const {
  std::vector<Tensor> out;
  const ModelLayout layout(impl_->meta.model);
  for (const auto& t : layout.table.tensors())
    out.push_back({t.name, std::vector<int64_t>(t.shape.begin(), t.shape.end())});
  return out;
}
bool Model::has_data_config() const { return impl_->has_data; }
const DataConfig& Model::data_config() const { return impl_->recorded.data; }
const SplitConfig& Model::split_config() const { return impl_->recorded.split; }

void Model::check_panel(const Panel& raw, const std::string& what) const {
  const ModelConfig& mc = impl_->meta.model;
  require(raw.F == mc.F && raw.K == mc.K, what + ": the model takes " + std::to_string(mc.F) + " features and " +
                                              std::to_string(mc.K) + " targets, the data has " + std::to_string(raw.F) +
                                              " features and " + std::to_string(raw.K) + " targets");
  const auto& names = impl_->meta.feature_names;
  if (!names.empty() && !raw.feature_names.empty() && names != raw.feature_names) {
    std::string diff;
    for (size_t i = 0; i < names.size(); ++i)
      if (names[i] != raw.feature_names[i]) {
        diff = "feature " + std::to_string(i) + " is '" + raw.feature_names[i] + "', the model expects '" + names[i] + "'";
        break;
      }
    throw Error(what + ": the data's feature columns differ from those the model was trained on (" + diff + ")");
  }
}

Panel Model::prepare(const Panel& raw) const {
  raw.validate();
  check_panel(raw, "predict");
  return prepared(raw, impl_->recorded.data, impl_->meta.stats);
}

std::vector<float> Model::predict_prepared(const Panel& norm, TimeRange range, const Compute& compute,
                                           PredictMode mode) const {
  norm.validate();
  check_panel(norm, "predict");
  require(0 <= range.t0 && range.t0 < range.t1 && range.t1 <= norm.T,
          "predict: the time range [" + std::to_string(range.t0) + ", " + std::to_string(range.t1) +
              ") is empty or outside the data's [0, " + std::to_string(norm.T) + ")");
  PredictSession session(compute, impl_->meta.model, impl_->meta.train);
  session.load(norm, range, mode);
  std::vector<float> pred = session.predict(impl_->state.params);
  unscale_predictions(pred, norm.K, impl_->meta.stats);  // data.target_scale: back to the targets' units
  return pred;
}

std::vector<int> Model::context(const Panel& p, PredictMode mode) const {
  if (mode == PredictMode::window) return window_contexts(p.N, p.T, impl_->meta.train.L);
  std::vector<int> out(size_t(p.N) * p.T);
  for (int i = 0; i < p.N; ++i)
    for (int t = 0, seen = 0; t < p.T; ++t) out[size_t(i) * p.T + t] = seen += (input_row(p, i, t) & kRowFeatures) ? 1 : 0;
  return out;
}

std::vector<float> Model::do_predict(const Panel& raw, TimeRange range, const Compute& compute, PredictMode mode) const {
  raw.validate();
  check_panel(raw, "predict");
  require(0 <= range.t0 && range.t0 < range.t1 && range.t1 <= raw.T,
          "predict: the time range [" + std::to_string(range.t0) + ", " + std::to_string(range.t1) +
              ") is empty or outside the data's [0, " + std::to_string(raw.T) + ")");
  return predict_prepared(prepare(raw), range, compute, mode);
}

MetricsResult Model::do_evaluate(const Panel& raw, TimeRange range, const Compute& compute, const ScoreOptions& options,
                                 PredictMode mode) const {
  const Panel norm = prepare(raw);
  return score(predict_prepared(norm, range, compute, mode), norm, range, options);
}

TimeRange Model::training_range(const Panel& raw) const {
  if (!impl_->has_split) return {};
  try {
    const std::vector<Split> splits = make_splits(impl_->recorded.split, raw);
    if (impl_->fold < 0 || impl_->fold >= int(splits.size())) return {};
    return {splits[size_t(impl_->fold)].train_begin, splits[size_t(impl_->fold)].train_end};
  } catch (const Error&) {
    return {};  // the recorded split does not fit this panel: there is no training range on it to compare with
  }
}

std::vector<std::string> Model::range_warnings(const Panel& raw, TimeRange range, const std::string& what) const {
  std::vector<std::string> out;
  const TimeRange tr = training_range(raw);
  if (tr.empty() || range.empty()) return out;
  const int lo = std::max(tr.t0, range.t0), hi = std::min(tr.t1, range.t1);
  if (lo < hi)
    out.push_back("warning: " + what + " " + range_text(raw, range) + " overlaps the checkpoint's training range " +
                  range_text(raw, tr) + " in " + std::to_string(hi - lo) +
                  " time steps: those metrics are in-sample, not a backtest");
  return out;
}

}  // namespace mlalpha

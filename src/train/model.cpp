// Model (include/mlalpha/model.h): a checkpoint's weights and settings, prediction and scoring.
#include "mlalpha/model.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <sstream>

#include "core/error.h"
#include "data/fileio.h"
#include "data/npy.h"
#include "model/layout.h"
#include "train/backend.h"
#include "train/checkpoint.h"
#include "train/predict.h"
#include "train/report.h"
#include "train/run_record.h"

namespace mlalpha {

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

std::vector<float> Model::predict_prepared(const Panel& norm, TimeRange range, const std::string& device,
                                           Precision precision) const {
  norm.validate();
  check_panel(norm, "predict");
  require(0 <= range.t0 && range.t0 < range.t1 && range.t1 <= norm.T,
          "predict: the time range [" + std::to_string(range.t0) + ", " + std::to_string(range.t1) +
              ") is empty or outside the data's [0, " + std::to_string(norm.T) + ")");
  const TrainConfig& tc = impl_->meta.train;
  const ModelLayout layout(impl_->meta.model);
  return predict_with(device, precision, layout, impl_->state.params, norm, {tc.L, tc.burn_in, tc.windows_per_step(norm.N), range.t0, range.t1});
}

std::vector<float> Model::predict(const Panel& raw, TimeRange range, const std::string& device, Precision precision) const {
  raw.validate();
  check_panel(raw, "predict");
  require(0 <= range.t0 && range.t0 < range.t1 && range.t1 <= raw.T,
          "predict: the time range [" + std::to_string(range.t0) + ", " + std::to_string(range.t1) +
              ") is empty or outside the data's [0, " + std::to_string(raw.T) + ")");
  return predict_prepared(prepare(raw), range, device, precision);
}

MetricsResult Model::evaluate(const Panel& raw, TimeRange range, const std::string& device, Precision precision,
                              const ScoreOptions& options) const {
  const Panel norm = prepare(raw);
  return score(predict_prepared(norm, range, device, precision), norm, range, options);
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

std::string range_text(const Panel& p, TimeRange r) {
  // Built with append: GCC 12 reports a false -Wrestrict on "literal" + std::string&&.
  std::string s(1, '[');
  s.append(std::to_string(r.t0)).append(", ").append(std::to_string(r.t1)).append(")");
  if (!r.empty() && size_t(r.t1) <= p.times.size())
    s.append(" (").append(p.times[size_t(r.t0)]).append(" .. ").append(p.times[size_t(r.t1 - 1)]).append(")");
  return s;
}

void write_long_short_plot(const std::string& path, const MetricsResult& r, const Panel& panel, const std::string& what) {
  LongShortPlot plot;
  for (size_t k = 0; k < r.portfolios.size(); ++k) {
    const PortfolioSeries& ps = r.portfolios[k];
    LongShortPlot::Line line;
    line.label = k < panel.target_names.size() ? panel.target_names[k] : "target " + std::to_string(k);
    double cum = 0;
    for (size_t i = 0; i < ps.long_short.size(); ++i)
      if (ps.formed[i]) line.points.push_back({double(ps.t0 + int(i)), cum += ps.long_short[i]});
    plot.lines.push_back(std::move(line));
  }
  const int t0 = r.portfolios.empty() ? 0 : r.portfolios[0].t0;
  const int t1 = r.portfolios.empty() ? 0 : t0 + int(r.portfolios[0].long_short.size());
  plot.title = "cumulative long-short (top − bottom of " + std::to_string(r.portfolios.empty() ? 0 : r.portfolios[0].quantiles) +
               " quantiles), " + what + " " + range_text(panel, {t0, t1});
  write_long_short_svg(path, plot);
}

double score_periods_per_year(const Panel& p, const ScoreOptions& o) {
  return o.periods_per_year > 0 ? o.periods_per_year : periods_per_year(p);
}

MetricsResult score(const std::vector<float>& pred, const Panel& p, TimeRange range, const ScoreOptions& options) {
  MetricsInput in;
  in.pred = pred;
  in.y = p.y;
  in.N = p.N;
  in.T = p.T;
  in.K = p.K;
  in.t0 = range.t0;
  in.t1 = range.t1;
  in.quantiles = options.quantiles;
  in.periods_per_year = score_periods_per_year(p, options);
  std::vector<double> base;
  if (!options.train.empty()) base = target_means(p.y, p.N, p.T, p.K, options.train.t0, options.train.t1);
  in.train_mean = base;
  return compute_metrics(in);
}

TimeRange split_range(const Split& s, const std::string& split, int T) {
  TimeRange r;
  if (split == "train") r = {s.train_begin, s.train_end};
  else if (split == "valid") r = {s.valid_begin, s.valid_end};
  else if (split == "test") r = {s.test_begin, s.test_end};
  else if (split == "all") r = {0, T};
  else throw Error("the split must be train, valid, test or all, got '" + split + "'");
  require(r.t1 > r.t0, "the " + split + " split is empty (" + s.to_string() + ")");
  return r;
}

namespace {
std::string label(const std::vector<std::string>& names, size_t i) {
  return i < names.size() ? names[i] : std::to_string(i);
}
}  // namespace

namespace {
// The shortest decimal that reads back as the same float ("0.1", "-3.25e-07", "inf").
void put_float(std::string& s, float v) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  s.append(buf, r.ptr);
}

// A row that was missing in the input: every feature and every target NaN (docs/data.md).
bool row_observed(const Panel& p, int i, int t) {
  const float* x = p.x.data() + (size_t(i) * p.T + t) * p.F;
  const float* y = p.y.data() + (size_t(i) * p.T + t) * p.K;
  for (int f = 0; f < p.F; ++f)
    if (!std::isnan(x[f])) return true;
  for (int k = 0; k < p.K; ++k)
    if (!std::isnan(y[k])) return true;
  return false;
}
}  // namespace

PredictionFiles write_predictions(const std::string& prefix, const Panel& p, const std::vector<float>& pred,
                                  TimeRange range, const std::vector<int>& fold_of_time) {
  require(pred.size() == size_t(p.N) * p.T * p.K, "write_predictions: " + std::to_string(pred.size()) +
                                                      " predictions for a panel of N × T × K = " +
                                                      std::to_string(size_t(p.N) * p.T * p.K));
  require(fold_of_time.empty() || fold_of_time.size() == size_t(p.T),
          "write_predictions: fold_of_time has " + std::to_string(fold_of_time.size()) + " entries, expected T = " +
              std::to_string(p.T));
  require(0 <= range.t0 && range.t0 <= range.t1 && range.t1 <= p.T, "write_predictions: the range " +
                                                                       range_text(p, range) + " is outside [0, T)");
  const bool folds = !fold_of_time.empty();
  PredictionFiles out{prefix + ".npy", prefix + ".csv", 0};
  std::string csv = folds ? "time,instrument,fold,observed" : "time,instrument,observed";
  for (int k = 0; k < p.K; ++k) csv += ",pred_" + label(p.target_names, k);
  for (int k = 0; k < p.K; ++k) csv += ",target_" + label(p.target_names, k);
  csv += "\n";
  for (int t = range.t0; t < range.t1; ++t)
    for (int i = 0; i < p.N; ++i) {
      const size_t base = (size_t(i) * p.T + t) * p.K;
      if (std::isnan(pred[base])) continue;
      csv += label(p.times, t) + "," + label(p.instruments, i);
      if (folds) csv.append(",").append(std::to_string(fold_of_time[size_t(t)]));
      csv += row_observed(p, i, t) ? ",1" : ",0";
      for (int k = 0; k < p.K; ++k) csv += ",", put_float(csv, pred[base + k]);
      for (int k = 0; k < p.K; ++k) {
        csv += ",";
        if (!std::isnan(p.y[base + k])) put_float(csv, p.y[base + k]);
      }
      csv += "\n";
      ++out.rows;
    }
  // Both files are built before either is written, and each is written atomically.
  const int64_t shape[3] = {p.N, p.T, p.K};
  write_npy(out.npy, pred, shape);
  write_file_atomic(out.csv, csv);
  return out;
}

}  // namespace mlalpha

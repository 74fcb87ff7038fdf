// Model (include/mlalpha/model.h): a checkpoint's weights and settings, prediction and scoring.
#include "mlalpha/model.h"

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
#include "train/run_record.h"

namespace mlalpha {

struct Model::Impl {
  CheckpointMeta meta;
  TrainState state;  // params always; m, v and counters when has_optim
  bool has_optim = false;
  bool has_data = false;
  RunConfig recorded;  // data and split sections, when has_data
  int fold = 0;
};

Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;
Model::~Model() = default;

Model Model::load(const std::string& path) {
  auto impl = std::make_unique<Impl>();
  std::error_code ec;
  if (std::filesystem::exists(optim_sidecar_path(path), ec)) {
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
  impl->recorded = rec.settings;
  impl->fold = rec.fold;
  return Model(std::move(impl));
}

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

std::vector<float> Model::predict(const Panel& raw, TimeRange range, const std::string& device, bool tf32) const {
  raw.validate();
  check_panel(raw, "predict");
  require(0 <= range.t0 && range.t0 < range.t1 && range.t1 <= raw.T,
          "predict: the time range [" + std::to_string(range.t0) + ", " + std::to_string(range.t1) +
              ") is empty or outside the data's [0, " + std::to_string(raw.T) + ")");
  const Panel norm = normalized(raw, impl_->meta.stats);
  const TrainConfig& tc = impl_->meta.train;
  const ModelLayout layout(impl_->meta.model);
  return predict_with(device, tf32, layout, impl_->state.params, norm, {tc.L, tc.burn_in, tc.windows_per_step(norm.N), range.t0, range.t1});
}

MetricsResult Model::evaluate(const Panel& raw, TimeRange range, const std::string& device, bool tf32) const {
  return score(predict(raw, range, device, tf32), raw, range);
}

MetricsResult score(const std::vector<float>& pred, const Panel& p, TimeRange range) {
  MetricsInput in;
  in.pred = pred;
  in.y = p.y;
  in.N = p.N;
  in.T = p.T;
  in.K = p.K;
  in.t0 = range.t0;
  in.t1 = range.t1;
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

PredictionFiles write_predictions(const std::string& prefix, const Panel& p, const std::vector<float>& pred,
                                  TimeRange range) {
  require(pred.size() == size_t(p.N) * p.T * p.K, "write_predictions: " + std::to_string(pred.size()) +
                                                      " predictions for a panel of N × T × K = " +
                                                      std::to_string(size_t(p.N) * p.T * p.K));
  PredictionFiles out{prefix + ".npy", prefix + ".csv", 0};
  std::ostringstream csv;
  csv.precision(9);
  csv << "time,instrument";
  for (int k = 0; k < p.K; ++k) csv << ",pred_" << label(p.target_names, k);
  for (int k = 0; k < p.K; ++k) csv << ",target_" << label(p.target_names, k);
  csv << "\n";
  for (int t = range.t0; t < range.t1; ++t)
    for (int i = 0; i < p.N; ++i) {
      const size_t base = (size_t(i) * p.T + t) * p.K;
      if (std::isnan(pred[base])) continue;
      csv << label(p.times, t) << "," << label(p.instruments, i);
      for (int k = 0; k < p.K; ++k) csv << "," << pred[base + k];
      for (int k = 0; k < p.K; ++k) {
        csv << ",";
        if (!std::isnan(p.y[base + k])) csv << p.y[base + k];
      }
      csv << "\n";
      ++out.rows;
    }
  // Both files are built before either is written, and each is written atomically.
  const int64_t shape[3] = {p.N, p.T, p.K};
  write_npy(out.npy, pred, shape);
  write_file_atomic(out.csv, csv.str());
  return out;
}

}  // namespace mlalpha

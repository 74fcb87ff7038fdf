#pragma once
// A trained model: weights with the settings and feature statistics they were trained with, read from and
// written to the checkpoints `train` leaves (docs/checkpoints.md: safetensors with mamba_ssm / PyTorch
// tensor names, plus an .optim.safetensors sidecar with the AdamW state when there is one).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mlalpha/config.h"
#include "mlalpha/metrics.h"
#include "mlalpha/panel.h"
#include "mlalpha/error.h"

namespace mlalpha {

// Which part of a panel's time axis to predict or score.
struct TimeRange {
  int t0 = 0, t1 = 0;  // half-open [t0, t1)
  bool empty() const { return t1 <= t0; }
};

// The settings of the portfolio metrics and baselines (docs/metrics.md).
struct ScoreOptions {
  int quantiles = 5;            // run.quantiles
  double periods_per_year = 0;  // run.periods_per_year; 0: periods_per_year(panel) (NaN when not dates)
  TimeRange train;              // the training range: its mean target is the mse_mean predictor (empty: NaN)
};

class Model {
 public:
  // Reads a checkpoint; the optimizer sidecar is read too when present (it is needed only to resume).
  // Corrupted bytes, non-finite weights and tensors that do not fit the recorded model are errors.
  static Model load(const std::string& path);
  // The weights and settings alone, the sidecar left unread (has_optimizer_state() false): what prediction
  // needs, a third of the memory of load's.
  static Model load_weights(const std::string& path);
  Model(Model&&) noexcept;
  Model& operator=(Model&&) noexcept;
  ~Model();

  // Writes the checkpoint atomically (and its sidecar when the model has optimizer state).
  void save(const std::string& path) const;

  const ModelConfig& model_config() const;
  const TrainConfig& train_config() const;
  const FeatureStats& feature_stats() const;
  const std::vector<std::string>& feature_names() const;
  const std::vector<std::string>& target_names() const;
  int64_t step() const;      // training steps behind these weights
  size_t parameters() const;  // trainable parameters
  bool has_optimizer_state() const;
  int fold() const;  // the walk-forward fold it was trained in (0 for a single split)
  // Tensor names (mamba_ssm / PyTorch) and shapes, in checkpoint order.
  struct Tensor {
    std::string name;
    std::vector<int64_t> shape;
  };
  std::vector<Tensor> tensors() const;
  // The data and split settings the model was trained with, when the checkpoint records them.
  bool has_data_config() const;
  const DataConfig& data_config() const;
  const SplitConfig& split_config() const;

  // `raw` as the model sees it: processed with the training's data settings (data.feature_norm,
  // robust_clip, target_norm, nan_fill, as recorded in the checkpoint; today's defaults for a checkpoint
  // that records none) and statistics (feature_stats()). Targets included: processed targets are what
  // the predictions estimate.
  Panel prepare(const Panel& raw) const;
  // Predicts (N, T, K) on an already prepared panel, NaN outside `range`, with windows of the training
  // length exactly as in validation; in the units of the processed targets. device: "auto" | "cpu" | "gpu".
  std::vector<float> predict_prepared(const Panel& prepared, TimeRange range, const std::string& device = "auto",
                                      Precision precision = Precision::FP32) const;
  // predict_prepared(prepare(raw)).
  std::vector<float> predict(const Panel& raw, TimeRange range, const std::string& device = "auto",
                             Precision precision = Precision::FP32) const;
  // Predicts, then the metrics over `range` against the processed targets (as validation computes them).
  MetricsResult evaluate(const Panel& raw, TimeRange range, const std::string& device = "auto",
                         Precision precision = Precision::FP32, const ScoreOptions& options = {}) const;
  // The range the checkpoint's weights were trained on, on this panel's time axis (its recorded split and
  // fold applied to `raw`); empty when the checkpoint does not record its split or that split does not fit
  // `raw` (then there is nothing to compare a range with).
  TimeRange training_range(const Panel& raw) const;
  // Warnings for the user (the caller prints them): `range` overlapping the training range, named with
  // both ranges' time labels. Empty when there is nothing to warn about.
  std::vector<std::string> range_warnings(const Panel& raw, TimeRange range, const std::string& what) const;
  // Refuses a panel whose feature / target counts or feature names differ from the model's.
  void check_panel(const Panel& raw, const std::string& what) const;

  struct Impl;
  explicit Model(std::unique_ptr<Impl> impl);
  const Impl& impl() const { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

// Metrics of predictions (N, T, K) against the panel's targets over `range` (docs/metrics.md).
MetricsResult score(const std::vector<float>& pred, const Panel& p, TimeRange range, const ScoreOptions& options = {});
// The periods per year the options give: options.periods_per_year when > 0, else periods_per_year(p).
double score_periods_per_year(const Panel& p, const ScoreOptions& options);
// Writes the cumulative long-short plot of `r` (docs/metrics.md, "Long-short plot") as an SVG, atomically:
// one line per target, the running sum of the long-short return over the steps that formed portfolios.
// `what` starts the title ("test, best checkpoint").
void write_long_short_plot(const std::string& path, const MetricsResult& r, const Panel& p, const std::string& what);
// "[12, 40) (2020-01-02 .. 2020-02-07)": a range with its first and last time labels when the panel has them.
std::string range_text(const Panel& p, TimeRange r);

// The time range of `split` ("train", "valid", "test", or "all" = the whole axis) in split `s`.
TimeRange split_range(const Split& s, const std::string& split, int T);

// Writes predictions aligned with (time, instrument) as <prefix>.npy (N, T, K) and <prefix>.csv, each
// atomically. The CSV has one row per predicted (time, instrument) in [range), time-major:
//   time, instrument, [fold,] observed, pred_<target>..., target_<target>...
// observed is 1 when the input row existed and 0 when it was missing (the panel holds it as all-NaN
// features and all-NaN targets, docs/data.md); floats are written in their shortest form that reads back
// to the same float (std::to_chars), a NaN target as an empty cell. `fold_of_time` (T), when not empty,
// adds the fold column: the walk-forward fold whose model predicted that time step.
struct PredictionFiles {
  std::string npy, csv;
  size_t rows = 0;
};
PredictionFiles write_predictions(const std::string& prefix, const Panel& p, const std::vector<float>& pred,
                                  TimeRange range, const std::vector<int>& fold_of_time = {});

}  // namespace mlalpha

#pragma once
// A trained model: weights with the settings and feature statistics they were trained with, read from and
// written to the checkpoints `train` leaves (docs/checkpoints.md: safetensors with mamba_ssm / PyTorch
// tensor names, plus an .optim.safetensors sidecar with the AdamW state when there is one).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mlalpha/compute.h"
#include "mlalpha/config.h"
#include "mlalpha/error.h"
#include "mlalpha/eval.h"
#include "mlalpha/metrics.h"
#include "mlalpha/panel.h"

namespace mlalpha {

// What a date's prediction is (DESIGN section 7; docs/data.md, "What a date's prediction is"). Either way a
// date's score depends only on the instrument's rows up to and including that date.
//   window  (the default) the output at the last row of a window of the C = train.seq_len rows ending at the
//           date, run from a zero state, as the model was trained; a date with fewer than C rows before it in
//           the input gets the shorter window of all its rows (its context, below, is < C). The score does not
//           depend on where the input starts, as long as it holds those C rows.
//   carry   the state carried from the instrument's first row given, over its present rows only (a row with a
//           finite feature; a missing row leaves the state alone and has no prediction): what the stream
//           computes bar by bar (mlalpha/stream.h). Depends on every row since the input's start.
enum class PredictMode { window, carry };
std::string to_string(PredictMode m);  // "window" | "carry"
// "window" or "carry"; anything else is an Error naming `what` (e.g. "--mode").
PredictMode parse_predict_mode(const std::string& s, const std::string& what = "mode");
// The mode a model is evaluated in when none is asked for: carry for a model trained with train.state = "carry"
// (it learned with the state it carries live), else window.
PredictMode default_predict_mode(const TrainConfig& tc);
// The mode asked for (`s`, parsed as parse_predict_mode does), or for "" the default of a model trained with `tc`;
// `note` (when non-null) receives a sentence for the command to print when the default was carry, naming why.
PredictMode resolve_predict_mode(const std::string& s, const TrainConfig& tc, const std::string& what = "mode",
                                 std::string* note = nullptr);

class Model;

// What predicts a panel: a Model, or an Ensemble (the mean of its members). The command, Python and programs
// predict and evaluate through this one interface. `compute` is resolved by the caller (mlalpha/compute.h); the
// default resolves the defaults (device auto: the GPU when one is present; every CPU thread).
class Predictor {
 public:
  virtual ~Predictor() = default;
  // Predictions (N, T, K) of `raw` (processed as the training processed its data), NaN outside `range`, each date
  // as `mode` says; in the units of the processed targets.
  std::vector<float> predict(const Panel& raw, TimeRange range, const Compute& compute = resolve({}),
                             PredictMode mode = PredictMode::window) const {
    return do_predict(raw, range, compute, mode);
  }
  // Predicts, then the metrics over `range` against the processed targets (as validation computes them).
  MetricsResult evaluate(const Panel& raw, TimeRange range, const Compute& compute = resolve({}),
                         const ScoreOptions& options = {}, PredictMode mode = PredictMode::window) const {
    return do_evaluate(raw, range, compute, options, mode);
  }
  // The models whose predictions this averages, in order: a Model, itself; an Ensemble, its members (the stream
  // steps each of them, mlalpha/stream.h).
  virtual std::vector<const Model*> models() const = 0;
  // The settings the predictions follow (an ensemble's: its first member's, which every member shares).
  virtual const ModelConfig& model_config() const = 0;
  virtual const TrainConfig& train_config() const = 0;
  virtual const std::vector<std::string>& feature_names() const = 0;
  virtual const std::vector<std::string>& target_names() const = 0;

 private:
  virtual std::vector<float> do_predict(const Panel& raw, TimeRange range, const Compute& compute,
                                        PredictMode mode) const = 0;
  virtual MetricsResult do_evaluate(const Panel& raw, TimeRange range, const Compute& compute,
                                    const ScoreOptions& options, PredictMode mode) const = 0;
};

class Model : public Predictor {
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

  std::vector<const Model*> models() const override { return {this}; }
  const ModelConfig& model_config() const override;
  const TrainConfig& train_config() const override;
  const FeatureStats& feature_stats() const;
  const std::vector<std::string>& feature_names() const override;
  const std::vector<std::string>& target_names() const override;
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
  // Predicts (N, T, K) on an already prepared panel, NaN outside `range`, each date as `mode` says (window:
  // exactly as validation scores it); in the units of the processed targets (a data.target_scale the model was
  // trained with is inverted: prepare() does not apply it). The CPU's thread count changes no bit.
  std::vector<float> predict_prepared(const Panel& prepared, TimeRange range, const Compute& compute = resolve({}),
                                      PredictMode mode = PredictMode::window) const;
  // predict(raw) is predict_prepared(prepare(raw)) (Predictor).
  // (N, T): the rows behind each date's prediction in `mode` (window: min(train.seq_len, t + 1); carry: the
  // instrument's present rows up to t). Under train.seq_len in window mode: a date with a shorter history
  // than the model was trained on (the `context` column of the prediction files).
  std::vector<int> context(const Panel& panel, PredictMode mode = PredictMode::window) const;
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
  std::vector<float> do_predict(const Panel& raw, TimeRange range, const Compute& compute,
                                PredictMode mode) const override;
  MetricsResult do_evaluate(const Panel& raw, TimeRange range, const Compute& compute, const ScoreOptions& options,
                            PredictMode mode) const override;
  std::unique_ptr<Impl> impl_;
};

// A file a command writes by renaming over it (predict's <out>.npy and .csv, eval's --long-short-svg) may not be a
// file it reads, the same file through symbolic and hard links: the data files of `data` (data.csv, data.features,
// data.targets), the checkpoint and its optimizer sidecar, or any file of the folder `checkpoint` names (a
// population run). Throws Error "<flag> <value>: <target> is the same file as <which>: the command would write over
// a file it reads (give another <flag>)".
void check_output_not_read(const std::string& flag, const std::string& value, const std::string& target,
                           const std::string& checkpoint, const DataConfig& data);

}  // namespace mlalpha

#pragma once
// The mean-ensemble of a finished population run (docs/populations.md, "Predicting with the ensemble"):
// the members' checkpoints read back from the run folder, and their predictions averaged exactly as the
// run's own ensemble (out_dir/ensemble/pred.npy) averages them.
#include <memory>
#include <string>
#include <vector>

#include "mlalpha/model.h"

namespace mlalpha {

// Which members of a population to average.
struct EnsembleSelection {
  enum class Kind { all, top, names };
  Kind kind = Kind::all;
  int top = 0;                     // Kind::top: the K best by the leaderboard's rank column
  std::vector<std::string> names;  // Kind::names: these members ("member-03")
  // "all", "top:K" (K >= 1), or a comma-separated list of member names; throws Error on anything else.
  static EnsembleSelection parse(const std::string& text);
};

class Ensemble : public Predictor {
 public:
  // Reads the members of a population run. run_dir: the run folder (out_dir, holding population.json) of a
  // single split; for a walk-forward run the run folder with `fold` >= 0, or a fold's folder (fold-k/),
  // where `fold` is -1 or k. Each member is Model::load_weights of its best.safetensors (last.safetensors
  // when it has no best). The members must share the model settings, the feature and target names, the data
  // processing settings (data.feature_norm, target_norm, nan_fill, robust_clip) and the fold; an error
  // names the member and what differs. Refused: a folder that holds no population, a member without a
  // checkpoint, top:K with K above the members, an unknown name (the error lists the members).
  static Ensemble load(const std::string& run_dir, const EnsembleSelection& selection = {}, int fold = -1);
  Ensemble(Ensemble&&) noexcept;
  Ensemble& operator=(Ensemble&&) noexcept;
  ~Ensemble();

  // The selected members in the order they are averaged: member order (member-00 first), as the run's
  // ensemble, whatever the selection's order.
  size_t size() const;
  const Model& member(size_t i) const;
  const std::string& name(size_t i) const;
  const std::string& checkpoint(size_t i) const;  // the file member(i) was read from
  // The leaderboard is read from leaderboard.json, the table as data (leaderboard.csv, its copy for people, in a
  // run folder of an older ml-alpha).
  int rank(size_t i) const;                        // its rank on the leaderboard (0: there is none)
  const std::string& dir() const;                  // the folder holding the members (out_dir or fold-k/)
  const std::string& leaderboard_file() const;     // dir()/leaderboard.csv ("" when there is none)
  // Member i's cell in the leaderboard's `column` ("best_step", "valid_ic", "test_ic", ...); "" when the
  // file or the column is missing (an empty cell is a non-finite value, docs/populations.md).
  std::string leaderboard_cell(size_t i, const std::string& column) const;
  const std::vector<std::string>& leaderboard_columns() const;  // its header ({} without the file)
  int fold() const;                                // the walk-forward fold (0 for a single split)

  // Predictor: predict is the mean over the members of Model::predict(raw, range, ...) (each member prepares
  // `raw` with its own recorded statistics), summed in double in member order and rounded once to float: NaN
  // where any member's prediction is NaN. (N, T, K), NaN outside `range`. The members share one model object and
  // one loaded panel (on the GPU: one device model, one upload of the features; each member's weights uploaded in
  // turn), so a member's predictions are bitwise its own Model::predict's. evaluate: the metrics over `range`
  // against the processed targets (member(0).prepare(raw): the members of one fold process the targets alike).
  // model_config(), train_config(), feature_names(), target_names(): member 0's, which every member shares.
  std::vector<const Model*> models() const override;  // the members, in member order
  const ModelConfig& model_config() const override { return member(0).model_config(); }
  const TrainConfig& train_config() const override { return member(0).train_config(); }
  const std::vector<std::string>& feature_names() const override { return member(0).feature_names(); }
  const std::vector<std::string>& target_names() const override { return member(0).target_names(); }

  struct Impl;
  explicit Ensemble(std::unique_ptr<Impl> impl);
  const Impl& impl() const { return *impl_; }

 private:
  std::vector<float> do_predict(const Panel& raw, TimeRange range, const Compute& compute,
                                PredictMode mode) const override;
  MetricsResult do_evaluate(const Panel& raw, TimeRange range, const Compute& compute, const ScoreOptions& options,
                            PredictMode mode) const override;
  std::unique_ptr<Impl> impl_;
};

// Whether `path` is a population run folder (it holds population.json) or a fold folder of one.
bool is_population_dir(const std::string& path);

}  // namespace mlalpha

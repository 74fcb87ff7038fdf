// The checks of a whole run configuration (RunConfig::validate, SweepConfig::validate): what the structs of
// mlalpha/config_types.h check alone, plus the data source, the split, the run settings and the sweep lists.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <string>

#include "core/error.h"
#include "core/shortest.h"
#include "data/csv.h"
#include "data/normalize.h"
#include "mlalpha/config.h"
#include "mlalpha/metric_table.h"

namespace mlalpha {

namespace {

std::string num(float v) { return shortest_text(v); }

// "sweep.lr[2]": the entry of a sweep list a message names.
std::string entry(const char* key, size_t i) { return std::string("sweep.") + key + "[" + std::to_string(i) + "]"; }

// A list names each value once: a repeat would train the same member twice.
template <typename T, typename Text>
void distinct(const char* key, const std::vector<T>& v, Text text) {
  for (size_t i = 0; i < v.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      require(!(v[i] == v[j]), entry(key, i) + " = " + text(v[i]) + " repeats " + entry(key, j) +
                                   ": give each value once");
}

}  // namespace

void SweepConfig::validate(const TrainConfig& train) const {
  const auto itext = [](int64_t v) { return std::to_string(v); };
  for (size_t i = 0; i < lr.size(); ++i)
    require(std::isfinite(lr[i]) && lr[i] > 0, entry("lr", i) + " = " + num(lr[i]) + " must be a finite number > 0 (as train.lr)");
  for (size_t i = 0; i < weight_decay.size(); ++i)
    require(weight_decay[i] >= 0, entry("weight_decay", i) + " = " + num(weight_decay[i]) + " must be >= 0 (as train.weight_decay)");
  for (size_t i = 0; i < clip.size(); ++i)
    require(std::isfinite(clip[i]), entry("clip", i) + " = " + num(clip[i]) +
                                        " must be finite (as train.clip; <= 0 disables clipping)");
  for (size_t i = 0; i < warmup.size(); ++i) {
    require(warmup[i] >= 0, entry("warmup", i) + " = " + itext(warmup[i]) + " must be >= 0 (as train.warmup)");
    require(warmup[i] < train.steps, entry("warmup", i) + " = " + itext(warmup[i]) + " must be less than train.steps = " +
                                         itext(train.steps) + " (the learning rate would never reach its peak)");
  }
  distinct("lr", lr, num);
  distinct("weight_decay", weight_decay, num);
  distinct("clip", clip, num);
  distinct("warmup", warmup, itext);
}

void RunConfig::validate() const {
  require(data.source == "synthetic" || data.source == "npy" || data.source == "csv",
          "data.source must be 'synthetic', 'npy' or 'csv', got '" + data.source + "'");
  if (data.source == "npy")
    require(!data.features.empty() && !data.targets.empty(), "data.source = 'npy' needs data.features and data.targets");
  if (data.source == "csv") {
    require(!data.csv.empty(), "data.source = 'csv' needs data.csv (the path of the long-format file)");
    require(!data.feature_columns.empty(), "data.source = 'csv' needs data.feature_columns (the feature column names)");
    require(!data.target_columns.empty(), "data.source = 'csv' needs data.target_columns (the target column names)");
    for (const std::string& t : data.target_columns)
      require(data.allow_target_features ||
                  std::find(data.feature_columns.begin(), data.feature_columns.end(), t) == data.feature_columns.end(),
              "data.target_columns: '" + t + "' is also in data.feature_columns, so the model would see the label it "
              "predicts; remove it from data.feature_columns (or set data.allow_target_features = true)");
  }
  csv_delimiter_from_string(data.delimiter, "data.delimiter");
  check_preprocessing(data);
  if (data.source == "synthetic") {
    require(data.synth.N >= 1, "data.instruments must be >= 1, got " + std::to_string(data.synth.N));
    require(data.synth.T >= 2, "data.timesteps must be >= 2, got " + std::to_string(data.synth.T));
    require(data.synth.F >= 1, "data.n_features must be >= 1, got " + std::to_string(data.synth.F));
    require(data.synth.K >= 1, "data.n_targets must be >= 1, got " + std::to_string(data.synth.K));
    require(std::isfinite(data.synth.noise) && data.synth.noise >= 0,
            "data.noise must be a finite number >= 0, got " + std::to_string(data.synth.noise));
    require(data.synth.memory >= 0, "data.memory must be >= 0 (0: the default synthetic panel; > 0: the long-memory "
                                    "variant's horizon in rows), got " + std::to_string(data.synth.memory));
    require(int64_t(data.synth.N) * data.synth.T * std::max(data.synth.F, data.synth.K) <= (int64_t(1) << 31),
            "data.instruments × data.timesteps × data.n_features = " +
                std::to_string(int64_t(data.synth.N) * data.synth.T * data.synth.F) +
                " values is beyond the 2^31 a synthetic panel may hold");
  }
  require(split.spec.gap >= 0, "split.gap must be >= 0, got " + std::to_string(split.spec.gap));
  require(split.walk_forward_folds >= 0, "split.walk_forward_folds must be >= 0, got " +
                                             std::to_string(split.walk_forward_folds));
  require(split.walk_forward_test_size >= 0 && split.walk_forward_valid_size >= 0 && split.walk_forward_train_size >= 0,
          "split.walk_forward_test_size, walk_forward_valid_size and walk_forward_train_size must be >= 0");
  require(split.walk_forward_folds > 0 || (split.walk_forward_test_size == 0 && split.walk_forward_valid_size == 0 &&
                                           split.walk_forward_train_size == 0),
          "split.walk_forward_test_size / valid_size / train_size need split.walk_forward_folds > 0");
  require(!run.parallel_folds || split.walk_forward_folds >= 2,
          "run.parallel_folds = true trains walk-forward folds together, but split.walk_forward_folds = " +
              std::to_string(split.walk_forward_folds) + " gives " +
              (split.walk_forward_folds == 1 ? "one fold" : "a single split") +
              ", so it would do nothing: set split.walk_forward_folds >= 2, or drop run.parallel_folds");
  compute().validate();  // run.device, train.precision, run.threads, run.cpu_kernels (mlalpha/compute.h)
  require(run.eval_every >= 0, "run.eval_every must be >= 0, got " + std::to_string(run.eval_every));
  require(run.patience >= 0, "run.patience must be >= 0, got " + std::to_string(run.patience));
  require(run.stop_after >= 0, "run.stop_after must be >= 0, got " + std::to_string(run.stop_after));
  require(run.save_every >= 0, "run.save_every must be >= 0 (0: save the last checkpoint only when the invocation ends), got " +
                                  std::to_string(run.save_every));
  require(!run.out_dir.empty(), "run.out_dir must not be empty");
  require(run.quantiles >= 2, "run.quantiles must be >= 2 (the long-short return is the top minus the bottom group), got " +
                                  std::to_string(run.quantiles));
  require(std::isfinite(run.periods_per_year) && run.periods_per_year >= 0,
          "run.periods_per_year must be a finite number >= 0 (0: from the time axis), got " +
              std::to_string(run.periods_per_year));
  {
    std::vector<std::string> names = metric_names();
    for (const std::string& q : quantile_names(run.quantiles)) names.push_back(q);
    std::string list;
    for (const auto& n : metric_names()) list += (list.empty() ? "" : ", ") + n;
    list += ", q1 .. q" + std::to_string(run.quantiles);
    require(std::find(names.begin(), names.end(), run.metric) != names.end(),
            "run.metric must be one of " + list + ", got '" + run.metric + "'");
  }
  model.validate();
  sweep.validate(train);
  // The train settings a sweep replaces are checked as its first member trains them (a warm-up too long for
  // train.steps is no error when every member's swept warm-up fits).
  TrainConfig first = train;
  if (!sweep.lr.empty()) first.lr = sweep.lr[0];
  if (!sweep.weight_decay.empty()) first.weight_decay = sweep.weight_decay[0];
  if (!sweep.clip.empty()) first.clip = sweep.clip[0];
  if (!sweep.warmup.empty()) first.warmup = sweep.warmup[0];
  first.validate();
}

}  // namespace mlalpha

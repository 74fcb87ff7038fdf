#pragma once
// The walk-forward summary (docs/data.md, "Walk-forward"): one record per fold with its time ranges, how
// its training went and its test metrics, written as folds.csv (one row per fold, for spreadsheets and
// pandas) and folds.json (the same plus per-target metrics and the mean over the folds). Folds are
// numbered from 0, fold 0 the earliest, everywhere: the records, the printed headings and the fold-k
// directories. Host-only (nlohmann-json in the .cpp).
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "data/split.h"
#include "mlalpha/metrics.h"

namespace mlalpha {

struct FoldReport {
  int fold = 0;                // 0-based; fold 0 is the earliest
  Split split;                 // the fold's ranges on the panel's time axis
  int64_t steps = 0;           // optimizer steps run (less than train.steps after an early stop)
  int64_t best_step = 0;       // the step of the best validation value (the checkpoint tested)
  double best_value = 0;       // the validation metric there (NaN: none)
  bool has_test = false;       // false: no test range, or no checkpoint to test
  MetricsResult test;          // test metrics of the best checkpoint (when has_test)
};

// "walk-forward fold 1 (folds 0 to 4, fold 0 the earliest): train [0, 700) valid [700, 800) test [800, 900)":
// the heading the command prints before each fold; its output directory is fold_dir_name(fold).
std::string fold_heading(const FoldReport& f, int folds);
std::string fold_dir_name(int fold);  // "fold-3"

// Each metric averaged over the folds that have a test result and a finite value of it (NaN when none);
// points and steps are summed. Quantile means are averaged element by element.
Metrics mean_test_metrics(const std::vector<FoldReport>& folds);
// The sample standard deviation (n − 1) over the same folds of each metric (NaN with fewer than 2);
// points and steps are summed as in mean_test_metrics.
Metrics std_test_metrics(const std::vector<FoldReport>& folds);

// The pooled out-of-sample predictions of a walk-forward run: each test time step predicted by the fold
// whose test block holds it, and their metrics (docs/data.md, "Walk-forward").
struct OosSummary {
  std::string file;       // the oos_pred.csv written
  MetricsResult metrics;  // of the pooled predictions
};

// The inverse of the metrics objects in folds.json / metrics.jsonl (missing or null values are NaN).
Metrics metrics_from_json_text(const std::string& json_object);

// Written atomically. `times` are the panel's time labels (empty: none; then the *_time columns are
// empty); `metric` is the validation metric that picked best_step. Non-finite values are empty cells
// (CSV) or null (JSON). Columns of folds.csv:
//   fold, train_begin, train_end, valid_begin, valid_end, test_begin, test_end   (half-open indices)
//   train_first_time, train_last_time, valid_first_time, valid_last_time, test_first_time, test_last_time
//   steps, best_step, metric, best_value, test_<name> for each of metric_names(), test_points
void write_folds_csv(const std::filesystem::path& path, const std::vector<FoldReport>& folds,
                     const std::vector<std::string>& times, const std::string& metric);
// {"metric": "ic", "folds": [{"fold": 0, "train": {"begin", "end", "first_time", "last_time"}, "valid": {...},
//   "test": {...} | null, "steps", "best_step", "best_value", "test_metrics": {mse, ic, rank_ic, icir, dir_acc,
//   points, steps} | null, "test_targets": [per-target metrics] (K > 1 only)}, ...],
//  "mean_test_metrics": {...}, "std_test_metrics": {...}, "folds_with_test": n, "oos_pred", "oos_metrics"}
// With `oos` also "std_test_metrics", "oos_pred" (the file name) and "oos_metrics" (+ "oos_targets", K > 1).
void write_folds_json(const std::filesystem::path& path, const std::vector<FoldReport>& folds,
                      const std::vector<std::string>& times, const std::string& metric, const OosSummary* oos = nullptr);

}  // namespace mlalpha

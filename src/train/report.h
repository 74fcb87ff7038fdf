#pragma once
// Run reporting: the JSONL metrics file and the SVG plot of the training and validation curves a run
// writes (the progress display is in include/mlalpha/progress.h). Host-only (never include from .cu).
#include <cstdint>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <functional>
#include <ostream>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "mlalpha/progress.h"  // ProgressReporter (the run's display lives in the public API)
#include "mlalpha/run.h"  // TrainPoint
#include "train/metrics.h"

namespace mlalpha {

// ---------------------------------------------------------------------------------------------------
// JSONL metrics file: one JSON object per line, flushed per line so a crash loses nothing already
// written. NaN and ±Inf are written as null (JSON has no NaN). float-born values are written with the
// shortest decimal that round-trips the float (0.1, not 0.10000000149011612).
//   {"step":100,"loss":0.0123,"lr":0.001,"grad_norm":0.51}
//   {"step":1000,"split":"valid","mse":0.98,"ic":0.045,"rank_ic":0.041,"icir":0.61,"dir_acc":0.52,
//    "ls_mean":0.002,"ls_std":0.01,"ls_sharpe":3.1,"turnover":0.4,"mse_zero":1.01,"mse_mean":1.0,
//    "quantile_means":[-0.001,...],"points":51200,"steps":200,"portfolio_steps":200}
class JsonlWriter {
 public:
  using Value = std::variant<int64_t, double, std::string, std::nullptr_t>;
  using Field = std::pair<std::string, Value>;
  enum class Mode { truncate, append };  // append when resuming a run

  JsonlWriter(const std::filesystem::path& path, Mode mode = Mode::truncate);
  ~JsonlWriter();
  JsonlWriter(const JsonlWriter&) = delete;
  JsonlWriter& operator=(const JsonlWriter&) = delete;

  void train(const TrainPoint& p);  // "skipped":true is added only for a skipped step
  // The mean metrics; with more than one target also "targets": [{per-target metrics}, ...].
  void metrics(int64_t step, std::string_view split, const MetricsResult& r);
  void record(const std::vector<Field>& fields);  // any flat record, fields in the given order
  const std::filesystem::path& path() const { return path_; }

 private:
  void write_line(const std::string& line);
  std::filesystem::path path_;
  std::FILE* f_ = nullptr;
};

// ---------------------------------------------------------------------------------------------------
// The curves plot: a self-contained SVG, two stacked panels sharing the step axis: training loss on top
// (log scale when its positive values span more than 2 decades; raw points light, a moving mean dark)
// with the validation loss drawn over it, and the validation metric below (best point marked). Written
// atomically (temporary file + rename).
struct CurvePoint {
  double step = 0, value = 0;
};
struct CurvesPlot {
  std::vector<CurvePoint> train;  // (step, loss); non-finite values leave a gap
  std::vector<CurvePoint> valid;  // (step, metric value)
  std::vector<CurvePoint> valid_loss;  // (step, validation loss), drawn in the loss panel; may be empty
  std::string valid_loss_label = "validation loss";
  std::string metric = "ic";      // a name from metric_names(), labels the lower panel and picks "best"
  std::string title = "ml-alpha training run";
  int width = 960, height = 640;
};
void write_curves_svg(const std::filesystem::path& path, const CurvesPlot& plot);

// The cumulative long-short plot (long_short.svg): one panel, x the time index, one line per target of the
// running sum of the long-short return over the time steps that formed portfolios (docs/metrics.md).
struct LongShortPlot {
  struct Line {
    std::string label;
    std::vector<CurvePoint> points;  // (time index, cumulative long-short)
  };
  std::vector<Line> lines;
  std::string title = "cumulative long-short return";
  int width = 960, height = 420;
};
void write_long_short_svg(const std::filesystem::path& path, const LongShortPlot& plot);

}  // namespace mlalpha

#pragma once
// Run reporting (issue 5, item 4): the progress display while training, the JSONL metrics file and the
// SVG plot of the training and validation curves written at the end. Host-only (never include from .cu).
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

#include "mlalpha/run.h"  // TrainPoint
#include "train/metrics.h"

namespace mlalpha {


// ---------------------------------------------------------------------------------------------------
// Progress: on a terminal one line redrawn in place (\r + ANSI clear-line):
//   [#######.............] 3500/10000  loss 1.234e-02  ic 0.0456  812.3 it/s  ETA 0:08
// otherwise a plain line every log_every steps (and at the last step):
//   step 3500/10000  loss 1.234e-02  grad_norm 0.512  lr 9.80e-04  812.3 steps/s  ETA 0:08
// Validation results and messages (early stopping, checkpoints) get lines of their own in both modes.
struct ProgressOptions {
  int64_t total_steps = 0;   // the step the run ends at (for the bar and the ETA)
  int64_t log_every = 100;   // plain mode: a line every N steps
  int loss_window = 100;     // the loss shown is the mean over the last N non-skipped steps
  std::string metric = "ic"; // the validation metric shown in the bar
  int bar_width = 20;
  int columns = 0;           // terminal mode: cut the line to this width (0: no limit); see terminal_columns()
  double min_redraw_s = 0.1; // terminal mode: redraw at most this often (the last step always draws)
};

class ProgressReporter {
 public:
  using Clock = std::function<double()>;  // monotonic seconds from any origin
  static double steady_seconds();
  static bool stdout_is_terminal();
  static int terminal_columns();  // of stdout; 0 when unknown

  // The clock starts now: steps/s and the ETA measure this run only (a resumed run starts mid-way).
  ProgressReporter(const ProgressOptions& opt, std::ostream& out, bool terminal, Clock clock = steady_seconds);
  ~ProgressReporter();  // ends an open bar line
  ProgressReporter(const ProgressReporter&) = delete;
  ProgressReporter& operator=(const ProgressReporter&) = delete;

  void step(const TrainPoint& p);
  // A validation line with every metric; `best` marks a new best on opt.metric.
  void validation(int64_t step, const Metrics& m, bool best, std::string_view split = "valid");
  void message(std::string_view line);
  void finish();  // draws the final state and ends the bar line

  double loss_mean() const;  // the moving mean shown (NaN before any non-skipped step)
  double steps_per_second() const;

 private:
  std::string bar_line() const;
  std::string log_line(const TrainPoint& p) const;
  void draw_bar();
  void clear_bar();

  ProgressOptions opt_;
  std::ostream& out_;
  bool terminal_;
  Clock clock_;
  double t_start_, t_last_draw_ = -1e300;
  int64_t first_step_ = -1, last_step_ = 0, skipped_ = 0;
  TrainPoint last_{};
  std::deque<double> window_;
  double window_sum_ = 0;
  double last_metric_;  // latest validation value of opt.metric
  bool bar_open_ = false;
};

// ---------------------------------------------------------------------------------------------------
// JSONL metrics file: one JSON object per line, flushed per line so a crash loses nothing already
// written. NaN and ±Inf are written as null (JSON has no NaN). float-born values are written with the
// shortest decimal that round-trips the float (0.1, not 0.10000000149011612).
//   {"step":100,"loss":0.0123,"lr":0.001,"grad_norm":0.51}
//   {"step":1000,"split":"valid","mse":0.98,"ic":0.045,"rank_ic":0.041,"icir":0.61,"dir_acc":0.52,
//    "points":51200,"steps":200}
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
// and the validation metric below (best point marked). Written atomically (temporary file + rename).
struct CurvePoint {
  double step = 0, value = 0;
};
struct CurvesPlot {
  std::vector<CurvePoint> train;  // (step, loss); non-finite values leave a gap
  std::vector<CurvePoint> valid;  // (step, metric value)
  std::string metric = "ic";      // a name from metric_names(), labels the lower panel and picks "best"
  std::string title = "ml-alpha training run";
  int width = 960, height = 640;
};
void write_curves_svg(const std::filesystem::path& path, const CurvesPlot& plot);

}  // namespace mlalpha

#pragma once
// The progress display of a run, for programs that show one (the command does; the events of
// include/mlalpha/run.h feed it). Host-only.
#include <cstdint>
#include <deque>
#include <functional>
#include <ostream>
#include <string>
#include <string_view>

#include "mlalpha/metrics.h"
#include "mlalpha/records.h"

namespace mlalpha {

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

}  // namespace mlalpha

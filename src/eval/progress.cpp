// The progress display (include/mlalpha/progress.h).
#include "mlalpha/progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "core/error.h"

namespace mlalpha {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// "0:42", "12:05", "1:02:03"; "?" when unknown.
std::string fmt_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  const long long t = std::llround(s);
  char buf[48];
  if (t >= 3600)
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", t / 3600, t / 60 % 60, t % 60);
  else
    std::snprintf(buf, sizeof buf, "%lld:%02lld", t / 60, t % 60);
  return buf;
}

// Metrics shown to people: correlations and accuracy with 4 decimals, MSE with 5 significant digits.
std::string fmt_metric(std::string_view name, double v) {
  const MetricInfo* info = find_metric(name);
  return fmt(info && info->scale_free ? "%.4f" : "%.5g", v);
}

}  // namespace

double ProgressReporter::steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

bool ProgressReporter::stdout_is_terminal() { return ::isatty(STDOUT_FILENO) == 1; }

int ProgressReporter::terminal_columns() {
  winsize ws{};
  if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  return 0;
}

ProgressReporter::ProgressReporter(const ProgressOptions& opt, std::ostream& out, bool terminal, Clock clock)
    : opt_(opt), out_(out), terminal_(terminal), clock_(std::move(clock)), last_metric_(kNaN) {
  require(opt_.total_steps >= 0, "progress: total_steps = " + std::to_string(opt_.total_steps) + ", expected >= 0");
  require(opt_.log_every >= 1, "progress: log_every = " + std::to_string(opt_.log_every) + ", expected >= 1");
  require(opt_.loss_window >= 1, "progress: loss_window = " + std::to_string(opt_.loss_window) + ", expected >= 1");
  higher_is_better(opt_.metric);  // an unknown metric name fails here, not at the first validation
  t_start_ = clock_();
}

ProgressReporter::~ProgressReporter() {
  if (bar_open_) out_ << '\n' << std::flush;
}

double ProgressReporter::loss_mean() const { return window_.empty() ? kNaN : window_sum_ / double(window_.size()); }

double ProgressReporter::steps_per_second() const {
  const double dt = clock_() - t_start_;
  const int64_t done = first_step_ < 0 ? 0 : last_step_ - first_step_;
  return dt > 0 ? double(done) / dt : kNaN;
}

void ProgressReporter::step(const TrainPoint& p) {
  if (first_step_ < 0) first_step_ = p.step - 1;  // steps before this run (resume) are not timed
  last_step_ = p.step;
  last_ = p;
  if (p.skipped) {
    ++skipped_;
  } else {
    window_.push_back(p.loss);
    window_sum_ += p.loss;
    if (int(window_.size()) > opt_.loss_window) {
      window_sum_ -= window_.front();
      window_.pop_front();
    }
    // A running sum drifts, and one Inf/NaN would stick forever: re-sum when a window is complete.
    if (window_.size() == size_t(opt_.loss_window) && p.step % opt_.loss_window == 0) {
      window_sum_ = 0;
      for (double v : window_) window_sum_ += v;
    }
  }
  const bool last = p.step == opt_.total_steps;
  const bool log_point = p.step % opt_.log_every == 0 || last;
  if (terminal_) {
    // Also at log points: a trainer that reads its records in bursts (GPU ring) ends each burst there.
    if (log_point || clock_() - t_last_draw_ >= opt_.min_redraw_s) draw_bar();
  } else if (log_point) {
    out_ << log_line(p) << '\n' << std::flush;
  }
}

void ProgressReporter::validation(int64_t step, const Metrics& m, bool best, std::string_view split) {
  last_metric_ = metric_by_name(m, opt_.metric);
  std::string line = std::string(split) + " step " + std::to_string(step);
  for (const auto& name : metric_names()) line += "  " + name + " " + fmt_metric(name, metric_by_name(m, name));
  line += "  (" + std::to_string(m.points) + " points, " + std::to_string(m.steps) + " steps)";
  if (best) line += "  best " + opt_.metric;
  message(line);
}

void ProgressReporter::message(std::string_view line) {
  clear_bar();
  out_ << line << '\n' << std::flush;
  if (terminal_ && last_step_ > 0) draw_bar();
}

void ProgressReporter::finish() {
  if (terminal_) {
    if (last_step_ > 0) draw_bar();
    if (bar_open_) out_ << '\n' << std::flush;
    bar_open_ = false;
  } else if (last_step_ > 0 && last_step_ % opt_.log_every != 0 && last_step_ != opt_.total_steps) {
    out_ << log_line(last_) << '\n' << std::flush;  // a run stopped early still reports where it ended
  }
}

std::string ProgressReporter::log_line(const TrainPoint& p) const {
  const double rate = steps_per_second();
  std::string s = "step " + std::to_string(p.step);
  if (opt_.total_steps > 0) s.append("/").append(std::to_string(opt_.total_steps));
  s += "  loss " + fmt("%.5g", loss_mean()) + "  grad_norm " + fmt("%.4g", p.grad_norm) + "  lr " +
       fmt("%.2e", p.lr) + "  " + fmt("%.1f", rate) + " steps/s";
  if (opt_.total_steps > 0) s += "  ETA " + fmt_duration(double(opt_.total_steps - p.step) / rate);
  if (skipped_ > 0) s += "  (" + std::to_string(skipped_) + " skipped)";
  return s;
}

std::string ProgressReporter::bar_line() const {
  std::string s;
  if (opt_.total_steps > 0) {
    const double frac = std::clamp(double(last_step_) / double(opt_.total_steps), 0.0, 1.0);
    const int fill = int(frac * opt_.bar_width);
    // Built with append: GCC 12 reports a false -Wrestrict on "literal" + std::string&&.
    s.append("[").append(size_t(fill), '#').append(size_t(opt_.bar_width - fill), '.').append("] ");
    s.append(std::to_string(last_step_)).append("/").append(std::to_string(opt_.total_steps));
  } else {
    s = "step " + std::to_string(last_step_);
  }
  const double rate = steps_per_second();
  s += "  loss " + fmt("%.4e", loss_mean());
  if (!std::isnan(last_metric_)) s += "  " + opt_.metric + " " + fmt_metric(opt_.metric, last_metric_);
  s += "  " + fmt("%.1f", rate) + " it/s";
  if (opt_.total_steps > 0) s += "  ETA " + fmt_duration(double(opt_.total_steps - last_step_) / rate);
  if (skipped_ > 0) s += "  " + std::to_string(skipped_) + " skipped";
  if (opt_.columns > 1 && int(s.size()) >= opt_.columns) s.resize(size_t(opt_.columns - 1));  // no wrap
  return s;
}

void ProgressReporter::draw_bar() {
  // \r to column 0, ESC[2K clears the whole line, then the new state; no newline, so it stays in place.
  out_ << "\r\033[2K" << bar_line() << std::flush;
  bar_open_ = true;
  t_last_draw_ = clock_();
}

void ProgressReporter::clear_bar() {
  if (!bar_open_) return;
  out_ << "\r\033[2K";
  bar_open_ = false;
}

}  // namespace mlalpha

// Run reporting: the plain log lines and the terminal progress bar (with an injected clock), the JSONL
// file (parsed back, NaN → null, flushed per line) and the SVG curves plot (well-formed, both series,
// atomic write).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "tests/test_files.h"
#include "tests/test_util.h"
#include "eval/folds.h"
#include "eval/jsonl.h"
#include "eval/plots.h"
#include "mlalpha/eval.h"
#include "mlalpha/metrics.h"
#include "mlalpha/panel.h"
#include "mlalpha/progress.h"

namespace mlalpha {
namespace {

namespace fs = std::filesystem;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

using test::read_bytes;
using test::TempDir;

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

size_t count(const std::string& s, const std::string& needle) {
  size_t n = 0;
  for (size_t p = s.find(needle); p != std::string::npos; p = s.find(needle, p + 1)) ++n;
  return n;
}

Metrics sample_metrics() {
  Metrics m;
  m.mse = 0.98765, m.ic = 0.0456, m.rank_ic = 0.0412, m.icir = 0.61, m.dir_acc = 0.5213;
  m.ls_mean = 0.0021, m.ls_std = 0.0105, m.ls_sharpe = 3.1746, m.turnover = 0.4125, m.mse_zero = 1.0123,
  m.mse_mean = 1.0009;
  m.points = 51200, m.steps = 200;
  return m;
}

TEST(Progress, PlainModeLogsEveryNStepsWithMeanLossRateAndEta) {
  double now = 100.0;
  std::ostringstream out;
  ProgressOptions opt;
  opt.total_steps = 10, opt.log_every = 5, opt.loss_window = 5;
  {
    ProgressReporter rep(opt, out, /*terminal=*/false, [&] { return now; });
    for (int s = 1; s <= 10; ++s) {
      now += 0.5;  // 2 steps/s
      rep.step({s, double(s), 1e-3, 0.25, false});
      if (s == 5) rep.validation(5, sample_metrics(), true);
    }
    rep.message("early stopping: no improvement");
    rep.finish();
  }
  const auto lines = lines_of(out.str());
  ASSERT_EQ(lines.size(), 4u) << out.str();
  // Mean of losses 1..5 = 3; 5 steps left at 2 steps/s.
  EXPECT_EQ(lines[0], "step 5/10  loss 3  grad_norm 0.25  lr 1.00e-03  2.0 steps/s  ETA 0:03");
  EXPECT_EQ(lines[1],
            "valid step 5  mse 0.98765  ic 0.0456  rank_ic 0.0412  icir 0.6100  dir_acc 0.5213  ls_mean 0.0021  "
            "ls_std 0.0105  ls_sharpe 3.1746  turnover 0.4125  mse_zero 1.0123  mse_mean 1.0009  ts_mean 0  "
            "ts_std 0  ts_sharpe 0.0000  ts_hit 0.0000  ts_max_dd 0  (51200 points, 200 steps)  best ic");
  EXPECT_EQ(lines[2], "step 10/10  loss 8  grad_norm 0.25  lr 1.00e-03  2.0 steps/s  ETA 0:00");
  EXPECT_EQ(lines[3], "early stopping: no improvement");
  EXPECT_EQ(out.str().find('\r'), std::string::npos);
  EXPECT_EQ(out.str().find('\033'), std::string::npos);
}

TEST(Progress, PlainModeFinishReportsAnEarlyStopAndSkippedSteps) {
  double now = 0;
  std::ostringstream out;
  ProgressOptions opt;
  opt.total_steps = 100, opt.log_every = 10, opt.loss_window = 3;
  ProgressReporter rep(opt, out, false, [&] { return now; });
  for (int s = 1; s <= 7; ++s) {
    now += 0.1;
    rep.step({s, s == 6 ? kNaN : 2.0 * s, 1e-3, 1.0, s == 6});
  }
  EXPECT_EQ(out.str(), "");            // no log point reached
  EXPECT_DOUBLE_EQ(rep.loss_mean(), (8.0 + 10.0 + 14.0) / 3);  // step 6 is skipped, window 3
  rep.finish();
  const auto lines = lines_of(out.str());
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].rfind("step 7/100  loss 10.667", 0), 0u) << lines[0];
  EXPECT_NE(lines[0].find("(1 skipped)"), std::string::npos) << lines[0];
}

TEST(Progress, TerminalModeRedrawsOneLineInPlace) {
  double now = 0;
  std::ostringstream out;
  ProgressOptions opt;
  opt.total_steps = 100, opt.log_every = 1000, opt.loss_window = 10, opt.min_redraw_s = 0.2;
  {
    ProgressReporter rep(opt, out, /*terminal=*/true, [&] { return now; });
    for (int s = 1; s <= 50; ++s) {
      now = s * 0.02;  // 50 it/s: a redraw about every 10 steps
      rep.step({s, 0.5, 1e-3, 1.0, false});
    }
    rep.validation(50, sample_metrics(), false);
    rep.finish();
  }
  const std::string s = out.str();
  const size_t draws = count(s, "\r\033[2K");
  EXPECT_GE(draws, 6u) << s;   // step 1, about every 10th step, around the validation line, finish
  EXPECT_LE(draws, 10u) << s;
  // The last state: half-way bar, the fields, the metric from the validation, and a final newline.
  const std::string last = s.substr(s.rfind("\r\033[2K") + 5);
  EXPECT_EQ(last, "[##########..........] 50/100  loss 5.0000e-01  ic 0.0456  50.0 it/s  ETA 0:01\n");
  // The validation result is a line of its own: the bar was cleared before it, redrawn after it.
  EXPECT_NE(s.find("\r\033[2Kvalid step 50  mse 0.98765"), std::string::npos);
  EXPECT_EQ(count(s, "\n"), 2u);  // the validation line and the end of the bar
}

TEST(Progress, TerminalModeCutsToColumnsAndTimesOnlyThisRun) {
  double now = 0;
  std::ostringstream out;
  ProgressOptions opt;
  opt.total_steps = 100, opt.columns = 30;
  ProgressReporter rep(opt, out, true, [&] { return now; });
  now = 4;                                  // a resumed run: 60 steps were done before
  rep.step({61, 1.0, 1e-3, 1.0, false});
  now = 5;
  rep.step({62, 1.0, 1e-3, 1.0, false});
  EXPECT_DOUBLE_EQ(rep.steps_per_second(), 2.0 / 5.0);  // 2 steps of this run over 5 s
  const std::string s = out.str();
  EXPECT_EQ(s.substr(s.rfind("\r\033[2K") + 5).size(), 29u);  // never wraps
}

TEST(Progress, RejectsBadOptions) {
  std::ostringstream out;
  ProgressOptions opt;
  opt.metric = "sharpe";
  EXPECT_THROW(ProgressReporter(opt, out, false), Error);
  opt.metric = "mse";
  opt.log_every = 0;
  EXPECT_THROW(ProgressReporter(opt, out, false), Error);
}

std::vector<nlohmann::json> read_jsonl(const fs::path& p) {
  std::ifstream f(p);
  std::vector<nlohmann::json> out;
  for (std::string l; std::getline(f, l);) out.push_back(nlohmann::json::parse(l));
  return out;
}

TEST(Jsonl, RecordsParseBackNonFiniteIsNullAndLinesAreFlushed) {
  TempDir dir;
  const fs::path path = dir.path / "metrics.jsonl";
  {
    JsonlWriter w(path);
    w.train({1, 0.5, double(1e-3f), double(0.1f), false});
    w.train({2, kNaN, 1e-3, std::numeric_limits<double>::infinity(), true});
    MetricsResult r;
    Metrics a = sample_metrics(), b = sample_metrics();
    b.icir = kNaN;
    r.per_target = {a, b};
    r.mean = a;
    w.metrics(100, "valid", r);
    w.record({{"step", int64_t(100)}, {"event", std::string("early_stop")}, {"best", 0.25}, {"x", nullptr}});
    // Still open: every line is already in the file.
    const auto recs = read_jsonl(path);
    ASSERT_EQ(recs.size(), 4u);
    EXPECT_EQ(recs[0]["step"], 1);
    EXPECT_EQ(recs[0]["loss"], 0.5);
    EXPECT_EQ(recs[0]["lr"], 0.001);       // float 1e-3 written as its shortest decimal
    EXPECT_EQ(recs[0]["grad_norm"], 0.1);
    EXPECT_FALSE(recs[0].contains("skipped"));
    EXPECT_TRUE(recs[1]["loss"].is_null());
    EXPECT_TRUE(recs[1]["grad_norm"].is_null());
    EXPECT_EQ(recs[1]["skipped"], true);
    EXPECT_EQ(recs[2]["split"], "valid");
    EXPECT_EQ(recs[2]["step"], 100);
    EXPECT_DOUBLE_EQ(recs[2]["ic"].get<double>(), 0.0456);
    EXPECT_DOUBLE_EQ(recs[2]["mse"].get<double>(), 0.98765);
    EXPECT_EQ(recs[2]["points"], 51200);
    ASSERT_EQ(recs[2]["targets"].size(), 2u);
    EXPECT_TRUE(recs[2]["targets"][1]["icir"].is_null());
    EXPECT_EQ(recs[3]["event"], "early_stop");
    EXPECT_EQ(recs[3]["best"], 0.25);
    EXPECT_TRUE(recs[3]["x"].is_null());
  }
  std::ifstream f(path);
  std::string first;
  std::getline(f, first);
  EXPECT_EQ(first, R"({"step":1,"loss":0.5,"lr":0.001,"grad_norm":0.1})");
  // Append mode (a resumed run) keeps what is there.
  {
    JsonlWriter w(path, JsonlWriter::Mode::append);
    w.train({3, 0.25, 1e-3, 1, false});
  }
  EXPECT_EQ(read_jsonl(path).size(), 5u);
  {
    JsonlWriter w(path);  // truncate: a fresh run
    w.train({1, 0.25, 1e-3, 1, false});
  }
  EXPECT_EQ(read_jsonl(path).size(), 1u);
}

TEST(Jsonl, UnwritablePathIsAnErrorNamingIt) {
  TempDir dir;
  const fs::path path = dir.path / "no_such_dir" / "m.jsonl";
  try {
    JsonlWriter w(path);
    ADD_FAILURE() << "opened " << path;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos) << e.what();
  }
}

// Tags balance (open/close pairs by name, self-closing ones alone) and attribute quotes are closed.
::testing::AssertionResult well_formed(const std::string& s) {
  std::vector<std::string> stack;
  size_t pos = 0;
  while ((pos = s.find('<', pos)) != std::string::npos) {
    const size_t end = s.find('>', pos);
    if (end == std::string::npos) return ::testing::AssertionFailure() << "unclosed tag at " << pos;
    const std::string tag = s.substr(pos + 1, end - pos - 1);
    if (count(tag, "'") % 2 || count(tag, "\"") % 2) return ::testing::AssertionFailure() << "quotes in <" << tag;
    const std::string name = tag.substr(tag[0] == '/', tag.find_first_of(" />", 1) - (tag[0] == '/'));
    if (tag[0] == '/') {
      if (stack.empty() || stack.back() != name)
        return ::testing::AssertionFailure() << "</" << name << "> closes " << (stack.empty() ? "nothing" : stack.back());
      stack.pop_back();
    } else if (tag.back() != '/') {
      stack.push_back(name);
    }
    pos = end + 1;
  }
  if (!stack.empty()) return ::testing::AssertionFailure() << "<" << stack.back() << "> never closed";
  return ::testing::AssertionSuccess();
}

CurvesPlot sample_plot(int n_train, double decades) {
  CurvesPlot plot;
  plot.metric = "ic";
  plot.title = "run <a & b>";
  auto rng = test::make_rng(7);
  std::uniform_real_distribution<double> noise(0.8, 1.25);
  for (int s = 1; s <= n_train; ++s)
    plot.train.push_back({double(s), std::pow(10.0, -decades * (s - 1) / std::max(1, n_train - 1)) * noise(rng)});
  for (int s = n_train / 10; s <= n_train; s += std::max(1, n_train / 10))
    plot.valid.push_back({double(s), 0.05 * std::tanh(s / double(n_train) * 3) - 0.01});
  return plot;
}

TEST(CurvesSvg, WellFormedWithBothSeriesAndNoTempFileLeft) {
  TempDir dir;
  const fs::path path = dir.path / "curves.svg";
  CurvesPlot plot = sample_plot(1000, 3.0);
  plot.train[500].value = kNaN;  // a gap, not a broken file
  write_curves_svg(path, plot);
  EXPECT_EQ(dir.listing(), std::vector<std::string>{"curves.svg"});
  const std::string svg = read_bytes(path);
  EXPECT_EQ(svg.rfind("<svg xmlns='http://www.w3.org/2000/svg'", 0), 0u);
  EXPECT_EQ(svg.substr(svg.size() - 7), "</svg>\n");
  EXPECT_TRUE(well_formed(svg));
  EXPECT_EQ(count(svg, "<path d='"), 3u);  // raw loss, moving mean, validation
  EXPECT_NE(svg.find("stroke='#1f77b4'"), std::string::npos);
  EXPECT_NE(svg.find("stroke='#d62728'"), std::string::npos);
  EXPECT_NE(svg.find("training loss (log scale)"), std::string::npos);  // 3 decades
  EXPECT_NE(svg.find("validation ic"), std::string::npos);
  EXPECT_NE(svg.find("best 0.03"), std::string::npos);  // the last validation point is the highest
  EXPECT_NE(svg.find("run &lt;a &amp; b&gt;"), std::string::npos);
  EXPECT_EQ(svg.find("NaN"), std::string::npos);
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_EQ(svg.find("inf"), std::string::npos);
}

TEST(CurvesSvg, LinearScaleForANarrowRangeAndDecimationOfLongRuns) {
  TempDir dir;
  const fs::path path = dir.path / "c.svg";
  write_curves_svg(path, sample_plot(50, 1.0));
  EXPECT_EQ(read_bytes(path).find("log scale"), std::string::npos);
  // 200k training points: points sharing a pixel column collapse, so the file stays small.
  write_curves_svg(path, sample_plot(200000, 4.0));
  const std::string svg = read_bytes(path);
  EXPECT_TRUE(well_formed(svg));
  EXPECT_LT(svg.size(), 200000u);
  // Empty series still make a readable file.
  CurvesPlot empty;
  empty.metric = "mse";
  write_curves_svg(path, empty);
  EXPECT_EQ(count(read_bytes(path), "no data"), 2u);
  EXPECT_EQ(dir.listing(), std::vector<std::string>{"c.svg"});
}

TEST(CurvesSvg, ValidationLossSharesTheLossPanel) {
  TempDir dir;
  const fs::path path = dir.path / "curves.svg";
  CurvesPlot plot = sample_plot(20, 1.0);
  plot.valid_loss = {{5, 0.9}, {10, 0.8}, {15, 0.85}};
  plot.valid_loss_label = "validation mse";
  write_curves_svg(path, plot);
  const std::string svg = read_bytes(path);
  EXPECT_TRUE(well_formed(svg));
  EXPECT_EQ(count(svg, "<path d='"), 3u);  // loss, validation loss, validation metric
  EXPECT_NE(svg.find("stroke='#ff7f0e'"), std::string::npos);
  EXPECT_NE(svg.find("validation mse"), std::string::npos);
}

TEST(LongShortSvg, OneLinePerTargetAndEmptyIsReadable) {
  TempDir dir;
  const fs::path path = dir.path / "long_short.svg";
  LongShortPlot plot;
  plot.title = "cumulative long-short, test [10, 14)";
  plot.lines = {{"ret_1d", {{10, 0.5}, {11, 0.25}, {13, 1.0}}}, {"ret_5d", {{10, -0.5}, {12, 0.0}}}};
  write_long_short_svg(path, plot);
  std::string svg = read_bytes(path);
  EXPECT_TRUE(well_formed(svg));
  EXPECT_EQ(count(svg, "<path d='"), 2u);
  EXPECT_NE(svg.find("ret_1d"), std::string::npos);
  EXPECT_NE(svg.find("ret_5d"), std::string::npos);
  EXPECT_NE(svg.find(">time step</text>"), std::string::npos);  // no labels: the axis counts steps
  EXPECT_EQ(dir.listing(), std::vector<std::string>{"long_short.svg"});
  write_long_short_svg(path, LongShortPlot{});
  EXPECT_EQ(count(read_bytes(path), "no data"), 1u);
}

// One series forms no portfolios: its long_short.svg draws the sign strategy's cumulative return over the scored
// dates (metrics' own per-date series), and the x axis spans the scored range even where nothing is drawn.
TEST(LongShortSvg, OneSeriesPlotsTheSignStrategy) {
  TempDir dir;
  const fs::path path = dir.path / "long_short.svg";
  Panel panel;
  panel.N = 1, panel.T = 60, panel.K = 1;
  panel.target_names = {"ret"};
  panel.times_are_dates = true;
  for (int t = 0; t < panel.T; ++t) {  // business days from Monday 2021-01-04
    panel.time_values.push_back((18631.0 + t / 5 * 7 + t % 5) * 86400.0);
    panel.times.push_back("d" + std::to_string(t));
  }
  std::vector<float> pred(60), y(60);
  for (int t = 0; t < 60; ++t) pred[t] = t % 3 == 0 ? -1.f : 0.5f, y[t] = 0.01f * float(t % 7) - 0.02f;
  y[30] = std::numeric_limits<float>::quiet_NaN();
  MetricsInput in{pred, y, 1, 60, 1, 10, -1, 3};
  const MetricsResult r = compute_metrics(in);
  const PortfolioSeries& ps = r.portfolios[0];
  ASSERT_EQ(ps.strategy.size(), 50u);
  double cum = 0;
  for (int t = 10; t < 60; ++t) {
    if (t == 30) {
      EXPECT_TRUE(std::isnan(ps.strategy[20]));
      continue;
    }
    EXPECT_DOUBLE_EQ(ps.strategy[size_t(t - 10)], pred[t] > 0 ? double(y[t]) : -double(y[t])) << t;
    cum += ps.strategy[size_t(t - 10)];
  }
  EXPECT_NEAR(cum / 49, r.mean.ts_mean, 1e-15);  // the series behind ts_mean
  EXPECT_EQ(std::count(ps.formed.begin(), ps.formed.end(), 1), 0);

  write_long_short_plot(path.string(), r, panel, "test");
  std::string svg = read_bytes(path);
  EXPECT_TRUE(well_formed(svg));
  EXPECT_EQ(count(svg, "no data"), 0u) << svg;
  EXPECT_EQ(count(svg, "<path d='"), 1u);
  EXPECT_NE(svg.find("cumulative sign-strategy return: test"), std::string::npos);
  EXPECT_NE(svg.find("one series, no prediction groups"), std::string::npos);
  EXPECT_NE(svg.find(">2021-03</text>"), std::string::npos) << svg;  // the scored range runs into March

  // No prediction at all: nothing to draw, but the axis still spans the scored dates.
  std::fill(pred.begin(), pred.end(), std::numeric_limits<float>::quiet_NaN());
  write_long_short_plot(path.string(), compute_metrics(in), panel, "test");
  svg = read_bytes(path);
  EXPECT_EQ(count(svg, "no data"), 1u);
  EXPECT_NE(svg.find(">2021-03</text>"), std::string::npos) << svg;
}

// Every horizontal <text> of an SVG of `width` fits it, its width estimated at 0.6 em per character (above the
// average glyph of the sans-serif fonts that draw it): a title that runs off the picture fails.
::testing::AssertionResult texts_fit(const std::string& svg, double width) {
  size_t pos = 0, n = 0;
  while ((pos = svg.find("<text x='", pos)) != std::string::npos) {
    const bool rotated = pos >= 13 && svg.compare(pos - 13, 13, "rotate(-90)'>") == 0;
    const size_t end = svg.find("</text>", pos);
    const std::string tag = svg.substr(pos, svg.find('>', pos) - pos);
    std::string text = svg.substr(svg.find('>', pos) + 1, end - svg.find('>', pos) - 1);
    pos = end;
    if (rotated) continue;  // an axis label: fitted to its panel's height
    const double x = std::stod(tag.substr(9));
    double size = 12;
    if (const size_t f = tag.find("font-size='"); f != std::string::npos) size = std::stod(tag.substr(f + 11));
    size_t glyphs = 0;
    for (const char c : text) glyphs += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    const double w = 0.6 * size * double(glyphs);
    const double left = tag.find("text-anchor='middle'") != std::string::npos ? x - w / 2
                        : tag.find("text-anchor='end'") != std::string::npos  ? x - w
                                                                               : x;
    ++n;
    if (left < 0 || left + w > width)
      return ::testing::AssertionFailure() << "'" << text << "' spans [" << left << ", " << left + w << "] of " << width;
  }
  return n > 0 ? ::testing::AssertionSuccess() : ::testing::AssertionFailure() << "no text";
}

TEST(LongShortSvg, DatesOnTheAxisUnitsMarkersAndTitlesThatFit) {
  TempDir dir;
  const fs::path path = dir.path / "long_short.svg";
  LongShortPlot plot;
  plot.title = "cumulative long-short return: " + std::string(150, 'x') + " the end";
  plot.subtitle = "top minus bottom of 5 groups by prediction each date, 2019-01-01 .. 2020-02-25 (300 steps)";
  plot.ylabel = "cumulative long-short (z-score units)";
  plot.dates = true;
  for (int t = 0; t < 300; ++t) {  // business days from Tuesday 2019-01-01
    const int week = t / 5, day = t % 5;
    plot.time_values.push_back((17897.0 + week * 7 + day) * 86400.0);
    plot.time_labels.push_back("d" + std::to_string(t));
  }
  LongShortPlot::Line line{"ret", {}};
  for (int t = 20; t < 300; ++t) line.points.push_back({double(t), 0.01 * (t - 20)});
  plot.lines = {line};
  plot.markers = {{100, "fold 1"}, {200, "fold 2"}};
  write_long_short_svg(path, plot);
  const std::string svg = read_bytes(path);
  EXPECT_TRUE(well_formed(svg));
  EXPECT_TRUE(texts_fit(svg, plot.width));
  EXPECT_NE(svg.find("…"), std::string::npos);         // the long title was shortened in the middle
  EXPECT_NE(svg.find(" the end</text>"), std::string::npos);
  EXPECT_NE(svg.find(">2019-03</text>"), std::string::npos);  // month ticks over 14 months
  EXPECT_NE(svg.find(">2020-01</text>"), std::string::npos);
  EXPECT_EQ(svg.find(">d100</text>"), std::string::npos);     // dates, not the labels or indices
  EXPECT_NE(svg.find(">date</text>"), std::string::npos);
  EXPECT_NE(svg.find(">fold 2</text>"), std::string::npos);
  EXPECT_EQ(count(svg, "stroke-dasharray='5,4'"), 2u);
  EXPECT_NE(svg.find("cumulative long-short (z-score units)"), std::string::npos);
  // Over four years the ticks are years.
  plot.time_values.clear();
  for (int t = 0; t < 300; ++t) plot.time_values.push_back((17897.0 + t * 5) * 86400.0);
  write_long_short_svg(path, plot);
  EXPECT_NE(read_bytes(path).find(">2020</text>"), std::string::npos);
  EXPECT_EQ(read_bytes(path).find(">2020-01</text>"), std::string::npos);
}

TEST(CurvesSvg, ALongTitleAndOwnAxesFit) {
  TempDir dir;
  const fs::path path = dir.path / "c.svg";
  CurvesPlot plot = sample_plot(100, 1.0);
  plot.title = "ml-alpha training: /a/very/long/path/" + std::string(120, 'p') + "/fold-3/member-07";
  plot.loss_label = "training loss: -IC";
  write_curves_svg(path, plot);
  const std::string svg = read_bytes(path);
  EXPECT_TRUE(texts_fit(svg, plot.width));
  EXPECT_NE(svg.find("/fold-3/member-07</text>"), std::string::npos);  // the end of the path stays readable
  EXPECT_NE(svg.find(">training loss: -IC</text>"), std::string::npos);
  EXPECT_EQ(svg.find("validation mse"), std::string::npos);  // no validation loss given: none drawn
}

TEST(CurvesSvg, FailureLeavesNothingBehind) {
  TempDir dir;
  EXPECT_THROW(write_curves_svg(dir.path / "missing_dir" / "c.svg", sample_plot(10, 1)), Error);
  CurvesPlot bad = sample_plot(10, 1);
  bad.metric = "sharpe";
  EXPECT_THROW(write_curves_svg(dir.path / "c.svg", bad), Error);
  EXPECT_TRUE(dir.listing().empty());
  // The target exists as a directory: the rename fails and the temporary file is removed.
  fs::create_directory(dir.path / "taken.svg");
  fs::create_directory(dir.path / "taken.svg" / "x");
  EXPECT_THROW(write_curves_svg(dir.path / "taken.svg", sample_plot(10, 1)), Error);
  EXPECT_EQ(dir.listing(), std::vector<std::string>{"taken.svg"});
}

// ------------------------------------------------------------------------------------ walk-forward folds

std::vector<FoldReport> sample_folds() {
  // T = 10 (labels "d0".."d9", "d,5" holding a comma), 2 folds, the second without a test result.
  std::vector<FoldReport> f(2);
  f[0].fold = 0;
  f[0].split = Split{0, 4, 4, 6, 6, 8};
  f[0].steps = 300, f[0].best_step = 200, f[0].best_value = 0.125;
  f[0].has_test = true;
  Metrics a;
  a.mse = 0.5, a.ic = 0.25, a.rank_ic = kNaN, a.icir = -1.5, a.dir_acc = 0.75, a.points = 40, a.steps = 2;
  a.ls_mean = 0.25, a.ls_std = 0.5, a.ls_sharpe = kNaN, a.turnover = 0.125, a.mse_zero = 1, a.mse_mean = 0.875;
  a.quantile_means = {-0.125, 0.125};
  Metrics b = a;
  b.ic = 0.75, b.points = 60;
  f[0].test.per_target = {a, b};
  f[0].test.mean = a;
  f[0].test.mean.ic = 0.5;
  f[0].test.mean.points = 100;
  f[1].fold = 1;
  f[1].split = Split{2, 6, 6, 8, 8, 10};
  f[1].steps = 150, f[1].best_step = 150, f[1].best_value = kNaN;
  return f;
}

std::vector<std::string> sample_times() { return {"d0", "d1", "d2", "d3", "d4", "d,5", "d6", "d7", "d8", "d9"}; }

TEST(Folds, CsvHasOneRowPerFoldWithRangesTimesAndTestMetrics) {
  TempDir tmp;
  const fs::path path = tmp / "folds.csv";
  write_folds_csv(path, sample_folds(), sample_times(), "ic");
  const auto lines = lines_of(read_bytes(path));
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0],
            "fold,train_begin,train_end,valid_begin,valid_end,test_begin,test_end,train_first_time,train_last_time,"
            "valid_first_time,valid_last_time,test_first_time,test_last_time,steps,best_step,metric,best_value,"
            "test_mse,test_ic,test_rank_ic,test_icir,test_dir_acc,test_ls_mean,test_ls_std,test_ls_sharpe,"
            "test_turnover,test_mse_zero,test_mse_mean,test_ts_mean,test_ts_std,test_ts_sharpe,test_ts_hit,"
            "test_ts_max_dd,test_points");
  EXPECT_EQ(lines[1],
            "0,0,4,4,6,6,8,d0,d3,d4,\"d,5\",d6,d7,300,200,ic,0.125,0.5,0.5,,-1.5,0.75,0.25,0.5,,0.125,1,0.875,0,0,0,0,0,100");
  EXPECT_EQ(lines[2], "1,2,6,6,8,8,10,d2,\"d,5\",d6,d7,d8,d9,150,150,ic,,,,,,,,,,,,,,,,,,");
  EXPECT_EQ(tmp.listing(), std::vector<std::string>{"folds.csv"});  // written atomically, no temporary left

  // Without time labels the time cells are empty.
  write_folds_csv(path, sample_folds(), {}, "mse");
  EXPECT_EQ(lines_of(read_bytes(path))[2], "1,2,6,6,8,8,10,,,,,,,150,150,mse,,,,,,,,,,,,,,,,,,");
}

TEST(Folds, JsonHoldsPerTargetMetricsAndTheMeanOverFolds) {
  TempDir tmp;
  const fs::path path = tmp / "folds.json";
  std::vector<FoldReport> f = sample_folds();
  write_folds_json(path, f, sample_times(), "ic");
  const auto j = nlohmann::json::parse(read_bytes(path));
  EXPECT_EQ(j["metric"], "ic");
  ASSERT_EQ(j["folds"].size(), 2u);
  const auto& f0 = j["folds"][0];
  EXPECT_EQ(f0["fold"], 0);
  EXPECT_EQ(f0["train"], nlohmann::json::parse(R"({"begin":0,"end":4,"first_time":"d0","last_time":"d3"})"));
  EXPECT_EQ(f0["valid"]["last_time"], "d,5");
  EXPECT_EQ(f0["test"]["end"], 8);
  EXPECT_EQ(f0["steps"], 300);
  EXPECT_EQ(f0["best_step"], 200);
  EXPECT_EQ(f0["best_value"], 0.125);
  EXPECT_EQ(f0["test_metrics"]["ic"], 0.5);
  EXPECT_TRUE(f0["test_metrics"]["rank_ic"].is_null());
  EXPECT_EQ(f0["test_metrics"]["points"], 100);
  ASSERT_EQ(f0["test_targets"].size(), 2u);
  EXPECT_EQ(f0["test_targets"][1]["ic"], 0.75);
  const auto& f1 = j["folds"][1];
  EXPECT_TRUE(f1["best_value"].is_null());
  EXPECT_TRUE(f1["test_metrics"].is_null());
  EXPECT_FALSE(f1.contains("test_targets"));
  EXPECT_EQ(j["folds_with_test"], 1);
  EXPECT_EQ(j["mean_test_metrics"]["mse"], 0.5);

  // The mean over folds: each metric over the folds that have a finite value of it.
  f[1].has_test = true;
  f[1].test.mean.mse = 1.5, f[1].test.mean.ic = -0.25, f[1].test.mean.rank_ic = 0.5;
  f[1].test.mean.icir = kNaN, f[1].test.mean.dir_acc = 0.25, f[1].test.mean.points = 7, f[1].test.mean.steps = 1;
  const Metrics m = mean_test_metrics(f);
  EXPECT_EQ(m.mse, 1.0);
  EXPECT_EQ(m.ic, 0.125);
  EXPECT_EQ(m.rank_ic, 0.5);
  EXPECT_EQ(m.icir, -1.5);
  EXPECT_EQ(m.dir_acc, 0.5);
  EXPECT_EQ(m.points, 107);
  EXPECT_EQ(m.steps, 3);
  EXPECT_TRUE(std::isnan(mean_test_metrics({}).ic));
  // The sample std over the folds: mse 0.5 and 1.5 → 1/√2; icir has one finite value → NaN.
  const Metrics sd = std_test_metrics(f);
  EXPECT_DOUBLE_EQ(sd.mse, std::sqrt(0.5));
  EXPECT_DOUBLE_EQ(sd.ic, std::sqrt(0.5) * 0.75);
  EXPECT_TRUE(std::isnan(sd.icir));
  EXPECT_EQ(sd.points, 107);
  // The quantile means, turnover and the rest of the metrics survive the JSON round trip.
  write_folds_json(path, f, sample_times(), "ic");
  const auto j2 = nlohmann::json::parse(read_bytes(path));
  const Metrics back = metrics_from_json_text(j2["folds"][0]["test_metrics"].dump());
  EXPECT_EQ(back.quantile_means, (std::vector<double>{-0.125, 0.125}));
  EXPECT_EQ(back.turnover, 0.125);
  EXPECT_EQ(back.mse_mean, 0.875);
  EXPECT_TRUE(std::isnan(back.ls_sharpe));
  EXPECT_EQ(j2["std_test_metrics"]["mse"], std::sqrt(0.5));
  EXPECT_FALSE(j2.contains("oos_metrics"));
}

TEST(Folds, NumberingHeadingsAndBadInputs) {
  const std::vector<FoldReport> f = sample_folds();
  EXPECT_EQ(fold_heading(f[1], 2),
            "walk-forward fold 1 (folds 0 to 1, fold 0 the earliest): train [2, 6) valid [6, 8) test [8, 10)");
  EXPECT_EQ(fold_dir_name(0), "fold-0");
  TempDir tmp;
  std::vector<FoldReport> bad = f;
  bad[1].fold = 2;
  EXPECT_EQ(test::error_of([&] { write_folds_csv(tmp / "f.csv", bad, {}, "ic"); }),
            tmp / "f.csv" + ": fold record 1 is numbered 2 (folds are numbered 0, 1, ... in order)");
  bad = f;
  bad[0].split.valid_begin = 3;
  EXPECT_TRUE(test::contains(test::error_of([&] { write_folds_json(tmp / "f.json", bad, sample_times(), "ic"); }),
                             "split train [0, 4) valid [3, 6) test [6, 8) on T = 10 is invalid"));
  EXPECT_TRUE(test::contains(test::error_of([&] { write_folds_json(tmp / "f.json", f, {}, "sharpe"); }),
                             "unknown metric 'sharpe'"));
  EXPECT_TRUE(tmp.listing().empty()) << "nothing is written for bad input";
}

}  // namespace
}  // namespace mlalpha

#pragma once
// The SVG plots a run writes: the training and validation curves (curves.svg) and the cumulative long-short
// return (long_short.svg). Host-only (never include from .cu).
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

namespace mlalpha {

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
  // (step, validation loss), drawn in the loss panel: only a loss of the training loss's kind and units (the
  // caller leaves it empty otherwise: an IC loss and a validation MSE do not share an axis).
  std::vector<CurvePoint> valid_loss;
  std::string valid_loss_label = "validation loss";
  std::string loss_label = "training loss";  // the upper panel's axis ("training loss: -IC per date")
  std::string metric = "ic";      // a name from metric_names(), labels the lower panel and picks "best"
  std::string title = "ml-alpha training run";  // shrunk, then shortened in the middle, to fit the width
  int width = 960, height = 640;
};
void write_curves_svg(const std::filesystem::path& path, const CurvesPlot& plot);

// The cumulative long-short plot (long_short.svg): one panel, one line per target of the running sum of the
// long-short return over the time steps that formed portfolios (docs/metrics.md). The x axis runs over time
// indices (so a trading calendar has no weekend gaps) and is labelled with dates (years, months or days, as
// the span needs) when the times are dates, else with the time labels.
struct LongShortPlot {
  struct Line {
    std::string label;
    std::vector<CurvePoint> points;  // (time index, cumulative long-short)
  };
  std::vector<Line> lines;
  std::string title = "cumulative long-short return";
  std::string subtitle;  // a second, smaller line: the portfolios and the range
  std::string ylabel = "cumulative long-short";
  std::vector<std::string> time_labels;  // (T) the panel's labels by time index; may be empty
  std::vector<double> time_values;       // (T) seconds since the epoch when `dates`
  bool dates = false;
  std::vector<std::pair<double, std::string>> markers;  // (time index, label): dashed vertical lines (fold starts)
  // The time indices the x axis spans at least (the range scored), so steps without a point keep their place;
  // NaN: the points' own span.
  double x_first = NAN, x_last = NAN;
  int width = 960, height = 440;
};
void write_long_short_svg(const std::filesystem::path& path, const LongShortPlot& plot);

}  // namespace mlalpha

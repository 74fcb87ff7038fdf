#pragma once
// The SVG plots a run writes: the training and validation curves (curves.svg) and the cumulative long-short
// return (long_short.svg). Host-only (never include from .cu).
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

// The training / validation curves as a self-contained SVG (plots.h): no plotting library, just
// axes, ticks, grid, two polylines and a legend per panel. Layout (default 960 × 640):
//   title (shrunk, then shortened, to fit)
//   ┌ training loss (raw light, moving mean dark; log scale over > 2 decades), validation loss of its kind ┐
//   └ step ticks ─────────────────────────────────────────────────────────────┘
//   ┌ validation metric (points, best one ringed; dashed zero line)          ┐
//   └ step ticks, "step" ─────────────────────────────────────────────────────┘
#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/atomic_file.h"
#include "core/error.h"
#include "eval/plots.h"
#include "eval/svg_panel.h"
#include "mlalpha/metric_table.h"

namespace mlalpha {

using namespace svg;

void write_curves_svg(const std::filesystem::path& path, const CurvesPlot& plot) {
  const bool higher = higher_is_better(plot.metric);  // also rejects an unknown metric name
  require(plot.width >= 300 && plot.height >= 240, "plot: width x height = " + std::to_string(plot.width) + "x" +
                                                       std::to_string(plot.height) + ", expected >= 300x240");
  const double W = plot.width, H = plot.height;
  const double left = 84, right = 32, top = 48, bottom = 56, gap = 56;
  const double ph = (H - top - bottom - gap) / 2;
  const Rect r1{left, top, W - left - right, ph}, r2{left, top + ph + gap, W - left - right, ph};

  Axis xa = make_axis({&plot.train, &plot.valid, &plot.valid_loss}, true, false);
  if (xa.lo > 0 && xa.lo <= 0.05 * xa.hi) xa.lo = 0;  // a run from step 1 reads better from 0
  const Axis ya1 = make_axis({&plot.train, &plot.valid_loss}, false, true);
  const Axis ya2 = make_axis({&plot.valid}, false, false);

  // Training loss: with many points the raw series is noisy, so it is drawn light under a moving mean.
  std::vector<Series> s1;
  const size_t n = plot.train.size();
  if (n >= 40) {
    const size_t w = std::max<size_t>(2, n / 40);
    s1.push_back({plot.train, "#a6cee3", "training loss", 1.0, false});
    s1.push_back({moving_mean(plot.train, w), "#1f77b4", "training loss, mean of last " + std::to_string(w), 2.0, false});
  } else {
    s1.push_back({plot.train, "#1f77b4", "training loss", 2.0, n <= 1});
  }
  if (!plot.valid_loss.empty())
    s1.push_back({plot.valid_loss, "#ff7f0e", plot.valid_loss_label, 2.0, plot.valid_loss.size() <= 200});
  const std::vector<Series> s2{{plot.valid, "#d62728", "validation " + plot.metric, 2.0, plot.valid.size() <= 200}};

  const CurvePoint* best = nullptr;
  for (const auto& p : plot.valid)
    if (std::isfinite(p.step) && is_improvement(plot.metric, p.value, best ? best->value : NAN)) best = &p;
  char best_label[96] = "";
  if (best)
    std::snprintf(best_label, sizeof best_label, "best %.4g at step %.0f (%s)", best->value, best->step,
                  higher ? "highest" : "lowest");

  std::ostringstream o;
  o << "<svg xmlns='http://www.w3.org/2000/svg' width='" << plot.width << "' height='" << plot.height
    << "' viewBox='0 0 " << plot.width << " " << plot.height << "' font-family='sans-serif' font-size='12'>\n";
  o << "<rect width='100%' height='100%' fill='#fafafa'/>\n";
  fitted_text(o, W / 2, 28, plot.title, 17, W - 24, "font-weight='bold'");
  draw_panel(o, r1, xa, ya1, s1, ya1.log ? plot.loss_label + " (log scale)" : plot.loss_label, nullptr, "");
  draw_panel(o, r2, xa, ya2, s2, "validation " + plot.metric, best, best_label);
  o << "<text x='" << num(r2.x + r2.w / 2) << "' y='" << num(H - 12) << "' text-anchor='middle' font-size='13'>"
    << "step</text>\n";
  o << "</svg>\n";
  // Temporary file + rename (AtomicFile): a failure leaves the old plot, or nothing, never half a plot.
  const std::string svg = o.str();
  AtomicFile f(path.string());
  f.write(svg.data(), svg.size());
  f.commit();
}

void write_long_short_svg(const std::filesystem::path& path, const LongShortPlot& plot) {
  require(plot.width >= 300 && plot.height >= 200, "plot: width x height = " + std::to_string(plot.width) + "x" +
                                                       std::to_string(plot.height) + ", expected >= 300x200");
  static const char* const kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"};
  const double W = plot.width, H = plot.height;
  const double top = plot.subtitle.empty() ? 48 : 64;
  const Rect r{84, top, W - 84 - 32, H - top - 56};
  std::vector<const std::vector<CurvePoint>*> sets;
  std::vector<Series> series;
  for (size_t i = 0; i < plot.lines.size(); ++i) {
    sets.push_back(&plot.lines[i].points);
    series.push_back({plot.lines[i].points, kColors[i % 6], plot.lines[i].label, 2.0, plot.lines[i].points.size() <= 60});
  }
  Axis xa = make_axis(sets, true, false);
  const Axis ya = make_axis(sets, false, false);
  if (std::isfinite(plot.x_first) && std::isfinite(plot.x_last) && plot.x_last > plot.x_first) {
    bool points = false;
    for (const auto* s : sets) points = points || !s->empty();
    xa.lo = points ? std::min(xa.lo, plot.x_first) : plot.x_first;
    xa.hi = points ? std::max(xa.hi, plot.x_last) : plot.x_last;
  }
  const bool dated = plot.dates && plot.time_values.size() > size_t(std::max(0.0, xa.hi));
  std::vector<Tick> ticks = dated ? date_ticks(plot.time_values, xa) : number_ticks(xa);
  if (!dated && !plot.time_labels.empty())  // the labels at the index ticks
    for (Tick& t : ticks)
      if (t.at >= 0 && t.at < double(plot.time_labels.size()) && t.at == std::floor(t.at))
        t.label = plot.time_labels[size_t(t.at)];
  std::ostringstream o;
  o << "<svg xmlns='http://www.w3.org/2000/svg' width='" << plot.width << "' height='" << plot.height
    << "' viewBox='0 0 " << plot.width << " " << plot.height << "' font-family='sans-serif' font-size='12'>\n";
  o << "<rect width='100%' height='100%' fill='#fafafa'/>\n";
  fitted_text(o, W / 2, 26, plot.title, 16, W - 24, "font-weight='bold'");
  if (!plot.subtitle.empty()) fitted_text(o, W / 2, 46, plot.subtitle, 12.5, W - 24, "fill='#444'");
  draw_panel(o, r, xa, ya, series, plot.ylabel, nullptr, "", &ticks);
  for (const auto& [at, label] : plot.markers) {
    if (at < xa.lo || at > xa.hi) continue;
    const double px = r.x + xa.frac(at) * r.w;
    o << "<line x1='" << num(px) << "' y1='" << num(r.y) << "' x2='" << num(px) << "' y2='" << num(r.y + r.h)
      << "' stroke='#999' stroke-dasharray='5,4'/>\n<text x='" << num(px + 4) << "' y='" << num(r.y + 14)
      << "' fill='#666' font-size='11'>" << xml_escape(label) << "</text>\n";
  }
  o << "<text x='" << num(r.x + r.w / 2) << "' y='" << num(H - 12) << "' text-anchor='middle' font-size='13'>"
    << (dated ? "date" : plot.time_labels.empty() ? "time step" : "time") << "</text>\n";
  o << "</svg>\n";
  const std::string svg = o.str();
  AtomicFile f(path.string());
  f.write(svg.data(), svg.size());
  f.commit();
}

}  // namespace mlalpha

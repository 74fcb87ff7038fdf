#pragma once
// The parts the run's SVG plots are drawn with (curves_svg.cpp): axes and their ticks (numbers, or dates at
// year / month / day boundaries), text fitted to the picture, polylines and legends in a framed panel.
// Host-only; no plotting library.
#include <cmath>
#include <cstddef>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "eval/plots.h"

namespace mlalpha::svg {

struct Rect {
  double x, y, w, h;
};

// Maps a data value to [0, 1] along the axis; a log axis works in log10 units.
struct Axis {
  double lo = 0, hi = 1;
  bool log = false;
  double frac(double v) const { return ((log ? std::log10(v) : v) - lo) / (hi - lo); }
  bool valid(double v) const { return std::isfinite(v) && (!log || v > 0); }
};

struct Series {
  std::vector<CurvePoint> pts;
  std::string color, label;
  double width = 1.5;
  bool dots = false;  // a marker at each point (the validation series is sparse)
};

// An x tick: its position on the axis and its label.
struct Tick {
  double at;
  std::string label;
};

// A coordinate as SVG text, to 0.1 px.
std::string num(double v);
// Text with &, <, >, " escaped.
std::string xml_escape(std::string_view s);
// A centred line of text that fits `max_width`: its font shrunk down to 11 px, then its middle replaced by "…"
// (widths estimated at 0.6 em a glyph, above the sans-serif fonts' average). `extra` adds attributes.
void fitted_text(std::ostringstream& o, double x, double y, std::string text, double size, double max_width,
                 const char* extra);
// The axis over the finite values of `sets` (their steps when use_step, else their values; a log axis when
// allowed, every value is positive and they span more than 2 decades), padded by 5 % (values only).
Axis make_axis(const std::vector<const std::vector<CurvePoint>*>& sets, bool use_step, bool allow_log);
// Trailing mean over the last w finite values, one point per input point; a non-finite input stays a gap.
std::vector<CurvePoint> moving_mean(const std::vector<CurvePoint>& pts, size_t w);
// Ticks at 1, 2 or 5 × 10^k over the axis, labelled with their values.
std::vector<Tick> number_ticks(const Axis& xa);
// Ticks of a date axis over time indices (`seconds`: each index's time, seconds since the epoch): at the first
// index of every k-th year, month or day, k such that about 4 to 8 show ("2021", "2021-03", "2021-03-15").
std::vector<Tick> date_ticks(const std::vector<double>& seconds, const Axis& xa);
// A framed panel: grid and ticks (x_ticks, or the axis's numbers), the series with a legend (and the best
// point ringed and named), "no data" when nothing is drawable, the y label rotated and fitted to the height.
void draw_panel(std::ostringstream& o, const Rect& r, const Axis& xa, const Axis& ya, const std::vector<Series>& series,
                const std::string& ylabel, const CurvePoint* best, const std::string& best_label,
                const std::vector<Tick>* x_ticks = nullptr);

}  // namespace mlalpha::svg

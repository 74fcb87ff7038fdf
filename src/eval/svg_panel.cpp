// The parts of the run's SVG plots (svg_panel.h).
#include "eval/svg_panel.h"

#include <date/date.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>

namespace mlalpha::svg {

namespace {

// The width a line of text takes in the plots' sans-serif at `size` px: 0.6 em per glyph, a little more than
// DejaVu Sans' and Helvetica's average, so an estimate that fits fits when rendered. Counts UTF-8 code points.
double text_width(std::string_view s, double size) {
  size_t glyphs = 0;
  for (const char c : s) glyphs += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return 0.6 * size * double(glyphs);
}

// Ticks at 1, 2 or 5 × 10^k, about `target` of them over [lo, hi].
std::vector<double> nice_ticks(double lo, double hi, int target = 6) {
  const double rough = (hi - lo) / target;
  const double mag = std::pow(10.0, std::floor(std::log10(rough)));
  const double n = rough / mag;
  const double step = (n < 1.5 ? 1 : n < 3 ? 2 : n < 7 ? 5 : 10) * mag;
  std::vector<double> t;
  // k·step rather than a running sum (no drift); + 0.0 turns −0 into 0.
  for (double k = std::ceil(lo / step); k * step <= hi + step * 1e-9; ++k) t.push_back(k * step + 0.0);
  return t;
}

std::string tick_label(double v, double step) {
  char buf[32];
  const double a = std::abs(v);
  if (v != 0 && (a >= 1e6 || a < 1e-4))
    std::snprintf(buf, sizeof buf, "%.3g", v);
  else
    std::snprintf(buf, sizeof buf, "%.*f", std::max(0, int(-std::floor(std::log10(step) + 1e-9))), v);
  return buf;
}

// The path's "d": invalid values break the line (a new M); points falling on the same pixel column
// collapse to first, min, max, last, so 10⁶ steps still make a small file that draws the same envelope.
std::string path_d(const std::vector<CurvePoint>& pts, const Axis& xa, const Axis& ya, const Rect& r) {
  std::string d;
  std::vector<std::pair<double, double>> col;  // pixel points of the current column
  bool pen_down = false;
  auto flush = [&] {
    if (col.empty()) return;
    size_t lo = 0, hi = 0;
    for (size_t i = 0; i < col.size(); ++i) {
      if (col[i].second < col[lo].second) lo = i;
      if (col[i].second > col[hi].second) hi = i;
    }
    std::vector<size_t> keep{0, std::min(lo, hi), std::max(lo, hi), col.size() - 1};
    keep.erase(std::unique(keep.begin(), keep.end()), keep.end());
    for (size_t i : keep) {
      d += (pen_down ? " L" : " M") + num(col[i].first) + "," + num(col[i].second);
      pen_down = true;
    }
    col.clear();
  };
  for (const auto& p : pts) {
    if (!xa.valid(p.step) || !ya.valid(p.value)) {
      flush();
      pen_down = false;
      continue;
    }
    const double px = r.x + xa.frac(p.step) * r.w, py = r.y + (1 - ya.frac(p.value)) * r.h;
    if (!col.empty() && std::floor(px) != std::floor(col.front().first)) flush();
    col.emplace_back(px, py);
  }
  flush();
  return d;
}

void draw_x_ticks(std::ostringstream& o, const Axis& xa, const Rect& r, const std::vector<Tick>& ticks) {
  for (const Tick& t : ticks) {
    const double px = r.x + xa.frac(t.at) * r.w;
    o << "<line x1='" << num(px) << "' y1='" << num(r.y) << "' x2='" << num(px) << "' y2='" << num(r.y + r.h)
      << "' stroke='#e5e5e5'/>\n";
    o << "<text x='" << num(px) << "' y='" << num(r.y + r.h + 16) << "' text-anchor='middle'>" << xml_escape(t.label)
      << "</text>\n";
  }
}

void draw_y_ticks(std::ostringstream& o, const Axis& ya, const Rect& r) {
  auto y_of = [&](double v) { return r.y + (1 - ya.frac(v)) * r.h; };
  auto tick = [&](double v, const std::string& label, const char* stroke) {
    o << "<line x1='" << num(r.x) << "' y1='" << num(y_of(v)) << "' x2='" << num(r.x + r.w) << "' y2='"
      << num(y_of(v)) << "' stroke='" << stroke << "'/>\n";
    if (!label.empty())
      o << "<text x='" << num(r.x - 6) << "' y='" << num(y_of(v) + 4) << "' text-anchor='end'>" << label
        << "</text>\n";
  };
  if (ya.log) {
    for (int k = int(std::floor(ya.lo)); k <= int(std::ceil(ya.hi)); ++k)
      for (int m = 1; m <= 9; ++m) {
        const double v = m * std::pow(10.0, k);
        const double f = ya.frac(v);
        if (f < 0 || f > 1) continue;
        char buf[32];
        std::snprintf(buf, sizeof buf, "%g", v);
        // Over few decades the 2× and 5× lines get labels too, or the axis would have only one or two.
        const bool label = m == 1 || (ya.hi - ya.lo < 3 && (m == 2 || m == 5));
        tick(v, label ? buf : "", m == 1 ? "#d0d0d0" : "#f0f0f0");
      }
  } else {
    const auto ticks = nice_ticks(ya.lo, ya.hi);
    const double step = ticks.size() > 1 ? ticks[1] - ticks[0] : 1;
    for (double t : ticks) tick(t, tick_label(t, step), "#e5e5e5");
    if (ya.lo < 0 && ya.hi > 0)  // the zero line matters for IC-like metrics
      o << "<line x1='" << num(r.x) << "' y1='" << num(y_of(0)) << "' x2='" << num(r.x + r.w) << "' y2='"
        << num(y_of(0)) << "' stroke='#888' stroke-dasharray='4,3'/>\n";
  }
}

// Legend in the right-hand corner (top or bottom) that holds fewer data points.
void draw_legend(std::ostringstream& o, const std::vector<Series>& series, const std::vector<std::string>& extra,
                 const Axis& xa, const Axis& ya, const Rect& r) {
  int top = 0, bottom = 0;
  for (const auto& s : series)
    for (const auto& p : s.pts)
      if (xa.valid(p.step) && ya.valid(p.value) && xa.frac(p.step) > 0.55) (ya.frac(p.value) > 0.5 ? top : bottom)++;
  size_t rows = 0, longest = 0;
  for (const auto& s : series) ++rows, longest = std::max(longest, s.label.size());
  for (const auto& e : extra) ++rows, longest = std::max(longest, e.size());
  const double w = 52 + 6.8 * double(longest), h = 8 + 18.0 * double(rows);  // ~6.8 px per glyph at 12 px
  const double x = r.x + r.w - w - 8, y = top <= bottom ? r.y + 8 : r.y + r.h - h - 8;
  o << "<rect x='" << num(x) << "' y='" << num(y) << "' width='" << num(w) << "' height='" << num(h)
    << "' fill='white' fill-opacity='0.85' stroke='#bbb'/>\n";
  double ty = y + 17;
  for (const auto& s : series) {
    o << "<line x1='" << num(x + 8) << "' y1='" << num(ty - 4) << "' x2='" << num(x + 32) << "' y2='" << num(ty - 4)
      << "' stroke='" << s.color << "' stroke-width='" << s.width + 1 << "'/>\n";
    o << "<text x='" << num(x + 40) << "' y='" << num(ty) << "'>" << xml_escape(s.label) << "</text>\n";
    ty += 18;
  }
  for (const auto& e : extra) {
    o << "<circle cx='" << num(x + 20) << "' cy='" << num(ty - 4) << "' r='5' fill='none' stroke='#2ca02c' "
      << "stroke-width='2'/>\n<text x='" << num(x + 40) << "' y='" << num(ty) << "'>" << xml_escape(e) << "</text>\n";
    ty += 18;
  }
}

}  // namespace

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::string xml_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

// A line of text that fits `max_width`: its font shrunk down to 11 px, then its middle replaced by "…".
void fitted_text(std::ostringstream& o, double x, double y, std::string text, double size, double max_width,
                 const char* extra) {
  if (text_width(text, size) > max_width) size = std::max(11.0, size * max_width / text_width(text, size));
  if (text_width(text, size) > max_width) {
    const size_t keep = size_t(std::max(8.0, max_width / (0.6 * size))) - 1;  // code points, roughly bytes here
    const size_t head = keep / 2, tail = keep - head;
    if (text.size() > head + tail) text = text.substr(0, head) + "…" + text.substr(text.size() - tail);
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", size);
  o << "<text x='" << num(x) << "' y='" << num(y) << "' text-anchor='middle' font-size='" << buf << "' " << extra << ">"
    << xml_escape(text) << "</text>\n";
}

// Range of the finite values (positive ones on a log axis), padded by 5 %; a flat series gets ±10 %.
Axis make_axis(const std::vector<const std::vector<CurvePoint>*>& sets, bool use_step, bool allow_log) {
  double lo = INFINITY, hi = -INFINITY;
  bool all_positive = true;
  for (const auto* s : sets)
    for (const auto& p : *s) {
      const double v = use_step ? p.step : p.value;
      if (!std::isfinite(v)) continue;
      lo = std::min(lo, v), hi = std::max(hi, v);
      all_positive &= v > 0;
    }
  Axis a;
  if (lo > hi) return a;  // no data: [0, 1]
  if (allow_log && all_positive && hi / lo > 100) {
    a.log = true;
    lo = std::log10(lo), hi = std::log10(hi);
  }
  if (lo == hi) {
    const double d = lo == 0 ? 1 : std::abs(lo) * 0.1;
    lo -= d, hi += d;
  }
  const double pad = use_step ? 0.0 : 0.05 * (hi - lo);
  a.lo = lo - pad, a.hi = hi + pad;
  return a;
}

// Trailing mean over the last w finite values, one point per input point; a non-finite input stays a
// gap (NaN) so the mean does not draw a line across steps that had no loss.
std::vector<CurvePoint> moving_mean(const std::vector<CurvePoint>& pts, size_t w) {
  std::vector<CurvePoint> out;
  std::vector<double> win;
  double sum = 0;
  for (const auto& p : pts) {
    if (!std::isfinite(p.value)) {
      out.push_back({p.step, NAN});
      continue;
    }
    win.push_back(p.value);
    sum += p.value;
    if (win.size() > w) sum -= win[win.size() - w - 1];
    out.push_back({p.step, sum / double(std::min(win.size(), w))});
  }
  return out;
}

std::vector<Tick> number_ticks(const Axis& xa) {
  const auto ticks = nice_ticks(xa.lo, xa.hi);
  const double step = ticks.size() > 1 ? ticks[1] - ticks[0] : 1;
  std::vector<Tick> out;
  for (double t : ticks) out.push_back({t, tick_label(t, step)});
  return out;
}

// Ticks of a date axis over time indices [lo, hi]: at the first index of every k-th year, month or day,
// with k such that about 4 to 8 ticks show ("2021", "2021-03", "2021-03-15").
std::vector<Tick> date_ticks(const std::vector<double>& seconds, const Axis& xa) {
  const int i0 = std::max(0, int(std::ceil(xa.lo))), i1 = std::min(int(seconds.size()) - 1, int(std::floor(xa.hi)));
  if (i1 <= i0) return {};
  struct Ymd {
    int y;
    unsigned m, d;
  };
  auto ymd = [&](int i) {
    const auto day = std::chrono::floor<date::days>(date::sys_seconds{std::chrono::seconds{int64_t(std::floor(seconds[size_t(i)]))}});
    const date::year_month_day v{day};
    return Ymd{int(v.year()), unsigned(v.month()), unsigned(v.day())};
  };
  const double span_days = (seconds[size_t(i1)] - seconds[size_t(i0)]) / 86400.0;
  // bucket of index i in the chosen unit; a tick where the bucket changes and is a multiple of k
  enum { years, months, days } unit = span_days > 3 * 365.25 ? years : span_days > 60 ? months : days;
  const double per = unit == years ? span_days / 365.25 : unit == months ? span_days / 30.44 : span_days;
  int k = 1;
  for (int c : {1, 2, 3, 5, 6, 10, 12, 20, 25, 50, 100})
    if (per / c <= 8) {
      k = c;
      break;
    }
  if (unit == months && k > 6) k = 12;
  auto bucket = [&](const Ymd& v) {
    return unit == years ? int64_t(v.y) : unit == months ? int64_t(v.y) * 12 + (v.m - 1) : int64_t(v.y) * 372 + (v.m - 1) * 31 + v.d;
  };
  std::vector<Tick> out;
  int64_t prev = INT64_MIN;
  for (int i = i0; i <= i1; ++i) {
    const Ymd v = ymd(i);
    const int64_t b = bucket(v);
    if (b == prev) continue;
    const bool first = prev == INT64_MIN;
    prev = b;
    // The first index of the range starts a bucket only when the one before it is in another.
    if (first && i > 0 && bucket(ymd(i - 1)) == b) continue;
    const int64_t along = unit == years ? v.y : unit == months ? int64_t(v.y) * 12 + (v.m - 1) : int64_t(i);
    if (along % k != 0) continue;
    char buf[16];
    if (unit == years) std::snprintf(buf, sizeof buf, "%d", v.y);
    else if (unit == months) std::snprintf(buf, sizeof buf, "%d-%02u", v.y, v.m);
    else std::snprintf(buf, sizeof buf, "%d-%02u-%02u", v.y, v.m, v.d);
    out.push_back({double(i), buf});
  }
  return out;
}

void draw_panel(std::ostringstream& o, const Rect& r, const Axis& xa, const Axis& ya, const std::vector<Series>& series,
                const std::string& ylabel, const CurvePoint* best, const std::string& best_label,
                const std::vector<Tick>* x_ticks) {
  o << "<rect x='" << num(r.x) << "' y='" << num(r.y) << "' width='" << num(r.w) << "' height='" << num(r.h)
    << "' fill='white'/>\n";
  draw_x_ticks(o, xa, r, x_ticks ? *x_ticks : number_ticks(xa));
  draw_y_ticks(o, ya, r);
  bool any = false;
  for (const auto& s : series) {
    const std::string d = path_d(s.pts, xa, ya, r);
    if (d.empty()) continue;
    any = true;
    o << "<path d='" << d << "' fill='none' stroke='" << s.color << "' stroke-width='" << s.width
      << "' stroke-linejoin='round'/>\n";
    if (s.dots)
      for (const auto& p : s.pts)
        if (xa.valid(p.step) && ya.valid(p.value))
          o << "<circle cx='" << num(r.x + xa.frac(p.step) * r.w) << "' cy='" << num(r.y + (1 - ya.frac(p.value)) * r.h)
            << "' r='2.5' fill='" << s.color << "'/>\n";
  }
  if (best)
    o << "<circle cx='" << num(r.x + xa.frac(best->step) * r.w) << "' cy='"
      << num(r.y + (1 - ya.frac(best->value)) * r.h) << "' r='6' fill='none' stroke='#2ca02c' stroke-width='2'/>\n";
  if (!any)
    o << "<text x='" << num(r.x + r.w / 2) << "' y='" << num(r.y + r.h / 2) << "' text-anchor='middle' fill='#888'>"
      << "no data</text>\n";
  else
    draw_legend(o, series, best ? std::vector<std::string>{best_label} : std::vector<std::string>{}, xa, ya, r);
  o << "<rect x='" << num(r.x) << "' y='" << num(r.y) << "' width='" << num(r.w) << "' height='" << num(r.h)
    << "' fill='none' stroke='#333'/>\n";
  std::ostringstream label;
  fitted_text(label, 0, 0, ylabel, 13, r.h, "");
  o << "<g transform='translate(" << num(r.x - 58) << "," << num(r.y + r.h / 2) << ") rotate(-90)'>" << label.str()
    << "</g>\n";
}

}  // namespace mlalpha::svg

// Scores of predictions and the long-short plot (include/mlalpha/eval.h).
#include "mlalpha/eval.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "eval/plots.h"

namespace mlalpha {

std::string range_text(const Panel& p, TimeRange r) {
  // Built with append: GCC 12 reports a false -Wrestrict on "literal" + std::string&&.
  std::string s(1, '[');
  s.append(std::to_string(r.t0)).append(", ").append(std::to_string(r.t1)).append(")");
  if (!r.empty() && size_t(r.t1) <= p.times.size())
    s.append(" (").append(p.times[size_t(r.t0)]).append(" .. ").append(p.times[size_t(r.t1 - 1)]).append(")");
  return s;
}

void write_long_short_plot(const std::string& path, const MetricsResult& r, const Panel& panel, const std::string& what,
                           const std::string& units, const std::vector<int>& fold_starts) {
  // One series (or cross-sections smaller than the groups) forms no portfolios: the plot then shows the sign
  // strategy's return (ts_*), the one backtest such data has, rather than an empty panel.
  bool formed = false;
  for (const PortfolioSeries& ps : r.portfolios)
    formed = formed || std::find(ps.formed.begin(), ps.formed.end(), uint8_t(1)) != ps.formed.end();
  LongShortPlot plot;
  for (size_t k = 0; k < r.portfolios.size(); ++k) {
    const PortfolioSeries& ps = r.portfolios[k];
    LongShortPlot::Line line;
    line.label = k < panel.target_names.size() ? panel.target_names[k] : "target " + std::to_string(k);
    double cum = 0;
    for (size_t i = 0; i < ps.long_short.size(); ++i) {
      if (formed && ps.formed[i]) line.points.push_back({double(ps.t0 + int(i)), cum += ps.long_short[i]});
      if (!formed && i < ps.strategy.size() && std::isfinite(ps.strategy[i]))
        line.points.push_back({double(ps.t0 + int(i)), cum += ps.strategy[i]});
    }
    plot.lines.push_back(std::move(line));
  }
  const int t0 = r.portfolios.empty() ? 0 : r.portfolios[0].t0;
  const int t1 = r.portfolios.empty() ? 0 : t0 + int(r.portfolios[0].long_short.size());
  const int q = r.portfolios.empty() ? 0 : r.portfolios[0].quantiles;
  const std::string kind = formed ? "long-short" : "sign-strategy";
  plot.title = "cumulative " + kind + " return: " + what;
  const std::string span = t1 > t0 && size_t(t1) <= panel.times.size()
                               ? panel.times[size_t(t0)] + " .. " + panel.times[size_t(t1 - 1)] + " (" +
                                     std::to_string(t1 - t0) + " steps)"
                               : "time steps [" + std::to_string(t0) + ", " + std::to_string(t1) + ")";
  const std::string how = formed ? "top minus bottom of " + std::to_string(q) + " prediction groups per date"
                          : panel.N == 1
                              ? "one series, no prediction groups: the target times the sign of the prediction"
                              : "no date had " + std::to_string(q) +
                                    " instruments for the prediction groups: the mean of target times sign of "
                                    "prediction per date";
  plot.subtitle = how + ", " + span + (units.empty() ? std::string() : "; " + units + " units, not returns");
  plot.ylabel = "cumulative " + kind + " (" + (units.empty() ? std::string("target") : units) + " units)";
  plot.time_labels = panel.times;
  plot.time_values = panel.time_values;
  plot.dates = panel.times_are_dates;
  plot.x_first = t0, plot.x_last = t1 - 1;
  for (size_t f = 0; f < fold_starts.size(); ++f) plot.markers.push_back({double(fold_starts[f]), "fold " + std::to_string(f)});
  write_long_short_svg(path, plot);
}

std::string target_units(const DataConfig& d) {
  return d.target_norm == "zscore" ? "z-score" : d.target_norm == "rank" ? "rank" : "";
}

double score_periods_per_year(const Panel& p, const ScoreOptions& o) {
  return o.periods_per_year > 0 ? o.periods_per_year : periods_per_year(p);
}

MetricsResult score_with_mean(const std::vector<float>& pred, const Panel& p, TimeRange range, int quantiles,
                              double periods_per_year, std::span<const double> train_mean) {
  MetricsInput in;
  in.pred = pred;
  in.y = p.y;
  in.N = p.N;
  in.T = p.T;
  in.K = p.K;
  in.t0 = range.t0;
  in.t1 = range.t1;
  in.quantiles = quantiles;
  in.periods_per_year = periods_per_year;
  in.train_mean = train_mean;
  return compute_metrics(in);
}

MetricsResult score(const std::vector<float>& pred, const Panel& p, TimeRange range, const ScoreOptions& options) {
  std::vector<double> base;
  if (!options.train.empty()) base = target_means(p.y, p.N, p.T, p.K, options.train.t0, options.train.t1);
  return score_with_mean(pred, p, range, options.quantiles, score_periods_per_year(p, options), base);
}

TimeRange split_range(const Split& s, const std::string& split, int T) {
  TimeRange r;
  if (split == "train") r = {s.train_begin, s.train_end};
  else if (split == "valid") r = {s.valid_begin, s.valid_end};
  else if (split == "test") r = {s.test_begin, s.test_end};
  else if (split == "all") r = {0, T};
  else throw Error("the split must be train, valid, test or all, got '" + split + "'");
  require(r.t1 > r.t0, "the " + split + " split is empty (" + s.to_string() + ")");
  return r;
}

}  // namespace mlalpha

// The table of metrics (include/mlalpha/metric_table.h): names, fields, direction, display.
#include "mlalpha/metric_table.h"

#include <cmath>
#include <limits>

#include "core/error.h"

namespace mlalpha {

namespace {

// Lower is better for the errors, the spreads of the strategies' returns, the turnover and the drawdown; higher
// for the correlations, the accuracies and the returns.
constexpr MetricInfo kMetrics[] = {
    {"mse", &Metrics::mse, false, false},           {"ic", &Metrics::ic, true, true},
    {"rank_ic", &Metrics::rank_ic, true, true},     {"icir", &Metrics::icir, true, true},
    {"dir_acc", &Metrics::dir_acc, true, true},     {"ls_mean", &Metrics::ls_mean, true, false},
    {"ls_std", &Metrics::ls_std, false, false},     {"ls_sharpe", &Metrics::ls_sharpe, true, true},
    {"turnover", &Metrics::turnover, false, true},  {"mse_zero", &Metrics::mse_zero, false, false},
    {"mse_mean", &Metrics::mse_mean, false, false}, {"ts_mean", &Metrics::ts_mean, true, false},
    {"ts_std", &Metrics::ts_std, false, false},     {"ts_sharpe", &Metrics::ts_sharpe, true, true},
    {"ts_hit", &Metrics::ts_hit, true, true},       {"ts_max_dd", &Metrics::ts_max_dd, false, false},
};

const MetricInfo* find_scalar(std::string_view name) {
  for (const MetricInfo& m : kMetrics)
    if (name == m.name) return &m;
  return nullptr;
}

std::string valid_names_text() {
  std::string s;
  for (const MetricInfo& m : kMetrics) s += (s.empty() ? "" : ", ") + std::string(m.name);
  return s + ", q1 .. qQ (quantile means)";
}

// k for a name "q<k>" with k >= 1 (no sign, no leading zero); 0 for any other name.
int quantile_index(std::string_view name) {
  if (name.size() < 2 || name.size() > 6 || name[0] != 'q' || name[1] == '0') return 0;
  int k = 0;
  for (size_t i = 1; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return 0;
    k = k * 10 + (name[i] - '0');
  }
  return k;
}

}  // namespace

std::span<const MetricInfo> metric_table() { return kMetrics; }

const MetricInfo* find_metric(std::string_view name) { return find_scalar(name); }

const std::vector<std::string>& metric_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const MetricInfo& m : kMetrics) out.emplace_back(m.name);
    return out;
  }();
  return names;
}

std::vector<std::string> quantile_names(int quantiles) {
  std::vector<std::string> out;
  for (int q = 1; q <= quantiles; ++q) out.push_back(std::string(1, 'q').append(std::to_string(q)));
  return out;
}

double metric_by_name(const Metrics& m, std::string_view name) {
  if (const MetricInfo* info = find_scalar(name)) return m.*info->field;
  if (const int q = quantile_index(name); q > 0)
    return size_t(q) <= m.quantile_means.size() ? m.quantile_means[size_t(q - 1)]
                                                : std::numeric_limits<double>::quiet_NaN();
  throw Error("unknown metric '" + std::string(name) + "'; expected one of: " + valid_names_text());
}

bool higher_is_better(std::string_view name) {
  if (const MetricInfo* info = find_scalar(name)) return info->higher_is_better;
  metric_by_name(Metrics{}, name);  // validates the name: a quantile mean is a return, higher is better
  return true;
}

bool is_improvement(std::string_view name, double candidate, double best) {
  const bool higher = higher_is_better(name);
  if (std::isnan(candidate)) return false;
  if (std::isnan(best)) return true;
  return higher ? candidate > best : candidate < best;
}

}  // namespace mlalpha

#include "eval/folds.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/csv_write.h"
#include "data/fileio.h"

namespace mlalpha {
namespace {

using ojson = nlohmann::ordered_json;

ojson json_number(double v) { return std::isfinite(v) ? ojson(v) : ojson(nullptr); }

// The label of time index t, or "" without labels.
std::string time_at(const std::vector<std::string>& times, int t) {
  return t >= 0 && size_t(t) < times.size() ? times[t] : std::string();
}

void check_inputs(const std::vector<FoldReport>& folds, const std::vector<std::string>& times, const std::string& metric,
                  const std::filesystem::path& path) {
  metric_by_name(Metrics{}, metric);  // an unknown name fails before anything is written
  for (size_t i = 0; i < folds.size(); ++i) {
    require(folds[i].fold == int(i), path.string() + ": fold record " + std::to_string(i) + " is numbered " +
                                         std::to_string(folds[i].fold) + " (folds are numbered 0, 1, ... in order)");
    validate_split(folds[i].split, times.empty() ? folds[i].split.test_end : int(times.size()));
  }
}

ojson range_json(int b, int e, const std::vector<std::string>& times) {
  ojson j;
  j["begin"] = b;
  j["end"] = e;
  if (!times.empty()) {
    j["first_time"] = time_at(times, b);
    j["last_time"] = time_at(times, e - 1);
  }
  return j;
}

ojson metrics_json(const Metrics& m) {
  ojson j;
  for (const auto& name : metric_names()) j[name] = json_number(metric_by_name(m, name));
  ojson& q = j["quantile_means"] = ojson::array();
  for (double v : m.quantile_means) q.push_back(json_number(v));
  j["points"] = m.points;
  j["steps"] = m.steps;
  j["portfolio_steps"] = m.portfolio_steps;
  return j;
}

// Mean (or sample std) over the folds with a test result of each finite value.
Metrics fold_stat(const std::vector<FoldReport>& folds, bool stdev) {
  auto stat = [&](auto value) {
    std::vector<double> v;
    for (const FoldReport& f : folds)
      if (f.has_test) {
        const double x = value(f.test.mean);
        if (std::isfinite(x)) v.push_back(x);
      }
    if (v.empty() || (stdev && v.size() < 2)) return std::nan("");
    double m = 0;
    for (double x : v) m += x;
    m /= double(v.size());
    if (!stdev) return m;
    double ss = 0;
    for (double x : v) ss += (x - m) * (x - m);
    return std::sqrt(ss / double(v.size() - 1));
  };
  Metrics out;
  for (const MetricInfo& info : metric_table()) out.*info.field = stat([&](const Metrics& m) { return m.*info.field; });
  size_t Q = 0;
  for (const FoldReport& f : folds)
    if (f.has_test) Q = std::max(Q, f.test.mean.quantile_means.size());
  out.quantile_means.resize(Q);
  for (size_t g = 0; g < Q; ++g)
    out.quantile_means[g] =
        stat([&](const Metrics& m) { return g < m.quantile_means.size() ? m.quantile_means[g] : std::nan(""); });
  for (const FoldReport& f : folds)
    if (f.has_test)
      out.points += f.test.mean.points, out.steps += f.test.mean.steps, out.portfolio_steps += f.test.mean.portfolio_steps;
  return out;
}

}  // namespace

std::string fold_dir_name(int fold) { return "fold-" + std::to_string(fold); }

std::string fold_heading(const FoldReport& f, int folds) {
  return "walk-forward fold " + std::to_string(f.fold) + " (folds 0 to " + std::to_string(folds - 1) +
         ", fold 0 the earliest): " + f.split.to_string();
}

Metrics mean_test_metrics(const std::vector<FoldReport>& folds) { return fold_stat(folds, false); }
Metrics std_test_metrics(const std::vector<FoldReport>& folds) { return fold_stat(folds, true); }

Metrics metrics_from_json_text(const std::string& text) {
  const auto j = nlohmann::json::parse(text, nullptr, false);
  Metrics m;
  auto num = [&](const nlohmann::json& v) { return v.is_number() ? v.get<double>() : std::nan(""); };
  for (const MetricInfo& info : metric_table())
    m.*info.field = j.is_object() && j.contains(info.name) ? num(j[info.name]) : std::nan("");
  if (!j.is_object()) return m;
  if (j.contains("quantile_means") && j["quantile_means"].is_array())
    for (const auto& v : j["quantile_means"]) m.quantile_means.push_back(num(v));
  m.points = j.value("points", int64_t(0));
  m.steps = j.value("steps", int64_t(0));
  m.portfolio_steps = j.value("portfolio_steps", int64_t(0));
  return m;
}

void write_folds_csv(const std::filesystem::path& path, const std::vector<FoldReport>& folds,
                     const std::vector<std::string>& times, const std::string& metric) {
  check_inputs(folds, times, metric, path);
  std::vector<std::string> header = {
      "fold",           "train_begin",     "train_end",       "valid_begin",      "valid_end",
      "test_begin",     "test_end",        "train_first_time", "train_last_time", "valid_first_time",
      "valid_last_time", "test_first_time", "test_last_time",  "steps",           "best_step",
      "metric",         "best_value"};
  for (const auto& name : metric_names()) header.push_back("test_" + name);
  header.push_back("test_points");
  std::string s = csv_row(header);
  for (const FoldReport& f : folds) {
    const Split& p = f.split;
    const bool test_range = p.has_test();
    std::vector<std::string> cells = {std::to_string(f.fold),        std::to_string(p.train_begin),
                                      std::to_string(p.train_end),   std::to_string(p.valid_begin),
                                      std::to_string(p.valid_end),   test_range ? std::to_string(p.test_begin) : "",
                                      test_range ? std::to_string(p.test_end) : ""};
    const int ends[6] = {p.train_begin, p.train_end - 1, p.valid_begin, p.valid_end - 1,
                         test_range ? p.test_begin : -1, test_range ? p.test_end - 1 : -1};
    for (const int t : ends) cells.push_back(time_at(times, t));
    cells.push_back(std::to_string(f.steps));
    cells.push_back(std::to_string(f.best_step));
    cells.push_back(metric);
    cells.push_back(csv_number(f.best_value));
    for (const auto& name : metric_names()) cells.push_back(f.has_test ? csv_number(metric_by_name(f.test.mean, name)) : "");
    cells.push_back(f.has_test ? std::to_string(f.test.mean.points) : "");
    s += csv_row(cells);
  }
  write_file_atomic(path.string(), s);
}

void write_folds_json(const std::filesystem::path& path, const std::vector<FoldReport>& folds,
                      const std::vector<std::string>& times, const std::string& metric, const OosSummary* oos) {
  check_inputs(folds, times, metric, path);
  ojson j;
  j["metric"] = metric;
  ojson& arr = j["folds"] = ojson::array();
  int with_test = 0;
  for (const FoldReport& f : folds) {
    const Split& p = f.split;
    ojson r;
    r["fold"] = f.fold;
    r["train"] = range_json(p.train_begin, p.train_end, times);
    r["valid"] = range_json(p.valid_begin, p.valid_end, times);
    r["test"] = p.has_test() ? range_json(p.test_begin, p.test_end, times) : ojson(nullptr);
    r["steps"] = f.steps;
    r["best_step"] = f.best_step;
    r["best_value"] = json_number(f.best_value);
    r["test_metrics"] = f.has_test ? metrics_json(f.test.mean) : ojson(nullptr);
    if (f.has_test && f.test.per_target.size() > 1) {
      ojson& t = r["test_targets"] = ojson::array();
      for (const Metrics& m : f.test.per_target) t.push_back(metrics_json(m));
    }
    with_test += f.has_test;
    arr.push_back(std::move(r));
  }
  j["mean_test_metrics"] = metrics_json(mean_test_metrics(folds));
  j["std_test_metrics"] = metrics_json(std_test_metrics(folds));
  j["folds_with_test"] = with_test;
  if (oos) {
    j["oos_pred"] = std::filesystem::path(oos->file).filename().string();
    j["oos_metrics"] = metrics_json(oos->metrics.mean);
    if (oos->metrics.per_target.size() > 1) {
      ojson& t = j["oos_targets"] = ojson::array();
      for (const Metrics& m : oos->metrics.per_target) t.push_back(metrics_json(m));
    }
  }
  // Labels with invalid UTF-8 are written with U+FFFD rather than failing at the end of a long run.
  write_file_atomic(path.string(), j.dump(2, ' ', false, ojson::error_handler_t::replace) + "\n");
}

}  // namespace mlalpha

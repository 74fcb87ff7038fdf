#include "train/folds.h"

#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/fileio.h"

namespace mlalpha {
namespace {

using ojson = nlohmann::ordered_json;

// Shortest text that reads back as the same double; empty for NaN and ±Inf.
std::string csv_number(double v) {
  if (!std::isfinite(v)) return "";
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

// RFC 4180: quoted when it holds the delimiter, a quote or a line break.
std::string csv_text(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string q = "\"";
  for (const char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

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
  j["points"] = m.points;
  j["steps"] = m.steps;
  return j;
}

}  // namespace

std::string fold_dir_name(int fold) { return "fold-" + std::to_string(fold); }

std::string fold_heading(const FoldReport& f, int folds) {
  return "walk-forward fold " + std::to_string(f.fold) + " (folds 0 to " + std::to_string(folds - 1) +
         ", fold 0 the earliest): " + f.split.to_string();
}

Metrics mean_test_metrics(const std::vector<FoldReport>& folds) {
  Metrics out;
  auto avg = [&](double Metrics::*field) {
    double s = 0;
    int n = 0;
    for (const FoldReport& f : folds)
      if (f.has_test && std::isfinite(f.test.mean.*field)) s += f.test.mean.*field, ++n;
    return n ? s / n : std::nan("");
  };
  out.mse = avg(&Metrics::mse);
  out.ic = avg(&Metrics::ic);
  out.rank_ic = avg(&Metrics::rank_ic);
  out.icir = avg(&Metrics::icir);
  out.dir_acc = avg(&Metrics::dir_acc);
  for (const FoldReport& f : folds)
    if (f.has_test) out.points += f.test.mean.points, out.steps += f.test.mean.steps;
  return out;
}

void write_folds_csv(const std::filesystem::path& path, const std::vector<FoldReport>& folds,
                     const std::vector<std::string>& times, const std::string& metric) {
  check_inputs(folds, times, metric, path);
  std::string s =
      "fold,train_begin,train_end,valid_begin,valid_end,test_begin,test_end,"
      "train_first_time,train_last_time,valid_first_time,valid_last_time,test_first_time,test_last_time,"
      "steps,best_step,metric,best_value,test_mse,test_ic,test_rank_ic,test_icir,test_dir_acc,test_points\n";
  for (const FoldReport& f : folds) {
    const Split& p = f.split;
    const bool test_range = p.has_test();
    std::vector<std::string> cells = {std::to_string(f.fold),        std::to_string(p.train_begin),
                                      std::to_string(p.train_end),   std::to_string(p.valid_begin),
                                      std::to_string(p.valid_end),   test_range ? std::to_string(p.test_begin) : "",
                                      test_range ? std::to_string(p.test_end) : ""};
    const int ends[6] = {p.train_begin, p.train_end - 1, p.valid_begin, p.valid_end - 1,
                         test_range ? p.test_begin : -1, test_range ? p.test_end - 1 : -1};
    for (const int t : ends) cells.push_back(csv_text(time_at(times, t)));
    cells.push_back(std::to_string(f.steps));
    cells.push_back(std::to_string(f.best_step));
    cells.push_back(metric);
    cells.push_back(csv_number(f.best_value));
    for (const auto& name : metric_names()) cells.push_back(f.has_test ? csv_number(metric_by_name(f.test.mean, name)) : "");
    cells.push_back(f.has_test ? std::to_string(f.test.mean.points) : "");
    for (size_t i = 0; i < cells.size(); ++i) s += (i ? "," : "") + cells[i];
    s += "\n";
  }
  write_file_atomic(path.string(), s);
}

void write_folds_json(const std::filesystem::path& path, const std::vector<FoldReport>& folds,
                      const std::vector<std::string>& times, const std::string& metric) {
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
  j["folds_with_test"] = with_test;
  // Labels with invalid UTF-8 are written with U+FFFD rather than failing at the end of a long run.
  write_file_atomic(path.string(), j.dump(2, ' ', false, ojson::error_handler_t::replace) + "\n");
}

}  // namespace mlalpha

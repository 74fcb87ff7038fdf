// From the data settings to panels ready for training and evaluation (include/mlalpha/panel.h): load
// (synthetic / npy / csv), split chronologically (or walk-forward), slice, normalise with training-range
// statistics.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <vector>

#include "core/error.h"
#include "data/csv.h"
#include "data/normalize.h"
#include "data/npy.h"
#include "data/split.h"
#include "data/synthetic.h"
#include "data/targets.h"
#include "data/time_axis.h"
#include "mlalpha/panel.h"

namespace mlalpha {

namespace {

// The setting that names a missing or unreadable input file, before a reader says only its path.
void require_input_file(const char* key, const std::string& path) {
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  require(std::filesystem::exists(st), std::string(key) + " = '" + path + "': no such file" +
                                           (std::filesystem::path(path).is_relative()
                                                ? " (relative to the working directory, or to the folder of the TOML "
                                                  "file that sets it)"
                                                : ""));
  require(!std::filesystem::is_directory(st), std::string(key) + " = '" + path + "': is a directory, expected a file");
}

SplitTimes time_axis_of(const Panel& p) { return SplitTimes{p.times, p.time_values, p.times_are_dates, p.time_format}; }

}  // namespace

Panel load_panel(const DataConfig& d) {
  Panel p;
  if (d.source == "synthetic") {
    p = make_synthetic(d.synth);
  } else if (d.source == "npy") {
    require(!d.features.empty() && !d.targets.empty(), "data.source = 'npy' needs data.features and data.targets");
    require(d.time_format.empty(), "data.time_format = '" + d.time_format +
                                       "' is for CSV times; .npy files carry no time labels (leave it unset)");
    require_input_file("data.features", d.features);
    require_input_file("data.targets", d.targets);
    p = load_npy_panel({d.features, d.targets});
  } else if (d.source == "csv") {
    require(!d.csv.empty(), "data.source = 'csv' needs data.csv (the path of the long-format file)");
    require_input_file("data.csv", d.csv);
    CsvSpec spec;
    spec.path = d.csv;
    spec.time_column = d.time_column;
    spec.instrument_column = d.instrument_column;
    spec.feature_columns = d.feature_columns;
    spec.target_columns = d.target_columns;
    spec.delimiter = csv_delimiter_from_string(d.delimiter, "data.delimiter");
    spec.time_format = d.time_format;
    for (const std::string& t : d.target_columns)
      require(d.allow_target_features ||
                  std::find(d.feature_columns.begin(), d.feature_columns.end(), t) == d.feature_columns.end(),
              "data.target_columns: '" + t + "' is also in data.feature_columns, so the model would see the label it "
              "predicts; remove it from data.feature_columns (or set data.allow_target_features = true)");
    p = load_csv_panel(spec);
  } else {
    throw Error("data.source must be 'synthetic', 'npy' or 'csv', got '" + d.source + "'");
  }
  p.validate();
  return p;
}

std::vector<Split> make_splits(const SplitConfig& s, const Panel& p) {
  if (s.walk_forward_folds > 0) {
    WalkForwardSpec w;
    w.folds = s.walk_forward_folds;
    w.gap = s.spec.gap;
    w.test_size = s.walk_forward_test_size;
    w.valid_size = s.walk_forward_valid_size;
    w.train_size = s.walk_forward_train_size;
    return walk_forward(p.T, w);
  }
  return {make_split(s.spec, p.T, time_axis_of(p))};
}

Panel slice_panel(const Panel& p, int t0, int t1) {
  require(0 <= t0 && t0 < t1 && t1 <= p.T, "slice_panel: the range [" + std::to_string(t0) + ", " +
                                                std::to_string(t1) + ") is not inside [0, " + std::to_string(p.T) + ")");
  Panel out;
  out.N = p.N, out.T = t1 - t0, out.F = p.F, out.K = p.K;
  out.instruments = p.instruments;
  out.feature_names = p.feature_names;
  out.target_names = p.target_names;
  out.x.resize(size_t(p.N) * out.T * p.F);
  out.y.resize(size_t(p.N) * out.T * p.K);
  for (int i = 0; i < p.N; ++i) {
    std::copy_n(p.x.begin() + (size_t(i) * p.T + t0) * p.F, size_t(out.T) * p.F, out.x.begin() + size_t(i) * out.T * p.F);
    std::copy_n(p.y.begin() + (size_t(i) * p.T + t0) * p.K, size_t(out.T) * p.K, out.y.begin() + size_t(i) * out.T * p.K);
  }
  if (!p.times.empty()) out.times.assign(p.times.begin() + t0, p.times.begin() + t1);
  if (!p.time_values.empty()) out.time_values.assign(p.time_values.begin() + t0, p.time_values.begin() + t1);
  out.times_are_dates = p.times_are_dates;
  out.time_format = p.time_format;
  if (!p.input_rows.empty()) {
    out.input_rows.resize(size_t(p.N) * out.T);
    for (int i = 0; i < p.N; ++i)
      std::copy_n(p.input_rows.begin() + size_t(i) * p.T + t0, out.T, out.input_rows.begin() + size_t(i) * out.T);
  }
  return out;
}

FeatureStats feature_stats(const Panel& p, int t0, int t1) { return compute_feature_stats(p, t0, t1); }

Panel normalized(const Panel& p, const FeatureStats& stats) {
  Panel out = p;
  normalize_features(out, stats);
  return out;
}

FeatureStats fit_feature_stats(const Panel& p, const DataConfig& d, int t0, int t1) {
  check_preprocessing(d);
  FeatureStats s;
  if (d.feature_norm == "global") s = compute_feature_stats(p, t0, t1, d.nan_fill == "ffill");
  if (d.target_scale == "std") {
    require(0 <= t0 && t0 < t1 && t1 <= p.T, "data.target_scale: the training range [" + std::to_string(t0) + ", " +
                                                 std::to_string(t1) + ") is not inside [0, " + std::to_string(p.T) + ")");
    for (int k = 0; k < p.K; ++k) {
      double sum = 0, sq = 0;
      int64_t n = 0;
      for (int i = 0; i < p.N; ++i)
        for (int t = t0; t < t1; ++t) {
          const double v = p.y[(size_t(i) * p.T + t) * p.K + k];
          if (std::isfinite(v)) sum += v, ++n;
        }
      const double mean = n ? sum / double(n) : 0.0;
      for (int i = 0; i < p.N; ++i)
        for (int t = t0; t < t1; ++t) {
          const double v = p.y[(size_t(i) * p.T + t) * p.K + k];
          if (std::isfinite(v)) sq += (v - mean) * (v - mean);
        }
      const double sd = n ? std::sqrt(sq / double(n)) : 0.0;
      const std::string name = size_t(k) < p.target_names.size() ? "'" + p.target_names[size_t(k)] + "'"
                                                                 : "target " + std::to_string(k);
      require(sd > 0 && std::isfinite(sd) && float(sd) > 0,
              "data.target_scale = 'std': " + name + " is constant over the training range (" + std::to_string(n) +
                  " finite values, standard deviation 0), so there is no scale to divide by (and nothing to learn)");
      s.target_scale.push_back(float(sd));
    }
  }
  return s;
}

void scale_targets(Panel& p, const FeatureStats& stats) {
  if (stats.target_scale.empty()) return;
  require(stats.target_scale.size() == size_t(p.K), "scale_targets: " + std::to_string(stats.target_scale.size()) +
                                                        " target scales for K = " + std::to_string(p.K) + " targets");
  float* y = p.y.make_owned();
  for (size_t at = 0; at < p.y.size(); ++at) y[at] /= stats.target_scale[at % size_t(p.K)];
}

void unscale_predictions(std::vector<float>& pred, int K, const FeatureStats& stats) {
  if (stats.target_scale.empty()) return;
  require(stats.target_scale.size() == size_t(K), "unscale_predictions: " + std::to_string(stats.target_scale.size()) +
                                                      " target scales for K = " + std::to_string(K) + " targets");
  for (size_t at = 0; at < pred.size(); ++at) pred[at] *= stats.target_scale[at % size_t(K)];
}

uint8_t input_row(const Panel& p, int i, int t) {
  const size_t at = size_t(i) * p.T + t;
  if (!p.input_rows.empty()) return p.input_rows[at];
  uint8_t r = 0;
  const float* x = p.x.data() + at * p.F;
  const float* y = p.y.data() + at * p.K;
  for (int f = 0; f < p.F && !(r & kRowFeatures); ++f)
    if (std::isfinite(x[f])) r |= kRowFeatures;
  for (int k = 0; k < p.K && !(r & kRowTargets); ++k)
    if (std::isfinite(y[k])) r |= kRowTargets;
  return r;
}

Panel prepared(const Panel& p, const DataConfig& d, const FeatureStats& stats) {
  Panel out = p;
  if (out.input_rows.empty()) {  // read before the fill replaces the missing values
    out.input_rows.resize(size_t(p.N) * p.T);
    for (int i = 0; i < p.N; ++i)
      for (int t = 0; t < p.T; ++t) out.input_rows[size_t(i) * p.T + t] = input_row(p, i, t);
  }
  prepare_panel(out, d, stats);
  return out;
}

void require_finite_targets(const Panel& p, int t0, int t1, const std::string& what, const std::string& source) {
  require_valid_targets(p, t0, t1, what, source);
}

uint64_t panel_fingerprint(const Panel& p) {
  // FNV-1a over the shape, the value bytes and the labels: cheap, and any change of data shows.
  uint64_t h = 1469598103934665603ull;
  auto bytes = [&](const void* data, size_t n) {
    const unsigned char* c = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) h = (h ^ c[i]) * 1099511628211ull;
  };
  const int dims[4] = {p.N, p.T, p.F, p.K};
  bytes(dims, sizeof dims);
  bytes(p.x.data(), p.x.size() * sizeof(float));
  bytes(p.y.data(), p.y.size() * sizeof(float));
  for (const auto* labels : {&p.instruments, &p.times, &p.feature_names, &p.target_names})
    for (const auto& s : *labels) bytes(s.c_str(), s.size() + 1);
  return h;
}

void parse_panel_times(Panel& p, const std::string& time_format) {
  p.time_values.clear();
  p.times_are_dates = false;
  p.time_format = time_format;
  if (p.times.empty()) return;
  ParsedTimes parsed;
  try {
    parsed = parse_time_labels(p.times, time_format, [](size_t i) { return "times[" + std::to_string(i) + "]"; });
  } catch (const Error&) {
    if (!time_format.empty()) throw;  // a layout was asked for: every label must follow it
    p.time_format.clear();
    return;  // plain labels: no parsed axis
  }
  for (size_t t = 1; t < parsed.values.size(); ++t)
    require(parsed.values[t] > parsed.values[t - 1],
            "the times must be in chronological order: times[" + std::to_string(t) + "] = '" + p.times[t] +
                "' is not after times[" + std::to_string(t - 1) + "] = '" + p.times[t - 1] + "'");
  p.time_values = std::move(parsed.values);
  p.times_are_dates = parsed.are_dates;
}

TimeValues parse_times(const std::vector<std::string>& labels, const std::string& time_format, const std::string& what) {
  ParsedTimes parsed = parse_time_labels(labels, time_format, [&](size_t) { return what; });
  return {std::move(parsed.values), parsed.are_dates};
}

double periods_per_year(const Panel& p) {
  constexpr double kYear = 365.25 * 86400.0;  // seconds in a Julian year
  if (!p.times_are_dates || p.time_values.size() < 2) return std::numeric_limits<double>::quiet_NaN();
  // Counting steps over the span is right for calendars with holes (no weekends, no holidays); the median
  // spacing is the only estimate a short span allows.
  const double span = p.time_values.back() - p.time_values.front();
  if (span >= kYear / 4) return double(p.time_values.size() - 1) / (span / kYear);
  std::vector<double> gaps(p.time_values.size() - 1);
  for (size_t t = 1; t < p.time_values.size(); ++t) gaps[t - 1] = p.time_values[t] - p.time_values[t - 1];
  std::nth_element(gaps.begin(), gaps.begin() + gaps.size() / 2, gaps.end());
  const double median = gaps[gaps.size() / 2];
  return median > 0 ? kYear / median : std::numeric_limits<double>::quiet_NaN();
}

}  // namespace mlalpha

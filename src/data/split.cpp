#include "data/split.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/error.h"
#include "data/csv.h"
#include "data/time_axis.h"

namespace mlalpha {
namespace {

// A finite number exactly as the CSV reader reads one, so a boundary compares as the axis was ordered.
bool as_number(const std::string& s, double& v) { return parse_csv_number(s, v) && std::isfinite(v); }

std::string range(int b, int e) {
  std::string s = "[";  // built by appending: GCC 12 warns falsely (-Wrestrict) on "[" + std::to_string(b)
  s += std::to_string(b);
  s += ", ";
  s += std::to_string(e);
  s += ")";
  return s;
}

}  // namespace

SplitPoint SplitPoint::at_fraction(double f) {
  SplitPoint p;
  p.kind = Kind::fraction;
  p.fraction = f;
  return p;
}

SplitPoint SplitPoint::at_index(int64_t i) {
  SplitPoint p;
  p.kind = Kind::index;
  p.index = i;
  return p;
}

SplitPoint SplitPoint::at_time(std::string t) {
  SplitPoint p;
  p.kind = Kind::time;
  p.time = std::move(t);
  return p;
}

std::string SplitPoint::to_string() const {
  std::ostringstream s;
  switch (kind) {
    case Kind::fraction: s << "fraction " << fraction; break;
    case Kind::index: s << "index " << index; break;
    case Kind::time: s << "time '" << time << "'"; break;
  }
  return s.str();
}

std::string Split::to_string() const {
  std::string s = "train " + range(train_begin, train_end) + " valid " + range(valid_begin, valid_end);
  return s + (has_test() ? " test " + range(test_begin, test_end) : " test none");
}

int resolve_split_point(const SplitPoint& p, int T, const SplitTimes& axis, const std::string& field) {
  switch (p.kind) {
    case SplitPoint::Kind::fraction:
      require(std::isfinite(p.fraction) && p.fraction >= 0 && p.fraction <= 1,
              field + " = " + p.to_string() + " must be a fraction in [0, 1]");
      return int(std::llround(p.fraction * T));
    case SplitPoint::Kind::index:
      require(p.index >= 0 && p.index <= T,
              field + " = " + p.to_string() + " must be a time index in [0, T=" + std::to_string(T) + "]");
      return int(p.index);
    case SplitPoint::Kind::time: {
      const std::vector<std::string>& times = axis.labels;
      require(!times.empty(), field + " = " + p.to_string() +
                                  ": this panel has no time labels (.npy or synthetic data); split by index or fraction");
      require(times.size() == size_t(T), field + ": the panel has " + std::to_string(times.size()) +
                                             " time labels for T = " + std::to_string(T));
      ParsedTimes parsed;
      if (axis.values.size() == times.size()) {
        parsed.values = axis.values;
        parsed.are_dates = axis.are_dates;
      } else {
        parsed = parse_time_labels(times, axis.format, [&](size_t i) { return field + ": time label " + std::to_string(i); });
      }
      const std::string span = "'" + times.front() + "' to '" + times.back() + "'";
      double v = 0;
      if (!parsed.are_dates) {
        require(as_number(p.time, v), field + " = " + p.to_string() + " is not a number, but the time labels are (from " +
                                          span + "); give a number on that scale");
      } else if (!axis.format.empty()) {
        // The file's layout, or ISO 8601, which reads the same whatever the file's layout.
        require(parse_formatted_time(p.time, axis.format, v) || parse_iso8601(p.time, v),
                field + " = " + p.to_string() + " is not a date in the layout data.time_format = \"" + axis.format +
                    "\" (the time labels run from " + span + ") nor an ISO 8601 date (2020-01-31)");
      } else {
        require(parse_iso8601(p.time, v), field + " = " + p.to_string() +
                                              " is not an ISO 8601 date or datetime (e.g. \"2020-01-31\"), as the "
                                              "time labels are (from " + span + ")");
      }
      return int(std::lower_bound(parsed.values.begin(), parsed.values.end(), v) - parsed.values.begin());
    }
  }
  throw Error(field + ": unknown split point kind");
}

int resolve_split_point(const SplitPoint& p, int T, const std::vector<std::string>& times, const std::string& field) {
  return resolve_split_point(p, T, SplitTimes{times, {}, false, ""}, field);
}

Split make_split(const SplitSpec& spec, int T, const SplitTimes& times) {
  require(T >= 1, "split: the time axis is empty (T = " + std::to_string(T) + ")");
  require(spec.gap >= 0, "split.gap must be >= 0, got " + std::to_string(spec.gap));
  const int te = resolve_split_point(spec.train_end, T, times, "split.train_end");
  const int ve = resolve_split_point(spec.valid_end, T, times, "split.valid_end");
  const std::string tes = "split.train_end = " + spec.train_end.to_string() + " (index " + std::to_string(te) + ")";
  const std::string ves = "split.valid_end = " + spec.valid_end.to_string() + " (index " + std::to_string(ve) + ")";
  // A time point that lands outside the data reads best against the data's first and last time.
  const bool by_time = spec.train_end.kind == SplitPoint::Kind::time || spec.valid_end.kind == SplitPoint::Kind::time;
  const std::string axis = by_time && times.labels.size() == size_t(T)
                               ? " (the panel's times run from '" + times.labels.front() + "' to '" +
                                     times.labels.back() + "')"
                               : "";
  require(te >= 1, tes + " leaves the training range empty" + axis);
  Split s;
  s.train_begin = 0;
  s.train_end = te;
  s.valid_begin = te + spec.gap;
  s.valid_end = ve;
  require(s.valid_begin < ve, "the validation range " + range(s.valid_begin, ve) + " is empty: " + tes + ", gap " +
                                  std::to_string(spec.gap) + ", " + ves + "; valid_end must be after train_end + gap" +
                                  axis);
  s.test_end = T;
  s.test_begin = ve == T ? T : ve + spec.gap;  // valid_end = T means "no test range"
  require(ve == T || s.test_begin < T, "the test range " + range(s.test_begin, T) + " is empty: " + ves + ", gap " +
                                           std::to_string(spec.gap) + ", T = " + std::to_string(T) +
                                           " (set valid_end to the end of the data for no test range)" + axis);
  validate_split(s, T);
  return s;
}

Split make_split(const SplitSpec& spec, int T, const std::vector<std::string>& times) {
  return make_split(spec, T, SplitTimes{times, {}, false, ""});
}

void validate_split(const Split& s, int T) {
  const bool ok = 0 <= s.train_begin && s.train_begin < s.train_end && s.train_end <= s.valid_begin &&
                  s.valid_begin < s.valid_end && s.valid_end <= s.test_begin && s.test_begin <= s.test_end &&
                  s.test_end <= T;
  require(ok, "split " + s.to_string() + " on T = " + std::to_string(T) +
                  " is invalid: expected 0 <= train_begin < train_end <= valid_begin < valid_end <= test_begin <= "
                  "test_end <= T");
}

std::vector<Split> walk_forward(int T, const WalkForwardSpec& w) {
  const std::string given = "walk-forward (T = " + std::to_string(T) + ", folds = " + std::to_string(w.folds) +
                            ", test_size = " + std::to_string(w.test_size) + ", valid_size = " +
                            std::to_string(w.valid_size) + ", train_size = " + std::to_string(w.train_size) +
                            ", gap = " + std::to_string(w.gap) + ")";
  require(w.folds >= 1, given + ": folds must be >= 1");
  require(w.test_size >= 0 && w.valid_size >= 0 && w.train_size >= 0 && w.gap >= 0,
          given + ": sizes and gap must be >= 0 (0 = automatic size / expanding window)");
  const int test = w.test_size > 0 ? w.test_size : int((int64_t(T) - 2 * int64_t(w.gap)) / (int64_t(w.folds) + 2));
  const int valid = w.valid_size > 0 ? w.valid_size : test;
  require(test >= 1, given + ": the automatic test block (T − 2·gap) / (folds + 2) is empty; use fewer folds or more data");
  // Fold 0 is the earliest; its train range must still hold at least one step (a full window when rolling).
  const int64_t first_test_begin = int64_t(T) - int64_t(w.folds) * test;
  const int64_t first_train_end = first_test_begin - w.gap - valid - w.gap;
  const int64_t need = first_train_end - (w.train_size > 0 ? w.train_size : 1);
  require(need >= 0, given + ": fold 0 would need " + std::to_string(int64_t(T) - need) +
                         " time steps (" + (w.train_size > 0 ? "train_size" : "at least one train step") +
                         " + gap + valid + gap + folds × test), the data has T = " + std::to_string(T));
  std::vector<Split> folds;
  for (int k = 0; k < w.folds; ++k) {
    Split s;
    s.test_begin = int(first_test_begin + int64_t(k) * test);
    s.test_end = s.test_begin + test;
    s.valid_end = s.test_begin - w.gap;
    s.valid_begin = s.valid_end - valid;
    s.train_end = s.valid_begin - w.gap;
    s.train_begin = w.train_size > 0 ? s.train_end - w.train_size : 0;
    validate_split(s, T);
    folds.push_back(s);
  }
  return folds;
}

}  // namespace mlalpha

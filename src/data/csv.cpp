#include "data/csv.h"

#include <algorithm>
#include <cfloat>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cctype>
#include <new>
#include <numeric>
#include <unordered_map>

#include "core/error.h"
#include "core/suggest.h"
#include "data/csv_records.h"
#include "data/fileio.h"
#include "data/time_axis.h"

namespace mlalpha {

bool parse_csv_number(std::string_view s, double& v) {
  if (!s.empty() && s.front() == '+') {
    s.remove_prefix(1);
    if (s.empty() || s.front() == '+' || s.front() == '-') return false;
  }
  if (s.empty()) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (end != s.data() + s.size()) return false;
  if (ec == std::errc::result_out_of_range) {
    const std::string copy(s);  // strtod says which way it went out of range
    v = std::strtod(copy.c_str(), nullptr);
    return true;
  }
  return ec == std::errc();
}

namespace {

struct SvHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

// Distinct labels in order of first appearance, each with a dense id and the line it first appeared on.
struct Interner {
  std::unordered_map<std::string, int, SvHash, std::equal_to<>> ids;
  std::vector<std::string> labels;
  std::vector<int64_t> first_line;
  std::string last;  // long-format files repeat the same time row after row: skip the hash then
  int last_id = -1;

  int id(std::string_view s, int64_t line) {
    if (last_id >= 0 && s == last) return last_id;
    auto it = ids.find(s);
    if (it == ids.end()) {
      it = ids.emplace(std::string(s), int(labels.size())).first;
      labels.emplace_back(s);
      first_line.push_back(line);
    }
    last.assign(s);
    return last_id = it->second;
  }
};

// Ranks the instrument labels: numerically when every label is a finite number (ties by string), else
// bytewise; never merged. Returns the slot of each label id; `slot_labels` gets the labels in slot order.
std::vector<int> order_instruments(const std::vector<std::string>& labels, std::vector<std::string>& slot_labels) {
  const size_t n = labels.size();
  std::vector<double> num(n);
  bool numeric = true;
  for (size_t i = 0; i < n && numeric; ++i)
    numeric = parse_csv_number(labels[i], num[i]) && std::isfinite(num[i]);
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    if (numeric && num[a] != num[b]) return num[a] < num[b];
    return labels[a] < labels[b];
  });
  std::vector<int> slot(n);
  slot_labels.clear();
  for (size_t r = 0; r < n; ++r) {
    slot[order[r]] = int(r);
    slot_labels.push_back(labels[order[r]]);
  }
  return slot;
}

// Orders the time labels by their parsed values (time_axis.h). Equal values ("1" and "1.0", or
// "2020-01-31" and "2020-01-31T00:00:00Z") are one time step labelled with the first spelling seen: ids
// are in order of first appearance. Fills p.times, p.time_values, p.times_are_dates.
std::vector<int> order_times(const Interner& times, const std::string& format, const std::string& name, Panel& p) {
  const ParsedTimes parsed = parse_time_labels(times.labels, format, [&](size_t i) {
    return name + ":" + std::to_string(times.first_line[i]);
  });
  const size_t n = times.labels.size();
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    if (parsed.values[a] != parsed.values[b]) return parsed.values[a] < parsed.values[b];
    return a < b;
  });
  std::vector<int> slot(n);
  p.times.clear();
  p.time_values.clear();
  for (size_t r = 0; r < n; ++r) {
    const int id = order[r];
    if (r == 0 || parsed.values[id] != p.time_values.back()) {
      p.times.push_back(times.labels[id]);
      p.time_values.push_back(parsed.values[id]);
    }
    slot[id] = int(p.times.size()) - 1;
  }
  p.times_are_dates = parsed.are_dates;
  return slot;
}

// The delimiters people use, for the hint when the configured one does not split the file.
constexpr char kCommonDelimiters[] = {',', '\t', ';', '|'};

// The common delimiter other than `delim` that occurs most often in `line` (0: none occurs).
char likely_delimiter(std::string_view line, char delim) {
  char best = 0;
  size_t best_n = 0;
  for (const char c : kCommonDelimiters) {
    const size_t n = size_t(std::count(line.begin(), line.end(), c));
    if (c != delim && n > best_n) best = c, best_n = n;
  }
  return best;
}

// The fields of `line` split at `delim`, trimmed (no quote handling: for hints only).
std::vector<std::string_view> split_plain(std::string_view line, char delim) {
  std::vector<std::string_view> out;
  for (size_t b = 0;;) {
    const size_t e = line.find(delim, b);
    out.push_back(trim(line.substr(b, e == std::string_view::npos ? std::string_view::npos : e - b)));
    if (e == std::string_view::npos) return out;
    b = e + 1;
  }
}

// The checks that need no header; the column names are checked against the header in parse_csv_panel.
void check_spec(const CsvSpec& spec) {
  require(!spec.time_column.empty(), "data.time_column is empty: name the column that holds the times");
  check_csv_delimiter(spec.delimiter, "data.delimiter");
  require(spec.instrument_column != spec.time_column,
          "data.time_column and data.instrument_column are both '" + spec.time_column +
              "': name two different columns (or set data.instrument_column = \"\" for a single series)");
  auto unique = [](const std::vector<std::string>& v, const char* key) {
    for (size_t i = 0; i < v.size(); ++i)
      for (size_t j = 0; j < i; ++j)
        require(v[i] != v[j], std::string(key) + " lists '" + v[i] + "' twice");
  };
  unique(spec.feature_columns, "data.feature_columns");
  unique(spec.target_columns, "data.target_columns");
}

// Column names a time or instrument column often has, for the hint when the configured one is missing and
// no header name is close to it.
constexpr const char* kTimeNames[] = {"date", "datetime", "timestamp", "time", "dt", "trade_date", "day"};
constexpr const char* kInstrumentNames[] = {"instrument", "ticker", "symbol", "asset", "code", "permno", "secid",
                                            "stock", "id"};

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// "; did you mean 'date'?" for a column name not in the header, or "": the same name in another case, then
// (for the time and instrument columns) a header name such columns usually have, then the most similar name.
std::string column_hint(const std::string& col, const std::vector<std::string>& header, const char* key) {
  auto named = [&](const std::string& want) {
    for (const std::string& h : header)
      if (lower(h) == want) return h;
    return std::string();
  };
  auto by_role = [&](const auto& names) {
    for (const char* want : names)
      if (std::string h = named(want); !h.empty()) return h;
    return std::string();
  };
  const std::string k(key);
  std::string best = named(lower(col));
  if (best.empty() && k == "data.time_column") best = by_role(kTimeNames);
  if (best.empty() && k == "data.instrument_column") best = by_role(kInstrumentNames);
  if (best.empty()) best = closest_name(col, header);
  return best.empty() ? "" : "; did you mean '" + best + "'?";
}

// "date, ticker, close, ..." (at most 30 names).
std::string header_list(const std::vector<std::string>& header) {
  std::string list;
  for (size_t i = 0; i < header.size() && i < 30; ++i) list += (i == 0 ? "" : ", ") + header[i];
  if (header.size() > 30) list += ", ... (" + std::to_string(header.size()) + " columns)";
  return list;
}

struct Row {
  int time, instrument;
  int64_t line;
};

}  // namespace

std::string describe_csv_delimiter(char c) {
  if (c == '\t') return "tab ('\\t')";
  if (c == ' ') return "space (' ')";
  if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "byte 0x%02x", unsigned(static_cast<unsigned char>(c)));
    return buf;
  }
  return std::string("'") + c + "'";
}

void check_csv_delimiter(char c, const std::string& what) {
  const bool line_end = c == '\n' || c == '\r';
  const bool in_numbers = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '+';
  require(c != '"' && !line_end && c != '\0' && !in_numbers,
          what + " " + describe_csv_delimiter(c) + " cannot be used: it must not be a quote, a line end, NUL, a letter, "
                 "a digit or one of . + - (they occur inside cells); use e.g. ',', tab or ';'");
}

char csv_delimiter_from_string(std::string_view s, const std::string& what) {
  if (s == "tab" || s == "\\t") return '\t';
  require(s.size() == 1, what + " must be one character (e.g. \",\", \"\\t\" or \"tab\" for TSV, \";\"), got '" +
                             std::string(s.substr(0, 40)) + "' (" + std::to_string(s.size()) + " characters)");
  check_csv_delimiter(s[0], what);
  return s[0];
}

int find_csv_column(const CsvHeader& h, const std::string& col, const char* key) {
  const std::vector<std::string>& header = h.names;
  const bool list = std::string_view(key).find("columns") != std::string_view::npos;
  const std::string setting = list ? std::string(key) + ": '" + col + "'" : std::string(key) + " = '" + col + "'";
  const auto it = std::find(header.begin(), header.end(), col);
  if (it == header.end()) {
    // A header that another common delimiter splits into the wanted column: the delimiter is wrong.
    const char guess = likely_delimiter(h.line, h.delimiter);
    if (guess != 0) {
      const std::vector<std::string_view> alt = split_plain(h.line, guess);
      if (std::find(alt.begin(), alt.end(), col) != alt.end())
        throw Error(h.file + ":" + std::to_string(h.lineno) + ": " + setting + " is not in the header split at " +
                    describe_csv_delimiter(h.delimiter) + " (" + std::to_string(header.size()) +
                    (header.size() == 1 ? " column" : " columns") + "), but the header line looks " +
                    describe_csv_delimiter(guess) + "-separated: set data.delimiter to " + describe_csv_delimiter(guess));
    }
    throw Error(setting + " is not a column of " + h.file + " (header: " + header_list(header) + ")" +
                column_hint(col, header, key));
  }
  const auto again = std::find(it + 1, header.end(), col);
  if (again != header.end())
    throw Error(h.file + ":" + std::to_string(h.lineno) + ": column '" + col + "' appears twice in the header (columns " +
                std::to_string(it - header.begin() + 1) + " and " + std::to_string(again - header.begin() + 1) +
                "), so " + setting + " is ambiguous; rename one of them");
  return int(it - header.begin());
}

std::string csv_field_count_error(const CsvHeader& h, int64_t line, std::string_view raw, size_t fields) {
  std::string hint;
  const char guess = likely_delimiter(raw, h.delimiter);
  if (guess != 0 && split_plain(raw, guess).size() == h.names.size())
    hint = " (the line looks " + describe_csv_delimiter(guess) + "-separated, the file's delimiter is " +
           describe_csv_delimiter(h.delimiter) + ")";
  return h.file + ":" + std::to_string(line) + ": " + std::to_string(fields) + " fields, the header has " +
         std::to_string(h.names.size()) + hint;
}

float csv_value(std::string_view c, const std::string& where) {
  double v;
  if (!parse_csv_number(c, v)) {
    if (!is_missing(c))
      throw Error(where + ": '" + std::string(c.substr(0, 80)) + "' is not a number (expected a number, an empty cell, NaN or NA)");
    return NAN;
  }
  if (std::isinf(v) || (std::isfinite(v) && std::abs(v) > FLT_MAX)) {
    const bool literal_inf = std::isinf(v) && (c.find_first_of("iI") != std::string_view::npos);
    throw Error(where + ": '" + std::string(c.substr(0, 80)) + "' is " +
                (literal_inf ? "infinite" : "outside the float32 range") + " (values must be finite or missing)");
  }
  return float(v);
}

Panel parse_csv_panel(std::string_view text, const CsvSpec& spec, const std::string& name) {
  check_spec(spec);
  if (text.empty()) throw Error(name + ": file is empty");
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);  // UTF-8 byte-order mark (Excel)

  CsvRecords records(text, spec.delimiter, name);
  std::vector<std::string_view> cells;
  if (!records.next(cells)) throw Error(name + ": no header row (the file holds only blank lines)");
  std::vector<std::string> header;
  for (const std::string_view c : cells) header.emplace_back(trim(c));
  const std::string_view header_line = records.raw();
  const int64_t header_lineno = records.line();
  const CsvHeader head{header, std::string(header_line), header_lineno, spec.delimiter, name};
  auto column = [&](const std::string& col, const char* key) { return find_csv_column(head, col, key); };
  require(!spec.feature_columns.empty(), "data.feature_columns is empty: list the feature columns of " + name +
                                             " (header: " + header_list(header) + ")");
  require(!spec.target_columns.empty(), "data.target_columns is empty: list the target columns of " + name +
                                            " (header: " + header_list(header) + ")");
  const int time_col = column(spec.time_column, "data.time_column");
  const int inst_col = spec.instrument_column.empty() ? -1 : column(spec.instrument_column, "data.instrument_column");
  const int F = int(spec.feature_columns.size()), K = int(spec.target_columns.size());
  std::vector<int> value_cols;  // features then targets
  for (const std::string& c : spec.feature_columns) value_cols.push_back(column(c, "data.feature_columns"));
  for (const std::string& c : spec.target_columns) value_cols.push_back(column(c, "data.target_columns"));

  // Pass 1: read every row, keeping its time/instrument ids, its line and its values.
  Interner times, instruments;
  std::vector<Row> rows;
  std::vector<float> values;  // rows × (F + K)
  while (records.next(cells)) {
    const int64_t line = records.line();
    auto where = [&](int col) { return name + ":" + std::to_string(line) + ": column '" + header[col] + "'"; };
    if (cells.size() != header.size()) throw Error(csv_field_count_error(head, line, records.raw(), cells.size()));
    const std::string_view t = trim(cells[time_col]);
    if (t.empty()) throw Error(where(time_col) + ": the time is empty");
    int inst = 0;
    if (inst_col >= 0) {
      const std::string_view s = trim(cells[inst_col]);
      if (s.empty()) throw Error(where(inst_col) + ": the instrument is empty");
      inst = instruments.id(s, line);
    }
    rows.push_back({times.id(t, line), inst, line});
    for (size_t j = 0; j < value_cols.size(); ++j) {
      const std::string_view c = trim(cells[value_cols[j]]);
      double v;
      // The common case without building a message; csv_value reads the rest and names the cell.
      values.push_back(parse_csv_number(c, v) && std::isfinite(v) && std::abs(v) <= FLT_MAX ? float(v)
                                                                                             : csv_value(c, where(value_cols[j])));
    }
  }
  if (rows.empty()) throw Error(name + ": no data rows after the header");

  // Pass 2: place the rows on the sorted (instrument, time) grid; missing cells stay NaN.
  Panel p;
  const std::vector<int> time_slot = order_times(times, spec.time_format, name, p);
  p.time_format = spec.time_format;
  std::vector<std::string> inst_labels;
  const std::vector<int> inst_slot =
      inst_col >= 0 ? order_instruments(instruments.labels, inst_labels) : std::vector<int>{0};
  p.N = inst_col >= 0 ? int(inst_labels.size()) : 1;
  p.T = int(p.times.size());
  p.F = F;
  p.K = K;
  if (inst_col >= 0) p.instruments = std::move(inst_labels);
  p.feature_names = spec.feature_columns;
  p.target_names = spec.target_columns;
  const size_t cells_nt = size_t(p.N) * size_t(p.T);
  std::vector<int64_t> seen;  // line of the row that filled each (instrument, time); 0 = none yet
  try {
    p.x.assign(cells_nt * F, NAN);
    p.y.assign(cells_nt * K, NAN);
    seen.assign(cells_nt, 0);
  } catch (const std::bad_alloc&) {
    throw Error(name + ": the panel of " + std::to_string(p.N) + " instruments × " + std::to_string(p.T) +
                " times × " + std::to_string(F + K) + " columns does not fit in memory");
  }
  const size_t stride = size_t(F + K);
  for (size_t r = 0; r < rows.size(); ++r) {
    const size_t cell = size_t(inst_slot[rows[r].instrument]) * p.T + time_slot[rows[r].time];
    if (seen[cell] != 0)
      throw Error(name + ":" + std::to_string(rows[r].line) + ": duplicate row for time '" + times.labels[rows[r].time] +
                  "'" + (inst_col >= 0 ? ", instrument '" + instruments.labels[rows[r].instrument] + "'" : "") +
                  " (first seen on line " + std::to_string(seen[cell]) + ")");
    seen[cell] = rows[r].line;
    const float* v = values.data() + r * stride;
    std::copy_n(v, F, p.x.begin() + cell * F);
    std::copy_n(v + F, K, p.y.begin() + cell * K);
  }
  return p;
}

Panel load_csv_panel(const CsvSpec& spec) {
  require(!spec.path.empty(), "data.csv is empty: give the path of the long-format file");
  const std::string text = read_file_bytes(spec.path);
  return parse_csv_panel(text, spec, spec.path);
}

}  // namespace mlalpha
